"""Slurm's state as the service reads it: the records of ``sinfo --json`` and ``squeue --json``
(Slurm 22.05 and later; the pyslurm backend turns pyslurm's records into the same) as a
:class:`greenslurm.slurm_plugin.snapshot.Snapshot`, plus the pending jobs' deadlines (for the
reconciliation of jobs whose deadline the hook could not see) and the hook's tags in job comments.
Every backend builds its view with this code (:mod:`greenslurm.slurm_plugin.backend`).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from greenslurm.clustermodel import JobSpec
from greenslurm.clustermodel.gpu_state import MILLI
from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY as GPUS_TOTAL, SHARDS_KEY as SHARDS, gpu_count, gpu_request, shard_count
from greenslurm.slurm_plugin.protocol import UNLIMITED_S, unset
from greenslurm.slurm_plugin.live_nodes import features_of
from greenslurm.slurm_plugin.snapshot import JobRun, LiveNode, NodeUse, PendingJob, RunningJob, Snapshot, job_order
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
        gpus = [g for g in index_list(indices)]
        if not gpus:
            continue
        if kind == "gpu":
            held.extend((g, MILLI) for g in gpus)
        elif shards_per_gpu > 0:
            # K shards over the listed GPUs, evenly
            share = int(round(int(count) * MILLI / shards_per_gpu / len(gpus)))
            held.extend((g, min(share, MILLI)) for g in gpus)
    return tuple(held)


def index_list(text: str) -> list[int]:
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
    return [nodes[name] for name in sorted(nodes, key=natural_order)]


def _label(record, key: str) -> str:
    return repr(record.get(key)) if isinstance(record, dict) else "?"


def natural_order(name: str) -> tuple:
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
    lists: dict[str, tuple[str, ...]] = {}
    for job in squeue.get("jobs", []):
        try:
            _add_job(job, nodes, now_s, running, pending, deadlines, lists)
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


TAG = "greenslurm#"                                       # the hook's tag in a job's comment:
TAG_PATTERN = re.compile(r"greenslurm#(\d{1,15})\.([0-9a-f]{8})")     # greenslurm#DECISION.TOKEN


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
        tags = TAG_PATTERN.findall(job["comment"])
        if not tags:
            continue
        decision, token = int(tags[-1][0]), tags[-1][1]
        job_id = str(job.get("job_id"))
        if decision in found and job_order(found[decision][0]) <= job_order(job_id):
            continue
        found[decision] = (job_id, token, _uid(job), str(job.get("user_name") or ""))
    return found


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


def cluster_nodes_named(text: str, nodes: dict[str, LiveNode], lists: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The nodes of the cluster (``nodes``, by name) a Slurm hostlist names, in its order; names the
    cluster does not have are dropped.  One expansion per distinct text (``lists``, kept for one
    snapshot): a thousand jobs excluding ``n[1-9999]`` cost one, and hold the nodes' own names.

    >>> known = {name: LiveNode(name, 4) for name in ("n1", "n2", "n3")}
    >>> lists = {}
    >>> cluster_nodes_named("n[2-9]", known, lists), cluster_nodes_named("n[2-9]", known, lists) is lists["n[2-9]"]
    (('n2', 'n3'), True)
    """
    if not text:
        return ()
    found = lists.get(text)
    if found is None:
        found = lists[text] = tuple(nodes[name].name for name in expand_hostlist(text) if name in nodes)
    return found


def _add_job(job: dict, nodes: dict[str, LiveNode], now_s: float, running: list, pending: list,
             deadlines: list, lists: dict[str, tuple[str, ...]] | None = None) -> None:
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
        features = features_of(str(job.get("features") or ""))
        reason = str(job.get("state_reason") or "")
        held = _number(job.get("priority"), 1.0) == 0 or "held" in reason.lower()
        waiting = reason if cannot_start(reason) else ""
        after = waits_for(job.get("dependency"))
        if after is None:
            waiting = waiting or "Dependency"
        required = tuple(expand_hostlist(job.get("required_nodes") or ""))
        # -x: only the cluster's nodes matter (a job never runs on a node the cluster lacks)
        excluded = cluster_nodes_named(str(job.get("excluded_nodes") or ""), nodes, {} if lists is None else lists)
        tasks, throttle = pending_array(job)
        pending.append(PendingJob(job_id, spec, begin, features, held, required, tasks, throttle, waiting,
                                  after or (), excluded, limited=held_back(reason)))
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


# Slurm 22.05's reasons for a pending job held back by a limit over several jobs (a group's, a user's or
# an account's, a QOS's usage, licenses, its array's throttle): it starts once other jobs end, so it is
# planned, but Slurm's scheduler allocates it no node now (its power saving wakes none for it)
_HELD_BACK = re.compile(r"^((Assoc|QOS)(Grp|Max)\w*|Association(Job|Resource|Time)Limit|QOS(Job|Resource|Time)Limit"
                        r"|QOSUsageThreshold|Max\w*PerAccount|AccountingPolicy|JobArrayTaskLimit|Licenses)$")


def held_back(reason: str) -> bool:
    """Whether Slurm's pending reason says a limit over several jobs holds the job back now.

    >>> held_back("AssocGrpCpuLimit"), held_back("QOSMaxJobsPerUserLimit"), held_back("JobArrayTaskLimit")
    (True, True, True)
    >>> held_back("Resources"), held_back("Priority"), held_back("ReqNodeNotAvail")
    (False, False, False)
    """
    return bool(_HELD_BACK.match(reason))


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
