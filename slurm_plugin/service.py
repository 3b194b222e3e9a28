"""The decision service behind ``job_submit.lua`` (``greenslurm hook serve --config hook.toml``).

One asyncio process listens on a UNIX socket.  Each connection sends JSON lines (see
:mod:`greenslurm.slurm_plugin.protocol`); each line gets one JSON answer line.  A request larger than
:data:`~greenslurm.slurm_plugin.protocol.MAX_REQUEST_BYTES` or not valid gets an ``error`` answer (the hook
then fails open or closed as configured) and never stops the service.  Strings a user controls never
reach that path: the service rejects the job naming the field, or checks it without the field.

Every decision is committed to the record (:mod:`greenslurm.slurm_plugin.record`) before its answer is
sent.  One service runs per socket: it holds ``<socket>.lock`` for its whole life, and a second one
exits with a one-line error.

The cluster view (:mod:`greenslurm.slurm_plugin.view`) is rebuilt from Slurm every ``sync_interval_s`` in a
worker thread, then swapped in; jobs accepted while it was being built are planned again on the
new view.  A view older than ``max_view_age_s`` is stale: the ``stale`` setting says whether jobs are
then checked on it anyway, accepted unchecked or rejected.

Reconciliation (after each sync) checks the deadline Slurm really holds for every pending job
against the record: a job is left alone only if its comment carries a tag (``greenslurm#ID.TOKEN``)
that the record issued, to the same user, not claimed by another job, for a deadline no later than
the one Slurm now holds.  Any other pending job with a deadline (submitted without the shipped
cli_filter, a spoofed or forged deadline, a deadline tightened after submission) is checked on the
view and annotated, held or cancelled (``reconcile``) when it cannot end in time.

The service's parts: :mod:`~greenslurm.slurm_plugin.decisions` (a decision on a submission or a
change), :mod:`~greenslurm.slurm_plugin.reconcile` (which pending deadlines a decision covers) and
:mod:`~greenslurm.slurm_plugin.server` (the socket, the lock and the sync loop); this module names
what they offer together.
"""

from __future__ import annotations

import time  # noqa: F401  (the decisions' clock: tests set it through this module)

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.decisions import DEADLINE_CHECKED, DecisionService, changed_job, green_reason, replan
from greenslurm.slurm_plugin.reconcile import SLURM_MAX_COMMENT, covered_jobs, reconcile_comment
from greenslurm.slurm_plugin.server import HookServer, ServiceLock, fetch_snapshot, make_backend, serve
from greenslurm.slurm_plugin.slurm_json import TAG, TAG_PATTERN

__all__ = ["DEADLINE_CHECKED", "SLURM_MAX_COMMENT", "TAG", "TAG_PATTERN", "DecisionService", "HookConfig", "HookServer",
           "ServiceLock", "changed_job", "covered_jobs", "fetch_snapshot", "green_reason", "make_backend",
           "reconcile_comment", "replan", "serve"]
