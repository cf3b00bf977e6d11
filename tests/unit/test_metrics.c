/* Unit tests for src/ml metrics: hand-computed small cases, hostile inputs
 * (NaN, empty, one class, labels outside the set), bootstrap determinism
 * across seeds and thread counts, bootstrap coverage on a synthetic case,
 * the stratified subsample, slices and their flag rule, error analysis, and
 * -j1 vs -jN bit-identity on a large input. The scikit-learn comparison is
 * tests/e2e/test_metrics_sklearn.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/metrics.h"

#define TOL 1e-12
#define assert_near(a, b)                                                                         \
    do {                                                                                          \
        double a_ = (a), b_ = (b);                                                                \
        if (!(fabs(a_ - b_) <= TOL * (1 + fabs(b_)))) fail_msg("%s = %.17g, want %.17g", #a, a_, b_); \
    } while (0)

static uint64_t rng_state;
static double urand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}
static double nrand(void)
{
    double u = urand(), v = urand();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void test_binary_hand(void **state)
{
    (void)state;
    double y[] = {0, 0, 1, 1}, s[] = {0.1, 0.4, 0.35, 0.8};
    mr_metric_data d;
    mr_metric_data_binary(&d, y, s, NULL, 4);
    double auc, ap, ll, br;
    assert_ok(mr_metric_auc_ap(&d, &auc, &ap, NULL));
    assert_near(auc, 0.75);
    assert_near(ap, 0.5 * 1.0 + 0.5 * (2.0 / 3.0)); /* thresholds 0.8 (P=1,R=.5), 0.35 (P=2/3,R=1) */
    assert_ok(mr_metric_logloss(&d, &ll, NULL));
    assert_near(ll, -(log(0.9) + log(0.6) + log(0.35) + log(0.8)) / 4);
    assert_ok(mr_metric_brier(&d, &br, NULL));
    assert_near(br, (0.01 + 0.16 + 0.65 * 0.65 + 0.04) / 4);
    mr_binary_scores b;
    assert_ok(mr_metric_binary_at(&d, 0.4, &b, NULL));
    assert_near(b.cm.tp, 1);
    assert_near(b.cm.fp, 1);
    assert_near(b.cm.fn, 1);
    assert_near(b.cm.tn, 1);
    assert_near(b.f1, 0.5);
    assert_ok(mr_metric_f1_optimal(&d, &b, NULL));
    assert_near(b.threshold, 0.35); /* tp=2 fp=1: F1 = 4/5 */
    assert_near(b.f1, 0.8);
    /* ties average: two tied scores of opposite class give 0.5 */
    double yt[] = {0, 1}, st[] = {0.5, 0.5};
    mr_metric_data_binary(&d, yt, st, NULL, 2);
    assert_ok(mr_metric_roc_auc(&d, &auc, NULL));
    assert_near(auc, 0.5);
    /* -0.0 and +0.0 are one threshold */
    double yz[] = {0, 1}, sz[] = {-0.0, 0.0};
    mr_metric_data_binary(&d, yz, sz, NULL, 2);
    assert_ok(mr_metric_roc_auc(&d, &auc, NULL));
    assert_near(auc, 0.5);
    /* weights: weight 2 on a row equals the row twice */
    double yw[] = {0, 1, 1}, sw[] = {0.3, 0.2, 0.9}, w[] = {2, 1, 1};
    double y2[] = {0, 0, 1, 1}, s2[] = {0.3, 0.3, 0.2, 0.9}, auc2, ap2;
    mr_metric_data_binary(&d, yw, sw, w, 3);
    assert_ok(mr_metric_auc_ap(&d, &auc, &ap, NULL));
    mr_metric_data_binary(&d, y2, s2, NULL, 4);
    assert_ok(mr_metric_auc_ap(&d, &auc2, &ap2, NULL));
    assert_near(auc, auc2);
    assert_near(ap, ap2);
}

static void test_hostile(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    double y[] = {0, 1, 1, 0}, s[] = {0.1, 0.4, NAN, 0.8};
    mr_metric_data d;
    double v;
    mr_metric_data_binary(&d, y, s, NULL, 4);
    assert_status(mr_metric_roc_auc(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 3: score is NaN"));
    mr_error_clear(&err);
    mr_metric_data_binary(&d, y, s, NULL, 0);
    assert_status(mr_metric_logloss(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "empty"));
    mr_error_clear(&err);
    double y1[] = {1, 1, 1}, s1[] = {0.1, 0.2, 0.3};
    mr_metric_data_binary(&d, y1, s1, NULL, 3);
    assert_status(mr_metric_roc_auc(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "only one class"));
    mr_error_clear(&err);
    assert_ok(mr_metric_average_precision(&d, &v, NULL)); /* all positive: AP = 1 */
    assert_near(v, 1.0);
    assert_ok(mr_metric_logloss(&d, &v, NULL)); /* defined on one class */
    double y0[] = {0, 0}, s0[] = {0.1, 0.2};
    mr_metric_data_binary(&d, y0, s0, NULL, 2);
    assert_status(mr_metric_average_precision(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no positive"));
    mr_error_clear(&err);
    double yb[] = {0, 2}, sb[] = {0.1, 0.2};
    mr_metric_data_binary(&d, yb, sb, NULL, 2);
    assert_status(mr_metric_brier(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 2: binary label must be 0 or 1, got 2"));
    mr_error_clear(&err);
    double yp[] = {0, 1}, sp[] = {0.1, 1.5};
    mr_metric_data_binary(&d, yp, sp, NULL, 2);
    assert_status(mr_metric_logloss(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 2: probability must be in [0, 1]"));
    mr_error_clear(&err);
    assert_ok(mr_metric_roc_auc(&d, &v, NULL)); /* scores need not be probabilities */
    double wz[] = {0, 0};
    mr_metric_data_binary(&d, yp, sp, wz, 2);
    assert_status(mr_metric_roc_auc(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "total sample weight is 0"));
    mr_error_clear(&err);
    double wn[] = {1, -1};
    mr_metric_data_binary(&d, yp, sp, wn, 2);
    assert_status(mr_metric_roc_auc(&d, &v, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 2: weight"));
    mr_error_clear(&err);
    /* multiclass label outside, regression NaN target */
    double ym[] = {0, 3}, pm[] = {0.5, 0.5, 0.2, 0.8};
    mr_metric_data_multiclass(&d, ym, pm, 2, NULL, 2);
    mr_multiclass_scores ms;
    assert_status(mr_metric_multiclass(&d, &ms, NULL, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 2: class label"));
    mr_error_clear(&err);
    double yr[] = {1, NAN}, pr[] = {1, 2};
    mr_metric_data_regression(&d, yr, pr, NULL, 2);
    mr_regression_scores rs;
    assert_status(mr_metric_regression(&d, &rs, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 2: target"));
    mr_error_clear(&err);
    /* wrong task */
    assert_status(mr_metric_roc_auc(&d, &v, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
}

static void test_multiclass_regression_hand(void **state)
{
    (void)state;
    double y[] = {0, 1, 2, 2};
    double p[] = {0.7, 0.2, 0.1, /**/ 0.3, 0.3, 0.4, /**/ 0.1, 0.1, 0.8, /**/ 0.5, 0.5, 0.0};
    mr_metric_data d;
    mr_metric_data_multiclass(&d, y, p, 3, NULL, 4);
    mr_multiclass_scores s;
    double cm[9];
    assert_ok(mr_metric_multiclass(&d, &s, cm, NULL));
    /* predictions: 0, 2, 2, 0 (argmax tie -> first) */
    assert_near(s.accuracy, 0.5);
    assert_near(cm[0 * 3 + 0], 1);
    assert_near(cm[1 * 3 + 2], 1);
    assert_near(cm[2 * 3 + 2], 1);
    assert_near(cm[2 * 3 + 0], 1);
    /* F1: class0 tp1 fp1 fn0 -> 2/3; class1 0; class2 tp1 fp1 fn1 -> 1/2 */
    assert_near(s.macro_f1, (2.0 / 3 + 0 + 0.5) / 3);
    assert_near(s.micro_f1, 0.5);
    double yr[] = {3, -0.5, 2, 7}, pr[] = {2.5, 0.0, 2, 8};
    mr_metric_data_regression(&d, yr, pr, NULL, 4);
    mr_regression_scores r;
    assert_ok(mr_metric_regression(&d, &r, NULL));
    assert_near(r.mae, 0.5);
    assert_near(r.rmse, sqrt(0.375));
    assert_near(r.r2, 1 - 1.5 / 29.1875);
    assert_near(r.mape, (0.5 / 3 + 1 + 0 + 1.0 / 7) / 4);
    double q[3], qs[3] = {0, 0.5, 1};
    assert_ok(mr_metric_residual_quantiles(&d, qs, 3, q, NULL));
    assert_near(q[0], -1);
    assert_near(q[1], -0.25);
    assert_near(q[2], 0.5); /* residuals 0.5, -0.5, 0, -1 */
}

static mr_metric_data make_binary(size_t n, double *y, double *s, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        y[i] = urand() < 0.3;
        s[i] = 1 / (1 + exp(-(nrand() + y[i])));
    }
    mr_metric_data d;
    mr_metric_data_binary(&d, y, s, NULL, n);
    return d;
}

static void test_bootstrap_determinism(void **state)
{
    (void)state;
    enum { N = 500 };
    static double y[N], s[N];
    mr_metric_data d = make_binary(N, y, s, 7);
    mr_interval a, b, c, e;
    mr_pool_shutdown();
    assert_ok(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 300, 0.05, 42, 1, &a, NULL));
    assert_ok(mr_pool_init(4, NULL));
    assert_ok(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 300, 0.05, 42, 0, &b, NULL));
    mr_pool_shutdown();
    assert_ok(mr_pool_init(3, NULL));
    assert_ok(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 300, 0.05, 42, 0, &c, NULL));
    assert_ok(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 300, 0.05, 43, 0, &e, NULL));
    mr_pool_shutdown();
    assert_memory_equal(&a, &b, sizeof a);
    assert_memory_equal(&a, &c, sizeof a);
    assert_true(a.lo < a.point && a.point < a.hi);
    assert_int_equal(a.n_valid, 300);
    assert_true(e.lo != a.lo || e.hi != a.hi); /* another seed, another interval */
    /* one-class resamples are counted, not fatal */
    double y2[12] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, s2[12] = {0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    mr_metric_data_binary(&d, y2, s2, NULL, 12);
    assert_ok(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 100, 0.05, 1, 1, &a, NULL));
    assert_true(a.n_failed > 0);
    assert_int_equal(a.n_valid + a.n_failed, 100);
    /* NaN input is an error, not an interval */
    s2[3] = NAN;
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 100, 0.05, 1, 1, &a, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 4"));
    mr_error_clear(&err);
}

/* The ranking metrics' bootstrap counts how often each row is drawn and
 * walks the scores sorted once; it must give the intervals of gathering and
 * re-sorting every resample (MILLRACE_BOOTSTRAP_RESORT=1): the same bits
 * without weights, the last bits at most with them. Ties, a one-class
 * case and both metrics. */
static void test_bootstrap_rank_fast_path(void **state)
{
    (void)state;
    enum { N = 700 };
    static double y[N], s[N], w[N];
    mr_metric_data d = make_binary(N, y, s, 11);
    for (size_t i = 0; i < N; i++) {
        s[i] = round(s[i] * 20) / 20; /* many ties */
        w[i] = 0.5 + (double)(i % 7) / 3;
    }
    assert_ok(mr_pool_init(3, NULL));
    const mr_metric_id ids[2] = {MR_METRIC_ROC_AUC, MR_METRIC_AVG_PRECISION};
    for (int wi = 0; wi < 2; wi++) {
        mr_metric_data_binary(&d, y, s, wi ? w : NULL, N);
        for (int m = 0; m < 2; m++) {
            mr_interval fast, slow;
            assert_ok(mr_bootstrap_metric(ids[m], 0.5, &d, 400, 0.1, 5, 0, &fast, NULL));
            setenv("MILLRACE_BOOTSTRAP_RESORT", "1", 1);
            assert_ok(mr_bootstrap_metric(ids[m], 0.5, &d, 400, 0.1, 5, 0, &slow, NULL));
            unsetenv("MILLRACE_BOOTSTRAP_RESORT");
            assert_int_equal(fast.n_valid, slow.n_valid);
            assert_true(fast.point == slow.point);
            if (!wi) {
                assert_true(fast.lo == slow.lo && fast.hi == slow.hi);
            } else {
                assert_true(fabs(fast.lo - slow.lo) < 1e-12 && fabs(fast.hi - slow.hi) < 1e-12);
            }
            assert_true(fast.lo < fast.point && fast.point < fast.hi);
        }
    }
    /* few positives: some resamples have none, counted the same way */
    double y2[12] = {1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, s2[12] = {0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    mr_metric_data_binary(&d, y2, s2, NULL, 12);
    for (int m = 0; m < 2; m++) {
        mr_interval fast, slow;
        assert_ok(mr_bootstrap_metric(ids[m], 0.5, &d, 300, 0.05, 3, 1, &fast, NULL));
        setenv("MILLRACE_BOOTSTRAP_RESORT", "1", 1);
        assert_ok(mr_bootstrap_metric(ids[m], 0.5, &d, 300, 0.05, 3, 1, &slow, NULL));
        unsetenv("MILLRACE_BOOTSTRAP_RESORT");
        assert_true(fast.n_failed > 0);
        assert_int_equal(fast.n_failed, slow.n_failed);
        assert_memory_equal(&fast, &slow, sizeof fast);
        /* out of memory in any resample (re-sorting path, one thread):
         * the same interval or MR_E_NOMEM, never fewer valid resamples.
         * 40 resamples, so that failing each allocation in turn stays
         * linear-ish (this loop under the torture runner is one iteration). */
        setenv("MILLRACE_BOOTSTRAP_RESORT", "1", 1);
        mr_interval ref;
        assert_ok(mr_bootstrap_metric(ids[m], 0.5, &d, 40, 0.05, 3, 1, &ref, NULL));
        assert_true(ref.n_valid > 0);
        for (long k = 1, fired = 1; fired; k++) {
            mr_interval o;
            uint64_t oom0 = mr_alloc_failures_here();
            mr_alloc_fail_after(k);
            mr_status rc = mr_bootstrap_metric(ids[m], 0.5, &d, 40, 0.05, 3, 1, &o, NULL);
            mr_alloc_fail_after(0);
            fired = mr_alloc_failures_here() != oom0;
            if (rc == MR_E_NOMEM && fired) continue;
            assert_ok(rc);
            assert_memory_equal(&o, &ref, sizeof o);
        }
        unsetenv("MILLRACE_BOOTSTRAP_RESORT");
    }
    mr_pool_shutdown();
}

static void test_bootstrap_coverage(void **state)
{
    (void)state;
    /* MAE of N(0,1) residuals: truth E|Z| = sqrt(2/pi). Seed printed on failure. */
    enum { N = 200, REPS = 200 };
    static double y[N], p[N];
    double truth = sqrt(2 / 3.141592653589793);
    int covered = 0;
    for (int r = 0; r < REPS; r++) {
        rng_state = 1000 + (uint64_t)r;
        for (size_t i = 0; i < N; i++) {
            y[i] = nrand();
            p[i] = 0;
        }
        mr_metric_data d;
        mr_metric_data_regression(&d, y, p, NULL, N);
        mr_interval ci;
        assert_ok(mr_bootstrap_metric(MR_METRIC_MAE, 0, &d, 200, 0.05, (uint64_t)r, 1, &ci, NULL));
        covered += ci.lo <= truth && truth <= ci.hi;
    }
    double frac = (double)covered / REPS;
    if (frac < 0.85) fail_msg("bootstrap coverage %.3f < 0.85 (seeds 1000..%d)", frac, 1000 + REPS - 1);
}

static void test_subsample(void **state)
{
    (void)state;
    enum { N = 10000 };
    static double y[N];
    static size_t idx[N], idx2[N];
    for (size_t i = 0; i < N; i++) y[i] = i % 100 < 3 ? 1 : 0; /* 3% positives */
    size_t m, m2;
    assert_ok(mr_metric_subsample_stratified(y, N, 1000, 9, idx, &m, NULL));
    assert_int_equal(m, 1000);
    size_t pos = 0;
    for (size_t i = 0; i < m; i++) {
        pos += y[idx[i]] == 1;
        if (i) assert_true(idx[i] > idx[i - 1]);
    }
    assert_int_equal(pos, 30);
    assert_ok(mr_metric_subsample_stratified(y, N, 1000, 9, idx2, &m2, NULL));
    assert_memory_equal(idx, idx2, m * sizeof(size_t));
    assert_ok(mr_metric_subsample_stratified(y, N, 1000, 10, idx2, &m2, NULL));
    assert_true(memcmp(idx, idx2, m * sizeof(size_t)) != 0);
    /* a rare class keeps at least one row */
    y[5] = 2;
    assert_ok(mr_metric_subsample_stratified(y, N, 50, 9, idx, &m, NULL));
    int has2 = 0;
    for (size_t i = 0; i < m; i++) has2 |= y[idx[i]] == 2;
    assert_int_equal(m, 50);
    assert_true(has2);
    assert_ok(mr_metric_subsample_stratified(y, N, N + 5, 9, idx, &m, NULL));
    assert_int_equal(m, N);
    assert_status(mr_metric_subsample_stratified(y, 0, 5, 9, idx, &m, NULL), MR_E_INVALID_ARG);
}

static void test_slices(void **state)
{
    (void)state;
    enum { N = 2000 };
    static double y[N], s[N], x[N];
    static int32_t codes[N];
    rng_state = 99;
    for (size_t i = 0; i < N; i++) {
        codes[i] = (int32_t)(i % 3); /* 0 good, 1 noise, 2 one class */
        y[i] = codes[i] == 2 ? 0 : urand() < 0.5;
        s[i] = codes[i] == 1 ? urand() : 1 / (1 + exp(-(nrand() + 3 * y[i] - 1.5)));
        x[i] = i % 10 == 0 ? NAN : (double)(i % 7);
    }
    mr_metric_data d;
    mr_metric_data_binary(&d, y, s, NULL, N);
    mr_interval overall;
    assert_ok(mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 200, 0.05, 5, 1, &overall, NULL));
    mr_slice_opts o;
    mr_slice_opts_init(&o);
    o.threads = 1;
    const char *names[] = {"good", "noise", "negatives"};
    mr_slice *sl = NULL;
    size_t ns = 0;
    assert_ok(mr_slices_categorical(&d, "grp", codes, names, 3, &o, &overall, &sl, &ns, NULL));
    assert_int_equal(ns, 3);
    assert_string_equal(sl[0].label, "grp=good");
    assert_ok(sl[0].status);
    assert_false(sl[0].flagged);
    assert_ok(sl[1].status);
    assert_true(sl[1].flagged); /* random scores: hi < overall AUC */
    assert_true(sl[1].ci.hi < overall.point);
    assert_status(sl[2].status, MR_E_INVALID_ARG);
    assert_non_null(strstr(sl[2].message, "only one class"));
    assert_false(sl[2].flagged);
    mr_free(sl);
    assert_ok(mr_slices_numeric(&d, "x", x, 4, &o, &overall, &sl, &ns, NULL));
    assert_true(ns >= 2);
    assert_string_equal(sl[ns - 1].label, "x missing");
    size_t total = 0;
    for (size_t i = 0; i < ns; i++) total += sl[i].n_rows;
    assert_int_equal(total, N);
    mr_free(sl);
    codes[7] = 5;
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_slices_categorical(&d, "grp", codes, names, 3, &o, &overall, &sl, &ns, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "row 8"));
    mr_error_clear(&err);
}

static void test_error_analysis_and_curves(void **state)
{
    (void)state;
    double y[] = {0, 1, 0, 1, 0}, s[] = {0.95, 0.05, 0.6, 0.7, 0.1};
    mr_metric_data d;
    mr_metric_data_binary(&d, y, s, NULL, 5);
    size_t rows[5], n;
    double conf[5];
    assert_ok(mr_metric_top_wrong(&d, 0.5, 2, rows, conf, &n, NULL));
    assert_int_equal(n, 2);
    assert_int_equal(rows[0], 0); /* 0.95 on the wrong class */
    assert_int_equal(rows[1], 1); /* 1 - 0.05 = 0.95: tie, row order */
    assert_ok(mr_metric_top_wrong(&d, 0.5, 5, rows, conf, &n, NULL));
    assert_int_equal(n, 3);
    mr_curve c;
    assert_ok(mr_curve_roc(&d, 0, &c, NULL));
    assert_int_equal(c.n, 6);
    assert_near(c.x[c.n - 1], 1);
    assert_near(c.y[c.n - 1], 1);
    mr_curve_free(&c);
    assert_ok(mr_curve_gain(&d, 5, &c, NULL));
    assert_int_equal(c.n, 5);
    assert_near(c.x[4], 1);
    assert_near(c.y[4], 1);
    mr_curve_free(&c);
    double yr[] = {1, 2, 3, 4}, pr[] = {1.5, 2, 0, 4.1};
    mr_metric_data_regression(&d, yr, pr, NULL, 4);
    double res[4];
    assert_ok(mr_metric_extreme_residuals(&d, 1, 2, rows, res, &n, NULL));
    assert_int_equal(rows[0], 2);
    assert_near(res[0], 3);
    assert_int_equal(rows[1], 0);
    assert_ok(mr_metric_extreme_residuals(&d, 0, 1, rows, res, &n, NULL));
    assert_int_equal(rows[0], 1);
    assert_ok(mr_curve_residuals(&d, 2, &c, NULL));
    assert_int_equal(c.n, 2);
    mr_curve_free(&c);
    mr_metric_id id;
    assert_ok(mr_metric_by_name("roc_auc", &id, NULL));
    assert_int_equal(id, MR_METRIC_ROC_AUC);
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_metric_by_name("roc_acu", &id, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.hint, "roc_auc"));
    mr_error_clear(&err);
}

static void test_large_thread_identity(void **state)
{
    (void)state;
    size_t n = ((size_t)1 << 20) + 12345;
    double *y = mr_malloc(n * sizeof(double)), *s = mr_malloc(n * sizeof(double)), *w = mr_malloc(n * sizeof(double));
    assert_alloc(y);
    assert_alloc(s);
    assert_alloc(w);
    mr_metric_data d = make_binary(n, y, s, 3);
    for (size_t i = 0; i < n; i++) {
        s[i] = round(s[i] * 1e4) / 1e4; /* ties */
        w[i] = 0.5 + urand();
    }
    double r1[6], r4[6];
    mr_pool_shutdown();
    for (int pass = 0; pass < 2; pass++) {
        double *r = pass ? r4 : r1;
        if (pass) assert_ok(mr_pool_init(4, NULL));
        d.w = NULL;
        assert_ok(mr_metric_auc_ap(&d, &r[0], &r[1], NULL));
        assert_ok(mr_metric_logloss(&d, &r[2], NULL));
        d.w = w;
        assert_ok(mr_metric_auc_ap(&d, &r[3], &r[4], NULL));
        assert_ok(mr_metric_logloss(&d, &r[5], NULL));
    }
    mr_pool_shutdown();
    assert_memory_equal(r1, r4, sizeof r1);
    mr_free(y);
    mr_free(s);
    mr_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_hand),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_multiclass_regression_hand),
        cmocka_unit_test(test_bootstrap_determinism),
        cmocka_unit_test(test_bootstrap_coverage),
        cmocka_unit_test(test_bootstrap_rank_fast_path),
        cmocka_unit_test(test_subsample),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_error_analysis_and_curves),
        cmocka_unit_test(test_large_thread_identity),
    };
    return mr_test_run(tests, NULL, NULL);
}
