"""The hook's power saving inside a replay of the slurm queue (``power_save = true`` in hook.toml).

Live, Slurm never powers a node down by itself (``SuspendTime`` of a year, the lines
:func:`~greenslurm.slurm_plugin.power.slurm_conf_lines` writes); after every sync (each
``sync_interval_s``) the service's :class:`~greenslurm.slurm_plugin.power.PowerManager` decides on
Slurm's view of the cluster and tells Slurm (``scontrol update``): ``State=POWER_DOWN``, ``State=DRAIN``
of a node Slurm says is powered down, ``State=RESUME`` then ``State=POWER_UP``.  Here the same
``PowerManager.decide`` runs at the same cadence on the replay's cluster, shown as Slurm shows it (the
snapshot the hook's admission builds, :meth:`~greenslurm.slurm_plugin.admission.HookAdmission.snapshot`,
with each node's power flags and drain reason), and its actions go to the replay's model of Slurm's
power saving (:class:`~greenslurm.sim.engine.slurm_power.SlurmPowerMachine`, configured from those same
slurm.conf lines), as Slurm 22.05 takes them (node_mgr.c ``update_node``, power_save.c
``_do_power_work``):

- ``POWER_DOWN``: the idle node is not allocatable from then on; the power-save thread's next scan
  suspends it; it draws ``off_w`` from then and stays unallocatable for ``SuspendTimeout``; then it is
  POWERED_DOWN, allocatable again until the service's next sync drains it.
- ``DRAIN``: the node is not allocatable (a job cannot make Slurm wake it).
- ``RESUME`` + ``POWER_UP``: the node is allocatable again; the next scan resumes it (within
  ResumeRate); it boots for the hook's ``boot_s`` drawing its idle power, then it is up.

A job Slurm gives a powered-down node that is not drained yet waits CONFIGURING while Slurm resumes the
node itself, as live.  Energy goes through the power-state ledger of every power-saving replay.  The
budget (``power_budget_w``) is held as live, by the service's own rule: a node is woken only if the most
every node can draw (its most unless parked) stays within it, in the hook's node model
(``node_idle_w``, ``node_busy_w``, ``gpu_max_w``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

import numpy as np

from greenslurm.allocation.selection import NodeSelection
from greenslurm.clustermodel import Cluster
from greenslurm.sim.engine.slurm_power import SlurmPowerMachine
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving
from greenslurm.sim.machines.node_states import BOOTING, OFF, ON
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.power import DRAIN_REASON, PowerManager, slurm_conf_lines, worst_case_w
from greenslurm.slurm_plugin.live_nodes import NodePower


def hook_power_saving(config: HookConfig, slurmctld_start_s: float | None = None) -> SlurmPowerSaving:
    """Slurm's power-saving settings of the live setup: the slurm.conf lines ``greenslurm hook install``
    writes for ``config`` (Slurm's own idle timer a year), the hook's boot time and off power;
    ``slurmctld_start_s``: when slurmctld started, on the replay's clock (its 30-second checks of
    jobs waiting for booted nodes count from there; None: the replay's start).

    >>> s = hook_power_saving(HookConfig(power_save=True, boot_s=120.0, suspend_timeout_s=30.0))
    >>> s.suspend_time_s, s.suspend_timeout_s, s.resume_timeout_s, s.boot_s
    (31536000.0, 30.0, 240.0, 120.0)
    """
    from greenslurm.traces.slurm_conf import parse_slurm_conf_text
    lines = slurm_conf_lines("/greenslurm-suspend", "/greenslurm-resume", config.boot_s, config.suspend_timeout_s)
    conf = parse_slurm_conf_text("\n".join(line for line in lines if not line.startswith("#")) + "\n")
    saving = SlurmPowerSaving.from_conf(conf, boot_s=config.boot_s, off_w=config.off_w)
    return saving if slurmctld_start_s is None else replace(saving, slurmctld_start_s=slurmctld_start_s)


class HookPowerMachine(SlurmPowerMachine):
    """The slurm queue's machine with the hook's power decisions at each sync (see the module text)."""

    def __init__(self, cluster: Cluster, selection: NodeSelection | None = None,
                 config: HookConfig | None = None, slurmctld_start_s: float | None = None) -> None:
        config = config or HookConfig(power_save=True)
        super().__init__(cluster, selection, hook_power_saving(config, slurmctld_start_s))
        self.hook_config = config
        self.manager = PowerManager(config, NodePower(config.node_idle_w, config.node_busy_w, config.gpu_idle_w,
                                                      config.gpu_max_w))
        self._index = {node.name: i for i, node in enumerate(cluster.nodes)}     # node name -> its index
        self.parked = np.zeros(cluster.size, dtype=bool)      # drained by the service's power saving
        self.actions: list[tuple[float, str, str]] = []       # (time, power_down | drain | power_up, node)
        self.worst_case: list[tuple[float, float]] = []       # (sync time, most the nodes can draw, W)
        self._sync_due_s = math.inf
        self._last_seen: tuple | None = None

    @property
    def idle_power_down_s(self) -> float:
        """How long a node is idle before the hook powers it down (``suspend_after_s``)."""
        return self.hook_config.suspend_after_s

    def attach(self, replay) -> None:
        admission = getattr(replay, "admission", None)
        if admission is None or not hasattr(admission, "snapshot"):
            raise ValueError("the hook's power saving runs with the hook in front of the slurm queue")
        admission.power_view = self              # its snapshots show the nodes' power states, as Slurm's do
        super().attach(replay)
        self._sync_due_s = replay.ledger.start_s
        self._push(self._sync_due_s, self._sync)

    def _resume(self, node: int, now_s: float) -> None:
        super()._resume(node, now_s)

        def registered(t: float) -> None:    # after the boot (pushed after it): Slurm schedules again
            self._timers -= 1
            up = getattr(self.replay.strategy, "node_up", None)
            if up is not None and self.state[node] == ON:
                up(t)
        self._push(now_s + self.boot_s, registered)

    # -- the queue's view ------------------------------------------------------------------------
    def unavailable(self) -> np.ndarray | None:
        blocked = self.powering_down | self.power_down_asked | self.parked
        return blocked if blocked.any() else None

    def node_flags(self) -> list[tuple[str, str]]:
        """Per node: the power and drain flags Slurm shows (``+drain+powered_down``) and the reason, as
        sinfo showed them in the live power test (``tests/test_hook_power_live.py``): ``IDLE+POWER_DOWN``,
        ``IDLE+POWERING_DOWN``, ``IDLE+DRAIN+POWERED_DOWN``, ``IDLE+POWER_UP+POWERED_DOWN+NOT_RESPONDING``,
        ``ALLOCATED+NOT_RESPONDING+POWERING_UP``."""
        out = []
        for i in range(self.cluster.size):
            state = int(self.state[i])
            if state == OFF and self.powering_down[i]:
                flags = "+powering_down"
            elif state == OFF:               # asked to power up: its slurmd is off (as sinfo shows live)
                flags = "+power_up+powered_down+not_responding" if self.power_up_asked[i] else "+powered_down"
            elif state == BOOTING:         # power_save.c marks a resumed node NO_RESPOND until it registers
                flags = "+not_responding+powering_up"
            else:
                flags = "+power_down" if self.power_down_asked[i] else ""
            if self.parked[i]:
                out.append(("+drain" + flags, DRAIN_REASON))
            else:
                out.append((flags, ""))
        return out

    # -- the service's sync ------------------------------------------------------------------------
    def _sync(self, now_s: float) -> None:
        self._timers -= 1
        replay = self.replay
        snapshot = replay.admission.snapshot(now_s, list(self.running.values()), replay.strategy.queued())
        actions = self.manager.decide(snapshot, now_s)
        for action in actions:
            node = self._index[action.node]
            self.actions.append((now_s, action.action, action.node))
            if action.action == "power_down":
                self.power_down_asked[node] = True
            elif action.action == "drain":
                self.parked[node] = True
            elif action.action == "power_up":
                self.parked[node] = False
                self.power_up_asked[node] = True
        if actions:
            self._node_changed(now_s)            # update_node: last_node_update, the next tick scans
            self._tell_queue()
        self._note_worst_case(now_s, snapshot)
        # the cluster as this sync saw it: a later sync that sees it unchanged after a scheduling pass,
        # with nothing left to happen, ends the syncs (see _may_change)
        seen = (len(self.running), len(snapshot.pending), self.state.tobytes(), self.parked.tobytes())
        still, self._last_seen = seen == self._last_seen, seen
        if not still or self._may_change(now_s, bool(actions), snapshot):
            self._sync_due_s = now_s + self.hook_config.sync_interval_s
            self._push(self._sync_due_s, self._sync)

    def _note_worst_case(self, now_s: float, snapshot) -> None:
        value = worst_case_w(self.state, self.parked, self.manager.most_w(snapshot.nodes), self.hook_config.off_w)
        if not self.worst_case or self.worst_case[-1][1] != value:
            self.worst_case.append((now_s, value))

    def _may_change(self, now_s: float, acted: bool, snapshot) -> bool:
        """Whether a later sync can decide anything new: work is left (jobs running, events to come,
        nodes changing state, actions pending) or an idle node's time is still to come; else the
        cluster stands still (jobs the budget holds back for ever wait at the end, as live).  Asked
        only when the previous sync saw the cluster as this one does: a scheduling pass came between."""
        if not self._other_work():
            return False                 # the replay is over: its ledger closed at the last end
        if acted or self.running or len(self.replay.events) > self._timers:
            return True
        if (self.state == BOOTING).any() or self.powering_down.any() or self.power_down_asked.any() \
                or self.power_up_asked.any():
            return True
        if any(p.begin_s is not None and p.begin_s > now_s for p in snapshot.pending):
            return True
        idle_since = self.manager.idle_since
        return any(now_s - since < self.hook_config.suspend_after_s for since in idle_since.values())

    def power_totals(self, end_s: float | None = None):
        totals = super().power_totals(end_s)
        budget = self.hook_config.power_budget_w
        return replace(totals, budget_w=budget or None)

    def _check(self) -> None:
        super()._check()
        assert not (self.parked & (self.state != OFF)).any(), "a node drained for power saving is not off"


def hook_power_machine_factory(config: HookConfig, slurmctld_start_s: float | None = None
                               ) -> Callable[[Cluster, NodeSelection | None], HookPowerMachine]:
    """What ``Replay(machine_factory=..., queue="slurm", admission=HookAdmission(...))`` takes to replay
    the hook's power saving (``slurmctld_start_s``: see :func:`hook_power_saving`)."""
    def build(cluster: Cluster, selection: NodeSelection | None = None) -> HookPowerMachine:
        return HookPowerMachine(cluster, selection, config, slurmctld_start_s)
    return build
