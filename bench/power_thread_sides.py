"""On which side of Slurm's power-save thread's wake-up the allocations near it fell.

slurmctld's power-save thread (``_init_power_save``, power_save.c) sleeps a second, reads
``time(NULL)`` and scans when ``last_node_update >= last_power_scan``; an allocation sets
``last_node_update`` (whole seconds).  An allocation on powered-down nodes is resumed at the
thread's first scan that sees it: in the same pass if the thread woke after the allocation, a pass
later if it woke (and skipped its scan) just before.  The backfill thread sleeps a second in a loop
too, started with it, so its looks and the power-save thread's wake-ups often fall within
milliseconds of each other.  This reads recordings of ``bench/slurm_power_reference.py`` (their
slurmctld times to the millisecond) and, per allocation whose resume scan came within 30 ms of its
phase, tells on which side the thread woke, the gap in the log's frame (the thread's wake-up nearest
the allocation, counted a pass back from the resume scan when it came a pass later), and which side
the replay's wake-up takes (in step with the thread's logged scans, 0.9 ms before each as the
bench replays them, and on one pace for the run as it did before)::

    python bench/power_thread_sides.py bench/data/slurm-power/seed3[034]*.json.gz

>>> rows = sides({"power_events": [[1.0, "resume", "n2"], [11.005, "resume", "n3"], [13.006, "resume", "n2"]],
...               "jobs": [{"name": "a", "node_list": ["n3"], "scheduler": "Backfill", "log_times": {"alloc": 11.003}},
...                        {"name": "b", "node_list": ["n2"], "scheduler": "Backfill", "log_times": {"alloc": 12.0065}}]})
>>> [(r.job, round(r.gap_ms, 1), r.saw, r.replay_saw) for r in rows]       # b: the thread woke 1 ms before (12.0055)
[('a', 2.0, True, True), ('b', -1.0, False, False)]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_slurm_power import load, power_thread_loop, power_thread_wakes  # noqa: E402
from greenslurm.sim.engine.slurmctld_loop import wake_after  # noqa: E402

NEAR_S = 0.03            # allocations this close to a wake-up of the thread (in its phase) are counted


class Side(NamedTuple):
    job: str
    scheduler: str       # Backfill or Main (sacct's)
    gap_ms: float        # the thread's nearest wake-up minus the allocation, in the log's frame
    saw: bool            # Slurm's thread saw it in the pass right after (resumed its nodes then)
    replay_saw: bool     # the replay's wake-up (in step with the logged scans) falls after it
    one_pace_saw: bool   # on one pace for the whole run


def sides(recording: dict, near_s: float = NEAR_S) -> list[Side]:
    """Per allocation whose nodes the thread resumed within 2.5 s, with the thread's wake-up within
    ``near_s`` of it: the sides (see the module text)."""
    wakes = power_thread_wakes(recording)
    loop = power_thread_loop(recording)
    step = 1.0 + (loop.drift if loop is not None else 0.0)
    resumes = sorted((at, node) for at, kind, node in recording.get("power_events", ()) if kind == "resume")
    rows = []
    for job in recording["jobs"]:
        alloc = (job.get("log_times") or {}).get("alloc")
        if alloc is None:
            continue
        scan = next((at for at, node in resumes if alloc <= at < alloc + 2.5 and node in job["node_list"]), None)
        if scan is None:
            continue
        saw = scan - alloc < 0.5
        nearest = scan if saw else scan - step
        if abs(nearest - alloc) > near_s:
            continue
        one_pace = (loop.start_s + (math.floor((alloc - loop.start_s) / step + 1e-9) + 1) * step) if loop else math.inf
        rows.append(Side(job["name"], job.get("scheduler", ""), (nearest - alloc) * 1000.0, saw,
                         wake_after(wakes, step, alloc) - alloc < 0.5, one_pace - alloc < 0.5))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="+", type=Path, help="schedule.json[.gz] of power-saving recordings")
    args = parser.parse_args(argv)
    total = {"saw": 0, "missed": 0, "replay right": 0, "one pace right": 0}
    for path in args.recordings:
        for row in sides(load(path)):
            print(f"{path.name:22s} {row.job} {row.scheduler:8s} gap {row.gap_ms:+6.1f} ms  Slurm's thread "
                  f"{'saw it' if row.saw else 'missed it'}; replay {'saw' if row.replay_saw else 'missed'}, "
                  f"one pace {'saw' if row.one_pace_saw else 'missed'}")
            total["saw" if row.saw else "missed"] += 1
            total["replay right"] += row.replay_saw == row.saw
            total["one pace right"] += row.one_pace_saw == row.saw
    print(", ".join(f"{k}: {v}" for k, v in total.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
