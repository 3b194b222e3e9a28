"""The slurm queue's node choice against real Slurm 22.05, given the state Slurm really had.

``bench/slurm_node_choice.py`` walks a recording's slurmctld log (its allocations and ends in
millisecond order) and, at each allocation, asks the node choice of the slurm queue
(:mod:`greenslurm.allocation.consecutive`) for the job's nodes among the CPUs and memory free at
that instant.  The expected nodes are Slurm's own (``sched: Allocate ... NodeList=``), from
development recordings (``bench/data/slurm-workloads``), never from the code.
"""

from __future__ import annotations

import doctest
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import slurm_node_choice  # noqa: E402

W = ROOT / "bench" / "data" / "slurm-workloads"

# every main-scheduler allocation of each recording, as Slurm made it (same nodes, allocations):
# s51 (8 nodes of 4/2 CPUs, CR_Core_Memory, -N jobs with --mem): its j38 (-N 3 -n 3 --mem=250) got
# n01,n02,n08, which needs the CPUs still wanted to count down as nodes are taken; s82 (6 nodes,
# compressed, CR_Core) and its re-recording at debug3 (debug1): j23 (-N 2 -n 2) got n02,n06, Slurm's
# scan of the sets (n06: 15 CPUs on too few nodes, displacing n01-n02: 10 CPUs on 2); s14 (-n jobs
# laid out CPU by CPU and -N fills, CR_CPU); s81 (32 nodes, CR_Core_Memory, backfill)
MAIN_ALLOCATIONS = {"s51/run1": 33, "s82/run1": 60, "s82/debug1": 60, "s14/run1": 60, "s81/run1": 57}


@pytest.mark.parametrize("recording", sorted(MAIN_ALLOCATIONS))
def test_the_node_choice_given_slurms_state_is_slurms_for_every_main_scheduler_allocation(recording):
    found = slurm_node_choice.compare(W / recording)
    assert [m for m in found.mismatches if m.scheduler == "main"] == []
    assert found.main == (MAIN_ALLOCATIONS[recording], MAIN_ALLOCATIONS[recording])


def test_the_plain_set_order_would_miss_slurms_nodes_for_a_node_count(monkeypatch):
    # the order before (the sufficient set with the fewest CPUs, else the most, for a job counting
    # nodes too) placed j23 of s82 on n01,n02; (j38 of s51 needed the CPUs wanted to count down:
    # tests/test_consecutive.py)
    from greenslurm.allocation import consecutive

    def old_take(self, need_cpus, need_nodes=0):
        left = [i for i in range(len(self.totals)) if not self.taken[i]]
        sufficient = [i for i in left if self.totals[i] >= need_cpus and self.sizes[i] >= need_nodes]
        best = (min(sufficient, key=lambda i: (self.totals[i], i)) if sufficient
                else max(left, key=lambda i: (self.totals[i], -i)))
        self.taken[best] = True
        self.untaken -= 1
        return best, bool(sufficient)

    monkeypatch.setattr(consecutive._SetOrder, "_take_counted", old_take)
    found = slurm_node_choice.compare(W / "s82" / "run1")
    missed = [(m.job, m.slurm, m.rule) for m in found.mismatches if m.scheduler == "main"]
    assert missed == [("j23", ("n02", "n06"), ("n01", "n02"))]


def test_its_examples_run():
    assert doctest.testmod(slurm_node_choice).failed == 0


def _copy(recording: str, to: Path) -> Path:
    folder = to / "run1"
    folder.mkdir()
    for name in ("trace.txt", "slurm.conf", "slurmctld.log"):
        shutil.copy(W / recording / name, folder / name)
    shutil.copy(W / recording.split("/")[0] / "workload.csv", to / "workload.csv")
    return folder


def test_bad_recordings_are_one_error_line_naming_file_line_and_field(tmp_path, capsys):
    folder = _copy("s82/run1", tmp_path)
    log = folder / "slurmctld.log"
    text = log.read_text()
    # a job the log allocates in a partition slurm.conf does not define
    log.write_text(text.replace("NodeList=n03 #CPUs=2 Partition=high", "NodeList=n03 #CPUs=2 Partition=nowhere", 1))
    assert slurm_node_choice.main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{log}: JobId=1: partition 'nowhere' is not in slurm.conf")
    # a stamp that is no time
    log.write_text(text + "[2026-13-01T00:00:05.100] sched: Allocate JobId=2\n")
    assert slurm_node_choice.main([str(folder)]) == 2
    err = capsys.readouterr().err
    line = text.count("\n") + 1
    assert err == f"{log}: line {line}: time stamp '2026-13-01T00:00:05.100' is no time (month must be in 1..12)\n"
    # a node list that is no host list
    log.write_text(text.replace("NodeList=n03 #CPUs=2", "NodeList=n[03 #CPUs=2", 1))
    assert slurm_node_choice.main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{log}: JobId=1: node list 'n[03': ")
    log.write_text(text)
    # a workload field that is no number
    workload = tmp_path / "workload.csv"
    rows = workload.read_text().splitlines()
    rows[3] = rows[3].replace(",0,0", ",x,0", 1) if ",0,0" in rows[3] else rows[3] + "x"
    workload.write_text("\n".join(rows) + "\n")
    assert slurm_node_choice.main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{workload}: line 4: tasks, nodes or memory_mb: ")
    workload.unlink()
    assert slurm_node_choice.main([str(folder)]) == 2
    assert capsys.readouterr().err == f"{folder}: no workload.csv beside or above it\n"
    # a log that is not there, or a gzip cut short
    (folder / "slurmctld.log").unlink()
    shutil.copy(W / "s82" / "workload.csv", workload)
    assert slurm_node_choice.main([str(folder)]) == 2
    assert capsys.readouterr().err.startswith(f"{log}: cannot read: ")
    (folder / "slurmctld.log.gz").write_bytes(b"\x1f\x8b\x08\x00")
    assert slurm_node_choice.main([str(folder)]) == 2
    assert capsys.readouterr().err.startswith(f"{folder / 'slurmctld.log.gz'}: cannot read: ")


@pytest.mark.parametrize("content", [b"", b"\n\n", b"garbage \xff\x00 no stamps\n" * 50,
                                     # stamped lines, but no allocation of a job of this recording
                                     b"[2026-01-01T00:00:05.100] sched: Allocate JobId=999 NodeList=n01 #CPUs=1 "
                                     b"Partition=high\n[2026-01-01T00:00:06.000] _job_complete: JobId=999 done\n"])
def test_a_log_with_no_allocation_of_the_recording_is_one_error_line_not_0_of_0(tmp_path, capsys, content):
    folder = _copy("s82/run1", tmp_path)
    log = folder / "slurmctld.log"
    log.write_bytes(content)
    assert slurm_node_choice.main([str(folder)]) == 2
    captured = capsys.readouterr()
    stamped = content.count(b"[2026")
    assert captured.err == (f"{log}: no allocation of a job of {folder / 'trace.txt'} and its workload.csv (none of "
                            f"{stamped} time-stamped lines is a 'sched: Allocate' or backfill start of such a job): "
                            "not this recording's slurmctld log\n")
    assert "of 0" not in captured.out
