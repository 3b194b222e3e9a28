"""Where the service learns the cluster's state: Slurm's own commands with JSON output (works with
Slurm 22.05 and later: ``sinfo --json``, ``squeue --json``), or pyslurm where the site's Slurm
matches a pyslurm release (pyslurm builds only against the Slurm release of its number: pyslurm
22.5.x for Slurm 22.05; docs/hook-install.md).

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
from greenslurm.clustermodel.gres import gpu_count, shard_count
from greenslurm.slurm_plugin.protocol import UNLIMITED_S, unset
from greenslurm.clustermodel.gpu_state import MILLI
from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY as GPUS_TOTAL, SHARDS_KEY as SHARDS, gpu_request
from greenslurm.slurm_plugin.view import JobRun, LiveNode, NodeUse, PendingJob, RunningJob, Snapshot
from greenslurm.traces.slurm_fields import array_tasks
from greenslurm.traces.slurm_hostlist import expand_hostlist
from greenslurm.traces.slurm_nodes import slurm_json_number

log = logging.getLogger("greenslurm.hook.backend")

RUNNING_STATES = ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STAGE_OUT")


class BackendError(RuntimeError):
    """Slurm could not be asked (a command failed, timed out, or answered something unreadable)."""


@dataclass(frozen=True)
class PendingDeadline:
    """A pending job that carries a Slurm deadline (``--deadline``), for reconciliation."""

    job_id: str
    deadline_s: float
    job: JobSpec
    begin_s: float | None
    comment: str
    held: bool
    user: str = ""
    time_limit_s: float | None = None        # None: no time limit (Slurm's INFINITE)
    uid: int | None = None
    array_tasks: int = 1                      # a pending job array: the tasks still pending


def _number(value, default=0.0) -> float:
    """A Slurm JSON number, with Slurm's NO_VAL / INFINITE markers also read as unset."""
    value = slurm_json_number(value, default)
    return default if unset(value) else value


def _state(value) -> str:
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value or "")


_HELD = re.compile(r"(gpu|shard)(?::[^:(),]+)?:(\d+)\(IDX:([^)]*)\)")


def gpus_held(detail: str, shards_per_gpu: int) -> tuple[tuple[int, int], ...]:
    """(GPU index, milli-GPU) a running job holds on one node, from one ``gres_detail`` entry of
    ``squeue --json``: whole GPUs hold 1000, K shards of a GPU with S shards hold K * 1000 / S.

    >>> gpus_held("gpu:2(IDX:0-1)", 0)
    ((0, 1000), (1, 1000))
    >>> gpus_held("gpu:a100:1(IDX:3),shard:3(IDX:0)", 4)      # 3 of 4 shards of GPU 0
    ((3, 1000), (0, 750))
    >>> gpus_held("shard:2(IDX:N/A)", 4), gpus_held("", 4)
    ((), ())
    """
    held: list[tuple[int, int]] = []
    for kind, count, indices in _HELD.findall(detail or ""):
        gpus = [g for g in _indices(indices)]
        if not gpus:
            continue
        if kind == "gpu":
            held.extend((g, MILLI) for g in gpus)
        elif shards_per_gpu > 0:
            # K shards over the listed GPUs, evenly
            share = int(round(int(count) * MILLI / shards_per_gpu / len(gpus)))
            held.extend((g, min(share, MILLI)) for g in gpus)
    return tuple(held)


def _indices(text: str) -> list[int]:
    """``0-1,3`` -> [0, 1, 3]; anything else (``N/A``) -> []."""
    out: list[int] = []
    for item in text.split(","):
        lo, _, hi = item.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return []
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _node_from_sinfo(node: dict) -> LiveNode:
    name = node.get("name") or node.get("hostname")
    if not isinstance(name, str) or not name:
        raise ValueError("no node name")
    features = tuple(sorted(f for f in re.split(r"[,&]", node.get("active_features") or node.get("features") or "") if f))
    state = _state(node.get("state")).lower()
    flags = node.get("state_flags") or []
    if flags:
        state += "+" + "+".join(str(f).lower() for f in flags)
    gres = node.get("gres") or ""
    return LiveNode(name, int(_number(node.get("cpus"), 0)), _number(node.get("real_memory"), 0.0),
                    gpu_count(gres), features, tuple(str(p) for p in node.get("partitions") or ()), state,
                    shard_count(gres), str(node.get("reason") or ""))


def nodes_from_sinfo(data: dict, problems: list[str] | None = None) -> list[LiveNode]:
    """The nodes of ``sinfo --json``; a node record that cannot be read is left out (and noted in
    ``problems``)."""
    nodes: dict[str, LiveNode] = {}
    for record in data.get("nodes", []):
        try:
            node = _node_from_sinfo(record)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            if problems is not None:
                problems.append(f"node {_label(record, 'name')}: {exc}")
            continue
        nodes.setdefault(node.name, node)
    return [nodes[name] for name in sorted(nodes, key=_natural)]


def _label(record, key: str) -> str:
    return repr(record.get(key)) if isinstance(record, dict) else "?"


def _natural(name: str) -> tuple:
    return tuple((0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", name))


def job_spec_from_squeue(job: dict) -> JobSpec:
    limit = _number(job.get("time_limit"), 0.0)
    node_count = int(_number(job.get("node_count"), 0))
    memory = _number(job.get("memory_per_node"), 0.0)
    per_cpu = _number(job.get("memory_per_cpu"), 0.0)
    cpus = int(_number(job.get("cpus"), 1)) or 1
    if not memory and per_cpu:
        memory = per_cpu * (cpus / max(node_count, 1))
    deadline = _number(job.get("deadline"), 0.0)
    # GPUs in every form a user can ask them (--gres, --gpus, --gpus-per-task/-socket/-node); a pending
    # job shows 1 node when it named none: GPUs asked in all are then spread by the view as for a
    # submission, and over the nodes it names otherwise
    gpus = gpu_request(job.get("tres_per_node"), job.get("tres_per_job"), job.get("tres_per_task"),
                       job.get("tres_per_socket"), tasks=int(_number(job.get("tasks"), 1)) or 1,
                       nodes=node_count if node_count > 1 else 0, tasks_per_node=_small(job.get("tasks_per_node")),
                       sockets_per_node=_small(job.get("sockets_per_node")))
    extra = {**({SHARDS: gpus.shards} if gpus.shards else {}), **({GPUS_TOTAL: gpus.total} if gpus.total else {})}
    return JobSpec(str(job.get("job_id")), submit_s=_number(job.get("submit_time"), 0.0),
                   requested_time_s=(limit * 60.0) if limit else UNLIMITED_S, cpus=cpus,
                   nodes=0 if gpus.total else node_count, memory_mb_per_node=memory, gpus_per_node=float(gpus.per_node),
                   deadline_s=deadline or None, user=str(job.get("user_name") or ""),
                   partition=str(job.get("partition") or ""), state=_state(job.get("job_state")),
                   extra=extra)


def _small(value) -> int:
    """A 16-bit count of squeue's JSON (null, or Slurm's NO_VAL16 / INFINITE16: 0)."""
    number = int(_number(value, 0.0))
    return 0 if number >= 0xFFFE or number < 0 else number


def _uses(job: dict, nodes: dict[str, LiveNode]) -> tuple[NodeUse, ...]:
    """What a running job holds on each node (``job_resources``, ``gres_detail``); () when Slurm
    does not say (the view then counts its nodes as wholly busy)."""
    resources = job.get("job_resources")
    allocated = resources.get("allocated_nodes") if isinstance(resources, dict) else None
    if not allocated:
        return ()
    cores = []
    for entry in allocated:
        sockets = entry.get("sockets") or {}
        cores.append(sum(1 for socket in sockets.values() for state in (socket.get("cores") or {}).values()
                         if "alloc" in str(state).lower()))
    total_cores = sum(cores)
    cpus = _number(job.get("cpus"), 0.0)
    detail = job.get("gres_detail") or []
    per_node_memory = _number(job.get("memory_per_node"), 0.0)
    per_cpu_memory = _number(job.get("memory_per_cpu"), 0.0)
    uses = []
    for k, entry in enumerate(allocated):
        name = str(entry["nodename"])
        # the job's CPUs spread as its allocated cores are (a core may hold several CPUs)
        node_cpus = cpus * cores[k] / total_cores if total_cores and cpus else float(cores[k])
        memory = _number(entry.get("memory_allocated"), 0.0) or per_node_memory or per_cpu_memory * node_cpus
        node = nodes.get(name)
        gpus = gpus_held(detail[k], node.shards_per_gpu if node else 0) if k < len(detail) and len(detail) == len(allocated) else ()
        whole = 0
        if not gpus and not detail:
            whole = gpu_count(job.get("tres_per_node"))
        uses.append(NodeUse(name, node_cpus, memory, gpus, whole))
    return tuple(uses)


def default_partition(scontrol_partitions: str) -> str:
    """The partition Slurm puts a job naming none in (``Default=YES``), from ``scontrol --all
    --oneliner show partition``; "" when there is none.  (22.05's ``sinfo --json`` names no partition.)

    >>> default_partition("PartitionName=a Nodes=n1 Default=NO State=UP\\nPartitionName=b Nodes=n2 Default=YES\\n")
    'b'
    >>> default_partition("")
    ''
    """
    for line in scontrol_partitions.splitlines():
        fields = dict(token.partition("=")[::2] for token in line.split())
        if fields.get("Default") == "YES" and fields.get("PartitionName"):
            return fields["PartitionName"]
    return ""


def default_of_partitions(partitions: dict) -> str:
    """The default partition of pyslurm 22.5's ``pyslurm.partition().get()`` (name -> record whose
    ``flags`` has ``Default`` 1); "" when none is.

    >>> default_of_partitions({"a": {"flags": {"Default": 0}}, "b": {"flags": {"Default": 1}}, "c": {}})
    'b'
    >>> default_of_partitions({})
    ''
    """
    for name, record in (partitions or {}).items():
        if ((record or {}).get("flags") or {}).get("Default") == 1:
            return str(name)
    return ""


def snapshot_from_json(sinfo: dict, squeue: dict, now_s: float, problems: list[str] | None = None,
                       default: str = "") -> tuple[Snapshot, list[PendingDeadline]]:
    """The snapshot of ``sinfo --json`` and ``squeue --json`` output (``default``: the default
    partition).  A node or job record that cannot be used is skipped and counted
    (``Snapshot.skipped``), logged once for the sync; ``problems``: records already left out before
    (by the pyslurm backend), counted with them."""
    problems = list(problems or ())
    node_list = nodes_from_sinfo(sinfo, problems)
    nodes = {node.name: node for node in node_list}
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    deadlines: list[PendingDeadline] = []
    runs: list[JobRun] = []
    for job in squeue.get("jobs", []):
        try:
            _add_job(job, nodes, now_s, running, pending, deadlines)
            run = job_run(job, nodes)
            if run is not None:
                runs.append(run)
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
            problems.append(f"job {_label(job, 'job_id')}: {type(exc).__name__}: {exc}")
    carried = carried_tags(squeue.get("jobs", []))
    if problems:
        log.warning("sync: skipped %d record(s) Slurm's JSON gave that could not be used (first: %s)",
                    len(problems), problems[0])
    return Snapshot(now_s, node_list, running, pending, len(problems), runs, carried, default), deadlines


_TAG = re.compile(r"greenslurm#(\d{1,15})\.([0-9a-f]{8})")


def carried_tags(jobs) -> dict[int, tuple[str, str, int | None, str]]:
    """Decision id -> (job id, token, uid, user) for every job whose comment carries a hook's tag
    (its last one: the hook appends it), the lowest job id first when several carry the same.

    >>> carried_tags([{"job_id": 9, "comment": "x | greenslurm#4.0123abcd: planned", "user_id": 5},
    ...               {"job_id": 8, "comment": "greenslurm#4.0123abcd", "user_name": "ana"}, {"job_id": 7}])
    {4: ('8', '0123abcd', None, 'ana')}
    """
    found: dict[int, tuple[str, str, int | None, str]] = {}
    for job in jobs:
        if not isinstance(job, dict) or not isinstance(job.get("comment"), str):
            continue
        tags = _TAG.findall(job["comment"])
        if not tags:
            continue
        decision, token = int(tags[-1][0]), tags[-1][1]
        job_id = str(job.get("job_id"))
        if decision in found and _job_key(found[decision][0]) <= _job_key(job_id):
            continue
        found[decision] = (job_id, token, _uid(job), str(job.get("user_name") or ""))
    return found


def _job_key(job_id: str) -> tuple:
    return (int(job_id), "") if job_id.isdigit() else (float("inf"), job_id)


ENDED_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                "DEADLINE", "BOOT_FAIL")


def job_run(job: dict, nodes: dict[str, LiveNode]) -> JobRun | None:
    """The run of a job that started (None for one that never did: pending, or cancelled before its
    start): per node the CPUs and GPUs it holds (``job_resources``, else its CPUs spread evenly over
    its nodes), its start, and its end once Slurm says it ended.

    >>> r = job_run({"job_id": 7, "user_name": "ana", "account": "phys", "job_state": "COMPLETED",
    ...              "start_time": 100, "end_time": 160, "nodes": "n[1-2]", "cpus": 6, "node_count": 2}, {})
    >>> r.nodes, r.cpus, r.end_s, r.account
    (('n1', 'n2'), (3.0, 3.0), 160.0, 'phys')
    """
    state = _state(job.get("job_state")).upper()
    start = _number(job.get("start_time"), 0.0)
    ended = any(s in state for s in ENDED_STATES)
    if start <= 0 or not (ended or any(s in state for s in RUNNING_STATES)) or "CONFIGURING" in state:
        return None                      # (configuring: waiting for its nodes to boot; its start moves)
    end = _number(job.get("end_time"), 0.0) if ended else None
    if ended and (not end or end <= start):
        return None                      # ended before it really started (a cancelled pending job)
    uses = _uses(job, nodes)
    if uses:
        names = tuple(u.node for u in uses)
        cpus = tuple(float(u.cpus) for u in uses)
        gpus = tuple(float(len(u.gpus) + u.whole_gpus) for u in uses)
    else:
        names = tuple(expand_hostlist(job.get("nodes") or ""))
        if not names:
            return None
        total = _number(job.get("cpus"), 0.0)
        cpus = tuple(total / len(names) for _ in names)
        gpus = tuple(float(gpu_count(job.get("tres_per_node"))) for _ in names)
    return JobRun(str(job["job_id"]), str(job.get("user_name") or ""), str(job.get("account") or ""),
                  str(job.get("partition") or ""), names, cpus, gpus, start, end, state)


def _add_job(job: dict, nodes: dict[str, LiveNode], now_s: float, running: list, pending: list,
             deadlines: list) -> None:
    state = _state(job.get("job_state")).upper()
    job_id = str(job["job_id"])
    if any(s in state for s in RUNNING_STATES):
        end = _number(job.get("end_time"), 0.0)
        if not end:
            end = now_s + UNLIMITED_S
        running.append(RunningJob(job_id, tuple(expand_hostlist(job.get("nodes") or "")), end, _uses(job, nodes)))
    elif "PENDING" in state:
        spec = job_spec_from_squeue(job)
        begin = _number(job.get("eligible_time"), 0.0) or None
        begin = begin if begin and begin > now_s else None
        features = tuple(sorted(f for f in re.split(r"[&,]", job.get("features") or "") if f))
        reason = str(job.get("state_reason") or "")
        held = _number(job.get("priority"), 1.0) == 0 or "held" in reason.lower()
        waiting = reason if cannot_start(reason) else ""
        after = waits_for(job.get("dependency"))
        if after is None:
            waiting = waiting or "Dependency"
        required = tuple(expand_hostlist(job.get("required_nodes") or ""))
        tasks, throttle = pending_array(job)
        pending.append(PendingJob(job_id, spec, begin, features, held, required, tasks, throttle, waiting,
                                  after or ()))
        if spec.deadline_s is not None:
            limit = _number(job.get("time_limit"), 0.0)
            # a job that cannot start as it stands is looked at again once it can (like a held one)
            deadlines.append(PendingDeadline(job_id, spec.deadline_s, spec, begin, str(job.get("comment") or ""),
                                             held or bool(waiting or after), spec.user,
                                             limit * 60.0 if limit else None, _uid(job), tasks))


# Slurm 22.05's reasons (job_reason_string) for a pending job that cannot start as it stands: held,
# a dependency never satisfied, a partition down or over its limits, an account or QOS it may not
# use, constraints no node has, and per-job (or per-node) limits it exceeds.  Reasons that pass on
# their own (Resources, Priority, BeginTime, group and per-user limits, licenses) are planned.
NEVER_STARTS = frozenset(("JobHeldAdmin", "JobHeldUser", "JobHoldMaxRequeue", "DependencyNeverSatisfied",
                          "PartitionNodeLimit", "PartitionTimeLimit", "PartitionDown", "PartitionInactive",
                          "PartitionConfig", "InvalidAccount", "InvalidQOS", "QOSNotAllowed", "AccountNotAllowed",
                          "BadConstraints", "MaxMemPerLimit", "ReservationDeleted"))
_PER_JOB_LIMIT = re.compile(r"^(Assoc|QOS)(Max\w*Per(Job|Node)\w*|Min\w*)$")


def cannot_start(reason: str) -> bool:
    """Whether Slurm's pending reason says the job cannot start as it stands.

    >>> cannot_start("DependencyNeverSatisfied"), cannot_start("QOSMaxWallDurationPerJobLimit")
    (True, True)
    >>> cannot_start("Resources"), cannot_start("AssocGrpCpuLimit"), cannot_start("Dependency")
    (False, False, False)
    """
    return reason in NEVER_STARTS or bool(_PER_JOB_LIMIT.match(reason))



def waits_for(dependency) -> tuple[str, ...] | None:
    """The jobs whose end a pending job waits for (``squeue --json``'s ``dependency``, e.g.
    ``afterok:12(unfulfilled),afterany:13_2(unfulfilled)``): () when none; None when its wait
    cannot be placed on the plan (``singleton``, an ``OR`` of dependencies ``?``, ``aftercorr``,
    ``afterburstbuffer``, or a text not understood).  ``after:`` (start) is counted as the end.

    >>> waits_for(""), waits_for("afterok:12(unfulfilled),afterany:13:14(unfulfilled)")
    ((), ('12', '13', '14'))
    >>> waits_for("singleton(unfulfilled)"), waits_for("afterok:1(unfulfilled)?afterok:2(unfulfilled)")
    (None, None)
    """
    if not dependency or not isinstance(dependency, str) or dependency == "(null)":
        return ()
    if "?" in dependency:
        return None
    jobs: list[str] = []
    for part in dependency.split(","):
        kind, _, rest = part.partition(":")
        if kind not in ("after", "afterok", "afterany", "afternotok") or not rest:
            return None
        state = rest[rest.rfind("(") + 1:].rstrip(")") if "(" in rest else "unfulfilled"
        if state != "unfulfilled":
            continue
        ids = rest.split("(", 1)[0].split(":")
        ids = [i.split("+", 1)[0] for i in ids]        # after:ID+minutes
        if not all(re.fullmatch(r"\d+(_\d+)?", i) for i in ids):
            return None
        jobs.extend(ids)
    return tuple(jobs)


def pending_array(job: dict) -> tuple[int, int]:
    """(tasks, throttle) of a pending record of ``squeue --json``: a job array's tasks not yet started
    are one record whose ``array_task_string`` lists them (``16-99%4``); any other job is one task.

    >>> pending_array({"array_task_string": "16-99%4", "array_max_tasks": 4}), pending_array({"job_id": 7})
    ((84, 4), (1, 0))
    """
    text = job.get("array_task_string") or ""
    if not isinstance(text, str) or not text:
        return 1, 0
    tasks = len(array_tasks(text))
    throttle = int(_number(job.get("array_max_tasks"), 0.0))
    return max(tasks, 1), max(throttle, 0)


def _uid(job: dict) -> int | None:
    value = job.get("user_id")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or unset(value):
        return None
    return int(value)


def decode_json(data: bytes, what: str) -> dict:
    """Slurm's JSON output as a dict.  Bytes that are not UTF-8 (a user's comment or job name may
    hold any byte) are kept as surrogate escapes, so they never stop a sync and go back to Slurm
    unchanged.

    >>> comment = decode_json(b'{"jobs": [{"comment": "a\\xffb"}]}', "squeue")["jobs"][0]["comment"]
    >>> comment, comment.encode("utf-8", "surrogateescape")
    ('a\\udcffb', b'a\\xffb')
    """
    try:
        parsed = json.loads(data.decode("utf-8", errors="surrogateescape"))
    except ValueError as exc:
        raise BackendError(f"{what} --json: not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise BackendError(f"{what} --json: not a JSON object")
    return parsed


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


class PyslurmBackend:
    """The same through pyslurm's API (``pyslurm.Nodes.load()``, ``pyslurm.Jobs.load()``; actions
    through ``pyslurm.Job``), for a pyslurm built against this Slurm (pyslurm 22.5.x for Slurm 22.05,
    ...; docs/hook-install.md).  pyslurm's records are turned into the records of ``sinfo --json``
    and ``squeue --json`` (:func:`node_record`, :func:`job_record`), so both backends build their
    view with the same code.

    ``import pyslurm`` reads the Slurm configuration (``slurm_conf``, else ``SLURM_CONF``, else
    Slurm's default) and ends the whole process when it finds none: the service probes it in a
    subprocess first (:func:`greenslurm.slurm_plugin.install.resolve_backend`)."""

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
    ids = _indices(text or "")
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
        "required_nodes": _field(job, "required_nodes", ""), "nodes": _field(job, "allocated_nodes", ""),
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
