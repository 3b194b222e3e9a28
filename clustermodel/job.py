"""A batch job as the schedulers see it: what it asks for, when, and (in replays) how long it ran."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

_NO_EXTRA: Mapping = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One rigid job.

    Resources are asked per node: ``nodes`` nodes, each with ``cpus_per_node`` CPUs,
    ``memory_mb_per_node`` MiB and ``gpus_per_node`` GPUs.  ``gpus_per_node`` may be a share of one
    GPU in (0, 1) or a whole number.  ``nodes == 0`` means the trace did not say how many nodes; the
    cluster then decides the shape from ``cpus`` (see :meth:`Cluster.shape_of`).

    ``requested_time_s`` is the time limit used for planning; ``runtime_s`` the time the job really
    ran (replays only).  A job runs ``min(runtime_s, requested_time_s)``: past its limit it is killed.

    >>> j = JobSpec("7", submit_s=10.0, requested_time_s=100.0, runtime_s=40.0, cpus=8)
    >>> j.run_for_s, j.killed_at_limit
    (40.0, False)
    >>> JobSpec("8", submit_s=0.0, requested_time_s=60.0, runtime_s=90.0, cpus=1).run_for_s
    60.0
    >>> j.slack(deadline_s=130.0)   # (d - r) / p - 1 = (130 - 10) / 40 - 1
    2.0
    """

    job_id: str
    submit_s: float
    requested_time_s: float
    runtime_s: float | None = None
    cpus: int = 1
    nodes: int = 0
    cpus_per_node: int = 0
    memory_mb_per_node: float = 0.0
    gpus_per_node: float = 0.0
    gpu_model: str | None = None
    cpu_model: str | None = None
    deadline_s: float | None = None
    user: str = ""
    partition: str = ""
    state: str = ""
    source_line: int = 0
    # Training jobs (EaCO): the model trained and the number of epochs; 0 and "" otherwise.
    epochs: int = 0
    model: str = ""
    # The features the job asks for (Slurm's --constraint as sacct prints it, "ib&k80"); "" for none.
    constraint: str = ""
    # What Slurm's priority reads beyond the request: the account, QOS name and nice value (--nice).
    account: str = ""
    qos: str = ""
    nice: int = 0
    # Reader-specific fields kept for reference (e.g. SWF columns); one shared empty mapping by default.
    extra: Mapping = field(default_factory=lambda: _NO_EXTRA, compare=False, hash=False, repr=False)

    @property
    def run_for_s(self) -> float:
        """How long the job occupies its resources once started (killed at its time limit)."""
        if self.runtime_s is None:
            return self.requested_time_s
        return min(self.runtime_s, self.requested_time_s)

    @property
    def killed_at_limit(self) -> bool:
        return self.runtime_s is not None and self.runtime_s > self.requested_time_s

    @property
    def total_gpus(self) -> float:
        return self.gpus_per_node * max(self.nodes, 1)

    def slack(self, deadline_s: float | None = None) -> float:
        """Slack eps = (d - r) / p - 1, with p the time the job runs (inf when p is 0)."""
        d = self.deadline_s if deadline_s is None else deadline_s
        if d is None:
            return math.inf
        p = self.run_for_s
        if p <= 0:
            return math.inf
        return (d - self.submit_s) / p - 1.0

    def with_changes(self, **changes) -> "JobSpec":
        return replace(self, **changes)
