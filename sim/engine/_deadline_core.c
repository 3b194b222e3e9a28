/* The deadline queue's core on a processor pool, compiled: admission, reservations on nodes,
 * compression and the energy ledger.
 *
 * The definition is the replay's general loop under the deadline queue (deadline_queue.py on the plan
 * profile, the rules of allocation/placement.py; the rules as this file takes them are in
 * deadline_core.py's module text); this file makes the same decisions with the same double-precision
 * operations (no fused multiply-add: built with -ffp-contract=off), so its results are identical to
 * the last bit (tests/test_deadline_core.py).  Where the definition looks at
 * every node for a waiting job's earlier start, this file first skips what cannot change the
 * answer (the free counts, the reservations taken out since the job last looked, the gaps ending
 * before the first possible start, the buckets of holes and blocks of holes too short for the job:
 * see freed_before and earliest_move), each argued above its code.  The node plans are in
 * _deadline_node_plans.h, the index of their holes by time in _deadline_gap_index.h.
 * It is loaded with ctypes (no Python API is used): deadline_run() takes the jobs as arrays and
 * fills arrays the caller allocated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "_pool_ledger.h"
#include "_deadline_node_plans.h"

#define BALANCED 0
#define BESTFIT 1
#define MINIDLE 2
#define FIRSTFIT 3
#define SCALE 1e6

typedef struct { double tail; int64_t node; } ranked;        /* a node and its tail */
typedef struct { double g0, g1; int64_t node; } gap;         /* a node free over [g0, g1) */
/* a reservation [from, to) taken out of the plan at `now`, and over its nodes the free gaps [g0, g1)
 * holding it then: gap_from the least max(now, g0), gap_to the greatest g1, room the greatest
 * g1 - max(now, g0) (rounded up: any p with max(now, g0) + p <= g1 is at most room) */
typedef struct { double from, to, gap_from, gap_to, room; } freed;
/* the log of reservations taken out in blocks of FREED_BLOCK entries by number, block b holding
 * entries [b FREED_BLOCK, (b + 1) FREED_BLOCK), each summarised as one freed: the least `from` and
 * `gap_from`, the greatest `to`, `gap_to` and `room` of its entries (freed_before passes over a block
 * that no entry of could let a job through) */
#define FREED_BLOCK 16

/* np.round(score, 6): times 10**6, rounded half to even, divided */
static double rounded(double score) {
    return nearbyint(score * SCALE) / SCALE;
}

static int by_node(const void *a, const void *b) {
    const int32_t *x = a, *y = b;
    return (*x > *y) - (*x < *y);
}

/* nodes (distinct, each below n_nodes) ascending: insertion sort while short, where qsort's calls
 * through a pointer cost more than the moves; else each marked in `marks` (n_nodes bytes, all 0,
 * left so) and read back in order when that is at most 16 per node sorted; else qsort */
static void sort_nodes(int32_t *nodes, int64_t n, unsigned char *marks, int64_t n_nodes) {
    if (n <= 16) {
        for (int64_t i = 1; i < n; i++) {
            int32_t x = nodes[i];
            int64_t k = i;
            while (k > 0 && nodes[k - 1] > x) { nodes[k] = nodes[k - 1]; k--; }
            nodes[k] = x;
        }
    } else if (n_nodes <= 16 * n) {
        for (int64_t i = 0; i < n; i++) marks[nodes[i]] = 1;
        int64_t k = 0;
        for (int64_t node = 0; node < n_nodes; node++) {
            if (marks[node]) { marks[node] = 0; nodes[k++] = (int32_t)node; }
        }
    } else {
        qsort(nodes, (size_t)n, sizeof(int32_t), by_node);
    }
}

/* (tail, node) before (tail, node) by_tail_low (high: equal tails by node descending) */
static int ranked_before(const ranked *x, const ranked *y, int high) {
    if (x->tail != y->tail) return x->tail < y->tail;
    return high ? x->node > y->node : x->node < y->node;
}

/* sort by ranked_before (a total order: nodes differ), insertion sort in runs of 16 merged bottom up
 * through `tmp` (as many entries): qsort's calls through a pointer cost more on these short arrays */
static void sort_ranked(ranked *a, ranked *tmp, int64_t n, int high) {
    for (int64_t lo = 0; lo < n; lo += 16) {
        int64_t hi = lo + 16 < n ? lo + 16 : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            ranked x = a[i];
            int64_t k = i;
            while (k > lo && ranked_before(&x, &a[k - 1], high)) { a[k] = a[k - 1]; k--; }
            a[k] = x;
        }
    }
    for (int64_t width = 16; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, k = mid, o = lo;
            while (i < mid && k < hi) tmp[o++] = ranked_before(&a[k], &a[i], high) ? a[k++] : a[i++];
            while (i < mid) tmp[o++] = a[i++];
            while (k < hi) tmp[o++] = a[k++];
        }
        memcpy(a, tmp, sizeof(ranked) * (size_t)n);
    }
}

/* a[0 .. n) reordered so that a[0 .. k) hold its k first by ranked_before (0 <= k <= n), in no
 * order: partitions about a middle entry, keeping every entry before `lo` ahead of every one from `lo`
 * on and every one from `hi` on behind every one before `hi`, lo <= k <= hi, until they meet.  A total
 * order (nodes differ), so the k entries are those a whole sort puts first. */
static void select_ranked(ranked *a, int64_t n, int64_t k, int high) {
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2, at = lo;
        ranked pivot = a[mid];
        a[mid] = a[hi - 1];
        for (int64_t i = lo; i < hi - 1; i++) {
            if (ranked_before(&a[i], &pivot, high)) { ranked x = a[i]; a[i] = a[at]; a[at++] = x; }
        }
        a[hi - 1] = a[at]; a[at] = pivot;       /* before `at`: ahead of the pivot; after it: behind */
        if (at == k) return;
        if (at < k) lo = at + 1; else hi = at;
    }
}

/* The runs of the free counts' steps freeing at least m nodes (m one count), as far as read: run r
 * is steps [start[r], end[r]) each freeing >= m, end[r] the next freeing fewer (RUNS_TO_END: none);
 * longest[r] the most of `length` over runs 0..r, where a run's length is its time (the end step's
 * time less the start's) raised by enough to cover both times' rounding (see runs_read).  Read while
 * the steps were as after `seen` changes of epoch `epoch` (see core.changes); read on from step `next`. */
typedef struct {
    int64_t *start, *end;
    double *longest;
    int64_t n, cap, next;
    int64_t seen;
    uint64_t epoch;
} count_runs;
#define RUNS_TO_END INT64_MAX

typedef struct {
    /* inputs */
    const double *submit, *requested, *run_for, *deadline, *limit;
    const int64_t *procs;
    int64_t n_nodes, jobs;
    int rule;
    /* the plan */
    double *res_start, *res_end;
    int32_t *held;                    /* job j's nodes: held[offset[j] .. offset[j] + procs[j]) */
    int64_t *offset;
    int64_t planned;                  /* reservations held over all nodes */
    /* per node the union of its reservations as disjoint spans, touching ones merged: the node's
     * plan (reservations on a node never overlap: the core stops with -4 if two ever did) */
    span_list *busy;
    gap_index gaps_by_time;           /* every node's holes between two spans (_deadline_gap_index.h) */
    unsigned char *own_marks;         /* per node: 1 while a search gives back the job's slot on it */
    /* every reservation taken out of the plan, in order (a job ended, or moved), and per job how
     * many had been when it last found no earlier start (-1: not since it was planned there) */
    freed *outs_at, *outs_blocks;     /* the log, and its blocks' summaries (see FREED_BLOCK) */
    int64_t outs, outs_cap;
    int64_t *checked;
    /* free nodes over the whole pool as a step function from now on: free[k] from times[k] until the
     * next (a necessary test before looking at every node: a start needs m free nodes throughout) */
    double *times, *free;
    int64_t steps, steps_cap;
    /* the counts' changes since the steps were last renumbered (count_advance starts a new epoch):
     * each one's first time, from which on it may add a breakpoint or change a step's count */
    double *changes;
    int64_t n_changes, changes_cap;
    uint64_t epoch;
    count_runs *runs;                 /* per count m (1 .. n_nodes) */
    int64_t *running_on;              /* per node: its running job, -1: none */
    /* scratch */
    ranked *rank, *rank_tmp;
    double *tails, *cum, *starts;
    gap *gaps, *gaps_tmp, *by_g1;
    int64_t gaps_cap;
    int32_t *fitting;
    unsigned char *marks;             /* per node, 0 between calls of sort_nodes */
    pool_ledger ledger;
    double *started;
    end_event *heap;
    int64_t heap_n, sequence;
} core;

/* index of a breakpoint at t >= times[0] (a copy of the step before when new); -1: no memory */
static int64_t count_breakpoint(core *c, double t) {
    int64_t lo = 0, hi = c->steps;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (c->times[mid] < t) lo = mid + 1; else hi = mid; }
    if (lo < c->steps && c->times[lo] == t) return lo;
    if (c->steps == c->steps_cap) {
        int64_t cap = 2 * c->steps_cap;
        if (grow_doubles_pair(&c->times, &c->free, cap) < 0) return -1;
        c->steps_cap = cap;
    }
    memmove(&c->times[lo + 1], &c->times[lo], sizeof(double) * (size_t)(c->steps - lo));
    memmove(&c->free[lo + 1], &c->free[lo], sizeof(double) * (size_t)(c->steps - lo));
    c->times[lo] = t;
    c->free[lo] = c->free[lo - 1];        /* lo > 0: t is after the first breakpoint */
    c->steps++;
    return lo;
}

/* step i (i > 0) removed: step i - 1 goes on until the next */
static void count_drop(core *c, int64_t i) {
    memmove(&c->times[i], &c->times[i + 1], sizeof(double) * (size_t)(c->steps - i - 1));
    memmove(&c->free[i], &c->free[i + 1], sizeof(double) * (size_t)(c->steps - i - 1));
    c->steps--;
}

/* add `nodes` free nodes over [start, end) (the part from now on) */
static int count_change(core *c, double start, double end, double nodes) {
    if (start < c->times[0]) start = c->times[0];
    if (!(end > start)) return 0;
    int64_t i = count_breakpoint(c, start);
    if (i < 0) return -1;
    int64_t k = count_breakpoint(c, end);
    if (k < 0) return -1;
    for (int64_t at = i; at < k; at++) c->free[at] += nodes;
    /* a breakpoint at either end that now frees as many as the step before is dropped (the same step
     * function, fewer steps to move and read); only steps from `start` on are renumbered */
    if (c->free[k] == c->free[k - 1]) count_drop(c, k);
    if (i > 0 && c->free[i] == c->free[i - 1]) count_drop(c, i);
    if (c->n_changes == c->changes_cap) {
        int64_t cap = c->changes_cap ? 2 * c->changes_cap : 64;
        double *grown = grown_array(c->changes, cap, sizeof(double));
        if (!grown) return -1;
        c->changes = grown; c->changes_cap = cap;
    }
    c->changes[c->n_changes++] = start;
    return 0;
}

/* forget the steps before now and merge steps that free as many nodes */
static void count_advance(core *c, double now) {
    int64_t i = 0;
    while (i + 1 < c->steps && c->times[i + 1] <= now) i++;
    int64_t kept = 1;
    c->times[0] = now; c->free[0] = c->free[i];
    for (int64_t k = i + 1; k < c->steps; k++) {
        if (c->free[k] != c->free[kept - 1]) { c->times[kept] = c->times[k]; c->free[kept] = c->free[k]; kept++; }
    }
    c->steps = kept;
    c->epoch++;                       /* steps dropped and merged: their numbers changed */
    c->n_changes = 0;
}

/* first index whose step begins at or after t (bisect_left on the times) */
static int64_t step_from(const core *c, double t) {
    int64_t lo = 0, hi = c->steps;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (c->times[mid] < t) lo = mid + 1; else hi = mid; }
    return lo;
}

/* the runs of steps freeing at least m brought up to date, then read on until every run starting
 * before step `upto` is known; -1: no memory.  A change from time s (count_change: breakpoints added
 * at s and at its end, counts changed between) leaves every step before s as it was, with its
 * number: a run whose end step lies before the earliest change since it was read is kept, and the
 * reading goes on after the last one kept. */
static int runs_read(core *c, count_runs *runs, double m, int64_t upto) {
    const double *times = c->times, *free_ = c->free;
    if (runs->epoch != c->epoch || c->n_changes - runs->seen > c->steps) {
        runs->n = 0; runs->next = 0; runs->epoch = c->epoch;
    } else if (runs->seen < c->n_changes) {
        double changed = c->changes[runs->seen];
        for (int64_t k = runs->seen + 1; k < c->n_changes; k++) if (c->changes[k] < changed) changed = c->changes[k];
        int64_t lo = 0, hi = runs->n;       /* the first run whose end step is at or after the change */
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (runs->end[mid] < c->steps && times[runs->end[mid]] < changed) lo = mid + 1; else hi = mid;
        }
        runs->n = lo;                       /* and the steps read after it, which may have changed */
        runs->next = lo > 0 ? runs->end[lo - 1] + 1 : 0;
    }
    runs->seen = c->n_changes;
    int64_t steps = c->steps;
    while (runs->next < upto && runs->next < steps) {
        int64_t i = runs->next;
        while (i < steps && free_[i] < m) i++;
        if (i == steps) { runs->next = steps; break; }
        int64_t k = i + 1;
        while (k < steps && !(free_[k] < m)) k++;
        if (runs->n == runs->cap) {
            int64_t cap = runs->cap ? 2 * runs->cap : 16;
            int64_t *start = grown_array(runs->start, cap, sizeof(int64_t));
            if (!start) return -1;
            runs->start = start;
            int64_t *end = grown_array(runs->end, cap, sizeof(int64_t));
            if (!end) return -1;
            runs->end = end;
            double *longest = grown_array(runs->longest, cap, sizeof(double));
            if (!longest) return -1;
            runs->longest = longest;
            runs->cap = cap;
        }
        /* a window from a = times[i] of p ends within the run exactly when a + p <= b = times[k] as
         * rounded: then b - a >= p - u(|a| + |p|) (u = 2^-53), and b - a as rounded loses at most
         * u(|a| + |b|) more, so the length with (|a| + |b|) 1e-15 + 1e-300 added (the last for results
         * below the normal doubles) is at least p - |p| 1e-15: no run holding a window is below that */
        double length = INFINITY;
        int64_t end = RUNS_TO_END;
        if (k < steps) {
            end = k;
            double a = times[i], b = times[k];
            length = b - a + (fabs(a) + fabs(b)) * 1e-15 + 1e-300;
            if (length != length) length = INFINITY;       /* inf - inf: keep it a candidate */
        }
        int64_t r = runs->n++;
        runs->start[r] = i; runs->end[r] = end;
        runs->longest[r] = r > 0 && runs->longest[r - 1] > length ? runs->longest[r - 1] : length;
        runs->next = k + 1;         /* step k frees fewer (or k == steps): the next run starts after it */
    }
    return 0;
}

/* whether some step in [now, bound) begins a window of p over which job j (its own slot given back)
 * finds m free nodes at every step: needed for any start before `bound` on m nodes (bound <= its own).
 * *first: the first such step's time, before which no start holds j (a start t holds it on m nodes
 * only if the last step at or before t begins such a window: the same free counts until t, and its
 * window ends no later).  1: there is one, 0: none, -1: no memory.
 *
 * The windows tried are those from the first step of each run of steps freeing m (a window from a
 * later step of the run ends later and meets the same step freeing fewer), starting before bound.  A
 * run ending before j's own slot holds its window exactly when the window ends by the run's end step;
 * runs shorter than p less rounding are passed over with one binary search on the runs' longest so
 * far.  The one run that may reach j's slot is read through it: in the slot a step frees free + m
 * with j's nodes given back, fewer than m exactly when free < 0 (counts are whole numbers, exact as
 * doubles), and after it fewer than m again. */
static int count_may_move(core *c, int64_t j, double bound, double *first) {
    double m = (double)c->procs[j], p = c->requested[j], old = c->res_start[j], own_end = c->res_end[j];
    int64_t at_bound = step_from(c, bound), at_old = step_from(c, old), at_end = step_from(c, own_end);
    count_runs *runs = &c->runs[c->procs[j]];
    if (runs_read(c, runs, m, at_bound) < 0) return -1;
    const double *times = c->times, *free_ = c->free;
    const int64_t *start = runs->start, *end = runs->end;
    /* the runs starting before bound: [0, candidates) */
    int64_t lo = 0, hi = runs->n;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (start[mid] < at_bound) lo = mid + 1; else hi = mid; }
    int64_t candidates = lo, within = candidates;
    if (within > 0 && end[within - 1] >= at_old) within--;     /* the last may reach j's slot */
    double least = p - fabs(p) * 1e-15;
    if (least != least) least = -INFINITY;
    lo = 0; hi = within;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (runs->longest[mid] < least) lo = mid + 1; else hi = mid; }
    for (int64_t r = lo; r < within; r++) {
        if (!(times[end[r]] < times[start[r]] + p)) { *first = times[start[r]]; return 1; }
    }
    if (within == candidates) return 0;
    int64_t i = start[within];
    double window_end = times[i] + p;
    int64_t k = i + 1;
    while (k < at_old && times[k] < window_end) k++;            /* these free m: the run's own */
    if (k == at_old) {
        while (k < at_end && times[k] < window_end && !(free_[k] < 0.0)) k++;
        if (k == at_end) while (k < c->steps && times[k] < window_end && !(free_[k] < m)) k++;
    }
    if (k == c->steps || !(times[k] < window_end)) { *first = times[i]; return 1; }
    return 0;                   /* a window from a later step starts in or after j's slot: past bound */
}

static int plan_add(core *c, int64_t j, double start) {
    c->res_start[j] = start;
    c->res_end[j] = start + c->requested[j];
    if (!(c->res_end[j] > start)) return 0;     /* start + p rounded to start (1e300 + 1): it holds nothing */
    int32_t *nodes = &c->held[c->offset[j]];
    for (int64_t k = 0; k < c->procs[j]; k++) {
        int status = busy_add(c->busy, &c->gaps_by_time, nodes[k], start, c->res_end[j]);
        if (status < 0) return status;
    }
    c->planned += c->procs[j];
    return count_change(c, start, c->res_end[j], -(double)c->procs[j]);
}

/* log entry k (complete) taken into its block's summary; the first of a block begins it */
static void freed_summarised(core *c, int64_t k) {
    const freed *out = &c->outs_at[k];
    freed *block = &c->outs_blocks[k / FREED_BLOCK];
    if (k % FREED_BLOCK == 0) { *block = *out; return; }
    if (out->from < block->from) block->from = out->from;
    if (out->to > block->to) block->to = out->to;
    if (out->gap_from < block->gap_from) block->gap_from = out->gap_from;
    if (out->gap_to > block->gap_to) block->gap_to = out->gap_to;
    if (out->room > block->room) block->room = out->room;
}

static int plan_remove(core *c, int64_t j, double now) {
    if (!(c->res_end[j] > c->res_start[j])) return 0;
    if (c->outs == c->outs_cap) {
        int64_t cap = c->outs_cap ? 2 * c->outs_cap : 64;
        freed *grown = grown_array(c->outs_at, cap, sizeof(freed));
        if (!grown) return -1;
        c->outs_at = grown;
        grown = grown_array(c->outs_blocks, cap / FREED_BLOCK, sizeof(freed));
        if (!grown) return -1;
        c->outs_blocks = grown; c->outs_cap = cap;
    }
    freed *out = &c->outs_at[c->outs++];
    out->from = c->res_start[j]; out->to = c->res_end[j];
    out->gap_from = INFINITY; out->gap_to = -INFINITY; out->room = -INFINITY;
    int32_t *nodes = &c->held[c->offset[j]];
    for (int64_t k = 0; k < c->procs[j]; k++) {
        int64_t next;                 /* the first span after the slot's start, once it is taken out */
        int status = busy_remove(c->busy, &c->gaps_by_time, nodes[k], c->res_start[j], c->res_end[j], &next);
        if (status < 0) return status;
        const span_list *spans = &c->busy[nodes[k]];
        double g0 = next > 0 && spans->at[next - 1].end > now ? spans->at[next - 1].end : now;
        double g1 = next < spans->n ? spans->at[next].start : INFINITY;
        double room = hole_room(g0, g1);
        if (g0 < out->gap_from) out->gap_from = g0;
        if (g1 > out->gap_to) out->gap_to = g1;
        if (room > out->room) out->room = room;
    }
    freed_summarised(c, c->outs - 1);
    c->planned -= c->procs[j];
    return count_change(c, c->res_start[j], c->res_end[j], (double)c->procs[j]);
}

/* from when on node n is free for ever: the end of its last reservation (of its last busy span, -INFINITY
 * when none), now when that is past */
static double tail_of(const core *c, int64_t n, double now) {
    double last_end = c->busy[n].last_end;
    return last_end > now ? last_end : now;
}

/* the start and nodes of a placement in the append view (_choose_append) */
static double choose_append(core *c, int64_t j, double now) {
    int64_t n_nodes = c->n_nodes, m = c->procs[j];
    int rule = c->rule;
    double p = c->requested[j], deadline = c->deadline[j];
    ranked *rank = c->rank;
    for (int64_t n = 0; n < n_nodes; n++) { rank[n].tail = c->tails[n]; rank[n].node = n; }
    sort_ranked(rank, c->rank_tmp, n_nodes, rule != BALANCED);
    double earliest = rank[m - 1].tail, start = earliest;
    int64_t count = 0;
    double *starts = c->starts;
    starts[count++] = earliest;
    if (deadline == deadline) {
        int64_t k = m - 1;
        while (k < n_nodes && rank[k].tail == earliest) k++;
        while (k < n_nodes) {
            double t = rank[k].tail;
            starts[count++] = t;
            while (k < n_nodes && rank[k].tail == t) k++;
        }
        int64_t kept = 0;
        for (int64_t i = 0; i < count; i++) if (starts[i] + p <= deadline) starts[kept++] = starts[i];
        if (kept == 0) { starts[0] = earliest; kept = 1; }
        count = kept;
    }
    if (count == 1 || rule == FIRSTFIT) {
        start = starts[0];
    } else {
        double *cum = c->cum, total = 0.0;
        cum[0] = 0.0;
        for (int64_t k = 0; k < n_nodes; k++) { total += rank[k].tail - now; cum[k + 1] = total; }
        double best_score = 0.0;
        int64_t at = 0;
        for (int64_t i = 0; i < count; i++) {
            double s = starts[i];
            while (at < n_nodes && rank[at].tail <= s) at++;    /* tails <= s: bisect_right */
            double tail_sum = rule == BALANCED ? cum[m] : cum[at] - cum[at - m], score;
            if (rule == BALANCED) score = tail_sum;
            else if (rule == BESTFIT) score = -tail_sum;
            else score = (double)m * (s - now) - tail_sum;
            score = rounded(score);
            if (i == 0 || score < best_score) { best_score = score; start = s; }   /* ties: the earliest */
        }
    }
    int32_t *nodes = &c->held[c->offset[j]];
    if (rule == BALANCED) {
        for (int64_t k = 0; k < m; k++) nodes[k] = (int32_t)rank[k].node;
    } else if (rule == FIRSTFIT) {
        int64_t k = 0;
        for (int64_t n = 0; n < n_nodes && k < m; n++) if (c->tails[n] <= start) nodes[k++] = (int32_t)n;
    } else {
        int64_t k = 0;
        while (k < n_nodes && rank[k].tail <= start) k++;
        for (int64_t i = 0; i < m; i++) nodes[i] = (int32_t)rank[k - m + i].node;
    }
    sort_nodes(nodes, m, c->marks, c->n_nodes);
    return start;
}

/* a node's busy piece [s, e) in the scan of its free gaps from now (g0: where the current gap began):
 * records a gap [g0, s) that holds p; 1 when no gap begun before `bound` follows */
static inline int busy_piece(double s, double e, double *g0, double p, double bound, gap *gaps, int64_t *count,
                             int64_t n) {
    if (s > *g0) {
        if (*g0 + p <= s) { gaps[*count].g0 = *g0; gaps[*count].g1 = s; gaps[*count].node = n; (*count)++; }
        if (s >= bound) { *g0 = INFINITY; return 1; }
    }
    if (e > *g0) *g0 = e;
    return *g0 >= bound;
}

/* sort gaps by g0 (equal ones in any order: a set is kept), merging bottom up through `tmp` */
static void sort_gaps(gap *a, gap *tmp, int64_t n) {
    for (int64_t lo = 0; lo < n; lo += 8) {
        int64_t hi = lo + 8 < n ? lo + 8 : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            gap x = a[i];
            int64_t k = i;
            while (k > lo && a[k - 1].g0 > x.g0) { a[k] = a[k - 1]; k--; }
            a[k] = x;
        }
    }
    gap *from = a, *to = tmp;
    for (int64_t width = 8; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, k = mid, o = lo;
            while (i < mid && k < hi) to[o++] = from[k].g0 < from[i].g0 ? from[k++] : from[i++];
            while (i < mid) to[o++] = from[i++];
            while (k < hi) to[o++] = from[k++];
        }
        gap *swap = from; from = to; to = swap;
    }
    if (from != a) memcpy(a, from, sizeof(gap) * (size_t)n);
}

/* a min-heap of gaps by g1 */
static void g1_push(gap *heap, int64_t *n, gap item) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!(item.g1 < heap[parent].g1)) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

static void g1_pop(gap *heap, int64_t *n) {
    gap last = heap[--(*n)];
    int64_t i = 0, size = *n;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= size) break;
        if (child + 1 < size && heap[child + 1].g1 < heap[child].g1) child++;
        if (!(heap[child].g1 < last.g1)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (size > 0) heap[i] = last;
}

/* the free gaps [g0, g1) of node n, one of job j's, with its slot [old, own_end) given back: from
 * now, with g0 < bound and g1 > `first`, each holding p (g0 + p <= g1), added to gaps[*count..], read
 * from the node's busy spans (see earliest_move) */
static void own_node_gaps(span_list *list, int32_t n, double now, double p, double old, double own_end,
                          double bound, double first, gap *gaps, int64_t *count) {
    double g0 = now;
    int mine = 1;
    int64_t i = 0;
    /* from the gap ending after `first` (a span skipped that holds j's slot ends after old: no gap
     * before `bound` follows, as after the rest before old) */
    if (list->n > 0 && list->at[0].start <= first) {
        i = list->at[list->n - 1].start <= first ? list->n : span_after(list, first);
        if (i > 0 && list->at[i - 1].end > g0) g0 = list->at[i - 1].end;
    }
    while (g0 < bound && i < list->n) {
        /* a block of holes from hole i all shorter than p holds no gap, stops the scan where
         * its spans would (a span from `bound` on ends after it) and leaves g0 at its last
         * span's end; not when g0 lies before span i - 1's end (the rest of j's slot) or a
         * span of the block may hold j's slot (it ends after old) */
        if (i % HOLE_BLOCK == 0 && i > 0 && !(g0 < list->at[i - 1].end)) {
            int64_t block = i / HOLE_BLOCK, last = (i + HOLE_BLOCK < list->n ? i + HOLE_BLOCK : list->n) - 1;
            holes_ready(list, block);
            if (list->room[block] < p && !(mine && list->at[last].end > old)) {
                if (list->at[last].end > g0) g0 = list->at[last].end;
                i = last + 1;
                continue;
            }
        }
        double s = list->at[i].start, e = list->at[i].end;
        i++;
        if (mine && s <= old && own_end <= e) {      /* the span holding j's slot: the rest of it */
            mine = 0;
            if (s < old && busy_piece(s, old, &g0, p, bound, gaps, count, n)) break;
            if (own_end < e && busy_piece(own_end, e, &g0, p, bound, gaps, count, n)) break;
        } else if (busy_piece(s, e, &g0, p, bound, gaps, count, n)) {
            break;
        }
    }
    if (g0 < bound) { gaps[*count].g0 = g0; gaps[*count].g1 = INFINITY; gaps[*count].node = n; (*count)++; }
}

/* the earliest start before `bound` (at most job j's own start) at which m nodes hold it (its slot
 * given back), known to be no earlier than `first`: the start, or NAN when there is none; the fitting
 * nodes in c->fitting (ascending), their count in *fits.  The free gaps [g0, g1) from now with g0 <
 * bound that hold p (g0 + p <= g1), except gaps ending by `first` (none holds a start from `first`
 * on, and starts before `first` fit on fewer than m nodes anyway): on j's nodes from their spans,
 * j's own cut out; on the others the time before the first span (from now) and after the last one
 * from the node plans, and the holes between spans from the gap index, every bucket up to bound's
 * whose holes are all too short or end by `first` passed over.  Then the gaps by g0, the ones begun
 * by t kept while t + p <= g1 and t < g1 (both only grow with t, so a gap dropped once stays
 * dropped: a heap by g1 drops them) */
static double earliest_move(core *c, int64_t j, double now, double bound, double first, int64_t *fits) {
    int64_t m = c->procs[j], n_nodes = c->n_nodes, count = 0;
    double p = c->requested[j], old = c->res_start[j], own_end = c->res_end[j];
    gap *gaps = c->gaps;
    const int32_t *own = &c->held[c->offset[j]];
    int64_t owned = own_end > old ? m : 0;          /* a slot that rounds to nothing holds no node */
    unsigned char *own_marks = c->own_marks;
    for (int64_t k = 0; k < owned; k++) {
        own_marks[own[k]] = 1;
        own_node_gaps(&c->busy[own[k]], own[k], now, p, old, own_end, bound, first, gaps, &count);
    }
    for (int64_t n = 0; n < n_nodes; n++) {
        if (own_marks[n]) continue;
        const span_list *list = &c->busy[n];
        if (list->n > 0 && list->first_start > first && now + p <= list->first_start) {
            gaps[count].g0 = now; gaps[count].g1 = list->first_start; gaps[count].node = (int32_t)n; count++;
        }
        double tail = list->last_end > now ? list->last_end : now;
        if (tail < bound) { gaps[count].g0 = tail; gaps[count].g1 = INFINITY; gaps[count].node = (int32_t)n; count++; }
    }
    gap_index *index = &c->gaps_by_time;
    int64_t last = bucket_of(index, bound);
    if (last >= index->n_buckets) last = index->n_buckets - 1;
    while (index->low < last && index->bucket[index->low].n == 0) index->low++;
    int64_t read_from = -1;
    for (int64_t b = index->low; b <= last; b++) {
        if (b % GAP_BLOCK == 0) {
            if (index->block_room[b / GAP_BLOCK] < p || !(index->block_end[b / GAP_BLOCK] > first)) {
                b += GAP_BLOCK - 1;           /* no hole of the block's buckets holds the job */
                continue;
            }
            if (b + GAP_BLOCK - 1 <= last) read_from = b;   /* the whole block read: its bounds set */
        }
        if (!(index->most_room[b] < p || !(index->most_end[b] > first))) {
            const hole_entry *hole = index->bucket[b].at, *stop = hole + index->bucket[b].n;
            double most_room = -INFINITY, most_end = -INFINITY;
            for (; hole < stop; hole++) {
                double g0 = hole->g0 > now ? hole->g0 : now, g1 = hole->g1;
                if (hole->room > most_room) most_room = hole->room;
                if (g1 > most_end) most_end = g1;
                if (g0 < bound && g1 > first && g0 + p <= g1 && !own_marks[hole->node]) {
                    gaps[count].g0 = g0; gaps[count].g1 = g1; gaps[count].node = (int32_t)hole->node; count++;
                }
            }
            gap_bucket_read(index, b, most_room, most_end);
        }
        if (read_from >= 0 && b == read_from + GAP_BLOCK - 1) { gap_block_read(index, read_from); read_from = -1; }
    }
    for (int64_t k = 0; k < owned; k++) own_marks[own[k]] = 0;
    if (count < m) return NAN;
    /* now first: nodes free from now for p */
    int64_t at_now = 0;
    for (int64_t g = 0; g < count; g++) if (gaps[g].g0 == now && now + p <= gaps[g].g1 && now < gaps[g].g1) at_now++;
    if (at_now >= m) {
        int64_t f = 0;
        for (int64_t g = 0; g < count; g++)
            if (gaps[g].g0 == now && now + p <= gaps[g].g1 && now < gaps[g].g1) c->fitting[f++] = (int32_t)gaps[g].node;
        sort_nodes(c->fitting, f, c->marks, c->n_nodes);
        *fits = f;
        return now;
    }
    sort_gaps(gaps, c->gaps_tmp, count);
    gap *active = c->by_g1;
    int64_t n_active = 0, i = 0;
    while (i < count) {
        double t = gaps[i].g0;
        while (i < count && gaps[i].g0 == t) g1_push(active, &n_active, gaps[i++]);
        double tp = t + p;
        while (n_active > 0 && !(tp <= active[0].g1 && t < active[0].g1)) g1_pop(active, &n_active);
        if (n_active >= m) {
            for (int64_t a = 0; a < n_active; a++) c->fitting[a] = (int32_t)active[a].node;
            sort_nodes(c->fitting, n_active, c->marks, c->n_nodes);
            *fits = n_active;
            return t;
        }
    }
    return NAN;
}

/* For job j, which found no start before its own when it last looked (c->checked[j] reservations
 * had been taken out then): a bound before which any start it finds now lies (-INFINITY: none).
 * Since then the plan changed only by reservations added, which free nothing, and taken out.  A
 * start t in [now, old) that holds j now needs a node n that held it only after some of those were
 * taken out; the last of them on n, [from, to), overlapped [t, t + p): t < to, and from < t + p <= old
 * + p or from <= t < old.  Right after it was taken out only j's own slot on n could overlap [t, t + p)
 * (anything else would have been taken out later), so the free gap [g0, g1) it left on n held [t,
 * t + p), or ran into j's own slot: max(now, g0) <= t < old and max(now, g0) + p <= g1, or g1 >= old
 * (also when j's slot ends the span before: g0 >= old).  The bound is the latest `to` of those that
 * may be such a reservation, at most old. */
static double freed_before(const core *c, int64_t j, double now) {
    double old = c->res_start[j], p = c->requested[j], reach = old + p, bound = -INFINITY;
    for (int64_t k = c->checked[j]; k < c->outs; k++) {
        if (k % FREED_BLOCK == 0 && k + FREED_BLOCK <= c->outs) {
            /* the test below on the block's least and greatest: an entry passing it passes this */
            const freed *block = &c->outs_blocks[k / FREED_BLOCK];
            if (!(block->to > now && block->to > bound && (block->from < reach || block->from < old)
                  && (block->gap_to >= old || (block->gap_from < old && p <= block->room)))) {
                k += FREED_BLOCK - 1;
                continue;
            }
        }
        const freed *out = &c->outs_at[k];
        if (out->to > now && out->to > bound && (out->from < reach || out->from < old)
            && (out->gap_to >= old || (out->gap_from < old && p <= out->room))) {
            if (out->to >= old) return old;         /* the bound is at most old: none later matters */
            bound = out->to;
        }
    }
    return bound < old ? bound : old;
}

/* drop the reservations taken out before every waiting job last looked, once they are half the log */
static void forget_freed(core *c, const int64_t *waiting, int64_t n_waiting) {
    int64_t lowest = c->outs;
    for (int64_t w = 0; w < n_waiting; w++) {
        int64_t since = c->checked[waiting[w]];
        if (since >= 0 && since < lowest) lowest = since;
    }
    if (lowest == 0 || lowest < c->outs / 2) return;
    memmove(c->outs_at, &c->outs_at[lowest], sizeof(freed) * (size_t)(c->outs - lowest));
    c->outs -= lowest;
    for (int64_t k = 0; k < c->outs; k++) freed_summarised(c, k);      /* renumbered: blocks anew */
    for (int64_t w = 0; w < n_waiting; w++) if (c->checked[waiting[w]] >= 0) c->checked[waiting[w]] -= lowest;
}

/* choose_at: m of the fitting nodes by the rule's order of their tails (job j given back), into j's nodes */
static void choose_at(core *c, int64_t j, int64_t fits, double now) {
    int64_t m = c->procs[j];
    int32_t *nodes = &c->held[c->offset[j]];
    if (c->rule == FIRSTFIT || fits == m) {     /* the first m ascending, or all of them: no tails read */
        for (int64_t k = 0; k < m; k++) nodes[k] = c->fitting[k];
        return;
    }
    ranked *rank = c->rank;
    int high = c->rule != BALANCED;
    if (m <= 8 && m < fits) {
        /* few nodes: the m kept as they come, last in the order first (balanced: the m first of
         * ranked_before's order; the others: its m last, worst first), in place of a whole sort
         * (ranked_before is a total order: the same m nodes) */
        int64_t kept = 0;
        for (int64_t k = 0; k < fits; k++) {
            ranked x = { tail_of(c, c->fitting[k], now), c->fitting[k] };
            int64_t at;
            if (high) {                       /* rank[0] the least of the kept: out when x is above it */
                if (kept == m) {
                    if (!ranked_before(&rank[0], &x, 1)) continue;
                    for (at = 0; at + 1 < m && ranked_before(&rank[at + 1], &x, 1); at++) rank[at] = rank[at + 1];
                } else {
                    for (at = kept++; at > 0 && ranked_before(&x, &rank[at - 1], 1); at--) rank[at] = rank[at - 1];
                }
            } else {                          /* rank[m - 1] the greatest of the kept: out when x is below it */
                if (kept == m) {
                    if (!ranked_before(&x, &rank[m - 1], 0)) continue;
                    at = m - 1;
                } else {
                    at = kept++;
                }
                for (; at > 0 && ranked_before(&x, &rank[at - 1], 0); at--) rank[at] = rank[at - 1];
            }
            rank[at] = x;
        }
        for (int64_t k = 0; k < m; k++) nodes[k] = (int32_t)rank[k].node;
        sort_nodes(nodes, m, c->marks, c->n_nodes);
        return;
    }
    for (int64_t k = 0; k < fits; k++) {
        rank[k].node = c->fitting[k];
        rank[k].tail = tail_of(c, c->fitting[k], now);
    }
    /* the m first (balanced) or m last in the order, as a whole sort would put them, then by node */
    select_ranked(rank, fits, c->rule == BALANCED ? m : fits - m, high);
    if (c->rule == BALANCED) {
        for (int64_t k = 0; k < m; k++) nodes[k] = (int32_t)rank[k].node;
    } else {
        for (int64_t k = 0; k < m; k++) nodes[k] = (int32_t)rank[fits - m + k].node;
    }
    sort_nodes(nodes, m, c->marks, c->n_nodes);
}

static int start(core *c, int64_t j, double now) {
    int64_t n = c->procs[j];
    const int32_t *nodes = &c->held[c->offset[j]];
    for (int64_t k = 0; k < n; k++) {
        if (c->running_on[nodes[k]] >= 0) return -2;
        c->running_on[nodes[k]] = j;
    }
    c->started[j] = now;
    ledger_start(&c->ledger, n, now);
    for (int64_t k = 0; k < n; k++) ledger_node_starts(&c->ledger, nodes[k], now);
    end_event e = { now + c->run_for[j], c->sequence++, j, -1 };
    heap_push(c->heap, &c->heap_n, e);
    return 0;
}

static void finish(core *c, int64_t j, double now) {
    int64_t n = c->procs[j];
    const int32_t *nodes = &c->held[c->offset[j]];
    for (int64_t k = 0; k < n; k++) c->running_on[nodes[k]] = -1;
    double share = ledger_finish(&c->ledger, j, n, c->started[j], now), run_s = now - c->started[j];
    for (int64_t k = 0; k < n; k++) ledger_node_ends(&c->ledger, nodes[k], share, run_s, now);
    ledger_ended(&c->ledger);
}

/* gaps hold at most one per node plus one per reservation: grow the scratch when the plan grew */
static int ensure_gaps(core *c) {
    int64_t need = c->n_nodes + c->planned;
    if (need <= c->gaps_cap) return 0;
    int64_t cap = 2 * need;
    gap *gaps = grown_array(c->gaps, cap, sizeof(gap));
    if (!gaps) return -1;
    c->gaps = gaps;
    gaps = grown_array(c->gaps_tmp, cap, sizeof(gap));
    if (!gaps) return -1;
    c->gaps_tmp = gaps;
    gaps = grown_array(c->by_g1, cap, sizeof(gap));
    if (!gaps) return -1;
    c->by_g1 = gaps;
    c->gaps_cap = cap;
    return 0;
}

/* Returns 0, or -1 when memory ran out, -2 when a reserved node is busy at the reserved start, -3
 * when jobs wait after the last event, -4 when two reservations overlap on a node (never in a plan),
 * -5 (with `checks`, which compares the gap index with the node plans after every change of the
 * plan: a test's) when they differ.  counts[0]: points of the power series, counts[1]: jobs ended. */
int deadline_run(int rule, int compress, int checks, int64_t n_nodes, int64_t jobs,
                 const double *submit, const double *requested, const double *run_for, const double *deadline,
                 const double *limit, const int64_t *procs,
                 double idle_power_w, double delta_unit, double share_unit, double start_s,
                 unsigned char *accepted, double *finish_s,
                 int64_t *out_rows, double *out_start, double *out_end, double *out_energy, int32_t *out_nodes,
                 int64_t *out_offsets,
                 double *times, double *series_w, double *series_busy, int64_t *counts, double *scalars,
                 double *node_jobs_j, double *node_cpu_s, int64_t *jobs_on, double *idle_since, double *idle_node_s) {
    core c;
    memset(&c, 0, sizeof c);
    c.submit = submit; c.requested = requested; c.run_for = run_for; c.deadline = deadline; c.limit = limit;
    c.procs = procs; c.n_nodes = n_nodes; c.jobs = jobs; c.rule = rule;
    size_t nn = (size_t)(n_nodes > 0 ? n_nodes : 1), nj = (size_t)(jobs > 0 ? jobs : 1);
    c.res_start = malloc(sizeof(double) * nj);
    c.res_end = malloc(sizeof(double) * nj);
    c.offset = malloc(sizeof(int64_t) * (nj + 1));
    c.started = malloc(sizeof(double) * nj);
    c.busy = calloc(nn, sizeof(span_list));
    if (c.busy) for (int64_t n = 0; n < n_nodes; n++) spans_ends(&c.busy[n]);
    c.checked = malloc(sizeof(int64_t) * nj);
    c.running_on = malloc(sizeof(int64_t) * nn);
    c.rank = malloc(sizeof(ranked) * nn);
    c.rank_tmp = malloc(sizeof(ranked) * nn);
    c.tails = malloc(sizeof(double) * nn);
    c.cum = malloc(sizeof(double) * (nn + 1));
    c.starts = malloc(sizeof(double) * nn);
    c.fitting = malloc(sizeof(int32_t) * nn);
    c.marks = calloc(nn, 1);
    c.own_marks = calloc(nn, 1);
    c.heap = malloc(sizeof(end_event) * (nn + 1));
    c.runs = calloc(nn + 1, sizeof(count_runs));
    int64_t *waiting = malloc(sizeof(int64_t) * nj);
    reservation *by_reservation = malloc(sizeof(reservation) * nj);
    reservation *moved_jobs = malloc(sizeof(reservation) * nj), *reservations_scratch = malloc(sizeof(reservation) * nj);
    int status = 0;
    if (!c.res_start || !c.res_end || !c.offset || !c.started || !c.busy || !c.checked || !c.running_on
        || !c.rank || !c.rank_tmp
        || !c.tails || !c.cum || !c.starts || !c.fitting || !c.marks || !c.own_marks || !c.heap || !c.runs || !waiting || !by_reservation || !moved_jobs
        || !reservations_scratch) {
        status = -1;
        goto done;
    }
    c.offset[0] = 0;
    for (int64_t j = 0; j < jobs; j++) c.offset[j + 1] = c.offset[j] + procs[j];
    c.held = malloc(sizeof(int32_t) * (size_t)(c.offset[jobs] > 0 ? c.offset[jobs] : 1));
    if (!c.held) { status = -1; goto done; }
    for (int64_t n = 0; n < n_nodes; n++) c.running_on[n] = -1;
    for (int64_t j = 0; j < jobs; j++) c.checked[j] = -1;
    ledger_init(&c.ledger, n_nodes, idle_power_w, delta_unit, share_unit, start_s, times, series_w, series_busy,
                node_jobs_j, node_cpu_s, jobs_on, idle_since, idle_node_s, out_rows, out_start, out_end,
                out_energy, out_nodes, out_offsets);

    c.steps_cap = 64;
    c.times = malloc(sizeof(double) * (size_t)c.steps_cap);
    c.free = malloc(sizeof(double) * (size_t)c.steps_cap);
    if (!c.times || !c.free) { status = -1; goto done; }
    /* from the first arrival, or the run's start if earlier: the counts must begin by every event */
    c.times[0] = start_s; c.free[0] = (double)n_nodes; c.steps = 1;
    for (int64_t j = 0; j < jobs; j++) if (submit[j] < c.times[0]) c.times[0] = submit[j];
    /* the gap index's buckets a quarter of the mean requested time wide: a bucket is read when one
     * of its holes may hold the job, so narrower buckets read fewer holes and wider ones fewer buckets */
    double requested_sum = 0.0;
    for (int64_t j = 0; j < jobs; j++) requested_sum += requested[j];
    if (gap_index_init(&c.gaps_by_time, c.times[0], jobs > 0 ? requested_sum / (double)jobs / 4.0 : 1.0) < 0) {
        status = -1;
        goto done;
    }
    int64_t arrived = 0, n_waiting = 0, n_reserved = 0, moved_n = 0;
    int planning = 0, pending_compress = 0;
    double now = -INFINITY;
    while (c.heap_n > 0 || arrived < jobs || n_reserved > 0) {
        now = next_event(c.heap, c.heap_n, submit, arrived, jobs, by_reservation, n_reserved, now);
        if (now > c.times[0] && now != INFINITY) count_advance(&c, now);
        if (now == INFINITY && c.heap_n == 0) { status = -3; goto done; }
        while (c.heap_n > 0 && c.heap[0].time == now) {
            int64_t j = heap_pop(c.heap, &c.heap_n).job;
            finish(&c, j, now);
            if ((status = plan_remove(&c, j, now)) < 0) goto done;
            if (checks && gap_index_check(&c.gaps_by_time, c.busy, n_nodes) < 0) { status = -5; goto done; }
            if (now < c.res_end[j]) pending_compress = compress;
        }
        while (arrived < jobs && submit[arrived] == now) {
            int64_t j = arrived++;
            planning = 1;
            int64_t m = procs[j];
            for (int64_t n = 0; n < n_nodes; n++) c.tails[n] = tail_of(&c, n, now);
            double start_at = choose_append(&c, j, now);     /* sorts the tails into c.rank */
            finish_s[j] = c.rank[m - 1].tail + requested[j];
            if (finish_s[j] > limit[j]) continue;
            accepted[j] = 1;
            if (ensure_gaps(&c) < 0) { status = -1; goto done; }
            if ((status = plan_add(&c, j, start_at)) < 0) goto done;
            if (checks && gap_index_check(&c.gaps_by_time, c.busy, n_nodes) < 0) { status = -5; goto done; }
            waiting[n_waiting++] = j;
            reservation_insert(by_reservation, &n_reserved, start_at, j);
        }
        if (!planning) continue;
        if (pending_compress) {
            pending_compress = 0;
            forget_freed(&c, waiting, n_waiting);
            for (int64_t w = 0; w < n_waiting; w++) {
                int64_t j = waiting[w], fits = 0;
                double old = c.res_start[j], bound = old, first = now;
                if (old <= now) continue;
                if (c.checked[j] >= 0) {
                    bound = freed_before(&c, j, now);
                    c.checked[j] = c.outs;
                    if (!(bound > now)) continue;
                }
                c.checked[j] = c.outs;
                int may = count_may_move(&c, j, bound, &first);
                if (may < 0) { status = -1; goto done; }
                if (!may) continue;
                if (ensure_gaps(&c) < 0) { status = -1; goto done; }
                double t = earliest_move(&c, j, now, bound, first, &fits);
                if (t != t) continue;
                c.checked[j] = -1;
                if ((status = plan_remove(&c, j, now)) < 0) goto done;
                choose_at(&c, j, fits, now);
                if ((status = plan_add(&c, j, t)) < 0) goto done;
                if (checks && gap_index_check(&c.gaps_by_time, c.busy, n_nodes) < 0) { status = -5; goto done; }
                moved_jobs[moved_n].start = t; moved_jobs[moved_n].job = j; moved_n++;
            }
            if (moved_n > 0) {
                reservations_moved(by_reservation, n_reserved, c.res_start, moved_jobs, moved_n, reservations_scratch);
                moved_n = 0;
            }
        }
        int64_t taken = 0;
        for (; taken < n_reserved && by_reservation[taken].start <= now; taken++) {
            int64_t j = by_reservation[taken].job;
            int64_t at = job_position(waiting, n_waiting, j);
            memmove(&waiting[at], &waiting[at + 1], sizeof(int64_t) * (size_t)(n_waiting - at - 1));
            n_waiting--;
            if (start(&c, j, now) < 0) { status = -2; goto done; }
        }
        if (taken > 0) {
            memmove(by_reservation, &by_reservation[taken], sizeof(reservation) * (size_t)(n_reserved - taken));
            n_reserved -= taken;
        }
    }
    ledger_scalars(&c.ledger, scalars);
    counts[0] = c.ledger.series_len; counts[1] = c.ledger.finished;
done:
    if (c.busy) for (int64_t n = 0; n < n_nodes; n++) { free(c.busy[n].at); free(c.busy[n].hole_at); free(c.busy[n].room); }
    if (c.runs) for (int64_t m = 0; m <= n_nodes; m++) { free(c.runs[m].start); free(c.runs[m].end); free(c.runs[m].longest); }
    free(c.runs); free(c.changes); free(c.own_marks);
    gap_index_free(&c.gaps_by_time);
    free(c.busy); free(c.checked); free(c.outs_at); free(c.outs_blocks); free(c.gaps_tmp); free(c.by_g1);
    free(c.res_start); free(c.res_end); free(c.offset); free(c.started); free(c.running_on);
    free(c.rank); free(c.rank_tmp); free(c.tails); free(c.cum); free(c.starts); free(c.fitting); free(c.marks); free(c.heap); free(c.held);
    free(c.gaps); free(c.times); free(c.free); free(waiting); free(by_reservation); free(moved_jobs); free(reservations_scratch);
    return status;
}
