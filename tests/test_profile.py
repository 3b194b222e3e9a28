"""The plan profile against a brute-force oracle: random reservations, releases and queries."""

import random

import numpy as np
import pytest
from sortedcontainers import SortedList

from greenslurm.allocation import windows
from greenslurm.sim.engine.profile import PlanProfile


def brute_free(capacity, spans, t):
    """Free resources per node at time t: capacity less every span covering t."""
    free = capacity.copy()
    for start, end, nodes, demand in spans:
        if start <= t < end:
            free[nodes] -= demand
    return free


def brute_earliest(capacity, spans, count, demand, duration, after, before=np.inf):
    times = sorted({after} | {t for s, e, _, _ in spans for t in (s, e) if t > after})
    for t in times:
        if t >= before:
            return None
        checks = [t] + [x for x in times if t < x < t + duration]
        ok = np.ones(len(capacity), dtype=bool)
        for x in checks:
            ok &= (brute_free(capacity, spans, x) >= demand).all(axis=1)
        if ok.sum() >= count:
            return t
    return None


@pytest.mark.parametrize("seed", range(8))
def test_profile_matches_brute_force(seed):
    rng = random.Random(seed)
    capacity = np.array([[rng.randint(1, 4), 100.0, rng.randint(0, 2)] for _ in range(rng.randint(1, 5))], dtype=float)
    profile = PlanProfile(capacity, now_s=0.0)
    spans = []
    for _ in range(60):
        count = rng.randint(1, len(capacity))
        demand = np.array([rng.randint(0, 2), rng.choice([0.0, 50.0]), rng.randint(0, 1)], dtype=float)
        duration = float(rng.randint(1, 20))
        after = float(rng.randint(0, 30))
        before = rng.choice([np.inf, float(rng.randint(0, 40))])
        limited = profile.earliest_start(count, demand, duration, after, before_s=before)
        assert (limited[0] if limited else None) == brute_earliest(capacity, spans, count, demand, duration,
                                                                   after, before)
        found = profile.earliest_start(count, demand, duration, after)
        expected = brute_earliest(capacity, spans, count, demand, duration, after)
        assert (found[0] if found else None) == expected
        if found and rng.random() < 0.8:
            start, nodes = found
            assert len(nodes) == count and len(set(nodes.tolist())) == count
            for x in {start} | {t for s, e, _, _ in spans for t in (s, e) if start < t < start + duration}:
                assert (brute_free(capacity, spans, x)[nodes] >= demand).all()
            profile.reserve(start, start + duration, nodes, demand)
            spans.append((start, start + duration, nodes, demand))
        if spans and rng.random() < 0.3:
            start, end, nodes, demand = spans.pop(rng.randrange(len(spans)))
            profile.release(start, end, nodes, demand)
        profile._check(capacity)
        for t in [0.0, 5.0, 17.0, 33.0, 80.0]:
            assert np.allclose(profile.free_at(t), brute_free(capacity, spans, t))
    profile.compact()
    profile._check(capacity)


class ReferenceProfile:
    """The plan profile written the straightforward way (every row in time order in one array, a
    new breakpoint inserted with ``np.insert``, every query over every row), which the optimised
    :class:`PlanProfile` must match exactly: same breakpoints, same floats, same answers."""

    def __init__(self, free_now, now_s):
        self.times = SortedList([now_s])
        self.free = free_now[np.newaxis].astype(float).copy()
        self.free_cpus = self.free[:, :, 0].sum(axis=1)

    def _ensure_breakpoint(self, t_s):
        i = self.times.bisect_left(t_s)
        if i < len(self.times) and self.times[i] == t_s:
            return i
        self.times.add(t_s)
        self.free = np.insert(self.free, i, self.free[i - 1], axis=0)
        self.free_cpus = np.insert(self.free_cpus, i, self.free_cpus[i - 1])
        return i

    def _span(self, start_s, end_s):
        i = self._ensure_breakpoint(start_s)
        return i, (self._ensure_breakpoint(end_s) if end_s != np.inf else len(self.times))

    def advance(self, now_s):
        i = self.times.bisect_right(now_s) - 1
        if i > 0:
            del self.times[:i]
            self.free, self.free_cpus = self.free[i:], self.free_cpus[i:]
        if self.times[0] < now_s:
            self.times.pop(0)
            self.times.add(now_s)
        self.compact()

    def reserve(self, start_s, end_s, nodes, demand):
        i, j = self._span(start_s, end_s)
        self.free[i:j, nodes] -= demand
        self.free_cpus[i:j] -= demand[0] * len(nodes)

    def release(self, start_s, end_s, nodes, demand):
        i, j = self._span(start_s, end_s)
        self.free[i:j, nodes] += demand
        self.free_cpus[i:j] += demand[0] * len(nodes)

    def compact(self):
        if len(self.times) < 2:
            return
        same = (self.free[1:] == self.free[:-1]).all(axis=(1, 2))
        if same.any():
            keep = np.concatenate(([True], ~same))
            self.free, self.free_cpus = self.free[keep], self.free_cpus[keep]
            self.times = SortedList(np.fromiter(self.times, dtype=float)[keep].tolist())

    def breakpoints(self):
        return np.fromiter(self.times, dtype=float, count=len(self.times))

    def tails(self, demand):
        return windows.tails(self.breakpoints(), self.free, demand)

    def window_fits(self, demand, duration_s, starts):
        return windows.window_fits(self.breakpoints(), self.free, demand, duration_s, starts)

    def may_start_before(self, cpus_total, after_s, before_s):
        first = max(self.times.bisect_right(after_s) - 1, 0)
        last = self.times.bisect_left(before_s)
        return bool(last > first and (self.free_cpus[first:last] >= cpus_total).any())

    def earliest_start(self, nodes, demand, duration_s, after_s, before_s=np.inf, allowed=None):
        """The earliest start by trying every breakpoint in turn, with first fit's nodes."""
        for k, t in enumerate(self.times):
            start = max(t, after_s)
            if (k + 1 < len(self.times) and self.times[k + 1] <= after_s) or start >= before_s:
                continue
            fits = self.window_fits(demand, duration_s, np.array([start]))[0]
            if allowed is not None:
                fits &= allowed
            if fits.sum() >= nodes:
                return float(start), np.flatnonzero(fits)[:nodes]
        return None

    def free_at(self, t_s):
        return self.free[max(self.times.bisect_right(t_s) - 1, 0)]


def _same_state(profile, reference):
    assert list(profile.times) == list(reference.times)
    assert profile.breakpoints().tolist() == reference.breakpoints().tolist()
    assert np.array_equal(profile.free, reference.free)
    assert np.array_equal(profile.free_cpus, reference.free_cpus)


# demands with fractions that do not add up exactly, so rounding is exercised too
CPU_AMOUNTS = (0.0, 0.1, 1 / 3, 0.5, 1.0, 2.0, 3.0)
MEMORY_AMOUNTS = (0.0, 0.0, 10.0, 100 / 3)
GPU_AMOUNTS = (0.0, 0.0, 0.0, 0.5, 1.0)


@pytest.mark.parametrize("seed, wide", [(seed, False) for seed in range(30)] + [(seed, True) for seed in range(3)])
def test_profile_matches_reference_implementation(seed, wide):
    """Random reserve / release / advance / queries (and, as the live view builds its plan, rows
    set wholesale) on the optimised profile and on the reference: after every step the same
    breakpoints and free amounts to the last bit, and every query the same answer.  A few runs on
    more nodes than ``windows.WIDE``, where running counts are summed row by row."""
    rng = random.Random(seed)
    nodes = windows.WIDE + rng.randint(0, 50) if wide else rng.randint(1, 7)
    capacity = np.array([[rng.choice((2.0, 4.0, 8.0)), 100.0, rng.choice((0.0, 1.0, 2.0))] for _ in range(nodes)])
    now = 0.0
    profile, reference = PlanProfile(capacity, now), ReferenceProfile(capacity, now)
    held = []                                           # (start, end, nodes, demand) reserved
    for step in range(250):
        demand = np.array([rng.choice(CPU_AMOUNTS), rng.choice(MEMORY_AMOUNTS), rng.choice(GPU_AMOUNTS)])
        count = rng.randint(1, min(nodes, 7))
        duration = rng.choice((0.0, 0.5, 1.0, 7.0, 20.0, rng.uniform(0.1, 30.0)))
        after = now + rng.choice((0.0, 0.0, 3.0, rng.uniform(0.0, 40.0)))
        before = rng.choice((np.inf, np.inf, after + rng.uniform(0.0, 30.0)))
        allowed = None if rng.random() < 0.7 else np.array([rng.random() < 0.7 for _ in range(nodes)])
        action = rng.random()
        if action < 0.45:
            found = profile.earliest_start(count, demand, duration, after, before_s=before, allowed=allowed)
            expected = reference.earliest_start(count, demand, duration, after, before_s=before, allowed=allowed)
            assert (found is None) == (expected is None)
            if found is not None:
                assert found[0] == expected[0] and found[1].tolist() == expected[1].tolist()
                if duration > 0:
                    end = found[0] + duration
                    profile.reserve(found[0], end, found[1], demand)
                    reference.reserve(found[0], end, found[1], demand)
                    held.append((found[0], end, found[1], demand))
        elif action < 0.65 and held:
            first, end, chosen, demand = held.pop(rng.randrange(len(held)))
            first = max(first, now)
            # all of it (a job moved), or its rest from some time on (a job ending early)
            start = first if rng.random() < 0.5 else rng.uniform(first, end)
            if start < end:
                profile.release(start, end, chosen, demand)
                reference.release(start, end, chosen, demand)
            if first < start:
                held.append((first, start, chosen, demand))
        elif action < 0.75:
            now += rng.choice((0.0, 0.5, 2.0, rng.uniform(0.0, 15.0)))
            profile.advance(now)
            reference.advance(now)
            held = [(s, e, n, d) for s, e, n, d in held if e > now]
        elif action < 0.97:
            assert np.array_equal(profile.tails(demand), reference.tails(demand))
            starts = np.unique([max(now, t + rng.choice((0.0, 0.0, 0.25))) for t in reference.times])
            assert np.array_equal(profile.window_fits(demand, duration, starts),
                                  reference.window_fits(demand, duration, starts))
            assert profile.may_start_before(demand[0] * count, after, after + duration) == \
                reference.may_start_before(demand[0] * count, after, after + duration)
            assert np.array_equal(profile.free_at(after), reference.free_at(after))
        else:
            # the live view's build: rows set wholesale, then compacted
            times = SortedList(sorted({now, *(now + rng.randint(1, 30) for _ in range(rng.randint(0, 5)))}))
            free = np.repeat(capacity[np.newaxis], len(times), axis=0)
            free[:, :, 0] = np.minimum(free[:, :, 0], [[rng.choice((0.0, 1.0, 2.0)) for _ in range(nodes)]
                                                       for _ in times])
            for p in (profile, reference):
                p.times = SortedList(times)
                p.free = free.copy()
                p.free_cpus = free[:, :, 0].sum(axis=1)
                p.compact()
            held = []
        _same_state(profile, reference)
        if step % 25 == 0:
            profile._check(capacity)
    profile.advance(now)
    reference.advance(now)
    _same_state(profile, reference)
    profile._check(capacity)


def test_compaction_sees_rows_that_rounding_made_equal():
    """Two steps that differ in the last bit become equal when the same amount is given back on
    both: the breakpoint between them goes, as a comparison of every row would find."""
    profile = PlanProfile(np.array([[2.0, 0.0, 0.0]]), now_s=0.0)
    profile.reserve(0.0, 20.0, np.array([0]), np.array([1.0, 0.0, 0.0]))            # 1 free on [0, 20)
    profile.reserve(0.0, 10.0, np.array([0]), np.array([0.5, 0.0, 0.0]))            # 0.5 on [0, 10)
    profile.reserve(10.0, 20.0, np.array([0]), np.array([0.5 - 2 ** -53, 0.0, 0.0]))  # 0.5 + 2^-53 on [10, 20)
    assert profile.free[:, 0, 0].tolist() == [0.5, 0.5 + 2 ** -53, 2.0]
    # 0.5 + 1 = 1.5; 0.5 + 2^-53 + 1 = 1.5 + 2^-53 lies halfway between 1.5 and 1.5 + 2^-52 (the
    # spacing of doubles in [1, 2)) and rounds to the even one, 1.5
    profile.release(0.0, 20.0, np.array([0]), np.array([1.0, 0.0, 0.0]))
    assert profile.free[:, 0, 0].tolist() == [1.5, 1.5, 2.0]
    profile._check()
    profile.advance(0.0)
    assert list(profile.times) == [0.0, 20.0]
    assert profile.free[:, 0, 0].tolist() == [1.5, 2.0]


def test_tails_read_from_levels():
    """Node 0 is short until 10, node 1 again on [20, 30); a GPU demand no node can ever meet."""
    profile = PlanProfile(np.array([[4.0, 0.0, 0.0], [4.0, 0.0, 0.0]]), now_s=0.0)
    profile.reserve(0.0, 10.0, np.array([0, 1]), np.array([3.0, 0.0, 0.0]))
    profile.reserve(20.0, 30.0, np.array([1]), np.array([3.0, 0.0, 0.0]))
    assert profile.tails(np.array([2.0, 0.0, 0.0])).tolist() == [10.0, 30.0]
    assert profile.tails(np.array([1.0, 0.0, 0.0])).tolist() == [0.0, 0.0]       # 1 CPU is always free
    assert profile.tails(np.array([1.0, 0.0, 1.0])).tolist() == [np.inf, np.inf]
    profile.advance(25.0)                  # node 0's levels are older than the profile: read from 25
    assert profile.tails(np.array([2.0, 0.0, 0.0])).tolist() == [25.0, 30.0]
    profile._check()


def test_running_count_row_by_row_matches_cumsum():
    rng = np.random.default_rng(0)
    for rows, nodes in ((0, windows.WIDE), (1, windows.WIDE), (40, windows.WIDE + 3), (40, 5)):
        flags = rng.random((rows, nodes)) < 0.4
        expected = np.zeros((rows + 1, nodes), dtype=np.int32)
        np.cumsum(flags, axis=0, out=expected[1:])
        assert np.array_equal(windows.running_count(flags), expected)
