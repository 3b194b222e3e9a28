/* SWF records scanned in C: the lines whose 18 fields are plain numbers, as doubles.
 *
 * The definition is the Python reader (swf.py): a record is a line split on "\n" (a trailing "\r"
 * removed) that is neither blank nor a ";" line.  This scanner takes only what it can read exactly as
 * Python's float() does: lines of printable ASCII and tabs, 18 tokens, each a plain decimal number
 * ([+-]digits[.digits][e[+-]digits], converted by strtod, which rounds correctly as float() does;
 * a token strtod does not read to its end, as in a process whose locale writes "1,5", is left to the
 * reader; a token of an optional "-" and at most 15 digits, most of an SWF file, is summed digit by
 * digit instead, which gives the same double), finite and >= -1.  Every other record (and every ";" line) is marked for the Python reader, which
 * explains or adjusts it as before.  Loaded with ctypes; no Python API is used.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIELDS 18

enum { BLANK = 0, NUMBERS = 1, OTHER = 2, HEADER = 3 };

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* a plain decimal number from p to end (exclusive) */
static int plain_number(const char *p, const char *end) {
    int digits = 0;
    if (p < end && (*p == '+' || *p == '-')) p++;
    while (p < end && *p >= '0' && *p <= '9') { p++; digits++; }
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') { p++; digits++; }
    }
    if (!digits) return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int exponent = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        while (p < end && *p >= '0' && *p <= '9') { p++; exponent++; }
        if (!exponent) return 0;
    }
    return p == end;
}

/* A token (p < end) of an optional "-" and 1 to 15 decimal digits: its value in *out, returns 1;
 * any other token: returns 0 (strtod reads it).  The digits summed as an integer are below
 * 10^15 < 2^53, so the double holds the integer exactly, which is the double strtod and float()
 * round to; "-0" and "-000" give -0.0, as both of them do. */
static int small_integer(const char *p, const char *end, double *out) {
    int negative = *p == '-';
    p += negative;
    if (p == end || end - p > 15) return 0;
    int64_t sum = 0;
    for (; p < end; p++) {
        unsigned digit = (unsigned)(unsigned char)*p - '0';
        if (digit > 9) return 0;
        sum = sum * 10 + digit;
    }
    double v = (double)sum;
    *out = negative ? -v : v;
    return 1;
}

/* The number of lines: what the arrays below must hold. */
int64_t swf_count_lines(const char *text, int64_t length) {
    int64_t lines = 0;
    const char *p = text, *end = text + length;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        lines++;
        if (!nl) break;
        p = nl + 1;
    }
    return lines;
}

/* For every line (1-based number = index + 1): kind[i] (BLANK, NUMBERS, OTHER, HEADER) and its byte
 * offsets; for NUMBERS lines the 18 values go to values[row * 18 ...] and row_line[row] = index.
 * job_digits[row]: the job number's token is at most 15 digits without a leading zero (its text is
 * the number's, and the double holds it exactly).
 * Returns the number of NUMBERS rows. */
int64_t swf_scan(const char *text, int64_t length, unsigned char *kind, int64_t *line_start, int64_t *line_end,
                 double *values, int64_t *row_line, unsigned char *job_digits) {
    const char *p = text, *end = text + length;
    int64_t line = 0, rows = 0;
    char token[128];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        const char *last = stop;
        if (last > p && last[-1] == '\r') last--;
        line_start[line] = p - text;
        line_end[line] = last - text;
        const char *q = p;
        int clean = 1;
        for (const char *c = p; c < last; c++) {
            unsigned char b = (unsigned char)*c;
            if (!(b == '\t' || (b >= 0x20 && b <= 0x7e))) { clean = 0; break; }
        }
        while (q < last && is_space(*q)) q++;
        if (clean && q == last) {
            kind[line] = BLANK;
        } else if (clean && *q == ';') {
            kind[line] = HEADER;
        } else if (!clean) {
            kind[line] = OTHER;       /* other white space or bytes: the Python reader decides */
        } else {
            int fields = 0, ok = 1;
            double *row = values + rows * FIELDS;
            unsigned char digits = 0;
            while (q < last && ok) {
                const char *t = q;
                while (q < last && !is_space(*q)) q++;
                size_t n = (size_t)(q - t);
                double v;
                if (fields >= FIELDS) { ok = 0; break; }
                if (!small_integer(t, q, &v)) {
                    if (n >= sizeof token || !plain_number(t, q)) { ok = 0; break; }
                    memcpy(token, t, n);
                    token[n] = '\0';
                    char *read_to;
                    v = strtod(token, &read_to);
                    /* not all of it read (a locale whose decimal point is not "." stops at ".") */
                    if (read_to != token + n) { ok = 0; break; }
                }
                /* below -1, NaN or infinite: the reader's */
                if (!(v >= -1.0) || v - v != 0.0) { ok = 0; break; }
                if (fields == 0) {
                    digits = n > 0 && n <= 15 && !(n > 1 && t[0] == '0');
                    for (size_t k = 0; k < n && digits; k++) digits = t[k] >= '0' && t[k] <= '9';
                }
                row[fields++] = v;
                while (q < last && is_space(*q)) q++;
            }
            if (ok && fields == FIELDS) {
                kind[line] = NUMBERS;
                row_line[rows] = line;
                job_digits[rows] = digits;
                rows++;
            } else {
                kind[line] = OTHER;
            }
        }
        line++;
        if (!nl) break;
        p = nl + 1;
    }
    return rows;
}
