"""Replay a timed GPU task trace (the Alibaba openb pod list) with a GPU scoring policy, with departures.

A thin driver of the one engine: :class:`~greenslurm.sim.engine.replay.Replay` under the queue
``none`` (:class:`~greenslurm.sim.engine.queues.PlaceOrFail`: each task is placed when it arrives or
fails, as in the GPU papers; no queue, no retry), the node selection of
:mod:`greenslurm.allocation.selection` (per-GPU shares, whole GPUs, GPU model constraints) and the
GPU accounting of :mod:`greenslurm.sim.accounting.gpu_accounting` (PWR power model, FGD fragmentation,
one step per event time).  A task holds its node and GPUs for its runtime (openb: deletion -
scheduled time), then leaves; a departure comes before an arrival at the same time.

Power is constant between events, so the energy is exactly sum(P_i x (t_{i+1} - t_i)) over the
recorded steps; the same steps give the GPU allocation and fragmentation over time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from greenslurm.allocation.scorers import policy_label
from greenslurm.allocation.selection import SelectionSpec, from_gpu_papers, make_selection, parse_selection
from greenslurm.clustermodel import Cluster, NodeSpec
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.fragmentation import TargetWorkload
from greenslurm.clustermodel.gpu_state import MILLI, GpuNodes, GpuState
from greenslurm.clustermodel.job import JobSpec
from greenslurm.sim.accounting.gpu_accounting import GpuAccounting, GpuSeries
from greenslurm.sim.engine import replay as engine
from greenslurm.sim.machines.machine import Machine

SKIP_ENDLESS = engine.SKIP_ENDLESS
SKIP_NEVER_FITS = "fits on no node of the cluster even when empty"
# The engine's reasons for a job that can never run, as this study has always counted them.
_SKIPS = {engine.SKIP_TOO_BIG: SKIP_NEVER_FITS, engine.SKIP_GPU_MODEL: SKIP_NEVER_FITS,
          engine.SKIP_MEMORY: SKIP_NEVER_FITS}


@dataclass(frozen=True, slots=True)
class GpuTaskRecord:
    job_id: str
    submit_s: float
    end_s: float                   # departure (= submit for a failed task)
    node: int                      # -1: failed
    gpus: tuple[int, ...]
    cpu_milli: int
    gpu_demand_milli: int

    @property
    def failed(self) -> bool:
        return self.node < 0


@dataclass
class GpuReplayResult(GpuSeries):
    """The step series of :class:`~greenslurm.sim.accounting.gpu_accounting.GpuSeries` (the state from
    ``times_s[i]`` until ``times_s[i + 1]``; the last entry ends the run), the policy and every task's fate."""

    policy: str = ""
    normalization: str = "paper"
    ties: str = "first"
    records: list[GpuTaskRecord] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)

    def summary(self) -> dict:
        failed = [r for r in self.records if r.failed]
        asked = sum(r.gpu_demand_milli for r in self.records)
        return {
            "policy": self.policy, "normalization": self.normalization, "ties": self.ties,
            "tasks": len(self.records), "failed_tasks": len(failed),
            "failed_gpu_demand_pct": 100.0 * sum(r.gpu_demand_milli for r in failed) / asked if asked else 0.0,
            **super().summary(),
            "skipped": dict(self.skipped),
        }


def gpu_selection(policy: str) -> tuple[SelectionSpec, str]:
    """A policy as a node selection, and its label.  The GPU papers' scorer family is read first
    (``bestfit`` there is their BestFit, the selection ``gpubestfit``); anything else is a selection name.

    >>> gpu_selection("bestfit")[0].label, gpu_selection("bestfit")[1]
    ('gpubestfit', 'bestfit')
    >>> gpu_selection("PWR=0.1, fgd=0.9")[0].label
    'pwr=0.1,fgd=0.9'
    >>> gpu_selection("gpubestfit")[0].label
    'gpubestfit'
    """
    try:
        return from_gpu_papers(policy), policy_label(policy)
    except InputError:
        spec = parse_selection(policy)
        return spec, spec.label


def engine_cluster(nodes: GpuNodes) -> Cluster:
    """The cluster the engine replays for a GPU node table (CPUs, MiB, GPUs, model, GPU power).

    >>> from greenslurm.clustermodel import NodeSpec
    >>> c = Cluster([NodeSpec("a", cpus=96, memory_mb=10, gpus=8, gpu_model="G2"), NodeSpec("b", cpus=4)])
    >>> back = engine_cluster(GpuNodes.from_cluster(c))
    >>> [(n.name, n.cpus, n.memory_mb, n.gpus, n.gpu_model, n.gpu_max_w) for n in back.nodes]
    [('a', 96, 10.0, 8, 'G2', 150.0), ('b', 4, 0.0, 0, None, 300.0)]
    """
    specs = []
    for i, name in enumerate(nodes.names):
        milli = int(nodes.cpu_milli[i])
        model = nodes.models[int(nodes.model_index[i])] or None
        specs.append(NodeSpec(name, cpus=milli // MILLI if milli % MILLI == 0 else milli / MILLI,
                              memory_mb=float(nodes.memory_mib[i]), gpus=int(nodes.gpu_count[i]), gpu_model=model,
                              gpu_idle_w=float(nodes.gpu_idle_w[i]), gpu_max_w=float(nodes.gpu_max_w[i])))
    return Cluster(specs)


def gpu_machine(nodes: GpuNodes, cluster: Cluster | None = None, selection=None) -> Machine:
    """A machine on ``nodes`` whose per-GPU state keeps ``nodes`` itself (and so its CPU package)."""
    machine = Machine(cluster if cluster is not None else engine_cluster(nodes), selection)
    machine.gpus = GpuState(nodes)
    return machine


def gpu_replay(jobs: Sequence[JobSpec], nodes: GpuNodes | Cluster, policy: str,
               workload: TargetWorkload | None = None,
               normalization: str = "paper", tie_break: str | None = None, seed: int = 0,
               arrival_scale: float = 1.0,
               progress: Callable[[int, int], None] | None = None) -> GpuReplayResult:
    """Replay ``jobs`` on ``nodes`` under ``policy`` (a GPU scorer mix such as ``fgd`` or
    ``pwr=0.1,fgd=0.9``, or a node selection name; see the module notes).

    ``arrival_scale`` < 1 compresses the time between arrivals (runtimes unchanged): the real openb
    trace keeps at most about 66 of the 6,212 GPUs busy at once, so a scale of 0.01 is a what-if with
    a hundred times the arrival rate."""
    if not arrival_scale > 0:
        raise ValueError("arrival_scale must be > 0")
    if arrival_scale != 1.0 and jobs:
        first = min(job.submit_s for job in jobs)
        jobs = [job.with_changes(submit_s=first + (job.submit_s - first) * arrival_scale) for job in jobs]
    spec, label = gpu_selection(policy)
    selection = make_selection(spec, workload, normalization=normalization, seed=[seed, 2], tie_break=tie_break)
    if isinstance(nodes, Cluster):
        cluster, factory = nodes, None
    else:
        cluster = engine_cluster(nodes)
        factory = lambda c, s: gpu_machine(nodes, c, s)          # noqa: E731
    run = engine.Replay(jobs, cluster, "none", selection=selection, progress=progress, keep_jobs=True,
                        machine_factory=factory)
    accounting = GpuAccounting.attach(run, workload)
    if accounting is None:
        raise ValueError("the cluster has no GPUs")
    run.run()
    records = []
    for job in run.pending:                      # every task that could run, in arrival order
        spec_job, task = job.job, job.task
        if job.node_indices is None:
            records.append(GpuTaskRecord(spec_job.job_id, spec_job.submit_s, spec_job.submit_s, -1, (),
                                         task.cpu_milli, task.gpu_demand_milli))
        else:
            records.append(GpuTaskRecord(spec_job.job_id, job.start_s, job.start_s + spec_job.run_for_s,
                                         int(job.node_indices[0]), tuple(job.gpu_indices[0]), task.cpu_milli,
                                         task.gpu_demand_milli))
    skipped = Counter()
    for reason, count in run.skipped.items():
        skipped[_SKIPS.get(reason, reason)] += count
    ties = getattr(getattr(selection, "framework", None), "tie_break", "first")
    return GpuReplayResult(**vars(accounting.series()), policy=label, normalization=normalization, ties=ties,
                           records=records, skipped=skipped)
