"""The live renewable forecast: the supply series S(t) the decision service plans with.

A site gives it one of two ways (``hook.toml``), in the format of the replay's ``--renewable`` CSV
(:func:`greenslurm.clustermodel.renewable.parse_supply_csv`: ``time_s,watts`` lines, an optional
header, ``#`` comments), with times as Unix epoch seconds:

- ``supply_file``: a CSV the site refreshes (a cron job writing a temporary name and renaming it).
  It is read again whenever its modification time or size changes; its age is the time since it was
  last modified.
- ``supply_command``: a command (no shell; split like a POSIX shell would) that prints the CSV on
  its standard output.  It runs every ``supply_refresh_s``; one that runs longer than
  ``supply_timeout_s`` is killed with its whole process group; its age is the time since it last
  answered with a readable forecast.

Everything read is untrusted: a file or an output larger than :data:`MAX_FORECAST_BYTES`, not
UTF-8, or not a forecast (the error names the line and the field) keeps the forecast read before,
which keeps ageing; the failure is logged and said in ``ping``.  A forecast older than
``supply_max_age_s`` is stale, and ``supply_stale`` says what then happens: ``"grid"`` plans as
without a forecast (the replay's grid mode), ``"use"`` plans with the old forecast anyway.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import signal
import stat
import subprocess
import time
from dataclasses import dataclass

import numpy as np

from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.renewable import SupplySeries, parse_supply_csv

log = logging.getLogger("greenslurm.hook.forecast")

MAX_FORECAST_BYTES = 8 * 1024 * 1024      # a year of minutely samples is about 10 MB; hourly about 150 kB
STALE_OUTCOMES = ("grid", "use")


@dataclass(frozen=True)
class Forecast:
    """What the service knows of the supply: the last readable series (None: none yet), when it was
    produced (``produced_s``: the file's modification time, or when the command answered), where
    it came from, and the last failure since (None when the last read succeeded)."""

    series: SupplySeries | None = None
    produced_s: float | None = None
    source: str = ""
    error: str | None = None

    def age_s(self, now_s: float) -> float | None:
        """Seconds since the forecast was produced (never below 0: a file dated in the future is new).

        >>> Forecast(produced_s=100.0).age_s(160.0), Forecast().age_s(5.0), Forecast(produced_s=9.0).age_s(5.0)
        (60.0, None, 0.0)
        """
        return None if self.produced_s is None else max(0.0, now_s - self.produced_s)


def usable_supply(forecast: Forecast, now_s: float, max_age_s: float, stale: str) -> tuple[SupplySeries | None, str]:
    """The series to plan with and a note saying why (recorded with each decision).

    >>> f = Forecast(SupplySeries([0.0], [5.0]), produced_s=0.0, source="f.csv")
    >>> usable_supply(f, 60.0, 3600.0, "grid")[1]
    'forecast f.csv, 60 s old'
    >>> usable_supply(f, 7200.0, 3600.0, "grid")
    (None, 'forecast f.csv is stale (7200 s old > 3600 s): planned as without one')
    >>> usable_supply(f, 7200.0, 3600.0, "use")[1]
    'forecast f.csv is stale (7200 s old > 3600 s): used anyway'
    >>> usable_supply(Forecast(error="x"), 0.0, 60.0, "use")
    (None, 'no forecast yet (x)')
    """
    if forecast.series is None:
        return None, "no forecast yet" + (f" ({forecast.error})" if forecast.error else "")
    age = forecast.age_s(now_s)
    if age > max_age_s:
        why = f"forecast {forecast.source} is stale ({age:.0f} s old > {max_age_s:g} s)"
        if stale == "use":
            return forecast.series, why + ": used anyway"
        return None, why + ": planned as without one"
    return forecast.series, f"forecast {forecast.source}, {age:.0f} s old"


def within_horizon(series: SupplySeries, now_s: float, horizon_s: float) -> SupplySeries:
    """The part of a forecast the planner needs: from the sample in force now to ``horizon_s`` ahead
    (the last sample kept holds after it, as a series' last value does).  A year of minutely samples
    made each decision cost some 80 ms on 100 nodes; a week of them, a few.

    >>> s = SupplySeries([0.0, 10.0, 20.0, 30.0, 40.0], [1.0, 2.0, 3.0, 4.0, 5.0])
    >>> within_horizon(s, 15.0, 10.0).times_s.tolist()      # in force at 15: the sample at 10
    [10.0, 20.0]
    >>> within_horizon(s, -5.0, 100.0).times_s.size
    5
    """
    first = max(int(np.searchsorted(series.times_s, now_s, side="right")) - 1, 0)
    last = int(np.searchsorted(series.times_s, now_s + horizon_s, side="right"))
    if first == 0 and last >= series.times_s.size:
        return series
    return SupplySeries(series.times_s[first:max(last, first + 1)], series.watts[first:max(last, first + 1)],
                        series.name)


def parse_forecast(data: bytes, where: str, scale: float = 1.0) -> SupplySeries:
    """A forecast's bytes as a supply series (InputError naming ``where``, the line and the field).

    >>> parse_forecast(b"time_s,watts\\n1800000000,0\\n1800003600,2500\\n", "f.csv").watts.tolist()
    [0.0, 2500.0]
    >>> parse_forecast(b"1,\\xff\\n", "f.csv")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: f.csv:1: field watts: not UTF-8 (byte 0xff)
    """
    if len(data) > MAX_FORECAST_BYTES:
        raise InputError(f"larger than {MAX_FORECAST_BYTES:,} bytes", path=where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        column = data[:exc.start].rsplit(b"\n", 1)[-1].count(b",")
        raise InputError(f"not UTF-8 (byte 0x{data[exc.start]:02x})", path=where, line=line,
                         field=("time_s", "watts")[min(column, 1)]) from None
    if "\0" in text:
        raise InputError("holds NUL bytes", path=where)
    series = parse_supply_csv(text, path=where)
    return series.scaled(scale) if scale != 1.0 else series


def read_file(path: str, max_bytes: int = MAX_FORECAST_BYTES) -> tuple[bytes, float]:
    """A forecast file's bytes and modification time; OSError or InputError when it is not a
    readable regular file (a FIFO would block, a device never ends) or is too large."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file", path=path)
        if st.st_size > max_bytes:
            raise InputError(f"larger than {max_bytes:,} bytes", path=path)
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise InputError(f"larger than {max_bytes:,} bytes", path=path)
            chunks.append(chunk)
        return b"".join(chunks), st.st_mtime
    finally:
        os.close(fd)


def run_command(argv: list[str], timeout_s: float, max_bytes: int = MAX_FORECAST_BYTES) -> bytes:
    """The standard output of ``argv`` (InputError when it fails, prints more than ``max_bytes`` or
    runs longer than ``timeout_s``: then its whole process group is killed, so a command that hangs,
    or forks a child that does, never holds the service)."""
    what = shlex.join(argv)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        raise InputError(f"cannot run: {exc.strerror or exc}", path=what) from None
    deadline = time.monotonic() + timeout_s
    out: list[bytes] = []
    err = b""
    size = 0
    streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
    try:
        while streams:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InputError(f"gave no complete answer within {timeout_s:g} s; killed", path=what)
            ready, _, _ = select.select(list(streams), [], [], left)
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    del streams[fd]
                elif streams[fd] == "out":
                    size += len(chunk)
                    if size > max_bytes:
                        raise InputError(f"printed more than {max_bytes:,} bytes; killed", path=what)
                    out.append(chunk)
                elif len(err) < 4096:
                    err += chunk
        try:
            code = proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            raise InputError(f"did not exit within {timeout_s:g} s; killed", path=what) from None
        if code != 0:
            detail = err.decode("utf-8", "replace").strip().splitlines()
            raise InputError(f"exited with {code}" + (f": {detail[-1][:200]!r}" if detail else ""), path=what)
        return b"".join(out)
    finally:
        if proc.poll() is None or streams:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


class ForecastSource:
    """Reads the forecast the settings name; :meth:`refresh` is blocking (the service runs it in a
    worker thread) and never raises for a bad forecast: it returns the forecast to use now."""

    def __init__(self, file: str = "", command: str = "", *, timeout_s: float = 10.0, refresh_s: float = 300.0,
                 scale: float = 1.0) -> None:
        self.file = file
        self.argv = shlex.split(command) if command else []
        self.timeout_s = timeout_s
        self.refresh_s = refresh_s
        self.scale = scale
        self.forecast = Forecast(source=file or (shlex.join(self.argv) if self.argv else ""))
        self._file_key: tuple | None = None
        self._last_run_s: float | None = None

    @property
    def configured(self) -> bool:
        return bool(self.file or self.argv)

    def refresh(self, now_s: float | None = None) -> Forecast:
        now_s = time.time() if now_s is None else now_s
        try:
            if self.file:
                self._refresh_file()
            elif self.argv:
                self._refresh_command(now_s)
        except (OSError, InputError) as exc:
            message = str(exc) if isinstance(exc, InputError) else f"{self.file}: {exc.strerror or exc}"
            if message != self.forecast.error:
                log.warning("forecast: %s; %s", message,
                            "keeping the one read before" if self.forecast.series is not None else "none yet")
            self.forecast = Forecast(self.forecast.series, self.forecast.produced_s, self.forecast.source, message)
        return self.forecast

    def _refresh_file(self) -> None:
        st = os.stat(self.file)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self._file_key and self.forecast.error is None:
            return
        data, mtime = read_file(self.file)
        self._file_key = key
        series = parse_forecast(data, self.file, self.scale)
        self.forecast = Forecast(series, mtime, self.file, None)
        log.info("forecast: read %s (%d samples)", self.file, series.times_s.size)

    def _refresh_command(self, now_s: float) -> None:
        if self._last_run_s is not None and now_s - self._last_run_s < self.refresh_s:
            return
        self._last_run_s = now_s
        what = shlex.join(self.argv)
        series = parse_forecast(run_command(self.argv, self.timeout_s), what, self.scale)
        self.forecast = Forecast(series, time.time(), what, None)
        log.info("forecast: %s gave %d samples", what, series.times_s.size)
