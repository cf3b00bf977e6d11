/* Behavioural model properties (include/millrace/check.h): each check builds
 * the perturbed rows it needs, scores them through the caller's scorer in
 * one batch, and compares outputs row by row. No model knowledge lives
 * here; the check op (src/ops/op_check.c) supplies a model-backed scorer. */
#include "millrace/check.h"
#include "millrace/value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const prop_names[] = {"consistency", "monotonic", "invariance", "robustness", "directional"};
#define N_PROPS (sizeof(prop_names) / sizeof(prop_names[0]))

const char *mr_prop_kind_name(mr_prop_kind k)
{
    return (unsigned)k < N_PROPS ? prop_names[k] : "unknown";
}

mr_status mr_prop_kind_parse(const char *name, mr_prop_kind *out, mr_error *err)
{
    for (size_t k = 0; k < N_PROPS; k++)
        if (!strcmp(name, prop_names[k])) {
            *out = (mr_prop_kind)k;
            return MR_OK;
        }
    if (!strcmp(name, "monotonicity")) {
        *out = MR_PROP_MONOTONIC;
        return MR_OK;
    }
    if (!strcmp(name, "negation")) {
        *out = MR_PROP_DIRECTIONAL;
        return MR_OK;
    }
    mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "unknown property type '%s'", name);
    const char *best = mr_closest(name, prop_names, N_PROPS);
    if (best) mr_error_hint(err, "did you mean '%s'?", best);
    return rc;
}

void mr_prop_init(mr_prop *p, mr_prop_kind kind)
{
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->direction = 1;
    p->epsilon = kind == MR_PROP_INVARIANCE ? 1e-9 : 0.0;
    p->perturb = NAN;
    p->noise = 0.01;
    p->delta = 0.05;
    p->fraction = kind == MR_PROP_DIRECTIONAL ? 0.9 : 0.95;
    p->from = p->to = NAN;
    p->grid = 8;
}

static double unif(uint64_t *s) { return mr_u01(mr_splitmix64(s)); }
static double gauss(uint64_t *s)
{
    double u = unif(s), v = unif(s);
    return sqrt(-2.0 * log(u > 1e-300 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Largest |a - b| over the k outputs of one row (NaN-aware: NaN vs number is inf). */
static double row_diff(const double *a, const double *b, size_t k)
{
    double m = 0;
    for (size_t j = 0; j < k; j++) {
        double d;
        if (isnan(a[j]) || isnan(b[j])) d = isnan(a[j]) && isnan(b[j]) ? 0 : INFINITY;
        else d = fabs(a[j] - b[j]);
        if (d > m) m = d;
    }
    return m;
}

typedef struct check_bufs {
    float *x2;
    double *s0, *s1;
} check_bufs;

static void note_violation(mr_prop_result *r, size_t row, double amount)
{
    r->n_violations++;
    if (r->example_row == SIZE_MAX || amount > r->worst) {
        r->worst = amount;
        r->example_row = row;
    }
}

static mr_status check_consistency(const mr_prop *p, const mr_scorer *s, const float *x, size_t n, check_bufs *b,
                                   mr_prop_result *r, mr_error *err)
{
    const size_t K = s->n_outputs, F = s->n_features;
    mr_status rc = s->fn(s->ctx, x, n, 1, b->s0, err);
    const size_t batches[] = {1, 7, 64, n};
    int threads[2] = {1, s->max_threads > 1 ? s->max_threads : 1};
    unsigned char *bad = mr_calloc(n, 1);
    if (!bad) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    double *md = mr_calloc(n, sizeof(double));
    if (!md) {
        mr_free(bad);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    int n_configs = 0;
    for (size_t bi = 0; rc == MR_OK && bi < sizeof(batches) / sizeof(batches[0]); bi++) {
        for (int ti = 0; rc == MR_OK && ti < 2; ti++) {
            size_t bs = batches[bi] ? batches[bi] : 1;
            if (ti == 1 && (threads[1] == 1 || bs == 1)) continue; /* one row per call runs on one thread */
            if (bi == 3 && ti == 0) continue;                      /* that is the reference itself */
            n_configs++;
            for (size_t i = 0; rc == MR_OK && i < n; i += bs) {
                size_t m = n - i < bs ? n - i : bs;
                rc = s->fn(s->ctx, x + i * F, m, threads[ti], b->s1 + i * K, err);
            }
            for (size_t i = 0; rc == MR_OK && i < n; i++) {
                double d = row_diff(b->s0 + i * K, b->s1 + i * K, K);
                if (d > p->epsilon) {
                    bad[i] = 1;
                    if (d > md[i]) md[i] = d;
                }
            }
        }
    }
    for (size_t i = 0; rc == MR_OK && i < n; i++)
        if (bad[i]) note_violation(r, i, md[i]);
    mr_free(bad);
    mr_free(md);
    if (rc == MR_OK && r->n_violations)
        snprintf(r->detail, sizeof(r->detail),
                 "%zu of %zu rows scored differently across %d batch-size/thread settings (max |diff| %.3g > %.3g)",
                 r->n_violations, n, n_configs, r->worst, p->epsilon);
    else if (rc == MR_OK)
        snprintf(r->detail, sizeof(r->detail), "%zu rows scored identically across %d batch-size/thread settings (tolerance %.3g)",
                 n, n_configs, p->epsilon);
    return rc;
}

static mr_status check_monotonic(const mr_prop *p, const mr_scorer *s, const float *x, size_t n, mr_prop_result *r,
                                 mr_error *err)
{
    const size_t K = s->n_outputs, F = s->n_features, f = p->feature;
    size_t G = p->grid ? p->grid : 8;
    float *vals = mr_malloc(n * sizeof(float)), *grid = mr_malloc(G * sizeof(float)), *xx = NULL;
    double *sc = NULL;
    mr_status rc = MR_OK;
    if (!vals || !grid) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    size_t nv = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i * F + f])) vals[nv++] = x[i * F + f];
    if (nv == 0) {
        snprintf(r->detail, sizeof(r->detail), "the feature is missing in every sampled row; nothing to test");
        goto done;
    }
    qsort(vals, nv, sizeof(float), cmp_float);
    size_t ng = 0;
    for (size_t g = 0; g < G; g++) {
        float v = vals[(size_t)((double)g / (double)(G > 1 ? G - 1 : 1) * (double)(nv - 1))];
        if (!ng || v > grid[ng - 1]) grid[ng++] = v;
    }
    if (ng < 2) {
        snprintf(r->detail, sizeof(r->detail), "the feature is constant in the sample; nothing to test");
        goto done;
    }
    xx = mr_malloc(n * ng * F * sizeof(float));
    sc = mr_malloc(n * ng * K * sizeof(double));
    if (!xx || !sc) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory for %zu x %zu grid rows", n, ng);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < ng; g++) {
            float *row = xx + (i * ng + g) * F;
            memcpy(row, x + i * F, F * sizeof(float));
            row[f] = grid[g];
        }
    rc = s->fn(s->ctx, xx, n * ng, s->max_threads > 0 ? s->max_threads : 1, sc, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        double worst = 0;
        for (size_t g = 0; g + 1 < ng; g++) {
            double a = sc[(i * ng + g) * K + p->output], b2 = sc[(i * ng + g + 1) * K + p->output];
            double against = -(double)p->direction * (b2 - a);
            if (against > p->epsilon && against > worst) worst = against;
        }
        if (worst > 0) note_violation(r, i, worst);
    }
    if (rc == MR_OK && r->n_violations)
        snprintf(r->detail, sizeof(r->detail), "%zu of %zu rows: output %s by up to %.4g as the feature rose over %zu values",
                 r->n_violations, n, p->direction > 0 ? "fell" : "rose", r->worst, ng);
    else if (rc == MR_OK)
        snprintf(r->detail, sizeof(r->detail), "0 of %zu rows: output never %s as the feature rose over %zu values", n,
                 p->direction > 0 ? "fell" : "rose", ng);
done:
    mr_free(vals);
    mr_free(grid);
    mr_free(xx);
    mr_free(sc);
    return rc;
}

/* Scores x and x2 (same shape) into b->s0 and b->s1. */
static mr_status score_pair(const mr_scorer *s, const float *x, size_t n, check_bufs *b, mr_error *err)
{
    int th = s->max_threads > 0 ? s->max_threads : 1;
    mr_status rc = s->fn(s->ctx, x, n, th, b->s0, err);
    return rc == MR_OK ? s->fn(s->ctx, b->x2, n, th, b->s1, err) : rc;
}

static mr_status check_invariance(const mr_prop *p, const mr_scorer *s, const float *x, size_t n, check_bufs *b,
                                  mr_prop_result *r, mr_error *err)
{
    const size_t K = s->n_outputs, F = s->n_features, f = p->feature;
    memcpy(b->x2, x, n * F * sizeof(float));
    if (!isnan(p->perturb)) {
        for (size_t i = 0; i < n; i++) b->x2[i * F + f] = (float)((double)x[i * F + f] + p->perturb);
    } else {
        /* A seeded Fisher-Yates permutation of the column. */
        uint64_t st = p->seed ^ 0x5eedULL;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(unif(&st) * (double)i);
            float t = b->x2[(i - 1) * F + f];
            b->x2[(i - 1) * F + f] = b->x2[j * F + f];
            b->x2[j * F + f] = t;
        }
    }
    mr_status rc = score_pair(s, x, n, b, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        double d = row_diff(b->s0 + i * K, b->s1 + i * K, K);
        if (d > p->epsilon) note_violation(r, i, d);
    }
    if (rc == MR_OK) {
        char how[64];
        if (isnan(p->perturb)) snprintf(how, sizeof(how), "permuting the feature");
        else snprintf(how, sizeof(how), "adding %g to the feature", p->perturb);
        if (r->n_violations)
            snprintf(r->detail, sizeof(r->detail), "%s changed %zu of %zu rows by up to %.4g (epsilon %.3g)", how,
                     r->n_violations, n, r->worst, p->epsilon);
        else
            snprintf(r->detail, sizeof(r->detail), "%s changed no row by more than %.3g (%zu rows)", how, p->epsilon, n);
    }
    return rc;
}

static mr_status check_robustness(const mr_prop *p, const mr_scorer *s, const float *x, size_t n, check_bufs *b,
                                  mr_prop_result *r, mr_error *err)
{
    const size_t K = s->n_outputs, F = s->n_features;
    double *sd = mr_calloc(F, sizeof(double));
    if (!sd) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t j = 0; j < F; j++) {
        double sum = 0, sum2 = 0;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            float v = x[i * F + j];
            if (isnan(v)) continue;
            sum += v;
            sum2 += (double)v * v;
            m++;
        }
        if (m > 1) {
            double mean = sum / (double)m, var = sum2 / (double)m - mean * mean;
            sd[j] = var > 0 ? sqrt(var) : 0;
        }
    }
    uint64_t st = p->seed ^ 0x4015eULL;
    memcpy(b->x2, x, n * F * sizeof(float));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < F; j++) {
            if (p->feature != SIZE_MAX && j != p->feature) continue;
            float *v = &b->x2[i * F + j];
            double g = gauss(&st);
            if (!isnan(*v)) *v = (float)((double)*v + g * p->noise * sd[j]);
        }
    mr_free(sd);
    mr_status rc = score_pair(s, x, n, b, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        double d = row_diff(b->s0 + i * K, b->s1 + i * K, K);
        if (d > p->delta) note_violation(r, i, d);
    }
    if (rc == MR_OK) {
        r->pass_fraction = (double)(n - r->n_violations) / (double)n;
        snprintf(r->detail, sizeof(r->detail),
                 "noise %.3g sd: %.1f%% of %zu rows moved by at most %.3g (need %.1f%%; largest move %.4g)", p->noise,
                 100 * r->pass_fraction, n, p->delta, 100 * p->fraction, r->n_violations ? r->worst : 0.0);
    }
    return rc;
}

static mr_status check_directional(const mr_prop *p, const mr_scorer *s, const float *x, size_t n, check_bufs *b,
                                   mr_prop_result *r, mr_error *err)
{
    const size_t K = s->n_outputs, F = s->n_features, f = p->feature;
    int fixed = !isnan(p->from) && !isnan(p->to);
    float *x1 = mr_malloc(n * F * sizeof(float));
    double *sgn = mr_malloc(n * sizeof(double));
    mr_status rc = MR_OK;
    if (!x1 || !sgn) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    memcpy(x1, x, n * F * sizeof(float));
    memcpy(b->x2, x, n * F * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float v = x[i * F + f];
        if (fixed) {
            x1[i * F + f] = (float)p->from;
            b->x2[i * F + f] = (float)p->to;
            sgn[i] = p->to > p->from ? 1 : p->to < p->from ? -1 : 0;
        } else {
            float w = isnan(v) ? NAN : (v == 0.0f || v == 1.0f) ? 1.0f - v : -v;
            b->x2[i * F + f] = w;
            sgn[i] = isnan(v) ? 0 : w > v ? 1 : w < v ? -1 : 0;
        }
    }
    rc = score_pair(s, x1, n, b, err);
    size_t tested = 0, moved = 0;
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        if (sgn[i] == 0) continue; /* missing, or a value equal to its flip (0 for negation) */
        tested++;
        double mv = (double)p->direction * sgn[i] * (b->s1[i * K + p->output] - b->s0[i * K + p->output]);
        if (mv > p->epsilon) moved++;
        else note_violation(r, i, -mv);
    }
    if (rc == MR_OK) {
        r->n_rows = tested;
        r->pass_fraction = tested ? (double)moved / (double)tested : 0;
        snprintf(r->detail, sizeof(r->detail),
                 "%s: the output moved the declared way (%s) on %.1f%% of %zu rows (need %.1f%%)%s",
                 fixed ? "from/to" : "flip", p->direction > 0 ? "up" : "down", 100 * r->pass_fraction, tested,
                 100 * p->fraction, r->n_violations && r->worst > 0 ? "; some moved the other way" : "");
    }
done:
    mr_free(x1);
    mr_free(sgn);
    return rc;
}

mr_status mr_prop_check(const mr_prop *p, const mr_scorer *s, const float *x, size_t n_rows, mr_prop_result *out,
                        mr_error *err)
{
    memset(out, 0, sizeof(*out));
    out->example_row = SIZE_MAX;
    out->n_rows = n_rows;
    if (!s || !s->fn || !s->n_features || !s->n_outputs) return MR_ERR(err, MR_E_INVALID_ARG, "property check: no scorer");
    if (!n_rows) return MR_ERR(err, MR_E_INVALID_ARG, "property check: no rows to test");
    if (p->kind != MR_PROP_CONSISTENCY && !(p->kind == MR_PROP_ROBUSTNESS && p->feature == SIZE_MAX) &&
        p->feature >= s->n_features)
        return MR_ERR(err, MR_E_INVALID_ARG, "property %s: feature index %zu out of range (%zu features)",
                      mr_prop_kind_name(p->kind), p->feature, s->n_features);
    if (p->output >= s->n_outputs)
        return MR_ERR(err, MR_E_INVALID_ARG, "property %s: output %zu out of range (%zu outputs)",
                      mr_prop_kind_name(p->kind), p->output, s->n_outputs);
    if (p->direction != 1 && p->direction != -1)
        return MR_ERR(err, MR_E_INVALID_ARG, "property %s: direction must be +1 or -1", mr_prop_kind_name(p->kind));
    if (!(p->fraction >= 0 && p->fraction <= 1) || !(p->epsilon >= 0) || !(p->delta >= 0) || !(p->noise >= 0))
        return MR_ERR(err, MR_E_INVALID_ARG,
                      "property %s: fraction must be in [0, 1]; epsilon, delta and noise must be >= 0",
                      mr_prop_kind_name(p->kind));
    if (n_rows > SIZE_MAX / 64 / s->n_features / (s->n_outputs + 1))
        return MR_ERR(err, MR_E_LIMIT, "property check: too many rows");
    check_bufs b = {mr_malloc(n_rows * s->n_features * sizeof(float)), mr_malloc(n_rows * s->n_outputs * sizeof(double)),
                    mr_malloc(n_rows * s->n_outputs * sizeof(double))};
    mr_status rc = MR_OK;
    if (!b.x2 || !b.s0 || !b.s1) rc = MR_ERR(err, MR_E_NOMEM, "out of memory for %zu check rows", n_rows);
    if (rc == MR_OK) {
        switch (p->kind) {
        case MR_PROP_CONSISTENCY: rc = check_consistency(p, s, x, n_rows, &b, out, err); break;
        case MR_PROP_MONOTONIC: rc = check_monotonic(p, s, x, n_rows, out, err); break;
        case MR_PROP_INVARIANCE: rc = check_invariance(p, s, x, n_rows, &b, out, err); break;
        case MR_PROP_ROBUSTNESS: rc = check_robustness(p, s, x, n_rows, &b, out, err); break;
        case MR_PROP_DIRECTIONAL: rc = check_directional(p, s, x, n_rows, &b, out, err); break;
        default: rc = MR_ERR(err, MR_E_INVALID_ARG, "unknown property kind %d", (int)p->kind);
        }
    }
    if (rc == MR_OK) {
        if (p->kind == MR_PROP_ROBUSTNESS || p->kind == MR_PROP_DIRECTIONAL)
            out->passed = out->n_rows > 0 && out->pass_fraction >= p->fraction;
        else {
            out->passed = out->n_violations == 0;
            out->pass_fraction = out->n_rows ? (double)(out->n_rows - out->n_violations) / (double)out->n_rows : 1;
        }
    }
    mr_free(b.x2);
    mr_free(b.s0);
    mr_free(b.s1);
    return rc;
}
