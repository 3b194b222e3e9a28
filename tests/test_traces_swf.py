"""SWF reader: golden figures on the real Parallel Workloads Archive logs, header, round trip."""

from __future__ import annotations

import gzip
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenslurm.clustermodel.errors import InputError
from greenslurm.traces import read_trace
from greenslurm.traces.swf import FIELDS, parse_swf, read_swf
from greenslurm.traces.records import MAX_DURATION_S

ADJ_REQ = "requested time unknown: runtime used"

# Golden figures, derived independently of the reader with awk over the data lines (not ';'):
#   awk '!/^;/ && NF>0 {n++; if (NF!=18) wf++; else if ($2<0) ns++; else if ($4<0) rt++;
#        else if ($5<=0 && $8<=0) np++; else {kept++; if ($9<=0) adj++}}'
# records = n; skipped "no processor count" = np (allocated $5 and requested $8 procs both <= 0);
# kept = records - np (no wrong field count, no -1 submit or run time in these files);
# adjusted = kept records whose requested time $9 <= 0.
GOLDEN = {
    # file: (records, kept, no processor count, requested time adjusted)
    "KTH-SP2-1996-2.1-cln.swf": (28476, 28475, 1, 0),
    "LANL-CM5-1994-4.1-cln.swf": (122060, 122057, 3, 11287),   # 11290 with $9<=0, 3 of them lack procs
    "LLNL-Atlas-2006-2.1-cln.swf": (43778, 39207, 4571, 6294),  # 4533 cancelled (status 5) + 38 failed
    "NASA-iPSC-1993-3.1-cln.swf": (18239, 18239, 0, 18239),    # request fields all -1 in this log
    "lublin_256_est.swf": (10000, 10000, 0, 0),
    "lublin_256_new2_est.swf": (10000, 10000, 0, 0),
}


@pytest.fixture(scope="module")
def kth(shared_data):
    return read_trace(str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf"))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_counts(shared_data, name):
    records, kept, no_procs, adjusted = GOLDEN[name]
    result = read_trace(str(shared_data / "swf" / name))
    assert result.format == "swf"
    assert result.records_read == records
    assert len(result.jobs) == kept
    assert result.skipped == ({"no processor count": no_procs} if no_procs else {})
    assert result.adjusted == ({ADJ_REQ: adjusted} if adjusted else {})
    assert result.records_read == len(result.jobs) + sum(result.skipped.values())


def test_kth_sums_match_awk(kth):
    # awk '!/^;/ && NF==18 && $2>=0 && $4>=0 && !($5<=0 && $8<=0) {c=($8>0)?$8:$5; cs+=c; rs+=$4;
    #      q=($9>0)?$9:$4; qs+=q} END {print cs, rs, qs}'  ->  217830 252634874 389064780
    assert sum(j.cpus for j in kth.jobs) == 217830
    assert sum(j.runtime_s for j in kth.jobs) == 252634874
    assert sum(j.requested_time_s for j in kth.jobs) == 389064780


def test_kth_first_job_and_order(kth):
    first = kth.jobs[0]   # data line 1 of the file is line 25: "15 599850 192180 3477 4 -1 -1 4 53940 ..."
    assert (first.job_id, first.submit_s, first.runtime_s, first.requested_time_s, first.cpus) == \
        ("15", 599850.0, 3477.0, 53940.0, 4)
    assert (first.nodes, first.user, first.partition, first.state, first.source_line) == (0, "12", "", "COMPLETED", 25)
    assert first.extra["wait_s"] == 192180 and first.extra["group"] == 12
    submits = [j.submit_s for j in kth.jobs]
    assert submits == sorted(submits)
    for a, b in zip(kth.jobs, kth.jobs[1:]):   # equal submit times keep file order
        if a.submit_s == b.submit_s:
            assert a.source_line < b.source_line


def test_kth_header_and_cluster_hint(kth):
    assert kth.header["MaxNodes"] == "100" and kth.header["MaxProcs"] == "100"
    assert kth.header["Information"] == "http://www.pdc.kth.se/\nhttp://www.cs.huji.ac.il/labs/parallel/workload/"
    assert kth.header["Note"].splitlines()[0] == "uses the EASY scheduler"
    assert "job<=14 (14 jobs removed)" in kth.header["Note"]
    cluster = kth.cluster_hint()
    assert (cluster.size, cluster.nodes[0].cpus, cluster.name) == (100, 1, "KTH-SP2")     # the archive's name


def test_multi_valued_header_and_atlas_hint(shared_data):
    atlas = read_swf(str(shared_data / "swf" / "LLNL-Atlas-2006-2.1-cln.swf"))
    assert atlas.header["Partition"].splitlines() == ["1  pbatch", "2  pdebug", "3  pbroke", "4  moody20"]
    assert (atlas.cluster_hint().size, atlas.cluster_hint().nodes[0].cpus) == (1152, 8)
    # Atlas requests 168 procs but was allocated 2048 on some jobs: cpus follow the request
    job = next(j for j in atlas.jobs if j.job_id == "10402")
    assert job.cpus == 168 and job.extra["allocated_procs"] == 2048


def test_lanl_floats_in_integer_columns(shared_data):
    lanl = read_swf(str(shared_data / "swf" / "LANL-CM5-1994-4.1-cln.swf"))
    job = next(j for j in lanl.jobs if j.job_id == "2")   # "2 465 5 3362 32 489.00 988 32 900 1024 ..."
    assert job.extra["avg_cpu_time_s"] == 489.0 and job.cpus == 32
    assert job.runtime_s > job.requested_time_s and job.killed_at_limit
    assert lanl.header["Queue"].splitlines()[2] == "2  production"


def test_lublin_header_without_maxprocs(shared_data):
    lublin = read_swf(str(shared_data / "swf" / "lublin_256_est.swf"))
    assert lublin.cluster_hint().size == 256
    assert all(j.requested_time_s == j.runtime_s for j in lublin.jobs)   # perfect estimates


def test_no_header_no_hint():
    result = parse_swf("1 0 0 10 1 -1 -1 1 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert result.header == {} and result.cluster_hint() is None


def test_gzip_file_reads_the_same(tmp_path, shared_data):
    source = shared_data / "swf" / "lublin_256_new2_est.swf"
    packed = tmp_path / "lublin.swf.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    assert read_trace(str(packed)).jobs == read_trace(str(source)).jobs


def test_strict_mode_stops_at_the_first_skipped_record(shared_data):
    path = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    with pytest.raises(InputError) as info:
        read_trace(path, strict=True)
    bad_line = next(i for i, line in enumerate(open(path), 1)
                    if not line.startswith(";") and int(line.split()[4]) <= 0 and int(line.split()[7]) <= 0)
    assert (info.value.path, info.value.line, info.value.field) == (path, bad_line, "requested_procs")
    assert f"{path}:{bad_line}: field requested_procs" in str(info.value)


def test_strict_mode_on_adjustment(tmp_path):
    path = tmp_path / "adj.swf"
    path.write_text("1 0 0 10 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert read_trace(str(path)).adjusted == {ADJ_REQ: 1}
    with pytest.raises(InputError, match=r"adj.swf:1: field requested_time: .*strict mode"):
        read_trace(str(path), strict=True)


def test_bad_auxiliary_field_keeps_the_job(tmp_path):
    path = tmp_path / "aux.swf"
    path.write_text("1 0 abc 10 1 -1 -1 1 20 -1 1 alice 1 -1 -1 -1 -1 -1\n")
    result = read_trace(str(path))
    assert result.adjusted == {"bad field wait_time: set to -1": 1}
    assert result.jobs[0].extra["wait_s"] == -1 and result.jobs[0].user == "alice"


# -- properties -------------------------------------------------------------------------------
counts = st.integers(min_value=-1, max_value=10**6)
times = st.one_of(st.just(-1.0), st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda x: round(x, 2)))


@settings(max_examples=150, deadline=None)
@given(job=st.integers(min_value=1, max_value=10**7), submit=st.floats(0, 1e9).map(lambda x: round(x, 2)),
       rest=st.tuples(times, times, counts, times, counts, counts, times, counts, st.integers(-1, 5),
                      counts, counts, counts, counts, counts, counts, times))
def test_numeric_record_round_trips(job, submit, rest):
    wait, run, alloc, avg_cpu, used_mem, req_procs, req_time, req_mem, status, user, group, exe, queue, \
        partition, preceding, think = rest
    values = [job, submit, wait, run, alloc, avg_cpu, used_mem, req_procs, req_time, req_mem, status, user,
              group, exe, queue, partition, preceding, think]
    line = "  ".join(repr(v) if isinstance(v, float) else str(v) for v in values)
    result = parse_swf(line + "\n", "prop.swf")
    assert result.records_read == 1
    procs = req_procs if req_procs > 0 else alloc
    if run < 0 or procs <= 0:
        assert not result.jobs and sum(result.skipped.values()) == 1
        return
    if run > MAX_DURATION_S:          # no job runs 10 years (3.16e8 s): skipped, counted under its reason
        assert not result.jobs and result.skipped == {"runtime beyond 10 years": 1}
        return
    (spec,) = result.jobs
    assert spec.job_id == str(job) and spec.submit_s == submit and spec.runtime_s == run
    assert spec.cpus == procs
    assert spec.requested_time_s == (req_time if req_time > 0 else run)
    assert result.adjusted == ({} if req_time > 0 else {ADJ_REQ: 1})
    assert spec.user == ("" if user == -1 else str(user))
    assert spec.partition == ("" if partition == -1 else str(partition))
    by_name = dict(zip(FIELDS, values))
    for name, key in (("wait_time", "wait_s"), ("allocated_procs", "allocated_procs"),
                      ("avg_cpu_time", "avg_cpu_time_s"), ("used_memory", "used_memory_kb"),
                      ("requested_procs", "requested_procs"), ("requested_time", "requested_time_s"),
                      ("requested_memory", "requested_memory_kb"), ("status", "status"), ("group_id", "group"),
                      ("executable", "executable"), ("queue", "queue"), ("preceding_job", "preceding_job"),
                      ("think_time", "think_time_s")):
        assert spec.extra[key] == by_name[name]


junk_line = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"),
                    max_size=80)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.one_of(junk_line, st.lists(st.sampled_from(["1", "-1", "0", "2.5", "x", "-7", "nan",
                                                                      "inf", "1e400", ";", "1_0"]),
                                                      min_size=16, max_size=19).map(" ".join)),
                      min_size=1, max_size=8),
       strict=st.booleans())
def test_garbage_never_raises_anything_but_input_error(lines, strict):
    try:
        result = parse_swf("\n".join(lines) + "\n", "junk.swf", strict=strict)
    except InputError:
        return
    assert result.records_read == len(result.jobs) + sum(result.skipped.values())
    for job in result.jobs:
        assert math.isfinite(job.submit_s) and job.submit_s >= 0 and job.cpus >= 1
        assert math.isfinite(job.runtime_s) and job.runtime_s >= 0
