/* CSV reader: windows of the file are split into fixed-size chunks that are
 * tokenized and converted in parallel into chunk-local column builders, then
 * concatenated in chunk order. Header, inference, errors, quarantine.
 * It does not write anything but the quarantine file.
 *
 * Finding record boundaries in parallel. A record ends at a newline that is
 * outside quotes. Under RFC 4180 every quote toggles the "inside quotes"
 * state (an escaped "" toggles twice), so a newline is outside quotes exactly
 * when the number of quote bytes before it, counted from a record start, is
 * even. Each window is cut into nominal chunks [k*C, (k+1)*C). Pass 1 counts
 * quotes and newlines per nominal chunk in parallel; a prefix sum gives the
 * quote parity at every nominal start, and chunk k then begins at the first
 * record start at or after k*C: just after the first newline at even parity
 * (a short scan; when one quoted field swallows several chunks, they come out
 * empty and the scan never repeats). Pass 2 parses each chunk's records. The
 * tokenizer agrees with the parity rule on well-formed records; when it meets
 * malformed quoting it marks the row bad and resumes at the parity boundary,
 * so both passes always agree. Chunk cuts depend only on chunk_size and the
 * bytes, never on the thread count, and errors are reported from the earliest
 * chunk, so any number of threads gives identical tables, errors and stats.
 * Line numbers come from the same prefix sums of newline counts. */
#include "millrace/csv.h"
#include "millrace/value.h"
#include "data/read_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define DEFAULT_CHUNK ((size_t)8 << 20)  /* big enough to amortise per-chunk setup */
#define DEFAULT_CAP ((size_t)16 << 20)   /* line / field cap */
#define DEFAULT_SAMPLE 10000
#define WINDOW_CHUNKS 8                  /* streaming window = 8 chunks (64 MiB by default) */

typedef struct cfg {
    char delim, quote;
    int no_header;
    char **nulls;
    size_t *null_len;   /* strlen of each token */
    size_t n_nulls;
    uint64_t null_lens; /* bit L set when some null token has length L < 64 */
    int null_long;      /* some null token is 64 bytes or longer */
    size_t sample_rows;
    mr_on_error on_error;
    int threads;
    size_t max_line, max_field, chunk;
} cfg;

/* The first value of a column that is not a number: where, and what. */
typedef struct non_number {
    long line;      /* physical line of its record; 0 = none */
    size_t field;   /* 1-based */
    char value[48]; /* quoted, cut at 40 bytes (mr__quote_value) */
} non_number;

/* What inference saw of one column. */
typedef struct col_sample {
    size_t values;    /* non-null values in the sample */
    size_t numbers;   /* of them, int64 or float64 */
    non_number first; /* the first of the others */
} col_sample;

struct mr_csv_reader {
    cfg c;
    uint8_t cls[256]; /* 1 for bytes that end an unquoted scan: delimiter, quote, LF */
    uint8_t null_edge[256]; /* NULL_FIRST / NULL_LAST: some null token starts / ends with the byte */
    char *path;
    int fd;
    FILE *qf;
    char *buf;        /* cap + 1 bytes; buf[len] is a '\n' sentinel */
    size_t cap, pos, len;
    int eof, whole;
    long line;        /* physical 1-based line of buf[pos] */
    size_t n_cols;
    char **names;
    mr_strindex name_ix; /* names -> field index (header duplicates, declared schema) */
    mr_dtype *types;
    mr_colkind *kinds; /* declared kinds (zero: plain) */
    uint8_t *declared;
    col_sample *sample; /* n_cols, from inference */
    mr_table *cur;    /* parsed window not yet handed out */
    size_t cur_off;
    int handed_out;   /* a batch was returned: at the end, no empty one */
    mr_csv_stats stats;
    mr_status sticky;
    mr_error sticky_err;
};

/* ---- tokenizer -------------------------------------------------------- */

typedef struct fld {
    const char *s; /* content (inside the quotes when quoted) */
    size_t len;    /* content bytes, doubled quotes still doubled */
    int quoted, esc;
} fld;

enum { F_DELIM = 0, F_EOR = 1, F_ERR_STRAY = -1, F_ERR_AFTER = -2, F_ERR_UNTERM = -3 };

static size_t count_byte(const char *p, size_t n, char c)
{
    size_t k = 0;
    const char *e = p + n;
    while ((p = memchr(p, c, (size_t)(e - p))) != NULL) {
        k++;
        p++;
    }
    return k;
}

/* Reads one field at *pp. end bounds quoted scans; unquoted scans stop at
 * the '\n' that ends every record (or the sentinel). */
static inline int next_field(const mr_csv_reader *r, const char **pp, const char *end, fld *f, long *line)
{
    const char *p = *pp;
    const char quote = r->c.quote, delim = r->c.delim;
    if (*p != quote) {
        const char *q = p;
        while (!r->cls[(uint8_t)*q]) q++;
        f->s = p;
        f->quoted = 0;
        f->esc = 0;
        if (*q == delim) {
            f->len = (size_t)(q - p);
            *pp = q + 1;
            return F_DELIM;
        }
        if (*q == quote) {
            *pp = q;
            return F_ERR_STRAY;
        }
        size_t l = (size_t)(q - p);
        if (l && q[-1] == '\r') l--;
        f->len = l;
        *pp = q + 1;
        (*line)++;
        return F_EOR;
    }
    const char *q = p + 1;
    int esc = 0;
    for (;;) {
        const char *c = q < end ? memchr(q, quote, (size_t)(end - q)) : NULL;
        if (!c) return F_ERR_UNTERM;
        if (c + 1 < end && c[1] == quote) {
            esc = 1;
            q = c + 2;
            continue;
        }
        f->s = p + 1;
        f->len = (size_t)(c - (p + 1));
        f->quoted = 1;
        f->esc = esc;
        *line += (long)count_byte(f->s, f->len, '\n');
        if (c[1] == delim) {
            *pp = c + 2;
            return F_DELIM;
        }
        if (c[1] == '\n') {
            *pp = c + 2;
            (*line)++;
            return F_EOR;
        }
        if (c[1] == '\r' && c[2] == '\n') {
            *pp = c + 3;
            (*line)++;
            return F_EOR;
        }
        return F_ERR_AFTER;
    }
}

/* End of the record starting at rec by the parity rule (end if none). */
static const char *record_end(const char *rec, const char *end, char quote, int *found)
{
    int par = 0;
    for (const char *p = rec; p < end; p++) {
        if (*p == quote) par ^= 1;
        else if (*p == '\n' && !par) {
            if (found) *found = 1;
            return p + 1;
        }
    }
    if (found) *found = 0;
    return end;
}

enum { NULL_FIRST = 1, NULL_LAST = 2 };

/* A field is null when unquoted and empty or equal to a null token. Three
 * table look-ups (length, first byte, last byte) reject almost every value
 * before any comparison: a number ends in a digit, and no default token does. */
static inline int is_null(const mr_csv_reader *r, const fld *f)
{
    if (f->quoted) return 0;
    if (f->len == 0) return 1;
    if (f->len >= 64 ? !r->c.null_long : !((r->c.null_lens >> f->len) & 1)) return 0;
    if (!(r->null_edge[(uint8_t)f->s[0]] & NULL_FIRST) || !(r->null_edge[(uint8_t)f->s[f->len - 1]] & NULL_LAST))
        return 0;
    for (size_t i = 0; i < r->c.n_nulls; i++)
        if (r->c.null_len[i] == f->len && !memcmp(r->c.nulls[i], f->s, f->len)) return 1;
    return 0;
}

/* Appends field f to b. Returns 1 when the value does not fit b's type
 * (nothing appended), 0 otherwise; *rc gets allocation failures. */
static inline int convert(const mr_csv_reader *r, mr__cb *b, const fld *f, mr_status *rc)
{
    if (is_null(r, f)) {
        mr__cb_null(b);
        return 0;
    }
    if (b->type == MR_T_STRING) {
        *rc = mr__cb_str(b, f->s, f->len, f->esc, r->c.quote);
        return 0;
    }
    if (f->esc) return 1;
    if (f->quoted && f->len == 0) {
        mr__cb_null(b);
        return 0;
    }
    size_t i = b->n;
    switch (b->type) {
    case MR_T_FLOAT64:
        if (mr__parse_f64(f->s, f->len, &((double *)b->data)[i])) return 1;
        break;
    case MR_T_INT64:
        if (mr__parse_i64(f->s, f->len, &((int64_t *)b->data)[i])) return 1;
        if ((b->kind.int_bits || b->kind.flags) && !mr_kind_fits(MR_T_INT64, b->kind, ((int64_t *)b->data)[i]))
            return 1; /* a declared int8 .. uint64 it does not fit */
        break;
    case MR_T_DECIMAL:
        if (mr__cb_decimal(b, f->s, f->len)) return 1;
        break;
    case MR_T_FLOAT32: {
        double d;
        if (mr__parse_f64(f->s, f->len, &d)) return 1;
        ((float *)b->data)[i] = (float)d;
        break;
    }
    case MR_T_BOOL: {
        int v;
        if (mr__parse_bool(f->s, f->len, &v)) return 1;
        ((uint8_t *)b->data)[i] = (uint8_t)v;
        break;
    }
    case MR_T_DATE:
        if (mr_date_parse(f->s, f->len, &((int32_t *)b->data)[i])) return 1;
        break;
    case MR_T_TIMESTAMP:
        if (mr__parse_ts(f->s, f->len, &((int64_t *)b->data)[i])) return 1;
        if (f->len > 19 && !b->ts_offset) b->ts_offset = mr__ts_has_offset(f->s, f->len);
        break;
    default: return 1; /* MR_T_NULL: any value misfits */
    }
    b->valid[i] = 1;
    b->n++;
    return 0;
}

/* ---- columns of numbers read as strings ---------------------------------- */

static int is_number_type(mr_dtype t) { return t == MR_T_INT64 || t == MR_T_FLOAT64; }

static __attribute__((cold, noinline)) void note_non_number(non_number *nn, long line, size_t field, const fld *f)
{
    nn->line = line;
    nn->field = field;
    mr__quote_value(f->s, f->len, nn->value, sizeof(nn->value));
}

/* n with thousands separators ("4,999") into buf (at least 32 bytes). */
static const char *group_digits(size_t n, char *buf)
{
    char d[24];
    int len = snprintf(d, sizeof(d), "%zu", n), o = 0;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = d[i];
    }
    buf[o] = '\0';
    return buf;
}

/* A column read as string although more than 90% of its non-null values are
 * numbers is almost always one stray token ("?", "missing") in a numeric
 * column; downstream it would silently stop being a number. Logs a warning
 * naming the first value that is not a number. */
static __attribute__((cold, noinline)) void warn_numeric_strings(const mr_csv_reader *r, size_t j,
                                                                 const non_number *first, size_t numbers,
                                                                 size_t values)
{
    if (!first->line || numbers * 10 <= values * 9) return;
    char a[32], b[32];
    mr_log(MR_LOG_WARN,
           "%s:%ld:%zu: column '%s' was read as string: %s of %s values are numbers; the first that is not is %s "
           "(declare it as a null token or fix the value)",
           r->path, first->line, first->field, r->names[j], group_digits(numbers, a), group_digits(values, b),
           first->value);
}

/* ---- chunks ----------------------------------------------------------- */

typedef struct bad_rec {
    size_t off, len;
} bad_rec;

typedef struct chunk {
    size_t begin, end; /* byte range in the window */
    long line;         /* physical line of begin */
    size_t max_rows;   /* newlines in range + 1: an upper bound on records */
    non_number *nn;    /* n_cols or NULL: first non-number that promoted an inferred column
                        * to string (kept across re-parses: before n_rows) */
    size_t n_rows;
    int has_err, err_hint;
    mr_status err_code;
    long err_line, err_col;
    char err_msg[400];
    bad_rec *bad;
    size_t n_bad, cap_bad;
    mr_dtype *need;    /* n_cols promotion requests (MR_T_NULL = none) */
    uint8_t *qempty;   /* n_cols: a quoted empty field met while the column had no type yet */
    int promote;
    mr_status oom;
} chunk;

typedef struct wjob {
    mr_csv_reader *r;
    const char *buf;
    size_t len;          /* bytes of complete records */
    size_t n_nom;        /* pass 1: nominal chunks */
    size_t *nom_q, *nom_nl;
    chunk *ch;
    size_t n_ch;
    mr__cb *cbs;         /* n_ch * n_cols, chunk-major */
    const mr_dtype *types;
    const mr_colkind *kinds;
    int allow_promote;
} wjob;

static __attribute__((cold, noinline, format(printf, 7, 8))) void chunk_error(wjob *w, chunk *c, int fatal,
                                                                             mr_status code, long line, long col,
                                                                             const char *fmt, ...)
{
    if (c->has_err || (!fatal && w->r->c.on_error != MR_ON_ERROR_FAIL)) return;
    c->has_err = 1;
    c->err_hint = fatal;
    c->err_code = code;
    c->err_line = line;
    c->err_col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg, sizeof(c->err_msg), fmt, ap);
    va_end(ap);
}

static __attribute__((cold, noinline)) void field_error(wjob *w, chunk *c, int t, long line, size_t field)
{
    const char *what = t == F_ERR_STRAY   ? "unexpected quote in unquoted field"
                       : t == F_ERR_AFTER ? "unexpected character after closing quote"
                                          : "unterminated quoted field";
    chunk_error(w, c, 0, MR_E_PARSE, line, (long)field, "%s (field %zu)", what, field);
}

/* Returns 1 when the row is bad, 0 when a promotion was recorded instead. */
static __attribute__((cold, noinline)) int misfit(wjob *w, chunk *c, size_t j, const fld *f, long line,
                                                  mr_dtype *rowneed, int *row_need)
{
    mr_csv_reader *r = w->r;
    char v[64];
    if (r->declared[j]) {
        mr__quote_value(f->s, f->len, v, sizeof(v));
        chunk_error(w, c, 0, MR_E_PARSE, line, (long)(j + 1), "column '%s' (field %zu): expected %s, got %s",
                    r->names[j], j + 1, mr_dtype_name(w->types[j]), v);
        return 1;
    }
    if (!w->allow_promote) {
        mr__quote_value(f->s, f->len, v, sizeof(v));
        chunk_error(w, c, 1, MR_E_SCHEMA, line, (long)(j + 1),
                    "column '%s' (field %zu): type %s was inferred from the first %zu rows, got %s", r->names[j],
                    j + 1, mr_dtype_name(w->types[j]), r->c.sample_rows, v);
        return 1;
    }
    mr_dtype k = f->esc ? MR_T_STRING : mr__classify(f->s, f->len);
    if (!is_number_type(k) && is_number_type(w->types[j])) {
        /* out of memory for the note: the read fails, as for any other allocation, rather than warn
         * about a later value than the first (another chunk's note would be named instead) */
        if (!c->nn && !(c->nn = mr_calloc(r->n_cols, sizeof(non_number)))) c->oom = MR_E_NOMEM;
        if (c->nn && !c->nn[j].line) note_non_number(&c->nn[j], line, j + 1, f);
    }
    rowneed[j] = mr__type_join(rowneed[j], mr__type_join(w->types[j], k));
    *row_need = 1;
    return 0;
}

static __attribute__((cold, noinline)) void add_bad(chunk *c, size_t off, size_t len)
{
    if (c->n_bad == c->cap_bad) {
        size_t ncap = c->cap_bad ? c->cap_bad * 2 : 16;
        bad_rec *nb = mr_realloc(c->bad, ncap * sizeof(*nb));
        if (!nb) {
            c->oom = MR_E_NOMEM;
            return;
        }
        c->bad = nb;
        c->cap_bad = ncap;
    }
    c->bad[c->n_bad++] = (bad_rec){off, len};
}

/* The common case of a number column, in one pass: an unquoted field of
 * [+-]digits[.digits] ending at the delimiter or '\n' is parsed while it is
 * scanned (instead of a scan for its end, then a parse). Only fields the
 * general path would read the same way are taken: the float is the one
 * mr__parse_f64's exact fast path gives, the integer mr__parse_i64's, no
 * null token can start with the field's first byte, and the field is not
 * longer than the limit. Anything else (an exponent, a '\r', too many
 * digits, a narrow integer it does not fit) returns 0 with nothing consumed,
 * and the general path reads the field. Returns 1 for a field ending at the
 * delimiter, 2 for one ending the record. */
static inline int fused_number(const mr_csv_reader *r, mr__cb *b, const char **pp)
{
    const char *p = *pp, *s = p;
    int neg = 0;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    uint64_t m = 0;
    int nd = 0, frac = 0, any = 0, dot = 0;
    const char *digits = p;
    for (;; p++) {
        unsigned d = (unsigned)(unsigned char)*p - '0';
        if (d > 9) break;
        m = m * 10 + d;
        nd += m != 0;
        any = 1;
    }
    size_t int_digits = (size_t)(p - digits);
    if (*p == '.') {
        dot = 1;
        for (p++;; p++) {
            unsigned d = (unsigned)(unsigned char)*p - '0';
            if (d > 9) break;
            m = m * 10 + d;
            nd += m != 0;
            frac++;
            any = 1;
        }
    }
    const char t = *p;
    int kind = t == r->c.delim ? 1 : t == '\n' ? 2 : 0;
    if (!kind || !any || nd > 19 || (size_t)(p - s) > r->c.max_field) return 0;
    size_t i = b->n;
    if (b->type == MR_T_FLOAT64) {
        if (m > ((uint64_t)1 << 53) || frac > 22) return 0;
        ((double *)b->data)[i] = mr__f64_exact(m, frac, neg);
    } else {
        /* an integer: digits only, within int64 (19 significant digits fit
         * uint64; the sign's range is checked as mr__parse_i64 does) */
        if (dot || !int_digits) return 0;
        int64_t v;
        if (neg) {
            if (m > (uint64_t)INT64_MAX + 1) return 0;
            v = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
        } else {
            if (m > (uint64_t)INT64_MAX) return 0;
            v = (int64_t)m;
        }
        if ((b->kind.int_bits || b->kind.flags) && !mr_kind_fits(MR_T_INT64, b->kind, v)) return 0;
        ((int64_t *)b->data)[i] = v;
    }
    b->valid[i] = 1;
    b->n++;
    *pp = p + 1;
    return kind;
}

static void parse_chunk(void *ctx, size_t k)
{
    wjob *w = ctx;
    mr_csv_reader *r = w->r;
    chunk *c = &w->ch[k];
    const size_t n_cols = r->n_cols;
    mr__cb *cbs = w->cbs + k * n_cols;
    mr_dtype *rowneed = NULL;
    size_t rows = 0;
    for (size_t j = 0; j < n_cols; j++) {
        if (mr__cb_init(&cbs[j], w->types[j], c->max_rows) != MR_OK) {
            c->oom = MR_E_NOMEM;
            return;
        }
        cbs[j].kind = w->kinds[j];
    }
    c->need = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_dtype));
    c->qempty = mr_calloc(n_cols ? n_cols : 1, 1);
    rowneed = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_dtype));
    if (!c->need || !c->qempty || !rowneed) {
        c->oom = MR_E_NOMEM;
        goto done;
    }
    const char *const base = w->buf, *const end = base + c->end;
    const char *p = base + c->begin;
    long line = c->line;
    const int fail_fast = r->c.on_error == MR_ON_ERROR_FAIL;
    /* the fused number path needs a delimiter and a quote that cannot be part of a number */
    const unsigned char dl = (unsigned char)r->c.delim, qu = (unsigned char)r->c.quote;
    const int fuse = !((unsigned)(dl - '0') <= 9u || dl == '.' || dl == '-' || dl == '+' || dl == '\n' ||
                       (unsigned)(qu - '0') <= 9u || qu == '.' || qu == '-' || qu == '+');
    while (p < end) {
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) { /* blank line */
            p += *p == '\n' ? 1 : 2;
            line++;
            continue;
        }
        const char *rec = p;
        const long rline = line;
        size_t j = 0;
        int bad = 0, row_need = 0;
        for (;;) {
            if (fuse && !bad && j < n_cols && (cbs[j].type == MR_T_FLOAT64 || cbs[j].type == MR_T_INT64) &&
                !(r->null_edge[(uint8_t)*p] & NULL_FIRST)) {
                int t = fused_number(r, &cbs[j], &p);
                if (t) {
                    j++;
                    if (t == 2) {
                        line++;
                        break;
                    }
                    continue;
                }
            }
            fld f;
            int t = next_field(r, &p, end, &f, &line);
            if (t < 0) {
                field_error(w, c, t, rline, j + 1);
                p = record_end(rec, end, r->c.quote, NULL);
                line = rline + (long)count_byte(rec, (size_t)(p - rec), '\n');
                bad = 1;
                break;
            }
            if (!bad && j < n_cols) {
                if (f.len > r->c.max_field) {
                    chunk_error(w, c, 0, MR_E_LIMIT, rline, (long)(j + 1), "field %zu is longer than %zu bytes",
                                j + 1, r->c.max_field);
                    bad = 1;
                } else {
                    mr_status rc = MR_OK;
                    if (f.quoted && !f.len && cbs[j].type == MR_T_NULL) c->qempty[j] = 1;
                    if (convert(r, &cbs[j], &f, &rc)) {
                        if (misfit(w, c, j, &f, rline, rowneed, &row_need)) bad = 1;
                        else mr__cb_null(&cbs[j]); /* placeholder; this pass will be redone */
                        if (c->has_err && c->err_hint) goto done; /* fatal */
                    }
                    if (rc != MR_OK) {
                        c->oom = rc;
                        goto done;
                    }
                }
            }
            j++;
            if (t == F_EOR) break;
        }
        if (p > end) p = end; /* the last record ended at the sentinel */
        if (!bad && j != n_cols) {
            chunk_error(w, c, 0, MR_E_PARSE, rline, 0, "expected %zu fields, got %zu", n_cols, j);
            bad = 1;
        }
        if (!bad && (size_t)(p - rec) > r->c.max_line) {
            chunk_error(w, c, 0, MR_E_LIMIT, rline, 0, "record is longer than %zu bytes", r->c.max_line);
            bad = 1;
        }
        if (bad) {
            for (size_t q = 0; q < n_cols; q++) mr__cb_truncate(&cbs[q], rows);
            if (fail_fast) goto done;
            add_bad(c, (size_t)(rec - base), (size_t)(p - rec));
            if (c->oom) goto done;
        } else {
            if (row_need) {
                for (size_t q = 0; q < n_cols; q++) {
                    c->need[q] = mr__type_join(c->need[q], rowneed[q]);
                    rowneed[q] = MR_T_NULL;
                }
                c->promote = 1;
            }
            rows++;
        }
    }
done:
    c->n_rows = rows;
    mr_free(rowneed);
}

/* ---- pass 1: quote and newline counts ---------------------------------- */

#if !defined(__SSE2__)
static inline uint64_t eq_mask(uint64_t w, uint64_t pat)
{
    uint64_t x = w ^ pat; /* zero bytes where equal */
    uint64_t lo7 = 0x7f7f7f7f7f7f7f7fULL;
    return ~(((x & lo7) + lo7) | x | lo7); /* high bit set exactly for zero bytes */
}
#endif

static void count_task(void *ctx, size_t k)
{
    wjob *w = ctx;
    const size_t C = w->r->c.chunk;
    size_t b = k * C, e = b + C < w->len ? b + C : w->len;
    const unsigned char *p = (const unsigned char *)w->buf + b, *pe = (const unsigned char *)w->buf + e;
    size_t q = 0, nl = 0;
#if defined(__SSE2__)
    /* 16 bytes a step: a compare gives 0xff per match, subtracting it adds 1
     * to that byte's counter; before a counter can wrap (255 steps) the
     * counters are summed into 64-bit lanes by a sum of absolute differences
     * against zero. About 4x the SWAR loop below (8.4% of an ingest profile). */
    const __m128i vq = _mm_set1_epi8((char)w->r->c.quote), vn = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    while (pe - p >= 16) {
        size_t steps = (size_t)(pe - p) / 16;
        if (steps > 255) steps = 255;
        __m128i cq = zero, cn = zero;
        for (size_t i = 0; i < steps; i++, p += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            cq = _mm_sub_epi8(cq, _mm_cmpeq_epi8(v, vq));
            cn = _mm_sub_epi8(cn, _mm_cmpeq_epi8(v, vn));
        }
        __m128i sq = _mm_sad_epu8(cq, zero), sn = _mm_sad_epu8(cn, zero);
        q += (size_t)_mm_cvtsi128_si64(sq) + (size_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sq, sq));
        nl += (size_t)_mm_cvtsi128_si64(sn) + (size_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sn, sn));
    }
#else
    uint64_t qp = 0x0101010101010101ULL * (unsigned char)w->r->c.quote, np = 0x0101010101010101ULL * '\n';
    for (; pe - p >= 8; p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        /* eq_mask sets only each byte's high bit: shifting them down to 0/1 per
         * byte and multiplying by 0x0101... sums the bytes into the top byte,
         * a portable popcount (without -mpopcnt, __builtin_popcountll is a
         * libgcc call that showed up at 3% of an ingest profile). */
        q += (size_t)(((eq_mask(v, qp) >> 7) * 0x0101010101010101ULL) >> 56);
        nl += (size_t)(((eq_mask(v, np) >> 7) * 0x0101010101010101ULL) >> 56);
    }
#endif
    for (; p < pe; p++) {
        q += *p == (unsigned char)w->r->c.quote;
        nl += *p == '\n';
    }
    w->nom_q[k] = q;
    w->nom_nl[k] = nl;
}

/* ---- windows ------------------------------------------------------------ */

static void free_job(wjob *w, size_t n_cols)
{
    if (w->cbs)
        for (size_t i = 0; i < w->n_ch * n_cols; i++) mr__cb_free(&w->cbs[i]);
    mr_free(w->cbs);
    w->cbs = NULL;
    if (w->ch)
        for (size_t k = 0; k < w->n_ch; k++) {
            mr_free(w->ch[k].bad);
            mr_free(w->ch[k].need);
            mr_free(w->ch[k].qempty);
            mr_free(w->ch[k].nn);
        }
    mr_free(w->ch);
    w->ch = NULL;
}

static mr_status report_chunk_error(mr_csv_reader *r, const chunk *c, mr_error *err)
{
    mr_status rc = MR_ERR(err, c->err_code, "%s", c->err_msg);
    mr_error_at(err, r->path, c->err_line, c->err_col);
    if (c->err_hint) mr_error_hint(err, "declare the column's type in the schema, or raise sample_rows");
    return rc;
}

/* An inferred numeric column that a later value promoted to string: counts
 * the numbers among its values and warns as at inference. */
static __attribute__((cold, noinline)) void warn_promoted(const mr_csv_reader *r, const wjob *w, const mr_table *t,
                                                          size_t j)
{
    const non_number *first = NULL;
    for (size_t k = 0; k < w->n_ch && !first; k++)
        if (w->ch[k].nn && w->ch[k].nn[j].line) first = &w->ch[k].nn[j];
    if (!first) return;
    const mr_column *c = t->cols[j];
    size_t values = 0, numbers = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (mr_column_is_null(c, i)) continue;
        size_t len;
        const char *s = mr_column_str(c, i, &len);
        values++;
        numbers += is_number_type(mr__classify(s, len));
    }
    warn_numeric_strings(r, j, first, numbers, values);
}

/* Parses the complete records at buf[pos, len) (all of it at EOF); sets
 * *consumed (0 when not even one record is complete) and *out. */
static mr_status parse_window(mr_csv_reader *r, size_t *consumed, mr_table **out, mr_error *err)
{
    const size_t C = r->c.chunk, n_cols = r->n_cols;
    const char *buf = r->buf + r->pos;
    size_t len = r->len - r->pos;
    mr_status rc = MR_OK;
    mr_dtype *types = NULL;
    size_t *line_at = NULL;
    wjob w = {.r = r, .buf = buf, .len = len};
    *consumed = 0;
    *out = NULL;
    w.n_nom = (len + C - 1) / C;
    w.nom_q = mr_calloc(w.n_nom + 1, sizeof(size_t));
    w.nom_nl = mr_calloc(w.n_nom + 1, sizeof(size_t));
    types = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_dtype));
    if (!w.nom_q || !w.nom_nl || !types) goto nomem;
    memcpy(types, r->types, n_cols * sizeof(mr_dtype));
    mr__run_tasks(w.n_nom, r->c.threads, count_task, &w);
    /* prefix sums: nom_q[k] / nom_nl[k] become counts before nominal chunk k */
    size_t sq = 0, snl = 0;
    for (size_t k = 0; k <= w.n_nom; k++) {
        size_t q = k < w.n_nom ? w.nom_q[k] : 0, nl = k < w.n_nom ? w.nom_nl[k] : 0;
        w.nom_q[k] = sq;
        w.nom_nl[k] = snl;
        sq += q;
        snl += nl;
    }
    size_t complete = len;
    if (!r->eof) { /* last newline at even quote parity */
        int par = (int)(w.nom_q[w.n_nom] & 1);
        complete = 0;
        for (size_t i = len; i-- > 0;) {
            if (buf[i] == r->c.quote) par ^= 1;
            else if (buf[i] == '\n' && !par) {
                complete = i + 1;
                break;
            }
        }
        if (complete == 0) goto done;
    }
    w.len = complete;
    w.n_ch = (complete + C - 1) / C;
    w.ch = mr_calloc(w.n_ch ? w.n_ch : 1, sizeof(chunk));
    line_at = mr_calloc(w.n_ch + 1, sizeof(size_t));
    if (!w.ch || !line_at) goto nomem;
    /* chunk starts: first record start at or after k*C */
    for (size_t k = 0; k < w.n_ch; k++) {
        size_t s = k * C, start;
        if (k == 0) {
            start = 0;
        } else if (w.ch[k - 1].begin >= s) {
            start = w.ch[k - 1].begin;
        } else {
            int par = (int)(w.nom_q[k] & 1) ^ (buf[s - 1] == r->c.quote);
            start = complete;
            for (size_t i = s - 1; i < complete; i++) {
                if (buf[i] == r->c.quote) par ^= 1;
                else if (buf[i] == '\n' && !par) {
                    start = i + 1;
                    break;
                }
            }
        }
        w.ch[k].begin = start;
        size_t m = start / C;
        line_at[k] = w.nom_nl[m] + count_byte(buf + m * C, start - m * C, '\n');
    }
    line_at[w.n_ch] = w.nom_nl[complete / C] + count_byte(buf + complete / C * C, complete % C, '\n');
    for (size_t k = 0; k < w.n_ch; k++) {
        w.ch[k].end = k + 1 < w.n_ch ? w.ch[k + 1].begin : complete;
        w.ch[k].line = r->line + (long)line_at[k];
        w.ch[k].max_rows = line_at[k + 1] - line_at[k] + 1;
    }
    /* A chunk in which no record starts (one record spans it) is dropped: it would parse nothing
     * and still cost a buffer per column. The order of the rest is the file's. */
    const size_t lines = line_at[w.n_ch];
    size_t kept = 0;
    for (size_t k = 0; k < w.n_ch; k++)
        if (w.ch[k].begin < w.ch[k].end) w.ch[kept++] = w.ch[k];
    w.n_ch = kept;
    w.allow_promote = r->whole;
    w.types = types;
    w.kinds = r->kinds;
    for (;;) {
        w.cbs = mr_calloc(w.n_ch * n_cols + 1, sizeof(mr__cb));
        if (!w.cbs) goto nomem;
        mr__run_tasks(w.n_ch, r->c.threads, parse_chunk, &w);
        int promote = 0;
        for (size_t k = 0; k < w.n_ch; k++) {
            if (w.ch[k].oom) goto nomem;
            if (w.ch[k].has_err) {
                rc = report_chunk_error(r, &w.ch[k], err);
                goto done;
            }
            promote |= w.ch[k].promote;
        }
        /* A column that no value typed is a string column, so its quoted empty fields are empty
         * strings, not nulls (as in any string column): read it again as one, whether the sample
         * rows held them or not. */
        for (size_t j = 0; !promote && j < n_cols; j++)
            for (size_t k = 0; types[j] == MR_T_NULL && k < w.n_ch; k++)
                if (w.ch[k].qempty[j]) {
                    types[j] = MR_T_STRING;
                    promote = 1;
                }
        if (!promote) break;
        for (size_t k = 0; k < w.n_ch; k++) {
            for (size_t j = 0; j < n_cols; j++) types[j] = mr__type_join(types[j], w.ch[k].need[j]);
            mr_free(w.ch[k].bad);
            mr_free(w.ch[k].need);
            mr_free(w.ch[k].qempty);
            memset(&w.ch[k].n_rows, 0, sizeof(chunk) - offsetof(chunk, n_rows));
        }
        for (size_t i = 0; i < w.n_ch * n_cols; i++) mr__cb_free(&w.cbs[i]);
        mr_free(w.cbs);
        w.cbs = NULL;
    }
    /* bad rows, in file order */
    for (size_t k = 0; k < w.n_ch; k++) {
        const chunk *c = &w.ch[k];
        r->stats.rows_skipped += c->n_bad;
        for (size_t i = 0; r->qf && i < c->n_bad; i++) {
            if (fwrite(buf + c->bad[i].off, 1, c->bad[i].len, r->qf) != c->bad[i].len) {
                rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot write quarantine file");
                goto done;
            }
            r->stats.rows_quarantined++;
        }
    }
    if (r->qf && fflush(r->qf) != 0) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot write quarantine file");
        goto done;
    }
    if (r->eof && len && complete == len) { /* the file's last text is parsed: free it before the columns are built */
        mr_free(r->buf);
        r->buf = NULL;
        r->cap = 0; /* pos, len stay: the caller consumes all of it (len > 0), and at pos == len and EOF
                       nothing reads the buffer again (an empty window at EOF keeps it: consumed is 0 then) */
    }
    rc = mr__cb_table(r->names, types, r->kinds, n_cols, w.cbs, w.n_ch, r->c.threads, out, err);
    if (rc != MR_OK) goto done;
    for (size_t j = 0; j < n_cols; j++) {
        if (is_number_type(r->types[j]) && (*out)->cols[j]->type == MR_T_STRING) warn_promoted(r, &w, *out, j);
        r->types[j] = (*out)->cols[j]->type;
    }
    *consumed = complete;
    r->line += (long)lines;
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "out of memory parsing '%s'", r->path);
done:
    free_job(&w, n_cols);
    mr_free(w.nom_q);
    mr_free(w.nom_nl);
    mr_free(types);
    mr_free(line_at);
    return rc;
}

/* ---- reader ------------------------------------------------------------- */

void mr_csv_options_init(mr_csv_options *o) { memset(o, 0, sizeof(*o)); }

/* Compacts the buffer and reads until it holds want bytes or EOF. */
static mr_status fill(mr_csv_reader *r, size_t want, mr_error *err)
{
    if (r->pos) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
    }
    if (want > r->cap || !r->buf) {
        char *nb = mr_realloc(r->buf, want + 1);
        if (!nb) return MR_ERR(err, MR_E_NOMEM, "out of memory reading '%s'", r->path);
        r->buf = nb;
        r->cap = want;
    }
    while (!r->eof && r->len < r->cap) {
        ssize_t n = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot read", r->path);
        if (n == 0) r->eof = 1;
        r->len += (size_t)n;
    }
    r->buf[r->len] = '\n';
    return MR_OK;
}

/* Makes sure one complete record starts at pos (or EOF is reached). */
static mr_status need_record(mr_csv_reader *r, mr_error *err)
{
    for (;;) {
        int found = 0;
        record_end(r->buf + r->pos, r->buf + r->len, r->c.quote, &found);
        if (found || r->eof) return MR_OK;
        if (r->len - r->pos > r->c.max_line) {
            MR_ERR(err, MR_E_LIMIT, "record is longer than %zu bytes", r->c.max_line);
            mr_error_at(err, r->path, r->line, 0);
            return MR_E_LIMIT;
        }
        mr_status rc = fill(r, r->cap * 2, err);
        if (rc != MR_OK) return rc;
    }
}

static void skip_blank_lines(mr_csv_reader *r)
{
    while (r->pos < r->len) {
        if (r->buf[r->pos] == '\n') r->pos++;
        else if (r->buf[r->pos] == '\r' && r->pos + 1 < r->len && r->buf[r->pos + 1] == '\n') r->pos += 2;
        else break;
        r->line++;
    }
}

static char *unescape(const fld *f, char quote)
{
    char *s = mr_malloc(f->len + 1);
    if (!s) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < f->len; i++) {
        s[n++] = f->s[i];
        if (f->esc && f->s[i] == quote) i++;
    }
    s[n] = '\0';
    return s;
}

static const char *name_of(const void *ctx, size_t id) { return ((char *const *)ctx)[id]; }

/* Reads the header (or counts the first record's fields) into names. A
 * name must be valid UTF-8 (it goes into manifests, JSON and terminals
 * as it is), and names must be unique. */
static mr_status read_header(mr_csv_reader *r, mr_error *err)
{
    const char *p = r->buf + r->pos, *end = r->buf + r->len;
    long line = r->line;
    size_t cap = 0;
    mr_status rc = MR_OK;
    for (size_t j = 0;; j++) {
        fld f;
        int t = next_field(r, &p, end, &f, &line);
        if (t < 0) {
            rc = MR_ERR(err, MR_E_PARSE, "%s in the %s (field %zu)",
                        t == F_ERR_STRAY   ? "unexpected quote in unquoted field"
                        : t == F_ERR_AFTER ? "unexpected character after closing quote"
                                           : "unterminated quoted field",
                        r->c.no_header ? "first record" : "header", j + 1);
            mr_error_at(err, r->path, r->line, (long)(j + 1));
            return rc;
        }
        if (r->n_cols == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = mr_realloc(r->names, cap * sizeof(char *));
            if (!nn) return MR_ERR(err, MR_E_NOMEM, "out of memory");
            r->names = nn;
        }
        char *name = r->c.no_header || f.len == 0 ? mr_asprintf("c%zu", j) : unescape(&f, r->c.quote);
        if (name && !name[0]) { /* a name that starts with a NUL byte is as empty as an empty field */
            mr_free(name);
            name = mr_asprintf("c%zu", j);
        }
        if (!name) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        r->names[r->n_cols++] = name;
        if (!mr_utf8_valid(name, strlen(name))) {
            rc = MR_ERR(err, MR_E_PARSE, "the name in field %zu of the header is not valid UTF-8", j + 1);
            mr_error_at(err, r->path, r->line, (long)(j + 1));
            mr_error_hint(err, "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
            return rc;
        }
        if (t == F_EOR) break;
    }
    if (p > end) p = end;
    rc = mr_strindex_reserve(&r->name_ix, r->n_cols);
    for (size_t i = 0; rc == MR_OK && i < r->n_cols; i++) {
        size_t k;
        rc = mr_strindex_add(&r->name_ix, i, name_of, r->names, &k);
        if (rc != MR_OK) return MR_ERR(err, rc, "out of memory reading the header of '%s'", r->path);
        if (k != SIZE_MAX) {
            rc = MR_ERR(err, MR_E_SCHEMA, "duplicate column name '%s' in the header (fields %zu and %zu)",
                        r->names[i], k + 1, i + 1);
            mr_error_at(err, r->path, r->line, (long)(i + 1));
            return rc;
        }
    }
    if (rc != MR_OK) return MR_ERR(err, rc, "out of memory reading the header of '%s'", r->path);
    if (!r->c.no_header) {
        r->stats.bytes += (size_t)(p - (r->buf + r->pos));
        r->pos = (size_t)(p - r->buf);
        r->line = line;
    }
    return MR_OK;
}

/* Infers column types from the first sample_rows complete records, and
 * counts per column the non-null values and those that are numbers, with the
 * first value that is not (for warn_numeric_strings). */
static mr_status infer(mr_csv_reader *r, mr_dtype *types)
{
    const char *p = r->buf + r->pos, *end = r->buf + r->len;
    long line = r->line;
    size_t n = 0, n_cols = r->n_cols;
    mr_dtype *row = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_dtype));
    fld *rowf = mr_calloc(n_cols ? n_cols : 1, sizeof(fld));
    r->sample = mr_calloc(n_cols ? n_cols : 1, sizeof(col_sample));
    if (!row || !rowf || !r->sample) {
        mr_free(row);
        mr_free(rowf);
        return MR_E_NOMEM;
    }
    while (p < end && n < r->c.sample_rows) {
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) {
            p += *p == '\n' ? 1 : 2;
            line++;
            continue;
        }
        const char *rec = p;
        const long rline = line;
        size_t j = 0;
        int bad = 0;
        for (;;) {
            fld f;
            int t = next_field(r, &p, end, &f, &line);
            if (t < 0) {
                bad = 1;
                p = record_end(rec, end, r->c.quote, NULL);
                line = rline + (long)count_byte(rec, (size_t)(p - rec), '\n');
                break;
            }
            if (j < n_cols) {
                row[j] = is_null(r, &f) || (f.quoted && !f.len) ? MR_T_NULL
                         : f.esc                                ? MR_T_STRING
                                                                : mr__classify(f.s, f.len);
                rowf[j] = f;
            }
            j++;
            if (t == F_EOR) break;
        }
        if (p > end && !r->eof) break; /* cut by the window: incomplete */
        if (bad || j != n_cols) continue;
        for (size_t q = 0; q < n_cols; q++) {
            types[q] = mr__type_join(types[q], row[q]);
            col_sample *cs = &r->sample[q];
            if (row[q] == MR_T_NULL) continue;
            cs->values++;
            if (is_number_type(row[q])) cs->numbers++;
            else if (!cs->first.line) note_non_number(&cs->first, rline, q + 1, &rowf[q]);
        }
        n++;
    }
    mr_free(row);
    mr_free(rowf);
    return MR_OK;
}

/* pandas' default na_values (pandas 2.x, so with "None"), and "-"; the empty
 * field is null without being listed. docs/data.md lists them; the CSV writer
 * quotes every string equal to one, so what it writes reads back as it was. */
static const char *const default_nulls[] = {
    "#N/A", "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
    "N/A",  "NA",       "NULL", "NaN",     "None",     "n/a",  "nan",  "null",   "-",
};

const char *const *mr_csv_default_null_tokens(size_t *n_out)
{
    *n_out = sizeof(default_nulls) / sizeof(default_nulls[0]);
    return default_nulls;
}

static mr_status apply_options(mr_csv_reader *r, const mr_csv_options *o, mr_error *err)
{
    mr_csv_options d;
    mr_csv_options_init(&d);
    if (!o) o = &d;
    r->c.delim = o->delimiter ? o->delimiter : ',';
    r->c.quote = o->quote ? o->quote : '"';
    if (r->c.delim == '\n' || r->c.delim == '\r' || r->c.delim == r->c.quote || r->c.quote == '\n' ||
        r->c.quote == '\r')
        return MR_ERR(err, MR_E_INVALID_ARG, "the delimiter and quote must differ and not be CR or LF");
    r->c.no_header = o->no_header;
    size_t n_nt = 0;
    const char *const *nt = o->null_tokens ? o->null_tokens : mr_csv_default_null_tokens(&n_nt);
    if (o->null_tokens) n_nt = o->n_null_tokens;
    r->c.nulls = mr_calloc(n_nt ? n_nt : 1, sizeof(char *));
    r->c.null_len = mr_calloc(n_nt ? n_nt : 1, sizeof(size_t));
    if (!r->c.nulls || !r->c.null_len) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n_nt; i++) {
        r->c.nulls[i] = mr_strdup(nt[i]);
        if (!r->c.nulls[i]) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        size_t l = strlen(nt[i]);
        r->c.null_len[i] = l;
        r->c.n_nulls++;
        if (l == 0) continue; /* the empty field is null anyway */
        if (l < 64) r->c.null_lens |= (uint64_t)1 << l;
        else r->c.null_long = 1;
        r->null_edge[(uint8_t)nt[i][0]] |= NULL_FIRST;
        r->null_edge[(uint8_t)nt[i][l - 1]] |= NULL_LAST;
    }
    r->c.sample_rows = o->sample_rows ? o->sample_rows : DEFAULT_SAMPLE;
    r->c.on_error = o->on_error;
    r->c.threads = o->threads;
    r->c.max_line = o->max_line_len ? o->max_line_len : DEFAULT_CAP;
    r->c.max_field = o->max_field_len ? o->max_field_len : DEFAULT_CAP;
    r->c.chunk = o->chunk_size ? o->chunk_size : DEFAULT_CHUNK;
    if (o->on_error > MR_ON_ERROR_QUARANTINE || (o->on_error == MR_ON_ERROR_QUARANTINE && !o->quarantine_path))
        return MR_ERR(err, MR_E_INVALID_ARG, "on_error quarantine needs a quarantine path");
    r->cls[(uint8_t)r->c.delim] = 1;
    r->cls[(uint8_t)r->c.quote] = 1;
    r->cls['\n'] = 1;
    return MR_OK;
}

static mr_status apply_schema(mr_csv_reader *r, const mr_csv_options *o, mr_error *err)
{
    for (size_t i = 0; o && i < o->n_schema; i++) {
        ssize_t found = mr_strindex_find(&r->name_ix, o->schema_names[i], name_of, r->names);
        size_t j = found < 0 ? r->n_cols : (size_t)found;
        if (j == r->n_cols) {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "schema names column '%s', which the file does not have",
                                  o->schema_names[i]);
            mr_error_at(err, r->path, 0, 0);
            const char *best = mr_closest(o->schema_names[i], (const char *const *)r->names, r->n_cols);
            if (best) mr_error_hint(err, "did you mean '%s'?", best);
            return rc;
        }
        if (o->schema_types[i] == MR_T_NULL || mr_dtype_name(o->schema_types[i])[0] == 'u')
            return MR_ERR(err, MR_E_INVALID_ARG, "column '%s': invalid declared type", o->schema_names[i]);
        r->types[j] = o->schema_types[i];
        if (o->schema_kinds) r->kinds[j] = o->schema_kinds[i];
        if (r->types[j] == MR_T_DECIMAL && !r->kinds[j].precision)
            return MR_ERR(err, MR_E_INVALID_ARG, "column '%s': a declared decimal needs its precision and scale",
                          o->schema_names[i]);
        r->declared[j] = 1;
    }
    return MR_OK;
}

static mr_status open_impl(const char *path, const mr_csv_options *o, int whole, mr_csv_reader **out, mr_error *err)
{
    mr_status rc;
    *out = NULL;
    mr_csv_reader *r = mr_calloc(1, sizeof(*r));
    if (!r) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    r->fd = -1;
    r->line = 1;
    r->whole = whole;
    mr_error_init(&r->sticky_err);
    rc = apply_options(r, o, err);
    if (rc != MR_OK) goto fail;
    r->path = mr_strdup(path);
    if (!r->path) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (r->fd < 0 || fstat(r->fd, &st) != 0) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open", path);
        goto fail;
    }
    size_t window = whole ? (size_t)st.st_size + 1 : WINDOW_CHUNKS * r->c.chunk; /* +1: see EOF in one go */
    rc = fill(r, window, err);
    if (rc != MR_OK) goto fail;
    if (r->len >= 3 && !memcmp(r->buf, "\xEF\xBB\xBF", 3)) {
        r->pos = 3;
        r->stats.bytes = 3;
    }
    size_t before = r->pos;
    skip_blank_lines(r);
    r->stats.bytes += r->pos - before;
    if (r->pos == r->len && r->eof) {
        if (!r->c.no_header) {
            rc = MR_ERR(err, MR_E_PARSE, "empty file: expected a header line");
            mr_error_at(err, path, 0, 0);
            goto fail;
        }
    } else {
        rc = need_record(r, err);
        if (rc == MR_OK) rc = read_header(r, err);
        if (rc != MR_OK) goto fail;
    }
    r->types = mr_calloc(r->n_cols ? r->n_cols : 1, sizeof(mr_dtype));
    r->declared = mr_calloc(r->n_cols ? r->n_cols : 1, 1);
    r->kinds = mr_calloc(r->n_cols ? r->n_cols : 1, sizeof *r->kinds);
    if (!r->types || !r->declared || !r->kinds) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    if (infer(r, r->types) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    rc = apply_schema(r, o, err);
    if (rc != MR_OK) goto fail;
    for (size_t j = 0; j < r->n_cols; j++)
        if (!r->declared[j] && r->types[j] == MR_T_STRING)
            warn_numeric_strings(r, j, &r->sample[j].first, r->sample[j].numbers, r->sample[j].values);
    if (!whole)
        for (size_t j = 0; j < r->n_cols; j++)
            if (r->types[j] == MR_T_NULL) r->types[j] = MR_T_STRING;
    if (r->c.on_error == MR_ON_ERROR_QUARANTINE) {
        r->qf = fopen(o->quarantine_path, "wb");
        if (!r->qf) {
            rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create quarantine file", o->quarantine_path);
            goto fail;
        }
    }
    *out = r;
    return MR_OK;
fail:
    mr_csv_reader_close(r, NULL);
    return rc;
}

mr_status mr_csv_reader_open(const char *path, const mr_csv_options *o, mr_csv_reader **out, mr_error *err)
{
    return open_impl(path, o, 0, out, err);
}

size_t mr_csv_reader_n_cols(const mr_csv_reader *r) { return r->n_cols; }
const char *mr_csv_reader_col_name(const mr_csv_reader *r, size_t j) { return j < r->n_cols ? r->names[j] : NULL; }
ssize_t mr_csv_reader_col_index(const mr_csv_reader *r, const char *name)
{
    return mr_strindex_find(&r->name_ix, name, name_of, r->names);
}
mr_dtype mr_csv_reader_col_type(const mr_csv_reader *r, size_t j)
{
    return j < r->n_cols ? (r->types[j] == MR_T_NULL ? MR_T_STRING : r->types[j]) : MR_T_NULL;
}

mr_status mr_csv_reader_next(mr_csv_reader *r, size_t max_rows, mr_table **out, mr_error *err)
{
    mr_status rc = MR_OK;
    *out = NULL;
    if (r->sticky != MR_OK) {
        if (err && !mr_error_is_set(err)) *err = r->sticky_err;
        return r->sticky;
    }
    for (;;) {
        if (r->cur) {
            size_t left = r->cur->n_rows - r->cur_off;
            if (left) {
                size_t take = max_rows && max_rows < left ? max_rows : left;
                if (r->cur_off == 0 && take == left) {
                    *out = r->cur;
                    r->cur = NULL;
                } else {
                    rc = mr_table_slice(r->cur, r->cur_off, r->cur_off + take, out, &r->sticky_err);
                    if (rc != MR_OK) goto fail;
                    r->cur_off += take;
                }
                r->stats.rows_read += take;
                r->handed_out = 1;
                return MR_OK;
            }
            mr_table_free(r->cur);
            r->cur = NULL;
            r->cur_off = 0;
        }
        if (r->pos == r->len && r->eof) {
            if (r->handed_out || !r->n_cols) return MR_OK;
            /* no data rows (or none kept): one batch of 0 rows with the
             * header's columns, so a consumer still learns them */
            r->handed_out = 1;
            rc = mr__cb_table(r->names, r->types, r->kinds, r->n_cols, NULL, 0, 1, out, &r->sticky_err);
            if (rc != MR_OK) goto fail;
            return MR_OK;
        }
        rc = fill(r, r->cap, &r->sticky_err);
        if (rc != MR_OK) goto fail;
        size_t consumed = 0;
        rc = parse_window(r, &consumed, &r->cur, &r->sticky_err);
        if (rc != MR_OK) goto fail;
        if (consumed == 0) { /* one record is bigger than the window */
            rc = need_record(r, &r->sticky_err);
            if (rc != MR_OK) goto fail;
            continue;
        }
        r->pos += consumed;
        r->stats.bytes += consumed;
    }
fail:
    r->sticky = rc;
    if (err && !mr_error_is_set(err)) *err = r->sticky_err;
    return rc;
}

void mr_csv_reader_close(mr_csv_reader *r, mr_csv_stats *stats)
{
    if (!r) return;
    if (stats) *stats = r->stats;
    if (r->fd >= 0) close(r->fd);
    if (r->qf) fclose(r->qf);
    mr_table_free(r->cur);
    for (size_t i = 0; i < r->n_cols; i++) mr_free(r->names[i]);
    mr_free(r->names);
    mr_strindex_deinit(&r->name_ix);
    mr_free(r->types);
    mr_free(r->declared);
    mr_free(r->kinds);
    mr_free(r->sample);
    for (size_t i = 0; i < r->c.n_nulls; i++) mr_free(r->c.nulls[i]);
    mr_free(r->c.nulls);
    mr_free(r->c.null_len);
    mr_free(r->buf);
    mr_free(r->path);
    mr_free(r);
}

mr_status mr_csv_read(const char *path, const mr_csv_options *o, mr_table **out, mr_csv_stats *stats, mr_error *err)
{
    mr_csv_reader *r = NULL;
    mr_table *t = NULL, *more = NULL;
    *out = NULL;
    mr_status rc = open_impl(path, o, 1, &r, err);
    if (rc != MR_OK) goto done;
    rc = mr_csv_reader_next(r, 0, &t, err);
    if (rc != MR_OK) goto done;
    if (!t) { /* no data rows: the header's columns, empty */
        rc = mr__cb_table(r->names, r->types, r->kinds, r->n_cols, NULL, 0, 1, &t, err);
        if (rc != MR_OK) goto done;
    }
    for (;;) { /* only if the file grew while being read */
        rc = mr_csv_reader_next(r, 0, &more, err);
        if (rc != MR_OK || !more) break;
        rc = mr_table_append(t, more, err);
        mr_table_free(more);
        more = NULL;
        if (rc != MR_OK) break;
    }
done:
    if (rc != MR_OK) {
        mr_table_free(t);
        t = NULL;
    }
    mr_csv_reader_close(r, stats);
    *out = t;
    return rc;
}
