"""A small Parquet writer: one row group, PLAIN encoding, columns written a chunk of rows at a time,
without pandas or pyarrow (the standard library for the file's structure, numpy for the values).

A Parquet file is ``PAR1``, the column chunks one after another (each a run of data pages: a page
header, then the page's definition levels and values, compressed as one block), the footer (a
``FileMetaData`` in Thrift's compact protocol) and its length, and ``PAR1`` again.  Every column is
OPTIONAL (Arrow fields are nullable), so a page holds definition levels, 1 for a value and 0 for a
null (a None string, or a NaN double as pyarrow writes pandas' NaN): one run when every row holds a
value, else bit-packed.  Values are PLAIN: int64 and double
as 8 little-endian bytes, booleans one bit each (first value in the lowest bit), strings as a 4-byte
length and their UTF-8 bytes.

Arrow readers take a column's type from the ``ARROW:schema`` key of the file's key-value metadata,
an Arrow IPC schema message (a FlatBuffer, base64) written here as pyarrow writes it; without it a
string column would read back as ``string``, not ``large_string`` as the pandas path wrote it.
:func:`pandas_metadata` gives the ``pandas`` key pyarrow writes for a DataFrame, so
``pandas.read_parquet`` gives the same dtypes.  Files read back equal to pyarrow's; their bytes differ
(pyarrow adds dictionary pages, statistics and Snappy compression).
"""

from __future__ import annotations

import binascii
import json
import struct
import zlib
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from greenslurm.sim.reporting.cells import checked, compiled, offsets_of, texts
from greenslurm.sim.reporting.whole_files import whole_file

# column kinds (Arrow type names): the Parquet physical type and the Arrow FlatBuffer type
INT64, DOUBLE, BOOL, LARGE_STRING, STRING = "int64", "double", "bool", "large_string", "string"
_PHYSICAL = {INT64: 2, DOUBLE: 5, BOOL: 0, LARGE_STRING: 6, STRING: 6}   # Thrift Type: INT64, DOUBLE, BOOLEAN, BYTE_ARRAY
_ARROW_TYPE = {INT64: 2, DOUBLE: 3, BOOL: 6, LARGE_STRING: 20, STRING: 5}  # Arrow Type union: Int, FloatingPoint, Bool, LargeUtf8, Utf8
_PANDAS_TYPES = {INT64: ("int64", "int64"), DOUBLE: ("float64", "float64"), BOOL: ("bool", "bool"),
                 LARGE_STRING: ("object", "str"), STRING: ("unicode", "str")}
CODECS = {"none": 0, "gzip": 2}          # Thrift CompressionCodec: UNCOMPRESSED, GZIP
MAGIC = b"PAR1"
PAGE_BYTES = 2 ** 31 - 1                 # a page's sizes are Thrift i32 in its header
ARROW_SCHEMA_KEY = b"ARROW:schema"

# -- Thrift compact protocol --------------------------------------------------------------------------
# field types of the compact protocol
_TRUE, _FALSE, _I8, _I32, _I64, _BINARY, _LIST, _STRUCT = 1, 2, 3, 5, 6, 8, 9, 12


class ValueTooLarge(ValueError):
    """One value is larger than a Parquet page can hold (a page's size is a Thrift i32: under 2 GiB)."""


def varint(n: int) -> bytes:
    """``n`` >= 0 as a ULEB128 varint: 7 bits a byte, low bits first, the top bit set on all but the last.

    >>> varint(1).hex(), varint(300).hex()
    ('01', 'ac02')
    """
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zigzag(n: int) -> int:
    """Signed to unsigned, small magnitudes small: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    return (n << 1) ^ (n >> 63)


def thrift_struct(fields: Sequence[tuple[int, int, Any]]) -> bytes:
    """A struct in Thrift's compact protocol from (field id, compact type, value), ids ascending, None
    values left out.  A value is an int (i8, i32, i64), bool, bytes or str (binary), bytes of an
    encoded struct, or for a list ``(element type, [values])``.

    >>> thrift_struct([(1, _I32, 3), (4, _BINARY, "ab"), (20, _TRUE, True)]).hex()
    '150638026162012800'
    """
    out = bytearray()
    last = 0
    for field_id, kind, value in fields:
        if value is None:
            continue
        if kind in (_TRUE, _FALSE):
            kind = _TRUE if value else _FALSE
        delta = field_id - last
        if 0 < delta <= 15:
            out.append(delta << 4 | kind)
        else:
            out.append(kind)
            out += varint(_zigzag(field_id))
        last = field_id
        if kind not in (_TRUE, _FALSE):
            out += _thrift_value(kind, value)
    out.append(0)                                     # STOP
    return bytes(out)


def _thrift_value(kind: int, value: Any) -> bytes:
    if kind == _I8:
        return struct.pack("<b", value)
    if kind in (_I32, _I64):
        return varint(_zigzag(value))
    if kind == _BINARY:
        data = value.encode("utf-8") if isinstance(value, str) else value
        return varint(len(data)) + data
    if kind == _STRUCT:
        return value
    if kind == _LIST:
        element, values = value
        head = bytes([len(values) << 4 | element]) if len(values) < 15 else bytes([0xF0 | element]) + varint(len(values))
        return head + b"".join(_thrift_value(element, v) for v in values)
    raise ValueError(f"no compact encoding for field type {kind}")


# -- the Arrow schema (a FlatBuffer) ------------------------------------------------------------------
# A table is a list of slots (its fields in schema order): None when absent, else (kind, value) with kind
# "u8", "i16", "i32", "i64" (scalars) or "ref" (a table: a list; a string: bytes; a vector of tables: a
# tuple).  The buffer is laid out forwards: a table before what it refers to, so every reference
# (an unsigned offset) points forward, as FlatBuffers requires.
_SIZES = {"u8": 1, "i16": 2, "i32": 4, "i64": 8, "ref": 4}
_FORMATS = {"u8": "<B", "i16": "<h", "i32": "<i", "i64": "<q"}


def _pad(out: bytearray, align: int) -> None:
    out += bytes(-len(out) % align)


def _fb_put(out: bytearray, node) -> int:
    """Append ``node`` (table, string or vector of tables) to ``out``; its position."""
    if isinstance(node, bytes):                       # a string: length, bytes, a NUL
        _pad(out, 4)
        at = len(out)
        out += struct.pack("<I", len(node)) + node + b"\0"
        return at
    if isinstance(node, tuple):                       # a vector of tables: length, then an offset each
        _pad(out, 4)
        at = len(out)
        out += struct.pack("<I", len(node)) + bytes(4 * len(node))
        for i, child in enumerate(node):
            _fb_ref(out, at + 4 + 4 * i, _fb_put(out, child))
        return at
    # a table: its vtable (sizes and each slot's offset in the table), then the table (the vtable's
    # distance, then the fields, widest first so each is aligned)
    slots = list(node)
    while slots and slots[-1] is None:
        slots.pop()
    present = sorted((i for i, s in enumerate(slots) if s is not None), key=lambda i: -_SIZES[slots[i][0]])
    offsets, size = [0] * len(slots), 4
    for i in present:
        width = _SIZES[slots[i][0]]
        size += -size % width
        offsets[i] = size
        size += width
    _pad(out, 2)
    vtable_at = len(out)
    out += struct.pack(f"<HH{len(slots)}H", 4 + 2 * len(slots), size, *offsets)
    _pad(out, max([4] + [_SIZES[slots[i][0]] for i in present]))
    at = len(out)
    out += struct.pack("<i", at - vtable_at) + bytes(size - 4)
    for i in present:
        kind, value = slots[i]
        if kind != "ref":
            struct.pack_into(_FORMATS[kind], out, at + offsets[i], value)
    for i in present:
        kind, value = slots[i]
        if kind == "ref":
            _fb_ref(out, at + offsets[i], _fb_put(out, value))
    return at


def _fb_ref(out: bytearray, at: int, target: int) -> None:
    struct.pack_into("<I", out, at, target - at)


def _key_values(pairs: Sequence[tuple[bytes, bytes]]) -> tuple:
    return tuple([("ref", key), ("ref", value)] for key, value in pairs)       # KeyValue: key, value


def arrow_schema(columns: Sequence[tuple[str, str]], metadata: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    """The Arrow IPC message of a schema of nullable ``(name, kind)`` fields: the continuation mark, the
    FlatBuffer's length and the FlatBuffer (a ``Message`` of version V5 holding a ``Schema``), padded
    to 8 bytes.  pyarrow keeps it, base64, under ``ARROW:schema`` in the file's metadata.

    >>> message = arrow_schema([("n", INT64)])
    >>> message[:4].hex(), len(message) % 8, struct.unpack_from("<i", message, 4)[0] == len(message) - 8
    ('ffffffff', 0, True)
    """
    def type_table(kind: str) -> list:
        if kind == INT64:
            return [("i32", 64), ("u8", 1)]           # Int: bitWidth, is_signed
        if kind == DOUBLE:
            return [("i16", 2)]                       # FloatingPoint: precision DOUBLE
        return []                                     # Bool, LargeUtf8, Utf8: no fields

    fields = tuple([("ref", name.encode("utf-8")), ("u8", 1), ("u8", _ARROW_TYPE[kind]), ("ref", type_table(kind)),
                    None, ("ref", ())] for name, kind in columns)
    # Field: name, nullable, type_type, type, dictionary, children
    schema = [None, ("ref", fields), ("ref", _key_values(metadata)) if metadata else None]   # endianness Little
    message = [("i16", 4), ("u8", 1), ("ref", schema)]        # Message: version V5, header_type Schema, header
    buffer = bytearray(4)
    struct.pack_into("<I", buffer, 0, _fb_put(buffer, message))
    _pad(buffer, 8)
    return b"\xff\xff\xff\xff" + struct.pack("<i", len(buffer)) + bytes(buffer)


def pandas_metadata(columns: Sequence[tuple[str, str]], creator: str = "greenslurm") -> bytes:
    """The ``pandas`` metadata pyarrow writes for a DataFrame of these columns (no index): each column's
    pandas and numpy type, which ``pandas.read_parquet`` reads back (``creator`` names the writer).

    >>> json.loads(pandas_metadata([("a", DOUBLE)]))["columns"]
    [{'name': 'a', 'field_name': 'a', 'pandas_type': 'float64', 'numpy_type': 'float64', 'metadata': None}]
    """
    from greenslurm import __version__
    described = [{"name": name, "field_name": name, "pandas_type": _PANDAS_TYPES[kind][0],
                  "numpy_type": _PANDAS_TYPES[kind][1], "metadata": None} for name, kind in columns]
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": described, "attributes": {},
                       "creator": {"library": creator, "version": __version__}}).encode("utf-8")


# -- pages --------------------------------------------------------------------------------------------
def _levels(defined: np.ndarray | None, rows: int) -> bytes:
    """Definition levels (bit width 1) in the RLE/bit-packed hybrid, after their 4-byte length: every
    row defined is one run (its length shifted left once, the low bit 0 saying "run", then the value
    1); else the levels bit-packed (the count of 8-level groups shifted left once, the low bit 1,
    then the bits, the first level in the lowest bit).

    >>> _levels(None, 3).hex(), _levels(np.array([True, True, False]), 3).hex()
    ('020000000601', '020000000303')
    """
    if defined is None or defined.all():
        runs = varint(rows << 1) + b"\x01" if rows else b""
    else:
        runs = varint(((rows + 7) // 8) << 1 | 1) + np.packbits(defined, bitorder="little").tobytes()
    return struct.pack("<I", len(runs)) + runs


def _string_values(values) -> tuple[bytes, np.ndarray | None]:
    """PLAIN byte arrays of a chunk of strings and which rows hold a value (None: all).  ``values`` is
    a list of str (None: a null) or ``(data, sizes)``: the UTF-8 bytes of all values one after
    another and each one's length (see :mod:`greenslurm.sim.reporting.cells`)."""
    defined = None
    if isinstance(values, tuple):
        data, sizes = values
    else:
        try:
            data, sizes = texts(values)
        except TypeError:                               # a None among them: a null
            defined = np.fromiter((v is not None for v in values), bool, len(values))
            data, sizes = texts([v for v in values if v is not None])
    if len(sizes) and int(np.max(sizes)) >= 2 ** 31:
        # a PLAIN byte array's length is 4 bytes, an int32 to readers: a longer one would wrap
        raise ValueError(f"a string of 2 GiB or more ({int(np.max(sizes))} bytes) in a Parquet page")
    # each value is its length (4 bytes, little-endian) then its bytes: the lengths go at their
    # places, the bytes in the rest
    library = compiled()
    if library is not None:
        data, sizes = checked((data, sizes))
        out = np.empty(4 * len(sizes) + len(data), dtype=np.uint8)
        end = library.cells_length_prefixed(data.ctypes.data, sizes.ctypes.data, len(sizes), out.ctypes.data)
        return out[:end].tobytes(), defined
    out = np.empty(4 * len(sizes) + len(data), dtype=np.uint8)
    heads = offsets_of(sizes + 4)[:-1]
    is_data = np.ones(len(out), dtype=bool)
    places = (heads[:, None] + np.arange(4)).ravel()
    is_data[places] = False
    out[places] = sizes.astype("<u4").view(np.uint8)
    out[is_data] = data
    return out.tobytes(), defined


def _page_body(kind: str, chunk) -> tuple[int, bytes]:
    """(rows, definition levels and PLAIN values) of one page.  A NaN double is written as a null, as
    pyarrow's ``Table.from_pandas`` does (pandas reads a null back as NaN)."""
    if kind in (LARGE_STRING, STRING):
        values, defined = _string_values(chunk)
        rows = len(chunk[1]) if isinstance(chunk, tuple) else len(chunk)
        return rows, _levels(defined, rows) + values
    array = np.asarray(chunk)
    rows, defined = len(array), None
    if kind == BOOL:
        values = np.packbits(array.astype(bool), bitorder="little").tobytes()
    else:
        array = np.ascontiguousarray(array, dtype="<i8" if kind == INT64 else "<f8")
        if kind == DOUBLE:
            defined = ~np.isnan(array)
            if not defined.all():
                array = array[defined]
        values = array.tobytes()
    return rows, _levels(defined, rows) + values


def _pages(name: str, kind: str, chunk, compress, page_bytes: int, first_row: int):
    """(rows, body, compressed body) of the pages of one chunk of rows (none when it has no rows): the
    chunk as one page, or its halves' pages when that page passes ``page_bytes``."""
    count, body = _page_body(kind, chunk)
    if not count:
        return
    packed = compress(body)
    if max(len(body), len(packed)) <= page_bytes:
        yield count, body, packed
        return
    if count == 1:
        value = (int(chunk[1][0]) if isinstance(chunk, tuple) else len(chunk[0].encode("utf-8"))
                 if isinstance(chunk, list) else len(body))
        raise ValueTooLarge(f"column {name!r}, row {first_row}: a value of {value} bytes, more than a Parquet page "
                            f"holds ({page_bytes} bytes)")
    half = count // 2
    if isinstance(chunk, tuple):                      # cells: the first half's bytes, then the rest
        data, sizes = chunk
        cut = int(sizes[:half].sum())
        halves = (data[:cut], sizes[:half]), (data[cut:], sizes[half:])
    else:
        halves = chunk[:half], chunk[half:]
    yield from _pages(name, kind, halves[0], compress, page_bytes, first_row)
    yield from _pages(name, kind, halves[1], compress, page_bytes, first_row + half)


class _Compressor:
    def __init__(self, codec: str, level: int) -> None:
        if codec not in CODECS:
            raise ValueError(f"compression {codec!r}: one of {', '.join(CODECS)}")
        self.codec, self.level = codec, level

    def __call__(self, data: bytes) -> bytes:
        if self.codec == "none":
            return data
        packer = zlib.compressobj(self.level, zlib.DEFLATED, 31)      # 31: a gzip member (RFC 1952)
        return packer.compress(data) + packer.flush()


def write_parquet(path, columns: Sequence[tuple[str, str, Iterable]], metadata: Sequence[tuple[bytes, bytes]] = (),
                  compression: str | Mapping[str, str] = "gzip", level: int = 1, created_by: str = "greenslurm",
                  page_bytes: int = PAGE_BYTES) -> int:
    """Write a Parquet file of ``columns``, each ``(name, kind, chunks)``: ``chunks`` an iterable of
    numpy arrays (int64, double, bool) or for strings lists of str (None: a null) or ``(data, sizes)``
    cells (:mod:`~greenslurm.sim.reporting.cells`), one data page each, or several when a page's bytes
    (compressed or not) would pass ``page_bytes`` (cut in halves, again and again: a page's sizes are
    Thrift i32, so at most 2**31 - 1 bytes); every column must give the same number of rows.
    ``metadata``: the file's key-value pairs (the Arrow schema is added); ``compression``: "none" or
    "gzip" (zlib at ``level``) for every column, or by column name (a column not named: "none").
    Returns the number of rows.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_parquet(os.path.join(folder, "t.parquet"), [("a", DOUBLE, [np.array([1.5, 2.0])]),
    ...                                                      ("b", LARGE_STRING, [["x", "é"]])])
    2
    """
    chunks_meta, rows_seen = [], None
    with whole_file(path) as handle:          # a file cut short is removed
        handle.write(MAGIC)
        at = len(MAGIC)
        for name, kind, chunks in columns:
            compress = _Compressor(compression if isinstance(compression, str) else compression.get(name, "none"), level)
            first, rows, raw_size, packed_size = at, 0, 0, 0
            for chunk in chunks:
                for count, body, packed in _pages(name, kind, chunk, compress, page_bytes, rows):
                    # PageHeader: type DATA_PAGE, uncompressed and compressed sizes, DataPageHeader (values,
                    # PLAIN, levels RLE, RLE)
                    header = thrift_struct([(1, _I32, 0), (2, _I32, len(body)), (3, _I32, len(packed)),
                                            (5, _STRUCT, thrift_struct([(1, _I32, count), (2, _I32, 0), (3, _I32, 3),
                                                                         (4, _I32, 3)]))])
                    handle.write(header)
                    handle.write(packed)
                    at += len(header) + len(packed)
                    rows += count
                    raw_size += len(header) + len(body)
                    packed_size += len(header) + len(packed)
            if rows_seen is not None and rows != rows_seen:
                raise ValueError(f"column {name!r} has {rows} rows, the columns before it {rows_seen}")
            rows_seen = rows
            # ColumnMetaData: type, encodings (PLAIN, RLE), path, codec, values, sizes, first data page
            meta = thrift_struct([(1, _I32, _PHYSICAL[kind]), (2, _LIST, (_I32, [0, 3])), (3, _LIST, (_BINARY, [name])),
                                  (4, _I32, CODECS[compress.codec]), (5, _I64, rows), (6, _I64, raw_size),
                                  (7, _I64, packed_size), (9, _I64, first)])
            chunks_meta.append((thrift_struct([(2, _I64, first), (3, _STRUCT, meta)]), raw_size, packed_size))
        rows = rows_seen or 0
        described = [(name, kind) for name, kind, _ in columns]
        schema_base64 = binascii.b2a_base64(arrow_schema(described, metadata), newline=False)
        pairs = list(metadata) + [(ARROW_SCHEMA_KEY, schema_base64)]
        # SchemaElement: the root (REQUIRED group), then each column: type, OPTIONAL, name, and for
        # strings converted type UTF8 and logical type STRING
        schema = [thrift_struct([(3, _I32, 0), (4, _BINARY, "schema"), (5, _I32, len(described))])]
        for name, kind in described:
            text = kind in (LARGE_STRING, STRING)
            schema.append(thrift_struct([(1, _I32, _PHYSICAL[kind]), (3, _I32, 1), (4, _BINARY, name),
                                         (6, _I32, 0 if text else None),
                                         (10, _STRUCT, thrift_struct([(1, _STRUCT, thrift_struct([]))]) if text else None)]))
        groups = []
        if rows:                                      # no row group for no rows
            groups.append(thrift_struct([(1, _LIST, (_STRUCT, [c for c, _, _ in chunks_meta])),
                                         (2, _I64, sum(r for _, r, _ in chunks_meta)), (3, _I64, rows)]))
        footer = thrift_struct([(1, _I32, 2), (2, _LIST, (_STRUCT, schema)), (3, _I64, rows),
                                (4, _LIST, (_STRUCT, groups)),
                                (5, _LIST, (_STRUCT, [thrift_struct([(1, _BINARY, k), (2, _BINARY, v)]) for k, v in pairs])),
                                (6, _BINARY, created_by)])
        handle.write(footer + struct.pack("<I", len(footer)) + MAGIC)
    return rows
