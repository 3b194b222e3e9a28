"""The event queue: total order (time, kind, sequence), cancellation, lookahead; seeded stress."""

import random

import pytest

from greenslurm.sim.events import EventKind, EventQueue


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


def test_a_part_looping_at_one_instant_stops_the_replay_with_an_error():
    """A timer that pushes itself again at the same instant (a fake part, looping on purpose) would keep
    the replay at t=0 forever.  One job on one node bounds the events at one instant to
    100 x (1 job + 1 node) + 10,000 = 10,200; the replay stops there with an error naming the instant."""
    from greenslurm.clustermodel import Cluster, JobSpec
    from greenslurm.sim.engine.replay import Replay, ReplayStalled

    replay = Replay([JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=1)], Cluster.homogeneous(1, cpus=1), "fcfs")
    replay.begin()
    handled = []

    def fake_looping_timer(now_s: float) -> None:
        handled.append(now_s)
        replay.events.push(now_s, EventKind.WAKE, fake_looping_timer)

    replay.events.push(0.0, EventKind.WAKE, fake_looping_timer)
    with pytest.raises(ReplayStalled, match=r"stuck at t=0 s: 10,201 events"):
        while len(replay.events):
            replay.step()
    # the submit of a, then 10,200 handler calls (the 10,201st event is refused before it runs)
    assert len(handled) == 10_199 and set(handled) == {0.0}
