"""Hostile and careless input to ``greenslurm run`` and ``greenslurm replay``: values that cannot be
physical (negative seeds, non-finite numbers from the command line, negative node sizes and powers,
synthetic-trace settings outside their domain, co-location settings out of range) end as one line
naming the file (or the option) and the field, exit code 2, never a traceback, a hang or a silently
changed result."""

from __future__ import annotations

import json
import os

import pytest

from greenslurm.cli import main
from test_cli import TINY_SWF, assert_one_line_error
from test_cli_select import NODES, PODS


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "tiny.swf").write_text(TINY_SWF)
    (tmp_path / "pods.csv").write_text(PODS)
    (tmp_path / "nodes.csv").write_text(NODES)
    return tmp_path


def run_file(folder, body: str, capsys) -> tuple[int, str]:
    path = folder / "s.toml"
    path.write_text(body)
    code = main(["run", str(path), "--json", str(folder / "out.json"), "--no-progress"])
    return code, capsys.readouterr().err


TINY = '[trace]\npath = "tiny.swf"\n'
GPU = '[trace]\npath = "pods.csv"\n[cluster]\nnode_list = "nodes.csv"\n'
SYNTH = '[trace]\nsynthetic = {{ jobs = 20, {} }}\n[cluster]\nhomogeneous = {{ nodes = 4, cpus = 2 }}\n'


# -- seeds: numpy's generators take no negative seed (was a ValueError traceback) ---------------------
@pytest.mark.parametrize("body, field", [
    ('seed = -1\nqueue = "none"\n' + GPU + '[selection]\nname = "random"\n', "field seed"),
    ('queue = "deadline"\n' + TINY + '[deadlines]\nslack_mean = 1.0\nseed = -5\n', "field deadlines.seed"),
    (TINY + '[supply]\nsource = "wind"\nseed = -1\n', "field supply.seed"),
    ('queue = "fcfs"\n' + TINY + '[colocation]\npolicy = "eaco"\nseed = -1\n', "field colocation.seed"),
])
def test_a_negative_seed_is_refused(folder, capsys, body, field):
    code, err = run_file(folder, body, capsys)
    assert_one_line_error(code, err, "s.toml", field, ">= 0")


def test_a_negative_seed_on_the_command_line_is_refused(folder, capsys):
    code = main(["replay", str(folder / "pods.csv"), "--nodes", str(folder / "nodes.csv"), "--queue", "none",
                 "--select", "random", "--seed", "-1"])
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", "--seed", ">= 0")


def test_a_seed_past_a_toml_integer_is_refused(folder, capsys):
    # a scenario is saved as TOML, whose integers are 64-bit signed: 2^63 - 1 is the largest seed a
    # saved scenario can hold; 2^64 + 1 was accepted and written into a file TOML readers refuse
    code = main(["replay", str(folder / "pods.csv"), "--nodes", str(folder / "nodes.csv"), "--queue", "none",
                 "--select", "random", "--seed", str(2 ** 64 + 1)])
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", "--seed", "below 2^63")
    code, err = run_file(folder, 'queue = "deadline"\n' + TINY + '[deadlines]\nslack_mean = 1.0\nseed = 9223372036854775808\n',
                         capsys)
    assert_one_line_error(code, err, "s.toml", "field deadlines.seed", "below 2^63")
    code, err = run_file(folder, 'queue = "fcfs"\nseed = 9223372036854775807\n' + TINY, capsys)
    assert code == 0, err


# -- non-finite numbers from the command line (the TOML reader refuses them; argparse's float takes them)
@pytest.mark.parametrize("extra, option", [
    (["--power-down-after", "nan"], "--power-down-after"),        # was a hang: every comparison with nan is false
    (["--power-down-after", "60", "--boot-s", "nan"], "--boot-s"),   # was a hang
    (["--power-down-after", "60", "--off-w", "nan"], "--off-w"),    # was energy nan, exit 0
    (["--power-down-after", "60", "--boot-w", "inf"], "--boot-w"),
    (["--power-budget", "inf"], "--power-budget"),
    (["--colocation", "eaco", "--colocation-idle-node-w", "nan"], "--colocation-idle-node-w"),
])
def test_a_non_finite_number_on_the_command_line_is_refused(folder, capsys, extra, option):
    code = main(["replay", str(folder / "tiny.swf"), *extra, "--json", str(folder / "o.json")])
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", option, "finite")
    assert not (folder / "o.json").exists()


# -- a homogeneous cluster of impossible nodes (was replayed: every job skipped, exit 0) ----------------
@pytest.mark.parametrize("table, field, message", [
    ("nodes = 0, cpus = 1", "cluster.homogeneous.nodes", ">= 1"),      # was '<input>: a cluster needs ...'
    ("nodes = 2, cpus = -1", "cluster.homogeneous.cpus", ">= 1"),
    ("nodes = 2, cpus = 1, gpus = -1", "cluster.homogeneous.gpus", ">= 0"),
    ("nodes = 2, cpus = 1, memory_mb = -5.0", "cluster.homogeneous.memory_mb", ">= 0"),
    ("nodes = 2, cpus = 1, idle_w = -300.0", "cluster.homogeneous.idle_w", ">= 0"),
    ("nodes = 2, cpus = 1, idle_w = 300.0, busy_w = 100.0", "cluster.homogeneous.busy_w", "below idle_w"),
    ("nodes = 2, cpus = 1, gpu_model = \"T4\"", "cluster.homogeneous.gpu_model", "gpus"),
    # more nodes than any machine has: the replay would hold every node in memory (was an endless build)
    ("nodes = 100000000000, cpus = 1", "cluster.homogeneous.nodes", "at most"),
])
def test_an_impossible_homogeneous_cluster_is_refused(folder, capsys, table, field, message):
    code, err = run_file(folder, TINY + f"[cluster]\nhomogeneous = {{ {table} }}\n", capsys)
    assert_one_line_error(code, err, "s.toml", field, message)


# -- synthetic traces outside their domain (were ZeroDivisionError, math domain error, numpy ValueError) --
@pytest.mark.parametrize("setting, field", [
    ("load = -1.0", "trace.synthetic.load"),
    ("load = 0.0", "trace.synthetic.load"),
    ("runtime_median_s = -1.0", "trace.synthetic.runtime_median_s"),
    ("runtime_sigma = -1.0", "trace.synthetic.runtime_sigma"),
    ("max_overestimate = 0.5", "trace.synthetic.max_overestimate"),
    ("power_of_two_share = 2.0", "trace.synthetic.power_of_two_share"),
    ("underestimate_share = -2.0", "trace.synthetic.underestimate_share"),
    ("max_job_cpus = 0", "trace.synthetic.max_job_cpus"),
])
def test_a_synthetic_trace_outside_its_domain_is_refused(folder, capsys, setting, field):
    code, err = run_file(folder, SYNTH.format(setting), capsys)
    assert_one_line_error(code, err, "s.toml", field)


def test_a_synthetic_trace_whose_runtimes_overflow_is_refused(folder, capsys):
    # lognormal runtimes with sigma 1e300 are infinite: the mean work and the arrival rate were inf and 0
    code, err = run_file(folder, SYNTH.format("runtime_sigma = 1e300"), capsys)
    assert_one_line_error(code, err, "s.toml", "trace.synthetic", "finite")


# -- co-location settings out of range (were replayed as given) -----------------------------------------
@pytest.mark.parametrize("setting, field", [
    ("max_jobs = 0", "colocation.max_jobs"),
    ("util_threshold_pct = 500.0", "colocation.util_threshold_pct"),
    ("mem_threshold_pct = -5.0", "colocation.mem_threshold_pct"),
    ("idle_node_w = -100.0", "colocation.idle_node_w"),
    ("beta = -1.0", "colocation.beta"),          # a shared set would draw less than its biggest job
    ("jitter = -1.0", "colocation.jitter"),
])
def test_colocation_settings_out_of_range_are_refused(folder, capsys, setting, field):
    code, err = run_file(folder, 'queue = "fcfs"\n' + TINY + f'[colocation]\npolicy = "eaco"\n{setting}\n', capsys)
    assert_one_line_error(code, err, "s.toml", field)


# -- power states: a boot longer than a day (was a replay retrying every 10 minutes for 31 years) ---------
def test_a_boot_time_beyond_a_day_is_refused(folder, capsys):
    code, err = run_file(folder, TINY + "[power_states]\nsuspend_after_s = 600.0\nboot_s = 1e9\n", capsys)
    assert_one_line_error(code, err, "s.toml", "power_states.boot_s", "86400")


# -- the supply ------------------------------------------------------------------------------------------
def test_a_supply_scale_that_overflows_is_refused(folder, capsys):
    # scale x the cluster's full power = inf watts (was a ValueError traceback from the supply series)
    code, err = run_file(folder, TINY + '[supply]\nsource = "solar"\nscale = 1e308\n', capsys)
    assert_one_line_error(code, err, "s.toml", "supply.scale", "finite")


@pytest.mark.parametrize("setting, field", [("seed = 3", "supply.seed"), ('horizon = "limits"', "supply.horizon")])
def test_supply_settings_of_synthetic_supplies_do_not_apply_to_a_csv(folder, capsys, setting, field):
    # a CSV supply is read as it is: a seed or a horizon was silently ignored
    (folder / "supply.csv").write_text("time_s,watts\n0,100\n1000,50\n")
    code, err = run_file(folder, TINY + f'[supply]\nsource = "supply.csv"\n{setting}\n', capsys)
    assert_one_line_error(code, err, "s.toml", field, "solar or wind")


# -- values that overflow the replay's clock ---------------------------------------------------------------
def test_an_arrival_scale_that_overflows_the_clock_is_refused(folder, capsys):
    # 20 s of arrivals x 1e300: energy was inf (written as null) with exit 0
    code, err = run_file(folder, "arrival_scale = 1e300\n" + TINY, capsys)
    assert_one_line_error(code, err, "s.toml", "arrival_scale")


def test_drawn_deadlines_that_overflow_are_refused(folder, capsys):
    # d = r + (1 + eps) p with eps = 1e308 x exp(...) is inf (was a numpy overflow warning and exit 0)
    code, err = run_file(folder, 'queue = "deadline"\n' + TINY + "[deadlines]\nslack_mean = 1e308\n", capsys)
    assert_one_line_error(code, err, "s.toml", "deadlines.slack_mean", "finite")


def test_a_deadline_queue_on_pods_that_run_forever_skips_them_as_every_queue_does(folder, capsys):
    # an Alibaba trace without time columns: every pod runs forever, its drawn deadline r + (1 + eps) x inf
    # is inf.  The deadline queue refused it ("choose a smaller slack", naming --slack-mean: no slack
    # would do); FCFS and every other queue skip such pods, counted as running forever
    (folder / "timeless.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                                         "a,1000,1024,1,500,\nb,1000,1024,1,500,\n")
    for queue, extra in (("fcfs", []), ("deadline", ["--slack-mean", "1"])):
        out = folder / f"{queue}.json"
        code = main(["replay", str(folder / "timeless.csv"), "--nodes", str(folder / "nodes.csv"), "--queue", queue,
                     *extra, "--json", str(out), "--no-progress"])
        assert code == 0, capsys.readouterr().err
        summary = json.loads(out.read_text())
        assert summary["jobs_completed"] == 0
        assert summary["skipped_by_reason"]["replay"] == {"no finite runtime (would run forever)": 2}


def test_drawn_deadlines_that_overflow_blame_the_mean_when_no_spread_was_given(folder, capsys):
    # slack mean 1e6 and no sigma: sigma is the mean / 2.5 = 4e5, exp(4e5 Z) overflows.  The error named
    # --slack-sigma, an option the user never gave
    code = main(["replay", str(folder / "tiny.swf"), "--queue", "deadline", "--slack-mean", "1e6"])
    assert_one_line_error(code, capsys.readouterr().err, "field --slack-mean", "finite")
    code = main(["replay", str(folder / "tiny.swf"), "--queue", "deadline", "--slack-mean", "1",
                 "--slack-sigma", "1e6"])
    assert_one_line_error(code, capsys.readouterr().err, "field --slack-sigma", "finite")


# -- errors found while replaying name the scenario file, not '<scenario>' --------------------------------
def test_a_gpu_scorer_on_a_cpu_cluster_names_the_scenario_file(folder, capsys):
    code, err = run_file(folder, TINY + '[selection]\nname = "pwr"\n', capsys)
    assert_one_line_error(code, err, "s.toml", "field selection.name", "needs a cluster with GPUs")


def test_a_gpu_scorer_on_a_cpu_cluster_names_the_option(folder, capsys):
    code = main(["replay", str(folder / "tiny.swf"), "--select", "pwr"])
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", "--select", "needs a cluster with GPUs")


def test_a_sane_synthetic_scenario_still_runs(folder, capsys):
    # the new range checks keep a plain synthetic replay: 20 jobs on 4 x 2 CPUs, all completed
    code, err = run_file(folder, SYNTH.format("load = 0.5"), capsys)
    assert code == 0, err
    assert json.loads((folder / "out.json").read_text())["jobs_completed"] == 20


# -- file names that are not UTF-8 (Linux allows any bytes; a TOML file and pyarrow need UTF-8) ------------
@pytest.fixture
def raw_folder(folder):
    raw = folder / os.fsdecode(b"raw\xffname")         # the byte 0xff, kept by Python as the surrogate \udcff
    raw.mkdir()
    (raw / "tiny.swf").write_text(TINY_SWF)
    return raw


def test_save_scenario_of_a_trace_whose_name_is_not_utf8_is_refused_before_the_replay(folder, raw_folder, capsys):
    # was a UnicodeEncodeError traceback after the replay, leaving an empty scenario file behind
    saved = folder / "s.toml"
    code = main(["replay", str(raw_folder / "tiny.swf"), "--save-scenario", str(saved), "--json",
                 str(folder / "o.json")])
    assert_one_line_error(code, capsys.readouterr().err, str(saved), "UTF-8")
    assert not saved.exists() and not (folder / "o.json").exists()


def test_out_into_a_folder_whose_name_is_not_utf8_writes_every_file(raw_folder, capsys):
    # pyarrow could not name a Parquet file that is not UTF-8, so such a folder was refused; the
    # files are written by greenslurm now, which takes any name Linux takes
    import pyarrow.parquet as pq
    out = raw_folder / "out"
    code = main(["replay", str(raw_folder / "tiny.swf"), "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    with open(out / "jobs.parquet", "rb") as handle:         # pyarrow itself takes only UTF-8 names
        assert pq.read_table(handle).num_rows == 3
    assert json.loads((out / "summary.json").read_text())["jobs_completed"] == 3
    assert (out / "jobs.csv").read_text().count("\n") == 4          # the header and 3 jobs


def test_a_trace_whose_name_is_not_utf8_replays(raw_folder, capsys):
    # only the outputs that must hold the name need UTF-8: the replay itself and --json work
    code = main(["replay", str(raw_folder / "tiny.swf"), "--json", str(raw_folder / "o.json")])
    assert code == 0, capsys.readouterr().err
    assert json.loads((raw_folder / "o.json").read_text())["jobs_completed"] == 3


# -- output paths ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--out", "--json", "--save-scenario"])
def test_an_empty_output_path_is_refused_before_the_replay(folder, capsys, monkeypatch, option):
    # --out "" wrote jobs.csv, jobs.parquet, power.csv and summary.json into the current folder, exit 0
    monkeypatch.chdir(folder)
    code = main(["replay", "tiny.swf", option, ""])
    assert_one_line_error(code, capsys.readouterr().err, option, "empty")
    assert not (folder / "jobs.csv").exists()


def test_save_scenario_to_a_folder_names_its_option(folder, capsys):
    code = main(["replay", str(folder / "tiny.swf"), "--save-scenario", str(folder)])
    assert_one_line_error(code, capsys.readouterr().err, "is a directory (--save-scenario wants a file name)")


def test_save_scenario_to_stdout_sends_the_report_to_stderr(folder, capsys, monkeypatch):
    # the report and the TOML both went to stdout: what came out was not a scenario
    monkeypatch.chdir(folder)
    code = main(["replay", "tiny.swf", "--save-scenario", "-"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("# greenslurm scenario") and "Scheduling" in err
    (folder / "again.toml").write_text(out)
    assert main(["run", str(folder / "again.toml"), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs_completed"] == 3


def test_json_and_save_scenario_cannot_both_be_stdout(folder, capsys):
    code = main(["replay", str(folder / "tiny.swf"), "--save-scenario", "-", "--json", "-"])
    assert_one_line_error(code, capsys.readouterr().err, "--save-scenario", "--json", "stdout")


# -- the power budget ----------------------------------------------------------------------------------------
# tiny.swf on its header's 2 x 1-CPU nodes (100 W idle, 350 W busy): job 1 takes both nodes, 2 x 350 = 700 W
# alone; jobs 2 and 3 take one node, 350 + 100 = 450 W.
def test_strict_fails_on_a_job_the_power_budget_leaves_out(folder, capsys):
    # without --strict job 1 is left out (reported); --strict turns every left-out job into a failure
    code = main(["replay", str(folder / "tiny.swf"), "--power-budget", "500", "--json", str(folder / "o.json")])
    assert code == 0 and json.loads((folder / "o.json").read_text())["left_out_by_budget"] == 1
    capsys.readouterr()
    code = main(["replay", str(folder / "tiny.swf"), "--power-budget", "500", "--strict"])
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", "--power-budget", "job 1", "500 W")


def test_a_power_budget_that_leaves_no_job_is_an_error(folder, capsys):
    # 449 W < 450 W: every job is left out (was a replay of nothing, exit 0)
    code, err = run_file(folder, TINY + "[power_states]\nbudget_w = 449.0\n", capsys)
    assert_one_line_error(code, err, "s.toml", "power_states.budget_w", "all 3 jobs")


@pytest.mark.parametrize("select, label", [(" FGD ", "fgd"), ("PWR=0.10, FGD=0.90", "pwr=0.1,fgd=0.9")])
def test_the_summary_names_the_selection_as_parsed(folder, capsys, select, label):
    # parse_selection takes any case and spacing; the summary said ' FGD ' (not what ran: fgd)
    code = main(["replay", str(folder / "pods.csv"), "--nodes", str(folder / "nodes.csv"), "--queue", "none",
                 "--select", select, "--json", str(folder / "o.json")])
    assert code == 0, capsys.readouterr().err
    assert json.loads((folder / "o.json").read_text())["selection"] == label


# -- power-state settings that only act when nodes power down (nodes start on and stay on without it) ------
@pytest.mark.parametrize("option", ["--boot-s", "--boot-w", "--off-w"])
def test_boot_and_off_settings_without_power_down_are_refused(folder, capsys, option):
    # --boot-s 100 alone replayed exactly as without it, exit 0
    code = main(["replay", str(folder / "tiny.swf"), option, "100"])
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", f"field {option}", "--power-down-after")


def test_boot_time_without_power_down_in_a_scenario_is_refused(folder, capsys):
    code, err = run_file(folder, TINY + "[power_states]\nboot_s = 100.0\nbudget_w = 5000.0\n", capsys)
    assert_one_line_error(code, err, "s.toml", "field power_states.boot_s", "power_states.suspend_after_s")


# -- files that are not regular files: /dev/zero was read until memory ran out (16 GB), a FIFO blocked --------
@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("where", ["trace", "cluster", "nodes", "supply", "power-config", "scenario"])
def test_a_device_or_pipe_is_refused_without_reading_it(folder, capsys, request, special, where):
    path = request.getfixturevalue("fifo") if special == "fifo" else special
    trace = str(folder / "tiny.swf")
    argv = {"trace": ["replay", path, "--format", "swf"],
            "cluster": ["replay", trace, "--cluster", path],
            "nodes": ["replay", str(folder / "pods.csv"), "--nodes", path],
            "supply": ["replay", trace, "--renewable", path],
            "power-config": ["replay", trace, "--power-config", path],
            "scenario": ["run", path]}[where]
    code = main(argv)
    assert_one_line_error(code, capsys.readouterr().err, path, "not a regular file")


def test_a_scenario_saved_with_a_byte_order_mark_runs(folder, capsys):
    # Windows editors write UTF-8 with a BOM; the trace readers drop it, the scenario reader said "not valid TOML"
    code, err = run_file(folder, "\ufeff" + TINY, capsys)
    assert code == 0, err
    assert json.loads((folder / "out.json").read_text())["jobs_completed"] == 3


# -- emoji codes: rich turned ":fire:" in a name a user controls into an emoji ------------------------------
def test_names_with_emoji_codes_are_printed_as_written(tmp_path, capsys):
    # the trace's file name and its machine (the SWF header's Computer) are the user's text
    path = tmp_path / "log:thumbs_up:.swf"
    path.write_text(TINY_SWF.replace("; Computer: tiny", "; Computer: :fire: cluster"))
    assert main(["replay", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "log:thumbs_up:.swf" in out and ":fire: cluster" in out
    assert "\N{THUMBS UP SIGN}" not in out and "\N{FIRE}" not in out
    # and in a one-line error naming the file (a record with a word for its submit time, --strict)
    path.write_text(TINY_SWF + "4 soon -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert main(["replay", str(path), "--strict", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "log:thumbs_up:.swf" in err and "\N{THUMBS UP SIGN}" not in err


# -- numbers on the command line: argparse's int() and float() read "５" (full width) as 5, "٣" (Arabic-
#    Indic) as 3 and "1_0" as 10; the trace and config readers refuse such numbers, and so do options ---
@pytest.mark.parametrize("option, value", [
    ("--arrival-scale", "\uff15"), ("--arrival-scale", "1_0"), ("--limit", "\uff12"), ("--seed", "\u0663"),
    ("--power-budget", "1_000"), ("--renewable-seed", "\uff11"),
])
def test_a_command_line_number_of_other_digits_is_refused(folder, capsys, option, value):
    code = None
    try:
        code = main(["replay", str(folder / "tiny.swf"), option, value, "--json", str(folder / "o.json")])
    except SystemExit as stop:
        code = stop.code
    assert_one_line_error(code, capsys.readouterr().err, "<command line>", option, "not a number in ASCII digits")
    assert not (folder / "o.json").exists()
