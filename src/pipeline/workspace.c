/* Workspace: locating millrace.yaml, opening .millrace/ (store, run store,
 * stat cache), and `millrace init`. */
#include "pipeline_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mr_workspace_close(mr_workspace *ws)
{
    if (!ws) return;
    if (ws->rs && ws->sc) {
        mr_error e;
        mr_error_init(&e);
        if (mr_runstore_statcache_save(ws->rs, ws->sc, &e) != MR_OK) mr_log(MR_LOG_WARN, "could not save the stat cache: %s", e.msg);
    }
    mr_statcache_free(ws->sc);
    mr_runstore_close(ws->rs);
    mr_store_close(ws->store);
    mr_free(ws->root);
    mr_free(ws->dot);
    mr_free(ws->spec_path);
    mr_free(ws->lock_path);
    mr_free(ws->cache_dir);
    mr_free(ws);
}

/* cache_dir: a cluster job's handle, without the run store (stagecache.c). */
static mr_status open_ws(const char *dir, int search_up, int create, const char *cache_dir, mr_workspace **out,
                         mr_error *err)
{
    char buf[PATH_MAX];
    mr_status rc = MR_OK;
    if (!realpath(dir, buf)) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot resolve directory", dir);
    mr_workspace *ws = mr_calloc(1, sizeof(*ws));
    if (!ws) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (;;) {
        char *spec = mr_path_join(buf, "millrace.yaml");
        if (!spec) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto fail;
        }
        int found = mr_fs_exists(spec);
        mr_free(spec);
        if (found || !search_up) break;
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf) {
            if (!realpath(dir, buf)) buf[0] = '\0';
            break;
        }
        *slash = '\0';
    }
    ws->root = mr_strdup(buf);
    ws->dot = mr_path_join(buf, ".millrace");
    ws->spec_path = mr_path_join(buf, "millrace.yaml");
    ws->lock_path = mr_path_join(buf, "millrace.lock");
    if (!ws->root || !ws->dot || !ws->spec_path || !ws->lock_path) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    if (!mr_fs_is_dir(ws->dot) && !create) {
        if (!mr_fs_exists(ws->spec_path)) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "no millrace.yaml in %s or any parent directory", dir);
            mr_error_hint(err, "run `millrace init` to start a pipeline here");
            goto fail;
        }
    }
    rc = mr_store_open(ws->dot, &ws->store, err);
    if (rc != MR_OK) goto fail;
    {
        char *locks = mr_path_join(ws->dot, "locks");
        char *logs = mr_path_join(ws->dot, "logs");
        char *db = mr_path_join(ws->dot, "runs.db");
        if (!locks || !logs || !db) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) rc = mr_fs_mkdirs(locks, err);
        if (rc == MR_OK) rc = mr_fs_mkdirs(logs, err);
        if (rc == MR_OK && !cache_dir) rc = mr_runstore_open(db, &ws->rs, err);
        if (rc == MR_OK && cache_dir && !(ws->cache_dir = mr_strdup(cache_dir))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(locks);
        mr_free(logs);
        mr_free(db);
        if (rc != MR_OK) goto fail;
    }
    rc = mr_statcache_new(&ws->sc, err);
    if (rc == MR_OK && ws->rs) rc = mr_runstore_statcache_load(ws->rs, ws->sc, err);
    if (rc != MR_OK) goto fail;
    *out = ws;
    return MR_OK;
fail:
    mr_statcache_free(ws->sc);
    ws->sc = NULL;
    mr_workspace_close(ws);
    return rc;
}

mr_status mr_workspace_open(const char *dir, int search_up, int create, mr_workspace **out, mr_error *err)
{
    return open_ws(dir, search_up, create, NULL, out, err);
}

mr_status mr__workspace_open_cluster(const char *dir, const char *cache_dir, mr_workspace **out, mr_error *err)
{
    return open_ws(dir, 0, 1, cache_dir, out, err);
}

mr_status mr__workspace_gc_lock(mr_workspace *ws, int mode, mr_flock *lk, mr_error *err)
{
    char *dir = mr_path_join(ws->dot, "locks");
    char *path = mr_path_join(ws->dot, "locks/gc.lock");
    mr_status rc = dir && path ? mr_fs_mkdirs(dir, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_free(dir);
    if (rc == MR_OK) {
        rc = mr_flock_acquire(lk, path, mode, 0, 1, err);
        if (rc == MR_E_STATE) {
            mr_log(MR_LOG_INFO, "%s", mode == MR_LOCK_EXCLUSIVE ? "gc: waiting for running runs to finish"
                                                                 : "waiting for a running gc to finish");
            rc = mr_flock_acquire(lk, path, mode, 1, 1, err);
        }
    }
    mr_free(path);
    return rc;
}

/* The starter pipeline `millrace init` writes: a small but real model on a
 * generated table, every built-in step a new user needs (ingest, split,
 * features, train, evaluate, report), runnable at once. */
static const char starter_yaml[] =
    "# millrace.yaml: a churn model on a generated customer table (data/customers.csv).\n"
    "#\n"
    "#   millrace run                               # every stage runs once\n"
    "#   millrace run                               # nothing changed: all from the cache\n"
    "#   millrace run -S train.learning_rate=0.05   # only the model and what reads it re-run\n"
    "#   millrace show; millrace report -o report.html\n"
    "#\n"
    "# Replace data/customers.csv with your own table (and the column names below).\n"
    "# docs/spec.md describes every op and key.\n"
    "params:\n"
    "  train:\n"
    "    learning_rate: 0.1\n"
    "    num_leaves: 15\n"
    "\n"
    "stages:\n"
    "  customers:\n"
    "    op: ingest                 # CSV -> a Parquet dataset; types are inferred\n"
    "    source: data/customers.csv\n"
    "\n"
    "  split:\n"
    "    op: split                  # each part keeps the churn rate of the whole\n"
    "    input: ${stages.customers}\n"
    "    method: stratified\n"
    "    label: churned\n"
    "    parts: {train: 0.7, valid: 0.15, test: 0.15}\n"
    "\n"
    "  features:\n"
    "    op: features               # fitted on train only, applied to valid and test\n"
    "    fit: ${stages.split.train}\n"
    "    apply: {valid: \"${stages.split.valid}\", test: \"${stages.split.test}\"}\n"
    "    label: churned\n"
    "    steps:\n"
    "      - standardize: {columns: [age, monthly_spend, tenure_months, support_calls]}\n"
    "      - onehot: {columns: [plan]}\n"
    "\n"
    "  model:\n"
    "    op: train                  # gradient-boosted trees, LightGBM's parameter names\n"
    "    train: ${stages.features.train}\n"
    "    valid: ${stages.features.valid}\n"
    "    label: churned\n"
    "    exclude: [customer_id]\n"
    "    params:\n"
    "      objective: binary\n"
    "      metric: auc\n"
    "      learning_rate: ${params.train.learning_rate}\n"
    "      num_leaves: ${params.train.num_leaves}\n"
    "      num_iterations: 300\n"
    "      early_stopping_round: 30\n"
    "\n"
    "  eval:\n"
    "    op: evaluate               # metrics with confidence intervals, curves, slices\n"
    "    model: ${stages.model}\n"
    "    data: ${stages.features.test}\n"
    "    label: churned\n"
    "\n"
    "  report:\n"
    "    op: report                 # one self-contained HTML page: out/report/report.html\n"
    "    evaluate: ${stages.eval}\n"
    "    model: ${stages.model}\n";

/* data/customers.csv: 3,000 customers with a churn label that depends on
 * their features (plus noise), from a fixed seed, so every `millrace init`
 * writes the same bytes. */
static mr_status write_example_data(const char *path, mr_error *err)
{
    static const char *const plans[] = {"basic", "plus", "pro"};
    mr_rng rng;
    mr_rng_seed(&rng, 20261201);
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = mr_buf_puts(&b, "customer_id,age,plan,monthly_spend,tenure_months,support_calls,churned\n");
    for (int i = 0; i < 3000 && rc == MR_OK; i++) {
        int age = 18 + (int)mr_rng_below(&rng, 60);
        int plan = (int)mr_rng_below(&rng, 3);
        double spend = 10.0 + 25.0 * plan + 30.0 * mr_rng_uniform(&rng);
        int tenure = 1 + (int)mr_rng_below(&rng, 72);
        int calls = (int)(mr_rng_uniform(&rng) * mr_rng_uniform(&rng) * 9.0);
        double z = -1.2 + 0.45 * calls - 0.035 * tenure + 0.012 * (spend - 40.0) - 0.4 * (plan == 2) +
                   0.01 * (40 - age) + 0.8 * mr_rng_normal(&rng);
        int churned = z > 0;
        rc = mr_buf_printf(&b, "%d,%d,%s,%.2f,%d,%d,%d\n", 100000 + i, age, plans[plan], spend, tenure, calls, churned);
    }
    if (rc != MR_OK) rc = MR_ERR(err, rc, "out of memory writing the example data");
    else rc = mr_fs_write_atomic(path, b.data, b.len, err);
    mr_buf_free(&b);
    return rc;
}

mr_status mr_workspace_init(const char *dir, int force, mr_error *err)
{
    mr_status rc = mr_fs_mkdirs(dir, err);
    char *spec = mr_path_join(dir, "millrace.yaml");
    char *dot = mr_path_join(dir, ".millrace");
    char *data = mr_path_join(dir, "data");
    char *gi = mr_path_join(dir, ".gitignore");
    char *csv = mr_path_join(dir, "data/customers.csv");
    if (!spec || !dot || !data || !gi || !csv) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK && mr_fs_exists(spec) && !force) {
        rc = MR_ERR(err, MR_E_STATE, "%s already exists", spec);
        mr_error_hint(err, "use --force to overwrite it");
    }
    if (rc == MR_OK) rc = mr_fs_write_atomic(spec, starter_yaml, sizeof(starter_yaml) - 1, err);
    if (rc == MR_OK) rc = mr_fs_mkdirs(dot, err);
    if (rc == MR_OK) rc = mr_fs_mkdirs(data, err);
    if (rc == MR_OK && !mr_fs_exists(csv)) rc = write_example_data(csv, err);
    if (rc == MR_OK && !mr_fs_exists(gi)) {
        static const char ignore[] = "/.millrace/\n/out/\n";
        rc = mr_fs_write_atomic(gi, ignore, sizeof(ignore) - 1, err);
    }
    if (rc == MR_OK) {
        mr_workspace *ws = NULL;
        rc = mr_workspace_open(dir, 0, 1, &ws, err);
        mr_workspace_close(ws);
    }
    mr_free(spec);
    mr_free(dot);
    mr_free(data);
    mr_free(gi);
    mr_free(csv);
    return rc;
}
