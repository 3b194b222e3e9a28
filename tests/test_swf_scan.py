"""The compiled SWF scan against Python's reading of the same lines.

A line the scan takes (NUMBERS) must be one the reader's fast path takes, with the same 18 doubles
bit for bit; a line the reader's fast path takes must be one the scan takes (unless a token is
longer than the scan reads, 127 characters, or white space other than spaces and tabs); every
other line is the reader's to explain.
"""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.traces import swf_scan
from greenslurm.traces.source import read_bytes, split_lines
from greenslurm.traces.swf import N_FIELDS, _numbers


def test_the_scan_is_built():
    """The test install builds it (a C compiler is among the test command's packages)."""
    assert swf_scan.library() is not None


def python_view(text: str):
    """(kind, values) per line as the reader's fast path sees it."""
    out = []
    for line in split_lines(text):
        parts = line.split()
        if not parts:
            out.append((swf_scan.BLANK, None))
        elif parts[0][0] == ";":
            out.append((swf_scan.HEADER, None))
        elif len(parts) == N_FIELDS and "_" not in line and (values := _numbers(parts)) is not None:
            out.append((swf_scan.NUMBERS, values))
        else:
            out.append((swf_scan.OTHER, None))
    return out


def bits(values) -> list[bytes]:
    return [struct.pack("<d", v) for v in values]


def assert_agrees(data: bytes):
    scan = swf_scan.scan(data)
    if scan is None:
        assert not data.isascii()
        return
    expected = python_view(data.decode("ascii"))
    assert len(scan.kind) == len(expected)
    rows = {int(line): row for row, line in enumerate(scan.row_line)}
    for index, (kind, values) in enumerate(expected):
        got = int(scan.kind[index])
        line = scan.line_text(data, index)
        # what the scan leaves to the reader although it is plain: a token longer than 127
        # characters, or white space other than spaces and tabs (\v, \f, \x1c-\x1f, \r mid-line)
        unusual = any(len(token) > 127 for token in line.split()) or any(
            not (ch == "\t" or " " <= ch <= "~") for ch in line)
        if got == swf_scan.NUMBERS:
            assert kind == swf_scan.NUMBERS, line
            assert bits(scan.values[rows[index]].tolist()) == bits(values), line
            first = line.split()[0]
            assert bool(scan.job_digits[rows[index]]) == (first.isdigit() and str(int(first)) == first
                                                          and len(first) <= 15), line
        elif kind == swf_scan.NUMBERS:
            assert unusual, f"the scan left a plain record to the reader: {line!r}"
        elif kind in (swf_scan.BLANK, swf_scan.HEADER):
            assert got == kind, line


def test_exact_small_file():
    data = (b"; Version: 2\r\n"
            b"1 0 5 100 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\r\n"      # plain: taken (\r\n line end)
            b"\n"                                                        # blank
            b"007 1.5e2 -1 +3 .5 1. -0 8 0 0 0 0 0 0 0 0 0 0\n"           # still plain numbers: taken
            b"2 0 5 100 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1\n"             # 17 fields: the reader's
            b"3 0 5 1_00 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\n"         # 1_00: the reader's
            b"4 0 5 inf 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\n"          # inf: the reader's
            b"5 0 5 -2 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\n"           # below -1: the reader's
            b"6 0 5 0x1 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\n"          # hex: the reader's
            b"7\x0b0 5 1 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1")          # \v (white space to Python)
    scan = swf_scan.scan(data)
    assert scan.kind.tolist() == [3, 1, 0, 1, 2, 2, 2, 2, 2, 2]
    assert scan.row_line.tolist() == [1, 3]
    assert scan.values[1, :7].tolist() == [7.0, 150.0, -1.0, 3.0, 0.5, 1.0, -0.0]
    assert scan.job_digits.tolist() == [True, False]               # "007": its text is not the number's
    assert_agrees(data)


def test_not_ascii_is_left_to_the_reader():
    assert swf_scan.scan("1 0 5 100 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 é\n".encode()) is None


@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln.swf", "NASA-iPSC-1993-3.1-cln.swf", "lublin_256_est.swf"])
def test_real_logs(shared_data, name):
    assert_agrees(read_bytes(str(shared_data / "swf" / name)))


TOKENS = st.one_of(
    st.integers(-3, 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["-1", "0", "007", "1.", ".5", "-.5", "+2", "1e5", "1E-5", "1e", "e5", ".", "-", "+",
                     "1_0", "0x10", "nan", "inf", "-inf", "Infinity", "1e400", "1e-400", "1" * 130,
                     "4.9e-324", "2.2250738585072011e-308", ";", "a", "1.5.5", "--1"]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(TOKENS, min_size=0, max_size=20), max_size=8),
       st.sampled_from([" ", "\t", "  ", " \t"]), st.sampled_from(["\n", "\r\n"]))
def test_random_lines_agree(lines, separator, end):
    text = end.join(separator.join(tokens) for tokens in lines)
    assert_agrees(text.encode("ascii"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=-1.0, max_value=1e300, allow_nan=False), min_size=18, max_size=18))
def test_every_double_is_read_as_float_reads_it(values):
    """Shortest round-trip decimals and 17-digit forms: strtod and float() give the same double."""
    for form in (repr, lambda v: f"{v:.17g}", lambda v: f"{v:.3e}"):
        line = " ".join(form(v) for v in values)
        scan = swf_scan.scan(line.encode())
        assert scan.kind.tolist() == [swf_scan.NUMBERS]
        assert bits(scan.values[0].tolist()) == bits([float(form(v)) for v in values])
        assert all(math.isfinite(v) for v in scan.values[0])


def test_a_comma_locale_does_not_cut_decimals(tmp_path):
    """strtod follows the process's LC_NUMERIC: where a program embedding the reader set a locale
    whose decimal point is "," it read "100.5" as 100 and the record kept the wrong run time.  A
    token strtod does not read to its end is the reader's (float() ignores the locale)."""
    locales = tmp_path / "locales"
    locales.mkdir()
    subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", str(locales / "de_DE.UTF-8")], check=True,
                   capture_output=True)
    trace = tmp_path / "t.swf"
    trace.write_bytes(b"1 0 5 100.5 4 -1 -1 8 3600.75 -1 1 3 -1 -1 -1 2 -1 -1\n")
    program = ("import locale, sys; locale.setlocale(locale.LC_NUMERIC, 'de_DE.UTF-8')\n"
               "from greenslurm.traces.swf import read_swf\n"
               "job = read_swf(sys.argv[1]).jobs[0]; print(job.runtime_s, job.requested_time_s)")
    done = subprocess.run([sys.executable, "-c", program, str(trace)], capture_output=True, text=True, check=True,
                          env={**os.environ, "LOCPATH": str(locales)})
    assert done.stdout.split() == ["100.5", "3600.75"]
