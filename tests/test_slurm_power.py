"""Slurm 22.05's power saving in the slurm queue (``greenslurm.sim.engine.slurm_power``): exact small
cases whose arithmetic follows ``src/slurmctld/power_save.c`` (in the comments), invariants over
random workloads, and the command line."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.cli import main
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.machines.power_settings import boots_per_node_day
from greenslurm.sim.engine.slurm_power import slurm_power_machine_factory
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving
from greenslurm.sim.machines.node_states import OFF
from greenslurm.traces.slurm_conf import parse_slurm_conf_text

# a main pass at every submission (batch_sched_delay 0): the cases below are about power saving
BUILTIN = SlurmScheduling(scheduler="builtin", batch_sched_delay_s=0.0)


def run(jobs, cluster, saving, scheduling=BUILTIN):
    replay = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": scheduling},
                    machine_factory=slurm_power_machine_factory(saving))
    result = replay.run()
    return {r.job_id: r for r in result.records}, replay.machine, result


def test_suspend_rate_limits_and_decays_as_slurm_counts():
    # four idle nodes, SuspendTime 5 s, SuspendRate 2 per minute; a scan one tick (1 s) after a node
    # changed (the allocation at 0, the end at 1.5 s), else every 10 s after the last scan.  A scan
    # suspends while round(count) < 2; count decays by (60 - dt) / 60 between scans.
    #   t=1, t=2: idle since 0 (1.5 for n0), not more than 5 s: nothing
    #   t=12: count 0 -> n0, n1 suspended (count 2)
    #   t=22: 2 x 50/60 = 1.667, rounds to 2: none
    #   t=32: 1.389 -> 1: n2 (count 2.389)
    #   t=42: 1.991 -> 2: none;  t=52: 1.659 -> 2: none;  t=62: 1.383 -> 1: n3
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=1.5, cpus=1), JobSpec("late", 70.0, 60.0, runtime_s=1.0, cpus=1)]
    saving = SlurmPowerSaving(suspend_time_s=5.0, suspend_rate=2, boot_s=5.0, ready_check_s=1.0)
    _, machine, _ = run(jobs, Cluster.homogeneous(4, cpus=1), saving)
    assert [e for e in machine.events if e[0] < 70] == [
        (12.0, "suspend", 0), (12.0, "suspend", 1), (32.0, "suspend", 2), (62.0, "suspend", 3)]


def test_a_job_on_powered_down_nodes_is_configuring_until_they_boot_and_its_start_is_reset():
    # n0, n1 start powered down.  "wide" (8 CPUs) is allocated both at 0; the scan at 1 s resumes
    # them; they boot for 20 s (up at 21 s); slurmctld's check every 30 s (from -5 s: 25 s) starts it
    # then: start 25, end 25 + 10.  Its energy is its run's only: 8 CPUs x 10 s x 350/4 W each.
    jobs = [JobSpec("wide", 0.0, 100.0, runtime_s=10.0, cpus=8, nodes=2)]
    saving = SlurmPowerSaving(suspend_time_s=1000.0, boot_s=20.0, start_powered_down=True, slurmctld_start_s=-5.0)
    cluster = Cluster.homogeneous(2, cpus=4, idle_w=100.0, busy_w=350.0)
    records, machine, result = run(jobs, cluster, saving)
    assert (records["wide"].start_s, records["wide"].end_s) == (25.0, 35.0)
    assert machine.events == [(1.0, "resume", 0), (1.0, "resume", 1)]
    assert records["wide"].energy_j == pytest.approx(8 * 10.0 * 350.0 / 4)
    totals = machine.power_totals()
    # off from 0 to 1 s (10 W each), booting 1-21 s at idle power, then idle until the start at 25 s
    assert totals.off_node_s == pytest.approx(2 * 1.0)
    assert totals.boot_node_s == pytest.approx(2 * 20.0)
    assert totals.off_j == pytest.approx(2 * 1.0 * 10.0)
    energy = result.energy
    assert energy.total_j == pytest.approx(energy.jobs_j + energy.unallocated_j)
    assert energy.total_j == pytest.approx(2 * 10.0 + 2 * 20 * 100.0 + 2 * 4 * 100.0 + 8 * 10 * 350 / 4)


def test_powered_up_nodes_are_chosen_first_and_a_job_spreads_onto_powered_down_ones():
    # as real Slurm did in bench/slurm_power_reference.py's recording (p01, p02): n0 is excluded from
    # power saving and on, n1-n3 powered down.  "a" (3 CPUs) fits n0; "b" (4 CPUs, no node count)
    # takes n0's last CPU and 3 on the first powered-down node, not a whole powered-down node.
    cluster = Cluster([NodeSpec(f"n{i}", 4) for i in range(4)])
    jobs = [JobSpec("a", 0.0, 100.0, runtime_s=50.0, cpus=3), JobSpec("b", 1.0, 100.0, runtime_s=10.0, cpus=4)]
    saving = SlurmPowerSaving(suspend_time_s=15.0, boot_s=5.0, exc_nodes=("n0",), start_powered_down=True)
    records, machine, _ = run(jobs, cluster, saving)
    assert records["a"].node_indices == (0,)
    assert records["b"].node_indices == (0, 1)
    assert [e for e in machine.events if e[1] == "resume"] == [(2.0, "resume", 1)]


def test_a_node_being_powered_down_cannot_be_allocated_for_suspend_timeout():
    # one node; "a" runs 0-0.5 s; scans at 1 s (a tick after the allocation and the end), then every
    # 10 s: at 11 s the node, idle since 0.5 s (more than 5 s), is suspended.  "b" comes at 11 s but
    # the node is POWERING_DOWN until a scan sees 11 + 30 < now: not at 41, at 51 s.  Nothing asks
    # for a pass then (Slurm's make_node_avail does not): the main scheduler's periodic pass
    # (sched_interval 60 s) allocates it at 60 s; the scan a tick later (61 s) resumes it, up at
    # 66 s; slurmctld's check of configuring jobs (every 30 s from 0) starts "b" at 90 s.
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=0.5, cpus=1), JobSpec("b", 11.0, 60.0, runtime_s=1.0, cpus=1)]
    saving = SlurmPowerSaving(suspend_time_s=5.0, suspend_timeout_s=30.0, boot_s=5.0)
    records, machine, _ = run(jobs, Cluster.homogeneous(1, cpus=1), saving)
    assert machine.events == [(11.0, "suspend", 0), (61.0, "resume", 0)]
    assert records["b"].start_s == 90.0


def test_partition_suspend_time_infinite_and_excluded_partitions_keep_nodes_on():
    conf = parse_slurm_conf_text("NodeName=n[1-4] CPUs=2\nPartitionName=a Nodes=n[1-2] SuspendTime=INFINITE\n"
                                 "PartitionName=b Nodes=n[2-3]\nPartitionName=c Nodes=n4\n"
                                 "SuspendTime=5\nSuspendExcParts=c\nSuspendRate=0\n")
    saving = SlurmPowerSaving.from_conf(conf, boot_s=1.0)
    from greenslurm.traces.slurm_conf import cluster_from_slurm_conf
    cluster = cluster_from_slurm_conf(conf)
    times, _, _, excluded = saving.node_settings(cluster)
    # n2 is in a (INFINITE) and b (the global 5 s): the largest, INFINITE
    assert times.tolist() == [math.inf, math.inf, 5.0, 5.0] and excluded.tolist() == [False, False, False, True]
    jobs = [JobSpec("x", 0.0, 60.0, runtime_s=1.0, cpus=1, partition="b"),
            JobSpec("y", 50.0, 60.0, runtime_s=1.0, cpus=1, partition="b")]
    _, machine, _ = run(jobs, cluster, saving)
    assert {node for _, kind, node in machine.events if kind == "suspend"} == {2}


def test_the_conf_readers_refuse_what_slurm_refuses():
    with pytest.raises(ValueError, match="suspendrate"):
        SlurmPowerSaving.from_conf(parse_slurm_conf_text("NodeName=n1 CPUs=1\nSuspendRate=-3\n"))
    with pytest.raises(ValueError, match="nodes:count"):
        SlurmPowerSaving.from_conf(parse_slurm_conf_text("NodeName=n[1-2] CPUs=1\nSuspendExcNodes=n[1-2]:1\n"))
    with pytest.raises(Exception, match="SuspendTime"):
        parse_slurm_conf_text("NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 SuspendTime=soon\n")


def test_boots_per_node_day():
    assert boots_per_node_day(0, 4, 100.0) == 0.0
    assert boots_per_node_day(48, 4, 43200.0) == 24.0     # 48 boots / 4 nodes / half a day


@st.composite
def workloads(draw):
    count = draw(st.integers(1, 12))
    jobs, t = [], 0.0
    for i in range(count):
        t += draw(st.sampled_from([0.0, 1.0, 7.0, 30.0, 90.0]))
        cpus = draw(st.integers(1, 8))
        run_s = float(draw(st.integers(1, 60)))
        jobs.append(JobSpec(f"j{i}", t, run_s + draw(st.sampled_from([0.0, 30.0])), runtime_s=run_s, cpus=cpus))
    return jobs


@settings(max_examples=40, deadline=None)
@given(jobs=workloads(), suspend_s=st.sampled_from([0.0, 5.0, 20.0]), boot_s=st.sampled_from([0.0, 3.0, 25.0]),
       rate=st.sampled_from([0, 1, 60]), start_off=st.booleans(), backfill=st.booleans())
def test_invariants_over_random_workloads(jobs, suspend_s, boot_s, rate, start_off, backfill):
    cluster = Cluster.homogeneous(3, cpus=4, idle_w=100.0, busy_w=300.0)
    saving = SlurmPowerSaving(suspend_time_s=suspend_s, boot_s=boot_s, suspend_rate=rate, resume_rate=rate,
                              start_powered_down=start_off, exc_nodes=("n0",) if rate == 1 else ())
    scheduling = SlurmScheduling(scheduler="backfill" if backfill else "builtin", batch_sched_delay_s=0.0 if rate else 3.0)
    records, machine, result = run(jobs, cluster, saving, scheduling)
    assert set(records) == {j.job_id for j in jobs}          # every job runs
    for job in jobs:
        r = records[job.job_id]
        assert r.start_s >= job.submit_s
        assert r.end_s == pytest.approx(r.start_s + job.runtime_s)
    energy = result.energy
    assert energy.total_j == pytest.approx(energy.jobs_j + energy.unallocated_j, rel=1e-9)
    assert energy.per_node_j.sum() == pytest.approx(energy.total_j, rel=1e-9)
    totals = machine.power_totals()
    assert totals.boots == sum(kind == "resume" for _, kind, _ in machine.events)
    assert totals.suspends == sum(kind == "suspend" for _, kind, _ in machine.events)
    # no job ran on a node while it was off or booting: a node's jobs are all after its last boot
    # began + boot_s (its resume), and no node was suspended while one of its jobs ran
    for time_s, kind, node in machine.events:
        for r in records.values():
            if node in r.node_indices and kind == "suspend":
                assert not (r.start_s < time_s < r.end_s)
            if node in r.node_indices and kind == "resume":
                assert not (time_s < r.start_s < time_s + boot_s - 1e-9)
    assert not (machine.state[machine.excluded] == OFF).any()


@settings(max_examples=40, deadline=None)
@given(jobs=workloads(), suspend_s=st.sampled_from([0.0, 5.0, 20.0, 61.5]), timeout_s=st.sampled_from([0.0, 4.0, 30.0]),
       boot_s=st.sampled_from([0.0, 3.0, 25.0]), rate=st.sampled_from([0, 1, 2]), interval_s=st.sampled_from([0.0, 10.0]),
       start_off=st.booleans(), budget=st.booleans())
def test_scans_that_skip_their_node_tests_decide_as_full_scans(jobs, suspend_s, timeout_s, boot_s, rate, interval_s,
                                                               start_off, budget):
    # a scan skips its node tests while the kept due times say no node can be suspended or end its
    # SuspendTimeout, and the scans that could only decay the rate counts are folded; the same replay
    # with every scan made and testing every node (full_scans) is the reference: same starts, nodes,
    # suspends and resumes at the same instants, same power series, same last event (the thread's
    # timer left after the last job: where a replay's GPU series ends)
    cluster = Cluster.homogeneous(3, cpus=4, idle_w=100.0, busy_w=300.0)
    saving = SlurmPowerSaving(suspend_time_s=suspend_s, suspend_timeout_s=timeout_s, boot_s=boot_s,
                              suspend_rate=rate, resume_rate=rate, interval_s=interval_s, start_powered_down=start_off,
                              exc_nodes=("n2",) if rate == 1 else (), budget_w=900.0 if budget else None)
    scheduling = SlurmScheduling(scheduler="backfill", batch_sched_delay_s=0.0)
    outcomes = []
    for full in (False, True):
        replay = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": scheduling},
                        machine_factory=slurm_power_machine_factory(saving))
        replay.machine.full_scans = full
        replay.begin()
        while len(replay.events):
            replay.step()
            replay.machine._check()              # the kept due times equal fresh ones after every step
        result = replay.close()
        outcomes.append(([(r.job_id, r.start_s, r.end_s, tuple(r.node_indices)) for r in result.records],
                         replay.machine.events, replay.machine.off_timeline, result.power_w.tolist(), replay.now_s))
    assert outcomes[0] == outcomes[1]


# -- a peak power budget: greenslurm's (Slurm 22.05's power saving has none) ---------------------------
TWO_SMALL = Cluster.homogeneous(2, cpus=1, idle_w=100.0, busy_w=300.0)


def test_a_budget_holds_an_allocated_job_configuring_until_the_power_leaves_room():
    # two 1-CPU nodes, idle 100 W, busy 300 W (a job adds 200 W), budget 500 W, no power saving.
    #   t=0: a -> n0, b -> n1 (both allocated).  a begins: 100 + 100 + 200 = 400 W <= 500.
    #        b would make 400 + 200 = 600 W > 500: it waits, allocated (CONFIGURING), n1 idle.
    #   t=1: c is submitted; no node is free.
    #   t=10: a ends (200 W).  The main pass allocates c to n0; b, allocated first, begins
    #        (200 + 200 = 400 W) and its start is reset to 10; c would make 600 W: it waits.
    #   t=20: b ends; c begins on n0: 20-25.
    # Power: 400 W throughout (one job and one idle node): 25 s x 400 W = 10,000 J.
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=1), JobSpec("b", 0.0, 10.0, runtime_s=10.0, cpus=1),
            JobSpec("c", 1.0, 10.0, runtime_s=5.0, cpus=1)]
    records, machine, result = run(jobs, TWO_SMALL, SlurmPowerSaving(budget_w=500.0))
    assert [(r.start_s, r.end_s, r.node_indices) for r in records.values()] == [
        (0.0, 10.0, (0,)), (10.0, 20.0, (1,)), (20.0, 25.0, (0,))]
    assert result.energy.peak_power_w == 400.0 and result.power_w.max() == 400.0
    assert result.energy.total_j == pytest.approx(25 * 400.0)
    assert machine.refused_starts == 2                  # b and c were held back (once each)
    assert machine.power_totals().budget_w == 500.0
    # 600 W leaves room for both: a and b run together, c takes n0 at a's end
    records, machine, _ = run(jobs, TWO_SMALL, SlurmPowerSaving(budget_w=600.0))
    assert [(r.start_s, r.end_s) for r in records.values()] == [(0.0, 10.0), (0.0, 10.0), (10.0, 15.0)]
    assert machine.refused_starts == 0


def test_a_budget_holds_the_resume_of_powered_down_nodes_and_the_start_after_it():
    # the same nodes (off 10 W, boot 15 s at idle power), SuspendTime 20 s, budget 500 W.
    #   a runs 0-10 on n0.  n1, idle since 0, is suspended at the scan of 21 s (idle for more than
    #   20 s: 0 < 21 - 20); n0, idle since 10, at the scan of 31 s.  From 31 s: 2 x 10 = 20 W.
    #   t=100: d -> n0, e -> n1, both powered down (CONFIGURING).  Scan at 101: d's resume adds
    #     boot/idle 100 - 10 = 90 W and its job 200 W: 20 + 90 + 200 = 310 <= 500, n0 resumes;
    #     e's would add as much again beside d's promised 290 W: 20 + 290 + 290 = 600 > 500: held.
    #   n0 is up at 116; slurmctld's check every 30 s sees it at 120: d runs 120-130.
    #   d ends at 130 (n0 idle: 110 W); the scan at 131: 110 + 90 + 200 = 400 <= 500: n1 resumes,
    #   up at 146, seen at 150: e runs 150-160 (n0, idle since 130, is suspended at 157).
    # Energy (W x s): 400x10 + 200x11 + 110x10 + 20x70 + 110x15 (n0 boots) + 110x4 + 310x10 + 110x1
    #   + 200x15 (n1 boots) + 200x4 + 400x7 + 310x3 = 21,530 J; the peak 400 W.
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=1), JobSpec("d", 100.0, 10.0, runtime_s=10.0, cpus=1),
            JobSpec("e", 100.0, 10.0, runtime_s=10.0, cpus=1)]
    saving = SlurmPowerSaving(suspend_time_s=20.0, boot_s=15.0, budget_w=500.0)
    records, machine, result = run(jobs, TWO_SMALL, saving)
    assert [(r.job_id, r.start_s, r.end_s, r.node_indices) for r in records.values()] == [
        ("a", 0.0, 10.0, (0,)), ("d", 120.0, 130.0, (0,)), ("e", 150.0, 160.0, (1,))]
    assert machine.events == [(21.0, "suspend", 1), (31.0, "suspend", 0), (101.0, "resume", 0),
                              (131.0, "resume", 1), (157.0, "suspend", 0)]
    assert result.energy.total_j == pytest.approx(21530.0)
    assert result.energy.peak_power_w == 400.0 and machine.refused_starts == 1
    # without the budget both resume at 101 and run 120-130
    records, _, _ = run(jobs, TWO_SMALL, SlurmPowerSaving(suspend_time_s=20.0, boot_s=15.0))
    assert [(r.start_s, r.end_s) for r in records.values()][1:] == [(120.0, 130.0), (120.0, 130.0)]


def test_a_budget_below_the_clusters_power_at_the_start_is_refused():
    with pytest.raises(ValueError, match="below the power of the cluster"):
        Replay([JobSpec("a", 0.0, 10.0, runtime_s=1.0, cpus=1)], TWO_SMALL, "slurm",
               machine_factory=slurm_power_machine_factory(SlurmPowerSaving(budget_w=150.0)))
    with pytest.raises(ValueError, match="budget_w must be a finite number"):
        SlurmPowerSaving(budget_w=0.0)
    # a job that could never begin (both nodes busy: 600 W > 500 W) is refused, not left waiting for ever
    wide = [JobSpec("wide", 0.0, 10.0, runtime_s=10.0, cpus=2, nodes=2)]
    with pytest.raises(ValueError, match="job wide needs more power than the budget"):
        run(wide, TWO_SMALL, SlurmPowerSaving(budget_w=500.0))


@settings(max_examples=30, deadline=None)
@given(jobs=workloads(), suspend_s=st.sampled_from([math.inf, 0.0, 20.0]), boot_s=st.sampled_from([0.0, 25.0]),
       budget_w=st.sampled_from([700.0, 900.0]), start_off=st.booleans(), backfill=st.booleans())
def test_under_a_budget_every_job_runs_and_no_instant_exceeds_it(jobs, suspend_s, boot_s, budget_w, start_off,
                                                                 backfill):
    # three 4-CPU nodes (idle 100 W, busy 300 W): a job of at most 8 CPUs needs at most 2 x 300 W
    # beside one idle node: 700 W, so every job can run under either budget
    cluster = Cluster.homogeneous(3, cpus=4, idle_w=100.0, busy_w=300.0)
    saving = SlurmPowerSaving(suspend_time_s=suspend_s, boot_s=boot_s, budget_w=budget_w,
                              start_powered_down=start_off and suspend_s < math.inf)
    scheduling = SlurmScheduling(scheduler="backfill" if backfill else "builtin", batch_sched_delay_s=0.0)
    replay = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": scheduling},
                    machine_factory=slurm_power_machine_factory(saving))
    replay.begin()
    while len(replay.events):
        replay.step()
        replay.machine._check()                      # power within the budget after every step
    result = replay.close()
    records = {r.job_id: r for r in result.records}
    assert set(records) == {j.job_id for j in jobs}          # every job runs
    for job in jobs:
        assert records[job.job_id].start_s >= job.submit_s
        assert records[job.job_id].end_s == pytest.approx(records[job.job_id].start_s + job.runtime_s)
    assert result.power_w.max() <= budget_w + 1e-6 and result.energy.peak_power_w <= budget_w + 1e-6
    energy = result.energy
    assert energy.total_j == pytest.approx(energy.jobs_j + energy.unallocated_j, rel=1e-9)
    assert not replay.machine.configuring


def test_same_inputs_give_the_same_schedule():
    jobs = [JobSpec(f"j{i}", 13.0 * i, 90.0, runtime_s=5.0 + i, cpus=1 + i % 5) for i in range(30)]
    saving = SlurmPowerSaving(suspend_time_s=10.0, boot_s=8.0, suspend_rate=3)
    first = run(jobs, Cluster.homogeneous(4, cpus=4), saving)
    second = run(jobs, Cluster.homogeneous(4, cpus=4), saving)
    assert [(r.start_s, r.node_indices) for r in first[0].values()] == [(r.start_s, r.node_indices) for r in second[0].values()]
    assert first[1].events == second[1].events


# -- the command line -------------------------------------------------------------------------------
CONF = """ClusterName=t
NodeName=n[1-4] CPUs=4 RealMemory=4000
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE
SuspendTime={suspend}
ResumeTimeout=120
"""


def swf(path, jobs):
    path.write_text("".join(f"{i + 1} {submit} -1 {run} {cpus} -1 -1 {cpus} 3600 -1 1 1 1 -1 1 -1 -1 -1\n"
                            for i, (submit, run, cpus) in enumerate(jobs)))
    return path


def test_replay_honours_suspend_time_from_slurm_conf(tmp_path, capsys):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(suspend=60))
    trace = swf(tmp_path / "jobs.swf", [(0, 100, 4), (400, 100, 4), (2000, 50, 16)])
    out = tmp_path / "out"
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--boot-s", "90",
                 "--no-progress", "--out", str(out)]) == 0
    import json
    summary = json.loads((out / "summary.json").read_text())
    power = summary["power_states"]
    assert power["suspends"] > 0 and power["boots"] > 0
    # the last job (16 CPUs, at 2,000 s) is allocated the four powered-down nodes, resumed at the scan
    # a tick later (2,001 s), up 90 s later (2,091 s), started at slurmctld's check (every 30 s from
    # 0: 2,100 s) and ends at 2,150 s: the replay's span; far more boots per node per day than
    # hardware takes
    span_days = 2150 / 86400
    assert power["boots_per_node_day"] == pytest.approx(power["boots"] / 4 / span_days)
    # the report warns, naming the threshold: 5 boots / 4 nodes / (2,150 s / 86,400 s) = 50.2 a day
    assert power["boots"] == 5
    assert ("each node boots 50.2 times a day on average (5 boots of 4 nodes), more than the 4 a day above "
            "which nodes cycle implausibly often") in " ".join(capsys.readouterr().err.split())
    # --power-down-after sets SuspendTime: a year keeps every node on
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--power-down-after",
                 "31536000", "--no-progress", "--out", str(tmp_path / "out2")]) == 0
    assert json.loads((tmp_path / "out2" / "summary.json").read_text())["power_states"]["suspends"] == 0


def test_replay_holds_jobs_under_a_power_budget_in_the_slurm_queue(tmp_path):
    # four 4-CPU nodes at slurm.conf's assumed power (idle 100 W, 350 W busy: a 4-CPU job adds 250 W),
    # no power saving, budget 900 W.  Three 4-CPU jobs at 0 s, 100 s each, get a node each: 1 and 2
    # begin (400 + 2 x 250 = 900 W); 3 would make 1,150 W: it waits, allocated, until they end at
    # 100 s, and runs 100-200 s.  Energy: 900 W x 100 s + (350 + 3 x 100) W x 100 s = 155,000 J.
    import json
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(suspend="INFINITE"))
    trace = swf(tmp_path / "jobs.swf", [(0, 100, 4), (0, 100, 4), (0, 100, 4)])
    out = tmp_path / "out"
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--power-budget", "900",
                 "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["power_states"]["peak_power_w"] == 900.0 and summary["power_states"]["refused_starts"] == 1
    assert summary["energy_kwh"] == pytest.approx(155000.0 / 3.6e6)
    rows = (out / "jobs.csv").read_text().splitlines()[1:]
    assert [tuple(row.split(",")[4:6]) for row in rows] == [("0.0", "100.0"), ("0.0", "100.0"), ("100.0", "200.0")]


def test_replay_refuses_a_boot_longer_than_resume_timeout_and_greenslurms_own_power_settings(tmp_path, capsys):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(suspend=60))
    trace = swf(tmp_path / "jobs.swf", [(0, 100, 4)])
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--boot-s", "300",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "ResumeTimeout 120 s" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    # Slurm never migrates a running job: pVOCL's consolidation is refused, in one line that says so
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--consolidate-every", "60",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("greenslurm: error: <command line>: field --consolidate-every: pVOCL's consolidation "
                           "moves running jobs between nodes; Slurm never migrates a running job, so the slurm "
                           "queue cannot consolidate")
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--power-budget", "0",
                 "--no-progress"]) == 2
    assert "--power-budget" in capsys.readouterr().err
    conf.write_text(CONF.format(suspend=60) + "SuspendRate=fast\n")
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "suspendrate" in err.lower() and str(conf) in err and "Traceback" not in err


# -- the power-save thread's cadence: last_node_update >= last_power_scan in whole seconds ----------
# Slurm's logs of one workload recorded twice (bench/data/slurm-power/seed302*.json.gz, their
# slurmctld.log): n2-n3 suspended in second 74 (SuspendTimeout 3 s: POWERED_DOWN, allocatable, at
# the first scan whose clock reads more than 77).
#   first recording: a job allocated at 77.264 (second 77), the thread's scan at 77.279 (clock 77:
#     too early), and because the allocation fell in the second of that scan, another at 78.279
#     (clock 78: powered down); the waiting job was allocated at 78.419 and its node resumed at the
#     next scan, 79.280.
#   second recording: the allocation at 76.913 (second 76), scans at 76.914 and 77.914 (clock 77:
#     too early), no change in second 77 after it: the nodes stayed POWERING_DOWN until the next
#     change (a node back at 81.935; scan at 82.915), the waiting job was allocated at 82.916 and its
#     nodes resumed at 83.916.
# The same sequence on three nodes (n0 excluded, its thread waking at .279 past the second):
# z ends at 1.0 (second 1: scans at 1.279 and 2.279), periodic scans at 12.279 and 22.279 suspend
# n1-n2 (idle since 0 < 22 - 15; clock 22: POWERED_DOWN at a scan whose clock reads > 25).

@pytest.mark.parametrize("a_submit_s, b_node_resumed_s", [
    (25.264, 27.279),   # a allocated at 25.264, just before the scan at 25.279 (clock 25: 22 + 3 < 25
                        # false); a fell in that scan's second, so another at 26.279 (powered down;
                        # b allocated), b's node resumed at 27.279 (b's allocation in second 26)
    (23.5, 36.279),     # a allocated in second 24 (the background thread's pass at 24.0): one scan
                        # at 25.279 (too early), none again until the periodic one 10 s later,
                        # 35.279 (b allocated), b's node resumed at 36.279
])
def test_a_change_in_the_second_of_a_scan_brings_one_more_scan(a_submit_s, b_node_resumed_s):
    conf = parse_slurm_conf_text("SchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1,bf_interval=1\n")
    cluster = Cluster.homogeneous(3, cpus=4)
    saving = SlurmPowerSaving(suspend_time_s=15.0, suspend_timeout_s=3.0, resume_timeout_s=30.0, suspend_rate=0,
                              resume_rate=0, exc_nodes=(cluster.nodes[0].name,), boot_s=5.0, tick_phase_s=0.279)
    jobs = [JobSpec("z", 0.0, 60.0, runtime_s=1.0, cpus=1), JobSpec("a", a_submit_s, 60.0, runtime_s=20.0, cpus=4),
            JobSpec("b", 25.728, 60.0, runtime_s=10.0, cpus=4)]
    run = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": SlurmScheduling.from_conf(conf)},
                 machine_factory=slurm_power_machine_factory(saving))
    records = {r.job_id: r for r in run.run().records}
    assert [(round(t, 3), kind, node) for t, kind, node in run.machine.events] == [
        (22.279, "suspend", 1), (22.279, "suspend", 2), (b_node_resumed_s, "resume", 1)]
    assert list(records["b"].node_indices) == [1]
    # booted 5 s later; slurmctld's next 30-second check of configuring jobs (from the start, 0) is at 60
    assert records["b"].start_s == 60.0


def test_a_named_node_selection_is_given_powered_down_nodes_too():
    # both nodes start powered down; under a named selection (best fit) the queue tried powered-up
    # nodes only and the job waited for ever.  Now: allocated at 0 to n0, the scan at 1 s resumes it,
    # up at 11 s (boot 10 s), slurmctld's check every 30 s sees it at 30 s: it runs 30-40 s.
    from greenslurm.allocation.selection import make_selection
    jobs = [JobSpec("a", 0.0, 60.0, runtime_s=10.0, cpus=1)]
    saving = SlurmPowerSaving(suspend_time_s=100.0, boot_s=10.0, start_powered_down=True)
    replay = Replay(jobs, TWO_SMALL, "slurm", selection=make_selection("bestfit"),
                    strategy_options={"scheduling": BUILTIN}, machine_factory=slurm_power_machine_factory(saving))
    records = replay.run().records
    assert [(r.start_s, r.end_s, r.node_indices) for r in records] == [(30.0, 40.0, (0,))]
    assert replay.machine.events[0] == (1.0, "resume", 0)


def test_folded_rate_decays_decide_as_a_scan_at_every_wake_up(shared_data):
    # while backfill keeps idle nodes PLANNED the thread scans at every wake-up, and each scan decays
    # SuspendRate's and ResumeRate's counts by (60 - dt) / 60; the replay folds the scans that could
    # only decay them into the next one that can act.  On KTH-SP2's first 300 jobs (100 nodes,
    # SuspendTime 600 s, rates of 5 a minute, so the counts' rounding decides) the replay with every
    # scan made (full_scans) is the reference: same starts, nodes, suspends and resumes, same last
    # event.  (Without the folded decays, the counts stay high and the runs part.)  Between backfill's
    # plans the thread scans every power_save_interval while the counts decay: those scans are folded
    # too, so the replay has fewer events.
    from greenslurm.traces import read_trace
    trace = read_trace(str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf"), limit=300)
    saving = SlurmPowerSaving(suspend_time_s=600.0, suspend_rate=5, resume_rate=5, boot_s=45.0)
    outcomes, event_times = [], []
    for full in (False, True):
        replay = Replay(trace.jobs, trace.cluster_hint(), "slurm",
                        strategy_options={"scheduling": SlurmScheduling(scheduler="backfill")},
                        machine_factory=slurm_power_machine_factory(saving))
        replay.machine.full_scans = full
        replay.begin()
        steps = 0
        while len(replay.events):
            replay.step()
            steps += 1
        result = replay.close()
        outcomes.append(([(r.job_id, r.start_s, tuple(r.node_indices)) for r in result.records],
                         replay.machine.events, replay.now_s))
        event_times.append(steps)
    assert len(outcomes[0][1]) > 100
    assert outcomes[0] == outcomes[1]
    assert event_times[0] < event_times[1] / 2
