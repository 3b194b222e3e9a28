"""Gandiva as the EaCO paper compares with it (Xiao et al., OSDI 2018, reactive mode): time-slicing
when a job cannot pack, migration onto freed sets; exact small cases and invariants."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.colocation import MODELS, ColocationSettings, Interference
from greenslurm.sim.machines.training_jobs import training_job
from greenslurm.sim.studies.colocation_runs import colocation_replay, colocation_result, simulate

CALM = Interference(jitter=0.0, mix_noise=0.0)
EFF = 60.0 / 60.5            # a 60 s quantum and a 0.5 s suspend/resume: the share of time training


def test_two_vgg16_that_do_not_fit_together_are_time_sliced():
    # One node; two VGG-16 jobs on 8 GPUs, 1 epoch (1440 s) each, at t = 0.  Their peak memory
    # (2 x 51.29 %) does not fit one set: Gandiva time-slices them: each trains at EFF / 2, both end
    # at 1440 x 2 / EFF = 2904 s.  FIFO runs them one after the other (ends 1440 s and 2880 s).
    jobs = [training_job("a", 0.0, "vgg16", 8, 1), training_job("b", 0.0, "vgg16", 8, 1)]
    gandiva = simulate(jobs, 1, "gandiva", interference=CALM)
    fifo = simulate(jobs, 1, "fifo", interference=CALM)
    assert gandiva.avg_jct_s == pytest.approx(2904.0) and gandiva.avg_wait_s == 0.0
    assert fifo.avg_jct_s == pytest.approx(1440.0) and fifo.avg_jtt_s == pytest.approx((1440 + 2880) / 2)
    # one trains at a time: the node draws VGG-16's 1533 W (static + set) all along; FIFO the same
    # power for 2880 s.  Time-slicing costs 24 s of energy here, and JCT, for no waiting.
    assert gandiva.energy_j == pytest.approx(1533.0 * 2904) and fifo.energy_j == pytest.approx(1533.0 * 2880)
    # the added JCT is all in the time-sliced state: (2 x 2904 - 2 x 1440) / (2 x 1440)
    assert gandiva.added_jct_by_state() == pytest.approx({"sliced": 2904 / 1440 - 1})


def test_a_time_sliced_job_migrates_to_a_freed_node_and_loses_nothing():
    # Two nodes, VGG-16 on 8 GPUs.  a (2 epochs) takes node 0, b (1 epoch) node 1, c (2 epochs) finds
    # no free set and cannot pack (memory): it time-slices with a on node 0 (fewest jobs, first node).
    # b ends at 1440 s: node 1 is free, the queue is empty, so Gandiva migrates c (the last to join the
    # time-sliced set) to node 1: c has trained 1440 x EFF / 2 = 714.05 s; it restores for 30 s and
    # trains the other 2165.95 s alone: ends at 1470 + 2165.95 = 3635.95 s.  a is alone from 1440 s
    # with the same 2165.95 s left: ends at 3605.95 s.
    jobs = [training_job("a", 0.0, "vgg16", 8, 2), training_job("b", 0.0, "vgg16", 8, 1),
            training_job("c", 0.0, "vgg16", 8, 2)]
    run = colocation_replay(jobs, 2, "gandiva", interference=CALM)
    run.run()
    result = colocation_result(run)
    done_s = 1440 * EFF / 2
    ends = {r.job_id: r.end_s for r in run.records}
    assert ends["b"] == pytest.approx(1440.0)
    assert ends["a"] == pytest.approx(1440 + 2880 - done_s)
    assert ends["c"] == pytest.approx(1470 + 2880 - done_s)
    assert result.migrations == 1
    runs = {r.job_id: r for r in run.machine.runs.values()}
    c = runs["c"]
    assert c.migrations == 1 and c.epochs_run == c.epochs_done == 2        # no epoch lost or repeated
    assert c.time_in == pytest.approx({"sliced": 1440.0, "paused": 30.0, 1: 2880 - done_s})
    assert c.work_in == pytest.approx({"sliced": done_s, "paused": 0.0, 1: 2880 - done_s})
    assert {r.job_id: tuple(r.node_indices) for r in run.records}["c"] == (1,)     # the engine saw the move
    # both nodes draw 1533 W while anything is on them (the restoring job's set included)
    assert result.energy_j == pytest.approx(1533.0 * (ends["a"] + ends["c"]))


def test_gandiva_packs_before_it_time_slices():
    # One node, 8-GPU sets.  v: VGG-16 (51.29 % memory), r: ResNet-50 (43.92 %), a: AlexNet (4.21 %),
    # 1 epoch each.  v takes the node; r packs with v (95.21 % fits); a packs too (99.42 %): no
    # time-slicing, three jobs packed (not measured together: the fitted model).
    jobs = [training_job("v", 0.0, "vgg16", 8, 1), training_job("r", 0.0, "resnet50", 8, 1),
            training_job("a", 0.0, "alexnet", 8, 1)]
    run = colocation_replay(jobs, 1, "gandiva", interference=CALM)
    run.begin()
    run.step()
    assert [len(m) for m in run.machine.sets.values()] == [3] and not run.machine.sliced


@st.composite
def crowded(draw):
    jobs, t = [], 0.0
    for i in range(draw(st.integers(2, 12))):
        t += draw(st.sampled_from([0.0, 500.0, 2000.0]))
        model = draw(st.sampled_from(sorted(MODELS)))
        jobs.append(training_job(str(i), t, model, draw(st.sampled_from([1, 4, 8])), draw(st.integers(1, 4))))
    return jobs, draw(st.integers(1, 2)), draw(st.integers(2, 4)), draw(st.sampled_from([0.0, 30.0, 900.0]))


@settings(max_examples=40, deadline=None)
@given(crowded())
def test_gandiva_time_slices_and_migrates_without_losing_work(case):
    jobs, nodes, max_jobs, migration_s = case
    run = colocation_replay(jobs, nodes, "gandiva", interference=CALM,
                            settings=ColocationSettings(max_jobs=max_jobs, migration_s=migration_s))
    machine = run.machine
    run.begin()
    while len(run.events):
        run.step()
        machine._check()
        for key in machine.sliced:        # a time-sliced set: its jobs do not fit together, or packing costs more
            members = machine.sets[key]
            assert len(members) >= 2
            assert all(math.isclose(r.job.rate, 0.0) or math.isclose(r.job.rate, EFF / len(members))
                       for r in members)
    run.close()
    result = colocation_result(run)
    assert result.jobs == len(jobs)
    for state in machine.runs.values():
        assert state.epochs_run == state.epochs_done == state.epochs
        assert state.time_in.get("paused", 0.0) >= state.migrations * migration_s - 1e-6
        assert sum(state.work_in.values()) == pytest.approx(state.epochs * state.model.epoch_s)


def test_gavels_gandiva_pairs_at_random_and_does_not_migrate():
    # Gavel's Gandiva_Packing: once nothing is free, a job pairs with a set holding exactly one job.
    # One node of four 2-GPU blocks, AlexNet jobs of 2 GPUs and 2 epochs: four take the blocks, the
    # next four pair with them (each block once: a pair is never chosen again), the ninth finds no
    # single and packs by Gandiva's rule onto the least utilised pair (a third job).
    jobs = [training_job(str(i), 0.0, "alexnet", 2, 2) for i in range(9)]
    run = colocation_replay(jobs, 1, "gandiva-gavel", interference=CALM)
    run.begin()
    run.step()
    sizes = sorted(len(m) for m in run.machine.sets.values())
    assert sizes == [2, 2, 2, 3] and not run.machine.sliced
    while len(run.events):
        run.step()
    run.close()
    assert colocation_result(run).migrations == 0 and colocation_result(run).jobs == 9
