"""The code's shape, read from its text (nothing is imported): no import cycle between greenslurm's
packages, no module over 800 lines, no function over 100 lines.

A cycle counts at package level: ``a.b`` importing ``c.d`` while ``c.x`` imports ``a.y`` ties the
packages ``a`` and ``c`` together even when no module imports itself back.  A subpackage is a package
of its own (``allocation.scorers`` is not ``allocation``).  The namespace root
``greenslurm/__init__.py`` (the version and lazy names, nothing imported when it loads) is below every
package; the CLI modules beside it are the package ``greenslurm``, at the top.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the repository's layer folders, each a subpackage of the namespace (pyproject.toml's package-dir)
LAYERS = ("greenslurm", "clustermodel", "traces", "sim", "acceptance", "allocation", "slurm_plugin")
NAMESPACE_ROOT = "greenslurm (namespace root)"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100
# being split by their own change: the slurm queue's model and its power saving
LONG_MODULES_BEING_SPLIT: set[str] = set()


def modules(root: Path = ROOT) -> dict[str, tuple[Path, str]]:
    """Every module of the namespace: dotted name -> (file, its package's name)."""
    found = {}
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if layer != "greenslurm":
                parts.insert(0, "greenslurm")
            if parts[-1] == "__init__":
                parts.pop()
                name = ".".join(parts)
                package = NAMESPACE_ROOT if name == "greenslurm" else name
            else:
                name = ".".join(parts)
                package = ".".join(parts[:-1])
            found[name] = (path, package)
    return found


def imported_names(path: Path, module: str, is_package: bool) -> list[str]:
    """The greenslurm modules (or names in them) a file imports, anywhere in it, relative ones resolved."""
    base = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                prefix = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names += [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
    return [name for name in names if name == "greenslurm" or name.startswith("greenslurm.")]


def package_graph(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """package -> {package it imports: one import that shows it (``module -> module``)}."""
    found = modules(root)
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for name, (path, package) in found.items():
        for target in imported_names(path, name, path.name == "__init__.py"):
            while target not in found and "." in target:        # a name inside a module
                target = target.rpartition(".")[0]
            if target in found and found[target][1] != package:
                graph[package].setdefault(found[target][1], f"{name} -> {target}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected sets of more than one package (Tarjan's algorithm), each sorted.

    >>> cycles({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}})
    [['a', 'b', 'c']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in graph.get(node, {}):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(set(graph) | {after for edges in graph.values() for after in edges}):
        if node not in index:
            visit(node)
    return found


def test_cycles_are_found_at_package_level(tmp_path):
    # allocation/selection.py imports the scorers while scorers/__init__.py imports allocation/rules.py:
    # no module imports itself back, yet the two packages are tied
    (tmp_path / "allocation" / "scorers").mkdir(parents=True)
    (tmp_path / "allocation" / "selection.py").write_text("from greenslurm.allocation.scorers import SCORERS\n")
    (tmp_path / "allocation" / "rules.py").write_text("RULE = 1\n")
    (tmp_path / "allocation" / "scorers" / "__init__.py").write_text("from ..rules import RULE\n")
    graph = package_graph(tmp_path)
    assert graph == {"greenslurm.allocation": {"greenslurm.allocation.scorers":
                                               "greenslurm.allocation.selection -> greenslurm.allocation.scorers"},
                     "greenslurm.allocation.scorers": {"greenslurm.allocation":
                                                       "greenslurm.allocation.scorers -> greenslurm.allocation.rules"}}
    assert cycles(graph) == [["greenslurm.allocation", "greenslurm.allocation.scorers"]]


def test_no_import_cycle_between_packages():
    graph = package_graph()
    assert "greenslurm.sim.engine" in graph and "greenslurm.clustermodel" not in graph     # the graph was read
    tied = cycles(graph)
    assert not tied, "\n".join(f"{a} -> {b}: {graph[a][b]}" for group in tied for a in group for b in group
                               if b in graph.get(a, {}))


def test_modules_and_functions_stay_short():
    too_long = []
    for path in sorted(path for folder in (*LAYERS, "bench", "scripts") for path in (ROOT / folder).rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES and relative not in LONG_MODULES_BEING_SPLIT:
            too_long.append(f"{relative}: {lines} lines")
        too_long += [f"{relative}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
                     for node in ast.walk(ast.parse(text, relative))
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not too_long, "\n".join(too_long)
