"""Replay vs real Slurm: how close the ``slurm`` queue comes to what Slurm 22.05 did.

Reads recordings made by ``bench/slurm_reference.py`` (one folder per scheduler setting, each with
``schedule.json`` and the ``slurm.conf`` slurmctld read), replays each workload in trace seconds
with the same slurm.conf (every real-time setting scaled by the recording's speedup), and prints per
setting: mean wait (recorded, replayed, difference), per-job start error, start order agreement and
pair concordance, and the share of jobs started by the same scheduler (main or backfill) and on the
same nodes.  The textbook queues (FCFS, EASY) on the same input are shown for contrast.

    python bench/slurm_reference.py --validation 300 --variant all --out /tmp/v300   # about 35 min
    python bench/bench_slurm_fidelity.py /tmp/v300/builtin /tmp/v300/backfill-fine /tmp/v300/backfill-coarse

The recordings behind the figures in docs/slurm-replay.md are in ``bench/data/slurm-v300/``:

    python bench/bench_slurm_fidelity.py bench/data/slurm-v300/{builtin,backfill-fine,backfill-coarse}.json.gz \
        --repeat bench/data/slurm-v300/builtin-again.json.gz --repeat bench/data/slurm-v300/backfill-fine-again.json.gz

The replay is fed what a sacct log of the run would give: Slurm's submit stamps, the time limit it
held and each job's elapsed time (end - start), all in trace seconds.  A recording made with slurmdbd
also gives the associations and QOS (its sacctmgr dumps) and when the fair-share passes ran: the
replay then has the QOS priorities and limits and the fair-share factor, its passes on the same grid.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from greenslurm.clustermodel import JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_accounting import strategy_options
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.studies.slurm_fidelity import compare_schedules
from greenslurm.traces.slurm_accounts import SlurmAccounts, parse_associations_text, parse_qos_text
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf_text


def load_recording(where: Path) -> dict:
    """A recording: a folder written by ``bench/slurm_reference.py`` (its schedule.json), or such a
    file itself, plain or gzipped (the recordings published in ``bench/data/slurm-v300/``)."""
    path = Path(where)
    if path.is_dir():
        path = path / "schedule.json"
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except (OSError, ValueError, EOFError) as error:
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


def recorded_accounts(recording: dict) -> SlurmAccounts | None:
    """The associations and QOS of a recording made with slurmdbd (None without)."""
    if not recording.get("sacctmgr_assoc"):
        return None
    return SlurmAccounts(parse_associations_text(recording["sacctmgr_assoc"], "<recorded sacctmgr show assoc>"),
                         parse_qos_text(recording["sacctmgr_qos"], "<recorded sacctmgr show qos>"))


def release_delay_estimate(recording: dict) -> float:
    """Real seconds from a job's end until Slurm started the next job on what it freed, estimated
    from the recording: over jobs that waited, the gap between their start and the last end before
    it.  Stamps are whole seconds, so a delay L < 1 s shows as a gap of 1 s in a share L of the
    cases and 0 otherwise: the mean gap estimates L.  (Gaps over 2 s are a job waiting for
    something else and are left out.)

    >>> release_delay_estimate({"jobs": [
    ...     {"submit_epoch": 0, "start_epoch": 0, "end_epoch": 10},     # did not wait
    ...     {"submit_epoch": 1, "start_epoch": 10, "end_epoch": 20},    # gap 0
    ...     {"submit_epoch": 2, "start_epoch": 21, "end_epoch": 30},    # gap 1
    ...     {"submit_epoch": 3, "start_epoch": 40, "end_epoch": 50}]})  # gap 10: left out
    0.5
    """
    ends = sorted(r["end_epoch"] for r in recording["jobs"])
    gaps = []
    for r in recording["jobs"]:
        start = r["start_epoch"]
        if start - r["submit_epoch"] <= 1:
            continue
        before = [end for end in ends if end <= start]
        if before and start - before[-1] <= 2:
            gaps.append(start - before[-1])
    return sum(gaps) / len(gaps) if gaps else 0.0


def submit_delay_estimate(recording: dict) -> float:
    """Real seconds from submission until Slurm first tried a job, estimated from the jobs that
    started within 2 s of their submission (they found room at once): their mean gap.

    >>> submit_delay_estimate({"jobs": [{"submit_epoch": 0, "start_epoch": 1}, {"submit_epoch": 5, "start_epoch": 5},
    ...                                 {"submit_epoch": 9, "start_epoch": 30}]})
    0.5
    """
    gaps = [r["start_epoch"] - r["submit_epoch"] for r in recording["jobs"]
            if r["start_epoch"] - r["submit_epoch"] <= 2]
    return sum(gaps) / len(gaps) if gaps else 0.0


def latencies(recording: dict) -> dict[str, float]:
    """Slurm's reaction times in the recording (real seconds): release and submit delays."""
    return {"release_delay_s": release_delay_estimate(recording), "submit_delay_s": submit_delay_estimate(recording)}


def replay_recording(recording: dict, queue: str = "slurm", release_delay_s: float = 0.0, submit_delay_s: float = 0.0):
    """(result, strategy) of the recorded workload replayed under ``queue`` on the recorded slurm.conf;
    ``release_delay_s``: real seconds from a job's end until Slurm gives its resources again;
    ``submit_delay_s``: from a submission until a pass first tries the job."""
    conf = parse_slurm_conf_text(recording["slurm_conf"])
    cluster = cluster_from_slurm_conf(conf)
    jobs = jobs_of(recording)
    options = {}
    if queue == "slurm":
        scheduling = replace(SlurmScheduling.from_conf(conf), release_delay_s=release_delay_s,
                             submit_delay_s=submit_delay_s)
        scheduling = scheduling.scaled(float(recording["speedup"]))
        accounts = recorded_accounts(recording)
        if accounts is not None:
            jobs = [accounts.complete(job) for job in jobs]
            passes = recording.get("fairshare_passes") or []
            if passes:        # the decay thread's passes: from its first one, every PriorityCalcPeriod
                scheduling = replace(scheduling, priority=replace(scheduling.priority,
                                                                  calc_origin_s=float(passes[0]["trace_s"])))
        options = strategy_options(scheduling, accounts)
    run = Replay(jobs, cluster, queue, strategy_options=options)
    return run.run(), run.strategy, cluster


def fidelity(recording: dict, queue: str = "slurm", release_delay_s: float = 0.0, submit_delay_s: float = 0.0,
             label: str | None = None) -> dict:
    """The comparison of one recording with its replay under ``queue``, as a flat dict."""
    result, strategy, cluster = replay_recording(recording, queue, release_delay_s, submit_delay_s)
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
    return {"variant": recording["variant"], "queue": label or queue, "release_delay_s": release_delay_s,
            "submit_delay_s": submit_delay_s, **f.as_dict(), "same_nodes": same_nodes,
            "same_scheduler": same_scheduler, "skipped": sum(result.skipped.values()),
            "rejected": len(result.rejected)}


def repeatability(first: dict, second: dict) -> dict:
    """Two recordings of the same workload and setting compared as :func:`fidelity` compares a replay:
    how far real Slurm is from itself."""
    one = {r["name"]: (r["submit_trace_s"], r["start_trace_s"]) for r in first["jobs"]}
    two = {r["name"]: (r["submit_trace_s"], r["start_trace_s"]) for r in second["jobs"]}
    f = compare_schedules(one, two, tolerance_s=float(first["speedup"]))
    nodes_one = {r["name"]: sorted(r["node_list"]) for r in first["jobs"]}
    same_nodes = sum(sorted(r["node_list"]) == nodes_one.get(r["name"]) for r in second["jobs"]) / len(second["jobs"])
    by_name = {r["name"]: r["scheduler"] for r in first["jobs"]}
    same_scheduler = sum(by_name.get(r["name"]) == r["scheduler"] for r in second["jobs"]) / len(second["jobs"])
    return {"variant": first["variant"], "queue": "real again", "release_delay_s": None, "submit_delay_s": None,
            **f.as_dict(), "same_nodes": same_nodes, "same_scheduler": same_scheduler, "skipped": 0, "rejected": 0}


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="+", type=Path,
                        help="folders written by bench/slurm_reference.py, or their schedule.json (plain or gzipped)")
    parser.add_argument("--contrast", default="fcfs,easy", help="textbook queues to show beside (comma list, or '')")
    parser.add_argument("--repeat", type=Path, action="append", default=[], metavar="FOLDER",
                        help="a second recording of the same workload and setting: real Slurm against itself")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    contrast = [q for q in args.contrast.split(",") if q]
    repeats = {}
    for folder in args.repeat:
        again = load_recording(folder)
        repeats[again["variant"]] = again
    rows = []
    for folder in args.recordings:
        recording = load_recording(folder)
        measured = latencies(recording)
        rows.append(fidelity(recording, "slurm", **measured, label="slurm"))
        rows.append(fidelity(recording, "slurm", label="slurm, no latency"))
        for queue in contrast:
            rows.append(fidelity(recording, queue))
        if recording["variant"] in repeats:
            rows.append(repeatability(recording, repeats[recording["variant"]]))
    table = Table(title="Replay vs real Slurm 22.05 (trace seconds; two starts within one real second are simultaneous)")
    for column in ("setting", "compared with the recording", "latency end/submit (real s)", "jobs",
                   "mean wait rec (s)", "mean wait other (s)", "wait diff", "|start err| median (s)", "p90 (s)",
                   "pair order", "jobs in order", "same scheduler", "same nodes"):
        table.add_column(column, justify="right")
    for r in rows:
        latency = ("-" if r["release_delay_s"] is None or r["queue"] not in ("slurm", "slurm, no latency")
                   else f"{r['release_delay_s']:.2f}/{r['submit_delay_s']:.2f}")
        table.add_row(r["variant"], r["queue"], latency, str(r["jobs"]), f"{r['mean_wait_recorded_s']:,.0f}",
                      f"{r['mean_wait_replayed_s']:,.0f}", f"{100 * r['mean_wait_difference']:+.1f}%",
                      f"{r['start_error_median_abs_s']:,.0f}", f"{r['start_error_p90_abs_s']:,.0f}",
                      f"{100 * r['pair_concordance']:.1f}%", f"{100 * r['order_agreement']:.1f}%",
                      _pct(r["same_scheduler"]), _pct(r["same_nodes"]))
    Console(width=200).print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
