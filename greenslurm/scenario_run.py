"""Run a :class:`~greenslurm.scenario.Scenario` on the one replay engine.

``run(scenario)`` reads the trace (or draws the synthetic one), builds the cluster, draws deadlines,
builds the supply, the node selection (FGD gets the target workload of the trace's own tasks), the
machine model (plain, node power states, or GPU co-location) and the queue strategy, and replays
with :class:`greenslurm.sim.engine.replay.Replay`.  ``replay_jobs(scenario, jobs, cluster)`` does the
same for jobs already read (what-if and sweeps share one read among many scenarios).  Nothing here
parses command-line arguments; the CLI, ``greenslurm run`` and sweeps all come through here.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from greenslurm.clustermodel import Cluster, InputError, JobSpec
from greenslurm.scenario import RUN_WHERE, Scenario, power_config

if TYPE_CHECKING:
    from greenslurm.sim.accounting.result import ReplayResult

log = logging.getLogger("greenslurm")

Progress = Callable[[int, int], None]
# Longest arrival span a scaled trace may have: float seconds keep ~0.1 ms steps up to 1e12 s.
MAX_SPAN_S = 1e12


@dataclass
class Inputs:
    """What a scenario's replay starts from: the jobs (as read), the cluster, and the read's account."""

    jobs: list[JobSpec]
    cluster: Cluster
    trace: Any = None                 # the TraceResult of a trace file (None: synthetic)


@dataclass
class Outcome:
    scenario: Scenario
    jobs: list[JobSpec]               # the jobs replayed (deadlines drawn, arrivals scaled, budget applied)
    cluster: Cluster
    replay: Any
    result: Any
    supply: Any = None
    trace: Any = None
    workload: Any = None
    left_out_by_budget: int = 0
    elapsed_s: float = 0.0
    summary: dict = field(default_factory=dict)


# -- inputs -----------------------------------------------------------------------------------------
def file_stamp(path: str) -> tuple | None:
    """What tells one version of a file from another at the same path (modification time in ns, size,
    inode, device), so that a cache keyed by it never hands out a file's old contents after the file was
    rewritten or a new file took its name; None when the file cannot be read (the reader says why).

    >>> file_stamp("/nonexistent/greenslurm") is None
    True
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


def _read_cached(path: str, fmt: str | None, strict: bool, columns: tuple | None, limit: int | None = None):
    return _read_stamped(path, file_stamp(path), fmt, strict, columns, limit)


@functools.lru_cache(maxsize=8)
def _read_stamped(path: str, stamp: tuple | None, fmt: str | None, strict: bool, columns: tuple | None,
                  limit: int | None):
    from greenslurm.inputs import read
    return read(path, fmt, strict=strict, columns=columns, limit=limit)


def _cluster_cached(kind: str, path: str, *power_w: float | None) -> Cluster:
    return _cluster_stamped(kind, path, file_stamp(path), *power_w)


@functools.lru_cache(maxsize=16)
def _cluster_stamped(kind: str, path: str, stamp: tuple | None, *power_w: float | None) -> Cluster:
    from greenslurm.inputs import load_cluster, load_node_list, load_slurm_conf
    return {"file": load_cluster, "nodes": load_node_list, "slurm_conf": load_slurm_conf}[kind](path, *power_w)


def build_cluster(scenario: Scenario, trace=None, cache: bool = False) -> Cluster | None:
    """The scenario's cluster (None: it comes from the trace's header, not read yet)."""
    from greenslurm.inputs import cluster_from_trace, load_cluster, load_node_list, load_slurm_conf
    c = scenario.cluster
    if c.file is not None:
        return _cluster_cached("file", c.file) if cache else load_cluster(c.file)
    if c.node_list is not None:
        return _cluster_cached("nodes", c.node_list) if cache else load_node_list(c.node_list)
    if c.slurm_conf is not None:
        power_w = (c.node_idle_w, c.node_busy_w)
        return (_cluster_cached("slurm_conf", c.slurm_conf, *power_w) if cache
                else load_slurm_conf(c.slurm_conf, *power_w))
    if c.homogeneous is not None:
        h = c.homogeneous
        extra = {k: getattr(h, k) for k in ("idle_w", "busy_w", "gpu_model") if getattr(h, k) is not None}
        return Cluster.homogeneous(h.nodes, cpus=h.cpus, gpus=h.gpus, memory_mb=h.memory_mb,
                                   name=h.name or f"{h.nodes}x{h.cpus}", **extra)
    if trace is None:
        return None
    return cluster_from_trace(trace)


def load_inputs(scenario: Scenario, status=None, cache: bool = False) -> Inputs:
    """Read the trace and the cluster (a bad cluster file fails before a long read)."""
    from greenslurm.inputs import check_strict_fit, read
    t = scenario.trace
    cluster = build_cluster(scenario, cache=cache)
    if t.synthetic is not None:
        from greenslurm.traces.synthetic import synthetic_jobs
        options = {k: v for k, v in dataclasses.asdict(t.synthetic).items() if v is not None and k != "jobs"}
        options.setdefault("max_job_cpus", cluster.max_node_cpus * cluster.size)
        try:
            with np.errstate(all="raise"):
                jobs = synthetic_jobs(t.synthetic.jobs, total_cpus=cluster.total_cpus, seed=scenario.seed, **options)
        except (ArithmeticError, ValueError) as exc:
            # e.g. lognormal runtimes with a huge sigma: infinite work, an arrival rate of 0
            raise InputError(f"its figures are not finite with these settings ({exc})", path=RUN_WHERE,
                             field="trace.synthetic") from None
        return Inputs(sorted(jobs, key=lambda job: job.submit_s), cluster)
    columns = tuple(t.columns) if t.columns else None
    # --limit N: the reader stops after the file's first N jobs (traces.base.read_trace)
    trace = (_read_cached(t.path, t.format, t.strict, columns, t.limit) if cache
             else read(t.path, t.format, strict=t.strict, columns=columns, status=status, limit=t.limit))
    if cluster is None:
        cluster = build_cluster(scenario, trace)
    if not trace.jobs:
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(trace.skipped.items())) or "no job records"
        raise InputError(f"no jobs to replay ({trace.records_read} records read; {reasons})", path=trace.path)
    if t.strict:
        check_strict_fit(trace, cluster)
    # a reader's job table is in submit order already: its rows stay columns (no JobSpec per job)
    jobs = trace.jobs if trace.table is not None else sorted(trace.jobs, key=lambda job: job.submit_s)
    return Inputs(jobs, cluster, trace)


def prepared_jobs(scenario: Scenario, jobs: Sequence[JobSpec]) -> list[JobSpec]:
    """The first ``limit`` jobs, cut to the parallelism limit, exact runtimes when asked, drawn
    deadlines, scaled arrivals.

    >>> from greenslurm.scenario import TraceSource
    >>> s = Scenario(TraceSource(path="x", limit=2), arrival_scale=0.5)
    >>> [j.submit_s for j in prepared_jobs(s, [JobSpec(str(i), 10.0 * i, 5.0) for i in range(3)])]
    [0.0, 5.0]
    """
    t = scenario.trace
    if (getattr(jobs, "table", None) is not None and t.parallelism_limit is None and not t.exact_runtimes
            and scenario.deadlines is None and scenario.arrival_scale == 1.0):
        return jobs.head(t.limit) if t.limit is not None else jobs      # a job table's rows as they are
    jobs = list(jobs)
    if t.limit is not None:
        jobs = jobs[:t.limit]
    if t.parallelism_limit is not None:
        from greenslurm.traces.deadlines import limit_parallelism
        jobs = limit_parallelism(jobs, t.parallelism_limit)
    if t.exact_runtimes:
        from greenslurm.traces.deadlines import exact_runtimes
        jobs = exact_runtimes(jobs)
    if scenario.deadlines is not None:
        from greenslurm.traces.deadlines import with_deadlines
        d = scenario.deadlines
        with np.errstate(over="ignore"):
            jobs = with_deadlines(jobs, d.slack_mean, d.slack_sigma, seed=d.seed)
        # a job that runs forever (a pod without an end) has deadline inf: the replay skips it, as
        # every queue does, under its own reason
        if not all(math.isfinite(job.deadline_s) for job in jobs
                   if job.deadline_s is not None and math.isfinite(job.run_for_s)):
            # d = r + (1 + eps) p with eps drawn around slack_mean: beyond a float's range
            # blame the mean when it overflows alone or when the spread is the mean's default
            # (slack_mean / 2.5), else the spread of the drawn slacks
            longest_s = max(job.requested_time_s for job in jobs if math.isfinite(job.run_for_s))
            mean_alone = math.isfinite((1.0 + d.slack_mean) * longest_s * 2.0)
            spread = mean_alone and d.slack_sigma is not None
            raise InputError("drawn deadlines are not finite numbers; choose a smaller slack", path=RUN_WHERE,
                             field="deadlines.slack_sigma" if spread else "deadlines.slack_mean")
    if scenario.arrival_scale != 1.0 and jobs:
        # arrivals t0 + (t - t0) x scale; runtimes unchanged (the GPU papers' busier what-ifs)
        first = min(job.submit_s for job in jobs)
        last = max(job.submit_s for job in jobs)
        if (last - first) * scenario.arrival_scale > MAX_SPAN_S:
            raise InputError(f"stretches the arrivals over more than {MAX_SPAN_S:g} s (about 31,700 years); "
                             "times that long lose the runtimes to rounding", path=RUN_WHERE, field="arrival_scale")
        jobs = [job.with_changes(submit_s=first + (job.submit_s - first) * scenario.arrival_scale) for job in jobs]
    return jobs


def build_supply(scenario: Scenario, jobs: Sequence[JobSpec], cluster: Cluster):
    """The renewable supply (None without a source)."""
    s = scenario.supply
    if s.source is None or not jobs:
        return None
    scale = s.scale if s.scale is not None else 1.0
    seed = s.seed if s.seed is not None else 0
    try:
        with np.errstate(over="ignore", invalid="ignore"):      # an inf peak: the series refuses it below
            return _supply(s, scale, seed, jobs, cluster)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        # the series refuses infinite watts: scale x the cluster's full power beyond a float's range
        raise InputError(f"the supply is not finite with this scale ({exc})", path=RUN_WHERE,
                         field="supply.scale") from None


def _supply(s, scale: float, seed: int, jobs: Sequence[JobSpec], cluster: Cluster):
    if s.horizon == "limits" and s.source in ("solar", "wind"):
        from greenslurm.clustermodel.renewable import max_power_w, solar_supply, wind_supply
        start = min(j.submit_s for j in jobs)
        end = max(j.submit_s for j in jobs) + 4 * max(j.requested_time_s for j in jobs) + 86400.0
        model = solar_supply if s.source == "solar" else wind_supply
        return model(start, end, scale * max_power_w(cluster), seed=seed)
    from greenslurm.sim.renewable import load_supply
    return load_supply(s.source, jobs, cluster, scale, seed)


def target_workload(scenario: Scenario, jobs: Sequence[JobSpec], cluster: Cluster, *, always: bool = False):
    """FGD's target workload: the trace's own GPU tasks, by popularity, up to ``fgd_coverage``; None
    where the node selection does not score with FGD, unless ``always`` (the GPU accounting measures
    fragmentation under every selection)."""
    from greenslurm.allocation.selection import parse_selection
    if not always and not parse_selection(scenario.selection_name).needs_workload:
        return None
    from greenslurm.clustermodel.fragmentation import COVERAGE
    from greenslurm.clustermodel.gpu_state import GpuNodes
    from greenslurm.sim.studies.inflate import TaskPool
    coverage = scenario.selection.fgd_coverage if scenario.selection.fgd_coverage is not None else COVERAGE
    return TaskPool.from_jobs(jobs).workload(GpuNodes.from_cluster(cluster).models, coverage)


# -- the engine ------------------------------------------------------------------------------------
def build(scenario: Scenario, jobs: Sequence[JobSpec], cluster: Cluster, supply=None,
          progress: Progress | None = None, workload=None):
    """``Replay(jobs, cluster, queue, selection=..., strategy_options=..., machine_factory=...)`` for
    jobs already prepared (:func:`prepared_jobs`)."""
    from greenslurm.allocation.selection import make_selection, parse_selection
    from greenslurm.sim.engine.replay import Replay

    spec = parse_selection(scenario.selection_name)
    if spec.scores_gpus and cluster.total_gpus <= 0:
        raise InputError(f"the GPU scorer {spec.label} needs a cluster with GPUs; {cluster.name} has none",
                         path=RUN_WHERE, field="selection.name")
    options: dict = {}
    sel = scenario.selection
    # Every queue takes the node selection from the machine; the deadline queue's planner plans with a
    # load rule itself, or first fit with a GPU scorer ranking the nodes that fit.
    selection = make_selection(spec, workload, normalization=sel.normalization or "paper",
                               seed=[scenario.seed, 2], tie_break=sel.ties)
    if scenario.queue == "deadline":
        a = scenario.acceptance
        options = dict(acceptance=a.policy if a else "greedy",
                       acceptance_options={"share": a.threshold_share if a else None,
                                           "min_slack": a.threshold_slack if a else None},
                       supply=supply, renewable=scenario.supply.mode)
        if a is not None and a.compress is not None:
            options["compress"] = a.compress
    elif scenario.queue == "slurm":
        from greenslurm.sim.engine.slurm_accounting import strategy_options
        accounts = slurm_accounts(scenario)
        timing = None
        if scenario.cluster.slurmctld_log is not None:
            timing, moments = read_slurmctld_log(scenario.cluster.slurmctld_log,
                                                 min((job.submit_s for job in jobs), default=None),
                                                 strict=scenario.trace.strict)
            jobs = with_logged_moments(jobs, moments, scenario.cluster.slurmctld_log)
        options = strategy_options(slurm_scheduling(scenario, timing), accounts)
        if accounts is not None:         # Slurm's default account and QOS for jobs that name none
            jobs = [accounts.complete(job) for job in jobs]
        jobs = slurm_memory_requests(scenario, jobs)
    factory = None
    if scenario.queue == "slurm":
        saving = slurm_power_saving(scenario, cluster)
        if saving is not None:
            from greenslurm.sim.engine.slurm_power import slurm_power_machine_factory
            factory = slurm_power_machine_factory(saving)
    elif scenario.power_states is not None:
        from greenslurm.sim.machines.power_states import power_machine_factory
        factory = power_machine_factory(power_config(scenario.power_states))
    elif scenario.colocation is not None:
        factory, selection = colocation_machine(scenario)
    admission = None
    if scenario.hook is not None:
        from greenslurm.slurm_plugin.admission import HookAdmission
        from greenslurm.slurm_plugin.config import HookConfig
        config = HookConfig.from_toml(scenario.hook)
        config.check()
        admission = HookAdmission(config, cluster, jobs)
        if config.power_save:        # the hook's power saving: its own decisions at each sync (power_replay)
            if factory is not None:
                raise InputError("the hook powers nodes down and up itself (power_save = true) and Slurm's own "
                                 "power saving is off in that setup: give one of them, not both",
                                 path=scenario.hook, field="power_save")
            from greenslurm.slurm_plugin.power_replay import hook_power_machine_factory
            factory = hook_power_machine_factory(config)
    return Replay(jobs, cluster, scenario.queue, selection=selection, progress=progress, strategy_options=options,
                  machine_factory=factory, admission=admission)


def hook_green_moves(outcome) -> dict | None:
    """What the hook in front of the replay did with its forecast (None without a hook or a forecast):
    :meth:`greenslurm.slurm_plugin.admission.HookAdmission.green_moves`."""
    moves = getattr(getattr(outcome.replay, "admission", None), "green_moves", None)
    return moves() if moves is not None else None


def slurm_scheduling(scenario: Scenario, timing=None):
    """The Slurm queue's settings: the scenario's slurm.conf (its SchedulerType, SchedulerParameters,
    priority and partitions), or Slurm 22.05's defaults without one; the hand-over latency the
    scenario gives (``slurm_handover_s``, 0 without); slurmctld's threads timed as the site's log
    shows them where ``timing`` is given (:func:`read_slurmctld_log`)."""
    from dataclasses import replace

    from greenslurm.sim.engine.slurm_model import SlurmScheduling
    from greenslurm.traces.slurm_conf import parse_slurm_conf

    path = scenario.cluster.slurm_conf
    handover = scenario.cluster.slurm_handover_s or 0.0
    if path is None:
        scheduling = SlurmScheduling(release_delay_s=handover)
    else:
        try:
            scheduling = replace(SlurmScheduling.from_conf(parse_slurm_conf(path)), release_delay_s=handover)
        except ValueError as error:
            field = str(error).partition("=")[0]          # the setting the message is about
            raise InputError(str(error), path=path, field=field if field.isalnum() else None) from None
    if timing is None:
        return scheduling
    return scheduling.with_logged_threads(timing.start_s, timing.checks_s, timing.backfill_looks_s,
                                          controller_s=timing.controller_s, first_main_pass_s=timing.first_main_pass_s)


def read_slurmctld_log(path: str, first_submit_s: float | None, strict: bool = False):
    """(threads' timing, jobs' moments) of the site's slurmctld log: the timing of the slurmctld run
    up at the trace's first submission (:func:`greenslurm.traces.slurmctld_log.thread_timing`;
    restarts during the trace are reported: their threads run on other phases, which the replay does
    not follow) and each job's logged submission, start and end to the millisecond
    (:attr:`~greenslurm.traces.slurmctld_log.LogScan.moments`).  The log must have started before the
    trace: a log of another period is refused.  Damaged lines (bytes that are not UTF-8, a NUL) are
    reported, or refused under ``strict``."""
    from greenslurm.traces.slurmctld_log import read_log, thread_timing

    if os.path.exists(path) and not os.path.isfile(path):          # a folder, /dev/zero: never read
        raise InputError("the slurmctld log is not a regular file", path=path)
    scan = read_log(path)                       # one pass: the threads' timing and the jobs' moments
    if scan.damaged_lines and strict:
        raise InputError(f"{scan.damage()} (strict mode)", path=path, line=scan.first_damaged_line)
    if scan.damaged_lines:
        log.warning("%s: %s", path, scan.damage())
    try:
        timing = thread_timing(scan, first_submit_s)
    except ValueError as error:                 # no start line
        raise InputError(str(error), path=path) from None
    moments = scan.moments
    if first_submit_s is not None and timing.start_s > first_submit_s:
        raise InputError(f"slurmctld's first start in the log comes {timing.start_s - first_submit_s:.0f} s after "
                         f"the trace's first submission: the log is not of the trace's period", path=path)
    if timing.restarts_after:
        log.warning("%s: slurmctld restarted %d time(s) after the start the replay times its threads from; "
                    "after a restart the replay keeps the first run's phase", path, timing.restarts_after)
    return timing, moments


def with_logged_moments(jobs, moments: dict, path: str):
    """The jobs with their submission and run time to the millisecond where slurmctld's log has them
    (a trace's stamps are whole seconds): a job's logged submission replaces its stamp when it lies
    in the stamp's second, its logged end minus start its run time when that is within a second of
    the trace's.  Jobs the log does not confirm keep the trace's times; how many is reported."""
    from dataclasses import replace

    out, refined = [], 0
    for job in jobs:
        logged = moments.get(str(job.job_id), {})
        changes = {}
        submit = logged.get("submit")
        if submit is not None and 0.0 <= submit - job.submit_s < 1.0:
            changes["submit_s"] = submit
        start, end = logged.get("start"), logged.get("end")
        if start is not None and end is not None and job.runtime_s is not None and abs(end - start - job.runtime_s) < 1.0:
            changes["runtime_s"] = max(end - start, 0.0)
        refined += len(changes) == 2
        out.append(replace(job, **changes) if changes else job)
    if refined < len(out):
        log.warning("%s: %d of %d jobs have their submission and run time to the millisecond from the log; the "
                    "other %d keep the trace's whole seconds (not in the log, or the log disagrees)",
                    path, refined, len(out), len(out) - refined)
    return out


def slurm_memory_requests(scenario: Scenario, jobs):
    """The jobs as Slurm saw their memory: with the site's slurm.conf, a sacct record whose memory
    is Slurm's stand-in for no request (the first partition node's RealMemory) asked none
    (:mod:`greenslurm.sim.engine.slurm_memory`); without a slurm.conf, or where it gives a default
    memory, the jobs as read."""
    path = scenario.cluster.slurm_conf
    if path is None or getattr(jobs, "table", None) is not None:
        return jobs
    from greenslurm.sim.engine.slurm_memory import first_node_memory, has_default_memory, read_memory_as_slurm
    from greenslurm.traces.slurm_conf import parse_slurm_conf

    conf = parse_slurm_conf(path)
    if has_default_memory(conf):
        return jobs
    default = conf.default_partition
    return read_memory_as_slurm(jobs, first_node_memory(conf), default.name if default else None)


def memory_asked_none(outcome: Outcome) -> int | None:
    """How many jobs the Slurm queue took as asking no memory (:func:`slurm_memory_requests`: their
    sacct memory is Slurm's stand-in for none); None where that reading does not apply (another
    queue, or no slurm.conf)."""
    if outcome.scenario.queue != "slurm" or outcome.scenario.cluster.slurm_conf is None:
        return None
    jobs = outcome.replay.ordered
    if getattr(jobs, "table", None) is not None:      # a job table (SWF, ...): no sacct memory to read
        return 0
    from greenslurm.sim.engine.slurm_memory import count_asked_no_memory
    return count_asked_no_memory(jobs)


def slurm_power_saving(scenario: Scenario, cluster: Cluster):
    """Slurm's power saving for the slurm queue: the slurm.conf's SuspendTime, ... with the
    scenario's ``power_states`` (``suspend_after_s`` sets SuspendTime; ``boot_s``, ``boot_w``,
    ``off_w``, ``start_off``), or None when no node is ever powered down."""
    from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving, boot_time_s
    from greenslurm.traces.slurm_conf import parse_slurm_conf

    path = scenario.cluster.slurm_conf
    p = scenario.power_states
    given = {} if p is None else {key: value for key, value in (("boot_w", p.boot_w), ("off_w", p.off_w),
                                                                 ("budget_w", p.budget_w)) if value is not None}
    try:
        saving = (SlurmPowerSaving.from_conf(parse_slurm_conf(path), **given) if path is not None
                  else SlurmPowerSaving(**given))
    except ValueError as error:
        field = str(error).partition(":")[0]
        raise InputError(str(error), path=path, field=field if field.isalnum() else None) from None
    if p is not None:
        if p.suspend_after_s is not None:
            saving = saving.with_suspend_time(p.suspend_after_s)
        if p.boot_s is not None or p.start_off is not None:
            saving = dataclasses.replace(saving, boot_s=p.boot_s if p.boot_s is not None else saving.boot_s,
                                         start_powered_down=bool(p.start_off))
    if not saving.enabled and saving.budget_w is None:
        return None
    try:
        boot_time_s(saving, cluster)
    except ValueError as error:
        raise InputError(str(error), path=path or RUN_WHERE,
                         field="ResumeTimeout" if path is not None else "power_states.boot_s") from None
    return saving


def slurm_accounts(scenario: Scenario):
    """The site's associations and QOS from its sacctmgr dumps, or None (Slurm without slurmdbd)."""
    c = scenario.cluster
    if c.sacctmgr_assoc is None:
        return None
    from greenslurm.inputs import check_input_file
    from greenslurm.traces.slurm_accounts import read_accounts
    for path, what in ((c.sacctmgr_assoc, "sacctmgr show assoc"), (c.sacctmgr_qos, "sacctmgr show qos")):
        if path is not None:
            check_input_file(path, what)
    accounts = read_accounts(c.sacctmgr_assoc, c.sacctmgr_qos)
    for note in accounts.not_modelled:
        log.warning("not modelled, ignored: %s", note)
    return accounts


def colocation_machine(scenario: Scenario):
    """The co-location machine factory and its policy (EaCO) for the scenario's settings."""
    from greenslurm.allocation.colocation import ColocationSettings, Interference
    from greenslurm.sim.machines.colocation import build_colocation
    c = scenario.colocation

    def given(*names: str) -> dict:
        return {name: getattr(c, name) for name in names if getattr(c, name) is not None}
    settings = ColocationSettings(**given("util_threshold_pct", "mem_threshold_pct", "max_jobs"))
    interference = Interference(**given("beta", "jitter", "seed"))
    return build_colocation(c.policy, settings=settings, interference=interference,
                            idle_node_w=c.idle_node_w if c.idle_node_w is not None else 0.0,
                            **given("accounting"))


def colocation_inputs(scenario: Scenario, jobs: Sequence[JobSpec], cluster: Cluster):
    """The trace's jobs as training jobs (GPUs rounded up to a GPU set, model drawn, epochs from the
    runtime) on ``gpu_nodes`` nodes of 8 GPUs (default: the cluster's GPUs / 8, at least 1)."""
    from greenslurm.sim.machines.training_jobs import colocation_cluster, dlt_jobs_from_specs
    c = scenario.colocation
    training = dlt_jobs_from_specs(jobs, seed=c.seed if c.seed is not None else 0)
    if not training:
        raise InputError("no jobs with a finite runtime to simulate", path=scenario.trace.path or "<trace>")
    nodes = c.gpu_nodes if c.gpu_nodes is not None else max(1, cluster.total_gpus // 8)
    return training, colocation_cluster(nodes)


def _kept_mask(jobs: Sequence[JobSpec], kept: Sequence[JobSpec]) -> list[bool]:
    """Which of ``jobs`` are in ``kept`` (a subsequence of them, in order)."""
    mask, i = [], 0
    for job in jobs:
        hit = i < len(kept) and kept[i] is job
        mask.append(hit)
        i += hit
    return mask


def gpu_accounting(replay, workload):
    """The GPU accounting (the PWR paper's power, GPU allocation, FGD fragmentation) of a replay on a
    cluster with GPUs (None without GPUs, and on the co-location machine, which accounts itself)."""
    if replay.machine.gpus is None:
        return None
    from greenslurm.sim.accounting.gpu_accounting import GpuAccounting
    # a co-location machine exists only once its module has loaded: other replays do not load it
    colocation = sys.modules.get("greenslurm.sim.machines.colocation")
    if colocation is not None and isinstance(replay.machine, colocation.ColocationMachine):
        return None
    return GpuAccounting.attach(replay, workload)


def replay_jobs(scenario: Scenario, jobs: Sequence[JobSpec], cluster: Cluster, *, trace=None, supply=None,
                progress: Progress | None = None, prepared: bool = False,
                on_result: Callable[[ReplayResult], None] | None = None) -> Outcome:
    """Replay ``jobs`` (as read) under ``scenario``; ``supply`` given: used instead of building one
    (what-if shares one supply among its policies); ``prepared``: the jobs already are;
    ``on_result``: called with the replay's result as soon as there is one, before the summary is
    made (replay --out hands the jobs to the process writing the jobs files then)."""
    started = time.perf_counter()
    if not prepared:
        jobs = prepared_jobs(scenario, jobs)
    if not jobs:
        raise InputError("no jobs to replay", path=scenario.trace.path or "<synthetic trace>")
    if supply is None:
        supply = build_supply(scenario, jobs, cluster)
    left_out = 0
    if scenario.colocation is not None:
        jobs, cluster = colocation_inputs(scenario, jobs, cluster)
    if scenario.power_states is not None and scenario.power_states.budget_w is not None:
        from greenslurm.sim.machines.power_states import fits_budget
        budget_w = scenario.power_states.budget_w
        # the slurm queue: Slurm suspends only idle nodes and the nodes of jobs the budget holds back
        # stay on, so a job is sure to run only if it fits beside every node on
        kept, left_out = fits_budget(jobs, cluster, power_config(scenario.power_states),
                                     others_on=scenario.queue == "slurm")
        if left_out and scenario.trace.strict:
            first = next(job for job, fits in zip(jobs, _kept_mask(jobs, kept)) if not fits)
            raise InputError(f"job {first.job_id} needs more power than the budget ({budget_w:,.0f} W) even alone "
                             f"(strict mode: it would be left out, as {left_out:,} jobs in all)", path=RUN_WHERE,
                             field="power_states.budget_w")
        if not kept:
            raise InputError(f"all {len(jobs):,} jobs need more power than the budget ({budget_w:,.0f} W) even "
                             "alone: nothing to replay", path=RUN_WHERE, field="power_states.budget_w")
        jobs = kept
        from greenslurm.clustermodel.cluster import GPU
        idle_w = float((cluster.idle_w + cluster.gpu_idle_w * cluster.capacity[:, GPU]).sum())
        if not scenario.power_states.start_off and idle_w > budget_w + 1e-6:
            raise InputError(f"the budget ({budget_w:,.0f} W) is below the idle power of every node on "
                             f"({idle_w:,.0f} W), where the replay begins: start with the nodes off "
                             "(power_states.start_off = true) or raise the budget", path=RUN_WHERE,
                             field="power_states.budget_w")
    workload = target_workload(scenario, jobs, cluster)
    replay = build(scenario, jobs, cluster, supply, progress, workload)
    # fragmentation is measured against FGD's target workload under any node selection
    meter = gpu_accounting(replay, workload if workload is not None or cluster.total_gpus <= 0
                           else target_workload(scenario, jobs, cluster, always=True))
    if scenario.cluster.slurm_conf is not None and scenario.queue in ("fcfs", "easy", "conservative") \
            and replay.pool_refusal is not None:
        from greenslurm.clustermodel.native import warn_slurm_conf_once
        warn_slurm_conf_once(replay.pool_refusal)
    result = replay.run()
    if on_result is not None:
        on_result(result)
    if replay.core_refusal is not None:
        from greenslurm.clustermodel.native import warn_deadline_jobs_once
        warn_deadline_jobs_once(replay.core_refusal)
    kept = jobs if getattr(jobs, "table", None) is not None else list(jobs)
    outcome = Outcome(scenario, kept, cluster, replay, result, supply, trace, workload, left_out)
    outcome.elapsed_s = time.perf_counter() - started
    log.info("replayed %d jobs (%s) in %.2f s", result.jobs_completed, scenario.queue, outcome.elapsed_s)
    outcome.summary = summary_of(outcome, meter)
    return outcome


def run(scenario: Scenario, progress: Progress | None = None, status=None, cache: bool = False) -> Outcome:
    """Read, build and replay ``scenario``; the outcome carries the JSON summary."""
    inputs = load_inputs(scenario, status=status, cache=cache)
    return replay_jobs(scenario, inputs.jobs, inputs.cluster, trace=inputs.trace, progress=progress)


# -- the summary ------------------------------------------------------------------------------------
BUDGET_REASON = "needs more power than the budget even alone"


def effective_power_states(outcome: Outcome):
    """The node power states the replay ran with (a ``PowerStateConfig``; None: nodes never power down)."""
    machine = outcome.replay.machine
    hook_after = getattr(machine, "idle_power_down_s", None)
    if hook_after is not None:      # the hook's power saving: its own idle time (Slurm's is a year)
        return dataclasses.replace(machine.config, suspend_after_s=hook_after)
    saving = getattr(machine, "saving", None)
    if saving is not None:          # Slurm's power saving: its SuspendTime and the boot time it resolved
        return dataclasses.replace(machine.config, suspend_after_s=saving.suspend_time_s
                                   if math.isfinite(saving.suspend_time_s) else None)
    s = outcome.scenario
    return power_config(s.power_states) if s.power_states is not None else None


def trace_info(trace, limit: int | None) -> dict:
    """The summary's ``trace``: the file read, its format and records, and ``limit`` when the run was cut
    to the trace's first jobs (``report`` names the cut in every figure's title)."""
    info = {"path": str(trace.path), "format": trace.format, "records_read": trace.records_read}
    if limit is not None:
        info["limit"] = limit
    return info


def summary_of(outcome: Outcome, meter=None) -> dict:
    """The replay's summary (``summary.json``): figures, the trace, admission, power states, GPUs."""
    from greenslurm.sim.accounting.metrics import summarize
    from greenslurm.sim.reporting.schema_versions import SCHEMA_KEY, SUMMARY_SCHEMA

    trace = outcome.trace
    summary = summarize(outcome.result, reader_skipped=trace.skipped if trace is not None else None,
                        reader_adjusted=trace.adjusted if trace is not None else None)
    s = outcome.scenario
    if trace is not None:
        summary["trace"] = trace_info(trace, s.trace.limit)
    elif s.trace.synthetic is not None:
        summary["trace"] = {"synthetic": dataclasses.asdict(s.trace.synthetic), "seed": s.seed}
    else:
        summary["trace"] = {"path": s.trace.path}
    summary["selection"] = s.selection_name
    asked_none = memory_asked_none(outcome)
    if asked_none is not None:
        summary["memory_asked_none"] = asked_none
    from greenslurm.power_model import describe
    summary["power_model"] = describe(s, outcome.cluster, effective_power_states(outcome)).as_dict()
    summary[SCHEMA_KEY] = SUMMARY_SCHEMA          # what summary.json and --json carry (docs/outputs.md)
    if outcome.left_out_by_budget:
        # jobs that no instant under the budget can run were never handed to the replay: they are
        # skipped records, counted with the others (completed + skipped is every job read)
        left_out = outcome.left_out_by_budget
        summary["left_out_by_budget"] = left_out
        summary["jobs_total"] = summary.get("jobs_total", 0) + left_out
        summary["jobs_skipped"] = summary.get("jobs_skipped", 0) + left_out
        summary.setdefault("skipped_by_reason", {})["budget"] = {BUDGET_REASON: left_out}
    # any queue that turns jobs away (the slurm queue: over a partition's MaxTime/MaxNodes or a QOS
    # cap) reports them, so that completed + skipped + rejected is every job handed to the replay
    if outcome.result.queue in ("deadline", "none") or outcome.supply is not None or outcome.result.rejected:
        from greenslurm.sim.accounting.deadline_metrics import admission_summary    # loads with admission
        summary["admission"] = admission_summary(outcome.result, outcome.supply)
    moves = hook_green_moves(outcome)
    if moves is not None:
        summary["hook"] = moves
    totals = getattr(outcome.replay.machine, "power_totals", None)
    if totals is not None:
        t = totals()
        from greenslurm.sim.machines.power_settings import boots_per_node_day, cycling_warning
        ledger = outcome.replay.machine.ledger
        span_s = ledger.last_s - ledger.start_s
        per_day = boots_per_node_day(t.boots, outcome.cluster.size, span_s)
        warning = cycling_warning(t.boots, outcome.cluster.size, span_s)
        if warning is not None:
            log.warning("%s", warning)
        summary["power_states"] = {"boots": t.boots, "suspends": t.suspends, "boots_per_node_day": per_day, "off_j": t.off_j, "boot_j": t.boot_j,
                                   "saved_vs_idle_j": t.saved_vs_idle_j, "peak_power_w": t.peak_power_w,
                                   "budget_w": t.budget_w, "mean_phase_imbalance": t.mean_imbalance,
                                   "off_node_h": t.off_node_s / 3600.0, "boot_node_h": t.boot_node_s / 3600.0,
                                   "refused_starts": t.refused_starts, "migrations": t.migrations,
                                   "moved_jobs": t.moved_jobs, "phase_loss_j": t.phase_loss_j}
    if meter is not None:
        summary["gpu"] = meter.summary()
    if s.colocation is not None:
        from greenslurm.sim.studies.colocation_runs import colocation_result
        r = colocation_result(outcome.replay)
        summary["colocation"] = {"policy": r.policy, "gpu_nodes": r.nodes, "jobs": r.jobs, "energy_j": r.energy_j,
                                 "jobs_energy_j": r.jobs_energy_j, "static_energy_j": r.static_energy_j,
                                 "idle_energy_j": r.idle_energy_j, "migrations": r.migrations,
                                 "avg_jct_s": r.avg_jct_s, "avg_jtt_s": r.avg_jtt_s, "avg_wait_s": r.avg_wait_s,
                                 "makespan_s": r.makespan_s, "deadline_misses": r.deadline_misses,
                                 "undone": r.undone, "colocated_starts": r.colocated_starts,
                                 "mean_active_nodes": r.mean_active_nodes}
    return summary

