"""A bare heap-based EASY (and FCFS) scheduler on an SWF log: the yardstick of bench_replay.py.

Written apart from greenslurm (standard library only): one heapq of job ends, arrivals taken in
submit order, EASY backfilling on processor counts (Mu'alem & Feitelson 2001, Fig. 1).  The job
model is the replay's on an SWF log: ``MaxProcs`` one-CPU nodes; a job asks for its requested
processors (the allocated ones when unknown) for its requested time (its run time when unknown)
and runs min(run time, requested time); records without a submit time, run time or processor
count, or larger than the machine, are left out.  At one time ends come before arrivals, and the
scheduler runs once after all events at that time.

    python bench/easy_reference.py TRACE.swf [--fcfs] [--starts FILE]   # FILE: "job_id start_s" lines
"""

import sys
from bisect import bisect_left, insort
from heapq import heappop, heappush


def read_swf(path):
    """(job ids, submit, requested, run, procs) columns in submit order, and MaxProcs."""
    rows, max_procs = [], None
    with open(path) as lines:
        for line in lines:
            if line.startswith(";"):
                if line[1:].strip().startswith("MaxProcs:"):
                    max_procs = int(line.split(":", 1)[1])
                continue
            f = line.split()
            if len(f) != 18:
                continue
            submit, run, alloc, asked, req = float(f[1]), float(f[3]), float(f[4]), float(f[7]), float(f[8])
            procs = asked if asked > 0 else alloc
            if submit < 0 or run < 0 or procs <= 0 or procs > max_procs:
                continue
            req = req if req > 0 else run
            rows.append((submit, f[0], req, min(run, req), procs))
    rows.sort(key=lambda row: row[0])        # stable: equal submit times keep the log's order
    return list(zip(*rows)), max_procs


def simulate(path, easy=True):
    (submit, ids, req, run, procs), free = read_swf(path)
    n, start = len(submit), [0.0] * len(submit)
    ends, by_planned_end, queue, i, now = [], [], [], 0, 0.0   # heap (end, job); sorted (planned end, job)

    def begin(j):
        nonlocal free
        start[j] = now
        free -= procs[j]
        heappush(ends, (now + run[j], j))
        insort(by_planned_end, (now + req[j], j))

    while i < n or ends:
        now = ends[0][0] if ends and (i == n or ends[0][0] <= submit[i]) else submit[i]
        while ends and ends[0][0] == now:
            j = heappop(ends)[1]
            free += procs[j]
            del by_planned_end[bisect_left(by_planned_end, (start[j] + req[j], j))]
        while i < n and submit[i] == now:
            queue.append(i)
            i += 1
        while queue and procs[queue[0]] <= free:
            begin(queue.pop(0))
        if not easy or not queue or free <= 0:
            continue
        shadow, k = None, 1
        while k < len(queue) and free > 0:
            j = queue[k]
            if procs[j] > free:
                k += 1
                continue
            if shadow is None:       # the head's shadow time and the extra processors then
                available, head = free, procs[queue[0]]
                for shadow, r in by_planned_end:
                    available += procs[r]
                    if available >= head:
                        break
                extra = available - head
            if now + req[j] > shadow:
                if procs[j] > extra:
                    k += 1
                    continue
                extra -= procs[j]
            del queue[k]
            begin(j)
    return ids, submit, start


if __name__ == "__main__":
    ids, submit, start = simulate(sys.argv[1], easy="--fcfs" not in sys.argv)
    print(f"{len(start)} jobs, mean wait {sum(s - t for s, t in zip(start, submit)) / len(start):.1f} s")
    if "--starts" in sys.argv:
        with open(sys.argv[sys.argv.index("--starts") + 1], "w") as out:
            out.writelines(f"{j} {s!r}\n" for j, s in zip(ids, start))
