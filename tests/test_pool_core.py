"""The processor-pool core (compiled C, the fast path) against the replay's general loop (the reference).

The core replaces the general loop for FCFS and EASY on a pool of single-CPU nodes with first fit;
its results must be the general loop's bit for bit: every start, end, node list and energy, the
power series and every ledger sum.  Exact small cases first (arithmetic in the comments), then
random workloads (hypothesis), then whole real logs through the command line.
"""

from __future__ import annotations

import ctypes
import filecmp
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.errors import InputError
from greenslurm.sim.engine import pool_core
from greenslurm.sim.engine.pool_core import PoolPower, run_pool
from greenslurm.sim.engine.replay import Replay

POWER = PoolPower(idle_power_w=400.0, delta_per_node_w=150.0, share_per_node_w=250.0)   # 4 nodes idle at 100 W


def test_the_compiled_core_is_built():
    """The test install builds it (a C compiler is among the test command's packages): a missing
    library must fail here, not quietly test the general loop against itself."""
    assert pool_core.compiled_library() is not None


def test_fcfs_exact():
    # 4 nodes.  a: 3 procs at 0 for 10 s -> nodes 0-2 until 10.  b: 2 procs at 1 -> waits (1 free), starts
    # at 10 on nodes 0-1.  c: 1 proc at 2 -> FCFS keeps it behind b although node 3 is free: starts at 10
    # on node 2.
    run = run_pool("fcfs", 4, [0.0, 1.0, 2.0], [10.0, 5.0, 5.0], [10.0, 5.0, 5.0], [3, 2, 1], POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 10.0, 10.0]
    assert run.by_job(run.end_s).tolist() == [10.0, 15.0, 15.0]
    assert [run.nodes_of(j) for j in range(3)] == [[0, 1, 2], [0, 1], [2]]
    assert run.rows.tolist() == [0, 1, 2]        # b and c end together: in start order
    # energy per job: 250 W a node x nodes x run time
    assert run.by_job(run.energy_j).tolist() == [250.0 * 3 * 10, 250.0 * 2 * 5, 250.0 * 5]
    # power: 400 W idle; 0-10 s three nodes busy (+450 W); 10-15 s three busy; then idle.
    # total = 850 x 10 + 850 x 5 = 12,750 J (the series ends at the last event, 15 s)
    assert run.times_s.tolist() == [0.0, 10.0]
    assert run.power_w.tolist() == [850.0, 850.0]
    assert run.total_j == 12750.0
    assert run.peak_power_w == 850.0


def test_easy_backfills_only_what_does_not_delay_the_head():
    # 4 nodes.  a: 3 procs, 0-100 (requested 100).  head b: 4 procs at 1 -> shadow time 100, extra
    # processors 4 + 0 - 4 = 0.  c: 1 proc at 2 asking 50 s -> ends by 100: backfills at 2.  d: 1 proc
    # at 3 asking 200 s -> would end after the shadow and no extra processor is left: waits.
    submit = [0.0, 1.0, 2.0, 3.0]
    requested = [100.0, 10.0, 50.0, 200.0]
    run = run_pool("easy", 4, submit, requested, requested, [3, 4, 1, 1], POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 100.0, 2.0, 110.0]
    # c ran on node 3 (the only free one); d starts when b ends at 110, on node 0
    assert run.nodes_of(2) == [3]
    assert run.nodes_of(3) == [0]


def test_easy_extra_processors_let_a_long_job_backfill():
    # 4 nodes.  a: 2 procs, 0-100.  head b: 3 procs at 1 -> shadow 100; then 2 + 2 = 4 free, extra
    # 4 - 3 = 1.  c: 1 proc at 2 asking 500 s -> past the shadow but 1 <= 1 extra: starts at 2.
    # d: 1 proc at 3 asking 500 s -> extra is now 0: waits, although node 3 is free.
    requested = [100.0, 10.0, 500.0, 500.0]
    run = run_pool("easy", 4, [0.0, 1.0, 2.0, 3.0], requested, requested, [2, 3, 1, 1], POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 100.0, 2.0, 110.0]


def test_a_bad_choice_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv(pool_core.ENV, "fast")
    with pytest.raises(InputError, match=r"^environment: field GREENSLURM_POOL_CORE: 'fast' is not a core"):
        pool_core.chosen_core()


def test_conservative_exact():
    # 4 nodes.  a: 2 procs 0-100 (asks 100, runs 40).  b: 4 procs at 1, asks 50 -> reserved at 100
    # (a holds 2 until 100 in the plan).  c: 2 procs at 2, asks 30 -> fits beside a before b:
    # reserved at 2, runs 2-32.  At 40 a ends early: the plan frees [40, 100); b's reservation moves
    # to 40 (4 free from 40: c ended at 32), so b starts at 40 and ends at 90.
    requested = [100.0, 50.0, 30.0]
    run = run_pool("conservative", 4, [0.0, 1.0, 2.0], requested, [40.0, 50.0, 30.0], [2, 4, 2], POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 40.0, 2.0]
    assert run.by_job(run.end_s).tolist() == [40.0, 90.0, 32.0]
    assert run.rows.tolist() == [2, 0, 1]
    # a job asking 0 s plans nothing, yet holds its node for an instant; d (1 proc, 0 s) and e
    # (4 procs) arrive at 0 on 4 nodes: d is reserved at 0 and goes first, e waits for d's end
    # at the same instant
    run = run_pool("conservative", 4, [0.0, 0.0], [0.0, 10.0], [0.0, 10.0], [1, 4], POWER, 0.0)
    assert run.by_job(run.start_s).tolist() == [0.0, 0.0] and run.rows.tolist() == [0, 1]


@pytest.mark.parametrize("requested, run_for", [(-50.0, 1.0), (5.0, -3.0), (float("nan"), 1.0)])
def test_conservative_refuses_a_time_before_its_plan(requested, run_for):
    """No reader gives a negative time, but the core's callers might.  On 2 nodes, one held over
    [0, 10): a 2-processor job asking -50 s is reserved at 10 until 10 - 50 = -40; one running -3 s
    ends at -3 and gives back [-3, 5).  Both lie before the plan's start (0): the core says so (it
    read before its plan's memory).  NaN: a reservation ending at NaN, the same."""
    with pytest.raises(ValueError, match="before the plan's start"):
        run_pool("conservative", 2, [0.0, 0.0], [10.0, requested], [10.0, run_for], [1, 2], POWER, 0.0)


@pytest.mark.parametrize("procs, says", [([1, 0], "asks for 0 processors"), ([1, 3], "asks for 3 processors"),
                                         ([-1], "the job columns differ")])
def test_a_job_the_pool_cannot_place_is_refused(procs, says):
    """The replay gives the core only jobs of 1 to n processors; a caller giving others (a job of 0
    processors made the compiled core write before its memory; one of 3 on 2 nodes never starts
    and FCFS lost it without a word) is told so."""
    with pytest.raises(ValueError, match=says):
        run_pool("fcfs", 2, [0.0, 1.0], [10.0, 10.0], [10.0, 10.0], procs, POWER, 0.0)


# -- against the general loop ----------------------------------------------------------------------
def replay_with(core: str, monkeypatch, jobs, cluster, queue):
    monkeypatch.setenv(pool_core.ENV, core)
    return Replay(jobs, cluster, queue).run()


def assert_same(a, b):
    """Two replay results, bit for bit."""
    assert [(r.job_id, r.start_s, r.end_s, r.nodes, r.cpus, r.gpus, r.energy_j, r.node_indices, r.killed_at_limit)
            for r in a.records] == \
        [(r.job_id, r.start_s, r.end_s, r.nodes, r.cpus, r.gpus, r.energy_j, r.node_indices, r.killed_at_limit)
         for r in b.records]
    for name in ("power_times_s", "power_w", "busy_cpus"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    ea, eb = a.energy, b.energy
    assert (ea.total_j, ea.jobs_j, ea.unallocated_j, ea.idle_nodes_j, ea.peak_power_w, ea.end_s) == \
        (eb.total_j, eb.jobs_j, eb.unallocated_j, eb.idle_nodes_j, eb.peak_power_w, eb.end_s)
    assert ea.per_node_j.tobytes() == eb.per_node_j.tobytes()
    assert a.skipped == b.skipped and a.jobs_total == b.jobs_total


@st.composite
def pool_workloads(draw):
    nodes = draw(st.integers(1, 12))
    count = draw(st.integers(0, 60))
    jobs = []
    for i in range(count):
        requested = float(draw(st.integers(1, 400)))
        jobs.append(JobSpec(
            str(i), submit_s=float(draw(st.integers(0, 300))), requested_time_s=requested,
            # some jobs end early, some at their limit, some would run past it (killed), some run 0 s
            runtime_s=float(draw(st.sampled_from([0, requested, requested * 2, draw(st.integers(0, 400))]))),
            cpus=draw(st.integers(1, nodes + 2))))     # a few ask for more than the pool: skipped
    idle_w = draw(st.sampled_from([0.0, 37.5, 100.0]))
    busy_w = idle_w + draw(st.sampled_from([0.0, 12.25, 150.0]))
    return Cluster.homogeneous(nodes, cpus=1, idle_w=idle_w, busy_w=busy_w), jobs


@settings(max_examples=200, deadline=None)
@given(pool_workloads(), st.sampled_from(["fcfs", "easy", "conservative"]))
def test_cores_equal_the_general_loop(monkeypatch_session, workload, queue):
    cluster, jobs = workload
    general = replay_with("off", monkeypatch_session, jobs, cluster, queue)
    assert_same(replay_with("compiled", monkeypatch_session, jobs, cluster, queue), general)


@pytest.fixture(scope="module")
def monkeypatch_session():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_skipped_jobs_are_counted_as_the_general_loop_counts_them(monkeypatch):
    cluster = Cluster.homogeneous(2, cpus=1)
    jobs = [JobSpec("big", 0.0, 10.0, runtime_s=5.0, cpus=3),               # more than the 2 nodes
            JobSpec("forever", 1.0, float("inf"), runtime_s=None, cpus=1),   # no finite runtime
            JobSpec("ok", 2.0, 10.0, runtime_s=5.0, cpus=2)]
    general = replay_with("off", monkeypatch, jobs, cluster, "easy")
    assert sum(general.skipped.values()) == 2
    assert_same(replay_with("compiled", monkeypatch, jobs, cluster, "easy"), general)


def test_nodes_drawing_different_power_keep_the_general_loop(monkeypatch):
    """Single-CPU nodes alike in capacity but not in power (two node groups of a cluster file): the
    core prices every node as node 0, so the general loop runs them.  2 nodes idle 50 W busy 100 W,
    2 nodes idle 80 W busy 300 W; one 4-processor job of 10 s: 50 + 50 + 80 + 80 = 260 W idle,
    100 + 100 + 300 + 300 = 800 W busy, so 8,000 J charged to the job (the core gave 4,000)."""
    cluster = Cluster.from_toml_text("[[node_group]]\ncount = 2\ncpus = 1\nidle_w = 50\nbusy_w = 100\n"
                                     "[[node_group]]\ncount = 2\ncpus = 1\nidle_w = 80\nbusy_w = 300\n")
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=4), JobSpec("b", 1.0, 10.0, runtime_s=5.0, cpus=1)]
    for queue in ("fcfs", "easy", "conservative"):
        general = replay_with("off", monkeypatch, jobs, cluster, queue)
        assert general.records[0].energy_j == 8000.0
        assert_same(replay_with("compiled", monkeypatch, jobs, cluster, queue), general)


@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative"])
def test_a_job_ending_at_infinity_still_ends(monkeypatch, queue):
    """Two 1-processor jobs of 1e308 s (an SWF log may say so) on one node: the second starts at
    1e308 and ends at 1e308 + 1e308 = inf, an event like any other (the core took it for no event
    left and failed with "jobs still waiting")."""
    cluster = Cluster.homogeneous(1, cpus=1)
    jobs = [JobSpec("a", 0.0, 1e308, runtime_s=1e308, cpus=1), JobSpec("b", 0.0, 1e308, runtime_s=1e308, cpus=1)]
    general = replay_with("off", monkeypatch, jobs, cluster, queue)
    assert [(r.start_s, r.end_s) for r in general.records] == [(0.0, 1e308), (1e308, float("inf"))]
    run = replay_with("compiled", monkeypatch, jobs, cluster, queue)
    assert [(r.start_s, r.end_s, r.energy_j, r.node_indices) for r in run.records] == \
        [(r.start_s, r.end_s, r.energy_j, r.node_indices) for r in general.records]
    assert run.power_times_s.tolist() == general.power_times_s.tolist() == [0.0, 1e308]
    assert run.energy.total_j == general.energy.total_j == float("inf")


def test_other_parts_keep_the_general_loop(monkeypatch):
    """Nodes of two CPUs, a job without a CPU, the deadline queue, FCFS skipping blocked jobs: not
    the core's to run (here: the core is not asked)."""
    class CoreAsked(Exception):
        """raised by a stand-in for the core, so that a run that asks it stops there"""

    def asked(*args, **kwargs):
        raise CoreAsked

    monkeypatch.setattr(pool_core, "run_pool", asked)
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=5.0, cpus=1)]
    Replay(jobs, Cluster.homogeneous(2, cpus=1), "deadline").run()
    Replay(jobs, Cluster.homogeneous(2, cpus=2), "easy").run()                       # two CPUs a node
    Replay(jobs, Cluster.homogeneous(2, cpus=2), "conservative").run()
    Replay([JobSpec("z", 0.0, 10.0, runtime_s=5.0, cpus=0)], Cluster.homogeneous(2, cpus=1), "easy").run()
    Replay(jobs, Cluster.homogeneous(2, cpus=1), "fcfs", strategy_options={"skip_blocked": True}).run()
    with pytest.raises(CoreAsked):
        Replay(jobs, Cluster.homogeneous(2, cpus=1), "easy").run()


# -- whole real logs through the command line ---------------------------------------------------------
@pytest.mark.parametrize("queue, limit", [("easy", None), ("fcfs", None), ("conservative", 6000)])
def test_whole_kth_log_same_bytes_with_the_core_and_the_general_loop(shared_data, tmp_path, queue, limit):
    """The whole log under EASY and FCFS; the first 6,000 jobs under conservative (the general loop
    takes about a minute for the whole log there)."""
    trace = shared_data / "swf/KTH-SP2-1996-2.1-cln.swf"
    outputs = {}
    for core in ("off", "compiled"):
        out = tmp_path / core
        subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), "--queue", queue,
                        *(["--limit", str(limit)] if limit else []),
                        "--out", str(out), "--no-progress"], check=True, capture_output=True,
                       env={**__import__("os").environ, pool_core.ENV: core})
        outputs[core] = out
    for name in ("jobs.csv", "power.csv", "summary.json", "jobs.parquet"):
        assert filecmp.cmp(outputs["off"] / name, outputs["compiled"] / name, shallow=False), name


# -- long plans: hundreds of steps, the compiled search skipping blocks of them --------------------
@st.composite
def overloaded_pools(draw):
    """A hundred jobs or two on a few processors, most arriving before the first ends: a waiting queue
    of a hundred and more and a conservative plan of as many steps, compressed at every early end."""
    nodes = draw(st.integers(2, 8))
    count = draw(st.integers(100, 200))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    submit = np.sort(rng.integers(0, 50, count)).astype(float)
    requested = rng.integers(1, 200, count).astype(float)
    # a third end at once (0 s), a third early, a third at their limit
    kind = rng.integers(0, 3, count)
    run_for = np.where(kind == 0, 0.0, np.where(kind == 1, np.floor(requested * rng.random(count)), requested))
    procs = rng.integers(1, nodes + 1, count)
    return nodes, submit, requested, run_for, procs


@settings(max_examples=8, deadline=None)           # the general loop takes about a second CPU for each
@given(overloaded_pools())
def test_conservative_on_long_plans_equals_the_general_loop(monkeypatch_session, workload):
    assert_conservative_cores_equal(monkeypatch_session, workload)


def assert_conservative_cores_equal(monkeypatch_session, workload):
    nodes, submit, requested, run_for, procs = workload
    cluster = Cluster.homogeneous(int(nodes), cpus=1, idle_w=100.0, busy_w=250.0)
    jobs = [JobSpec(str(i), submit_s=s, requested_time_s=r, runtime_s=t, cpus=int(p))
            for i, (s, r, t, p) in enumerate(zip(submit.tolist(), requested.tolist(), run_for.tolist(), procs.tolist()))]
    general = replay_with("off", monkeypatch_session, jobs, cluster, "conservative")
    assert_same(replay_with("compiled", monkeypatch_session, jobs, cluster, "conservative"), general)


@st.composite
def overloaded_mixed_pools(draw):
    """Hundreds of jobs of 1 second to 3 hours on up to 16 processors, all arriving within 20 s, most
    ending early: many compressions, each moving jobs one after another into slots others gave back,
    the plan's staircase updated for each slot given back rather than built again."""
    nodes = draw(st.integers(2, 16))
    count = draw(st.integers(150, 300))
    return mixed_overloaded_pool(nodes, count, np.random.default_rng(draw(st.integers(0, 2**32 - 1))))


def mixed_overloaded_pool(nodes, count, rng):
    """``count`` jobs on ``nodes`` processors as :func:`overloaded_mixed_pools` draws them, from ``rng``."""
    submit = np.sort(rng.integers(0, 20, count)).astype(float)
    requested = np.round(10 ** rng.uniform(0, 4, count))
    run_for = np.where(rng.random(count) < 0.7, np.floor(requested * rng.random(count)), requested)
    procs = np.minimum(rng.geometric(0.3, count), nodes)
    return nodes, submit, requested, run_for, procs


@settings(max_examples=6, deadline=None)           # the general loop takes a second or two CPU for each
@given(overloaded_mixed_pools())
def test_conservative_on_mixed_overloaded_pools_equals_the_general_loop(monkeypatch_session, workload):
    assert_conservative_cores_equal(monkeypatch_session, workload)


RESERVATION = np.dtype([("start", np.float64), ("job", np.int64)])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.5, 7.0, 1e9, 1e9 + 0.1, float("inf")]),
                          st.integers(0, 40)), max_size=120, unique_by=lambda r: r[1]), st.booleans())
def test_the_cores_put_moved_reservations_in_start_then_job_order(reservations, in_runs):
    """The jobs a compression moved are put in order by merging the runs already in order: any list of
    (start, job), jobs distinct, starts repeated, in runs or not, comes out as sorted() puts it."""
    if in_runs:           # a few ascending runs, as the moved jobs mostly come
        reservations = sorted(reservations[: len(reservations) // 2]) + sorted(reservations[len(reservations) // 2:])
    library = pool_core.compiled_library()
    a = np.array(reservations, dtype=RESERVATION)
    scratch = np.empty(len(a) + 1, dtype=RESERVATION)
    library.pool_reservations_sort(a.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(len(a)),
                                   scratch.ctypes.data_as(ctypes.c_void_p))
    assert a.tolist() == sorted(reservations)



def plan_steps_merged(free_now, now, ops, until):
    """The conservative plan as the general loop's definition has it: a step function of free
    processors from `now`, every change adding over [start, end), advanced to a later instant by
    dropping what lies before it; then its steps with no two neighbours freeing the same."""
    times, free = [now], [free_now]

    def breakpoint(t):
        if t == float("inf"):
            return len(times)
        at = next((k for k, s in enumerate(times) if s >= t), len(times))
        if at == len(times) or times[at] != t:
            times.insert(at, t)
            free.insert(at, free[at - 1])
        return at

    def advance(t):
        last = max(k for k, s in enumerate(times) if s <= t) if times[0] <= t else 0
        del times[:last], free[:last]
        times[0] = max(times[0], t)

    for kind, a, b, c in ops:
        if kind == 0:
            advance(a)
        else:
            i = breakpoint(a)
            j = breakpoint(b)
            for k in range(i, j):
                free[k] += c
    advance(until)
    steps = [(times[0], free[0])]
    for t, f in zip(times[1:], free[1:]):
        if f != steps[-1][1]:
            steps.append((t, f))
    return steps


@st.composite
def plan_ops(draw):
    """Changes and advances in time order, as a replay makes them: a change starts at or after the
    instant the plan was last advanced to and may run to infinity; amounts are whole processors."""
    now, ops = 0.0, []
    for _ in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 4)) == 0:
            now += draw(st.sampled_from([0.0, 1.0, 2.0, 5.0]))
            ops.append((0, now, 0.0, 0.0))
        else:
            start = now + draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 8.0]))
            end = start + draw(st.sampled_from([1.0, 2.0, 3.0, 4.0, float("inf")]))
            ops.append((1, start, end, float(draw(st.integers(-3, 3)))))
    return ops, now + draw(st.sampled_from([0.0, 1.0, 4.0]))


@settings(max_examples=400, deadline=None)
@given(plan_ops())
def test_the_conservative_plan_keeps_its_steps_merged(case):
    """The plan merges neighbouring steps that free the same when it advances, starting from the
    first step a change or an inserted breakpoint touched since the last merge, not from the plan's
    start: the steps must still be those of a full merge (no two neighbours freeing the same, the
    same step function).  A change that made two neighbours equal left unmerged fails here.
    E.g. 8 free at 0, -2 over [1, 3), +2 over [1, 3): back to one step (0, 8)."""
    ops, until = case
    library = pool_core.compiled_library()
    library.pool_plan_steps.restype = ctypes.c_int64
    count = len(ops)
    kind = np.array([o[0] for o in ops], dtype=np.int32)
    a, b, c = (np.array([o[k] for o in ops], dtype=np.float64) for k in (1, 2, 3))
    room = 2 * count + 2
    out_times, out_free = np.zeros(room), np.zeros(room)
    ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)   # noqa: E731
    n = library.pool_plan_steps(ctypes.c_int64(count), ptr(kind), ptr(a), ptr(b), ptr(c), ctypes.c_double(8.0),
                                ctypes.c_double(0.0), ctypes.c_double(until), ptr(out_times), ptr(out_free),
                                ctypes.c_int64(room))
    assert n > 0
    assert list(zip(out_times[:n].tolist(), out_free[:n].tolist())) == plan_steps_merged(8.0, 0.0, ops, until)


def test_the_conservative_plan_merges_a_change_undone():
    # 8 free at 0; -2 over [1, 3) gives steps (0, 8), (1, 6), (3, 8); +2 over [1, 3) makes them 8, 8, 8,
    # merged at the next advance into the single step (0, 8).
    library = pool_core.compiled_library()
    library.pool_plan_steps.restype = ctypes.c_int64
    kind = np.array([1, 1], dtype=np.int32)
    a, b, c = np.array([1.0, 1.0]), np.array([3.0, 3.0]), np.array([-2.0, 2.0])
    out_times, out_free = np.zeros(8), np.zeros(8)
    ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)   # noqa: E731
    n = library.pool_plan_steps(ctypes.c_int64(2), ptr(kind), ptr(a), ptr(b), ptr(c), ctypes.c_double(8.0),
                                ctypes.c_double(0.0), ctypes.c_double(0.0), ptr(out_times), ptr(out_free),
                                ctypes.c_int64(8))
    assert (n, out_times[0], out_free[0]) == (1, 0.0, 8.0)


def count_stairs_read(times, free, processors, now, duration, before):
    """A count's stairs as their definition reads them from a plan's start: the runs of steps freeing
    at least `processors` in order, each from its first step (or now) to the next step freeing fewer
    (infinity: none), lasting to - from widened by 1e-9 of |to| + |from|; a run is a stair when it
    lasts longer than every one before; the reading stops after a run lasting `duration` or ending at
    or after `before`, and says where it stopped (infinity: the plan's end)."""
    stairs, k, n = [], 0, len(times)
    while k < n:
        if free[k] < processors:
            k += 1
            continue
        first = k
        while k < n and free[k] >= processors:
            k += 1
        start = max(times[first], now)
        to = times[k] if k < n else float("inf")
        lasts = to - start + 1e-9 * (abs(to) + abs(start))
        if not stairs or stairs[-1][1] < lasts:
            stairs.append((start, lasts))
        if lasts >= duration or not to < before:
            return stairs, to
    return stairs, float("inf")


@st.composite
def plans_and_questions(draw):
    """Plans of up to 300 steps (runs crossing the 64-step words they are read in), 0 to 4 free, times
    from 0 in steps of 1 to 5 s; a count, a duration and a limit (either may be infinite)."""
    n = draw(st.integers(1, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    times = np.cumsum(np.concatenate([[0.0], rng.integers(1, 6, n - 1).astype(float)]))
    free = rng.choice(np.arange(5.0), n, p=draw(st.sampled_from([(0.2,) * 5, (0.05, 0.05, 0.1, 0.3, 0.5)])))
    processors = float(draw(st.integers(1, 4)))
    duration = draw(st.sampled_from([float("inf"), 3.0, 10.0, 40.0]))
    before = draw(st.sampled_from([float("inf"), float(times[-1]) / 2, float(times[-1])]))
    return times, free, processors, duration, before


@settings(max_examples=500, deadline=None)
@given(plans_and_questions())
def test_a_counts_stairs_are_read_from_the_bits_where_runs_start_and_stop(case):
    """A compression reads a count's runs 64 steps at a time as bits, each run's first and end step
    taken as the bits where freeing the count starts and stops (a run open at a word's end carried
    into the next): the stairs and where the reading stopped must be those of the runs read one step at
    a time.  A run's end at a word's first step missed, or a run split at a word's edge, fails here.
    E.g. free 3, 3, 0, 3 at 0, 1, 2, 5 for 2 processors: runs [0, 2) lasting 2 and [5, inf): two stairs."""
    times, free, processors, duration, before = case
    library = pool_core.compiled_library()
    library.pool_count_stairs.restype = ctypes.c_int64
    n = len(times)
    out_start, out_lasts, upto = np.zeros(n), np.zeros(n), np.zeros(1)
    ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)   # noqa: E731
    count = library.pool_count_stairs(ctypes.c_int64(n), ptr(times), ptr(free), ctypes.c_double(processors),
                                      ctypes.c_double(0.0), ctypes.c_double(duration), ctypes.c_double(before),
                                      ptr(out_start), ptr(out_lasts), ptr(upto), ctypes.c_int64(n))
    stairs, stopped = count_stairs_read(times.tolist(), free.tolist(), processors, 0.0, duration, before)
    assert list(zip(out_start[:count].tolist(), out_lasts[:count].tolist())) == stairs
    assert upto[0] == stopped

def long_overloaded_pool(seed):
    """1,000 to 2,000 jobs on 20 to 100 processors arriving within 20 s: plans of hundreds of steps,
    whose runs of free processors cross the 64-step words the plan's steps are read in."""
    rng = np.random.default_rng(seed)
    nodes, count = int(rng.integers(20, 101)), int(rng.integers(1000, 2001))
    submit = np.sort(rng.integers(0, 20, count)).astype(float)
    requested = np.round(10 ** rng.uniform(0, 4, count))
    run_for = np.where(rng.random(count) < 0.7, np.floor(requested * rng.random(count)), requested)
    procs = np.minimum(rng.geometric(0.1, count), nodes)
    return nodes, submit, requested, run_for, procs


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_conservative_reads_the_plans_steps_alike_with_avx2_and_sse2(seed):
    """The plan's steps freeing a count are read four at a time with AVX2 where the processor has it,
    two at a time with SSE2 otherwise: the same run, every output, both ways."""
    library = pool_core.compiled_library()
    if library.pool_steps_avx2(-1) == 0 and library.pool_steps_avx2(1) == 0:
        pytest.skip("this processor has no AVX2: only the SSE2 path can run")
    workload = long_overloaded_pool(seed)
    nodes = workload[0]
    try:
        library.pool_steps_avx2(0)
        sse2 = run_pool("conservative", nodes, *workload[1:], POWER, 0.0)
        assert library.pool_steps_avx2(1) == 1
        avx2 = run_pool("conservative", nodes, *workload[1:], POWER, 0.0)
    finally:
        library.pool_steps_avx2(1)
    for field in ("rows", "start_s", "end_s", "energy_j", "node_offsets", "node_flat", "times_s", "power_w",
                  "busy_cpus", "node_jobs_j", "node_cpu_seconds", "jobs_on_node", "idle_since_s", "idle_node_seconds"):
        assert np.array_equal(getattr(avx2, field), getattr(sse2, field)), field
    assert (avx2.total_j, avx2.jobs_j, avx2.last_s) == (sse2.total_j, sse2.jobs_j, sse2.last_s)
    assert np.max(avx2.by_job(avx2.start_s) - workload[1]) > 3600      # jobs did wait: compressions moved them


def test_conservative_cuts_a_counts_stairs_where_the_last_run_read_may_grow(monkeypatch_session):
    """254 jobs on 2 processors: moves change the plan from where the compression had read a processor
    count's runs to, so the last run it read may now last longer; the stairs are cut from the run
    holding or ending at the first change (a build that kept them whole when the change began at or
    after that point gave other starts here)."""
    rng = np.random.default_rng(23)
    nodes, count = int(rng.integers(2, 17)), int(rng.integers(150, 301))
    assert (nodes, count) == (2, 254)
    assert_conservative_cores_equal(monkeypatch_session, mixed_overloaded_pool(nodes, count, rng))


def late_in_time(workload):
    """The same jobs at a billion seconds, every time a tenth as long (tenths of a second to about
    17 minutes): runs of free processors whose lengths differ from a duration by less than a rounding
    step at that time, and slots given back that merge with free runs on both sides (the
    compression's bounds on how long a run of free processors lasts must round as the exact search)."""
    nodes, submit, requested, run_for, procs = workload
    return nodes, 1e9 + submit * 0.1, requested * 0.1, run_for * 0.1, procs


@settings(max_examples=6, deadline=None)           # the general loop takes a second or two CPU for each
@given(overloaded_mixed_pools().map(late_in_time))
def test_conservative_late_in_time_with_fractional_durations_equals_the_general_loop(monkeypatch_session, workload):
    assert_conservative_cores_equal(monkeypatch_session, workload)


def test_an_overloaded_log_under_conservative_is_the_general_loops(monkeypatch, shared_data):
    """KTH-SP2's first 400 jobs arriving 100 times as fast (a waiting queue of hundreds): the core
    gives the general loop's result bit for bit."""
    from greenslurm.traces import read_trace
    jobs = list(read_trace(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf").jobs)[:400]
    from dataclasses import replace
    jobs = [replace(job, submit_s=job.submit_s * 0.01) for job in jobs]
    cluster = Cluster.homogeneous(100, cpus=1)
    general = replay_with("off", monkeypatch, jobs, cluster, "conservative")
    assert max(r.start_s - r.submit_s for r in general.records) > 3600      # jobs did wait
    assert_same(replay_with("compiled", monkeypatch, jobs, cluster, "conservative"), general)
