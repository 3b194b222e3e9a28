"""A power budget over future time: the headroom H(t) = S(t) - base - (power of planned jobs at t).

S(t) is the renewable supply, ``base`` the power the cluster draws with nothing allocated.  Each
accepted job reserves the power it adds above idle over its planned window.  Two uses:

- ``cap`` (renewable-only): a job may be planned on [t, t + p) only if H >= its power throughout,
  so the cluster's power never exceeds S(t) while any job runs;
- ``green``: nothing is forbidden, but among placements that meet the deadline the one whose
  window has the most renewable headroom for the job, integral of clip(H, 0, power), is preferred.

>>> from greenslurm.clustermodel.renewable import SupplySeries
>>> b = PowerBudget(SupplySeries(np.array([0.0, 100.0]), np.array([500.0, 0.0])), base_w=100.0, now_s=0.0)
>>> b.window_ok(np.array([0.0, 50.0, 60.0]), 50.0, 400.0).tolist()   # H = 400 on [0,100), -100 after
[True, True, False]
>>> b.reserve(0.0, 50.0, 300.0)
>>> b.green_j(np.array([0.0, 50.0]), 50.0, 200.0).tolist()     # 100 W * 50 s;  200 W * 50 s
[5000.0, 10000.0]
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.renewable import SupplySeries

MODES = ("cap", "green")


class PowerBudget:
    def __init__(self, supply: SupplySeries, base_w: float, now_s: float, mode: str = "cap") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown budget mode {mode!r}; choose from {', '.join(MODES)}")
        self.mode = mode
        later = supply.times_s[supply.times_s > now_s]
        self.times = np.concatenate(([now_s], later))
        self.headroom_w = supply.at(self.times) - base_w

    @property
    def now_s(self) -> float:
        return float(self.times[0])

    def advance(self, now_s: float) -> None:
        """Forget the past: the budget starts at ``now_s``."""
        i = int(np.searchsorted(self.times, now_s, side="right")) - 1
        if i > 0:
            self.times = self.times[i:]
            self.headroom_w = self.headroom_w[i:]
        if self.times[0] < now_s:
            self.times = self.times.copy()
            self.times[0] = now_s

    def _split(self, t_s: float) -> int:
        i = int(np.searchsorted(self.times, t_s, side="left"))
        if i < len(self.times) and self.times[i] == t_s:
            return i
        if i == 0:
            raise ValueError(f"time {t_s} is before the budget's start {self.times[0]}")
        self.times = np.insert(self.times, i, t_s)
        self.headroom_w = np.insert(self.headroom_w, i, self.headroom_w[i - 1])
        return i

    def reserve(self, start_s: float, end_s: float, power_w: float) -> None:
        if end_s <= start_s or power_w == 0:
            return
        i = self._split(start_s)
        j = self._split(end_s)
        self.headroom_w[i:j] -= power_w

    def release(self, start_s: float, end_s: float, power_w: float) -> None:
        self.reserve(start_s, end_s, -power_w)

    def breakpoints(self) -> np.ndarray:
        return self.times

    def window_ok(self, starts: np.ndarray, duration_s: float, power_w: float) -> np.ndarray:
        """Per start: H >= ``power_w`` on every step [start, start + duration_s) overlaps."""
        if power_w <= 0:
            return np.ones(len(starts), dtype=bool)
        short = np.zeros(len(self.times) + 1, dtype=np.int64)
        np.cumsum(self.headroom_w < power_w - 1e-9, out=short[1:])
        first = np.searchsorted(self.times, starts, side="right") - 1
        end = np.searchsorted(self.times, starts + duration_s, side="left")
        end = np.minimum(np.maximum(end, first + 1), len(self.times))
        return short[end] == short[first]

    def green_j(self, starts: np.ndarray, duration_s: float, power_w: float) -> np.ndarray:
        """Per start: the renewable energy the job could draw, integral of clip(H, 0, power_w)."""
        usable = np.clip(self.headroom_w, 0.0, max(power_w, 0.0))
        at_break = np.concatenate(([0.0], np.cumsum(usable[:-1] * np.diff(self.times))))

        def integral(t: np.ndarray) -> np.ndarray:
            i = np.searchsorted(self.times, t, side="right") - 1
            return at_break[i] + usable[i] * (t - self.times[i])

        return integral(starts + duration_s) - integral(starts)
