"""GPU co-location of training jobs (EaCO) on the engine: exact small cases with the
arithmetic in comments, and hypothesis invariants checked at every step of the replay."""

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.colocation import (COLOCATION_POLICIES, MODELS, Candidate, ColocationSettings, EaCO, History,
                                              Interference, JobView)
from greenslurm.clustermodel import InputError
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.colocation import (build_colocation, colocation_cluster, colocation_replay,
                                                colocation_result, dlt_jobs_from_specs, simulate, synthetic_dlt_jobs,
                                                training_job)

H = 3600.0
EPOCH = 0.39 * H          # AlexNet and ResNet-18 epoch (Table 1)
CALM = Interference(jitter=0.0)


@dataclass(frozen=True)
class Harsh(Interference):
    """Co-location really costs 1.5x, far above the prior of 1.04 for two jobs."""

    def true_slowdown(self, mix):
        return 1.5 if len(mix) > 1 else 1.0


def runs_by_id(replay):
    return {run.job_id: run for run in replay.machine.runs.values()}


@pytest.mark.parametrize("policy, jct_h, energy_kwh", [
    # two AlexNet jobs, 1 GPU, 2 epochs each, one node.  Alone: 2 * 0.39 h = 0.78 h at 712/8 = 89 W
    # each: 2 * 89 * 0.78 = 138.84 Wh.
    ("fifo", 0.78, 0.13884),
    # FIFO packed and Gandiva pack only when nothing is free: the same as FIFO here.
    ("fifo-packed", 0.78, 0.13884),
    ("gandiva", 0.78, 0.13884),
    # EaCO shares one GPU: 0.78 * 1.04 = 0.8112 h at (712 + 0.1 * 712) / 8 = 97.9 W: 79.41 Wh.
    ("eaco", 0.8112, 0.0794165),
])
def test_two_alexnets_exact(policy, jct_h, energy_kwh):
    jobs = [training_job("a", 0.0, "alexnet", 1, 2), training_job("b", 0.0, "alexnet", 1, 2)]
    result = simulate(jobs, 1, policy, interference=CALM)
    assert result.avg_jct_s == pytest.approx(jct_h * H)
    assert result.energy_j == pytest.approx(energy_kwh * 3.6e6)
    assert result.energy_j == pytest.approx(result.jobs_energy_j + result.idle_energy_j)


def test_scenario_api_gives_the_same_result():
    # The pieces a scenario plugs into the engine: the same run as simulate().
    jobs = [training_job("a", 0.0, "alexnet", 1, 2), training_job("b", 0.0, "alexnet", 1, 2)]
    factory, selection = build_colocation("eaco", interference=CALM)
    run = Replay(jobs, colocation_cluster(1), "fcfs", selection=selection, machine_factory=factory)
    run.run()
    result = colocation_result(run)
    assert result.avg_jct_s == pytest.approx(0.8112 * H) and result.colocated_starts == 1
    assert [r.end_s for r in run.records] == pytest.approx([0.8112 * H] * 2)


def test_mixed_set_rates_and_energy_split():
    # VGG-16 (1533 W, epoch 0.40 h = 1440 s) and AlexNet (712 W, 1404 s), one epoch each on 1 GPU.
    # EaCO puts AlexNet on VGG-16's set (utilisation 48 % < 80 %, memory 51.29 + 4.21 % fits): both
    # run at 1 / 1.04.  Set power (1533 + 0.1 * 712) / 8 = 200.525 W.  AlexNet ends at 1404 * 1.04
    # = 1460.16 s; VGG-16 has done 1460.16 / 1.04 = 1404 s of its 1440 s and runs the last 36 s
    # alone (rate 1) at 1533 / 8 = 191.625 W: ends at 1496.16 s.
    jobs = [training_job("v", 0.0, "vgg16", 1, 1), training_job("a", 0.0, "alexnet", 1, 1)]
    run = colocation_replay(jobs, 1, "eaco", interference=CALM)
    run.run()
    result = colocation_result(run)
    ends = {r.job_id: r.end_s for r in run.records}
    assert ends["a"] == pytest.approx(1460.16) and ends["v"] == pytest.approx(1496.16)
    energy = {job_id: e for job_id, _, _, _, e, _ in result.per_job}
    shared_j = 200.525 * 1460.16                    # 292,798.58 J, split by model power (712 + 1533 = 2245)
    assert energy["a"] == pytest.approx(shared_j * 712 / 2245)
    assert energy["v"] == pytest.approx(shared_j * 1533 / 2245 + 191.625 * 36)
    assert result.energy_j == pytest.approx(shared_j + 191.625 * 36)


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
    # no 8-GPU set to share: waits.  c: AlexNet on 1 GPU, 2 epochs (0.78 h).
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
    # A (no deadline) and B (deadline 1.8 h), AlexNet, 4 epochs of 0.39 h, at t = 0.  The prior
    # predicts 4 * 0.39 * 1.04 = 1.6224 h <= 1.8 h: EaCO shares A's GPU.  The true slowdown is 1.5:
    # B's first epoch ends at 0.585 h; the history learns 1.5 and predicts 0.585 + 3 * 0.39 * 1.5
    # = 2.34 h > 1.8 h: B leaves at that boundary and runs alone on a free GPU: 0.585 + 1.17 = 1.755 h.
    # A runs alone again from 0.585 h too: 1 epoch done, 3 left: also 1.755 h.
    jobs = [training_job("a", 0.0, "alexnet", 1, 4), training_job("b", 0.0, "alexnet", 1, 4, deadline_s=1.8 * H)]
    run = colocation_replay(jobs, 1, "eaco", interference=Harsh())
    run.run()
    result = colocation_result(run)
    assert result.undone == 1 and result.deadline_misses == 0
    ends = {job_id: end for job_id, _, _, end, _, _ in result.per_job}
    assert ends["b"] == pytest.approx(1.755 * H) and ends["a"] == pytest.approx(1.755 * H)
    runs = runs_by_id(run)
    assert runs["b"].epochs_run == 4 and runs["a"].epochs_run == 4
    assert runs["b"].set_key is None and runs["b"].undone == 1
    assert run.machine.history.predict(("alexnet", "alexnet")) == pytest.approx(1.5)
    # the engine's record: B's first start stays 0 (JCT counts the undo), its end at 1.755 h
    record = {r.job_id: r for r in run.records}["b"]
    assert record.start_s == 0.0 and record.end_s == pytest.approx(1.755 * H)


@dataclass(frozen=True)
class Mild(Interference):
    """Two jobs really cost only 1 %; the prior for three is 1.08."""

    def true_slowdown(self, mix):
        return 1.01 if len(mix) == 2 else self.prior(len(mix))


def test_eaco_reexamines_waiting_jobs_only_when_something_changes():
    # One node, AlexNet on all 8 GPUs, 3 epochs each (e = 1404 s), all at t = 0.  A (deadline 3.2 e)
    # takes the free set; B (no deadline) shares it: A's prediction 3 e x 1.04 = 3.12 e <= 3.2 e.
    # C would make three: A's prediction 3 e x 1.08 = 3.24 e > 3.2 e, and no set is free: C waits.
    # At A's first epoch end (1.01 e) a fresh look would admit C (1.01 e + 2 e x 1.08 = 3.17 e), but an
    # epoch end changes nothing in the machine: C is looked at again when A and B end, at
    # 3 e x 1.01 = 4254.12 s, and runs alone: 4254.12 + 3 x 1404 = 8466.12 s.
    e = EPOCH
    jobs = [training_job("a", 0.0, "alexnet", 8, 3, deadline_s=3.2 * e), training_job("b", 0.0, "alexnet", 8, 3),
            training_job("c", 0.0, "alexnet", 8, 3)]
    run = colocation_replay(jobs, 1, "eaco", interference=Mild())
    run.run()
    records = {r.job_id: r for r in run.records}
    assert records["c"].start_s == pytest.approx(4254.12) and records["c"].end_s == pytest.approx(8466.12)
    assert records["a"].end_s == pytest.approx(4254.12) and colocation_result(run).colocated_starts == 1


@pytest.mark.parametrize("mix, deadline_h, keeps", [
    # remaining 10 epochs of 0.4 h (ResNet-50) at the prior for 2 jobs (1.04): 4.16 h
    (("resnet50", "vgg16"), 4.2, True),
    (("resnet50", "vgg16"), 4.1, False),
    # three jobs: 1.08 -> 4.32 h
    (("alexnet", "resnet50", "vgg16"), 4.3, False),
])
def test_deadline_prediction_table(mix, deadline_h, keeps):
    eaco = EaCO(ColocationSettings(), History(CALM))
    job = JobView("j", MODELS["resnet50"], 8, 10, deadline_h * H)
    assert eaco.keeps_deadlines([job], mix, 0.0) is keeps


def test_eaco_thresholds_filter_candidates():
    # VGG-16 (48 % util, 51.29 % memory) + ResNet-50 (36.61 %, 43.92 %): util 84.6 % >= 80 %: not shareable;
    # memory 95.21 % + AlexNet 4.21 % = 99.42 % would fit, but the utilisation rule excludes the set.
    busy = Candidate(0, 0, 8, (JobView("x", MODELS["vgg16"], 8, 5, math.inf),
                               JobView("y", MODELS["resnet50"], 8, 5, math.inf)), True)
    free = Candidate(1, 0, 8, (), False)
    eaco = EaCO(ColocationSettings(), History(CALM))
    job = JobView("z", MODELS["alexnet"], 8, 5, math.inf)
    assert eaco.choose(job, [busy, free], 0.0) is free
    lone = Candidate(0, 0, 8, (JobView("x", MODELS["vgg16"], 8, 5, math.inf),), True)
    assert eaco.choose(job, [lone, free], 0.0) is lone      # 48 % < 80 %, memory 55.5 % fits


def test_bad_input_is_an_input_error():
    with pytest.raises(InputError, match="gpus must be 1, 2, 4 or 8"):
        training_job("x", 0.0, "alexnet", 3, 2)
    with pytest.raises(InputError, match="unknown model"):
        training_job("x", 0.0, "bert", 1, 2)
    with pytest.raises(InputError, match="unknown co-location policy"):
        build_colocation("tetris")
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
        draw(st.sampled_from([0.0, 250.0])), draw(st.integers(2, 4))


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_invariants_at_every_step(case):
    jobs, nodes, policy, interference, idle_w, max_jobs = case
    run = colocation_replay(jobs, nodes, policy, interference=interference,
                            settings=ColocationSettings(max_jobs=max_jobs), idle_node_w=idle_w)
    machine = run.machine
    run.begin()
    done = {}
    while len(run.events):
        run.step()
        machine._check()        # no set over max_jobs or memory; rates = 1 / slowdown; power = sets + idle
        run.events._check()
        now = run.now_s
        for run_state in machine.runs.values():
            index = run_state.job.index
            assert run_state.epochs_done >= done.get(index, 0)      # an undo never loses a completed epoch
            done[index] = run_state.epochs_done
            if index in machine.running:
                # the engine's progress lies within the current epoch
                left = run_state.work_left_s(now) / run_state.model.epoch_s
                undone_epochs = run_state.epochs - run_state.epochs_done
                assert undone_epochs - 1 - 1e-9 <= left <= undone_epochs + 1e-9
        if policy == "fifo":
            assert all(len(members) == 1 for members in machine.sets.values())
    run.close()
    result = colocation_result(run)
    assert result.jobs == len(jobs) == len(run.records)         # every job ends
    for run_state in machine.runs.values():
        assert run_state.epochs_run == run_state.epochs_done == run_state.epochs
        # never faster than alone
        assert run_state.end_s - run_state.job.start_s >= run_state.epochs * run_state.model.epoch_s - 1e-6
    assert result.energy_j == pytest.approx(result.jobs_energy_j + result.idle_energy_j, rel=1e-9, abs=1e-6)
    if policy != "eaco":
        assert result.undone == 0


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
