"""Node selection: the one seam every queue strategy asks "which of these fitting nodes, in what order?".

A queue strategy decides *when* a job starts; the machine model filters the nodes where it fits
(CPUs, memory, whole GPUs and GPU shares, GPU models, power state); the node selection ranks those
candidates and, on the chosen node, picks the GPUs.  A selection never knows which strategy or host
asked.  One option family names them all (``--select`` on the command line, ``select`` in a
scenario file):

============== ====================================================================================
``firstfit``   the lowest-numbered fitting nodes (Slurm's default node order); the default
``consecutive`` Slurm's select/cons_tres choice: the best fit among runs of consecutive nodes; the
               default of the Slurm queue
``balanced``   Nileshwar & Schwiegelshohn's Balanced: the least-loaded nodes (earliest tail: when their jobs end)
``bestfit``    Nileshwar & Schwiegelshohn's BestFit: the most-loaded nodes that fit (latest tail)
``minidle``    Nileshwar & Schwiegelshohn's MinIdle: the nodes whose tail leaves the least idle time before the start
``phase``      pVOCL's topology-aware placement: a node on the phase drawing least, the fullest
               there (needs power states)
``pwr``        PWR (Lettich et al.): the node whose estimated power grows least
``fgd``        FGD (Weng et al.): the node whose expected GPU fragmentation grows least
``gpubestfit`` the GPU papers' BestFit baseline (least weighted CPU and GPU left)
``dotprod``, ``gpupacking``, ``gpuclustering``, ``random``: the GPU papers' other baselines
mixes         ``pwr=0.1,fgd=0.9``: weighted sums of GPU scorers (the framework normalises and weighs)
============== ====================================================================================

The load rules (``balanced``, ``bestfit``, ``minidle``, ``firstfit``) may carry ``+backfill``: that
only matters to the deadline queue, whose planner may then use enclosed idle gaps (Nileshwar & Schwiegelshohn's
backfilling); the EASY and conservative queues backfill by themselves.

GPU scorers run in the :class:`~greenslurm.allocation.scorers.framework.ScoringFramework`
(Filter -> Score -> Normalize -> weighted Combine); the scorers give raw scores only.  A job on
several nodes takes the best ``count`` nodes by combined score (ties: the framework's tie-break);
for one node that is exactly the framework's choice.

To add a selection: a class with ``name``, ``rank`` and ``gpus`` (see :class:`NodeSelection`) in a
small module, and one line in :data:`SELECTIONS`.  A GPU scorer that should mix with weights goes
into ``allocation/scorers/`` and its registry ``SCORERS`` instead; every scorer there is a selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

import numpy as np

from greenslurm.allocation.placement import RULES
from greenslurm.clustermodel.errors import InputError

# The GPU state, the scoring framework, Slurm's consecutive runs and phase balance load with the
# selections that use them: a replay on CPU nodes under a load rule reads none of them.
if TYPE_CHECKING:
    from greenslurm.allocation.scorers.framework import ScoringFramework
    from greenslurm.clustermodel.fragmentation import TargetWorkload
    from greenslurm.clustermodel.gpu_state import GpuState, GpuTask


@runtime_checkable
class MachineView(Protocol):
    """What a selection may read of the machine (the simulator's machine or the live hook's view)."""

    gpus: GpuState | None          # per-GPU free shares (None on a cluster without GPUs)

    def tails_s(self, now_s: float) -> np.ndarray:
        """Per node: when the jobs on it are planned to end (``now_s`` for an idle node)."""
        ...


@runtime_checkable
class NodeSelection(Protocol):
    name: str

    def rank(self, view: MachineView, task: GpuTask | None, candidates: np.ndarray, count: int,
             now_s: float) -> np.ndarray:
        """``candidates`` (ascending node indices where the job fits), best first.  Only the first
        ``count`` are used; a selection may return just those."""
        ...

    def gpus(self, view: MachineView, task: GpuTask, node: int) -> tuple[int, ...]:
        """The GPUs of ``node`` the job's per-node ``task`` gets."""
        ...


def default_gpus(state: GpuState, task: GpuTask, node: int) -> tuple[int, ...]:
    """Whole GPUs: the lowest-indexed fully free ones; a share: the best-fitting GPU.

    >>> from greenslurm.clustermodel import Cluster, NodeSpec
    >>> from greenslurm.clustermodel.gpu_state import GpuNodes, GpuState, GpuTask
    >>> s = GpuState(GpuNodes.from_cluster(Cluster([NodeSpec("a", cpus=8, gpus=3)])))
    >>> s.place(0, GpuTask(1000, num_gpu=1, gpu_milli=600), (1,))
    >>> default_gpus(s, GpuTask(1000, num_gpu=1, gpu_milli=300), 0), default_gpus(s, GpuTask(1000, num_gpu=2, gpu_milli=1000), 0)
    ((1,), (0, 2))
    """
    if task.num_gpu == 0:
        return ()
    from greenslurm.clustermodel.gpu_state import best_fit_gpu, exclusive_gpus
    row = state.gpu_free_milli[node]
    if task.is_share:
        return (best_fit_gpu(row, task.gpu_milli),)
    return exclusive_gpus(row, task.num_gpu)


class FirstFit:
    """The lowest-numbered fitting nodes.

    >>> FirstFit().rank(None, None, np.array([2, 5, 7]), 2, 0.0)
    array([2, 5])
    """

    name = "firstfit"
    backfill = False

    def rank(self, view, task, candidates, count, now_s):
        return candidates[:count]

    def gpus(self, view, task, node):
        return default_gpus(view.gpus, task, node)


class Consecutive:
    """Slurm's own node choice (select/cons_tres, :mod:`greenslurm.allocation.consecutive`): the best fit
    among runs of consecutive nodes, made here of the candidates and the other nodes with a free CPU.
    The Slurm queue applies the same rule with the exact runs (its job's partition).

    >>> class View:
    ...     free = np.array([[4.0], [1.0], [0.0], [4.0], [2.0], [4.0]])
    >>> Consecutive().rank(View(), None, np.array([0, 3, 4, 5]), 1, 0.0)[:1].tolist()   # run n0-n1: 5 CPUs
    [0]
    """

    name = "consecutive"
    backfill = False

    def rank(self, view, task, candidates, count, now_s):
        from greenslurm.allocation.consecutive import best_fit_consecutive
        free_cpus = view.free[:, 0]
        chosen = best_fit_consecutive(free_cpus, free_cpus >= 1, candidates, count, 0.0)
        if chosen is None:
            return candidates[:count]
        return np.concatenate((chosen, np.setdiff1d(candidates, chosen)))

    def gpus(self, view, task, node):
        return default_gpus(view.gpus, task, node)


class LoadRule:
    """Nileshwar & Schwiegelshohn's rules at one start time: nodes ordered by their tail (when their jobs end).

    ``balanced`` takes the smallest tails (lower index first on ties); ``bestfit`` and ``minidle``
    the largest (lower index first on ties): for a job starting now, the nodes whose jobs run
    longest are the most loaded, and choosing them adds no enclosed idle time.

    >>> class View:
    ...     gpus = None
    ...     def tails_s(self, now_s): return np.array([0.0, 30.0, 10.0, 30.0])
    >>> LoadRule("balanced").rank(View(), None, np.array([0, 1, 2, 3]), 2, 0.0)[:2].tolist()
    [0, 2]
    >>> LoadRule("bestfit").rank(View(), None, np.array([0, 1, 2, 3]), 2, 0.0)[:2].tolist()
    [1, 3]
    """

    def __init__(self, name: str, backfill: bool = False) -> None:
        if name not in RULES:
            raise ValueError(f"unknown load rule {name!r}")
        self.name = name + ("+backfill" if backfill else "")
        self.rule = name
        self.backfill = backfill
        self.uses_tails = name != "firstfit"      # the machine then keeps every node's tail up to date

    def rank(self, view, task, candidates, count, now_s):
        if self.rule == "firstfit":
            return candidates[:count]
        tails = view.tails_s(now_s)[candidates]
        # lexsort: last key is primary; ties by lower index (candidates are ascending)
        key = tails if self.rule == "balanced" else -tails
        return candidates[np.lexsort((candidates, key))]

    def gpus(self, view, task, node):
        return default_gpus(view.gpus, task, node)


class Scored:
    """GPU scorers in the Filter -> Score -> Normalize -> Combine framework (the GPU papers)."""

    backfill = False

    def __init__(self, framework: ScoringFramework) -> None:
        self.framework = framework
        self.name = framework.label

    def rank(self, view, task, candidates, count, now_s):
        framework, state = self.framework, view.gpus
        if state is None or task is None:
            return candidates[:count]
        with np.errstate(invalid="ignore", divide="ignore"):      # undefined scores: see below
            total, _ = framework.scores(state, task, candidates)
        if not np.isfinite(total).all():
            # A plan for later (EASY's shadow, conservative's reservations) offers nodes where the
            # task does not fit now; their GPU scores are undefined (-inf points, NaN after min-max).
            # Those that fit now go first, by score; the others follow in node order.
            from greenslurm.clustermodel.gpu_state import fits
            now = fits(state, task)[candidates]
            if now.all() or not now.any():
                return candidates
            return np.concatenate((self.rank(view, task, candidates[now], count, now_s), candidates[~now]))
        if count == 1:          # exactly ScoringFramework.choose: best total, ties first or seeded-random
            best = np.flatnonzero(total == total.max())
            if len(best) == 1 or framework.tie_break == "first":
                return candidates[best[:1]]
            return candidates[[best[framework.rng.integers(len(best))]]]
        if framework.tie_break == "random":
            order = np.lexsort((framework.rng.random(len(candidates)), -total))
        else:
            order = np.lexsort((candidates, -total))
        return candidates[order]

    def gpus(self, view, task, node):
        framework, state = self.framework, view.gpus
        preferred = -1
        if framework.gpu_chooser is not None and task.is_share:
            _, gpu = framework._points(framework.gpu_chooser, state, task, np.array([node]))
            preferred = int(gpu[0])
        return framework.gpus_for(state, task, node, preferred)


# -- the one registry ------------------------------------------------------------------------------
# name -> factory(backfill: bool) -> NodeSelection.  Add a selection here with one line.
SELECTIONS: dict[str, Callable[[bool], NodeSelection]] = {
    "firstfit": lambda backfill: LoadRule("firstfit", backfill) if backfill else FirstFit(),
    "balanced": lambda backfill: LoadRule("balanced", backfill),
    "bestfit": lambda backfill: LoadRule("bestfit", backfill),
    "minidle": lambda backfill: LoadRule("minidle", backfill),
    "consecutive": lambda backfill: Consecutive(),
    "phase": lambda backfill: _phase_balance(),
}


def _phase_balance() -> NodeSelection:
    from greenslurm.allocation.phase_balance import PhaseBalance
    return PhaseBalance()
# Selections whose planner may use enclosed idle gaps (the deadline queue's backfilling of Nileshwar & Schwiegelshohn).
BACKFILLING = {"firstfit", "balanced", "bestfit", "minidle"}
LOAD_RULES = ("firstfit", "balanced", "bestfit", "minidle")


def gpu_scorer_names() -> dict[str, str]:
    """Selection name -> GPU scorer (``greenslurm.allocation.scorers.SCORERS``): every GPU scorer is
    a selection, and they mix with weights.  The GPU papers' BestFit is ``gpubestfit`` here, apart
    from Nileshwar & Schwiegelshohn's BestFit.

    >>> gpu_scorer_names()["gpubestfit"], gpu_scorer_names()["fgd"]
    ('bestfit', 'fgd')
    """
    from greenslurm.allocation.scorers import SCORERS

    return {("gpubestfit" if name == "bestfit" else name): name for name in SCORERS}


def selection_names() -> list[str]:
    return [*SELECTIONS, *sorted(gpu_scorer_names())]


ALIASES = {"first-fit": "firstfit", "best-fit": "bestfit", "min-idle": "minidle", "gpu-bestfit": "gpubestfit",
           "backfill": "firstfit+backfill"}


@dataclass(frozen=True)
class SelectionSpec:
    """A parsed ``--select`` value: one registered selection (with or without ``+backfill``) or GPU
    scorer terms with weights."""

    text: str
    name: str | None = None
    backfill: bool = False
    terms: tuple[tuple[str, float], ...] = ()

    @property
    def rule(self) -> str | None:
        """Nileshwar & Schwiegelshohn's load rule, if this is one."""
        return self.name if self.name in LOAD_RULES else None

    @property
    def label(self) -> str:
        if self.name is not None:
            return self.name + ("+backfill" if self.backfill else "")
        if len(self.terms) == 1:
            return self.terms[0][0]
        return ",".join(f"{name}={weight:g}" for name, weight in self.terms)

    @property
    def needs_workload(self) -> bool:
        return any(name == "fgd" for name, _ in self.terms)

    @property
    def scores_gpus(self) -> bool:
        return bool(self.terms)


def parse_selection(text: str, where: str = "--select") -> SelectionSpec:
    """Parse a node selection.

    >>> parse_selection("bestfit").rule, parse_selection("minidle+backfill").backfill
    ('bestfit', True)
    >>> parse_selection("PWR=0.1, fgd=0.9").terms
    (('pwr', 0.1), ('fgd', 0.9))
    >>> parse_selection("pwr=0.1,fgd=0.9").label
    'pwr=0.1,fgd=0.9'
    >>> parse_selection("bestfit,pwr")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: --select: bestfit is not a GPU scorer; only GPU scorers mix (e.g. pwr=0.1,fgd=0.9)
    """
    raw = (text or "").strip().lower()
    raw = ALIASES.get(raw, raw)
    if not raw:
        raise InputError(f"empty node selection; choose from {', '.join(selection_names())}", path=where)
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if len(parts) == 1 and "=" not in parts[0]:
        name, plus, modifier = ALIASES.get(parts[0], parts[0]).partition("+")
        if name in SELECTIONS:
            if plus and (modifier != "backfill" or name not in BACKFILLING):
                raise InputError(f"{parts[0]!r}: only {', '.join(sorted(BACKFILLING))} take '+backfill'", path=where)
            return SelectionSpec(text, name=name, backfill=bool(plus))
    scorers = gpu_scorer_names()          # the GPU scorers' registry loads with a GPU scorer (or a typo)
    terms: list[tuple[str, float]] = []
    for part in parts:
        name, _, weight_text = part.partition("=")
        name = ALIASES.get(name.strip(), name.strip())
        if name not in scorers:
            if name.partition("+")[0] in SELECTIONS:
                raise InputError(f"{name} is not a GPU scorer; only GPU scorers mix (e.g. pwr=0.1,fgd=0.9)",
                                 path=where)
            raise InputError(f"unknown node selection {name!r}; choose from {', '.join(selection_names())}",
                             path=where)
        try:
            weight = float(weight_text) if weight_text.strip() else 1.0
        except ValueError:
            raise InputError(f"weight {weight_text!r} of {name} is not a number", path=where) from None
        if not (weight > 0 and np.isfinite(weight)):
            raise InputError(f"weight of {name} must be a finite number > 0, not {weight_text!r}", path=where)
        if any(name == seen for seen, _ in terms):
            raise InputError(f"{name} given twice in {text!r}", path=where)
        terms.append((name, weight))
    return SelectionSpec(text, terms=tuple(terms))


def from_gpu_papers(policy: str) -> SelectionSpec:
    """A policy written in the GPU papers' scorer names (``greenslurm inflate`` before ``--select``,
    sweeps' ``score =``), where ``bestfit`` is their BestFit, as a selection (``gpubestfit`` here).

    >>> from_gpu_papers("bestfit").label, from_gpu_papers("pwr=0.1, bestfit=0.9").label
    ('gpubestfit', 'pwr=0.1,gpubestfit=0.9')
    """
    from greenslurm.allocation.scorers import parse_policy

    selection_of = {scorer: name for name, scorer in gpu_scorer_names().items()}
    return parse_selection(",".join(f"{selection_of[name]}={weight!r}" for name, weight in parse_policy(policy)))


def make_selection(spec: SelectionSpec | str, workload: TargetWorkload | None = None, *,
                   normalization: str = "paper", seed=None, tie_break: str | None = None) -> NodeSelection:
    """The selection object for a spec (``seed``: anything numpy's default_rng takes; ``workload``:
    the FGD target workload of the trace, needed by ``fgd``).

    >>> make_selection("firstfit").name, make_selection("minidle+backfill").name, make_selection("pwr").name
    ('firstfit', 'minidle+backfill', 'pwr')
    """
    if isinstance(spec, str):
        spec = parse_selection(spec)
    if spec.name is not None:
        return SELECTIONS[spec.name](spec.backfill)
    from greenslurm.allocation.scorers import make_policy      # the GPU scorers load with one
    scorers = gpu_scorer_names()
    policy = ",".join(f"{scorers[name]}={weight!r}" for name, weight in spec.terms)
    framework = make_policy(policy, workload, normalization, seed=seed, tie_break=tie_break)
    framework.label = spec.label
    return Scored(framework)


# A factory the engine calls with the workload of the trace it replays (FGD needs it).
SelectionFactory = Callable[["TargetWorkload | None"], NodeSelection]
