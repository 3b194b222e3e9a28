"""Slurm 22.05's main scheduler, the part of :class:`~greenslurm.sim.engine.slurm_queue.SlurmQueue` that
runs it.

**Main scheduler** (``_schedule`` in ``src/slurmctld/job_scheduler.c``), run for submissions and job
ends by slurmctld's background thread, at its wake-ups a second apart (on its own loop, a little
over a second a pass, where slurmctld's start is given: :mod:`greenslurm.sim.engine.slurmctld_loop`)
and at most once per ``batch_sched_delay`` (testing at most ``default_queue_depth`` + 1 jobs, as
Slurm counts), and every ``sched_interval`` (all jobs):
jobs are tried in order; a job that cannot start now marks its partition as failed: no later job of
that partition is tried, and the partition's nodes are taken from every later job, in any partition
(so a blocked job in an overlapping partition also holds back the others on its nodes) -- unless the
nodes left to it (at least its minimum count) could not hold it even empty and none is completing a
job (select_nodes' ESLURM_NODE_NOT_AVAIL rather than ESLURM_NODES_BUSY): then it is only skipped.
Memory (see :mod:`greenslurm.sim.engine.slurm_memory`): with CR_*_Memory a job holds its
``--mem`` on each node it gets, and a job that asked none takes only nodes with no memory allocated
and holds their whole memory; without, memory is not allocated and a ``--mem`` job only needs nodes
with that much RealMemory.

The queue (:class:`~greenslurm.sim.engine.slurm_queue.SlurmQueue`) holds the state a pass reads and
changes (its waiting order, placement, limits, the jobs completing) and the steps it shares with backfill
(``_place_now``, ``_start``); this class is the pass itself, so that the queue's module holds backfill.
"""

from __future__ import annotations

import numpy as np

from greenslurm.sim.engine.slurm_waiting import smallest_from
from greenslurm.sim.machines.machine import PendingJob

MAIN = "main"


class MainScheduler:
    """``_schedule`` (``src/slurmctld/job_scheduler.c``) for the slurm queue, which it is mixed into."""

    def _main_pass(self, now_s: float, full: bool) -> None:
        available = None                # the nodes not taken out for failed partitions (None: all of them)
        all_available = True
        failed: set[str] = set()
        depth = self.settings.default_queue_depth
        tested = 0
        self._main_limited = False
        ordered = self._ordered()
        # the fewest CPUs any job from a position on asks (smallest_from of this pass's order): most
        # passes stop at the first job, which needs only the least of all
        least, smallest = self._order.least(), None
        for position, waiting in enumerate(ordered):
            if position == 1 and smallest is None:
                smallest = smallest_from(np.array([w.job.cpus_total for w in ordered], dtype=np.float64))
            if self._free_cpus_now() < (smallest[position] if position else least) - 1e-9:
                break
            if not full and tested > depth:
                self._main_limited = True
                break
            tested += 1
            if (waiting.partition in failed or self.limits.blocked(waiting, now_s) is not None
                    or waiting.eligible_s > now_s):
                continue
            job = waiting.job
            allowed = job.allowed
            if all_available:
                usable = allowed
            else:
                usable = available if allowed is None else (allowed & available)
            placement = None
            if usable is None or int(usable.sum()) >= self.placement.min_nodes(job):
                placement = self._place_now(job, usable)
            if placement is not None:
                self._start(waiting, placement, now_s, MAIN)
                continue
            if not all_available and not self._nodes_busy(job, usable):
                # select_nodes' ESLURM_NODE_NOT_AVAIL: the nodes left to this job (others were
                # taken out for failed partitions) are at least its minimum count but could not hold
                # it even empty, and none of them is completing a job: the job is skipped, its
                # partition not blocked
                continue
            # ESLURM_NODES_BUSY: no later job of this partition, and no later job at all on its nodes.
            failed.add(waiting.partition)
            part = self.placement.partition_mask(waiting.partition)
            if part is None:
                break                      # the partition is every node: nothing else may start
            available = ~part if all_available else available & ~part
            all_available = False
        self._main_seen = self._version

    def _nodes_busy(self, job: PendingJob, usable: np.ndarray | None) -> bool:
        """Whether Slurm's ``_pick_best_nodes`` answers ESLURM_NODES_BUSY for ``job`` on the
        ``usable`` nodes (its partition's, less those taken out this pass): it could run there if
        they were empty, or one of them is completing a job.  Otherwise the answer is
        ESLURM_NODE_NOT_AVAIL, which does not block the partition."""
        mask = np.ones(self.machine.cluster.size, dtype=bool) if usable is None else usable
        if int(mask.sum()) < self.placement.min_nodes(job):
            return True        # _schedule's own test (fewer nodes left than the job's minimum) blocks
        if self._completing and bool((self._held[mask] > 0).any()):
            return True
        return self.placement.ever_fits(job, mask)
