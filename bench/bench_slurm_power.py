"""Replay vs real Slurm with power saving: how close the ``slurm`` queue with Slurm's power saving
(``greenslurm.sim.engine.slurm_power``) comes to what Slurm 22.05 did.

Reads recordings made by ``bench/slurm_power_reference.py`` (or records fresh ones with
``--record N``), replays each with its recorded slurm.conf (SuspendTime, SuspendTimeout, ... read from
it), every node that may be powered down POWERED_DOWN at the start (as in the recording), the boot
time the recording measured (median from a resume to the node responding), slurmctld's start (its
30-second checks of configuring jobs count from there, held to the chain to the checks it logged),
the backfill thread's looks and the power-save thread's wake-ups in step with those its log shows
(:func:`backfill_loop`, :func:`power_thread_wakes`; ``--thread-pace-only``: on one pace for the run)
and slurmctld's clock at the recording's start (the will-run test's groups close on it), and
reports per recording: mean wait
(recorded, replayed, difference), jobs starting within 2 s of Slurm's start and on the same nodes,
the jobs' times from slurmctld's log to the millisecond where the recording has them (sacct's whole
seconds with ``--whole-seconds``: a job that started at 110.9 s and one at 110.0 s look alike),
suspended node-seconds (powering down or powered down, from the first submission to the last end),
suspends and resumes.  Targets: mean wait and suspended node-seconds within 5 % of real Slurm.

    python bench/bench_slurm_power.py tests/data/slurm-power/seed1.json.gz
    python bench/bench_slurm_power.py --record 3 --first-seed 101 --keep /tmp/power-fresh   # ~6 min each
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_slurm_fidelity import jobs_of  # noqa: E402
from greenslurm.clustermodel import JobSpec  # noqa: E402
from greenslurm.sim.engine.replay import Replay  # noqa: E402
from greenslurm.sim.engine.slurm_model import SlurmScheduling  # noqa: E402
from greenslurm.sim.engine.slurm_power import slurm_power_machine_factory
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving  # noqa: E402
from greenslurm.sim.engine.slurmctld_loop import BACKGROUND_DRIFT, BackgroundLoop, loop_from_checks  # noqa: E402
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf_text  # noqa: E402
from greenslurm.traces.slurmctld_log import one_per_check, read_log  # noqa: E402

START_TOLERANCE_S = 2.0
# the power-save thread's log line of a scan comes after its check of last_node_update and its scan
# (it reaps its programs, scans under the node lock and forks SuspendProgram/ResumeProgram before it
# logs "pid N suspending nodes"): in the logs of every recording, an allocation by backfill up to
# 0.8 ms before a logged scan was missed by it (14 of 14), one 1.0 ms or more before was seen in 34
# of 36 (bench/power_thread_sides.py): the thread woke between the two before its log line
POWER_LOG_LAG_S = 0.0009


def load(where: Path) -> dict:
    """A recording, with its backfill thread's looks (``backfill_looks``, trace seconds) from the
    slurmctld log kept beside it (``seedN.slurmctld.log.gz`` next to ``seedN.json.gz``, or
    ``slurmctld.log.gz`` in the recorder's folder) where there is one."""
    path = Path(where)
    if path.is_dir():
        path = path / "schedule.json"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        recording = json.load(handle)
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    for log in (path.with_name(f"{stem}.slurmctld.log.gz"), path.with_name("slurmctld.log.gz")):
        if log.is_file() and "backfill_looks" not in recording:
            zero = int(recording["t0_epoch"])
            recording["backfill_looks"] = [round(at - zero, 3) for at in read_log(str(log)).looks]
            break
    if "backfill_looks" not in recording and any("alloc" in (job.get("log_times") or {}) for job in recording["jobs"]):
        recording["backfill_looks"] = backfill_starts(recording)
    return recording


def backfill_starts(recording: dict) -> list[float]:
    """The backfill thread's looks that started a job, for a recording kept without slurmctld's log:
    the allocation times (slurmctld's, in the recording) of the jobs sacct says backfill started, one
    per look.  On the ten recordings kept with their log these are the log's looks (``_start_job``)
    in eight; in two one look of 18 and two of 20 are missing.

    >>> backfill_starts({"jobs": [{"scheduler": "Backfill", "log_times": {"alloc": 3.88}},
    ...     {"scheduler": "Main", "log_times": {"alloc": 4.2}}, {"scheduler": "Backfill", "log_times": {"alloc": 3.881}}]})
    [3.88]
    """
    return one_per_check(sorted(job["log_times"]["alloc"] for job in recording["jobs"]
                                if job.get("scheduler") == "Backfill" and "alloc" in (job.get("log_times") or {})))


def measured_boot_s(recording: dict) -> float:
    """The median time from a node's resume to its slurmd responding, as slurmctld logged them."""
    pending, boots = {}, []
    for at, kind, node in recording["power_events"]:
        if kind == "resume":
            pending[node] = at
        elif kind == "up" and node in pending:
            boots.append(at - pending.pop(node))
    return statistics.median(boots) if boots else float(recording.get("boot_sleep_s", 0.0))


def power_tick_phase_s(recording: dict) -> float:
    """Where in the second slurmctld's power-save thread woke: the fraction of its first logged
    suspend or resume (before the workload: the idle cluster's nodes powered down), 0 without one.

    >>> power_tick_phase_s({"power_events": [[-10.082, "suspend", "n2"], [3.5, "up", "n2"]]})
    0.918
    """
    for at, kind, _ in recording.get("power_events", ()):
        if kind in ("suspend", "resume"):
            return round(at - math.floor(at), 3) % 1.0
    return 0.0


def power_thread_scans(recording: dict) -> list[float]:
    """The moments of the power-save thread's scans that logged a suspend or resume (the lines of one
    scan counted once), in trace seconds.

    >>> power_thread_scans({"power_events": [[-10.159, "suspend", "n2"], [4.857, "resume", "n2"],
    ...                                     [4.857, "resume", "n3"], [9.906, "up", "n2"]]})
    [-10.159, 4.857]
    """
    return one_per_check(at for at, kind, _ in recording.get("power_events", ()) if kind in ("suspend", "resume"))


def power_thread_wakes(recording: dict) -> tuple[float, ...]:
    """The moments the power-save thread woke and read the node changes, as the replay takes them:
    :data:`POWER_LOG_LAG_S` before each scan it logged.

    >>> power_thread_wakes({"power_events": [[-10.159, "suspend", "n2"], [4.857, "resume", "n2"]]})
    (-10.1599, 4.8561)
    """
    return tuple(round(at - POWER_LOG_LAG_S, 6) for at in power_thread_scans(recording))


def power_thread_loop(recording: dict) -> BackgroundLoop | None:
    """The power-save thread's wake-ups as its logged suspends and resumes show them (each scan that
    acted logs at its wake-up; a pass is a second's sleep and its work, so they creep through the
    second): their pace from pairs at most 170 s apart, whole seconds apart in passes, anchored at
    the first (:func:`~greenslurm.sim.engine.slurmctld_loop.loop_from_checks`); None without two
    such scans.

    >>> loop = power_thread_loop({"power_events": [[-10.159, "suspend", "n2"], [4.857, "resume", "n2"],
    ...                                            [9.906, "up", "n2"], [149.9, "suspend", "n4"]]})
    >>> round(loop.start_s, 3), round(loop.drift, 5)         # 160 passes in 160.059 s
    (-10.159, 0.00037)
    """
    scans = power_thread_scans(recording)
    if not scans:
        return None
    try:
        return loop_from_checks(scans, scans[0])
    except ValueError:
        return None


def logged_checks(recording: dict) -> list[float]:
    """The moments of slurmctld's 30-second checks that its log shows: a job's start reset once its
    powered-down nodes were up ("Resetting JobId=... start time for node power up", logged in
    ``job_time_limit``); jobs reset in one check counted once.

    >>> logged_checks({"jobs": [{"log_times": {"alloc": 1.5, "start": 29.96}}, {"log_times": {"alloc": 2.0,
    ...     "start": 29.961}}, {"log_times": {"alloc": 40.0, "start": 40.0}}, {"log_times": {"alloc": 50.1, "start": 149.3}}]})
    [29.96, 149.3]
    """
    return one_per_check(sorted(r["log_times"]["start"] for r in recording["jobs"]
                                if "alloc" in (r.get("log_times") or {})
                                and r["log_times"]["start"] > r["log_times"]["alloc"]))


def recorded_threads(recording: dict, scheduling: SlurmScheduling | None = None,
                     from_start: bool = False) -> SlurmScheduling:
    """The settings (Slurm 22.05's defaults without ``scheduling``) with slurmctld's threads timed as
    the recording's log shows them, the way a site's replay times them from its own log
    (:meth:`~greenslurm.sim.engine.slurm_model.SlurmScheduling.with_logged_threads`: a site reads
    the same log the same way, docs/slurm-reference.md, "Power saving"), but for where the
    background loop's checks come from: the recording's job times (:func:`logged_checks`, the checks
    the kept log shows); the backfill thread's looks are its log's (``backfill_looks``).  From
    slurmctld's start, the loop at :data:`BACKGROUND_DRIFT` and backfill on its phase, with
    ``from_start``; the settings unchanged for a recording without slurmctld's log (the replay's
    threads then wake from the first submission).

    >>> s = recorded_threads({"ctld_start_trace_s": -30.5, "jobs": [
    ...     {"log_times": {"alloc": 1.0, "start": 29.964}}, {"log_times": {"alloc": 100.0, "start": 149.311}}]})
    >>> round(s.background_drift, 5), round(s.background_start_s, 3)   # 119 passes of 1.00292 s; 60 before 29.964
    (0.00292, -30.211)
    >>> s = recorded_threads({"ctld_start_trace_s": -30.0, "backfill_looks": [2.855, 3.856, 7.857, 84.884], "jobs": []})
    >>> round(s.background_drift, 5), round(s.backfill_drift, 5), round(s.backfill_start_s % 1, 3)   # 82 looks in 82.029 s
    (0.003, 0.00035, 0.843)
    """
    scheduling = SlurmScheduling() if scheduling is None else scheduling
    start = recording.get("ctld_start_trace_s")
    if start is None:
        return scheduling
    if from_start:
        return scheduling.with_logged_threads(start)
    return scheduling.with_logged_threads(start, logged_checks(recording), recording.get("backfill_looks") or ())


def background_loop(recording: dict, from_start: bool = False) -> BackgroundLoop | None:
    """slurmctld's background loop as :func:`recorded_threads` times it; None for a recording without
    slurmctld's log."""
    s = recorded_threads(recording, from_start=from_start)
    return None if s.background_start_s is None else BackgroundLoop(s.background_start_s, drift=s.background_drift)


def backfill_loop(recording: dict) -> BackgroundLoop | None:
    """The backfill thread's loop as :func:`recorded_threads` times it; None without slurmctld's log
    or two looks that started a job close enough to give its pace."""
    s = recorded_threads(recording)
    return None if s.backfill_start_s is None else BackgroundLoop(s.backfill_start_s, drift=s.backfill_drift)


def precise(recording: dict) -> bool:
    """Whether the recording has slurmctld's millisecond times of every job (``log_times``)."""
    return all({"submit", "start", "end"} <= set(r.get("log_times") or {}) for r in recording["jobs"])


def job_times(recording: dict, whole_seconds: bool = False) -> dict[str, tuple[float, float, float]]:
    """Per job: (submit, start, end) in trace seconds, from slurmctld's log to the millisecond where
    the recording has them (unless ``whole_seconds``), else the jobcomp records' whole seconds."""
    if precise(recording) and not whole_seconds:
        return {r["name"]: (r["log_times"]["submit"], r["log_times"]["start"], r["log_times"]["end"])
                for r in recording["jobs"]}
    return {r["name"]: (float(r["submit_trace_s"]), float(r["start_trace_s"]), float(r["end_trace_s"]))
            for r in recording["jobs"]}


def workload(recording: dict, whole_seconds: bool = False) -> list[JobSpec]:
    """The recorded jobs as the replay's input: their submission, time limit and elapsed time."""
    times = job_times(recording, whole_seconds)
    return [replace(job, submit_s=times[job.job_id][0], runtime_s=times[job.job_id][2] - times[job.job_id][1])
            for job in jobs_of(recording)]


def clock_at_zero_s(recording: dict) -> float:
    """slurmctld's clock at the recording's trace second 0: its times count from the whole second
    the workload started in (the log's and jobcomp's alike).

    >>> clock_at_zero_s({"t0_epoch": 1795874198.357})
    1795874198.0
    """
    return float(int(recording["t0_epoch"]))


def replay(recording: dict, boot_s: float | None = None, whole_seconds: bool = False, submit_delay_s: float = 0.0,
           loop_from_start: bool = False, thread_pace_only: bool = False):
    """(records, machine, cluster) of the recorded workload replayed in the slurm queue with the
    recorded slurm.conf's power saving and slurmctld's background loop as its log shows it
    (:func:`background_loop`: its main scheduler's passes and its 30-second checks);
    ``submit_delay_s``: Slurm's latency from a submission to the first pass that tries the job (0:
    the replay's own, a pass at the submission); the power-save thread wakes in step with its
    logged scans (:func:`power_thread_scans`), or on their one average pace (``thread_pace_only``)."""
    conf = parse_slurm_conf_text(recording["slurm_conf"])
    cluster = cluster_from_slurm_conf(conf)
    scheduling = recorded_threads(recording, replace(SlurmScheduling.from_conf(conf), submit_delay_s=submit_delay_s,
                                                     clock_at_zero_s=clock_at_zero_s(recording)), loop_from_start)
    start = scheduling.background_start_s
    drift = BACKGROUND_DRIFT if start is None else scheduling.background_drift
    saving = SlurmPowerSaving.from_conf(conf, boot_s=measured_boot_s(recording) if boot_s is None else boot_s,
                                        start_powered_down=True, slurmctld_start_s=start,
                                        tick_phase_s=power_tick_phase_s(recording), background_drift=drift)
    thread = None if loop_from_start else power_thread_loop(recording)
    if thread is not None:
        saving = replace(saving, thread_wake_s=thread.start_s, thread_drift=thread.drift,
                         thread_wakes_s=() if thread_pace_only else power_thread_wakes(recording))
    if start is not None and not loop_from_start and not thread_pace_only:
        saving = replace(saving, background_checks_s=tuple(logged_checks(recording)))
    if thread_pace_only:
        scheduling = replace(scheduling, backfill_looks_s=())
    run = Replay(workload(recording, whole_seconds), cluster, "slurm", strategy_options={"scheduling": scheduling},
                 machine_factory=slurm_power_machine_factory(saving))
    result = run.run()
    return result.records, run.machine, cluster


def suspended_node_s(events, names: list[str], initially_off: set[str], end_s: float) -> float:
    """Node-seconds powering down or powered down within [0, end_s]: from each suspend (or the
    start, for ``initially_off``) to the node's next resume.

    >>> suspended_node_s([(10.0, "resume", "a"), (20.0, "suspend", "b")], ["a", "b"], {"a"}, 50.0)
    40.0
    """
    since = {name: (0.0 if name in initially_off else None) for name in names}
    total = 0.0
    for at, kind, name in sorted(events):
        if at > end_s:
            break
        if kind == "suspend" and since[name] is None:
            since[name] = at
        elif kind == "resume" and since[name] is not None:
            total += at - since[name]
            since[name] = None
    return total + sum(end_s - s for s in since.values() if s is not None)


def first_divergence(recording: dict, records, cluster, whole_seconds: bool = False) -> str:
    """The first job, in Slurm's start order, that the replay starts more than 2 s apart from Slurm
    or on other nodes, with its times and nodes in both ("none": every job agrees)."""
    names = [n.name for n in cluster.nodes]
    times = job_times(recording, whole_seconds)
    real_nodes = {r["name"]: sorted(r["node_list"]) for r in recording["jobs"]}
    ours = {r.job_id: r for r in records}
    order = sorted(times, key=lambda name: times[name][1])
    for k, name in enumerate(order):
        nodes = sorted(names[i] for i in ours[name].node_indices)
        if abs(ours[name].start_s - times[name][1]) > START_TOLERANCE_S or nodes != real_nodes[name]:
            return (f"{name}, start {k + 1} of {len(order)} (submitted {times[name][0]:.3f} s): Slurm started it at "
                    f"{times[name][1]:.3f} s on {','.join(real_nodes[name])}, the replay at "
                    f"{ours[name].start_s:.3f} s on {','.join(nodes)}")
    return "none"


def compare(recording: dict, boot_s: float | None = None, whole_seconds: bool = False,
            submit_delay_s: float = 0.0, loop_from_start: bool = False, thread_pace_only: bool = False) -> dict:
    """The replay of one recording against it, as a flat dict."""
    records, machine, cluster = replay(recording, boot_s, whole_seconds, submit_delay_s, loop_from_start,
                                       thread_pace_only)
    names = [n.name for n in cluster.nodes]
    real = {r["name"]: r for r in recording["jobs"]}
    times = job_times(recording, whole_seconds)
    ours = {r.job_id: r for r in records}
    end_s = float(max(end for _, _, end in times.values()))
    waits_real = [times[n][1] - times[n][0] for n in real]
    waits_ours = [ours[n].start_s - ours[n].submit_s for n in real]
    close = sum(abs(ours[n].start_s - times[n][1]) <= START_TOLERANCE_S for n in real)
    same_nodes = sum(sorted(names[i] for i in ours[n].node_indices) == sorted(r["node_list"]) for n, r in real.items())
    off = {names[i] for i, (s, ex) in enumerate(zip(machine.suspend_time_s, machine.excluded))
           if s < float("inf") and not ex}              # POWERED_DOWN when the workload began
    real_events = [(at, kind, node) for at, kind, node in recording["power_events"] if kind in ("suspend", "resume")]
    our_events = [(at, kind, names[node]) for at, kind, node in machine.events]
    real_off = suspended_node_s(real_events, names, off, end_s)
    our_off = suspended_node_s(our_events, names, off, end_s)
    mean_real, mean_ours = statistics.mean(waits_real), statistics.mean(waits_ours)
    return {"jobs": len(real), "boot_s": machine.boot_s, "loop_drift": machine.saving.background_drift,
            "mean_wait_real_s": mean_real, "mean_wait_replay_s": mean_ours,
            "mean_wait_diff": (mean_ours - mean_real) / mean_real if mean_real else 0.0,
            "within_2s": close, "same_nodes": same_nodes,
            "suspended_node_s_real": real_off, "suspended_node_s_replay": our_off,
            "suspended_diff": (our_off - real_off) / real_off if real_off else 0.0,
            "suspends_real": sum(k == "suspend" for a, k, _ in real_events if 0 <= a <= end_s),
            "suspends_replay": sum(k == "suspend" for a, k, _ in our_events if 0 <= a <= end_s),
            "resumes_real": sum(k == "resume" for a, k, _ in real_events if 0 <= a <= end_s),
            "resumes_replay": sum(k == "resume" for a, k, _ in our_events if 0 <= a <= end_s),
            "first_divergence": first_divergence(recording, records, cluster, whole_seconds)}


def compare_real(first: dict, second: dict) -> dict:
    """Two recordings of one workload against each other (real Slurm against itself): the second in
    the place of the replay, with the figures of :func:`compare`."""
    names = sorted({node for r in first["jobs"] + second["jobs"] for node in r["node_list"]} |
                   {node for rec in (first, second) for _, _, node in rec["power_events"]})
    conf = parse_slurm_conf_text(first["slurm_conf"])
    cluster = cluster_from_slurm_conf(conf)
    saving = SlurmPowerSaving.from_conf(conf)
    times_1, times_2 = job_times(first), job_times(second)
    end_s = float(max(end for _, _, end in times_1.values()))
    suspended_at_start = {n.name for n, ex in zip(cluster.nodes, saving.node_settings(cluster)[3]) if not ex}
    figures = {}
    for key, rec, times in (("real", first, times_1), ("replay", second, times_2)):
        events = [(at, kind, node) for at, kind, node in rec["power_events"] if kind in ("suspend", "resume")]
        figures[key] = (statistics.mean(times[n][1] - times[n][0] for n in times_1),
                        suspended_node_s(events, names, suspended_at_start & set(names), end_s),
                        sum(k == "suspend" for a, k, _ in events if 0 <= a <= end_s),
                        sum(k == "resume" for a, k, _ in events if 0 <= a <= end_s))
    (wait_1, off_1, sus_1, res_1), (wait_2, off_2, sus_2, res_2) = figures["real"], figures["replay"]
    nodes_1 = {r["name"]: sorted(r["node_list"]) for r in first["jobs"]}
    return {"jobs": len(times_1), "boot_s": measured_boot_s(second), "mean_wait_real_s": wait_1,
            "mean_wait_replay_s": wait_2, "mean_wait_diff": (wait_2 - wait_1) / wait_1 if wait_1 else 0.0,
            "within_2s": sum(abs(times_2[n][1] - times_1[n][1]) <= START_TOLERANCE_S for n in times_1),
            "same_nodes": sum(sorted(r["node_list"]) == nodes_1[r["name"]] for r in second["jobs"]),
            "suspended_node_s_real": off_1, "suspended_node_s_replay": off_2,
            "suspended_diff": (off_2 - off_1) / off_1 if off_1 else 0.0,
            "suspends_real": sus_1, "suspends_replay": sus_2, "resumes_real": res_1, "resumes_replay": res_2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="*", type=Path, help="recordings (folders or schedule.json[.gz])")
    parser.add_argument("--record", type=int, default=0, metavar="N", help="record N fresh workloads first")
    parser.add_argument("--first-seed", type=int, default=101, help="seed of the first fresh workload")
    parser.add_argument("--jobs", type=int, default=24, help="jobs per fresh workload (default 24)")
    parser.add_argument("--keep", type=Path, default=None, help="folder for the fresh recordings (default: a temp folder)")
    parser.add_argument("--whole-seconds", action="store_true", help="the jobs' times as sacct has them (whole "
                        "seconds) instead of slurmctld's log (milliseconds)")
    parser.add_argument("--against", type=Path, default=None, metavar="RECORDING",
                        help="a second recording of the first recording's workload: real Slurm against itself "
                        "(its row in the replay's place)")
    parser.add_argument("--first-divergence", action="store_true",
                        help="print, per recording, the first job the replay starts apart from Slurm")
    parser.add_argument("--loop-from-start", action="store_true",
                        help="slurmctld's background loop from its first log line with a pass of 1.003 s "
                        "(the development recordings' middle) instead of the loop its logged checks show")
    parser.add_argument("--thread-pace-only", action="store_true",
                        help="the power-save thread's wake-ups and backfill's looks on one average pace "
                        "from their logged scans and looks instead of in step with each of them, and "
                        "slurmctld's 30-second checks on its loop's pace alone instead of on the chain to "
                        "the checks its log shows (the bench's assumptions before)")
    parser.add_argument("--submit-delays", type=float, nargs="+", default=None, metavar="S",
                        help="instead of the table: mean wait and suspended node-seconds differences per "
                        "recording when Slurm's first pass after a submission comes S seconds later (a "
                        "sensitivity: how much a fraction of a second moves the figures)")
    args = parser.parse_args(argv)
    recordings = [(str(p), load(p)) for p in args.recordings]
    if args.submit_delays:
        print("| submit delay s | " + " | ".join(Path(name).name for name, _ in recordings) + " |")
        print("|---|" + "---|" * len(recordings))
        for delay in args.submit_delays:
            cells = [compare(recording, whole_seconds=args.whole_seconds, submit_delay_s=delay,
                             loop_from_start=args.loop_from_start)
                     for _, recording in recordings]
            print(f"| {delay:g} | " + " | ".join(f"{c['mean_wait_diff']:+.1%} / {c['suspended_diff']:+.1%}"
                                                  for c in cells) + " |")
        return 0
    if args.record:
        import tempfile
        from slurm_power_reference import power_workload, record
        base = args.keep or Path(tempfile.mkdtemp(prefix="greenslurm-power-bench-"))
        for seed in range(args.first_seed, args.first_seed + args.record):
            out = base / f"seed{seed}"
            recordings.append((str(out), record(power_workload(args.jobs, seed), out)))
    print("| recording | jobs | boot s | loop ms/s | mean wait Slurm / replay (diff) | within 2 s | same nodes | "
          "suspended node-s Slurm / replay (diff) | suspends | resumes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, recording in recordings:
        c = compare(recording, whole_seconds=args.whole_seconds, loop_from_start=args.loop_from_start,
                    thread_pace_only=args.thread_pace_only)
        print(f"| {Path(name).name} | {c['jobs']} | {c['boot_s']:.2f} | {c['loop_drift'] * 1000:.1f} | "
              f"{c['mean_wait_real_s']:.1f} / "
              f"{c['mean_wait_replay_s']:.1f} ({c['mean_wait_diff']:+.1%}) | {c['within_2s']} | {c['same_nodes']} | "
              f"{c['suspended_node_s_real']:.0f} / {c['suspended_node_s_replay']:.0f} ({c['suspended_diff']:+.1%}) | "
              f"{c['suspends_real']} / {c['suspends_replay']} | {c['resumes_real']} / {c['resumes_replay']} |")
        if args.first_divergence:
            print(f"|   first divergence: {c['first_divergence']} |")
    if args.against is not None and recordings:
        name, first = recordings[0]
        c = compare_real(first, load(args.against))
        print(f"| {Path(name).name} against {Path(args.against).name} (Slurm / Slurm) | {c['jobs']} | {c['boot_s']:.2f} | | "
              f"{c['mean_wait_real_s']:.1f} / {c['mean_wait_replay_s']:.1f} ({c['mean_wait_diff']:+.1%}) | "
              f"{c['within_2s']} | {c['same_nodes']} | {c['suspended_node_s_real']:.0f} / "
              f"{c['suspended_node_s_replay']:.0f} ({c['suspended_diff']:+.1%}) | {c['suspends_real']} / "
              f"{c['suspends_replay']} | {c['resumes_real']} / {c['resumes_replay']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
