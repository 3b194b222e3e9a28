"""Crafted inputs against the output cells (compiled ``sim/reporting/_cells.c`` and the numpy
definitions): doubles where shortest-repr searches go wrong, node positions and rows outside the
caller's bound, a Parquet string too long for its length field, strings a trace's author controls
(NUL, a lone surrogate, megabytes, quotes, line breaks), allocations that fail inside CPython's
repr, and the interpreter's lock the library needs for it.  Tests of cells run with both cores; the
compiled one must be built (a missing one fails them, and tests/test_cells_core.py)."""

from __future__ import annotations

import copy
import ctypes
import json
import math
from pathlib import Path

import numpy as np
import pytest

from greenslurm.cli import main
from greenslurm.sim.reporting import cells, outputs
from greenslurm.traces import read_trace

from test_cells_core import CORES, core, jobs_with_nodes  # noqa: F401 (core: the fixture of both cores)

DATA = Path(__file__).parent / "data"


def neighbours(x: float, count: int) -> list[float]:
    """x and the ``count`` doubles on each side of it."""
    out, up, down = [x], x, x
    for _ in range(count):
        up, down = math.nextafter(up, math.inf), math.nextafter(down, -math.inf)
        out += [up, down]
    return out


def boundary_doubles() -> np.ndarray:
    """Powers of two and ten and their neighbours over the whole exponent range, the compiled
    search's range ends (1e-3, 2**52) and 2**53, short decimals' neighbours, extremes and NaNs."""
    values = []
    for e in range(-1074, 1024):
        values += neighbours(math.ldexp(1.0, e), 2)
    for e in range(-323, 309):
        values += neighbours(float(f"1e{e}"), 2) + neighbours(float(f"5e{e}"), 1)
    for x in (1e-3, 2.0 ** 52, 2.0 ** 53, 0.1, 0.3, 0.1 + 0.2, 2.0 ** 52 - 0.5, 2.0 ** 51 + 0.25, 1e15 + 0.3,
              5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 123456789012345678.0, 9007199254740993.0):
        values += neighbours(x, 30)
    values = np.array(values)
    nans = np.array([0x7FF0000000000001, 0x7FF8000000000001, 0xFFF8000000000000, 0xFFFFFFFFFFFFFFFF],
                    dtype=np.uint64).view(np.float64)
    return np.concatenate([values, -values, nans, [0.0, -0.0, math.inf, -math.inf]])


def test_boundary_doubles_are_repr(core):
    values = boundary_doubles()
    assert cells.strings(cells.float_cells(values)) == ["" if x != x else repr(x) for x in values.tolist()]


@pytest.mark.parametrize("exponent", [-10, -1, 0, 1, 30, 51])
def test_every_significand_near_a_binade_end_is_repr(core, exponent):
    # the 20,000 doubles at the start and at the end of the binade [2**e, 2**(e + 1)): the lower gap
    # is half the upper one at 2**e, and the last ones need 16-17 digits
    first = np.float64(math.ldexp(1.0, exponent)).view(np.uint64)
    bits = np.concatenate([first + np.arange(20000, dtype=np.uint64),
                           first + np.uint64(2 ** 52) - np.arange(1, 20001, dtype=np.uint64)])
    values = bits.view(np.float64)
    assert cells.strings(cells.float_cells(values)) == list(map(repr, values.tolist()))


def test_the_library_keeps_the_interpreter_lock():
    """It calls PyOS_double_to_string and PyMem_Free, which need the lock: every function must be a
    PyDLL one (a CDLL call releases the lock; another thread would then run beside CPython's
    allocator)."""
    library = cells.compiled_library()
    assert isinstance(library, ctypes.PyDLL)
    for name in cells._SIGNATURES:
        assert getattr(library, name)._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name


def test_a_negative_node_position_is_refused(core):
    # The compiled node lists get room for (count) x (digits of the largest position + 1) bytes: for
    # (-10**9, 0) that is 2 x 2 bytes and "-1000000000 0" is 13, a heap overflow (AddressSanitizer:
    # heap-buffer-overflow in put_digits).  The numpy definition took position -1 as the last
    # node's name: (-1, 0, 1) was written "1 0 1".
    for nodes in ((-10 ** 9, 0), (-1, 0, 1)):
        with pytest.raises(ValueError, match=r"^a node position below 0 \(-"):
            outputs.NodeNames(jobs_with_nodes([nodes])).cells(np.array([0]))


def test_a_negative_row_counts_from_the_end(core):
    # rows are numpy indices: -1 is the last job (2 3).  The compiled lists read offsets[-1], before
    # the array (AddressSanitizer: heap-buffer-overflow READ in cells_node_lists), and wrote ''
    jobs = jobs_with_nodes([(1,), (2, 3)])
    assert cells.strings(outputs.NodeNames(jobs).cells(np.array([-1, 0, -2]))) == ["2 3", "1", "1"]
    with pytest.raises(IndexError):
        outputs.NodeNames(jobs).cells(np.array([0, -3]))


TRACE_STRINGS = ["a\x00b", 'é,"q\n\r', "x" * 2_000_000, "", "日本\u2028z", "\t  "]


def crafted_sacct_json(path, users):
    document = json.loads((DATA / "sacct-json-v0.0.40.json").read_text())
    small = next(job for job in document["jobs"] if job["job_id"] == 204)      # 1 CPU on 1 node, 300 s
    jobs = []
    for i, user in enumerate(users):
        job = copy.deepcopy(small)
        job["job_id"], job["user"], job["partition"], job["array"] = 1000 + i, user, "1", {}
        jobs.append(job)
    document["jobs"] = jobs
    path.write_text(json.dumps(document))            # ensure_ascii: "\ud800" is written as its escape
    return path


def test_a_lone_surrogate_in_a_sacct_json_string_skips_its_job(tmp_path):
    # JSON's "\ud800" escape reads as a str no UTF-8 file can hold: replay --out raised
    # UnicodeEncodeError (both cores) when jobs.csv encoded the user column
    path = crafted_sacct_json(tmp_path / "t.json", ["ok", "\ud800", "b\udfffc", "\ud83d\ude00"])
    result = read_trace(str(path))
    assert [job.user for job in result.jobs] == ["ok", "\U0001F600"]       # an escaped pair is one character
    assert result.skipped == {"bad field user": 2}


def test_strings_a_trace_controls_give_the_same_bytes_from_either_core(tmp_path, monkeypatch):
    path = crafted_sacct_json(tmp_path / "t.json", TRACE_STRINGS * 3 + ["\ud800"])
    slurm_conf = DATA / "slurm-conf" / "slurm.conf"
    written = {}
    for name in CORES:
        monkeypatch.setenv(cells.ENV, name)
        out = tmp_path / name
        assert main(["replay", str(path), "--slurm-conf", str(slurm_conf), "--no-progress", "--out", str(out)]) == 0
        written[name] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert written["compiled"] == written["python"]
    jobs_csv = written["compiled"]["jobs.csv"]
    # the job with a lone surrogate skipped, the others' strings once per job as the csv module
    # writes them: NUL as it is, the comma/quote/line-break one quoted with "" for the quote
    assert jobs_csv.count(b",a\x00b,1,") == 3 and jobs_csv.count(b',"\xc3\xa9,""q\n\r",1,') == 3
    assert jobs_csv.count(b"x" * 2_000_000) == 3 and jobs_csv.count(b"\t  ") == 3
    assert jobs_csv.count(",日本\u2028z,1,".encode()) == 3           # a line separator is not a CSV line end


def test_an_allocation_that_fails_is_a_memory_error_not_a_wrong_cell():
    """CPython's repr allocates its text: each allocation during a call made to fail in turn (the
    interpreter's test hook), the library's call either writes the exact cells or stops at the
    failing value and raises MemoryError (ctypes' ArgumentError or SystemError when its own
    handling of the arguments fails).  The hook is set around the call alone: numpy itself crashes on some failed
    allocations."""
    import _testcapi                   # CPython's test module (in the standard build): a missing one fails

    library = cells.compiled_library()
    values = np.array([1.5, 1e300, -0.0, 0.1, 2.0, 5e-324, math.inf])
    texts = [repr(x) for x in values.tolist()]
    expected_rows = "".join(f"{a},{b}\n" for a, b in zip(texts[:3], texts[3:6])).encode()
    kinds = np.array([1, 1], dtype=np.int32)
    calls = {"floats": lambda out, sizes: library.cells_floats(values.ctypes.data, len(values), out.ctypes.data,
                                                               sizes.ctypes.data),
             "rows": lambda out, sizes: library.cells_csv_table(3, 2, kinds.ctypes.data, (ctypes.c_void_p * 2)(
                 values.ctypes.data, values[3:].ctypes.data), (ctypes.c_void_p * 2)(None, None), out.ctypes.data)}
    stopped_part_way = 0
    for name, call in calls.items():
        failures, start, clean = 0, 0, 0
        while clean < 3:               # past the call's last allocation every run is clean
            out, sizes = np.zeros(32 * len(values) + 64, dtype=np.uint8), np.zeros(len(values), dtype=np.int64)
            _testcapi.set_nomemory(start, start + 1)
            start += 1
            try:
                end = call(out, sizes)
            except (MemoryError, SystemError, ctypes.ArgumentError):
                failures, clean = failures + 1, 0
                if name == "floats":   # the cells before the failing one are written, none after
                    done = int(np.count_nonzero(sizes))
                    assert sizes[:done].tolist() == list(map(len, texts[:done])) and done < len(texts), start
                    stopped_part_way += done > 0
                continue
            finally:
                _testcapi.remove_mem_hooks()
            clean += 1
            if name == "floats":
                assert cells.strings((out[:end], sizes)) == texts, start
            else:
                assert out[:end].tobytes() == expected_rows, start
        assert failures > 0, name
    assert stopped_part_way > 0        # a failure inside the library, after 1.5 was written (at 1e300)
