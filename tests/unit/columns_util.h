/* Column and table builders shared by the unit tests of expressions and
 * transforms, and the string check of the CSV and JSON lines readers (each
 * test is its own executable: static inline, header only).
 * Include after <cmocka.h> and millrace/table.h. */
#ifndef MILLRACE_TEST_COLUMNS_UTIL_H
#define MILLRACE_TEST_COLUMNS_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void add(mr_table *t, mr_column *c)
{
    mr_error err;
    mr_error_init(&err);
    if (mr_table_add_column(t, c, &err) != MR_OK) fail_msg("add column: %s", err.msg);
}

#define NA INT64_MIN /* marks a null in the int helpers below */

static inline mr_column *int_col(const char *name, const int64_t *v, size_t n)
{
    mr_column *c;
    assert_ok(mr_column_new(name, MR_T_INT64, n, &c, NULL));
    for (size_t i = 0; i < n; i++) assert_ok(v[i] == NA ? mr_column_append_null(c) : mr_column_append_int64(c, v[i]));
    return c;
}

static inline mr_column *bool_col(const char *name, const int *v, size_t n) /* -1 = null */
{
    mr_column *c;
    assert_ok(mr_column_new(name, MR_T_BOOL, n, &c, NULL));
    for (size_t i = 0; i < n; i++) assert_ok(v[i] < 0 ? mr_column_append_null(c) : mr_column_append_bool(c, v[i]));
    return c;
}

static inline mr_column *str_col(const char *name, const char *const *v, size_t n, int dict)
{
    mr_column *c;
    if (!dict) {
        assert_ok(mr_column_new(name, MR_T_STRING, n, &c, NULL));
        for (size_t i = 0; i < n; i++)
            assert_ok(v[i] ? mr_column_append_str(c, v[i], strlen(v[i])) : mr_column_append_null(c));
        return c;
    }
    mr_column *d;
    assert_ok(mr_column_new("dict", MR_T_STRING, 0, &d, NULL));
    int32_t *codes = calloc(n ? n : 1, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        if (!v[i]) continue;
        size_t k = 0;
        while (k < d->n) {
            size_t len;
            const char *s = mr_column_str(d, k, &len);
            if (len == strlen(v[i]) && !memcmp(s, v[i], len)) break;
            k++;
        }
        if (k == d->n) assert_ok(mr_column_append_str(d, v[i], strlen(v[i])));
        codes[i] = (int32_t)k;
    }
    assert_ok(mr_column_new_dict(name, d, n, &c, NULL));
    for (size_t i = 0; i < n; i++)
        assert_ok(v[i] ? mr_column_append_code(c, codes[i]) : mr_column_append_null(c));
    free(codes);
    return c;
}

/* Asserts that row `row` of string column `col` is `want` (NULL: null). */
static inline void check_str(const mr_table *t, size_t col, size_t row, const char *want)
{
    const mr_column *c = t->cols[col];
    assert_int_equal(c->type, MR_T_STRING);
    if (!want) {
        assert_true(mr_column_is_null(c, row));
        return;
    }
    assert_false(mr_column_is_null(c, row));
    size_t len;
    const char *s = mr_column_str(c, row, &len);
    if (len != strlen(want) || memcmp(s, want, len)) fail_msg("row %zu col %zu: got '%.*s', want '%s'", row, col, (int)len, s, want);
}

#endif
