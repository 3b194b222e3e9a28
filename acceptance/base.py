"""The seam between acceptance policies and whoever hosts them (the replay, or the live Slurm hook).

A policy sees a job spec and a read-only :class:`PlanView`: the time now and the earliest time the
job could end given every job accepted so far.  It returns a :class:`Decision`; a rejection carries
the policy's name, a short reason that groups rejections in reports, and a detail with the numbers
that a user can read in the message ``sbatch`` prints.  Policies never ask whether they run in a
simulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from greenslurm.clustermodel import JobSpec


class PlanView(Protocol):
    @property
    def now_s(self) -> float: ...

    def earliest_finish(self, job: JobSpec) -> float | None:
        """The earliest end of a placement of ``job`` that moves no accepted job; None: none exists."""
        ...


@dataclass(frozen=True, slots=True)
class Decision:
    accepted: bool
    policy: str = ""
    reason: str = ""
    detail: str = ""

    @property
    def message(self) -> str:
        """One line for the user.

        >>> Decision(False, "greedy", "cannot end by its deadline", "earliest end 120 s > 100 s").message
        'rejected by greedy: cannot end by its deadline (earliest end 120 s > 100 s)'
        """
        if self.accepted:
            return f"accepted by {self.policy}" if self.policy else "accepted"
        return f"rejected by {self.policy}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


ACCEPT = Decision(True)


class AcceptancePolicy(Protocol):
    name: str

    def decide(self, job: JobSpec, view: PlanView) -> Decision: ...


class Chain:
    """Policies asked in order; the first rejection wins (later policies are not asked).

    >>> from greenslurm.acceptance.policies import AcceptAll, Threshold
    >>> chain = Chain([AcceptAll(), Threshold(min_slack=1.0, share=None)])
    >>> chain.name
    'all,threshold'
    >>> job = JobSpec("a", 0.0, 10.0, deadline_s=15.0)      # slack (15 - 0) / 10 - 1 = 0.5
    >>> chain.decide(job, None).message
    'rejected by threshold: slack below the threshold (slack 0.5 < 1)'
    """

    def __init__(self, policies: Sequence[AcceptancePolicy]) -> None:
        if not policies:
            raise ValueError("an acceptance chain needs at least one policy")
        self.policies = tuple(policies)
        self.name = ",".join(policy.name for policy in self.policies)

    def decide(self, job: JobSpec, view: PlanView) -> Decision:
        for policy in self.policies:
            decision = policy.decide(job, view)
            if not decision.accepted:
                return decision
        return Decision(True, self.name)
