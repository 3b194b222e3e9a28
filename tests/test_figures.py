"""Every kind of figure and table of ``greenslurm report``, drawn from real small replays of the bundled
KTH-SP2 log (and the Alibaba GPU trace for the inflation figures), checked for what a reader of a paper
would notice: units on the axes, bands inside the physical range, every policy present and drawn
differently, the trace and policies in the title, a legend beside the data, one Gantt row per job,
PNG and SVG files, and table numbers without ``e+`` and with thousands separators."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import greenslurm
from greenslurm import plots
from greenslurm.cli import main
from greenslurm.cmd_report import load_results
from greenslurm.sweep import run_sweep
from greenslurm.sweep_cell import PARAMETERS
from greenslurm.sweep_spec import parse_spec

pytest.importorskip("matplotlib")

DATA = Path(greenslurm.__file__).parent / "data"
KTH = DATA / "KTH-SP2-1996-2.1-cln-first2000.swf"
KTH_CLUSTER = DATA / "kth-sp2.toml"
WHATIF_POLICIES = ["easy", "fcfs", "easy-suspend", "greedy-bestfit"]     # whatif's default set with deadlines
SLACK = "slack_mean" if "slack_mean" in PARAMETERS else "slack"
SUPPLY = "renewable" if "renewable" in PARAMETERS else "supply"
# a unit in parentheses, as the quantity table writes it
UNIT = re.compile(r"\((s|min|h|d|W|kW|MW|kWh|MWh|%|jobs|GPUs|nodes|tasks)\)")


@pytest.fixture(scope="module")
def whatif_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("whatif") / "out"
    assert main(["whatif", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "500", "--renewable", "solar",
                 "--slack-mean", "1.0", "--out", str(out), "-j", "1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(WHATIF_POLICIES)
    return out


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    spec = f"""
[sweep]
seeds = 3
[[trace]]
name = "kth120"
path = "{KTH}"
cluster = "{KTH_CLUSTER}"
limit = 120
[[policy]]
name = "fcfs"
queue = "fcfs"
[[policy]]
name = "easy"
queue = "easy"
[[policy]]
name = "greedy-bestfit"
queue = "deadline"
select = "bestfit"
options = {{ acceptance = "greedy" }}
[grid]
{SLACK} = [0.5, 4.0]
{SUPPLY} = ["solar"]
"""
    assert run_sweep(parse_spec(spec), out, workers=1).complete
    return out


@pytest.fixture(scope="module")
def compare_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("compare") / "compare.csv"
    assert main(["compare", str(KTH), "--limit", "120", "--slack-mean", "0.1", "1", "10", "--acceptance", "greedy",
                 "threshold", "--select", "bestfit", "--csv", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def inflate_csv(shared_data, tmp_path_factory):
    path = tmp_path_factory.mktemp("inflate") / "inflate.csv"
    gpu = shared_data / "alibaba-gpu-2023"
    assert main(["inflate", "--nodes", str(gpu / "openb_node_list_gpu_node.csv"), "--pods",
                 str(gpu / "openb_pod_list_default.csv"), "--select", "fgd", "--select", "pwr", "--seeds", "2",
                 "--until", "0.3", "--step", "5", "--csv", str(path)]) == 0
    return path


def series(axes) -> list:
    return [line for line in axes.get_lines() if not line.get_label().startswith("_")]


def band_lows(axes) -> list[float]:
    """The lowest y of every confidence band (fill_between polygons) of the axes."""
    return [float(np.min(path.vertices[:, 1])) for collection in axes.collections
            for path in collection.get_paths() if len(path.vertices)]


def check_common(figure, trace: str, policies, *, bounded_below: bool = True) -> None:
    """Named axes with units (no raw column names), distinct series styles, title naming trace and
    policies, bands not below 0 for non-negative quantities, the legend outside the data."""
    figure.canvas.draw()
    titles = " ".join(a.get_title() for a in figure.axes) + (figure._suptitle.get_text() if figure._suptitle else "")
    assert trace in titles
    for policy in policies:
        assert policy in titles, policy
    for axes in figure.axes:
        styles = [(line.get_color(), line.get_linestyle(), line.get_marker()) for line in series(axes)]
        assert len(styles) == len(set(styles)), styles             # every series drawn its own way
        for label in (axes.get_xlabel(), axes.get_ylabel()):
            assert "_" not in label, label                     # a raw column name like mean_wait_s
        if bounded_below:
            assert all(low >= -1e-9 for low in band_lows(axes)), band_lows(axes)
        legend = axes.get_legend()
        if legend is not None:
            box, data = legend.get_window_extent(), axes.get_window_extent()
            assert box.x0 >= data.x1 - 1 or box.y1 <= data.y0 + 1     # beside or below, never over the data


def test_sweep_metric_vs_slack_has_units_clipped_bands_and_every_policy(sweep_dir):
    frame = pd.read_parquet(sweep_dir / "results.parquet")
    for metric in ("mean_wait_s", "energy_kwh", "peak_power_w", "utilization", "renewable_share", "rejected"):
        figure = plots.metric_vs_param(frame, SLACK, metric, trace="kth120")
        axes = figure.axes[0]
        assert UNIT.search(axes.get_ylabel()), axes.get_ylabel()
        assert [line.get_label() for line in series(axes)] == ["fcfs", "easy", "greedy-bestfit"]
        check_common(figure, "kth120", ["fcfs", "easy", "greedy-bestfit"])
        if metric in ("utilization", "renewable_share"):      # shares: within 0-100 %
            for collection in axes.collections:
                for path in collection.get_paths():
                    assert path.vertices[:, 1].max() <= 100.0 + 1e-9
    # greedy's mean wait over 3 seeds has a wide interval: unclipped it would reach below 0 h
    wait = plots.metric_vs_param(frame, SLACK, "mean_wait_s", trace="kth120").axes[0]
    greedy = frame[frame.policy == "greedy-bestfit"].groupby(SLACK)["mean_wait_s"]
    # the means span decades here (greedy's few minutes, FCFS's hours): a log axis, said in the label
    label = wait.get_ylabel().removesuffix(" (log scale)")
    assert label in ("Mean wait (s)", "Mean wait (min)", "Mean wait (h)")
    factor = {"(s)": 1.0, "(min)": 60.0, "(h)": 3600.0}[label.split()[-1]]
    assert list(series(wait)[2].get_ydata()) == pytest.approx((greedy.mean() / factor).tolist())


def test_band_is_cut_at_zero_where_the_interval_would_go_negative():
    # waits 0, 0, 9000 s: mean 3000 s, s = 5196 s, half width t(0.975, 2) * s / sqrt(3) = 4.3027 * 3000 = 12908 s,
    # so the raw band reaches 3000 - 12908 = -9908 s; shown in h it must stop at 0
    frame = pd.DataFrame({"policy": "p", "trace": "t", "x": 1.0, "seed": [0, 1, 2], "mean_wait_s": [0.0, 0.0, 9000.0]})
    frame = pd.concat([frame, frame.assign(x=2.0)])
    axes = plots.metric_vs_param(frame, "x", "mean_wait_s").axes[0]
    lows = band_lows(axes)
    assert axes.get_ylabel() == "Mean wait (h)" and min(lows) == 0.0
    top = max(float(np.max(p.vertices[:, 1])) for c in axes.collections for p in c.get_paths())
    assert top == pytest.approx((3000.0 + 4.302653 * 3000.0) / 3600.0, rel=1e-4)


def test_first_twelve_series_all_look_different():
    frame = pd.DataFrame([{"policy": f"p{i}", "x": x, "energy_kwh": 1.0} for i in range(12) for x in (1.0, 2.0)])
    figure = plots.metric_vs_param(frame, "x", "energy_kwh", trace="t")
    check_common(figure, "t", [f"p{i}" for i in range(12)])


def test_sweep_policies_compared_bars(sweep_dir):
    frame = pd.read_parquet(sweep_dir / "results.parquet")
    figure = plots.metrics_by_policy(frame, ["mean_wait_s", "energy_kwh", "utilization"], trace="kth120")
    check_common(figure, "kth120", ["fcfs", "easy", "greedy-bestfit"])
    for axes in figure.axes:
        assert UNIT.search(axes.get_ylabel())
        assert [t.get_text() for t in axes.get_xticklabels()] == ["fcfs", "easy", "greedy-bestfit"]
        assert all(min(line.get_ydata()) >= 0 for line in axes.get_lines())     # error bars cut at 0


def test_compare_figures(compare_csv):
    frame = pd.read_csv(compare_csv)
    figure = plots.metric_vs_param(frame, "slack_mean", "performance_ratio", series=["acceptance"],
                                   trace=KTH.name)
    assert [line.get_label() for line in series(figure.axes[0])] == ["greedy", "threshold"]
    check_common(figure, KTH.name, ["greedy", "threshold"])
    assert figure.axes[0].get_xlabel().startswith("Deadline slack")


def test_inflate_figures(inflate_csv):
    frame = pd.read_csv(inflate_csv)
    grar = plots.grar_vs_demand(frame)
    assert grar.axes[0].get_ylabel() == "GRAR (%)"
    check_common(grar, "default", ["fgd", "pwr"])
    for collection in grar.axes[0].collections:
        for path in collection.get_paths():
            assert path.vertices[:, 1].max() <= 100.0 + 1e-9
    saving = plots.power_saving_vs_demand(frame)           # a saving may be negative: no cut
    check_common(saving, "default", ["fgd", "pwr"], bounded_below=False)
    assert saving.axes[0].get_ylabel() == "Power saving vs fgd (%)"


def test_replay_figures_name_the_policy_and_show_every_job(whatif_dir):
    results = load_results([str(p) for p in sorted(whatif_dir.iterdir())])
    replay = results.replay_of(str(whatif_dir / "fcfs" / "jobs.csv"))
    assert replay.policy == "fcfs" and replay.trace == f"{KTH.name} (first 500 jobs)"
    power = pd.read_csv(whatif_dir / "fcfs" / "power.csv")
    figure = plots.power_over_time(power, trace=replay.trace, policy="fcfs")
    check_common(figure, "KTH-SP2", ["fcfs"])
    assert figure.axes[0].get_ylabel() == "Power (kW)" and figure.axes[1].get_ylabel() == "Cumulative energy (kWh)"
    assert UNIT.search(figure.axes[0].get_xlabel())
    jobs = pd.read_csv(whatif_dir / "fcfs" / "jobs.csv")
    chart = plots.gantt(jobs, max_jobs=100, trace=replay.trace, policy="fcfs")
    run = next(c for c in chart.axes[0].containers if c.get_label() == "run (start to end)")
    first = jobs.sort_values(["start_s", "job_id"], kind="stable").head(100)
    assert len(run.patches) == 100                                          # one bar per job
    assert [round(p.get_y() + p.get_height() / 2) for p in run.patches] == list(range(100))   # one row each
    widths_h = np.array([p.get_width() for p in run.patches])
    runs_h = (first["end_s"] - first["start_s"]).to_numpy() / 3600.0
    assert chart.axes[0].get_xlabel().startswith("Time since the first submit (h)")
    assert np.all(widths_h >= runs_h - 1e-9) and np.all(widths_h > 0)    # no job too thin to see
    assert "first 100 of 500 jobs" in chart._suptitle.get_text() and "fcfs" in chart._suptitle.get_text()
    active = plots.active_nodes_over_time(jobs, 100, trace=replay.trace, policy="fcfs")
    check_common(active, "KTH-SP2", ["fcfs"])


def test_policy_overlays_of_whatif(whatif_dir):
    powers = {p: pd.read_csv(whatif_dir / p / "power.csv") for p in WHATIF_POLICIES}
    jobs = {p: pd.read_csv(whatif_dir / p / "jobs.csv") for p in WHATIF_POLICIES}
    figure = plots.power_by_policy(powers, trace="KTH-SP2")
    check_common(figure, "KTH-SP2", WHATIF_POLICIES)
    top, bottom = figure.axes
    assert [line.get_label() for line in series(top)] == WHATIF_POLICIES
    assert top.get_ylabel() == "Power (kW)" and bottom.get_ylabel() == "Cumulative energy (kWh)"
    for policy, line in zip(WHATIF_POLICIES, series(bottom)):             # each ends at its own energy
        assert line.get_ydata()[-1] == pytest.approx(powers[policy]["energy_j"].sum() / 3.6e6)
    cdf = plots.wait_cdf(jobs, trace="KTH-SP2")
    check_common(cdf, "KTH-SP2", WHATIF_POLICIES)
    for policy, line in zip(WHATIF_POLICIES, series(cdf.axes[0])):
        assert line.get_label().startswith(f"{policy} ({len(jobs[policy]):,} jobs")
        assert line.get_ydata()[-1] == pytest.approx(100.0)
    assert {"1 min", "1 h"} <= {t.get_text() for t in cdf.axes[0].get_xticklabels()}


def test_report_writes_png_and_svg_of_every_figure_and_readable_tables(whatif_dir, sweep_dir, compare_csv, tmp_path,
                                                                       capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    figures, tables = tmp_path / "figures", tmp_path / "tables"
    folders = [str(p) for p in sorted(whatif_dir.iterdir())]
    assert main(["report", str(sweep_dir), str(compare_csv), *folders, "--plots", str(figures),
                 "--tables", str(tables), "--gantt-jobs", "100"]) == 0
    out = capsys.readouterr().out
    stems = {p.stem for p in figures.iterdir()}
    for stem in ("policies-power-energy-over-time", "policies-wait-cdf", "policies-active-nodes-over-time",
                 "policies-compared", "fcfs-gantt", "easy-suspend-power-energy-over-time",
                 f"sweep-kth120-policies-compared-{SLACK}-0.5", f"sweep-kth120-policies-compared-{SLACK}-4",
                 f"sweep-kth120-mean_wait_s-vs-{SLACK}",
                 "compare-performance-ratio-vs-slack_mean"):
        assert stem in stems, stem
    for stem in stems:
        png, svg = figures / f"{stem}.png", figures / f"{stem}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert svg.read_text().lstrip().startswith("<?xml") and svg.stat().st_size > 5000
    # tables: units in headers, no e+ notation, thousands separators, nothing cut at 100 columns
    assert "e+" not in out and "…" not in out
    assert re.search(r"\b1,\d{3}\b", out)                   # e.g. the replays' energy, over 1,000 kWh
    markdown = (tables / "replays-compared-cluster-KTH-SP2.md").read_text() if (
        tables / "replays-compared-cluster-KTH-SP2.md").exists() else (tables / "replays-compared.md").read_text()
    assert "| Energy (kWh) |" in markdown and "e+" not in markdown and re.search(r"\b1,\d{3}\b", markdown)
    csv = pd.read_csv(tables / "replays-compared.csv")
    summary = pd.read_json(whatif_dir / "fcfs" / "summary.json", typ="series")
    row = csv[csv["policy"] == "fcfs"].iloc[0]
    assert row["Energy (kWh)"] == pytest.approx(summary["energy_kwh"], rel=1e-5)
    assert "e+" not in (tables / "replays-compared.csv").read_text()
    assert sorted(p.suffix for p in tables.iterdir()).count(".md") == len(list(tables.glob("*.csv")))


def test_every_figure_of_a_cut_run_names_the_cut_in_its_title(whatif_dir, compare_csv, tmp_path, monkeypatch):
    """whatif's, a replay's and compare's figures say the run was cut to the trace's first N jobs, as a
    sweep's do: the limit is in each summary.json's trace (and compare's CSV), the title says
    "first N jobs".  The figures are caught where report writes them (their files are not read back)."""
    from greenslurm.cmd_report import make_plots
    replay_dir = tmp_path / "replay"
    assert main(["replay", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "150", "--out", str(replay_dir),
                 "--no-progress"]) == 0
    assert json.loads((replay_dir / "summary.json").read_text())["trace"]["limit"] == 150
    assert json.loads((whatif_dir / "fcfs" / "summary.json").read_text())["trace"]["limit"] == 500
    assert set(pd.read_csv(compare_csv)["limit"]) == {120}
    titles: dict[str, str] = {}

    def caught(figure, stem, formats=()):
        titles[Path(stem).name] = figure._suptitle.get_text().replace("\n", " ")
        return []
    monkeypatch.setattr(plots, "save_formats", caught)
    results = load_results([str(p) for p in sorted(whatif_dir.iterdir())])
    make_plots(results, tmp_path, "png", 50, None)
    make_plots(load_results([str(replay_dir)]), tmp_path, "png", 50, None)
    make_plots(load_results([str(compare_csv)]), tmp_path, "png", 50, None)
    expected = {"fcfs-power-energy-over-time": "first 500 jobs", "easy-gantt": "first 500 jobs",
                "policies-compared": "first 500 jobs", "policies-wait-cdf": "first 500 jobs",
                "policies-power-energy-over-time": "first 500 jobs", "power-energy-over-time": "first 150 jobs",
                "gantt": "first 150 jobs", "active-nodes-over-time": "first 150 jobs",
                "compare-performance-ratio-vs-slack_mean": "first 120 jobs"}
    for name, cut in expected.items():
        assert f"{KTH.name} ({cut})" in titles[name], (name, titles[name])
    assert all("first " in title for title in titles.values()), titles


def test_a_title_never_breaks_a_trace_file_name_at_its_hyphens():
    name = KTH.name                                         # KTH-SP2-1996-2.1-cln-first2000.swf
    text = plots.title_text("Distribution of job waits", f"{name} (first 200 jobs), {name} (first 300 jobs)",
                            ["easy", "fcfs"], width=72)
    # 34 + 18 + 2 = 54 characters, then the second name would pass 72: it starts the next line whole
    assert text.split("\n") == ["Distribution of job waits", f"{name} (first 200 jobs),",
                                f"{name} (first 300 jobs): easy, fcfs"]
