"""Admission control: an acceptance policy, then an allocation, for each job as it is submitted.

The same object serves the replay (``greenslurm.sim.engine.deadline_queue``), the live hook and the benchmarks: it
is given a planner (``greenslurm.allocation.planner.Planner`` or ``greenslurm.allocation.coreplan.CorePlanner``) and a
way to turn a job spec into an allocation request; it returns the decision and, for an accepted
job, the committed placement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from greenslurm.acceptance.base import AcceptancePolicy, Decision
from greenslurm.acceptance.policies import NEVER_FITS
from greenslurm.allocation.placement import Placement, Request
from greenslurm.clustermodel import JobSpec

ALLOCATION = "allocation"
TOO_BIG = "larger than the cluster"


@dataclass(frozen=True, slots=True)
class Outcome:
    decision: Decision
    placement: Placement | None = None
    request: Request | None = None


class _View:
    """What a policy may see: the time now and the planner's earliest end for a job."""

    __slots__ = ("_admission", "_job", "_request")

    def __init__(self, admission: "Admission", job: JobSpec, request: Request) -> None:
        self._admission, self._job, self._request = admission, job, request

    @property
    def now_s(self) -> float:
        return self._admission.planner.now_s

    def earliest_finish(self, job: JobSpec) -> float | None:
        request = self._request if job is self._job else self._admission.to_request(job)
        return None if request is None else self._admission.planner.earliest_finish(request)


class Admission:
    def __init__(self, acceptance: AcceptancePolicy, planner, to_request: Callable[[JobSpec], Request | None]) -> None:
        self.acceptance = acceptance
        self.planner = planner
        self.to_request = to_request

    def submit(self, job: JobSpec, now_s: float, request: Request | None = None) -> Outcome:
        """Decide on ``job`` at ``now_s``; an accepted job's placement is committed to the plan."""
        self.planner.advance(now_s)
        request = request if request is not None else self.to_request(job)
        if request is None:
            return Outcome(Decision(False, ALLOCATION, TOO_BIG, "asks for more than the cluster has"))
        decision = self.acceptance.decide(job, _View(self, job, request))
        if not decision.accepted:
            return Outcome(decision, request=request)
        placement = self.planner.place(request)
        if placement is None:
            return Outcome(Decision(False, ALLOCATION, NEVER_FITS, "no placement on this cluster, now or later"),
                           request=request)
        self.planner.commit(request, placement)
        return Outcome(decision, placement, request)
