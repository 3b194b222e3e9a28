"""The decision service's process (``greenslurm hook serve --config hook.toml``): the UNIX socket,
the lock, the record and the loop that syncs the cluster view, reconciles pending deadlines and
acts for power saving, around a :class:`~greenslurm.slurm_plugin.decisions.DecisionService`.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import multiprocessing
import fcntl
import os
import pwd
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from greenslurm.clustermodel import InputError
from greenslurm.slurm_plugin.backend import BACKENDS
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.decisions import DecisionService, when_text
from greenslurm.slurm_plugin.failures_file import LEFTOVER_AFTER_S, leftovers, sync_kept
from greenslurm.slurm_plugin.forecast import ForecastSource
from greenslurm.slurm_plugin.lua_script import installed_failures_dir
from greenslurm.slurm_plugin.protocol import MAX_REQUEST_BYTES, encode
from greenslurm.slurm_plugin.reconcile import reconcile_comment
from greenslurm.slurm_plugin.record import FAILED, IN_PROGRESS, DecisionRecord
from greenslurm.slurm_plugin.slurm_json import BackendError, PendingDeadline
from greenslurm.slurm_plugin.live_nodes import NodePower
from greenslurm.slurm_plugin.snapshot import Snapshot

log = logging.getLogger("greenslurm.hook")

SETTLE_MARGIN_S = 1.0        # past the hook's timeout, a job Slurm created after an answer is in its state
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"   # without slurm_conf in hook.toml nor SLURM_CONF (Debian's; hook check's default)


class ServiceLock:
    """``<socket>.lock``, held (flock) for the service's life: one service per socket."""

    def __init__(self, path: str, config_path: str) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise InputError(f"cannot open the lock {path}: {exc.strerror}", path=config_path, field="socket") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            raise InputError(f"another `greenslurm hook serve` (pid {holder}) already serves this socket "
                             f"(it holds {path}); stop it first", path=config_path, field="socket") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)             # closing releases the flock; the file stays (no unlink race)
            self.fd = None


LEFTOVER_LOOK_TIMEOUT_S = 30.0   # a look at job_submit.lua's folder (an fsync, a listing) waits no longer


def in_daemon_thread(work) -> asyncio.Future:
    """``work()`` in a thread of its own, as a future of the running loop.  A daemon thread: one that
    never returns (an fsync or a listing on a file system that no longer answers) holds neither the
    loop nor the service's exit, which would wait for a worker of the loop's default executor."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def run() -> None:
        try:
            outcome = (work(), None)
        except Exception as exc:
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:          # the loop closed meanwhile: nobody waits
            pass
    threading.Thread(target=run, name="greenslurm-look", daemon=True).start()
    return future


class HookServer:
    """The socket, the lock, the record and the sync loop around a :class:`DecisionService`."""

    def __init__(self, config: HookConfig, backend=None) -> None:
        self.config = config
        self.backend = backend if backend is not None else make_backend(config)
        self.lock: ServiceLock | None = None
        self.record: DecisionRecord | None = None
        self.service: DecisionService | None = None
        self.server: asyncio.AbstractServer | None = None
        self.socket_inode: tuple[int, int] | None = None
        self.connections = 0
        self.synced = asyncio.Event()
        self._stop = asyncio.Event()
        self.sync_count = 0
        self._pool: ProcessPoolExecutor | None = None
        self.forecast_source = ForecastSource(config.supply_file, config.supply_command,
                                              timeout_s=config.supply_timeout_s, refresh_s=config.supply_refresh_s,
                                              scale=config.supply_scale)
        self._forecast_task: asyncio.Future | None = None
        self._leftover_look: asyncio.Future | None = None     # the look at job_submit.lua's folder under way
        self.leftover_look_timeout_s = LEFTOVER_LOOK_TIMEOUT_S
        self.power_manager = None
        if config.power_save:
            from greenslurm.slurm_plugin.power import PowerManager
            self.power_manager = PowerManager(config, NodePower(config.node_idle_w, config.node_busy_w,
                                                                config.gpu_idle_w, config.gpu_max_w))

    # -- socket ---------------------------------------------------------------------------------
    async def start(self) -> None:
        config = self.config
        path = Path(config.socket)
        if not path.parent.is_dir():
            raise InputError(f"the runtime directory {path.parent} does not exist (the systemd unit's "
                             f"RuntimeDirectory= makes it; or create it owned by the service's user)",
                             path=config.path, field="socket")
        self.lock = ServiceLock(config.lock_path, config.path)
        try:
            self.record = DecisionRecord(config.database, sync=config.record_sync)
        except (OSError, Exception) as exc:
            self.lock.release()
            raise InputError(f"cannot open the record: {exc}", path=config.path, field="database") from None
        self.service = DecisionService(config, self.record)
        if hasattr(self.backend, "max_array_size"):
            try:
                self.service.max_array_size = await asyncio.get_running_loop().run_in_executor(
                    None, self.backend.max_array_size)
            except BackendError as exc:
                log.warning("cannot read Slurm's MaxArraySize (%s); arrays are planned as asked", exc)
        if path.exists() or path.is_symlink():
            path.unlink()                 # a socket left by a killed service: we hold the lock, it is ours
        old_umask = os.umask(0o177)
        try:
            self.server = await asyncio.start_unix_server(self._client, path=str(path), limit=MAX_REQUEST_BYTES + 1)
        finally:
            os.umask(old_umask)
        self._secure(path)
        st = path.stat()
        self.socket_inode = (st.st_dev, st.st_ino)
        log.info("listening on %s (%sacceptance %s, select %s, backend %s, next decision %d)", path,
                 "shadow mode, " if config.shadow else "", config.acceptance, config.select,
                 getattr(self.backend, "name", "?"), self.service.next_id)

    def _secure(self, path: Path) -> None:
        uid, gid, mode = -1, -1, 0o600
        if self.config.socket_owner:
            try:
                uid = pwd.getpwnam(self.config.socket_owner).pw_uid
            except KeyError:
                raise InputError(f"no user {self.config.socket_owner!r}", path=self.config.path,
                                 field="socket_owner") from None
        if self.config.socket_group:
            try:
                gid = grp.getgrnam(self.config.socket_group).gr_gid
                mode = 0o660
            except KeyError:
                raise InputError(f"no group {self.config.socket_group!r}", path=self.config.path,
                                 field="socket_group") from None
        os.chmod(path, mode)
        if uid != -1 or gid != -1:
            try:
                os.chown(path, uid, gid)
            except PermissionError:
                raise InputError(f"cannot give the socket to {self.config.socket_owner or '-'}:"
                                 f"{self.config.socket_group or '-'} (the service is not root)",
                                 path=self.config.path, field="socket_owner") from None

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
        try:
            # Slurm's JSON is read and parsed in a worker process: decoding megabytes of JSON holds
            # the interpreter lock for tens of milliseconds, which would delay every answer meanwhile
            snapshot, deadlines = await asyncio.wait_for(
                loop.run_in_executor(self._fetcher(), fetch_snapshot, self.backend), self.fetch_timeout_s)
        except asyncio.TimeoutError:
            log.warning("the worker that reads Slurm's state gave no answer in %.0f s; starting another",
                        self.fetch_timeout_s)
            self._discard_fetcher()
            return False
        except (BackendError, ValueError) as exc:
            log.warning("cannot sync with Slurm: %s", exc)
            return False
        except BrokenProcessPool:
            log.warning("the worker that reads Slurm's state died; starting another")
            self._discard_fetcher()
            return False
        except Exception:
            log.exception("cannot read Slurm's state")
            return False
        await self.refresh_forecast()
        try:
            view = await loop.run_in_executor(None, self.service.install_view, snapshot, started)
        except ValueError as exc:         # no usable node (slurmctld restarting: every node unknown)
            log.warning("cannot build the cluster view: %s; keeping the view of %s", exc,
                        "none" if self.service.view is None else when_text(self.service.view.snapshot_time_s))
            return False
        except Exception:
            log.exception("cannot build the cluster view")
            return False
        self.service.swap_view(view, started)
        self.sync_count += 1
        try:
            # Slurm creates (or refuses) a job right after the hook's answer, which comes within the
            # hook's timeout: a decision answered longer ago than that when this sync began is in the
            # state read now, or Slurm refused the job
            before = started - (self.config.timeout_ms / 1000.0 + SETTLE_MARGIN_S)
            since = getattr(self, "_settled_before", self.service.started_s)
            if before > since:
                marked = self.record.settle_applied(snapshot.carried, since, before)
                self._settled_before = before
                if marked:
                    log.info("%d decision(s) answered with a tag that no job carries (Slurm refused the job "
                             "after the answer): marked not applied", marked)
        except Exception:
            log.exception("cannot settle which decisions were applied")
        try:
            self.service.note_runs(snapshot)
        except Exception:                 # accounting must not cost the sync
            log.exception("cannot record the jobs' runs")
        await self.note_measured(loop)
        if self.power_manager is not None:
            await self.power_actions(snapshot, loop)
        skipped = getattr(snapshot, "skipped", 0)
        if skipped:
            log.warning("sync: skipped %d record(s) of Slurm's state that could not be read", skipped)
        log.debug("synced: %d nodes, %d running, %d pending (%.0f ms)", len(snapshot.nodes), len(snapshot.running),
                  len(snapshot.pending), (time.time() - started) * 1e3)
        self.synced.set()
        if self.config.reconcile != "none":
            for item, message in self.service.to_reconcile(deadlines):
                if message is None:
                    self.record.add_reconciled(item.job_id, item.deadline_s, "ok", "can end in time")
                    continue
                # the record first, then the action, then its outcome: a service killed between the
                # action and its row still leaves the row (a held job is not looked at again)
                self.record.add_reconciled(item.job_id, item.deadline_s, self.reconcile_action + IN_PROGRESS, message)
                action = await loop.run_in_executor(None, self._reconcile, item, message)
                self.record.add_reconciled(item.job_id, item.deadline_s, action or FAILED, message)
        return True

    async def power_actions(self, snapshot: Snapshot, loop) -> None:
        """The power-state policy's decisions on this sync, carried out in a worker thread, each
        recorded (``events``: power_down, drain, power_up) before it is tried."""
        try:
            actions = self.power_manager.decide(snapshot, snapshot.now_s)
        except Exception:
            log.exception("power saving: cannot decide")
            return
        from greenslurm.slurm_plugin.power import printable
        for job_id, why in self.power_manager.unusable_new:       # logged by the policy; recorded once
            self.record.event("power wakes none", 1, f"job {printable(job_id)}: {why}")
        for action in actions:
            self.record.event(action.action, 1, f"{action.node}: {action.why}")
            log.info("power saving: %s %s (%s)", action.action, action.node, action.why)
            try:
                await loop.run_in_executor(None, self.backend.power, action.node, action.action)
            except (BackendError, AttributeError) as exc:
                log.warning("power saving: %s %s failed: %s", action.action, action.node, exc)
                self.record.event(action.action + " failed", 1, f"{action.node}: {exc}")

    async def note_measured(self, loop) -> None:
        """Slurm's measured energy of ended jobs (``measured_energy = "sacct"``; a worker thread)."""
        if self.config.measured_energy != "sacct" or not hasattr(self.backend, "measured_energy"):
            return
        ids = self.record.unmeasured()
        if not ids:
            return
        try:
            measured = await loop.run_in_executor(None, self.backend.measured_energy, ids)
        except BackendError as exc:
            log.warning("cannot read measured energy: %s", exc)
            return
        if measured:
            self.record.set_measured(measured)

    async def refresh_forecast(self) -> None:
        """Read the forecast again (in a worker thread; a command is killed after supply_timeout_s).
        A read still under way after that (a file on a hung file system) is left to finish on its
        own: the sync goes on with the forecast read before, and no second read starts meanwhile."""
        if not self.forecast_source.configured:
            return
        loop = asyncio.get_running_loop()
        if self._forecast_task is None or self._forecast_task.done():
            self._forecast_task = loop.run_in_executor(None, self.forecast_source.refresh)
        try:
            self.service.forecast = await asyncio.wait_for(asyncio.shield(self._forecast_task),
                                                           self.config.supply_timeout_s + 2.0)
        except asyncio.TimeoutError:
            log.warning("forecast: still reading after %.0f s; planning with the forecast read before",
                        self.config.supply_timeout_s + 2.0)
        except Exception:
            log.exception("forecast: cannot read it")
        self.record.note_supply(self.service.forecast)

    @property
    def reconcile_action(self) -> str:
        """What reconciliation does to a job that cannot end in time (shadow: nothing, recorded)."""
        return "shadow" if self.config.shadow else self.config.reconcile

    def _reconcile(self, item: PendingDeadline, message: str) -> str | None:
        """Act on one job (in a worker thread); the action taken, None if it failed."""
        action = self.reconcile_action
        comment = reconcile_comment(item.comment, message)
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

    @property
    def fetch_timeout_s(self) -> float:
        """A read of Slurm's state taking longer than half the age at which a view is stale is stuck
        (a stopped or hung worker): it is abandoned so that the next sync can still make the view
        fresh in time."""
        return self.config.max_view_age_s / 2

    def _discard_fetcher(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):   # a stopped worker ignores SIGTERM
            try:
                process.kill()
            except (OSError, AttributeError):
                pass
        pool.shutdown(wait=False, cancel_futures=True)

    def _fetcher(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("forkserver"))
        return self._pool

    async def run(self) -> None:
        await self.start()
        try:
            await self.guarded_sync()
            tasks = [asyncio.create_task(self._sync_loop())]
            try:
                await self._stop.wait()
            finally:
                for task in tasks:
                    task.cancel()
        finally:
            await self.close()

    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.sync_interval_s)
            await self.guarded_sync()

    async def guarded_sync(self) -> bool:
        """One sync; a failure is logged and the next sync runs as planned (an exception escaping
        here would end the loop: no fresh view and no reconciliation until a restart)."""
        try:
            return await self.sync_once()
        except Exception:
            log.exception("sync failed")
            return False
        finally:
            try:
                await self.fold_leftovers()
            except Exception:                  # the count of the hook's failures must not cost the sync
                log.exception("cannot look for job_submit.lua's leftover lines")
            await self.checkpoint_record()

    async def fold_leftovers(self, now_s: float | None = None) -> int:
        """Count the failures of the lines job_submit.lua wrote and never renamed over its file
        (:class:`~greenslurm.slurm_plugin.failures_file.Leftover`) once they are LEFTOVER_AFTER_S old
        (job_submit.lua renames a line microseconds after writing it: one older than that was left
        by a slurmctld killed in between, never renamed later), each once
        (:meth:`DecisionService.note_leftover`), then remove them where this user may; and fsync
        job_submit.lua's file and folder (:func:`~greenslurm.slurm_plugin.failures_file.sync_kept`,
        in a thread of its own: an fsync never delays an answer; one that hangs past
        ``leftover_look_timeout_s`` holds up neither this sync, nor the next ones, which start no
        second look meanwhile, nor the service's exit).  Returns how many were counted now."""
        slurm_conf = Path(self.config.slurm_conf or os.environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF)
        folder = installed_failures_dir(slurm_conf.parent)
        now = time.time() if now_s is None else now_s

        def look() -> list:
            sync_kept(folder)
            return leftovers(folder, now)
        if self._leftover_look is not None and not self._leftover_look.done():
            return 0                          # the last look still waits on its file system: no second one
        self._leftover_look = in_daemon_thread(look)
        try:
            found = await asyncio.wait_for(asyncio.shield(self._leftover_look), self.leftover_look_timeout_s)
        except asyncio.TimeoutError:
            log.warning("no answer from %s within %g s (a file system not answering?): its leftover lines wait, "
                        "the sync goes on", folder, self.leftover_look_timeout_s)
            return 0
        counted = 0
        for left in found:
            if left.kept is None or left.own is None or not left.settled:
                continue                      # no line, an earlier script's line (hook check names both), or young
            counted += self.service.note_leftover(left.path.name, left.kept) is not None
            try:
                os.unlink(left.path)          # counted (now or before): the record keeps its name
            except OSError:
                pass                          # slurmctld's folder, not this user's: the record's name keeps it counted once
        return counted

    async def checkpoint_record(self) -> None:
        """The record's checkpoint (:meth:`DecisionRecord.checkpoint`) in a worker thread: its fsyncs never
        delay an answer (SQLite would otherwise run it on the commit of some decision)."""
        if self.record is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.record.checkpoint)
        except Exception as exc:               # the next sync tries again; the log keeps every decision
            log.warning("record checkpoint failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        path = Path(self.config.socket)
        try:
            st = path.stat()
            if self.socket_inode == (st.st_dev, st.st_ino):
                path.unlink()             # only the socket this service made
        except FileNotFoundError:
            pass
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self.record is not None:
            self.record.close()
            self.record = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        if self.service is not None:
            log.info("stopped after %d decisions", self.service.decisions)


def fetch_snapshot(backend) -> tuple[Snapshot, list[PendingDeadline]]:
    """Slurm's state through ``backend`` (run in the worker process)."""
    return backend.snapshot()


def make_backend(config: HookConfig):
    """The backend the config names; ``auto`` is pyslurm when it imports and matches this Slurm, else
    Slurm's JSON commands."""
    from greenslurm.slurm_plugin.backend_choice import resolve_backend
    name, detail = resolve_backend(config)
    log.info("backend: %s", detail)
    try:
        if name == "cli":
            return BACKENDS[name](config.slurm_conf or None)
        if name == "files":
            return BACKENDS[name](config.state_dir)
        return BACKENDS[name](config.slurm_conf or None)
    except BackendError as exc:
        raise InputError(str(exc), path=config.path, field="backend") from None


def serve(config: HookConfig) -> int:
    """Run until SIGTERM/SIGINT."""
    import signal

    # hand the interpreter lock to the answering thread within 1 ms while a view is being built
    sys.setswitchinterval(0.001)

    async def main() -> None:
        server = HookServer(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.stop)
        await server.run()
    asyncio.run(main())
    return 0
