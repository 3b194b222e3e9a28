/* Conservative backfilling's plan on a processor pool, for the compiled pool core (_pool_core.c): the
 * free processors over time (the general loop's PlanProfile on one pooled node), kept in blocks that
 * know their least and most free, the searches for a waiting job's earliest start, and the filters a
 * compression asks before searching (the plan's staircase; per processor count, the stairs of its runs).
 * Included by the core after _pool_ledger.h: every function is static. */
#ifndef GREENSLURM_CONSERVATIVE_PLAN_H
#define GREENSLURM_CONSERVATIVE_PLAN_H

#include "_pool_ledger.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
    /* no two neighbouring steps before this one free the same (the merge in profile_advance starts
     * here: the steps before it are as a full merge would leave them); n when nothing changed */
    int64_t merged_upto;
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

/* block b's least and most free read from its steps (two at a time with SSE2: free counts are whole
 * numbers, never NaN, so its least and most are the plain loop's) */
static void profile_block_read(count_profile *p, int64_t b) {
    int64_t k = p->block_first[b], end = p->block_first[b + 1];
    double lo = p->free[k], hi = p->free[k];
    k++;
#ifdef __SSE2__
    if (end - k >= 2) {
        __m128d least = _mm_loadu_pd(&p->free[k]), most = least;
        for (k += 2; k + 2 <= end; k += 2) {
            __m128d two = _mm_loadu_pd(&p->free[k]);
            least = _mm_min_pd(least, two); most = _mm_max_pd(most, two);
        }
        double l[2], h[2];
        _mm_storeu_pd(l, least); _mm_storeu_pd(h, most);
        for (int i = 0; i < 2; i++) { if (l[i] < lo) lo = l[i]; if (h[i] > hi) hi = h[i]; }
    }
#endif
    for (; k < end; k++) { if (p->free[k] < lo) lo = p->free[k]; if (p->free[k] > hi) hi = p->free[k]; }
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
    p->merged_upto = 1;
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
    /* steps i - 1 and i may now free the same, and j - 1 and j, as may a breakpoint inserted and the
     * step it copies (both at or after i - 1) */
    if (i < p->merged_upto) p->merged_upto = i;
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
        p->merged_upto -= i;
    }
    if (p->times[0] < now) p->times[0] = now;
    /* the steps before merged_upto have no equal neighbours: the merge from there leaves the plan as
     * a merge from step 1 would */
    int64_t kept = p->merged_upto > 1 ? p->merged_upto : 1;
    for (int64_t k = kept; k < p->n; k++) {
        if (p->free[k] != p->free[kept - 1]) { p->times[kept] = p->times[k]; p->free[kept] = p->free[k]; kept++; }
    }
    p->n = kept;
    p->merged_upto = kept;
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

/* Where a waiting job reserved at `old` (after `now`) could start earlier (`at_old`: the first step at
 * or after old, or -1), as profile_earliest would
 * answer once the job gave its slot [old, old + duration) back, without giving it back: a window
 * starting before old ends before old + duration, so from old on the job's own processors are free
 * again and a step there holds it when it frees at least 0 (the give-back adds exactly `processors`
 * there); before old a step must free `processors`.  Whole blocks of steps that cannot start or stop
 * a window are skipped.  NAN: no earlier start; -1 with p->error set: no memory. */
static double profile_earliest_move(count_profile *p, double processors, double duration, double now, double old,
                                    int64_t at_old) {
    int64_t first = upper_bound(p->times, p->n, now) - 1;
    if (first < 0) first = 0;
    /* steps from at_old start at old or later (-1: not known yet, found here) */
    if (at_old < 0) at_old = lower_bound(p->times, p->n, old);
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

/* Bit i set when step `from` + i (i < len <= 64) frees at least `processors`, built without a branch
 * per step: a count's runs are a few steps long, so a scan that branches on each step is mispredicted
 * at nearly every run's two ends. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX2__)
#define STEPS_AVX2 1
#include <immintrin.h>
/* The same bits four steps a compare, where the processor has AVX2 (chosen once at run time): the
 * ordered >= of free counts, which are never NaN, is the plain loop's >=. */
__attribute__((target("avx2"))) static uint64_t steps_freeing_at_least_avx2(const double *f, int64_t len,
                                                                            double processors) {
    uint64_t bits = 0;
    int64_t i = 0;
    __m256d at = _mm256_set1_pd(processors);
    if (len == 64) {              /* a whole word, as nearly every one is: 16 compares unrolled */
#pragma GCC unroll 16
        for (int q = 0; q < 16; q++)
            bits |= (uint64_t)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(f + 4 * q), at, _CMP_GE_OQ)) << (4 * q);
        return bits;
    }
    for (; i + 4 <= len; i += 4)
        bits |= (uint64_t)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(f + i), at, _CMP_GE_OQ)) << i;
    for (; i < len; i++) bits |= (uint64_t)(f[i] >= processors) << i;
    return bits;
}
static int has_avx2 = -1;         /* -1: not asked yet */
#endif

static uint64_t steps_freeing_at_least(const count_profile *p, int64_t from, int64_t len, double processors) {
    uint64_t bits = 0;
    int64_t i = 0;
    const double *f = p->free + from;
#ifdef STEPS_AVX2
    if (has_avx2 < 0) has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (has_avx2) return steps_freeing_at_least_avx2(f, len, processors);
#endif
#ifdef __SSE2__
    __m128d at = _mm_set1_pd(processors);          /* two steps a compare: the same >= as below */
    if (len == 64) {              /* a whole word: 32 compares unrolled */
#pragma GCC unroll 32
        for (int q = 0; q < 32; q++)
            bits |= (uint64_t)_mm_movemask_pd(_mm_cmpge_pd(_mm_loadu_pd(f + 2 * q), at)) << (2 * q);
        return bits;
    }
    for (; i + 2 <= len; i += 2) bits |= (uint64_t)_mm_movemask_pd(_mm_cmpge_pd(_mm_loadu_pd(f + i), at)) << i;
#endif
    for (; i < len; i++) bits |= (uint64_t)(f[i] >= processors) << i;
    return bits;
}

/* The run of steps first .. end - 1 (end: the next step freeing fewer, or n) read into the stairs at
 * their end (every stair starts at or before the run's start); `longest`: what the last stair lasts
 * (kept by the caller).  1: the question is answered (the run lasts `duration`, or ends at or after
 * `before`), 0: not, -1: no memory.  *to_out: where the run ends. */
static inline int run_stairs_read(run_stairs *r, const count_profile *p, int64_t first, int64_t end, double now,
                                  double duration, double before, double *longest, double *to_out) {
    double from = p->times[first] > now ? p->times[first] : now;
    double to = end < p->n ? p->times[end] : INFINITY, lasts = run_lasts(from, to);
    if (r->n == 0 || *longest < lasts) {
        if (run_stairs_room(r, r->n + 1) < 0) return -1;
        r->start[r->n] = from; r->lasts[r->n] = lasts; r->n++;
        *longest = lasts;
    }
    *to_out = to;
    return lasts >= duration || !(to < before);
}

/* the stairs of count `processors` from the plan (it starts at now) for the runs starting before
 * `upto` on, until one lasting `duration` or one starting at or after `before` is in; the steps are
 * read 64 at a time as bits (freeing that many or not), and the runs' first and end steps found as
 * the bits where freeing that many starts and stops (each taken with a count of trailing zeros and
 * cleared); -1: no memory */
static int run_stairs_extend(run_stairs *r, const count_profile *p, double processors, double now, double duration,
                             double before) {
    int64_t k = lower_bound(p->times, p->n, r->upto), run = -1;     /* run: the open run's first step */
    double longest = r->n > 0 ? r->lasts[r->n - 1] : -INFINITY, to = INFINITY;
    while (k < p->n) {
        int64_t len = p->n - k < 64 ? p->n - k : 64;
        uint64_t at_least = steps_freeing_at_least(p, k, len, processors);
        uint64_t in_word = len == 64 ? ~(uint64_t)0 : ((uint64_t)1 << len) - 1;
        /* bit i of `before_at_least`: step k + i - 1 frees at least processors (bit 0: a run is open) */
        uint64_t before_at_least = (at_least << 1) | (run >= 0);
        uint64_t starts = at_least & ~before_at_least, ends = ~at_least & in_word & before_at_least;
        for (;;) {
            if (run < 0) {
                if (!starts) break;
                run = k + __builtin_ctzll(starts);
                starts &= starts - 1;
            }
            if (!ends) break;
            int64_t end = k + __builtin_ctzll(ends);
            ends &= ends - 1;
            int answered = run_stairs_read(r, p, run, end, now, duration, before, &longest, &to);
            if (answered) { r->upto = to; return answered < 0 ? -1 : 0; }
            run = -1;
        }
        k += len;
    }
    if (run >= 0 && run_stairs_read(r, p, run, p->n, now, duration, before, &longest, &to) < 0) return -1;
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

#endif
