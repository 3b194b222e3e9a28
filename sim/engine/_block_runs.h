/* A block of the conservative plan's steps (at most 64) summarised per processor count between its
 * least and most free: where its first and last steps freeing fewer lie, and how long the longest run
 * of steps freeing that many lasts between them (a run: from a step freeing the count to the next
 * freeing fewer).  A count's runs are a few steps long, so reading them step by step cost the plan's
 * length at every question, most of it on blocks read before; with these summaries a block whose inner
 * runs are all too short for the question is passed over in one look.  Included by
 * _conservative_plan.h: every function is static. */
#ifndef GREENSLURM_BLOCK_RUNS_H
#define GREENSLURM_BLOCK_RUNS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BLOCK_RUNS_MOST_STEPS 64    /* the steps a summarised block may hold (one bit each) */

/* how long a run from `from` to `to` may last, rounding allowed for */
static double run_lasts(double from, double to) {
    return to - from + 1e-9 * (fabs(to) + fabs(from));
}

/* Bit i set when free[i] (i < len <= 64) is at least `processors`, built without a branch per step: a
 * count's runs are a few steps long, so a scan that branches on each step is mispredicted at nearly
 * every run's two ends. */
static inline __attribute__((always_inline)) uint64_t steps_freeing_at_least(const double *free, int64_t len, double processors) {
    uint64_t bits = 0;
    int64_t i = 0;
#ifdef __SSE2__
    __m128d at = _mm_set1_pd(processors);          /* two steps a compare: the same >= as below */
    for (; i + 2 <= len; i += 2) bits |= (uint64_t)_mm_movemask_pd(_mm_cmpge_pd(_mm_loadu_pd(free + i), at)) << i;
#endif
    for (; i < len; i++) bits |= (uint64_t)(free[i] >= processors) << i;
    return bits;
}

/* the first set bit of `bits` at or after `at` (64: none) */
static inline __attribute__((always_inline)) int first_bit_from(uint64_t bits, int at) {
    if (at >= 64) return 64;
    bits >>= at;
    return bits ? at + __builtin_ctzll(bits) : 64;
}

/* One summary per block (a slot) and count, indexed by t = count - the block's least free (1 <= t <=
 * most - least; a count at or below the least frees the whole block, one above the most none of it).
 * They hold relative to the least, so a change covering a block whole (the same whole number added to
 * every step) leaves them true; a change covering it in part, or a step inserted into it, makes them
 * stale.  A count's summary is worked out when first asked for (one pass over the block's bits).
 * `stride` bounds most - least + 1: the pool's processors + 1 (no step frees more than the pool, none
 * fewer than 0). */
typedef struct {
    int64_t stride;
    int64_t used, cap;                 /* slots handed out since the blocks were cut, and room */
    unsigned char *fresh;              /* per slot: its per-count marks below hold for the block as it is */
    unsigned char *known;              /* per slot and t: the summary is worked out */
    int8_t *first_below, *last_below;  /* per slot and t: the block's first and last step freeing fewer */
    double *longest;                   /* per slot and t: the longest run wholly between them (-INFINITY: none) */
} block_runs;

/* a slot for a block (its summaries stale); -1: no memory */
static int64_t block_runs_slot(block_runs *s) {
    if (s->used == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        size_t counts = (size_t)(cap * s->stride);
        unsigned char *fresh = realloc(s->fresh, (size_t)cap);
        if (!fresh) return -1;
        s->fresh = fresh;
        unsigned char *known = realloc(s->known, counts);
        if (!known) return -1;
        s->known = known;
        int8_t *first = realloc(s->first_below, counts);
        if (!first) return -1;
        s->first_below = first;
        int8_t *last = realloc(s->last_below, counts);
        if (!last) return -1;
        s->last_below = last;
        double *longest = realloc(s->longest, sizeof(double) * counts);
        if (!longest) return -1;
        s->longest = longest;
        s->cap = cap;
    }
    s->fresh[s->used] = 0;
    return s->used++;
}

/* The summary of count `processors` for the block in `slot` whose m steps (1 <= m <= 64) free
 * free[0 .. m - 1] at times[0 .. m - 1], the least `least`, and some step frees fewer than the count
 * and some at least as many; worked out on first asking.  Returns its index in the slot arrays. */
static int64_t block_runs_of(block_runs *s, int64_t slot, const double *times, const double *free, int64_t m,
                             double least, double processors) {
    if (!s->fresh[slot]) {
        memset(s->known + slot * s->stride, 0, (size_t)s->stride);
        s->fresh[slot] = 1;
    }
    int64_t at = slot * s->stride + (int64_t)(processors - least);
    if (s->known[at]) return at;
    uint64_t at_least = steps_freeing_at_least(free, m, processors);
    uint64_t below = ~at_least & (m == 64 ? ~(uint64_t)0 : ((uint64_t)1 << m) - 1);    /* never 0 here */
    int first = __builtin_ctzll(below), last = 63 - __builtin_clzll(below);
    double longest = -INFINITY;
    for (int k = first;;) {            /* each run after a step freeing fewer, up to the next such step */
        int run = first_bit_from(at_least, k);
        if (run >= last) break;
        k = first_bit_from(below, run);
        double lasts = run_lasts(times[run], times[k]);
        if (lasts > longest) longest = lasts;
    }
    s->first_below[at] = (int8_t)first; s->last_below[at] = (int8_t)last; s->longest[at] = longest;
    s->known[at] = 1;
    return at;
}

#endif
