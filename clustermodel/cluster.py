"""A cluster: an ordered set of nodes, with its capacity as numpy arrays for vectorised checks.

Built from a TOML description (``[[node_group]]`` tables), from an SWF trace header
(``MaxNodes``/``MaxProcs``), or directly from a list of nodes.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from greenslurm.clustermodel.errors import InputError, toml_error
from greenslurm.clustermodel.job import JobSpec
from greenslurm.clustermodel.node import DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W, NodeSpec, unknown_gpu_model
from greenslurm.clustermodel.power import node_power_problem

# Column order of the resource matrices: CPUs, memory (MiB), GPUs.
CPU, MEM, GPU = 0, 1, 2
RESOURCES = ("cpus", "memory_mb", "gpus")


@dataclass(frozen=True, slots=True)
class JobShape:
    """How a job lies on the cluster: ``nodes`` nodes each needing ``per_node`` = (CPUs, MiB, GPUs)."""

    nodes: int
    per_node: tuple[float, float, float]


# The Parallel Workloads Archive's file names: LOG-YEAR-VERSION[-cln][...].swf (KTH-SP2-1996-2.1-cln.swf)
_ARCHIVE_FILE = re.compile(r"^([A-Za-z0-9]+-[A-Za-z0-9]+)-(?:19|20)\d\d-\d+\.\d+(?:-|\.|$)")


def archive_log_name(path: str) -> str | None:
    """The archive's name of the log in ``path`` (KTH-SP2, LANL-CM5, LLNL-Atlas), None for another file.

    >>> archive_log_name("data/KTH-SP2-1996-2.1-cln-first2000.swf"), archive_log_name("lublin_256_est.swf")
    ('KTH-SP2', None)
    """
    found = _ARCHIVE_FILE.match(os.path.basename(path))
    return found.group(1) if found else None


class Cluster:
    """An immutable ordered set of nodes.

    >>> c = Cluster.homogeneous(4, cpus=8, memory_mb=1000)
    >>> c.size, c.total_cpus
    (4, 32)
    >>> c.capacity[:, 0]
    array([8., 8., 8., 8.])
    >>> c.shape_of(JobSpec("a", 0.0, 10.0, cpus=12))   # 12 CPUs on 8-CPU nodes: 2 nodes x 6
    JobShape(nodes=2, per_node=(6.0, 0.0, 0.0))
    """

    def __init__(self, nodes: Iterable[NodeSpec], name: str = "cluster", default_partition: str = "") -> None:
        self.nodes: tuple[NodeSpec, ...] = tuple(nodes)
        if not self.nodes:
            raise InputError("a cluster needs at least one node")
        for node in self.nodes:
            _check_node(node, name)
        self.name = name
        # where a job naming no partition runs (slurm.conf's Default=YES); "": anywhere
        self.default_partition = default_partition
        self.capacity = np.array([[n.cpus, n.memory_mb, n.gpus] for n in self.nodes], dtype=float)
        self.idle_w = np.array([n.idle_w for n in self.nodes], dtype=float)
        self.busy_w = np.array([n.busy_w for n in self.nodes], dtype=float)
        self.gpu_idle_w = np.array([n.gpu_idle_w for n in self.nodes], dtype=float)
        self.gpu_max_w = np.array([n.gpu_max_w for n in self.nodes], dtype=float)
        self.max_node_cpus = int(self.capacity[:, CPU].max())
        self.memory_known = bool(np.all(self.capacity[:, MEM] > 0))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def homogeneous(cls, count: int, cpus: int, memory_mb: float = 0.0, gpus: int = 0,
                    name: str = "cluster", **node_fields) -> "Cluster":
        width = len(str(max(count - 1, 0)))
        return cls((NodeSpec(f"n{i:0{width}d}", cpus=cpus, memory_mb=memory_mb, gpus=gpus, **node_fields)
                    for i in range(count)), name=name)

    @classmethod
    def from_swf_header(cls, header: Mapping[str, str], path: str = "<swf>", **node_fields) -> "Cluster":
        """Nodes from ``MaxNodes``; CPUs per node = ``MaxProcs // MaxNodes`` (1 when only one is given).

        >>> Cluster.from_swf_header({"MaxNodes": "1152", "MaxProcs": "9216"}).nodes[0].cpus
        8
        >>> Cluster.from_swf_header({"MaxProcs": "100"}).size
        100

        Named as the Parallel Workloads Archive names its log (the file's name, e.g. KTH-SP2), else by
        the header's ``Computer`` (IBM SP2 for KTH-SP2, SDSC-SP2 and CTC-SP2 alike):

        >>> Cluster.from_swf_header({"MaxProcs": "100", "Computer": "IBM SP2"}, "/d/KTH-SP2-1996-2.1-cln.swf").name
        'KTH-SP2'
        >>> Cluster.from_swf_header({"MaxProcs": "100", "Computer": "IBM SP2"}, "site.swf").name
        'IBM SP2'
        """
        def number(key: str) -> int | None:
            raw = header.get(key)
            if raw is None:
                return None
            try:
                value = int(float(raw.split()[0]))
            except (ValueError, IndexError):
                raise InputError(f"header {key} is not a number: {raw!r}", path=path, field=key) from None
            return value if value > 0 else None

        max_nodes, max_procs = number("MaxNodes"), number("MaxProcs")
        if max_nodes is None and max_procs is None:
            raise InputError("the SWF header gives neither MaxNodes nor MaxProcs; pass --cluster FILE",
                             path=path, field="MaxNodes")
        if max_nodes is None:
            max_nodes, cpus = max_procs, 1
        elif max_procs is None or max_procs < max_nodes:
            cpus = 1
        else:
            cpus = max_procs // max_nodes
        name = archive_log_name(path) or header.get("Computer", "swf-cluster").strip() or "swf-cluster"
        return cls.homogeneous(max_nodes, cpus=cpus, name=name, **node_fields)

    @classmethod
    def from_toml_text(cls, text: str, path: str = "<cluster.toml>") -> "Cluster":
        """Parse a cluster description.

        >>> c = Cluster.from_toml_text('''
        ... name = "tiny"
        ... [[node_group]]
        ... name = "cpu"
        ... count = 2
        ... cpus = 16
        ... idle_w = 80
        ... busy_w = 300
        ... [[node_group]]
        ... name = "gpu"
        ... count = 1
        ... cpus = 32
        ... gpus = 4
        ... gpu_model = "T4"
        ... partitions = ["gpu", "all"]
        ... features = ["ib"]
        ... ''')
        >>> [n.name for n in c.nodes], c.total_gpus, c.nodes[2].partitions
        (['cpu0', 'cpu1', 'gpu0'], 4, ('gpu', 'all'))
        """
        import tomllib          # loads with a cluster file
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as exc:
            raise toml_error(exc, text, path) from None
        groups = data.get("node_group")
        if not isinstance(groups, list) or not groups:
            raise InputError("no [[node_group]] table", path=path, field="node_group")
        known = {"name", "count", "cpus", "memory_mb", "gpus", "gpu_model", "cpu_model", "idle_w",
                 "busy_w", "gpu_idle_w", "gpu_max_w", "partitions", "features"}
        nodes: list[NodeSpec] = []
        for index, group in enumerate(groups):
            where = f"node_group[{index}]"
            unknown = set(group) - known
            if unknown:
                raise InputError(f"unknown keys {sorted(unknown)}", path=path, field=where)
            group_name = str(group.get("name", f"group{index}"))
            count = _positive_int(group.get("count", 1), path, f"{where}.count")
            if len(nodes) + count > MAX_CLUSTER_NODES:
                raise InputError(f"the groups hold more than {MAX_CLUSTER_NODES:,} nodes, more than any machine has "
                                 f"(the replay holds every node)", path=path, field=f"{where}.count")
            cpus = _positive_int(group.get("cpus"), path, f"{where}.cpus")
            fields = dict(
                memory_mb=_non_negative(group.get("memory_mb", 0.0), path, f"{where}.memory_mb"),
                gpus=int(_non_negative(group.get("gpus", 0), path, f"{where}.gpus")),
                gpu_model=group.get("gpu_model"), cpu_model=group.get("cpu_model"),
                idle_w=_non_negative(group.get("idle_w", DEFAULT_NODE_IDLE_W), path, f"{where}.idle_w"),
                busy_w=_non_negative(group.get("busy_w", DEFAULT_NODE_BUSY_W), path, f"{where}.busy_w"),
                gpu_idle_w=_gpu_power(group, "gpu_idle_w", path, where),
                gpu_max_w=_gpu_power(group, "gpu_max_w", path, where),
                node_type=group_name,
                partitions=_names(group.get("partitions", []), path, f"{where}.partitions"),
                features=_names(group.get("features", []), path, f"{where}.features"),
            )
            model_problem = unknown_gpu_model(fields["gpu_model"], fields["gpu_idle_w"] >= 0 and fields["gpu_max_w"] >= 0)
            if model_problem is not None:
                raise InputError(model_problem, path=path, field=f"{where}.gpu_model")
            if fields["busy_w"] < fields["idle_w"]:
                raise InputError("busy_w is below idle_w", path=path, field=f"{where}.busy_w")
            problem = node_power_problem(fields["idle_w"], fields["busy_w"])
            if problem is not None:
                raise InputError(problem[1], path=path, field=f"{where}.{problem[0]}")
            width = len(str(max(count - 1, 0)))
            nodes.extend(NodeSpec(f"{group_name}{i:0{width}d}", cpus=cpus, **fields) for i in range(count))
        return cls(nodes, name=str(data.get("name", "cluster")))

    @classmethod
    def from_toml_file(cls, path: str) -> "Cluster":
        try:
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8")
        except IsADirectoryError:
            raise InputError("is a directory, not a cluster file", path=path) from None
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", path=path) from None
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", path=path) from None
        return cls.from_toml_text(text, path=path)

    # -- queries ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def total_cpus(self) -> int:
        return int(self.capacity[:, CPU].sum())

    @property
    def total_gpus(self) -> int:
        return int(self.capacity[:, GPU].sum())

    def shape_of(self, job: JobSpec) -> JobShape | None:
        """The per-node demand of ``job`` on this cluster, or None when no placement can ever fit.

        A job that names its node count gets ``ceil(cpus / nodes)`` CPUs per node unless it says
        ``cpus_per_node``.  A job that does not is put on as few nodes as the largest node allows,
        CPUs spread evenly.  Memory is ignored when the cluster does not describe memory.

        >>> c = Cluster.homogeneous(2, cpus=4)
        >>> c.shape_of(JobSpec("a", 0.0, 1.0, cpus=9)) is None      # 3 nodes of 3 > 2 nodes
        True
        >>> c.shape_of(JobSpec("b", 0.0, 1.0, cpus=3, nodes=3)) is None
        True
        >>> c.shape_of(JobSpec("c", 0.0, 1.0, cpus=8, nodes=2))
        JobShape(nodes=2, per_node=(4.0, 0.0, 0.0))
        """
        cpus = max(job.cpus, 0)
        if job.nodes > 0:
            nodes = job.nodes
            per_cpu = job.cpus_per_node or math.ceil(cpus / nodes)
        else:
            nodes = max(1, math.ceil(cpus / self.max_node_cpus))
            per_cpu = job.cpus_per_node or math.ceil(cpus / nodes)
        memory = job.memory_mb_per_node if self.memory_known else 0.0
        demand = np.array([per_cpu, memory, job.gpus_per_node], dtype=float)
        if nodes > self.size:
            return None
        fitting = int(np.count_nonzero(np.all(self.capacity >= demand, axis=1)))
        if fitting < nodes:
            return None
        return JobShape(nodes, (float(per_cpu), float(memory), float(job.gpus_per_node)))


# More nodes than any machine has (the largest have about 10^5); the replay holds every node, and a
# count of 10^11 built nodes until memory ran out.  Slurm's hostlists are bounded the same way.
MAX_CLUSTER_NODES = 1_000_000


def _check_node(node: NodeSpec, where: str) -> None:
    """A node that cannot be physical (no CPU, power not finite, negative or inverted) is refused,
    whichever file or option described it (``where``: the cluster's name when no file is known)."""
    if not (isinstance(node.cpus, int) and node.cpus >= 1):
        raise InputError(f"node {node.name} has {node.cpus} CPUs; a node has at least 1", path=where, field="cpus")
    if not (0 <= node.memory_mb < math.inf and 0 <= node.gpus < math.inf):
        raise InputError(f"node {node.name}: memory {node.memory_mb:g} MiB and {node.gpus:g} GPUs must be finite "
                         f"and >= 0", path=where, field="memory_mb" if not 0 <= node.memory_mb < math.inf else "gpus")
    problem = node_power_problem(node.idle_w, node.busy_w, node.gpu_idle_w, node.gpu_max_w)
    if problem is not None:
        raise InputError(f"node {node.name}: {problem[1]}", path=where, field=problem[0])


def _names(value, path: str, field: str) -> tuple[str, ...]:
    """A list of names (partitions, features) from TOML: ``["cpu", "all"]`` or ``"cpu,all"``.

    >>> _names(["cpu", "all"], "c.toml", "partitions"), _names("ib,k80", "c.toml", "features")
    (('cpu', 'all'), ('ib', 'k80'))
    """
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item.strip() and "," not in item
                                              for item in items):
        raise InputError(f"must be a list of names, got {value!r}", path=path, field=field)
    return tuple(dict.fromkeys(item.strip() for item in items))


def _positive_int(value, path: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value <= 0:
        raise InputError(f"must be a positive whole number, got {value!r}", path=path, field=field)
    return int(value)


def _non_negative(value, path: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise InputError(f"must be a finite number >= 0, got {value!r}", path=path, field=field)
    return float(value)


def _gpu_power(group: Mapping, key: str, path: str, where: str) -> float:
    """A GPU power figure of a node group; -1 (not given): the GPU model's."""
    if key not in group:
        return -1.0
    return _non_negative(group[key], path, f"{where}.{key}")
