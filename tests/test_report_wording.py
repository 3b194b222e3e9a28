"""The replay, compare and whatif reports in one wording: one duration format, energy terms named alike,
plain titles, the power assumptions in every footer, the cluster named as its trace names it.  Each
report is rendered as text at 80 columns, as a user reads it piped or in a terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import greenslurm

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


def test_compares_power_table_shows_waits_and_peaks_as_the_replay_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")                  # the table's nine columns whole
    data = Path(greenslurm.__file__).parent / "data"
    assert main(["compare", str(data / "KTH-SP2-1996-2.1-cln-first2000.swf"), "--cluster", str(data / "kth-sp2.toml"),
                 "--limit", "200", "--power-down-after", "600", "--no-progress", "-j", "1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[1].strip(): re.split(r"\s{2,}", line.strip()) for line in out.splitlines()
            if line.startswith(("  no management", "  power-down"))}
    # the first 200 KTH-SP2 jobs under EASY: mean wait 61.2 min (shown as "1.02" hours before); 100 nodes
    # of 200 W: a 20 kW peak (was '20,000' in W)
    assert rows["no management"][3:5] == ["20.00 kW", "61.2 min"]
    assert rows["power-down"][3:5] == ["20.00 kW", "62.7 min"]
    assert "mean wait h" not in out and "peak W" not in out


# -- plain titles and footers that wrap well at 80 columns ---------------------------------------------
def test_compares_title_and_explanation_are_whole_lines_at_80_columns(eighty, tmp_path, capsys):
    data = Path(greenslurm.__file__).parent / "data"
    trace = tmp_path / "[b]kth-1996-2.1.swf"             # what rich would read as markup
    trace.write_bytes((data / "KTH-SP2-1996-2.1-cln-first2000.swf").read_bytes())
    assert main(["compare", str(trace), "--cluster", str(data / "kth-sp2.toml"), "--limit", "200", "--acceptance",
                 "greedy", "--select", "bestfit", "--slack-mean", "1", "2", "--no-progress", "-j", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    # the title of each part on one line, as written (it wrapped at the narrower table's width: '(100|CPUs)')
    title = "[b]kth-1996-2.1.swf on KTH-SP2 (100 CPUs), 200 jobs"
    parts = [line for line in lines if line.startswith(title)]
    assert len(parts) >= 1 and all(line in (title, f"{title} (1/2)", f"{title} (2/2)") for line in parts)
    # the columns' explanation: left-aligned lines at the console's width, not centred under the last part
    start = next(n for n, line in enumerate(lines) if line.startswith("in / out: jobs accepted / rejected"))
    explanation = " ".join(lines[start:start + 3])
    assert explanation.startswith("in / out: jobs accepted / rejected; CPU-h in: load accepted; bound: upper bound "
                                  "on the load any schedule could accept (CPU-h); ratio = bound / load accepted, "
                                  "best of each slack in bold")


# -- unallocated capacity and idle nodes, named alike -------------------------------------------------
TERMS = ("unallocated capacity: the CPUs, GPUs and nodes no job holds, including nodes powered down or booting; "
         "idle nodes: the part drawn by nodes powered on with no job")


def test_the_energy_split_says_what_its_two_parts_hold(eighty, capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # KTH-SP2's nodes have one CPU each: an unallocated CPU is a whole idle node, so both lines are equal
    assert row_value(out, "unallocated capacity") == row_value(out, "of which idle nodes") == "2,203.51 kWh"
    assert TERMS + "; here the same energy: every unallocated CPU was on an idle node" in flat(out)


def test_powered_down_nodes_are_unallocated_not_idle_and_saving_is_named_as_whatif_names_it(eighty, capsys):
    from greenslurm.cmd_whatif import ROWS
    trace = str(Path(greenslurm.__file__).parent / "data" / "KTH-SP2-1996-2.1-cln-first2000.swf")
    assert main(["replay", trace, "--cluster", str(Path(trace).parent / "kth-sp2.toml"), "--limit", "300",
                 "--power-down-after", "600", "--no-progress"]) == 0
    out = capsys.readouterr().out
    # off and booting nodes hold no job: their 22.21 + 5.12 kWh are unallocated, not idle-node energy
    assert (row_value(out, "unallocated capacity"), row_value(out, "of which idle nodes")) == ("104.33 kWh", "76.99 kWh")
    assert TERMS in flat(out) and "here the same energy" not in out
    saving = dict((key, name) for key, name, _, _ in ROWS)["saved_vs_idle_kwh"]
    assert saving == "saved by powering down (kWh)" and row_value(out, saving) == "199.91"
    assert "saved vs" not in out
    # the power states' peak is the energy table's, in the same unit: 100 nodes x 200 W = 20 kW
    peaks = [line.split()[-2:] for line in out.splitlines() if line.strip().startswith("peak power")]
    assert peaks == [["20.00", "kW"]] * 2 and row_value(out, "budget") == "-"


# -- plain titles ---------------------------------------------------------------------------------------
HIGHLIGHTED = re.compile(r"\x1b\[1;(2;)?36m")      # rich's highlighter: numbers in bold cyan (dim in a dim line)


def test_a_file_name_in_a_title_is_shown_as_written(eighty, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")               # as on a terminal: colours on
    data = Path(greenslurm.__file__).parent / "data"
    trace = tmp_path / "[b]kth-1996-2.1.swf"             # digits, and what rich would read as markup
    trace.write_bytes((data / "KTH-SP2-1996-2.1-cln-first2000.swf").read_bytes())
    assert main(["replay", str(trace), "--cluster", str(data / "kth-sp2.toml"), "--limit", "20", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" in out                                 # colours are on
    assert "[b]kth-1996-2.1.swf (swf) on KTH-SP2, easy queue" in out
    assert not HIGHLIGHTED.search(out)
    monkeypatch.chdir(tmp_path)                          # a short name: the table's title fits on one line
    assert main(["traces", "info", trace.name, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Trace [b]kth-1996-2.1.swf" in out and not HIGHLIGHTED.search(out)


def test_the_whatif_header_colours_no_digits(eighty, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    code, _ = run_whatif(tmp_path, export("100Mn", "100Mn"), FOUR_NODES_CONF, "--candidate", "fcfs")
    out = capsys.readouterr().out
    assert code == 0 and "\x1b[" in out and not HIGHLIGHTED.search(out)
    assert "jobs.txt" in out and "2 jobs over 0.0 days" in out


def test_whatifs_wrapped_distance_lines_keep_their_indent_at_80_columns(eighty, capsys):
    """The distance lines are indented two spaces under their heading; at 80 columns they wrap, and each
    wrapped part keeps the indent (was '... pair' then 'concordance ...' at the panel's margin)."""
    data = Path(greenslurm.__file__).parent / "data"
    assert main(["whatif", str(data / "KTH-SP2-1996-2.1-cln-first2000.swf"), "--cluster", str(data / "kth-sp2.toml"),
                 "--limit", "200", "-j", "1", "--no-progress"]) == 0
    lines = [line.rstrip("│ ").removeprefix("│ ") for line in capsys.readouterr().out.splitlines()]
    first = next(n for n, line in enumerate(lines) if line.startswith("how far the current policy"))
    end = next(n for n, line in enumerate(lines) if line.startswith("recorded column:"))
    block = lines[first:end]
    heading = [line for line in block if not line.startswith("  ")]
    # the heading (wrapped once at 80: "... over 200" / "jobs:"), then only indented lines
    assert heading == block[:len(heading)] and " ".join(heading).endswith("over 200 jobs:")
    indented = block[len(heading):]
    assert len(indented) > 2 and all(line.startswith("  ") and line[2] != " " for line in indented), block
    # the two lines wrapped: nothing lost, the concordance inside the indented block
    joined = " ".join(line.strip() for line in indented)
    assert "pair concordance 92.0%" in joined and joined.startswith("mean wait") and "start error median" in joined
