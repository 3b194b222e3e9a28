"""What a replay produces: its jobs' results as columns (:class:`JobColumns`, one record per job on
demand), the energy ledger's totals and the power series.

A million-job replay holds its results as a dozen numpy arrays (about 110 bytes a job plus 4 bytes
a node held) rather than a :class:`JobRecord` of about 400 bytes each; ``ReplayResult.records``
builds the records for callers that want them.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from greenslurm.clustermodel import Cluster
from greenslurm.clustermodel.job_table import id_column, id_texts


@dataclass(frozen=True, slots=True)
class JobRecord:
    """The fate of one job in a replay (times in seconds from the trace's epoch)."""

    job_id: str
    submit_s: float
    start_s: float
    end_s: float
    requested_time_s: float
    nodes: int
    cpus: float              # CPUs allocated in total (nodes x CPUs per node)
    gpus: float              # GPUs allocated in total
    killed_at_limit: bool
    energy_j: float          # this job's share of node power over its run (see greenslurm.clustermodel.power)
    node_indices: tuple[int, ...]
    deadline_s: float | None = None
    user: str = ""
    partition: str = ""

    @property
    def wait_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def deadline_missed(self) -> bool:
        return self.deadline_s is not None and self.end_s > self.deadline_s + 1e-9


@dataclass(frozen=True, slots=True)
class Rejection:
    """A job that admission control turned away at submission (see ``greenslurm.sim.engine.deadline_queue``)."""

    job_id: str
    submit_s: float
    policy: str              # the policy that rejected it (the first rejection of a chain)
    reason: str              # short and stable: rejections are counted by it
    detail: str = ""         # the numbers, as the user would read them
    cpus: float = 0.0        # CPUs it asked for in total
    run_s: float = 0.0       # how long it would have run: cpus * run_s is the load turned away
    deadline_s: float | None = None


@dataclass(slots=True)
class EnergyTotals:
    """The ledger's exact integrals.  ``total_j == jobs_j + unallocated_j`` up to float rounding,
    and ``total_j == per_node_j.sum()``."""

    total_j: float
    jobs_j: float
    unallocated_j: float      # idle power of capacity no job held (whole idle nodes and idle parts)
    idle_nodes_j: float       # energy of nodes with no job at all (a part of unallocated_j)
    per_node_j: np.ndarray
    peak_power_w: float
    start_s: float
    end_s: float


def _objects(values: Sequence[Any]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


@dataclass(slots=True)
class JobColumns:
    """The per-job results of a replay as columns, one row per job that ran, in the order the jobs
    ended (the order of :attr:`ReplayResult.records`).

    ``job_id`` is int64 when every id is a plain number (see :func:`id_column`), else an object
    array of strings; ``deadline_s`` is NaN for a job without a deadline; ``user`` and ``partition``
    are object arrays of (shared) strings.  The nodes job ``i`` held are
    ``node_flat[node_offsets[i]:node_offsets[i + 1]]`` (positions in the cluster).

    >>> cols = JobColumns.from_records([JobRecord("1", 0.0, 5.0, 15.0, 20.0, 2, 2.0, 0.0, False, 7.5, (3, 4))])
    >>> cols.records()[0].wait_s, cols.node_flat.tolist(), cols.node_offsets.tolist(), len(cols)
    (5.0, [3, 4], [0, 2], 1)
    """

    job_id: np.ndarray
    submit_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    requested_time_s: np.ndarray
    nodes: np.ndarray                  # int64
    cpus: np.ndarray                   # CPUs allocated in total
    gpus: np.ndarray                   # GPUs allocated in total
    killed_at_limit: np.ndarray        # bool
    energy_j: np.ndarray
    deadline_s: np.ndarray             # NaN: no deadline
    user: np.ndarray                   # object (str)
    partition: np.ndarray              # object (str)
    node_flat: np.ndarray              # int32, or int64 on a cluster of more than 2**31 nodes
    node_offsets: np.ndarray           # int64, len(self) + 1

    def __len__(self) -> int:
        return len(self.start_s)

    @classmethod
    def gather(cls, jobs: Sequence, rows: np.ndarray, start_s: np.ndarray, end_s: np.ndarray,
               energy_j: np.ndarray, node_flat: np.ndarray, node_offsets: np.ndarray,
               nodes: np.ndarray | None = None, cpus: np.ndarray | None = None,
               gpus: np.ndarray | None = None) -> "JobColumns":
        """The results of the jobs ``jobs[rows[i]]`` (``jobs``: the replay's input, a job table's
        :class:`~greenslurm.clustermodel.job_table.JobRows` or any sequence of ``JobSpec``); see
        :meth:`ReplayResult.from_columns` for the arguments.

        >>> from greenslurm.clustermodel import JobSpec
        >>> jobs = [JobSpec("a", 0.0, 10.0, runtime_s=30.0, cpus=2), JobSpec("b", 1.0, 10.0, runtime_s=5.0)]
        >>> cols = JobColumns.gather(jobs, np.array([1, 0]), np.array([1.0, 0.0]), np.array([6.0, 10.0]),
        ...                          np.array([0.5, 2.0]), np.array([0, 0, 1]), np.array([0, 1, 3]))
        >>> [(r.job_id, r.nodes, r.cpus, r.killed_at_limit, r.node_indices) for r in cols.records()]
        [('b', 1, 1.0, False, (0,)), ('a', 2, 2.0, True, (0, 1))]
        """
        rows = np.asarray(rows, dtype=np.int64)
        n = len(rows)
        node_offsets = np.asarray(node_offsets, dtype=np.int64)
        if len(node_offsets) != n + 1:
            raise ValueError(f"node_offsets has {len(node_offsets)} entries for {n} jobs (needs {n + 1})")
        for name, column in (("start_s", start_s), ("end_s", end_s), ("energy_j", energy_j)):
            if len(column) != n:
                raise ValueError(f"{name} has {len(column)} entries for {n} jobs")
        nodes = np.diff(node_offsets) if nodes is None else np.asarray(nodes, dtype=np.int64)
        take = getattr(jobs, "take_columns", None)
        if take is not None:                   # a job table: gathered as whole columns
            spec = take(rows)
        else:
            picked = [jobs[i] for i in rows.tolist()]
            spec = {
                "job_id": id_column([j.job_id for j in picked]),
                "submit_s": np.fromiter((j.submit_s for j in picked), float, n),
                "requested_time_s": np.fromiter((j.requested_time_s for j in picked), float, n),
                "killed_at_limit": np.fromiter((j.killed_at_limit for j in picked), bool, n),
                "deadline_s": np.fromiter((np.nan if j.deadline_s is None else j.deadline_s for j in picked),
                                          float, n),
                "user": _objects([j.user for j in picked]),
                "partition": _objects([j.partition for j in picked])}
        flat = np.asarray(node_flat)
        if flat.dtype != np.int32 and (not len(flat) or flat.max() < 2 ** 31):
            flat = flat.astype(np.int32)
        return cls(job_id=spec["job_id"], submit_s=spec["submit_s"],
                   start_s=np.asarray(start_s, dtype=float), end_s=np.asarray(end_s, dtype=float),
                   requested_time_s=spec["requested_time_s"], nodes=nodes,
                   cpus=nodes.astype(float) if cpus is None else np.asarray(cpus, dtype=float),
                   gpus=np.zeros(n) if gpus is None else np.asarray(gpus, dtype=float),
                   killed_at_limit=spec["killed_at_limit"], energy_j=np.asarray(energy_j, dtype=float),
                   deadline_s=spec["deadline_s"], user=spec["user"], partition=spec["partition"],
                   node_flat=flat, node_offsets=node_offsets)

    @classmethod
    def from_records(cls, records: Sequence[JobRecord]) -> "JobColumns":
        """The columns of ``records`` (in their order)."""
        n = len(records)

        def floats(name: str) -> np.ndarray:
            return np.fromiter((getattr(r, name) for r in records), float, n)

        sizes = np.fromiter((len(r.node_indices) for r in records), np.int64, n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        flat = np.fromiter((i for r in records for i in r.node_indices), np.int64, int(offsets[-1]))
        return cls(job_id=id_column([r.job_id for r in records]), submit_s=floats("submit_s"),
                   start_s=floats("start_s"), end_s=floats("end_s"), requested_time_s=floats("requested_time_s"),
                   nodes=np.fromiter((r.nodes for r in records), np.int64, n), cpus=floats("cpus"),
                   gpus=floats("gpus"), killed_at_limit=np.fromiter((r.killed_at_limit for r in records), bool, n),
                   energy_j=floats("energy_j"),
                   deadline_s=np.fromiter((np.nan if r.deadline_s is None else r.deadline_s for r in records),
                                          float, n),
                   user=_objects([r.user for r in records]), partition=_objects([r.partition for r in records]),
                   node_flat=flat.astype(np.int32) if not n or not len(flat) or flat.max() < 2 ** 31 else flat,
                   node_offsets=offsets)

    def take(self, order: np.ndarray) -> "JobColumns":
        """The rows in ``order`` (e.g. by submit time)."""
        order = np.asarray(order, dtype=np.int64)
        flat, offsets = regroup(self.node_flat, self.node_offsets, order)
        return JobColumns(**{name: getattr(self, name)[order] for name in _ROW_COLUMNS}, node_flat=flat,
                          node_offsets=offsets)

    def node_lists(self) -> list[tuple[int, ...]]:
        """Each job's nodes as a tuple."""
        flat, offsets = self.node_flat.tolist(), self.node_offsets.tolist()
        return [tuple(flat[a:b]) for a, b in zip(offsets, offsets[1:])]

    def records(self) -> list[JobRecord]:
        """One :class:`JobRecord` per row (built anew on every call)."""
        deadlines = [None if d != d else d for d in self.deadline_s.tolist()]
        return list(map(JobRecord, id_texts(self.job_id), self.submit_s.tolist(), self.start_s.tolist(),
                        self.end_s.tolist(), self.requested_time_s.tolist(), self.nodes.tolist(),
                        self.cpus.tolist(), self.gpus.tolist(), self.killed_at_limit.tolist(),
                        self.energy_j.tolist(), self.node_lists(), deadlines, self.user.tolist(),
                        self.partition.tolist()))


_ROW_COLUMNS = ("job_id", "submit_s", "start_s", "end_s", "requested_time_s", "nodes", "cpus", "gpus",
                "killed_at_limit", "energy_j", "deadline_s", "user", "partition")


def ragged_positions(offsets: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Positions in a flat array of the slices ``offsets[k]:offsets[k + 1]`` for k in ``order``, in turn.

    >>> ragged_positions(np.array([0, 2, 3, 6]), np.array([2, 0])).tolist()
    [3, 4, 5, 0, 1]
    """
    starts = offsets[:-1][order]
    sizes = offsets[1:][order] - starts
    total = int(sizes.sum())
    # each position is its slice's start plus its place within the slice: the running count minus
    # the count before the slice began
    before = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=before[1:])
    return np.arange(total, dtype=np.int64) + np.repeat(starts - before, sizes)


REGROUP_POSITIONS = 1 << 20     # node positions gathered at a time by regroup


def regroup(flat: np.ndarray, offsets: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The node lists ``flat[offsets[k]:offsets[k + 1]]`` for k in ``order``, in turn, as a new flat
    array (int32 when the positions fit) and its offsets; gathered a slice of about a million
    positions at a time, so the work arrays stay small beside the lists.

    >>> new_flat, new_offsets = regroup(np.array([5, 6, 7, 8]), np.array([0, 1, 4]), np.array([1, 0]))
    >>> new_flat.tolist(), new_offsets.tolist(), new_flat.dtype
    ([6, 7, 8, 5], [0, 3, 4], dtype('int32'))
    """
    order = np.asarray(order, dtype=np.int64)
    sizes = offsets[1:][order] - offsets[:-1][order]
    new_offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    wide = len(flat) and int(flat.max()) >= 2 ** 31
    out = np.empty(int(new_offsets[-1]), dtype=np.int64 if wide else np.int32)
    lo = 0
    while lo < len(order):
        # as many jobs as hold about REGROUP_POSITIONS positions (at least one)
        hi = int(np.searchsorted(new_offsets, new_offsets[lo] + REGROUP_POSITIONS, "right")) - 1
        hi = min(max(hi, lo + 1), len(order))
        out[new_offsets[lo]:new_offsets[hi]] = flat[ragged_positions(offsets, order[lo:hi])]
        lo = hi
    return out, new_offsets


class ResultColumnsBuilder:
    """Growable columns a replay fills as its jobs end (:mod:`array` buffers, 8 bytes a value):
    the job's position in the replay's input, its start, end, energy, nodes, CPUs, GPUs and node list.

    >>> b = ResultColumnsBuilder()
    >>> b.add(4, 0.0, 10.0, 2.5, 2, 2.0, 0.0, [7, 9]); len(b), b.node_offsets.tolist()
    (1, [0, 2])
    """

    __slots__ = ("rows", "start_s", "end_s", "energy_j", "nodes", "cpus", "gpus", "node_flat", "node_offsets")

    def __init__(self) -> None:
        self.rows, self.nodes = array("q"), array("q")
        self.start_s, self.end_s, self.energy_j = array("d"), array("d"), array("d")
        self.cpus, self.gpus = array("d"), array("d")
        self.node_flat, self.node_offsets = array("q"), array("q", [0])

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: int, start_s: float, end_s: float, energy_j: float, nodes: int, cpus: float,
            gpus: float, node_indices) -> None:
        self.rows.append(row)
        self.start_s.append(start_s)
        self.end_s.append(end_s)
        self.energy_j.append(energy_j)
        self.nodes.append(nodes)
        self.cpus.append(cpus)
        self.gpus.append(gpus)
        self.node_flat.extend(node_indices)
        self.node_offsets.append(len(self.node_flat))

    def columns(self, jobs: Sequence) -> JobColumns:
        """The results so far as :class:`JobColumns` of the input ``jobs``."""
        def view(buffer: array, dtype) -> np.ndarray:
            return np.frombuffer(buffer, dtype=dtype).copy() if len(buffer) else np.zeros(0, dtype=dtype)
        return JobColumns.gather(jobs, view(self.rows, np.int64), view(self.start_s, float), view(self.end_s, float),
                                 view(self.energy_j, float), view(self.node_flat, np.int64),
                                 view(self.node_offsets, np.int64), nodes=view(self.nodes, np.int64),
                                 cpus=view(self.cpus, float), gpus=view(self.gpus, float))


class ReplayResult:
    """A replay's outcome: the jobs' results (:attr:`columns`; :attr:`records` builds one
    :class:`JobRecord` each), the ledger's totals and the power series.

    Built from records as before (``ReplayResult(records, cluster, queue, energy, power_times_s,
    power_w, busy_cpus, skipped, jobs_total, rejected)``) or from columns with :meth:`from_columns`.
    """

    __slots__ = ("_records", "_columns", "cluster", "queue", "energy", "power_times_s", "power_w", "busy_cpus",
                 "skipped", "jobs_total", "rejected")

    def __init__(self, records: Sequence[JobRecord] | None = None, cluster: Cluster | None = None, queue: str = "",
                 energy: EnergyTotals | None = None, power_times_s: np.ndarray | None = None,
                 power_w: np.ndarray | None = None, busy_cpus: np.ndarray | None = None,
                 skipped: Counter | None = None, jobs_total: int = 0, rejected: list[Rejection] | None = None,
                 *, columns: JobColumns | None = None) -> None:
        if (records is None) == (columns is None):
            raise ValueError("give either records or columns")
        self._records = records
        self._columns = columns
        self.cluster = cluster
        self.queue = queue
        self.energy = energy
        self.power_times_s = power_times_s          # breakpoints t_0 < t_1 < ...; power is constant on [t_i, t_i+1)
        self.power_w = power_w                      # power on [t_i, t_i+1)
        self.busy_cpus = busy_cpus                  # allocated CPUs on [t_i, t_i+1)
        self.skipped = Counter() if skipped is None else skipped   # reason -> jobs the replay could not run
        self.jobs_total = jobs_total                # jobs handed to the replay (records + skipped + rejected)
        self.rejected = [] if rejected is None else rejected      # jobs admission control turned away

    @classmethod
    def from_columns(cls, jobs: Sequence, rows: np.ndarray, start_s: np.ndarray, end_s: np.ndarray,
                     energy_j: np.ndarray, node_flat: np.ndarray, node_offsets: np.ndarray, *,
                     cluster: Cluster, queue: str, energy: EnergyTotals, power_times_s: np.ndarray,
                     power_w: np.ndarray, busy_cpus: np.ndarray, nodes: np.ndarray | None = None,
                     cpus: np.ndarray | None = None, gpus: np.ndarray | None = None,
                     skipped: Counter | None = None, jobs_total: int = 0,
                     rejected: list[Rejection] | None = None) -> "ReplayResult":
        """A result from per-job columns, without a Python object per job.

        All per-job arrays are in the order the jobs ended (the order of ``records``), one entry a
        job that ran:

        - ``jobs``: the replay's input, indexed by ``rows`` (a job table's rows,
          :meth:`~greenslurm.clustermodel.job_table.JobTable.rows`, whose columns are gathered at once,
          or any sequence of ``JobSpec``); the id, submit time, time limit, deadline, user, partition
          and whether the job ran into its limit come from there;
        - ``rows``: int64, the job's position in ``jobs``;
        - ``start_s``, ``end_s``, ``energy_j``: float64, seconds on the trace's clock and joules;
        - ``node_flat``, ``node_offsets``: the nodes job ``i`` held are
          ``node_flat[node_offsets[i]:node_offsets[i + 1]]`` (``node_offsets``: int64, one more
          entry than jobs, starting at 0);
        - ``nodes``: int64 node counts (default: the lengths of the node lists); ``cpus``: float64
          CPUs held in all (default: ``nodes``, a processor pool of one-CPU nodes); ``gpus``:
          float64 (default 0).

        The rest is as in the constructor: ``skipped`` counts the jobs the replay could not run by
        reason, ``jobs_total`` is every job handed to the replay.

        >>> from greenslurm.clustermodel import Cluster, JobSpec
        >>> from greenslurm.sim.accounting.ledger import EnergyLedger
        >>> cluster = Cluster.homogeneous(2, cpus=1)
        >>> jobs = [JobSpec("a", 0.0, 10.0, runtime_s=4.0, cpus=2), JobSpec("b", 1.0, 10.0, runtime_s=2.0)]
        >>> energy = EnergyLedger(cluster, 0.0).close(6.0)
        >>> result = ReplayResult.from_columns(jobs, np.array([0, 1]), np.array([0.0, 4.0]), np.array([4.0, 6.0]),
        ...                                    np.array([1.0, 2.0]), np.array([0, 1, 0]), np.array([0, 2, 3]),
        ...                                    cluster=cluster, queue="fcfs", energy=energy,
        ...                                    power_times_s=np.zeros(0), power_w=np.zeros(0), busy_cpus=np.zeros(0),
        ...                                    jobs_total=2)
        >>> [(r.job_id, r.start_s, r.end_s, r.cpus, r.node_indices) for r in result.records]
        [('a', 0.0, 4.0, 2.0, (0, 1)), ('b', 4.0, 6.0, 1.0, (0,))]
        """
        columns = JobColumns.gather(jobs, rows, start_s, end_s, energy_j, node_flat, node_offsets,
                                    nodes=nodes, cpus=cpus, gpus=gpus)
        return cls(None, cluster, queue, energy, power_times_s, power_w, busy_cpus, skipped, jobs_total, rejected,
                   columns=columns)

    @property
    def columns(self) -> JobColumns:
        """The jobs' results as columns (built from the records when the result was built from them)."""
        if self._columns is None:
            return JobColumns.from_records(self._records)
        return self._columns

    @property
    def records(self) -> Sequence[JobRecord]:
        """One :class:`JobRecord` per job that ran, in the order the jobs ended: the records given,
        or built anew from the columns on each access (keep the list if you read it twice)."""
        if self._records is not None:
            return self._records
        return self._columns.records()

    @property
    def jobs_completed(self) -> int:
        """How many jobs ran (``len(records)`` without building them)."""
        return len(self._records) if self._records is not None else len(self._columns)
