"""Where the service learns the cluster's state: Slurm's own commands with JSON output (works with
Slurm 22.05 and later: ``sinfo --json``, ``squeue --json``), or pyslurm where the site's Slurm
matches a pyslurm release (pyslurm builds only against the Slurm release of its number: pyslurm
22.5.x for Slurm 22.05; docs/hook-install.md).

A backend returns a :class:`greenslurm.slurm_plugin.snapshot.Snapshot` plus the pending jobs' deadlines (for the
reconciliation of jobs whose deadline the hook could not see), and carries out the few actions
reconciliation takes (hold, release, cancel, update a comment).

The backends: :mod:`~greenslurm.slurm_plugin.backend_cli` (Slurm's commands),
:mod:`~greenslurm.slurm_plugin.backend_pyslurm` and, here, recorded files; what they read is turned
into the view by :mod:`~greenslurm.slurm_plugin.slurm_json`.  :data:`BACKENDS` names them for the
configuration's ``backend`` setting.
"""

from __future__ import annotations

import logging
import os
import time

from greenslurm.slurm_plugin.backend_cli import CliBackend
from greenslurm.slurm_plugin.backend_pyslurm import PyslurmBackend, job_record, node_record, slurm_text
from greenslurm.slurm_plugin.slurm_json import (BackendError, PendingDeadline, carried_tags, cannot_start, decode_json,
                                                gpus_held, job_spec_from_squeue, nodes_from_sinfo, snapshot_from_json,
                                                waits_for)
from greenslurm.slurm_plugin.snapshot import Snapshot

__all__ = ["BACKENDS", "BackendError", "CliBackend", "FilesBackend", "PendingDeadline", "PyslurmBackend",
           "cannot_start", "carried_tags", "decode_json", "gpus_held", "job_record", "job_spec_from_squeue",
           "node_record", "nodes_from_sinfo", "slurm_text", "snapshot_from_json", "waits_for"]

log = logging.getLogger("greenslurm.hook.backend")


class FilesBackend:
    """Recorded state: ``sinfo.json`` and ``squeue.json`` (the outputs of ``sinfo --json`` and
    ``squeue --json``) in a folder, read again at every sync.  For trying policies on a copy of a
    cluster's state without touching it (and for the service's tests on machines without Slurm);
    reconciliation actions are only logged."""

    name = "files"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def snapshot(self) -> tuple[Snapshot, list[PendingDeadline]]:
        data = []
        for name in ("sinfo.json", "squeue.json"):
            path = os.path.join(self.folder, name)
            try:
                with open(path, "rb") as handle:
                    data.append(decode_json(handle.read(), path))
            except OSError as exc:
                raise BackendError(f"{path}: {exc.strerror}") from None
        return snapshot_from_json(data[0], data[1], time.time())

    def hold(self, job_id: str, comment: str) -> None:
        log.info("files backend: would hold job %s (%s)", job_id, comment)

    cancel = annotate = hold

    def power(self, node: str, action: str) -> None:
        log.info("files backend: would %s node %s", action, node)


BACKENDS = {"cli": CliBackend, "pyslurm": PyslurmBackend, "files": FilesBackend}
