"""The settings of node power states (pVOCL, and Slurm's power_save): when nodes power down and
boot, the peak budget, the phases and cabinets, the rates; checked once, when made; and the warning
when nodes would cycle implausibly often.  The machine that follows them is
:mod:`greenslurm.sim.machines.power_states`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from greenslurm.allocation.power_actions import MAX_PHASES
from greenslurm.clustermodel.phases import PHASE_LAYOUTS
from greenslurm.clustermodel.power import MAX_NODE_W

MOVABLE = ("gpu", "single-node", "none")

MAX_IDLE_S = 10 * 365.25 * 86400      # suspend after: 10 years (no trace is longer: never, in effect)

MAX_BOOT_S = 86400.0

MAX_RATE = 1_000_000                  # nodes per minute (SuspendRate, ResumeRate): more is no limit at all

RATE_RETRY_S = 10.0                   # an action a rate held back is tried again (power_save_interval)

# More boots per node per day than this (one every six hours on every node) is more than a site
# cycles real hardware: reports warn (:func:`cycling_warning`), under every queue with power states.
CYCLING_BOOTS_PER_NODE_DAY = 4.0


def boots_per_node_day(boots: int, nodes: int, span_s: float) -> float:
    """Boots per node per day over a replay of ``span_s`` seconds (0 without nodes or span).

    >>> boots_per_node_day(120, 10, 2 * 86400.0)     # 120 boots / 10 nodes / 2 days
    6.0
    """
    if nodes <= 0 or not span_s or span_s <= 0:
        return 0.0
    return boots / nodes / (span_s / 86400.0)


def cycling_warning(boots: int, nodes: int, span_s: float, label: str = "") -> str | None:
    """The report's warning when nodes boot more than :data:`CYCLING_BOOTS_PER_NODE_DAY` times a
    day on average (None: they do not); ``label`` names the policy.

    >>> print(cycling_warning(336, 105, 12 * 86400.0))      # 0.27 a day
    None
    >>> cycling_warning(120, 10, 2 * 86400.0, "easy+suspend")
    'under easy+suspend each node boots 6.0 times a day on average (120 boots of 10 nodes), more than the 4 a day above which nodes cycle implausibly often: idle gaps shorter than the power-down time plus a boot power nodes down and up again; raise the power-down time, or limit suspends and resumes per minute (SuspendRate, ResumeRate)'
    """
    per_day = boots_per_node_day(boots, nodes, span_s)
    if per_day <= CYCLING_BOOTS_PER_NODE_DAY:
        return None
    where = f"under {label} " if label else ""
    return (f"{where}each node boots {per_day:,.1f} times a day on average ({boots:,} boots of {nodes:,} nodes), "
            f"more than the {CYCLING_BOOTS_PER_NODE_DAY:g} a day above which nodes cycle implausibly often: idle "
            f"gaps shorter than the power-down time plus a boot power nodes down and up again; raise the "
            f"power-down time, or limit suspends and resumes per minute (SuspendRate, ResumeRate)")


@dataclass(frozen=True, slots=True)
class PowerStateConfig:
    """Power management settings.  ``suspend_after_s`` None: never power down (budget/phases only).

    ``boot_w`` None: a booting node draws its idle power.  Nodes sit in cabinets of
    ``nodes_per_cabinet`` and on ``phases`` power phases, node i on phase i mod phases.
    """

    suspend_after_s: float | None = 600.0
    boot_s: float = 300.0
    boot_w: float | None = None
    off_w: float = 10.0
    budget_w: float | None = None
    phases: int = 3
    nodes_per_cabinet: int = 48
    phase_layout: str = "round-robin"       # or "banks" (see clustermodel.phases.phase_of_nodes)
    # which off node to wake next: "phase" (on the phase with the fewest powered nodes, the
    # lowest-numbered on it) or "index" (the lowest-numbered)
    wake_order: str = "phase"
    # pVOCL's consolidation (greenslurm.sim.machines.consolidation): every ``consolidate_every_s``
    # (None: never) movable jobs leave lightly loaded nodes, which are turned off, along the
    # planner's cheapest sequence of actions under the budget; per phase (``topology_aware``) or
    # over all nodes as one group.
    consolidate_every_s: float | None = None
    topology_aware: bool = True
    # a move pauses the job this long (checkpoint, transfer, restore); pVOCL measured a few hundred
    # milliseconds to a few seconds per virtual GPU (its Figure 9)
    migrate_s: float = 5.0
    # which running jobs may move: "gpu" (single-node jobs holding GPUs: virtualised GPU work, as
    # pVOCL's), "single-node" (any single-node job: checkpoint and restart) or "none"
    movable: str = "gpu"
    # power lost in the distribution per unit of phase imbalance (see clustermodel.phases.phase_loss_w;
    # 0.041: pVOCL's 7.6 % between an unbalanced and a balanced placement); counted beside the
    # nodes' energy and weighed by the planner
    imbalance_loss: float = 0.0
    # nodes off when the replay begins (they are woken for the first jobs): a steady state for a
    # long trace, and budgets below the idle power of the whole cluster; False: every node on
    start_off: bool = False
    # Slurm's SuspendRate and ResumeRate: at most this many nodes powered down / woken per minute
    # (0: no limit), counted as Slurm counts them (allocation.power_policy.RateCount), each moment the
    # machine powers nodes down or wakes them being a scan; what the rate holds back is tried again
    # ``RATE_RETRY_S`` later (Slurm's power_save_interval).  Consolidation's moves are not limited
    suspend_rate: int = 0
    resume_rate: int = 0

    def __post_init__(self) -> None:
        if self.wake_order not in ("phase", "index"):
            raise ValueError(f"wake_order must be phase or index, not {self.wake_order!r}")
        if self.phase_layout not in PHASE_LAYOUTS:
            raise ValueError(f"phase_layout must be one of {', '.join(PHASE_LAYOUTS)}, not {self.phase_layout!r}")
        if self.movable not in MOVABLE:
            raise ValueError(f"movable must be one of {', '.join(MOVABLE)}, not {self.movable!r}")
        if self.consolidate_every_s is not None and not 1.0 <= self.consolidate_every_s <= 86400.0:
            raise ValueError("consolidate_every_s must be within [1, 86400] seconds")
        if not 1 <= self.phases <= MAX_PHASES:
            raise ValueError(f"phases must be within 1..{MAX_PHASES}")
        if not 0 <= self.migrate_s <= 86400.0:
            raise ValueError("migrate_s must be within [0, 86400] seconds")
        if not 0 <= self.imbalance_loss <= 1.0:
            raise ValueError("imbalance_loss must be within [0, 1]")
        # physical ranges (each message begins with its field's name: the scenario names the key)
        if self.suspend_after_s is not None and not 0 <= self.suspend_after_s <= MAX_IDLE_S:
            raise ValueError("suspend_after_s must be within [0, 10 years] seconds")
        if not 0 <= self.boot_s <= MAX_BOOT_S:
            raise ValueError("boot_s must be within [0, 86400] seconds (a boot longer than a day is no boot)")
        for name in ("boot_w", "off_w"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= MAX_NODE_W:
                raise ValueError(f"{name} must be within [0, {MAX_NODE_W:g}] W (no node draws a megawatt)")
        if self.nodes_per_cabinet < 1:
            raise ValueError("nodes_per_cabinet must be >= 1")
        if self.budget_w is not None and not 0 < self.budget_w < math.inf:
            raise ValueError("budget_w must be a finite number > 0")
        for name in ("suspend_rate", "resume_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not (0 <= value <= MAX_RATE and value == int(value)):
                raise ValueError(f"{name} must be a whole number of nodes per minute within [0, {MAX_RATE:,}] "
                                 f"(0: no limit), not {value!r}")
            object.__setattr__(self, name, int(value))      # 5.0 from a command line is 5

    @classmethod
    def from_mapping(cls, table: dict) -> "PowerStateConfig":
        """From a TOML ``[power_states]`` table (keys as the field names)."""
        known = set(cls.__dataclass_fields__)
        unknown = set(table) - known
        if unknown:
            raise ValueError(f"unknown power_states keys: {', '.join(sorted(unknown))}")
        return cls(**table)
