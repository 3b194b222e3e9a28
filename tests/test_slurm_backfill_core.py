"""The slurm queue's compiled backfill cycle (sim/engine/_backfill_cycle.c) against its reference, the
cycle in Python (``SlurmQueue._backfill_cycle`` with ``compiled_cycle`` False): the same starts on the same
nodes, the same rejections, the same early stops, on random small workloads (hypothesis) and on the whole
first thousands of jobs of two real logs (jobs.csv byte for byte)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st, target

from greenslurm.cli import main
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_backfill_core import CompiledBackfill, compiled_backfill_library
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.engine.slurm_power import slurm_power_machine_factory
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, PriorityWeights
from greenslurm.sim.engine.slurm_queue import SlurmQueue

PRIORITY = PriorityWeights(type=MULTIFACTOR, job_size=1000, partition=1000,
                           partition_job_factor={"a": 1, "b": 1, "all": 1})

# submit, limit, run time, CPUs, partition, user, nodes named (mostly none: jobs Slurm spreads, the
# compiled cycle's case; a job naming nodes leaves its queue's cycles to the reference); a limit of 0 is
# the SWF reader's for a job of unknown limit that ran 0 s (2,881 of LLNL-Atlas's, 173 of NASA-iPSC's)
JOB = st.tuples(st.integers(0, 600), st.integers(0, 300), st.integers(1, 300), st.integers(1, 12),
                st.sampled_from(["a", "b", "all"]), st.integers(0, 2), st.sampled_from([0] * 9 + [1, 2]))


def cluster(uneven: bool) -> Cluster:
    """n0 n1 in partition a, n2 n3 in b, all four in "all"; 4 CPUs each, or 4, 6, 3 and 5."""
    cpus = (4, 6, 3, 5) if uneven else (4, 4, 4, 4)
    return Cluster([NodeSpec(f"n{i}", cpus=c, partitions=("a" if i < 2 else "b", "all")) for i, c in enumerate(cpus)],
                   default_partition="a")


def jobs_of(rows, machine: Cluster) -> list[JobSpec]:
    jobs = []
    for i, (submit, limit, runtime, cpus, partition, user, nodes) in enumerate(rows):
        room = machine.total_cpus if partition == "all" else 10
        jobs.append(JobSpec(f"j{i}", float(submit), float(limit), runtime_s=float(min(runtime, limit)),
                            cpus=min(max(cpus, nodes), room), nodes=nodes, partition=partition, user=f"u{user}"))
    return jobs


def replay_both_ways(rows, uneven=False, full=False, **options) -> tuple[int, int, int, int]:
    """Replay ``rows`` with the compiled cycle and with the reference's: the same starts, nodes, the
    scheduler that started each job, rejections, early stops and will-run answers "never" from the
    usable nodes' CPUs alone.  How many cycles ran compiled, how many of them found the core's
    state brought up to date by the starts and ends alone (its catch-up path), how many of their
    starts the core placed itself (jobs fitting on the CPUs free now) and how many it left to the
    reference's placement (a start at a running job's expected end that is now)."""
    machine = cluster(uneven)
    outcomes, compiled, catch_ups, placed, past = [], 0, 0, 0, 0
    for on in (False, True):
        replay = Replay(jobs_of(rows, machine), machine, "slurm", strategy_options={
            "scheduling": SlurmScheduling(priority=PRIORITY, **{"bf_interval_s": 30.0, "bf_resolution_s": 60.0,
                                                                **options})})
        queue = replay.strategy
        queue.compiled_cycle, queue.full_cycles = on, full
        result = replay.run()
        outcomes.append(([(r.job_id, r.start_s, tuple(r.node_indices)) for r in result.records],
                         sorted(r.job_id for r in result.rejected), dict(queue.started_by), queue.cycles_stopped_early,
                         # the count of "never" answers computed (not kept from before) is compared on cycles
                         # stopped early, as Slurm's are; with every cycle run to its end (`full_cycles`, the
                         # check of the early stop) the compiled cycle computes again answers the reference
                         # keeps: the same decisions, another count
                         None if full else queue.nevers_without_view))
        if on and queue._compiled_backfill is not None:
            compiled, catch_ups = queue._compiled_backfill.cycles, queue._compiled_backfill.catch_ups
            placed, past = queue._compiled_backfill.placed_by_core, queue._compiled_backfill.placed_by_reference
    assert outcomes[1] == outcomes[0]
    return compiled, catch_ups, placed, past


def long_queue(count=150, seed=7, widest=12) -> list[tuple]:
    """``count`` seeded rows over 3,000 s: a queue that stays long on 4 nodes, every job spread."""
    rng = random.Random(seed)
    return [(rng.randint(0, 3000), rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, widest),
             rng.choice(["a", "b", "all"]), rng.randint(0, 2), 0) for _ in range(count)]


def test_the_library_is_built():
    # (the package's tests run where it was installed with a C compiler)
    assert compiled_backfill_library() is not None


@settings(max_examples=120, deadline=None)
@given(st.lists(JOB, min_size=1, max_size=40), st.booleans(), st.booleans(), st.sampled_from([1.0, 30.0]),
       st.sampled_from([1.0, 60.0]), st.sampled_from([0.0, 5.0]), st.sampled_from([0, 1, 2]), st.sampled_from([0, 1]),
       st.sampled_from([0, 1, 3]), st.sampled_from([500, 3]), st.sampled_from([600.0, 86400.0]),
       st.sampled_from([0.0, 1795874198.357]))
def test_the_compiled_cycle_decides_as_its_reference(rows, uneven, full, interval, resolution, release, per_user,
                                                      per_part, max_start, max_test, window, clock):
    # Random workloads on overlapping partitions (nodes of one size and of four), completing jobs,
    # both resolutions, bf_max_job_user / _part / _start / _test, a short and a long bf_window,
    # cycles stopped early and full ones, slurmctld's clock at 0 or a Unix time at trace second 0:
    # the compiled cycle starts what the reference starts, where, and stops where it stops
    compiled, *_ = replay_both_ways(rows, uneven, full, bf_interval_s=interval, bf_resolution_s=resolution,
                                release_delay_s=release, bf_max_job_user=per_user, bf_max_job_part=per_part,
                                bf_max_job_start=max_start, bf_max_job_test=max_test, bf_window_s=window,
                                clock_at_zero_s=clock)
    target(float(compiled))           # (towards workloads whose cycles run compiled)


@pytest.mark.parametrize("seed", [7, 8, 9])
@pytest.mark.parametrize("uneven", [False, True])
def test_a_long_queue_runs_its_cycles_compiled_with_the_same_starts(seed, uneven):
    # 150 jobs Slurm spreads on 4 nodes: the cycles run compiled (dozens of them), starts unchanged; in
    # most the core's state was caught up by the starts and ends since its last cycle (not made afresh);
    # the jobs they start fit on the CPUs free now, placed by the core's node choice (8 to 42 of them on
    # these seeds), on the same nodes as the reference's
    compiled, catch_ups, placed, _ = replay_both_ways(long_queue(seed=seed), uneven)
    assert compiled > 20 and catch_ups > compiled // 3 and placed > 5


def test_a_start_at_an_expected_end_that_is_now_is_left_to_the_reference_as_its_cycle_does():
    # A job of time limit 0 started this second is still running (its end event comes after the pass)
    # and its expected end, start + 0 s, is now: a job waiting for its CPUs gets a will-run answer
    # "now" that is not the CPUs free now.  Nodes n0 n1 (partition a), n2 n3 (b), 4 CPUs each:
    #   R, R2 (4 CPUs, 1000 s) start at 0 on one node of a and one of b;
    #   T, U (8 CPUs: all of a, all of b) wait for them: reservations from 1000 s;
    #   at the cycle of 30 s, A (4 CPUs, limit 0) starts on a's free node (it ends by 1000 s);
    #   B (4 CPUs, a) fits once A's group is freed, at A's expected end 30 + 0 = 30 s, now: not on
    #   the CPUs free now (A holds them), so not started and nothing reserved, as in the reference;
    #   D (4 CPUs, b) starts on b's free node (so the cycle did not stop early at B);
    #   B starts at the next cycle, 60 s, on A's node.
    rows = [(0, 1000, 1000, 4, "a", 0, 0), (0, 1000, 1000, 4, "b", 1, 0), (5, 100, 100, 8, "a", 0, 0),
            (5, 100, 100, 8, "b", 1, 0), (10, 0, 0, 4, "a", 2, 0), (10, 100, 50, 4, "a", 2, 0),
            (10, 100, 50, 4, "b", 2, 0)]
    compiled, _, placed, past = replay_both_ways(rows)
    # A and D placed by the core at 30 s, B at 60 s; B's try at 30 s left to the reference's placement
    assert (placed, past) == (3, 1) and compiled >= 2
    replay = Replay(jobs_of(rows, cluster(False)), cluster(False), "slurm", strategy_options={
        "scheduling": SlurmScheduling(priority=PRIORITY, bf_interval_s=30.0, bf_resolution_s=60.0)})
    starts = {r.job_id: (r.start_s, tuple(r.node_indices)) for r in replay.run().records}
    a_node = starts["j4"][1]
    assert starts["j4"][0] == 30.0 and starts["j6"][0] == 30.0 and starts["j5"] == (60.0, a_node)


def test_a_job_naming_its_nodes_leaves_the_cycle_to_the_reference():
    # the same queue with one job asking 2 nodes by count (not spread, so not compiled): while it
    # waits, cycles run in Python; the starts are the same either way
    rows = long_queue()
    spread_only = replay_both_ways(rows)[0]
    rows[3] = (*rows[3][:6], 2)
    assert replay_both_ways(rows)[0] < spread_only


def test_a_fractional_cpu_count_leaves_the_cycle_to_the_reference():
    # a job asking 1.5 CPUs: its will-run test is not compiled, no cycle is (the others' counts whole)
    machine = cluster(False)
    jobs = [JobSpec("a", 0.0, 100.0, runtime_s=100.0, cpus=16), JobSpec("half", 1.0, 10.0, runtime_s=10.0, cpus=1.5)]
    replay = Replay(jobs, machine, "slurm", strategy_options={"scheduling": SlurmScheduling(bf_interval_s=30.0)})
    replay.run()
    backfill = replay.strategy._compiled_backfill
    assert backfill is None or backfill.cycles == 0


SWF = Path("swf")


def jobs_csv(shared_data: Path, tmp_path: Path, log: str, limit: int, compiled: bool, monkeypatch) -> bytes:
    """jobs.csv of ``greenslurm replay LOG --limit LIMIT --queue slurm`` with the compiled cycle or without
    (``CompiledBackfill.takes`` answering False: every cycle the reference's)."""
    out = tmp_path / f"{log}-{compiled}"
    runs = []
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(CompiledBackfill, "takes", lambda self: False)
        original = CompiledBackfill.run

        def counted(self, now_s, by):
            ran = original(self, now_s, by)
            runs.append(ran)
            return ran
        patch.setattr(CompiledBackfill, "run", counted)
        assert main(["replay", str(shared_data / SWF / log), "--limit", str(limit), "--queue", "slurm", "--no-progress",
                     "--out", str(out)]) == 0
    assert any(runs) == compiled
    return (out / "jobs.csv").read_bytes()


@pytest.mark.parametrize("log, limit", [("KTH-SP2-1996-2.1-cln.swf", 4000), ("lublin_256_est.swf", 2000)])
def test_real_logs_replay_to_the_same_jobs_csv_with_the_compiled_cycle(shared_data, tmp_path, monkeypatch, log, limit):
    # the first thousands of jobs of two real logs (every job spread: every cycle compiled but those
    # with nothing to test): the same jobs.csv, byte for byte
    assert jobs_csv(shared_data, tmp_path, log, limit, True, monkeypatch) == \
        jobs_csv(shared_data, tmp_path, log, limit, False, monkeypatch)



# -- Slurm's power saving: the will-run test compiled (a job that fits now placed by the node tiers in
# Python) against the reference (``compiled_will_run`` False: every test in Python) ---------------------
def replay_power_both_ways(rows, uneven, suspend_time_s, boot_s, start_powered_down) -> list:
    """Replay ``rows`` with Slurm's power saving, the will-run test compiled and in the reference: the same
    starts, nodes, scheduler per job, suspends and resumes (time, node).  The outcome of the compiled run."""
    machine = cluster(uneven)
    saving = SlurmPowerSaving(suspend_time_s=suspend_time_s, boot_s=boot_s, start_powered_down=start_powered_down)
    outcomes = []
    for compiled in (False, True):
        replay = Replay(jobs_of(rows, machine), machine, "slurm", machine_factory=slurm_power_machine_factory(saving),
                        strategy_options={"scheduling": SlurmScheduling(priority=PRIORITY, bf_interval_s=30.0,
                                                                        bf_resolution_s=60.0)})
        replay.strategy.compiled_will_run = compiled
        result = replay.run()
        outcomes.append(([(r.job_id, r.start_s, r.end_s, tuple(r.node_indices)) for r in result.records],
                         sorted(r.job_id for r in result.rejected), dict(replay.strategy.started_by),
                         list(replay.machine.events)))
    assert outcomes[1] == outcomes[0]
    return outcomes[1]


@settings(max_examples=60, deadline=None)
@given(st.lists(JOB, min_size=1, max_size=30), st.booleans(), st.sampled_from([20.0, 60.0, 300.0]),
       st.sampled_from([5.0, 20.0, 45.0]), st.booleans())
def test_with_power_saving_the_compiled_will_run_test_decides_as_its_reference(rows, uneven, suspend_time, boot,
                                                                              start_down):
    # random workloads on 4 nodes (of one size or four) whose idle nodes power down after SuspendTime
    # (some powered down from the start) and boot in 5 to 45 s: the same starts, nodes, schedulers,
    # rejections, suspends and resumes with the will-run test compiled as in the reference
    outcome = replay_power_both_ways(rows, uneven, suspend_time, boot, start_down)
    target(float(len(outcome[3])), label="power events")


def test_with_power_saving_a_long_queue_powers_nodes_as_its_reference():
    # a queue that stays long on 4 nodes powered down from the start, SuspendTime 60 s: nodes are
    # resumed and suspended again (the case is not empty), the same on both paths
    events = replay_power_both_ways(long_queue(), False, 60.0, 20.0, True)[3]
    assert {kind for _, kind, _ in events} == {"suspend", "resume"}


def power_outputs(shared_data: Path, tmp_path: Path, compiled: bool, monkeypatch) -> tuple[bytes, bytes]:
    """jobs.csv and power.csv of xdmod-pozidriv's first 2,500 jobs with its slurm.conf and power saving
    (``--power-down-after 600``), the will-run test compiled or every test the reference's."""
    out = tmp_path / f"pozidriv-{compiled}"
    with monkeypatch.context() as patch:
        original = SlurmQueue.__init__

        def init(self, *args, **options):
            original(self, *args, **options)
            self.compiled_will_run = compiled
        patch.setattr(SlurmQueue, "__init__", init)
        conf = Path(__file__).resolve().parents[1] / "bench" / "data" / "xdmod-pozidriv-slurm.conf"
        assert main(["replay", str(shared_data / "sacct" / "xdmod-pozidriv.log"), "--slurm-conf", str(conf),
                     "--power-down-after", "600", "--limit", "2500", "--queue", "slurm", "--no-progress",
                     "--out", str(out)]) == 0
    return (out / "jobs.csv").read_bytes(), (out / "power.csv").read_bytes()


def test_xdmod_pozidriv_with_power_saving_replays_to_the_same_bytes_with_the_compiled_will_run_test(
        shared_data, tmp_path, monkeypatch):
    # a real sacct export with its slurm.conf and power saving: jobs.csv and power.csv byte for byte
    compiled = power_outputs(shared_data, tmp_path, True, monkeypatch)
    assert b"\n" in compiled[0] and compiled == power_outputs(shared_data, tmp_path, False, monkeypatch)
