/* Unit tests for the model registry (src/pipeline/registry.c): name and
 * alias rules, registering (a copy into the store, the same bytes twice
 * being one version, files that are no bundle refused with nothing
 * recorded), references (NAME, NAME/V, NAME/latest, NAME@ALIAS, as URIs),
 * aliases set, moved and deleted, the list, gc keeping every registered
 * bundle, the diff, and concurrent registrations from several processes
 * getting distinct versions. Each test works in its own workspace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "millrace/bundle.h"
#include "millrace/csv.h"
#include "millrace/model.h"
#include "millrace/pipeline.h"
#include "millrace/registry.h"
#include "millrace/runstore.h"
#include "millrace/spec.h"

#define N_BUNDLES 6

typedef struct fixture {
    char dir[160];
    char bundle[N_BUNDLES][256]; /* distinct bundles (names b0..b5, metrics differ) */
    mr_workspace *ws;
} fixture;

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s/mr_registry_XXXXXX", mr_test_tmpdir());
    if (!mkdtemp(f->dir)) return -1;
    char path[320];
    snprintf(path, sizeof(path), "%s/millrace.yaml", f->dir);
    write_text(path, "stages: {}\n");
    snprintf(path, sizeof(path), "%s/train.csv", f->dir);
    FILE *csv = fopen(path, "w");
    fputs("x1,x2,y\n", csv);
    for (int i = 0; i < 200; i++) fprintf(csv, "%d,%d,%d\n", i % 17, (i * 7) % 13, (i % 17 + (i * 7) % 13) > 14);
    fclose(csv);
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    mr_model *m = NULL;
    if (mr_csv_read(path, NULL, &t, NULL, &err) != MR_OK) fail_msg("read: %s", err.msg);
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.kind = "linear";
    o.label = "y";
    if (mr_model_train(t, NULL, &o, &m, &err) != MR_OK) fail_msg("train: %s", err.msg);
    for (int k = 0; k < N_BUNDLES; k++) {
        char name[8], metrics[64];
        snprintf(name, sizeof(name), "b%d", k);
        snprintf(metrics, sizeof(metrics), "{\"valid\": {\"auc\": 0.%d}}", 70 + k);
        mr_bundle_build bb;
        mr_bundle_build_init(&bb);
        bb.model = m;
        bb.metrics_json = metrics;
        bb.name = name;
        snprintf(f->bundle[k], sizeof(f->bundle[k]), "%s/%s.mrb", f->dir, name);
        if (mr_bundle_save(&bb, f->bundle[k], &err) != MR_OK) fail_msg("save: %s", err.msg);
    }
    mr_model_free(m);
    mr_table_free(t);
    if (mr_workspace_open(f->dir, 0, 1, &f->ws, &err) != MR_OK) fail_msg("workspace: %s", err.msg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mr_workspace_close(f->ws);
    mr_fs_rmtree(f->dir, NULL);
    free(f);
    return 0;
}

static void test_names(void **state)
{
    (void)state;
    const char *good[] = {"churn", "a", "Churn-v2.1_x", "7up"};
    const char *bad[] = {"", "-x", ".x", "a b", "a/b", "a@b", "x\033]0;t\a", NULL};
    for (size_t k = 0; k < sizeof(good) / sizeof(good[0]); k++) assert_ok(mr_model_name_check(good[k], NULL));
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        mr_error err;
        mr_error_init(&err);
        assert_status(mr_model_name_check(bad[k], &err), MR_E_INVALID_ARG);
        assert_true(err.msg[0]);
    }
    char long_name[120];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_status(mr_model_name_check(long_name, NULL), MR_E_INVALID_ARG);
    assert_ok(mr_model_alias_check("production", NULL));
    assert_status(mr_model_alias_check("12", NULL), MR_E_INVALID_ARG);     /* reads as a version */
    assert_status(mr_model_alias_check("latest", NULL), MR_E_INVALID_ARG); /* reads as the newest */
    assert_true(mr_registry_is_uri("models:/churn@production"));
    assert_false(mr_registry_is_uri("model.mrb"));
    assert_false(mr_registry_is_uri(NULL));
}

static int64_t reg(fixture *f, const char *name, int k, int *created)
{
    int64_t v = 0;
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_registry_register(f->ws, name, f->bundle[k], 0, NULL, &v, created, &err);
    if (st != MR_OK) fail_msg("register %s: %s", f->bundle[k], err.msg);
    return v;
}

static int64_t get_version(fixture *f, const char *ref, mr_status want)
{
    mr_model_version *v = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_registry_get(f->ws, ref, &v, &err);
    if (st == MR_E_NOMEM) assert_status(st, MR_OK); /* torture: ends the iteration */
    assert_int_equal(st, want);
    int64_t out = st == MR_OK ? v->version : 0;
    if (st != MR_OK) assert_true(err.msg[0]);
    mr_model_version_free(v);
    return out;
}

static void test_register_and_refs(void **state)
{
    fixture *f = *state;
    struct stat before, after;
    assert_int_equal(stat(f->bundle[0], &before), 0);
    int created = -1;
    assert_int_equal(reg(f, "churn", 0, &created), 1);
    assert_int_equal(created, 1);
    assert_int_equal(reg(f, "churn", 0, &created), 1); /* the same bytes: the same version */
    assert_int_equal(created, 0);
    assert_int_equal(reg(f, "churn", 1, &created), 2);
    assert_int_equal(created, 1);
    assert_int_equal(reg(f, "other", 0, &created), 1); /* versions count per name */
    /* the registered file is left as it was: writable, not a link into the store */
    assert_int_equal(stat(f->bundle[0], &after), 0);
    assert_int_equal(before.st_mode, after.st_mode);
    assert_int_equal(after.st_nlink, 1);

    assert_int_equal(get_version(f, "churn", MR_OK), 2);
    assert_int_equal(get_version(f, "churn/latest", MR_OK), 2);
    assert_int_equal(get_version(f, "models:/churn/1", MR_OK), 1);
    get_version(f, "churn/3", MR_E_NOT_FOUND);
    get_version(f, "churn@production", MR_E_NOT_FOUND);
    get_version(f, "nope", MR_E_NOT_FOUND);
    get_version(f, "churn/0", MR_E_INVALID_ARG);
    get_version(f, "churn/", MR_E_INVALID_ARG);
    get_version(f, "models:/", MR_E_INVALID_ARG);
    get_version(f, "churn@bad alias", MR_E_INVALID_ARG);

    mr_model_version *v = NULL;
    assert_ok(mr_registry_get(f->ws, "churn/1", &v, NULL));
    assert_string_equal(v->name, "churn");
    assert_string_equal(v->bundle_name, "b0");
    assert_int_equal(v->run_id, 0); /* no run recorded it */
    assert_null(v->stage);
    mr_bundle *b = NULL;
    assert_ok(mr_bundle_load(v->path, &b, NULL)); /* the store's copy is the bundle */
    mr_bundle *orig = NULL;
    assert_ok(mr_bundle_load(f->bundle[0], &orig, NULL));
    assert_string_equal(mr_bundle_version_id(b), mr_bundle_version_id(orig));
    assert_string_equal(v->bundle_version, mr_bundle_version_id(orig));
    mr_bundle_free(b);
    mr_bundle_free(orig);
    mr_model_version_free(v);

    /* aliases: set, move, delete */
    assert_ok(mr_registry_set_alias(f->ws, "churn", "production", 1, NULL));
    assert_int_equal(get_version(f, "churn@production", MR_OK), 1);
    assert_int_equal(get_version(f, "models:/churn@production", MR_OK), 1);
    assert_ok(mr_registry_set_alias(f->ws, "churn", "staging", 2, NULL));
    assert_ok(mr_registry_set_alias(f->ws, "churn", "production", 2, NULL));
    assert_int_equal(get_version(f, "churn@production", MR_OK), 2);
    assert_ok(mr_registry_get(f->ws, "churn/2", &v, NULL));
    assert_int_equal(v->n_aliases, 2);
    assert_string_equal(v->aliases[0], "production");
    assert_string_equal(v->aliases[1], "staging");
    mr_model_version_free(v);
    assert_ok(mr_registry_set_alias(f->ws, "churn", "staging", 0, NULL));
    assert_status(mr_registry_set_alias(f->ws, "churn", "staging", 0, NULL), MR_E_NOT_FOUND);
    assert_status(mr_registry_set_alias(f->ws, "churn", "production", 9, NULL), MR_E_NOT_FOUND);
    assert_status(mr_registry_set_alias(f->ws, "nope", "production", 1, NULL), MR_E_NOT_FOUND);
    assert_status(mr_registry_set_alias(f->ws, "churn", "3", 1, NULL), MR_E_INVALID_ARG);
    assert_int_equal(get_version(f, "churn@production", MR_OK), 2); /* a refused change changes nothing */

    mr_model_summary *s = NULL;
    size_t n = 0;
    assert_ok(mr_registry_list(f->ws, &s, &n, NULL));
    assert_int_equal(n, 2);
    assert_string_equal(s[0].name, "churn");
    assert_int_equal(s[0].n_versions, 2);
    assert_int_equal(s[0].latest, 2);
    assert_int_equal(s[0].n_aliases, 1);
    assert_string_equal(s[0].aliases[0], "production=2");
    assert_string_equal(s[1].name, "other");
    mr_buf j;
    mr_buf_init(&j);
    assert_ok(mr_model_summary_json(&s[0], &j));
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *doc = json_loads(j.data, 0, NULL);
    if (!doc) mr_test_accept_if_oom(oom0);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "aliases"), "production")), 2);
    json_decref(doc);
    mr_buf_free(&j);
    mr_model_summaries_free(s, n);

    mr_model_version *all = NULL;
    assert_ok(mr_registry_versions(f->ws, "churn", &all, &n, NULL));
    assert_int_equal(n, 2);
    assert_int_equal(all[0].version, 1);
    assert_int_equal(all[1].version, 2);
    assert_string_not_equal(all[0].artifact, all[1].artifact);
    mr_model_versions_free(all, n);
    assert_status(mr_registry_versions(f->ws, "nope", &all, &n, NULL), MR_E_NOT_FOUND);
}

static void test_refused_inputs(void **state)
{
    fixture *f = *state;
    char path[320];
    snprintf(path, sizeof(path), "%s/not_a_bundle.mrb", f->dir);
    write_text(path, "this is not a bundle");
    int64_t v = 0;
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_registry_register(f->ws, "churn", path, 0, NULL, &v, NULL, &err);
    if (st == MR_E_NOMEM) assert_status(st, MR_OK);
    assert_true(st != MR_OK);
    char msg[1024];
    mr_error_format(&err, msg, sizeof(msg));
    assert_non_null(strstr(msg, "not_a_bundle.mrb")); /* the error names the file */
    mr_error_init(&err);
    assert_status(mr_registry_register(f->ws, "churn", f->dir, 0, NULL, &v, NULL, &err), MR_E_INVALID_ARG);
    snprintf(path, sizeof(path), "%s/missing.mrb", f->dir);
    mr_error_init(&err);
    assert_status(mr_registry_register(f->ws, "churn", path, 0, NULL, &v, NULL, &err), MR_E_NOT_FOUND);
    mr_error_init(&err);
    assert_status(mr_registry_register(f->ws, "bad name", f->bundle[0], 0, NULL, &v, NULL, &err), MR_E_INVALID_ARG);
    mr_model_summary *s = NULL;
    size_t n = 9;
    assert_ok(mr_registry_list(f->ws, &s, &n, NULL));
    assert_int_equal(n, 0); /* nothing was recorded */
    mr_model_summaries_free(s, n);
    /* and nothing was left in the store's tmp */
    snprintf(path, sizeof(path), "%s/.millrace/tmp", f->dir);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s 2>/dev/null)\"", path);
    assert_int_equal(system(cmd), 0);
}

static void test_gc_keeps_registered(void **state)
{
    fixture *f = *state;
    reg(f, "churn", 2, NULL);
    reg(f, "churn", 3, NULL);
    mr_buf out;
    mr_buf_init(&out);
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_pipeline_gc(f->ws, 0, 0, 0, &out, &err); /* keeps only the lock's and the registry's */
    mr_buf_free(&out);
    assert_status(st, MR_OK);
    for (int k = 1; k <= 2; k++) {
        char ref[32];
        snprintf(ref, sizeof(ref), "churn/%d", k);
        mr_model_version *v = NULL;
        assert_ok(mr_registry_get(f->ws, ref, &v, NULL));
        mr_bundle *b = NULL;
        assert_ok(mr_bundle_load(v->path, &b, NULL));
        mr_bundle_free(b);
        mr_model_version_free(v);
    }
}

static void test_diff(void **state)
{
    fixture *f = *state;
    reg(f, "churn", 0, NULL);
    reg(f, "churn", 1, NULL);
    assert_ok(mr_registry_set_alias(f->ws, "churn", "production", 2, NULL));
    mr_buf out;
    mr_buf_init(&out);
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_registry_diff(f->ws, "churn", "1", "@production", 1, &out, &err));
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *doc = json_loads(out.data, 0, NULL);
    if (!doc) mr_test_accept_if_oom(oom0);
    assert_non_null(doc);
    assert_false(json_is_true(json_object_get(doc, "same_bundle")));
    json_t *m = json_object_get(doc, "metrics");
    assert_int_equal(json_array_size(m), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "name")), "valid.auc");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "a")), "0.7");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "b")), "0.71");
    assert_int_equal(json_array_size(json_object_get(doc, "model")), 0); /* the same model in both */
    assert_int_equal(json_array_size(json_object_get(json_object_get(doc, "schema"), "added")), 0);
    json_decref(doc);
    mr_buf_free(&out);
    mr_buf_init(&out);
    assert_ok(mr_registry_diff(f->ws, "churn", "latest", "2", 0, &out, NULL));
    assert_non_null(strstr(out.data, "(the same bundle)"));
    mr_buf_free(&out);
    mr_buf_init(&out);
    assert_status(mr_registry_diff(f->ws, "churn", "1", "@staging", 0, &out, NULL), MR_E_NOT_FOUND);
    mr_buf_free(&out);
}

/* N processes register N different bundles at once: versions 1..N, each
 * bundle exactly once. */
static void test_concurrent_register(void **state)
{
    fixture *f = *state;
    pid_t pids[N_BUNDLES];
    for (int k = 0; k < N_BUNDLES; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0) {
            mr_workspace *ws = NULL;
            int64_t v = 0;
            int ok = mr_workspace_open(f->dir, 0, 0, &ws, NULL) == MR_OK &&
                     mr_registry_register(ws, "conc", f->bundle[k], 0, NULL, &v, NULL, NULL) == MR_OK;
            mr_workspace_close(ws);
            _exit(ok ? 0 : 1);
        }
    }
    for (int k = 0; k < N_BUNDLES; k++) {
        int ws = 0;
        assert_int_equal(waitpid(pids[k], &ws, 0), pids[k]);
        assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    mr_model_version *all = NULL;
    size_t n = 0;
    assert_ok(mr_registry_versions(f->ws, "conc", &all, &n, NULL));
    assert_int_equal(n, N_BUNDLES);
    int seen[N_BUNDLES] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(all[i].version, (int64_t)i + 1);
        int k = all[i].bundle_name[1] - '0';
        assert_true(k >= 0 && k < N_BUNDLES);
        seen[k]++;
    }
    for (int k = 0; k < N_BUNDLES; k++) assert_int_equal(seen[k], 1);
    mr_model_versions_free(all, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_register_and_refs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_keeps_registered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_diff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_register, setup, teardown),
    };
    return mr_test_run(tests, NULL, NULL);
}
