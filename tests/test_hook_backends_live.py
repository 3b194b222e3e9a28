"""Both backends of the hook service read the same real cluster (munged, slurmctld, four slurmd on
loopback) and must give the same view, field by field: the CLI backend (``sinfo --json``,
``squeue --json``) and the pyslurm backend (pyslurm 22.5, built for this Slurm by scripts/test).

The cluster holds what the view reads: GPUs and shards, a drained node whose reason has a byte that is
not UTF-8, node features, running jobs on GPUs, shards and two nodes, an ended job, pending jobs with
deadlines, a begin time, a --gpus request, a comment with bytes that are not UTF-8 (submitted by an ordinary user), a
held job, a throttled job array pinned to a node, a job that needs a feature, one that needs either of two
(``-C 'fast|slow'``), and a default partition that is not the first one slurm.conf lists.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from greenslurm.slurm_plugin.backend import CliBackend
from slurm_cluster import NodeDef, running_cluster, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

NODES = (NodeDef("n1", 4, 4000, 2, shards=8), NodeDef("n2", 4, 4000, 2), NodeDef("n3", 4, 4000),
         NodeDef("n4", 4, 4000))
# a partition listed before the default one: the default is read from Slurm, not guessed from the order
PARTITIONS = ("PartitionName=spare Nodes=n3,n4 MaxTime=INFINITE State=UP",
              "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
HERE = Path(__file__).parent
LONG = "#!/bin/sh\nsleep 600\n"
BAD = "a\udcff\udc80b"            # the bytes a \xff \x80 b: not UTF-8


def pyslurm_run(conf: Path, *args: str) -> subprocess.CompletedProcess:
    """tests/pyslurm_snapshot.py in a process of its own (pyslurm reads one configuration per process)."""
    return subprocess.run([sys.executable, str(HERE / "pyslurm_snapshot.py"), str(conf), *args],
                          capture_output=True, timeout=120, env=dict(os.environ, SLURM_CONF=str(conf)))


def pyslurm_snapshot(conf: Path, folder: Path):
    out = folder / "pyslurm-snapshot.pickle"
    done = pyslurm_run(conf, str(out))
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return pickle.loads(out.read_bytes())


def differences(a, b, path: str = "") -> list[str]:
    """Every field where ``a`` and ``b`` differ, named by its path (``running[2].uses[0].gpus``)."""
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return [d for f in dataclasses.fields(a)
                for d in differences(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for k in a for d in differences(a[k], b[k], f"{path}[{k!r}]")]
    return [] if a == b else [f"{path}: cli {a!r} != pyslurm {b!r}"]


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("greenslurm-backends-", NODES, partitions=PARTITIONS) as slurm:
        root = slurm.root.parent
        user = slurm.add_user("greenslurm-user")
        slurm.run("scontrol", "update", "NodeName=n4", "AvailableFeatures=fast", "ActiveFeatures=fast")
        slurm.run("scontrol", "update", "NodeName=n2", "AvailableFeatures=slow", "ActiveFeatures=slow")
        ended = slurm.sbatch("-t", "1", "-w", "n4", script="#!/bin/sh\nsleep 2\n").stdout.strip()
        slurm.wait_job_state(ended, ("COMPLETED",))
        slurm.run("scontrol", "update", "NodeName=n3", "State=DRAIN", f"Reason=broken {BAD}")
        jobs = {
            "gpu": slurm.sbatch("-t", "10", "-n", "2", "--gres=gpu:1", "--mem=1000", script=LONG),
            "shard": slurm.sbatch("-t", "10", "--gres=shard:3", "-w", "n1", script=LONG),
            "two_nodes": slurm.sbatch("-t", "10", "-N", "2", "-n", "5", "-w", "n[1-2]", script=LONG),
            "comment": slurm.sbatch("-t", "10", "--begin=now+600", "--deadline=now+900", f"--comment={BAD}",
                                    script=LONG, user=user),
            "array": slurm.sbatch("-t", "10", "--array=1-9%2", "-n", "4", "--deadline=now+3600",
                                  "--mem-per-cpu=100", "-w", "n4", script=LONG),
            "held": slurm.sbatch("-H", "-t", "20", "--deadline=now+7200", script=LONG),
            "feature": slurm.sbatch("-t", "5", "-C", "fast", "--begin=now+300", script=LONG),
            "gpus": slurm.sbatch("-t", "10", "--gpus=2", "--begin=now+600", "--deadline=now+5400", script=LONG),
            "per_task": slurm.sbatch("-t", "10", "-n", "2", "--ntasks-per-node=2", "--gpus-per-task=1",
                                     "--begin=now+600", script=LONG),
            "any_feature": slurm.sbatch("-t", "5", "-C", "fast|slow", "--begin=now+300", script=LONG),
            "excluded": slurm.sbatch("-t", "5", "-x", "n[1-2]", "--begin=now+300", script=LONG),
        }
        for name, result in jobs.items():
            assert result.returncode == 0, f"{name}: {result.stderr}"
        ids = {name: r.stdout.strip() for name, r in jobs.items()}
        for name in ("gpu", "shard", "two_nodes"):
            slurm.wait_job_state(ids[name], ("RUNNING",), timeout_s=60)
        slurm.wait_job_state(f"{ids['array']}_1", ("RUNNING",), timeout_s=60)   # n4 holds one task
        ids["ended"] = ended
        yield slurm, ids, root


def test_both_backends_give_the_same_view_field_by_field(cluster):
    slurm, ids, root = cluster
    cli, cli_deadlines = CliBackend(str(slurm.conf)).snapshot()
    py, py_deadlines = pyslurm_snapshot(slurm.conf, root)
    assert differences(cli.nodes, py.nodes, "nodes") == []
    assert differences(cli.running, py.running, "running") == []
    assert differences(cli.pending, py.pending, "pending") == []
    assert differences(cli.runs, py.runs, "runs") == []
    assert differences(cli_deadlines, py_deadlines, "deadlines") == []
    assert (cli.skipped, py.skipped) == (0, 0)
    # the partition a job naming none goes to: Slurm's Default=YES, not the first one listed
    assert (cli.default_partition, py.default_partition) == ("debug", "debug")

    # what both read, from Slurm's own answers
    nodes = {n.name: n for n in py.nodes}
    assert [n.name for n in py.nodes] == ["n1", "n2", "n3", "n4"]
    assert (nodes["n1"].gpus, nodes["n1"].shards, nodes["n2"].gpus, nodes["n4"].features) == (2, 8, 2, ("fast",))
    assert "drain" in nodes["n3"].state and nodes["n3"].reason == f"broken {BAD}" and not nodes["n3"].usable
    running = {r.job_id: r for r in py.running}
    shard = running[ids["shard"]].uses
    # 3 shards of n1, whose 8 shards are 4 per GPU: 3/4 of one GPU = 750 milli-GPU
    assert len(shard) == 1 and shard[0].node == "n1" and [m for _, m in shard[0].gpus] == [750]
    gpu = running[ids["gpu"]].uses
    assert len(gpu) == 1 and gpu[0].cpus == 2 and [m for _, m in gpu[0].gpus] == [1000]
    two = running[ids["two_nodes"]].uses
    assert sum(u.cpus for u in two) == 5 and len(two) == 2
    pending = {p.job_id: p for p in py.pending}
    assert pending[ids["held"]].held and not pending[ids["comment"]].held
    assert pending[ids["feature"]].features == ("fast",) and pending[ids["feature"]].begin_s is not None
    # an OR constraint stays one expression (planned on the nodes with any of them), not two features
    assert pending[ids["any_feature"]].features == ("fast|slow",), pending[ids["any_feature"]]
    # -x: the nodes a job excludes (the power saving never wakes them for it)
    assert pending[ids["excluded"]].excluded_nodes == ("n1", "n2") and pending[ids["feature"]].excluded_nodes == ()
    array = pending[ids["array"]]
    # tasks 1-9, at most 2 at once, but each takes all 4 CPUs of n4: task 1 runs, 8 wait
    assert (array.tasks, array.throttle, array.required_nodes) == (8, 2, ("n4",))
    deadlines = {d.job_id: d for d in py_deadlines}
    assert deadlines[ids["comment"]].comment == BAD and deadlines[ids["comment"]].user == "greenslurm-user"
    assert set(deadlines) == {ids["comment"], ids["array"], ids["held"], ids["gpus"]}
    # --gpus=2 (tres_per_job; pyslurm reads it through its older API): two GPUs in all; --gpus-per-task=1
    # with 2 tasks, both on one node: 2 GPUs too
    assert pending[ids["gpus"]].job.extra.get("gpus_total") == 2, pending[ids["gpus"]].job
    per_task = pending[ids["per_task"]].job
    assert per_task.extra.get("gpus_total", 0) == 2 or per_task.gpus_per_node == 2.0, per_task
    ended = {r.job_id: r for r in py.runs}[ids["ended"]]
    assert ended.nodes == ("n4",) and ended.end_s is not None and ended.state == "COMPLETED"


def test_both_backends_write_a_comment_slurm_keeps(cluster):
    slurm, ids, root = cluster
    held = ids["held"]
    CliBackend(str(slurm.conf)).annotate(held, f"{BAD} | greenslurm: cli")
    raw = slurm.run("squeue", "-h", "-j", held, "-o", "%k", input=b"").stdout
    assert raw.strip() == b"a\xff\x80b | greenslurm: cli"        # the user's bytes go back unchanged
    done = pyslurm_run(slurm.conf, "--annotate", held, f"{BAD} | greenslurm: pyslurm")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    raw = slurm.run("squeue", "-h", "-j", held, "-o", "%k", input=b"").stdout
    # pyslurm writes UTF-8 only: each byte that is not becomes "?" (the length Slurm was given holds)
    assert raw.strip() == b"a??b | greenslurm: pyslurm"
