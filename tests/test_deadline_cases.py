"""Hand-checked admission cases (Nileshwar & Schwiegelshohn): acceptance policies, allocation rules with and without
backfilling, the paper's Greedy BestFit (Algorithm 1), and the renewable power cap, arithmetic in comments."""

import numpy as np
import pytest

from greenslurm.acceptance.policies import BELOW_SLACK, MISSES_DEADLINE, MISSES_THRESHOLD, NEVER_FITS, AcceptAll, Greedy, Threshold
from greenslurm.acceptance.registry import build
from greenslurm.allocation.coreplan import CorePlanner
from greenslurm.allocation.placement import Request, parse_allocation
from greenslurm.allocation.planner import Planner
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.renewable import SupplySeries
from greenslurm.sim.engine.deadline_queue import ProfilePlan
from greenslurm.sim.engine.profile import PlanProfile
from greenslurm.sim.engine.replay import Replay
from greenslurm.traces import read_trace

CPU = np.array([1.0, 0.0, 0.0])


def job(job_id, submit, p, deadline=None, cpus=1, runtime=None):
    return JobSpec(job_id, submit_s=float(submit), requested_time_s=float(p),
                   runtime_s=float(p if runtime is None else runtime), cpus=cpus,
                   deadline_s=None if deadline is None else float(deadline))


def run(jobs, cluster, acceptance="greedy", allocation="bestfit", **options):
    result = Replay(jobs, cluster, "deadline", strategy_options=dict(
        acceptance=acceptance, allocation=allocation, **options)).run()
    placed = {r.job_id: (r.start_s, r.end_s, r.node_indices) for r in result.records}
    rejected = {r.job_id: (r.policy, r.reason) for r in result.rejected}
    return placed, rejected, result


# -- acceptance policies on a fixed view ------------------------------------------------------------
class View:
    now_s = 0.0

    def __init__(self, finish):
        self.finish = finish

    def earliest_finish(self, job):
        return self.finish


# job: submitted at 0, asks 100 s, deadline 200 s -> slack (200 - 0) / 100 - 1 = 1
J = job("j", 0, 100, deadline=200)


@pytest.mark.parametrize("policy, finish, accepted, reason", [
    (AcceptAll(), None, True, ""),                  # accepts even what can never run
    (Greedy(), 200.0, True, ""),                    # ends exactly at its deadline: on time
    (Greedy(), 200.5, False, MISSES_DEADLINE),      # 200.5 > 200
    (Greedy(), None, False, NEVER_FITS),
    # threshold deadline = r + p + share * (d - r - p) = 0 + 100 + 0.5 * 100 = 150
    (Threshold(share=0.5), 150.0, True, ""),
    (Threshold(share=0.5), 151.0, False, MISSES_THRESHOLD),
    # share 1: the threshold deadline is the deadline: Greedy's test
    (Threshold(share=1.0), 200.0, True, ""),
    # static slack threshold: slack 1 < 1.5 rejects whatever the plan
    (Threshold(min_slack=1.5, share=None), 0.0, False, BELOW_SLACK),
    (Threshold(min_slack=1.0, share=None), 1e9, True, ""),       # 1 is not below 1; no plan test
    # chain: the first rejection wins (the slack test, before the plan is asked)
    (build("threshold,greedy", min_slack=2.0), 300.0, False, BELOW_SLACK),
    (build("threshold,greedy", min_slack=0.5, share=1.0), 300.0, False, MISSES_THRESHOLD),
])
def test_acceptance_table(policy, finish, accepted, reason):
    decision = policy.decide(J, View(finish))
    assert (decision.accepted, decision.reason) == (accepted, reason)


@pytest.mark.parametrize("policy", [Greedy(), Threshold(share=0.0), Threshold(min_slack=5.0, share=None)])
def test_jobs_without_deadline_are_accepted(policy):
    assert policy.decide(job("n", 0, 100), View(None)).accepted


# -- allocation rules on a prepared plan ------------------------------------------------------------
def planner_on(reservations, allocation, nodes=4, now=0.0):
    """A planner over ``nodes`` single-CPU nodes with (node, start, end) reservations."""
    profile = PlanProfile(np.tile(CPU, (nodes, 1)), now)
    for node, start, end in reservations:
        profile.reserve(start, end, np.array([node]), CPU)
    rule, backfill = parse_allocation(allocation)
    return Planner(ProfilePlan(profile), rule, backfill=backfill)


# Append view.  Tails (loads at now = 0): node 0: 0, node 1: 3, node 2: 5, node 3: 9.
TAILS = [(1, 0, 3), (2, 0, 5), (3, 0, 9)]


@pytest.mark.parametrize("allocation, deadline, start, nodes", [
    # least loaded pair {0, 1}: start max(0, 3) = 3
    ("balanced", 13, 3, [0, 1]),
    # d = 13, p = 4: latest start 9; the 2 largest tails <= 9 are 5 and 9 -> start 9, ends 13
    ("bestfit", 13, 9, [2, 3]),
    # d = 12: latest start 8; largest tails <= 8 are 3 and 5 -> start 5
    ("bestfit", 12, 5, [1, 2]),
    # no deadline: as early as possible (start 3), the most loaded pair free then
    ("bestfit", None, 3, [0, 1]),
    # deadline 6 cannot be met (earliest end 3 + 4 = 7): earliest start, as under AcceptAll
    ("bestfit", 6, 3, [0, 1]),
    # windows of 2 consecutive tails: {0,1} at 3 idles 3 + 0 = 3; {1,2} at 5 idles 2 + 0 = 2;
    # {2,3} at 9 idles 4 + 0 = 4  ->  {1, 2} at 5
    ("minidle", 13, 5, [1, 2]),
    ("firstfit", 13, 3, [0, 1]),
])
def test_append_rules(allocation, deadline, start, nodes):
    planner = planner_on(TAILS, allocation)
    request = Request(2, CPU, 4.0, None if deadline is None else float(deadline))
    assert planner.earliest_finish(request) == 7.0                  # 3 + 4
    placement = planner.place(request)
    assert (placement.start_s, placement.nodes.tolist()) == (start, nodes)
    # the fast exclusive-core planner makes the same choice from the same tails
    core = CorePlanner(4, parse_allocation(allocation)[0])
    for node, begin, end in TAILS:
        core.commit(request, type(placement)(begin, end, np.array([node])))
    fast = core.place(request)
    assert (fast.start_s, fast.nodes.tolist()) == (start, nodes)


# Backfill view.  Node 0 is free on [0, 6) and busy on [6, 10); node 1 busy [0, 3), node 2 [0, 5),
# node 3 [0, 9).  Tails: 10, 3, 5, 9.  A 2-node job of 3 s:
#   t = 0: only node 0 free over [0, 3)                                     -> 1 node, no
#   t = 3: node 0 ([3, 6) before its busy step) and node 1                 -> {0, 1}, tails 10 + 3 = 13
#   t = 5: node 0 no ([5, 8) hits 6); nodes 1, 2                            -> {1, 2}, 3 + 5 = 8
#   t = 9: nodes 1, 2, 3 (node 0 busy until 10)                             -> most loaded {2, 3}: 14
#   t = 10: all; most loaded {0, 3}: 19; least loaded {1, 2}: 8
GAPPY = [(0, 6, 10), (1, 0, 3), (2, 0, 5), (3, 0, 9)]


@pytest.mark.parametrize("allocation, deadline, start, nodes", [
    ("backfill", 20, 3, [0, 1]),                 # conservative backfilling: earliest, lowest nodes
    ("bestfit+backfill", 20, 10, [0, 3]),        # largest tail sum 19 at 10, ends 13 <= 20
    ("bestfit+backfill", 12, 9, [2, 3]),         # latest start 9: best is 14 at 9
    # enclosed idle added, sum of (t - T)^+: at 3, {0, 1}: (3 - 10)^+ + (3 - 3) = 0 -> earliest zero
    ("minidle+backfill", 20, 3, [0, 1]),
    ("balanced+backfill", 20, 5, [1, 2]),        # least tail sum 8, first at 5
    ("bestfit", 20, 10, [0, 3]),                 # append view: tails 3, 5, 9, 10 -> {3, 0} at 10
    ("balanced", 20, 5, [1, 2]),                 # append view: the two least loaded, at 5
])
def test_backfill_rules(allocation, deadline, start, nodes):
    planner = planner_on(GAPPY, allocation)
    placement = planner.place(Request(2, CPU, 3.0, float(deadline)))
    assert (placement.start_s, placement.nodes.tolist()) == (start, nodes)


def test_backfill_sees_an_earlier_finish_than_the_append_view():
    request = Request(2, CPU, 3.0, 7.0)
    assert planner_on(GAPPY, "backfill").earliest_finish(request) == 6.0    # at 3 in node 0's gap
    assert planner_on(GAPPY, "bestfit").earliest_finish(request) == 8.0     # after tails 3 and 5


# -- Greedy BestFit, the paper's Algorithm 1, through the replay ----------------------------------
def test_greedy_bestfit_algorithm_1_by_hand():
    # 3 single-core machines, exact runtimes.
    #  a r=0 p=10 d=100: loads 0,0,0 -> accept; every core ends it on time; most loaded: tie -> core 0
    #  b r=0 p=5  d=20 : least loaded ends at 5 <= 20 -> accept; core 0 (load 10) ends it at 15 <= 20
    #  c r=0 p=8  d=10 : core 0 would end at 23 > 10; cores 1, 2 (load 0) end at 8 -> core 1
    #  d r=1 p=9  d=9  : least loaded (core 2, load 0) ends at 10 > 9 -> reject
    #  e r=2 p=5  d=13 : loads 13, 6, 0: ends 20, 13, 7; most loaded on time: core 1, start 8
    jobs = [job("a", 0, 10, 100), job("b", 0, 5, 20), job("c", 0, 8, 10), job("d", 1, 9, 9), job("e", 2, 5, 13)]
    placed, rejected, result = run(jobs, Cluster.homogeneous(3, cpus=1))
    assert placed == {"a": (0.0, 10.0, (0,)), "b": (10.0, 15.0, (0,)), "c": (0.0, 8.0, (1,)),
                      "e": (8.0, 13.0, (1,))}
    assert rejected == {"d": ("greedy", MISSES_DEADLINE)}
    assert not any(r.deadline_missed for r in result.records)


def test_greedy_balanced_same_jobs():
    #  a -> core 0 [0, 10); b -> least loaded core 1 [0, 5); c -> core 2 [0, 8)
    #  d r=1: loads 9, 4, 7 -> least loaded ends at 1 + 4 + 9 = 14 > 9: reject
    #  e r=2: loads 8, 3, 6 -> core 1, start 5, ends 10
    jobs = [job("a", 0, 10, 100), job("b", 0, 5, 20), job("c", 0, 8, 10), job("d", 1, 9, 9), job("e", 2, 5, 13)]
    placed, rejected, _ = run(jobs, Cluster.homogeneous(3, cpus=1), allocation="balanced")
    assert placed == {"a": (0.0, 10.0, (0,)), "b": (0.0, 5.0, (1,)), "c": (0.0, 8.0, (2,)),
                      "e": (5.0, 10.0, (1,))}
    assert rejected == {"d": ("greedy", MISSES_DEADLINE)}


def test_accept_all_runs_everything_and_counts_misses():
    # one core: a [0, 10), then b (d = 12) can only run [10, 15): accepted anyway, misses by 3 s
    placed, rejected, result = run([job("a", 0, 10, 10), job("b", 0, 5, 12)], Cluster.homogeneous(1, cpus=1),
                                   acceptance="all")
    assert placed["b"][:2] == (10.0, 15.0) and not rejected
    assert [r.job_id for r in result.records if r.deadline_missed] == ["b"]


def test_threshold_keeps_capacity_for_later_jobs():
    # one core.  a (r=0, p=10, d=30, slack 2): threshold deadline 0 + 10 + 0.5 * 20 = 20, ends 10: in
    # b (r=0, p=10, d=30): earliest end 20 <= its threshold 20: in;  c (r=1, p=4, d=25): earliest end
    # 24 > threshold 1 + 4 + 0.5 * 20 = 15: out (greedy would take it: 24 <= 25)
    jobs = [job("a", 0, 10, 30), job("b", 0, 10, 30), job("c", 1, 4, 25)]
    _, rejected, _ = run(jobs, Cluster.homogeneous(1, cpus=1), acceptance="threshold")
    assert rejected == {"c": ("threshold", MISSES_THRESHOLD)}
    _, rejected, _ = run(jobs, Cluster.homogeneous(1, cpus=1), acceptance="greedy")
    assert rejected == {}


def test_early_end_moves_waiting_jobs_earlier_never_later():
    # a asks 10 s but runs 2; b (d = 30) was planned at [10, 20): after a ends at 2, b moves to 2
    jobs = [job("a", 0, 10, 50, runtime=2), job("b", 0, 10, 30)]
    placed, _, _ = run(jobs, Cluster.homogeneous(1, cpus=1))
    assert placed["b"][:2] == (2.0, 12.0)
    placed, _, _ = run(jobs, Cluster.homogeneous(1, cpus=1), compress=False)
    assert placed["b"][:2] == (10.0, 20.0)


# -- renewable power --------------------------------------------------------------------------------
# One node, 1 CPU, 100 W idle, 300 W busy: a job adds 200 W.  Supply 300 W on [10, 20), else 0.
# Renewable-only: headroom S - idle = 200 W on [10, 20), -100 W elsewhere.
GREEN_NODE = Cluster.homogeneous(1, cpus=1, idle_w=100.0, busy_w=300.0)
SUPPLY = SupplySeries(np.array([0.0, 10.0, 20.0]), np.array([0.0, 300.0, 0.0]))


def test_renewable_only_caps_power():
    #  a (d=30): first window of 5 s with 200 W headroom: [10, 15)
    #  b (d=30): [15, 20) (the node is free from 15 and the headroom is still 200 W there)
    #  c (d=100): after 20 the headroom is -100 W for ever: can never run
    #  e (r=0, p=2, d=11), submitted first: its earliest end is 10 + 2 = 12 > 11
    jobs = [job("e", 0, 2, 11), job("a", 0, 5, 30), job("b", 0, 5, 30), job("c", 0, 5, 100)]
    placed, rejected, result = run(jobs, GREEN_NODE, supply=SUPPLY, renewable="only")
    assert {k: v[:2] for k, v in placed.items()} == {"a": (10.0, 15.0), "b": (15.0, 20.0)}
    assert rejected == {"c": ("greedy", NEVER_FITS), "e": ("greedy", MISSES_DEADLINE)}
    # while a job runs the cluster draws idle 100 + 200 = 300 W = S
    busy = result.busy_cpus > 0
    assert (result.power_w[busy] <= SUPPLY.at(result.power_times_s[busy]) + 1e-9).all()


@pytest.mark.parametrize("deadline, start", [
    (30, 10.0),    # [10, 15) gives the job 200 W * 5 s of renewable power; [0, 5) gives none
    (12, 0.0),     # only [0, 5) ends by 12: the deadline wins over green
])
def test_green_placement_waits_for_the_sun_only_while_the_deadline_holds(deadline, start):
    placed, _, _ = run([job("a", 0, 5, deadline)], GREEN_NODE, supply=SUPPLY, renewable="green")
    assert placed["a"][0] == start
    placed, _, _ = run([job("a", 0, 5, deadline)], GREEN_NODE, supply=SUPPLY, renewable="grid")
    assert placed["a"][0] == 0.0


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="unknown allocation"):
        run([job("a", 0, 1)], GREEN_NODE, allocation="worstfit")
    with pytest.raises(ValueError, match="needs a supply"):
        run([job("a", 0, 1)], GREEN_NODE, renewable="only")
    with pytest.raises(ValueError, match="unknown acceptance"):
        run([job("a", 0, 1)], GREEN_NODE, acceptance="maybe")


def test_deadlines_from_a_sacct_export_are_used(tmp_path):
    # Two 1-CPU jobs on one 1-CPU node, 1 h limits.  a: deadline 2 h after submission: runs [0, 1 h).
    # b, submitted with a: its 1 h 30 min deadline needs it to start by 30 min, but the core is
    # planned busy until 1 h: rejected; the deadline came from the export, none was drawn.
    header = "JobID|Submit|Start|End|Elapsed|State|NCPUS|NNodes|Timelimit|Deadline"
    rows = ["1|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|01:00:00|COMPLETED|1|1|01:00:00|"
            "2024-03-01T12:00:00",
            "2|2024-03-01T10:00:00|2024-03-01T11:00:00|2024-03-01T12:00:00|01:00:00|COMPLETED|1|1|01:00:00|"
            "2024-03-01T11:30:00"]
    path = tmp_path / "jobs.txt"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    jobs = read_trace(str(path), "sacct").jobs
    assert [j.deadline_s - j.submit_s for j in jobs] == [7200.0, 5400.0]
    placed, rejected, _ = run(jobs, Cluster.homogeneous(1, cpus=1))
    assert list(placed) == ["1"] and rejected == {"2": ("greedy", MISSES_DEADLINE)}
