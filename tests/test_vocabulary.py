"""One command-line vocabulary: the same option name and default for the same concept in replay, demo,
compare, whatif and sweep (docs/cli.md's table); the old names as deprecated aliases that warn once and
give the same scenario and figures; a sweep checks every cell before the first runs; progress bars on a
terminal only, and never with --no-progress."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from greenslurm.cli import build_parser, main, scenario_from_args
from greenslurm.sweep_cell import PARAMETER_ALIASES, PARAMETERS, cell_scenario
from greenslurm.sweep_spec import parse_spec

HERE = Path(__file__).parent
DOCS = HERE.parent / "docs" / "cli.md"
SLURM_CONF = HERE / "data" / "slurm-conf"
KTH = HERE.parent / "greenslurm" / "data" / "KTH-SP2-1996-2.1-cln-first2000.swf"      # 100 nodes x 1 CPU
KTH_CLUSTER = HERE.parent / "greenslurm" / "data" / "kth-sp2.toml"

# The arguments each command needs before any option (files need not exist to parse).
BASE = {"replay": ["replay", "t.swf"], "demo": ["demo"], "compare": ["compare", "t.swf"],
        "whatif": ["whatif", "t.swf", "--cluster", "c.toml"], "sweep": ["sweep", "s.toml"],
        "run": ["run", "s.toml"], "inflate": ["inflate", "--nodes", "n.csv", "--pods", "p.csv"],
        "report": ["report", "results"], "traces info": ["traces", "info", "t.swf"]}
REPLAYING = ("replay", "demo", "compare", "whatif")

# (option, a value to give it or None for a flag, attribute, default when not given, commands)
# A None default means the scenario's default (docs/cli.md names it): the same in every command.
SHARED = [
    ("--format", "swf", "format", None, ("replay", "compare", "whatif", "traces info")),
    ("--columns", "JobID|Submit", "columns", None, ("replay", "compare", "whatif", "traces info")),
    ("--limit", "30", "limit", None, REPLAYING),
    ("--exact-runtimes", None, "exact_runtimes", False, ("replay", "demo", "compare", "whatif")),
    ("--cluster", "c2.toml", "cluster", None, ("replay", "demo", "compare")),
    ("--slurm-conf", "slurm.conf", "slurm_conf", None, ("replay", "demo", "compare")),
    ("--nodes", "nodes.csv", "nodes", None, ("replay", "demo", "compare")),
    ("--select", "bestfit", "select", None, ("replay", "demo")),
    ("--slack-mean", "1.5", "slack_mean", None, ("replay", "demo", "whatif")),
    ("--slack-sigma", "0.3", "slack_sigma", None, REPLAYING),
    ("--slack-seed", "4", "slack_seed", None, REPLAYING),
    ("--renewable", "wind", "renewable", None, REPLAYING),
    ("--renewable-scale", "0.7", "renewable_scale", None, REPLAYING),
    ("--renewable-seed", "5", "renewable_seed", None, REPLAYING),
    ("--renewable-mode", "green", "renewable_mode", None, ("replay", "demo", "compare")),
    ("--seed", "3", "seed", None, ("replay", "demo", "whatif")),
    ("--workers", "2", "workers", None, ("compare", "whatif", "sweep", "inflate")),
    ("-j", "2", "workers", None, ("compare", "whatif", "sweep", "inflate")),
    ("--out", "o", "out", None, ("replay", "demo", "run", "whatif")),
    ("--json", "o.json", "json", None, ("replay", "demo", "run", "whatif", "traces info")),
    ("--no-progress", None, "no_progress", False, tuple(BASE)),
]
# Defaults a command has on purpose (docs/cli.md says why): compare sweeps three slacks; whatif's cluster
# is required.  Every command plans with the jobs' time limits unless --exact-runtimes.
ON_PURPOSE = {("compare", "--slack-mean"): [0.2, 1.0, 5.0]}


def _parse(command: str, *extra: str):
    return build_parser().parse_args(BASE[command] + list(extra))


def _given(value: str, attribute: str):
    numbers = {"limit": int, "slack_seed": int, "renewable_seed": int, "seed": int, "workers": int,
               "slack_mean": float, "slack_sigma": float, "renewable_scale": float}
    return numbers[attribute](value) if attribute in numbers else value


@pytest.mark.parametrize("option, value, attribute, default, commands", SHARED, ids=[s[0] for s in SHARED])
def test_a_shared_concept_has_one_name_and_one_default(option, value, attribute, default, commands):
    for command in commands:
        assert getattr(_parse(command), attribute) == ON_PURPOSE.get((command, option), default), command
        given = _parse(command, option, *([value] if value is not None else []))
        expected = True if value is None else _given(value, attribute)
        if command == "compare" and option == "--slack-mean":
            expected = [expected]
        assert getattr(given, attribute) == expected, command


def test_compare_refuses_exact_runtimes_with_its_deprecated_planned_limits():
    assert _parse("compare", "--exact-runtimes").exact_runtimes is True
    assert main(BASE["compare"] + ["--exact-runtimes", "--planned-limits"]) == 2


def test_the_docs_table_lists_every_shared_option():
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("## Options shared by replay, compare, whatif and sweep"):]
    table = table[:table.index("\n## ", 3)]
    for option, *_ in SHARED:
        assert f"`{option}" in table, option
    for old in OLD_NAMES:
        assert f"`{old[1]}`" in table, old[1]
    for key in PARAMETERS:
        assert f"`{key}`" in table, key


# -- deprecated aliases -------------------------------------------------------------------------------
# (command, old, canonical, value)
OLD_NAMES = [
    ("whatif", "--slack", "--slack-mean", "1.0"),
    ("whatif", "--supply", "--renewable", "wind"),
    ("whatif", "--supply-peak", "--renewable-scale", "0.5"),
    ("compare", "--first-jobs", "--limit", "30"),
    ("replay", "--idle-node-w", "--colocation-idle-node-w", "300"),
    ("compare", "--idle-node-w", "--colocation-idle-node-w", "300"),
]


@pytest.mark.parametrize("command, old, new, value", OLD_NAMES, ids=[f"{c} {o}" for c, o, _, _ in OLD_NAMES])
def test_an_old_name_works_warns_once_and_is_hidden(command, old, new, value, capsys):
    capsys.readouterr()
    by_old = _parse(command, old, value)
    err = capsys.readouterr().err
    assert err.splitlines() == [f"greenslurm: warning: {old} is deprecated, use {new}"]
    by_new = _parse(command, new, value)
    assert capsys.readouterr().err == ""
    def options(args) -> dict:
        return {k: v for k, v in vars(args).items() if k not in ("deprecated_aliases", "handler")}
    assert options(by_old) == options(by_new)
    with pytest.raises(SystemExit):
        build_parser().parse_args(BASE[command] + ["--help"])
    help_text = capsys.readouterr().out
    assert re.search(rf"{re.escape(old)}\b(?!-)", help_text) is None and new in help_text


def test_an_old_name_gives_the_same_replay_scenario(capsys):
    old = scenario_from_args(_parse("replay", "--colocation", "eaco", "--idle-node-w", "300"))
    new = scenario_from_args(_parse("replay", "--colocation", "eaco", "--colocation-idle-node-w", "300"))
    assert old == new and new.colocation.idle_node_w == 300.0


def _whatif(tmp_path: Path, name: str, *options: str) -> dict:
    out = tmp_path / f"{name}.json"
    assert main(["whatif", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "200",
                 "--candidate", "fcfs", "--candidate", "greedy=deadline:acceptance=greedy", "-j", "1",
                 "--no-progress", "--json", str(out), *options]) == 0
    return json.loads(out.read_text())["policies"]


def test_whatif_old_names_give_the_same_figures(tmp_path, capsys):
    old = _whatif(tmp_path, "old", "--slack", "1.0", "--supply", "wind", "--supply-peak", "0.5")
    assert capsys.readouterr().err.count("deprecated") == 3
    new = _whatif(tmp_path, "new", "--slack-mean", "1.0", "--renewable", "wind", "--renewable-scale", "0.5")
    assert old == new and old["greedy"]["deadline_jobs"] > 0 and 0 < old["fcfs"]["renewable_share"] < 1
    # the old --supply peaked at 0.5 x the cluster's full power unless --supply-peak said otherwise: it keeps
    # those figures; --renewable alone peaks at 1 x (the scenario's scale, as in replay): more renewable energy
    assert _whatif(tmp_path, "legacy", "--slack", "1.0", "--supply", "wind") == old
    full = _whatif(tmp_path, "full", "--slack-mean", "1.0", "--renewable", "wind")
    assert full["fcfs"]["renewable_share"] > old["fcfs"]["renewable_share"]


def test_compare_first_jobs_is_limit(tmp_path, capsys):
    rows = []
    for name, option in (("old", "--first-jobs"), ("new", "--limit")):
        csv = tmp_path / f"{name}.csv"
        assert main(["compare", str(KTH), "--cluster", str(KTH_CLUSTER), "--slack-mean", "1",
                     "--acceptance", "greedy", "--select", "bestfit", option, "30", "-j", "1", "--csv", str(csv),
                     "--no-progress"]) == 0
        rows.append(pd.read_csv(csv).drop(columns=["seconds"]))
    pd.testing.assert_frame_equal(*rows)
    assert rows[0]["jobs"].tolist() == [30]


STUDY = """
[[trace]]
name = "s"
synthetic = {{ jobs = 30 }}
cluster = {{ nodes = 2, cpus = 4 }}
[[policy]]
name = "greedy"
queue = "deadline"
options = {{ acceptance = "greedy" }}
[grid]
{grid}
"""


def test_sweep_old_keys_give_the_same_cell_scenarios(capsys):
    old = parse_spec(STUDY.format(grid='slack = [1.0]\nsupply = ["solar"]\nsupply_peak = [0.5]'), "old.toml")
    new = parse_spec(STUDY.format(grid='slack_mean = [1.0]\nrenewable = ["solar"]\nrenewable_scale = [0.5]'),
                     "new.toml")
    assert [cell_scenario(c) for c in old.cells()] == [cell_scenario(c) for c in new.cells()]
    assert old.deprecated[0].startswith("old.toml: [grid] slack is deprecated, use slack_mean")
    assert len(old.deprecated) == 3 and new.deprecated == []
    # the old supply without supply_peak keeps its peak of 0.5 x the cluster's full power
    legacy = parse_spec(STUDY.format(grid='slack = [1.0]\nsupply = ["solar"]'), "legacy.toml")
    assert [cell_scenario(c) for c in legacy.cells()] == [cell_scenario(c) for c in new.cells()]
    assert set(PARAMETER_ALIASES.values()) <= set(PARAMETERS)


def test_sweep_refuses_both_spellings_of_one_parameter():
    with pytest.raises(Exception, match="slack is the old name of slack_mean; give one"):
        parse_spec(STUDY.format(grid="slack = [1.0]\nslack_mean = [1.0]"))


# -- a sweep's cells: every cluster source replay has, exact runtimes, all checked before any runs -----
def test_sweep_cells_take_every_cluster_source_and_exact_runtimes(tmp_path, capsys):
    for name in ("jobs.swf", "slurm.conf"):
        shutil.copy(SLURM_CONF / name, tmp_path / name)
    (tmp_path / "study.toml").write_text("""
[[trace]]
name = "conf-key"
path = "jobs.swf"
slurm_conf = "slurm.conf"
exact_runtimes = true
[[trace]]
name = "conf-table"
path = "jobs.swf"
cluster = { slurm_conf = "slurm.conf" }
exact_runtimes = true
[[policy]]
queue = "easy"
[grid]
exact_runtimes = [true, false]
""")
    spec = parse_spec((tmp_path / "study.toml").read_text(), str(tmp_path / "study.toml"), str(tmp_path))
    scenarios = [cell_scenario(c) for c in spec.cells()]
    assert [s.trace.exact_runtimes for s in scenarios] == [True, False, True, False]
    assert {s.cluster.slurm_conf for s in scenarios} == {str(tmp_path / "slurm.conf")}
    assert main(["sweep", str(tmp_path / "study.toml"), "-j", "1", "--no-progress"]) == 0
    frame = pd.read_parquet(tmp_path / "study-results" / "results.parquet")
    assert len(frame) == 4 and (frame["jobs_completed"] > 0).all()


@pytest.mark.parametrize("bad_trace, message", [
    ('path = "jobs.swf"\ncluster = "missing.toml"', "field trace b, policy easy: {dir}/missing.toml: no such file"),
    ('path = "gone.swf"\ncluster = { nodes = 2, cpus = 4 }', "field trace b, policy easy: {dir}/gone.swf: no such file"),
    ('synthetic = { jobs = 5 }\ncluster = { nodes = 2, cpus = 4 }\nparams = { renewable = "tidal" }',
     "field trace b, policy easy: renewable: unknown supply 'tidal'; choose solar, wind or a CSV file"),
    ('path = "jobs.swf"\nexact_runtimes = "yes"', "field trace[1].exact_runtimes: must be true or false"),
])
def test_a_bad_twelfth_cell_fails_before_the_first_runs(tmp_path, capsys, bad_trace, message):
    # 11 good cells (limit 1 .. 11) of trace a, then trace b's first cell: the twelfth
    shutil.copy(SLURM_CONF / "jobs.swf", tmp_path / "jobs.swf")
    (tmp_path / "study.toml").write_text(f"""
[[trace]]
name = "a"
synthetic = {{ jobs = 20 }}
cluster = {{ nodes = 2, cpus = 4 }}
params = {{ limit = 1 }}
[[trace]]
name = "b"
{bad_trace}
[[policy]]
queue = "easy"
[grid]
"option.select" = ["firstfit"]
[sweep]
seeds = 11
""")
    assert main(["sweep", str(tmp_path / "study.toml"), "-j", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"greenslurm: error: {tmp_path / 'study.toml'}: " + message.format(dir=tmp_path)]
    assert not (tmp_path / "study-results").exists()          # nothing ran, nothing written


def test_a_synthetic_parameter_on_a_trace_file_is_refused_not_ignored(tmp_path):
    with pytest.raises(Exception, match="field trace t, policy easy: load: applies to synthetic traces"):
        parse_spec('[[trace]]\nname = "t"\npath = "t.swf"\ncluster = { nodes = 1, cpus = 1 }\n'
                   '[[policy]]\nqueue = "easy"\n[grid]\nload = [0.5]\n')


# -- progress: a bar on a terminal, never with --no-progress --------------------------------------------
def _terminal() -> tuple[Console, io.StringIO]:
    stream = io.StringIO()
    return Console(file=stream, force_terminal=True, width=120), stream


def _run_on_terminal(argv: list[str]) -> str:
    args = build_parser().parse_args(argv)
    console, stream = _terminal()
    assert args.handler(args, console) == 0
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())      # the text without colours


COMMANDS_WITH_BARS = [
    (["compare", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "50", "--slack-mean", "1", "2",
      "--acceptance", "greedy", "--select", "bestfit", "-j", "1"], "replays"),
    (["compare", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "50", "--power-budget", "15000", "-j", "1"],
     "replays"),
    (["whatif", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "50", "--candidate", "fcfs", "-j", "1"],
     "policies"),
]


@pytest.mark.parametrize("argv, unit", COMMANDS_WITH_BARS, ids=["compare", "compare power", "whatif"])
def test_a_bar_shows_on_a_terminal_and_not_with_no_progress(argv, unit, capsys):
    shown = _run_on_terminal(argv)
    assert re.search(rf"\d+/\d+ {unit}", shown), shown[-400:]
    hidden = _run_on_terminal(argv + ["--no-progress"])
    assert not re.search(rf"\d+/\d+ {unit}", hidden)
    args = build_parser().parse_args(argv)
    plain = Console(file=io.StringIO(), width=120)                 # not a terminal: never a bar
    assert args.handler(args, plain) == 0 and not re.search(rf"\d+/\d+ {unit}", plain.file.getvalue())


def test_a_sweep_shows_its_bar_on_a_terminal(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(STUDY.format(grid="slack_mean = [1.0, 2.0]"))
    shown = _run_on_terminal(["sweep", str(tmp_path / "s.toml"), "-j", "1", "--out", str(tmp_path / "r1")])
    assert re.search(r"2/2 cells", shown)
    hidden = _run_on_terminal(["sweep", str(tmp_path / "s.toml"), "-j", "1", "--out", str(tmp_path / "r2"),
                               "--no-progress"])
    assert "cells" in hidden and not re.search(r"\d+/\d+ cells", hidden)


@pytest.mark.parametrize("command", list(BASE))
def test_no_progress_is_accepted_everywhere(command):
    assert _parse(command, "--no-progress").no_progress is True


def test_traces_info_shows_its_reading_status_on_a_terminal_only_without_no_progress(capsys):
    shown = _run_on_terminal(["traces", "info", str(KTH)])
    assert "reading" in shown and "2,000" in shown
    hidden = _run_on_terminal(["traces", "info", str(KTH), "--no-progress"])
    assert "reading" not in hidden and "2,000" in hidden
