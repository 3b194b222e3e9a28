"""GPU co-location of training jobs (seed 001, EaCO): exact small cases with the arithmetic in
comments, and hypothesis invariants checked at every step of the simulation."""

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.colocation import (COLOCATION_POLICIES, MODELS, Candidate, ColocationSettings, EaCO, History,
                                   Interference, JobView)
from greenslurm.sim.machines.colocation import ColocationSim, DLTJob, simulate, synthetic_dlt_jobs

H = 3600.0
EPOCH = 0.39 * H          # AlexNet and ResNet-18 epoch (Table 1)
CALM = Interference(jitter=0.0)


@dataclass(frozen=True)
class Harsh(Interference):
    """Co-location really costs 1.5x, far above the prior of 1.04 for two jobs."""

    def true_slowdown(self, mix):
        return 1.5 if len(mix) > 1 else 1.0


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
    jobs = [DLTJob("a", 0.0, "alexnet", 1, 2), DLTJob("b", 0.0, "alexnet", 1, 2)]
    result = simulate(jobs, 1, policy, interference=CALM)
    assert result.avg_jct_s == pytest.approx(jct_h * H)
    assert result.energy_j == pytest.approx(energy_kwh * 3.6e6)
    assert result.energy_j == pytest.approx(result.jobs_energy_j + result.idle_energy_j)


def test_fifo_packed_packs_only_when_full():
    # Nine 1-GPU jobs on one 8-GPU node: FIFO makes the ninth wait 2 epochs (0.78 h); FIFO packed
    # puts it on GPU 0 with the first job (fewest jobs), so nobody waits.
    jobs = [DLTJob(str(i), 0.0, "alexnet", 1, 2) for i in range(9)]
    fifo = simulate(jobs, 1, "fifo", interference=CALM)
    packed = simulate(jobs, 1, "fifo-packed", interference=CALM)
    assert fifo.avg_wait_s == pytest.approx(0.78 * H / 9)
    assert packed.avg_wait_s == 0.0 and packed.colocated_starts == 1


def test_eaco_undoes_at_an_epoch_boundary_and_loses_nothing():
    # A (no deadline) and B (deadline 1.8 h), AlexNet, 4 epochs of 0.39 h, at t = 0.  The prior
    # predicts 4 * 0.39 * 1.04 = 1.6224 h <= 1.8 h: EaCO shares A's GPU.  The true slowdown is 1.5:
    # B's first epoch ends at 0.585 h; the history learns 1.5 and predicts 0.585 + 3 * 0.39 * 1.5
    # = 2.34 h > 1.8 h: B leaves at that boundary and runs alone on a free GPU: 0.585 + 1.17 = 1.755 h.
    # A runs alone again from 0.585 h too: 1 epoch done, 3 left: also 1.755 h.
    jobs = [DLTJob("a", 0.0, "alexnet", 1, 4), DLTJob("b", 0.0, "alexnet", 1, 4, deadline_s=1.8 * H)]
    sim = ColocationSim(jobs, 1, "eaco", interference=Harsh())
    result = sim.run()
    assert result.undone == 1 and result.deadline_misses == 0
    ends = {job_id: end for job_id, _, _, end, _, _ in result.per_job}
    assert ends["b"] == pytest.approx(1.755 * H) and ends["a"] == pytest.approx(1.755 * H)
    assert sim.runs["b"].epochs_run == 4 and sim.runs["a"].epochs_run == 4
    assert sim.history.predict(("alexnet", "alexnet")) == pytest.approx(1.5)


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
        jobs.append(DLTJob(str(i), t, model, draw(st.sampled_from([1, 2, 4, 8])), epochs, deadline))
    interference = Interference(jitter=draw(st.sampled_from([0.0, 0.5, 3.0])), seed=draw(st.integers(0, 3)))
    return jobs, nodes, draw(st.sampled_from(sorted(COLOCATION_POLICIES))), interference, \
        draw(st.sampled_from([0.0, 250.0])), draw(st.integers(2, 4))


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_invariants_at_every_step(case):
    jobs, nodes, policy, interference, idle_w, max_jobs = case
    sim = ColocationSim(jobs, nodes, policy, interference=interference,
                        settings=ColocationSettings(max_jobs=max_jobs), idle_node_w=idle_w)
    sim.begin()
    done = {}
    while len(sim.events):
        sim.step()
        sim._check()
        for job_id, run in sim.runs.items():
            assert run.epochs_done >= done.get(job_id, 0)      # an undo never loses a completed epoch
            done[job_id] = run.epochs_done
            assert 0.0 <= run.fraction <= 1.0 + 1e-9
        if policy == "fifo":
            assert all(len(members) == 1 for members in sim.sets.values())
    result = sim.close()
    assert result.jobs == len(jobs)
    for run in sim.runs.values():
        assert run.epochs_run == run.job.epochs and run.epochs_done == run.job.epochs
        # never faster than alone
        assert run.end_s - run.first_start_s >= run.job.epochs * MODELS[run.job.model].epoch_s - 1e-6
    assert result.energy_j == pytest.approx(result.jobs_energy_j + result.idle_energy_j, rel=1e-9, abs=1e-6)
    if policy != "eaco":
        assert result.undone == 0


def test_synthetic_workload_is_seeded_and_sane():
    jobs = synthetic_dlt_jobs(50, seed=3)
    assert jobs == synthetic_dlt_jobs(50, seed=3)
    assert all(j.gpus in (1, 2, 4, 8) and j.model in MODELS and j.deadline_s > j.submit_s for j in jobs)
