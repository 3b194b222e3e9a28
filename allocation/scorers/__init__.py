"""The GPU node scorers, registered in one place, and policies made of them.

A policy is a weighted mix of scorers, written ``name`` or ``name=weight,name=weight``:
``fgd``, ``pwr=0.1,fgd=0.9`` (the PWR paper's alpha = 0.1), ``bestfit``.

>>> sorted(SCORERS)
['bestfit', 'dotprod', 'fgd', 'gpuclustering', 'gpupacking', 'pwr', 'random']
>>> parse_policy("PWR=0.1, fgd=0.9")
[('pwr', 0.1), ('fgd', 0.9)]
>>> parse_policy("best-fit")
[('bestfit', 1.0)]
"""

from __future__ import annotations

from typing import Callable

from greenslurm.allocation.scorers.framework import NORMALIZATIONS, TIE_BREAKS, ScoringFramework, Scorer
from greenslurm.allocation.scorers.bestfit import BestFitScorer
from greenslurm.allocation.scorers.dotprod import DotProdScorer
from greenslurm.allocation.scorers.fgd import FgdScorer
from greenslurm.allocation.scorers.gpuclustering import GpuClusteringScorer
from greenslurm.allocation.scorers.gpupacking import GpuPackingScorer
from greenslurm.allocation.scorers.pwr import PwrScorer
from greenslurm.allocation.scorers.randomfit import RandomScorer
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.fragmentation import TargetWorkload

# name -> factory(workload) -> Scorer.  FGD is the only one that needs the target workload.
SCORERS: dict[str, Callable[[TargetWorkload | None], Scorer]] = {
    "fgd": lambda workload: FgdScorer(_need(workload)),
    "pwr": lambda workload: PwrScorer(),
    "bestfit": lambda workload: BestFitScorer(),
    "dotprod": lambda workload: DotProdScorer(),
    "gpupacking": lambda workload: GpuPackingScorer(),
    "gpuclustering": lambda workload: GpuClusteringScorer(),
    "random": lambda workload: RandomScorer(),
}
ALIASES = {"best-fit": "bestfit", "dot-product": "dotprod", "dotproduct": "dotprod", "gpu-packing": "gpupacking",
           "gpu-clustering": "gpuclustering", "randomfit": "random"}
NEEDS_WORKLOAD = {"fgd"}


def _need(workload: TargetWorkload | None) -> TargetWorkload:
    if workload is None:
        raise ValueError("the fgd scorer needs the target workload (task classes of the trace)")
    return workload


def parse_policy(spec: str) -> list[tuple[str, float]]:
    """``"pwr=0.1,fgd=0.9"`` -> [("pwr", 0.1), ("fgd", 0.9)]; a bare name weighs 1."""
    terms: list[tuple[str, float]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, weight_text = part.partition("=")
        name = name.strip().lower()
        name = ALIASES.get(name, name)
        if name not in SCORERS:
            raise InputError(f"unknown scorer {name!r} in {spec!r}; choose from {', '.join(sorted(SCORERS))}",
                             path="--score")
        try:
            weight = float(weight_text) if weight_text.strip() else 1.0
        except ValueError:
            raise InputError(f"weight {weight_text!r} of {name} is not a number", path="--score") from None
        if not weight > 0 or weight == float("inf"):
            raise InputError(f"weight of {name} must be a finite number > 0, not {weight_text!r}", path="--score")
        if any(name == seen for seen, _ in terms):
            raise InputError(f"scorer {name} given twice in {spec!r}", path="--score")
        terms.append((name, weight))
    if not terms:
        raise InputError("empty policy: give a scorer, e.g. fgd or pwr=0.1,fgd=0.9", path="--score")
    return terms


def policy_label(spec: str) -> str:
    """A canonical name: ``"FGD=0.9, pwr=0.1"`` -> ``"fgd=0.9,pwr=0.1"``; a lone scorer by its name."""
    terms = parse_policy(spec)
    if len(terms) == 1:
        return terms[0][0]
    return ",".join(f"{name}={weight:g}" for name, weight in terms)


def make_policy(spec: str, workload: TargetWorkload | None = None, normalization: str = "paper",
                seed=None, tie_break: str | None = None) -> ScoringFramework:
    """A :class:`ScoringFramework` for a policy string (``seed``: anything numpy's default_rng takes)."""
    if normalization not in NORMALIZATIONS:
        raise InputError(f"normalization must be one of {', '.join(NORMALIZATIONS)}", path="--normalization")
    if tie_break is not None and tie_break not in TIE_BREAKS:
        raise InputError(f"ties must be one of {', '.join(TIE_BREAKS)}", path="--ties")
    terms = parse_policy(spec)
    return ScoringFramework([(SCORERS[name](workload), weight) for name, weight in terms],
                            normalization=normalization, seed=seed, label=policy_label(spec), tie_break=tie_break)


def needs_workload(spec: str) -> bool:
    return any(name in NEEDS_WORKLOAD for name, _ in parse_policy(spec))
