/* Unit tests for the JSON-lines reader (src/data/jsonl.c): key union and
 * order, inference, nested values as JSON text, declared types and their
 * errors, bad lines with skip/quarantine, and thread-count independence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "millrace/jsonl.h"
#include "millrace/table.h"

#include "columns_util.h"

static char tmp_path[256];

static const char *write_tmp(const char *name, const char *data)
{
    snprintf(tmp_path, sizeof(tmp_path), "%s/mr_test_jsonl_%ld_%s", mr_test_tmpdir(), (long)getpid(), name);
    FILE *f = fopen(tmp_path, "wb");
    assert_non_null(f);
    fputs(data, f);
    fclose(f);
    return tmp_path;
}

static mr_table *read_ok(const char *text, const mr_jsonl_options *o, mr_csv_stats *st)
{
    const char *p = write_tmp("in.jsonl", text);
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    if (mr_jsonl_read(p, o, &t, st, &err) != MR_OK) {
        char b[1024];
        mr_error_format(&err, b, sizeof(b));
        fail_msg("read failed: %s", b);
    }
    unlink(p);
    return t;
}

static mr_status read_err(const char *text, const mr_jsonl_options *o, char *msg, size_t msg_len)
{
    const char *p = write_tmp("in.jsonl", text);
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    mr_status rc = mr_jsonl_read(p, o, &t, NULL, &err);
    assert_int_not_equal(rc, MR_OK);
    assert_null(t);
    snprintf(err.file, sizeof(err.file), "F");
    mr_error_format(&err, msg, msg_len);
    unlink(p);
    return rc;
}


static void test_basic(void **state)
{
    (void)state;
    mr_table *t = read_ok("{\"a\": 1, \"b\": \"x\", \"c\": true}\n"
                          "\n"
                          "{\"b\": \"y\", \"a\": 2.5, \"d\": \"2024-01-02\"}\r\n"
                          "{\"a\": null, \"e\": {\"k\": [1, 2]}, \"f\": 3}\n"
                          "{\"f\": \"three\", \"d\": null}",
                          NULL, NULL);
    assert_int_equal(t->n_rows, 4);
    assert_int_equal(t->n_cols, 6);
    const char *names[] = {"a", "b", "c", "d", "e", "f"};
    const mr_dtype types[] = {MR_T_FLOAT64, MR_T_STRING, MR_T_BOOL, MR_T_DATE, MR_T_STRING, MR_T_STRING};
    for (size_t j = 0; j < 6; j++) {
        assert_string_equal(t->cols[j]->name, names[j]);
        assert_int_equal(t->cols[j]->type, types[j]);
    }
    assert_true(((double *)t->cols[0]->data)[1] == 2.5);
    assert_true(mr_column_is_null(t->cols[0], 2));
    check_str(t, 1, 1, "y");
    assert_true(mr_column_is_null(t->cols[2], 1));
    assert_int_equal(((int32_t *)t->cols[3]->data)[1], mr_date_from_civil(2024, 1, 2));
    check_str(t, 4, 2, "{\"k\":[1,2]}");
    check_str(t, 5, 0, NULL);
    check_str(t, 5, 2, "3");
    check_str(t, 5, 3, "three");
    mr_table_free(t);
    /* f: 3 then "three" -> string with JSON text "3"; last line missing others */
    t = read_ok("{\"f\": 3}\n{\"f\": \"three\"}\n", NULL, NULL);
    check_str(t, 0, 0, "3");
    check_str(t, 0, 1, "three");
    mr_table_free(t);
    t = read_ok("", NULL, NULL);
    assert_int_equal(t->n_cols, 0);
    mr_table_free(t);
}

/* Timestamps in strings: naive unless one carries an offset (as in CSV). */
static void test_timestamp_offsets(void **state)
{
    (void)state;
    mr_table *t = read_ok("{\"n\": \"2024-03-01 12:00:00\", \"u\": \"2024-03-01 12:00:00\"}\n"
                          "{\"n\": \"2024-03-02T00:00:00.25\", \"u\": \"2024-03-01T12:00:00+01:00\"}\n",
                          NULL, NULL);
    assert_int_equal(t->cols[0]->type, MR_T_TIMESTAMP);
    assert_int_equal(t->cols[1]->type, MR_T_TIMESTAMP);
    assert_true(t->cols[0]->kind.flags & MR_KIND_LOCAL);
    assert_false(t->cols[1]->kind.flags & MR_KIND_LOCAL);
    int64_t noon = ((int64_t)mr_date_from_civil(2024, 3, 1) * 86400 + 43200) * 1000000;
    assert_true(((int64_t *)t->cols[1]->data)[1] == noon - 3600000000LL);
    mr_table_free(t);
}

/* A declared decimal takes numbers that are the double nearest a value of
 * its scale, integers and strings; others misfit (bad rows). */
static void test_declared_decimal(void **state)
{
    (void)state;
    const char *names[] = {"d", "i"};
    const mr_dtype types[] = {MR_T_DECIMAL, MR_T_INT64};
    const mr_colkind kinds[] = {{.precision = 5, .scale = 2}, {.int_bits = 16, .flags = MR_KIND_UNSIGNED}};
    mr_jsonl_options o;
    mr_jsonl_options_init(&o);
    o.schema_names = names;
    o.schema_types = types;
    o.schema_kinds = kinds;
    o.n_schema = 2;
    o.on_error = MR_ON_ERROR_SKIP;
    mr_csv_stats st;
    memset(&st, 0, sizeof st);
    mr_table *t = read_ok("{\"d\": 1.25, \"i\": 0}\n{\"d\": 3, \"i\": 65535}\n{\"d\": \"-4.50\", \"i\": \"7\"}\n"
                          "{\"d\": 1.1, \"i\": 1}\n{\"d\": 0.125, \"i\": 1}\n{\"d\": 1000, \"i\": 1}\n{\"d\": 1, \"i\": -1}\n"
                          "{\"d\": 1, \"i\": 65536}\n",
                          &o, &st);
    assert_int_equal(t->n_rows, 4);
    assert_int_equal(st.rows_skipped, 4);
    const int64_t want[] = {125, 300, -450, 110};
    for (size_t i = 0; i < 4; i++) assert_true(((int64_t *)t->cols[0]->data)[i] == want[i]);
    assert_int_equal(t->cols[0]->kind.scale, 2);
    assert_true(((int64_t *)t->cols[1]->data)[1] == 65535);
    mr_table_free(t);
}

static void test_errors(void **state)
{
    (void)state;
    char msg[512];
    assert_status(read_err("{\"a\": 1}\n{\"a\": 2,}\n", NULL, msg, sizeof(msg)), MR_E_PARSE);
    assert_non_null(strstr(msg, "F:2:"));
    assert_non_null(strstr(msg, "invalid JSON"));
    assert_status(read_err("{\"a\": 1}\n[1]\n", NULL, msg, sizeof(msg)), MR_E_PARSE);
    assert_string_equal(msg, "F:2: expected a JSON object, got an array");
    const char *names[] = {"age"};
    const mr_dtype types[] = {MR_T_INT64};
    mr_jsonl_options o;
    mr_jsonl_options_init(&o);
    o.schema_names = names;
    o.schema_types = types;
    o.n_schema = 1;
    assert_status(read_err("{\"age\": 1}\n{\"age\": \"42\"}\n\n{\"age\": \"n/a\"}\n", &o, msg, sizeof(msg)), MR_E_PARSE);
    assert_string_equal(msg, "F:4: column 'age': expected int64, got \"n/a\"");
    assert_status(read_err("{\"age\": 1.5}\n", &o, msg, sizeof(msg)), MR_E_PARSE);
    assert_string_equal(msg, "F:1: column 'age': expected int64, got \"1.5\"");
}

static void test_skip_quarantine(void **state)
{
    (void)state;
    char qpath[256];
    snprintf(qpath, sizeof(qpath), "%s/mr_test_jsonl_%ld_q", mr_test_tmpdir(), (long)getpid());
    const char *names[] = {"n"};
    const mr_dtype types[] = {MR_T_INT64};
    mr_jsonl_options o;
    mr_jsonl_options_init(&o);
    o.schema_names = names;
    o.schema_types = types;
    o.n_schema = 1;
    o.on_error = MR_ON_ERROR_QUARANTINE;
    o.quarantine_path = qpath;
    const char *text = "{\"n\": 1}\n{bad\n{\"n\": \"x\"}\n{\"n\": 4}\n";
    for (int chunk = 0; chunk < 2; chunk++) {
        o.chunk_size = chunk ? 4 : 0;
        for (int threads = 1; threads <= 4; threads *= 2) {
            o.threads = threads;
            mr_csv_stats st;
            mr_table *t = read_ok(text, &o, &st);
            assert_int_equal(t->n_rows, 2);
            assert_int_equal(((int64_t *)t->cols[0]->data)[1], 4);
            assert_int_equal(st.rows_skipped, 2);
            assert_int_equal(st.rows_quarantined, 2);
            mr_table_free(t);
            char *q = NULL;
            size_t qlen;
            assert_ok(mr_fs_read_file(qpath, 1 << 20, &q, &qlen, NULL));
            assert_string_equal(q, "{bad\n{\"n\": \"x\"}\n");
            mr_free(q);
        }
    }
    unlink(qpath);
}

int main(void)
{
    mr_pool_init(4, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_timestamp_offsets),
        cmocka_unit_test(test_declared_decimal),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_skip_quarantine),
    };
    int rc = mr_test_run(tests, NULL, NULL);
    mr_pool_shutdown();
    return rc;
}
