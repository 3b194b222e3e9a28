"""What every command shows on the terminal: the error line, logging through rich, the progress bar
and writing a text file or stdout.  Imported by the CLI and by every ``cmd_*`` module (never the other
way round)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from greenslurm.clustermodel import InputError

if TYPE_CHECKING:                # rich loads with the first line shown, not with the help
    from rich.console import Console

PROG = "greenslurm"
EXIT_OK, EXIT_INPUT = 0, 2
# Show a progress bar (on a terminal) when a replay has at least this many jobs.
PROGRESS_MIN_JOBS = 1000
# Report width when stdout is not a terminal (rich would use 80).
PIPE_WIDTH = 110
_HANDLER_TAG = "_greenslurm_cli"


class NoTrailingSpaces:
    r"""A text stream that drops the spaces before each line's end (rich pads every line of a table or
    panel to its width; in a file or pipe they are noise).  Spaces are held until the next character
    shows whether they end a line.

    >>> import io
    >>> out = io.StringIO(); stream = NoTrailingSpaces(out)
    >>> _ = stream.write("a  │ b   "); _ = stream.write("  \nc "); _ = stream.write(" d\n"); out.getvalue()
    'a  │ b\nc  d\n'
    """

    def __init__(self, stream, name: str = "standard output") -> None:
        self._stream = stream
        self._held = ""
        self.name = name

    def write(self, text: str) -> int:
        text = self._held + text
        lines = text.split("\n")
        last = lines.pop()
        kept = last.rstrip(" ")
        self._held = last[len(kept):]
        with self._failing():
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines) + kept)
        return len(text)

    def flush(self) -> None:
        with self._failing():
            self._stream.flush()

    @contextlib.contextmanager
    def _failing(self) -> Iterator[None]:
        """A write that fails (a full disk behind the stream: ``> /dev/full``) as one line naming the
        stream; what is still buffered goes to the null device, so that the interpreter's last flush
        does not fail again.  A closed pipe is rich's to handle (it exits quietly)."""
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            with contextlib.suppress(Exception):
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, self._stream.fileno())
                os.close(quiet)
            raise InputError(f"cannot write: {exc.strerror or exc}", path=self.name) from None

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str):          # encoding, fileno, ...: the wrapped stream's
        return getattr(self._stream, name)


def setup_logging(verbose: int, console: Console) -> None:
    """One rich handler on the root logger (replacing an earlier one of ours, leaving others)."""
    from rich.logging import RichHandler
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _HANDLER_TAG, False):
            root.removeHandler(handler)
    if console.is_terminal:
        handler: logging.Handler = RichHandler(console=console, show_time=False, show_path=verbose > 1,
                                               markup=False, rich_tracebacks=True)
    else:       # piped or in a file: one plain line per record, never broken at a width
        handler = logging.StreamHandler(console.file)
        handler.setFormatter(logging.Formatter("%(levelname)-8s %(message)s"
                                               + (" (%(filename)s:%(lineno)d)" if verbose > 1 else "")))
    setattr(handler, _HANDLER_TAG, True)
    root.addHandler(handler)
    root.setLevel(logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG)


def terminal(stderr: bool = False) -> Console:
    """A rich console for greenslurm's output.  Emoji codes are off: a name a user controls (a trace's
    file name, its machine, a user or partition) printed as ``:fire:`` stays ``:fire:``, as written.
    Rich's highlighter is off: it would colour the digits and brackets inside those names (a trace's
    ``KTH-SP2-1996-2.1-cln`` in a title), which are text, not figures; styles are given where meant."""
    from rich.console import Console
    return Console(stderr=stderr, emoji=False, highlight=False)


def error_line(console: Console, message: str) -> None:
    console.print(f"{PROG}: error: {message}", style="bold red", markup=False, highlight=False,
                  soft_wrap=True)


def warning_line(message: str, console: Console | None = None) -> None:
    """One dim yellow line ``greenslurm: warning: ...`` on stderr (a deprecated name, ...)."""
    if console is None:
        console = terminal(stderr=True)
    console.print(f"{PROG}: warning: {message}", style="dim yellow", markup=False, highlight=False,
                  soft_wrap=True)


@contextlib.contextmanager
def progress_bar(console: Console, total: int | None, enabled: bool, *, doing: str = "replaying",
                 unit: str = "jobs", transient: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A rich bar ``doing [####] done/total unit``; yields ``update(done, total)`` (None when disabled)."""
    if not enabled:
        yield None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    with Progress(TextColumn(doing), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=transient) as progress:
        task = progress.add_task(doing, total=total)

        def update(done: int, of: int) -> None:
            progress.update(task, completed=done, total=of)

        yield update


def each_with_progress(console: Console, items, enabled: bool, *, doing: str, unit: str) -> Iterator:
    """The items one by one, a bar counting them (the replays of a comparison, ...)."""
    items = list(items)
    with progress_bar(console, len(items), enabled, doing=doing, unit=unit) as update:
        for done, item in enumerate(items, start=1):
            yield item
            if update is not None:
                update(done, len(items))


def showing_progress(console: Console, no_progress: bool) -> bool:
    """A bar only on a terminal, and never with ``--no-progress``."""
    return not no_progress and console.is_terminal


@contextlib.contextmanager
def spinner(console: Console, text: str, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A rich status line (work without a known total: reading a trace, drawing figures); yields
    ``update(text)``, a no-op when disabled."""
    if not enabled:
        yield lambda _text: None
        return
    with console.status(text) as status:
        yield lambda new: status.update(new)


def printable(text: str) -> str:
    r"""``text`` with the bytes of a file name that are not UTF-8 shown as ``\xNN`` (Python keeps them as
    lone surrogates, which a strict UTF-8 terminal refuses to print).

    >>> printable("raw\udcffname.swf")
    'raw\\xffname.swf'
    """
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def write_text(path: str, text: str, stdout: Console) -> None:
    """``text`` into ``path`` (``-``: stdout); a failure is an InputError naming the path."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", path=path) from None
    from rich.markup import escape
    stdout.print(f"wrote {escape(printable(path))}", style="dim")
