"""Renewable supply and energy split, drawn deadlines, and the load upper bound of the performance ratio."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, InputError, JobSpec
from greenslurm.clustermodel.renewable import SupplySeries, parse_supply_csv, solar_supply, split_energy, wind_supply
from greenslurm.sim.accounting.deadline_metrics import Work, lp_upper_bound, total_load, upper_bound, work_of
from greenslurm.sim.renewable import load_supply
from greenslurm.sim.engine.replay import Replay
from greenslurm.traces.deadlines import lognormal_slacks, with_deadlines, with_offered_load


# -- energy split -------------------------------------------------------------------------------------
def test_split_by_hand():
    # power 200 W on [0, 10), 50 W on [10, 30); supply 100 W on [0, 5), 300 W on [5, 20), 0 after
    #   [0, 5):   P 200, S 100: renewable 100*5 = 500, grid 100*5 = 500
    #   [5, 10):  P 200, S 300: renewable 200*5 = 1000, curtailed 100*5 = 500
    #   [10, 20): P 50,  S 300: renewable 50*10 = 500, curtailed 250*10 = 2500
    #   [20, 30): P 50,  S 0:   grid 50*10 = 500
    supply = SupplySeries(np.array([0.0, 5.0, 20.0]), np.array([100.0, 300.0, 0.0]))
    split = split_energy(np.array([0.0, 10.0]), np.array([200.0, 50.0]), 30.0, supply)
    assert (split.used_j, split.supplied_j) == (3000.0, 5000.0)
    assert (split.renewable_j, split.grid_j, split.curtailed_j) == (2000.0, 1000.0, 3000.0)
    assert split.renewable_share == pytest.approx(2 / 3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.floats(0, 1e4)), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(1, 20), st.floats(0, 1e4)), min_size=1, max_size=12),
       st.integers(-30, 30))
def test_split_adds_up(power, supply, supply_start):
    times = np.cumsum([0] + [dt for dt, _ in power[:-1]]).astype(float)
    end = float(times[-1] + power[-1][0])
    s_times = supply_start + np.cumsum([0] + [dt for dt, _ in supply[:-1]]).astype(float)
    series = SupplySeries(s_times, np.array([w for _, w in supply]))
    split = split_energy(times, np.array([w for _, w in power]), end, series)
    assert split.used_j == pytest.approx(sum(w * dt for dt, w in power), rel=1e-9, abs=1e-6)
    assert split.renewable_j + split.grid_j == pytest.approx(split.used_j, rel=1e-9, abs=1e-6)
    assert split.renewable_j + split.curtailed_j == pytest.approx(split.supplied_j, rel=1e-9, abs=1e-6)
    assert split.supplied_j == pytest.approx(series.integral_j(0.0, end), rel=1e-9, abs=1e-6)
    assert min(split.renewable_j, split.grid_j, split.curtailed_j) >= -1e-6


# -- supply series --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("0,1,2\n", "expected 2 comma-separated fields"),
    ("time,watts\n0,1\nx,2\n", "3: not numbers"),
    ("0,-5\n", "watts finite and >= 0"),
    ("10,1\n5,1\n", "2: time 5 does not come after"),
    ("# nothing\n\n", "no samples"),
])
def test_bad_supply_csv(text, message):
    with pytest.raises(InputError, match=message):
        parse_supply_csv(text, "s.csv")


def test_supply_from_a_file_and_errors(tmp_path):
    path = tmp_path / "supply.csv"
    path.write_text("time_s,watts\n0,0\n3600,2000\n", encoding="utf-8")
    supply = load_supply(str(path), [], Cluster.homogeneous(1, cpus=1), scale=0.5)
    assert supply.watts.tolist() == [0.0, 1000.0]
    with pytest.raises(InputError, match="no such file"):
        load_supply(str(tmp_path / "missing.csv"), [], Cluster.homogeneous(1, cpus=1))


def test_synthetic_supplies_are_seeded_and_bounded():
    day = 86400.0
    a, b, c = (solar_supply(0.0, 3 * day, 1000.0, seed=s) for s in (1, 1, 2))
    assert a.watts.tolist() == b.watts.tolist() and a.watts.tolist() != c.watts.tolist()
    hours = (a.times_s % day) / 3600
    assert (a.watts[(hours < 6) | (hours >= 18)] == 0).all() and a.peak_w <= 1000.0
    assert a.watts[(hours > 10) & (hours < 14)].min() > 0
    wind = wind_supply(0.0, 30 * day, 5000.0, seed=4)
    assert 0.0 <= wind.watts.min() and wind.peak_w <= 5000.0 and wind.watts.std() > 0


# -- deadlines ----------------------------------------------------------------------------------------
def test_drawn_deadlines_are_seeded_and_follow_the_slack():
    jobs = [JobSpec(str(i), float(i), 100.0, runtime_s=50.0) for i in range(2000)]
    first, again = with_deadlines(jobs, 0.8, seed=3), with_deadlines(jobs, 0.8, seed=3)
    assert [j.deadline_s for j in first] == [j.deadline_s for j in again]
    slacks = np.array([j.slack() for j in first])               # (d - r) / 50 - 1
    assert np.exp(np.log(slacks).mean()) == pytest.approx(0.8, rel=0.03)
    assert np.log(slacks).std() == pytest.approx(0.8 / 2.5, rel=0.05)   # sigma defaults to eps / 2.5
    assert lognormal_slacks(5, 2.0, 0.0).tolist() == [2.0] * 5
    with pytest.raises(ValueError):
        lognormal_slacks(1, 0.0, 1.0)


def test_offered_load_squeezes_arrivals():
    jobs = [JobSpec(str(i), 100.0 * i, 50.0, runtime_s=50.0, cpus=2) for i in range(11)]
    # work 11 * 2 * 50 = 1100 CPU-s over 1000 s on 1 CPU: load 1.1; at load 2.2 the span halves
    squeezed = with_offered_load(jobs, 1, 2.2)
    assert squeezed[-1].submit_s == pytest.approx(500.0)


# -- the upper bound on acceptable load ----------------------------------------------------------------
def test_bound_by_hand():
    # 2 CPUs.  Two 2-CPU jobs of 10 s in [0, 15]: both cannot fit (40 CPU-s > 30); the LP takes
    # 30 CPU-s of them.  A 1-CPU job [0, 15, 15] is also squeezed into the same interval: the
    # interval [0, 15] holds 2 * 15 = 30 CPU-s of the 55 asked.
    work = [Work(0, 15, 10, 2), Work(0, 15, 10, 2), Work(0, 15, 15, 1)]
    assert total_load(work, 2) == 55.0
    assert lp_upper_bound(work, 2) == pytest.approx(30.0)
    assert upper_bound(work, 2, lp=False) == (55.0, "total load")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.lists(st.tuples(st.integers(0, 30), st.integers(1, 12), st.integers(0, 20),
                                               st.integers(1, 4)), min_size=1, max_size=18),
       st.sampled_from(["bestfit", "balanced", "minidle", "backfill", "bestfit+backfill"]))
def test_bound_is_above_every_schedule_found(cores, specs, allocation):
    jobs = [JobSpec(str(i), float(r), float(p), runtime_s=float(p), cpus=min(m, cores),
                    deadline_s=float(r + p + extra)) for i, (r, p, extra, m) in enumerate(specs)]
    result = Replay(jobs, Cluster.homogeneous(cores, cpus=1), "deadline",
                    strategy_options=dict(acceptance="greedy", allocation=allocation)).run()
    accepted = sum(r.cpus * (r.end_s - r.start_s) for r in result.records)
    work = work_of(jobs)
    assert accepted <= lp_upper_bound(work, cores) + 1e-6 <= total_load(work, cores) + 2e-6


def test_without_scipy_the_bound_is_the_total_load_and_says_so():
    # SciPy is the optional "lp" extra.  Hidden in a child process (FakeNoScipy: sys.modules["scipy"] = None makes
    # its import fail as on an install without it): [0, 10, 6] twice and [20, 30, 5] on one CPU give the total
    # load 6 + 6 + 5 = 17, named so, where the LP gives 15 (see lp_upper_bound)
    import subprocess
    import sys
    code = ("import sys; sys.modules['scipy'] = None  # FakeNoScipy\n"
            "from greenslurm.sim.accounting.deadline_metrics import Work, upper_bound\n"
            "print(upper_bound([Work(0, 10, 6, 1), Work(0, 10, 6, 1), Work(20, 30, 5, 1)], 1))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "(17.0, 'total load (no SciPy)')"
    assert upper_bound([Work(0, 10, 6, 1), Work(0, 10, 6, 1), Work(20, 30, 5, 1)], 1) == (pytest.approx(15.0), "lp")
