"""sacct readers (text and JSON): golden figures on real exports, every real fixture, decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.gres import from_tres
from greenslurm.traces import read_trace
from greenslurm.traces.sacct import parse_sacct
from greenslurm.traces.sacct_json import parse_sacct_json
from greenslurm.traces.slurm_fields import parse_tres

STEP = "job step (.batch/.extern/.N)"
LEAK = "ReqMem per-CPU flag leaked into the value: decoded"
NO_LIMIT = "requested time unknown: runtime used"
TEST_DATA = Path(__file__).parent / "data"


def sacct(shared_data, name):
    return shared_data / "sacct" / name


# -- the real exports -------------------------------------------------------------------------
def test_phillips_golden(shared_data):
    result = read_trace(str(sacct(shared_data, "xdmod-phillips.log")))
    assert result.format == "sacct"
    # wc -l: 4285 lines, all 26 fields (awk -F'|' '{print NF}' | uniq -c), all allocations (no '.')
    assert (result.records_read, len(result.jobs), dict(result.skipped)) == (4285, 4285, {})
    # awk -F'|' '{v=$21; sub(/Mn$/,"",v); if (v+0 >= 2147483648) n++}' -> 4238 leaked flags; for each
    # of them (v - 2^31) * NCPUS equals the mem= of ReqTRES exactly (checked with awk for all 4238)
    assert result.adjusted == {LEAK: 4238}
    # awk: sum of NCPUS ($19) = 34933; sum of Elapsed ($15, D-HH:MM:SS) = 1579753 s;
    # AllocTRES ($23) with gres/gpu on 2 lines
    assert sum(j.cpus for j in result.jobs) == 34933
    assert sum(j.runtime_s for j in result.jobs) == 1579753
    assert sum(1 for j in result.jobs if j.gpus_per_node) == 2
    states = {s: sum(1 for j in result.jobs if j.state == s) for s in {j.state for j in result.jobs}}
    assert states == {"COMPLETED": 2324, "FAILED": 1717, "CANCELLED": 243, "TIMEOUT": 1}


def test_phillips_first_record_in_detail(shared_data):
    result = read_trace(str(sacct(shared_data, "xdmod-phillips.log")))
    job = next(j for j in result.jobs if j.job_id == "163485")
    # 163485|...|2016-12-22T07:15:12|...|10-13:27:06|0:0|CANCELLED by 380693|1|12|12|31000Mn|cpu=12,node=1|
    # billing=12,cpu=12,gres/gpu=2,mem=31000M,node=1|37-14:00:00|cpn-f11-31|...
    assert job.submit_s == 1482390912.0            # 2016-12-22T07:15:12 read as UTC
    assert job.runtime_s == 10 * 86400 + 13 * 3600 + 27 * 60 + 6
    assert job.requested_time_s == 37 * 86400 + 14 * 3600
    assert (job.cpus, job.nodes, job.memory_mb_per_node, job.gpus_per_node) == (12, 1, 31000.0, 2.0)
    assert (job.state, job.extra["cancelled_by"], job.user, job.partition) == ("CANCELLED", "380693", "noror", "focaccia")
    assert job.extra["wait_s"] == 1.0 and job.source_line == 1


def test_broken_reqmem_is_decoded_per_cpu(shared_data):
    result = read_trace(str(sacct(shared_data, "xdmod-phillips.log")))
    job = next(j for j in result.jobs if j.job_id == "167758")   # 8 CPUs, 1 node, 2147486648Mn
    assert job.memory_mb_per_node == 3000 * 8                   # ReqTRES says mem=24000M
    assert "2147486648Mn" in result.examples[LEAK] and ":3: field ReqMem" in result.examples[LEAK]


def test_pozidriv_golden(shared_data):
    result = read_trace(str(sacct(shared_data, "xdmod-pozidriv.log")))
    assert (result.records_read, len(result.jobs), dict(result.skipped)) == (11704, 11704, {})
    # awk: Timelimit ($24) == Partition_Limit on 58 lines; ReqMem >= 2^31 on 10626 lines
    assert result.adjusted == {"requested time Partition_Limit: runtime used": 58, LEAK: 10626}
    assert sum(j.cpus for j in result.jobs) == 113760 and sum(j.runtime_s for j in result.jobs) == 24184750
    partition_limited = [j for j in result.jobs if j.requested_time_s == j.runtime_s]
    assert len(partition_limited) >= 58


def test_aws_export_golden(shared_data):
    result = read_trace(str(sacct(shared_data, "aws-hpccostsim-sacct-output-v2.txt")))
    # 878 lines = 483 jobs + 395 .batch steps (awk -F'|' '$2 ~ /\./'); of the 483, 60 have AllocNodes
    # ($15) 0: 50 "CANCELLED by 32874" and 10 FAILED that never got a node.  No Timelimit column.
    assert result.records_read == 878
    assert result.skipped == {STEP: 395, "never ran (0 nodes allocated)": 60}
    assert len(result.jobs) == 423 and result.adjusted == {NO_LIMIT: 423}
    # 26th field (Partition) on 32 lines, 16 of them jobs that ran: 15 partition1, 1 partition2
    assert sorted(j.partition for j in result.jobs if j.partition) == ["partition1"] * 15 + ["partition2"]
    # awk: sum of ReqMem ($4, M or G) over the 423 = 376140 MiB (single-node jobs: per node = total)
    assert sum(j.memory_mb_per_node for j in result.jobs) == 376140


# -- every real edge-case fixture -------------------------------------------------------------
FIXTURES = {
    # name: (records, jobs, skipped, adjusted)
    "aws_array_sacct-output.txt": (16, 8, {STEP: 8}, {NO_LIMIT: 8}),
    "aws_issues_17_sacct-output.txt": (4, 1, {STEP: 2, "never started (Start Unknown/None)": 1}, {NO_LIMIT: 1}),
    "aws_issues_59_sacct-output.txt": (2, 1, {STEP: 1}, {NO_LIMIT: 1}),
    "aws_issues_5_sacct-output.txt": (1, 0, {"state PENDING (never started)": 1}, {}),
    "aws_issues_61_sacct-output.txt": (2, 0, {"never started (Start Unknown/None)": 1, "unknown state": 1}, {}),
    "aws_issues_63_sacct-output.txt": (1, 0, {STEP: 1}, {}),
    # 21 records: 9 good jobs, 9 steps, "100Mcd" (bad ReqMem), 2 truncated lines (24 fields)
    "aws_issues_gl-20_sacct-output.txt": (21, 9, {STEP: 9, "bad field ReqMem": 1, "wrong field count": 2},
                                          {NO_LIMIT: 9}),
    "aws_multi-node_sacct-output.txt": (2, 1, {STEP: 1}, {NO_LIMIT: 1}),
    # 6 records: 4103947_100 plus ranges of 3, 2, 4, 4 and 9 tasks -> 1 + 22 jobs
    "xdmod_accounting-logs-with-job-arrays.log": (6, 23, {}, {"array range expanded": 5}),
    "xdmod_accounting-logs.log": (4, 3, {"never ran (0 nodes allocated)": 1}, {}),
    "xdmod_non-ended-job-state.log": (2, 0, {"state RUNNING (not finished)": 1, "state PENDING (never started)": 1}, {}),
    "xdmod_unknown-job-state.log": (2, 0, {"unknown state": 2}, {}),
    "xdmod_utf8-multibyte-chars.log": (1, 1, {}, {}),
}


def test_every_fixture_is_listed(shared_data):
    on_disk = {p.name for p in (shared_data / "sacct" / "fixtures").iterdir() if p.suffix != ".json"}
    assert on_disk == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture(shared_data, name):
    records, jobs, skipped, adjusted = FIXTURES[name]
    result = read_trace(str(shared_data / "sacct" / "fixtures" / name))
    assert (result.records_read, len(result.jobs)) == (records, jobs)
    assert result.skipped == skipped and result.adjusted == adjusted


def test_fixture_details(shared_data):
    fixtures = shared_data / "sacct" / "fixtures"
    arrays = read_trace(str(fixtures / "xdmod_accounting-logs-with-job-arrays.log"))
    assert [j.job_id for j in arrays.jobs][:6] == ["4103947_100", "4103947_1", "4103947_2", "4103947_3",
                                                   "4103947_1", "4103947_5"]
    assert arrays.jobs[1].extra["array_task_id"] == 1 and arrays.jobs[1].extra["array_job_id"] == "4103947"
    assert arrays.jobs[0].memory_mb_per_node == 3000 * 8      # 3000Mc, 256 CPUs on 32 nodes
    logs = read_trace(str(fixtures / "xdmod_accounting-logs.log"))
    assert {j.job_id: j.memory_mb_per_node for j in logs.jobs} == {"4103947": 24000.0, "4107166": 48000.0,
                                                                   "4107219": 36000.0}
    multi = read_trace(str(fixtures / "aws_multi-node_sacct-output.txt")).jobs[0]
    assert (multi.nodes, multi.cpus, multi.memory_mb_per_node) == (4, 4, 30512.0)   # plain ReqMem / ReqNodes 1
    utf8 = read_trace(str(fixtures / "xdmod_utf8-multibyte-chars.log")).jobs[0]
    assert utf8.extra["job_name"] == "aàb"
    gl20 = read_trace(str(fixtures / "aws_issues_gl-20_sacct-output.txt"))
    assert gl20.examples["bad field ReqMem"].endswith("field ReqMem: '100Mcd' is not a ReqMem value (size with optional n/c suffix)")
    assert ":22: 24 fields, expected 25 to 26" in gl20.examples["wrong field count"]   # "Truncated line 1"


def test_tres_gpu_count_table(shared_data):
    """XDMoD's expected GPU counts for AllocTRES strings (fixtures/xdmod_alloc-tres-gpu-count.json)."""
    table = json.loads((shared_data / "sacct" / "fixtures" / "xdmod_alloc-tres-gpu-count.json").read_text())
    assert len(table) == 9
    for tres, expected in table:
        assert from_tres(parse_tres(tres)).gpus == expected, tres
    found = from_tres(parse_tres("billing=1,cpu=1,gres/gpu:p100=1,mem=125G,node=1"))
    assert (found.gpus, found.model) == (1, "p100")


def test_the_tres_json_fixture_is_not_a_trace(shared_data):
    with pytest.raises(InputError, match='expected an object with a "jobs" list'):
        read_trace(str(shared_data / "sacct" / "fixtures" / "xdmod_alloc-tres-gpu-count.json"))


# -- column orders ----------------------------------------------------------------------------
HEADER = "JobID|User|Partition|Submit|Start|End|Elapsed|State|NCPUS|NNodes|ReqMem|AllocTRES|Timelimit|Deadline"
ROW = ("42|ann|gpu|2024-03-01T10:00:00|2024-03-01T10:05:00|2024-03-01T11:05:00|01:00:00|COMPLETED|16|2|8Gn|"
       "cpu=16,gres/gpu=4,gres/gpu:a100=4,mem=16G,node=2|02:00:00|2024-03-01T14:00:00")


def test_header_line_any_order_with_deadline():
    result = parse_sacct(f"{HEADER}\n{ROW}\n", "h.txt")
    job = result.jobs[0]
    assert (job.job_id, job.user, job.partition, job.cpus, job.nodes) == ("42", "ann", "gpu", 16, 2)
    assert (job.memory_mb_per_node, job.gpus_per_node, job.gpu_model) == (8192.0, 2.0, "a100")
    assert job.deadline_s - job.submit_s == 4 * 3600
    assert (job.runtime_s, job.requested_time_s, job.extra["wait_s"]) == (3600.0, 7200.0, 300.0)


NO_REQMEM = ("JobID|Submit|Start|End|Elapsed|State|NCPUS|NNodes|ReqTRES|AllocTRES|Timelimit\n"
             "7|2024-03-01T10:00:00|2024-03-01T10:05:00|2024-03-01T11:05:00|01:00:00|COMPLETED|16|2|"
             "cpu=16,mem=32G,node=4|cpu=16,gres/gpu=4,mem=64G,node=2|02:00:00\n")


def test_a_record_without_reqmem_parses_each_tres_column_once(monkeypatch):
    # the memory (ReqTRES mem / nodes asked), the nodes asked (ReqTRES node=) and the GPUs (AllocTRES)
    # come from one reading of each TRES column
    import greenslurm.traces.slurm_fields as fields
    parsed = []
    monkeypatch.setattr(fields, "parse_tres", lambda text: parsed.append(text) or parse_tres(text))
    job = parse_sacct(NO_REQMEM, "t.txt").jobs[0]
    assert sorted(parsed) == ["cpu=16,gres/gpu=4,mem=64G,node=2", "cpu=16,mem=32G,node=4"]
    # 32 GiB = 32768 MiB over the 4 nodes asked; 4 GPUs on the 2 nodes given; 4 nodes asked
    assert (job.memory_mb_per_node, job.extra["memory_scope"], job.gpus_per_node) == (8192.0, "tres", 2.0)
    assert job.extra["requested_nodes"] == 4


@pytest.mark.parametrize("column, bad", [("ReqTRES", "cpu=16,mem=lots"), ("AllocTRES", "gres/gpu=1.5")])
def test_a_bad_tres_column_skips_the_record_naming_it(column, bad):
    text = NO_REQMEM.replace("cpu=16,mem=32G,node=4" if column == "ReqTRES" else "cpu=16,gres/gpu=4,mem=64G,node=2",
                             bad)
    result = parse_sacct(text, "t.txt")
    assert result.jobs == [] and result.skipped == {f"bad field {column}": 1}
    with pytest.raises(InputError, match=rf"^t.txt:2: field {column}: "):
        parse_sacct(text, "t.txt", strict=True)


WITH_CONSTRAINT = ("JobID|Submit|Start|End|Elapsed|State|NCPUS|NNodes|Timelimit|Constraints\n"
                   "7|2024-03-01T10:00:00|2024-03-01T10:05:00|2024-03-01T11:05:00|01:00:00|COMPLETED|16|2|02:00:00|{}\n")


def json_with_constraint(constraint: str) -> str:
    """sacct --json of one job asking ``constraint``."""
    return json.dumps({"jobs": [{"job_id": 7, "constraints": constraint, "state": {"current": "COMPLETED"},
                                 "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60, "limit": 120},
                                 "required": {"CPUs": 1}}]})


@pytest.mark.parametrize("constraint", ["ib&k80", "ib,k80", "ib&", "[ib*1&k80*1]", "(ib)", "fé"])
def test_a_constraint_slurm_takes_is_read_as_given(constraint):
    # verdicts of real Slurm 22.05 on these forms: tests/test_constraint_slurm_live.py
    assert parse_sacct(WITH_CONSTRAINT.format(constraint), "t.txt").jobs[0].constraint == constraint
    assert parse_sacct_json(json_with_constraint(constraint)).jobs[0].constraint == constraint


@pytest.mark.parametrize("constraint, why", [
    ("ib& k80", "the feature name ' k80' holds a blank or a control character"),     # no longer read as ib&k80
    ("i b", "the feature name 'i b' holds a blank or a control character"),
    ("ib&&k80", "an operator with no feature name before it ('&' at 4)"),
    ("[ib&k80]", "in brackets, features joined by '&' need a count each and those joined by '|' none"),
    ("ib*0", "a count that is not a whole number above 0 ('*' at 3)"),
    ("(ib", "unbalanced parentheses")])
def test_a_constraint_slurm_refuses_skips_the_record_naming_line_and_field(constraint, why):
    text = WITH_CONSTRAINT.format(constraint)
    result = parse_sacct(text, "t.txt")
    assert result.jobs == [] and result.skipped == {"bad field Constraints": 1}
    with pytest.raises(InputError) as error:
        parse_sacct(text, "t.txt", strict=True)
    assert str(error.value) == (f"t.txt:2: field Constraints: Slurm 22.05 refuses the constraint {constraint!r}: {why} "
                                "(strict mode: the record would be skipped as 'bad field Constraints')")
    assert parse_sacct_json(json_with_constraint(constraint)).skipped == {"bad field constraints": 1}


def test_parsable_trailing_delimiter_and_repeated_header():
    text = f"{HEADER}|\n{ROW}|\n{HEADER}|\n{ROW.replace('42|', '43|', 1)}|\n"
    result = parse_sacct(text, "p.txt")
    assert [j.job_id for j in result.jobs] == ["42", "43"] and result.records_read == 2


def test_columns_argument_for_headerless_export(tmp_path):
    path = tmp_path / "noheader.txt"
    path.write_text(ROW + "\n")
    with pytest.raises(InputError, match="no header line"):
        read_trace(str(path), "sacct")
    result = read_trace(str(path), "sacct", columns=HEADER.lower().split("|"))
    assert result.jobs[0].gpus_per_node == 2.0


def test_columns_that_disagree_with_the_header(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(f"{HEADER}\n{ROW}\n")
    with pytest.raises(InputError, match=r"h.txt:1: the header line names columns"):
        read_trace(str(path), columns=["JobID", "Submit"])


def test_missing_required_column():
    with pytest.raises(InputError, match=r"x.txt:1: field Submit: .*no Submit column"):
        parse_sacct("JobID|State|Elapsed|NCPUS\n1|COMPLETED|00:01:00|1\n", "x.txt")


def test_runtime_from_start_end_and_unlimited():
    text = ("JobID|Submit|Start|End|Elapsed|State|NCPUS|Timelimit\n"
            "1|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T00:01:10||COMPLETED|2|UNLIMITED\n")
    result = parse_sacct(text, "u.txt")
    assert result.jobs[0].runtime_s == 60.0 and result.jobs[0].requested_time_s == 60.0
    assert result.adjusted == {"runtime from End - Start (no Elapsed)": 1, "requested time UNLIMITED: runtime used": 1}


def test_strict_mode_names_line_and_field(shared_data):
    path = str(sacct(shared_data, "xdmod-phillips.log"))
    with pytest.raises(InputError) as info:
        read_trace(path, strict=True)
    assert (info.value.line, info.value.field) == (3, "ReqMem")     # the first 2147486648Mn line
    aws = str(sacct(shared_data, "aws-hpccostsim-sacct-output-v2.txt"))
    with pytest.raises(InputError, match=r"aws-hpccostsim-sacct-output-v2.txt:1: field Timelimit: there is no "
                                         r"Timelimit column; .*strict mode"):
        read_trace(aws, strict=True)
    with pytest.raises(InputError, match=r"s.txt:2: field JobID: '7.batch' is a step .*--allocations"):
        parse_sacct(HEADER + "\n7.batch" + ROW[2:] + "\n", "s.txt", strict=True)


# -- sacct --json (hand-made fixtures in the shape of Slurm 22.05 and 24.05 output) ---------------
def test_json_v0038():
    result = read_trace(str(TEST_DATA / "sacct-json-v0.0.38.json"))
    assert result.format == "sacct-json" and result.records_read == 4
    assert result.skipped == {"state PENDING (never started)": 1, "never ran (0 nodes allocated)": 1}
    assert result.adjusted == {"requested time UNLIMITED: runtime used": 1}   # limit 4294967295 = INFINITE
    first, array = result.jobs
    assert (first.job_id, first.cpus, first.nodes, first.gpus_per_node, first.gpu_model) == ("101", 4, 1, 2.0, "a100")
    assert (first.runtime_s, first.requested_time_s, first.memory_mb_per_node) == (1800.0, 3600.0, 16000.0)
    assert first.source_line == 19                              # the line where the job's object opens
    assert array.job_id == "102_3" and array.memory_mb_per_node == 2000 * 8   # bit 63 + 2000 per CPU, 8 CPUs/node


def test_json_v0040():
    result = read_trace(str(TEST_DATA / "sacct-json-v0.0.40.json"))
    assert result.skipped == {"state RUNNING (not finished)": 1}
    assert result.adjusted == {"requested time UNLIMITED: runtime used": 1}   # {"infinite": true}
    jobs = {j.job_id: j for j in result.jobs}
    assert set(jobs) == {"201", "200_7", "204"}
    big = jobs["201"]
    assert (big.cpus, big.nodes, big.gpus_per_node, big.gpu_model, big.memory_mb_per_node) == (32, 2, 4.0, "h100", 64000.0)
    assert big.requested_time_s == 7200.0 and big.runtime_s == 3540.0
    assert jobs["200_7"].memory_mb_per_node == 16000.0 and jobs["200_7"].state == "TIMEOUT"


def test_json_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": [\n  {"job_id": 1,}\n]}\n')
    with pytest.raises(InputError, match=r"bad.json:2: not valid JSON"):
        read_trace(str(bad))
    garbage = '{"jobs": [{"job_id": 7, "state": {"current": "COMPLETED"}, "time": {"submission": "soon"}}]}'
    result = parse_sacct_json(garbage, "g.json")
    assert result.skipped == {"bad field time.submission": 1}
    with pytest.raises(InputError, match=r"g.json:1: field time.submission: jobs\[0\]: time.submission is 'soon'"):
        parse_sacct_json(garbage, "g.json", strict=True)
