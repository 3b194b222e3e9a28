"""The deadline queue's core (compiled C, the fast path) against the replay's general loop (the reference).

The core replaces the general loop for the deadline queue on a pool of single-CPU nodes (Greedy,
Threshold or AcceptAll; balanced, bestfit, minidle or firstfit in the append view; no power
budget); its results must be the general loop's bit for bit: every start, end, node list and
energy, every rejection and its message, the power series and every ledger sum.  Exact small cases
first (arithmetic in the comments), then random workloads (hypothesis), crafted inputs, then the
KTH-SP2 log through the command line.
"""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.selection import make_selection
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.errors import InputError
from greenslurm.sim.engine import deadline_core
from greenslurm.sim.engine.deadline_core import DeadlineJobs, run_deadline
from greenslurm.sim.engine.pool_core import PoolPower
from greenslurm.sim.engine.replay import Replay
from test_pool_core import assert_same as assert_same_run, pool_workloads

POWER = PoolPower(idle_power_w=400.0, delta_per_node_w=150.0, share_per_node_w=250.0)   # 4 nodes idle at 100 W
NAN, INF = float("nan"), float("inf")


def test_the_compiled_core_is_built():
    """The test install builds it: a missing library must fail here, not quietly test the general
    loop against itself."""
    assert deadline_core.compiled_library() is not None


def jobs_of(submit, requested, run_for, procs, deadline=None, limit=None) -> DeadlineJobs:
    count = len(submit)
    deadline = [NAN] * count if deadline is None else deadline
    limit = [INF] * count if limit is None else limit
    return DeadlineJobs(*(np.array(c, dtype=float) for c in (submit, requested, run_for)),
                        np.array(procs, dtype=np.int64), np.array(deadline, dtype=float), np.array(limit, dtype=float))


@pytest.mark.parametrize("rule, c_start, c_node", [
    # At 0 on 4 nodes: a (1 proc, 50 s) takes node 0, b (1 proc, 30 s) node 1 (tails 0 on 1-3: the
    # lowest index of the run), so tails are [50, 30, 0, 0].  c (1 proc, 10 s, deadline 60) may start at
    # 0, 30 or 50 (each + 10 <= 60):
    ("bestfit", 50.0, 0),     # score -(largest tail <= start): -0, -30, -50 -> 50, after a on node 0
    ("balanced", 0.0, 2),     # score = the smallest tail, 0 at every start -> the earliest, node 2
    ("minidle", 0.0, 2),      # idle 1 x (start - 0) - tail: 0 - 0, 30 - 30, 50 - 50 -> tie: the earliest
    ("firstfit", 0.0, 2),     # the earliest start, the lowest-numbered free node
])
def test_submission_places_as_the_rule_says(rule, c_start, c_node):
    run = run_deadline(rule, 4, jobs_of([0.0, 0.0, 0.0], [50.0, 30.0, 10.0], [50.0, 30.0, 10.0], [1, 1, 1],
                                        deadline=[NAN, NAN, 60.0], limit=[INF, INF, 60.0]), POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 0.0, c_start]
    assert [run.nodes_of(j) for j in range(3)] == [[0], [1], [c_node]]
    assert run.accepted.tolist() == [True, True, True]
    # the earliest end each saw: 0 + 50, 0 + 30, 0 + 10
    assert run.finish_s.tolist() == [50.0, 30.0, 10.0]


def test_an_early_end_moves_waiting_jobs_in_arrival_order():
    # 2 nodes, bestfit.  a: 1 proc at 0 asking 100, runs 20 -> node 0.  b: 2 procs at 1 asking 10 ->
    # tails [100, 1]: reserved [100, 110) on both.  c: 1 proc at 2 asking 50 -> tails [110, 110]:
    # reserved at 110 on node 0 (equal tails: the lowest index).  At 20 a ends early: b (given back)
    # finds node 0 free over [20, 110) and node 1 for ever, 20 + 10 <= 110 -> moves to 20; then c finds
    # both nodes free from 30 (b's end) -> moves to 30, on node 0 (equal tails 30: the lowest index).
    run = run_deadline("bestfit", 2, jobs_of([0.0, 1.0, 2.0], [100.0, 10.0, 50.0], [20.0, 10.0, 50.0], [1, 2, 1]),
                       POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 20.0, 30.0]
    assert run.by_job(run.end_s).tolist() == [20.0, 30.0, 80.0]
    assert [run.nodes_of(j) for j in range(3)] == [[0], [0, 1], [0]]
    # 250 W a node: a 250 x 20; b 2 x 250 x 10; c 250 x 50
    assert run.by_job(run.energy_j).tolist() == [5000.0, 5000.0, 12500.0]
    # power: 400 idle + 150 a busy node: 550 on [0, 20), 700 on [20, 30), 550 on [30, 80)
    assert run.times_s.tolist() == [0.0, 20.0, 30.0] and run.power_w.tolist() == [550.0, 700.0, 550.0]
    assert run.total_j == 550.0 * 20 + 700.0 * 10 + 550.0 * 50
    # without compression b and c keep their slots: b at 100, c at 110
    run = run_deadline("bestfit", 2, jobs_of([0.0, 1.0, 2.0], [100.0, 10.0, 50.0], [20.0, 10.0, 50.0], [1, 2, 1]),
                       POWER, 0.0, compress=False)
    assert run.by_job(run.start_s).tolist() == [0.0, 100.0, 110.0]


def test_a_move_needs_the_whole_window_free():
    # 2 nodes, balanced.  a: 2 procs at 0 asking 100, runs 10.  b: 1 proc at 1 asking 50 -> tails
    # [100, 100]: [100, 150) on node 0.  c: 1 proc at 2 asking 20 -> tails [150, 100]: [100, 120) on
    # node 1.  d: 2 procs at 3 asking 10 -> tails [150, 120]: [150, 160).  At 10 a ends early.  b
    # (its own slot given back): node 0 free over [10, 150), node 1 over [10, 100), both hold 50 s ->
    # 10, on node 0 (both tails 160).  c: node 0 is free only from 60 now, node 1 over [10, 150) ->
    # 10 on node 1.  d needs both for 10 s: node 1 from 30, node 0 from 60 -> 60.
    run = run_deadline("balanced", 2, jobs_of([0.0, 1.0, 2.0, 3.0], [100.0, 50.0, 20.0, 10.0],
                                              [10.0, 50.0, 20.0, 10.0], [2, 1, 1, 2]), POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 10.0, 10.0, 60.0]
    assert [run.nodes_of(j) for j in range(4)] == [[0, 1], [0], [1], [0, 1]]


def test_a_moved_job_ranks_its_nodes_without_its_own_slot(monkeypatch):
    # 2 nodes, bestfit.  a: 2 procs at 0 asking 100, runs 10.  b: 1 proc at 1 asking 20 -> tails
    # [100, 100]: [100, 120) on node 0 (equal tails: the highest index last, node 0).  c: 1 proc at 2
    # asking 15 -> tails [120, 100]: [100, 115) on node 1.  At 10 a ends early.  b (its slot given
    # back) fits at 10 on both nodes: node 0 is free for ever, node 1 over [10, 100).  bestfit takes
    # the node with the latest tail without b's own slot: node 0's is 10 (now), node 1's 115 -> node 1
    # (with b's slot node 0's tail would be 120, and b would stay on node 0).  c (given back): node 0
    # free from 10 -> 10 on node 0.
    jobs = jobs_of([0.0, 1.0, 2.0], [100.0, 20.0, 15.0], [10.0, 20.0, 15.0], [2, 1, 1])
    run = run_deadline("bestfit", 2, jobs, POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 10.0, 10.0]
    assert [run.nodes_of(j) for j in range(3)] == [[0, 1], [1], [0]]
    cluster = Cluster.homogeneous(2, cpus=1)
    specs = [JobSpec(name, s, p, runtime_s=r, cpus=c)
             for name, s, p, r, c in (("a", 0.0, 100.0, 10.0, 2), ("b", 1.0, 20.0, 20.0, 1), ("c", 2.0, 15.0, 15.0, 1))]
    general = replay_with("off", monkeypatch, specs, cluster)
    assert_same(replay_with("compiled", monkeypatch, specs, cluster), general)


def test_rejected_jobs_hold_nothing():
    # 1 node.  a: at 0, 100 s.  b: at 1, 10 s, limit 50: its earliest end is 100 + 10 = 110 > 50 ->
    # rejected, never runs.  c: at 2, 10 s, no limit: [100, 110).  A job whose limit is -inf (a
    # slack below Threshold's minimum) is rejected whatever its earliest end.
    run = run_deadline("bestfit", 1, jobs_of([0.0, 1.0, 2.0, 3.0], [100.0, 10.0, 10.0, 1.0], [100.0, 10.0, 10.0, 1.0],
                                             [1, 1, 1, 1], deadline=[NAN, 50.0, NAN, 5.0],
                                             limit=[INF, 50.0, INF, -INF]), POWER, 0.0)
    assert run.accepted.tolist() == [True, False, True, False]
    assert run.finish_s.tolist() == [100.0, 110.0, 110.0, 111.0]
    assert run.rows.tolist() == [0, 2] and run.start_s.tolist() == [0.0, 100.0]


def test_simultaneous_events():
    # 3 nodes, minidle.  Four 1-proc jobs at 0 asking 10 (two run 5) and one 3-proc job at 0: the
    # first three fill nodes 0, 1, 2 at 0, the fourth waits for [10, 20) on node 0, the 3-proc job for
    # [20, 30).  At 5 jobs 0 and 1 end early together: the fourth finds nodes 0 and 1 free over
    # [5, 20) and moves to 5 on node 0 (both nodes' tails are 30: the lowest index); the 3-proc job
    # then finds node 1 free from 5, node 2 from 10 and node 0 from 15: it moves to 15.
    run = run_deadline("minidle", 3, jobs_of([0.0] * 5, [10.0] * 5, [5.0, 5.0, 10.0, 10.0, 10.0], [1, 1, 1, 1, 3]),
                       POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 0.0, 0.0, 5.0, 15.0]
    assert run.rows.tolist() == [0, 1, 2, 3, 4]          # 0 and 1 end at 5 in start order


def test_a_bad_choice_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv(deadline_core.ENV, "turbo")
    with pytest.raises(InputError, match=r"^environment: field GREENSLURM_DEADLINE_CORE: 'turbo' is not a core"):
        deadline_core.chosen_core()


def test_a_job_the_pool_cannot_place_is_refused():
    with pytest.raises(ValueError, match="asks for 3 processors"):
        run_deadline("bestfit", 2, jobs_of([0.0], [1.0], [1.0], [3]), POWER, 0.0)


def test_an_arrival_at_nan_is_an_error_not_a_hang():
    """The replay never gives the core a NaN time (the readers refuse it and the replay keeps the
    general loop for one); a caller that does is told, not left waiting."""
    with pytest.raises(RuntimeError, match="still waiting"):
        run_deadline("bestfit", 2, jobs_of([0.0, NAN], [1.0, 1.0], [1.0, 1.0], [1, 1]), POWER, 0.0)


# -- against the general loop ----------------------------------------------------------------------
def replay_with(core: str, patch, jobs, cluster, rule="bestfit", acceptance="greedy", options=None, **strategy):
    patch.setenv(deadline_core.ENV, core)
    return Replay(jobs, cluster, "deadline", selection=make_selection(rule),
                  strategy_options=dict(acceptance=acceptance, acceptance_options=options or {}, **strategy)).run()


def assert_same(a, b):
    """Two replay results, bit for bit, rejections included."""
    assert_same_run(a, b)
    assert a.rejected == b.rejected


@st.composite
def deadline_workloads(draw):
    """The pool core's random workloads, some jobs with a deadline 0 to 800 s after their arrival."""
    cluster, jobs = draw(pool_workloads())
    after = [draw(st.one_of(st.none(), st.integers(0, 800))) for _ in jobs]
    return cluster, [job if d is None else job.with_changes(deadline_s=job.submit_s + d) for job, d in zip(jobs, after)]


ACCEPTANCE = [("greedy", {}), ("all", {}), ("threshold", {"share": 0.5}), ("threshold", {"share": 0.8, "min_slack": 0.5}),
              ("threshold,greedy", {"share": 0.3})]


@settings(max_examples=300, deadline=None)
@given(deadline_workloads(), st.sampled_from(["bestfit", "balanced", "minidle", "firstfit"]),
       st.sampled_from(ACCEPTANCE), st.booleans())
def test_cores_equal_the_general_loop(patch, workload, rule, acceptance, compress):
    cluster, jobs = workload
    policy, options = acceptance
    general = replay_with("off", patch, jobs, cluster, rule, policy, options, compress=compress)
    assert_same(replay_with("compiled", patch, jobs, cluster, rule, policy, options, compress=compress), general)


@st.composite
def long_plans(draw):
    """Two or three nodes and 40 to 90 jobs arriving within a minute: each node's plan holds tens of
    reservations, with holes of every length where jobs ended early (a job ends early at a third of its
    time or runs it out), so the core's blocks of 8 holes and its per-node summary (greatest hole, first
    start, last end) are read and brought up to date after every move."""
    nodes = draw(st.integers(2, 3))
    jobs = []
    for i in range(draw(st.integers(40, 90))):
        requested = float(draw(st.integers(1, 120)))
        jobs.append(JobSpec(str(i), submit_s=float(draw(st.integers(0, 60))), requested_time_s=requested,
                            runtime_s=draw(st.sampled_from([requested, float(int(requested) // 3)])),
                            cpus=draw(st.integers(1, nodes))))
    return Cluster.homogeneous(nodes, cpus=1, idle_w=100.0, busy_w=250.0), jobs


@settings(max_examples=150, deadline=None)
@given(long_plans(), st.sampled_from(["bestfit", "balanced", "minidle", "firstfit"]))
def test_cores_equal_the_general_loop_on_long_plans(patch, workload, rule):
    cluster, jobs = workload
    general = replay_with("off", patch, jobs, cluster, rule, "all", {})
    assert_same(replay_with("compiled", patch, jobs, cluster, rule, "all", {}), general)


@pytest.fixture(scope="module")
def patch():
    with pytest.MonkeyPatch.context() as context:
        yield context


def test_the_core_runs_what_it_knows_and_no_more(monkeypatch):
    """The deadline queue on single-CPU nodes with a load rule: the core; with backfilling, a GPU
    scorer's order, a power budget, a job planned for no time, or nodes of two CPUs: the general
    loop (here: the core is not asked)."""
    class CoreAsked(Exception):
        """raised by a stand-in for the core, so that a run that asks it stops there"""

    def asked(*args, **kwargs):
        raise CoreAsked

    monkeypatch.setattr(deadline_core, "run_deadline", asked)
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=5.0, cpus=1)]
    one_cpu = Cluster.homogeneous(2, cpus=1)
    Replay(jobs, one_cpu, "deadline", selection=make_selection("bestfit+backfill")).run()
    Replay(jobs, Cluster.homogeneous(2, cpus=2), "deadline").run()                      # two CPUs a node
    Replay(jobs + [JobSpec("zero", 1.0, 0.0, runtime_s=0.0, cpus=1)], one_cpu, "deadline").run()
    from greenslurm.clustermodel.renewable import SupplySeries
    supply = SupplySeries([0.0, 100.0], [0.0, 300.0])
    Replay(jobs, one_cpu, "deadline", strategy_options=dict(supply=supply, renewable="green")).run()
    for rule in ("bestfit", "balanced", "minidle", "firstfit"):
        with pytest.raises(CoreAsked):
            Replay(jobs, one_cpu, "deadline", selection=make_selection(rule)).run()
    with pytest.raises(CoreAsked):       # a supply in grid mode only splits the energy afterwards
        Replay(jobs, one_cpu, "deadline", strategy_options=dict(supply=supply, renewable="grid")).run()


def test_crafted_jobs_as_the_general_loop_runs_them(monkeypatch):
    """Jobs longer than any deadline (all rejected but those without one), jobs running 0 s, jobs
    asking more than the pool (skipped), jobs without a finite runtime (skipped), many at one time,
    times near a double's range."""
    cluster = Cluster.homogeneous(3, cpus=1)
    jobs = [JobSpec("long", 0.0, 1e6, runtime_s=1e6, cpus=1, deadline_s=10.0),
            JobSpec("zero-run", 0.0, 50.0, runtime_s=0.0, cpus=3),
            JobSpec("big", 0.0, 10.0, runtime_s=5.0, cpus=4),
            JobSpec("forever", 0.0, float("inf"), runtime_s=None, cpus=1),
            *(JobSpec(f"same{i}", 5.0, 20.0, runtime_s=float(3 * i), cpus=1 + i % 3, deadline_s=5.0 + 20.0 * (i + 1))
              for i in range(8)),
            JobSpec("huge", 6.0, 1e300, runtime_s=1e300, cpus=2),
            JobSpec("after-huge", 7.0, 1.0, runtime_s=1.0, cpus=3, deadline_s=1e301)]
    for rule in ("bestfit", "balanced", "minidle", "firstfit"):
        for policy, options in ACCEPTANCE:
            general = replay_with("off", monkeypatch, jobs, cluster, rule, policy, options)
            assert sum(general.skipped.values()) == 2 and bool(general.rejected) == (policy != "all")
            assert_same(replay_with("compiled", monkeypatch, jobs, cluster, rule, policy, options), general)


# -- the KTH-SP2 log through the command line ---------------------------------------------------------
def replay_out(trace, out, core, *options):
    """Replay into ``out`` with ``core`` and check, from the log (-v), which part ran the replay: a
    run the core declined would compare the general loop with itself."""
    done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), "--queue", "deadline",
                           *options, "--out", str(out), "--no-progress", "-v"], check=True, capture_output=True,
                          text=True, env={**os.environ, deadline_core.ENV: core})
    ran = "the general loop runs" if core == "off" else f"the deadline core ({core}) runs"
    assert ran in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("options", [
    ("--acceptance", "greedy", "--select", "bestfit", "--limit", "3000"),
    ("--acceptance", "threshold", "--select", "minidle", "--slack-mean", "2", "--limit", "3000"),
    ("--acceptance", "greedy", "--select", "balanced", "--slack-mean", "0.5", "--limit", "3000"),
])
def test_kth_log_same_bytes_with_the_core_and_the_general_loop(shared_data, tmp_path, options):
    """The first 3,000 jobs of KTH-SP2 (the general loop takes about a minute for the whole log)."""
    trace = shared_data / "swf/KTH-SP2-1996-2.1-cln.swf"
    for core in ("off", "compiled"):
        replay_out(trace, tmp_path / core, core, *options)
    for name in ("jobs.csv", "power.csv", "summary.json"):
        assert filecmp.cmp(tmp_path / "off" / name, tmp_path / "compiled" / name, shallow=False), name


def test_longer_kth_log_same_bytes_with_the_core_and_the_general_loop(shared_data, tmp_path):
    """The first 8,000 jobs, greedy and bestfit (about 11 s CPU in the general loop; the whole log's
    28,000 take about a minute there, and gave the same bytes when the core's fallback became the
    general loop: see docs/replay-engine.md)."""
    trace = shared_data / "swf/KTH-SP2-1996-2.1-cln.swf"
    for core in ("off", "compiled"):
        replay_out(trace, tmp_path / core, core, "--acceptance", "greedy", "--select", "bestfit", "--limit", "8000")
    for name in ("jobs.csv", "power.csv", "summary.json"):
        assert filecmp.cmp(tmp_path / "off" / name, tmp_path / "compiled" / name, shallow=False), name


@pytest.mark.parametrize("options", [
    ("--acceptance", "greedy", "--select", "balanced", "--slack-mean", "0.5"),
    ("--acceptance", "threshold", "--select", "bestfit"),
])
def test_overloaded_kth_log_same_bytes_with_the_core_and_the_general_loop(shared_data, tmp_path, options):
    """Arrivals twice as fast (the first 1,500 jobs): hundreds of jobs wait, every early end looks
    again at each, and the compiled core skips most of those looks (what was taken out of the plan
    since a job last found no earlier start cannot hold it) and starts its gap search late (the free
    counts); the general loop looks at every job each time."""
    trace = shared_data / "swf/KTH-SP2-1996-2.1-cln.swf"
    for core in ("off", "compiled"):
        replay_out(trace, tmp_path / core, core, *options, "--arrival-scale", "0.5", "--limit", "1500")
    for name in ("jobs.csv", "power.csv", "summary.json"):
        assert filecmp.cmp(tmp_path / "off" / name, tmp_path / "compiled" / name, shallow=False), name


def test_a_run_begun_after_its_first_arrival():
    """The free counts the compiled core keeps begin at the first arrival when the run begins later
    (they began at the run's start, and then found no earlier start for a job that had one).  The
    case of test_a_move_needs_the_whole_window_free with the run begun at 100: the same starts."""
    run = run_deadline("balanced", 2, jobs_of([0.0, 1.0, 2.0, 3.0], [100.0, 50.0, 20.0, 10.0],
                                              [10.0, 50.0, 20.0, 10.0], [2, 1, 1, 2]), POWER, 100.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 10.0, 10.0, 60.0]


@pytest.mark.parametrize("queue", ["easy", "deadline"])
def test_skipped_jobs_are_counted_once_when_a_core_declines(monkeypatch, queue):
    """A job without a finite runtime is skipped; a job the cores do not take (no CPU; or, for the
    deadline core, one planned for no time) sends the replay to the general loop, which counts the
    skipped job itself: once, as with the cores off (it was counted twice)."""
    cluster = Cluster.homogeneous(2, cpus=1)
    jobs = [JobSpec("forever", 0.0, float("inf"), runtime_s=None, cpus=1),
            JobSpec("no-cpu" if queue == "easy" else "zero", 1.0, 10.0 if queue == "easy" else 0.0,
                    runtime_s=5.0, cpus=0 if queue == "easy" else 1)]
    counts = []
    for core in ("off", "compiled"):
        monkeypatch.setenv(deadline_core.ENV, core)
        monkeypatch.setenv("GREENSLURM_POOL_CORE", core)
        counts.append(dict(Replay(jobs, cluster, queue).run().skipped))
    assert counts == [{"no finite runtime (would run forever)": 1}] * 2


def test_jobs_the_core_cannot_take_are_said_once_and_replayed_the_same(tmp_path, monkeypatch, capsys):
    # Three one-processor jobs on 2 processors (SWF: id submit wait run procs ... requested time);
    # b ran 0 s and its requested time is unknown (-1): the reader uses its run time, 0 s, and a job
    # planned for no time is not the compiled core's: the general loop runs the replay and says why
    from greenslurm.cli import main
    from greenslurm.clustermodel import native
    monkeypatch.setattr(native, "_WARNED_DEADLINE_JOBS", [])
    rows = ["1 0 -1 100 1 -1 -1 1 100 -1 1 1 1 1 1 -1 -1 -1",
            "2 10 -1 0 1 -1 -1 1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "3 20 -1 50 1 -1 -1 1 60 -1 1 1 1 1 1 -1 -1 -1"]
    trace = tmp_path / "zero.swf"
    trace.write_text("; MaxProcs: 2\n" + "\n".join(rows) + "\n")
    args = ["replay", str(trace), "--queue", "deadline", "--no-progress"]
    assert main(args + ["--json", str(tmp_path / "auto.json")]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == ["greenslurm: warning: the deadline queue's compiled core cannot take these jobs (1 job "
                        "with a requested time of 0 s), so the replay runs in the general loop (the reference, "
                        "the same results), slower: KTH-SP2's deadline queue takes 68x the CPU time there"]
    monkeypatch.setenv("GREENSLURM_DEADLINE_CORE", "off")
    assert main(args + ["--json", str(tmp_path / "off.json")]) == 0
    assert "warning" not in capsys.readouterr().err          # off by choice: nothing to say
    import json
    auto, off = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("auto", "off"))
    assert auto == off and auto["jobs_completed"] == 3
