"""``greenslurm sweep SPEC.toml``: run a grid of replays in parallel, resumable (see :mod:`greenslurm.sweep`)."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from greenslurm.cli_commands import COMMAND_HELP
from greenslurm.clustermodel import InputError
from greenslurm.cli_parser import non_negative_int
from greenslurm.cmd_options import alias, no_progress, workers
from greenslurm.console import progress_bar, showing_progress, warning_line
from greenslurm.inputs import require_module
from greenslurm.sweep import run_sweep
from greenslurm.sweep_cell import PARAMETER_ALIASES, PARAMETERS
from greenslurm.sweep_spec import load_spec

EPILOG = """\
examples:
  greenslurm sweep study.toml                         local processes, one per core
  greenslurm sweep study.toml --dask local            a Dask LocalCluster on 127.0.0.1 for this run
  greenslurm sweep study.toml --dask tcp://10.0.0.5:8786   an existing Dask scheduler
  greenslurm sweep study.toml --max-cells 100         stop after 100 new cells; rerun to continue

Finished cells are kept in DIR/cells/<id>.json (id = hash of the cell); a rerun skips them.
All finished cells are combined into DIR/results.parquet.

parameters ([grid] keys):
""" + "\n".join(f"  {k:<17} {v}" for k, v in PARAMETERS.items()) + \
    "\n  old names (deprecated): " + ", ".join(f"{old} = {new}" for old, new in PARAMETER_ALIASES.items()) + \
    "\n  option.NAME       a policy option, e.g. option.select = [\"bestfit\", \"minidle\"] (the node selection)"


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "sweep", help=COMMAND_HELP["sweep"],
        description="Replay every cell of the grid described in SPEC (TOML) and write one Parquet table\n"
                    "of results. Cells run in parallel on local cores, or on a Dask cluster.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", metavar="SPEC", help="the sweep spec (TOML)")
    out = parser.add_argument("--out", metavar="DIR", default=None,
                              help="write the results into DIR (default: [sweep] results, else SPEC's name + "
                                   "'-results' next to SPEC)")
    alias(parser, "--results", out)
    workers(parser, "the CPU count; with --dask local, its workers")
    parser.add_argument("--dask", metavar="ADDRESS", default=None,
                        help="run on a Dask cluster: tcp://HOST:PORT, or 'local' for a LocalCluster on loopback")
    parser.add_argument("--max-cells", type=non_negative_int, default=None, metavar="N",
                        help="run at most N new cells, then stop (a rerun continues)")
    no_progress(parser)
    parser.set_defaults(handler=run)
    return parser


def results_dir(args: argparse.Namespace, spec) -> Path:
    if args.out:
        return Path(args.out)
    if spec.results:
        return Path(spec.base_dir) / spec.results
    return Path(args.spec).with_name(Path(args.spec).stem + "-results")


def _terminate(signum, frame):
    raise KeyboardInterrupt


def run(args: argparse.Namespace, console: Console) -> int:
    spec = load_spec(args.spec)        # every cell checked, and every file it reads, before any runs
    for note in spec.deprecated:
        warning_line(note)
    out = results_dir(args, spec)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a directory", path=str(out))
    if args.dask and args.dask != "local" and "://" not in args.dask:
        raise InputError("--dask wants tcp://HOST:PORT or 'local'", path="<command line>", field="dask")
    if args.dask:
        require_module("distributed", "dask", "--dask")

    def started(total: int, skipped: int, where: str) -> None:
        console.print(f"sweep {escape(spec.name)}: {total} cells, {skipped} already done, "
                      f"{total - skipped} to run on {where}", highlight=False)

    previous = signal.signal(signal.SIGTERM, _terminate)     # a batch system's stop: like Ctrl-C
    try:
        with progress_bar(console, None, showing_progress(console, args.no_progress), doing="sweep",
                          unit="cells", transient=False) as progress:
            outcome = run_sweep(spec, out, workers=args.workers, dask=args.dask, max_cells=args.max_cells,
                                progress=progress, on_start=started)
    finally:
        signal.signal(signal.SIGTERM, previous)
    console.print(f"ran {outcome.ran} cells in {outcome.elapsed_s:.1f} s; {outcome.skipped + outcome.ran} of "
                  f"{outcome.total} done", highlight=False)
    for cid, error in sorted(outcome.failed.items()):
        console.print(f"cell {cid} failed: {escape(error)}", style="red", highlight=False)
    console.print(f"wrote {escape(str(outcome.results))}", style="dim")
    if outcome.interrupted:
        console.print("interrupted: rerun the same command to continue", style="yellow")
        return 130
    if outcome.failed:
        return 1
    if not outcome.complete:
        console.print(f"{outcome.total - outcome.skipped - outcome.ran} cells left: rerun to continue",
                      style="yellow")
    return 0
