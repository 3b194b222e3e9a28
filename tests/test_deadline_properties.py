"""Invariants of deadline-aware admission on random small workloads (hypothesis).

- Greedy (alone or behind a threshold) never lets an accepted job miss its deadline: planning uses
  requested times, so this holds with exact runtimes and with jobs that end early or are killed;
- no node is over-allocated at any instant, and the plan always equals the machine's state now;
- a job never starts later than its first reservation, and every job is run, rejected or skipped;
- under a renewable-only cap the cluster never draws more than the supply while a job runs;
- the energy split adds up: renewable + grid = used, renewable + curtailed = supplied;
- Greedy BestFit on single cores is the paper's Algorithm 1, written out literally below;
- the fast exclusive-core planner chooses exactly as the general planner does.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.coreplan import CorePlanner
from greenslurm.allocation.placement import ALLOCATIONS, Request, parse_allocation
from greenslurm.allocation.planner import Planner
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.renewable import SupplySeries, split_energy
from greenslurm.sim.engine.deadline_queue import ProfilePlan
from greenslurm.sim.engine.profile import PlanProfile
from greenslurm.sim.engine.replay import Replay

CPU = np.array([1.0, 0.0, 0.0])


@st.composite
def workloads(draw, exact=None):
    nodes = draw(st.integers(1, 4))
    cpus = draw(st.integers(1, 3))
    cluster = Cluster.homogeneous(nodes, cpus=cpus, idle_w=50.0, busy_w=200.0)
    exact = draw(st.booleans()) if exact is None else exact
    jobs = []
    for i in range(draw(st.integers(1, 20))):
        requested = draw(st.integers(1, 20))       # (a job of no length is held by no plan)
        runtime = requested if exact else draw(st.integers(0, 25))
        submit = draw(st.integers(0, 40))
        slack = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0]))
        deadline = None if draw(st.integers(0, 9)) == 0 else submit + (1 + slack) * requested
        jobs.append(JobSpec(str(i), submit_s=float(submit), requested_time_s=float(requested),
                            runtime_s=float(runtime), cpus=draw(st.integers(1, nodes * cpus)),
                            nodes=draw(st.integers(0, nodes)), deadline_s=deadline))
    return cluster, jobs


@st.composite
def supplies(draw):
    steps = draw(st.integers(1, 6))
    times = np.cumsum([0.0] + [float(draw(st.integers(1, 15))) for _ in range(steps - 1)])
    watts = [float(draw(st.sampled_from([0, 100, 250, 400, 900]))) for _ in range(steps)]
    return SupplySeries(times, np.array(watts))


def run_checked(cluster, jobs, **options):
    replay = Replay(jobs, cluster, "deadline", strategy_options=options, keep_jobs=True)
    replay.begin()
    while len(replay.events):
        replay.step()
        replay.machine._check()
        profile = replay.strategy.profile
        if profile is not None:
            profile._check(cluster.capacity)
            assert np.allclose(profile.free_at(replay.now_s), replay.machine.free)
    return replay, replay.close()


def assert_never_over_allocated(result, cluster):
    deltas = []
    for r in result.records:
        for node in r.node_indices:
            deltas += [(r.end_s, 0, node, -r.cpus / r.nodes), (r.start_s, 1, node, r.cpus / r.nodes)]
    used = np.zeros(cluster.size)
    for _, _, node, cpus in sorted(deltas, key=lambda d: d[:2]):
        used[node] += cpus
        assert used[node] <= cluster.capacity[node, 0] + 1e-9


def pieces(result, supply):
    """Left edges and lengths of the pieces of both the power series and the supply."""
    end = result.energy.end_s
    edges = np.union1d(np.append(result.power_times_s, end),
                       supply.times_s[(supply.times_s > result.power_times_s[0]) & (supply.times_s < end)])
    index = np.searchsorted(result.power_times_s, edges[:-1], side="right") - 1
    return edges[:-1], np.diff(edges), index


@settings(max_examples=120, deadline=None)
@given(workloads(), st.sampled_from(["greedy", "threshold", "threshold,greedy"]), st.sampled_from(ALLOCATIONS),
       st.sampled_from(["grid", "green", "only"]), supplies())
def test_admission_invariants(workload, acceptance, allocation, renewable, supply):
    cluster, jobs = workload
    replay, result = run_checked(cluster, jobs, acceptance=acceptance, allocation=allocation,
                                 supply=supply, renewable=renewable)
    assert len(result.records) + len(result.rejected) + sum(result.skipped.values()) == len(jobs)
    pending = {p.job.job_id: p for p in replay.pending}
    for record in result.records:
        assert not record.deadline_missed                       # accepted jobs end by their deadline
        assert record.start_s >= record.submit_s
        assert record.start_s <= pending[record.job_id].first_reservation_s + 1e-9
    assert_never_over_allocated(result, cluster)
    if result.power_times_s.size:
        split = split_energy(result.power_times_s, result.power_w, result.energy.end_s, supply)
        assert split.used_j == pytest.approx(result.energy.total_j, rel=1e-9, abs=1e-6)
        assert split.renewable_j + split.grid_j == pytest.approx(split.used_j, rel=1e-9, abs=1e-6)
        assert split.renewable_j + split.curtailed_j == pytest.approx(
            supply.integral_j(result.energy.start_s, result.energy.end_s), rel=1e-9, abs=1e-6)
        if renewable == "only":    # with any job running, power <= supply on every piece
            left, _, index = pieces(result, supply)
            busy = result.busy_cpus[index] > 0
            assert (result.power_w[index][busy] <= supply.at(left[busy]) + 1e-6).all()


def algorithm_1(jobs, cores):
    """Greedy BestFit (Nileshwar & Schwiegelshohn, Algorithm 1) for single-core jobs, literally:
    for the next job j, update the remaining load of all cores; if the least loaded core completes
    j on time, accept j and start it, as early as possible, on the most loaded core that completes
    it on time (equal loads: the lower core number); else reject j."""
    busy_until = [0.0] * cores
    placed, rejected = {}, set()
    for j in sorted(jobs, key=lambda j: j.submit_s):
        r, p, d = j.submit_s, j.requested_time_s, j.deadline_s
        load = [max(b - r, 0.0) for b in busy_until]
        if r + min(load) + p > d:
            rejected.add(j.job_id)
            continue
        on_time = [c for c in range(cores) if r + load[c] + p <= d]
        core = max(on_time, key=lambda c: (load[c], -c))
        start = r + load[core]
        if p > 0:
            busy_until[core] = start + p
        placed[j.job_id] = (start, core)
    return placed, rejected


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 12), st.integers(0, 30)),
                                   min_size=1, max_size=30))
def test_greedy_bestfit_is_algorithm_1(cores, specs):
    jobs = [JobSpec(str(i), float(r), float(p), runtime_s=float(p), cpus=1, deadline_s=float(r + p + extra))
            for i, (r, p, extra) in enumerate(specs)]
    placed, rejected = algorithm_1(jobs, cores)
    result = Replay(jobs, Cluster.homogeneous(cores, cpus=1), "deadline",
                    strategy_options=dict(acceptance="greedy", allocation="bestfit")).run()
    assert {r.job_id for r in result.rejected} == rejected
    # (a job of no length holds no core: it may run on another core free at that instant)
    assert {r.job_id: (r.start_s, r.node_indices[0] if r.end_s > r.start_s else None) for r in result.records} \
        == {k: (start, core if jobs[int(k)].requested_time_s > 0 else None) for k, (start, core) in placed.items()}


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.sampled_from(["balanced", "bestfit", "minidle", "firstfit"]),
       st.lists(st.tuples(st.sampled_from([0.0, 0.0, 1.0, 2.5]), st.integers(1, 6), st.integers(0, 8),
                          st.sampled_from([None, 0.0, 0.5, 1.0, 3.0])), min_size=1, max_size=40))
def test_core_planner_chooses_as_the_general_planner(size, rule_name, specs):
    rule, _ = parse_allocation(rule_name)
    profile = PlanProfile(np.tile(CPU, (size, 1)), 0.0)
    general = Planner(ProfilePlan(profile), rule)
    fast = CorePlanner(size, rule, 0.0)
    now = 0.0
    for gap, m, p, slack in specs:
        now += gap
        profile.advance(now)
        general.advance(now)
        fast.advance(now)
        m = min(m, size)
        request = Request(m, CPU, float(p), None if slack is None else now + (1 + slack) * p)
        assert general.earliest_finish(request) == fast.earliest_finish(request)
        a, b = general.place(request), fast.place(request)
        assert (a.start_s, a.nodes.tolist()) == (b.start_s, b.nodes.tolist())
        general.commit(request, a)
        fast.commit(request, b)
