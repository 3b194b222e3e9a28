"""The ``cli`` backend: Slurm's own commands with JSON output (``sinfo --json``, ``squeue --json``;
``scontrol`` and ``scancel`` for reconciliation's and power saving's actions)."""

from __future__ import annotations

import os
import subprocess
import time

from greenslurm.slurm_plugin.slurm_json import (BackendError, PendingDeadline, decode_json, default_partition,
                                                snapshot_from_json)
from greenslurm.slurm_plugin.snapshot import Snapshot


class CliBackend:
    """``sinfo --json`` and ``squeue --json`` (and ``scontrol``/``scancel`` for actions)."""

    name = "cli"

    def __init__(self, slurm_conf: str | None = None, bin_dir: str | None = None, timeout_s: float = 20.0) -> None:
        self.env = dict(os.environ)
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf
        self.bin_dir = bin_dir
        self.timeout_s = timeout_s

    def _cmd(self, name: str) -> str:
        return os.path.join(self.bin_dir, name) if self.bin_dir else name

    def _run(self, *argv: str) -> bytes:
        """The command's output as bytes (Slurm prints users' bytes as they are)."""
        try:
            result = subprocess.run([self._cmd(argv[0]), *argv[1:]], env=self.env, capture_output=True,
                                    timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"{argv[0]}: {exc}") from None
        if result.returncode != 0:
            stderr = result.stderr.decode("utf-8", errors="replace").strip()[:300]
            raise BackendError(f"{' '.join(argv)} failed ({result.returncode}): {stderr}")
        return result.stdout

    def _json(self, *argv: str) -> dict:
        return decode_json(self._run(*argv), argv[0])

    def snapshot(self) -> tuple[Snapshot, list[PendingDeadline]]:
        now = time.time()
        sinfo = self._json("sinfo", "--json")
        squeue = self._json("squeue", "--json")
        # a submission naming no partition goes to the default one: planned on its nodes only (a
        # job pinned to nodes outside it is refused by Slurm)
        partitions = self._run("scontrol", "--all", "--oneliner", "show", "partition")
        return snapshot_from_json(sinfo, squeue, now, default=default_partition(partitions.decode("utf-8", "replace")))

    def max_array_size(self) -> int | None:
        """Slurm's MaxArraySize (``scontrol show config``): an array index at or above it is refused."""
        for line in self._run("scontrol", "show", "config").decode("utf-8", "replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "MaxArraySize" and value.strip().isdigit():
                return int(value.strip())
        return None

    def measured_energy(self, job_ids: list[str]) -> dict[str, float]:
        """Slurm's measured energy of ended jobs (``sacct``'s ConsumedEnergyRaw, joules), where an
        energy plugin (``AcctGatherEnergyType``) measured one; BackendError when sacct cannot answer
        (no slurmdbd: accounting is disabled)."""
        from greenslurm.slurm_plugin.energy import parse_sacct_energy
        if not job_ids:
            return {}
        out = self._run("sacct", "-n", "-P", "-X", "-o", "JobID,ConsumedEnergyRaw", "-j", ",".join(job_ids))
        return parse_sacct_energy(out.decode("utf-8", "replace"))

    # -- actions (reconciliation) -------------------------------------------------------------------
    def hold(self, job_id: str, comment: str) -> None:
        self._run("scontrol", "hold", job_id)
        self._run("scontrol", "update", f"JobId={job_id}", f"Comment={comment}")

    def cancel(self, job_id: str, comment: str) -> None:
        self._run("scontrol", "update", f"JobId={job_id}", f"Comment={comment}")
        self._run("scancel", job_id)

    def annotate(self, job_id: str, comment: str) -> None:
        self._run("scontrol", "update", f"JobId={job_id}", f"Comment={comment}")

    def power(self, node: str, action: str) -> None:
        """Carry out a power decision (:mod:`greenslurm.slurm_plugin.power`) on ``node``."""
        from greenslurm.slurm_plugin.power import DRAIN_REASON
        if action == "power_down":
            self._run("scontrol", "update", f"NodeName={node}", "State=POWER_DOWN")
        elif action == "drain":
            self._run("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={DRAIN_REASON}")
        elif action == "power_up":
            self._run("scontrol", "update", f"NodeName={node}", "State=RESUME")
            self._run("scontrol", "update", f"NodeName={node}", "State=POWER_UP")
        else:
            raise BackendError(f"unknown power action {action!r}")
