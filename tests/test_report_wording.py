"""The replay, compare and whatif reports in one wording: one duration format, energy terms named alike,
plain titles, the power assumptions in every footer, the cluster named as its trace names it.  Each
report is rendered as text at 80 columns, as a user reads it piped or in a terminal."""

from __future__ import annotations

import re

import pytest

from greenslurm.cli import main
from greenslurm.cmd_compare import compare_table

from test_trustworthy_reports import FOUR_NODES_CONF, export, run_whatif
from test_whatif_baseline import flat

DURATION = re.compile(r"^-?\d{1,3}(,\d{3})*\.\d (s|min|h|d)$")      # one decimal, a unit, thousands separators


def row_value(text: str, label: str) -> str:
    """The value of the replay report's row ``label``."""
    for line in text.splitlines():
        if line.strip().startswith(label + "  "):
            return line.strip()[len(label):].strip()
    raise AssertionError(f"no row {label!r} in:\n{text}")


@pytest.fixture
def eighty(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")


# -- one duration format ---------------------------------------------------------------------------
def test_the_replay_report_shows_waits_in_one_format(eighty, capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # the demo's 2,000 KTH-SP2 jobs under EASY: mean wait 6,000 s = 100.0 min (below 2 h: minutes);
    # median 0 s; p95 40,171 s = 11.16 h; makespan 2,069,601 s = 23.95 d (3 d and more: days)
    assert row_value(out, "mean wait") == "100.0 min"
    assert row_value(out, "p50 / p95 wait") == "0.0 s / 11.2 h"
    assert row_value(out, "makespan") == "24.0 d"


def test_whatif_shows_waits_in_the_replay_reports_format(eighty, tmp_path, capsys):
    code, data = run_whatif(tmp_path, export("100Mn", "100Mn", "100Mn"), FOUR_NODES_CONF, "--candidate", "fcfs")
    out = capsys.readouterr().out
    assert code == 0
    # three 5-min jobs 10 min apart on two free nodes: no wait anywhere; the last ends at 25 min
    assert "mean wait 0.0 s replayed vs 0.0 s recorded" in flat(out)
    # the table's rows inside the panel: label, then the recorded, current and candidate cells
    rows = {}
    for line in out.splitlines():
        if line.count("│") >= 2:
            label, *cells = re.split(r"\s{2,}", line.split("│")[1].strip())
            rows[label] = [cell.removesuffix(" =") for cell in cells]
    for name in ("mean wait", "p95 wait", "max wait", "makespan"):
        assert len(rows[name]) == 3 and all(DURATION.match(cell) for cell in rows[name]), (name, rows[name])
    assert rows["mean wait"] == ["0.0 s"] * 3 and rows["makespan"] == ["25.0 min"] * 3


def test_compare_shows_the_mean_wait_in_the_same_format():
    row = {"slack_mean": 1.0, "acceptance": "greedy", "allocation": "bestfit", "accepted": 3, "rejected": 1,
           "accepted_load_cpu_h": 2.0, "load_bound_cpu_h": 2.5, "performance_ratio": 1.25, "deadline_missed": 0,
           "mean_wait_s": 6000.0}
    from rich.console import Console
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    for table in compare_table([row], "t", width=80):
        console.print(table)
    assert "100.0 min" in console.export_text()           # 6,000 s: as the replay report shows it
