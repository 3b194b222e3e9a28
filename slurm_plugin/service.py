"""The decision service behind ``job_submit.lua`` (``greenslurm hook serve --config hook.toml``).

One asyncio process listens on a UNIX socket.  Each connection sends JSON lines (see
:mod:`greenslurm.slurm_plugin.protocol`); each line gets one JSON answer line.  A request larger than
:data:`~greenslurm.slurm_plugin.protocol.MAX_REQUEST_BYTES` or not valid gets an ``error`` answer (the hook
then fails open or closed as configured) and never stops the service.

The cluster view (:mod:`greenslurm.slurm_plugin.view`) is rebuilt from Slurm every ``sync_interval_s`` in a
worker thread, then swapped in; decisions taken while it was being built are planned again on the
new view.  Every decision goes to the SQLite record.  Pending jobs whose deadline the hook never
saw (submitted without the shipped cli_filter and without ``#SBATCH --deadline``) are reconciled
from ``squeue --json`` after each sync: annotated, held or cancelled, with a comment saying why.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import pwd
import time
import tomllib
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path

from greenslurm.acceptance.registry import build as build_acceptance
from greenslurm.allocation.placement import parse_allocation
from greenslurm.clustermodel import InputError
from greenslurm.slurm_plugin.backend import BACKENDS, BackendError, PendingDeadline
from greenslurm.slurm_plugin.protocol import (MAX_REQUEST_BYTES, ProtocolError, encode, parse_request,
                                   submission_from_request)
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.view import LiveView, Snapshot

log = logging.getLogger("greenslurm.hook")

RECONCILE_ACTIONS = ("none", "annotate", "hold", "cancel")
TAG = "greenslurm#"
DEADLINE_CHECKED = "deadline checked:"


@dataclass
class HookConfig:
    socket: str = "/run/greenslurm/hook.sock"
    socket_owner: str = "slurm"          # SlurmUser; the socket is chowned to it
    socket_group: str = ""               # optional group allowed to connect (mode becomes 0660)
    database: str = "/var/lib/greenslurm/hook.sqlite"
    shadow: bool = False
    acceptance: str = "greedy"
    allocation: str = "bestfit"
    min_slack: float | None = None
    share: float | None = None
    default_time_limit_s: float = 3600.0
    sync_interval_s: float = 10.0
    backend: str = "cli"
    slurm_conf: str = ""
    state_dir: str = ""                  # the files backend: folder with sinfo.json and squeue.json
    annotate_comment: bool = True
    set_required_nodes: bool = False
    set_begin_time: bool = False
    reconcile: str = "hold"
    reject_error: str = "ESLURM_ACCESS_DENIED"
    max_connections: int = 256
    # for the Lua side (``greenslurm hook install`` renders them into job_submit.lua)
    timeout_ms: float = 20.0
    fail: str = "open"
    path: str = field(default="<defaults>", repr=False)

    @classmethod
    def from_toml(cls, path: str | Path) -> "HookConfig":
        path = str(path)
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise InputError("no such file", path=path) from None
        except IsADirectoryError:
            raise InputError("is a directory, not a config file", path=path) from None
        except PermissionError:
            raise InputError("cannot read: permission denied", path=path) from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"not valid TOML: {exc}", path=path) from None
        section = data.get("hook", data)
        if not isinstance(section, dict):
            raise InputError("[hook] must be a table", path=path)
        known = {f.name: f for f in fields(cls) if f.name != "path"}
        values = {}
        for key, value in section.items():
            if key not in known:
                raise InputError(f"unknown setting {key!r}; known: {', '.join(sorted(known))}", path=path, field=key)
            default = getattr(cls, key, None) if not callable(getattr(cls, key, None)) else None
            expected = type(default) if default is not None else (float, int)
            if isinstance(default, float):
                expected = (int, float)
            if isinstance(value, bool) and not isinstance(default, bool):
                raise InputError(f"must be {_kind(default)}, got {value!r}", path=path, field=key)
            if not isinstance(value, expected):
                raise InputError(f"must be {_kind(default)}, got {value!r}", path=path, field=key)
            values[key] = float(value) if isinstance(default, float) or default is None else value
        config = cls(**values, path=path)
        config.check()
        return config

    def check(self) -> None:
        path = self.path

        def bad(message: str, key: str) -> InputError:
            return InputError(message, path=path, field=key)
        try:
            build_acceptance(self.acceptance, min_slack=self.min_slack, share=self.share)
        except ValueError as exc:
            raise bad(str(exc), "acceptance") from None
        try:
            _, backfill = parse_allocation(self.allocation)
        except ValueError as exc:
            raise bad(str(exc), "allocation") from None
        if backfill:
            raise bad("the live view plans without backfilling; use balanced, bestfit, minidle or firstfit", "allocation")
        if self.backend not in BACKENDS:
            raise bad(f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}", "backend")
        if self.reconcile not in RECONCILE_ACTIONS:
            raise bad(f"unknown reconcile action {self.reconcile!r}; choose from {', '.join(RECONCILE_ACTIONS)}", "reconcile")
        if self.fail not in ("open", "closed"):
            raise bad(f"fail must be 'open' or 'closed', got {self.fail!r}", "fail")
        for key in ("timeout_ms", "sync_interval_s", "default_time_limit_s"):
            if getattr(self, key) <= 0:
                raise bad(f"must be > 0, got {getattr(self, key)}", key)
        if self.backend == "files" and not self.state_dir:
            raise bad("the files backend needs state_dir (a folder with sinfo.json and squeue.json)", "state_dir")
        if not self.socket.startswith("/"):
            raise bad("must be an absolute path", "socket")


def _kind(default) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, float) or default is None:
        return "a number"
    if isinstance(default, int):
        return "a whole number"
    return "a string"


def _when(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


class DecisionService:
    """Decisions on submissions, on the current view; no I/O but the record."""

    def __init__(self, config: HookConfig, record: DecisionRecord, view: LiveView | None = None) -> None:
        self.config = config
        self.record = record
        self.acceptance = build_acceptance(config.acceptance, min_slack=config.min_slack, share=config.share)
        self.view = view
        self.next_id = record.next_id()
        self.since_snapshot: list[tuple[float, object]] = []     # (time, submission) accepted since the sync began
        self.decisions = 0

    def install_view(self, snapshot: Snapshot, started_s: float) -> LiveView:
        view = LiveView(snapshot, self.acceptance, self.config.allocation)
        return view

    def swap_view(self, view: LiveView, started_s: float) -> None:
        replay = [s for t, s in self.since_snapshot if t >= started_s]
        for sub in replay:
            view.plan_existing(sub.job, sub.begin_s, sub.features)
        self.since_snapshot = [(t, s) for t, s in self.since_snapshot if t >= started_s]
        self.view = view

    def handle(self, line: bytes) -> dict:
        """One request line -> one answer (never raises on bad input)."""
        try:
            request = parse_request(line)
        except ProtocolError as exc:
            log.warning("bad request: %s", exc)
            return {"action": "error", "message": f"greenslurm: bad request: {exc}"}
        return self.handle_request(request)

    def handle_request(self, request: dict) -> dict:
        """One checked request (see :func:`~greenslurm.slurm_plugin.protocol.parse_request`) -> one answer."""
        if request.get("op", "submit") == "ping":
            return {"ok": True, "id": request.get("id"), "view": self.view is not None,
                    "shadow": self.config.shadow}
        try:
            return self.decide(request)
        except InputError as exc:
            log.info("request %s: %s", request.get("id"), exc)
            return {"id": request.get("id"), "action": "reject" if not self.config.shadow else "accept",
                    "message": f"greenslurm: {exc.reason}", "error_code": "ESLURM_INVALID_TIME_VALUE"}
        except Exception:            # a bug must not take the service down; the hook fails open/closed
            log.exception("request %s: decision failed", request.get("id"))
            return {"id": request.get("id"), "action": "error", "message": "greenslurm: internal error"}

    def decide(self, request: dict) -> dict:
        started = time.perf_counter()
        log.debug("request %s", request)
        sub = submission_from_request(request, default_time_limit_s=self.config.default_time_limit_s)
        job = sub.job
        decision_id = self.next_id
        self.next_id += 1
        if self.view is None:
            return {"id": request.get("id"), "action": "error", "message": "greenslurm: no cluster view yet"}
        now = max(job.submit_s, time.time()) if not request.get("submit_time") else job.submit_s
        outcome = self.view.decide(job, now, sub.begin_s, sub.features)
        decision, placement = outcome.decision, outcome.placement
        answer: dict = {"id": request.get("id")}
        energy_j = None
        if decision.accepted and placement is not None:
            self.since_snapshot.append((time.time(), sub))
            energy_j = outcome.request.power_w * (placement.end_s - placement.start_s)
            names = self.view.planner.names(placement.nodes)
            sets = {}
            if self.config.annotate_comment:
                note = (f"{TAG}{decision_id}: planned start {_when(placement.start_s)} on {','.join(names)},"
                        f" est. {energy_j / 3.6e6:.3f} kWh above idle"
                        + (f", {DEADLINE_CHECKED} {_when(job.deadline_s)}" if job.deadline_s is not None else ""))
                sets["comment"] = f"{sub.comment} | {note}" if sub.comment else note
            if self.config.set_required_nodes:
                sets["req_nodes"] = ",".join(names)
            if self.config.set_begin_time and placement.start_s > now + 1.0:
                sets["begin_time"] = int(placement.start_s)
            would = "modify" if sets else "accept"
            answer.update(sets)
            answer["message"] = decision.message
        elif decision.accepted:
            would = "accept"
        else:
            would = "reject"
            earliest = (self.view.planner.earliest_finish(outcome.request)
                        if outcome.request is not None else None)
            when = [f"earliest end {_when(earliest)}"] if earliest is not None else []
            if job.deadline_s is not None:
                when.append(f"deadline {_when(job.deadline_s)}")
            answer["message"] = f"greenslurm: job {decision.message}" + (f" [{', '.join(when)}]" if when else "")
            answer["error_code"] = self.config.reject_error
        if self.config.shadow:
            answer = {"id": request.get("id"), "action": "accept", "shadow": would}
        else:
            answer["action"] = would
        took_us = (time.perf_counter() - started) * 1e6
        self.record.add({
            "id": decision_id, "time_s": now, "user": job.user, "partition": job.partition, "cpus": job.cpus,
            "nodes": job.nodes, "gpus_per_node": job.gpus_per_node, "time_limit_s": job.requested_time_s,
            "deadline_s": job.deadline_s, "deadline_source": sub.deadline_source if sub.deadline_text else None,
            "action": answer["action"], "would_action": would, "policy": decision.policy,
            "reason": decision.reason, "message": decision.message,
            "planned_start_s": placement.start_s if placement is not None else None,
            "planned_end_s": placement.end_s if placement is not None else None,
            "planned_nodes": ",".join(self.view.planner.names(placement.nodes)) if placement is not None else None,
            "energy_j": energy_j, "shadow": int(self.config.shadow), "decide_us": took_us})
        self.decisions += 1
        log.info("decision %d (%s, %d CPUs, %s): %s%s", decision_id, job.user or "?", job.cpus,
                 "deadline " + _when(job.deadline_s) if job.deadline_s else "no deadline", would,
                 " (shadow: answered accept)" if self.config.shadow else "")
        return answer

    # -- reconciliation ---------------------------------------------------------------------------
    def to_reconcile(self, deadlines: list[PendingDeadline]) -> list[tuple[PendingDeadline, str]]:
        """Pending jobs with a deadline the hook did not decide on and that cannot meet it."""
        done = self.record.reconciled()
        out = []
        for item in deadlines:
            if item.job_id in done or DEADLINE_CHECKED in item.comment or item.held:
                continue
            job = item.job
            earliest = self.view.planner.earliest_finish(self.view.request(job, item.begin_s)) if self.view else None
            if earliest is not None and earliest > item.deadline_s:
                out.append((item, f"greenslurm: cannot end by its deadline {_when(item.deadline_s)}"
                                  f" (earliest end {_when(earliest)})"))
            elif earliest is None:
                out.append((item, "greenslurm: fits no node of the cluster"))
        return out


class HookServer:
    """The socket, the sync loop and the record's flushes around a :class:`DecisionService`."""

    def __init__(self, config: HookConfig, backend=None) -> None:
        self.config = config
        self.backend = backend if backend is not None else self._make_backend()
        self.record = DecisionRecord(config.database)
        self.service = DecisionService(config, self.record)
        self.server: asyncio.AbstractServer | None = None
        self.connections = 0
        self.synced = asyncio.Event()
        self._stop = asyncio.Event()
        self.sync_count = 0

    def _make_backend(self):
        name = self.config.backend
        if name == "cli":
            return BACKENDS[name](self.config.slurm_conf or None)
        if name == "files":
            return BACKENDS[name](self.config.state_dir)
        return BACKENDS[name]()

    # -- socket ---------------------------------------------------------------------------------
    async def start(self) -> None:
        path = Path(self.config.socket)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        old_umask = os.umask(0o177)
        try:
            self.server = await asyncio.start_unix_server(self._client, path=str(path), limit=MAX_REQUEST_BYTES + 1)
        finally:
            os.umask(old_umask)
        self._secure(path)
        log.info("listening on %s (%s%s)", path, "shadow mode, " if self.config.shadow else "",
                 f"acceptance {self.config.acceptance}, allocation {self.config.allocation}")

    def _secure(self, path: Path) -> None:
        uid, gid, mode = -1, -1, 0o600
        if self.config.socket_owner:
            try:
                uid = pwd.getpwnam(self.config.socket_owner).pw_uid
            except KeyError:
                log.warning("socket owner %r is not a user here; the socket stays owned by uid %d",
                            self.config.socket_owner, os.getuid())
        if self.config.socket_group:
            try:
                gid = grp.getgrnam(self.config.socket_group).gr_gid
                mode = 0o660
            except KeyError:
                raise InputError(f"no group {self.config.socket_group!r}", path=self.config.path,
                                 field="socket_group") from None
        if uid != -1 or gid != -1:
            try:
                os.chown(path, uid, gid)
            except PermissionError:
                log.warning("cannot chown %s (not root); it stays owned by uid %d", path, os.getuid())
        os.chmod(path, mode)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.config.max_connections:
            writer.write(encode({"action": "error", "message": "greenslurm: too many connections"}))
            writer.close()
            return
        self.connections += 1
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    if exc.partial.strip():
                        writer.write(encode(self.service.handle(exc.partial)))
                        await writer.drain()
                    break
                except asyncio.LimitOverrunError:
                    log.warning("request larger than %d bytes; connection closed", MAX_REQUEST_BYTES)
                    writer.write(encode({"action": "error",
                                         "message": f"greenslurm: bad request: larger than {MAX_REQUEST_BYTES} bytes"}))
                    await writer.drain()
                    break
                writer.write(encode(self.service.handle(line)))
                await writer.drain()
        except (ConnectionError, BrokenPipeError):
            pass
        finally:
            self.connections -= 1
            writer.close()

    # -- sync -------------------------------------------------------------------------------------
    async def sync_once(self) -> bool:
        started = time.time()
        loop = asyncio.get_running_loop()

        def build():
            snapshot, deadlines = self.backend.snapshot()
            return self.service.install_view(snapshot, started), deadlines, snapshot
        try:
            view, deadlines, snapshot = await loop.run_in_executor(None, build)
        except (BackendError, ValueError) as exc:
            log.warning("cannot sync with Slurm: %s", exc)
            return False
        self.service.swap_view(view, started)
        self.sync_count += 1
        log.debug("synced: %d nodes, %d running, %d pending (%.0f ms)", len(snapshot.nodes), len(snapshot.running),
                  len(snapshot.pending), (time.time() - started) * 1e3)
        self.synced.set()
        if self.config.reconcile != "none":
            for item, message in self.service.to_reconcile(deadlines):
                action = await loop.run_in_executor(None, self._reconcile, item, message)
                if action is not None:
                    self.record.add_reconciled(item.job_id, action, message)
        return True

    def _reconcile(self, item: PendingDeadline, message: str) -> str | None:
        """Act on one job (in a worker thread); the action taken, None if it failed."""
        action = "shadow" if self.config.shadow else self.config.reconcile
        comment = f"{item.comment} | {message}" if item.comment else message
        log.info("job %s: %s -> %s", item.job_id, message, action)
        try:
            if action == "hold":
                self.backend.hold(item.job_id, comment)
            elif action == "cancel":
                self.backend.cancel(item.job_id, comment)
            elif action == "annotate":
                self.backend.annotate(item.job_id, comment)
        except BackendError as exc:
            log.warning("job %s: %s failed: %s", item.job_id, action, exc)
            return None
        return action

    async def run(self) -> None:
        await self.start()
        await self.sync_once()
        tasks = [asyncio.create_task(self._sync_loop()), asyncio.create_task(self._flush_loop())]
        try:
            await self._stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await self.close()

    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.sync_interval_s)
            await self.sync_once()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            if self.record.pending_rows:
                self.record.flush()

    def stop(self) -> None:
        self._stop.set()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        Path(self.config.socket).unlink(missing_ok=True)
        self.record.close()
        log.info("stopped after %d decisions", self.service.decisions)


def serve(config: HookConfig) -> int:
    """Run until SIGTERM/SIGINT."""
    import signal

    async def main() -> None:
        server = HookServer(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.stop)
        await server.run()
    asyncio.run(main())
    return 0
