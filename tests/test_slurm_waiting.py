"""The slurm queue's waiting order (sim/engine/slurm_waiting.py): what it keeps between passes (the order,
the job indices, the suffix minima of the CPUs and their least) equals a fresh computation after any
sequence of submissions, starts and reprioritisations."""

from types import SimpleNamespace

import numpy as np
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from greenslurm.sim.engine.slurm_waiting import Waiting, WaitingOrder, smallest_from


def waiting(index: int, cpus: float, priority: int) -> Waiting:
    job = SimpleNamespace(index=index, cpus_total=cpus, job=SimpleNamespace(submit_s=float(index % 3)))
    return Waiting(job, "p", 0, priority, 0.0)


def test_the_least_follows_additions_and_removals():
    jobs = [waiting(0, 4.0, 0), waiting(1, 1.0, 0), waiting(2, 8.0, 0)]
    order = WaitingOrder(jobs)
    assert order.least() == 1.0
    order.add(waiting(3, 2.0, 0))
    assert order.least() == 1.0          # 2 added: min(1, 2) = 1, kept without a new look
    order.remove(jobs[1])
    assert order.least() == 2.0          # the job asking the least (1) left: min(4, 8, 2) = 2
    order.remove(jobs[0])
    order.remove(jobs[2])
    assert order.least() == 2.0 and order.smallest() == [2.0]


# an operation: ("add", cpus, priority), ("remove", which of the waiting jobs), ("reorder", new priorities' seed)
operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from([1.0, 2.0, 3.0, 8.0, 64.0]), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.integers(0, 1000)),
    st.tuples(st.just("reorder"), st.integers(0, 3)),
    st.tuples(st.just("ask"), st.sampled_from(["least", "smallest", "indices", "jobs"]))), max_size=60)


@given(operations)
def test_what_the_order_keeps_equals_a_fresh_computation(steps):
    order = WaitingOrder()
    present: list[Waiting] = []
    for number, step in enumerate(steps):
        if step[0] == "add":
            job = waiting(number, step[1], step[2])
            present.append(job)
            order.add(job)
        elif step[0] == "remove" and present:
            order.remove(present.pop(step[1] % len(present)))
        elif step[0] == "reorder":
            for position, job in enumerate(present):
                job.reprioritize((position + step[1]) % 4)
            order.reorder(present)
        elif step[0] == "ask":
            getattr(order, step[1])()
        order.check(present)
        fresh = sorted(present, key=lambda w: w.key)
        cpus = [w.job.cpus_total for w in fresh]
        assert order.least() == min(cpus, default=float("inf"))
        assert order.smallest() == smallest_from(np.array(cpus, dtype=float))
        assert order.indices().tolist() == [w.job.index for w in fresh]
