/* The backfill cycle's node sets and its plan (NodeSpace of slurm_node_space.py: slots of time, each with its
 * available nodes), for _backfill_cycle.c, which includes it after its Cycle (one copy: the plan is read and
 * changed only here).  Node sets are little-endian arrays of 64-bit words, node i bit i % 64 of word i / 64. */
/* -- node sets ------------------------------------------------------------------------------------- */
static uint64_t *row_of(const Cycle *c, int64_t j) { return c->rows + j * c->words; }

static const uint64_t *part_of(const Cycle *c, int64_t p)
{
    return c->parts + (int64_t)c->table[c->order[p] * c->columns + COL_PART_ROW] * c->words;
}

static void and_into(uint64_t *out, const uint64_t *a, int64_t words)
{
    for (int64_t k = 0; k < words; k++)
        out[k] &= a[k];
}

static int64_t count_of(const uint64_t *set, int64_t words)
{
    int64_t count = 0;
    for (int64_t k = 0; k < words; k++)
        count += __builtin_popcountll(set[k]);
    return count;
}

static int meets(const uint64_t *a, const uint64_t *b, int64_t words)
{
    for (int64_t k = 0; k < words; k++)
        if (a[k] & b[k])
            return 1;
    return 0;
}

/* -- the plan (NodeSpace) ---------------------------------------------------------------------------- */
/* bisect_right(starts, t) */
static int64_t after(const Cycle *c, double t)
{
    int64_t lo = 0, hi = c->slots;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (t < c->starts[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* bisect_left(starts, t) */
static int64_t at_or_after(const Cycle *c, double t)
{
    int64_t lo = 0, hi = c->slots;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (c->starts[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* out &= rows[from:stop] */
static void and_rows(const Cycle *c, uint64_t *out, int64_t from, int64_t stop)
{
    for (int64_t j = from; j < stop; j++)
        and_into(out, row_of(c, j), c->words);
}

/* NodeSpace.walk_bits: out = nodes less those reserved in any slot meeting [start_s, end_s]; returns where a
 * job that cannot start at start_s tries next (0: nowhere) */
static double walk(const Cycle *c, double start_s, double end_s, const uint64_t *nodes, uint64_t *out)
{
    int64_t w = c->words;
    memcpy(out, nodes, sizeof(uint64_t) * (size_t)w);
    if (start_s >= c->plan_end)
        return 0.0;
    int64_t first = after(c, start_s) - 1;
    if (first < 0)
        first = 0;
    int64_t stop = after(c, end_s);
    int64_t last = stop < c->slots - 2 ? stop : c->slots - 2;
    int64_t to = (last < stop - 1 ? last : stop - 1);
    for (int64_t j = first; j <= to; j++) {
        and_into(out, row_of(c, j), w);
        const uint64_t *next = row_of(c, j + 1);
        for (int64_t k = 0; k < w; k++)
            if (next[k] & nodes[k] & ~out[k]) {
                and_rows(c, out, j + 1, stop);
                return c->starts[j + 1];
            }
    }
    and_rows(c, out, first > last + 1 ? first : last + 1, stop);
    if (last == stop && last >= first) {
        const uint64_t *end_row = row_of(c, stop), *next = row_of(c, stop + 1);
        for (int64_t k = 0; k < w; k++)
            if (next[k] & nodes[k] & ~(out[k] & end_row[k]))
                return c->starts[stop + 1];
    }
    return 0.0;
}

/* NodeSpace.available_bits */
static void available(const Cycle *c, double start_s, double end_s, const uint64_t *nodes, uint64_t *out)
{
    memcpy(out, nodes, sizeof(uint64_t) * (size_t)c->words);
    if (start_s >= c->plan_end)
        return;
    int64_t first = after(c, start_s) - 1;
    and_rows(c, out, first > 0 ? first : 0, after(c, end_s));
}

/* NodeSpace.overlaps_bits */
static int overlaps(Cycle *c, const uint64_t *nodes, double start_s, double end_s)
{
    if (start_s >= c->plan_end)
        return 0;
    int64_t first = after(c, start_s) - 1;
    memcpy(c->scratch, nodes, sizeof(uint64_t) * (size_t)c->words);
    and_rows(c, c->scratch, first > 0 ? first : 0, at_or_after(c, end_s));
    return memcmp(c->scratch, nodes, sizeof(uint64_t) * (size_t)c->words) != 0;
}

/* NodeSpace._split: the slot starting at t_s (-1: out of memory) */
static int64_t split(Cycle *c, double t_s)
{
    int64_t i = after(c, t_s) - 1;
    if (c->starts[i] == t_s)
        return i;
    if (c->slots == c->room) {
        int64_t room = c->room * 2;
        if (grow((void **)&c->starts, sizeof(double), room)
            || grow((void **)&c->rows, sizeof(uint64_t), room * c->words))
            return -1;
        c->room = room;
    }
    memmove(c->starts + i + 2, c->starts + i + 1, sizeof(double) * (size_t)(c->slots - i - 1));
    memmove(row_of(c, i + 2), row_of(c, i + 1), sizeof(uint64_t) * (size_t)((c->slots - i - 1) * c->words));
    c->starts[i + 1] = t_s;
    memcpy(row_of(c, i + 1), row_of(c, i), sizeof(uint64_t) * (size_t)c->words);
    c->slots++;
    return i + 1;
}

/* NodeSpace.reserve_bits (0, or NO_MEMORY) */
static int reserve(Cycle *c, double start_s, double end_s, const uint64_t *nodes)
{
    if (start_s < c->starts[0])
        start_s = c->starts[0];
    if (end_s < start_s + c->resolution)
        end_s = start_s + c->resolution;
    if (start_s >= c->plan_end)
        return 0;
    int64_t first = split(c, start_s);
    int64_t last = end_s < c->plan_end ? split(c, end_s) : c->slots;
    if (first < 0 || last < 0)
        return NO_MEMORY;
    for (int64_t j = first; j < last; j++) {
        uint64_t *row = row_of(c, j);
        for (int64_t k = 0; k < c->words; k++)
            row[k] &= ~nodes[k];
    }
    return 0;
}
