"""Renewable supply: a power series S(t) in watts, synthetic solar and wind models, and the exact
split of a cluster's energy into renewable, grid and curtailed parts.  Pure: no I/O, no clocks.

A supply series is piecewise constant: ``watts[i]`` holds on ``[times_s[i], times_s[i+1])``, the
last value holds for ever, and before ``times_s[0]`` there is no supply (0 W).  The cluster's power
P(t) is piecewise constant too (the ledger's series), so over the pieces of both series

    renewable used = integral of min(P, S)
    grid           = integral of max(0, P - S)
    curtailed      = integral of max(0, S - P)

are sums of products, each product rounded once and each sum correctly rounded (``math.fsum``, not
numpy's BLAS: the same bits on any machine, whatever its core count); renewable + grid = energy used
and renewable + curtailed = energy supplied, by construction (tests check both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from greenslurm.clustermodel.ascii_numbers import ascii_float
from greenslurm.clustermodel.cluster import CPU, GPU, Cluster
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.sums import sum_of_products

DAY_S = 86400.0


@dataclass(frozen=True, eq=False)
class SupplySeries:
    """S(t): ``watts[i]`` on ``[times_s[i], times_s[i+1])``; the last step holds for ever, 0 W before.

    >>> s = SupplySeries(np.array([0.0, 10.0, 20.0]), np.array([5.0, 0.0, 2.0]))
    >>> s.at(np.array([-1.0, 0.0, 9.9, 10.0, 25.0])).tolist()
    [0.0, 5.0, 5.0, 0.0, 2.0]
    >>> s.integral_j(5.0, 30.0)    # 5 W * 5 s + 0 W * 10 s + 2 W * 10 s
    45.0
    """

    times_s: np.ndarray
    watts: np.ndarray
    name: str = "supply"

    def __post_init__(self) -> None:
        times = np.asarray(self.times_s, dtype=float)
        watts = np.asarray(self.watts, dtype=float)
        if times.ndim != 1 or times.shape != watts.shape or times.size == 0:
            raise ValueError("a supply series needs as many watts as times, at least one")
        if not (np.isfinite(times).all() and np.isfinite(watts).all()):
            raise ValueError("supply times and watts must be finite")
        if (times[1:] <= times[:-1]).any():         # (not np.diff: the span of two finite times may overflow)
            raise ValueError("supply times must increase strictly")
        if (watts < 0).any():
            raise ValueError("supply watts must be >= 0")
        object.__setattr__(self, "times_s", times)
        object.__setattr__(self, "watts", watts)

    def at(self, t_s: np.ndarray | float) -> np.ndarray:
        """S at each time (0 before the first sample)."""
        index = np.searchsorted(self.times_s, t_s, side="right") - 1
        return np.where(index >= 0, self.watts[np.maximum(index, 0)], 0.0)

    def pieces(self, start_s: float, end_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Edges e_0 = start < ... < e_n = end and the constant supply on each [e_i, e_i+1)."""
        inside = self.times_s[(self.times_s > start_s) & (self.times_s < end_s)]
        edges = np.concatenate(([start_s], inside, [end_s]))
        return edges, self.at(edges[:-1])

    def integral_j(self, start_s: float, end_s: float) -> float:
        if end_s <= start_s:
            return 0.0
        edges, watts = self.pieces(start_s, end_s)
        return sum_of_products(watts, np.diff(edges))       # sum_i S_i x (e_i+1 - e_i), W x s

    def scaled(self, factor: float) -> "SupplySeries":
        """The same shape with every value times ``factor``.

        >>> SupplySeries(np.array([0.0]), np.array([4.0])).scaled(2.5).watts.tolist()
        [10.0]
        """
        return SupplySeries(self.times_s, self.watts * factor, self.name)

    @property
    def peak_w(self) -> float:
        return float(self.watts.max())


@dataclass(frozen=True, slots=True)
class EnergySplit:
    """Energy over [start_s, end_s) split by source (joules)."""

    used_j: float            # integral of P
    supplied_j: float        # integral of S
    renewable_j: float       # integral of min(P, S)
    grid_j: float            # integral of max(0, P - S)
    curtailed_j: float       # integral of max(0, S - P)

    @property
    def renewable_share(self) -> float | None:
        """Share of the energy used that came from the renewable supply."""
        return self.renewable_j / self.used_j if self.used_j > 0 else None


def split_energy(power_times_s: np.ndarray, power_w: np.ndarray, end_s: float,
                 supply: SupplySeries) -> EnergySplit:
    """Split the piecewise-constant power ``power_w[i]`` on ``[power_times_s[i], power_times_s[i+1])``
    (the last piece until ``end_s``) against ``supply``, exactly over the pieces of both.

    100 W for 10 s then 300 W for 10 s, against 200 W from t=5:

    >>> s = SupplySeries(np.array([5.0]), np.array([200.0]))
    >>> e = split_energy(np.array([0.0, 10.0]), np.array([100.0, 300.0]), 20.0, s)
    >>> e.used_j, e.supplied_j      # 100*10 + 300*10;  200 * 15
    (4000.0, 3000.0)
    >>> e.renewable_j, e.grid_j, e.curtailed_j   # 0*5 + 100*5 + 200*10; 100*5 + 100*10; 100*5
    (2500.0, 1500.0, 500.0)
    """
    times = np.asarray(power_times_s, dtype=float)
    watts = np.asarray(power_w, dtype=float)
    if times.size == 0:
        return EnergySplit(0.0, 0.0, 0.0, 0.0, 0.0)
    start_s = float(times[0])
    inside = supply.times_s[(supply.times_s > start_s) & (supply.times_s < end_s)]
    edges = np.union1d(np.append(times, end_s), inside)
    edges = edges[(edges >= start_s) & (edges <= end_s)]
    left = edges[:-1]
    dt = np.diff(edges)
    p = watts[np.searchsorted(times, left, side="right") - 1]
    s = supply.at(left)
    used = np.minimum(p, s)
    # sum_i X_i x dt_i for X = P, S, min(P, S), P - min(P, S), S - min(P, S): W x s, correctly rounded
    return EnergySplit(used_j=sum_of_products(p, dt), supplied_j=sum_of_products(s, dt),
                       renewable_j=sum_of_products(used, dt), grid_j=sum_of_products(p - used, dt),
                       curtailed_j=sum_of_products(s - used, dt))


# -- synthetic supply models ------------------------------------------------------------------------
def solar_supply(start_s: float, end_s: float, peak_w: float, *, seed: int = 0, step_s: float = 900.0,
                 sunrise_h: float = 6.0, sunset_h: float = 18.0, cloudiness: float = 0.3,
                 day_offset_s: float = 0.0) -> SupplySeries:
    """A diurnal solar supply: ``peak_w * clear_day * noise * sin(pi * (h - sunrise) / daylight)``
    between sunrise and sunset, 0 at night, in steps of ``step_s`` (the value at a step's middle).

    Each day's clearness is uniform in [1 - cloudiness, 1]; each step gets a multiplicative
    log-normal noise (sigma 0.1), capped so that no step exceeds ``peak_w``.  Hour of day is
    ``((t + day_offset_s) mod 86400) / 3600``: trace time 0 is midnight unless shifted.

    >>> s = solar_supply(0.0, 2 * 86400.0, 1000.0, seed=3)
    >>> float(s.at(3 * 3600.0)), 0 < float(s.at(12 * 3600.0)) <= 1000.0
    (0.0, True)
    >>> s.peak_w <= 1000.0, solar_supply(0.0, 2 * 86400.0, 1000.0, seed=3).watts.tolist() == s.watts.tolist()
    (True, True)
    """
    _check_span(start_s, end_s, step_s)
    rng = np.random.default_rng(seed)
    first = math.floor((start_s + day_offset_s) / step_s) * step_s - day_offset_s
    times = first + step_s * np.arange(math.ceil((end_s - first) / step_s) + 1)
    local = times + day_offset_s + step_s / 2
    day = np.floor(local / DAY_S).astype(np.int64)
    days = np.arange(day.min(), day.max() + 1)
    clear = dict(zip(days.tolist(), rng.uniform(1.0 - cloudiness, 1.0, days.size).tolist()))
    hour = (local % DAY_S) / 3600.0
    angle = np.pi * (hour - sunrise_h) / (sunset_h - sunrise_h)
    shape = np.where((hour > sunrise_h) & (hour < sunset_h), np.sin(np.clip(angle, 0.0, np.pi)), 0.0)
    noise = np.exp(rng.normal(0.0, 0.1, times.size))
    watts = np.minimum(peak_w, peak_w * shape * np.array([clear[d] for d in day.tolist()]) * noise)
    return SupplySeries(times, np.maximum(watts, 0.0), "solar")


def wind_supply(start_s: float, end_s: float, rated_w: float, *, seed: int = 0, step_s: float = 3600.0,
                mean_speed_ms: float = 7.5, sigma: float = 0.5, persistence: float = 0.95) -> SupplySeries:
    """A wind farm: the log of wind speed is an AR(1) process (``persistence`` per step, stationary
    standard deviation ``sigma``) around ``mean_speed_ms``; a turbine power curve turns speed into
    power: 0 below 3 m/s, cubic up to the rated power at 12 m/s, rated up to 25 m/s, 0 above.

    >>> w = wind_supply(0.0, 7 * 86400.0, 2000.0, seed=1)
    >>> w.watts.size, float(w.watts.min()) >= 0.0, w.peak_w <= 2000.0
    (169, True, True)
    >>> turbine_power_w(np.array([2.0, 7.5, 12.0, 30.0]), 1.0).round(3).tolist()
    [0.0, 0.232, 1.0, 0.0]
    """
    _check_span(start_s, end_s, step_s)
    rng = np.random.default_rng(seed)
    count = math.ceil((end_s - start_s) / step_s) + 1
    times = start_s + step_s * np.arange(count)
    shocks = rng.normal(0.0, sigma * math.sqrt(1.0 - persistence ** 2), count)
    x = np.empty(count)
    x[0] = rng.normal(0.0, sigma)
    for k in range(1, count):
        x[k] = persistence * x[k - 1] + shocks[k]
    speed = mean_speed_ms * np.exp(x - sigma ** 2 / 2)
    return SupplySeries(times, turbine_power_w(speed, rated_w), "wind")


def turbine_power_w(speed_ms: np.ndarray, rated_w: float, cut_in_ms: float = 3.0, rated_ms: float = 12.0,
                    cut_out_ms: float = 25.0) -> np.ndarray:
    """A generic turbine power curve (cubic between cut-in and rated speed)."""
    ramp = (speed_ms ** 3 - cut_in_ms ** 3) / (rated_ms ** 3 - cut_in_ms ** 3)
    curve = np.where(speed_ms < rated_ms, ramp, 1.0)
    return rated_w * np.where((speed_ms < cut_in_ms) | (speed_ms > cut_out_ms), 0.0, curve)


def _check_span(start_s: float, end_s: float, step_s: float) -> None:
    if not (math.isfinite(start_s) and math.isfinite(end_s) and end_s > start_s):
        raise ValueError(f"bad supply span [{start_s}, {end_s})")
    if not step_s > 0:
        raise ValueError("step_s must be > 0")


def parse_supply_csv(text: str, path: str = "<supply.csv>") -> SupplySeries:
    """A supply series from CSV text: two columns, time in seconds and power in watts, one sample a
    line; an optional header line (e.g. ``time_s,watts``); ``#`` comments and blank lines skipped.

    >>> parse_supply_csv("time_s,watts\\n0,0\\n3600,1500.5\\n# evening\\n7200,0\\n").watts.tolist()
    [0.0, 1500.5, 0.0]
    >>> parse_supply_csv("0,1\\n0,2\\n")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: <supply.csv>:2: time 0 does not come after the previous sample (0)
    """
    times: list[float] = []
    watts: list[float] = []
    header_seen = False
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 2:
            raise InputError(f"expected 2 comma-separated fields (time, watts), got {len(fields)}",
                             path=path, line=number)
        try:
            t, w = ascii_float(fields[0]), ascii_float(fields[1])
        except ValueError:
            if not header_seen and not times:  # a header line (one at most)
                header_seen = True
                continue
            raise InputError(f"not numbers: {line!r}", path=path, line=number) from None
        if not (math.isfinite(t) and math.isfinite(w)) or w < 0:
            raise InputError(f"time must be finite and watts finite and >= 0, got {line!r}", path=path, line=number)
        if times and t <= times[-1]:
            raise InputError(f"time {fields[0]} does not come after the previous sample ({times[-1]:g})",
                             path=path, line=number)
        times.append(t)
        watts.append(w)
    if not times:
        raise InputError("no samples (expected lines 'time_s,watts')", path=path)
    return SupplySeries(np.array(times), np.array(watts), "csv")


# -- power the cluster draws ----------------------------------------------------------------------
def idle_power_w(cluster: Cluster) -> float:
    """The cluster's power with nothing allocated.

    >>> idle_power_w(Cluster.homogeneous(3, cpus=4, idle_w=100.0, busy_w=300.0))
    300.0
    """
    return float(cluster.idle_w.sum() + (cluster.gpu_idle_w * cluster.capacity[:, GPU]).sum())


def max_power_w(cluster: Cluster) -> float:
    """The cluster's power with everything allocated."""
    return float(cluster.busy_w.sum() + (cluster.gpu_max_w * cluster.capacity[:, GPU]).sum())


def job_power_bound_w(cluster: Cluster, nodes: int, per_node: np.ndarray) -> float:
    """An upper bound on the power a job adds above idle, whichever nodes it gets: per node, its
    CPUs times the largest (busy - idle) per CPU plus its GPUs times the largest (max - idle) per
    GPU.  Exact on a cluster whose nodes all draw alike (the linear model of greenslurm.clustermodel.power).

    >>> c = Cluster.homogeneous(2, cpus=4, idle_w=100.0, busy_w=300.0)
    >>> job_power_bound_w(c, 2, np.array([2.0, 0.0, 0.0]))      # 2 nodes * 2 CPUs * (300-100)/4
    200.0
    """
    cpus = cluster.capacity[:, CPU]
    per_cpu = np.where(cpus > 0, (cluster.busy_w - cluster.idle_w) / np.where(cpus > 0, cpus, 1), 0.0)
    per_gpu = cluster.gpu_max_w - cluster.gpu_idle_w
    return float(nodes * (per_node[CPU] * per_cpu.max() + per_node[GPU] * per_gpu.max()))


def job_renewable_j(start_s: float, end_s: float, job_power_w: float, power_times_s: np.ndarray,
                    power_w: np.ndarray, supply: SupplySeries) -> float:
    """The renewable part of a job's energy: on each piece where the cluster draws P and the supply
    gives S, the cluster's renewable energy min(P, S) is shared among what draws in proportion to
    its power, so the job gets ``job_power_w * min(P, S) / P`` there.  ``power_w[i]`` holds on
    ``[power_times_s[i], power_times_s[i+1])`` and the last one for ever (the ledger's series).
    Summed over every job and the idle part, this gives back the cluster's renewable energy of
    :func:`split_energy`.

    A 100 W job on a cluster drawing 400 W, against 200 W of supply from t=5 (half of it renewable
    from then on):

    >>> job_renewable_j(0.0, 10.0, 100.0, np.array([0.0]), np.array([400.0]),
    ...                 SupplySeries(np.array([5.0]), np.array([200.0])))     # 100 * 200/400 * 5 s
    250.0
    """
    if end_s <= start_s or job_power_w <= 0:
        return 0.0
    times = np.asarray(power_times_s, dtype=float)
    inside = np.concatenate((times[(times > start_s) & (times < end_s)],
                             supply.times_s[(supply.times_s > start_s) & (supply.times_s < end_s)]))
    edges = np.unique(np.concatenate(([start_s], inside, [end_s])))
    left = edges[:-1]
    index = np.searchsorted(times, left, side="right") - 1
    p = np.where(index >= 0, np.asarray(power_w, dtype=float)[np.maximum(index, 0)], 0.0)
    s = supply.at(left)
    share = np.divide(np.minimum(p, s), p, out=np.zeros_like(p), where=p > 0)
    # job W x sum_i (min(P_i, S_i) / P_i) x dt_i (s), the sum correctly rounded
    return float(job_power_w * sum_of_products(share, np.diff(edges)))
