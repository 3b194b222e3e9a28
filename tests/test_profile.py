"""The plan profile against a brute-force oracle: random reservations, releases and queries."""

import random

import numpy as np
import pytest

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
