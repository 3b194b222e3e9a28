"""The hook's power-saving decisions without daemons: exact cases of the replay's policy as the
service applies it (suspend order over phases, the queue's need, pinned jobs, jobs moved into
greener hours, the budget), the SuspendProgram/ResumeProgram command, and bad settings.  On real
daemons: tests/test_hook_power_live.py."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

from greenslurm.allocation import power_policy
from greenslurm.clustermodel import JobSpec
from greenslurm.slurm_plugin import power as power_module
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.power import DRAIN_REASON, PowerManager
from greenslurm.slurm_plugin.live_nodes import NodePower
from greenslurm.slurm_plugin.snapshot import LiveNode, NodeUse, PendingJob, RunningJob, Snapshot
from hook_service import write_config

PARKED = "idle+drain+powered_down"


@pytest.mark.parametrize("module", [power_policy, power_module])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def manager(**settings) -> PowerManager:
    config = HookConfig(power_save=True, power_off_command="off {node}", power_on_command="on {node}",
                        suspend_after_s=60.0, phases=2, **settings)
    config.check()
    return PowerManager(config, NodePower())


def nodes(*states: str) -> list[LiveNode]:
    return [LiveNode(f"n{i + 1}", 4, 4000, state=s, reason=DRAIN_REASON if "drain" in s else "")
            for i, s in enumerate(states)]


def pending(job_id: str, cpus: int, submit_s: float = 0.0, begin_s: float | None = None,
            required=()) -> PendingJob:
    return PendingJob(job_id, JobSpec(job_id, submit_s, 600.0, cpus=cpus, nodes=1), begin_s,
                      required_nodes=tuple(required))


def actions(m: PowerManager, snapshot: Snapshot, now_s: float) -> list[tuple[str, str]]:
    return [(a.action, a.node) for a in m.decide(snapshot, now_s)]


def test_idle_nodes_power_down_after_the_suspend_time_phase_by_phase():
    m = manager(min_nodes_on=1)
    snap = Snapshot(0.0, nodes("idle", "idle", "idle", "idle"))
    assert actions(m, snap, 0.0) == []                     # idle from now on
    assert actions(m, snap, 59.0) == []
    # phases 0, 1, 0, 1: both phases have 2 powered nodes: the highest-numbered (n4, phase 1), then
    # phase 0 has more (n3), then the tie again (n2); n1 stays on (min_nodes_on)
    assert actions(m, snap, 60.0) == [("power_down", "n4"), ("power_down", "n3"), ("power_down", "n2")]


def test_a_node_the_queue_needs_or_a_pinned_job_waits_for_stays_on():
    m = manager(min_nodes_on=0)
    busy = RunningJob("7", ("n1",), 1e9, (NodeUse("n1", 4.0),))
    snap = Snapshot(0.0, nodes("mixed", "idle", "idle"), running=[busy],
                    pending=[pending("8", 4), pending("9", 2, required=("n3",))])
    m.decide(snap, 0.0)
    # 6 CPUs wanted; n2 and n3 bring 8 free: n2 (or n3) alone would leave 4 < 6; n3 is pinned anyway
    assert actions(m, snap, 100.0) == []
    snap.pending.pop()                                      # only 4 CPUs wanted now: one of them may go
    assert actions(m, snap, 100.0) == [("power_down", "n3")]


def test_a_node_a_pinned_job_waits_for_stays_on_only_from_its_begin_time_less_a_boot():
    """n1 busy, n2 idle since 0 s (suspend after 60 s, boot 300 s); job 9 is pinned to n2 (-w, or
    by the hook) with a begin time.  At 100 s n2 has been idle 100 s >= 60 s: it stays on for job 9
    only if 9 begins within a boot, by 100 + 300 = 400 s; beginning at 401 s or a day off, n2 goes
    down now and is woken at begin - boot (the case above)."""
    busy = RunningJob("7", ("n1",), 1e9, (NodeUse("n1", 4.0),))
    for begin_s, kept in [(None, True), (50.0, True), (400.0, True), (401.0, False), (86400.0, False)]:
        m = manager(min_nodes_on=0)
        snap = Snapshot(0.0, nodes("mixed", "idle"), running=[busy],
                        pending=[pending("9", 2, begin_s=begin_s, required=("n2",))])
        m.decide(snap, 0.0)
        assert actions(m, snap, 100.0) == ([] if kept else [("power_down", "n2")]), begin_s
    # powered down and parked, the job a day off wakes nothing until its begin less a boot: 86,100 s
    m = manager(min_nodes_on=0)
    parked = Snapshot(0.0, nodes("mixed", PARKED), running=[busy],
                      pending=[pending("9", 2, begin_s=86400.0, required=("n2",))])
    assert actions(m, parked, 86099.0) == []
    assert actions(m, parked, 86100.0) == [("power_up", "n2")]


def test_an_idle_node_the_first_job_needs_for_its_shape_stays_on():
    """n1 and n2 each run a 3-CPU job (1 of 4 CPUs free); n3 is idle.  Job 8 wants 2 CPUs on one node.
    In CPUs in all the others bring 1 + 1 = 2, "enough", but no other node can hold 2 CPUs: n3 stays
    on (it used to be powered down, then woken at the next round for the same job)."""
    m = manager(min_nodes_on=0)
    running = [RunningJob(str(i), (f"n{i}",), 1e9, (NodeUse(f"n{i}", 3.0),)) for i in (1, 2)]
    snap = Snapshot(0.0, nodes("mixed", "mixed", "idle"), running=running, pending=[pending("8", 2)])
    m.decide(snap, 0.0)
    assert actions(m, snap, 100.0) == []
    # with job 8 gone n3 is idle for 100 s >= 60 s and nothing needs it
    snap.pending.pop()
    assert actions(m, snap, 100.0) == [("power_down", "n3")]


def test_powered_down_nodes_are_drained_and_woken_for_the_queue_within_the_budget():
    # n1 busy (at most 350 W), n2 and n3 parked (10 W each), n4 powered down but not drained yet, so
    # Slurm could still wake it: counted at its most (350 W): 720 W.  The budget allows one more node
    # at its most (720 + 340 = 1,060 <= 1,100), not two (1,400)
    m = manager(power_budget_w=1100.0)
    busy = RunningJob("7", ("n1",), 1e9, (NodeUse("n1", 4.0),))
    snap = Snapshot(0.0, nodes("mixed", PARKED, PARKED, "idle+powered_down"), running=[busy],
                    pending=[pending("8", 4, 1.0), pending("9", 4, 2.0)])
    got = actions(m, snap, 0.0)
    # n4 is drained now; n2 is woken: on phase 1, where nothing is powered (n1 is on phase 0)
    assert got == [("drain", "n4"), ("power_up", "n2")]
    # without a budget every waiting job counts (8 CPUs): n2 and n3
    free = manager()
    assert actions(free, snap, 0.0) == [("drain", "n4"), ("power_up", "n2"), ("power_up", "n3")]


def test_a_job_pinned_to_a_parked_node_wakes_that_node_and_a_job_moved_later_wakes_none():
    m = manager()
    snap = Snapshot(0.0, nodes("idle", PARKED, PARKED), pending=[pending("8", 4, required=("n3",))])
    assert actions(m, snap, 0.0) == [("power_up", "n3")]
    later = Snapshot(0.0, nodes("mixed", PARKED, PARKED),
                     running=[RunningJob("7", ("n1",), 1e9, (NodeUse("n1", 4.0),))],
                     pending=[pending("8", 4, begin_s=3600.0)])      # placed into greener hours
    assert actions(m, later, 0.0) == []
    # pinned to parked n2 and due within a boot (300 s): n2 is woken now, to be up at its begin time
    due = Snapshot(0.0, nodes("mixed", PARKED, PARKED),
                   running=[RunningJob("7", ("n1",), 1e9, (NodeUse("n1", 4.0),))],
                   pending=[pending("8", 4, begin_s=3600.0), pending("9", 4, begin_s=250.0, required=("n2",))])
    assert actions(m, due, 0.0) == [("power_up", "n2")]


def test_the_power_command_runs_per_node_and_refuses_odd_names(tmp_path):
    log = tmp_path / "log"
    config = write_config(tmp_path / "hook.toml", power_save=True, power_off_command=f"sh -c 'echo off $0 >> {log}' {{node}}",
                          power_on_command="false {node}")
    ok = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "power", "--config", str(config), "off",
                         "n[1-2]"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert log.read_text().split("\n")[:2] == ["off n1", "off n2"]
    bad = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "power", "--config", str(config), "on",
                          "n1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "greenslurm hook power on: n1: false exited with 1" in bad.stderr


@pytest.mark.parametrize("settings, field", [
    ({"power_save": True}, "power_off_command"),
    ({"phases": 13}, "phases"),
    ({"suspend_after_s": -1}, "suspend_after_s"),
    ({"power_budget_w": -5.0}, "power_budget_w"),
    ({"wake_order": "random"}, "wake_order"),
    ({"off_w": 2e6}, "off_w"),
    ({"power_command_timeout_s": 0}, "power_command_timeout_s"),
    ({"power_on_command": "unbalanced 'quote"}, "power_on_command"),
])
def test_bad_power_settings_are_one_line_naming_the_key(tmp_path, settings, field):
    path = write_config(tmp_path / "hook.toml", **settings)
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(path),
                             "--print", "job_submit"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"field {field}:" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
