/* Unit tests for the expression engine (src/data/expr_*.c): parsing and
 * canonical printing, parse and type errors, evaluation against
 * hand-computed results (nulls, dictionary strings, dates, timestamps),
 * three-valued logic, the dictionary fast path against plain strings,
 * statistics pruning (a seeded property test), and OOM handling. */
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

#include "millrace/expr.h"
#include "millrace/table.h"

#include <xxhash.h>

/* ---- helpers ------------------------------------------------------------- */

static mr_expr *parse_ok(const char *text)
{
    mr_error err;
    mr_error_init(&err);
    mr_expr *e = NULL;
    if (mr_expr_parse(text, strlen(text), "filter", &e, &err) != MR_OK)
        fail_msg("parse of \"%s\" failed: %s", text, err.msg);
    return e;
}

/* Caller frees. */
static char *print_of(const mr_expr *e)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_expr_print(e, &b));
    return b.data;
}

static void check_print(const char *in, const char *want)
{
    mr_expr *e = parse_ok(in);
    char *got = print_of(e);
    if (strcmp(got, want)) fail_msg("print(parse(\"%s\")):\n  got  \"%s\"\n  want \"%s\"", in, got, want);
    mr_expr *e2 = parse_ok(got);
    char *again = print_of(e2);
    if (strcmp(again, got)) fail_msg("round trip of \"%s\" printed \"%s\"", got, again);
    mr_free(got);
    mr_free(again);
    mr_expr_free(e);
    mr_expr_free(e2);
}

static void check_parse_error(const char *in, mr_status code, long col, const char *msg)
{
    mr_error err;
    mr_error_init(&err);
    mr_expr *e = NULL;
    mr_status rc = mr_expr_parse(in, strlen(in), "filter", &e, &err);
    if (rc != code)
        fail_msg("parse of \"%s\": status %s, want %s (%s)", in, mr_status_name(rc), mr_status_name(code), err.msg);
    assert_null(e);
    if (!strstr(err.msg, msg)) fail_msg("parse of \"%s\": message \"%s\" lacks \"%s\"", in, err.msg, msg);
    if (col && err.col != col) fail_msg("parse of \"%s\": col %ld, want %ld (%s)", in, err.col, col, err.msg);
}

#include "columns_util.h"

/*  r | x    | f     | s          | country | d          | ts                    | b     | f32
 *  0 | 1    | 1.5   | apple      | FR      | 2024-01-31 | 2024-01-31 12:00:00   | true  | 0.5
 *  1 | -2   | NULL  | Banana     | DE      | 2024-02-29 | NULL                  | false | 1
 *  2 | NULL | 0     | NULL       | NULL    | NULL       | 2023-12-31 23:59:59   | NULL  | 2
 *  3 | 10   | -3.25 | ''         | FR      | 2023-06-15 | 2024-06-15 00:00:00   | true  | NULL
 *  4 | 7    | 2     | it's       | US      | 2024-01-01 | 2024-01-01 00:00:00.5 | false | 4
 *  5 | 0    | 100   | APPLE pie  | DE      | 2025-03-01 | 2025-03-01 00:00:00   | NULL  | 5   */
#define N_ROWS 6
static mr_table *sample_table(int dict)
{
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    const int64_t x[] = {1, -2, NA, 10, 7, 0};
    add(t, int_col("x", x, N_ROWS));
    mr_column *c;
    const double f[] = {1.5, NAN, 0, -3.25, 2, 100};
    assert_ok(mr_column_new("f", MR_T_FLOAT64, 0, &c, NULL));
    for (int i = 0; i < N_ROWS; i++) assert_ok(i == 1 ? mr_column_append_null(c) : mr_column_append_float64(c, f[i]));
    add(t, c);
    const char *s[] = {"apple", "Banana", NULL, "", "it's", "APPLE pie"};
    add(t, str_col("s", s, N_ROWS, 0));
    const char *country[] = {"FR", "DE", NULL, "FR", "US", "DE"};
    add(t, str_col("country", country, N_ROWS, dict));
    const char *d[] = {"2024-01-31", "2024-02-29", NULL, "2023-06-15", "2024-01-01", "2025-03-01"};
    assert_ok(mr_column_new("d", MR_T_DATE, 0, &c, NULL));
    for (int i = 0; i < N_ROWS; i++) {
        int32_t days;
        if (!d[i]) {
            assert_ok(mr_column_append_null(c));
            continue;
        }
        assert_int_equal(mr_date_parse(d[i], strlen(d[i]), &days), 0);
        assert_ok(mr_column_append_int32(c, days));
    }
    add(t, c);
    const char *ts[] = {"2024-01-31 12:00:00", NULL, "2023-12-31 23:59:59", "2024-06-15 00:00:00",
                        "2024-01-01 00:00:00.5", "2025-03-01 00:00:00"};
    assert_ok(mr_column_new("ts", MR_T_TIMESTAMP, 0, &c, NULL));
    for (int i = 0; i < N_ROWS; i++) {
        int64_t us;
        if (!ts[i]) {
            assert_ok(mr_column_append_null(c));
            continue;
        }
        assert_int_equal(mr_timestamp_parse(ts[i], strlen(ts[i]), &us), 0);
        assert_ok(mr_column_append_int64(c, us));
    }
    add(t, c);
    const int b[] = {1, 0, -1, 1, 0, -1};
    add(t, bool_col("b", b, N_ROWS));
    const float f32[] = {0.5f, 1, 2, 0, 4, 5};
    assert_ok(mr_column_new("f32", MR_T_FLOAT32, 0, &c, NULL));
    for (int i = 0; i < N_ROWS; i++) assert_ok(i == 3 ? mr_column_append_null(c) : mr_column_append_float32(c, f32[i]));
    add(t, c);
    const int64_t odd[] = {1, 2, 3, 4, 5, 6};
    add(t, int_col("odd name", odd, N_ROWS));
    return t;
}

static mr_expr *bound(const char *text, const mr_table *t, unsigned flags)
{
    mr_expr *e = parse_ok(text);
    mr_error err;
    mr_error_init(&err);
    if (mr_expr_bind_table(e, t, flags, &err) != MR_OK) fail_msg("bind of \"%s\" failed: %s", text, err.msg);
    return e;
}

/* Selected row numbers as "0,3,4". Caller frees. */
static char *filter_rows(const char *text, const mr_table *t)
{
    mr_expr *e = bound(text, t, MR_EXPR_FILTER);
    mr_error err;
    mr_error_init(&err);
    uint8_t *mask = malloc(t->n_rows + 1);
    if (mr_expr_eval_filter(e, t, mask, &err) != MR_OK) fail_msg("eval of \"%s\" failed: %s", text, err.msg);
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_puts(&b, ""));
    for (size_t i = 0; i < t->n_rows; i++) {
        assert_true(mask[i] == 0 || mask[i] == 1);
        if (mask[i]) assert_ok(mr_buf_printf(&b, "%s%zu", b.len ? "," : "", i));
    }
    free(mask);
    mr_expr_free(e);
    return b.data;
}

static void check_filter(const mr_table *t, const char *text, const char *want)
{
    char *got = filter_rows(text, t);
    if (strcmp(got, want)) fail_msg("filter \"%s\": rows \"%s\", want \"%s\"", text, got, want);
    mr_free(got);
}

/* Values of the evaluated column as "a,b,NULL". Caller frees. */
static char *eval_values(const char *text, const mr_table *t, mr_dtype *type_out)
{
    mr_expr *e = bound(text, t, 0);
    mr_error err;
    mr_error_init(&err);
    mr_column *c = NULL;
    if (mr_expr_eval(e, t, &c, &err) != MR_OK) fail_msg("eval of \"%s\" failed: %s", text, err.msg);
    assert_int_equal(c->n, t->n_rows);
    if (type_out) *type_out = c->type;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_puts(&b, ""));
    size_t nulls = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (i) assert_ok(mr_buf_puts(&b, ","));
        assert_ok(mr_column_format(c, i, &b));
        nulls += mr_column_is_null(c, i);
    }
    assert_int_equal(nulls, c->null_count);
    mr_column_free(c);
    mr_expr_free(e);
    return b.data;
}

static void check_eval(const mr_table *t, const char *text, mr_dtype type, const char *want)
{
    mr_dtype got_t;
    char *got = eval_values(text, t, &got_t);
    if (strcmp(got, want)) fail_msg("eval \"%s\":\n  got  \"%s\"\n  want \"%s\"", text, got, want);
    if (got_t != type) fail_msg("eval \"%s\": type %s, want %s", text, mr_dtype_name(got_t), mr_dtype_name(type));
    mr_free(got);
}

/* ---- parsing and printing ------------------------------------------------- */

static void test_parse_print(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"a + b * c", "a + b * c"},
        {"(a + b) * c", "(a + b) * c"},
        {"a - b - c", "a - b - c"},
        {"a - (b - c)", "a - (b - c)"},
        {"a / b / c", "a / b / c"},
        {"a * (b % c)", "a * (b % c)"},
        {"NOT a = 1 AND b OR c", "NOT a = 1 AND b OR c"},
        {"a or (b or c)", "a OR b OR c"},
        {"(a and b) and (c and d)", "a AND b AND c AND d"},
        {"a and (b or c)", "a AND (b OR c)"},
        {"(a and b) or c", "a AND b OR c"},
        {"NOT (a AND b)", "NOT (a AND b)"},
        {"not not a", "NOT NOT a"},
        {"(a = b) = c", "(a = b) = c"},
        {"a = (b = c)", "a = (b = c)"},
        {"x <> 3", "x != 3"},
        {"x == 3", "x = 3"},
        {"x>=3", "x >= 3"},
        {"-x * 2", "-x * 2"},
        {"-(x * 2)", "-(x * 2)"},
        {"- 5", "-5"},
        {"-(-5)", "5"},
        {"- -x", "- -x"},
        {"-(-(-x))", "- - -x"},
        {"+x", "x"},
        {"a - -5", "a - -5"},
        {"-9223372036854775808", "-9223372036854775808"},
        {"-(-9223372036854775808)", "- -9223372036854775808"},
        {"1e3", "1000.0"},
        {"1.0", "1.0"},
        {".5", "0.5"},
        {"0.1", "0.1"},
        {"-0.0", "-0.0"},
        {"1.5e-7", "1.5e-07"},
        {"x in (1,2,3)", "x IN (1, 2, 3)"},
        {"x not in ('a')", "x NOT IN ('a')"},
        {"x is null", "x IS NULL"},
        {"x IS NOT NULL", "x IS NOT NULL"},
        {"x between 1 and 2+3", "x BETWEEN 1 AND 2 + 3"},
        {"x not between -1 and 2", "x NOT BETWEEN -1 AND 2"},
        {"x BETWEEN 1 AND 2 AND y", "x BETWEEN 1 AND 2 AND y"},
        {"LOWER(s) = 'it''s'", "lower(s) = 'it''s'"},
        {"\"odd name\" > 1.50", "\"odd name\" > 1.5"},
        {"\"and\" = 1", "\"and\" = 1"},
        {"\"x\" = 1", "x = 1"},
        {"\"a\"\"b\" = 1", "\"a\"\"b\" = 1"},
        {"date = DATE '2024-01-31'", "date = DATE '2024-01-31'"},
        {"ts >= timestamp '2024-01-31T12:00:00Z'", "ts >= TIMESTAMP '2024-01-31 12:00:00'"},
        {"TIMESTAMP '2024-01-31 12:00:00+01:00'", "TIMESTAMP '2024-01-31 11:00:00'"},
        {"TIMESTAMP '2024-01-31 12:00:00.25'", "TIMESTAMP '2024-01-31 12:00:00.250000'"},
        {"coalesce(a, b, 0)", "coalesce(a, b, 0)"},
        {"Contains(s, 'x') AND year(d) = 2024", "contains(s, 'x') AND year(d) = 2024"},
        {"TRUE and false", "TRUE AND FALSE"},
        {"null", "NULL"},
        {"x IN (a OR b, 1)", "x IN (a OR b, 1)"},
        {"(x + 1) IS NULL", "x + 1 IS NULL"},
        {"NOT x IS NULL", "NOT x IS NULL"},
        {"x = 'tab\there'", "x = 'tab\there'"},
        {"((((x))))", "x"},
        {"case when x > 1 then 'a' when x is null then 'n' else 'b' end",
         "CASE WHEN x > 1 THEN 'a' WHEN x IS NULL THEN 'n' ELSE 'b' END"},
        {"CASE WHEN a OR b THEN 1 END + 2", "CASE WHEN a OR b THEN 1 END + 2"},
        {"CASE WHEN a THEN CASE WHEN b THEN 1 END END", "CASE WHEN a THEN CASE WHEN b THEN 1 END END"},
        {"CASE WHEN a THEN \"case\" WHEN b THEN 2 END", "CASE WHEN a THEN \"case\" WHEN b THEN 2 END"},
        {"case + end", "\"case\" + \"end\""},
        {"CASE WHEN when THEN then ELSE else END", "CASE WHEN \"when\" THEN \"then\" ELSE \"else\" END"},
        {"IF(x > 0, 1, 2)", "if(x > 0, 1, 2)"},
        {"clip(x, 0, 1) + days_between(d, e) + hash(s) + dayofweek(d) + hour(t)",
         "clip(x, 0, 1) + days_between(d, e) + hash(s) + dayofweek(d) + hour(t)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_print(cases[i][0], cases[i][1]);
}

static void test_parse_errors(void **state)
{
    (void)state;
    check_parse_error("x IN (1, 2", MR_E_PARSE, 11, "filter: column 11: expected ')' after IN list, got end of input");
    check_parse_error("CASE WHEN x THEN 1", MR_E_PARSE, 19, "expected WHEN, ELSE or END in CASE, got end of input");
    check_parse_error("CASE WHEN x 1 END", MR_E_PARSE, 13, "expected THEN after the WHEN condition, got number 1");
    check_parse_error("CASE WHEN x THEN 1 ELSE 2", MR_E_PARSE, 26, "expected END after the ELSE value");
    check_parse_error("if(x, 1)", MR_E_PARSE, 1, "if() takes 3 arguments, got 2");
    check_parse_error("country = 'FR' AND x IN (1, 2", MR_E_PARSE, 30, "column 30: expected ')' after IN list");
    check_parse_error("x IN (1 2)", MR_E_PARSE, 9, "expected ',' or ')' after IN list, got number 2");
    check_parse_error("x IN ()", MR_E_PARSE, 7, "expected an expression, got ')'");
    check_parse_error("x IN 1", MR_E_PARSE, 6, "expected '(' to start IN list, got number 1");
    check_parse_error("a +", MR_E_PARSE, 4, "column 4: expected an expression, got end of input");
    check_parse_error("a = 'abc", MR_E_PARSE, 5, "column 5: unterminated string literal");
    check_parse_error("\"abc = 1", MR_E_PARSE, 1, "unterminated quoted identifier");
    check_parse_error("a # b", MR_E_PARSE, 3, "column 3: unexpected character '#'");
    check_parse_error("a = \x01", MR_E_PARSE, 5, "unexpected byte 0x01");
    check_parse_error("(a", MR_E_PARSE, 3, "expected ')', got end of input");
    check_parse_error("a b", MR_E_PARSE, 3, "expected an operator or end of input, got identifier b");
    check_parse_error("a = 1)", MR_E_PARSE, 6, "expected an operator or end of input, got ')'");
    check_parse_error("x IS 3", MR_E_PARSE, 6, "expected NULL or NOT NULL after IS, got number 3");
    check_parse_error("x IS NOT 3", MR_E_PARSE, 10, "expected NULL after IS NOT");
    check_parse_error("x NOT 3", MR_E_PARSE, 7, "expected IN or BETWEEN after NOT, got number 3");
    check_parse_error("x BETWEEN 1 OR 2", MR_E_PARSE, 13, "expected AND in BETWEEN, got 'OR'");
    check_parse_error("a < b < c", MR_E_PARSE, 7, "expected an operator or end of input, got '<'");
    check_parse_error("abs(1, 2)", MR_E_PARSE, 1, "abs() takes 1 argument, got 2");
    check_parse_error("contains(s)", MR_E_PARSE, 1, "contains() takes 2 arguments, got 1");
    check_parse_error("coalesce()", MR_E_PARSE, 1, "coalesce() takes at least 1 argument, got 0");
    check_parse_error("lower(s", MR_E_PARSE, 8, "expected ')' after arguments of lower(), got end of input");
    check_parse_error("d = DATE '2024-02-30'", MR_E_PARSE, 10, "invalid DATE literal '2024-02-30'");
    check_parse_error("TIMESTAMP '2024-01-01 25:00:00'", MR_E_PARSE, 11, "invalid TIMESTAMP literal");
    check_parse_error("99999999999999999999", MR_E_PARSE, 1, "out of range for int64");
    check_parse_error("9223372036854775808", MR_E_PARSE, 1, "out of range for int64");
    check_parse_error("1e999", MR_E_PARSE, 1, "float literal 1e999 out of range");
    check_parse_error("12abc", MR_E_PARSE, 1, "invalid number");
    check_parse_error("1e+", MR_E_PARSE, 1, "exponent needs digits");
    check_parse_error("1.2.3", MR_E_PARSE, 1, "invalid number");
    check_parse_error("", MR_E_PARSE, 1, "empty expression");
    check_parse_error("   ", MR_E_PARSE, 1, "empty expression");
    check_parse_error("\"\" = 1", MR_E_PARSE, 1, "quoted column name must be non-empty");
    check_parse_error("x = = 1", MR_E_PARSE, 5, "expected an expression, got '='");
    check_parse_error("x ! 1", MR_E_PARSE, 3, "unexpected character '!'");

    mr_error err;
    mr_error_init(&err);
    mr_expr *e = NULL;
    assert_status(mr_expr_parse("lenght(s) > 1", 13, NULL, &e, &err), MR_E_NOT_FOUND);
    assert_string_equal(err.msg, "expression: column 1: unknown function 'lenght'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'length'?"); /* the hint is best effort */

    /* nesting limits: parentheses, NOT chains, unary minus, operator chains */
    char buf[4096];
    size_t k = 0;
    for (int i = 0; i < 300; i++) buf[k++] = '(';
    buf[k++] = 'x';
    for (int i = 0; i < 300; i++) buf[k++] = ')';
    buf[k] = '\0';
    check_parse_error(buf, MR_E_LIMIT, 0, "nested too deeply");
    k = 0;
    for (int i = 0; i < 300; i++) k += (size_t)snprintf(buf + k, sizeof(buf) - k, "NOT ");
    snprintf(buf + k, sizeof(buf) - k, "x");
    check_parse_error(buf, MR_E_LIMIT, 0, "nested too deeply");
    k = 0;
    for (int i = 0; i < 300; i++) buf[k++] = '-';
    buf[k++] = 'x';
    buf[k] = '\0';
    check_parse_error(buf, MR_E_LIMIT, 0, "nested too deeply");
    k = (size_t)snprintf(buf, sizeof(buf), "x");
    for (int i = 0; i < 300; i++) k += (size_t)snprintf(buf + k, sizeof(buf) - k, "+x");
    check_parse_error(buf, MR_E_LIMIT, 0, "nested too deeply");
    /* but long AND / OR chains flatten and are fine */
    k = (size_t)snprintf(buf, sizeof(buf), "x = 0");
    for (int i = 1; i < 300; i++) k += (size_t)snprintf(buf + k, sizeof(buf) - k, " OR x = %d", i);
    e = parse_ok(buf);
    mr_expr_free(e);
}

static void test_parse_not_nul_terminated(void **state)
{
    (void)state;
    mr_expr *e = NULL;
    const char text[] = "x > 1 garbage";
    assert_ok(mr_expr_parse(text, 5, NULL, &e, NULL));
    char *p = print_of(e);
    assert_string_equal(p, "x > 1");
    mr_free(p);
    mr_expr_free(e);
    const char nul[] = {'x', '=', '\0', '1'};
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_expr_parse(nul, sizeof(nul), NULL, &e, &err), MR_E_PARSE);
    assert_non_null(strstr(err.msg, "column 3: unexpected byte 0x00"));
    /* strings may hold any byte, NUL included, and print back verbatim */
    const char s[] = {'s', '=', '\'', 'a', '\0', 'b', '\''};
    assert_ok(mr_expr_parse(s, sizeof(s), NULL, &e, NULL));
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_expr_print(e, &b));
    assert_int_equal(b.len, 9);
    assert_memory_equal(b.data, "s = 'a\0b'", 9);
    mr_buf_free(&b);
    mr_expr_free(e);
}

static void test_columns(void **state)
{
    (void)state;
    mr_expr *e = parse_ok("a + b > a AND \"c d\" IS NULL OR coalesce(b, e) IN (a, 1)");
    size_t n;
    const char *const *cols = mr_expr_columns(e, &n);
    assert_int_equal(n, 4);
    assert_string_equal(cols[0], "a");
    assert_string_equal(cols[1], "b");
    assert_string_equal(cols[2], "c d");
    assert_string_equal(cols[3], "e");
    mr_expr_free(e);
    e = parse_ok("1 + 2 = 3");
    cols = mr_expr_columns(e, &n);
    assert_int_equal(n, 0);
    mr_expr_free(e);
}

/* ---- typing -------------------------------------------------------------- */

static void check_bind_error(const mr_table *t, const char *text, unsigned flags, mr_status code, const char *msg)
{
    mr_expr *e = parse_ok(text);
    mr_error err;
    mr_error_init(&err);
    mr_status rc = mr_expr_bind_table(e, t, flags, &err);
    if (rc != code) fail_msg("bind \"%s\": %s, want %s (%s)", text, mr_status_name(rc), mr_status_name(code), err.msg);
    /* under torture a literal in the message may print as '?' (best effort) */
    if (strcmp(err.msg, msg) && !mr_test_fault_fired())
        fail_msg("bind \"%s\":\n  got  \"%s\"\n  want \"%s\"", text, err.msg, msg);
    assert_int_equal(mr_expr_type(e), MR_T_NULL); /* unbound */
    mr_expr_free(e);
}

static void check_type(const mr_table *t, const char *text, mr_dtype want)
{
    mr_expr *e = bound(text, t, 0);
    if (mr_expr_type(e) != want)
        fail_msg("type of \"%s\": %s, want %s", text, mr_dtype_name(mr_expr_type(e)), mr_dtype_name(want));
    mr_expr_free(e);
}

static void test_types(void **state)
{
    (void)state;
    mr_table *t = sample_table(1);
    check_type(t, "x * 2", MR_T_INT64);
    check_type(t, "x / 2", MR_T_FLOAT64);
    check_type(t, "x % 2", MR_T_INT64);
    check_type(t, "x + f", MR_T_FLOAT64);
    check_type(t, "x + 1.5", MR_T_FLOAT64);
    check_type(t, "-x", MR_T_INT64);
    check_type(t, "abs(f32)", MR_T_FLOAT64);
    check_type(t, "abs(x)", MR_T_INT64);
    check_type(t, "sqrt(x)", MR_T_FLOAT64);
    check_type(t, "length(country)", MR_T_INT64);
    check_type(t, "upper(s)", MR_T_STRING);
    check_type(t, "coalesce(d, ts)", MR_T_TIMESTAMP);
    check_type(t, "coalesce(x, f)", MR_T_FLOAT64);
    check_type(t, "coalesce(NULL, x)", MR_T_INT64);
    check_type(t, "year(ts)", MR_T_INT64);
    check_type(t, "d", MR_T_DATE);
    check_type(t, "DATE '2024-01-01'", MR_T_DATE);
    check_type(t, "x + NULL", MR_T_INT64);
    check_type(t, "NULL", MR_T_NULL);
    check_type(t, "x > 1 AND NULL", MR_T_BOOL);
    check_type(t, "d < ts", MR_T_BOOL);
    check_type(t, "d = TIMESTAMP '2024-01-01 00:00:00'", MR_T_BOOL);
    check_type(t, "\"odd name\" IN (1, 2.5)", MR_T_BOOL);

    check_bind_error(t, "country = 3", MR_EXPR_FILTER, MR_E_SCHEMA,
                     "filter: cannot compare string column 'country' with int64 literal 3");
    check_bind_error(t, "3 < s", 0, MR_E_SCHEMA, "filter: cannot compare int64 literal 3 with string column 's'");
    check_bind_error(t, "d < 5", 0, MR_E_SCHEMA, "filter: cannot compare date column 'd' with int64 literal 5");
    check_bind_error(t, "b = 1", 0, MR_E_SCHEMA, "filter: cannot compare bool column 'b' with int64 literal 1");
    check_bind_error(t, "x + 1 = 'a'", 0, MR_E_SCHEMA,
                     "filter: cannot compare int64 expression 'x + 1' with string literal 'a'");
    check_bind_error(t, "x IN (1, 'a')", 0, MR_E_SCHEMA,
                     "filter: cannot compare int64 column 'x' with string literal 'a' in IN list");
    check_bind_error(t, "s BETWEEN 'a' AND 3", 0, MR_E_SCHEMA,
                     "filter: cannot compare string column 's' with int64 literal 3 in BETWEEN");
    check_bind_error(t, "x + 1", MR_EXPR_FILTER, MR_E_SCHEMA, "filter: must be boolean, got int64 expression 'x + 1'");
    check_bind_error(t, "s", MR_EXPR_FILTER, MR_E_SCHEMA, "filter: must be boolean, got string column 's'");
    check_bind_error(t, "s + 1", 0, MR_E_SCHEMA, "filter: cannot apply '+' to string column 's' and int64 literal 1");
    check_bind_error(t, "d - 1", 0, MR_E_SCHEMA, "filter: cannot apply '-' to date column 'd' and int64 literal 1");
    check_bind_error(t, "x AND b", 0, MR_E_SCHEMA, "filter: AND needs boolean operands, got int64 column 'x'");
    check_bind_error(t, "b OR 'y'", 0, MR_E_SCHEMA, "filter: OR needs boolean operands, got string literal 'y'");
    check_bind_error(t, "NOT x", 0, MR_E_SCHEMA, "filter: NOT needs a boolean, got int64 column 'x'");
    check_bind_error(t, "-s", 0, MR_E_SCHEMA, "filter: unary '-' needs a number, got string column 's'");
    check_bind_error(t, "lower(x)", 0, MR_E_SCHEMA, "filter: lower() needs a string, got int64 column 'x'");
    check_bind_error(t, "sqrt(s)", 0, MR_E_SCHEMA, "filter: sqrt() needs a number, got string column 's'");
    check_bind_error(t, "year(x)", 0, MR_E_SCHEMA, "filter: year() needs a date or timestamp, got int64 column 'x'");
    check_bind_error(t, "contains(s, 1)", 0, MR_E_SCHEMA, "filter: contains() needs string arguments, got int64 literal 1");
    check_bind_error(t, "coalesce(x, s)", 0, MR_E_SCHEMA,
                     "filter: coalesce() arguments must share a type: int64 column 'x' and string column 's'");
    check_bind_error(t, "f32 = 'a'", 0, MR_E_SCHEMA, "filter: cannot compare float32 column 'f32' with string literal 'a'");

    mr_expr *e = parse_ok("contry = 'FR'");
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_expr_bind_table(e, t, MR_EXPR_FILTER, &err), MR_E_NOT_FOUND);
    assert_string_equal(err.msg, "filter: unknown column 'contry'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'country'?"); /* the hint is best effort */
    assert_int_equal(err.col, 1);
    /* rebinding against another schema works and replaces the old one */
    const char *names[] = {"contry"};
    const mr_dtype types[] = {MR_T_STRING};
    mr_error_init(&err);
    assert_ok(mr_expr_bind(e, names, types, 1, MR_EXPR_FILTER, &err));
    assert_int_equal(mr_expr_type(e), MR_T_BOOL);
    mr_expr_free(e);
    mr_table_free(t);
}

/* ---- evaluation ---------------------------------------------------------- */

static void test_eval_filter(void **state)
{
    (void)state;
    for (int dict = 0; dict <= 1; dict++) {
        mr_table *t = sample_table(dict);
        check_filter(t, "x > 0", "0,3,4");
        check_filter(t, "x >= 0 AND x < 10", "0,4,5");
        check_filter(t, "x = NULL", "");
        check_filter(t, "x != NULL", "");
        check_filter(t, "NOT x > 0", "1,5");
        check_filter(t, "x IS NULL", "2");
        check_filter(t, "x IS NOT NULL", "0,1,3,4,5");
        check_filter(t, "x IN (1, 10)", "0,3");
        check_filter(t, "x NOT IN (1, 10)", "1,4,5");
        check_filter(t, "x IN (1, NULL)", "0");
        check_filter(t, "x NOT IN (1, NULL)", "");
        check_filter(t, "x IN (1.0, 7.5)", "0");
        check_filter(t, "x BETWEEN 0 AND 7", "0,4,5");
        check_filter(t, "x NOT BETWEEN 0 AND 7", "1,3");
        check_filter(t, "x BETWEEN 7 AND 0", "");
        check_filter(t, "x + f > 2", "0,3,4,5");
        check_filter(t, "x / 0 IS NULL", "0,1,2,3,4,5");
        check_filter(t, "x % 3 = 1", "0,3,4");
        check_filter(t, "-x > 0", "1");
        check_filter(t, "x * 2 = 20", "3");
        check_filter(t, "x = 7.0", "4");
        check_filter(t, "9223372036854775807 + x IS NULL", "0,2,3,4");
        check_filter(t, "abs(x) > 1", "1,3,4");
        check_filter(t, "sqrt(f) > 1", "0,4,5");
        check_filter(t, "log(f) IS NULL", "1,2,3");
        check_filter(t, "f32 > 1.5", "2,4,5");
        check_filter(t, "\"odd name\" % 2 = 0", "1,3,5");
        check_filter(t, "s = 'apple'", "0");
        check_filter(t, "s = 'it''s'", "4");
        check_filter(t, "s < 'b'", "0,1,3,5");
        check_filter(t, "s >= 'apple'", "0,4");
        check_filter(t, "lower(s) = 'banana'", "1");
        check_filter(t, "contains(lower(s), 'apple')", "0,5");
        check_filter(t, "contains(s, '')", "0,1,3,4,5");
        check_filter(t, "length(s) = 0", "3");
        check_filter(t, "country = 'FR'", "0,3");
        check_filter(t, "'FR' = country", "0,3");
        check_filter(t, "country IN ('DE', 'US')", "1,4,5");
        check_filter(t, "country NOT IN ('DE', 'US')", "0,3");
        check_filter(t, "country != 'FR'", "1,4,5");
        check_filter(t, "country > s", "1,3,5");
        check_filter(t, "coalesce(country, 'none') = 'none'", "2");
        check_filter(t, "country IS NULL", "2");
        check_filter(t, "upper(country) = country", "0,1,3,4,5");
        check_filter(t, "d >= DATE '2024-01-01'", "0,1,4,5");
        check_filter(t, "d = TIMESTAMP '2024-01-31 00:00:00'", "0");
        check_filter(t, "d < TIMESTAMP '2024-01-31 00:00:01'", "0,3,4");
        check_filter(t, "ts > d", "0,3,4");
        check_filter(t, "ts BETWEEN DATE '2024-01-01' AND DATE '2024-02-01'", "0,4");
        check_filter(t, "ts = TIMESTAMP '2024-01-01 00:00:00.5'", "4");
        check_filter(t, "year(d) = 2024", "0,1,4");
        check_filter(t, "month(ts) = 12", "2");
        check_filter(t, "day(d) = 29", "1");
        check_filter(t, "b", "0,3");
        check_filter(t, "NOT b", "1,4");
        check_filter(t, "b = true", "0,3");
        check_filter(t, "b OR x > 5", "0,3,4");
        check_filter(t, "b AND x IS NULL", "");
        check_filter(t, "b IS NULL OR f32 > 4", "2,5");
        check_filter(t, "TRUE", "0,1,2,3,4,5");
        check_filter(t, "FALSE", "");
        check_filter(t, "NULL", "");
        check_filter(t, "NOT NULL", "");
        check_filter(t, "1 < 2", "0,1,2,3,4,5");
        check_filter(t, "NULL OR x = 1", "0");
        mr_table_free(t);
    }
}

static void test_eval_values(void **state)
{
    (void)state;
    mr_table *t = sample_table(1);
    check_eval(t, "x * 2", MR_T_INT64, "2,-4,NULL,20,14,0");
    check_eval(t, "x / 2", MR_T_FLOAT64, "0.5,-1,NULL,5,3.5,0");
    check_eval(t, "x / 0", MR_T_FLOAT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "x % 0", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "f % 0", MR_T_FLOAT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "f / 0.0", MR_T_FLOAT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "f % 2", MR_T_FLOAT64, "1.5,NULL,0,-1.25,0,0");
    check_eval(t, "-x", MR_T_INT64, "-1,2,NULL,-10,-7,0");
    check_eval(t, "x % -3", MR_T_INT64, "1,-2,NULL,1,1,0");
    check_eval(t, "x % -1", MR_T_INT64, "0,0,NULL,0,0,0");
    check_eval(t, "x - f", MR_T_FLOAT64, "-0.5,NULL,NULL,13.25,5,-100");
    check_eval(t, "9223372036854775807 + x", MR_T_INT64,
               "NULL,9223372036854775805,NULL,NULL,NULL,9223372036854775807");
    check_eval(t, "-9223372036854775808 - x", MR_T_INT64,
               "NULL,-9223372036854775806,NULL,NULL,NULL,-9223372036854775808");
    check_eval(t, "x * 4611686018427387904", MR_T_INT64, "4611686018427387904,-9223372036854775808,NULL,NULL,NULL,0");
    check_eval(t, "-(-9223372036854775808 + x * 0)", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "abs(-9223372036854775808)", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "-9223372036854775808 % -1", MR_T_INT64, "0,0,0,0,0,0");
    check_eval(t, "abs(x)", MR_T_INT64, "1,2,NULL,10,7,0");
    check_eval(t, "abs(f)", MR_T_FLOAT64, "1.5,NULL,0,3.25,2,100");
    check_eval(t, "sqrt(f)", MR_T_FLOAT64, "1.224744871391589,NULL,0,NULL,1.4142135623730951,10");
    check_eval(t, "log(f32)", MR_T_FLOAT64, "-0.6931471805599453,0,0.6931471805599453,NULL,1.3862943611198906,1.6094379124341003");
    check_eval(t, "exp(0)", MR_T_FLOAT64, "1,1,1,1,1,1");
    check_eval(t, "upper(s)", MR_T_STRING, "APPLE,BANANA,NULL,,IT'S,APPLE PIE");
    check_eval(t, "lower(country)", MR_T_STRING, "fr,de,NULL,fr,us,de");
    check_eval(t, "length(s)", MR_T_INT64, "5,6,NULL,0,4,9");
    check_eval(t, "length('h\xc3\xa9llo')", MR_T_INT64, "5,5,5,5,5,5");
    check_eval(t, "contains(s, 'an')", MR_T_BOOL, "false,true,NULL,false,false,false");
    check_eval(t, "coalesce(x, -1)", MR_T_INT64, "1,-2,-1,10,7,0");
    check_eval(t, "coalesce(x)", MR_T_INT64, "1,-2,NULL,10,7,0");
    check_eval(t, "coalesce(NULL, x, 5)", MR_T_INT64, "1,-2,5,10,7,0");
    check_eval(t, "coalesce(s, country, 'none')", MR_T_STRING, "apple,Banana,none,,it's,APPLE pie");
    check_eval(t, "coalesce(country, s)", MR_T_STRING, "FR,DE,NULL,FR,US,DE");
    check_eval(t, "coalesce(d, ts)", MR_T_TIMESTAMP,
               "2024-01-31 00:00:00,2024-02-29 00:00:00,2023-12-31 23:59:59,2023-06-15 00:00:00,"
               "2024-01-01 00:00:00,2025-03-01 00:00:00");
    check_eval(t, "coalesce(f32, 0)", MR_T_FLOAT64, "0.5,1,2,0,4,5");
    check_eval(t, "coalesce(b, FALSE)", MR_T_BOOL, "true,false,false,true,false,false");
    check_eval(t, "year(ts)", MR_T_INT64, "2024,NULL,2023,2024,2024,2025");
    check_eval(t, "month(d)", MR_T_INT64, "1,2,NULL,6,1,3");
    check_eval(t, "day(ts)", MR_T_INT64, "31,NULL,31,15,1,1");
    check_eval(t, "year(TIMESTAMP '1969-12-31 23:59:59')", MR_T_INT64, "1969,1969,1969,1969,1969,1969");
    check_eval(t, "x > 1", MR_T_BOOL, "false,false,NULL,true,true,false");
    check_eval(t, "d", MR_T_DATE, "2024-01-31,2024-02-29,NULL,2023-06-15,2024-01-01,2025-03-01");
    check_eval(t, "country", MR_T_STRING, "FR,DE,NULL,FR,US,DE");
    check_eval(t, "'k'", MR_T_STRING, "k,k,k,k,k,k");
    check_eval(t, "NULL", MR_T_BOOL, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "x + NULL", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "1 + 2 * 3", MR_T_INT64, "7,7,7,7,7,7");
    check_eval(t, "(1 + 2) * 3 - 10 / 4", MR_T_FLOAT64, "6.5,6.5,6.5,6.5,6.5,6.5");
    check_eval(t, "-2 * -3 % 4", MR_T_INT64, "2,2,2,2,2,2");

    /* the result column is named after the canonical text */
    mr_expr *e = bound("x*2", t, 0);
    mr_column *c = NULL;
    assert_ok(mr_expr_eval(e, t, &c, NULL));
    assert_string_equal(c->name, "x * 2");
    mr_column_free(c);
    mr_expr_free(e);
    mr_table_free(t);
}

/* CASE, if(), clip(), days_between(), date parts, hash(). */
static void test_eval_new_functions(void **state)
{
    (void)state;
    for (int dict = 0; dict <= 1; dict++) {
        mr_table *t = sample_table(dict);
        check_eval(t, "CASE WHEN x > 5 THEN 'big' WHEN x > 0 THEN 'small' ELSE 'other' END", MR_T_STRING,
                   "small,other,other,big,big,other");
        check_eval(t, "CASE WHEN b THEN x END", MR_T_INT64, "1,NULL,NULL,10,NULL,NULL");
        check_eval(t, "CASE WHEN x > 5 THEN f ELSE x END", MR_T_FLOAT64, "1,-2,NULL,-3.25,2,0");
        check_eval(t, "CASE WHEN NULL THEN 1 WHEN TRUE THEN 2 END", MR_T_INT64, "2,2,2,2,2,2");
        check_eval(t, "CASE WHEN country = 'FR' THEN d ELSE ts END", MR_T_TIMESTAMP,
                   "2024-01-31 00:00:00,NULL,2023-12-31 23:59:59,2023-06-15 00:00:00,2024-01-01 00:00:00.500000,"
                   "2025-03-01 00:00:00");
        check_eval(t, "if(country = 'FR', 'fr', coalesce(country, '?'))", MR_T_STRING, "fr,DE,?,fr,US,DE");
        check_eval(t, "if(TRUE, x, 0)", MR_T_INT64, "1,-2,NULL,10,7,0");
        check_eval(t, "if(b, b, NOT b)", MR_T_BOOL, "true,true,NULL,true,true,NULL");
        check_eval(t, "clip(x, 0, 5)", MR_T_INT64, "1,0,NULL,5,5,0");
        check_eval(t, "clip(f, 0, 10)", MR_T_FLOAT64, "1.5,NULL,0,0,2,10");
        check_eval(t, "clip(x, 0.5, 5)", MR_T_FLOAT64, "1,0.5,NULL,5,5,0.5");
        check_eval(t, "clip(x, 5, 0)", MR_T_INT64, "0,0,NULL,0,0,0");
        check_eval(t, "clip(x, NULL, 5)", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
        check_eval(t, "days_between(d, DATE '2024-03-01')", MR_T_INT64, "30,1,NULL,260,60,-365");
        check_eval(t, "days_between(ts, d)", MR_T_INT64, "0,NULL,NULL,-366,0,0");
        check_eval(t, "days_between(TIMESTAMP '2024-01-01 23:00:00', TIMESTAMP '2024-01-02 01:00:00')", MR_T_INT64,
                   "1,1,1,1,1,1");
        check_eval(t, "days_between(NULL, d)", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
        check_eval(t, "dayofweek(d)", MR_T_INT64, "3,4,NULL,4,1,6");
        check_eval(t, "dayofweek(DATE '1969-12-28')", MR_T_INT64, "0,0,0,0,0,0");
        check_eval(t, "hour(ts)", MR_T_INT64, "12,NULL,23,0,0,0");
        check_eval(t, "minute(ts)", MR_T_INT64, "0,NULL,59,0,0,0");
        check_eval(t, "second(ts)", MR_T_INT64, "0,NULL,59,0,0,0");
        check_eval(t, "hour(d)", MR_T_INT64, "0,0,NULL,0,0,0");
        check_eval(t, "hour(TIMESTAMP '1969-12-31 23:59:59') * 100 + minute(TIMESTAMP '1969-12-31 23:59:59')",
                   MR_T_INT64, "2359,2359,2359,2359,2359,2359");
        check_eval(t, "hash(NULL)", MR_T_INT64, "NULL,NULL,NULL,NULL,NULL,NULL");
        check_eval(t, "hash(0.0) = hash(-0.0)", MR_T_BOOL, "true,true,true,true,true,true");
        check_eval(t, "hash(x) = hash(x * 1)", MR_T_BOOL, "true,true,NULL,true,true,true");
        check_eval(t, "hash(1) = hash(1.0)", MR_T_BOOL, "false,false,false,false,false,false");

        /* hash() is xxh3-64 of the documented canonical bytes */
        mr_expr *e = bound("hash(x)", t, 0);
        mr_column *c = NULL;
        assert_ok(mr_expr_eval(e, t, &c, NULL));
        const uint8_t le1[8] = {1, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal((uint64_t)((const int64_t *)c->data)[0], XXH3_64bits(le1, 8));
        mr_column_free(c);
        mr_expr_free(e);
        e = bound("hash(country)", t, 0);
        assert_ok(mr_expr_eval(e, t, &c, NULL));
        assert_int_equal((uint64_t)((const int64_t *)c->data)[0], XXH3_64bits("FR", 2));
        assert_int_equal((uint64_t)((const int64_t *)c->data)[4], XXH3_64bits("US", 2));
        assert_true(mr_column_is_null(c, 2));
        mr_column_free(c);
        mr_expr_free(e);
        e = bound("hash(d)", t, 0);
        assert_ok(mr_expr_eval(e, t, &c, NULL));
        int32_t days = mr_date_from_civil(2024, 1, 31);
        const uint8_t le_d[4] = {(uint8_t)days, (uint8_t)(days >> 8), (uint8_t)(days >> 16), (uint8_t)(days >> 24)};
        assert_int_equal((uint64_t)((const int64_t *)c->data)[0], XXH3_64bits(le_d, 4));
        mr_column_free(c);
        mr_expr_free(e);
        mr_table_free(t);
    }

    mr_table *t = sample_table(0);
    check_type(t, "CASE WHEN b THEN 1 ELSE 2.5 END", MR_T_FLOAT64);
    check_type(t, "CASE WHEN b THEN NULL END", MR_T_INT64);
    check_type(t, "if(b, d, ts)", MR_T_TIMESTAMP);
    check_type(t, "clip(x, 0, 1)", MR_T_INT64);
    check_type(t, "clip(x, 0, f32)", MR_T_FLOAT64);
    check_type(t, "hash(s)", MR_T_INT64);
    check_bind_error(t, "CASE WHEN x THEN 1 END", 0, MR_E_SCHEMA,
                     "filter: CASE needs a boolean condition, got int64 column 'x'");
    check_bind_error(t, "CASE WHEN b THEN 1 ELSE 'a' END", 0, MR_E_SCHEMA,
                     "filter: CASE results must share a type: int64 literal 1 and string literal 'a'");
    check_bind_error(t, "if(b, 1, 'a')", 0, MR_E_SCHEMA,
                     "filter: if() results must share a type: int64 literal 1 and string literal 'a'");
    check_bind_error(t, "if(s, 1, 2)", 0, MR_E_SCHEMA, "filter: if() needs a boolean condition, got string column 's'");
    check_bind_error(t, "clip(s, 0, 1)", 0, MR_E_SCHEMA, "filter: clip() needs numbers, got string column 's'");
    check_bind_error(t, "days_between(x, d)", 0, MR_E_SCHEMA,
                     "filter: days_between() needs dates or timestamps, got int64 column 'x'");
    check_bind_error(t, "hour(x)", 0, MR_E_SCHEMA, "filter: hour() needs a date or timestamp, got int64 column 'x'");
    mr_table_free(t);
}

static void test_eval_errors(void **state)
{
    (void)state;
    mr_table *t = sample_table(0);
    uint8_t mask[N_ROWS];
    mr_error err;
    mr_error_init(&err);
    mr_expr *e = parse_ok("x > 1");
    assert_status(mr_expr_eval_filter(e, t, mask, &err), MR_E_STATE);
    assert_string_equal(err.msg, "filter: evaluated before it was bound to a schema");
    /* bound against one schema, evaluated on a table that lacks the column */
    const char *names[] = {"x"};
    mr_dtype types[] = {MR_T_INT64};
    assert_ok(mr_expr_bind(e, names, types, 1, MR_EXPR_FILTER, NULL));
    mr_table *empty;
    assert_ok(mr_table_new(&empty, NULL));
    mr_error_init(&err);
    assert_status(mr_expr_eval_filter(e, empty, mask, &err), MR_E_SCHEMA);
    assert_string_equal(err.msg, "filter: column 'x' is not in the table");
    mr_table_free(empty);
    /* ... or has it with another type */
    types[0] = MR_T_FLOAT64;
    assert_ok(mr_expr_bind(e, names, types, 1, MR_EXPR_FILTER, NULL));
    mr_error_init(&err);
    assert_status(mr_expr_eval_filter(e, t, mask, &err), MR_E_SCHEMA);
    assert_string_equal(err.msg, "filter: column 'x' is int64 in the table but was bound as float64");
    mr_expr_free(e);
    /* a non-boolean expression is not a filter */
    e = bound("x + 1", t, 0);
    mr_error_init(&err);
    assert_status(mr_expr_eval_filter(e, t, mask, &err), MR_E_SCHEMA);
    mr_expr_free(e);
    mr_table_free(t);
}

static void test_three_valued_logic(void **state)
{
    (void)state;
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    const int p[] = {1, 1, 1, 0, 0, 0, -1, -1, -1};
    const int q[] = {1, 0, -1, 1, 0, -1, 1, 0, -1};
    add(t, bool_col("p", p, 9));
    add(t, bool_col("q", q, 9));
    /* rows: (T,T) (T,F) (T,N) (F,T) (F,F) (F,N) (N,T) (N,F) (N,N) */
    check_eval(t, "p AND q", MR_T_BOOL, "true,false,NULL,false,false,false,NULL,false,NULL");
    check_eval(t, "p OR q", MR_T_BOOL, "true,true,true,true,false,NULL,true,NULL,NULL");
    check_eval(t, "NOT p", MR_T_BOOL, "false,false,false,true,true,true,NULL,NULL,NULL");
    check_eval(t, "NOT (p AND q)", MR_T_BOOL, "false,true,NULL,true,true,true,NULL,true,NULL");
    check_eval(t, "p = q", MR_T_BOOL, "true,false,NULL,false,true,NULL,NULL,NULL,NULL");
    check_eval(t, "p != q", MR_T_BOOL, "false,true,NULL,true,false,NULL,NULL,NULL,NULL");
    check_eval(t, "p IS NULL", MR_T_BOOL, "false,false,false,false,false,false,true,true,true");
    check_eval(t, "p IN (q)", MR_T_BOOL, "true,false,NULL,false,true,NULL,NULL,NULL,NULL");
    check_eval(t, "p IN (q, TRUE)", MR_T_BOOL, "true,true,true,false,true,NULL,NULL,NULL,NULL");
    check_eval(t, "p AND NULL", MR_T_BOOL, "NULL,NULL,NULL,false,false,false,NULL,NULL,NULL");
    check_eval(t, "p OR NULL", MR_T_BOOL, "true,true,true,NULL,NULL,NULL,NULL,NULL,NULL");
    check_eval(t, "p AND q AND TRUE", MR_T_BOOL, "true,false,NULL,false,false,false,NULL,false,NULL");
    check_eval(t, "p OR q OR FALSE", MR_T_BOOL, "true,true,true,true,false,NULL,true,NULL,NULL");
    check_filter(t, "p AND q", "0");
    check_filter(t, "p OR q", "0,1,2,3,6");
    check_filter(t, "NOT (p OR q)", "4");
    check_filter(t, "NOT p AND NOT q", "4");
    check_filter(t, "p BETWEEN FALSE AND q", "0,3,4");
    mr_table_free(t);
}

/* ---- dictionary fast path -------------------------------------------------- */

static void test_dict_matches_plain(void **state)
{
    (void)state;
    /* 3000 rows over a 5-entry dictionary (plus nulls): the dictionary path
     * runs; the plain copy must give identical results for every expression */
    enum { N = 3000 };
    static const char *const dom[] = {"FR", "DE", "us", "", "it's"};
    const char **vals = malloc(N * sizeof(char *));
    int64_t *ints = malloc(N * sizeof(int64_t));
    for (size_t i = 0; i < N; i++) {
        vals[i] = i % 7 == 3 ? NULL : dom[(i * 2654435761u >> 7) % 5];
        ints[i] = (int64_t)(i % 11) - 5;
    }
    mr_table *td, *tp;
    assert_ok(mr_table_new(&td, NULL));
    assert_ok(mr_table_new(&tp, NULL));
    add(td, str_col("c", vals, N, 1));
    add(tp, str_col("c", vals, N, 0));
    add(td, int_col("k", ints, N));
    add(tp, int_col("k", ints, N));
    assert_non_null(mr_table_column(td, "c")->codes);
    assert_null(mr_table_column(tp, "c")->codes);
    static const char *const filters[] = {
        "c = 'FR'", "c != 'FR'", "c < 'FR'", "c IN ('DE', 'us', NULL)", "c NOT IN ('DE')", "c IS NULL",
        "c IS NOT NULL", "lower(c) = 'fr'", "upper(c) IN ('US', 'FR')", "contains(c, 's')",
        "length(c) BETWEEN 1 AND 2", "coalesce(c, 'none') = 'none'", "NOT c = 'DE' OR c IS NULL",
        "c = 'FR' AND k > 0", "lower(c) = 'fr' OR k = 3", "c > lower(c)", "c BETWEEN 'DE' AND 'FR'",
        "contains(upper(coalesce(c, 'x')), 'X')", "(c = 'FR') = (k > 0)",
        "CASE WHEN c = 'FR' THEN TRUE WHEN c IS NULL THEN NULL ELSE c < 'e' END", "if(c IN ('DE', 'us'), TRUE, FALSE)",
        "hash(c) = hash('FR')",
    };
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
        char *a = filter_rows(filters[i], td), *b = filter_rows(filters[i], tp);
        if (strcmp(a, b)) fail_msg("filter \"%s\": dictionary and plain strings disagree", filters[i]);
        mr_free(a);
        mr_free(b);
    }
    static const char *const values[] = {
        "lower(c)", "upper(coalesce(c, 'n/a'))", "length(c)", "coalesce(c, 'none')", "c = 'FR'", "c",
        "CASE WHEN c = 'FR' THEN 'france' WHEN c IS NULL THEN 'none' ELSE lower(c) END", "hash(c)",
        "if(c > 'E', upper(c), c)", "CASE WHEN k > 0 THEN c END",
    };
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char *a = eval_values(values[i], td, NULL), *b = eval_values(values[i], tp, NULL);
        if (strcmp(a, b)) fail_msg("eval \"%s\": dictionary and plain strings disagree", values[i]);
        mr_free(a);
        mr_free(b);
    }
    char *fr = filter_rows("c = 'FR'", td);
    assert_true(strlen(fr) > 100); /* non-trivial */
    mr_free(fr);
    mr_table_free(td);
    mr_table_free(tp);
    free(vals);
    free(ints);
}

/* ---- random expressions and the pruning property ---------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rint_(rng *r, int n) { return (int)(rnext(r) % (uint64_t)n); }

static const char *const str_dom[] = {"", "a", "b", "bb", "c"};

/* A literal fit to compare with column kind k (0 int a/b, 1 float f, 2 string s, 3 bool p, 4 date d). */
static void gen_lit(rng *r, int k, mr_buf *o)
{
    if (rint_(r, 12) == 0) {
        assert_ok(mr_buf_puts(o, "NULL"));
        return;
    }
    switch (k) {
    case 0: assert_ok(mr_buf_printf(o, "%d", rint_(r, 9) - 4)); break;
    case 1:
        if (rint_(r, 2)) assert_ok(mr_buf_printf(o, "%d", rint_(r, 7) - 3));
        else assert_ok(mr_buf_printf(o, "%.1f", (rint_(r, 13) - 6) / 2.0));
        break;
    case 2: assert_ok(mr_buf_printf(o, "'%s'", str_dom[rint_(r, 5)])); break;
    case 3: assert_ok(mr_buf_puts(o, rint_(r, 2) ? "TRUE" : "FALSE")); break;
    default:
        if (rint_(r, 3)) assert_ok(mr_buf_printf(o, "DATE '2024-01-0%d'", 1 + rint_(r, 5)));
        else assert_ok(mr_buf_printf(o, "TIMESTAMP '2024-01-0%d 12:00:00'", 1 + rint_(r, 5)));
        break;
    }
}

static void gen_pred(rng *r, int depth, mr_buf *o)
{
    static const char *const cols[] = {"a", "b", "f", "s", "p", "d"};
    static const int kinds[] = {0, 0, 1, 2, 3, 4};
    static const char *const ops[] = {"=", "!=", "<", "<=", ">", ">="};
    int choice = rint_(r, depth > 0 ? 12 : 8);
    int c = rint_(r, 6);
    switch (choice) {
    case 0:
    case 1:
        if (rint_(r, 4) == 0) {
            gen_lit(r, kinds[c], o);
            assert_ok(mr_buf_printf(o, " %s %s", ops[rint_(r, 6)], cols[c]));
        } else {
            assert_ok(mr_buf_printf(o, "%s %s ", cols[c], ops[rint_(r, 6)]));
            gen_lit(r, kinds[c], o);
        }
        break;
    case 2: {
        assert_ok(mr_buf_printf(o, "%s %sIN (", cols[c], rint_(r, 3) ? "" : "NOT "));
        int k = 1 + rint_(r, 4);
        for (int i = 0; i < k; i++) {
            if (i) assert_ok(mr_buf_puts(o, ", "));
            gen_lit(r, kinds[c], o);
        }
        assert_ok(mr_buf_puts(o, ")"));
        break;
    }
    case 3:
        assert_ok(mr_buf_printf(o, "%s %sBETWEEN ", cols[c], rint_(r, 3) ? "" : "NOT "));
        gen_lit(r, kinds[c], o);
        assert_ok(mr_buf_puts(o, " AND "));
        gen_lit(r, kinds[c], o);
        break;
    case 4: assert_ok(mr_buf_printf(o, "%s IS %sNULL", cols[c], rint_(r, 2) ? "" : "NOT ")); break;
    case 5: assert_ok(mr_buf_puts(o, rint_(r, 3) ? "p" : rint_(r, 2) ? "TRUE" : "NULL")); break;
    case 6: assert_ok(mr_buf_printf(o, "a + b %s %d", ops[rint_(r, 6)], rint_(r, 9) - 4)); break;
    case 7: assert_ok(mr_buf_printf(o, "coalesce(a, b) %s %d", ops[rint_(r, 6)], rint_(r, 9) - 4)); break;
    case 8:
        assert_ok(mr_buf_puts(o, "NOT "));
        if (rint_(r, 2)) {
            assert_ok(mr_buf_puts(o, "("));
            gen_pred(r, depth - 1, o);
            assert_ok(mr_buf_puts(o, ")"));
        } else {
            gen_pred(r, 0, o);
        }
        break;
    default:
        assert_ok(mr_buf_puts(o, "("));
        gen_pred(r, depth - 1, o);
        assert_ok(mr_buf_puts(o, rint_(r, 2) ? " AND " : " OR "));
        gen_pred(r, depth - 1, o);
        assert_ok(mr_buf_puts(o, ")"));
        break;
    }
}

/* A random table over small domains (dictionary s when dict) and its exact
 * statistics, sometimes weakened (unknown counts, looser bounds). */
static mr_table *random_table(rng *r, int dict, mr_col_stats *st, rng *stat_rng)
{
    size_t n = (size_t)rint_(r, 14);
    int nullish[6];
    for (int c = 0; c < 6; c++) nullish[c] = (int[]){0, 0, 30, 100}[rint_(r, 4)];
    int64_t *a = malloc((n + 1) * sizeof(int64_t)), *b = malloc((n + 1) * sizeof(int64_t));
    const char **s = malloc((n + 1) * sizeof(char *));
    int *p = malloc((n + 1) * sizeof(int));
    mr_column *fc, *dc;
    assert_ok(mr_column_new("f", MR_T_FLOAT64, 0, &fc, NULL));
    assert_ok(mr_column_new("d", MR_T_DATE, 0, &dc, NULL));
    int base = rint_(r, 3) - 1, span = 1 + rint_(r, 5);
    int has_nan = rint_(r, 6) == 0;
    for (size_t i = 0; i < n; i++) {
        a[i] = rint_(r, 100) < nullish[0] ? NA : base + rint_(r, span);
        b[i] = rint_(r, 100) < nullish[1] ? NA : rint_(r, 9) - 4;
        if (rint_(r, 100) < nullish[2]) assert_ok(mr_column_append_null(fc));
        else assert_ok(mr_column_append_float64(fc, has_nan && rint_(r, 3) == 0 ? NAN : (rint_(r, 13) - 6) / 2.0));
        s[i] = rint_(r, 100) < nullish[3] ? NULL : str_dom[rint_(r, 5)];
        p[i] = rint_(r, 100) < nullish[4] ? -1 : rint_(r, 2);
        if (rint_(r, 100) < nullish[5]) assert_ok(mr_column_append_null(dc));
        else assert_ok(mr_column_append_int32(dc, mr_date_from_civil(2024, 1, 1 + (unsigned)rint_(r, 5))));
    }
    mr_table *t;
    assert_ok(mr_table_new(&t, NULL));
    mr_column *ac = int_col("a", a, n), *bc = int_col("b", b, n);
    mr_column *sc = str_col("s", s, n, dict), *pc = bool_col("p", p, n);
    mr_column *cols[6] = {ac, bc, fc, sc, pc, dc};
    for (int c = 0; c < 6; c++) {
        mr_col_stats *x = &st[c];
        memset(x, 0, sizeof(*x));
        x->row_count = n;
        x->has_null_count = 1;
        for (size_t i = 0; i < n; i++) {
            const mr_column *col = cols[c];
            if (mr_column_is_null(col, i)) {
                x->null_count++;
                continue;
            }
            mr_stat_value v;
            switch (col->type) {
            case MR_T_INT64: v.i = ((const int64_t *)col->data)[i]; break;
            case MR_T_DATE: v.i = ((const int32_t *)col->data)[i]; break;
            case MR_T_BOOL: v.b = ((const uint8_t *)col->data)[i]; break;
            case MR_T_FLOAT64:
                v.f = ((const double *)col->data)[i];
                if (isnan(v.f)) {
                    x->nan_count++;
                    continue;
                }
                break;
            default: v.s.ptr = mr_column_str(col, i, &v.s.len); break;
            }
            int lt_min, gt_max;
            if (!x->has_min_max) {
                x->min = x->max = v;
                x->has_min_max = 1;
                continue;
            }
            switch (col->type) {
            case MR_T_INT64:
            case MR_T_DATE:
                lt_min = v.i < x->min.i;
                gt_max = v.i > x->max.i;
                break;
            case MR_T_BOOL:
                lt_min = v.b < x->min.b;
                gt_max = v.b > x->max.b;
                break;
            case MR_T_FLOAT64:
                lt_min = v.f < x->min.f;
                gt_max = v.f > x->max.f;
                break;
            default: {
                size_t ml = v.s.len < x->min.s.len ? v.s.len : x->min.s.len;
                int c1 = ml ? memcmp(v.s.ptr, x->min.s.ptr, ml) : 0;
                lt_min = c1 < 0 || (c1 == 0 && v.s.len < x->min.s.len);
                size_t mh = v.s.len < x->max.s.len ? v.s.len : x->max.s.len;
                int c2 = mh ? memcmp(v.s.ptr, x->max.s.ptr, mh) : 0;
                gt_max = c2 > 0 || (c2 == 0 && v.s.len > x->max.s.len);
            }
            }
            if (lt_min) x->min = v;
            if (gt_max) x->max = v;
        }
        /* weaken sometimes: still valid statistics, just less precise */
        int w = rint_(stat_rng, 10);
        if (w == 0) x->has_null_count = 0;
        if (w == 1) x->has_min_max = 0;
        if (w == 2 && x->has_min_max && (cols[c]->type == MR_T_INT64 || cols[c]->type == MR_T_DATE)) {
            x->min.i -= 1;
            x->max.i += 2;
        }
        if (w == 3 && x->has_min_max && cols[c]->type == MR_T_FLOAT64) {
            x->min.f -= 0.75;
            x->max.f += 0.25;
        }
    }
    for (int c = 0; c < 6; c++) add(t, cols[c]);
    free(a);
    free(b);
    free(s);
    free(p);
    return t;
}

static uint64_t test_seed(void)
{
    const char *env = getenv("MILLRACE_TEST_SEED");
    return env && *env ? strtoull(env, NULL, 0) : 20240131ull;
}

static void test_prune_property(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    printf("test_prune_property: seed %llu (set MILLRACE_TEST_SEED to change)\n", (unsigned long long)seed);
    rng r = {seed};
    long n_none = 0, n_all = 0, n_some = 0, n_empty = 0;
    for (int iter = 0; iter < 20000; iter++) {
        rng table_rng = {rnext(&r)}, stat_rng = {rnext(&r)};
        rng table_rng2 = table_rng;
        mr_col_stats st[6], st2[6];
        mr_table *t = random_table(&table_rng, 1, st, &stat_rng);
        rng stat_rng2 = {0};
        mr_table *tp = random_table(&table_rng2, 0, st2, &stat_rng2); /* same values, plain strings */
        mr_buf text;
        mr_buf_init(&text);
        gen_pred(&r, 3, &text);
        mr_error err;
        mr_error_init(&err);
        mr_expr *e = NULL;
        if (mr_expr_parse(text.data, text.len, "filter", &e, &err) != MR_OK ||
            mr_expr_bind_table(e, t, MR_EXPR_FILTER, &err) != MR_OK)
            fail_msg("seed %llu iter %d: \"%s\": %s", (unsigned long long)seed, iter, text.data, err.msg);
        uint8_t mask[16], mask2[16];
        assert_ok(mr_expr_eval_filter(e, t, mask, &err));
        assert_ok(mr_expr_eval_filter(e, tp, mask2, &err));
        size_t hits = 0;
        for (size_t i = 0; i < t->n_rows; i++) hits += mask[i];
        if (t->n_rows && memcmp(mask, mask2, t->n_rows))
            fail_msg("seed %llu iter %d: \"%s\": dictionary and plain tables disagree", (unsigned long long)seed, iter,
                     text.data);
        mr_prune pr = mr_expr_prune(e, st, 6);
        if (pr == MR_PRUNE_NONE && hits)
            fail_msg("seed %llu iter %d: \"%s\": prune says NONE but %zu of %zu rows match", (unsigned long long)seed,
                     iter, text.data, hits, t->n_rows);
        if (pr == MR_PRUNE_ALL && hits != t->n_rows)
            fail_msg("seed %llu iter %d: \"%s\": prune says ALL but %zu of %zu rows match", (unsigned long long)seed,
                     iter, text.data, hits, t->n_rows);
        n_none += pr == MR_PRUNE_NONE && t->n_rows; /* empty tables prune trivially */
        n_all += pr == MR_PRUNE_ALL && t->n_rows;
        n_some += pr == MR_PRUNE_SOME;
        n_empty += t->n_rows == 0;
        /* the printer round-trips every generated expression */
        char *p1 = print_of(e);
        mr_expr *e2 = parse_ok(p1);
        char *p2 = print_of(e2);
        if (strcmp(p1, p2)) fail_msg("round trip: \"%s\" -> \"%s\" -> \"%s\"", text.data, p1, p2);
        mr_free(p1);
        mr_free(p2);
        mr_expr_free(e2);
        mr_expr_free(e);
        mr_buf_free(&text);
        mr_table_free(t);
        mr_table_free(tp);
    }
    printf("test_prune_property: on non-empty tables NONE %ld, ALL %ld; SOME %ld; %ld empty tables\n", n_none, n_all,
           n_some, n_empty);
    /* the property must not hold vacuously */
    assert_true(n_none > 2000);
    assert_true(n_all > 1000);
}

static void test_prune_cases(void **state)
{
    (void)state;
    const char *names[] = {"x", "s", "f", "d", "p"};
    const mr_dtype types[] = {MR_T_INT64, MR_T_STRING, MR_T_FLOAT64, MR_T_DATE, MR_T_BOOL};
    mr_col_stats st[5];
    memset(st, 0, sizeof(st));
    for (int c = 0; c < 5; c++) {
        st[c].row_count = 100;
        st[c].has_null_count = 1;
        st[c].has_min_max = 1;
    }
    st[0].min.i = 10; /* x in [10, 20], no nulls */
    st[0].max.i = 20;
    st[1].min.s.ptr = "DE"; /* s in ['DE', 'FR'], 5 nulls */
    st[1].min.s.len = 2;
    st[1].max.s.ptr = "FR";
    st[1].max.s.len = 2;
    st[1].null_count = 5;
    st[2].min.f = -1.5; /* f in [-1.5, 2.5] */
    st[2].max.f = 2.5;
    st[3].min.i = mr_date_from_civil(2024, 1, 1); /* d in January 2024 */
    st[3].max.i = mr_date_from_civil(2024, 1, 31);
    st[4].min.b = 1; /* p always true */
    st[4].max.b = 1;
    static const struct {
        const char *text;
        mr_prune want;
    } cases[] = {
        {"x > 20", MR_PRUNE_NONE},
        {"x >= 20", MR_PRUNE_SOME},
        {"x >= 10", MR_PRUNE_ALL},
        {"x < 10", MR_PRUNE_NONE},
        {"30 < x", MR_PRUNE_NONE},
        {"5 < x", MR_PRUNE_ALL},
        {"x = 25", MR_PRUNE_NONE},
        {"x != 25", MR_PRUNE_ALL},
        {"x = 15", MR_PRUNE_SOME},
        {"x = NULL", MR_PRUNE_NONE},
        {"x IN (1, 2, 30)", MR_PRUNE_NONE},
        {"x IN (1, 15)", MR_PRUNE_SOME},
        {"x NOT IN (1, 2)", MR_PRUNE_ALL},
        {"x NOT IN (1, NULL)", MR_PRUNE_NONE},
        {"x BETWEEN 21 AND 30", MR_PRUNE_NONE},
        {"x BETWEEN 0 AND 30", MR_PRUNE_ALL},
        {"x BETWEEN 15 AND 30", MR_PRUNE_SOME},
        {"x NOT BETWEEN 0 AND 30", MR_PRUNE_NONE},
        {"x BETWEEN 30 AND 0", MR_PRUNE_NONE},
        {"x IS NULL", MR_PRUNE_NONE},
        {"x IS NOT NULL", MR_PRUNE_ALL},
        {"x > 5 AND x < 25", MR_PRUNE_ALL},
        {"x > 25 OR x < 5", MR_PRUNE_NONE},
        {"NOT x > 25", MR_PRUNE_ALL},
        {"x > 25 OR s = 'GB'", MR_PRUNE_NONE},
        {"x > 25 OR s = 'EE'", MR_PRUNE_SOME},
        {"s = 'AT'", MR_PRUNE_NONE},
        {"s = 'EE'", MR_PRUNE_SOME},
        {"s != 'AT'", MR_PRUNE_SOME}, /* nulls */
        {"s IS NULL", MR_PRUNE_SOME},
        {"s IS NOT NULL AND s > 'A'", MR_PRUNE_SOME},
        {"s > 'G'", MR_PRUNE_NONE},
        {"f > 2.5", MR_PRUNE_NONE},
        {"f > 2", MR_PRUNE_SOME},
        {"f >= -1.5", MR_PRUNE_ALL},
        {"x > 19.5", MR_PRUNE_SOME},
        {"x > 20.5", MR_PRUNE_NONE},
        {"d >= DATE '2024-02-01'", MR_PRUNE_NONE},
        {"d < TIMESTAMP '2024-02-01 00:00:00'", MR_PRUNE_ALL},
        {"d > TIMESTAMP '2024-01-31 00:00:00'", MR_PRUNE_NONE},
        {"d > TIMESTAMP '2024-01-30 23:59:59'", MR_PRUNE_SOME},
        {"p", MR_PRUNE_ALL},
        {"NOT p", MR_PRUNE_NONE},
        {"p = FALSE", MR_PRUNE_NONE},
        {"TRUE", MR_PRUNE_ALL},
        {"FALSE OR x > 100", MR_PRUNE_NONE},
        {"NULL", MR_PRUNE_NONE},
        {"x + 1 > 100", MR_PRUNE_SOME},
        {"abs(x) > 100", MR_PRUNE_SOME},
        {"x > 100 AND abs(x) > 1", MR_PRUNE_NONE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mr_expr *e = parse_ok(cases[i].text);
        assert_ok(mr_expr_bind(e, names, types, 5, MR_EXPR_FILTER, NULL));
        mr_prune got = mr_expr_prune(e, st, 5);
        if (got != cases[i].want) fail_msg("prune \"%s\": %d, want %d", cases[i].text, got, cases[i].want);
        assert_int_equal(mr_expr_prune(e, st, 4), MR_PRUNE_SOME); /* schema mismatch */
        mr_expr_free(e);
    }
    /* NaN rows are outside min/max: never ALL, never NONE for != */
    st[2].nan_count = 3;
    mr_expr *e = parse_ok("f >= -1.5");
    assert_ok(mr_expr_bind(e, names, types, 5, MR_EXPR_FILTER, NULL));
    assert_int_equal(mr_expr_prune(e, st, 5), MR_PRUNE_SOME);
    mr_expr_free(e);
    /* all-null column */
    st[0].null_count = 100;
    st[0].has_min_max = 0;
    e = parse_ok("x = 3 OR x IS NULL");
    assert_ok(mr_expr_bind(e, names, types, 5, MR_EXPR_FILTER, NULL));
    assert_int_equal(mr_expr_prune(e, st, 5), MR_PRUNE_ALL);
    mr_expr_free(e);
    /* unbound: SOME */
    e = parse_ok("x > 100");
    assert_int_equal(mr_expr_prune(e, st, 5), MR_PRUNE_SOME);
    mr_expr_free(e);
}

/* ---- allocation failures ---------------------------------------------------- */

static void test_oom(void **state)
{
    (void)state;
    mr_table *t = sample_table(1);
    const char *text = "country IN ('FR', 'DE') AND lower(s) != 'x' OR coalesce(x, 1) / 2 > f AND ts > d";
    int ok_runs = 0;
    for (long k = 1; k < 400 && ok_runs < 3; k++) {
        mr_error err;
        mr_error_init(&err);
        mr_expr *e = NULL;
        mr_column *c = NULL;
        uint8_t mask[N_ROWS];
        mr_buf b;
        mr_buf_init(&b);
        mr_alloc_fail_after(k);
        mr_status rc = mr_expr_parse(text, strlen(text), "filter", &e, &err);
        if (rc == MR_OK) rc = mr_expr_bind_table(e, t, MR_EXPR_FILTER, &err);
        if (rc == MR_OK) rc = mr_expr_eval_filter(e, t, mask, &err);
        if (rc == MR_OK) rc = mr_expr_eval(e, t, &c, &err);
        mr_status prc = rc == MR_OK ? mr_expr_print(e, &b) : MR_OK;
        mr_alloc_fail_after(0);
        if (rc != MR_OK && rc != MR_E_NOMEM) fail_msg("k=%ld: %s: %s", k, mr_status_name(rc), err.msg);
        if (rc == MR_E_NOMEM && err.code != MR_E_NOMEM) fail_msg("k=%ld: NOMEM without an error message", k);
        if (prc != MR_OK && prc != MR_E_NOMEM) fail_msg("k=%ld: print: %s", k, mr_status_name(prc));
        rc = rc == MR_OK ? prc : rc;
        ok_runs += rc == MR_OK;
        mr_buf_free(&b);
        mr_column_free(c);
        mr_expr_free(e);
    }
    assert_true(ok_runs > 0);
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_print),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_not_nul_terminated),
        cmocka_unit_test(test_columns),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_eval_filter),
        cmocka_unit_test(test_eval_values),
        cmocka_unit_test(test_eval_new_functions),
        cmocka_unit_test(test_eval_errors),
        cmocka_unit_test(test_three_valued_logic),
        cmocka_unit_test(test_dict_matches_plain),
        cmocka_unit_test(test_prune_cases),
        cmocka_unit_test(test_prune_property),
        cmocka_unit_test(test_oom),
    };
    return mr_test_run(tests, NULL, NULL);
}
