"""slurmctld's background loop (``_slurmctld_background``: ten 100 ms sleeps, then its work, every
pass a little over a second) in the ``slurm`` queue: its main scheduler's passes on the loop's own
clock, apart from backfill's looks, and the loop read from slurmctld's log.  Exact small cases with
the arithmetic in comments; a property test of the loop's passes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.engine.slurmctld_loop import BackgroundLoop, drift_between_checks, next_periodic_check, wake_after


def starts(scheduler: str, **loop) -> dict[str, float]:
    # three jobs of a whole 4-CPU node on two nodes: a and b start on a request each, c waits for a's end
    jobs = [JobSpec("a", 2.0, 60.0, runtime_s=10.0, cpus=4), JobSpec("b", 2.5, 60.0, runtime_s=10.0, cpus=4),
            JobSpec("c", 3.0, 60.0, runtime_s=5.0, cpus=4)]
    settings = SlurmScheduling(scheduler=scheduler, bf_interval_s=1.0, **loop)
    result = Replay(jobs, Cluster.homogeneous(2, cpus=4), "slurm", strategy_options={"scheduling": settings}).run()
    return {r.job_id: round(r.start_s, 6) for r in result.records}


def test_the_main_scheduler_passes_on_the_background_loop_s_own_clock():
    # the loop started at 0.4 s, passes of 1.01 s: 0.4, 1.41, 2.42, 3.43, 4.44, 5.45, ...
    # a (submitted 2.0): the first pass at or after it, 2.42.  b (2.5): batch_sched_delay (3 s)
    # after that pass, 5.42: the pass at 5.45.  c: a's end (2.42 + 10 = 12.42) queues a request:
    # the pass at 0.4 + 12 x 1.01 = 12.52
    assert starts("builtin", background_start_s=0.4, background_drift=0.01) == {"a": 2.42, "b": 5.45, "c": 12.52}
    # without the loop's start the thread wakes on the first submission's second: 2.0, 5.0, 12.0
    assert starts("builtin") == {"a": 2.0, "b": 5.0, "c": 12.0}


def test_backfill_s_looks_keep_their_own_clock():
    # backfill looks every second from the first submission (2.0): a at 2.0, b at its next look
    # 3.0, c at a's end 12.0, before the loop's passes (2.42, 5.45, 12.52) would have started them
    assert starts("backfill", background_start_s=0.4, background_drift=0.01) == {"a": 2.0, "b": 3.0, "c": 12.0}
    assert starts("backfill") == {"a": 2.0, "b": 3.0, "c": 12.0}


def test_a_periodic_pass_comes_every_sched_interval_in_whole_passes():
    # sched_interval 5 s on a loop from 0.3 s with passes of 1.02 s: periodic passes at 0.3 + 5 x 1.02
    # = 5.4 and 10.5.  A job submitted at 1.0 with a request its own pass serves (batch_sched_delay
    # 0) starts at the pass at or after 1.0: 1.32.  One queued behind it waits for the end at 4.32
    # (a request: the pass at 0.3 + 4 x 1.02 = 4.38)
    jobs = [JobSpec("a", 1.0, 60.0, runtime_s=3.0, cpus=4), JobSpec("b", 1.5, 60.0, runtime_s=3.0, cpus=4)]
    settings = SlurmScheduling(scheduler="builtin", sched_interval_s=5.0, batch_sched_delay_s=0.0,
                               background_start_s=0.3, background_drift=0.02)
    replay = Replay(jobs, Cluster.homogeneous(1, cpus=4), "slurm", strategy_options={"scheduling": settings})
    got = {r.job_id: round(r.start_s, 6) for r in replay.run().records}
    assert got == {"a": 1.32, "b": 4.38}
    assert replay.strategy.clock.periodic_from(1.32, strictly=True) == pytest.approx(5.4)
    assert replay.strategy.clock.periodic_from(5.4, strictly=True) == pytest.approx(10.5)


@given(start=st.floats(-100, 100), drift=st.floats(0, 0.02), when=st.floats(-200, 10_000))
def test_the_pass_at_or_after_a_moment_is_on_the_loop_and_no_pass_falls_between(start, drift, when):
    loop = BackgroundLoop(start, drift=drift)
    at = loop.pass_at_or_after(when)
    k = (at - start) / loop.step_s
    assert abs(k - round(k)) < 1e-6 and round(k) >= 0                 # a pass of the loop
    assert at >= when - 1e-6 or round(k) == 0                         # at or after (or the first pass)
    assert at - loop.step_s < when + 1e-6 or round(k) == 0            # the one before is before


@given(start=st.floats(-50, 50), drift=st.floats(0, 0.01), last=st.integers(-40, 5000))
def test_a_periodic_check_is_the_first_pass_whose_clock_reads_the_due_second(start, drift, last):
    clock, at = next_periodic_check(start, float(last), 30.0, drift=drift)
    step = 1.0 + drift
    assert clock == math.floor(at + 1e-9) >= last + 30
    earlier = at - step
    assert earlier < start + 1e-6 or math.floor(earlier + 1e-9) < last + 30


def test_the_loop_s_pace_from_two_checks_in_slurmctld_s_log():
    # seed 311's checks at 29.964 s and 149.311 s: 119 whole passes, 119.347 / 119 = 1.00292 s each;
    # seed 311b's at 28.439 and 148.123: 119.684 s, still 119 passes (a pass is never shorter than
    # its sleeps), 5.7 ms per second
    assert drift_between_checks(29.964, 149.311) == pytest.approx(0.00292, abs=1e-5)
    assert drift_between_checks(28.439, 148.123) == pytest.approx(0.00575, abs=1e-5)
    with pytest.raises(ValueError, match="at least a tick"):
        drift_between_checks(10.0, 10.4)


@pytest.mark.parametrize("bad", [dict(start_s=math.nan), dict(start_s=0.0, drift=-0.001), dict(start_s=0.0, drift=0.5),
                                 dict(start_s=0.0, tick_s=0.0)])
def test_a_loop_that_cannot_run_is_refused(bad):
    with pytest.raises(ValueError):
        BackgroundLoop(**bad)


@pytest.mark.parametrize("bad", [dict(background_start_s=math.inf), dict(background_drift=0.6),
                                 dict(background_drift=-0.01)])
def test_scheduling_settings_refuse_a_loop_that_cannot_run(bad):
    with pytest.raises(ValueError, match="background_"):
        SlurmScheduling(**bad)


def test_the_log_reader_prints_the_loop_s_drift_a_site_gives_the_replay(tmp_path, capsys):
    from greenslurm.slurmctld_log import main
    # seed 311's two checks (verbose: power-saving resets, three jobs in the first) among lines
    # that look alike but are not checks; 119 passes of 1.00292 s
    log = tmp_path / "slurmctld.log"
    log.write_text("[2026-11-28T11:21:15.964] Resetting JobId=2 start time for node power up\n"
                   "[2026-11-28T11:21:15.964] Resetting JobId=3 start time for node power up\n"
                   "[2026-11-28T11:21:15.965] Resetting JobId=4 start time for node power up\n"
                   "[2026-11-28T11:22:00.000] error: Resetting JobId=9 start time for node power up later\n"
                   "Resetting JobId=7 start time for node power up\n"
                   "[2026-11-28T11:23:15.311] Resetting JobId=10 start time for node power up\n")
    assert main([str(log)]) == 0
    assert capsys.readouterr().out == ("0.00292  (background loop: 2 checks, passes of 1.00292 s; "
                                       "SlurmScheduling.background_drift)\n")
    log.write_text("[2026-11-28T11:21:15.964] debug2: Testing job time limits and checkpoints\n")
    assert main([str(log)]) == 2                      # one check: no pace
    assert "fewer than two checks" in capsys.readouterr().err
    # a rotated log, compressed: the same reading
    import gzip
    packed = tmp_path / "slurmctld.log.1.gz"
    packed.write_bytes(gzip.compress(log.read_bytes()))
    assert main([str(packed)]) == 2
    assert "fewer than two checks" in capsys.readouterr().err
    packed.write_bytes(gzip.compress(log.read_bytes())[:-9])       # cut short
    assert main([str(packed)]) == 2
    assert capsys.readouterr().err == f"{packed}: gzip data is corrupt or truncated\n"


@given(start=st.floats(-20, 20), drift=st.floats(0, 0.01), delay=st.sampled_from([0.0, 3.0]),
       interval=st.sampled_from([1.0, 5.0, 60.0]),
       jobs=st.lists(st.tuples(st.floats(0, 200), st.integers(1, 4), st.floats(1, 50)), min_size=1, max_size=12))
def test_every_main_scheduler_start_is_at_a_pass_of_the_loop_and_after_its_submission(start, drift, delay, interval,
                                                                                     jobs):
    specs = [JobSpec(f"j{i}", round(submit, 3), 60.0, runtime_s=round(runtime, 3), cpus=cpus)
             for i, (submit, cpus, runtime) in enumerate(jobs)]
    settings = SlurmScheduling(scheduler="builtin", sched_interval_s=interval, batch_sched_delay_s=delay,
                               background_start_s=start, background_drift=drift)
    records = Replay(specs, Cluster.homogeneous(2, cpus=4), "slurm", strategy_options={"scheduling": settings}).run().records
    step = 1.0 + drift
    assert len(records) == len(specs)
    for record in records:
        k = (record.start_s - start) / step
        assert abs(k - round(k)) < 1e-6 and round(k) >= 0, (record.job_id, record.start_s)
        assert record.start_s >= record.submit_s - 1e-9


@pytest.mark.parametrize("seed", ["311", "311b", "331", "331b", "332", "333"])
def test_the_loop_read_from_slurmctld_s_own_log_is_the_one_the_bench_replays(seed, tmp_path, capsys):
    # the log the recorder kept beside each recording (bench/data/slurm-power/seedN.slurmctld.log.gz):
    # the command a site runs on its log prints the drift the bench reads from the recording's
    # millisecond job times (seed 311: 2.9 ms per second; 331: 4.0; 332: 4.6; 333: 2.4)
    import gzip
    import sys
    from pathlib import Path

    from greenslurm.slurmctld_log import main
    from greenslurm.traces.slurmctld_log import loop_checks_s
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "bench"))
    import bench_slurm_power as power_bench
    data = root / "bench" / "data" / "slurm-power"
    with gzip.open(data / f"seed{seed}.slurmctld.log.gz", "rt") as handle:
        text = handle.read()
    recording = power_bench.load(data / f"seed{seed}.json.gz")
    loop = power_bench.background_loop(recording)
    assert len(loop_checks_s(text)) == len(power_bench.logged_checks(recording)) >= 2
    log = tmp_path / "slurmctld.log"
    log.write_text(text)
    assert main([str(log)]) == 0
    printed = capsys.readouterr().out.split()[0]
    assert float(printed) == pytest.approx(loop.drift, abs=2e-5), (printed, loop.drift)


# -- a thread in step with the wake-ups its log shows --------------------------------------------
@given(start=st.floats(-100, 100), gaps=st.lists(st.integers(1, 170), min_size=1, max_size=8),
       late=st.lists(st.floats(0, 0.02), min_size=8, max_size=8), step_drift=st.floats(0, 0.006),
       when=st.floats(-300, 1500))
def test_the_next_wake_up_is_after_the_moment_on_the_logged_wake_ups_and_none_falls_between(
        start, gaps, late, step_drift, when):
    # logged wake-ups: whole passes apart, each pass late by up to 20 ms (the machine's load)
    logged = [start]
    for gap, extra in zip(gaps, late):
        logged.append(logged[-1] + gap * (1.0 + extra))
    logged = tuple(logged)
    step = 1.0 + step_drift
    at = wake_after(logged, step, when)
    assert at > when
    # every logged wake-up is one: the first wake-up after a moment just before it is that wake-up
    for knot in logged:
        assert wake_after(logged, step, knot - 1e-6) == pytest.approx(knot, abs=1e-9)
    # no wake-up between the moment and the one returned: the wake-up before it is at or before it
    before = at - 0.5
    previous = wake_after(logged, step, before)
    assert previous == pytest.approx(at, abs=1e-9) or previous <= when + 1e-9
    # passes are never shorter than half a second, nor longer than a second and 20 ms
    assert 0.5 < wake_after(logged, step, at) - at <= 1.02 + 1e-9


def test_between_two_logged_wake_ups_the_passes_share_the_span():
    # seed 343's power-save thread logged scans at 233.933, 254.943 and 257.945 s (trace seconds):
    # 21 passes of 1.000476 s, then 3 of 1.000667 s.  Its wake-up of second 253 falls at 253.9425 s,
    # half a millisecond before p21's allocation (253.943 s), as Slurm's log shows (the thread
    # suspended n4 for it a second later); one pace over the whole run (first scan at -10.196 s,
    # 1.000538 s a pass) put it at 253.946 s, after the allocation
    logged = (233.933, 254.943, 257.945)
    assert [round(wake_after(logged, 1.000538, t), 4) for t in (252.95, 254.943, 255.944, 256.5)] == \
        [253.9425, 255.9437, 256.9443, 256.9443]
    assert round(-10.196 + 264 * 1.000538, 3) == 253.946
    assert round(wake_after(logged, 1.000538, 260.0), 3) == 260.947        # after the last: its own pace


def test_backfill_cycles_at_the_look_bf_interval_after_its_last_cycle_in_epoch_seconds():
    # s73's log (bf_interval=5): backfill started jobs at 14:12:43.009 and 14:12:53.009 (ten looks of
    # 1.0 s between them); after the cycle at 43.009 the thread sleeps 5 s and its look at 48.009 finds
    # the ends of 44.0 s: it cycles at 48.009.  A replay keeps the trace's epoch seconds (1.8e9, a
    # double's step 2.4e-7 s), where a moment a nanosecond before 48.009 is 48.009 itself: the look
    # found was then the next one, 49.009, and every later cycle a second late
    from datetime import datetime, timezone

    from greenslurm.sim.engine.slurm_pass_clock import PassClock
    at = datetime(2026, 11, 28, 14, 12, 43, 9000, tzinfo=timezone.utc).timestamp()
    settings = SlurmScheduling(scheduler="backfill", bf_interval_s=5.0, backfill_start_s=at - 27.0,
                               backfill_looks_s=(at, at + 10.0))
    clock = PassClock(settings)
    clock.last_backfill, clock.backfill_change_s = at, at + 1.03         # the cycle at 43.009, an end at 44.04
    assert clock.backfill_due() == pytest.approx(at + 5.0, abs=1e-6)    # 48.009
    clock.backfill_change_s = at + 5.5                                   # nothing changed till 48.5: the look at 49.009
    assert clock.backfill_due() == pytest.approx(at + 6.0, abs=1e-6)
