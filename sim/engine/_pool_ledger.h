/* What the compiled replay cores share (_pool_core.c, _deadline_core.c): job ends in a binary heap,
 * reservations sorted by start, and the energy ledger on a pool of alike single-CPU nodes with the
 * ended jobs' results, operation by operation as the replay's EnergyLedger (sim/accounting/ledger.py)
 * on such a pool.  Included by each core: every function is static. */
#ifndef GREENSLURM_POOL_LEDGER_H
#define GREENSLURM_POOL_LEDGER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>

typedef struct { double time; int64_t seq; int64_t job; int64_t first_node; } end_event;
typedef struct { double start; int64_t job; } reservation;

/* `items` grown (or shrunk) to `cap` items of `size` bytes each: realloc's answer, or NULL when there is
 * no memory or when `cap` is below 1 or `cap` x `size` bytes exceed what size_t counts (a capacity
 * doubled past any real memory); on NULL the array is as it was, still the caller's to free.  The
 * one way the compiled cores grow an array. */
static void *grown_array(void *items, int64_t cap, size_t size) {
    if (cap < 1 || size == 0 || (uint64_t)cap > (uint64_t)(SIZE_MAX / size)) return NULL;
    return realloc(items, (size_t)cap * size);
}

/* two arrays of doubles that go together (a step's time and what it frees, a stair's ...) both grown
 * to `cap`; -1: no memory (each array then grown or as it was, both valid) */
static int grow_doubles_pair(double **first, double **second, int64_t cap) {
    double *grown = grown_array(*first, cap, sizeof(double));
    if (!grown) return -1;
    *first = grown;
    grown = grown_array(*second, cap, sizeof(double));
    if (!grown) return -1;
    *second = grown;
    return 0;
}

/* numpy's pairwise sum of `count` copies of `value` (np.full(count, value).sum()) */
static double pairwise_sum_of_copies(double value, int64_t count) {
    if (count < 8) {
        double total = 0.0;
        for (int64_t i = 0; i < count; i++) total += value;
        return total;
    }
    if (count <= 128) {
        int64_t blocks = count - count % 8;
        double lane = value;
        for (int64_t i = 0; i < blocks / 8 - 1; i++) lane += value;
        double total = ((lane + lane) + (lane + lane)) + ((lane + lane) + (lane + lane));
        for (int64_t i = 0; i < count - blocks; i++) total += value;
        return total;
    }
    int64_t half = count / 2;
    half -= half % 8;
    return pairwise_sum_of_copies(value, half) + pairwise_sum_of_copies(value, count - half);
}

static int end_before(const end_event *a, const end_event *b) {
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

static void heap_push(end_event *heap, int64_t *n, end_event item) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!end_before(&item, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

static end_event heap_pop(end_event *heap, int64_t *n) {
    end_event top = heap[0];
    end_event last = heap[--(*n)];
    int64_t i = 0, size = *n;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= size) break;
        if (child + 1 < size && end_before(&heap[child + 1], &heap[child])) child++;
        if (!end_before(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (size > 0) heap[i] = last;
    return top;
}

static int64_t reservation_position(const reservation *a, int64_t n, double start, int64_t job) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (a[mid].start < start || (a[mid].start == start && a[mid].job < job)) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static void reservation_insert(reservation *a, int64_t *n, double start, int64_t job) {
    int64_t at = reservation_position(a, *n, start, job);
    memmove(&a[at + 1], &a[at], sizeof(reservation) * (size_t)(*n - at));
    a[at].start = start; a[at].job = job; (*n)++;
}

/* (start, job) of x before y's: the reservations' order (a job is in the list once) */
static int reservation_before(const reservation *x, const reservation *y) {
    return x->start < y->start || (x->start == y->start && x->job < y->job);
}

/* a[0 .. n) put in reservation order through `scratch` (room for n): the runs already in order merged
 * two by two until one is left.  The jobs a compression moved come in arrival order, whose new starts
 * mostly follow one another, so there are few runs (qsort took each job through a comparison called by
 * pointer, log n times) */
static void reservations_sort(reservation *a, int64_t n, reservation *scratch) {
    reservation *from = a, *to = scratch;
    for (;;) {
        int64_t runs = 0;
        for (int64_t i = 0; i < n; runs++) {
            int64_t mid = i + 1, end;
            while (mid < n && !reservation_before(&from[mid], &from[mid - 1])) mid++;
            end = mid;
            if (end < n) for (end++; end < n && !reservation_before(&from[end], &from[end - 1]); end++) {}
            int64_t l = i, r = mid, o = i;
            while (l < mid && r < end) to[o++] = reservation_before(&from[r], &from[l]) ? from[r++] : from[l++];
            while (l < mid) to[o++] = from[l++];
            while (r < end) to[o++] = from[r++];
            i = end;
        }
        reservation *swap = from; from = to; to = swap;
        if (runs <= 1) break;
    }
    if (from != a) memcpy(a, from, sizeof(reservation) * (size_t)n);
}

/* The reservations by start after a compression moved the jobs in `moved` (each once, to a start
 * before its old one, now in reserved_s): their old entries dropped, the moved ones sorted and
 * merged in, through `scratch` (room for every reservation).  A compression reads none of them, so
 * the cores put them in order once after it, not with a memmove of the whole list at each move. */
static void reservations_moved(reservation *by_start, int64_t n, const double *reserved_s, reservation *moved,
                               int64_t moved_n, reservation *scratch) {
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        if (by_start[i].start == reserved_s[by_start[i].job]) by_start[kept++] = by_start[i];
    reservations_sort(moved, moved_n, scratch);
    int64_t i = 0, k = 0, o = 0;
    while (i < kept && k < moved_n)
        scratch[o++] = reservation_before(&moved[k], &by_start[i]) ? moved[k++] : by_start[i++];
    while (i < kept) scratch[o++] = by_start[i++];
    while (k < moved_n) scratch[o++] = moved[k++];
    memcpy(by_start, scratch, sizeof(reservation) * (size_t)o);
}

static int64_t job_position(const int64_t *a, int64_t n, int64_t job) {
    int64_t lo = 0, hi = n;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (a[mid] < job) lo = mid + 1; else hi = mid; }
    return lo;
}

/* the next event time after `after`: the first job end, the next arrival, or the earliest reserved
 * start still ahead (INFINITY: none, or an end at infinity, which is an event too: see heap_n) */
static double next_event(const end_event *heap, int64_t heap_n, const double *submit, int64_t arrived,
                         int64_t jobs, const reservation *by_reservation, int64_t reserved, double after) {
    double now = heap_n > 0 ? heap[0].time : INFINITY;
    if (arrived < jobs && submit[arrived] < now) now = submit[arrived];
    if (reserved > 0 && after < by_reservation[0].start && by_reservation[0].start < now) now = by_reservation[0].start;
    return now;
}

typedef struct {
    double delta_unit, share_unit;
    double power_w, peak_w, busy, last_s, total_j, jobs_j;
    double *times, *series_w, *series_busy;
    int64_t series_len;
    double *node_jobs_j, *node_cpu_s, *idle_since, *idle_node_s;
    int64_t *jobs_on;
    /* in the order jobs ended: row, start, end, energy, nodes */
    int64_t *out_rows, *out_offsets, finished;
    double *out_start, *out_end, *out_energy;
    int32_t *out_nodes;
} pool_ledger;

static void ledger_init(pool_ledger *l, int64_t n_nodes, double idle_power_w, double delta_unit, double share_unit,
                        double start_s, double *times, double *series_w, double *series_busy,
                        double *node_jobs_j, double *node_cpu_s, int64_t *jobs_on, double *idle_since,
                        double *idle_node_s, int64_t *out_rows, double *out_start, double *out_end,
                        double *out_energy, int32_t *out_nodes, int64_t *out_offsets) {
    memset(l, 0, sizeof *l);
    l->delta_unit = delta_unit; l->share_unit = share_unit;
    l->power_w = l->peak_w = idle_power_w;
    l->last_s = start_s;
    l->times = times; l->series_w = series_w; l->series_busy = series_busy;
    l->node_jobs_j = node_jobs_j; l->node_cpu_s = node_cpu_s; l->jobs_on = jobs_on;
    l->idle_since = idle_since; l->idle_node_s = idle_node_s;
    for (int64_t v = 0; v < n_nodes; v++) {
        node_jobs_j[v] = 0.0; node_cpu_s[v] = 0.0; jobs_on[v] = 0; idle_since[v] = start_s; idle_node_s[v] = 0.0;
    }
    l->out_rows = out_rows; l->out_start = out_start; l->out_end = out_end; l->out_energy = out_energy;
    l->out_nodes = out_nodes; l->out_offsets = out_offsets;
    out_offsets[0] = 0;
}

static void ledger_advance(pool_ledger *l, double now) {
    double dt = now - l->last_s;
    if (dt > 0) {
        l->times[l->series_len] = l->last_s;
        l->series_w[l->series_len] = l->power_w;
        l->series_busy[l->series_len] = l->busy;
        l->series_len++;
        l->total_j += l->power_w * dt;
        l->last_s = now;
    }
}

/* a job starts on n nodes at `now`; then ledger_node_starts for each of its nodes in order */
static void ledger_start(pool_ledger *l, int64_t n, double now) {
    ledger_advance(l, now);
    l->power_w += (double)n * l->delta_unit;
    l->busy += (double)n;
    if (l->power_w > l->peak_w) l->peak_w = l->power_w;
}

static void ledger_node_starts(pool_ledger *l, int64_t v, double now) {
    if (l->jobs_on[v] == 0) l->idle_node_s[v] += now - l->idle_since[v];
    l->jobs_on[v] += 1;
}

/* a job of input row j, started at `started`, ends on n nodes at `now`: its share per node (then
 * ledger_node_ends and ledger_record_node for each of its nodes in order, then ledger_ended) */
static double ledger_finish(pool_ledger *l, int64_t j, int64_t n, double started, double now) {
    ledger_advance(l, now);
    l->power_w -= (double)n * l->delta_unit;
    l->busy -= (double)n;
    double share = l->share_unit * (now - started);
    double charged = pairwise_sum_of_copies(share, n);
    l->jobs_j += charged;
    int64_t at = l->finished;
    l->out_rows[at] = j;
    l->out_start[at] = started;
    l->out_end[at] = now;
    l->out_energy[at] = charged;
    l->out_offsets[at + 1] = l->out_offsets[at];
    return share;
}

static void ledger_node_ends(pool_ledger *l, int64_t v, double share, double run_s, double now) {
    l->node_jobs_j[v] += share;
    l->node_cpu_s[v] += run_s;
    l->jobs_on[v] -= 1;
    if (l->jobs_on[v] == 0) l->idle_since[v] = now;
    l->out_nodes[l->out_offsets[l->finished + 1]++] = (int32_t)v;
}

static void ledger_ended(pool_ledger *l) { l->finished++; }

static void ledger_scalars(const pool_ledger *l, double *scalars) {
    scalars[0] = l->total_j; scalars[1] = l->jobs_j; scalars[2] = l->peak_w;
    scalars[3] = l->power_w; scalars[4] = l->busy; scalars[5] = l->last_s; scalars[6] = (double)l->finished;
}

#endif
