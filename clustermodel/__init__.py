"""The shared model of greenslurm: jobs, nodes, clusters and the physics of power and energy.

This package is the bottom layer: pure data and pure functions, no I/O beyond parsing a TOML
text that the caller has read, no clocks.  Every other package may import it; it imports none
of them.  Times are float seconds, power watts, energy joules, memory MiB (units in names).
"""

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job import JobSpec
from greenslurm.clustermodel.node import NodeSpec

__all__ = ["InputError", "JobSpec", "NodeSpec", "Cluster"]


def __getattr__(name: str):
    # Cluster (numpy) loads on first use: the command line's help and its errors need only InputError
    if name == "Cluster":
        from greenslurm.clustermodel.cluster import Cluster
        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
