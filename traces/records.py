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
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from greenslurm.clustermodel.cluster import Cluster
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job import JobSpec

if TYPE_CHECKING:
    from greenslurm.clustermodel.job_table import JobTable


# What a job record can hold and still describe something that happened.  A record beyond these is
# skipped under its own reason (an error under strict mode), never replayed: a runtime of 1e300 s
# made every time after it inf and every figure nan.
MAX_DURATION_S = 10 * 365.25 * 86400     # 10 years: no batch job ran longer (and no trace spans as much)
# A time limit is a request, and sites write "forever" as a large sentinel (LLNL Atlas: 23.4 years):
# a century is beyond every one seen, and still far from where time sums lose their seconds.
MAX_LIMIT_S = 100 * 365.25 * 86400
MAX_SUBMIT_S = 253_402_300_799.0         # 9999-12-31T23:59:59 UTC, the last time sacct and ISO 8601 write
MAX_JOB_CPUS = 100_000_000               # ten times the largest machine built (Sunway TaihuLight: 10.6 M cores)


def unphysical(job: JobSpec) -> tuple[str, str, str] | None:
    """(reason, field, detail) when ``job`` cannot have happened, else None.  A pod without an end
    (requested time inf, runtime None) runs until the trace ends: that is allowed.

    >>> unphysical(JobSpec("1", submit_s=0.0, requested_time_s=3600.0, runtime_s=60.0, cpus=4)) is None
    True
    >>> unphysical(JobSpec("2", submit_s=0.0, requested_time_s=1e300, runtime_s=1e300, cpus=4))[0]
    'runtime beyond 10 years'
    >>> unphysical(JobSpec("3", submit_s=0.0, requested_time_s=math.inf, runtime_s=None, cpus=4)) is None
    True
    """
    if job.runtime_s is not None and not job.runtime_s <= MAX_DURATION_S:
        return ("runtime beyond 10 years", "runtime",
                f"job {job.job_id} ran {job.runtime_s:g} s, more than 10 years ({MAX_DURATION_S:g} s)")
    forever = job.runtime_s is None and job.requested_time_s == math.inf
    if not (job.requested_time_s <= MAX_LIMIT_S or forever):
        return ("time limit beyond 100 years", "time limit",
                f"job {job.job_id} asks for {job.requested_time_s:g} s, more than 100 years ({MAX_LIMIT_S:g} s)")
    if job.submit_s < 0:                 # a date before 1970 (time 0 of Slurm's clock), e.g. year 1
        return ("submit time before 1970", "submit",
                f"job {job.job_id} submitted at {job.submit_s:g} s, before 1970-01-01 (0 s)")
    if not job.submit_s <= MAX_SUBMIT_S:
        return ("submit time beyond the year 9999", "submit",
                f"job {job.job_id} submitted at {job.submit_s:g} s, after 9999-12-31 ({MAX_SUBMIT_S:g} s)")
    if job.cpus > MAX_JOB_CPUS:
        return ("more CPUs than any machine", "cpus",
                f"job {job.job_id} asks for {job.cpus:g} CPUs, more than {MAX_JOB_CPUS:,} (10 x the largest machine)")
    if job.deadline_s is not None and not math.isfinite(job.deadline_s):
        return ("deadline not finite", "deadline", f"job {job.job_id} has deadline {job.deadline_s}")
    return None


def suspect_rows(runtime_s, requested_time_s, submit_s, cpus):
    """The rows of job columns (numpy arrays) that :func:`unphysical` may refuse (NaN fails every
    comparison); for a job with a run time and no deadline (an SWF record) exactly those it refuses.

    >>> import numpy as np
    >>> suspect_rows(np.array([5.0, 1e300, np.nan]), np.array([9.0] * 3), np.zeros(3), np.ones(3)).tolist()
    [False, True, True]
    """
    suspect = ~(runtime_s <= MAX_DURATION_S) | ~(requested_time_s <= MAX_LIMIT_S)
    suspect |= ~((0 <= submit_s) & (submit_s <= MAX_SUBMIT_S))
    suspect |= cpus > MAX_JOB_CPUS
    return suspect


def repeated_job_ids(jobs: Sequence[JobSpec]) -> tuple[int, str | None]:
    """How many job ids the kept jobs hold more than once, and the first such id in the jobs' order.
    Each record stays a job of its own (a real export may repeat an id: ``sacct --duplicates``,
    ids wrapping around); the count is for the reader's report, so that comparisons keyed by job
    id are read with care.

    >>> repeated_job_ids([JobSpec("7", 0.0, 10.0), JobSpec("8", 1.0, 10.0), JobSpec("7", 2.0, 10.0)])
    (1, '7')
    >>> repeated_job_ids([JobSpec("7", 0.0, 10.0)])
    (0, None)
    """
    table = getattr(jobs, "table", None)
    if table is not None and table.job_id.dtype.kind == "i":
        import numpy as np       # the command line's help and errors load no numpy
        ids = table.job_id
        _, first_rows, counts = np.unique(ids, return_index=True, return_counts=True)
        repeated = counts > 1
        if not repeated.any():
            return 0, None
        return int(repeated.sum()), str(ids[int(first_rows[repeated].min())])
    counts = collections.Counter(job.job_id for job in jobs)
    repeated_ids = [job_id for job_id, count in counts.items() if count > 1]
    return len(repeated_ids), (repeated_ids[0] if repeated_ids else None)


@dataclass
class TraceResult:
    """Jobs of one trace file, sorted by submit time (ties keep file order), plus the read's account.

    ``examples`` maps each skip/adjust reason to the first place it happened
    (``"file:line: field X: detail"``), so a report can point the user at a record to look at.

    A reader that reads into columns (SWF) gives ``jobs`` as a read-only sequence over a
    :class:`~greenslurm.clustermodel.job_table.JobTable` that builds each ``JobSpec`` when asked
    for; :attr:`table` is that table (None for a list of jobs).
    """

    jobs: Sequence[JobSpec]
    path: str
    format: str
    header: dict[str, str]
    records_read: int
    skipped: collections.Counter
    adjusted: collections.Counter
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def table(self):
        """The jobs as a :class:`~greenslurm.clustermodel.job_table.JobTable` when the reader read
        them into columns, else None."""
        return getattr(self.jobs, "table", None)

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

    def __init__(self, path: str, strict: bool = False, limit: int | None = None) -> None:
        self.path = path
        self.strict = strict
        # keep the first ``limit`` jobs of the file (see read_trace): a streaming reader stops at the
        # record that brings its kept jobs to it; the result keeps that many, in file order, then sorts
        self.limit = limit
        self._counted_jobs = self._physical_jobs = 0     # what full() has looked at and kept
        self.records = 0
        self.skipped: collections.Counter = collections.Counter()
        self.adjusted: collections.Counter = collections.Counter()
        self.examples: dict[str, str] = {}

    def full(self, jobs: list[JobSpec]) -> bool:
        """Whether ``jobs`` (the jobs kept so far, in file order) reach the limit: the reader stops
        reading after the record that made them (a job :func:`unphysical` refuses does not count)."""
        if self.limit is None:
            return False
        physical = self._physical_jobs + sum(1 for job in jobs[self._counted_jobs:] if unphysical(job) is None)
        self._counted_jobs, self._physical_jobs = len(jobs), physical
        return physical >= self.limit

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
        """The finished read; InputError when the file held no data record at all.  A job that
        cannot have happened (:func:`unphysical`) is skipped here, for every reader alike."""
        if self.records == 0:
            raise InputError("no job records found (only comments, headers or blank lines)", path=self.path)
        kept = []
        for job in jobs:
            problem = unphysical(job)
            if problem is None:
                kept.append(job)
            else:
                reason, name, detail = problem
                self.skip(reason, job.source_line or None, name, detail)
        jobs = kept if self.limit is None else kept[:self.limit]
        jobs.sort(key=attrgetter("submit_s"))   # stable: equal submit times keep file order
        return TraceResult(jobs=jobs, path=self.path, format=fmt, header=dict(header or {}),
                           records_read=self.records, skipped=self.skipped, adjusted=self.adjusted,
                           examples=self.examples)

    def table_result(self, table: JobTable, fmt: str, header: dict[str, str] | None = None) -> TraceResult:
        """:meth:`result` for jobs read into a table (in file order): the same checks, skips in
        the same order, the same sort; ``jobs`` is the table's read-only sequence of ``JobSpec``."""
        import numpy as np       # the command line's help and errors load no numpy
        if self.records == 0:
            raise InputError("no job records found (only comments, headers or blank lines)", path=self.path)
        # the rows unphysical() may refuse (NaN fails every comparison), then its verdict on each
        suspect = suspect_rows(table.runtime_s, table.requested_time_s, table.submit_s, table.cpus)
        keep = np.ones(len(table), dtype=bool)
        for row in np.flatnonzero(suspect).tolist():
            job = table.spec(row)
            problem = unphysical(job)
            if problem is not None:
                reason, name, detail = problem
                self.skip(reason, job.source_line or None, name, detail)
                keep[row] = False
        rows = np.flatnonzero(keep)
        if self.limit is not None:
            rows = rows[:self.limit]
        order = rows[np.argsort(table.submit_s[rows], kind="stable")]   # equal submit times keep file order
        if len(order) != len(table) or (len(order) and not (order[1:] > order[:-1]).all()):
            table = table.take(order)
        return TraceResult(jobs=table.rows(), path=self.path, format=fmt, header=dict(header or {}),
                           records_read=self.records, skipped=self.skipped, adjusted=self.adjusted,
                           examples=self.examples)
