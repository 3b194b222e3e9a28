"""Files written beside the rest of the work: by a child process forked for them, or here.

replay --out writes jobs.csv and jobs.parquet in a child process forked before the trace is read: the
child loads pyarrow (and readies its Parquet writer) while this process reads and replays, then
waits for the jobs table; this process hands it over (pickled into an anonymous in-memory file, a
few milliseconds) and goes on with the report, power.csv and the summary while the child writes
both jobs files from the same cells; then it waits for the child.  On a machine with a free core,
loading pyarrow and writing the jobs files then cost little wall time beyond the report.

The files are written under temporary names in the same folder and renamed once the child says they
are whole (it says so after closing them and before its exit, whose taking down of its memory this
process does not wait for: the child is reaped later, at the latest by this process's exit handlers),
so a child that fails or is killed (``kill -9``) leaves no file that reads as whole: the temporary
files and any earlier files of the names are removed, and :meth:`ChildWriting.wait` raises the child's
error (an ``OSError`` with its errno, or an error of the kinds named) or :class:`ChildFailed` with
one line.  The child never returns into this program: it ends with ``os._exit`` (no atexit
handlers, no buffers flushed twice), and its standard output and error go to the null device (the
command's output, e.g. ``--json -``, is the command's alone, and a warning is said once, by the
command).  When this process gives up (an error, an interrupt) or dies, the child finds its input
closed and exits without writing; when it dies while the child writes, the child removes what it
wrote (no one is left to rename it).

``GREENSLURM_OUT_PROCESS`` chooses: ``auto`` (the default: a child where ``os.fork`` exists, this
process may use more than one processor and runs no other thread, e.g. a progress display, and the
processes runnable now besides it leave a processor free for each of the two: with none free they
take turns, and the child costs more than it saves), ``child`` (the same without the load's say) or ``off`` (written
here, when :meth:`wait` is called).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from greenslurm.clustermodel.errors import InputError

log = logging.getLogger(__name__)
# json, signal, tempfile and traceback are loaded where a failure, a cancel or a system without
# memfd_create needs them, not with the module: the module is loaded before the trace is read, on the
# path the child's writing waits for (json and signal, which replay without --out never loads, were
# about 8 M instructions of it with outputs.py's json)

ENV = "GREENSLURM_OUT_PROCESS"
CHOICES = ("auto", "child", "off")
Writer = Callable[[list[Path], Any], None]  # writes the whole files at the paths it is given, from its input


class ChildFailed(RuntimeError):
    """The child writing a file was killed, or failed with an error of no kind the caller named."""


class FileInWriting(Protocol):
    paths: tuple[Path, ...]

    def send(self, payload: Any) -> None:
        """Hand over the writer's input; the writing may start."""

    def wait(self) -> None:
        """Return once the files are whole at ``paths``; raise the writer's error otherwise (no file left)."""

    def cancel(self) -> None:
        """Stop the writing and remove what was written (a no-op once :meth:`wait` returned)."""


def part_path(path: Path) -> Path:
    """The temporary name a file is written under until it is whole: hidden, in the same folder (a
    rename within one file system is atomic), with this process's id.

    >>> part_path(Path("out/jobs.parquet")).name == f".jobs.parquet.{os.getpid()}.part"
    True
    """
    return path.with_name(f".{path.name}.{os.getpid()}.part")


def _finish(parts: Iterable[Path], paths: Iterable[Path], whole: bool) -> None:
    """Rename each temporary file to its path when ``whole``; else remove them and any earlier file
    of the paths (never a folder of that name).  A rename that fails (a folder holds the name)
    removes the temporary files not yet renamed and raises."""
    pairs = list(zip(parts, paths))
    if whole:
        for done, (part, path) in enumerate(pairs):
            try:
                os.replace(part, path)
            except BaseException:
                for left, _ in pairs[done:]:
                    with suppress(FileNotFoundError):
                        os.unlink(left)
                raise
        return
    for part, path in pairs:
        for stale in (part, path):
            with suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(stale)


def _named(paths: Iterable[Path]) -> str:
    """The files' names for a message: ``jobs.csv and jobs.parquet``."""
    return " and ".join(path.name for path in paths)


class WrittenHere:
    """The files written in this process when :meth:`wait` is called."""

    def __init__(self, paths: Iterable[Path], write: Writer) -> None:
        self.paths, self._write, self._payload, self._done = tuple(paths), write, None, False

    def send(self, payload: Any) -> None:
        self._payload = payload

    def wait(self) -> None:
        if self._done:
            return
        self._done = True
        parts = [part_path(path) for path in self.paths]
        try:
            self._write(parts, self._payload)
        except BaseException:
            _finish(parts, self.paths, whole=False)
            raise
        _finish(parts, self.paths, whole=True)

    def cancel(self) -> None:
        self._done = True


class ChildWriting:
    """The files being written under the names ``parts`` by the child process ``pid``: it gets its
    input through ``payload`` (a file both processes hold) once ``go`` (a pipe) says so, and reports
    a failure on ``report`` (a pipe)."""

    def __init__(self, paths: tuple[Path, ...], parts: list[Path], pid: int, go: int, payload: int, report: int,
                 errors: Iterable[type[BaseException]], packed: Callable[[Any], Any] = lambda payload: payload
                 ) -> None:
        self.paths, self.parts, self.pid, self._packed = paths, parts, pid, packed
        self._go, self._payload, self._report = go, payload, report
        self._errors = {error.__name__: error for error in errors}
        self._done = False

    def send(self, payload: Any) -> None:
        """Hand the child its input (pickled) and let it write, into the folder made now if need be
        (once: a later call does nothing)."""
        if self._go is None:
            return
        self.paths[0].parent.mkdir(parents=True, exist_ok=True)
        with open(self._payload, "wb", closefd=False) as handle:
            pickle.dump(self._packed(payload), handle, protocol=pickle.HIGHEST_PROTOCOL)
        with suppress(BrokenPipeError):             # the child is gone (killed): wait() says how
            os.write(self._go, b"g")
        self._close_inputs()

    def wait(self) -> None:
        """Return once the child said its files are whole (:data:`WRITTEN`, sent after it closed
        them and before its exit, so that this process does not wait while the system takes down the
        child's memory: it is reaped later, :func:`_reap_later`), renamed into place; else wait for
        its exit and raise its error (no file left)."""
        if self._done:
            return
        self._close_inputs()                        # never sent: the child exits without writing
        try:
            report = _read_all(self._report)
            written = report == WRITTEN and all(part.exists() for part in self.parts)
            status = None if written else os.waitpid(self.pid, 0)[1]
        except BaseException:                       # interrupted (Ctrl-C) while waiting: the child is
            self.cancel()                           # killed, reaped and its part file removed
            raise
        self._done = True
        self._close_report()
        if written:
            _reap_later(self.pid)                   # (first: a rename that fails raises)
            _finish(self.parts, self.paths, whole=True)
            return
        whole = (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and report in (b"", WRITTEN)
                 and all(part.exists() for part in self.parts))
        _finish(self.parts, self.paths, whole)
        if not whole:
            raise self._error(status, report if report != WRITTEN else b"")

    def cancel(self) -> None:
        if self._done:
            return
        self._done = True
        import signal                               # (loaded when needed: see the imports)
        with suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self._close_inputs()
        self._close_report()
        with suppress(ChildProcessError):           # (reaped already by an interrupted wait)
            os.waitpid(self.pid, 0)
        _finish(self.parts, self.paths, whole=False)

    def _close_report(self) -> None:
        if self._report is not None:
            os.close(self._report)
            self._report = None

    def _close_inputs(self) -> None:
        for name in ("_go", "_payload"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def _error(self, status: int, report: bytes) -> BaseException:
        """The child's error as this process raises it."""
        import json
        import signal
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
            return ChildFailed(f"the process writing {_named(self.paths)} was killed by signal {number} ({name})")
        if not report:
            return ChildFailed(f"the process writing {_named(self.paths)} exited with code "
                               f"{os.WEXITSTATUS(status)} without writing it")
        failure = json.loads(report)
        kind, message = failure["kind"], failure["message"]
        log.debug("the process writing %s failed:\n%s", _named(self.paths), failure["traceback"])
        if failure.get("errno") is not None:
            return OSError(failure["errno"], failure["strerror"])
        if kind == "KeyboardInterrupt":
            return KeyboardInterrupt()
        if kind in self._errors:
            return self._errors[kind](message)
        return ChildFailed(f"writing {_named(self.paths)} failed: {kind}: {message}")


WRITTEN = b"written\n"      # what a child sends once its files are whole (a failure sends JSON)
_UNREAPED: set[int] = set()  # children that said WRITTEN and may not have exited yet


def _reap_later(pid: int) -> None:
    """Reap child ``pid`` (its files whole) once it has exited: now if it has, else at the next
    :func:`start_child` or when this process ends (its exit handlers: so that a parent's count of
    the CPU time of its children, as ``time`` shows, still holds the child's)."""
    _UNREAPED.add(pid)
    reap_finished()


def reap_finished() -> None:
    """Reap the children that said their files are whole and have exited since, without waiting for
    the others (still exiting: the system takes down their memory)."""
    for pid in list(_UNREAPED):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue                            # still exiting
        except ChildProcessError:                   # reaped already (by another waiter)
            pass
        _UNREAPED.discard(pid)


def _reap_at_exit() -> None:
    """Wait for the children left (see :func:`_reap_later`); an interrupt leaves them to the system."""
    try:
        for pid in list(_UNREAPED):
            with suppress(ChildProcessError):
                os.waitpid(pid, 0)
            _UNREAPED.discard(pid)
    except KeyboardInterrupt:
        pass


atexit.register(_reap_at_exit)                      # (a no-op when no child is left)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _failure_report(exc: BaseException) -> bytes:
    """What the child sends when its writer raises: the error's kind, text, errno and strerror (an
    ``OSError``) and the traceback (for ``-vv``).

    >>> import json
    >>> json.loads(_failure_report(OSError(28, "No space left on device")))["strerror"]
    'No space left on device'
    """
    import json
    import traceback
    return json.dumps({"kind": type(exc).__name__, "message": str(exc),
                       "errno": getattr(exc, "errno", None) if isinstance(exc, OSError) else None,
                       "strerror": getattr(exc, "strerror", None) if isinstance(exc, OSError) else None,
                       "traceback": "".join(traceback.format_exception(exc))}).encode("utf-8")


def chosen_mode() -> str:
    """``auto``, ``child`` or ``off``, from ``GREENSLURM_OUT_PROCESS``."""
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise InputError(f"{choice!r} is not a choice; choose from {', '.join(CHOICES)}", path="environment",
                         field=ENV)
    return choice


def child_possible() -> bool:
    """Whether a file is written by a child process: ``GREENSLURM_OUT_PROCESS`` is not ``off``,
    ``os.fork`` exists, this process may run on more than one processor (on one, the child would only
    take turns with it), and it runs no other thread (a fork copies only the calling thread, and
    another one, a progress display, could hold a lock the child then waits on forever); with
    ``auto``, also the processes runnable now besides this one leave two processors free
    (:func:`free_processors`, :func:`others_runnable`): one for this process and one for the child."""
    mode = chosen_mode()
    if mode == "off" or not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    usable = usable_processors()
    if usable < 2:
        return False
    if mode == "child":
        return True
    others = others_runnable()
    return others is None or free_processors(others, usable) >= 2


def free_processors(others: float, usable: int) -> int:
    """The processors no other runnable process holds: the ``usable`` ones less ``others``, the
    processes runnable besides this one (a count, or an average rounded to the nearest whole one), at
    least 0.

    >>> free_processors(0.3, 2), free_processors(0.6, 2), free_processors(3.7, 2), free_processors(1.2, 8)
    (2, 1, 0, 7)
    """
    return max(usable - round(others), 0)


LOADAVG = "/proc/loadavg"


def others_runnable(loadavg: str | None = None) -> float | None:
    """The processes runnable besides this one: from the system's count of runnable tasks now (the
    fourth field of ``/proc/loadavg``, ``running/total``, this process among the running), else its
    load over the last minute, else None (no way to tell).  The count of now, not the load: the
    load averages the last minute, so it counts this command's own earlier runs (a benchmark's, a
    script's loop) as another process's, and says 0.8 on a machine whose other processor is free.
    ``loadavg``: that file's text (read when None).

    >>> others_runnable("0.80 0.61 0.40 1/384 1234"), others_runnable("13.66 12.71 9.57 17/384 19609")
    (0, 16)
    """
    if loadavg is None:
        try:
            with open(LOADAVG, encoding="ascii") as handle:
                loadavg = handle.read()
        except OSError:                            # no /proc (macOS, the BSDs)
            loadavg = ""
    try:
        return max(int(loadavg.split()[3].split("/")[0]) - 1, 0)
    except (IndexError, ValueError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def usable_processors() -> int:
    """The processors this process may run on (its affinity, where the system tells it).

    >>> usable_processors() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def start_child(paths: Iterable[Path], write: Writer, prepare: Callable[[], None] = lambda: None,
                errors: Iterable[type[BaseException]] = (), packed: Callable[[Any], Any] = lambda payload: payload
                ) -> ChildWriting:
    """Fork a child that runs ``prepare()`` (loads what the writer needs), waits for its input
    (:meth:`ChildWriting.send`: ``packed(input)`` is what is pickled, for a form cheaper to pickle;
    ``write`` gets it as it was packed) and writes ``paths`` by ``write(parts, packed input)`` under temporary names
    (see the module; :func:`child_possible` says when to fork).  ``errors``: the kinds of error a
    failing child's error is raised as (by class name); an ``OSError`` always is."""
    paths = tuple(paths)
    reap_finished()
    for stream in (sys.stdout, sys.stderr):         # nothing buffered for the child to inherit
        with suppress(Exception):
            stream.flush()
    parts = [part_path(path) for path in paths]     # named by this process, the one that renames them
    if hasattr(os, "memfd_create"):
        payload = os.memfd_create("greenslurm-out", os.MFD_CLOEXEC)
    else:
        import tempfile
        payload = os.dup(tempfile.TemporaryFile().fileno())
    go_out, go_in = os.pipe()
    report_out, report_in = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:                                    # the child: write, report, and never return
        status = 1
        try:
            os.close(go_in)
            os.close(report_out)
            quiet = os.open(os.devnull, os.O_WRONLY)    # what the command says, it says once: the child
            os.dup2(quiet, 1)                           # speaks only through the report pipe (its warnings,
            os.dup2(quiet, 2)                           # e.g. a missing compiled library, are the command's)
            try:
                prepare()
                if os.read(go_out, 1):             # nothing: this process gave up (or died)
                    with open(payload, "rb", closefd=False) as handle:
                        handle.seek(0)             # (this process's writing moved the shared offset)
                        handed = pickle.load(handle)
                    os.close(payload)              # its memory goes back before the writing takes more
                    write(parts, handed)
                    if os.getppid() != parent:     # this process died (kill -9) while the child wrote:
                        _finish(parts, paths, whole=False)  # no one renames the files; none is left
                        os._exit(1)
                    os.write(report_in, WRITTEN)   # whole: said now, not when the exit closes the pipe
                    os.close(report_in)            # (the system takes down the child's memory first)
                status = 0
            except BaseException as exc:       # noqa: BLE001 (every failure goes to the parent)
                report = memoryview(_failure_report(exc))
                while report:
                    report = report[os.write(report_in, report):]
        finally:
            os._exit(status)
    os.close(go_out)
    os.close(report_in)
    return ChildWriting(paths, parts, pid, go_in, payload, report_out, errors, packed)
