"""The event queue: total order (time, kind, sequence), cancellation, lookahead; seeded stress."""

import random

import pytest

from greenslurm.sim.engine.events import EventKind, EventQueue


def test_order_is_time_then_kind_then_push_order():
    q = EventQueue()
    q.push(2.0, EventKind.SUBMIT, "s2")
    q.push(1.0, EventKind.WAKE, "w1")
    q.push(1.0, EventKind.SUBMIT, "s1a")
    q.push(1.0, EventKind.END, "e1")
    q.push(1.0, EventKind.SUBMIT, "s1b")
    assert [q.pop()[2] for _ in range(len(q))] == ["e1", "s1a", "s1b", "w1", "s2"]


def test_cancel_and_lookahead():
    q = EventQueue()
    first = q.push(1.0, EventKind.END, "a")
    q.push(3.0, EventKind.END, "b")
    assert q.peek_time() == 1.0
    q.cancel(first)
    assert q.peek_time() == 3.0 and len(q) == 1
    with pytest.raises(ValueError):
        q.cancel(first)          # already gone
    q.pop()
    assert q.peek_time() is None


@pytest.mark.parametrize("seed", range(10))
def test_seeded_stress_matches_a_sorted_list(seed):
    """Random pushes, pops and cancels against a plain sorted Python list as the oracle."""
    rng = random.Random(seed)
    q, oracle, handles = EventQueue(), [], []
    for step in range(2000):
        action = rng.random()
        if action < 0.55 or not oracle:
            key = q.push(float(rng.randint(0, 50)), EventKind(rng.randint(0, 2)), step)
            oracle.append((key, step))
            handles.append(key)
        elif action < 0.8:
            oracle.sort()
            (key, payload) = oracle.pop(0)
            time_s, kind, got = q.pop()
            assert (time_s, kind, got) == (key[0], key[1], payload)
        else:
            key = rng.choice(handles)
            if any(k == key for k, _ in oracle):
                q.cancel(key)
                oracle = [(k, p) for k, p in oracle if k != key]
        if step % 100 == 0:
            q._check()
        assert len(q) == len(oracle)
    q._check()
