"""Output files carry their schema version, and docs/outputs.md documents every column and key they hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from greenslurm.cli import main
from greenslurm.sim.reporting.outputs import (FILE_SCHEMAS, JOB_COLUMNS, JOBS_SCHEMA, OUTPUTS_SCHEMA,
                                              PARQUET_SCHEMA_KEY, SUMMARY_SCHEMA)
from greenslurm.sim.studies.deadline_compare import COLUMNS as COMPARE_COLUMNS
from greenslurm.sim.studies.inflate import COLUMNS as INFLATE_COLUMNS

DOC = Path(__file__).resolve().parents[1] / "docs" / "outputs.md"


def section(heading: str) -> str:
    """The text of the section of docs/outputs.md whose heading begins with ``heading``."""
    text = DOC.read_text()
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def table_names(text: str) -> set[str]:
    """The names in the first cell of each table row (``| `a`, `b` | ...`` gives a and b)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


@pytest.fixture(scope="module")
def power_run(tmp_path_factory) -> Path:
    """The demo with node power states and consolidation: every file replay --out writes."""
    out = tmp_path_factory.mktemp("power") / "out"
    assert main(["demo", "--queue", "fcfs", "--power-down-after", "600", "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def deadline_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("deadline")
    assert main(["demo", "--acceptance", "greedy", "--slack-mean", "1", "--renewable", "solar",
                 "--out", str(out / "out"), "--json", str(out / "s.json"), "--no-progress"]) == 0
    return out


def test_every_file_names_its_schema_version(power_run):
    schema = json.loads((power_run / "schema.json").read_text())
    assert schema["schema_version"] == OUTPUTS_SCHEMA
    written = sorted(p.name for p in power_run.iterdir() if p.name != "schema.json")
    assert written == ["jobs.csv", "jobs.parquet", "moves.csv", "phases.csv", "power.csv", "summary.json"]
    assert sorted(schema["files"]) == written
    for name, entry in schema["files"].items():
        assert entry["schema_version"] == FILE_SCHEMAS[name][0]
        if name.endswith(".csv"):
            # schema.json's columns are the CSV's header, in order, each with a unit and a meaning
            header = (power_run / name).read_text().splitlines()[0].split(",")
            assert [c["name"] for c in entry["columns"] if c["name"] != "supply_w"] == header, name
            assert all(c["meaning"] for c in entry["columns"])
    assert json.loads((power_run / "summary.json").read_text())["schema_version"] == SUMMARY_SCHEMA
    parquet = pq.read_schema(power_run / "jobs.parquet")
    assert parquet.metadata[PARQUET_SCHEMA_KEY] == JOBS_SCHEMA.encode()
    assert list(pd.read_parquet(power_run / "jobs.parquet").columns) == list(JOB_COLUMNS)


def test_the_json_summary_is_summary_json(deadline_run):
    summary = json.loads((deadline_run / "out" / "summary.json").read_text())
    assert json.loads((deadline_run / "s.json").read_text()) == summary
    assert summary["schema_version"] == SUMMARY_SCHEMA


@pytest.mark.parametrize("heading, name", [("jobs.csv", "jobs.csv"), ("power.csv", "power.csv"),
                                           ("phases.csv", "phases.csv"), ("phases.csv", "moves.csv")])
def test_every_column_written_is_documented(heading, name):
    documented = table_names(section(heading))
    columns = [c.name for c in FILE_SCHEMAS[name][1]]
    assert columns and not set(columns) - documented, set(columns) - documented


def test_every_column_in_the_files_is_documented(power_run):
    for name in ("jobs.csv", "power.csv", "phases.csv", "moves.csv"):
        header = (power_run / name).read_text().splitlines()[0].split(",")
        assert set(header) <= {c.name for c in FILE_SCHEMAS[name][1]}, name


def test_every_summary_key_is_documented(power_run, deadline_run):
    documented = table_names(section("summary.json"))
    for folder in (power_run, deadline_run / "out"):
        summary = json.loads((folder / "summary.json").read_text())
        assert not set(summary) - documented, set(summary) - documented
        for table in ("admission", "power_states"):
            assert not set(summary.get(table, {})) - documented, (table, set(summary[table]) - documented)
    assert {"admission", "power_states"} <= set(json.loads((power_run / "summary.json").read_text())) | set(
        json.loads((deadline_run / "out" / "summary.json").read_text()))


def test_the_figures_rows_and_study_tables_are_documented():
    import greenslurm
    rows = greenslurm.compare(queue=["easy", "fcfs"], power_states={"suspend_after_s": 600.0}, renewable="solar",
                              limit=200).table
    documented = table_names(section("summary.json")) | table_names(section("Figures rows"))
    assert not set(rows.columns) - documented - {"policy", "queue"}, set(rows.columns) - documented
    assert not set(COMPARE_COLUMNS) - table_names(section("compare --csv"))
    assert not set(INFLATE_COLUMNS) - table_names(section("inflate --csv"))


def test_report_reads_old_and_new_folders(power_run, tmp_path):
    assert main(["report", str(power_run)]) == 0
    # a folder from before the versions: no schema.json, no schema_version
    old = tmp_path / "old"
    old.mkdir()
    for path in power_run.iterdir():
        if path.name == "summary.json":
            data = json.loads(path.read_text())
            del data["schema_version"]
            (old / path.name).write_text(json.dumps(data))
        elif path.name != "schema.json":
            (old / path.name).write_bytes(path.read_bytes())
    assert main(["report", str(old)]) == 0
