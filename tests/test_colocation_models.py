"""The EaCO paper's measurements as the co-location model uses them: Table 3 per measured mix, the
model fitted to it for the others (with its error), the active-node power, the history that predicts
unseen mixes from per-model contributions, and the Alibaba openb trace mapped to training jobs."""

import math
from collections import Counter

import pytest

from gpu_fixtures import alibaba
from greenslurm.allocation.colocation import (FITTED_BETA, MEASURED_MIXES, MODELS, NODE_STATIC_W, History,
                                              Interference, PowerAccounting, fit_slowdown_model, model_slowdown,
                                              possible_mixes, prediction_error)
from greenslurm.sim.machines.training_jobs import dlt_jobs_from_specs, synthetic_dlt_jobs
from greenslurm.sim.studies.colocation_runs import colocation_replay

CALM = Interference(jitter=0.0, mix_noise=0.0)


@pytest.mark.parametrize("mix, power_w, slowdown", [
    # Table 3 average JCT / the mean of the jobs' Table 1 JCTs; node power as measured.
    (("alexnet", "resnet50"), 1390.0, 36.63 / ((34.76 + 36.01) / 2)),             # 1.0352
    (("alexnet", "vgg16"), 1506.0, 36.51 / ((34.76 + 36.13) / 2)),                # 1.0300
    (("resnet18", "vgg16"), 1644.0, 37.01 / ((35.13 + 36.13) / 2)),               # 1.0387
    (("alexnet", "resnet18", "resnet50"), 1541.0, 38.28 / ((34.76 + 35.13 + 36.01) / 3)),     # 1.0844
    (("alexnet", "resnet18", "vgg16"), 1713.0, 38.26 / ((34.76 + 35.13 + 36.13) / 3)),        # 1.0826
    (("alexnet", "resnet18", "resnet50", "vgg16"), 1944.0, 44.21 / ((34.76 + 35.13 + 36.01 + 36.13) / 4)),  # 1.2451
])
def test_measured_mixes_are_table_3(mix, power_w, slowdown):
    noisy = Interference(jitter=3.0, mix_noise=1.0, seed=7)      # a measured mix ignores the deviations
    for interference in (CALM, noisy):
        assert interference.prior(mix) == pytest.approx(slowdown, rel=1e-12)
        assert interference.true_slowdown(mix) == pytest.approx(slowdown, rel=1e-12)
        assert interference.mix_power_w(mix) == power_w
    # per set, the power factor beta = (P - max P) / (sum P - max P) is what Table 3 says, not one number
    powers = [MODELS[m].power_w for m in mix]
    beta = (power_w - max(powers)) / (sum(powers) - max(powers))
    assert -0.04 < beta < 0.14


def test_the_fitted_models_and_their_error_on_table_3():
    a, b = fit_slowdown_model()
    errors = [abs(model_slowdown(mix) - m.slowdown) for mix, m in MEASURED_MIXES.items()]
    # largest in-sample error: J1&J2&J3, 1 + 2a + 2b (52.50 / 100)^2 = 1.0749 against 1.0844
    assert max(errors) == pytest.approx(abs(1 + 2 * a + 2 * b * 0.525 ** 2 - 38.28 / 35.30))
    assert max(errors) < 0.01
    # the four-job mix: 1 + 3a + 3b (100.51 / 100)^2 = 1.2438 against 1.2451
    assert model_slowdown(("alexnet", "resnet18", "resnet50", "vgg16")) == pytest.approx(1 + 3 * a + 3 * b * 1.0051 ** 2)
    # leave one mix out: fit on five, predict the sixth; mean error 0.022, the four-job mix worst (0.088)
    loo = {}
    for left in MEASURED_MIXES:
        rest = {mix: m for mix, m in MEASURED_MIXES.items() if mix != left}
        a5, b5 = fit_slowdown_model(rest)
        k = len(left)
        u = sum(MODELS[n].util_avg_pct for n in left) / 100
        loo[left] = abs(1 + a5 * (k - 1) + b5 * (k - 1) * u * u - MEASURED_MIXES[left].slowdown)
    assert sum(loo.values()) / 6 == pytest.approx(0.0219, abs=5e-4)
    assert max(loo, key=loo.get) == ("alexnet", "resnet18", "resnet50", "vgg16")
    # power: one beta by least squares, 0.122; it misses J1&J4 most (1533 + 0.122 x 712 = 1619.9 W
    # against 1506 W measured: +7.6 %)
    assert FITTED_BETA == pytest.approx(0.12205, abs=1e-5)
    misses = {mix: (max(MODELS[n].power_w for n in mix) + FITTED_BETA * (sum(MODELS[n].power_w for n in mix)
                    - max(MODELS[n].power_w for n in mix))) / m.power_w - 1 for mix, m in MEASURED_MIXES.items()}
    assert max(misses, key=lambda mix: abs(misses[mix])) == ("alexnet", "vgg16")
    assert misses[("alexnet", "vgg16")] == pytest.approx(0.0756, abs=5e-4)


def test_static_node_power_is_table_1_at_zero_utilisation():
    # least squares of (4.72, 712), (11.17, 959), (36.61, 1330), (48.01, 1533): 688.47 W + 17.71 W/%
    assert NODE_STATIC_W == pytest.approx(688.465, abs=1e-3)
    assert NODE_STATIC_W < min(m.power_w for m in MODELS.values())      # every set adds power
    # an active node with one AlexNet on 1 GPU: S + (712 - S) / 8 = 691.4 W; the sets-only accounting: 89 W
    nodes, jobs = PowerAccounting(), PowerAccounting("jobs")
    assert nodes.node_static_w + nodes.set_w(712.0, 1) == pytest.approx(691.40, abs=0.01)
    assert jobs.node_static_w + jobs.set_w(712.0, 1) == 89.0
    with pytest.raises(ValueError, match="unknown power accounting"):
        PowerAccounting("watts")


def test_true_slowdown_of_an_unmeasured_mix_follows_the_per_model_sensitivities():
    noisy = Interference(jitter=0.5, mix_noise=0.1, seed=3)
    mix = ("alexnet", "resnet18", "resnet18")
    excess = model_slowdown(mix) - 1
    u = (noisy.sensitivity("alexnet") + 2 * noisy.sensitivity("resnet18")) / 3
    from greenslurm.allocation.colocation import _unit_hash
    deviation = 0.5 * u + 0.1 * _unit_hash((3, "mix") + mix)
    assert noisy.true_slowdown(mix) == pytest.approx(1 + excess * (1 + deviation))
    assert noisy.prior(mix) == pytest.approx(1 + excess)          # the prior knows only the model
    assert Interference(jitter=50.0, seed=3).true_slowdown(mix) >= 1.0     # never faster than alone


def test_history_predicts_an_unseen_mix_from_per_model_contributions():
    h = History(CALM)                                   # ridge 1, blend 1
    ea = CALM.prior(("alexnet", "alexnet")) - 1         # 0.0215
    er = CALM.prior(("resnet18", "resnet18")) - 1       # 0.0215 + 0.0597 x (0.2234^2 - 0.0944^2) = 0.0239
    h.observe(("alexnet", "alexnet"), 1 + 3 * ea)       # r = 2, shares (1, 0, 0, 0)
    h.observe(("resnet18", "resnet18"), 1 + 0.5 * er)   # r = -0.5, shares (0, 1, 0, 0)
    # X'X + I = diag(2, 2, 1, 1), X'r = (2, -0.5, 0, 0): w = (1, -0.25, 0, 0)
    assert h._solve() == pytest.approx([1.0, -0.25, 0.0, 0.0])
    # AlexNet & ResNet-18, never seen: r = 0.5 x 1 + 0.5 x -0.25 = 0.375
    pair = ("alexnet", "resnet18")
    assert h.predict(pair) == pytest.approx(1 + (CALM.prior(pair) - 1) * 1.375)
    # two AlexNets and a ResNet-18: r = 2/3 x 1 + 1/3 x -0.25 = 0.5833
    trio = ("alexnet", "alexnet", "resnet18")
    assert h.predict(trio) == pytest.approx(1 + (CALM.prior(trio) - 1) * (1 + 2 / 3 - 1 / 12))
    # a measured mix keeps Table 3 until it is itself observed, then blends: (1.2 + 1.0352) / 2
    measured = ("alexnet", "resnet50")
    assert h.predict(measured) == MEASURED_MIXES[measured].slowdown
    h.observe(measured, 1.2)
    assert h.predict(measured) == pytest.approx((1.2 + MEASURED_MIXES[measured].slowdown) / 2)
    assert h._solve() == pytest.approx([1.0, -0.25, 0.0, 0.0])     # measured mixes do not move w


def test_history_error_falls_as_eaco_observes_a_seeded_workload():
    # EaCO on 120 synthetic jobs, 6 nodes: the epochs it observes on shared sets, replayed into a fresh
    # history, shrink its error on the mixes Table 3 did not measure.
    interference = Interference(seed=1)
    run = colocation_replay(synthetic_dlt_jobs(120, seed=1), 6, "eaco", interference=interference)
    run.run()
    log = run.machine.history.log
    mixes = [m for m in possible_mixes(4) if m not in MEASURED_MIXES]
    history = History(interference)
    errors = [prediction_error(history, mixes)]
    for n, (mix, slowdown) in enumerate(log, 1):
        history.observe(mix, slowdown)
        if n in (30, len(log)):
            errors.append(prediction_error(history, mixes))
    assert len(log) > 300
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < errors[0] / 3


def test_openb_pods_become_training_jobs():
    from greenslurm.traces.alibaba import read_pods
    pods = read_pods(str(alibaba("openb_pod_list_default.csv"))).jobs
    jobs = dlt_jobs_from_specs(pods, seed=0, model_by="share", gpu_only=True, slack=(1.2, 3.0))
    # 8,152 pods, 1,088 without GPUs: 7,064 training jobs (3,078 ask a share of one GPU)
    assert len(jobs) == 7064
    assert jobs == dlt_jobs_from_specs(pods, seed=0, model_by="share", gpu_only=True, slack=(1.2, 3.0))
    by_id = {p.job_id: p for p in pods}
    shares = [j for j in jobs if by_id[j.job_id].gpus_per_node < 1]
    assert len(shares) == 3078 and {j.model for j in shares} == {"alexnet", "resnet18"}
    assert {j.model for j in jobs if by_id[j.job_id].gpus_per_node >= 1} == {"resnet50", "vgg16"}
    assert Counter(j.gpus_per_node for j in jobs) == Counter({1: 6989, 8: 44, 2: 16, 4: 15})
    for job in jobs[:200]:
        pod = by_id[job.job_id]
        assert job.epochs == max(1, round(pod.run_for_s / MODELS[job.model].epoch_s))
        assert job.deadline_s is None or job.submit_s + 1.2 * job.runtime_s - 1e-6 <= job.deadline_s \
            <= job.submit_s + 3.0 * job.runtime_s + 1e-6
    assert 0.1 < sum(j.deadline_s is None for j in jobs) / len(jobs) < 0.3         # 20 % without
    # at most 90 epochs (the paper's trainings): 68 pods are longer, together 119,963 of 137,693 epochs
    capped = dlt_jobs_from_specs(pods, seed=0, model_by="share", gpu_only=True, slack=(1.2, 3.0), max_epochs=90)
    assert sum(j.epochs > 90 for j in jobs) == 68 and max(j.epochs for j in capped) == 90
    assert sum(j.epochs for j in capped) == 137693 - 119963 + 68 * 90
    assert not math.isnan(sum(j.runtime_s for j in jobs))
