/* Unit tests for model properties (src/ml/check.c): for each property a
 * crafted scorer that violates it is caught, and a well-behaved scorer
 * passes; settings are validated. Data are fixed (splitmix64, seed 11). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <string.h>

#include "millrace/check.h"

#define N 300
#define F 3
static float X[N * F];

static uint64_t rs = 11;
static double urand(void)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < N; i++) {
        X[i * F + 0] = (float)(4 * urand() - 2);      /* the signal */
        X[i * F + 1] = urand() < 0.5 ? 0.0f : 1.0f;   /* a 0/1 flag */
        X[i * F + 2] = (float)(100 * urand());        /* an id-like column */
    }
    return 0;
}

typedef enum { GOOD, BAD_BATCH, BAD_THREADS, BAD_MONO, BAD_INVAR, BAD_ROBUST, BAD_DIR } kind;

static mr_status score(void *ctx, const float *x, size_t n, int threads, double *out, mr_error *err)
{
    (void)err;
    kind k = *(const kind *)ctx;
    for (size_t i = 0; i < n; i++) {
        const float *r = x + i * F;
        double z = 1.5 * r[0] + 0.8 * r[1];
        double s = 1 / (1 + exp(-z));
        switch (k) {
        case GOOD: break;
        case BAD_BATCH: s += n == 1 ? 1e-7 : 0; break;          /* the row path differs */
        case BAD_THREADS: s += threads > 1 ? 1e-9 * i : 0; break; /* threads change the sums */
        case BAD_MONO: s = 0.5 + 0.4 * sin(3 * r[0]); break;
        case BAD_INVAR: s += 0.001 * r[2]; break;              /* leaks the id column */
        case BAD_ROBUST: s = 0.5 + 0.5 * sin(2000 * r[0]); break;
        case BAD_DIR: s = 1 / (1 + exp(-(1.5 * r[0] - 0.8 * r[1]))); break;
        }
        out[i] = s;
    }
    return MR_OK;
}

static mr_prop_result run(mr_prop *p, kind k)
{
    mr_scorer s = {score, &k, F, 1, 4};
    mr_prop_result r;
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_prop_check(p, &s, X, N, &r, &err));
    return r;
}

static void test_consistency(void **state)
{
    (void)state;
    mr_prop p;
    mr_prop_init(&p, MR_PROP_CONSISTENCY);
    mr_prop_result r = run(&p, GOOD);
    assert_true(r.passed);
    assert_int_equal(r.n_violations, 0);
    r = run(&p, BAD_BATCH);
    assert_false(r.passed);
    assert_int_equal(r.n_violations, N);
    assert_non_null(strstr(r.detail, "scored differently"));
    r = run(&p, BAD_THREADS);
    assert_false(r.passed);
    assert_int_equal(r.n_violations, N - 1); /* row 0 of a block is unchanged */
    p.epsilon = 1e-3;                          /* a declared tolerance absorbs it */
    assert_true(run(&p, BAD_THREADS).passed);
}

static void test_monotonic(void **state)
{
    (void)state;
    mr_prop p;
    mr_prop_init(&p, MR_PROP_MONOTONIC);
    p.feature = 0;
    assert_true(run(&p, GOOD).passed);
    mr_prop_result r = run(&p, BAD_MONO);
    assert_false(r.passed);
    assert_true(r.worst > 0.1);
    assert_true(r.example_row < N);
    p.direction = -1; /* the good model rises: "never increases" fails */
    assert_false(run(&p, GOOD).passed);
}

static void test_invariance(void **state)
{
    (void)state;
    mr_prop p;
    mr_prop_init(&p, MR_PROP_INVARIANCE);
    p.feature = 2;
    assert_true(run(&p, GOOD).passed);
    mr_prop_result r = run(&p, BAD_INVAR);
    assert_false(r.passed);
    p.perturb = 5; /* additive perturbation */
    assert_true(run(&p, GOOD).passed);
    r = run(&p, BAD_INVAR);
    assert_false(r.passed);
    p.epsilon = 0.01; /* 5 * 0.001 * sigmoid' < 0.01 */
    assert_true(run(&p, BAD_INVAR).passed);
}

static void test_robustness(void **state)
{
    (void)state;
    mr_prop p;
    mr_prop_init(&p, MR_PROP_ROBUSTNESS);
    p.feature = SIZE_MAX;
    p.noise = 0.01;
    p.delta = 0.05;
    mr_prop_result r = run(&p, GOOD);
    assert_true(r.passed);
    assert_true(r.pass_fraction >= 0.95);
    r = run(&p, BAD_ROBUST);
    assert_false(r.passed);
    assert_true(r.pass_fraction < 0.95);
}

static void test_directional(void **state)
{
    (void)state;
    mr_prop p;
    mr_prop_init(&p, MR_PROP_DIRECTIONAL);
    p.feature = 1; /* flag: flipping 0 -> 1 must raise the score */
    mr_prop_result r = run(&p, GOOD);
    assert_true(r.passed);
    assert_true(r.pass_fraction > 0.99);
    r = run(&p, BAD_DIR);
    assert_false(r.passed);
    assert_true(r.pass_fraction < 0.01);
    p.from = 0, p.to = 1; /* explicit values */
    assert_true(run(&p, GOOD).passed);
    assert_false(run(&p, BAD_DIR).passed);
    p.from = p.to = NAN;
    p.feature = 0; /* negation of a numeric feature */
    assert_true(run(&p, GOOD).passed);
}

static void test_errors(void **state)
{
    (void)state;
    kind k = GOOD;
    mr_scorer s = {score, &k, F, 1, 1};
    mr_prop p;
    mr_prop_result r;
    mr_error err;
    mr_error_init(&err);
    mr_prop_init(&p, MR_PROP_MONOTONIC);
    p.feature = 7;
    assert_status(mr_prop_check(&p, &s, X, N, &r, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "out of range"));
    mr_error_clear(&err);
    p.feature = 0;
    assert_status(mr_prop_check(&p, &s, X, 0, &r, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    p.direction = 3;
    assert_status(mr_prop_check(&p, &s, X, N, &r, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    mr_prop_kind pk;
    assert_status(mr_prop_kind_parse("monotonc", &pk, &err), MR_E_NOT_FOUND);
    if (!mr_test_fault_fired()) assert_non_null(strstr(err.hint, "monotonic")); /* the hint is best effort */
    mr_error_clear(&err);
    assert_ok(mr_prop_kind_parse("negation", &pk, &err));
    assert_int_equal(pk, MR_PROP_DIRECTIONAL);
    assert_string_equal(mr_prop_kind_name(MR_PROP_ROBUSTNESS), "robustness");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_consistency), cmocka_unit_test(test_monotonic), cmocka_unit_test(test_invariance),
        cmocka_unit_test(test_robustness),  cmocka_unit_test(test_directional), cmocka_unit_test(test_errors),
    };
    return mr_test_run(tests, setup, NULL);
}
