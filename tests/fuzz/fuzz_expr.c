/* libFuzzer target for the expression engine: parses arbitrary bytes and,
 * when they parse, checks that the canonical text round-trips, binds against
 * a fixed table, evaluates over dictionary and plain string copies of it
 * (results must agree) and checks statistics pruning against evaluation.
 * Any violated invariant aborts. tests/fuzz/replay.c feeds the corpus
 * to the same entry point under ctest with any compiler. */
#include "millrace/expr.h"
#include "millrace/table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_ROWS 16

static mr_table *g_dict, *g_plain;
static mr_col_stats g_stats[10];

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_expr: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                             \
        }                                                                        \
    } while (0)

static void add(mr_table *t, mr_column *c) { CHECK(mr_table_add_column(t, c, NULL) == MR_OK); }

static mr_table *build(int dict)
{
    static const char *const strs[] = {"FR", "de", "", "it's", "US"};
    mr_table *t;
    mr_column *c, *d;
    CHECK(mr_table_new(&t, NULL) == MR_OK);
    CHECK(mr_column_new("a", MR_T_INT64, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++)
        CHECK((i % 5 == 4 ? mr_column_append_null(c) : mr_column_append_int64(c, i == 3 ? INT64_MAX : i - 6)) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("b", MR_T_INT64, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++) CHECK(mr_column_append_int64(c, (i * 7) % 5 - 2) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("f", MR_T_FLOAT64, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++)
        CHECK((i % 6 == 1 ? mr_column_append_null(c) : mr_column_append_float64(c, i == 8 ? NAN : (i - 7) * 0.75)) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("f32", MR_T_FLOAT32, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++) CHECK(mr_column_append_float32(c, (float)i / 4) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("s", MR_T_STRING, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++)
        CHECK((i % 7 == 2 ? mr_column_append_null(c) : mr_column_append_str(c, strs[i % 5], strlen(strs[i % 5]))) == MR_OK);
    add(t, c);
    if (dict) {
        CHECK(mr_column_new("dict", MR_T_STRING, 0, &d, NULL) == MR_OK);
        for (int k = 0; k < 3; k++) CHECK(mr_column_append_str(d, strs[k], strlen(strs[k])) == MR_OK);
        CHECK(mr_column_new_dict("c", d, 0, &c, NULL) == MR_OK);
        for (int i = 0; i < N_ROWS; i++) CHECK((i % 4 == 3 ? mr_column_append_null(c) : mr_column_append_code(c, i % 3)) == MR_OK);
    } else {
        CHECK(mr_column_new("c", MR_T_STRING, 0, &c, NULL) == MR_OK);
        for (int i = 0; i < N_ROWS; i++)
            CHECK((i % 4 == 3 ? mr_column_append_null(c) : mr_column_append_str(c, strs[i % 3], strlen(strs[i % 3]))) == MR_OK);
    }
    add(t, c);
    CHECK(mr_column_new("d", MR_T_DATE, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++)
        CHECK((i % 5 == 0 ? mr_column_append_null(c) : mr_column_append_int32(c, 19700 + i * 3)) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("ts", MR_T_TIMESTAMP, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++)
        CHECK((i % 6 == 5 ? mr_column_append_null(c) : mr_column_append_int64(c, (int64_t)(19700 + i * 2) * 86400000000 + i * 3600000000LL)) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("p", MR_T_BOOL, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++) CHECK((i % 3 == 2 ? mr_column_append_null(c) : mr_column_append_bool(c, i % 2)) == MR_OK);
    add(t, c);
    CHECK(mr_column_new("odd name", MR_T_INT64, 0, &c, NULL) == MR_OK);
    for (int i = 0; i < N_ROWS; i++) CHECK(mr_column_append_int64(c, i) == MR_OK);
    add(t, c);
    return t;
}

/* Exact statistics of each column of t. */
static void stats_of(const mr_table *t, mr_col_stats *st)
{
    for (size_t c = 0; c < t->n_cols; c++) {
        const mr_column *col = t->cols[c];
        mr_col_stats *x = &st[c];
        memset(x, 0, sizeof(*x));
        x->row_count = t->n_rows;
        x->has_null_count = 1;
        for (size_t i = 0; i < col->n; i++) {
            if (mr_column_is_null(col, i)) {
                x->null_count++;
                continue;
            }
            mr_stat_value v;
            int lt, gt;
            switch (col->type) {
            case MR_T_BOOL: v.b = ((const uint8_t *)col->data)[i]; break;
            case MR_T_DATE: v.i = ((const int32_t *)col->data)[i]; break;
            case MR_T_INT64:
            case MR_T_TIMESTAMP: v.i = ((const int64_t *)col->data)[i]; break;
            case MR_T_FLOAT64: v.f = ((const double *)col->data)[i]; break;
            case MR_T_FLOAT32: v.f = ((const float *)col->data)[i]; break;
            default: v.s.ptr = mr_column_str(col, i, &v.s.len); break;
            }
            if ((col->type == MR_T_FLOAT64 || col->type == MR_T_FLOAT32) && isnan(v.f)) {
                x->nan_count++;
                continue;
            }
            if (!x->has_min_max) {
                x->has_min_max = 1;
                x->min = x->max = v;
                continue;
            }
            switch (col->type) {
            case MR_T_BOOL: lt = v.b < x->min.b; gt = v.b > x->max.b; break;
            case MR_T_FLOAT64:
            case MR_T_FLOAT32: lt = v.f < x->min.f; gt = v.f > x->max.f; break;
            case MR_T_STRING: {
                size_t m1 = v.s.len < x->min.s.len ? v.s.len : x->min.s.len;
                size_t m2 = v.s.len < x->max.s.len ? v.s.len : x->max.s.len;
                int c1 = m1 ? memcmp(v.s.ptr, x->min.s.ptr, m1) : 0, c2 = m2 ? memcmp(v.s.ptr, x->max.s.ptr, m2) : 0;
                lt = c1 < 0 || (c1 == 0 && v.s.len < x->min.s.len);
                gt = c2 > 0 || (c2 == 0 && v.s.len > x->max.s.len);
                break;
            }
            default: lt = v.i < x->min.i; gt = v.i > x->max.i; break;
            }
            if (lt) x->min = v;
            if (gt) x->max = v;
        }
    }
}

static void setup(void)
{
    if (g_dict) return;
    g_dict = build(1);
    g_plain = build(0);
    stats_of(g_dict, g_stats);
}

static char *values(const mr_column *c)
{
    mr_buf b;
    mr_buf_init(&b);
    CHECK(mr_buf_puts(&b, "") == MR_OK);
    for (size_t i = 0; i < c->n; i++) {
        CHECK(mr_column_format(c, i, &b) == MR_OK);
        CHECK(mr_buf_puts(&b, "\x1f") == MR_OK);
    }
    return b.data;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    mr_error err;
    mr_error_init(&err);
    mr_expr *e = NULL, *e2 = NULL;
    mr_column *c1 = NULL, *c2 = NULL;
    mr_buf p1, p2;
    mr_buf_init(&p1);
    mr_buf_init(&p2);
    mr_status rc = mr_expr_parse((const char *)data, size, "fuzz", &e, &err);
    if (rc != MR_OK) {
        CHECK(rc == MR_E_PARSE || rc == MR_E_LIMIT || rc == MR_E_NOT_FOUND);
        CHECK(err.code == rc && err.msg[0] && e == NULL);
        goto done;
    }
    /* canonical text: parse(print(e)) prints the same */
    CHECK(mr_expr_print(e, &p1) == MR_OK);
    mr_error_init(&err);
    CHECK(mr_expr_parse(p1.data, p1.len, "fuzz", &e2, &err) == MR_OK);
    CHECK(mr_expr_print(e2, &p2) == MR_OK);
    CHECK(p1.len == p2.len && !memcmp(p1.data, p2.data, p1.len));
    size_t n_cols;
    const char *const *cols = mr_expr_columns(e, &n_cols);
    for (size_t i = 0; i < n_cols; i++) CHECK(cols[i] && cols[i][0]);

    mr_error_init(&err);
    rc = mr_expr_bind_table(e, g_dict, 0, &err);
    if (rc != MR_OK) {
        CHECK(rc == MR_E_NOT_FOUND || rc == MR_E_SCHEMA);
        CHECK(err.msg[0]);
        goto done;
    }
    CHECK(mr_expr_eval(e, g_dict, &c1, &err) == MR_OK);
    CHECK(mr_expr_eval(e, g_plain, &c2, &err) == MR_OK);
    CHECK(c1->n == N_ROWS && c2->n == N_ROWS && c1->type == c2->type);
    char *v1 = values(c1), *v2 = values(c2);
    CHECK(!strcmp(v1, v2)); /* the dictionary path agrees with plain strings */
    mr_free(v1);
    mr_free(v2);
    mr_dtype t = mr_expr_type(e);
    if (t == MR_T_BOOL || t == MR_T_NULL) {
        uint8_t mask[N_ROWS];
        CHECK(mr_expr_eval_filter(e, g_dict, mask, &err) == MR_OK);
        size_t hits = 0;
        for (size_t i = 0; i < N_ROWS; i++) {
            CHECK(mask[i] <= 1);
            hits += mask[i];
            /* the mask is exactly the TRUE rows of the value column */
            int is_true = t == MR_T_BOOL && !mr_column_is_null(c1, i) && ((const uint8_t *)c1->data)[i];
            CHECK(mask[i] == is_true);
        }
        mr_prune pr = mr_expr_prune(e, g_stats, g_dict->n_cols);
        if (pr == MR_PRUNE_NONE) CHECK(hits == 0);
        if (pr == MR_PRUNE_ALL) CHECK(hits == N_ROWS);
    }
done:
    mr_column_free(c1);
    mr_column_free(c2);
    mr_buf_free(&p1);
    mr_buf_free(&p2);
    mr_expr_free(e);
    mr_expr_free(e2);
    return 0;
}
