"""Slurm's spread node choice at the edges: the compiled fast path (``_consecutive.c``) against its
reference (``spread_consecutive_reference``) on values the ordinary property tests do not draw:
fractional CPUs, -inf and NaN rows, huge and negative counts, one node, 5,000 nodes, exact ties, and
node maps that are not boolean."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation import consecutive

EDGE_FREE = st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 0.5, 0.999, 1.0000001, 2.25, -1.0, -math.inf, math.inf,
                             math.nan, 2.0 ** 40 - 1, 2.0 ** 40, 1e300, -0.0])
EDGE_CPUS = st.sampled_from([0.0, -1.0, 1.0, 2.0, 3.0, 7.0, 0.5, 2.5, math.nan, math.inf, -math.inf,
                             2.0 ** 40 - 1, 2.0 ** 40, 1e300, 5e-324])


def _same(free, in_map, cpus):
    fast = consecutive.spread_consecutive(free, in_map, cpus)
    reference = consecutive.spread_consecutive_reference(free, in_map, cpus)
    assert (fast is None) == (reference is None)
    if fast is not None:
        assert fast[0].tolist() == reference[0].tolist()
        assert np.array_equal(fast[1], reference[1], equal_nan=True)
    return fast


def test_the_compiled_spread_is_built():
    assert consecutive.compiled_library() is not None


@settings(max_examples=400, deadline=None)
@given(st.lists(EDGE_FREE, min_size=1, max_size=12), st.lists(st.booleans(), min_size=12, max_size=12), EDGE_CPUS)
def test_the_compiled_spread_equals_its_reference_on_edge_values(free, flags, cpus):
    free_cpus = np.array(free)
    _same(free_cpus, np.array(flags[:len(free)]), cpus)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.sampled_from([1, 2, 5000]), st.integers(1, 9000))
def test_ties_on_one_node_and_on_5000_nodes(value, nodes, cpus):
    # every node holds the same count: every set ties, the first wins, every node ties in best fit
    free_cpus = np.full(nodes, float(value))
    found = _same(free_cpus, np.ones(nodes, bool), float(cpus))
    if nodes * value < cpus:
        assert found is None
    else:
        # one set (all nodes consecutive): the first node holding it (n0) when one does; else the
        # nodes in order, each its count, the last what is left: cpus = value x (k - 1) + rest
        assert found is not None
        assert found[0].tolist() == list(range(len(found[0]))) and found[1].sum() == cpus


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 4999), st.integers(1, 400))
def test_5000_nodes_with_gaps_and_ties(seed, hole, cpus):
    # 5,000 nodes drawn from few counts (many exact ties between sets and nodes), one -inf row
    free_cpus = np.random.default_rng(seed).choice([0.0, 1.0, 3.0, 3.0, 7.0, 2.0 ** 39], size=5000)
    free_cpus[hole] = -math.inf
    _same(free_cpus, np.ones(5000, bool), float(cpus))
    _same(free_cpus, free_cpus < 2.0 ** 39, float(cpus) * 100)


def test_an_integer_node_map_is_a_boolean_one():
    # a map of 0/1 integers: the fast path converts it; the reference reads its truth the same way
    free_cpus = np.array([2.0, 0.0, 3.0, 3.0])
    _same(free_cpus, np.array([1, 0, 1, 1]), 3.0)


@pytest.mark.parametrize("map_length", [0, 7, 9])
def test_a_node_map_of_another_length_is_refused_not_read_past_its_end(map_length):
    # 8 nodes, a map of another length: the reference refuses it (numpy cannot pair the two);
    # the compiled path must not read the map past its end (it would read 8 bytes of a shorter one)
    free_cpus = np.arange(1.0, 9.0)
    with pytest.raises(ValueError):
        consecutive.spread_consecutive_reference(free_cpus, np.ones(map_length, bool), 2.0)
    with pytest.raises(ValueError):
        consecutive.spread_consecutive(free_cpus, np.ones(map_length, bool), 2.0)


def test_a_map_of_one_flag_is_broadcast_as_numpy_does():
    # one flag for 8 nodes: numpy pairs it with every node (the reference's answer, n1 holds 2)
    found = _same(np.arange(1.0, 9.0), np.ones(1, bool), 2.0)
    assert found[0].tolist() == [1] and found[1].tolist() == [2.0]
