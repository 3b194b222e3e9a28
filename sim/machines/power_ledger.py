"""The energy ledger with node power states (:class:`PowerStateLedger`): off and booting nodes
draw their own power, integrated exactly, and ``total = jobs + unallocated = sum over nodes`` still
holds; and what power states added to a replay's account (:class:`PowerStateTotals`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greenslurm.clustermodel import Cluster
from greenslurm.clustermodel.cluster import GPU
from greenslurm.sim.accounting.ledger import EnergyLedger
from greenslurm.sim.accounting.result import EnergyTotals
from greenslurm.sim.machines.node_states import BOOTING, OFF, ON


@dataclass(slots=True)
class PowerStateTotals:
    """What power states added to a replay's energy account (joules, seconds)."""

    off_j: float               # energy drawn by nodes while off
    boot_j: float              # energy drawn by nodes while booting
    saved_vs_idle_j: float     # idle energy the off and booting time would have cost, less off + boot
    off_node_s: float
    boot_node_s: float
    boots: int
    suspends: int
    peak_power_w: float
    budget_w: float | None
    refused_starts: int        # times a fitting job was held back by the budget
    imbalance_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    imbalance: np.ndarray = field(default_factory=lambda: np.zeros(0))   # phase imbalance from each time on
    mean_imbalance: float = 0.0  # time-weighted
    phase_loss_j: float = 0.0    # lost in the distribution to phase imbalance (beside total_j)
    migrations: int = 0          # job moves (consolidation)
    moved_jobs: int = 0          # distinct jobs moved
    migration_pause_s: float = 0.0   # job-seconds paused by moves


class PowerStateLedger(EnergyLedger):
    """The energy ledger with node power states: OFF nodes draw ``off_w``, BOOTING ``boot_w``.

    The base ledger charges every unallocated node-second at idle power; at the close the off and
    booting seconds are re-priced, so total = jobs + unallocated = sum of per-node energy still holds.
    """

    def __init__(self, cluster: Cluster, start_s: float, off_w: float, boot_w: np.ndarray) -> None:
        super().__init__(cluster, start_s)
        self.idle_full_w = cluster.idle_w + cluster.gpu_idle_w * cluster.capacity[:, GPU]
        self.off_w = off_w
        self.boot_w = boot_w
        n = cluster.size
        self.state = np.full(n, ON)
        self._since_s = np.full(n, start_s)
        self.off_s = np.zeros(n)
        self.boot_s = np.zeros(n)

    def state_power_w(self, node: int, state: int) -> float:
        return float((self.idle_full_w[node], self.off_w, self.boot_w[node])[state])

    def on_state(self, node: int, state: int, now_s: float) -> None:
        """Node ``node`` (with no job) changes power state at ``now_s``."""
        self.advance(now_s)
        old = int(self.state[node])
        self._account(node, old, now_s)
        self.power_w += self.state_power_w(node, state) - self.state_power_w(node, old)
        self.state[node] = state
        self._since_s[node] = now_s
        if self.power_w > self.peak_power_w:
            self.peak_power_w = self.power_w

    def _account(self, node: int, state: int, now_s: float) -> None:
        if state == OFF:
            self.off_s[node] += now_s - self._since_s[node]
        elif state == BOOTING:
            self.boot_s[node] += now_s - self._since_s[node]

    def close(self, end_s: float) -> EnergyTotals:
        for node in np.nonzero(self.state != ON)[0].tolist():
            self._account(node, int(self.state[node]), end_s)
            self._since_s[node] = end_s
        totals = super().close(end_s)
        # The base ledger priced these seconds at idle power (the nodes had no job): re-price.
        repriced = (self.off_w - self.idle_full_w) * self.off_s + (self.boot_w - self.idle_full_w) * self.boot_s
        totals.per_node_j = totals.per_node_j + repriced
        totals.unallocated_j += float(repriced.sum())
        totals.idle_nodes_j -= float((self.idle_full_w * (self.off_s + self.boot_s)).sum())
        return totals

    @property
    def off_j(self) -> float:
        return float(self.off_w * self.off_s.sum())

    @property
    def boot_j(self) -> float:
        return float((self.boot_w * self.boot_s).sum())
