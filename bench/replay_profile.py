"""Where a replay's time goes, in microseconds per job: the phases of ``greenslurm replay`` timed
in one process, then the replay loop under cProfile with every function's own time charged to a part
of the engine (numpy, sortedcontainers and built-ins are charged to the engine code that called them).

    python bench/replay_profile.py TRACE.swf [--queue easy] [--out DIR] [--top 15]

The phases run as the command runs them (greenslurm.scenario_run); the profiled loop is a second
replay of the same jobs, so its figures carry cProfile's own cost (compare shares, not totals).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

started = time.perf_counter()
import json  # noqa: E402

from greenslurm import cli, scenario_run  # noqa: E402,F401  (the command's imports: timed)
from greenslurm.scenario import Scenario  # noqa: E402
from greenslurm.sim.reporting.outputs import write_outputs  # noqa: E402

IMPORTED_S = time.perf_counter() - started
# file path fragment -> part of the engine, first match wins
PARTS = (("sim/events.py", "event queue"), ("sim/engine/replay.py", "event loop, shaper, records"),
         ("sim/engine/queues.py", "queue strategy"), ("sim/engine/", "queue strategy"),
         ("sim/machines/", "machine (fit, start, end)"), ("allocation/", "machine (fit, start, end)"),
         ("sim/accounting/ledger.py", "energy ledger"), ("sim/accounting/", "records and metrics"),
         ("traces/", "reading"), ("clustermodel/", "cluster model"), ("sim/reporting/", "report and outputs"))
SHARED = ("numpy", "sortedcontainers", "~", "<", "dataclasses", "enum.py", "functools", "copy")


def part_of(func, stats: dict, seen: frozenset = frozenset()) -> dict[str, float]:
    """Shares of ``func``'s own time by engine part: its file's part, or its callers' parts for shared code."""
    path = func[0]
    for fragment, part in PARTS:
        if fragment in path:
            return {part: 1.0}
    if not any(s in path for s in SHARED) or func in seen:
        return {"other": 1.0}
    callers = stats[func][4]
    total = sum(c[2] for c in callers.values()) or 1.0
    shares: dict[str, float] = {}
    for caller, (_, _, own, _) in callers.items():
        for part, share in part_of(caller, stats, seen | {func}).items():
            shares[part] = shares.get(part, 0.0) + share * own / total
    return shares or {"other": 1.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--queue", default="easy")
    parser.add_argument("--out", help="also time writing the outputs here")
    parser.add_argument("--top", type=int, default=15, help="functions to list by own time")
    parser.add_argument("--profile-jobs", type=int, help="profile the replay of only the first N jobs (default: all; 0: no profile)")
    args = parser.parse_args()
    scenario = Scenario.from_toml(f"queue = {json.dumps(args.queue)}\n[trace]\npath = {json.dumps(args.trace)}\n")
    clock = time.perf_counter
    t0 = clock()
    inputs = scenario_run.load_inputs(scenario)
    t1 = clock()
    replay = scenario_run.build(scenario, inputs.jobs, inputs.cluster)
    t2 = clock()
    result = replay.run()
    t3 = clock()
    outcome = scenario_run.Outcome(scenario, list(inputs.jobs), inputs.cluster, replay, result, trace=inputs.trace)
    summary = scenario_run.summary_of(outcome)
    t4 = clock()
    if args.out:
        write_outputs(result, summary, args.out, machine=replay.machine)
    t5 = clock()
    n = len(result.records)
    print(f"{n:,} jobs, {args.queue}; microseconds per job (seconds in all)")
    for name, seconds in (("imports", IMPORTED_S), ("read", t1 - t0), ("build", t2 - t1), ("replay loop", t3 - t2),
                          ("summary", t4 - t3), ("write --out", t5 - t4)):
        print(f"  {name:<12} {seconds / n * 1e6:8.1f} us  ({seconds:.2f} s)")
    print(f"  replay loop: {n / (t3 - t2):,.0f} jobs/s")
    if args.profile_jobs == 0:
        return 0

    profiler = cProfile.Profile()
    replay = scenario_run.build(scenario, inputs.jobs[:args.profile_jobs], inputs.cluster)
    profiler.runcall(replay.run)
    n = len(replay.records)
    stats = pstats.Stats(profiler).stats
    parts: dict[str, float] = {}
    for func, (_, _, own, _, _) in stats.items():
        for part, share in part_of(func, stats).items():
            parts[part] = parts.get(part, 0.0) + own * share
    total = sum(parts.values())
    print(f"replay loop of {n:,} jobs under cProfile ({total:.2f} s): own time by part, scaled to the loop's "
          f"{(t3 - t2) / len(result.records) * 1e6:.1f} us per job")
    for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<30} {seconds / total * (t3 - t2) / len(result.records) * 1e6:8.1f} us/job  "
              f"{seconds / total:6.1%}")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
