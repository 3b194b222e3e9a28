"""The conservative core's run lists (the compression's bounds on when a waiting job can move earlier)
on edge values the ordinary workloads do not draw: one node, exact ties (every job the same size and
limit), durations of a microsecond beside ones of thirty years, jobs that end at once, plans far in
time.  The compiled core must give the general loop's result bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from test_pool_core import assert_conservative_cores_equal, monkeypatch_session  # noqa: F401 (a fixture)

DURATIONS_S = [1e-6, 0.1, 1.0, 1.0, 60.0, 3600.0, 1e9]


@st.composite
def edge_pools(draw):
    """Over 64 waiting jobs (the core keeps run lists from there on) on 1 to 4 processors, durations
    from a few edge values (many exact ties), a third ending at once, a third early."""
    nodes = draw(st.integers(1, 6))
    count = draw(st.integers(70, 160))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    offset = draw(st.sampled_from([0.0, 1e9, 1e12]))
    submit = offset + np.sort(rng.integers(0, 5, count) * rng.choice([1e-6, 1.0, 100.0])).astype(float)
    requested = rng.choice(DURATIONS_S, count)
    kind = rng.integers(0, 3, count)
    run_for = np.where(kind == 0, 0.0, np.where(kind == 1, requested * rng.choice([0.5, 1e-3], count), requested))
    procs = rng.integers(1, nodes + 1, count) if draw(st.booleans()) else np.full(count, nodes)
    return nodes, submit, requested, run_for, procs


@settings(max_examples=8, deadline=None)           # the general loop takes about a second CPU for each
@given(edge_pools())
def test_conservative_run_lists_on_edge_values_equal_the_general_loop(monkeypatch_session, workload):
    assert_conservative_cores_equal(monkeypatch_session, workload)
