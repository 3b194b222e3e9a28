"""What a trace read produced: the jobs, and an exact account of every record skipped or changed.

Nothing is dropped or altered silently.  A reader reports each record it leaves out with
:meth:`RecordLog.skip` and each record it keeps but had to change (a guessed time limit, a decoded
memory value, ...) with :meth:`RecordLog.adjust`, under a short stable *reason* that becomes a key of
:attr:`TraceResult.skipped` / :attr:`TraceResult.adjusted`.  In strict mode the first such record
raises :class:`InputError` with the file, 1-based line and field instead.

Invariant kept by every reader: ``records_read == kept records + sum(skipped.values())``, where a
kept record gives one job, except an sacct array range record (``123_[1-3]``) that gives one job per
task (counted under the adjusted reason ``"array range expanded"``).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from operator import attrgetter

from greenslurm.clustermodel.cluster import Cluster
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job import JobSpec


@dataclass
class TraceResult:
    """Jobs of one trace file, sorted by submit time (ties keep file order), plus the read's account.

    ``examples`` maps each skip/adjust reason to the first place it happened
    (``"file:line: field X: detail"``), so a report can point the user at a record to look at.
    """

    jobs: list[JobSpec]
    path: str
    format: str
    header: dict[str, str]
    records_read: int
    skipped: collections.Counter
    adjusted: collections.Counter
    examples: dict[str, str] = field(default_factory=dict)

    def cluster_hint(self) -> Cluster | None:
        """SWF only: the machine the header describes (``MaxNodes``/``MaxProcs``), else None."""
        if self.format != "swf" or not ({"MaxNodes", "MaxProcs"} & self.header.keys()):
            return None
        return Cluster.from_swf_header(self.header, path=self.path)

    def summary(self) -> str:
        """A few lines for a person: counts, then each reason with its count and first example."""
        lines = [f"{self.path} ({self.format}): {self.records_read} records, {len(self.jobs)} jobs, "
                 f"{sum(self.skipped.values())} skipped, {sum(self.adjusted.values())} adjusted"]
        for title, counter in (("skipped", self.skipped), ("adjusted", self.adjusted)):
            for reason, count in counter.most_common():
                lines.append(f"  {title} {count:>7}  {reason}   (first: {self.examples.get(reason, '?')})")
        return "\n".join(lines)


class RecordLog:
    """Counts records, skips and adjustments for one file; raises on the first one when strict.

    >>> log = RecordLog("t.swf", strict=False)
    >>> log.skip("runtime unknown", 3, "run_time", "run time is -1")
    >>> log.skipped, log.examples["runtime unknown"]
    (Counter({'runtime unknown': 1}), 't.swf:3: field run_time: run time is -1')
    >>> RecordLog("t.swf", strict=True).skip("runtime unknown", 3, "run_time", "run time is -1")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: t.swf:3: field run_time: run time is -1 (strict mode: the record would be skipped as 'runtime unknown')
    """

    def __init__(self, path: str, strict: bool = False) -> None:
        self.path = path
        self.strict = strict
        self.records = 0
        self.skipped: collections.Counter = collections.Counter()
        self.adjusted: collections.Counter = collections.Counter()
        self.examples: dict[str, str] = {}

    def skip(self, reason: str, line: int | None, field: str | None = None, detail: str | None = None) -> None:
        """Leave a record out (count it), or raise in strict mode."""
        self._note("skipped", self.skipped, reason, line, field, detail)

    def adjust(self, reason: str, line: int | None, field: str | None = None, detail: str | None = None) -> None:
        """Keep a record that had to be changed (count it), or raise in strict mode."""
        self._note("adjusted", self.adjusted, reason, line, field, detail)

    def _note(self, kind: str, counter: collections.Counter, reason: str, line: int | None,
              field: str | None, detail: str | None) -> None:
        if self.strict:
            raise InputError(f"{detail or reason} (strict mode: the record would be {kind} as {reason!r})",
                             path=self.path, line=line, field=field)
        counter[reason] += 1
        if reason not in self.examples:
            self.examples[reason] = str(InputError(detail or reason, path=self.path, line=line, field=field))

    def result(self, jobs: list[JobSpec], fmt: str, header: dict[str, str] | None = None) -> TraceResult:
        """The finished read; InputError when the file held no data record at all."""
        if self.records == 0:
            raise InputError("no job records found (only comments, headers or blank lines)", path=self.path)
        jobs.sort(key=attrgetter("submit_s"))   # stable: equal submit times keep file order
        return TraceResult(jobs=jobs, path=self.path, format=fmt, header=dict(header or {}),
                           records_read=self.records, skipped=self.skipped, adjusted=self.adjusted,
                           examples=self.examples)
