"""``greenslurm hook``: the live Slurm job-submit hook (serve, install, check)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from greenslurm.clustermodel import InputError

log = logging.getLogger("greenslurm")

EPILOG = """\
examples:
  greenslurm hook serve --config /etc/greenslurm/hook.toml        run the decision service
  greenslurm hook install --config hook.toml --dest /etc/slurm      write job_submit.lua, cli_filter.lua
  greenslurm hook check --config hook.toml --slurm-conf /etc/slurm/slurm.conf

See docs/hook.md."""


def add_parser(commands) -> argparse.ArgumentParser:
    hook = commands.add_parser("hook", help="the live Slurm job_submit hook: serve, install, check",
                               description="Decide at sbatch time on a real Slurm cluster with the same acceptance\n"
                                           "and allocation policies as the replay.",
                               epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = hook.add_subparsers(dest="hook_command", metavar="ACTION")
    sub.required = True
    for name, text in (("serve", "run the decision service on its UNIX socket"),
                       ("install", "render job_submit.lua (and cli_filter.lua) and the slurm.conf lines"),
                       ("check", "say whether the hook is wired: slurm.conf, Lua files, lua-socket, socket, service")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--config", metavar="FILE", default=None, help="hook.toml (default: built-in defaults)")
        if name == "install":
            p.add_argument("--dest", metavar="DIR", default=None,
                           help="write the files into DIR (the folder of slurm.conf); default: print job_submit.lua")
            p.add_argument("--no-cli-filter", action="store_true", help="do not install cli_filter.lua")
        if name == "check":
            p.add_argument("--slurm-conf", metavar="FILE", default="/etc/slurm/slurm.conf",
                           help="slurm.conf to inspect (default: %(default)s)")
        p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="log what happens to stderr (-v info, -vv debug)")
        p.set_defaults(handler=run)
    return hook


def load_config(path: str | None):
    from greenslurm.slurm_plugin.service import HookConfig
    if path is None:
        config = HookConfig()
        config.check()
        return config
    return HookConfig.from_toml(path)


def run(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.slurm_plugin import install as hook_install
    from greenslurm.slurm_plugin.service import serve

    config = load_config(args.config)
    if args.hook_command == "serve":
        return serve(config)
    if args.hook_command == "install":
        if args.dest is None:
            console.print(hook_install.render_job_submit(config), markup=False, highlight=False, end="")
            return 0
        try:
            written = hook_install.install(config, Path(args.dest), with_cli_filter=not args.no_cli_filter)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", path=args.dest) from None
        for path in written:
            console.print(f"wrote {escape(str(path))}")
        console.print("add to slurm.conf (then `scontrol reconfigure`):\n"
                      + hook_install.slurm_conf_snippet(not args.no_cli_filter), markup=False, highlight=False)
        return 0
    checks = hook_install.check(config, Path(args.slurm_conf))
    for item in checks:
        mark = "[green]ok[/]  " if item.ok else "[red]FAIL[/]"
        console.print(f"{mark} {escape(item.name)}: {escape(item.detail)}")
    required = [c for c in checks if "optional" not in c.name]
    return 0 if all(c.ok for c in required) else 1
