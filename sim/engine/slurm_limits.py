"""QOS limits as Slurm 22.05 enforces them: MaxJobsPerUser (``MaxJobsPU``) and the CPUs of ``GrpTRES``.

Read from ``src/slurmctld/acct_policy.c`` (``_qos_job_runnable_pre_select``,
``_qos_job_runnable_post_select``, ``_validate_tres_usage_limits``) and where the schedulers call it
(``_schedule`` in ``job_scheduler.c``, ``select_nodes`` in ``node_scheduler.c``, ``_attempt_backfill``):

- **MaxJobsPU** (checked before nodes are selected): a job waits with ``QOSMaxJobsPerUserLimit``
  while its user already runs that many jobs in its QOS.
- **GrpTRES=cpu=N** (checked after nodes are selected, also when none were free): a job waits with
  ``QOSGrpCpuLimit`` while the CPUs its QOS's running jobs hold plus its own exceed N.  A job asking
  for more than N alone never starts (Slurm leaves it pending; the replay rejects it, counted).

Both schedulers skip a blocked job without failing its partition (``ESLURM_ACCOUNTING_POLICY``
without ``assoc_limit_stop``), and backfill reserves nothing for it.  Counted per job's QOS (the
jobs come with their QOS filled in, :meth:`greenslurm.traces.slurm_accounts.SlurmAccounts.complete`);
a job whose QOS is not defined has no limits.  Not modelled: the partition's QOS, association
limits, every other QOS limit (``GrpJobs``, ``MaxTRESPU``, ``MaxWall``, ...; listed by
:attr:`~greenslurm.traces.slurm_accounts.SlurmAccounts.not_modelled`), ``AccountingStorageEnforce=safe``.

>>> from types import SimpleNamespace as Job
>>> from greenslurm.traces.slurm_accounts import Qos
>>> limits = QosLimits({"one": Qos("one", max_jobs_per_user=1), "four": Qos("four", grp_cpus=4)})
>>> def job(index, user, qos, cpus):
...     return Job(index=index, cpus_total=cpus, job=Job(job_id=str(index), user=user, qos=qos))
>>> a, b = job(1, "ann", "one", 1), job(2, "ann", "one", 1)
>>> limits.started(a, 0.0)
>>> limits.job_blocked(b), limits.job_blocked(job(3, "bob", "one", 1))   # ann runs her one job; bob may
('QOSMaxJobsPerUserLimit', None)
>>> limits.started(job(4, "ann", "four", 3), 0.0)                        # 3 of the 4 CPUs of "four"
>>> limits.job_blocked(job(5, "bob", "four", 2)), limits.job_blocked(job(6, "bob", "four", 1))
('QOSGrpCpuLimit', None)
>>> limits.refused(job(7, "bob", "four", 5))                             # 5 > 4: never
('over QOS GrpTRES cpu', 'QOS four: 5 CPUs > GrpTRES cpu=4')
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

from greenslurm.traces.slurm_accounts import Qos

MAX_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
GRP_CPUS = "QOSGrpCpuLimit"


class QosLimits:
    """The QOS limits of one replay: what each QOS's running jobs hold, per QOS and per user."""

    def __init__(self, qos: Mapping[str, Qos]) -> None:
        # only QOS with a limit are looked at (the schedulers ask about every waiting job, often)
        self.qos = {name: q for name, q in qos.items() if q.max_jobs_per_user is not None or q.grp_cpus is not None}
        self.user_jobs: Counter = Counter()        # (QOS, user) -> running jobs
        self.cpus: Counter = Counter()             # QOS -> CPUs its running jobs hold
        self._held: dict[int, tuple[str, str, float]] = {}     # job index -> (QOS, user, CPUs)

    def _qos_of(self, job) -> Qos | None:
        return self.qos.get(job.job.qos)

    def refused(self, job) -> tuple[str, str] | None:
        """(reason, detail) for a job its QOS never lets start, None otherwise."""
        qos = self._qos_of(job)
        if qos is None:
            return None
        if qos.max_jobs_per_user == 0:
            return ("over QOS MaxJobsPU", f"QOS {qos.name}: MaxJobsPU=0")
        if qos.grp_cpus is not None and job.cpus_total > qos.grp_cpus:
            return ("over QOS GrpTRES cpu", f"QOS {qos.name}: {job.cpus_total:g} CPUs > GrpTRES cpu={qos.grp_cpus}")
        return None

    def job_blocked(self, job) -> str | None:
        """Slurm's reason why ``job`` (a PendingJob) may not start now, None if its QOS lets it."""
        qos = self._qos_of(job)
        if qos is None:
            return None
        if qos.max_jobs_per_user is not None and self.user_jobs[(qos.name, job.job.user)] >= qos.max_jobs_per_user:
            return MAX_JOBS_PER_USER
        # Slurm: used + requested > limit (``_validate_tres_usage_limits`` with safe_limits set)
        if qos.grp_cpus is not None and self.cpus[qos.name] + job.cpus_total > qos.grp_cpus:
            return GRP_CPUS
        return None

    def started(self, job, now_s: float) -> None:
        qos = self._qos_of(job)
        if qos is None:
            return
        self.user_jobs[(qos.name, job.job.user)] += 1
        self.cpus[qos.name] += job.cpus_total
        self._held[job.index] = (qos.name, job.job.user, job.cpus_total)

    def ended(self, job, now_s: float) -> None:
        held = self._held.pop(job.index, None)
        if held is None:
            return
        name, user, cpus = held
        self.user_jobs[(name, user)] -= 1
        self.cpus[name] -= cpus
