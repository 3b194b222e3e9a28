"""The deadline queue's cheaper compression steps against the steps they replace: a look for an
earlier start as if a slot were given back (``PlanProfile.earliest_move``) against giving it back
and asking ``earliest_start``; the tails of a few nodes against all tails; the nodes picked at one
start (``choose_at``) against ``choose_windows``."""

import copy
import random

import numpy as np
import pytest

from greenslurm.allocation.placement import RULES, FirstFit, choose_at, choose_windows
from greenslurm.sim.engine.profile import PlanProfile


def _random_plan(rng, whole):
    nodes = rng.randint(1, 8)
    capacity = np.array([[rng.choice((1.0, 2.0, 4.0)), 100.0, rng.choice((0.0, 2.0))] for _ in range(nodes)])
    profile = PlanProfile(capacity, 0.0)
    held = []
    for _ in range(rng.randint(0, 25)):
        cpus = rng.choice((1.0, 2.0) if whole else (0.5, 1 / 3, 1.0))
        demand = np.array([cpus, rng.choice((0.0, 10.0)), rng.choice((0.0, 1.0))])
        count = rng.randint(1, nodes)
        duration = float(rng.randint(1, 30))
        found = profile.earliest_start(count, demand, duration, float(rng.randint(0, 40)))
        if found is not None:
            profile.reserve(found[0], found[0] + duration, found[1], demand)
            held.append((found[0], found[0] + duration, found[1], demand))
    return profile, held


def _state(profile):
    return profile.breakpoints().tolist(), profile.free.tolist(), profile.free_cpus.tolist()


def _move_case(seed):
    """One plan, one reserved slot that starts after now, checked; whether the job could move."""
    rng = random.Random(seed)
    held = []
    while not held:                 # a plan with a slot that starts later than the plan
        profile, held = _random_plan(rng, whole=seed % 3 != 0)
        held = [slot for slot in held if slot[0] > 0]
    start, end, nodes, demand = held[rng.randrange(len(held))]
    now = rng.choice((0.0, rng.uniform(0.0, start)))
    profile.advance(now)
    allowed = None if rng.random() < 0.6 else np.array([rng.random() < 0.8 for _ in range(len(profile.free[0]))])
    released = copy.deepcopy(profile)
    released.release(start, end, nodes, demand)
    expected = released.earliest_start(len(nodes), demand, end - start, now, before_s=start, allowed=allowed)
    before = copy.deepcopy(profile)
    found_start, fits, most = profile.earliest_move(len(nodes), demand, end - start, now, start, end, nodes, allowed)
    assert (found_start is None) == (expected is None)
    starts = released.breakpoints()[released.breakpoints() < start]
    window = released.window_fits(demand, end - start, starts)
    if allowed is not None:
        window &= allowed
    assert most >= window.sum(axis=1).max()
    if expected is not None:
        assert found_start == expected[0]
        assert fits.tolist() == window[starts.tolist().index(found_start)].tolist()
    # the plan holds the slot as before, split where the release splits it
    before.reserve(start, end, nodes, np.zeros(3))
    assert _state(profile) == _state(before)
    released.reserve(start, end, nodes, demand)
    if profile.whole:
        assert _state(profile) == _state(released)
    profile._check()
    return found_start is not None


@pytest.mark.parametrize("seed", range(60))
def test_earliest_move_is_release_then_earliest_start(seed):
    """Same start, same nodes free over its window, the plan left holding the slot with the
    breakpoints the release makes, and ``most`` at least the most nodes any earlier window holds."""
    _move_case(seed)


def test_moves_cover_both_outcomes():
    """The cases above include jobs that can move and jobs that cannot (10 of the first 40 cannot)."""
    moved = [_move_case(seed) for seed in range(40)]
    assert 0 < moved.count(False) and 0 < moved.count(True)


@pytest.mark.parametrize("seed", range(20))
def test_tails_of_some_nodes(seed):
    rng = random.Random(seed)
    profile, _ = _random_plan(rng, whole=seed % 2 == 0)
    demand = np.array([rng.choice((0.5, 1.0, 2.0)), rng.choice((0.0, 10.0)), rng.choice((0.0, 1.0))])
    some = np.array(sorted(rng.sample(range(len(profile.free[0])), rng.randint(1, len(profile.free[0])))))
    assert profile.tails(demand, some).tolist() == profile.tails(demand)[some].tolist()


@pytest.mark.parametrize("seed", range(200))
def test_choose_at_is_choose_windows_on_one_row(seed):
    """Ties in tails included: the same nodes as the general chooser on a single candidate row."""
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    tails = np.array([float(rng.choice((0, 3, 3, 7, 10, np.inf))) for _ in range(n)])
    fits = np.array([rng.random() < 0.7 for _ in range(n)])
    if not fits.any():
        fits[rng.randrange(n)] = True
    m = rng.randint(1, int(fits.sum()))
    for rule in [RULES[name]() for name in ("balanced", "bestfit", "minidle")] + [FirstFit()]:
        _, expected = choose_windows(rule, m, tails, 0.0, np.array([0.0]), fits[np.newaxis])
        nodes = np.flatnonzero(fits)
        assert choose_at(rule, m, nodes, tails[nodes]).tolist() == expected.tolist()
