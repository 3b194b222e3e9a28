"""job_submit.lua and the other shipped files as text: the templates, the settings ``greenslurm hook
install`` renders into job_submit.lua (``local NAME = value`` lines), and Lua string literals both ways."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.failures_file import failures_folder


def template(name: str) -> str:
    return resources.files("greenslurm.slurm_plugin").joinpath(name).read_text()


def lua_quoted(text: str) -> str:
    r"""``text`` inside a Lua string literal's double quotes.

    >>> print(lua_quoted('/run/a "b" \\ c'))
    /run/a \"b\" \\ c
    """
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_job_submit(config: HookConfig, failures_dir: Path) -> str:
    """job_submit.lua with the config's socket, timeout and failure modes filled in, and the folder
    where it keeps the failures it has not reported yet (:mod:`greenslurm.slurm_plugin.failures_file`)."""
    text = template("job_submit.lua")
    return (text.replace("@SOCKET@", lua_quoted(config.socket))
            .replace("@FAILURES_DIR@", lua_quoted(os.path.abspath(failures_dir)))
            .replace("@TIMEOUT_MS@", f"{config.timeout_ms:g}")
            .replace("@FAIL_OPEN@", "true" if config.fail == "open" else "false")
            .replace("@FAIL_DEADLINE_OPEN@", "true" if config.fail_deadline == "open" else "false")
            .replace("@RETRY_AFTER_S@", f"{config.retry_after_s:g}"))


_LUA_SETTING = re.compile(r"^local ([A-Z_]+) = (.*?)\s*$", re.MULTILINE)


def lua_settings(text: str) -> dict[str, str]:
    """The ``local NAME = value`` lines of a Lua file whose NAME is upper case: the settings
    ``render_job_submit`` fills in (and the template's other constants).

    >>> lua_settings('local SOCKET_PATH = "/run/x.sock"\\nlocal TIMEOUT_MS = 20\\nlocal json = nil\\n')
    {'SOCKET_PATH': '"/run/x.sock"', 'TIMEOUT_MS': '20'}
    """
    return dict(_LUA_SETTING.findall(text))


def rendered_settings() -> tuple[str, ...]:
    """The names of job_submit.lua's settings that come from hook.toml (their template value is @...@)."""
    return tuple(name for name, value in lua_settings(template("job_submit.lua")).items() if "@" in value)


def installed_failures_dir(conf_dir: Path) -> Path:
    """The folder the job_submit.lua in ``conf_dir`` keeps its unreported failures in (its
    FAILURES_DIR); where ``greenslurm hook install`` makes it when there is no such script."""
    try:
        text = (conf_dir / "job_submit.lua").read_text(errors="replace")
    except OSError:
        text = ""
    named = lua_unquoted(lua_settings(text).get("FAILURES_DIR"))
    return Path(named) if named else failures_folder(conf_dir)


def lua_unquoted(literal: str | None) -> str | None:
    r"""The text of a double-quoted Lua string literal as :func:`lua_quoted` writes it; None for no
    literal.

    >>> lua_unquoted('"/etc/a \\"b\\" \\\\ c"'), lua_unquoted(None)
    ('/etc/a "b" \\ c', None)
    """
    if literal is None or len(literal) < 2 or literal[0] != '"' or literal[-1] != '"':
        return None
    return re.sub(r"\\(.)", r"\1", literal[1:-1])
