"""A site's slurm.conf read the way Slurm 22.05 reads it, into a frozen, typed :class:`SlurmConf`: nodes,
partitions, priority weights, the scheduler and its SchedulerParameters, and the select plugin.

Two steps:

- :func:`read_slurm_conf` (:mod:`greenslurm.traces.slurm_conf_files`) follows ``Include`` lines (Slurm's relative-path rule of the release, a cycle
  guard) and gives every logical line with its file and line number, plus the last value of every plain
  setting (what ``greenslurm hook check`` needs).  Missing files and cycles are *problems*, not errors:
  ``hook check`` reports them.  Host lists (``n[1-3]``) are :mod:`greenslurm.traces.slurm_hostlist`'s.
- :func:`parse_slurm_conf` builds the typed model from those lines and refuses what Slurm refuses
  (``InputError`` naming file, line and field): a key a NodeName or PartitionName line does not know,
  a negative count, a time limit Slurm cannot read, a partition naming a node that is not defined.

Slurm's rules followed here: keys are case-insensitive; ``#`` starts a comment (``\\#`` does not); a
trailing backslash continues the line; ``NodeName=DEFAULT`` / ``PartitionName=DEFAULT`` lines set
defaults for the lines after them (each adds to the previous defaults); a node defined twice keeps its
first definition (Slurm ignores the later one); time limits are minutes, ``MM:SS``, ``HH:MM:SS``,
``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS`` or ``UNLIMITED``, seconds rounded up to the next minute.

>>> conf = parse_slurm_conf_text('''
... NodeName=DEFAULT CPUs=8 RealMemory=16000
... NodeName=n[1-3]
... NodeName=g1 Gres=gpu:a100:4 Features=fast,ib
... PartitionName=cpu Nodes=n[1-3] Default=YES MaxTime=2-00:00:00
... PartitionName=all Nodes=ALL MaxTime=30 PriorityTier=2
... ''')
>>> [(n.name, n.cpus, n.gpus, n.partitions) for n in conf.nodes]
[('n1', 8, 0, ('cpu', 'all')), ('n2', 8, 0, ('cpu', 'all')), ('n3', 8, 0, ('cpu', 'all')), ('g1', 8, 4, ('all',))]
>>> conf.partition("cpu").max_time_s, conf.partition("all").max_time_s, conf.default_partition.name
(172800.0, 1800.0, 'cpu')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from greenslurm.clustermodel import Cluster, InputError, NodeSpec, gres
from greenslurm.clustermodel.node import GPU_POWER_W
from greenslurm.clustermodel.power import check_given_power
from greenslurm.traces.slurm_fields import SLURM_TIME_FORMS, slurm_time_s

from greenslurm.traces.slurm_conf_files import INCLUDE, KEY_VALUE, ConfLine, SlurmConfFiles, logical_lines
from greenslurm.traces.slurm_hostlist import expand_hostlist
from greenslurm.traces.slurm_conf_files import read_slurm_conf  # noqa: E402


# -- values as Slurm reads them -----------------------------------------------------------------------------
INFINITE = math.inf


def parse_time_limit_s(text: str) -> float:
    """A Slurm time limit in seconds, as Slurm 22.05 reads MaxTime and DefaultTime (``time_str2mins``):
    minutes, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``; seconds rounded up to the next
    minute; ``UNLIMITED``, ``INFINITE`` and ``-1`` are ``math.inf``.  ValueError otherwise.

    >>> [parse_time_limit_s(t) for t in ("30", "1:30", "1:00:00", "2-12", "1-2:30", "1-00:00:01", "UNLIMITED")]
    [1800.0, 120.0, 3600.0, 216000.0, 95400.0, 86460.0, inf]
    >>> parse_time_limit_s("1:2:3:4")
    Traceback (most recent call last):
    ...
    ValueError: '1:2:3:4' is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)
    """
    if "." in text:                             # a fraction of a second: sacct prints one, Slurm reads none
        raise ValueError(f"{text!r} is not a Slurm time ({SLURM_TIME_FORMS})")
    seconds = slurm_time_s(text)
    return seconds if seconds == INFINITE else float(math.ceil(seconds / 60) * 60)


def _yes_no(value: str, path: str, line: int, key: str) -> bool:
    upper = value.upper()
    if upper in ("YES", "Y", "1", "TRUE"):
        return True
    if upper in ("NO", "N", "0", "FALSE"):
        return False
    raise InputError(f"{value!r} is neither YES nor NO", path=path, line=line, field=key)


# the numbers C's strtoul reads to the end of a value: base 0 (s_p_handle_uint16/32/64 in Slurm's
# src/common/parse_value.c) takes 0x hexadecimal and a leading 0 as octal; base 10 (OverSubscribe's
# count, SuspendTime) only decimal.  ASCII digits only: C's isdigit; Python's int() would read "４"
# (full width) or "٤" (Arabic-Indic) as 4.
_STRTOUL = {0: re.compile(r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0([0-7]*)|([1-9][0-9]*))", re.ASCII),
            10: re.compile(r"([-+]?)()()([0-9]+)", re.ASCII)}


def c_strtoul(text: str, base: int = 0) -> int | None:
    """The number Slurm's ``strtoul(text, &end, base)`` reads when it reads all of ``text`` (None
    when it stops before the end, where Slurm says the value "is not a valid number"); a minus
    sign is kept for the caller to refuse (Slurm: "is less than zero").

    >>> c_strtoul("12"), c_strtoul("010"), c_strtoul("0x1F"), c_strtoul("+7"), c_strtoul("0")
    (12, 8, 31, 7, 0)
    >>> c_strtoul("08"), c_strtoul("\uff14"), c_strtoul("1_0"), c_strtoul("010", 10)
    (None, None, None, 10)
    """
    found = _STRTOUL[base].fullmatch(text)
    if found is None:
        return None
    sign, hexadecimal, octal, decimal = found.groups()
    number = int(hexadecimal, 16) if hexadecimal else int(octal, 8) if octal else int(decimal or "0")
    return -number if sign == "-" else number


def _integer(value: str, path: str, line: int, key: str, low: int = 0, high: int = 2 ** 32 - 2,
             base: int = 0) -> int:
    number = c_strtoul(value.strip(), base)
    if number is None:
        raise InputError(f"{value!r} is not a whole number", path=path, line=line, field=key)
    if number < low:
        raise InputError(f"{number} is less than {low}", path=path, line=line, field=key)
    if number > high:
        raise InputError(f"{number} is greater than {high}", path=path, line=line, field=key)
    return number


# -- the model ---------------------------------------------------------------------------------------------
NODE_STATES = ("CLOUD", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "UNKNOWN", "IDLE")
UNAVAILABLE_NODE_STATES = ("CLOUD", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE")
PARTITION_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
# every key Slurm 22.05 accepts on a NodeName line (lower case); others are fatal there
NODE_KEYS = {"nodename", "nodehostname", "nodeaddr", "bcastaddr", "boards", "corespeccount", "corespersocket",
             "cpubind", "cpus", "cpuspeclist", "feature", "features", "gres", "memspeclimit", "port", "procs",
             "realmemory", "reason", "sockets", "socketsperboard", "state", "threadspercore", "tmpdisk", "weight",
             "tresweights"}
# keys that are another name of one key: the later of the two wins, as in Slurm
_ALIASES = {"feature": "features", "procs": "cpus", "shared": "oversubscribe"}
# every key Slurm 22.05 accepts on a PartitionName line (lower case)
PARTITION_KEYS = {"partitionname", "allocnodes", "allowaccounts", "allowgroups", "allowqos", "alternate", "cpubind",
                  "default", "defaulttime", "defcpupergpu", "defmempercpu", "defmempergpu", "defmempernode",
                  "denyaccounts", "denyqos", "disablerootjobs", "exclusiveuser", "gracetime", "hidden", "lln",
                  "maxcpuspernode", "maxmempercpu", "maxmempernode", "maxnodes", "maxtime", "minnodes", "nodes",
                  "oversubscribe", "overtimelimit", "powerdownonidle", "preemptmode", "priorityjobfactor",
                  "prioritytier", "qos", "reqresv", "resumetimeout", "rootonly", "selecttypeparameters", "shared",
                  "state", "suspendtime", "suspendtimeout", "tresbillingweights"}


@dataclass(frozen=True)
class NodeConf:
    """One node as slurm.conf defines it.  ``cpus`` is CPUs= or, when absent, Boards x Sockets x
    CoresPerSocket x ThreadsPerCore; memory in MiB (Slurm's default RealMemory is 1)."""

    name: str
    cpus: int
    boards: int = 1
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    real_memory_mb: int = 1
    gres: str = ""
    gpus: int = 0
    gpu_models: tuple[str, ...] = ()
    shards: int = 0
    features: tuple[str, ...] = ()
    weight: int = 1
    state: str = "UNKNOWN"
    partitions: tuple[str, ...] = ()
    where: str = ""

    @property
    def available(self) -> bool:
        return self.state not in UNAVAILABLE_NODE_STATES


@dataclass(frozen=True)
class OverSubscribe:
    """A partition's OverSubscribe: NO, EXCLUSIVE, YES:n or FORCE:n (n jobs per resource, default 4).

    >>> str(OverSubscribe("FORCE", 4)), str(OverSubscribe("NO", 1))
    ('FORCE:4', 'NO')
    """

    mode: str = "NO"
    jobs_per_resource: int = 1

    def __str__(self) -> str:
        return f"{self.mode}:{self.jobs_per_resource}" if self.mode in ("YES", "FORCE") else self.mode


@dataclass(frozen=True)
class PartitionConf:
    """One partition.  Times in seconds, ``math.inf`` for UNLIMITED; ``default_time_s`` None when not
    set (jobs without a limit then get ``max_time_s``); ``max_nodes`` None for UNLIMITED."""

    name: str
    nodes: tuple[str, ...]
    default: bool = False
    max_time_s: float = INFINITE
    default_time_s: float | None = None
    max_nodes: int | None = None
    min_nodes: int = 0
    priority_tier: int = 1
    priority_job_factor: int = 1
    oversubscribe: OverSubscribe = OverSubscribe()
    exclusive_user: bool = False
    state: str = "UP"
    where: str = ""
    # power saving (None: not set on this partition; math.inf: SuspendTime=INFINITE)
    suspend_time_s: float | None = None
    suspend_timeout_s: float | None = None
    resume_timeout_s: float | None = None

    @property
    def job_default_time_s(self) -> float:
        """The limit a job that asks for none gets: DefaultTime, else MaxTime."""
        return self.max_time_s if self.default_time_s is None else self.default_time_s


@dataclass(frozen=True)
class PriorityConf:
    """PriorityType and the multifactor settings (times in seconds)."""

    type: str = "priority/basic"
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    weight_tres: str = ""
    max_age_s: float = 7 * 86400.0
    decay_half_life_s: float = 7 * 86400.0
    favor_small: bool = False
    calc_period_s: float = 300.0
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class SchedulerConf:
    """SchedulerType and the SchedulerParameters a replay needs, at Slurm 22.05's defaults (man
    slurm.conf); every other parameter kept as written in ``other`` (name, value or None for a flag)."""

    type: str = "sched/backfill"
    bf_window_min: int = 1440
    bf_resolution_s: int = 60
    bf_max_job_test: int = 500
    bf_max_job_user: int = 0          # 0: no limit
    bf_max_job_part: int = 0
    bf_max_job_start: int = 0
    bf_continue: bool = False
    bf_interval_s: int = 30           # -1: the backfill loop is disabled
    default_queue_depth: int = 100
    sched_interval_s: int = 60        # -1: the main loop is disabled
    batch_sched_delay_s: int = 3      # submissions wait for a main-scheduler pass at most this often
    other: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class SelectConf:
    """SelectType and SelectTypeParameters (upper case).  ``memory_consumable``: jobs' memory is
    allocated (CR_*_Memory, CR_Memory); ``unit``: what a job gets a whole of (CPU, CORE, SOCKET, BOARD,
    or NODE for select/linear without CR_Memory)."""

    type: str = "select/cons_tres"
    parameters: tuple[str, ...] = ("CR_CORE_MEMORY",)

    @property
    def memory_consumable(self) -> bool:
        return any(p == "CR_MEMORY" or (p.startswith("CR_") and p.endswith("_MEMORY")) for p in self.parameters)

    @property
    def unit(self) -> str:
        for p in self.parameters:
            for unit in ("CPU", "CORE", "SOCKET", "BOARD"):
                if p in (f"CR_{unit}", f"CR_{unit}_MEMORY"):
                    return unit
        return "NODE" if self.type == "select/linear" else "CORE"


@dataclass(frozen=True)
class SlurmConf:
    """A slurm.conf as Slurm would load it.  ``settings``: every other plain setting, (lower-case key,
    last value), in the order first set; ``warnings``: what Slurm would log and go on (a node defined
    twice, a SchedulerParameters value out of range)."""

    path: str
    cluster_name: str | None
    nodes: tuple[NodeConf, ...]
    partitions: tuple[PartitionConf, ...]
    priority: PriorityConf
    scheduler: SchedulerConf
    select: SelectConf
    settings: tuple[tuple[str, str], ...] = ()
    files: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def node(self, name: str) -> NodeConf:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def partition(self, name: str) -> PartitionConf:
        for partition in self.partitions:
            if partition.name == name:
                return partition
        raise KeyError(name)

    @property
    def default_partition(self) -> PartitionConf | None:
        """The partition a job naming none goes to (the last Default=YES, as Slurm keeps it)."""
        defaults = [p for p in self.partitions if p.default]
        return defaults[-1] if defaults else None

    def get(self, key: str) -> str | None:
        return dict(self.settings).get(key.lower())


# -- parsing -----------------------------------------------------------------------------------------------
def _pairs(line: ConfLine) -> list[tuple[str, str]]:
    """(lower-case key, value) of a line; InputError when some text is not KEY=VALUE (fatal in Slurm)."""
    pairs, position = [], 0
    for match in KEY_VALUE.finditer(line.text):
        if line.text[position:match.start()].strip():
            break
        value = match.group(2) if match.group(2) is not None else (match.group(3) or "")
        pairs.append((match.group(1).lower(), value))
        position = match.end()
    rest = line.text[position:].strip()
    if rest:
        raise InputError(f"{rest[:60]!r} is not KEY=VALUE (Slurm stops at this line)", path=str(line.path),
                         line=line.line)
    return pairs


def parse_slurm_conf(path: str | Path, *, relative_to_includer: bool = True) -> SlurmConf:
    """The typed model of the slurm.conf at ``path`` with its Include files (relative Include names
    beside the including file, as Slurm 22.05 does, unless ``relative_to_includer`` is False: beside
    slurm.conf, as 23.02 and later).  InputError on a missing file, an Include that cannot be followed,
    or a value Slurm refuses."""
    files = read_slurm_conf(Path(path), relative_to_includer=relative_to_includer)
    if files.problems:
        message = files.problems[0][1]
        raise InputError(message.removeprefix(f"{path}: "), path=str(path))
    return _build(files)


def parse_slurm_conf_text(text: str, path: str = "<slurm.conf>") -> SlurmConf:
    """The typed model of a slurm.conf text without Include lines (an Include is an InputError)."""
    files = SlurmConfFiles(Path(path), files=[Path(path)])
    for number, line in logical_lines(text):
        if INCLUDE.match(line.lstrip()):
            raise InputError("an Include line needs a file on disk: use parse_slurm_conf", path=path, line=number)
        files.lines.append(ConfLine(Path(path), number, line))
    return _build(files)


def _build(files: SlurmConfFiles) -> SlurmConf:
    nodes: dict[str, NodeConf] = {}
    partitions: dict[str, PartitionConf] = {}
    nodesets: dict[str, tuple[str, ...]] = {}
    node_defaults: dict[str, tuple[str, ConfLine]] = {}
    partition_defaults: dict[str, tuple[str, ConfLine]] = {}
    partition_lines: list[tuple[ConfLine, dict[str, tuple[str, ConfLine]]]] = []
    down: list[tuple[ConfLine, dict[str, str]]] = []
    settings: dict[str, tuple[str, ConfLine]] = {}
    warnings: list[str] = []
    for line in files.lines:
        pairs = _pairs(line)
        if not pairs:
            continue
        first = pairs[0][0]
        if first == "nodename":
            _check_keys(pairs, NODE_KEYS, line, "NodeName")
            values = {_ALIASES.get(k, k): (v, line) for k, v in pairs[1:]}
            if pairs[0][1].upper() == "DEFAULT":
                for key in ("nodehostname", "nodeaddr"):       # per node by nature: Slurm refuses them here
                    if key in values:
                        raise InputError("not allowed with NodeName=DEFAULT (Slurm stops at this line)",
                                         path=str(line.path), line=line.line, field=key)
                node_defaults.update(values)
                continue
            for node in _nodes_of(pairs[0][1], {**node_defaults, **values}, line, warnings):
                if node.name in nodes:
                    warnings.append(f"{line.path}:{line.line}: node {node.name} is defined again; Slurm keeps "
                                    f"its first definition ({nodes[node.name].where})")
                else:
                    nodes[node.name] = node
        elif first == "partitionname":
            _check_keys(pairs, PARTITION_KEYS, line, "PartitionName")
            values = {_ALIASES.get(k, k): (v, line) for k, v in pairs[1:]}
            if pairs[0][1].upper() == "DEFAULT":
                partition_defaults.update(values)
                continue
            partition_lines.append((line, {"partitionname": (pairs[0][1], line), **partition_defaults, **values}))
        elif first == "nodeset":
            nodesets[pairs[0][1]] = ()          # filled below, once every node is known
            partition_lines.append((line, {"nodeset": (pairs[0][1], line), **{k: (v, line) for k, v in pairs[1:]}}))
        elif first == "downnodes":
            down.append((line, dict(pairs)))
        elif first == "frontendname":
            continue
        else:
            for key, value in pairs:
                settings[key] = (value, line)
    for line, values in down:
        state = values.get("state", "DOWN").upper()
        if state not in NODE_STATES:
            raise InputError(f"{state!r} is not a node state ({', '.join(NODE_STATES)})", path=str(line.path),
                             line=line.line, field="State")
        for name in _hostlist(values["downnodes"], line, "DownNodes"):
            if name not in nodes:
                raise InputError(f"node {name} is not defined by a NodeName line", path=str(line.path),
                                 line=line.line, field="DownNodes")
            nodes[name] = replace(nodes[name], state=state)
    for line, values in partition_lines:
        if "nodeset" in values:
            nodesets[values["nodeset"][0]] = _nodeset(values, nodes, line)
        else:
            part = _partition(values, nodes, nodesets)
            if part.name in partitions:
                raise InputError(f"partition {part.name} is defined twice (first at {partitions[part.name].where})",
                                 path=str(line.path), line=line.line, field="PartitionName")
            partitions[part.name] = part
    in_partitions: dict[str, list[str]] = {name: [] for name in nodes}
    for part in partitions.values():
        for name in part.nodes:
            in_partitions[name].append(part.name)
    node_list = tuple(replace(n, partitions=tuple(in_partitions[n.name])) for n in nodes.values())
    scheduler, more = _scheduler(settings)
    return SlurmConf(
        path=str(files.path), cluster_name=_value(settings, "clustername"), nodes=node_list,
        partitions=tuple(partitions.values()), priority=_priority(settings), scheduler=scheduler,
        select=_select(settings), settings=tuple((k, v) for k, (v, _) in settings.items()),
        files=tuple(str(p) for p in files.files), warnings=tuple(warnings + more))


def _check_keys(pairs: list[tuple[str, str]], known: set[str], line: ConfLine, kind: str) -> None:
    for key, _ in pairs:
        if key not in known:
            raise InputError(f"{kind} lines know no key {key!r} (Slurm stops at this line)", path=str(line.path),
                             line=line.line, field=key)


def _hostlist(text: str, line: ConfLine, key: str) -> list[str]:
    try:
        return expand_hostlist(text)
    except ValueError as exc:
        raise InputError(str(exc), path=str(line.path), line=line.line, field=key) from None


def _value(settings: dict[str, tuple[str, ConfLine]], key: str) -> str | None:
    found = settings.get(key)
    return found[0] if found else None


def _nodes_of(names: str, values: dict[str, tuple[str, ConfLine]], line: ConfLine,
              warnings: list[str]) -> list[NodeConf]:
    def number(key: str, default: int, low: int = 0, high: int = 2 ** 32 - 2) -> tuple[int, bool]:
        if key not in values:
            return default, False
        value, at = values[key]
        return _integer(value, str(at.path), at.line, key, low, high), True

    boards, _ = number("boards", 1, 1, 65535)
    cores, _ = number("corespersocket", 1, 1, 65535)
    threads, _ = number("threadspercore", 1, 1, 65535)
    sockets, has_sockets = number("sockets", 1, 1, 65535)
    per_board, has_per_board = number("socketsperboard", 1, 1, 65535)
    cpus, has_cpus = number("cpus", 0, 0, 65535)
    if has_cpus and cpus == 0:           # read as "not given" it became 1 CPU: a node has at least one
        at = values["cpus"][1]
        raise InputError("CPUs=0: a node has at least 1 CPU (leave CPUs out to count Sockets x CoresPerSocket "
                         "x ThreadsPerCore)", path=str(at.path), line=at.line, field="CPUs")
    if has_per_board:
        sockets, has_sockets = per_board * boards, True
    elif has_sockets and "boards" in values:
        sockets = sockets * boards            # with Boards, Sockets means sockets per board
    if has_cpus and not has_sockets:      # Sockets inferred from CPUs
        sockets = max(1, cpus // (cores * threads))
    if not has_cpus:
        cpus = sockets * cores * threads
    if cpus not in (sockets, sockets * cores, sockets * cores * threads):
        # Slurm logs "CPUs=... match no Sockets, Sockets*CoresPerSocket or Sockets*CoresPerSocket*
        # ThreadsPerCore" and resets CPUs to the product
        warnings.append(f"{line.path}:{line.line}: NodeName={names} CPUs={cpus} matches no Sockets, "
                        f"Sockets*CoresPerSocket or Sockets*CoresPerSocket*ThreadsPerCore; Slurm resets it to "
                        f"{sockets * cores * threads}")
        cpus = sockets * cores * threads
    memory, _ = number("realmemory", 1, 0, 2 ** 64 - 2)
    weight, _ = number("weight", 1, 0)
    gres_text = values.get("gres", ("", line))[0]
    try:
        parsed = gres.parse_gres(gres_text)
    except ValueError as exc:
        at = values["gres"][1]
        raise InputError(str(exc), path=str(at.path), line=at.line, field="Gres") from None
    feature_text = values.get("features", ("", line))[0]
    features = tuple(f for f in feature_text.split(",") if f)
    state = values.get("state", ("UNKNOWN", line))
    state_name = state[0].upper().split("+")[0]
    if state_name not in NODE_STATES:
        raise InputError(f"{state[0]!r} is not a node state ({', '.join(NODE_STATES)})", path=str(state[1].path),
                         line=state[1].line, field="State")
    return [NodeConf(name, cpus, boards, sockets, cores, threads, memory,
                     gres_text, parsed.gpus, parsed.models, parsed.shards, features, weight,
                     "UNKNOWN" if state_name == "IDLE" else state_name, where=f"{line.path}:{line.line}")
            for name in _hostlist(names, line, "NodeName")]


def _members(text: str, nodes: dict[str, NodeConf], nodesets: dict[str, tuple[str, ...]], line: ConfLine,
             key: str) -> tuple[str, ...]:
    """The node names of a Nodes= value: ``ALL``, hostlists, nodeset names; each node once, in order."""
    if text.strip().upper() == "ALL":
        return tuple(nodes)
    found: dict[str, None] = {}
    for name in _hostlist(text, line, key):
        if name in nodesets:
            found.update(dict.fromkeys(nodesets[name]))
        elif name.upper() == "ALL":
            found.update(dict.fromkeys(nodes))
        elif name in nodes:
            found[name] = None
        else:
            raise InputError(f"node {name} is not defined by a NodeName line", path=str(line.path),
                             line=line.line, field=key)
    return tuple(found)


def _nodeset(values: dict[str, tuple[str, ConfLine]], nodes: dict[str, NodeConf], line: ConfLine) -> tuple[str, ...]:
    members: dict[str, None] = {}
    if "nodes" in values:
        members.update(dict.fromkeys(_members(values["nodes"][0], nodes, {}, line, "Nodes")))
    if "feature" in values:
        members.update(dict.fromkeys(n.name for n in nodes.values() if values["feature"][0] in n.features))
    return tuple(members)


def _partition(values: dict[str, tuple[str, ConfLine]], nodes: dict[str, NodeConf],
               nodesets: dict[str, tuple[str, ...]]) -> PartitionConf:
    name, line = values["partitionname"]

    def raw(key: str) -> tuple[str, ConfLine] | None:
        return values.get(key)

    def time(key: str) -> float | None:
        found = raw(key)
        if found is None:
            return None
        try:
            return parse_time_limit_s(found[0])
        except ValueError as exc:
            raise InputError(str(exc), path=str(found[1].path), line=found[1].line, field=key) from None

    def number(key: str, default: int, high: int = 2 ** 32 - 2) -> int:
        found = raw(key)
        return default if found is None else _integer(found[0], str(found[1].path), found[1].line, key, 0, high)

    members = _members(raw("nodes")[0], nodes, nodesets, raw("nodes")[1], "Nodes") if raw("nodes") else ()
    max_nodes = None
    if raw("maxnodes") and raw("maxnodes")[0].upper() not in ("UNLIMITED", "INFINITE", "-1"):
        max_nodes = number("maxnodes", 0)
    state = (raw("state") or ("UP", line))
    if state[0].upper() not in PARTITION_STATES:
        raise InputError(f"{state[0]!r} is not a partition state ({', '.join(PARTITION_STATES)})",
                         path=str(state[1].path), line=state[1].line, field="State")
    over = raw("oversubscribe")
    return PartitionConf(
        name=name, nodes=members,
        default=_yes_no(raw("default")[0], str(raw("default")[1].path), raw("default")[1].line, "Default")
        if raw("default") else False,
        max_time_s=INFINITE if time("maxtime") is None else time("maxtime"),
        default_time_s=time("defaulttime"), max_nodes=max_nodes, min_nodes=number("minnodes", 0),
        priority_tier=number("prioritytier", 1, 65535), priority_job_factor=number("priorityjobfactor", 1, 65535),
        oversubscribe=_oversubscribe(*over) if over else OverSubscribe(),
        exclusive_user=_yes_no(raw("exclusiveuser")[0], str(raw("exclusiveuser")[1].path),
                               raw("exclusiveuser")[1].line, "ExclusiveUser") if raw("exclusiveuser") else False,
        state=state[0].upper(), where=f"{line.path}:{line.line}",
        suspend_time_s=_power_seconds(raw("suspendtime"), "SuspendTime", infinite=True),
        suspend_timeout_s=_power_seconds(raw("suspendtimeout"), "SuspendTimeout"),
        resume_timeout_s=_power_seconds(raw("resumetimeout"), "ResumeTimeout"))


def _power_seconds(found: tuple[str, ConfLine] | None, key: str, infinite: bool = False) -> float | None:
    """A partition's SuspendTime (INFINITE or -1: never), SuspendTimeout or ResumeTimeout in seconds."""
    if found is None:
        return None
    value, line = found
    if infinite and value.strip().upper() in ("INFINITE", "-1"):
        return INFINITE
    # SuspendTime: slurm_atoul (base 10); SuspendTimeout, ResumeTimeout: s_p_handle_uint16 (base 0)
    return float(_integer(value, str(line.path), line.line, key, 0, 2 ** 32 - 2 if infinite else 65533,
                          base=10 if infinite else 0))


def _oversubscribe(value: str, line: ConfLine) -> OverSubscribe:
    """OverSubscribe=NO|EXCLUSIVE|YES[:n]|FORCE[:n] (n defaults to 4, Slurm's count)."""
    mode, _, count = value.upper().partition(":")
    if mode in ("NO", "EXCLUSIVE") and not count:
        return OverSubscribe(mode, 1)
    if mode in ("YES", "FORCE"):
        if not count:
            return OverSubscribe(mode, 4)
        return OverSubscribe(mode, _integer(count, str(line.path), line.line, "OverSubscribe", 1, 65535,
                                                  base=10))
    raise InputError(f"{value!r} is not NO, EXCLUSIVE, YES[:n] or FORCE[:n]", path=str(line.path), line=line.line,
                     field="OverSubscribe")


def _priority(settings: dict[str, tuple[str, ConfLine]]) -> PriorityConf:
    def weight(key: str) -> int:
        found = settings.get(key)
        return 0 if found is None else _integer(found[0], str(found[1].path), found[1].line, key, 0)

    def time(key: str, default_s: float) -> float:
        found = settings.get(key)
        if found is None:
            return default_s
        try:
            return parse_time_limit_s(found[0])
        except ValueError as exc:
            raise InputError(str(exc), path=str(found[1].path), line=found[1].line, field=key) from None

    favor = settings.get("priorityfavorsmall")
    flags = _value(settings, "priorityflags") or ""
    return PriorityConf(
        type=(_value(settings, "prioritytype") or "priority/basic").lower(),
        weight_age=weight("priorityweightage"), weight_fairshare=weight("priorityweightfairshare"),
        weight_job_size=weight("priorityweightjobsize"), weight_partition=weight("priorityweightpartition"),
        weight_qos=weight("priorityweightqos"), weight_tres=_value(settings, "priorityweighttres") or "",
        max_age_s=time("prioritymaxage", 7 * 86400.0), decay_half_life_s=time("prioritydecayhalflife", 7 * 86400.0),
        favor_small=_yes_no(favor[0], str(favor[1].path), favor[1].line, "PriorityFavorSmall") if favor else False,
        calc_period_s=time("prioritycalcperiod", 300.0),
        flags=tuple(f.strip().upper() for f in flags.split(",") if f.strip()))


# SchedulerParameters this model reads: name -> (field, Slurm 22.05 default, lowest, highest) from man
# slurm.conf; an out-of-range value is logged by Slurm, which then uses the default: the same here.
_SCHED_NUMBERS = {
    "bf_window": ("bf_window_min", 1440, 1, 43200),
    "bf_resolution": ("bf_resolution_s", 60, 1, 3600),
    "bf_max_job_test": ("bf_max_job_test", 500, 1, 1_000_000),
    "bf_max_job_user": ("bf_max_job_user", 0, 0, 1_000_000),
    "bf_max_job_part": ("bf_max_job_part", 0, 0, 1_000_000),
    "bf_max_job_start": ("bf_max_job_start", 0, 0, 10000),
    "bf_interval": ("bf_interval_s", 30, -1, 10800),
    "default_queue_depth": ("default_queue_depth", 100, 0, 2 ** 31 - 1),
    "sched_interval": ("sched_interval_s", 60, -1, 2 ** 31 - 1),
    "batch_sched_delay": ("batch_sched_delay_s", 3, 0, 2 ** 31 - 1),
}


def c_atoi(text: str) -> int:
    """The number C's ``atoi`` reads from ``text``, as glibc does (``(int) strtol(text, NULL, 10)``):
    after leading white space, an optional sign and the digits that follow, 0 without any; a value
    beyond a long is the long's limit, and the long's low 32 bits are the int.

    >>> c_atoi("1e3"), c_atoi(" 10s"), c_atoi("+7"), c_atoi("abc"), c_atoi("-1"), c_atoi("99999999999999999999999")
    (1, 10, 7, 0, -1, -1)
    >>> c_atoi("4294967297")            # 2**32 + 1: the low 32 bits
    1
    """
    found = re.match(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", text)
    if found is None:
        return 0
    wide = min(max(int(found.group(1)), -2 ** 63), 2 ** 63 - 1)      # strtol's long, at its limits
    return (wide + 2 ** 31) % 2 ** 32 - 2 ** 31                      # the int: low 32 bits, two's complement


def _scheduler(settings: dict[str, tuple[str, ConfLine]]) -> tuple[SchedulerConf, list[str]]:
    found: dict[str, object] = {}
    firsts: dict[str, str] = {}
    other: list[tuple[str, str | None]] = []
    warnings: list[str] = []
    params = settings.get("schedulerparameters")
    for item in (params[0].split(",") if params else []):
        key, sep, value = item.strip().partition("=")
        key = key.strip().lower()
        if not key:
            continue
        if key == "bf_continue":
            found["bf_continue"] = True
        elif key in _SCHED_NUMBERS:
            name, default, low, high = _SCHED_NUMBERS[key]
            where = f"{params[1].path}:{params[1].line}: SchedulerParameters"
            if name in found:               # xstrcasestr finds the first: Slurm never reads this one
                warnings.append(f"{where} {key} is given again ({value!r}); Slurm reads the first "
                                f"({firsts[key]!r})")
                continue
            firsts[key] = value
            number = c_atoi(value)
            if not low <= number <= high or (number == 0 and key in ("bf_interval", "sched_interval")):
                warnings.append(f"{where} {key}={value!r} is not a whole number in [{low}, {high}]; Slurm "
                                f"logs it and uses {default}")
                number = default
            elif not re.fullmatch(r"-?\d+", value.strip()):
                warnings.append(f"{where} {key}={value!r} is read as {number}, its leading digits (Slurm's atoi)")
            found[name] = number
        else:
            other.append((key, value if sep else None))
    sched_type = (_value(settings, "schedulertype") or "sched/backfill").lower()
    return SchedulerConf(type=sched_type, other=tuple(other), **found), warnings


def _select(settings: dict[str, tuple[str, ConfLine]]) -> SelectConf:
    select_type = (_value(settings, "selecttype") or "select/cons_tres").lower()
    params = _value(settings, "selecttypeparameters")
    if params is None:
        default = () if select_type == "select/linear" else ("CR_CORE_MEMORY",)
        return SelectConf(select_type, default)
    return SelectConf(select_type, tuple(p.strip().upper() for p in params.split(",") if p.strip()))


# -- the replay's cluster ------------------------------------------------------------------------------------
def _power_model(models: tuple[str, ...]) -> str | None:
    """The first GRES type as a model of ``GPU_POWER_W`` when one matches (``v100`` -> ``V100M16``)."""
    if not models:
        return None
    model = models[0].upper()
    return next((known for known in GPU_POWER_W if known == model or known.startswith(model)), model)


def cluster_from_slurm_conf(conf: SlurmConf, name: str | None = None, *, exclude_unavailable: bool = False,
                            idle_w: float | None = None, busy_w: float | None = None) -> Cluster:
    """The replay's cluster: one NodeSpec per node, in slurm.conf's order, with its CPUs, memory, GPUs
    (model: the first GRES type), features and partitions (``node_type``: its first partition).
    Slurm knows no power figures: node power is given by the caller (default: NodeSpec's).
    ``exclude_unavailable`` leaves out nodes whose configured state is DOWN, DRAIN, FAIL, FUTURE ...

    >>> conf = parse_slurm_conf_text("NodeName=a[1-2] CPUs=4 RealMemory=100 Gres=gpu:t4:2\\nPartitionName=p Nodes=ALL")
    >>> [(n.name, n.cpus, n.memory_mb, n.gpus, n.gpu_model, n.partitions) for n in cluster_from_slurm_conf(conf).nodes]
    [('a1', 4, 100.0, 2, 'T4', ('p',)), ('a2', 4, 100.0, 2, 'T4', ('p',))]
    """
    power = {k: v for k, v in (("idle_w", idle_w), ("busy_w", busy_w)) if v is not None}
    check_given_power(power)
    kept = [n for n in conf.nodes if n.available or not exclude_unavailable]
    if not kept:
        raise InputError("no available node (all are down, drained, failing or future)", path=conf.path)
    return Cluster([NodeSpec(n.name, cpus=n.cpus, memory_mb=float(n.real_memory_mb), gpus=n.gpus,
                             gpu_model=_power_model(n.gpu_models), node_type=(n.partitions or ("default",))[0],
                             partitions=n.partitions, features=n.features, **power) for n in kept],
                   name=name or conf.cluster_name or "slurm",
                   default_partition=conf.default_partition.name if conf.default_partition else "")
