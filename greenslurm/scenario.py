"""One replay, described in full: the :class:`Scenario` (typed, frozen) and its TOML form.

A scenario says which jobs (a trace file or a synthetic trace), on which cluster (a cluster TOML,
an openb node list, an inline homogeneous cluster, or the trace's own header), under which queue
strategy, node selection, acceptance chain and machine model (node power states or GPU
co-location), with which drawn deadlines and renewable supply.  ``greenslurm replay`` builds one
from its options, ``greenslurm run FILE`` reads one from TOML, and a sweep cell is one; all of them
replay it through :func:`greenslurm.scenario_run.run`.

The TOML form (every key optional except a trace; unknown keys are errors)::

    queue = "easy"                 # fcfs | easy | conservative | deadline | none
    seed = 0                       # synthetic traces and random node selections
    arrival_scale = 1.0            # time between arrivals multiplied by this

    [trace]
    path = "log.swf"               # or: synthetic = { jobs = 100, load = 0.8 }
    format = "swf"                 # default: guessed
    strict = false
    columns = ["JobID", "Submit"]  # a headerless sacct export
    limit = 500                    # the file's first N jobs (read no further), in submit order
    parallelism_limit = 64         # jobs cut to at most 64 CPUs (Nileshwar & Schwiegelshohn)
    exact_runtimes = false         # time limits := runtimes (Nileshwar & Schwiegelshohn's setting)

    [cluster]
    file = "cluster.toml"          # or slurm_conf = "/etc/slurm/slurm.conf", node_list = "openb_node_list.csv",
                                   # or homogeneous = { nodes = 8, cpus = 4 }; none: the trace's header
    sacctmgr_assoc = "assoc.txt"   # the slurm queue: 'sacctmgr show assoc tree -P' (shares, fair-share)
    sacctmgr_qos = "qos.txt"       # the slurm queue: 'sacctmgr show qos -P' (QOS priority and limits)
    slurm_handover_s = 0.5         # the slurm queue: from a job's end until Slurm gives its nodes again
    slurmctld_log = "slurmctld.log"  # the slurm queue: when the site's slurmctld threads ran, from its log
    node_idle_w = 100.0            # a slurm.conf's nodes: idle power (Slurm records none)
    node_busy_w = 350.0            # a slurm.conf's nodes: power with every CPU busy

    [selection]
    name = "firstfit"              # see greenslurm.allocation.selection (pwr, fgd, pwr=0.1,fgd=0.9, ...)
    normalization = "paper"        # GPU scorers only
    ties = "first"                 # GPU scorers only
    fgd_coverage = 0.95            # FGD only

    [acceptance]                   # the deadline queue only
    policy = "threshold,greedy"
    threshold_share = 0.5
    threshold_slack = 60.0

    [deadlines]                    # draw d = r + (1 + eps) p for jobs without one
    slack_mean = 1.0
    slack_sigma = 0.4
    seed = 0

    [power_states]                 # node power states: fields of PowerStateConfig (the slurm queue:
    suspend_after_s = 600.0        # SuspendTime, boot_s, boot_w, off_w, start_off and budget_w)

    [colocation]                   # GPU co-location (EaCO)
    policy = "eaco"

    [supply]
    source = "solar"               # solar | wind | a CSV of time_s,watts
    mode = "grid"                  # grid | green | only (green and only: the deadline queue)
    scale = 1.0
    seed = 0

>>> s = Scenario.from_toml('queue = "none"\\n[trace]\\npath = "p.csv"\\n[selection]\\nname = "fgd"\\n', "s.toml")
>>> s.queue, s.selection.name, s.trace.path.endswith("p.csv")
('none', 'fgd', True)
>>> Scenario.from_toml(s.to_toml(), "s.toml") == s
True
>>> Scenario.from_toml('[trace]\\npath = "a"\\n[selection]\\nnam = "fgd"\\n', "s.toml")
Traceback (most recent call last):
...
greenslurm.clustermodel.errors.InputError: s.toml: field selection.nam: unknown key; known: name, normalization, ties, fgd_coverage
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.errors import toml_error

QUEUE_DEFAULT = "easy"
DEADLINE_DEFAULT_SELECTION = "bestfit"       # Nileshwar & Schwiegelshohn's choice for the deadline queue
SLURM_DEFAULT_SELECTION = "consecutive"      # Slurm's own choice (select/cons_tres) for the slurm queue
DEFAULT_SELECTION = "firstfit"               # Slurm's node order, every other queue
MAX_BOOT_S = 86400.0                         # a node boots within a day
MAX_NODES = 1_000_000                        # more nodes than any machine has (the largest: ~10^5)
MAX_ARRIVAL_SCALE = 1000                     # time between arrivals x this: a year of arrivals in a millennium
# Where errors found while a scenario replays point (the CLI puts the scenario file or the options there).
RUN_WHERE = "<scenario>"


@dataclass(frozen=True)
class Synthetic:
    """A seeded synthetic trace (greenslurm.traces.synthetic.synthetic_jobs)."""

    jobs: int = 100
    load: float | None = None
    runtime_median_s: float | None = None
    runtime_sigma: float | None = None
    max_overestimate: float | None = None
    power_of_two_share: float | None = None
    underestimate_share: float | None = None
    max_job_cpus: int | None = None


@dataclass(frozen=True)
class TraceSource:
    path: str | None = None
    format: str | None = None
    strict: bool = False
    columns: tuple[str, ...] | None = None
    synthetic: Synthetic | None = None
    limit: int | None = None
    exact_runtimes: bool = False
    parallelism_limit: int | None = None  # cut jobs to at most N CPUs (Nileshwar & Schwiegelshohn's parallelism limit)


@dataclass(frozen=True)
class Homogeneous:
    nodes: int
    cpus: int
    gpus: int = 0
    memory_mb: float = 0.0
    idle_w: float | None = None
    busy_w: float | None = None
    gpu_model: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class ClusterSource:
    """At most one of ``file`` (cluster TOML), ``node_list`` (openb CSV), ``slurm_conf`` (a site's
    slurm.conf: its nodes and partitions), ``homogeneous``; none: the trace's header.  For the slurm
    queue, the site's ``sacctmgr`` dumps (:mod:`greenslurm.traces.slurm_accounts`)."""

    file: str | None = None
    node_list: str | None = None
    slurm_conf: str | None = None
    homogeneous: Homogeneous | None = None
    sacctmgr_assoc: str | None = None
    sacctmgr_qos: str | None = None
    # the slurm queue: seconds from a job's end until Slurm gives its nodes again (see
    # docs/slurm-replay.md, "Hand-over latency", for reading it from slurmctld's log); None: 0
    slurm_handover_s: float | None = None
    # the slurm queue: the site's slurmctld log, from which its threads' timing is read (when
    # slurmctld started, its background loop's pace, the backfill cycles that started a job); None:
    # the threads wake from the first submission (docs/slurm-replay.md, "Slurm's threads from its log")
    slurmctld_log: str | None = None
    # a slurm.conf's nodes: Slurm records no node power (None: NodeSpec's defaults)
    node_idle_w: float | None = None
    node_busy_w: float | None = None


@dataclass(frozen=True)
class Selection:
    name: str | None = None              # None: the queue's default (bestfit in the deadline queue, else firstfit)
    normalization: str | None = None     # GPU scorers: paper (default) or clean
    ties: str | None = None              # GPU scorers: first or random
    fgd_coverage: float | None = None    # FGD: target workload coverage (default 0.95)


@dataclass(frozen=True)
class Acceptance:
    policy: str = "greedy"
    threshold_share: float | None = None
    threshold_slack: float | None = None
    compress: bool | None = None         # re-plan accepted jobs earlier when one ends early (default true)


@dataclass(frozen=True)
class Deadlines:
    slack_mean: float
    slack_sigma: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class PowerStates:
    """Fields of :class:`greenslurm.sim.machines.power_states.PowerStateConfig`; None: its default
    (``suspend_after_s`` None: never power down)."""

    suspend_after_s: float | None = None
    boot_s: float | None = None
    boot_w: float | None = None
    off_w: float | None = None
    budget_w: float | None = None
    phases: int | None = None
    nodes_per_cabinet: int | None = None
    phase_layout: str | None = None
    wake_order: str | None = None
    consolidate_every_s: float | None = None
    topology_aware: bool | None = None
    migrate_s: float | None = None
    movable: str | None = None
    imbalance_loss: float | None = None
    start_off: bool | None = None
    suspend_rate: int | None = None        # nodes powered down per minute at most (Slurm's SuspendRate)
    resume_rate: int | None = None         # nodes woken per minute at most (ResumeRate)


@dataclass(frozen=True)
class Colocation:
    policy: str
    gpu_nodes: int | None = None
    max_jobs: int | None = None
    util_threshold_pct: float | None = None
    mem_threshold_pct: float | None = None
    idle_node_w: float | None = None
    beta: float | None = None
    jitter: float | None = None
    seed: int | None = None
    accounting: str | None = None        # active-nodes (the EaCO paper's) or jobs


@dataclass(frozen=True)
class Supply:
    source: str | None = None            # solar | wind | CSV path
    mode: str = "grid"
    scale: float | None = None           # synthetic peak = scale x the cluster's full power (default 1)
    seed: int | None = None
    # how far a synthetic supply reaches: None, 30 days past the last arrival; "limits": 4 x the
    # longest time limit and a day past it (sweeps and what-if)
    horizon: str | None = None


@dataclass(frozen=True)
class Scenario:
    trace: TraceSource
    cluster: ClusterSource = field(default_factory=ClusterSource)
    queue: str = QUEUE_DEFAULT
    selection: Selection = field(default_factory=Selection)
    acceptance: Acceptance | None = None
    deadlines: Deadlines | None = None
    power_states: PowerStates | None = None
    colocation: Colocation | None = None
    supply: Supply = field(default_factory=Supply)
    arrival_scale: float = 1.0
    seed: int = 0
    # a hook.toml: greenslurm's live hook decides each submission (accept, reject, pin, begin time) in
    # front of the slurm queue, with the service's own code (greenslurm.slurm_plugin.admission)
    hook: str | None = None

    # -- what the run uses ------------------------------------------------------------------------
    @property
    def selection_name(self) -> str:
        """The node selection in force (the queue's default when none is named), as parsed: lower case,
        no spaces, weights as numbers (``" PWR=0.10, FGD=0.90"`` -> ``pwr=0.1,fgd=0.9``)."""
        from greenslurm.allocation.selection import parse_selection
        if self.selection.name is None:
            return {"deadline": DEADLINE_DEFAULT_SELECTION, "slurm": SLURM_DEFAULT_SELECTION}.get(self.queue,
                                                                                             DEFAULT_SELECTION)
        try:
            return parse_selection(self.selection.name).label
        except InputError:
            return self.selection.name          # check() names the bad text

    def check(self, where: str = "<scenario>", names: Mapping[str, str] | None = None) -> "Scenario":
        """Every value valid and every option applying to this combination, or an InputError naming
        ``where`` and the key (``names`` maps keys to command-line options for the CLI's messages)."""
        check(self, where, names or {})
        return self

    # -- TOML -------------------------------------------------------------------------------------
    @classmethod
    def from_toml(cls, text: str, path: str = "<scenario.toml>") -> "Scenario":
        """Read a scenario; relative file names are taken from the scenario file's folder."""
        import tomllib
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as exc:
            raise toml_error(exc, text, path) from None
        scenario = from_mapping(data, path)
        base = Path(path).resolve().parent if not path.startswith("<") else Path.cwd()
        scenario = scenario.resolved(base)
        return scenario.check(path)

    @classmethod
    def from_file(cls, path: str) -> "Scenario":
        from greenslurm.inputs import check_input_file
        check_input_file(path, "scenario")
        try:
            text = Path(path).read_text(encoding="utf-8-sig")      # a byte-order mark (Windows editors) dropped
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", path=path) from None
        return cls.from_toml(text, path)

    def resolved(self, base: Path) -> "Scenario":
        """File names made absolute against ``base`` (a saved scenario runs from any folder)."""
        def absolute(name: str | None, keep: tuple[str, ...] = ()) -> str | None:
            if name is None or name in keep:
                return name
            return str((base / name).resolve()) if not Path(name).is_absolute() else name
        trace = dataclasses.replace(self.trace, path=absolute(self.trace.path))
        cluster = dataclasses.replace(self.cluster, file=absolute(self.cluster.file),
                                      node_list=absolute(self.cluster.node_list),
                                      slurm_conf=absolute(self.cluster.slurm_conf),
                                      sacctmgr_assoc=absolute(self.cluster.sacctmgr_assoc),
                                      sacctmgr_qos=absolute(self.cluster.sacctmgr_qos),
                                      slurmctld_log=absolute(self.cluster.slurmctld_log))
        supply = dataclasses.replace(self.supply, source=absolute(self.supply.source, ("solar", "wind")))
        return dataclasses.replace(self, trace=trace, cluster=cluster, supply=supply, hook=absolute(self.hook))

    def to_toml(self) -> str:
        """The TOML text of this scenario (``from_toml`` of it gives the same scenario)."""
        return to_toml(self)


# -- reading: types and unknown keys ------------------------------------------------------------------
SECTIONS = {name: f for name, f in ((f.name, f) for f in dataclasses.fields(Scenario))}


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _kind(hint) -> tuple[Any, bool]:
    """(the type inside ``X | None``, whether None is allowed)."""
    args = typing.get_args(hint)
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return inner[0], True
    return hint, False


def _value(hint, value, path: str, key: str):
    kind, optional = _kind(hint)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise InputError(f"must be a table, not {_show(value)}", path=path, field=key)
        return _table(kind, value, path, key)
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError(f"must be a list of strings, not {_show(value)}", path=path, field=key)
        return tuple(value)
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            value = float(value)
            if not math.isfinite(value):
                raise InputError(f"must be a finite number, not {value}", path=path, field=key)
    else:
        ok = isinstance(value, kind)
    if not ok:
        name = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(kind, kind.__name__)
        raise InputError(f"must be {name}, not {_show(value)}", path=path, field=key)
    return value


def _show(value) -> str:
    import json
    return json.dumps(value) if isinstance(value, (str, int, float, bool, list)) else type(value).__name__


def _table(cls, data: Mapping, path: str, prefix: str):
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else key
        if key not in hints:
            raise InputError(f"unknown key; known: {', '.join(names)}", path=path, field=full)
        values[key] = _value(hints[key], value, path, full)
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in values:
            raise InputError("missing", path=path, field=f"{prefix}.{f.name}" if prefix else f.name)
    return cls(**values)


def from_mapping(data: Mapping, path: str = "<scenario>") -> Scenario:
    """A scenario from a parsed TOML table (types checked, unknown keys refused; no resolution)."""
    return _table(Scenario, data, path, "")


# -- writing ----------------------------------------------------------------------------------------
def _plain(value):
    """A scenario's value as tomli-w writes it: a dataclass as a table of its fields that are not None
    (defaults are written too, so the file says what ran; an empty table still says "this machine
    model, its defaults"), a tuple as an array."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def to_toml(scenario: Scenario) -> str:
    """The scenario as TOML, written by tomli-w.

    >>> print(to_toml(Scenario(trace=TraceSource(path="a.swf"), seed=7)), end="")  # doctest: +ELLIPSIS
    # greenslurm scenario: run it with 'greenslurm run FILE'
    queue = "easy"
    ...
    [trace]
    path = "a.swf"
    ...
    """
    import tomli_w
    return "# greenslurm scenario: run it with 'greenslurm run FILE'\n" + tomli_w.dumps(_plain(scenario))


# -- which options apply ------------------------------------------------------------------------------
def check(s: Scenario, where: str, names: Mapping[str, str]) -> None:
    """Refuse values out of range and options that do not apply (never ignore them silently), part by
    part in the order the scenario file gives them; the first refusal is the one reported."""
    def name(key: str) -> str:
        return names.get(key, key)

    def fail(message: str, key: str) -> None:
        raise InputError(message, path=where, field=name(key))

    for part in (_check_numbers, _check_trace, _check_cluster_and_queue, _check_selection, _check_acceptance,
                 _check_supply, _check_power_states, _check_colocation):
        part(s, fail, name)


def _check_numbers(s: Scenario, fail, name) -> None:
    """Every number finite, every seed in [0, 2^63)."""
    # every number finite: the TOML reader refuses nan and inf, but the command line's floats come here as
    # argparse made them (a nan boot time compared false everywhere and the replay never ended)
    for key, value in _numbers(s, ""):
        if isinstance(value, float) and not math.isfinite(value):
            fail(f"must be a finite number, not {value}", key)
    # numpy's and Python's generators take seeds >= 0 (numpy raised on a negative one mid-replay)
    for key, value in (("seed", s.seed), ("deadlines.seed", s.deadlines and s.deadlines.seed),
                       ("supply.seed", s.supply.seed), ("colocation.seed", s.colocation and s.colocation.seed)):
        if isinstance(value, int) and value < 0:
            fail("must be >= 0 (a random seed)", key)
        # and below 2^63: a scenario is saved as TOML, whose integers are 64-bit signed (a larger seed
        # was written into a file other TOML readers refuse)
        if isinstance(value, int) and value >= 2 ** 63:
            fail("must be below 2^63 = 9223372036854775808 (a random seed, saved as a TOML integer)", key)


def _check_trace(s: Scenario, fail, name) -> None:
    """The trace: a file or a synthetic one, its format and limits."""
    t = s.trace
    if (t.path is None) == (t.synthetic is None):
        fail("give either path or synthetic", "trace.path")
    if t.synthetic is not None and (t.format or t.columns or t.strict):
        fail("format, columns and strict are for trace files, not synthetic traces", "trace.synthetic")
    if t.limit is not None and t.limit < 1:
        fail("must be >= 1", "trace.limit")
    if t.parallelism_limit is not None and t.parallelism_limit < 1:
        fail("must be >= 1", "trace.parallelism_limit")
    if t.synthetic is not None:
        check_synthetic(t.synthetic, fail)
    if t.format is not None:
        from greenslurm.traces import FORMATS
        if t.format not in FORMATS:
            fail(f"unknown format {t.format!r}; choose from {', '.join(FORMATS)}", "trace.format")


def _check_cluster_and_queue(s: Scenario, fail, name) -> None:
    """The cluster (one source at most), the queue, and the options that belong to one queue."""
    from greenslurm.sim.engine.strategies import QUEUES
    t = s.trace
    c = s.cluster
    if sum(x is not None for x in (c.file, c.node_list, c.slurm_conf, c.homogeneous)) > 1:
        fail("give at most one of file, node_list, slurm_conf, homogeneous", "cluster")
    if c.homogeneous is not None:
        check_homogeneous(c.homogeneous, fail)
    if t.synthetic is not None and c.file is None and c.node_list is None and c.slurm_conf is None \
            and c.homogeneous is None:
        fail("a synthetic trace needs a cluster", "cluster")
    if s.queue not in QUEUES:
        fail(f"unknown queue {s.queue!r}; choose from {', '.join(QUEUES)}", "queue")
    for key in ("sacctmgr_assoc", "sacctmgr_qos", "slurm_handover_s", "slurmctld_log"):
        if getattr(c, key) is not None and s.queue != "slurm":
            what = {"slurm_handover_s": "Slurm's hand-over latency",
                    "slurmctld_log": "when Slurm's threads ran"}.get(key, "Slurm's QOS and fair-share")
            fail(f"applies to the slurm queue ({what}), not to the {s.queue} queue", f"cluster.{key}")
    if c.slurmctld_log is not None and s.arrival_scale != 1.0:
        fail("times slurmctld's threads on the trace's own clock; arrival_scale moves the submissions off it",
             "cluster.slurmctld_log")
    if c.slurm_handover_s is not None and not (0 <= c.slurm_handover_s <= 3600):
        fail("must be a number of seconds from 0 to 3600", "cluster.slurm_handover_s")
    for key in ("node_idle_w", "node_busy_w"):
        value = getattr(c, key)
        if value is not None and c.slurm_conf is None:
            fail("applies to a cluster read from a slurm.conf; a cluster file or node list gives its nodes' power",
                 f"cluster.{key}")
        if value is not None and not (value >= 0 and math.isfinite(value)):
            fail(f"must be a power in W >= 0, not {value!r}", f"cluster.{key}")
    if c.sacctmgr_qos is not None and c.sacctmgr_assoc is None:
        fail("give the associations too: a QOS applies to a user's association", "cluster.sacctmgr_qos")
    if s.hook is not None and s.queue != "slurm":
        fail(f"the hook's decisions go in front of the slurm queue, as live they go in front of Slurm; not in "
             f"front of the {s.queue} queue (give --queue slurm)", "hook")
    if not 0 < s.arrival_scale <= MAX_ARRIVAL_SCALE:
        fail(f"must be > 0 and at most {MAX_ARRIVAL_SCALE:,} (the time between arrivals times this)", "arrival_scale")


def _check_selection(s: Scenario, fail, name) -> None:
    """The node selection and its GPU-scorer options."""
    from greenslurm.allocation.selection import parse_selection
    try:
        spec = parse_selection(s.selection_name)
    except InputError as exc:
        fail(exc.reason, "selection.name")
    sel = s.selection
    if spec.label == "phase" and s.power_states is None:
        fail("the phase selection places by the power of each phase: give power states "
             f"({name('power_states.suspend_after_s')} or a power profile)", "selection.name")
    if spec.label == "phase" and s.queue not in ("fcfs", "easy"):
        fail(f"the phase selection works with the power states' queues (fcfs, easy), not {s.queue}", "selection.name")
    if spec.scores_gpus:
        from greenslurm.allocation.scorers.framework import NORMALIZATIONS, TIE_BREAKS
        if sel.normalization is not None and sel.normalization not in NORMALIZATIONS:
            fail(f"choose from {', '.join(NORMALIZATIONS)}", "selection.normalization")
        if sel.ties is not None and sel.ties not in TIE_BREAKS:
            fail(f"choose from {', '.join(TIE_BREAKS)}", "selection.ties")
    else:
        for key in ("normalization", "ties"):
            if getattr(sel, key) is not None:
                fail(f"applies to GPU scorers (pwr, fgd, ...), not to {spec.label}", f"selection.{key}")
        if spec.backfill and s.queue != "deadline":
            fail(f"+backfill applies to the deadline queue's planner; the {s.queue} queue backfills by itself "
                 "or not at all", "selection.name")
    if sel.fgd_coverage is not None:
        if not spec.needs_workload:
            fail(f"applies to FGD only, not to {spec.label}", "selection.fgd_coverage")
        if not 0 < sel.fgd_coverage <= 1:
            fail("must be a fraction in (0, 1]", "selection.fgd_coverage")


def _check_acceptance(s: Scenario, fail, name) -> None:
    """The deadline queue's acceptance policy and the deadlines drawn for a trace."""
    if s.acceptance is not None:
        from greenslurm.acceptance.registry import build as build_acceptance
        if s.queue != "deadline":
            fail(f"applies to the deadline queue, not to the {s.queue} queue", "acceptance")
        try:
            build_acceptance(s.acceptance.policy)
        except ValueError as exc:
            fail(str(exc), "acceptance.policy")
        chain = {p.strip() for p in s.acceptance.policy.split(",")}
        a = s.acceptance
        if (a.threshold_share is not None or a.threshold_slack is not None) and "threshold" not in chain:
            fail("applies to the threshold acceptance policy only", "acceptance.threshold_share"
                 if a.threshold_share is not None else "acceptance.threshold_slack")
        if a.threshold_share is not None and not 0 <= a.threshold_share <= 1:
            fail("must be in [0, 1]", "acceptance.threshold_share")
        if a.threshold_slack is not None and a.threshold_slack < 0:
            fail("must be >= 0", "acceptance.threshold_slack")
    d = s.deadlines
    if d is not None:
        if not d.slack_mean > 0:
            fail("must be > 0", "deadlines.slack_mean")
        if d.slack_sigma is not None and d.slack_sigma < 0:
            fail("must be >= 0", "deadlines.slack_sigma")


def _check_supply(s: Scenario, fail, name) -> None:
    """The renewable supply and its mode."""
    from greenslurm.allocation.green import RENEWABLE_MODES
    deadline_modes = s.supply.mode != "grid"
    sup = s.supply
    if sup.mode not in RENEWABLE_MODES:
        fail(f"choose from {', '.join(RENEWABLE_MODES)}", "supply.mode")
    if sup.source is None:
        for key in ("scale", "seed", "horizon"):
            if getattr(sup, key) is not None:
                fail("applies with a supply source (solar, wind or a CSV)", f"supply.{key}")
        if deadline_modes:
            fail(f"renewable mode {sup.mode} needs {name('supply.source')} (solar, wind or a CSV)",
                 "supply.mode")
    if deadline_modes and s.queue != "deadline":
        fail(f"renewable mode {sup.mode} plans with the deadline queue, not the {s.queue} queue", "supply.mode")
    if sup.source is not None and sup.source not in ("solar", "wind"):
        # a CSV supply is read as it is: a seed or a horizon would be ignored
        for key in ("seed", "horizon"):
            if getattr(sup, key) is not None:
                fail("applies to the synthetic supplies (solar or wind), not to a CSV", f"supply.{key}")
    if sup.horizon not in (None, "limits"):
        fail("choose limits (or leave it out)", "supply.horizon")
    if sup.scale is not None and not sup.scale > 0:
        fail("must be > 0", "supply.scale")


def _check_power_states(s: Scenario, fail, name) -> None:
    """Power states: Slurm's own power saving under the slurm queue, the machine's under every other."""
    if s.power_states is not None and s.queue == "slurm":
        # the slurm queue powers nodes down as Slurm does (its SuspendTime, ... from slurm.conf):
        # greenslurm's own power-state settings beyond these are another machine
        kept = ("suspend_after_s", "boot_s", "boot_w", "off_w", "start_off", "budget_w")
        if s.power_states.consolidate_every_s is not None:
            fail("pVOCL's consolidation moves running jobs between nodes; Slurm never migrates a running job, "
                 "so the slurm queue cannot consolidate", "power_states.consolidate_every_s")
        for f in dataclasses.fields(s.power_states):
            if f.name not in kept and getattr(s.power_states, f.name) is not None:
                fail("the slurm queue powers nodes down with Slurm's own power saving (SuspendTime, ... from "
                     f"slurm.conf; {name('power_states.suspend_after_s')} sets SuspendTime): this setting "
                     "is not part of it", f"power_states.{f.name}")
        for key in ("suspend_after_s", "boot_s", "boot_w", "off_w", "budget_w"):
            value = getattr(s.power_states, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                fail(f"must be a number, not {_show(value)}", f"power_states.{key}")
        if s.power_states.start_off is not None and not isinstance(s.power_states.start_off, bool):
            fail(f"must be true or false, not {_show(s.power_states.start_off)}", "power_states.start_off")
        for key in ("suspend_after_s", "boot_s", "boot_w", "off_w"):
            value = getattr(s.power_states, key)
            if value is not None and not (0 <= value < math.inf):
                fail("must be a number >= 0", f"power_states.{key}")
        budget = s.power_states.budget_w
        if budget is not None and not 0 < budget < math.inf:
            fail("must be a number of watts > 0", "power_states.budget_w")
    elif s.power_states is not None:      # every other queue: the machine's power states (any queue)
        try:
            power_config(s.power_states)
        except (TypeError, ValueError) as exc:
            fail(str(exc), power_states_key(str(exc)))
        if s.power_states.suspend_after_s is None:
            # nodes start on and go off only after suspend_after_s idle: without it these change nothing
            for key in ("boot_s", "boot_w", "off_w"):
                if getattr(s.power_states, key) is not None:
                    fail(f"applies when idle nodes power down: give {name('power_states.suspend_after_s')}",
                         f"power_states.{key}")
        if s.power_states.boot_s is not None and s.power_states.boot_s > MAX_BOOT_S:
            # the machine looks again every max(suspend_after_s, 60) s while a node boots: a boot of years
            # is millions of events, and no node takes that long
            fail(f"must be at most {MAX_BOOT_S:.0f} s (a day)", "power_states.boot_s")


def _check_colocation(s: Scenario, fail, name) -> None:
    """Co-location of training jobs on GPUs."""
    if s.colocation is not None:
        from greenslurm.allocation.colocation import COLOCATION_POLICIES     # loads with a co-location
        if s.power_states is not None:
            fail("co-location and power states are two machine models; choose one", "colocation")
        if s.colocation.policy not in COLOCATION_POLICIES:
            fail(f"unknown policy {s.colocation.policy!r}; choose from {', '.join(COLOCATION_POLICIES)}",
                 "colocation.policy")
        if s.queue != "fcfs":
            fail(f"co-location runs its training jobs under the fcfs queue, not {s.queue}", "queue")
        if s.selection.name is not None:
            fail("the co-location policy chooses the GPU sets; a node selection does not apply", "selection.name")
        check_colocation(s.colocation, fail)


def _numbers(obj, prefix: str):
    """(key, value) of every field below ``obj``, tables flattened to dotted keys."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{prefix}.{f.name}" if prefix else f.name
        if dataclasses.is_dataclass(value):
            yield from _numbers(value, key)
        else:
            yield key, value


def _needing(fail, prefix: str):
    """``need(ok, key, message)``: fail with ``message`` on ``prefix.key`` unless ``ok``."""
    def need(ok: bool, key: str, message: str) -> None:
        if not ok:
            fail(message, f"{prefix}.{key}")
    return need


def check_synthetic(syn: Synthetic, fail) -> None:
    """The domains of :func:`greenslurm.traces.synthetic.synthetic_jobs`'s settings."""
    from greenslurm.traces.records import MAX_DURATION_S
    from greenslurm.traces.synthetic import MAX_SYNTHETIC_JOBS
    need = _needing(fail, "trace.synthetic")
    need(1 <= syn.jobs <= MAX_SYNTHETIC_JOBS, "jobs", f"must be within [1, {MAX_SYNTHETIC_JOBS:,}] (held in memory)")
    need(syn.runtime_median_s is None or syn.runtime_median_s <= MAX_DURATION_S, "runtime_median_s",
         "must be at most 10 years")
    need(syn.load is None or syn.load > 0, "load", "must be > 0 (the offered load, 0.8 = 80 %)")
    need(syn.runtime_median_s is None or syn.runtime_median_s > 0, "runtime_median_s", "must be > 0")
    need(syn.runtime_sigma is None or syn.runtime_sigma >= 0, "runtime_sigma", "must be >= 0")
    need(syn.max_overestimate is None or syn.max_overestimate >= 1, "max_overestimate",
         "must be >= 1 (time limit / runtime)")
    for key in ("power_of_two_share", "underestimate_share"):
        value = getattr(syn, key)
        need(value is None or 0 <= value <= 1, key, "must be a fraction in [0, 1]")
    need(syn.max_job_cpus is None or syn.max_job_cpus >= 1, "max_job_cpus", "must be >= 1")


def check_homogeneous(h: Homogeneous, fail) -> None:
    """The same limits as a cluster TOML's node group, plus a size the replay can hold."""
    from greenslurm.clustermodel.node import DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W
    need = _needing(fail, "cluster.homogeneous")
    need(h.nodes >= 1, "nodes", "must be >= 1")
    need(h.nodes <= MAX_NODES, "nodes", f"must be at most {MAX_NODES:,} (the replay holds every node)")
    need(h.cpus >= 1, "cpus", "must be >= 1")
    need(h.gpus >= 0, "gpus", "must be >= 0")
    need(h.memory_mb >= 0, "memory_mb", "must be >= 0")
    for key in ("idle_w", "busy_w"):
        need(getattr(h, key) is None or getattr(h, key) >= 0, key, "must be >= 0")
    idle = h.idle_w if h.idle_w is not None else DEFAULT_NODE_IDLE_W
    busy = h.busy_w if h.busy_w is not None else DEFAULT_NODE_BUSY_W
    need(busy >= idle, "busy_w", f"busy_w ({busy:g} W) is below idle_w ({idle:g} W)")
    need(h.gpu_model is None or h.gpus > 0, "gpu_model", "applies to nodes with gpus > 0")
    from greenslurm.clustermodel.node import unknown_gpu_model
    need(unknown_gpu_model(h.gpu_model, False) is None, "gpu_model", unknown_gpu_model(h.gpu_model, False) or "")


def check_colocation(c: Colocation, fail) -> None:
    """The ranges of the co-location settings (the EaCO paper's EaCO and its baselines)."""
    need = _needing(fail, "colocation")
    need(c.gpu_nodes is None or 1 <= c.gpu_nodes <= MAX_NODES, "gpu_nodes",
         f"must be within [1, {MAX_NODES:,}] (more nodes than any machine has; the replay holds every node)")
    need(c.max_jobs is None or c.max_jobs >= 1, "max_jobs", "must be >= 1 (jobs sharing one GPU set)")
    for key in ("util_threshold_pct", "mem_threshold_pct"):
        value = getattr(c, key)
        need(value is None or 0 < value <= 100, key, "must be a percentage in (0, 100]")
    need(c.idle_node_w is None or c.idle_node_w >= 0, "idle_node_w", "must be >= 0")
    # a shared set draws max P + beta (sum P - max P): beta < 0 would draw less than its biggest job,
    # beta > 1 more than its jobs apart
    need(c.beta is None or 0 <= c.beta <= 1, "beta", "must be in [0, 1]")
    need(c.jitter is None or c.jitter >= 0, "jitter", "must be >= 0")
    from greenslurm.allocation.colocation import ACCOUNTINGS
    need(c.accounting is None or c.accounting in ACCOUNTINGS, "accounting", f"choose from {', '.join(ACCOUNTINGS)}")


def power_states_key(message: str) -> str:
    """The scenario key an engine message about power states refuses: the engine's messages begin
    with the field's name.

    >>> power_states_key("movable must be one of gpu, single-node, none, not 'x'")
    'power_states.movable'
    >>> power_states_key("something else")
    'power_states'
    """
    key = next((f.name for f in dataclasses.fields(PowerStates) if message.startswith(f.name + " ")), None)
    return "power_states" if key is None else f"power_states.{key}"


def power_config(p: PowerStates):
    """The engine's PowerStateConfig (None fields: its defaults; suspend_after_s None: never)."""
    from greenslurm.sim.machines.power_states import PowerStateConfig
    values = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)
              if getattr(p, f.name) is not None or f.name == "suspend_after_s"}
    return PowerStateConfig.from_mapping(values)
