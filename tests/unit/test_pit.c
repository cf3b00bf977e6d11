/* Unit tests for point-in-time joins (src/data/pit.c): every output cell
 * equals a brute-force reference over random tables with ties, corrections
 * (created times, nulls among them), rows before the first event, exact
 * matches, ttl edges and null keys; the same bytes at 1 and 2 threads; no
 * leakage (a value stamped one second after a row is never joined to it);
 * string and two-column keys, date timestamps; the errors; durations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/pit.h"
#include "millrace/table.h"

static uint64_t rng_state;
static uint64_t rnd(uint64_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (rng_state >> 33) % n;
}

/* entity rows: k (int64, some null), ts (timestamp, some null), label */
static mr_table *entities(size_t n, int n_keys, int64_t span)
{
    mr_table *t = NULL;
    mr_column *k = NULL, *ts = NULL, *label = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("k", MR_T_INT64, n, &k, NULL));
    assert_ok(mr_column_new("ts", MR_T_TIMESTAMP, n, &ts, NULL));
    assert_ok(mr_column_new("label", MR_T_INT64, n, &label, NULL));
    for (size_t r = 0; r < n; r++) {
        if (rnd(40) == 0) assert_ok(mr_column_append_null(k));
        else assert_ok(mr_column_append_int64(k, (int64_t)rnd((uint64_t)n_keys)));
        if (rnd(50) == 0) assert_ok(mr_column_append_null(ts));
        else assert_ok(mr_column_append_int64(ts, (int64_t)rnd((uint64_t)span) * MR_PIT_SECOND_US));
        assert_ok(mr_column_append_int64(label, (int64_t)r));
    }
    assert_ok(mr_table_add_column(t, k, NULL));
    assert_ok(mr_table_add_column(t, ts, NULL));
    assert_ok(mr_table_add_column(t, label, NULL));
    return t;
}

/* view rows: k, et (event time, some null), ct (created, some null), f (float), g (string) */
static mr_table *view(size_t n, int n_keys, int64_t span)
{
    mr_table *t = NULL;
    mr_column *k = NULL, *et = NULL, *ct = NULL, *f = NULL, *g = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("k", MR_T_INT64, n, &k, NULL));
    assert_ok(mr_column_new("et", MR_T_TIMESTAMP, n, &et, NULL));
    assert_ok(mr_column_new("ct", MR_T_TIMESTAMP, n, &ct, NULL));
    assert_ok(mr_column_new("f", MR_T_FLOAT64, n, &f, NULL));
    assert_ok(mr_column_new("g", MR_T_STRING, n, &g, NULL));
    for (size_t r = 0; r < n; r++) {
        if (rnd(60) == 0) assert_ok(mr_column_append_null(k));
        else assert_ok(mr_column_append_int64(k, (int64_t)rnd((uint64_t)n_keys)));
        if (rnd(60) == 0) assert_ok(mr_column_append_null(et));
        else assert_ok(mr_column_append_int64(et, (int64_t)rnd((uint64_t)span) * MR_PIT_SECOND_US));
        if (rnd(4) == 0) assert_ok(mr_column_append_null(ct));
        else assert_ok(mr_column_append_int64(ct, (int64_t)rnd(5) * MR_PIT_SECOND_US));
        if (rnd(20) == 0) assert_ok(mr_column_append_null(f));
        else assert_ok(mr_column_append_float64(f, (double)r + 0.5));
        char buf[32];
        snprintf(buf, sizeof(buf), "row%zu", r);
        assert_ok(mr_column_append_str(g, buf, strlen(buf)));
    }
    assert_ok(mr_table_add_column(t, k, NULL));
    assert_ok(mr_table_add_column(t, et, NULL));
    assert_ok(mr_table_add_column(t, ct, NULL));
    assert_ok(mr_table_add_column(t, f, NULL));
    assert_ok(mr_table_add_column(t, g, NULL));
    return t;
}

static int64_t i64(const mr_column *c, size_t r) { return ((const int64_t *)c->data)[r]; }

/* The reference: the view row the rule picks for entity row r, or -1. */
static long brute(const mr_table *e, const mr_table *v, size_t r, int64_t ttl, int use_created)
{
    const mr_column *ek = mr_table_column(e, "k"), *ets = mr_table_column(e, "ts");
    const mr_column *vk = mr_table_column(v, "k"), *vt = mr_table_column(v, "et"), *vc = mr_table_column(v, "ct");
    if (mr_column_is_null(ek, r) || mr_column_is_null(ets, r)) return -1;
    long best = -1;
    for (size_t q = 0; q < v->n_rows; q++) {
        if (mr_column_is_null(vk, q) || mr_column_is_null(vt, q) || i64(vk, q) != i64(ek, r)) continue;
        if (i64(vt, q) > i64(ets, r)) continue;
        if (ttl > 0 && i64(ets, r) - i64(vt, q) > ttl) continue;
        if (best < 0 || i64(vt, q) > i64(vt, (size_t)best)) {
            best = (long)q;
            continue;
        }
        if (i64(vt, q) < i64(vt, (size_t)best)) continue;
        /* a tie on event time: the later created wins (null is oldest), then the later row */
        if (use_created) {
            int nq = mr_column_is_null(vc, q), nb = mr_column_is_null(vc, (size_t)best);
            if (nq && !nb) continue;
            if (!nq && !nb && i64(vc, q) < i64(vc, (size_t)best)) continue;
        }
        best = (long)q;
    }
    return best;
}

static void check_against_brute(int n_keys, int64_t span, int64_t ttl_s, int use_created, uint64_t seed)
{
    rng_state = seed;
    mr_table *e = entities(700, n_keys, span), *v = view(900, n_keys, span);
    const char *keys[] = {"k"}, *feats[] = {"f", "g"};
    mr_pit_view pv = {.name = "v", .table = v, .keys = keys, .ts = "et", .created = use_created ? "ct" : NULL,
                      .ttl_us = ttl_s * MR_PIT_SECOND_US, .features = feats, .n_features = 2, .prefix = "v_"};
    mr_table *out = NULL, *out2 = NULL;
    uint64_t missing = 0, missing2 = 0;
    assert_ok(mr_pit_join(e, keys, 1, "ts", &pv, 1, 1, &out, &missing, NULL));
    assert_ok(mr_pit_join(e, keys, 1, "ts", &pv, 1, 2, &out2, &missing2, NULL));
    assert_int_equal(out->n_rows, e->n_rows);
    assert_int_equal(out->n_cols, 5);
    assert_string_equal(out->cols[3]->name, "v_f");
    assert_string_equal(out->cols[4]->name, "v_g");
    uint64_t before = mr_alloc_failures_here();
    mr_hash128 h1 = mr_table_content_hash(out), h2 = mr_table_content_hash(out2);
    mr_test_accept_if_oom(before); /* the hash has no status: a failed allocation inside ends the iteration */
    assert_true(h1.lo == h2.lo && h1.hi == h2.hi); /* the thread count changes nothing */
    assert_int_equal(missing, missing2);
    const mr_column *of = mr_table_column(out, "v_f"), *og = mr_table_column(out, "v_g");
    const mr_column *vf = mr_table_column(v, "f");
    uint64_t want_missing = 0, matched = 0;
    for (size_t r = 0; r < e->n_rows; r++) {
        assert_int_equal(i64(mr_table_column(out, "label"), r), (int64_t)r); /* the entity rows' order */
        long q = brute(e, v, r, pv.ttl_us, use_created);
        if (q < 0) {
            want_missing++;
            assert_true(mr_column_is_null(of, r) && mr_column_is_null(og, r));
            continue;
        }
        matched++;
        size_t l1, l2;
        const char *s1 = mr_column_str(og, r, &l1), *s2 = mr_column_str(mr_table_column(v, "g"), (size_t)q, &l2);
        assert_false(mr_column_is_null(og, r));
        if (l1 != l2 || memcmp(s1, s2, l1)) fail_msg("row %zu: joined %.*s, the reference %.*s", r, (int)l1, s1, (int)l2, s2);
        assert_int_equal(mr_column_is_null(of, r), mr_column_is_null(vf, (size_t)q));
        if (!mr_column_is_null(of, r)) assert_true(((double *)of->data)[r] == ((double *)vf->data)[q]);
    }
    assert_int_equal(missing, want_missing);
    if (!(matched > 50 && want_missing > 5)) /* both cases are exercised */
        fail_msg("seed %llu: %llu matched, %llu missing", (unsigned long long)seed, (unsigned long long)matched,
                 (unsigned long long)want_missing);
    mr_table_free(out);
    mr_table_free(out2);
    mr_table_free(e);
    mr_table_free(v);
}

static void test_brute_force(void **state)
{
    (void)state;
    check_against_brute(40, 200, 0, 1, 1);    /* dense ties, corrections, no ttl */
    check_against_brute(40, 200, 0, 0, 2);    /* ties broken by row order alone */
    check_against_brute(25, 2000, 60, 1, 3);  /* a ttl that cuts many */
    check_against_brute(25, 150, 1, 1, 4);    /* ttl edges: exactly 1 s old counts */
    check_against_brute(300, 5000, 500, 1, 5); /* sparse: many rows before any event */
}

/* A value stamped one second after a row's timestamp is never joined. */
static void test_no_leakage(void **state)
{
    (void)state;
    for (uint64_t seed = 10; seed < 30; seed++) {
        rng_state = seed;
        mr_table *e = entities(300, 20, 400);
        /* the view: for every entity row, a value at ts + 1 s carrying -1; some at ts - 3 s carrying the row */
        mr_table *v = NULL;
        mr_column *k = NULL, *et = NULL, *f = NULL;
        assert_ok(mr_table_new(&v, NULL));
        assert_ok(mr_column_new("k", MR_T_INT64, 0, &k, NULL));
        assert_ok(mr_column_new("et", MR_T_TIMESTAMP, 0, &et, NULL));
        assert_ok(mr_column_new("f", MR_T_INT64, 0, &f, NULL));
        const mr_column *ek = mr_table_column(e, "k"), *ets = mr_table_column(e, "ts");
        for (size_t r = 0; r < e->n_rows; r++) {
            if (mr_column_is_null(ek, r) || mr_column_is_null(ets, r)) continue;
            assert_ok(mr_column_append_int64(k, i64(ek, r)));
            assert_ok(mr_column_append_int64(et, i64(ets, r) + MR_PIT_SECOND_US));
            assert_ok(mr_column_append_int64(f, -1));
        }
        assert_ok(mr_table_add_column(v, k, NULL));
        assert_ok(mr_table_add_column(v, et, NULL));
        assert_ok(mr_table_add_column(v, f, NULL));
        const char *keys[] = {"k"}, *feats[] = {"f"};
        mr_pit_view pv = {.name = "future", .table = v, .keys = keys, .ts = "et", .features = feats, .n_features = 1};
        mr_table *out = NULL;
        assert_ok(mr_pit_join(e, keys, 1, "ts", &pv, 1, 0, &out, NULL, NULL));
        const mr_column *of = mr_table_column(out, "f");
        for (size_t r = 0; r < out->n_rows; r++) {
            if (mr_column_is_null(of, r)) continue;
            /* a -1 joined is only right when an earlier entity row of the key put it at or before ts */
            int ok = 0;
            for (size_t q = 0; q < e->n_rows && !ok; q++)
                ok = !mr_column_is_null(ek, q) && !mr_column_is_null(ets, q) && i64(ek, q) == i64(ek, r) &&
                     i64(ets, q) + MR_PIT_SECOND_US <= i64(ets, r);
            assert_true(ok);
        }
        mr_table_free(out);
        mr_table_free(v);
        mr_table_free(e);
    }
}

/* Two key columns (a string and an int), a DATE entity time against a
 * TIMESTAMP view time, two views, no match before the first event. */
static void test_keys_and_dates(void **state)
{
    (void)state;
    mr_table *e = NULL, *v = NULL, *w = NULL;
    mr_column *c1, *c2, *d, *vk1, *vk2, *vt, *vf, *wk1, *wk2, *wt, *wf;
    assert_ok(mr_table_new(&e, NULL));
    assert_ok(mr_column_new("user", MR_T_STRING, 4, &c1, NULL));
    assert_ok(mr_column_new("item", MR_T_INT64, 4, &c2, NULL));
    assert_ok(mr_column_new("day", MR_T_DATE, 4, &d, NULL));
    const char *users[] = {"ann", "ann", "bob", "ann"};
    const int64_t items[] = {1, 2, 1, 1};
    const int32_t days[] = {10, 10, 10, 9};
    for (int i = 0; i < 4; i++) {
        assert_ok(mr_column_append_str(c1, users[i], strlen(users[i])));
        assert_ok(mr_column_append_int64(c2, items[i]));
        assert_ok(mr_column_append_int32(d, days[i]));
    }
    assert_ok(mr_table_add_column(e, c1, NULL));
    assert_ok(mr_table_add_column(e, c2, NULL));
    assert_ok(mr_table_add_column(e, d, NULL));
    /* view v: (ann, 1) at day 9 12:00 -> 1.0 and day 10 00:00 -> 2.0 (exactly the row's midnight: joined);
     * (bob, 1) at day 10 00:00:01 -> 3.0 (one second late: not joined) */
    assert_ok(mr_table_new(&v, NULL));
    assert_ok(mr_column_new("u", MR_T_STRING, 3, &vk1, NULL));
    assert_ok(mr_column_new("i", MR_T_INT64, 3, &vk2, NULL));
    assert_ok(mr_column_new("t", MR_T_TIMESTAMP, 3, &vt, NULL));
    assert_ok(mr_column_new("x", MR_T_FLOAT64, 3, &vf, NULL));
    const char *vu[] = {"ann", "ann", "bob"};
    const int64_t vi[] = {1, 1, 1}, vts[] = {9 * MR_PIT_DAY_US + MR_PIT_DAY_US / 2, 10 * MR_PIT_DAY_US,
                                              10 * MR_PIT_DAY_US + MR_PIT_SECOND_US};
    for (int i = 0; i < 3; i++) {
        assert_ok(mr_column_append_str(vk1, vu[i], strlen(vu[i])));
        assert_ok(mr_column_append_int64(vk2, vi[i]));
        assert_ok(mr_column_append_int64(vt, vts[i]));
        assert_ok(mr_column_append_float64(vf, (double)(i + 1)));
    }
    assert_ok(mr_table_add_column(v, vk1, NULL));
    assert_ok(mr_table_add_column(v, vk2, NULL));
    assert_ok(mr_table_add_column(v, vt, NULL));
    assert_ok(mr_table_add_column(v, vf, NULL));
    /* view w: the same keys, its own x, a one-day ttl */
    assert_ok(mr_table_new(&w, NULL));
    assert_ok(mr_column_new("u", MR_T_STRING, 1, &wk1, NULL));
    assert_ok(mr_column_new("i", MR_T_INT64, 1, &wk2, NULL));
    assert_ok(mr_column_new("t", MR_T_DATE, 1, &wt, NULL));
    assert_ok(mr_column_new("x", MR_T_INT64, 1, &wf, NULL));
    assert_ok(mr_column_append_str(wk1, "ann", 3));
    assert_ok(mr_column_append_int64(wk2, 2));
    assert_ok(mr_column_append_int32(wt, 9)); /* exactly the ttl before the row of day 10: still joined */
    assert_ok(mr_column_append_int64(wf, 7));
    assert_ok(mr_table_add_column(w, wk1, NULL));
    assert_ok(mr_table_add_column(w, wk2, NULL));
    assert_ok(mr_table_add_column(w, wt, NULL));
    assert_ok(mr_table_add_column(w, wf, NULL));
    const char *ekeys[] = {"user", "item"}, *vkeys[] = {"u", "i"}, *feats[] = {"x"};
    mr_pit_view views[2] = {
        {.name = "v", .table = v, .keys = vkeys, .ts = "t", .features = feats, .n_features = 1},
        {.name = "w", .table = w, .keys = vkeys, .ts = "t", .ttl_us = MR_PIT_DAY_US, .features = feats, .n_features = 1},
    };
    mr_table *out = NULL;
    mr_error err;
    mr_error_init(&err);
    /* both views name their feature x: the second collides */
    assert_status(mr_pit_join(e, ekeys, 2, "day", views, 2, 0, &out, NULL, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "'x' already exists"));
    views[1].prefix = "w_";
    uint64_t missing[2];
    assert_ok(mr_pit_join(e, ekeys, 2, "day", views, 2, 0, &out, missing, NULL));
    const mr_column *x = mr_table_column(out, "x"), *wx = mr_table_column(out, "w_x");
    assert_false(mr_column_is_null(x, 0));
    assert_true(((double *)x->data)[0] == 2.0); /* the event at the row's midnight counts */
    assert_true(mr_column_is_null(x, 1));        /* (ann, 2): no event in v */
    assert_true(mr_column_is_null(x, 2));        /* bob's event is one second late */
    assert_true(mr_column_is_null(x, 3));        /* day 9 reads as its midnight: the noon event is later */
    assert_true(mr_column_is_null(wx, 0));       /* w has only (ann, 2) */
    assert_false(mr_column_is_null(wx, 1));
    assert_int_equal(((int64_t *)wx->data)[1], 7); /* one day old, the ttl: joined */
    assert_int_equal(missing[0], 3);
    assert_int_equal(missing[1], 3);
    mr_table_free(out);
    /* a day shorter ttl than the value's age: not joined */
    views[1].ttl_us = MR_PIT_DAY_US - 1;
    assert_ok(mr_pit_join(e, ekeys, 2, "day", views, 2, 0, &out, missing, NULL));
    assert_true(mr_column_is_null(mr_table_column(out, "w_x"), 1));
    assert_int_equal(missing[1], 4);
    mr_table_free(out);
    mr_table_free(v);
    mr_table_free(w);
    mr_table_free(e);
}

static void test_errors(void **state)
{
    (void)state;
    rng_state = 99;
    mr_table *e = entities(10, 3, 10), *v = view(10, 3, 10);
    const char *keys[] = {"k"}, *bad_keys[] = {"kk"}, *feats[] = {"f"}, *bad_feats[] = {"ff"};
    mr_table *out = NULL;
    mr_error err;
    mr_pit_view pv = {.name = "v", .table = v, .keys = keys, .ts = "et", .features = feats, .n_features = 1};
    mr_error_init(&err);
    assert_status(mr_pit_join(e, bad_keys, 1, "ts", &pv, 1, 0, &out, NULL, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "the entity table has no key column 'kk'"));
    assert_non_null(strstr(err.hint, "'k'"));
    mr_error_init(&err);
    assert_status(mr_pit_join(e, keys, 1, "label", &pv, 1, 0, &out, NULL, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "is int64; a timestamp or a date is expected"));
    pv.features = bad_feats;
    mr_error_init(&err);
    assert_status(mr_pit_join(e, keys, 1, "ts", &pv, 1, 0, &out, NULL, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "feature view 'v' has no feature column 'ff'"));
    pv.features = feats;
    pv.ts = NULL;
    mr_error_init(&err);
    assert_status(mr_pit_join(e, keys, 1, "ts", &pv, 1, 0, &out, NULL, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "event timestamp"));
    pv.ts = "et";
    pv.keys = (const char *[]){"g"}; /* a string key against the entity's int64 */
    mr_error_init(&err);
    assert_status(mr_pit_join(e, keys, 1, "ts", &pv, 1, 0, &out, NULL, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "key column 'g' is string, the entity table's 'k' is int64"));
    assert_null(out);
    mr_table_free(e);
    mr_table_free(v);
}

static void test_durations(void **state)
{
    (void)state;
    int64_t us = 0;
    assert_ok(mr_pit_parse_duration("30d", &us));
    assert_true(us == 30 * MR_PIT_DAY_US);
    assert_ok(mr_pit_parse_duration("1d12h", &us));
    assert_true(us == 36 * 3600 * MR_PIT_SECOND_US);
    assert_ok(mr_pit_parse_duration("90", &us));
    assert_true(us == 90 * MR_PIT_SECOND_US);
    assert_ok(mr_pit_parse_duration("2w3m4s", &us));
    assert_true(us == (14 * 86400 + 184) * MR_PIT_SECOND_US);
    const char *bad[] = {"", "d", "3x", "1d12", "-5s", "1.5h", "99999999999999999999s", "300000000w"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_status(mr_pit_parse_duration(bad[i], &us), MR_E_PARSE);
}

int main(void)
{
    mr_pool_init(2, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brute_force), cmocka_unit_test(test_no_leakage), cmocka_unit_test(test_keys_and_dates),
        cmocka_unit_test(test_errors), cmocka_unit_test(test_durations),
    };
    return mr_test_run(tests, NULL, NULL);
}
