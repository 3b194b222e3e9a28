"""Renewable supply for a replay: from a CSV file (``time_s,watts``) or a synthetic model.

``solar`` and ``wind`` are scaled so that their peak (solar) or rated power (wind) is ``scale`` times
the cluster's full power (every CPU and GPU busy), and cover the replay with a margin of 30 days
after the last submission, so that jobs planned later still see a supply.
"""

from __future__ import annotations

from typing import Sequence

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.renewable import SupplySeries, max_power_w, parse_supply_csv, solar_supply, wind_supply
from greenslurm.traces.source import read_text

SYNTHETIC = ("solar", "wind")
MARGIN_S = 30 * 86400.0


def load_supply(spec: str, jobs: Sequence[JobSpec], cluster: Cluster, scale: float = 1.0,
                seed: int = 0) -> SupplySeries:
    """The supply named by ``spec``: "solar", "wind" or a CSV path (InputError when unreadable).

    >>> from greenslurm.clustermodel import JobSpec
    >>> s = load_supply("solar", [JobSpec("a", 0.0, 60.0)], Cluster.homogeneous(2, cpus=4, busy_w=300.0))
    >>> s.name, s.peak_w <= 600.0, bool(s.times_s[-1] >= 30 * 86400)
    ('solar', True, True)
    """
    if spec in SYNTHETIC:
        start = min((j.submit_s for j in jobs), default=0.0)
        end = max((j.submit_s for j in jobs), default=0.0) + MARGIN_S
        peak = scale * max_power_w(cluster)
        model = solar_supply if spec == "solar" else wind_supply
        return model(start, end, peak, seed=seed)
    supply = parse_supply_csv(read_text(spec), path=spec)
    return supply.scaled(scale) if scale != 1.0 else supply
