"""The command line's parser: a usage mistake (an unknown option, a value of the wrong type, a missing
argument) is one line ``greenslurm: error: <command line>: ...`` on stderr and exit code 2, like every
other bad input, instead of argparse's usage block followed by a differently prefixed line.  The line
says which ``--help`` to read."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
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


TWO_COLUMNS = re.compile(r"^( {2,})(\S(?:.*?\S)?)( {2,})(\S.*)$")     # "  name    what it is", indented
EXPLANATION_INDENT = 8         # a command example's explanation, on the line after it


def wrap_help_line(line: str, width: int) -> list[str]:
    """A line of a help text as written (a list, an example, a table row keeps its shape), in lines of at
    most ``width`` columns when it is longer: prose continues under its own start, a "name   text" row
    under its text, and a command example continues its command with shell's `` \\`` (it still runs
    when pasted), its explanation on the next line.

    >>> wrap_help_line("  firstfit    the lowest-numbered nodes first", 30)
    ['  firstfit    the', '              lowest-numbered', '              nodes first']
    >>> for part in wrap_help_line("  greenslurm replay log.swf --queue conservative   from the header", 34):
    ...     print(part)
      greenslurm replay log.swf \\
          --queue conservative
            from the header
    """
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    columns = TWO_COLUMNS.match(line)
    first, second = (columns.group(2), columns.group(4)) if columns else (line.strip(), "")
    if first.startswith(PROG + " "):
        command = textwrap.wrap(first, width - 2, initial_indent=" " * lead, subsequent_indent=" " * (lead + 4),
                                break_long_words=False, break_on_hyphens=False)
        command = [part + " \\" for part in command[:-1]] + command[-1:]
        return command + (textwrap.wrap(second, width, initial_indent=" " * EXPLANATION_INDENT,
                                        subsequent_indent=" " * EXPLANATION_INDENT) if second else [])
    if lead > width // 2:          # an explanation continued under its column: under its command instead
        return textwrap.wrap(line, width, initial_indent=" " * EXPLANATION_INDENT,
                             subsequent_indent=" " * EXPLANATION_INDENT)
    hanging = columns.start(4) if columns and columns.start(4) <= width // 2 else lead + (4 if columns else 0)
    return textwrap.wrap(line, width, subsequent_indent=" " * hanging, break_long_words=False,
                         break_on_hyphens=False) or [line]


class WrappingHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written, each line longer than the terminal wrapped
    (:func:`wrap_help_line`), so that ``--help`` fits 80 columns."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line + "\n" for line in wrap_help_text(text, width))

    def _format_usage(self, usage, actions, groups, prefix) -> str:
        # argparse keeps a group of exclusive options on one line, however long: break it at its " | "
        text = super()._format_usage(usage, actions, groups, prefix)
        return "\n".join(part for line in text.split("\n") for part in _break_alternatives(line, self._width))


def _break_alternatives(line: str, width: int) -> list[str]:
    """A usage line longer than ``width`` broken after the " |" of its alternatives, continued one column
    further in.

    >>> _break_alternatives("   (--a FILE | --b CSV | --c N)", 20)
    ['   (--a FILE |', '    --b CSV | --c N)']
    """
    lines = [line]
    while len(lines[-1]) > width and " | " in lines[-1][:width]:
        last = lines.pop()
        cut = last[:width].rindex(" | ") + 2
        indent = " " * (len(line) - len(line.lstrip()) + 1)
        lines += [last[:cut], indent + last[cut:].lstrip()]
    return lines


def wrap_help_text(text: str, width: int) -> list[str]:
    """The lines of a raw help text in ``width`` columns: a paragraph of unindented prose with a line
    too long is filled again as a whole (not broken line by line into ragged halves); every other line
    is wrapped on its own (:func:`wrap_help_line`).

    >>> wrap_help_text("a long line of" + chr(10) + "prose here" + chr(10) + "  row  of a list", 12)
    ['a long line', 'of prose', 'here', '  row  of a', '      list']
    """
    lines: list[str] = []
    paragraph: list[str] = []

    def prose(line: str) -> bool:
        return bool(line) and not line[0].isspace() and not line.endswith(":")

    def flush() -> None:
        if any(len(line) > width for line in paragraph):
            lines.extend(textwrap.wrap(" ".join(paragraph), width, break_long_words=False, break_on_hyphens=False))
        else:
            lines.extend(paragraph)
        paragraph.clear()

    for line in text.splitlines():
        if prose(line):
            paragraph.append(line)
            continue
        flush()
        lines.extend(wrap_help_line(line, width))
    flush()
    return lines


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (its subcommands' parsers are of the same class), and
    whose help fits the terminal: a raw description or epilog (RawDescriptionHelpFormatter) keeps its
    lines, and the long ones wrap (:class:`WrappingHelpFormatter`)."""

    def __init__(self, *args, **kwargs) -> None:
        if kwargs.get("formatter_class") is argparse.RawDescriptionHelpFormatter:
            kwargs["formatter_class"] = WrappingHelpFormatter
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        error_line(terminal(stderr=True), _message(self.prog, message))
        sys.exit(EXIT_INPUT)

    def _get_value(self, action: argparse.Action, arg_string: str):
        """An option's value converted by its type; a number written with other than ASCII digits
        refused first: int() and float() read "５" (full width) as 5, "٣" (Arabic-Indic) as 3 and
        "1_0" as 10, which the trace and config readers refuse."""
        if reads_numbers(action.type) and ("_" in arg_string or not arg_string.isascii()):
            raise argparse.ArgumentError(action, f"not a number in ASCII digits: {arg_string!r}")
        return super()._get_value(action, arg_string)


def reads_numbers(parse) -> bool:
    """Whether an option's ``type`` turns its text into a number (int, float, or one marked
    ``number``, as the command options' parsers are).

    >>> reads_numbers(int), reads_numbers(str), reads_numbers(non_negative_int)
    (True, False, True)
    """
    return parse in (int, float) or getattr(parse, "number", False)


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


non_negative_int.number = True          # its text is checked for ASCII digits (OneLineParser)
