/* The replay's core on a processor pool, compiled: FCFS and EASY, first fit, the energy ledger.
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

/* -- conservative backfilling on processor counts: the general loop's PlanProfile on one pooled node -- */
typedef struct {
    double *times, *free; int64_t n, cap; int error;     /* error: the status to return */
    /* The steps in consecutive blocks: block b holds steps block_first[b] .. block_first[b + 1] - 1
     * (block_first[blocks] is n) and knows their least and most free, exactly, at every moment:
     * searches skip whole blocks that cannot start or stop a window.  A block is cut at a fixed
     * time, not at a fixed step number, so a breakpoint inserted joins the block of the step it
     * copies (whose least and most stay as they were) and the later blocks only shift their first
     * step by one; a change adds its amount to the least and most of the blocks it covers whole
     * (whole numbers of processors: exact) and reads again the two it covers in part.  Before,
     * blocks of fixed numbers of steps were recomputed from the first change on before every
     * search, the whole plan at nearly every move. */
    int64_t *block_first; double *block_min, *block_max; int64_t blocks, block_cap;
    double last_most;                 /* the most free over the span the last change touched, after it */
} count_profile;
#define PROFILE_BLOCK 32            /* steps a block gets when the blocks are cut anew; split above twice as many */

/* room for `blocks` blocks (and the end of the last); -1: no memory */
static int profile_blocks_room(count_profile *p, int64_t blocks) {
    if (blocks + 1 <= p->block_cap) return 0;
    int64_t cap = 2 * (blocks + 1);
    int64_t *first = grown_array(p->block_first, cap, sizeof(int64_t));
    if (!first) return -1;
    p->block_first = first;
    if (grow_doubles_pair(&p->block_min, &p->block_max, cap) < 0) return -1;
    p->block_cap = cap;
    return 0;
}

/* block b's least and most free read from its steps */
static void profile_block_read(count_profile *p, int64_t b) {
    int64_t k = p->block_first[b], end = p->block_first[b + 1];
    double lo = p->free[k], hi = p->free[k];
    for (k++; k < end; k++) { if (p->free[k] < lo) lo = p->free[k]; if (p->free[k] > hi) hi = p->free[k]; }
    p->block_min[b] = lo; p->block_max[b] = hi;
}

/* the blocks cut anew, PROFILE_BLOCK steps each (the last may have fewer); -1: no memory */
static int profile_blocks_build(count_profile *p) {
    int64_t blocks = (p->n + PROFILE_BLOCK - 1) / PROFILE_BLOCK;
    if (profile_blocks_room(p, blocks) < 0) { p->error = -1; return -1; }
    p->blocks = blocks;
    for (int64_t b = 0; b < blocks; b++) p->block_first[b] = b * PROFILE_BLOCK;
    p->block_first[blocks] = p->n;
    for (int64_t b = 0; b < blocks; b++) profile_block_read(p, b);
    return 0;
}

/* the block holding step k (0 <= k < n) */
static int64_t profile_block_of(const count_profile *p, int64_t k) {
    int64_t lo = 0, len = p->blocks;     /* the last block whose first step is at most k */
    while (len > 1) {
        int64_t half = len / 2;
        lo = p->block_first[lo + half] <= k ? lo + half : lo;
        len -= half;
    }
    return lo;
}

/* A step inserted at i (> 0) as a copy of step i - 1: it joins that step's block (its least and most
 * unchanged), the later blocks start one step later; a block grown past twice PROFILE_BLOCK is split
 * in two.  -1: no memory. */
static int profile_block_inserted(count_profile *p, int64_t i) {
    int64_t b = profile_block_of(p, i - 1);      /* the block_first of blocks after b are still the old ones */
    for (int64_t a = b + 1; a <= p->blocks; a++) p->block_first[a]++;
    if (p->block_first[b + 1] - p->block_first[b] <= 2 * PROFILE_BLOCK) return 0;
    if (profile_blocks_room(p, p->blocks + 1) < 0) { p->error = -1; return -1; }
    memmove(&p->block_first[b + 2], &p->block_first[b + 1], sizeof(int64_t) * (size_t)(p->blocks - b));
    memmove(&p->block_min[b + 2], &p->block_min[b + 1], sizeof(double) * (size_t)(p->blocks - b - 1));
    memmove(&p->block_max[b + 2], &p->block_max[b + 1], sizeof(double) * (size_t)(p->blocks - b - 1));
    p->blocks++;
    p->block_first[b + 1] = p->block_first[b] + PROFILE_BLOCK;
    profile_block_read(p, b);
    profile_block_read(p, b + 1);
    return 0;
}

/* `amount` was added to steps i .. j - 1 (i < j): the blocks covered whole take it too, the (at most
 * two) covered in part are read again */
static void profile_blocks_added(count_profile *p, int64_t i, int64_t j, double amount) {
    for (int64_t b = profile_block_of(p, i); b < p->blocks && p->block_first[b] < j; b++) {
        if (p->block_first[b] >= i && p->block_first[b + 1] <= j) { p->block_min[b] += amount; p->block_max[b] += amount; }
        else profile_block_read(p, b);
    }
}

static int profile_init(count_profile *p, double free_now, double now) {
    p->cap = 64;
    p->times = malloc(sizeof(double) * (size_t)p->cap);
    p->free = malloc(sizeof(double) * (size_t)p->cap);
    if (!p->times || !p->free) return -1;
    p->times[0] = now; p->free[0] = free_now; p->n = 1;
    return profile_blocks_build(p);
}

/* The binary searches halve [lo, lo + len], which holds the answer, with a conditional move, not a
 * branch: the compression asks one for every waiting job it looks at, and a branch on the
 * comparison is mispredicted half the time.  Same answers as the textbook loop (NaN: 0). */
static int64_t lower_bound(const double *a, int64_t n, double t) {     /* first a[i] >= t */
    if (n <= 0) return 0;
    int64_t lo = 0, len = n;
    while (len > 1) {
        int64_t half = len / 2;
        lo = a[lo + half - 1] < t ? lo + half : lo;
        len -= half;
    }
    return lo + (a[lo] < t);
}

static int64_t upper_bound(const double *a, int64_t n, double t) {     /* first a[i] > t */
    if (n <= 0) return 0;
    int64_t lo = 0, len = n;
    while (len > 1) {
        int64_t half = len / 2;
        lo = a[lo + half - 1] <= t ? lo + half : lo;
        len -= half;
    }
    return lo + (a[lo] <= t);
}

/* index of a breakpoint at t (inserted as a copy of the step before); -1: no memory (error -1) or t is
 * before the plan's start or NaN (error -4: a negative time asked for; the replay never gives one) */
static int64_t profile_breakpoint(count_profile *p, double t) {
    int64_t i = lower_bound(p->times, p->n, t);
    if (i < p->n && p->times[i] == t) return i;
    if (i == 0) { p->error = -4; return -1; }
    if (p->n == p->cap) {
        int64_t cap = 2 * p->cap;
        if (grow_doubles_pair(&p->times, &p->free, cap) < 0) { p->error = -1; return -1; }
        p->cap = cap;
    }
    memmove(&p->times[i + 1], &p->times[i], sizeof(double) * (size_t)(p->n - i));
    memmove(&p->free[i + 1], &p->free[i], sizeof(double) * (size_t)(p->n - i));
    p->times[i] = t;
    p->free[i] = p->free[i - 1];       /* i > 0: never before the plan's start */
    p->n++;
    if (profile_block_inserted(p, i) < 0) return -1;
    return i;
}

static int profile_change(count_profile *p, double start, double end, double processors) {
    int64_t i = profile_breakpoint(p, start);
    if (i < 0) return -1;
    int64_t j = p->n;
    if (end != INFINITY) { j = profile_breakpoint(p, end); if (j < 0) return -1; }
    double most = -INFINITY;
    for (int64_t k = i; k < j; k++) {
        p->free[k] += processors;
        if (p->free[k] > most) most = p->free[k];
    }
    p->last_most = most;
    if (i < j) profile_blocks_added(p, i, j, processors);
    return 0;
}

/* the plan from `now` on, equal steps merged, the blocks cut anew when steps went; -1: no memory */
static int profile_advance(count_profile *p, double now) {
    int64_t n = p->n, i = upper_bound(p->times, p->n, now) - 1;
    if (i > 0) {
        memmove(p->times, &p->times[i], sizeof(double) * (size_t)(p->n - i));
        memmove(p->free, &p->free[i], sizeof(double) * (size_t)(p->n - i));
        p->n -= i;
    }
    if (p->times[0] < now) p->times[0] = now;
    int64_t kept = 1;
    for (int64_t k = 1; k < p->n; k++) {
        if (p->free[k] != p->free[kept - 1]) { p->times[kept] = p->times[k]; p->free[kept] = p->free[k]; kept++; }
    }
    p->n = kept;
    return kept == n ? 0 : profile_blocks_build(p);
}

/* the first step from `from` on freeing at least `amount` (n: none) */
static int64_t next_at_least(const count_profile *p, int64_t from, double amount) {
    if (from >= p->n) return p->n;
    int64_t k = from, b = profile_block_of(p, k);
    for (;;) {
        int64_t end = p->block_first[b + 1];
        if (!(p->block_max[b] < amount))        /* the rest of block b holds the step, or none does */
            for (; k < end; k++) if (p->free[k] >= amount) return k;
        k = end;
        if (++b == p->blocks) return p->n;
    }
}

/* the first step from `from` on freeing less than `amount` (n: none) */
static int64_t next_below(const count_profile *p, int64_t from, double amount) {
    if (from >= p->n) return p->n;
    int64_t k = from, b = profile_block_of(p, k);
    for (;;) {
        int64_t end = p->block_first[b + 1];
        if (!(p->block_min[b] >= amount))
            for (; k < end; k++) if (p->free[k] < amount) return k;
        k = end;
        if (++b == p->blocks) return p->n;
    }
}

/* Where a waiting job reserved at `old` (after `now`) could start earlier, as profile_earliest would
 * answer once the job gave its slot [old, old + duration) back, without giving it back: a window
 * starting before old ends before old + duration, so from old on the job's own processors are free
 * again and a step there holds it when it frees at least 0 (the give-back adds exactly `processors`
 * there); before old a step must free `processors`.  Whole blocks of steps that cannot start or stop
 * a window are skipped.  NAN: no earlier start; -1 with p->error set: no memory. */
static double profile_earliest_move(count_profile *p, double processors, double duration, double now, double old) {
    int64_t first = upper_bound(p->times, p->n, now) - 1;
    if (first < 0) first = 0;
    int64_t at_old = lower_bound(p->times, p->n, old);       /* steps from here start at old or later */
    int64_t i = first;
    while (i < p->n) {
        int64_t k = next_at_least(p, i, processors);
        if (k >= at_old) return NAN;
        double start = k == first ? (p->times[k] > now ? p->times[k] : now) : p->times[k];
        if (!(start < old)) return NAN;
        double end = start + duration;
        int64_t fail = next_below(p, k + 1, processors);
        if (fail >= at_old) fail = next_below(p, at_old > k + 1 ? at_old : k + 1, 0.0);
        if (fail >= p->n || !(p->times[fail] < end)) return start;
        i = fail + 1;       /* every start up to the failing step has it in its window */
    }
    return NAN;
}

/* earliest start in [after, before) from which `processors` are free for `duration`; NAN if none */
static double profile_earliest(const count_profile *p, double processors, double duration, double after, double before) {
    int64_t i = upper_bound(p->times, p->n, after) - 1, first;
    if (i < 0) i = 0;
    first = i;
    while (i < p->n) {
        double start = i == first ? (p->times[i] > after ? p->times[i] : after) : p->times[i];
        if (!(start < before)) return NAN;
        double end = start + duration;
        int64_t k = i;
        int failed = 0;
        while (k < p->n && (k == i || p->times[k] < end)) {
            if (p->free[k] < processors) { failed = 1; break; }
            k++;
        }
        if (!failed) return start;
        i = k + 1;
    }
    return NAN;
}

static int profile_may_start_before(const count_profile *p, double processors, double after, double before) {
    int64_t first = upper_bound(p->times, p->n, after) - 1, last = lower_bound(p->times, p->n, before);
    if (first < 0) first = 0;
    for (int64_t k = first; k < last; k++) if (p->free[k] >= processors) return 1;
    return 0;
}

/* The plan's staircase: for each new maximum of free processors along the plan (free[0], then every
 * step freeing more than all before it), that amount and the time it is first reached.  A job of p
 * processors may start before t (profile_may_start_before from the plan's start) exactly when the
 * first stair with free >= p is reached before t: one binary search instead of a scan of the steps
 * before t, which with thousands of waiting jobs made each compression quadratic.  Steps split or
 * amounts given back and taken again leave the stairs as they were; a job moved changes them, and
 * the compression updates them for the slot it gave back (stairs_given) instead of building them
 * again from the whole plan. */
typedef struct { double *free, *time; int64_t n, cap; int valid; } staircase;

static int stairs_build(staircase *s, const count_profile *p) {
    if (s->cap < p->n) {
        if (grow_doubles_pair(&s->free, &s->time, p->n) < 0) return -1;
        s->cap = p->n;
    }
    s->n = 0;
    for (int64_t k = 0; k < p->n; k++) {
        if (s->n == 0 || p->free[k] > s->free[s->n - 1]) { s->free[s->n] = p->free[k]; s->time[s->n] = p->times[k]; s->n++; }
    }
    s->valid = 1;
    return 0;
}

/* A span [from, ...) given back whose most free is now `most`: a stair (most, from) merged in, the
 * stairs it covers dropped.  The stairs may then come earlier than the plan's own (the slot taken
 * since is not subtracted, and the most may be reached after `from`): they only let more jobs through
 * to the search, whose answer is exact, until the next compression builds them again. */
static void stairs_given(staircase *s, double most, double from) {
    int64_t k = 0;                      /* the first stair with free >= most */
    while (k < s->n && s->free[k] < most) k++;
    if (k < s->n && s->time[k] <= from) return;                 /* reached by then already */
    int64_t first = k;                  /* the stairs before k that come at or after `from`: covered */
    while (first > 0 && s->time[first - 1] >= from) first--;
    int64_t last = k < s->n && s->free[k] == most ? k + 1 : k;   /* and one of as many, reached later */
    if (first == last && s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 16;
        /* no memory: built again (or the error) at the next job */
        if (grow_doubles_pair(&s->free, &s->time, cap) < 0) { s->valid = 0; return; }
        s->cap = cap;
    }
    memmove(&s->free[first + 1], &s->free[last], sizeof(double) * (size_t)(s->n - last));
    memmove(&s->time[first + 1], &s->time[last], sizeof(double) * (size_t)(s->n - last));
    s->n += 1 - (last - first);
    s->free[first] = most; s->time[first] = from;
}

static int stairs_may_start_before(const staircase *s, double processors, double before) {
    int64_t lo = 0, hi = s->n;          /* the first stair with free >= processors */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (s->free[mid] < processors) lo = mid + 1; else hi = mid; }
    return lo < s->n && s->time[lo] < before;
}

/* Per processor count p, the runs of steps freeing at least p (from a step freeing p or more to the
 * next freeing fewer): each run's start (its first step, or now) and how long it lasts (widened by
 * the rounding of its two ends), kept as stairs: the longest so far by start (each stair starts
 * later and lasts longer than the one before), so that no run starting before the first stair
 * lasting d holds a window of d.  A waiting job of p processors and duration d reserved at old can
 * start earlier only in a window wholly inside such a run, or in one running into its own slot,
 * which holds the step just before old (that step frees p) and starts no earlier than the run
 * holding that step: the exact search then starts at the earlier of the two, and a job with
 * neither before old is not searched.  A compression reads the runs of a count when first asked,
 * only as far as the question needs (`upto`); the slots each move gave back are read again there
 * when the count is next asked for (or, when more wait, the runs from the first such slot on), and
 * what a search found (no window of d in the runs it read) lowers the stairs it read.  The slots
 * moves took are not read again: taking only shortens or splits runs, so the stairs stay at least
 * what the runs allow (cutting the stairs at the slots taken, which lie near the plan's start, made
 * the counts read nearly the whole plan again after every few moves).  Every stair is at least what
 * its runs allow (replaced runs leave their longest as a stair where the re-read ends), so the
 * stairs never skip a job that can move, and the search that follows is exact. */
typedef struct {
    double *start, *lasts; int64_t n, cap; int built;
    double upto;                       /* every run starting before it is in (the rest: not yet read) */
    int64_t applied;                   /* the compression's moves merged in so far */
    double *scratch; int64_t scratch_cap;
} run_stairs;

static int run_stairs_room(run_stairs *r, int64_t need) {
    if (need <= r->cap) return 0;
    int64_t cap = 2 * need + 16;
    if (grow_doubles_pair(&r->start, &r->lasts, cap) < 0) return -1;
    r->cap = cap;
    return 0;
}

/* how long a run from `from` to `to` may last, rounding allowed for */
static double run_lasts(double from, double to) {
    return to - from + 1e-9 * (fabs(to) + fabs(from));
}

/* a run from `from` lasting at most `lasts` merged in; -1: no memory */
static int run_stairs_put(run_stairs *r, double from, double lasts) {
    int64_t lo = 0, hi = r->n;          /* the first stair starting after `from` */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (r->start[mid] <= from) lo = mid + 1; else hi = mid; }
    if (lo > 0 && r->lasts[lo - 1] >= lasts) return 0;        /* a run as long starts no later */
    int64_t last = lo;                  /* the stairs after it lasting no longer: covered */
    while (last < r->n && r->lasts[last] <= lasts) last++;
    if (last == lo) {
        if (run_stairs_room(r, r->n + 1) < 0) return -1;
        memmove(&r->start[lo + 1], &r->start[lo], sizeof(double) * (size_t)(r->n - lo));
        memmove(&r->lasts[lo + 1], &r->lasts[lo], sizeof(double) * (size_t)(r->n - lo));
        r->n++;
    } else if (last > lo + 1) {
        memmove(&r->start[lo + 1], &r->start[last], sizeof(double) * (size_t)(r->n - last));
        memmove(&r->lasts[lo + 1], &r->lasts[last], sizeof(double) * (size_t)(r->n - last));
        r->n -= last - lo - 1;
    }
    r->start[lo] = from; r->lasts[lo] = lasts;
    return 0;
}

/* A search from `from` found no window of `duration` wholly inside a run starting in [from, before):
 * the stairs starting there that last that long become one lasting just less (a longer window fits
 * there no better: it ends no earlier), and one from `before` lasting as long as they did (the runs
 * from `before` on they bounded); -1: no memory */
static int run_stairs_cap(run_stairs *r, double from, double before, double duration) {
    int64_t lo = 0, hi = r->n;          /* the first stair starting at or after `from` */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (r->start[mid] < from) lo = mid + 1; else hi = mid; }
    int64_t first = lo;
    while (first < r->n && r->start[first] < before && r->lasts[first] < duration) first++;
    int64_t last = first;
    while (last < r->n && r->start[last] < before) last++;
    if (last == first) return 0;
    double longest = r->lasts[last - 1], shorter = nextafter(duration, -INFINITY);
    int capped = !(first > 0 && r->lasts[first - 1] >= shorter);
    /* else the next stair, as early, lasts longer, or no run from `before` on is in yet */
    int bounded = (last == r->n || r->start[last] > before) && before < r->upto;
    int64_t kept = first + capped + bounded;
    if (kept > last) {
        if (run_stairs_room(r, r->n + 1) < 0) return -1;
    }
    memmove(&r->start[kept], &r->start[last], sizeof(double) * (size_t)(r->n - last));
    memmove(&r->lasts[kept], &r->lasts[last], sizeof(double) * (size_t)(r->n - last));
    r->n += kept - last;
    int64_t at = first;
    if (capped) { r->start[at] = r->start[first]; r->lasts[at] = shorter; at++; }
    if (bounded) { r->start[at] = before; r->lasts[at] = longest; }
    return 0;
}

/* the stairs of count `processors` from the plan (it starts at now) for the runs starting before
 * `upto` on, until one lasting `duration` or one starting at or after `before` is in; -1: no memory */
static int run_stairs_extend(run_stairs *r, const count_profile *p, double processors, double now, double duration,
                             double before) {
    int64_t k = lower_bound(p->times, p->n, r->upto);
    while (k < p->n) {
        while (k < p->n && p->free[k] < processors) k++;
        if (k == p->n) break;
        double from = p->times[k] > now ? p->times[k] : now;
        while (k < p->n && p->free[k] >= processors) k++;
        double to = k < p->n ? p->times[k] : INFINITY, lasts = run_lasts(from, to);
        /* run_stairs_put at the end: every stair starts at or before `upto` <= from */
        if (r->n == 0 || r->lasts[r->n - 1] < lasts) {
            if (run_stairs_room(r, r->n + 1) < 0) return -1;
            r->start[r->n] = from; r->lasts[r->n] = lasts; r->n++;
        }
        r->upto = to;
        if (lasts >= duration || !(to < before)) return 0;
    }
    r->upto = INFINITY;
    return 0;
}

static void run_stairs_start(run_stairs *r, double now) {
    r->n = 0;
    r->built = 1;
    r->upto = now;
}

/* the first start of a run lasting `duration` (INFINITY: none): no window of that duration wholly
 * inside a run starts earlier */
static double run_stairs_first(const run_stairs *r, double duration) {
    int64_t lo = 0, hi = r->n;          /* the first stair lasting the duration */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (r->lasts[mid] < duration) lo = mid + 1; else hi = mid; }
    return lo < r->n ? r->start[lo] : INFINITY;
}

/* The plan changed over [start, end): the stairs of count `count` starting from the run that holds
 * (or ends at) the step at `start` up to the first step from `end` on freeing fewer (where nothing
 * changed) replaced by the runs found there now, and one from that step lasting as long as the
 * longest replaced (the runs after it they bounded); -1: no memory */
static int run_stairs_redo(run_stairs *r, const count_profile *p, double count, double start, double end, double now) {
    int64_t m = upper_bound(p->times, p->n, start) - 1;
    if (m < 0) m = 0;
    while (m > 0 && p->free[m - 1] >= count) m--;
    double from = p->times[m] > now ? p->times[m] : now, until = INFINITY;
    if (from >= r->upto) return 0;      /* no run from there on is in yet */
    /* the runs from m on, kept aside: at most one per two steps */
    int64_t lo = 0, hi = r->n;          /* the stairs starting in [from, until) go */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (r->start[mid] < from) lo = mid + 1; else hi = mid; }
    int64_t first = lo, found_n = 0;
    double *found_from = r->scratch, *found_to = r->scratch + r->scratch_cap / 2;
    for (;;) {
        while (m < p->n && p->free[m] < count && p->times[m] < end) m++;
        if (m >= p->n) break;
        if (p->free[m] < count) { until = p->times[m]; break; }
        int64_t run = m;
        while (m < p->n && p->free[m] >= count) m++;
        if (found_n == r->scratch_cap / 2) return -2;       /* cannot happen: scratch holds the plan */
        found_from[found_n] = p->times[run] > now ? p->times[run] : now;
        found_to[found_n] = m < p->n ? p->times[m] : INFINITY;
        found_n++;
        if (m >= p->n) break;
        if (p->times[m] >= end) { until = p->times[m]; break; }
    }
    if (until > r->upto) {              /* the runs from `from` on are read again when asked for */
        r->n = first;
        r->upto = from;
        return 0;
    }
    int64_t last = first;
    double longest = -INFINITY;
    while (last < r->n && r->start[last] < until) { if (r->lasts[last] > longest) longest = r->lasts[last]; last++; }
    memmove(&r->start[first], &r->start[last], sizeof(double) * (size_t)(r->n - last));
    memmove(&r->lasts[first], &r->lasts[last], sizeof(double) * (size_t)(r->n - last));
    r->n -= last - first;
    for (int64_t f = 0; f < found_n; f++)
        if (run_stairs_put(r, found_from[f], run_lasts(found_from[f], found_to[f])) < 0) return -1;
    if (last > first && until != INFINITY && run_stairs_put(r, until, longest) < 0) return -1;
    return 0;
}

/* The plan's runs of count `count` changed from `at` on (INFINITY: nowhere), nowhere before: the
 * stairs from the run that holds (or ends at) the step at `at` on are dropped, to be read again when
 * asked for.  That run starts after a step freeing fewer that did not change, so the runs before it
 * end there as they did, and what the stairs starting before it say of them holds.  (A change at
 * `upto` itself may lengthen the last run read: hence the run holding or ending at the step.) */
static void run_stairs_truncate(run_stairs *r, const count_profile *p, double count, double at, double now) {
    if (at == INFINITY) return;
    int64_t m = upper_bound(p->times, p->n, at) - 1;
    if (m < 0) m = 0;
    while (m > 0 && p->free[m - 1] >= count) m--;
    double from = p->times[m] > now ? p->times[m] : now;
    if (!(from < r->upto)) return;      /* no run from there on is in yet */
    int64_t lo = 0, hi = r->n;          /* the first stair starting at or after `from` */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (r->start[mid] < from) lo = mid + 1; else hi = mid; }
    r->n = lo;
    r->upto = from;
}

/* room for the runs of the whole plan in each count's scratch; -1: no memory */
static int run_stairs_scratch(run_stairs *r, const count_profile *p) {
    if (r->scratch_cap >= 2 * (p->n + 1)) return 0;
    int64_t cap = 4 * (p->n + 1);
    double *scratch = grown_array(r->scratch, cap, sizeof(double));
    if (!scratch) return -1;
    r->scratch = scratch; r->scratch_cap = cap;
    return 0;
}

/* The jobs a compression moved, in order: each one's slot [old, old + duration) given back (its steps
 * then freeing at most `most`).  A count's stairs take them in when next asked for (or are cut at the
 * first slot that counts when more wait): a count above `most` finds no step of the slot freeing it,
 * so its runs did not grow there; elsewhere the runs around the slot are found again in the plan as
 * it is then (which holds every change since).  The slots taken are left out (see run_stairs). */
typedef struct { double old, duration, most; } moved_job;
typedef struct { moved_job *at; int64_t n, cap; } moved_log;
#define REDO_AT_MOST 2      /* more moves waiting than this: the count's stairs are cut at the first slot given back */
#define RUN_STAIRS_FROM 64  /* waiting jobs above which a compression keeps the stairs */

static int moved_log_add(moved_log *log, double old, double duration, double most) {
    if (log->n == log->cap) {
        int64_t cap = log->cap ? 2 * log->cap : 64;
        moved_job *at = grown_array(log->at, cap, sizeof(moved_job));
        if (!at) return -1;
        log->at = at; log->cap = cap;
    }
    moved_job move = { old, duration, most };
    log->at[log->n++] = move;
    return 0;
}

/* count's stairs (built) brought up to the plan as it is now; -1: no memory */
static int run_stairs_update(run_stairs *r, const moved_log *log, const count_profile *p, double count, double now) {
    if (log->n - r->applied > REDO_AT_MOST) {
        double earliest = INFINITY;       /* the first slot given back that counts for this count */
        for (; r->applied < log->n; r->applied++) {
            const moved_job *move = &log->at[r->applied];
            if (count <= move->most && move->old < earliest) earliest = move->old;
        }
        run_stairs_truncate(r, p, count, earliest, now);
        return 0;
    }
    if (r->applied < log->n && run_stairs_scratch(r, p) < 0) return -1;
    for (; r->applied < log->n; r->applied++) {
        const moved_job *move = &log->at[r->applied];
        if (count <= move->most && run_stairs_redo(r, p, count, move->old, move->old + move->duration, now) < 0) return -1;
    }
    return 0;
}

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
                        int64_t k = lower_bound(plan.times, plan.n, old) - 1;
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
                    double found = profile_earliest_move(&plan, size, requested[j], after, old);
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
