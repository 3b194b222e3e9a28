"""The options replay, compare, whatif and sweep share: one name, one meaning and one default for each
concept, the names of the scenario's TOML keys (docs/cli.md has the table).

Old spellings stay for one release as deprecated aliases (:func:`alias`): they still work, hidden from
``--help``, and say once on stderr which name replaces them.
"""

from __future__ import annotations

import argparse
import os

from greenslurm.clustermodel.node import DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W
from greenslurm.console import warning_line

# The scenario's defaults, the same in every command (the TOML's, greenslurm.scenario).
SEED_DEFAULT = 0                   # seed, deadlines.seed, supply.seed
RENEWABLE_SCALE_DEFAULT = 1.0      # supply.scale: a synthetic peak = 1 x the cluster's full power
# clusters read from Slurm, which has no power, draw a node's default power
NODE_IDLE_W_DEFAULT, NODE_BUSY_W_DEFAULT = DEFAULT_NODE_IDLE_W, DEFAULT_NODE_BUSY_W
# FGD's target workload: the task shapes covering this share of the trace (the FGD paper's 0.95; the
# value of greenslurm.clustermodel.fragmentation.COVERAGE, written here so that the help loads no numpy:
# tests/test_cli.py checks that the two agree).
FGD_COVERAGE_DEFAULT = 0.95
# The dest where the parser notes which deprecated spellings the command line used.
ALIASES_USED = "deprecated_aliases"


class LazyChoices:
    """An option's choices, the names of a registry imported only when they are read (an option given,
    ``--help``, an error), so that building the parser loads none of the registries' modules.

    >>> choices = LazyChoices("greenslurm.sim.engine.strategies", "QUEUES")
    >>> "easy" in choices, "fifo" in choices, list(choices)[:2]
    (True, False, ['fcfs', 'easy'])
    """

    def __init__(self, module: str, attribute: str) -> None:
        self.module, self.attribute = module, attribute

    def _names(self):
        import importlib
        return getattr(importlib.import_module(self.module), self.attribute)

    def __iter__(self):
        return iter(tuple(self._names()))

    def __contains__(self, name: object) -> bool:
        return name in self._names()


class _Alias(argparse.Action):
    """An old spelling of ``target``: warns once, then does what the target does."""

    def __init__(self, option_strings, dest, target: argparse.Action, **kwargs):
        super().__init__(option_strings, dest=target.dest, nargs=target.nargs, const=target.const,
                         type=target.type, choices=target.choices, default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS, metavar=target.metavar)
        self.target = target

    def __call__(self, parser, namespace, values, option_string=None):
        used = getattr(namespace, ALIASES_USED, None)
        if used is None:
            used = set()
            setattr(namespace, ALIASES_USED, used)
        if option_string not in used:
            warning_line(f"{option_string} is deprecated, use {self.target.option_strings[-1]}")
        used.add(option_string)
        self.target(parser, namespace, values, self.target.option_strings[-1])


def alias(parser, old: str, target: argparse.Action) -> argparse.Action:
    """Accept ``old`` (hidden from help) as a deprecated spelling of the option ``target``."""
    return parser.add_argument(old, action=_Alias, target=target)


class _Replaced(argparse.Action):
    """An old option whose value the new one does not take as it is (a file where the new option names a
    folder): kept under its own dest, hidden from help, with the deprecation line."""

    def __init__(self, option_strings, dest, instead: str, **kwargs):
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.instead = instead

    def __call__(self, parser, namespace, values, option_string=None):
        warning_line(f"{option_string} is deprecated, use {self.instead}")
        setattr(namespace, self.dest, values)


def replaced(parser, old: str, instead: str, metavar: str) -> argparse.Action:
    """Accept ``old VALUE`` (hidden from help, dest ``old`` without dashes) and say once on stderr that
    ``instead`` replaces it."""
    return parser.add_argument(old, action=_Replaced, instead=instead, metavar=metavar, default=None)


def used_alias(args: argparse.Namespace, old: str) -> bool:
    """Whether the command line spelled an option ``old`` (a deprecated alias)."""
    return old in (getattr(args, ALIASES_USED, None) or ())


def workers(parser, default_help: str = "the CPU count") -> argparse.Action:
    """``-j/--workers N``: processes running replays side by side (default: the CPU count)."""
    return parser.add_argument("-j", "--workers", type=positive_int, default=None, metavar="N",
                               help=f"replays in parallel processes (default: {default_help})")


def worker_count(value: int | None) -> int:
    """The ``--workers`` in force: the CPU count when not given."""
    return value if value else (os.cpu_count() or 1)


def no_progress(parser) -> argparse.Action:
    return parser.add_argument("--no-progress", action="store_true",
                               help="never show a progress bar (bars show only on a terminal)")


def limit(parser) -> argparse.Action:
    """``--limit N``: the trace file's first N jobs, in submit order (the scenario's ``trace.limit``;
    greenslurm.traces.base.read_trace says the rule)."""
    return parser.add_argument("--limit", type=positive_int, default=None, metavar="N",
                               help="only the trace file's first N jobs, read no further and replayed in submit "
                                    "order (the N earliest on a file in submit order) (default: all)")


def exact_runtimes(parser) -> argparse.Action:
    """``--exact-runtimes``: plan with the real runtimes as time limits (off by default in every command:
    the jobs' own limits, as Slurm plans)."""
    return parser.add_argument("--exact-runtimes", action="store_true",
                               help="plan with the real runtimes as time limits (Nileshwar & Schwiegelshohn's "
                                    "setting); by default the users' own limits, as Slurm would")


class _NowDefault(argparse.Action):
    """An old flag that asked for what is now the default: hidden from help, sets its own dest (so a
    contradiction can be refused) and says once on stderr that it is no longer needed."""

    def __init__(self, option_strings, dest, default_text: str, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, help=argparse.SUPPRESS)
        self.default_text = default_text

    def __call__(self, parser, namespace, values, option_string=None):
        if not getattr(namespace, self.dest, False):
            warning_line(f"{option_string} is deprecated: {self.default_text} is the default now")
        setattr(namespace, self.dest, True)


def now_default(parser, old: str, default_text: str) -> argparse.Action:
    """Accept the flag ``old`` (hidden from help, dest ``old`` without dashes) that asked for what is now
    the default, ``default_text``, with a one-line deprecation warning."""
    return parser.add_argument(old, action=_NowDefault, default_text=default_text)


def seed(parser) -> argparse.Action:
    return parser.add_argument("--seed", type=int, default=None, metavar="N",
                               help=f"seed of random node selections and ties (default: {SEED_DEFAULT}); the "
                                    "deadlines and the synthetic supply have --slack-seed and --renewable-seed")


class ListOrRepeat(argparse.Action):
    """A list option given as one list or repeated, alike: ``--select a b --select c`` is a, b, c (a
    repeated option no longer keeps only its last list); the values given replace the default."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, nargs="+", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        so_far = getattr(namespace, self.dest)
        setattr(namespace, self.dest, ([] if so_far is self.default else list(so_far)) + list(values))


def slack_mean(parser, many: bool = False) -> argparse.Action:
    if many:
        return parser.add_argument("--slack-mean", action=ListOrRepeat, type=positive, default=[0.2, 1.0, 5.0],
                                   metavar="EPS", help="slack values, one replay each (default: 0.2 1 5)")
    return parser.add_argument("--slack-mean", type=positive, default=None, metavar="EPS",
                               help="draw deadlines d = r + (1 + eps) p, log-normal eps with geometric mean EPS, "
                                    "for jobs the trace gives none (default: no deadlines)")


def slack_options(parser) -> None:
    """``--slack-sigma`` and ``--slack-seed`` (the scenario's deadlines.slack_sigma and .seed)."""
    parser.add_argument("--slack-sigma", type=non_negative, default=None, metavar="SIGMA",
                        help="deviation of ln(slack) of drawn deadlines (default: EPS / 2.5, as in the paper)")
    parser.add_argument("--slack-seed", type=int, default=None, metavar="N",
                        help=f"seed of the drawn slacks (default: {SEED_DEFAULT})")


def renewable_options(parser, mode: bool = True) -> dict[str, argparse.Action]:
    """``--renewable``, ``--renewable-mode``, ``--renewable-scale``, ``--renewable-seed`` (the scenario's
    supply.source, .mode, .scale, .seed); None defaults, so that one that does not apply is refused."""
    added = {"renewable": parser.add_argument(
        "--renewable", default=None, metavar="FILE|solar|wind",
        help="renewable supply: a CSV of time_s,watts or a synthetic seeded model (solar, wind)")}
    if mode:
        from greenslurm.allocation.green import RENEWABLE_MODES
        added["renewable_mode"] = parser.add_argument(
            "--renewable-mode", choices=RENEWABLE_MODES, default=None,
            help="grid: plan as usual, split the energy; green: move jobs into greener hours while their "
                 "deadline holds; only: never draw more than the supply while jobs run (default: grid; green "
                 "and only use the deadline queue)")
    added["renewable_scale"] = parser.add_argument(
        "--renewable-scale", type=positive, default=None, metavar="X",
        help=f"synthetic peak = X times the cluster's full power; a CSV is multiplied by X "
             f"(default: {RENEWABLE_SCALE_DEFAULT:g})")
    added["renewable_seed"] = parser.add_argument(
        "--renewable-seed", type=int, default=None, metavar="N",
        help=f"seed of the synthetic supply (default: {SEED_DEFAULT})")
    return added


def _number(low: float, strict: bool):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (value > low if strict else value >= low) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a number {'>' if strict else '>='} {low:g}, not {text}")
        return value + 0.0               # -0 is 0
    parse.number = True                  # its text is checked for ASCII digits (OneLineParser)
    return parse


def whole_number(low: int):
    """An option's whole number >= ``low`` (1: a count of jobs or processes; 0: a seed).

    >>> whole_number(1)("3")
    3
    >>> whole_number(1)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a whole number >= 1, not 0
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {low}, not {text}")
        return value
    parse.number = True                  # its text is checked for ASCII digits (OneLineParser)
    return parse


positive_int = whole_number(1)
positive = _number(0.0, strict=True)
non_negative = _number(0.0, strict=False)


# -- option groups of replay (and demo), compare and run --------------------------------------------------
ACCEPTANCE_HELP = ("greedy (reject only what cannot meet its deadline), threshold (also reject what cannot "
                   "end within --threshold-share of its slack, or has slack below --threshold-slack), all, "
                   "or a chain such as threshold,greedy (the first rejection wins)")


def acceptance_chain(text: str) -> str:
    """An ``--acceptance`` value: a policy or a chain the acceptance registry builds."""
    from greenslurm.acceptance.registry import build as build_acceptance     # loads when the option is given
    try:
        build_acceptance(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def share(text: str) -> float:
    """A number in [0, 1]."""
    value = non_negative(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], not {text}")
    return value


share.number = True                      # its text is checked for ASCII digits (OneLineParser)


def threshold_and_supply_options(group) -> None:
    """The drawn slacks' spread and seed, the threshold policy's options and the renewable supply."""
    # None defaults, so that an option that does not apply can be told apart and refused
    slack_options(group)
    group.add_argument("--threshold-share", type=share, default=None, metavar="F",
                       help="threshold: a job must be able to end within this share of its slack (default 0.5)")
    group.add_argument("--threshold-slack", type=non_negative, default=None, metavar="S",
                       help="threshold: also reject jobs whose slack is below S")
    renewable_options(group)


def deadline_options(parser: argparse.ArgumentParser) -> None:
    """The deadline and renewable options of ``greenslurm replay``."""
    group = parser.add_argument_group("deadlines and renewable power (Nileshwar & Schwiegelshohn)",
                                      "--acceptance selects the deadline queue when --queue is not given")
    group.add_argument("--acceptance", type=acceptance_chain, default=None, metavar="POLICY", help=ACCEPTANCE_HELP)
    slack_mean(group)
    exact_runtimes(group)
    threshold_and_supply_options(group)


def cluster_options(parser: argparse.ArgumentParser, cores: bool = False) -> None:
    """``--cluster``, ``--slurm-conf``, ``--nodes`` (and compare's ``--cores``): one of them, else the
    trace's header (the scenario's [cluster] table)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="FILE", default=None,
                       help="cluster description (TOML, [[node_group]] tables); default: from the SWF "
                            "header when the trace has one")
    where.add_argument("--nodes", metavar="CSV", default=None,
                       help="an openb node list (the GPU papers' clusters) as the cluster")
    where.add_argument("--slurm-conf", metavar="FILE", default=None,
                       help="a site's slurm.conf (Include lines followed) as the cluster: its nodes, GRES, "
                            "features and partitions (a job runs only on its partition's nodes)")
    if cores:
        where.add_argument("--cores", type=int, default=None, metavar="N",
                           help="N single-core nodes: the paper's machine model")


def gpu_scorer_options(parser: argparse.ArgumentParser) -> None:
    """The GPU scorers' options of ``greenslurm replay`` (the scenario's [selection] table)."""
    group = parser.add_argument_group("GPU scorers (--select pwr, fgd, gpubestfit, ... or a mix)")
    group.add_argument("--normalization", default=None,
                       choices=LazyChoices("greenslurm.allocation.scorers.framework", "NORMALIZATIONS"),
                       help="score normalisation of the GPU scorers (default: paper; see greenslurm inflate --help)")
    group.add_argument("--ties", default=None, choices=LazyChoices("greenslurm.allocation.scorers.framework", "TIE_BREAKS"),
                       help="equal best scores: the first node (default) or a seeded random one (--seed)")
    group.add_argument("--fgd-coverage", type=float, default=None, metavar="FRACTION",
                       help=f"FGD target workload: the most frequent task shapes up to this share (default: "
                            f"{FGD_COVERAGE_DEFAULT})")


def number(text: str) -> float:
    """A number of an option; ``-0`` is 0 (it was shown as "power down after -0 s").

    >>> number("-0"), number("1.5")
    (0.0, 1.5)
    """
    return float(text) + 0.0             # -0.0 + 0.0 == +0.0


number.number = True                     # its text is checked for ASCII digits (OneLineParser)


def power_options(parser: argparse.ArgumentParser, many: bool) -> None:
    """The power states' and co-location's options (``many``: compare's, several values each)."""
    group = parser.add_argument_group("power states and co-location (pVOCL, EaCO)")
    group.add_argument("--power-config", metavar="FILE", default=None,
                       help="TOML profile with [power_states] and [colocation] tables")
    group.add_argument("--power-down-after", type=number, default=None, metavar="S",
                       help="power idle nodes down after S seconds (Slurm SuspendTime)")
    group.add_argument("--boot-s", type=number, default=None, metavar="S", help="boot time of a node (default 300)")
    group.add_argument("--boot-w", type=number, default=None, metavar="W", help="power while booting (default: idle)")
    group.add_argument("--off-w", type=number, default=None, metavar="W", help="power of an off node (default 10)")
    group.add_argument("--power-budget", type=number, default=None, nargs="+" if many else None, metavar="W",
                       help="peak power no instant may exceed; jobs wait instead"
                            + (" (several: one row each)" if many else ""))
    group.add_argument("--phases", type=int, default=None, metavar="N", help="power phases (default 3)")
    group.add_argument("--nodes-per-cabinet", type=int, default=None, metavar="N",
                       help="nodes per cabinet: cabinets fill in node order, and each cabinet's power phases are balanced and reported on their own (default 48)")
    group.add_argument("--consolidate-every", type=number, default=None, metavar="S",
                       help="pVOCL consolidation: move GPU jobs off lightly loaded nodes and turn those off, "
                            "checked when jobs end and at least every S seconds")
    group.add_argument("--colocation", nargs="+" if many else None, default=None, metavar="POLICY",
                       choices=LazyChoices("greenslurm.allocation.colocation", "COLOCATION_POLICIES"),
                       help="simulate the trace's jobs as training jobs sharing GPUs: %(choices)s")
    group.add_argument("--gpu-nodes", type=int, default=None, metavar="N",
                       help="8-GPU nodes for --colocation (default: the cluster's GPUs / 8, at least 1)")
    group.add_argument("--max-jobs-per-set", type=int, default=None, metavar="K", help="co-location limit (default 4)")
    idle = group.add_argument("--colocation-idle-node-w", type=number, default=None, metavar="W",
                              help="co-location only: power of an 8-GPU node without jobs (default 0: powered "
                                   "down); not the node power of a cluster, which its description gives")
    alias(group, "--idle-node-w", idle)


def node_power(parser) -> None:
    """--node-idle-w, --node-busy-w: the power of a cluster read from Slurm, which records none."""
    parser.add_argument("--node-idle-w", type=non_negative, default=None, metavar="W",
                        help=f"a node's idle power, for a cluster read from Slurm (default: {NODE_IDLE_W_DEFAULT:g} W)")
    parser.add_argument("--node-busy-w", type=non_negative, default=None, metavar="W",
                        help=f"a node's power with every CPU busy, for a cluster read from Slurm "
                             f"(default: {NODE_BUSY_W_DEFAULT:g} W)")
