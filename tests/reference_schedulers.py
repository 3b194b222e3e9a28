"""Deliberately naive, textbook schedulers on a pool of P identical processors, written apart from
the engine (no numpy, no sortedcontainers, no shared code) to cross-check it on real traces.

Each takes jobs as (submit, requested, runtime, procs) in trace order and returns start times.
Jobs run min(runtime, requested); at equal times ends come before arrivals; the scheduler runs
once per distinct event time, after all events at that time.
"""

import math


def _simulate(jobs, procs_total, schedule):
    order = sorted(range(len(jobs)), key=lambda i: jobs[i][0])
    starts = [None] * len(jobs)
    running = []            # (actual end, planned end, procs, job)
    queue = []
    state = {"free": procs_total}
    next_arrival = 0
    while next_arrival < len(order) or running or queue:
        times = [end for end, _, _, _ in running]
        if next_arrival < len(order):
            times.append(jobs[order[next_arrival]][0])
        if not times:
            raise AssertionError("jobs wait but nothing will ever end")
        now = min(times)
        for item in [r for r in running if r[0] == now]:
            running.remove(item)
            state["free"] += item[2]
        while next_arrival < len(order) and jobs[order[next_arrival]][0] == now:
            queue.append(order[next_arrival])
            next_arrival += 1

        def start(i):
            submit, requested, runtime, procs = jobs[i]
            starts[i] = now
            running.append((now + min(runtime, requested), now + requested, procs, i))
            state["free"] -= procs

        schedule(now, queue, running, state, start)
    return starts


def fcfs(jobs, procs_total):
    def schedule(now, queue, running, state, start):
        while queue and jobs[queue[0]][3] <= state["free"]:
            start(queue.pop(0))
    return _simulate(jobs, procs_total, schedule)


def easy(jobs, procs_total):
    """EASY (Mu'alem & Feitelson 2001, Fig. 1): shadow time and extra processors for the head."""
    def schedule(now, queue, running, state, start):
        while queue and jobs[queue[0]][3] <= state["free"]:
            start(queue.pop(0))
        if not queue:
            return
        head_procs = jobs[queue[0]][3]
        available = state["free"]
        shadow, extra = math.inf, 0
        for _, planned_end, procs, _ in sorted(running, key=lambda r: r[1]):
            available += procs
            if available >= head_procs:
                shadow, extra = planned_end, available - head_procs
                break
        for i in list(queue[1:]):
            submit, requested, runtime, procs = jobs[i]
            if procs > state["free"]:
                continue
            if now + requested <= shadow:
                queue.remove(i)
                start(i)
            elif procs <= extra:
                queue.remove(i)
                start(i)
                extra -= procs
    return _simulate(jobs, procs_total, schedule)


def conservative(jobs, procs_total):
    """Conservative backfilling on a processor-count profile (Mu'alem & Feitelson 2001): every job
    gets the earliest reservation at arrival; after an early end, waiting jobs are re-planned in
    arrival order, each moving only if an earlier slot exists."""
    order = sorted(range(len(jobs)), key=lambda i: jobs[i][0])
    starts = [None] * len(jobs)
    running = {}            # job -> actual end
    reserved = {}           # waiting job -> reserved start
    waiting = []            # arrival order

    def spans(exclude):
        out = [(starts[j], starts[j] + jobs[j][1], jobs[j][3]) for j in running]
        out += [(s, s + jobs[j][1], jobs[j][3]) for j, s in reserved.items() if j != exclude]
        return out

    def fits(taken, start, end, procs):
        points = [start] + [s for s, _, _ in taken if start < s < end]
        return all(sum(p for s, e, p in taken if s <= t < e) + procs <= procs_total for t in points)

    def earliest(i, now):
        taken = spans(i)
        for t in sorted({now} | {e for _, e, _ in taken if e > now}):
            if fits(taken, t, t + jobs[i][1], jobs[i][3]):
                return t
        raise AssertionError("no slot even on an empty machine")

    next_arrival = 0
    while next_arrival < len(order) or running or waiting:
        times = list(running.values())
        if next_arrival < len(order):
            times.append(jobs[order[next_arrival]][0])
        now = min(times)
        early = False
        for j in [j for j, end in running.items() if end == now]:
            early |= starts[j] + jobs[j][1] > now
            del running[j]
        while next_arrival < len(order) and jobs[order[next_arrival]][0] == now:
            i = order[next_arrival]
            next_arrival += 1
            reserved[i] = earliest(i, now)
            waiting.append(i)
        if early:
            for i in list(waiting):
                if reserved[i] > now:
                    reserved[i] = min(reserved[i], earliest(i, now))
        for i in sorted(waiting, key=lambda j: (reserved[j], j)):
            if reserved[i] <= now:
                waiting.remove(i)
                del reserved[i]
                starts[i] = now
                running[i] = now + min(jobs[i][2], jobs[i][1])
    return starts
