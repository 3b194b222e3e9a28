"""Power states and a peak budget on a real trace (pVOCL; Slurm power_save).

Replays the first jobs of KTH-SP2 (100 single-CPU nodes from the SWF header; 100 W idle, 350 W
busy per node) under EASY: without power management; with power-down of idle nodes (suspend after
10 min, 5 min boot at idle power, 10 W off); and with power-down plus a peak budget at three levels
(fractions of the unmanaged run's peak).  Jobs wider than the budget allows on an otherwise
idle cluster are left out of every run (counted), so every run replays the same jobs.

    python bench/bench_power_states.py                         # 5,000 KTH jobs
    python bench/bench_power_states.py --jobs 10000 --trace /work/shared/data/swf/lublin_256_est.swf

Prints energy, saving vs. no power management, peak power, mean wait and the added wait, boots,
energy spent off and booting, and the time-averaged phase imbalance (3 phases); "power-down, index"
wakes the lowest-numbered off node instead of one on the phase with the fewest powered nodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from greenslurm.clustermodel import Cluster  # noqa: E402
from greenslurm.sim.machines.power_states import PowerStateConfig, fits_budget, power_machine_factory  # noqa: E402
from greenslurm.sim.engine.replay import Replay  # noqa: E402
from greenslurm.traces import read_trace  # noqa: E402

KTH = Path(__file__).resolve().parents[2] / "shared" / "data" / "swf" / "KTH-SP2-1996-2.1-cln.swf"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(KTH))
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--queue", default="easy", choices=("fcfs", "easy"))
    parser.add_argument("--budgets", type=float, nargs=3, default=[0.9, 0.8, 0.7],
                        help="budget levels as fractions of the unmanaged peak")
    parser.add_argument("--suspend-after-s", type=float, default=600.0)
    parser.add_argument("--boot-s", type=float, default=300.0)
    parser.add_argument("--off-w", type=float, default=10.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    trace = read_trace(args.trace)
    cluster = Cluster.from_swf_header(trace.header)
    plain = Replay(trace.jobs[:args.jobs], cluster, args.queue).run()
    peak = plain.energy.peak_power_w
    # the strictest run (lowest budget, idle nodes kept on) decides which jobs can run at all
    strictest = PowerStateConfig(suspend_after_s=None, budget_w=min(args.budgets) * peak)
    jobs, left_out = fits_budget(trace.jobs[:args.jobs], cluster, strictest)
    runs = [("none", None)]
    runs.append(("power-down", PowerStateConfig(suspend_after_s=args.suspend_after_s, boot_s=args.boot_s,
                                                off_w=args.off_w)))
    # the control for phase-aware waking: the lowest-numbered off node first
    runs.append(("power-down, index", PowerStateConfig(suspend_after_s=args.suspend_after_s, boot_s=args.boot_s,
                                                       off_w=args.off_w, wake_order="index")))
    for fraction in args.budgets:
        runs.append((f"down+budget {fraction:.0%}", PowerStateConfig(
            suspend_after_s=args.suspend_after_s, boot_s=args.boot_s, off_w=args.off_w, budget_w=fraction * peak)))
    runs.append((f"budget {min(args.budgets):.0%} only", PowerStateConfig(suspend_after_s=None,
                                                                          budget_w=min(args.budgets) * peak)))
    print(f"{Path(args.trace).name}: {len(jobs)} jobs ({left_out} wider than the lowest budget left out), "
          f"{cluster.size} nodes, {args.queue}; unmanaged peak {peak:.0f} W")
    print(f"{'run':<20} {'MWh':>8} {'saved':>7} {'peak W':>8} {'budget W':>9} {'wait h':>7} {'+wait h':>8} "
          f"{'boots':>6} {'off kWh':>8} {'boot kWh':>9} {'imbal':>6} {'s':>5}")
    rows = []
    base = None
    for label, config in runs:
        started = time.perf_counter()
        factory = None if config is None else power_machine_factory(config)
        replay = Replay(jobs, cluster, args.queue, machine_factory=factory)
        result = replay.run()
        seconds = time.perf_counter() - started
        energy = result.energy
        wait_h = sum(r.wait_s for r in result.records) / len(result.records) / 3600
        totals = replay.machine.power_totals() if config is not None else None
        row = dict(run=label, energy_mwh=energy.total_j / 3.6e9, peak_w=energy.peak_power_w,
                   budget_w=config.budget_w if config else None, wait_h=wait_h,
                   boots=totals.boots if totals else 0, off_kwh=totals.off_j / 3.6e6 if totals else 0.0,
                   boot_kwh=totals.boot_j / 3.6e6 if totals else 0.0,
                   imbalance=totals.mean_imbalance if totals else 0.0, seconds=seconds)
        base = base or row
        row["saved"] = 1 - row["energy_mwh"] / base["energy_mwh"]
        row["added_wait_h"] = wait_h - base["wait_h"]
        rows.append(row)
        budget = f"{row['budget_w']:.0f}" if row["budget_w"] else "-"
        print(f"{label:<20} {row['energy_mwh']:>8.3f} {row['saved']:>7.1%} {row['peak_w']:>8.0f} {budget:>9} "
              f"{wait_h:>7.2f} {row['added_wait_h']:>8.2f} {row['boots']:>6} {row['off_kwh']:>8.1f} "
              f"{row['boot_kwh']:>9.1f} {row['imbalance']:>6.3f} {seconds:>5.1f}")
        if config is not None and config.budget_w is not None:
            assert energy.peak_power_w <= config.budget_w + 1e-6
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
