"""The hook's settings (``[hook]`` in hook.toml; every key is documented in the shipped template
``slurm_plugin/hook.toml``).  The service reads them all; ``greenslurm hook install`` renders the
Lua-side ones (socket, timeout, failure modes) into job_submit.lua."""

from __future__ import annotations

import math
import re
import shlex
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from greenslurm.acceptance.registry import build as build_acceptance
from greenslurm.allocation.green import RENEWABLE_MODES
from greenslurm.allocation.selection import parse_selection
from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.errors import toml_error
from greenslurm.clustermodel.node import DEFAULT_GPU_POWER_W, DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W
from greenslurm.clustermodel.power import node_power_problem
from greenslurm.traces.records import MAX_LIMIT_S

RECONCILE_ACTIONS = ("none", "annotate", "hold", "cancel")
STALE_OUTCOMES = ("check", "open", "closed")
UNDECODABLE_OUTCOMES = ("reject", "drop")
RECORD_SYNC = ("full", "normal")
BACKEND_NAMES = ("auto", "cli", "pyslurm", "files")
FAIL_MODES = ("open", "closed")
SUPPLY_STALE = ("grid", "use")
RENAMED = {"allocation": "select"}
NO_DEADLINE_POLICIES = ("untouched", "shift")
MAX_ARRAY_TASKS = 4_000_001        # Slurm's largest MaxArraySize
MAX_CONNECTIONS = 65_536           # more open sockets than a process may hold by default


@dataclass
class HookConfig:
    socket: str = "/run/greenslurm/hook.sock"
    socket_owner: str = ""               # "" = the service's own user (the SlurmUser under systemd)
    socket_group: str = ""               # a group allowed to connect: the socket becomes 0660
    database: str = "/var/lib/greenslurm/hook.sqlite"
    record_sync: str = "normal"          # normal: committed before the answer (survives kill -9); full: also fsynced
    shadow: bool = False
    acceptance: str = "greedy"
    select: str = "bestfit"
    min_slack: float | None = None
    share: float | None = None
    default_time_limit_s: float = 3600.0
    sync_interval_s: float = 10.0
    max_view_age_s: float = 120.0
    stale: str = "check"
    backend: str = "auto"
    slurm_conf: str = ""
    state_dir: str = ""                  # the files backend: folder with sinfo.json and squeue.json
    annotate_comment: bool = True
    set_required_nodes: bool = True
    set_begin_time: bool = False
    reconcile: str = "hold"
    undecodable: str = "reject"
    max_array_tasks: int = 1000
    reject_error: str = "ESLURM_ACCESS_DENIED"
    max_connections: int = 256
    # the renewable forecast and green placement (docs/hook-green.md)
    renewable: str = "grid"
    supply_file: str = ""
    supply_command: str = ""
    supply_scale: float = 1.0
    supply_refresh_s: float = 300.0
    supply_timeout_s: float = 10.0
    supply_max_age_s: float = 21600.0
    supply_stale: str = "grid"
    supply_horizon_s: float = 604800.0   # the planner looks this far into the forecast
    no_deadline: str = "untouched"
    no_deadline_max_shift_s: float = 14400.0
    # the power model of every node (Slurm records none): the replay's linear node model
    node_idle_w: float = DEFAULT_NODE_IDLE_W
    node_busy_w: float = DEFAULT_NODE_BUSY_W
    gpu_idle_w: float = DEFAULT_GPU_POWER_W[0]
    gpu_max_w: float = DEFAULT_GPU_POWER_W[1]
    measured_energy: str = "none"        # "sacct": read Slurm's measured energy of ended jobs (an energy plugin)
    # Slurm's power saving under the replay's power-state policy (docs/hook-green.md)
    power_save: bool = False
    suspend_after_s: float = 600.0
    min_nodes_on: int = 1
    power_budget_w: float = 0.0          # 0: no budget
    off_w: float = 10.0
    boot_s: float = 300.0
    suspend_timeout_s: float = 60.0      # Slurm's SuspendTimeout: how long a node takes to power down
    phases: int = 3
    nodes_per_cabinet: int = 48
    phase_layout: str = "round-robin"
    wake_order: str = "phase"
    power_off_command: str = ""
    power_on_command: str = ""
    power_command_timeout_s: float = 120.0
    # for the Lua side (``greenslurm hook install`` renders them into job_submit.lua)
    timeout_ms: float = 300.0
    fail: str = "open"
    fail_deadline: str = "closed"
    retry_after_s: float = 5.0
    path: str = field(default="<defaults>", repr=False)

    def power_states(self):
        """The power-state settings as the replay's :class:`PowerStateConfig` (it checks their ranges)."""
        from greenslurm.sim.machines.power_states import PowerStateConfig
        if not self.power_budget_w >= 0:                  # also refuses nan (0: no budget)
            raise ValueError(f"budget_w must be a finite number >= 0, got {self.power_budget_w}")
        return PowerStateConfig(suspend_after_s=self.suspend_after_s, boot_s=self.boot_s, off_w=self.off_w,
                                budget_w=self.power_budget_w or None, phases=self.phases,
                                nodes_per_cabinet=self.nodes_per_cabinet, phase_layout=self.phase_layout,
                                wake_order=self.wake_order)

    @property
    def lock_path(self) -> str:
        """The file whose lock makes one service per socket."""
        return self.socket + ".lock"

    @classmethod
    def from_toml(cls, path: str | Path) -> "HookConfig":
        path = str(path)
        if Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir():
            # /dev/zero never ends (it was read until memory ran out), a FIFO blocks until someone writes
            raise InputError("not a regular file (a device, pipe or socket), not a config file", path=path)
        try:
            text = Path(path).read_text()
            data = tomllib.loads(text)
        except FileNotFoundError:
            raise InputError("no such file", path=path) from None
        except IsADirectoryError:
            raise InputError("is a directory, not a config file", path=path) from None
        except PermissionError:
            raise InputError("cannot read: permission denied", path=path) from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"not valid TOML: {exc}", path=path) from None
        except (ValueError, RecursionError) as exc:     # an integer too long, or nested too deeply
            raise toml_error(exc, text, path) from None
        section = data.get("hook", data)
        if not isinstance(section, dict):
            raise InputError("[hook] must be a table", path=path)
        known = {f.name: f for f in fields(cls) if f.name != "path"}
        values = {}
        for key, value in section.items():
            if key in RENAMED:
                raise InputError(f"renamed to {RENAMED[key]!r} (any node selection name)", path=path, field=key)
            if key not in known:
                raise InputError(f"unknown setting {key!r}; known: {', '.join(sorted(known))}", path=path, field=key)
            default = getattr(cls, key)
            if isinstance(value, bool) and not isinstance(default, bool):
                raise InputError(f"must be {_kind(default)}, got {value!r}", path=path, field=key)
            if isinstance(default, bool) or isinstance(default, str):
                ok = isinstance(value, type(default))
            elif isinstance(default, int):
                ok = isinstance(value, int)
            else:                            # a number (float, or an unset option)
                ok = isinstance(value, (int, float))
            if not ok:
                raise InputError(f"must be {_kind(default)}, got {value!r}", path=path, field=key)
            values[key] = float(value) if isinstance(default, float) or default is None else value
        config = cls(**values, path=path)
        config.check()
        return config

    def check(self) -> None:
        def bad(message: str, key: str) -> InputError:
            return InputError(message, path=self.path, field=key)

        def one_of(key: str, allowed: tuple[str, ...]) -> None:
            if getattr(self, key) not in allowed:
                raise bad(f"{getattr(self, key)!r} is not one of {', '.join(allowed)}", key)
        try:
            build_acceptance(self.acceptance, min_slack=self.min_slack, share=self.share)
        except ValueError as exc:
            raise bad(str(exc), "acceptance") from None
        try:
            parse_selection(self.select, where="select")
        except (ValueError, InputError) as exc:
            raise bad(getattr(exc, "reason", str(exc)), "select") from None
        for key, allowed in (("backend", BACKEND_NAMES), ("reconcile", RECONCILE_ACTIONS), ("stale", STALE_OUTCOMES),
                             ("undecodable", UNDECODABLE_OUTCOMES), ("record_sync", RECORD_SYNC),
                             ("fail", FAIL_MODES), ("fail_deadline", FAIL_MODES), ("renewable", RENEWABLE_MODES),
                             ("supply_stale", SUPPLY_STALE), ("no_deadline", NO_DEADLINE_POLICIES),
                             ("measured_energy", ("none", "sacct"))):
            one_of(key, allowed)
        if re.fullmatch(r"ESLURM_[A-Z0-9_]+", self.reject_error) is None:      # "SUCCESS" would accept
            raise bad(f"must name a Slurm error (ESLURM_...), got {self.reject_error!r}", "reject_error")
        for key in ("timeout_ms", "sync_interval_s", "default_time_limit_s", "max_view_age_s", "retry_after_s",
                    "supply_scale", "supply_refresh_s", "supply_timeout_s", "supply_max_age_s", "supply_horizon_s"):
            if not 0 < getattr(self, key) < math.inf:          # also refuses nan
                raise bad(f"must be > 0 and finite, got {getattr(self, key)}", key)
        if self.default_time_limit_s > MAX_LIMIT_S:
            raise bad(f"must be at most 100 years ({MAX_LIMIT_S:g} s), as a trace's time limit, "
                      f"got {self.default_time_limit_s:g}", "default_time_limit_s")
        if self.share is not None and not 0 <= self.share <= 1:        # also refuses nan
            raise bad(f"must be within [0, 1] (a share of the spare time), got {self.share}", "share")
        if self.min_slack is not None and not 0 <= self.min_slack < math.inf:
            raise bad(f"must be a finite number >= 0, got {self.min_slack}", "min_slack")
        for key, high in (("max_array_tasks", MAX_ARRAY_TASKS), ("max_connections", MAX_CONNECTIONS)):
            if not 1 <= getattr(self, key) <= high:
                raise bad(f"must be >= 1 and at most {high:,}, got {getattr(self, key)}", key)
        if self.max_view_age_s < self.sync_interval_s:
            raise bad(f"must be at least sync_interval_s ({self.sync_interval_s:g}), or every view is stale",
                      "max_view_age_s")
        if not 0 <= self.no_deadline_max_shift_s <= MAX_LIMIT_S:         # also refuses nan
            raise bad(f"must be within [0, {MAX_LIMIT_S:g}] seconds, got {self.no_deadline_max_shift_s}",
                      "no_deadline_max_shift_s")
        problem = node_power_problem(self.node_idle_w, self.node_busy_w, self.gpu_idle_w, self.gpu_max_w)
        if problem is not None:
            raise bad(problem[1], {"idle_w": "node_idle_w", "busy_w": "node_busy_w"}.get(problem[0], problem[0]))
        try:
            self.power_states()                 # the replay's power-state settings and their ranges
        except ValueError as exc:
            key = str(exc).split()[0]
            raise bad(str(exc), {"budget_w": "power_budget_w"}.get(key, key)) from None
        if not 1 <= self.suspend_timeout_s <= 65533:                       # Slurm's range (16 bits)
            raise bad(f"must be within [1, 65533] seconds, got {self.suspend_timeout_s}", "suspend_timeout_s")
        if not 0.001 <= self.power_command_timeout_s <= 86400.0:            # also refuses nan
            raise bad(f"must be within [0.001, 86400] seconds, got {self.power_command_timeout_s}",
                      "power_command_timeout_s")
        if not 0 <= self.min_nodes_on <= 1_000_000:
            raise bad(f"must be a whole number within [0, 1,000,000], got {self.min_nodes_on}", "min_nodes_on")
        for key in ("power_off_command", "power_on_command"):
            try:
                words = shlex.split(getattr(self, key))
            except ValueError as exc:
                raise bad(f"cannot split into words: {exc}", key) from None
            if self.power_save and not words:
                raise bad("power_save = true needs the command that turns a node off or on ({node} is its name)", key)
        if self.supply_file and self.supply_command:
            raise bad("give supply_file or supply_command, not both", "supply_command")
        if self.supply_command:
            try:
                argv = shlex.split(self.supply_command)
            except ValueError as exc:
                raise bad(f"cannot split into words: {exc}", "supply_command") from None
            if not argv:
                raise bad("is empty", "supply_command")
        if self.renewable != "grid" and not (self.supply_file or self.supply_command):
            raise bad(f"renewable = {self.renewable!r} needs a forecast: supply_file or supply_command", "renewable")
        if self.backend == "files" and not self.state_dir:
            raise bad("the files backend needs state_dir (a folder with sinfo.json and squeue.json)", "state_dir")
        for key in ("socket", "database", "supply_file"):
            if key == "supply_file" and not self.supply_file:
                continue
            if not getattr(self, key).startswith("/"):
                raise bad("must be an absolute path", key)


def _kind(default) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, float) or default is None:
        return "a number"
    if isinstance(default, int):
        return "a whole number"
    return "a string"
