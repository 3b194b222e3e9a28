"""GPU co-location of training jobs (EaCO) on the engine: exact small cases with the
arithmetic in comments, and hypothesis invariants checked at every step of the replay."""

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.colocation import (COLOCATION_POLICIES, MODELS, NODE_STATIC_W, Candidate,
                                              ColocationSettings, EaCO, History, Interference, JobView)
from greenslurm.clustermodel import InputError
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.colocation import build_colocation
from greenslurm.sim.machines.training_jobs import colocation_cluster, dlt_jobs_from_specs, synthetic_dlt_jobs, training_job
from greenslurm.sim.studies.colocation_runs import colocation_replay, colocation_result, simulate

H = 3600.0
EPOCH = 0.39 * H          # AlexNet and ResNet-18 epoch (Table 1)
CALM = Interference(jitter=0.0, mix_noise=0.0)
S = NODE_STATIC_W         # 688.47 W: Table 1 power against GPU utilisation, at 0 %
J1J3 = 36.63 / ((34.76 + 36.01) / 2)       # AlexNet & ResNet-50, Table 3: 1.035184
J1J4 = 36.51 / ((34.76 + 36.13) / 2)       # AlexNet & VGG-16: 1.030047


@dataclass(frozen=True)
class Harsh(Interference):
    """Co-location really costs 1.5x, far above any prior for two jobs."""

    def true_slowdown(self, mix):
        return 1.5 if len(mix) > 1 else 1.0


def runs_by_id(replay):
    return {run.job_id: run for run in replay.machine.runs.values()}


@pytest.mark.parametrize("policy, ends", [
    # AlexNet and ResNet-50, 1 GPU and 1 epoch each, one node.  Alone: 1404 s and 1440 s.
    ("fifo", (1404.0, 1440.0)),
    # FIFO packed and Gandiva pack only when nothing is free: the same as FIFO here.
    ("fifo-packed", (1404.0, 1440.0)),
    ("gandiva", (1404.0, 1440.0)),
    # EaCO shares one GPU (Table 3, J1&J3): AlexNet ends at 1404 x 1.035184 = 1453.40 s; ResNet-50 has
    # then done 1404 s of 1440 s and runs 36 s alone: 1489.40 s.
    ("eaco", (1404.0 * J1J3, 1404.0 * J1J3 + 36.0)),
])
def test_measured_mix_exact_under_both_accountings(policy, ends):
    jobs = [training_job("r", 0.0, "resnet50", 1, 1), training_job("a", 0.0, "alexnet", 1, 1)]
    jobs_acc = simulate(jobs, 1, policy, interference=CALM, accounting="jobs")
    nodes_acc = simulate(jobs, 1, policy, interference=CALM)
    end_a, end_r = ends
    for result in (jobs_acc, nodes_acc):
        assert result.avg_jct_s == pytest.approx((end_a + end_r) / 2)
    if policy == "eaco":
        # jobs: the shared GPU draws 1390 / 8 = 173.75 W, then ResNet-50 1330 / 8 = 166.25 W for 36 s.
        assert jobs_acc.energy_j == pytest.approx(173.75 * end_a + 166.25 * 36.0)
        # active nodes: the node's static S all along, the set (1390 - S) / 8, then (1330 - S) / 8.
        assert nodes_acc.energy_j == pytest.approx(S * end_r + (1390 - S) / 8 * end_a + (1330 - S) / 8 * 36.0)
    else:
        # jobs: 712 / 8 = 89 W for 1404 s and 166.25 W for 1440 s: 364,356 J.
        assert jobs_acc.energy_j == pytest.approx(364356.0)
        assert nodes_acc.energy_j == pytest.approx(S * 1440 + (712 - S) / 8 * 1404 + (1330 - S) / 8 * 1440)
    for result in (jobs_acc, nodes_acc):
        assert result.energy_j == pytest.approx(result.jobs_energy_j + result.static_energy_j + result.idle_energy_j)
    assert jobs_acc.static_energy_j == 0.0 and nodes_acc.static_energy_j == pytest.approx(S * end_r)


def test_active_node_accounting_counts_the_nodes_co_location_frees():
    # ResNet-50 and AlexNet on 8 GPUs, 1 epoch each, two nodes.  FIFO: a node each, static S for
    # 1440 s and 1404 s; the sets add (1330 - S) and (712 - S): the node powers of Table 1.
    # EaCO: one node, 1390 W until 1453.40 s, then 1330 W for 36 s; the other node stays off (0 W).
    jobs = [training_job("r", 0.0, "resnet50", 8, 1), training_job("a", 0.0, "alexnet", 8, 1)]
    fifo = simulate(jobs, 2, "fifo", interference=CALM)
    eaco = simulate(jobs, 2, "eaco", interference=CALM)
    assert fifo.energy_j == pytest.approx(1330 * 1440 + 712 * 1404)             # 2,914,848 J
    assert fifo.static_energy_j == pytest.approx(S * (1440 + 1404))
    assert eaco.energy_j == pytest.approx(1390 * 1404 * J1J3 + 1330 * 36)       # 2,068,106 J: -29 %
    assert fifo.mean_active_nodes == pytest.approx((2 * 1404 + 36) / 1440)
    assert eaco.mean_active_nodes == pytest.approx(1.0)
    # the idle node draws idle_node_w under both accountings: FIFO's second node idles 36 s
    idle = simulate(jobs, 2, "fifo", interference=CALM, idle_node_w=100.0)
    assert idle.idle_energy_j == pytest.approx(100.0 * 36) and idle.energy_j == pytest.approx(fifo.energy_j + 3600)


def test_scenario_api_gives_the_same_result():
    # The pieces a scenario plugs into the engine: the same run as simulate().
    jobs = [training_job("r", 0.0, "resnet50", 1, 1), training_job("a", 0.0, "alexnet", 1, 1)]
    factory, selection = build_colocation("eaco", interference=CALM)
    run = Replay(jobs, colocation_cluster(1), "fcfs", selection=selection, machine_factory=factory)
    run.run()
    result = colocation_result(run)
    assert result.avg_jct_s == pytest.approx(1404 * J1J3 + 18) and result.colocated_starts == 1
    assert sorted(r.end_s for r in run.records) == pytest.approx([1404 * J1J3, 1404 * J1J3 + 36])


def test_mixed_set_rates_and_energy_split():
    # VGG-16 (1533 W, epoch 1440 s) and AlexNet (712 W, 1404 s), one epoch each on 1 GPU, jobs
    # accounting.  EaCO puts AlexNet on VGG-16's set (48 % < 80 %, memory 51.29 + 4.21 % fits): Table 3
    # J1&J4, both at 1 / 1.030047, the set at 1506 / 8 = 188.25 W (less than VGG-16 alone).  AlexNet
    # ends at 1404 x 1.030047 = 1446.19 s; VGG-16 has done 1404 s and runs 36 s alone at 191.625 W.
    jobs = [training_job("v", 0.0, "vgg16", 1, 1), training_job("a", 0.0, "alexnet", 1, 1)]
    run = colocation_replay(jobs, 1, "eaco", interference=CALM, accounting="jobs")
    run.run()
    result = colocation_result(run)
    ends = {r.job_id: r.end_s for r in run.records}
    shared_s = 1404 * J1J4
    assert ends["a"] == pytest.approx(shared_s) and ends["v"] == pytest.approx(shared_s + 36)
    energy = {job_id: e for job_id, _, _, _, e, _ in result.per_job}
    shared_j = 188.25 * shared_s                   # split by model power (712 + 1533 = 2245)
    assert energy["a"] == pytest.approx(shared_j * 712 / 2245)
    assert energy["v"] == pytest.approx(shared_j * 1533 / 2245 + 191.625 * 36)
    assert result.energy_j == pytest.approx(shared_j + 191.625 * 36)
    # where the JCT went: AlexNet 1446.19 s on a set of 2 (1404 s of work), VGG-16 the same plus 36 s alone
    assert result.time_in[2] == pytest.approx(2 * shared_s) and result.work_in[2] == pytest.approx(2 * 1404)
    assert result.added_jct_by_state()[2] == pytest.approx(2 * (shared_s - 1404) / (1404 + 1440))


def test_fifo_packed_packs_only_when_full():
    # Nine 1-GPU jobs on one 8-GPU node: FIFO makes the ninth wait 2 epochs (0.78 h); FIFO packed
    # puts it on GPU 0 with the first job (fewest jobs), so nobody waits.
    jobs = [training_job(str(i), 0.0, "alexnet", 1, 2) for i in range(9)]
    fifo = simulate(jobs, 1, "fifo", interference=CALM)
    packed = simulate(jobs, 1, "fifo-packed", interference=CALM)
    assert fifo.avg_wait_s == pytest.approx(0.78 * H / 9)
    assert packed.avg_wait_s == 0.0 and packed.colocated_starts == 1


def test_gandiva_does_not_block_behind_the_head_fifo_packed_does():
    # One node.  v: VGG-16 on GPUs 0-3, 2 epochs (0.8 h).  w: AlexNet on 8 GPUs: no free 8-block,
    # no 8-GPU set to share or time-slice: waits.  c: AlexNet on 1 GPU, 2 epochs (0.78 h).
    # Gandiva tries c behind the waiting w: GPU 4 is free, c starts at 0; w starts when both are done
    # (0.8 h).  FIFO packed is strict: c waits behind w, which starts at 0.8 h and holds the whole node
    # for 0.78 h; c starts at 1.58 h.
    jobs = [training_job("v", 0.0, "vgg16", 4, 2), training_job("w", 0.0, "alexnet", 8, 2),
            training_job("c", 0.0, "alexnet", 1, 2)]
    starts = {}
    for policy in ("gandiva", "fifo-packed"):
        run = colocation_replay(jobs, 1, policy, interference=CALM)
        run.run()
        starts[policy] = {r.job_id: r.start_s for r in run.records}
    assert starts["gandiva"]["c"] == 0.0 and starts["gandiva"]["w"] == pytest.approx(0.8 * H)
    assert starts["fifo-packed"]["w"] == pytest.approx(0.8 * H)
    assert starts["fifo-packed"]["c"] == pytest.approx(1.58 * H)


def test_eaco_undoes_at_an_epoch_boundary_and_loses_nothing():
    # A (no deadline) and B (deadline 1.8 h), AlexNet, 4 epochs of 0.39 h, at t = 0.  The prior (the
    # fitted model, AlexNet x 2: 1.0215) predicts 4 x 0.39 x 1.0215 = 1.594 h <= 1.8 h: EaCO shares
    # A's GPU.  The true slowdown is 1.5: B's first epoch ends at 0.585 h; the history learns 1.5 and
    # predicts B at 0.585 + 3 x 0.39 x 1.40 > 1.8 h: B leaves at that boundary and runs alone on a free
    # GPU: 0.585 + 1.17 = 1.755 h.  A runs alone again from 0.585 h too: 1 epoch done, 3 left: 1.755 h.
    jobs = [training_job("a", 0.0, "alexnet", 1, 4), training_job("b", 0.0, "alexnet", 1, 4, deadline_s=1.8 * H)]
    run = colocation_replay(jobs, 1, "eaco", interference=Harsh(jitter=0.0, mix_noise=0.0))
    run.run()
    result = colocation_result(run)
    assert result.undone == 1 and result.deadline_misses == 0
    ends = {job_id: end for job_id, _, _, end, _, _ in result.per_job}
    assert ends["b"] == pytest.approx(1.755 * H) and ends["a"] == pytest.approx(1.755 * H)
    runs = runs_by_id(run)
    assert runs["b"].epochs_run == 4 and runs["a"].epochs_run == 4
    assert runs["b"].set_key is None and runs["b"].undone == 1
    # One observation, 1.5 (B's stable first epoch): r = 0.5 / 0.0215 - 1 = 22.26, w_alexnet =
    # 22.26 / (1 + 1) = 11.13, model 1 + 0.0215 x 12.13 = 1.2608; blended with the mix's own mean:
    # (1.5 + 1.2608) / 2 = 1.3804.
    history = run.machine.history
    assert history.observations == 1
    e = CALM.prior(("alexnet", "alexnet")) - 1
    model = 1 + e * (1 + (0.5 / e - 1) / 2)
    assert history.predict(("alexnet", "alexnet")) == pytest.approx((1.5 + model) / 2)
    # the engine's record: B's first start stays 0 (JCT counts the undo), its end at 1.755 h
    record = {r.job_id: r for r in run.records}["b"]
    assert record.start_s == 0.0 and record.end_s == pytest.approx(1.755 * H)


@dataclass(frozen=True)
class Mild(Interference):
    """Two jobs really cost only 1 %; three what the prior says."""

    def true_slowdown(self, mix):
        return 1.01 if len(mix) == 2 else self.prior(mix)


def test_eaco_reexamines_waiting_jobs_only_when_something_changes():
    # One node, AlexNet on all 8 GPUs, 3 epochs each (e = 1404 s), all at t = 0.  A (deadline 3.1 e)
    # takes the free set; B (no deadline) shares it: A's prediction 3 e x 1.0215 = 3.065 e <= 3.1 e.
    # C would make three: 3 e x 1.0444 = 3.133 e > 3.1 e, and no set is free: C waits.  At A's first
    # epoch end (1.01 e) a fresh look would admit C (the history has learned that pairs cost 1 %), but
    # an epoch end changes nothing in the machine: C is looked at again when A and B end, at
    # 3 e x 1.01 = 4254.12 s, and runs alone: 4254.12 + 3 x 1404 = 8466.12 s.
    e = EPOCH
    jobs = [training_job("a", 0.0, "alexnet", 8, 3, deadline_s=3.1 * e), training_job("b", 0.0, "alexnet", 8, 3),
            training_job("c", 0.0, "alexnet", 8, 3)]
    run = colocation_replay(jobs, 1, "eaco", interference=Mild(jitter=0.0, mix_noise=0.0))
    run.run()
    records = {r.job_id: r for r in run.records}
    assert records["c"].start_s == pytest.approx(4254.12) and records["c"].end_s == pytest.approx(8466.12)
    assert records["a"].end_s == pytest.approx(4254.12) and colocation_result(run).colocated_starts == 1


@pytest.mark.parametrize("mix, deadline_h, keeps", [
    # remaining 10 epochs of 0.4 h (ResNet-50) with AlexNet (Table 3 J1&J3, 1.035184): 4.1407 h
    (("alexnet", "resnet50"), 4.15, True),
    (("alexnet", "resnet50"), 4.13, False),
    # three jobs measured (J1&J2&J3: 38.28 / 35.30 = 1.084419): 4.3377 h
    (("alexnet", "resnet18", "resnet50"), 4.34, True),
    (("alexnet", "resnet18", "resnet50"), 4.33, False),
    # not measured: the fitted model, 1 + 0.0210 + 0.0597 x 0.8462^2 = 1.0637: 4.2549 h
    (("resnet50", "vgg16"), 4.26, True),
    (("resnet50", "vgg16"), 4.25, False),
])
def test_deadline_prediction_table(mix, deadline_h, keeps):
    eaco = EaCO(ColocationSettings(), History(CALM))
    job = JobView("j", MODELS["resnet50"], 8, 10, deadline_h * H)
    assert eaco.keeps_deadlines([job], mix, 0.0) is keeps


def test_eaco_thresholds_filter_candidates():
    # VGG-16 (48 % util, 51.29 % memory) + ResNet-50 (36.61 %, 43.92 %): not measured together, util
    # 84.6 % >= 80 %: not shareable; memory 95.21 % + AlexNet 4.21 % = 99.42 % would fit, but the
    # utilisation rule excludes the set.
    busy = Candidate(0, 0, 8, (JobView("x", MODELS["vgg16"], 8, 5, math.inf),
                               JobView("y", MODELS["resnet50"], 8, 5, math.inf)), True)
    free = Candidate(1, 0, 8, (), False)
    eaco = EaCO(ColocationSettings(), History(CALM))
    job = JobView("z", MODELS["alexnet"], 8, 5, math.inf)
    assert busy.util_pct == pytest.approx(84.62)
    assert eaco.choose(job, [busy, free], 0.0) is free
    lone = Candidate(0, 0, 8, (JobView("x", MODELS["vgg16"], 8, 5, math.inf),), True)
    assert eaco.choose(job, [lone, free], 0.0) is lone      # 48 % < 80 %, memory 55.5 % fits
    # a measured mix is seen at its Table 4 utilisation: AlexNet & ResNet-18 & VGG-16 66.99 % (sum 63.9 %)
    trio = Candidate(0, 0, 8, tuple(JobView(n, MODELS[n], 8, 5, math.inf) for n in ("alexnet", "resnet18", "vgg16")),
                     True)
    assert trio.util_pct == 66.99


def test_bad_input_is_an_input_error():
    with pytest.raises(InputError, match="gpus must be 1, 2, 4 or 8"):
        training_job("x", 0.0, "alexnet", 3, 2)
    with pytest.raises(InputError, match="unknown model"):
        training_job("x", 0.0, "bert", 1, 2)
    with pytest.raises(InputError, match="unknown co-location policy"):
        build_colocation("tetris")
    with pytest.raises(InputError, match="unknown power accounting"):
        build_colocation("eaco", accounting="watts")
    factory, selection = build_colocation("eaco")
    with pytest.raises(ValueError, match="fcfs queue"):
        Replay([training_job("a", 0.0, "alexnet", 1, 1)], colocation_cluster(1), "easy", selection=selection,
               machine_factory=factory)


@st.composite
def workloads(draw):
    nodes = draw(st.integers(1, 3))
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(1, 14))):
        t += draw(st.sampled_from([0.0, 600.0, 3000.0]))
        model = draw(st.sampled_from(sorted(MODELS)))
        epochs = draw(st.integers(1, 5))
        deadline = draw(st.one_of(st.just(math.inf), st.floats(1.0, 3.0)))
        if math.isfinite(deadline):
            deadline = t + deadline * epochs * MODELS[model].epoch_s
        jobs.append(training_job(str(i), t, model, draw(st.sampled_from([1, 2, 4, 8])), epochs, deadline))
    interference = Interference(jitter=draw(st.sampled_from([0.0, 0.5, 3.0])), seed=draw(st.integers(0, 3)))
    return jobs, nodes, draw(st.sampled_from(sorted(COLOCATION_POLICIES))), interference, \
        draw(st.sampled_from([0.0, 250.0])), draw(st.integers(2, 4)), draw(st.sampled_from(["active-nodes", "jobs"])), \
        draw(st.sampled_from([30.0, 2000.0]))


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_invariants_at_every_step(case):
    jobs, nodes, policy, interference, idle_w, max_jobs, accounting, migration_s = case
    run = colocation_replay(jobs, nodes, policy, interference=interference, accounting=accounting,
                            settings=ColocationSettings(max_jobs=max_jobs, migration_s=migration_s), idle_node_w=idle_w)
    machine = run.machine
    run.begin()
    done = {}
    while len(run.events):
        run.step()
        machine._check()        # no set over max_jobs or memory (unless time-sliced); rates; power
        run.events._check()
        now = run.now_s
        for run_state in machine.runs.values():
            index = run_state.job.index
            assert run_state.epochs_done >= done.get(index, 0)      # an undo or a move never loses an epoch
            done[index] = run_state.epochs_done
            if index in machine.running:
                # the engine's progress lies within the current epoch
                left = run_state.work_left_s(now) / run_state.model.epoch_s
                undone_epochs = run_state.epochs - run_state.epochs_done
                assert undone_epochs - 1 - 1e-9 <= left <= undone_epochs + 1e-9
        if policy == "fifo":
            assert all(len(members) == 1 for members in machine.sets.values())
        if not policy.startswith("gandiva"):
            assert not machine.sliced
    run.close()
    result = colocation_result(run)
    assert result.jobs == len(jobs) == len(run.records)         # every job ends
    for run_state in machine.runs.values():
        assert run_state.epochs_run == run_state.epochs_done == run_state.epochs
        jct = run_state.end_s - run_state.job.start_s
        # never faster than alone; the JCT is the sum of the times in each state, the training the work
        assert jct >= run_state.epochs * run_state.model.epoch_s - 1e-6
        assert sum(run_state.time_in.values()) == pytest.approx(jct, abs=1e-6)
        assert sum(run_state.work_in.values()) == pytest.approx(run_state.epochs * run_state.model.epoch_s, abs=1e-6)
    assert result.energy_j == pytest.approx(result.jobs_energy_j + result.static_energy_j + result.idle_energy_j,
                                            rel=1e-9, abs=1e-6)
    assert sum(result.added_jct_by_state().values()) == pytest.approx(
        result.avg_jct_s * result.jobs / result.exclusive_s - 1, abs=1e-9)
    if policy != "eaco":
        assert result.undone == 0
    if policy != "gandiva":
        assert result.migrations == 0


def test_synthetic_workload_is_seeded_and_sane():
    jobs = synthetic_dlt_jobs(50, seed=3)
    assert jobs == synthetic_dlt_jobs(50, seed=3)
    assert all(j.gpus_per_node in (1, 2, 4, 8) and j.model in MODELS and j.nodes == 1 for j in jobs)
    assert all(j.deadline_s is None or j.deadline_s > j.submit_s for j in jobs)
    assert all(j.runtime_s == j.epochs * MODELS[j.model].epoch_s for j in jobs)


def test_synthetic_workload_matches_the_bench_seed():
    # The bench's workload is the one the old separate simulation generated (seed 0): same draws.
    first = synthetic_dlt_jobs(600, seed=0)[:3]
    assert [(j.job_id, j.submit_s, j.model, j.gpus_per_node, j.epochs, round(j.deadline_s, 3)) for j in first] == [
        ("dlt0", 1116.364, "vgg16", 1, 75, 309221.118), ("dlt1", 2179.019, "vgg16", 1, 37, 93144.396),
        ("dlt2", 3024.89, "resnet50", 8, 78, 301615.37)]


def test_trace_jobs_become_training_jobs():
    # 3 GPUs round up to a set of 4; 10,000 s of runtime on a model drawn by the seed; no deadline.
    from greenslurm.clustermodel import JobSpec
    jobs = dlt_jobs_from_specs([JobSpec("t1", 5.0, 2e4, runtime_s=1e4, nodes=1, gpus_per_node=3),
                                JobSpec("t2", 6.0, math.inf)], seed=0)
    assert len(jobs) == 1                      # t2 has no finite runtime
    job = jobs[0]
    assert (job.job_id, job.submit_s, job.gpus_per_node, job.deadline_s) == ("t1", 5.0, 4, None)
    epoch_s = MODELS[job.model].epoch_s
    assert job.epochs == round(1e4 / epoch_s) and job.runtime_s == job.epochs * epoch_s
