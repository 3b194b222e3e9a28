"""The schedule a trace recorded (each job's own start and end in the export) as a replay result, so
that the replay's metric code (:func:`greenslurm.sim.accounting.metrics.summarize`) and energy ledger
(:class:`~greenslurm.sim.accounting.ledger.EnergyLedger`) measure it exactly as they measure a replay.

**Times.**  A sacct export gives Start and End (the readers keep them as ``JobSpec.extra["start_s"]``
and ``["end_s"]``); an export without End: Start + Elapsed.  An SWF log gives the wait (start =
submit + wait) and the run time (end = start + run time).  A job without a usable record is
counted by reason (:data:`NO_START`, :data:`CANCELLED_PENDING`, :data:`START_BEFORE_SUBMIT`,
:data:`END_BEFORE_START`, :data:`IMPLAUSIBLE_TIME`), never left out silently.  A time cannot be right
when the export is on the UNIX clock and the time is before 2002 (a lost date read as 1970-01-01), or
when the job waited or ran more than a year (a Start or End decades away).  A job cancelled while it was pending is in a
sacct export with Start = End = the time of the cancel, no node (NodeList ``None assigned``) and
NNodes the nodes it asked for (slurmctld sets both times when it cancels a pending job): its
"start" is no start.  Jobs the reader skipped (steps, states that never ran, 0 nodes allocated)
are not jobs here: the reader counted them.

**Energy** is the cluster's power model applied to the recorded placement: a job's nodes from its
NodeList (``extra["node_list"]``, Slurm's hostlist syntax), its CPUs spread evenly over them and
its GPUs per node as read.  It is not available, with the reason (:attr:`RecordedSchedule.energy_missing`),
when a job has no node list, names a node the cluster lacks, or the recorded jobs hold more CPUs
or GPUs of a node than the cluster gives it (the cluster is not the one they ran on): never
invented.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.sim.accounting.ledger import EnergyLedger
from greenslurm.sim.accounting.result import EnergyTotals, JobRecord, ReplayResult
from greenslurm.sim.machines.machine import PendingJob

QUEUE = "recorded"
NO_START = "no start recorded"          # no Start column, or an SWF wait of -1
CANCELLED_PENDING = "cancelled before it started"
START_BEFORE_SUBMIT = "start before submit"
END_BEFORE_START = "end before start (or no run time)"
NO_NODE_LIST = "no node list"
IMPLAUSIBLE_TIME = "recorded time outside the export's plausible span"
# An export on the UNIX clock (its median recorded start after this) cannot hold a time before it: Slurm
# did not exist (its first release came in 2002); a Submit of 1970-01-01 is a zero where a date was lost.
UNIX_CLOCK_FROM_S = 1_009_843_200.0         # 2002-01-01T00:00:00Z
# No record waits or runs longer than this (a Start or End decades away is a typing slip or a lost date).
LONGEST_WAIT_OR_RUN_S = 365.0 * 86400.0
# The summary's figures that come from the energy ledger: unknown when energy is not available.
ENERGY_KEYS = ("energy_kwh", "energy_jobs_kwh", "energy_unallocated_kwh", "energy_idle_nodes_kwh", "peak_power_w",
               "mean_power_w")


def recorded_times(job: JobSpec, earliest_s: float = -math.inf) -> tuple[float, float] | str:
    """(start, end) as the export recorded them, or why they cannot be used (``earliest_s``: no time of
    the export can be before it, :func:`earliest_plausible_s`; no wait or run is longer than a year).

    >>> recorded_times(JobSpec("1", 100.0, 60.0, runtime_s=30.0, extra={"start_s": 160.0, "end_s": 200.0}))
    (160.0, 200.0)
    >>> recorded_times(JobSpec("2", 100.0, 60.0, runtime_s=30.0, extra={"start_s": 160.0}))   # 160 + Elapsed
    (160.0, 190.0)
    >>> recorded_times(JobSpec("3", 100.0, 60.0, runtime_s=30.0, extra={"wait_s": 5.0}))      # SWF: 100 + 5
    (105.0, 135.0)
    >>> recorded_times(JobSpec("4", 100.0, 60.0, runtime_s=30.0, extra={"wait_s": -1.0})) == NO_START
    True
    >>> recorded_times(JobSpec("5", 100.0, 60.0, runtime_s=30.0, extra={"start_s": 90.0, "end_s": 120.0}))
    'start before submit'
    >>> recorded_times(JobSpec("6", 100.0, 60.0, runtime_s=0.0, state="CANCELLED",
    ...                        extra={"start_s": 500.0, "end_s": 500.0, "node_list": "None assigned"}))
    'cancelled before it started'
    >>> recorded_times(JobSpec("7", 0.0, 60.0, extra={"start_s": 1.7e9, "end_s": 1.7e9 + 30}), earliest_s=1e9)
    "recorded time outside the export's plausible span"
    >>> recorded_times(JobSpec("8", 100.0, 60.0, extra={"start_s": 100.0 + 366 * 86400.0, "end_s": 4e7}))
    "recorded time outside the export's plausible span"
    """
    extra = job.extra or {}
    if job.state == "CANCELLED" and not job.runtime_s and not _names_nodes(extra.get("node_list")):
        return CANCELLED_PENDING
    start = extra.get("start_s")
    if start is None:
        wait = extra.get("wait_s")            # SWF's wait column (-1: unknown)
        start = job.submit_s + float(wait) if isinstance(wait, (int, float)) and wait >= 0 else None
    if start is None or not math.isfinite(start):
        return NO_START
    end = extra.get("end_s")
    if end is None and job.runtime_s is not None:
        end = start + job.runtime_s
    if end is None or not math.isfinite(end) or end < start:
        return END_BEFORE_START
    if min(job.submit_s, start) < earliest_s or max(start - job.submit_s, end - start) > LONGEST_WAIT_OR_RUN_S:
        return IMPLAUSIBLE_TIME
    if start < job.submit_s:
        return START_BEFORE_SUBMIT
    return float(start), float(end)


def earliest_plausible_s(jobs: Sequence[JobSpec]) -> float:
    """The earliest time an export's record may hold: 2002-01-01 when it is on the UNIX clock (its
    median recorded start after that: a sacct export's dates), else none (an SWF log counts from 0).

    >>> earliest_plausible_s([JobSpec("a", 0.0, 1.0, extra={"start_s": 1.7e9})]) == UNIX_CLOCK_FROM_S
    True
    >>> earliest_plausible_s([JobSpec("a", 0.0, 1.0, extra={"wait_s": 5.0})])
    -inf
    """
    starts = [float(job.extra["start_s"]) for job in jobs if job.extra and isinstance(job.extra.get("start_s"), (int, float))
              and math.isfinite(job.extra["start_s"])]
    return UNIX_CLOCK_FROM_S if starts and float(np.median(starts)) >= UNIX_CLOCK_FROM_S else -math.inf


def recorded_nodes(job: JobSpec, index_of: Mapping[str, int]) -> tuple[int, ...] | str:
    """The cluster's indices of the nodes the export says the job ran on, or why there are none.

    >>> index = {"n1": 0, "n2": 1}
    >>> recorded_nodes(JobSpec("1", 0.0, 1.0, extra={"node_list": "n[1-2]"}), index)
    (0, 1)
    >>> recorded_nodes(JobSpec("2", 0.0, 1.0, extra={"node_list": "n[2-3]"}), index)
    'job 2 ran on n3, which the cluster lacks'
    >>> recorded_nodes(JobSpec("3", 0.0, 1.0), index)
    'no node list'
    """
    from greenslurm.traces.slurm_hostlist import expand_hostlist

    text = (job.extra or {}).get("node_list")
    if not _names_nodes(text):
        return NO_NODE_LIST
    try:
        names = expand_hostlist(str(text), limit=len(index_of))
    except ValueError as error:
        return f"job {job.job_id}: node list {text!r}: {error}"
    missing = next((name for name in names if name not in index_of), None)
    if missing is not None:
        return f"job {job.job_id} ran on {missing}, which the cluster lacks"
    if not names or len(set(names)) != len(names):
        return f"job {job.job_id}: node list {text!r} names no node or one twice"
    return tuple(index_of[name] for name in names)


def _names_nodes(node_list) -> bool:
    """Whether a NodeList names nodes (sacct prints ``None assigned`` for a job that got none)."""
    return bool(node_list) and node_list not in ("None assigned", "(null)")


@dataclass(frozen=True)
class RecordedSchedule:
    """The recorded schedule of the jobs with a usable record, measured as a replay."""

    result: ReplayResult | None               # None: no job has a usable record
    unusable: dict[str, int] = field(default_factory=dict)    # reason -> jobs left out of it
    energy_missing: str | None = None         # why energy is not available (None: it is)

    @property
    def available(self) -> bool:
        return self.result is not None

    def starts(self) -> dict[str, tuple[float, float]]:
        """Job id -> (submit, start) of the jobs whose id is unique (schedules are compared by job id)."""
        return submit_and_start(self.result.records if self.result is not None else ())


def submit_and_start(records: Sequence[JobRecord]) -> dict[str, tuple[float, float]]:
    """Job id -> (submit, start) of the records whose job id no other record carries.

    >>> from greenslurm.sim.accounting.metrics import _record
    >>> submit_and_start([_record(submit_s=0.0, start_s=5.0, end_s=9.0, job_id="a"),
    ...                   _record(submit_s=1.0, start_s=2.0, end_s=3.0, job_id="b"),
    ...                   _record(submit_s=1.0, start_s=4.0, end_s=5.0, job_id="b")])
    {'a': (0.0, 5.0)}
    """
    seen = Counter(r.job_id for r in records)
    return {r.job_id: (r.submit_s, r.start_s) for r in records if seen[r.job_id] == 1}


def recorded_schedule(jobs: Sequence[JobSpec], cluster: Cluster) -> RecordedSchedule:
    """The recorded schedule of ``jobs`` on ``cluster`` (see the module's docstring).

    Two jobs on one node of 4 CPUs (100 W idle, 300 W busy: 50 W per busy CPU); "b" waited 10 s:

    >>> from greenslurm.clustermodel.node import NodeSpec
    >>> c = Cluster([NodeSpec("n1", cpus=4, idle_w=100.0, busy_w=300.0)])
    >>> jobs = [JobSpec("a", 0.0, 60.0, runtime_s=20.0, cpus=4, nodes=1,
    ...                 extra={"start_s": 0.0, "end_s": 20.0, "node_list": "n1"}),
    ...         JobSpec("b", 10.0, 60.0, runtime_s=10.0, cpus=2, nodes=1,
    ...                 extra={"start_s": 20.0, "end_s": 30.0, "node_list": "n1"})]
    >>> s = recorded_schedule(jobs, c)
    >>> [(r.job_id, r.start_s - r.submit_s) for r in s.result.records]
    [('a', 0.0), ('b', 10.0)]
    >>> s.result.energy.total_j, s.result.energy.peak_power_w    # 100 W x 30 s + 50 W x (4 x 20 + 2 x 10) CPU-s
    (8000.0, 300.0)
    >>> too_many = [j.with_changes(extra={**j.extra, "start_s": 10.0}) for j in jobs]   # both at 10-20: 6 CPUs
    >>> recorded_schedule(too_many, c).energy_missing
    'the recorded jobs hold 6 CPUs of n1 at 10 s, which has 4 on this cluster'
    """
    unusable: Counter = Counter()
    kept: list[tuple[JobSpec, float, float]] = []
    earliest_s = earliest_plausible_s(jobs)
    for job in jobs:
        times = recorded_times(job, earliest_s)
        if isinstance(times, str):
            unusable[times] += 1
        else:
            kept.append((job, *times))
    if not kept:
        return RecordedSchedule(None, dict(unusable), "no job has a recorded start and end")
    kept.sort(key=lambda item: item[0].submit_s)        # stable: equal submits keep the trace's order
    index_of = {node.name: i for i, node in enumerate(cluster.nodes)}
    placed = [recorded_nodes(job, index_of) for job, _, _ in kept]
    ends = [end for _, _, end in kept]
    energy_missing = _placement_problem(placed, len(kept))
    running = None
    if energy_missing is None:
        running = [_running(i, job, np.array(nodes), start) for i, ((job, start, _), nodes) in enumerate(zip(kept, placed))]
        energy_missing = _overload(running, ends, cluster)
    if energy_missing is not None:
        running = None
    energy, series, charged = _account(running, ends, cluster, kept[0][0].submit_s, max(ends))
    records = [JobRecord(job_id=job.job_id, submit_s=job.submit_s, start_s=start, end_s=end,
                         requested_time_s=job.requested_time_s, nodes=len(nodes) if running else job.nodes,
                         cpus=float(job.cpus), gpus=job.total_gpus, killed_at_limit=job.killed_at_limit,
                         energy_j=charged[i], node_indices=tuple(nodes) if running else (),
                         deadline_s=job.deadline_s, user=job.user, partition=job.partition)
               for i, ((job, start, end), nodes) in enumerate(zip(kept, placed))]
    result = ReplayResult(records, cluster, QUEUE, energy, *series, skipped=unusable.copy(), jobs_total=len(jobs))
    return RecordedSchedule(result, dict(unusable), energy_missing)


def _placement_problem(placed: list, jobs: int) -> str | None:
    """Why the placements cannot be charged (the first problem; how many jobs lack a node list)."""
    lacking = sum(1 for p in placed if p == NO_NODE_LIST)
    if lacking:
        return f"{lacking:,} of {jobs:,} jobs have no node list (NodeList)"
    return next((p for p in placed if isinstance(p, str)), None)


def _running(index: int, job: JobSpec, nodes: np.ndarray, start: float) -> PendingJob:
    """The job as the ledger charges it: its CPUs spread evenly over its recorded nodes."""
    demand = np.array([job.cpus / len(nodes), 0.0, job.gpus_per_node])
    pending = PendingJob(index=index, job=job, nodes=len(nodes), demand=demand, cpus_total=float(job.cpus),
                         requested_s=job.requested_time_s, start_s=start)
    pending.node_indices = nodes
    return pending


START, END = 1, 0


def _events(running: Sequence[PendingJob], ends: Sequence[float]) -> list[tuple[float, int, int]]:
    """(time, order, job) in time order: ends first at equal times (as in a replay), except the end
    of a job that ran for no time, which comes after its start.

    >>> jobs = [PendingJob(0, JobSpec("a", 0.0, 1.0), 1, np.zeros(3), 1.0, 1.0, start_s=s) for s in (0.0, 5.0)]
    >>> _events(jobs, [5.0, 5.0])          # a ends at 5 before b starts at 5; b ends at 5 after that
    [(0.0, 1, 0), (5.0, 0, 0), (5.0, 1, 1), (5.0, 2, 1)]
    """
    return sorted([(job.start_s, START, i) for i, job in enumerate(running)]
                  + [(end, END if end > running[i].start_s else START + 1, i) for i, end in enumerate(ends)])


def _overload(running: Sequence[PendingJob], ends: Sequence[float], cluster: Cluster) -> str | None:
    """The first moment the recorded jobs hold more of a node than the cluster gives it, as a sentence."""
    held = np.zeros((cluster.size, 2))                      # CPUs, GPUs per node
    capacity = cluster.capacity[:, [CPU, GPU]]
    for time, kind, i in _events(running, ends):
        job = running[i]
        amount = job.demand[[CPU, GPU]]
        if kind != START:
            held[job.node_indices] -= amount
            continue
        held[job.node_indices] += amount
        over = np.flatnonzero((held[job.node_indices] > capacity[job.node_indices] + 1e-9).any(axis=1))
        if len(over):
            node = int(job.node_indices[over[0]])
            what = 0 if held[node, 0] > capacity[node, 0] + 1e-9 else 1
            name = ("CPUs", "GPUs")[what]
            return (f"the recorded jobs hold {held[node, what]:g} {name} of {cluster.nodes[node].name} at "
                    f"{moment(time)}, which has {capacity[node, what]:g} on this cluster")
    return None


def moment(time_s: float) -> str:
    """A time of the trace as a reader finds it: a UTC date for epoch seconds (sacct exports), else
    seconds (SWF logs count from the log's start).

    >>> moment(1482390913.0), moment(10.0)
    ('2016-12-22T07:15:13Z', '10 s')
    """
    import datetime

    if time_s >= 1e9:            # 2001-09-09 on: an epoch time (an SWF log would span 31 years)
        try:
            return datetime.datetime.fromtimestamp(time_s, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (OverflowError, ValueError, OSError):      # past year 9999
            pass
    return f"{time_s:g} s"


def _account(running: Sequence[PendingJob] | None, ends: Sequence[float], cluster: Cluster, start_s: float,
             end_s: float):
    """The ledger's totals, power series and per-job energy (zeros and empty series without placements)."""
    if running is None:
        empty = np.zeros(0)
        energy = EnergyTotals(total_j=0.0, jobs_j=0.0, unallocated_j=0.0, idle_nodes_j=0.0,
                              per_node_j=np.zeros(cluster.size), peak_power_w=0.0, start_s=start_s, end_s=end_s)
        return energy, (empty, empty, empty), [0.0] * len(ends)
    ledger = EnergyLedger(cluster, start_s)
    charged = [0.0] * len(ends)
    for time, kind, i in _events(running, ends):
        if kind == START:
            ledger.on_start(running[i], time)
        else:
            charged[i] = ledger.on_end(running[i], time)
    energy = ledger.close(end_s)
    series = tuple(np.frombuffer(values, dtype=float).copy()
                   for values in (ledger.times_s, ledger.series_power_w, ledger.series_busy_cpus))
    return energy, series, charged
