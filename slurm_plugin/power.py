"""Slurm's power saving, driven by the replay's power-state policy
(:mod:`greenslurm.allocation.power_policy`) under a peak power budget.

Slurm is set up to power nodes down and up only when told (``SuspendTime`` of a year: it never
decides by itself), with greenslurm's programs as ``SuspendProgram`` and ``ResumeProgram``
(``greenslurm hook power off|on HOSTLIST``, which run the site's ``power_off_command`` and
``power_on_command`` for each node).  After every sync the service decides:

- **Power down** an idle node (no job on it for ``suspend_after_s``, as Slurm's SuspendTime)
  unless the waiting jobs need it, keeping at least ``min_nodes_on`` nodes on and never a node a
  pending job is pinned to: ``scontrol update State=POWER_DOWN``; once Slurm says the node is
  powered down it is drained (reason ``greenslurm: power saving``), so that Slurm cannot wake it
  for a job by itself: only the service wakes nodes.
- **Wake** off nodes while the jobs eligible now want more CPUs than the powered nodes have free
  or will bring (under a budget only the first waiting job's), on the phase with the fewest
  powered nodes (``wake_order``), while the budget allows: ``State=RESUME`` (the drain) then
  ``State=POWER_UP``; Slurm runs the ResumeProgram and starts the waiting jobs once the node is up.
  Jobs placed into greener hours (a begin time later than now) wake only the node they are pinned
  to, ``boot_s`` before their begin time.
- **The budget** (``power_budget_w``) holds at every instant without knowing which jobs Slurm will
  start: a node counts its most power (every CPU and GPU busy) unless it is powered down *and*
  drained by the service, then ``off_w``.  A node is woken only if that sum stays within the budget.
"""

from __future__ import annotations

import logging
import math
import re
import shlex
import subprocess
from dataclasses import dataclass

import numpy as np

from greenslurm.allocation.power_policy import needed_by_head, needed_by_queue, suspend_next, wake_nodes, wanted_cpus
from greenslurm.clustermodel.phases import phase_of_nodes

log = logging.getLogger("greenslurm.hook.power")

from greenslurm.slurm_plugin.view import PARKED_REASON as DRAIN_REASON  # noqa: E402
OFF_FLAGS = ("powered_down", "powering_down", "power_down")
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
from greenslurm.sim.machines.node_states import BOOTING, OFF, ON, STATE_NAMES  # noqa: E402,F401


def power_state(state: str) -> int:
    """ON, BOOTING or OFF from a node's Slurm state and flags (``idle+powered_down``).

    >>> [STATE_NAMES[power_state(s)] for s in ("idle", "mixed+powering_up", "idle+drain+powered_down")]
    ['on', 'booting', 'off']
    """
    parts = set(state.lower().replace("+", " ").split())
    if parts & set(OFF_FLAGS):
        return OFF
    return BOOTING if "powering_up" in parts else ON


def drawn_state(state: str) -> int:
    """The power state a node draws in, for energy accounting: OFF only once Slurm says it is powered
    down (while powering down it still draws), BOOTING while powering up, else ON.

    >>> [STATE_NAMES[drawn_state(s)] for s in ("idle+powering_down", "idle+drain+powered_down", "mixed+powering_up")]
    ['on', 'off', 'booting']
    """
    parts = set(state.lower().replace("+", " ").split())
    if "powered_down" in parts:
        return OFF
    return BOOTING if "powering_up" in parts else ON


def worst_case_w(states: np.ndarray, parked: np.ndarray, max_w: np.ndarray, off_w: float) -> float:
    """The most the nodes can draw whatever Slurm starts: a node powered down and drained by the
    service (``parked``) draws ``off_w``, any other its most.

    >>> worst_case_w(np.array([ON, OFF, OFF]), np.array([False, True, False]), np.full(3, 350.0), 10.0)
    710.0
    """
    parked_off = (states == OFF) & parked
    return float(np.where(parked_off, off_w, max_w).sum())


@dataclass(frozen=True)
class PowerAction:
    node: str
    action: str          # "power_down", "drain" (a node powered down: keep Slurm from waking it), "power_up"
    why: str


class PowerManager:
    """The service's power decisions (see the module text).  :meth:`decide` is pure given its
    inputs and the idle times it keeps; the service carries the actions out."""

    def __init__(self, config, power) -> None:
        self.config = config
        self.power = power
        self.idle_since: dict[str, float] = {}

    def decide(self, snapshot, now_s: float) -> list[PowerAction]:
        config = self.config
        nodes = snapshot.nodes
        if not nodes:
            return []
        names, cpus, max_w, states, flags, parked, other_down, index, used, free = self._node_table(snapshot)
        actions: list[PowerAction] = []
        # a node Slurm says is powered down but not drained yet: drain it (only the service wakes nodes)
        for i in np.flatnonzero((states == OFF) & ~parked):
            if "powered_down" in flags[i] and not other_down[i]:
                actions.append(PowerAction(names[i], "drain", "powered down"))
        # the jobs eligible now, in submission order
        waiting = [p for p in sorted(snapshot.pending, key=lambda p: p.job.submit_s)
                   if not p.held and (p.begin_s is None or p.begin_s <= now_s)]
        pinned = {name for p in snapshot.pending if not p.held for name in p.required_nodes}
        under_budget = config.power_budget_w > 0
        wanted = wanted_cpus([float(p.job.cpus) * max(p.tasks, 1) for p in waiting], under_budget)
        coming = float(free.sum())
        # idle times: an ON node without a job since when
        for i, name in enumerate(names):
            if states[i] == ON and used[i] == 0 and not other_down[i]:
                self.idle_since.setdefault(name, now_s)
            else:
                self.idle_since.pop(name, None)
        _, phase = phase_of_nodes(len(nodes), config.phases, config.nodes_per_cabinet, config.phase_layout)
        counts = np.bincount(phase[states != OFF], minlength=config.phases)
        candidates = [i for i, name in enumerate(names) if name not in pinned and self.idle_since.get(name) is not None
                      and now_s - self.idle_since[name] >= config.suspend_after_s]
        if waiting:     # the first waiting job, the shape of its per-node share, the nodes it fits on
            head = waiting[0]
            per_node = head.job.cpus / max(head.job.nodes, 1) if head.job.nodes else min(head.job.cpus, cpus.max())
            head_fits = cpus >= per_node
        while candidates and int(counts.sum()) > config.min_nodes_on:
            i = suspend_next(np.array(candidates), phase, counts)
            candidates.remove(i)
            if waiting and (needed_by_queue(wanted, coming - free[i])
                            or needed_by_head(i, (free >= per_node) & (states != OFF), head_fits,
                                              max(head.job.nodes, 1))):
                continue
            actions.append(PowerAction(names[i], "power_down", f"idle for {now_s - self.idle_since[names[i]]:.0f} s"))
            coming -= free[i]
            counts[phase[i]] -= 1
            self.idle_since.pop(names[i], None)
            states[i] = OFF                 # counted at its most until drained: no budget gained yet
        # jobs pinned to a node that is off and due to begin within a boot: wake the node now, so that
        # it is up when they may start (a job moved into greener hours keeps its planned start)
        soon = [p for p in sorted(snapshot.pending, key=lambda p: p.job.submit_s)
                if not p.held and (p.begin_s is None or p.begin_s <= now_s + config.boot_s)]
        if not soon:
            return actions
        # wake: the replay's round, on the nodes the service parked
        off = np.flatnonzero((states == OFF) & parked)
        if off.size == 0:
            return actions
        counts = np.bincount(phase[states != OFF], minlength=config.phases)
        budget_now = [worst_case_w(states, parked, max_w, config.off_w)]

        def try_wake(i: int, why: str | None = None) -> bool:
            added = max_w[i] - config.off_w
            if under_budget and budget_now[0] + added > config.power_budget_w + 1e-6:
                return False
            budget_now[0] += added
            parked[i] = False
            states[i] = BOOTING
            actions.append(PowerAction(names[i], "power_up", why or f"the queue needs it ({wanted:g} CPUs wanted, "
                                                                  f"{coming:g} free or coming)"))
            return True
        for i in self._pinned_off(soon, index, states, parked):
            if not try_wake(i, "a job pinned to it may start within a boot"):
                break
            counts[phase[i]] += 1
            free[i] = cpus[i]                # it comes with all its CPUs free
            coming += cpus[i]
        off = np.flatnonzero((states == OFF) & parked)
        if off.size == 0 or not waiting:
            return actions
        head_short = max(head.job.nodes, 1) - int(np.count_nonzero((free >= per_node) & (states != OFF)))
        need = wanted - coming
        if need <= 0 and head_short <= 0:
            return actions
        wake_nodes(off, need, head_short, head_fits, cpus, phase, counts, config.wake_order == "phase", try_wake)
        return actions

    def most_w(self, nodes) -> np.ndarray:
        """Per node, the most it can draw (W): busy with every GPU at its most (the budget's worst case)."""
        return np.array([self.power.busy_w + n.gpus * self.power.gpu_max_w for n in nodes])

    def _node_table(self, snapshot) -> tuple:
        """Per node of the snapshot, as arrays in its order: name, CPUs, worst-case power, power state,
        Slurm's state flags, whether the service parked it (drained with its reason), whether an admin
        or Slurm holds it down (neither used nor touched), the CPUs its running jobs use and the CPUs
        free or coming (a booting node's); and the node index by name."""
        nodes = snapshot.nodes
        names = [n.name for n in nodes]
        cpus = np.array([float(max(n.cpus, 1)) for n in nodes])
        max_w = self.most_w(nodes)
        states = np.array([power_state(n.state) for n in nodes])
        reasons = [getattr(n, "reason", "") or "" for n in nodes]
        flags = [set(n.state.lower().split("+")) for n in nodes]
        drained = [bool(f & {"drain", "drained", "draining"}) for f in flags]
        parked = np.array([d and r == DRAIN_REASON for d, r in zip(drained, reasons)])
        # nodes an admin drained or Slurm holds down: neither used nor touched
        other_down = np.array([(d and r != DRAIN_REASON) or bool(f & {"down", "fail", "not_responding"})
                               for d, r, f in zip(drained, reasons, flags)])
        index = {name: i for i, name in enumerate(names)}
        used = np.zeros(len(nodes))
        for job in snapshot.running:
            for use in job.uses or ():
                if use.node in index:
                    used[index[use.node]] += min(use.cpus, cpus[index[use.node]])
            if not job.uses:
                for name in job.nodes:
                    if name in index:
                        used[index[name]] = cpus[index[name]]
        free = np.where(states == ON, np.maximum(cpus - used, 0.0), np.where(states == BOOTING, cpus - used, 0.0))
        free = np.where(other_down, 0.0, free)
        return names, cpus, max_w, states, flags, parked, other_down, index, used, free

    @staticmethod
    def _pinned_off(waiting, index, states, parked) -> list[int]:
        """Nodes that are off and that jobs the hook pinned wait for (they are woken first)."""
        out: list[int] = []
        for job in waiting:
            for name in job.required_nodes:
                i = index.get(name)
                if i is not None and states[i] == OFF and parked[i] and i not in out:
                    out.append(i)
        return out


# -- SuspendProgram and ResumeProgram ----------------------------------------------------------------
def run_power_command(template: str, nodes: list[str], timeout_s: float) -> list[str]:
    """Run the site's power command once per node (``{node}`` in it is the node's name; no shell);
    returns the failures, one line each (a node name that is no plain host name is refused).

    >>> run_power_command("true {node}", ["n1", "n2;rm"], 5.0)
    ["'n2;rm': not a node name"]
    """
    failures = []
    for node in nodes:
        if not NODE_NAME.match(node):
            failures.append(f"{node!r}: not a node name")
            continue
        argv = [arg.replace("{node}", node) for arg in shlex.split(template)]
        try:
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            failures.append(f"{node}: {argv[0]} did not end within {timeout_s:g} s")
            continue
        except OSError as exc:
            failures.append(f"{node}: cannot run {argv[0]}: {exc.strerror or exc}")
            continue
        if result.returncode != 0:
            detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
            failures.append(f"{node}: {argv[0]} exited with {result.returncode}"
                            + (f": {detail[-1][:200]}" if detail else ""))
    return failures


def slurm_conf_lines(suspend_program: str, resume_program: str, boot_s: float,
                     suspend_timeout_s: float = 60.0) -> list[str]:
    """The slurm.conf lines of greenslurm's power saving.

    >>> slurm_conf_lines("/etc/slurm/greenslurm-suspend", "/etc/slurm/greenslurm-resume", 300)[:2]
    ['SuspendProgram=/etc/slurm/greenslurm-suspend', 'ResumeProgram=/etc/slurm/greenslurm-resume']
    """
    return [f"SuspendProgram={suspend_program}", f"ResumeProgram={resume_program}",
            "# greenslurm decides when nodes power down: Slurm's own idle timer is set beyond any idle time",
            "SuspendTime=31536000",
            f"SuspendTimeout={max(int(math.ceil(suspend_timeout_s)), 1)}",
            f"ResumeTimeout={max(int(math.ceil(boot_s)) * 2, 60)}"]
