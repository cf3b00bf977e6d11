/* Binning: per-feature bin edges from a seeded row sample (quantiles for
 * numeric features, the most frequent codes for categorical ones), the
 * row-major uint8 binned matrix, and its serialised form.
 *
 * Bin 0 of every feature is the missing bin. Numeric value bins 1..n-1 hold
 * the sorted value ranges (upper[b] inclusive, last = +inf); a value v goes
 * to the first bin with v <= upper[b], which is exactly the comparison that
 * model thresholds use at prediction time, so a split learnt on bins means
 * the same on raw values. Edges are midpoints between neighbouring distinct
 * sample values. */
#include "gbdt_int.h"
#include "millrace/value.h"

#include <float.h>
#include <stdlib.h>

/* ---- data object ---------------------------------------------------------- */

mr_status mr__gbdt_data_alloc(size_t n_rows, size_t n_features, mr_gbdt_data **out, mr_error *err)
{
    *out = NULL;
    if (n_features == 0) return MR_ERR(err, MR_E_INVALID_ARG, "gbdt data needs at least one feature");
    if (n_rows > (size_t)UINT32_MAX - 1) return MR_ERR(err, MR_E_LIMIT, "gbdt data: too many rows (%zu)", n_rows);
    if (n_features > 65535) return MR_ERR(err, MR_E_LIMIT, "gbdt data: too many features (%zu)", n_features);
    mr_gbdt_data *d = mr_calloc(1, sizeof(*d));
    if (!d) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    d->n_rows = n_rows;
    d->n_features = n_features;
    d->names = mr_calloc(n_features, sizeof(char *));
    d->feat = mr_calloc(n_features, sizeof(mr__bin_feature));
    d->bin_offset = mr_calloc(n_features + 1, sizeof(uint32_t));
    d->bins = mr_malloc(n_rows ? n_rows * n_features : 1);
    if (!d->names || !d->feat || !d->bin_offset || !d->bins) {
        mr_gbdt_data_free(d);
        return MR_ERR(err, MR_E_NOMEM, "out of memory for %zu x %zu binned matrix", n_rows, n_features);
    }
    *out = d;
    return MR_OK;
}

void mr_gbdt_data_free(mr_gbdt_data *d)
{
    if (!d) return;
    for (size_t j = 0; d->names && j < d->n_features; j++) mr_free(d->names[j]);
    for (size_t j = 0; d->feat && j < d->n_features; j++) {
        mr_free(d->feat[j].upper);
        mr_free(d->feat[j].cats);
    }
    mr_free(d->names);
    mr_free(d->feat);
    mr_free(d->bin_offset);
    mr_free(d->bins);
    mr_free(d->label);
    mr_free(d);
}

mr_status mr__gbdt_data_finish_offsets(mr_gbdt_data *d, mr_error *err)
{
    uint32_t off = 0;
    for (size_t j = 0; j < d->n_features; j++) {
        d->bin_offset[j] = off;
        if (d->feat[j].n_bins < 1 || d->feat[j].n_bins > MR__GBDT_MAX_BINS)
            return MR_ERR(err, MR_E_CORRUPT, "feature %zu has %u bins", j, (unsigned)d->feat[j].n_bins);
        off += d->feat[j].n_bins;
    }
    d->bin_offset[d->n_features] = off;
    return MR_OK;
}

size_t mr_gbdt_data_rows(const mr_gbdt_data *d) { return d->n_rows; }
size_t mr_gbdt_data_features(const mr_gbdt_data *d) { return d->n_features; }
const char *mr_gbdt_data_feature_name(const mr_gbdt_data *d, size_t j)
{
    return j < d->n_features ? d->names[j] : NULL;
}
int mr_gbdt_data_is_categorical(const mr_gbdt_data *d, size_t j)
{
    return j < d->n_features && d->feat[j].kind == MR__FEAT_CATEGORICAL;
}
int mr_gbdt_data_feature_bins(const mr_gbdt_data *d, size_t j) { return j < d->n_features ? d->feat[j].n_bins : 0; }
const uint8_t *mr_gbdt_data_bins(const mr_gbdt_data *d) { return d->bins; }
const float *mr_gbdt_data_label(const mr_gbdt_data *d) { return d->label; }

mr_status mr_gbdt_data_set_label(mr_gbdt_data *d, const float *label, mr_error *err)
{
    float *l = mr_malloc(d->n_rows * sizeof(float));
    if (!l) return MR_ERR(err, MR_E_NOMEM, "out of memory for labels");
    if (d->n_rows) memcpy(l, label, d->n_rows * sizeof(float));
    mr_free(d->label);
    d->label = l;
    return MR_OK;
}

/* ---- categorical_feature parameter ------------------------------------------ */

mr_status mr__gbdt_parse_categorical(const char *spec, const char *const *names, size_t n_features,
                                     uint8_t *is_cat, mr_error *err)
{
    if (!spec) return MR_OK;
    const char *s = spec;
    while (*s) {
        while (*s == ' ' || *s == ',') s++;
        if (!*s) break;
        const char *e = s;
        while (*e && *e != ',') e++;
        size_t len = (size_t)(e - s);
        while (len && s[len - 1] == ' ') len--;
        char tok[256];
        if (len >= sizeof(tok)) return MR_ERR(err, MR_E_INVALID_ARG, "categorical_feature: name too long");
        memcpy(tok, s, len);
        tok[len] = 0;
        const char *t = tok;
        if (!strncmp(t, "name:", 5)) t += 5;
        size_t found = SIZE_MAX;
        for (size_t j = 0; names && j < n_features && found == SIZE_MAX; j++)
            if (names[j] && !strcmp(names[j], t)) found = j;
        if (found == SIZE_MAX) {
            char *end;
            long v = strtol(t, &end, 10);
            if (*t && !*end && v >= 0 && (size_t)v < n_features) found = (size_t)v;
        }
        if (found == SIZE_MAX) {
            MR_ERR(err, MR_E_NOT_FOUND, "categorical_feature: no feature '%s' (%zu features)", t, n_features);
            mr_error_key(err, "categorical_feature");
            if (names) {
                const char *best = mr_closest(t, names, n_features);
                if (best) mr_error_hint(err, "did you mean %s?", best);
            }
            return MR_E_NOT_FOUND;
        }
        is_cat[found] = 1;
        s = e;
    }
    return MR_OK;
}

/* ---- feature sources ----------------------------------------------------------
 * One feature column of the input, whatever its type and layout. */
enum { SRC_F32, SRC_F64, SRC_I64, SRC_BOOL, SRC_DEC };
typedef struct colsrc {
    int type;
    unsigned scale;       /* SRC_DEC: the decimal's scale (int64 unscaled values) */
    const void *data;
    size_t stride;        /* in elements */
    const uint8_t *valid; /* validity bitmap or NULL */
} colsrc;

static inline double colsrc_get(const colsrc *c, size_t i)
{
    if (c->valid && !((c->valid[i >> 3] >> (i & 7)) & 1)) return NAN;
    switch (c->type) {
    case SRC_F32: return ((const float *)c->data)[i * c->stride];
    case SRC_F64: return ((const double *)c->data)[i * c->stride];
    case SRC_I64: return (double)((const int64_t *)c->data)[i * c->stride];
    case SRC_DEC: return mr_decimal_to_f64(((const int64_t *)c->data)[i * c->stride], c->scale);
    default: return (double)((const uint8_t *)c->data)[i * c->stride];
    }
}

/* Sorts v[0..n) (no NaN) ascending, tmp[0..n) scratch: a least
 * significant digit radix sort of the doubles' order-preserving bit
 * patterns, 8 bits a pass (a pass where every key has the same digit is
 * skipped). A zero comes out as +0.0 whatever its sign: -0.0 and +0.0 are
 * one value to binning (they compare equal), so an edge at zero is +0.0. */
static inline uint64_t order_key(double d)
{
    uint64_t u;
    if (d == 0) d = 0.0;
    memcpy(&u, &d, 8);
    return u >> 63 ? ~u : u | 0x8000000000000000ull;
}
void mr__sort_doubles(double *v, size_t n, double *tmp)
{
    if (n < 2) {
        if (n == 1 && v[0] == 0) v[0] = 0.0;
        return;
    }
    uint64_t *a = (uint64_t *)(void *)v, *b = (uint64_t *)(void *)tmp;
    size_t count[8][256];
    memset(count, 0, sizeof(count));
    for (size_t i = 0; i < n; i++) {
        uint64_t k = order_key(v[i]);
        a[i] = k;
        for (int d = 0; d < 8; d++) count[d][(k >> (8 * d)) & 0xFF]++;
    }
    for (int d = 0; d < 8; d++) {
        size_t *c = count[d], sum = 0;
        if (c[(a[0] >> (8 * d)) & 0xFF] == n) continue; /* the same digit everywhere */
        for (int x = 0; x < 256; x++) {
            size_t t = c[x];
            c[x] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) b[c[(a[i] >> (8 * d)) & 0xFF]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < n; i++) { /* stored as doubles again: (scratch) memory takes the type last stored */
        uint64_t k = a[i], u = k >> 63 ? k & 0x7FFFFFFFFFFFFFFFull : ~k;
        double d;
        memcpy(&d, &u, 8);
        v[i] = d;
    }
}

/* Numeric edges from m sorted non-NaN sample values. */
static mr_status numeric_edges(const double *v, size_t m, int max_bin, mr__bin_feature *f)
{
    f->kind = MR__FEAT_NUMERIC;
    /* distinct values and counts, in place over two scratch passes */
    size_t n_distinct = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || v[i] != v[i - 1]) n_distinct++;
    if (n_distinct == 0) {
        f->n_bins = 1;
        f->upper = mr_calloc(1, sizeof(double));
        return f->upper ? MR_OK : MR_E_NOMEM;
    }
    double *up = mr_calloc((size_t)max_bin + 1, sizeof(double));
    if (!up) return MR_E_NOMEM;
    int nb = 0; /* value bins closed so far */
    if ((int)n_distinct <= max_bin) {
        size_t i = 0;
        while (i < m) {
            size_t k = i;
            while (k < m && v[k] == v[i]) k++;
            double next = k < m ? v[k] : INFINITY;
            double mid = v[i] + (next - v[i]) / 2;
            if (!isfinite(mid) || mid >= next) mid = v[i];
            up[++nb] = k < m ? mid : INFINITY;
            i = k;
        }
    } else {
        /* Greedy quantiles: a value heavier than the current mean bin size
         * gets a bin of its own; lighter ones are merged until a bin reaches
         * the mean of what is left. */
        size_t rest = m;
        size_t i = 0;
        size_t cur = 0;
        while (i < m) {
            size_t k = i;
            while (k < m && v[k] == v[i]) k++;
            size_t cnt = k - i;
            int bins_left = max_bin - nb;
            double mean = (double)rest / bins_left;
            if (bins_left <= 1) {
                up[++nb] = INFINITY;
                break;
            }
            if (cur > 0 && (double)cnt >= mean) {
                /* close the current bin before this heavy value */
                double mid = v[i - 1] + (v[i] - v[i - 1]) / 2;
                if (!isfinite(mid) || mid >= v[i]) mid = v[i - 1];
                up[++nb] = mid;
                rest -= cur;
                cur = 0;
                continue; /* re-evaluate this value with the new mean */
            }
            cur += cnt;
            i = k;
            if (i >= m) {
                up[++nb] = INFINITY;
                break;
            }
            if ((double)cur >= mean) {
                double mid = v[i - 1] + (v[i] - v[i - 1]) / 2;
                if (!isfinite(mid) || mid >= v[i]) mid = v[i - 1];
                up[++nb] = mid;
                rest -= cur;
                cur = 0;
            }
        }
    }
    up[nb] = INFINITY;
    f->n_bins = (uint16_t)(nb + 1);
    f->upper = up;
    return MR_OK;
}

typedef struct catcnt {
    int32_t code;
    size_t cnt;
} catcnt;
static int cmp_catcnt(const void *a, const void *b)
{
    const catcnt *x = a, *y = b;
    if (x->cnt != y->cnt) return x->cnt > y->cnt ? -1 : 1;
    return (x->code > y->code) - (x->code < y->code);
}
static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Categorical bins from m sorted valid codes: the max_bin most frequent. */
static mr_status categorical_edges(const double *v, size_t m, int max_bin, mr__bin_feature *f)
{
    f->kind = MR__FEAT_CATEGORICAL;
    size_t n_distinct = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || v[i] != v[i - 1]) n_distinct++;
    catcnt *cc = mr_calloc(n_distinct ? n_distinct : 1, sizeof(catcnt));
    if (!cc) return MR_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (i == 0 || v[i] != v[i - 1]) cc[k++] = (catcnt){(int32_t)v[i], 0};
        cc[k - 1].cnt++;
    }
    qsort(cc, n_distinct, sizeof(catcnt), cmp_catcnt);
    size_t keep = n_distinct < (size_t)max_bin ? n_distinct : (size_t)max_bin;
    f->cats = mr_calloc(keep + 1, sizeof(int32_t));
    if (!f->cats) {
        mr_free(cc);
        return MR_E_NOMEM;
    }
    for (size_t i = 0; i < keep; i++) f->cats[i + 1] = cc[i].code;
    qsort(f->cats + 1, keep, sizeof(int32_t), cmp_i32);
    f->n_bins = (uint16_t)(keep + 1);
    mr_free(cc);
    return MR_OK;
}

/* ---- building --------------------------------------------------------------- */

typedef struct build_ctx {
    const colsrc *src;
    mr_gbdt_data *d;
    const uint32_t *sample;  /* sorted sample rows */
    size_t n_sample;
    const uint8_t *is_cat;
    double *scratch;         /* n_threads * 2 * n_sample: values and the sort's scratch */
    int max_bin;
    int failed;              /* set by a task on OOM; read after the join */
    size_t j0;               /* edges_task: the first feature (tasks count from it) */
    size_t row0;             /* bin_task: the matrix row of source row 0 */
} build_ctx;

static void edges_task(void *vctx, size_t begin, size_t end, int tid)
{
    build_ctx *c = vctx;
    double *buf = c->scratch + (size_t)tid * 2 * c->n_sample;
    for (size_t j = begin + c->j0; j < end + c->j0; j++) {
        size_t m = 0;
        for (size_t s = 0; s < c->n_sample; s++) {
            double v = colsrc_get(&c->src[j], c->sample[s]);
            if (c->is_cat[j]) {
                int32_t code;
                if (mr__cat_code(v, &code)) buf[m++] = code;
            } else if (v == v) {
                buf[m++] = v;
            }
        }
        mr__sort_doubles(buf, m, buf + c->n_sample);
        mr_status st = c->is_cat[j] ? categorical_edges(buf, m, c->max_bin, &c->d->feat[j])
                                    : numeric_edges(buf, m, c->max_bin, &c->d->feat[j]);
        if (st != MR_OK) c->failed = 1;
    }
}

#define BIN_BLOCK 4096 /* rows per binning task: a few hundred KB of output */

static void bin_task(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    build_ctx *c = vctx;
    mr_gbdt_data *d = c->d;
    size_t F = d->n_features;
    for (size_t j = 0; j < F; j++) {
        const mr__bin_feature *f = &d->feat[j];
        const colsrc *s = &c->src[j];
        uint8_t *out = d->bins + c->row0 * F + j;
        if (f->kind == MR__FEAT_CATEGORICAL) {
            for (size_t i = begin; i < end; i++) out[i * F] = (uint8_t)mr__bin_categorical(f, colsrc_get(s, i));
        } else if (s->type == SRC_F32 && !s->valid) {
            const float *x = s->data;
            for (size_t i = begin; i < end; i++) out[i * F] = (uint8_t)mr__bin_numeric(f, x[i * s->stride]);
        } else {
            for (size_t i = begin; i < end; i++) out[i * F] = (uint8_t)mr__bin_numeric(f, colsrc_get(s, i));
        }
    }
}

/* Deterministic sample of k of n rows, ascending (selection sampling). */
static uint32_t *sample_rows(size_t n, size_t k, uint64_t seed, size_t *k_out)
{
    if (k > n) k = n;
    uint32_t *s = mr_malloc((k ? k : 1) * sizeof(uint32_t));
    if (!s) return NULL;
    if (k == n) {
        for (size_t i = 0; i < n; i++) s[i] = (uint32_t)i;
    } else {
        uint64_t st = seed ^ 0x5bd1e995u;
        size_t got = 0;
        for (size_t i = 0; i < n && got < k; i++) {
            double u = mr_u01(mr_splitmix64(&st));
            if ((double)(n - i) * u < (double)(k - got)) s[got++] = (uint32_t)i;
        }
        k = got;
    }
    *k_out = k;
    return s;
}

/* Phase 1 of a build: the data object with names, and either the
 * reference's edges copied or *is_cat_out (the categorical features, from
 * is_cat_in and the categorical_feature param) for edges to come. */
static mr_status build_begin(size_t n_rows, size_t n_features, const char *const *names, const uint8_t *is_cat_in,
                             const mr_gbdt_data *ref, const mr_gbdt_params *p, mr_gbdt_data **out,
                             uint8_t **is_cat_out, mr_error *err)
{
    mr_gbdt_data *d = NULL;
    uint8_t *is_cat = NULL;
    *out = NULL;
    *is_cat_out = NULL;
    mr_status st = mr__gbdt_data_alloc(n_rows, n_features, &d, err);
    if (st != MR_OK) return st;
    if (ref && ref->n_features != n_features) {
        st = MR_ERR(err, MR_E_SCHEMA, "data has %zu features, the reference (training) data has %zu", n_features,
                    ref->n_features);
        goto fail;
    }
    for (size_t j = 0; j < n_features; j++) {
        char tmp[32];
        const char *nm = names && names[j] ? names[j] : ref ? ref->names[j] : NULL;
        if (!nm) {
            snprintf(tmp, sizeof(tmp), "f%zu", j);
            nm = tmp;
        }
        if (!(d->names[j] = mr_strdup(nm))) goto nomem;
    }
    if (ref) {
        d->max_bin = ref->max_bin;
        for (size_t j = 0; j < n_features; j++) {
            const mr__bin_feature *rf = &ref->feat[j];
            mr__bin_feature *f = &d->feat[j];
            *f = (mr__bin_feature){.kind = rf->kind, .n_bins = rf->n_bins};
            if (rf->upper) {
                if (!(f->upper = mr_malloc(rf->n_bins * sizeof(double)))) goto nomem;
                memcpy(f->upper, rf->upper, rf->n_bins * sizeof(double));
            }
            if (rf->cats) {
                if (!(f->cats = mr_malloc(rf->n_bins * sizeof(int32_t)))) goto nomem;
                memcpy(f->cats, rf->cats, rf->n_bins * sizeof(int32_t));
            }
        }
        if ((st = mr__gbdt_data_finish_offsets(d, err)) != MR_OK) goto fail;
    } else {
        d->max_bin = p ? p->max_bin : 255;
        if (!(is_cat = mr_calloc(n_features, 1))) goto nomem;
        if (is_cat_in) memcpy(is_cat, is_cat_in, n_features);
        if (p && (st = mr__gbdt_parse_categorical(p->categorical_feature, (const char *const *)d->names, n_features,
                                                  is_cat, err)) != MR_OK)
            goto fail;
    }
    *out = d;
    *is_cat_out = is_cat;
    return MR_OK;
nomem:
    st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
fail:
    mr_free(is_cat);
    mr_gbdt_data_free(d);
    return st;
}

/* Phase 2: every feature's edges from the sample rows of src, then the
 * histogram offsets. */
static mr_status build_edges(mr_gbdt_data *d, const colsrc *src, const uint32_t *sample, size_t n_sample,
                             const uint8_t *is_cat, const mr_gbdt_params *p, mr_error *err)
{
    int threads = p ? p->num_threads : 0;
    int nt = mr_pool_threads_capped(threads);
    double *scratch = mr_malloc((size_t)nt * 2 * (n_sample ? n_sample : 1) * sizeof(double));
    if (!scratch) return MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    build_ctx c = {.src = src, .d = d, .sample = sample, .n_sample = n_sample, .is_cat = is_cat,
                   .scratch = scratch, .max_bin = d->max_bin};
    mr_parallel_for_capped(d->n_features, 1, threads, edges_task, &c);
    mr_free(scratch);
    if (c.failed) return MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    return mr__gbdt_data_finish_offsets(d, err);
}

/* Phase 3: rows [row0, row0 + n) of the matrix from source rows 0..n-1. */
static void build_rows(mr_gbdt_data *d, const colsrc *src, size_t row0, size_t n, const mr_gbdt_params *p)
{
    build_ctx c = {.src = src, .d = d, .row0 = row0};
    mr_parallel_for_capped(n, BIN_BLOCK, p ? p->num_threads : 0, bin_task, &c);
}

static mr_status build(const colsrc *src, size_t n_rows, size_t n_features, const char *const *names,
                       const uint8_t *is_cat_in, const float *label, const mr_gbdt_data *ref,
                       const mr_gbdt_params *p, mr_gbdt_data **out, mr_error *err)
{
    mr_gbdt_data *d = NULL;
    uint8_t *is_cat = NULL;
    uint32_t *sample = NULL;
    mr_status st = build_begin(n_rows, n_features, names, is_cat_in, ref, p, &d, &is_cat, err);
    if (st != MR_OK) return st;
    if (!ref) {
        size_t n_sample = 0;
        size_t want = p ? (size_t)p->bin_construct_sample_cnt : 200000;
        if (!(sample = sample_rows(n_rows, want, p ? p->seed : 0, &n_sample))) {
            st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
            goto fail;
        }
        if ((st = build_edges(d, src, sample, n_sample, is_cat, p, err)) != MR_OK) goto fail;
    }
    build_rows(d, src, 0, n_rows, p);
    if (label && (st = mr_gbdt_data_set_label(d, label, err)) != MR_OK) goto fail;
    mr_free(is_cat);
    mr_free(sample);
    *out = d;
    return MR_OK;
fail:
    mr_free(is_cat);
    mr_free(sample);
    mr_gbdt_data_free(d);
    return st;
}

mr_status mr_gbdt_data_from_matrix(const float *x, size_t n_rows, size_t n_features, mr_gbdt_layout layout,
                                   const float *label, const char *const *names, const mr_gbdt_data *reference,
                                   const mr_gbdt_params *p, mr_gbdt_data **out, mr_error *err)
{
    *out = NULL;
    if (!x && n_rows) return MR_ERR(err, MR_E_INVALID_ARG, "gbdt data: NULL matrix");
    if (n_features == 0 || n_features > 65535)
        return MR_ERR(err, MR_E_INVALID_ARG, "gbdt data: n_features must be in [1, 65535] (got %zu)", n_features);
    colsrc *src = mr_calloc(n_features, sizeof(colsrc));
    if (!src) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t j = 0; j < n_features; j++) {
        src[j].type = SRC_F32;
        src[j].data = layout == MR_GBDT_ROW_MAJOR ? (const void *)(x + j) : (const void *)(x + j * n_rows);
        src[j].stride = layout == MR_GBDT_ROW_MAJOR ? n_features : 1;
    }
    mr_status st = build(src, n_rows, n_features, names, NULL, label, reference, p, out, err);
    mr_free(src);
    return st;
}

/* The columns of a table that a spec names, as sources: what
 * mr_gbdt_data_from_table and the stream check and read. */
typedef struct resolved {
    size_t nf;
    const char **names; /* nf, borrowed from the table's columns */
    uint8_t *is_cat;    /* nf */
    colsrc *src;        /* nf */
    int has_label;
    colsrc label;
} resolved;

static void resolved_free(resolved *r)
{
    mr_free(r->names);
    mr_free(r->is_cat);
    mr_free(r->src);
    memset(r, 0, sizeof(*r));
}

static mr_status resolve(const mr_table *t, const mr_gbdt_table_spec *spec, resolved *r, mr_error *err)
{
    memset(r, 0, sizeof(*r));
    const mr_column *lab = NULL;
    if (spec && spec->label) {
        lab = mr_table_column(t, spec->label);
        if (!lab) {
            MR_ERR(err, MR_E_NOT_FOUND, "label column '%s' not found", spec->label);
            mr_error_key(err, spec->label);
            const char *cands[1024];
            size_t nc = t->n_cols < 1024 ? t->n_cols : 1024;
            for (size_t i = 0; i < nc; i++) cands[i] = t->cols[i]->name;
            const char *best = mr_closest(spec->label, cands, nc);
            if (best) mr_error_hint(err, "did you mean %s?", best);
            return MR_E_NOT_FOUND;
        }
    }
    size_t nf = 0, cap = t->n_cols + (spec ? spec->n_features : 0) + 1;
    const mr_column **cols = mr_calloc(cap, sizeof(*cols));
    r->names = mr_calloc(cap, sizeof(char *));
    r->is_cat = mr_calloc(cap, 1);
    mr_status st = MR_OK;
    if (!cols || !r->names || !r->is_cat) goto nomem;
    if (spec && spec->features) {
        for (size_t i = 0; i < spec->n_features; i++) {
            const mr_column *c = mr_table_column(t, spec->features[i]);
            if (!c) {
                st = MR_ERR(err, MR_E_NOT_FOUND, "feature column '%s' not found", spec->features[i]);
                mr_error_key(err, spec->features[i]);
                goto fail;
            }
            cols[nf++] = c;
        }
    } else {
        for (size_t i = 0; i < t->n_cols; i++)
            if (t->cols[i] != lab) cols[nf++] = t->cols[i];
    }
    if (nf == 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "no feature columns");
        goto fail;
    }
    if (!(r->src = mr_calloc(nf, sizeof(colsrc)))) goto nomem;
    for (size_t j = 0; j < nf; j++) {
        const mr_column *c = cols[j];
        r->names[j] = c->name;
        r->src[j].data = c->data;
        r->src[j].stride = 1;
        r->src[j].valid = c->valid;
        switch (c->type) {
        case MR_T_FLOAT32: r->src[j].type = SRC_F32; break;
        case MR_T_FLOAT64: r->src[j].type = SRC_F64; break;
        case MR_T_INT64: r->src[j].type = SRC_I64; break;
        case MR_T_BOOL: r->src[j].type = SRC_BOOL; break;
        case MR_T_DECIMAL:
            r->src[j].type = SRC_DEC;
            r->src[j].scale = c->kind.scale;
            break;
        default:
            st = MR_ERR(err, MR_E_SCHEMA, "feature column '%s' has type %s; gbdt takes bool, int64, float32, float64 "
                        "(encode strings as integer codes first)", c->name, mr_dtype_name(c->type));
            mr_error_key(err, c->name);
            goto fail;
        }
        for (size_t k = 0; spec && k < spec->n_categorical; k++)
            if (!strcmp(spec->categorical[k], c->name)) r->is_cat[j] = 1;
    }
    r->nf = nf;
    for (size_t k = 0; spec && k < spec->n_categorical; k++) {
        int found = 0;
        for (size_t j = 0; j < nf; j++) found |= !strcmp(spec->categorical[k], r->names[j]);
        if (!found) {
            st = MR_ERR(err, MR_E_NOT_FOUND, "categorical column '%s' is not a feature", spec->categorical[k]);
            mr_error_key(err, spec->categorical[k]);
            goto fail;
        }
    }
    if (lab) {
        r->has_label = 1;
        r->label = (colsrc){.data = lab->data, .stride = 1, .valid = lab->valid};
        switch (lab->type) {
        case MR_T_FLOAT32: r->label.type = SRC_F32; break;
        case MR_T_FLOAT64: r->label.type = SRC_F64; break;
        case MR_T_INT64: r->label.type = SRC_I64; break;
        case MR_T_BOOL: r->label.type = SRC_BOOL; break;
        case MR_T_DECIMAL:
            r->label.type = SRC_DEC;
            r->label.scale = lab->kind.scale;
            break;
        default:
            st = MR_ERR(err, MR_E_SCHEMA, "label column '%s' has type %s; expected a number or bool", lab->name,
                        mr_dtype_name(lab->type));
            mr_error_key(err, lab->name);
            goto fail;
        }
    }
    mr_free(cols);
    return MR_OK;
nomem:
    st = MR_ERR(err, MR_E_NOMEM, "out of memory");
fail:
    mr_free(cols);
    resolved_free(r);
    return st;
}

mr_status mr_gbdt_data_from_table(const mr_table *t, const mr_gbdt_table_spec *spec,
                                  const mr_gbdt_data *reference, const mr_gbdt_params *p, mr_gbdt_data **out,
                                  mr_error *err)
{
    *out = NULL;
    resolved r;
    mr_status st = resolve(t, spec, &r, err);
    if (st != MR_OK) return st;
    float *label = NULL;
    if (r.has_label) {
        if (!(label = mr_malloc((t->n_rows ? t->n_rows : 1) * sizeof(float)))) {
            resolved_free(&r);
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < t->n_rows; i++) label[i] = (float)colsrc_get(&r.label, i);
    }
    st = build(r.src, t->n_rows, r.nf, r.names, r.is_cat, label, reference, p, out, err);
    mr_free(label);
    resolved_free(&r);
    return st;
}

/* ---- streaming: binning a table that arrives in batches ---------------------- */

struct mr_gbdt_stream {
    mr_gbdt_table_spec spec;    /* features: the names fixed at open (owned array, borrowed names) */
    const char **feat_names;    /* the spec's features (the schema's, when the spec had none); names owned */
    mr_gbdt_data *d;
    uint8_t *is_cat;            /* NULL with a reference */
    const mr_gbdt_params *p;
    uint32_t *sample;           /* ascending sample rows (NULL with a reference) */
    size_t n_sample, next_sample;
    double *sample_vals;        /* n_features * n_sample: column j at j * n_sample */
    size_t rows_seen;           /* pass 1: rows sampled through */
    size_t rows_binned;         /* pass 2 */
    int edges_done;
    int has_label;
    const mr_gbdt_comm *comm;   /* a share of the rows: the sample is every rank's */
};

void mr_gbdt_stream_free(mr_gbdt_stream *s)
{
    if (!s) return;
    for (size_t j = 0; s->feat_names && j < s->spec.n_features; j++) mr_free((char *)s->feat_names[j]);
    mr_free(s->feat_names);
    mr_gbdt_data_free(s->d);
    mr_free(s->is_cat);
    mr_free(s->sample);
    mr_free(s->sample_vals);
    mr_free(s);
}

mr_status mr_gbdt_stream_open(const mr_table *schema, size_t n_rows, const mr_gbdt_table_spec *spec,
                              const mr_gbdt_data *reference, const mr_gbdt_params *p, mr_gbdt_stream **out,
                              mr_error *err)
{
    *out = NULL;
    resolved r;
    mr_status st = resolve(schema, spec, &r, err);
    if (st != MR_OK) return st;
    mr_gbdt_stream *s = mr_calloc(1, sizeof(*s));
    if (!s || !(s->feat_names = mr_calloc(r.nf, sizeof(char *)))) goto nomem;
    s->spec = spec ? *spec : (mr_gbdt_table_spec){0};
    s->spec.n_features = 0;
    for (size_t j = 0; j < r.nf; j++) {
        if (!(s->feat_names[j] = mr_strdup(r.names[j]))) goto nomem;
        s->spec.n_features = j + 1;
    }
    s->spec.features = s->feat_names;
    s->p = p;
    s->has_label = r.has_label;
    st = build_begin(n_rows, r.nf, r.names, r.is_cat, reference, p, &s->d, &s->is_cat, err);
    if (st != MR_OK) goto fail;
    if (r.has_label && !(s->d->label = mr_malloc((n_rows ? n_rows : 1) * sizeof(float)))) goto nomem;
    if (reference) {
        s->edges_done = 1;
    } else {
        size_t want = p ? (size_t)p->bin_construct_sample_cnt : 200000;
        if (!(s->sample = sample_rows(n_rows, want, p ? p->seed : 0, &s->n_sample))) goto nomem;
        size_t cells = r.nf * (s->n_sample ? s->n_sample : 1);
        if (cells / r.nf != (s->n_sample ? s->n_sample : 1) || !(s->sample_vals = mr_malloc(cells * sizeof(double))))
            goto nomem;
    }
    resolved_free(&r);
    *out = s;
    return MR_OK;
nomem:
    st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
fail:
    resolved_free(&r);
    mr_gbdt_stream_free(s);
    return st;
}

mr_status mr_gbdt_stream_open_share(const mr_table *schema, size_t n_total, size_t row_lo, size_t n_rows,
                                    const mr_gbdt_table_spec *spec, const mr_gbdt_params *p,
                                    const mr_gbdt_comm *comm, mr_gbdt_stream **out, mr_error *err)
{
    if (row_lo > n_total || n_rows > n_total - row_lo)
        return MR_ERR(err, MR_E_INVALID_ARG, "rows %zu..%zu are not within the %zu rows", row_lo, row_lo + n_rows, n_total);
    mr_status st = mr_gbdt_stream_open(schema, n_rows, spec, NULL, p, out, err);
    if (st != MR_OK) return st;
    mr_gbdt_stream *s = *out;
    /* this share's rows of the sample one process would draw from all rows */
    size_t want = p ? (size_t)p->bin_construct_sample_cnt : 200000, ns = 0, a = 0, k = 0;
    uint32_t *all = sample_rows(n_total, want, p ? p->seed : 0, &ns);
    if (!all) {
        mr_gbdt_stream_free(s);
        *out = NULL;
        return MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    }
    while (a < ns && all[a] < row_lo) a++;
    for (size_t i = a; i < ns && all[i] < row_lo + n_rows; i++) all[k++] = all[i] - (uint32_t)row_lo;
    const size_t F = s->d->n_features;
    double *vals = mr_malloc((k ? k : 1) * (F ? F : 1) * sizeof(double));
    if (!vals) {
        mr_free(all);
        mr_gbdt_stream_free(s);
        *out = NULL;
        return MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    }
    mr_free(s->sample);
    mr_free(s->sample_vals);
    s->sample = all;
    s->n_sample = k;
    s->sample_vals = vals;
    s->comm = comm;
    return MR_OK;
}

int mr_gbdt_stream_wants_sample(const mr_gbdt_stream *s) { return !s->edges_done; }

mr_status mr_gbdt_stream_sample(mr_gbdt_stream *s, const mr_table *batch, mr_error *err)
{
    if (s->edges_done) return MR_ERR(err, MR_E_STATE, "gbdt stream: the edges are already built");
    if (batch->n_rows > s->d->n_rows - s->rows_seen)
        return MR_ERR(err, MR_E_STATE, "gbdt stream: more rows than the %zu announced", s->d->n_rows);
    resolved r;
    mr_status st = resolve(batch, &s->spec, &r, err);
    if (st != MR_OK) return st;
    size_t end = s->rows_seen + batch->n_rows, ns = s->n_sample;
    for (; s->next_sample < ns && s->sample[s->next_sample] < end; s->next_sample++) {
        size_t i = s->sample[s->next_sample] - s->rows_seen;
        for (size_t j = 0; j < r.nf; j++) s->sample_vals[j * ns + s->next_sample] = colsrc_get(&r.src[j], i);
    }
    s->rows_seen = end;
    resolved_free(&r);
    return MR_OK;
}

/* The features whose edges rank r of p computes: [F r / p, F (r + 1) / p). */
static void edge_share(size_t F, size_t p, size_t r, size_t *lo, size_t *hi)
{
    *lo = F * r / p;
    *hi = F * (r + 1) / p;
}

/* Across ranks: every rank sends each other rank its sample rows' values of
 * the features whose edges that rank computes, so each holds the whole
 * sample of its own features, in global row order (each rank's sample rows
 * are a run of the global sample: the shares are contiguous and in rank
 * order). sample_vals becomes (own features, all sample rows): feature j
 * at (j - lo) * n_sample. */
static mr_status share_sample(mr_gbdt_stream *s, mr_error *err)
{
    mr__dist D;
    mr_status st = mr__dist_begin(&D, s->comm, err);
    const size_t p = (size_t)D.size, r = (size_t)D.rank, F = s->d->n_features, ns = s->n_sample;
    size_t lo, hi;
    edge_share(F, p, r, &lo, &hi);
    const size_t mine = hi - lo;
    int64_t *counts = mr_calloc(p, sizeof(int64_t));
    size_t *start = mr_calloc(p + 1, sizeof(size_t));
    double *recv = NULL, *out = NULL;
    if (st == MR_OK && (!counts || !start)) st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    int64_t my_count = (int64_t)ns;
    if (st == MR_OK) st = mr__dist_allgather(&D, &my_count, sizeof(my_count), counts, "the bin sample sizes", err);
    for (size_t q = 0; st == MR_OK && q < p; q++) start[q + 1] = start[q] + (size_t)counts[q];
    const size_t total = start[p];
    if (st == MR_OK && (!(recv = mr_malloc((total ? total : 1) * (mine ? mine : 1) * sizeof(double))) ||
                        !(out = mr_malloc((total ? total : 1) * (mine ? mine : 1) * sizeof(double)))))
        st = MR_ERR(err, MR_E_NOMEM, "out of memory for a bin sample of %zu rows", total);
    size_t n = 0;
    for (size_t q = 0; st == MR_OK && q < p; q++) {
        size_t qlo, qhi, nq = (size_t)counts[q];
        edge_share(F, p, q, &qlo, &qhi);
        double *into = recv + start[q] * mine;
        if (q == r) {
            if (mine && ns) memcpy(into, s->sample_vals + lo * ns, mine * ns * sizeof(double));
            continue;
        }
        if (qhi > qlo && ns) /* my values of q's features: one run in column-major order */
            D.x[n++] = (mr_gbdt_xfer){.peer = (int)q, .send = 1, .buf = s->sample_vals + qlo * ns,
                                      .len = (qhi - qlo) * ns * sizeof(double)};
        if (mine && nq) D.x[n++] = (mr_gbdt_xfer){.peer = (int)q, .send = 0, .buf = into, .len = mine * nq * sizeof(double)};
    }
    if (st == MR_OK) st = mr__dist_exchange(&D, D.x, n, "the bin sample", err);
    if (st == MR_OK) {
        for (size_t q = 0; q < p; q++) {
            size_t nq = (size_t)counts[q];
            const double *b = recv + start[q] * mine;
            for (size_t j = 0; j < mine; j++) memcpy(out + j * total + start[q], b + j * nq, nq * sizeof(double));
        }
        mr_free(s->sample_vals);
        s->sample_vals = out;
        out = NULL;
        s->n_sample = total;
    }
    mr_free(recv);
    mr_free(out);
    mr_free(counts);
    mr_free(start);
    mr__dist_free(&D);
    return st;
}

/* Across ranks, after share_sample: each rank computes the edges of its
 * share of the features (edge_share) from the whole sample of those, and
 * every rank gets all of them, byte for byte what one process computes. */
static mr_status share_edges(mr_gbdt_stream *s, const colsrc *src, const uint32_t *idx, size_t ns, mr_error *err)
{
    mr_gbdt_data *d = s->d;
    const size_t F = d->n_features, p = (size_t)s->comm->size, r = (size_t)s->comm->rank;
    size_t jlo, jhi;
    edge_share(F, p, r, &jlo, &jhi);
    int threads = s->p ? s->p->num_threads : 0, nt = mr_pool_threads_capped(threads);
    mr__dist D;
    mr_status st = mr__dist_begin(&D, s->comm, err);
    int64_t *lens64 = mr_calloc(p, sizeof(int64_t));
    size_t *lens = mr_calloc(p, sizeof(size_t));
    double *scratch = mr_malloc((size_t)nt * 2 * (ns ? ns : 1) * sizeof(double));
    char *all = NULL;
    mr_buf mine;
    mr_buf_init(&mine);
    if (st == MR_OK && (!lens64 || !lens || !scratch)) st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    if (st == MR_OK) {
        build_ctx c = {.src = src, .d = d, .sample = idx, .n_sample = ns, .is_cat = s->is_cat, .scratch = scratch,
                       .max_bin = d->max_bin, .j0 = jlo};
        mr_parallel_for_capped(jhi - jlo, 1, threads, edges_task, &c);
        if (c.failed) st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    }
    for (size_t j = jlo; st == MR_OK && j < jhi; j++) { /* kind, bins, then the edges */
        const mr__bin_feature *f = &d->feat[j];
        uint8_t kind = f->kind;
        uint16_t nb = f->n_bins;
        mr_buf_append(&mine, &kind, 1);
        mr_buf_append(&mine, &nb, 2);
        if (nb > 1 && kind == MR__FEAT_CATEGORICAL) mr_buf_append(&mine, f->cats + 1, (size_t)(nb - 1) * sizeof(int32_t));
        else if (nb > 1) mr_buf_append(&mine, f->upper + 1, (size_t)(nb - 1) * sizeof(double));
    }
    if (st == MR_OK && mine.failed) st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    int64_t my_len = (int64_t)mine.len;
    if (st == MR_OK) st = mr__dist_allgather(&D, &my_len, sizeof(my_len), lens64, "the bin edge sizes", err);
    size_t total = 0;
    for (size_t q = 0; st == MR_OK && q < p; q++) total += lens[q] = (size_t)lens64[q];
    if (st == MR_OK && !(all = mr_malloc(total ? total : 1))) st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    if (st == MR_OK) st = mr__dist_allgatherv(&D, mine.data ? mine.data : "", lens, all, "the bin edges", err);
    const char *at = all;
    for (size_t q = 0; st == MR_OK && q < p; q++) {
        const char *end = at + lens[q];
        size_t qlo, qhi;
        edge_share(F, p, q, &qlo, &qhi);
        for (size_t j = qlo; st == MR_OK && j < qhi; j++) {
            mr__bin_feature *f = &d->feat[j];
            uint8_t kind;
            uint16_t nb;
            if (end - at < 3) {
                st = MR_ERR(err, MR_E_CORRUPT, "rank %zu sent truncated bin edges", q);
                break;
            }
            memcpy(&kind, at, 1);
            memcpy(&nb, at + 1, 2);
            at += 3;
            size_t w = kind == MR__FEAT_CATEGORICAL ? sizeof(int32_t) : sizeof(double), k = nb > 1 ? nb - 1u : 0;
            if ((size_t)(end - at) < k * w) {
                st = MR_ERR(err, MR_E_CORRUPT, "rank %zu sent truncated bin edges", q);
                break;
            }
            if (q == r) { /* computed here */
                at += k * w;
                continue;
            }
            f->kind = kind;
            f->n_bins = nb ? nb : 1;
            void *vals = mr_calloc(k + 1, w);
            if (!vals) {
                st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
                break;
            }
            memcpy((char *)vals + w, at, k * w);
            if (kind == MR__FEAT_CATEGORICAL)
                f->cats = vals;
            else
                f->upper = vals;
            at += k * w;
        }
        at = end;
    }
    if (st == MR_OK) st = mr__gbdt_data_finish_offsets(d, err);
    mr_buf_free(&mine);
    mr_free(all);
    mr_free(scratch);
    mr_free(lens);
    mr_free(lens64);
    mr__dist_free(&D);
    return st;
}

/* After the last sampling batch: the edges from the values kept. */
static mr_status stream_edges(mr_gbdt_stream *s, mr_error *err)
{
    if (s->rows_seen != s->d->n_rows)
        return MR_ERR(err, MR_E_STATE, "gbdt stream: %zu rows sampled through, %zu announced", s->rows_seen,
                      s->d->n_rows);
    int shared = s->comm && s->comm->size > 1;
    size_t F = s->d->n_features, lo = 0, hi = F;
    if (shared) {
        mr_status sst = share_sample(s, err);
        if (sst != MR_OK) return sst;
        edge_share(F, (size_t)s->comm->size, (size_t)s->comm->rank, &lo, &hi);
    }
    size_t ns = s->n_sample;
    colsrc *src = mr_calloc(F, sizeof(colsrc));
    uint32_t *idx = mr_malloc((ns ? ns : 1) * sizeof(uint32_t));
    mr_status st = MR_OK;
    if (!src || !idx) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory while binning");
    } else {
        /* across ranks only this rank's features have their sample here */
        for (size_t j = lo; j < hi; j++) src[j] = (colsrc){.type = SRC_F64, .data = s->sample_vals + (j - lo) * ns, .stride = 1};
        for (size_t k = 0; k < ns; k++) idx[k] = (uint32_t)k;
        st = shared ? share_edges(s, src, idx, ns, err) : build_edges(s->d, src, idx, ns, s->is_cat, s->p, err);
    }
    mr_free(src);
    mr_free(idx);
    if (st == MR_OK) {
        s->edges_done = 1;
        mr_free(s->sample_vals);
        s->sample_vals = NULL;
    }
    return st;
}

mr_status mr_gbdt_stream_bin(mr_gbdt_stream *s, const mr_table *batch, mr_error *err)
{
    mr_status st = MR_OK;
    if (!s->edges_done && (st = stream_edges(s, err)) != MR_OK) return st;
    if (batch->n_rows > s->d->n_rows - s->rows_binned)
        return MR_ERR(err, MR_E_STATE, "gbdt stream: more rows than the %zu announced", s->d->n_rows);
    resolved r;
    if ((st = resolve(batch, &s->spec, &r, err)) != MR_OK) return st;
    build_rows(s->d, r.src, s->rows_binned, batch->n_rows, s->p);
    if (s->has_label)
        for (size_t i = 0; i < batch->n_rows; i++) s->d->label[s->rows_binned + i] = (float)colsrc_get(&r.label, i);
    s->rows_binned += batch->n_rows;
    resolved_free(&r);
    return MR_OK;
}

mr_status mr_gbdt_stream_finish(mr_gbdt_stream *s, mr_gbdt_data **out, mr_error *err)
{
    *out = NULL;
    mr_status st = MR_OK;
    if (!s->edges_done && (st = stream_edges(s, err)) != MR_OK) return st;
    if (s->rows_binned != s->d->n_rows)
        return MR_ERR(err, MR_E_STATE, "gbdt stream: %zu rows binned, %zu announced", s->rows_binned, s->d->n_rows);
    *out = s->d;
    s->d = NULL;
    return MR_OK;
}

/* ---- serialised form (docs/gbdt.md "Binned matrix file") ---------------------- */

static const char BIN_MAGIC[8] = {'M', 'R', 'G', 'B', 'B', 'I', 'N', 0};
#define BIN_VERSION 1u

mr_status mr_gbdt_data_to_bytes(const mr_gbdt_data *d, mr_buf *out, mr_error *err)
{
    mr_status st = mr_buf_append(out, BIN_MAGIC, 8);
    size_t start = out->len - 8;
    if (st == MR_OK) st = mr_buf_put_u32(out, BIN_VERSION);
    if (st == MR_OK) st = mr_buf_put_u32(out, d->label ? 1u : 0u);
    if (st == MR_OK) st = mr_buf_put_u64(out, d->n_rows);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)d->n_features);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)d->max_bin);
    for (size_t j = 0; j < d->n_features && st == MR_OK; j++) {
        const mr__bin_feature *f = &d->feat[j];
        st = mr_buf_put_str(out, d->names[j]);
        if (st == MR_OK) st = mr_buf_put_u8(out, f->kind);
        if (st == MR_OK) st = mr_buf_put_u16(out, f->n_bins);
        for (int b = 1; b < f->n_bins && st == MR_OK; b++)
            st = f->kind == MR__FEAT_CATEGORICAL ? mr_buf_put_u32(out, (uint32_t)f->cats[b]) : mr_buf_put_f64(out, f->upper[b]);
    }
    if (st == MR_OK) st = mr_buf_append(out, d->bins, d->n_rows * d->n_features);
    for (size_t i = 0; d->label && i < d->n_rows && st == MR_OK; i++) {
        uint32_t u;
        memcpy(&u, &d->label[i], 4);
        st = mr_buf_put_u32(out, u);
    }
    if (st == MR_OK) {
        mr_hash128 h = mr_hash_bytes(out->data + start, out->len - start);
        st = mr_buf_put_u64(out, h.hi);
        if (st == MR_OK) st = mr_buf_put_u64(out, h.lo);
    }
    if (st != MR_OK) return MR_ERR(err, st, "cannot serialise binned data: %s", mr_status_str(st));
    return MR_OK;
}

mr_status mr_gbdt_data_from_bytes(const void *data, size_t len, mr_gbdt_data **out, mr_error *err)
{
    *out = NULL;
    mr_reader r = {.p = data, .len = len};
    mr_gbdt_data *d = NULL;
    mr_status st;
    if (len < 8 + 16 || memcmp(data, BIN_MAGIC, 8))
        return MR_ERR(err, MR_E_CORRUPT, "not a millrace binned matrix (bad magic)");
    mr_hash128 h = mr_hash_bytes(data, len - 16);
    r.pos = len - 16;
    if (mr_reader_u64(&r) != h.hi || mr_reader_u64(&r) != h.lo)
        return MR_ERR(err, MR_E_CORRUPT, "binned matrix checksum mismatch (truncated or modified file)");
    r.pos = 8;
    r.len = len - 16;
    uint32_t version = mr_reader_u32(&r);
    if (version != BIN_VERSION)
        return MR_ERR(err, MR_E_CORRUPT, "binned matrix version %u is not supported (this build reads %u)", version,
                      BIN_VERSION);
    uint32_t flags = mr_reader_u32(&r);
    uint64_t n_rows = mr_reader_u64(&r);
    uint32_t nf = mr_reader_u32(&r);
    uint32_t max_bin = mr_reader_u32(&r);
    if (r.bad || nf == 0 || nf > 65535 || n_rows > UINT32_MAX || max_bin < 2 || max_bin > 255 ||
        n_rows * nf > len)
        return MR_ERR(err, MR_E_CORRUPT, "binned matrix header is invalid");
    if ((st = mr__gbdt_data_alloc((size_t)n_rows, nf, &d, err)) != MR_OK) return st;
    d->max_bin = (int)max_bin;
    for (size_t j = 0; j < nf; j++) {
        mr__bin_feature *f = &d->feat[j];
        d->names[j] = mr_reader_str(&r);
        f->kind = mr_reader_u8(&r);
        f->n_bins = mr_reader_u16(&r);
        if (r.bad || f->kind > 1 || f->n_bins < 1 || f->n_bins > max_bin + 1) goto corrupt;
        if (!d->names[j]) goto nomem; /* mr_reader_str: NULL without r.bad is out of memory */
        if (f->kind == MR__FEAT_CATEGORICAL) {
            if (!(f->cats = mr_calloc(f->n_bins, sizeof(int32_t)))) goto nomem;
            for (int b = 1; b < f->n_bins; b++) f->cats[b] = (int32_t)mr_reader_u32(&r);
        } else {
            if (!(f->upper = mr_calloc(f->n_bins, sizeof(double)))) goto nomem;
            for (int b = 1; b < f->n_bins; b++) f->upper[b] = mr_reader_f64(&r);
        }
    }
    if (r.bad || (st = mr__gbdt_data_finish_offsets(d, err)) != MR_OK) goto corrupt;
    const uint8_t *bins = mr_reader_bytes(&r, (size_t)n_rows * nf);
    if (!bins) goto corrupt;
    memcpy(d->bins, bins, (size_t)n_rows * nf);
    for (size_t i = 0; i < (size_t)n_rows * nf; i++)
        if (bins[i] >= d->feat[i % nf].n_bins) goto corrupt;
    if (flags & 1u) {
        if (!(d->label = mr_malloc((n_rows ? n_rows : 1) * sizeof(float)))) goto nomem;
        for (size_t i = 0; i < n_rows; i++) {
            uint32_t u = mr_reader_u32(&r);
            memcpy(&d->label[i], &u, 4);
        }
    }
    if (r.bad || r.pos != r.len) goto corrupt;
    *out = d;
    return MR_OK;
nomem:
    mr_gbdt_data_free(d);
    return MR_ERR(err, MR_E_NOMEM, "out of memory loading binned matrix");
corrupt:
    mr_gbdt_data_free(d);
    return MR_ERR(err, MR_E_CORRUPT, "binned matrix is corrupt near byte %zu", r.pos);
}

mr_status mr_gbdt_data_save(const mr_gbdt_data *d, const char *path, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    b.limit = (size_t)1 << 46;
    mr_status st = mr_gbdt_data_to_bytes(d, &b, err);
    if (st == MR_OK) st = mr_fs_write_atomic(path, b.data, b.len, err);
    mr_buf_free(&b);
    return st;
}

mr_status mr_gbdt_data_load(const char *path, mr_gbdt_data **out, mr_error *err)
{
    char *data = NULL;
    size_t len = 0;
    mr_status st = mr_fs_read_file(path, (size_t)1 << 46, &data, &len, err);
    if (st != MR_OK) return st;
    st = mr_gbdt_data_from_bytes(data, len, out, err);
    if (st != MR_OK) mr_error_at(err, path, 0, 0);
    mr_free(data);
    return st;
}
