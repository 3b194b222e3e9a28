"""Slurm's hand-over latency read from a site's slurmctld log, for ``greenslurm replay --slurm-handover``.

When a job ends, slurmctld logs ``_job_complete: JobId=N done``; the main scheduler's next pass,
which can give the job's nodes to another job, logs ``sched: Running job scheduler`` (at
``SlurmctldDebug=debug`` or above).  The hand-over latency of that end is the time between the two;
a pass more than ``within_s`` later is not counted (nothing was waiting).  The median over the ends
is the value to give::

    python -m greenslurm.traces.slurmctld_log /var/log/slurmctld.log
    greenslurm replay trace.txt --format sacct --slurm-conf slurm.conf --queue slurm --slurm-handover 0.03

>>> log = '''[2024-01-01T00:00:10.100] _job_complete: JobId=4 done
... [2024-01-01T00:00:10.130] debug:  sched: Running job scheduler for default depth.
... [2024-01-01T00:00:20.000] _job_complete: JobId=5 done
... [2024-01-01T00:00:20.900] debug:  sched: Running job scheduler for default depth.
... [2024-01-01T00:00:40.000] _job_complete: JobId=6 done'''
>>> [round(x, 3) for x in handover_latencies_s(log)]      # JobId=6: no pass followed
[0.03, 0.9]
"""

from __future__ import annotations

import re
import statistics
import sys
from datetime import datetime

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$")


def handover_latencies_s(text: str, within_s: float = 5.0) -> list[float]:
    """Per job end in the log, the seconds until the main scheduler's next pass (ends with no pass
    within ``within_s`` left out)."""
    latencies: list[float] = []
    ends: list[float] = []
    for line in text.splitlines():
        found = _STAMP.match(line)
        if not found:
            continue
        stamp, message = found.groups()
        if "_job_complete: JobId=" in message and message.endswith(" done"):
            ends.append(datetime.fromisoformat(stamp).timestamp())
        elif "sched: Running job scheduler" in message and ends:
            now = datetime.fromisoformat(stamp).timestamp()
            latencies += [now - end for end in ends if now - end <= within_s]
            ends = []
    return latencies


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m greenslurm.traces.slurmctld_log SLURMCTLD_LOG", file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8", errors="replace") as handle:
            latencies = handover_latencies_s(handle.read())
    except OSError as error:
        print(f"{args[0]}: cannot read: {error.strerror}", file=sys.stderr)
        return 2
    if not latencies:
        print(f"{args[0]}: no job end followed by a scheduler pass (needs SlurmctldDebug=debug)", file=sys.stderr)
        return 2
    print(f"{statistics.median(latencies):.3f}  (median of {len(latencies)} job ends; "
          f"greenslurm replay --slurm-handover)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
