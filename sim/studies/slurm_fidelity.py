"""How close a replayed schedule is to the one real Slurm made: per-job start error, start order and
mean wait.

Both schedules are given per job as (submit, start) in the same seconds.  Start times recorded by
Slurm are whole seconds, so two starts within ``tolerance_s`` of each other count as simultaneous.

- **start error**: replayed start - recorded start, per job;
- **mean wait**: mean of start - submit, each schedule with its own submit times; the difference
  relative to the recorded mean;
- **start order agreement**: the share of jobs whose order against every other job is the same in
  both schedules, where a pair started within ``tolerance_s`` of each other (in either schedule)
  is in no particular order;
- **pair concordance**: the share of job pairs whose order is the same (Kendall's, with the same ties).

>>> recorded = {"a": (0, 0), "b": (0, 60), "c": (0, 120), "d": (0, 600)}
>>> replayed = {"a": (0, 0), "b": (0, 130), "c": (0, 70), "d": (0, 600)}
>>> f = compare_schedules(recorded, replayed, tolerance_s=30)
>>> f.jobs, f.order_agreement, round(f.pair_concordance, 3)   # b and c swapped: 2 of 4 jobs disagree
(4, 0.5, 0.833)
>>> f.mean_wait_recorded_s, f.mean_wait_replayed_s, f.mean_wait_difference
(195.0, 200.0, 0.02564102564102564)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fidelity:
    jobs: int
    mean_wait_recorded_s: float
    mean_wait_replayed_s: float
    mean_wait_difference: float          # (replayed - recorded) / recorded; 0 when both are 0
    start_error_mean_abs_s: float
    start_error_median_abs_s: float
    start_error_p90_abs_s: float
    start_error_max_abs_s: float
    within_tolerance: float              # share of jobs started within the tolerance of the record
    order_agreement: float
    pair_concordance: float
    disagreeing: tuple[str, ...]         # jobs whose order differs

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        out["disagreeing"] = list(self.disagreeing)
        return out


def as_slurm_stamps(schedule: dict[str, tuple]) -> dict[str, tuple]:
    """Each job's submit and start truncated to the whole second as slurmctld stamps them and sacct
    exports them (job_mgr.c: ``submit_time = time(NULL)``; node_scheduler.c ``select_nodes``:
    ``start_time = now``, ``now = time(NULL)``); what follows them in each tuple (nodes) is kept.

    A replay timed to the millisecond compared with sacct's seconds is on another footing: a job
    submitted at .296 of a second and allocated at .867 of it (s92's j00 in slurmctld's log) waited
    0 s for sacct and 0.57 s for the replay.

    >>> as_slurm_stamps({"j00": (1_795_902_029.296, 1_795_902_029.867, ("n01", "n02"))})
    {'j00': (1795902029.0, 1795902029.0, ('n01', 'n02'))}
    """
    return {job: (float(math.floor(submit_s)), float(math.floor(start_s)), *rest)
            for job, (submit_s, start_s, *rest) in schedule.items()}


def order_relation(starts: np.ndarray, tolerance_s: float) -> np.ndarray:
    """[i, j]: +1 if job i started more than ``tolerance_s`` before job j, -1 after, 0 within.

    >>> order_relation(np.array([0.0, 10.0, 100.0]), 30.0).tolist()
    [[0, 0, 1], [0, 0, 1], [-1, -1, 0]]
    """
    gap = starts[None, :] - starts[:, None]
    return np.where(gap > tolerance_s, 1, np.where(gap < -tolerance_s, -1, 0)).astype(np.int8)


def compare_schedules(recorded: dict[str, tuple[float, float]], replayed: dict[str, tuple[float, float]],
                      tolerance_s: float) -> Fidelity:
    """Compare two schedules given as job -> (submit, start); only jobs in both count.

    Order is judged without the n x n relation of :func:`order_relation` (whose memory grows with the
    square of the jobs: 3.5 GB for 11,704): in O(n log n), the same figures.
    """
    names = sorted(set(recorded) & set(replayed))
    if not names:
        raise ValueError("the two schedules have no job in common")
    rec = np.array([recorded[n] for n in names], dtype=float)
    rep = np.array([replayed[n] for n in names], dtype=float)
    wait_rec = float((rec[:, 1] - rec[:, 0]).mean())
    wait_rep = float((rep[:, 1] - rep[:, 0]).mean())
    if wait_rec == 0:
        difference = 0.0 if wait_rep == 0 else float("inf")
    else:
        difference = (wait_rep - wait_rec) / wait_rec
    error = np.abs(rep[:, 1] - rec[:, 1])
    agree, conflicts = order_conflicts(rec[:, 1], rep[:, 1], tolerance_s)
    n = len(names)
    pairs = n * (n - 1) / 2
    concordance = 1.0 - (conflicts / pairs) if pairs else 1.0
    return Fidelity(
        jobs=n, mean_wait_recorded_s=wait_rec, mean_wait_replayed_s=wait_rep, mean_wait_difference=difference,
        start_error_mean_abs_s=float(error.mean()), start_error_median_abs_s=float(np.median(error)),
        start_error_p90_abs_s=float(np.percentile(error, 90)), start_error_max_abs_s=float(error.max()),
        within_tolerance=float((error <= tolerance_s).mean()), order_agreement=float(agree.mean()),
        pair_concordance=concordance, disagreeing=tuple(n_ for n_, ok in zip(names, agree) if not ok))


def order_conflicts(a: np.ndarray, b: np.ndarray, tolerance_s: float) -> tuple[np.ndarray, int]:
    """Per job, whether no other job is ordered oppositely in the two schedules of starts ``a`` and
    ``b`` (each by more than ``tolerance_s``); and how many pairs are.

    A pair (i, j) conflicts when a_j > a_i + tol and b_j < b_i - tol (or the same with i and j
    swapped).  Sorted by a, the jobs j with a_j > a_i + tol are a suffix, those with a_j < a_i - tol a
    prefix: job i conflicts with some job iff the suffix's least b is below b_i - tol or the prefix's
    greatest b above b_i + tol.  Conflicting pairs are counted by a sweep in decreasing a, with the b of
    the suffix in a sorted list.

    >>> agree, pairs = order_conflicts(np.array([0.0, 60.0, 120.0, 600.0]), np.array([0.0, 130.0, 70.0, 600.0]), 30.0)
    >>> agree.tolist(), pairs            # the second and third jobs swapped (by more than 30 s both ways)
    ([True, False, False, True], 1)
    >>> order_conflicts(np.array([0.0, 10.0]), np.array([10.0, 0.0]), 30.0)[1]   # within the tolerance
    0
    """
    from sortedcontainers import SortedList

    order = np.argsort(a, kind="stable")
    a_sorted, b_sorted = a[order], b[order]
    n = len(a)
    after = np.searchsorted(a_sorted, a_sorted + tolerance_s, side="right")    # first of the suffix
    before = np.searchsorted(a_sorted, a_sorted - tolerance_s, side="left")    # end of the prefix
    suffix_min = np.append(np.minimum.accumulate(b_sorted[::-1])[::-1], np.inf)
    prefix_max = np.insert(np.maximum.accumulate(b_sorted), 0, -np.inf)
    conflict = (suffix_min[after] < b_sorted - tolerance_s) | (prefix_max[before] > b_sorted + tolerance_s)
    agree = np.empty(n, dtype=bool)
    agree[order] = ~conflict
    pairs, suffix, added = 0, SortedList(), n
    for i in range(n - 1, -1, -1):                  # decreasing a: the suffix only grows
        while added > after[i]:
            added -= 1
            suffix.add(b_sorted[added])
        pairs += suffix.bisect_left(b_sorted[i] - tolerance_s)
    return agree, pairs
