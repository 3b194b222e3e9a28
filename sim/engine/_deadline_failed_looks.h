/* The deadline core's failed looks of one compression pass: what a waiting job that found no earlier
 * start proves about the jobs after it in the pass.
 *
 * A failed look by job A (m_A nodes, requested time p_A, its own slot from old_A) at an instant
 * `now` proves: in the plan as it is, with A's slot given back, no start t in [now, old_A) finds m_A
 * nodes free over [t, t + p_A).  While the plan only gains reservations and loses ones that could not
 * have held A (freed_may_hold false for A: the argument of freed_before), that stays true.  Then a
 * later job B with m_B >= m_A and p_B >= p_A, which the log of reservations taken out bounds below
 * `bound` (any start of B lies before it), has no start before bound either when old_A >= bound and
 * bound + p_A <= old_B as rounded: a start t < bound of B on m_B nodes leaves them free over [t, t +
 * p_A) (p_A <= p_B; t + p_A <= bound + p_A <= old_B, rounding being monotone, so before B's own
 * slot: free with B in the plan too, and so with A's slot given back), at t < old_A: A would have
 * started there.  Such a B is passed over without reading the free counts or the nodes, and its
 * look failed too.
 *
 * A look is kept only when no kept one serves every job it serves: X is dropped for Y when m_Y <=
 * m_X, p_Y <= p_X and old_Y >= old_X (Y passes every test X passes).  At most FAILED_LOOKS_MOST are
 * kept (a look found when the set is full is not kept: fewer jobs passed over, the same answers).
 */
#include <stdint.h>
#include <math.h>

/* a reservation [from, to) taken out of the plan at `now`, and over its nodes the free gaps [g0, g1)
 * holding it then: gap_from the least max(now, g0), gap_to the greatest g1, room the greatest
 * g1 - max(now, g0) (rounded up: any p with max(now, g0) + p <= g1 is at most room) */
typedef struct { double from, to, gap_from, gap_to, room; } freed;

/* whether the reservation taken out (or a block's summary of them: least from and gap_from, greatest
 * to, gap_to and room) may have let a job with its own slot from `old`, requested time p, start at
 * some t in [now, old) with t < to and to > bound (see freed_before for the argument) */
static inline int freed_may_hold(const freed *out, double now, double bound, double old, double p) {
    return out->to > now && out->to > bound && (out->from < old + p || out->from < old)
           && (out->gap_to >= old || (out->gap_from < old && p <= out->room));
}

typedef struct { int64_t job, m; double p, old; } failed_look;
#define FAILED_LOOKS_MOST 64
typedef struct { failed_look at[FAILED_LOOKS_MOST]; int64_t n; } failed_looks;

/* job (m nodes, p, own slot from old) found no start before old: kept unless a kept look serves
 * every job it would, dropping those it serves likewise (one pass: a look that serves this one
 * serves none this one serves, or it would serve it too) */
static void failed_looks_add(failed_looks *looks, int64_t job, int64_t m, double p, double old) {
    int64_t kept = 0;
    for (int64_t k = 0; k < looks->n; k++) {
        const failed_look *x = &looks->at[k];
        if (x->m <= m && x->p <= p && x->old >= old) return;          /* x serves it: nothing changed */
        if (!(m <= x->m && p <= x->p && old >= x->old)) looks->at[kept++] = *x;
    }
    looks->n = kept;
    if (kept == FAILED_LOOKS_MOST) return;
    failed_look *look = &looks->at[looks->n++];
    look->job = job; look->m = m; look->p = p; look->old = old;
}

/* a reservation was taken out: the looks it may have let start are no longer proofs */
static void failed_looks_taken_out(failed_looks *looks, const freed *out, double now) {
    int64_t kept = 0;
    for (int64_t k = 0; k < looks->n; k++) {
        const failed_look *x = &looks->at[k];
        if (!freed_may_hold(out, now, -INFINITY, x->old, x->p)) looks->at[kept++] = *x;
    }
    looks->n = kept;
}

/* whether a kept look proves that a job of m nodes and requested time p, its own slot from old,
 * has no start before `bound` (see the text above).  A failed on 2 nodes for 10 s, its slot from 50
 * s; B on 3 nodes for 20 s from 60 s, bounded by 40 s: covered (50 >= 40 and 40 + 10 <= 60), and a
 * start of B at 35 s would have left A 2 nodes over [35, 45), before B's slot; bounded by 55 s (past
 * A's 50) or with its slot from 45 s (40 + 10 > 45, a window into B's own slot), not covered. */
static int failed_looks_cover(const failed_looks *looks, int64_t m, double p, double old, double bound) {
    for (int64_t k = 0; k < looks->n; k++) {
        const failed_look *a = &looks->at[k];
        if (a->m <= m && a->p <= p && a->old >= bound && bound + a->p <= old) return 1;
    }
    return 0;
}
