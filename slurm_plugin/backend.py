"""Where the service learns the cluster's state: Slurm's own commands with JSON output (works with
Slurm 22.05 and later: ``sinfo --json``, ``squeue --json``), or pyslurm where the site's Slurm
matches a pyslurm release (PyPI's pyslurm 25.11 builds only against Slurm 25.11).

A backend returns a :class:`greenslurm.slurm_plugin.view.Snapshot` plus the pending jobs' deadlines (for the
reconciliation of jobs whose deadline the hook could not see), and carries out the few actions
reconciliation takes (hold, release, cancel, update a comment).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
from dataclasses import dataclass

from greenslurm.clustermodel import JobSpec
from greenslurm.slurm_plugin.protocol import gpus_per_node, unset
from greenslurm.slurm_plugin.view import LiveNode, PendingJob, RunningJob, Snapshot
from greenslurm.traces.slurm_nodes import slurm_json_number

log = logging.getLogger("greenslurm.hook.backend")

RUNNING_STATES = ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STAGE_OUT")


class BackendError(RuntimeError):
    """Slurm could not be asked (a command failed, timed out, or answered something unreadable)."""


def expand_hostlist(text: str) -> list[str]:
    """Slurm's hostlist syntax expanded.

    >>> expand_hostlist("n[1-3,7],gpu[01-02],login")
    ['n1', 'n2', 'n3', 'n7', 'gpu01', 'gpu02', 'login']
    >>> expand_hostlist("")
    []
    """
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text or ""):
        match = re.match(r"^(.*?)\[([^\]]*)\](.*)$", part)
        if not match:
            names.append(part)
            continue
        prefix, ranges, rest = match.groups()
        tails = expand_hostlist(rest) if "[" in rest else [rest]
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            if hi:
                width = len(lo)
                for k in range(int(lo), int(hi) + 1):
                    for tail in tails:
                        names.append(f"{prefix}{k:0{width}d}{tail}")
            else:
                for tail in tails:
                    names.append(f"{prefix}{lo}{tail}")
    return names


@dataclass(frozen=True)
class PendingDeadline:
    job_id: str
    deadline_s: float
    job: JobSpec
    begin_s: float | None
    comment: str
    held: bool


def _number(value, default=0.0) -> float:
    """A Slurm JSON number, with Slurm's NO_VAL / INFINITE markers also read as unset."""
    value = slurm_json_number(value, default)
    return default if unset(value) else value


def _state(value) -> str:
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value or "")


def nodes_from_sinfo(data: dict) -> list[LiveNode]:
    nodes: dict[str, LiveNode] = {}
    for node in data.get("nodes", []):
        name = node.get("name") or node.get("hostname")
        if not name or name in nodes:
            continue
        features = tuple(sorted(f for f in re.split(r"[,&]", node.get("active_features") or node.get("features") or "") if f))
        state = _state(node.get("state")).lower()
        flags = node.get("state_flags") or []
        if flags:
            state += "+" + "+".join(str(f).lower() for f in flags)
        nodes[name] = LiveNode(name, int(_number(node.get("cpus"), 0)), _number(node.get("real_memory"), 0.0),
                               gpus_per_node(node.get("gres")), features, tuple(node.get("partitions") or ()), state)
    return [nodes[name] for name in sorted(nodes, key=_natural)]


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def job_spec_from_squeue(job: dict) -> JobSpec:
    limit = _number(job.get("time_limit"), 0.0)
    node_count = int(_number(job.get("node_count"), 0))
    memory = _number(job.get("memory_per_node"), 0.0)
    per_cpu = _number(job.get("memory_per_cpu"), 0.0)
    cpus = int(_number(job.get("cpus"), 1)) or 1
    if not memory and per_cpu:
        memory = per_cpu * (cpus / max(node_count, 1))
    deadline = _number(job.get("deadline"), 0.0)
    return JobSpec(str(job.get("job_id")), submit_s=_number(job.get("submit_time"), 0.0),
                   requested_time_s=(limit * 60.0) if limit else 365 * 86400.0, cpus=cpus, nodes=node_count,
                   memory_mb_per_node=memory, gpus_per_node=float(gpus_per_node(job.get("tres_per_node"))),
                   deadline_s=deadline or None, user=str(job.get("user_name") or ""),
                   partition=str(job.get("partition") or ""), state=_state(job.get("job_state")))


def snapshot_from_json(sinfo: dict, squeue: dict, now_s: float) -> tuple[Snapshot, list[PendingDeadline]]:
    nodes = nodes_from_sinfo(sinfo)
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    deadlines: list[PendingDeadline] = []
    for job in squeue.get("jobs", []):
        state = _state(job.get("job_state")).upper()
        job_id = str(job.get("job_id"))
        if any(s in state for s in RUNNING_STATES):
            end = _number(job.get("end_time"), 0.0)
            if not end:
                end = now_s + 365 * 86400.0
            running.append(RunningJob(job_id, tuple(expand_hostlist(job.get("nodes") or "")), end))
        elif "PENDING" in state:
            spec = job_spec_from_squeue(job)
            begin = _number(job.get("eligible_time"), 0.0) or None
            features = tuple(sorted(f for f in re.split(r"[&,]", job.get("features") or "") if f))
            pending.append(PendingJob(job_id, spec, begin if begin and begin > now_s else None, features))
            if spec.deadline_s is not None:
                held = _number(job.get("priority"), 1.0) == 0 or "held" in str(job.get("state_reason", "")).lower()
                deadlines.append(PendingDeadline(job_id, spec.deadline_s, spec, begin if begin and begin > now_s else None,
                                                 str(job.get("comment") or ""), held))
    return Snapshot(now_s, nodes, running, pending), deadlines


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

    def _run(self, *argv: str) -> str:
        try:
            result = subprocess.run([self._cmd(argv[0]), *argv[1:]], env=self.env, capture_output=True, text=True,
                                    timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"{argv[0]}: {exc}") from None
        if result.returncode != 0:
            raise BackendError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()[:300]}")
        return result.stdout

    def _json(self, *argv: str) -> dict:
        text = self._run(*argv)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise BackendError(f"{argv[0]} --json: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise BackendError(f"{argv[0]} --json: not a JSON object")
        return data

    def snapshot(self) -> tuple[Snapshot, list[PendingDeadline]]:
        now = time.time()
        sinfo = self._json("sinfo", "--json")
        squeue = self._json("squeue", "--json")
        return snapshot_from_json(sinfo, squeue, now)

    # -- actions (reconciliation) -------------------------------------------------------------------
    def hold(self, job_id: str, comment: str) -> None:
        self._run("scontrol", "hold", job_id)
        self._run("scontrol", "update", f"JobId={job_id}", f"Comment={comment}")

    def cancel(self, job_id: str, comment: str) -> None:
        self._run("scontrol", "update", f"JobId={job_id}", f"Comment={comment}")
        self._run("scancel", job_id)

    def annotate(self, job_id: str, comment: str) -> None:
        self._run("scontrol", "update", f"JobId={job_id}", f"Comment={comment}")


class PyslurmBackend:
    """The same through pyslurm's API (pyslurm >= 23.2: ``pyslurm.Nodes.load()``,
    ``pyslurm.Jobs.load()``).  Imported lazily: pyslurm builds only against the Slurm release of
    the same number, and Debian 12's Slurm 22.05 has none on PyPI, so this backend is not exercised
    by the tests here."""

    name = "pyslurm"

    def __init__(self) -> None:
        try:
            import pyslurm  # noqa: F401  (optional, site-specific)
        except ImportError as exc:
            raise BackendError("the pyslurm backend needs pyslurm built for this Slurm "
                               f"(pip install 'greenslurm[slurm]' on Slurm 25.11): {exc}") from None
        self.pyslurm = pyslurm

    def snapshot(self) -> tuple[Snapshot, list[PendingDeadline]]:
        pyslurm = self.pyslurm
        now = time.time()
        sinfo = {"nodes": [{"name": n.name, "cpus": n.total_cpus, "real_memory": n.real_memory,
                            "gres": ",".join(f"{k}:{v}" for k, v in (n.configured_gres or {}).items()),
                            "active_features": ",".join(n.active_features or ()), "partitions": list(n.partitions or ()),
                            "state": n.state} for n in pyslurm.Nodes.load().values()]}
        jobs = []
        for j in pyslurm.Jobs.load().values():
            jobs.append({"job_id": j.id, "job_state": j.state, "end_time": j.end_time, "nodes": j.allocated_nodes or "",
                         "time_limit": j.time_limit, "node_count": j.num_nodes, "cpus": j.cpus,
                         "memory_per_node": j.memory_per_node, "memory_per_cpu": j.memory_per_cpu,
                         "tres_per_node": j.gres_per_node and ",".join(f"gres:{k}:{v}" for k, v in j.gres_per_node.items()),
                         "submit_time": j.submit_time, "eligible_time": j.eligible_time, "deadline": j.deadline,
                         "user_name": j.user_name, "partition": j.partition, "comment": j.comment,
                         "priority": j.priority, "features": ",".join(j.required_features or ())})
        return snapshot_from_json(sinfo, {"jobs": jobs}, now)

    def hold(self, job_id: str, comment: str) -> None:
        self.pyslurm.Job(int(job_id)).hold()
        self.annotate(job_id, comment)

    def cancel(self, job_id: str, comment: str) -> None:
        self.annotate(job_id, comment)
        self.pyslurm.Job(int(job_id)).cancel()

    def annotate(self, job_id: str, comment: str) -> None:
        self.pyslurm.Job(int(job_id)).modify(self.pyslurm.JobSubmitDescription(comment=comment))


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
                with open(path) as handle:
                    data.append(json.load(handle))
            except (OSError, ValueError) as exc:
                raise BackendError(f"{path}: {exc}") from None
        return snapshot_from_json(data[0], data[1], time.time())

    def hold(self, job_id: str, comment: str) -> None:
        log.info("files backend: would hold job %s (%s)", job_id, comment)

    cancel = annotate = hold


BACKENDS = {"cli": CliBackend, "pyslurm": PyslurmBackend, "files": FilesBackend}
