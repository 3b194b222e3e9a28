"""Reading a sacct export's memory as Slurm 22.05 saw it (greenslurm.sim.engine.slurm_memory).

A job without --mem has pn_min_memory 0, but sacct shows its partition's first node's RealMemory
(job_mgr.c job_get_tres_mem, _mem_per_node_part); the real-Slurm cases are in test_slurm_gaps.py
(memory-consumable, memory-not-consumable).  Here: the reading rule on crafted inputs.
"""

from __future__ import annotations

import pytest

from greenslurm.clustermodel import JobSpec
from greenslurm.sim.engine.slurm_memory import (WHOLE_NODE, asked_no_memory, first_node_memory, has_default_memory,
                                                read_memory_as_slurm, whole_node_memory)
from greenslurm.traces.slurm_conf import parse_slurm_conf_text

CONF = ("NodeName=small[1-2] CPUs=2 RealMemory=2000\nNodeName=big CPUs=4 RealMemory=4000\n"
        "PartitionName=mixed Nodes=big,small1 Default=YES\nPartitionName=s Nodes=small[1-2]\n"
        "PartitionName=ghost Nodes=small1\n")


def spec(memory, scope="job", partition="mixed"):
    return JobSpec("j", 0.0, 60.0, cpus=1, memory_mb_per_node=memory, partition=partition,
                   extra={"memory_scope": scope} if scope else {})


def test_the_first_node_is_slurms_node_order_not_the_partition_lines():
    # "mixed" lists big first, but small1 comes first among the NodeName lines (index 0): 2000 MB
    assert first_node_memory(parse_slurm_conf_text(CONF)) == {"mixed": 2000.0, "s": 2000.0, "ghost": 2000.0}


@pytest.mark.parametrize("job, expected", [
    (spec(2000.0), True),                       # the first node's RealMemory: no --mem
    (spec(2000.0, scope="node"), True),         # ReqMem 2000Mn
    (spec(2000.0, scope="tres"), True),         # no ReqMem column: the TRES mem
    (spec(2000.0, scope="cpu"), False),         # per CPU: a request
    (spec(2000.0, scope="cpu-flag"), False),
    (spec(2000.0, scope=None), False),          # not read from sacct: as given
    (spec(1999.0), False),                      # any other amount is a request
    (spec(0.0), False),
    (spec(2000.0, partition="nowhere"), False),  # a partition slurm.conf does not define
    (spec(2000.0, partition="s,mixed"), True),  # several partitions: the first
    (spec(2000.0, partition=""), True),         # none named: the default partition (mixed)
])
def test_which_memory_is_read_as_no_request(job, expected):
    conf = parse_slurm_conf_text(CONF)
    assert asked_no_memory(job, first_node_memory(conf), conf.default_partition.name) is expected


def test_a_job_that_asked_none_keeps_everything_else_and_others_stay_as_they_are():
    conf = parse_slurm_conf_text(CONF)
    jobs = [spec(2000.0), spec(500.0)]
    read = read_memory_as_slurm(jobs, first_node_memory(conf), "mixed")
    assert (read[0].memory_mb_per_node, whole_node_memory(read[0]), read[0].extra["memory_scope"]) == (0.0, True, "job")
    assert read[1] is jobs[1] and not whole_node_memory(read[1])
    assert WHOLE_NODE not in jobs[0].extra                 # the job as read is not changed


@pytest.mark.parametrize("line, default", [("", False), ("DefMemPerCPU=1000\n", True), ("DefMemPerNode=500\n", True),
                                           ("MaxMemPerCPU=1000\n", False)])
def test_a_default_memory_in_slurm_conf_turns_the_rule_off(line, default):
    assert has_default_memory(parse_slurm_conf_text(line + CONF)) is default
