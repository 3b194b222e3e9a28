"""What the live hook costs, and how long its timeout must be.

1. sbatch round trip on real Slurm (munged, slurmctld, 4 slurmd on loopback each), paired: two clusters
   of the same shape run at once, one plain and one with job_submit.lua + ``greenslurm hook serve``;
   each round every user (4 ordinary users by default) submits one held job to each cluster at once,
   the clusters in alternating order.  Median, p99, p99.9 of both, and the hook's ratio and added
   milliseconds against the plain cluster measured in the same run; the machine's load average is
   printed with them (the busy machine is the load: no synthetic one is added).
2. The service's answer time as job_submit.lua sees it (connect, one request line, the answer line,
   close), from concurrent clients on the socket: median, p99, p99.9, max.
3. (``--view``) the service's decision time with 10,000 nodes and 10,000 pending jobs in its view.

The hook is rendered with a long timeout (``--hook-timeout-ms``, 10 s) so that sbatch round trips are
measured, not cut at the default timeout; fail-opens (slurmctld's log) are counted and printed.

    python bench/bench_hook_latency.py [--rounds 100] [--users 4] [--requests 2000] [--view]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


from greenslurm.slurm_plugin.config import HookConfig  # noqa: E402
from greenslurm.slurm_plugin.install import exchange  # noqa: E402

DEFAULT_TIMEOUT_MS = HookConfig().timeout_ms


def percentiles_ms(samples: list[float]) -> dict[str, float]:
    """Median, p99, p99.9 and max of durations in seconds, in milliseconds.

    >>> percentiles_ms([0.001] * 999 + [0.5])["max"]
    500.0
    """
    a = np.asarray(samples) * 1e3
    return {"median": float(np.median(a)), "p99": float(np.percentile(a, 99)),
            "p99.9": float(np.percentile(a, 99.9)), "max": float(a.max()),
            "over_default": int((a > DEFAULT_TIMEOUT_MS).sum()), "count": int(a.size)}


def over_default(stats: dict) -> str:
    return f"{stats['over_default']} of {stats['count']} over the default timeout_ms ({DEFAULT_TIMEOUT_MS:g} ms)"


def paired_round_trips(clusters: dict, users: dict, rounds: int, cancel_every: int = 25) -> dict[str, list[float]]:
    """Interleaved pairs: each round, every user submits one held job (``--hold``: nothing runs) to each
    cluster at once (one thread per user), the clusters in alternating order, so both see the same
    machine load; the pending queues are emptied every ``cancel_every`` rounds on both."""
    times: dict[str, list[float]] = {name: [] for name in clusters}
    errors: list[str] = []
    lock = threading.Lock()

    def submit(name: str, user) -> None:
        started = time.perf_counter()
        result = clusters[name].sbatch("-t", "5", "--hold", "--deadline=now+86400", user=user)
        took = time.perf_counter() - started
        with lock:
            times[name].append(took)
            if result.returncode != 0:
                errors.append(f"{name}: {result.stderr.strip()}")

    names = list(clusters)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            threads = [threading.Thread(target=submit, args=(name, user)) for user in users[name]]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if (r + 1) % cancel_every == 0:
            for cluster in clusters.values():
                cluster.run("scancel", "--state=PENDING", check=False, timeout=120)
    if errors:
        raise RuntimeError(f"{len(errors)} submissions failed, e.g. {errors[0]}")
    return times


def answer_times(socket_path: str, requests: int, clients: int) -> list[float]:
    """Connect, send one submit request, read the answer, close: as job_submit.lua does, from
    ``clients`` concurrent threads."""
    times: list[float] = []
    lock = threading.Lock()
    now = int(time.time())

    def client(k: int, count: int) -> None:
        local = []
        for i in range(count):
            request = {"op": "submit", "id": i, "uid": 1000 + k, "user": f"bench{k}", "partition": "debug",
                       "min_cpus": 1 + (i % 4), "num_tasks": 1, "time_limit": 5 + (i % 50),
                       "deadline_env": "now+86400" if i % 3 == 0 else None, "submit_time": now,
                       "failed_open": 0}
            line = (json.dumps({k2: v for k2, v in request.items() if v is not None}) + "\n").encode()
            started = time.perf_counter()
            exchange(socket_path, line, timeout_s=30)       # the answer parsed, as job_submit.lua does
            local.append(time.perf_counter() - started)
        with lock:
            times.extend(local)
    per = requests // clients
    threads = [threading.Thread(target=client, args=(k, per)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def row(label: str, stats: dict[str, float], base: dict[str, float] | None = None) -> str:
    cells = [f"{stats[k]:8.2f}" for k in ("median", "p99", "p99.9", "max")]
    ratio = ("  " + "  ".join(f"x{stats[k] / base[k]:.2f} ({stats[k] - base[k]:+.1f})" for k in ("median", "p99"))
             if base else "")
    return f"  {label:<34}" + " ".join(cells) + ratio


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def bench_live(rounds: int, requests: int, users: int, hook_timeout_ms: int) -> None:
    """Two clusters of the same shape at once, one plain and one with the hook, and ``users`` ordinary
    users submitting to both in interleaved pairs (:func:`paired_round_trips`)."""
    from hook_service import ServiceProcess, write_config
    from slurm_cluster import SlurmCluster, shared_root, skip_reason
    import subprocess

    reason = skip_reason()
    if reason:
        print(f"live hook: not measured ({reason})")
        return
    root = shared_root("greenslurm-bench-hook-")
    (root / "run").mkdir(mode=0o755)
    (root / "lib").mkdir(mode=0o700)
    sock = str(root / "run" / "hook.sock")
    plain = SlurmCluster(root / "plain")
    hooked = SlurmCluster(root / "hooked")
    config = write_config(root / "hook.toml", socket=sock, database=str(root / "lib" / "hook.sqlite"),
                          slurm_conf=str(hooked.conf), timeout_ms=hook_timeout_ms)
    subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(config), "--dest",
                    str(root / "rendered")], check=True, capture_output=True, timeout=60)
    hooked.job_submit_lua = (root / "rendered" / "job_submit.lua").read_text()
    # at the priority the shipped systemd unit gives it (Nice=-5)
    service = ServiceProcess(config, sock, root / "service.log", env=hooked.env, verbosity="", nice=-5)
    load_before = load_line()
    try:
        plain.start()
        hooked.start()
        service.start(timeout_s=60)
        clusters = {"plain": plain, "hook": hooked}
        accounts = {name: [cluster.add_user(f"greenslurm-bench{k}") for k in range(users)]
                    for name, cluster in clusters.items()}
        paired_round_trips(clusters, accounts, 5)                 # warm-up: caches, the service's first syncs
        times = paired_round_trips(clusters, accounts, rounds)
        results = {name: percentiles_ms(samples) for name, samples in times.items()}
        load_during = load_line()
        answers = percentiles_ms(answer_times(sock, requests, users))
        failed_open = hooked.log_text().count("failing open")
        failed_closed = hooked.log_text().count("failing closed")
    finally:
        service.stop()
        hooked.stop()
        plain.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"sbatch round trip, ms: {rounds} interleaved rounds, each {users} users submitting one held job at once "
          f"to each cluster (same shape, one without and one with the hook; hook timeout {hook_timeout_ms} ms)")
    print(f"  before: {load_before}; after the rounds: {load_during}")
    print(f"  {'':<34}{'median':>8} {'p99':>8} {'p99.9':>8} {'max':>8}  to no hook: median, p99 (ratio, added ms)")
    print(row("without hook", results["plain"]))
    print(row("with hook", results["hook"], results["plain"]))
    print(f"  added by the hook: median {results['hook']['median'] - results['plain']['median']:+.1f} ms "
          f"(target: at most +10 ms)")
    print(f"  fail-open events {failed_open}, fail-closed events {failed_closed} (slurmctld log)")
    print(row(f"service answer, {users} clients, {requests} requests", answers) + "  " + over_default(answers))


def bench_view(decisions: int, nodes: int, pending: int) -> None:
    """Decision time on a big view, in process (the service's own API)."""
    from greenslurm.clustermodel import JobSpec
    from greenslurm.slurm_plugin.record import DecisionRecord
    from greenslurm.slurm_plugin.service import DecisionService, HookConfig
    from greenslurm.slurm_plugin.snapshot import LiveNode, PendingJob, RunningJob, Snapshot

    now = time.time()
    rng = np.random.default_rng(1)
    live = [LiveNode(f"node{i:05d}", 128 if i % 5 == 0 else 64, 512000.0 if i % 5 == 0 else 256000.0,
                     8 if i % 5 == 0 else 0, (), ("batch",), "idle") for i in range(nodes)]
    running = [RunningJob(str(j), (f"node{int(rng.integers(nodes)):05d}",), now + float(rng.uniform(60, 86400)))
               for j in range(nodes // 2)]
    jobs = []
    for j in range(pending):
        n = int(rng.choice([1, 1, 1, 2, 4, 8, 16]))
        jid = str(nodes // 2 + j)
        jobs.append(PendingJob(jid, JobSpec(jid, now - 1.0, float(rng.uniform(600, 86400)), cpus=n * 32, nodes=n,
                                            gpus_per_node=float(rng.choice([0, 0, 0, 1, 8])))))
    snapshot = Snapshot(now, live, running, jobs)
    with tempfile.TemporaryDirectory() as tmp:
        config = HookConfig(socket=f"{tmp}/x.sock", database=f"{tmp}/db.sqlite")
        record = DecisionRecord(config.database)
        svc = DecisionService(config, record)
        started = time.perf_counter()
        svc.swap_view(svc.install_view(snapshot, now), now)
        build_s = time.perf_counter() - started
        times = []
        for i in range(decisions):
            n = int(rng.choice([1, 1, 2, 4]))
            request = {"op": "submit", "id": i, "user": "bench", "min_cpus": 32 * n, "min_nodes": n,
                       "time_limit": int(rng.integers(10, 600)), "submit_time": now,
                       "deadline_env": f"now+{int(rng.integers(3600, 7 * 86400))}"}
            t0 = time.perf_counter()
            svc.handle_request(request)
            times.append(time.perf_counter() - t0)
        record.close()
    s = percentiles_ms(times)
    print(f"decisions with {nodes:,} nodes, {pending:,} pending, {nodes // 2:,} running in view: median "
          f"{s['median']:.3f} ms, p99 {s['p99']:.3f} ms, p99.9 {s['p99.9']:.3f} ms over {decisions:,}; "
          f"view built in {build_s:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100, help="interleaved rounds (each: every user submits "
                                                                 "one job to each cluster)")
    parser.add_argument("--requests", type=int, default=2000, help="direct socket requests after the rounds")
    parser.add_argument("--users", type=int, default=4, help="ordinary users submitting at once")
    parser.add_argument("--hook-timeout-ms", type=int, default=10000)
    parser.add_argument("--view", action="store_true", help="also time decisions on a 10,000-node view")
    parser.add_argument("--decisions", type=int, default=2000)
    args = parser.parse_args()
    for name in ("rounds", "requests", "users", "hook_timeout_ms", "decisions"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    bench_live(args.rounds, args.requests, args.users, args.hook_timeout_ms)
    if args.view:
        bench_view(args.decisions, 10_000, 10_000)


if __name__ == "__main__":
    main()
