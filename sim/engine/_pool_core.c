/* The replay's core on a processor pool, compiled: FCFS, EASY and conservative backfilling (its plan in
 * _conservative_plan.h), first fit, the energy ledger.
 *
 * The definition is the replay's general loop (queues.py, profile.py, the ledger); this file makes
 * the same decisions in the same order with the same double-precision operations (no fused multiply-add: built with -ffp-contract=off),
 * so its results are identical to the last bit.  It is loaded with ctypes (no Python API is used):
 * pool_run() takes the jobs as arrays and fills arrays the caller allocated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "_pool_ledger.h"

#define FCFS 0
#define EASY 1
#define CONSERVATIVE 2

typedef struct { double end; int64_t job; } by_end_entry;

static int by_end_less(double end, int64_t job, const by_end_entry *e) {
    return end < e->end || (end == e->end && job < e->job);
}

/* first position not less than (end, job) */
static int64_t by_end_position(const by_end_entry *a, int64_t n, double end, int64_t job) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (by_end_less(end, job, &a[mid]) || (a[mid].end == end && a[mid].job == job)) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

typedef struct {
    /* inputs */
    const double *submit, *requested, *run_for;
    const int64_t *procs;
    int64_t n_nodes;
    /* machine */
    unsigned char *free_node;
    int64_t lowest_free;              /* no node below it is free (where a search for free nodes starts) */
    double free_count;
    int64_t finished_count;
    pool_ledger ledger;
    /* jobs */
    double *started;                  /* by job: its start */
    int32_t *next_node;               /* a running job's nodes: from its first, each gives the next (-1: last) */
    end_event *heap;
    int64_t heap_n, sequence;
} core;

static void start(core *c, int64_t j, double now) {
    int64_t n = c->procs[j], node = c->lowest_free, first = -1, last = -1;
    for (int64_t k = 0; k < n; k++) {             /* the lowest-numbered free nodes */
        while (!c->free_node[node]) node++;
        c->free_node[node] = 0;
        if (last < 0) first = node; else c->next_node[last] = (int32_t)node;
        last = node;
        node++;
    }
    c->next_node[last] = -1;
    c->lowest_free = last + 1;        /* the n lowest free nodes were taken: none is free below */
    c->free_count -= (double)n;
    c->started[j] = now;
    ledger_start(&c->ledger, n, now);
    for (int64_t v = first; v >= 0; v = c->next_node[v]) ledger_node_starts(&c->ledger, v, now);
    end_event e = { now + c->run_for[j], c->sequence++, j, first };
    heap_push(c->heap, &c->heap_n, e);
}

static void finish(core *c, int64_t j, int64_t first, double now) {
    int64_t n = c->procs[j];
    for (int64_t v = first; v >= 0; v = c->next_node[v]) {
        c->free_node[v] = 1;
        if (v < c->lowest_free) c->lowest_free = v;
    }
    c->free_count += (double)n;
    c->finished_count++;
    double share = ledger_finish(&c->ledger, j, n, c->started[j], now), run_s = now - c->started[j];
    for (int64_t v = first; v >= 0; v = c->next_node[v]) ledger_node_ends(&c->ledger, v, share, run_s, now);
    ledger_ended(&c->ledger);
}

#include "_conservative_plan.h"

/* Returns 0, or -1 when memory ran out, -2 when a job fits nowhere on the empty pool, -3 when jobs
 * wait after the last event, -4 when the conservative plan is asked for a time before its start (a
 * negative or NaN time given). */
int pool_run(int queue, int64_t n_nodes, int64_t jobs,
             const double *submit, const double *requested, const double *run_for, const int64_t *procs,
             double idle_power_w, double delta_unit, double share_unit, double start_s,
             int64_t *out_rows, double *out_start, double *out_end, double *out_energy, int32_t *out_nodes,
             int64_t *out_offsets,
             double *times, double *series_w, double *series_busy, int64_t *series_len, double *scalars,
             double *node_jobs_j, double *node_cpu_s, int64_t *jobs_on, double *idle_since, double *idle_node_s) {
    core c;
    memset(&c, 0, sizeof c);
    c.submit = submit; c.requested = requested; c.run_for = run_for; c.procs = procs;
    c.n_nodes = n_nodes;
    c.free_node = malloc(n_nodes > 0 ? (size_t)n_nodes : 1);
    c.heap = malloc(sizeof(end_event) * (size_t)(n_nodes + 1));
    int64_t *waiting = malloc(sizeof(int64_t) * (size_t)(jobs + 1));
    by_end_entry *by_end = malloc(sizeof(by_end_entry) * (size_t)(n_nodes + 1));
    if (!c.free_node || !c.heap || !waiting || !by_end) {
        free(c.free_node); free(c.heap); free(waiting); free(by_end);
        return -1;
    }
    memset(c.free_node, 1, (size_t)n_nodes);
    c.free_count = (double)n_nodes;
    ledger_init(&c.ledger, n_nodes, idle_power_w, delta_unit, share_unit, start_s, times, series_w, series_busy,
                node_jobs_j, node_cpu_s, jobs_on, idle_since, idle_node_s, out_rows, out_start, out_end,
                out_energy, out_nodes, out_offsets);
    c.started = malloc(sizeof(double) * (size_t)(jobs + 1));
    c.next_node = malloc(sizeof(int32_t) * (size_t)(n_nodes + 1));
    if (!c.started || !c.next_node) {
        free(c.free_node); free(c.heap); free(waiting); free(by_end); free(c.started); free(c.next_node);
        return -1;
    }

    int64_t arrived = 0, q_head = 0, q_tail = 0, by_end_n = 0;
    int have_cache = 0;
    int64_t cache_head = -1, cache_finished = -1;
    double shadow = 0.0, extra = 0.0;
    int status = 0;
    /* conservative: the plan, reserved starts, jobs by reserved start, due and late jobs */
    count_profile plan;
    memset(&plan, 0, sizeof plan);
    staircase stairs = { NULL, NULL, 0, 0, 0 };
    int have_plan = 0, compress = 0;
    run_stairs *runs = NULL;          /* by processor count */
    int64_t *built = NULL, n_built = 0;
    moved_log moved = { NULL, 0, 0 };
    double *reserved_s = NULL;
    reservation *by_reservation = NULL, *due = NULL, *moved_jobs = NULL;
    int64_t by_reservation_n = 0, moved_n = 0;
    if (queue == CONSERVATIVE) {
        reserved_s = malloc(sizeof(double) * (size_t)(jobs + 1));
        by_reservation = malloc(sizeof(reservation) * (size_t)(jobs + 1));
        due = malloc(sizeof(reservation) * (size_t)(jobs + 1));
        moved_jobs = malloc(sizeof(reservation) * (size_t)(jobs + 1));
        runs = calloc((size_t)n_nodes + 1, sizeof(run_stairs));
        built = malloc(sizeof(int64_t) * (size_t)(n_nodes + 1));
        if (!reserved_s || !by_reservation || !due || !moved_jobs || !runs || !built) { status = -1; goto done; }
    }
    double now = -INFINITY;

    while (c.heap_n > 0 || arrived < jobs || by_reservation_n > 0) {
        now = next_event(c.heap, c.heap_n, submit, arrived, jobs, by_reservation, by_reservation_n, now);
        if (now == INFINITY && c.heap_n == 0) { status = -3; goto done; }   /* an end at infinity is an event */
        while (c.heap_n > 0 && c.heap[0].time == now) {
            end_event e = heap_pop(c.heap, &c.heap_n);
            int64_t j = e.job;
            finish(&c, j, e.first_node, now);
            if (queue == EASY) {
                int64_t at = by_end_position(by_end, by_end_n, c.started[j] + requested[j], j);
                memmove(&by_end[at], &by_end[at + 1], sizeof(by_end_entry) * (size_t)(by_end_n - at - 1));
                by_end_n--;
            } else if (queue == CONSERVATIVE) {
                if (profile_advance(&plan, now) < 0) { status = plan.error; goto done; }
                double planned_end = c.started[j] + requested[j];
                if (now < planned_end) {        /* ended before its requested time: give the rest back */
                    if (profile_change(&plan, now, planned_end, (double)procs[j]) < 0) { status = plan.error; goto done; }
                    compress = 1;
                }
            }
        }
        while (arrived < jobs && submit[arrived] == now) {
            if (queue == CONSERVATIVE) {
                if (!have_plan) {
                    if (profile_init(&plan, c.free_count, now) < 0) { status = -1; goto done; }
                    have_plan = 1;
                }
                if (profile_advance(&plan, now) < 0) { status = plan.error; goto done; }
                double size = (double)procs[arrived];
                double found = profile_earliest(&plan, size, requested[arrived], now, INFINITY);
                if (isnan(found)) { status = -2; goto done; }
                if (profile_change(&plan, found, found + requested[arrived], -size) < 0) { status = plan.error; goto done; }
                reserved_s[arrived] = found;
                reservation_insert(by_reservation, &by_reservation_n, found, arrived);
            }
            waiting[q_tail++] = arrived++;
        }
        if (queue == CONSERVATIVE) {
            if (!have_plan) continue;
            if (profile_advance(&plan, now) < 0) { status = plan.error; goto done; }
            if (compress) {       /* every waiting job, in arrival order, to its earliest slot */
                compress = 0;
                /* the plan starts at now (advanced): a start before old is the stairs' question */
                int from_start = upper_bound(plan.times, plan.n, now) - 1 <= 0;
                stairs.valid = 0;
                for (int64_t b = 0; b < n_built; b++) runs[built[b]].built = 0;
                n_built = 0;
                moved.n = 0;
                /* with few jobs waiting the searches are short: the stairs would cost more than they spare */
                int stairs_worth = q_tail - q_head > RUN_STAIRS_FROM;
                for (int64_t w = q_head; w < q_tail; w++) {
                    int64_t j = waiting[w];
                    double old = reserved_s[j], size = (double)procs[j];
                    if (old <= now) continue;
                    if (from_start) {
                        if (!stairs.valid && stairs_build(&stairs, &plan) < 0) { status = -1; goto done; }
                        if (!stairs_may_start_before(&stairs, size, old)) continue;
                    } else if (!profile_may_start_before(&plan, size, now, old)) continue;
                    double after = now;   /* no earlier start comes before it */
                    int64_t at_old = -1;  /* the first step at or after old, once found */
                    run_stairs *learnt = NULL;
                    if (from_start && stairs_worth) {
                        /* a window wholly in a run of steps freeing size starts no earlier than the
                         * stairs' first lasting its duration; one running into the job's own slot holds
                         * the step before old and starts no earlier than the run holding that step */
                        run_stairs *r = &runs[procs[j]];
                        if (!r->built) {
                            run_stairs_start(r, now);
                            r->applied = moved.n;
                            built[n_built++] = procs[j];
                        } else if (run_stairs_update(r, &moved, &plan, size, now) < 0) { status = -1; goto done; }
                        double limit = old;       /* a start from here on is no earlier */
                        at_old = lower_bound(plan.times, plan.n, old);
                        int64_t k = at_old - 1;
                        int into_own = k >= 0 && plan.free[k] >= size;
                        if (into_own) {
                            while (k > 0 && plan.free[k - 1] >= size) k--;
                            limit = plan.times[k] > now ? plan.times[k] : now;
                        } else {
                            learnt = r;   /* what the search finds bounds the stairs */
                        }
                        double first = run_stairs_first(r, requested[j]);
                        if (first == INFINITY && r->upto < limit) {
                            if (run_stairs_extend(r, &plan, size, now, requested[j], limit) < 0) { status = -1; goto done; }
                            first = run_stairs_first(r, requested[j]);
                        }
                        if (into_own && limit < first) first = limit;
                        if (!(first < old)) continue;
                        if (first > after) after = first;
                    }
                    double found = profile_earliest_move(&plan, size, requested[j], after, old, at_old);
                    if (plan.error) { status = plan.error; goto done; }
                    if (learnt && run_stairs_cap(learnt, after, isnan(found) ? old : found, requested[j]) < 0) {
                        status = -1; goto done;
                    }
                    if (isnan(found)) continue;      /* no earlier slot: the job keeps the one it has */
                    if (profile_change(&plan, old, old + requested[j], size) < 0) { status = plan.error; goto done; }
                    double given_most = plan.last_most;
                    if (profile_change(&plan, found, found + requested[j], -size) < 0) { status = plan.error; goto done; }
                    if (stairs.valid) stairs_given(&stairs, given_most, old);
                    if (n_built > 0 && moved_log_add(&moved, old, requested[j], given_most) < 0) {
                        status = -1; goto done;
                    }
                    reserved_s[j] = found;
                    moved_jobs[moved_n].start = found; moved_jobs[moved_n].job = j; moved_n++;
                }
                if (moved_n > 0) {
                    reservations_moved(by_reservation, by_reservation_n, reserved_s, moved_jobs, moved_n, due);
                    moved_n = 0;
                }
            }
            int64_t due_n = 0, taken = 0;
            while (taken < by_reservation_n && by_reservation[taken].start <= now) due[due_n++] = by_reservation[taken++];
            if (taken > 0) {
                memmove(by_reservation, &by_reservation[taken], sizeof(reservation) * (size_t)(by_reservation_n - taken));
                by_reservation_n -= taken;
            }
            /* jobs planned for no time first (they hold nothing in the plan), else in reserved order */
            for (int pass = 0; pass < 2; pass++) {
                for (int64_t d = 0; d < due_n; d++) {
                    int64_t j = due[d].job;
                    if ((requested[j] > 0) != pass) continue;
                    if ((double)procs[j] > c.free_count) {      /* late: waits for nodes at this instant */
                        reservation_insert(by_reservation, &by_reservation_n, due[d].start, j);
                        continue;
                    }
                    int64_t at = job_position(&waiting[q_head], q_tail - q_head, j) + q_head;
                    memmove(&waiting[at], &waiting[at + 1], sizeof(int64_t) * (size_t)(q_tail - at - 1));
                    q_tail--;
                    start(&c, j, now);
                }
            }
            continue;
        }
        if (queue == FCFS) {
            while (q_head < q_tail && (double)procs[waiting[q_head]] <= c.free_count) start(&c, waiting[q_head++], now);
            continue;
        }
        while (q_head < q_tail && (double)procs[waiting[q_head]] <= c.free_count) {
            int64_t j = waiting[q_head++];
            start(&c, j, now);
            double end = now + requested[j];
            int64_t at = by_end_position(by_end, by_end_n, end, j);
            memmove(&by_end[at + 1], &by_end[at], sizeof(by_end_entry) * (size_t)(by_end_n - at));
            by_end[at].end = end; by_end[at].job = j; by_end_n++;
        }
        if (q_head == q_tail) continue;
        if (q_head > 4096 && q_head * 2 > q_tail) {    /* reuse the front of the buffer */
            memmove(waiting, &waiting[q_head], sizeof(int64_t) * (size_t)(q_tail - q_head));
            q_tail -= q_head; q_head = 0;
        }
        int64_t head = waiting[q_head];
        int reserved = have_cache && cache_head == head && cache_finished == c.finished_count;
        int64_t i = q_head + 1;
        while (i < q_tail && c.free_count > 0) {
            int64_t j = waiting[i];
            double size = (double)procs[j];
            if (size > c.free_count) { i++; continue; }
            if (!reserved) {                          /* the head's shadow time and extra processors */
                double available = c.free_count, need = (double)procs[head];
                int64_t k = 0;
                for (; k < by_end_n; k++) {
                    available += (double)procs[by_end[k].job];
                    if (available >= need) break;
                }
                if (k == by_end_n) { status = -2; goto done; }
                shadow = by_end[k].end;
                extra = available - need;
                reserved = 1;
            }
            if (now + requested[j] > shadow) {
                if (size > extra) { i++; continue; }
                extra -= size;
            }
            memmove(&waiting[i], &waiting[i + 1], sizeof(int64_t) * (size_t)(q_tail - i - 1));
            q_tail--;
            start(&c, j, now);
            double end = now + requested[j];
            int64_t at = by_end_position(by_end, by_end_n, end, j);
            memmove(&by_end[at + 1], &by_end[at], sizeof(by_end_entry) * (size_t)(by_end_n - at));
            by_end[at].end = end; by_end[at].job = j; by_end_n++;
        }
        if (reserved) { have_cache = 1; cache_head = head; cache_finished = c.finished_count; }
    }
done:
    *series_len = c.ledger.series_len;
    ledger_scalars(&c.ledger, scalars);
    free(c.free_node); free(c.heap); free(waiting); free(by_end); free(c.started); free(c.next_node);
    free(plan.times); free(plan.free); free(plan.block_first); free(plan.block_min); free(plan.block_max); free(stairs.free); free(stairs.time); free(reserved_s); free(by_reservation); free(due); free(moved_jobs);
    if (runs) for (int64_t q = 0; q <= n_nodes; q++) { free(runs[q].start); free(runs[q].lasts); free(runs[q].scratch); }
    free(runs); free(built); free(moved.at);
    return status;
}

/* For the tests.  The path the conservative plan reads a count's steps by: `choice` -1 asks, 0 sets
 * the SSE2 path, 1 the AVX2 path where the processor has it; returns the path then in use (1: AVX2). */
int pool_steps_avx2(int choice) {
#ifdef STEPS_AVX2
    if (has_avx2 < 0) has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (choice == 0) has_avx2 = 0;
    if (choice == 1) has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    return has_avx2;
#else
    (void)choice;
    return 0;
#endif
}

/* For the tests: reservations (start, job) put in order as the cores put the jobs a compression
 * moved, through `scratch` (room for n). */
void pool_reservations_sort(reservation *a, int64_t n, reservation *scratch) {
    reservations_sort(a, n, scratch);
}

/* For the tests: the conservative plan from `free_now` at `now`, after each op in turn (kind 0: the
 * plan advanced to a[k]; kind 1: c[k] processors added over [a[k], b[k])), then advanced to `until`;
 * its steps written to out_times/out_free (room for `room`).  Returns the number of steps, -1 with no
 * memory or room, or the plan's error. */
int64_t pool_plan_steps(int64_t ops, const int32_t *kind, const double *a, const double *b, const double *c,
                        double free_now, double now, double until, double *out_times, double *out_free, int64_t room) {
    count_profile p;
    memset(&p, 0, sizeof p);
    int64_t n = -1;
    if (profile_init(&p, free_now, now) < 0) goto done;
    for (int64_t k = 0; k < ops; k++) {
        int failed = kind[k] == 0 ? profile_advance(&p, a[k]) : profile_change(&p, a[k], b[k], c[k]);
        if (failed < 0) { n = p.error ? p.error : -1; goto done; }
    }
    if (profile_advance(&p, until) < 0) { n = p.error ? p.error : -1; goto done; }
    if (p.n > room) goto done;
    memcpy(out_times, p.times, sizeof(double) * (size_t)p.n);
    memcpy(out_free, p.free, sizeof(double) * (size_t)p.n);
    n = p.n;
done:
    free(p.times); free(p.free); free(p.block_first); free(p.block_min); free(p.block_max);
    return n;
}

/* For the tests: the stairs of count `processors` read from a plan of n steps (times ascending from
 * `now`, free counts) until a run lasting `duration` or one ending at or after `before` is in, as a
 * compression reads them from the plan's start; written to out_start/out_lasts (room for `room`,
 * at least n), *out_upto where the reading stopped.  Returns the number of stairs, -1 with no memory. */
int64_t pool_count_stairs(int64_t n, double *times, double *free_counts, double processors, double now,
                          double duration, double before, double *out_start, double *out_lasts, double *out_upto,
                          int64_t room) {
    count_profile p;
    memset(&p, 0, sizeof p);
    p.times = times; p.free = free_counts; p.n = n;
    run_stairs r;
    memset(&r, 0, sizeof r);
    run_stairs_start(&r, now);
    int64_t stairs = -1;
    if (run_stairs_extend(&r, &p, processors, now, duration, before) == 0 && r.n <= room) {
        memcpy(out_start, r.start, sizeof(double) * (size_t)r.n);
        memcpy(out_lasts, r.lasts, sizeof(double) * (size_t)r.n);
        *out_upto = r.upto;
        stairs = r.n;
    }
    free(r.start); free(r.lasts);
    return stairs;
}
