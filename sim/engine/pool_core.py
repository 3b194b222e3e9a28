"""The replay's core on a processor pool: FCFS and EASY, first fit, the energy ledger, in one loop.

A cluster of identical single-CPU nodes without memory or GPUs (every SWF log's model) under FCFS
or EASY with first-fit node selection is the commonest replay and the one that must scale to
millions of jobs.  For it, the replay (:class:`greenslurm.sim.engine.replay.Replay`) hands the
whole loop to this core: the same events in the same order (job ends before arrivals at one time,
ends in start order), the same rules (FCFS; EASY's shadow time and extra processors, its
reservation kept while no job ended), the lowest-numbered free nodes, and the ledger's arithmetic
operation by operation, so that every output is the same to the last bit (tests compare them).

The core is compiled C (``_pool_core.c``, built when the package is installed with a C compiler):
the fast path of the replay's general loop, which is the reference (the tests hold the two to each
other bit for bit).  Without the library the general loop runs the replay, and says once that it
is slower (:func:`greenslurm.clustermodel.native.warn_missing_once`).  ``GREENSLURM_POOL_CORE``
chooses: ``auto`` (the default: the core when built), ``compiled`` (an error when not built) or
``off`` (the general loop).

Inputs are the jobs that can run, in submit order: submit time, requested time, time run (its
run time, at most the requested time) and processors.  The result (:class:`PoolRun`) gives each
job's start, end and energy, its nodes, the order jobs ended in, the power series and the
ledger's per-node sums.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.native import load_beside, warn_missing_once
from greenslurm.sim.accounting.ledger import LedgerState

FCFS, EASY, CONSERVATIVE = 0, 1, 2
QUEUE_CODES = {"fcfs": FCFS, "easy": EASY, "conservative": CONSERVATIVE}
ENV = "GREENSLURM_POOL_CORE"
CHOICES = ("auto", "compiled", "off")
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


# -- the compiled core ---------------------------------------------------------------------------
def compiled_library() -> ctypes.CDLL | None:
    """The compiled core next to this module (built at install), or None."""
    library = load_beside(__file__, "_pool_core")
    if library is not None:
        library.pool_run.restype = ctypes.c_int
    return library


def chosen_core(env: str = ENV, library: Callable[[], ctypes.CDLL | None] | None = None, what: str = "core") -> str:
    """Whether the compiled core runs a pool replay (``compiled``) or the general loop (``off``), from
    ``GREENSLURM_POOL_CORE`` (another core's from its variable ``env``, its library from ``library``).
    ``auto`` without the library: ``off``, said once on stderr (the general loop is much slower)."""
    library = library or compiled_library
    choice = os.environ.get(env, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise InputError(f"{choice!r} is not a core; choose from {', '.join(CHOICES)}", path="environment",
                         field=env)
    if choice == "auto":
        if library() is not None:
            return "compiled"
        warn_missing_once()                 # not built: loud, once, then the general loop (the reference)
        return "off"
    if choice == "compiled" and library() is None:
        raise InputError(f"the compiled {what} is not built (install greenslurm where a C compiler is)",
                         path="environment", field=env)
    return choice


def run_compiled(queue: int, n_nodes: int, submit_s, requested_s, run_for_s, procs, power: PoolPower,
                 start_s: float) -> PoolRun:
    """The core in C (see ``_pool_core.c``): the general loop's results, bit for bit."""
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
             start_s: float, progress: Callable[[int], None] | None = None) -> PoolRun:
    """Run ``queue`` (``fcfs``, ``easy`` or ``conservative``) on a pool of ``n_nodes`` processors with
    the compiled core.

    >>> power = PoolPower(idle_power_w=200.0, delta_per_node_w=150.0, share_per_node_w=250.0)
    >>> run = run_pool("easy", 2, [0.0, 0.0, 1.0], [100.0, 100.0, 10.0], [100.0, 50.0, 10.0], [1, 2, 1],
    ...                power, 0.0)
    >>> run.by_job(run.start_s).tolist()   # the 2-processor job waits for the first; the short one backfills at 1
    [0.0, 100.0, 1.0]
    >>> run.by_job(run.energy_j).tolist()  # 250 W x 100 s; 2 nodes x 250 W x 50 s; 250 W x 10 s
    [25000.0, 25000.0, 2500.0]
    >>> run.rows.tolist()                  # the order they ended: at 11, 100 and 150
    [2, 0, 1]
    """
    run = run_compiled(QUEUE_CODES[queue], n_nodes, submit_s, requested_s, run_for_s, procs, power, start_s)
    if progress is not None:
        progress(len(run.rows))
    return run
