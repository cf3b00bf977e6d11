/* Unit tests for the embedded online store (src/data/online.c): built from
 * two views, every entity's vector read back as mr_pit_latest computed it,
 * ttl and "after now" applied at read time, unknown entities, keys that do
 * not parse; and 3,000 damaged copies of a store (bytes flipped, cut short)
 * each refused or read without a crash (ASan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/online.h"
#include "millrace/table.h"

#define T0 (INT64_C(1704067200) * MR_PIT_SECOND_US) /* 2024-01-01 */

static mr_table *make_view(int which)
{
    mr_table *t = NULL;
    mr_column *k = NULL, *ts = NULL, *x = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("id", MR_T_INT64, 0, &k, NULL));
    assert_ok(mr_column_new("ts", MR_T_TIMESTAMP, 0, &ts, NULL));
    assert_ok(mr_column_new(which ? "name" : "score", which ? MR_T_STRING : MR_T_FLOAT64, 0, &x, NULL));
    for (int i = 0; i < 200; i++) {
        int id = which ? i % 30 + 10 : i % 25; /* ids 0..24 and 10..39 */
        assert_ok(mr_column_append_int64(k, id));
        assert_ok(mr_column_append_int64(ts, T0 + (int64_t)i * 60 * MR_PIT_SECOND_US));
        if (which) {
            char buf[32];
            snprintf(buf, sizeof(buf), "n%d", i);
            assert_ok(mr_column_append_str(x, buf, strlen(buf)));
        } else if (i % 7 == 0) {
            assert_ok(mr_column_append_null(x));
        } else {
            assert_ok(mr_column_append_float64(x, i * 0.5));
        }
    }
    assert_ok(mr_table_add_column(t, k, NULL));
    assert_ok(mr_table_add_column(t, ts, NULL));
    assert_ok(mr_table_add_column(t, x, NULL));
    return t;
}

static char path[512];

static void build(mr_table **a, mr_table **b)
{
    *a = make_view(0);
    *b = make_view(1);
    static const char *keys[] = {"id"}, *fa[] = {"score"}, *fb[] = {"name"};
    mr_pit_view v[2] = {
        {.name = "scores", .table = *a, .keys = keys, .ts = "ts", .ttl_us = 3600 * MR_PIT_SECOND_US, .features = fa,
         .n_features = 1},
        {.name = "names", .table = *b, .keys = keys, .ts = "ts", .features = fb, .n_features = 1, .prefix = "p_"},
    };
    snprintf(path, sizeof(path), "%s/online.mrfs", mr_test_tmpdir());
    assert_ok(mr_online_build(path, keys, 1, v, 2, 0, NULL));
}

static void test_round_trip(void **state)
{
    (void)state;
    mr_table *a, *b;
    build(&a, &b);
    mr_online *s = NULL;
    assert_ok(mr_online_open(path, &s, NULL));
    assert_int_equal(mr_online_n_entities(s), 40);
    assert_int_equal(mr_online_n_features(s), 2);
    assert_string_equal(mr_online_feature_name(s, 1), "p_name");
    assert_true(mr_online_view_ttl(s, 0) == 3600 * MR_PIT_SECOND_US);
    int64_t end = T0 + 200 * 60 * MR_PIT_SECOND_US; /* after every event */
    for (int id = 0; id < 40; id++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", id);
        const char *kt[] = {key};
        mr_table *row = NULL;
        int found = 0;
        assert_ok(mr_online_get(s, kt, end, &row, &found, NULL));
        assert_int_equal(found, 1);
        /* the latest score row of id: i = id + 25 * m, the largest below 200 */
        if (id < 25) {
            int i = id + 25 * ((199 - id) / 25);
            int64_t et = T0 + (int64_t)i * 60 * MR_PIT_SECOND_US;
            const mr_column *c = mr_table_column(row, "score");
            int live = end - et <= 3600 * MR_PIT_SECOND_US;
            if (!live || i % 7 == 0) assert_true(mr_column_is_null(c, 0));
            else assert_true(((double *)c->data)[0] == i * 0.5);
        } else {
            assert_true(mr_column_is_null(mr_table_column(row, "score"), 0));
        }
        const mr_column *n = mr_table_column(row, "p_name");
        if (id >= 10) {
            int i = (id - 10) + 30 * ((199 - (id - 10)) / 30);
            char want[16];
            snprintf(want, sizeof(want), "n%d", i);
            size_t l;
            const char *got = mr_column_str(n, 0, &l);
            assert_false(mr_column_is_null(n, 0));
            assert_int_equal(l, strlen(want));
            assert_memory_equal(got, want, l);
        } else {
            assert_true(mr_column_is_null(n, 0));
        }
        mr_table_free(row);
    }
    /* before the latest event: the store cannot answer for then, and says null */
    const char *k3[] = {"3"};
    mr_table *row = NULL;
    assert_ok(mr_online_get(s, k3, T0, &row, NULL, NULL));
    assert_true(mr_column_is_null(row->cols[0], 0) && mr_column_is_null(row->cols[1], 0));
    mr_table_free(row);
    const char *unknown[] = {"999"}, *bad[] = {"x1"};
    int found = 1;
    assert_ok(mr_online_get(s, unknown, end, &row, &found, NULL));
    assert_int_equal(found, 0);
    mr_table_free(row);
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_online_get(s, bad, end, &row, NULL, &err), MR_E_PARSE);
    assert_non_null(strstr(err.msg, "key 'id': expected int64, got \"x1\""));
    mr_online_close(s);
    mr_table_free(a);
    mr_table_free(b);
}

static void test_damaged(void **state)
{
    (void)state;
    if (mr_test_torturing()) return; /* thousands of files: the round trip covers the allocations */
    mr_table *a, *b;
    build(&a, &b);
    char *data = NULL;
    size_t len = 0;
    assert_ok(mr_fs_read_file(path, 0, &data, &len, NULL));
    char bad[600];
    snprintf(bad, sizeof(bad), "%s/bad.mrfs", mr_test_tmpdir());
    uint64_t rng = 12345;
    int opened = 0;
    for (int it = 0; it < 3000; it++) {
        char *copy = malloc(len);
        assert_non_null(copy);
        memcpy(copy, data, len);
        size_t n = len;
        int flips = 1 + it % 4;
        for (int f = 0; f < flips; f++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)((rng >> 33) % len);
            copy[at] ^= (char)(1u << ((rng >> 20) % 8));
        }
        if (it % 5 == 0) n = (size_t)((rng >> 13) % len);
        FILE *fp = fopen(bad, "wb");
        assert_non_null(fp);
        if (n) assert_int_equal(fwrite(copy, 1, n, fp), n);
        fclose(fp);
        free(copy);
        mr_online *s = NULL;
        mr_error err;
        mr_error_init(&err);
        mr_status st = mr_online_open(bad, &s, &err);
        if (st != MR_OK) {
            assert_true(st == MR_E_CORRUPT);
            continue;
        }
        opened++;
        for (int id = 0; id < 45; id += 4) {
            char key[16];
            snprintf(key, sizeof(key), "%d", id);
            const char *kt[] = {key};
            mr_table *row = NULL;
            st = mr_online_get(s, kt, INT64_MAX, &row, NULL, NULL);
            assert_true(st == MR_OK || st == MR_E_CORRUPT || st == MR_E_PARSE);
            mr_table_free(row);
        }
        mr_online_close(s);
    }
    assert_true(opened > 100); /* damage in the records reaches the lookups */
    mr_free(data);
    mr_table_free(a);
    mr_table_free(b);
}

int main(void)
{
    mr_pool_init(2, NULL);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_trip), cmocka_unit_test(test_damaged)};
    return mr_test_run(tests, NULL, NULL);
}
