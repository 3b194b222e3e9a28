"""Numbers in files greenslurm did not write: each reader takes a number only as the program that
wrote the file (Slurm, the Alibaba trace's tools) would read it, and refuses the rest in one line
naming the file, line and field, exit code 2.  Python's ``int()`` and ``float()`` read far more than
C's ``strtoul``/``strtod``: full-width ("４") and Arabic-Indic ("٤") digits, underscores ("1_0"),
surrounding white space; left to them, such a value would be replayed as a number nobody wrote.

Every case goes through the real command line (:func:`greenslurm.cli.main`) on files written to
``tmp_path``."""

from __future__ import annotations

import json

import pytest

from greenslurm.cli import main
from test_cli import assert_one_line_error

SACCT = ("JobID|Submit|Start|End|NCPUS|Timelimit|State\n"
         "1|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T00:10:00|8|00:20:00|COMPLETED\n"
         "2|2024-01-01T00:01:00|2024-01-01T00:02:00|2024-01-01T00:05:00|9|00:10:00|COMPLETED\n")
PARTITION = "PartitionName=p Nodes=ALL Default=YES\n"


def replay(tmp_path, conf: str, capsys) -> tuple[int, str, dict | None]:
    trace, slurm_conf, out = tmp_path / "jobs.txt", tmp_path / "slurm.conf", tmp_path / "out.json"
    trace.write_text(SACCT)
    slurm_conf.write_text(conf)
    code = main(["replay", str(trace), "--slurm-conf", str(slurm_conf), "--no-progress", "--json", str(out)])
    return code, capsys.readouterr().err, json.loads(out.read_text()) if code == 0 else None


# -- slurm.conf: Slurm reads its numbers with strtoul(value, &end, 0) and refuses a value it does
#    not read to the end (src/common/parse_value.c, s_p_handle_uint16/32/64) --------------------------
@pytest.mark.parametrize("line, field", [
    ("NodeName=c1 CPUs=\uff18", "cpus"),                          # full-width 8: was read as 8 CPUs
    ("NodeName=c1 CPUs=\u0668", "cpus"),                          # Arabic-Indic 8: was read as 8
    ("NodeName=c1 CPUs=8 RealMemory=\uff18000", "realmemory"),
    ("NodeName=c1 Sockets=\uff12 CoresPerSocket=4", "sockets"),
    ("NodeName=c1 CPUs=8 Weight=\uff11", "weight"),
    ("NodeName=c1 CPUs=08", "cpus"),                              # strtoul base 0 stops at the 8 of octal 08
    ("NodeName=c1 CPUs=1_0", "cpus"),
    ("PriorityWeightAge=\uff11000\nNodeName=c1 CPUs=8", "priorityweightage"),
])
def test_a_slurm_conf_number_slurm_cannot_read_is_refused(tmp_path, capsys, line, field):
    code, err, _ = replay(tmp_path, line + "\n" + PARTITION, capsys)
    assert_one_line_error(code, err, "slurm.conf:", f"field {field}", "is not a whole number")


def test_a_full_width_gres_count_is_refused(tmp_path, capsys):
    # Gres=gpu:２ was read as 2 GPUs; Slurm's gres count is C digits
    code, err, _ = replay(tmp_path, "GresTypes=gpu\nNodeName=c1 CPUs=8 Gres=gpu:\uff12\n" + PARTITION, capsys)
    assert_one_line_error(code, err, "slurm.conf:2", "field Gres", "'\uff12' is not a GRES name or type")


@pytest.mark.parametrize("cpus", ["010", "0x8", "0X08", "+8"])
def test_slurm_conf_numbers_are_read_as_strtoul_base_0_reads_them(tmp_path, capsys, cpus):
    # CPUs=010 is octal 8 for Slurm (strtoul base 0), not 10; 0x8 is 8.  The trace: job 1 asks for
    # 8 CPUs, job 2 for 9: on one node of 8 CPUs job 1 runs and job 2 is skipped as larger than the
    # cluster (with 10 CPUs, as CPUs=010 was read before, both ran).
    code, err, summary = replay(tmp_path, f"NodeName=c1 CPUs={cpus}\n" + PARTITION, capsys)
    assert code == 0, err
    assert summary["jobs_completed"] == 1
    assert summary["skipped_by_reason"]["replay"] == {"asks for more than the cluster has": 1}


def test_oversubscribe_counts_are_decimal_as_slurm_reads_them(tmp_path, capsys):
    # OverSubscribe=YES:010 is strtol(..., 10) in Slurm's read_config.c: 10 jobs a resource, not 8;
    # what matters here is that it is read and not refused
    code, err, _ = replay(tmp_path, "NodeName=c1 CPUs=8\nPartitionName=p Nodes=ALL Default=YES "
                                    "OverSubscribe=YES:010\n", capsys)
    assert code == 0, err


# -- the Alibaba GPU trace (CSV): its numbers are ASCII decimal; Python's float() also reads "1_000"
#    and "１０００", which the SWF and sacct readers already refuse ---------------------------------------
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
             "scheduled_time\n"
NODE_LIST = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,1,T4\nn1,8000,65536,1,T4\n"


def gpu_replay(tmp_path, pods: str, nodes: str, capsys, *extra: str) -> tuple[int, str, dict | None]:
    (tmp_path / "pods.csv").write_text(POD_HEADER + pods)
    (tmp_path / "nodes.csv").write_text(nodes)
    out = tmp_path / "out.json"
    code = main(["replay", str(tmp_path / "pods.csv"), "--nodes", str(tmp_path / "nodes.csv"), "--no-progress",
                 "--json", str(out), *extra])
    return code, capsys.readouterr().err, json.loads(out.read_text()) if code == 0 else None


GOOD_POD = "b,1000,1024,1,500,,LS,Running,10,1000,10\n"


@pytest.mark.parametrize("field, pod", [
    ("cpu_milli", "a,1_000,1024,1,500,,LS,Running,0,1000,0\n"),                  # was read as 1000
    ("cpu_milli", "a,\uff11000,1024,1,500,,LS,Running,0,1000,0\n"),              # full-width 1: was 1000
    ("gpu_milli", "a,1000,1024,1,\u0665\u0660\u0660,,LS,Running,0,1000,0\n"),    # Arabic-Indic 500
    ("deletion_time", "a,1000,1024,1,500,,LS,Running,0,1_000,0\n"),
    ("creation_time", "a,1000,1024,1,500,,LS,Running,\uff10,1000,0\n"),
])
def test_a_pod_number_that_is_not_ascii_decimal_is_skipped_and_counted(tmp_path, capsys, field, pod):
    code, err, summary = gpu_replay(tmp_path, pod + GOOD_POD, NODE_LIST, capsys)
    assert code == 0, err
    assert summary["jobs_total"] == 2 and summary["jobs_completed"] == 1
    assert summary["skipped_by_reason"]["reader"] == {f"bad field {field}": 1}
    code, err, _ = gpu_replay(tmp_path, pod + GOOD_POD, NODE_LIST, capsys, "--strict")
    assert_one_line_error(code, err, "pods.csv:2", f"field {field}")


@pytest.mark.parametrize("field, node", [
    ("cpu_milli", "n0,8_000,65536,1,T4\n"), ("memory_mib", "n0,8000,\uff16\uff15536,1,T4\n"),
    ("gpu", "n0,8000,65536,\u0661,T4\n"),
])
def test_a_node_list_number_that_is_not_ascii_decimal_is_refused(tmp_path, capsys, field, node):
    code, err, _ = gpu_replay(tmp_path, GOOD_POD, "sn,cpu_milli,memory_mib,gpu,model\n" + node, capsys)
    assert_one_line_error(code, err, "nodes.csv:2", f"field {field}", "is not a whole number")


# -- JSON and TOML: Python refuses to convert an integer of more than 4,300 digits (the conversion is
#    quadratic in the digits) with a bare ValueError, which escaped every reader as a traceback -------
LONG = "1" + "0" * 10_000
CLUSTER = 'name = "tiny"\n[[node_group]]\nname = "n"\ncount = 2\ncpus = 8\nidle_w = 100.0\nbusy_w = 200.0\n'
SACCT_JSON = ('{"jobs": [{"job_id": 1, "state": {"current": ["COMPLETED"]},\n'
              ' "time": {"submission": 0, "start": 10, "end": 100, "elapsed": 90, "limit": 60},\n'
              ' "required": {"CPUs": 1}}]}\n')
SWF = "1 0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1\n"


def run_with_file(tmp_path, name: str, text: str, argv: list[str]) -> int:
    """The exit code of ``greenslurm ARGV`` ({d} in it: tmp_path) with ``text`` written to ``name``
    beside a small SWF trace, sacct export and cluster file."""
    (tmp_path / "t.swf").write_text(SWF)
    (tmp_path / "sacct.txt").write_text(SACCT)
    (tmp_path / "cluster.toml").write_text(CLUSTER)
    (tmp_path / name).write_text(text)
    try:
        return main([part.format(d=tmp_path) for part in argv])
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize("name, text, line, argv", [
    ("jobs.json", SACCT_JSON.replace('"elapsed": 90', f'"elapsed": {LONG}'), 2,
     ["replay", "{d}/jobs.json", "--cluster", "{d}/cluster.toml"]),
    ("jobs.json", SACCT_JSON.replace('"job_id": 1', f'"job_id": {LONG}'), 1, ["traces", "info", "{d}/jobs.json"]),
    ("sinfo.json", '{"nodes": [{"name": "n1",\n "cpus": ' + LONG + ', "real_memory": 1000, "state": "idle"}]}', 2,
     ["whatif", "{d}/sacct.txt", "--cluster-from-slurm", "{d}/sinfo.json", "-j", "1"]),
    ("c.toml", CLUSTER.replace("count = 2", f"count = {LONG}"), 4, ["replay", "{d}/t.swf", "--cluster", "{d}/c.toml"]),
    ("s.toml", f'seed = {LONG}\n[trace]\npath = "t.swf"\n', 1, ["run", "{d}/s.toml"]),
    ("p.toml", f"[power_states]\nphases = {LONG}\n", 2, ["replay", "{d}/t.swf", "--power-config", "{d}/p.toml"]),
    ("study.toml", f'[sweep]\nname = "s"\nseeds = {LONG}\n', 3, ["sweep", "{d}/study.toml", "--out", "{d}/o"]),
    ("hook.toml", f"[hook]\nmax_array_tasks = {LONG}\n", 2, ["hook", "check", "--config", "{d}/hook.toml"]),
], ids=["sacct-json-elapsed", "sacct-json-job-id", "sinfo-json", "cluster-toml", "scenario-toml",
        "power-config-toml", "sweep-toml", "hook-toml"])
def test_a_number_of_10000_digits_is_one_line_naming_its_line(tmp_path, capsys, name, text, line, argv):
    code = run_with_file(tmp_path, name, text, argv)
    assert_one_line_error(code, capsys.readouterr().err, f"{name}:{line}: a number of 10,001 digits")


# -- JSON and TOML nested 100,000 deep: the readers recurse and raised RecursionError (a traceback) -----
DEEP_ARRAY, DEEP_TABLE = "[" * 100_000 + "]" * 100_000, "{b = " * 10_000 + "1" + "}" * 10_000


@pytest.mark.parametrize("name, text, argv", [
    ("sinfo.json", '{"nodes": ' + DEEP_ARRAY + "}", ["whatif", "{d}/sacct.txt", "--cluster-from-slurm", "{d}/sinfo.json"]),
    ("c.toml", f"a = {DEEP_ARRAY}\n", ["replay", "{d}/t.swf", "--cluster", "{d}/c.toml"]),
    ("c.toml", f"a = {DEEP_TABLE}\n", ["replay", "{d}/t.swf", "--cluster", "{d}/c.toml"]),
    ("s.toml", f"a = {DEEP_ARRAY}\n", ["run", "{d}/s.toml"]),
    ("p.toml", f"a = {DEEP_TABLE}\n", ["replay", "{d}/t.swf", "--power-config", "{d}/p.toml"]),
    ("study.toml", f"a = {DEEP_TABLE}\n", ["sweep", "{d}/study.toml", "--out", "{d}/o"]),
    ("hook.toml", f"a = {DEEP_ARRAY}\n", ["hook", "check", "--config", "{d}/hook.toml"]),
], ids=["sinfo-json", "cluster-toml-array", "cluster-toml-table", "scenario-toml", "power-config-toml", "sweep-toml",
        "hook-toml"])
def test_a_file_nested_100000_deep_is_one_line(tmp_path, capsys, name, text, argv):
    code = run_with_file(tmp_path, name, text, argv)
    assert_one_line_error(code, capsys.readouterr().err, f"{name}: ", "nested too deeply")


# -- a renewable supply CSV (time_s,watts): ASCII numbers, and one header line at most -----------------
@pytest.mark.parametrize("csv_text, line", [
    ("time_s,watts\n0,1_000\n3600,100\n", 2),                 # float() read 1_000 as 1000 W
    ("time_s,watts\n0,\uff11000\n3600,100\n", 2),             # a full-width 1: was 1000 W
    ("time_s,watts\n0 s,100 W\n3600,100\n", 2),               # was skipped as a second header line
])
def test_a_supply_sample_that_is_not_ascii_numbers_is_refused(tmp_path, capsys, csv_text, line):
    code = run_with_file(tmp_path, "supply.csv", csv_text, ["replay", "{d}/t.swf", "--cluster", "{d}/cluster.toml",
                                                                "--renewable", "{d}/supply.csv"])
    assert_one_line_error(code, capsys.readouterr().err, f"supply.csv:{line}: not numbers")
