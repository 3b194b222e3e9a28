/* The deadline core's index of free gaps across nodes: every node's holes between two busy spans
 * (not the time before its first span nor after its last: those are one per node, read from the
 * node's plan), filed by where they begin in buckets of a fixed width of time, with a bound on each
 * bucket's greatest hole_room and greatest end.  A waiting job's search for an earlier start reads the
 * buckets up to its bound and passes over every bucket none of whose holes can hold it (too short,
 * or ending by the first possible start), where the scan of every node read each node's spans
 * around the job's window (a binary search and blocks of holes per node, 100 nodes a look).
 *
 * Bucket k holds the holes beginning in [origin + k width, origin + (k + 1) width); a time before
 * the origin goes to bucket 0 and one past the last bucket (or not finite) to the last, so the
 * bucket of a time never decreases with it: the holes beginning before t are in buckets up to
 * bucket_of(t), whatever the times.  The index holds exactly the interior holes of the node plans
 * (gap_index_check tells).  The maxima of a bucket and of a block of buckets are bounds: a hole
 * added or grown raises them, one taken out or shrunk leaves them, and the search that reads a
 * bucket's holes sets its maxima to theirs (gap_bucket_read), so a bucket is read again only while
 * a hole in it may hold a job.
 *
 * The node plans keep each hole's place (its slot) in its bucket beside their spans, so a change
 * finds its entry at once instead of scanning the bucket.  A hole taken out leaves its place to the
 * bucket's last entry (a search reads no empty places); the index notes that entry (`moved_*`) and
 * the node plans file its new slot before the next change (slot_moved in _deadline_node_plans.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <math.h>

#define GAP_BUCKETS_MOST 65536
#define GAP_BLOCK 32

typedef struct { double g0, g1, room; int64_t node; } hole_entry;   /* node free over [g0, g1), hole_room */
typedef struct { hole_entry *at; int64_t n, cap; } hole_bucket;
typedef struct {
    double origin, width;
    hole_bucket *bucket;
    double *most_room, *most_end;      /* per bucket: at least its holes' greatest hole_room and g1 */
    double *block_room, *block_end;    /* per block of GAP_BLOCK buckets: at least their greatest */
    int64_t n_buckets, low;            /* buckets allocated; below `low` every bucket is empty */
    int64_t holes;
    /* the entry the last hole taken out moved to its place: its node (-1: none moved), start, new slot */
    int64_t moved_node, moved_slot;
    double moved_g0;
} gap_index;

/* an upper bound on the p with g0 + p <= g1 as rounded (g0 <= g1; g0 may be raised by the caller: the
 * bound only falls).  max(now, g0) + p <= g1 rounded: p <= g1 - g0 + half a step at g1; their
 * difference is rounded by half a step at the larger magnitude: 1e-15 of it covers both, and 1e-300
 * the absolute error of results too small for a normal double.
 * A hole from 100 s to 160 s: 60 s and 1.6e-13 s (160 x 1e-15) more. */
static inline double hole_room(double g0, double g1) {
    double a = fabs(g0), b = fabs(g1);         /* fmax without its call: neither is NaN */
    return g1 - g0 + (a > b ? a : b) * 1e-15 + 1e-300;
}

/* the bucket of a hole beginning at t (monotone in t; see the file's text) */
static inline int64_t bucket_of(const gap_index *index, double t) {
    double k = (t - index->origin) / index->width;
    if (!(k >= 1.0)) return 0;                 /* before the origin's bucket's end, or NaN (-inf - -inf) */
    if (!(k < (double)(GAP_BUCKETS_MOST - 1))) return GAP_BUCKETS_MOST - 1;
    return (int64_t)k;
}

/* an empty index from `origin`, buckets `width` wide (width > 0 and finite, else 1 s); -1: no memory */
static int gap_index_init(gap_index *index, double origin, double width) {
    index->origin = isfinite(origin) ? origin : 0.0;
    index->width = width > 0.0 && isfinite(width) ? width : 1.0;
    index->n_buckets = 64;
    index->low = 0;
    index->holes = 0;
    index->bucket = calloc((size_t)index->n_buckets, sizeof(hole_bucket));
    index->moved_node = -1;
    index->most_room = malloc(sizeof(double) * (size_t)index->n_buckets);
    index->most_end = malloc(sizeof(double) * (size_t)index->n_buckets);
    index->block_room = malloc(sizeof(double) * (size_t)(index->n_buckets / GAP_BLOCK));
    index->block_end = malloc(sizeof(double) * (size_t)(index->n_buckets / GAP_BLOCK));
    if (!index->bucket || !index->most_room || !index->most_end || !index->block_room || !index->block_end) return -1;
    for (int64_t b = 0; b < index->n_buckets; b++) index->most_room[b] = index->most_end[b] = -INFINITY;
    for (int64_t b = 0; b < index->n_buckets / GAP_BLOCK; b++) index->block_room[b] = index->block_end[b] = -INFINITY;
    return 0;
}

static void gap_index_free(gap_index *index) {
    if (index->bucket) for (int64_t b = 0; b < index->n_buckets; b++) free(index->bucket[b].at);
    free(index->bucket); free(index->most_room); free(index->most_end); free(index->block_room); free(index->block_end);
}

/* bucket b holds a hole of this room and end: its maxima and its block's raised to them */
static inline void maxima_raised(gap_index *index, int64_t b, double room, double end) {
    if (room > index->most_room[b]) index->most_room[b] = room;
    if (end > index->most_end[b]) index->most_end[b] = end;
    if (room > index->block_room[b / GAP_BLOCK]) index->block_room[b / GAP_BLOCK] = room;
    if (end > index->block_end[b / GAP_BLOCK]) index->block_end[b / GAP_BLOCK] = end;
}

/* the buckets up to b allocated; -1: no memory */
static int buckets_to(gap_index *index, int64_t b) {
    if (b >= index->n_buckets) {
        int64_t grown_n = index->n_buckets;
        while (grown_n <= b) grown_n *= 2;
        if (grown_n > GAP_BUCKETS_MOST) grown_n = GAP_BUCKETS_MOST;
        hole_bucket *buckets = realloc(index->bucket, sizeof(hole_bucket) * (size_t)grown_n);
        if (!buckets) return -1;
        index->bucket = buckets;
        double *room = realloc(index->most_room, sizeof(double) * (size_t)grown_n);
        if (!room) return -1;
        index->most_room = room;
        double *end = realloc(index->most_end, sizeof(double) * (size_t)grown_n);
        if (!end) return -1;
        index->most_end = end;
        double *block_room = realloc(index->block_room, sizeof(double) * (size_t)(grown_n / GAP_BLOCK));
        if (!block_room) return -1;
        index->block_room = block_room;
        double *block_end = realloc(index->block_end, sizeof(double) * (size_t)(grown_n / GAP_BLOCK));
        if (!block_end) return -1;
        index->block_end = block_end;
        for (int64_t k = index->n_buckets; k < grown_n; k++) {
            buckets[k].at = NULL; buckets[k].n = buckets[k].cap = 0;
            room[k] = end[k] = -INFINITY;
        }
        for (int64_t k = index->n_buckets / GAP_BLOCK; k < grown_n / GAP_BLOCK; k++) block_room[k] = block_end[k] = -INFINITY;
        index->n_buckets = grown_n;
    }
    return 0;
}

/* node `node` free over [g0, g1) between two of its spans, filed in bucket b (bucket_of(g0), allocated):
 * its slot there, or -1: no memory */
static int64_t hole_filed(gap_index *index, int64_t b, int64_t node, double g0, double g1) {
    hole_bucket *bucket = &index->bucket[b];
    if (bucket->n == bucket->cap) {
        int64_t cap = bucket->cap ? 2 * bucket->cap : 8;
        hole_entry *grown = realloc(bucket->at, sizeof(hole_entry) * (size_t)cap);
        if (!grown) return -1;
        bucket->at = grown; bucket->cap = cap;
    }
    int64_t slot = bucket->n++;
    hole_entry *entry = &bucket->at[slot];
    entry->g0 = g0; entry->g1 = g1; entry->room = hole_room(g0, g1); entry->node = node;
    maxima_raised(index, b, entry->room, g1);
    if (b < index->low) index->low = b;
    index->holes++;
    return slot;
}

/* node `node` free over [g0, g1) between two of its spans: its slot in bucket_of(g0), or -1: no memory */
static int64_t gap_add(gap_index *index, int64_t node, double g0, double g1) {
    int64_t b = bucket_of(index, g0);
    if (buckets_to(index, b) < 0) return -1;
    return hole_filed(index, b, node, g0, g1);
}

/* node's hole beginning at g0, at `slot` of its bucket, *b (NULL: not there, never when the index is kept) */
static inline hole_entry *gap_entry(gap_index *index, int64_t node, double g0, int64_t slot, int64_t *b) {
    *b = bucket_of(index, g0);
    if (*b >= index->n_buckets || slot < 0 || slot >= index->bucket[*b].n) return NULL;
    hole_entry *entry = &index->bucket[*b].at[slot];
    return entry->g0 == g0 && entry->node == node ? entry : NULL;
}

/* the hole at `slot` of bucket b gone: the bucket's last entry takes its place (noted in moved_*) */
static void hole_freed(gap_index *index, int64_t b, int64_t slot) {
    hole_bucket *bucket = &index->bucket[b];
    index->moved_node = -1;
    if (slot != --bucket->n) {                       /* the maxima stay above: bounds */
        bucket->at[slot] = bucket->at[bucket->n];
        index->moved_node = bucket->at[slot].node; index->moved_g0 = bucket->at[slot].g0; index->moved_slot = slot;
    }
    if (bucket->n == 0) { free(bucket->at); bucket->at = NULL; bucket->cap = 0; }   /* grows anew if need be */
    index->holes--;
}

/* node's hole beginning at g0, at `slot`, is gone (filled, or begins elsewhere now); -4: not held */
static int gap_remove(gap_index *index, int64_t node, double g0, int64_t slot) {
    int64_t b;
    if (!gap_entry(index, node, g0, slot, &b)) return -4;
    hole_freed(index, b, slot);
    return 0;
}

/* node's hole beginning at g0, at `slot`, now ends at g1; -4: not held */
static int gap_set_end(gap_index *index, int64_t node, double g0, int64_t slot, double g1) {
    int64_t b;
    hole_entry *entry = gap_entry(index, node, g0, slot, &b);
    if (!entry) return -4;
    entry->g1 = g1; entry->room = hole_room(g0, g1);
    maxima_raised(index, b, entry->room, g1);
    return 0;
}

/* node's hole beginning at g0, at `slot`, begins at new_g0 now (its end as it was): its slot (the same
 * while new_g0 falls in the same bucket), or -4: not held, -1: no memory */
static int64_t gap_set_start(gap_index *index, int64_t node, double g0, int64_t slot, double new_g0) {
    int64_t b;
    hole_entry *entry = gap_entry(index, node, g0, slot, &b);
    if (!entry) return -4;
    int64_t new_b = bucket_of(index, new_g0);
    double g1 = entry->g1;
    if (new_b != b) {
        hole_freed(index, b, slot);
        if (buckets_to(index, new_b) < 0) return -1;
        return hole_filed(index, new_b, node, new_g0, g1);
    }
    entry->g0 = new_g0; entry->room = hole_room(new_g0, g1);
    maxima_raised(index, b, entry->room, g1);
    return slot;
}

/* bucket b's maxima set to its holes' (read by a search: see the file's text) */
static inline void gap_bucket_read(gap_index *index, int64_t b, double room, double end) {
    index->most_room[b] = room; index->most_end[b] = end;
}

/* the block of buckets from `first` (a multiple of GAP_BLOCK), every one read: its maxima set to theirs */
static void gap_block_read(gap_index *index, int64_t first) {
    double room = -INFINITY, end = -INFINITY;
    for (int64_t b = first; b < first + GAP_BLOCK; b++) {
        if (index->most_room[b] > room) room = index->most_room[b];
        if (index->most_end[b] > end) end = index->most_end[b];
    }
    index->block_room[first / GAP_BLOCK] = room; index->block_end[first / GAP_BLOCK] = end;
}

