/* Unit tests for the run store (src/pipeline/runstore*.c): schema creation,
 * reopening and the migration of a version-1 store, run/stage/metric
 * recording, the read views (structs) and their JSON documents, run names
 * and tags, list columns and sorting, N-run comparison, tune trials, the
 * stage and stat caches, reaping dead runs, run references, concurrent
 * writers, kept artifacts and cache pruning. Each test works in its own
 * temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "millrace/runstore.h"
#include "millrace/spec.h"
#include "millrace/store.h"

typedef struct fixture {
    char dir[64];
    char *db; /* dir/runs.db */
} fixture;

static int setup(void **state)
{
    fixture *f = mr_calloc(1, sizeof(*f));
    assert_alloc(f);
    snprintf(f->dir, sizeof(f->dir), "%s/mr_runstore_XXXXXX", mr_test_tmpdir());
    assert_non_null(mkdtemp(f->dir));
    f->db = mr_path_join(f->dir, "runs.db");
    assert_alloc(f->db);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_fs_rmtree(f->dir, &err));
    mr_free(f->db);
    mr_free(f);
    return 0;
}

static mr_runstore *open_ok(const char *path)
{
    mr_error err;
    mr_error_init(&err);
    mr_runstore *rs = NULL;
    mr_status st = mr_runstore_open(path, &rs, &err);
    if (st != MR_OK) fail_msg("open failed: %s", err.msg);
    assert_alloc(rs);
    return rs;
}

static int64_t begin_run(mr_runstore *rs, const char *params)
{
    mr_run_begin info = {"millrace run -j2", "/work/x", "abc123", 1, params, "train.rounds=300", 0, NULL, NULL, 0};
    int64_t id = 0;
    assert_ok(mr_runstore_run_begin(rs, &info, &id, NULL));
    assert_true(id > 0);
    return id;
}

/* Parses a JSON view; the caller decrefs. */
static json_t *view(mr_buf *b)
{
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *v = json_loads(b->data, 0, &je);
    if (!v) mr_test_accept_if_oom(oom0);
    if (!v) fail_msg("bad JSON (%s): %s", je.text, b->data);
    mr_buf_free(b);
    return v;
}

/* The --json document of `runs` (limit 0 = all), printed from the view. */
static json_t *runs_view_n(mr_runstore *rs, int limit)
{
    mr_runs_query q = {limit, NULL, 0, NULL, 0, NULL};
    mr_run_list *l = NULL;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_runstore_runs(rs, &q, &l, NULL));
    assert_ok(mr_run_list_json(l, &b, NULL));
    mr_run_list_free(l);
    return view(&b);
}

static json_t *runs_view(mr_runstore *rs) { return runs_view_n(rs, 0); }

static json_t *show_view(mr_runstore *rs, int64_t id)
{
    mr_run_detail *d = NULL;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_runstore_run_detail(rs, id, &d, NULL));
    assert_ok(mr_run_detail_json(d, &b, NULL));
    mr_run_detail_free(d);
    return view(&b);
}

static json_t *compare_view(mr_runstore *rs, const int64_t *ids, size_t n)
{
    mr_run_compare *c = NULL;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_runstore_compare(rs, ids, n, &c, NULL));
    assert_ok(mr_run_compare_json(c, &b, NULL));
    mr_run_compare_free(c);
    return view(&b);
}

static void raw_exec(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_close(h);
}

static int64_t count_rows(const char *db, const char *sql);

static const char *jget_str(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_string(v)) fail_msg("field %s is not a string", k);
    return json_string_value(v);
}

/* ---- open ----------------------------------------------------------------*/

static void test_open_twice(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t id = begin_run(rs, "{}");
    mr_runstore_close(rs);

    rs = open_ok(f->db); /* schema present: fast path */
    json_t *v = runs_view(rs);
    assert_int_equal(json_array_size(json_object_get(v, "runs")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(v, "runs"), 0), "id")), id);
    json_decref(v);
    mr_runstore_close(rs);
    mr_runstore_close(NULL);

    /* A newer schema is refused with a clear error. */
    raw_exec(f->db, "UPDATE meta SET value = 4 WHERE key = 'schema_version'");
    mr_error err;
    mr_error_init(&err);
    rs = (mr_runstore *)1;
    assert_status(mr_runstore_open(f->db, &rs, &err), MR_E_SCHEMA);
    assert_null(rs);
    assert_non_null(strstr(err.msg, "newer"));
    assert_non_null(strstr(err.msg, f->db));
}

static void test_open_bad_path(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_runstore *rs = NULL;
    assert_status(mr_runstore_open("/nonexistent-dir/x/runs.db", &rs, &err), MR_E_IO);
    assert_null(rs);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x/runs.db"));
}

/* ---- runs ----------------------------------------------------------------*/

static void test_run_begin_end(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t a = begin_run(rs, "{\"seed\":1}");
    int64_t b = begin_run(rs, "{\"seed\":2}");
    assert_true(b > a);

    json_t *v = runs_view(rs);
    json_t *runs = json_object_get(v, "runs");
    assert_int_equal(json_array_size(runs), 2);
    json_t *r = json_array_get(runs, 0); /* newest first */
    assert_int_equal(json_integer_value(json_object_get(r, "id")), b);
    assert_string_equal(jget_str(r, "status"), "running");
    assert_true(json_is_null(json_object_get(r, "ended")));
    assert_true(json_is_null(json_object_get(r, "duration_s")));
    assert_int_equal(strlen(jget_str(r, "started")), 20); /* 2026-11-30T11:19:15Z */
    json_decref(v);

    assert_ok(mr_runstore_run_end(rs, b, "ok", 1, 3, 0, 2, NULL));
    v = runs_view(rs);
    r = json_array_get(json_object_get(v, "runs"), 0);
    assert_string_equal(jget_str(r, "status"), "ok");
    assert_string_equal(jget_str(r, "argv"), "millrace run -j2");
    assert_string_equal(jget_str(r, "git_commit"), "abc123");
    assert_string_equal(jget_str(r, "overrides"), "train.rounds=300");
    assert_true(json_is_true(json_object_get(r, "git_dirty")));
    assert_true(json_is_false(json_object_get(r, "smoke")));
    assert_int_equal(json_integer_value(json_object_get(r, "n_executed")), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "n_cached")), 3);
    assert_int_equal(json_integer_value(json_object_get(r, "n_failed")), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "n_skipped")), 2);
    assert_true(json_is_string(json_object_get(r, "ended")));
    assert_true(json_number_value(json_object_get(r, "duration_s")) >= 0.0);
    assert_null(json_object_get(r, "cwd")); /* only in show */
    json_decref(v);

    v = runs_view_n(rs, 1);
    assert_int_equal(json_array_size(json_object_get(v, "runs")), 1);
    json_decref(v);

    mr_error err;
    mr_error_init(&err);
    assert_status(mr_runstore_run_end(rs, 999, "ok", 0, 0, 0, 0, &err), MR_E_NOT_FOUND);
    mr_runstore_close(rs);
}

static void test_stages_show(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t id = begin_run(rs, "{\"train\":{\"rounds\":100}}");
    mr_stage_record r1 = {"prepare", "csv.clean", "0123456789abcdef0123456789abcdef", "executed", 1.7e9, 1.5, 1.25,
                          0.25, 2048, 100, 200, NULL, "{\"out\":\"0123456789abcdef0123456789abcdef\"}"};
    mr_stage_record r2 = {"train", "gbdt.train", "", "failed", 1.7e9 + 2, 3.0, 2.0, 0.5, 4096, 10, 0,
                          "exit status 1", NULL};
    assert_ok(mr_runstore_stage_record(rs, id, &r1, NULL));
    assert_ok(mr_runstore_stage_record(rs, id, &r2, NULL));
    mr_metric m[] = {{"loss", 1, 0.5}, {"loss", 0, 0.9}, {"auc", 0, 0.7}};
    assert_ok(mr_runstore_metrics_add(rs, id, "train", m, 3, NULL));
    assert_ok(mr_runstore_metrics_add(rs, id, "train", m, 0, NULL));
    assert_ok(mr_runstore_lineage_add(rs, id, "prepare", "out", "out", "0123456789abcdef0123456789abcdef", NULL));
    assert_ok(mr_runstore_run_end(rs, id, "failed", 1, 0, 1, 0, NULL));

    json_t *v = show_view(rs, id);
    json_t *run = json_object_get(v, "run");
    assert_string_equal(jget_str(run, "cwd"), "/work/x");
    assert_string_equal(jget_str(run, "status"), "failed");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(run, "params"), "train"),
                                                        "rounds")),
                     100);
    json_t *stages = json_object_get(v, "stages");
    assert_int_equal(json_array_size(stages), 2);
    json_t *s0 = json_array_get(stages, 0), *s1 = json_array_get(stages, 1);
    assert_string_equal(jget_str(s0, "stage"), "prepare");
    assert_string_equal(jget_str(s0, "op"), "csv.clean");
    assert_string_equal(jget_str(s0, "status"), "executed");
    assert_true(json_is_null(json_object_get(s0, "error")));
    assert_string_equal(jget_str(json_object_get(s0, "outputs"), "out"), "0123456789abcdef0123456789abcdef");
    assert_true(fabs(json_number_value(json_object_get(s0, "wall_s")) - 1.5) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(s0, "max_rss_kb")), 2048);
    assert_int_equal(json_integer_value(json_object_get(s0, "bytes_written")), 200);
    assert_string_equal(jget_str(s1, "stage"), "train");
    assert_string_equal(jget_str(s1, "error"), "exit status 1");
    assert_true(json_is_null(json_object_get(s1, "outputs")));

    json_t *ms = json_object_get(v, "metrics");
    assert_int_equal(json_array_size(ms), 3);
    assert_string_equal(jget_str(json_array_get(ms, 0), "name"), "auc");
    assert_string_equal(jget_str(json_array_get(ms, 1), "name"), "loss");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ms, 1), "step")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ms, 2), "step")), 1);
    json_decref(v);

    mr_error err;
    mr_error_init(&err);
    mr_run_detail *d = (mr_run_detail *)&err; /* set to NULL on failure */
    assert_status(mr_runstore_run_detail(rs, 12345, &d, &err), MR_E_NOT_FOUND);
    assert_null(d);
    mr_runstore_close(rs);
}

/* ---- compare -------------------------------------------------------------*/

static json_t *find_by(json_t *arr, const char *k1, const char *v1, const char *k2, const char *v2)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        if (!strcmp(jget_str(o, k1), v1) && (!k2 || !strcmp(jget_str(o, k2), v2))) return o;
    }
    fail_msg("no entry %s=%s", k1, v1);
    return NULL;
}

static void test_compare(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t a = begin_run(rs, "{\"seed\":1,\"train\":{\"lr\":0.1,\"rounds\":100}}");
    int64_t b = begin_run(rs, "{\"train\":{\"lr\":0.1,\"rounds\":300},\"extra\":true}");
    mr_metric ma[] = {{"auc", 0, 0.60}, {"auc", 2, 0.80}, {"auc", 1, 0.70}};
    mr_metric mb[] = {{"auc", 0, 0.65}, {"auc", 4, 0.90}, {"auc", 3, 0.85}, {"rmse", 0, 1.5}};
    assert_ok(mr_runstore_metrics_add(rs, a, "train", ma, 3, NULL));
    assert_ok(mr_runstore_metrics_add(rs, b, "train", mb, 4, NULL));
    mr_stage_record sa = {"prep", "op", "aaaa", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    mr_stage_record sb = {"prep", "op", "aaaa", "cached", 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    mr_stage_record ta = {"train", "op", "1111", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    mr_stage_record tb = {"train", "op", "2222", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    mr_stage_record eb = {"eval", "op", "3333", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    assert_ok(mr_runstore_stage_record(rs, a, &sa, NULL));
    assert_ok(mr_runstore_stage_record(rs, a, &ta, NULL));
    assert_ok(mr_runstore_stage_record(rs, b, &sb, NULL));
    assert_ok(mr_runstore_stage_record(rs, b, &tb, NULL));
    assert_ok(mr_runstore_stage_record(rs, b, &eb, NULL));

    int64_t ab[2] = {a, b};
    json_t *v = compare_view(rs, ab, 2);
    assert_int_equal(json_integer_value(json_object_get(v, "a")), a);
    assert_int_equal(json_integer_value(json_object_get(v, "b")), b);

    /* params: union of leaf paths, sorted */
    json_t *p = json_object_get(v, "params");
    assert_int_equal(json_array_size(p), 4);
    const char *order[] = {"extra", "seed", "train.lr", "train.rounds"};
    for (size_t i = 0; i < 4; i++) assert_string_equal(jget_str(json_array_get(p, i), "path"), order[i]);
    json_t *rounds = json_array_get(p, 3);
    assert_int_equal(json_integer_value(json_object_get(rounds, "a")), 100);
    assert_int_equal(json_integer_value(json_object_get(rounds, "b")), 300);
    assert_true(json_is_true(json_object_get(rounds, "changed")));
    assert_true(json_is_false(json_object_get(json_array_get(p, 2), "changed")));
    json_t *seed = json_array_get(p, 1);
    assert_true(json_is_null(json_object_get(seed, "b")));
    assert_true(json_is_true(json_object_get(seed, "changed")));
    assert_true(json_is_null(json_object_get(json_array_get(p, 0), "a")));

    /* metrics: final = value at the highest step */
    json_t *m = json_object_get(v, "metrics");
    assert_int_equal(json_array_size(m), 2);
    json_t *auc = find_by(m, "stage", "train", "name", "auc");
    assert_true(fabs(json_number_value(json_object_get(auc, "a")) - 0.80) < 1e-12);
    assert_true(fabs(json_number_value(json_object_get(auc, "b")) - 0.90) < 1e-12);
    assert_true(fabs(json_number_value(json_object_get(auc, "delta")) - 0.10) < 1e-12);
    json_t *rmse = find_by(m, "stage", "train", "name", "rmse");
    assert_true(json_is_null(json_object_get(rmse, "a")));
    assert_true(json_is_null(json_object_get(rmse, "delta")));
    assert_true(fabs(json_number_value(json_object_get(rmse, "b")) - 1.5) < 1e-12);

    /* stages */
    json_t *st = json_object_get(v, "stages");
    assert_int_equal(json_array_size(st), 3);
    json_t *prep = find_by(st, "stage", "prep", NULL, NULL);
    assert_true(json_is_false(json_object_get(prep, "changed")));
    assert_string_equal(jget_str(prep, "a_status"), "executed");
    assert_string_equal(jget_str(prep, "b_status"), "cached");
    json_t *train = find_by(st, "stage", "train", NULL, NULL);
    assert_true(json_is_true(json_object_get(train, "changed")));
    assert_string_equal(jget_str(train, "a_key"), "1111");
    assert_string_equal(jget_str(train, "b_key"), "2222");
    json_t *eval = find_by(st, "stage", "eval", NULL, NULL);
    assert_true(json_is_null(json_object_get(eval, "a_key")));
    assert_true(json_is_true(json_object_get(eval, "changed")));
    json_decref(v);

    int64_t bad[2] = {a, 777};
    mr_run_compare *cmp = NULL;
    assert_status(mr_runstore_compare(rs, bad, 2, &cmp, NULL), MR_E_NOT_FOUND);
    assert_null(cmp);
    mr_runstore_close(rs);
}

/* ---- migration, names and tags --------------------------------------------*/

/* The schema of version 1 (before names and tags), as older millrace wrote it. */
static const char V1_SQL[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, ended REAL,"
    " status TEXT NOT NULL, argv TEXT, cwd TEXT, git_commit TEXT, git_dirty INTEGER NOT NULL DEFAULT 0,"
    " params_json TEXT, overrides TEXT, smoke INTEGER NOT NULL DEFAULT 0, pid INTEGER, pid_start INTEGER,"
    " n_executed INTEGER NOT NULL DEFAULT 0, n_cached INTEGER NOT NULL DEFAULT 0,"
    " n_failed INTEGER NOT NULL DEFAULT 0, n_skipped INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE stage_runs(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, stage TEXT NOT NULL, op TEXT, key TEXT,"
    " status TEXT NOT NULL, started REAL, wall_s REAL, user_s REAL, sys_s REAL, max_rss_kb INTEGER,"
    " bytes_read INTEGER, bytes_written INTEGER, error TEXT, outputs_json TEXT);"
    "CREATE TABLE metrics(run_id INTEGER NOT NULL, stage TEXT NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL, value REAL);"
    "CREATE TABLE lineage(run_id INTEGER NOT NULL, stage TEXT NOT NULL, role TEXT NOT NULL, name TEXT, artifact TEXT NOT NULL);"
    "CREATE TABLE stage_cache(key TEXT PRIMARY KEY, stage TEXT NOT NULL, op TEXT, key_doc TEXT, outputs_json TEXT,"
    " metrics_json TEXT, created REAL NOT NULL, run_id INTEGER);"
    "CREATE TABLE stat_cache(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ino INTEGER NOT NULL,"
    " hash TEXT NOT NULL);"
    "INSERT INTO meta VALUES('schema_version', 1);"
    "INSERT INTO runs(started, ended, status, argv, params_json) VALUES(1.7e9, 1.7e9 + 4, 'ok', 'millrace run',"
    " '{\"train\":{\"lr\":0.1}}');";

static void test_migrate_v1(void **state)
{
    fixture *f = *state;
    raw_exec(f->db, V1_SQL);
    mr_runstore *rs = open_ok(f->db);
    assert_int_equal(count_rows(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"), 3);
    /* ... through version 2 to 3: the registry's tables exist, empty */
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM model_versions"), 0);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM model_aliases"), 0);
    mr_run_detail *d = NULL;
    assert_ok(mr_runstore_run_detail(rs, 1, &d, NULL));
    assert_string_equal(d->run.status, "ok");
    assert_null(d->run.name);
    assert_int_equal(d->run.n_tags, 0);
    assert_true(fabs(d->run.ended - d->run.started - 4) < 1e-9);
    mr_run_detail_free(d);
    /* The migrated store takes names and tags. */
    const char *tags[] = {"exp=lr-sweep"};
    mr_run_begin info = {"millrace run", "/w", "", 0, "{}", "", 0, "second", tags, 1};
    int64_t id = 0;
    assert_ok(mr_runstore_run_begin(rs, &info, &id, NULL));
    assert_int_equal(id, 2);
    mr_runstore_close(rs);
    rs = open_ok(f->db); /* and reopens at version 2 without migrating again */
    assert_ok(mr_runstore_resolve_run(rs, "second", &id, NULL));
    assert_int_equal(id, 2);
    mr_runstore_close(rs);
}

static int64_t begin_named(mr_runstore *rs, const char *params, const char *name, const char *const *tags, size_t n_tags)
{
    mr_run_begin info = {"millrace run", "/w", "", 0, params, "", 0, name, tags, n_tags};
    int64_t id = 0;
    assert_ok(mr_runstore_run_begin(rs, &info, &id, NULL));
    return id;
}

static size_t list_ids(mr_runstore *rs, const mr_runs_query *q, int64_t *ids, size_t cap)
{
    mr_run_list *l = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_runstore_runs(rs, q, &l, &err) != MR_OK) fail_msg("runs: %s", err.msg);
    size_t n = l->n;
    for (size_t i = 0; i < n && i < cap; i++) ids[i] = l->runs[i].id;
    mr_run_list_free(l);
    return n;
}

static void test_names_tags(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    const char *t1[] = {"exp=lr", "gpu"}, *t2[] = {"exp=depth", "exp=lr"}, *t3[] = {"gpu"};
    int64_t a = begin_named(rs, "{}", "baseline", t1, 2);
    int64_t b = begin_named(rs, "{}", NULL, t2, 2); /* a key given twice keeps the last value */
    int64_t c = begin_named(rs, "{}", "baseline", t3, 1);

    mr_run_detail *d = NULL;
    assert_ok(mr_runstore_run_detail(rs, a, &d, NULL));
    assert_string_equal(d->run.name, "baseline");
    assert_int_equal(d->run.n_tags, 2);
    assert_string_equal(d->run.tags[0].key, "exp");
    assert_string_equal(d->run.tags[0].value, "lr");
    assert_string_equal(d->run.tags[1].key, "gpu");
    assert_null(d->run.tags[1].value);
    mr_run_detail_free(d);
    assert_ok(mr_runstore_run_detail(rs, b, &d, NULL));
    assert_null(d->run.name);
    assert_int_equal(d->run.n_tags, 1);
    assert_string_equal(d->run.tags[0].value, "lr");
    mr_run_detail_free(d);

    /* Filters: KEY matches any value, KEY=VALUE exactly, several must all match. */
    int64_t ids[8];
    const char *f_gpu[] = {"gpu"}, *f_lr[] = {"exp=lr"}, *f_both[] = {"exp=lr", "gpu"}, *f_none[] = {"exp=none"};
    mr_runs_query q = {0, f_gpu, 1, NULL, 0, NULL};
    assert_int_equal(list_ids(rs, &q, ids, 8), 2);
    assert_int_equal(ids[0], c);
    assert_int_equal(ids[1], a);
    q.tags = f_lr;
    assert_int_equal(list_ids(rs, &q, ids, 8), 2);
    assert_int_equal(ids[0], b);
    assert_int_equal(ids[1], a);
    q.tags = f_both;
    q.n_tags = 2;
    assert_int_equal(list_ids(rs, &q, ids, 8), 1);
    assert_int_equal(ids[0], a);
    q.tags = f_none;
    q.n_tags = 1;
    assert_int_equal(list_ids(rs, &q, ids, 8), 0);

    /* --json carries name and tags. */
    json_t *v = runs_view(rs);
    json_t *r0 = json_array_get(json_object_get(v, "runs"), 0), *r2 = json_array_get(json_object_get(v, "runs"), 2);
    assert_string_equal(jget_str(r0, "name"), "baseline");
    assert_true(json_is_null(json_object_get(json_object_get(r0, "tags"), "gpu")));
    assert_string_equal(jget_str(json_object_get(r2, "tags"), "exp"), "lr");
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(v, "runs"), 1), "name")));
    json_decref(v);

    /* A name resolves to its newest run. */
    int64_t id = 0;
    assert_ok(mr_runstore_resolve_run(rs, "baseline", &id, NULL));
    assert_int_equal(id, c);

    /* Malformed tags are refused, naming the problem, and record nothing. */
    const char *bad[] = {"=x", "a b", "k=line\nbreak", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        mr_error err;
        mr_error_init(&err);
        mr_run_begin info = {"r", "/", "", 0, "{}", "", 0, NULL, &bad[i], 1};
        assert_status(mr_runstore_run_begin(rs, &info, &id, &err), MR_E_INVALID_ARG);
        assert_non_null(strstr(err.msg, "tag"));
    }
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM runs"), 3);
    mr_runstore_close(rs);
}

/* ---- list columns and sorting ---------------------------------------------*/

static void test_columns_sort(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t r1 = begin_run(rs, "{\"train\":{\"lr\":0.1,\"depth\":4}}");
    int64_t r2 = begin_run(rs, "{\"train\":{\"lr\":0.05,\"depth\":6}}");
    int64_t r3 = begin_run(rs, "{\"train\":{\"lr\":0.3}}");
    int64_t r4 = begin_run(rs, "{\"train\":{\"lr\":0.2,\"depth\":8}}");
    mr_metric m1[] = {{"test.auc", 0, 0.81}}, m2[] = {{"test.auc", 0, 0.86}}, m4[] = {{"test.auc", 0, 0.79}};
    assert_ok(mr_runstore_metrics_add(rs, r1, "eval", m1, 1, NULL));
    assert_ok(mr_runstore_metrics_add(rs, r2, "eval", m2, 1, NULL));
    assert_ok(mr_runstore_metrics_add(rs, r4, "eval", m4, 1, NULL));

    const char *cols[] = {"params.train.lr", "metrics.eval.test.auc", "params.train.depth"};
    mr_runs_query q = {0, NULL, 0, cols, 3, "-metrics.eval.test.auc"};
    mr_run_list *l = NULL;
    assert_ok(mr_runstore_runs(rs, &q, &l, NULL));
    assert_int_equal(l->n, 4);
    assert_int_equal(l->n_columns, 3);
    /* Best AUC first; the run without one last. */
    int64_t want[] = {r2, r1, r4, r3};
    for (size_t i = 0; i < 4; i++) assert_int_equal(l->runs[i].id, want[i]);
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_runstore_value_text(l->cells[0 * 3 + 0], &b));
    assert_string_equal(b.data, "0.05"); /* as written, not 0.050000000000000003 */
    assert_true(fabs(l->cells[0 * 3 + 1]->u.f - 0.86) < 1e-12);
    assert_null(l->cells[3 * 3 + 1]); /* r3 has no AUC */
    assert_null(l->cells[3 * 3 + 2]); /* nor a depth */
    mr_buf_free(&b);
    mr_buf_init(&b);
    assert_ok(mr_run_list_json(l, &b, NULL));
    json_t *v = view(&b);
    json_t *first = json_object_get(json_array_get(json_object_get(v, "runs"), 0), "columns");
    assert_true(fabs(json_number_value(json_object_get(first, "params.train.lr")) - 0.05) < 1e-15);
    assert_true(json_is_null(json_object_get(json_object_get(json_array_get(json_object_get(v, "runs"), 3), "columns"),
                                             "metrics.eval.test.auc")));
    json_decref(v);
    mr_run_list_free(l);

    /* Ascending with a limit: the N first in sort order, not the N newest. */
    int64_t ids[8];
    mr_runs_query asc = {2, NULL, 0, NULL, 0, "params.train.lr"};
    assert_int_equal(list_ids(rs, &asc, ids, 8), 2);
    assert_int_equal(ids[0], r2);
    assert_int_equal(ids[1], r1);
    mr_runs_query byid = {0, NULL, 0, NULL, 0, "+id"};
    assert_int_equal(list_ids(rs, &byid, ids, 8), 4);
    assert_int_equal(ids[0], r1);
    assert_int_equal(ids[3], r4);

    /* Unknown columns name the closest ones. */
    const char *typo[] = {"params.train.lrr"};
    mr_runs_query bad = {0, NULL, 0, typo, 1, NULL};
    mr_error err;
    mr_error_init(&err);
    l = (mr_run_list *)&err;
    assert_status(mr_runstore_runs(rs, &bad, &l, &err), MR_E_NOT_FOUND);
    assert_null(l);
    assert_non_null(strstr(err.msg, "params.train.lrr"));
    assert_non_null(strstr(err.hint, "'params.train.lr'"));
    mr_error_clear(&err);
    mr_runs_query bad_sort = {0, NULL, 0, NULL, 0, "-metrics.eval.auc"};
    assert_status(mr_runstore_runs(rs, &bad_sort, &l, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.hint, "'metrics.eval.test.auc'"));
    mr_error_clear(&err);
    const char *junk[] = {"stauts"};
    mr_runs_query bad_field = {0, NULL, 0, junk, 1, NULL};
    assert_status(mr_runstore_runs(rs, &bad_field, &l, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "unknown column 'stauts'"));
    assert_non_null(strstr(err.hint, "'status'"));
    mr_runstore_close(rs);
}

/* ---- N runs side by side --------------------------------------------------*/

static void test_compare_three(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t r[3] = {begin_run(rs, "{\"lr\":0.1,\"n\":100}"), begin_run(rs, "{\"lr\":0.1,\"n\":200}"),
                    begin_run(rs, "{\"lr\":0.1,\"n\":100}")};
    mr_metric m[] = {{"auc", 0, 0.8}};
    for (int k = 0; k < 3; k++) assert_ok(mr_runstore_metrics_add(rs, r[k], "eval", m, 1, NULL));
    mr_metric extra[] = {{"rmse", 0, 1.5}};
    assert_ok(mr_runstore_metrics_add(rs, r[2], "eval", extra, 1, NULL));
    mr_stage_record s = {"train", "train", "k1", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    assert_ok(mr_runstore_stage_record(rs, r[0], &s, NULL));
    assert_ok(mr_runstore_stage_record(rs, r[1], &s, NULL));
    s.key = "k2";
    assert_ok(mr_runstore_stage_record(rs, r[2], &s, NULL));

    mr_run_compare *c = NULL;
    assert_ok(mr_runstore_compare(rs, r, 3, &c, NULL));
    assert_int_equal(c->n_runs, 3);
    assert_int_equal(c->n_params, 2);
    assert_string_equal(c->params[0].path, "lr");
    assert_false(c->params[0].changed);
    assert_string_equal(c->params[1].path, "n");
    assert_true(c->params[1].changed);
    assert_int_equal(c->params[1].values[1]->u.i, 200);
    assert_int_equal(c->n_metrics, 2);
    assert_false(c->metrics[0].changed); /* auc equal in all three */
    assert_true(c->metrics[1].changed);  /* rmse only in the third */
    assert_false(c->metrics[1].present[0]);
    assert_true(c->metrics[1].present[2]);
    assert_int_equal(c->n_stages, 1);
    assert_true(c->stages[0].changed);
    assert_string_equal(c->stages[0].keys[2], "k2");
    mr_run_compare_free(c);

    json_t *v = compare_view(rs, r, 3);
    assert_int_equal(json_array_size(json_object_get(v, "runs")), 3);
    assert_null(json_object_get(v, "a")); /* a/b belong to the two-run shape */
    json_t *n = json_array_get(json_object_get(v, "params"), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(n, "values"), 1)), 200);
    assert_null(json_object_get(n, "a"));
    json_decref(v);
    /* Two runs keep the a/b fields beside values. */
    v = compare_view(rs, r, 2);
    assert_int_equal(json_integer_value(json_object_get(v, "a")), r[0]);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(v, "params"), 1), "b")), 200);
    json_decref(v);
    mr_runstore_close(rs);
}

/* ---- trials, produced outputs, value text ---------------------------------*/

static void test_trials_outputs_text(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    mr_trial_list *t = NULL;
    assert_ok(mr_runstore_trials(rs, "tune", &t, NULL)); /* no table yet */
    assert_int_equal(t->run_id, 0);
    assert_int_equal(t->n, 0);
    mr_trial_list_free(t);
    int64_t a = begin_run(rs, "{}"), b = begin_run(rs, "{}");
    assert_ok(mr_runstore_trial_add(rs, a, "tune", 0, "k0", "complete", 0.5, "{\"trial\":0}", NULL));
    assert_ok(mr_runstore_trial_add(rs, b, "tune", 1, "k1", "pruned", NAN, "{\"trial\":1,\"params\":{\"lr\":0.1}}", NULL));
    assert_ok(mr_runstore_trial_add(rs, b, "tune", 0, "k0", "failed", NAN, "{\"trial\":0}", NULL));
    assert_ok(mr_runstore_trial_add(rs, b, "tune", 0, "k0", "complete", 0.75, "{\"trial\":0,\"x\":1}", NULL));
    assert_ok(mr_runstore_trials(rs, "tune", &t, NULL));
    assert_int_equal(t->run_id, b); /* the newest run's trials */
    assert_int_equal(t->n, 2);
    assert_int_equal(t->trials[0].trial, 0);
    assert_string_equal(t->trials[0].status, "complete"); /* the last record of trial 0 */
    assert_true(fabs(t->trials[0].value - 0.75) < 1e-12);
    assert_non_null(mr_value_get(t->trials[0].record, "x"));
    assert_true(isnan(t->trials[1].value));
    mr_buf b1;
    mr_buf_init(&b1);
    assert_ok(mr_runstore_value_text(mr_value_get_path(t->trials[1].record, "params.lr"), &b1));
    assert_string_equal(b1.data, "0.1");
    mr_trial_list_free(t);

    /* The run that produced given outputs. */
    mr_stage_record s = {"model", "train", "kA", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, "{\"out\":\"aaa\"}"};
    assert_ok(mr_runstore_stage_record(rs, a, &s, NULL));
    s.key = "kB";
    s.outputs_json = "{\"out\":\"bbb\"}";
    assert_ok(mr_runstore_stage_record(rs, b, &s, NULL));
    const char *names[] = {"out"}, *ida[] = {"aaa"}, *idz[] = {"zzz"};
    int64_t run = 0;
    char *key = NULL;
    assert_ok(mr_runstore_find_outputs(rs, "model", names, ida, 1, &run, &key, NULL));
    assert_int_equal(run, a);
    assert_string_equal(key, "kA");
    mr_free(key);
    assert_status(mr_runstore_find_outputs(rs, "model", names, idz, 1, &run, &key, NULL), MR_E_NOT_FOUND);
    assert_null(key);

    /* Display text: scalars as written, containers as canonical JSON, NULL as "-". */
    mr_buf_free(&b1);
    mr_buf_init(&b1);
    mr_value *tree = NULL;
    const char *doc = "{a: 1e-5, b: [1, 2.50], c: {d: x}}";
    assert_ok(mr_yaml_parse(doc, strlen(doc), "t", &tree, NULL));
    assert_ok(mr_runstore_value_text(mr_value_get(tree, "a"), &b1));
    assert_string_equal(b1.data, "1e-5");
    b1.len = 0;
    assert_ok(mr_runstore_value_text(mr_value_get(tree, "b"), &b1));
    assert_string_equal(b1.data, "[1,2.5]");
    b1.len = 0;
    assert_ok(mr_runstore_value_text(NULL, &b1));
    assert_string_equal(b1.data, "-");
    mr_value_free(tree);
    mr_buf_free(&b1);
    mr_runstore_close(rs);
}

/* ---- stage cache ---------------------------------------------------------*/

static void test_cache(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    mr_error err;
    mr_error_init(&err);
    char *outs = (char *)1, *mets = (char *)1, *doc = (char *)1;
    assert_status(mr_runstore_cache_get(rs, "k1", &outs, &mets, &doc, &err), MR_E_NOT_FOUND);
    assert_null(outs);
    assert_null(mets);
    assert_null(doc);
    assert_non_null(strstr(err.msg, "no cache entry"));
    mr_error_clear(&err);

    assert_ok(mr_runstore_cache_put(rs, "k1", "train", "gbdt.train", "doc1", "{\"m\":\"x\"}", "{}", 1, NULL));
    assert_ok(mr_runstore_cache_get(rs, "k1", &outs, &mets, &doc, NULL));
    assert_string_equal(outs, "{\"m\":\"x\"}");
    assert_string_equal(mets, "{}");
    assert_string_equal(doc, "doc1");
    mr_free(outs);
    mr_free(mets);
    mr_free(doc);
    /* NULL out params are skipped; a NULL column stays NULL. */
    assert_ok(mr_runstore_cache_put(rs, "k1", "train", "gbdt.train", "doc1b", "{}", NULL, 0, NULL));
    assert_ok(mr_runstore_cache_get(rs, "k1", NULL, &mets, NULL, NULL));
    assert_null(mets);

    char *key = NULL;
    assert_ok(mr_runstore_cache_last_for_stage(rs, "train", &key, &doc, &err));
    assert_string_equal(key, "k1");
    assert_string_equal(doc, "doc1b");
    mr_free(key);
    mr_free(doc);
    assert_ok(mr_runstore_cache_put(rs, "k2", "train", "gbdt.train", "doc2", "{}", "{}", 1, NULL));
    assert_ok(mr_runstore_cache_last_for_stage(rs, "train", &key, NULL, NULL));
    assert_string_equal(key, "k2");
    mr_free(key);
    assert_status(mr_runstore_cache_last_for_stage(rs, "nope", &key, &doc, &err), MR_E_NOT_FOUND);
    assert_null(key);
    mr_runstore_close(rs);
}

/* ---- stat cache ----------------------------------------------------------*/

typedef struct count_ctx {
    int n, n_dirty;
} count_ctx;

static void count_entry(void *ctx, const mr_statcache_entry *e)
{
    count_ctx *c = ctx;
    c->n++;
    c->n_dirty += e->dirty;
}

static void test_statcache_roundtrip(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    mr_statcache *sc = NULL;
    assert_ok(mr_statcache_new(&sc, NULL));
    mr_hash128 h1 = {0x0123456789abcdefull, 0xfedcba9876543210ull}, h2 = {1, 2}, got;
    assert_ok(mr_statcache_put(sc, "data/a.csv", 10, 1700000000123456789ull, 42, h1, 1));
    assert_ok(mr_statcache_put(sc, "data/b.csv", 20, UINT64_MAX, 43, h2, 1));
    assert_ok(mr_statcache_put(sc, "data/clean.csv", 30, 5, 44, h2, 0)); /* not dirty: not saved */
    assert_ok(mr_runstore_statcache_save(rs, sc, NULL));
    mr_statcache_free(sc);
    mr_runstore_close(rs);

    rs = open_ok(f->db);
    assert_ok(mr_statcache_new(&sc, NULL));
    assert_ok(mr_runstore_statcache_load(rs, sc, NULL));
    assert_int_equal(mr_statcache_count(sc), 2);
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 10, 1700000000123456789ull, 42, &got), 1);
    assert_true(mr_hash_eq(got, h1));
    assert_int_equal(mr_statcache_lookup(sc, "data/b.csv", 20, UINT64_MAX, 43, &got), 1);
    assert_true(mr_hash_eq(got, h2));
    assert_int_equal(mr_statcache_lookup(sc, "data/clean.csv", 30, 5, 44, &got), 0);
    count_ctx c = {0, 0};
    mr_statcache_foreach(sc, 0, count_entry, &c);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.n_dirty, 0);
    /* Saving an undirtied cache writes nothing new; an update replaces. */
    assert_ok(mr_runstore_statcache_save(rs, sc, NULL));
    assert_ok(mr_statcache_put(sc, "data/a.csv", 11, 1, 42, h2, 1));
    assert_ok(mr_runstore_statcache_save(rs, sc, NULL));
    mr_statcache_free(sc);
    assert_ok(mr_statcache_new(&sc, NULL));
    assert_ok(mr_runstore_statcache_load(rs, sc, NULL));
    assert_int_equal(mr_statcache_count(sc), 2);
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 11, 1, 42, &got), 1);
    assert_true(mr_hash_eq(got, h2));
    mr_statcache_free(sc);
    mr_runstore_close(rs);
}

/* ---- reap ----------------------------------------------------------------*/

static pid_t dead_pid(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return pid;
}

static void test_reap(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t live = begin_run(rs, "{}");
    int64_t dead = begin_run(rs, "{}");
    int64_t reused = begin_run(rs, "{}");
    int64_t done = begin_run(rs, "{}");
    assert_ok(mr_runstore_run_end(rs, done, "ok", 0, 0, 0, 0, NULL));

    char sql[256];
    snprintf(sql, sizeof(sql), "UPDATE runs SET pid = %ld WHERE id = %lld", (long)dead_pid(), (long long)dead);
    raw_exec(f->db, sql);
    /* same pid as ours, other start time: the pid was reused */
    snprintf(sql, sizeof(sql), "UPDATE runs SET pid_start = pid_start + 1 WHERE id = %lld", (long long)reused);
    raw_exec(f->db, sql);

    int n = -1;
    assert_ok(mr_runstore_reap(rs, &n, NULL));
    assert_int_equal(n, 2);
    assert_ok(mr_runstore_reap(rs, &n, NULL));
    assert_int_equal(n, 0);

    json_t *v = runs_view(rs);
    json_t *runs = json_object_get(v, "runs");
    assert_int_equal(json_array_size(runs), 4);
    const char *want[] = {"ok", "killed", "killed", "running"}; /* newest first */
    for (size_t i = 0; i < 4; i++) assert_string_equal(jget_str(json_array_get(runs, i), "status"), want[i]);
    assert_true(json_is_string(json_object_get(json_array_get(runs, 1), "ended")));
    assert_true(json_is_null(json_object_get(json_array_get(runs, 3), "ended")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 3), "id")), live);
    json_decref(v);

    /* show reaps too */
    mr_runstore_close(rs);
    rs = open_ok(f->db);
    int64_t later = begin_run(rs, "{}");
    snprintf(sql, sizeof(sql), "UPDATE runs SET pid = %ld WHERE id = %lld", (long)dead_pid(), (long long)later);
    raw_exec(f->db, sql);
    v = show_view(rs, later);
    assert_string_equal(jget_str(json_object_get(v, "run"), "status"), "killed");
    json_decref(v);
    mr_runstore_close(rs);
}

/* ---- resolve -------------------------------------------------------------*/

static void test_resolve(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    mr_error err;
    mr_error_init(&err);
    int64_t id = 0;
    assert_status(mr_runstore_resolve_run(rs, "latest", &id, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.hint, "no runs"));
    mr_error_clear(&err);

    int64_t r1 = begin_run(rs, "{}"), r2 = begin_run(rs, "{}"), r3 = begin_run(rs, "{}");
    assert_ok(mr_runstore_resolve_run(rs, "latest", &id, NULL));
    assert_int_equal(id, r3);
    assert_ok(mr_runstore_resolve_run(rs, "last", &id, NULL));
    assert_int_equal(id, r3);
    assert_ok(mr_runstore_resolve_run(rs, "-1", &id, NULL));
    assert_int_equal(id, r3);
    assert_ok(mr_runstore_resolve_run(rs, "-3", &id, NULL));
    assert_int_equal(id, r1);
    char ref[32];
    snprintf(ref, sizeof(ref), "%lld", (long long)r2);
    assert_ok(mr_runstore_resolve_run(rs, ref, &id, NULL));
    assert_int_equal(id, r2);

    const char *bad[] = {"-4", "-0", "0", "99", "abc", "", "1x", "-", "+1", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        id = -7;
        assert_status(mr_runstore_resolve_run(rs, bad[i], &id, &err), MR_E_NOT_FOUND);
        assert_int_equal(id, -7);
        char want[64];
        snprintf(want, sizeof(want), "no run '%s'", bad[i]);
        assert_string_equal(err.msg, want);
        snprintf(want, sizeof(want), "newest run is %lld", (long long)r3);
        assert_non_null(strstr(err.hint, want));
        mr_error_clear(&err);
    }
    mr_runstore_close(rs);
}

/* ---- concurrency ---------------------------------------------------------*/

#define N_WRITERS 2
#define N_RUNS_EACH 40

/* Child body: opens the (possibly new) store and records runs; exit code 0
 * on success. Only _exit: the child must not run cmocka's handlers. */
static void writer_child(const char *db)
{
    mr_runstore *rs = NULL;
    int rc = 1;
    if (mr_runstore_open(db, &rs, NULL) != MR_OK) goto done;
    for (int i = 0; i < N_RUNS_EACH; i++) {
        mr_run_begin info = {"w", "/", "", 0, "{}", "", 0, NULL, NULL, 0};
        int64_t id = 0;
        mr_metric m[3] = {{"loss", 0, 1.0}, {"loss", 1, 0.5}, {"loss", 2, 0.25}};
        mr_stage_record rec = {"s", "op", "k", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, "{}"};
        char key[32];
        snprintf(key, sizeof(key), "%ld-%d", (long)getpid(), i);
        if (mr_runstore_run_begin(rs, &info, &id, NULL) != MR_OK ||
            mr_runstore_stage_record(rs, id, &rec, NULL) != MR_OK ||
            mr_runstore_metrics_add(rs, id, "s", m, 3, NULL) != MR_OK ||
            mr_runstore_cache_put(rs, key, "s", "op", "", "{}", "{}", id, NULL) != MR_OK ||
            mr_runstore_run_end(rs, id, "ok", 1, 0, 0, 0, NULL) != MR_OK)
            goto done;
    }
    rc = 0;
done:
    mr_runstore_close(rs);
    _exit(rc);
}

static int64_t count_rows(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW) n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(h);
    return n;
}

static void test_concurrent_writers(void **state)
{
    fixture *f = *state;
    pid_t kids[N_WRITERS];
    for (int i = 0; i < N_WRITERS; i++) { /* both create the new store at once */
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) writer_child(f->db);
    }
    for (int i = 0; i < N_WRITERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    const int64_t total = N_WRITERS * N_RUNS_EACH;
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM runs WHERE status = 'ok'"), total);
    assert_int_equal(count_rows(f->db, "SELECT count(DISTINCT id) FROM runs"), total);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stage_runs"), total);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM metrics"), 3 * total);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stage_cache"), total);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM meta"), 1);
}

/* ---- artifacts -----------------------------------------------------------*/

static void test_kept_artifacts_and_prune(void **state)
{
    fixture *f = *state;
    mr_error err;
    mr_error_init(&err);
    char *root = mr_path_join(f->dir, "store");
    assert_alloc(root);
    char *file = mr_path_join(f->dir, "out.txt");
    assert_alloc(file);
    mr_store *store = NULL;
    assert_ok(mr_store_open(root, &store, &err));
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fputs("hello\n", fp);
    fclose(fp);
    mr_artifact art;
    assert_ok(mr_store_publish(store, NULL, file, &art, &err));
    char present[MR_ARTIFACT_ID_LEN];
    mr_artifact_id(&art, present);
    const char *missing = "00000000000000000000000000000001";
    const char *old = "00000000000000000000000000000002.dir";

    mr_runstore *rs = open_ok(f->db);
    int64_t r1 = begin_run(rs, "{}");
    int64_t r2 = begin_run(rs, "{}");
    char outs[128];
    snprintf(outs, sizeof(outs), "{\"model\":\"%s\",\"report\":\"%s\"}", present, missing);
    mr_stage_record rec1 = {"s", "op", "k", "executed", 0, 0, 0, 0, 0, 0, 0, NULL,
                            "{\"x\":\"00000000000000000000000000000002.dir\"}"};
    mr_stage_record rec2 = {"s", "op", "k", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, outs};
    assert_ok(mr_runstore_stage_record(rs, r1, &rec1, NULL));
    assert_ok(mr_runstore_stage_record(rs, r2, &rec2, NULL));
    assert_ok(mr_runstore_lineage_add(rs, r2, "s", "out", "model", present, NULL));
    assert_ok(mr_runstore_lineage_add(rs, r2, "s", "in", "data", "00000000000000000000000000000003", NULL));

    char **ids = NULL;
    size_t n = 0;
    assert_ok(mr_runstore_kept_artifacts(rs, 1, &ids, &n, NULL));
    assert_int_equal(n, 2); /* deduplicated; inputs and older runs excluded */
    const char *lo = strcmp(present, missing) < 0 ? present : missing;
    const char *hi = lo == present ? missing : present;
    assert_string_equal(ids[0], lo);
    assert_string_equal(ids[1], hi);
    for (size_t i = 0; i < n; i++) mr_free(ids[i]);
    mr_free(ids);
    assert_ok(mr_runstore_kept_artifacts(rs, -1, &ids, &n, NULL));
    assert_int_equal(n, 3);
    int seen_old = 0;
    for (size_t i = 0; i < n; i++) {
        seen_old |= !strcmp(ids[i], old);
        mr_free(ids[i]);
    }
    mr_free(ids);
    assert_true(seen_old);
    assert_ok(mr_runstore_kept_artifacts(rs, 0, &ids, &n, NULL));
    assert_int_equal(n, 0);
    mr_free(ids);
    /* out of memory at each allocation: all 3 ids or MR_E_NOMEM, never
     * fewer (gc would delete what a kept run references) */
    for (long k = 1, fired = 1; fired; k++) {
        uint64_t oom0 = mr_alloc_failures_here();
        mr_alloc_fail_after(k);
        mr_status rc = mr_runstore_kept_artifacts(rs, -1, &ids, &n, NULL);
        mr_alloc_fail_after(0);
        fired = mr_alloc_failures_here() != oom0;
        if (rc == MR_E_NOMEM && fired) continue;
        assert_ok(rc);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++) mr_free(ids[i]);
        mr_free(ids);
    }

    char ok_outs[64];
    snprintf(ok_outs, sizeof(ok_outs), "{\"model\":\"%s\"}", present);
    assert_ok(mr_runstore_cache_put(rs, "good", "s", "op", "", ok_outs, "{}", r2, NULL));
    assert_ok(mr_runstore_cache_put(rs, "empty", "s", "op", "", "{}", "{}", r2, NULL));
    assert_ok(mr_runstore_cache_put(rs, "gone", "s", "op", "", outs, "{}", r2, NULL));
    assert_ok(mr_runstore_cache_put(rs, "junk", "s", "op", "", "not json", "{}", r2, NULL));
    int pruned = -1;
    /* out of memory never prunes an entry whose outputs are present */
    for (long k = 1, fired = 1; fired; k++) {
        uint64_t oom0 = mr_alloc_failures_here();
        mr_alloc_fail_after(k);
        mr_status rc = mr_runstore_cache_prune(rs, store, NULL, 0, &pruned, NULL);
        mr_alloc_fail_after(0);
        fired = mr_alloc_failures_here() != oom0;
        assert_true(rc == MR_OK || (rc == MR_E_NOMEM && fired));
        assert_ok(mr_runstore_cache_get(rs, "good", NULL, NULL, NULL, NULL));
        if (rc == MR_OK) break;
    }
    assert_ok(mr_runstore_cache_put(rs, "gone", "s", "op", "", outs, "{}", r2, NULL));
    assert_ok(mr_runstore_cache_put(rs, "junk", "s", "op", "", "not json", "{}", r2, NULL));
    assert_ok(mr_runstore_cache_prune(rs, store, NULL, 0, &pruned, NULL));
    assert_int_equal(pruned, 2);
    assert_ok(mr_runstore_cache_get(rs, "good", NULL, NULL, NULL, NULL));
    assert_ok(mr_runstore_cache_get(rs, "empty", NULL, NULL, NULL, NULL));
    assert_status(mr_runstore_cache_get(rs, "gone", NULL, NULL, NULL, NULL), MR_E_NOT_FOUND);
    assert_ok(mr_runstore_cache_prune(rs, store, NULL, 0, &pruned, NULL));
    assert_int_equal(pruned, 0);
    /* an entry whose object is about to go (gc) is dropped before it goes */
    mr_artifact doomed;
    assert_ok(mr_artifact_parse(present, &doomed));
    assert_ok(mr_runstore_cache_prune(rs, store, &doomed, 1, &pruned, NULL));
    assert_int_equal(pruned, 1);
    assert_status(mr_runstore_cache_get(rs, "good", NULL, NULL, NULL, NULL), MR_E_NOT_FOUND);
    assert_ok(mr_runstore_cache_get(rs, "empty", NULL, NULL, NULL, NULL));

    mr_runstore_close(rs);
    mr_store_close(store);
    mr_free(root);
    mr_free(file);
}

/* ---- allocation failures -------------------------------------------------*/

static int ok_or_nomem(mr_status st) { return st == MR_OK || st == MR_E_NOMEM; }

/* Fails the k-th allocation for k = 1..: every call returns OK or NOMEM and
 * LeakSanitizer sees nothing (SQLite and jansson allocate on their own). */
static void test_alloc_failures(void **state)
{
    fixture *f = *state;
    mr_runstore *rs = open_ok(f->db);
    int64_t a = begin_run(rs, "{\"x\":{\"y\":1}}"), b = begin_run(rs, "{\"x\":{\"y\":2}}");
    mr_metric m[] = {{"loss", 0, 1.0}, {"loss", 1, 0.5}};
    mr_stage_record rec = {"s", "op", "k", "executed", 0, 0, 0, 0, 0, 0, 0, NULL, "{\"o\":\"abc\"}"};
    assert_ok(mr_runstore_metrics_add(rs, a, "s", m, 2, NULL));
    assert_ok(mr_runstore_metrics_add(rs, b, "s", m, 2, NULL));
    assert_ok(mr_runstore_stage_record(rs, a, &rec, NULL));
    assert_ok(mr_runstore_cache_put(rs, "k", "s", "op", "doc", "{}", "{}", a, NULL));
    mr_runstore_close(rs);
    int completed = 0;
    for (long k = 1; k < 4000 && !completed; k++) { /* until nothing fails */
        mr_error err;
        mr_error_init(&err);
        mr_buf buf;
        mr_buf_init(&buf);
        char *o = NULL, *d = NULL, **ids = NULL;
        size_t n = 0;
        int64_t id = 0;
        mr_alloc_fail_after(k);
        mr_status st = mr_runstore_open(f->db, &rs, &err);
        assert_true(ok_or_nomem(st));
        if (st == MR_OK) {
            int all = 1;
            st = mr_runstore_resolve_run(rs, "latest", &id, NULL);
            all &= st == MR_OK;
            assert_true(ok_or_nomem(st));
            st = mr_runstore_cache_get(rs, "k", &o, NULL, &d, NULL);
            all &= st == MR_OK;
            assert_true(ok_or_nomem(st));
            mr_run_detail *det = NULL;
            st = mr_runstore_run_detail(rs, a, &det, NULL);
            if (st == MR_OK) st = mr_run_detail_json(det, &buf, NULL);
            mr_run_detail_free(det);
            all &= st == MR_OK;
            assert_true(ok_or_nomem(st));
            int64_t ab[2] = {a, b};
            mr_run_compare *cmp = NULL;
            st = mr_runstore_compare(rs, ab, 2, &cmp, NULL);
            if (st == MR_OK) st = mr_run_compare_json(cmp, &buf, NULL);
            mr_run_compare_free(cmp);
            all &= st == MR_OK;
            assert_true(ok_or_nomem(st));
            mr_runs_query q = {0, NULL, 0, NULL, 0, "-params.x.y"};
            mr_run_list *l = NULL;
            st = mr_runstore_runs(rs, &q, &l, NULL);
            if (st == MR_OK) st = mr_run_list_json(l, &buf, NULL);
            mr_run_list_free(l);
            all &= st == MR_OK;
            assert_true(ok_or_nomem(st));
            st = mr_runstore_kept_artifacts(rs, -1, &ids, &n, NULL);
            all &= st == MR_OK;
            assert_true(ok_or_nomem(st));
            completed = all;
            mr_runstore_close(rs);
        }
        mr_alloc_fail_after(0);
        for (size_t i = 0; i < n; i++) mr_free(ids[i]);
        mr_free(ids);
        mr_free(o);
        mr_free(d);
        mr_buf_free(&buf);
    }
    assert_true(completed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_bad_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_begin_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stages_show, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_tags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_columns_sort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_three, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trials_outputs_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statcache_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_artifacts_and_prune, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return mr_test_run(tests, NULL, NULL);
}
