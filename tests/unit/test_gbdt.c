/* Unit tests for src/ml/gbdt: objectives vs finite differences, histograms
 * (parallel = scalar reference, subtraction = direct), split finding vs a
 * brute-force reference, byte-identical models across thread counts and
 * runs, early stopping, label errors, degenerate features, model and binned
 * matrix round trips, categorical splits, params parsing, accuracy sanity.
 * Every RNG is seeded with a fixed value printed on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "millrace/gbdt.h"
#include "millrace/io.h"
#include "millrace/model.h"
#include "millrace/value.h"
#include "ml/gbdt/gbdt_int.h"

#define SEED 20240601u

static uint64_t rng_state;
static double urand(void) { return mr_u01(mr_splitmix64(&rng_state)); }
static double nrand(void)
{
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Synthetic nonlinear binary problem (F >= 2): y ~ Bernoulli(sigmoid(f(x))) with an
 * interaction, a threshold and a ring; 1% NaN in feature 2. */
static void make_binary(size_t n, size_t F, uint64_t seed, float **x_out, float **y_out)
{
    rng_state = seed;
    float *x = malloc(n * F * sizeof(float)), *y = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < F; j++) x[i * F + j] = (float)nrand();
        double a = x[i * F], b = x[i * F + 1], c = F > 2 ? x[i * F + 2] : 0.0;
        double f = 2.0 * (a * b > 0 ? 1 : -1) + 1.5 * (c > 0.5) - 1.0 * (a * a + b * b > 2.0) + 0.5 * sin(3 * c);
        if (F > 2 && urand() < 0.01) x[i * F + 2] = NAN;
        y[i] = urand() < 1.0 / (1.0 + exp(-f)) ? 1.0f : 0.0f;
    }
    *x_out = x;
    *y_out = y;
}

static mr_gbdt_data *bin_or_fail(const float *x, size_t n, size_t F, const float *y, const mr_gbdt_data *ref,
                                 const mr_gbdt_params *p)
{
    mr_error err;
    mr_error_init(&err);
    mr_gbdt_data *d = NULL;
    if (mr_gbdt_data_from_matrix(x, n, F, MR_GBDT_ROW_MAJOR, y, NULL, ref, p, &d, &err) != MR_OK)
        fail_msg("binning failed: %s", err.msg);
    return d;
}

static mr_gbdt_model *train_or_fail(const mr_gbdt_params *p, const mr_gbdt_data *tr, const mr_gbdt_data *va)
{
    mr_error err;
    mr_error_init(&err);
    mr_gbdt_model *m = NULL;
    if (mr_gbdt_train(p, tr, va, NULL, NULL, &m, &err) != MR_OK) fail_msg("train failed: %s", err.msg);
    return m;
}

static void set(mr_gbdt_params *p, const char *k, const char *v)
{
    mr_error err;
    mr_error_init(&err);
    if (mr_gbdt_params_set_text(p, k, v, &err) != MR_OK) fail_msg("param %s=%s: %s", k, v, err.msg);
}

/* ---- objectives vs finite differences ------------------------------------------ */

static double loss(mr_gbdt_objective o, int k, double alpha, double y, const double *s)
{
    switch (o) {
    case MR_GBDT_REGRESSION: return 0.5 * (s[0] - y) * (s[0] - y);
    case MR_GBDT_REGRESSION_L1: return fabs(s[0] - y);
    case MR_GBDT_HUBER: {
        double d = fabs(s[0] - y);
        return d <= alpha ? 0.5 * d * d : alpha * (d - 0.5 * alpha);
    }
    case MR_GBDT_BINARY: return log(1 + exp(-s[0])) + (1 - y) * s[0];
    case MR_GBDT_MULTICLASS: {
        double z = 0;
        for (int c = 0; c < k; c++) z += exp(s[c]);
        return -(s[(int)y] - log(z));
    }
    }
    return 0;
}

static void test_objective_gradients(void **state)
{
    (void)state;
    const double h = 1e-4;
    struct {
        mr_gbdt_objective o;
        int k;
    } cases[] = {{MR_GBDT_REGRESSION, 1}, {MR_GBDT_REGRESSION_L1, 1}, {MR_GBDT_HUBER, 1}, {MR_GBDT_BINARY, 1},
                 {MR_GBDT_MULTICLASS, 4}};
    rng_state = SEED;
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int k = cases[ci].k;
        for (int trial = 0; trial < 50; trial++) {
            float label = cases[ci].o == MR_GBDT_BINARY ? (urand() < 0.5f)
                          : cases[ci].o == MR_GBDT_MULTICLASS ? (float)(trial % k)
                                                              : (float)(3 * nrand());
            double s[4], g_num[4];
            float g[4], hs[4];
            for (int c = 0; c < k; c++) s[c] = 2 * nrand();
            if (cases[ci].o == MR_GBDT_REGRESSION_L1 && fabs(s[0] - label) < 1e-2) s[0] += 0.1;
            if (cases[ci].o == MR_GBDT_HUBER && fabs(fabs(s[0] - label) - 0.9) < 1e-2) s[0] += 0.1;
            mr__objective_grad(cases[ci].o, k, 0.9, &label, s, 0, 1, g, hs);
            for (int c = 0; c < k; c++) {
                double sp[4], sm[4];
                memcpy(sp, s, sizeof(s));
                memcpy(sm, s, sizeof(s));
                sp[c] += h;
                sm[c] -= h;
                double lp = loss(cases[ci].o, k, 0.9, label, sp), lm = loss(cases[ci].o, k, 0.9, label, sm);
                double l0 = loss(cases[ci].o, k, 0.9, label, s);
                g_num[c] = (lp - lm) / (2 * h);
                if (fabs(g[c] - g_num[c]) > 1e-4)
                    fail_msg("%s: grad[%d] %g vs finite difference %g (seed %u)",
                             mr_gbdt_objective_name(cases[ci].o), c, g[c], g_num[c], SEED);
                double h_num = (lp - 2 * l0 + lm) / (h * h);
                double h_want = h_num;
                if (cases[ci].o == MR_GBDT_MULTICLASS) h_want *= (double)k / (k - 1); /* LightGBM's factor */
                if (cases[ci].o == MR_GBDT_REGRESSION_L1 || (cases[ci].o == MR_GBDT_HUBER && fabs(s[0] - label) > 0.9))
                    h_want = 1.0; /* piecewise-linear losses use a unit hessian */
                if (fabs(hs[c] - h_want) > 2e-3 * (1 + fabs(h_want)))
                    fail_msg("%s: hess[%d] %g vs finite difference %g (seed %u)",
                             mr_gbdt_objective_name(cases[ci].o), c, hs[c], h_want, SEED);
            }
        }
    }
}

/* ---- histograms ------------------------------------------------------------------ */

static void test_hist_parallel_and_subtraction(void **state)
{
    (void)state;
    const size_t n = 50000, F = 6;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    size_t nb = d->bin_offset[F];
    mr__ghq *gh = malloc(n * sizeof(mr__ghq));
    int64_t *hraw = malloc(n * sizeof(int64_t));
    const int k = mr__hc_bits(n);
    rng_state = SEED + 1;
    for (size_t i = 0; i < n; i++) { /* hessians up to 2^31: their sums need more than 32 bits */
        gh[i].g = (int32_t)((urand() - 0.5) * 2e9);
        hraw[i] = (int64_t)(urand() * 2e9);
        gh[i].hc = mr__hc_pack(hraw[i], 1, k);
    }
    uint32_t *all = malloc(n * sizeof(uint32_t)), *a = malloc(n * sizeof(uint32_t)), *b = malloc(n * sizeof(uint32_t));
    size_t na = 0, nbb = 0;
    for (size_t i = 0; i < n; i++) {
        all[i] = (uint32_t)i;
        if (urand() < 0.3)
            a[na++] = (uint32_t)i;
        else
            b[nbb++] = (uint32_t)i;
    }
    mr__hbin *ref = malloc(nb * sizeof(mr__hbin)), *par = malloc(nb * sizeof(mr__hbin)),
             *ha = malloc(nb * sizeof(mr__hbin)), *hb = malloc(nb * sizeof(mr__hbin));
    mr__hist_ctx *hc = NULL;
    assert_ok(mr__hist_ctx_new(nb, mr_pool_threads_capped(0), &hc, NULL));
    mr__hist_build_ref(d, all, n, gh, ref);
    /* the packed reference unpacks to the direct sums of every bin */
    {
        int64_t *dg = calloc(nb, sizeof(int64_t)), *dh = calloc(nb, sizeof(int64_t)), *dc = calloc(nb, sizeof(int64_t));
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < F; f++) {
                size_t b = d->bin_offset[f] + d->bins[i * F + f];
                dg[b] += gh[i].g;
                dh[b] += hraw[i];
                dc[b]++;
            }
        for (size_t b = 0; b < nb; b++) {
            assert_int_equal(ref[b].g, dg[b]);
            assert_int_equal(mr__hc_h(ref[b].hc, k), dh[b]);
            assert_int_equal(mr__hc_c(ref[b].hc, k), dc[b]);
        }
        free(dg);
        free(dh);
        free(dc);
    }
    int threads[] = {1, 2, 3, 7};
    for (int t = 0; t < 4; t++) {
        mr__hist_build(hc, d, all, n, gh, NULL, 0, threads[t], par);
        assert_memory_equal(ref, par, nb * sizeof(mr__hbin));
    }
    /* a leaf of 5,000 rows, with every feature and with a subset: the
     * reference's sums on the features built, at any thread count */
    {
        size_t nl = 5000;
        uint32_t sub_feats[] = {1, 2, 4, 5};
        mr__hist_build_ref(d, a, nl, gh, ref);
        for (int t = 0; t < 4; t++) {
            mr__hist_build(hc, d, a, nl, gh, NULL, 0, threads[t], par);
            assert_memory_equal(ref, par, nb * sizeof(mr__hbin));
            mr__hist_build(hc, d, a, nl, gh, sub_feats, 4, threads[t], par);
            for (size_t k = 0; k < 4; k++) {
                uint32_t f = sub_feats[k];
                assert_memory_equal(ref + d->bin_offset[f], par + d->bin_offset[f],
                                    (d->bin_offset[f + 1] - d->bin_offset[f]) * sizeof(mr__hbin));
            }
        }
    }
    /* subtraction: parent - A == B built directly, exactly */
    mr__hist_build(hc, d, all, n, gh, NULL, 0, 2, par);
    mr__hist_build(hc, d, a, na, gh, NULL, 0, 2, ha);
    mr__hist_build(hc, d, b, nbb, gh, NULL, 0, 2, hb);
    mr__hist_sub(par, ha, nb);
    assert_memory_equal(par, hb, nb * sizeof(mr__hbin));
    /* quantised sums stay within n/2 quanta of the exact double sums */
    double exact = 0;
    int64_t q = 0;
    for (size_t i = 0; i < n; i++) {
        float g = (float)nrand();
        exact += g;
        q += (int32_t)lrint((double)g * 0x1p26);
    }
    assert_true(fabs((double)q / 0x1p26 - exact) <= (double)n * 0.5 / 0x1p26 + 1e-9);
    mr__hist_ctx_free(hc);
    free(ref);
    free(par);
    free(ha);
    free(hb);
    free(all);
    free(a);
    free(b);
    free(gh);
    free(hraw);
    free(x);
    free(y);
    mr_gbdt_data_free(d);
}

/* The packed hessian | count word at its limits: 2^k - 1 rows, each with
 * the largest hessian the quantisation gives (2^(64-2k), or 2^30), sum
 * without a carry into the hessian, and k grows with the row count. */
static void test_hc_packing(void **state)
{
    (void)state;
    assert_int_equal(mr__hc_bits(0), 1);
    assert_int_equal(mr__hc_bits(1), 1);
    assert_int_equal(mr__hc_bits(2), 2);
    assert_int_equal(mr__hc_bits(((size_t)1 << 20) - 1), 20);
    assert_int_equal(mr__hc_bits((size_t)1 << 20), 21);
    assert_int_equal(mr__hc_bits(MR__GBDT_MAX_ROWS - 1), 28);
    const int ks[] = {12, 17, 20, 28};
    for (int j = 0; j < 4; j++) {
        int k = ks[j];
        int64_t hmax = (int64_t)1 << (64 - 2 * k < 30 ? 64 - 2 * k : 30);
        uint64_t one = mr__hc_pack(hmax, 1, k), sum = 0;
        int64_t rows = ((int64_t)1 << k) - 1;
        if (k <= 20) {
            for (int64_t r = 0; r < rows; r++) sum += one;
        } else {
            sum = one * (uint64_t)rows; /* the same sum, without 2^28 additions */
        }
        assert_int_equal(mr__hc_c(sum, k), rows);
        assert_int_equal(mr__hc_h(sum, k), hmax * rows);
        /* and the subtraction of a part leaves the rest's packing */
        uint64_t part = one * 5;
        assert_int_equal(mr__hc_c(sum - part, k), rows - 5);
        assert_int_equal(mr__hc_h(sum - part, k), hmax * (rows - 5));
    }
}

/* The branch-free bin search against a linear scan: every bin count from 1
 * to 256, values on, between, below and above the edges, +-0, infinities. */
static void test_bin_numeric_search(void **state)
{
    (void)state;
    double upper[MR__GBDT_MAX_BINS];
    rng_state = SEED + 7;
    for (int nb = 1; nb <= MR__GBDT_MAX_BINS; nb++) {
        upper[0] = 0;
        double e = -1000;
        for (int b = 1; b < nb - 1; b++) upper[b] = (e += 0.25 + urand() * 10);
        if (nb >= 2) upper[nb - 1] = INFINITY;
        if (nb >= 4) upper[nb / 2] = 0.0; /* an edge at zero */
        for (int b = 2; b < nb - 1; b++)  /* keep them ascending around the zero */
            if (upper[b] <= upper[b - 1]) upper[b] = upper[b - 1] + 0.5;
        mr__bin_feature f = {.kind = MR__FEAT_NUMERIC, .n_bins = (uint16_t)nb, .upper = upper};
        double probes[600];
        int np = 0;
        for (int b = 1; b < nb; b++) {
            probes[np++] = upper[b];
            probes[np++] = nextafter(upper[b], -INFINITY);
        }
        probes[np++] = -INFINITY;
        probes[np++] = INFINITY;
        probes[np++] = -0.0;
        probes[np++] = 0.0;
        probes[np++] = -1e300;
        probes[np++] = 1e300;
        for (int i = 0; i < 20; i++) probes[np++] = (urand() - 0.5) * 3000;
        for (int i = 0; i < np; i++) {
            double v = probes[i];
            int want = 0;
            if (nb >= 2) {
                want = nb - 1;
                for (int b = 1; b < nb; b++)
                    if (v <= upper[b]) {
                        want = b;
                        break;
                    }
            }
            if (mr__bin_numeric(&f, v) != want) fail_msg("n_bins %d, value %.17g: bin %d, want %d", nb, v, mr__bin_numeric(&f, v), want);
        }
        assert_int_equal(mr__bin_numeric(&f, NAN), 0);
    }
}

/* ---- the binning's sort ---------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* mr__sort_doubles against qsort: the same values in the same order, bit
 * for bit, but for zeros, which all come out +0.0. */
static void test_sort_doubles(void **state)
{
    (void)state;
    const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 5e-324, -5e-324, DBL_MAX, -DBL_MAX, 1.0, -1.0};
    for (int trial = 0; trial < 60; trial++) {
        rng_state = SEED + 900 + (uint64_t)trial;
        size_t n = trial < 50 ? (size_t)trial * 7 : (size_t)50000 + (size_t)trial;
        double *v = malloc((n + 1) * sizeof(double)), *ref = malloc((n + 1) * sizeof(double)),
               *tmp = malloc((n + 1) * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            double u = urand();
            v[i] = u < 0.2 ? special[(size_t)(urand() * 10) % 10]
                 : u < 0.5 ? floor(nrand() * 8) / 4 /* many ties */
                           : nrand() * pow(10, floor(nrand() * 6));
        }
        memcpy(ref, v, n * sizeof(double));
        qsort(ref, n, sizeof(double), cmp_dbl);
        mr__sort_doubles(v, n, tmp);
        for (size_t i = 0; i < n; i++) {
            if (ref[i] == 0) {
                if (v[i] != 0 || signbit(v[i])) fail_msg("trial %d: element %zu: %g, expected +0.0", trial, i, v[i]);
            } else if (memcmp(&v[i], &ref[i], sizeof(double)) != 0) {
                fail_msg("trial %d (n %zu): element %zu is %.17g, qsort has %.17g", trial, n, i, v[i], ref[i]);
            }
        }
        free(v);
        free(ref);
        free(tmp);
    }
}

/* ---- split finding vs brute force --------------------------------------------------- */

/* A transport for one process playing every rank of an allgather: what
 * rank q "sends" is staged beforehand; sends are dropped. */
typedef struct staged_comm {
    const mr__split *staged; /* [rank] */
} staged_comm;
static mr_status staged_exchange(void *ctx, mr_gbdt_xfer *x, size_t n, double timeout_s, int *peer_out)
{
    (void)timeout_s;
    (void)peer_out;
    const staged_comm *sc = ctx;
    for (size_t i = 0; i < n; i++)
        if (!x[i].send) memcpy(x[i].buf, &sc->staged[x[i].peer], x[i].len);
    return MR_OK;
}

/* Split finding over feature slices, combined as the ranks combine them
 * (mr__dist_best_splits), picks the split of the whole search. */
static void check_sliced_split(const mr_gbdt_data *d, const mr__hbin *hist, int64_t G, int64_t H, int64_t C,
                               const mr__split_cfg *cfg, const mr__split *whole)
{
    const size_t F = d->n_features;
    for (int p = 2; p <= 4; p++) {
        mr__split staged[4];
        for (int q = 0; q < p; q++)
            mr__find_best_split_range(d, hist, G, H, C, cfg, NULL, F * (size_t)q / (size_t)p,
                                      F * (size_t)(q + 1) / (size_t)p, &staged[q]);
        staged_comm sc = {staged};
        for (int r = 0; r < p; r++) {
            mr_gbdt_comm comm = {.rank = r, .size = p, .ctx = &sc, .exchange = staged_exchange};
            mr__dist D;
            assert_ok(mr__dist_begin(&D, &comm, NULL));
            mr__split mine = staged[r];
            assert_ok(mr__dist_best_splits(&D, &mine, 1, "test", NULL));
            mr__dist_free(&D);
            assert_int_equal(mine.feature, whole->feature);
            if (whole->feature < 0) continue;
            assert_true(mine.gain == whole->gain);
            assert_int_equal(mine.threshold, whole->threshold);
            assert_int_equal(mine.default_left, whole->default_left);
            assert_int_equal(mine.lc, whole->lc);
        }
    }
}

static void test_split_bruteforce(void **state)
{
    (void)state;
    for (int trial = 0; trial < 20; trial++) {
        const size_t n = 300, F = 3;
        rng_state = SEED + 100 + (uint64_t)trial;
        float *x = malloc(n * F * sizeof(float)), *y = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < F; j++) x[i * F + j] = (float)floor(nrand() * 4) / 4;
            if (urand() < 0.1) x[i * F + 1] = NAN;
            y[i] = (float)(x[i * F] > 0.3 ? 1 : 0) + (float)(0.2 * nrand());
        }
        mr_gbdt_params p;
        mr_gbdt_params_init(&p);
        p.max_bin = 8;
        mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
        mr__ghq *gh = malloc(n * sizeof(mr__ghq));
        int64_t *hraw = malloc(n * sizeof(int64_t));
        const int k = mr__hc_bits(n);
        for (size_t i = 0; i < n; i++) {
            gh[i].g = (int32_t)lrint((double)(-y[i] + urand() * 0.1) * 1e6);
            hraw[i] = (int32_t)lrint((0.5 + urand()) * 1e6);
            gh[i].hc = mr__hc_pack(hraw[i], 1, k);
        }
        mr__hbin *hist = malloc(d->bin_offset[F] * sizeof(mr__hbin));
        mr__hist_build_ref(d, NULL, n, gh, hist);
        int64_t G = 0, H = 0;
        for (size_t i = 0; i < n; i++) G += gh[i].g, H += hraw[i];
        mr__split_cfg cfg = {.lambda_l1 = trial % 2 ? 0.5 : 0, .lambda_l2 = 1.0, .min_sum_hessian = 1e-3,
                             .min_data_in_leaf = 5, .inv_gscale = 1e-6, .inv_hscale = 1e-6, .hc_bits = k,
                             .max_cat_to_onehot = 4, .max_cat_threshold = 32, .min_data_per_group = 100,
                             .cat_smooth = 10, .cat_l2 = 10};
        mr__split s;
        mr__find_best_split(d, hist, G, H, (int64_t)n, &cfg, NULL, &s);
        check_sliced_split(d, hist, G, H, (int64_t)n, &cfg, &s);
        /* brute force: every feature, threshold bin, missing side, by direct row sums */
        double best = -INFINITY;
        double pg = mr__leaf_gain(G * 1e-6, H * 1e-6, cfg.lambda_l1, cfg.lambda_l2);
        for (size_t f = 0; f < F; f++)
            for (int t = 1; t < d->feat[f].n_bins; t++)
                for (int ml = 0; ml < 2; ml++) {
                    double lg = 0, lh = 0;
                    long lc = 0;
                    for (size_t i = 0; i < n; i++) {
                        int b = d->bins[i * F + f];
                        if (b == 0 ? ml : b <= t) {
                            lg += gh[i].g;
                            lh += hraw[i];
                            lc++;
                        }
                    }
                    if (lc < 5 || (long)n - lc < 5) continue;
                    double gain = mr__leaf_gain(lg * 1e-6, lh * 1e-6, cfg.lambda_l1, cfg.lambda_l2) +
                                  mr__leaf_gain((G - lg) * 1e-6, (H - lh) * 1e-6, cfg.lambda_l1, cfg.lambda_l2) - pg;
                    if (gain > best) best = gain;
                }
        if (!(best > 0)) {
            assert_int_equal(s.feature, -1);
        } else {
            if (fabs(s.gain - best) > 1e-9 * (1 + fabs(best)))
                fail_msg("trial %d: split gain %.12g, brute force %.12g (seed %u)", trial, s.gain, best, SEED);
            /* the split's left sums agree with its description */
            int64_t lc = 0;
            for (size_t i = 0; i < n; i++) {
                int b = d->bins[i * F + (size_t)s.feature];
                lc += b == 0 ? s.default_left : b <= s.threshold;
            }
            assert_int_equal(lc, s.lc);
        }
        free(hist);
        free(gh);
        free(hraw);
        free(x);
        free(y);
        mr_gbdt_data_free(d);
    }
}

/* ---- reproducibility ------------------------------------------------------------------- */

static char *model_bytes(const mr_gbdt_model *m, size_t *len)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_gbdt_model_to_bytes(m, &b, NULL));
    *len = b.len;
    return b.data;
}

static void test_reproducible_across_threads(void **state)
{
    (void)state;
    const size_t n = 60000, F = 8;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "12");
    set(&p, "num_leaves", "31");
    set(&p, "bagging_fraction", "0.8");
    set(&p, "bagging_freq", "1");
    set(&p, "feature_fraction", "0.75");
    set(&p, "seed", "7");
    char *ref = NULL;
    size_t ref_len = 0;
    int runs[][2] = {{8, 1}, {8, 2}, {8, 7}, {8, 7}, {3, 0}, {1, 0}}; /* {pool size, num_threads} */
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        mr_pool_shutdown();
        assert_ok(mr_pool_init(runs[r][0], NULL));
        p.num_threads = runs[r][1];
        mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
        mr_gbdt_model *m = train_or_fail(&p, d, NULL);
        size_t len;
        char *bytes = model_bytes(m, &len);
        if (!ref) {
            ref = bytes;
            ref_len = len;
        } else {
            if (len != ref_len || memcmp(bytes, ref, len))
                fail_msg("model bytes differ with pool=%d num_threads=%d (seed %u)", runs[r][0], runs[r][1], SEED);
            free(bytes);
        }
        mr_gbdt_model_free(m);
        mr_gbdt_data_free(d);
    }
    mr_pool_shutdown();
    assert_ok(mr_pool_init(4, NULL));
    free(ref);
    free(x);
    free(y);
    mr_gbdt_params_deinit(&p);
}

/* ---- early stopping -------------------------------------------------------------------- */

static void test_early_stopping_curve(void **state)
{
    (void)state;
    /* lower is better: best at round 3 (0.5); patience 4 -> stop at round 7 */
    const double curve[] = {0.9, 0.7, 0.6, 0.5, 0.55, 0.5, 0.52, 0.51, 0.4};
    mr__es es = {.patience = 4, .higher_better = 0, .best_iter = -1};
    int stopped = -1;
    for (int i = 0; i < 9 && stopped < 0; i++)
        if (mr__es_update(&es, i, curve[i])) stopped = i;
    assert_int_equal(stopped, 7);
    assert_int_equal(es.best_iter, 3); /* a tie (0.5 at round 5) is not an improvement */
    /* higher is better (auc) */
    const double auc[] = {0.6, 0.7, 0.69, 0.71, 0.70, 0.70};
    mr__es e2 = {.patience = 2, .higher_better = 1, .best_iter = -1};
    stopped = -1;
    for (int i = 0; i < 6 && stopped < 0; i++)
        if (mr__es_update(&e2, i, auc[i])) stopped = i;
    assert_int_equal(stopped, 5);
    assert_int_equal(e2.best_iter, 3);
}

typedef struct cb_log {
    int rounds;
    int last_best;
    double first_valid;
} cb_log;
static int log_cb(void *ctx, const mr_gbdt_round_info *info)
{
    cb_log *l = ctx;
    if (l->rounds == 0) l->first_valid = info->valid_metric[0];
    l->rounds++;
    l->last_best = info->best_iteration;
    return 0;
}

static void test_early_stopping_training(void **state)
{
    (void)state;
    /* Train on signal, validate on pure noise labels: the validation loss
     * is best early and then worsens; training stops patience rounds later
     * and keeps best+1 rounds. */
    const size_t n = 4000, F = 4;
    float *x, *y, *vx, *vy;
    make_binary(n, F, SEED, &x, &y);
    make_binary(n, F, SEED + 9, &vx, &vy);
    rng_state = SEED + 10;
    for (size_t i = 0; i < n; i++) vy[i] = urand() < 0.5;
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "200");
    set(&p, "early_stopping_rounds", "5");
    set(&p, "metric", "binary_logloss");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p), *v = bin_or_fail(vx, n, F, vy, d, &p);
    cb_log log = {0};
    mr_gbdt_model *m = NULL;
    assert_ok(mr_gbdt_train(&p, d, v, log_cb, &log, &m, NULL));
    int best = mr_gbdt_model_best_iteration(m);
    assert_true(best >= 0);
    assert_int_equal(log.rounds, best + 5 + 1);
    assert_int_equal(mr_gbdt_model_num_iterations(m), best + 1);
    assert_true(log.rounds < 200);
    /* AUC as the metric: stops too, and the callback saw the best round */
    assert_int_equal(log.last_best, best);
    mr_gbdt_model_free(m);
    mr_gbdt_data_free(d);
    mr_gbdt_data_free(v);
    free(x);
    free(y);
    free(vx);
    free(vy);
}

/* ---- errors and degenerate data ---------------------------------------------------------- */

static void test_nan_label_names_row(void **state)
{
    (void)state;
    const size_t n = 100, F = 2;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    y[41] = NAN;
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    mr_error err;
    mr_error_init(&err);
    mr_gbdt_model *m = NULL;
    assert_status(mr_gbdt_train(&p, d, NULL, NULL, NULL, &m, &err), MR_E_INVALID_ARG);
    assert_null(m);
    assert_int_equal(err.row, 42);
    assert_non_null(strstr(err.msg, "row 42"));
    assert_non_null(strstr(err.msg, "NaN"));
    /* binary label 2 */
    y[41] = 2;
    mr_error_clear(&err);
    assert_ok(mr_gbdt_data_set_label(d, y, NULL));
    assert_status(mr_gbdt_train(&p, d, NULL, NULL, NULL, &m, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "not 0 or 1"));
    mr_gbdt_data_free(d);
    free(x);
    free(y);
}

static void test_divergence_is_an_error(void **state)
{
    (void)state;
    const size_t n = 2000, F = 2;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    for (size_t i = 0; i < n; i++) y[i] = y[i] * 1e30f;
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "learning_rate", "1e5");
    set(&p, "num_iterations", "50");
    set(&p, "lambda_l2", "0");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    mr_error err;
    mr_error_init(&err);
    mr_gbdt_model *m = NULL;
    assert_status(mr_gbdt_train(&p, d, NULL, NULL, NULL, &m, &err), MR_E_FAILED);
    assert_non_null(strstr(err.msg, "diverged"));
    assert_null(m);
    mr_gbdt_data_free(d);
    free(x);
    free(y);
}

static void test_degenerate_features_and_labels(void **state)
{
    (void)state;
    const size_t n = 3000, F = 4;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    for (size_t i = 0; i < n; i++) {
        x[i * F + 2] = 5.0f;  /* constant */
        x[i * F + 3] = NAN;   /* all missing */
    }
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "10");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    assert_int_equal(mr_gbdt_data_feature_bins(d, 2), 2); /* missing bin + one value */
    assert_int_equal(mr_gbdt_data_feature_bins(d, 3), 1); /* missing bin only */
    mr_gbdt_model *m = train_or_fail(&p, d, NULL);
    double imp[4];
    mr_gbdt_model_importance(m, MR_GBDT_IMPORTANCE_SPLIT, imp);
    assert_true(imp[0] > 0);
    assert_true(imp[2] == 0 && imp[3] == 0); /* never split on constant / all-missing */
    mr_gbdt_model_free(m);
    /* single-class label: no split helps; training stops with no trees and
     * predicts the (clamped) base rate */
    for (size_t i = 0; i < n; i++) y[i] = 0;
    assert_ok(mr_gbdt_data_set_label(d, y, NULL));
    m = train_or_fail(&p, d, NULL);
    assert_int_equal(mr_gbdt_model_num_trees(m), 0);
    double prob;
    assert_ok(mr_gbdt_predict(m, x, 1, MR_GBDT_ROW_MAJOR, 0, 0, &prob, NULL));
    assert_true(prob < 1e-9);
    mr_gbdt_model_free(m);
    mr_gbdt_data_free(d);
    free(x);
    free(y);
}

/* ---- every batch walk gives the scalar walk's bits ------------------------------------- */

static mr_gbdt_predictor *predictor_with_path(const mr_gbdt_model *m, const char *cap)
{
    setenv("MILLRACE_PREDICT_SIMD", cap, 1);
    mr_gbdt_predictor *pr = NULL;
    assert_ok(mr_gbdt_predictor_new(m, 0, &pr, NULL));
    unsetenv("MILLRACE_PREDICT_SIMD");
    return pr;
}

/* Scores x (n rows of F, row-major) with the scalar, float-vector and
 * quantised-vector walks, in both layouts, at several row counts (lane and
 * block edges) and thread counts, and requires identical bits. Returns the
 * path the default predictor took. */
static int check_paths(const mr_gbdt_model *m, const float *x0, size_t n, size_t F)
{
    const int K = mr_gbdt_model_num_class(m);
    /* values at the model's own thresholds (as float, rounded down and
     * up), so the v <= threshold edge is exercised on every path */
    float *x = malloc(n * F * sizeof(float));
    memcpy(x, x0, n * F * sizeof(float));
    size_t r0 = 0;
    for (size_t t = 0; t < m->n_trees; t++)
        for (int i = 0; i + 1 < m->trees[t].n_leaves; i++, r0 += 2) {
            double th = m->trees[t].threshold[i];
            float f = (float)th;
            if ((double)f > th) f = nextafterf(f, -INFINITY);
            size_t j = (size_t)m->trees[t].split_feature[i];
            x[(r0 % n) * F + j] = f;
            x[((r0 + 1) % n) * F + j] = nextafterf(f, INFINITY);
        }
    mr_gbdt_predictor *ref = predictor_with_path(m, "0");
    assert_int_equal(mr__gbdt_predictor_path(ref), 0);
    /* float + AVX-512, default, quantised + AVX2 only, quantised scalar */
    mr_gbdt_predictor *alt[4] = {predictor_with_path(m, "1"), predictor_with_path(m, "2"), predictor_with_path(m, "a"),
                                 predictor_with_path(m, "q")};
    assert_true(mr__gbdt_predictor_path(alt[0]) <= 1); /* no quantised form under cap 1 */
    double *want = malloc(n * (size_t)K * sizeof(double)), *got = malloc(n * (size_t)K * sizeof(double));
    float *xc = malloc(n * F * sizeof(float));
    const size_t counts[] = {1, 7, 15, 16, 17, 31, 33, 47, 48, 49, 65, 100, 1000, n};
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t r = counts[ci] < n ? counts[ci] : n;
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < F; j++) xc[j * r + i] = x[i * F + j];
        for (int raw = 0; raw < 2; raw++) {
            assert_ok(mr_gbdt_predictor_batch(ref, x, r, MR_GBDT_ROW_MAJOR, raw, 1, want, NULL));
            for (int a = 0; a < 4; a++)
                for (int threads = 1; threads <= 3; threads += 2) {
                    memset(got, 0, r * (size_t)K * sizeof(double));
                    assert_ok(mr_gbdt_predictor_batch(alt[a], x, r, MR_GBDT_ROW_MAJOR, raw, threads, got, NULL));
                    assert_memory_equal(want, got, r * (size_t)K * sizeof(double));
                    memset(got, 0, r * (size_t)K * sizeof(double));
                    assert_ok(mr_gbdt_predictor_batch(alt[a], xc, r, MR_GBDT_COL_MAJOR, raw, threads, got, NULL));
                    assert_memory_equal(want, got, r * (size_t)K * sizeof(double));
                }
            /* the single-row entry point of every predictor, too */
            for (int a = 0; a < 4; a++)
                for (size_t i = 0; i < r; i += 1 + r / 50) {
                    mr_gbdt_predictor_row(alt[a], x + i * F, raw, got);
                    assert_memory_equal(want + i * (size_t)K, got, (size_t)K * sizeof(double));
                }
        }
    }
    int path = mr__gbdt_predictor_path(alt[1]);
    /* the AVX2-only predictor takes the quantised vector walk where it can */
    if (mr__gbdt_predictor_path(alt[1]) >= 2) {
        int avx2 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        avx2 = __builtin_cpu_supports("avx2");
#endif
        assert_int_equal(mr__gbdt_predictor_path(alt[2]), 2 + (avx2 != 0));
    }
    assert_int_equal(mr__gbdt_predictor_path(alt[3]) & 1, 0); /* "q": no vector walk */
    free(x);
    free(want);
    free(got);
    free(xc);
    mr_gbdt_predictor_free(ref);
    for (int a = 0; a < 4; a++) mr_gbdt_predictor_free(alt[a]);
    return path;
}

static void test_predict_paths_agree(void **state)
{
    (void)state;
    const size_t n = 3001, F = 6;
    int avx512 = 0, avx2 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f");
    avx2 = __builtin_cpu_supports("avx2");
#endif
    avx512 = avx512 != 0;
    avx2 = avx2 != 0;
    if (!avx512)
        print_message("no AVX-512 on this CPU: the float walk is scalar here, the quantised one %s\n",
                      avx2 ? "AVX2" : "scalar too");
    float *x, *y;
    make_binary(n, F, SEED + 7, &x, &y);
    /* scoring rows with NaN in every feature, infinities and values equal
     * to thresholds exercise default directions and the <= edge */
    float *xs = malloc(n * F * sizeof(float));
    memcpy(xs, x, n * F * sizeof(float));
    rng_state = SEED + 8;
    for (size_t i = 0; i < n * F; i++) {
        double u = urand();
        if (u < 0.03) xs[i] = NAN;
        else if (u < 0.04) xs[i] = u < 0.035 ? INFINITY : -INFINITY;
        else if (u < 0.10) xs[i] = x[(size_t)(urand() * (double)(n * F)) % (n * F)];
    }
    struct {
        const char *obj, *num_class, *max_bin;
        int want_path; /* 2 quantised, 0 float; +1 with a vector walk: AVX-512, or AVX2 for the quantised form */
    } cases[] = {
        {"binary", NULL, "255", 2},     /* fits the quantised walk */
        {"multiclass", "3", "255", 2},  /* K trees per iteration */
        {"regression", NULL, "255", 0}  /* on 260 features (> 256): the float walk */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        mr_gbdt_params p;
        mr_gbdt_params_init(&p);
        set(&p, "objective", cases[c].obj);
        if (cases[c].num_class) set(&p, "num_class", cases[c].num_class);
        set(&p, "num_iterations", "25");
        set(&p, "num_leaves", "63");
        set(&p, "min_data_in_leaf", "2");
        set(&p, "max_bin", cases[c].max_bin);
        const int wide = !strcmp(cases[c].obj, "regression");
        const size_t FW = wide ? 260 : F;
        float *xw = x, *yw = NULL;
        if (wide) make_binary(n, FW, SEED + 9, &xw, &yw);
        float *yy = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            yy[i] = cases[c].num_class ? (float)((size_t)(fabsf(x[i * F]) * 2) % 3)
                    : wide ? xw[i * FW] * 3 + xw[i * FW + 1] + xw[i * FW + 259] : y[i];
        mr_gbdt_data *d = bin_or_fail(xw, n, FW, yy, NULL, &p);
        mr_gbdt_model *m = train_or_fail(&p, d, NULL);
        int path = check_paths(m, wide ? xw : xs, n, FW);
        if (wide) {
            free(xw);
            free(yw);
        }
        mr_gbdt_params_deinit(&p);
        assert_int_equal(path, cases[c].want_path + (avx512 || (avx2 && cases[c].want_path == 2)));
        mr_gbdt_model_free(m);
        mr_gbdt_data_free(d);
        free(yy);
    }
    /* categorical splits: those trees take the scalar walk inside the
     * vector path, and the result is still the same */
    for (size_t i = 0; i < n; i++) x[i * F + 3] = (float)(i % 9);
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "15");
    set(&p, "categorical_feature", "3");
    for (size_t i = 0; i < n; i++) y[i] = (i % 9 == 2 || i % 9 == 5) ? 1.0f : y[i];
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    mr_gbdt_model *m = train_or_fail(&p, d, NULL);
    for (size_t i = 0; i < n; i++)
        if (!isnan(xs[i * F + 3])) xs[i * F + 3] = (float)(i % 11); /* includes unseen categories */
    int path = check_paths(m, xs, n, F);
    assert_int_equal(path, avx512); /* categorical: the float walks (no AVX2 one) */
    mr_gbdt_params_deinit(&p);
    mr_gbdt_model_free(m);
    mr_gbdt_data_free(d);
    free(x);
    free(y);
    free(xs);
}

/* A compiled predictor whose two branches share a child (a graph, not a
 * tree) is refused at load: walking it as a tree would visit the shared
 * part twice (found in review: the quantised layout overflowed). */
static void put32(unsigned char **w, uint32_t v)
{
    for (int i = 0; i < 4; i++) *(*w)++ = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char **w, uint64_t v)
{
    for (int i = 0; i < 8; i++) *(*w)++ = (unsigned char)(v >> (8 * i));
}
static void test_predictor_rejects_shared_children(void **state)
{
    (void)state;
    unsigned char buf[512], *w = buf;
    memcpy(w, "MRGP", 4);
    w += 4;
    put32(&w, 1);        /* version */
    put32(&w, 0);        /* objective */
    put32(&w, 1);        /* K */
    put64(&w, 1);        /* F */
    put64(&w, 1);        /* trees */
    put64(&w, 2);        /* nodes */
    put64(&w, 1);        /* leaves */
    put64(&w, 0);        /* categorical splits */
    put64(&w, 0);        /* bitset words */
    put64(&w, 0);        /* init score 0.0 */
    put32(&w, 0);        /* root of tree 0: node 0 */
    const float thr = 0.5f;
    uint32_t tb;
    memcpy(&tb, &thr, 4);
    put32(&w, tb);       /* node 0: both children are node 1 */
    put32(&w, 0);
    put32(&w, 1);
    put32(&w, 1);
    put32(&w, tb);       /* node 1: both children are leaf 0 */
    put32(&w, 0);
    put32(&w, (uint32_t)~0);
    put32(&w, (uint32_t)~0);
    put64(&w, 0);        /* exact thresholds */
    put64(&w, 0);
    put32(&w, 0);        /* categorical index per node */
    put32(&w, 0);
    put64(&w, 0);        /* leaf value */
    mr_gbdt_predictor *pr = NULL;
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_gbdt_predictor_from_bytes(buf, (size_t)(w - buf), &pr, &err), MR_E_CORRUPT);
    assert_null(pr);
    assert_non_null(strstr(err.msg, "another parent"));
}

/* ---- round trips and prediction consistency ---------------------------------------------- */

static void test_model_roundtrip_and_predict(void **state)
{
    (void)state;
    const size_t n = 5000, F = 5;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "20");
    set(&p, "max_depth", "6");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    mr_gbdt_model *m = train_or_fail(&p, d, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/mr_gbdt_test_XXXXXX", mr_test_tmpdir());
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_ok(mr_gbdt_model_save(m, path, NULL));
    mr_gbdt_model *m2 = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_gbdt_model_load(path, &m2, &err) != MR_OK) fail_msg("load: %s", err.msg);
    size_t l1, l2;
    char *b1 = model_bytes(m, &l1), *b2 = model_bytes(m2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(b1, b2, l1);
    double *p1 = malloc(n * sizeof(double)), *p2 = malloc(n * sizeof(double)), *p3 = malloc(n * sizeof(double));
    assert_ok(mr_gbdt_predict(m, x, n, MR_GBDT_ROW_MAJOR, 1, 0, p1, NULL));
    assert_ok(mr_gbdt_predict(m2, x, n, MR_GBDT_ROW_MAJOR, 1, 0, p2, NULL));
    assert_memory_equal(p1, p2, n * sizeof(double));
    /* raw-value thresholds agree with the bins the model was trained on */
    assert_ok(mr_gbdt_predict_binned(m, d, 1, 0, p3, NULL));
    assert_memory_equal(p1, p3, n * sizeof(double));
    /* single-row predictor and column-major batch agree too */
    mr_gbdt_predictor *pr = NULL;
    assert_ok(mr_gbdt_predictor_new(m2, 0, &pr, NULL));
    float *xc = malloc(n * F * sizeof(float));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < F; j++) xc[j * n + i] = x[i * F + j];
    assert_ok(mr_gbdt_predictor_batch(pr, xc, n, MR_GBDT_COL_MAJOR, 1, 0, p3, NULL));
    assert_memory_equal(p1, p3, n * sizeof(double));
    /* column-major input bins exactly like row-major input */
    mr_gbdt_data *dc = NULL;
    assert_ok(mr_gbdt_data_from_matrix(xc, n, F, MR_GBDT_COL_MAJOR, y, NULL, NULL, &p, &dc, NULL));
    assert_memory_equal(mr_gbdt_data_bins(dc), mr_gbdt_data_bins(d), n * F);
    mr_gbdt_data_free(dc);
    for (size_t i = 0; i < n; i += 97) {
        double v;
        mr_gbdt_predictor_row(pr, x + i * F, 1, &v);
        assert_true(v == p1[i]);
        mr_gbdt_predictor_row(pr, x + i * F, 0, &v);
        assert_true(fabs(v - 1 / (1 + exp(-p1[i]))) < 1e-15);
    }
    /* corruption is detected */
    char *data = NULL;
    size_t len = 0;
    assert_ok(mr_fs_read_file(path, 1 << 30, &data, &len, NULL));
    data[len / 2] ^= 0x5a;
    mr_gbdt_model *m3 = NULL;
    mr_error_clear(&err);
    assert_status(mr_gbdt_model_from_bytes(data, len, &m3, &err), MR_E_CORRUPT);
    assert_status(mr_gbdt_model_from_bytes(data, 10, &m3, NULL), MR_E_CORRUPT);
    /* JSON dump mentions features and trees */
    mr_buf js;
    mr_buf_init(&js);
    assert_ok(mr_gbdt_model_dump_json(m, &js, NULL));
    assert_non_null(strstr(js.data, "\"trees\":["));
    assert_non_null(strstr(js.data, "\"split_gain\""));
    mr_buf_free(&js);
    mr_free(data);
    unlink(path);
    mr_gbdt_predictor_free(pr);
    free(b1);
    free(b2);
    free(p1);
    free(p2);
    free(p3);
    free(xc);
    mr_gbdt_model_free(m);
    mr_gbdt_model_free(m2);
    mr_gbdt_data_free(d);
    free(x);
    free(y);
}

static void test_binned_roundtrip(void **state)
{
    (void)state;
    const size_t n = 2000, F = 3;
    float *x, *y;
    make_binary(n, F, SEED, &x, &y);
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "categorical_feature", "1");
    for (size_t i = 0; i < n; i++) x[i * F + 1] = (float)(i % 7);
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    assert_true(mr_gbdt_data_is_categorical(d, 1));
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_gbdt_data_to_bytes(d, &b, NULL));
    mr_gbdt_data *d2 = NULL;
    assert_ok(mr_gbdt_data_from_bytes(b.data, b.len, &d2, NULL));
    mr_buf b2;
    mr_buf_init(&b2);
    assert_ok(mr_gbdt_data_to_bytes(d2, &b2, NULL));
    assert_int_equal(b.len, b2.len);
    assert_memory_equal(b.data, b2.data, b.len);
    b.data[b.len - 20] ^= 1;
    mr_gbdt_data *d3 = NULL;
    assert_status(mr_gbdt_data_from_bytes(b.data, b.len, &d3, NULL), MR_E_CORRUPT);
    mr_buf_free(&b);
    mr_buf_free(&b2);
    mr_gbdt_data_free(d);
    mr_gbdt_data_free(d2);
    mr_gbdt_params_deinit(&p);
    free(x);
    free(y);
}

/* ---- categorical splits ---------------------------------------------------------------- */

static void test_categorical(void **state)
{
    (void)state;
    /* y depends on whether a 30-level category is in a scattered set: one
     * category-set split finds it; numeric splits on the codes would need many. */
    const size_t n = 20000, F = 2;
    rng_state = SEED;
    float *x = malloc(n * F * sizeof(float)), *y = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        int c = (int)(urand() * 30);
        x[i * F] = (float)(c * 3 + 1000); /* sparse, large codes */
        x[i * F + 1] = (float)nrand();
        int in = (c * 7) % 5 == 0 || c == 13;
        y[i] = urand() < (in ? 0.9 : 0.1);
    }
    x[5 * F] = NAN; /* a missing category */
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "5");
    set(&p, "num_leaves", "3");
    set(&p, "categorical_feature", "0");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    mr_gbdt_model *m = train_or_fail(&p, d, NULL);
    assert_true(mr_gbdt_model_feature_is_categorical(m, 0));
    double *pr = malloc(n * sizeof(double)), *pb = malloc(n * sizeof(double));
    assert_ok(mr_gbdt_predict(m, x, n, MR_GBDT_ROW_MAJOR, 0, 0, pr, NULL));
    assert_ok(mr_gbdt_predict_binned(m, d, 0, 0, pb, NULL));
    assert_memory_equal(pr, pb, n * sizeof(double));
    double errs = 0;
    for (size_t i = 0; i < n; i++) errs += (pr[i] > 0.5) != (y[i] > 0.5);
    assert_true(errs / n < 0.12); /* Bayes error is 0.1 */
    /* unseen and negative codes go the default way without crashing */
    float row[2] = {123456.0f, 0.0f}, row2[2] = {-3.0f, 0.0f};
    double a, b;
    assert_ok(mr_gbdt_predict(m, row, 1, MR_GBDT_ROW_MAJOR, 0, 0, &a, NULL));
    assert_ok(mr_gbdt_predict(m, row2, 1, MR_GBDT_ROW_MAJOR, 0, 0, &b, NULL));
    assert_true(a == b);
    free(pr);
    free(pb);
    mr_gbdt_model_free(m);
    mr_gbdt_data_free(d);
    mr_gbdt_params_deinit(&p);
    free(x);
    free(y);
}

/* ---- params ------------------------------------------------------------------------------ */

static void test_params(void **state)
{
    (void)state;
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "n_estimators", "250");
    assert_int_equal(p.num_iterations, 250);
    set(&p, "eta", "0.05");
    assert_true(p.learning_rate == 0.05);
    set(&p, "max_leaves", "127");
    assert_int_equal(p.num_leaves, 127);
    set(&p, "min_child_samples", "7");
    assert_int_equal(p.min_data_in_leaf, 7);
    set(&p, "reg_lambda", "2.5");
    assert_true(p.lambda_l2 == 2.5);
    set(&p, "reg_alpha", "0.5");
    assert_true(p.lambda_l1 == 0.5);
    set(&p, "subsample", "0.8");
    set(&p, "colsample_bytree", "0.6");
    assert_true(p.bagging_fraction == 0.8 && p.feature_fraction == 0.6);
    set(&p, "objective", "multiclass");
    set(&p, "num_class", "3");
    set(&p, "metric", "multi_logloss,multi_error");
    assert_int_equal(p.n_metrics, 2);
    assert_ok(mr_gbdt_params_validate(&p, NULL));
    set(&p, "NUM_BOOST_ROUND", "9");
    assert_int_equal(p.num_iterations, 9);
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_gbdt_params_set_text(&p, "learning_rat", "0.1", &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.hint, "learning_rate"));
    mr_error_clear(&err);
    assert_status(mr_gbdt_params_set_text(&p, "num_leaves", "many", &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "integer"));
    mr_error_clear(&err);
    assert_status(mr_gbdt_params_set_text(&p, "bagging_fraction", "1.5", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    assert_status(mr_gbdt_params_set_text(&p, "objective", "binay", &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.hint, "binary"));
    mr_error_clear(&err);
    assert_status(mr_gbdt_params_set_text(&p, "max_bin", "1000", &err), MR_E_INVALID_ARG);
    set(&p, "objective", "binary");
    assert_status(mr_gbdt_params_validate(&p, NULL), MR_E_INVALID_ARG); /* num_class 3 */
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_gbdt_params_to_text(&p, &b));
    assert_non_null(strstr(b.data, "learning_rate=0.050000000000000003"));
    assert_null(strstr(b.data, "num_threads"));
    mr_buf_free(&b);
    mr_gbdt_params_deinit(&p);
}

/* ---- accuracy sanity: multiclass, regression ---------------------------------------------- */

static void test_multiclass_and_regression(void **state)
{
    (void)state;
    const size_t n = 6000, F = 3;
    rng_state = SEED;
    float *x = malloc(n * F * sizeof(float)), *y = malloc(n * sizeof(float)), *yr = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < F; j++) x[i * F + j] = (float)nrand();
        y[i] = (float)((x[i * F] > 0) + 2 * (x[i * F + 1] > 0.5)); /* 4 classes */
        yr[i] = (float)(sin(2 * x[i * F]) + x[i * F + 1] * x[i * F + 2] + 0.1 * nrand());
    }
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "multiclass");
    set(&p, "num_class", "4");
    set(&p, "num_iterations", "30");
    mr_gbdt_data *d = bin_or_fail(x, n, F, y, NULL, &p);
    mr_gbdt_model *m = train_or_fail(&p, d, NULL);
    assert_int_equal(mr_gbdt_model_num_trees(m), 120);
    double *pr = malloc(n * 4 * sizeof(double));
    assert_ok(mr_gbdt_predict(m, x, n, MR_GBDT_ROW_MAJOR, 0, 0, pr, NULL));
    double errs = 0;
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        double s = 0;
        for (int c = 0; c < 4; c++) {
            s += pr[i * 4 + c];
            if (pr[i * 4 + c] > pr[i * 4 + best]) best = c;
        }
        assert_true(fabs(s - 1) < 1e-9);
        errs += best != (int)y[i];
    }
    assert_true(errs / n < 0.02);
    mr_gbdt_model_free(m);
    mr_gbdt_data_free(d);
    /* regression: L2 and huber both fit well below the label's spread */
    const char *objs[] = {"regression", "huber", "regression_l1"};
    for (int o = 0; o < 3; o++) {
        mr_gbdt_params_init(&p);
        set(&p, "objective", objs[o]);
        set(&p, "num_iterations", "100");
        if (o == 1) set(&p, "alpha", "1.0");
        d = bin_or_fail(x, n, F, yr, NULL, &p);
        m = train_or_fail(&p, d, NULL);
        assert_ok(mr_gbdt_predict(m, x, n, MR_GBDT_ROW_MAJOR, 0, 0, pr, NULL));
        double se = 0, var = 0, mean = 0;
        for (size_t i = 0; i < n; i++) mean += yr[i];
        mean /= n;
        for (size_t i = 0; i < n; i++) {
            se += (pr[i] - yr[i]) * (pr[i] - yr[i]);
            var += (yr[i] - mean) * (yr[i] - mean);
        }
        if (!(se / var < 0.2)) fail_msg("%s: R^2 too low (mse/var %g)", objs[o], se / var);
        mr_gbdt_model_free(m);
        mr_gbdt_data_free(d);
    }
    free(pr);
    free(x);
    free(y);
    free(yr);
}

/* ---- table input -------------------------------------------------------------------------- */

static void test_from_table(void **state)
{
    (void)state;
    const size_t n = 3000;
    mr_table *t = NULL;
    assert_ok(mr_table_new(&t, NULL));
    mr_column *a, *b, *c, *lab;
    assert_ok(mr_column_new("a", MR_T_FLOAT64, n, &a, NULL));
    assert_ok(mr_column_new("b", MR_T_INT64, n, &b, NULL));
    assert_ok(mr_column_new("c", MR_T_BOOL, n, &c, NULL));
    assert_ok(mr_column_new("y", MR_T_INT64, n, &lab, NULL));
    rng_state = SEED;
    for (size_t i = 0; i < n; i++) {
        double av = nrand();
        int64_t bv = (int64_t)(urand() * 6);
        int cv = urand() < 0.5;
        if (i % 50 == 0)
            assert_ok(mr_column_append_null(a));
        else
            assert_ok(mr_column_append_float64(a, av));
        assert_ok(mr_column_append_int64(b, bv));
        assert_ok(mr_column_append_bool(c, cv));
        assert_ok(mr_column_append_int64(lab, (av > 0) ^ (bv == 2 || bv == 4)));
    }
    assert_ok(mr_table_add_column(t, a, NULL));
    assert_ok(mr_table_add_column(t, b, NULL));
    assert_ok(mr_table_add_column(t, c, NULL));
    assert_ok(mr_table_add_column(t, lab, NULL));
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "num_iterations", "20");
    const char *cats[] = {"b"};
    mr_gbdt_table_spec spec = {.label = "y", .categorical = cats, .n_categorical = 1};
    mr_gbdt_data *d = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_gbdt_data_from_table(t, &spec, NULL, &p, &d, &err) != MR_OK) fail_msg("%s", err.msg);
    assert_int_equal(mr_gbdt_data_features(d), 3);
    assert_string_equal(mr_gbdt_data_feature_name(d, 1), "b");
    assert_true(mr_gbdt_data_is_categorical(d, 1));
    mr_gbdt_model *m = train_or_fail(&p, d, NULL);
    double *pr = malloc(n * sizeof(double));
    assert_ok(mr_gbdt_predict_binned(m, d, 0, 0, pr, NULL));
    double errs = 0;
    for (size_t i = 0; i < n; i++) errs += (pr[i] > 0.5) != (mr_gbdt_data_label(d)[i] > 0.5);
    assert_true(errs / n < 0.05);
    /* a misspelt label column gets a hint */
    spec.label = "yy";
    mr_gbdt_data *d2 = NULL;
    mr_error_clear(&err);
    assert_status(mr_gbdt_data_from_table(t, &spec, NULL, &p, &d2, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.hint, "y"));
    free(pr);
    mr_gbdt_model_free(m);
    mr_gbdt_data_free(d);
    mr_table_free(t);
}

/* The binned bytes of d, for comparing two builds. */
static mr_buf binned_bytes(const mr_gbdt_data *d)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_gbdt_data_to_bytes(d, &b, NULL));
    return b;
}

/* Both passes of a stream over t cut into uneven batches (a 0-row one
 * first), against reference ref (NULL: edges from the sample). */
static mr_status stream_over(const mr_table *t, const mr_gbdt_table_spec *spec, const mr_gbdt_data *ref,
                             const mr_gbdt_params *p, size_t announce, mr_gbdt_data **out, mr_error *err)
{
    static const size_t cuts[] = {0, 1, 700, 13, 1000, 4096};
    mr_table *schema = NULL;
    mr_status rc = mr_table_slice(t, 0, 0, &schema, err);
    if (rc != MR_OK) return rc;
    mr_gbdt_stream *s = NULL;
    rc = mr_gbdt_stream_open(schema, announce, spec, ref, p, &s, err);
    mr_table_free(schema);
    for (int pass = rc == MR_OK && mr_gbdt_stream_wants_sample(s) ? 0 : 1; rc == MR_OK && pass < 2; pass++) {
        for (size_t at = 0, k = 0; rc == MR_OK && at < t->n_rows; k++) {
            size_t len = cuts[k % (sizeof(cuts) / sizeof(cuts[0]))];
            if (len > t->n_rows - at) len = t->n_rows - at;
            mr_table *b = NULL;
            rc = mr_table_slice(t, at, at + len, &b, err);
            if (rc == MR_OK) rc = pass == 0 ? mr_gbdt_stream_sample(s, b, err) : mr_gbdt_stream_bin(s, b, err);
            mr_table_free(b);
            at += len;
        }
    }
    if (rc == MR_OK) rc = mr_gbdt_stream_finish(s, out, err);
    mr_gbdt_stream_free(s);
    return rc;
}

/* A table binned from batches in two passes is the table binned whole,
 * byte for byte, with the seeded sample smaller than the table (so the
 * sample rows fall in many batches), categorical and null values, and a
 * reference; batches that do not add up to the announced rows fail. */
static void test_stream_equals_table(void **state)
{
    (void)state;
    const size_t n = 9000;
    mr_table *t = NULL;
    assert_ok(mr_table_new(&t, NULL));
    mr_column *a, *b, *c, *lab;
    assert_ok(mr_column_new("a", MR_T_FLOAT64, n, &a, NULL));
    assert_ok(mr_column_new("b", MR_T_INT64, n, &b, NULL));
    assert_ok(mr_column_new("c", MR_T_FLOAT32, n, &c, NULL));
    assert_ok(mr_column_new("y", MR_T_INT64, n, &lab, NULL));
    rng_state = SEED;
    for (size_t i = 0; i < n; i++) {
        double av = nrand();
        int64_t bv = (int64_t)(urand() * 9);
        if (i % 37 == 0) assert_ok(mr_column_append_null(a));
        else assert_ok(mr_column_append_float64(a, av));
        assert_ok(mr_column_append_int64(b, bv));
        assert_ok(mr_column_append_float32(c, (float)(urand() * 100)));
        assert_ok(mr_column_append_int64(lab, (av > 0) ^ (bv == 2)));
    }
    assert_ok(mr_table_add_column(t, a, NULL));
    assert_ok(mr_table_add_column(t, b, NULL));
    assert_ok(mr_table_add_column(t, c, NULL));
    assert_ok(mr_table_add_column(t, lab, NULL));
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "binary");
    set(&p, "bin_construct_sample_cnt", "1500");
    set(&p, "max_bin", "63");
    const char *cats[] = {"b"};
    mr_gbdt_table_spec spec = {.label = "y", .categorical = cats, .n_categorical = 1};
    mr_error err;
    mr_error_init(&err);
    mr_gbdt_data *whole = NULL, *streamed = NULL, *vwhole = NULL, *vstreamed = NULL, *bad = NULL;
    assert_ok(mr_gbdt_data_from_table(t, &spec, NULL, &p, &whole, &err));
    if (stream_over(t, &spec, NULL, &p, n, &streamed, &err) != MR_OK) fail_msg("%s", err.msg);
    mr_buf x = binned_bytes(whole), y = binned_bytes(streamed);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    mr_buf_free(&x);
    mr_buf_free(&y);
    /* validation data binned against the training edges: one pass */
    assert_ok(mr_gbdt_data_from_table(t, &spec, whole, &p, &vwhole, &err));
    assert_ok(stream_over(t, &spec, whole, &p, n, &vstreamed, &err));
    x = binned_bytes(vwhole);
    y = binned_bytes(vstreamed);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    mr_buf_free(&x);
    mr_buf_free(&y);
    /* more rows than announced, and fewer */
    assert_status(stream_over(t, &spec, NULL, &p, n - 1, &bad, &err), MR_E_STATE);
    mr_error_clear(&err);
    assert_status(stream_over(t, &spec, NULL, &p, n + 1, &bad, &err), MR_E_STATE);
    assert_null(bad);
    mr_gbdt_data_free(whole);
    mr_gbdt_data_free(streamed);
    mr_gbdt_data_free(vwhole);
    mr_gbdt_data_free(vstreamed);
    mr_gbdt_params_deinit(&p);
    mr_table_free(t);
}

/* The model bytes of training on path binned while read, and (want_streamed
 * checked) on the table read whole; both must be equal. */
static void train_file_vs_table(const char *path, const mr_value *params, int want_streamed)
{
    static const char *const exclude[] = {"note"};
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.label = "y";
    o.params = params;
    o.exclude = exclude;
    o.n_exclude = 1;
    o.fast_metrics = 0;
    mr_error err;
    mr_error_init(&err);
    mr_model *a = NULL, *b = NULL;
    mr_table *t = NULL;
    uint64_t failed0 = mr_alloc_fault_failed();
    assert_ok(mr_model_train_file(path, NULL, &o, &a, &err));
    /* an injected allocation failure while streaming falls back to the table */
    if (mr_alloc_fault_failed() == failed0) assert_int_equal(o.streamed, want_streamed);
    size_t rows = o.train_rows;
    assert_ok(mr_table_read_file(path, &t, &err));
    assert_int_equal(rows, t->n_rows);
    assert_ok(mr_model_train(t, NULL, &o, &b, &err));
    mr_buf x, y;
    mr_buf_init(&x);
    mr_buf_init(&y);
    assert_ok(mr_model_to_bytes(a, &x, &err));
    assert_ok(mr_model_to_bytes(b, &y, &err));
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    mr_buf_free(&x);
    mr_buf_free(&y);
    mr_model_free(a);
    mr_model_free(b);
    mr_table_free(t);
}

/* mr_model_train_file: a CSV (quoted newlines, CRLF, a blank line) and
 * JSON lines of the same data, binned while read with a sample smaller
 * than the data, train the table's model byte for byte; a CSV column the
 * streaming reader typed int64 from its first 10,000 rows that a later
 * 2.5 does not fit falls back to the table, with the same model. */
static void test_train_file_equals_table(void **state)
{
    (void)state;
    char csv[4096], jsonl[4096], late[4096];
    snprintf(csv, sizeof csv, "%s/mr_tf_%ld.csv", mr_test_tmpdir(), (long)getpid());
    snprintf(jsonl, sizeof jsonl, "%s/mr_tf_%ld.jsonl", mr_test_tmpdir(), (long)getpid());
    snprintf(late, sizeof late, "%s/mr_tf_late_%ld.csv", mr_test_tmpdir(), (long)getpid());
    FILE *fc = fopen(csv, "wb"), *fj = fopen(jsonl, "wb"), *fl = fopen(late, "wb");
    assert_non_null(fc);
    assert_non_null(fj);
    assert_non_null(fl);
    fputs("a,b,note,y\r\n", fc);
    fputs("a,k,note,y\n", fl);
    rng_state = SEED;
    for (int i = 0; i < 10500; i++) {
        double av = nrand();
        int bv = (int)(urand() * 5);
        int yv = (av > 0) ^ (bv == 3);
        if (i < 3000) {
            fprintf(fc, "%.6f,%d,%s,%d\r\n", av, bv, i % 7 ? "plain" : "\"two\nlines, \"\"q\"\"\"", yv);
            if (i == 1500) fputs("\r\n", fc);
            fprintf(fj, "{\"a\": %.6f, \"b\": %d, \"note\": \"n\", \"y\": %d}\n", av, bv, yv);
        }
        if (i == 10200) fprintf(fl, "%.6f,2.5,x,%d\n", av, yv);
        else fprintf(fl, "%.6f,%d,x,%d\n", av, bv, yv);
    }
    fclose(fc);
    fclose(fj);
    fclose(fl);
    mr_value *params = mr_value_new(MR_V_MAP);
    assert_alloc(params);
    assert_ok(mr_value_map_set(params, "objective", mr_value_from_scalar("binary", 0)));
    assert_ok(mr_value_map_set(params, "num_iterations", mr_value_from_scalar("5", 0)));
    assert_ok(mr_value_map_set(params, "bin_construct_sample_cnt", mr_value_from_scalar("500", 0)));
    train_file_vs_table(csv, params, 1);
    train_file_vs_table(jsonl, params, 1);
    train_file_vs_table(late, params, 0);
    mr_value_free(params);
    unlink(csv);
    unlink(jsonl);
    unlink(late);
}

/* A DECIMAL feature and label train exactly the model their float64 values
 * do: the same bytes. */
static void test_decimal_columns(void **state)
{
    (void)state;
    const size_t n = 2000;
    mr_table *td = NULL, *tf = NULL;
    assert_ok(mr_table_new(&td, NULL));
    assert_ok(mr_table_new(&tf, NULL));
    mr_column *xd, *yd, *xf, *yf;
    assert_ok(mr_column_new("x", MR_T_DECIMAL, n, &xd, NULL));
    assert_ok(mr_column_new("y", MR_T_DECIMAL, n, &yd, NULL));
    assert_ok(mr_column_new("x", MR_T_FLOAT64, n, &xf, NULL));
    assert_ok(mr_column_new("y", MR_T_FLOAT64, n, &yf, NULL));
    xd->kind = (mr_colkind){.precision = 12, .scale = 3};
    yd->kind = (mr_colkind){.precision = 6, .scale = 2};
    rng_state = SEED;
    for (size_t i = 0; i < n; i++) {
        int64_t xu = (int64_t)(nrand() * 1e6), yu = (int64_t)(xu / 1000 % 500) + (int64_t)(urand() * 20);
        if (i % 97 == 0) {
            assert_ok(mr_column_append_null(xd));
            assert_ok(mr_column_append_null(xf));
        } else {
            assert_ok(mr_column_append_int64(xd, xu));
            assert_ok(mr_column_append_float64(xf, mr_decimal_to_f64(xu, 3)));
        }
        assert_ok(mr_column_append_int64(yd, yu));
        assert_ok(mr_column_append_float64(yf, mr_decimal_to_f64(yu, 2)));
    }
    assert_ok(mr_table_add_column(td, xd, NULL));
    assert_ok(mr_table_add_column(td, yd, NULL));
    assert_ok(mr_table_add_column(tf, xf, NULL));
    assert_ok(mr_table_add_column(tf, yf, NULL));
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    set(&p, "objective", "regression");
    set(&p, "num_iterations", "15");
    mr_gbdt_table_spec spec = {.label = "y"};
    mr_gbdt_data *dd = NULL, *df = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_gbdt_data_from_table(td, &spec, NULL, &p, &dd, &err) != MR_OK) fail_msg("%s", err.msg);
    if (mr_gbdt_data_from_table(tf, &spec, NULL, &p, &df, &err) != MR_OK) fail_msg("%s", err.msg);
    mr_gbdt_model *md = train_or_fail(&p, dd, NULL), *mf = train_or_fail(&p, df, NULL);
    assert_int_equal(mr_gbdt_model_num_trees(md), 15); /* a real model, not a constant */
    mr_buf bd, bf;
    mr_buf_init(&bd);
    mr_buf_init(&bf);
    assert_ok(mr_gbdt_model_to_bytes(md, &bd, NULL));
    assert_ok(mr_gbdt_model_to_bytes(mf, &bf, NULL));
    assert_int_equal(bd.len, bf.len);
    assert_memory_equal(bd.data, bf.data, bd.len);
    mr_buf_free(&bd);
    mr_buf_free(&bf);
    mr_gbdt_model_free(md);
    mr_gbdt_model_free(mf);
    mr_gbdt_data_free(dd);
    mr_gbdt_data_free(df);
    mr_table_free(td);
    mr_table_free(tf);
}

int main(void)
{
    mr_pool_init(4, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_objective_gradients),
        cmocka_unit_test(test_hc_packing),
        cmocka_unit_test(test_bin_numeric_search),
        cmocka_unit_test(test_hist_parallel_and_subtraction),
        cmocka_unit_test(test_sort_doubles),
        cmocka_unit_test(test_split_bruteforce),
        cmocka_unit_test(test_reproducible_across_threads),
        cmocka_unit_test(test_early_stopping_curve),
        cmocka_unit_test(test_early_stopping_training),
        cmocka_unit_test(test_nan_label_names_row),
        cmocka_unit_test(test_divergence_is_an_error),
        cmocka_unit_test(test_degenerate_features_and_labels),
        cmocka_unit_test(test_model_roundtrip_and_predict),
        cmocka_unit_test(test_predict_paths_agree),
        cmocka_unit_test(test_predictor_rejects_shared_children),
        cmocka_unit_test(test_binned_roundtrip),
        cmocka_unit_test(test_categorical),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_multiclass_and_regression),
        cmocka_unit_test(test_from_table),
        cmocka_unit_test(test_stream_equals_table),
        cmocka_unit_test(test_train_file_equals_table),
        cmocka_unit_test(test_decimal_columns),
    };
    int rc = mr_test_run(tests, NULL, NULL);
    mr_pool_shutdown();
    return rc;
}
