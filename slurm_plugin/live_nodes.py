"""The live nodes as the planner's cluster: every node's power (Slurm records none), the cluster the
view plans on, and which nodes a job may ever use (partitions, features, GPU shards).  The view's
planning (:mod:`greenslurm.slurm_plugin.view`) and the power saving's waking
(:mod:`greenslurm.slurm_plugin.power`) ask the same question here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenslurm.clustermodel import Cluster, NodeSpec
from greenslurm.clustermodel.eligibility import Eligibility, or_features, planned_features
from greenslurm.clustermodel.node import DEFAULT_GPU_POWER_W, DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W
from greenslurm.slurm_plugin.snapshot import LiveNode


@dataclass(frozen=True)
class NodePower:
    """Every node's power (Slurm records none): the replay's linear node model, in watts."""

    idle_w: float = DEFAULT_NODE_IDLE_W
    busy_w: float = DEFAULT_NODE_BUSY_W
    gpu_idle_w: float = DEFAULT_GPU_POWER_W[0]
    gpu_max_w: float = DEFAULT_GPU_POWER_W[1]

    def node(self, name: str, cpus: int, memory_mb: float = 0.0, gpus: int = 0, **more) -> NodeSpec:
        """A node of this power model.

        >>> NodePower(50.0, 150.0).node("n1", 4, gpus=1).idle_power_w     # 50 W + one idle GPU at 30 W
        80.0
        """
        return NodeSpec(name, cpus, memory_mb, gpus, idle_w=self.idle_w, busy_w=self.busy_w,
                        gpu_idle_w=self.gpu_idle_w, gpu_max_w=self.gpu_max_w, **more)


def features_of(constraint: str) -> tuple[str, ...]:
    """The features of a pending job's constraint as the view plans them (:func:`planned_features`);
    a form no planner models is kept whole as one item, which :func:`eligible_nodes` gives no node
    (the job is not planned, as before Slurm places it).

    >>> features_of("k80&ib"), features_of("a|b"), features_of(""), features_of("a*3")
    (('ib', 'k80'), ('a|b',), (), ('a*3',))
    """
    planned = planned_features(constraint)
    return (constraint,) if planned is None else planned


def eligible_nodes(eligibility: Eligibility, nodes: list[LiveNode], shards_per_gpu: np.ndarray, partition: str,
                   features: tuple[str, ...], shards: int) -> np.ndarray:
    """The nodes a job of ``partition`` asking ``features`` (and ``shards`` GPU shards on a node) may
    ever use, as a mask over ``nodes`` (those of ``eligibility``'s cluster): the replay's partition
    and constraint rule, plus a constraint asking any one of several features (``a|b``, a pending
    job's or a submission's), plus nodes with that many shards per GPU.  The view's planning and the
    power saving's waking ask this one question.

    >>> ns = [LiveNode("a", 4, partitions=("cpu",)), LiveNode("g", 4, gpus=1, shards=4, partitions=("gpu",),
    ...                                                       features=("k80",))]
    >>> e = Eligibility(live_cluster(ns))
    >>> per_gpu = np.array([n.shards_per_gpu for n in ns])
    >>> [eligible_nodes(e, ns, per_gpu, p, f, s).tolist() for p, f, s in
    ...  [("cpu,gpu", (), 0), ("gpu", ("k80|v100",), 0), ("cpu", ("k80",), 0), ("", (), 2), ("nope", (), 0)]]
    [[True, True], [False, True], [False, False], [False, True], [False, False]]
    """
    anyof = set(or_features(features[0])) if len(features) == 1 else set()
    eligible = eligibility.mask(partition, "" if anyof else "&".join(features))
    if anyof and not isinstance(eligible, str):
        has = np.array([not anyof.isdisjoint(node.features) for node in nodes])
        eligible = has if eligible is None else (eligible & has)
    if isinstance(eligible, str):           # no node ever: the job fits nowhere
        ok = np.zeros(len(nodes), dtype=bool)
    else:
        ok = np.ones(len(nodes), dtype=bool) if eligible is None else eligible.copy()
    if shards:
        ok &= shards_per_gpu >= shards
    return ok


def live_cluster(nodes: list[LiveNode], power: NodePower | None = None, default_partition: str = "") -> Cluster:
    """The cluster of ``nodes`` (those the view plans on) with the site's power model; a job naming
    no partition may use the nodes of ``default_partition`` only.

    >>> live_cluster([LiveNode("n1", 4), LiveNode("n2", 8, state="down")]).size
    2
    """
    power = power or NodePower()
    return Cluster((power.node(n.name, max(n.cpus, 1), n.memory_mb, n.gpus, partitions=tuple(n.partitions),
                               features=tuple(n.features)) for n in nodes), default_partition=default_partition)
