/* Table cells as bytes, compiled: the texts of cells.py's numpy definitions, one value at a time.
 *
 * The definitions are float_cells(), digits(), NodeNames.cells() (outputs.py), csv_rows() of
 * csv_cells() (outputs.py) and parquet_file._string_values(); each function here writes the same
 * bytes into a buffer the caller allocated (large enough: the caller's bound is given with each
 * function), every cell's length into ``sizes``, and returns the bytes written.
 *
 * A float that is not a whole number below 2**53 is its repr: the shortest text that reads back to
 * the same double.  put_exact_fixed() finds it with integer arithmetic for 1e-3 <= |x| < 2**52 when
 * the answer is certain; every other one is made by CPython's own algorithm,
 * PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL), the call float.__repr__ makes.  That
 * call needs the interpreter's lock, so the library is loaded with ctypes.PyDLL (which keeps the lock
 * held during the call and raises the Python error the call set, a MemoryError).
 */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>

/* CPython's float formatting, from the interpreter the library is loaded in (declared here as in
 * CPython's pystrtod.h and pymem.h, part of its stable ABI, so no Python headers are needed) */
extern char *PyOS_double_to_string(double val, char format_code, int precision, int flags, int *type);
extern void PyMem_Free(void *ptr);
/* a str's UTF-8 bytes (kept by the str: compact ASCII text is its own) and its type's flags; an object
 * begins with its reference count and its type (PyObject's head, part of the stable ABI) */
extern const char *PyUnicode_AsUTF8AndSize(void *unicode, intptr_t *size);
extern unsigned long PyType_GetFlags(void *type);
typedef struct { intptr_t refcnt; void *type; } object_head;
#define Py_TPFLAGS_UNICODE_SUBCLASS (1UL << 28)
#define Py_DTSF_ADD_DOT_0 0x02                  /* "1.0", not "1": float.__repr__'s flag */

#define EXACT_INTEGERS 9007199254740992.0       /* 2**53: below it every whole double's repr is its digits and ".0" */
#define FLOAT_CELL_BYTES 32                     /* a repr is at most 24 bytes ("-2.2250738585072014e-308") */

static const char PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t POWERS_OF_TEN[20] = {
    UINT64_C(1), UINT64_C(10), UINT64_C(100), UINT64_C(1000), UINT64_C(10000), UINT64_C(100000),
    UINT64_C(1000000), UINT64_C(10000000), UINT64_C(100000000), UINT64_C(1000000000), UINT64_C(10000000000),
    UINT64_C(100000000000), UINT64_C(1000000000000), UINT64_C(10000000000000), UINT64_C(100000000000000),
    UINT64_C(1000000000000000), UINT64_C(10000000000000000), UINT64_C(100000000000000000),
    UINT64_C(1000000000000000000), UINT64_C(10000000000000000000)};

/* how many decimal digits m has (1 to 20).  With b the bits of v = m | 1 (the same count: 10**t is
 * even for t >= 1), t = floor(b log10(2)) (1233 / 4096 is log10(2) to 4 digits, exact for b <= 64)
 * is v's digits or one fewer: 2**(b-1) <= v < 2**b gives 10**t <= 2**b and 10**(t-1) < 2**(b-1), so
 * 10**(t-1) <= v < 10**(t+1); one comparison decides. */
static int digit_count(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    uint64_t v = m | 1;
    int t = ((64 - __builtin_clzll(v)) * 1233) >> 12;
    return t + (v >= POWERS_OF_TEN[t]);
#else
    int count = 1;
    while (m >= 10000) {
        m /= 10000;
        count += 4;
    }
    return count + (m >= 10) + (m >= 100) + (m >= 1000);
#endif
}

/* m in decimal at out, written from its last digit back; returns the number of digits.  One or two
 * digits are written at once; a longer m loses two digits a division by 100 while above 2**32, then
 * four a division by 10000 (each four as two pairs) in 32-bit arithmetic, whose divisions by a
 * constant are cheaper: about half the divisions of two digits at a time for the times of a log. */
static int64_t put_digits(uint64_t m, char *out) {
    if (m < 100) {
        if (m < 10) {
            out[0] = (char)('0' + m);
            return 1;
        }
        memcpy(out, PAIRS + 2 * m, 2);
        return 2;
    }
    int count = digit_count(m);
    char *p = out + count;
    while (m > UINT32_MAX) {
        uint64_t q = m / 100;
        p -= 2;
        memcpy(p, PAIRS + 2 * (m - q * 100), 2);
        m = q;
    }
    uint32_t v = (uint32_t)m;
    while (v >= 10000) {
        uint32_t q = v / 10000, low = v - q * 10000, high = low / 100;
        p -= 4;
        memcpy(p, PAIRS + 2 * high, 2);
        memcpy(p + 2, PAIRS + 2 * (low - high * 100), 2);
        v = q;
    }
    if (v >= 100) {
        uint32_t q = v / 100;
        p -= 2;
        memcpy(p, PAIRS + 2 * (v - q * 100), 2);
        v = q;
    }
    if (v >= 10) {
        memcpy(p - 2, PAIRS + 2 * v, 2);
    } else {
        p[-1] = (char)('0' + v);
    }
    return count;
}

/* v as str(v): a sign for a negative value, then its digits (|-2**63| taken in unsigned arithmetic) */
static int64_t put_int(int64_t v, char *out) {
    if (v < 0) {
        out[0] = '-';
        return 1 + put_digits((uint64_t)0 - (uint64_t)v, out + 1);
    }
    return put_digits((uint64_t)v, out);
}

/* digits(): str(v) then ``suffix`` for each value.  out: at least n * (20 + suffix_len) bytes. */
int64_t cells_digits(const int64_t *values, int64_t n, const char *suffix, int64_t suffix_len, char *out,
                     int64_t *sizes) {
    char *p = out;
    for (int64_t i = 0; i < n; i++) {
        int64_t size = put_int(values[i], p);
        memcpy(p + size, suffix, (size_t)suffix_len);
        size += suffix_len;
        sizes[i] = size;
        p += size;
    }
    return p - out;
}

/* NodeNames.cells(): for each job at ``rows``, its nodes flat[offsets[r]] .. flat[offsets[r + 1] - 1]
 * in decimal, separated by spaces (flat is int32, or int64 when ``wide``).  out: at least the number
 * of those nodes times (the digits of the largest node + 1) bytes. */
int64_t cells_node_lists(const int64_t *offsets, const int64_t *rows, int64_t n, const void *flat, int wide,
                         char *out, int64_t *sizes) {
    char *p = out;
    const int32_t *narrow_nodes = (const int32_t *)flat;
    const int64_t *wide_nodes = (const int64_t *)flat;
    for (int64_t i = 0; i < n; i++) {
        char *cell = p;
        int64_t first = offsets[rows[i]], last = offsets[rows[i] + 1];
        for (int64_t j = first; j < last; j++) {
            if (j > first)
                *p++ = ' ';
            p += put_int(wide ? wide_nodes[j] : (int64_t)narrow_nodes[j], p);
        }
        sizes[i] = p - cell;
    }
    return p - out;
}

/* repr(x) for 1e-3 <= |x| < 2**52 not a whole number, by exact integer arithmetic, when it is sure
 * to be CPython's text; else 0 (the caller asks CPython).  repr is the shortest decimal that reads
 * back as x (fewest digits; of several, the one nearest x), written without an exponent in this
 * range.  With x = m 2**-s (m the 53-bit significand, s <= 62), the decimals that read back as x are
 * those strictly inside (x - lower gap, x + upper gap), the gaps half a step of the double on each
 * side (the lower one a quarter step when m is a power of two).  Scaled by D = 2**(s + 2) the
 * interval's ends and x are the integers lo, hi and X = 4m; a decimal of k fraction digits d / 10**k
 * lies inside when lo 10**k < d D < hi 10**k.  The first k with such a d gives the fewest digits,
 * and the d nearest x is round(X 10**k / D).  The cases CPython may decide
 * otherwise are left to it: a decimal exactly on an end (the round-trip rule includes an end for an
 * even significand), a nearest d exactly halfway, a nearest d outside the interval.  Products stay
 * below 2**55 10**21 < 2**128. */
#ifdef __SIZEOF_INT128__
#define MOST_FRACTION_DIGITS 21
static unsigned __int128 POW10[MOST_FRACTION_DIGITS + 1];      /* filled at the first call */
static int pow10_ready = 0;

/* whether an integer d has lo 10**k < d 2**shift < hi 10**k */
static int decimal_inside(unsigned __int128 lo, unsigned __int128 hi, unsigned shift, int k) {
    return ((lo * POW10[k]) >> shift) + 1 <= ((hi * POW10[k]) >> shift);
}
#endif

static int64_t put_exact_fixed(double x, char *out) {
#ifndef __SIZEOF_INT128__
    (void)x;
    (void)out;
    return 0;                                   /* no 128-bit integers: CPython makes every text */
#else
    double magnitude = fabs(x);
    if (!(magnitude >= 1e-3 && magnitude < 4503599627370496.0))      /* 2**52 */
        return 0;
    uint64_t bits;
    memcpy(&bits, &magnitude, sizeof bits);
    int biased = (int)(bits >> 52);
    uint64_t fraction = bits & ((UINT64_C(1) << 52) - 1);
    uint64_t m = fraction | UINT64_C(1) << 52;
    int s = 1075 - biased;                                           /* x = m 2**-s */
    if (s < 1 || s > 62)
        return 0;
    unsigned shift = (unsigned)s + 2;
    unsigned __int128 unit = (unsigned __int128)1 << shift, half = unit >> 1, mask = unit - 1;
    unsigned __int128 X = (unsigned __int128)m << 2;
    unsigned __int128 lo = X - (fraction == 0 ? 1 : 2), hi = X + 2;
    /* the fewest fraction digits k with a decimal inside, by halving [0, 21]: a decimal d inside at
     * k gives 10 d inside at k + 1 */
    if (!pow10_ready) {
        POW10[0] = 1;
        for (int i = 1; i <= MOST_FRACTION_DIGITS; i++)
            POW10[i] = POW10[i - 1] * 10;
        pow10_ready = 1;
    }
    if (!decimal_inside(lo, hi, shift, MOST_FRACTION_DIGITS))
        return 0;
    int k = 0, above = MOST_FRACTION_DIGITS;
    while (k < above) {
        int middle = (k + above) / 2;
        if (decimal_inside(lo, hi, shift, middle))
            above = middle;
        else
            k = middle + 1;
    }
    /* an end exactly on a decimal of k digits or fewer (being a multiple of 2**(s + 2) only
     * persists as k grows, so k itself tells) */
    if (((lo * POW10[k]) & mask) == 0 || ((hi * POW10[k]) & mask) == 0)
        return 0;
    unsigned __int128 scaled = X * POW10[k], first = ((lo * POW10[k]) >> shift) + 1, last = (hi * POW10[k]) >> shift;
    unsigned __int128 rest = scaled & mask, d = scaled >> shift;
    if (rest == half)
        return 0;
    if (rest > half)
        d += 1;
    if (d < first || d > last || k == 0 || d > (unsigned __int128)UINT64_MAX)
        return 0;
    char digits[24];
    int64_t count = put_digits((uint64_t)d, digits);
    char *p = out;
    if (x < 0)
        *p++ = '-';
    if (count <= k) {                                            /* 0.000ddd */
        *p++ = '0';
        *p++ = '.';
        memset(p, '0', (size_t)(k - count));
        p += k - count;
        memcpy(p, digits, (size_t)count);
        p += count;
    } else {
        memcpy(p, digits, (size_t)(count - k));
        p += count - k;
        *p++ = '.';
        memcpy(p, digits + count - k, (size_t)k);
        p += k;
    }
    return p - out;
#endif
}

/* repr(x) at out (see cells_floats), returns its length, or -1 / -2 as cells_floats.  ``last`` keeps
 * the last text made for a number that is not whole (by put_exact_fixed or by CPython) and the
 * double's bits: a value equal to it bit for bit (a row's slowdown and bounded slowdown, for every
 * job that ran 10 s or more) is copied, not made again. */
typedef struct { uint64_t bits; int64_t size; char text[FLOAT_CELL_BYTES]; } last_float;

/* put_float() for x not a whole number below 2**53, nor -0.0 (kept out of line: put_float's whole
 * numbers, most of a log's floats, are written inline in the loops) */
static int64_t put_float_other(double x, char *out, last_float *last) {
    if (isnan(x))
        return 0;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    if (last->size > 0 && last->bits == bits) {
        memcpy(out, last->text, (size_t)last->size);
        return last->size;
    }
    int64_t exact = put_exact_fixed(x, out);
    if (exact > 0) {
        memcpy(last->text, out, (size_t)exact);     /* a repr: at most 24 bytes, within FLOAT_CELL_BYTES */
        last->bits = bits;
        last->size = exact;
        return exact;
    }
    char *text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL)
        return -1;
    size_t size = strlen(text);
    if (size > FLOAT_CELL_BYTES) {
        PyMem_Free(text);
        return -2;
    }
    memcpy(out, text, size);
    PyMem_Free(text);
    memcpy(last->text, out, size);
    last->bits = bits;
    last->size = (int64_t)size;
    return (int64_t)size;
}

static inline int64_t put_float(double x, char *out, last_float *last) {
    /* a whole number: the same after a round trip through int64 (exact below 2**53; NaN fails the
     * first test), but -0.0, whose repr has its sign */
    if (fabs(x) < EXACT_INTEGERS) {
        int64_t whole = (int64_t)x;
        if ((double)whole == x && (whole != 0 || !signbit(x))) {
            int64_t size = put_int(whole, out);
            out[size] = '.';
            out[size + 1] = '0';
            return size + 2;
        }
    }
    return put_float_other(x, out, last);
}

/* float_cells(): repr(x), NaN an empty cell.  out: at least n * FLOAT_CELL_BYTES bytes.  Returns -1
 * when CPython could not allocate a text (its MemoryError is set), -2 on a text longer than
 * FLOAT_CELL_BYTES (not expected: repr is at most 24 bytes). */
int64_t cells_floats(const double *values, int64_t n, char *out, int64_t *sizes) {
    char *p = out;
    last_float last = {0, 0, {0}};
    for (int64_t i = 0; i < n; i++) {
        int64_t size = put_float(values[i], p, &last);
        if (size < 0)
            return size;
        sizes[i] = size;
        p += size;
    }
    return p - out;
}

#define COLUMN_CELLS 0      /* data: the cells' bytes one after another, sizes: each cell's length */
#define COLUMN_FLOAT 1      /* data: doubles, written as repr (NaN empty) */
#define COLUMN_INT 2        /* data: int64, in decimal */
#define COLUMN_BOOL 3       /* data: one byte each, 0 False, else True */

/* csv_rows(): row after row, the cells of the ``k`` columns joined by commas and ended by "\n", each
 * cell made as its row is written: column c is of kinds[c] (above),
 * its values at data[c] (moved past them for cells) and for cells its sizes at sizes[c].  out: the
 * cells' bytes plus, per row, k bytes and FLOAT_CELL_BYTES, 20 or 5 for each float, integer or bool
 * column.  Returns the bytes written, or -1 / -2 as cells_floats. */
int64_t cells_csv_table(int64_t n, int64_t k, const int32_t *kinds, const char **data, const int64_t *const *sizes,
                        char *out) {
    char *p = out;
    last_float last = {0, 0, {0}};
    for (int64_t i = 0; i < n; i++) {
        for (int64_t c = 0; c < k; c++) {
            int64_t size;
            switch (kinds[c]) {
            case COLUMN_CELLS:
                size = sizes[c][i];
                memcpy(p, data[c], (size_t)size);
                data[c] += size;
                break;
            case COLUMN_FLOAT:
                size = put_float(((const double *)data[c])[i], p, &last);
                if (size < 0)
                    return size;
                break;
            case COLUMN_INT:
                size = put_int(((const int64_t *)data[c])[i], p);
                break;
            default:
                if (data[c][i]) {
                    memcpy(p, "True", 4);
                    size = 4;
                } else {
                    memcpy(p, "False", 5);
                    size = 5;
                }
            }
            p += size;
            *p++ = c + 1 < k ? ',' : '\n';
        }
    }
    return p - out;
}

#define STRINGS_NOT_ALL_STR (-3)    /* an item is not a str (None among them) */
#define STRINGS_QUOTED (-4)         /* a string holds a comma, a quote or a line end: CSV quotes it */

/* _plain_cells() (outputs.py) of an object array's items ``values`` (borrowed references: the
 * caller holds the array and the interpreter's lock), in two calls: with out NULL, each string's
 * UTF-8 size into ``sizes`` and its bytes' address into ``where``, returning the bytes in all; then,
 * with out (that many bytes), the bytes one after another, returning the same count.  The first
 * call returns STRINGS_NOT_ALL_STR or STRINGS_QUOTED (the caller makes the cells another way), or -1
 * when a str has no UTF-8 form (a lone surrogate: CPython's UnicodeEncodeError is set). */
int64_t cells_strings(void *const *values, int64_t n, const char **where, int64_t *sizes, char *out) {
    int64_t total = 0;
    if (out != NULL) {
        for (int64_t i = 0; i < n; i++) {
            memcpy(out + total, where[i], (size_t)sizes[i]);
            total += sizes[i];
        }
        return total;
    }
    const void *last = NULL;                   /* a string is often the one before it (a user's jobs) */
    for (int64_t i = 0; i < n; i++) {
        void *value = values[i];
        if (value == last) {
            where[i] = where[i - 1];
            sizes[i] = sizes[i - 1];
            total += sizes[i];
            continue;
        }
        if (!(PyType_GetFlags(((object_head *)value)->type) & Py_TPFLAGS_UNICODE_SUBCLASS))
            return STRINGS_NOT_ALL_STR;
        intptr_t size;
        const char *text = PyUnicode_AsUTF8AndSize(value, &size);
        if (text == NULL)
            return -1;
        for (intptr_t j = 0; j < size; j++) {
            char c = text[j];
            if (c == ',' || c == '"' || c == '\n' || c == '\r')
                return STRINGS_QUOTED;
        }
        where[i] = text;
        sizes[i] = size;
        total += size;
        last = value;
    }
    return total;
}

/* The distinct objects of an object array's items ``values`` by identity, in the order they first
 * appear: each item's code into them at ``codes``, the first item of each at ``firsts``; returns
 * their number, or -1 when there are more than ``most`` (or no memory for the table).  A table of
 * addresses, open addressing over twice ``most`` slots (a power of two), Fibonacci hashing. */
int64_t cells_object_codes(void *const *values, int64_t n, int64_t most, int32_t *codes, int64_t *firsts) {
    int bits = 1;
    while (((int64_t)1 << bits) < 2 * most)
        bits++;
    size_t slots = (size_t)1 << bits;
    void **keys = calloc(slots, sizeof *keys);
    int32_t *found = malloc(slots * sizeof *found);
    if (keys == NULL || found == NULL) {
        free(keys);
        free(found);
        return -1;
    }
    int64_t distinct = 0;
    const void *last = NULL;
    int32_t last_code = 0;
    for (int64_t i = 0; i < n; i++) {
        void *value = values[i];
        if (value == last && i > 0) {          /* a user's jobs often follow one another */
            codes[i] = last_code;
            continue;
        }
        size_t slot = (size_t)(((uint64_t)(uintptr_t)value * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits));
        while (keys[slot] != NULL && keys[slot] != value)
            slot = (slot + 1) & (slots - 1);
        if (keys[slot] == NULL) {
            if (distinct == most) {
                free(keys);
                free(found);
                return -1;
            }
            keys[slot] = value;
            found[slot] = (int32_t)distinct;
            firsts[distinct++] = i;
        }
        codes[i] = last_code = found[slot];
        last = value;
    }
    free(keys);
    free(found);
    return distinct;
}
