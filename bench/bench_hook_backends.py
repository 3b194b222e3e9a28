"""What the pyslurm backend buys over the CLI backend (sinfo/squeue --json), on real Slurm daemons.

For each cluster size (``--nodes 4,64``: munged, slurmctld and one slurmd per node on loopback; a
quarter of the nodes with 2 GPUs), the cluster is filled with running jobs (one per node, some on
GPUs) and pending jobs with deadlines (two per node), then:

1. Sync time: one read of Slurm's state as the service does it (``backend.snapshot()`` in a worker
   process, the snapshot sent back to the service), CLI and pyslurm in pairs, the order alternating,
   ``--syncs`` pairs; median, p90 and the median of the paired ratios pyslurm / CLI.
2. Decision latency: two services on the same cluster at once, one per backend, each syncing every
   ``--sync-interval`` s; submit requests (connect, one line, the answer, close, as job_submit.lua
   does) alternate between them, ``--requests`` pairs: median, p99, max per backend.

    python bench/bench_hook_backends.py [--nodes 4,64] [--syncs 30] [--requests 400]

Needs root, the Slurm daemons and pyslurm built for this Slurm (scripts/test builds it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from greenslurm.slurm_plugin.backend import CliBackend, PyslurmBackend  # noqa: E402
from greenslurm.slurm_plugin.install import exchange  # noqa: E402
from greenslurm.slurm_plugin.service import fetch_snapshot  # noqa: E402

LONG = "#!/bin/sh\nsleep 3600\n"


def cluster_nodes(count: int):
    from slurm_cluster import NodeDef
    return tuple(NodeDef(f"n{i}", 4, 4000, 2 if i % 4 == 1 else 0) for i in range(1, count + 1))


def submit(cluster, *args: str) -> None:
    result = cluster.sbatch(*args, script=LONG)
    if result.returncode != 0:
        raise RuntimeError(f"sbatch {' '.join(args)}: {result.stderr.strip()}")


def fill(cluster, nodes: int) -> None:
    """One running job per node (on a GPU where the node has them), two pending jobs per node with
    deadlines (each needs a whole node, behind the running ones)."""
    for i in range(1, nodes + 1):
        gres = ["--gres=gpu:1"] if i % 4 == 1 else []
        submit(cluster, "-t", "60", "-n", "2", "-w", f"n{i}", *gres)
    for i in range(2 * nodes):
        submit(cluster, "-t", "30", "-n", "4", f"--deadline=now+{2 + i % 5}hours", "--begin=now+60")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        running = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split()
        if len(running) >= nodes:
            return
        time.sleep(0.5)
    raise RuntimeError(f"only {len(running)} of {nodes} jobs run")


def timed_sync(pool: ProcessPoolExecutor, backend) -> tuple[float, int]:
    started = time.perf_counter()
    snapshot, deadlines = pool.submit(fetch_snapshot, backend).result(timeout=120)
    return time.perf_counter() - started, len(snapshot.running) + len(snapshot.pending)


def sync_times(conf: Path, syncs: int) -> dict[str, list[float]]:
    """Paired sync times, the order alternating within each pair."""
    backends = {"cli": CliBackend(str(conf)), "pyslurm": PyslurmBackend(str(conf))}
    context = multiprocessing.get_context("forkserver")
    pools = {name: ProcessPoolExecutor(max_workers=1, mp_context=context) for name in backends}
    times: dict[str, list[float]] = {name: [] for name in backends}
    try:
        jobs = {name: timed_sync(pools[name], backends[name])[1] for name in backends}    # warm the workers
        if jobs["cli"] != jobs["pyslurm"]:
            raise RuntimeError(f"the backends see different jobs: {jobs}")
        for k in range(syncs):
            for name in (("cli", "pyslurm") if k % 2 == 0 else ("pyslurm", "cli")):
                times[name].append(timed_sync(pools[name], backends[name])[0])
    finally:
        for pool in pools.values():
            pool.shutdown()
    return times


def decision_times(cluster, root: Path, requests: int, sync_interval_s: float) -> dict[str, list[float]]:
    """Submit requests alternating between two services, one per backend, both syncing meanwhile."""
    from hook_service import ServiceProcess, write_config
    services, sockets = {}, {}
    try:
        for name in ("cli", "pyslurm"):
            sockets[name] = str(root / f"{name}.sock")
            config = write_config(root / f"{name}.toml", socket=sockets[name], database=str(root / f"{name}.sqlite"),
                                  slurm_conf=str(cluster.conf), backend=name, sync_interval_s=sync_interval_s)
            services[name] = ServiceProcess(config, sockets[name], root / f"{name}.log", env=cluster.env,
                                            verbosity="").start(timeout_s=120)
        times: dict[str, list[float]] = {name: [] for name in services}
        now = int(time.time())
        for i in range(requests + 20):
            request = {"op": "submit", "id": i, "uid": 1000, "user": "bench", "partition": "debug",
                       "min_cpus": 1 + i % 4, "num_tasks": 1, "time_limit": 10 + i % 50,
                       "deadline_env": f"now+{2 + i % 6}hours", "submit_time": now, "failed_open": 0}
            line = (json.dumps(request) + "\n").encode()
            for name in (("cli", "pyslurm") if i % 2 == 0 else ("pyslurm", "cli")):
                started = time.perf_counter()
                answer = exchange(sockets[name], line, timeout_s=30)
                took = time.perf_counter() - started
                if "decision" not in answer:
                    raise RuntimeError(f"{name}: unexpected answer {answer}")
                if i >= 20:                       # the first few warm the services up
                    times[name].append(took)
            time.sleep(0.01)                      # spread the requests over several syncs
        return times
    finally:
        for service in services.values():
            service.stop()


def start(cluster, nodes: int, attempts: int = 3) -> None:
    """Start the cluster; a slurmd that exits at start (with hundreds of them, a port picked free can be
    taken by another daemon before its slurmd binds it) is shown and the cluster started again."""
    for attempt in range(1, attempts + 1):
        try:
            cluster.start(timeout_s=max(30.0, nodes * 1.0))
            return
        except RuntimeError as exc:
            name = str(exc).split()[0]
            log = cluster.root / "log" / f"{name}.out"
            tail = log.read_text(errors="replace").strip().splitlines()[-2:] if log.exists() else []
            print(f"(start {attempt} of {attempts} failed: {exc}: {' | '.join(tail)})")
            if attempt == attempts:
                raise


def ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1e3, q))


def report(nodes: int, jobs: int, syncs: dict[str, list[float]], decisions: dict[str, list[float]]) -> None:
    ratios = [p / c for c, p in zip(syncs["cli"], syncs["pyslurm"])]
    print(f"{nodes} nodes, {jobs} jobs in squeue:")
    for name in ("cli", "pyslurm"):
        print(f"  sync {name:<8} median {ms(syncs[name], 50):8.1f} ms  p90 {ms(syncs[name], 90):8.1f} ms "
              f"({len(syncs[name])} syncs)")
    print(f"  sync pyslurm / cli, median of paired ratios: {statistics.median(ratios):.2f}")
    for name in ("cli", "pyslurm"):
        print(f"  decision {name:<8} median {ms(decisions[name], 50):6.2f} ms  p99 {ms(decisions[name], 99):7.2f} ms "
              f"max {ms(decisions[name], 100):7.2f} ms ({len(decisions[name])} requests)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="4,64", help="cluster sizes, comma-separated")
    parser.add_argument("--syncs", type=int, default=30, help="paired syncs per size")
    parser.add_argument("--requests", type=int, default=400, help="paired decisions per size")
    parser.add_argument("--sync-interval", type=float, default=1.0, help="the services' sync_interval_s")
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.nodes.split(",")]
    except ValueError:
        parser.error(f"--nodes: whole numbers separated by commas, got {args.nodes!r}")
    if any(n < 1 for n in sizes) or args.syncs < 1 or args.requests < 1 or not args.sync_interval > 0:
        parser.error("--nodes, --syncs, --requests and --sync-interval must be > 0")
    from slurm_cluster import SlurmCluster, shared_root, skip_reason
    reason = skip_reason()
    if reason:
        sys.exit(f"bench_hook_backends: {reason}")
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for nodes in sizes:
        root = shared_root("greenslurm-bench-backends-")
        cluster = SlurmCluster(root / "slurm", cluster_nodes(nodes), extra_conf=("MaxJobCount=100000",))
        try:
            started = time.monotonic()
            start(cluster, nodes)
            fill(cluster, nodes)
            jobs = len(cluster.run("squeue", "-h", "-o", "%i").stdout.split())
            print(f"({nodes} nodes started and filled in {time.monotonic() - started:.0f} s)")
            syncs = sync_times(cluster.conf, args.syncs)
            decisions = decision_times(cluster, root, args.requests, args.sync_interval)
            report(nodes, jobs, syncs, decisions)
        finally:
            cluster.stop()
            shutil.rmtree(root, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
