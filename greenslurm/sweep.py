"""Sweeps: a grid of traces x policies x parameters x seeds, one replay per cell, resumable.

A *cell* is a plain, JSON-ready dict ``{"trace": ..., "policy": ..., "params": ..., "seed": ...}``;
:func:`cell_scenario` turns it into a :class:`~greenslurm.scenario.Scenario` (the one ``greenslurm run``
reads) and :func:`run_cell` replays that through :func:`greenslurm.scenario_run.run` into one flat row
of figures (the replay's summary plus the cell's identity).  A queue strategy registered in
``greenslurm.sim.engine.strategies.QUEUES`` and a node selection of
``greenslurm.allocation.selection`` are available to sweeps, ``whatif`` and ``report`` without any
change here.

Resuming: every finished cell is written to ``RESULTS/cells/<cell_id>.json`` (atomically: a temporary
file renamed into place) and one line is appended to ``RESULTS/ledger.jsonl``.  ``cell_id`` is a stable
hash of the cell (sorted-key JSON, SHA-256), so a rerun of the same spec skips every cell with a file
and runs only the rest.  At the end all finished cells of the spec are combined into
``RESULTS/results.parquet`` (one row per cell, ordered by trace, policy, parameters, seed).

Spec file (TOML; paths are relative to the spec file)::

    [sweep]
    name = "loads"
    seeds = 3                      # or a list: [0, 1, 2]

    [[trace]]
    name = "synthetic"
    synthetic = { jobs = 100 }     # seeded per cell (greenslurm.traces.synthetic.synthetic_jobs)
    cluster = { nodes = 8, cpus = 4 }   # or a cluster TOML file: cluster = "cluster.toml"

    [[trace]]
    name = "kth"
    path = "KTH.swf"               # any trace format; format = "swf" to say so; limit = 500 (first jobs)
                                   # slurm_conf = "slurm.conf": the site's cluster, and Slurm's settings
                                   # for policies with queue = "slurm"

    [[policy]]
    name = "easy"
    queue = "easy"

    [[policy]]
    name = "greedy-bestfit"
    queue = "deadline"
    select = "bestfit"             # the node selection (greenslurm.allocation.selection)
    options = { acceptance = "greedy" }

    [[policy]]
    name = "fgd"
    queue = "none"                 # the GPU papers' model on an openb pod list (nodes = "node_list.csv")
    select = "fgd"                 # or score = "fgd" with the papers' names (their bestfit = gpubestfit)

    [grid]                         # every combination of the values (see PARAMETERS)
    load = [0.5, 0.9]
    slack = [0.5, 1.0]

>>> spec = parse_spec('''
... [sweep]
... seeds = 2
... [[trace]]
... name = "s"
... synthetic = { jobs = 20 }
... cluster = { nodes = 2, cpus = 4 }
... [[policy]]
... name = "fcfs"
... queue = "fcfs"
... [[policy]]
... name = "easy"
... queue = "easy"
... [grid]
... load = [0.5, 0.9]
... ''')
>>> len(spec.cells())          # 1 trace x 2 policies x 2 loads x 2 seeds
8
>>> row = run_cell(spec.cells()[0])
>>> row["policy"], row["seed"], row["load"], row["jobs_completed"]
('fcfs', 0, 0.5, 20)
>>> cell_id(spec.cells()[0]) == cell_id(parse_spec(spec.text).cells()[0])
True
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import math
import os
import time
import tomllib
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from greenslurm.clustermodel import Cluster, InputError, JobSpec
from greenslurm.clustermodel.errors import missing_path
from greenslurm.scenario import RUN_WHERE
from greenslurm.workers import worker_pool

CELLS_DIR = "cells"
LEDGER = "ledger.jsonl"
RESULTS_PARQUET = "results.parquet"
FAILED_DIR = "failed"

# Parameters a [grid] (or a trace's or policy's `params`) may vary, with what they do.
PARAMETERS: dict[str, str] = {
    "jobs": "synthetic traces: number of jobs",
    "load": "synthetic traces: offered load (arrival rate x mean work / CPUs)",
    "runtime_median_s": "synthetic traces: median runtime (s)",
    "limit": "any trace: keep only the file's first N jobs (read no further; in submit order)",
    "exact_runtimes": "plan with the real runtimes as time limits (true/false; Nileshwar & Schwiegelshohn's setting)",
    "slack_mean": "deadlines: geometric mean slack eps, d = r + (1 + eps_j) p, eps_j log-normal (Nileshwar & Schwiegelshohn)",
    "slack_sigma": "deadlines: log-scale deviation of the slack (default eps / 2.5)",
    "renewable": "renewable supply: 'solar' or 'wind' (synthetic, seeded) or a CSV of time_s,watts",
    "renewable_scale": "synthetic peak = X times the cluster's full power; a CSV is multiplied by X (default 1)",
    "arrival_scale": "time between arrivals multiplied by this (< 1: a busier cluster; the GPU papers' what-ifs)",
}
SYNTHETIC_PARAMETERS = ("jobs", "load", "runtime_median_s")
# Old parameter names, kept for one release: the old name -> the name replay, compare and whatif share.
PARAMETER_ALIASES = {"slack": "slack_mean", "supply": "renewable", "supply_peak": "renewable_scale"}
# The deprecated `supply` drew its synthetic peak at 0.5 x the cluster's full power unless `supply_peak`
# said otherwise, and left a CSV as it was: a spec that says `supply` keeps those figures.
LEGACY_SUPPLY_PEAK = 0.5
TRACE_KEYS = ("name", "path", "synthetic", "format", "columns", "limit", "exact_runtimes", "cluster", "nodes",
              "slurm_conf", "params")
CLUSTER_TABLE_KEYS = ("file", "node_list", "slurm_conf", "homogeneous", "sacctmgr_assoc", "sacctmgr_qos")
LP_MAX_JOBS = 2000            # the LP load bound for the performance ratio up to this many jobs
OPTION_PREFIX = "option."     # grid keys "option.NAME" vary a queue option (e.g. option.allocation)


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
    except tomllib.TOMLDecodeError as exc:
        _fail(f"not valid TOML: {exc}", path)
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


def _is_cluster_table(cluster: Any) -> bool:
    """The scenario's [cluster] table (``{slurm_conf = ...}``, ...), not an inline ``{nodes = N, cpus = C}``."""
    return isinstance(cluster, dict) and bool(cluster) and set(cluster) <= set(CLUSTER_TABLE_KEYS)


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


def cell_id(cell: Mapping) -> str:
    """A stable hash of the cell: the same cell has the same id in any process, on any day.

    >>> cell_id({"seed": 1, "params": {}}) == cell_id({"params": {}, "seed": 1})
    True
    """
    text = json.dumps(cell, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


# -- one cell: a scenario ----------------------------------------------------------------------------
def _read(path: str, fmt: str | None, columns: tuple | None, limit: int | None = None):
    """A trace read once per version of its file (a file rewritten at the same path is read again);
    ``limit``: its first jobs only (read_trace)."""
    from greenslurm.scenario_run import file_stamp
    return _read_stamped(path, file_stamp(path), fmt, columns, limit)


@functools.lru_cache(maxsize=8)
def _read_stamped(path: str, stamp: tuple | None, fmt: str | None, columns: tuple | None, limit: int | None):
    from greenslurm.traces import read_trace
    return read_trace(path, fmt, columns=list(columns) if columns else None, limit=limit)


def build_cluster(spec: Any) -> Cluster:
    """A cluster from a TOML file path or an inline table ``{nodes, cpus, gpus?, memory_mb?, idle_w?, busy_w?}``."""
    from greenslurm.scenario import ClusterSource
    from greenslurm.scenario_run import build_cluster as build
    return build(_scenario_stub(cluster_source(spec) if not isinstance(spec, ClusterSource) else spec), cache=True)


def _scenario_stub(cluster):
    from greenslurm.scenario import Scenario, TraceSource
    return Scenario(trace=TraceSource(path="-"), cluster=cluster)


def cluster_source(spec: Any, node_list: str | None = None, slurm_conf: str | None = None):
    from greenslurm.scenario import ClusterSource, Homogeneous
    if slurm_conf is not None:
        return ClusterSource(slurm_conf=slurm_conf)
    if node_list is not None:
        return ClusterSource(node_list=node_list)
    if spec is None:
        return ClusterSource()
    if isinstance(spec, str):
        return ClusterSource(file=spec)
    if _is_cluster_table(spec):
        from greenslurm.scenario import from_mapping
        return from_mapping({"trace": {"path": "-"}, "cluster": dict(spec)}, "<sweep>").cluster
    table = dict(spec)
    try:
        return ClusterSource(homogeneous=Homogeneous(**table))
    except TypeError as exc:
        raise InputError(f"bad inline cluster {table}: {exc}", path="<sweep>", field="cluster") from None


POWER_STATES = "power_states"      # option (a table, or power_states.KEY = value): greenslurm.sim.machines.power_states
SELECT_OPTIONS = ("select", "allocation")            # the deadline queue's name for the node selection
ACCEPTANCE_OPTIONS = {"share": "threshold_share", "min_slack": "threshold_slack"}
GPU_OPTIONS = {"normalization": "normalization", "ties": "ties", "coverage": "fgd_coverage"}


def power_state_options(options: Mapping) -> tuple[dict, dict | None]:
    """Split the power-state settings off a policy's options.

    >>> power_state_options({"acceptance": "greedy", "power_states.boot_s": 60, "power_states": {"off_w": 5}})
    ({'acceptance': 'greedy'}, {'boot_s': 60, 'off_w': 5})
    >>> power_state_options({"x": 1})
    ({'x': 1}, None)
    """
    rest, power = {}, None
    for key, value in options.items():
        if key == POWER_STATES:
            power = {**(power or {}), **dict(value)}
        elif key.startswith(POWER_STATES + "."):
            power = {**(power or {}), key[len(POWER_STATES) + 1:]: value}
        else:
            rest[key] = value
    return rest, power


def gpu_select(score: str) -> str:
    """A sweep's ``score`` (the GPU papers' scorer names) as a node selection: their BestFit is
    ``gpubestfit`` (``bestfit`` is Nileshwar & Schwiegelshohn's load rule).

    >>> gpu_select("bestfit"), gpu_select("pwr=0.1, bestfit=0.9")
    ('gpubestfit', 'pwr=0.1,gpubestfit=0.9')
    """
    from greenslurm.allocation.selection import from_gpu_papers
    return from_gpu_papers(score).label


def policy_scenario(queue: str, options: Mapping | None, *, trace, cluster=None, params: Mapping | None = None,
                    seed: int = 0, where: str = "<policy>", deadline_seed: int | None = None,
                    supply_seed: int | None = None):
    """A policy (queue and options, as in sweep specs and what-if) on a trace as a Scenario.

    Options: ``acceptance``, ``select`` (or ``allocation``), ``share``/``min_slack`` (threshold),
    ``compress``, ``renewable`` (grid, green, only), ``normalization``/``ties``/``coverage`` (GPU
    scorers), ``power_states`` (a table or ``power_states.KEY``), ``hook`` (a hook.toml, with the
    slurm queue: the live hook's decisions in front of it); parameters (:data:`PARAMETERS`):
    ``exact_runtimes``, ``slack_mean``, ``slack_sigma``, ``renewable``, ``renewable_scale``,
    ``arrival_scale`` (and the old ``slack``, ``supply``, ``supply_peak``).  ``seed`` seeds the
    drawn deadlines and a synthetic supply unless ``deadline_seed`` / ``supply_seed`` are given.

    >>> from greenslurm.scenario import TraceSource
    >>> s = policy_scenario("easy", {}, trace=TraceSource(path="t.swf"), params={"renewable": "solar"})
    >>> s.supply.source, s.supply.scale
    ('solar', None)
    >>> policy_scenario("easy", {}, trace=TraceSource(path="t.swf"), params={"supply": "solar"}).supply.scale
    0.5
    """
    import dataclasses as dc

    from greenslurm.scenario import Acceptance, Deadlines, PowerStates, Scenario, Selection, Supply
    options, power = power_state_options(dict(options or {}))
    legacy_supply = "supply" in (params or {})
    params = {PARAMETER_ALIASES.get(k, k): v for k, v in dict(params or {}).items()}
    select = None
    for key in SELECT_OPTIONS:
        if key in options:
            select = str(options.pop(key))
    accept = {new: options.pop(old) for old, new in ACCEPTANCE_OPTIONS.items() if old in options}
    for old, new in ACCEPTANCE_OPTIONS.items():
        if old in options.get("acceptance_options", {}):
            accept[new] = options["acceptance_options"][old]
    options.pop("acceptance_options", None)
    acceptance = None
    if "acceptance" in options or accept or "compress" in options:
        acceptance = Acceptance(str(options.pop("acceptance", "greedy")), compress=options.pop("compress", None),
                                **{k: float(v) for k, v in accept.items()})
    gpu = {new: options.pop(old) for old, new in GPU_OPTIONS.items() if old in options}
    mode = str(options.pop("renewable", "grid"))
    hook = options.pop("hook", None)
    if hook is not None:             # a hook.toml: the live hook's decisions in front of the slurm queue
        hook = str(Path(str(hook)).resolve())
    if options:
        raise InputError(f"unknown policy options: {', '.join(sorted(options))}", path=where, field="options")
    if "exact_runtimes" in params:
        if not isinstance(params["exact_runtimes"], bool):
            raise InputError("must be true or false", path=where, field="exact_runtimes")
        trace = dc.replace(trace, exact_runtimes=params["exact_runtimes"])
    deadlines = None
    if "slack_mean" in params:
        deadlines = Deadlines(float(params["slack_mean"]), params.get("slack_sigma"),
                              seed=seed if deadline_seed is None else deadline_seed)
    supply = Supply(mode=mode)
    if params.get("renewable"):
        source = str(params["renewable"])
        synthetic = source in ("solar", "wind")
        if not synthetic and not Path(source).suffix:
            raise InputError(f"unknown supply {source!r}; choose solar, wind or a CSV file", path=where,
                             field="renewable")
        scale = params.get("renewable_scale")
        if legacy_supply:       # the old `supply`: a synthetic peak of 0.5 by default, a CSV as it is
            scale = (LEGACY_SUPPLY_PEAK if scale is None else scale) if synthetic else None
        supply = Supply(source, mode, None if scale is None else float(scale),
                        (seed if supply_seed is None else supply_seed) if synthetic else supply_seed,
                        horizon="limits" if synthetic else None)
    power_states = None
    if power is not None:
        fields = {f.name for f in dc.fields(PowerStates)}
        unknown = set(power) - fields
        if unknown:
            raise InputError(f"unknown power_states keys: {', '.join(sorted(unknown))}", path=where, field="options")
        power_states = PowerStates(**{k: (float(v) if k not in ("phases", "nodes_per_cabinet") and isinstance(v, int)
                                          else v) for k, v in power.items()})
    if gpu.get("fgd_coverage") is not None:
        gpu["fgd_coverage"] = float(gpu["fgd_coverage"])
    scenario = Scenario(trace=trace, cluster=cluster or _default_cluster(), queue=queue,
                        selection=Selection(select, **gpu), acceptance=acceptance, deadlines=deadlines,
                        power_states=power_states, supply=supply,
                        arrival_scale=float(params.get("arrival_scale", 1.0)), seed=seed, hook=hook)
    return scenario.check(where)


def _default_cluster():
    from greenslurm.scenario import ClusterSource
    return ClusterSource()


def cell_scenario(cell: Mapping):
    """The scenario of a cell (its id stays the hash of the cell itself)."""
    from greenslurm.scenario import Synthetic, TraceSource
    trace, params, policy, seed = cell["trace"], dict(cell["params"]), cell["policy"], int(cell["seed"])
    limit = params.get("limit", trace.get("limit"))
    if "synthetic" in trace:
        table = {**trace["synthetic"], **{k: params[k] for k in ("jobs", "load", "runtime_median_s") if k in params}}
        try:
            synthetic = Synthetic(**table)
        except TypeError as exc:
            raise InputError(f"bad synthetic trace: {exc}", path="<sweep>", field=f"trace {trace['name']}") from None
        source = TraceSource(synthetic=synthetic, limit=int(limit) if limit is not None else None,
                             exact_runtimes=bool(trace.get("exact_runtimes", False)))
    else:
        columns = trace.get("columns")
        fmt = trace.get("format", "alibaba" if "score" in policy else None)
        source = TraceSource(path=trace["path"], format=fmt, columns=tuple(columns) if columns else None,
                             limit=int(limit) if limit is not None else None,
                             exact_runtimes=bool(trace.get("exact_runtimes", False)))
    cluster = cluster_source(trace.get("cluster"), trace.get("nodes"), trace.get("slurm_conf"))
    options = dict(policy.get("options", {}))
    queue = policy.get("queue", "none")
    if "score" in policy:                       # the GPU papers' model: place at arrival or fail
        options["select"] = gpu_select(policy["score"])
    return policy_scenario(queue, options, trace=source, cluster=cluster, params=params, seed=seed,
                           where=f"policy {policy['name']}")


def replay_policy(jobs: Sequence[JobSpec], cluster: Cluster, queue: str, options: Mapping | None = None,
                  supply=None, progress: Callable[[int, int], None] | None = None):
    """Replay ``jobs`` on ``cluster`` under a queue strategy and policy options (as in sweep specs): the
    policy becomes a :class:`~greenslurm.scenario.Scenario` replayed by
    :func:`greenslurm.scenario_run.replay_jobs`; returns the engine's ReplayResult."""
    from greenslurm.scenario import TraceSource
    from greenslurm.scenario_run import replay_jobs
    scenario = policy_scenario(queue, options, trace=TraceSource(path="<jobs>"), where=f"policy {queue}")
    return replay_jobs(scenario, jobs, cluster, supply=supply, progress=progress).result


def outcome_row(outcome, reader_skipped=None) -> dict:
    """The flat row of a replayed scenario: :func:`figures`, power states, GPU figures."""
    row = figures(outcome.result, outcome.jobs, outcome.supply, reader_skipped=reader_skipped)
    power = outcome.summary.get("power_states")
    if power is not None:
        row.update(boots=power["boots"], suspends=power["suspends"], off_node_h=power["off_node_h"],
                   boot_node_h=power["boot_node_h"], saved_vs_idle_kwh=power["saved_vs_idle_j"] / 3.6e6,
                   refused_starts=power["refused_starts"], mean_phase_imbalance=power["mean_phase_imbalance"])
    for key, value in (outcome.summary.get("gpu") or {}).items():
        if not isinstance(value, (dict, list)):
            row[f"gpu_{key}"] = value
    return row


def figures(result, jobs: Sequence[JobSpec], supply=None, **summary_args) -> dict:
    """The replay's summary as one flat row of numbers (what sweeps, what-if and reports compare)."""
    from greenslurm.sim.accounting.metrics import summarize
    summary = summarize(result, **summary_args)
    row = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
    row["cluster_name"] = summary["cluster"]["name"]
    row["cluster_nodes"] = summary["cluster"]["nodes"]
    row["cluster_cpus"] = summary["cluster"]["cpus"]
    rejected = list(getattr(result, "rejected", ()) or ())
    row["rejected"] = len(rejected)
    offered = math.fsum(j.cpus * j.run_for_s for j in jobs if math.isfinite(j.run_for_s))
    ran = {r.job_id for r in result.records}
    accepted = math.fsum(j.cpus * j.run_for_s for j in jobs if j.job_id in ran and math.isfinite(j.run_for_s))
    row["offered_cpu_hours"] = offered / 3600.0
    row["accepted_load_share"] = accepted / offered if offered > 0 else None
    # Performance ratio (Nileshwar & Schwiegelshohn): an upper bound on the acceptable load / the accepted load.  With
    # deadlines, the bound of greenslurm.sim.accounting.deadline_metrics (the LP relaxation up to
    # LP_MAX_JOBS jobs, else the load of the jobs that could meet their deadline alone); without, the
    # offered load.
    bound, row["load_bound"] = offered, "offered load"
    if any(j.deadline_s is not None for j in jobs):
        from greenslurm.sim.accounting.deadline_metrics import upper_bound, work_of
        bound, row["load_bound"] = upper_bound(work_of(jobs), result.cluster.total_cpus, lp=len(jobs) <= LP_MAX_JOBS)
    row["load_bound_cpu_hours"] = bound / 3600.0
    row["performance_ratio"] = bound / accepted if accepted > 0 else None
    row["deadline_miss_share"] = (row["deadline_missed"] / row["deadline_jobs"]) if row.get("deadline_jobs") else None
    if supply is not None and len(result.power_w):
        from greenslurm.clustermodel.power import joules_to_kwh
        from greenslurm.clustermodel.renewable import split_energy
        split = split_energy(result.power_times_s[:len(result.power_w)], result.power_w, result.energy.end_s, supply)
        row["renewable_kwh"] = joules_to_kwh(split.renewable_j)
        row["grid_kwh"] = joules_to_kwh(split.grid_j)
        row["curtailed_kwh"] = joules_to_kwh(split.curtailed_j)
        row["renewable_share"] = split.renewable_share
    return row


def run_cell(cell: Mapping) -> dict:
    """Run one cell: ``(trace, policy and its options, parameters, seed) -> one flat row``; the cell
    is a :class:`~greenslurm.scenario.Scenario` replayed by :func:`greenslurm.scenario_run.run`."""
    from greenslurm import scenario_run
    started = time.perf_counter()
    scenario = cell_scenario(cell)
    outcome = scenario_run.run(scenario, cache=True)
    policy = cell["policy"]
    row = {"cell_id": cell_id(cell), "trace": cell["trace"]["name"], "policy": policy["name"],
           "queue_name": scenario.queue, "select": scenario.selection_name,
           "options": json.dumps(policy.get("options", {}), sort_keys=True),
           "seed": int(cell["seed"]), **cell["params"]}
    if cell["trace"].get("limit") is not None:       # the cut, for figure titles ("first 3,000 jobs")
        row["trace_limit"] = int(cell["trace"]["limit"])
    row.update(outcome_row(outcome))
    row["elapsed_s"] = time.perf_counter() - started
    return row


def _safe_run(cell: Mapping) -> tuple[str, dict | None, str | None]:
    try:
        return cell_id(cell), run_cell(cell), None
    except Exception as exc:       # a failed cell is reported and retried on the next run
        return cell_id(cell), None, f"{type(exc).__name__}: {exc}"


# -- the store ------------------------------------------------------------------------------------
class ResultStore:
    """One JSON file per finished cell, a ledger of finished cells, the combined Parquet table."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.cells_dir = self.dir / CELLS_DIR
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        self._repair_ledger()

    def _repair_ledger(self) -> None:
        """Make the ledger agree with the cell files after a hard kill.

        A cell file is renamed into place before its ledger line is appended, so a kill between
        the two leaves a finished cell without a line, and a kill during the append leaves half a
        line.  The half line is cut off; each finished cell without a line gets one, marked
        ``recovered``.  The cell is not run again, and no cell appears twice.
        """
        path = self.dir / LEDGER
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if text and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
            path.write_text(text, encoding="utf-8")
        listed = {json.loads(line)["cell_id"] for line in text.splitlines() if line}
        missing = sorted(self.done() - listed)
        if missing:
            with open(path, "a", encoding="utf-8") as ledger:
                for cid in missing:
                    ledger.write(json.dumps({"cell_id": cid, "pid": os.getpid(), "time": time.time(),
                                             "recovered": True}) + "\n")

    def done(self) -> set[str]:
        return {p.stem for p in self.cells_dir.glob("*.json")}

    def save(self, cid: str, cell: Mapping, row: Mapping) -> None:
        path = self.cells_dir / f"{cid}.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"cell": cell, "row": row}, sort_keys=True, default=_json_default))
        os.replace(tmp, path)
        with open(self.dir / LEDGER, "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps({"cell_id": cid, "pid": os.getpid(), "time": time.time()}) + "\n")
        failed = self.dir / FAILED_DIR / f"{cid}.json"
        if failed.exists():
            failed.unlink()

    def save_failure(self, cid: str, cell: Mapping, error: str) -> None:
        folder = self.dir / FAILED_DIR
        folder.mkdir(exist_ok=True)
        (folder / f"{cid}.json").write_text(json.dumps({"cell": cell, "error": error}, sort_keys=True))

    def rows(self, ids: Iterable[str] | None = None) -> list[dict]:
        wanted = None if ids is None else set(ids)
        rows = []
        for path in sorted(self.cells_dir.glob("*.json")):
            if wanted is not None and path.stem not in wanted:
                continue
            rows.append(json.loads(path.read_text())["row"])
        return rows

    def combine(self, cells: Sequence[Mapping]) -> Path:
        order = {cell_id(c): i for i, c in enumerate(cells)}
        rows = sorted(self.rows(order), key=lambda r: order[r["cell_id"]])
        import pandas as pd          # results.parquet only: a sweep's start does not pay for pandas
        frame = pd.DataFrame(rows)
        path = self.dir / RESULTS_PARQUET
        frame.to_parquet(path, index=False)
        return path


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    return str(value)


# -- running a sweep ------------------------------------------------------------------------------
@dataclass
class SweepOutcome:
    total: int
    skipped: int                       # already finished before this run
    ran: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    results: Path | None = None
    elapsed_s: float = 0.0

    @property
    def complete(self) -> bool:
        return self.skipped + self.ran == self.total


def run_sweep(spec: SweepSpec, results_dir: str | Path, *, workers: int | None = None, dask: str | None = None,
              max_cells: int | None = None,
              progress: Callable[[int, int], None] | None = None,
              on_start: Callable[[int, int, str], None] | None = None) -> SweepOutcome:
    """Run the cells of ``spec`` not yet in ``results_dir``; combine all finished cells at the end.

    ``workers``: local processes (default: CPU count; 1 runs in this process).  ``dask``: a scheduler
    address ``tcp://host:port``, or ``"local"`` for a LocalCluster on loopback for this run only.
    ``max_cells``: stop after this many new cells (the rest is left for the next run).
    ``progress(done, total)`` is called as cells finish (done counts skipped cells too).
    """
    started = time.perf_counter()
    store = ResultStore(results_dir)
    cells = spec.cells()
    by_id = {cell_id(c): c for c in cells}
    finished = store.done() & set(by_id)
    todo = [c for c in cells if cell_id(c) not in finished]
    if max_cells is not None:
        todo = todo[:max(0, max_cells)]
    outcome = SweepOutcome(total=len(by_id), skipped=len(finished))
    if on_start is not None:
        on_start(len(by_id), len(finished), "dask" if dask else f"{_workers(workers)} local processes")
    done = len(finished)
    if progress is not None:
        progress(done, len(by_id))

    def finish(cid: str, row: dict | None, error: str | None) -> None:
        nonlocal done
        if row is None:
            outcome.failed[cid] = error or "failed"
            store.save_failure(cid, by_id[cid], outcome.failed[cid])
        else:
            store.save(cid, by_id[cid], row)
            outcome.ran += 1
        done += 1
        if progress is not None:
            progress(done, len(by_id))

    try:
        if dask:
            _run_dask(todo, dask, workers, finish)
        elif _workers(workers) <= 1 or len(todo) <= 1:
            for cell in todo:
                finish(*_safe_run(cell))
        else:
            _run_local(todo, _workers(workers), finish)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        outcome.results = store.combine(cells)
        outcome.elapsed_s = time.perf_counter() - started
    return outcome


def _workers(workers: int | None) -> int:
    return max(1, workers if workers else (os.cpu_count() or 1))


def _run_local(todo: Sequence[Mapping], workers: int, finish) -> None:
    pool = worker_pool(workers)
    try:
        pending = {pool.submit(_safe_run, cell) for cell in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                finish(*future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(todo: Sequence[Mapping], address: str, workers: int | None, finish) -> None:
    import logging

    from distributed import Client, LocalCluster, as_completed
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:     # quiet unless -v
        for name in ("distributed", "dask"):
            logging.getLogger(name).setLevel(logging.WARNING)
    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=_workers(workers), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        if not todo:
            return
        futures = client.map(_safe_run, list(todo), pure=False)
        try:
            for future in as_completed(futures):
                finish(*future.result())
        finally:
            unfinished = [f for f in futures if not f.done()]
            if unfinished:
                client.cancel(unfinished)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
