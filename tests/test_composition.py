"""Composition: every queue x node selection x power states x renewable mode x acceptance either
replays (with the machine's invariants) or fails at once with one clear line saying which
combination is not supported; and a property test over random small job sets."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpu_fixtures import small_workload
from greenslurm.allocation.selection import make_selection
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.clustermodel.gpu_state import GpuNodes
from greenslurm.clustermodel.renewable import SupplySeries, idle_power_w, solar_supply
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.power_states import PowerStateConfig, power_machine_factory

# A small GPU cluster as a cluster TOML file describes it: 4 nodes, 8 CPUs, 16 GB, 2 T4 GPUs each.
GPU4 = Cluster.from_toml_text('name = "gpu4"\n[[node_group]]\nname = "g"\ncount = 4\ncpus = 8\n'
                              'memory_mb = 16000\ngpus = 2\ngpu_model = "T4"\n')


def seeded_jobs(seed: int = 0, count: int = 50) -> list[JobSpec]:
    """CPU-only jobs, half-GPU shares, one and two whole GPUs, and two-node jobs; runtimes from 0
    (planned for no time is possible too: requested >= 10 s here) up to past the request (killed),
    deadlines 1 to 4 times the request after submission."""
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        kind = rng.choice(["cpu", "share", "whole", "two", "wide"])
        requested = float(rng.randint(10, 300))
        submit = float(rng.randint(0, 1500))
        spec = dict(cpus=rng.randint(1, 8))
        if kind == "share":
            spec = dict(cpus=rng.randint(1, 4), gpus_per_node=0.5)
        elif kind == "whole":
            spec["gpus_per_node"] = 1.0
        elif kind == "two":
            spec["gpus_per_node"] = 2.0
        elif kind == "wide":
            spec = dict(nodes=2, cpus=2 * rng.randint(1, 8), gpus_per_node=float(rng.choice([0, 1])))
        jobs.append(JobSpec(str(i), submit, requested, runtime_s=float(rng.randint(0, int(requested) + 50)),
                            memory_mb_per_node=float(rng.choice([0, 1000])),
                            deadline_s=submit + requested * (1 + 3 * rng.random()), **spec))
    return jobs


JOBS = seeded_jobs()
QUEUES = ["fcfs", "easy", "conservative", "deadline", "none"]
SELECTIONS = [None, "firstfit", "balanced", "bestfit+backfill", "minidle", "pwr", "fgd", "gpubestfit"]
RENEWABLE = ["grid", "green", "only"]
ACCEPTANCE = [None, "threshold,greedy"]
POWER = [False, True]

# The table: the first rule that matches a combination names its exact error; no rule: it runs.
# (Options are checked when the queue is built, power states when the machine joins the replay.)
NOT_SUPPORTED = [
    (lambda q, power, renewable, acceptance: q != "deadline" and acceptance is not None,
     "acceptance= is an option of the deadline queue (admission control and planning under a supply), "
     "not of the {queue} queue"),
    (lambda q, power, renewable, acceptance: q != "deadline" and renewable != "grid",
     "supply= is an option of the deadline queue (admission control and planning under a supply), "
     "not of the {queue} queue"),
]


def expected_error(queue, power, renewable, acceptance) -> str | None:
    for applies, message in NOT_SUPPORTED:
        if applies(queue, power, renewable, acceptance):
            return message.format(queue=queue)
    return None


def supply_for(renewable: str) -> SupplySeries:
    """"only" plans within the supply: a constant supply of the idle power plus 2 kW lets jobs run
    (a night at 0 W would reject them all); "green" weighs a solar day."""
    if renewable == "only":
        return SupplySeries(np.array([0.0]), np.array([idle_power_w(GPU4) + 2000.0]))
    return solar_supply(0.0, 4000.0, peak_w=3000.0, seed=1, step_s=300.0)


def build(queue, selection, power, renewable, acceptance, jobs=JOBS) -> Replay:
    options = {}
    if acceptance is not None:
        options["acceptance"] = acceptance
    if renewable != "grid":
        options.update(supply=supply_for(renewable), renewable=renewable)
    factory = power_machine_factory(PowerStateConfig(suspend_after_s=60.0, boot_s=30.0)) if power else None
    chosen = make_selection(selection, small_workload(), seed=0) if selection is not None else None
    return Replay(jobs, GPU4, queue, selection=chosen, strategy_options=options, machine_factory=factory)


def run_checked(replay: Replay):
    """Step by hand; the machine's invariants after every step (free = capacity - running demands,
    nothing below zero, every GPU's share within [0, 1000] milli)."""
    replay.begin()
    while len(replay.events):
        replay.step()
        replay.machine._check()
    return replay.close()


def assert_accounted(result, jobs_total: int) -> None:
    """Every job ran, or was rejected with a reason, or was counted as skipped; the energy adds up."""
    assert len(result.records) + len(result.rejected) + sum(result.skipped.values()) == jobs_total
    assert all(r.reason for r in result.rejected)
    ids = [r.job_id for r in result.records] + [r.job_id for r in result.rejected]
    assert len(ids) == len(set(ids))
    for record in result.records:
        assert record.start_s >= record.submit_s and record.end_s >= record.start_s
    e = result.energy
    assert e.jobs_j + e.unallocated_j == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    assert e.per_node_j.sum() == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    assert sum(r.energy_j for r in result.records) == pytest.approx(e.jobs_j, rel=1e-9, abs=1e-6)


COMBINATIONS = list(itertools.product(QUEUES, SELECTIONS, POWER, RENEWABLE, ACCEPTANCE))


@pytest.mark.parametrize("queue, selection, power, renewable, acceptance", COMBINATIONS,
                         ids=["-".join(map(str, c)) for c in COMBINATIONS])
def test_every_combination_runs_or_says_why_not(queue, selection, power, renewable, acceptance):
    error = expected_error(queue, power, renewable, acceptance)
    if error is not None:
        with pytest.raises(ValueError, match=f"^{re.escape(error)}$"):
            build(queue, selection, power, renewable, acceptance)
        return
    result = run_checked(build(queue, selection, power, renewable, acceptance))
    assert_accounted(result, len(JOBS))
    if queue in ("fcfs", "easy", "conservative"):
        assert not result.rejected and len(result.records) == len(JOBS)     # all fit the empty cluster
    if queue == "deadline":     # Greedy admits only what its plan ends by the deadline (boots counted)
        assert all(r.end_s <= r.deadline_s + 1e-6 for r in result.records)


def test_the_table_covers_runs_and_errors():
    """The table is not vacuous: of 480 combinations 160 run (fcfs, easy, conservative, none: 8 selections
    x power on/off; deadline: 8 x power on/off x 3 renewable modes x 2 acceptance chains)."""
    runs = [c for c in COMBINATIONS if expected_error(c[0], *c[2:]) is None]
    assert len(COMBINATIONS) == 5 * 8 * 2 * 3 * 2 == 480
    assert len(runs) == 4 * 8 * 2 + 8 * 2 * 3 * 2 == 160


# -- the deadline queue plans with the machine's node selection -----------------------------------
@pytest.mark.parametrize("rule", ["firstfit", "balanced", "bestfit", "minidle", "bestfit+backfill", "minidle+backfill"])
def test_deadline_queue_load_rule_selection_is_the_allocation_option(rule):
    """A Nileshwar & Schwiegelshohn load rule given as the node selection plans exactly as the same name given as the
    deadline queue's ``allocation`` option (its alias)."""
    by_selection = Replay(JOBS, GPU4, "deadline", selection=make_selection(rule)).run()
    by_option = Replay(JOBS, GPU4, "deadline", strategy_options={"allocation": rule}).run()
    assert by_selection.records == by_option.records and by_selection.rejected == by_option.rejected


def test_deadline_queue_without_selection_keeps_bestfit():
    plain = Replay(JOBS, GPU4, "deadline").run()
    bestfit = Replay(JOBS, GPU4, "deadline", strategy_options={"allocation": "bestfit"}).run()
    assert plain.records == bestfit.records


def test_deadline_queue_allocation_and_selection_must_agree():
    with pytest.raises(ValueError, match=r"^the deadline queue's allocation 'bestfit' and the node selection "
                                         r"'minidle' disagree; give only one of them$"):
        Replay(JOBS, GPU4, "deadline", selection=make_selection("minidle"), strategy_options={"allocation": "bestfit"})
    # the same rule twice, or the default first fit beside an allocation, is fine
    Replay(JOBS, GPU4, "deadline", selection=make_selection("minidle"), strategy_options={"allocation": "minidle"})
    Replay(JOBS, GPU4, "deadline", selection=make_selection("firstfit"), strategy_options={"allocation": "bestfit"})


def test_deadline_queue_gpu_scorer_ranks_the_nodes_that_fit_at_the_earliest_start():
    """Node 0: 16 CPUs, 2 T4; node 1: 4 CPUs, 1 T4.  A job of 2 CPUs and one whole GPU fits both at
    t=0.  The GPU papers' BestFit leaves the least weighted CPU and GPU: node 1 (2 CPUs, 0 GPUs left)
    against node 0 (14 CPUs, 1 GPU left).  First fit and Nileshwar & Schwiegelshohn's BestFit (both idle: equal tails,
    lower index) take node 0.  The deadline queue agrees with FCFS under each selection."""
    cluster = Cluster([NodeSpec("big", cpus=16, gpus=2, gpu_model="T4"),
                       NodeSpec("small", cpus=4, gpus=1, gpu_model="T4")])
    jobs = [JobSpec("a", 0.0, 100.0, runtime_s=50.0, cpus=2, gpus_per_node=1.0, deadline_s=500.0)]
    for selection, node in [("gpubestfit", 1), ("firstfit", 0), ("bestfit", 0), (None, 0)]:
        for queue in ("deadline", "fcfs"):
            chosen = make_selection(selection) if selection else None
            [record] = Replay(jobs, cluster, queue, selection=chosen).run().records
            assert (record.start_s, record.node_indices) == (0.0, (node,)), (queue, selection)


@pytest.mark.parametrize("queue", QUEUES)
def test_plans_keep_a_job_on_nodes_of_its_gpu_model(queue):
    """Node 0 has two T4, node 1 two V100.  Three jobs ask for V100: a (t=0, 1 GPU), b (t=1, 1 GPU),
    c (t=2, 2 GPUs), each 50 s of a 100 s request.  Only node 1 may host them: a and b share it from
    0 and 1; c needs both V100 and starts when a and b have ended, at 51 (place-or-fail rejects it).
    A plan that counted node 0's two free GPUs put c there and it never started."""
    cluster = Cluster([NodeSpec("t4", cpus=8, gpus=2, gpu_model="T4"), NodeSpec("v100", cpus=8, gpus=2, gpu_model="V100")])
    jobs = [JobSpec("a", 0.0, 100.0, runtime_s=50.0, cpus=2, gpus_per_node=1.0, gpu_model="V100"),
            JobSpec("b", 1.0, 100.0, runtime_s=50.0, cpus=2, gpus_per_node=1.0, gpu_model="V100"),
            JobSpec("c", 2.0, 100.0, runtime_s=50.0, cpus=2, gpus_per_node=2.0, gpu_model="V100")]
    result = run_checked(Replay(jobs, cluster, queue))
    started = {r.job_id: (r.start_s, r.node_indices) for r in result.records}
    expected = {"a": (0.0, (1,)), "b": (1.0, (1,)), "c": (51.0, (1,))}
    if queue == "none":
        del expected["c"]
        assert [r.job_id for r in result.rejected] == ["c"]
    assert started == expected


def test_easy_reserves_the_head_on_nodes_of_its_gpu_model():
    """Node 0: 8 CPUs, two T4; node 1: 8 CPUs, two V100.
      X t=0 1 CPU, both V100, 100 s      -> node 1 [0, 100)
      Y t=0 1 CPU, both T4, 50 s         -> node 0 [0, 50)
      H t=1 8 CPUs on one node, both V100, 10 s: the head; only node 1 can hold it, when X ends:
            shadow time 100 on node 1, nothing of node 1 left beyond it (8 - 8 CPUs)
      B t=2 4 CPUs, 200 s, no GPU: ends at 202 > 100, so it may only use what H leaves: node 0
            (free at the shadow time once Y has ended).  B [2, 202) on node 0, H [100, 110).
    A shadow that counted node 0's two free GPUs at 50 put B on node 1 and H waited until 202."""
    cluster = Cluster([NodeSpec("t4", cpus=8, gpus=2, gpu_model="T4"), NodeSpec("v100", cpus=8, gpus=2, gpu_model="V100")])
    jobs = [JobSpec("X", 0.0, 100.0, runtime_s=100.0, cpus=1, gpus_per_node=2.0, gpu_model="V100"),
            JobSpec("Y", 0.0, 50.0, runtime_s=50.0, cpus=1, gpus_per_node=2.0, gpu_model="T4"),
            JobSpec("H", 1.0, 10.0, runtime_s=10.0, cpus=8, nodes=1, gpus_per_node=2.0, gpu_model="V100"),
            JobSpec("B", 2.0, 200.0, runtime_s=200.0, cpus=4, nodes=1)]
    replay = Replay(jobs, cluster, "easy", strategy_options={"record_reservations": True}, keep_jobs=True)
    result = run_checked(replay)
    assert {r.job_id: (r.start_s, r.node_indices) for r in result.records} == {
        "X": (0.0, (1,)), "Y": (0.0, (0,)), "H": (100.0, (1,)), "B": (2.0, (0,))}
    assert next(p for p in replay.pending if p.job.job_id == "H").first_reservation_s == 100.0


def test_a_queue_refuses_options_it_does_not_take():
    with pytest.raises(ValueError, match=r"^the easy queue has no option 'shadow'; it takes record_reservations, "
                                         r"count_processors$"):
        Replay(JOBS, GPU4, "easy", strategy_options={"shadow": 1})
    with pytest.raises(ValueError, match=r"^the deadline queue has no option 'skip_blocked'"):
        Replay(JOBS, GPU4, "deadline", strategy_options={"skip_blocked": True})


# -- property: any queue x selection keeps the invariants -----------------------------------------
@st.composite
def gpu_workloads(draw):
    nodes = draw(st.integers(1, 4))
    cluster = Cluster([NodeSpec(f"n{i}", cpus=draw(st.integers(2, 8)), memory_mb=4000, gpus=draw(st.integers(0, 2)),
                                gpu_model=draw(st.sampled_from(["T4", "V100"]))) for i in range(nodes)])
    if cluster.total_gpus == 0:       # the GPU scorers need GPUs somewhere
        cluster = Cluster([*cluster.nodes, NodeSpec("g", cpus=4, memory_mb=4000, gpus=1, gpu_model="T4")])
    jobs = []
    for i in range(draw(st.integers(1, 15))):
        requested = float(draw(st.integers(0, 40)))
        submit = float(draw(st.integers(0, 60)))
        jobs.append(JobSpec(
            str(i), submit, requested, runtime_s=float(draw(st.integers(0, 50))), cpus=draw(st.integers(1, 10)),
            nodes=draw(st.integers(0, 2)), memory_mb_per_node=float(draw(st.sampled_from([0, 1000]))),
            gpus_per_node=draw(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 2.0])),
            gpu_model=draw(st.sampled_from([None, None, "T4", "V100"])),
            deadline_s=draw(st.one_of(st.none(), st.just(submit + 2 * requested + 5)))))
    return cluster, jobs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_workloads(), st.sampled_from(QUEUES),
       st.sampled_from(["firstfit", "balanced", "bestfit+backfill", "minidle", "pwr", "gpubestfit", "fgd"]))
def test_any_queue_and_selection_keep_the_invariants(workload, queue, selection):
    cluster, jobs = workload
    # FGD's target workload names the cluster's GPU models, in the cluster's order
    models = GpuNodes.from_cluster(cluster).models
    replay = Replay(jobs, cluster, queue, selection=make_selection(selection, small_workload(models), seed=0))
    result = run_checked(replay)
    assert_accounted(result, len(jobs))
    # the ledger's energy identity over time, too: the power series integrates to the total
    e = result.energy
    edges = np.append(result.power_times_s, e.end_s)
    assert np.dot(result.power_w, np.diff(edges)) == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    for record in result.records:
        job = next(j for j in jobs if j.job_id == record.job_id)
        assert record.end_s - record.start_s == pytest.approx(job.run_for_s)
