"""Alibaba openb reader: pods and node lists, golden figures on the real 2023 GPU trace."""

from __future__ import annotations

import math

import pytest

from greenslurm.clustermodel.errors import InputError
from greenslurm.traces import read_trace
from greenslurm.traces.alibaba import parse_pods, read_nodes

NO_LIMIT = "requested time unknown: runtime used"
NEVER_SCHEDULED = "never scheduled: runtime = deletion - creation"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def alibaba(shared_data, name):
    return str(shared_data / "alibaba-gpu-2023" / name)


@pytest.fixture(scope="module")
def default_pods(shared_data):
    return read_trace(alibaba(shared_data, "openb_pod_list_default.csv"))


def test_default_pod_list_golden(default_pods):
    result = default_pods
    assert result.format == "alibaba"
    # awk -F, 'NR>1' openb_pod_list_default.csv: 8152 pods, scheduled_time ($11) empty on 897 (Pending)
    assert (result.records_read, len(result.jobs), dict(result.skipped)) == (8152, 8152, {})
    assert result.adjusted == {NO_LIMIT: 8152, NEVER_SCHEDULED: 897}
    # awk: num_gpu ($4) 0 on 1088 pods; num_gpu 1 with gpu_milli ($5) < 1000 on 3078 pods (sum of
    # gpu_milli 1731800); whole GPUs: 3911 x 1, 16 x 2, 15 x 4, 44 x 8
    # -> 1731.8 + 3911 + 32 + 60 + 352 = 6086.8 GPUs asked in all
    gpus = [j.gpus_per_node for j in result.jobs]
    assert sum(1 for g in gpus if g == 0) == 1088
    assert sum(1 for g in gpus if 0 < g < 1) == 3078
    assert {n: gpus.count(n) for n in (1.0, 2.0, 4.0, 8.0)} == {1.0: 3911, 2.0: 16, 4.0: 15, 8.0: 44}
    assert math.isclose(sum(gpus), 6086.8)
    # awk: sum of cpu_milli ($2) = 85436012; sum of ceil(cpu_milli / 1000) = 88697;
    # sum of deletion - (scheduled, or creation when empty) = 210197755 s
    assert sum(j.extra["cpu_milli"] for j in result.jobs) == 85436012
    assert sum(j.cpus for j in result.jobs) == 88697
    assert sum(j.runtime_s for j in result.jobs) == 210197755
    assert all(j.nodes == 1 and j.requested_time_s == j.runtime_s for j in result.jobs)


def test_first_pods_in_detail(default_pods):
    # openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
    pod = next(j for j in default_pods.jobs if j.job_id == "openb-pod-0001")
    assert (pod.cpus, pod.memory_mb_per_node, pod.gpus_per_node, pod.gpu_model) == (6, 12288.0, 0.46, None)
    assert (pod.submit_s, pod.runtime_s, pod.state, pod.source_line) == (427061.0, 12902960.0 - 427061, "Running", 3)
    assert pod.extra == {"cpu_milli": 6000, "num_gpu": 1, "gpu_milli": 460, "qos": "LS",
                         "scheduled_s": 427061.0, "wait_s": 0.0}
    assert default_pods.jobs[0].job_id == "openb-pod-0000" and default_pods.jobs[0].submit_s == 0.0


def test_gpu_spec_kept_whole(shared_data):
    result = read_trace(alibaba(shared_data, "openb_pod_list_gpuspec33.csv"))
    specs = [j.gpu_model for j in result.jobs if j.gpu_model]
    assert len(specs) == 2388                     # awk -F, 'NR>1 && $6 != ""' -> 2388
    assert "G2|P100|T4|V100M16|V100M32" in specs


def test_untimed_multigpu_variant(shared_data):
    result = read_trace(alibaba(shared_data, "openb_pod_list_multigpu20.csv"))
    assert (result.records_read, len(result.jobs)) == (8324, 8324)   # wc -l minus the header
    assert result.adjusted == {"no time columns: submit 0, runs forever": 8324}
    job = result.jobs[0]
    assert job.submit_s == 0 and job.runtime_s is None and job.requested_time_s == math.inf


def test_node_lists(shared_data):
    # awk -F, 'NR>1 {n++; g+=$4; c+=$2/1000; k=int(($2/1000+31)/32); i+=15*k; b+=120*k}'
    for name, nodes, gpus, cpus, idle, busy in (("openb_node_list_all_node.csv", 1523, 6212, 125514, 64605, 516840),
                                                ("openb_node_list_gpu_node.csv", 1213, 6212, 107018, 55665, 445320)):
        cluster = read_nodes(alibaba(shared_data, name))
        assert (cluster.size, cluster.total_gpus, cluster.total_cpus) == (nodes, gpus, cpus)
        assert (cluster.idle_w.sum(), cluster.busy_w.sum()) == (idle, busy)
    cluster = read_nodes(alibaba(shared_data, "openb_node_list_gpu_node.csv"))
    g2 = next(n for n in cluster.nodes if n.gpu_model == "G2")
    g3 = next(n for n in cluster.nodes if n.gpu_model == "G3")
    assert (g2.cpus, g2.gpus, g2.idle_w, g2.busy_w, g2.gpu_idle_w, g2.gpu_max_w) == (96, 8, 45.0, 360.0, 30.0, 150.0)
    assert (g3.cpus, g3.idle_w, g3.busy_w, g3.gpu_idle_w, g3.gpu_max_w) == (128, 60.0, 480.0, 50.0, 400.0)
    assert g2.cpu_model == "Xeon E5-2682 v4" and (g2.name, g2.memory_mb) == ("openb-node-0026", 393216)


def test_node_list_is_not_a_trace(shared_data):
    with pytest.raises(InputError, match="this is a node list"):
        read_trace(alibaba(shared_data, "openb_node_list_gpu_node.csv"))


@pytest.mark.parametrize("row, reason, field", [
    ("p,6000,12288,2,500,,LS,Running,1,5,1", "multi-GPU share (num_gpu > 1, gpu_milli < 1000)", "gpu_milli"),
    ("p,6000,12288,0,500,,LS,Running,1,5,1", "gpu_milli without num_gpu", "gpu_milli"),
    ("p,6000,-5,1,1000,,LS,Running,1,5,1", "bad field memory_mib", "memory_mib"),
    ("p,6000,12288,1,1500,,LS,Running,1,5,1", "bad field gpu_milli", "gpu_milli"),
    ("p,6000,12288,1,1000,,LS,Running,9,5,9", "deletion before creation", "deletion_time"),
    ("p,6000,12288,1,1000,,LS,Running,1,,1", "deletion time unknown", "deletion_time"),
    ("p,6000,12288,1,1000,,LS,Running,,5,1", "creation time unknown", "creation_time"),
    ("p,6000,12288,1,1000,,LS,Running,1,5,7", "bad field scheduled_time", "scheduled_time"),
    ("p,6000,12288,1,1000,,LS,Running,1,5", "wrong field count", None),
    ("p,six,12288,1,1000,,LS,Running,1,5,1", "bad field cpu_milli", "cpu_milli"),
])
def test_bad_pods(row, reason, field):
    text = f"{POD_HEADER}\n{row}\nok,1000,1024,0,0,,BE,Running,0,10,0\n"
    result = parse_pods(text, "pods.csv")
    assert result.skipped == {reason: 1} and len(result.jobs) == 1
    with pytest.raises(InputError) as info:
        parse_pods(text, "pods.csv", strict=True)
    assert (info.value.path, info.value.line, info.value.field) == ("pods.csv", 2, field)


def test_strict_mode_flags_every_timed_pod():
    """The trace has no time limits, so every pod is adjusted: strict mode stops at the first one."""
    with pytest.raises(InputError, match=r"p.csv:2: field deletion_time: the trace has no time limits"):
        parse_pods(f"{POD_HEADER}\nok,1000,1024,0,0,,BE,Running,0,10,0\n", "p.csv", strict=True)


@pytest.mark.parametrize("row, message", [
    ("n1,96500,1024,8,G2", "n.csv:3: field cpu_milli: cpu_milli 96500 is not a positive whole number of CPUs"),
    ("n1,96000,-1,8,G2", "n.csv:3: field memory_mib: '-1' is not a whole number >= 0"),
    ("n0,96000,1024,8,G2", "n.csv:3: field sn: node 'n0' is listed twice"),
    ("n1,96000,1024", "n.csv:3: 3 fields, the header has 5"),
])
def test_bad_node_lists(tmp_path, row, message):
    path = tmp_path / "n.csv"
    path.write_text(f"sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1024,8,G2\n{row}\n")
    with pytest.raises(InputError) as info:
        read_nodes(str(path))
    assert str(info.value) == f"{tmp_path}/{message}"
