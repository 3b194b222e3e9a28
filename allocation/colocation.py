"""GPU co-location of deep-learning training jobs (EaCO) and its baselines.

The pieces a co-location policy needs, all pure (no clock, no I/O):

* :data:`MODELS`: per-model measurements of the EaCO paper on one 8xV100 node (Tables 1 and 2):
  average power, epoch time, JCT, peak memory and average GPU utilisation.
* :data:`MEASURED_MIXES`: the six job sets the paper ran together (Tables 3 and 4): node power,
  slowdown (average JCT of the set / the mean exclusive JCT of its jobs), GPU utilisation.
* :class:`Interference`: the slowdown and node power of any job mix: Table 3 where the mix was
  measured, else a model fitted to Table 3 (:func:`fit_slowdown_model`, :data:`FITTED_BETA`); the
  *true* slowdown of an unmeasured mix deviates from the model by per-model sensitivities (seeded),
  so that a history has something to learn.
* :class:`PowerAccounting`: what the cluster's energy counts: ``active-nodes`` (the paper: a node
  with any job draws its static power plus its sets' dynamic power, a node without jobs is in a
  low-power state) or ``jobs`` (each set draws its share of its mix's node power, nothing else).
* :class:`History`: observed slowdowns; predicts unseen mixes from per-model contributions fitted by
  least squares, blended with the mean of the exact mix where it was observed.
* The policies behind :class:`ColocationPolicy`, registered once in :data:`COLOCATION_POLICIES`:
  ``fifo`` (exclusive), ``fifo-packed`` (pack only when nothing is free), ``gandiva`` (Gandiva's
  reactive mode: free set, else packing, else time-slicing; migration to freed sets by the machine),
  ``gandiva-gavel`` (Gandiva as Gavel's simulator has it: random pairs once the cluster is full),
  ``eaco``.  A policy is the node selection of the co-location machine
  (:class:`greenslurm.sim.machines.colocation.ColocationMachine`): the engine's FCFS queue asks the
  machine to place a job, and the machine asks the policy which GPU set (a :class:`Candidate`: node,
  first GPU, size, the jobs on it) the job takes.  GPU sets, not nodes, are what a policy weighs, so
  its question is :meth:`ColocationPolicy.choose` rather than a node ranking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
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
MODEL_NAMES = tuple(sorted(MODELS))


@dataclass(frozen=True, slots=True)
class MixMeasure:
    """A job set run together on one 8xV100 node (EaCO paper, Tables 3 and 4)."""

    power_w: float          # average node power (Table 3)
    slowdown: float         # average JCT of the set / mean exclusive JCT of its jobs (Tables 3 and 1)
    util_avg_pct: float     # average GPU utilisation (Table 4)


def _measured(names: tuple[str, ...], power_w: float, jct_h: float, util_pct: float):
    mix = tuple(sorted(names))
    alone_h = sum(MODELS[n].jct_s for n in mix) / len(mix) / H
    return mix, MixMeasure(power_w, jct_h / alone_h, util_pct)


# J1 AlexNet, J2 ResNet-18, J3 ResNet-50, J4 VGG-16 (Table 3: power, average JCT; Table 4: GPU util).
# e.g. J1&J3: 36.63 h / ((34.76 + 36.01) / 2 = 35.385 h) = 1.0352; all four: 44.21 / 35.5075 = 1.2451.
MEASURED_MIXES: dict[tuple[str, ...], MixMeasure] = dict((
    _measured(("alexnet", "resnet50"), 1390.0, 36.63, 40.25),
    _measured(("alexnet", "vgg16"), 1506.0, 36.51, 55.16),
    _measured(("resnet18", "vgg16"), 1644.0, 37.01, 61.06),
    _measured(("alexnet", "resnet18", "resnet50"), 1541.0, 38.28, 52.24),
    _measured(("alexnet", "resnet18", "vgg16"), 1713.0, 38.26, 66.99),
    _measured(("alexnet", "resnet18", "resnet50", "vgg16"), 1944.0, 44.21, 96.64),
))


def _util_sum(mix: Sequence[str]) -> float:
    return sum(MODELS[n].util_avg_pct for n in mix)


def slowdown_features(mix: Sequence[str]) -> tuple[float, float]:
    """The two features of the slowdown model: k - 1 (one switching overhead per extra job) and
    (k - 1) (U / 100)^2, U the sum of the jobs' average GPU utilisation (contention grows with the
    square of the load of the set).

    >>> slowdown_features(("alexnet", "vgg16"))        # U = 4.72 + 48.01 = 52.73
    (1, 0.2780...)
    """
    k = len(mix)
    u = _util_sum(mix) / 100.0
    return (k - 1, (k - 1) * u * u)


def fit_slowdown_model(measured: dict = MEASURED_MIXES) -> tuple[float, float]:
    """Least squares of ``slowdown - 1 = a (k - 1) + b (k - 1) (U / 100)^2`` over the measured mixes.

    On Table 3: a = 0.0210, b = 0.0597; errors on the measured mixes 0.0013-0.0095 in slowdown (the
    largest J1&J2&J3: model 1.0749, measured 1.0844; the four-job mix 1.2438 against 1.2451); leaving
    one mix out, the mean error on it is 0.022 (largest 0.088, the four-job mix, which the other five
    extrapolate to).

    >>> a, b = fit_slowdown_model(); round(a, 4), round(b, 4)
    (0.021, 0.0597)
    """
    s11 = s12 = s22 = t1 = t2 = 0.0
    for mix, m in measured.items():
        x1, x2 = slowdown_features(mix)
        y = m.slowdown - 1.0
        s11, s12, s22 = s11 + x1 * x1, s12 + x1 * x2, s22 + x2 * x2
        t1, t2 = t1 + x1 * y, t2 + x2 * y
    det = s11 * s22 - s12 * s12              # the 2x2 normal equations, solved by Cramer's rule
    return (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det


def fit_beta(measured: dict = MEASURED_MIXES) -> float:
    """Least squares of ``P_mix = max P + beta (sum P - max P)`` (Table 1 powers) over Table 3.

    Per mix beta runs from -0.04 (J1&J4: 1506 W, below VGG-16 alone) to 0.14 (all four); the fit
    0.122 misses the measured powers by 0.4-7.6 % (mean 2.1 %; leaving one mix out: mean 2.9 %).

    >>> round(fit_beta(), 4)
    0.122
    """
    num = den = 0.0
    for mix, m in measured.items():
        powers = [MODELS[n].power_w for n in mix]
        rest = sum(powers) - max(powers)
        num += rest * (m.power_w - max(powers))
        den += rest * rest
    return num / den


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Intercept and slope of the least-squares line through (xs, ys).

    >>> fit_line([0, 1, 2], [1, 3, 5])
    (1.0, 2.0)
    """
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


SLOWDOWN_A, SLOWDOWN_B = fit_slowdown_model()
FITTED_BETA = fit_beta()
# The static power of an active node (server and idle GPUs): Table 1 node power against average GPU
# utilisation is 688.5 W + 17.7 W per % (least squares over the four models); at 0 % a node with a job
# still draws 688.5 W.  Under active-node accounting a set adds (P_mix - 688.5 W) x g/8.
NODE_STATIC_W = fit_line([m.util_avg_pct for m in MODELS.values()], [m.power_w for m in MODELS.values()])[0]


def model_slowdown(mix: Sequence[str]) -> float:
    """The fitted slowdown of ``mix`` (1 for a job alone).

    >>> round(model_slowdown(("alexnet", "alexnet")), 4)     # 1 + 0.0210 + 0.0597 x 0.0944^2
    1.0215
    """
    if len(mix) <= 1:
        return 1.0
    x1, x2 = slowdown_features(mix)
    return 1.0 + SLOWDOWN_A * x1 + SLOWDOWN_B * x2


@dataclass(frozen=True, slots=True)
class Interference:
    """The interference and power model of co-located jobs.

    Where Table 3 measured a mix, its slowdown and power are the measured ones (prior and truth
    alike).  Elsewhere the prior is the fitted model (:func:`model_slowdown`, ``beta``); the *true*
    excess slowdown is the model's times ``1 + jitter x mean(u_m) + mix_noise x u_mix``, with u_m a
    per-model sensitivity and u_mix a per-mix deviation, both deterministic in [-1, 1) from ``seed``:
    what a history can learn from per-model features, and what it cannot.
    """

    beta: float = FITTED_BETA
    jitter: float = 0.5
    seed: int = 0
    mix_noise: float = 0.1

    def prior(self, mix: tuple[str, ...]) -> float:
        """The slowdown known before any observation: Table 3, else the fitted model.

        >>> Interference().prior(("alexnet", "resnet50")) == MEASURED_MIXES[("alexnet", "resnet50")].slowdown
        True
        >>> Interference().prior(("vgg16",))
        1.0
        """
        measured = MEASURED_MIXES.get(mix)
        return measured.slowdown if measured is not None else model_slowdown(mix)

    def sensitivity(self, model: str) -> float:
        """The hidden per-model sensitivity u_m in [-1, 1)."""
        return _unit_hash((self.seed, "model", model))

    def true_slowdown(self, mix: tuple[str, ...]) -> float:
        """The slowdown every job of ``mix`` (sorted model names) really sees; never below 1.

        >>> round(Interference(jitter=0.0, mix_noise=0.0).true_slowdown(("alexnet", "alexnet")), 4)
        1.0215
        """
        if len(mix) <= 1:
            return 1.0
        prior = self.prior(mix)
        if mix in MEASURED_MIXES:
            return prior
        deviation = self.jitter * sum(self.sensitivity(m) for m in mix) / len(mix)
        deviation += self.mix_noise * _unit_hash((self.seed, "mix") + mix)
        return max(1.0, 1.0 + (prior - 1.0) * (1.0 + deviation))

    def mix_power_w(self, mix: Sequence[str]) -> float:
        """Node power of ``mix`` running packed on a whole node: Table 3, else max P + beta (sum P - max P).

        >>> Interference().mix_power_w(("alexnet", "resnet18", "vgg16"))
        1713.0
        >>> round(Interference(beta=0.1).mix_power_w(("alexnet", "alexnet")), 1)    # 712 + 0.1 x 712
        783.2
        """
        mix = tuple(sorted(mix))
        measured = MEASURED_MIXES.get(mix)
        if measured is not None:
            return measured.power_w
        powers = [MODELS[n].power_w for n in mix]
        top = max(powers)
        return top + self.beta * (sum(powers) - top)


def _unit_hash(key: tuple) -> float:
    """A deterministic number in [-1, 1) from a tuple (stable across runs, unlike hash())."""
    text = "|".join(map(str, key)).encode()
    value = 2166136261
    for byte in text:
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value / 2 ** 31 - 1.0


ACCOUNTINGS = ("active-nodes", "jobs")


@dataclass(frozen=True, slots=True)
class PowerAccounting:
    """What the cluster's energy counts.

    ``active-nodes`` (the EaCO paper: it counts active nodes and puts unused ones in low-power
    states): a node with any job draws ``static_w`` plus, per set of g GPUs, (P - static_w) x g/8,
    P the node power of the set's mix; a node without jobs draws ``idle_node_w``.  ``jobs``: a set
    draws P x g/8 and nothing else is counted but idle nodes at ``idle_node_w``.

    >>> PowerAccounting().set_w(712.0, 8), PowerAccounting("jobs").set_w(712.0, 1)
    (23.5..., 89.0)
    """

    mode: str = "active-nodes"
    static_w: float = NODE_STATIC_W
    idle_node_w: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in ACCOUNTINGS:
            raise ValueError(f"unknown power accounting {self.mode!r}; choose from {', '.join(ACCOUNTINGS)}")

    @property
    def node_static_w(self) -> float:
        return self.static_w if self.mode == "active-nodes" else 0.0

    def set_w(self, node_w: float, gpus: int) -> float:
        """Power of a set of ``gpus`` GPUs whose jobs would draw ``node_w`` on a whole node."""
        return (node_w - self.node_static_w) * gpus / GPUS_PER_NODE


class History:
    """Observed slowdowns; predicts any mix.

    Measured mixes (Table 3) start from their measurement.  For the others the prior (the fitted
    model) is corrected by per-model contributions: the relative deviation of a mix's excess slowdown,
    r = (s - 1) / (prior - 1) - 1, is modelled as sum over models of share_m x w_m (share_m = the
    model's fraction of the mix's jobs), w fitted by ridge least squares (penalty ``ridge``) over every
    observation of an unmeasured mix.  A mix observed n times blends its own mean in:
    (sum of its observations + ``blend`` x model) / (n + ``blend``).

    >>> h = History(Interference())
    >>> round(h.predict(("alexnet", "alexnet")), 4)                   # the fitted model
    1.0215
    >>> e = h.predict(("alexnet", "alexnet")) - 1
    >>> h.observe(("alexnet", "alexnet"), 1 + 3 * e)                   # r = 3e / e - 1 = 2
    >>> h._solve()[0]                                   # w_alexnet = x r / (x^2 + ridge) = 2 / (1 + 1)
    1.0
    >>> prior = h.interference.prior(("alexnet", "resnet18"))          # the fitted model: 1.0225
    >>> round((h.predict(("alexnet", "resnet18")) - 1) / (prior - 1), 6)   # unseen: r = 0.5 x 1
    1.5
    >>> round((h.predict(("alexnet", "alexnet")) - 1) / e, 6)       # seen once: (3e + (1 + 1) e) / 2
    2.5
    """

    def __init__(self, interference: Interference, ridge: float = 1.0, blend: float = 1.0) -> None:
        self.interference = interference
        self.ridge = ridge
        self.blend = blend
        n = len(MODEL_NAMES)
        self._xtx = [[ridge if i == j else 0.0 for j in range(n)] for i in range(n)]
        self._xty = [0.0] * n
        self._weights: list[float] | None = [0.0] * n
        self._sum: dict[tuple[str, ...], float] = {}
        self._count: dict[tuple[str, ...], int] = {}
        self.log: list[tuple[tuple[str, ...], float]] = []    # every observation, in order
        self._predicted: dict[tuple[str, ...], float] = {}    # until the next observation

    @staticmethod
    def shares(mix: Sequence[str]) -> list[float]:
        """Each model's fraction of the mix's jobs, in :data:`MODEL_NAMES` order."""
        return [sum(1 for m in mix if m == name) / len(mix) for name in MODEL_NAMES]

    def observe(self, mix: tuple[str, ...], slowdown: float) -> None:
        if len(mix) < 2:
            return
        self.log.append((mix, slowdown))
        self._predicted.clear()
        self._sum[mix] = self._sum.get(mix, 0.0) + slowdown
        self._count[mix] = self._count.get(mix, 0) + 1
        if mix in MEASURED_MIXES:
            return
        prior = self.interference.prior(mix)
        r = (slowdown - 1.0) / (prior - 1.0) - 1.0
        x = self.shares(mix)
        for i, xi in enumerate(x):
            if xi:
                self._xty[i] += xi * r
                for j, xj in enumerate(x):
                    self._xtx[i][j] += xi * xj
        self._weights = None

    def _solve(self) -> list[float]:
        """w = (X'X + ridge I)^-1 X'r by Gaussian elimination (4 unknowns)."""
        n = len(self._xty)
        a = [row[:] + [self._xty[i]] for i, row in enumerate(self._xtx)]
        for col in range(n):
            pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
            a[col], a[pivot] = a[pivot], a[col]
            for r in range(n):
                if r != col:
                    f = a[r][col] / a[col][col]
                    a[r] = [v - f * p for v, p in zip(a[r], a[col])]
        return [a[i][n] / a[i][i] for i in range(n)]

    def model_predict(self, mix: tuple[str, ...]) -> float:
        """The prediction from the prior and the per-model contributions only."""
        prior = self.interference.prior(mix)
        if len(mix) <= 1 or mix in MEASURED_MIXES:
            return prior
        if self._weights is None:
            self._weights = self._solve()
        r = sum(x * w for x, w in zip(self.shares(mix), self._weights))
        return max(1.0, 1.0 + (prior - 1.0) * (1.0 + r))

    def predict(self, mix: tuple[str, ...]) -> float:
        cached = self._predicted.get(mix)
        if cached is not None:
            return cached
        model = self.model_predict(mix)
        count = self._count.get(mix)
        if count:
            model = (self._sum[mix] + self.blend * model) / (count + self.blend)
        self._predicted[mix] = model
        return model

    @property
    def observations(self) -> int:
        return len(self.log)


def possible_mixes(max_jobs: int = 4, mem_threshold_pct: float = 100.0) -> list[tuple[str, ...]]:
    """Every mix of 2..``max_jobs`` jobs whose peak memory fits (the mixes a packed set can hold).

    >>> len(possible_mixes(2)), ("vgg16", "vgg16") in possible_mixes(2)       # 51.29 x 2 > 100
    (9, False)
    """
    from itertools import combinations_with_replacement
    out = []
    for k in range(2, max_jobs + 1):
        for mix in combinations_with_replacement(MODEL_NAMES, k):
            if sum(MODELS[m].mem_peak_pct for m in mix) <= mem_threshold_pct + 1e-9:
                out.append(mix)
    return out


def prediction_error(history: History, mixes: Sequence[tuple[str, ...]]) -> float:
    """Mean absolute error of ``history``'s predictions against the true slowdowns of ``mixes``."""
    truth = history.interference.true_slowdown
    return sum(abs(history.predict(m) - truth(m)) for m in mixes) / len(mixes)


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


@lru_cache(maxsize=None)
def set_util(mix: tuple[str, ...], sliced: bool = False) -> float:
    """GPU utilisation of a set running ``mix`` (sorted names): Table 4 for a measured mix, else the sum
    of the jobs' average utilisation; time-sliced, their mean.

    >>> set_util(("alexnet", "vgg16")), set_util(("vgg16", "vgg16"), sliced=True)
    (55.16, 48.01)
    """
    utils = [MODELS[name].util_avg_pct for name in mix]
    if sliced:
        return sum(utils) / len(utils)
    measured = MEASURED_MIXES.get(mix)
    return measured.util_avg_pct if measured is not None else sum(utils)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A GPU set a job could take: free (no job) or shared with ``jobs`` (time-sliced if ``sliced``)."""

    node: int
    first_gpu: int
    gpus: int
    jobs: tuple[JobView, ...]
    node_active: bool                  # the node runs something already (a free set on a busy node)
    sliced: bool = False
    util_known: float = math.nan       # util_pct worked out already (the machine passes it)

    @property
    def util_pct(self) -> float:
        """GPU utilisation of the set now: Table 4 for a measured mix, else the sum of its jobs'
        average utilisation (a time-sliced set: their mean).

        >>> job = JobView("x", MODELS["alexnet"], 1, 1, math.inf)
        >>> Candidate(0, 0, 1, (job, JobView("y", MODELS["vgg16"], 1, 1, math.inf)), True).util_pct
        55.16
        """
        if self.util_known == self.util_known:          # not NaN
            return self.util_known
        if not self.jobs:
            return 0.0
        return set_util(tuple(sorted(job.model.name for job in self.jobs)), self.sliced)

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
    # Gandiva: time-slicing in quanta (Gandiva: 60 s) with a suspend/resume at a mini-batch
    # boundary each (assumed 0.5 s); a migration checkpoints and restores the job (assumed 30 s).
    slice_quantum_s: float = 60.0
    slice_switch_s: float = 0.5
    migration_s: float = 30.0

    @property
    def slice_efficiency(self) -> float:
        """The share of a time-sliced set's time spent training.

        >>> round(ColocationSettings().slice_efficiency, 5)        # 60 / 60.5
        0.99174
        """
        return self.slice_quantum_s / (self.slice_quantum_s + self.slice_switch_s)


def memory_fits(candidate: Candidate, job: JobView, settings: ColocationSettings) -> bool:
    return candidate.mem_pct + job.model.mem_peak_pct <= settings.mem_threshold_pct + 1e-9


def can_share(candidate: Candidate, job: JobView, settings: ColocationSettings) -> bool:
    return (not job.exclusive_only and not any(j.exclusive_only for j in candidate.jobs) and not candidate.sliced
            and len(candidate.jobs) < settings.max_jobs and memory_fits(candidate, job, settings))


class ColocationPolicy(Protocol):
    """The GPU-set selection of the co-location machine."""

    name: str
    strict_fifo: bool       # True: a job that cannot be placed blocks the ones behind it
    recheck: bool           # True: re-check deadlines after the first epoch on a shared set (EaCO)
    migrates: bool          # True: the machine moves jobs off shared sets onto freed sets (Gandiva)
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
    migrates = False

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
    """Gandiva (Xiao et al., OSDI 2018) in its reactive mode, as the EaCO paper compares with it.

    Every waiting job is tried (no head-of-line blocking).  A job takes a free set; else it packs onto
    the shared set of least GPU utilisation where its memory fits; else it oversubscribes: it joins
    the set of its size with the fewest jobs (below ``max_jobs``) and the set is *time-sliced* (its
    jobs train in turn, quanta of ``slice_quantum_s``).  When a set frees, the machine *migrates* a
    job from the most loaded shared set onto it (time-sliced sets first), paying ``migration_s``; no
    work is lost (suspend and migration happen at mini-batch boundaries, from a checkpoint).  A packed
    set whose slowdown exceeds what time-slicing would cost (k jobs: k / efficiency) is time-sliced
    instead (Gandiva's introspection: packing is kept only where it beats time-slicing).
    """

    name = "gandiva"
    strict_fifo = False
    migrates = True
    _full: Sequence[Candidate] | None = None      # the last candidate list with every set at max_jobs

    def choose(self, job, candidates, now_s):
        if candidates is self._full:       # the same sets as a moment ago, all full: no job fits
            return None
        free = _first_free(candidates)
        if free is not None:
            return free
        shared = [c for c in candidates if c.jobs and can_share(c, job, self.settings)]
        if shared:
            return min(shared, key=lambda c: (c.util_pct, len(c.jobs)))
        crowded = [c for c in candidates if c.jobs and len(c.jobs) < self.settings.max_jobs
                   and not any(j.exclusive_only for j in c.jobs)]
        if not crowded and all(len(c.jobs) >= self.settings.max_jobs for c in candidates):
            self._full = candidates
        if job.exclusive_only:
            return None
        return min(crowded, key=lambda c: len(c.jobs), default=None)


class GandivaGavel(Gandiva):
    """Gandiva as Gavel's simulator implements it (its ``Gandiva_Packing`` policy, the one the EaCO paper
    ran): when the jobs no longer fit, every job is paired at random with another job of the same size
    and the pairs time-share the GPUs; no migration.  Here: a free set; else a random set holding
    exactly one job where memory fits (a pair; seeded, so runs repeat); else Gandiva's rule (pack,
    else time-slice)."""

    name = "gandiva-gavel"
    migrates = False

    def __init__(self, settings: ColocationSettings | None = None, history: History | None = None) -> None:
        super().__init__(settings, history)
        import random
        self._rng = random.Random(0)

    def choose(self, job, candidates, now_s):
        free = _first_free(candidates)
        if free is not None:
            return free
        singles = [c for c in candidates if len(c.jobs) == 1 and can_share(c, job, self.settings)]
        if singles:
            return self._rng.choice(singles)
        return super().choose(job, candidates, now_s)


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
    migrates = False

    def __init__(self, settings: ColocationSettings | None = None, history: History | None = None) -> None:
        self.settings = settings or ColocationSettings()
        self.history = history or History(Interference())

    def keeps_deadlines(self, jobs: Sequence[JobView], mix: tuple[str, ...], now_s: float,
                        slowdown: float | None = None) -> bool:
        """Whether every job of ``jobs`` finishes by its deadline at the (predicted) slowdown of ``mix``."""
        factor = self.history.predict(mix) if slowdown is None else slowdown
        return all(now_s + j.remaining_epochs * j.model.epoch_s * factor <= j.deadline_s + 1e-6 for j in jobs)

    def _ranked(self, job: JobView, candidates: Sequence[Candidate], now_s: float) -> list[tuple[Candidate, float]]:
        """Algorithm 2's candidates for ``job``, highest utilisation first, each with the predicted
        slowdown of its mix, keeping only those where the jobs already there keep their deadlines.
        That depends on the job's model only, so it is worked out once per model while the candidate
        list is the same object (the machine keeps it until something changes), the time and the
        history are the same: a pass over a long queue asks the same question many times."""
        stamp = (now_s, self.history.observations)
        if candidates is not self._ranked_for or stamp != self._ranked_stamp:
            self._ranked_for, self._ranked_stamp, self._ranked_cache = candidates, stamp, {}
        key = (job.model.name, job.exclusive_only)
        ranked = self._ranked_cache.get(key)
        if ranked is None:
            settings = self.settings
            eligible = [c for c in candidates if not c.jobs
                        or (c.util_pct < settings.util_threshold_pct and can_share(c, job, settings))]
            eligible.sort(key=lambda c: (-c.util_pct, not c.node_active, c.node, c.first_gpu))
            ranked = []
            for c in eligible:
                factor = self.history.predict(c.mix_with(job))
                if self.keeps_deadlines(c.jobs, (), now_s, factor):
                    ranked.append((c, factor))
            self._ranked_cache[key] = ranked
        return ranked

    _ranked_for: Sequence[Candidate] | None = None
    _ranked_stamp: tuple = ()

    def choose(self, job, candidates, now_s):
        own_s = job.remaining_epochs * job.model.epoch_s
        ranked = self._ranked(job, candidates, now_s)
        for candidate, factor in ranked:
            if now_s + own_s * factor <= job.deadline_s + 1e-6:      # the job's own deadline, too
                return candidate
        return next((c for c, _ in ranked if not c.jobs), None)     # else alone on a free set (all kept)


COLOCATION_POLICIES: dict[str, type] = {policy.name: policy for policy in (FifoExclusive, FifoPacked, Gandiva,
                                                                          GandivaGavel, EaCO)}

