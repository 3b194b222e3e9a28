"""Bad input never gives a traceback: an InputError names the file, and the line and field when known.

Without strict mode a bad record is skipped (or kept and adjusted) and counted by reason.
"""

from __future__ import annotations

import gzip

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.clustermodel.errors import InputError
from greenslurm.traces import FORMATS, detect_format, read_trace
from greenslurm.traces.alibaba import parse_pods
from greenslurm.traces.sacct import parse_sacct
from greenslurm.traces.sacct_json import parse_sacct_json

SWF_OK = "1 0 5 100 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1"
SACCT_HEADER = "JobID|Submit|Start|End|Elapsed|State|NCPUS|NNodes|ReqMem|Timelimit"
SACCT_OK = "7|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|COMPLETED|4|1|4000Mn|01:00:00"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
POD_OK = "p0,1000,1024,0,0,,BE,Running,0,10,0"
EXTENSION = {"swf": "swf", "sacct": "txt", "sacct-json": "json", "alibaba": "csv"}


def write(tmp_path, name, content) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


# -- the file itself --------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [None, *FORMATS])
def test_missing_file(tmp_path, fmt):
    path = str(tmp_path / "nope.swf")
    with pytest.raises(InputError, match=f"^{path}: no such file$"):
        read_trace(path, fmt)


@pytest.mark.parametrize("fmt", [None, *FORMATS])
def test_directory(tmp_path, fmt):
    with pytest.raises(InputError, match=f"^{tmp_path}: is a directory, not a trace file$"):
        read_trace(str(tmp_path), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_and_blank_files(tmp_path, fmt):
    empty = write(tmp_path, f"empty.{EXTENSION[fmt]}", b"")
    blank = write(tmp_path, f"blank.{EXTENSION[fmt]}", "\n  \n\t\n")
    for path, message in ((empty, "empty file"), (blank, "file holds only white space")):
        for given_fmt in (None, fmt):
            with pytest.raises(InputError, match=f"^{path}: {message}$"):
                read_trace(path, given_fmt)


@pytest.mark.parametrize("fmt, text", [
    ("swf", "; Version: 2.2\n; MaxNodes: 4\n;\n"),
    ("sacct", "# only a comment\n\n"),
    ("sacct", SACCT_HEADER + "\n"),
    ("sacct-json", '{"jobs": []}'),
    ("alibaba", POD_HEADER + "\n"),
])
def test_no_records(tmp_path, fmt, text):
    path = write(tmp_path, f"norecords.{EXTENSION[fmt]}", text)
    with pytest.raises(InputError, match=f"^{path}: no job records found"):
        read_trace(path, fmt)


@pytest.mark.parametrize("fmt", [None, *FORMATS])
def test_binary_junk(tmp_path, fmt):
    path = write(tmp_path, "junk.swf", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00")
    with pytest.raises(InputError, match=f"^{path}:3: binary data \\(NUL byte\\)"):
        read_trace(path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_not_utf8_names_the_line(tmp_path, fmt):
    path = write(tmp_path, "latin1.txt", "first line\nsecond\nd\xe9j\xe0 vu\n".encode("latin-1"))
    with pytest.raises(InputError, match=f"^{path}:3: not UTF-8 text \\(byte 0xe9 at column 2\\)$"):
        read_trace(path, fmt)


def test_undetectable_format(tmp_path):
    path = write(tmp_path, "notes.txt", "hello, this is not a trace\n")
    with pytest.raises(InputError, match=f"^{path}: field format: cannot tell the trace format"):
        read_trace(path)
    junk = write(tmp_path, "junk.dat", bytes(range(128, 256)) * 3)
    with pytest.raises(InputError, match="cannot tell the trace format"):
        detect_format(junk)


@pytest.mark.parametrize("name, text, fmt", [
    ("a.log", f"{SACCT_HEADER}\n{SACCT_OK}\n", "sacct"),
    ("a.out", f"; Note: x\n{SWF_OK}\n", "swf"),
    ("a.data", f"{SWF_OK}\n", "swf"),
    ("a.SWF", f"{SWF_OK}\n", "swf"),
    # mtime=0: gzip's header stamps the time otherwise, and the test's id (made from these bytes) would
    # differ between two collections (pytest-xdist's workers each collect and must agree)
    ("pods.csv.gz", gzip.compress(f"{POD_HEADER}\n{POD_OK}\n".encode(), mtime=0), "alibaba"),
    ("sacct.dump", '{\n"jobs": []}', "sacct-json"),
])
def test_detect_format(tmp_path, name, text, fmt):
    assert detect_format(write(tmp_path, name, text)) == fmt


def test_unknown_format_name_and_misplaced_columns(tmp_path):
    path = write(tmp_path, "a.swf", SWF_OK + "\n")
    with pytest.raises(InputError, match=f"^{path}: field format: unknown trace format 'pbs'"):
        read_trace(path, "pbs")
    with pytest.raises(InputError, match="columns= only applies to sacct"):
        read_trace(path, columns=["JobID"])


def test_corrupt_gzip(tmp_path):
    data = gzip.compress(((SWF_OK + "\n") * 200).encode())
    path = write(tmp_path, "cut.swf.gz", data[: len(data) // 2])
    with pytest.raises(InputError, match=f"^{path}: gzip data is corrupt or truncated$"):
        read_trace(path)


# -- bad records: (file text, skip reason, 1-based line, field) ------------------------------------
BAD_RECORDS = [
    # truncated lines
    ("swf", f"{SWF_OK}\n1 10 5 100 4 -1 -1 4\n", "wrong field count", 2, None),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK}\n8|2024-01-01T00:00:00|2024-01-01T00:0\n", "wrong field count", 3, None),
    ("alibaba", f"{POD_HEADER}\n{POD_OK}\np1,1000,1024,0\n", "wrong field count", 3, None),
    # too many fields
    ("swf", f"{SWF_OK}\n{SWF_OK} 7\n", "wrong field count", 2, None),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK}\n{SACCT_OK}|extra\n", "wrong field count", 3, None),
    # garbage numbers and dates
    ("swf", f"{SWF_OK}\n2 x 5 100 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1\n", "bad field submit_time", 2, "submit_time"),
    ("swf", f"{SWF_OK}\n2 10 5 1e999 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1\n", "bad field run_time", 2, "run_time"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('2024-01-01T00:00:00', '2024-02-30T00:00:00')}\n",
     "bad field Submit", 2, "Submit"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('00:10:00', '10 minutes')}\n", "bad field Elapsed", 2, "Elapsed"),
    # (1:99:00 is not bad: Slurm's time_str2secs reads it as 1 h 99 min; four fields are)
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('01:00:00', '1:99:00:00')}\n", "bad field Timelimit", 2, "Timelimit"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('|7|', '|7x|').replace('7|2024', '7x|2024', 1)}\n",
     "bad field JobID", 2, "JobID"),
    # negative sizes
    ("swf", f"{SWF_OK}\n2 10 5 -5 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1\n", "bad field run_time", 2, "run_time"),
    ("swf", f"{SWF_OK}\n2 10 5 100 4 -1 -1 -8 200 -1 1 3 -1 -1 -1 -1 -1 -1\n", "bad field requested_procs", 2,
     "requested_procs"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('|4|1|', '|-4|1|')}\n", "bad field NCPUS", 2, "NCPUS"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('4000Mn', '-4000Mn')}\n", "bad field ReqMem", 2, "ReqMem"),
    ("alibaba", f"{POD_HEADER}\n{POD_OK}\np1,-1000,1024,0,0,,BE,Running,0,10,0\n", "bad field cpu_milli", 3,
     "cpu_milli"),
    # unknown values
    ("swf", f"{SWF_OK}\n2 10 5 -1 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1\n", "runtime unknown", 2, "run_time"),
    ("swf", f"{SWF_OK}\n2 -1 5 10 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1\n", "submit time unknown", 2, "submit_time"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('COMPLETED', 'FOO')}\n", "unknown state", 2, "State"),
    ("sacct", f"{SACCT_HEADER}\n{SACCT_OK.replace('2024-01-01T00:01:00', 'None')}\n",
     "never started (Start Unknown/None)", 2, "Start"),
]


@pytest.mark.parametrize("fmt, text, reason, line, field", BAD_RECORDS)
def test_bad_record_skipped_and_counted(tmp_path, fmt, text, reason, line, field):
    path = write(tmp_path, f"bad.{EXTENSION[fmt]}", text)
    result = read_trace(path, fmt)
    assert result.skipped == {reason: 1}
    assert result.records_read == len(result.jobs) + 1
    assert result.examples[reason].startswith(f"{path}:{line}: " + (f"field {field}: " if field else ""))


@pytest.mark.parametrize("fmt, text, reason, line, field", BAD_RECORDS)
def test_bad_record_in_strict_mode(tmp_path, fmt, text, reason, line, field):
    if fmt == "alibaba":   # every timed pod is adjusted (no time limits in the trace): put the bad row first
        head, good, bad = text.rstrip("\n").split("\n")
        text = f"{head}\n{bad}\n{good}\n"
        line = 2
    path = write(tmp_path, f"bad.{EXTENSION[fmt]}", text)
    with pytest.raises(InputError) as info:
        read_trace(path, fmt, strict=True)
    error = info.value
    assert (error.path, error.line, error.field) == (path, line, field)
    assert str(error).startswith(f"{path}:{line}: " + (f"field {field}: " if field else ""))
    assert f"would be skipped as {reason!r}" in str(error)


def test_json_structure_errors(tmp_path):
    cases = {
        "[1, 2]": 'expected an object with a "jobs" list',
        '{"jobs": {}}': 'expected an object with a "jobs" list',
        "[" * 100000 + "]" * 100000: "nested too deeply",
        '{"jobs": [}': "not valid JSON",
    }
    for text, message in cases.items():
        path = write(tmp_path, "x.json", text)
        with pytest.raises(InputError, match=message):
            read_trace(path)
    weird = ('{"jobs": [1, {"job_id": 1e400}, {"job_id": 2, "state": {"current": "COMPLETED"}, '
             '"time": {"submission": NaN}}, {"job_id": 3, "state": {"current": ["COMPLETED"]}, '
             '"time": {"submission": 10, "start": 20, "end": 30, "elapsed": 10}, "required": {"CPUs": 99999999999999999999999}}]}')
    result = parse_sacct_json(weird, "w.json")
    assert result.skipped == {"bad field jobs[]": 1, "bad field job_id": 1, "bad field time.submission": 1,
                              "bad field required.CPUs": 1}


# -- any garbage: only InputError ----------------------------------------------------------------
def assert_one_line_naming(exc: InputError, path: str) -> None:
    """A reader's refusal is one line that names the file."""
    message = str(exc)
    assert path in message and "\n" not in message, message


def assert_kept_and_skipped_add_up(result) -> None:
    """Nothing silently dropped: every record read is a job or a counted skip (an sacct array range
    gives one job per task, counted as adjusted), and every job can be physical."""
    counted = len(result.jobs) + sum(result.skipped.values())
    if "array range expanded" in result.adjusted:
        assert counted >= result.records_read          # a range record gave a job per task
    else:
        assert counted == result.records_read
    assert all(job.runtime_s >= 0 and job.cpus >= 1 and job.requested_time_s > 0 for job in result.jobs)


text_lines = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)
sacct_like = st.lists(st.sampled_from(["7", "7.batch", "7_[1-3]", "7_2", "COMPLETED", "CANCELLED by 3", "PENDING",
                                       "2024-01-01T00:00:00", "Unknown", "None", "00:10:00", "1-00:00:00",
                                       "UNLIMITED", "4000Mn", "2147486648Mn", "3Gc", "gres/gpu:a100=2,node=1",
                                       "-1", "0", "", "x", "9" * 40]),
                      min_size=9, max_size=11).map("|".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.one_of(text_lines, sacct_like), min_size=1, max_size=6), strict=st.booleans(),
       header=st.booleans())
def test_sacct_garbage_only_input_error(lines, strict, header):
    text = ("JobID|State|Submit|Start|End|Elapsed|Timelimit|ReqMem|AllocTRES|NCPUS|NNodes\n" if header else "")
    try:
        result = parse_sacct(text + "\n".join(lines) + "\n", "g.txt", strict=strict)
    except InputError:
        return
    assert result.records_read >= sum(result.skipped.values())


@settings(max_examples=120, deadline=None)
@given(lines=st.lists(st.one_of(text_lines, st.lists(st.sampled_from(["p", "1000", "-1", "", "nan", "1e9", "x",
                                                                       "T4|P100", "0", "1500"]),
                                                      min_size=9, max_size=12).map(",".join)),
                      min_size=1, max_size=6), strict=st.booleans())
def test_pods_garbage_only_input_error(lines, strict):
    try:
        result = parse_pods(POD_HEADER + "\n" + "\n".join(lines) + "\n", "g.csv", strict=strict)
    except InputError as exc:
        assert_one_line_naming(exc, "g.csv")
        return
    assert_kept_and_skipped_add_up(result)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.sampled_from(["job_id", "time", "submission", "start", "end", "elapsed", "limit",
                                                "state", "current", "required", "CPUs", "tres", "allocated",
                                                "type", "count", "name", "set", "number", "infinite",
                                                "allocation_nodes", "array", "task_id", "memory"]), inner, max_size=5),
                           max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(jobs=st.lists(json_values, min_size=1, max_size=4), strict=st.booleans())
def test_json_garbage_only_input_error(jobs, strict):
    import json
    try:
        result = parse_sacct_json(json.dumps({"jobs": jobs}), "g.json", strict=strict)
    except InputError as exc:
        assert_one_line_naming(exc, "g.json")
        return
    assert_kept_and_skipped_add_up(result)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), fmt=st.sampled_from([None, *FORMATS]))
def test_random_bytes_only_input_error(tmp_path, data, fmt):
    path = write(tmp_path, "random.bin", data)
    try:
        result = read_trace(path, fmt)
    except InputError as exc:
        assert_one_line_naming(exc, str(path))
        return
    assert_kept_and_skipped_add_up(result)
