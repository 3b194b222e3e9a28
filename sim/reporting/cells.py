"""Table cells as bytes, a whole column at a time: the text the csv module writes for a value
(``lineterminator="\\n"``, minimal quoting), laid out by numpy instead of a Python string per cell.

A column of cells is ``(data, sizes)``: the UTF-8 bytes of all cells one after another (uint8) and each
cell's length in bytes (int64).  Rows are then put together by placing each column's bytes after the
row's earlier cells and a comma (:func:`csv_rows`); jobs.parquet takes string columns in the same
form.  The texts are those of the csv module: a float as its ``repr`` (the shortest text that reads
back to the same double: ``1.5``, ``1e+16``, ``inf``, ``-0.0``), NaN as an empty cell, an integer in
decimal, a bool as ``True``/``False``, a string as it is or quoted when it holds a comma, a quote, a
line feed or a carriage return (the csv module itself writes those).

The cells are made by the compiled library ``_cells.c`` when it is built (the same bytes, a value at
a time, floats by CPython's own repr), or by the numpy definitions here.  ``GREENSLURM_CELLS_CORE``
chooses: ``auto`` (the default: compiled when built), ``compiled`` or ``python``.
"""

from __future__ import annotations

import ctypes
import io
import os
from typing import Sequence

import numpy as np

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.native import load_beside, warn_missing_once

Cells = tuple  # (data: uint8 array, sizes: int64 array)
_EXACT_INTEGERS = 2.0 ** 53          # below it every integer is a double: its repr is its digits and ".0"
_POWERS = 10 ** np.arange(1, 20, dtype=np.uint64)   # 10 .. 10**19
_QUAD_WORDS: list = []                # made at the first use (a millisecond the compiled cells never need)


def quad_words() -> np.ndarray:
    """"0000" .. "9999", each as the 4-byte word whose bytes in memory are those characters.

    >>> quad_words()[42].tobytes()
    b'0042'
    """
    if not _QUAD_WORDS:
        _QUAD_WORDS.append((np.arange(10000)[:, None] // np.array([1000, 100, 10, 1]) % 10 + ord("0"))
                           .astype(np.uint8).view(np.uint32).ravel())
    return _QUAD_WORDS[0]
_QUOTED = (",", '"', "\n", "\r")     # a cell holding one of these is quoted (the delimiter, the quote, line ends)
ENV = "GREENSLURM_CELLS_CORE"
CHOICES = ("auto", "compiled", "python")
_FLOAT_CELL_BYTES = 32               # the compiled library's room for one float's text (a repr is at most 24 bytes)
_POINTER, _SIZE = ctypes.c_void_p, ctypes.c_int64
_SIGNATURES = {"cells_digits": [_POINTER, _SIZE, ctypes.c_char_p, _SIZE, _POINTER, _POINTER],
               "cells_floats": [_POINTER, _SIZE, _POINTER, _POINTER],
               "cells_node_lists": [_POINTER, _POINTER, _SIZE, _POINTER, ctypes.c_int, _POINTER, _POINTER],
               "cells_csv_table": [_SIZE, _SIZE, _POINTER, _POINTER, _POINTER, _POINTER],
               "cells_strings": [_POINTER, _SIZE, _POINTER, _POINTER, _POINTER],
               "cells_object_codes": [_POINTER, _SIZE, _SIZE, _POINTER, _POINTER]}
_LIBRARY: list = []                  # [the library or None] once looked for


def compiled_library() -> ctypes.PyDLL | None:
    """The compiled cells next to this module (built at install), or None; looked for once (a table
    asks for every column of every chunk)."""
    if not _LIBRARY:
        library = load_beside(__file__, "_cells", python_api=True)
        if library is not None:
            for name, arguments in _SIGNATURES.items():
                function = getattr(library, name)
                function.argtypes, function.restype = arguments, _SIZE
        _LIBRARY.append(library)
    return _LIBRARY[0]


def chosen_core() -> str:
    """Which code makes the cells: ``compiled`` or ``python`` (from ``GREENSLURM_CELLS_CORE``)."""
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise InputError(f"{choice!r} is not a core; choose from {', '.join(CHOICES)}", path="environment",
                         field=ENV)
    if choice == "python":
        return choice
    if compiled_library() is None:
        if choice == "compiled":
            raise InputError("the compiled cells are not built (install greenslurm where a C compiler is)",
                             path="environment", field=ENV)
        warn_missing_once()                 # not built: loud, once, then the numpy definition
        return "python"
    return "compiled"


def compiled() -> ctypes.PyDLL | None:
    """The compiled library when it makes the cells (:func:`chosen_core`), else None."""
    return compiled_library() if chosen_core() == "compiled" else None


def spans(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions ``starts[k], ..., starts[k] + sizes[k] - 1`` for each k, in turn: a running sum
    of steps of 1, with a jump where each span begins (int32 when the positions fit: half the memory).

    >>> spans(np.array([10, 3, 7, 0]), np.array([2, 3, 0, 1])).tolist()
    [10, 11, 3, 4, 5, 0]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    if not sizes.all():
        kept = sizes > 0
        starts, sizes = starts[kept], sizes[kept]
    total = int(sizes.sum())
    small = not len(sizes) or int(starts.max()) + int(sizes.max()) < 2 ** 31 and total < 2 ** 31
    steps = np.ones(total, dtype=np.int32 if small else np.int64)
    if len(sizes):
        begins = np.zeros(len(sizes), dtype=np.int64)
        np.cumsum(sizes[:-1], out=begins[1:])
        steps[0] = starts[0]
        steps[begins[1:]] = starts[1:] - (starts[:-1] + sizes[:-1] - 1)
    return np.cumsum(steps, out=steps)


def offsets_of(sizes: np.ndarray) -> np.ndarray:
    """Where each cell starts when cells of ``sizes`` follow one another (one more entry: the end)."""
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


def digits(values: np.ndarray, suffix: bytes = b"") -> Cells:
    """int64 values in decimal (as ``str``), each followed by ``suffix`` (at most 4 bytes), made for
    all at once: every number is written right-aligned in a row of bytes, four digits at a time from
    a table of "0000" to "9999" (a group is one 4-byte word), then the suffix; its sign is put just
    before its first digit, and each row's sign, digits and suffix taken, row after row.

    >>> data, sizes = digits(np.array([0, 7, -12, 2**63 - 1, -2**63, 10**8]))
    >>> bytes(data).decode(), sizes.tolist()
    ('07-129223372036854775807-9223372036854775808100000000', [1, 1, 3, 19, 20, 9])
    >>> bytes(digits(np.array([5]), b".0")[0])
    b'5.0'
    """
    library = compiled()
    if library is not None:
        _suffix_word(suffix)
        values = np.ascontiguousarray(values, dtype=np.int64)
        out = np.empty(len(values) * (20 + len(suffix)), dtype=np.uint8)
        sizes = np.empty(len(values), dtype=np.int64)
        end = library.cells_digits(values.ctypes.data, len(values), suffix, len(suffix), out.ctypes.data,
                                   sizes.ctypes.data)
        return out[:end], sizes
    values = np.asarray(values, dtype=np.int64)
    negative = values < 0
    magnitude = values.astype(np.uint64)
    magnitude[negative] = ~magnitude[negative] + np.uint64(1)       # two's complement: |x|, even for -2**63
    count = 1 + np.searchsorted(_POWERS, magnitude, side="right")   # how many digits
    groups = (int(count.max()) + 3) // 4 if len(values) else 0
    # a row: a word for the sign, the digits' words, the suffix's word
    words = np.empty((len(values), groups + 2), dtype=np.uint32)
    words[:, groups + 1] = _suffix_word(suffix)
    # eight digits at a time in 64 bits, then four at a time in 32 (cheaper divisions)
    quads = quad_words()
    for g in range(groups, 0, -2):
        low = (magnitude % np.uint64(100_000_000)).astype(np.uint32)
        magnitude //= np.uint64(100_000_000)
        words[:, g] = quads[low % np.uint32(10000)]
        if g > 1:
            words[:, g - 1] = quads[low // np.uint32(10000)]
    row_bytes = words.view(np.uint8)
    width = 4 * (groups + 2)
    sizes = (count + negative).astype(np.int64)
    first = 4 * (groups + 1) - sizes                  # where each cell begins in its row
    signed = np.flatnonzero(negative)
    row_bytes[signed, first[signed]] = ord("-")
    sizes += len(suffix)
    return row_bytes.ravel()[spans(np.arange(len(values), dtype=np.int64) * width + first, sizes)], sizes


def _suffix_word(suffix: bytes) -> np.uint32:
    if len(suffix) > 4:
        raise ValueError(f"a suffix of at most 4 bytes, not {suffix!r}")
    return np.frombuffer(suffix.ljust(4, b"\0"), dtype=np.uint32)[0]


def texts(values: Sequence[str], joined: str | None = None) -> Cells:
    """Strings as they are (UTF-8); ``joined``: ``"".join(values)`` when the caller has it.

    >>> data, sizes = texts(["ab", "", "é"])
    >>> bytes(data), sizes.tolist()
    (b'ab\\xc3\\xa9', [2, 0, 2])
    >>> data, sizes = texts(["", ""])
    >>> bytes(data), sizes.tolist(), sizes.dtype
    (b'', [0, 0], dtype('int64'))
    """
    data = ("".join(values) if joined is None else joined).encode("utf-8")
    if not data:                                        # all empty (an SWF log's partitions): no string looked at
        return np.frombuffer(data, dtype=np.uint8), np.zeros(len(values), dtype=np.int64)
    sizes = np.fromiter(map(len, values), np.int64, len(values))
    if len(data) != int(sizes.sum()):                  # not ASCII: a character may be several bytes
        sizes = np.fromiter((len(v.encode("utf-8")) for v in values), np.int64, len(values))
    return np.frombuffer(data, dtype=np.uint8), sizes


_NOT_ALL_STR, _QUOTED_STRING = -3, -4   # cells_strings: an item not a str, a string CSV quotes


def plain_texts(values: Sequence) -> Cells | None:
    """:func:`texts` of strings none of which CSV quotes, or None when an item is not a str (None) or a
    string holds a comma, a quote or a line end (:data:`_QUOTED`).  An object array's strings are read
    by the compiled library, without a Python string made or a length asked for each.

    >>> data, sizes = plain_texts(np.array(["ab", "", "é", "ab"], dtype=object))
    >>> bytes(data), sizes.tolist()
    (b'ab\xc3\xa9ab', [2, 0, 2, 2])
    >>> plain_texts(np.array(["a", None], dtype=object)), plain_texts(['say "hi"'])
    (None, None)
    """
    library = compiled()
    if library is None or not isinstance(values, np.ndarray) or values.dtype != object:
        values = values.tolist() if isinstance(values, np.ndarray) else list(values)
        try:
            joined = "".join(values)
        except TypeError:                               # an item not a str (None among them)
            return None
        if any(mark in joined for mark in _QUOTED):
            return None
        return texts(values, joined)
    values = np.ascontiguousarray(values)
    where = np.empty(len(values), dtype=np.intp)
    sizes = np.empty(len(values), dtype=np.int64)
    total = library.cells_strings(values.ctypes.data, len(values), where.ctypes.data, sizes.ctypes.data, None)
    if total in (_NOT_ALL_STR, _QUOTED_STRING):
        return None
    data = np.empty(total, dtype=np.uint8)
    library.cells_strings(values.ctypes.data, len(values), where.ctypes.data, sizes.ctypes.data, data.ctypes.data)
    return data, sizes


def object_codes(values: np.ndarray, most: int = 4096) -> tuple[np.ndarray, np.ndarray] | None:
    """An object array as its distinct objects (by identity, in the order they first appear) and each
    item's int32 code into them, so that ``labels.take(codes)`` holds the same objects; None when
    there are more than ``most`` distinct ones or the compiled library does not make cells (then
    the array is best kept as it is).

    >>> a, b = "x" * 3, "y" * 3
    >>> labels, codes = object_codes(np.array([a, b, a, None, a], dtype=object)) or (None, None)
    >>> labels.tolist() if compiled() else ["xxx", "yyy", None], codes.tolist() if compiled() else [0, 1, 0, 2, 0]
    (['xxx', 'yyy', None], [0, 1, 0, 2, 0])
    """
    library = compiled()
    if library is None or values.dtype != object:
        return None
    values = np.ascontiguousarray(values)
    codes = np.empty(len(values), dtype=np.int32)
    firsts = np.empty(min(len(values), most), dtype=np.int64)
    distinct = library.cells_object_codes(values.ctypes.data, len(values), most, codes.ctypes.data, firsts.ctypes.data)
    if distinct < 0:
        return None
    return values.take(firsts[:distinct]), codes


def choices(codes: np.ndarray, options: Sequence[bytes]) -> Cells:
    """The cell ``options[code]`` for each code (bools, a few distinct values).

    >>> data, sizes = choices(np.array([1, 0, 1]), [b"False", b"True"])
    >>> bytes(data), sizes.tolist()
    (b'TrueFalseTrue', [4, 5, 4])
    """
    option_sizes = np.fromiter(map(len, options), np.int64, len(options))
    blob = np.frombuffer(b"".join(options), dtype=np.uint8)
    sizes = option_sizes[codes]
    return blob[spans(offsets_of(option_sizes)[:-1][codes], sizes)], sizes


def place(n: int, parts: Sequence[tuple[np.ndarray, Cells]]) -> Cells:
    """One column of ``n`` cells from parts, each ``(rows, cells)``: the cells of those rows (rows
    in no part are empty).

    >>> data, sizes = place(3, [(np.array([2, 0]), (np.frombuffer(b"xyz", np.uint8), np.array([1, 2])))])
    >>> bytes(data), sizes.tolist()
    (b'yzx', [2, 0, 1])
    """
    sizes = np.zeros(n, dtype=np.int64)
    for rows, (_, part_sizes) in parts:
        sizes[rows] = part_sizes
    starts = offsets_of(sizes)
    data = np.empty(int(starts[-1]), dtype=np.uint8)
    for rows, (part_data, part_sizes) in parts:
        data[spans(starts[rows], part_sizes)] = part_data
    return data, sizes


def take(cells: Cells, rows: np.ndarray) -> Cells:
    """The cells of ``rows``, in their order.

    >>> data, sizes = take(texts(["a", "bc", "d"]), np.array([2, 1]))
    >>> bytes(data), sizes.tolist()
    (b'dbc', [1, 2])
    """
    data, sizes = cells
    return data[spans(offsets_of(sizes)[:-1][rows], sizes[rows])], sizes[rows]


def float_cells(values: np.ndarray, memo: dict | None = None) -> Cells:
    """Doubles as the csv module writes them: their ``repr``, NaN empty.  Whole numbers below 2**53
    are their digits and ".0" (what ``repr`` gives for them), made for all at once; the rest (and
    -0.0) go through ``repr``, each distinct value once; ``memo`` keeps those texts for the next
    column (a bounded slowdown is often the slowdown).  No 0.0 reaches it (0.0 is whole), so -0.0,
    equal to 0.0 as a key, keeps its own text.

    >>> data, sizes = float_cells(np.array([3.0, 0.1, float("nan"), -0.0, 1e16, -5.0, float("inf")]))
    >>> bytes(data).decode(), sizes.tolist()
    ('3.00.1-0.01e+16-5.0inf', [3, 3, 0, 4, 5, 4, 3])
    """
    library = compiled()
    if library is not None:
        values = np.ascontiguousarray(values, dtype=np.float64)
        out = np.empty(len(values) * _FLOAT_CELL_BYTES, dtype=np.uint8)
        sizes = np.empty(len(values), dtype=np.int64)
        end = library.cells_floats(values.ctypes.data, len(values), out.ctypes.data, sizes.ctypes.data)
        if end < 0:
            raise RuntimeError(f"a float's repr longer than {_FLOAT_CELL_BYTES} bytes")
        return out[:end], sizes
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        whole = (np.abs(values) < _EXACT_INTEGERS) & (values == np.trunc(values))
    whole &= ~((values == 0) & np.signbit(values))
    if whole.all():
        return digits(values.astype(np.int64), b".0")
    rest = np.flatnonzero(~whole & ~np.isnan(values))
    whole_rows = np.flatnonzero(whole)
    parts = [(whole_rows, digits(values[whole_rows].astype(np.int64), b".0"))] if len(whole_rows) else []
    if len(rest):
        others = values[rest].tolist()
        memo = {} if memo is None else memo
        missing = [value for value in dict.fromkeys(others) if value not in memo]
        memo.update(zip(missing, map(float.__repr__, missing)))
        reprs = list(map(memo.__getitem__, others))
        if len(rest) == len(values):
            return texts(reprs)
        parts.append((rest, texts(reprs)))
    return place(len(values), parts)


def csv_texts(values: Sequence[str | None]) -> Cells:
    """Strings as CSV cells: as they are, or quoted by the csv module when they may need it; None empty.

    >>> data, sizes = csv_texts(["a,b", 'a"b', "x", None, "c\\rr"])
    >>> bytes(data).decode(), sizes.tolist()
    ('"a,b""a""b"x"c\\rr"', [5, 6, 1, 0, 5])
    """
    try:
        joined = "".join(values)
    except TypeError:                                   # a None among them
        values = ["" if v is None else v for v in values]
        joined = "".join(values)
    if not any(mark in joined for mark in _QUOTED):
        return texts(values, joined)
    return texts(quoted(values))


def quoted(values: Sequence[str | None]) -> list[str]:
    """:func:`csv_texts` as strings: the csv module's cell for a string holding a comma, a quote or a
    line break, written with the line end "\\r\\n" so that a carriage return is quoted too (with "\\n"
    the module leaves it bare, and CSV readers end the row there)."""
    values = ["" if v is None else v for v in values] if None in values else list(values)
    joined = "".join(values)
    if not any(mark in joined for mark in _QUOTED):
        return values
    import csv                       # loaded when a cell needs quoting (most tables have none)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    for i, value in enumerate(values):
        if any(mark in value for mark in _QUOTED):
            buffer.seek(0)
            buffer.truncate()
            writer.writerow([value, ""])          # two cells: a lone empty cell would be quoted
            values[i] = buffer.getvalue()[:-3]    # less the separator and the line end
    return values


def csv_rows(columns: Sequence[Cells]) -> bytes:
    """Rows of the cells of ``columns`` (equal lengths): cells joined by commas, each row ended by "\\n".

    >>> csv_rows([texts(["a", "bc"]), float_cells(np.array([1.5, float("nan")]))])
    b'a,1.5\\nbc,\\n'
    >>> csv_rows([texts(["", "x"])])
    b'""\\nx\\n'
    """
    n = len(columns[0][1])
    if len(columns) == 1 and not columns[0][1].all():
        # the csv module quotes an empty cell that is a row's only one ("" rather than an empty line)
        empty = columns[0][1] == 0
        filled = np.flatnonzero(~empty)
        columns = [place(n, [(filled, take(columns[0], filled)),
                             (np.flatnonzero(empty), choices(np.zeros(int(empty.sum()), np.intp), [b'""']))])]
    library = compiled()
    if library is not None:
        return table_rows(library, columns).tobytes()
    line = np.full(n, len(columns), dtype=np.int64)           # the commas and the line end
    for _, sizes in columns:
        line += sizes
    starts = offsets_of(line)
    out = np.full(int(starts[-1]), ord(","), dtype=np.uint8)
    out[starts[1:] - 1] = ord("\n")
    at = starts[:-1].copy()
    for data, sizes in columns:
        out[spans(at, sizes)] = data
        at += sizes + 1
    return out.tobytes()


def checked(cells: Cells, n: int | None = None) -> Cells:
    """``cells`` as the compiled library reads them (contiguous uint8 bytes, int64 sizes), checked to
    agree with each other (and to be ``n`` cells): it trusts the sizes to find the bytes.

    >>> checked((np.frombuffer(b"ab", np.uint8), np.array([1, 2])))
    Traceback (most recent call last):
    ValueError: cells of 3 bytes in all, but 2 bytes given
    """
    data = np.ascontiguousarray(cells[0], dtype=np.uint8)
    sizes = np.ascontiguousarray(cells[1], dtype=np.int64)
    if n is not None and len(sizes) != n:
        raise ValueError(f"{len(sizes)} cells where {n} were expected")
    if len(sizes) and int(sizes.min()) < 0 or int(sizes.sum()) != len(data):
        raise ValueError(f"cells of {int(sizes.sum())} bytes in all, but {len(data)} bytes given")
    return data, sizes


# the compiled table's column kinds (_cells.c) and the most bytes a value of each takes
_CELLS, _FLOAT, _INT, _BOOL = 0, 1, 2, 3
_KINDS = {np.dtype(np.float64): (_FLOAT, _FLOAT_CELL_BYTES), np.dtype(np.bool_): (_BOOL, 5),
          np.dtype(np.int64): (_INT, 20)}


def table_rows(library, columns: Sequence) -> memoryview:
    """:func:`csv_rows` by the compiled library, of columns of cells or of numpy values made into
    cells as the rows are written: doubles as :func:`float_cells`, bools ``True``/``False``, other
    numbers as int64 in decimal (:func:`digits`).  Not for a single column (see :func:`csv_rows`).

    >>> bytes(table_rows(compiled_library(), [np.array([1.5, float("nan")]), np.array([True, False]), np.array([-3, 4])]))
    b'1.5,True,-3\\n,False,4\\n'
    """
    n = len(columns[0][1]) if isinstance(columns[0], tuple) else len(columns[0])
    kinds, data, sizes, kept, room = [], [], [], [], n * len(columns)
    for column in columns:
        if isinstance(column, tuple):
            values, cell_sizes = checked(column, n)
            kind, room = _CELLS, room + len(values)
        else:
            values, cell_sizes = np.ascontiguousarray(column), None
            if values.dtype not in _KINDS:
                values = values.astype(np.int64)
            if len(values) != n:
                raise ValueError(f"{len(values)} values where {n} were expected")
            kind, most = _KINDS[values.dtype]
            room += n * most
        kinds.append(kind)
        data.append(values.ctypes.data)
        sizes.append(None if cell_sizes is None else cell_sizes.ctypes.data)
        kept.append((values, cell_sizes))
    out, kinds = np.empty(room, dtype=np.uint8), np.array(kinds, dtype=np.int32)
    end = library.cells_csv_table(n, len(columns), kinds.ctypes.data,
                                  (ctypes.c_void_p * len(columns))(*data), (ctypes.c_void_p * len(columns))(*sizes),
                                  out.ctypes.data)
    if end < 0:
        raise RuntimeError(f"a float's repr longer than {_FLOAT_CELL_BYTES} bytes")
    return memoryview(out)[:end]


def strings(cells: Cells) -> list[str]:
    """The cells as Python strings.

    >>> strings(texts(["ab", "", "é"]))
    ['ab', '', 'é']
    """
    data, sizes = cells
    starts = offsets_of(sizes)
    raw = data.tobytes()
    if raw.isascii():                                    # a byte is a character: cut the text once decoded
        raw = raw.decode("ascii")
        return list(map(raw.__getitem__, map(slice, starts[:-1].tolist(), starts[1:].tolist())))
    return [raw[a:b].decode("utf-8") for a, b in zip(starts[:-1].tolist(), starts[1:].tolist())]
