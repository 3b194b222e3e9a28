"""What an admin reads: one energy explained where two power models meet, tables and help that fit 80
columns, output options named alike in every command, integer columns as integers in the notebook API.
Each test runs the command as the command line does and reads its text or exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from greenslurm.cli import main

# One T4 node of 8 vCPUs (one CPU package of the PWR paper: 16 cores, 32 vCPUs) and one pod holding
# 1 vCPU and half the GPU for 10 h.
ONE_POD = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
a,1000,1024,1,500,,LS,Running,0,36000,0
"""
ONE_T4_NODE = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,1,T4\n"


def flat(text: str) -> str:
    return " ".join(text.split())


# -- one GPU report, two power models, explained -------------------------------------------------------
def test_the_gpu_report_says_why_its_energy_is_not_the_energy_tables(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    (tmp_path / "pods.csv").write_text(ONE_POD)
    (tmp_path / "nodes.csv").write_text(ONE_T4_NODE)
    assert main(["replay", str(tmp_path / "pods.csv"), "--nodes", str(tmp_path / "nodes.csv"), "--queue", "none",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    text = flat(out)
    # Energy table, power linear in the allocation: the package 15 W + the T4 10 W idle, plus 1 of 8 vCPUs
    # x (120 - 15) W = 13.125 W, plus half the T4's (70 - 10) W = 30 W: 68.125 W x 10 h = 0.68125 kWh
    assert "total 0.68 kWh" in text
    # GPUs table, the PWR paper's steps: the package with a CPU allocated at 120 W, the T4 with a share
    # allocated at 70 W: 190 W x 10 h = 1.9 kWh (1.2 + 0.7), in the Energy table's units
    assert "energy, the paper's steps 1.90 kWh CPU packages 1.20 kWh GPUs 0.70 kWh" in text
    assert "mean power 190 W peak power 190 W" in text
    # and the report says why the two differ: (1.9 - 0.68125) / 0.68125 = +178.9 %
    assert ("the GPUs table counts the PWR paper's steps: a CPU package with any CPU allocated draws its maximum, "
            "and a GPU with any share allocated its maximum; the Energy table's 0.68 kWh counts power linear in "
            "them (the GPUs table +178.9 %)") in text
    # the power model line no longer calls the linear model the PWR paper's
    assert "linear in the allocated CPUs and GPU shares (the GPUs table: the paper's steps)" in text
    assert max(len(line) for line in out.splitlines()) <= 80


# -- tables that fit 80 columns ---------------------------------------------------------------------
DEMO_TRACE = str(Path(__file__).resolve().parents[1] / "greenslurm" / "data" / "KTH-SP2-1996-2.1-cln-first2000.swf")


def test_compares_power_states_table_is_split_at_80_columns_not_cut(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compare", DEMO_TRACE, "--limit", "100", "--power-down-after", "3600", "--power-budget", "15000",
                 "--no-progress", "-j", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    # before: 'ener…', 'imb…' in the headers, '1,12…' in the cells, '34.75' and 'kW' on two lines
    assert "…" not in out and max(len(line) for line in lines) <= 80
    assert "power states on KTH-SP2, 100 jobs, easy (1/2)" in lines and "power states on KTH-SP2, 100 jobs, easy (2/2)" in lines
    rows = [line for line in lines if line.lstrip().startswith(("no management", "power-down", "budget 15,000 W"))]
    assert len(rows) == 6                                  # each run in both parts, each on one line
    assert sum(" kW " in row for row in rows) == 3         # the peak power, whole, in the first part
    assert any(line.split() == ["run", "imbalance"] for line in lines)


# -- output options named alike in every command ---------------------------------------------------------
# the options that name where a command writes: one name per kind of output, a folder or a file
OUTPUT_OPTIONS = {"--out": "DIR", "--plots": "DIR", "--tables": "DIR", "--json": "FILE", "--csv": "FILE",
                  "--save-scenario": "FILE"}
OUTPUTS = {"replay": {"--out", "--json", "--save-scenario"}, "demo": {"--out", "--json", "--save-scenario"},
           "run": {"--out", "--json"}, "traces info": {"--json"}, "whatif": {"--out", "--json"},
           "sweep": {"--out"}, "compare": {"--csv"}, "inflate": {"--csv", "--plots"},
           "report": {"--plots", "--tables"}, "hook report": {"--json"}}


def visible_options(command: str) -> dict[str, str | None]:
    """option -> metavar of the options ``greenslurm COMMAND --help`` shows."""
    import argparse

    from greenslurm.cli import build_parser
    parser = build_parser()
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {option: action.metavar for action in parser._actions if action.help != argparse.SUPPRESS
            for option in action.option_strings}


@pytest.mark.parametrize("command", sorted(OUTPUTS))
def test_every_command_names_its_outputs_alike(command):
    options = visible_options(command)
    # before: inflate's --plot PNG and sweep's --results DIR beside report's --plots DIR and replay's --out DIR
    assert {o for o in options if o in OUTPUT_OPTIONS or o in ("--plot", "--results")} == OUTPUTS[command]
    assert all(options[o] == OUTPUT_OPTIONS[o] for o in OUTPUTS[command])


def test_sweeps_old_results_option_still_works_and_says_so(capsys):
    from greenslurm.cli import build_parser
    args = build_parser().parse_args(["sweep", "study.toml", "--results", "r"])
    assert args.out == "r"
    assert capsys.readouterr().err.strip() == "greenslurm: warning: --results is deprecated, use --out"


# -- integer columns as integers in the notebook API --------------------------------------------------------
def test_the_notebook_api_gives_counts_as_integers(tmp_path):
    import greenslurm
    demo = greenslurm.replay(limit=20)
    # the KTH-SP2 jobs hold whole CPUs and no GPU: int64, as the nodes column (before: float64)
    assert [str(demo.jobs[c].dtype) for c in ("nodes", "cpus", "gpus")] == ["int64", "int64", "int64"]
    assert str(demo.power["busy_cpus"].dtype) == "int64"
    assert int(demo.jobs["gpus"].sum()) == 0 and demo.jobs["cpus"].min() >= 1
    both = greenslurm.compare(limit=20, queue=["easy", "fcfs"])
    assert str(both.jobs["cpus"].dtype) == "int64" and str(both.runs["queue=fcfs"].jobs["cpus"].dtype) == "int64"
    # an Alibaba pod holds a share of a GPU: that column stays float, with the share
    (tmp_path / "pods.csv").write_text(ONE_POD)
    (tmp_path / "nodes.csv").write_text(ONE_T4_NODE)
    pods = greenslurm.replay(str(tmp_path / "pods.csv"), nodes=str(tmp_path / "nodes.csv"), queue="none")
    assert pods.jobs[["cpus", "gpus"]].values.tolist() == [[1.0, 0.5]]
    assert [str(pods.jobs[c].dtype) for c in ("cpus", "gpus")] == ["int64", "float64"]


# -- piped reports: whole lines, no trailing spaces ---------------------------------------------------------
def test_a_piped_reports_notes_are_whole_lines(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["demo", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # before: wrapped at 110 columns, "... (from greenslurm's" / "bundled kth-sp2.toml)" on two lines
    assert ("power model: nodes 100 W idle to 200 W with every CPU allocated, linear in allocated CPUs "
            "(from greenslurm's bundled kth-sp2.toml)") in lines
    assert ("unallocated capacity: the CPUs, GPUs and nodes no job holds, including nodes powered down or booting; "
            "idle nodes: the part drawn by nodes powered on with no job; here the same energy: every unallocated "
            "CPU was on an idle node") in lines
    assert [line for line in lines if line != line.rstrip()] == []


def test_piped_warnings_have_no_trailing_spaces(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    # nodes powered down after 600 s cycle: the replay warns (a log record, padded by rich to the width)
    assert main(["compare", DEMO_TRACE, "--limit", "300", "--power-down-after", "600", "--power-budget", "15000",
                 "--no-progress", "-j", "1"]) == 0
    err = capsys.readouterr().err
    assert "times a day on average" in err          # the cycling warning (power_settings.cycling_warning)
    assert [line for line in err.splitlines() if line != line.rstrip()] == []


# -- help texts -------------------------------------------------------------------------------------------
def every_parser():
    """(command words, parser) of greenslurm and every command and subcommand."""
    import argparse

    from greenslurm.cli import build_parser
    todo = [((), build_parser())]
    while todo:
        words, parser = todo.pop()
        yield words, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(((*words, name), sub) for name, sub in action.choices.items())


def test_no_help_shows_an_argparse_placeholder():
    import argparse
    # an option given no metavar shows its dest in capitals (inflate's SEEDS, FIRST_SEED, UNTIL were)
    placeholders = [(" ".join(words), action.option_strings[-1]) for words, parser in every_parser()
                    for action in parser._actions
                    if action.option_strings and action.nargs != 0 and action.help != argparse.SUPPRESS
                    and action.metavar is None and action.choices is None]
    assert placeholders == []


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_nodes_per_cabinet_says_what_a_cabinet_does(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = flat(capsys.readouterr().out)
    assert ("--nodes-per-cabinet N nodes per cabinet: cabinets fill in node order, and each cabinet's power "
            "phases are balanced and reported on their own (default 48)") in text


def test_every_help_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    too_long = []
    for words, _ in every_parser():
        with pytest.raises(SystemExit):
            main([*words, "--help"])
        too_long += [(" ".join(words), line) for line in capsys.readouterr().out.splitlines() if len(line) > 80]
    # before: the top-level description's lines of up to 118 columns, the examples, two groups' titles
    assert too_long == []


def test_a_long_example_in_a_help_still_runs_when_pasted(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    # the example is one command: continued with shell's backslash, its explanation on the next line
    start = lines.index("  greenslurm replay jobs.txt --format sacct --cluster cluster.toml --out \\")
    assert lines[start + 1:start + 2] == ["      results/ --json summary.json"]
    # an explanation too long for its column is on the line after its command, as every other's
    assert lines[lines.index("  greenslurm demo") + 1] == "        bundled KTH-SP2 trace (2,000 jobs) on 100 nodes"
    # a paragraph is filled again as a whole, not broken into ragged halves
    assert ("described cluster under a queue strategy (FCFS, EASY or conservative" in lines)


# -- nothing skipped quietly ----------------------------------------------------------------------------
def test_a_replay_that_skips_most_jobs_says_so_loudly(tmp_path, capsys, monkeypatch):
    from test_trustworthy_reports import NO_MEMORY_CONF, export
    monkeypatch.delenv("COLUMNS", raising=False)
    (tmp_path / "jobs.txt").write_text(export("100Mn", "100Mn", "100Mn"))
    (tmp_path / "slurm.conf").write_text(NO_MEMORY_CONF)
    assert main(["replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"),
                 "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # before: only the skipped table's row; now one loud line under it, as whatif's, with the reason
    assert ("most jobs skipped: 3 of 3 jobs: 3 asks for more memory than any node has "
            "(1 MiB a node: Slurm's default when slurm.conf gives no RealMemory)") in lines


def test_a_replay_that_skips_few_jobs_stays_quiet(tmp_path, capsys):
    from test_trustworthy_reports import FOUR_NODES_CONF, export
    # one job of three asks for 9000 MiB, the nodes have 8000: one skipped is not most
    (tmp_path / "jobs.txt").write_text(export("100Mn", "9000Mn", "100Mn"))
    (tmp_path / "slurm.conf").write_text(FOUR_NODES_CONF)
    assert main(["replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "jobs skipped" in out and "most jobs skipped" not in out


def test_on_a_cluster_with_its_own_node_power_the_gpu_report_says_so(tmp_path, capsys, monkeypatch):
    from test_trustworthy_reports import FOUR_NODES_CONF, export
    monkeypatch.delenv("COLUMNS", raising=False)
    (tmp_path / "jobs.txt").write_text(export("100Mn", "100Mn", "100Mn"))
    (tmp_path / "slurm.conf").write_text("GresTypes=gpu\n" + FOUR_NODES_CONF.replace("RealMemory=8000",
                                                                                     "RealMemory=8000 Gres=gpu:t4:1"))
    assert main(["replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    # the Energy table counts the nodes' own power, not the PWR paper's packages: 2 nodes x (100 W + a T4's
    # 10 W idle) x 1,500 s = 330,000 J, plus 3 jobs x 2 CPUs x (350 - 100) / 4 W x 300 s = 112,500 J:
    # 442,500 J = 0.12 kWh; no percentage between two different machines
    assert "total 0.12 kWh" in flat(out)
    assert "the Energy table's 0.12 kWh counts the cluster's own node power (below)" in flat(out)
    assert "linear in them" not in out
