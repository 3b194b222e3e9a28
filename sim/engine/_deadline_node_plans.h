/* The deadline core's node plans: each node's reservations as busy spans, touching ones merged
 * (a node holds one job at a time, so its plan is their union and its tail the last span's end),
 * with summaries of the holes between them for the search of an earlier start, and the gap index
 * (_deadline_gap_index.h) told of every hole between two spans that changes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "_deadline_gap_index.h"

typedef struct { double start, end; } span;                  /* a node busy over [start, end) */
/* a node's busy spans by start; its holes (hole h: from span h - 1's end to span h's start, h >= 1) in
 * blocks of HOLE_BLOCK by number, block b holding holes [b HOLE_BLOCK, (b + 1) HOLE_BLOCK), with each
 * block's greatest hole_room in room[b] for the blocks before `ready` (changes lower it: see busy_add);
 * kept beside them, read without the spans: the first span's start (INFINITY: none) and the last one's
 * end (-INFINITY: none); beside each span h (h >= 1) the slot of hole h in the gap index, moved with
 * the spans, so a change of a hole finds its entry without a search */
typedef struct {
    span *at;
    int32_t *hole_at;                 /* hole h's slot in its bucket of the gap index (h >= 1) */
    double *room;
    int64_t n, cap, ready;
    double first_start, last_end;
} span_list;
#define HOLE_BLOCK 8

/* first index whose span starts after s (bisect_right on the starts) */
static int64_t span_after(const span_list *list, double s) {
    int64_t lo = 0, hi = list->n;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (list->at[mid].start <= s) lo = mid + 1; else hi = mid; }
    return lo;
}

/* room for one more span in the list; -1: no memory */
static int spans_room(span_list *list) {
    if (list->n < list->cap) return 0;
    int64_t cap = list->cap ? 2 * list->cap : 4;
    span *grown = grown_array(list->at, cap, sizeof(span));
    if (!grown) return -1;
    list->at = grown;
    int32_t *hole_at = grown_array(list->hole_at, cap, sizeof(int32_t));
    if (!hole_at) return -1;
    list->hole_at = hole_at;
    double *room = grown_array(list->room, cap / HOLE_BLOCK + 1, sizeof(double));
    if (!room) return -1;
    list->room = room; list->cap = cap;
    return 0;
}

/* the greatest hole_room of block b's holes (-INFINITY: none) */
static double block_room(const span_list *list, int64_t b) {
    int64_t h = b * HOLE_BLOCK, stop = h + HOLE_BLOCK < list->n ? h + HOLE_BLOCK : list->n;
    double most = -INFINITY;
    if (h == 0) h = 1;
    for (; h < stop; h++) {
        double room = hole_room(list->at[h - 1].end, list->at[h].start);
        if (room > most) most = room;
    }
    return most;
}

/* the holes' blocks of `list` known up to block `block` (see span_list) */
static void holes_ready(span_list *list, int64_t block) {
    for (; list->ready <= block; list->ready++) list->room[list->ready] = block_room(list, list->ready);
}

/* hole h's hole_room (-INFINITY: no hole h) */
static inline double hole_of(const span_list *list, int64_t h) {
    return h >= 1 && h < list->n ? hole_room(list->at[h - 1].end, list->at[h].start) : -INFINITY;
}

/* hole h alone changed, its room was `old_room`, no span renumbered: its block's greatest kept exact
 * (from a hole that grew it is the new room; one that shrank from below the greatest leaves it; one
 * that was the greatest has it worked out again) */
static void hole_changed(span_list *list, int64_t h, double old_room) {
    if (h < 1 || h >= list->n) return;
    double room = hole_of(list, h);
    int64_t block = h / HOLE_BLOCK;
    if (block < list->ready) {
        if (room >= list->room[block]) list->room[block] = room;
        else if (old_room >= list->room[block]) list->room[block] = block_room(list, block);
    }
}

/* the spans from number `changed` on moved or changed: the blocks of holes from there on are not known */
static inline void holes_changed(span_list *list, int64_t changed) {
    int64_t block = changed > 0 ? changed / HOLE_BLOCK : 0;
    if (block < list->ready) list->ready = block;
}

/* the list's first start and last end again after a change */
static inline void spans_ends(span_list *list) {
    list->first_start = list->n > 0 ? list->at[0].start : INFINITY;
    list->last_end = list->n > 0 ? list->at[list->n - 1].end : -INFINITY;
}

/* the entry the index moved when it took a hole out (gap_remove, gap_set_start) filed at its new slot in
 * its node's plan: that node's hole beginning at its start (spans and slots as they were numbered
 * when the hole was taken out) */
static void slot_moved(span_list *busy, gap_index *index) {
    if (index->moved_node < 0) return;
    span_list *list = &busy[index->moved_node];
    list->hole_at[span_after(list, index->moved_g0)] = (int32_t)index->moved_slot;
    index->moved_node = -1;
}

/* a hole's slot from gap_add or gap_set_start kept for hole h, or its status (< 0) passed on */
static inline int slot_kept(span_list *list, int64_t h, int64_t slot) {
    if (slot < 0) return (int)slot;
    list->hole_at[h] = (int32_t)slot;                /* at most a bucket's entries: far below 2^31 */
    return 0;
}

/* node n busy over [s, e) too (e > s): merged with the spans it touches, the gap index told of the
 * holes between spans it changes; -1: no memory, -4: it overlaps a span (two reservations at once on
 * a node: never in a plan) or the index lacks a hole (never when kept) */
static int busy_add(span_list *busy, gap_index *index, int32_t n, double s, double e) {
    span_list *list = &busy[n];
    int64_t k = span_after(list, s);
    if ((k > 0 && list->at[k - 1].end > s) || (k < list->n && list->at[k].start < e)) return -4;
    int left = k > 0 && list->at[k - 1].end == s, right = k < list->n && list->at[k].start == e;
    int inner = k > 0 && k < list->n;             /* [s, e) lies in hole k, between two spans */
    if (left != right) {              /* span k - 1's end or span k's start moves: hole k alone changes */
        double old_room = hole_of(list, k);
        if (inner) {
            int status = left ? slot_kept(list, k, gap_set_start(index, n, s, list->hole_at[k], e))  /* begins at e */
                              : gap_set_end(index, n, list->at[k - 1].end, list->hole_at[k], s);
            if (status < 0) return status;
            slot_moved(busy, index);
        }
        if (left) list->at[k - 1].end = e; else list->at[k].start = s;
        hole_changed(list, k, old_room);
    } else if (left) {                /* hole k filled: spans k - 1 and k merge, hole k + 1 becomes hole k */
        if (gap_remove(index, n, s, list->hole_at[k]) < 0) return -4;
        slot_moved(busy, index);
        holes_changed(list, k - 1);
        list->at[k - 1].end = list->at[k].end;
        memmove(&list->at[k], &list->at[k + 1], sizeof(span) * (size_t)(list->n - k - 1));
        memmove(&list->hole_at[k], &list->hole_at[k + 1], sizeof(int32_t) * (size_t)(list->n - k - 1));
        list->n--;
    } else {                          /* a span of its own in hole k (or before the first, after the last) */
        int64_t slot = 0;             /* the new hole's: after the new span (inner, first) or before it (last) */
        if (inner) {
            if (gap_set_end(index, n, list->at[k - 1].end, list->hole_at[k], s) < 0) return -4;
            slot = gap_add(index, n, e, list->at[k].start);
        } else if (k == 0 && list->n > 0) {
            slot = gap_add(index, n, e, list->at[0].start);
        } else if (k > 0) {
            slot = gap_add(index, n, list->at[k - 1].end, s);
        }
        if (slot < 0) return -1;
        holes_changed(list, k);
        if (spans_room(list) < 0) return -1;
        memmove(&list->at[k + 1], &list->at[k], sizeof(span) * (size_t)(list->n - k));
        memmove(&list->hole_at[k + 1], &list->hole_at[k], sizeof(int32_t) * (size_t)(list->n - k));
        list->at[k].start = s; list->at[k].end = e;
        list->n++;
        /* hole k (inner: the old one, shortened, its slot where it was) and hole k + 1 the new one; at the
         * list's end the new hole is hole k */
        if (k + 1 < list->n) list->hole_at[k + 1] = (int32_t)slot; else if (k > 0) list->hole_at[k] = (int32_t)slot;
    }
    spans_ends(list);
    return 0;
}

/* node n no longer busy over [s, e), a reservation it held: the span holding it splits, the gap
 * index told of the holes between spans it changes; *next: the first span starting after s then.
 * -1: no memory, -4: no span holds it (never in a plan) or the index lacks a hole (never when kept) */
static int busy_remove(span_list *busy, gap_index *index, int32_t n, double s, double e, int64_t *next) {
    span_list *list = &busy[n];
    int64_t k = span_after(list, s) - 1;
    if (k < 0 || list->at[k].end < e) return -4;
    double before = list->at[k].start, after = list->at[k].end;
    *next = before < s ? k + 1 : k;
    if (before < s && e < after) {    /* a new hole k + 1 from s to e, between span k and a new span k + 1 */
        int64_t slot = gap_add(index, n, s, e);
        if (slot < 0) return -1;
        holes_changed(list, k);
        if (spans_room(list) < 0) return -1;
        memmove(&list->at[k + 2], &list->at[k + 1], sizeof(span) * (size_t)(list->n - k - 1));
        memmove(&list->hole_at[k + 2], &list->hole_at[k + 1], sizeof(int32_t) * (size_t)(list->n - k - 1));
        list->at[k].end = s;
        list->at[k + 1].start = e; list->at[k + 1].end = after;
        list->hole_at[k + 1] = (int32_t)slot;
        list->n++;
    } else if (before < s) {          /* span k's end moves: hole k + 1 (after it) begins at s */
        if (k + 1 < list->n) {
            int status = slot_kept(list, k + 1, gap_set_start(index, n, e, list->hole_at[k + 1], s));
            if (status < 0) return status;
            slot_moved(busy, index);
        }
        double old_room = hole_of(list, k + 1);
        list->at[k].end = s;
        hole_changed(list, k + 1, old_room);
    } else if (e < after) {           /* span k's start moves: hole k (before it) ends at e */
        if (k > 0 && gap_set_end(index, n, list->at[k - 1].end, list->hole_at[k], e) < 0) return -4;
        double old_room = hole_of(list, k);
        list->at[k].start = e;
        hole_changed(list, k, old_room);
    } else {                          /* span k goes: holes k and k + 1 merge into hole k, its slot kept */
        if (k + 1 < list->n) {
            if (gap_remove(index, n, e, list->hole_at[k + 1]) < 0) return -4;
            slot_moved(busy, index);
        }
        if (k > 0) {
            int status = k + 1 < list->n
                ? gap_set_end(index, n, list->at[k - 1].end, list->hole_at[k], list->at[k + 1].start)
                : gap_remove(index, n, list->at[k - 1].end, list->hole_at[k]);
            if (status < 0) return -4;
            slot_moved(busy, index);
        }
        holes_changed(list, k);
        memmove(&list->at[k], &list->at[k + 1], sizeof(span) * (size_t)(list->n - k - 1));
        if (k + 2 < list->n)
            memmove(&list->hole_at[k + 1], &list->hole_at[k + 2], sizeof(int32_t) * (size_t)(list->n - k - 2));
        list->n--;
    }
    spans_ends(list);
    return 0;
}

/* whether the index holds exactly every node's holes between two spans, each at the slot its node plan
 * keeps for it, with their hole_room, none below `low`, the maxima of each bucket and block at least
 * their holes': 0, or -4 (a test's check after every change; see deadline_run's checks) */
static int gap_index_check(const gap_index *index, const span_list *busy, int64_t n_nodes) {
    int64_t holes = 0;
    if (index->moved_node >= 0) return -4;             /* a moved entry left unfiled */
    for (int64_t n = 0; n < n_nodes; n++) {
        const span_list *list = &busy[n];
        for (int64_t h = 1; h < list->n; h++) {
            double g0 = list->at[h - 1].end, g1 = list->at[h].start;
            int64_t b = bucket_of(index, g0), slot = list->hole_at[h];
            if (b >= index->n_buckets || b < index->low) return -4;
            const hole_bucket *bucket = &index->bucket[b];
            if (slot < 0 || slot >= bucket->n) return -4;
            const hole_entry *entry = &bucket->at[slot];
            if (entry->node != n || entry->g0 != g0 || entry->g1 != g1) return -4;
            holes++;
        }
    }
    if (holes != index->holes) return -4;
    int64_t held = 0;                   /* with every hole at its own slot: every entry is one hole's */
    for (int64_t b = 0; b < index->n_buckets; b++) {
        const hole_bucket *bucket = &index->bucket[b];
        double room = -INFINITY, end = -INFINITY;
        for (int64_t i = 0; i < bucket->n; i++) {
            if (bucket->at[i].room != hole_room(bucket->at[i].g0, bucket->at[i].g1)) return -4;
            if (bucket->at[i].room > room) room = bucket->at[i].room;
            if (bucket->at[i].g1 > end) end = bucket->at[i].g1;
        }
        if (room > index->most_room[b] || end > index->most_end[b]) return -4;
        held += bucket->n;
    }
    for (int64_t k = 0; k < index->n_buckets / GAP_BLOCK; k++) {
        double room = -INFINITY, end = -INFINITY;       /* the buckets' bounds: at most the block's */
        for (int64_t b = k * GAP_BLOCK; b < (k + 1) * GAP_BLOCK; b++) {
            if (index->most_room[b] > room) room = index->most_room[b];
            if (index->most_end[b] > end) end = index->most_end[b];
        }
        if (room > index->block_room[k] || end > index->block_end[k]) return -4;
    }
    return held == holes ? 0 : -4;
}
