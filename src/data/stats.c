/* One-pass column statistics (include/millrace/stats.h): rows, nulls, NaNs,
 * min/max, mean, and distinct counts.
 *
 * Distinct values. Every non-null value becomes a 64-bit hash (strings: the
 * low half of xxh3-128; numbers: their bits, -0.0 folded into 0.0; dates and
 * timestamps: their integer), mixed once more by the splitmix64 finalizer so
 * that small integers spread. While a column has at most MR_STATS_EXACT_MAX
 * distinct hashes they live in an open-addressing set and the count is exact
 * (up to 64-bit collisions); past that the set is dropped and the count is
 * the HyperLogLog estimate: register idx = the top P bits of the hash, rank =
 * the position of the first 1 bit in the rest; E = alpha_m m^2 / sum 2^-reg,
 * with linear counting (m ln(m / zeros)) below 2.5 m. The set holds the
 * very (mixed) hashes the registers are fed with, so the registers are only
 * allocated when the set is dropped and are then filled from it: a
 * register is a max over the hashes seen, so they end up as if fed from the
 * start, and a column of few values costs a small set, not 2^P bytes (a
 * table of a million columns fits in memory). */
#include "millrace/stats.h"

#include <math.h>
#include <string.h>

#define HLL_M (1u << MR_STATS_HLL_P) /* one-byte registers per column */

typedef struct col_acc {
    char *name;
    mr_dtype type;
    uint64_t rows, nulls, nans;
    int have;              /* min/max set */
    double fmin, fmax;     /* floats, bools */
    int64_t imin, imax;    /* int64, date, timestamp */
    char *smin, *smax;     /* strings (owned) */
    size_t smin_len, smax_len;
    double sum;            /* numbers and bools */
    uint64_t n_sum;
    uint8_t *hll;          /* HLL_M registers, once the set is dropped (NULL before) */
    uint64_t *set;         /* exact distinct hashes while few: open addressing, 0 = empty */
    size_t set_n, set_cap; /* set dropped (NULL) beyond MR_STATS_EXACT_MAX values */
    int set_zero;          /* the hash 0 was seen */
} col_acc;

struct mr_stats {
    col_acc *cols;
    size_t n_cols;
    int started;
    uint64_t rows;
    mr_status sticky;
};

/* The splitmix64 finalizer: mr_splitmix64 adds its increment first. */
static inline uint64_t mix64(uint64_t x)
{
    uint64_t s = x - 0x9e3779b97f4a7c15ULL;
    return mr_splitmix64(&s);
}

static inline void hll_add(uint8_t *reg, uint64_t m) /* m: a mixed hash */
{
    uint32_t idx = (uint32_t)(m >> (64 - MR_STATS_HLL_P));
    uint64_t w = (m << MR_STATS_HLL_P) | ((uint64_t)1 << (MR_STATS_HLL_P - 1));
    uint8_t rho = (uint8_t)(__builtin_clzll(w) + 1);
    if (rho > reg[idx]) reg[idx] = rho;
}

/* Drops the set for the registers, fed with every hash the set held. */
static mr_status to_hll(col_acc *a)
{
    a->hll = mr_calloc(HLL_M, 1);
    if (!a->hll) return MR_E_NOMEM;
    for (size_t k = 0; k < a->set_cap; k++)
        if (a->set[k]) hll_add(a->hll, a->set[k]);
    if (a->set_zero) hll_add(a->hll, 0);
    mr_free(a->set);
    a->set = NULL;
    return MR_OK;
}

/* Adds the mixed hash m: to the set while it stays small, else to the registers. */
static mr_status acc_add(col_acc *a, uint64_t h)
{
    uint64_t m = mix64(h); /* string hashes come from xxh3 already; mixing again is harmless */
    if (!a->set) {
        hll_add(a->hll, m);
        return MR_OK;
    }
    if (m == 0) {
        a->set_zero = 1;
        return MR_OK;
    }
    if ((a->set_n + 1) * 2 > a->set_cap) {
        size_t nc = a->set_cap * 2;
        if (a->set_cap >= 2 * MR_STATS_EXACT_MAX) { /* too many values: the estimate takes over */
            mr_status rc = to_hll(a);
            if (rc == MR_OK) hll_add(a->hll, m);
            return rc;
        }
        /* Out of memory is an error, not a switch to the estimate: whether
         * a count is exact depends on the data only (stats.h), so the same
         * input always gives the same statistics. */
        uint64_t *ns = mr_calloc(nc, sizeof *ns);
        if (!ns) return MR_E_NOMEM;
        for (size_t k = 0; k < a->set_cap; k++) {
            uint64_t v = a->set[k];
            if (!v) continue;
            size_t q = (size_t)(v & (nc - 1));
            while (ns[q]) q = (q + 1) & (nc - 1);
            ns[q] = v;
        }
        mr_free(a->set);
        a->set = ns;
        a->set_cap = nc;
    }
    size_t q = (size_t)(m & (a->set_cap - 1));
    while (a->set[q] && a->set[q] != m) q = (q + 1) & (a->set_cap - 1);
    if (!a->set[q]) {
        a->set[q] = m;
        a->set_n++;
    }
    return MR_OK;
}

/* HyperLogLog estimate with the small-range (linear counting) correction. */
static double hll_estimate(const uint8_t *reg)
{
    double m = HLL_M, sum = 0;
    unsigned zeros = 0;
    for (unsigned i = 0; i < HLL_M; i++) {
        sum += ldexp(1.0, -reg[i]);
        zeros += reg[i] == 0;
    }
    double e = 0.7213 / (1 + 1.079 / m) * m * m / sum;
    if (e <= 2.5 * m && zeros) e = m * log(m / zeros);
    return e;
}

static mr_status set_str_bound(char **dst, size_t *dst_len, const char *p, size_t len)
{
    char *c = mr_strndup(p, len);
    if (!c) return MR_E_NOMEM;
    mr_free(*dst);
    *dst = c;
    *dst_len = len;
    return MR_OK;
}

static int str_less(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c < 0 : al < bl;
}

static mr_status acc_strings(col_acc *a, const mr_column *c)
{
    const mr_column *d = c->codes ? c->dict : NULL;
    uint64_t *dh = d ? mr_malloc((d->n ? d->n : 1) * sizeof *dh) : NULL; /* NULL: hash per row */
    mr_status rc = MR_OK;
    for (size_t k = 0; dh && k < d->n; k++) {
        size_t len;
        const char *p = mr_column_str(d, k, &len);
        dh[k] = mr_hash_bytes(p, len).lo;
    }
    for (size_t i = 0; rc == MR_OK && i < c->n; i++) {
        if (mr_column_is_null(c, i)) continue;
        size_t len;
        const char *p = mr_column_str(c, i, &len);
        rc = acc_add(a, dh ? dh[c->codes[i]] : mr_hash_bytes(p, len).lo);
        if (rc == MR_OK && (!a->have || str_less(p, len, a->smin, a->smin_len)))
            rc = set_str_bound(&a->smin, &a->smin_len, p, len);
        if (rc == MR_OK && (!a->have || str_less(a->smax, a->smax_len, p, len)))
            rc = set_str_bound(&a->smax, &a->smax_len, p, len);
        a->have = 1;
    }
    mr_free(dh);
    return rc;
}

static mr_status acc_floats(col_acc *a, const mr_column *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (mr_column_is_null(c, i)) continue;
        double v = c->type == MR_T_FLOAT64   ? ((const double *)c->data)[i]
                   : c->type == MR_T_FLOAT32 ? ((const float *)c->data)[i]
                   : c->type == MR_T_DECIMAL ? mr_decimal_to_f64(((const int64_t *)c->data)[i], c->kind.scale)
                                             : ((const uint8_t *)c->data)[i];
        if (isnan(v)) {
            a->nans++;
            continue;
        }
        if (v == 0) v = 0; /* -0.0 and 0.0 are one value */
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        if (acc_add(a, bits) != MR_OK) return MR_E_NOMEM;
        if (!a->have || v < a->fmin) a->fmin = v;
        if (!a->have || v > a->fmax) a->fmax = v;
        a->have = 1;
        a->sum += v;
        a->n_sum++;
    }
    return MR_OK;
}

static mr_status acc_ints(col_acc *a, const mr_column *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (mr_column_is_null(c, i)) continue;
        int64_t v = c->type == MR_T_DATE ? ((const int32_t *)c->data)[i] : ((const int64_t *)c->data)[i];
        if (acc_add(a, (uint64_t)v) != MR_OK) return MR_E_NOMEM;
        if (!a->have || v < a->imin) a->imin = v;
        if (!a->have || v > a->imax) a->imax = v;
        a->have = 1;
        if (c->type == MR_T_INT64) {
            a->sum += (double)v;
            a->n_sum++;
        }
    }
    return MR_OK;
}

static mr_status acc_column(col_acc *a, const mr_column *c)
{
    a->rows += c->n;
    a->nulls += c->valid ? c->null_count : 0;
    switch (c->type) {
    case MR_T_STRING: return acc_strings(a, c);
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
    case MR_T_DECIMAL: /* as its float64 value */
    case MR_T_BOOL: return acc_floats(a, c);
    case MR_T_INT64:
    case MR_T_DATE:
    case MR_T_TIMESTAMP: return acc_ints(a, c);
    default: return MR_OK; /* MR_T_NULL: only nulls */
    }
}

mr_status mr_stats_new(mr_stats **out, mr_error *err)
{
    *out = mr_calloc(1, sizeof(mr_stats));
    return *out ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
}

static mr_status start(mr_stats *s, const mr_table *t)
{
    s->cols = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof(col_acc));
    if (!s->cols) return MR_E_NOMEM;
    s->n_cols = t->n_cols;
    for (size_t j = 0; j < t->n_cols; j++) {
        col_acc *a = &s->cols[j];
        a->name = mr_strdup(t->cols[j]->name);
        a->type = t->cols[j]->type;
        a->set_cap = 16; /* grows by doubling, as far as 2 * MR_STATS_EXACT_MAX */
        a->set = mr_calloc(a->set_cap, sizeof *a->set);
        if (!a->name || !a->set) return MR_E_NOMEM;
    }
    s->started = 1;
    return MR_OK;
}

mr_status mr_stats_add(mr_stats *s, const mr_table *t, mr_error *err)
{
    if (s->sticky != MR_OK) return MR_ERR(err, MR_E_STATE, "statistics: an earlier table failed");
    mr_status rc = MR_OK;
    if (!s->started) rc = start(s, t);
    if (rc == MR_OK && t->n_cols != s->n_cols)
        return MR_ERR(err, MR_E_SCHEMA, "statistics: a table of %zu columns after %zu", t->n_cols, s->n_cols);
    for (size_t j = 0; rc == MR_OK && j < s->n_cols; j++)
        if (t->cols[j]->type != s->cols[j].type)
            return MR_ERR(err, MR_E_SCHEMA, "statistics: column '%s' is %s, was %s", t->cols[j]->name,
                          mr_dtype_name(t->cols[j]->type), mr_dtype_name(s->cols[j].type));
    for (size_t j = 0; rc == MR_OK && j < s->n_cols; j++) rc = acc_column(&s->cols[j], t->cols[j]);
    if (rc != MR_OK) {
        s->sticky = rc;
        return MR_ERR(err, rc, "out of memory computing statistics");
    }
    s->rows += t->n_rows;
    return MR_OK;
}

uint64_t mr_stats_rows(const mr_stats *s) { return s->rows; }
size_t mr_stats_n_cols(const mr_stats *s) { return s->n_cols; }

void mr_stats_column_get(const mr_stats *s, size_t j, mr_stats_column *out)
{
    const col_acc *a = &s->cols[j];
    memset(out, 0, sizeof *out);
    out->name = a->name;
    out->type = a->type;
    out->rows = a->rows;
    out->nulls = a->nulls;
    out->nans = a->nans;
    out->has_min_max = a->have;
    out->has_mean = a->n_sum > 0;
    out->mean = out->has_mean ? a->sum / (double)a->n_sum : 0;
    out->distinct_exact = a->set != NULL;
    out->distinct = !a->have ? 0 : a->set ? (double)(a->set_n + (size_t)a->set_zero) : a->hll ? hll_estimate(a->hll) : 0;
}

/* Through a one-row column, so the text matches what head and export print. */
mr_status mr_stats_format_bound(const mr_stats *s, size_t j, int is_max, mr_buf *out)
{
    const col_acc *a = &s->cols[j];
    mr_column *c = NULL;
    mr_dtype t = a->type == MR_T_FLOAT32 || a->type == MR_T_DECIMAL ? MR_T_FLOAT64 : a->type;
    if (!a->have) return MR_OK;
    mr_status rc = mr_column_new("v", t, 1, &c, NULL);
    if (rc != MR_OK) return rc;
    switch (t) {
    case MR_T_BOOL: rc = mr_column_append_bool(c, (is_max ? a->fmax : a->fmin) != 0); break;
    case MR_T_FLOAT64: rc = mr_column_append_float64(c, is_max ? a->fmax : a->fmin); break;
    case MR_T_INT64:
    case MR_T_TIMESTAMP: rc = mr_column_append_int64(c, is_max ? a->imax : a->imin); break;
    case MR_T_DATE: rc = mr_column_append_int32(c, (int32_t)(is_max ? a->imax : a->imin)); break;
    case MR_T_STRING:
        rc = mr_column_append_str(c, is_max ? a->smax : a->smin, is_max ? a->smax_len : a->smin_len);
        break;
    default: rc = mr_column_append_null(c); break;
    }
    if (rc == MR_OK) rc = mr_column_format(c, 0, out);
    mr_column_free(c);
    return rc;
}

void mr_stats_free(mr_stats *s)
{
    if (!s) return;
    for (size_t j = 0; s->cols && j < s->n_cols; j++) {
        mr_free(s->cols[j].name);
        mr_free(s->cols[j].smin);
        mr_free(s->cols[j].smax);
        mr_free(s->cols[j].hll);
        mr_free(s->cols[j].set);
    }
    mr_free(s->cols);
    mr_free(s);
}
