"""`greenslurm report`: confidence intervals, comparison tables, and the figures (series checked before saving)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from greenslurm.clustermodel import InputError
from greenslurm import plots, stats
from greenslurm.cli import main
from greenslurm.cmd_report import classify, load_results, make_plots, sweep_tables
from greenslurm.sweep import run_sweep
from greenslurm.sweep_spec import parse_spec

pytest.importorskip("matplotlib")

SPEC = """
[sweep]
seeds = 3
[[trace]]
name = "small"
synthetic = { jobs = 30 }
cluster = { nodes = 4, cpus = 4 }
[[policy]]
name = "easy"
queue = "easy"
[[policy]]
name = "greedy"
queue = "deadline"
options = { acceptance = "greedy", allocation = "bestfit" }
[grid]
slack = [0.5, 2.0]
supply = ["solar"]
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    assert run_sweep(parse_spec(SPEC), out, workers=1).complete
    return out


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("replay") / "out"
    assert main(["demo", "--out", str(out), "--no-progress"]) == 0
    return out


def inflate_frame() -> pd.DataFrame:
    rows = []
    for seed in range(3):
        for policy, factor in (("fgd", 1.0), ("pwr", 0.9)):
            for level in (50.0, 100.0, 130.0):
                rows.append({"trace": "default", "policy": policy, "seed": seed, "arrived_pct": level,
                             "grar": 1.0 if level <= 100 else 0.9 + 0.01 * seed,
                             "eopc_w": factor * 1000.0 * level + seed})
    return pd.DataFrame(rows)


def labels(figure) -> list[str]:
    return [line.get_label() for axes in figure.axes for line in axes.get_lines() if not line.get_label().startswith("_")]


def test_student_t_interval_and_table_fallback(monkeypatch):
    m, h, n = stats.mean_ci([10.0, 12.0, 14.0, 16.0])
    assert (m, n) == (13.0, 4) and h == pytest.approx(3.182446 * np.std([10, 12, 14, 16], ddof=1) / 2, rel=1e-5)
    import builtins
    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    assert stats.t_quantile(3) == 3.1824 and stats.t_quantile(60) == pytest.approx(2.0003, abs=2e-3)


def test_classify_kinds(sweep_dir, replay_dir):
    assert classify(pd.read_parquet(sweep_dir / "results.parquet")) == "sweep"
    assert classify(pd.read_csv(replay_dir / "jobs.csv")) == "jobs"
    assert classify(pd.read_csv(replay_dir / "power.csv")) == "power"
    assert classify(inflate_frame()) == "inflate"
    assert classify(pd.DataFrame({"slack_mean": [1.0], "performance_ratio": [1.2]})) == "compare"
    with pytest.raises(InputError, match="no results"):
        load_results([str(replay_dir / "summary.json")])


def test_sweep_table_has_ci_over_seeds(sweep_dir):
    frame = pd.read_parquet(sweep_dir / "results.parquet")
    slack = "slack_mean" if "slack_mean" in frame else "slack"
    supply = "renewable" if "renewable" in frame else "supply"
    tables = sweep_tables(frame)
    assert tables[0].keys == ["policy", slack, supply, "seeds"] and "Renewable share (%)" in tables[0].metrics
    assert "Performance ratio" in tables[1].metrics and any(m.startswith("Mean wait (") for m in tables[1].metrics)
    assert {row[-1] for row in tables[0].key_rows} == {"3"}
    assert any("±" in tables[1].cell(r, m) for r in range(len(tables[1].key_rows)) for m in range(len(tables[1].metrics)))


def test_metric_vs_param_series(sweep_dir):
    frame = pd.read_parquet(sweep_dir / "results.parquet")
    figure = plots.metric_vs_param(frame, "slack_mean" if "slack_mean" in frame else "slack", "performance_ratio")
    assert labels(figure) == ["easy", "greedy"]
    easy, greedy = figure.axes[0].get_lines()
    slack = "slack_mean" if "slack_mean" in frame else "slack"
    assert list(easy.get_xdata()) == [0.5, 2.0] and len(easy.get_ydata()) == 2
    expected = frame[(frame.policy == "greedy") & (frame[slack] == 0.5)]["performance_ratio"].mean()
    assert greedy.get_ydata()[0] == pytest.approx(expected)
    assert len(figure.axes[0].collections) >= 1            # the CI band of greedy


def test_inflate_figures():
    frame = inflate_frame()
    saving = plots.power_saving_vs_demand(frame)             # baseline: the first policy, fgd
    assert labels(saving) == ["pwr"]
    assert saving.axes[0].get_lines()[0].get_ydata() == pytest.approx([10.0, 10.0, 10.0], abs=0.1)
    grar = plots.grar_vs_demand(frame)
    assert labels(grar) == ["fgd", "pwr"]
    assert list(grar.axes[0].get_lines()[0].get_ydata()) == pytest.approx([100.0, 100.0, 91.0])


def test_replay_figures(replay_dir):
    jobs = pd.read_csv(replay_dir / "jobs.csv")
    power = pd.read_csv(replay_dir / "power.csv")
    figure = plots.power_over_time(power)
    assert labels(figure) == ["demand (kW)", "energy (kWh, cumulative)"]   # the power steps as a line with markers
    energy_line = figure.axes[1].get_lines()[0]
    assert energy_line.get_ydata()[-1] == pytest.approx(power["energy_j"].sum() / 3.6e6)
    demand = figure.axes[0].get_lines()[0]
    assert demand.get_ydata()[:2].tolist() == pytest.approx([power["power_w"].iloc[0] / 1e3] * 2)   # one step
    times, active = plots.active_nodes(jobs)
    assert active.max() <= 100 and active[-1] == 0
    chart = plots.gantt(jobs, max_jobs=50)
    assert "first 50 of 2,000 jobs" in chart._suptitle.get_text()


def test_supply_column_draws_renewable_figure():
    power = pd.DataFrame({"start_s": [0.0, 3600.0], "end_s": [3600.0, 7200.0], "power_w": [1000.0, 3000.0],
                          "energy_j": [3.6e6, 10.8e6], "supply_w": [2000.0, 500.0]})
    figure = plots.power_over_time(power)
    assert "renewable used" in labels(figure) or any(c.get_label() == "renewable used" for c in figure.axes[0].collections)
    assert "with renewable supply" in figure._suptitle.get_text()


def test_report_command_writes_plots_and_says_what_is_skipped(sweep_dir, replay_dir, tmp_path, capsys):
    csv = tmp_path / "inflate.csv"
    inflate_frame().to_csv(csv, index=False)
    figures = tmp_path / "figures"
    assert main(["report", str(sweep_dir), str(replay_dir), str(csv), "--plots", str(figures)]) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in figures.iterdir())
    slack = "slack_mean" if any("slack_mean" in n for n in names) else "slack"
    for expected in (f"sweep-small-performance_ratio-vs-{slack}.png", "inflate-power-saving-vs-demand.png",
                     "inflate-grar-vs-demand.png", "power-energy-over-time.png", "active-nodes-over-time.png",
                     "gantt.png"):
        assert expected in names
        assert (figures / expected).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (figures / expected).stat().st_size > 5000
    assert "skipped: renewable supply vs demand" in out
    assert main(["report", str(replay_dir), "--plots", str(tmp_path / "svg"), "--format", "svg"]) == 0
    assert (tmp_path / "svg" / "gantt.svg").read_text().lstrip().startswith("<?xml")
    assert "no inflate results" in capsys.readouterr().out


def test_compare_csv_gives_performance_ratio_vs_slack(tmp_path):
    frame = pd.DataFrame({"workload": "kth", "slack_mean": [0.2, 1.0, 5.0] * 2,
                          "acceptance": ["greedy"] * 3 + ["threshold"] * 3, "allocation": "bestfit",
                          "performance_ratio": [1.5, 1.2, 1.05, 1.8, 1.4, 1.1]})
    path = tmp_path / "compare.csv"
    frame.to_csv(path, index=False)
    log = make_plots(load_results([str(path)]), tmp_path / "f", "png", 100, None)
    assert [p.name for p in log.written] == ["compare-performance-ratio-vs-slack_mean.png"]


def test_bad_report_options_are_one_line_errors(replay_dir, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for options, expected in ((["--gantt-jobs", "0"], "field --gantt-jobs: must be a whole number of at least 1, not 0"),
                              (["--tables", str(a_file)], f"{a_file}: field --tables: is a file, not a folder"),
                              (["--plots", str(a_file)], f"{a_file}: field --plots: is a file, not a folder")):
        assert main(["report", str(replay_dir), *options]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(expected) and len(err.splitlines()) == 1 and "Traceback" not in err


def test_tables_split_to_fit_a_narrow_terminal_and_never_cut_a_cell(sweep_dir):
    from rich.console import Console
    from greenslurm.sim.reporting.result_tables import to_rich
    table = sweep_tables(pd.read_parquet(sweep_dir / "results.parquet"))[1]
    console = Console(width=60, record=True, color_system=None)
    parts = to_rich(table, console)
    assert len(parts) > 1 and parts[0].title.endswith(f"(1/{len(parts)})")
    for part in parts:
        console.print(part)
    text = console.export_text()
    assert "…" not in text and "e+" not in text and max(len(line) for line in text.splitlines()) <= 60
    for r in range(len(table.key_rows)):                    # every cell printed whole
        for m in range(len(table.metrics)):
            assert table.cell(r, m) in text
