/* Unit tests for the inputs' training profile (src/ml/profile.c): quantile
 * bins with their shares, ranges and integrality, categories by share with
 * the rest as "other", nulls, the same bytes for the same table, PSI near 0
 * for the training distribution and above the documented threshold for a
 * shifted one, and documents that are not profiles refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/profile.h"
#include "millrace/table.h"

#define N 10000

static mr_table *make_table(void)
{
    mr_table *t = NULL;
    mr_column *x = NULL, *k = NULL, *plan = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("x", MR_T_FLOAT64, N, &x, NULL));
    assert_ok(mr_column_new("k", MR_T_INT64, N, &k, NULL));
    assert_ok(mr_column_new("plan", MR_T_STRING, N, &plan, NULL));
    static const char *const plans[] = {"free", "basic", "pro", "team"};
    for (int i = 0; i < N; i++) {
        if (i % 100 == 0) assert_ok(mr_column_append_null(x));
        else assert_ok(mr_column_append_float64(x, (double)((i * 7919) % N) / N)); /* uniform over [0, 1) */
        assert_ok(mr_column_append_int64(k, i % 30));
        const char *p = plans[(i % 10) < 5 ? 0 : (i % 10) < 8 ? 1 : (i % 10) < 9 ? 2 : 3]; /* 50/30/10/10 % */
        assert_ok(mr_column_append_str(plan, p, strlen(p)));
    }
    assert_ok(mr_table_add_column(t, x, NULL));
    assert_ok(mr_table_add_column(t, k, NULL));
    assert_ok(mr_table_add_column(t, plan, NULL));
    return t;
}

static mr_profile *build(mr_table *t, mr_buf *json)
{
    const char *names[] = {"x", "k", "plan"};
    const int cat[] = {0, 0, 1};
    mr_buf_init(json);
    assert_ok(mr_profile_build(t, names, cat, 3, json, NULL));
    mr_profile *p = NULL;
    assert_ok(mr_profile_parse(json->data, json->len, &p, NULL));
    return p;
}

static void test_build_and_read(void **state)
{
    (void)state;
    mr_table *t = make_table();
    mr_buf json, again;
    mr_profile *p = build(t, &json);
    mr_profile *q = build(t, &again);
    assert_int_equal(json.len, again.len); /* deterministic */
    assert_memory_equal(json.data, again.data, json.len);
    assert_int_equal(mr_profile_n_columns(p), 3);
    const mr_profile_column *x = mr_profile_find(p, "x");
    assert_non_null(x);
    assert_false(x->categorical);
    assert_false(x->integral);
    assert_true(fabs(x->null_fraction - 0.01) < 1e-12);
    assert_int_equal(x->n_bins, MR_PROFILE_BINS);
    for (size_t b = 0; b < x->n_bins; b++) assert_true(fabs(x->fractions[b] - 0.1) < 0.002); /* deciles */
    assert_true(x->min >= 0 && x->max < 1);
    assert_int_equal(mr_profile_bin(x, -5), 0);
    assert_int_equal(mr_profile_bin(x, 5), x->n_bins - 1);
    assert_int_equal(mr_profile_bin(x, x->edges[2]), 2); /* an edge is the top of its bin */
    const mr_profile_column *k = mr_profile_find(p, "k");
    assert_true(k->integral);
    assert_true(k->min == 0 && k->max == 29);
    const mr_profile_column *plan = mr_profile_find(p, "plan");
    assert_true(plan->categorical && plan->complete);
    assert_int_equal(plan->n_categories, 4);
    assert_string_equal(plan->categories[0], "free"); /* by share */
    assert_true(fabs(plan->fractions[0] - 0.5) < 1e-12);
    assert_int_equal(mr_profile_category(plan, "pro", 3), 2);
    assert_int_equal(mr_profile_category(plan, "enterprise", 10), 4); /* other */
    assert_null(mr_profile_find(p, "nope"));
    mr_profile_free(p);
    mr_profile_free(q);
    mr_buf_free(&json);
    mr_buf_free(&again);
    mr_table_free(t);
}

static void test_psi(void **state)
{
    (void)state;
    mr_table *t = make_table();
    mr_buf json;
    mr_profile *p = build(t, &json);
    const mr_profile_column *x = mr_profile_find(p, "x");
    uint64_t same[MR_PROFILE_BINS] = {0}, shifted[MR_PROFILE_BINS] = {0};
    for (int i = 0; i < 5000; i++) {
        double v = (double)((i * 104729) % 5000) / 5000; /* the same uniform */
        same[mr_profile_bin(x, v)]++;
        shifted[mr_profile_bin(x, v * 0.5 + 0.5)]++; /* squeezed into the upper half */
    }
    double a = mr_profile_psi(x, same), b = mr_profile_psi(x, shifted);
    assert_true(a < 0.01);
    assert_true(b > MR_PSI_SHIFTED);
    uint64_t none[MR_PROFILE_BINS] = {0};
    assert_true(isnan(mr_profile_psi(x, none)));
    const mr_profile_column *plan = mr_profile_find(p, "plan");
    uint64_t cats[5] = {500, 300, 100, 100, 0}, flip[5] = {100, 100, 300, 500, 0};
    assert_true(mr_profile_psi(plan, cats) < 1e-9);
    assert_true(mr_profile_psi(plan, flip) > MR_PSI_SHIFTED);
    mr_profile_free(p);
    mr_buf_free(&json);
    mr_table_free(t);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "[]",
        "{\"format\": \"millrace-profile/2\", \"columns\": []}",
        "{\"format\": \"millrace-profile/1\", \"columns\": [{\"name\": \"x\", \"fractions\": [0.5, 2]}]}",
        "{\"format\": \"millrace-profile/1\", \"columns\": [{\"name\": \"x\", \"edges\": [2, 1], \"fractions\": [0.3, 0.3, 0.4]}]}",
        "{\"format\": \"millrace-profile/1\", \"columns\": [{\"name\": \"c\", \"categorical\": true, \"categories\": [\"a\"], \"fractions\": [1]}]}",
        "not json",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mr_profile *p = (mr_profile *)1;
        mr_error err;
        mr_error_init(&err);
        mr_status st = mr_profile_parse(bad[i], strlen(bad[i]), &p, &err);
        if (st == MR_E_NOMEM) assert_status(st, MR_OK);
        assert_true(st == MR_E_CORRUPT || st == MR_E_PARSE);
        assert_null(p);
        assert_true(err.msg[0]);
    }
    mr_table *t = make_table();
    mr_buf json;
    mr_buf_init(&json);
    const char *names[] = {"missing"};
    const int cat[] = {0};
    assert_status(mr_profile_build(t, names, cat, 1, &json, NULL), MR_E_NOT_FOUND);
    mr_buf_free(&json);
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_and_read),
        cmocka_unit_test(test_psi),
        cmocka_unit_test(test_refused),
    };
    return mr_test_run(tests, NULL, NULL);
}
