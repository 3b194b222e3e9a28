"""``greenslurm hook``: the live Slurm job-submit hook (serve, install, check, report, power)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from greenslurm.cli_commands import COMMAND_HELP
from greenslurm.clustermodel import InputError

log = logging.getLogger("greenslurm")

EPILOG = """\
examples:
  greenslurm hook serve --config /etc/greenslurm/hook.toml        run the decision service
  greenslurm hook install --write-config /etc/greenslurm/hook.toml  the commented settings template
  greenslurm hook install --config /etc/greenslurm/hook.toml --dest /etc/slurm --unit-dir /etc/systemd/system
                                                                    job_submit.lua, cli_filter.lua, the unit
  greenslurm hook check --config /etc/greenslurm/hook.toml --slurm-conf /etc/slurm/slurm.conf
  greenslurm hook report --config /etc/greenslurm/hook.toml --by account   energy and renewable share

See docs/hook.md and docs/hook-install.md."""

PRINTABLE = ("job_submit", "unit", "config", "snippet")
REPORT_GROUPS = ("user", "account", "day")
LEVEL_STYLE = {"ok": "[green]ok[/]", "warn": "[yellow]WARN[/]", "fail": "[red]FAIL[/]"}


def add_parser(commands) -> argparse.ArgumentParser:
    hook = commands.add_parser("hook", help=COMMAND_HELP["hook"],
                               description="Decide at sbatch time on a real Slurm cluster with the same acceptance\n"
                                           "and allocation policies as the replay.",
                               epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = hook.add_subparsers(dest="hook_command", metavar="ACTION")
    sub.required = True
    for name, text in (("serve", "run the decision service on its UNIX socket"),
                       ("install", "write job_submit.lua, cli_filter.lua, the slurm.conf lines, the systemd unit "
                                   "and the hook.toml template"),
                       ("check", "say whether the hook is wired: slurm.conf (with its Include files), the Lua files, "
                                 "lua-socket, the backend, the runtime folder, lock, socket, record and service"),
                       ("report", "the jobs' estimated energy and renewable share (per user, account or day) from "
                                  "the service's record"),
                       ("power", "Slurm's SuspendProgram and ResumeProgram: turn the nodes of HOSTLIST off or on with "
                                 "hook.toml's power_off_command or power_on_command")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--config", metavar="FILE", default=None, help="hook.toml (default: built-in defaults)")
        if name == "install":
            p.add_argument("--dest", metavar="DIR", default=None,
                           help="write job_submit.lua, cli_filter.lua and greenslurm-slurm.conf.snippet into DIR "
                                "(the folder of slurm.conf), and make DIR/greenslurm-failures, where job_submit.lua "
                                "keeps its unreported failures, for SlurmUser alone")
            p.add_argument("--no-cli-filter", action="store_true", help="do not install cli_filter.lua")
            p.add_argument("--unit-dir", metavar="DIR", default=None,
                           help="write greenslurm-hook.service into DIR (e.g. /etc/systemd/system)")
            p.add_argument("--service-user", metavar="USER", default="slurm",
                           help="the unit's User= and Group=: Slurm's SlurmUser (default: %(default)s)")
            p.add_argument("--greenslurm", metavar="PATH", default=None,
                           help="the greenslurm the unit runs, by its absolute path, e.g. a virtual environment's "
                                "bin/greenslurm (default: /usr/bin/env greenslurm, found on the service's PATH)")
            p.add_argument("--write-config", metavar="FILE", default=None,
                           help="write the commented hook.toml template to FILE (never over an existing file)")
            p.add_argument("--print", dest="print_what", choices=PRINTABLE, default=None,
                           help="print one file instead (default without --dest, --unit-dir or --write-config: "
                                "job_submit)")
        if name == "report":
            p.add_argument("--by", choices=REPORT_GROUPS, default="user",
                           help="sum the jobs per user, account or day (the day a job ended; default: %(default)s)")
            p.add_argument("--jobs", action="store_true", help="also list every job")
            p.add_argument("--json", metavar="FILE", default=None,
                           help="also write the report as JSON to FILE ('-': standard output, instead of the tables)")
        if name == "power":
            p.add_argument("direction", choices=("off", "on"), help="off (SuspendProgram) or on (ResumeProgram)")
            p.add_argument("hostlist", metavar="HOSTLIST", help="the nodes, as Slurm gives them (n[1-3],gpu7)")
        if name == "check":
            p.add_argument("--slurm-conf", metavar="FILE", default="/etc/slurm/slurm.conf",
                           help="slurm.conf to inspect (default: %(default)s)")
            p.add_argument("--unit", metavar="FILE", default="/etc/systemd/system/greenslurm-hook.service",
                           help="the installed systemd unit to verify (default: %(default)s)")
        p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="log what happens to stderr (-v info, -vv debug)")
        p.set_defaults(handler=run)
    return hook


def load_config(path: str | None):
    from greenslurm.slurm_plugin.config import HookConfig
    if path is None:
        config = HookConfig()
        config.check()
        return config
    return HookConfig.from_toml(path)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.hook_command == "serve":
        from greenslurm.slurm_plugin.service import serve
        return serve(load_config(args.config))
    if args.hook_command == "install":
        return run_install(args, console)
    if args.hook_command == "report":
        return run_report(args, console)
    if args.hook_command == "power":
        return run_power(args, console)
    return run_check(args, console)


def run_power(args: argparse.Namespace, console: Console) -> int:
    """Turn nodes off or on (run by slurmctld as SuspendProgram/ResumeProgram); every failure is
    one line on stderr (Slurm logs it) and exit code 1."""
    from greenslurm.slurm_plugin.power import run_power_command
    from greenslurm.traces.slurm_hostlist import expand_hostlist

    config = load_config(args.config)
    template = config.power_off_command if args.direction == "off" else config.power_on_command
    if not template.strip():
        raise InputError(f"no power_{args.direction}_command is set", path=config.path,
                         field=f"power_{args.direction}_command")
    try:
        nodes = expand_hostlist(args.hostlist)
    except ValueError as exc:
        raise InputError(f"not a host list: {exc}", path="<command line>", field="HOSTLIST") from None
    failures = run_power_command(template, nodes, config.power_command_timeout_s)
    for line in failures:
        print(f"greenslurm hook power {args.direction}: {line}", file=sys.stderr)
    return 1 if failures else 0


def _kwh(joules: float) -> str:
    return f"{joules / 3.6e6:,.3f}"


def run_report(args: argparse.Namespace, console: Console) -> int:
    import json
    import time

    from greenslurm.slurm_plugin.energy import group_runs, load_report
    from greenslurm.slurm_plugin.live_nodes import NodePower

    config = load_config(args.config)
    if not Path(config.database).is_file():
        raise InputError("no record here yet (the service writes it)", path=config.database)
    power = NodePower(config.node_idle_w, config.node_busy_w, config.gpu_idle_w, config.gpu_max_w)
    report = load_report(config.database, power, time.time(), config.off_w)
    groups = group_runs(report.runs, args.by)
    split = report.split
    summary = {"jobs": len(report.runs), "skipped": report.skipped, "start_s": report.start_s, "end_s": report.end_s,
               "cluster_kwh": report.total_j / 3.6e6, "jobs_kwh": report.jobs_j / 3.6e6,
               "renewable_kwh": None if split is None else split.renewable_j / 3.6e6,
               "grid_kwh": None if split is None else split.grid_j / 3.6e6,
               "curtailed_kwh": None if split is None else split.curtailed_j / 3.6e6,
               "renewable_share": None if split is None else split.renewable_share,
               "measured_jobs": sum(r.measured_j is not None for r in report.runs),
               "power_model": f"nodes {power.idle_w:g} W idle to {power.busy_w:g} W busy, GPUs {power.gpu_idle_w:g}"
                              f"-{power.gpu_max_w:g} W"}
    data = {"summary": summary, f"by_{args.by}": groups,
            "jobs": [dict(r.__dict__, used_j=r.used_j) for r in report.runs] if args.jobs or args.json else []}
    if args.json:
        text = json.dumps(data, indent=1, default=float) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
            return 0
        try:
            Path(args.json).write_text(text)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", path=args.json, field="--json") from None
    table = Table(title=f"energy per {args.by} ({escape(config.database)})", title_justify="left")
    for column in (args.by, "jobs", "energy kWh", "renewable kWh", "renewable share"):
        table.add_column(column, justify="left" if column == args.by else "right")
    for row in groups:
        share = "n/a" if row["renewable_share"] is None else f"{100 * row['renewable_share']:.1f}%"
        table.add_row(escape(str(row[args.by]) or "-"), f"{row['jobs']:,}", f"{row['energy_kwh']:,.3f}",
                      f"{row['renewable_kwh']:,.3f}", share)
    console.print(table)
    if args.jobs:
        jobs = Table(title="jobs", title_justify="left")
        for column in ("job", "user", "account", "energy kWh", "renewable kWh", "measured kWh"):
            jobs.add_column(column)
        for r in report.runs:
            jobs.add_row(escape(r.job_id) + (" (running)" if r.open else ""), escape(r.user), escape(r.account),
                         _kwh(r.energy_j), _kwh(r.renewable_j), "-" if r.measured_j is None else _kwh(r.measured_j))
        console.print(jobs)
    console.print(f"{len(report.runs):,} jobs; cluster {_kwh(report.total_j)} kWh over the report's span, "
                  f"jobs {_kwh(report.jobs_j)} kWh (estimates: {summary['power_model']})", markup=False)
    if split is not None:
        share = "n/a" if split.renewable_share is None else f"{100 * split.renewable_share:.1f}%"
        console.print(f"renewable {_kwh(split.renewable_j)} kWh ({share}), grid {_kwh(split.grid_j)} kWh, "
                      f"curtailed {_kwh(split.curtailed_j)} kWh (against the recorded forecast)", markup=False)
    measured = [r for r in report.runs if r.measured_j is not None]
    if measured:
        est = sum(r.energy_j for r in measured)
        got = sum(r.measured_j for r in measured)
        console.print(f"measured by Slurm for {len(measured):,} jobs: {_kwh(got)} kWh; the estimate for them "
                      f"{_kwh(est)} kWh ({100 * (est / got - 1):+.1f}%)", markup=False)
    if report.skipped:
        console.print(f"{report.skipped:,} runs skipped (on nodes the record does not know)", markup=False)
    return 0


def _command(args: argparse.Namespace) -> tuple[str, ...]:
    """The --greenslurm command as argv words: one absolute path (spaces and all), or the default
    ``/usr/bin/env greenslurm``; a relative path is an InputError (systemd runs the unit from /)."""
    from greenslurm.slurm_plugin import install as hook_install
    if args.greenslurm is None or args.greenslurm == " ".join(hook_install.UNIT_EXECUTABLE):
        return hook_install.UNIT_EXECUTABLE
    if not args.greenslurm.startswith("/"):
        raise InputError(f"{args.greenslurm!r} is not an absolute path (systemd and slurmctld run it from /): "
                         f"give the full path, e.g. {Path(args.greenslurm).absolute()}",
                         path="<command line>", field="--greenslurm")
    return (args.greenslurm,)


def _unit_options(args: argparse.Namespace) -> dict:
    from greenslurm.slurm_plugin import install as hook_install
    config_path = str(Path(args.config).resolve()) if args.config else hook_install.UNIT_CONFIG
    return {"config_path": config_path, "user": args.service_user, "executable": _command(args)}


def run_install(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.slurm_plugin import install as hook_install

    config = load_config(args.config)
    try:
        options = _unit_options(args)
        unit = hook_install.render_unit(**options)
    except ValueError as exc:
        raise InputError(str(exc), path="<command line>", field="--greenslurm/--service-user/--config") from None
    what = args.print_what or (None if args.dest or args.unit_dir or args.write_config else "job_submit")
    if what is not None:
        text = {"job_submit": lambda: hook_install.render_job_submit(config, hook_install.failures_folder(
                    Path(args.dest).resolve() if args.dest else Path(config.slurm_conf).parent if config.slurm_conf
                    else Path(hook_install.SLURM_CONF_DIR))),
                "unit": lambda: unit,
                "config": lambda: hook_install.template("hook.toml"),
                "snippet": lambda: hook_install.slurm_conf_snippet(not args.no_cli_filter)}[what]()
        console.print(text, markup=False, highlight=False, end="", soft_wrap=True)
        return 0
    written = []
    for option, action in (("--write-config", lambda: [hook_install.install_config_template(Path(args.write_config))]
                            if args.write_config else []),
                           ("--dest", lambda: hook_install.install(config, Path(args.dest), not args.no_cli_filter,
                                                                   executable=options["executable"])
                            if args.dest else []),
                           ("--unit-dir", lambda: [hook_install.install_unit(Path(args.unit_dir), **_unit_options(args))]
                            if args.unit_dir else [])):
        try:
            written += action()
        except FileExistsError as exc:
            if option == "--write-config":
                raise InputError("exists; the template is never written over a site's settings",
                                 path=args.write_config) from None
            raise InputError("exists and is not a directory", path=getattr(exc, "filename", None) or option,
                             field=option) from None
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", path=getattr(exc, "filename", None) or option,
                             field=option) from None
    for path in written:
        console.print(f"wrote {escape(str(path))}")
    if args.dest:
        console.print("add to slurm.conf (or `Include greenslurm-slurm.conf.snippet`), then `scontrol reconfigure`:\n"
                      + hook_install.slurm_conf_snippet(not args.no_cli_filter)
                      + hook_install.power_snippet(config, Path(args.dest).resolve()), markup=False, highlight=False)
    if args.dest:
        for warning in (hook_install.power_program_warnings(config, options["executable"])
                        + hook_install.failures_folder_warnings(Path(args.dest), config)):
            print(f"greenslurm hook install: warning: {warning}", file=sys.stderr)
    if args.unit_dir:
        for warning in hook_install.unit_warnings(unit, options["config_path"]):
            print(f"greenslurm hook install: warning: {warning}", file=sys.stderr)
        console.print("then: systemctl daemon-reload && systemctl enable --now greenslurm-hook", markup=False,
                      highlight=False)
    return 0


def run_check(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.slurm_plugin import install as hook_install

    config = load_config(args.config)
    checks = hook_install.check(config, Path(args.slurm_conf), unit=Path(args.unit))
    table = Table(title=f"greenslurm hook check ({escape(config.path)})", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("found", overflow="fold")
    for item in checks:
        table.add_row(LEVEL_STYLE[item.level], escape(item.name), escape(item.detail))
    console.print(table)
    fails = sum(item.level == "fail" for item in checks)
    warns = sum(item.level == "warn" for item in checks)
    console.print(f"{fails} failed, {warns} warning{'s' if warns != 1 else ''}, "
                  f"{len(checks) - fails - warns} ok")
    return 1 if fails else 0
