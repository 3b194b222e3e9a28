"""Cluster-wide power and fragmentation of a GPU cluster, kept up to date node by node.

After each placement or release only the changed node is recomputed (pure functions of
:mod:`greenslurm.clustermodel.gpu_power` and :mod:`greenslurm.clustermodel.fragmentation`), so the totals cost O(1)
nodes per event.  A node's watts and fragment depend on nothing but its own free CPU and GPU amounts (its
capacity, GPU model and the workload are fixed), so they are remembered per node and state: a node back in
a state seen before takes the same floats again instead of four small numpy evaluations.
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.fragmentation import TargetWorkload, node_fragmentation_milli
from greenslurm.clustermodel.gpu_power import cpu_power_w, gpu_power_w
from greenslurm.clustermodel.gpu_state import GpuState


class GpuMeter:
    """EOPC split into CPU and GPU watts, and the cluster's fragmentation (milli-GPU; zero without a
    target workload).

    >>> from greenslurm.clustermodel import Cluster, NodeSpec
    >>> from greenslurm.clustermodel.gpu_state import GpuNodes, GpuTask
    >>> state = GpuState(GpuNodes.from_cluster(Cluster([NodeSpec("a", cpus=32, gpus=2, gpu_model="T4")])))
    >>> meter = GpuMeter(state)
    >>> meter.cpu_total_w, meter.gpu_total_w                   # one idle package, two idle T4
    (15.0, 20.0)
    >>> state.place(0, GpuTask(2000, num_gpu=1, gpu_milli=500), (0,)); meter.update(0)
    >>> meter.cpu_total_w, meter.gpu_total_w
    (120.0, 80.0)
    """

    def __init__(self, state: GpuState, workload: TargetWorkload | None = None) -> None:
        self.state, self.workload = state, workload
        nodes = state.nodes
        self.cpu_w = cpu_power_w(nodes.cpu_milli, state.cpu_free_milli, nodes.cpu_package)
        self.gpu_w = gpu_power_w(state.gpu_free_milli, nodes.gpu_idle_w, nodes.gpu_max_w)
        self.frag = (node_fragmentation_milli(state.cpu_free_milli, state.gpu_free_milli, nodes.model_index, workload)
                     if workload is not None else np.zeros(nodes.size))
        self.cpu_total_w = float(self.cpu_w.sum())
        self.gpu_total_w = float(self.gpu_w.sum())
        self.frag_total_milli = float(self.frag.sum())
        self._seen: dict[tuple[int, int, bytes], tuple[float, float, float | None]] = {}

    def update(self, node: int) -> None:
        """Recompute ``node`` after its state changed."""
        state = self.state
        key = (node, int(state.cpu_free_milli[node]), state.gpu_free_milli[node].tobytes())
        values = self._seen.get(key)
        if values is None:
            values = self._seen[key] = self._node_values(node)
        cpu, gpu, frag = values
        self.cpu_total_w += cpu - float(self.cpu_w[node])
        self.gpu_total_w += gpu - float(self.gpu_w[node])
        self.cpu_w[node], self.gpu_w[node] = cpu, gpu
        if frag is not None:
            self.frag_total_milli += frag - float(self.frag[node])
            self.frag[node] = frag

    def _node_values(self, node: int) -> tuple[float, float, float | None]:
        """CPU watts, GPU watts and fragment (milli-GPU; None without a workload) of ``node`` as it is now."""
        state, nodes, one = self.state, self.state.nodes, np.array([node])
        cpu = float(cpu_power_w(nodes.cpu_milli[one], state.cpu_free_milli[one], nodes.cpu_package)[0])
        gpu = float(gpu_power_w(state.gpu_free_milli[one], nodes.gpu_idle_w[one], nodes.gpu_max_w[one])[0])
        frag = None
        if self.workload is not None:
            frag = float(node_fragmentation_milli(state.cpu_free_milli[one], state.gpu_free_milli[one],
                                                  nodes.model_index[one], self.workload)[0])
        return cpu, gpu, frag

    @property
    def power_w(self) -> float:
        return self.cpu_total_w + self.gpu_total_w
