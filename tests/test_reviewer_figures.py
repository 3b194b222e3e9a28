"""Figures a reviewer accepts: read back from the matplotlib objects (plotted data, axis scales and
ranges, labels, line styles), never from pixels.

Each test is one case a researcher met in ``greenslurm report``'s figures: lines that only colour tells
apart, a log axis where values span decades, axis ranges the quantity cannot take, lines hidden on the
axis, titles off the figure or silent about the cut, a "95 % CI" of one seed, three time origins in one
set of replay figures, a colour bar of "Nodes per job" in steps of 0.2, a distribution of waits that
shows nothing, and a performance ratio shown "best" for a policy that misses deadlines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import greenslurm
from greenslurm import plots
from greenslurm.cli import main
from greenslurm.cmd_report import PlotLog, _replay_plots, _sweep_plots, all_tables, load_results, sweep_tables
from greenslurm.sweep import run_sweep
from greenslurm.sweep_spec import parse_spec

pytest.importorskip("matplotlib")

DATA = Path(greenslurm.__file__).parent / "data"
KTH = DATA / "KTH-SP2-1996-2.1-cln-first2000.swf"
KTH_CLUSTER = DATA / "kth-sp2.toml"


@pytest.fixture(scope="module")
def whatif_dir(tmp_path_factory):
    """whatif's four policies on the first 200 KTH-SP2 jobs with a solar supply (about 4 s)."""
    out = tmp_path_factory.mktemp("whatif") / "out"
    assert main(["whatif", str(KTH), "--cluster", str(KTH_CLUSTER), "--limit", "200", "--renewable", "solar",
                 "--slack-mean", "1.0", "--out", str(out), "-j", "1"]) == 0
    return out


def replay_figures(results, gantt_jobs: int = 50) -> tuple[dict, PlotLog]:
    figures, log = {}, PlotLog()
    _replay_plots(results, lambda figure, name: figures.__setitem__(name, figure), log, gantt_jobs)
    return figures, log


def labelled_lines(axes) -> list:
    return [line for line in axes.get_lines() if not line.get_label().startswith("_")]


def assert_told_apart_without_colour(lines) -> None:
    """Every two labelled lines (of one axes, or of twin axes together) differ in marker AND in line
    style, so that they stay apart in greyscale; a line without a marker is a reference line (e.g.
    "all nodes"), of which there is at most one.  Beyond four lines (four line styles) the marker
    alone must differ."""
    assert len(lines) >= 2, [line.get_label() for line in lines]
    for i, one in enumerate(lines):
        for other in lines[i + 1:]:
            pair = (one.get_label(), other.get_label())
            assert one.get_marker() != other.get_marker(), pair
            if len(lines) <= 4:
                assert one.get_linestyle() != other.get_linestyle(), pair
    assert sum(line.get_marker() in ("None", None, "") for line in lines) <= 1


def title_of(figure) -> str:
    return " ".join([figure._suptitle.get_text() if figure._suptitle else ""] + [a.get_title() for a in figure.axes])


def sweep_rows(metric: str, values: dict, slacks=(0.5, 2.0), seeds=2, **extra) -> pd.DataFrame:
    """Sweep rows: ``values[policy][slack index]`` for seed 0, +1 % for each further seed."""
    return pd.DataFrame([{"cell_id": f"{policy}-{slack}-{seed}", "trace": "kth", "policy": policy,
                          "slack_mean": slack, "seed": seed, metric: value * (1 + seed / 100), **extra}
                         for policy, row in values.items() for slack, value in zip(slacks, row)
                         for seed in range(seeds)])


# -- lines told apart by marker and line style as well as colour ------------------------------------
def test_whatif_power_figure_tells_demand_supply_and_energy_apart_in_greyscale(whatif_dir):
    figures, _ = replay_figures(load_results([str(p) for p in sorted(whatif_dir.iterdir())]))
    power = figures["easy-power-energy-over-time"]
    # demand, renewable supply and cumulative energy: three lines, each with a marker and style of its own
    assert sorted(line.get_label() for axes in power.axes for line in labelled_lines(axes)) == [
        "demand (kW)", "energy (kWh, cumulative)", "renewable supply (kW)"]
    assert_told_apart_without_colour([line for axes in power.axes for line in labelled_lines(axes)])
    for name in ("policies-power-energy-over-time", "policies-wait-cdf", "policies-active-nodes-over-time",
                 "easy-active-nodes-over-time"):
        for axes in figures[name].axes:
            if labelled_lines(axes):
                assert_told_apart_without_colour(labelled_lines(axes))
    # one policy's active nodes and the "all nodes" reference line (dotted, no marker)
    easy, total = labelled_lines(figures["easy-active-nodes-over-time"].axes[0])
    assert (easy.get_label(), total.get_label()) == ("easy", "all nodes (100)")
    assert easy.get_marker() not in ("None", "") and total.get_marker() in ("None", "")


def test_sweep_lines_with_equal_values_differ_in_marker_and_style():
    # greedy-bestfit and greedy-balanced with the same energy at every slack: they lie on one another
    frame = sweep_rows("energy_kwh", {"easy": [896.0, 896.0], "greedy-bestfit": [793.0, 813.0],
                                      "greedy-balanced": [793.0, 813.0]})
    figure = plots.metric_vs_param(frame, "slack_mean", "energy_kwh")
    bestfit, balanced = [line for line in labelled_lines(figure.axes[0]) if "greedy" in line.get_label()]
    assert bestfit.get_ydata().tolist() == balanced.get_ydata().tolist()
    assert_told_apart_without_colour(labelled_lines(figure.axes[0]))


# -- log axes, physical ranges, lines not hidden on the axis ----------------------------------------
def test_bounded_slowdown_spanning_decades_is_drawn_on_a_log_axis():
    # EASY 114, the greedy policies 1.2 and 1.05: on a linear axis the greedy lines lie flat at the bottom
    frame = sweep_rows("mean_bounded_slowdown", {"easy": [114.0, 114.0], "greedy-bestfit": [1.2, 1.3],
                                                 "greedy-balanced": [1.05, 1.1]})
    figure = plots.metric_vs_param(frame, "slack_mean", "mean_bounded_slowdown")
    axes = figure.axes[0]
    assert axes.get_yscale() == "log"
    assert "(log scale)" in axes.get_ylabel()
    bottom, top = axes.get_ylim()
    assert bottom >= 1.0 - 1e-9 and top >= 114.0 * 1.01   # a bounded slowdown is at least 1
    figure.canvas.draw()
    labels = [t.get_text() for t in axes.get_yticklabels() if t.get_text()]
    assert "1" in labels and "100" in labels and not any("^" in t for t in labels), labels
    # the bands stay above 0 (a log axis cannot draw 0)
    assert all(np.min(p.vertices[:, 1]) > 0 for c in axes.collections for p in c.get_paths() if len(p.vertices))


def test_values_within_one_decade_stay_on_a_linear_axis():
    frame = sweep_rows("mean_bounded_slowdown", {"a": [2.0, 3.0], "b": [5.0, 9.0]})
    assert plots.metric_vs_param(frame, "slack_mean", "mean_bounded_slowdown").axes[0].get_yscale() == "linear"


def test_performance_ratio_axis_starts_at_one():
    # ratios 1.3 .. 1.5 with a wide CI (seeds 1 % apart, two seeds): the band would reach below 1
    frame = pd.DataFrame([{"cell_id": f"{p}{s}{seed}", "trace": "kth", "policy": p, "slack_mean": s, "seed": seed,
                           "deadline_missed": 0, "performance_ratio": r + 0.4 * seed}
                          for p, rs in (("greedy", (1.3, 1.4)), ("threshold", (1.1, 1.5)))
                          for s, r in zip((0.5, 2.0), rs) for seed in range(2)])
    axes = plots.metric_vs_param(frame, "slack_mean", "performance_ratio").axes[0]
    assert axes.get_ylim()[0] == pytest.approx(1.0)
    lows = [float(np.min(p.vertices[:, 1])) for c in axes.collections for p in c.get_paths() if len(p.vertices)]
    assert lows and min(lows) >= 1.0 - 1e-9


def test_wait_panels_of_policies_compared_never_go_below_zero():
    # every wait 0 (a GPU replay where every task starts at once): the panel's y range must not start below 0
    frame = pd.DataFrame({"policy": ["fgd", "pwr"], "mean_wait_s": [0.0, 0.0], "p95_wait_s": [0.0, 0.0],
                          "energy_kwh": [10.0, 12.0]})
    figure = plots.metrics_by_policy(frame, ["energy_kwh", "mean_wait_s", "p95_wait_s"])
    for axes in figure.axes:
        bottom, top = axes.get_ylim()
        assert bottom >= 0.0 and top > bottom, (axes.get_ylabel(), bottom, top)


def test_lines_at_zero_are_drawn_over_the_axis_not_hidden_by_it():
    frame = sweep_rows("deadline_missed", {"easy": [80.0, 54.0], "greedy-bestfit": [0.0, 0.0],
                                           "greedy-balanced": [0.0, 0.0]})
    figure = plots.metric_vs_param(frame, "slack_mean", "deadline_missed")
    axes = figure.axes[0]
    assert axes.get_ylim()[0] == 0.0                      # no negative misses on the axis
    spine = max(s.get_zorder() for s in axes.spines.values())
    on_axis = [line for line in labelled_lines(axes) if line.get_ydata().tolist() == [0.0, 0.0]]
    assert [line.get_label() for line in on_axis] == ["greedy-bestfit", "greedy-balanced"]
    for line in on_axis:
        assert line.get_clip_on() is False and line.get_zorder() > spine


# -- titles that fit and name the cut; n = 1 ---------------------------------------------------------
def test_a_long_title_stays_inside_the_figure():
    frame = sweep_rows("mean_bounded_slowdown", {"easy": [114.0, 114.0], "greedy-bestfit": [1.2, 1.3],
                                                 "greedy-balanced": [1.05, 1.1]})
    for figure in (plots.metric_vs_param(frame, "slack_mean", "mean_bounded_slowdown"),
                   plots.metrics_by_policy(frame, ["mean_bounded_slowdown"], title="Policies compared at slack_mean = 0.5")):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        FigureCanvasAgg(figure).draw()             # lay the figure out as savefig does
        width = figure.bbox.width
        texts = [figure._suptitle] + [a.title for a in figure.axes]
        for text in texts:
            if text is not None and text.get_text():
                box = text.get_window_extent()
                assert box.x0 >= 0 and box.x1 <= width, (text.get_text(), box.x0, box.x1, width)


def test_sweep_titles_name_the_cut_of_the_trace(tmp_path):
    spec = f"""
[sweep]
seeds = 1
[[trace]]
name = "kth"
path = "{KTH}"
cluster = "{KTH_CLUSTER}"
limit = 40
[[policy]]
name = "easy"
queue = "easy"
[grid]
slack_mean = [0.5, 4.0]
"""
    assert run_sweep(parse_spec(spec), tmp_path / "results", workers=1).complete
    frame = load_results([str(tmp_path / "results")]).frames["sweep"][0][1]
    assert frame["trace_limit"].tolist() == [40, 40]
    figure = plots.metric_vs_param(frame, "slack_mean", "mean_wait_s")
    assert "kth (first 40 jobs)" in title_of(figure)
    assert "n = 1" in title_of(figure) and "CI" not in title_of(figure)     # one seed: no interval claimed


def test_inflate_figures_of_one_seed_say_n_1_not_a_ci():
    rows = pd.DataFrame([{"trace": "openb", "policy": policy, "seed": 0, "arrived_pct": level,
                          "eopc_w": watts * level, "grar": 0.9}
                         for policy, watts in (("fgd", 10.0), ("pwr", 9.0)) for level in (10.0, 50.0)])
    for figure in (plots.power_saving_vs_demand(rows), plots.grar_vs_demand(rows)):
        assert "n = 1" in title_of(figure) and "CI" not in title_of(figure), title_of(figure)
    two = pd.concat([rows, rows.assign(seed=1)])
    assert "95 % CI over 2 seeds" in title_of(plots.grar_vs_demand(two))


# -- one time origin; the cluster's nodes in every active-node figure; colour bar ticks --------------
def test_every_whatif_figure_over_time_starts_at_the_first_submit(whatif_dir):
    results = load_results([str(p) for p in sorted(whatif_dir.iterdir())])
    figures, _ = replay_figures(results)
    first_submit = min(float(f["submit_s"].min()) for _, f in results.frames["jobs"])
    timed = {name: f for name, f in figures.items() if "over-time" in name or "gantt" in name}
    assert len(timed) == 4 * 3 + 2
    labels = {name: f.axes[0].get_xlabel() if "power" not in name else f.axes[-1].get_xlabel() or f.axes[0].get_xlabel()
              for name, f in timed.items()}
    for name, figure in timed.items():
        xlabel = next(a.get_xlabel() for a in figure.axes if a.get_xlabel())
        assert xlabel.startswith("Time since the first submit ("), (name, xlabel)
    # the data, not only the words: easy's first job (submitted first, started at once) starts at x = 0
    easy_jobs = dict((Path(s).parent.name, f) for s, f in results.frames["jobs"])["easy"]
    first = easy_jobs.sort_values("start_s").iloc[0]
    gantt_axes = figures["easy-gantt"].axes[0]
    run_bars = [p for p in gantt_axes.patches if p.get_label() != "_nolegend_"] or gantt_axes.patches
    lefts = sorted(p.get_x() for p in gantt_axes.patches)
    assert lefts[0] == pytest.approx(0.0)
    active = figures["easy-active-nodes-over-time"].axes[0]
    easy_line = next(line for line in labelled_lines(active) if line.get_label() == "easy")
    unit_factor = {"s": 1.0, "min": 1 / 60, "h": 1 / 3600, "d": 1 / 86400}[
        active.get_xlabel().rsplit("(", 1)[1].rstrip(")")]
    assert easy_line.get_xdata()[0] == pytest.approx((float(first["start_s"]) - first_submit) * unit_factor)
    assert labels and run_bars


def test_every_active_node_figure_shows_all_the_clusters_nodes(whatif_dir, tmp_path):
    # one policy folder whose summary does not name the cluster (an older replay --out)
    copy = tmp_path / "out"
    shutil.copytree(whatif_dir, copy)
    summary = json.loads((copy / "fcfs" / "summary.json").read_text())
    summary.pop("cluster")
    (copy / "fcfs" / "summary.json").write_text(json.dumps(summary))
    for given in ([str(copy)], [str(p) for p in sorted(copy.iterdir())], [str(copy / "fcfs"), str(copy / "easy")]):
        figures, _ = replay_figures(load_results(given))
        active = {n: f for n, f in figures.items() if "active-nodes" in n}
        assert active
        for name, figure in active.items():
            assert "all nodes (100)" in [line.get_label() for line in labelled_lines(figure.axes[0])], (given, name)


def test_the_all_nodes_line_is_inside_the_axes_when_no_policy_reaches_it():
    # two 1-node jobs on a 105-node cluster (xdmod-pozidriv's size): the curve peaks at 2 active nodes,
    # and the reference line at 105 must lie inside the y range (it used to be named in the legend
    # but drawn above the axes' top, fixed at the curve's range)
    jobs = pd.DataFrame({"submit_s": [0.0, 0.0], "start_s": [0.0, 5.0], "end_s": [10.0, 20.0],
                         "node_indices": ["0", "1"]})
    axes = plots.active_nodes_over_time(jobs, total_nodes=105, policy="easy").axes[0]
    line, = [line for line in axes.get_lines() if line.get_label() == "all nodes (105)"]
    bottom, top = axes.get_ylim()
    assert bottom == 0.0 and top >= 105 and line.get_ydata()[0] == 105


@pytest.mark.parametrize("sizes, ticks", [([1, 1, 1], ["1"]), ([3, 3], ["3"]),
                                          ([1, 4, 82], ["1", "2", "4", "8", "16", "32", "82"])])
def test_gantt_colour_bar_ticks_are_whole_node_counts_all_labelled(sizes, ticks):
    jobs = pd.DataFrame({"job_id": range(len(sizes)), "submit_s": [0.0] * len(sizes),
                         "start_s": [10.0 * i for i in range(len(sizes))], "end_s": [10.0 * i + 100 for i in range(len(sizes))],
                         "nodes": sizes, "node_indices": [" ".join(map(str, range(n))) for n in sizes]})
    figure = plots.gantt(jobs)
    figure.canvas.draw()
    bar = figure.axes[-1]
    assert bar.get_ylabel() == "Nodes per job"
    shown = [t.get_text() for t in bar.get_yticklabels()]
    assert shown == ticks
    low, high = bar.get_ylim()
    assert low <= min(sizes) <= max(sizes) <= high


# -- no figure that shows nothing ---------------------------------------------------------------------
def test_no_wait_distribution_when_no_job_waited(whatif_dir, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(whatif_dir, copy)
    for folder in copy.iterdir():                 # every job started at its submit: every wait 0
        jobs = pd.read_csv(folder / "jobs.csv")
        jobs["submit_s"] = jobs["start_s"]
        jobs["wait_s"] = 0.0
        jobs.to_csv(folder / "jobs.csv", index=False)
        (folder / "jobs.parquet").unlink()
    figures, log = replay_figures(load_results([str(p) for p in sorted(copy.iterdir())]))
    assert "policies-wait-cdf" not in figures
    assert "distribution of waits: no job waited under any policy (every wait 0 s)" in log.skipped
    assert "policies-active-nodes-over-time" in figures


# -- the performance ratio only where every deadline was met -------------------------------------------
def test_performance_ratio_only_for_policies_that_meet_every_deadline(tmp_path):
    # EASY misses deadlines (its ratio 0.85, 0.89 would be "best"); greedy meets them (1.36, 1.40: mean 1.38)
    rows = pd.DataFrame([{"cell_id": f"{p}{s}{seed}", "trace": "kth", "policy": p, "queue_name": p, "options": "{}",
                          "slack_mean": s, "seed": seed, "deadline_missed": missed, "performance_ratio": ratio + 0.04 * seed,
                          "mean_wait_s": 60.0}
                         for p, missed, ratio in (("easy", 1126, 0.85), ("greedy", 0, 1.36))
                         for s in (0.5, 2.0) for seed in range(2)])
    rows.loc[(rows.policy == "greedy") & (rows.slack_mean == 2.0) & (rows.seed == 1), "deadline_missed"] = 1
    path = tmp_path / "results.parquet"
    rows.to_parquet(path)
    frame = load_results([str(path)]).frames["sweep"][0][1]
    figures = []
    _sweep_plots(frame, "sweep", lambda figure, stem: figures.append((figure, stem)), PlotLog())
    figure = next(f for f, stem in figures if stem == "sweep-kth-performance_ratio-vs-slack_mean")
    lines = {line.get_label(): line for line in labelled_lines(figure.axes[0])}
    assert lines["easy (misses deadlines: no ratio)"].get_xdata().tolist() == []
    # greedy: slack 0.5 only (one of its two runs at slack 2 missed a deadline: no mean over the other alone)
    assert lines["greedy"].get_xdata().tolist() == [0.5]
    assert lines["greedy"].get_ydata().tolist() == pytest.approx([1.38])
    table = next(t for t in sweep_tables(frame) if "Performance ratio" in t.metrics)
    column = table.metrics.index("Performance ratio")
    by_row = {tuple(key): means[column] for key, means in zip(table.key_rows, table.means)}
    assert by_row[("easy", "0.5", "2")] is None and by_row[("easy", "2", "2")] is None
    assert by_row[("greedy", "0.5", "2")] == pytest.approx(1.38) and by_row[("greedy", "2", "2")] is None
    assert not [(r, m) for r, m in table.best if m == column and table.key_rows[r][0] == "easy"]
    # the printed table says why those cells are empty
    results = load_results([str(path)])
    titles = [t.title for _, t in all_tables(results) if "Performance ratio" in t.metrics]
    assert titles and all("performance ratio '-': a deadline was missed, where the ratio is undefined" in t
                          for t in titles)


# -- GPU allocation and fragmentation figures for GPU runs ----------------------------------------------
@pytest.fixture(scope="module")
def gpu_replays(shared_data, tmp_path_factory):
    """The first 400 Alibaba openb pods on the openb GPU nodes, placed by FGD and by PWR (no queue)."""
    gpu = shared_data / "alibaba-gpu-2023"
    out = tmp_path_factory.mktemp("gpu")
    for select in ("fgd", "pwr"):
        assert main(["replay", str(gpu / "openb_pod_list_default.csv"), "--nodes",
                     str(gpu / "openb_node_list_gpu_node.csv"), "--queue", "none", "--select", select,
                     "--limit", "400", "--out", str(out / select)]) == 0
    return out


def test_gpu_replays_get_gpu_allocation_and_fragmentation_figures(gpu_replays):
    results = load_results([str(gpu_replays / "fgd"), str(gpu_replays / "pwr")])
    figures, log = replay_figures(results)
    summaries = {name: json.loads((gpu_replays / name / "summary.json").read_text()) for name in ("fgd", "pwr")}
    capacity = summaries["fgd"]["cluster"]["gpus"]                    # 6,212 GPUs on the openb GPU nodes
    for name in ("fgd", "pwr"):
        axes = figures[f"{name}-gpu-allocation-over-time"].axes[0]
        assert axes.get_ylabel() == f"GPU allocated (% of {capacity:,} GPUs)"
        line, = labelled_lines(axes)
        # the figure's peak, summed here from jobs.csv, is the replay's own GPU accounting's peak
        assert float(np.max(line.get_ydata())) == pytest.approx(summaries[name]["gpu"]["peak_gpu_allocated_pct"],
                                                                 rel=1e-6)
        assert axes.get_ylim()[0] == 0.0
    every = figures["policies-gpu-allocation-over-time"].axes[0]
    assert [line.get_label() for line in labelled_lines(every)] == ["fgd", "pwr"]
    assert_told_apart_without_colour(labelled_lines(every))
    bars = figures["gpu-allocation-and-fragmentation"]
    panels = {axes.get_ylabel(): [p.get_height() for p in axes.patches] for axes in bars.axes}
    assert panels["GPU allocated (%)"] == pytest.approx([summaries[n]["gpu"]["mean_gpu_allocated_pct"]
                                                         for n in ("fgd", "pwr")])
    # fragmentation: measured against FGD's target workload (the trace's own tasks) under both selections,
    # PWR's too (it used to print 0 there, for "not measured"); FGD, which minimises it, leaves less
    frag = {n: summaries[n]["gpu"]["mean_frag_gpu"] for n in ("fgd", "pwr")}
    assert panels["Mean GPU fragmentation (GPUs)"] == pytest.approx([frag["fgd"], frag["pwr"]])
    assert 0 < frag["fgd"] < frag["pwr"]
    assert not any(s.startswith("GPU fragmentation of") for s in log.skipped), log.skipped


def test_gpus_allocated_over_time_sums_fractions_exactly():
    # 0.46 + 0.5 GPU from t = 10 to 20, then 0.5 alone until 30: 0.96 then 0.5 (not 0.9600000000000001)
    jobs = pd.DataFrame({"start_s": [10.0, 10.0], "end_s": [20.0, 30.0], "gpus": [0.46, 0.5]})
    times, gpus = plots.allocated_over_time(jobs)
    assert times.tolist() == [10.0, 20.0, 30.0] and gpus.tolist() == [0.96, 0.5, 0.0]


def test_bars_of_a_quantity_bounded_at_one_still_start_at_zero():
    # a bounded slowdown of 1 for every policy (no job waited): bars of height 1, seen from 0
    frame = pd.DataFrame({"policy": ["fgd", "pwr"], "mean_bounded_slowdown": [1.0, 1.0]})
    axes = plots.metrics_by_policy(frame, ["mean_bounded_slowdown"]).axes[0]
    assert axes.get_ylim()[0] == 0.0 and axes.get_ylim()[1] > 1.0
    assert [p.get_height() for p in axes.patches] == [1.0, 1.0]


def test_wait_distribution_markers_are_not_stacked_on_the_y_axis():
    # 80 of 100 jobs did not wait: the curve jumps to 80 % at 0; its markers belong along the wait axis
    jobs = {name: pd.DataFrame({"wait_s": [0.0] * 80 + [60.0 * 2 ** i for i in range(20)]}) for name in ("a", "b")}
    axes = plots.wait_cdf(jobs).axes[0]
    for line in labelled_lines(axes):
        marked = np.asarray(line.get_xdata())[line.get_markevery()]
        assert np.count_nonzero(marked == 0.0) <= 1, (line.get_label(), marked)
        assert len(marked) >= 8


def test_energy_of_policies_that_reject_jobs_is_also_shown_per_cpu_hour_run():
    # easy runs everything: 900 kWh for 3,000 CPU-h (0.3); greedy rejects, 300 kWh for 600 CPU-h (0.5):
    # less energy, but more per unit of work run
    frame = pd.DataFrame([{"cell_id": f"{p}{s}", "trace": "kth", "policy": p, "slack_mean": s, "seed": 0,
                           "energy_kwh": e * (1 + s / 100), "cpu_hours": h, "rejected": r}
                          for p, e, h, r in (("easy", 900.0, 3000.0, 0), ("greedy", 300.0, 600.0, 245))
                          for s in (0.5, 2.0)])
    figures = []
    _sweep_plots(frame, "sweep", lambda figure, stem: figures.append((figure, stem)), PlotLog())
    figure = next(f for f, stem in figures if stem == "sweep-kth-energy_per_cpu_hour_kwh-vs-slack_mean")
    axes = figure.axes[0]
    assert axes.get_ylabel() == "Energy per CPU-hour run (kWh/CPU-h)"
    lines = {line.get_label(): line.get_ydata().tolist() for line in labelled_lines(axes)}
    assert lines["easy"] == pytest.approx([0.3 * 1.005, 0.3 * 1.02])
    assert lines["greedy"] == pytest.approx([0.5 * 1.005, 0.5 * 1.02])


def test_inflate_plot_of_one_seed_says_n_1():
    from greenslurm.sim.reporting.inflate_report import plot
    from greenslurm.sim.studies.inflate import COLUMNS
    row = {c: 0.0 for c in COLUMNS}
    rows = [{**row, "trace": "openb", "policy": policy, "normalization": "paper", "ties": "first", "seed": 0,
             "arrived_pct": level, "eopc_w": 1000.0 * level, "grar": 1.0} for policy in ("fgd", "pwr")
            for level in (10.0, 50.0)]
    figure = plot(rows, None)
    title = figure._suptitle.get_text()
    assert "n = 1" in title and "mean over" not in title, title
    # GRAR 100 % on the top edge: drawn over the frame, not cut by it
    assert all(line.get_clip_on() is False for axes in figure.axes for line in labelled_lines(axes))
    title = plot(rows + [{**r, "seed": 1} for r in rows], None)._suptitle.get_text()
    assert "mean over 2 seeds" in title, title
