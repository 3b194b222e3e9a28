"""The shared model of greenslurm: jobs, nodes, clusters and the physics of power and energy.

This package is the bottom layer: pure data and pure functions, no I/O beyond parsing a TOML
text that the caller has read, no clocks.  Every other package may import it; it imports none
of them.  Times are float seconds, power watts, energy joules, memory MiB (units in names).
"""

from clustermodel.errors import InputError
from clustermodel.job import JobSpec
from clustermodel.node import NodeSpec
from clustermodel.cluster import Cluster

__all__ = ["InputError", "JobSpec", "NodeSpec", "Cluster"]
