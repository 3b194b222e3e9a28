"""No import circle in the greenslurm package: the CLI (cli.py) imports the cmd_* modules, which import
the shared helpers (inputs.py, console.py, scenario*.py); nothing imports cli.py back.

The modules are read with ``ast`` (imports inside functions count too: a late import still ties two
modules together), not imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
