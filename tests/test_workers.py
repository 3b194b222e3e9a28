"""Worker processes end with their parent: ``sweep``, ``whatif`` and ``inflate`` start their pools
through :func:`greenslurm.sim.workers.worker_pool`; a SIGKILLed command leaves no worker behind.  Without
the watch, a killed parent's pool workers stay (a sweep's two workers 80 s and more at 176 MB each, a
whatif's replaying its policy to the end, an inflate's waiting for work that never comes)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from greenslurm.traces.synthetic import synthetic_jobs
from greenslurm.sim.workers import worker_pool
from test_sweep import SPEC_200, write_spec


def children_of(pid: int) -> set[int]:
    """Every living descendant of ``pid`` (Linux /proc)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += sorted(kids - found)
            found |= kids
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def swf(path: Path, jobs: int, cpus: int) -> Path:
    """A synthetic SWF trace of ``jobs`` jobs for ``cpus`` CPUs (the whatif replays take seconds)."""
    lines = [f"; MaxNodes: {cpus}", f"; MaxProcs: {cpus}"]
    for job in synthetic_jobs(jobs, total_cpus=cpus, seed=3, load=0.95):
        lines.append(f"{job.job_id} {job.submit_s:.0f} -1 {job.runtime_s:.0f} {job.cpus} -1 -1 {job.cpus} "
                     f"{job.requested_time_s:.0f} -1 1 {job.user[1:]} 1 -1 -1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


def openb(folder: Path, nodes: int, pods: int) -> tuple[Path, Path]:
    """An openb node list of ``nodes`` 8-GPU nodes and a pod list of ``pods`` one-GPU pods."""
    node_csv = folder / "nodes.csv"
    node_csv.write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                        + "".join(f"n{i},96000,786432,8,V100M32\n" for i in range(nodes)))
    pod_csv = folder / "pods.csv"
    pod_csv.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                       "deletion_time,scheduled_time\n"
                       + "".join(f"p{i},{4000 + 1000 * (i % 5)},16384,1,{250 * (1 + i % 4)},,LS,Running,0,1000,0\n"
                                 for i in range(pods)))
    return node_csv, pod_csv


def kill_mid_run(argv: list[str], folder: Path, started) -> None:
    """Start ``greenslurm ARGV``, SIGKILL it once it has two workers and ``started()`` holds, then
    check that its workers end (they watch their parent every 0.5 s; 60 s is slack for a loaded CI)."""
    process = subprocess.Popen([sys.executable, "-m", "greenslurm", *argv], cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: set[int] = set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        workers = children_of(process.pid)
        if len(workers) >= 2 and started():
            break
        time.sleep(0.05)
    assert process.poll() is None and len(workers) >= 2, process.stderr.read().decode()
    process.kill()
    assert process.wait(timeout=60) == -signal.SIGKILL
    settle = time.monotonic() + 60
    while any(alive(pid) for pid in workers) and time.monotonic() < settle:
        time.sleep(0.1)
    assert not [pid for pid in workers if alive(pid)], "workers outlived their killed parent"


def test_the_workers_of_a_killed_sweep_end_with_it(tmp_path):
    spec_path = write_spec(tmp_path, SPEC_200.replace("jobs = 30 }", "jobs = 400 }"))
    cells = tmp_path / "killed" / "cells"
    kill_mid_run(["sweep", str(spec_path), "--out", str(tmp_path / "killed"), "-j", "2", "--no-progress"],
                 tmp_path, lambda: len(list(cells.glob("*.json"))) >= 4)


def test_the_workers_of_a_killed_whatif_end_with_it(tmp_path):
    trace = swf(tmp_path / "jobs.swf", 6000, 32)
    cluster = tmp_path / "c.toml"
    cluster.write_text('[[node_group]]\nname = "n"\ncount = 8\ncpus = 4\n')
    kill_mid_run(["whatif", str(trace), "--cluster", str(cluster), "-j", "2", "--candidate", "conservative",
                  "--candidate", "fcfs", "--candidate", "c2=conservative:select=bestfit"], tmp_path,
                 lambda: True)


def test_the_workers_of_a_killed_inflate_end_with_it(tmp_path):
    nodes, pods = openb(tmp_path, 64, 200)
    kill_mid_run(["inflate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "400", "--workers", "2",
                  "--csv", str(tmp_path / "out.csv"), "--no-progress"], tmp_path, lambda: True)


def test_a_pool_of_no_worker_is_refused():
    # ProcessPoolExecutor(max_workers=0) is a ValueError too, but -j 0 must never get this far: the
    # commands refuse it in one line (test_bad_input.py)
    with pytest.raises(ValueError, match="at least 1 worker"):
        worker_pool(0)


def _square(x: int) -> int:
    return x * x


_SEEN: list[int] = []


def _remember(value: int) -> None:
    _SEEN.append(value)


def _seen(_: int) -> list[int]:
    return list(_SEEN)


def test_a_pool_runs_its_initializer_in_each_worker():
    with worker_pool(2, initializer=_remember, initargs=(7,)) as pool:
        assert list(pool.map(_square, [1, 2, 3])) == [1, 4, 9]
        assert pool.submit(_seen, 0).result() == [7]       # once in that worker, never in the parent
    assert _SEEN == []
