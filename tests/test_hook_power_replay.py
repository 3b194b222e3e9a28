"""The hook's power saving replayed (``power_save = true`` in hook.toml under ``--queue slurm --hook``):
the service's own PowerManager.decide at each sync on the replay's cluster, its actions taken as
Slurm 22.05 takes them (greenslurm.slurm_plugin.power_replay).

Nodes of 4 CPUs, 100 W idle, 350 W busy (the replay's defaults, and the hook's node model); the
hook syncs every second."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.node_states import ON
from greenslurm.slurm_plugin.admission import HookAdmission
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.power_replay import hook_power_machine_factory


def hook(**settings_) -> HookConfig:
    values = dict(power_save=True, sync_interval_s=1.0, suspend_after_s=2.0, suspend_timeout_s=2.0, min_nodes_on=1,
                  off_w=10.0, boot_s=5.0, phases=1, set_required_nodes=False, power_off_command="true",
                  power_on_command="true")
    values.update(settings_)
    return HookConfig(**values)


def replay(config: HookConfig, jobs, nodes: int) -> Replay:
    cluster = Cluster.homogeneous(nodes, cpus=4)
    run = Replay(jobs, cluster, "slurm", machine_factory=hook_power_machine_factory(config),
                 admission=HookAdmission(config, cluster, jobs))
    run.run()
    return run


def test_an_idle_node_is_powered_down_at_the_next_sync_after_suspend_after_s():
    # two nodes; a 1-CPU job runs 0-1 s on n0; n1 idle from 0, n0 from 1.  The hook's syncs at 0, 1,
    # 2, ...: at 2 n1 has been idle 2 s (= suspend_after_s) and is asked to power down; n0 only 1 s
    # and min_nodes_on = 1 keeps it.  Slurm's power-save thread suspends n1 at its next tick (3 s);
    # it is POWERED_DOWN after SuspendTimeout (2 s) at the first periodic scan whose clock reads past
    # 3 + 2 (power_save_interval 10 s: 13 s), and the next sync (13 s) drains it.  A second job at 30 s
    # keeps the replay going past that.
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=1.0, cpus=1), JobSpec("b", 30.0, 60.0, runtime_s=1.0, cpus=1)]
    run = replay(hook(), jobs, 2)
    machine = run.machine
    assert machine.actions == [(2.0, "power_down", "n1"), (13.0, "drain", "n1")]
    assert machine.events == [(3.0, "suspend", 1)]
    assert [(r.job_id, r.start_s, r.node_indices) for r in run.records] == [("a", 0.0, (0,)), ("b", 30.0, (0,))]
    totals = machine.power_totals()
    # n1 off from 3 s to the end (31 s): 28 s at 10 W
    assert (totals.suspends, totals.boots, totals.off_node_s, totals.off_j) == (1, 0, 28.0, 280.0)


def test_a_waiting_job_wakes_one_node_and_starts_when_it_is_up():
    # two nodes; n1 is parked by 13 s (as above).  At 40 s two 4-CPU jobs of 10 s: c runs on n0, d
    # waits.  The sync at 40 s (before Slurm's pass: c and d both wait, 8 CPUs wanted, 4 free on n0)
    # wakes n1 (RESUME + POWER_UP); the thread resumes it at its next tick (41 s); while it boots
    # (until 46 s) Slurm's next pass gives it to d (a powering-up node is allocatable: d is
    # CONFIGURING), and slurmctld's check of configuring jobs, every 30 s from its start (0 s), sees
    # the node up at 60 s: d's start is reset to 60 s (job_config_fini).
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=1.0, cpus=1), JobSpec("c", 40.0, 60.0, runtime_s=10.0, cpus=4),
            JobSpec("d", 40.0, 60.0, runtime_s=10.0, cpus=4)]
    run = replay(hook(), jobs, 2)
    machine = run.machine
    assert machine.actions[:3] == [(2.0, "power_down", "n1"), (13.0, "drain", "n1"), (40.0, "power_up", "n1")]
    assert machine.events[:2] == [(3.0, "suspend", 1), (41.0, "resume", 1)]
    starts = {r.job_id: (r.start_s, r.node_indices) for r in run.records}
    assert starts["c"] == (40.0, (0,)) and starts["d"] == (60.0, (1,))
    assert machine.boots == 1


def test_the_budget_holds_a_wake_back():
    # three nodes, budget 720 W: the service counts a node at its most (350 W) unless it parked it
    # (10 W).  Parked n1 and n2: 350 + 10 + 10 = 370 W.  Three 4-CPU jobs at 40 s: under a budget only
    # the first waiting job's CPUs are wanted.  Waking n1 (lowest-numbered, one phase) adds 340 W:
    # 710 W <= 720.  Waking n2 too would make 1,050 W > 720: held back for as long as n1 is on.  So
    # the jobs run on n0 and n1 only: two at 40-ish, the third after one ends; n2 never boots.
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=1.0, cpus=1)] + [
        JobSpec(f"j{i}", 40.0, 60.0, runtime_s=10.0, cpus=4) for i in range(3)]
    run = replay(hook(power_budget_w=720.0), jobs, 3)
    machine = run.machine
    woken = [node for _, kind, node in machine.actions if kind == "power_up"]
    assert woken and set(woken) == {"n1"}
    assert all(node != 2 for _, kind, node in machine.events if kind == "resume")
    assert {r.node_indices for r in run.records if r.job_id.startswith("j")} == {(0,), (1,)}
    assert max(value for _, value in machine.worst_case if _ >= 13.0) <= 720.0
    assert machine.power_totals().budget_w == 720.0


def test_the_live_hook_power_workload_replays_to_the_live_tests_outcome():
    # The workload of tests/test_hook_power_live.py on real daemons (four nodes n1-n4 there, n0-n3
    # here; budget 3 x 350 + 10 = 1,060 W; two phases; suspend after 2 s, boot 5 s; four jobs of a
    # whole node).  There, three nodes are parked before the jobs come, the second and third nodes
    # are woken (the second: phase 1 has no powered node; the third: then the lowest-numbered), the
    # fourth never, and the jobs run on the first node twice and once each on the woken ones.
    jobs = [JobSpec("warm-up", 0.0, 60.0, runtime_s=1.0, cpus=1)] + [
        JobSpec(f"j{i}", 60.0, 120.0, runtime_s=12.0, cpus=4) for i in range(4)]
    run = replay(hook(power_budget_w=1060.0, phases=2), jobs, 4)
    machine = run.machine
    parked_first = [node for t, kind, node in machine.actions if kind == "drain" and t < 60.0]
    assert sorted(parked_first) == ["n1", "n2", "n3"]
    woken = [node for _, kind, node in machine.actions if kind == "power_up"]
    assert woken == ["n1", "n2"]
    assert sorted(r.node_indices[0] for r in run.records if r.job_id != "warm-up") == [0, 0, 1, 2]
    # every job on a woken node started once its node was up: resumed + 5 s boot
    resumed = {node: t for t, kind, node in machine.events if kind == "resume"}
    for r in run.records:
        node = r.node_indices[0]
        if node in resumed:
            assert r.start_s >= resumed[node] + 5.0
    assert max(value for t, value in machine.worst_case if t >= 13.0) <= 1060.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 60), st.integers(1, 4)), min_size=1, max_size=12),
       st.integers(2, 4), st.sampled_from([0.0, 720.0, 1060.0]), st.integers(0, 2))
def test_budget_never_exceeded_and_no_job_on_an_off_node(raw, nodes, budget, min_on):
    jobs = [JobSpec(f"j{i}", float(submit), 3600.0, runtime_s=float(run_s), cpus=cpus)
            for i, (submit, run_s, cpus) in enumerate(raw)]
    config = hook(power_budget_w=budget, min_nodes_on=min_on, phases=2)
    cluster = Cluster.homogeneous(nodes, cpus=4)
    run = Replay(jobs, cluster, "slurm", machine_factory=hook_power_machine_factory(config),
                 admission=HookAdmission(config, cluster, jobs))
    machine = run.machine
    run.begin()
    fitted_at = None
    while run.events:
        run.step()
        # no job runs on a node that is off or booting (jobs waiting for their nodes are CONFIGURING)
        for job in machine.running.values():
            if job.index not in machine.configuring:
                assert (machine.state[job.node_indices] == ON).all()
        if budget and machine.worst_case and machine.worst_case[-1][1] <= budget and fitted_at is None:
            fitted_at = run.now_s
        if budget and fitted_at is not None:
            # once the most the nodes can draw fits the budget, it holds at every instant: the
            # service wakes a node only within it, and the cluster draws at most that
            assert machine.worst_case[-1][1] <= budget + 1e-6
            assert machine.ledger.power_w <= budget + 1e-6
    assert len(run.records) + run.strategy.waiting() == len(jobs)
    assert np.isfinite(machine.power_totals().off_j)


WHATIF_JOBS = ("JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|Timelimit|NodeList\n"
               "1|alice|batch|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:05:00|00:05:00|COMPLETED|1|4|"
               "00:10:00|n1\n"
               "2|bob|batch|2024-01-01T00:40:00|2024-01-01T00:40:00|2024-01-01T00:50:00|00:10:00|COMPLETED|2|8|"
               "00:10:00|n[1-2]\n")


def test_whatif_reports_boots_and_energy_of_a_hook_candidate_with_power_saving(tmp_path):
    import json

    from greenslurm.cli import main
    from test_whatif_baseline import SLURM_CONF      # two nodes n1, n2 of 4 CPUs, partition batch
    (tmp_path / "jobs.txt").write_text(WHATIF_JOBS)
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "hook.toml").write_text('[hook]\npower_save = true\nsuspend_after_s = 60.0\nboot_s = 30.0\n'
                                        'power_off_command = "true {node}"\npower_on_command = "true {node}"\n')
    out = tmp_path / "w.json"
    assert main(["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), "--no-progress",
                 "--candidate", f"hook=slurm:hook={tmp_path / 'hook.toml'}", "--json", str(out)]) == 0
    policies = json.loads(out.read_text())["policies"]
    hook, slurm = policies["hook"], policies["slurm"]
    # syncs every 10 s: at 60 s n2 has been idle 60 s and is asked to power down (n1 runs alice's job:
    # two powered nodes > min_nodes_on 1); suspended at the thread's next tick, 61 s.  n1 idles from
    # 300 s but is the one node min_nodes_on keeps.  bob's job (both nodes) comes at 2,400 s: that
    # sync wakes n2, resumed at 2,401 s, up 30 s later (2,431 s); Slurm gave it to bob while it booted
    # (CONFIGURING) and its 30-second check from 0 s sees it up at 2,460 s: bob waits 60 s, mean 30 s.
    assert (hook["boots"], hook["suspends"], hook["mean_wait_s"], hook["makespan_s"]) == (1, 1, 30.0, 3060.0)
    # n2 off 61 -> 2,401 s (2,340 s at 10 W) and booting 30 s at its idle 100 W: saved against idling
    # 100 W x 2,370 s - 23,400 J - 3,000 J = 210,600 J = 0.0585 kWh
    assert abs(hook["saved_vs_idle_kwh"] - 0.0585) < 1e-9
    assert abs(hook["off_node_h"] - 2340.0 / 3600.0) < 1e-9
    assert hook["energy_kwh"] < slurm["energy_kwh"] and slurm.get("boots") is None


def test_a_job_moved_a_day_later_keeps_no_node_on_until_its_begin_less_a_boot(tmp_path):
    """Two nodes, both may power down (min_nodes_on = 0), pinning on, a forecast with no renewable
    power until 86,400 s.  a (1 CPU) runs on n0 from 0 to 30 s; n1 is idle and powered down at 2 s.
    x (3 CPUs, 60 s, due within 2 days) comes at 1 s: the hook moves it to the green day, begin
    time 86,400 s, pinned to n0 (best fit: beside a).  Once a ends n0 is idle for 2 s and powered
    down (it used to stay on the whole day for x), and the service wakes it at 86,400 - 5 s of boot;
    x runs on n0."""
    supply = tmp_path / "supply.csv"
    supply.write_text("time_s,watts\n0,0\n86400,5000\n")
    config = hook(min_nodes_on=0, set_required_nodes=True, renewable="green", supply_file=str(supply))
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=30.0, cpus=1),
            JobSpec("x", 1.0, 60.0, runtime_s=60.0, cpus=3, deadline_s=2 * 86400.0)]
    run = replay(config, jobs, 2)
    answer = run.admission.answers["x"]
    assert float(answer["begin_time"]) == 86400.0
    pinned = answer["req_nodes"]
    assert pinned == "n0"
    actions = run.machine.actions
    downs = [t for t, kind, node in actions if kind == "power_down" and node == pinned]
    ups = [t for t, kind, node in actions if kind == "power_up" and node == pinned]
    assert downs and downs[0] < 100.0, actions            # powered down within the first minutes
    assert ups == [86395.0], actions                      # woken a boot (5 s) before its begin time
    assert {r.job_id: r.node_indices for r in run.records}["x"] == (int(pinned[1:]),)
