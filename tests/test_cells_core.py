"""The output files' cells made by the compiled library (``sim/reporting/_cells.c``) against the numpy
definitions in cells.py and against Python itself: floats byte for byte as ``repr`` (NaN empty),
integers as ``str``, node lists, whole CSV rows as the csv module writes them, Parquet's
length-prefixed strings, and whole replay outputs of a real log the same bytes from either core.
Every test runs with both cores (``GREENSLURM_CELLS_CORE``); the compiled one must be built."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.cli import main
from greenslurm.clustermodel.errors import InputError
from greenslurm.sim.accounting.result import JobColumns, JobRecord
from greenslurm.sim.reporting import cells, outputs

CORES = ("python", "compiled")
# the compiled library formats 1e-3 <= |x| < 2**52 itself, and asks CPython outside that range
edge_floats = st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                               math.inf, -math.inf, math.nan, 1e16, 1e-16, 2.0 ** 53, 2.0 ** 53 + 2, 2.0 ** 53 - 1,
                               2.0 ** 52, 2.0 ** 52 - 0.5, 2.0 ** 51 + 0.5, 1e-3, math.nextafter(1e-3, 0),
                               0.0001, 1e-05, 0.1, 0.2 + 0.1, 1 / 3, 2 / 3, 0.5, 0.25, 1.5, 9007199254740991.0,
                               4503599627370495.5, 123456789.12345679, -0.001, 1e15 + 0.5, 1e22, 1e23])
doubles = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
# the compiled library's own range, and short decimals and their neighbouring doubles in it
in_range = st.floats(min_value=1e-3, max_value=2.0 ** 52) | st.floats(min_value=-(2.0 ** 52), max_value=-1e-3)
decimals = st.builds(lambda d, k, step: math.nextafter(d / 10 ** k, math.inf if step > 0 else -math.inf)
                     if step else d / 10 ** k, st.integers(1, 10 ** 17), st.integers(0, 20), st.integers(-1, 1))
any_double = doubles | edge_floats | in_range | decimals
int64s = st.integers(-2 ** 63, 2 ** 63 - 1) | st.sampled_from([0, -1, 9, 10, 99, 100, -2 ** 63, 2 ** 63 - 1])


@pytest.fixture(params=CORES)
def core(request, monkeypatch):
    monkeypatch.setenv(cells.ENV, request.param)
    assert cells.chosen_core() == request.param
    return request.param


def repr_cell(x: float) -> str:
    """The Python definition: a float's cell is its repr, NaN an empty cell."""
    return "" if math.isnan(x) else repr(x)


def test_the_compiled_cells_are_built():
    """The test install builds it (a C compiler is among the test command's packages): a missing
    library must fail here, not quietly test the numpy definitions twice."""
    assert cells.compiled_library() is not None


def test_a_core_that_does_not_exist_is_refused(monkeypatch):
    monkeypatch.setenv(cells.ENV, "turbo")
    with pytest.raises(InputError, match=r"^environment: field GREENSLURM_CELLS_CORE: 'turbo' is not a core"):
        cells.float_cells(np.array([1.5]))


def test_float_cells_exact(core):
    # whole numbers below 2**53: digits and ".0"; -0.0 keeps its sign; NaN empty; 1e16 and up: repr's
    # exponent form; a repr of 17 digits (1/3) and one of 1 (0.5) in the range the library formats
    values = np.array([3.0, -0.0, math.nan, 1e16, -5.0, math.inf, 1 / 3, 0.5, 0.001, 5e-324, 2.0 ** 53])
    assert cells.strings(cells.float_cells(values)) == [
        "3.0", "-0.0", "", "1e+16", "-5.0", "inf", "0.3333333333333333", "0.5", "0.001", "5e-324",
        "9007199254740992.0"]


@settings(max_examples=500, deadline=None)
@given(values=st.lists(any_double, max_size=60))
def test_float_cells_are_repr(values):
    for core in CORES:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(cells.ENV, core)
            data, sizes = cells.float_cells(np.array(values, dtype=float))
        assert cells.strings((data, sizes)) == [repr_cell(x) for x in values], core
        assert int(sizes.sum()) == len(data)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(int64s, max_size=50), suffix=st.sampled_from([b"", b".0", b"abcd"]))
def test_digits_are_str(values, suffix):
    for core in CORES:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(cells.ENV, core)
            got = cells.strings(cells.digits(np.array(values, dtype=np.int64), suffix))
        assert got == [str(v) + suffix.decode() for v in values], core


def test_digits_at_every_width_edge(core):
    # the compiled digits count widths below 10**8 by comparisons and write below 2**32 in 32-bit
    # arithmetic: each power of ten from 10**0 to 10**18 and its neighbours (9, 10, 11; 99,999,999,
    # 100,000,000, 100,000,001; ...), 2**32 - 1 = 4,294,967,295, 2**32 and 2**32 + 1, 2**63 - 1 and
    # -2**63, each against str and as a float cell (whole floats below 2**53 take the same digits)
    edges = [0, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, -2**63]
    for k in range(19):
        edges += [10**k - 1, 10**k, 10**k + 1]
    values = np.array(edges + [-v for v in edges if 0 < v < 2**63], dtype=np.int64)
    assert cells.strings(cells.digits(values, b"")) == [str(v) for v in values.tolist()]
    whole = [float(v) for v in values.tolist() if abs(v) < 2**53]
    assert cells.strings(cells.float_cells(np.array(whole))) == [repr(x) for x in whole]


def csv_module_rows(rows) -> bytes:
    """The csv module's rows, a NaN as an empty cell, each row written with the line end "\\r\\n" (so
    that a carriage return in a cell is quoted, as cells.quoted does) and ended by "\\n"."""
    out = []
    for row in rows:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerow(["" if isinstance(v, float) and math.isnan(v) else v
                                                            for v in row])
        out.append(buffer.getvalue()[:-2] + "\n")
    return "".join(out).encode()


strings = st.text(st.sampled_from("ab,\"\n\ré x"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(0, 12))
def test_csv_chunks_are_the_csv_modules_rows(data, n):
    kinds = data.draw(st.lists(st.sampled_from(["float", "int", "bool", "str"]), min_size=2, max_size=6))
    draw = {"float": any_double, "int": int64s, "bool": st.booleans(), "str": strings}
    columns = [data.draw(st.lists(draw[kind], min_size=n, max_size=n)) for kind in kinds]
    arrays = [column if kind == "str" else np.array(column, dtype={"float": float, "int": np.int64, "bool": bool}[kind])
              for kind, column in zip(kinds, columns)]
    expected = csv_module_rows(zip(*columns))
    for core in CORES:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(cells.ENV, core)
            assert outputs.csv_chunk(arrays) == expected, core
            assert cells.csv_rows([outputs.csv_cells(column) for column in arrays]) == expected, core


def test_a_float_equal_to_the_last_one_made_is_its_text(core):
    # the compiled rows copy the text of a float equal bit for bit to the last one made that was not
    # whole (a job's bounded slowdown is its slowdown when it ran 10 s or more): within a row and
    # across rows, past whole numbers and NaN between them, and not for a value of other bits
    # (-0.1 is not 0.1; 0.30000000000000004 is not 0.3)
    columns = [np.array([0.1, 1 / 3, -0.1, 0.3]), np.array([0.1, 1 / 3, 0.1, 0.1 + 0.2]),
               np.array([7.0, math.nan, 2.5, 0.3]), np.array([0.1, 0.1, 2.5, 0.3])]
    assert bytes(outputs.csv_chunk(columns)) == (b"0.1,0.1,7.0,0.1\n"
                                                 b"0.3333333333333333,0.3333333333333333,,0.1\n"
                                                 b"-0.1,0.1,2.5,2.5\n"
                                                 b"0.3,0.30000000000000004,0.3,0.3\n")
    assert cells.strings(cells.float_cells(np.array([0.1, 0.1, -0.1, 5.0, -0.1]))) == ["0.1", "0.1", "-0.1", "5.0",
                                                                                     "-0.1"]


def test_cells_that_disagree_with_their_sizes_are_refused(core):
    # 3 bytes said, 2 given: the compiled library would read past the bytes
    bad = (np.frombuffer(b"ab", np.uint8), np.array([1, 2]))
    if core == "compiled":
        with pytest.raises(ValueError, match="cells of 3 bytes in all, but 2 bytes given"):
            cells.csv_rows([bad, bad])
        with pytest.raises(ValueError, match="2 cells where 3 were expected"):
            cells.csv_rows([cells.texts(["x", "y", "z"]), cells.texts(["a", "b"])])


def jobs_with_nodes(lists) -> JobColumns:
    return JobColumns.from_records([JobRecord(str(i), 0.0, 1.0, 2.0, 3.0, len(nodes), float(len(nodes)), 0.0,
                                              False, 1.0, tuple(nodes)) for i, nodes in enumerate(lists)])


@settings(max_examples=200, deadline=None)
@given(lists=st.lists(st.lists(st.integers(0, 10 ** 6), max_size=8), min_size=1, max_size=20), data=st.data(),
       wide=st.booleans())
def test_node_lists_are_joined_positions(lists, data, wide):
    jobs = jobs_with_nodes(lists)
    if wide:                                 # the flat list as int64 (a cluster of more than 2**31 nodes)
        jobs.node_flat = jobs.node_flat.astype(np.int64)
    rows = np.array(data.draw(st.lists(st.integers(0, len(lists) - 1), max_size=25)), dtype=np.int64)
    for core in CORES:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(cells.ENV, core)
            got = cells.strings(outputs.NodeNames(jobs).cells(rows))
        assert got == [" ".join(map(str, lists[r])) for r in rows], core


# a jobs table's strings: users and partitions, shared objects, some CSV quotes, some not ASCII
table_strings = st.sampled_from(["", "13", "alice", "a,b", 'say "hi"', "x\ny", "x\ry", "é", "数据", "🙂"]) | st.text(max_size=5)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(table_strings | st.none() | st.integers(0, 9), max_size=30))
def test_plain_strings_are_their_utf8_bytes_or_none(values):
    """A string column's cells: the strings' UTF-8 bytes one after another, or None when an item is
    not a str (None, a number) or a string holds what CSV quotes; an object array (the compiled
    library reads its strings) and a list give the same."""
    plain = all(isinstance(v, str) for v in values) and not any(m in v for v in values for m in ",\"\n\r")
    expected = (b"".join(v.encode() for v in values), [len(v.encode()) for v in values]) if plain else None
    for core in CORES:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(cells.ENV, core)
            for given_as in (np.array(values + [None], dtype=object)[:-1], values):   # (1-D, even for [])
                got = cells.plain_texts(given_as)
                assert (got if got is None else (bytes(got[0]), got[1].tolist())) == expected, (core, type(given_as))


def test_a_lone_surrogate_has_no_utf8_cell_in_either_core(core):
    with pytest.raises(UnicodeEncodeError):
        cells.plain_texts(np.array(["ok", "\ud800"], dtype=object))


@settings(max_examples=300, deadline=None)
@given(picks=st.lists(st.integers(0, 9), max_size=40), most=st.integers(0, 12))
def test_object_codes_give_back_the_same_objects(picks, most):
    """An object column handed to the child as its distinct objects and codes (outputs.packed_jobs):
    taking the labels by the codes gives the very objects back, in order of first appearance; more
    distinct objects than ``most`` (or the numpy core) leaves the column as it is."""
    pool = ["u" + str(i) * 3 for i in range(8)] + [None, ""]      # distinct objects, two of them not plain
    values = np.array([pool[i] for i in picks] + [0], dtype=object)[:-1]
    distinct = list(dict.fromkeys(id(pool[i]) for i in picks))
    for core in CORES:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(cells.ENV, core)
            made = cells.object_codes(values, most)
        if core == "python" or len(distinct) > most:
            assert made is None, core
            continue
        labels, codes = made
        assert [id(v) for v in labels] == distinct
        assert codes.dtype == np.int32 and all(a is b for a, b in zip(labels.take(codes), values))


def test_jobs_handed_to_the_child_come_back_the_same():
    jobs = JobColumns.from_records([JobRecord(f"j{i % 3}", 1.0, 3.0, 3.0, 9.0, 1, 1.0, 0.0, False, 2.0, (4,))
                                    for i in range(7)])
    jobs.user = np.array(["ann", "bob", "ann", None, "bob", "ann", "cy"], dtype=object)
    import pickle
    back = outputs.unpacked_jobs(pickle.loads(pickle.dumps(outputs.packed_jobs(jobs))))
    for name in ("job_id", "user", "partition", "submit_s", "node_flat"):
        assert getattr(back, name).tolist() == getattr(jobs, name).tolist(), name


@pytest.mark.parametrize("trace", ["KTH-SP2-1996-2.1-cln.swf", "LANL-CM5-1994-4.1-cln.swf"])
def test_whole_log_outputs_are_the_same_bytes_from_either_core(trace, shared_data, tmp_path, monkeypatch):
    """Every file replay --out writes, from the compiled cells and from the numpy definitions."""
    monkeypatch.chdir(tmp_path)
    limit = [] if trace.startswith("KTH") else ["--limit", "20000"]
    written = {}
    for core in CORES:
        monkeypatch.setenv(cells.ENV, core)
        out = tmp_path / core
        assert main(["replay", str(shared_data / "swf" / trace), "--no-progress", "--out", str(out), *limit]) == 0
        written[core] = {path.name: path.read_bytes() for path in sorted(out.iterdir())}
    assert sorted(written["compiled"]) == ["jobs.csv", "jobs.parquet", "power.csv", "schema.json", "summary.json"]
    for name in written["python"]:
        assert written["compiled"][name] == written["python"][name], name
