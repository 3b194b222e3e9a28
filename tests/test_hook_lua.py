"""The real job_submit.lua (rendered by ``greenslurm hook install``) run by Lua 5.1 against the real
decision service, with a FAKE slurmctld around it (tests/lua/fake_slurmctld.lua: only the ``slurm``
table of log functions and return codes).  The fake exists to inject job descriptions that sbatch
would not build on demand: every byte value, fields far beyond Slurm's own sizes, exact request
sequences for the failure counter.  The same hook against the real slurmctld is in
tests/test_slurm_hook_live.py and tests/test_hook_attacks.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.install import render_job_submit
from hook_service import ServiceProcess, recorded_decisions, write_config

LUA = shutil.which("lua5.1")
HERE = Path(__file__).parent
STATE = HERE / "data" / "slurm-hook"
pytestmark = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (scripts/test installs it with apt)")
NO_VAL = 4294967294


def lua_string(data: bytes) -> str:
    """A Lua string literal holding exactly these bytes."""
    return '"' + "".join(f"\\{b}" for b in data) + '"'


def lua_value(value) -> str:
    if isinstance(value, bytes):
        return lua_string(value)
    if isinstance(value, str):
        return lua_string(value.encode())
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua_value(k)}] = {lua_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def job(**fields) -> dict:
    desc = {"min_cpus": 1, "num_tasks": NO_VAL, "cpus_per_task": 65534, "min_nodes": NO_VAL, "max_nodes": NO_VAL,
            "pn_min_memory": 2 ** 63 - 1, "time_limit": 10, "begin_time": 0, "user_name": "ana",
            "partition": "debug", "script": "#!/bin/sh\nsleep 1\n"}
    desc.update(fields)
    return desc


def run_hook(tmp_path: Path, config: HookConfig, cases: list[dict]) -> tuple[list[list[str]], str]:
    script = tmp_path / "job_submit.lua"
    script.write_text(render_job_submit(config))
    body = ",\n".join("{job_desc = " + lua_value(c["job_desc"]) + (f", sleep = {c['sleep']}" if "sleep" in c else "")
                      + "}" for c in cases)
    (tmp_path / "cases.lua").write_text("return {\n" + body + "\n}\n")
    result = subprocess.run([LUA, str(HERE / "lua" / "fake_slurmctld.lua"), str(script), str(tmp_path / "cases.lua")],
                            capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    lines = [line.split("\t") for line in result.stdout.decode().splitlines()]
    return lines, result.stderr.decode(errors="replace")


@pytest.fixture
def service(tmp_path):
    sock = str(tmp_path / "hook.sock")
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(tmp_path / "db.sqlite"),
                               backend="files", state_dir=str(STATE), sync_interval_s=1.0)
    proc = ServiceProcess(config_path, sock, tmp_path / "service.log").start()
    try:
        yield HookConfig.from_toml(config_path), proc
    finally:
        proc.stop()


ALL_BYTES = bytes(range(256))


def test_every_byte_in_comment_name_and_environment_never_fails_open(tmp_path, service):
    config, _ = service
    impossible = {"GREENSLURM_DEADLINE": "now+60"}          # 10 minutes of work within 60 s
    cases = [
        {"job_desc": job(comment=ALL_BYTES, name=ALL_BYTES, environment=impossible)},
        {"job_desc": job(comment=b"x" * 200_000, environment=impossible)},
        {"job_desc": job(environment={"GREENSLURM_DEADLINE": b"now+60\xff"})},
        {"job_desc": job(environment={"GREENSLURM_DEADLINE": b"now+" + b"9" * 100_000})},
        {"job_desc": job(script=b"#!/bin/sh\n#SBATCH --deadline=now+60\xc0\xaf\nsleep 1\n")},
        {"job_desc": job(features=b"gpu&" * 5000, environment=impossible)},
        {"job_desc": job(comment=ALL_BYTES)},                 # no deadline: accepted, comment kept
    ]
    lines, log = run_hook(tmp_path, config, cases)
    assert [int(line[0]) for line in lines[:6]] == [2002, 2002, 2002, 2002, 2002, 2002], (lines, log)
    assert int(lines[6][0]) == 0
    # the user's own bytes stay, the service's tag is appended after " | "
    assert "\\xff" in lines[6][1] and re.search(r" \| greenslurm#\d+\.[0-9a-f]{8}: planned start", lines[6][1])
    assert "failing open" not in log
    rows = recorded_decisions(tmp_path / "db.sqlite")
    assert [r["action"] for r in rows] == ["reject"] * 6 + ["modify"]


def test_failures_are_counted_reported_and_the_hook_pauses_after_three(tmp_path):
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    cases = [{"job_desc": job()}] * 4 + [{"job_desc": job(environment={"GREENSLURM_DEADLINE": "now+1day"})}]
    lines, log = run_hook(tmp_path, config, cases)
    # fail = "open": jobs without a deadline are accepted; fail_deadline = "closed": the last is rejected
    assert [int(line[0]) for line in lines] == [0, 0, 0, 0, -1]
    assert "3 failures in a row; not asking the service for 5 s" in log
    assert log.count("paused after repeated failures") == 2      # the 4th and 5th did not even connect
    assert "(failure 5)" in log
