"""The ``pyslurm`` backend: Slurm's state through pyslurm's API, for a pyslurm built against the
site's Slurm (pyslurm 22.5.x for Slurm 22.05; docs/hook-install.md).  pyslurm's records are turned
into the records of ``sinfo --json`` and ``squeue --json``, so that every backend builds its view
with the same code (:mod:`greenslurm.slurm_plugin.slurm_json`)."""

from __future__ import annotations

import os
import re
import time

from greenslurm.slurm_plugin.backend_cli import CliBackend
from greenslurm.slurm_plugin.slurm_json import (BackendError, PendingDeadline, default_of_partitions, index_list,
                                                snapshot_from_json)
from greenslurm.slurm_plugin.snapshot import Snapshot


class PyslurmBackend:
    """The same through pyslurm's API (``pyslurm.Nodes.load()``, ``pyslurm.Jobs.load()``; actions
    through ``pyslurm.Job``), for a pyslurm built against this Slurm (pyslurm 22.5.x for Slurm 22.05,
    ...; docs/hook-install.md).  pyslurm's records are turned into the records of ``sinfo --json``
    and ``squeue --json`` (:func:`node_record`, :func:`job_record`), so both backends build their
    view with the same code.

    ``import pyslurm`` reads the Slurm configuration (``slurm_conf``, else ``SLURM_CONF``, else
    Slurm's default) and ends the whole process when it finds none: the service probes it in a
    subprocess first (:func:`greenslurm.slurm_plugin.backend_choice.resolve_backend`)."""

    name = "pyslurm"

    def __init__(self, slurm_conf: str | None = None) -> None:
        self.slurm_conf = slurm_conf or None
        if self.slurm_conf:
            os.environ["SLURM_CONF"] = self.slurm_conf       # read by the import, once per process
        try:
            import pyslurm  # noqa: F401  (optional, built against the site's Slurm)
        except ImportError as exc:
            raise BackendError("the pyslurm backend needs pyslurm built for this Slurm "
                               f"(docs/hook-install.md): {exc}") from None
        self.pyslurm = pyslurm

    def __getstate__(self) -> dict:
        return {"slurm_conf": self.slurm_conf}   # a module does not pickle; the worker imports it again

    def __setstate__(self, state: dict) -> None:
        self.__init__(state.get("slurm_conf"))

    def _load(self, what):
        try:
            return what.load().values()
        except self.pyslurm.PyslurmError as exc:
            raise BackendError(f"pyslurm {what.__name__}.load(): {exc}") from None

    def snapshot(self) -> tuple[Snapshot, list[PendingDeadline]]:
        now = time.time()
        problems: list[str] = []
        nodes = _records(self._load(self.pyslurm.Nodes), node_record, "node", problems)
        jobs = _records(self._load(self.pyslurm.Jobs), job_record, "job", problems)
        if any("PENDING" in str(job.get("job_state")) for job in jobs):
            self._add_gpu_requests(jobs, problems)
        return snapshot_from_json({"nodes": nodes}, {"jobs": jobs}, now, problems,
                                  default=self._default_partition(problems))

    def _default_partition(self, problems: list[str]) -> str:
        """The default partition through pyslurm 22.5's ``pyslurm.partition().get()`` (its ``flags``
        dict has ``Default`` 1 for Slurm's PART_FLAG_DEFAULT); "" (noted) when it cannot be read."""
        try:
            partitions = self.pyslurm.partition().get()
        except Exception as exc:                 # pyslurm's older API raises ValueError and others
            problems.append(f"partitions: pyslurm.partition().get(): {type(exc).__name__}: {exc}")
            return ""
        return default_of_partitions(partitions)

    def _add_gpu_requests(self, jobs: list[dict], problems: list[str]) -> None:
        """``tres_per_job``, ``tres_per_task`` and ``tres_per_socket`` (``--gpus``, ``--gpus-per-task``,
        ``--gpus-per-socket``) of pending jobs: pyslurm 22.5's ``Job`` has only ``tres_per_node``, its
        older ``pyslurm.job().get()`` has them all (one more read of the jobs, made only while jobs wait)."""
        try:
            legacy = self.pyslurm.job().get()
        except Exception as exc:                 # pyslurm's older API raises ValueError and others
            problems.append(f"jobs: pyslurm.job().get(): {type(exc).__name__}: {exc}")
            return
        for job in jobs:
            if "PENDING" not in str(job.get("job_state")):
                continue
            record = legacy.get(job["job_id"]) or legacy.get(str(job["job_id"])) or {}
            for key in ("tres_per_job", "tres_per_task", "tres_per_socket"):
                job[key] = record.get(key) or ""

    def _act(self, what: str, job_id: str, action) -> None:
        try:
            action(self.pyslurm.Job(int(job_id)))
        except (self.pyslurm.PyslurmError, ValueError) as exc:
            raise BackendError(f"pyslurm {what} of job {job_id}: {exc}") from None

    def hold(self, job_id: str, comment: str) -> None:
        self._act("hold", job_id, lambda job: job.hold())
        self.annotate(job_id, comment)

    def cancel(self, job_id: str, comment: str) -> None:
        self.annotate(job_id, comment)
        self._act("cancel", job_id, lambda job: job.cancel())

    def annotate(self, job_id: str, comment: str) -> None:
        change = self.pyslurm.JobSubmitDescription(comment=slurm_text(comment))
        self._act("comment update", job_id, lambda job: job.modify(change))

    def power(self, node: str, action: str) -> None:
        """Power decisions go through Slurm's commands as with the CLI backend (pyslurm 22.5 has no
        power-state call)."""
        CliBackend(self.slurm_conf).power(node, action)

    def max_array_size(self) -> int | None:
        """Slurm's MaxArraySize, read as the CLI backend reads it (pyslurm 22.5's configuration call
        is not part of its new API)."""
        return CliBackend(self.slurm_conf).max_array_size()


def slurm_text(text: str) -> str:
    """``text`` as pyslurm can hand it to Slurm: pyslurm encodes strictly as UTF-8, so a byte of a
    user's comment that was not UTF-8 (kept as a surrogate escape when read) goes back as ``?`` (one
    byte for one byte: the comment keeps the length reconciliation fitted into Slurm's limit).

    >>> slurm_text("a\\udcffb | held"), slurm_text("caf\\u00e9")
    ('a?b | held', 'café')
    """
    return _ESCAPED.sub("?", text)


_ESCAPED = re.compile("[\\udc80-\\udcff]")


def _records(objects, convert, kind: str, problems: list[str]) -> list[dict]:
    """pyslurm objects as JSON records; one that cannot be converted is left out and noted."""
    out = []
    for obj in objects:
        try:
            out.append(convert(obj))
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
            problems.append(f"{kind} {_field(obj, 'id' if kind == 'job' else 'name')!r}: "
                            f"{type(exc).__name__}: {exc}")
    return out


def _field(obj, attr: str, default=None):
    """A field of a pyslurm object.  pyslurm decodes Slurm's strings strictly as UTF-8: a field
    holding other bytes (a user's comment may hold any) is read from the failed decode's bytes, kept
    as surrogate escapes as the CLI backend keeps them."""
    try:
        value = getattr(obj, attr)
    except UnicodeDecodeError as exc:
        value = bytes(exc.object).decode("utf-8", "surrogateescape")
    return default if value is None else value


def _words(obj, attr: str) -> list[str]:
    """A comma-separated list field of a pyslurm object (pyslurm gives a list, or the raw text when
    it could not decode it)."""
    value = _field(obj, attr, [])
    return [w for w in value.split(",") if w] if isinstance(value, str) else [str(w) for w in value]


def _count(obj, attr: str) -> int:
    """A count of a pyslurm object as squeue's JSON gives it: 0 when unset (None) or unlimited."""
    value = _field(obj, attr, 0)
    return value if isinstance(value, int) else 0


def _gres_text(gres: dict, prefix: str = "") -> str:
    """pyslurm's GRES dict back in Slurm's text form: ``{'gpu': 2, 'shard': 8}`` -> ``gpu:2,shard:8``;
    an allocation's ``{'gpu': {'count': '2', 'indexes': '0-1'}}`` -> ``gpu:2(IDX:0-1)``.

    >>> _gres_text({"gpu:a100": 2, "shard": 8}), _gres_text({"gpu": 1}, "gres:")
    ('gpu:a100:2,shard:8', 'gres:gpu:1')
    >>> _gres_text({"gpu": {"count": "2", "indexes": "0-1"}, "shard": {"count": "3", "indexes": "1"}})
    'gpu:2(IDX:0-1),shard:3(IDX:1)'
    """
    items = []
    for name, value in (gres or {}).items():
        if isinstance(value, dict):
            items.append(f"{prefix}{name}:{value['count']}(IDX:{value['indexes']})")
        else:
            items.append(f"{prefix}{name}:{value}")
    return ",".join(items)


def _cpu_ids(text: str) -> list[int]:
    """``0-1,3`` -> [0, 1, 3] (pyslurm's ``cpu_ids`` of a node of a job's allocation)."""
    ids = index_list(text or "")
    if text and not ids:
        raise ValueError(f"unreadable cpu_ids {text!r}")
    return ids


def node_record(node) -> dict:
    """One node of ``pyslurm.Nodes.load()`` as a node record of ``sinfo --json``."""
    base, *flags = str(_field(node, "state", "")).split("+")
    return {"name": _field(node, "name"), "cpus": _field(node, "total_cpus", 0),
            "real_memory": _field(node, "real_memory", 0), "gres": _gres_text(_field(node, "configured_gres", {})),
            "active_features": ",".join(_words(node, "active_features")), "partitions": _words(node, "partitions"),
            "state": base.lower(), "state_flags": flags, "reason": _field(node, "reason", "")}


def dependency_text(parsed) -> str:
    """pyslurm 22.5's parsed dependency (``Job.dependencies``: a list of job ids per kind, each as Slurm
    wrote it, e.g. ``'12(unfulfilled)'``; ``singleton``; ``satisfy`` all or any) written back as
    ``squeue --json``'s ``dependency`` text, which :func:`waits_for` reads.

    >>> dependency_text({"afterok": ["12(unfulfilled)"], "afterany": [13], "singleton": False, "satisfy": "all"})
    'afterany:13,afterok:12(unfulfilled)'
    >>> dependency_text({"afterok": ["1(unfulfilled)", "2(unfulfilled)"], "singleton": False, "satisfy": "any"})
    'afterok:1(unfulfilled)?afterok:2(unfulfilled)'
    >>> dependency_text({"singleton": True, "satisfy": "all"}), dependency_text(None)
    ('singleton', '')
    """
    if not isinstance(parsed, dict):
        return ""
    parts = [f"{kind}:{entry}" for kind in sorted(k for k, v in parsed.items() if isinstance(v, list))
             for entry in parsed[kind]]
    if parsed.get("singleton"):
        parts.append("singleton")
    return ("?" if parsed.get("satisfy") == "any" else ",").join(parts)


def job_record(job) -> dict:
    """One job of ``pyslurm.Jobs.load()`` as a job record of ``squeue --json``: the fields the view
    reads, with Slurm's unset values as squeue gives them (0 for an unset time, "" for a string).
    The allocation (``job_resources``) lists per node the allocated cores (pyslurm's ``cpu_ids``,
    all under one socket: only their count is read) and ``gres_detail`` the GPUs with their indices."""
    layout = job.get_resource_layout_per_node() if _field(job, "allocated_nodes") else {}
    allocated, detail = [], []
    for name, entry in layout.items():
        cores = {str(i): "allocated" for i in _cpu_ids(entry.get("cpu_ids") or "")}
        allocated.append({"nodename": name, "sockets": {"0": {"cores": cores}},
                          "memory_allocated": entry.get("memory") or 0})
        detail.append(_gres_text(entry.get("gres") or {}))
    waiting = _field(job, "array_tasks_waiting", "")
    parallel = _field(job, "array_tasks_parallel", 0)
    uid = _field(job, "user_id")
    try:
        user = _field(job, "user_name", "")
    except KeyError:                   # a uid without a passwd entry: squeue shows the number
        user = str(uid)
    return {
        "job_id": job.id, "job_state": _field(job, "state", ""), "state_reason": _field(job, "state_reason", ""),
        "user_name": user, "user_id": uid, "account": _field(job, "account", ""),
        "partition": _field(job, "partition", ""), "comment": _field(job, "comment", ""),
        "priority": _field(job, "priority", 0), "features": ",".join(_words(job, "constraints")),
        "required_nodes": _field(job, "required_nodes", ""), "excluded_nodes": _field(job, "excluded_nodes", ""),
        "nodes": _field(job, "allocated_nodes", ""),
        "node_count": _field(job, "num_nodes", 0), "cpus": _field(job, "cpus", 0),
        "tasks": _field(job, "ntasks", 1), "tasks_per_node": _count(job, "ntasks_per_node"),
        "sockets_per_node": _count(job, "sockets_per_node"),
        "memory_per_node": _field(job, "memory_per_node"), "memory_per_cpu": _field(job, "memory_per_cpu"),
        "tres_per_node": _gres_text(_field(job, "gres_per_node", {}), "gres:"),
        "time_limit": _field(job, "time_limit"), "submit_time": _field(job, "submit_time", 0),
        "eligible_time": _field(job, "eligible_time", 0), "start_time": _field(job, "start_time", 0),
        "end_time": _field(job, "end_time", 0), "deadline": _field(job, "deadline", 0),
        "dependency": dependency_text(_field(job, "dependencies")),
        "array_task_string": f"{waiting}%{parallel}" if waiting and parallel else waiting,
        "array_max_tasks": parallel,
        "job_resources": {"allocated_nodes": allocated} if allocated else None,
        "gres_detail": detail if any(detail) else [],
    }
