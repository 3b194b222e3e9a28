"""Queries on a plan held as step functions: ``times[k]`` (increasing) and ``free[k, node, resource]``,
what each node has free from breakpoint k until the next (the last step holds for ever).

Two questions, both vectorised over nodes:

- *tails*: from when on does node n hold ``demand`` for ever?  The append-only view of the plan
  that the paper's load-based rules use: a node's load is its tail minus now.
- *windows*: for each candidate start t, does node n hold ``demand`` over all of [t, t + duration)?
  A node fits a window iff it fits at every step the window overlaps, so with ``B`` the running
  count of steps where it does not fit, it fits iff ``B[j] - B[i] == 0``.

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


def _fits(free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """[k, node]: the step holds ``demand`` on the node (only CPUs checked when nothing else is asked)."""
    if not demand[1:].any():
        return free[:, :, 0] >= demand[0]
    return (free >= demand).all(axis=2)


def tails(times: np.ndarray, free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Per node, the start of the last run of steps that hold ``demand`` (``times[0]`` when every
    step does; inf when the last step does not, i.e. the node can never hold it)."""
    bad = ~_fits(free, demand)
    k = len(times)
    last_bad = k - 1 - np.argmax(bad[::-1], axis=0)          # index of the last bad step
    out = np.where(bad.any(axis=0), times[np.minimum(last_bad + 1, k - 1)], times[0])
    return np.where(bad[-1], np.inf, out)


def window_fits(times: np.ndarray, free: np.ndarray, demand: np.ndarray, duration_s: float,
                starts: np.ndarray) -> np.ndarray:
    """[start, node]: the node holds ``demand`` over all of [start, start + duration_s).  Starts must
    be >= ``times[0]``; a window of no length still needs its start step."""
    k = len(times)
    first = np.searchsorted(times, starts, side="right") - 1
    end = np.searchsorted(times, starts + duration_s, side="left")
    end = np.minimum(np.maximum(end, first + 1), k)
    lo, hi = int(first.min()), int(end.max())
    bad = np.zeros((hi - lo + 1, free.shape[1]), dtype=np.int32)
    np.cumsum(~_fits(free[lo:hi], demand), axis=0, out=bad[1:])
    return bad[end - lo] == bad[first - lo]
