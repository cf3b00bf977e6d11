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

#include "millrace/dataset.h"
#include "millrace/pit.h"
#include "millrace/table.h"

#include <unistd.h>

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

static void check_layout(int n_keys, int64_t span, int64_t ttl_s, int use_created, uint64_t seed, int layout);

/* The view's order for a layout: (k, et, ct) ascending with null keys and
 * times last, the row breaking ties (what the join sorts by). */
static const mr_table *sort_view;
static int cmp_view_rows(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    const mr_column *k = mr_table_column(sort_view, "k"), *et = mr_table_column(sort_view, "et");
    const mr_column *ct = mr_table_column(sort_view, "ct");
    int na = mr_column_is_null(k, a) || mr_column_is_null(et, a), nb = mr_column_is_null(k, b) || mr_column_is_null(et, b);
    if (na != nb) return na - nb;
    if (!na) {
        if (i64(k, a) != i64(k, b)) return i64(k, a) < i64(k, b) ? -1 : 1;
        if (i64(et, a) != i64(et, b)) return i64(et, a) < i64(et, b) ? -1 : 1;
        int ca = mr_column_is_null(ct, a), cb = mr_column_is_null(ct, b);
        if (ca != cb) return ca ? -1 : 1;
        if (!ca && i64(ct, a) != i64(ct, b)) return i64(ct, a) < i64(ct, b) ? -1 : 1;
    }
    return (a > b) - (a < b);
}

/* v reordered: layout 1 sorted as the join sorts, 2 as two sorted halves
 * one after the other (the shapes the sort takes in one pass or one merge). */
static mr_table *laid_out(mr_table *v, int layout)
{
    if (!layout) return v;
    size_t n = v->n_rows, half = layout == 2 ? n / 2 : n;
    uint32_t *idx = malloc(n * sizeof(*idx));
    assert_non_null(idx);
    for (size_t r = 0; r < n; r++) idx[r] = (uint32_t)r;
    sort_view = v;
    qsort(idx, half, sizeof(*idx), cmp_view_rows);
    qsort(idx + half, n - half, sizeof(*idx), cmp_view_rows);
    mr_table *t = NULL;
    assert_ok(mr_table_take(v, idx, n, &t, NULL));
    free(idx);
    mr_table_free(v);
    return t;
}

static void check_against_brute(int n_keys, int64_t span, int64_t ttl_s, int use_created, uint64_t seed)
{
    check_layout(n_keys, span, ttl_s, use_created, seed, 0);
}

static void check_layout(int n_keys, int64_t span, int64_t ttl_s, int use_created, uint64_t seed, int layout)
{
    rng_state = seed;
    mr_table *e = entities(700, n_keys, span), *v = laid_out(view(900, n_keys, span), layout);
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
    /* a view already in the join's order (one pass), or as two sorted runs (one merge) */
    check_layout(40, 200, 0, 1, 6, 1);
    check_layout(25, 2000, 60, 1, 7, 2);
    check_layout(40, 200, 0, 0, 8, 2);
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

/* ---- the join written to a dataset ---------------------------------------------- */

/* dir/name's bytes (NULL: unreadable); *len its length. */
static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(n > 0 ? (size_t)n : 1);
    *len = b && fread(b, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    return b;
}

/* Two dataset directories hold the same bytes: the manifest and every shard it names. */
static void assert_same_dataset(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *ma = slurp(a, "manifest.json", &la), *mb = slurp(b, "manifest.json", &lb);
    assert_non_null(ma);
    assert_non_null(mb);
    if (la != lb || memcmp(ma, mb, la)) fail_msg("manifests differ:\n%s\n%s", ma, mb);
    for (int i = 0; i < 100; i++) { /* the shards the (equal) manifests name */
        char name[64];
        snprintf(name, sizeof(name), "part-%05d.parquet", i);
        size_t sa = 0, sb = 0;
        char *pa = slurp(a, name, &sa), *pb = slurp(b, name, &sb);
        assert_int_equal(pa != NULL, pb != NULL);
        if (pa) {
            assert_int_equal(sa, sb);
            assert_memory_equal(pa, pb, sa);
        }
        free(pa);
        free(pb);
        if (!pa) break;
    }
    free(ma);
    free(mb);
}

typedef struct loader_arg {
    const mr_table *const *tables;
    int calls;
    const char *drop; /* a column the loaded copy lacks, or NULL */
} loader_arg;

static mr_status load_copy(void *arg, size_t v, mr_table **out, mr_error *err)
{
    loader_arg *l = arg;
    __atomic_fetch_add(&l->calls, 1, __ATOMIC_SEQ_CST);
    mr_status rc = mr_table_slice(l->tables[v], 0, l->tables[v]->n_rows, out, err);
    if (rc == MR_OK && l->drop) {
        const char *keep[8];
        size_t n = 0;
        for (size_t c = 0; c < (*out)->n_cols && n < 8; c++)
            if (strcmp((*out)->cols[c]->name, l->drop)) keep[n++] = (*out)->cols[c]->name;
        rc = mr_table_project(*out, keep, n, err);
        if (rc != MR_OK) {
            mr_table_free(*out);
            *out = NULL;
        }
    }
    return rc;
}

/* mr_pit_join_write: the bytes mr_pit_join's table makes as a dataset, with
 * and without a memory limit (batches of rows read back from the scratch),
 * with the views' tables or a loader, at 1 and 2 threads. */
static void test_join_write(void **state)
{
    (void)state;
    rng_state = 7;
    mr_table *e = entities(5000, 300, 20000), *v1 = view(4000, 300, 20000), *v2 = view(3000, 300, 20000);
    const char *keys[] = {"k"}, *f1[] = {"f", "g"}, *f2[] = {"g", "f"};
    mr_pit_view views[2] = {
        {.name = "one", .table = v1, .keys = keys, .ts = "et", .created = "ct", .features = f1, .n_features = 2,
         .prefix = "a_"},
        {.name = "two", .table = v2, .keys = keys, .ts = "et", .ttl_us = 900 * MR_PIT_SECOND_US, .features = f2,
         .n_features = 2, .prefix = "b_"},
    };
    char base[4096], want[4200], got[4200], tmp[4200];
    snprintf(base, sizeof(base), "%s/pit-write-XXXXXX", mr_test_tmpdir());
    assert_non_null(mkdtemp(base));
    snprintf(want, sizeof(want), "%s/want", base);
    snprintf(tmp, sizeof(tmp), "%s/tmp", base);
    assert_ok(mr_fs_mkdirs(tmp, NULL));
    mr_table *t = NULL;
    uint64_t missing[2];
    assert_ok(mr_pit_join(e, keys, 1, "ts", views, 2, 1, &t, missing, NULL));
    assert_ok(mr_dataset_write_table(want, t, NULL, NULL, NULL));
    const mr_table *tables[2] = {v1, v2};
    static const uint64_t limits[] = {0, 1, 1u << 20, 4u << 20};
    for (int run = 0; run < 16; run++) {
        uint64_t mem = limits[run % 4];
        int threads = 1 + (run / 4) % 2, loaded = run >= 8;
        loader_arg la = {tables, 0, NULL};
        mr_pit_write_opts o = {.threads = threads, .mem_bytes = mem, .tmp_dir = tmp,
                               .load = loaded ? load_copy : NULL, .load_arg = &la};
        uint64_t m2[2] = {0, 0}, rows[2] = {0, 0};
        mr_pit_write_stats st = {.missing = m2, .view_rows = rows};
        snprintf(got, sizeof(got), "%s/got%d", base, run);
        assert_ok(mr_pit_join_write(e, keys, 1, "ts", views, 2, &o, got, &st, NULL));
        assert_same_dataset(want, got);
        assert_int_equal(st.rows, 5000);
        assert_int_equal(st.cols, 7);
        assert_int_equal(m2[0], missing[0]);
        assert_int_equal(m2[1], missing[1]);
        assert_int_equal(rows[0], 4000);
        assert_int_equal(rows[1], 3000);
        assert_int_equal(la.calls, loaded ? 2 : 0);
        /* a limit sends every view through the scratch, in batches under 5000 rows */
        assert_int_equal(st.spilled, mem ? 2 : 0);
        if (mem && mem <= 1u << 20) assert_true(st.batch_rows >= 1024 && st.batch_rows < 5000);
        else assert_true(st.batch_rows >= 5000);
        /* a view here holds about 400 KB: half of 1 MB takes one at a time, half of 4 MB both */
        assert_int_equal(st.lanes, mem && mem <= 1u << 20 ? 1 : mr_pool_threads_capped(threads));
        assert_ok(mr_fs_rmtree(got, NULL));
    }
    /* no entity rows, under a limit: an empty dataset, as mr_pit_join's empty table makes */
    {
        mr_table *e0 = NULL, *t0 = NULL;
        assert_ok(mr_table_slice(e, 0, 0, &e0, NULL));
        assert_ok(mr_pit_join(e0, keys, 1, "ts", views, 2, 1, &t0, NULL, NULL));
        snprintf(want, sizeof(want), "%s/want0", base);
        assert_ok(mr_dataset_write_table(want, t0, NULL, NULL, NULL));
        mr_pit_write_opts o0 = {.threads = 2, .mem_bytes = 1, .tmp_dir = tmp};
        mr_pit_write_stats st0 = {0};
        snprintf(got, sizeof(got), "%s/got0", base);
        assert_ok(mr_pit_join_write(e0, keys, 1, "ts", views, 2, &o0, got, &st0, NULL));
        assert_int_equal(st0.rows, 0);
        assert_same_dataset(want, got);
        mr_table_free(t0);
        mr_table_free(e0);
    }
    /* the scratch is left empty */
    char probe[4300];
    snprintf(probe, sizeof(probe), "%s/pit-view-0.parquet", tmp);
    assert_int_equal(access(probe, F_OK), -1);
    /* a loaded view without its feature: named; a limit without a scratch directory */
    mr_error err;
    mr_error_init(&err);
    loader_arg la = {tables, 0, "g"};
    mr_pit_write_opts o = {.threads = 2, .load = load_copy, .load_arg = &la};
    snprintf(got, sizeof(got), "%s/bad", base);
    assert_status(mr_pit_join_write(e, keys, 1, "ts", views, 2, &o, got, NULL, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "feature view 'one' has no feature column 'g'"));
    assert_int_equal(access(got, F_OK) == 0 ? 1 : 0, 0);
    mr_error_init(&err);
    mr_pit_write_opts o2 = {.mem_bytes = 1 << 20};
    assert_status(mr_pit_join_write(e, keys, 1, "ts", views, 2, &o2, got, NULL, &err), MR_E_INVALID_ARG);
    assert_ok(mr_fs_rmtree(base, NULL));
    mr_table_free(t);
    mr_table_free(e);
    mr_table_free(v1);
    mr_table_free(v2);
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

/* Views streamed from their sorted datasets (tiny row groups, so that the
 * merge crosses many of them: runs of one key spanning groups, entity rows
 * decided by the last row of an earlier group, groups without a joinable
 * row): the same bytes as the in-memory join, at 1 and 2 threads; a dataset
 * not in order is loaded whole instead, with the same result. */
static void test_join_streamed(void **state)
{
    (void)state;
    for (uint64_t seed = 50; seed < 54; seed++) {
        rng_state = seed;
        mr_table *e = entities(3000, 40, 5000), *v1 = view(2500, 40, 5000), *v2 = view(1500, 40, 5000);
        const char *keys[] = {"k"}, *f1[] = {"f", "g"}, *f2[] = {"g"};
        mr_pit_view views[2] = {
            {.name = "one", .table = v1, .keys = keys, .ts = "et", .created = "ct", .features = f1, .n_features = 2,
             .ttl_us = seed % 2 ? 300 * MR_PIT_SECOND_US : 0, .prefix = "a_"},
            {.name = "two", .table = v2, .keys = keys, .ts = "et", .features = f2, .n_features = 1, .prefix = "b_"},
        };
        char base[4096], want[4200], got[4200], tmp[4200], d1[4200], d2[4200];
        snprintf(base, sizeof(base), "%s/pit-stream-XXXXXX", mr_test_tmpdir());
        assert_non_null(mkdtemp(base));
        snprintf(want, sizeof(want), "%s/want", base);
        snprintf(tmp, sizeof(tmp), "%s/tmp", base);
        snprintf(d1, sizeof(d1), "%s/one", base);
        snprintf(d2, sizeof(d2), "%s/two", base);
        assert_ok(mr_fs_mkdirs(tmp, NULL));
        mr_table *t = NULL;
        uint64_t missing[2];
        assert_ok(mr_pit_join(e, keys, 1, "ts", views, 2, 1, &t, missing, NULL));
        assert_ok(mr_dataset_write_table(want, t, NULL, NULL, NULL));
        /* view one written in the join's order; view two as it is (not in order) */
        uint32_t *order = NULL;
        size_t n = 0;
        mr_table *s1 = NULL;
        assert_ok(mr_pit_view_order(v1, keys, 1, "et", "ct", &order, &n, NULL));
        assert_ok(mr_table_take(v1, order, n, &s1, NULL));
        mr_free(order);
        mr_dataset_write_opts wo;
        mr_dataset_write_opts_init(&wo);
        wo.row_group_rows = 7 + seed % 5;
        assert_ok(mr_dataset_write_table(d1, s1, &wo, NULL, NULL));
        assert_ok(mr_dataset_write_table(d2, v2, &wo, NULL, NULL));
        const char *streams[2] = {d1, d2};
        for (int threads = 1; threads <= 2; threads++) {
            mr_pit_write_opts o = {.threads = threads, .mem_bytes = 1u << 20, .tmp_dir = tmp, .streams = streams};
            uint64_t m2[2] = {0, 0}, rows[2] = {0, 0};
            mr_pit_write_stats st = {.missing = m2, .view_rows = rows};
            snprintf(got, sizeof(got), "%s/got%d", base, threads);
            assert_ok(mr_pit_join_write(e, keys, 1, "ts", views, 2, &o, got, &st, NULL));
            assert_same_dataset(want, got);
            assert_int_equal(st.streamed, 1);
            assert_int_equal(st.unsorted, 1);
            assert_int_equal(m2[0], missing[0]);
            assert_int_equal(m2[1], missing[1]);
            assert_int_equal(rows[0], n);
            assert_ok(mr_fs_rmtree(got, NULL));
        }
        /* the sorted dataset streamed alone as both views' source: same as joining the sorted table */
        mr_pit_view sv[1] = {views[0]};
        sv[0].table = s1;
        mr_table *t1 = NULL;
        assert_ok(mr_pit_join(e, keys, 1, "ts", sv, 1, 1, &t1, NULL, NULL));
        snprintf(want, sizeof(want), "%s/want1", base);
        assert_ok(mr_dataset_write_table(want, t1, NULL, NULL, NULL));
        const char *one[1] = {d1};
        mr_pit_write_opts o1 = {.threads = 1, .mem_bytes = 1, .tmp_dir = tmp, .streams = one};
        mr_pit_write_stats st1 = {0};
        snprintf(got, sizeof(got), "%s/gotone", base);
        assert_ok(mr_pit_join_write(e, keys, 1, "ts", sv, 1, &o1, got, &st1, NULL));
        assert_int_equal(st1.streamed, 1);
        assert_same_dataset(want, got);
        assert_ok(mr_fs_rmtree(base, NULL));
        mr_table_free(t1);
        mr_table_free(s1);
        mr_table_free(t);
        mr_table_free(e);
        mr_table_free(v1);
        mr_table_free(v2);
    }
}

/* mr_pit_view_order: exactly the joinable rows (no null key or event time),
 * each pair in order by key, event time, created time (null first), row. */
static int64_t ival(const mr_column *c, size_t r) { return ((const int64_t *)c->data)[r]; }
static void test_view_order(void **state)
{
    (void)state;
    for (uint64_t seed = 40; seed < 46; seed++) {
        rng_state = seed;
        mr_table *v = view(3000, 30, 200);
        const char *keys[] = {"k"};
        uint32_t *order = NULL;
        size_t n = 0;
        assert_ok(mr_pit_view_order(v, keys, 1, "et", seed % 2 ? "ct" : NULL, &order, &n, NULL));
        const mr_column *k = mr_table_column(v, "k"), *et = mr_table_column(v, "et"), *ct = mr_table_column(v, "ct");
        size_t want = 0;
        for (size_t r = 0; r < v->n_rows; r++) want += !mr_column_is_null(k, r) && !mr_column_is_null(et, r);
        assert_int_equal(n, want);
        for (size_t i = 0; i + 1 < n; i++) {
            uint32_t a = order[i], b = order[i + 1];
            assert_false(mr_column_is_null(k, a) || mr_column_is_null(et, a));
            int c = (ival(k, a) > ival(k, b)) - (ival(k, a) < ival(k, b));
            if (!c) c = (ival(et, a) > ival(et, b)) - (ival(et, a) < ival(et, b));
            if (!c && seed % 2) {
                int na = mr_column_is_null(ct, a), nb = mr_column_is_null(ct, b);
                c = na != nb ? (na ? -1 : 1) : na ? 0 : (ival(ct, a) > ival(ct, b)) - (ival(ct, a) < ival(ct, b));
            }
            if (!c) c = a < b ? -1 : 1;
            if (c >= 0) fail_msg("seed %llu: rows %u and %u out of order at %zu", (unsigned long long)seed, a, b, i);
        }
        mr_free(order);
        /* a table already in that order, or two such runs, comes back as it is / merged */
        mr_table *sorted = NULL;
        assert_ok(mr_pit_view_order(v, keys, 1, "et", "ct", &order, &n, NULL));
        assert_ok(mr_table_take(v, order, n, &sorted, NULL));
        mr_free(order);
        assert_ok(mr_pit_view_order(sorted, keys, 1, "et", "ct", &order, &n, NULL));
        for (size_t i = 0; i < n; i++) assert_int_equal(order[i], i);
        mr_free(order);
        mr_table_free(sorted);
        mr_table_free(v);
    }
    /* errors: a missing column named with a hint, a key of a type no join takes */
    rng_state = 1;
    mr_table *v = view(10, 3, 10);
    uint32_t *order = NULL;
    size_t n = 0;
    mr_error err;
    mr_error_init(&err);
    const char *bad[] = {"kk"}, *fkey[] = {"f"};
    assert_status(mr_pit_view_order(v, bad, 1, "et", NULL, &order, &n, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.hint, "'k'"));
    mr_error_init(&err);
    assert_status(mr_pit_view_order(v, fkey, 1, "et", NULL, &order, &n, &err), MR_E_SCHEMA);
    mr_error_init(&err);
    assert_status(mr_pit_view_order(v, bad, 0, "et", NULL, &order, &n, &err), MR_E_INVALID_ARG);
    assert_null(order);
    mr_table_free(v);
}

int main(void)
{
    mr_pool_init(2, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brute_force), cmocka_unit_test(test_no_leakage), cmocka_unit_test(test_keys_and_dates),
        cmocka_unit_test(test_errors), cmocka_unit_test(test_join_write), cmocka_unit_test(test_durations), cmocka_unit_test(test_view_order),
        cmocka_unit_test(test_join_streamed),
    };
    return mr_test_run(tests, NULL, NULL);
}
