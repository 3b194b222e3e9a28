"""One cell of a sweep: the parameters a grid may vary, a cell turned into a
:class:`~greenslurm.scenario.Scenario` (:func:`cell_scenario`) and replayed into one flat row of figures
(:func:`run_cell`).  The spec file is :mod:`greenslurm.sweep_spec`'s, the sweep itself
:mod:`greenslurm.sweep`'s."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from greenslurm.clustermodel import Cluster, InputError, JobSpec


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


def _is_cluster_table(cluster: Any) -> bool:
    """The scenario's [cluster] table (``{slurm_conf = ...}``, ...), not an inline ``{nodes = N, cpus = C}``."""
    return isinstance(cluster, dict) and bool(cluster) and set(cluster) <= set(CLUSTER_TABLE_KEYS)


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
    from greenslurm.scenario_run import hook_green_moves
    moves = hook_green_moves(outcome)
    if moves is not None:                    # the hook planned with a forecast: its moves
        row["hook_moved"], row["hook_mean_move_s"] = moves["jobs_moved"], moves["mean_move_s"]
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
