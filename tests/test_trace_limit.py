"""``--limit N`` reads the file's first N jobs and stops there, for every trace format.

The rule (greenslurm.traces.base.read_trace): the reader reads in file order and stops after the
record that brings the jobs it keeps to N; the counts are those of the lines up to that record,
exactly what a full read of the file cut after it gives; on a file in submit order the jobs are the
first N of the whole read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.traces import read_trace, swf

GOOD = "{id} {submit} -1 100 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1"


def swf_file(tmp_path: Path, lines: list[str], name: str = "t.swf") -> Path:
    path = tmp_path / name
    path.write_text("; MaxProcs: 8\n" + "\n".join(lines) + "\n")
    return path


def account(trace):
    return (trace.records_read, dict(trace.skipped), dict(trace.adjusted), trace.examples)


def test_swf_a_bad_line_after_the_limit_is_not_read(tmp_path):
    # line 1 header; lines 2-4 good jobs; line 5 has 3 fields; line 6 a good job
    path = swf_file(tmp_path, [GOOD.format(id=1, submit=0), GOOD.format(id=2, submit=5), GOOD.format(id=3, submit=9),
                               "7 8 9", GOOD.format(id=4, submit=12)])
    three = read_trace(path, limit=3)
    assert [j.job_id for j in three.jobs] == ["1", "2", "3"]
    assert account(three) == (3, {}, {}, {})
    four = read_trace(path, limit=4)          # reads on past line 5: it is counted and reported
    assert [j.job_id for j in four.jobs] == ["1", "2", "3", "4"]
    assert four.records_read == 5 and dict(four.skipped) == {"wrong field count": 1}
    assert four.examples["wrong field count"].startswith(f"{path}:5:")
    # strict mode fails at line 5 only when the read gets there
    assert len(read_trace(path, strict=True, limit=3).jobs) == 3
    with pytest.raises(Exception, match=":5:"):
        read_trace(path, strict=True, limit=4)


def test_swf_a_refused_record_keeps_no_job(tmp_path):
    # line 3: a run time of 1e300 s, refused as beyond 10 years: limit 2 reads through line 4
    path = swf_file(tmp_path, [GOOD.format(id=1, submit=0), GOOD.format(id=2, submit=1).replace(" 100 ", " 1e300 "),
                               GOOD.format(id=3, submit=2), GOOD.format(id=4, submit=3)])
    two = read_trace(path, limit=2)
    assert [j.job_id for j in two.jobs] == ["1", "3"]
    assert two.records_read == 3 and dict(two.skipped) == {"runtime beyond 10 years": 1}


def test_swf_out_of_order_keeps_the_files_first_jobs_sorted(tmp_path):
    # submits 30, 10, 20: the first two of the file are 30 and 10, replayed as 10 then 30 (the whole
    # read's two earliest would be 10 and 20)
    path = swf_file(tmp_path, [GOOD.format(id=1, submit=30), GOOD.format(id=2, submit=10), GOOD.format(id=3, submit=20)])
    assert [j.submit_s for j in read_trace(path, limit=2).jobs] == [10.0, 30.0]
    assert [j.submit_s for j in read_trace(path).jobs][:2] == [10.0, 20.0]


SACCT_HEADER = "JobID|Submit|Start|End|Elapsed|State|NCPUS|NNodes|Timelimit"
SACCT_JOB = "{id}|2024-01-01T00:00:0{s}|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|COMPLETED|4|1|01:00:00"


def test_sacct_an_array_range_gives_only_the_tasks_needed_and_stops(tmp_path):
    # line 2: job 7; line 3: array range 8_[1-3] (three tasks); line 4: a bad field count
    path = tmp_path / "t.txt"
    path.write_text("\n".join([SACCT_HEADER, SACCT_JOB.format(id=7, s=1), SACCT_JOB.format(id="8_[1-3]", s=2),
                               "9|x"]) + "\n")
    three = read_trace(path, "sacct", limit=3)     # job 7 and tasks 8_1, 8_2
    assert [j.job_id for j in three.jobs] == ["7", "8_1", "8_2"]
    assert three.records_read == 2 and dict(three.skipped) == {}
    assert dict(three.adjusted) == {"array range expanded": 1}
    five = read_trace(path, "sacct", limit=5)
    assert five.records_read == 3 and dict(five.skipped) == {"wrong field count": 1}


def test_pods_and_sacct_json_stop_at_the_limit(tmp_path):
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                    "deletion_time,scheduled_time\np0,1000,10,0,0,,LS,Running,100,400,110\n"
                    "p1,1000,10,0,0,,LS,Running,100,400,110\np2,bad\n")
    one = read_trace(pods, limit=2)
    assert [j.job_id for j in one.jobs] == ["p0", "p1"] and one.records_read == 2 and not one.skipped
    assert read_trace(pods, limit=3).skipped == {"wrong field count": 1}
    job = {"job_id": 5, "state": {"current": ["COMPLETED"]}, "required": {"CPUs": 2}, "allocation_nodes": 1,
           "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60, "limit": 2}}
    document = tmp_path / "s.json"
    document.write_text(json.dumps({"jobs": [job, dict(job, job_id=6), {"job_id": "x"}]}, indent=1))
    first = read_trace(document, limit=2)
    assert [j.job_id for j in first.jobs] == ["5", "6"] and first.records_read == 2 and not first.skipped
    assert sum(read_trace(document, limit=3).skipped.values()) == 1
    # a document cut short after its second job: --limit 2 never reads that far
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps({"jobs": [job, dict(job, job_id=6)]}, indent=1)[:-3] + ', {"job_id": 7, "sta')
    assert [j.job_id for j in read_trace(cut, limit=2).jobs] == ["5", "6"]
    with pytest.raises(Exception, match="not valid JSON"):
        read_trace(cut, limit=3)


# -- the rule on random files ----------------------------------------------------------------------
@st.composite
def swf_lines(draw):
    """SWF records, most good, some skipped (wrong field count, a bad job field, run time -1, a run
    time beyond 10 years), some adjusted (requested time unknown), comment lines between; in submit
    order or not."""
    count = draw(st.integers(1, 60))
    ordered = draw(st.booleans())
    lines, submit = [], 0
    for i in range(count):
        submit = submit + draw(st.integers(0, 5)) if ordered else draw(st.integers(0, 50))
        kind = draw(st.sampled_from(["good"] * 6 + ["fields", "bad", "unknown", "huge", "limit", "comment"]))
        line = GOOD.format(id=i + 1, submit=submit)
        if kind == "fields":
            line = " ".join(line.split()[:draw(st.integers(1, 17))])
        elif kind == "bad":
            line = line.replace(" 100 ", " x ", 1)
        elif kind == "unknown":
            line = line.replace(" 100 ", " -1 ", 1)
        elif kind == "huge":
            line = line.replace(" 100 ", " 1e300 ", 1)
        elif kind == "limit":
            line = line.replace(" 200 ", " -1 ", 1)
        elif kind == "comment":
            line = "; a note"
        lines.append(line)
    return lines, ordered


@settings(max_examples=150, deadline=None)
@given(case=swf_lines(), limit=st.integers(1, 70), piece=st.sampled_from([None, 40, 200]))
def test_swf_limit_is_a_read_of_the_file_cut_after_the_nth_job(tmp_path_factory, monkeypatch_module, case, limit,
                                                               piece):
    lines, ordered = case
    tmp = tmp_path_factory.mktemp("limit")
    path = swf_file(tmp, lines)
    if piece is not None:          # tiny pieces: the limit falls in a later piece, which is read again
        monkeypatch_module.setattr(swf, "FIRST_PIECE_BYTES", piece)
        monkeypatch_module.setattr("greenslurm.traces.source.PIECE_BYTES", piece * 4)
    try:
        full = read_trace(path)
    except Exception:              # no job record at all: the limited read says the same
        with pytest.raises(Exception):
            read_trace(path, limit=limit)
        return
    limited = read_trace(path, limit=limit)
    in_file_order = sorted(full.jobs, key=lambda job: job.source_line)
    kept = in_file_order[:limit]
    if ordered:
        assert list(limited.jobs) == list(full.jobs)[:limit]
    assert list(limited.jobs) == sorted(kept, key=lambda job: job.submit_s)
    if len(in_file_order) >= limit:      # the file cut after the limit-th job's line, read whole
        cut = kept[-1].source_line
        text = path.read_text().split("\n")
        (tmp / "cut").mkdir()
        short = tmp / "cut" / "t.swf"
        short.write_text("\n".join(text[:cut]) + "\n")
        examples = {reason: where.replace(str(short), str(path)) for reason, where in read_trace(short).examples.items()}
        assert account(limited) == (*account(read_trace(short))[:3], examples)
    else:
        assert account(limited) == account(full)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@st.composite
def sacct_lines(draw):
    """An sacct export with a header: jobs, steps (skipped), array ranges of 1-3 tasks, lines with a
    wrong field count, states that never ran, blank and comment lines; in submit order or not."""
    count = draw(st.integers(1, 40))
    ordered = draw(st.booleans())
    lines, second = [SACCT_HEADER], 0
    for i in range(count):
        second = min(second + draw(st.integers(0, 2)), 9) if ordered else draw(st.integers(0, 9))
        kind = draw(st.sampled_from(["job"] * 5 + ["step", "array", "fields", "pending", "blank"]))
        line = SACCT_JOB.format(id=i + 1, s=second)
        if kind == "step":
            line = SACCT_JOB.format(id=f"{i}.batch", s=second)
        elif kind == "array":
            line = SACCT_JOB.format(id=f"{i + 1}_[1-{draw(st.integers(1, 3))}]", s=second)
        elif kind == "fields":
            line = "|".join(line.split("|")[:draw(st.integers(1, 8))])
        elif kind == "pending":
            line = line.replace("COMPLETED", "PENDING")
        elif kind == "blank":
            line = draw(st.sampled_from(["", "# a note"]))
        lines.append(line)
    return lines, ordered


POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


@st.composite
def pod_lines(draw):
    """A pod list: pods, pods with a bad field, lines with a wrong field count, blank lines."""
    count = draw(st.integers(1, 40))
    ordered = draw(st.booleans())
    lines, created = [POD_HEADER], 0
    for i in range(count):
        created = created + draw(st.integers(0, 3)) if ordered else draw(st.integers(0, 30))
        kind = draw(st.sampled_from(["pod"] * 5 + ["bad", "fields", "blank"]))
        line = f"p{i},1000,10,0,0,,LS,Running,{created},{created + 50},{created + 5}"
        if kind == "bad":
            line = line.replace(",1000,", ",x,")
        elif kind == "fields":
            line = f"p{i},1"
        elif kind == "blank":
            line = ""
        lines.append(line)
    return lines, ordered


def full_and_cut_reads(tmp: Path, name: str, fmt: str, lines: list[str], limit: int):
    """(the limited read, the full read, the full read of the file cut after the limit-th job's line
    with its examples' paths as the file's; None when the whole file holds no more jobs)."""
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    full = read_trace(path, fmt)
    limited = read_trace(path, fmt, limit=limit)
    in_file_order = sorted(full.jobs, key=lambda job: job.source_line)    # stable: array tasks in order
    if len(in_file_order) < limit:
        return limited, full, in_file_order, None
    (tmp / "cut").mkdir()
    short = tmp / "cut" / name
    short.write_text("\n".join(lines[:in_file_order[limit - 1].source_line]) + "\n")
    cut = read_trace(short, fmt)
    cut.examples = {reason: where.replace(str(short), str(path)) for reason, where in cut.examples.items()}
    return limited, full, in_file_order, cut


@pytest.mark.parametrize("fmt, name, lines", [("sacct", "t.txt", sacct_lines()), ("alibaba", "pods.csv", pod_lines())])
@settings(max_examples=80, deadline=None)
@given(data=st.data(), limit=st.integers(1, 50))
def test_limit_is_a_read_of_the_file_cut_after_the_nth_job(tmp_path_factory, fmt, name, lines, data, limit):
    text, ordered = data.draw(lines)
    tmp = tmp_path_factory.mktemp("limit")
    try:
        read_trace(_write(tmp / "probe", name, text), fmt)
    except Exception:              # no job record at all: the limited read says the same
        with pytest.raises(Exception):
            read_trace(tmp / "probe" / name, fmt, limit=limit)
        return
    limited, full, in_file_order, cut = full_and_cut_reads(tmp, name, fmt, text, limit)
    kept = in_file_order[:limit]
    if ordered:
        assert list(limited.jobs) == list(full.jobs)[:limit]
    assert list(limited.jobs) == sorted(kept, key=lambda job: job.submit_s)
    if cut is not None:
        # the cut file ends with the record of the limit-th job: an array range there may give more
        assert account(limited) == account(cut)
        assert len(cut.jobs) >= limit
    else:
        assert account(limited) == account(full)


def _write(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n")
    return folder / name


@st.composite
def sacct_json_documents(draw):
    """sacct --json documents: meta before or after the jobs, jobs good or skipped (a bad id, never
    started, a NO_VAL time limit), pretty or compact, with escapes."""
    jobs = []
    for i in range(draw(st.integers(0, 12))):
        job = {"job_id": 100 + i, "state": {"current": ["COMPLETED"]}, "required": {"CPUs": draw(st.integers(1, 4))},
               "allocation_nodes": 1, "user": draw(st.sampled_from(["ann", "b\u00e9a", "c\\\"d"])),
               "time": {"submission": draw(st.integers(1, 500)), "start": 600, "end": 660, "elapsed": 60,
                        "limit": draw(st.sampled_from([2, 4294967295]))}}
        kind = draw(st.sampled_from(["good"] * 4 + ["id", "start"]))
        if kind == "id":
            job["job_id"] = "x"
        elif kind == "start":
            job["time"]["start"] = 0
        jobs.append(job)
    document = {"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "jobs": jobs}
    if draw(st.booleans()):
        document = {"jobs": jobs, "meta": {"plugin": {}}, "warnings": []}
    return json.dumps(document, indent=draw(st.sampled_from([None, 1, 2])), ensure_ascii=draw(st.booleans()))


@settings(max_examples=100, deadline=None)
@given(text=sacct_json_documents(), limit=st.integers(1, 14), piece=st.sampled_from([None, 30, 100]))
def test_sacct_json_streamed_limit_is_the_whole_parse_cut(tmp_path_factory, monkeypatch_module, text, limit, piece):
    """Read a piece at a time (pieces of 30 bytes: elements split across them), the first jobs are
    those and the counts those of the whole document parsed and taken job by job to the limit."""
    from greenslurm.traces import sacct_json
    path = tmp_path_factory.mktemp("json") / "s.json"
    path.write_text(text)
    if piece is not None:
        monkeypatch_module.setattr(sacct_json, "FIRST_PIECE_BYTES", piece)
        monkeypatch_module.setattr("greenslurm.traces.source.PIECE_BYTES", piece * 2)
    try:
        whole = sacct_json.parse_sacct_json(text, str(path), limit=limit)
    except Exception as exc:       # no job at all: the streamed read says the same
        with pytest.raises(type(exc)):
            read_trace(path, limit=limit)
        return
    streamed = read_trace(path, limit=limit)
    assert list(streamed.jobs) == list(whole.jobs)
    assert account(streamed) == account(whole)
