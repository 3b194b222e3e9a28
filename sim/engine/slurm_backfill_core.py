"""The slurm queue's backfill cycle run compiled (``_backfill_cycle.c``): the fast path of
:meth:`SlurmQueue._backfill_cycle <greenslurm.sim.engine.slurm_queue.SlurmQueue._backfill_cycle>`, which
is the reference (tests hold the two to the same starts, nodes and counters).

It takes a cycle when every waiting job's will-run test runs compiled (a job Slurm spreads, asking CPUs
only, under no node cap: ``SlurmQueue._compiles``), on a plain machine or one with Slurm's power saving
(``SlurmPowerMachine`` itself, whose node changes the queue counts: ``node_version``; no co-location)
and under no accounting limits, with whole CPU counts everywhere (-inf on nodes being powered down);
any other cycle is left to the reference whole: a subclass of the power-saving machine, accounting
limits, a job naming its nodes, holding memory or under a node cap, a count not whole.
With power saving the core does what the reference does: the plan leaves out nodes being powered down,
the early stops wait while a reservation could still leave an idle node PLANNED, and the PLANNED flag
comes back to the queue (``SlurmQueue._planned_idle``); a will-run answer "now" while some node is
powered down comes back here for its nodes (the node tiers, ``SlurmQueue._nodes_by_tiers``), kept by
the core as the reference keeps it, and every start is placed by ``SlurmQueue._place_now``.
Per job, what the cycle reads is settled once in Python when the job is first seen (its CPUs, limit,
partition's nodes, user, partition, eligibility time) and kept in a table by job index; per cycle the
core gets the queue's order as job indices (kept by the queue's ``WaitingOrder``).  The core keeps the
running jobs and free CPUs between cycles: the starts and ends since it was last in step are given
to it, and the state is made afresh only after anything else changed (a release, a move).  The plan, the early stops, ``bf_max_job_*`` and the
try-later loop run in C; a job that can start now comes back here, is started as the reference starts
it (on the nodes the core's spread node choice gives where it fits on the CPUs free now, the reference's
choice there; by ``SlurmQueue._place_now`` where its start is a running job's expected end that is now:
a job of time limit 0 started this second, whose end event comes after the pass), and the
cycle resumes in C with the new free CPUs and running jobs.  ``SlurmQueue.compiled_cycle``
(or ``compiled_will_run``) False runs every cycle in the reference.
"""

from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING

import numpy as np

from greenslurm.clustermodel.native import load_beside, warn_missing_once
from greenslurm.sim.engine.slurm_node_space import mask_of_bytes
from greenslurm.sim.engine.slurm_waiting import NoLimits
from greenslurm.sim.engine.slurm_will_run import slurm_clock_s
from greenslurm.sim.machines.machine import Machine

if TYPE_CHECKING:
    from greenslurm.sim.engine.slurm_queue import SlurmQueue

CPU = 0
# a job's row in the table (the C enum's order)
# (SEEN: the job's will-run key numbered from 1, SlurmQueue._job_key; 0 while the job is not seen)
CPUS, REQUESTED, PART_ROW, USER, PARTITION, ELIGIBLE, COMPILES, SEEN = range(8)
COLUMNS = 8
WHOLE_LIMIT = 2.0 ** 40           # the compiled will-run test's whole counts are below it
DONE, START, UNSEEN, LEFT, NODES, NOT_WHOLE, NO_MEMORY = 0, 1, 2, 3, 4, -1, -2


def whole_counts(values: np.ndarray) -> bool:
    """Whether every count is a whole number in [0, 2^40) (the compiled path's sums are then exact).

    >>> whole_counts(np.array([0.0, 4.0, 32.0])), whole_counts(np.array([1.5])), whole_counts(np.array([-1.0]))
    (True, False, False)
    """
    return bool(np.all((values == np.floor(values)) & (values >= 0) & (values < WHOLE_LIMIT)))


class CompiledBackfill:
    """One queue's compiled cycle: its C state (plan, witness, counters) and the jobs' table."""

    def __init__(self, queue: SlurmQueue, library) -> None:
        self.queue = queue
        self.library = library
        size = queue.machine.cluster.size
        self.size = size
        self.words = max((size + 63) // 64, 1)
        self.node_cpus = np.ascontiguousarray(queue._node_cpus, dtype=np.float64)
        self.nodes_whole = whole_counts(self.node_cpus)
        self.table = np.zeros((64, COLUMNS))
        self.parts = np.zeros((1, self.words), dtype=np.uint64)
        self.parts[0] = self._words((1 << size) - 1)            # row 0: every node
        self.part_rows: dict[int, int] = {(1 << size) - 1: 0}
        self.users: dict[str, int] = {}
        self.partitions: dict[str, int] = {}
        self.keys: dict[tuple, int] = {}        # the jobs' will-run keys (SlurmQueue._job_key), numbered
        self.usable_out = np.zeros(self.words, dtype=np.uint64)
        self._usable_bytes = self.usable_out.view(np.uint8)      # the same words, as bytes
        self.position = ctypes.c_int64(0)
        self._out = (ctypes.byref(self.position), self.usable_out.ctypes.data)
        # cycle_counts: tried, started, stopped early, nevers, a reservation left an idle node PLANNED
        self.counts = np.zeros(5, dtype=np.int64)
        # cycle_start_nodes: the nodes and CPUs of a job that fits now, and their addresses
        self.start_nodes = np.zeros(max(size, 1), dtype=np.int64)
        self.start_cpus = np.zeros(max(size, 1))
        self._start_addresses = (self.start_nodes.ctypes.data, self.start_cpus.ctypes.data)
        self._width = queue.machine.free.shape[1]
        # (an array's address is looked up once: numpy's .ctypes makes a Python object per look, some ten
        # thousand instructions, more than a cycle's glue)
        self._positions = np.zeros(64, dtype=np.int64)          # cycle_unseen's answer, and its address
        self._positions_address = self._positions.ctypes.data
        self._counts_address = self.counts.ctypes.data
        # the queue's order as the core reads it: copied into this room (its address kept while it has
        # room) when the queue's order array is another than the one last copied
        self._order_room = np.zeros(64, dtype=np.int64)
        self._order_room_address = self._order_room.ctypes.data
        self._order_copied: np.ndarray | None = None
        self.handle = library.cycle_new(size, self.node_cpus.ctypes.data)
        if not self.handle:
            raise MemoryError("the slurm queue's backfill cycle: out of memory")
        self._table_addresses: tuple | None = None
        self.cycles = 0                 # cycles run here (the others were the reference's)
        self.catch_ups = 0              # states brought up to date by the starts and ends alone (_caught_up)
        # the jobs the cycle would start placed by the core (they fit now) and by the reference (their start
        # a running job's expected end that is now: a job of time limit 0 started this second)
        self.placed_by_core = self.placed_by_reference = 0
        self.tier_choices = 0           # will-run answers "now" whose nodes the node tiers chose (power saving)
        # with power saving: the plan's nodes, the nodes a reservation could leave PLANNED and those running no
        # job now, as the core reads them (cycle_power, cycle_idle)
        self._available = np.zeros(self.words, dtype=np.uint64)
        self._idle_bits = np.zeros(self.words, dtype=np.uint64)
        self._idle_now = np.zeros(self.words, dtype=np.uint64)
        self._state = None           # the compiled will-run test whose arrays the core reads
        # the queue's will-run stamp when the core's state (free CPUs, running jobs, kept answers) was last
        # made or updated by a start: while it holds, the next cycle's state is the core's own
        self._synced = None
        self._running: set[int] = set()     # the core's running jobs' indices while it is in step

    @classmethod
    def of(cls, queue: SlurmQueue) -> CompiledBackfill | None:
        """The compiled cycle of ``queue`` (None where the library is not built: said once on stderr)."""
        library = compiled_backfill_library()
        return None if library is None else cls(queue, library)

    def __del__(self) -> None:
        if getattr(self, "handle", None):
            self.library.cycle_free(self.handle)
            self.handle = None

    def _words(self, bits: int) -> np.ndarray:
        return np.frombuffer(bits.to_bytes(self.words * 8, "little"), dtype=np.uint64)

    def takes(self) -> bool:
        """Whether the queue's settings leave its cycles to this path (the jobs are checked per cycle)."""
        queue = self.queue
        # (a plain machine, or Slurm's power saving's whose changes the queue counts (node_version): a start
        # takes exactly its CPUs from its nodes' free ones, as the core does)
        power = queue._power
        machine_taken = (type(queue.machine) is Machine and power is None) or (
            power is queue.machine and power.node_version() is not None)
        return (queue.compiled_cycle and queue.compiled_will_run and machine_taken and self.nodes_whole
                and type(queue.limits) is NoLimits)

    def _see(self, waiting) -> None:
        """The row of a job first seen in a cycle: what the cycle reads of it, fixed while it waits."""
        queue, job = self.queue, waiting.job
        if job.index >= len(self.table):
            grown = np.zeros((max(2 * len(self.table), job.index + 1), COLUMNS))
            grown[:len(self.table)] = self.table
            self.table = grown
            self._table_addresses = None
        bits = queue._bits_of_allowed(job.allowed) if job.allowed is not None else (1 << self.size) - 1
        row = self.part_rows.get(bits)
        if row is None:
            row = self.part_rows[bits] = len(self.parts)
            self.parts = np.vstack([self.parts, self._words(bits)[None, :]])
            self._table_addresses = None
        cpus = float(job.cpus_total)
        # (its will-run key first: kept for the waiting job, it is what _compiles reads)
        key = self.keys.setdefault(queue._job_key(job), len(self.keys) + 1)
        compiles = queue._compiles(job) and 0 < cpus < WHOLE_LIMIT and cpus == math.floor(cpus)
        self.table[job.index] = (cpus, job.requested_s, row, self.users.setdefault(job.job.user, len(self.users)),
                                 self.partitions.setdefault(waiting.partition, len(self.partitions)),
                                 waiting.eligible_s, compiles, key)

    def _unseen(self, order: np.ndarray) -> list[int]:
        """The positions in ``order`` (job indices) of the jobs whose row is not filled in yet (the core's
        test of cycle_begin, in one pass)."""
        if len(self._positions) < len(order):
            self._positions = np.zeros(2 * len(order), dtype=np.int64)
            self._positions_address = self._positions.ctypes.data
        count = self.library.cycle_unseen(self._address_of(order), len(order), self._tables()[1],
                                          len(self.table), COLUMNS, self._positions_address)
        return self._positions[:count].tolist()

    def _tables(self) -> tuple:
        """The jobs' table and the partitions' node sets as the core reads them (addresses kept until
        either grows), with how many users and partitions the table numbers."""
        if self._table_addresses is None:
            self._table_addresses = (self.parts[0].ctypes.data, self.table.ctypes.data, len(self.table), COLUMNS,
                                     self.parts.ctypes.data)
        return (*self._table_addresses, len(self.users), len(self.partitions))

    def _push_state(self) -> bool:
        """The machine's state to the core (False: a count is not whole, the reference's case)."""
        queue = self.queue
        stamp = queue._will_run_stamp()
        if stamp == self._synced or self._caught_up(stamp):
            return True             # the core's state is the machine's (kept, or updated by starts and ends)
        queue._fresh_answers()
        compiled = queue._compiled()
        same = self._state is compiled          # the will-run answers the core keeps hold
        self._state = compiled
        free, clock_ends, trace_ends, count, offsets, entry_nodes, entry_cpus = compiled.inputs()
        queue._running_index()
        keys = queue._running_cache[7]          # the running jobs' indices, in the compiled test's order
        code = self.library.cycle_state(self.handle, free, clock_ends, trace_ends, keys.ctypes.data, count, offsets,
                                        entry_nodes, entry_cpus, queue._free_cpus_now(), int(same))
        if code == NO_MEMORY:
            raise MemoryError("the slurm queue's backfill cycle: out of memory")
        self._synced = stamp if code == 0 else None
        self._running = set(keys.tolist())
        return code == 0

    def _caught_up(self, stamp) -> bool:
        """The core's running jobs brought up to the machine's by the starts and ends since it was last
        in step, when those are all that changed (each bumps the queue's stamp by one; a release, move or
        node change does too and is not followed: the state is then made afresh).  With power saving the
        stamp is (that count, the machine's node version): no node's power state may have changed."""
        queue = self.queue
        if self._synced is None or queue._completing:
            return False
        if type(stamp) is int:
            changes = stamp - self._synced
        elif stamp[1] == self._synced[1]:
            changes = stamp[0] - self._synced[0]
        else:
            return False
        now = queue.expected_ends.keys()
        ended, started = self._running - now, now - self._running
        if changes != len(ended) + len(started):
            return False
        self._state = None                      # (a state made afresh next drops the core's kept answers)
        self._synced = None
        free_now = queue._free_cpus_now()
        for index in ended:
            if self.library.cycle_ended(self.handle, index, free_now) != 0:
                return False
        running = queue.machine.running
        for index in started:
            if self._join(running[index]) != 0:
                return False
        self._running = set(now)
        self._synced = stamp
        self.catch_ups += 1
        return True

    def _join(self, job, placed_here: int = 0) -> int:
        """``job`` (started) joins the core's running jobs where SlurmQueue._running_index puts it.
        ``placed_here``: how many nodes the core chose for it (:meth:`_fitting_now`; its nodes and CPUs are
        still in the start buffers), 0: they are read from the job."""
        s = self.queue.settings
        count = placed_here
        if not placed_here:
            # its nodes and the CPUs it holds on each into the start buffers (room for every node; not in
            # use outside a start the core placed)
            nodes = job.node_indices
            count = len(nodes)
            self.start_nodes[:count] = nodes
            self.start_cpus[:count] = job.demand[:, CPU] if job.demand.ndim == 2 else job.demand[CPU]
        nodes_address, cpus_address = self._start_addresses
        clock_end = float(slurm_clock_s(job.planned_end_s, s.clock_at_zero_s, s.time_scale))
        code = self.library.cycle_started(self.handle, job.planned_end_s, clock_end, job.index, nodes_address,
                                          cpus_address, count, self.queue._free_cpus_now())
        if code == NO_MEMORY:
            raise MemoryError("the slurm queue's backfill cycle: out of memory")
        return code

    def _started(self, job, placed_here: int) -> None:
        """A job the cycle started joins the core's running jobs (the queue's own index is rebuilt when
        next asked for); ``placed_here``: as :meth:`_join`'s."""
        if self._join(job, placed_here) != 0:
            raise RuntimeError("the slurm queue's compiled backfill cycle: a start left a count not whole")
        self._state = None                      # the core's state is past the queue's compiled will-run test
        self._synced = self.queue._will_run_stamp()     # and is the machine's now
        self._running.add(job.index)

    def _address_of(self, order: np.ndarray) -> int:
        """The address of the queue's order array as the core reads it: a copy in this object's room,
        made when the queue's array is another than the one last copied (a start or a submission makes
        a new one)."""
        if self._order_copied is not order:
            count = len(order)
            if len(self._order_room) < count:
                self._order_room = np.zeros(2 * count, dtype=np.int64)
                self._order_room_address = self._order_room.ctypes.data
            self._order_room[:count] = order
            self._order_copied = order
        return self._order_room_address

    def _fitting_now(self) -> tuple | None:
        """The placement of the job the cycle would start (after START) when it fits on the CPUs free now:
        the core's spread node choice on its usable nodes, which is ``SlurmQueue._place_now``'s there (the job
        spreads, holds no memory, has no node cap: ``_compiles``); None when its start is a running job's
        expected end that is now (the nodes free now are not the answer's: placed by the reference)."""
        count = self.library.cycle_start_nodes(self.handle, *self._start_addresses)
        if count == 0:
            return None
        if count < 0:
            if count == NO_MEMORY:
                raise MemoryError("the slurm queue's backfill cycle: out of memory")
            raise RuntimeError("the slurm queue's compiled backfill cycle: a job fitting now found no nodes")
        amounts = np.zeros((count, self._width))
        amounts[:, CPU] = self.start_cpus[:count]
        return self.start_nodes[:count].copy(), amounts

    def _start_now(self, waiting, now_s: float, by: str) -> None:
        """After START: the job at the cycle's position started as the reference starts it (or not, where it
        cannot be placed), and the core told."""
        queue = self.queue
        placed = self._fitting_now() if queue._power is None else None
        placed_here = 0 if placed is None else len(placed[0])
        if placed_here:
            self.placed_by_core += 1
        else:
            self.placed_by_reference += 1
            # its start is an expected end that is now (a job of time limit 0 started this second; a job
            # ends by its expected end, and ends up to now came before the pass), or power saving's node
            # tiers choose its nodes: placed on the nodes free now, as the reference
            placed = queue._place_now(waiting.job, mask_of_bytes(self._usable_bytes, self.size))
        if placed is not None:
            queue._start(waiting, placed, now_s, by)
            self._started(waiting.job, placed_here)
            if queue._power is not None:
                self._set_words(self._idle_now, queue._idle_nodes())
                self.library.cycle_idle(self.handle, self._idle_now.ctypes.data)
        self.library.cycle_resume(self.handle, int(placed is not None))

    def _choose_by_tiers(self, job) -> None:
        """After NODES: the nodes the node tiers choose for ``job``, which fits now on the usable nodes the core
        gives (``SlurmQueue._nodes_by_tiers``, the reference's choice), to the core as the will-run answer."""
        nodes = self.queue._nodes_by_tiers(job, mask_of_bytes(self._usable_bytes, self.size))
        mask = np.zeros(self.size, dtype=bool)
        mask[nodes] = True
        chosen = np.zeros(self.words, dtype=np.uint64)
        self._set_words(chosen, mask)
        self.tier_choices += 1
        if self.library.cycle_nodes(self.handle, chosen.ctypes.data) == NO_MEMORY:
            raise MemoryError("the slurm queue's backfill cycle: out of memory")

    @staticmethod
    def _set_words(words: np.ndarray, mask: np.ndarray) -> None:
        """``words`` (uint64) set to the node set of the boolean ``mask`` (node i bit i % 64 of word i // 64)."""
        packed = np.packbits(mask, bitorder="little")
        room = words.view(np.uint8)
        room[:] = 0
        room[:len(packed)] = packed

    def _power_tables(self) -> tuple:
        """:meth:`_tables` with Slurm's power saving: the plan's nodes less those being powered down; the
        nodes a reservation could leave PLANNED (allocatable, running no job) and those running no job now
        made ready for cycle_power (SlurmQueue._backfill_cycle's ``available`` and ``idle_bits``)."""
        tables = self._tables()
        blocked = self.queue._power.unavailable()
        idle = self.queue._idle_nodes()
        self._set_words(self._idle_now, idle)
        if blocked is None:
            self._idle_bits[:] = self._idle_now
            return tables
        self._set_words(self._available, ~blocked)
        self._set_words(self._idle_bits, idle & ~blocked)
        return (self._available.ctypes.data, *tables[1:])

    def run(self, now_s: float, by: str) -> bool:
        """The backfill cycle at ``now_s`` (its starts marked ``by``); False when it is left to the
        reference (nothing done)."""
        if not self.takes():
            return False
        queue = self.queue
        ordered = queue._ordered()
        order = queue._order.indices()          # kept alive here: a start below replaces the queue's
        if not self._push_state():
            return False
        s = queue.settings
        resolution = s.bf_resolution_s
        begin = math.floor(now_s / resolution) * resolution
        window_end = math.floor((now_s + s.bf_window_s) / resolution) * resolution
        library, handle = self.library, self.handle
        arguments = (handle, now_s, begin, window_end, resolution, s.bf_window_s, s.will_run_window_s,
                     self._address_of(order), len(order), s.bf_max_job_test, s.bf_max_job_user, s.bf_max_job_part,
                     s.bf_max_job_start, int(queue.full_cycles), int(queue._capacity_bound))
        power = queue._power
        tables = self._tables if power is None else self._power_tables
        code = library.cycle_begin(*arguments, *tables())
        if code == UNSEEN:
            for position in self._unseen(order):
                self._see(ordered[position])
            code = library.cycle_begin(*arguments, *tables())
        if code == LEFT:
            return False
        if code == DONE:
            if power is not None:
                library.cycle_power(handle, self._idle_bits.ctypes.data, self._idle_now.ctypes.data,
                                    int(power.powered_up() is not None))
            code = library.cycle_run(handle, *self._out)
        while code == START or code == NODES:
            waiting = ordered[self.position.value]
            if code == NODES:
                self._choose_by_tiers(waiting.job)
            else:
                self._start_now(waiting, now_s, by)
            code = library.cycle_run(handle, *self._out)
        if code == NO_MEMORY:
            raise MemoryError("the slurm queue's backfill cycle: out of memory")
        if code == NOT_WHOLE:
            raise RuntimeError("the slurm queue's compiled backfill cycle: a count not whole after its checks")
        library.cycle_counts(handle, self._counts_address)
        queue.cycles_stopped_early += int(self.counts[2])
        queue.nevers_without_view += int(self.counts[3])
        if power is not None:
            queue._planned_idle = bool(self.counts[4])
        self.cycles += 1
        return True


def compiled_backfill_library():
    """The compiled backfill cycle (built at install), or None (looked up once; said once on stderr:
    every cycle then runs the reference, slower)."""
    if not _LIBRARY:
        library = load_beside(__file__, "_backfill_cycle")
        if library is None:
            warn_missing_once()
        else:
            pointer, i64, f64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
            library.cycle_new.restype = pointer
            library.cycle_new.argtypes = (i64, pointer)
            library.cycle_free.restype = None
            library.cycle_free.argtypes = (pointer,)
            library.cycle_state.restype = ctypes.c_int
            library.cycle_state.argtypes = (pointer, pointer, pointer, pointer, pointer, i64, pointer, pointer, pointer,
                                            f64, ctypes.c_int)
            library.cycle_started.restype = ctypes.c_int
            library.cycle_started.argtypes = (pointer, f64, f64, i64, pointer, pointer, i64, f64)
            library.cycle_ended.restype = ctypes.c_int
            library.cycle_ended.argtypes = (pointer, i64, f64)
            library.cycle_begin.restype = ctypes.c_int
            library.cycle_begin.argtypes = (pointer, f64, f64, f64, f64, f64, f64, pointer, i64, i64, i64, i64, i64,
                                            ctypes.c_int, ctypes.c_int, pointer, pointer, i64, i64, pointer, i64, i64)
            library.cycle_run.restype = ctypes.c_int
            library.cycle_run.argtypes = (pointer, pointer, pointer)
            library.cycle_unseen.restype = i64
            library.cycle_unseen.argtypes = (pointer, i64, pointer, i64, i64, pointer)
            library.cycle_start_nodes.restype = i64
            library.cycle_start_nodes.argtypes = (pointer, pointer, pointer)
            library.cycle_power.restype = None
            library.cycle_power.argtypes = (pointer, pointer, pointer, ctypes.c_int)
            library.cycle_idle.restype = None
            library.cycle_idle.argtypes = (pointer, pointer)
            library.cycle_nodes.restype = ctypes.c_int
            library.cycle_nodes.argtypes = (pointer, pointer)
            library.cycle_resume.restype = None
            library.cycle_resume.argtypes = (pointer, ctypes.c_int)
            library.cycle_counts.restype = None
            library.cycle_counts.argtypes = (pointer, pointer)
        _LIBRARY.append(library)
    return _LIBRARY[0]


_LIBRARY: list = []
