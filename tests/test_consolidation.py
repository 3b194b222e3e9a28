"""pVOCL's consolidation: the planner against an exhaustive search, moves that lose no work and
never break the budget, the energy account of a moved job, and phase awareness on a real trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.power_actions import _PowerModel, exhaustive_plan_cost, plan_power_actions
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.power_states import PowerStateConfig, power_machine_factory

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-2023"


# -- the planner ----------------------------------------------------------------------------------
@st.composite
def planning_cases(draw):
    groups = draw(st.integers(1, 3))
    capacity = tuple(draw(st.integers(1, 3)) for _ in range(groups))
    start = tuple(draw(st.integers(0, c)) for c in capacity)
    floor = tuple(draw(st.integers(0, s)) for s in start)
    off_w = tuple(float(draw(st.integers(0, 20))) for _ in range(groups))
    on_w = tuple(o + float(draw(st.integers(50, 400))) for o in off_w)      # on draws more than off
    return dict(start=start, capacity=capacity, on_w=on_w, off_w=off_w,
                demand_nodes=draw(st.integers(0, sum(capacity))),
                budget_w=float(draw(st.integers(100, 2500))),
                on_cost=tuple(float(draw(st.integers(1, 400))) for _ in range(groups)),
                off_cost=tuple(float(draw(st.integers(1, 100))) for _ in range(groups)),
                group_phase=tuple(g % 3 for g in range(groups)) if draw(st.booleans()) else None,
                imbalance_loss=draw(st.sampled_from([0.0, 0.041, 0.5])),
                fixed_w=float(draw(st.integers(0, 500))), floor=floor)


@settings(max_examples=300, deadline=None)
@given(planning_cases())
def test_planner_matches_exhaustive_search(case):
    plan = plan_power_actions(**case)
    exhaustive = exhaustive_plan_cost(**case)
    if exhaustive is None:
        assert plan is None
        return
    least_w, least_cost = exhaustive
    assert plan.target_power_w == pytest.approx(least_w, abs=1e-6)
    assert plan.cost == pytest.approx(least_cost, abs=1e-6)
    # the path itself: every configuration within capacity, floor and budget, never serving less
    # than the demand when a node goes off, and it ends at the target
    model = _PowerModel(np.array(case["capacity"]), np.array(case["on_w"]), np.array(case["off_w"]),
                        None if case["group_phase"] is None else np.array(case["group_phase"]), 3,
                        case["imbalance_loss"], case["fixed_w"])
    config = list(case["start"])
    cost = 0.0
    for action, group in plan.actions:
        config[group] += 1 if action == "on" else -1
        cost += case["on_cost" if action == "on" else "off_cost"][group]
        assert case["floor"][group] <= config[group] <= case["capacity"][group]
        assert model.power_w(np.array(config))[0] <= case["budget_w"] + 1e-6
        if action == "off":
            assert sum(config) >= case["demand_nodes"]
    assert tuple(config) == plan.target and cost == pytest.approx(plan.cost)


def test_planner_table():
    # 3 phases of 2 nodes, 400 W on, 10 W off, nothing needed but the floor (1, 0, 0): every other
    # node goes off; off costs 60 s each: (2,1,1) -> (1,0,0) is 3 actions, 180 s, 400 + 5*10 = 450 W
    plan = plan_power_actions((2, 1, 1), (2, 2, 2), (400.0,) * 3, (10.0,) * 3, 0, 5000.0,
                              (300.0,) * 3, (60.0,) * 3, floor=(1, 0, 0))
    assert plan.target == (1, 0, 0) and plan.cost == 180.0 and plan.target_power_w == 450.0
    # 3 groups of 400 nodes: the box search stays fast where the full space is 64 million
    big = plan_power_actions((300, 280, 250), (400, 400, 400), (230.0,) * 3, (10.0,) * 3, 0, 1e9,
                             (300.0,) * 3, (5.0,) * 3, group_phase=(0, 1, 2), imbalance_loss=0.041,
                             fixed_w=50_000.0, floor=(290, 270, 250))
    # the least power keeps the floor's 810 nodes, as balanced as the floor allows: 270 on phase 1
    # and 250 on phase 2 cannot rise for free, so phase 0 drops to its floor too
    assert sum(big.target) == 810 and big.target == (290, 270, 250)
    assert big.cost == 5.0 * (10 + 10)


# -- the replay ------------------------------------------------------------------------------------
def two_gpu_nodes(count: int, idle_w: float = 150.0, gpu_max_w: float = 200.0) -> Cluster:
    return Cluster([NodeSpec(f"n{i}", cpus=16, memory_mb=65536.0, gpus=2, idle_w=idle_w, busy_w=250.0,
                             gpu_idle_w=30.0, gpu_max_w=gpu_max_w) for i in range(count)])


def test_table1_moves_the_last_job_and_powers_its_node_off():
    # pVOCL's Table I: 3 nodes of 2 GPUs, 6 one-GPU workloads; FCFS first fit puts jobs 1-2 on node
    # 0, 3-4 on node 1, 5-6 on node 2.  At 63 s jobs 1, 3, 5 end: each node holds one job; jobs 2
    # and 4 stay, job 6 (node 2, the least loaded last by index) moves to node 0 and node 2 goes
    # off at once.  Job 6 pauses 5 s: it ends at 213 + 5 = 218.
    runtimes = [63.0, 213.0, 63.0, 137.0, 63.0, 213.0]
    jobs = [JobSpec(f"v{k + 1}", 0.0, r, runtime_s=r, cpus=1, gpus_per_node=1.0) for k, r in enumerate(runtimes)]
    config = PowerStateConfig(suspend_after_s=1.0, consolidate_every_s=60.0, phases=1, boot_s=60.0, migrate_s=5.0)
    run = Replay(jobs, two_gpu_nodes(3), "fcfs", machine_factory=power_machine_factory(config))
    result = run.run()
    ends = {r.job_id: (r.end_s, r.node_indices) for r in result.records}
    assert run.machine.migrations == [(63.0, "v6", 2, 0)]
    assert ends["v6"] == (218.0, (0,)) and ends["v2"] == (213.0, (0,)) and ends["v4"] == (137.0, (1,))
    totals = run.machine.power_totals()
    # node 2 is off from 63 s to the end (218 s); node 1 from 137 s, when its last job ended (the
    # consolidation check at an end turns an empty node off at once, before its 1 s suspend timer)
    assert run.ledger.off_s.tolist() == [0.0, 218.0 - 137.0, 218.0 - 63.0]
    assert totals.migrations == 1 and totals.moved_jobs == 1 and totals.migration_pause_s == 5.0


def test_a_moved_job_is_charged_on_each_node_for_its_stay():
    # Two nodes of 2 GPUs, 100 W idle (4 CPUs: 25 W per CPU), GPUs 0 W idle; node a's GPUs draw
    # 200 W busy, node b's 300 W.
    cluster = Cluster([NodeSpec("a", cpus=4, memory_mb=1000.0, gpus=2, idle_w=100.0, busy_w=100.0,
                                gpu_idle_w=0.0, gpu_max_w=200.0),
                       NodeSpec("b", cpus=4, memory_mb=1000.0, gpus=2, idle_w=100.0, busy_w=100.0,
                                gpu_idle_w=0.0, gpu_max_w=300.0)])
    # x (100 s) and y (40 s) fill node a, z (200 s) goes to node b; one GPU and one CPU each.
    jobs = [JobSpec("x", 0.0, 100.0, runtime_s=100.0, cpus=1, gpus_per_node=1.0),
            JobSpec("y", 0.0, 40.0, runtime_s=40.0, cpus=1, gpus_per_node=1.0),
            JobSpec("z", 0.0, 200.0, runtime_s=200.0, cpus=1, gpus_per_node=1.0)]
    config = PowerStateConfig(suspend_after_s=None, consolidate_every_s=1000.0, phases=1, migrate_s=0.0)
    run = Replay(jobs, cluster, "fcfs", machine_factory=power_machine_factory(config))
    result = run.run()
    # at 40 s: a holds x, b holds z; both half loaded, the higher index is emptied first: z moves
    # to node a (best fit), node b goes off.
    assert run.machine.migrations == [(40.0, "z", 1, 0)]
    energy = {r.job_id: r.energy_j for r in result.records}
    # z: 40 s on b at 1 CPU x 100/4 W + 300 W, then 160 s on a at 25 W + 200 W:
    # 40 * 325 + 160 * 225 = 13,000 + 36,000 = 49,000 J
    assert energy["z"] == pytest.approx(49_000.0)
    totals = result.energy
    assert totals.total_j == pytest.approx(totals.jobs_j + totals.unallocated_j)
    assert totals.total_j == pytest.approx(totals.per_node_j.sum())


@st.composite
def gpu_workloads(draw):
    count = draw(st.integers(1, 14))
    jobs = []
    for k in range(count):
        gpus = draw(st.sampled_from([0.25, 0.5, 1.0, 2.0]))
        runtime = float(draw(st.integers(1, 400)))
        jobs.append(JobSpec(f"j{k}", float(draw(st.integers(0, 300))), runtime + 50.0, runtime_s=runtime,
                            cpus=draw(st.integers(1, 8)), gpus_per_node=gpus))
    return jobs


@settings(max_examples=60, deadline=None)
@given(gpu_workloads(), st.sampled_from([None, 0.8]), st.booleans(), st.sampled_from([0.0, 3.0]))
def test_moves_lose_no_work_and_keep_the_budget(jobs, budget_fraction, aware, migrate_s):
    cluster = two_gpu_nodes(6, gpu_max_w=200.0)
    full_w = 6 * (250.0 + 2 * 200.0)
    config = PowerStateConfig(suspend_after_s=30.0, consolidate_every_s=20.0, boot_s=10.0, migrate_s=migrate_s,
                              topology_aware=aware, phases=3, imbalance_loss=0.041,
                              budget_w=None if budget_fraction is None else budget_fraction * full_w)
    run = Replay(jobs, cluster, "easy", machine_factory=power_machine_factory(config))
    run.begin()
    while len(run.events):
        run.step()
        run.machine._check()          # budget, no job on a node that is off, free resources exact
    result = run.close()
    assert len(result.records) == len(jobs)
    moves: dict[str, int] = {}
    for _, job_id, source, target in run.machine.migrations:
        moves[job_id] = moves.get(job_id, 0) + 1
        assert source != target
    for record in result.records:
        spec = next(j for j in jobs if j.job_id == record.job_id)
        # no work lost: the run is the runtime plus the pauses of its moves
        assert record.end_s - record.start_s == pytest.approx(spec.runtime_s + moves.get(record.job_id, 0) * migrate_s)
    energy = result.energy
    assert energy.total_j == pytest.approx(energy.jobs_j + energy.unallocated_j)
    assert energy.total_j == pytest.approx(energy.per_node_j.sum())
    if config.budget_w is not None:
        assert energy.peak_power_w <= config.budget_w + 1e-6


def test_rigid_jobs_never_move():
    # CPU jobs on a GPU cluster are not movable under movable = "gpu"; under "none" nothing moves
    jobs = [JobSpec("a", 0.0, 100.0, runtime_s=100.0, cpus=2), JobSpec("b", 0.0, 10.0, runtime_s=10.0, cpus=2,
                                                                      gpus_per_node=1.0),
            JobSpec("c", 5.0, 100.0, runtime_s=100.0, cpus=2)]
    for movable in ("gpu", "none"):
        config = PowerStateConfig(suspend_after_s=None, consolidate_every_s=5.0, movable=movable)
        run = Replay(jobs, two_gpu_nodes(3), "easy", machine_factory=power_machine_factory(config))
        run.run()
        assert all(job_id not in ("a", "c") for _, job_id, _, _ in run.machine.migrations)
    with pytest.raises(ValueError):
        PowerStateConfig(movable="everything")


def test_phase_aware_consolidation_balances_a_real_trace():
    # The last 600 GPU pods of the Alibaba openb trace on one cabinet of 12 of its G2 nodes (8 GPUs),
    # one outlet bank per phase.  Consolidating with phase awareness (planner per phase, nodes woken
    # on the phase with the fewest powered) keeps the phases more even than without (one group,
    # nodes woken by index), and the distribution loss of the imbalance falls with it.  The waking
    # order does the work: at a loss of 0.041 a node kept on for balance never pays its idle watts,
    # so the planner's targets are the same either way.
    from greenslurm.traces.alibaba import read_nodes, read_pods

    pods = read_pods(str(DATA / "openb_pod_list_default.csv")).jobs
    nodes = read_nodes(str(DATA / "openb_node_list_gpu_node.csv")).nodes
    cluster = Cluster([n for n in nodes if n.gpus == 8 and n.gpu_model == "G2"][:12])
    jobs = sorted((j for j in pods if j.gpus_per_node > 0), key=lambda j: j.submit_s)[-600:]
    common = dict(suspend_after_s=1.0, consolidate_every_s=60.0, boot_s=60.0, phase_layout="banks",
                  nodes_per_cabinet=12, imbalance_loss=0.041)
    totals = {}
    for aware in (False, True):
        config = PowerStateConfig(**common, topology_aware=aware, wake_order="phase" if aware else "index")
        run = Replay(jobs, cluster, "easy", machine_factory=power_machine_factory(config))
        result = run.run()
        assert len(result.records) + sum(result.skipped.values()) == len(jobs)
        totals[aware] = run.machine.power_totals()
        assert totals[aware].migrations > 0
    assert totals[True].mean_imbalance < totals[False].mean_imbalance - 0.1
    assert totals[True].phase_loss_j < totals[False].phase_loss_j


def test_replay_command_consolidates_and_writes_the_phases_and_the_moves(tmp_path, capsys):
    import pandas as pd

    from greenslurm.cli import main

    source = (DATA / "openb_node_list_gpu_node.csv").read_text().splitlines()
    g2 = [line for line in source[1:] if line.endswith(",8,G2")][:12]
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("\n".join([source[0], *g2]) + "\n")
    pods = (DATA / "openb_pod_list_default.csv").read_text().splitlines()
    trace = tmp_path / "pods.csv"
    trace.write_text("\n".join([pods[0], *pods[-500:]]) + "\n")
    profile = tmp_path / "pvocl.toml"
    profile.write_text('[power_states]\nconsolidate_every_s = 60\nphase_layout = "banks"\nnodes_per_cabinet = 12\n'
                       'imbalance_loss = 0.041\nboot_s = 60\n')
    out = tmp_path / "out"
    assert main(["replay", str(trace), "--nodes", str(nodes), "--power-down-after", "1", "--power-config",
                 str(profile), "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())["power_states"]
    moves = pd.read_csv(out / "moves.csv")
    phases = pd.read_csv(out / "phases.csv")
    assert summary["migrations"] == len(moves) > 0 and summary["phase_loss_j"] > 0
    assert (moves["from_node"] != moves["to_node"]).all() and moves["time_s"].is_monotonic_increasing
    assert (phases["end_s"] >= phases["start_s"]).all() and phases["phase_imbalance"].between(0, 2).all()
    # a profile with a value that cannot be: one line, exit 2
    profile.write_text('[power_states]\nconsolidate_every_s = 60\nmovable = "everything"\n')
    capsys.readouterr()
    assert main(["replay", str(trace), "--nodes", str(nodes), "--power-down-after", "1", "--power-config",
                 str(profile), "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert "movable" in error and len(error.splitlines()) == 1 and "Traceback" not in error


def test_a_budget_below_the_idle_cabinet_needs_the_nodes_off_at_the_start():
    # 4 nodes of 2 GPUs idle at 150 + 2 * 30 = 210 W: 840 W with every node on.  A budget of 700 W
    # is broken at the first instant unless the replay begins with the nodes off (4 * 10 W = 40 W).
    jobs = [JobSpec(f"j{k}", 10.0 * k, 100.0, runtime_s=100.0, cpus=1, gpus_per_node=1.0) for k in range(6)]
    with pytest.raises(ValueError, match="below the idle power"):
        Replay(jobs, two_gpu_nodes(4), "easy",
               machine_factory=power_machine_factory(PowerStateConfig(budget_w=700.0, boot_s=10.0)))
    config = PowerStateConfig(budget_w=700.0, boot_s=10.0, start_off=True, suspend_after_s=5.0)
    run = Replay(jobs, two_gpu_nodes(4), "easy", machine_factory=power_machine_factory(config))
    result = run.run()
    assert len(result.records) == 6
    assert result.energy.peak_power_w <= 700.0 + 1e-6
    # every job waited at least for a boot: the nodes began off
    assert min(r.start_s - r.submit_s for r in result.records) >= 0.0
    assert result.records[0].start_s == 10.0          # j0 submitted at 0, its node booted 10 s


def test_the_command_line_refuses_a_budget_below_the_idle_cabinet(tmp_path, capsys):
    from greenslurm.cli import main

    swf = tmp_path / "t.swf"
    swf.write_text("; MaxProcs: 4\n; MaxNodes: 4\n1 0 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    # 4 single-CPU nodes, 100 W idle, 350 W busy: the job alone needs 350 + 3 * 10 W (others off) =
    # 380 W, under 390 W; every node on idles at 400 W, over it
    assert main(["replay", str(swf), "--power-down-after", "60", "--power-budget", "390", "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert "below the idle power" in error and len(error.splitlines()) == 1


def test_phase_placement_balances_power_down_on_a_real_trace():
    # static power-down on 12 G2 nodes (outlet banks per phase), the last 600 openb GPU pods: placing
    # new jobs on the phase drawing least lowers the mean imbalance against first fit, whose lowest
    # numbered nodes are all on phase 0
    from greenslurm.allocation.selection import SELECTIONS
    from greenslurm.traces.alibaba import read_nodes, read_pods

    pods = read_pods(str(DATA / "openb_pod_list_default.csv")).jobs
    nodes = read_nodes(str(DATA / "openb_node_list_gpu_node.csv")).nodes
    cluster = Cluster([n for n in nodes if n.gpus == 8 and n.gpu_model == "G2"][:12])
    jobs = sorted((j for j in pods if j.gpus_per_node > 0), key=lambda j: j.submit_s)[-600:]
    config = PowerStateConfig(suspend_after_s=1.0, boot_s=60.0, phase_layout="banks", nodes_per_cabinet=12,
                              imbalance_loss=0.041, start_off=True)
    imbalance = {}
    for name in ("firstfit", "phase"):
        run = Replay(jobs, cluster, "easy", selection=SELECTIONS[name](False),
                     machine_factory=power_machine_factory(config))
        run.run()
        imbalance[name] = run.machine.power_totals().mean_imbalance
    assert imbalance["phase"] < 0.8 * imbalance["firstfit"]


def test_the_phase_selection_needs_power_states(tmp_path, capsys):
    from greenslurm.cli import main

    swf = tmp_path / "t.swf"
    swf.write_text("; MaxProcs: 4\n; MaxNodes: 4\n1 0 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert main(["replay", str(swf), "--select", "phase", "--no-progress"]) == 2
    assert "power states" in capsys.readouterr().err
    assert main(["replay", str(swf), "--select", "phase", "--power-down-after", "60", "--no-progress"]) == 0


def test_planner_finds_balancing_nodes_that_pay_for_themselves():
    # A loss of 0.5 per unit of imbalance: one more node on than the least (4 + 4 instead of 3 + 4)
    # draws less, 2,158.5 W against 2,168.2 W, and is one "off" away (cost 99) instead of two
    case = dict(start=(5, 4), capacity=(5, 5), on_w=(67.0, 179.0), off_w=(3.0, 30.0), demand_nodes=3,
                budget_w=2942.0, on_cost=(7.0, 20.0), off_cost=(99.0, 64.0), group_phase=(0, 2),
                imbalance_loss=0.5, fixed_w=422.0, floor=(0, 4))
    plan = plan_power_actions(**case)
    assert plan.target == (4, 4) and plan.cost == 99.0
    assert (plan.target_power_w, plan.cost) == pytest.approx(exhaustive_plan_cost(**case))


def test_planner_turns_hundreds_of_nodes_off_without_a_search():
    # 3 phases of 404-405 nodes, all on, all but the floor can go off (the full openb node list):
    # only "off" actions, so any order costs the same: 5 s x (394 + 284 + 345) = 5,115 s
    plan = plan_power_actions((404, 404, 405), (404, 404, 405), (285.0,) * 3, (10.0,) * 3, 0, 1e9,
                              (60.0,) * 3, (5.0,) * 3, group_phase=(0, 1, 2), imbalance_loss=0.041,
                              fixed_w=300_000.0, floor=(10, 120, 60))
    assert plan.target == (10, 120, 60) and plan.cost == 5115.0 and len(plan.actions) == 1023


@pytest.mark.parametrize("change, message", [
    (dict(budget_w=float("nan")), "budget"),
    (dict(on_cost=(-1.0, 1.0)), "finite and >= 0"),
    (dict(on_w=(5.0, 400.0)), "on_w >= off_w"),
    (dict(start=(1.5, 0)), "whole numbers"),
    (dict(fixed_w=float("nan")), "finite"),
    (dict(imbalance_loss=-0.1), "finite and >= 0"),
    (dict(group_phase=(0, 7)), "group_phase"),
    (dict(phases=100, group_phase=(0, 1)), "phases"),
])
def test_planner_refuses_what_no_cabinet_can_be(change, message):
    case = dict(start=(1, 1), capacity=(2, 2), on_w=(400.0, 400.0), off_w=(10.0, 10.0), demand_nodes=1,
                budget_w=2000.0, on_cost=(300.0, 300.0), off_cost=(60.0, 60.0), group_phase=(0, 1),
                imbalance_loss=0.041)
    case.update(change)
    with pytest.raises(ValueError, match=message):
        plan_power_actions(**case)


def test_consolidation_timers_are_bounded_by_the_events():
    # a check skipped by the interval is made up by one timer; with a 1 s interval a run of 40 jobs
    # has no more ticks than event times, where a timer every interval would be ~10,000
    jobs = [JobSpec(f"j{k}", 30.0 * k, 10_000.0, runtime_s=10_000.0 - 97 * k, cpus=1, gpus_per_node=1.0)
            for k in range(40)]
    config = PowerStateConfig(suspend_after_s=1.0, consolidate_every_s=1.0, boot_s=10.0, migrate_s=1.0)
    run = Replay(jobs, two_gpu_nodes(24), "easy", machine_factory=power_machine_factory(config))
    steps = 0
    run.begin()
    while len(run.events):
        run.step()
        steps += 1
    run.close()
    assert run.machine.consolidation.ticks <= steps / 2
    with pytest.raises(ValueError, match="consolidate_every_s"):
        PowerStateConfig(consolidate_every_s=1e-6)
    with pytest.raises(ValueError, match="phases"):
        PowerStateConfig(phases=100)


def test_more_phases_than_nodes_with_an_off_power_exact():
    """Two one-CPU nodes (idle 100 W, busy 300 W) on three phases: node 0 on phase 0, node 1 on
    phase 1, phase 2 has no node.  The empty phase used to get a mean on power of 0 W, below the
    10 W off power, and the planner refused it (ValueError on_w >= off_w) at the first step.
      a runs on node 0 0-20 (300 W x 20 s = 6000 J); node 1 is empty at 0 and goes off at once
      (10 W x 20 s = 200 J); node 0 goes off when a ends at 20, the end: total 6200 J."""
    cluster = Cluster.homogeneous(2, cpus=1, idle_w=100.0, busy_w=300.0)
    jobs = [JobSpec("a", 0.0, 30.0, runtime_s=20.0, cpus=1)]
    config = PowerStateConfig(off_w=10.0, consolidate_every_s=10.0, phases=3)
    replay = Replay(jobs, cluster, "fcfs", machine_factory=power_machine_factory(config))
    result = replay.run()
    assert replay.machine.phase.tolist() == [0, 1]
    assert [(r.job_id, r.start_s, r.end_s) for r in result.records] == [("a", 0.0, 20.0)]
    assert result.energy.total_j == pytest.approx(6200.0)
    assert result.energy.per_node_j.tolist() == pytest.approx([6000.0, 200.0])
    assert replay.machine.consolidation.turned_off == 2
    assert replay.machine.power_totals().off_j == pytest.approx(200.0)
