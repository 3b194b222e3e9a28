"""Random Slurm sites and workloads, recorded on real Slurm 22.05 with slurmdbd, exported as a site would.

A *site* is a cluster of 4-32 nodes of mixed sizes with disjoint and overlapping partitions (with
PriorityTier), priority/basic or priority/multifactor, sched/builtin or sched/backfill, and
CR_Core or CR_Core_Memory.  A *workload* is 60 jobs (by default) of 5-100 s submitted with ``-n``
(Slurm chooses the nodes) or ``-N`` (a node count), some with ``--mem``, in real time or compressed
(runtimes and gaps a tenth as long).  Both are drawn from a seed, deterministically.

Recording runs the workload on real daemons (``tests/slurm_cluster.py``: munged, mariadbd,
slurmdbd, slurmctld, one slurmd per node, on loopback) and exports the accounting records with
the sacct fields a site exports (:data:`SACCT_FIELDS`), the slurm.conf slurmctld read, the
workload and the command that made them:

    python bench/slurm_workloads.py draw --seed 7 --out /tmp/w7           # site.json, workload.csv
    python bench/slurm_workloads.py record --site /tmp/w7/site.json --workload /tmp/w7/workload.csv \\
        --out /tmp/w7/run1                                                 # trace.txt, slurm.conf
    greenslurm replay /tmp/w7/run1/trace.txt --format sacct --slurm-conf /tmp/w7/run1/slurm.conf --queue slurm

``bench/bench_slurm_workloads.py`` compares replays with recordings.  Needs root and the Debian
Slurm, munge and MariaDB packages.

>>> site = draw_site(3)
>>> 4 <= len(site.nodes) <= 32 and site.scheduler in ("builtin", "backfill")
True
>>> jobs = draw_workload(3, site, count=10)
>>> len(jobs), all(5 <= j.runtime_s <= 100 for j in jobs)
(10, True)
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from slurm_cluster import Accounting, NodeDef, SlurmCluster, accounting_skip_reason, shared_root  # noqa: E402

# what a site exports (sacct --parsable2 --allocations): the request (ReqCPUS, ReqNodes, ReqMem,
# ReqTRES) next to what Slurm allocated (NNodes, NCPUS, AllocTRES, NodeList)
SACCT_FIELDS = ("JobID", "JobName", "Partition", "Account", "User", "QOS", "Priority", "Submit", "Eligible", "Start",
                "End", "Elapsed", "State", "ExitCode", "NNodes", "NCPUS", "ReqCPUS", "ReqNodes", "ReqMem",
                "ReqTRES", "AllocTRES", "Timelimit", "NodeList")


@dataclass
class Site:
    """A cluster and its scheduling settings, as slurm.conf lines."""
    nodes: list[tuple[str, int, int]]            # (name, CPUs, RealMemory MiB)
    partitions: list[str]                        # PartitionName=... lines
    scheduler: str = "backfill"
    scheduler_parameters: str = "bf_interval=5,bf_resolution=5"
    priority: list[str] = field(default_factory=lambda: ["PriorityType=priority/basic"])
    select_parameters: str = "CR_Core"

    def conf_lines(self) -> list[str]:
        # always written: the test harness's own SchedulerParameters (sched_interval=1) must not stay
        return [f"SchedulerType=sched/{self.scheduler}",
                f"SchedulerParameters={self.scheduler_parameters or 'default_queue_depth=100'}",
                *self.priority, f"SelectTypeParameters={self.select_parameters}"]

    def partition_nodes(self) -> dict[str, list[str]]:
        from greenslurm.traces.slurm_conf import expand_hostlist
        found = {}
        for line in self.partitions:
            fields = dict(part.split("=", 1) for part in line.split())
            found[fields["PartitionName"]] = expand_hostlist(fields["Nodes"])
        return found


@dataclass(frozen=True)
class Job:
    """One job of a workload: real seconds from the first submission."""
    name: str
    submit_s: float
    partition: str
    tasks: int
    runtime_s: float
    time_limit_min: int
    nodes: int = 0                 # -N (0: only -n, Slurm chooses)
    memory_mb: int = 0             # --mem per node (0: none given)


JOB_FIELDS = tuple(Job.__dataclass_fields__)


def _hostlist(names: list[str]) -> str:
    return ",".join(names)


def draw_site(seed: int) -> Site:
    """A random site: 4-32 nodes of 2-3 sizes, a partition per node group (disjoint) and one over all
    nodes (overlapping) with its own PriorityTier, sometimes a second overlapping one; the
    scheduler, priority plugin and memory rule drawn too."""
    rng = random.Random(seed)
    count = rng.choice((4, 4, 6, 8, 8, 12, 16, 32))
    sizes = rng.sample(((2, 2000), (4, 4000), (8, 8000), (16, 16000)), rng.choice((1, 2, 2, 3)))
    nodes, groups = [], []
    per_group = max(1, count // len(sizes))
    for g, (cpus, mem) in enumerate(sizes):
        n = per_group if g < len(sizes) - 1 else count - per_group * (len(sizes) - 1)
        names = [f"n{len(nodes) + i + 1:02d}" for i in range(n)]
        nodes += [(name, cpus, mem) for name in names]
        groups.append(names)
    every = [name for name, _, _ in nodes]
    partitions = []
    if len(groups) == 1:         # one size: split it into two disjoint partitions
        half = max(1, len(every) // 2)
        groups = [every[:half], every[half:]]
    for g, names in enumerate(groups):
        partitions.append(f"PartitionName=p{g} Nodes={_hostlist(names)} Default={'YES' if g == 0 else 'NO'} "
                          f"MaxTime=INFINITE State=UP PriorityTier=1")
    partitions.append(f"PartitionName=all Nodes={_hostlist(every)} MaxTime=INFINITE State=UP "
                      f"PriorityTier={rng.choice((1, 10))}")
    if rng.random() < 0.5:
        partitions.append(f"PartitionName=high Nodes={_hostlist(every)} MaxTime=INFINITE State=UP PriorityTier=20")
    scheduler = rng.choice(("builtin", "backfill", "backfill"))
    params = [] if rng.random() < 0.5 else ["sched_interval=10"]
    if scheduler == "backfill":
        params += [f"bf_interval={rng.choice((2, 5, 10))}", f"bf_resolution={rng.choice((1, 5, 10))}"]
    priority = (["PriorityType=priority/basic"] if rng.random() < 0.5 else
                ["PriorityType=priority/multifactor", "PriorityWeightAge=0", "PriorityWeightFairshare=0",
                 f"PriorityWeightJobSize={rng.choice((0, 1000))}", "PriorityWeightPartition=1000",
                 "PriorityWeightQOS=0", "PriorityFavorSmall=NO", "PriorityCalcPeriod=1"])
    select = rng.choice(("CR_Core", "CR_Core", "CR_Core_Memory", "CR_CPU"))
    return Site(nodes, partitions, scheduler, ",".join(params), priority, select)


def draw_workload(seed: int, site: Site, count: int = 60, compressed: bool = False) -> list[Job]:
    """``count`` jobs on ``site``: gaps of 0-6 s, runtimes 5-100 s under limits of 2-3 minutes,
    sizes up to one and a half of the partition's smallest node, a quarter with ``-N`` (1-3 nodes,
    up to half a node each), a fifth with ``--mem``; ``compressed``: gaps and runtimes a tenth
    (runtimes at least 1 s), limits 1 minute."""
    rng = random.Random(seed * 7919 + 1)
    parts = site.partition_nodes()
    sizes = {name: cpus for name, cpus, _ in site.nodes}
    memory = {name: mem for name, _, mem in site.nodes}
    scale = 0.1 if compressed else 1.0
    jobs, t = [], 0.0
    for i in range(count):
        t += rng.choice((0, 1, 2, 2, 3, 4, 6)) * scale
        partition = rng.choice(sorted(parts))
        names = parts[partition]
        smallest = min(sizes[n] for n in names)
        runtime = max(1.0, round(rng.uniform(5, 100) * scale)) if compressed else float(rng.randint(5, 100))
        limit = 1 if compressed else rng.choice((2, 2, 3))
        if rng.random() < 0.25 and len(names) >= 2:
            nodes = rng.randint(1, min(len(names), 3))
            tasks = nodes * rng.randint(1, max(1, smallest // 2))
        else:
            nodes = 0
            tasks = rng.randint(1, min(smallest + smallest // 2, sum(sizes[n] for n in names)))
        mem = 0
        if rng.random() < 0.2:
            mem = rng.choice((250, 500, 1000)) * max(1, min(memory[n] for n in names) // 4000)
        jobs.append(Job(f"j{i:02d}", round(t, 2), partition, tasks, runtime, limit, nodes, mem))
    return jobs


def write_jobs(jobs: list[Job], path: Path) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, JOB_FIELDS)
        writer.writeheader()
        for job in jobs:
            writer.writerow(asdict(job))


def read_jobs(path: Path) -> list[Job]:
    with open(path, newline="") as handle:
        return [Job(r["name"], float(r["submit_s"]), r["partition"], int(r["tasks"]), float(r["runtime_s"]),
                    int(r["time_limit_min"]), int(r["nodes"] or 0), int(r["memory_mb"] or 0))
                for r in csv.DictReader(handle)]


def read_site(path: Path) -> Site:
    return Site(**json.loads(Path(path).read_text()))


def _sbatch_args(job: Job) -> list[str]:
    args = ["--job-name", job.name, "-p", job.partition, "-n", str(job.tasks), "-t", str(job.time_limit_min),
            "-o", "/dev/null", "-e", "/dev/null"]
    if job.nodes:
        args += ["-N", str(job.nodes)]
    if job.memory_mb:
        args += [f"--mem={job.memory_mb}"]
    return args


def settle_s(site: Site) -> int:
    """The site's batch_sched_delay (Slurm's default 3 s).

    >>> settle_s(Site([], [], scheduler_parameters="bf_interval=10,batch_sched_delay=20"))
    20
    >>> settle_s(Site([], []))
    3
    """
    for part in site.scheduler_parameters.split(","):
        if part.startswith("batch_sched_delay="):
            return int(part.split("=", 1)[1])
    return 3


def record(site: Site, jobs: list[Job], out: Path, timeout_s: float = 1800.0, log_debug: bool = False) -> float:
    """Run ``jobs`` on real daemons with slurmdbd; write ``trace.txt`` (sacct export with
    :data:`SACCT_FIELDS`), ``slurm.conf`` (as slurmctld read it) and ``slurmctld.log`` into ``out``.
    Returns the wall time in seconds."""
    reason = accounting_skip_reason()
    if reason:
        raise RuntimeError(reason)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    root = shared_root("greenslurm-work-")
    nodes = [NodeDef(name, cpus, mem) for name, cpus, mem in site.nodes]
    extra = [*site.conf_lines(), "MinJobAge=3600", "JobAcctGatherType=jobacct_gather/none",
             *(["SlurmctldDebug=debug3", "DebugFlags=SelectType,Backfill"] if log_debug else [])]
    cluster = SlurmCluster(root / "slurm", nodes, extra_conf=extra, partitions=site.partitions,
                           accounting=Accounting(enforce="associations"))
    started = time.monotonic()
    try:
        cluster.start(timeout_s=120)
        # the nodes' registrations queue requests for the main scheduler: let its background thread
        # serve them first (it serves one batch_sched_delay after its start), or the first
        # submission waits up to batch_sched_delay behind them
        settle = max(5, settle_s(site) + 2)
        time.sleep(settle)
        begin = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - settle))
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        ids = []
        for job in sorted(jobs, key=lambda j: j.submit_s):
            wait = job.submit_s - (time.monotonic() - t0)
            if wait > 0:
                time.sleep(wait)
            script = f"#!/bin/sh\nexec sleep {job.runtime_s:g}\n"
            result = cluster.sbatch(*_sbatch_args(job), script=script)
            if result.returncode != 0:
                raise RuntimeError(f"sbatch of {job.name} failed: {result.stderr.strip()}")
            ids.append(result.stdout.strip().split(";")[0])
        while True:
            done = cluster.run("sacct", "-a", "-X", "-n", "-P", "-S", begin, "--format=JobID,State",
                               check=False).stdout.split()
            states = dict(line.split("|", 1) for line in done if "|" in line)
            if all(states.get(i) in ("COMPLETED", "TIMEOUT", "FAILED", "CANCELLED") for i in ids):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs not done after {timeout_s} s; see {root}")
            time.sleep(2)
        export = cluster.run("sacct", "-a", "-X", "-P", "-S", begin, "--format=" + ",".join(SACCT_FIELDS)).stdout
        (out / "trace.txt").write_text(export)
        (out / "slurm.conf").write_text(cluster.conf.read_text())
        (out / "slurmctld.log").write_text(cluster.log_text())
    finally:
        cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    draw = sub.add_parser("draw", help="draw a site and a workload from a seed")
    draw.add_argument("--seed", type=int, required=True)
    draw.add_argument("--jobs", type=int, default=60)
    draw.add_argument("--compressed", action="store_true", help="gaps and runtimes a tenth as long")
    draw.add_argument("--out", type=Path, required=True)
    rec = sub.add_parser("record", help="record a workload on real Slurm with slurmdbd")
    rec.add_argument("--site", type=Path, required=True)
    rec.add_argument("--workload", type=Path, required=True)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--debug-log", action="store_true", help="slurmctld at debug3 with SelectType,Backfill")
    args = parser.parse_args(argv)
    # a recording stopped with SIGTERM (or SIGINT in a background job) stops its daemons first
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.command == "draw":
        site = draw_site(args.seed)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "site.json").write_text(json.dumps(asdict(site), indent=1) + "\n")
        write_jobs(draw_workload(args.seed, site, args.jobs, args.compressed), args.out / "workload.csv")
        print(f"{args.out}: {len(site.nodes)} nodes, {len(site.partitions)} partitions, sched/{site.scheduler}, "
              f"{site.priority[0]}, {site.select_parameters}")
        return 0
    wall = record(read_site(args.site), read_jobs(args.workload), args.out, log_debug=args.debug_log)
    (args.out / "command.txt").write_text("python bench/slurm_workloads.py " + " ".join(
        str(a) for a in (argv if argv is not None else sys.argv[1:])) + "\n")
    print(f"{args.out}: recorded in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
