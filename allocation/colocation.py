"""GPU co-location of deep-learning training jobs (EaCO) and its baselines.

The pieces a co-location policy needs, all pure (no clock, no I/O):

* :data:`MODELS`: per-model measurements of the paper on one 8xV100 node (Tables 1 and 2):
  average power, epoch time, JCT, peak memory and average GPU utilisation.
* :class:`Interference`: how much co-location slows each job, by the number of jobs on a GPU set
  (paper: +3-5 % epoch time for 2 jobs, +7-9 % for 3, +19 % JCT for 4), and the power of a shared
  set (``max P + beta * (sum P - max P)``, ``beta`` fitted to Table 3).
* :class:`History`: observed slowdowns per job mix, the prediction for a candidate set.
* The policies behind :class:`ColocationPolicy`, registered once in :data:`COLOCATION_POLICIES`:
  ``fifo`` (exclusive), ``fifo-packed`` (pack only when nothing is free), ``gandiva`` (greedy, packs
  onto the least utilised set), ``eaco``.  A policy is the node selection of the co-location machine
  (:class:`greenslurm.sim.machines.colocation.ColocationMachine`): the engine's FCFS queue asks the
  machine to place a job, and the machine asks the policy which GPU set (a :class:`Candidate`: node,
  first GPU, size, the jobs on it) the job takes.  GPU sets, not nodes, are what a policy weighs, so
  its question is :meth:`ColocationPolicy.choose` rather than a node ranking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence

GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A training model measured alone on one 8xV100 node (EaCO paper, Tables 1-2)."""

    name: str
    power_w: float          # average node power while training (Table 1)
    epoch_s: float          # average epoch time (Table 1)
    jct_s: float            # job completion time of the full training (Table 1)
    mem_peak_pct: float     # maximum GPU memory utilisation (Table 2)
    util_avg_pct: float     # average GPU (SM) utilisation (Table 2)
    util_max_pct: float

    @property
    def epochs(self) -> int:
        """Epochs of the measured training run: JCT / epoch time, rounded.

        >>> MODELS["alexnet"].epochs      # 34.76 h / 0.39 h
        89
        """
        return round(self.jct_s / self.epoch_s)


H = 3600.0
MODELS: dict[str, ModelProfile] = {m.name: m for m in (
    ModelProfile("alexnet", 712.0, 0.39 * H, 34.76 * H, 4.21, 4.72, 11.0),
    ModelProfile("resnet18", 959.0, 0.39 * H, 35.13 * H, 14.63, 11.17, 27.29),
    ModelProfile("resnet50", 1330.0, 0.40 * H, 36.01 * H, 43.92, 36.61, 72.04),
    ModelProfile("vgg16", 1533.0, 0.40 * H, 36.13 * H, 51.29, 48.01, 81.5),
)}

# Slowdown of every job on a set with k jobs (epoch-time growth, the EaCO paper section 6.1): 2 jobs
# +3-5 % (Table 3: J1&J3 +3.0 %, J2&J4 +4.1 %), 3 jobs +7-9 % (J1&J2&J3 +8.1 %), 4 jobs +19 % JCT.
DEFAULT_SLOWDOWN = {1: 1.0, 2: 1.04, 3: 1.08, 4: 1.19}
# Power of a shared set: max P + beta * (sum P - max P).  Fitted to Table 3 (six job sets,
# beta between 0.08 and 0.14, mean 0.10; e.g. J1&J2&J4: 1533 + 0.108 * (712 + 959) = 1713 W).
DEFAULT_BETA = 0.10


@dataclass(frozen=True, slots=True)
class Interference:
    """The interference and power model of co-located jobs.

    ``jitter`` makes the true slowdown of a job mix differ from the prior (deterministically, by
    ``seed`` and the mix), so that the history has something to learn and predictions can miss.
    """

    slowdown: dict = field(default_factory=lambda: dict(DEFAULT_SLOWDOWN))
    beta: float = DEFAULT_BETA
    jitter: float = 0.5
    seed: int = 0

    def prior(self, k: int) -> float:
        """The measured slowdown for ``k`` jobs (beyond the table: the last step again per job).

        >>> Interference().prior(3), Interference().prior(1)
        (1.08, 1.0)
        """
        table = self.slowdown
        if k in table:
            return float(table[k])
        top = max(table)
        step = table[top] - table.get(top - 1, 1.0)
        return float(table[top] + step * (k - top))

    def true_slowdown(self, mix: tuple[str, ...]) -> float:
        """The slowdown every job of ``mix`` (sorted model names) really sees.

        >>> Interference(jitter=0.0).true_slowdown(("alexnet", "vgg16"))
        1.04
        """
        k = len(mix)
        base = self.prior(k)
        if k <= 1 or not self.jitter:
            return base
        u = _unit_hash((self.seed,) + mix)            # in [-1, 1)
        return max(1.0, 1.0 + (base - 1.0) * (1.0 + self.jitter * u))    # sharing never speeds a job up

    def set_power_w(self, models: Sequence[ModelProfile], gpus: int) -> float:
        """Power of a GPU set of ``gpus`` GPUs running ``models`` together (a share of a node).

        The tables measure whole 8-GPU nodes; a set of g GPUs draws g/8 of it.

        >>> round(Interference().set_power_w([MODELS["alexnet"], MODELS["resnet50"]], 8), 1)
        1401.2
        """
        if not models:
            return 0.0
        powers = [m.power_w for m in models]
        top = max(powers)
        return (top + self.beta * (sum(powers) - top)) * gpus / GPUS_PER_NODE


def _unit_hash(key: tuple) -> float:
    """A deterministic number in [-1, 1) from a tuple (stable across runs, unlike hash())."""
    text = "|".join(map(str, key)).encode()
    value = 2166136261
    for byte in text:
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value / 2 ** 31 - 1.0


class History:
    """Observed slowdowns by job mix; predicts a candidate mix from what was seen, else the prior.

    >>> h = History(Interference())
    >>> h.predict(("alexnet", "vgg16"))
    1.04
    >>> h.observe(("alexnet", "vgg16"), 1.06); h.observe(("alexnet", "vgg16"), 1.08)
    >>> round(h.predict(("alexnet", "vgg16")), 3)
    1.07
    """

    def __init__(self, interference: Interference) -> None:
        self.interference = interference
        self._sum: dict[tuple[str, ...], float] = {}
        self._count: dict[tuple[str, ...], int] = {}

    def observe(self, mix: tuple[str, ...], slowdown: float) -> None:
        self._sum[mix] = self._sum.get(mix, 0.0) + slowdown
        self._count[mix] = self._count.get(mix, 0) + 1

    def predict(self, mix: tuple[str, ...]) -> float:
        count = self._count.get(mix)
        if count:
            return self._sum[mix] / count
        return self.interference.prior(len(mix))

    @property
    def observations(self) -> int:
        return sum(self._count.values())


# -- what a policy sees ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JobView:
    """A job as a policy sees it: its model, GPUs, remaining epochs and deadline."""

    job_id: str
    model: ModelProfile
    gpus: int
    remaining_epochs: float
    deadline_s: float
    exclusive_only: bool = False       # EaCO undid a co-location of it: run it alone


@dataclass(frozen=True, slots=True)
class Candidate:
    """A GPU set a job could take: free (no job) or shared with ``jobs``."""

    node: int
    first_gpu: int
    gpus: int
    jobs: tuple[JobView, ...]
    node_active: bool                  # the node runs something already (a free set on a busy node)

    @property
    def util_pct(self) -> float:
        """GPU utilisation of the set now: the sum of its jobs' average utilisation."""
        return sum(job.model.util_avg_pct for job in self.jobs)

    @property
    def mem_pct(self) -> float:
        return sum(job.model.mem_peak_pct for job in self.jobs)

    def mix_with(self, job: JobView) -> tuple[str, ...]:
        return tuple(sorted([j.model.name for j in self.jobs] + [job.model.name]))


@dataclass(frozen=True, slots=True)
class ColocationSettings:
    util_threshold_pct: float = 80.0    # share a set only if its GPUs are below this (EaCO Alg. 2)
    mem_threshold_pct: float = 100.0    # the peak memory of all jobs on a set must fit
    max_jobs: int = 4                   # the paper measured up to four jobs per set


def memory_fits(candidate: Candidate, job: JobView, settings: ColocationSettings) -> bool:
    return candidate.mem_pct + job.model.mem_peak_pct <= settings.mem_threshold_pct + 1e-9


def can_share(candidate: Candidate, job: JobView, settings: ColocationSettings) -> bool:
    return (not job.exclusive_only and not any(j.exclusive_only for j in candidate.jobs)
            and len(candidate.jobs) < settings.max_jobs and memory_fits(candidate, job, settings))


class ColocationPolicy(Protocol):
    """The GPU-set selection of the co-location machine."""

    name: str
    strict_fifo: bool       # True: a job that cannot be placed blocks the ones behind it
    recheck: bool           # True: re-check deadlines after the first epoch on a shared set (EaCO)
    history: "History | None"     # learned slowdowns the machine feeds (None: the policy needs none)

    def choose(self, job: JobView, candidates: Sequence[Candidate], now_s: float) -> Candidate | None:
        """The set ``job`` takes among ``candidates`` (free sets and shared sets of its size, by node
        and first GPU), or None: the job waits."""
        ...

    def keeps_deadlines(self, jobs: Sequence[JobView], mix: tuple[str, ...], now_s: float) -> bool: ...


def _first_free(candidates: Sequence[Candidate]) -> Candidate | None:
    return next((c for c in candidates if not c.jobs), None)


class FifoExclusive:
    """The default of Gavel: first in, first out, every job on its own GPUs (first fit)."""

    name = "fifo"
    strict_fifo = True
    recheck = False

    def __init__(self, settings: ColocationSettings | None = None, history: History | None = None) -> None:
        self.settings = settings or ColocationSettings()
        self.history = history

    def keeps_deadlines(self, jobs, mix, now_s) -> bool:
        return True

    def choose(self, job, candidates, now_s):
        return _first_free(candidates)


class FifoPacked(FifoExclusive):
    """FIFO; packs a job onto a shared set (fewest jobs first) only when no free set is left."""

    name = "fifo-packed"

    def choose(self, job, candidates, now_s):
        free = _first_free(candidates)
        if free is not None:
            return free
        shared = [c for c in candidates if c.jobs and can_share(c, job, self.settings)]
        return min(shared, key=lambda c: len(c.jobs), default=None)


class Gandiva(FifoExclusive):
    """Gandiva-style greedy packing: every waiting job is tried (no head-of-line blocking); a free set
    first, else the shared set of least GPU utilisation (the least interference)."""

    name = "gandiva"
    strict_fifo = False

    def choose(self, job, candidates, now_s):
        free = _first_free(candidates)
        if free is not None:
            return free
        shared = [c for c in candidates if c.jobs and can_share(c, job, self.settings)]
        return min(shared, key=lambda c: (c.util_pct, len(c.jobs)), default=None)


class EaCO:
    """Energy-aware co-allocation (EaCO paper, Algorithms 1-2).

    Candidates (Alg. 2): free sets, and shared sets whose GPUs are all below the utilisation
    threshold and where the peak memory of all jobs fits.  The candidate of highest utilisation
    whose predicted JCT keeps every job on it within its deadline is chosen (a free set on a node
    that already runs something counts above one on an idle node).  If no candidate keeps the
    deadlines, the job runs alone on a free set if there is one, else waits.  The re-check after the
    first epoch and the undo are done by the co-location machine (``greenslurm.sim.machines.colocation``),
    with :meth:`keeps_deadlines`.
    """

    name = "eaco"
    strict_fifo = False
    recheck = True

    def __init__(self, settings: ColocationSettings | None = None, history: History | None = None) -> None:
        self.settings = settings or ColocationSettings()
        self.history = history or History(Interference())

    def keeps_deadlines(self, jobs: Sequence[JobView], mix: tuple[str, ...], now_s: float,
                        slowdown: float | None = None) -> bool:
        """Whether every job of ``jobs`` finishes by its deadline at the (predicted) slowdown of ``mix``."""
        factor = self.history.predict(mix) if slowdown is None else slowdown
        return all(now_s + j.remaining_epochs * j.model.epoch_s * factor <= j.deadline_s + 1e-6 for j in jobs)

    def choose(self, job, candidates, now_s):
        settings = self.settings
        eligible = [c for c in candidates if not c.jobs
                    or (c.util_pct < settings.util_threshold_pct and can_share(c, job, settings))]
        ranked = sorted(eligible, key=lambda c: (-c.util_pct, not c.node_active, c.node, c.first_gpu))
        for candidate in ranked:
            if self.keeps_deadlines(candidate.jobs + (job,), candidate.mix_with(job), now_s):
                return candidate
        return next((c for c in ranked if not c.jobs), None)


COLOCATION_POLICIES: dict[str, type] = {policy.name: policy for policy in (FifoExclusive, FifoPacked, Gandiva, EaCO)}


def finite_or_inf(value: float | None) -> float:
    """A deadline: None means none (infinite).

    >>> finite_or_inf(None), finite_or_inf(5.0)
    (inf, 5.0)
    """
    return math.inf if value is None else float(value)
