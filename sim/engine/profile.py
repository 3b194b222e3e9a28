"""The plan profile: free resources per node as a step function of future time.

Breakpoint times live in a ``sortedcontainers.SortedList``; beside them a numpy array
``free[k, node, resource]`` holds what is free on each node from breakpoint k until the next
(the last breakpoint holds until forever).  It answers "earliest start >= t at which ``nodes``
nodes each hold ``demand`` for ``duration``", vectorised over candidate start times:

a node fits a window iff it fits at every breakpoint in the window, so with
``bad[k, node] = not fits(free[k, node])`` and its running sum ``B`` along time, a node fits the
window of breakpoints [i, j) iff ``B[j] - B[i] == 0``.  Counting fitting nodes for every candidate
start i at once is one array expression.

>>> import numpy as np
>>> p = PlanProfile(np.array([[4.0, 0, 0], [4.0, 0, 0]]), now_s=0.0)
>>> p.reserve(0.0, 10.0, np.array([0, 1]), np.array([3.0, 0, 0]))   # 3 CPUs on both until t=10
>>> p.earliest_start(2, np.array([2.0, 0, 0]), duration_s=5.0, after_s=0.0)
(10.0, array([0, 1]))
>>> p.earliest_start(2, np.array([1.0, 0, 0]), duration_s=5.0, after_s=0.0)   # 1 CPU left now
(0.0, array([0, 1]))
"""

from __future__ import annotations

import numpy as np
from sortedcontainers import SortedList

from greenslurm.sim.machines.machine import Machine, NodeChooser, PendingJob, first_fit


def nodes_allowed(machine: Machine, job: PendingJob) -> np.ndarray | None:
    """Per node: may ``job`` ever run there, beyond the amounts a plan counts?  A plan counts GPUs
    as amounts per node and knows no GPU models: a job asking for a model may only be planned on
    nodes with that model.  None: every node (no model asked)."""
    task, gpus = job.task, machine.gpus
    if task is None or gpus is None or task.num_gpu == 0 or not task.gpu_spec:
        return None
    nodes = gpus.nodes
    return nodes.model_allowed(task.gpu_spec)[nodes.model_index] & (nodes.gpu_count > 0)


class PlanProfile:
    def __init__(self, free_now: np.ndarray, now_s: float, chooser: NodeChooser = first_fit) -> None:
        self.times = SortedList([now_s])
        self.free = free_now[np.newaxis].astype(float).copy()
        self.free_cpus = self.free[:, :, 0].sum(axis=1)       # [k]: free CPUs over all nodes
        self.chooser = chooser

    # -- structure -------------------------------------------------------------------------------
    def _ensure_breakpoint(self, t_s: float) -> int:
        """Index of a breakpoint at ``t_s``, splitting the step that contains it if needed."""
        i = self.times.bisect_left(t_s)
        if i < len(self.times) and self.times[i] == t_s:
            return i
        if i == 0:
            raise ValueError(f"time {t_s} is before the profile's start {self.times[0]}")
        self.times.add(t_s)
        self.free = np.insert(self.free, i, self.free[i - 1], axis=0)
        self.free_cpus = np.insert(self.free_cpus, i, self.free_cpus[i - 1])
        return i

    def advance(self, now_s: float) -> None:
        """Forget the past: the profile starts at ``now_s``."""
        i = self.times.bisect_right(now_s) - 1
        if i > 0:
            del self.times[:i]
            self.free = self.free[i:]
            self.free_cpus = self.free_cpus[i:]
        if self.times[0] < now_s:
            self.times.pop(0)
            self.times.add(now_s)
        self.compact()

    def _span(self, start_s: float, end_s: float) -> tuple[int, int]:
        i = self._ensure_breakpoint(start_s)
        j = self._ensure_breakpoint(end_s) if end_s != float("inf") else len(self.times)
        return i, j

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None:
        """Take ``demand`` on each of ``nodes`` during [start_s, end_s)."""
        i, j = self._span(start_s, end_s)
        self.free[i:j, nodes] -= demand
        self.free_cpus[i:j] -= demand[0] * len(nodes)

    def release(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None:
        """Give back ``demand`` on each of ``nodes`` during [start_s, end_s).  Breakpoints that no
        longer change anything stay until :meth:`compact` (called by :meth:`advance`)."""
        i, j = self._span(start_s, end_s)
        self.free[i:j, nodes] += demand
        self.free_cpus[i:j] += demand[0] * len(nodes)

    def compact(self) -> None:
        """Drop breakpoints whose step carries the same free resources as the step before."""
        if len(self.times) < 2:
            return
        same = (self.free[1:] == self.free[:-1]).all(axis=(1, 2))
        if same.any():
            keep = np.concatenate(([True], ~same))
            self.free = self.free[keep]
            self.free_cpus = self.free_cpus[keep]
            self.times = SortedList(np.fromiter(self.times, dtype=float)[keep].tolist())

    def may_start_before(self, cpus_total: float, after_s: float, before_s: float) -> bool:
        """A cheap necessary test for an earlier start: at some breakpoint in [after_s, before_s)
        enough CPUs are free over the whole cluster (a job must at least fit where it starts)."""
        first = max(self.times.bisect_right(after_s) - 1, 0)
        last = self.times.bisect_left(before_s)
        return bool(last > first and (self.free_cpus[first:last] >= cpus_total).any())

    # -- the query -------------------------------------------------------------------------------
    def earliest_start(self, nodes: int, demand: np.ndarray, duration_s: float, after_s: float,
                       before_s: float = np.inf, chooser: NodeChooser | None = None,
                       allowed: np.ndarray | None = None) -> tuple[float, np.ndarray] | None:
        """Earliest breakpoint time in [``after_s``, ``before_s``) at which ``nodes`` nodes hold
        ``demand`` for ``duration_s``; with the nodes ``chooser`` (default: the profile's) picks
        among those free over the whole window.  ``allowed``: a mask of the nodes that may be
        used at all (default: all).  None if there is no such time."""
        times = np.fromiter(self.times, dtype=float, count=len(self.times))
        first = max(int(np.searchsorted(times, after_s, side="right")) - 1, 0)
        # breakpoints that can matter: those before the last candidate's window ends
        last = len(times) if before_s == np.inf else int(np.searchsorted(times, before_s + duration_s, side="left"))
        last = max(last, first + 1)
        times = times[first:last]
        starts = times.copy()
        starts[0] = max(starts[0], after_s)
        candidates = np.flatnonzero(starts < before_s)
        # window of candidate i: breakpoints i .. j-1 with times < start_i + duration
        ends = np.searchsorted(times, starts[candidates] + duration_s, side="left")
        ends = np.minimum(np.maximum(ends, candidates + 1), len(times))   # a window holds its start
        # First a cheap filter on the cluster-wide CPU count: a window can only hold the job if
        # enough CPUs are free over the whole cluster at every breakpoint in it.
        short = np.zeros(len(times) + 1, dtype=np.int32)
        np.cumsum(self.free_cpus[first:last] < demand[0] * nodes - 1e-9, out=short[1:])
        keep = short[ends] == short[candidates]
        candidates, ends = candidates[keep], ends[keep]
        if candidates.size == 0:
            return None
        lo, hi = first + int(candidates[0]), first + int(ends.max())
        if demand[1] == 0 and demand[2] == 0:       # memory and GPUs never go negative
            fits = self.free[lo:hi, :, 0] >= demand[0]
        else:
            fits = (self.free[lo:hi] >= demand).all(axis=2)                  # [k, node]
        if allowed is not None:
            fits &= allowed
        bad_running = np.zeros((fits.shape[0] + 1, fits.shape[1]), dtype=np.int32)
        np.cumsum(~fits, axis=0, out=bad_running[1:])
        offset = int(candidates[0])
        window_bad = bad_running[ends - offset] - bad_running[candidates - offset]
        counts = (window_bad == 0).sum(axis=1)
        ok = np.flatnonzero(counts >= nodes)
        if ok.size == 0:
            return None
        i = int(ok[0])
        return float(starts[candidates[i]]), (chooser or self.chooser)(np.flatnonzero(window_bad[i] == 0), nodes)

    def free_at(self, t_s: float) -> np.ndarray:
        i = self.times.bisect_right(t_s) - 1
        return self.free[max(i, 0)]

    def _check(self, capacity: np.ndarray | None = None) -> None:
        """Invariants: times sorted and aligned with the array; nothing below zero or above capacity."""
        self.times._check()
        assert len(self.times) == self.free.shape[0] == self.free_cpus.shape[0]
        assert np.allclose(self.free_cpus, self.free[:, :, 0].sum(axis=1))
        assert (self.free >= -1e-9).all(), "a reservation over-allocates a node"
        if capacity is not None:
            assert (self.free <= capacity + 1e-9).all(), "more free than the node has"
