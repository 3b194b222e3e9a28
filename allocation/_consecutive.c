/* Slurm's spread node choice (cons_tres _eval_nodes for a job that names no node count), the fast path
 * of spread_consecutive in allocation/consecutive.py, which is the reference: the same nodes and the
 * same CPUs on each.  Only whole CPU counts are taken here (every free count of a node in the map and
 * the job's CPUs whole and below 2^40): their sums are exact doubles in any order, so the reference's
 * sums (Python's left to right, numpy's pairwise) and these give the same numbers.  Anything else is
 * left to the reference (return -1).
 *
 * Loaded with ctypes (clustermodel/native.py): no Python headers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WHOLE_LIMIT 1099511627776.0 /* 2^40 */

/* whether value is a whole number below 2^40 in magnitude (not nan, not infinite): below the limit the
 * conversion to int64_t is defined and exact, and gives value back only when value is whole (as
 * value == floor(value), which without SSE4.1 is a longer sequence on every node of every call) */
static int whole_below_limit(double value)
{
    return fabs(value) < WHOLE_LIMIT && value == (double)(int64_t)value;
}

/* nodes_out / cpus_out (room for n): the chosen nodes in node order and the CPUs each gives.
 * Returns how many nodes (> 0), 0 when the nodes in the map hold too few CPUs (the reference's None),
 * -1 when a count is not whole (the caller runs the reference), -2 when memory runs out. */
int64_t spread_whole(const double *free_cpus, const uint8_t *in_map, int64_t n, double cpus,
                     int64_t *nodes_out, double *cpus_out)
{
    if (!(cpus > 0) || !whole_below_limit(cpus))
        return -1;      /* (no CPUs asked: the reference's answer, an empty layout) */
    /* one block: first, last and sum per set (at most n / 2 + 1 sets: a set ends before a node out of the
     * map), given per node (CPUs given, 0: none; zeroed on a set's nodes when the set is taken: it is read
     * nowhere else), taken per set */
    size_t sets = (size_t)(n / 2 + 1), nodes = (size_t)(n ? n : 1);
    char *block = malloc(sets * (2 * sizeof(int64_t) + sizeof(double) + 1) + nodes * sizeof(double));
    if (!block)
        return -2;
    int64_t *first = (int64_t *)block, *last = first + sets;
    double *sum = (double *)(last + sets), *given = sum + sets;
    uint8_t *taken = (uint8_t *)(given + nodes);
    /* the sets: runs of consecutive nodes in the map with a free CPU (one pass: their CPUs, and all) */
    double total = 0.0;
    int64_t runs = 0;
    int before = 0;             /* whether the node before is in a set */
    for (int64_t i = 0; i < n; i++) {
        int in = in_map[i] && free_cpus[i] >= 1;
        if (in) {
            double f = free_cpus[i];
            if (!whole_below_limit(f)) {         /* (f >= 1 here) */
                free(block);
                return -1;
            }
            total += f;
            if (!before) {
                first[runs] = i;
                sum[runs] = 0.0;
                runs++;
            }
            last[runs - 1] = i;
            sum[runs - 1] += f;
        }
        before = in;
    }
    if (total < cpus) {
        free(block);
        return 0;
    }
    memset(taken, 0, (size_t)runs);
    double left = cpus;
    int64_t untaken = runs;
    while (untaken && left > 0) {
        /* the sufficient set with the fewest CPUs (the first on ties), else the one with the most */
        int64_t best = -1;
        for (int64_t s = 0; s < runs; s++)
            if (!taken[s] && sum[s] >= left && (best < 0 || sum[s] < sum[best]))
                best = s;
        if (best < 0)
            for (int64_t s = 0; s < runs; s++)
                if (!taken[s] && (best < 0 || sum[s] > sum[best]))
                    best = s;
        taken[best] = 1;
        untaken--;
        for (int64_t i = first[best]; i <= last[best]; i++)
            given[i] = 0.0;
        /* best fit single node: the fewest free CPUs that hold what is left, the first on ties */
        int64_t node = -1;
        for (int64_t i = first[best]; i <= last[best]; i++)
            if (free_cpus[i] >= left && (node < 0 || free_cpus[i] < free_cpus[node]))
                node = i;
        if (node >= 0) {
            given[node] = left;
            left = 0.0;
            break;
        }
        /* else the set's nodes in order, each its free CPUs, the last only what is still missing */
        double running = 0.0, gave = 0.0;
        for (int64_t i = first[best]; i <= last[best]; i++) {
            running += free_cpus[i];
            if (running >= left - 1e-9 || i == last[best]) {
                double over = running - left;
                double give = free_cpus[i] - (over > 0.0 ? over : 0.0);
                given[i] = give;
                gave += give;
                break;
            }
            given[i] = free_cpus[i];
            gave += free_cpus[i];
        }
        left -= gave;
    }
    int64_t count = 0;
    if (!(left > 1e-9))         /* the nodes given CPUs, in node order: the taken sets in order */
        for (int64_t set = 0; set < runs; set++)
            for (int64_t i = first[set]; taken[set] && i <= last[set]; i++)
                if (given[i] > 0) {
                    nodes_out[count] = i;
                    cpus_out[count] = given[i];
                    count++;
                }
    free(block);
    return count;
}
