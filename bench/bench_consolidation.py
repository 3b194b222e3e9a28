"""pVOCL's evaluation in shape: consolidation with migration against power-down only and no power
management, with and without power-phase awareness, under peak budgets (pVOCL, Lama et al.).

Two experiments, each a replay on the one engine with the power-managed machine
(``greenslurm.sim.machines.power_states``) and its consolidation loop
(``greenslurm.sim.machines.consolidation``):

* **Table I** (the paper's Section V.A): three nodes of two GPUs on one phase, the six GPU workloads
  of its Table I started together; the short ones end at 63 s, the rest at 137 s and 213 s (the times
  the paper's Figure 12 shows).  Techniques: ``h/w-pm`` (nodes never off), ``static-pm`` (a node goes
  off when all its GPUs are idle) and ``pVOCL`` (consolidation: workloads move so that nodes go off).
* **openb**: the last GPU pods of the Alibaba GPU-sharing trace (openb, real) on one cabinet of
  8-GPU nodes of the trace's own node list (its most common model, G2; 3 phases, one
  outlet bank per phase), EASY.  Pods are containers on shared,
  virtualised GPUs, single-node: they may move (``movable = "gpu"``), as pVOCL's virtual GPUs.
  Techniques as above, h/w-pm and static-pm also with phase placement (new jobs on the phase that
  draws least: the ``phase`` selection), pVOCL both without phase awareness (one group, index wake
  order) and with it (planner per phase, phase wake order), and power-down and pVOCL under budgets
  (fractions of the unmanaged peak).  Every run charges the same distribution loss for phase imbalance.

    python bench/bench_consolidation.py                        # both, figures into bench-consolidation/
    python bench/bench_consolidation.py --pods 4000 --nodes 48 --out /tmp/consolidation

Prints energy (IT and at the PDU, with the phase loss), saving against h/w-pm and static-pm, peak
power, mean wait, moves and mean phase imbalance; writes ``consolidation.json`` and the figures
(power over time as the paper's Figure 12, the saving by budget as its Figure 22, phase
imbalance over time as its Figure 16).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from greenslurm.allocation.selection import SELECTIONS  # noqa: E402
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec  # noqa: E402
from greenslurm.sim.engine.replay import Replay  # noqa: E402
from greenslurm.sim.machines.power_states import PowerStateConfig, fits_budget, power_machine_factory  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-2023"
# pVOCL's 7.6 % between an unbalanced (all on one phase: imbalance 2) and a balanced placement
IMBALANCE_LOSS = 0.041
MIGRATE_S = 5.0          # "a few seconds" per virtual GPU for memory-intensive kernels (Figure 9)


def table1_workload() -> tuple[list[JobSpec], Cluster]:
    """pVOCL's Table I: node i runs two one-GPU workloads; the ends follow its Figure 12."""
    node = NodeSpec("gpu", cpus=16, memory_mb=65536.0, gpus=2, idle_w=150.0, busy_w=250.0,
                    gpu_idle_w=30.0, gpu_max_w=200.0)
    cluster = Cluster([NodeSpec(f"proxy{i + 1}", **{k: getattr(node, k) for k in (
        "cpus", "memory_mb", "gpus", "idle_w", "busy_w", "gpu_idle_w", "gpu_max_w")}) for i in range(3)])
    runtimes = [63.0, 213.0, 63.0, 137.0, 63.0, 213.0]     # node 1: 63, 213; node 2: 63, 137; node 3: 63, 213
    jobs = [JobSpec(f"vgpu{k + 1}", 0.0, runtime, runtime_s=runtime, cpus=1, gpus_per_node=1.0)
            for k, runtime in enumerate(runtimes)]
    return jobs, cluster


def openb_workload(pods: int, nodes: int) -> tuple[list[JobSpec], Cluster]:
    from greenslurm.traces.alibaba import read_nodes, read_pods

    trace = read_pods(str(DATA / "openb_pod_list_default.csv"))
    node_list = read_nodes(str(DATA / "openb_node_list_gpu_node.csv"))
    # one cabinet of the trace's most common 8-GPU node (G2: 96 CPUs; 45 W + 8 x 30 W idle, GPUs 150 W
    # busy), so that which nodes stay on changes the phases, not the hardware
    eight = [spec for spec in node_list.nodes if spec.gpus == 8 and spec.gpu_model == "G2"][:nodes]
    gpu_pods = sorted((job for job in trace.jobs if job.gpus_per_node > 0), key=lambda job: job.submit_s)
    return gpu_pods[-pods:], Cluster(eight)


def techniques(budgets: list[float] | None, peak_w: float, phases: int,
               cabinet: int, start_off: bool) -> list[tuple[str, PowerStateConfig | None]]:
    common = dict(imbalance_loss=IMBALANCE_LOSS, phases=phases, migrate_s=MIGRATE_S, boot_s=60.0,
                  phase_layout="banks", nodes_per_cabinet=cabinet)
    static = dict(common, suspend_after_s=1.0, start_off=start_off)
    unaware = dict(static, consolidate_every_s=60.0, topology_aware=False, wake_order="index")
    aware = dict(static, consolidate_every_s=60.0, topology_aware=True, wake_order="phase")
    runs: list[tuple[str, PowerStateConfig | None]] = [
        ("h/w-pm", PowerStateConfig(suspend_after_s=None, **common)),
        ("static-pm", PowerStateConfig(**static)),
        ("pVOCL, phase-unaware", PowerStateConfig(**unaware)),
        # the two halves of phase awareness apart: the planner per phase, the waking by phase
        ("pVOCL, per-phase plan only", PowerStateConfig(**dict(unaware, topology_aware=True))),
        ("pVOCL, phase waking only", PowerStateConfig(**dict(aware, topology_aware=False))),
        ("pVOCL", PowerStateConfig(**aware)),
    ]
    if phases > 1:
        runs[2:2] = [("h/w-pm, phase placement", PowerStateConfig(suspend_after_s=None, **common)),
                     ("static-pm, phase placement", PowerStateConfig(**static))]
    for fraction in budgets or ():
        runs.append((f"static-pm, budget {fraction:.0%}", PowerStateConfig(**static, budget_w=fraction * peak_w)))
        runs.append((f"pVOCL, budget {fraction:.0%}", PowerStateConfig(**aware, budget_w=fraction * peak_w)))
    return runs


def run_one(label: str, jobs, cluster, config: PowerStateConfig, queue: str) -> dict:
    started = time.perf_counter()
    # "phase placement": new jobs go to the phase drawing least (the phase selection)
    selection = SELECTIONS["phase"](False) if label.endswith("phase placement") else None
    replay = Replay(jobs, cluster, queue, selection=selection, machine_factory=power_machine_factory(config))
    result = replay.run()
    totals = replay.machine.power_totals()
    energy = result.energy
    records = result.records
    assert config.budget_w is None or energy.peak_power_w <= config.budget_w + 1e-6, (label, energy.peak_power_w)
    return dict(run=label, it_kwh=energy.total_j / 3.6e6, phase_loss_kwh=totals.phase_loss_j / 3.6e6,
                pdu_kwh=(energy.total_j + totals.phase_loss_j) / 3.6e6, peak_w=energy.peak_power_w,
                budget_w=config.budget_w, mean_wait_s=float(np.mean([r.start_s - r.submit_s for r in records])),
                mean_run_s=float(np.mean([r.end_s - r.start_s for r in records])),
                moves=totals.migrations, boots=totals.boots, mean_imbalance=totals.mean_imbalance,
                jobs=len(records), seconds=time.perf_counter() - started,
                power_t=np.asarray(result.power_times_s).tolist(), power_w=np.asarray(result.power_w).tolist(),
                imbalance_t=totals.imbalance_times_s.tolist(), imbalance=totals.imbalance.tolist())


def experiment(name: str, jobs, cluster, queue: str, budgets, phases: int, start_off: bool) -> list[dict]:
    plain = Replay(jobs, cluster, queue).run()
    peak = plain.energy.peak_power_w
    left_out = 0
    if budgets:
        jobs, left_out = fits_budget(jobs, cluster, PowerStateConfig(suspend_after_s=1.0, budget_w=min(budgets) * peak,
                                                                     start_off=start_off))
    print(f"\n{name}: {len(jobs)} jobs ({left_out} that no budget lets run left out), {cluster.size} nodes, {queue}; "
          f"unmanaged peak {peak:,.0f} W; phase loss {IMBALANCE_LOSS} per unit of imbalance; a move pauses "
          f"{MIGRATE_S:g} s")
    rows = [run_one(label, jobs, cluster, config, queue)
            for label, config in techniques(budgets, peak, phases, cluster.size, start_off)]
    skipped = sum(plain.skipped.values())
    if skipped:
        print(f"{skipped} jobs the cluster cannot hold were skipped in every run: {dict(plain.skipped)}")
    hw = rows[0]["pdu_kwh"]
    static = rows[1]["pdu_kwh"]
    print(f"{'run':<27} {'PDU kWh':>9} {'IT kWh':>9} {'loss kWh':>8} {'vs h/w-pm':>9} {'vs static':>9} "
          f"{'peak W':>8} {'wait s':>8} {'run s':>8} {'moves':>6} {'imbal':>6}")
    for row in rows:
        row["vs_hw_pm"] = row["pdu_kwh"] / hw - 1
        row["vs_static_pm"] = row["pdu_kwh"] / static - 1
        print(f"{row['run']:<27} {row['pdu_kwh']:>9.2f} {row['it_kwh']:>9.2f} {row['phase_loss_kwh']:>8.2f} "
              f"{row['vs_hw_pm']:>+9.1%} {row['vs_static_pm']:>+9.1%} {row['peak_w']:>8,.0f} "
              f"{row['mean_wait_s']:>8.1f} {row['mean_run_s']:>8.1f} {row['moves']:>6} {row['mean_imbalance']:>6.3f}")
    return rows


def hourly_means(times_s: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean of a step function over each hour from its first time (hours, means)."""
    edges = np.arange(times_s[0], times_s[-1] + 3600.0, 3600.0)
    grid = np.unique(np.concatenate((times_s, edges)))
    held = values[np.searchsorted(times_s, grid[:-1], side="right") - 1]
    bins = np.searchsorted(edges, grid[:-1], side="right") - 1
    weight = np.diff(grid)
    mean = np.bincount(bins, held * weight, len(edges)) / np.maximum(np.bincount(bins, weight, len(edges)), 1e-9)
    return (edges - edges[0]) / 3600, mean


def peak_of(rows: list[dict]) -> float:
    """The unmanaged run's peak (the budgets are fractions of it)."""
    return next(row["peak_w"] for row in rows if row["run"] == "h/w-pm")


def figures(out: Path, table1: list[dict], openb: list[dict]) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    styles = {"h/w-pm": ("tab:gray", "-"), "static-pm": ("tab:blue", "--"),
              "pVOCL, phase-unaware": ("tab:orange", "-."), "pVOCL": ("tab:green", "-"),
              "static-pm, phase placement": ("tab:purple", ":")}

    def save(figure, stem: str) -> None:
        for suffix in ("png", "svg"):
            path = out / f"{stem}.{suffix}"
            figure.savefig(path, dpi=130, bbox_inches="tight")
            written.append(path)
        plt.close(figure)

    # Figure 12(b): instantaneous power of the three techniques on Table I
    figure, axes = plt.subplots(figsize=(7, 4))
    for row in table1:
        if row["run"] not in ("h/w-pm", "static-pm", "pVOCL"):
            continue
        color, line = styles[row["run"]]
        t = np.array(row["power_t"] + [row["power_t"][-1]])
        w = np.array(row["power_w"] + [row["power_w"][-1]])
        wide = row["run"] == "h/w-pm"         # drawn wide underneath: the others follow it at first
        axes.step(t, w, where="post", color=color, linestyle=line, linewidth=5 if wide else 1.6,
                  alpha=0.45 if wide else 1.0, label=f"{row['run']} ({row['pdu_kwh'] * 1000:.1f} Wh)")
    axes.set_xlabel("time (s)")
    axes.set_ylabel("power (W)")
    axes.set_title("pVOCL Table I workload, 3 nodes of 2 GPUs: power over time")
    axes.legend()
    axes.grid(alpha=0.3)
    save(figure, "table1-power")

    # Figure 22: pVOCL's energy saving against static-pm, by budget (the last point: no budget)
    budgeted = [row for row in openb if "budget" in row["run"]]
    if budgeted:
        figure, axes = plt.subplots(figsize=(7, 4))
        budgets = sorted({row["budget_w"] for row in budgeted})
        labels = [f"{b / 1000:.1f}" for b in budgets] + ["none"]

        def pdu(run: str) -> float:
            return next(row["pdu_kwh"] for row in openb if row["run"] == run)
        saving = [100 * (1 - pdu(f"pVOCL, budget {b / peak_of(openb):.0%}") / pdu(f"static-pm, budget {b / peak_of(openb):.0%}"))
                  for b in budgets] + [100 * (1 - pdu("pVOCL") / pdu("static-pm"))]
        positions = np.arange(len(labels))
        axes.bar(positions, saving, color=styles["pVOCL"][0], width=0.6)
        for x, value in zip(positions, saving):
            axes.annotate(f"{value:.1f} %", (x, value), ha="center", va="bottom", xytext=(0, 3),
                          textcoords="offset points")
        axes.set_ylim(min(0.0, min(saving) * 1.2), max(max(saving), 0.0) * 1.18 + 0.1)
        axes.set_xticks(positions, labels)
        axes.set_xlabel("peak power budget (kW)")
        axes.set_ylabel("energy saved vs static-pm (%, at the PDU)")
        axes.set_title("openb GPU pods, one cabinet: pVOCL's saving by peak budget")
        axes.grid(alpha=0.3, axis="y")
        save(figure, "openb-saving-vs-budget")

    # Figure 16(a): phase imbalance over time, with and without phase awareness
    figure, axes = plt.subplots(figsize=(7, 4.6))
    for row in openb:
        if row["run"] not in ("pVOCL, phase-unaware", "pVOCL", "static-pm", "static-pm, phase placement"):
            continue
        color, line = styles[row["run"]]
        hours, mean = hourly_means(np.array(row["imbalance_t"]), np.array(row["imbalance"]))
        axes.step(hours, mean, where="post", color=color, linestyle=line,
                  label=f"{row['run']} (mean {row['mean_imbalance']:.2f})")
    axes.set_xlabel("time (h)")
    axes.set_ylabel("phase imbalance, hourly mean (max dev. / mean)")
    axes.set_title("openb GPU pods, one cabinet: phase imbalance over time")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    axes.grid(alpha=0.3)
    save(figure, "openb-phase-imbalance")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000, help="the last GPU pods of the openb trace")
    parser.add_argument("--nodes", type=int, default=24, help="8-GPU nodes of the openb node list (one cabinet)")
    parser.add_argument("--budgets", type=float, nargs="*", default=[0.6, 0.45, 0.3],
                        help="peak budgets as fractions of the unmanaged peak")
    parser.add_argument("--out", default="bench-consolidation", help="directory for the JSON and the figures")
    parser.add_argument("--no-figures", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs, cluster = table1_workload()
    # the paper's three nodes share one phase circuit
    table1 = experiment("pVOCL Table I", jobs, cluster, "fcfs", None, phases=1, start_off=False)
    jobs, cluster = openb_workload(args.pods, args.nodes)
    # a week of a long trace: begin in a steady state, the nodes off until work comes (which lets
    # budgets go below the idle power of the whole cabinet)
    openb = experiment(f"openb, last {args.pods} GPU pods", jobs, cluster, "easy", args.budgets, phases=3,
                       start_off=True)
    (out / "consolidation.json").write_text(json.dumps({"table1": table1, "openb": openb}))
    if not args.no_figures:
        for path in figures(out, table1, openb):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
