/* The slurm queue's will-run test (cons_tres _will_run_test) for a job Slurm spreads over nodes (it names no
 * node count) and that asks CPUs only, the fast path of SlurmQueue._will_run with its WillRunView
 * (sim/engine/slurm_queue.py, sim/engine/slurm_will_run.py), which is the reference: the same answer, the
 * same nodes.  Only whole CPU counts are taken here (every free and held count and the job's CPUs whole and
 * below 2^40): sums of them are exact doubles in any order, so numpy's sums and these give the same numbers.
 * Anything else is left to the reference (return -1).
 *
 * Slurm's spread node choice is spread_whole of allocation/_consecutive.c, included here.
 *
 * Loaded with ctypes (clustermodel/native.py): no Python headers. */
#include "../../allocation/_consecutive.c"
#include <string.h>

/* free_cpus (n): the CPUs free now per node, -inf where none may be allocated; usable_bits ((n + 7) / 8
 * bytes): the nodes the job may take (not reserved in the plan), node i bit i % 8 of byte i / 8 (a node set
 * of slurm_node_space as little-endian bytes); cpus: what the job asks.  The running (and completing) jobs by
 * expected end: ends (m), and job r's entries [offsets[r], offsets[r + 1]) of entry_nodes / entry_cpus (the
 * node and the CPUs it holds there).  window_s: the will-run window (group_ends in slurm_will_run.py).
 * try_now: 0 when the caller tried the job on the nodes free now itself (power saving's node tiers).
 * usable (n), work (n), nodes_out / cpus_out (n): room; nodes_bits ((n + 7) / 8 bytes): the nodes taken, as
 * usable_bits (set when the answer has nodes).  *group_last: -1 when the job fits now, else the running job
 * whose end it waits for (the last one its group frees).
 * Returns how many nodes (> 0), 0 when it never fits there (the reference's NEVER), -1 when a count is not
 * whole (the caller runs the reference), -2 when memory runs out. */
static int64_t spread_answer(const double *free_cpus, const uint8_t *usable, int64_t n, double cpus,
                             const double *ends, int64_t m, const int64_t *offsets, const int64_t *entry_nodes,
                             const double *entry_cpus, double window_s, int try_now, double *work, uint8_t *in_map,
                             int64_t *nodes_out, double *cpus_out, int64_t *group_last);

int64_t will_run_spread(const double *free_cpus, const uint8_t *usable_bits, int64_t n, double cpus,
                        const double *ends, int64_t m, const int64_t *offsets, const int64_t *entry_nodes,
                        const double *entry_cpus, double window_s, int try_now, uint8_t *usable, double *work,
                        uint8_t *in_map, int64_t *nodes_out, double *cpus_out, uint8_t *nodes_bits,
                        int64_t *group_last)
{
    if (!whole_below_limit(cpus) || !(cpus > 0))
        return -1;
    /* node i is bit i % 8 of byte i / 8: whole bytes eight nodes at a time, then the last ones */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint8_t byte = usable_bits[i >> 3];
        for (int bit = 0; bit < 8; bit++)
            usable[i + bit] = (byte >> bit) & 1;
    }
    for (; i < n; i++)
        usable[i] = (usable_bits[i >> 3] >> (i & 7)) & 1;
    int64_t count = spread_answer(free_cpus, usable, n, cpus, ends, m, offsets, entry_nodes, entry_cpus, window_s,
                                  try_now, work, in_map, nodes_out, cpus_out, group_last);
    if (count > 0) {
        memset(nodes_bits, 0, (size_t)((n + 7) / 8));
        for (int64_t k = 0; k < count; k++)
            nodes_bits[nodes_out[k] >> 3] |= (uint8_t)(1u << (nodes_out[k] & 7));
    }
    return count;
}

/* will_run_spread on the unpacked usable nodes (usable: 1 where the job may take the node) */
static int64_t spread_answer(const double *free_cpus, const uint8_t *usable, int64_t n, double cpus,
                             const double *ends, int64_t m, const int64_t *offsets, const int64_t *entry_nodes,
                             const double *entry_cpus, double window_s, int try_now, double *work, uint8_t *in_map,
                             int64_t *nodes_out, double *cpus_out, int64_t *group_last)
{
    /* the view: free CPUs on the usable nodes, -inf elsewhere */
    double spread_now = 0.0, free_sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double f = usable[i] ? free_cpus[i] : -INFINITY;
        work[i] = f;
        if (!usable[i])
            continue;
        if (f != -INFINITY && !whole_below_limit(f))
            return -1;
        free_sum += f;
        if (f >= 1)
            spread_now += f;
    }
    *group_last = -1;
    /* spread_whole takes the nodes of its map with a free CPU: every node in the map, the nodes with a CPU
     * free in work (in this view and in each state after a group) */
    memset(in_map, 1, (size_t)n);
    if (try_now && spread_now >= cpus) {
        int64_t count = spread_whole(work, in_map, n, cpus, nodes_out, cpus_out);
        if (count != 0)
            return count;
    }
    if (m == 0)
        return 0;
    /* enough[r]: the CPUs on the usable nodes once running jobs 0..r are freed; the first r where they
     * suffice (no group before it can let the job start) */
    double enough = free_sum;
    int64_t first_enough = -1;
    for (int64_t r = 0; r < m; r++) {
        for (int64_t e = offsets[r]; e < offsets[r + 1]; e++)
            if (usable[entry_nodes[e]]) {
                if (!whole_below_limit(entry_cpus[e]))
                    return -1;
                enough += entry_cpus[e];
            }
        if (first_enough < 0 && enough >= cpus - 1e-9)
            first_enough = r;
    }
    if (first_enough < 0)
        return 0;
    /* cons_tres's groups (iter_group_ends): only jobs holding usable nodes are freed; the state after each
     * group is the view plus what its jobs hold there, added job by job */
    double barrier = 0.0, window = window_s;
    int have_barrier = 0;
    int64_t i = 0, added = 0;
    int more = 1;
    while (more) {
        int64_t last = -1;
        for (;;) {
            if (i >= m) {
                more = 0;
                break;
            }
            int64_t j = i++;
            int touches = 0;
            for (int64_t e = offsets[j]; e < offsets[j + 1] && !touches; e++)
                touches = usable[entry_nodes[e]];
            if (!touches)
                continue;
            if (!have_barrier) {
                barrier = ends[j] + (window_s - fmod(ends[j], window_s));
                have_barrier = 1;
            }
            last = j;
            if (i >= m) {
                more = 0;
                break;
            }
            if (ends[i] > barrier + window)
                break;
        }
        if (last < 0)
            break;
        window *= 2;
        while (i < m && ends[i] > barrier + window)
            window *= 2;
        /* the group (cut i, last job freed) */
        if (i <= first_enough)
            continue;
        for (; added < i; added++)
            for (int64_t e = offsets[added]; e < offsets[added + 1]; e++)
                if (usable[entry_nodes[e]])
                    work[entry_nodes[e]] += entry_cpus[e];
        int64_t count = spread_whole(work, in_map, n, cpus, nodes_out, cpus_out);
        if (count != 0) {
            if (count > 0)
                *group_last = last;
            return count;
        }
    }
    return 0;
}
