"""``greenslurm hook install`` and ``greenslurm hook check``: render the Lua hook for a config, and
tell an admin whether every part is wired."""

from __future__ import annotations

import json
import os
import socket
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from greenslurm.slurm_plugin.service import HookConfig

LUA_SOCKET_PATHS = ("/usr/lib/x86_64-linux-gnu/lua/5.1/socket/unix.so", "/usr/lib/aarch64-linux-gnu/lua/5.1/socket/unix.so",
                    "/usr/lib/lua/5.1/socket/unix.so", "/usr/local/lib/lua/5.1/socket/unix.so")
JOB_SUBMIT_LUA_SO = ("/usr/lib/x86_64-linux-gnu/slurm-wlm/job_submit_lua.so", "/usr/lib64/slurm/job_submit_lua.so",
                     "/usr/lib/slurm/job_submit_lua.so", "/usr/lib/aarch64-linux-gnu/slurm-wlm/job_submit_lua.so")


def template(name: str) -> str:
    return resources.files("greenslurm.slurm_plugin").joinpath(name).read_text()


def render_job_submit(config: HookConfig) -> str:
    """job_submit.lua with the config's socket, timeout and failure mode filled in."""
    text = template("job_submit.lua")
    socket_path = config.socket.replace("\\", "\\\\").replace('"', '\\"')
    return (text.replace("@SOCKET@", socket_path).replace("@TIMEOUT_MS@", f"{config.timeout_ms:g}")
            .replace("@FAIL_OPEN@", "true" if config.fail == "open" else "false"))


def slurm_conf_snippet(with_cli_filter: bool) -> str:
    lines = ["# greenslurm: ask the decision service about every submission (job_submit.lua beside slurm.conf)",
             "JobSubmitPlugins=lua"]
    if with_cli_filter:
        lines += ["# greenslurm: pass --deadline to the hook (cli_filter.lua beside slurm.conf)", "CliFilterPlugins=lua"]
    return "\n".join(lines) + "\n"


def install(config: HookConfig, dest: Path, with_cli_filter: bool = True) -> list[Path]:
    """Write job_submit.lua (and cli_filter.lua) into ``dest`` (the folder of slurm.conf) and the
    slurm.conf lines into ``dest/greenslurm-slurm.conf.snippet``; return what was written.  The Lua
    files are written to a temporary name and renamed, so slurmctld never reads a half-written one."""
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    files = {"job_submit.lua": render_job_submit(config), "greenslurm-slurm.conf.snippet": slurm_conf_snippet(with_cli_filter)}
    if with_cli_filter:
        files["cli_filter.lua"] = template("cli_filter.lua")
    for name, text in files.items():
        path = dest / name
        tmp = dest / f".{name}.tmp"
        tmp.write_text(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        written.append(path)
    return written


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def _slurm_conf_settings(path: Path) -> dict[str, str]:
    settings: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep:
                settings.setdefault(key.lower(), value)
    return settings


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


def check(config: HookConfig, slurm_conf: Path) -> list[Check]:
    """Every part the hook needs, each with what was found."""
    checks = []
    conf_dir = slurm_conf.parent
    if slurm_conf.is_file():
        settings = _slurm_conf_settings(slurm_conf)
        plugins = settings.get("jobsubmitplugins", "")
        checks.append(Check("slurm.conf has JobSubmitPlugins=lua", "lua" in plugins.split(","),
                            f"{slurm_conf}: JobSubmitPlugins={plugins or '(not set)'}"))
        cli = settings.get("clifilterplugins", "")
        checks.append(Check("slurm.conf has CliFilterPlugins=lua (optional, for --deadline)", "lua" in cli.split(","),
                            f"CliFilterPlugins={cli or '(not set)'}"))
    else:
        checks.append(Check("slurm.conf has JobSubmitPlugins=lua", False, f"{slurm_conf}: no such file"))
    lua = conf_dir / "job_submit.lua"
    if lua.is_file():
        text = lua.read_text(errors="replace")
        mine = "greenslurm job_submit.lua" in text
        points = f'"{config.socket}"' in text
        checks.append(Check("job_submit.lua is greenslurm's and uses this socket", mine and points,
                            f"{lua}: " + ("ok" if mine and points else "not greenslurm's" if not mine
                                          else f"renders another socket than {config.socket}")))
    else:
        checks.append(Check("job_submit.lua is greenslurm's and uses this socket", False, f"{lua}: missing"))
    so = next((p for p in JOB_SUBMIT_LUA_SO if Path(p).exists()), None)
    checks.append(Check("Slurm's job_submit/lua plugin is installed", so is not None, so or "job_submit_lua.so not found"))
    lua_socket = next((p for p in LUA_SOCKET_PATHS if Path(p).exists()), None)
    checks.append(Check("lua-socket (socket.unix for Lua 5.1) is installed", lua_socket is not None,
                        lua_socket or "socket/unix.so not found (apt install lua-socket)"))
    path = Path(config.socket)
    try:
        st = path.stat()
        if not stat.S_ISSOCK(st.st_mode):
            raise FileNotFoundError
        mode = stat.S_IMODE(st.st_mode)
        checks.append(Check("socket is private (0600, or 0660 with socket_group)", mode in (0o600, 0o660)
                            and not mode & 0o007, f"{path}: mode {mode:04o}, uid {st.st_uid}, gid {st.st_gid}"))
        try:
            answer = ping(config.socket)
            checks.append(Check("decision service answers", bool(answer.get("ok")),
                                f"view loaded: {answer.get('view')}, shadow: {answer.get('shadow')}"))
        except (OSError, ValueError) as exc:
            checks.append(Check("decision service answers", False, f"{path}: {exc}"))
    except FileNotFoundError:
        checks.append(Check("decision service answers", False, f"{path}: no socket (is `greenslurm hook serve` running?)"))
    return checks
