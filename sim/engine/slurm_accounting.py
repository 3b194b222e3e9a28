"""What slurmdbd's records add to the Slurm queue: QOS priorities, QOS limits and the fair-share factor.

A site's associations and QOS (:class:`greenslurm.traces.slurm_accounts.SlurmAccounts`, read from
``sacctmgr`` dumps) become, for one replay:

- the QOS factor's numbers (``PriorityWeights.qos_priority``: each QOS's priority; the factor is it
  over the largest, as Slurm's ``norm_priority``): :func:`with_accounts`;
- :class:`SlurmAccounting`, the queue's ``limits=`` (its JobLimits seam): the QOS limits of
  :mod:`~greenslurm.sim.engine.slurm_limits` and the fair-share factor of
  :mod:`~greenslurm.sim.engine.slurm_fairshare`, fed with every start and end.

Jobs must name the account and QOS they ran under (sacct records do); ``SlurmAccounts.complete``
fills in Slurm's defaults for those that do not.

>>> from greenslurm.clustermodel import Cluster, JobSpec
>>> from greenslurm.sim.engine.replay import Replay
>>> from greenslurm.sim.engine.slurm_model import SlurmScheduling
>>> from greenslurm.traces.slurm_accounts import parse_associations_text, parse_qos_text, SlurmAccounts
>>> accounts = SlurmAccounts(parse_associations_text("Account|User|Share|QOS\\nroot||1|normal\\n root|ann|1|normal",
...                          "assoc"), parse_qos_text("Name|Priority|MaxJobsPU\\nnormal|0|1", "qos"))
>>> jobs = [accounts.complete(JobSpec(f"j{i}", 0.0, 100.0, cpus=1, user="ann")) for i in range(2)]
>>> jobs[0].account, jobs[0].qos
('root', 'normal')
>>> run = Replay(jobs, Cluster.homogeneous(1, cpus=4), "slurm",
...              strategy_options=strategy_options(SlurmScheduling(scheduler="builtin"), accounts))
>>> [(r.job_id, r.start_s) for r in run.run().records]     # MaxJobsPU=1: j1 waits for j0 on a free node
[('j0', 0.0), ('j1', 100.0)]
"""

from __future__ import annotations

from dataclasses import replace

from greenslurm.sim.engine.slurm_fairshare import FairShareTree
from greenslurm.sim.engine.slurm_limits import QosLimits
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.traces.slurm_accounts import SlurmAccounts


def with_accounts(scheduling: SlurmScheduling, accounts: SlurmAccounts) -> SlurmScheduling:
    """``scheduling`` with the QOS priorities of ``accounts`` (the QOS factor's numerators)."""
    priorities = {name: qos.priority for name, qos in accounts.qos.items()}
    return replace(scheduling, priority=replace(scheduling.priority, qos_priority=priorities))


class SlurmAccounting:
    """The Slurm queue's accounting (its ``limits=``): QOS limits, and the usage and fair-share
    factor of every association, for one replay under ``scheduling`` (its PriorityDecayHalfLife,
    PriorityCalcPeriod, the decay thread's first pass, PriorityFlags and time scale)."""

    def __init__(self, accounts: SlurmAccounts, scheduling: SlurmScheduling) -> None:
        weights = scheduling.priority
        self.accounts = accounts
        self.limits = QosLimits(accounts.qos)
        self.tree = FairShareTree(accounts.associations, half_life_s=weights.decay_half_life_s,
                                  calc_period_s=weights.calc_period_s, time_scale=scheduling.time_scale,
                                  fair_tree=weights.fair_tree, origin_s=weights.calc_origin_s)

    def blocked(self, waiting, now_s: float) -> str | None:
        return self.limits.job_blocked(waiting.job)

    def refused(self, job) -> tuple[str, str] | None:
        return self.limits.refused(job)

    def started(self, waiting, now_s: float) -> None:
        job = waiting.job
        spec = job.job
        self.limits.started(job, now_s)
        qos = self.accounts.qos.get(spec.qos)
        self.tree.job_started(str(job.index), spec.user, spec.account, job.cpus_total,
                              qos.usage_factor if qos is not None else 1.0, now_s)

    def ended(self, job, now_s: float) -> None:
        self.limits.ended(job, now_s)
        self.tree.job_ended(str(job.index), now_s)

    def fairshare(self, user: str, account: str, now_s: float) -> float:
        return self.tree.factor(user, account, now_s)


def strategy_options(scheduling: SlurmScheduling, accounts: SlurmAccounts | None) -> dict:
    """The ``slurm`` queue's options for a replay under ``scheduling`` with a site's ``accounts``
    (None: Slurm without slurmdbd)."""
    if accounts is None:
        return {"scheduling": scheduling}
    scheduling = with_accounts(scheduling, accounts)
    return {"scheduling": scheduling, "limits": SlurmAccounting(accounts, scheduling)}
