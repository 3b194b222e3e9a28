"""Slurm's node choice against slurmctld's own log: the rule given the state Slurm really had.

A replay's "same nodes" mixes two things: the node choice itself, and the state it chooses in (which
jobs run where, at that moment).  This takes the second out.  For a recording of
``bench/slurm_workloads.py record`` it reads slurmctld's log (default level: ``sched: Allocate``,
``sched/backfill: _start_job: Started``, ``_job_complete: JobId=N done`` and the submissions'
``InitPrio``, all with millisecond stamps), walks the allocations and ends in the log's order, and at
each allocation asks the slurm queue's node choice (:mod:`greenslurm.allocation.consecutive`:
best fit over consecutive nodes, a job naming no node count spread CPU by CPU, ``-N`` with more
CPUs than nodes filled unevenly) for the job's nodes among the CPUs (and, with CR_*_Memory, the
memory) free at that instant, on the nodes of the job's partition.  A main-scheduler pass also
takes from a job the nodes of every partition in which a job ahead of it (PriorityTier, priority,
submission, job id) waited through that pass (``_schedule``'s failed partitions; the log lines of
one pass come within half a second, with no submission or end between them: a pass holds the
job lock).  Backfill's reservations for higher jobs are not rebuilt:
its starts are counted apart.  A job's CPUs on each of its nodes are the rule's where the rule
chose Slurm's nodes, else the rule's layout on Slurm's nodes::

    python bench/slurm_node_choice.py bench/data/slurm-workloads/s81/run1 ...

Each recording folder holds ``slurmctld.log`` (or ``slurmctld.log.gz``), ``trace.txt`` (sacct)
and ``slurm.conf``, with ``workload.csv`` beside or above it (each job's ``-n``, ``-N``, ``--mem``).

>>> free = np.array([2.0, 8.0, 0.0, 2.0, 0.0, 16.0])    # s82 j05 (-n 3): n01 2 CPUs free, n02 8, ...
>>> request = Request(cpus=3, nodes=0, memory_mb=0)
>>> choose(request, free, np.ones(6, bool)).tolist()    # sets n01-n02 (10), n04 (2), n06 (16): n02
[1]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from greenslurm.allocation.consecutive import best_fit_consecutive, fill_consecutive, spread_consecutive
from greenslurm.traces.sacct import read_sacct
from greenslurm.clustermodel import InputError
from greenslurm.traces.slurm_conf import expand_hostlist, parse_slurm_conf
from greenslurm.traces.slurmctld_log import BadStamp, _stamped

SAME_PASS_S = 0.5          # the log lines of one pass (its allocations) come within this
ALLOCATE = re.compile(r"^sched: Allocate JobId=(\d+) NodeList=(\S+) #CPUs=\d+ Partition=(\S+)$")
BACKFILLED = re.compile(r"^sched/backfill: _start_job: Started JobId=(\d+) in (\S+) on (\S+)$")
DONE = re.compile(r"^_job_complete: JobId=(\d+) done$")
SUBMITTED = re.compile(r"^_slurm_rpc_submit_batch_job: JobId=(\d+) InitPrio=(\d+) ")


class BadRecording(ValueError):
    """A recording the comparison cannot read: the message names the file, line and field."""


@dataclass(frozen=True)
class Request:
    """What a job asked: ``-n`` CPUs, ``-N`` nodes (0: Slurm chooses), ``--mem`` per node (0: none)."""
    cpus: int
    nodes: int
    memory_mb: int


class Mismatch(NamedTuple):
    job: str
    stamp: str
    scheduler: str               # "main" or "backfill"
    slurm: tuple[str, ...]
    rule: tuple[str, ...] | None


class Comparison(NamedTuple):
    main: tuple[int, int]        # (same nodes, allocations) of the main scheduler
    backfill: tuple[int, int]    # of backfill
    mismatches: list[Mismatch]


def choose(request: Request, free_cpus: np.ndarray, in_map: np.ndarray) -> np.ndarray | None:
    """The slurm queue's nodes for ``request`` among the ``in_map`` nodes with ``free_cpus`` (None: no
    room); see :func:`layout`."""
    found = layout(request, free_cpus, in_map)
    return None if found is None else found[0]


def layout(request: Request, free_cpus: np.ndarray, in_map: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(nodes, CPUs on each) as the slurm queue lays ``request`` out: no node count, spread CPU by
    CPU; a node count and more CPUs than nodes, filled unevenly; else one CPU on each of its nodes
    (the workloads' rigid jobs ask ``-N k -n k``)."""
    in_map = in_map & (free_cpus >= 1)
    if request.nodes == 0:
        return spread_consecutive(free_cpus, in_map, request.cpus)
    if request.cpus > request.nodes:
        return fill_consecutive(free_cpus, in_map, request.cpus, request.nodes)
    nodes = best_fit_consecutive(free_cpus, in_map, np.flatnonzero(in_map), request.nodes, 1.0)
    return None if nodes is None else (nodes, np.ones(len(nodes)))


@dataclass(frozen=True)
class _Cluster:
    """slurm.conf's nodes, in Slurm's node order (slurm.conf's), and its partitions."""

    names: list[str]
    capacity: np.ndarray                      # CPUs per node
    memory: np.ndarray                        # RealMemory per node, MB
    members: dict[str, np.ndarray]            # partition -> its nodes, as a mask
    tiers: dict[str, int]                     # partition -> PriorityTier
    memory_consumable: bool                   # CR_*_Memory: memory is allocated as CPUs are


def _cluster(folder: Path) -> _Cluster:
    conf_path = folder / "slurm.conf"
    try:
        conf = parse_slurm_conf(conf_path)
    except OSError as error:
        raise BadRecording(f"{conf_path}: cannot read: {error.strerror or error}") from None
    except InputError as error:             # names its file, line and field
        raise BadRecording(str(error)) from None
    names = [node.name for node in conf.nodes]
    return _Cluster(names, np.array([node.cpus for node in conf.nodes], dtype=float),
                    np.array([node.real_memory_mb for node in conf.nodes], dtype=float),
                    {p.name: np.isin(names, p.nodes) for p in conf.partitions},
                    {p.name: p.priority_tier for p in conf.partitions}, conf.select.memory_consumable)


class _LogWalk:
    """The allocations and ends of slurmctld's log in its order, each allocation compared with the
    rule's choice on the CPUs (and memory) free at that instant (see the module text)."""

    def __init__(self, folder: Path, cluster: _Cluster, requests: dict[str, Request], jobs) -> None:
        self.folder, self.cluster, self.requests = folder, cluster, requests
        self.name_of = {int(j.job_id): j.extra.get("job_name", j.job_id) for j in jobs}
        self.partition_of = {int(j.job_id): j.partition for j in jobs}
        size = len(cluster.names)
        self.used = np.zeros(size)
        self.memory_used = np.zeros(size)
        self.held: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.waiting: dict[int, tuple] = {}               # job id -> its order key (tier, priority, id)
        self.counts = {"main": [0, 0], "backfill": [0, 0]}
        self.mismatches: list[Mismatch] = []
        self.pass_at = -math.inf
        self.blocked = np.zeros(size, dtype=bool)         # nodes of the partitions that failed in this pass
        self.tried_up_to: tuple | None = None

    def line(self, now: float, message: str) -> None:
        submitted = SUBMITTED.match(message)
        if submitted:
            job_id = int(submitted.group(1))
            partition = self.partition_of.get(job_id)
            if partition in self.cluster.tiers:
                self.waiting[job_id] = (-self.cluster.tiers[partition], -int(submitted.group(2)), job_id)
            self.pass_at = -math.inf                      # a pass holds the job lock: the next is another
            return
        done = DONE.match(message)
        if done:
            cpus, memory_held = self.held.pop(int(done.group(1)), (0.0, 0.0))
            self.used -= cpus
            self.memory_used -= memory_held
            self.pass_at = -math.inf
            return
        allocated = ALLOCATE.match(message)
        started = allocated or BACKFILLED.match(message)
        if started:
            job_id = int(started.group(1))
            if job_id in self.name_of and self.name_of[job_id] in self.requests:
                if allocated:
                    self.start(now, job_id, allocated.group(3), allocated.group(2), "main")
                else:
                    self.start(now, job_id, started.group(2), started.group(3), "backfill")

    def start(self, now: float, job_id: int, partition: str, hostlist: str, scheduler: str) -> None:
        cluster, names = self.cluster, self.cluster.names
        if partition not in cluster.members:
            raise BadRecording(f"{_log_path(self.folder)}: JobId={job_id}: partition {partition!r} is not in slurm.conf")
        try:
            slurm_nodes = np.flatnonzero(np.isin(names, expand_hostlist(hostlist)))
        except ValueError as error:
            raise BadRecording(f"{_log_path(self.folder)}: JobId={job_id}: node list {hostlist!r}: {error}") from None
        request = self.requests[self.name_of[job_id]]
        found = layout(request, cluster.capacity - self.used, self._in_map(now, job_id, partition, scheduler, request))
        same = found is not None and np.array_equal(np.sort(found[0]), slurm_nodes)
        self.counts[scheduler][0] += same
        self.counts[scheduler][1] += 1
        if not same:
            self.mismatches.append(Mismatch(self.name_of[job_id], _clock(now), scheduler,
                                            tuple(names[i] for i in slurm_nodes),
                                            None if found is None else tuple(names[i] for i in np.sort(found[0]))))
            only = np.zeros(len(names), dtype=bool)
            only[slurm_nodes] = True
            found = layout(request, cluster.capacity - self.used, only)
        self._hold(job_id, request, slurm_nodes, found)

    def _in_map(self, now: float, job_id: int, partition: str, scheduler: str, request: Request) -> np.ndarray:
        """The nodes the job may have: its partition's, less (in a main-scheduler pass) those of the
        partitions that failed earlier in the pass, less those short of its memory."""
        cluster = self.cluster
        key = self.waiting.pop(job_id, (-cluster.tiers[partition], 0, job_id))
        if scheduler == "main":
            if now - self.pass_at > SAME_PASS_S:          # a new pass
                self.blocked[:] = False
                self.tried_up_to = None
            self.pass_at = now
            # the jobs ahead of this one that waited through the pass failed: their partitions' nodes
            # are taken from it (and from every later job of the pass)
            for other, other_key in self.waiting.items():
                if other_key < key and (self.tried_up_to is None or other_key > self.tried_up_to):
                    self.blocked |= cluster.members[self.partition_of[other]]
            self.tried_up_to = key
        in_map = cluster.members[partition] & ~self.blocked if scheduler == "main" else cluster.members[partition].copy()
        if cluster.memory_consumable:
            in_map = in_map & ((cluster.memory - self.memory_used >= request.memory_mb) if request.memory_mb
                               else self.memory_used == 0)
        elif request.memory_mb:
            in_map = in_map & (cluster.memory >= request.memory_mb)
        return in_map

    def _hold(self, job_id: int, request: Request, slurm_nodes: np.ndarray, found) -> None:
        """What the job holds until its end: the rule's CPUs where it chose Slurm's nodes, else its
        CPUs spread evenly over them; with CR_*_Memory its memory (all of a node's when it asks none)."""
        names, memory = self.cluster.names, self.cluster.memory
        cpus = np.zeros(len(names))
        if found is not None and np.array_equal(np.sort(found[0]), slurm_nodes):
            cpus[found[0]] = found[1]
        else:
            cpus[slurm_nodes] = request.cpus / max(len(slurm_nodes), 1)
        memory_held = np.zeros(len(names))
        if self.cluster.memory_consumable:
            memory_held[slurm_nodes] = request.memory_mb or memory[slurm_nodes]
        self.held[job_id] = (cpus, memory_held)
        self.used += cpus
        self.memory_used += memory_held


def compare(folder: Path) -> Comparison:
    """The log's allocations of the recording in ``folder`` against the rule, given Slurm's state."""
    cluster = _cluster(folder)
    requests = _requests(folder)
    try:
        jobs = read_sacct(str(folder / "trace.txt")).jobs
    except (OSError, ValueError) as error:
        raise BadRecording(f"{folder / 'trace.txt'}: {error}") from None
    text = _read_log(folder)
    walk = _LogWalk(folder, cluster, requests, jobs)
    try:
        stamped = list(_stamped(text))
    except BadStamp as error:
        raise BadRecording(f"{_log_path(folder)}: {error}") from None
    for now, message in stamped:
        walk.line(now, message)
    counts = walk.counts
    if counts["main"][1] + counts["backfill"][1] == 0:
        # nothing compared is no result ("0 of 0"): an empty or foreign log, or another recording's
        raise BadRecording(f"{_log_path(folder)}: no allocation of a job of {folder / 'trace.txt'} and its workload.csv "
                           f"(none of {len(stamped)} time-stamped lines is a 'sched: Allocate' or backfill start "
                           "of such a job): not this recording's slurmctld log")
    return Comparison(tuple(counts["main"]), tuple(counts["backfill"]), walk.mismatches)


def _requests(folder: Path) -> dict[str, Request]:
    """Job name -> its request, from the ``workload.csv`` beside or above ``folder``."""
    for path in (folder / "workload.csv", folder.parent / "workload.csv"):
        if path.exists():
            break
    else:
        raise BadRecording(f"{folder}: no workload.csv beside or above it")
    requests = {}
    try:
        with open(path, newline="") as handle:
            for line, row in enumerate(csv.DictReader(handle), start=2):
                try:
                    requests[row["name"]] = Request(int(row["tasks"]), int(row["nodes"] or 0), int(row["memory_mb"] or 0))
                except (KeyError, TypeError, ValueError) as error:
                    raise BadRecording(f"{path}: line {line}: tasks, nodes or memory_mb: {error}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise BadRecording(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
    return requests


def _log_path(folder: Path) -> Path:
    plain = folder / "slurmctld.log"
    return plain if plain.exists() or not (folder / "slurmctld.log.gz").exists() else folder / "slurmctld.log.gz"


def _read_log(folder: Path) -> str:
    path = _log_path(folder)
    try:
        # bytes that are no text are no log line: kept as replacement characters, never matched
        return gzip.open(path, "rt", errors="replace").read() if path.suffix == ".gz" \
            else path.read_text(errors="replace")
    except (OSError, EOFError) as error:
        raise BadRecording(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None


def _clock(epoch_s: float) -> str:
    from datetime import datetime
    return datetime.fromtimestamp(epoch_s).strftime("%H:%M:%S.%f")[:-3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="+", type=Path, help="folders with slurmctld.log, trace.txt, slurm.conf")
    parser.add_argument("--quiet", action="store_true", help="counts only, not the jobs placed otherwise")
    args = parser.parse_args(argv)
    totals = [0, 0, 0, 0]
    for folder in args.recordings:
        try:
            found = compare(folder)
        except BadRecording as error:
            print(error, file=sys.stderr)
            return 2
        totals = [a + b for a, b in zip(totals, found.main + found.backfill)]
        print(f"{folder}: same nodes as Slurm, main scheduler {found.main[0]} of {found.main[1]}, "
              f"backfill {found.backfill[0]} of {found.backfill[1]}")
        if not args.quiet:
            for m in found.mismatches:
                print(f"  {m.job} at {m.stamp} ({m.scheduler}): Slurm {','.join(m.slurm)}, "
                      f"rule {'no room' if m.rule is None else ','.join(m.rule)}")
    print(f"all: main scheduler {totals[0]} of {totals[1]}, backfill {totals[2]} of {totals[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
