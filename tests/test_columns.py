"""Jobs and results as columns: the same jobs, records and output bytes as one object per job.

- The SWF reader fills a JobTable as the file streams past; every JobSpec it gives equals the one
  built record by record from the same helpers (``list_reader`` below: the reader before columns,
  a JobSpec a kept record, RecordLog.result's checks and sort), on the real logs, on crafted bad
  lines, in strict mode, read in pieces of any size, gzip or not.
- A replay keeps its results as columns; the records built from them equal the records the loop
  built before columns (``RecordingReplay`` below keeps them as the old ``_finish`` did), for
  random small workloads under every queue, and the pool core's equal the general loop's.
- Outputs of whole real logs are byte for byte those written by the code before columns (digests
  below, taken from that code's files).
"""

from __future__ import annotations

import gzip
import hashlib
from sys import intern

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.cluster import GPU
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job_table import JobTable, id_column, id_texts
from greenslurm.sim.accounting.result import JobColumns, JobRecord, ReplayResult, ragged_positions
from greenslurm.sim.engine.replay import Replay
from greenslurm.traces import source, swf
from greenslurm.traces.records import RecordLog
from greenslurm.traces.source import read_text, split_lines


# -- the reader -----------------------------------------------------------------------------------
def list_reader(text: str, path: str, strict: bool = False):
    """The SWF reader before columns: a JobSpec per kept record, then RecordLog.result."""
    log = RecordLog(path, strict)
    header: dict[str, str] = {}
    last_key = None
    jobs = []
    for lineno, line in enumerate(split_lines(text), 1):
        parts = line.split()
        if not parts:
            continue
        if parts[0][0] == ";":
            last_key = swf._header_line(line.strip(), header, last_key)
            continue
        log.records += 1
        if len(parts) != swf.N_FIELDS:
            log.skip("wrong field count", lineno, None,
                     f"{len(parts)} fields, an SWF record has {swf.N_FIELDS} (truncated or merged line?)")
            continue
        v = swf._numbers(parts) if "_" not in line else None
        if v is None:
            v = swf._checked_numbers(parts, lineno, log)
            if v is None:
                continue
        kept = swf._job_values(parts, v, lineno, log)
        if kept is None:
            continue
        requested, procs = kept
        status = int(v[10]) if v[10] == int(v[10]) else -1
        from array import array
        jobs.append(JobSpec(job_id=parts[0] if parts[0].isdigit() else str(swf._plain(v[0])), submit_s=v[1],
                            requested_time_s=requested, runtime_s=v[3], cpus=int(procs), nodes=0,
                            user=intern(swf._label(parts[11], v[11])), partition=intern(swf._label(parts[15], v[15])),
                            state=swf.STATUS_NAMES.get(status, ""), source_line=lineno,
                            extra=swf.SwfExtra(array("d", swf._pick_extra(v)))))
    return log.result(jobs, "swf", header)


def old_read(path: str, strict: bool = False):
    """The whole file as text, then the record-by-record reader; the error text when it fails."""
    try:
        return list_reader(read_text(path), path, strict)
    except InputError as exc:
        return str(exc)


def new_read(path: str, strict: bool = False):
    try:
        return swf.read_swf(path, strict=strict)
    except InputError as exc:
        return str(exc)


def same_reads(old, new) -> None:
    if isinstance(old, str) or isinstance(new, str):
        assert old == new
        return
    jobs = list(new.jobs)
    assert len(jobs) == len(old.jobs)
    for a, b in zip(old.jobs, jobs):
        assert a == b and repr(a) == repr(b)                       # every field, types shown
        assert dict(a.extra) == dict(b.extra) or all(x == y or (x != x and y != y)
                                                    for x, y in zip(a.extra.values(), b.extra.values()))
        assert [type(x) for x in (a.submit_s, a.cpus, a.job_id)] == [type(x) for x in (b.submit_s, b.cpus, b.job_id)]
    assert (old.skipped, old.adjusted, old.examples, old.header, old.records_read) == \
        (new.skipped, new.adjusted, new.examples, new.header, new.records_read)
    assert new.table is not None and len(new.table) == len(jobs)


@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln.swf", "LANL-CM5-1994-4.1-cln.swf", "NASA-iPSC-1993-3.1-cln.swf",
                                  "LLNL-Atlas-2006-2.1-cln.swf", "lublin_256_est.swf"])
def test_columnar_reader_equals_record_reader_on_real_logs(shared_data, name):
    path = str(shared_data / "swf" / name)
    same_reads(old_read(path), new_read(path))


def test_real_log_in_small_pieces_and_gzip(shared_data, tmp_path, monkeypatch):
    """NASA-iPSC (18,239 records, every one adjusted) read 1 KiB at a time, plain and gzip."""
    text = (shared_data / "swf" / "NASA-iPSC-1993-3.1-cln.swf").read_bytes()
    packed = tmp_path / "nasa.swf.gz"
    packed.write_bytes(gzip.compress(text))
    monkeypatch.setattr(source, "PIECE_BYTES", 1024)
    same_reads(old_read(str(packed)), new_read(str(packed)))


GOOD = "1 0 5 100 4 -1 -1 8 3600 -1 1 3 -1 -1 -1 2 -1 -1"
TOKENS = st.sampled_from(["-1", "0", "7", "12.00", "489.00", "1e300", "-2", "nan", "inf", "1_0", "x", "\u0663",
                          "007", "3.5", "99999999999999999999", "-0", "1e-300", "2147483648"])


@st.composite
def swf_lines(draw) -> str:
    kind = draw(st.sampled_from(["good", "tokens", "header", "blank", "short"]))
    if kind == "good":
        parts = GOOD.split()
        for i in draw(st.lists(st.integers(0, 17), max_size=3)):
            parts[i] = draw(TOKENS)
        return draw(st.sampled_from([" ", "\t", "  "])).join(parts)
    if kind == "tokens":
        return " ".join(draw(st.lists(TOKENS, min_size=18, max_size=18)))
    if kind == "header":
        return draw(st.sampled_from(["; MaxProcs: 64", "; Note: a", ";   more", ";", "; Queue: 1"]))
    if kind == "blank":
        return draw(st.sampled_from(["", "   ", "\r"]))
    return " ".join(draw(st.lists(TOKENS, min_size=1, max_size=25)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(swf_lines(), min_size=1, max_size=30), strict=st.booleans(), piece=st.integers(1, 200),
       packed=st.booleans(), crlf=st.booleans(), end=st.booleans())
def test_columnar_reader_equals_record_reader_on_crafted_lines(tmp_path_factory, lines, strict, piece, packed, crlf,
                                                               end):
    data = ("\r\n" if crlf else "\n").join(lines).encode() + (b"\n" if end else b"")
    path = tmp_path_factory.mktemp("swf") / ("t.swf.gz" if packed else "t.swf")
    path.write_bytes(gzip.compress(data) if packed else data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(source, "PIECE_BYTES", piece)
        same_reads(old_read(str(path), strict), new_read(str(path), strict))


@pytest.mark.parametrize("data, says", [
    (b"", "empty file"),
    (b"  \n\t\n", "only white space"),
    (b"; only: a header\n", "no job records"),
    (GOOD.encode() + b"\n" + b"x" * 300 + b"\n1 2\xff\n" + b"y\x00\n", "NUL byte"),       # NUL beats UTF-8
    (b"1 2 3\n" + GOOD.encode() + b"\n" + b"z" * 300 + b"\n\xfe\n", "not UTF-8"),         # beats the bad record
    (b"\xef\xbb\xbf" + GOOD.encode() + b"\n\xff", "not UTF-8"),
])
def test_file_errors_keep_their_precedence_in_pieces(tmp_path, monkeypatch, data, says):
    """A strict read of a file whose bad record comes before a bad byte names the byte, as the
    whole-file read did, even when the byte is pieces later."""
    path = tmp_path / "t.swf"
    path.write_bytes(data)
    monkeypatch.setattr(source, "PIECE_BYTES", 16)
    for strict in (False, True):
        old, new = old_read(str(path), strict), new_read(str(path), strict)
        assert old == new and says in new


def test_corrupt_gzip_beats_a_bad_record(tmp_path, monkeypatch):
    data = gzip.compress(b"1 2 3\n" + (GOOD.encode() + b"\n") * 2000)
    path = tmp_path / "t.swf.gz"
    path.write_bytes(data[:len(data) // 2])            # truncated: found only once the reading gets there
    monkeypatch.setattr(source, "PIECE_BYTES", 64)
    assert new_read(str(path), strict=True) == old_read(str(path), strict=True) == \
        f"{path}: gzip data is corrupt or truncated"


def test_table_rows_are_a_sequence_of_jobspecs():
    jobs = [JobSpec("5", 1.0, 60.0, runtime_s=30.0, cpus=2, user="u", state="COMPLETED", source_line=3),
            JobSpec("a7", 0.5, 60.0, runtime_s=90.0, cpus=1, partition="p")]
    rows = JobTable.from_specs(jobs).rows()
    assert rows == jobs and list(rows) == jobs and rows[1:] == jobs[1:] and rows[-2] == jobs[0]
    assert rows[::-1] == jobs[::-1] and len(rows.head(1)) == 1 and rows.head(1)[0] == jobs[0]
    with pytest.raises(IndexError):
        rows[2]


# -- results ---------------------------------------------------------------------------------------
class RecordingReplay(Replay):
    """The loop as it was before columns: besides the columns, a JobRecord per job as the old
    ``_finish`` built it (the fields straight from the job's JobSpec and run state)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.old_records: list[JobRecord] = []

    def _finish(self, job, now_s: float) -> None:
        ledger_on_end = self.ledger.on_end
        seen = {}

        def on_end(j, t):
            seen["energy"] = ledger_on_end(j, t)
            return seen["energy"]

        self.ledger.on_end = on_end
        try:
            super()._finish(job, now_s)
        finally:
            del self.ledger.on_end
        spec = job.job
        self.old_records.append(JobRecord(
            job_id=spec.job_id, submit_s=spec.submit_s, start_s=job.start_s, end_s=now_s,
            requested_time_s=spec.requested_time_s, nodes=job.nodes, cpus=job.cpus_total,
            gpus=job.total(GPU), killed_at_limit=spec.killed_at_limit,
            energy_j=seen["energy"], node_indices=tuple(job.node_indices.tolist()),
            deadline_s=spec.deadline_s, user=spec.user, partition=spec.partition))


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 25))
    jobs = []
    for i in range(n):
        requested = draw(st.sampled_from([1.0, 10.0, 37.5, 100.0]))
        jobs.append(JobSpec(job_id=draw(st.sampled_from([str(i), f"j{i}", f"0{i}"])),
                            submit_s=float(draw(st.integers(0, 60))), requested_time_s=requested,
                            runtime_s=draw(st.sampled_from([0.0, 3.0, 10.0, 55.5, 200.0])),
                            cpus=draw(st.integers(1, 6)), gpus_per_node=draw(st.sampled_from([0.0, 0.0, 1.0])),
                            nodes=draw(st.sampled_from([0, 0, 1])),
                            deadline_s=draw(st.sampled_from([None, 50.0, 500.0])),
                            user=draw(st.sampled_from(["", "ann", "bo"])), partition=draw(st.sampled_from(["", "p"]))))
    return jobs


@settings(max_examples=80, deadline=None)
@given(jobs=workloads(), queue=st.sampled_from(["fcfs", "easy", "conservative"]))
def test_records_from_columns_equal_the_records_the_loop_built(jobs, queue):
    cluster = Cluster.homogeneous(3, cpus=4, gpus=1)
    run = RecordingReplay(jobs, cluster, queue)
    result = run.run()
    records = result.records
    assert records == run.old_records
    assert [type(getattr(r, f)) for r in records for f in ("job_id", "nodes", "node_indices")] == \
        [type(getattr(r, f)) for r in run.old_records for f in ("job_id", "nodes", "node_indices")]
    assert result.jobs_completed == len(records) and run.records == records
    # back and forth: columns from the records give the same records
    assert JobColumns.from_records(records).records() == records


@settings(max_examples=60, deadline=None)
@given(jobs=workloads(), queue=st.sampled_from(["fcfs", "easy", "conservative"]))
def test_pool_core_columns_equal_the_general_loop_records(jobs, queue):
    """On a pool of one-CPU nodes the pool core runs (FCFS, EASY, conservative) and gives its
    results through ReplayResult.from_columns; the general loop gives the same."""
    jobs = [j.with_changes(gpus_per_node=0.0, nodes=0) for j in jobs]
    pool = Cluster.homogeneous(8, cpus=1)
    assert Replay(jobs, pool, queue)._pool_core_inputs() is not None
    core = Replay(jobs, pool, queue).run()
    loop = RecordingReplay(jobs, pool, queue, keep_jobs=True)      # keeping the jobs: the core declines
    general = loop.run()
    assert loop._pool_core_inputs() is None
    assert core.records == loop.old_records == general.records


@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=12), data=st.data())
def test_ragged_positions_gather_the_slices_in_order(sizes, data):
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    order = np.array(data.draw(st.permutations(range(len(sizes)))), dtype=np.int64)
    flat = np.arange(offsets[-1]) * 10
    want = [x for k in order.tolist() for x in flat[offsets[k]:offsets[k + 1]].tolist()]
    assert flat[ragged_positions(offsets, order)].tolist() == want


@given(ids=st.lists(st.one_of(st.integers(0, 10 ** 19).map(str), st.text(max_size=4)), max_size=8))
def test_id_column_gives_back_the_same_texts(ids):
    assert id_texts(id_column(ids)) == ids


def test_from_columns_rejects_columns_of_other_lengths():
    jobs = [JobSpec("a", 0.0, 1.0, runtime_s=1.0)]
    with pytest.raises(ValueError, match="node_offsets"):
        ReplayResult.from_columns(jobs, np.array([0]), np.array([0.0]), np.array([1.0]), np.array([0.0]),
                                  np.array([0]), np.array([0]), cluster=None, queue="fcfs", energy=None,
                                  power_times_s=None, power_w=None, busy_cpus=None)


# -- whole logs, byte for byte ----------------------------------------------------------------------
# sha256 (first 16 hex digits) of the files the code before columns wrote (commit 6da9c93 with the
# pool core's conservative backfilling of 523f72f), from /tmp as the working folder:
#   greenslurm replay /work/shared/data/swf/FILE --queue Q [--select bestfit] --out OUT --no-progress
#   sha256sum OUT/jobs.csv OUT/power.csv | cut -c1-16
# (EASY and conservative run in the pool core, EASY with best fit in the general loop.)
WHOLE = [
    ("KTH-SP2-1996-2.1-cln.swf", "easy", None, "84e551c74abda703", "f00d3956824b692d"),
    ("KTH-SP2-1996-2.1-cln.swf", "conservative", None, "6c2effd39833fb4b", "9fda7cac6d48efca"),
    ("KTH-SP2-1996-2.1-cln.swf", "easy", "bestfit", "84e551c74abda703", "f00d3956824b692d"),
    ("LANL-CM5-1994-4.1-cln.swf", "easy", None, "2a954b7753887865", "84f923a285e37b22"),
]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@pytest.mark.parametrize("name, queue, select, jobs_csv, power_csv", WHOLE,
                         ids=[f"{n.split('-')[0]}-{q}-{s or 'firstfit'}" for n, q, s, *_ in WHOLE])
def test_whole_log_outputs_are_the_bytes_written_before_columns(shared_data, tmp_path, name, queue, select, jobs_csv,
                                                                power_csv):
    from greenslurm.cli import main
    out = tmp_path / "out"
    argv = ["replay", str(shared_data / "swf" / name), "--queue", queue, "--out", str(out), "--no-progress"]
    assert main(argv + (["--select", select] if select else [])) == 0
    assert (digest(out / "jobs.csv"), digest(out / "power.csv")) == (jobs_csv, power_csv)


@given(values=st.lists(st.one_of(st.floats(allow_nan=False, width=32), st.floats(allow_nan=False),
                                 st.integers(-1, 2 ** 30).map(float)), min_size=2, max_size=40))
def test_compact_floats_gives_back_the_same_doubles(values):
    from greenslurm.clustermodel.job_table import compact_floats
    wide = np.array(values[: len(values) // 2 * 2]).reshape(-1, 2)
    with np.errstate(over="raise"):          # no warning escapes either
        kept = compact_floats(wide)
    assert kept.astype(np.float64).tobytes() == wide.tobytes()
    with np.errstate(over="ignore"):         # beyond float32: inf, not the value
        exact = all(float(np.float32(v)) == v for v in wide.ravel().tolist())
    assert kept.dtype == (np.float32 if exact else np.float64)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"a").replace(b"\x1f", b"a")),
       size=st.integers(1, 70))
def test_byte_pieces_end_at_line_ends_and_keep_every_byte(tmp_path_factory, data, size):
    """Pieces (a long line gathered over many reads) are the file's bytes in order, each but the last
    ending at a line end, each the longest run of reads up to its last line end."""
    path = tmp_path_factory.mktemp("pieces") / "f.txt"
    path.write_bytes(data)
    pieces = list(source.byte_pieces(str(path), size))
    assert b"".join(pieces) == data
    assert all(piece.endswith(b"\n") for piece in pieces[:-1]) and all(pieces)
    # a piece holds no line end of the block that follows it: its end is the last line end read so far
    consumed = 0
    for piece in pieces[:-1]:
        consumed += len(piece)
        read_so_far = -(-consumed // size) * size
        assert b"\n" not in data[consumed:read_so_far]
