"""FCFS, EASY and conservative on a slurm.conf's cluster run in the processor-pool core wherever its
nodes are interchangeable single-CPU nodes for the jobs replayed, with the general loop
(``GREENSLURM_POOL_CORE=off``) as the reference, bit for bit; where they are not, the general loop
runs it and the user is told once why."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import JobSpec, native
from greenslurm.sim.engine import pool_core
from greenslurm.sim.engine.replay import Replay, pool_refusal
from greenslurm.sim.machines.machine import Machine
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf_text

from test_pool_core import assert_same

DATA = Path(__file__).parent / "data" / "slurm-conf-pool"
POOL_CONF, SPLIT_CONF = DATA / "slurm.conf", DATA / "two-partitions.conf"
QUEUES = ("fcfs", "easy", "conservative")


def kth_cut(shared_data, tmp_path, jobs: int) -> Path:
    """KTH-SP2's header and first ``jobs`` records."""
    lines = (shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf").read_text().splitlines(keepends=True)
    header = [line for line in lines if line.startswith(";")]
    records = [line for line in lines if not line.startswith(";")][:jobs]
    path = tmp_path / f"kth-{jobs}.swf"
    path.write_text("".join(header + records))
    return path


def replay_out(trace: Path, out: Path, queue: str, core: str, *conf: str) -> subprocess.CompletedProcess:
    env = {"GREENSLURM_POOL_CORE": core, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), "--queue", queue, *conf,
                           "--no-progress", "-v", "--out", str(out)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("queue", QUEUES)
def test_kth_with_a_pool_slurm_conf_same_bytes_core_and_general_loop(shared_data, tmp_path, queue):
    """KTH-SP2's first 3,000 jobs with the site's slurm.conf: the core and the general loop write the
    same jobs.csv, power.csv and summary.json, and so does the replay on the SWF header's 100
    processors (the cluster is the same; only where it was read from differs)."""
    trace = kth_cut(shared_data, tmp_path, 3000)
    runs = {core: replay_out(trace, tmp_path / core, queue, core, "--slurm-conf", str(POOL_CONF))
            for core in ("auto", "off")}
    assert "the processor-pool core (compiled) runs the replay" in runs["auto"].stderr
    assert "the general loop runs the replay" in runs["off"].stderr
    header = replay_out(trace, tmp_path / "header", queue, "auto")
    assert "processor-pool core" in header.stderr
    for name in ("jobs.csv", "power.csv"):
        assert filecmp.cmp(tmp_path / "auto" / name, tmp_path / "off" / name, shallow=False), name
        assert filecmp.cmp(tmp_path / "auto" / name, tmp_path / "header" / name, shallow=False), name
    assert (tmp_path / "auto" / "summary.json").read_bytes() == (tmp_path / "off" / "summary.json").read_bytes()
    assert "warning" not in runs["auto"].stderr


def test_two_partitions_keep_the_general_loop_and_say_so_once(shared_data, tmp_path):
    """Jobs of the default partition may use 80 of the 100 nodes: the nodes are not interchangeable.
    The replay runs in the general loop and the one-line warning says which fast path and why."""
    trace = kth_cut(shared_data, tmp_path, 300)
    done = replay_out(trace, tmp_path / "out", "easy", "auto", "--slurm-conf", str(SPLIT_CONF))
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == ["greenslurm: warning: the processor-pool core cannot run this replay on the slurm.conf's "
                        "cluster (partitions or features keep some jobs off some nodes): the compiled core models "
                        "interchangeable single-CPU nodes, so the replay runs in the general loop, slower "
                        "(KTH-SP2 on 100 one-CPU nodes in the general loop: EASY 9x, conservative 87x the CPU time)"]
    assert "the general loop runs the replay" in done.stderr


def test_the_warning_is_said_once_per_process(monkeypatch, capsys):
    monkeypatch.setattr(native, "_WARNED_SLURM_CONF", [])
    native.warn_slurm_conf_once("its nodes have more than one CPU")
    native.warn_slurm_conf_once("its nodes have GPUs")
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "(its nodes have more than one CPU)" in err


@pytest.mark.parametrize("conf, jobs, reason", [
    # 4-CPU nodes (tests/data/slurm-conf): not single-CPU processors
    ("NodeName=c[1-2] CPUs=4\nPartitionName=p Nodes=ALL Default=YES", [JobSpec("a", 0.0, 5.0, cpus=1)],
     "its nodes have more than one CPU"),
    ("NodeName=c1 CPUs=1\nNodeName=c2 CPUs=1 RealMemory=64\nPartitionName=p Nodes=ALL Default=YES",
     [JobSpec("a", 0.0, 5.0, cpus=1)], "its nodes differ in size"),
    ("NodeName=c[1-2] CPUs=1 RealMemory=64\nPartitionName=p Nodes=ALL Default=YES",
     [JobSpec("a", 0.0, 5.0, cpus=1, memory_mb_per_node=8.0)], "jobs ask for memory"),
    # a job naming a partition the cluster lacks is skipped by the general loop: not the core's to count
    ("NodeName=c[1-2] CPUs=1\nPartitionName=p Nodes=ALL Default=YES", [JobSpec("a", 0.0, 5.0, partition="q")],
     "partitions or features keep some jobs off some nodes"),
    ("NodeName=c[1-2] CPUs=1 Feature=ib\nPartitionName=p Nodes=ALL Default=YES",
     [JobSpec("a", 0.0, 5.0, constraint="ib")], None),                     # every node has ib
    ("NodeName=c1 CPUs=1 Feature=ib\nNodeName=c2 CPUs=1\nPartitionName=p Nodes=ALL Default=YES",
     [JobSpec("a", 0.0, 5.0, constraint="ib")], "partitions or features keep some jobs off some nodes"),
    # SWF partition numbers on partitions with names do not restrict; nor does a job naming none
    ("NodeName=c[1-2] CPUs=1\nPartitionName=p Nodes=ALL Default=YES",
     [JobSpec("a", 0.0, 5.0, partition="3"), JobSpec("b", 0.0, 5.0)], None),
])
def test_pool_refusal_names_why(conf, jobs, reason):
    machine = Machine(cluster_from_slurm_conf(parse_slurm_conf_text(conf)))
    assert pool_refusal(machine, jobs) == reason


@st.composite
def site_and_jobs(draw):
    """A slurm.conf of 1-6 single-CPU nodes (RealMemory at Slurm's default or given), in one default
    partition or in two that each hold every node, and jobs of 1-7 processors naming either
    partition, a partition number, or none."""
    nodes = draw(st.integers(1, 6))
    memory = draw(st.sampled_from(["", " RealMemory=1000"]))
    both = draw(st.booleans())
    conf = f"NodeName=n[1-{nodes}] CPUs=1{memory}\nPartitionName=a Nodes=ALL Default=YES\n"
    if both:
        conf += "PartitionName=b Nodes=ALL\n"
    names = ["", "a", "7"] + (["b", "a,b"] if both else [])
    count = draw(st.integers(1, 25))
    jobs = []
    for i in range(count):
        submit = float(draw(st.integers(0, 40)))
        requested = float(draw(st.integers(1, 30)))
        runtime = float(draw(st.integers(0, 35)))
        jobs.append(JobSpec(str(i), submit, requested, runtime_s=runtime, cpus=draw(st.integers(1, 7)),
                            partition=draw(st.sampled_from(names))))
    return conf, jobs


@pytest.fixture(scope="module")
def module_monkeypatch():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


class WatchedReplay(Replay):
    """A replay that notes whether the processor-pool core ran it."""

    used_core = False

    def _run_pool_core(self, inputs):
        self.used_core = True
        return super()._run_pool_core(inputs)


@pytest.mark.parametrize("queue", QUEUES)
@settings(max_examples=60, deadline=None)
@given(case=site_and_jobs())
def test_random_sites_core_equals_general_loop(module_monkeypatch, queue, case):
    conf, jobs = case
    cluster = cluster_from_slurm_conf(parse_slurm_conf_text(conf))
    results = {}
    for core in ("compiled", "off"):
        module_monkeypatch.setenv(pool_core.ENV, core)
        run = WatchedReplay(jobs, cluster, queue)
        assert run.pool_refusal is None
        results[core] = run.run()
        assert run.used_core == (core == "compiled")
    assert_same(results["compiled"], results["off"])
    assert results["compiled"].skipped == results["off"].skipped


def test_the_deadline_core_takes_a_pool_slurm_conf_too(shared_data, tmp_path):
    """The deadline queue's core runs on the same processor pools: KTH-SP2's first 1,000 jobs, greedy
    acceptance, best fit, with the pool slurm.conf: the core and the general loop write the same bytes."""
    trace = kth_cut(shared_data, tmp_path, 1000)
    runs = {}
    for core in ("auto", "off"):
        env = {"GREENSLURM_DEADLINE_CORE": core, "PATH": "/usr/bin:/bin"}
        runs[core] = subprocess.run(
            [sys.executable, "-m", "greenslurm", "replay", str(trace), "--queue", "deadline", "--acceptance", "greedy",
             "--select", "bestfit", "--slurm-conf", str(POOL_CONF), "--no-progress", "-v", "--out", str(tmp_path / core)],
            capture_output=True, text=True, env=env)
        assert runs[core].returncode == 0, runs[core].stderr
    assert "the deadline core (compiled) runs the replay" in runs["auto"].stderr
    assert "the general loop runs the replay" in runs["off"].stderr
    for name in ("jobs.csv", "power.csv", "summary.json"):
        assert filecmp.cmp(tmp_path / "auto" / name, tmp_path / "off" / name, shallow=False), name
