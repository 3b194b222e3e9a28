"""Write docs/cli-reference.md from the command-line parser itself, so the reference cannot drift.

    python scripts/cli_reference.py            # rewrite docs/cli-reference.md
    python scripts/cli_reference.py --check    # exit 1 when the committed file differs

Every command and subcommand of ``greenslurm`` gets its usage line, its description, a table of its
options (names, value, default, help) and its epilog (examples, formats) verbatim.  Options hidden from
``--help`` (deprecated aliases) are left out here too.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "cli-reference.md"
HEADER = """\
# Command-line reference

Generated from the parser by `python scripts/cli_reference.py`; the tests check that it is current.
The guides explain the options by task: [command line](cli.md), [user guide](user-guide.md).
"""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:                    # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(f"`{flag}`" for flag in action.option_strings)
        else:
            name = f"`{action.metavar or action.dest}`"
        if action.nargs == 0:
            value = ""
        elif action.choices is not None:
            value = "`" + "\\|".join(str(c) for c in action.choices) + "`"
        else:
            metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
            value = f"`{metavar}`" + (" ..." if action.nargs in ("+", "*") else "")
        default = action.default
        shown_default = ("" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0
                         else f"`{' '.join(map(str, default)) if isinstance(default, list) else default}`")
        # the names argparse fills in a help text (%(choices)s as argparse joins them)
        names = {"default": default, "prog": parser.prog,
                 "choices": ", ".join(map(str, action.choices)) if action.choices is not None else ""}
        help_text = (action.help or "") % names if action.help else ""
        rows.append(f"| {name} | {value} | {shown_default} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| option | value | default | meaning |", "|---|---|---|---|", *rows, ""]


def _section(parser: argparse.ArgumentParser, title: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} `{title}`", ""]
    usage = " ".join(parser.format_usage().replace("usage: ", "", 1).split())
    lines += ["```text", usage, "```", ""]
    if parser.description:
        lines += [" ".join(parser.description.split()), ""]
    lines += _options_table(parser)
    if parser.epilog:
        lines += ["```text", parser.epilog.rstrip(), "```", ""]
    for name, sub in _subcommands(parser):
        lines += _section(sub, f"{title} {name}", min(depth + 1, 4))
    return lines


def render() -> str:
    os.environ["COLUMNS"] = "100"                     # usage lines wrapped the same on every terminal
    from greenslurm.cli import build_parser
    parser = build_parser()
    lines = [HEADER]
    lines += ["| command | what it does |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                text = (choice.help or "") % {}           # argparse's help strings escape % as %%
                lines.append(f"| [`{choice.dest}`](#greenslurm-{choice.dest}) | {_cell(text)} |")
    lines.append("")
    lines += _section(parser, "greenslurm", 2)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = REFERENCE.read_text(encoding="utf-8") if REFERENCE.exists() else ""
        if current != text:
            print(f"{REFERENCE} is out of date: run python scripts/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    REFERENCE.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
