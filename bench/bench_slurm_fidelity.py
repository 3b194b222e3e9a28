"""Replay vs real Slurm: how close the ``slurm`` queue comes to what Slurm 22.05 did.

Reads recordings made by ``bench/slurm_reference.py`` (one folder per scheduler setting, each with
``schedule.json`` and the ``slurm.conf`` slurmctld read), replays each workload in trace seconds
with the same slurm.conf (every real-time setting scaled by the recording's speedup), and prints per
setting: mean wait (recorded, replayed, difference), per-job start error, start order agreement and
pair concordance, and the share of jobs started by the same scheduler (main or backfill) and on the
same nodes.  The textbook queues (FCFS, EASY) on the same input are shown for contrast.

    python bench/slurm_reference.py --validation 300 --variant all --out /tmp/v300   # about 35 min
    python bench/bench_slurm_fidelity.py /tmp/v300/builtin /tmp/v300/backfill-fine /tmp/v300/backfill-coarse

The replay is fed what a sacct log of the run would give: Slurm's submit stamps, the time limit it
held and each job's elapsed time (end - start), all in trace seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from greenslurm.clustermodel import JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.studies.slurm_fidelity import compare_schedules
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf_text


def load_recording(folder: Path) -> dict:
    path = Path(folder) / "schedule.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"bench_slurm_fidelity: {path}: cannot read a recording: {error}") from None


def jobs_of(recording: dict) -> list[JobSpec]:
    """The recorded jobs as a sacct log would give them, in trace seconds."""
    speedup = float(recording["speedup"])
    jobs = []
    for r in recording["jobs"]:
        elapsed = r["end_trace_s"] - r["start_trace_s"]
        tasks = int(r["tasks"]) * int(r.get("cpus_per_task") or 1)
        jobs.append(JobSpec(job_id=r["name"], submit_s=float(r["submit_trace_s"]),
                            requested_time_s=r["time_limit_min_real"] * 60.0 * speedup, runtime_s=float(elapsed),
                            cpus=tasks, nodes=int(r["nodes_requested"] or 0), user=r.get("user") or "",
                            partition=r["partition"], account=r.get("account") or "", qos=r.get("qos") or "",
                            nice=int(r.get("nice") or 0)))
    return jobs


def replay_recording(recording: dict, queue: str = "slurm"):
    """(result, strategy) of the recorded workload replayed under ``queue`` on the recorded slurm.conf."""
    conf = parse_slurm_conf_text(recording["slurm_conf"])
    cluster = cluster_from_slurm_conf(conf)
    options = {}
    if queue == "slurm":
        options = {"scheduling": SlurmScheduling.from_conf(conf).scaled(float(recording["speedup"]))}
    run = Replay(jobs_of(recording), cluster, queue, strategy_options=options)
    return run.run(), run.strategy, cluster


def fidelity(recording: dict, queue: str = "slurm") -> dict:
    """The comparison of one recording with its replay under ``queue``, as a flat dict."""
    result, strategy, cluster = replay_recording(recording, queue)
    speedup = float(recording["speedup"])
    recorded = {r["name"]: (r["submit_trace_s"], r["start_trace_s"]) for r in recording["jobs"]}
    replayed = {r.job_id: (r.submit_s, r.start_s) for r in result.records}
    f = compare_schedules(recorded, replayed, tolerance_s=speedup)
    names = [n.name for n in cluster.nodes]
    by_name = {r["name"]: r for r in recording["jobs"]}
    same_nodes = sum(sorted(names[i] for i in r.node_indices) == sorted(by_name[r.job_id]["node_list"])
                     for r in result.records) / max(len(result.records), 1)
    started_by = getattr(strategy, "started_by", {})
    same_scheduler = (sum(started_by.get(n) == (by_name[n]["scheduler"] or "").lower() for n in by_name)
                      / len(by_name)) if started_by else None
    return {"variant": recording["variant"], "queue": queue, **f.as_dict(), "same_nodes": same_nodes,
            "same_scheduler": same_scheduler, "skipped": sum(result.skipped.values()),
            "rejected": len(result.rejected)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="+", type=Path, help="folders written by bench/slurm_reference.py")
    parser.add_argument("--contrast", default="fcfs,easy", help="textbook queues to show beside (comma list, or '')")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    queues = ["slurm", *[q for q in args.contrast.split(",") if q]]
    rows = []
    for folder in args.recordings:
        recording = load_recording(folder)
        for queue in queues:
            rows.append(fidelity(recording, queue))
    table = Table(title="Replay vs real Slurm 22.05 (trace seconds; tolerance one real second)")
    for column in ("setting", "queue", "jobs", "mean wait rec (s)", "mean wait replay (s)", "wait diff",
                   "|start err| median (s)", "p90 (s)", "order agree", "pair conc.", "same sched", "same nodes"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(r["variant"], r["queue"], str(r["jobs"]), f"{r['mean_wait_recorded_s']:,.0f}",
                      f"{r['mean_wait_replayed_s']:,.0f}", f"{100 * r['mean_wait_difference']:+.1f}%",
                      f"{r['start_error_median_abs_s']:,.0f}", f"{r['start_error_p90_abs_s']:,.0f}",
                      f"{100 * r['order_agreement']:.1f}%", f"{100 * r['pair_concordance']:.1f}%",
                      "-" if r["same_scheduler"] is None else f"{100 * r['same_scheduler']:.0f}%",
                      f"{100 * r['same_nodes']:.0f}%")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
