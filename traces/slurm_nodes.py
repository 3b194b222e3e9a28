"""A cluster from Slurm's own description of its nodes: ``sinfo --json`` or ``scontrol show nodes --json``.

Shapes read:

- Slurm 22.05 (OpenAPI v0.0.38) ``sinfo --json``, and ``scontrol show nodes --json`` of 23.02 and later:
  ``{"nodes": [{"name", "cpus", "real_memory", "gres", "partitions", "state", "state_flags", ...}]}``;
  numbers may be plain or, from v0.0.40 on, ``{"set": true, "infinite": false, "number": N}``;
  ``state`` a string (``"idle"``) or a list (``["IDLE", "DRAIN"]``).
- ``sinfo --json`` of 23.02 and later (v0.0.39+): ``{"sinfo": [{"nodes": {"nodes": [names]},
  "cpus": {"maximum": C}, "memory": {"maximum": M}, "gres": {"total": "gpu:2"}, "partition": {"name"},
  "node": {"state": [...]}}]}``: one entry per group of like nodes; a node listed in several
  partitions is counted once.

GPUs come from the generic resources (``gpu:4``, ``gpu:a100:4(S:0-1)``, ``gpu:k80:2,gpu:t4:1``, read by
:mod:`greenslurm.clustermodel.gres`); the GPU model is the GRES type (upper case) (its power from ``greenslurm.clustermodel.node.GPU_POWER_W`` when known).  Slurm knows no
power figures: node power is given by the caller (default: ``NodeSpec``'s).

>>> text = '{"nodes": [{"name": "n1", "cpus": 8, "real_memory": 1000, "gres": "gpu:t4:2(S:0)", "state": "idle"},'
>>> text += ' {"name": "n2", "cpus": {"set": true, "number": 4}, "real_memory": 500, "state": ["DOWN"]}]}'
>>> nodes = parse_slurm_nodes(text)
>>> [(n.name, n.cpus, n.memory_mb, n.gpus, n.gpu_model, n.state) for n in nodes]
[('n1', 8, 1000.0, 2, 'T4', 'idle'), ('n2', 4, 500.0, 0, None, 'down')]
>>> cluster_from_slurm_nodes(nodes, exclude_unavailable=True).size
1
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from greenslurm.clustermodel import Cluster, InputError, NodeSpec, gres
from greenslurm.clustermodel.errors import number_too_long
from greenslurm.clustermodel.node import GPU_POWER_W
from greenslurm.clustermodel.power import check_given_power

UNAVAILABLE = ("down", "drain", "drained", "draining", "fail", "failing", "future", "maint", "not_responding",
               "power_down", "powered_down", "reboot_requested", "unknown")


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    memory_mb: float
    gpus: int
    gpu_model: str | None
    partitions: tuple[str, ...]
    state: str                  # lower case, flags joined with '+': "idle+drain"
    features: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return not any(part in UNAVAILABLE for part in self.state.split("+"))


def slurm_json_number(value, default: float = 0.0) -> float:
    """A number from Slurm's JSON: plain, or ``{"set", "infinite", "number"}`` in newer versions;
    ``default`` when unset, infinite or not a number.

    >>> slurm_json_number(8), slurm_json_number({"set": True, "infinite": False, "number": 4})
    (8.0, 4.0)
    >>> slurm_json_number({"set": False, "number": 0}, default=-1.0), slurm_json_number("x")
    (-1.0, 0.0)
    """
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return default
        value = value.get("number", default)
    if value is None or isinstance(value, bool):
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _state(value, flags=()) -> str:
    parts = [str(v) for v in value] if isinstance(value, list) else ([str(value)] if value else [])
    parts += [str(f) for f in (flags or ())]
    return "+".join(p.lower() for p in parts if p)


class _BadGres(ValueError):
    """Internal: a node's Gres that cannot be read (turned into an InputError naming the file)."""


def _gpus(gres_text, node: str) -> tuple[int, str | None]:
    """GPU count and model of a node's Gres (GRES types upper case, several joined with '|')."""
    try:
        found = gres.parse_gres(gres_text if isinstance(gres_text, str) else None)
    except ValueError as exc:
        raise _BadGres(f"node {node}: {exc}") from None
    return found.gpus, "|".join(dict.fromkeys(m.upper() for m in found.models)) or None


def _from_node(node: dict) -> SlurmNode | None:
    name = node.get("name") or node.get("hostname")
    if not name:
        return None
    gpus, model = _gpus(node.get("gres"), str(name))
    features = tuple(f for f in re.split(r"[,&]", node.get("active_features") or node.get("features") or "") if f)
    if isinstance(node.get("features"), list):
        features = tuple(str(f) for f in node["features"])
    cpus, memory = int(slurm_json_number(node.get("cpus"))), slurm_json_number(node.get("real_memory"))
    return SlurmNode(str(name), cpus, memory, gpus, model,
                     tuple(node.get("partitions") or ()), _state(node.get("state"), node.get("state_flags")), features)


def _from_sinfo_entry(entry: dict) -> list[SlurmNode]:
    names = (entry.get("nodes") or {}).get("nodes") or []
    cpus = int(slurm_json_number((entry.get("cpus") or {}).get("maximum")))
    memory = slurm_json_number((entry.get("memory") or {}).get("maximum"))
    gpus, model = _gpus((entry.get("gres") or {}).get("total"), ",".join(map(str, names)))
    partition = (entry.get("partition") or {}).get("name")
    state = _state((entry.get("node") or {}).get("state"))
    features = (entry.get("features") or {}).get("active") or (entry.get("features") or {}).get("total") or ""
    return [SlurmNode(str(n), cpus, memory, gpus, model, (partition,) if partition else (), state,
                      tuple(f for f in re.split(r"[,&]", features) if f)) for n in names]


def parse_slurm_nodes(text: str, path: str = "<sinfo --json>") -> list[SlurmNode]:
    """Every node once (in the order first seen; a node in several partitions gathers them)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} at line {exc.lineno}", path=path) from None
    except ValueError:                          # an integer too long to convert
        raise number_too_long(text, path) from None
    except RecursionError:
        raise InputError("not usable JSON: nested too deeply", path=path) from None
    if not isinstance(data, dict) or not ("nodes" in data or "sinfo" in data):
        raise InputError("neither 'nodes' (sinfo --json of 22.05, scontrol show nodes --json) nor 'sinfo' "
                         "(sinfo --json of 23.02+) at the top level", path=path)
    found: list[SlurmNode] = []
    try:
        if isinstance(data.get("nodes"), list):
            found += [n for n in map(_from_node, data["nodes"]) if n is not None]
        if isinstance(data.get("sinfo"), list):
            for entry in data["sinfo"]:
                found += _from_sinfo_entry(entry)
    except _BadGres as exc:
        raise InputError(str(exc), path=path, field="gres") from None
    nodes: dict[str, SlurmNode] = {}
    for node in found:
        if node.name in nodes:
            known = nodes[node.name]
            partitions = tuple(dict.fromkeys(known.partitions + node.partitions))
            nodes[node.name] = SlurmNode(known.name, known.cpus, known.memory_mb, known.gpus, known.gpu_model,
                                         partitions, known.state, known.features)
        else:
            nodes[node.name] = node
    bad = [n.name for n in nodes.values() if n.cpus <= 0]
    if bad:
        raise InputError(f"nodes without CPUs: {', '.join(bad[:5])}", path=path, field="cpus")
    if not nodes:
        raise InputError("no nodes", path=path)
    return list(nodes.values())


def _power_model(model: str | None) -> str | None:
    """A GRES type as a model of ``GPU_POWER_W`` when one matches (``v100`` -> ``V100M32``)."""
    if model is None:
        return None
    for known in GPU_POWER_W:
        if known == model or known.startswith(model):
            return known
    return model


def cluster_from_slurm_nodes(nodes: list[SlurmNode], name: str = "slurm", *, exclude_unavailable: bool = False,
                             idle_w: float | None = None, busy_w: float | None = None) -> Cluster:
    power = {k: v for k, v in (("idle_w", idle_w), ("busy_w", busy_w)) if v is not None}
    check_given_power(power)
    kept = [n for n in nodes if n.available or not exclude_unavailable]
    if not kept:
        raise InputError("no available node (all are down, drained or failing)", path=name)
    return Cluster([NodeSpec(n.name, cpus=n.cpus, memory_mb=n.memory_mb, gpus=n.gpus,
                             gpu_model=_power_model(n.gpu_model), node_type=(n.partitions or ("default",))[0],
                             partitions=n.partitions, features=n.features, **power) for n in kept], name=name)
