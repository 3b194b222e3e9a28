"""A sweep's spec file: its traces, policies, grid and seeds parsed and checked (every cell a valid
scenario, every file it reads present, before any runs), and the stable id of a cell.  The grammar is in
:mod:`greenslurm.sweep`'s module text."""

from __future__ import annotations

import dataclasses
import itertools
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.errors import missing_path, toml_error
from greenslurm.scenario import RUN_WHERE
from greenslurm.sweep_cell import (CLUSTER_TABLE_KEYS, LEGACY_SUPPLY_PEAK, OPTION_PREFIX, PARAMETER_ALIASES,
                                   PARAMETERS, SYNTHETIC_PARAMETERS, TRACE_KEYS, _is_cluster_table, cell_scenario)


# -- the spec ---------------------------------------------------------------------------------------
@dataclass
class SweepSpec:
    name: str
    traces: list[dict]
    policies: list[dict]
    grid: dict[str, list]
    seeds: list[int]
    base_dir: str = "."
    text: str = ""
    results: str | None = None
    deprecated: list[str] = field(default_factory=list)    # old names the spec used: warn, once each

    def cells(self) -> list[dict]:
        """Every cell, in a stable order: trace, policy, grid values (in key order), seed."""
        keys = list(self.grid)
        combos = list(itertools.product(*(self.grid[k] for k in keys))) or [()]
        cells = []
        for trace in self.traces:
            for policy in self.policies:
                for combo in combos:
                    params = {**trace.get("params", {}), **policy.get("params", {}), **dict(zip(keys, combo))}
                    options = dict(policy.get("options", {}))
                    for key in [k for k in params if k.startswith(OPTION_PREFIX)]:
                        options[key[len(OPTION_PREFIX):]] = params[key]
                    for seed in self.seeds:
                        kind = {"score": policy["score"]} if "score" in policy else {"queue": policy["queue"]}
                        cells.append({"trace": {k: v for k, v in trace.items() if k != "params"},
                                      "policy": {"name": policy["name"], **kind, "options": options},
                                      "params": params, "seed": seed})
        return cells


def _fail(message: str, path: str, field: str | None = None):
    raise InputError(message, path=path, field=field)


SPEC_TABLES = ("sweep", "trace", "policy", "grid")
SWEEP_KEYS = ("name", "seeds", "results")
POLICY_KEYS = ("name", "queue", "options", "select", "params", "score")
MAX_SEEDS = 100_000


def _check_keys(table, known: tuple[str, ...], path: str, where: str) -> None:
    """A table of the spec with only ``known`` keys (a typo is named, not ignored)."""
    if not isinstance(table, dict):
        _fail("must be a table", path, where.rstrip(".") or None)
    unknown = sorted(set(table) - set(known))
    if unknown:
        _fail(f"unknown key {unknown[0]!r}; known: {', '.join(known)}", path, f"{where}{unknown[0]}")


def parse_spec(text: str, path: str = "<sweep.toml>", base_dir: str = ".", inputs: bool = False) -> SweepSpec:
    """A sweep spec from its TOML text; every mistake is an InputError naming the field (``inputs``: and
    every file its cells read, see :func:`check_cells`)."""
    from greenslurm.sim.engine.strategies import QUEUES
    try:
        data = tomllib.loads(text)
    except (ValueError, RecursionError) as exc:
        raise toml_error(exc, text, path) from None
    _check_keys(data, SPEC_TABLES, path, "")
    head = data.get("sweep", {})
    _check_keys(head, SWEEP_KEYS, path, "sweep.")
    if "results" in head and not (isinstance(head["results"], str) and head["results"]):
        _fail(f"must be a folder name, not {head['results']!r}", path, "sweep.results")
    seeds = head.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_SEEDS:
            _fail(f"seeds must be within [1, {MAX_SEEDS:,}] (every cell is listed before the first runs)",
                  path, "sweep.seeds")
        seeds = list(range(seeds))
    elif not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                         for s in seeds)):
        _fail("seeds must be a count or a list of whole numbers >= 0", path, "sweep.seeds")
    traces = data.get("trace")
    if not isinstance(traces, list) or not traces:
        _fail("no [[trace]] table", path, "trace")
    resolved_traces = []
    deprecated: list[str] = []
    for i, trace in enumerate(traces):
        where = f"trace[{i}]"
        if not isinstance(trace, dict):
            _fail("must be a table", path, where)
        trace = dict(trace)
        unknown = sorted(set(trace) - set(TRACE_KEYS))
        if unknown:
            _fail(f"unknown key {unknown[0]!r}; known: {', '.join(TRACE_KEYS)}", path, f"{where}.{unknown[0]}")
        if "exact_runtimes" in trace and not isinstance(trace["exact_runtimes"], bool):
            _fail("must be true or false", path, f"{where}.exact_runtimes")
        trace.setdefault("name", Path(trace["path"]).stem if "path" in trace else f"trace{i}")
        if ("path" in trace) == ("synthetic" in trace):
            _fail("give either path = FILE or synthetic = {...}", path, where)
        if "path" in trace:
            trace["path"] = str((Path(base_dir) / trace["path"]).resolve())
        if isinstance(trace.get("nodes"), str):          # an openb node list, for GPU scoring policies
            trace["nodes"] = str((Path(base_dir) / trace["nodes"]).resolve())
        if isinstance(trace.get("slurm_conf"), str):     # a site's slurm.conf: cluster and Slurm's settings
            if trace.get("cluster") is not None or trace.get("nodes") is not None:
                _fail("give one of cluster, nodes, slurm_conf", path, where)
            trace["slurm_conf"] = str((Path(base_dir) / trace["slurm_conf"]).resolve())
        cluster = trace.get("cluster")
        if isinstance(cluster, str):
            trace["cluster"] = str((Path(base_dir) / cluster).resolve())
        elif _is_cluster_table(cluster):                 # the scenario's [cluster] table: file, slurm_conf, ...
            if trace.get("nodes") is not None or trace.get("slurm_conf") is not None:
                _fail("give one of cluster, nodes, slurm_conf", path, where)
            trace["cluster"] = _resolved_cluster_table(cluster, base_dir, path, f"{where}.cluster")
        elif cluster is None and "synthetic" in trace and "slurm_conf" not in trace and "nodes" not in trace:
            _fail("a synthetic trace needs cluster = {nodes = N, cpus = C} or a cluster file", path, where)
        trace["params"] = _checked_params(trace.get("params", {}), path, f"{where}.params", deprecated)
        if not trace["params"]:
            del trace["params"]
        resolved_traces.append(trace)
    policies = data.get("policy")
    if not isinstance(policies, list) or not policies:
        _fail("no [[policy]] table", path, "policy")
    resolved_policies = []
    for i, policy in enumerate(policies):
        where = f"policy[{i}]"
        _check_keys(policy, POLICY_KEYS, path, f"{where}.")
        policy = dict(policy)
        if "score" in policy:                           # a GPU scoring policy (the PWR and FGD papers): greenslurm.sim.studies.gpu_replay
            _check_score(policy["score"], path, f"{where}.score")
            policy.setdefault("name", policy["score"])
            policy.setdefault("options", {})
            resolved_policies.append(policy)
            continue
        queue = policy.get("queue", policy.get("name"))
        if queue not in QUEUES:
            _fail(f"unknown queue {queue!r}; choose from {', '.join(QUEUES)}", path, f"{where}.queue")
        policy["queue"] = queue
        policy.setdefault("name", queue)
        policy["options"] = dict(policy.get("options", {}))
        if "select" in policy:                          # the node selection (greenslurm.allocation.selection)
            policy["options"]["select"] = policy.pop("select")
        if "params" in policy:
            policy["params"] = _checked_params(policy["params"], path, f"{where}.params", deprecated)
        resolved_policies.append(policy)
    names = [p["name"] for p in resolved_policies]
    if len(set(names)) != len(names):
        _fail(f"policy names must differ: {names}", path, "policy")
    grid = data.get("grid", {})
    _checked_params(grid, path, "grid", deprecated)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            _fail(f"grid {key} must be a non-empty list", path, f"grid.{key}")
    spec = SweepSpec(name=str(head.get("name", Path(path).stem)), traces=resolved_traces,
                     policies=resolved_policies, grid={k: list(v) for k, v in grid.items()}, seeds=list(seeds),
                     base_dir=base_dir, text=text, results=head.get("results"), deprecated=deprecated)
    check_cells(spec, path, inputs=inputs)
    return spec


def check_cells(spec: SweepSpec, path: str, inputs: bool = False) -> None:
    """Every cell a valid scenario before any runs, or an InputError naming the spec, the trace, the
    policy and the key.  ``inputs``: also every file a cell reads exists and every cluster it names
    can be built (a missing or bad file fails here, not in the twelfth cell)."""
    from greenslurm.scenario_run import build_cluster
    seen: set[str] = set()
    clusters: set[str] = set()
    for cell in spec.cells():
        key = json.dumps([cell["trace"], cell["policy"], cell["params"]], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        trace = cell["trace"]
        where = f"trace {trace['name']}, policy {cell['policy']['name']}"
        try:
            synthetic_only = [k for k in SYNTHETIC_PARAMETERS if k in cell["params"]]
            if synthetic_only and "synthetic" not in trace:
                raise InputError("applies to synthetic traces, not to a trace file", path="<sweep>",
                                 field=synthetic_only[0])
            scenario = cell_scenario(cell)
            if inputs:
                if scenario.trace.path is not None:
                    from greenslurm.inputs import check_input_file
                    check_input_file(scenario.trace.path)
                cluster_key = json.dumps(dataclasses.asdict(scenario.cluster), sort_keys=True)
                if cluster_key not in clusters:
                    clusters.add(cluster_key)
                    build_cluster(scenario, cache=True)
        except InputError as exc:
            if exc.path not in ("<sweep>", RUN_WHERE) and not exc.path.startswith("policy "):
                # a file of the cell: name it, and the cell that reads it
                _fail(str(exc), path, where)
            written = {new: old for old, new in PARAMETER_ALIASES.items() if old in cell["params"]}
            field_name = written.get(exc.field, exc.field)      # the key as the spec spells it
            _fail(exc.reason, path, where + (f": {field_name}" if field_name else ""))


def _resolved_cluster_table(cluster: dict, base_dir: str, path: str, where: str) -> dict:
    """The scenario's [cluster] table with its file names made absolute against the spec's folder."""
    table = dict(cluster)
    for key in CLUSTER_TABLE_KEYS:
        if key == "homogeneous" or key not in table:
            continue
        if not isinstance(table[key], str):
            _fail("must be a file name", path, f"{where}.{key}")
        table[key] = str((Path(base_dir) / table[key]).resolve())
    if "homogeneous" in table and not isinstance(table["homogeneous"], dict):
        _fail("must be a table {nodes = N, cpus = C}", path, f"{where}.homogeneous")
    return table


def _checked_params(params: Any, path: str, where: str, deprecated: list[str]) -> dict:
    """Known parameter names (an old name noted in ``deprecated``; both spellings at once refused)."""
    if not isinstance(params, dict):
        _fail("must be a table", path, where)
    for key in params:
        _check_param(key, path, where)
        new = PARAMETER_ALIASES.get(key)
        if new is not None:
            if new in params:
                _fail(f"{key} is the old name of {new}; give one", path, f"{where}.{key}")
            note = f"{path}: [{where}] {key} is deprecated, use {new}"
            if key == "supply":
                note += (f" (a synthetic {key} peaks at {LEGACY_SUPPLY_PEAK:g} x the cluster's full power unless "
                         f"supply_peak says otherwise; renewable_scale's default is 1)")
            if note not in deprecated:
                deprecated.append(note)
    return dict(params)


def _check_score(spec: str, path: str, where: str) -> None:
    from greenslurm.allocation.scorers import SCORERS, parse_policy as parse_score
    try:
        unknown = [name for name, _ in parse_score(spec) if name not in SCORERS]
    except (ValueError, InputError) as exc:
        _fail(f"bad score {spec!r}: {exc}", path, where)
    if unknown:
        _fail(f"unknown scorer {unknown[0]!r}; choose from {', '.join(SCORERS)}", path, where)


def _check_param(key: str, path: str, where: str) -> None:
    if key not in PARAMETERS and key not in PARAMETER_ALIASES and not key.startswith(OPTION_PREFIX):
        _fail(f"unknown parameter {key!r}; known: {', '.join(PARAMETERS)} or option.NAME", path, where)


def load_spec(path: str) -> SweepSpec:
    if Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir():
        _fail("not a regular file (a device, pipe or socket), not a sweep spec", path)   # /dev/zero never ends
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise missing_path(path) from None
    except IsADirectoryError:
        _fail("is a directory, not a sweep spec", path)
    except UnicodeDecodeError as exc:
        _fail(f"not UTF-8 text (byte {exc.start}), not a sweep spec", path)
    except OSError as exc:
        _fail(f"cannot read: {exc.strerror or exc}", path)
    return parse_spec(text, path=path, base_dir=str(Path(path).resolve().parent), inputs=True)
