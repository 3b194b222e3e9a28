"""The command line's parser: a usage mistake (an unknown option, a value of the wrong type, a missing
argument) is one line ``greenslurm: error: <command line>: ...`` on stderr and exit code 2, like every
other bad input, instead of argparse's usage block followed by a differently prefixed line.  The line
says which ``--help`` to read."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from greenslurm.console import EXIT_INPUT, PROG, error_line, terminal


def usage_error_line(prog: str, message: str) -> str:
    """The one line for argparse's ``message`` in the (sub)command ``prog``.

    >>> usage_error_line("greenslurm replay", "argument --seed: invalid int value: 'x'")
    "greenslurm: error: <command line>: argument --seed: invalid int value: 'x' (see greenslurm replay --help)"
    """
    flat = " ".join(message.split())           # argparse may wrap a long choice list over lines
    return f"{PROG}: error: <command line>: {flat} (see {prog} --help)"


def _message(prog: str, message: str) -> str:
    return usage_error_line(prog, message).removeprefix(f"{PROG}: error: ")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (its subcommands' parsers are of the same class)."""

    def error(self, message: str) -> NoReturn:
        error_line(terminal(stderr=True), _message(self.prog, message))
        sys.exit(EXIT_INPUT)


def non_negative_int(text: str) -> int:
    """An option's whole number >= 0 (a seed, a count where 0 means none).

    >>> non_negative_int("0")
    0
    >>> non_negative_int("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a whole number >= 0, not -1
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {text}")
    return value
