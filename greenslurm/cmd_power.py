"""Power states, peak budget (pVOCL) and GPU co-location (EaCO) on the command line.

``greenslurm replay`` gains ``--power-down-after``, ``--power-budget`` ... (the scenario's machine model
is :class:`greenslurm.sim.machines.power_states.PowerManagedMachine`) and ``--colocation POLICY`` (the
trace's jobs become training jobs on the co-location machine of
:mod:`greenslurm.sim.machines.colocation`, under the fcfs queue).  ``greenslurm compare`` gains
``--colocation POLICY ...`` (one row per policy) and ``--power-budget W ...`` (one row per budget,
plus no management); every row is a scenario.  Both read a TOML profile with ``--power-config FILE``:
tables ``[power_states]`` (the fields of ``PowerStateConfig``) and ``[colocation]`` (``policy``,
``gpu_nodes``, ``max_jobs``, ``util_threshold_pct``, ``mem_threshold_pct``, ``idle_node_w``, ``beta``,
``jitter``, ``seed``, ``accounting``); command-line options win.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from greenslurm.clustermodel import InputError
from greenslurm import cmd_options
from greenslurm.console import each_with_progress, showing_progress
from greenslurm.inputs import check_input_file, cluster_from_trace, parse_columns, read, read_toml
from greenslurm.scenario import Colocation, PowerStates, from_mapping, power_config, power_states_key
from greenslurm.sim.reporting.report import fmt_duration, fmt_power

POWER_FIELDS = ("suspend_after_s", "boot_s", "boot_w", "off_w", "budget_w", "phases", "nodes_per_cabinet",
                "phase_layout", "wake_order", "consolidate_every_s", "topology_aware", "migrate_s", "movable",
                "imbalance_loss", "start_off")
COLOCATION_KEYS = ("policy", "gpu_nodes", "max_jobs", "util_threshold_pct", "mem_threshold_pct", "idle_node_w",
                   "beta", "jitter", "seed", "accounting")


def add_compare_options(parser: argparse.ArgumentParser) -> None:
    """Add the options to ``compare``; with any of them set, compare runs our table instead."""
    cmd_options.power_options(parser, many=True)
    original = parser.get_default("handler")

    options: dict[str, tuple[str, Any]] = {}          # dest -> (its option, its default), aliases aside
    for action in parser._actions:
        if action.option_strings and action.default != argparse.SUPPRESS:
            options.setdefault(action.dest, (action.option_strings[0], action.default))

    def given(args: argparse.Namespace, dests: tuple[str, ...]) -> list[str]:
        """The options among ``dests`` the command line set (a value other than the option's default)."""
        return [options[dest][0] for dest in dests if getattr(args, dest, options[dest][1]) != options[dest][1]]

    def handler(args: argparse.Namespace, console: Console) -> int:
        power = given(args, POWER_COMPARISON)
        if power:
            # the power comparison reads none of the deadline comparison's options: refused, not ignored
            ignored = given(args, DEADLINE_COMPARISON)
            if ignored:
                raise InputError(f"{ignored[0]} is an option of the deadline comparison; with {power[0]} compare "
                                 f"runs the power comparison, which does not read it: give one or the other",
                                 path="<command line>", field=ignored[0])
            return cmd_compare_power(args, console)
        ignored = given(args, POWER_DETAILS)
        if ignored:
            raise InputError(f"{ignored[0]} sets the power comparison, which runs only with --power-budget, "
                             f"--power-down-after, --power-config or --colocation", path="<command line>",
                             field=ignored[0])
        return original(args, console)
    parser.set_defaults(handler=handler)


# compare's options by the comparison that reads them: the power comparison runs when any of the first
# set is given; the deadline comparison's options and the power comparison's details are refused
# where the other comparison runs (they would be ignored)
POWER_COMPARISON = ("power_budget", "power_down_after", "power_config", "colocation")
POWER_DETAILS = ("boot_s", "boot_w", "off_w", "phases", "nodes_per_cabinet", "consolidate_every", "gpu_nodes",
                 "max_jobs_per_set", "colocation_idle_node_w")
DEADLINE_COMPARISON = ("acceptance", "select", "slack_mean", "parallelism_limit", "exact_runtimes", "planned_limits",
                       "bound", "csv", "slack_sigma", "slack_seed", "threshold_share", "threshold_slack", "renewable",
                       "renewable_mode", "renewable_scale", "renewable_seed")


# -- configuration ---------------------------------------------------------------------------------
def profile(path: str | None) -> dict[str, Any]:
    """The ``--power-config`` TOML profile (empty without one)."""
    if path is None:
        return {}
    data = read_toml(path, "power profile")
    unknown = set(data) - {"power_states", "colocation"}
    if unknown:
        raise InputError(f"unknown tables: {', '.join(sorted(unknown))}", path=path)
    for table in ("power_states", "colocation"):
        if not isinstance(data.get(table, {}), dict):
            raise InputError(f"must be a table [{table}], not {data[table]!r}", path=path, field=table)
    for table, keys in (("power_states", POWER_FIELDS), ("colocation", COLOCATION_KEYS)):
        bad = set(data.get(table, {})) - set(keys)
        if bad:
            raise InputError(f"unknown [{table}] keys: {', '.join(sorted(bad))}", path=path)
    # the scenario's types: a value of the wrong type fails here, naming the profile and the key
    if data.get("power_states") is not None:
        states = from_mapping({"trace": {"path": "-"}, "power_states": data["power_states"]}, path).power_states
        try:
            power_config(states)       # the engine's ranges, named in the profile
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc), path=path, field=power_states_key(str(exc))) from None
    if data.get("colocation") is not None:
        # the types and the ranges, even when no --colocation uses them yet
        from_mapping({"trace": {"path": "-"}, "queue": "fcfs",
                      "colocation": {"policy": "eaco", **data["colocation"]}}, path).check(path, {})
    return data


def power_states(args: argparse.Namespace, table: dict[str, Any], budget_w: float | None = None,
                 use_budget: bool = True) -> PowerStates | None:
    """The power-state settings the options and the profile give, or None when nothing asks for them
    (command-line options win over the profile)."""
    values = dict(table.get("power_states", {}))
    option = lambda name: getattr(args, name, None)     # noqa: E731
    cli = {"suspend_after_s": option("power_down_after"), "boot_s": option("boot_s"), "boot_w": option("boot_w"),
           "off_w": option("off_w"), "phases": option("phases"), "nodes_per_cabinet": option("nodes_per_cabinet"),
           "consolidate_every_s": option("consolidate_every")}
    if use_budget:
        budget = option("power_budget")
        cli["budget_w"] = budget_w if budget_w is not None else (budget if not isinstance(budget, list) else None)
    if "power_states" not in table and all(value is None for value in cli.values()):
        return None
    values.update({key: value for key, value in cli.items() if value is not None})
    values = {k: float(v) if k not in ("phases", "nodes_per_cabinet") and type(v) is int else v
              for k, v in values.items()}
    return PowerStates(**values)


def colocation(args: argparse.Namespace, table: dict[str, Any]) -> Colocation | None:
    """The co-location settings (``--colocation POLICY`` and the profile's ``[colocation]``)."""
    values = dict(table.get("colocation", {}))
    cli = {"gpu_nodes": getattr(args, "gpu_nodes", None), "max_jobs": getattr(args, "max_jobs_per_set", None),
           "idle_node_w": getattr(args, "colocation_idle_node_w", None)}
    policy = getattr(args, "colocation", None)
    if isinstance(policy, list):
        policy = None
    policy = policy or values.pop("policy", None)
    values.pop("policy", None)
    if policy is None:
        names = {"gpu_nodes": "--gpu-nodes", "max_jobs": "--max-jobs-per-set", "idle_node_w": "--colocation-idle-node-w"}
        for key, value in cli.items():
            if value is not None:
                raise InputError("applies to GPU co-location: give --colocation POLICY", path="<command line>",
                                 field=names[key])
        return None
    values.update({key: value for key, value in cli.items() if value is not None})
    return Colocation(policy, **values)


# -- output ------------------------------------------------------------------------------------------
def report_power(summary: dict, console: Console) -> None:
    """After a replay on a power-managed machine: what the power states saved and cost."""
    t = summary.get("power_states")
    if t is None:
        return
    table = Table(title="power states", box=box.SIMPLE_HEAVY, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [("boots / suspends", f"{t['boots']:,} / {t['suspends']:,}"),
            ("boots per node per day", f"{t.get('boots_per_node_day', 0.0):,.2f}"),
            ("energy while off (kWh)", f"{t['off_j'] / 3.6e6:,.2f}"),
            ("energy while booting (kWh)", f"{t['boot_j'] / 3.6e6:,.2f}"),
            ("saved by powering down (kWh)", f"{t['saved_vs_idle_j'] / 3.6e6:,.2f}"),
            ("peak power", fmt_power(t["peak_power_w"])),           # as the energy table shows it
            ("budget", fmt_power(t["budget_w"])),
            ("mean phase imbalance", f"{t['mean_phase_imbalance']:.3f}"),
            ("phase imbalance loss (kWh)", f"{t.get('phase_loss_j', 0.0) / 3.6e6:,.2f}"),
            ("job moves / jobs moved", f"{t.get('migrations', 0):,} / {t.get('moved_jobs', 0):,}")]
    for row in rows:
        table.add_row(*row)
    console.print(table)


def report_colocation(summary: dict, console: Console) -> None:
    """After a replay on the co-location machine: energy, completion and transfer times, misses."""
    c = summary.get("colocation")
    if c is None:
        return
    table = _colocation_table(f"{c['jobs']:,} training jobs on {c['gpu_nodes']} nodes of 8 GPUs")
    table.add_row(c["policy"], f"{c['energy_j'] / 3.6e6:,.1f}", "1.000", f"{c['avg_jct_s'] / 3600:,.2f}",
                  f"{c['avg_jtt_s'] / 3600:,.2f}", f"{c['deadline_misses']:,}", f"{c['undone']:,}",
                  f"{c['colocated_starts']:,}", f"{c['mean_active_nodes']:.1f}")
    console.print(table)


def _colocation_table(title: str) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for name in ("policy", "energy kWh", "vs first", "avg JCT h", "avg JTT h", "misses", "undone",
                 "co-located", "active nodes"):
        table.add_column(name, justify="left" if name == "policy" else "right")
    return table


def run_colocation(args: argparse.Namespace, console: Console, trace, jobs, cluster, policies: list[str]) -> list[dict]:
    """One co-location scenario per policy (the fcfs queue on the co-location machine), one table."""
    from greenslurm import scenario_run
    from greenslurm.scenario import Scenario, TraceSource

    table_data = profile(getattr(args, "power_config", None))
    rows, table, first = [], None, None
    shown = showing_progress(console, getattr(args, "no_progress", False))
    for policy in each_with_progress(console, policies, shown, doing="compare", unit="policies"):
        args.colocation = policy
        settings = colocation(args, table_data)
        scenario = Scenario(trace=TraceSource(path=str(trace.path), format=trace.format), queue="fcfs",
                            colocation=settings).check("<command line>")
        c = scenario_run.replay_jobs(scenario, jobs, cluster, trace=trace, prepared=True).summary["colocation"]
        if table is None:
            table = _colocation_table(f"{c['jobs']:,} training jobs on {c['gpu_nodes']} nodes of 8 GPUs")
        first = first or c
        rows.append(dict(policy=policy, energy_j=c["energy_j"], avg_jct_s=c["avg_jct_s"], avg_jtt_s=c["avg_jtt_s"],
                         deadline_misses=c["deadline_misses"], undone=c["undone"],
                         mean_active_nodes=c["mean_active_nodes"]))
        table.add_row(policy, f"{c['energy_j'] / 3.6e6:,.1f}", f"{c['energy_j'] / first['energy_j']:.3f}",
                      f"{c['avg_jct_s'] / 3600:,.2f}", f"{c['avg_jtt_s'] / 3600:,.2f}", f"{c['deadline_misses']:,}",
                      f"{c['undone']:,}", f"{c['colocated_starts']:,}", f"{c['mean_active_nodes']:.1f}")
    console.print(table)
    return rows


def cmd_compare_power(args: argparse.Namespace, console: Console) -> int:
    """``compare --power-budget W ...``: no management, power-down, and one row per budget, each a
    scenario replayed on the engine (the same jobs in every row)."""
    from greenslurm import scenario_run
    from greenslurm.scenario import ClusterSource, Scenario, TraceSource

    from greenslurm.cmd_compare import cluster_source
    check_input_file(args.trace)
    cluster = scenario_run.build_cluster(Scenario(trace=TraceSource(path=args.trace), cluster=cluster_source(args)))
    trace = read(args.trace, args.format, columns=parse_columns(args.columns),
                 status=console.status if console.is_terminal else None, limit=args.limit)
    cluster = cluster or cluster_from_trace(trace)
    jobs = trace.jobs[:args.limit] if args.limit else trace.jobs
    if not jobs:
        raise InputError("no jobs to replay", path=trace.path)
    if args.colocation:
        run_colocation(args, console, trace, jobs, cluster, list(args.colocation))
        return 0
    table_data = profile(args.power_config)
    for budget in args.power_budget or []:
        if not 0 < budget < math.inf:          # also nan
            raise InputError(f"must be a finite number > 0, not {budget:g}", path="<command line>",
                             field="--power-budget")
    budgets = [None] + list(args.power_budget or [])
    # every row replays the same jobs: those that can run under the lowest budget
    lowest = power_states(args, table_data, budget_w=min(args.power_budget)) if args.power_budget else None
    from greenslurm.sim.machines.power_states import fits_budget
    run_jobs, dropped = (fits_budget(jobs, cluster, power_config(lowest)) if lowest is not None
                         else (list(jobs), 0))
    if dropped:
        console.print(f"{dropped:,} jobs need more power than {lowest.budget_w:,.0f} W even alone: left out of every row")
    base = None
    runs = [("no management", None)]
    rows: list[list[str]] = []
    for budget in budgets:
        config = power_states(args, table_data, budget_w=budget)
        if config is not None:
            runs.append((f"budget {budget:,.0f} W" if budget is not None else "power-down", config))
    trace_source = TraceSource(path=str(trace.path), format=trace.format)
    for label, config in each_with_progress(console, runs, showing_progress(console, args.no_progress),
                                            doing="compare", unit="replays"):
        scenario = Scenario(trace=trace_source, cluster=ClusterSource(), queue="easy", power_states=config)
        scenario.check("<command line>")
        outcome = scenario_run.replay_jobs(scenario, run_jobs, cluster, trace=trace, prepared=True)
        result = outcome.result
        energy = result.energy.total_j
        base = base or energy
        wait_s = sum(r.wait_s for r in result.records) / max(len(result.records), 1)
        t = outcome.replay.machine.power_totals() if config is not None else None
        rows.append([label, f"{energy / 3.6e6:,.1f}", f"{1 - energy / base:.1%}", fmt_power(result.energy.peak_power_w),
                     fmt_duration(wait_s), f"{t.boots:,}" if t else "0", f"{t.off_j / 3.6e6:,.1f}" if t else "0",
                     f"{t.boot_j / 3.6e6:,.1f}" if t else "0", f"{t.mean_imbalance:.3f}" if t else "-"])
    title = f"power states on {cluster.name}, {len(jobs):,} jobs, easy"
    for table in power_states_tables(title, rows, console):
        console.print(table)
    return 0


# the power-states table's columns after the run's label: header lines, no cell ever wrapped or cut
POWER_STATES_COLUMNS = ("energy\nkWh", "saved", "peak\npower", "mean\nwait", "boots", "off\nkWh", "boot\nkWh",
                        "phase\nimbalance")


def power_states_tables(title: str, rows: list[list[str]], console: Console) -> list[Group]:
    """compare's power-states table: a row per run (its label first), split by columns into parts that
    fit the console, each part its title line and a table with the runs' labels."""
    from greenslurm.sim.reporting.table_split import split_to_width

    def build(columns: list[int]) -> Table:
        table = Table(box=box.SIMPLE_HEAVY)
        table.add_column("run", no_wrap=True)
        for column in columns:
            table.add_column(POWER_STATES_COLUMNS[column], justify="right", no_wrap=True)
        for row in rows:
            table.add_row(*(Text(row[0]), *(row[1 + column] for column in columns)))
        return table
    return [Group(Text(title + part, style="bold"), table)
            for part, table in split_to_width(range(len(POWER_STATES_COLUMNS)), build, console, console.width)]
