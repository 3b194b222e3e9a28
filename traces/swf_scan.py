"""SWF records read in C: the lines of plain numbers as one array of doubles (see ``_swf_scan.c``).

The SWF reader (:mod:`greenslurm.traces.swf`) is the definition; the scan only takes the records
it can read exactly as Python's ``float()`` does (18 plain decimal numbers, finite and >= -1, on a
line of printable ASCII) and marks every other line for the reader to handle as before.  Without
the compiled library, or for a file that is not pure ASCII, :func:`scan` returns None and the
reader reads every line itself.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from greenslurm.clustermodel.native import load_beside

FIELDS = 18
BLANK, NUMBERS, OTHER, HEADER = 0, 1, 2, 3


@dataclass
class Scan:
    """Per line (0-based index = line number - 1): its kind and byte span; per NUMBERS record: its
    18 values, its line index and whether the job number's token is a plain number of at most 15
    digits (exact as a double)."""

    kind: np.ndarray             # uint8 per line: BLANK, NUMBERS, OTHER (the reader decides), HEADER
    line_start: np.ndarray       # int64 byte offsets per line (a trailing "\r" is not in the span)
    line_end: np.ndarray
    values: np.ndarray           # float64 (records, 18)
    row_line: np.ndarray         # int64 per record: its line index
    job_digits: np.ndarray       # bool per record: the job number is at most 15 digits, no leading zero

    def line_text(self, data: bytes, index: int) -> str:
        """Line ``index`` as the reader would see it."""
        return data[self.line_start[index]:self.line_end[index]].decode("ascii")


def library() -> ctypes.CDLL | None:
    lib = load_beside(__file__, "_swf_scan")
    if lib is not None:
        lib.swf_count_lines.restype = ctypes.c_int64
        lib.swf_count_lines.argtypes = (ctypes.c_char_p, ctypes.c_int64)
        lib.swf_scan.restype = ctypes.c_int64
    return lib


def scan(data: bytes) -> Scan | None:
    """Scan SWF bytes (already without a byte-order mark); None: the reader reads it all itself.

    >>> s = scan(b"; MaxProcs: 4\\n1 0 5 100 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\\nx\\n")
    >>> None if s is None else (s.kind.tolist(), float(s.values[0, 3]), s.row_line.tolist())
    ([3, 1, 2], 100.0, [1])
    """
    lib = library()
    if lib is None or not data.isascii():
        return None
    lines = lib.swf_count_lines(data, len(data))
    kind = np.empty(lines, dtype=np.uint8)
    line_start = np.empty(lines, dtype=np.int64)
    line_end = np.empty(lines, dtype=np.int64)
    values = np.empty((lines, FIELDS))
    row_line = np.empty(lines, dtype=np.int64)
    job_digits = np.empty(lines, dtype=np.uint8)

    def ptr(a: np.ndarray):
        return a.ctypes.data_as(ctypes.c_void_p)
    rows = lib.swf_scan(ctypes.c_char_p(data), ctypes.c_int64(len(data)), ptr(kind), ptr(line_start),
                        ptr(line_end), ptr(values), ptr(row_line), ptr(job_digits))
    return Scan(kind, line_start, line_end, values[:rows], row_line[:rows], job_digits[:rows].astype(bool))
