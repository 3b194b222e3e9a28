"""Which power model a replay used, in one sentence for its report and summary.

Energy figures are only as good as the node power behind them, and a cluster can get it from a TOML
file's ``idle_w``/``busy_w``, from the GPU papers' CPU-package and GPU models (an openb node list), or
from nothing at all: an SWF header, a slurm.conf or Slurm's node JSON record no power, and their nodes
then draw the default 100 W idle, 350 W busy.  Every report says which, so that two replays of the same
jobs with different energies explain themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from greenslurm.clustermodel.cluster import Cluster
from greenslurm.clustermodel.node import DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W

ASSUMED_NOTE = "give node power in a cluster TOML (idle_w, busy_w) for your machine"


@dataclass(frozen=True)
class PowerModel:
    """``text``: the model in words; ``assumed``: the node power is a default, not the site's."""

    text: str
    assumed: bool

    def as_dict(self) -> dict:
        return {"text": self.text, "assumed": self.assumed}


def _watts(value: float) -> str:
    return f"{value:,.0f} W" if value == round(value) else f"{value:,.1f} W"


def node_power_text(cluster: Cluster) -> str:
    """The distinct (idle, busy) node powers, most common first.

    >>> node_power_text(Cluster.homogeneous(3, cpus=4, idle_w=100.0, busy_w=200.0))
    'nodes 100 W idle to 200 W with every CPU allocated, linear in allocated CPUs'
    """
    pairs: dict[tuple[float, float], int] = {}
    for idle_w, busy_w in zip(cluster.idle_w.tolist(), cluster.busy_w.tolist()):
        pairs[(idle_w, busy_w)] = pairs.get((idle_w, busy_w), 0) + 1
    ranked = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
    if len(ranked) == 1:
        (idle_w, busy_w), _ = ranked[0]
        return (f"nodes {_watts(idle_w)} idle to {_watts(busy_w)} with every CPU allocated, "
                "linear in allocated CPUs")
    shown = ", ".join(f"{count:,} x {_watts(i)}-{_watts(b)}" for (i, b), count in ranked[:3])
    more = f" and {len(ranked) - 3} more" if len(ranked) > 3 else ""
    return f"nodes idle-busy {shown}{more}, linear in allocated CPUs"


def read_from_slurm(cluster: Cluster, power_given: bool) -> PowerModel:
    """The power model of a cluster read from Slurm (slurm.conf, ``sinfo --json``), which records no
    node power: assumed where nodes draw the defaults and the site gave none (what-if's
    ``--node-idle-w``/``--node-busy-w``, or a cluster TOML: ``power_given``).

    >>> read_from_slurm(Cluster.homogeneous(2, cpus=4), power_given=False).text.endswith("--node-busy-w)")
    True
    >>> read_from_slurm(Cluster.homogeneous(2, cpus=4), power_given=True).assumed
    False
    """
    assumed = not power_given and any(idle_w == DEFAULT_NODE_IDLE_W and busy_w == DEFAULT_NODE_BUSY_W
                                      for idle_w, busy_w in zip(cluster.idle_w.tolist(), cluster.busy_w.tolist()))
    note = " (ASSUMED: Slurm records no node power; give --node-idle-w/--node-busy-w)" if assumed else ""
    return PowerModel(node_power_text(cluster) + note, assumed)


def _toml_gives_power(path: str) -> bool:
    """Every node group of a cluster TOML names both idle_w and busy_w."""
    import tomllib
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, ValueError, RecursionError):   # TOMLDecodeError, an integer too long, nested too deep
        return False
    groups = data.get("node_group", [])
    return bool(groups) and all(isinstance(g, dict) and "idle_w" in g and "busy_w" in g for g in groups)


def _cluster_file_name(path: str) -> str:
    """How a report names a cluster file: the bundled demo's as bundled (the user gave none).

    >>> _cluster_file_name("/site/cluster.toml")
    'the cluster file cluster.toml'
    """
    from pathlib import Path
    bundled = Path(__file__).resolve().parent / "data"
    name = Path(path).name
    return f"greenslurm's bundled {name}" if Path(path).resolve().parent == bundled else f"the cluster file {name}"


def power_states_text(power) -> str:
    """What a replay assumes of powered-down nodes (``power``: a ``PowerStateConfig``; "" when nodes
    never power down).

    >>> from greenslurm.sim.machines.power_states import PowerStateConfig
    >>> power_states_text(PowerStateConfig(suspend_after_s=600.0, off_w=10.0, boot_s=300.0))
    'idle nodes power down after 600 s, draw 10 W while off and boot in 300 s'
    """
    if power is None or power.suspend_after_s is None:
        return ""
    return (f"idle nodes power down after {power.suspend_after_s:,.0f} s, draw {_watts(power.off_w)} "
            f"while off and boot in {power.boot_s:,.0f} s")


def describe(scenario, cluster: Cluster, power=None) -> PowerModel:
    """The power model of ``scenario`` (a :class:`greenslurm.scenario.Scenario`) on ``cluster``;
    ``power``: the node power states' effective settings (a ``PowerStateConfig``), if any."""
    source = scenario.cluster
    if scenario.colocation is not None:
        accounting = scenario.colocation.accounting or "active-nodes"
        text = ("the EaCO paper's measured node power per set of co-located training jobs (Table 1 and 3)"
                + ("; a node without jobs is off" if accounting == "active-nodes"
                   else "; only the sets' power is counted (jobs accounting)"))
        return PowerModel(text, assumed=False)
    if source.node_list is not None:
        text = ("the PWR paper's CPU packages (15 W idle to 120 W each) and GPUs (idle and maximum power by "
                "model), linear in the allocated CPUs and GPU shares (the GPUs table: the paper's steps)")
        assumed = False
    else:
        text = node_power_text(cluster)
        gpus = cluster.total_gpus
        if gpus:
            text += f"; {gpus:,} GPUs idle to maximum power by model, linear in allocated share"
        if source.file is not None and _toml_gives_power(source.file):
            text += f" (from {_cluster_file_name(source.file)})"
            assumed = False
        elif source.homogeneous is not None and source.homogeneous.idle_w is not None \
                and source.homogeneous.busy_w is not None:
            text += " (from the scenario)"
            assumed = False
        elif source.slurm_conf is not None and source.node_idle_w is not None and source.node_busy_w is not None:
            text += " (given: --node-idle-w, --node-busy-w)"
            assumed = False
        else:
            origin = ("the cluster file leaves it out" if source.file is not None
                      else "slurm.conf records no power" if source.slurm_conf is not None
                      else "the trace records no power")
            text += f" (ASSUMED: {origin}; {ASSUMED_NOTE})"
            assumed = True
    if power_states_text(power):
        text += "; " + power_states_text(power)
    if power is not None and power.budget_w is not None:
        text += f"; peak budget {_watts(power.budget_w)}"
    return PowerModel(text, assumed)
