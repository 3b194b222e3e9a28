"""Deep-learning training jobs for the co-location machine (:mod:`greenslurm.sim.machines.colocation`):
one job of a model, a GPU count and epochs (:func:`training_job`), synthetic ones, a trace's jobs made
training jobs (:func:`dlt_jobs_from_specs`), and the cluster of 8-GPU nodes they run on."""

from __future__ import annotations

import math
import random
from typing import Sequence

from greenslurm.allocation.colocation import GPUS_PER_NODE, MODELS
from greenslurm.clustermodel import Cluster, InputError, JobSpec

GPU_SET_SIZES = (1, 2, 4, 8)


def training_job(job_id: str, submit_s: float, model: str, gpus: int, epochs: int,
                 deadline_s: float = math.inf) -> JobSpec:
    """A training job: ``epochs`` epochs of ``model`` on ``gpus`` GPUs of one node.

    Its runtime (and requested time) is its exclusive JCT: epochs x the model's epoch time.

    >>> job = training_job("a", 0.0, "alexnet", 2, 3)      # 3 epochs of 0.39 h
    >>> job.runtime_s, job.gpus_per_node, job.nodes, job.deadline_s
    (4212.0, 2, 1, None)
    """
    if model not in MODELS:
        raise InputError(f"job {job_id}: unknown model {model!r}; choose from {', '.join(sorted(MODELS))}",
                         path="<jobs>", field="model")
    if gpus not in GPU_SET_SIZES:
        raise InputError(f"job {job_id}: gpus must be 1, 2, 4 or 8, not {gpus!r}", path="<jobs>", field="gpus")
    if not (isinstance(epochs, int) and epochs >= 1):
        raise InputError(f"job {job_id}: epochs must be a whole number >= 1, not {epochs!r}",
                         path="<jobs>", field="epochs")
    runtime_s = epochs * MODELS[model].epoch_s
    return JobSpec(str(job_id), float(submit_s), runtime_s, runtime_s=runtime_s, cpus=gpus, nodes=1,
                   gpus_per_node=gpus, deadline_s=None if math.isinf(deadline_s) else float(deadline_s),
                   epochs=epochs, model=model)


def check_training_job(job: JobSpec) -> None:
    """A job the co-location machine can run: a known model, epochs >= 1, 1, 2, 4 or 8 GPUs on one node."""
    if job.model not in MODELS or job.epochs < 1 or job.gpus_per_node not in GPU_SET_SIZES or job.nodes != 1:
        raise InputError(f"job {job.job_id}: not a training job (model one of {', '.join(sorted(MODELS))}, "
                         "epochs >= 1, 1, 2, 4 or 8 GPUs on one node)", path="<jobs>", field="model")


def synthetic_dlt_jobs(count: int, seed: int = 0, arrivals_per_h: float = 6.0,
                       gpu_mix: Sequence[tuple[int, float]] = ((1, 0.55), (2, 0.15), (4, 0.15), (8, 0.15)),
                       epochs: tuple[int, int] = (10, 90), slack: tuple[float, float] = (1.2, 3.0),
                       no_deadline: float = 0.2) -> list[JobSpec]:
    """A seeded deep-learning training workload: Poisson arrivals, models uniform over the paper's four
    (Table 1 power and epoch time), GPU counts from ``gpu_mix``, epochs uniform in ``epochs``;
    deadline = submit + slack * exclusive JCT (slack uniform), none for a ``no_deadline`` share.

    >>> [(j.job_id, j.model, j.gpus_per_node, j.epochs) for j in synthetic_dlt_jobs(2, seed=0)]
    [('dlt0', 'vgg16', 1, 75), ('dlt1', 'vgg16', 1, 37)]
    """
    rng = random.Random(seed)
    names = sorted(MODELS)
    sizes, weights = zip(*gpu_mix)
    t = 0.0
    out = []
    for i in range(count):
        t += rng.expovariate(arrivals_per_h / 3600.0)
        model = rng.choice(names)
        gpus = rng.choices(sizes, weights)[0]
        n = rng.randint(*epochs)
        jct = n * MODELS[model].epoch_s
        deadline = math.inf if rng.random() < no_deadline else t + rng.uniform(*slack) * jct
        out.append(training_job(f"dlt{i}", round(t, 3), model, gpus, n, deadline))
    return out


MODEL_BY = ("seed", "share")
LIGHT_MODELS, HEAVY_MODELS = ("alexnet", "resnet18"), ("resnet50", "vgg16")


def dlt_jobs_from_specs(jobs, seed: int = 0, *, model_by: str = "seed", gpu_only: bool = False,
                        slack: tuple[float, float] | None = None, no_deadline: float = 0.2,
                        max_epochs: int | None = None) -> list[JobSpec]:
    """Training jobs from a trace's jobs.

    * GPUs: the job's GPUs (at least 1; a share of one GPU counts as 1) rounded up to 1, 2, 4 or 8;
      ``gpu_only``: jobs without GPUs are left out (else they become 1-GPU jobs);
    * model, ``model_by="seed"``: drawn (seeded) from the paper's four; ``"share"``: a job asking a
      fraction of one GPU gets one of the light models (AlexNet, ResNet-18: 5-11 % GPU utilisation,
      Table 2), a job of whole GPUs one of the heavy ones (ResNet-50, VGG-16: 37-48 %), seeded within;
    * epochs = runtime / the model's epoch time, rounded, at least 1 (and at most ``max_epochs``);
    * deadline: the job's own if it has one; with ``slack`` = (lo, hi) a job without one gets
      submit + U(lo, hi) x its exclusive JCT, except a ``no_deadline`` share (as
      :func:`synthetic_dlt_jobs`).
    Jobs without a finite runtime are left out.

    >>> [(j.gpus_per_node, j.epochs) for j in dlt_jobs_from_specs([JobSpec("a", 0.0, 1e4, runtime_s=3 * 1440.0,
    ...                                                                      nodes=1, gpus_per_node=3)])]
    [(4, 3)]
    >>> [j.model for j in dlt_jobs_from_specs([JobSpec("a", 0.0, 1e4, runtime_s=1e4, gpus_per_node=0.25),
    ...                                        JobSpec("b", 0.0, 1e4, runtime_s=1e4, gpus_per_node=2)],
    ...                                       model_by="share")]
    ['resnet18', 'vgg16']
    """
    if model_by not in MODEL_BY:
        raise InputError(f"model_by must be one of {', '.join(MODEL_BY)}, not {model_by!r}", path="<command line>",
                         field="model_by")
    rng = random.Random(seed)
    names = sorted(MODELS)
    out = []
    for job in jobs:
        runtime = job.run_for_s
        if not (math.isfinite(runtime) and math.isfinite(job.submit_s)):
            continue
        asked = float(job.gpus_per_node or 0.0) * max(job.nodes, 1)
        if gpu_only and asked <= 0:
            continue
        gpus = max(1.0, asked)
        size = next((g for g in GPU_SET_SIZES if g >= gpus), 8)
        if model_by == "share":
            model = rng.choice(LIGHT_MODELS if asked < 1.0 else HEAVY_MODELS)
        else:
            model = rng.choice(names)
        epochs = max(1, round(runtime / MODELS[model].epoch_s))
        if max_epochs is not None:
            epochs = min(epochs, max_epochs)
        deadline = job.deadline_s if job.deadline_s is not None else math.inf
        if slack is not None and job.deadline_s is None and rng.random() >= no_deadline:
            deadline = job.submit_s + rng.uniform(*slack) * epochs * MODELS[model].epoch_s
        out.append(training_job(str(job.job_id), float(job.submit_s), model, size, epochs, deadline))
    return out


def colocation_cluster(nodes: int) -> Cluster:
    """``nodes`` nodes of 8 GPUs (and 8 CPUs, one per GPU) for the co-location machine.

    >>> colocation_cluster(3).total_gpus
    24
    """
    if nodes < 1:
        raise InputError(f"co-location needs at least one 8-GPU node, not {nodes}", path="<command line>",
                         field="gpu_nodes")
    return Cluster.homogeneous(nodes, cpus=GPUS_PER_NODE, gpus=GPUS_PER_NODE, name="gpu-sets")
