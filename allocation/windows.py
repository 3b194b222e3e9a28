"""Queries on a plan held as step functions: ``times[k]`` (increasing) and ``free[k, node, resource]``,
what each node has free from breakpoint k until the next (the last step holds for ever).

Two questions, both vectorised over nodes:

- *tails*: from when on does node n hold ``demand`` for ever?  The append-only view of the plan
  that the paper's load-based rules use: a node's load is its tail minus now.
- *windows*: for each candidate start t, does node n hold ``demand`` over all of [t, t + duration)?
  A node fits a window iff it fits at every step the window overlaps, so with ``B`` the running
  count of steps where it does not fit, it fits iff ``B[j] - B[i] == 0``.

These are the plain definitions on whole arrays.  The plan profile
(:class:`greenslurm.sim.engine.profile.PlanProfile`) answers the same questions without looking at
every step: it reads only the steps a window spans (:func:`window_span`, :func:`fits_in_windows`) and
keeps per node the suffix minima that tails are read from.

>>> times = np.array([0.0, 10.0, 20.0])
>>> free = np.array([[[0.0]], [[1.0]], [[1.0]]]).repeat(2, axis=1)   # 2 nodes, busy until 10
>>> free[1, 1, 0] = 0.0                                             # node 1 busy again on [10, 20)
>>> tails(times, free, np.array([1.0])).tolist()
[10.0, 20.0]
>>> window_fits(times, free, np.array([1.0]), 5.0, np.array([0.0, 10.0, 20.0])).tolist()
[[False, False], [True, False], [True, True]]
"""

from __future__ import annotations

import numpy as np


def cpu_only(demand: np.ndarray) -> bool:
    """Only the first resource (CPUs) is asked for: a fit then reads only that column."""
    return not demand[1:].any()


def _fits(free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """[k, node]: the step holds ``demand`` on the node (only CPUs checked when nothing else is asked)."""
    if cpu_only(demand):
        return free[:, :, 0] >= demand[0]
    return (free >= demand).all(axis=2)


def tails(times: np.ndarray, free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Per node, the start of the last run of steps that hold ``demand`` (``times[0]`` when every
    step does; inf when the last step does not, i.e. the node can never hold it)."""
    return tails_after(times, ~_fits(free, demand))


def tails_after(times: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """Per node, the time after the last step ``k`` with ``bad[k, node]`` (``times[0]`` when there is
    none; inf when it is the last step, which lasts for ever).

    >>> tails_after(np.array([0.0, 10.0, 20.0]), np.array([[True, False], [False, False], [False, True]])).tolist()
    [10.0, inf]
    """
    k = len(times)
    last_bad = k - 1 - np.argmax(bad[::-1], axis=0)          # index of the last bad step
    out = np.where(bad.any(axis=0), times[np.minimum(last_bad + 1, k - 1)], times[0])
    return np.where(bad[-1], np.inf, out)


def window_span(times: np.ndarray, duration_s: float, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """For each start (>= ``times[0]``): the steps its window of ``duration_s`` overlaps, ``first``
    to ``end - 1`` (a window of no length still needs its start step); and ``lo``, ``hi``: the
    steps any window overlaps.

    >>> first, end, lo, hi = window_span(np.array([0.0, 10.0, 20.0]), 10.0, np.array([5.0, 20.0]))
    >>> first.tolist(), end.tolist(), lo, hi     # [5, 15) overlaps steps 0 and 1; [20, 30) step 2
    ([0, 2], [2, 3], 0, 3)
    """
    k = len(times)
    first = np.searchsorted(times, starts, side="right") - 1
    end = np.searchsorted(times, starts + duration_s, side="left")
    end = np.minimum(np.maximum(end, first + 1), k)
    return first, end, int(first.min()), int(end.max())


def fits_in_windows(fits: np.ndarray, first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """[window, node]: the node fits at every step ``first[w]`` .. ``end[w] - 1``, given ``fits[k,
    node]`` for the steps (counted from the first one ``fits`` holds).

    >>> fits = np.array([[True], [False], [True]])
    >>> fits_in_windows(fits, np.array([0, 2, 0]), np.array([1, 3, 3])).tolist()
    [[True], [True], [False]]
    """
    bad = running_count(~fits)
    return bad[end] == bad[first]


WIDE = 256          # nodes from which a running count row by row beats np.cumsum down the columns


def running_count(flags: np.ndarray) -> np.ndarray:
    """[k, node]: how many of the rows before row k are set (row 0: none), i.e. ``np.cumsum`` along
    time with a row of zeros first.  On many nodes, summed row by row: ``np.cumsum`` along the first
    axis of a wide array walks each column through memory, several times slower.

    >>> running_count(np.array([[True, False], [True, True]])).tolist()
    [[0, 0], [1, 0], [2, 1]]
    """
    count = np.zeros((flags.shape[0] + 1, flags.shape[1]), dtype=np.int32)
    if flags.shape[1] < WIDE:
        np.cumsum(flags, axis=0, out=count[1:])
    else:
        for k in range(flags.shape[0]):
            np.add(count[k], flags[k], out=count[k + 1])
    return count


def window_fits(times: np.ndarray, free: np.ndarray, demand: np.ndarray, duration_s: float,
                starts: np.ndarray) -> np.ndarray:
    """[start, node]: the node holds ``demand`` over all of [start, start + duration_s).  Starts must
    be >= ``times[0]``; a window of no length still needs its start step."""
    first, end, lo, hi = window_span(times, duration_s, starts)
    return fits_in_windows(_fits(free[lo:hi], demand), first - lo, end - lo)
