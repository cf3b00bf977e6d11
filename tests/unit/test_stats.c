/* Unit tests for column statistics (src/data/stats.c): counts, bounds and
 * means per type, NaN and -0.0, exact distinct counts on plain and
 * dictionary-encoded strings, the HyperLogLog estimate past the exact limit,
 * results independent of how rows are cut into tables, schema checks, and
 * MR_E_NOMEM under failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "millrace/stats.h"
#include "millrace/table.h"

#include "columns_util.h"

static mr_column *f64_col(const char *name, const double *v, size_t n) /* NAN with signbit set = null */
{
    mr_column *c;
    assert_ok(mr_column_new(name, MR_T_FLOAT64, n, &c, NULL));
    for (size_t i = 0; i < n; i++)
        assert_ok(isnan(v[i]) && signbit(v[i]) ? mr_column_append_null(c) : mr_column_append_float64(c, v[i]));
    return c;
}

static mr_column *date_col(const char *name, const int32_t *v, size_t n)
{
    mr_column *c;
    assert_ok(mr_column_new(name, MR_T_DATE, n, &c, NULL));
    for (size_t i = 0; i < n; i++) assert_ok(mr_column_append_int32(c, v[i]));
    return c;
}

static void check_bound(const mr_stats *s, size_t j, int is_max, const char *want)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_stats_format_bound(s, j, is_max, &b));
    if (!want) assert_int_equal(b.len, 0);
    else assert_string_equal(b.data ? b.data : "", want);
    mr_buf_free(&b);
}

static void add_ok(mr_stats *s, const mr_table *t)
{
    mr_error err;
    mr_error_init(&err);
    if (mr_stats_add(s, t, &err) != MR_OK) fail_msg("mr_stats_add: %s", err.msg);
}

static void test_types(void **state)
{
    (void)state;
    const int64_t iv[] = {5, NA, -3, 5, 10};
    const double fv[] = {1.5, NAN, -0.0, 0.0, -NAN};
    const char *sv[] = {"pear", NULL, "apple", "pear", "zoo"};
    const int bv[] = {1, 0, -1, 1, 1};
    const int32_t dv[] = {19000, 18000, 20000, 19000, 19500};
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    add(t, int_col("i", iv, 5));
    add(t, f64_col("f", fv, 5));
    add(t, str_col("s", sv, 5, 0));
    add(t, bool_col("b", bv, 5));
    add(t, date_col("d", dv, 5));
    mr_stats *s = NULL;
    assert_ok(mr_stats_new(&s, NULL));
    assert_int_equal(mr_stats_n_cols(s), 0);
    add_ok(s, t);
    assert_int_equal(mr_stats_rows(s), 5);
    assert_int_equal(mr_stats_n_cols(s), 5);
    mr_stats_column c;
    mr_stats_column_get(s, 0, &c);
    assert_string_equal(c.name, "i");
    assert_int_equal(c.type, MR_T_INT64);
    assert_int_equal(c.rows, 5);
    assert_int_equal(c.nulls, 1);
    assert_true(c.has_min_max && c.has_mean && c.distinct_exact);
    assert_true(c.mean == 17.0 / 4);
    assert_true(c.distinct == 3);
    check_bound(s, 0, 0, "-3");
    check_bound(s, 0, 1, "10");
    mr_stats_column_get(s, 1, &c); /* NaN apart; -0.0 and 0.0 one value */
    assert_int_equal(c.nulls, 1);
    assert_int_equal(c.nans, 1);
    assert_true(c.distinct == 2);
    assert_true(c.mean == 0.5);
    check_bound(s, 1, 1, "1.5");
    mr_stats_column_get(s, 2, &c);
    assert_int_equal(c.nulls, 1);
    assert_false(c.has_mean);
    assert_true(c.distinct == 3);
    check_bound(s, 2, 0, "apple");
    check_bound(s, 2, 1, "zoo");
    mr_stats_column_get(s, 3, &c);
    assert_int_equal(c.nulls, 1);
    assert_true(c.mean == 0.75);
    assert_true(c.distinct == 2);
    check_bound(s, 3, 0, "false");
    check_bound(s, 3, 1, "true");
    mr_stats_column_get(s, 4, &c);
    assert_false(c.has_mean);
    assert_true(c.distinct == 4);
    check_bound(s, 4, 0, "2019-04-14");
    check_bound(s, 4, 1, "2024-10-04");
    /* another schema is refused */
    mr_table *u;
    assert_ok(mr_table_new(&u, NULL));
    add(u, str_col("i", sv, 5, 0));
    add(u, f64_col("f", fv, 5));
    add(u, str_col("s", sv, 5, 0));
    add(u, bool_col("b", bv, 5));
    add(u, date_col("d", dv, 5));
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_stats_add(s, u, &err), MR_E_SCHEMA);
    assert_string_equal(err.msg, "statistics: column 'i' is string, was int64");
    mr_table_free(u);
    mr_stats_free(s);
    mr_table_free(t);
    mr_stats_free(NULL);
}

static void test_all_null(void **state)
{
    (void)state;
    const char *sv[] = {NULL, NULL};
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    add(t, str_col("s", sv, 2, 0));
    mr_stats *s = NULL;
    assert_ok(mr_stats_new(&s, NULL));
    add_ok(s, t);
    mr_stats_column c;
    mr_stats_column_get(s, 0, &c);
    assert_int_equal(c.nulls, 2);
    assert_false(c.has_min_max);
    assert_true(c.distinct == 0);
    check_bound(s, 0, 0, NULL);
    mr_stats_free(s);
    mr_table_free(t);
}

/* Dictionary-encoded strings count as the plain ones do. */
static void test_dictionary_strings(void **state)
{
    (void)state;
    enum { N = 1000 };
    const char *v[N];
    char words[7][8] = {"a", "bb", "ccc", "dddd", "e", "ff", "gg"};
    for (size_t i = 0; i < N; i++) v[i] = i % 11 == 0 ? NULL : words[i % 7];
    mr_stats_column c[2];
    for (int dict = 0; dict < 2; dict++) {
        mr_table *t;
        assert_ok(mr_table_new(&t, NULL));
        add(t, str_col("w", v, N, dict));
        assert_int_equal(t->cols[0]->codes != NULL, dict);
        mr_stats *s = NULL;
        assert_ok(mr_stats_new(&s, NULL));
        add_ok(s, t);
        mr_stats_column_get(s, 0, &c[dict]);
        check_bound(s, 0, 0, "a");
        check_bound(s, 0, 1, "gg");
        mr_stats_free(s);
        mr_table_free(t);
    }
    assert_true(c[0].distinct == 7 && c[1].distinct == 7);
    assert_int_equal(c[0].nulls, c[1].nulls);
    assert_int_equal(c[0].nulls, (N + 10) / 11);
}

/* Past MR_STATS_EXACT_MAX distinct values the count is the HyperLogLog
 * estimate: within 4 standard errors (0.8% each) of the truth. Cutting the
 * rows into tables differently changes nothing. */
static void test_hll_and_batches(void **state)
{
    (void)state;
    enum { N = 200000 };
    int64_t *v = mr_malloc(N * sizeof *v);
    assert_alloc(v);
    for (size_t i = 0; i < N; i++) v[i] = (int64_t)(i * 7919 % N); /* a permutation of 0..N-1 */
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    add(t, int_col("id", v, N));
    mr_stats *one = NULL, *many = NULL;
    assert_ok(mr_stats_new(&one, NULL));
    assert_ok(mr_stats_new(&many, NULL));
    add_ok(one, t);
    const size_t cuts[] = {0, 1, 65536, 65537, 150000, N};
    for (size_t k = 0; k + 1 < sizeof(cuts) / sizeof(cuts[0]); k++) {
        mr_table *part = NULL;
        assert_ok(mr_table_slice(t, cuts[k], cuts[k + 1], &part, NULL));
        add_ok(many, part);
        mr_table_free(part);
    }
    mr_stats_column a, b;
    mr_stats_column_get(one, 0, &a);
    mr_stats_column_get(many, 0, &b);
    assert_false(a.distinct_exact);
    double rel = fabs(a.distinct - N) / N;
    if (rel > 4 * 0.008) fail_msg("estimate %.0f of %d distinct: %.2f%% off", a.distinct, N, 100 * rel);
    assert_true(a.distinct == b.distinct);
    assert_true(a.mean == b.mean);
    assert_true(a.mean == (N - 1) / 2.0);
    assert_int_equal(a.rows, b.rows);
    assert_int_equal(mr_stats_rows(many), N);
    check_bound(many, 0, 0, "0");
    check_bound(many, 0, 1, "199999");
    mr_stats_free(one);
    mr_stats_free(many);
    mr_table_free(t);
    mr_free(v);
    /* exactly MR_STATS_EXACT_MAX distinct values are still exact */
    v = mr_malloc(MR_STATS_EXACT_MAX * sizeof *v);
    assert_alloc(v);
    for (size_t i = 0; i < MR_STATS_EXACT_MAX; i++) v[i] = (int64_t)i * 3;
    assert_ok(mr_table_new(&t, NULL));
    add(t, int_col("x", v, MR_STATS_EXACT_MAX));
    assert_ok(mr_stats_new(&one, NULL));
    add_ok(one, t);
    mr_stats_column_get(one, 0, &a);
    assert_true(a.distinct_exact);
    assert_true(a.distinct == MR_STATS_EXACT_MAX);
    mr_stats_free(one);
    mr_table_free(t);
    mr_free(v);
}

/* Each failing allocation in new/add returns MR_E_NOMEM and leaks nothing
 * (the leak check is ASan's, in `make asan`). */
static void test_oom(void **state)
{
    (void)state;
    const char *sv[] = {"x", "y", NULL, "x"};
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    add(t, str_col("s", sv, 4, 1));
    add(t, str_col("p", sv, 4, 0));
    long k;
    for (k = 1; k < 100; k++) {
        mr_stats *s = NULL;
        mr_error err;
        mr_error_init(&err);
        mr_alloc_fail_after(k);
        mr_status rc = mr_stats_new(&s, &err);
        if (rc == MR_OK) rc = mr_stats_add(s, t, &err);
        mr_alloc_fail_after(0);
        mr_stats_free(s);
        if (rc == MR_OK) break;
        assert_status(rc, MR_E_NOMEM);
    }
    assert_true(k > 3 && k < 100);
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_all_null),
        cmocka_unit_test(test_dictionary_strings),
        cmocka_unit_test(test_hll_and_batches),
        cmocka_unit_test(test_oom),
    };
    return mr_test_run(tests, NULL, NULL);
}
