"""What the live hook costs.

1. sbatch round trip on a real Slurm cluster (munged, slurmctld, 4 slurmd on loopback), median and
   p99 over N submissions, without the hook and with job_submit.lua + the decision service.
2. The service's own decision time with 10,000 nodes and 10,000 pending jobs in its view
   (in process, record included), median and p99 over 2,000 decisions, and the time to build the
   view from the snapshot.

    python bench/bench_hook_latency.py [--jobs 200] [--decisions 2000] [--skip-slurm]

Targets: the hook adds under 5 ms median to sbatch; decisions take under 2 ms p99.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from greenslurm.clustermodel import JobSpec  # noqa: E402
from greenslurm.slurm_plugin.record import DecisionRecord  # noqa: E402
from greenslurm.slurm_plugin.service import DecisionService, HookConfig  # noqa: E402
from greenslurm.slurm_plugin.view import LiveNode, PendingJob, RunningJob, Snapshot  # noqa: E402


def stats_ms(samples: list[float]) -> tuple[float, float]:
    a = np.array(samples) * 1e3
    return float(np.median(a)), float(np.percentile(a, 99))


def sbatch_times(cluster, jobs: int) -> list[float]:
    times = []
    for _ in range(jobs):
        started = time.perf_counter()
        result = cluster.sbatch("-t", "5", "--hold", "--deadline=now+86400")
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            raise RuntimeError(result.stderr)
    cluster.run("scancel", "--user=root", check=False)
    return times


def bench_sbatch(jobs: int) -> None:
    from hook_service import ServiceProcess, write_config
    from slurm_cluster import SlurmCluster, skip_reason
    from greenslurm.slurm_plugin.install import render_job_submit

    reason = skip_reason()
    if reason:
        print(f"sbatch round trip: skipped ({reason})")
        return
    root = Path(tempfile.mkdtemp(prefix="gs-bench-hook-"))
    plain = SlurmCluster(root / "plain").start()
    try:
        sbatch_times(plain, 10)
        without = sbatch_times(plain, jobs)
    finally:
        plain.stop()
    sock = str(root / "hook.sock")
    config = HookConfig(socket=sock, socket_owner="root", timeout_ms=50)
    hooked = SlurmCluster(root / "hooked", job_submit_lua=render_job_submit(config)).start()
    service = None
    try:
        cfg = write_config(root / "hook.toml", socket=sock, socket_owner="root", database=str(root / "hook.sqlite"),
                           slurm_conf=str(hooked.conf), sync_interval_s=10.0, timeout_ms=50)
        service = ServiceProcess(cfg, sock, root / "service.log", env=hooked.env, verbosity="").start()
        sbatch_times(hooked, 10)
        with_hook = sbatch_times(hooked, jobs)
        failed_open = hooked.log_text().count("failing open")
    finally:
        if service is not None:
            service.stop()
        hooked.stop()
    m0, p0 = stats_ms(without)
    m1, p1 = stats_ms(with_hook)
    print(f"sbatch round trip over {jobs} jobs: without hook median {m0:.2f} ms, p99 {p0:.2f} ms; "
          f"with hook median {m1:.2f} ms, p99 {p1:.2f} ms; added median {m1 - m0:.2f} ms "
          f"(target < 5 ms); fail-open events {failed_open}")


def big_snapshot(nodes: int, pending: int, running: int, now: float, seed: int = 1) -> Snapshot:
    rng = np.random.default_rng(seed)
    live = []
    for i in range(nodes):
        gpu = i % 5 == 0                                   # a fifth of the nodes have 8 GPUs
        live.append(LiveNode(f"node{i:05d}", 128 if gpu else 64, 512000.0 if gpu else 256000.0, 8 if gpu else 0,
                             (), ("batch",), "idle"))
    run = [RunningJob(str(j), (f"node{int(rng.integers(nodes)):05d}",), now + float(rng.uniform(60, 86400)))
           for j in range(running)]
    jobs = []
    for j in range(pending):
        n = int(rng.choice([1, 1, 1, 2, 4, 8, 16]))
        jobs.append(PendingJob(str(running + j), JobSpec(str(running + j), now - 1.0, float(rng.uniform(600, 86400)),
                                                         cpus=n * 32, nodes=n,
                                                         gpus_per_node=float(rng.choice([0, 0, 0, 1, 8])))))
    return Snapshot(now, live, run, jobs)


def bench_decisions(decisions: int, nodes: int, pending: int) -> None:
    now = time.time()
    snapshot = big_snapshot(nodes, pending, nodes // 2, now)
    with tempfile.TemporaryDirectory() as tmp:
        config = HookConfig(socket=f"{tmp}/x.sock", database=f"{tmp}/db.sqlite")
        record = DecisionRecord(config.database)
        svc = DecisionService(config, record)
        started = time.perf_counter()
        svc.swap_view(svc.install_view(snapshot, now), now)
        build_s = time.perf_counter() - started
        rng = np.random.default_rng(7)
        times, cpu = [], []     # wall time, and this thread's CPU time (not inflated by other processes)
        rejected = 0
        for i in range(decisions):
            n = int(rng.choice([1, 1, 2, 4]))
            request = {"op": "submit", "id": i, "user": "bench", "min_cpus": 32 * n, "min_nodes": n,
                       "time_limit": int(rng.integers(10, 600)), "submit_time": now,
                       "tres_per_node": "gres:gpu:1" if i % 4 == 0 else "",
                       "deadline": f"now+{int(rng.integers(3600, 7 * 86400))}"}
            t0, c0 = time.perf_counter(), time.thread_time()
            answer = svc.handle_request(request)
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
            rejected += answer["action"] == "reject"
        t0 = time.perf_counter()
        record.flush()
        flush_s = time.perf_counter() - t0
        record.close()
    m, p = stats_ms(times)
    cm, cp = stats_ms(cpu)
    print(f"decisions with {nodes:,} nodes, {pending:,} pending and {nodes // 2:,} running jobs in view: "
          f"wall median {m:.3f} ms, p99 {p:.3f} ms; CPU median {cm:.3f} ms, p99 {cp:.3f} ms over {decisions:,} "
          f"(target p99 < 2 ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs); {rejected} rejected; "
          f"view built in {build_s:.2f} s; record flush {flush_s * 1e6 / decisions:.1f} us per decision (batched)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--skip-slurm", action="store_true")
    args = parser.parse_args()
    bench_decisions(args.decisions, args.nodes, args.pending)
    if not args.skip_slurm:
        bench_sbatch(args.jobs)


if __name__ == "__main__":
    main()
