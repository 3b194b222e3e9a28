"""Slurm's choice among consecutive node sets (cons_tres ``_eval_nodes``): the one order in which the
rigid, spread and -N fill layouts take sets, checked against the rule stated plainly, and the layouts
on small cases with the arithmetic in comments."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from greenslurm.allocation.consecutive import _SetOrder, best_fit_consecutive, fill_consecutive, spread_consecutive


@st.composite
def sets_and_needs(draw):
    count = draw(st.integers(1, 8))
    totals = draw(st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 2.5]), min_size=count, max_size=count))
    sizes = draw(st.lists(st.integers(1, 4), min_size=count, max_size=count))
    needs = draw(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0, 20.0]), st.integers(0, 5)),
                          min_size=count, max_size=count))
    counted = draw(st.booleans())
    return totals, sizes if counted else None, needs


def eval_nodes_scan(totals, sizes, left, need_cpus, need_nodes):
    """cons_tres ``_eval_nodes`` (Slurm 22.05.8, job_test.c), its choice of the next set transcribed:
    the sets in node order, the first the best so far, a later one new best when
    ``(sufficient && !best_fit_sufficient) || (sufficient && consec_cpus < best_fit_cpus) ||
    (!sufficient && consec_cpus > best_fit_cpus)`` (equal node weights, no required nodes)."""
    best, best_sufficient, best_cpus = None, False, 0.0
    for i in sorted(left):
        sufficient = totals[i] >= need_cpus and (sizes is None or sizes[i] >= need_nodes)
        if best is None or (sufficient and not best_sufficient) or (sufficient and totals[i] < best_cpus) \
                or (not sufficient and totals[i] > best_cpus):
            best, best_sufficient, best_cpus = i, sufficient, totals[i]
    return best, best_sufficient


@given(sets_and_needs())
def test_sets_are_taken_as_slurms_scan_takes_them(case):
    # each step over the sets not yet taken, Slurm's own scan; where nodes are not counted it is the
    # plain rule (the sufficient set with the fewest CPUs, the first on ties, else the set with the
    # most CPUs, the first on ties), which the compiled spread (_consecutive.c) implements
    totals, sizes, needs = case
    firsts = [10 * i for i in range(len(totals))]
    order = _SetOrder(totals, firsts, sizes)
    left = set(range(len(totals)))
    for need_cpus, need_nodes in needs:
        expected = eval_nodes_scan(totals, sizes, left, need_cpus, need_nodes)
        if sizes is None:
            sufficient = [i for i in left if totals[i] >= need_cpus]
            plain = (min(sufficient, key=lambda i: (totals[i], firsts[i])) if sufficient
                     else max(left, key=lambda i: (totals[i], -firsts[i])))
            assert expected == (plain, bool(sufficient))
        assert order.take(need_cpus, need_nodes) == expected
        left.discard(expected[0])
        assert order.untaken == len(left)


def test_a_set_short_of_nodes_with_more_cpus_is_taken_before_a_sufficient_one():
    # Slurm's log of s82 (CR_Core; debug3, SelectType; bench/data/slurm-workloads/s82): j23 (sbatch
    # -N 2 -n 2, partition high) with n01 6 CPUs free, n02 4, n03-n05 none, n06 15: sets n01-n02 (10
    # CPUs, 2 nodes: sufficient) and n06 (15, 1 node: short of nodes but more CPUs) -> Slurm took
    # n06 first, then the best fit of n01-n02 for the last CPU (n02: 4 < 6): NodeList=n[02,06]
    free = np.array([6.0, 4.0, 0.0, 0.0, 0.0, 15.0])
    assert best_fit_consecutive(free, free >= 1, np.flatnonzero(free >= 1), 2, 1.0).tolist() == [1, 5]
    # s51 (CR_Core_Memory): j38 (-N 3 -n 3 --mem=250) on the nodes with 250 MB free: n01 3 CPUs,
    # n02 3, n04 3, n08 2: sets n01-n02 (6, 2 nodes), n04 (3), n08 (2).  n01-n02 first (the most
    # CPUs, none has 3 nodes), one CPU each; one CPU on one node left: n04 and n08 both suffice,
    # the fewer CPUs n08 -> n01,n02,n08 as Slurm allocated (the CPUs still needed count down)
    free = np.array([3.0, 3.0, 0.0, 3.0, 0.0, 0.0, 0.0, 2.0])
    assert best_fit_consecutive(free, free >= 1, np.flatnonzero(free >= 1), 3, 1.0).tolist() == [0, 1, 7]


def test_a_fill_that_a_sufficient_set_leaves_unfinished_goes_on_in_the_other_sets():
    # sbatch -N 2 -n 6 over free CPUs 4 1 1 | 2 | 3 (sets n0-n2, n4, n6): n0-n2 suffices (6 CPUs, 3
    # nodes); n0 gives 4 (leaving one for the node to come), n1 and n2 hold 1 < 2: not the last node.
    # Left: 2 CPUs on 1 node; n4 (2) and n6 (3) suffice, the fewest: n4 gives 2
    nodes, cpus = fill_consecutive(np.array([4.0, 1.0, 1.0, 0.0, 2.0, 0.0, 3.0]), np.ones(7, bool), 6, 2)
    assert (nodes.tolist(), cpus.tolist()) == ([0, 4], [4.0, 2.0])
    # with 1 CPU on n4 and n6 no set suffices for the 2 left: the most CPUs first is n0-n2 again, but
    # it is taken; n4 and n6 cannot hold 2 on their one node: no layout (n0 never twice)
    assert fill_consecutive(np.array([4.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]), np.ones(7, bool), 6, 2) is None


def test_a_spread_takes_the_set_with_the_most_cpus_when_none_suffices():
    # 9 CPUs over sets n0-n1 (2 + 2), n3-n4 (3 + 3), n6 (1): none holds 9; the most, n3-n4, gives 6,
    # then 3 left: n0-n1 (4) suffices, no node holds 3, its nodes in order give 2 and 1
    nodes, cpus = spread_consecutive(np.array([2.0, 2.0, 0.0, 3.0, 3.0, 0.0, 1.0]), np.ones(7, bool), 9)
    assert (nodes.tolist(), cpus.tolist()) == ([0, 1, 3, 4], [2.0, 1.0, 3.0, 3.0])


def test_a_fill_that_fails_tries_again_without_the_nodes_offering_fewest_cpus():
    # sbatch -N 2 -n 8 over free CPUs 3 4 4 4 (one set): n0 gives 3 (8 - 3 = 5 left, one node to
    # go), no node holds 5: the first try fails.  choose_nodes leaves out the nodes offering at most
    # k = 1, 2, 3 CPUs (4 usable nodes > 2 asked): at k = 3 n0 goes; n1 gives 4 (8 - 1 = 7 would be
    # allowed), n2 the other 4
    nodes, cpus = fill_consecutive(np.array([3.0, 4.0, 4.0, 4.0]), np.ones(4, bool), 8, 2)
    assert (nodes.tolist(), cpus.tolist()) == ([1, 2], [4.0, 4.0])
    # with only two usable nodes nothing can be left out: no layout
    assert fill_consecutive(np.array([3.0, 4.0, 0.0, 0.0]), np.ones(4, bool), 8, 2) is None


def test_the_retry_sees_what_the_first_try_lowered():
    # sbatch -N 3 -n 7 over 4 2 | 3 | 3 (sets n0-n1, n3, n5): n0-n1 has too few nodes; the most CPUs
    # first: n0-n1 (6): n0 gives 4 (7 - 2 = 5 allowed), n1 2 would leave 1 for 1 node: gives
    # min(2, 3 - 1) = 2; 1 CPU on 1 node left: n3 (3) suffices as best fit, gives 1 and _cpus_to_use
    # lowers what n3 offers to 1 -> success on the first try, no retry
    nodes, cpus = fill_consecutive(np.array([4.0, 2.0, 0.0, 3.0, 0.0, 3.0]), np.ones(6, bool), 7, 3)
    assert (nodes.tolist(), cpus.tolist()) == ([0, 1, 3], [4.0, 2.0, 1.0])


@given(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 8.0]), min_size=1, max_size=9),
       st.integers(0, 16), st.integers(2, 5))
def test_a_fill_gives_each_of_its_nodes_at_least_one_cpu_and_no_more_than_it_has(free, extra, count):
    free = np.array(free)
    cpus = count + extra                          # -n is at least -N (sbatch lowers -N otherwise)
    found = fill_consecutive(free, free >= 1, float(cpus), count)
    if (free >= 1).sum() < count or free[free >= 1].sum() < cpus:
        assert found is None                      # not enough nodes or CPUs at all
        return
    if found is None:
        return
    nodes, given = found
    assert len(set(nodes.tolist())) == len(nodes) == count and list(nodes) == sorted(nodes)
    assert given.sum() == cpus and (given >= 1).all() and (given <= free[nodes]).all()


def test_the_retry_skips_the_counts_that_leave_no_node_out():
    # Nodes of a billion CPUs (B = 1e9).  sbatch -N 2 -n 2B+1 over B+2 | B | B | B: n0 gives B+2
    # (2B+1 - 1 allowed), B-1 left for one node: n1 holds it (best fit) -> found on the first try
    big = 1e9
    nodes, cpus = fill_consecutive(np.array([big + 2, big, big, big]), np.ones(4, bool), 2 * big + 1, 2)
    assert (nodes.tolist(), cpus.tolist()) == ([0, 1], [big + 2, big - 1])
    # 3 | B | B | B, -n 2B: n0 gives 3, no node holds 2B-3: the retry tries k = 1, leaves n0 out at
    # k = 3, and n1 and n2 give B each
    nodes, cpus = fill_consecutive(np.array([3.0, big, big, big]), np.ones(4, bool), 2 * big, 2)
    assert (nodes.tolist(), cpus.tolist()) == ([1, 2], [big, big])
    # -n 2B+1 cannot fit two nodes of B after n0 is left out; the next count that would leave a node
    # out is B, the most any node offers: the retry ends there (counting k up one at a time to B
    # would take a billion steps)
    assert fill_consecutive(np.array([3.0, big, big, big]), np.ones(4, bool), 2 * big + 1, 2) is None


def _retries_counting_one_by_one(offered, in_map, cpus, count):
    """choose_nodes's loop as written in cons_tres job_test.c: k = 1, 2, ... below the most offered."""
    from greenslurm.allocation.consecutive import _fill_once
    kept, left = in_map.copy(), int(in_map.sum())
    if left <= count:
        return None
    most = float(offered[in_map].max())
    k = 1
    while k < most:
        changed = False
        for node in np.flatnonzero(kept):
            if 0 < offered[node] <= k:
                kept[node], changed, left = False, True, left - 1
                if left <= count:
                    break
        if changed or k == 1:
            found = _fill_once(offered, kept, cpus, count)
            if found is not None or left <= count:
                return found
        k += 1
    return None


@given(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]), min_size=2, max_size=9),
       st.integers(0, 24), st.integers(2, 5))
def test_the_retry_decides_as_counting_one_by_one(free, extra, count):
    from greenslurm.allocation.consecutive import _fill_once, _fill_retries
    free = np.array(free)
    in_map = free >= 1
    cpus = float(count + extra)
    if in_map.sum() < count or free[in_map].sum() < cpus:
        return
    first_a, first_b = free.copy(), free.copy()
    if _fill_once(first_a, in_map, cpus, count) is not None:
        return
    _fill_once(first_b, in_map, cpus, count)                 # the same first try: the same lowered counts
    got = _fill_retries(first_a, in_map, cpus, count)
    expected = _retries_counting_one_by_one(first_b, in_map, cpus, count)
    assert (got is None) == (expected is None)
    if got is not None:
        assert got[0].tolist() == expected[0].tolist() and got[1].tolist() == expected[1].tolist()
