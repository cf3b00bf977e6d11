/* Unit tests for src/ml/linear.c: recovery of known weights (least squares
 * and logistic), L1 sparsity, missing values, round trip, byte-identical
 * fits across thread counts, label errors; and the accuracy sanity check
 * that GBDT beats the linear baseline by a wide AUC margin on a nonlinear
 * problem. Seeds are fixed and printed on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/gbdt.h"
#include "millrace/linear.h"
#include "ml/gbdt/gbdt_int.h"

#define SEED 4242u

static uint64_t rs;
static double urand(void) { return mr_u01(mr_splitmix64(&rs)); }
static double nrand(void)
{
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static mr_linear_model *fit(const mr_linear_params *p, const float *x, size_t n, size_t d, const float *y)
{
    mr_error err;
    mr_error_init(&err);
    mr_linear_model *m = NULL;
    if (mr_linear_train(p, x, n, d, MR_GBDT_ROW_MAJOR, y, NULL, &m, &err) != MR_OK) fail_msg("fit: %s", err.msg);
    return m;
}

static void test_least_squares_recovers_weights(void **state)
{
    (void)state;
    const size_t n = 20000, d = 4;
    rs = SEED;
    float *x = malloc(n * d * sizeof(float)), *y = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++) x[i * d + j] = (float)(nrand() * (j + 1) + j);
        y[i] = (float)(1.0 + 2.0 * x[i * d] - 3.0 * x[i * d + 1] + 0.5 * x[i * d + 2] + 0.01 * nrand());
    }
    mr_linear_params p;
    mr_linear_params_init(&p);
    p.lambda_l2 = 0;
    mr_linear_model *m = fit(&p, x, n, d, y);
    const double want[] = {2.0, -3.0, 0.5, 0.0};
    for (size_t j = 0; j < d; j++)
        if (fabs(mr_linear_model_weight(m, j) - want[j]) > 1e-3)
            fail_msg("w[%zu] = %g, want %g (seed %u)", j, mr_linear_model_weight(m, j), want[j], SEED);
    assert_true(fabs(mr_linear_model_intercept(m) - 1.0) < 1e-2);
    mr_linear_model_free(m);
    /* L1: the irrelevant feature gets exactly zero */
    p.lambda_l1 = 0.05;
    m = fit(&p, x, n, d, y);
    assert_true(mr_linear_model_weight(m, 3) == 0.0);
    assert_true(fabs(mr_linear_model_weight(m, 0) - 2.0) < 0.1);
    mr_linear_model_free(m);
    free(x);
    free(y);
}

static void test_logistic_recovers_weights(void **state)
{
    (void)state;
    const size_t n = 100000, d = 3;
    rs = SEED + 1;
    float *x = malloc(n * d * sizeof(float)), *y = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++) x[i * d + j] = (float)nrand();
        double eta = -0.5 + 1.5 * x[i * d] - 1.0 * x[i * d + 1];
        if (i % 100 == 0) x[i * d + 2] = NAN; /* missing: imputed, irrelevant anyway */
        y[i] = urand() < 1 / (1 + exp(-eta));
    }
    mr_linear_params p;
    mr_linear_params_init(&p);
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_linear_params_set_text(&p, "objective", "binary", &err));
    assert_ok(mr_linear_params_set_text(&p, "reg_lambda", "0", &err));
    assert_status(mr_linear_params_set_text(&p, "lamda_l2", "0", &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.hint, "lambda_l2"));
    mr_linear_model *m = fit(&p, x, n, d, y);
    const double want[] = {1.5, -1.0, 0.0};
    for (size_t j = 0; j < d; j++)
        if (fabs(mr_linear_model_weight(m, j) - want[j]) > 0.05)
            fail_msg("w[%zu] = %g, want %g (seed %u)", j, mr_linear_model_weight(m, j), want[j], SEED + 1);
    assert_true(fabs(mr_linear_model_intercept(m) + 0.5) < 0.05);
    assert_true(mr_linear_model_iterations(m) < 20);
    /* round trip */
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_linear_model_to_bytes(m, &b, NULL));
    mr_linear_model *m2 = NULL;
    assert_ok(mr_linear_model_from_bytes(b.data, b.len, &m2, NULL));
    double *p1 = malloc(n * sizeof(double)), *p2 = malloc(n * sizeof(double));
    assert_ok(mr_linear_predict(m, x, n, MR_GBDT_ROW_MAJOR, 0, p1, NULL));
    assert_ok(mr_linear_predict(m2, x, n, MR_GBDT_ROW_MAJOR, 0, p2, NULL));
    assert_memory_equal(p1, p2, n * sizeof(double));
    assert_true(p1[7] == mr_linear_predict_row(m, x + 7 * d, 0));
    b.data[12] ^= 1;
    mr_linear_model *m3 = NULL;
    assert_status(mr_linear_model_from_bytes(b.data, b.len, &m3, NULL), MR_E_CORRUPT);
    mr_buf_free(&b);
    /* byte-identical across thread counts */
    mr_buf ref;
    mr_buf_init(&ref);
    assert_ok(mr_linear_model_to_bytes(m, &ref, NULL));
    int th[] = {1, 2, 3};
    for (int t = 0; t < 3; t++) {
        p.num_threads = th[t];
        mr_linear_model *mt = fit(&p, x, n, d, y);
        mr_buf bb;
        mr_buf_init(&bb);
        assert_ok(mr_linear_model_to_bytes(mt, &bb, NULL));
        assert_int_equal(bb.len, ref.len);
        assert_memory_equal(bb.data, ref.data, ref.len);
        mr_buf_free(&bb);
        mr_linear_model_free(mt);
    }
    mr_buf_free(&ref);
    /* NaN label */
    y[99] = NAN;
    mr_linear_model *bad = NULL;
    mr_error_clear(&err);
    assert_status(mr_linear_train(&p, x, n, d, MR_GBDT_ROW_MAJOR, y, NULL, &bad, &err), MR_E_INVALID_ARG);
    assert_int_equal(err.row, 100);
    free(p1);
    free(p2);
    mr_linear_model_free(m);
    mr_linear_model_free(m2);
    free(x);
    free(y);
}

static double auc(const float *y, const double *s, size_t n)
{
    /* O(n^2)-free: count via sorting ranks with the library's AUC */
    double a = NAN;
    assert_ok(mr__auc(y, s, n, &a));
    return a;
}

/* GBDT vs the linear baseline on an interaction-heavy problem: a linear
 * model is near chance; GBDT must be far above it (held-out data). */
static void test_gbdt_beats_linear(void **state)
{
    (void)state;
    const size_t n = 20000, d = 4;
    rs = SEED + 2;
    float *x = malloc(2 * n * d * sizeof(float)), *y = malloc(2 * n * sizeof(float));
    for (size_t i = 0; i < 2 * n; i++) {
        for (size_t j = 0; j < d; j++) x[i * d + j] = (float)nrand();
        double f = 2.5 * (x[i * d] * x[i * d + 1] > 0 ? 1 : -1) + 1.5 * (fabs(x[i * d + 2]) < 0.7) - 0.75;
        y[i] = urand() < 1 / (1 + exp(-f));
    }
    const float *xt = x + n * d, *yt = y + n;
    mr_linear_params lp;
    mr_linear_params_init(&lp);
    lp.objective = MR_LINEAR_LOGISTIC;
    mr_linear_model *lm = fit(&lp, x, n, d, y);
    double *pl = malloc(n * sizeof(double)), *pg = malloc(n * sizeof(double));
    mr_linear_predict(lm, xt, n, MR_GBDT_ROW_MAJOR, 1, pl, NULL);
    mr_gbdt_params gp;
    mr_gbdt_params_init(&gp);
    gp.objective = MR_GBDT_BINARY;
    gp.num_iterations = 60;
    mr_gbdt_data *dtr = NULL;
    assert_ok(mr_gbdt_data_from_matrix(x, n, d, MR_GBDT_ROW_MAJOR, y, NULL, NULL, &gp, &dtr, NULL));
    mr_gbdt_model *gm = NULL;
    assert_ok(mr_gbdt_train(&gp, dtr, NULL, NULL, NULL, &gm, NULL));
    assert_ok(mr_gbdt_predict(gm, xt, n, MR_GBDT_ROW_MAJOR, 1, 0, pg, NULL));
    double a_lin = auc(yt, pl, n), a_gbdt = auc(yt, pg, n);
    if (!(a_gbdt > a_lin + 0.15 && a_gbdt > 0.8))
        fail_msg("AUC gbdt %.4f vs linear %.4f (seed %u)", a_gbdt, a_lin, SEED + 2);
    free(pl);
    free(pg);
    mr_linear_model_free(lm);
    mr_gbdt_model_free(gm);
    mr_gbdt_data_free(dtr);
    free(x);
    free(y);
}

int main(void)
{
    mr_pool_init(4, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_least_squares_recovers_weights),
        cmocka_unit_test(test_logistic_recovers_weights),
        cmocka_unit_test(test_gbdt_beats_linear),
    };
    int rc = mr_test_run(tests, NULL, NULL);
    mr_pool_shutdown();
    return rc;
}
