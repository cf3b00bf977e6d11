/* Unit tests for the columnar table (src/data/table.c): appends and nulls,
 * slices (plain, dictionary, strings), take, table append, materialize,
 * calendar parsing and value formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <string.h>

#include "millrace/table.h"

static mr_column *int_col(size_t n, int nulls_every)
{
    mr_column *c = NULL;
    assert_ok(mr_column_new("i", MR_T_INT64, 0, &c, NULL));
    for (size_t i = 0; i < n; i++) {
        if (nulls_every && i % (size_t)nulls_every == 0) assert_ok(mr_column_append_null(c));
        else assert_ok(mr_column_append_int64(c, (int64_t)i * 3));
    }
    return c;
}

static void check_str(const mr_column *c, size_t i, const char *want)
{
    size_t len;
    const char *s = mr_column_str(c, i, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s, want, len);
}

static void test_slice_fixed(void **state)
{
    (void)state;
    mr_column *c = int_col(100, 7);
    mr_column *s = NULL;
    assert_ok(mr_column_slice(c, 13, 61, &s, NULL));
    assert_int_equal(s->n, 48);
    size_t nulls = 0;
    for (size_t i = 0; i < 48; i++) {
        size_t src = 13 + i;
        assert_int_equal(mr_column_is_null(s, i), src % 7 == 0);
        nulls += src % 7 == 0;
        if (src % 7) assert_int_equal(((int64_t *)s->data)[i], (int64_t)src * 3);
    }
    assert_int_equal(s->null_count, nulls);
    /* the slice stays appendable */
    assert_ok(mr_column_append_int64(s, 5));
    assert_ok(mr_column_append_null(s));
    assert_int_equal(s->n, 50);
    assert_true(mr_column_is_null(s, 49));
    assert_false(mr_column_is_null(s, 48));
    mr_column_free(s);
    mr_column *e = NULL;
    assert_ok(mr_column_slice(c, 5, 5, &e, NULL));
    assert_int_equal(e->n, 0);
    mr_column_free(e);
    mr_column_free(c);
}

static void test_slice_strings_and_dict(void **state)
{
    (void)state;
    mr_column *p = NULL;
    assert_ok(mr_column_new("s", MR_T_STRING, 0, &p, NULL));
    const char *vals[] = {"alpha", "", "gamma", NULL, "epsilon"};
    for (size_t i = 0; i < 5; i++)
        assert_ok(vals[i] ? mr_column_append_str(p, vals[i], strlen(vals[i])) : mr_column_append_null(p));
    mr_column *s = NULL;
    assert_ok(mr_column_slice(p, 1, 5, &s, NULL));
    check_str(s, 0, "");
    check_str(s, 1, "gamma");
    assert_true(mr_column_is_null(s, 2));
    check_str(s, 3, "epsilon");
    assert_ok(mr_column_append_str(s, "z", 1));
    check_str(s, 4, "z");
    mr_column_free(s);

    mr_column *dict = NULL, *d = NULL;
    assert_ok(mr_column_new("", MR_T_STRING, 0, &dict, NULL));
    assert_ok(mr_column_append_str(dict, "red", 3));
    assert_ok(mr_column_append_str(dict, "blue", 4));
    assert_ok(mr_column_new_dict("color", dict, 0, &d, NULL));
    for (int i = 0; i < 10; i++)
        assert_ok(i == 4 ? mr_column_append_null(d) : mr_column_append_code(d, i % 2));
    assert_ok(mr_column_slice(d, 3, 8, &s, NULL));
    assert_alloc(s->codes);
    assert_true(s->dict != d->dict);
    check_str(s, 0, "blue");
    assert_true(mr_column_is_null(s, 1));
    check_str(s, 2, "blue");
    check_str(s, 3, "red");
    mr_column *plain = NULL;
    assert_ok(mr_column_slice(s, 0, 5, &plain, NULL));
    assert_ok(mr_column_materialize(plain, NULL));
    assert_null(plain->codes);
    check_str(plain, 4, "blue");
    assert_true(mr_column_is_null(plain, 1));
    mr_column_free(plain);
    mr_column_free(s);
    mr_column_free(d);
    mr_column_free(p);
}

static void test_table_ops(void **state)
{
    (void)state;
    mr_table *t = NULL, *u = NULL, *k = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_table_add_column(t, int_col(20, 5), NULL));
    mr_column *f = NULL;
    assert_ok(mr_column_new("f", MR_T_FLOAT64, 0, &f, NULL));
    for (int i = 0; i < 20; i++) assert_ok(mr_column_append_float64(f, i * 0.5));
    assert_ok(mr_table_add_column(t, f, NULL));
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_table_add_column(t, int_col(20, 0), &err), MR_E_SCHEMA); /* duplicate "i" */
    assert_ok(mr_table_slice(t, 10, 20, &u, NULL));
    assert_int_equal(u->n_rows, 10);
    assert_ok(mr_table_append(u, t, NULL));
    assert_int_equal(u->n_rows, 30);
    assert_true(mr_column_is_null(u->cols[0], 10)); /* row 0 of t */
    assert_int_equal(((int64_t *)u->cols[0]->data)[11], 3);
    assert_true(((double *)u->cols[1]->data)[29] == 9.5);
    const uint32_t idx[] = {29, 0, 10};
    assert_ok(mr_table_take(u, idx, 3, &k, NULL));
    assert_int_equal(k->n_rows, 3);
    assert_int_equal(((int64_t *)k->cols[0]->data)[0], 57);
    assert_true(mr_column_is_null(k->cols[0], 2));
    mr_table_free(k);
    mr_table_free(u);
    mr_table_free(t);
}

static void test_calendar_and_format(void **state)
{
    (void)state;
    int32_t d;
    assert_int_equal(mr_date_parse("1970-01-02", 10, &d), 0);
    assert_int_equal(d, 1);
    assert_int_equal(mr_date_parse("2023-02-29", 10, &d), -1);
    assert_int_equal(mr_date_parse("2024-02-29", 10, &d), 0);
    int64_t us;
    assert_int_equal(mr_timestamp_parse("1970-01-01T00:00:01.5+01:00", 27, &us), 0);
    assert_int_equal(us, 1500000 - 3600000000LL);
    assert_int_equal(mr_timestamp_parse("1970-01-01 00:00:00x", 20, &us), -1);
    mr_column *c = NULL;
    assert_ok(mr_column_new("t", MR_T_TIMESTAMP, 0, &c, NULL));
    assert_ok(mr_column_append_int64(c, 86400000001LL));
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_column_format(c, 0, &b));
    assert_string_equal(b.data, "1970-01-02 00:00:00.000001");
    mr_buf_free(&b);
    mr_column_free(c);
}

/* The name index: lookups, adds, replacements, renames (including a swap)
 * and projections keep mr_table_column_index equal to a scan of the names,
 * on a table wide enough that a quadratic lookup would not finish. */
static void check_index(const mr_table *t)
{
    for (size_t i = 0; i < t->n_cols; i++) {
        ssize_t got = mr_table_column_index(t, t->cols[i]->name);
        if (got != (ssize_t)i) fail_msg("column %zu '%s': index says %zd", i, t->cols[i]->name, got);
    }
}

static mr_column *named_col(const char *name, int64_t v)
{
    mr_column *c = NULL;
    assert_ok(mr_column_new(name, MR_T_INT64, 1, &c, NULL));
    assert_ok(mr_column_append_int64(c, v));
    return c;
}

static void test_table_name_index(void **state)
{
    (void)state;
    const size_t n = 200000;
    mr_table *t = NULL;
    assert_ok(mr_table_new(&t, NULL));
    char name[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "c%zu", i);
        assert_ok(mr_table_add_column(t, named_col(name, (int64_t)i), NULL));
    }
    assert_int_equal(t->n_cols, n);
    for (size_t i = 0; i < n; i += 997) {
        snprintf(name, sizeof name, "c%zu", i);
        mr_column *c = mr_table_column(t, name);
        assert_alloc(c);
        assert_int_equal(((int64_t *)c->data)[0], (int64_t)i);
    }
    assert_null(mr_table_column(t, "c200000"));
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_table_add_column(t, named_col("c77", 0), &err), MR_E_SCHEMA);
    assert_string_equal(err.msg, "duplicate column name 'c77'");
    assert_int_equal(t->n_cols, n);
    /* a swap in one rename, then a rename onto a name that stays: refused, nothing changed */
    size_t idx[] = {5, 6};
    const char *swapped[] = {"c6", "c5"};
    assert_ok(mr_table_rename_columns(t, idx, swapped, 2, NULL));
    assert_int_equal(mr_table_column_index(t, "c5"), 6);
    assert_int_equal(mr_table_column_index(t, "c6"), 5);
    const char *clash[] = {"c9"};
    mr_error_clear(&err);
    assert_status(mr_table_rename_columns(t, idx, clash, 1, &err), MR_E_SCHEMA);
    assert_string_equal(t->cols[5]->name, "c6");
    assert_int_equal(mr_table_column_index(t, "c9"), 9);
    const char *fresh[] = {"renamed"};
    assert_ok(mr_table_rename_columns(t, idx, fresh, 1, NULL));
    assert_int_equal(mr_table_column_index(t, "renamed"), 5);
    assert_int_equal(mr_table_column_index(t, "c6"), -1);
    /* replacing a column: under its own name, and under a new one */
    assert_ok(mr_table_set_column(t, 7, named_col("c7", -7), NULL));
    assert_int_equal(((int64_t *)mr_table_column(t, "c7")->data)[0], -7);
    assert_ok(mr_table_set_column(t, 8, named_col("eight", 8), NULL));
    assert_int_equal(mr_table_column_index(t, "eight"), 8);
    assert_int_equal(mr_table_column_index(t, "c8"), -1);
    mr_error_clear(&err);
    assert_status(mr_table_set_column(t, 8, named_col("c10", 8), &err), MR_E_SCHEMA);
    assert_int_equal(mr_table_column_index(t, "eight"), 8);
    check_index(t);
    /* projection: every other column, backwards */
    size_t np = n / 2;
    char **keep = mr_calloc(np, sizeof(char *));
    assert_alloc(keep);
    for (size_t k = 0; k < np; k++) {
        keep[k] = mr_strdup(t->cols[n - 1 - 2 * k]->name);
        assert_alloc(keep[k]);
    }
    assert_ok(mr_table_project(t, (const char *const *)keep, np, NULL));
    assert_int_equal(t->n_cols, np);
    for (size_t k = 0; k < np; k++) assert_string_equal(t->cols[k]->name, keep[k]);
    check_index(t);
    assert_int_equal(mr_table_column_index(t, "c0"), -1); /* dropped */
    assert_ok(mr_table_add_column(t, named_col("c0", 0), NULL));
    assert_int_equal(mr_table_column_index(t, "c0"), (ssize_t)np);
    mr_error_clear(&err);
    const char *twice[] = {keep[3], keep[3]};
    assert_status(mr_table_project(t, twice, 2, &err), MR_E_INVALID_ARG);
    assert_int_equal(t->n_cols, np + 1);
    for (size_t k = 0; k < np; k++) mr_free(keep[k]);
    mr_free(keep);
    check_index(t);
    mr_table_free(t);
    /* the same rules on a table too small to keep an index */
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_table_add_column(t, named_col("a", 1), NULL));
    assert_ok(mr_table_add_column(t, named_col("b", 2), NULL));
    assert_ok(mr_table_add_column(t, named_col("c", 3), NULL));
    size_t ab[] = {0, 1}, c2[] = {2, 2};
    const char *ba[] = {"b", "a"};
    assert_ok(mr_table_rename_columns(t, ab, ba, 2, NULL));
    assert_int_equal(((int64_t *)mr_table_column(t, "a")->data)[0], 2);
    const char *to_a[] = {"a"};
    assert_status(mr_table_rename_columns(t, c2, to_a, 1, NULL), MR_E_SCHEMA);
    const char *two[] = {"x", "y"};
    assert_status(mr_table_rename_columns(t, c2, two, 2, NULL), MR_E_INVALID_ARG);
    const char *same[] = {"x", "x"};
    assert_status(mr_table_rename_columns(t, ab, same, 2, NULL), MR_E_SCHEMA);
    assert_string_equal(t->cols[0]->name, "b");
    assert_string_equal(t->cols[2]->name, "c");
    check_index(t);
    mr_table_free(t);
}

/* Allocation failure at every point of building an indexed table, then of
 * renaming and projecting it: each call returns MR_E_NOMEM or succeeds, the
 * table stays consistent (lookups equal a scan) and nothing leaks (ASan). */
static void test_table_index_oom(void **state)
{
    (void)state;
    char name[32];
    for (long k = 1; k < 400; k++) {
        mr_table *t = NULL;
        assert_ok(mr_table_new(&t, NULL));
        mr_alloc_fail_after(k);
        int failed = 0;
        for (size_t i = 0; i < 40; i++) {
            snprintf(name, sizeof name, "c%zu", i);
            mr_column *c = NULL;
            if (mr_column_new(name, MR_T_INT64, 0, &c, NULL) != MR_OK) {
                failed = 1;
                continue;
            }
            mr_status rc = mr_table_add_column(t, c, NULL); /* takes c, also on failure */
            assert_true(rc == MR_OK || rc == MR_E_NOMEM);
            failed |= rc != MR_OK;
        }
        check_index(t);
        size_t idx[] = {0, 1};
        const char *swap[] = {t->n_cols > 1 ? t->cols[1]->name : "x", t->n_cols > 0 ? t->cols[0]->name : "y"};
        if (t->n_cols > 1) {
            char *a = mr_strdup(swap[0]), *b = mr_strdup(swap[1]);
            const char *sw[] = {a, b};
            mr_status rc = a && b ? mr_table_rename_columns(t, idx, sw, 2, NULL) : MR_E_NOMEM;
            assert_true(rc == MR_OK || rc == MR_E_NOMEM);
            mr_free(a);
            mr_free(b);
            check_index(t);
        }
        if (t->n_cols > 20) {
            const char *keep[18];
            char *copies[18] = {0};
            int ok = 1;
            for (size_t q = 0; q < 18; q++) {
                copies[q] = mr_strdup(t->cols[t->n_cols - 1 - q]->name);
                ok &= copies[q] != NULL;
                keep[q] = copies[q] ? copies[q] : "";
            }
            mr_status rc = ok ? mr_table_project(t, keep, 18, NULL) : MR_E_NOMEM;
            assert_true(rc == MR_OK || rc == MR_E_NOMEM);
            for (size_t q = 0; q < 18; q++) mr_free(copies[q]);
            check_index(t);
        }
        mr_alloc_fail_after(0);
        mr_table_free(t);
        if (!failed && k > 200) break; /* past the last allocation: done */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_fixed),
        cmocka_unit_test(test_slice_strings_and_dict),
        cmocka_unit_test(test_table_ops),
        cmocka_unit_test(test_calendar_and_format),
        cmocka_unit_test(test_table_name_index),
        cmocka_unit_test(test_table_index_oom),
    };
    return mr_test_run(tests, NULL, NULL);
}
