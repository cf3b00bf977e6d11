/* Internals shared by the text readers (src/data/csv.c, src/data/jsonl.c):
 * text-to-value parsers, the type-inference lattice, chunk-local column
 * builders and their concatenation into mr_columns (with dictionary encoding
 * of low-cardinality strings), and a thread-capped task runner.
 * Not a public API; nothing here knows about files or formats. */
#ifndef MR_DATA_READ_INT_H
#define MR_DATA_READ_INT_H

#include "millrace/table.h"

#include <stdint.h>
#include <string.h>

/* ---- value parsers (0 on success, -1 when the text is not of the type) --- */

/* [+-]?[0-9]+ fitting int64; no whitespace. */
static inline int mr__parse_i64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (len && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == len) return -1;
    while (i + 1 < len && s[i] == '0') i++; /* leading zeros do not count toward 19 digits */
    if (len - i > 19) return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9) return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* Slow path: validates the float grammar and calls strtod (read_common.c). */
int mr__parse_f64_slow(const char *s, size_t len, double *out);

/* Decimal floats: [+-]? (d+[.d*] | .d+) ([eE][+-]?d+)?, or nan / inf /
 * infinity (any case, optional sign). The fast path (Clinger): when the
 * significand has at most 19 digits, is <= 2^53 and the decimal exponent is
 * within [-22, 22], both the significand and 10^|e| are exact doubles and one
 * IEEE multiply or divide rounds correctly, so the result equals strtod's.
 * Everything else goes through strtod. */
/* The fast path's value: significand m <= 2^53 with frac <= 22 fractional
 * digits, one correctly rounded division (shared with csv.c's fused path). */
static inline double mr__f64_exact(uint64_t m, int frac, int neg)
{
    static const double p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double v = (double)m;
    v = frac ? v / p10[frac] : v;
    return neg ? -v : v;
}

static inline int mr__parse_f64(const char *s, size_t len, double *out)
{
    size_t i = 0;
    int neg = 0;
    if (len && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    uint64_t m = 0;
    int nd = 0, frac = 0, any = 0;
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9) break;
        m = m * 10 + d;
        nd += m != 0;
        any = 1;
    }
    if (i < len && s[i] == '.') {
        for (i++; i < len; i++) {
            unsigned d = (unsigned)(unsigned char)s[i] - '0';
            if (d > 9) break;
            m = m * 10 + d;
            nd += m != 0;
            frac++;
            any = 1;
        }
    }
    if (!any || i != len || nd > 19 || m > ((uint64_t)1 << 53) || frac > 22) return mr__parse_f64_slow(s, len, out);
    *out = mr__f64_exact(m, frac, neg);
    return 0;
}

/* "true" / "false", any case. */
static inline int mr__parse_bool(const char *s, size_t len, int *out)
{
    static const char t[] = "true", f[] = "false";
    const char *w = len == 4 ? t : len == 5 ? f : NULL;
    if (!w) return -1;
    for (size_t i = 0; i < len; i++)
        if ((s[i] | 0x20) != w[i]) return -1;
    *out = len == 4;
    return 0;
}

/* Whether a timestamp that parsed carries an offset (Z, +HH:MM, -HH:MM). */
static inline int mr__ts_has_offset(const char *s, size_t len)
{
    for (size_t i = 19; i < len; i++)
        if (s[i] == 'Z' || s[i] == 'z' || s[i] == '+' || s[i] == '-') return 1;
    return 0;
}

/* Timestamps also accept a plain date (midnight UTC). */
static inline int mr__parse_ts(const char *s, size_t len, int64_t *out)
{
    int32_t d;
    if (len == 10) {
        if (mr_date_parse(s, len, &d)) return -1;
        *out = (int64_t)d * 86400 * 1000000;
        return 0;
    }
    return mr_timestamp_parse(s, len, out);
}

/* The narrowest type of one non-null text value: int64, float64, bool, date,
 * timestamp, else string. */
mr_dtype mr__classify(const char *s, size_t len);
/* Least upper bound: null < anything; int64 < float64; date < timestamp;
 * every other pair -> string. */
mr_dtype mr__type_join(mr_dtype a, mr_dtype b);

/* ---- chunk-local column builders ---------------------------------------
 * Filled by one thread for one chunk, with row capacity planned up front so
 * the hot loop never allocates (string bytes grow by doubling, a cold path). */
typedef struct mr__cb {
    mr_dtype type;
    size_t n, cap;     /* rows used / planned */
    uint8_t *valid;    /* cap bytes: 1 = value, 0 = null */
    void *data;        /* cap * width bytes (not STRING) */
    int64_t *offsets;  /* STRING: cap + 1 offsets into bytes */
    char *bytes;       /* STRING: concatenated values */
    size_t bytes_len, bytes_cap;
    int ts_offset;     /* TIMESTAMP: a value had an offset, so the column is UTC-adjusted (else naive) */
    mr_colkind kind;   /* the declared kind (set after mr__cb_init): a narrow int, a decimal's scale, ... */
} mr__cb;

mr_status mr__cb_init(mr__cb *b, mr_dtype type, size_t cap);
void mr__cb_free(mr__cb *b);
/* Makes room for extra string bytes; MR_E_NOMEM / MR_E_LIMIT. */
mr_status mr__cb_grow_bytes(mr__cb *b, size_t extra);

static inline void mr__cb_null(mr__cb *b)
{
    size_t i = b->n++;
    b->valid[i] = 0;
    if (b->type == MR_T_STRING) b->offsets[i + 1] = b->offsets[i];
    else memset((char *)b->data + i * mr_dtype_width(b->type), 0, mr_dtype_width(b->type));
}

/* Appends a string, collapsing doubled quote characters when esc is set. */
static inline mr_status mr__cb_str(mr__cb *b, const char *s, size_t len, int esc, char quote)
{
    if (b->bytes_cap - b->bytes_len < len || !b->bytes) {
        mr_status rc = mr__cb_grow_bytes(b, len);
        if (rc != MR_OK) return rc;
    }
    char *dst = b->bytes + b->bytes_len;
    if (!esc) {
        memcpy(dst, s, len);
        dst += len;
    } else {
        const char *e = s + len;
        while (s < e) {
            const char *q = memchr(s, quote, (size_t)(e - s));
            size_t k = q ? (size_t)(q + 1 - s) : (size_t)(e - s); /* keep one quote of the pair */
            memcpy(dst, s, k);
            dst += k;
            s += k + (q ? 1 : 0);
        }
    }
    b->bytes_len = (size_t)(dst - b->bytes);
    size_t i = b->n++;
    b->valid[i] = 1;
    b->offsets[i + 1] = (int64_t)b->bytes_len;
    return MR_OK;
}

/* Drops rows >= n (rollback of a partly appended bad row). */
static inline void mr__cb_truncate(mr__cb *b, size_t n)
{
    if (b->n <= n) return;
    b->n = n;
    if (b->type == MR_T_STRING) b->bytes_len = (size_t)b->offsets[n];
}

/* Concatenates parts[0], parts[stride], ... (n_parts of them, all of type
 * type and kind) into one new column, of *kind when there are no parts
 * (NULL: plain). The parts are consumed as they are copied (mr__cb_free:
 * freeing them again is a no-op), so a column and its parts are never held
 * whole at once; a dictionary-encoded column leaves them. STRING columns become dictionary-encoded when
 * the distinct count stays <= n_rows / 2 and <= MR__DICT_MAX. A column of
 * type MR_T_NULL becomes an all-null STRING column. */
#define MR__DICT_MAX 65536
mr_status mr__cb_concat(const char *name, mr_dtype type, const mr_colkind *kind, mr__cb *parts, size_t stride,
                        size_t n_parts, mr_column **out, mr_error *err);

/* Builds a table from per-chunk builders laid out chunk-major
 * (cbs[k * n_cols + j]), concatenating the columns in parallel. */
mr_status mr__cb_table(char *const *names, const mr_dtype *types, const mr_colkind *kinds, size_t n_cols,
                       mr__cb *cbs, size_t n_chunks, int threads, mr_table **out, mr_error *err);
/* Parses one text value into b as DECIMAL at b->kind.scale: 0, or 1 when it
 * is not an exact decimal of that scale and precision. */
static inline int mr__cb_decimal(mr__cb *b, const char *s, size_t len)
{
    int64_t u;
    if (mr_decimal_parse(s, len, b->kind.scale, &u) || !mr_kind_fits(MR_T_DECIMAL, b->kind, u)) return 1;
    ((int64_t *)b->data)[b->n] = u;
    return 0;
}

/* ---- tasks -------------------------------------------------------------
 * Runs fn(ctx, i) for i in [0, n) on at most `threads` threads of the core
 * pool (0 = all). Which thread runs which task never matters to callers:
 * each task writes only its own outputs. */
typedef void (*mr__task_fn)(void *ctx, size_t i);
void mr__run_tasks(size_t n, int threads, mr__task_fn fn, void *ctx);

/* Writes "\"<at most 40 bytes of s>\"" (with ... when cut) into buf. */
void mr__quote_value(const char *s, size_t len, char *buf, size_t buf_len);

#endif
