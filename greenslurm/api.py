"""The notebook API: ``greenslurm.replay``, ``greenslurm.compare`` and ``greenslurm.whatif`` give
pandas DataFrames and the summary dict instead of a printed report.

Keywords are the command line's options with underscores (``--slack-mean`` is ``slack_mean``) and
name the same scenario keys as a scenario TOML (:data:`KEYWORDS`); the tables of a scenario
(``power_states``, ``colocation``, ``acceptance``, ``cluster``) may be given whole as dicts.  The
first argument may also be a :class:`~greenslurm.scenario.Scenario` or a scenario TOML file; the
keywords then change it.  Without a trace: the bundled demo trace (KTH-SP2, 2,000 jobs) on its
cluster, as ``greenslurm demo``.

Every bad argument raises :class:`~greenslurm.clustermodel.InputError` with the one line the
command line prints, naming the keyword (``greenslurm.replay(): field slack_mean: must be > 0``).
The replays are the CLI's: :func:`greenslurm.scenario_run.load_inputs` and
:func:`~greenslurm.scenario_run.replay_jobs`, the frames of :mod:`greenslurm.sim.reporting.outputs`
(the columns of jobs.csv and power.csv), and what-if's policies
(:func:`greenslurm.cmd_whatif.parse_policy`, :func:`greenslurm.sweep_cell.policy_scenario`).  No progress
bar unless ``progress=True``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import inspect
import itertools
import math
import os
import tomllib
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from greenslurm.clustermodel import InputError
from greenslurm.scenario import RUN_WHERE, Scenario, from_mapping

# keyword -> the scenario key it sets (the TOML's [table] key; the CLI option is --keyword-with-dashes)
KEYWORDS = {
    "format": "trace.format", "strict": "trace.strict", "columns": "trace.columns", "limit": "trace.limit",
    "parallelism_limit": "trace.parallelism_limit", "exact_runtimes": "trace.exact_runtimes",
    "cluster": "cluster.file", "nodes": "cluster.node_list", "slurm_conf": "cluster.slurm_conf",
    "sacctmgr_assoc": "cluster.sacctmgr_assoc", "sacctmgr_qos": "cluster.sacctmgr_qos",
    "slurmctld_log": "cluster.slurmctld_log",
    "slurm_handover": "cluster.slurm_handover_s", "queue": "queue", "select": "selection.name", "normalization": "selection.normalization",
    "ties": "selection.ties", "fgd_coverage": "selection.fgd_coverage",
    "acceptance": "acceptance.policy", "threshold_share": "acceptance.threshold_share",
    "threshold_slack": "acceptance.threshold_slack",
    "slack_mean": "deadlines.slack_mean", "slack_sigma": "deadlines.slack_sigma", "slack_seed": "deadlines.seed",
    "renewable": "supply.source", "renewable_mode": "supply.mode", "renewable_scale": "supply.scale",
    "renewable_seed": "supply.seed", "power_states": "power_states", "colocation": "colocation",
    "arrival_scale": "arrival_scale", "seed": "seed", "hook": "hook",
}
TABLE_KEYWORDS = ("cluster", "acceptance", "power_states", "colocation")   # also take the whole table (a dict)
PATH_KEYWORDS = ("cluster", "nodes", "slurm_conf", "sacctmgr_assoc", "sacctmgr_qos", "slurmctld_log", "renewable",
                 "hook")
CLUSTER_KEYWORDS = ("cluster", "nodes", "slurm_conf")
SYNTHETIC_SUPPLIES = ("solar", "wind")
COMMAND_LINE = "<command line>"            # where what-if's policy parser places its errors
# scenario key -> the keyword that names it in an error
NAMES = {"trace.path": "trace", **{key: keyword for keyword, key in KEYWORDS.items()},
         "cluster.homogeneous": "cluster", "deadlines": "slack_mean", "supply": "renewable"}


# -- results ----------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Result:
    """What a replay (or several) gave: ``jobs`` (the columns of jobs.csv), ``power`` (power.csv),
    ``summary`` (summary.json); for power states ``phases`` and ``moves``; for :func:`compare` and
    :func:`whatif` a ``table`` with one row per policy and each policy's own result in ``runs``
    (``jobs`` and ``power`` then hold every policy's rows, ``policy`` their first column)."""

    jobs: Any
    power: Any
    summary: dict
    table: Any = None
    runs: Mapping[str, "Result"] = field(default_factory=lambda: types.MappingProxyType({}))
    scenario: Scenario | None = None
    phases: Any = None
    moves: Any = None

    def __repr__(self) -> str:
        if self.table is not None:
            return f"Result({len(self.runs)} policies: {', '.join(self.runs)}; see .table)"
        s = self.summary
        return (f"Result({s.get('jobs_completed', 0):,} jobs, {s.get('queue')} queue: mean wait "
                f"{_number(s.get('mean_wait_s'))} s, energy {_number(s.get('energy_kwh'))} kWh)")


def _number(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


# -- arguments --------------------------------------------------------------------------------------
def _signature(*leading: inspect.Parameter, extra: tuple[inspect.Parameter, ...] = ()) -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature([*leading, *(inspect.Parameter(name, keyword, default=None) for name in KEYWORDS),
                              *extra])


TRACE_PARAMETER = inspect.Parameter("trace", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
PROGRESS_PARAMETER = inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=False)


def _api(where: str, signature: inspect.Signature):
    """Arguments bound to ``signature`` (an unknown keyword is an InputError with the nearest name);
    every InputError leaves the call as one line naming ``where`` and the keyword, its traceback cut
    at this call (not deep inside the engine)."""
    def wrap(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            try:
                try:
                    bound = signature.bind(*args, **kwargs)
                except TypeError as exc:
                    unknown = next((k for k in kwargs if k not in signature.parameters), None)
                    if unknown is None:
                        raise InputError(str(exc), path=where) from None
                    near = difflib.get_close_matches(unknown, list(signature.parameters), n=1)
                    raise InputError(f"unknown argument{f'; did you mean {near[0]}?' if near else ''}",
                                     path=where, field=unknown) from None
                bound.apply_defaults()
                return function(where, **bound.arguments)
            except InputError as exc:
                field_name = exc.field
                if exc.path in (RUN_WHERE, where):
                    field_name = _keyword(exc.field)
                # the replay's and what-if's policy errors point at the scenario or the command line: here the call
                path = where if exc.path in (RUN_WHERE, COMMAND_LINE) else exc.path
                raise InputError(exc.reason, path=path, line=exc.line, field=field_name) from None
        call.__signature__ = signature
        return call
    return wrap


def _keyword(key: str | None) -> str | None:
    """The keyword of a scenario key (``deadlines.slack_mean`` -> ``slack_mean``).

    >>> _keyword("deadlines.slack_mean"), _keyword("power_states.boot_s"), _keyword("cluster.homogeneous.cpus")
    ('slack_mean', 'power_states.boot_s', 'cluster.cpus')
    """
    if key is None or key in NAMES:
        return NAMES.get(key, key)
    return key.replace("cluster.homogeneous.", "cluster.")


def _plain(value, where: str, keyword: str):
    """Python values for the scenario reader: paths as text, numpy scalars as numbers."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v, where, f"{keyword}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, where, keyword) for v in value]
    return value


def _absolute(value):
    return os.path.abspath(value) if isinstance(value, str) else value


def scenario_from(trace, settings: Mapping[str, Any], where: str) -> Scenario:
    """The scenario of the arguments: a trace file (or a Scenario, or a scenario TOML, which the
    keywords change) and keyword settings; checked, errors naming the keywords."""
    base: dict = {}
    if isinstance(trace, Scenario) or (isinstance(trace, (str, os.PathLike)) and str(trace).endswith(".toml")):
        scenario = trace if isinstance(trace, Scenario) else Scenario.from_file(os.fspath(trace))
        base = tomllib.loads(scenario.to_toml())
    elif trace is not None:
        trace = _plain(trace, where, "trace")
        base = {"trace": {"path": _absolute(trace) if isinstance(trace, str) else trace}}
    given = {k: _plain(v, where, k) for k, v in settings.items() if v is not None}
    if any(k in given for k in CLUSTER_KEYWORDS):          # a cluster given replaces the scenario's
        base["cluster"] = {k: v for k, v in base.get("cluster", {}).items() if k.startswith("sacctmgr")}
    if "deadlines" not in base and "slack_mean" not in given:
        for keyword in ("slack_sigma", "slack_seed"):
            if keyword in given:
                raise InputError("applies to drawn deadlines: give slack_mean", path=where, field=keyword)
    if "acceptance" not in base and "acceptance" not in given:
        for keyword in ("threshold_share", "threshold_slack"):
            if keyword in given:
                raise InputError("applies to the threshold acceptance policy: give acceptance='threshold' (or a "
                                 "chain with it)", path=where, field=keyword)
    if "queue" not in base and "queue" not in given:
        # as on the command line: deadline options choose the deadline queue, co-location the fcfs queue
        deadline = "acceptance" in given or given.get("renewable_mode", "grid") != "grid"
        given["queue"] = "deadline" if deadline else "fcfs" if "colocation" in given else "easy"
    data = base
    for keyword in sorted(given, key=lambda k: k not in TABLE_KEYWORDS):     # whole tables first
        value = given[keyword]
        if keyword in PATH_KEYWORDS and not (keyword == "renewable" and value in SYNTHETIC_SUPPLIES):
            value = _absolute(value)
        if keyword in TABLE_KEYWORDS and isinstance(value, dict):
            if keyword == "cluster" and {"nodes", "cpus"} & set(value):
                value = {"homogeneous": value}
            data[keyword] = value
            continue
        section, _, name = KEYWORDS[keyword].rpartition(".")
        table = data.setdefault(section, {}) if section else data
        table[name] = value
    try:
        scenario = from_mapping(data, where)
    except InputError as exc:
        raise InputError(exc.reason, path=where, field=_keyword(exc.field)) from None
    return scenario.check(where, NAMES)


@contextlib.contextmanager
def _demo_when_no_trace(trace, settings: dict) -> Iterator[tuple[Any, dict]]:
    """The bundled demo trace, and its cluster unless one is given, when no trace is."""
    if trace is not None:
        yield trace, settings
        return
    from greenslurm.inputs import DEMO_CLUSTER, DEMO_TRACE, demo_file
    with contextlib.ExitStack() as stack:
        trace = stack.enter_context(demo_file(DEMO_TRACE))
        if all(settings.get(k) is None for k in CLUSTER_KEYWORDS):
            settings = {**settings, "cluster": stack.enter_context(demo_file(DEMO_CLUSTER))}
        yield trace, settings


def _progress(progress, total: int):
    """A rich bar for ``progress=True``, the caller's ``progress(done, total)`` for a callable, else none."""
    if callable(progress):
        return contextlib.nullcontext(progress)
    from greenslurm.console import progress_bar, terminal
    return progress_bar(terminal(stderr=True), total, bool(progress))


# -- one replay -------------------------------------------------------------------------------------
def _replayed(scenario: Scenario, inputs, progress) -> tuple[Result, Any]:
    """The result of ``scenario`` on jobs already read, and the replay's outcome."""
    from greenslurm.scenario_run import replay_jobs
    from greenslurm.sim.reporting.outputs import JOBS_CSV, MOVES_CSV, PHASES_CSV, POWER_CSV, output_frames
    with _progress(progress, len(inputs.jobs)) as update:
        outcome = replay_jobs(scenario, inputs.jobs, inputs.cluster, trace=inputs.trace, progress=update)
    frames = output_frames(outcome.result, outcome.replay.machine)
    return Result(whole_counts(frames[JOBS_CSV]), whole_counts(frames[POWER_CSV]), outcome.summary, scenario=scenario,
                  phases=frames.get(PHASES_CSV), moves=frames.get(MOVES_CSV)), outcome


# Counts that the files hold as floats (an Alibaba trace's CPUs and GPUs are shares: 0.5 GPU).
COUNT_COLUMNS = ("cpus", "gpus", "busy_cpus")


def whole_counts(frame):
    """``frame`` with its count columns as int64 where every value is a whole number (a trace of whole
    CPUs and GPUs); a column with a share in it stays float.

    >>> import pandas as pd
    >>> whole_counts(pd.DataFrame({"cpus": [4.0, 16.0], "gpus": [0.5, 1.0], "wait_s": [0.0, 3.0]})).dtypes.tolist()
    [dtype('int64'), dtype('float64'), dtype('float64')]
    """
    import numpy as np
    for name in COUNT_COLUMNS:
        if name in frame.columns and frame[name].dtype.kind == "f":
            values = frame[name].to_numpy()
            if np.isfinite(values).all() and (values == np.round(values)).all():
                frame[name] = values.astype(np.int64)
    return frame


def _replay(where: str, trace=None, progress=False, **settings) -> Result:
    from greenslurm.scenario_run import load_inputs
    with _demo_when_no_trace(trace, settings) as (trace, settings):
        scenario = scenario_from(trace, settings, where)
        return _replayed(scenario, load_inputs(scenario), progress)[0]


replay = _api("greenslurm.replay()", _signature(TRACE_PARAMETER, extra=(PROGRESS_PARAMETER,)))(_replay)
replay.__name__ = replay.__qualname__ = "replay"
replay.__doc__ = """Replay a trace (default: the bundled demo) and return a :class:`Result`: ``.jobs``,
``.power`` (DataFrames with the columns of jobs.csv and power.csv), ``.summary`` (summary.json).

``trace`` is a trace file, a scenario TOML or a :class:`~greenslurm.scenario.Scenario`; the keywords
are the CLI's options (``queue="conservative"``, ``select="bestfit"``, ``slack_mean=1.0``,
``renewable="solar"``, ``power_states={"suspend_after_s": 600}``, ``seed=3``, ...).  Bad arguments
raise :class:`~greenslurm.clustermodel.InputError` naming the keyword.
"""


# -- several replays ---------------------------------------------------------------------------------
def _label(choice: Mapping[str, Any]) -> str:
    """A run's name from the settings that vary.

    >>> _label({"queue": "easy", "select": "bestfit"})
    'queue=easy, select=bestfit'
    """
    return ", ".join(f"{k}={v}" for k, v in choice.items())


def _combined(runs: Mapping[str, Result], table, summary: dict) -> Result:
    import pandas as pd

    def stacked(kind: str):
        frames = [getattr(run, kind).assign(policy=label) for label, run in runs.items()]
        frame = pd.concat(frames, ignore_index=True)
        return frame[["policy", *(c for c in frame.columns if c != "policy")]]
    return Result(stacked("jobs"), stacked("power"), summary, table=table, runs=types.MappingProxyType(dict(runs)))


def _rows_table(rows: list[dict]):
    import pandas as pd
    return pd.DataFrame.from_records(rows)


def _compare(where: str, trace=None, progress=False, **settings) -> Result:
    from greenslurm.scenario_run import load_inputs
    from greenslurm.sweep_cell import outcome_row
    varying = {k: list(v) for k, v in settings.items() if isinstance(v, (list, tuple)) and k != "columns"}
    if not varying:
        raise InputError("give a list of values for at least one keyword (queue=['easy', 'conservative'])",
                         path=where)
    for keyword, values in varying.items():
        if not values:
            raise InputError("an empty list: nothing to compare", path=where, field=keyword)
    runs, rows, read = {}, [], {}
    with _demo_when_no_trace(trace, settings) as (trace, settings):
        for values in itertools.product(*varying.values()):
            choice = dict(zip(varying, values))
            scenario = scenario_from(trace, {**settings, **choice}, where)
            # one read per trace, limit and cluster (the prepared jobs differ per run, the read does not;
            # a limit stops the read: read_trace)
            key = (dataclasses.replace(scenario.trace, parallelism_limit=None, exact_runtimes=False),
                   scenario.cluster, scenario.seed if scenario.trace.synthetic is not None else None)
            if key not in read:
                read[key] = load_inputs(scenario)
            label = _label(choice)
            if label in runs:
                raise InputError(f"{label} is given twice", path=where, field=next(iter(choice)))
            runs[label], outcome = _replayed(scenario, read[key], progress)
            row = outcome_row(outcome, reader_skipped=_reader_skipped(read[key].trace))
            rows.append({"policy": label, **{k: _plain(v, where, k) for k, v in choice.items()}, **row})
    return _combined(runs, _rows_table(rows), {"policies": {label: run.summary for label, run in runs.items()}})


def _reader_skipped(trace) -> dict | None:
    return None if trace is None else dict(trace.skipped)


compare = _api("greenslurm.compare()", _signature(TRACE_PARAMETER, extra=(PROGRESS_PARAMETER,)))(_compare)
compare.__name__ = compare.__qualname__ = "compare"
compare.__doc__ = """Replay one trace under every combination of the keywords given as lists and return
a :class:`Result` whose ``.table`` has one row per combination (``policy``, the varied keywords, then
the figures of sweeps and what-if: ``mean_wait_s``, ``energy_kwh``, ``peak_power_w``, ...).

``greenslurm.compare(queue=["easy", "conservative"])`` compares two queues on the demo trace;
``compare("log.swf", select=["bestfit", "balanced"], slack_mean=[0.5, 2.0], acceptance="greedy")``
four deadline runs.  The other keywords are :func:`replay`'s.
"""


# -- what-if -------------------------------------------------------------------------------------------
# the command line's names (slack, supply and supply_peak: the deprecated names of slack_mean, renewable
# and renewable_scale, kept for one release as the command line keeps them)
WHATIF_KEYWORDS = ("cluster", "slurm_conf", "cluster_from_slurm", "format", "columns", "current", "candidate",
                   "slack_mean", "slack_sigma", "exact_runtimes", "seed", "renewable", "renewable_scale",
                   "exclude_unavailable", "node_idle_w", "node_busy_w", "limit", "start_tolerance",
                   "slack", "supply", "supply_peak")


def _whatif_cluster(where: str, cluster, slurm_conf, cluster_from_slurm, exclude_unavailable: bool,
                    node_idle_w, node_busy_w):
    """(cluster, where it came from, a note): what-if's three sources, as ``whatif``'s
    ``--cluster``, ``--slurm-conf`` and ``--cluster-from-slurm`` (cmd_whatif.load_cluster reads them
    from the command line's options; this is the same for keywords)."""
    from greenslurm.cmd_whatif import slurm_json_text
    from greenslurm.inputs import check_input_file
    given = [k for k, v in (("cluster", cluster), ("slurm_conf", slurm_conf),
                            ("cluster_from_slurm", cluster_from_slurm)) if v is not None]
    if len(given) != 1:
        raise InputError("give one of cluster, slurm_conf, cluster_from_slurm", path=where,
                         field=given[1] if given else "cluster")
    power = dict(idle_w=node_idle_w, busy_w=node_busy_w)
    if slurm_conf is not None:
        from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf
        check_input_file(slurm_conf, "slurm.conf")
        conf = parse_slurm_conf(slurm_conf)
        return (cluster_from_slurm_conf(conf, exclude_unavailable=exclude_unavailable, **power), slurm_conf,
                "; ".join(conf.warnings))
    if cluster is not None:
        from greenslurm.sweep_cell import build_cluster
        check_input_file(cluster, "cluster")
        return build_cluster(os.path.abspath(cluster)), cluster, ""
    from greenslurm.traces.slurm_nodes import cluster_from_slurm_nodes, parse_slurm_nodes
    text, source = slurm_json_text(cluster_from_slurm)
    nodes = parse_slurm_nodes(text, path=source)
    name = "live" if cluster_from_slurm == "live" else Path(source).stem
    down = sum(1 for node in nodes if not node.available)
    note = f"{down} nodes down or drained" if down else ""
    return cluster_from_slurm_nodes(nodes, name=name, exclude_unavailable=exclude_unavailable, **power), source, note


def _whatif(where: str, trace=None, cluster=None, slurm_conf=None, cluster_from_slurm=None, format=None,
            columns=None, current=None, candidate=None, slack_mean=None, slack_sigma=None, exact_runtimes=False,
            seed=0, renewable=None, renewable_scale=None, exclude_unavailable=False, node_idle_w=None,
            node_busy_w=None, limit=None, start_tolerance=None, slack=None, supply=None,
            supply_peak=None) -> Result:
    from greenslurm.cmd_whatif import default_candidates, parse_policy, whatif_row
    from greenslurm.power_model import read_from_slurm
    from greenslurm.inputs import check_input_file, parse_columns, read
    from greenslurm.scenario import ClusterSource, TraceSource
    from greenslurm.scenario_run import Inputs, build_supply, prepared_jobs
    from greenslurm.sim.engine.recorded_schedule import submit_and_start
    from greenslurm.sim.reporting.outputs import WHATIF_SCHEMA, versioned
    from greenslurm.sweep_cell import policy_scenario
    from greenslurm.whatif_baseline import DEFAULT_TOLERANCE_S, LABEL as RECORDED, distance, recorded_column, recorded_json

    if trace is None:
        raise InputError("give the site's jobs (a sacct export or any trace file)", path=where, field="trace")
    for old, new, value in (("slack", "slack_mean", slack_mean), ("supply", "renewable", renewable),
                            ("supply_peak", "renewable_scale", renewable_scale)):
        if value is not None and locals()[old] is not None:
            raise InputError(f"give {new} or its old name {old}, not both", path=where, field=old)
    if slack is not None:
        slack_mean = slack
    trace, cluster, slurm_conf = (_plain(v, where, "") for v in (trace, cluster, slurm_conf))
    renewable, supply = (_plain(v, where, "") for v in (renewable, supply))
    tolerance = DEFAULT_TOLERANCE_S if start_tolerance is None else start_tolerance
    if not (isinstance(tolerance, (int, float)) and tolerance >= 0 and math.isfinite(tolerance)):
        raise InputError(f"must be a number of seconds >= 0, not {tolerance!r}", path=where, field="start_tolerance")
    current = parse_policy(current if current is not None else "slurm" if slurm_conf else "easy")
    candidates = [candidate] if isinstance(candidate, str) else candidate
    defaults = default_candidates(current[1], slack_mean is not None)
    policies = [current] + [c for c in map(parse_policy, candidates or defaults) if c[0] != current[0]]
    if any(label == RECORDED for label, _, _ in policies):
        raise InputError(f"{RECORDED!r} names the export's own schedule; give the policy another name "
                         "(NAME=QUEUE...)", path=where, field="candidate")
    site, source_name, note = _whatif_cluster(where, cluster, slurm_conf, cluster_from_slurm, exclude_unavailable,
                                              node_idle_w, node_busy_w)
    for name, value in (("renewable", renewable), ("supply", supply)):
        if value not in (None, "solar", "wind"):
            check_input_file(value, name)
    columns = parse_columns(columns) if isinstance(columns, str) else columns
    path = os.path.abspath(trace)
    source = TraceSource(path=path, format=format, columns=tuple(columns) if columns else None, limit=limit,
                         exact_runtimes=exact_runtimes)
    where_cluster = (ClusterSource(file=os.path.abspath(cluster)) if cluster
                     else ClusterSource(slurm_conf=os.path.abspath(slurm_conf)) if slurm_conf else ClusterSource())
    params = {k: v for k, v in (("slack_mean", slack_mean), ("slack_sigma", slack_sigma), ("renewable", renewable),
                                ("renewable_scale", renewable_scale), ("supply", supply), ("supply_peak", supply_peak))
              if v is not None}
    scenarios = [(label, policy_scenario(queue, options, trace=source, cluster=where_cluster, params=params,
                                         seed=seed, where=f"policy {label}"))
                 for label, queue, options in policies]
    read_trace = read(path, format, columns=tuple(columns) if columns else None, limit=limit)
    inputs = Inputs(sorted(read_trace.jobs, key=lambda job: job.submit_s), site, read_trace)
    jobs = prepared_jobs(scenarios[0][1], inputs.jobs)     # the jobs every policy replays
    if not jobs:
        raise InputError("no jobs to replay", path=str(trace))
    skipped = dict(read_trace.skipped)
    runs, rows, starts = {}, [], None
    for label, scenario in scenarios:
        runs[label], outcome = _replayed(scenario, inputs, False)
        rows.append({"policy": label, **whatif_row(outcome, site.size, skipped)})
        if label == current[0]:
            starts = submit_and_start(outcome.result.records)
    recorded = recorded_column(jobs, site, build_supply(scenarios[0][1], jobs, site), skipped)
    far = distance(recorded, current[0], starts, jobs, tolerance)
    summary = versioned({"trace": str(trace), "jobs": len(jobs), "cluster": source_name, "current": current[0],
                         "policies": {row["policy"]: {k: v for k, v in row.items() if k != "policy"} for row in rows},
                         RECORDED: recorded_json(recorded, skipped), "fidelity": far.as_dict(), "note": note,
                         "power_model": read_from_slurm(site, power_given=cluster is not None
                                                        or node_idle_w is not None).as_dict()},
                        WHATIF_SCHEMA)
    return _combined(runs, _rows_table(rows), summary)


whatif = _api("greenslurm.whatif()", inspect.Signature([
    TRACE_PARAMETER, *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                         default=inspect.signature(_whatif).parameters[name].default)
                       for name in WHATIF_KEYWORDS)]))(_whatif)
whatif.__name__ = whatif.__qualname__ = "whatif"
whatif.__doc__ = """The site's own jobs (``trace``: a sacct export or any trace file) under the current
policy and candidates, as ``greenslurm whatif``: a :class:`Result` whose ``.table`` has one row per
policy (the current one first) and whose ``.summary`` is what ``whatif --json`` writes (the policies'
figures, the export's own ``recorded`` schedule and the current policy's ``fidelity`` to it).

The cluster: ``cluster`` (TOML), ``slurm_conf`` or ``cluster_from_slurm`` (sinfo --json output).
Policies are ``QUEUE[:NAME=VALUE...]`` strings: ``current="easy"``,
``candidate=["fcfs", "deadline:acceptance=greedy:select=bestfit"]``; ``slack`` draws deadlines,
``supply`` ("solar", "wind" or a CSV) adds a renewable supply.
"""
