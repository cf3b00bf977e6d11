/* Unit tests for the transform engine (src/data/transform_*.c): every step
 * kind against hand-checked results on a small table with nulls, dictionary
 * strings and dates; join kinds with NULL and duplicate keys; type errors
 * caught at bind time (the source is never called); the memory limit; limit
 * stopping the source early; and a seeded random test of aggregation and
 * sort against straightforward reference implementations, at 1, 2 and 4
 * threads (byte-identical output required). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/spec.h"
#include "millrace/table.h"
#include "millrace/transform.h"
#include "millrace/value.h"

/* ---- helpers ------------------------------------------------------------------ */

#include "columns_util.h"

/*  id | cust | day        | minutes | pages
 *   1 | a    | 2024-01-01 | 10      | 2
 *   2 | b    | 2023-12-31 | 5       | NULL
 *   3 | a    | 2024-01-02 | NULL    | 1
 *   4 | NULL | 2024-01-03 | 7       | 7
 *   5 | c    | 2024-02-01 | 3       | 0
 *   6 | b    | 2024-01-05 | 8       | 4
 *   7 | a    | NULL       | 1       | 1
 *   8 | d    | 2024-03-01 | 2       | 2      */
static mr_table *events(int dict)
{
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    const int64_t id[] = {1, 2, 3, 4, 5, 6, 7, 8};
    add(t, int_col("id", id, 8));
    const char *cust[] = {"a", "b", "a", NULL, "c", "b", "a", "d"};
    add(t, str_col("cust", cust, 8, dict));
    const char *day[] = {"2024-01-01", "2023-12-31", "2024-01-02", "2024-01-03", "2024-02-01", "2024-01-05", NULL,
                         "2024-03-01"};
    mr_column *c;
    assert_ok(mr_column_new("day", MR_T_DATE, 0, &c, NULL));
    for (int i = 0; i < 8; i++) {
        int32_t d;
        if (!day[i]) {
            assert_ok(mr_column_append_null(c));
            continue;
        }
        assert_int_equal(mr_date_parse(day[i], strlen(day[i]), &d), 0);
        assert_ok(mr_column_append_int32(c, d));
    }
    add(t, c);
    const double minutes[] = {10, 5, NAN, 7, 3, 8, 1, 2};
    assert_ok(mr_column_new("minutes", MR_T_FLOAT64, 0, &c, NULL));
    for (int i = 0; i < 8; i++)
        assert_ok(i == 2 ? mr_column_append_null(c) : mr_column_append_float64(c, minutes[i]));
    add(t, c);
    const int64_t pages[] = {2, NA, 1, 7, 0, 4, 1, 2};
    add(t, int_col("pages", pages, 8));
    return t;
}

/*  cust | name   | tier
 *  a    | Alice  | 1
 *  b    | Bob    | 2
 *  b    | Bobby  | 3
 *  NULL | Nobody | 0
 *  e    | Eve    | 1   */
static mr_table *customers(int dict)
{
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    const char *cust[] = {"a", "b", "b", NULL, "e"};
    add(t, str_col("cust", cust, 5, dict));
    const char *name[] = {"Alice", "Bob", "Bobby", "Nobody", "Eve"};
    add(t, str_col("name", name, 5, 0));
    const int64_t tier[] = {1, 2, 3, 0, 1};
    add(t, int_col("tier", tier, 5));
    return t;
}

/* Schema view of a table (arrays owned by the caller: free with schema_free). */
static mr_transform_schema schema_of(const char *name, const mr_table *t)
{
    mr_transform_schema s = {name, t->n_cols, NULL, NULL};
    const char **names = calloc(t->n_cols + 1, sizeof(char *));
    mr_dtype *types = calloc(t->n_cols + 1, sizeof(mr_dtype));
    for (size_t i = 0; i < t->n_cols; i++) {
        names[i] = t->cols[i]->name;
        types[i] = t->cols[i]->type;
    }
    s.col_names = names;
    s.col_types = types;
    return s;
}

static void schema_free(mr_transform_schema *s)
{
    free((void *)s->col_names);
    free((void *)s->col_types);
}

static mr_value *yaml(const char *text)
{
    mr_value *v = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_yaml_parse(text, strlen(text), "steps.yaml", &v, &err) != MR_OK) fail_msg("yaml: %s", err.msg);
    return v;
}

/* "a,b\n1,x\n..." */
static char *table_text(const mr_table *t)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_puts(&b, ""));
    for (size_t j = 0; j < t->n_cols; j++)
        assert_ok(mr_buf_printf(&b, "%s%s", j ? "," : "", t->cols[j]->name));
    for (size_t i = 0; i < t->n_rows; i++) {
        assert_ok(mr_buf_puts(&b, "\n"));
        for (size_t j = 0; j < t->n_cols; j++) {
            if (j) assert_ok(mr_buf_puts(&b, ","));
            assert_ok(mr_column_format(t->cols[j], i, &b));
        }
    }
    return b.data;
}

/* Parses, binds (with the customers table as join input) and runs steps over
 * events(dict) in batches of batch_rows; returns the output as text. */
static char *run_steps(const char *steps, int dict, size_t batch_rows, int threads)
{
    mr_error err;
    mr_error_init(&err);
    mr_value *v = yaml(steps);
    mr_table *ev = events(dict), *cu = customers(dict), *out = NULL;
    mr_transform *x = NULL;
    mr_transform_schema in = schema_of(NULL, ev), cs = schema_of("customers", cu);
    const mr_transform_schema *os = NULL;
    if (mr_transform_parse(v, &x, &err) != MR_OK) fail_msg("parse: %s", err.msg);
    if (mr_transform_bind(x, &in, &cs, 1, &os, &err) != MR_OK) fail_msg("bind: %s (hint %s)", err.msg, err.hint);
    mr_transform_table jt = {"customers", cu};
    mr_transform_opts o = {.threads = threads, .batch_rows = batch_rows};
    mr_transform_stats st;
    if (mr_transform_run_table(x, ev, &jt, 1, &o, &out, &st, &err) != MR_OK) fail_msg("run: %s", err.msg);
    assert_int_equal(out->n_cols, os->n_cols);
    for (size_t i = 0; i < os->n_cols; i++) {
        assert_string_equal(out->cols[i]->name, os->col_names[i]);
        assert_int_equal(out->cols[i]->type, os->col_types[i]);
    }
    assert_int_equal(st.rows_out, out->n_rows);
    char *text = table_text(out);
    mr_table_free(out);
    mr_transform_free(x);
    schema_free(&in);
    schema_free(&cs);
    mr_table_free(ev);
    mr_table_free(cu);
    mr_value_free(v);
    return text;
}

static void check_steps(const char *steps, const char *want)
{
    static const size_t batches[] = {3, 1000};
    for (int dict = 0; dict <= 1; dict++)
        for (size_t b = 0; b < 2; b++)
            for (int th = 1; th <= 2; th++) {
                char *got = run_steps(steps, dict, batches[b], th);
                if (strcmp(got, want))
                    fail_msg("steps:\n%s\n(dict %d, batch %zu, threads %d)\ngot:\n%s\nwant:\n%s", steps, dict,
                             batches[b], th, got, want);
                mr_free(got);
            }
}

/* ---- steps -------------------------------------------------------------------- */

static void test_streaming_steps(void **state)
{
    (void)state;
    check_steps("- filter: \"day >= DATE '2024-01-01'\"\n"
                "- derive: {minutes_per_page: \"minutes / pages\"}\n"
                "- select: [id, minutes_per_page]\n"
                "- rename: {id: event}\n",
                "event,minutes_per_page\n1,5\n3,NULL\n4,1\n5,NULL\n6,2\n8,1");
    /* derive entries see earlier ones; an existing name is replaced in place */
    check_steps("- derive: {pages: \"coalesce(pages, 0) * 10\", p2: \"pages + 1\", "
                "kind: \"CASE WHEN cust IS NULL THEN 'anon' WHEN cust IN ('a', 'b') THEN upper(cust) ELSE 'other' END\"}\n"
                "- select: [id, pages, p2, kind]\n",
                "id,pages,p2,kind\n1,20,21,A\n2,0,1,B\n3,10,11,A\n4,70,71,anon\n5,0,1,other\n6,40,41,B\n7,10,11,A\n"
                "8,20,21,other");
    /* rename can swap names */
    check_steps("- select: [id, pages]\n- rename: {id: pages, pages: id}\n- limit: 2\n", "pages,id\n1,2\n2,NULL");
    check_steps("- filter: \"cust = 'zzz'\"\n", "id,cust,day,minutes,pages");
    check_steps("- limit: 0\n", "id,cust,day,minutes,pages");
}

static void test_join_kinds(void **state)
{
    (void)state;
    check_steps("- join: {with: customers, on: [cust]}\n- select: [id, cust, name]\n",
                "id,cust,name\n1,a,Alice\n2,b,Bob\n2,b,Bobby\n3,a,Alice\n6,b,Bob\n6,b,Bobby\n7,a,Alice");
    check_steps("- join: {with: customers, on: cust, how: left}\n- select: [id, name, tier]\n",
                "id,name,tier\n1,Alice,1\n2,Bob,2\n2,Bobby,3\n3,Alice,1\n4,NULL,NULL\n5,NULL,NULL\n6,Bob,2\n6,Bobby,3\n"
                "7,Alice,1\n8,NULL,NULL");
    check_steps("- join: {with: customers, on: [cust], how: semi}\n- select: [id]\n", "id\n1\n2\n3\n6\n7");
    /* anti keeps the NULL-key row: NULL never matches */
    check_steps("- join: {with: customers, on: [cust], how: anti}\n- select: [id, cust]\n",
                "id,cust\n4,NULL\n5,c\n8,d");
    /* two keys */
    check_steps("- derive: {tier: pages}\n- join: {with: customers, on: [cust, tier]}\n- select: [id, name]\n",
                "id,name\n3,Alice\n7,Alice");
}

static void test_aggregate(void **state)
{
    (void)state;
    check_steps("- aggregate: {by: [cust], n: \"count()\", total: \"sum(minutes)\", avg: \"mean(minutes)\", "
                "first_day: \"min(day)\", first_id: \"first(id)\", last_id: \"last(id)\", sd: \"std(minutes)\", "
                "pages_nd: \"count_distinct(pages)\", m: \"count(minutes)\", top: \"max(cust)\"}\n",
                "cust,n,total,avg,first_day,first_id,last_id,sd,pages_nd,m,top\n"
                "a,3,11,5.5,2024-01-01,1,7,6.363961030678928,2,2,a\n"
                "b,2,13,6.5,2023-12-31,2,6,2.1213203435596424,1,2,b\n"
                "NULL,1,7,7,2024-01-03,4,4,NULL,1,1,NULL\n"
                "c,1,3,3,2024-02-01,5,5,NULL,1,1,c\n"
                "d,1,2,2,2024-03-01,8,8,NULL,1,1,d");
    check_steps("- aggregate: {n: \"count()\", pages: \"sum(pages)\", big: \"max(pages * 2)\", "
                "late: \"count(day > DATE '2024-01-02')\"}\n",
                "n,pages,big,late\n8,17,14,7");
    /* no rows: a global aggregate still gives one row (SQL), a grouped one none */
    check_steps("- filter: \"FALSE\"\n- aggregate: {n: \"count()\", s: \"sum(pages)\", f: \"first(cust)\"}\n",
                "n,s,f\n0,NULL,NULL");
    check_steps("- filter: \"FALSE\"\n- aggregate: {by: [cust], n: \"count()\"}\n", "cust,n");
    /* two keys with NULLs grouped together; then sort the groups */
    check_steps("- aggregate: {by: [cust, pages], n: \"count()\"}\n- sort: [n desc, cust, pages desc]\n",
                "cust,pages,n\na,1,2\na,2,1\nb,4,1\nb,NULL,1\nc,0,1\nd,2,1\nNULL,7,1");
    /* int64 sum overflow is NULL */
    check_steps("- derive: {big: \"9223372036854775807 - 10 + pages\"}\n- aggregate: {by: [cust], s: \"sum(big)\"}\n",
                "cust,s\na,NULL\nb,9223372036854775801\nNULL,9223372036854775804\nc,9223372036854775797\nd,9223372036854775799");
}

static void test_sort_limit(void **state)
{
    (void)state;
    /* nulls last in both directions; stable */
    check_steps("- sort: [cust, minutes desc]\n- select: [id]\n", "id\n1\n7\n3\n6\n2\n5\n8\n4");
    check_steps("- sort: [cust]\n- select: [id]\n", "id\n1\n3\n7\n2\n6\n5\n8\n4");
    check_steps("- sort: [cust desc]\n- select: [id]\n", "id\n8\n5\n2\n6\n1\n3\n7\n4");
    check_steps("- sort: [day desc]\n- limit: 3\n- select: [id]\n", "id\n8\n5\n6");
    check_steps("- limit: 3\n- sort: [id desc]\n- select: [id]\n", "id\n3\n2\n1");
}

/* ---- errors ---------------------------------------------------------------------- */

static int source_calls;
static mr_status must_not_read(void *ctx, mr_table **out, mr_error *err)
{
    (void)ctx;
    (void)err;
    source_calls++;
    fail_msg("the source was read before the error");
    *out = NULL;
    return MR_OK;
}

static mr_status collect(void *ctx, mr_table *b, mr_error *err)
{
    (void)ctx;
    (void)err;
    mr_table_free(b);
    return MR_OK;
}

static void check_bind_error(const char *steps, mr_status code, const char *msg, const char *hint, long line)
{
    mr_error err;
    mr_error_init(&err);
    mr_value *v = yaml(steps);
    mr_table *ev = events(1), *cu = customers(0);
    mr_transform *x = NULL;
    mr_transform_schema in = schema_of(NULL, ev), cs = schema_of("customers", cu);
    mr_status rc = mr_transform_parse(v, &x, &err);
    if (rc == MR_OK) rc = mr_transform_bind(x, &in, &cs, 1, NULL, &err);
    if (rc == MR_OK) {
        mr_transform_table jt = {"customers", cu};
        rc = mr_transform_run(x, must_not_read, NULL, &jt, 1, collect, NULL, NULL, NULL, &err);
    }
    if (rc != code) fail_msg("steps:\n%s\nstatus %s, want %s (%s)", steps, mr_status_name(rc), mr_status_name(code), err.msg);
    /* under torture a name in the message may print as '?' (best effort) */
    if (strcmp(err.msg, msg) && !mr_test_fault_fired()) fail_msg("steps:\n%s\nmessage:\n  \"%s\"\nwant:\n  \"%s\"", steps, err.msg, msg);
    if (hint && strcmp(err.hint, hint)) fail_msg("steps:\n%s\nhint \"%s\", want \"%s\"", steps, err.hint, hint);
    if (line && err.line != line) fail_msg("steps:\n%s\nline %ld, want %ld (%s)", steps, err.line, line, err.msg);
    mr_transform_free(x);
    schema_free(&in);
    schema_free(&cs);
    mr_table_free(ev);
    mr_table_free(cu);
    mr_value_free(v);
}

static void test_errors(void **state)
{
    (void)state;
    check_bind_error("- filter: \"id > 1\"\n- derive: {ratio: \"minuts / pages\"}\n", MR_E_NOT_FOUND,
                     "step 2 (derive 'ratio'): unknown column 'minuts'", "did you mean 'minutes'?", 2);
    check_bind_error("- filter: \"cust = 3\"\n", MR_E_SCHEMA,
                     "step 1 (filter): cannot compare string column 'cust' with int64 literal 3", NULL, 1);
    check_bind_error("- filter: \"id +\"\n", MR_E_PARSE, "step 1 (filter): column 5: expected an expression, got end of input",
                     NULL, 1);
    check_bind_error("- filter: \"id + 1\"\n", MR_E_SCHEMA, "step 1 (filter): must be boolean, got int64 expression 'id + 1'",
                     NULL, 1);
    check_bind_error("- select: [id]\n- aggregate: {by: [id], total: \"sum(cust)\"}\n", MR_E_NOT_FOUND,
                     "step 2 (aggregate 'total'): unknown column 'cust'", NULL, 2);
    check_bind_error("- aggregate: {by: [id], total: \"sum(cust)\"}\n", MR_E_SCHEMA,
                     "step 1 (aggregate 'total'): sum() needs a number, got string column 'cust'", NULL, 1);
    check_bind_error("- aggregate: {by: [id], m: \"mean(lower(cust))\"}\n", MR_E_SCHEMA,
                     "step 1 (aggregate 'm'): mean() needs a number, got string expression 'lower(cust)'", NULL, 1);
    check_bind_error("- aggregate: {by: [id], total: \"summ(pages)\"}\n", MR_E_NOT_FOUND,
                     "step 1 (aggregate): 'total': unknown aggregate function 'summ' (count, sum, mean, min, max, first, "
                     "last, std, count_distinct)",
                     "did you mean 'sum'?", 1);
    check_bind_error("- aggregate: {by: [id, custt], n: \"count()\"}\n", MR_E_NOT_FOUND,
                     "step 1 (aggregate): unknown column 'custt'", "did you mean 'cust'?", 1);
    check_bind_error("- aggregate: {by: [id], id: \"count()\"}\n", MR_E_SCHEMA,
                     "step 1 (aggregate): duplicate output column 'id'", NULL, 0);
    check_bind_error("- rename: {id: cust}\n", MR_E_SCHEMA, "step 1 (rename): duplicate output column 'cust' after renaming",
                     NULL, 1);
    check_bind_error("- rename: {idd: x}\n", MR_E_NOT_FOUND, "step 1 (rename): unknown column 'idd'", "did you mean 'id'?", 1);
    check_bind_error("- select: [id, pages, id]\n", MR_E_SCHEMA, "step 1 (select): column 'id' is listed twice", NULL, 1);
    check_bind_error("- sort: [id, \"pagez desc\"]\n", MR_E_NOT_FOUND, "step 1 (sort): unknown column 'pagez'",
                     "did you mean 'pages'?", 1);
    check_bind_error("- sort: [\"id downward\"]\n", MR_E_PARSE,
                     "step 1 (sort): sort key 'id downward': expected \"column\", \"column asc\" or \"column desc\"", NULL,
                     1);
    check_bind_error("- limit: -1\n", MR_E_PARSE, "step 1 (limit): expected a row count >= 0, got a negative number", NULL, 1);
    check_bind_error("- fitler: \"id > 1\"\n", MR_E_NOT_FOUND, "step 1: unknown step 'fitler'", "did you mean 'filter'?", 1);
    check_bind_error("- filter: \"id > 1\"\n  select: [id]\n", MR_E_PARSE,
                     "step 1: a step is a mapping with exactly one key (filter, select, rename, derive, join, aggregate, "
                     "sort, limit), got a mapping with several keys",
                     NULL, 1);
    check_bind_error("- join: {with: custmers, on: [cust]}\n", MR_E_NOT_FOUND,
                     "step 1 (join 'custmers'): unknown input 'custmers' to join with", "did you mean 'customers'?", 1);
    check_bind_error("- join: {with: customers, on: [cust], how: outer}\n", MR_E_PARSE,
                     "step 1 (join 'customers'): 'how' must be inner, left, semi or anti, got 'outer'", NULL, 1);
    check_bind_error("- join: {with: customers, on: [id]}\n", MR_E_NOT_FOUND,
                     "step 1 (join 'customers'): unknown column 'id' in 'customers'", NULL, 1);
    check_bind_error("- derive: {tier: \"'x'\"}\n- join: {with: customers, on: [cust, tier]}\n", MR_E_SCHEMA,
                     "step 2 (join 'customers'): join key 'tier' is string in the input but int64 in 'customers'", NULL,
                     2);
    check_bind_error("- rename: {id: name}\n- join: {with: customers, on: [cust]}\n", MR_E_SCHEMA,
                     "step 2 (join 'customers'): duplicate output column 'name': both inputs have it",
                     "rename or drop the column in one of the inputs before the join", 0);
    check_bind_error("- derive: {x: \"CASE WHEN pages THEN 1 END\"}\n", MR_E_SCHEMA,
                     "step 1 (derive 'x'): CASE needs a boolean condition, got int64 column 'pages'", NULL, 1);
    assert_int_equal(source_calls, 0);
}

/* A join whose build side is over the memory limit fails before any row is read. */
static void test_memory_limit(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_value *v = yaml("- join: {with: customers, on: [cust]}\n");
    mr_table *ev = events(0), *cu = customers(0);
    mr_transform *x = NULL;
    mr_transform_schema in = schema_of(NULL, ev), cs = schema_of("customers", cu);
    assert_ok(mr_transform_parse(v, &x, &err));
    assert_ok(mr_transform_bind(x, &in, &cs, 1, NULL, &err));
    mr_transform_table jt = {"customers", cu};
    mr_transform_opts o = {.memory_limit_bytes = 100};
    assert_status(mr_transform_run(x, must_not_read, NULL, &jt, 1, collect, NULL, &o, NULL, &err), MR_E_LIMIT);
    if (!strstr(err.msg, "step 1 (join 'customers'): the join build side needs about ") ||
        !strstr(err.msg, ", the limit is 100 bytes"))
        fail_msg("message: %s", err.msg);
    mr_transform_free(x);
    mr_value_free(v);
    schema_free(&in);
    schema_free(&cs);

    /* aggregation groups over the limit */
    enum { N = 100000 };
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    int64_t *k = malloc(N * sizeof(int64_t));
    for (size_t i = 0; i < N; i++) k[i] = (int64_t)i;
    add(t, int_col("k", k, N));
    free(k);
    v = yaml("- aggregate: {by: [k], n: \"count()\"}\n");
    in = schema_of(NULL, t);
    mr_error_init(&err);
    assert_ok(mr_transform_parse(v, &x, &err));
    assert_ok(mr_transform_bind(x, &in, NULL, 0, NULL, &err));
    mr_table *out = NULL;
    o.memory_limit_bytes = 1 << 20;
    assert_status(mr_transform_run_table(x, t, NULL, 0, &o, &out, NULL, &err), MR_E_LIMIT);
    if (!strstr(err.msg, "step 1 (aggregate): the aggregation groups need more than ") ||
        !strstr(err.msg, "the limit is 1 MiB"))
        fail_msg("message: %s", err.msg);
    assert_null(out);
    o.memory_limit_bytes = 0;
    mr_transform_stats st;
    mr_error_init(&err);
    assert_ok(mr_transform_run_table(x, t, NULL, 0, &o, &out, &st, &err));
    assert_int_equal(out->n_rows, N);
    assert_true(st.peak_bytes > (1 << 20));
    mr_table_free(out);
    mr_transform_free(x);
    mr_value_free(v);
    schema_free(&in);
    mr_table_free(t);
    mr_table_free(ev);
    mr_table_free(cu);
}

/* An endless source of 10-row batches: ids 0, 1, 2, ... */
typedef struct endless {
    int calls;
    int64_t next;
} endless;

static mr_status endless_source(void *ctx, mr_table **out, mr_error *err)
{
    (void)err;
    endless *e = ctx;
    e->calls++;
    assert_true(e->calls < 100);
    int64_t v[10];
    for (int i = 0; i < 10; i++) v[i] = e->next++;
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    add(t, int_col("id", v, 10));
    *out = t;
    return MR_OK;
}

static mr_status count_rows(void *ctx, mr_table *b, mr_error *err)
{
    (void)err;
    *(size_t *)ctx += b->n_rows;
    mr_table_free(b);
    return MR_OK;
}

static void test_limit_stops_early(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_value *v = yaml("- filter: \"id % 2 = 0\"\n- limit: 15\n- derive: {half: \"id / 2\"}\n");
    const char *names[] = {"id"};
    const mr_dtype types[] = {MR_T_INT64};
    mr_transform_schema in = {NULL, 1, names, types};
    mr_transform *x = NULL;
    assert_ok(mr_transform_parse(v, &x, &err));
    assert_ok(mr_transform_bind(x, &in, NULL, 0, NULL, &err));
    endless e = {0, 0};
    size_t rows = 0;
    mr_transform_stats st;
    assert_ok(mr_transform_run(x, endless_source, &e, NULL, 0, count_rows, &rows, NULL, &st, &err));
    assert_int_equal(rows, 15);
    assert_int_equal(e.calls, 3); /* 5 even ids per batch */
    assert_int_equal(st.stopped_early, 1);
    assert_int_equal(st.rows_in, 30);
    mr_transform_free(x);
    mr_value_free(v);
}

/* ---- random: aggregation and sort against references, 1/2/4 threads -------------- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

enum { RN = 50000 };

static mr_table *random_table(void)
{
    static const char *const dom[] = {"x", "yy", "", "zzz", "w", "q", "longer value"};
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    int64_t *k1 = malloc(RN * sizeof(int64_t)), *v = malloc(RN * sizeof(int64_t));
    const char **k2 = malloc(RN * sizeof(char *));
    mr_column *f;
    assert_ok(mr_column_new("f", MR_T_FLOAT64, RN, &f, NULL));
    for (size_t i = 0; i < RN; i++) {
        k1[i] = rnd() % 20 == 0 ? NA : (int64_t)(rnd() % 40);
        k2[i] = rnd() % 15 == 0 ? NULL : dom[rnd() % 7];
        v[i] = rnd() % 10 == 0 ? NA : (int64_t)(rnd() % 2001) - 1000;
        if (rnd() % 8 == 0) assert_ok(mr_column_append_null(f));
        else assert_ok(mr_column_append_float64(f, ((double)(rnd() % 1000000) - 500000) / 997.0));
    }
    add(t, int_col("k1", k1, RN));
    add(t, str_col("k2", k2, RN, 1));
    add(t, int_col("v", v, RN));
    add(t, f);
    free(k1);
    free(v);
    free(k2);
    return t;
}

static int same_key(const mr_column *c, size_t i, size_t j)
{
    int ni = mr_column_is_null(c, i), nj = mr_column_is_null(c, j);
    if (ni || nj) return ni && nj;
    if (c->type == MR_T_STRING) {
        size_t li, lj;
        const char *a = mr_column_str(c, i, &li), *b = mr_column_str(c, j, &lj);
        return li == lj && !memcmp(a, b, li);
    }
    return ((const int64_t *)c->data)[i] == ((const int64_t *)c->data)[j];
}

/* Reference aggregation, written out row by row in the obvious way. Output
 * text in the engine's format, groups in first-appearance order. */
static char *reference_agg(const mr_table *t)
{
    const mr_column *k1 = t->cols[0], *k2 = t->cols[1], *v = t->cols[2], *f = t->cols[3];
    const int64_t *vv = v->data;
    const double *ff = f->data;
    size_t *first = malloc(RN * sizeof(size_t)), n_groups = 0;
    size_t *grp = malloc(RN * sizeof(size_t));
    for (size_t i = 0; i < RN; i++) {
        size_t g = 0;
        while (g < n_groups && !(same_key(k1, first[g], i) && same_key(k2, first[g], i))) g++;
        if (g == n_groups) first[n_groups++] = i;
        grp[i] = g;
    }
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_puts(&b, "k1,k2,n,nv,sv,sf,mf,minv,maxf,firstf,lastv,sdf,ndv"));
    for (size_t g = 0; g < n_groups; g++) {
        int64_t n = 0, nv = 0, sv = 0, minv = 0, lastv_row = -1, nf = 0;
        double sf = 0, maxf = 0, firstf_row = -1;
        int has_minv = 0, has_maxf = 0;
        int64_t *seen = malloc(RN * sizeof(int64_t));
        size_t n_seen = 0;
        for (size_t i = 0; i < RN; i++) {
            if (grp[i] != g) continue;
            n++;
            if (firstf_row < 0) firstf_row = (double)i;
            lastv_row = (int64_t)i;
            if (!mr_column_is_null(v, i)) {
                nv++;
                sv += vv[i];
                if (!has_minv || vv[i] < minv) minv = vv[i];
                has_minv = 1;
                size_t k = 0;
                while (k < n_seen && seen[k] != vv[i]) k++;
                if (k == n_seen) seen[n_seen++] = vv[i];
            }
            if (!mr_column_is_null(f, i)) {
                nf++;
                sf += ff[i];
                if (!has_maxf || ff[i] > maxf) maxf = ff[i];
                has_maxf = 1;
            }
        }
        double mean = nf ? sf / (double)nf : 0, ss = 0;
        for (size_t i = 0; i < RN; i++)
            if (grp[i] == g && !mr_column_is_null(f, i)) ss += (ff[i] - mean) * (ff[i] - mean);
        assert_ok(mr_buf_puts(&b, "\n"));
        assert_ok(mr_column_format(k1, first[g], &b));
        assert_ok(mr_buf_puts(&b, ","));
        assert_ok(mr_column_format(k2, first[g], &b));
        /* floats compared with a tolerance: print them with 9 significant digits */
        assert_ok(mr_buf_printf(&b, ",%lld,%lld,", (long long)n, (long long)nv));
        if (nv) assert_ok(mr_buf_printf(&b, "%lld", (long long)sv));
        else assert_ok(mr_buf_puts(&b, "NULL"));
        if (nf) assert_ok(mr_buf_printf(&b, ",%.9g,%.9g", sf, mean));
        else assert_ok(mr_buf_puts(&b, ",NULL,NULL"));
        if (has_minv) assert_ok(mr_buf_printf(&b, ",%lld", (long long)minv));
        else assert_ok(mr_buf_puts(&b, ",NULL"));
        if (has_maxf) assert_ok(mr_buf_printf(&b, ",%.9g", maxf));
        else assert_ok(mr_buf_puts(&b, ",NULL"));
        size_t fr = (size_t)firstf_row;
        if (mr_column_is_null(f, fr)) assert_ok(mr_buf_puts(&b, ",NULL"));
        else assert_ok(mr_buf_printf(&b, ",%.9g", ff[fr]));
        assert_ok(mr_buf_puts(&b, ","));
        assert_ok(mr_column_format(v, (size_t)lastv_row, &b));
        if (nf > 1) assert_ok(mr_buf_printf(&b, ",%.9g", sqrt(ss / (double)(nf - 1))));
        else assert_ok(mr_buf_puts(&b, ",NULL"));
        assert_ok(mr_buf_printf(&b, ",%zu", n_seen));
        free(seen);
    }
    free(first);
    free(grp);
    return b.data;
}

/* The engine's output reprinted with floats at 9 significant digits. */
static char *agg_text_9g(const mr_table *t)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_puts(&b, ""));
    for (size_t j = 0; j < t->n_cols; j++)
        assert_ok(mr_buf_printf(&b, "%s%s", j ? "," : "", t->cols[j]->name));
    for (size_t i = 0; i < t->n_rows; i++) {
        assert_ok(mr_buf_puts(&b, "\n"));
        for (size_t j = 0; j < t->n_cols; j++) {
            const mr_column *c = t->cols[j];
            if (j) assert_ok(mr_buf_puts(&b, ","));
            if (c->type == MR_T_FLOAT64 && !mr_column_is_null(c, i))
                assert_ok(mr_buf_printf(&b, "%.9g", ((const double *)c->data)[i]));
            else
                assert_ok(mr_column_format(c, i, &b));
        }
    }
    return b.data;
}

static int cmp_ref_sort(const mr_table *t, size_t a, size_t b)
{
    /* sort: [k2, v desc], nulls last, stable (index tiebreak) */
    const mr_column *k2 = t->cols[1], *v = t->cols[2];
    int na = mr_column_is_null(k2, a), nb = mr_column_is_null(k2, b);
    if (na != nb) return na ? 1 : -1;
    if (!na) {
        size_t la, lb;
        const char *sa = mr_column_str(k2, a, &la), *sb = mr_column_str(k2, b, &lb);
        int r = memcmp(sa, sb, la < lb ? la : lb);
        if (!r) r = (la > lb) - (la < lb);
        if (r) return r;
    }
    na = mr_column_is_null(v, a);
    nb = mr_column_is_null(v, b);
    if (na != nb) return na ? 1 : -1;
    if (!na) {
        int64_t x = ((const int64_t *)v->data)[a], y = ((const int64_t *)v->data)[b];
        if (x != y) return x > y ? -1 : 1;
    }
    return (a > b) - (a < b);
}

static const mr_table *sort_table;
static int qsort_cmp(const void *x, const void *y)
{
    return cmp_ref_sort(sort_table, *(const size_t *)x, *(const size_t *)y);
}

static char *run_random(const mr_table *t, const char *steps, int threads, size_t batch)
{
    mr_error err;
    mr_error_init(&err);
    mr_value *v = yaml(steps);
    mr_transform *x = NULL;
    mr_transform_schema in = schema_of(NULL, t);
    assert_ok(mr_transform_parse(v, &x, &err));
    if (mr_transform_bind(x, &in, NULL, 0, NULL, &err) != MR_OK) fail_msg("bind: %s", err.msg);
    mr_transform_opts o = {.threads = threads, .batch_rows = batch};
    mr_table *out = NULL;
    if (mr_transform_run_table(x, t, NULL, 0, &o, &out, NULL, &err) != MR_OK) fail_msg("run: %s", err.msg);
    char *text = table_text(out);
    mr_table_free(out);
    mr_transform_free(x);
    schema_free(&in);
    mr_value_free(v);
    return text;
}

static void test_random_vs_reference(void **state)
{
    (void)state;
    const char *env = getenv("MILLRACE_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : 20240601;
    rng_state = seed ? seed : 1;
    print_message("test_random_vs_reference: seed %llu (set MILLRACE_TEST_SEED to change)\n", (unsigned long long)seed);
    mr_table *t = random_table();
    const char *agg = "- aggregate: {by: [k1, k2], n: \"count()\", nv: \"count(v)\", sv: \"sum(v)\", sf: \"sum(f)\", "
                      "mf: \"mean(f)\", minv: \"min(v)\", maxf: \"max(f)\", firstf: \"first(f)\", lastv: \"last(v)\", "
                      "sdf: \"std(f)\", ndv: \"count_distinct(v)\"}\n";
    const char *srt = "- sort: [k2, v desc]\n";
    char *agg1 = NULL, *srt1 = NULL;
    static const int threads[] = {1, 2, 4};
    for (size_t ti = 0; ti < 3; ti++) {
        mr_pool_shutdown();
        assert_ok(mr_pool_init(threads[ti], NULL));
        char *a = run_random(t, agg, threads[ti], 20000);
        char *s = run_random(t, srt, threads[ti], 20000);
        if (!agg1) {
            agg1 = a;
            srt1 = s;
            continue;
        }
        if (strcmp(a, agg1)) fail_msg("aggregate output differs between 1 and %d threads", threads[ti]);
        if (strcmp(s, srt1)) fail_msg("sort output differs between 1 and %d threads", threads[ti]);
        mr_free(a);
        mr_free(s);
    }
    mr_pool_shutdown();

    /* aggregate vs the reference */
    char *ref = reference_agg(t);
    mr_error err;
    mr_error_init(&err);
    mr_value *v = yaml(agg);
    mr_transform *x = NULL;
    mr_transform_schema in = schema_of(NULL, t);
    assert_ok(mr_transform_parse(v, &x, &err));
    assert_ok(mr_transform_bind(x, &in, NULL, 0, NULL, &err));
    mr_transform_opts o = {.threads = 1, .batch_rows = 20000};
    mr_table *out = NULL;
    assert_ok(mr_transform_run_table(x, t, NULL, 0, &o, &out, NULL, &err));
    char *got = agg_text_9g(out);
    if (strcmp(got, ref)) {
        /* show the first differing line */
        const char *g = got, *r = ref;
        while (*g && *g == *r) {
            g++;
            r++;
        }
        fail_msg("aggregate differs from the reference near:\n  got: %.120s\n  ref: %.120s", g, r);
    }
    mr_free(got);
    mr_free(ref);
    mr_table_free(out);
    mr_transform_free(x);
    mr_value_free(v);
    schema_free(&in);

    /* sort vs qsort with an index tiebreak (a stable order) */
    size_t *idx = malloc(RN * sizeof(size_t));
    for (size_t i = 0; i < RN; i++) idx[i] = i;
    sort_table = t;
    qsort(idx, RN, sizeof(size_t), qsort_cmp);
    uint32_t *idx32 = malloc(RN * sizeof(uint32_t));
    for (size_t i = 0; i < RN; i++) idx32[i] = (uint32_t)idx[i];
    mr_table *sorted = NULL;
    assert_ok(mr_table_take(t, idx32, RN, &sorted, NULL));
    sorted->n_rows = RN;
    char *want = table_text(sorted);
    if (strcmp(want, srt1)) fail_msg("sort differs from the reference");
    mr_free(want);
    mr_table_free(sorted);
    free(idx);
    free(idx32);
    mr_free(agg1);
    mr_free(srt1);
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streaming_steps),
        cmocka_unit_test(test_join_kinds),
        cmocka_unit_test(test_aggregate),
        cmocka_unit_test(test_sort_limit),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_limit_stops_early),
        cmocka_unit_test(test_random_vs_reference),
    };
    return mr_test_run(tests, NULL, NULL);
}
