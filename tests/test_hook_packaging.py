"""Shipping the hook like a Slurm plugin: the systemd unit, the hook.toml template, the package data,
``greenslurm hook install`` and ``greenslurm hook check`` (slurm.conf with its Include files, levels,
the backend, the runtime folder, lock, socket and record of a real running service)."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenslurm.cli import main
from greenslurm.clustermodel import InputError
from greenslurm.slurm_plugin import install as hook_install
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.install import FAIL, OK, WARN, check, resolve_backend
from greenslurm.slurm_plugin.unit import Sandbox, exec_line, exec_words, hidden_paths
from greenslurm.traces.slurm_conf import logical_lines, read_slurm_conf

from hook_service import ServiceProcess, write_config
from slurm_cluster import ensure_user, shared_root

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "slurm_plugin"
HOOK_STATE = Path(__file__).parent / "data" / "slurm-hook"       # a recorded sinfo.json / squeue.json


def levels(checks) -> dict[str, str]:
    return {c.name: c.level for c in checks}


# -- slurm.conf and its Include files ------------------------------------------------------------------
def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_nested_relative_includes_follow_the_slurm_release(tmp_path):
    conf = write(tmp_path / "slurm.conf", "ClusterName=Blue\nInclude sub/a.conf\nInclude %c.conf\n")
    write(tmp_path / "sub" / "a.conf", "Include b.conf\n")
    write(tmp_path / "sub" / "b.conf", "JobSubmitPlugins=lua        # beside a.conf: Slurm 22.05\n")
    write(tmp_path / "b.conf", "JobSubmitPlugins=require_timelimit   # beside slurm.conf: Slurm 23.02+\n")
    write(tmp_path / "blue.conf", "CliFilterPlugins=lua\n")          # %c: the ClusterName, lower case
    old = read_slurm_conf(conf, relative_to_includer=True)
    new = read_slurm_conf(conf, relative_to_includer=False)
    assert [p.relative_to(tmp_path).as_posix() for p in old.files] == ["slurm.conf", "sub/a.conf", "sub/b.conf", "blue.conf"]
    assert (old.get("jobsubmitplugins"), new.get("JobSubmitPlugins")) == ("lua", "require_timelimit")
    assert old.get("clifilterplugins") == "lua" and not old.problems and not new.problems
    assert old.settings["jobsubmitplugins"].where() == f"{tmp_path / 'sub' / 'b.conf'}:1"


def test_the_last_value_wins_as_in_slurm(tmp_path):
    write(tmp_path / "site.conf", "JobSubmitPlugins=require_timelimit\n")
    conf = write(tmp_path / "slurm.conf", "JobSubmitPlugins=lua\nInclude site.conf\n"
                                          "PartitionName=p Nodes=ALL Default=YES\n")
    found = read_slurm_conf(conf)
    assert found.get("jobsubmitplugins") == "require_timelimit"       # the Include came later
    assert found.get("nodes") is None and found.get("default") is None  # a partition line's keys are its own
    assert levels(check(HookConfig(), conf))["JobSubmitPlugins=lua"] == FAIL
    write(tmp_path / "slurm.conf", "Include site.conf\nJobSubmitPlugins = \"require_timelimit,lua\"\n")
    assert levels(check(HookConfig(), conf))["JobSubmitPlugins=lua"] == OK


def test_an_include_cycle_is_reported_and_reading_ends(tmp_path):
    conf = write(tmp_path / "slurm.conf", "Include a.conf\nJobSubmitPlugins=lua\n")
    write(tmp_path / "a.conf", "Include b.conf\n")
    write(tmp_path / "b.conf", "Include a.conf\nInclude slurm.conf\nCliFilterPlugins=lua\n")
    found = read_slurm_conf(conf)
    assert [p.name for p in found.files] == ["slurm.conf", "a.conf", "b.conf"]
    assert [level for level, _ in found.problems] == [FAIL, FAIL]
    assert "slurm.conf -> a.conf -> b.conf -> a.conf" in found.problems[0][1]
    assert found.get("clifilterplugins") == "lua" and found.get("jobsubmitplugins") == "lua"


def test_wildcards_and_missing_files_fail_as_in_slurm(tmp_path):
    conf = write(tmp_path / "slurm.conf", "JobSubmitPlugins=lua\nInclude conf.d/*.conf\nInclude gone.conf\n")
    write(tmp_path / "conf.d" / "filter.conf", "CliFilterPlugins=lua\n")
    found = read_slurm_conf(conf)
    assert found.get("clifilterplugins") is None            # Slurm does not read conf.d/filter.conf either
    (wild, wild_text), (gone, gone_text) = found.problems
    assert (wild, gone) == (FAIL, FAIL)
    assert "expands no wildcards" in wild_text and f"{tmp_path / 'gone.conf'}: no such file" in gone_text
    result = levels(check(HookConfig(), conf))
    assert result["slurm.conf Include"] == FAIL and result["CliFilterPlugins=lua"] == WARN


@pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm's client commands are not installed")
def test_real_slurm_reads_nested_includes_as_we_do(tmp_path):
    """This host's Slurm parses the same files: a nested relative Include resolved the way
    read_slurm_conf resolves it for this release loads (sinfo --version reads slurm.conf whole)."""
    version = hook_install.slurm_version()
    includer_relative = hook_install.release(version) <= (22, 5)
    conf = write(tmp_path / "slurm.conf", "ClusterName=t\nSlurmctldHost=localhost\nInclude sub/a.conf\n")
    write(tmp_path / "sub" / "a.conf", "Include b.conf\n")
    write((tmp_path / "sub" if includer_relative else tmp_path) / "b.conf", "JobSubmitPlugins=lua\n")
    found = read_slurm_conf(conf, relative_to_includer=includer_relative)
    assert not found.problems and found.get("jobsubmitplugins") == "lua"
    done = subprocess.run(["sinfo", "--version"], env=dict(os.environ, SLURM_CONF=str(conf)), capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and version in done.stdout, done.stderr


def test_comments_continuations_and_quotes():
    assert logical_lines("Include a.conf # x\n  \n#JobSubmitPlugins=lua\nA=\\\nB\n") == [
        (1, "Include a.conf "), (4, "A=B")]


# -- levels and exit codes --------------------------------------------------------------------------------
def test_a_missing_cli_filter_warns_and_a_missing_job_submit_plugin_fails(tmp_path):
    conf = write(tmp_path / "slurm.conf", "JobSubmitPlugins=lua\n")
    result = levels(check(HookConfig(), conf))
    assert (result["JobSubmitPlugins=lua"], result["CliFilterPlugins=lua"]) == (OK, WARN)
    write(tmp_path / "slurm.conf", "JobSubmitPlugins=require_timelimit\nCliFilterPlugins=lua\n")
    result = levels(check(HookConfig(), conf))
    assert (result["JobSubmitPlugins=lua"], result["CliFilterPlugins=lua"]) == (FAIL, OK)
    assert result["cli_filter.lua"] == FAIL                   # CliFilterPlugins=lua needs the file
    assert levels(check(HookConfig(), tmp_path / "nope.conf"))["slurm.conf"] == FAIL


# -- the backend ----------------------------------------------------------------------------------------------
@pytest.fixture
def no_pyslurm(monkeypatch):
    """pyslurm hidden from this process (the test environment builds it): ``None`` in sys.modules is
    how Python marks a module that cannot be imported, and find_spec then finds none."""
    monkeypatch.setitem(sys.modules, "pyslurm", None)


def test_auto_without_pyslurm_is_cli_in_one_line(no_pyslurm):
    assert resolve_backend(HookConfig()) == ("cli", "auto -> cli: pyslurm is not installed; Slurm's JSON commands are used")
    assert resolve_backend(HookConfig(backend="cli"))[0] == "cli"


def test_pyslurm_requested_but_absent_is_one_line_exit_2(tmp_path, capsys, no_pyslurm, monkeypatch):
    # the check's table wraps its cells at the terminal's width (80 without a terminal) and its title holds
    # tmp_path, whose length varies (pytest-xdist adds popen-gwN/): a width of our own keeps a cell whole
    monkeypatch.setenv("COLUMNS", "250")
    path = write_config(tmp_path / "hook.toml", backend="pyslurm", socket=str(tmp_path / "s.sock"),
                        database=str(tmp_path / "r.sqlite"))
    with pytest.raises(InputError, match=r'backend = "pyslurm": pyslurm is not installed') as info:
        resolve_backend(HookConfig.from_toml(path))
    assert info.value.path == str(path) and info.value.field == "backend" and "\n" not in str(info.value)
    assert main(["hook", "serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pyslurm" in err and "Traceback" not in err
    assert main(["hook", "check", "--config", str(path), "--slurm-conf", str(tmp_path / "slurm.conf")]) == 1
    assert 'backend = "pyslurm": pyslurm is not installed' in capsys.readouterr().out.replace("\n", " ").replace("│", "")


def test_the_real_pyslurm_without_a_usable_slurm_conf_is_probed_without_killing_the_caller(tmp_path, monkeypatch):
    # import pyslurm without a configuration it can read ends the importing process (exit 1): the
    # probe runs in a subprocess, so this test process lives on to see "auto -> cli" with Slurm's reason
    assert importlib.util.find_spec("pyslurm") is not None, "scripts/test builds pyslurm into the test environment"
    monkeypatch.delenv("SLURM_CONF", raising=False)
    empty = tmp_path / "slurm.conf"
    empty.write_text("")                      # Slurm: "ClusterName needs to be specified", then fatal
    assert resolve_backend(HookConfig(slurm_conf=str(empty))) == (
        "cli", "auto -> cli: pyslurm does not import (fatal: Unable to process configuration file); "
               "Slurm's JSON commands are used")
    missing = tmp_path / "nope.conf"          # Slurm would retry it for a minute: refused at once
    assert resolve_backend(HookConfig(slurm_conf=str(missing))) == (
        "cli", f"auto -> cli: pyslurm cannot read the Slurm configuration {missing} (no such file); "
               "Slurm's JSON commands are used")
    with pytest.raises(InputError, match=r'backend = "pyslurm": pyslurm does not import \(fatal: Unable to process'):
        resolve_backend(HookConfig(backend="pyslurm", slurm_conf=str(empty)))
    assert "pyslurm" not in sys.modules or sys.modules["pyslurm"] is None     # never imported here


@pytest.fixture
def fake_pyslurm(tmp_path, monkeypatch):
    """FAKE pyslurm (a stub package on sys.path) to inject what this host cannot give on demand: a
    pyslurm of a chosen version, or one that fails to import.  The Slurm version is the real one."""
    def make(version: str | None = None, error: str | None = None) -> None:
        package = tmp_path / "fake-pyslurm" / "pyslurm"
        package.mkdir(parents=True, exist_ok=True)
        body = f"raise ImportError({error!r})\n" if error else f"__version__ = {version!r}\n"
        (package / "__init__.py").write_text(body)
        monkeypatch.syspath_prepend(str(package.parent))
        sys.modules.pop("pyslurm", None)
    yield make
    sys.modules.pop("pyslurm", None)


@pytest.mark.skipif(hook_install.slurm_version() is None, reason="slurmctld and sinfo are not installed")
def test_auto_takes_pyslurm_only_for_this_slurm_release(fake_pyslurm):
    slurm = hook_install.slurm_version()
    major, minor = hook_install.release(slurm)
    fake_pyslurm(f"{major}.{minor}.0")
    assert resolve_backend(HookConfig()) == ("pyslurm", f"auto -> pyslurm {major}.{minor}.0, matching Slurm {slurm}")
    fake_pyslurm(f"{major + 3}.11.0")
    name, detail = resolve_backend(HookConfig())
    assert name == "cli" and detail == (f"auto -> cli: pyslurm {major + 3}.11.0 is built for another Slurm release "
                                        f"than this Slurm {slurm}; Slurm's JSON commands are used")
    with pytest.raises(InputError, match=f"needs a pyslurm {major}.{minor}.x"):
        resolve_backend(HookConfig(backend="pyslurm"))
    fake_pyslurm(error="libslurm.so.38: cannot open shared object file")
    assert resolve_backend(HookConfig()) == (
        "cli", "auto -> cli: pyslurm does not import (libslurm.so.38: cannot open shared object file); "
               "Slurm's JSON commands are used")


# -- the systemd unit ----------------------------------------------------------------------------------------
def unit_settings(text: str) -> dict[tuple[str, str], list[str]]:
    """A unit file as {(section, key): [values]}; a line outside a section or without '=' is an error."""
    from greenslurm.slurm_plugin.unit import unit_settings as parse
    try:
        return parse(text)
    except ValueError as exc:
        raise AssertionError(str(exc)) from None


REQUIRED_UNIT = {("Service", "User"): "slurm", ("Service", "Group"): "slurm", ("Service", "Restart"): "on-failure",
                 ("Service", "RuntimeDirectory"): "greenslurm", ("Service", "RuntimeDirectoryMode"): "0750",
                 ("Service", "StateDirectory"): "greenslurm", ("Service", "StateDirectoryMode"): "0700",
                 ("Service", "NoNewPrivileges"): "yes", ("Service", "ProtectSystem"): "strict",
                 ("Service", "ProtectHome"): "yes", ("Service", "PrivateTmp"): "yes",
                 ("Service", "ExecStart"): "/usr/bin/env greenslurm hook serve --config /etc/greenslurm/hook.toml",
                 ("Install", "WantedBy"): "multi-user.target"}


def unit_problems(text: str) -> list[str]:
    settings = unit_settings(text)
    problems = [f"{key}={settings.get(key)}, expected {value}" for key, value in REQUIRED_UNIT.items()
                if settings.get(key) != [value]]
    families = set(" ".join(settings.get(("Service", "RestrictAddressFamilies"), [""])).split())
    if "AF_UNIX" not in families or families - {"AF_UNIX", "AF_INET", "AF_INET6"}:
        problems.append(f"RestrictAddressFamilies={families}")
    config = HookConfig()
    # the unit's folders are the ones hook.toml's defaults use, and the service may write there
    if Path(config.socket).parent != Path("/run") / settings[("Service", "RuntimeDirectory")][0]:
        problems.append("RuntimeDirectory is not the default socket's folder")
    if Path(config.database).parent != Path("/var/lib") / settings[("Service", "StateDirectory")][0]:
        problems.append("StateDirectory is not the default record's folder")
    writable = " ".join(settings.get(("Service", "ReadWritePaths"), [""])).split()
    if str(Path(config.database).parent) not in writable:
        problems.append("ReadWritePaths lacks the record's folder")
    return problems


def test_the_shipped_unit_has_every_setting():
    assert unit_problems((PLUGIN / "greenslurm-hook.service").read_text()) == []


def test_the_unit_check_catches_a_broken_unit():
    good = (PLUGIN / "greenslurm-hook.service").read_text()
    assert unit_problems(good.replace("RuntimeDirectory=greenslurm\n", "RuntimeDirectory=hook\n")) != []
    assert unit_problems(good.replace("RestrictAddressFamilies=AF_UNIX", "RestrictAddressFamilies=AF_PACKET AF_UNIX"))
    with pytest.raises(AssertionError, match="line"):
        unit_settings("[Service]\nUser slurm\n")


@pytest.mark.parametrize("options", [{}, {"user": "root", "executable": (sys.executable, "-m", "greenslurm"),
                                          "config_path": "/srv/gs/hook.toml"}])
def test_systemd_analyze_verifies_the_unit_without_a_warning(tmp_path, options):
    unit = tmp_path / hook_install.UNIT_NAME
    unit.write_text(hook_install.render_unit(**options))
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    # unknown keys and bad values are warnings on stderr with exit code 0: both must be clean
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
    bad = tmp_path / "bad" / hook_install.UNIT_NAME
    write(bad, unit.read_text().replace("ProtectHome=yes", "ProtectHome=sometimes"))
    done = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "sometimes" in done.stderr                  # the verification can fail


# every byte systemd's command-line syntax treats specially, in folder names an admin could choose
CRAFTED = ["cfg dir", 'say "hi"', "it's", "back\\slash", "100%", "%n", "%%h", "$HOME", "${HOME}x", "$$", ";", "a ; b",
           "-dash", "@at", "tab\\t", "caf\u00e9 \u2603", "  two  spaces ", "\\"]


@pytest.fixture
def visible_dir():
    """A fresh folder the unit's sandbox does not hide (not under /tmp, /var/tmp, /home, /root)."""
    folder = Path(tempfile.mkdtemp(prefix="greenslurm-unit-", dir="/srv"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def executable_file(path: Path) -> Path:
    write(path, "#!/bin/sh\nexit 0\n")
    os.chmod(path, 0o755)
    return path


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_paths_reach_systemd_as_written(visible_dir, name):
    command = executable_file(visible_dir / name / "bin" / "greenslurm")
    config = executable_file(visible_dir / name / "hook.toml")
    for argv in ((str(command),), (str(config),)):             # systemd checks that the command exists
        if any(c in name for c in "\"'\\"):
            # systemd runs no command whose path holds a quote or backslash: refused in one line
            with pytest.raises(ValueError, match="symlink"):
                hook_install.render_unit(str(config), "root", executable=argv)
            argv = (str(executable_file(visible_dir / "plain" / "greenslurm")),)
        text = hook_install.render_unit(str(config), "root", executable=argv)
        exec_start = unit_settings(text)[("Service", "ExecStart")]
        assert exec_words(exec_start[0]) == [*argv, "hook", "serve", "--config", str(config)]
        unit = write(visible_dir / "units" / hook_install.UNIT_NAME, text)
        # systemd reads the command's path back exactly (else: "Command ... is not executable"), and no
        # specifier, escape or variable is left for it to complain about
        done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stderr.strip() == "", (name, text.splitlines()[29], done.stderr)
        assert hook_install.unit_warnings(text, str(config)) == []
    # and hook check reads the installed unit back: the command and hook.toml are there and visible
    unit_checks = {c.name: c for c in hook_install.check_unit(unit, HookConfig())}
    assert unit_checks["systemd unit"].level == OK, unit_checks
    assert unit_checks["systemd-analyze verify"].level == OK, unit_checks


def test_the_old_unquoted_unit_fails_systemd_verify(visible_dir):
    # the unit as written before quoting: the path with a space splits into two words
    command = executable_file(visible_dir / "my venv" / "bin" / "greenslurm")
    text = hook_install.render_unit("/etc/gs/hook.toml", "root", executable=(str(command),))
    unit = write(visible_dir / hook_install.UNIT_NAME, text.replace(f'"{command}"', str(command)))
    assert hook_install.systemd_verify(unit)[0] == FAIL


@given(st.lists(st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1), min_size=1, max_size=5))
def test_exec_words_read_back_any_argv(words):
    argv = ["/opt/" + words[0].replace('"', "").replace("'", "").replace("\\", ""), *words[1:]]
    assert exec_words(exec_line(argv)) == argv


@pytest.mark.parametrize("bad", ["a\nExecStartPre=/bin/rm", "tab\there", "\x00", "\udcff"])
def test_control_characters_and_broken_utf8_are_refused(bad):
    with pytest.raises(ValueError):
        hook_install.render_unit("/etc/" + bad, "root")


def test_a_relative_greenslurm_is_one_line_exit_2(tmp_path, capsys):
    units = tmp_path / "units"
    assert main(["hook", "install", "--greenslurm", "venv/bin/greenslurm", "--unit-dir", str(units)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--greenslurm" in err and "absolute" in err, err
    assert "Traceback" not in err and not units.exists()
    assert main(["hook", "install", "--greenslurm", "greenslurm", "--print", "unit"]) == 2


@pytest.mark.parametrize("command, config, hidden", [
    ("/home/ann/venv/bin/greenslurm", "/etc/gs/hook.toml", ["/home/ann/venv/bin/greenslurm is under /home, which ProtectHome"]),
    ("/root/venv/bin/greenslurm", "/etc/gs/hook.toml", ["under /root, which ProtectHome"]),
    ("/opt/gs/bin/greenslurm", "/tmp/gs/hook.toml", ["/tmp/gs/hook.toml is under /tmp, which PrivateTmp"]),
    ("/opt/gs/bin/greenslurm", "/var/tmp/hook.toml", ["under /var/tmp, which PrivateTmp"]),
    ("/opt/gs/bin/greenslurm", "/run/user/0/hook.toml", ["under /run/user, which ProtectHome"]),
    ("/opt/gs/bin/greenslurm", "/etc/tmp/hook.toml", []),
    ("/opt/homework/greenslurm", "/etc/gs/hook.toml", [])])
def test_paths_the_sandbox_hides_are_warned_about(command, config, hidden):
    warnings = hook_install.unit_warnings(hook_install.render_unit(config, "root", executable=(command,)), config)
    hides = [w for w in warnings if "hides" in w]
    assert len(hides) == len(hidden) and all(part in w for part, w in zip(hidden, hides)), warnings


def test_install_says_what_the_sandbox_hides(tmp_path, capsys):
    config = write_config(tmp_path / "hook.toml")                  # pytest's folder is under /tmp
    assert main(["hook", "install", "--config", str(config), "--greenslurm", "/home/ann/venv/bin/greenslurm",
                 "--unit-dir", str(tmp_path / "units")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "hides" in line] == [
        "greenslurm hook install: warning: /home/ann/venv/bin/greenslurm is under /home, which ProtectHome=yes "
        "hides from the service: the service will not start",
        f"greenslurm hook install: warning: {config} is under /tmp, which PrivateTmp=yes hides from the service: "
        "the service will not start"], err


def test_a_symlink_into_home_is_hidden_too(visible_dir):
    target = executable_file(visible_dir / "real" / "greenslurm")
    link = visible_dir / "link"
    link.symlink_to(target)
    sandbox = Sandbox(((str(visible_dir / "real"), "ProtectHome=yes"),))
    assert f"(-> {target})" in sandbox.hides(str(link))
    # a virtual environment's script whose interpreter the sandbox hides
    script = write(visible_dir / "bin" / "greenslurm", f"#!{visible_dir}/real/python\n")
    os.chmod(script, 0o755)
    assert any("real/python" in why for why in hidden_paths((str(script),), None, sandbox))


def test_hook_check_fails_a_unit_whose_config_the_sandbox_hides(tmp_path, visible_dir):
    config = write_config(tmp_path / "hook.toml")                  # pytest's folder is under /tmp
    command = executable_file(visible_dir / "bin" / "greenslurm")
    unit = hook_install.install_unit(visible_dir / "units", config_path=str(config), user="root",
                                     executable=(str(command),))
    found = {c.name: c for c in hook_install.check_unit(unit, HookConfig.from_toml(config))}
    assert found["systemd unit"].level == FAIL and "PrivateTmp" in found["systemd unit"].detail, found
    # a unit whose command is gone, or that systemd rejects, fails too
    command.unlink()
    found = {c.name: c for c in hook_install.check_unit(unit, HookConfig.from_toml(config))}
    assert "is not an executable file" in found["systemd unit"].detail
    assert found["systemd-analyze verify"].level == FAIL and "not executable" in found["systemd-analyze verify"].detail
    write(unit, unit.read_text().replace("ExecStart=", "ExecStart=/bin/true %q "))
    found = {c.name: c for c in hook_install.check_unit(unit, HookConfig())}
    assert found["systemd unit"].level == FAIL and "%q" in found["systemd unit"].detail
    assert hook_install.check_unit(visible_dir / "none.service", HookConfig())[0].level == WARN


# -- the hook.toml template ---------------------------------------------------------------------------------------
def documented_defaults(text: str) -> dict:
    """The template's commented-out settings (``#key = value``) read as TOML."""
    lines = [line[1:] for line in text.splitlines() if re.match(r"#[a-z_]+ = ", line)]
    return tomllib.loads("\n".join(lines))


def test_the_template_loads_and_documents_every_setting_at_its_default(tmp_path):
    text = (PLUGIN / "hook.toml").read_text()
    HookConfig.from_toml(PLUGIN / "hook.toml")
    documented = documented_defaults(text)
    keys = {f.name for f in fields(HookConfig) if f.name != "path"}
    assert keys - set(documented) == set(), "settings without a line in slurm_plugin/hook.toml"
    assert set(documented) - keys == set()
    # every line uncommented: still a valid config, and (for settings that have one) the real default
    loaded = HookConfig.from_toml(write(tmp_path / "all.toml", "[hook]\n" + "\n".join(
        line[1:] for line in text.splitlines() if re.match(r"#[a-z_]+ = ", line))))
    for key in keys:
        if getattr(HookConfig(), key) is not None:
            assert getattr(loaded, key) == getattr(HookConfig(), key), key


def documented_settings(text: str) -> dict[str, str]:
    """The settings tables of a doc page (``| `name`, `name` | default, default | meaning |``) as
    {name: the default as written}; one default for several names is each one's; a row whose names and
    defaults do not pair up otherwise is an error."""
    found = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not re.fullmatch(r"`[a-z_]+`(, `[a-z_]+`)*", cells[0]):
            continue
        names = re.findall(r"`([a-z_]+)`", cells[0])
        defaults = [d.strip() for d in cells[1].split(",")]
        if len(defaults) == 1:
            defaults *= len(names)                             # one default for all of them
        assert len(names) == len(defaults), line
        found.update(zip(names, defaults))
    return found


def documented_value(text: str):
    """A default as the docs write it: `grid`, 300, true, (none) (an empty setting), 0 (none).

    >>> [documented_value(t) for t in ("`grid`", "300", "true", "(none)", "none", "0 (none)")]
    ['grid', 300.0, True, '', '', 0.0]
    """
    text = re.sub(r" \(none\)$", "", text.strip("`"))
    if text in ("(none)", "none"):
        return ""
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text)
    except ValueError:
        return text


@pytest.mark.parametrize("page", ["hook.md", "hook-green.md"])
def test_the_documented_defaults_are_the_codes(page):
    documented = documented_settings((ROOT / "docs" / page).read_text())
    assert len(documented) >= 10, documented                     # the tables were found
    defaults = HookConfig()
    for name, written in documented.items():
        value = getattr(defaults, name)
        expected = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        assert documented_value(written) == expected, (page, name, written, value)
        # and the template's commented line says the same
        assert documented_defaults((PLUGIN / "hook.toml").read_text())[name] == value, name


def test_the_old_record_sync_row_fails_the_comparison():
    documented = documented_settings("| `record_sync` | `full` | fsynced |")
    assert documented_value(documented["record_sync"]) != HookConfig().record_sync


def test_every_shipped_file_is_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "greenslurm.slurm_plugin"]
    shipped = [p.name for p in PLUGIN.iterdir() if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert {"greenslurm-hook.service", "hook.toml", "job_submit.lua", "cli_filter.lua"} <= set(shipped)
    for name in shipped:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


# -- hook install ------------------------------------------------------------------------------------------------
def test_install_writes_every_file_and_never_replaces_a_config(tmp_path, capsys):
    config = write_config(tmp_path / "hook.toml", timeout_ms=35, fail="closed")
    assert main(["hook", "install", "--config", str(config), "--dest", str(tmp_path / "etc"),
                 "--unit-dir", str(tmp_path / "units"), "--service-user", "root",
                 "--write-config", str(tmp_path / "new" / "hook.toml")]) == 0
    lua = hook_install.lua_settings((tmp_path / "etc" / "job_submit.lua").read_text())
    assert (lua["TIMEOUT_MS"], lua["FAIL_OPEN"]) == ("35", "false")
    unit = unit_settings((tmp_path / "units" / hook_install.UNIT_NAME).read_text())
    assert unit[("Service", "ExecStart")] == [f"/usr/bin/env greenslurm hook serve --config {config}"]
    assert unit[("Service", "User")] == ["root"] and unit[("Service", "Group")] == ["root"]
    assert (tmp_path / "new" / "hook.toml").read_text() == (PLUGIN / "hook.toml").read_text()
    assert not list(tmp_path.rglob(".*.tmp"))                  # written through a temporary name, renamed
    capsys.readouterr()
    assert main(["hook", "install", "--write-config", str(tmp_path / "new" / "hook.toml")]) == 2
    assert "never written over" in capsys.readouterr().err
    assert main(["hook", "install", "--print", "unit"]) == 0
    assert capsys.readouterr().out == hook_install.render_unit()


# -- hook check on a running service ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site():
    """A real `greenslurm hook serve` (files backend on a recorded cluster) in folders laid out as the
    unit lays them out: runtime folder 0750, state folder 0700; job_submit.lua rendered by hook install."""
    root = shared_root("greenslurm-pack-")
    run, state, etc = root / "run", root / "state", root / "etc"
    for folder, mode in ((run, 0o750), (state, 0o700), (etc, 0o755)):
        folder.mkdir()
        os.chmod(folder, mode)
    config = write_config(root / "hook.toml", socket=str(run / "hook.sock"), database=str(state / "hook.sqlite"),
                          backend="files", state_dir=str(HOOK_STATE))
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    write(etc / "slurm.conf", "ClusterName=t\nSlurmUser=root\nInclude greenslurm-slurm.conf.snippet\n")
    service = ServiceProcess(config, str(run / "hook.sock"), root / "service.log").start()
    try:
        yield root, config, etc / "slurm.conf", service
    finally:
        service.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_check_of_a_wired_site_is_ok_with_one_warning(site, capsys):
    root, config, conf, service = site
    checks = check(HookConfig.from_toml(config), conf)
    assert {c.name for c in checks if c.level != OK} == {"CliFilterPlugins=lua"}, checks
    assert f"held by pid {service.proc.pid}" in next(c.detail for c in checks if c.name == "lock")
    unit = root / "units" / hook_install.UNIT_NAME                # no unit installed there: one more warning
    assert main(["hook", "check", "--config", str(config), "--slurm-conf", str(conf), "--unit", str(unit)]) == 0
    out = capsys.readouterr().out
    assert "WARN" in out and "FAIL" not in out and "0 failed, 2 warnings" in out and "systemd unit" in out


@pytest.mark.parametrize("path, mode, failing", [("state/hook.sqlite", 0o644, "record"),
                                                  ("run/hook.sock", 0o666, "socket"),
                                                  ("run", 0o770, "runtime folder"),
                                                  ("etc/job_submit.lua", 0o666, "job_submit.lua"),
                                                  ("hook.toml", 0o666, "hook.toml"), (".", 0o777, "hook.toml"),
                                                  ("etc/greenslurm-failures", 0o775, "failures folder"),
                                                  ("etc", 0o777, "failures folder")])
def test_a_loose_mode_fails(site, path, mode, failing):
    root, config, conf, _ = site
    target = root / path
    before = stat.S_IMODE(target.stat().st_mode)
    os.chmod(target, mode)
    try:
        result = levels(check(HookConfig.from_toml(config), conf))
        assert result[failing] == FAIL
        assert main(["hook", "check", "--config", str(config), "--slurm-conf", str(conf)]) == 1
    finally:
        os.chmod(target, before)


def test_a_runtime_folder_of_another_user_fails(site):
    root, config, conf, _ = site
    slurm = pwd.getpwnam("slurm") if "slurm" in {p.pw_name for p in pwd.getpwall()} else None
    if slurm is None:
        pytest.skip("no slurm user (Slurm's packages are not installed)")
    os.chown(root / "run", slurm.pw_uid, -1)
    try:
        checks = check(HookConfig.from_toml(config), conf)
        found = next(c for c in checks if c.name == "runtime folder")
        assert found.level == FAIL and "owned by slurm" in found.detail and "the running service" in found.detail
        # slurmctld (SlurmUser=root here) reads the hook's failures from a folder of its own, whoever
        # owns the runtime folder
        failures = next(c for c in checks if c.name == "failures folder")
        assert failures.level == OK and "greenslurm-failures: owner root (uid 0), mode 0755" in failures.detail
    finally:
        os.chown(root / "run", 0, -1)


# -- where job_submit.lua keeps the failures it has not reported yet ------------------------------------------------
def earlier_layout(tmp_path: Path, slurm: pwd.struct_passwd) -> tuple[Path, Path, Path]:
    """slurm.conf's folder (SlurmUser ``slurm``), the service's runtime folder (where an earlier
    job_submit.lua kept its failures, beside the socket) and hook.toml."""
    etc, run = tmp_path / "etc", tmp_path / "run"
    write(etc / "slurm.conf", f"ClusterName=t\nSlurmUser={slurm.pw_name}\n")
    run.mkdir()
    return etc, run, write_config(tmp_path / "hook.toml", socket=str(run / "hook.sock"))


def test_install_makes_the_failures_folder_for_slurmctlds_user_and_moves_earlier_failures_in(tmp_path, capsys):
    slurm = ensure_user("greenslurm-user")          # SlurmUser of this slurm.conf
    etc, run, config = earlier_layout(tmp_path, slurm)
    write(run / "hook.sock.failures", "3 abc123:4-6\n")     # kept by an earlier job_submit.lua
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    folder = etc / "greenslurm-failures"
    st = os.lstat(folder)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == slurm.pw_uid and stat.S_IMODE(st.st_mode) == 0o755
    assert (folder / "unreported").read_text() == "3 abc123:4-6\n" and (folder / "unreported").stat().st_uid == slurm.pw_uid
    assert not (run / "hook.sock.failures").exists()
    assert f'local FAILURES_DIR = "{folder.resolve()}"' in (etc / "job_submit.lua").read_text()
    # again, with a FIFO at the old name (the service's user may put one there): never opened for
    # reading (install would wait for ever), left as it is; the folder's own file stays
    os.mkfifo(run / "hook.sock.failures")
    os.chmod(folder, 0o777)
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    assert (run / "hook.sock.failures").is_fifo() and (folder / "unreported").read_text() == "3 abc123:4-6\n"
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o755          # made slurmctld's user's alone again
    # a folder above it that others can write: said, on stderr
    os.chmod(etc, 0o777)
    capsys.readouterr()
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    assert f"warning: {etc}: mode 0777, others can replace {folder}" in capsys.readouterr().err
    os.chmod(etc, 0o755)
    # a link where the folder goes is refused, in one line
    shutil.rmtree(folder)
    folder.symlink_to(tmp_path)
    capsys.readouterr()
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 2
    err = capsys.readouterr().err
    assert "greenslurm-failures" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_install_moves_earlier_failures_in_under_a_fresh_name_whatever_slurmctlds_user_left(tmp_path, capsys):
    # SlurmUser owns the failures folder, and the service often runs as SlurmUser too (the unit's
    # default): it owns the earlier file's folder as well.  It leaves a FIFO at the name install (root)
    # wrote the moved line under: install opened it for writing, wrote into it and renamed the FIFO
    # over "unreported" (with nobody reading it, install waited for ever; had it been a hard link to a
    # file of root's where fs.protected_hardlinks is 0, install truncated that file and gave it away)
    slurm = ensure_user("greenslurm-service")
    etc, run, config = earlier_layout(tmp_path, slurm)
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    folder = etc / "greenslurm-failures"
    planted = folder / ".unreported.moving"
    os.mkfifo(planted)
    os.chown(planted, slurm.pw_uid, -1)
    write(run / "hook.sock.failures", "3 abc123:4-6\n")
    reader = os.open(planted, os.O_RDONLY | os.O_NONBLOCK)     # so the old code's open did not wait
    try:
        assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
        assert os.read(reader, 100) == b""                       # nothing was written into the FIFO
    finally:
        os.close(reader)
    kept = folder / "unreported"
    assert stat.S_ISREG(os.lstat(kept).st_mode) and kept.read_text() == "3 abc123:4-6\n"
    assert os.lstat(kept).st_uid == slurm.pw_uid and stat.S_IMODE(os.lstat(kept).st_mode) == 0o644
    assert planted.is_fifo()                                     # left as it was
    assert sorted(p.name for p in folder.iterdir()) == [".unreported.moving", "moved-earlier", "unreported"]


def test_a_line_the_earlier_script_writes_while_install_moves_its_file_is_never_lost(tmp_path, monkeypatch):
    # the earlier job_submit.lua (slurmctld still runs it while install renders the new one) writes
    # its whole unreported count again, "5 abc123:4-8", after install read "3 abc123:4-6" and before
    # install unlinked the old name: install removed the new line unread, and with it 2 failures
    from greenslurm.slurm_plugin import failures_file
    from greenslurm.slurm_plugin.record import DecisionRecord

    slurm = ensure_user("greenslurm-user")
    etc, run, config = earlier_layout(tmp_path, slurm)
    old = run / "hook.sock.failures"
    write(old, "3 abc123:4-6\n")
    read = failures_file.read_kept

    written = []

    def read_then_the_earlier_script_writes(path):      # a fault injected between install's read and unlink
        kept = read(path)
        if path.parent == run and not written:
            written.append(path)
            write(run / "hook.sock.failures.tmp", "5 abc123:4-8\n")
            os.rename(run / "hook.sock.failures.tmp", old)   # as the earlier script wrote it: renamed over
        return kept

    monkeypatch.setattr(failures_file, "read_kept", read_then_the_earlier_script_writes)
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    monkeypatch.setattr(failures_file, "read_kept", read)
    folder = etc / "greenslurm-failures"
    assert (folder / "unreported").read_text() == "3 abc123:4-6\n"          # the 3 moved, for the next load
    assert old.read_text() == "5 abc123:4-8\n"                               # the new line still there
    # hook check names it and what to run
    found = [c for c in check(HookConfig.from_toml(config), etc / "slurm.conf") if c.name == "earlier failures file"]
    assert len(found) == 1 and "holding 5 unreported failure(s) of job_submit.lua abc123, 3 of them moved " \
        "in before" in found[0].detail and "greenslurm hook install" in found[0].detail, found
    # install again: the line counts the 3 moved again; only the 2 beyond them are handed to the
    # service, as a line it counts once (the new script reads "unreported" only when it loads)
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    assert not old.exists() and (folder / "unreported").read_text() == "3 abc123:4-6\n"
    left = failures_file.leftovers(folder, time.time() + failures_file.LEFTOVER_AFTER_S)
    assert [(x.kept.line, x.own) for x in left] == [("5 abc123ffff4:4-8 5 3\n", 2)]   # totals 4 and 5
    record = DecisionRecord(tmp_path / "r.sqlite")
    assert record.fold(left[0].path.name, left[0].kept) == 2
    assert record.fold(left[0].path.name, left[0].kept) is None               # once
    # and again with nothing new: nothing more
    write(old, "5 abc123:4-8\n")
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    assert not old.exists() and len(failures_file.leftovers(folder, time.time())) == 1


def test_a_file_install_does_not_take_goes_back_under_the_old_name_or_is_named_by_check(tmp_path, monkeypatch):
    # a regular file without a kept line is renamed away, read, and put back as it was; when the
    # earlier script wrote the old name again meanwhile, the file stays under the moving name, which
    # hook check names with what to run
    from greenslurm.slurm_plugin import failures_file

    slurm = ensure_user("greenslurm-user")
    etc, run, config = earlier_layout(tmp_path, slurm)
    old = run / "hook.sock.failures"
    write(old, "not a kept line\n")
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    assert old.read_text() == "not a kept line\n" and sorted(p.name for p in run.iterdir()) == ["hook.sock.failures"]
    read = failures_file.read_kept

    def read_then_the_earlier_script_writes(path):      # a fault injected between install's rename and read
        if path.parent == run and not old.exists():
            write(old, "2 abc123:9-10\n")
        return read(path)

    monkeypatch.setattr(failures_file, "read_kept", read_then_the_earlier_script_writes)
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    monkeypatch.setattr(failures_file, "read_kept", read)
    moving = [p for p in run.iterdir() if p.name.startswith("hook.sock.failures.moving.")]
    assert len(moving) == 1 and moving[0].read_text() == "not a kept line\n" and old.read_text() == "2 abc123:9-10\n"
    found = [c.detail for c in check(HookConfig.from_toml(config), etc / "slurm.conf") if c.name == "earlier failures file"]
    assert any(f"{moving[0]}: holds no line, moved away by greenslurm hook install while an earlier job_submit.lua "
               f"wrote {old} again" in detail and f"rm -- {moving[0]}" in detail for detail in found), found


def test_check_of_the_failures_folder(site):
    root, config, conf, _ = site
    folder, lua = conf.parent / "greenslurm-failures", conf.parent / "job_submit.lua"

    def found(name="failures folder"):
        return next(c for c in check(HookConfig.from_toml(config), conf) if c.name == name)
    assert found().level == OK and found().detail.endswith("no failure waiting")
    write(folder / "unreported", "3 abc123:4-6\n")
    try:
        assert found().level == OK and "3 failure(s) of job_submit.lua abc123 not reported yet" in found().detail
    finally:
        (folder / "unreported").unlink()
    os.mkfifo(folder / "unreported")                     # check never waits on it
    try:
        assert found().level == FAIL and f"{folder / 'unreported'}: a FIFO, not read" in found().detail
    finally:
        (folder / "unreported").unlink()
    other = ensure_user("greenslurm-user")
    os.chown(folder, other.pw_uid, -1)
    try:
        assert found().level == FAIL and f"owned by uid {other.pw_uid}, not slurmctld's user (uid 0)" in found().detail
        assert f"greenslurm hook install --config {config} --dest {conf.parent}" in found().detail
    finally:
        os.chown(folder, 0, -1)
    earlier = root / "run" / "hook.sock.failures"
    write(earlier, "2 abc:1-2\n")
    try:
        assert found("earlier failures file").level == WARN
        assert "holding 2 unreported failure(s); nothing reads it now: greenslurm hook install" in found("earlier failures file").detail
    finally:
        earlier.unlink()
    # a job_submit.lua of the earlier layout: check says what to run
    text = lua.read_text()
    write(lua, re.sub(r'local FAILURES_DIR = ".*"\n', "", text))
    try:
        job_submit = found("job_submit.lua")
        assert job_submit.level == FAIL and f"{root / 'run' / 'hook.sock.failures'}" in job_submit.detail
        assert f"(run greenslurm hook install --config {config} --dest {conf.parent})" in job_submit.detail
    finally:
        write(lua, text)


def test_check_of_a_failures_folder_it_cannot_look_at_is_a_failure_not_a_traceback(site, capsys):
    # a FAILURES_DIR edited into job_submit.lua under a file (or under a folder the user running the
    # check cannot search): lstat raised NotADirectoryError out of check, a traceback at the admin
    root, config, conf, _ = site
    lua = conf.parent / "job_submit.lua"
    text = lua.read_text()
    write(lua, re.sub(r'local FAILURES_DIR = ".*"\n', f'local FAILURES_DIR = "{conf}/greenslurm-failures"\n', text))
    try:
        found = next(c for c in check(HookConfig.from_toml(config), conf) if c.name == "failures folder")
        assert found.level == FAIL and f"{conf}/greenslurm-failures: cannot look at it: Not a directory" in found.detail
    finally:
        write(lua, text)


def test_check_says_the_command_that_mends_each_failures_folder_problem(site):
    # hook install mends the folder itself (owner, mode) but never a folder above it, nor a link
    # where the folder goes (it refuses it): check told the admin to run hook install for all three
    root, config, conf, _ = site
    folder, etc = conf.parent / "greenslurm-failures", conf.parent
    install = f"greenslurm hook install --config {config} --dest {etc}"

    def found():
        return next(c for c in check(HookConfig.from_toml(config), conf) if c.name == "failures folder")
    os.chmod(etc, 0o777)
    try:
        assert found().level == FAIL and f"(run chmod go-w {etc})" in found().detail, found().detail
        assert install not in found().detail
    finally:
        os.chmod(etc, 0o755)
    other = ensure_user("greenslurm-user")
    os.chown(etc, other.pw_uid, -1)
    try:
        assert found().level == FAIL and f"(run chown root {etc})" in found().detail, found().detail
    finally:
        os.chown(etc, 0, -1)
    folder.rename(etc / "moved")
    folder.symlink_to(etc / "moved")
    try:
        assert found().level == FAIL and f"(run rm -- {folder} && {install})" in found().detail, found().detail
    finally:
        folder.unlink()
        (etc / "moved").rename(folder)
    os.chmod(folder, 0o775)
    try:
        assert found().level == FAIL and f"(run {install})" in found().detail, found().detail
    finally:
        os.chmod(folder, 0o755)
    os.mkfifo(folder / "unreported")
    try:
        assert found().level == FAIL and f"(run rm -- {folder / 'unreported'})" in found().detail, found().detail
    finally:
        (folder / "unreported").unlink()


def test_slurmctld_as_slurm_user_cannot_reach_a_root_socket(site, tmp_path):
    root, config, conf, _ = site
    if "slurm" not in {p.pw_name for p in pwd.getpwall()}:
        pytest.skip("no slurm user (Slurm's packages are not installed)")
    other = write(conf.parent / "slurm-as-slurm.conf", conf.read_text().replace("SlurmUser=root", "SlurmUser=slurm"))
    try:
        found = next(c for c in check(HookConfig.from_toml(config), other) if c.name == "slurmctld can connect")
        assert found.level == FAIL and "set socket_group" in found.detail    # root's socket, mode 0600
    finally:
        other.unlink()


def test_job_submit_lua_rendered_from_another_config_fails(site, tmp_path):
    root, config, conf, _ = site
    changed = write(tmp_path / "hook.toml", config.read_text() + "timeout_ms = 50\nfail_deadline = \"open\"\n")
    found = next(c for c in check(HookConfig.from_toml(changed), conf) if c.name == "job_submit.lua")
    assert found.level == FAIL
    default = f"{HookConfig().timeout_ms:g}"                     # the site's job_submit.lua has the default
    assert f"TIMEOUT_MS = {default} there, 50 from" in found.detail and "FAIL_DEADLINE_OPEN = false there, true" in found.detail


@pytest.mark.parametrize("words", [False, True])
def test_install_warns_when_the_power_programs_cannot_run(tmp_path, capsys, words):
    # --greenslurm is one path: "python -m greenslurm" is a file that is not there, so slurmctld's
    # every run of SuspendProgram/ResumeProgram would end with sh's 127 and no node would be woken
    config = write_config(tmp_path / "hook.toml", power_save=True, power_off_command="true {node}",
                          power_on_command="true {node}")
    command = f"{sys.executable} -m greenslurm" if words else str(executable_file(tmp_path / "bin" / "greenslurm"))
    assert main(["hook", "install", "--config", str(config), "--greenslurm", command,
                 "--dest", str(tmp_path / "rendered")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "power programs" in line]
    assert err == ([f"greenslurm hook install: warning: the power programs' command {command!r} is not an "
                    "executable file here (yet): slurmctld's SuspendProgram and ResumeProgram will fail (exit "
                    "status 127) and no node is powered down or woken"] if words else []), err
    resume = (tmp_path / "rendered" / "greenslurm-resume").read_text().splitlines()[-1]
    assert resume.startswith(f"exec '{command}' hook power --config ") == words
    # the program as slurmctld runs it: the missing command is sh's 127, the executable file runs
    done = subprocess.run([str(tmp_path / "rendered" / "greenslurm-resume"), "n1"], capture_output=True)
    assert done.returncode == (127 if words else 0), done


def test_check_names_only_the_moving_names_install_makes(tmp_path, capsys):
    # install renames the earlier file to <old>.moving.<32 hex digits> (failures_file.moving_name); check
    # listed every name <old>.moving.*, saying install moved it away, and printed it raw: a name planted
    # in the service's runtime folder (its user, or an earlier job_submit.lua as SlurmUser, writes there)
    # with a terminal's escape sequence rewrote check's output (ESC [2K CR: the line erased, another
    # printed in its place), a newline made a line of its own, and a byte that is not UTF-8 ended check
    # with a traceback (UnicodeEncodeError).  Such names are not install's: check leaves them alone
    slurm = ensure_user("greenslurm-user")
    etc, run, config = earlier_layout(tmp_path, slurm)
    assert main(["hook", "install", "--config", str(config), "--dest", str(etc), "--no-cli-filter"]) == 0
    genuine = run / f"hook.sock.failures.moving.{'ab' * 16}"
    write(genuine, "2 abc123:9-10\n")
    planted = [b"\x1b[2K\rOK   all fine", b"x\nFAIL forged line", b"\xff", b"$(touch pwned)", b"-rf *"]
    for suffix in planted:
        with open(os.fsencode(run / "hook.sock.failures.moving.") + suffix, "w") as f:
            f.write("1 abc:1\n")
    capsys.readouterr()
    main(["hook", "check", "--config", str(config), "--slurm-conf", str(etc / "slurm.conf"),
          "--unit", str(tmp_path / "absent.service")])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "forged" not in out and "pwned" not in out, out
    found = [c.detail for c in check(HookConfig.from_toml(config), etc / "slurm.conf") if c.name == "earlier failures file"]
    assert len(found) == 1 and found[0].startswith(f"{genuine}: holds 2 unreported failure(s)") and \
        f"rm -- {genuine}" in found[0], found
