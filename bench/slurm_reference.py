"""What real Slurm 22.05 does with a workload: the reference side of the replay validation.

A small workload (tens of jobs) is run on real daemons (munged, slurmctld, one slurmd per node, all
on loopback: ``tests/slurm_cluster.py``) under one slurm.conf variant (sched/builtin, or
sched/backfill with fine or coarse bf_* parameters), with priority/multifactor and two partitions.
Every job is an ``exec sleep`` of its compressed runtime, submitted at its compressed offset, and
the schedule Slurm made is recorded per job: submit, eligible, start and end (epoch seconds, from
jobcomp/filetxt), nodes, CPUs per node, partition, priority and its factors (the last ``sprio``
sample while pending; the priority ``scontrol`` shows afterwards), which scheduler started it
(``Main`` or ``Backfill``).

Time is compressed by ``speedup`` (trace seconds per real second; default 60, one trace hour is one
real minute).  Slurm counts time limits in whole minutes, so a limit of L trace seconds becomes
ceil(L / speedup / 60) real minutes; with speedup 60 limits that are whole trace hours stay exact,
and a runtime stays the same fraction of its limit, which is what backfill's decisions depend on.
Rounded limits are flagged per job.

    python bench/slurm_reference.py --variant backfill-fine --out /tmp/ref-fine
    python bench/slurm_reference.py --workload jobs.csv --variant builtin --out /tmp/ref-builtin
    python bench/slurm_reference.py --variant all --out /tmp/ref     # one folder per variant

The workload CSV has the header ``name,submit_s,partition,nodes,tasks,cpus_per_task,time_limit_s,
runtime_s,user,account,qos,nice`` (times in trace seconds; ``nodes`` 0 lets Slurm choose; user,
account, qos and nice may be empty).  Output per variant: ``schedule.json`` (the settings, the
slurm.conf text and one record per job), ``schedule.csv`` (the same records, flat) and
``slurm.conf`` (exactly the file slurmctld read).  Needs root and the Debian Slurm packages.

Slurm's lines are read with the project's own parsers: node lists with
:func:`greenslurm.traces.slurm_hostlist.expand_hostlist`, jobcomp/filetxt and ``scontrol -o`` records
with ``scontrol_fields`` of ``tests/slurm_cluster.py``:

>>> expand_hostlist("n[1-3,5],m2")
['n1', 'n2', 'n3', 'n5', 'm2']
>>> expand_hostlist("n07")
['n07']
>>> expand_hostlist("")
[]
>>> scontrol_fields("JobId=3 Partition=b NodeList=n[3-4] WorkDir=/tmp/a b ExitCode=0:0")["WorkDir"]
'/tmp/a b'
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from slurm_cluster import (Accounting, NodeDef, SlurmCluster, accounting_skip_reason, scontrol_fields,  # noqa: E402
                           shared_root, skip_reason)
from greenslurm.traces.slurm_conf import expand_hostlist  # noqa: E402  (Slurm's hostlist syntax)

FIELDS = ("name", "submit_s", "partition", "nodes", "tasks", "cpus_per_task", "time_limit_s", "runtime_s",
          "user", "account", "qos", "nice")
SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class WorkloadError(ValueError):
    """A workload file that cannot be run; the message names the file, line and field."""


@dataclass(frozen=True)
class RefJob:
    """One job of the workload, in trace seconds."""
    name: str
    submit_s: float
    partition: str
    tasks: int
    time_limit_s: float
    runtime_s: float
    nodes: int = 0                # 0: Slurm chooses (as few as fit)
    cpus_per_task: int = 1
    user: str = ""                # without slurmdbd recorded only; with it the (Unix) user that submits
    account: str = ""             # passed with -A (accepted unchecked without accounting)
    qos: str = ""                 # with slurmdbd passed with --qos; without, recorded only (Slurm drops it)
    nice: int = 0                 # --nice, subtracted from the priority


@dataclass(frozen=True)
class Variant:
    """A scheduler setting: SchedulerType and SchedulerParameters."""
    name: str
    scheduler: str
    parameters: tuple[str, ...]

    def conf_lines(self) -> list[str]:
        return [f"SchedulerType=sched/{self.scheduler}", "SchedulerParameters=" + ",".join(self.parameters)]


VARIANTS = {
    # the main scheduler only: strictly by priority within a partition, checked at every submit and
    # end, and every sched_interval seconds
    "builtin": Variant("builtin", "builtin", ("sched_interval=1",)),
    # backfill every second, planned in 1 s steps over a day, every pending job tested
    "backfill-fine": Variant("backfill-fine", "backfill",
                             ("sched_interval=1", "bf_interval=1", "bf_resolution=1", "bf_window=1440",
                              "bf_max_job_test=1000")),
    # backfill every 5 s, planned in 60 s steps over 3 minutes, at most 4 jobs tested a cycle
    "backfill-coarse": Variant("backfill-coarse", "backfill",
                               ("sched_interval=1", "bf_interval=5", "bf_resolution=60", "bf_window=3",
                                "bf_max_job_test=4")),
}

# Priority without slurmdbd: job size and partition work; age works but changes only every
# PriorityCalcPeriod (whole minutes), so it is off here; fair-share is ignored ("can only be used
# with SlurmDBD") and QOS do not exist.
PRIORITY_LINES = ("PriorityType=priority/multifactor", "PriorityWeightAge=0", "PriorityWeightFairshare=0",
                  "PriorityWeightJobSize=1000", "PriorityWeightPartition=1000", "PriorityWeightQOS=0",
                  "PriorityFavorSmall=NO", "PriorityCalcPeriod=1")

DEFAULT_NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 7))
DEFAULT_PARTITIONS = (
    "PartitionName=batch Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP PriorityJobFactor=1",
    "PartitionName=express Nodes=n[5-6] MaxTime=INFINITE State=UP PriorityJobFactor=2",
)


# -- pure helpers ---------------------------------------------------------------------------------
def real_limit_minutes(limit_s: float, speedup: float) -> int:
    """A trace time limit as Slurm's whole real minutes (at least 1): ceil(limit / speedup / 60).

    >>> real_limit_minutes(7200, 60)     # two trace hours: 120 real seconds
    2
    >>> real_limit_minutes(5400, 60)     # 90 real seconds round up
    2
    >>> real_limit_minutes(10, 60)
    1
    """
    return max(1, math.ceil(limit_s / speedup / 60 - 1e-9))


def slurm_epoch(stamp: str) -> int | None:
    """A Slurm local time stamp as epoch seconds (None for ``Unknown``/``None``/empty)."""
    if not stamp or not stamp[0].isdigit():
        return None
    return int(time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")))


# -- the workload ---------------------------------------------------------------------------------
def _number(path: Path, line: int, name: str, text: str, kind, low: float) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise WorkloadError(f"{path}:{line}: field {name}: not a number: {text!r}") from None
    if not math.isfinite(value) or value < low:
        raise WorkloadError(f"{path}:{line}: field {name}: must be >= {low}: {text!r}")
    return value


def read_workload(path: Path) -> list[RefJob]:
    """The jobs of a workload CSV (see the module's docstring), checked field by field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise WorkloadError(f"{path}: cannot read: {error}") from None
    rows = csv.DictReader(text.splitlines())
    missing = [name for name in FIELDS[:8] if name not in (rows.fieldnames or [])]
    if missing:
        raise WorkloadError(f"{path}:1: missing column(s): {', '.join(missing)}")
    jobs, seen = [], set()
    for row in rows:
        line = rows.line_num
        values = {key: (row.get(key) or "").strip() for key in FIELDS}
        for name in ("name", "partition", "user", "account", "qos"):
            if (values[name] or name not in ("name", "partition")) and values[name] and not SAFE_NAME.match(values[name]):
                raise WorkloadError(f"{path}:{line}: field {name}: use 1-64 of A-Z a-z 0-9 _ . -: {values[name]!r}")
            if name in ("name", "partition") and not values[name]:
                raise WorkloadError(f"{path}:{line}: field {name}: empty")
        if values["name"] in seen:
            raise WorkloadError(f"{path}:{line}: field name: {values['name']!r} appears twice")
        seen.add(values["name"])
        job = RefJob(name=values["name"], partition=values["partition"],
                     submit_s=_number(path, line, "submit_s", values["submit_s"], float, 0),
                     nodes=int(_number(path, line, "nodes", values["nodes"] or "0", int, 0)),
                     tasks=int(_number(path, line, "tasks", values["tasks"], int, 1)),
                     cpus_per_task=int(_number(path, line, "cpus_per_task", values["cpus_per_task"] or "1", int, 1)),
                     time_limit_s=_number(path, line, "time_limit_s", values["time_limit_s"], float, 1),
                     runtime_s=_number(path, line, "runtime_s", values["runtime_s"], float, 0),
                     user=values["user"], account=values["account"], qos=values["qos"],
                     nice=int(_number(path, line, "nice", values["nice"] or "0", int, 0)))
        if job.nodes > job.tasks:
            raise WorkloadError(f"{path}:{line}: field nodes: {job.nodes} nodes for {job.tasks} tasks")
        jobs.append(job)
    if not jobs:
        raise WorkloadError(f"{path}: no jobs")
    return jobs


def write_workload(jobs: list[RefJob], path: Path) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, FIELDS)
        writer.writeheader()
        for job in jobs:
            writer.writerow({key: getattr(job, key) for key in FIELDS})


def default_workload() -> list[RefJob]:
    """40 jobs on the default site (batch: n1-n4, express: n5-n6, 4 CPUs each), in trace seconds
    at speedup 60: submits every 1-2 trace minutes, runtimes 3-15 trace minutes, limits 1-3 trace
    hours, a few wide jobs that block, many narrow ones that can backfill.  Deterministic."""
    jobs = []
    for i in range(40):
        wide = i % 9 == 4                                  # 4 wide jobs: whole partition
        partition = "express" if i % 4 == 3 else "batch"
        size = (8 if partition == "express" else 16) if wide else (1, 2, 4, 1, 3)[i % 5]
        runtime_min = (3, 6, 10, 4, 15, 8)[i % 6]
        limit_h = 1 if i % 3 else (2 if i % 2 else 3)
        jobs.append(RefJob(name=f"j{i:02d}", submit_s=60.0 * (i + i // 3), partition=partition, tasks=size,
                           nodes=size // 4 if size >= 4 else 0, time_limit_s=3600.0 * limit_h,
                           runtime_s=60.0 * runtime_min, user=f"u{i % 3}", account=f"a{i % 2}"))
    return jobs


def validation_workload(count: int = 300, seed: int = 12) -> list[RefJob]:
    """``count`` jobs for the validation site (:data:`VALIDATION_PARTITIONS`: ``batch`` n1-n4,
    ``express`` n5-n6 with twice the partition factor, ``all`` n1-n6 overlapping both), in trace
    seconds at speedup 60.  Arrivals 0-3 trace minutes apart (a queue builds: about 27 CPUs offered
    on 24), sizes 1-8 CPUs with one job in eight a whole-partition job pinned to its nodes (``-N``),
    runtimes 2-20 trace minutes under limits of 1-4 trace hours (whole hours stay exact at speedup
    60), one job in six with a nice value.  Deterministic for a seed."""
    import random
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(count):
        t += 60.0 * rng.choice((0, 1, 1, 2, 2, 3))
        partition = rng.choices(("batch", "express", "all"), weights=(6, 3, 2))[0]
        node_count = {"batch": 4, "express": 2, "all": 6}[partition]
        if rng.random() < 1 / 8:
            nodes = rng.randint(2, node_count)
            tasks = 4 * nodes
        else:
            nodes = 0
            tasks = rng.choice((1, 1, 2, 2, 3, 4, 6, 8))
        jobs.append(RefJob(name=f"v{i:03d}", submit_s=t, partition=partition, tasks=tasks, nodes=nodes,
                           time_limit_s=3600.0 * rng.choice((1, 1, 2, 3, 4)),
                           runtime_s=60.0 * rng.randint(2, 20), user=f"u{rng.randint(0, 5)}",
                           account=f"a{rng.randint(0, 2)}",
                           nice=rng.choice((0, 0, 0, 0, 0, 50, 200)) if rng.random() < 0.3 else 0))
    return jobs


VALIDATION_PARTITIONS = (*DEFAULT_PARTITIONS,
                         "PartitionName=all Nodes=n[1-6] MaxTime=INFINITE State=UP PriorityJobFactor=1")


# -- running it -----------------------------------------------------------------------------------
@dataclass
class Recording:
    variant: str
    speedup: float
    t0_epoch: float               # when submitting began; trace offsets count from its whole second
    wall_s: float
    slurm_conf: str
    jobs: list[dict] = field(default_factory=list)
    # with slurmdbd: 'sacctmgr show assoc tree -P' and 'sacctmgr show qos -P' at the end, and the
    # passes of the fair-share (decay) thread: when (trace seconds, whole Slurm seconds) and each
    # association's level fair-share then ("account/user": value, as slurmctld logged it)
    sacctmgr_assoc: str = ""
    sacctmgr_qos: str = ""
    fairshare_passes: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def _sbatch_args(job: RefJob, speedup: float, qos: bool = False) -> list[str]:
    args = ["--job-name", job.name, "-p", job.partition, "-n", str(job.tasks), "-c", str(job.cpus_per_task),
            "-t", str(real_limit_minutes(job.time_limit_s, speedup)), "-o", "/dev/null", "-e", "/dev/null"]
    if job.nodes:
        args += ["-N", str(job.nodes)]
    if job.account:
        args += ["-A", job.account]
    if job.nice:
        args += [f"--nice={job.nice}"]
    if qos and job.qos:
        args += [f"--qos={job.qos}"]
    return args


def record(jobs: list[RefJob], variant: Variant, out: Path, speedup: float = 60.0, nodes=DEFAULT_NODES,
           partitions=DEFAULT_PARTITIONS, priority=PRIORITY_LINES, timeout_s: float = 600.0,
           poll_s: float = 0.25, accounting: Accounting | None = None) -> Recording:
    """Run ``jobs`` on real daemons under ``variant``; write schedule.json, schedule.csv and
    slurm.conf into ``out`` and return the recording.  With ``accounting`` (users, accounts, QOS set
    up with sacctmgr, see ``tests/slurm_cluster.py``) the cluster has slurmdbd, every job with a user
    is submitted by that ordinary Unix user with its QOS, slurmctld logs its fair-share passes
    (DebugFlags=Priority), and the sacctmgr dumps (also as assoc.txt, qos.txt) are recorded."""
    reason = skip_reason() if accounting is None else accounting_skip_reason()
    if reason:
        raise RuntimeError(reason)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    root = shared_root("greenslurm-ref-")
    jobcomp = root / "jobcomp.txt"
    extra = [*variant.conf_lines(), *priority, "JobCompType=jobcomp/filetxt", f"JobCompLoc={jobcomp}",
             "MinJobAge=3600", *(["DebugFlags=Priority"] if accounting is not None else [])]
    cluster = SlurmCluster(root / "slurm", nodes, extra_conf=extra, partitions=partitions, accounting=accounting)
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))   # stable: file order at ties
    ids: dict[str, str] = {}
    last_pending: dict[str, dict] = {}
    started = time.monotonic()
    try:
        cluster.start()
        submitters = {name: cluster.add_user(name) for name in sorted({j.user for j in jobs if j.user})} \
            if accounting is not None else {}
        t0 = time.time()
        t0_mono = time.monotonic()
        deadline = t0_mono + timeout_s
        pending_submits = list(order)
        while True:
            now = time.monotonic() - t0_mono
            while pending_submits and jobs[pending_submits[0]].submit_s / speedup <= now:
                job = jobs[pending_submits.pop(0)]
                script = f"#!/bin/sh\nexec sleep {job.runtime_s / speedup:.3f}\n"
                result = cluster.sbatch(*_sbatch_args(job, speedup, qos=accounting is not None), script=script,
                                        user=submitters.get(job.user))
                if result.returncode != 0:
                    raise RuntimeError(f"sbatch of {job.name} failed: {result.stderr.strip()}")
                ids[job.name] = result.stdout.strip().split(";")[0]
            _sample_priorities(cluster, last_pending)
            if not pending_submits and _all_done(cluster, jobcomp, set(ids.values())):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs not done after {timeout_s} s; see {root}")
            wake = jobs[pending_submits[0]].submit_s / speedup if pending_submits else math.inf
            time.sleep(max(0.0, min(poll_s, wake - (time.monotonic() - t0_mono))))
        wall = time.monotonic() - started
        conf_text = cluster.conf.read_text()
        records = _collect(cluster, jobcomp, jobs, ids, last_pending, t0, speedup)
        dumps = ((cluster.run("sacctmgr", "show", "assoc", "tree", "-P").stdout,
                  cluster.run("sacctmgr", "show", "qos", "-P").stdout) if accounting is not None else ("", ""))
        passes = fairshare_passes(cluster.log_text(), t0, speedup) if accounting is not None else []
    finally:
        cluster.stop()
    recording = Recording(variant.name, speedup, t0, wall, conf_text, records, *dumps, passes)
    (out / "slurm.conf").write_text(conf_text)
    if accounting is not None:
        (out / "assoc.txt").write_text(dumps[0])
        (out / "qos.txt").write_text(dumps[1])
    (out / "schedule.json").write_text(json.dumps(recording.to_json(), indent=1) + "\n")
    with open(out / "schedule.csv", "w", newline="") as handle:
        flat = [{k: (" ".join(v) if isinstance(v, list) else json.dumps(v) if isinstance(v, dict) else v)
                 for k, v in r.items()} for r in records]
        writer = csv.DictWriter(handle, list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    shutil.rmtree(root, ignore_errors=True)
    return recording


_FT_LINE = re.compile(r"^\[([0-9T:-]+)(?:\.\d+)?\] priority/multifactor: _ft_debug:( +)=?(\S+) \((\S+)\):\s+(\S+)$")


def fairshare_passes(log: str, t0: float, speedup: float) -> list[dict]:
    """The fair-tree passes slurmctld logged (DebugFlags=Priority), with its time (Slurm's whole
    second, as the decay thread counts it: epoch and trace seconds since the whole second ``t0`` is
    in) and each association's level fair-share (``account/user``, ``account/`` for an account;
    ``parent`` for FairShare=parent).  A pass walks the tree from its first line again, so a pass
    begins where that first line comes back; another thread's lines in between (slurmctld logs from
    several) do not cut a pass in two.  slurmctld indents a line by 4 blanks per level below root and
    writes ``name (account)``: a user's account is the account line one level up (root's own users:
    ``(root)`` at the first level).

    >>> log = ("[2024-01-01T00:00:10.500] priority/multifactor: _ft_debug:     root (root):  inf\\n"
    ...        "[2024-01-01T00:00:10.500] priority/multifactor: _ft_debug:     =a (a):  0.5\\n"
    ...        "[2024-01-01T00:00:10.500] priority/multifactor: _ft_debug:         a (a):  2.0\\n"
    ...        "[2024-01-01T00:00:11.000] other\\n")
    >>> passes = fairshare_passes(log, slurm_epoch("2024-01-01T00:00:11"), 60.0)
    >>> passes[0]["trace_s"], passes[0]["level_fs"]
    (-60, {'root/root': 'inf', 'a/': '0.5', 'a/a': '2.0'})

    Another thread's line inside a pass, then the next pass a minute later (one trace hour at 60x):

    >>> lines = log.splitlines()
    >>> later = [line.replace("00:00:10.500", "00:01:10.500") for line in lines[:3]]
    >>> passes = fairshare_passes("\\n".join(lines[:2] + ["[2024-01-01T00:00:10.501] sched: other"]
    ...                                      + lines[2:3] + later), slurm_epoch("2024-01-01T00:00:11"), 60.0)
    >>> [(p["trace_s"], len(p["level_fs"])) for p in passes]
    [(-60, 3), (3540, 3)]
    """
    passes: list[dict] = []
    accounts: dict[int, str] = {}             # indent -> the last account line there
    first = None                              # (blanks, name, account) of a pass's first line
    for line in log.splitlines():
        found = _FT_LINE.match(line)
        if not found:
            continue
        stamp, blanks, name, account, value = found.groups()
        if first is None or (blanks, name, account) == first:
            first = (blanks, name, account)
            epoch = slurm_epoch(stamp)
            passes.append({"epoch": epoch, "trace_s": round((epoch - int(t0)) * speedup), "level_fs": {}})
            accounts = {}
        indent = len(blanks) - 1         # the log line's own blank, then 4 per level
        is_user = (indent == 4 and account == "root") or accounts.get(indent - 4) == account
        if not is_user:
            accounts[indent] = account
        passes[-1]["level_fs"][f"{account}/{name if is_user else ''}"] = value
    return passes


def _sample_priorities(cluster: SlurmCluster, last_pending: dict[str, dict]) -> None:
    """The priority and its weighted factors of every pending job now (the last one seen before
    a job starts is its priority at start)."""
    result = cluster.run("sprio", "-h", "-o", "%i|%Y|%A|%J|%P|%N|%F|%Q", check=False)
    for line in result.stdout.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 8 and parts[0].isdigit():
            last_pending[parts[0]] = dict(zip(("priority", "age", "jobsize", "partition", "nice", "fairshare",
                                               "qos"), (float(p) for p in parts[1:])))


def _all_done(cluster: SlurmCluster, jobcomp: Path, ids: set[str]) -> bool:
    if not jobcomp.exists():
        return not ids
    done = {scontrol_fields(line).get("JobId") for line in jobcomp.read_text().splitlines()}
    return ids <= done


def _collect(cluster, jobcomp: Path, jobs, ids, last_pending, t0: float, speedup: float) -> list[dict]:
    comp = {f["JobId"]: f for f in map(scontrol_fields, jobcomp.read_text().splitlines()) if "JobId" in f}
    shown = {}
    for line in cluster.run("scontrol", "-o", "-d", "show", "job").stdout.splitlines():
        fields = scontrol_fields(line)
        if "JobId" in fields:
            fields["_cpus_per_node"] = _cpus_per_node(line)
            shown[fields["JobId"]] = fields
    records = []
    for job in jobs:
        job_id = ids[job.name]
        c, s = comp[job_id], shown.get(job_id, {})
        submit, eligible, start, end = (slurm_epoch(c.get(k, "")) for k in
                                        ("SubmitTime", "EligibleTime", "StartTime", "EndTime"))
        limit_min = real_limit_minutes(job.time_limit_s, speedup)
        records.append({
            "name": job.name, "job_id": int(job_id), "partition": c.get("Partition"), "user": job.user,
            "account": job.account, "qos": job.qos, "nice": job.nice, "tasks": job.tasks,
            "nodes_requested": job.nodes, "cpus_per_task": job.cpus_per_task,
            "time_limit_s": job.time_limit_s, "runtime_s": job.runtime_s, "time_limit_min_real": limit_min,
            "limit_rounded": abs(limit_min * 60 * speedup - job.time_limit_s) > 1e-6,
            "state": c.get("JobState"), "submit_epoch": submit, "eligible_epoch": eligible,
            "start_epoch": start, "end_epoch": end,
            # trace seconds since the whole second submitting began in (Slurm's stamps are whole
            # seconds too, so one real second of noise is `speedup` trace seconds)
            "submit_trace_s": None if submit is None else round((submit - int(t0)) * speedup),
            "start_trace_s": None if start is None else round((start - int(t0)) * speedup),
            "end_trace_s": None if end is None else round((end - int(t0)) * speedup),
            "node_list": expand_hostlist(c.get("NodeList", "")), "cpus": int(c.get("ProcCnt", 0) or 0),
            "cpus_per_node": s.get("_cpus_per_node", {}), "scheduler": s.get("Scheduler"),
            "priority": int(s["Priority"]) if s.get("Priority", "").isdigit() else None,
            "priority_factors": last_pending.get(job_id, {}),
        })
    return records


def _cpus_per_node(line: str) -> dict[str, int]:
    """``Nodes=n[1-2] CPU_IDs=0-3`` details of ``scontrol -d``: CPUs held on each node."""
    held: dict[str, int] = {}
    for names, cpu_ids in re.findall(r" Nodes=(\S+) CPU_IDs=(\S+)", line):
        count = sum(int(b or a) - int(a) + 1 for a, b in
                    (part.partition("-")[::2] for part in cpu_ids.split(",") if part))
        for name in expand_hostlist(names):
            held[name] = held.get(name, 0) + count
    return held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Path, help="workload CSV (default: the built-in 40 jobs)")
    parser.add_argument("--validation", type=int, metavar="N", default=0,
                        help="instead: N jobs of the validation workload on the validation site "
                             "(three partitions, one overlapping the others)")
    parser.add_argument("--seed", type=int, default=12, help="seed of the validation workload")
    parser.add_argument("--variant", default="backfill-fine", choices=[*VARIANTS, "all"])
    parser.add_argument("--speedup", type=float, default=60.0, help="trace seconds per real second")
    parser.add_argument("--out", type=Path, required=True, help="folder for schedule.json/.csv and slurm.conf")
    parser.add_argument("--write-workload", type=Path, help="also write the workload used as CSV here")
    args = parser.parse_args(argv)
    if not (args.speedup > 0 and math.isfinite(args.speedup)):
        print(f"slurm_reference: --speedup must be a positive number: {args.speedup}", file=sys.stderr)
        return 2
    try:
        jobs = (read_workload(args.workload) if args.workload else
                validation_workload(args.validation, args.seed) if args.validation > 0 else default_workload())
    except WorkloadError as error:
        print(f"slurm_reference: {error}", file=sys.stderr)
        return 2
    partitions = VALIDATION_PARTITIONS if args.validation > 0 else DEFAULT_PARTITIONS
    known = {re.search(r"PartitionName=(\S+)", p).group(1) for p in partitions}
    for job in jobs:
        if job.partition not in known:
            print(f"slurm_reference: {args.workload}: job {job.name}: field partition: {job.partition!r} "
                  f"is not one of {sorted(known)}", file=sys.stderr)
            return 2
    if args.write_workload:
        write_workload(jobs, args.write_workload)
    variants = list(VARIANTS.values()) if args.variant == "all" else [VARIANTS[args.variant]]
    for variant in variants:
        out = args.out / variant.name if args.variant == "all" else args.out
        rec = record(jobs, variant, out, speedup=args.speedup, partitions=partitions,
                     timeout_s=max(600.0, 3 * sum(j.runtime_s for j in jobs) / args.speedup))
        print(f"{variant.name}: {len(rec.jobs)} jobs in {rec.wall_s:.1f} s wall -> {out}")
        for r in rec.jobs:
            print(f"  {r['name']:>6} {r['partition']:>8} id={r['job_id']:<3} submit={r['submit_trace_s']:>6} "
                  f"start={r['start_trace_s']:>6} end={r['end_trace_s']:>6} by={r['scheduler']} "
                  f"prio={r['priority']} nodes={','.join(r['node_list'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
