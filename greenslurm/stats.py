"""Means and confidence intervals over seeds (Student t), for comparison tables and plots.

The 95 % interval of a mean of n values is mean +- t(0.975, n - 1) * s / sqrt(n), with s the sample
standard deviation (n - 1 in the denominator).  One value has no interval (None).

>>> m, h, n = mean_ci([1.0, 2.0, 3.0])
>>> m, round(h, 4), n              # t(0.975, 2) = 4.3027, s = 1
(2.0, 2.4841, 3)
>>> mean_ci([5.0])
(5.0, None, 1)
>>> mean_ci([None, float("nan")])
(None, None, 0)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:                      # pandas loads with the first table aggregated, not with the module
    import pandas as pd

# t(0.975, df) for df = 1..30 (two-sided 95 %); beyond 30 the table is interpolated in 1/df to 1.95996.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959964


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided Student t quantile for ``level`` (SciPy when installed, else a 95 % table).

    >>> round(t_quantile(4), 4), round(t_quantile(1000), 3)
    (2.7764, 1.962)
    """
    if df < 1:
        raise ValueError("a t quantile needs df >= 1")
    try:
        from scipy.stats import t
        return float(t.ppf(0.5 + level / 2.0, df))
    except ImportError:
        if abs(level - 0.95) > 1e-12:
            raise ValueError("without SciPy only 95 % intervals are available") from None
    if df <= len(_T975):
        return _T975[df - 1]
    # t(df) ~ z + c / df; c from the table's last entry
    c = (_T975[-1] - _Z975) * len(_T975)
    return _Z975 + c / df


def mean_ci(values: Iterable[float | None], level: float = 0.95) -> tuple[float | None, float | None, int]:
    """(mean, half width of the interval, number of finite values)."""
    kept = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    n = len(kept)
    if n == 0:
        return None, None, 0
    mean = math.fsum(kept) / n
    if n == 1:
        return mean, None, 1
    s = math.sqrt(math.fsum((v - mean) ** 2 for v in kept) / (n - 1))
    return mean, t_quantile(n - 1, level) * s / math.sqrt(n), n


def aggregate(frame: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], level: float = 0.95) -> pd.DataFrame:
    """One row per group of ``by``: ``M_mean``, ``M_ci`` (half width) for each metric, and ``n``.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"policy": ["a", "a", "b"], "x": [1.0, 3.0, 5.0]})
    >>> aggregate(f, ["policy"], ["x"]).to_dict("list")["x_mean"]
    [2.0, 5.0]
    """
    import pandas as pd
    rows = []
    for key, group in frame.groupby(list(by), sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        row["n"] = len(group)
        for metric in metrics:
            values = pd.to_numeric(group[metric], errors="coerce").tolist() if metric in group else []
            m, h, _ = mean_ci(values, level)
            row[f"{metric}_mean"] = m
            row[f"{metric}_ci"] = h
        rows.append(row)
    return pd.DataFrame(rows)
