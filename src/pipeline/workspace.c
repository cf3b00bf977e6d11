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
    mr_free(ws);
}

mr_status mr_workspace_open(const char *dir, int search_up, int create, mr_workspace **out, mr_error *err)
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
        if (rc == MR_OK) rc = mr_runstore_open(db, &ws->rs, err);
        mr_free(locks);
        mr_free(logs);
        mr_free(db);
        if (rc != MR_OK) goto fail;
    }
    rc = mr_statcache_new(&ws->sc, err);
    if (rc == MR_OK) rc = mr_runstore_statcache_load(ws->rs, ws->sc, err);
    if (rc != MR_OK) goto fail;
    *out = ws;
    return MR_OK;
fail:
    mr_statcache_free(ws->sc);
    ws->sc = NULL;
    mr_workspace_close(ws);
    return rc;
}

static const char starter_yaml[] =
    "# millrace.yaml: the pipeline, as a DAG of stages. See docs/spec.md.\n"
    "params:\n"
    "  sample:\n"
    "    rows: 1000\n"
    "\n"
    "stages:\n"
    "  generate:\n"
    "    op: exec\n"
    "    cmd: seq 1 ${params.sample.rows} > data/numbers.txt\n"
    "    outs: [data/numbers.txt]\n"
    "\n"
    "  summarize:\n"
    "    op: exec\n"
    "    cmd: >-\n"
    "      awk '{ s += $1 } END { printf \"{\\\"rows\\\": %d, \\\"sum\\\": %d}\\n\", NR, s }'\n"
    "      data/numbers.txt > metrics.json\n"
    "    deps: [data/numbers.txt]\n"
    "    metrics: [metrics.json]\n";

mr_status mr_workspace_init(const char *dir, int force, mr_error *err)
{
    mr_status rc = mr_fs_mkdirs(dir, err);
    char *spec = mr_path_join(dir, "millrace.yaml");
    char *dot = mr_path_join(dir, ".millrace");
    char *data = mr_path_join(dir, "data");
    char *gi = mr_path_join(dir, ".gitignore");
    if (!spec || !dot || !data || !gi) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK && mr_fs_exists(spec) && !force) {
        rc = MR_ERR(err, MR_E_STATE, "%s already exists", spec);
        mr_error_hint(err, "use --force to overwrite it");
    }
    if (rc == MR_OK) rc = mr_fs_write_atomic(spec, starter_yaml, sizeof(starter_yaml) - 1, err);
    if (rc == MR_OK) rc = mr_fs_mkdirs(dot, err);
    if (rc == MR_OK) rc = mr_fs_mkdirs(data, err);
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
    return rc;
}
