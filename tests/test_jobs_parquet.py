"""jobs.parquet's columns (sim/reporting/outputs.py: the project's cells handed to pyarrow over their
own buffers) and the byte cells of the CSV files (sim/reporting/cells.py) against pyarrow, pandas
and the csv module: each chunk's Arrow array equals the one pyarrow builds from the same values
(``from_pandas``: NaN a null), a file of random chunks reads back as pyarrow's own file of the same
frame, and every cell is the text the csv module writes."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.sim.reporting import cells, outputs
from greenslurm.sim.reporting.outputs import ValueTooLarge, arrow_column

KINDS = {"int64": pa.int64(), "double": pa.float64(), "bool": pa.bool_(), "large_string": pa.large_string()}
PANDAS_DTYPES = {"int64": "int64", "double": "float64", "bool": "bool", "large_string": str}

floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 1.7976931348623157e308, 2.0 ** 53, 1e16, 0.1])
ints = st.integers(-2 ** 63, 2 ** 63 - 1) | st.sampled_from([0, -1, 2 ** 63 - 1, -2 ** 63, 10 ** 18])
# any text that has a UTF-8 form: NUL, quotes, commas, line breaks, accents, emoji (no lone surrogates)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "\x00", 'a"b', "a,b", "x\ny", "x\r\ny", "é", "😀", "\u2028", "a\x00b,\"c\"\n"])
VALUES = {"int64": ints, "double": floats, "bool": st.booleans(), "large_string": texts | st.none()}


@st.composite
def tables(draw):
    """Columns of the jobs table's kinds, 0 to 40 rows, cut into random chunks."""
    rows = draw(st.integers(0, 40))
    kinds = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=6))
    columns = [(f"c{i}", kind, draw(st.lists(VALUES[kind], min_size=rows, max_size=rows))) for i, kind in enumerate(kinds)]
    cuts = sorted(set(draw(st.lists(st.integers(0, rows), max_size=4))) | {0, rows})
    return rows, columns, cuts


def chunk(kind: str, values: list):
    """Values as job_columns gives them: numpy arrays, a list of str (with None) or cells."""
    if kind == "large_string":
        return values if None in values or len(values) % 2 else cells.texts(values)   # both forms a text chunk takes
    return np.array(values, dtype={"int64": np.int64, "double": np.float64, "bool": bool}[kind])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables())
def test_chunks_read_back_as_pyarrows_own_table_of_the_same_data(table, tmp_path):
    rows, columns, cuts = table
    schema = pa.schema([(name, KINDS[kind]) for name, kind, _ in columns])
    batches = [pa.RecordBatch.from_arrays([arrow_column(chunk(kind, values[lo:hi]), KINDS[kind])
                                           for _, kind, values in columns], schema=schema)
               for lo, hi in zip(cuts, cuts[1:])]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_batches(batches, schema), path)
    expected = pa.table([pa.array(values, type=KINDS[kind], from_pandas=True) for _, kind, values in columns],
                        names=[name for name, _, _ in columns])
    read = pq.read_table(path)
    assert read.equals(expected)
    # pandas reads it as it reads pyarrow's own file of the same frame
    frame = pd.DataFrame({name: pd.Series(values, dtype=PANDAS_DTYPES[kind] if kind != "large_string" else object)
                          for name, kind, values in columns})
    theirs = tmp_path / "theirs.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False, schema=schema), theirs)
    pd.testing.assert_frame_equal(pd.read_parquet(path), pd.read_parquet(theirs), check_exact=True)


@settings(max_examples=60, deadline=None)
@given(table=tables())
def test_the_writer_made_directly_writes_pyarrow_parquets_own_bytes(table):
    # outputs.parquet_writer makes the class pyarrow.parquet.ParquetWriter wraps, without loading
    # pyarrow.parquet: the same file, byte for byte, as the wrapper with the options jobs.parquet uses
    rows, columns, cuts = table
    schema = pa.schema([(name, KINDS[kind]) for name, kind, _ in columns], metadata={b"k": b"v"})
    batches = [pa.RecordBatch.from_arrays([arrow_column(chunk(kind, values[lo:hi]), KINDS[kind])
                                           for _, kind, values in columns], schema=schema)
               for lo, hi in zip(cuts, cuts[1:])]
    ours, theirs = io.BytesIO(), io.BytesIO()
    writer = outputs.parquet_writer(ours, schema)
    for batch in batches:
        writer.write_table(pa.Table.from_batches([batch], schema))
    writer.close()
    with pq.ParquetWriter(theirs, schema, use_dictionary=False, write_batch_size=outputs.CHUNK_ROWS) as wrapper:
        for batch in batches:
            wrapper.write_table(pa.Table.from_batches([batch], schema))
    assert ours.getvalue() == theirs.getvalue()


def test_a_pyarrow_whose_private_writer_class_changed_falls_back_to_the_public_one(monkeypatch):
    # fault injected: an option the private class pyarrow._parquet.ParquetWriter does not take (as a later
    # pyarrow may rename one); the writer falls back to pyarrow.parquet.ParquetWriter, the same bytes
    schema = pa.schema([("x", pa.int64())])
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2, 3], pa.int64())], schema=schema)

    def written() -> bytes:
        sink = io.BytesIO()
        writer = outputs.parquet_writer(sink, schema)
        writer.write_table(pa.Table.from_batches([batch], schema))
        writer.close()
        return sink.getvalue()

    direct = written()
    monkeypatch.setitem(outputs.PARQUET_OPTIONS, "an_option_no_pyarrow_has", True)
    fallback = written()
    assert fallback == direct
    assert pq.read_table(io.BytesIO(fallback)).column("x").to_pylist() == [1, 2, 3]


def test_a_chunk_by_hand():
    # NaN a null (pyarrow's from_pandas), -0.0 kept, None a null, cells over their bytes
    assert arrow_column(np.array([-0.0, math.nan, math.inf]), pa.float64()).to_pylist() == [-0.0, None, math.inf]
    assert math.copysign(1, arrow_column(np.array([-0.0]), pa.float64())[0].as_py()) == -1
    assert arrow_column(["a", None, ""], pa.large_string()).to_pylist() == ["a", None, ""]
    assert arrow_column((np.frombuffer(b"abcd", np.uint8), np.array([1, 0, 3])), pa.large_string()).to_pylist() == \
        ["a", "", "bcd"]
    assert arrow_column(np.array([True] * 9 + [False]), pa.bool_()).to_pylist() == [True] * 9 + [False]
    assert arrow_column(np.array([-2 ** 63, 7]), pa.int64()).to_pylist() == [-2 ** 63, 7]


def test_the_pandas_metadata_is_pyarrows_but_for_the_writer():
    # pyarrow's metadata for a frame of each kind; ours names greenslurm as its writer
    frame = pd.DataFrame({"i": pd.Series([1], dtype="int64"), "d": [0.5], "b": [True],
                          "s": pd.Series(["x"], dtype=str)})
    theirs = json.loads(pa.Table.from_pandas(frame, preserve_index=False).schema.metadata[b"pandas"])
    ours = json.loads(outputs._pandas_metadata([("i", pa.int64()), ("d", pa.float64()), ("b", pa.bool_()),
                                                ("s", pa.large_string())]))
    assert ours["creator"]["library"] == "greenslurm"
    for key in ("index_columns", "column_indexes"):
        assert ours[key] == theirs[key]
    # pyarrow before 22 writes no "attributes" (DataFrame.attrs); pandas before 3 has no str dtype and
    # pyarrow describes its str column as numpy "object".  Ours is what pandas 3 with pyarrow 22+ writes,
    # and the oldest allowed pandas and pyarrow read it back to the same frame (the read-back tests above).
    assert ours["attributes"] == theirs.get("attributes", {}) == {}
    assert ours["columns"][:3] == theirs["columns"][:3]
    assert ours["columns"][3]["numpy_type"] == "str"
    assert theirs["columns"][3]["numpy_type"] == ("str" if int(pd.__version__.split(".")[0]) >= 3 else "object")


def test_writing_jobs_parquet_does_not_load_pandas_nor_pyarrows_file_systems():
    # pyarrow.array of a numpy array loads pandas (0.2 s and 50 MiB at every replay --out): the columns
    # are handed over as buffers.  A fresh process, since this one has pandas loaded.
    code = ("import sys, tempfile, os; from greenslurm.sim.accounting.result import JobColumns, JobRecord; "
            "from greenslurm.sim.reporting.outputs import write_jobs_parquet; "
            "cols = JobColumns.from_records([JobRecord('a', 1.0, 3.0, 3.0, 9.0, 1, 1.0, 0.0, False, 2.0, (4,))]); "
            "d = tempfile.mkdtemp(); write_jobs_parquet(cols, os.path.join(d, 'j.parquet')); "
            "print('pandas' in sys.modules, 'pyarrow.fs' in sys.modules, 'ssl' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # nor pyarrow.fs and ssl (pyarrow.parquet loads them: about a third of pyarrow's import)
    assert done.stdout.strip() == "False False False"


def test_a_string_of_2_gib_is_refused():
    # a Parquet byte array's length is an int32 to readers: only the sizes are looked at, so no 2 GiB
    # of bytes are needed to see the refusal
    for size in (2 ** 31, 2 ** 32 + 3):
        with pytest.raises(ValueTooLarge, match=r"^a string of 2 GiB or more \(\d+ bytes\)"):
            arrow_column((np.zeros(3, dtype=np.uint8), np.array([size], dtype=np.int64)), pa.large_string())


# -- CSV cells ----------------------------------------------------------------------------------------
def csv_module_row(values) -> str:
    """A row as the csv module writes it (float: repr, None and NaN: empty) with a carriage return
    quoted like a line feed (the line end "\\r\\n" does that), ended by "\\n"."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(
        [None if isinstance(v, float) and math.isnan(v) else v for v in values])
    return buffer.getvalue()[:-2] + "\n"


def csv_module_cells(values) -> list[str]:
    return [csv_module_row([value, ""])[:-2] for value in values]


@settings(max_examples=300, deadline=None)
@given(values=st.lists(floats, max_size=50))
def test_float_cells_are_the_csv_modules(values):
    assert cells.strings(cells.float_cells(np.array(values, dtype=float))) == csv_module_cells(values)


@settings(max_examples=200, deadline=None)
@given(first=st.lists(floats, max_size=30), second=st.lists(floats, max_size=30))
def test_float_cells_sharing_texts_between_columns_are_the_csv_modules(first, second):
    # the second column reuses the first's texts: -0.0 and 0.0 (equal keys) must keep their own
    memo: dict = {}
    assert cells.strings(cells.float_cells(np.array(first + [-0.0], dtype=float), memo)) == csv_module_cells(first + [-0.0])
    assert cells.strings(cells.float_cells(np.array(second + [0.0], dtype=float), memo)) == csv_module_cells(second + [0.0])


@settings(max_examples=300, deadline=None)
@given(values=st.lists(ints, max_size=50), suffix=st.sampled_from([b"", b".0", b"abcd"]))
def test_digits_are_str(values, suffix):
    data, sizes = cells.digits(np.array(values, dtype=np.int64), suffix)
    assert cells.strings((data, sizes)) == [str(v) + suffix.decode() for v in values]


@settings(max_examples=300, deadline=None)
@given(values=st.lists(texts | st.none(), max_size=30))
def test_text_cells_are_the_csv_modules(values):
    assert cells.strings(cells.csv_texts(values)) == csv_module_cells(["" if v is None else v for v in values])


@settings(max_examples=200, deadline=None)
@given(columns=st.lists(st.lists(texts, min_size=3, max_size=3), min_size=1, max_size=5))
def test_csv_rows_are_the_csv_modules_rows(columns):
    expected = "".join(map(csv_module_row, zip(*columns)))
    assert cells.csv_rows([cells.csv_texts(column) for column in columns]) == expected.encode()


def test_spans_with_empty_ones():
    # spans of 0 bytes leave no position: [5, 6], nothing, [0], nothing
    assert cells.spans(np.array([5, 9, 0, 3]), np.array([2, 0, 1, 0])).tolist() == [5, 6, 0]
    assert cells.spans(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_the_command_says_a_value_too_large_for_parquet_in_one_line(shared_data, tmp_path, monkeypatch, capsys):
    # A value of 2 GiB no trace reader can produce on demand: a fake writer (named so) raises the writer's
    # refusal, and the command must end in one error line naming the folder, exit 2, no traceback.
    from greenslurm.cli import main
    from greenslurm.sim.reporting import outputs

    def fake_writer_refusing_a_value(*args, **kwargs):
        raise ValueTooLarge("column 'job_id', row 7: a value of 2147483648 bytes, more than a Parquet page holds")
    monkeypatch.setattr(outputs, "write_outputs", fake_writer_refusing_a_value)
    code = main(["replay", str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf"), "--limit", "50", "--no-progress",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot write jobs.parquet: column 'job_id', row 7: a value of 2147483648 bytes" in err
    assert "Traceback" not in err and len([line for line in err.splitlines() if line.strip()]) == 1
