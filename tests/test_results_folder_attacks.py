"""What greenslurm writes into a results folder and reads back from one, attacked as a user on a shared
machine would meet it: a folder holding links planted by another user, pipes named like an output,
a summary.json or jobs.csv edited, cut short or made by hand.  Through the real command line (the
entry point, in a child process where a hang or a followed link is the failure looked for); a
write never follows a link out of the folder nor blocks on a pipe, and a bad file read back is one
line naming the file, the line (row) and the field, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pathlib import Path

from test_cli import TINY_SWF

STALL_S = 300         # a guard against a hang, not a limit on speed: these commands take seconds


def greenslurm(*argv: str, cwd) -> subprocess.CompletedProcess:
    """``greenslurm ARGV`` as a user runs it (``python -m greenslurm``), in its own process."""
    return subprocess.run([sys.executable, "-m", "greenslurm", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=STALL_S)


def assert_one_line_error(done: subprocess.CompletedProcess, *names: str) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("greenslurm: error: "), done.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "tiny.swf").write_text(TINY_SWF)
    return tmp_path


# -- replay --out: links and pipes planted under the output names -----------------------------------------
@pytest.mark.parametrize("process", ["child", "off"])
@pytest.mark.parametrize("name", ["summary.json", "power.csv", "schema.json", "jobs.csv", "jobs.parquet"])
def test_out_replaces_a_planted_link_and_never_writes_through_it(tiny, name, process, monkeypatch):
    """A link named like an output, pointing at a file outside the folder (another user's, or one of
    ours the run must not touch): the output replaces the link; the file it pointed at keeps its
    bytes.  summary.json, power.csv and schema.json were opened through the link and the file
    outside overwritten."""
    monkeypatch.setenv("GREENSLURM_OUT_PROCESS", process)
    outside = tiny / "outside.txt"
    outside.write_text("not yours\n")
    out = tiny / "out"
    out.mkdir()
    (out / name).symlink_to(outside)
    done = greenslurm("replay", "tiny.swf", "--no-progress", "--out", "out", cwd=tiny)
    assert done.returncode == 0, done.stderr
    assert outside.read_text() == "not yours\n"
    assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert not [p.name for p in out.iterdir() if p.name.endswith(".part")]


@pytest.mark.parametrize("name", ["summary.json", "power.csv", "schema.json"])
def test_out_replaces_a_pipe_named_like_an_output(tiny, name):
    """A FIFO under an output's name: opening it for writing blocked until someone read it (the
    replay hung at the end); now the output replaces it."""
    out = tiny / "out"
    out.mkdir()
    os.mkfifo(out / name)
    done = greenslurm("replay", "tiny.swf", "--no-progress", "--out", "out", cwd=tiny)
    assert done.returncode == 0, done.stderr
    assert (out / name).is_file()
    if name.endswith(".json"):
        json.loads((out / name).read_text())


# -- report: a summary.json greenslurm did not write ----------------------------------------------------
@pytest.fixture(scope="module")
def replay_out(tmp_path_factory):
    """A real ``replay --out`` folder of the tiny trace, copied afresh for each attack."""
    root = tmp_path_factory.mktemp("replay-out")
    (root / "tiny.swf").write_text(TINY_SWF)
    done = greenslurm("replay", "tiny.swf", "--no-progress", "--out", "out", cwd=root)
    assert done.returncode == 0, done.stderr
    return {path.name: path.read_bytes() for path in (root / "out").iterdir()}


def planted(tmp_path, files: dict[str, bytes], **changes: bytes | None):
    """The replay folder in ``tmp_path/out`` with some files changed (None: removed)."""
    out = tmp_path / "out"
    out.mkdir()
    for name, data in {**files, **changes}.items():
        if data is not None:
            (out / name).write_bytes(data)
    return out


def edit_summary(files, old: str, new: str) -> bytes:
    text = files["summary.json"].decode()
    assert old in text, old
    return text.replace(old, new, 1).encode()


def _summary_line(files, key: str) -> str:
    """The 1-based line of ``key`` in the written summary.json (written sorted, two-space indent)."""
    lines = files["summary.json"].decode().splitlines()
    return str(next(i for i, line in enumerate(lines, 1) if line.startswith(f'  "{key}"')))


@pytest.mark.parametrize("attack, names", [
    # the written summary says "jobs_completed": 3; each edit is one thing greenslurm never writes
    (("\"jobs_completed\": 3", "\"jobs_completed\": NaN"), ("summary.json:{jobs_completed}:", "NaN")),
    (("\"jobs_completed\": 3", "\"jobs_completed\": Infinity"), ("summary.json:{jobs_completed}:", "Infinity")),
    (("\"jobs_completed\": 3", "\"jobs_completed\": 1e999"), ("summary.json:{jobs_completed}:", "1e999")),
    (("\"jobs_completed\": 3", "\"jobs_completed\": 1" + "0" * 5000), ("summary.json:{jobs_completed}:", "5001 digits")),
    (("\"jobs_completed\": 3", "\"jobs_completed\": \"3\""), ("summary.json:{jobs_completed}:", "field jobs_completed")),
    (("\"nodes\": 2", "\"nodes\": \"two\""), ("summary.json", "field cluster.nodes")),
    (("\"queue\": \"easy\"", "\"queue\": [1]"), ("summary.json:{queue}:", "field queue")),
    (("greenslurm.summary/1", "greenslurm.summary/2"), ("summary.json:{schema_version}:", "field schema_version")),
    (("{", "{\n  \"deep\": " + "[" * 100_000 + "]" * 100_000 + ","), ("summary.json", "nested too deeply")),
    (("{", "[{"), ("summary.json", "not valid JSON")),
])
def test_report_refuses_a_summary_greenslurm_did_not_write(tmp_path, replay_out, attack, names):
    """Each was read without a word (the summary dropped, its table gone: NaN and 1e999 emptied the
    energy column, a 5,001-digit integer or a wrong type lost the whole replay table) or ended in a
    RecursionError traceback (deep nesting); now one line naming the file, the line and the field."""
    planted(tmp_path, replay_out, **{"summary.json": edit_summary(replay_out, *attack)})
    done = greenslurm("report", "out", cwd=tmp_path)
    lines = {key: _summary_line(replay_out, key) for key in ("jobs_completed", "queue", "schema_version")}
    assert_one_line_error(done, *(name.format(**lines) for name in names))


@pytest.mark.parametrize("content", [b"{", b"[1, 2]\n", b"", b"\xff\xfe{}", None])
def test_report_refuses_a_summary_cut_short_or_not_an_object(tmp_path, replay_out, content):
    """A summary.json cut short by a kill or a full disk, a list, empty, not UTF-8, a dangling link:
    the replay's table was left out unsaid (exit 0)."""
    out = planted(tmp_path, replay_out, **{"summary.json": content})
    if content is None:
        (out / "summary.json").symlink_to(tmp_path / "gone.json")
    assert_one_line_error(greenslurm("report", "out", cwd=tmp_path), "summary.json")


def test_report_refuses_a_pipe_named_summary_json(tmp_path, replay_out):
    """A FIFO under summary.json: report blocked reading it until someone wrote (a hang)."""
    out = planted(tmp_path, replay_out, **{"summary.json": None})
    os.mkfifo(out / "summary.json")
    assert_one_line_error(greenslurm("report", "out", cwd=tmp_path), "summary.json", "pipe")


def test_report_reads_the_summary_it_wrote(tmp_path, replay_out):
    """The folder as written reports its replay (the checks refuse nothing greenslurm writes)."""
    planted(tmp_path, replay_out)
    done = greenslurm("report", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Replays compared (tiny.swf)" in done.stdout and "Completed" in done.stdout, done.stdout


# -- report: the replay's tables edited, cut short or planted ----------------------------------------------
def edit_row(files, name: str, row: int, column: str, value: str) -> bytes:
    """The CSV file ``name`` with the cell of data row ``row`` (0-based) in ``column`` set to ``value``."""
    lines = files[name].decode().split("\n")
    header = lines[0].split(",")
    cells = lines[row + 1].split(",")
    cells[header.index(column)] = value
    lines[row + 1] = ",".join(cells)
    return "\n".join(lines).encode()


@pytest.mark.parametrize("name, row, column, value, names", [
    # line = data row + 2 (the header is line 1)
    ("jobs.csv", 1, "wait_s", "xyz", ("jobs.csv:3:", "field wait_s", "'xyz'")),
    ("jobs.csv", 0, "wait_s", "-50.0", ("jobs.csv:2:", "field wait_s", "negative")),
    ("jobs.csv", 2, "start_s", "", ("jobs.csv:4:", "field start_s", "empty")),
    ("jobs.csv", 2, "end_s", "1e999", ("jobs.csv:4:", "field end_s")),
    ("power.csv", 0, "power_w", "-1.0", ("power.csv:2:", "field power_w", "negative")),
    ("power.csv", 1, "end_s", "0.0", ("power.csv:3:", "field end_s", "before it starts")),
])
def test_report_refuses_a_table_cell_greenslurm_did_not_write(tmp_path, replay_out, name, row, column, value, names):
    """A cell edited into a word, a negative wait or power, an end before its start, an empty cell:
    read without a word (a word became NaN, the figures drawn from the rest)."""
    planted(tmp_path, replay_out, **{name: edit_row(replay_out, name, row, column, value)})
    assert_one_line_error(greenslurm("report", "out", "--plots", "figures", cwd=tmp_path), *names)


def test_report_refuses_a_jobs_csv_cut_mid_row(tmp_path, replay_out):
    """jobs.csv cut short in its last row (a kill or a full disk): the row's missing cells were NaN;
    now the line and the first empty column are named.  (A file cut exactly at a line end reads as
    a whole one: greenslurm writes whole files only, under a part name renamed once whole.)"""
    text = replay_out["jobs.csv"].decode()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    cut = text[:text.index(last) + last.index(",", last.index(",") + 1) + 1]   # the last row's first two cells
    planted(tmp_path, replay_out, **{"jobs.csv": cut.encode()})
    rows = text.count("\n")          # header + 3 rows: the last row is line 4
    assert_one_line_error(greenslurm("report", "out", cwd=tmp_path), f"jobs.csv:{rows}:", "empty")


@pytest.mark.parametrize("name, column", [("jobs.csv", "end_s"), ("power.csv", "energy_j")])
def test_report_refuses_a_replay_table_lacking_a_column(tmp_path, replay_out, name, column):
    """jobs.csv or power.csv without a column that tells its kind was passed over unsaid (the report
    went on with the other files, its figures skipped "no jobs.csv given")."""
    lines = replay_out[name].decode().splitlines()
    at = lines[0].split(",").index(column)
    kept = "\n".join(",".join(c for i, c in enumerate(line.split(",")) if i != at) for line in lines) + "\n"
    planted(tmp_path, replay_out, **{name: kept.encode()})
    assert_one_line_error(greenslurm("report", "out", cwd=tmp_path), name, column)


@pytest.mark.parametrize("where", ["argument", "folder"])
def test_report_refuses_a_pipe_given_as_a_table(tmp_path, replay_out, where):
    """A FIFO given as RESULTS blocked report (and /dev/zero was read until memory ran out); a FIFO
    named jobs.csv in a folder was passed over unsaid."""
    out = planted(tmp_path, replay_out, **{"jobs.csv": None})
    os.mkfifo(out / "jobs.csv")
    target = "out/jobs.csv" if where == "argument" else "out"
    assert_one_line_error(greenslurm("report", target, cwd=tmp_path), "jobs.csv", "pipe")


def test_report_refuses_dev_zero(tmp_path):
    assert_one_line_error(greenslurm("report", "/dev/zero", cwd=tmp_path), "/dev/zero", "device")


@pytest.mark.parametrize("change", ["crlf", "bom", "extra column", "repeated job id"])
def test_report_reads_what_an_editor_or_a_real_export_leaves(tmp_path, replay_out, change):
    """What held: CRLF line ends, a UTF-8 byte order mark, an extra column, a job id twice (a real
    export repeats ids: sacct --duplicates) read as the file written, the same tables."""
    text = replay_out["jobs.csv"].decode()
    edited = {"crlf": text.replace("\n", "\r\n"), "bom": "\ufeff" + text,
              "extra column": "\n".join(line + (",note" if line else "") for line in text.split("\n")),
              "repeated job id": text + text.split("\n")[1] + "\n"}[change]
    planted(tmp_path, replay_out, **{"jobs.csv": edited.encode()})
    done = greenslurm("report", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = 4 if change == "repeated job id" else 3
    assert f"out/jobs.csv: jobs results, {rows} rows" in done.stdout, done.stdout


# -- sweep resumed on a results folder edited or planted --------------------------------------------------
SWEEP_SPEC = ('sweep = { name = "resume", seeds = 2 }\n'
              'trace = [{ name = "small", synthetic = { jobs = 20 }, cluster = { nodes = 4, cpus = 4 } }]\n'
              'policy = [{ name = "fcfs", queue = "fcfs" }, { name = "easy", queue = "easy" }]\n')


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A finished sweep's folder (4 cells: 2 policies x 2 seeds), read as bytes, name -> bytes."""
    root = tmp_path_factory.mktemp("swept")
    (root / "study.toml").write_text(SWEEP_SPEC)
    done = greenslurm("sweep", "study.toml", "--out", "results", "--workers", "1", "--no-progress", cwd=root)
    assert done.returncode == 0, done.stderr
    return {str(p.relative_to(root / "results")): p.read_bytes() for p in (root / "results").rglob("*") if p.is_file()}


def restored(tmp_path, files: dict[str, bytes]) -> Path:
    """The finished sweep's folder written back into ``tmp_path`` with its spec: the results folder."""
    results = tmp_path / "results"
    for name, data in files.items():
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_bytes(data)
    (tmp_path / "study.toml").write_text(SWEEP_SPEC)
    return results


def resumed(tmp_path, files: dict[str, bytes], attack) -> subprocess.CompletedProcess:
    results = restored(tmp_path, files)
    attack(results)
    return greenslurm("sweep", "study.toml", "--out", "results", "--workers", "1", "--no-progress", cwd=tmp_path)


def _a_cell(results: Path) -> Path:
    return sorted((results / "cells").glob("*.json"))[0]


def _fifo_instead(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("attack, names", [
    (lambda r: (r / "ledger.jsonl").write_text("{garbage\n" + (r / "ledger.jsonl").read_text()),
     ("ledger.jsonl:1:", "field cell_id")),
    (lambda r: _fifo_instead(r / "ledger.jsonl"), ("ledger.jsonl", "pipe")),
    (lambda r: _a_cell(r).write_text("{"), ("cells/", "not valid JSON", "remove it")),
    (lambda r: _a_cell(r).write_text(""), ("cells/", "not valid JSON", "remove it")),
    (lambda r: _a_cell(r).write_text("[1]"), ("cells/", "no results row", "remove it")),
    (lambda r: _fifo_instead(_a_cell(r)), ("cells/", "pipe", "remove it")),
], ids=["ledger-line", "ledger-fifo", "cell-cut", "cell-empty", "cell-list", "cell-fifo"])
def test_a_resumed_sweep_refuses_a_folder_it_did_not_write(tmp_path, swept, attack, names):
    """A ledger line or a finished cell's file edited, emptied or replaced by a pipe: a JSONDecodeError
    traceback, or a hang on the pipe; now one line naming the file (and the ledger's line)."""
    assert_one_line_error(resumed(tmp_path, swept, attack), *names)


def test_a_resumed_sweep_keeps_every_finished_cell(tmp_path, swept):
    """What held: a rerun on the whole folder runs nothing again and keeps the four cells."""
    done = resumed(tmp_path, swept, lambda results: None)
    assert done.returncode == 0, done.stderr
    assert "4 already done, 0 to run" in done.stdout, done.stdout
    assert {p.read_bytes() for p in (tmp_path / "results" / "cells").glob("*.json")} == \
        {data for name, data in swept.items() if name.startswith("cells/")}


def test_a_sweep_replaces_a_link_planted_as_results_parquet(tmp_path, swept):
    """results.parquet was written by pandas through a link planted under its name (the file it
    pointed at overwritten); now written under a part name and renamed over the link."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")

    def plant(results: Path) -> None:
        (results / "results.parquet").unlink()
        (results / "results.parquet").symlink_to(outside)
    done = resumed(tmp_path, swept, plant)
    assert done.returncode == 0, done.stderr
    assert outside.read_text() == "not yours\n"
    results = tmp_path / "results" / "results.parquet"
    assert not results.is_symlink()
    assert results.read_bytes() == swept["results.parquet"]      # the same four cells, the same bytes


@pytest.mark.parametrize("into", ["replay folder", "sweep folder"])
def test_report_refuses_a_folder_mixing_a_sweep_and_a_replay(tmp_path, swept, replay_out, into):
    """A sweep's results.parquet beside a replay's files (one copied into the other's folder): the
    sweep was reported alone and the replay passed over unsaid."""
    if into == "replay folder":
        out = planted(tmp_path, replay_out)
        (out / "results.parquet").write_bytes(swept["results.parquet"])
    else:
        out = planted(tmp_path, {"results.parquet": swept["results.parquet"]},
                      **{"summary.json": replay_out["summary.json"]})
    assert_one_line_error(greenslurm("report", "out", cwd=tmp_path), "results.parquet", "summary.json")


@pytest.mark.parametrize("option, name", [("--tables", "replays-compared.csv"), ("--tables", "replays-compared.md"),
                                          ("--plots", "gantt.png"), ("--plots", "gantt.svg")])
def test_report_replaces_a_link_planted_in_its_output_folder(tmp_path, replay_out, option, name):
    """A link named like a table or a figure in the --tables or --plots folder: the file it pointed
    at was overwritten (Path.write_text, savefig); now the output replaces the link."""
    planted(tmp_path, replay_out)
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    folder = tmp_path / "written"
    folder.mkdir()
    (folder / name).symlink_to(outside)
    done = greenslurm("report", "out", option, "written", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert outside.read_text() == "not yours\n"
    assert not (folder / name).is_symlink() and (folder / name).stat().st_size > 0


def test_a_sweep_writes_no_cell_through_a_link_planted_at_its_part_name(tmp_path, swept, monkeypatch):
    """A finished cell is written under a part name, then renamed over cells/ID.json.  The part name was
    cells/ID.tmp<process id>, written with write_text: a link planted there (a process id is easy to
    guess) had the cell written into the file it pointed at.  Run in this process, so that its id is
    known; links are planted at the old part name and at the new one: the file outside keeps its
    bytes and the cell is written whole, the same bytes as the first sweep's."""
    from greenslurm.cli import main

    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    rerun: list[Path] = []

    def plant(results: Path) -> None:
        cell = _a_cell(results)
        cell.unlink()                                  # run again: its file is written anew
        rerun.append(cell)
        for part in (cell.with_suffix(f".tmp{os.getpid()}"), cell.with_name(f".{cell.name}.{os.getpid()}.part")):
            part.symlink_to(outside)

    plant(restored(tmp_path, swept))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "study.toml", "--out", "results", "--workers", "1", "--no-progress"]) == 0
    assert outside.read_text() == "not yours\n"
    cell = rerun[0]
    assert not cell.is_symlink()
    written, first = json.loads(cell.read_bytes()), json.loads(swept[f"cells/{cell.name}"])
    for saved in (written, first):
        del saved["row"]["elapsed_s"]                # the cell's own run time: the one field that differs
    assert written == first
