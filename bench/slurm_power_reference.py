"""What real Slurm 22.05 does with power saving on: the reference side of the power-saving validation.

A small cluster (four nodes of 4 CPUs, one partition) runs on loopback (``tests/slurm_cluster.py``)
with Slurm's power saving on: SuspendProgram stops a node's slurmd ("power off"), ResumeProgram
starts it again after ``--boot-sleep`` seconds in a fresh time namespace, so that slurmctld sees a
node that really rebooted (as in ``tests/test_hook_power_live.py``).  slurmctld logs every suspend and
resume (DebugFlags=Power).  The workload starts once every node that may be powered down is
POWERED_DOWN (the steady state of an idle cluster) and runs in real time (speedup 1); each job is
an ``exec sleep`` of its runtime.

Recorded per job (as ``bench/slurm_reference.py`` records: submit, start, end, nodes; and
``log_times``: submission, allocation, start and end as slurmctld logged them, to the millisecond)
plus the backfill thread's looks that started a job (``backfill_looks``, trace seconds), the
power events (``power_events``: trace seconds, "suspend" or "resume", node) and when each node was
seen up again (``booted``), into ``schedule.json`` with the slurm.conf slurmctld read.

    python bench/slurm_power_reference.py --seed 1 --out /tmp/power-1        # about 5 minutes
    python bench/slurm_power_reference.py --seed 2 --jobs 30 --out /tmp/power-2

Replay and compare with ``bench/bench_slurm_power.py``.  Needs root and the Debian Slurm packages.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from slurm_cluster import NodeDef, SlurmCluster, kill_restarted_slurmd, shared_root, skip_reason  # noqa: E402
from slurm_reference import RefJob, _all_done, _collect, _sbatch_args  # noqa: E402
from greenslurm.traces.slurm_conf import expand_hostlist  # noqa: E402
from greenslurm.traces.slurmctld_log import backfill_looks_s  # noqa: E402

NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))
PARTITIONS = ("PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP",)
SCHEDULER = ("SchedulerType=sched/backfill",
             "SchedulerParameters=sched_interval=1,bf_interval=1,bf_resolution=1,bf_window=1440,bf_max_job_test=1000")
# the power-saving settings of the recordings (the replay reads them back from the recorded slurm.conf)
POWER = ("SuspendTime=15", "SuspendTimeout=3", "ResumeTimeout=30", "SuspendRate=0", "ResumeRate=0",
         "SuspendExcNodes=n1", "DebugFlags=Power", "SlurmctldDebug=verbose")
# --backfill-log: what backfill planned for each job and where cons_tres placed it, at debug level
# (more log lines, so a development recording, not one to compare with those above)
BACKFILL_LOG = ("DebugFlags=Power,Backfill,BackfillMap,SelectType", "SlurmctldDebug=debug")


def power_settings(backfill_log: bool = False) -> tuple[str, ...]:
    """The recordings' power-saving settings, with backfill's and cons_tres's debug log if asked.

    >>> [s for s in power_settings(True) if s.startswith(("Debug", "SlurmctldDebug"))]
    ['DebugFlags=Power,Backfill,BackfillMap,SelectType', 'SlurmctldDebug=debug']
    >>> power_settings() == POWER
    True
    """
    if not backfill_log:
        return POWER
    return (*(s for s in POWER if not s.startswith(("DebugFlags=", "SlurmctldDebug="))), *BACKFILL_LOG)

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] ")
_LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (?:.*power_save: pid \d+ (suspending|waking) "
                       r"nodes (\S+)|Node (\S+) now responding)")


def log_epoch(stamp: str) -> float:
    whole, _, frac = stamp.partition(".")
    return time.mktime(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


def power_workload(count: int = 24, seed: int = 1) -> list[RefJob]:
    """``count`` jobs in bursts of 2-6 with idle gaps of 25-60 s between bursts (long enough for
    nodes to be powered down), 1-8 tasks (over 4: two nodes), runtimes 5-30 s, limits 1-2 minutes;
    deterministic in ``seed``."""
    rng = random.Random(seed)
    jobs, t, i = [], 2.0, 0
    while i < count:
        for _ in range(min(rng.randint(2, 6), count - i)):
            tasks = rng.choice((1, 2, 4, 4, 3, 8))
            jobs.append(RefJob(name=f"p{i:02d}", submit_s=round(t, 1), partition="batch", tasks=tasks,
                               nodes=2 if tasks > 4 else 0, time_limit_s=60.0 * rng.choice((1, 2)),
                               runtime_s=float(rng.randint(5, 30))))
            t += rng.uniform(0.5, 4.0)
            i += 1
        t += rng.uniform(25.0, 60.0)
    return jobs


def node_commands(root: Path, conf: Path, boot_sleep_s: float) -> tuple[Path, Path]:
    """SuspendProgram and ResumeProgram: stop a node's slurmd; start it after a boot delay."""
    run = conf.parent.parent / "run"
    off, on = root / "power-off", root / "power-on"
    off.write_text(f"""#!/bin/sh
for node in $(SLURM_CONF={conf} /usr/bin/scontrol show hostnames "$1"); do
    pid=$(cat {run}/slurmd-$node.pid) && kill "$pid"
done
""")
    on.write_text(f"""#!/bin/sh
for node in $(SLURM_CONF={conf} /usr/bin/scontrol show hostnames "$1"); do
    (sleep {boot_sleep_s}
     up=$(cut -d. -f1 /proc/uptime)
     cd / && PATH=/usr/sbin:$PATH SLURM_CONF={conf} setsid unshare --time --boottime -$up slurmd -N "$node" -f {conf} \\
         </dev/null >>{root}/slurmd-$node.out 2>&1) &
done
""")
    for path in (off, on):
        os.chmod(path, 0o755)
    return off, on


def node_states(cluster: SlurmCluster) -> dict[str, str]:
    out = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", check=False, timeout=10).stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def power_events(log: str, t0: int) -> list[tuple[float, str, str]]:
    """(trace seconds, "suspend", "resume" or "up", node) from slurmctld's DebugFlags=Power lines and
    its "now responding" lines (a node back after its boot).

    >>> [e[1:] for e in power_events("[2026-01-01T00:00:12.500] power_save: pid 7 suspending nodes n[2-3]\\n"
    ...                              "[2026-01-01T00:00:19.000] Node n2 now responding", 0)]
    [('suspend', 'n2'), ('suspend', 'n3'), ('up', 'n2')]
    """
    events = []
    for line in log.splitlines():
        match = _LOG_LINE.match(line)
        if not match:
            continue
        stamp, verb, nodes, responding = match.groups()
        at = round(log_epoch(stamp) - t0, 3)
        if responding:
            events.append((at, "up", responding))
            continue
        for node in expand_hostlist(nodes):
            events.append((at, "suspend" if verb == "suspending" else "resume", node))
    return events


_JOB_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (?:_slurm_rpc_submit_batch_job: JobId=(\d+) |"
                       r"sched: Allocate JobId=(\d+) |sched/backfill: _start_job: Started JobId=(\d+) |"
                       r"Resetting JobId=(\d+) start time|_job_complete: JobId=(\d+) done)")


def job_times(log: str, t0: int) -> dict[str, dict[str, float]]:
    """Per job id: when slurmctld logged its submission, allocation, start (the allocation, or the
    reset once its powered-down nodes were up) and end, in trace seconds to the millisecond (the
    jobcomp records have whole seconds).

    >>> job_times("[2026-01-01T00:00:01.250] _slurm_rpc_submit_batch_job: JobId=3 InitPrio=1 usec=5\\n"
    ...           "[2026-01-01T00:00:01.500] sched: Allocate JobId=3 NodeList=n2 #CPUs=1 Partition=p\\n"
    ...           "[2026-01-01T00:00:30.000] Resetting JobId=3 start time for node power up\\n"
    ...           "[2026-01-01T00:00:40.125] _job_complete: JobId=3 done", int(time.mktime((2026, 1, 1, 0, 0, 0, 0, 0, -1))))
    {'3': {'submit': 1.25, 'alloc': 1.5, 'start': 30.0, 'end': 40.125}}
    """
    times: dict[str, dict[str, float]] = {}
    for line in log.splitlines():
        match = _JOB_LINE.match(line)
        if not match:
            continue
        stamp, submitted, allocated, backfilled, reset, ended = match.groups()
        at = round(log_epoch(stamp) - t0, 3)
        if submitted:
            times.setdefault(submitted, {})["submit"] = at
        elif allocated or backfilled:
            entry = times.setdefault(allocated or backfilled, {})
            entry["alloc"] = entry["start"] = at
        elif reset:
            times.setdefault(reset, {})["start"] = at
        else:
            times.setdefault(ended, {})["end"] = at
    return times


def ctld_start(log: str, t0: int) -> float:
    """When slurmctld started (its log's first line), in trace seconds: its background checks
    (job_time_limit every 30 s) count from there."""
    for line in log.splitlines():
        match = _STAMP.match(line)
        if match:
            return round(log_epoch(match.group(1)) - t0, 3)
    raise ValueError("an empty slurmctld log")


def record(jobs: list[RefJob], out: Path, boot_sleep_s: float = 5.0, timeout_s: float = 900.0,
           backfill_log: bool = False) -> dict:
    reason = skip_reason()
    if reason:
        raise RuntimeError(reason)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    root = shared_root("greenslurm-power-ref-")
    jobcomp = root / "jobcomp.txt"
    conf = root / "slurm" / "etc" / "slurm.conf"
    off, on = node_commands(root, conf, boot_sleep_s)
    extra = [*SCHEDULER, *power_settings(backfill_log), f"SuspendProgram={off}", f"ResumeProgram={on}", "JobCompType=jobcomp/filetxt",
             f"JobCompLoc={jobcomp}", "MinJobAge=3600"]
    cluster = SlurmCluster(root / "slurm", NODES, extra_conf=extra, partitions=PARTITIONS)
    ids: dict[str, str] = {}
    samples: list[tuple[float, dict[str, str]]] = []
    try:
        cluster.start()
        deadline = time.monotonic() + 120
        while True:                    # every node but the excluded one powered down, and allocatable
            states = node_states(cluster)
            if sum(s.endswith("~") or "POWERED_DOWN" in s.upper() for s in states.values()) == len(NODES) - 1 \
                    and not any("%" in s or "#" in s or "POWERING" in s.upper() for s in states.values()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not powered down: {states}")
            time.sleep(0.5)
        t0_mono = time.monotonic()
        t0 = time.time()
        pending = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
        while True:
            now = time.monotonic() - t0_mono
            while pending and jobs[pending[0]].submit_s <= now:
                job = jobs[pending.pop(0)]
                result = cluster.sbatch(*_sbatch_args(job, 1.0), script=f"#!/bin/sh\nexec sleep {job.runtime_s:.3f}\n")
                if result.returncode != 0:
                    raise RuntimeError(f"sbatch of {job.name} failed: {result.stderr.strip()}")
                ids[job.name] = result.stdout.strip().split(";")[0]
            samples.append((round(time.time() - int(t0), 2), node_states(cluster)))
            if not pending and _all_done(cluster, jobcomp, set(ids.values())):
                break
            if time.monotonic() - t0_mono > timeout_s:
                raise RuntimeError(f"jobs not done after {timeout_s} s; see {root}")
            time.sleep(0.5)
        conf_text = cluster.conf.read_text()
        records = _collect(cluster, jobcomp, jobs, ids, {}, t0, 1.0)
        log = cluster.log_text()
        events = power_events(log, int(t0))
        started = ctld_start(log, int(t0))
        logged = job_times(log, int(t0))
        looks = [round(at - int(t0), 3) for at in backfill_looks_s(log)]
        for entry in records:
            entry["log_times"] = logged.get(str(entry["job_id"]), {})
    finally:
        kill_restarted_slurmd(conf)
        cluster.stop()
        kill_restarted_slurmd(conf)
    recording = {"variant": "power-save", "speedup": 1.0, "t0_epoch": t0, "boot_sleep_s": boot_sleep_s,
                 "slurm_conf": conf_text, "jobs": records, "power_events": events, "ctld_start_trace_s": started,
                 "backfill_looks": looks,
                 "samples": samples}
    (out / "slurm.conf").write_text(conf_text)
    (out / "schedule.json").write_text(json.dumps(recording, indent=1) + "\n")
    with gzip.open(out / "slurmctld.log.gz", "wt") as handle:     # the whole log, for reading what Slurm did
        handle.write(log)
    shutil.rmtree(root, ignore_errors=True)
    return recording


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="the workload's seed (default 1)")
    parser.add_argument("--jobs", type=int, default=24, help="jobs in the workload (default 24)")
    parser.add_argument("--boot-sleep", type=float, default=5.0, help="seconds ResumeProgram waits before "
                        "starting slurmd (default 5)")
    parser.add_argument("--out", type=Path, required=True, help="folder for schedule.json and slurm.conf")
    parser.add_argument("--backfill-log", action="store_true", help="log what backfill planned for each job "
                        "and where cons_tres placed it (DebugFlags Backfill, BackfillMap and SelectType at "
                        "SlurmctldDebug=debug): for reading why Slurm started a job; slower logging, so not "
                        "a recording to compare")
    args = parser.parse_args(argv)
    jobs = power_workload(args.jobs, args.seed)
    recording = record(jobs, args.out, args.boot_sleep, backfill_log=args.backfill_log)
    print(f"{len(recording['jobs'])} jobs, {len(recording['power_events'])} power events -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
