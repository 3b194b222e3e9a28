"""Filter -> Score -> Normalize -> weighted Combine: choosing a node (and its GPUs) for one task.

The shape of the Kubernetes scheduling framework, as the GPU papers use it (the PWR and FGD papers):

1. **Filter**: the nodes where the task fits now (:func:`greenslurm.clustermodel.gpu_state.fits`: CPU, memory,
   GPU model, and GPUs with enough free share).  No node left: the task fails.
2. **Score**: every scorer gives each feasible node a raw score in its own units (watts saved,
   milli-GPU of fragmentation avoided, ...).  A scorer with ``per_gpu`` scores a share task on each
   GPU that can hold it (``[nodes, max_gpus]``, NaN where it cannot) and so also picks the GPU.
3. **Normalize** (this module, never the scorers), one of two modes:

   * ``paper``: what the authors' simulator does, to reproduce their numbers.  Each scorer names
     the integer "points" its plugin makes of a raw score (``paper_points``: e.g. FGD's
     ``int(sigmoid(raw / 1000) * 100)``), applied per GPU before taking a node's best GPU (first
     index on ties), then the plugin's NormalizeScore across the feasible nodes (``paper_rescale``:
     PWR's integer min-max to [0, 100] with all-equal -> 100, BestFit's with all-equal -> 0).
   * ``clean``: raw scores as they are, best GPU by raw score, then min-max to [0, 1] across the
     feasible nodes (all equal -> 1).  No integer truncation, so no artificial ties.

4. **Combine**: weighted sum.  In ``paper`` mode the weights are the plugin weights of the
   scheduler configuration (``fgd=0.9`` -> 900, as the PWR paper's "alpha x 1000"); in ``clean``
   mode weights are divided by their sum.  The node with the highest total wins.  Ties (frequent
   with integer points) go, by default in ``paper`` mode, to the first node in the cluster's order
   (``tie_break="first"``), in ``clean`` mode to a node drawn uniformly with the framework's seeded
   generator (``"random"``, what kube-scheduler's ``selectHost`` says it does).  "first" is what
   reproduces the authors' published artifact results (hkust-adsl/kubernetes-scheduler-simulator,
   ``experiments/analysis/expected_results``): with random ties GpuPacking, GpuClustering and FGD
   end 3 to 5 points of GPU allocation below their curves, with first-node ties all six baselines
   land within about half a point (docs/gpu-scoring.md).

GPU choice on the winning node: a whole-GPU task gets the lowest-indexed fully free GPUs; a share task
gets the GPU picked by the scorer with the largest weight (first listed on ties) if it scores per
GPU (FGD, PWR), else the best-fitting GPU (least free share that holds it, lowest index on ties).
This is the authors' rule (the largest-weight plugin is the Open-Gpu-Share ``gpuSelMethod``,
"best" fit otherwise).

Scores depend only on a node's state and on what the task asks (not its memory), so node scores are
cached per task shape and recomputed only for nodes whose ``GpuState.version`` changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from greenslurm.clustermodel.gpu_state import GpuState, GpuTask, best_fit_gpu, exclusive_gpus, fits

NORMALIZATIONS = ("paper", "clean")
TIE_BREAKS = ("first", "random")
PAPER_WEIGHT_SCALE = 1000


@runtime_checkable
class Scorer(Protocol):
    """A node scorer.  ``raw`` returns one raw score per node in ``nodes`` (higher = better), or
    for a share task and ``per_gpu`` scorers ``[len(nodes), max_gpus]`` (NaN where the GPU cannot
    hold the task)."""

    name: str
    cacheable: bool          # the score depends only on the node's state and the task's score_key
    per_gpu: bool
    paper_points: str        # see POINTS
    paper_rescale: str       # see RESCALE

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        ...


@runtime_checkable
class Filter(Protocol):
    name: str

    def mask(self, state: GpuState, task: GpuTask) -> np.ndarray:
        ...


class FitFilter:
    """The fit rule of :func:`greenslurm.clustermodel.gpu_state.fits`, with the per-spec model mask cached."""

    name = "fit"

    def __init__(self) -> None:
        self._allowed: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}

    def mask(self, state: GpuState, task: GpuTask) -> np.ndarray:
        key = (id(state.nodes), task.gpu_spec)
        allowed = self._allowed.get(key)
        if allowed is None:
            allowed = self._allowed[key] = state.nodes.model_allowed(task.gpu_spec)
        return fits(state, task, allowed)


def _sigmoid_points(raw: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.floor((1.0 / (1.0 + np.exp(-raw / 1000.0))) * 100.0)     # Go: sigmoid(x) * 100


# Per-value steps, applied before a node's best GPU is taken.
POINTS = {
    "none": lambda raw: raw,
    "trunc": np.trunc,                                           # Go int64(x)
    "ceil": np.ceil,
    "sigmoid1000": _sigmoid_points,                              # int64(sigmoid(x / 1000) * 100)
    "affine100": lambda raw: np.trunc(100.0 * (1.0 + raw)),      # int64((1 + x) * 100)
}


def _minmax_int(points: np.ndarray, all_equal: float) -> np.ndarray:
    low, high = points.min(), points.max()
    if high == low:
        return np.full_like(points, all_equal)
    return np.floor((points - low) * 100.0 / (high - low))


def _minmax_unit(points: np.ndarray) -> np.ndarray:
    low, high = points.min(), points.max()
    if high == low:
        return np.ones_like(points)
    return (points - low) / (high - low)


# Across the feasible nodes, after the best GPU is taken.
RESCALE = {
    "none": lambda points: points,
    "minmax_equal_max": lambda points: _minmax_int(points, 100.0),   # PWR's NormalizeScore
    "minmax_equal_min": lambda points: _minmax_int(points, 0.0),     # the simulator's NormalizeScore
    "minmax01": _minmax_unit,
}


@dataclass(frozen=True, slots=True)
class Placement:
    node: int
    gpus: tuple[int, ...]


class _Entry:
    """Cached per-node points and GPU choice of one scorer for one task shape."""

    __slots__ = ("points", "gpu", "stamp")

    def __init__(self, size: int) -> None:
        self.points = np.zeros(size)
        self.gpu = np.full(size, -1, dtype=np.int64)
        self.stamp = np.full(size, -1, dtype=np.int64)


class ScoringFramework:
    """One scheduling policy: scorers with weights, a normalisation mode, a seeded tie-breaker.

    >>> from greenslurm.clustermodel import Cluster, NodeSpec
    >>> from greenslurm.clustermodel.gpu_state import GpuNodes
    >>> from greenslurm.allocation.scorers import make_policy
    >>> nodes = GpuNodes.from_cluster(Cluster([NodeSpec("a", cpus=32, memory_mb=100, gpus=2, gpu_model="T4"),
    ...                                        NodeSpec("b", cpus=32, memory_mb=100, gpus=2, gpu_model="T4")]))
    >>> state = GpuState(nodes)
    >>> policy = make_policy("bestfit", seed=1)
    >>> task = GpuTask(cpu_milli=4000, memory_mib=10, num_gpu=1, gpu_milli=500)
    >>> first = policy.choose(state, task); state.place(first.node, task, first.gpus)
    >>> second = policy.choose(state, task)           # best fit: the node already in use, same GPU
    >>> second.node == first.node, second.gpus == first.gpus
    (True, True)
    """

    def __init__(self, terms: Sequence[tuple[Scorer, float]], normalization: str = "paper",
                 seed=None, filters: Sequence[Filter] | None = None, label: str = "",
                 tie_break: str | None = None) -> None:
        if not terms:
            raise ValueError("a policy needs at least one scorer")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}")
        if any(w <= 0 for _, w in terms):
            raise ValueError("scorer weights must be > 0")
        self.scorers = [s for s, _ in terms]
        weights = np.array([w for _, w in terms], dtype=float)
        if normalization == "paper":
            self.weights = np.round(weights * PAPER_WEIGHT_SCALE)
        else:
            self.weights = weights / weights.sum()
        self.normalization = normalization
        self.filters = list(filters) if filters is not None else [FitFilter()]
        self.rng = np.random.default_rng(seed)
        self.label = label or ",".join(f"{s.name}={w:g}" for s, w in terms)
        chooser = int(np.argmax(weights))                # first of the largest weights
        self.gpu_chooser = chooser if self.scorers[chooser].per_gpu else None
        self._cache: list[dict[tuple, _Entry]] = [{} for _ in self.scorers]
        self._cache_nodes = None
        self.tie_break = tie_break or ("first" if normalization == "paper" else "random")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}")

    # -- the four stages -----------------------------------------------------------------------
    def feasible(self, state: GpuState, task: GpuTask) -> np.ndarray:
        mask = self.filters[0].mask(state, task)
        for extra in self.filters[1:]:
            mask = mask & extra.mask(state, task)
        return np.flatnonzero(mask)

    def _points(self, i: int, state: GpuState, task: GpuTask, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-node points of scorer i (before rescaling) and its GPU pick (-1: none)."""
        scorer = self.scorers[i]
        step = POINTS[scorer.paper_points] if self.normalization == "paper" else POINTS["none"]
        if not scorer.cacheable:
            return self._evaluate(scorer, step, state, task, nodes)
        if self._cache_nodes is not state.nodes:
            self._cache = [{} for _ in self.scorers]
            self._cache_nodes = state.nodes
        entry = self._cache[i].get(task.score_key)
        if entry is None:
            entry = self._cache[i][task.score_key] = _Entry(state.nodes.size)
        stale = nodes[entry.stamp[nodes] != state.version[nodes]]
        if len(stale):
            points, gpu = self._evaluate(scorer, step, state, task, stale)
            entry.points[stale] = points
            entry.gpu[stale] = gpu
            entry.stamp[stale] = state.version[stale]
        return entry.points[nodes], entry.gpu[nodes]

    def _evaluate(self, scorer: Scorer, step, state: GpuState, task: GpuTask,
                  nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raw = np.asarray(scorer.raw(state, task, nodes, self.rng), dtype=float)
        if raw.ndim == 1:
            return step(raw), np.full(len(nodes), -1, dtype=np.int64)
        points = np.where(np.isnan(raw), -np.inf, step(np.nan_to_num(raw, nan=0.0)))
        gpu = np.argmax(points, axis=1)
        return points[np.arange(len(nodes)), gpu], gpu

    def normalize(self, i: int, points: np.ndarray) -> np.ndarray:
        scorer = self.scorers[i]
        rescale = RESCALE[scorer.paper_rescale] if self.normalization == "paper" else RESCALE["minmax01"]
        return rescale(points)

    def scores(self, state: GpuState, task: GpuTask, nodes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Combined score of each node in ``nodes`` (all feasible) and each scorer's GPU pick."""
        total = np.zeros(len(nodes))
        picks = []
        for i, weight in enumerate(self.weights):
            points, gpu = self._points(i, state, task, nodes)
            total += weight * self.normalize(i, points)
            picks.append(gpu)
        return total, picks

    def explain(self, state: GpuState, task: GpuTask) -> dict:
        """Every stage for one task, for tests and debugging: the feasible nodes, each scorer's
        points (before rescaling), normalised scores and GPU picks, and the combined totals."""
        nodes = self.feasible(state, task)
        out = {"nodes": nodes, "points": {}, "normalized": {}, "gpu": {}, "total": np.zeros(len(nodes))}
        for i, scorer in enumerate(self.scorers):
            points, gpu = self._points(i, state, task, nodes) if len(nodes) else (np.zeros(0), np.zeros(0, int))
            normalized = self.normalize(i, points) if len(nodes) else points
            out["points"][scorer.name], out["normalized"][scorer.name], out["gpu"][scorer.name] = points, normalized, gpu
            out["total"] = out["total"] + self.weights[i] * normalized
        return out

    def choose(self, state: GpuState, task: GpuTask) -> Placement | None:
        """The node and GPUs for ``task``, or None when it fits nowhere."""
        nodes = self.feasible(state, task)
        if len(nodes) == 0:
            return None
        total, picks = self.scores(state, task, nodes)
        best = np.flatnonzero(total == total.max())
        at = int(best[0]) if len(best) == 1 or self.tie_break == "first" else int(best[self.rng.integers(len(best))])
        node = int(nodes[at])
        return Placement(node, self.gpus_for(state, task, node, picks[self.gpu_chooser][at]
                                             if self.gpu_chooser is not None else -1))

    @staticmethod
    def gpus_for(state: GpuState, task: GpuTask, node: int, preferred: int = -1) -> tuple[int, ...]:
        row = state.gpu_free_milli[node]
        if task.num_gpu == 0:
            return ()
        if not task.is_share:
            return exclusive_gpus(row, task.num_gpu)
        if preferred >= 0 and row[preferred] >= task.gpu_milli:
            return (int(preferred),)
        return (best_fit_gpu(row, task.gpu_milli),)
