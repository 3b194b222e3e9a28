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


@pytest.mark.parametrize("lines, default", [
    ("DefMemPerNode=0\n", False),                     # read_config.c: def_mem_per_cpu = 0, as without it
    ("DefMemPerNode=0\nDefMemPerCPU=1000\n", False),  # DefMemPerNode given: DefMemPerCPU ignored (Slurm logs an error)
    ("DefMemPerCPU=0\n", True),                       # 0 | MEM_PER_CPU: jobs show ReqMem 0Mc, a per-CPU request
    ("DefMemPerNode=2000\n", True),
])
def test_a_default_memory_of_zero_per_node_is_no_default(lines, default):
    # Slurm 22.05 read_config.c: DefMemPerNode, when given, sets def_mem_per_cpu (0: no default, the
    # same as DEFAULT_MEM_PER_CPU) and DefMemPerCPU is then ignored; only DefMemPerCPU sets the per-CPU flag
    assert has_default_memory(parse_slurm_conf_text(lines + CONF)) is default


def test_an_export_without_reqmem_reads_memory_from_the_request_not_the_allocation(tmp_path):
    # The real memory-consumable recording (Slurm 22.05, CR_Core_Memory; n1 4000 MB first, n2 n3 2000 MB):
    # job c asked no memory: ReqTRES mem=4000M (the first node's RealMemory), AllocTRES mem=2000M (n2's
    # whole memory); job b asked --mem=500 on 2 nodes: ReqTRES mem=500M,node=1, AllocTRES mem=1000M,node=2.
    # The request, not the allocation, is what the job asked: the export read without its ReqMem
    # column must give every job the memory (and the "asked none" reading) it gives with it.
    from pathlib import Path

    from greenslurm.traces.sacct import read_sacct
    from greenslurm.traces.slurm_conf import parse_slurm_conf
    folder = Path(__file__).parent / "data" / "slurm-gaps" / "memory-consumable"
    conf = parse_slurm_conf(folder / "slurm.conf")
    lines = (folder / "trace.txt").read_text().splitlines()
    column = lines[0].split("|").index("ReqMem")
    without = ["|".join(cell for i, cell in enumerate(line.split("|")) if i != column) for line in lines]
    (tmp_path / "trace.txt").write_text("\n".join(without) + "\n")
    read = {}
    for name, path in (("with", folder / "trace.txt"), ("without", tmp_path / "trace.txt")):
        jobs = read_memory_as_slurm(list(read_sacct(str(path)).jobs), first_node_memory(conf), "all")
        read[name] = {job.job_id: (job.memory_mb_per_node, whole_node_memory(job)) for job in jobs}
    # a (3900) b (500 per node) d (100) asked memory; c and e (4000 = n1's RealMemory) asked none
    assert read["with"] == {"1": (3900.0, False), "2": (500.0, False), "3": (0.0, True), "4": (100.0, False),
                            "5": (0.0, True)}
    assert read["without"] == read["with"]


HEADER = "JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|ReqMem|ReqTRES|Timelimit|NodeList\n"


@pytest.mark.parametrize("reqmem, reqtres, reason", [
    ("1e400M", "", "bad field ReqMem"),          # not a size (an exponent is not Slurm's)
    ("-5G", "", "bad field ReqMem"),
    ("nanM", "", "bad field ReqMem"),
    ("4000Mcn", "", "bad field ReqMem"),
    ("", "cpu=2,mem=nanM,node=1", "bad field ReqTRES"),   # no ReqMem: the memory from ReqTRES
    ("", "cpu=2,mem=-5G,node=1", "bad field ReqTRES"),
    ("", "cpu=2,mem=,node=1", "bad field ReqTRES"),
])
def test_crafted_memory_fields_are_counted_skips_or_one_line_errors(tmp_path, reqmem, reqtres, reason):
    # job 1 carries the crafted field, job 2 is sound: job 1 counted out with the field named; with
    # --strict the reader stops at it in one line naming file, line 2 and the field
    from greenslurm.clustermodel import InputError
    from greenslurm.traces.sacct import read_sacct
    path = tmp_path / "jobs.txt"
    day = "2024-03-01T00:"
    path.write_text(HEADER + f"1|alice|batch|{day}00:00|{day}00:00|{day}05:00|00:05:00|COMPLETED|1|2|{reqmem}|"
                    f"{reqtres}|00:10:00|n1\n" + f"2|alice|batch|{day}10:00|{day}10:00|{day}15:00|00:05:00|"
                    "COMPLETED|1|2|100Mn|cpu=2,mem=100M,node=1|00:10:00|n1\n")
    result = read_sacct(str(path))
    assert [job.job_id for job in result.jobs] == ["2"] and result.skipped == {reason: 1}
    with pytest.raises(InputError) as error:
        read_sacct(str(path), strict=True)
    text = str(error.value)
    assert "\n" not in text and "jobs.txt" in text and ":2" in text and reason.split()[-1] in text, text


@pytest.mark.parametrize("queue, site_default, expected", [
    ("slurm", "", 2),                     # c and e: ReqMem 4000M, n1's RealMemory (see above)
    ("slurm", "DefMemPerCPU=1000\n", 0),  # a default memory: every ReqMem is what the job holds
    ("easy", "", None),                   # not the Slurm queue: memory read as given, no count
])
def test_the_replay_counts_the_jobs_read_as_asking_no_memory(queue, site_default, expected, tmp_path, capsys,
                                                             monkeypatch):
    # the report's table wraps at the terminal's width (80 without a terminal) and shares it with tmp_path,
    # whose length varies (pytest-xdist adds popen-gwN/): a width of our own keeps the row on one line
    monkeypatch.setenv("COLUMNS", "250")
    # summary.json's memory_asked_none and a row of the report's table of adjusted jobs
    import json
    from pathlib import Path

    from greenslurm.cli import main
    folder = Path(__file__).parent / "data" / "slurm-gaps" / "memory-consumable"
    conf = tmp_path / "slurm.conf"
    conf.write_text(site_default + (folder / "slurm.conf").read_text())
    summary = tmp_path / "summary.json"
    assert main(["replay", str(folder / "trace.txt"), "--queue", queue, "--slurm-conf", str(conf), "--no-progress",
                 "--json", str(summary)]) == 0
    assert json.loads(summary.read_text()).get("memory_asked_none") == expected
    shown = [line.split() for line in capsys.readouterr().out.splitlines() if "asked no memory" in line]
    assert shown == ([["adjusted", "slurm.conf", "asked", "no", "memory", "(sacct", "shows", "its", "partition's",
                       "first", "node's", "memory)", str(expected)]] if expected else [])
