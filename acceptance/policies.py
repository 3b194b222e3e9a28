"""Acceptance policies (Nileshwar & Schwiegelshohn): AcceptAll, Greedy and Threshold.

Slack is planned with the job's requested time p (what a live scheduler knows):
eps = (d - r) / p - 1.  A job without a deadline is always accepted.

- Greedy rejects a job only if no placement ends it by its deadline without moving any job
  accepted before (``view.earliest_finish(job) > d``).
- Threshold rejects a job whose deadline is below a threshold.  Two thresholds, either or both:
  a static one on the job's slack (``min_slack``: reject if eps < min_slack), and the deadline
  threshold of the paper, which leaves part of the slack unused: reject if the job cannot end by
  d' = r + p + share * (d - r - p), the deadline moved earlier by (1 - share) of the slack.  With
  ``share = 1`` it is Greedy's test; any share <= 1 keeps every accepted job within its deadline.
"""

from __future__ import annotations

import math

from greenslurm.acceptance.base import ACCEPT, Decision, PlanView
from greenslurm.clustermodel import JobSpec

NEVER_FITS = "never fits"
MISSES_DEADLINE = "cannot end by its deadline"
BELOW_SLACK = "slack below the threshold"
MISSES_THRESHOLD = "cannot end by the threshold deadline"


class AcceptAll:
    """Accepts everything (the baseline: jobs run as early as they can, deadlines may be missed)."""

    name = "all"

    def decide(self, job: JobSpec, view: PlanView) -> Decision:
        return ACCEPT


def _fmt(t: float) -> str:
    return f"{t:,.0f} s"


class Greedy:
    """Reject only if no placement ends the job by its deadline.

    >>> class View:
    ...     now_s = 0.0
    ...     def earliest_finish(self, job): return 120.0
    >>> Greedy().decide(JobSpec("a", 0.0, 60.0, deadline_s=100.0), View()).message
    'rejected by greedy: cannot end by its deadline (earliest end 120 s > deadline 100 s)'
    >>> Greedy().decide(JobSpec("b", 0.0, 60.0, deadline_s=120.0), View()).accepted
    True
    """

    name = "greedy"

    def decide(self, job: JobSpec, view: PlanView) -> Decision:
        if job.deadline_s is None:
            return ACCEPT
        return _ends_by(self.name, job, view, job.deadline_s, MISSES_DEADLINE, "deadline")


def _ends_by(policy: str, job: JobSpec, view: PlanView, limit_s: float, reason: str, what: str) -> Decision:
    finish = view.earliest_finish(job)
    if finish is None:
        return Decision(False, policy, NEVER_FITS, "no placement on this cluster, now or later")
    if finish > limit_s:
        return Decision(False, policy, reason, f"earliest end {_fmt(finish)} > {what} {_fmt(limit_s)}")
    return ACCEPT


class Threshold:
    """Reject below a slack threshold and/or when the job cannot end by the threshold deadline.

    A job submitted at 0 asking 100 s with deadline 200 s has slack 1; with share 0.5 its threshold
    deadline is 0 + 100 + 0.5 * (200 - 0 - 100) = 150 s:

    >>> class View:
    ...     now_s = 0.0
    ...     def earliest_finish(self, job): return 160.0
    >>> job = JobSpec("a", 0.0, 100.0, deadline_s=200.0)
    >>> Threshold(share=0.5).decide(job, View()).message
    'rejected by threshold: cannot end by the threshold deadline (earliest end 160 s > threshold 150 s)'
    >>> Threshold(min_slack=1.5, share=None).decide(job, View()).reason
    'slack below the threshold'
    >>> Threshold(share=0.7).decide(job, View()).accepted       # 100 + 0.7 * 100 = 170 >= 160
    True
    """

    name = "threshold"

    def __init__(self, min_slack: float | None = None, share: float | None = 0.5) -> None:
        if share is not None and not 0.0 <= share <= 1.0:
            raise ValueError(f"threshold share must be in [0, 1], got {share}")
        if min_slack is None and share is None:
            raise ValueError("a threshold needs min_slack, share or both")
        self.min_slack = min_slack
        self.share = share

    def decide(self, job: JobSpec, view: PlanView) -> Decision:
        d = job.deadline_s
        if d is None:
            return ACCEPT
        p = job.requested_time_s
        if self.min_slack is not None:
            slack = (d - job.submit_s) / p - 1.0 if p > 0 else math.inf
            if slack < self.min_slack:
                return Decision(False, self.name, BELOW_SLACK, f"slack {slack:.3g} < {self.min_slack:.3g}")
        if self.share is None:
            return ACCEPT
        limit = job.submit_s + p + self.share * max(d - job.submit_s - p, 0.0)
        return _ends_by(self.name, job, view, min(limit, d), MISSES_THRESHOLD, "threshold")
