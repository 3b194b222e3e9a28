"""Reports an admin can trust: nothing skipped without the reason, values that cannot be physical refused,
tables that fit their medium, one vocabulary across the commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greenslurm.cli import main
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.node import NodeSpec
from greenslurm.sim.engine.replay import (NO_REAL_MEMORY, SKIP_MEMORY, SKIP_TOO_BIG,
                                          Shaper)

from test_whatif_baseline import DAY, POWER, flat

# Two nodes of 4 CPUs; no RealMemory: Slurm gives each node 1 MiB.
NO_MEMORY_CONF = """ClusterName=mini
NodeName=n[1-2] CPUs=4
PartitionName=batch Nodes=n[1-2] Default=YES MaxTime=UNLIMITED
"""
HEADER = "JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|ReqMem|Timelimit|NodeList\n"


def export(*mem: str) -> str:
    """Three one-node jobs of 2 CPUs, 10 min apart, each run 5 min, with the memory asked for."""
    rows = [f"{i}|alice|batch|{DAY}{10 * i:02d}:00|{DAY}{10 * i:02d}:00|{DAY}{10 * i + 5:02d}:00|00:05:00|COMPLETED|"
            f"1|2|{m}|00:10:00|n1" for i, m in enumerate(mem)]
    return HEADER + "".join(row + "\n" for row in rows)


def run_whatif(tmp_path: Path, text: str, conf: str, *options: str) -> tuple[int, dict | None]:
    (tmp_path / "jobs.txt").write_text(text)
    (tmp_path / "slurm.conf").write_text(conf)
    out = tmp_path / "whatif.json"
    code = main(["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), *POWER,
                 "--json", str(out), "-j", "1", "--no-progress", *options])
    return code, json.loads(out.read_text()) if out.exists() else None


# -- nothing skipped silently ----------------------------------------------------------------------
def test_a_job_skipped_for_memory_names_memory():
    cluster = Cluster([NodeSpec("a", cpus=4, memory_mb=1000.0), NodeSpec("b", cpus=4, memory_mb=2000.0)])
    shaper = Shaper(cluster)
    # 3000 MiB on one node: no node has it, though 4 CPUs would fit; 9 CPUs on one node: too big anyway
    assert shaper(JobSpec("m", 0.0, 60.0, cpus=2, nodes=1, memory_mb_per_node=3000.0), 0) is None
    assert shaper(JobSpec("c", 0.0, 60.0, cpus=9, nodes=1, memory_mb_per_node=3000.0), 1) is None
    assert shaper(JobSpec("ok", 0.0, 60.0, cpus=2, nodes=1, memory_mb_per_node=2000.0), 2) is not None
    assert dict(shaper.skipped) == {SKIP_MEMORY: 1, SKIP_TOO_BIG: 1}


def test_slurms_one_mib_default_is_named():
    cluster = Cluster([NodeSpec("a", cpus=4, memory_mb=1.0)])           # slurm.conf without RealMemory
    shaper = Shaper(cluster)
    assert shaper(JobSpec("m", 0.0, 60.0, cpus=1, nodes=1, memory_mb_per_node=100.0), 0) is None
    assert dict(shaper.skipped) == {SKIP_MEMORY + NO_REAL_MEMORY: 1}
    assert "RealMemory" in NO_REAL_MEMORY


def test_whatif_fails_when_no_policy_runs_a_job(tmp_path, capsys):
    code, data = run_whatif(tmp_path, export("100Mn", "100Mn", "100Mn"), NO_MEMORY_CONF, "--candidate", "fcfs")
    err = capsys.readouterr().err
    assert code == 2 and data is None
    assert "no policy ran a job" in err and "3 of 3 jobs" in err
    assert SKIP_MEMORY in err and "RealMemory" in err and "Traceback" not in err


def test_whatif_says_loudly_why_most_jobs_were_skipped(tmp_path, capsys):
    # n1 has 8000 MiB, n2 Slurm's default 1 MiB: the 9000 MiB jobs (2 of 3) fit nowhere, for memory
    conf = NO_MEMORY_CONF.replace("NodeName=n[1-2] CPUs=4", "NodeName=n1 CPUs=4 RealMemory=8000\nNodeName=n2 CPUs=4")
    code, data = run_whatif(tmp_path, export("100Mn", "9000Mn", "9000Mn"), conf, "--candidate", "fcfs")
    out = flat(capsys.readouterr().out)
    assert code == 0
    assert f"most jobs skipped: slurm skipped 2 of 3 jobs: 2 {SKIP_MEMORY}" in out
    assert data["policies"]["fcfs"]["skipped_by_reason"] == {SKIP_MEMORY: 2}
    assert data["policies"]["fcfs"]["jobs_completed"] == 1


# -- recorded times that cannot be right ----------------------------------------------------------
FOUR_NODES_CONF = NO_MEMORY_CONF.replace("CPUs=4", "CPUs=4 RealMemory=8000")


def test_recorded_times_that_cannot_be_right_are_counted_out(tmp_path, capsys):
    rows = export("100Mn", "100Mn", "100Mn").splitlines()
    # job 1 submitted 1970-01-01 (a lost date), job 2 started and ended in 2100: neither can be right
    rows[2] = rows[2].replace(f"|{DAY}10:00|{DAY}10:00|", f"|1970-01-01T00:00:00|{DAY}10:00|")
    rows[3] = rows[3].replace(f"|{DAY}20:00|{DAY}25:00|", "|2100-01-01T00:20:00|2100-01-01T00:25:00|")
    code, data = run_whatif(tmp_path, "\n".join(rows) + "\n", FOUR_NODES_CONF, "--candidate", "fcfs")
    assert code == 0
    recorded = data["recorded"]
    assert recorded["jobs"] == 1 and recorded["unusable_by_reason"] == {"recorded time outside the export's "
                                                                         "plausible span": 2}
    # only job 0 is left: it waited 0 s and ran 5 min; energy over its 5 min only
    assert (recorded["figures"]["max_wait_s"], recorded["figures"]["makespan_s"]) == (0.0, 300.0)
    assert "plausible span: 2" in flat(capsys.readouterr().out)
    # the fidelity figures compare the one job in both schedules
    assert data["fidelity"]["jobs"] == 1


def test_strict_whatif_fails_on_a_recorded_time_that_cannot_be_right(tmp_path, capsys):
    rows = export("100Mn", "100Mn").splitlines()
    rows[2] = rows[2].replace(f"|{DAY}10:00|{DAY}15:00|", "|2100-01-01T00:10:00|2100-01-01T00:15:00|")
    code, data = run_whatif(tmp_path, "\n".join(rows) + "\n", FOUR_NODES_CONF, "--candidate", "fcfs", "--strict")
    err = capsys.readouterr().err
    assert code == 2 and data is None
    assert "1 jobs have a recorded time outside the export's plausible span" in err and "jobs.txt" in err


# -- values that cannot be physical, names given twice ----------------------------------------------
def refused(capsys, *argv: str) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_a_candidate_name_given_twice_is_refused(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text(export("100Mn"))
    (tmp_path / "slurm.conf").write_text(FOUR_NODES_CONF)
    base = ["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), "-j", "1"]
    err = refused(capsys, *base, "--candidate", "a=easy", "--candidate", "a=fcfs")
    assert "the name 'a' is given to two policies (easy and fcfs)" in err
    # the current policy's name for another policy
    err = refused(capsys, *base, "--current", "easy", "--candidate", "easy=fcfs")
    assert "the name 'easy' is given to two policies (easy and fcfs)" in err


def test_cpus_0_in_slurm_conf_is_refused(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text(export("100Mn"))
    (tmp_path / "slurm.conf").write_text("ClusterName=c\nNodeName=n1 RealMemory=8000 CPUs=0\nPartitionName=p Nodes=ALL\n")
    err = refused(capsys, "replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"))
    assert "slurm.conf:2: field CPUs: CPUs=0: a node has at least 1 CPU" in err


@pytest.mark.parametrize("group, ok", [('gpu_model = "H100-UNKNOWN"', False), ('gpu_model = 7', False),
                                       ('gpu_model = "H100-UNKNOWN"\ngpu_idle_w = 50\ngpu_max_w = 700', True),
                                       ('gpu_model = "T4"', True)])
def test_an_unknown_gpu_model_needs_its_power(tmp_path, capsys, group, ok):
    (tmp_path / "c.toml").write_text(f'name = "c"\n[[node_group]]\ncount = 2\ncpus = 8\ngpus = 4\n{group}\n')
    (tmp_path / "jobs.txt").write_text(export("100Mn"))
    argv = ["replay", str(tmp_path / "jobs.txt"), "--cluster", str(tmp_path / "c.toml")]
    if ok:
        assert main(argv) == 0
    else:
        err = refused(capsys, *argv)
        assert "field node_group[0].gpu_model" in err and ("give gpu_idle_w and gpu_max_w" in err or "not 7" in err)


def test_an_unknown_gpu_model_in_a_scenario_is_refused(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text(export("100Mn"))
    (tmp_path / "s.toml").write_text(f'[trace]\npath = "{tmp_path / "jobs.txt"}"\n[cluster]\n'
                                     'homogeneous = {{ nodes = 2, cpus = 8, gpus = 2, gpu_model = "H100-UNKNOWN" }}\n'
                                     .replace("{{", "{").replace("}}", "}"))
    err = refused(capsys, "run", str(tmp_path / "s.toml"))
    assert "gpu_model" in err and "'H100-UNKNOWN' is not one whose power is known" in err


@pytest.mark.long_run                     # the demo's 2,000 jobs under power states (the general loop)
def test_minus_zero_is_zero(capsys):
    assert main(["demo", "--power-down-after", "-0"]) == 0
    out = flat(capsys.readouterr().out)
    assert "power down after 0 s" in out and "-0" not in out


@pytest.mark.parametrize("command", [["replay"], ["traces", "info"], ["whatif", "--cluster-from-slurm", "x.json"]])
def test_a_symlink_loop_is_named(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    Path("loop").symlink_to("loop")
    Path("x.json").symlink_to("loop")
    Path("dangling").symlink_to("gone.swf")
    argv = [*command[:2], "loop", *command[2:]] if command[0] != "whatif" else ["whatif", "dangling", *command[1:]]
    err = refused(capsys, *argv)
    assert "a symbolic link that loops" in err
    if command[0] != "whatif":
        err = refused(capsys, *command, "dangling")
        assert "dangling: a symbolic link to gone.swf, which does not exist" in err


# -- reports that fit their medium ----------------------------------------------------------------
def test_piped_reports_have_no_trailing_spaces(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) > 20 and "Scheduling" in out
    assert [line for line in lines if line != line.rstrip()] == []


def test_the_whatif_table_is_split_not_cut(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    code, data = run_whatif(tmp_path, export("100Mn", "100Mn", "100Mn"), FOUR_NODES_CONF, "--candidate", "fcfs",
                            "--candidate", "conservative", "--candidate", "e2=easy", "--candidate", "f2=fcfs")
    out = capsys.readouterr().out
    assert code == 0 and "…" not in out and "..." not in out
    assert max(len(line) for line in out.splitlines()) <= 72
    assert "(1/3)" in out and "(3/3)" in out          # the five policies in three parts, each whole
    assert all(name in out for name in ("slurm", "fcfs", "conservative", "e2", "f2"))


# -- one vocabulary: help without argparse's placeholders ---------------------------------------------
def test_inflate_help_has_no_argparse_placeholders(capsys):
    with pytest.raises(SystemExit):
        main(["inflate", "--help"])
    out = capsys.readouterr().out
    assert "--seeds N" in out and "--first-seed FIRST" in out and "--until X" in out
    assert not any(word in out.split() for word in ("SEEDS", "FIRST_SEED", "UNTIL"))


def test_top_level_help_lists_every_hook_action(capsys):
    with pytest.raises(SystemExit):
        main(["hook", "--help"])
    hook_help = capsys.readouterr().out
    actions = hook_help.split("ACTION\n")[1].split("options:")[0]
    names = [line.split()[0] for line in actions.splitlines() if line.startswith("    ") and not line.startswith("     ")]
    assert names == ["serve", "install", "check", "report", "power"]
    with pytest.raises(SystemExit):
        main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    assert "the live Slurm job_submit hook: " + ", ".join(names) in top


# -- one vocabulary: options every replaying command has ---------------------------------------------
def replay_json(tmp_path: Path, *options: str) -> dict:
    (tmp_path / "jobs.txt").write_text(export("100Mn", "100Mn", "100Mn"))
    (tmp_path / "slurm.conf").write_text(FOUR_NODES_CONF)
    out = tmp_path / "replay.json"
    assert main(["replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"),
                 "--json", str(out), "--no-progress", *options]) == 0
    return json.loads(out.read_text())


def test_replay_takes_the_node_power_of_a_slurm_conf_as_whatif_does(tmp_path, capsys):
    data = replay_json(tmp_path, "--node-idle-w", "10", "--node-busy-w", "50")
    # 2 nodes x 10 W over the 1,500 s makespan = 30,000 J; three jobs of 2 CPUs x 300 s at (50-10)/4 = 10 W per
    # allocated CPU = 18,000 J; 48,000 J = 0.01333 kWh
    assert data["energy_kwh"] == pytest.approx(48_000 / 3.6e6)
    # the jobs' share: each holds half a node's idle 10 W plus 20 W for its 2 CPUs, 25 W x 300 s x 3 = 22,500 J
    assert data["energy_jobs_kwh"] == pytest.approx(22_500 / 3.6e6)
    assert data["power_model"] == {"assumed": False, "text": "nodes 10 W idle to 50 W with every CPU allocated, "
                                   "linear in allocated CPUs (given: --node-idle-w, --node-busy-w)"}
    assert "given: --node-idle-w, --node-busy-w" in flat(capsys.readouterr().out)


def test_node_power_applies_only_to_a_cluster_read_from_slurm(tmp_path, capsys):
    err = refused(capsys, "replay", "--node-idle-w", "10")
    assert "--node-idle-w" in err and "slurm.conf" in err


# -- footers that state their assumptions and fit 80 columns ---------------------------------------------
def test_the_whatif_footer_states_the_power_saving_it_assumed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    # the default candidate powers idle nodes down after 600 s (SuspendTime); slurm.conf gives no
    # ResumeTimeout, so Slurm's default 60 s is the boot time; the off power is the replay's 10 W
    code, data = run_whatif(tmp_path, export("100Mn", "100Mn", "100Mn"), FOUR_NODES_CONF)
    out = capsys.readouterr().out
    assert code == 0
    saving = "idle nodes power down after 600 s, draw 10 W while off and boot in 60 s"
    assert data["policies"]["slurm+suspend"]["power_saving"] == saving
    assert "power_saving" not in data["policies"]["slurm"]
    lines = [line.strip("│ ") for line in out.splitlines()]
    # each note starts its own line, and none is longer than the terminal
    assert f"slurm+suspend: {saving}" in flat(out)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert any(line.startswith("power model: nodes 100 W idle") for line in lines)
    assert any(line.startswith("slurm+suspend: idle nodes power down") for line in lines)


def test_digits_in_a_title_are_not_coloured(capsys, monkeypatch):
    # on a colour terminal, rich's highlighter coloured "1996" and "2.1" inside the demo trace's file name
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["demo", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" in out                                       # a colour terminal indeed
    assert "KTH-SP2-1996-2.1-cln-first2000.swf (swf) on" in out  # no escape sequence inside the title's words


def test_the_demo_and_a_full_replay_name_the_machine_alike(tmp_path, capsys, shared_data):
    # the demo's bundled cluster file and the full log's SWF header (Computer: IBM SP2) name the same
    # machine: both by the Parallel Workloads Archive's name of the log
    assert main(["demo", "--json", str(tmp_path / "demo.json"), "--no-progress"]) == 0
    assert main(["replay", str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf"), "--limit", "20",
                 "--json", str(tmp_path / "full.json"), "--no-progress"]) == 0
    names = [json.loads((tmp_path / f"{run}.json").read_text())["cluster"]["name"] for run in ("demo", "full")]
    assert names == ["KTH-SP2", "KTH-SP2"]
    assert "IBM SP2" not in capsys.readouterr().out


def test_compare_refuses_exact_runtimes_with_planned_limits(capsys):
    trace = str(Path(__file__).resolve().parents[1] / "greenslurm" / "data" / "KTH-SP2-1996-2.1-cln-first2000.swf")
    # the deprecation line of --planned-limits, then the one-line refusal
    assert main(["compare", trace, "--exact-runtimes", "--planned-limits"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    deprecated, refusal = err.strip().splitlines()
    assert "--planned-limits is deprecated" in deprecated
    assert "--exact-runtimes and --planned-limits contradict each other" in refusal


@pytest.mark.parametrize("command, option, given, expected", [
    # a list, the option repeated, or both: the same selections (a repeated list kept only its last before)
    ("compare", "--select", ["--select", "balanced", "bestfit", "--select", "minidle"],
     ["balanced", "bestfit", "minidle"]),
    ("compare", "--acceptance", ["--acceptance", "greedy", "--acceptance", "threshold"], ["greedy", "threshold"]),
    ("compare", "--slack-mean", ["--slack-mean", "0.5", "--slack-mean", "2"], [0.5, 2.0]),
    ("inflate", "--select", ["--select", "fgd", "pwr=0.1,fgd=0.9", "--select", "gpubestfit"],
     ["fgd", "pwr=0.1,fgd=0.9", "gpubestfit"]),
    ("inflate", "--select", ["--select", "fgd", "--select", "pwr"], ["fgd", "pwr"]),
])
def test_list_options_take_a_list_or_repeat_alike(command, option, given, expected):
    from greenslurm.cli import build_parser
    required = {"compare": ["trace.swf"], "inflate": ["--nodes", "n.csv", "--pods", "p.csv"]}[command]
    args = build_parser().parse_args([command, *required, *given])
    assert getattr(args, option.lstrip("-").replace("-", "_")) == expected
    # without the option: its default, untouched by an earlier parse
    default = getattr(build_parser().parse_args([command, *required]), option.lstrip("-").replace("-", "_"))
    assert default == {"--select": ["balanced", "bestfit", "minidle", "backfill"] if command == "compare" else None,
                       "--acceptance": ["greedy", "threshold"], "--slack-mean": [0.2, 1.0, 5.0]}[option]


def test_replay_help_says_why_its_default_queue_differs_from_whatifs(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "easy with --slurm-conf too, so a replay's figures do not change with where its cluster comes from" in text
    assert "whatif's current policy is slurm with --slurm-conf" in text


def test_replay_with_a_slurm_conf_runs_easy_unless_told(tmp_path):
    assert replay_json(tmp_path)["queue"] == "easy"
    assert replay_json(tmp_path, "--queue", "slurm")["queue"] == "slurm"


# -- figures drawn as the papers draw them ---------------------------------------------------------
def test_policies_compared_has_its_ci_over_one_grid_values_runs_only():
    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd
    from matplotlib.container import ErrorbarContainer
    from greenslurm.cmd_report import PlotLog, _sweep_plots
    # two policies x two slack values x three runs; energy 10, 11, 12 kWh at slack 1 and 100, 110, 120 at 5:
    # pooled over the grid the CI would span 10..120, per grid value it is the CI of three runs only
    rows = [{"trace": "t", "policy": policy, "slack_mean": slack, "seed": seed,
             "energy_kwh": (10.0 if slack == 1.0 else 100.0) * (1 + seed / 10) + (policy == "b")}
            for policy in ("a", "b") for slack in (1.0, 5.0) for seed in range(3)]
    figures = []
    _sweep_plots(pd.DataFrame(rows), "sweep", lambda figure, stem: figures.append((figure, stem)), PlotLog())
    compared = [(f, stem) for f, stem in figures if "policies-compared" in stem]
    assert [stem for _, stem in compared] == ["sweep-t-policies-compared-slack_mean-1",
                                              "sweep-t-policies-compared-slack_mean-5"]
    for (figure, _), (slack, base) in zip(compared, ((1, 10.0), (5, 100.0))):
        assert f"Policies compared at slack_mean = {slack} (mean, 95 % CI over 3 runs)" in \
            figure._suptitle.get_text().replace("\n", " ")          # wrapped to the figure's width
        axes = figure.axes[0]
        heights = [bar.get_height() for bar in axes.patches]
        # mean of base x (1, 1.1, 1.2) = 1.1 base; policy b 1 kWh more
        assert heights == pytest.approx([1.1 * base, 1.1 * base + 1])
        bars = [c for c in axes.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == 2
        for container in bars:
            (low, high), = [seg[:, 1] for seg in container.lines[2][0].get_segments()]
            # t(0.975, 2) x sd / sqrt(3): sd of base x (1, 1.1, 1.2) = 0.1 base: 4.303 x 0.1 base / 1.732
            assert (high - low) / 2 == pytest.approx(4.3027 * 0.1 * base / 3 ** 0.5, rel=1e-3)


def test_policies_compared_with_one_run_says_n_1():
    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd
    from greenslurm.cmd_report import PlotLog, _sweep_plots
    rows = [{"trace": "t", "policy": p, "seed": 0, "energy_kwh": e} for p, e in (("a", 1.0), ("b", 2.0))]
    figures = []
    _sweep_plots(pd.DataFrame(rows), "sweep", lambda figure, stem: figures.append((figure, stem)), PlotLog())
    (figure, stem), = [(f, s) for f, s in figures if "policies-compared" in s]
    assert stem == "sweep-t-policies-compared" and "(one run each, n = 1)" in figure._suptitle.get_text().replace("\n", " ")
    from matplotlib.container import ErrorbarContainer
    assert "CI" not in figure._suptitle.get_text()
    assert not [c for c in figure.axes[0].containers if isinstance(c, ErrorbarContainer)]
