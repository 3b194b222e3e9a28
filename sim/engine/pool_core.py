"""The replay's core on a processor pool: FCFS and EASY, first fit, the energy ledger, in one loop.

A cluster of identical single-CPU nodes without memory or GPUs (every SWF log's model) under FCFS
or EASY with first-fit node selection is the commonest replay and the one that must scale to
millions of jobs.  For it, the replay (:class:`greenslurm.sim.engine.replay.Replay`) hands the
whole loop to this core: the same events in the same order (job ends before arrivals at one time,
ends in start order), the same rules (FCFS; EASY's shadow time and extra processors, its
reservation kept while no job ended), the lowest-numbered free nodes, and the ledger's arithmetic
operation by operation, so that every output is the same to the last bit (tests compare them).

The core runs as compiled C (``_pool_core.c``, built when the package is installed with a C
compiler) or, without it, as the pure-Python :func:`run_python` below; both give identical
results.  ``GREENSLURM_POOL_CORE`` chooses: ``auto`` (the default: compiled when built),
``compiled``, ``python``, or ``off`` (the replay's general loop).

Inputs are the jobs that can run, in submit order: submit time, requested time, time run (its
run time, at most the requested time) and processors.  The result (:class:`PoolRun`) gives each
job's start, end and energy, its nodes, the order jobs ended in, the power series and the
ledger's per-node sums.
"""

from __future__ import annotations

import ctypes
import heapq
import os
from bisect import bisect_left, bisect_right, insort
from math import inf
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.native import load_beside, warn_missing_once
from greenslurm.sim.accounting.ledger import LedgerState

FCFS, EASY, CONSERVATIVE = 0, 1, 2
QUEUE_CODES = {"fcfs": FCFS, "easy": EASY, "conservative": CONSERVATIVE}
ENV = "GREENSLURM_POOL_CORE"
CHOICES = ("auto", "compiled", "python", "off")
PROGRESS_EVERY = 2000


@dataclass
class PoolRun(LedgerState):
    """What one run of the core computed: the ledger's state (:class:`LedgerState`) and per job, in
    the order the jobs ended (the records' order), its row in the input, start, end, energy and nodes."""

    rows: np.ndarray              # int64
    start_s: np.ndarray
    end_s: np.ndarray
    energy_j: np.ndarray          # its share of node power over its run
    node_offsets: np.ndarray      # int64: the i-th job to end ran on node_flat[node_offsets[i]:node_offsets[i + 1]]
    node_flat: np.ndarray         # int32

    def by_job(self, values: np.ndarray) -> np.ndarray:
        """Per-job ``values`` (in the order jobs ended) by input row (NaN: a job that did not end)."""
        out = np.full(int(self.rows.max()) + 1 if len(self.rows) else 0, np.nan)
        out[self.rows] = values
        return out

    def nodes_of(self, row: int) -> list[int]:
        """The nodes the job of input row ``row`` ran on."""
        i = int(np.flatnonzero(self.rows == row)[0])
        return self.node_flat[self.node_offsets[i]:self.node_offsets[i + 1]].tolist()


@dataclass(frozen=True)
class PoolPower:
    """The ledger's constants on a pool of alike nodes (see ``EnergyLedger``)."""

    idle_power_w: float           # the whole cluster idle
    delta_per_node_w: float       # power a busy node adds: (busy - idle) per CPU x 1 CPU (+ 0 GPUs)
    share_per_node_w: float       # power charged to a job per node: busy per CPU x 1 CPU (+ 0 GPUs)


def pairwise_sum_of_copies(value: float, count: int) -> float:
    """The sum of ``count`` copies of ``value`` as numpy adds them (pairwise, blocks of 8), the
    ledger's ``np.full(count, value).sum()`` bit for bit.

    >>> pairwise_sum_of_copies(0.1, 10) == float(np.full(10, 0.1).sum())
    True
    >>> pairwise_sum_of_copies(2.5, 3)       # fewer than 8: one running sum, 2.5 + 2.5 + 2.5
    7.5
    """
    if count < 8:
        total = 0.0
        for _ in range(count):
            total += value
        return total
    if count <= 128:
        # eight running sums over whole blocks of 8, combined as a tree, then the remainder
        blocks = count - count % 8
        lane = value
        for _ in range(blocks // 8 - 1):
            lane += value
        total = ((lane + lane) + (lane + lane)) + ((lane + lane) + (lane + lane))
        for _ in range(count - blocks):
            total += value
        return total
    half = count // 2
    half -= half % 8
    return pairwise_sum_of_copies(value, half) + pairwise_sum_of_copies(value, count - half)


def next_event_s(ends: list[tuple], submit: list[float], arrived: int, by_reservation: list[tuple],
                 after_s: float) -> float:
    """The next event time after ``after_s``: the first job end (``ends``: a heap of (time, ...)), the
    next arrival (``submit[arrived]``), or the earliest reserved start still ahead (``by_reservation``:
    sorted (time, job)); inf when none is left.

    >>> next_event_s([(9.0, 0, 0)], [0.0, 5.0], 1, [(3.0, 1)], 2.0), next_event_s([], [], 0, [(3.0, 1)], 3.0)
    (3.0, inf)
    """
    now = ends[0][0] if ends else inf
    if arrived < len(submit) and submit[arrived] < now:
        now = submit[arrived]
    if by_reservation and after_s < by_reservation[0][0] < now:
        now = by_reservation[0][0]
    return now


def check_jobs(n_nodes: int, submit_s, requested_s, run_for_s, procs) -> None:
    """ValueError unless the columns are as long as each other and every job asks for 1 to
    ``n_nodes`` processors (the compiled core reads and writes by these counts).

    >>> check_jobs(2, [0.0], [1.0], [1.0], [3])
    Traceback (most recent call last):
    ...
    ValueError: a job asks for 3 processors; the core places 1 to 2
    """
    if not len(submit_s) == len(requested_s) == len(run_for_s) == len(procs):
        raise ValueError("the job columns differ in length")
    if len(procs):
        size = np.asarray(procs)
        low, high = size.min(), size.max()
        if low < 1 or high > n_nodes:
            raise ValueError(f"a job asks for {low if low < 1 else high} processors; the core places 1 to {n_nodes}")


class PoolLedger:
    """The energy ledger on a pool of alike single-CPU nodes, operation by operation as
    :class:`greenslurm.sim.accounting.ledger.EnergyLedger` adds (shared by the pure-Python cores),
    and the ended jobs' results in the order they ended."""

    def __init__(self, n_nodes: int, power: PoolPower, start_s: float,
                 progress: Callable[[int], None] | None = None) -> None:
        self.power_w = self.peak_w = power.idle_power_w
        self.busy = 0.0
        self.last_s = start_s
        self.total_j = self.jobs_j = 0.0
        self.times, self.series_w, self.series_busy = array("d"), array("d"), array("d")
        self.node_jobs_j = [0.0] * n_nodes
        self.node_cpu_s = [0.0] * n_nodes
        self.jobs_on = [0] * n_nodes
        self.idle_since = [start_s] * n_nodes
        self.idle_node_s = [0.0] * n_nodes
        self.delta_unit, self.share_unit = power.delta_per_node_w, power.share_per_node_w
        # in the order jobs ended: row, start, end, energy, nodes
        self.out_rows, self.out_nodes, self.out_offsets = array("q"), array("i"), array("q", [0])
        self.out_start, self.out_end, self.out_energy = array("d"), array("d"), array("d")
        self.progress = progress

    def _advance(self, now: float) -> None:
        dt = now - self.last_s
        if dt > 0:
            self.times.append(self.last_s); self.series_w.append(self.power_w); self.series_busy.append(self.busy)
            self.total_j += self.power_w * dt
            self.last_s = now

    def start(self, nodes: list[int], now: float) -> None:
        """A job starts on ``nodes`` (one CPU each) at ``now``."""
        n = len(nodes)
        self._advance(now)
        self.power_w += n * self.delta_unit
        self.busy += n
        if self.power_w > self.peak_w:
            self.peak_w = self.power_w
        jobs_on, idle_node_s, idle_since = self.jobs_on, self.idle_node_s, self.idle_since
        for node in nodes:
            if jobs_on[node] == 0:
                idle_node_s[node] += now - idle_since[node]
            jobs_on[node] += 1

    def finish(self, row: int, nodes: list[int], started_s: float, now: float) -> None:
        """The job of input ``row``, started at ``started_s`` on ``nodes``, ends at ``now``: its share
        of node power over its run is charged to it (numpy's pairwise sum over its nodes)."""
        n = len(nodes)
        self._advance(now)
        self.power_w -= n * self.delta_unit
        self.busy -= n
        run_s = now - started_s
        share = self.share_unit * run_s
        node_jobs_j, node_cpu_s, jobs_on, idle_since = self.node_jobs_j, self.node_cpu_s, self.jobs_on, self.idle_since
        for node in nodes:
            node_jobs_j[node] += share
            node_cpu_s[node] += run_s
            jobs_on[node] -= 1
            if jobs_on[node] == 0:
                idle_since[node] = now
        charged = pairwise_sum_of_copies(share, n)
        self.jobs_j += charged
        self.out_rows.append(row)
        self.out_start.append(started_s)
        self.out_end.append(now)
        self.out_energy.append(charged)
        self.out_nodes.extend(nodes)
        self.out_offsets.append(len(self.out_nodes))
        if self.progress is not None and len(self.out_rows) % PROGRESS_EVERY == 0:
            self.progress(len(self.out_rows))

    def run(self, cls: type = None, **extra) -> PoolRun:
        """What was computed, as a :class:`PoolRun` (or ``cls`` with the ``extra`` fields)."""
        if self.progress is not None:
            self.progress(len(self.out_rows))

        def numbers(values: array, dtype) -> np.ndarray:
            return np.frombuffer(values, dtype=dtype).copy() if len(values) else np.zeros(0, dtype=dtype)
        return (cls or PoolRun)(
            rows=numbers(self.out_rows, np.int64), start_s=numbers(self.out_start, float),
            end_s=numbers(self.out_end, float), energy_j=numbers(self.out_energy, float),
            node_offsets=numbers(self.out_offsets, np.int64), node_flat=numbers(self.out_nodes, np.int32),
            times_s=numbers(self.times, float), power_w=numbers(self.series_w, float),
            busy_cpus=numbers(self.series_busy, float), total_j=self.total_j, jobs_j=self.jobs_j,
            peak_power_w=self.peak_w, power_now_w=self.power_w, busy_cpus_now=self.busy, last_s=self.last_s,
            node_jobs_j=np.array(self.node_jobs_j), node_cpu_seconds=np.array(self.node_cpu_s),
            jobs_on_node=np.array(self.jobs_on, dtype=np.int64), idle_since_s=np.array(self.idle_since),
            idle_node_seconds=np.array(self.idle_node_s), **extra)


def run_python(queue: int, n_nodes: int, submit_s, requested_s, run_for_s, procs, power: PoolPower,
               start_s: float, progress: Callable[[int], None] | None = None) -> PoolRun:
    """The core in pure Python (the compiled core's definition: same steps, same results)."""
    check_jobs(n_nodes, submit_s, requested_s, run_for_s, procs)
    jobs = len(submit_s)
    submit = submit_s.tolist() if isinstance(submit_s, np.ndarray) else list(submit_s)
    requested = requested_s.tolist() if isinstance(requested_s, np.ndarray) else list(requested_s)
    run_for = run_for_s.tolist() if isinstance(run_for_s, np.ndarray) else list(run_for_s)
    size = procs.tolist() if isinstance(procs, np.ndarray) else list(procs)
    held: dict[int, list[int]] = {}                # a running job's nodes
    started = [-1.0] * jobs                         # by job: its start
    # machine: which nodes are free (1) and how many
    free = bytearray(b"\x01" * n_nodes)
    free_count = float(n_nodes)
    lowest_free = 0                                 # no node below it is free
    finished_count = 0
    ledger = PoolLedger(n_nodes, power, start_s, progress)
    # events: running jobs' ends as (time, sequence, job); the next arrival is submit[arrived]
    ends: list[tuple[float, int, int]] = []
    sequence = 0
    arrived = 0
    waiting: deque[int] | list[int] = deque() if queue == FCFS else []     # in arrival order
    by_end: list[tuple[float, int]] = []          # EASY: running jobs by (requested end, row)
    cached_key = None                             # EASY: (head, finished_count) of the reservation
    cached: list[float] | None = None             # [shadow time, extra processors]

    def start(j: int, now: float) -> None:
        nonlocal free_count, sequence, lowest_free
        n = size[j]
        nodes = held[j] = []
        node = lowest_free - 1
        for _ in range(n):                         # the lowest-numbered free nodes
            node = free.index(1, node + 1)
            free[node] = 0
            nodes.append(node)
        lowest_free = node + 1                     # the n lowest free nodes were taken: none below
        free_count -= n
        started[j] = now
        ledger.start(nodes, now)
        heapq.heappush(ends, (now + run_for[j], sequence, j))
        sequence += 1

    def finish(j: int, now: float) -> None:
        nonlocal free_count, finished_count, lowest_free
        n = size[j]
        nodes = held.pop(j)
        for node in nodes:
            free[node] = 1
        lowest_free = min(lowest_free, nodes[0])   # a job's nodes ascend
        free_count += n
        finished_count += 1
        ledger.finish(j, nodes, started[j], now)

    # conservative: the plan, jobs waiting by arrival and by reserved start, a wake-up time
    plan: CountProfile | None = None
    reserved_s = [0.0] * jobs if queue == CONSERVATIVE else []
    by_reservation: list[tuple[float, int]] = []
    compress = False
    now = -inf
    while ends or arrived < jobs or by_reservation:
        now = next_event_s(ends, submit, arrived, by_reservation, now)
        if now == inf and not ends:            # a job may end at infinity (1e308 s after 1e308 s): not stuck
            raise RuntimeError(f"{len(by_reservation)} jobs still waiting after the last event")
        while ends and ends[0][0] == now:
            j = heapq.heappop(ends)[2]
            finish(j, now)
            if queue == EASY:
                del by_end[bisect_left(by_end, (started[j] + requested[j], j))]
            elif queue == CONSERVATIVE:
                plan.advance(now)
                planned_end = started[j] + requested[j]
                if now < planned_end:          # ended before its requested time: give the rest back
                    plan.change(now, planned_end, size[j])
                    compress = True
        while arrived < jobs and submit[arrived] == now:
            if queue == CONSERVATIVE:
                if plan is None:
                    plan = CountProfile(free_count, now)
                plan.advance(now)
                found = plan.earliest_start(size[arrived], requested[arrived], now)
                if found is None:
                    raise RuntimeError("a job fits nowhere even on an empty pool")
                plan.change(found, found + requested[arrived], -size[arrived])
                reserved_s[arrived] = found
                waiting.append(arrived)
                insort(by_reservation, (found, arrived))
            else:
                waiting.append(arrived)
            arrived += 1
        if queue == CONSERVATIVE:
            if plan is None:
                continue
            plan.advance(now)
            if compress:
                compress = False
                _compress(plan, waiting, reserved_s, by_reservation, size, requested, now)
            due = []
            while by_reservation and by_reservation[0][0] <= now:
                due.append(by_reservation.pop(0))
            # jobs planned for no time first: they hold nothing in the plan (see queues.pop_due)
            due.sort(key=lambda entry: requested[entry[1]] > 0)
            late = []
            for entry in due:
                j = entry[1]
                if size[j] > free_count:
                    late.append(entry)
                    continue
                del waiting[bisect_left(waiting, j)]
                start(j, now)
            for entry in late:
                insort(by_reservation, entry)
            continue
        if queue == FCFS:
            while waiting and size[waiting[0]] <= free_count:
                start(waiting.popleft(), now)
            continue
        # EASY on processor counts (Mu'alem & Feitelson 2001, Fig. 1)
        while waiting and size[waiting[0]] <= free_count:
            j = waiting.pop(0)
            start(j, now)
            insort(by_end, (now + requested[j], j))
        if not waiting:
            continue
        head = waiting[0]
        key = (head, finished_count)
        reservation = cached if cached_key == key else None
        i = 1
        while i < len(waiting) and free_count > 0:
            j = waiting[i]
            if size[j] > free_count:
                i += 1
                continue
            if reservation is None:
                reservation = _count_reservation(by_end, size, free_count, size[head])
            if now + requested[j] > reservation[0]:
                if size[j] > reservation[1]:
                    i += 1
                    continue
                reservation[1] -= size[j]
            del waiting[i]
            start(j, now)
            insort(by_end, (now + requested[j], j))
        if reservation is not None:
            cached_key, cached = key, reservation
    return ledger.run()


def _count_reservation(by_end: list[tuple[float, int]], size: list[int], free_count: float,
                       head_size: int) -> list[float]:
    """[shadow time, extra processors] of the head: release running jobs by requested end until
    the head fits; what is left beyond it then is extra."""
    available = free_count
    for end_s, j in by_end:
        available += size[j]
        if available >= head_size:
            return [end_s, available - head_size]
    raise RuntimeError("the first waiting job fits nowhere even on an empty pool")


# -- the compiled core ---------------------------------------------------------------------------
def compiled_library() -> ctypes.CDLL | None:
    """The compiled core next to this module (built at install), or None."""
    library = load_beside(__file__, "_pool_core")
    if library is not None:
        library.pool_run.restype = ctypes.c_int
    return library


def chosen_core(env: str = ENV, library: Callable[[], ctypes.CDLL | None] | None = None, what: str = "core") -> str:
    """Which core runs a pool replay: ``compiled``, ``python`` or ``off`` (from ``GREENSLURM_POOL_CORE``;
    another core's from its variable ``env``, its library from ``library``)."""
    library = library or compiled_library
    choice = os.environ.get(env, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise InputError(f"{choice!r} is not a core; choose from {', '.join(CHOICES)}", path="environment",
                         field=env)
    if choice == "auto":
        if library() is not None:
            return "compiled"
        warn_missing_once()                 # not built: loud, once, then the pure-Python definition
        return "python"
    if choice == "compiled" and library() is None:
        raise InputError(f"the compiled {what} is not built (install greenslurm where a C compiler is)",
                         path="environment", field=env)
    return choice


def run_compiled(queue: int, n_nodes: int, submit_s, requested_s, run_for_s, procs, power: PoolPower,
                 start_s: float) -> PoolRun:
    """The core in C (see ``_pool_core.c``); the same results as :func:`run_python`."""
    library = compiled_library()
    if library is None:
        raise RuntimeError("the compiled core is not built")
    submit = np.ascontiguousarray(submit_s, dtype=np.float64)
    requested = np.ascontiguousarray(requested_s, dtype=np.float64)
    run_for = np.ascontiguousarray(run_for_s, dtype=np.float64)
    size = np.ascontiguousarray(procs, dtype=np.int64)
    check_jobs(n_nodes, submit, requested, run_for, size)
    jobs = len(submit)
    # in the order jobs end: row, start, end, energy, nodes
    out_rows = np.empty(jobs, dtype=np.int64)
    out_start, out_end, out_energy = np.empty(jobs), np.empty(jobs), np.empty(jobs)
    out_nodes = np.empty(int(size.sum()), dtype=np.int32)
    out_offsets = np.empty(jobs + 1, dtype=np.int64)
    # the power series gains at most one point per distinct event time: every start and end
    points = 2 * jobs + 1
    times, series_w, series_busy = np.empty(points), np.empty(points), np.empty(points)
    series_len = np.zeros(1, dtype=np.int64)
    scalars = np.zeros(7)
    node_jobs_j, node_cpu_s = np.empty(n_nodes), np.empty(n_nodes)
    jobs_on = np.empty(n_nodes, dtype=np.int64)
    idle_since, idle_node_s = np.empty(n_nodes), np.empty(n_nodes)

    def ptr(a: np.ndarray):
        return a.ctypes.data_as(ctypes.c_void_p)
    status = library.pool_run(
        ctypes.c_int(queue), ctypes.c_int64(n_nodes), ctypes.c_int64(jobs),
        ptr(submit), ptr(requested), ptr(run_for), ptr(size),
        ctypes.c_double(power.idle_power_w), ctypes.c_double(power.delta_per_node_w),
        ctypes.c_double(power.share_per_node_w), ctypes.c_double(start_s),
        ptr(out_rows), ptr(out_start), ptr(out_end), ptr(out_energy), ptr(out_nodes), ptr(out_offsets),
        ptr(times), ptr(series_w), ptr(series_busy), ptr(series_len), ptr(scalars),
        ptr(node_jobs_j), ptr(node_cpu_s), ptr(jobs_on), ptr(idle_since), ptr(idle_node_s))
    if status == -1:
        raise MemoryError("the compiled replay core ran out of memory")
    if status == -2:
        raise RuntimeError("a waiting job fits nowhere even on an empty pool")
    if status == -3:
        raise RuntimeError("jobs still waiting after the last event")
    if status == -4:
        raise ValueError("a time before the plan's start (a negative or NaN time)")
    points = int(series_len[0])
    for series in (times, series_w, series_busy):      # shrunk in place: no second copy
        series.resize(points, refcheck=False)
    return PoolRun(
        rows=out_rows, start_s=out_start, end_s=out_end, energy_j=out_energy, node_offsets=out_offsets,
        node_flat=out_nodes, times_s=times, power_w=series_w,
        busy_cpus=series_busy, total_j=float(scalars[0]), jobs_j=float(scalars[1]),
        peak_power_w=float(scalars[2]), power_now_w=float(scalars[3]), busy_cpus_now=float(scalars[4]),
        last_s=float(scalars[5]), node_jobs_j=node_jobs_j, node_cpu_seconds=node_cpu_s, jobs_on_node=jobs_on,
        idle_since_s=idle_since, idle_node_seconds=idle_node_s)


def run_pool(queue: str, n_nodes: int, submit_s, requested_s, run_for_s, procs, power: PoolPower,
             start_s: float, core: str | None = None, progress: Callable[[int], None] | None = None) -> PoolRun:
    """Run ``queue`` (``fcfs`` or ``easy``) on a pool of ``n_nodes`` processors with the chosen core.

    >>> power = PoolPower(idle_power_w=200.0, delta_per_node_w=150.0, share_per_node_w=250.0)
    >>> run = run_pool("easy", 2, [0.0, 0.0, 1.0], [100.0, 100.0, 10.0], [100.0, 50.0, 10.0], [1, 2, 1],
    ...                power, 0.0, core="python")
    >>> run.by_job(run.start_s).tolist()   # the 2-processor job waits for the first; the short one backfills at 1
    [0.0, 100.0, 1.0]
    >>> run.by_job(run.energy_j).tolist()  # 250 W x 100 s; 2 nodes x 250 W x 50 s; 250 W x 10 s
    [25000.0, 25000.0, 2500.0]
    >>> run.rows.tolist()                  # the order they ended: at 11, 100 and 150
    [2, 0, 1]
    """
    code = QUEUE_CODES[queue]
    core = core or chosen_core()
    if core == "compiled":
        run = run_compiled(code, n_nodes, submit_s, requested_s, run_for_s, procs, power, start_s)
        if progress is not None:
            progress(len(run.rows))
        return run
    return run_python(code, n_nodes, submit_s, requested_s, run_for_s, procs, power, start_s, progress)


# -- conservative backfilling on processor counts ---------------------------------------------------
class CountProfile:
    """The plan of a processor pool: free processors as a step function of future time (breakpoint
    ``times[k]``, ``free[k]`` processors from then until the next; the last holds for ever).  The
    same answers as :class:`greenslurm.sim.engine.profile.PlanProfile` on one pooled node.

    >>> plan = CountProfile(4.0, 0.0)
    >>> plan.change(0.0, 10.0, -3)                    # 3 processors reserved until 10
    >>> plan.earliest_start(2, 5.0, 0.0), plan.earliest_start(1, 5.0, 0.0)
    (10.0, 0.0)
    >>> plan.times, plan.free
    ([0.0, 10.0], [1.0, 4.0])
    """

    def __init__(self, free_now: float, now_s: float) -> None:
        self.times = [now_s]
        self.free = [float(free_now)]

    def _breakpoint(self, t_s: float) -> int:
        i = bisect_left(self.times, t_s)
        if i < len(self.times) and self.times[i] == t_s:
            return i
        if i == 0:
            raise ValueError(f"time {t_s} is before the plan's start {self.times[0]}")
        self.times.insert(i, t_s)
        self.free.insert(i, self.free[i - 1])
        return i

    def change(self, start_s: float, end_s: float, processors: int) -> None:
        """Add ``processors`` (negative: take them) to what is free during [start_s, end_s)."""
        i = self._breakpoint(start_s)
        j = self._breakpoint(end_s) if end_s != inf else len(self.times)
        free = self.free
        for k in range(i, j):
            free[k] += processors

    def advance(self, now_s: float) -> None:
        """Forget the past (the plan starts at ``now_s``) and merge steps that free the same."""
        times, free = self.times, self.free
        i = bisect_right(times, now_s) - 1
        if i > 0:
            del times[:i], free[:i]
        if times[0] < now_s:
            times[0] = now_s
        if len(times) > 1:
            keep = [0] + [k for k in range(1, len(times)) if free[k] != free[k - 1]]
            if len(keep) < len(times):
                self.times = [times[k] for k in keep]
                self.free = [free[k] for k in keep]

    def earliest_start(self, processors: int, duration_s: float, after_s: float,
                       before_s: float = inf) -> float | None:
        """The earliest time in [after_s, before_s), at a breakpoint (or ``after_s``), from which
        ``processors`` are free for ``duration_s``; None if there is none."""
        times, free = self.times, self.free
        count = len(times)
        i = max(bisect_right(times, after_s) - 1, 0)
        first = i
        while i < count:
            start_s = max(times[i], after_s) if i == first else times[i]
            if not start_s < before_s:
                return None
            end_s = start_s + duration_s
            k = i
            # the window: its own breakpoint and every later one before its end
            while k < count and (k == i or times[k] < end_s):
                if free[k] < processors:
                    break
                k += 1
            else:
                return start_s
            i = k + 1            # every start up to k has breakpoint k in its window: all fail
        return None

    def may_start_before(self, processors: int, after_s: float, before_s: float) -> bool:
        """Some breakpoint in [after_s, before_s) frees ``processors`` (needed to start earlier)."""
        times, free = self.times, self.free
        first = max(bisect_right(times, after_s) - 1, 0)
        last = bisect_left(times, before_s)
        return any(free[k] >= processors for k in range(first, last))

    def stairs(self) -> tuple[list[float], list[float]]:
        """The plan's staircase: each new maximum of free processors along the plan (``free[0]``,
        then every step freeing more than all before it) and the time it is first reached.  From
        the plan's start, ``processors`` may start before ``t`` (:meth:`may_start_before`) exactly
        when the first stair freeing that many is reached before ``t`` (:func:`stairs_allow`).

        >>> plan = CountProfile(2.0, 0.0)
        >>> plan.change(5.0, 8.0, 3); plan.change(8.0, 9.0, 1); plan.change(9.0, inf, 5)
        >>> plan.free                                  # 2 free, 5 from 5 s, 3 from 8 s, 7 from 9 s
        [2.0, 5.0, 3.0, 7.0]
        >>> plan.stairs()
        ([2.0, 5.0, 7.0], [0.0, 5.0, 9.0])
        """
        frees: list[float] = []
        times: list[float] = []
        for t_s, free in zip(self.times, self.free):
            if not frees or free > frees[-1]:
                frees.append(free)
                times.append(t_s)
        return frees, times


def stairs_allow(stairs: tuple[list[float], list[float]], processors: float, before_s: float) -> bool:
    """Some step of the plan before ``before_s`` frees ``processors`` (see :meth:`CountProfile.stairs`).

    >>> stairs = ([2.0, 5.0, 7.0], [0.0, 5.0, 9.0])
    >>> stairs_allow(stairs, 4, 6.0), stairs_allow(stairs, 4, 5.0), stairs_allow(stairs, 8, 99.0)
    (True, False, False)
    """
    frees, times = stairs
    i = bisect_left(frees, processors)
    return i < len(frees) and times[i] < before_s


def _compress(plan: CountProfile, waiting: list[int], reserved_s: list[float],
              by_reservation: list[tuple[float, int]], size, requested, now: float) -> None:
    """Move every waiting job, in arrival order, to its earliest slot (never later).

    Whether a job may start earlier at all is the plan's staircase's question (one search, not a
    scan of the steps before its start: with thousands waiting that made each pass quadratic);
    amounts given back and taken again leave the stairs as they were, a moved job changes them."""
    from_start = bisect_right(plan.times, now) - 1 <= 0     # the plan starts at now (advanced)
    stairs = None
    for j in waiting:
        old = reserved_s[j]
        if old <= now:
            continue
        if from_start:
            if stairs is None:
                stairs = plan.stairs()
            if not stairs_allow(stairs, size[j], old):
                continue
        elif not plan.may_start_before(size[j], now, old):
            continue
        plan.change(old, old + requested[j], size[j])
        found = plan.earliest_start(size[j], requested[j], now, before_s=old)
        if found is None:          # no earlier slot: the job keeps the one it has
            plan.change(old, old + requested[j], -size[j])
            continue
        del by_reservation[bisect_left(by_reservation, (old, j))]
        plan.change(found, found + requested[j], -size[j])
        stairs = None
        reserved_s[j] = found
        insort(by_reservation, (found, j))
