"""An option whose optional package is missing is refused in one line (exit 2), not a traceback:
the package is hidden from the import system (``sys.modules[name] = None`` makes ``import`` fail as
an absent package does)."""

from __future__ import annotations

import sys

from greenslurm.cli import main

SWF = """; MaxNodes: 2
; MaxProcs: 2
1 0 0 100 1 -1 -1 1 200 -1 1 1 1 -1 -1 -1 -1 -1
2 10 0 100 2 -1 -1 2 200 -1 1 1 1 -1 -1 -1 -1 -1
"""


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error, error
    return error


def test_report_plots_without_matplotlib(tmp_path, capsys, monkeypatch):
    trace = tmp_path / "t.swf"
    trace.write_text(SWF)
    assert main(["replay", str(trace), "--no-progress", "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["report", str(tmp_path / "out"), "--plots", str(tmp_path / "figures")]) == 2
    error = one_line_error(capsys)
    assert "--plots" in error and "greenslurm[plot]" in error
    assert not (tmp_path / "figures").exists() or not any((tmp_path / "figures").iterdir())


def test_sweep_on_dask_without_distributed(tmp_path, capsys, monkeypatch):
    trace = tmp_path / "t.swf"
    trace.write_text(SWF)
    spec = tmp_path / "study.toml"
    spec.write_text(f'[sweep]\nname = "s"\nseeds = 1\n[[trace]]\npath = "{trace}"\n[[policy]]\nname = "fcfs"\nqueue = "fcfs"\n')
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r"), "--dask", "local", "--no-progress"]) == 2
    error = one_line_error(capsys)
    assert "--dask" in error and "greenslurm[dask]" in error
