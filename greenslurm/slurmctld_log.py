"""``python -m greenslurm.slurmctld_log LOG``: what a site gives the replay of the slurm queue, read from
its slurmctld log (a rotated one compressed with gzip too): the median hand-over latency
(``--slurm-handover``) and the background loop's drift (``SlurmScheduling.background_drift``).  The log
is read by :mod:`greenslurm.traces.slurmctld_log`; the loop is fitted by
:mod:`greenslurm.sim.engine.slurmctld_loop`.  Exit 2, with one line, on a log that gives neither.
"""

from __future__ import annotations

import statistics
import sys

from greenslurm.clustermodel import InputError
from greenslurm.sim.engine.slurmctld_loop import loop_from_checks
from greenslurm.traces.slurmctld_log import read_log


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m greenslurm.slurmctld_log SLURMCTLD_LOG", file=sys.stderr)
        return 2
    try:
        scan = read_log(args[0])
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    if scan.damaged_lines:
        print(f"{args[0]}: {scan.damage()}", file=sys.stderr)
    latencies, checks = scan.handovers_s, scan.checks
    if not latencies and len(checks) < 2:
        print(f"{args[0]}: no job end followed by a scheduler pass (needs SlurmctldDebug=debug) and fewer "
              f"than two checks of the background loop (debug2, or power-saving resets)", file=sys.stderr)
        return 2
    if latencies:
        print(f"{statistics.median(latencies):.3f}  (median of {len(latencies)} job ends; "
              f"greenslurm replay --slurm-handover)")
    if len(checks) >= 2:
        loop = loop_from_checks(checks, checks[0])
        print(f"{loop.drift:.5f}  (background loop: {len(checks)} checks, passes of {loop.step_s:.5f} s; "
              f"SlurmScheduling.background_drift)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
