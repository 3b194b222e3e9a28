"""What the slurm queue's will-run test sees (cons_tres ``_will_run_test`` in select/cons_common/job_test.c):
the groups in which running jobs are freed (:func:`group_ends`), one view of a node set shared by the
jobs of a backfill cycle while nothing starts, ends or moves (:class:`WillRunView`), and whether a job
later in a cycle could still start now (:class:`StartersLeft`)."""

from __future__ import annotations

import ctypes
import math
from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import TYPE_CHECKING

import numpy as np

from greenslurm.clustermodel.native import load_beside, warn_missing_once
from greenslurm.sim.engine.slurm_node_space import NodeSpace, bits_of, mask_of
from greenslurm.sim.machines.machine import PendingJob

if TYPE_CHECKING:
    from greenslurm.sim.engine.slurm_waiting import Waiting

CPU = 0
NEVER = object()                  # a will-run answer: the job never fits on the nodes tested


def slurm_clock_s(trace_s: np.ndarray | float, clock_at_zero_s: float = 0.0,
                  second_s: float = 1.0) -> np.ndarray | float:
    """Trace times as slurmctld's clock shows them: a ``time_t``, whole seconds since the Unix epoch
    (a job's expected end is its start's ``time(NULL)`` plus its limit), in trace seconds.
    ``clock_at_zero_s``: the clock at trace second 0 (0: trace seconds are the clock); ``second_s``:
    one of Slurm's seconds in trace seconds (a workload replayed ``second_s`` times compressed).
    cons_tres groups its running jobs on this clock (:func:`group_ends`), so where a group closes
    depends on the trace's place on it.

    >>> # trace second 0 was Unix time 1795874198.357: an end at 178.9 s is 1795874377 on Slurm's clock
    >>> int(slurm_clock_s(np.array([178.9]), 1795874198.357)[0])
    1795874377
    >>> slurm_clock_s(np.array([0.0, 59.999, 60.0, 61.5]), 0.0).tolist()   # whole seconds, rounded down
    [0.0, 59.0, 60.0, 61.0]
    >>> slurm_clock_s(np.array([90.0, 119.0]), 0.0, 60.0).tolist()          # 60x compressed: minutes
    [60.0, 60.0]
    >>> slurm_clock_s(178.9, 1795874198.357)       # one time (a float): a float, the same arithmetic
    1795874377.0
    """
    # (a nanosecond's margin: an end that is a whole second in exact arithmetic stays on it)
    if isinstance(trace_s, float):
        # the same operations on one double (math.floor's int is that double's floor, exactly)
        seconds = (trace_s + clock_at_zero_s) / second_s + 1e-9
        if math.isfinite(seconds):
            return math.floor(seconds) * second_s
    return np.floor((np.asarray(trace_s, dtype=float) + clock_at_zero_s) / second_s + 1e-9) * second_s


def group_ends(ends: list[float], window_s: float, overlaps: list[bool] | None = None) -> list[tuple[int, int]]:
    """How cons_tres's will-run test (``_will_run_test`` in select/cons_common/job_test.c) frees
    the running jobs, sorted by end, in groups: per group (the position after it in the whole
    list, the last job it freed).  Only jobs on nodes the pending job may use (``overlaps``; None:
    all) are freed, but a group's end is decided by the next job of the *whole* list: after each
    freed job Slurm peeks at the next one and closes the group if it ends after E + window, where
    E is the first freed job's end rounded up to the next multiple of the window (a fixed
    barrier).  A skipped job is not peeked past: the job after it joins the group whatever its
    end.  The window then doubles (at least once) until the next job of the list ends by
    E + window.  The pending job is tested after each group; its start is the group's last freed
    job's end.

    >>> # E = 30; window 30: ends <= 60 (10, 20); doubled to 60: <= 90 (70); 120: <= 150 (100);
    >>> # 240 is not enough for 500 (> 270), 480 is: <= 510 (500)
    >>> group_ends([10.0, 20.0, 70.0, 100.0, 500.0], 30.0)
    [(2, 1), (3, 2), (4, 3), (5, 4)]
    >>> # the job ending at 20 is on other nodes: after 10 Slurm peeks at it (20 <= 60), skips
    >>> # it and frees the job ending at 300 in the same group
    >>> group_ends([10.0, 20.0, 300.0], 30.0, [True, False, True])
    [(3, 2)]
    >>> # the job ending at 100 is on other nodes and closes the first group (100 > 60)
    >>> group_ends([10.0, 100.0, 110.0], 30.0, [True, False, True])
    [(1, 0), (3, 2)]
    >>> group_ends([], 30.0)
    []
    """
    return list(iter_group_ends(ends, window_s, overlaps))


def iter_group_ends(ends: list[float], window_s: float, overlaps: list[bool] | None = None):
    """The groups of :func:`group_ends` one at a time (the will-run test stops at the first that
    lets the job start)."""
    count = len(ends)
    flags = [True] * count if overlaps is None else overlaps
    barrier = None
    window = window_s
    i = 0
    more = True
    while more:
        last = -1
        while True:
            if i >= count:
                more = False
                break
            j = i
            i += 1
            if not flags[j]:
                continue                      # on none of the usable nodes: skipped
            if barrier is None:
                barrier = ends[j] + (window_s - math.fmod(ends[j], window_s))
            last = j
            if i >= count:
                more = False
                break
            if ends[i] > barrier + window:    # the next job of the whole list closes the group
                break
        if last < 0:
            break
        window *= 2
        while i < count and ends[i] > barrier + window:
            window *= 2
        yield i, last


def running_index(pairs: list[tuple[float, int, PendingJob]], width: int) -> tuple:
    """The running jobs, as (expected end, index, job) sorted, flattened for array tests: their ends (an
    array and a list), per (job, node) entry the job's row, the node and what it holds there (``width``
    resources), where each job's entries begin (job r's are [offsets[r], offsets[r + 1])), and the jobs'
    indices.

    >>> from types import SimpleNamespace as Job
    >>> a = Job(node_indices=np.array([0, 2]), demand=np.array([[2.0], [1.0]]))    # laid out unevenly
    >>> b = Job(node_indices=np.array([1]), demand=np.array([4.0]))
    >>> ends, end_list, owner, nodes, held, offsets, indices = running_index([(10.0, 5, a), (20.0, 3, b)], 1)
    >>> end_list, owner.tolist(), nodes.tolist(), held[:, CPU].tolist(), offsets, indices.tolist()
    ([10.0, 20.0], [0, 0, 1], [0, 2, 1], [2.0, 1.0, 4.0], [0, 2, 3], [5, 3])
    """
    ends = np.array([end for end, _, _ in pairs], dtype=float)
    counts = [len(job.node_indices) for _, _, job in pairs]
    if pairs:
        owner = np.repeat(np.arange(len(pairs)), counts)
        nodes = np.concatenate([job.node_indices for _, _, job in pairs])
        # (a job laid out unevenly holds one row per node already)
        held = np.concatenate([job.demand if job.demand.ndim == 2 else np.broadcast_to(job.demand, (count, width))
                               for count, (_, _, job) in zip(counts, pairs)])
    else:
        owner, nodes, held = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, width))
    indices = np.array([index for _, index, _ in pairs], dtype=np.int64)
    return ends, ends.tolist(), owner, nodes, held, list(accumulate(counts, initial=0)), indices


class StartersLeft:
    """Whether a job from some position of a backfill cycle on could still start now.  A job starts
    in a cycle only on nodes free now and not reserved over [now, now + its limit] (the plan's walk
    from now): if the CPUs free on those nodes are fewer than it asks, it cannot.  Once no later job
    passes that test, the rest of the cycle would only plan reservations that hold back jobs which
    cannot start anyway, and the cycle can stop with the same starts.  Starts and reservations only
    take nodes away within a cycle, so a job that fails the test fails it to the cycle's end: one
    job at a time is kept as the witness that some job still could, and tested again after each
    change."""

    __slots__ = ("_ordered", "_space", "_now_s", "_nodes_of", "_cpus", "_cpu_array", "_cpus_total", "_free_bits",
                 "_witness", "_tested_at", "_changes", "_counted")

    def __init__(self, ordered: list[Waiting], space: NodeSpace, now_s: float, free_cpus: np.ndarray, nodes_of) -> None:
        self._ordered, self._space, self._now_s, self._nodes_of = ordered, space, now_s, nodes_of
        self._witness, self._tested_at, self._changes, self._counted = 0, -1, 0, 0
        self.free_changed(free_cpus)

    def free_changed(self, free_cpus: np.ndarray) -> None:
        """A job started: ``free_cpus`` per node now (-inf on nodes that cannot be allocated)."""
        has = free_cpus > 0
        self._cpu_array = np.where(has, free_cpus, 0.0)
        self._cpus = self._cpu_array.tolist()
        self._cpus_total = float(self._cpu_array.sum())
        self._free_bits = bits_of(has)
        self._changes += 1

    def plan_changed(self, nodes: int) -> None:
        """``nodes`` (a node set) were reserved: the witness is tested again only if it counted one
        of them (a reservation elsewhere leaves the nodes it counted, and so its CPUs, as they were)."""
        if nodes & self._counted:
            self._changes += 1

    def any_from(self, position: int) -> bool:
        if self._witness < position:
            self._witness, self._tested_at = position, -1
        ordered = self._ordered
        while self._witness < len(ordered):
            if self._tested_at == self._changes or self._could_start(ordered[self._witness].job):
                self._tested_at = self._changes
                return True
            self._witness, self._tested_at = self._witness + 1, -1
        return False

    def _could_start(self, job: PendingJob) -> bool:
        """Whether ``job`` passes the test; when it does, the nodes whose CPUs it counted are kept."""
        # (a margin far wider than the placements' rounding: the test may only ever say "could")
        if self._cpus_total < job.cpus_total - 1e-6:
            return False                  # not even every free CPU would do
        nodes = self._space.available_bits(self._now_s, self._now_s + job.requested_s, self._nodes_of(job)) & self._free_bits
        self._counted = nodes
        cpus, have = self._cpus, 0.0
        if nodes.bit_count() > 64:
            have = float(self._cpu_array[mask_of(nodes, len(cpus))].sum())
            nodes = 0
        while nodes:
            low = nodes & -nodes
            have += cpus[low.bit_length() - 1]
            nodes ^= low
        return have >= job.cpus_total - 1e-6


class WillRunView:
    """What the will-run test of every job sees on one set of usable nodes while nothing starts,
    ends or moves (the answers' lifetime): the free resources there (-inf elsewhere), per running
    job (by expected end) the CPUs there once it and those before it are freed, the groups in which
    cons_tres frees them (:func:`iter_group_ends`, only the jobs holding some of the nodes), and
    the free resources after each group, made when first asked for.  Its arrays are read-only:
    every job of the cycle on these nodes reads the same ones."""

    __slots__ = ("free", "spread_cpus_now", "end_list", "groups", "_cuts", "_more", "_nodes", "_held", "_take",
                 "_offsets", "_state_cuts", "_states", "_usable", "_running", "_window_s", "_enough", "_indexed", "_clock")

    def __init__(self, usable: np.ndarray, free_now: np.ndarray, running: tuple, window_s: float,
                 clock_at_zero_s: float = 0.0, clock_second_s: float = 1.0) -> None:
        free = np.where(usable[:, None], free_now, -np.inf)
        free.flags.writeable = False
        self.free = free
        cpus = free[:, CPU]
        # what Slurm's spread node choice counts (spread_consecutive: nodes with a free CPU)
        self.spread_cpus_now = float(np.where(cpus >= 1, cpus, 0.0).sum())
        self.end_list = running[1]
        self.groups: list[tuple[int, int]] = []                 # (cut, last job freed), see group_ends
        self._cuts: list[int] = []
        self._state_cuts, self._states = [0], [free]              # jobs freed, free after them
        # what the running jobs give back is indexed when first asked for (a job that fits now
        # needs none of it)
        self._usable, self._running, self._window_s = usable, running, window_s
        self._clock = (clock_at_zero_s, clock_second_s)
        self._enough = None
        self._indexed = False
        self._more = iter(())

    @property
    def enough(self) -> np.ndarray | None:
        """Per running job (by expected end), the CPUs on the usable nodes once it and those before
        it are freed (None: no job runs)."""
        if not self._indexed:
            self._index()
        return self._enough

    def _index(self) -> None:
        self._indexed = True
        ends, end_list, owner, nodes, held, offsets = self._running
        if not len(ends):
            return
        usable, free = self._usable, self.free
        on_usable = usable[nodes]
        count = len(ends)
        owner_on = owner[on_usable]
        # CPUs each job gives back on usable nodes; with what is free, the CPUs once it is freed
        gives = np.bincount(owner_on, weights=held[on_usable, CPU], minlength=count)
        self._enough = float(free[usable, CPU].sum()) + np.cumsum(gives)
        touches = np.bincount(owner_on, minlength=count) > 0     # jobs holding usable nodes
        # Slurm groups its jobs by their end on its own clock (whole seconds), not by trace seconds
        clock_ends = slurm_clock_s(ends, *self._clock).tolist()
        self._more = iter_group_ends(clock_ends, self._window_s, touches.tolist())
        self._nodes, self._held, self._take, self._offsets = nodes, held, on_usable, offsets

    def group(self, index: int) -> bool:
        """Whether group ``index`` exists (made from the running jobs when first asked for)."""
        if not self._indexed:
            self._index()
        groups = self.groups
        while len(groups) <= index:
            found = next(self._more, None)
            if found is None:
                return False
            groups.append(found)
            self._cuts.append(found[0])
        return True

    def first_group_past(self, job_index: int) -> int | None:
        """The first group that frees running job ``job_index`` or a later one (None: none)."""
        i = bisect_left(self._cuts, job_index + 1)         # cuts grow: the first past job_index
        while i == len(self.groups):
            if not self.group(i):
                return None
            if self._cuts[i] > job_index:
                break
            i += 1
        return i

    def free_after(self, index: int) -> np.ndarray:
        """The free resources once the groups up to ``index`` are freed: what the running jobs
        before the group's cut hold on the usable nodes comes back, added job by job in order (as
        one ``np.add.at`` from the last state made, the same sums in the same order)."""
        cut = self.groups[index][0]
        at = bisect_right(self._state_cuts, cut) - 1
        freed, base = self._state_cuts[at], self._states[at]
        if freed == cut:
            return base
        free = base.copy()
        begin, stop = self._offsets[freed], self._offsets[cut]
        take = self._take[begin:stop]
        np.add.at(free, self._nodes[begin:stop][take], self._held[begin:stop][take])
        free.flags.writeable = False
        self._state_cuts.insert(at + 1, cut)
        self._states.insert(at + 1, free)
        return free


class CompiledSpreadWillRun:
    """The will-run test of a job Slurm spreads (CPUs only, no node cap) run compiled
    (``_will_run.c``), on one state of the free CPUs and the running jobs (the lifetime of the
    views): the same answers as :class:`WillRunView` and Slurm's spread node choice, which stay the
    reference and answer what the compiled path leaves to them (counts that are not whole)."""

    __slots__ = ("_library", "_free", "_ends", "_offsets", "_entry_nodes", "_entry_cpus", "_size", "_bytes", "_count",
                 "_window_s", "_usable", "_work", "_in_map", "_nodes", "_cpus", "_node_bits", "_last", "_addresses",
                 "end_list", "_trace_ends")

    def __init__(self, library, free_cpus: np.ndarray, running: tuple, window_s: float,
                 before: CompiledSpreadWillRun | None = None, clock_at_zero_s: float = 0.0,
                 clock_second_s: float = 1.0) -> None:
        ends, end_list, _, nodes, held, offsets = running
        self._library = library
        self._free = np.ascontiguousarray(free_cpus, dtype=np.float64)
        # the groups close on slurmctld's clock (slurm_clock_s), as the reference's; the answer's
        # time is the caller's (the job's end in trace seconds)
        self._ends = np.ascontiguousarray(slurm_clock_s(ends, clock_at_zero_s, clock_second_s), dtype=np.float64)
        self.end_list = end_list
        self._trace_ends = np.ascontiguousarray(ends, dtype=np.float64)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._entry_nodes = np.ascontiguousarray(nodes, dtype=np.int64)
        self._entry_cpus = np.ascontiguousarray(held[:, CPU], dtype=np.float64)
        size = self._size = len(self._free)
        self._bytes = (size + 7) // 8
        self._count = len(self._ends)
        self._window_s = float(window_s)
        inputs = tuple(array.ctypes.data for array in (self._free, self._ends, self._offsets, self._entry_nodes,
                                                       self._entry_cpus))
        if before is not None and before._size == size:
            # the room of the test before (same node count): nothing in it outlives a call
            self._usable, self._work, self._in_map = before._usable, before._work, before._in_map
            self._nodes, self._cpus, self._node_bits, self._last = before._nodes, before._cpus, before._node_bits, before._last
            self._addresses = inputs + before._addresses[5:]
            return
        self._usable = np.empty(size, dtype=np.uint8)
        self._work = np.empty(size, dtype=np.float64)
        self._in_map = np.empty(size, dtype=np.uint8)
        self._nodes = np.empty(size, dtype=np.int64)
        self._cpus = np.empty(size, dtype=np.float64)
        self._node_bits = ctypes.create_string_buffer(self._bytes)
        self._last = ctypes.c_int64(0)
        self._addresses = inputs + tuple(array.ctypes.data for array in (
            self._usable, self._work, self._in_map, self._nodes, self._cpus)) + (
            ctypes.addressof(self._node_bits), ctypes.addressof(self._last))

    def inputs(self) -> tuple:
        """Its state as the compiled backfill cycle reads it, as addresses of arrays this object keeps
        alive: the free CPUs, the running jobs' ends on slurmctld's clock, their ends in trace seconds,
        how many run, where each job's entries begin, the entries' nodes and CPUs."""
        free, ends, offsets, entry_nodes, entry_cpus = self._addresses[:5]
        return free, ends, self._trace_ends.ctypes.data, self._count, offsets, entry_nodes, entry_cpus

    def answer(self, usable: int, cpus: float, try_now: bool = True):
        """For a job asking ``cpus`` on the ``usable`` nodes (a node set, see
        :mod:`~greenslurm.sim.engine.slurm_node_space`): (None, nodes) when it fits now, (running job
        whose end it waits for, nodes) when it fits once that job's group is freed (its expected end:
        ``end_list[job]``), NEVER, or None when the compiled path leaves the answer to the reference.
        The nodes are a node set.  ``try_now``: False when the caller found that the job does not fit now."""
        free, ends, offsets, entry_nodes, entry_cpus, usable_at, work, in_map, nodes, spread, node_bits, last = \
            self._addresses
        count = self._library.will_run_spread(free, usable.to_bytes(self._bytes, "little"), self._size, float(cpus),
                                              ends, self._count, offsets, entry_nodes, entry_cpus, self._window_s,
                                              int(try_now), usable_at, work, in_map, nodes, spread, node_bits, last)
        if count == 0:
            return NEVER
        if count > 0:
            last = self._last.value
            return (None if last < 0 else last), int.from_bytes(self._node_bits.raw, "little")
        if count == -2:
            raise MemoryError("the slurm queue's will-run test: out of memory")
        return None


def compiled_will_run_library():
    """The compiled will-run test (built at install), or None (looked up once; said once on stderr:
    every job's test then runs the reference, slower)."""
    if not _LIBRARY:
        library = load_beside(__file__, "_will_run")
        if library is None:
            warn_missing_once()
        else:
            library.will_run_spread.restype = ctypes.c_int64
            library.will_run_spread.argtypes = (
                ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_int64,
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double, ctypes.c_int, ctypes.c_void_p,
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        _LIBRARY.append(library)
    return _LIBRARY[0]


_LIBRARY: list = []
