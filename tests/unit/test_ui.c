/* Unit tests for the run browser's app (src/ui/ui_app.c), driven without
 * sockets: the runs table (total, newest first, sort with runs lacking the
 * value last, filters with dotted names, tags, paging, unknown columns),
 * the snapshot following new runs, curves downsampled with their extremes
 * kept, the curve list, one run, the comparison, logs and artifacts
 * refused outside the store, and the read-only rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "millrace/pipeline.h"
#include "millrace/runstore.h"
#include "millrace/ui.h"

#define N_RUNS 300
#define CURVE 10000

typedef struct fixture {
    char dir[128];
    mr_ui_app *app;
} fixture;

typedef struct args {
    const char *k[8], *v[8];
    int n;
} args;

static const char *arg_of(void *ctx, const char *key)
{
    args *a = ctx;
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->k[i], key)) return a->v[i];
    return NULL;
}

static double auc_of(int i) { return 0.5 + 0.4 * fabs(sin(i * 0.7)); }

static void add_runs(const char *dir, int from, int n)
{
    char db[160];
    snprintf(db, sizeof(db), "%s/.millrace/runs.db", dir);
    mr_runstore *rs = NULL;
    assert_ok(mr_runstore_open(db, &rs, NULL));
    for (int i = from; i < from + n; i++) {
        char params[128], tag[32];
        snprintf(params, sizeof(params), "{\"train\":{\"leaves\":%d,\"lr\":%g,\"opt\":\"%s\"}}", 15 + i % 4 * 16,
                 0.01 * (i % 10 + 1), i % 2 ? "adam" : "sgd");
        snprintf(tag, sizeof(tag), "exp=g%d", i % 3);
        const char *tags[] = {tag};
        mr_run_begin info = {"millrace run", dir, "", 0, params, "", 0, NULL, tags, 1};
        int64_t id = 0;
        assert_ok(mr_runstore_run_begin(rs, &info, &id, NULL));
        mr_metric m = {"test.auc", 0, auc_of(i)};
        if (i % 50 != 7) /* some runs have no auc: they sort last */
            assert_ok(mr_runstore_metrics_add(rs, id, "eval", &m, 1, NULL));
        if (i == from + n - 1 && from == 1) { /* the newest first batch run has a long curve */
            mr_metric *pts = calloc(CURVE, sizeof(*pts));
            for (int s = 0; s < CURVE; s++) pts[s] = (mr_metric){"loss", s, 1.0 / (1 + s) + (s == 4321 ? 5.0 : 0)};
            assert_ok(mr_runstore_metrics_add(rs, id, "train", pts, CURVE, NULL));
            free(pts);
        }
        assert_ok(mr_runstore_run_end(rs, id, "ok", 1, 0, 0, 0, NULL));
    }
    mr_runstore_close(rs);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s/mr_ui_XXXXXX", mr_test_tmpdir());
    if (!mkdtemp(f->dir)) return -1;
    char path[200];
    snprintf(path, sizeof(path), "%s/millrace.yaml", f->dir);
    FILE *y = fopen(path, "w");
    fputs("stages: {}\n", y);
    fclose(y);
    mr_workspace *ws = NULL;
    assert_ok(mr_workspace_open(f->dir, 0, 1, &ws, NULL));
    mr_workspace_close(ws);
    add_runs(f->dir, 1, N_RUNS);
    assert_ok(mr_ui_app_open(f->dir, &f->app, NULL));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mr_ui_app_close(f->app);
    mr_fs_rmtree(f->dir, NULL);
    free(f);
    return 0;
}

/* GET path with the arguments; the JSON body parsed (the caller decrefs). */
static json_t *get(fixture *f, const char *path, args *a, int want_status)
{
    args none = {{0}, {0}, 0};
    mr_ui_response r;
    mr_ui_app_handle(f->app, "GET", path, arg_of, a ? a : &none, &r);
    if (r.status == 500) { /* torture: the app answered "out of memory" */
        mr_buf_free(&r.body);
        mr_test_accept_if_oom(0);
        assert_int_equal(r.status, want_status);
    }
    if (r.status != want_status) fail_msg("%s: status %d, want %d: %.300s", path, r.status, want_status, r.body.data);
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, NULL);
    if (!j) mr_test_accept_if_oom(oom0);
    mr_buf_free(&r.body);
    if (!j) fail_msg("%s: not JSON", path);
    return j;
}

static void test_runs_table(void **state)
{
    fixture *f = *state;
    json_t *d = get(f, "/api/runs", &(args){{"limit"}, {"5"}, 1}, 200);
    assert_int_equal(json_integer_value(json_object_get(d, "total")), N_RUNS);
    json_t *runs = json_object_get(d, "runs");
    assert_int_equal(json_array_size(runs), 5);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 0), "id")), N_RUNS); /* newest first */
    json_decref(d);

    /* sort by auc descending: the best first, the runs without one last */
    d = get(f, "/api/runs", &(args){{"sort", "columns", "limit"}, {"-metrics.eval.test.auc", "metrics.eval.test.auc", "1000"}, 3},
            200);
    runs = json_object_get(d, "runs");
    assert_int_equal(json_array_size(runs), N_RUNS);
    double best = -1;
    int best_i = 0;
    for (int i = 1; i <= N_RUNS; i++)
        if (i % 50 != 7 && auc_of(i) >= best) { /* ties: the newest first */
            best = auc_of(i);
            best_i = i;
        }
    assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 0), "id")), best_i);
    double prev = INFINITY;
    size_t n_with = 0;
    for (size_t k = 0; k < json_array_size(runs); k++) {
        json_t *c = json_array_get(json_object_get(json_array_get(runs, k), "cells"), 0);
        if (json_is_null(c)) {
            assert_true(k >= N_RUNS - N_RUNS / 50); /* missing values come last */
            continue;
        }
        n_with++;
        assert_true(json_real_value(c) <= prev);
        prev = json_real_value(c);
    }
    assert_int_equal(n_with, N_RUNS - N_RUNS / 50);
    json_decref(d);

    /* a filter over dotted names and a tag, counted independently */
    int want = 0;
    for (int i = 1; i <= N_RUNS; i++) want += i % 50 != 7 && auc_of(i) > 0.8 && 15 + i % 4 * 16 == 63 && i % 3 == 1;
    d = get(f, "/api/runs",
            &(args){{"filter", "tag", "limit"},
                    {"metrics.eval.test.auc > 0.8 and params.train.leaves = 63", "exp=g1", "1000"}, 3},
            200);
    assert_int_equal(json_integer_value(json_object_get(d, "matched")), want);
    assert_int_equal(json_array_size(json_object_get(d, "runs")), want);
    json_decref(d);
    /* a string holding a dotted word is left a string */
    want = 0;
    for (int i = 1; i <= N_RUNS; i++) want += i % 2 == 1;
    d = get(f, "/api/runs", &(args){{"filter"}, {"params.train.opt = 'adam' or status = 'a.b'"}, 1}, 200);
    assert_int_equal(json_integer_value(json_object_get(d, "matched")), want);
    json_decref(d);

    /* paging */
    d = get(f, "/api/runs", &(args){{"offset", "limit"}, {"290", "100"}, 2}, 200);
    runs = json_object_get(d, "runs");
    assert_int_equal(json_array_size(runs), 10);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 9), "id")), 1);
    json_decref(d);

    /* mistakes */
    d = get(f, "/api/runs", &(args){{"sort"}, {"metrics.eval.test.aux"}, 1}, 400);
    assert_non_null(strstr(json_string_value(json_object_get(d, "hint")), "metrics.eval.test.auc"));
    json_decref(d);
    d = get(f, "/api/runs", &(args){{"filter"}, {"params.train.nope > 1"}, 1}, 400);
    assert_non_null(strstr(json_string_value(json_object_get(d, "error")), "params.train.nope"));
    json_decref(d);
    json_decref(get(f, "/api/runs", &(args){{"limit"}, {"0"}, 1}, 400));
    json_decref(get(f, "/api/runs", &(args){{"columns"}, {"params.train.leaves,nope"}, 1}, 400));
}

static void test_snapshot_follows(void **state)
{
    fixture *f = *state;
    json_t *d = get(f, "/api/runs", &(args){{"limit"}, {"1"}, 1}, 200);
    assert_int_equal(json_integer_value(json_object_get(d, "total")), N_RUNS);
    json_decref(d);
    add_runs(f->dir, N_RUNS + 1, 2); /* another connection commits */
    d = get(f, "/api/runs", &(args){{"limit"}, {"1"}, 1}, 200);
    assert_int_equal(json_integer_value(json_object_get(d, "total")), N_RUNS + 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(d, "runs"), 0), "id")), N_RUNS + 2);
    json_decref(d);
    d = get(f, "/api/columns", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(d, "params")), 3);
    assert_int_equal(json_array_size(json_object_get(d, "tags")), 1);
    json_decref(d);
}

static void test_curves(void **state)
{
    fixture *f = *state;
    char run[16];
    snprintf(run, sizeof(run), "%d", N_RUNS);
    json_t *d = get(f, "/api/metrics", &(args){{"runs"}, {run}, 1}, 200);
    json_t *cv = json_object_get(d, "curves");
    assert_int_equal(json_array_size(cv), 1); /* the auc has one point: no curve */
    assert_string_equal(json_string_value(json_object_get(json_array_get(cv, 0), "metric")), "train/loss");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(cv, 0), "points")), CURVE);
    json_decref(d);
    d = get(f, "/api/curves", &(args){{"runs", "metric", "width"}, {run, "train/loss", "100"}, 3}, 200);
    json_t *s = json_array_get(json_object_get(d, "series"), 0);
    assert_int_equal(json_integer_value(json_object_get(s, "points")), CURVE);
    size_t nb = json_array_size(json_object_get(s, "x"));
    assert_true(nb > 0 && nb <= 100);
    assert_int_equal(json_integer_value(json_object_get(s, "buckets")), nb);
    double mx = -1, mn = 1e9;
    for (size_t k = 0; k < nb; k++) {
        mx = fmax(mx, json_number_value(json_array_get(json_object_get(s, "max"), k)));
        mn = fmin(mn, json_number_value(json_array_get(json_object_get(s, "min"), k)));
    }
    assert_true(mx == 1.0 / (1 + 4321) + 5.0); /* the spike survives downsampling */
    assert_true(mn == 1.0 / CURVE);
    json_decref(d);
    json_decref(get(f, "/api/curves", &(args){{"runs", "metric"}, {run, "nostage"}, 2}, 400));
    json_decref(get(f, "/api/curves", &(args){{"runs", "metric", "width"}, {"x", "train/loss", "100"}, 3}, 400));
    json_decref(get(f, "/api/curves", &(args){{"runs", "metric", "width"}, {run, "train/loss", "1"}, 3}, 400));
}

static void test_run_compare_and_refusals(void **state)
{
    fixture *f = *state;
    json_t *d = get(f, "/api/run", &(args){{"id"}, {"3"}, 1}, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "run"), "id")), 3);
    json_decref(d);
    json_decref(get(f, "/api/run", &(args){{"id"}, {"99999"}, 1}, 404));
    d = get(f, "/api/compare", &(args){{"runs"}, {"1,2,3"}, 1}, 200);
    size_t n_changed = 0;
    json_t *p;
    size_t k;
    json_array_foreach(json_object_get(d, "params"), k, p) n_changed += json_is_true(json_object_get(p, "changed"));
    assert_int_equal(n_changed, 3); /* leaves, lr and opt all differ between runs 1, 2, 3 */
    json_decref(d);
    json_decref(get(f, "/api/log", &(args){{"run", "stage"}, {"1", "../x"}, 2}, 400));
    json_decref(get(f, "/api/log", &(args){{"run", "stage"}, {"1", "train"}, 2}, 404));
    json_decref(get(f, "/api/artifact", &(args){{"id"}, {"../../etc/passwd"}, 1}, 400));
    json_decref(get(f, "/nope", NULL, 404));
    mr_ui_response r;
    args none = {{0}, {0}, 0};
    mr_ui_app_handle(f->app, "POST", "/api/runs", arg_of, &none, &r);
    assert_int_equal(r.status, 405);
    mr_buf_free(&r.body);
    mr_ui_app_handle(f->app, "GET", "/", arg_of, &none, &r);
    if (r.status == 500) mr_test_accept_if_oom(0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.content_type, "text/html"));
    assert_true(r.body.len > 1000);
    mr_buf_free(&r.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runs_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_follows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_curves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_compare_and_refusals, setup, teardown),
    };
    return mr_test_run(tests, NULL, NULL);
}
