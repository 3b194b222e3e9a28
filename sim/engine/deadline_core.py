"""The deadline queue's core on a processor pool: admission, reservations on nodes, compression and
the energy ledger, in one loop.

A pool of identical single-CPU nodes without memory or GPUs (every SWF log's model) under the
deadline queue (:mod:`greenslurm.sim.engine.deadline_queue`) with Greedy, Threshold or AcceptAll
acceptance, a load rule (``balanced``, ``bestfit``, ``minidle``, ``firstfit``) in the append view
and no power budget is what the replay hands to this core, as it hands FCFS, EASY and conservative
to :mod:`greenslurm.sim.engine.pool_core`.  It makes the same decisions as the general loop's plan
profile, bit for bit:

- a node holds one job at a time, so its plan is its reservations as disjoint intervals
  [start, start + requested time) in time order; its *tail* is the end of its last one (now when it
  has none);
- at submission the job's earliest end is the m-th smallest tail plus its requested time; the
  acceptance policy compares it with a limit worked out before the run (Greedy: the deadline;
  Threshold: the threshold deadline; none: infinity) and the rule chooses among the tails as
  :func:`greenslurm.allocation.placement.choose_append` does (the same sums, the same rounding);
- when a job ends before its requested time, each waiting job, in arrival order, moves to the
  earliest start before its own at which m nodes are free over its requested time, as if it had
  given its own slot back; its nodes are the rule's among those that fit then
  (:func:`greenslurm.allocation.placement.choose_at`).  That earliest start is now or the end of
  some reservation (a start elsewhere only makes a node busy), so only those are tried: a node's
  free gaps [g0, g1) hold the job from t when g0 <= t and t + p <= g1 (the profile's window test);
- the ledger's arithmetic is the processor-pool core's, operation by operation.

The core is compiled C (``_deadline_core.c``): the fast path of the general loop, which is the
reference (the tests hold the two to each other bit for bit); without the library the general
loop runs the replay, and says once that it is slower.  ``GREENSLURM_DEADLINE_CORE`` chooses:
``auto`` (the default: the core when built), ``compiled`` (an error when not built) or ``off``
(the general loop).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from math import inf
from typing import Callable, NamedTuple

import numpy as np

from greenslurm.clustermodel.native import load_beside
from greenslurm.sim.engine import pool_core
from greenslurm.sim.engine.pool_core import PROGRESS_EVERY, PoolPower, PoolRun, check_jobs

ENV = "GREENSLURM_DEADLINE_CORE"
# Rules by how they pick: the smallest tails (balanced), the largest (bestfit, minidle), the lowest index.
BALANCED, BESTFIT, MINIDLE, FIRSTFIT = 0, 1, 2, 3
RULE_CODES = {"balanced": BALANCED, "bestfit": BESTFIT, "minidle": MINIDLE, "firstfit": FIRSTFIT}


@dataclass
class DeadlineRun(PoolRun):
    """A pool run (:class:`greenslurm.sim.engine.pool_core.PoolRun`) and, per job in input order,
    whether it was accepted and the earliest end the acceptance policy saw."""

    accepted: np.ndarray = None          # bool
    finish_s: np.ndarray = None


class DeadlineJobs(NamedTuple):
    """The jobs as the core takes them, in submit order (columns)."""

    submit_s: np.ndarray
    requested_s: np.ndarray               # > 0: a job planned for no time takes the general loop
    run_for_s: np.ndarray
    procs: np.ndarray                     # int64
    deadline_s: np.ndarray                # NaN: no deadline
    limit_s: np.ndarray                   # accepted iff its earliest end <= this (inf: always; -inf: never)


# -- the compiled core ---------------------------------------------------------------------------
def compiled_library() -> ctypes.CDLL | None:
    """The compiled core next to this module (built at install), or None."""
    library = load_beside(__file__, "_deadline_core")
    if library is not None:
        library.deadline_run.restype = ctypes.c_int
    return library


def chosen_core() -> str:
    """Whether the compiled core runs a deadline replay (``compiled``) or the general loop (``off``),
    from ``GREENSLURM_DEADLINE_CORE``."""
    return pool_core.chosen_core(ENV, compiled_library, "deadline core")


STATUS = {-1: (MemoryError, "the compiled deadline core ran out of memory"),
          -2: (RuntimeError, "a reserved node is busy at the reserved start"),
          -3: (RuntimeError, "jobs still waiting after the last event"),
          -4: (RuntimeError, "two reservations overlap on a node"),
          -5: (RuntimeError, "the gap index differs from the node plans")}


def run_compiled(rule: int, n_nodes: int, jobs: DeadlineJobs, power: PoolPower, start_s: float,
                 compress: bool = True, checks: bool = False) -> DeadlineRun:
    """The core in C (see ``_deadline_core.c``): the general loop's results, bit for bit.  With
    ``checks`` the core compares its gap index with its node plans after every change of the plan
    (slow: for tests), and stops with a RuntimeError when they differ."""
    library = compiled_library()
    if library is None:
        raise RuntimeError("the compiled deadline core is not built")
    columns = [np.ascontiguousarray(column, dtype=np.float64) for column in
               (jobs.submit_s, jobs.requested_s, jobs.run_for_s, jobs.deadline_s, jobs.limit_s)]
    size = np.ascontiguousarray(jobs.procs, dtype=np.int64)
    check_jobs(n_nodes, columns[0], columns[1], columns[2], size)
    count = len(size)
    if not len(columns[3]) == len(columns[4]) == count:
        raise ValueError("the job columns differ in length")
    out_rows = np.empty(count, dtype=np.int64)
    out_start, out_end, out_energy = np.empty(count), np.empty(count), np.empty(count)
    out_nodes = np.empty(int(size.sum()), dtype=np.int32)
    out_offsets = np.empty(count + 1, dtype=np.int64)
    points = 2 * count + 1              # one power point at most per start and per end
    times, series_w, series_busy = np.empty(points), np.empty(points), np.empty(points)
    counts = np.zeros(2, dtype=np.int64)            # series length, jobs ended
    scalars = np.zeros(7)
    node_jobs_j, node_cpu_s = np.empty(n_nodes), np.empty(n_nodes)
    jobs_on = np.empty(n_nodes, dtype=np.int64)
    idle_since, idle_node_s = np.empty(n_nodes), np.empty(n_nodes)
    accepted = np.zeros(count, dtype=np.uint8)
    finish_s = np.full(count, np.nan)

    def ptr(a: np.ndarray):
        return a.ctypes.data_as(ctypes.c_void_p)
    status = library.deadline_run(
        ctypes.c_int(rule), ctypes.c_int(1 if compress else 0), ctypes.c_int(1 if checks else 0), ctypes.c_int64(n_nodes), ctypes.c_int64(count),
        *(ptr(column) for column in columns), ptr(size),
        ctypes.c_double(power.idle_power_w), ctypes.c_double(power.delta_per_node_w),
        ctypes.c_double(power.share_per_node_w), ctypes.c_double(start_s),
        ptr(accepted), ptr(finish_s),
        ptr(out_rows), ptr(out_start), ptr(out_end), ptr(out_energy), ptr(out_nodes), ptr(out_offsets),
        ptr(times), ptr(series_w), ptr(series_busy), ptr(counts), ptr(scalars),
        ptr(node_jobs_j), ptr(node_cpu_s), ptr(jobs_on), ptr(idle_since), ptr(idle_node_s))
    if status != 0:
        error, message = STATUS.get(status, (RuntimeError, f"the compiled deadline core failed ({status})"))
        raise error(message)
    points, ended = int(counts[0]), int(counts[1])
    for series in (times, series_w, series_busy):
        series.resize(points, refcheck=False)
    for column in (out_rows, out_start, out_end, out_energy):
        column.resize(ended, refcheck=False)
    out_offsets.resize(ended + 1, refcheck=False)
    out_nodes.resize(int(out_offsets[ended]), refcheck=False)
    return DeadlineRun(
        rows=out_rows, start_s=out_start, end_s=out_end, energy_j=out_energy, node_offsets=out_offsets,
        node_flat=out_nodes, times_s=times, power_w=series_w, busy_cpus=series_busy,
        total_j=float(scalars[0]), jobs_j=float(scalars[1]), peak_power_w=float(scalars[2]),
        power_now_w=float(scalars[3]), busy_cpus_now=float(scalars[4]), last_s=float(scalars[5]),
        node_jobs_j=node_jobs_j, node_cpu_seconds=node_cpu_s, jobs_on_node=jobs_on, idle_since_s=idle_since,
        idle_node_seconds=idle_node_s, accepted=accepted.astype(bool), finish_s=finish_s)


def run_deadline(rule: str, n_nodes: int, jobs: DeadlineJobs, power: PoolPower, start_s: float,
                 compress: bool = True, progress: Callable[[int], None] | None = None) -> DeadlineRun:
    """Run the deadline queue with the load rule ``rule`` on a pool of ``n_nodes`` processors.

    Two nodes; job 0 holds both for 100 s (it ends at 50), job 1 (one node, 10 s) comes at 1 and is
    planned at 100; when job 0 ends early it moves to 50.  Job 2 (deadline 20) cannot end by it:

    >>> power = PoolPower(idle_power_w=200.0, delta_per_node_w=150.0, share_per_node_w=250.0)
    >>> nan = float("nan")
    >>> jobs = DeadlineJobs(np.array([0.0, 1.0, 2.0]), np.array([100.0, 10.0, 5.0]), np.array([50.0, 10.0, 5.0]),
    ...                     np.array([2, 1, 1]), np.array([nan, nan, 20.0]), np.array([inf, inf, 20.0]))
    >>> run = run_deadline("bestfit", 2, jobs, power, 0.0)
    >>> run.by_job(run.start_s).tolist(), run.accepted.tolist(), float(run.finish_s[2])   # 100 + 5 > 20
    ([0.0, 50.0], [True, True, False], 105.0)
    >>> run.by_job(run.energy_j).tolist()       # 2 nodes x 250 W x 50 s; 250 W x 10 s
    [25000.0, 2500.0]
    """
    run = run_compiled(RULE_CODES[rule], n_nodes, jobs, power, start_s, compress)
    if progress is not None:
        progress(len(run.rows))
    return run


# -- the replay's side ------------------------------------------------------------------------------
def acceptance_limits(policy, submit_s: np.ndarray, requested_s: np.ndarray, deadline_s: np.ndarray) -> np.ndarray | None:
    """Per job, the latest earliest end ``policy`` accepts (inf: any; -inf: none, e.g. Threshold's
    slack below its minimum), the same test as its ``decide``; None for a policy the core does not
    know (the general loop runs it).

    >>> from greenslurm.acceptance.policies import Threshold
    >>> acceptance_limits(Threshold(share=0.5), np.array([0.0, 0.0]), np.array([100.0, 100.0]),
    ...                   np.array([200.0, np.nan])).tolist()      # 0 + 100 + 0.5 x (200 - 0 - 100)
    [150.0, inf]
    """
    from greenslurm.acceptance.base import Chain
    from greenslurm.acceptance.policies import AcceptAll, Greedy, Threshold
    policies = policy.policies if type(policy) is Chain else (policy,)
    limit = np.full(len(submit_s), inf)
    submit, requested, deadline = submit_s.tolist(), requested_s.tolist(), deadline_s.tolist()
    for one in policies:
        if type(one) is AcceptAll:
            continue
        if type(one) is Greedy:
            limit = np.fmin(limit, deadline_s)          # NaN (no deadline): accepted
            continue
        if type(one) is not Threshold:
            return None
        out = limit.tolist()
        for j, d in enumerate(deadline):
            if d != d:
                continue
            p, r = requested[j], submit[j]
            if one.min_slack is not None:
                slack = (d - r) / p - 1.0 if p > 0 else inf
                if slack < one.min_slack:
                    out[j] = -inf
                    continue
            if one.share is not None:
                out[j] = min(out[j], min(r + p + one.share * max(d - r - p, 0.0), d))
        limit = np.array(out)
    return limit


def replay_inputs(replay) -> tuple | None:
    """(core, rule, compress, rows, jobs) when this replay's parts are the core's (see the module
    text); None: the general loop runs it."""
    from greenslurm.allocation.placement import FirstFit, lowest_index
    from greenslurm.sim.engine.deadline_queue import DeadlineQueue
    strategy = replay.strategy
    if type(strategy) is not DeadlineQueue or strategy.renewable != "grid" or strategy.backfill:
        return None
    rule = strategy.rule
    if rule.name not in RULE_CODES or (type(rule) is FirstFit and rule.order is not lowest_index):
        return None
    core = chosen_core()
    if core == "off" or not replay._pool_machine():
        return None
    skipped = replay.skipped.copy()
    inputs = _inputs(replay, strategy, core)
    if isinstance(inputs, str):  # the general loop counts the jobs it skips itself
        replay.skipped.clear()
        replay.skipped.update(skipped)
        replay.core_refusal = inputs
        return None
    return core, rule.name, strategy.compress, inputs[0], inputs[1]


def _inputs(replay, strategy, core: str) -> tuple | str:
    """(rows, jobs) of :func:`replay_inputs`, or why the core cannot take the jobs (the user is told)."""
    pool = replay._pool_jobs(core)
    if pool is None:
        return "a job arrives at no finite time, has no time limit or asks no CPU"
    zero = int((pool.requested_s <= 0).sum())
    if zero:                     # a job planned for no time holds nothing in a plan: the general loop
        return f"{zero:,} job{'s' if zero != 1 else ''} with a requested time of 0 s"
    if not _times_keep_every_slot(pool.submit_s, pool.requested_s):
        return "requested times too short for the size of the trace's times (a slot rounds to nothing)"
    table = getattr(replay.ordered, "table", None)
    if table is not None:
        deadline = table.deadline_s[pool.rows] if hasattr(table, "deadline_s") else np.full(len(pool.rows), np.nan)
    else:
        ordered = replay.ordered
        deadline = np.array([np.nan if ordered[i].deadline_s is None else ordered[i].deadline_s
                             for i in pool.rows.tolist()], dtype=float)
    limit = acceptance_limits(strategy.acceptance, pool.submit_s, pool.requested_s, deadline)
    if limit is None:
        return f"the {getattr(strategy.acceptance, 'name', 'chosen')} acceptance policy is not in the core"
    return pool.rows, DeadlineJobs(pool.submit_s, pool.requested_s, pool.run_for_s, pool.procs, deadline, limit)


def _times_keep_every_slot(submit_s: np.ndarray, requested_s: np.ndarray) -> bool:
    """Whether no reserved start t can have t + p == t or an infinite end: the core does not model a
    slot that rounds to nothing (the general loop lets a job wait at that instant on its nodes) nor
    a job that never fits (an infinite earliest end).  Every start is at most the latest arrival
    plus all requested times (a job goes after the plan's tails; compression only moves jobs
    earlier), so H = 2 x (max |submit| + sum of p) bounds |t| with room for the sums' rounding; a
    double's step only grows with the magnitude, so p at least the step at H (``np.spacing``) makes
    t + p at least the next double after t for every start (no tie to round back), and H finite
    means every end t + p <= H is finite.

    >>> _times_keep_every_slot(np.array([0.0, 3e7]), np.array([1.0, 86400.0]))
    True
    >>> _times_keep_every_slot(np.array([1e17]), np.array([1.0]))       # 1e17 + 1 == 1e17
    False
    >>> _times_keep_every_slot(np.array([0.0, 1.0]), np.array([np.inf, 10.0]))
    False
    """
    if len(submit_s) == 0:
        return True
    with np.errstate(over="ignore"):                # a sum past a double's range is inf: declined
        horizon_s = 2.0 * (float(np.abs(submit_s).max()) + float(requested_s.sum()))
    return math.isfinite(horizon_s) and bool((requested_s >= np.spacing(horizon_s)).all())


class _Finished:
    """What an acceptance policy saw of the plan at a job's submission: its earliest end."""

    def __init__(self, now_s: float, finish_s: float) -> None:
        self.now_s, self._finish_s = now_s, finish_s

    def earliest_finish(self, job) -> float:
        return self._finish_s


def run_replay(replay, inputs: tuple):
    """The replay's result from the core (``inputs``: :func:`replay_inputs`), as the general loop gives it."""
    from greenslurm.sim.accounting.result import Rejection, ReplayResult
    core, rule, compress, rows, jobs = inputs
    ledger = replay.ledger
    delta_per_node_w, share_per_node_w = ledger.one_cpu_node_power_w()
    power = PoolPower(idle_power_w=ledger.power_w, delta_per_node_w=delta_per_node_w,
                      share_per_node_w=share_per_node_w)
    progress = None
    if replay.progress is not None:
        total = replay.jobs_total
        progress = lambda done: done % PROGRESS_EVERY == 0 and replay.progress(done, total)  # noqa: E731
    run = run_deadline(rule, replay.cluster.size, jobs, power, ledger.start_s, compress, progress)
    ledger.adopt(run)
    replay.machine.finished_count = len(run.rows)
    strategy = replay.strategy
    ordered = replay.ordered
    for j in np.flatnonzero(~run.accepted).tolist():
        spec = ordered[int(rows[j])]
        decision = strategy.acceptance.decide(spec, _Finished(spec.submit_s, float(run.finish_s[j])))
        strategy.rejected.append(Rejection(spec.job_id, spec.submit_s, decision.policy, decision.reason,
                                           decision.detail, float(jobs.procs[j]), spec.run_for_s, spec.deadline_s))
    return replay.close(ReplayResult.from_columns(
        ordered, rows[run.rows], run.start_s, run.end_s, run.energy_j, run.node_flat, run.node_offsets,
        **replay._result_parts()))
