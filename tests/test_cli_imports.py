"""No import circle in the greenslurm package: the CLI (cli.py) imports the cmd_* modules, which import
the shared helpers (inputs.py, console.py, scenario*.py); nothing imports cli.py back.

The modules are read with ``ast`` (imports inside functions count too: a late import still ties two
modules together), not imported.  Below, what a command loads when it runs: a fresh interpreter runs
the command line and the test reads its ``sys.modules``."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from greenslurm.cli import build_parser
from greenslurm.cli_commands import COMMAND_HELP, command_named

PACKAGE = Path(__file__).resolve().parents[1] / "greenslurm"
MODULES = {path.stem: path for path in PACKAGE.glob("*.py") if path.stem != "__init__"}


def imported_modules(path: Path) -> set[str]:
    """The greenslurm CLI package's modules that ``path`` imports (``greenslurm.X`` or ``from greenslurm import X``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:                          # relative: from . import x / from .x import y
                base = node.module or ""
                names = [base] if base else [alias.name for alias in node.names]
                names = [f"greenslurm.{n}" for n in names]
            elif node.module == "greenslurm":
                names = [f"greenslurm.{alias.name}" for alias in node.names]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if len(parts) >= 2 and parts[0] == "greenslurm" and parts[1] in MODULES:
                found.add(parts[1])
    return found - {path.stem}


GRAPH = {name: imported_modules(path) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, as the path that closes it (depth-first search, colours white/grey/black).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": set()})
    [['a', 'b', 'a']]
    >>> cycles({"a": {"b"}, "b": set()})
    []
    """
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "grey"
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if state.get(other) == "grey":
                found.append(stack[stack.index(other):] + [other])
            elif other not in state:
                visit(other)
        stack.pop()
        state[node] = "black"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_walk_reads_the_package():
    assert {"cli", "inputs", "console", "scenario", "scenario_run", "cmd_compare", "cmd_power"} <= set(MODULES)
    assert {"cmd_compare", "cmd_power", "cmd_whatif", "cmd_sweep", "cmd_report"} <= GRAPH["cli"]
    assert "inputs" in GRAPH["cmd_compare"]          # the shared helpers are where the commands get them


def test_the_cycle_finder_finds_a_circle():
    # the shape this package had: cli imports cmd_power, cmd_power imported cli's helpers back
    assert cycles({"cli": {"cmd_power"}, "cmd_power": {"cli"}}) == [["cli", "cmd_power", "cli"]]


def test_no_import_circle_in_the_package():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != "__main__"))
def test_nothing_imports_the_cli_back(name):
    assert "cli" not in GRAPH[name]


def test_import_greenslurm_loads_no_pandas_or_numpy():
    """``import greenslurm`` stays quick: the notebook API (greenslurm.replay, ...) loads on first use."""
    import subprocess
    import sys
    code = ("import sys, greenslurm\n"
            "heavy = sorted(m for m in ('pandas', 'numpy', 'pyarrow', 'greenslurm.api') if m in sys.modules)\n"
            "assert not heavy, heavy\n"
            "assert callable(greenslurm.replay) and 'greenslurm.api' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n not in ("__main__", "api")))
def test_the_api_is_a_top_layer(name):
    # the notebook API sits beside the CLI: it imports the layers below, nothing imports it back
    assert "api" not in GRAPH[name]


# -- what a command loads ---------------------------------------------------------------------------
# The command line starts by importing only what the command needs: help and a replay printed on the
# terminal load none of these, nor does --out (its files are written from the result's columns).
HEAVY = ("pandas", "pyarrow", "scipy", "matplotlib", "dask")

RUN_MAIN = """\
import json, sys
from greenslurm.cli import main
argv, report = json.loads(sys.argv[1]), sys.argv[2]
try:
    code = main(argv)
except SystemExit as exc:          # --help ends in argparse's exit
    code = exc.code
with open(report, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def modules_in_fresh_process(argv: list[str], cwd: Path) -> tuple[int, set[str]]:
    """(exit code, every module in ``sys.modules`` afterwards) of ``greenslurm ARGV`` run in a new
    interpreter from ``cwd`` (not the checkout, whose folders Python could pick up)."""
    import json
    import subprocess
    import sys
    report = cwd / "modules.json"
    done = subprocess.run([sys.executable, "-c", RUN_MAIN, json.dumps(argv), str(report)], cwd=cwd,
                          capture_output=True, text=True)
    assert report.exists(), done.stderr
    found = json.loads(report.read_text())
    return found["code"], set(found["modules"])


def main_in_fresh_process(argv: list[str], cwd: Path) -> tuple[int, set[str]]:
    """(exit code, the top-level packages in ``sys.modules`` afterwards) of ``greenslurm ARGV``."""
    code, modules = modules_in_fresh_process(argv, cwd)
    return code, {name.split(".")[0] for name in modules}


@pytest.fixture(scope="module")
def kth_cut(shared_data, tmp_path_factory) -> Path:
    """The KTH-SP2 log's header and its first 300 jobs."""
    lines = (shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf").read_text().splitlines(keepends=True)
    header = [line for line in lines if line.startswith(";")]
    jobs = [line for line in lines if line.strip() and not line.startswith(";")][:300]
    path = tmp_path_factory.mktemp("cut") / "kth-300.swf"
    path.write_text("".join(header + jobs))
    return path


@pytest.mark.parametrize("argv", [["--help"], ["replay", "--help"], ["run", "--help"], ["report", "--help"],
                                  ["replay", "KTH"], ["replay"], ["traces", "info", "KTH"]],
                         ids=["help", "replay-help", "run-help", "report-help", "replay-kth-300", "demo", "traces-info"])
def test_a_command_without_files_loads_no_heavy_package(argv, kth_cut, tmp_path):
    argv = [str(kth_cut) if arg == "KTH" else arg for arg in argv]
    code, loaded = main_in_fresh_process(argv, tmp_path)
    assert code == 0
    assert "greenslurm" in loaded and not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    if argv[0] == "replay" and "--help" not in argv:
        assert "numpy" in loaded             # the replay did run: the engine is numpy's


def test_the_help_loads_no_command(tmp_path):
    # greenslurm --help lists the commands from their table: no engine (numpy), no terminal library (rich)
    code, loaded = main_in_fresh_process(["--help"], tmp_path)
    assert code == 0 and not loaded & {"numpy", "rich", "sortedcontainers", *HEAVY}


def _help_of(parser, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name in COMMAND_HELP), ["traces", "info", "--help"]],
                         ids=lambda argv: " ".join(argv))
def test_a_command_filled_in_alone_reads_as_in_the_whole_parser(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    alone = build_parser(command_named(argv))
    assert _help_of(alone, argv, capsys) == _help_of(build_parser(), argv, capsys)


def test_every_command_is_in_the_table():
    # the whole parser's commands are the table's, in its order (the help lists them so)
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(commands.choices) == list(COMMAND_HELP)
    assert [action.help for action in commands._choices_actions] == list(COMMAND_HELP.values())


@pytest.mark.parametrize("process", ["child", "off"])
def test_out_writes_parquet_without_pandas(process, kth_cut, tmp_path, monkeypatch):
    # jobs.csv, jobs.parquet and power.csv come from the result's columns (pyarrow writes the Parquet
    # file from the columns' buffers): --out loads pyarrow and none of the other heavy packages; with
    # a child pyarrow is loaded by the jobs files' child process only, with the child off by the command
    import csv
    import pyarrow.parquet as pq
    monkeypatch.setenv("GREENSLURM_OUT_PROCESS", process)
    out = tmp_path / "out"
    code, loaded = main_in_fresh_process(["replay", str(kth_cut), "--out", str(out)], tmp_path)
    heavy = set(HEAVY) - {"pyarrow"}
    assert code == 0 and ("pyarrow" in loaded) == (process == "off") and not loaded & heavy, sorted(loaded & heavy)
    table = pq.read_table(out / "jobs.parquet")
    with open(out / "jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert table.num_rows == len(rows) == 300                   # every job of the cut, one row each
    assert table.column("job_id").to_pylist() == [row["job_id"] for row in rows]


def test_the_file_writers_load_no_pandas_until_a_table_is_written(tmp_path):
    """``--json`` and the summary use outputs.py's JSON writer: importing it loads no pandas."""
    code = ("import sys; import greenslurm.sim.reporting.outputs as o; "
            "o.summary_json_text({'a': 1.5}); print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert done.stdout.strip() == "False"


# What a replay under FCFS, EASY or conservative on CPU nodes does not need: the other queues (the registry
# names them before their modules load), co-location's policies, the admission figures, the acceptance
# policies, the per-GPU state and the GPU scorers, and TOML (no cluster file).  (numpy.ma is loaded: the
# report's percentiles are numpy's np.percentile, whose np.unique loads it.)
OTHER_PARTS = {"greenslurm.sim.engine.deadline_queue", "greenslurm.sim.engine.slurm_queue",
               "greenslurm.allocation.colocation", "greenslurm.sim.accounting.deadline_metrics",
               "greenslurm.acceptance.registry", "greenslurm.clustermodel.gpu_state", "greenslurm.allocation.scorers.framework",
               "greenslurm.allocation.scorers", "greenslurm.sim.accounting.gpu_accounting", "tomllib"}


@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative"])
def test_a_pool_replay_loads_only_its_own_parts(queue, kth_cut, tmp_path):
    code, loaded = modules_in_fresh_process(["replay", str(kth_cut), "--queue", queue, "--no-progress"], tmp_path)
    assert code == 0
    assert "greenslurm.sim.engine.pool_core" in loaded            # it ran, on the processor-pool core
    assert not loaded & OTHER_PARTS, sorted(loaded & OTHER_PARTS)


def test_the_deadline_queue_loads_when_chosen(kth_cut, tmp_path):
    code, loaded = modules_in_fresh_process(["replay", str(kth_cut), "--queue", "deadline", "--limit", "50",
                                             "--no-progress"], tmp_path)
    assert code == 0
    assert {"greenslurm.sim.engine.deadline_queue", "greenslurm.sim.accounting.deadline_metrics"} <= loaded


def test_the_gpu_parts_load_with_a_gpu_cluster(shared_data, tmp_path):
    # the other side of the above: a replay on GPU nodes loads them (and runs: exit 0)
    code, loaded = modules_in_fresh_process(
        ["replay", str(shared_data / "alibaba-gpu-2023" / "openb_pod_list_default.csv"),
         "--nodes", str(shared_data / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv"),
         "--queue", "none", "--select", "fgd", "--limit", "200", "--no-progress"], tmp_path)
    assert code == 0
    assert {"greenslurm.clustermodel.gpu_state", "greenslurm.allocation.scorers.framework", "greenslurm.allocation.scorers",
            "greenslurm.sim.accounting.gpu_accounting"} <= loaded


PROCESS_REPORT = """\
import gc, json, os, runpy, sys
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
if sys.argv[2] == "default-gc":          # the baseline: the command's threshold setting made a no-op
    gc.set_threshold = lambda *thresholds: None
sys.argv = ["greenslurm", *json.loads(sys.argv[1])]
try:
    runpy.run_module("greenslurm", run_name="__main__")
except SystemExit as exc:
    code = exc.code
import numpy          # loaded by the replay: its BLAS started with the setting the command left
print(json.dumps({"code": code, "threads": os.environ.get("OPENBLAS_NUM_THREADS"), "collections": collections}))
"""


def process_report(argv: list[str], cwd: Path, env: dict | None = None, default_gc: bool = False) -> dict:
    """The exit code, OPENBLAS_NUM_THREADS afterwards and the cyclic collections of ``greenslurm ARGV``
    run through the command's entry point (``python -m greenslurm``) in a fresh process (``default_gc``:
    with the interpreter's own collector thresholds)."""
    done = subprocess.run([sys.executable, "-c", PROCESS_REPORT, json.dumps(argv),
                           "default-gc" if default_gc else "command-gc"], cwd=cwd, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("given, expected", [(None, "1"), ("3", "3")], ids=["default", "the-users"])
def test_the_command_starts_one_blas_thread_unless_told(given, expected, kth_cut, tmp_path):
    # no sum of greenslurm's goes through BLAS (tests/test_blas_threads.py); a thread per core costs start-up
    import os
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    report = process_report(["replay", str(kth_cut), "--no-progress", "--json", str(tmp_path / "s.json")], tmp_path, env)
    assert (report["code"], report["threads"]) == (0, expected)


def test_a_small_replay_makes_few_garbage_collections(kth_cut, tmp_path):
    # Starting keeps everything it makes (modules, classes, the parser): the command raises the young
    # generation's threshold so that the cyclic collector does not traverse it some fifty times.  How many
    # objects starting makes depends on the bytecode cache (compiling a module makes more), so the count
    # is compared with the same start under the interpreter's thresholds: a tenth of it at most.
    argv = ["replay", str(kth_cut), "--no-progress", "--json", str(tmp_path / "s.json")]
    ours, default = process_report(argv, tmp_path), process_report(argv, tmp_path, default_gc=True)
    assert ours["code"] == default["code"] == 0
    assert len(default["collections"]) >= 20                  # what the default threshold does
    assert len(ours["collections"]) <= len(default["collections"]) // 10, (ours, default)


def test_the_installed_command_is_the_entry_point(tmp_path):
    # the console script runs greenslurm.__main__:run, which makes the settings above
    from importlib.metadata import entry_points
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "greenslurm"]
    assert script.value == "greenslurm.__main__:run"
