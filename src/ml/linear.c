/* Linear baselines: penalised linear and logistic regression on
 * standardised features (see include/millrace/linear.h for the maths).
 *
 * One data pass per Newton step accumulates, over fixed 16K-row blocks
 * added in block order, the weighted Gram matrix A = X'WX / n and the
 * vector c = X'Wz / n of the working response z = eta + (y - p) / W, with a
 * leading column of ones for the intercept. Coordinate descent then solves
 *   min_b 1/2 b'Ab - c'b + l2/2 |b_1..|^2 + l1 |b_1..|_1
 * in O(d^2) per sweep without touching the data again. */
#include "millrace/linear.h"
#include "millrace/value.h"
#include "gbdt/gbdt_int.h"

#include <errno.h>
#include <stdlib.h>
#include <strings.h>

struct mr_linear_model {
    mr_linear_kind objective;
    size_t n_features;
    char **names;
    double *mean, *scale; /* standardisation */
    double *coef;         /* standardised-space weights */
    double intercept;     /* standardised-space intercept */
    double *w;            /* original-scale weights (derived) */
    double *fill;         /* w_j * mean_j: contribution of a missing value (derived) */
    double b;             /* original-scale intercept (derived) */
    double lambda_l2, lambda_l1;
    int iterations;
};

void mr_linear_params_init(mr_linear_params *p)
{
    memset(p, 0, sizeof(*p));
    p->objective = MR_LINEAR_REGRESSION;
    p->lambda_l2 = 1e-4;
    p->max_iter = 100;
    p->tol = 1e-7;
}

mr_status mr_linear_params_set_text(mr_linear_params *p, const char *key, const char *value, mr_error *err)
{
    static const char *const keys[] = {"objective", "lambda_l2", "reg_lambda", "l2", "lambda_l1", "reg_alpha",
                                       "l1", "max_iter", "num_iterations", "tol", "num_threads", "n_jobs"};
    char *end;
    errno = 0;
    if (!strcasecmp(key, "objective")) {
        if (!strcasecmp(value, "regression") || !strcasecmp(value, "l2") || !strcasecmp(value, "linear"))
            p->objective = MR_LINEAR_REGRESSION;
        else if (!strcasecmp(value, "binary") || !strcasecmp(value, "logistic"))
            p->objective = MR_LINEAR_LOGISTIC;
        else {
            MR_ERR(err, MR_E_INVALID_ARG, "parameter 'objective': expected regression or binary, got \"%s\"", value);
            mr_error_key(err, key);
            return MR_E_INVALID_ARG;
        }
        return MR_OK;
    }
    int which = -1;
    for (size_t i = 1; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strcasecmp(key, keys[i])) which = (int)i;
    if (which < 0) {
        MR_ERR(err, MR_E_INVALID_ARG, "unknown linear parameter '%s'", key);
        mr_error_key(err, key);
        const char *best = mr_closest(key, keys, sizeof(keys) / sizeof(keys[0]));
        if (best) mr_error_hint(err, "did you mean %s?", best);
        return MR_E_INVALID_ARG;
    }
    double v = strtod(value, &end);
    if (*value == 0 || *end || errno || !(v >= 0) || isinf(v)) {
        MR_ERR(err, MR_E_INVALID_ARG, "parameter '%s': expected a non-negative number, got \"%s\"", key, value);
        mr_error_key(err, key);
        return MR_E_INVALID_ARG;
    }
    if (which <= 3)
        p->lambda_l2 = v;
    else if (which <= 6)
        p->lambda_l1 = v;
    else if (which <= 8)
        p->max_iter = v < 1 ? 1 : (int)v;
    else if (which == 9)
        p->tol = v;
    else
        p->num_threads = (int)v;
    return MR_OK;
}

mr_status mr_linear_params_set(mr_linear_params *p, const char *key, const mr_value *v, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc;
    int numeric = strcasecmp(key, "objective") != 0;
    if ((v->kind == MR_V_STR) || (numeric && (v->kind == MR_V_INT || v->kind == MR_V_FLOAT))) {
        rc = v->kind == MR_V_STR ? mr_buf_puts(&b, v->str) : mr_value_scalar_text(v, &b);
        rc = rc == MR_OK ? mr_linear_params_set_text(p, key, b.data, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    } else {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "parameter '%s': expected %s, got %s", key,
                    numeric ? "a non-negative number" : "regression or binary", mr_vkind_name(v->kind));
        mr_error_key(err, key);
    }
    if (rc != MR_OK && v->line) mr_error_at(err, NULL, v->line, v->col);
    mr_buf_free(&b);
    return rc;
}

mr_status mr_linear_params_apply(mr_linear_params *p, const mr_value *map, mr_error *err)
{
    if (!map || map->kind == MR_V_NULL) return MR_OK;
    if (map->kind != MR_V_MAP)
        return MR_ERR(err, MR_E_INVALID_ARG, "linear parameters must be a mapping, got %s", mr_vkind_name(map->kind));
    for (size_t k = 0; k < map->n; k++) {
        mr_status rc = mr_linear_params_set(p, map->keys[k], map->items[k], err);
        if (rc != MR_OK) {
            if (map->key_lines && !strncmp(err ? err->msg : "", "unknown", 7))
                mr_error_at(err, NULL, map->key_lines[k], map->key_cols[k]);
            return rc;
        }
    }
    return MR_OK;
}

void mr_linear_model_free(mr_linear_model *m)
{
    if (!m) return;
    for (size_t j = 0; m->names && j < m->n_features; j++) mr_free(m->names[j]);
    mr_free(m->names);
    mr_free(m->mean);
    mr_free(m->scale);
    mr_free(m->coef);
    mr_free(m->w);
    mr_free(m->fill);
    mr_free(m);
}

static mr_status model_alloc(size_t d, mr_linear_model **out)
{
    mr_linear_model *m = mr_calloc(1, sizeof(*m));
    if (!m) return MR_E_NOMEM;
    m->n_features = d;
    m->names = mr_calloc(d, sizeof(char *));
    m->mean = mr_calloc(d, sizeof(double));
    m->scale = mr_calloc(d, sizeof(double));
    m->coef = mr_calloc(d, sizeof(double));
    m->w = mr_calloc(d, sizeof(double));
    m->fill = mr_calloc(d, sizeof(double));
    if (!m->names || !m->mean || !m->scale || !m->coef || !m->w || !m->fill) {
        mr_linear_model_free(m);
        return MR_E_NOMEM;
    }
    *out = m;
    return MR_OK;
}

static void derive(mr_linear_model *m)
{
    m->b = m->intercept;
    for (size_t j = 0; j < m->n_features; j++) {
        m->w[j] = m->coef[j] / m->scale[j];
        m->fill[j] = m->w[j] * m->mean[j];
        m->b -= m->fill[j];
    }
}

/* ---- training ------------------------------------------------------------------ */

#define LIN_BLOCK 16384

typedef struct lin_ctx {
    const float *x;
    size_t n, d;
    mr_gbdt_layout layout;
    const float *y;
    mr_linear_model *m;
    int logistic;
    double *part;   /* per block: stats (pass 0) or Gram + vector (pass 1) */
    size_t part_len;
    double *z;      /* per thread: standardised row with a leading 1 */
} lin_ctx;

static inline float xval(const lin_ctx *c, size_t i, size_t j)
{
    return c->layout == MR_GBDT_ROW_MAJOR ? c->x[i * c->d + j] : c->x[j * c->n + i];
}

static void stats_block(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    lin_ctx *c = vctx;
    double *s = c->part + (begin / LIN_BLOCK) * c->part_len; /* cnt[d], sum[d], sumsq[d] */
    memset(s, 0, c->part_len * sizeof(double));
    for (size_t i = begin; i < end; i++)
        for (size_t j = 0; j < c->d; j++) {
            float v = xval(c, i, j);
            if (v != v) continue;
            s[j] += 1;
            s[c->d + j] += v;
        }
    /* second moment about a block-independent centre: the global mean is
     * not known yet, so use sum of squares (fine for standardisation) */
    for (size_t i = begin; i < end; i++)
        for (size_t j = 0; j < c->d; j++) {
            float v = xval(c, i, j);
            if (v == v) s[2 * c->d + j] += (double)v * v;
        }
}

static void gram_block(void *vctx, size_t begin, size_t end, int tid)
{
    lin_ctx *c = vctx;
    const size_t D = c->d + 1;
    double *G = c->part + (begin / LIN_BLOCK) * c->part_len; /* A[D*D] then c[D] */
    double *z = c->z + (size_t)tid * D;
    const mr_linear_model *m = c->m;
    memset(G, 0, c->part_len * sizeof(double));
    for (size_t i = begin; i < end; i++) {
        z[0] = 1.0;
        double eta = m->intercept;
        for (size_t j = 0; j < c->d; j++) {
            float v = xval(c, i, j);
            z[j + 1] = v == v ? ((double)v - m->mean[j]) / m->scale[j] : 0.0;
            eta += m->coef[j] * z[j + 1];
        }
        double w, wz; /* weight and weight * working response */
        if (c->logistic) {
            double p = 1.0 / (1.0 + exp(-eta));
            w = p * (1 - p);
            if (w < 1e-10) w = 1e-10;
            wz = w * eta + ((double)c->y[i] - p);
        } else {
            w = 1.0;
            wz = c->y[i];
        }
        for (size_t a = 0; a < D; a++) {
            double wa = w * z[a];
            double *row = G + a * D;
            for (size_t b = a; b < D; b++) row[b] += wa * z[b];
            G[D * D + a] += wz * z[a];
        }
    }
}

static double soft(double v, double l1) { return v > l1 ? v - l1 : v < -l1 ? v + l1 : 0.0; }

mr_status mr_linear_train(const mr_linear_params *p, const float *x, size_t n, size_t d, mr_gbdt_layout layout,
                          const float *y, const char *const *names, mr_linear_model **out, mr_error *err)
{
    *out = NULL;
    if (n == 0 || d == 0) return MR_ERR(err, MR_E_INVALID_ARG, "linear: need rows and features (%zu x %zu)", n, d);
    if (d > 4096) return MR_ERR(err, MR_E_LIMIT, "linear: %zu features; at most 4096", d);
    for (size_t i = 0; i < n; i++) {
        const char *bad = NULL;
        if (!isfinite(y[i]))
            bad = y[i] != y[i] ? "is NaN" : "is infinite";
        else if (p->objective == MR_LINEAR_LOGISTIC && y[i] != 0.0f && y[i] != 1.0f)
            bad = "is not 0 or 1 (objective binary)";
        if (bad) {
            MR_ERR(err, MR_E_INVALID_ARG, "label %s at row %zu (value %g)", bad, i + 1, (double)y[i]);
            if (err) err->row = (long)(i + 1);
            return MR_E_INVALID_ARG;
        }
    }
    mr_linear_model *m = NULL;
    if (model_alloc(d, &m) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    m->objective = p->objective;
    m->lambda_l2 = p->lambda_l2;
    m->lambda_l1 = p->lambda_l1;
    const size_t D = d + 1, nblk = (n + LIN_BLOCK - 1) / LIN_BLOCK;
    int T = mr_pool_threads_capped(p->num_threads);
    lin_ctx c = {.x = x, .n = n, .d = d, .layout = layout, .y = y, .m = m,
                 .logistic = p->objective == MR_LINEAR_LOGISTIC};
    size_t plen = D * D + D > 3 * d ? D * D + D : 3 * d;
    double *part = mr_malloc(nblk * plen * sizeof(double));
    double *A = mr_calloc(D * D + D, sizeof(double));
    double *beta = mr_calloc(D, sizeof(double));
    c.z = mr_malloc((size_t)T * D * sizeof(double));
    mr_status st = MR_OK;
    if (!part || !A || !beta || !c.z) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory for a %zu-feature linear model", d);
        goto done;
    }
    for (size_t j = 0; j < d; j++) {
        char tmp[32];
        snprintf(tmp, sizeof(tmp), "f%zu", j);
        if (!(m->names[j] = mr_strdup(names && names[j] ? names[j] : tmp))) {
            st = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
    }
    /* pass 0: means and standard deviations */
    c.part = part;
    c.part_len = 3 * d;
    mr_parallel_for_capped(n, LIN_BLOCK, p->num_threads, stats_block, &c);
    for (size_t j = 0; j < d; j++) {
        double cnt = 0, s = 0, ss = 0;
        for (size_t b = 0; b < nblk; b++) {
            cnt += part[b * c.part_len + j];
            s += part[b * c.part_len + d + j];
            ss += part[b * c.part_len + 2 * d + j];
        }
        double mean = cnt > 0 ? s / cnt : 0, var = cnt > 0 ? ss / cnt - mean * mean : 0;
        m->mean[j] = mean;
        m->scale[j] = var > 1e-24 * (1 + mean * mean) ? sqrt(var) : 1.0;
    }
    /* Newton (IRLS) steps; one step for least squares */
    c.part_len = D * D + D;
    int outer_max = c.logistic ? p->max_iter : 1;
    for (int it = 0; it < outer_max; it++) {
        mr_parallel_for_capped(n, LIN_BLOCK, p->num_threads, gram_block, &c);
        memset(A, 0, (D * D + D) * sizeof(double));
        for (size_t b = 0; b < nblk; b++)
            for (size_t k = 0; k < D * D + D; k++) A[k] += part[b * c.part_len + k];
        for (size_t k = 0; k < D * D + D; k++) A[k] /= (double)n;
        for (size_t a = 0; a < D; a++) /* mirror the upper triangle */
            for (size_t b = 0; b < a; b++) A[a * D + b] = A[b * D + a];
        const double *cv = A + D * D;
        beta[0] = m->intercept;
        for (size_t j = 0; j < d; j++) beta[j + 1] = m->coef[j];
        double change = 0;
        for (int sweep = 0; sweep < 1000; sweep++) {
            double mx = 0;
            for (size_t j = 0; j < D; j++) {
                double r = cv[j];
                for (size_t k = 0; k < D; k++)
                    if (k != j) r -= A[j * D + k] * beta[k];
                double den = A[j * D + j] + (j ? p->lambda_l2 : 0.0), nb;
                if (den <= 0)
                    nb = 0;
                else
                    nb = j ? soft(r, p->lambda_l1) / den : r / den;
                mx = fabs(nb - beta[j]) > mx ? fabs(nb - beta[j]) : mx;
                beta[j] = nb;
            }
            if (mx < p->tol * 0.1) break;
        }
        change = fabs(beta[0] - m->intercept);
        for (size_t j = 0; j < d; j++)
            change = fabs(beta[j + 1] - m->coef[j]) > change ? fabs(beta[j + 1] - m->coef[j]) : change;
        m->intercept = beta[0];
        for (size_t j = 0; j < d; j++) m->coef[j] = beta[j + 1];
        m->iterations = it + 1;
        if (!isfinite(change)) {
            st = MR_ERR(err, MR_E_FAILED, "linear training diverged at Newton step %d", it + 1);
            mr_error_hint(err, "raise lambda_l2");
            goto done;
        }
        if (change < p->tol) break;
    }
    derive(m);
done:
    mr_free(part);
    mr_free(A);
    mr_free(beta);
    mr_free(c.z);
    if (st != MR_OK) {
        mr_linear_model_free(m);
        return st;
    }
    *out = m;
    return MR_OK;
}

/* ---- prediction ------------------------------------------------------------------ */

static inline double score_row(const mr_linear_model *m, const float *x, size_t stride)
{
    double s = m->b;
    for (size_t j = 0; j < m->n_features; j++) {
        float v = x[j * stride];
        s += v == v ? m->w[j] * v : m->fill[j];
    }
    return s;
}

double mr_linear_model_mean(const mr_linear_model *m, size_t j) { return m->mean[j]; }

double mr_linear_predict_row(const mr_linear_model *m, const float *x, int raw)
{
    double s = score_row(m, x, 1);
    return raw || m->objective != MR_LINEAR_LOGISTIC ? s : 1.0 / (1.0 + exp(-s));
}

typedef struct pred_ctx {
    const mr_linear_model *m;
    const float *x;
    size_t n;
    mr_gbdt_layout layout;
    int raw;
    double *out;
} pred_ctx;

static void pred_block(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    pred_ctx *c = vctx;
    const size_t d = c->m->n_features;
    for (size_t i = begin; i < end; i++) {
        double s = c->layout == MR_GBDT_ROW_MAJOR ? score_row(c->m, c->x + i * d, 1) : score_row(c->m, c->x + i, c->n);
        c->out[i] = c->raw || c->m->objective != MR_LINEAR_LOGISTIC ? s : 1.0 / (1.0 + exp(-s));
    }
}

mr_status mr_linear_predict(const mr_linear_model *m, const float *x, size_t n_rows, mr_gbdt_layout layout, int raw,
                            double *out, mr_error *err)
{
    (void)err;
    pred_ctx c = {.m = m, .x = x, .n = n_rows, .layout = layout, .raw = raw, .out = out};
    mr_parallel_for_capped(n_rows, 4096, 0, pred_block, &c);
    return MR_OK;
}

mr_linear_kind mr_linear_model_objective(const mr_linear_model *m) { return m->objective; }
size_t mr_linear_model_num_features(const mr_linear_model *m) { return m->n_features; }
int mr_linear_model_iterations(const mr_linear_model *m) { return m->iterations; }
double mr_linear_model_weight(const mr_linear_model *m, size_t j) { return j < m->n_features ? m->w[j] : 0.0; }
double mr_linear_model_intercept(const mr_linear_model *m) { return m->b; }

/* ---- file format ------------------------------------------------------------------ */

static const char LIN_MAGIC[8] = {'M', 'R', 'L', 'I', 'N', 'M', 'O', 'D'};
#define LIN_VERSION 1u

mr_status mr_linear_model_to_bytes(const mr_linear_model *m, mr_buf *out, mr_error *err)
{
    size_t start = out->len;
    mr_status st = mr_buf_append(out, LIN_MAGIC, 8);
    if (st == MR_OK) st = mr_buf_put_u32(out, LIN_VERSION);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)m->objective);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)m->n_features);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)m->iterations);
    if (st == MR_OK) st = mr_buf_put_f64(out, m->lambda_l2);
    if (st == MR_OK) st = mr_buf_put_f64(out, m->lambda_l1);
    if (st == MR_OK) st = mr_buf_put_f64(out, m->intercept);
    for (size_t j = 0; j < m->n_features && st == MR_OK; j++) {
        st = mr_buf_put_str(out, m->names[j]);
        if (st == MR_OK) st = mr_buf_put_f64(out, m->mean[j]);
        if (st == MR_OK) st = mr_buf_put_f64(out, m->scale[j]);
        if (st == MR_OK) st = mr_buf_put_f64(out, m->coef[j]);
    }
    if (st == MR_OK) {
        mr_hash128 h = mr_hash_bytes(out->data + start, out->len - start);
        st = mr_buf_put_u64(out, h.hi);
        if (st == MR_OK) st = mr_buf_put_u64(out, h.lo);
    }
    if (st != MR_OK) return MR_ERR(err, st, "cannot serialise linear model");
    return MR_OK;
}

mr_status mr_linear_model_from_bytes(const void *data, size_t len, mr_linear_model **out, mr_error *err)
{
    *out = NULL;
    if (len < 8 + 16 || memcmp(data, LIN_MAGIC, 8)) return MR_ERR(err, MR_E_CORRUPT, "not a millrace linear model");
    mr_hash128 h = mr_hash_bytes(data, len - 16);
    mr_reader r = {.p = data, .len = len, .pos = len - 16};
    if (mr_reader_u64(&r) != h.hi || mr_reader_u64(&r) != h.lo)
        return MR_ERR(err, MR_E_CORRUPT, "linear model checksum mismatch");
    r = (mr_reader){.p = data, .len = len - 16, .pos = 8};
    uint32_t version = mr_reader_u32(&r), obj = mr_reader_u32(&r), d = mr_reader_u32(&r), iters = mr_reader_u32(&r);
    if (r.bad || version != LIN_VERSION || obj > 1 || d == 0 || d > 4096)
        return MR_ERR(err, MR_E_CORRUPT, "linear model header is invalid (version %u)", version);
    mr_linear_model *m = NULL;
    if (model_alloc(d, &m) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    m->objective = (mr_linear_kind)obj;
    m->iterations = (int)iters;
    m->lambda_l2 = mr_reader_f64(&r);
    m->lambda_l1 = mr_reader_f64(&r);
    m->intercept = mr_reader_f64(&r);
    int oom = 0;
    for (size_t j = 0; j < d; j++) {
        m->names[j] = mr_reader_str(&r);
        m->mean[j] = mr_reader_f64(&r);
        m->scale[j] = mr_reader_f64(&r);
        m->coef[j] = mr_reader_f64(&r);
        oom = !r.bad && !m->names[j]; /* mr_reader_str: NULL without r.bad is out of memory */
        if (r.bad || !m->names[j] || !(m->scale[j] > 0)) break;
    }
    if (oom) {
        mr_linear_model_free(m);
        return MR_ERR(err, MR_E_NOMEM, "out of memory loading a linear model");
    }
    if (r.bad || r.pos != r.len) {
        size_t pos = r.pos;
        mr_linear_model_free(m);
        return MR_ERR(err, MR_E_CORRUPT, "linear model is corrupt near byte %zu", pos);
    }
    derive(m);
    *out = m;
    return MR_OK;
}

mr_status mr_linear_model_save(const mr_linear_model *m, const char *path, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status st = mr_linear_model_to_bytes(m, &b, err);
    if (st == MR_OK) st = mr_fs_write_atomic(path, b.data, b.len, err);
    mr_buf_free(&b);
    return st;
}

mr_status mr_linear_model_load(const char *path, mr_linear_model **out, mr_error *err)
{
    char *data = NULL;
    size_t len = 0;
    mr_status st = mr_fs_read_file(path, (size_t)1 << 30, &data, &len, err);
    if (st != MR_OK) return st;
    st = mr_linear_model_from_bytes(data, len, out, err);
    if (st != MR_OK) mr_error_at(err, path, 0, 0);
    mr_free(data);
    return st;
}

mr_status mr_linear_model_dump_json(const mr_linear_model *m, mr_buf *b, mr_error *err)
{
    mr_status st = mr_buf_printf(b, "{\"format\":\"millrace-linear\",\"version\":%u,\"objective\":\"%s\","
                                    "\"lambda_l2\":%.17g,\"lambda_l1\":%.17g,\"iterations\":%d,\"intercept\":%.17g,"
                                    "\"features\":[",
                                 LIN_VERSION, m->objective == MR_LINEAR_LOGISTIC ? "binary" : "regression",
                                 m->lambda_l2, m->lambda_l1, m->iterations, m->b);
    for (size_t j = 0; j < m->n_features && st == MR_OK; j++) {
        st = mr_buf_printf(b, "%s{\"name\":", j ? "," : "");
        if (st == MR_OK) st = mr_buf_json_str(b, m->names[j]);
        if (st == MR_OK)
            st = mr_buf_printf(b, ",\"weight\":%.17g,\"mean\":%.17g,\"scale\":%.17g,\"std_weight\":%.17g}", m->w[j],
                               m->mean[j], m->scale[j], m->coef[j]);
    }
    if (st == MR_OK) st = mr_buf_puts(b, "]}\n");
    if (st != MR_OK) return MR_ERR(err, st, "cannot write linear model JSON");
    return MR_OK;
}

const char *mr_linear_model_feature_name(const mr_linear_model *m, size_t j)
{
    return j < m->n_features ? m->names[j] : NULL;
}
