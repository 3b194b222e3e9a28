"""``greenslurm hook install`` and ``greenslurm hook check``: render the Lua hook, the systemd unit and
the hook.toml template for a site, and tell an admin whether every part is wired.

The shipped files (package data of :mod:`greenslurm.slurm_plugin`): ``job_submit.lua`` and
``cli_filter.lua`` (Slurm's Lua plugins), ``greenslurm-hook.service`` (the systemd unit that runs
``greenslurm hook serve`` as SlurmUser) and ``hook.toml`` (every setting, commented, at its default).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shlex
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from greenslurm.clustermodel import InputError
from greenslurm.slurm_plugin.backend_choice import release, resolve_backend, slurm_version
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.failures_file import (LEFTOVER_AFTER_S, MOVED, NotRegular, earlier_file, failures_folder,
                                                     folder_problems, handed_over, leftovers, make_folder, move_earlier,
                                                     moving_names, read_kept, removal)
from greenslurm.slurm_plugin.lua_script import (lua_settings, lua_unquoted, render_job_submit, rendered_settings,
                                                 template)
from greenslurm.slurm_plugin.record import read_only_uri
from greenslurm.slurm_plugin.unit import (Sandbox, command_path, exec_line as unit_exec_line, exec_words,
                                            hidden_paths, unit_settings)
from greenslurm.traces.slurm_conf_files import FAIL, SlurmConfFiles, read_slurm_conf

LUA_SOCKET_PATHS = ("/usr/lib/x86_64-linux-gnu/lua/5.1/socket/unix.so", "/usr/lib/aarch64-linux-gnu/lua/5.1/socket/unix.so",
                    "/usr/lib/lua/5.1/socket/unix.so", "/usr/local/lib/lua/5.1/socket/unix.so")
JOB_SUBMIT_LUA_SO = ("/usr/lib/x86_64-linux-gnu/slurm-wlm/job_submit_lua.so", "/usr/lib64/slurm/job_submit_lua.so",
                     "/usr/lib/slurm/job_submit_lua.so", "/usr/lib/aarch64-linux-gnu/slurm-wlm/job_submit_lua.so")
UNIT_NAME = "greenslurm-hook.service"
UNIT_CONFIG = "/etc/greenslurm/hook.toml"         # the --config the shipped unit passes
UNIT_EXECUTABLE = ("/usr/bin/env", "greenslurm")  # the greenslurm the shipped unit runs (found on PATH)
UNIT_USER = "slurm"                               # Debian's SlurmUser
SLURM_CONF_DIR = "/etc/slurm"                     # Debian's folder of slurm.conf (job_submit.lua goes beside it)
JOB_SUBMIT_MARK = "greenslurm job_submit.lua"
CLI_FILTER_MARK = "greenslurm cli_filter.lua"


# -- rendering ----------------------------------------------------------------------------------------
def slurm_conf_snippet(with_cli_filter: bool) -> str:
    lines = ["# greenslurm: ask the decision service about every submission (job_submit.lua beside slurm.conf).",
             "# Slurm keeps the last value of a key: if slurm.conf sets JobSubmitPlugins (or CliFilterPlugins)",
             "# already, add lua to that line (JobSubmitPlugins=require_timelimit,lua) instead.",
             "JobSubmitPlugins=lua"]
    if with_cli_filter:
        lines += ["# greenslurm: pass --deadline to the hook (cli_filter.lua beside slurm.conf on submit hosts)",
                  "CliFilterPlugins=lua"]
    return "\n".join(lines) + "\n"


def command_words(executable: str | tuple[str, ...]) -> tuple[str, ...]:
    """The greenslurm command as argv words: a string is one path (spaces and all), a tuple is kept.

    >>> command_words("/opt/my venv/bin/greenslurm"), command_words(UNIT_EXECUTABLE)
    (('/opt/my venv/bin/greenslurm',), ('/usr/bin/env', 'greenslurm'))
    """
    return (executable,) if isinstance(executable, str) else tuple(executable)


def render_unit(config_path: str = UNIT_CONFIG, user: str = UNIT_USER, group: str | None = None,
                executable: str | tuple[str, ...] = UNIT_EXECUTABLE) -> str:
    """The systemd unit for a config file, service user (and group: the user's primary group by default) and
    greenslurm command (a virtual environment's ``bin/greenslurm``, or ``/usr/bin/env greenslurm``); every
    path is quoted as systemd reads it (spaces, quotes, backslashes, ``%``, ``$``) and must be absolute.

    >>> unit = render_unit("/etc/gs dir/hook.toml", "slurmadm", executable="/opt/gs/bin/greenslurm")
    >>> [line for line in unit.splitlines() if line.startswith(("User=", "Group=", "ExecStart="))]
    ['User=slurmadm', 'Group=slurmadm', 'ExecStart=/opt/gs/bin/greenslurm hook serve --config "/etc/gs dir/hook.toml"']
    """
    argv = command_words(executable)
    for what, value in (("user", user), ("group", group or user)):
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\$?", value or ""):
            raise ValueError(f"the unit's {what} {value!r} is not a user or group name")
    if not config_path.startswith("/"):
        raise ValueError(f"the unit's config path {config_path!r} must be absolute")
    if not argv or not argv[0].startswith("/"):
        raise ValueError(f"the greenslurm command {argv[0] if argv else ''!r} must be an absolute path "
                         "(systemd runs it from /)")
    if group is None:
        try:
            group = grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
        except KeyError:
            group = user                      # not a user here (yet): its own group, as useradd makes it
    text = template(UNIT_NAME)
    exec_line = f"ExecStart={' '.join(UNIT_EXECUTABLE)} hook serve --config {UNIT_CONFIG}"
    assert exec_line in text, "the shipped unit's ExecStart line changed"
    return (text.replace(exec_line, "ExecStart=" + unit_exec_line((*argv, "hook", "serve", "--config", config_path)))
            .replace(f"\nUser={UNIT_USER}\n", f"\nUser={user}\n")
            .replace(f"\nGroup={UNIT_USER}\n", f"\nGroup={group}\n"))


def unit_warnings(unit_text: str, config_path: str) -> list[str]:
    """What an admin must hear about a rendered unit: files the service needs that its sandbox hides
    (ProtectHome hides /home, /root and /run/user; PrivateTmp hides /tmp and /var/tmp), and a command
    that is not there (yet)."""
    settings = unit_settings(unit_text)
    argv = exec_words(settings[("Service", "ExecStart")][-1])
    warnings = [f"{why}: the service will not start" for why in hidden_paths(argv, config_path, Sandbox.of(settings))]
    if command_path(argv) is None:
        warnings.append(f"the unit's command {' '.join(argv[:2]) if argv[0].endswith('/env') else argv[0]} "
                        "is not an executable file here (yet)")
    return warnings


def write_atomic(path: Path, text: str, mode: int = 0o644) -> Path:
    """Write ``text`` to a temporary name beside ``path`` and rename it: a reader (slurmctld, systemd)
    sees the old file or the new one, never half of one."""
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return path


POWER_PROGRAMS = {"off": "greenslurm-suspend", "on": "greenslurm-resume"}


def render_power_program(direction: str, config_path: str,
                         executable: str | tuple[str, ...] = UNIT_EXECUTABLE) -> str:
    """The SuspendProgram (``off``) or ResumeProgram (``on``) slurmctld runs with a host list; every
    path is quoted for sh (spaces, quotes, ``$``).

    >>> render_power_program("off", "/etc/greenslurm/hook.toml").splitlines()[-1]
    'exec /usr/bin/env greenslurm hook power --config /etc/greenslurm/hook.toml off "$@"'
    >>> print(render_power_program("on", "/etc/my cfg/hook.toml", "/opt/gs/bin/greenslurm").splitlines()[-1])
    exec /opt/gs/bin/greenslurm hook power --config '/etc/my cfg/hook.toml' on "$@"
    """
    argv = command_words(executable)
    for what, value in (("config path", config_path), *(("executable", word) for word in argv)):
        if not value or "\n" in value or "\0" in value:
            raise ValueError(f"the {what} {value!r} cannot go into a shell script")
    command = " ".join(shlex.quote(word) for word in (*argv, "hook", "power", "--config", config_path, direction))
    return (f"#!/bin/sh\n# greenslurm: Slurm's {'SuspendProgram' if direction == 'off' else 'ResumeProgram'} "
            f"(turns the nodes of $1 {direction})\n"
            f'exec {command} "$@"\n')


def power_snippet(config: HookConfig, dest: Path) -> str:
    """The slurm.conf lines of greenslurm's power saving (empty without ``power_save``)."""
    if not config.power_save:
        return ""
    from greenslurm.slurm_plugin.power import slurm_conf_lines
    lines = slurm_conf_lines(str(dest / POWER_PROGRAMS["off"]), str(dest / POWER_PROGRAMS["on"]), config.boot_s,
                             config.suspend_timeout_s)
    return "# greenslurm: Slurm's power saving, driven by the service (see docs/hook-green.md)\n" + "\n".join(lines) + "\n"


def install(config: HookConfig, dest: Path, with_cli_filter: bool = True, config_path: str | None = None,
            executable: str | tuple[str, ...] = UNIT_EXECUTABLE) -> list[Path]:
    """Write job_submit.lua (and cli_filter.lua) into ``dest`` (the folder of slurm.conf) and the
    slurm.conf lines into ``dest/greenslurm-slurm.conf.snippet`` (ready for an ``Include`` line); with
    ``power_save``, also the SuspendProgram and ResumeProgram (mode 0755) and their lines; return
    what was written.

    The folder where job_submit.lua keeps its unreported failures is made beside it, owned by
    slurmctld's user (``SlurmUser`` of ``dest/slurm.conf``, else of the config's ``slurm_conf``, else
    root, Slurm's default), mode 0755; failures an earlier job_submit.lua kept beside the socket are
    moved into it."""
    dest.mkdir(parents=True, exist_ok=True)
    folder = failures_folder(dest.resolve())
    slurm_uid = slurmctld_uid(dest, config)
    written_folder = make_folder(folder, slurm_uid)
    try:
        move_earlier(earlier_file(config.socket), folder, slurm_uid)
    except NotRegular:
        pass                     # not a file job_submit.lua wrote: nothing reads that name any more
    files = {"job_submit.lua": render_job_submit(config, folder),
             "greenslurm-slurm.conf.snippet": slurm_conf_snippet(with_cli_filter) + power_snippet(config, dest.resolve())}
    if with_cli_filter:
        files["cli_filter.lua"] = template("cli_filter.lua")
    written = [written_folder] + [write_atomic(dest / name, text) for name, text in files.items()]
    if config.power_save:
        path = config_path or (config.path if config.path.startswith("/") else str(Path(config.path).resolve()))
        for direction, name in POWER_PROGRAMS.items():
            written.append(write_atomic(dest / name, render_power_program(direction, path, absolute(executable)), 0o755))
    return written


def slurmctld_uid(dest: Path, config: HookConfig) -> int:
    """The uid slurmctld runs as: ``SlurmUser`` of the slurm.conf in ``dest`` (the folder
    job_submit.lua goes to), else of the config's ``slurm_conf``, else root (Slurm's default).  A
    SlurmUser that is no user here is an InputError naming the file."""
    for conf in (dest / "slurm.conf", Path(config.slurm_conf) if config.slurm_conf else None):
        if conf is not None and conf.is_file():
            user = read_slurm_conf(conf).get("slurmuser") or "root"
            uid = _uid_of(user)
            if uid is None:
                raise InputError(f"SlurmUser={user} is not a user here: the folder of job_submit.lua's failures "
                                 "must belong to it", path=str(conf), field="SlurmUser")
            return uid
    return 0


def failures_folder_warnings(dest: Path, config: HookConfig) -> list[str]:
    """What an admin must hear about the folder ``install`` made for job_submit.lua's unreported
    failures: a folder above it that someone other than root and slurmctld's user can write (they
    could swap the folder and then stall slurmctld's load of the script with a FIFO)."""
    problems = folder_problems(failures_folder(dest.resolve()), slurmctld_uid(dest, config))
    return [f"{problem}: only slurmctld's user and root may write where slurmctld reads job_submit.lua's failures"
            for problem in problems]


def absolute(executable: str | tuple[str, ...]) -> tuple[str, ...]:
    """The greenslurm the power programs run, by an absolute path: slurmctld runs SuspendProgram and
    ResumeProgram with an almost empty environment (no PATH), so ``/usr/bin/env greenslurm`` becomes
    the greenslurm on this PATH now (or this Python's ``-m greenslurm``)."""
    if command_words(executable) != UNIT_EXECUTABLE:
        return command_words(executable)
    found = shutil.which("greenslurm")
    return (str(Path(found).absolute()),) if found else (sys.executable, "-m", "greenslurm")


def power_program_warnings(config: HookConfig, executable: str | tuple[str, ...] = UNIT_EXECUTABLE) -> list[str]:
    """What an admin must hear about the SuspendProgram and ResumeProgram ``install`` writes: a
    greenslurm command that is not an executable file here (a path that is not there, or words such as
    ``python -m greenslurm`` given as one path) makes slurmctld's every run of them fail (sh's exit
    status 127), so that no node is powered down or woken and jobs wait for nodes that never come up."""
    if not config.power_save:
        return []
    argv = absolute(executable)
    if command_path(argv) is not None:
        return []
    return [f"the power programs' command {argv[0]!r} is not an executable file here (yet): slurmctld's "
            "SuspendProgram and ResumeProgram will fail (exit status 127) and no node is powered down or woken"]


def install_unit(unit_dir: Path, **unit) -> Path:
    """Write the systemd unit (:func:`render_unit` with ``unit``'s options) into ``unit_dir``."""
    unit_dir.mkdir(parents=True, exist_ok=True)
    return write_atomic(unit_dir / UNIT_NAME, render_unit(**unit))


def install_config_template(path: Path) -> Path:
    """Write the commented hook.toml template to ``path``; an existing file is never replaced
    (FileExistsError): it is the site's configuration."""
    if path.exists() or path.is_symlink():
        raise FileExistsError(f"{path} exists; the template is not written over a site's settings")
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, template("hook.toml"))


# -- slurm.conf as Slurm reads it (the reader lives with the typed slurm.conf model) ---------------------
OK, WARN = "ok", "warn"
# -- the checks ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    """One line of ``hook check``: ok, warn (works, with a limit the detail names) or fail."""

    name: str
    level: str
    detail: str

    @property
    def ok(self) -> bool:
        return self.level != FAIL


def exchange(socket_path: str, payload: bytes, timeout_s: float = 1.0) -> dict:
    """Send one request line to the service and read its answer line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(socket_path)
        s.sendall(payload)
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def ping(socket_path: str, timeout_s: float = 1.0) -> dict:
    return exchange(socket_path, b'{"op":"ping","id":0}\n', timeout_s)


def lock_holder(lock_path: str) -> int | None:
    """The pid holding a flock on ``lock_path``, read from /proc/locks (the lock is not touched, so a
    service starting at the same moment is not disturbed); None when nobody holds it."""
    try:
        st = os.stat(lock_path)
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in locks.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] == "->" or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino):
                return int(parts[4])
        except ValueError:
            continue
    return None


def _process_uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def _uid_of(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return int(name) if name.isdigit() else None


def _in_group(uid: int, gid: int) -> bool:
    try:
        user = pwd.getpwuid(uid)
        return user.pw_gid == gid or user.pw_name in grp.getgrgid(gid).gr_mem
    except KeyError:
        return False


def _can_reach(uid: int, st: os.stat_result, bits: int) -> bool:
    """Whether user ``uid`` has the permission ``bits`` (octal rwx of one class, e.g. 0o6) on ``st``."""
    if uid == 0:
        return True
    mode = stat.S_IMODE(st.st_mode)
    if uid == st.st_uid:
        return (mode >> 6) & bits == bits
    if _in_group(uid, st.st_gid):
        return (mode >> 3) & bits == bits
    return mode & bits == bits


def check(config: HookConfig, slurm_conf: Path, unit: Path | None = None) -> list[Check]:
    """Every part the hook needs, each with what was found and a level (ok, warn, fail); with ``unit``,
    the installed systemd unit too (:func:`check_unit`)."""
    checks: list[Check] = []
    add = lambda name, level, detail: checks.append(Check(name, level, detail))   # noqa: E731
    version = slurm_version(str(slurm_conf))
    relative_to_includer = release(version) is not None and release(version) <= (22, 5)
    conf = read_slurm_conf(slurm_conf, relative_to_includer=relative_to_includer)
    conf_dir = slurm_conf.parent
    if conf.files:
        add("slurm.conf", OK, "read " + ", ".join(str(p) for p in conf.files) + (f" (Slurm {version})" if version else ""))
        for level, message in conf.problems:
            add("slurm.conf Include", level, message)
    else:
        add("slurm.conf", FAIL, conf.problems[0][1])

    def plugin_setting(key: str) -> tuple[bool, str]:
        found = conf.settings.get(key.lower())
        value = found.value if found else ""
        where = f" ({found.where()})" if found else ""
        return "lua" in [v.strip() for v in value.split(",")], f"{key}={value or '(not set)'}{where}"
    if conf.files:
        has, detail = plugin_setting("JobSubmitPlugins")
        add("JobSubmitPlugins=lua", OK if has else FAIL, detail + ("" if has else ": Slurm never calls the hook"))
        has_filter, detail = plugin_setting("CliFilterPlugins")
        add("CliFilterPlugins=lua", OK if has_filter else WARN,
            detail + ("" if has_filter else ": the hook still decides every job, but sees --deadline only from "
                      "#SBATCH lines; other deadlines are checked by reconciliation after submission"))
    else:
        has_filter = False

    # hook.toml and its folder: whoever can write them can switch the checks off at the next start
    # (shadow = true, fail_deadline = "open") or move the socket away from job_submit.lua
    if Path(config.path).is_file():                      # (not for the built-in defaults)
        loose = [f"{p}: mode {stat.S_IMODE(p.stat().st_mode):04o}" for p in (Path(config.path), Path(config.path).parent)
                 if p.exists() and stat.S_IMODE(p.stat().st_mode) & 0o022]
        add("hook.toml", FAIL if loose else OK,
            "; ".join(loose) + ": writable by others, who could switch the checks off" if loose else str(config.path))

    # job_submit.lua: greenslurm's, not writable by others, rendered from this config
    lua = conf_dir / "job_submit.lua"
    failures_dir = None
    if not lua.is_file():
        add("job_submit.lua", FAIL, f"{lua}: missing (greenslurm hook install --dest {conf_dir})")
    else:
        text = lua.read_text(errors="replace")
        mode = stat.S_IMODE(lua.stat().st_mode)
        if JOB_SUBMIT_MARK not in text:
            add("job_submit.lua", FAIL, f"{lua}: not greenslurm's")
        elif mode & 0o022:
            add("job_submit.lua", FAIL, f"{lua}: mode {mode:04o}: writable by others, who could then run code in slurmctld")
        else:
            failures_dir = lua_unquoted(lua_settings(text).get("FAILURES_DIR"))
            rendered = render_job_submit(config, Path(failures_dir or failures_folder(conf_dir)))
            want, have = lua_settings(rendered), lua_settings(text)
            wrong = [f"{name} = {have.get(name, '(missing)')} there, {want[name]} from {config.path}"
                     for name in rendered_settings() if have.get(name) != want.get(name) and name != "FAILURES_DIR"]
            if failures_dir is None:
                add("job_submit.lua", FAIL, f"{lua}: keeps its unreported failures in {earlier_file(config.socket)}, "
                                            "in the service's runtime folder, whose owner can stall slurmctld's load "
                                            f"of the script with a FIFO there (run {install_command(config, conf_dir)})")
            elif wrong:
                add("job_submit.lua", FAIL, f"{lua}: " + "; ".join(wrong) + " (run greenslurm hook install again)")
            elif text != rendered:
                add("job_submit.lua", WARN, f"{lua}: settings match, but it comes from another greenslurm version "
                                            "(run greenslurm hook install again)")
            else:
                add("job_submit.lua", OK, f"{lua}: settings match {config.path}")
    if has_filter:
        filt = conf_dir / "cli_filter.lua"
        if not filt.is_file():
            add("cli_filter.lua", FAIL, f"{filt}: missing, but CliFilterPlugins=lua (client commands fail)")
        elif CLI_FILTER_MARK not in filt.read_text(errors="replace"):
            add("cli_filter.lua", WARN, f"{filt}: not greenslurm's; it must put --deadline into GREENSLURM_DEADLINE")
        else:
            add("cli_filter.lua", OK, str(filt))

    if lua.is_file() and failures_dir is not None:
        checks += _failures_checks(Path(failures_dir), conf.get("slurmuser") or "root", config, conf_dir)

    so = next((p for p in JOB_SUBMIT_LUA_SO if Path(p).exists()), None)
    add("Slurm's job_submit/lua plugin", OK if so else FAIL, so or "job_submit_lua.so not found")
    lua_socket = next((p for p in LUA_SOCKET_PATHS if Path(p).exists()), None)
    add("lua-socket for Lua 5.1", OK if lua_socket else FAIL, lua_socket or "socket/unix.so not found (apt install lua-socket)")

    try:
        name, detail = resolve_backend(config)
        missing = [c for c in ("sinfo", "squeue", "scontrol") if name == "cli" and shutil.which(c) is None]
        add("backend", FAIL if missing else OK, detail + (f"; not on PATH: {', '.join(missing)}" if missing else ""))
    except InputError as exc:
        add("backend", FAIL, exc.reason)

    if unit is not None:
        checks += check_unit(unit, config)
    checks += _runtime_checks(config, conf)
    return checks


def systemd_verify(unit: Path) -> tuple[str, str]:
    """(level, detail) of ``systemd-analyze verify`` on the unit: it parses every line as systemd does
    and checks that the command exists; a warning on stderr (an unknown key, a bad value) is a failure."""
    if shutil.which("systemd-analyze") is None:
        return WARN, "systemd-analyze is not installed here: the unit was not verified by systemd"
    try:
        done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return FAIL, f"systemd-analyze verify did not run: {exc}"
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 0 or said:
        return FAIL, "systemd-analyze verify: " + ("; ".join(said[:3]) or f"exit code {done.returncode}")
    return OK, "systemd-analyze verify: no complaint"


def check_unit(unit: Path, config: HookConfig) -> list[Check]:
    """The installed unit: it parses, its command and hook.toml exist and are visible under its sandbox
    (ProtectHome, PrivateTmp), its hook.toml is the one checked, and systemd itself accepts it."""
    name = "systemd unit"
    try:
        text = unit.read_text()
    except FileNotFoundError:
        return [Check(name, WARN, f"{unit}: not installed (greenslurm hook install --unit-dir {unit.parent}); "
                                  "a service started otherwise is checked below")]
    except (OSError, UnicodeDecodeError) as exc:
        return [Check(name, FAIL, f"{unit}: cannot read: {exc}")]
    try:
        settings = unit_settings(text)
        lines = settings.get(("Service", "ExecStart")) or []
        if len(lines) != 1:
            raise ValueError(f"{len(lines)} ExecStart= lines, expected one")
        argv = exec_words(lines[0])
    except ValueError as exc:
        return [Check(name, FAIL, f"{unit}: {exc}")]
    problems = []
    config_path = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else None
    if not argv[0].startswith("/"):
        problems.append(f"the command {argv[0]!r} is not an absolute path")
    elif command_path(argv) is None:
        problems.append(f"the command {' '.join(argv[:2]) if os.path.basename(argv[0]) == 'env' else argv[0]} "
                        "is not an executable file" + (" on the service's PATH" if os.path.basename(argv[0]) == "env" else ""))
    if config_path is None:
        problems.append("ExecStart has no --config")
    elif not Path(config_path).is_file():
        problems.append(f"its --config {config_path} is not a file")
    problems += hidden_paths(argv, config_path, Sandbox.of(settings))
    checks = [Check(name, FAIL if problems else OK, f"{unit}: " + ("; ".join(problems) if problems else
                                                                  "ExecStart=" + " ".join(argv)))]
    if config_path is not None and Path(config.path).is_file() and Path(config_path).resolve() != Path(config.path).resolve():
        checks.append(Check("systemd unit's hook.toml", WARN, f"the unit runs --config {config_path}, this check "
                                                              f"read {config.path}"))
    checks.append(Check("systemd-analyze verify", *systemd_verify(unit)))
    return checks


def install_command(config: HookConfig, conf_dir: Path) -> str:
    """The ``greenslurm hook install`` that renders job_submit.lua for ``config`` into ``conf_dir``.

    >>> install_command(HookConfig(path="/etc/greenslurm/hook.toml"), Path("/etc/my slurm"))
    "greenslurm hook install --config /etc/greenslurm/hook.toml --dest '/etc/my slurm'"
    """
    config_part = f"--config {shlex.quote(config.path)} " if config.path != HookConfig().path else ""
    return f"greenslurm hook install {config_part}--dest {shlex.quote(str(conf_dir))}"


def _failures_checks(folder: Path, slurm_user: str, config: HookConfig, conf_dir: Path) -> list[Check]:
    """The folder where job_submit.lua keeps its unreported failures (read by slurmctld, as SlurmUser,
    each time it loads the script): slurmctld's user's alone, and the file in it a regular file; the
    count waiting there; a file an earlier job_submit.lua left beside the socket."""
    checks: list[Check] = []
    slurm_uid = _uid_of(slurm_user)
    if slurm_uid is None:
        return [Check("failures folder", FAIL, f"SlurmUser={slurm_user} is not a user here")]
    problems = folder_problems(folder, slurm_uid)
    if problems:
        # install mends the folder's owner and mode, refuses a link or file in its place; a folder
        # above it is the admin's (its problem names its own command)
        mend = ""
        if any(problem.startswith(f"{folder}: ") for problem in problems):
            install = install_command(config, conf_dir)
            try:                        # a link or file where the folder goes (gone meanwhile: nothing to remove)
                in_place = not stat.S_ISDIR(os.lstat(folder).st_mode)
            except OSError:
                in_place = False
            mend = f" (run {'rm -- ' + shlex.quote(str(folder)) + ' && ' if in_place else ''}{install})"
        checks.append(Check("failures folder", FAIL, "; ".join(problems) + f": only slurmctld's user (SlurmUser="
                            f"{slurm_user}) may write where it reads{mend}"))
    else:
        try:
            kept = read_kept(folder / "unreported")
            waiting = (f"{kept.count} failure(s) of job_submit.lua {kept.earlier.split(':')[0]} not reported yet "
                       "(the next submission the service answers reports them)") if kept else "no failure waiting"
            checks.append(Check("failures folder", OK, f"{folder}: owner {_user(slurm_uid)}, mode 0755; {waiting}"))
        except NotRegular as exc:           # slurmctld's load would wait on a FIFO, or read through a link
            what, command = removal(folder / "unreported")
            checks.append(Check("failures folder", FAIL, f"{folder / 'unreported'}: {what}, not read; it holds no "
                                f"line job_submit.lua wrote (run {command})") if command else
                          Check("failures folder", OK, f"{folder / 'unreported'}: not a regular file when read, and "
                                "removed since: nothing to remove"))
        except OSError as exc:
            checks.append(Check("failures folder", FAIL, f"{folder}: cannot read: {exc.strerror or exc}"))
    checks += _leftover_checks(folder, config)
    old = earlier_file(config.socket)
    for moving in moving_names(old):
        try:
            kept = read_kept(moving)
        except OSError:
            kept = None
        holding = f"{kept.count} unreported failure(s) of job_submit.lua {kept.instance}" if kept else "no line"
        checks.append(Check("earlier failures file", WARN, f"{moving}: holds {holding}, moved away by greenslurm hook "
                            f"install while an earlier job_submit.lua wrote {old} again; that newer line counts "
                            f"these too when it names the same load (then run rm -- {shlex.quote(str(moving))}), else "
                            f"run mv -n -- {shlex.quote(str(moving))} {shlex.quote(str(old))} and install again"))
    if os.path.lexists(old):
        moves = f"moves its failures into {folder}"
        try:
            kept = read_kept(old)
            holding = f" holding {kept.count} unreported failure(s)" if kept else ""
            before = read_kept(folder / MOVED) if kept else None
            if before is not None and before.instance == kept.instance:
                after, upto = handed_over(kept, before).own_totals
                holding += (f" of job_submit.lua {kept.instance}, {kept.count - (upto - after)} of them moved in before "
                            f"({folder / MOVED})")
                moves = f"hands the {upto - after} beyond them to the service, which counts them once"
        except OSError:
            holding = " (not a regular file)"
        checks.append(Check("earlier failures file", WARN, f"{old}: left by an earlier job_submit.lua{holding}; "
                            f"nothing reads it now: {install_command(config, conf_dir)} {moves}"))
    return checks


def _leftover_checks(folder: Path, config: HookConfig) -> list[Check]:
    """The lines job_submit.lua wrote under a fresh name and never renamed over ``unreported``
    (:class:`~greenslurm.slurm_plugin.failures_file.Leftover`): how many failures each holds that no
    load reads back, and what counts them."""
    checks = []
    counted = _counted_leftovers(config)
    for left in leftovers(folder, time.time()):
        path = shlex.quote(str(left.path))
        if left.problem:
            what, command = removal(left.path)
            checks.append(Check("leftover line", FAIL, f"{left.path}: {what}, not read; job_submit.lua never writes "
                                                       f"one (run {command})") if command else
                          Check("leftover line", OK, f"{left.path}: not a regular file when listed, and removed "
                                                     "since: nothing to remove"))
        elif left.kept is None:
            checks.append(Check("leftover line", WARN, f"{left.path}: holds no whole line (cut by a full disk or a kill "
                                                       f"while it was written): no failure to count (run rm -- {path})"))
        elif left.own is None:
            checks.append(Check("leftover line", WARN, f"{left.path}: an earlier job_submit.lua's line ({left.kept.count} "
                                f"failure(s) of {left.kept.instance}), which does not say how many of them its file "
                                "held already: not counted; compare it with the count the next load reported (the "
                                f"service's log), then run rm -- {path}"))
        elif counted is not None and left.path.name in counted:
            checks.append(Check("leftover line", OK, f"{left.path}: its {left.own} failure(s) counted by the service "
                                                     f"already (run rm -- {path})"))
        else:
            what = (f"handed over by greenslurm hook install (failures an earlier job_submit.lua "
                    f"{left.kept.instance[:14]} wrote again after their move)" if left.handed_over else
                    f"written {_age(left.age_s)} by job_submit.lua {left.kept.instance} and never renamed "
                    "(slurmctld stopped in between)")
            when = (f"once it is {LEFTOVER_AFTER_S:.0f} s old, at a sync" if not left.settled else
                    f"at its next sync (run systemctl restart {UNIT_NAME} to count them now)")
            checks.append(Check("leftover line", WARN, f"{left.path}: {what}: holds {left.own} failure(s) no load "
                                                       f"reads back; the service counts them {when}, once"))
    return checks


def _age(age_s: float) -> str:
    """A leftover line's age as hook check says it (a negative one: written before the clock went back).

    >>> _age(75.2), _age(-3600.0)
    ('75 s ago', '3600 s ahead of the clock (before it was set back)')
    """
    return f"{age_s:.0f} s ago" if age_s >= 0 else f"{-age_s:.0f} s ahead of the clock (before it was set back)"


def _counted_leftovers(config: HookConfig) -> set[str] | None:
    """The leftover lines the record says were counted; None when the record cannot be read here."""
    try:
        db = sqlite3.connect(read_only_uri(config.database), uri=True)
        try:
            return {row[0] for row in db.execute("SELECT name FROM hook_leftovers")}
        finally:
            db.close()
    except sqlite3.Error:
        return None


def _runtime_checks(config: HookConfig, conf: SlurmConfFiles) -> list[Check]:
    """The runtime folder, the lock, the socket, the record and the service itself."""
    checks: list[Check] = []
    add = lambda name, level, detail: checks.append(Check(name, level, detail))   # noqa: E731
    sock, lock = Path(config.socket), Path(config.lock_path)
    holder = lock_holder(str(lock))
    holder_uid = _process_uid(holder) if holder is not None else None
    slurm_user = conf.get("slurmuser") or "root"          # Slurm's default SlurmUser
    slurm_uid = _uid_of(slurm_user)
    if holder_uid is not None:
        service_uid, whose = holder_uid, "the running service"
    elif config.socket_owner and _uid_of(config.socket_owner) is not None:
        service_uid, whose = _uid_of(config.socket_owner), "socket_owner"
    else:
        service_uid, whose = slurm_uid, f"SlurmUser={slurm_user}, as the systemd unit runs it"

    runtime = sock.parent
    try:
        st = runtime.stat()
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o022:
            add("runtime folder", FAIL, f"{runtime}: mode {mode:04o}: others can replace the socket")
        elif service_uid is not None and st.st_uid != service_uid:
            add("runtime folder", FAIL, f"{runtime}: owned by {_user(st.st_uid)}, the service runs as "
                                        f"{_user(service_uid)} ({whose})")
        else:
            add("runtime folder", OK, f"{runtime}: mode {mode:04o}, owner {_user(st.st_uid)}")
    except FileNotFoundError:
        add("runtime folder", FAIL, f"{runtime}: missing (the unit's RuntimeDirectory= makes it when the service starts)")

    if holder is None:
        add("lock", FAIL, f"{lock}: no service holds it (is greenslurm-hook running?)")
    else:
        mode = stat.S_IMODE(lock.stat().st_mode)
        add("lock", OK if mode & 0o077 == 0 else FAIL,
            f"{lock}: held by pid {holder}" + (f", user {_user(holder_uid)}" if holder_uid is not None else "")
            + ("" if mode & 0o077 == 0 else f"; mode {mode:04o}, expected 0600"))

    try:
        st = sock.stat()
        if not stat.S_ISSOCK(st.st_mode):
            raise FileNotFoundError
        mode = stat.S_IMODE(st.st_mode)
        want = 0o660 if config.socket_group else 0o600
        problems = []
        if mode != want:
            problems.append(f"mode {mode:04o}, expected {want:04o}" + (" (socket_group is set)" if config.socket_group else ""))
        if config.socket_group:
            try:
                if st.st_gid != grp.getgrnam(config.socket_group).gr_gid:
                    problems.append(f"group {_group(st.st_gid)}, expected {config.socket_group}")
            except KeyError:
                problems.append(f"socket_group {config.socket_group!r} is not a group here")
        add("socket", FAIL if problems else OK,
            f"{sock}: " + ("; ".join(problems) if problems else f"mode {mode:04o}, owner {_user(st.st_uid)}, group {_group(st.st_gid)}"))
        if slurm_uid is None:
            add("slurmctld can connect", FAIL, f"SlurmUser={slurm_user} is not a user here")
        else:
            reach = all(_can_reach(slurm_uid, folder.stat(), 0o1) for folder in sock.parents) and _can_reach(slurm_uid, st, 0o6)
            add("slurmctld can connect", OK if reach else FAIL,
                f"slurmctld runs as SlurmUser {_user(slurm_uid)}" + ("" if reach else
                    f": it cannot open {sock} (run the service as that user, or set socket_group to one of its groups)"))
        try:
            answer = ping(config.socket)
            add("decision service answers", OK if answer.get("ok") else FAIL,
                f"view loaded: {answer.get('view')}, shadow: {answer.get('shadow')}")
            if answer.get("forecast"):
                # the renewable forecast: how old, whether it is used, the last error reading it
                error = answer.get("forecast_error")
                add("forecast", WARN if error or not (answer.get("forecast_use") or "").startswith("forecast ") else OK,
                    f"{answer.get('forecast_use') or answer['forecast']}" + (f"; last read failed: {error}" if error else ""))
        except (OSError, ValueError) as exc:
            add("decision service answers", FAIL, f"{sock}: {exc}")
    except FileNotFoundError:
        add("decision service answers", FAIL, f"{sock}: no socket (is `greenslurm hook serve` running?)")

    database = Path(config.database)
    found = [p for p in (database, Path(f"{database}-wal"), Path(f"{database}-shm")) if p.exists()]
    if not found:
        add("record", WARN, f"{database}: not created yet (the service creates it, 0600, when it starts)")
    else:
        loose = [f"{p.name} {stat.S_IMODE(p.stat().st_mode):04o}" for p in found if stat.S_IMODE(p.stat().st_mode) != 0o600]
        owners = {p.stat().st_uid for p in found}
        foreign = service_uid is not None and owners != {service_uid}
        detail = f"{database}: " + ", ".join(p.name for p in found)
        if loose:
            add("record", FAIL, f"{detail}: not 0600: {', '.join(loose)} (users' job details are readable)")
        elif foreign:
            add("record", FAIL, f"{detail}: owned by {', '.join(_user(u) for u in sorted(owners))}, the service runs as "
                                f"{_user(service_uid)} ({whose})")
        else:
            add("record", OK, f"{detail}: mode 0600")
    return checks
