"""The service's count of job_submit.lua's failures, on a real record (SQLite in a temporary folder):
each failure counted once, whether a load reports it, a later load reads it back from the kept file
and reports it, or only a line the load never renamed holds it (slurmctld killed -9 between writing
and renaming: :class:`~greenslurm.slurm_plugin.failures_file.Leftover`).

The loads below follow job_submit.lua's own arithmetic (keep_failures, its load, its report): the
lines they keep are those its test on real daemons reads (tests/test_hook_failures_live.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

import json

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.decisions import DecisionService
from greenslurm.slurm_plugin.failures_file import Kept, parse
from greenslurm.slurm_plugin.record import DecisionRecord


@dataclass
class Load:
    """One load of job_submit.lua: its running total, its unreported count and what its file holds."""

    instance: str
    total: int = 0
    failed_open: int = 0
    kept_on_disk: int = 0
    inherited: tuple = ()          # what its first totals are: failures of earlier loads (Kept.inherited)

    def line(self) -> Kept:
        return Kept(self.failed_open, f"{self.instance}:1", self.total, self.kept_on_disk, self.inherited)


def test_a_leftover_counts_only_what_the_next_load_does_not_read_back(tmp_path):
    record = DecisionRecord(tmp_path / "r.sqlite")
    # load a: 2 failures kept ("2 a:1-2 2 1" renamed over the file), a third written as
    # "3 a:1-3 3 2" and never renamed: a's totals 3..3, i.e. 1 failure, are the leftover's own
    leftover = parse("3 a:1-3 3 2\n")
    assert leftover.own_totals == (2, 3)
    # load b reads "2 a:1-2 2 1" back: its running total starts at 2, and its first answered
    # request reports total 2: 2 new
    assert record.note_failures("b", 2) == 2
    assert record.fold("unreported." + "0" * 32, leftover) == 1        # 3 - 2
    assert record.fold("unreported." + "0" * 32, leftover) is None     # never twice
    assert record.events("fail_open") == 1                              # the leftover's, in its transaction
    assert record.note_failures("b", 2) == 0


def test_a_leftover_of_a_load_that_lives_on_is_not_counted_again_by_its_report(tmp_path):
    # a rename that failed and whose clean-up failed too (a file system remounted read-only in
    # between) leaves a line while the load keeps its count: "4 a:1-4 4 1" (totals 2..4 its own)
    record = DecisionRecord(tmp_path / "r.sqlite")
    assert record.fold("unreported." + "1" * 32, parse("4 a:1-4 4 1\n")) == 3
    assert record.note_failures("a", 5) == 2          # totals 1 and 5: 2..4 counted with the leftover
    assert record.note_failures("a", 5) == 0


def _report(service: DecisionService, instance: str, count: int, total: int, ids: str, **earlier) -> None:
    """The request line job_submit.lua sends with its unreported failures (describe())."""
    service.handle(json.dumps({"op": "ping", "id": 9, "hook_instance": instance, "failed_open": count,
                               "failed_total": total, "failed_ids": ids, **earlier}).encode())


def test_a_report_recorded_but_answered_late_is_not_counted_again_by_the_next_load(tmp_path):
    # load a keeps "3 a:1-3 3 2" (its failures 1..3); its request 4 reports total 3, the service
    # records and counts the 3, but the answer comes after timeout_ms: the hook counts request 4 as
    # failure 4 and keeps "4 a:1-4 4 3".  Load b (slurmctld restarted) reads it back: its totals
    # 1..4 are a's 1..4, of which the service holds 3.  Before, b reported them as its own totals
    # 1..4: 3 + 4 = 7 counted for 4 failures
    config = HookConfig(database=str(tmp_path / "r.sqlite"), socket=str(tmp_path / "s.sock"))
    service = DecisionService(config, DecisionRecord(config.database))
    _report(service, "a", 3, 3, "1-3")
    assert service.fail_opens == 3
    line = parse("4 a:1-4 4 3\n")
    assert line.inherited() == (("a", 4, 4),)                  # b's totals 1..4: a's totals (4 - 4, 4]
    _report(service, "b", 4, 4, "", failed_earlier="a:1-4", failed_segments="a:4:4")
    assert service.fail_opens == 4                             # 3 + (4 - 3)
    _report(service, "b", 4, 4, "", failed_earlier="a:1-4", failed_segments="a:4:4")     # a repeat: nothing
    assert service.fail_opens == 4
    assert service.record.events("fail_open") == 4


def test_a_leftover_of_an_earlier_script_is_not_folded(tmp_path):
    record = DecisionRecord(tmp_path / "r.sqlite")
    assert record.fold("unreported." + "2" * 32, parse("3 a:1-3\n")) is None
    assert record.folded() == set()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["fail", "fail", "fail killed", "fail unrenamed", "fail stopped", "report",
                                 "report late", "report killed", "report unremoved", "restart", "fold"]),
                max_size=40),
       st.randoms(use_true_random=False))
def test_every_failure_is_counted_once_however_loads_die_report_and_leftovers_are_folded(tmp_path_factory, steps,
                                                                                         rng):
    record = DecisionRecord(tmp_path_factory.mktemp("count") / "r.sqlite")
    loads = [Load("l0")]
    disk: Kept | None = None                   # the file "unreported"
    left: list[tuple[str, Kept]] = []          # the lines never renamed
    failures = counted = 0

    def load_again() -> None:                  # a new load reads the file back
        new = Load(f"l{len(loads)}")
        if disk is not None:
            new.total = new.failed_open = new.kept_on_disk = disk.count
            new.inherited = disk.inherited()
        loads.append(new)

    def report() -> int:
        nonlocal disk
        load = loads[-1]
        found = record.note_failures(load.instance, load.total, inherited=load.inherited) if load.failed_open else 0
        load.failed_open, load.kept_on_disk, load.inherited, disk = 0, 0, (), None
        return found

    for step in steps:
        load = loads[-1]
        if step.startswith("fail"):
            failures += 1
            load.total += 1
            load.failed_open += 1
            if step == "fail killed":          # written, never renamed: slurmctld dies
                left.append((f"unreported.{len(left):032x}", load.line()))
                load_again()
            elif step == "fail unrenamed":     # the rename and its clean-up failed (read-only remount): the
                left.append((f"unreported.{len(left):032x}", load.line()))   # load goes on, the file unchanged
            elif step == "fail stopped":       # slurmctld stopped between write and rename, the line folded
                left.append((f"unreported.{len(left):032x}", load.line()))   # meanwhile, then renamed
                counted += record.fold(*left[-1]) or 0
                disk = load.line()
                load.kept_on_disk = load.failed_open
            else:
                disk = load.line()
                load.kept_on_disk = load.failed_open
        elif step == "report":
            counted += report()
        elif step == "report late":            # recorded and counted, answered after timeout_ms: a failure
            if load.failed_open:
                counted += record.note_failures(load.instance, load.total, inherited=load.inherited)
            failures += 1
            load.total += 1
            load.failed_open += 1
            disk = load.line()
            load.kept_on_disk = load.failed_open
        elif step == "report killed":          # answered, slurmctld killed before it removed the file
            if load.failed_open:
                counted += record.note_failures(load.instance, load.total, inherited=load.inherited)
            load_again()
        elif step == "report unremoved":       # answered, but the file could not be removed: it stays, its
            if load.failed_open:               # failures reported; the load keeps none of them (its line says
                counted += record.note_failures(load.instance, load.total, inherited=load.inherited)   # whose)
            load.failed_open, load.kept_on_disk, load.inherited = 0, 0, ()    # (it kept them: 1 of 2 counted
                                                                                # after 'fail', this, 'fail killed')
        elif step == "restart":
            load_again()
        elif left:                              # fold a leftover, any of them, again or not
            name, kept = rng.choice(left)
            counted += record.fold(name, kept) or 0
    counted += report()
    for name, kept in left:
        counted += record.fold(name, kept) or 0
    assert counted == failures
