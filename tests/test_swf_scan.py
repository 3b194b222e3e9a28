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


@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln.swf", "LANL-CM5-1994-4.1-cln.swf", "LLNL-Atlas-2006-2.1-cln.swf",
                                  "NASA-iPSC-1993-3.1-cln.swf", "lublin_256_est.swf", "lublin_256_new2_est.swf"])
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


def test_integer_tokens_read_digit_by_digit_are_the_doubles_float_gives():
    """An optional "-" and at most 15 digits is summed as an integer (below 10^15 < 2^53: exact);
    every other token goes through strtod.  Both must give float()'s double, sign of zero included."""
    tokens = ["-0",                  # -0.0: float("-0") keeps the sign
              "-000",                # -0.0 as well
              "0", "000",            # +0.0
              "-1", "-0001",         # -1.0 (the reader's "unknown")
              "999999999999999",     # 15 digits: 10^15 - 1, exact
              "000000000000007",     # 15 digits with leading zeros: 7.0
              "9999999999999999",    # 16 digits (strtod): 10^16 - 1 is odd above 2^53, rounds to 1e16
              "12345678901234567",   # 17 digits (strtod): between 2^53 and 2^54 the step is 2: ...568
              "99999999999999999999",  # 20 digits (strtod): 1e20
              "+5", "5.", ".5", "1e3", "-0.0", "-0e5", "0" * 40 + "3"]
    assert float("9999999999999999") == 1e16 and float("12345678901234567") == 12345678901234568.0
    line = " ".join(tokens).encode()
    scan = swf_scan.scan(line)
    assert scan.kind.tolist() == [swf_scan.NUMBERS]
    assert bits(scan.values[0].tolist()) == bits([float(t) for t in tokens])
    assert [math.copysign(1, v) for v in scan.values[0, :4]] == [-1, -1, 1, 1]
    # one below -1 anywhere (summed or through strtod): the reader's line
    for bad in ("-2", "-1000000000000000", "-1.5", "-1e1"):
        assert swf_scan.scan(f"{bad} {line.decode()[3:]}".encode()).kind.tolist() == [swf_scan.OTHER]


DIGITS = st.sampled_from([1, 2, 14, 15, 16, 17, 20, 40, 127, 128, 200]).flatmap(
    lambda n: st.text("0123456789", min_size=n, max_size=n))
NUMBER_TOKENS = st.one_of(
    st.tuples(st.sampled_from(["", "", "-", "+"]), DIGITS).map("".join),    # integers, leading zeros, long
    st.tuples(st.sampled_from(["", "-", "+"]), st.text("0", max_size=3), st.integers(0, 10**20).map(str),
              st.sampled_from(["", ".", ".0", ".00", ".5", "e3", "E-2", "e+0", "e"])).map("".join),
    st.sampled_from(["-0", "-00", "+0", "-1", "+5", "1e3", ".5", "5.", "-.0", "nan", "-nan", "inf", "-inf",
                     "-", "+", ".", "1_0", "٣", "1\x00", "\x002", "1é", "-\x80", "0x1f", "1e309", "12:30", "1/2"]),
    st.text("0123456789-+.eE:/_xn", min_size=1, max_size=6),   # the characters around the digits in ASCII
    st.tuples(st.text("0123456789", min_size=1, max_size=16), st.sampled_from(":/-+.eE_x\x00 é"),
              st.integers(0, 16)).map(lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:]),   # digits and one other
)
SEPARATORS = st.sampled_from([" ", " ", "\t", "  \t ", "\r", "\x00", "\x0b"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.lists(NUMBER_TOKENS, min_size=16, max_size=19), st.lists(SEPARATORS, min_size=19,
                                                                                         max_size=19)),
                min_size=1, max_size=6),
       st.sampled_from(["\n", "\r\n"]))
def test_integer_heavy_records_agree_with_the_reader(records, end):
    """Lines of mostly 18 tokens (integers of 1 to 200 digits with and without signs and leading
    zeros, decimals, exponents, NaN and infinities, NUL, CR and non-ASCII bytes among them and
    between them): every line the scan takes has float()'s 18 doubles bit for bit, job_digits as
    the text says, and every record the reader's fast path takes the scan takes too."""
    text = end.join("".join(t + s for t, s in zip(tokens, separators)).rstrip(" ") for tokens, separators in records)
    data = text.encode("utf-8", "surrogateescape")
    assert_agrees(data)
    scan = swf_scan.scan(data)
    if scan is not None:          # spans: the line's own bytes without the "\r" of a "\r\n" end
        assert [scan.line_text(data, i) for i in range(len(scan.kind))] == split_lines(text)


CLEAN_TOKENS = st.one_of(st.integers(0, 10**20).map(str), st.text("0123456789", min_size=1, max_size=20),
                         st.sampled_from(["-1", "-0", "-01", "1.5", "+7"]))


@settings(max_examples=500, deadline=None)
@given(st.lists(CLEAN_TOKENS, min_size=18, max_size=18), st.integers(0, 17), NUMBER_TOKENS, SEPARATORS)
def test_one_odd_token_in_a_plain_record(tokens, position, odd, separator):
    """A record of 18 plain numbers with one token replaced by any other (a sign, a ":" or "/" next
    to the digits, NUL, a decimal point, 16 to 200 digits...) and one separator by another: the
    scan takes it exactly when the reader's fast path would (float()'s doubles), else leaves it."""
    tokens[position] = odd
    line = " ".join(tokens[:position]) + separator + " ".join(tokens[position:])
    assert_agrees(line.encode("utf-8", "surrogateescape"))
