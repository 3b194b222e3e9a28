/* The slurm queue's backfill cycle (backfill.c _attempt_backfill) for a queue whose every job Slurm spreads
 * over nodes, asks CPUs only and has no node cap, without accounting limits, with or without Slurm's power
 * saving (cycle_power: the PLANNED flag, no early stop while planning; answers "now" whose nodes the node
 * tiers choose asked of the caller: NODES): the fast path of
 * SlurmQueue._backfill_cycle (sim/engine/slurm_queue.py), which is the reference: the same starts, the same
 * reservations, the same early stops.  The cycle's plan (NodeSpace of slurm_node_space.py), the early-stop
 * witness (StartersLeft of slurm_will_run.py), bf_max_job_test/user/part/start and the try-later loop run
 * here; the will-run test is will_run_spread of _will_run.c, included (one copy).  A job that can start now
 * is handed back to Python (with its nodes where it fits on the CPUs free now: cycle_start_nodes), which
 * starts it as the reference does and gives the new free CPUs and running jobs; the cycle then resumes
 * where it stopped (its state lives in the Cycle between calls).
 *
 * Only whole CPU counts are taken (the caller checks the free, held and asked counts and the nodes' CPUs):
 * every sum is then an exact double in any order, as in _will_run.c.
 *
 * Node sets are little-endian arrays of 64-bit words, node i bit i % 64 of word i / 64 (a Python int's
 * to_bytes(..., "little")).  Loaded with ctypes (clustermodel/native.py): no Python headers. */
#include "_will_run.c"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "node sets are read as little-endian words"
#endif

#define MEMO 4096          /* will-run answers' first room (a power of two; doubled when three quarters full) */
#define TRY_LATER_LIMIT 10000 /* a job's retries within one cycle (TRY_LATER_LIMIT in slurm_queue.py) */

/* the columns of a job's row in the jobs table (slurm_backfill_core.py's COLUMNS, the same order); COL_SEEN: the
 * job's will-run key numbered from 1 (SlurmQueue._job_key), 0 while the row is not filled in */
enum { COL_CPUS, COL_REQUESTED, COL_PART_ROW, COL_USER, COL_PARTITION, COL_ELIGIBLE, COL_COMPILES, COL_SEEN };

/* NODES: with power saving, a job's will-run answer is "now" and its nodes are the node tiers' choice, made by
 * the caller (cycle_nodes) before the cycle resumes */
enum { DONE = 0, START = 1, UNSEEN = 2, LEFT = 3, NODES = 4, NOT_WHOLE = -1, NO_MEMORY = -2 };

typedef struct {
    int64_t n, words;
    /* the plan: slot j is [starts[j], starts[j + 1]) (the last ends at plan_end), its available nodes rows[j] */
    double *starts, plan_end, resolution;
    uint64_t *rows;
    int64_t slots, room;
    /* the will-run test's room (will_run_spread) and node sets for the walk */
    uint8_t *usable, *in_map;
    double *work, *cpus_out;
    int64_t *nodes_out;
    uint64_t *found, *walked, *scratch, *counted, *free_bits;
    /* the state of the machine, copied at each new state and updated here by the cycle's starts: free CPUs per
     * node; the running jobs by (expected end, job index) as will_run_spread reads them, with their keys */
    double *free, *clock_ends, *trace_ends, *entry_cpus, free_now;
    int64_t *offsets, *entry_nodes, *keys;
    int64_t m, jobs_room, entries_room;
    const double *node_cpus;
    /* the early stop (StartersLeft): free CPUs per node (0 where none), their sum, the witness */
    double *cpu_array, cpus_free;
    int64_t witness, tested_at, changes;
    /* the jobs in the queue's order: order[p] is the row of the jobs table; parts: node sets by part row */
    const int64_t *order;
    const double *table;
    const uint64_t *parts;
    int64_t count, columns;
    double *smallest;
    int64_t *per_user, *per_part;
    /* settings */
    double now, bf_window, window_s;
    int64_t max_test, max_user, max_part, max_start;
    int full, capacity_bound;
    /* the will-run answers on this state (SlurmQueue.will_run keeps them as long): per entry the job's will-run
     * key (SlurmQueue._job_key, numbered), its usable nodes, the answer (1: start_s and its nodes, 0: never) and
     * the generation it was made in */
    double *memo_key, *memo_start;
    uint64_t *memo_usable, *memo_found;
    int64_t *memo_generation, generation, memo_used, memo_size;
    int8_t *memo_answer;
    /* where the cycle is; nevers: will-run answers "never" from the usable nodes' CPUs alone (the capacity bound) */
    int64_t position, tried, started, stopped_early, nevers;
    /* at START: 1 when the job fits on the CPUs free now (its will-run answer "now"), 0 when its start is a
     * running job's expected end that is now (a job of time limit 0 started this second: the nodes free now
     * are then not the answer's) */
    int fits_now;
    /* Slurm's power saving (cycle_power; all 0 without it): idle_bits, the nodes a reservation could leave
     * PLANNED (allocatable, running no job, at the cycle's start); idle_now, those running no job now (after the
     * cycle's starts); planned: a reservation left one PLANNED (SlurmQueue._planned_idle); tiers: a job fitting
     * now takes its nodes by the node tiers (powered-down nodes last), chosen by the caller (NODES) */
    uint64_t *idle_bits, *idle_now;
    int idle_any, planned, tiers;
    /* a job whose try-later loop stopped for NODES: its state there, taken up again by cycle_run */
    int in_job, job_counted, job_tries;
    double job_start_from, job_key;
} Cycle;

void cycle_free(Cycle *c)
{
    if (!c)
        return;
    free(c->starts); free(c->rows); free(c->usable); free(c->in_map); free(c->work); free(c->cpus_out);
    free(c->free); free(c->clock_ends); free(c->trace_ends); free(c->entry_cpus); free(c->offsets);
    free(c->entry_nodes); free(c->keys);
    free(c->nodes_out); free(c->found); free(c->walked); free(c->scratch); free(c->counted); free(c->free_bits);
    free(c->cpu_array); free(c->smallest); free(c->per_user); free(c->per_part);
    free(c->memo_key); free(c->memo_start); free(c->memo_usable); free(c->memo_found); free(c->memo_generation);
    free(c->memo_answer); free(c->idle_bits); free(c->idle_now);
    free(c);
}

/* a cycle's room on n nodes (NULL: out of memory) */
Cycle *cycle_new(int64_t n, const double *node_cpus)
{
    Cycle *c = calloc(1, sizeof(Cycle));
    if (!c)
        return NULL;
    size_t rows = (size_t)(n ? n : 1);
    c->n = n;
    c->words = (n + 63) / 64 ? (n + 63) / 64 : 1;
    c->node_cpus = node_cpus;
    c->room = 16;
    c->starts = malloc(sizeof(double) * (size_t)c->room);
    c->rows = calloc((size_t)(c->room * c->words), sizeof(uint64_t));
    c->usable = malloc(rows);
    c->in_map = malloc(rows);
    c->work = malloc(sizeof(double) * rows);
    c->cpus_out = malloc(sizeof(double) * rows);
    c->nodes_out = malloc(sizeof(int64_t) * rows);
    c->cpu_array = malloc(sizeof(double) * rows);
    c->free = malloc(sizeof(double) * rows);
    c->offsets = calloc(1, sizeof(int64_t));
    c->found = calloc((size_t)c->words, sizeof(uint64_t));
    c->walked = calloc((size_t)c->words, sizeof(uint64_t));
    c->scratch = calloc((size_t)c->words, sizeof(uint64_t));
    c->counted = calloc((size_t)c->words, sizeof(uint64_t));
    c->free_bits = calloc((size_t)c->words, sizeof(uint64_t));
    c->idle_bits = calloc((size_t)c->words, sizeof(uint64_t));
    c->idle_now = calloc((size_t)c->words, sizeof(uint64_t));
    c->memo_key = malloc(sizeof(double) * MEMO);
    c->memo_start = malloc(sizeof(double) * MEMO);
    c->memo_usable = malloc(sizeof(uint64_t) * MEMO * (size_t)c->words);
    c->memo_found = malloc(sizeof(uint64_t) * MEMO * (size_t)c->words);
    c->memo_generation = calloc(MEMO, sizeof(int64_t));
    c->memo_answer = malloc(MEMO);
    c->generation = 1;
    c->memo_size = MEMO;
    if (!c->memo_key || !c->memo_start || !c->memo_usable || !c->memo_found || !c->memo_generation || !c->memo_answer
        || !c->starts || !c->rows || !c->usable || !c->in_map || !c->work || !c->cpus_out || !c->nodes_out
        || !c->cpu_array || !c->free || !c->offsets || !c->found || !c->walked || !c->scratch || !c->counted
        || !c->free_bits || !c->idle_bits || !c->idle_now) {
        cycle_free(c);
        return NULL;
    }
    return c;
}

/* *array grown to count items of `item` bytes (0, or NO_MEMORY: the array as it was) */
static int grow(void **array, size_t item, int64_t count)
{
    void *grown = realloc(*array, item * (size_t)count);
    if (!grown)
        return NO_MEMORY;
    *array = grown;
    return 0;
}

#include "_backfill_plan.h"      /* node sets and the plan (NodeSpace) */

/* -- the early stop (StartersLeft) ------------------------------------------------------------------- */
static void free_changed(Cycle *c)
{
    double total = 0.0;
    memset(c->free_bits, 0, sizeof(uint64_t) * (size_t)c->words);
    for (int64_t i = 0; i < c->n; i++) {
        int has = c->free[i] > 0;
        c->cpu_array[i] = has ? c->free[i] : 0.0;
        total += c->cpu_array[i];
        if (has)
            c->free_bits[i >> 6] |= (uint64_t)1 << (i & 63);
    }
    c->cpus_free = total;
    c->changes++;
}

static int could_start(Cycle *c, int64_t p)
{
    const double *row = c->table + c->order[p] * c->columns;
    double cpus = row[COL_CPUS];
    if (c->cpus_free < cpus - 1e-6)
        return 0;
    available(c, c->now, c->now + row[COL_REQUESTED], part_of(c, p), c->counted);
    and_into(c->counted, c->free_bits, c->words);
    double have = 0.0;
    for (int64_t k = 0; k < c->words; k++)
        for (uint64_t bits = c->counted[k]; bits; bits &= bits - 1)
            have += c->cpu_array[k * 64 + __builtin_ctzll(bits)];
    return have >= cpus - 1e-6;
}

static int any_from(Cycle *c, int64_t position)
{
    if (c->witness < position) {
        c->witness = position;
        c->tested_at = -1;
    }
    while (c->witness < c->count) {
        if (c->tested_at == c->changes || could_start(c, c->witness)) {
            c->tested_at = c->changes;
            return 1;
        }
        c->witness++;
        c->tested_at = -1;
    }
    return 0;
}

/* -- the machine's state ------------------------------------------------------------------------------ */
/* room for `jobs` running jobs and `entries` entries (0, or NO_MEMORY) */
static int room_for(Cycle *c, int64_t jobs, int64_t entries)
{
    if (jobs > c->jobs_room) {
        int64_t room = jobs * 2;
        if (grow((void **)&c->clock_ends, sizeof(double), room) || grow((void **)&c->trace_ends, sizeof(double), room)
            || grow((void **)&c->keys, sizeof(int64_t), room) || grow((void **)&c->offsets, sizeof(int64_t), room + 1))
            return NO_MEMORY;
        c->jobs_room = room;
    }
    if (entries > c->entries_room) {
        int64_t room = entries * 2;
        if (grow((void **)&c->entry_nodes, sizeof(int64_t), room)
            || grow((void **)&c->entry_cpus, sizeof(double), room))
            return NO_MEMORY;
        c->entries_room = room;
    }
    return 0;
}

/* the machine now: free CPUs per node (-inf where none may be allocated: power saving's nodes being powered
 * down), the running jobs by expected end (their ends on slurmctld's clock and
 * in trace seconds, their job indices, their entries as in will_run_spread) and the CPUs free in all; same:
 * the state the will-run answers kept were made on.  Returns 0, NOT_WHOLE when a count is not whole (the
 * caller runs the reference), or NO_MEMORY. */
int cycle_state(Cycle *c, const double *free_cpus, const double *clock_ends, const double *trace_ends,
                const int64_t *keys, int64_t m, const int64_t *offsets, const int64_t *entry_nodes,
                const double *entry_cpus, double free_now, int same)
{
    int64_t entries = m > 0 ? offsets[m] : 0;
    if (!same) {
        c->generation++;          /* the answers kept were on another state */
        c->memo_used = 0;
    }
    for (int64_t i = 0; i < c->n; i++)
        if (!(whole_below_limit(free_cpus[i]) && free_cpus[i] >= 0) && free_cpus[i] != -INFINITY)
            return NOT_WHOLE;
    for (int64_t e = 0; e < entries; e++)
        if (!(whole_below_limit(entry_cpus[e]) && entry_cpus[e] >= 0))
            return NOT_WHOLE;
    if (room_for(c, m, entries) < 0)
        return NO_MEMORY;
    memcpy(c->free, free_cpus, sizeof(double) * (size_t)c->n);
    memcpy(c->clock_ends, clock_ends, sizeof(double) * (size_t)m);
    memcpy(c->trace_ends, trace_ends, sizeof(double) * (size_t)m);
    memcpy(c->keys, keys, sizeof(int64_t) * (size_t)m);
    memcpy(c->offsets, offsets, sizeof(int64_t) * (size_t)(m + 1));
    memcpy(c->entry_nodes, entry_nodes, sizeof(int64_t) * (size_t)entries);
    memcpy(c->entry_cpus, entry_cpus, sizeof(double) * (size_t)entries);
    c->m = m;
    c->free_now = free_now;
    free_changed(c);
    return 0;
}

/* after START, the job the caller started (before cycle_resume): its expected end in trace seconds and on
 * slurmctld's clock, its index, its k nodes and the CPUs it holds on each, and the CPUs free in all now.  It
 * joins the running jobs where SlurmQueue._running_index puts it (by expected end, then index).  Returns 0,
 * NOT_WHOLE or NO_MEMORY. */
int cycle_started(Cycle *c, double trace_end, double clock_end, int64_t key, const int64_t *nodes,
                  const double *cpus, int64_t k, double free_now)
{
    for (int64_t j = 0; j < k; j++)
        if (!(whole_below_limit(cpus[j]) && cpus[j] >= 0))
            return NOT_WHOLE;
    int64_t m = c->m, entries = c->offsets[m];
    if (room_for(c, m + 1, entries + k) < 0)
        return NO_MEMORY;
    int64_t at = m;
    while (at > 0 && (c->trace_ends[at - 1] > trace_end
                      || (c->trace_ends[at - 1] == trace_end && c->keys[at - 1] > key)))
        at--;
    int64_t first = c->offsets[at];
    memmove(c->clock_ends + at + 1, c->clock_ends + at, sizeof(double) * (size_t)(m - at));
    memmove(c->trace_ends + at + 1, c->trace_ends + at, sizeof(double) * (size_t)(m - at));
    memmove(c->keys + at + 1, c->keys + at, sizeof(int64_t) * (size_t)(m - at));
    for (int64_t r = m; r >= at; r--)
        c->offsets[r + 1] = c->offsets[r] + k;
    memmove(c->entry_nodes + first + k, c->entry_nodes + first, sizeof(int64_t) * (size_t)(entries - first));
    memmove(c->entry_cpus + first + k, c->entry_cpus + first, sizeof(double) * (size_t)(entries - first));
    c->clock_ends[at] = clock_end;
    c->trace_ends[at] = trace_end;
    c->keys[at] = key;
    for (int64_t j = 0; j < k; j++) {
        c->entry_nodes[first + j] = nodes[j];
        c->entry_cpus[first + j] = cpus[j];
        c->free[nodes[j]] -= cpus[j];
    }
    c->m = m + 1;
    c->free_now = free_now;
    free_changed(c);
    c->generation++;
    c->memo_used = 0;
    return 0;
}

/* a running job ended (between cycles): the job of index `key` leaves the running jobs and its CPUs are free
 * again; free_now: the CPUs free in all now.  Returns 0, or LEFT when no running job has that index. */
int cycle_ended(Cycle *c, int64_t key, double free_now)
{
    int64_t m = c->m, at = 0;
    while (at < m && c->keys[at] != key)
        at++;
    if (at == m)
        return LEFT;
    int64_t first = c->offsets[at], stop = c->offsets[at + 1], k = stop - first, entries = c->offsets[m];
    for (int64_t e = first; e < stop; e++)
        c->free[c->entry_nodes[e]] += c->entry_cpus[e];
    memmove(c->clock_ends + at, c->clock_ends + at + 1, sizeof(double) * (size_t)(m - at - 1));
    memmove(c->trace_ends + at, c->trace_ends + at + 1, sizeof(double) * (size_t)(m - at - 1));
    memmove(c->keys + at, c->keys + at + 1, sizeof(int64_t) * (size_t)(m - at - 1));
    for (int64_t r = at; r < m; r++)
        c->offsets[r] = c->offsets[r + 1] - k;
    memmove(c->entry_nodes + first, c->entry_nodes + stop, sizeof(int64_t) * (size_t)(entries - stop));
    memmove(c->entry_cpus + first, c->entry_cpus + stop, sizeof(double) * (size_t)(entries - stop));
    c->m = m - 1;
    c->free_now = free_now;
    free_changed(c);
    c->generation++;
    c->memo_used = 0;
    return 0;
}

/* -- the cycle ----------------------------------------------------------------------------------------- */
/* whether the job at row order[p] of the jobs table (table_rows rows, columns wide) is not filled in yet */
static int unseen(const int64_t *order, int64_t p, const double *table, int64_t table_rows, int64_t columns)
{
    return order[p] >= table_rows || !table[order[p] * columns + COL_SEEN];
}

/* the positions p in order (count rows of the jobs table) whose job is not filled in yet, in order, into
 * positions (room for count); returns how many */
int64_t cycle_unseen(const int64_t *order, int64_t count, const double *table, int64_t table_rows, int64_t columns,
                     int64_t *positions)
{
    int64_t found = 0;
    for (int64_t p = 0; p < count; p++)
        if (unseen(order, p, table, table_rows, columns))
            positions[found++] = p;
    return found;
}

/* a new cycle at now_s over the plan [begin_s, plan_end_s) of nodes `available` (words); the jobs: order
 * (count rows of table, columns wide), parts (node sets by part row); will_run_window_s: the will-run test's
 * window (group_ends); per_user / per_part counters for
 * users and partitions numbered below users / partitions.  Returns 0; UNSEEN when a job's row is not filled in
 * (the table has table_rows), LEFT when a job's will-run test does not run compiled (the cycle is the
 * reference's); or NO_MEMORY. */
int cycle_begin(Cycle *c, double now_s, double begin_s, double plan_end_s, double resolution_s, double bf_window_s,
                double will_run_window_s, const int64_t *order, int64_t count, int64_t max_test, int64_t max_user,
                int64_t max_part, int64_t max_start, int full, int capacity_bound, const uint64_t *available_nodes,
                const double *table, int64_t table_rows, int64_t columns, const uint64_t *parts, int64_t users,
                int64_t partitions)
{
    for (int64_t p = 0; p < count; p++) {
        if (unseen(order, p, table, table_rows, columns))
            return UNSEEN;
        if (!table[order[p] * columns + COL_COMPILES])
            return LEFT;
    }
    /* the settings, the plan (one slot: every node available), the jobs */
    c->now = now_s, c->plan_end = plan_end_s, c->resolution = resolution_s, c->bf_window = bf_window_s;
    c->window_s = will_run_window_s, c->max_test = max_test, c->max_user = max_user, c->max_part = max_part;
    c->max_start = max_start, c->full = full, c->capacity_bound = capacity_bound;
    c->slots = 1, c->starts[0] = begin_s;
    memcpy(row_of(c, 0), available_nodes, sizeof(uint64_t) * (size_t)c->words);
    c->order = order, c->count = count, c->table = table, c->columns = columns, c->parts = parts;
    free(c->smallest); free(c->per_user); free(c->per_part);
    c->smallest = malloc(sizeof(double) * (size_t)(count ? count : 1));
    c->per_user = calloc((size_t)(users ? users : 1), sizeof(int64_t));
    c->per_part = calloc((size_t)(partitions ? partitions : 1), sizeof(int64_t));
    if (!c->smallest || !c->per_user || !c->per_part)
        return NO_MEMORY;
    /* smallest_from (slurm_waiting.py): the fewest CPUs any job from p on asks */
    double least = INFINITY;
    for (int64_t p = count - 1; p >= 0; p--) {
        double cpus = table[order[p] * columns + COL_CPUS];
        least = cpus < least ? cpus : least;
        c->smallest[p] = least;
    }
    c->position = c->tried = c->started = c->stopped_early = c->nevers = c->witness = 0;
    c->tested_at = -1;
    c->changes = 0;
    memset(c->counted, 0, sizeof(uint64_t) * (size_t)c->words);
    c->idle_any = c->planned = c->tiers = c->in_job = 0;
    memset(c->idle_bits, 0, sizeof(uint64_t) * (size_t)c->words);
    return 0;
}

/* after cycle_begin, with Slurm's power saving: idle_bits and idle_now (node sets, as in the Cycle); tiers: 1
 * when some node is powered down (a job fitting now then takes its nodes by the node tiers: NODES) */
void cycle_power(Cycle *c, const uint64_t *idle_bits, const uint64_t *idle_now, int tiers)
{
    memcpy(c->idle_bits, idle_bits, sizeof(uint64_t) * (size_t)c->words);
    memcpy(c->idle_now, idle_now, sizeof(uint64_t) * (size_t)c->words);
    c->idle_any = count_of(idle_bits, c->words) > 0;
    c->tiers = tiers;
}

/* after a start in a cycle with power saving (before cycle_resume): the nodes running no job now */
void cycle_idle(Cycle *c, const uint64_t *idle_now)
{
    memcpy(c->idle_now, idle_now, sizeof(uint64_t) * (size_t)c->words);
}

/* SlurmQueue.will_run for a job asking cpus on the `usable` nodes (key: its will-run key, the answers kept by
 * it as the reference keeps them): 1 with *start_s (-inf: it fits now; else the expected end it waits for)
 * and c->found (its nodes), 0 when it never fits there, or NOT_WHOLE / NO_MEMORY */
static int will_run_fresh(Cycle *c, double cpus, const uint64_t *usable, double *start_s);

/* the memo's slot of (key, usable): the entry made on this state, or the free slot where it goes */
static int64_t memo_slot(const Cycle *c, double key, const uint64_t *usable)
{
    int64_t w = c->words, mask = c->memo_size - 1;
    uint64_t hash = 1469598103934665603ull;      /* FNV-1a over the key's bits and the node set's words */
    uint64_t key_bits;
    memcpy(&key_bits, &key, sizeof key_bits);
    hash = (hash ^ key_bits) * 1099511628211ull;
    for (int64_t k = 0; k < w; k++)
        hash = (hash ^ usable[k]) * 1099511628211ull;
    int64_t slot = (int64_t)(hash ^ (hash >> 29)) & mask;
    for (;; slot = (slot + 1) & mask)
        if (c->memo_generation[slot] != c->generation
            || (c->memo_key[slot] == key && !memcmp(c->memo_usable + slot * w, usable, sizeof(uint64_t) * (size_t)w)))
            return slot;
}

/* the memo's room doubled, its entries on this state kept (the reference keeps every answer until the state
 * changes: so are they kept here, and counted alike); 0, or NO_MEMORY (the memo as it was) */
static int memo_grow(Cycle *c)
{
    Cycle old = *c;
    int64_t w = c->words, size = c->memo_size * 2;
    c->memo_key = malloc(sizeof(double) * (size_t)size);
    c->memo_start = malloc(sizeof(double) * (size_t)size);
    c->memo_usable = malloc(sizeof(uint64_t) * (size_t)(size * w));
    c->memo_found = malloc(sizeof(uint64_t) * (size_t)(size * w));
    c->memo_generation = calloc((size_t)size, sizeof(int64_t));
    c->memo_answer = malloc((size_t)size);
    if (!c->memo_key || !c->memo_start || !c->memo_usable || !c->memo_found || !c->memo_generation
        || !c->memo_answer) {
        free(c->memo_key); free(c->memo_start); free(c->memo_usable); free(c->memo_found);
        free(c->memo_generation); free(c->memo_answer);
        *c = old;
        return NO_MEMORY;
    }
    c->memo_size = size;
    for (int64_t from = 0; from < old.memo_size; from++) {
        if (old.memo_generation[from] != old.generation)
            continue;
        int64_t to = memo_slot(c, old.memo_key[from], old.memo_usable + from * w);
        c->memo_generation[to] = c->generation;
        c->memo_key[to] = old.memo_key[from];
        c->memo_answer[to] = old.memo_answer[from];
        c->memo_start[to] = old.memo_start[from];
        memcpy(c->memo_usable + to * w, old.memo_usable + from * w, sizeof(uint64_t) * (size_t)w);
        memcpy(c->memo_found + to * w, old.memo_found + from * w, sizeof(uint64_t) * (size_t)w);
    }
    free(old.memo_key); free(old.memo_start); free(old.memo_usable); free(old.memo_found);
    free(old.memo_generation); free(old.memo_answer);
    return 0;
}

static int memo_keep(Cycle *c, int64_t slot, double key, const uint64_t *usable, int answer, double start_s);

static int will_run(Cycle *c, double key, double cpus, const uint64_t *usable, double *start_s)
{
    int64_t w = c->words;
    int64_t slot = memo_slot(c, key, usable);
    if (c->memo_generation[slot] == c->generation) {
        if (!c->memo_answer[slot])
            return 0;
        memcpy(c->found, c->memo_found + slot * w, sizeof(uint64_t) * (size_t)w);
        *start_s = c->memo_start[slot];
        return 1;
    }
    int answer = will_run_fresh(c, cpus, usable, start_s);
    if (answer < 0)
        return answer;
    if (answer && *start_s == -INFINITY && c->tiers) {
        c->job_key = key;           /* it fits now: its nodes are the node tiers' (cycle_nodes keeps them) */
        return NODES;
    }
    return memo_keep(c, slot, key, usable, answer, *start_s) < 0 ? NO_MEMORY : answer;
}

/* the answer (1: start_s and the nodes in c->found; 0: never) kept for (key, usable) at its slot (0, or
 * NO_MEMORY) */
static int memo_keep(Cycle *c, int64_t slot, double key, const uint64_t *usable, int answer, double start_s)
{
    int64_t w = c->words;
    if (c->memo_used >= c->memo_size / 4 * 3) {
        if (memo_grow(c) < 0)
            return NO_MEMORY;
        slot = memo_slot(c, key, usable);
    }
    c->memo_generation[slot] = c->generation;
    c->memo_used++;
    c->memo_key[slot] = key;
    c->memo_answer[slot] = (int8_t)answer;
    memcpy(c->memo_usable + slot * w, usable, sizeof(uint64_t) * (size_t)w);
    if (answer) {
        c->memo_start[slot] = start_s;
        memcpy(c->memo_found + slot * w, c->found, sizeof(uint64_t) * (size_t)w);
    }
    return 0;
}

/* after NODES: the nodes the node tiers chose for the job fitting now on the usable nodes (SlurmQueue._will_run),
 * kept as its answer; the cycle then runs on (cycle_run).  0, or NO_MEMORY */
int cycle_nodes(Cycle *c, const uint64_t *nodes)
{
    memcpy(c->found, nodes, sizeof(uint64_t) * (size_t)c->words);
    return memo_keep(c, memo_slot(c, c->job_key, c->walked), c->job_key, c->walked, 1, -INFINITY);
}

/* the answer on the current state, computed */
static int will_run_fresh(Cycle *c, double cpus, const uint64_t *usable, double *start_s)
{
    if (c->capacity_bound) {
        double all = 0.0;
        for (int64_t k = 0; k < c->words; k++)
            for (uint64_t bits = usable[k]; bits; bits &= bits - 1)
                all += c->node_cpus[k * 64 + __builtin_ctzll(bits)];
        if (all < cpus - 1e-6) {
            c->nevers++;            /* SlurmQueue.nevers_without_view */
            return 0;
        }
    }
    int64_t last = -1;
    int64_t count = will_run_spread(c->free, (const uint8_t *)usable, c->n, cpus, c->clock_ends, c->m, c->offsets,
                                    c->entry_nodes, c->entry_cpus, c->window_s, 1, c->usable, c->work,
                                    c->in_map, c->nodes_out, c->cpus_out, (uint8_t *)c->found, &last);
    if (count == 0)
        return 0;
    if (count < 0)
        return (int)count;
    *start_s = last < 0 ? -INFINITY : c->trace_ends[last];     /* -inf: now (the answer outlives the cycle) */
    return 1;
}

/* whether the job at position p is tested: 1 (counted for its user and partition), 0 when it is passed over
 * (bf_max_job_user / _part, not eligible yet), -1 when the cycle stops there */
static int job_opens(Cycle *c, int64_t p)
{
    if (c->tried >= c->max_test)
        return -1;
    /* with power saving the plans matter until one holds an idle node (PLANNED): no early stop before */
    int planning = c->idle_any && !c->planned;
    if (!planning && c->free_now < c->smallest[p] - 1e-9)
        return -1;                  /* no job from here can start now */
    if (!c->full && !planning && !any_from(c, p)) {
        c->stopped_early = 1;       /* what the cycle would still do holds back no job that could start */
        return -1;
    }
    const double *row = c->table + c->order[p] * c->columns;
    int64_t user = (int64_t)row[COL_USER], partition = (int64_t)row[COL_PARTITION];
    if (c->max_user && c->per_user[user] >= c->max_user)
        return 0;
    if (c->max_part && c->per_part[partition] >= c->max_part)
        return 0;
    if (row[COL_ELIGIBLE] > c->now)
        return 0;
    c->per_user[user]++;
    c->per_part[partition]++;
    return 1;
}

/* the try-later loop of the job at position p, from its state in the Cycle (job_start_from, job_tries,
 * job_counted): DONE when the job is done with (reserved, or not), START or NODES (the job at *position, its
 * usable nodes in usable_out), or NOT_WHOLE / NO_MEMORY */
static int try_job(Cycle *c, int64_t p, int64_t *position, uint64_t *usable_out)
{
    const double *row = c->table + c->order[p] * c->columns;
    const uint64_t *partition_nodes = part_of(c, p);
    double cpus = row[COL_CPUS], requested = row[COL_REQUESTED];
    for (; c->job_tries < TRY_LATER_LIMIT; c->job_tries++) {
        double start_from = c->job_start_from;
        double end_s = (start_from > c->now ? start_from : c->now) + requested;
        double later = walk(c, start_from, end_s, partition_nodes, c->walked);
        if (count_of(c->walked, c->words) < 1) {      /* (a job Slurm spreads needs one node) */
            if (later) {
                c->job_start_from = later;
                continue;
            }
            break;
        }
        if (!c->job_counted) {
            c->tried++;
            c->job_counted = 1;
        }
        double start_s = 0.0;
        int found = will_run(c, row[COL_SEEN], cpus, c->walked, &start_s);
        if (found == NODES) {
            c->in_job = 1;          /* taken up here once the caller gave the nodes (cycle_nodes) */
            *position = p;
            memcpy(usable_out, c->walked, sizeof(uint64_t) * (size_t)c->words);
            return NODES;
        }
        if (found < 0)
            return found;
        if (!found)
            break;
        int fits_now = start_s == -INFINITY;
        start_s = start_s > c->now ? start_s : c->now;      /* now, or its group's end if later */
        start_s = start_s >= start_from ? start_s : start_from;
        if (start_s <= c->now) {
            c->fits_now = fits_now;
            *position = p;
            memcpy(usable_out, c->walked, sizeof(uint64_t) * (size_t)c->words);
            return START;
        }
        if (later && start_s > later) {
            c->job_start_from = later;
            continue;
        }
        if (start_s > c->now + c->bf_window)
            break;
        double reserve_from = floor(start_s / c->resolution) * c->resolution;
        double reserve_to = floor((start_s + requested) / c->resolution) * c->resolution;
        if (overlaps(c, c->found, reserve_from, reserve_to)) {
            if (start_s <= start_from)
                break;
            c->job_start_from = start_s;
            continue;
        }
        if (reserve(c, reserve_from, reserve_to, c->found) < 0)
            return NO_MEMORY;
        if (meets(c->found, c->counted, c->words))
            c->changes++;           /* StartersLeft.plan_changed: the witness counted one of these nodes */
        if (!c->planned && meets(c->found, c->idle_bits, c->words) && meets(c->found, c->idle_now, c->words))
            c->planned = 1;         /* PLANNED sticks on reserved nodes that run no job */
        break;
    }
    return DONE;
}

/* the cycle from where it stopped: DONE, START (the job at *position can start now on the nodes in
 * usable_out: the caller starts it, gives the new state and calls cycle_resume), NODES (the job at *position
 * fits now on the nodes in usable_out: the caller gives the node tiers' choice there with cycle_nodes and calls
 * cycle_run again), or NOT_WHOLE / NO_MEMORY */
int cycle_run(Cycle *c, int64_t *position, uint64_t *usable_out)
{
    for (; c->position < c->count; c->position++) {
        int64_t p = c->position;
        if (c->in_job)
            c->in_job = 0;          /* the job NODES stopped, taken up where it was */
        else {
            int opens = job_opens(c, p);
            if (opens < 0)
                break;
            if (!opens)
                continue;
            c->job_start_from = c->now, c->job_tries = 0, c->job_counted = 0;
        }
        int code = try_job(c, p, position, usable_out);
        if (code != DONE)
            return code;
        if (c->max_start && c->started >= c->max_start)
            break;
    }
    c->position = c->count;
    return DONE;
}

/* after START, before the caller places the job: its nodes and the CPUs it takes on each (room for n of
 * each) when it fits on the CPUs free now: Slurm's spread node choice (spread_whole) on the usable nodes
 * the cycle found, as SlurmQueue._place_now chooses them on the same free CPUs.  Returns how many nodes; 0
 * when the job's start is a running job's expected end that is now (the caller places it on the nodes free
 * now), or NOT_WHOLE / NO_MEMORY. */
int64_t cycle_start_nodes(Cycle *c, int64_t *nodes, double *cpus)
{
    if (!c->fits_now)
        return 0;
    const double *row = c->table + c->order[c->position] * c->columns;
    int64_t last = -1;
    /* (no running jobs given: the answer on the CPUs free now only) */
    int64_t count = will_run_spread(c->free, (const uint8_t *)c->walked, c->n, row[COL_CPUS], c->clock_ends, 0,
                                    c->offsets, c->entry_nodes, c->entry_cpus, c->window_s, 1, c->usable, c->work,
                                    c->in_map, c->nodes_out, c->cpus_out, (uint8_t *)c->scratch, &last);
    if (count <= 0)
        return count < 0 ? count : NOT_WHOLE;     /* (it fit now on this state: 0 cannot be) */
    memcpy(nodes, c->nodes_out, sizeof(int64_t) * (size_t)count);
    memcpy(cpus, c->cpus_out, sizeof(double) * (size_t)count);
    return count;
}

/* after START: whether the caller started the job (its new state given with cycle_state first) */
void cycle_resume(Cycle *c, int started)
{
    c->started += started ? 1 : 0;
    if (c->max_start && c->started >= c->max_start)
        c->position = c->count;
    else
        c->position++;
}

/* what the cycle counted: the jobs tried, the jobs started, 1 when it stopped early (StartersLeft), the
 * will-run answers "never" from the capacity bound, 1 when a reservation left an idle node PLANNED */
void cycle_counts(const Cycle *c, int64_t *out)
{
    out[0] = c->tried;
    out[1] = c->started;
    out[2] = c->stopped_early;
    out[3] = c->nevers;
    out[4] = c->planned;
}
