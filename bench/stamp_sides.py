"""On which side of slurmctld's pass in their second real submissions and job ends fell.

sacct floors Submit, Start and End to the second; a replay cannot tell whether an event stamped S
came before or after the main scheduler's pass in second S.  slurmctld's own log (millisecond
stamps) can: this reads the logs of recordings (``bench/slurm_workloads.py record``) and counts,
per log, the submissions (``_slurm_rpc_submit_batch_job``) and job ends (``_job_complete: JobId=N
done``) that came before the pass of their second and those that came after.  A pass is known
where it logs (``sched: Allocate`` at the default level, ``sched: Running job scheduler`` at
``debug``); the background thread's phase drifts by a few milliseconds a second, so the phase of
the nearest logged pass (within ``--within`` seconds) stands for the pass in the event's second;
events with no logged pass that near are counted as unknown.  Also prints the median phase of the
submissions within their second::

    python bench/stamp_sides.py bench/data/slurm-workloads/s70/run1/slurmctld.log ...

>>> log = '''[2026-01-01T00:00:05.100] _slurm_rpc_submit_batch_job: JobId=1 InitPrio=1 usec=3
... [2026-01-01T00:00:05.700] sched: Allocate JobId=1 NodeList=n1 #CPUs=1 Partition=p
... [2026-01-01T00:00:08.800] _slurm_rpc_submit_batch_job: JobId=2 InitPrio=1 usec=3
... [2026-01-01T00:00:09.710] _job_complete: JobId=1 done'''
>>> sides(log).submissions, sides(log).ends      # (before, after, unknown): 0.1 < 0.7; 0.8 > 0.7; 0.71 > 0.7
((1, 1, 0), (0, 1, 0))
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

from greenslurm.traces.slurmctld_log import BadStamp, _stamped

PASS_MESSAGES = ("sched: Allocate", "sched: Running job scheduler")
SAME_PASS_S = 0.5          # log lines of one pass (its allocations) fall within this


class Sides(NamedTuple):
    submissions: tuple[int, int, int]       # before, after the pass of their second; unknown
    ends: tuple[int, int, int]
    submission_phase_median: float          # where in their second submissions came (0-1)


def sides(text: str, within_s: float = 30.0) -> Sides:
    submissions, ends, passes = [], [], []
    for now, message in _stamped(text):
        if "_slurm_rpc_submit_batch_job" in message:
            submissions.append(now)
        elif "_job_complete: JobId=" in message and message.endswith(" done"):
            ends.append(now)
        elif any(key in message for key in PASS_MESSAGES) and (not passes or now - passes[-1] > SAME_PASS_S):
            passes.append(now)

    def count(events: list[float]) -> tuple[int, int, int]:
        before = after = unknown = 0
        for event in events:
            i = bisect.bisect(passes, event)
            near = min(passes[max(i - 1, 0):i + 1], key=lambda p: abs(p - event), default=None)
            if near is None or abs(near - event) > within_s:
                unknown += 1
            elif event % 1.0 < near % 1.0:
                before += 1
            else:
                after += 1
        return before, after, unknown

    phase = statistics.median(s % 1.0 for s in submissions) if submissions else float("nan")
    return Sides(count(submissions), count(ends), phase)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="slurmctld logs (.gz read as such)")
    parser.add_argument("--within", type=float, default=30.0, help="seconds to the nearest logged pass")
    args = parser.parse_args(argv)
    totals = [0] * 6
    for path in args.logs:
        try:
            # bytes that are no text are no log line: kept as replacement characters, never matched
            text = gzip.open(path, "rt", errors="replace").read() if path.suffix == ".gz" \
                else path.read_text(errors="replace")
        except (OSError, EOFError) as error:        # missing, unreadable, not gzip, cut short
            print(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}", file=sys.stderr)
            return 2
        try:
            found = sides(text, args.within)
        except BadStamp as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 2
        totals = [a + b for a, b in zip(totals, found.submissions + found.ends)]
        print(f"{path}: submissions before/after/unknown {'/'.join(map(str, found.submissions))}, "
              f"ends {'/'.join(map(str, found.ends))}, submissions' phase (median) {found.submission_phase_median:.3f} s")
    print(f"all: submissions before/after/unknown {'/'.join(map(str, totals[:3]))}, ends {'/'.join(map(str, totals[3:]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
