"""The Slurm queue against real Slurm 22.05 on the behaviours a replay easily gets wrong.

Each case is a small workload recorded on real daemons with slurmdbd (``tests/data/slurm-gaps/<case>/``:
the site and workload, the sacct export ``trace.txt``, the ``slurm.conf`` slurmctld read and
``command.txt``, the command that made them), replayed as a site would replay its export::

    greenslurm replay trace.txt --format sacct --slurm-conf slurm.conf --queue slurm

The table of each case is what Slurm did: each job's start (whole seconds after the first
submission) and nodes, as sacct recorded them; the test first checks the table against the
recording, then the replay against the table.  A start may differ by up to 2 s: Slurm's stamps are
whole seconds, its background thread wakes at an unknown phase of the second (the replay's wake-ups
fall on whole seconds) and a job's end reaches the scheduler a fraction of a second later.

What each case shows (read in Slurm 22.05.8's source, tag slurm-22-05-8-1):

* ``shape-cr-core``: ``b`` (``-n 4``) is spread 1 + 2 + 1 over three nodes at once; sacct says
  NNodes=3 (allocated) and ReqNodes=1 (asked).  Every job carries the node's whole memory in
  ReqMem/ReqTRES (``mem=4000M``: no ``--mem``), but with ``SelectTypeParameters=CR_Core`` memory is
  not a consumable resource (select/cons_tres), so jobs share nodes by CPUs.
* ``shape-cr-core-memory``: the same workload with ``CR_Core_Memory``: the same ``mem=4000M`` now
  holds a whole node, one job per node.
* ``memory-consumable`` (``CR_Core_Memory``; n1: 4 CPUs, 4000 MB; n2, n3: 2 CPUs, 2000 MB): ``a``
  (``-n 4 --mem=3900``) leaves n1 100 MB; ``b`` (``-n 3 --mem=500``) is spread 2 + 1 over n2 and
  n3 with 500 MB on each (AllocTRES ``mem=1000M,node=2``; select/cons_common ``_verify_node_state``:
  "Not considering node n1, free_mem < min_mem (100 < 500)").  ``c`` asked no memory: its ReqMem
  ``4000M`` is the RealMemory of its partition's first node (job_mgr.c ``job_get_tres_mem``), its
  ``pn_min_memory`` is 0, and it may use only a node with no memory allocated ("allocated memory =
  500 and all memory requested"): it waits, beside n3's free CPU, for ``b``'s end, then holds n2's
  whole 2000 MB (AllocTRES ``mem=2000M``); ``d`` (``--mem=100``) waits behind it (sched/builtin)
  and takes n3; ``e`` (no memory) waits for a node with nothing allocated: n1, at ``a``'s end.
  Reading ``4000M`` as asked would keep ``c`` and ``e`` off the 2000 MB nodes, and a rigid shape
  for ``b`` would hold it until n1 is free (b, c, d, e at 90, 150, 150, 180 s).
* ``memory-not-consumable``: the same nodes with ``CR_Core``.  ``b`` (``-n 3``, no memory; ReqMem
  ``4000M`` again) is spread over n2 and n3 (NNodes=2): the reader's 4000 MB per node on two nodes
  is no request, and the job is not skipped as asking more memory than the nodes have.  ``c``
  (``--mem=3000``) waits for n1 although n3 has a free CPU: memory is not allocated, but
  ``_build_node_list`` (node_scheduler.c) keeps only nodes whose RealMemory holds ``pn_min_memory``.
* ``cadence``: a submission only queues a request (``queue_job_scheduler``, proc_req.c); the
  background thread (``_slurmctld_background``, controller.c) runs the main scheduler when a request
  is queued and its own last pass is ``batch_sched_delay`` (3 s) old.
* ``end-queued`` (``batch_sched_delay=20``): a batch job's end, too, only queues a request.  slurmd
  answers slurmctld's terminate message ESLURMD_KILL_JOB_ALREADY_COMPLETE when no step is left and
  no Epilog is configured (slurmd/req.c ``_rpc_terminate_job``); slurmctld's agent then completes
  the epilog and calls ``queue_job_scheduler`` (agent.c), not the scheduler.  ``a`` ends at 25;
  the background thread passed at 0 (``a``) and 20 (the requests of ``b`` and ``c``), so ``b``
  starts at its pass at 40, and ``c`` at 60 (``b``'s end, 20 after that pass).  A pass at every
  end would start them at 25 and 45.  (Slurm's log of this run: 56 of 60 ends of a 60-job
  workload took that path; the other 4 reached slurmd while the step was still finishing, and
  slurmd's own epilog-complete message ran the scheduler at once.)
* ``backfill-looks`` (``bf_interval=10``, ``batch_sched_delay=20``): the backfill thread sleeps
  ``bf_interval`` after a cycle, then looks every second and cycles at the first look that finds a
  job or node changed (backfill.c ``backfill_agent``, ``_more_work``).  Its last cycle followed
  ``a``'s end (at about 10), so ``b`` (31) is backfilled at once; the main scheduler's pass for it
  would come only at 40 (its last pass, for ``a``'s end, at 20), where it starts ``c``.  Cycles on
  a fixed 10-second grid would start ``b`` at 40.
* ``partition-block``: ``b`` (partition all, n1-n3) cannot start and blocks its partition; ``c``
  (partition ab = n3, n4, ``-N 2``) then has one node left, fewer than its minimum: ``_schedule``
  blocks ab too (fail_by_part), so ``d`` and ``e`` of ab wait although n4 is idle.
* ``partition-not-avail``: the same, but ``c`` asks ``-n 8`` (at least one node): one node is left,
  it cannot hold 8 CPUs even empty and is not completing a job, so ``select_nodes`` answers
  ESLURM_NODE_NOT_AVAIL (node_scheduler.c ``_pick_best_nodes``), which does not block the
  partition: ``d`` starts on n4 at once.
* ``backfill-ends``: backfill's start estimate for ``b`` (``_will_run_test`` in
  cons_common/job_test.c) frees running jobs by end time in groups decided by the next job of the
  whole list: ``x``, on a node ``b`` cannot use, ends just after ``y1`` and keeps the group open, so
  ``y2`` (ending 10 minutes later) joins it and ``b`` is expected then; ``s`` ends before that and is
  backfilled at once (a grouping over ``b``'s own nodes only would expect ``b`` when ``y1`` ends and
  hold ``s`` back).
* ``fill-retry``: ``b`` (``-N 2 -n 8``) comes while ``a`` holds one CPU of n1.  cons_tres's first
  ``_eval_nodes`` takes n1's 3 free CPUs, and no single node then holds the other 5, so it fails;
  ``choose_nodes`` (cons_tres job_test.c) tries again without the nodes offering at most 1, 2, 3
  CPUs and at 3 leaves n1 out: ``b`` starts at once on n2, n3 (4 + 4).  ``d`` (``-N 2 -n 6``) at
  ``b``'s end: n1 gives its 3 and n2 the other 3 (a first try that fails would have left ``b``
  waiting for ``a``'s end, 30 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_slurm_workloads as workloads  # noqa: E402

DATA = ROOT / "tests" / "data" / "slurm-gaps"
TOLERANCE_S = 2.0

# case -> job -> (start, seconds after the first submission; nodes), as Slurm recorded them
SLURM = {
    "shape-cr-core": {"a": (1, "n1"), "c": (4, "n2"), "d": (7, "n3"), "b": (10, "n1,n2,n3"), "e": (50, "n2"),
                      "f": (61, "n1"), "g": (61, "n3")},
    "shape-cr-core-memory": {"a": (1, "n1"), "c": (4, "n2"), "d": (7, "n3"), "b": (61, "n1"), "e": (74, "n2"),
                             "f": (88, "n3"), "g": (102, "n1")},
    "backfill-ends": {"y1": (2, "n1"), "y2": (4, "n2"), "x": (11, "n3"), "b": (41, "n1,n2"), "s": (21, "n2")},
    "memory-consumable": {"a": (1, "n1"), "b": (4, "n2,n3"), "c": (64, "n2"), "d": (64, "n3"), "e": (91, "n1")},
    "memory-not-consumable": {"a": (1, "n1"), "b": (4, "n2,n3"), "c": (61, "n1")},
    "cadence": {"a": (0, "n1"), "b": (3, "n1"), "c": (3, "n1"), "d": (6, "n1"), "e": (6, "n2"), "f": (9, "n2"),
                "g": (12, "n2"), "h": (50, "n1,n2"), "i": (57, "n1,n2"), "j": (60, "n2")},
    "end-queued": {"a": (1, "n1"), "b": (41, "n1"), "c": (62, "n1")},
    "backfill-looks": {"a": (0, "n1"), "b": (32, "n1"), "c": (40, "n1")},
    "partition-block": {"a": (1, "n1,n2,n3"), "b": (61, "n1"), "c": (61, "n3,n4"), "d": (61, "n3"),
                        "e": (61, "n3")},
    "fill-retry": {"a": (1, "n1"), "b": (4, "n2,n3"), "c": (4, "n1"), "d": (25, "n1,n2")},
    "partition-not-avail": {"a": (0, "n1,n2,n3"), "b": (61, "n1"), "c": (61, "n3,n4"), "d": (9, "n4"),
                            "e": (12, "n4")},
}


def schedules(case: str) -> tuple[dict, dict, float]:
    folder = DATA / case
    recorded = workloads.recorded_schedule(folder / "trace.txt")
    replayed = workloads.replayed_schedule(folder / "trace.txt", folder / "slurm.conf")
    return recorded, replayed, min(v[0] for v in recorded.values())


@pytest.mark.parametrize("case", sorted(SLURM))
def test_the_replay_starts_every_job_when_and_where_real_slurm_did(case):
    recorded, replayed, origin = schedules(case)
    table = {job: (round(start - origin), ",".join(nodes)) for job, (_, start, nodes) in recorded.items()}
    assert table == SLURM[case]                        # the table is the recording
    got = {job: (start - origin, ",".join(nodes)) for job, (_, start, nodes) in replayed.items()}
    assert set(got) == set(table)
    off = {job: (got[job], table[job]) for job in table
           if abs(got[job][0] - table[job][0]) > TOLERANCE_S or got[job][1] != table[job][1]}
    assert off == {}


def test_sacct_allocated_nodes_are_not_read_as_the_request():
    # b: NNodes=3 (what Slurm allocated: 1 + 2 + 1 CPUs), ReqNodes=1 (what -n 4 asked)
    from greenslurm.traces.sacct import read_sacct
    jobs = {j.extra["job_name"]: j for j in read_sacct(str(DATA / "shape-cr-core" / "trace.txt")).jobs}
    assert (jobs["b"].nodes, jobs["b"].cpus, jobs["b"].extra["requested_nodes"]) == (3, 4, 0)


def test_the_hand_over_latency_delays_what_an_end_starts():
    # shape-cr-core: e (2 CPUs) waits for b's end; without a hand-over b's end (a whole second of
    # the trace) queues a request the background thread serves at its wake-up in that instant; with
    # a hand-over of 1.5 s Slurm gives b's nodes 1.5 s after it ends, and the request then waits for
    # the next wake-up, a whole second later: e starts 2 s later; a, c and d start at submission
    # passes: unchanged
    folder = DATA / "shape-cr-core"
    plain = workloads.replayed_schedule(folder / "trace.txt", folder / "slurm.conf")
    late = workloads.replayed_schedule(folder / "trace.txt", folder / "slurm.conf", slurm_handover=1.5)
    assert late["e"][1] - plain["e"][1] == 2.0
    assert all(late[j][1] == plain[j][1] for j in ("a", "c", "d", "b"))


@pytest.mark.parametrize("value, message", [
    ("-1", "field --slurm-handover: must be a number of seconds from 0 to 3600"),
    ("nan", "field --slurm-handover: must be a finite number, not nan"),
    ("1e9", "field --slurm-handover: must be a number of seconds from 0 to 3600"),
])
def test_a_bad_hand_over_latency_is_one_error_line(value, message, capsys):
    from greenslurm.cli import main
    folder = DATA / "shape-cr-core"
    code = main(["replay", str(folder / "trace.txt"), "--format", "sacct", "--slurm-conf", str(folder / "slurm.conf"),
                 "--queue", "slurm", "--slurm-handover", value])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_hand_over_latency_is_refused_for_other_queues(capsys):
    from greenslurm.cli import main
    folder = DATA / "shape-cr-core"
    code = main(["replay", str(folder / "trace.txt"), "--format", "sacct", "--slurm-conf", str(folder / "slurm.conf"),
                 "--queue", "easy", "--slurm-handover", "1"])
    assert code == 2 and "applies to the slurm queue (Slurm's hand-over latency)" in capsys.readouterr().err


def test_without_the_background_threads_cadence_submissions_start_too_early(tmp_path):
    # The control of "cadence": with batch_sched_delay=0 a pass serves every submission at once,
    # and b (submitted at 1) and g (at 10) start at submission, 2 s before Slurm started them.
    folder = DATA / "cadence"
    conf = (folder / "slurm.conf").read_text().replace("SchedulerParameters=default_queue_depth=100",
                                                       "SchedulerParameters=batch_sched_delay=0")
    assert "batch_sched_delay=0" in conf
    (tmp_path / "slurm.conf").write_text(conf)
    replayed = workloads.replayed_schedule(folder / "trace.txt", tmp_path / "slurm.conf")
    origin = min(v[0] for v in replayed.values())
    assert (replayed["b"][1] - origin, replayed["g"][1] - origin) == (1.0, 10.0)
    assert (SLURM["cadence"]["b"][0], SLURM["cadence"]["g"][0]) == (3, 12)


@pytest.mark.parametrize("requested, expected", [(None, 0), (1, 0), (3, 3)])
def test_sacct_json_keeps_the_requested_node_count_not_the_allocated_one(requested, expected):
    # allocation_nodes (3) is what Slurm allocated; tres.requested node= is what the job asked
    import json
    from greenslurm.traces.sacct_json import parse_sacct_json
    tres = [{"type": "cpu", "count": 4}] + ([{"type": "node", "count": requested}] if requested else [])
    job = {"job_id": 5, "state": {"current": ["COMPLETED"]},
           "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60,
                    "limit": {"set": True, "infinite": False, "number": 2}},
           "required": {"CPUs": 4}, "allocation_nodes": 3, "tres": {"requested": tres, "allocated": []}}
    spec = parse_sacct_json(json.dumps({"jobs": [job]})).jobs[0]
    assert (spec.nodes, spec.extra["requested_nodes"]) == (3, expected)


def test_a_pass_at_every_end_would_start_the_end_queued_jobs_too_early(tmp_path):
    # The control of "end-queued": with batch_sched_delay=0 every end is served at once (b at 25,
    # when a ends; c at 45), 16 and 17 s before Slurm started them.
    folder = DATA / "end-queued"
    conf = (folder / "slurm.conf").read_text()
    assert "batch_sched_delay=20" in conf
    (tmp_path / "slurm.conf").write_text(conf.replace("batch_sched_delay=20", "batch_sched_delay=0"))
    replayed = workloads.replayed_schedule(folder / "trace.txt", tmp_path / "slurm.conf")
    origin = min(v[0] for v in replayed.values())
    assert (replayed["b"][1] - origin, replayed["c"][1] - origin) == (25.0, 45.0)
    assert (SLURM["end-queued"]["b"][0], SLURM["end-queued"]["c"][0]) == (41, 62)


# A development recording with slurmctld's debug log (bench/data/slurm-workloads/s40: 32 nodes of
# 4/8/16 CPUs, sched/backfill, CR_CPU): j00 (-N 3 -n 6) was laid out 4 + 1 + 1 on n01-n03 (the
# log's job_resources: cpu_array_value 4 x1, 1 x2), so the 1-CPU jobs j05 and j07 went to n02 (3
# free, the best fit; after an even 2 + 2 + 2 they would have gone to n01) and j06 (3 CPUs) to n03.
# j19 (-n 5, NCPUS=5) holds 5 CPUs, 4 on n23 and 1 on n24 (not two equal shares of 3, 6 CPUs), so
# j21 (-n 5) fits 3 + 1 + 1 on n24-n26 (with 6 CPUs held by j19 it took n24-n27) and j22 takes n27.
# Every start up to j39 (92 s), as Slurm recorded it (whole seconds after the first submission):
LAYOUT = {"j00": (0, "n01,n02,n03"), "j01": (2, "n17"), "j02": (4, "n18"), "j03": (4, "n04"), "j04": (6, "n18"),
          "j05": (10, "n02"), "j06": (10, "n03"), "j07": (13, "n02"), "j08": (17, "n19"),
          "j09": (20, "n20,n21,n22"), "j10": (21, "n21,n22"), "j11": (23, "n23"), "j12": (23, "n24"),
          "j13": (25, "n05"), "j14": (26, "n25,n26"), "j15": (32, "n25"), "j16": (38, "n02"), "j17": (38, "n26"),
          "j18": (40, "n17,n18"), "j19": (42, "n23,n24"), "j20": (44, "n17"), "j21": (46, "n24,n25,n26"),
          "j22": (46, "n27"), "j23": (50, "n04"), "j24": (54, "n19,n20"), "j25": (56, "n17"),
          "j26": (60, "n24,n25"), "j27": (60, "n19,n20,n21"), "j28": (66, "n05"), "j29": (70, "n25,n26"),
          "j30": (72, "n20"), "j31": (76, "n02"), "j32": (76, "n21,n22"), "j33": (82, "n28,n29"),
          "j34": (83, "n01"), "j35": (86, "n03,n04"), "j36": (86, "n02,n03"), "j37": (86, "n22"),
          "j38": (88, "n29,n30"), "j39": (92, "n04")}


def test_a_node_count_without_a_per_node_share_is_laid_out_as_real_slurm_did():
    folder = ROOT / "bench" / "data" / "slurm-workloads" / "s40" / "run1"
    recorded = workloads.recorded_schedule(folder / "trace.txt")
    replayed = workloads.replayed_schedule(folder / "trace.txt", folder / "slurm.conf")
    origin = min(v[0] for v in recorded.values())
    table = {job: (round(recorded[job][1] - origin), ",".join(recorded[job][2])) for job in LAYOUT}
    assert table == LAYOUT                             # the table is the recording
    off = {job: ((replayed[job][1] - origin, ",".join(replayed[job][2])), LAYOUT[job]) for job in LAYOUT
           if abs(replayed[job][1] - origin - LAYOUT[job][0]) > TOLERANCE_S or ",".join(replayed[job][2]) != LAYOUT[job][1]}
    assert off == {}


def test_sacct_keeps_how_reqmem_was_given():
    # c asked no memory: ReqMem 4000M (a plain size: the job's total), AllocTRES mem=2000M
    from greenslurm.traces.sacct import read_sacct
    jobs = {j.extra["job_name"]: j for j in read_sacct(str(DATA / "memory-consumable" / "trace.txt")).jobs}
    assert (jobs["c"].memory_mb_per_node, jobs["c"].extra["memory_scope"]) == (4000.0, "job")
    assert (jobs["b"].memory_mb_per_node, jobs["b"].extra["memory_scope"]) == (500.0, "job")


def test_with_a_default_memory_reqmem_is_what_the_job_holds(tmp_path):
    # With DefMemPerNode in slurm.conf a job without --mem has that default (not 0), so ReqMem is
    # read as asked: under CR_Core b's 4000 MB per node (NNodes=2) fits only n1, a single node;
    # without the default b is read as asking none and spread over n2 and n3 as Slurm did.
    from greenslurm.sim.engine.slurm_memory import first_node_memory, has_default_memory
    from greenslurm.traces.slurm_conf import parse_slurm_conf
    folder = DATA / "memory-not-consumable"
    conf = (folder / "slurm.conf").read_text()
    (tmp_path / "slurm.conf").write_text(conf + "DefMemPerNode=4000\n")
    assert not has_default_memory(parse_slurm_conf(str(folder / "slurm.conf")))
    assert has_default_memory(parse_slurm_conf(str(tmp_path / "slurm.conf")))
    assert first_node_memory(parse_slurm_conf(str(folder / "slurm.conf"))) == {"all": 4000.0}
    replayed = workloads.replayed_schedule(folder / "trace.txt", tmp_path / "slurm.conf")
    assert "b" not in replayed and set(replayed) == {"a", "c"}


# Submissions stamped in one second, against the pass in that second (docs/slurm-reference.md,
# "Whole-second stamps").  A development recording (bench/data/slurm-workloads/s70: 4 nodes of 4/16
# CPUs, sched/builtin; slurmctld's log at its default level): j01 and j02 reached slurmctld 7 ms
# apart (13.088 and 13.095 s on its clock, stamp 6 s after the first submission), and one pass,
# at 13.731, allocated both (n02).  Read as instants spread evenly over their second (1/3 and 2/3)
# against a pass in its middle, j02 would have come after that pass and started at the next one
# the background thread may run, 3 s later (batch_sched_delay): 9 s.  Submissions sharing a stamp
# are a burst and are seen by the same pass.  Every start up to j04, as Slurm recorded it:
BURST = {"j00": (0, "n01,n02"), "j01": (6, "n02"), "j02": (6, "n02"), "j03": (10, "n02,n03"), "j04": (13, "n04")}


def test_submissions_stamped_in_one_second_are_seen_by_one_pass_as_real_slurm_did():
    folder = ROOT / "bench" / "data" / "slurm-workloads" / "s70" / "run1"
    recorded = workloads.recorded_schedule(folder / "trace.txt")
    replayed = workloads.replayed_schedule(folder / "trace.txt", folder / "slurm.conf")
    origin = min(v[0] for v in recorded.values())
    first = sorted(recorded, key=lambda job: (recorded[job][1], job))[:len(BURST)]
    table = {job: (round(recorded[job][1] - origin), ",".join(recorded[job][2])) for job in first}
    assert table == BURST                              # the table is the recording: its first starts
    assert recorded["j01"][0] == recorded["j02"][0]    # one stamp
    off = {job: ((replayed[job][1] - origin, ",".join(replayed[job][2])), BURST[job]) for job in BURST
           if abs(replayed[job][1] - origin - BURST[job][0]) > TOLERANCE_S or ",".join(replayed[job][2]) != BURST[job][1]}
    assert off == {}


def test_slurmctlds_log_tells_which_stamped_events_came_before_the_pass_of_their_second():
    # bench/stamp_sides.py on s70's log (default level: passes show by their allocations): the
    # generator submitted 0.088 s into each second (median) and the passes' phase drifted from 0.72
    # through the second, so 47 of 60 submissions came before the pass of their second; of the 60
    # ends, 46 before, 11 after, 3 with no allocating pass within 30 s.  Its examples run too.
    import doctest

    import stamp_sides
    log = (ROOT / "bench" / "data" / "slurm-workloads" / "s70" / "run1" / "slurmctld.log").read_text()
    found = stamp_sides.sides(log)
    assert (found.submissions, found.ends, round(found.submission_phase_median, 3)) == ((47, 13, 0), (46, 11, 3), 0.088)
    assert doctest.testmod(stamp_sides).failed == 0


def test_an_unreadable_log_is_one_error_line(tmp_path, capsys):
    import stamp_sides
    assert stamp_sides.main([str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.log: cannot read" in err
    (tmp_path / "cut.log.gz").write_bytes(b"\x1f\x8b\x08\x00")          # a gzip header, nothing after
    assert stamp_sides.main([str(tmp_path / "cut.log.gz")]) == 2
    assert capsys.readouterr().err.startswith(f"{tmp_path / 'cut.log.gz'}: cannot read: ")


@pytest.mark.parametrize("stamp, field", [("2026-13-01T00:00:05.100", "month must be in 1..12"),
                                          ("2026-02-30T00:00:05.100", "day is out of range for month"),
                                          ("2026-01-01T25:00:05.100", "hour must be in 0..23")])
def test_a_stamp_that_is_no_time_is_one_error_line_naming_its_line(stamp, field, tmp_path, capsys):
    # the site's log reader (python -m greenslurm.slurmctld_log) and bench/stamp_sides.py
    import stamp_sides
    from greenslurm import slurmctld_log
    log = tmp_path / "slurmctld.log"
    log.write_text(f"[2026-01-01T00:00:01.000] _job_complete: JobId=1 done\n[{stamp}] sched: Allocate JobId=2\n")
    for main in (slurmctld_log.main, stamp_sides.main):
        assert main([str(log)]) == 2
        assert capsys.readouterr().err == f"{log}: line 2: time stamp {stamp!r} is no time ({field})\n"
