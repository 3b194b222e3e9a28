"""replay --out against what the pandas path wrote: the CSV files byte for byte (digests of the files
the code before the Parquet writer wrote), and jobs.parquet read back equal to the table pyarrow
made from the pandas jobs table (built here with pandas, as that code built it)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.cli import main
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.accounting.result import JobColumns, JobRecord
from greenslurm.sim.reporting import outputs
from greenslurm.sim.reporting.outputs import JOB_COLUMNS, JOBS_SCHEMA, PARQUET_SCHEMA_KEY, write_outputs

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]

# sha256 (first 16 hex digits) of the files the pandas path wrote (commit be33c20), from /tmp:
#   greenslurm replay ARGS --no-progress --out OUT; sha256sum OUT/*.csv | cut -c1-16
# ("pods" is the last 500 openb pods on 12 of its G2 nodes with consolidation, as in
# tests/test_consolidation.py; "demo-power" is greenslurm demo --queue fcfs --power-down-after 600)
GOLDEN = {
    "kth-fcfs": ({"jobs.csv": "4d99ea08bb6e9e8a", "power.csv": "727f6ed95c726010"},),
    "kth-deadline-2000": ({"jobs.csv": "485c9e33f9b25b47", "power.csv": "e94dc2fa8d1cfe3c"},),
    "phillips": ({"jobs.csv": "9abf7087af8fe145", "power.csv": "10dab066d1f5d9ec"},),
    "openb-fgd": ({"jobs.csv": "5682ef8d88e4573d", "power.csv": "f11796e96bde56d4"},),
    "demo-power": ({"jobs.csv": "3c90e1ebee7425bb", "power.csv": "a55a32fa195d9280", "phases.csv": "a5516e54cf73daf0",
                    "moves.csv": "1281ee42380241bd"},),
    "pods-moves": ({"jobs.csv": "ba6a872d516c3847", "power.csv": "7eb27bac35248116", "phases.csv": "9daf23c0f802c167",
                    "moves.csv": "12dd4d5f866a9abb"},),
}


def argv_of(case: str, data, tmp_path) -> list[str]:
    kth = str(data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    gpu = data / "alibaba-gpu-2023"
    if case == "kth-fcfs":
        return ["replay", kth, "--queue", "fcfs"]
    if case == "kth-deadline-2000":
        return ["replay", kth, "--queue", "deadline", "--acceptance", "greedy", "--limit", "2000"]
    if case == "phillips":
        return ["replay", str(data / "sacct" / "xdmod-phillips.log"), "--cluster", str(ROOT / "bench" / "phillips-gpu.toml")]
    if case == "openb-fgd":
        return ["replay", str(gpu / "openb_pod_list_default.csv"), "--nodes", str(gpu / "openb_node_list_gpu_node.csv"),
                "--queue", "none", "--select", "fgd"]
    if case == "demo-power":
        return ["demo", "--queue", "fcfs", "--power-down-after", "600"]
    source = (gpu / "openb_node_list_gpu_node.csv").read_text().splitlines()
    (tmp_path / "nodes.csv").write_text("\n".join([source[0], *[l for l in source[1:] if l.endswith(",8,G2")][:12]]) + "\n")
    pods = (gpu / "openb_pod_list_default.csv").read_text().splitlines()
    (tmp_path / "pods.csv").write_text("\n".join([pods[0], *pods[-500:]]) + "\n")
    (tmp_path / "p.toml").write_text('[power_states]\nconsolidate_every_s = 60\nphase_layout = "banks"\n'
                                     'nodes_per_cabinet = 12\nimbalance_loss = 0.041\nboot_s = 60\n')
    return ["replay", str(tmp_path / "pods.csv"), "--nodes", str(tmp_path / "nodes.csv"), "--power-down-after", "1",
            "--power-config", str(tmp_path / "p.toml")]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_csv_files_are_the_bytes_the_pandas_path_wrote(case, shared_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(argv_of(case, shared_data, tmp_path) + ["--no-progress", "--out", str(out)]) == 0
    assert {name: digest(out / name) for name in GOLDEN[case][0]} == GOLDEN[case][0]
    # every file read back: jobs.parquet as jobs.csv
    jobs = pd.read_csv(out / "jobs.csv", keep_default_na=False, na_values=[""], dtype={"job_id": str, "user": str,
                                                                                         "partition": str,
                                                                                         "node_indices": str})
    table = pq.read_table(out / "jobs.parquet")
    assert table.column_names == list(JOB_COLUMNS) and table.num_rows == len(jobs)
    assert table.column("job_id").to_pylist() == jobs["job_id"].tolist()


# -- jobs.parquet against the pandas path -------------------------------------------------------------
def pandas_jobs_frame(columns) -> pd.DataFrame:
    """The jobs table as the code before built it, with pandas (sim/reporting/outputs.py at be33c20)."""
    records = columns.records()
    order = np.argsort(columns.submit_s, kind="stable")
    frame = pd.DataFrame({
        "job_id": [records[i].job_id for i in order], "user": [records[i].user for i in order],
        "partition": [records[i].partition for i in order]})
    submit, start, end = columns.submit_s[order], columns.start_s[order], columns.end_s[order]
    wait, run = start - submit, end - start
    with np.errstate(divide="ignore", invalid="ignore"):
        frame = frame.assign(submit_s=submit, start_s=start, end_s=end, wait_s=wait, run_s=run,
                             requested_time_s=columns.requested_time_s[order],
                             killed_at_limit=columns.killed_at_limit[order], nodes=columns.nodes[order],
                             cpus=columns.cpus[order], gpus=columns.gpus[order],
                             slowdown=np.where(run > 0, (wait + run) / run, np.nan),
                             bounded_slowdown=np.maximum(1.0, (wait + run) / np.maximum(run, 10.0)),
                             energy_j=columns.energy_j[order], deadline_s=columns.deadline_s[order],
                             deadline_missed=end > columns.deadline_s[order] + 1e-9,
                             node_indices=[" ".join(map(str, records[i].node_indices)) for i in order])
    return frame[list(JOB_COLUMNS)].astype({"job_id": str, "user": str, "partition": str, "node_indices": str,
                                            "killed_at_limit": bool, "deadline_missed": bool, "nodes": "int64"})


def assert_parquet_is_the_pandas_paths(path, frame: pd.DataFrame, tmp_path) -> None:
    theirs = tmp_path / "theirs.parquet"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, PARQUET_SCHEMA_KEY: JOBS_SCHEMA.encode()}),
                   theirs)
    ours, reference = pq.read_table(path), pq.read_table(theirs)
    assert ours.schema.equals(reference.schema, check_metadata=False), (ours.schema, reference.schema)
    assert ours.equals(reference)
    assert ours.schema.metadata[PARQUET_SCHEMA_KEY] == JOBS_SCHEMA.encode()
    assert json.loads(ours.schema.metadata[b"pandas"])["columns"] == json.loads(
        reference.schema.metadata[b"pandas"])["columns"]
    read, expected = pd.read_parquet(path), pd.read_parquet(theirs)
    assert list(read.dtypes) == list(expected.dtypes)
    pd.testing.assert_frame_equal(read, expected, check_exact=True)


def test_whole_kth_jobs_parquet_is_the_pandas_paths(shared_data, tmp_path):
    from greenslurm import scenario_run
    from greenslurm.scenario import Scenario
    scenario = Scenario.from_toml(f'queue = "easy"\n[trace]\npath = "{shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf"}"\n')
    inputs = scenario_run.load_inputs(scenario)
    result = scenario_run.build(scenario, inputs.jobs, inputs.cluster).run()
    paths = write_outputs(result, {}, tmp_path / "out")
    frame = pandas_jobs_frame(result.columns)
    assert len(frame) == 28475 and frame["slowdown"].isna().sum() > 0 and frame["deadline_s"].isna().all()
    assert_parquet_is_the_pandas_paths(paths["jobs_parquet"], frame, tmp_path)
    # and jobs.csv is that frame's to_csv, as the pandas path wrote it
    assert paths["jobs_csv"].read_bytes() == frame.to_csv(index=False, lineterminator="\n").encode()


CRAFTED = ['plain', 'a,b', 'say "hi"', 'two\nlines', 'cr\rhere', 'nul\x00byte', '', ' lead', 'é ü', '😀', '\u2028',
           'x' * 300, ',', '"', '\n']


def crafted_result():
    """Jobs whose ids, users and partitions hold the crafted strings, on 3 one-CPU nodes."""
    jobs = []
    for i, text in enumerate(CRAFTED):
        jobs.append(JobSpec(f"{text}#{i}", float(i), 10.0 + i, runtime_s=float(i % 4), cpus=1 + i % 3, user=text,
                            partition=CRAFTED[-1 - i]))
    return Replay(jobs, Cluster.homogeneous(3, cpus=1), "easy").run()


def test_crafted_strings_are_written_as_the_pandas_path_wrote_them(tmp_path):
    result = crafted_result()
    paths = write_outputs(result, {}, tmp_path / "out")
    frame = pandas_jobs_frame(result.columns)
    assert len(frame) == len(CRAFTED)
    assert_parquet_is_the_pandas_paths(paths["jobs_parquet"], frame, tmp_path)
    # the pandas path's bytes, but for a carriage return, now quoted like a line feed: left bare, it
    # ended the row for CSV readers
    before = frame.to_csv(index=False, lineterminator="\n")
    expected = before.replace("cr\rhere#4", "\x01").replace("cr\rhere", '"cr\rhere"').replace("\x01", '"cr\rhere#4"')
    assert expected.count('"cr\r') == 3 and paths["jobs_csv"].read_bytes() == expected.encode()
    read = pd.read_csv(paths["jobs_csv"], keep_default_na=False, dtype=str)
    for name in ("job_id", "user", "partition"):                      # quotes, commas, line breaks, NUL kept
        assert read[name].tolist() == frame[name].tolist()


def test_a_string_without_utf8_form_is_refused_not_written_half(tmp_path):
    # a lone surrogate (no trace reader gives one: they read UTF-8 or stop) has no UTF-8 bytes: the
    # writer stops on it, as the pandas path did
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=1.0, user="bad\udcff")]
    result = Replay(jobs, Cluster.homogeneous(1, cpus=1), "easy").run()
    with pytest.raises(UnicodeEncodeError):
        write_outputs(result, {}, tmp_path / "out")


def test_an_empty_replay_writes_headers_and_an_empty_table(tmp_path):
    result = Replay([], Cluster.homogeneous(2, cpus=1), "easy").run()
    paths = write_outputs(result, {}, tmp_path / "out")
    assert paths["jobs_csv"].read_text() == ",".join(JOB_COLUMNS) + "\n"
    frame = pandas_jobs_frame(result.columns)
    assert_parquet_is_the_pandas_paths(paths["jobs_parquet"], frame, tmp_path)


def test_same_replay_same_bytes(tmp_path):
    result = crafted_result()
    first = write_outputs(result, {"a": 1.0}, tmp_path / "1")
    second = write_outputs(result, {"a": 1.0}, tmp_path / "2")
    assert {k: p.read_bytes() for k, p in first.items()} == {k: p.read_bytes() for k, p in second.items()}


# -- any values, against the pandas path's rules ------------------------------------------------------
_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 5e-324, 1e16, 2.0 ** 53, 2.0 ** 53 + 2, 0.1 + 0.2, 9007199254740993.0, 1e22, math.nan, -math.inf])
_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8) | st.sampled_from(
    ["", "\x00", "a,b", 'say "hi"', "x\r\ny", "=1+2", "é"])


@st.composite
def job_records(draw) -> list[JobRecord]:
    """Up to 30 jobs of any float times, energies and deadlines (NaN, inf, -0.0, 2**53 + 2), any ids,
    users and partitions, and up to 5 nodes each."""
    jobs = []
    for _ in range(draw(st.integers(0, 30))):
        nodes = tuple(draw(st.lists(st.integers(0, 40), max_size=5)))
        times = [draw(_floats) for _ in range(7)]
        jobs.append(JobRecord(draw(_texts), *times[:4], len(nodes), *times[4:6], draw(st.booleans()), times[6], nodes,
                              draw(st.none() | _floats), draw(_texts), draw(_texts)))
    return jobs


def csv_module_text(frame: pd.DataFrame) -> str:
    """The frame as the pandas path wrote it (the csv module: floats as repr, NaN empty), a carriage
    return quoted like a line feed (a row written with the line end "\r\n", then given "\n")."""
    lines = []
    for row in [list(frame.columns), *frame.itertuples(index=False)]:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerow([None if isinstance(v, float) and math.isnan(v) else v
                                                             for v in row])
        lines.append(buffer.getvalue()[:-2] + "\n")
    return "".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=job_records(), chunk_rows=st.sampled_from([1, 2, 3, 16384]))
def test_any_jobs_are_written_as_the_pandas_path_wrote_them(jobs, chunk_rows, tmp_path, monkeypatch):
    # chunks of 1 to 3 rows: every row a chunk boundary (a float's text shared within a chunk only,
    # NaN levels of jobs.parquet a page at a time)
    monkeypatch.setattr(outputs, "CHUNK_ROWS", chunk_rows)
    columns = JobColumns.from_records(jobs)
    with np.errstate(all="ignore"):                    # inf - inf, x / 0 in the slowdowns
        frame = pandas_jobs_frame(columns)
        outputs.write_jobs_csv(columns, tmp_path / "jobs.csv")
        outputs.write_jobs_parquet(columns, tmp_path / "jobs.parquet")
        # replay --out writes both in one pass from the same cells: the same bytes
        outputs.write_jobs_files(columns, tmp_path / "one_pass.csv", tmp_path / "one_pass.parquet")
    assert (tmp_path / "jobs.csv").read_bytes().decode() == csv_module_text(frame)
    assert_parquet_is_the_pandas_paths(tmp_path / "jobs.parquet", frame, tmp_path)
    assert (tmp_path / "one_pass.csv").read_bytes() == (tmp_path / "jobs.csv").read_bytes()
    assert (tmp_path / "one_pass.parquet").read_bytes() == (tmp_path / "jobs.parquet").read_bytes()
