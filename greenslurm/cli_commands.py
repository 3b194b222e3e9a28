"""The commands of ``greenslurm``, in the order its help lists them, each with its one-line help.

The command line fills in the options of the command that runs alone: its module (and what that
module needs: the replay engine, pandas for ``report``, ...) loads then, and ``greenslurm --help``
lists every command from this table without loading any of them.  A command's module takes its
one-line help from here.

>>> list(COMMAND_HELP)[:4]
['replay', 'demo', 'run', 'traces']
"""

COMMAND_HELP = {
    "replay": "replay a trace and report waits, slowdowns, utilisation and energy",
    "demo": "replay the bundled KTH-SP2 trace (2,000 jobs) on its 100-node cluster",
    "run": "run a saved scenario (TOML): the same report and files as replay",
    "traces": "look at trace files",
    "inflate": "GPU cluster Monte Carlo inflation: power, allocation and fragmentation per node selection",
    "compare": "acceptance x node selection x slack on one trace: accepted load, performance ratio, misses",
    "hook": "the live Slurm job_submit hook: serve, install, check, report, power",
    "sweep": "run a grid of traces x policies x parameters x seeds (local cores or Dask), resumable",
    "whatif": "admin what-if: the site's own sacct jobs under the current and candidate policies",
    "report": "comparison tables (mean, 95%% CI over seeds) and figures of sweep, replay, whatif, inflate, "
              "compare results",
}


def command_named(argv: list[str]) -> str | None:
    """The command ``argv`` runs, as far as the options to fill in go: its name; ``""`` when it names
    none (``--help``, ``--version``, a missing command: no command's options are read); None when
    its first word is not a command (every command is filled in: argparse's error lists them).
    The options before the command (``-v``, ``--version``, ``-h``) take no value, so the first word
    that is not an option is the command.

    >>> command_named(["-vv", "replay", "log.swf"]), command_named(["--help"]), command_named(["replya"])
    ('replay', '', None)
    """
    word = next((arg for arg in argv if not arg.startswith("-")), "")
    return word if word in COMMAND_HELP or word == "" else None
