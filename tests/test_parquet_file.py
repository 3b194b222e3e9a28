"""The Parquet writer (sim/reporting/parquet_file.py) and the byte cells of the CSV files
(sim/reporting/cells.py) against pyarrow, pandas and the csv module: what pyarrow reads back from
our file equals the table pyarrow builds from the same data, ``pandas.read_parquet`` gives what it
gives for pyarrow's own file, and every cell is the text the csv module writes."""

from __future__ import annotations

import csv
import io
import json
import math
import struct

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.sim.reporting import cells
from greenslurm.sim.reporting.parquet_file import (ARROW_SCHEMA_KEY, BOOL, DOUBLE, INT64, LARGE_STRING, STRING,
                                                   arrow_schema, pandas_metadata, thrift_struct, varint,
                                                   ValueTooLarge, write_parquet)

ARROW_TYPES = {INT64: pa.int64(), DOUBLE: pa.float64(), BOOL: pa.bool_(), LARGE_STRING: pa.large_string(),
               STRING: pa.string()}
PANDAS_DTYPES = {INT64: "int64", DOUBLE: "float64", BOOL: "bool", LARGE_STRING: str, STRING: str}

floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 1.7976931348623157e308, 2.0 ** 53, 1e16, 0.1])
ints = st.integers(-2 ** 63, 2 ** 63 - 1) | st.sampled_from([0, -1, 2 ** 63 - 1, -2 ** 63, 10 ** 18])
# any text that has a UTF-8 form: NUL, quotes, commas, line breaks, accents, emoji (no lone surrogates)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "\x00", 'a"b', "a,b", "x\ny", "x\r\ny", "é", "😀", "\u2028", "a\x00b,\"c\"\n"])
VALUES = {INT64: ints, DOUBLE: floats, BOOL: st.booleans(), LARGE_STRING: texts, STRING: texts}


@st.composite
def tables(draw):
    """Columns of the jobs table's kinds, 0 to 40 rows, cut into random pages."""
    rows = draw(st.integers(0, 40))
    kinds = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=6))
    columns = [(f"c{i}", kind, draw(st.lists(VALUES[kind], min_size=rows, max_size=rows))) for i, kind in enumerate(kinds)]
    cuts = sorted(set(draw(st.lists(st.integers(0, rows), max_size=4))) | {0, rows})
    return rows, columns, cuts


def pages(kind: str, values: list, cuts: list[int]) -> list:
    """The values cut into pages as write_parquet takes them (numpy arrays, lists of str or cells)."""
    out = []
    for lo, hi in zip(cuts, cuts[1:]):
        part = values[lo:hi]
        if kind in (LARGE_STRING, STRING):
            out.append(cells.texts(part) if lo % 2 else part)          # both forms a string page takes
        else:
            out.append(np.array(part, dtype={INT64: np.int64, DOUBLE: np.float64, BOOL: bool}[kind]))
    return out


def expected_table(columns) -> pa.Table:
    """The table pyarrow builds from the same data, NaN as null as ``Table.from_pandas`` makes it."""
    arrays = [pa.array(values, type=ARROW_TYPES[kind], from_pandas=True) for _, kind, values in columns]
    return pa.table(arrays, names=[name for name, _, _ in columns])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), compression=st.sampled_from(["none", "gzip"]))
def test_what_pyarrow_reads_back_is_the_table_of_the_same_data(table, compression, tmp_path):
    rows, columns, cuts = table
    path = tmp_path / "t.parquet"
    described = [(name, kind) for name, kind, _ in columns]
    metadata = [(b"pandas", pandas_metadata(described)), (b"greenslurm.schema_version", b"greenslurm.jobs/1")]
    assert write_parquet(path, [(name, kind, pages(kind, values, cuts)) for name, kind, values in columns],
                         metadata, compression=compression) == rows
    read = pq.read_table(path)
    expected = expected_table(columns)
    assert read.schema.equals(expected.schema, check_metadata=False), (read.schema, expected.schema)
    assert read.equals(expected)
    assert read.schema.metadata[b"greenslurm.schema_version"] == b"greenslurm.jobs/1"
    # pandas reads our file as it reads pyarrow's own file of the same frame
    frame = pd.DataFrame({name: pd.Series(values, dtype=PANDAS_DTYPES[kind]) for name, kind, values in columns})
    theirs = tmp_path / "theirs.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), theirs)
    ours, reference = pd.read_parquet(path), pd.read_parquet(theirs)
    assert list(ours.dtypes) == list(reference.dtypes)
    pd.testing.assert_frame_equal(ours, reference, check_exact=True)
    # ... and pyarrow reads it back as the table it builds from that frame (whose strings are large_string)
    if STRING not in [kind for _, kind, _ in columns]:
        assert read.equals(pq.read_table(theirs))


def test_the_pandas_metadata_is_pyarrows_but_for_the_writer(tmp_path):
    # pyarrow's metadata for a frame of each kind; ours names greenslurm as its writer
    frame = pd.DataFrame({"i": pd.Series([1], dtype="int64"), "d": [0.5], "b": [True],
                          "s": pd.Series(["x"], dtype=str)})
    theirs = json.loads(pa.Table.from_pandas(frame, preserve_index=False).schema.metadata[b"pandas"])
    ours = json.loads(pandas_metadata([("i", INT64), ("d", DOUBLE), ("b", BOOL), ("s", LARGE_STRING)]))
    assert ours["creator"]["library"] == "greenslurm"
    for key in ("index_columns", "column_indexes", "attributes"):
        assert ours[key] == theirs[key]
    pyarrow_string = theirs["columns"][3]
    assert ours["columns"][:3] == theirs["columns"][:3]
    # pandas' str column becomes large_string in pyarrow 26 ("object"), string in older ones ("unicode")
    assert ours["columns"][3]["numpy_type"] == pyarrow_string["numpy_type"] == "str"


def test_the_arrow_schema_is_read_by_pyarrow():
    metadata = [(b"k", b"v" * 300), (b"pandas", b"{}")]
    message = arrow_schema([("a", INT64), ("b", DOUBLE), ("c", BOOL), ("d", LARGE_STRING), ("é", STRING)], metadata)
    schema = pa.ipc.read_schema(pa.py_buffer(message))
    assert schema == pa.schema([("a", pa.int64()), ("b", pa.float64()), ("c", pa.bool_()),
                                ("d", pa.large_string()), ("é", pa.string())])
    assert dict(schema.metadata) == dict(metadata)
    assert all(field.nullable for field in schema)
    assert pa.ipc.read_schema(pa.py_buffer(arrow_schema([]))) == pa.schema([])


def test_thrift_compact_bytes_by_hand():
    # field 1 i32 3: header (delta 1 << 4 | type 5) = 0x15, zigzag(3) = 6; field 4 binary "ab": delta 3,
    # type 8 -> 0x38, length 2; field 20 bool true: delta 16 > 15, so type 1 then zigzag(20) = 40 = 0x28;
    # then STOP
    assert thrift_struct([(1, 5, 3), (4, 8, "ab"), (20, 1, True)]) == bytes.fromhex("1506380261620128" "00")
    # i64 -1: zigzag 1; a list of 16 i32 zeros: 0xF5 (15 or more: size after), varint 16, 16 zero bytes
    assert thrift_struct([(1, 6, -1)]) == b"\x16\x01\x00"
    assert thrift_struct([(2, 9, (5, [0] * 16))]) == b"\x29\xf5\x10" + bytes(16) + b"\x00"
    assert varint(2 ** 35) == bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x01])


def test_the_file_is_framed_by_its_magic_and_footer_length(tmp_path):
    path = tmp_path / "t.parquet"
    write_parquet(path, [("a", DOUBLE, [np.array([1.0])])])
    data = path.read_bytes()
    footer = struct.unpack("<I", data[-8:-4])[0]
    assert data[:4] == data[-4:] == b"PAR1" and 8 + footer < len(data)
    assert ARROW_SCHEMA_KEY in pq.ParquetFile(path).metadata.metadata


def test_columns_of_other_lengths_and_bad_compression_are_refused(tmp_path):
    with pytest.raises(ValueError, match="column 'b' has 1 rows"):
        write_parquet(tmp_path / "t.parquet", [("a", DOUBLE, [np.zeros(2)]), ("b", DOUBLE, [np.zeros(1)])])
    with pytest.raises(ValueError, match="compression 'snappy'"):
        write_parquet(tmp_path / "t.parquet", [("a", DOUBLE, [np.zeros(2)])], compression="snappy")


def test_same_data_same_bytes(tmp_path):
    columns = lambda: [("a", DOUBLE, [np.array([0.5, math.nan])]), ("s", LARGE_STRING, [["x", "\x00"]])]
    write_parquet(tmp_path / "1.parquet", columns(), compression="gzip")
    write_parquet(tmp_path / "2.parquet", columns(), compression="gzip")
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()


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


# -- page sizes ---------------------------------------------------------------------------------------
def _compact_int(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint of Thrift's compact protocol at ``at``: (value, position after it)."""
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), at


def _compact_struct(data: bytes, at: int) -> tuple[dict, int]:
    """A compact-protocol struct of integers and structs (a page header): ({field id: value}, end)."""
    fields, last = {}, 0
    while data[at]:
        head = data[at]
        at += 1
        last = last + (head >> 4) if head >> 4 else None
        if last is None:
            last, at = _compact_int(data, at)
        kind = head & 0x0F
        if kind in (5, 6):
            fields[last], at = _compact_int(data, at)
        elif kind == 12:
            fields[last], at = _compact_struct(data, at)
        else:
            raise AssertionError(f"field type {kind} in a page header")
    return fields, at + 1


def page_headers(path, column: int) -> list[dict]:
    """The page headers of a column chunk, read from the file's bytes."""
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(column)
    data, at = path.read_bytes(), chunk.data_page_offset
    headers = []
    while at < chunk.data_page_offset + chunk.total_compressed_size:
        header, at = _compact_struct(data, at)
        headers.append(header)
        at += header[3]                               # the page's compressed size
    return headers


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), compression=st.sampled_from(["none", "gzip"]), page_bytes=st.integers(160, 1200))
def test_pages_larger_than_the_limit_are_split(table, compression, page_bytes, tmp_path):
    # Parquet's page sizes are Thrift i32: a page of 2**31 bytes or more made a file no reader opens
    # ("Invalid or truncated PLAIN-encoded BYTE_ARRAY data" from pyarrow for three 750 MiB strings in
    # one page).  Here the limit is small: every page of every column keeps under it, the rows unchanged.
    rows, columns, cuts = table
    path = tmp_path / "t.parquet"
    assert write_parquet(path, [(name, kind, pages(kind, values, cuts)) for name, kind, values in columns],
                         compression=compression, page_bytes=page_bytes) == rows
    assert pq.read_table(path).equals(expected_table(columns))
    for i in range(len(columns) if rows else 0):
        headers = page_headers(path, i)
        assert sum(h[5][1] for h in headers) == rows                  # DataPageHeader.num_values
        assert all(h[2] <= page_bytes and h[3] <= page_bytes for h in headers), headers


def test_a_value_larger_than_a_page_is_refused(tmp_path):
    # one string of 300 bytes is a page of 4 + 2 (levels) + 4 + 300 bytes at least: more than 200
    with pytest.raises(ValueTooLarge, match="column 's', row 1: a value of 300 bytes"):
        write_parquet(tmp_path / "t.parquet", [("s", LARGE_STRING, [["a", "x" * 300]])], page_bytes=200)
    assert not (tmp_path / "t.parquet").exists()                       # not left cut short


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
