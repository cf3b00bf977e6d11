/* The run store's writes: runs (with their name and tags), stage runs,
 * metrics, lineage, the stage cache, the stat cache and tune trials; and
 * the two maintenance queries of `gc` (kept artifacts, cache pruning). The
 * executor is the writer; nothing here reads a view back. */
#include "runstore_int.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static const char *const STMT_SQL[MR__RS_N_STMTS] = {
    [MR__RS_RUN_BEGIN] = "INSERT INTO runs(started, status, argv, cwd, git_commit, git_dirty, params_json, overrides,"
                         " smoke, pid, pid_start, name) VALUES(?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [MR__RS_RUN_END] = "UPDATE runs SET ended = ?2, status = ?3, n_executed = ?4, n_cached = ?5, n_failed = ?6,"
                       " n_skipped = ?7 WHERE id = ?1",
    [MR__RS_STAGE] = "INSERT INTO stage_runs(run_id, stage, op, key, status, started, wall_s, user_s, sys_s,"
                     " max_rss_kb, bytes_read, bytes_written, error, outputs_json)"
                     " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [MR__RS_METRIC] = "INSERT INTO metrics(run_id, stage, name, step, value) VALUES(?1, ?2, ?3, ?4, ?5)",
    [MR__RS_LINEAGE] = "INSERT INTO lineage(run_id, stage, role, name, artifact) VALUES(?1, ?2, ?3, ?4, ?5)",
    [MR__RS_CACHE_GET] = "SELECT outputs_json, metrics_json, key_doc FROM stage_cache WHERE key = ?1",
    [MR__RS_CACHE_PUT] = "INSERT OR REPLACE INTO stage_cache(key, stage, op, key_doc, outputs_json, metrics_json,"
                         " created, run_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
};

#define TAG_KEY_MAX 64
#define TAG_VALUE_MAX 1000

/* Returns the cached statement `which`, reset and with cleared bindings. */
static mr_status cached(mr_runstore *rs, int which, sqlite3_stmt **out, mr_error *err)
{
    mr_status st = MR_OK;
    if (!rs->stmts[which]) {
        if (sqlite3_prepare_v3(rs->db, STMT_SQL[which], -1, SQLITE_PREPARE_PERSISTENT, &rs->stmts[which], NULL) !=
            SQLITE_OK)
            st = mr__runstore_fail(rs, err, "prepare");
    } else {
        sqlite3_reset(rs->stmts[which]);
        sqlite3_clear_bindings(rs->stmts[which]);
    }
    *out = rs->stmts[which];
    return st;
}

/* Releases a cached statement after use so it holds no read snapshot. */
static void release(sqlite3_stmt *s)
{
    if (!s) return;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* ---- runs ----------------------------------------------------------------- */

mr_status mr_run_tag_check(const char *tag, mr_error *err)
{
    mr_status st = MR_OK;
    const char *eq = strchr(tag, '=');
    size_t klen = eq ? (size_t)(eq - tag) : strlen(tag);
    if (klen == 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "tag '%s': the key is empty (expected KEY or KEY=VALUE)", tag);
        goto done;
    }
    if (klen > TAG_KEY_MAX) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "tag '%.*s...': the key is longer than %d characters", 20, tag, TAG_KEY_MAX);
        goto done;
    }
    for (size_t i = 0; i < klen; i++) {
        char c = tag[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-')) {
            st = MR_ERR(err, MR_E_INVALID_ARG, "tag '%s': key character '%c' is not one of [A-Za-z0-9_.-]", tag, c);
            goto done;
        }
    }
    if (eq && (strlen(eq + 1) > TAG_VALUE_MAX || strchr(eq + 1, '\n')))
        st = MR_ERR(err, MR_E_INVALID_ARG, "tag '%.*s': the value must be one line of at most %d bytes", (int)klen, tag,
                    TAG_VALUE_MAX);
done:
    return st;
}

#define NAME_MAX_LEN 100

mr_status mr_run_name_check(const char *name, mr_error *err)
{
    mr_status st = MR_OK;
    size_t n = strlen(name), digits = strspn(name, "0123456789");
    if (n == 0 || n > NAME_MAX_LEN || strchr(name, '\n'))
        st = MR_ERR(err, MR_E_INVALID_ARG, "run name '%.40s': must be one line of 1..%d bytes", name, NAME_MAX_LEN);
    else if (digits == n || name[0] == '-' || !strcmp(name, "latest") || !strcmp(name, "last"))
        st = MR_ERR(err, MR_E_INVALID_ARG, "run name '%s' reads as a run id or reference (a number, latest, last, -N)", name);
    return st;
}

static mr_status add_tags(mr_runstore *rs, int64_t run_id, const char *const *tags, size_t n, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    if (n == 0) goto done;
    st = mr__runstore_prepare(rs, "INSERT OR REPLACE INTO run_tags(run_id, key, value) VALUES(?1, ?2, ?3)", &s, err);
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        const char *eq = strchr(tags[i], '=');
        size_t klen = eq ? (size_t)(eq - tags[i]) : strlen(tags[i]);
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_text(s, 2, tags[i], (int)klen, SQLITE_STATIC);
        mr__runstore_bind_str(s, 3, eq ? eq + 1 : NULL);
        st = mr__runstore_step_done(rs, s, "recording a run tag", err);
    }
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_run_begin(mr_runstore *rs, const mr_run_begin *info, int64_t *run_id_out, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    pid_t pid = getpid();
    int64_t pid_start = mr__runstore_proc_starttime((long)pid), id = 0;
    int in_tx = 0;
    if (info->name && info->name[0]) st = mr_run_name_check(info->name, err);
    for (size_t i = 0; i < info->n_tags && st == MR_OK; i++) st = mr_run_tag_check(info->tags[i], err);
    if (st != MR_OK) goto done;
    st = mr__runstore_tx_begin(rs, err);
    if (st != MR_OK) goto done;
    in_tx = 1;
    st = cached(rs, MR__RS_RUN_BEGIN, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_double(s, 1, mr_wall_time());
    mr__runstore_bind_str(s, 2, info->argv);
    mr__runstore_bind_str(s, 3, info->cwd);
    mr__runstore_bind_str(s, 4, info->git_commit);
    sqlite3_bind_int(s, 5, info->git_dirty ? 1 : 0);
    mr__runstore_bind_str(s, 6, info->params_json);
    mr__runstore_bind_str(s, 7, info->overrides);
    sqlite3_bind_int(s, 8, info->smoke ? 1 : 0);
    sqlite3_bind_int64(s, 9, (int64_t)pid);
    if (pid_start >= 0)
        sqlite3_bind_int64(s, 10, pid_start);
    else
        sqlite3_bind_null(s, 10);
    mr__runstore_bind_str(s, 11, info->name && info->name[0] ? info->name : NULL);
    st = mr__runstore_step_done(rs, s, "recording the run", err);
    if (st != MR_OK) goto done;
    id = sqlite3_last_insert_rowid(rs->db);
    release(s);
    s = NULL;
    st = add_tags(rs, id, info->tags, info->n_tags, err);
    if (st != MR_OK) goto done;
    st = mr__runstore_tx_commit(rs, err);
    if (st == MR_OK) *run_id_out = id;
done:
    release(s);
    if (st != MR_OK && in_tx) mr__runstore_tx_rollback(rs);
    return st;
}

mr_status mr_runstore_run_end(mr_runstore *rs, int64_t run_id, const char *status, int n_executed, int n_cached,
                              int n_failed, int n_skipped, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, MR__RS_RUN_END, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    sqlite3_bind_double(s, 2, mr_wall_time());
    mr__runstore_bind_str(s, 3, status);
    sqlite3_bind_int(s, 4, n_executed);
    sqlite3_bind_int(s, 5, n_cached);
    sqlite3_bind_int(s, 6, n_failed);
    sqlite3_bind_int(s, 7, n_skipped);
    st = mr__runstore_step_done(rs, s, "finishing the run", err);
    if (st != MR_OK) goto done;
    if (sqlite3_changes(rs->db) == 0) st = MR_ERR(err, MR_E_NOT_FOUND, "%s: no run %lld", rs->path, (long long)run_id);
done:
    release(s);
    return st;
}

/* ---- stage runs, metrics, lineage ---------------------------------------- */

mr_status mr_runstore_stage_record(mr_runstore *rs, int64_t run_id, const mr_stage_record *rec, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, MR__RS_STAGE, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    mr__runstore_bind_str(s, 2, rec->stage);
    mr__runstore_bind_str(s, 3, rec->op);
    mr__runstore_bind_str(s, 4, rec->key);
    mr__runstore_bind_str(s, 5, rec->status);
    sqlite3_bind_double(s, 6, rec->started);
    sqlite3_bind_double(s, 7, rec->wall_s);
    sqlite3_bind_double(s, 8, rec->user_s);
    sqlite3_bind_double(s, 9, rec->sys_s);
    sqlite3_bind_int64(s, 10, rec->max_rss_kb);
    sqlite3_bind_int64(s, 11, rec->bytes_read);
    sqlite3_bind_int64(s, 12, rec->bytes_written);
    mr__runstore_bind_str(s, 13, rec->error);
    mr__runstore_bind_str(s, 14, rec->outputs_json);
    st = mr__runstore_step_done(rs, s, "recording a stage run", err);
done:
    release(s);
    return st;
}

mr_status mr_runstore_metrics_add(mr_runstore *rs, int64_t run_id, const char *stage, const mr_metric *m, size_t n,
                                  mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    if (n == 0) goto done;
    st = cached(rs, MR__RS_METRIC, &s, err);
    if (st != MR_OK) goto done;
    st = mr__runstore_tx_begin(rs, err);
    if (st != MR_OK) goto done;
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, run_id);
        mr__runstore_bind_str(s, 2, stage);
        mr__runstore_bind_str(s, 3, m[i].name);
        sqlite3_bind_int64(s, 4, m[i].step);
        sqlite3_bind_double(s, 5, m[i].value);
        st = mr__runstore_step_done(rs, s, "recording metrics", err);
    }
    release(s);
    if (st == MR_OK) st = mr__runstore_tx_commit(rs, err);
done:
    release(s);
    if (st != MR_OK) mr__runstore_tx_rollback(rs);
    return st;
}

mr_status mr_runstore_lineage_add(mr_runstore *rs, int64_t run_id, const char *stage, const char *role,
                                  const char *name, const char *artifact, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, MR__RS_LINEAGE, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    mr__runstore_bind_str(s, 2, stage);
    mr__runstore_bind_str(s, 3, role);
    mr__runstore_bind_str(s, 4, name);
    mr__runstore_bind_str(s, 5, artifact);
    st = mr__runstore_step_done(rs, s, "recording lineage", err);
done:
    release(s);
    return st;
}

/* ---- stage cache ---------------------------------------------------------- */

mr_status mr_runstore_cache_get(mr_runstore *rs, const char *key, char **outputs_json, char **metrics_json,
                                char **key_doc, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    char *cols[3] = {NULL, NULL, NULL};
    char **outs[3] = {outputs_json, metrics_json, key_doc};
    int rc;
    for (int i = 0; i < 3; i++)
        if (outs[i]) *outs[i] = NULL;
    st = cached(rs, MR__RS_CACHE_GET, &s, err);
    if (st != MR_OK) goto done;
    mr__runstore_bind_str(s, 1, key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "no cache entry for key '%s'", key);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = mr__runstore_fail(rs, err, "reading the stage cache");
        goto done;
    }
    for (int i = 0; i < 3 && st == MR_OK; i++)
        if (outs[i]) st = mr__runstore_col_dup(s, i, &cols[i], err);
    if (st != MR_OK) goto done;
    for (int i = 0; i < 3; i++) {
        if (outs[i]) *outs[i] = cols[i];
        cols[i] = NULL;
    }
done:
    for (int i = 0; i < 3; i++) mr_free(cols[i]);
    release(s);
    return st;
}

mr_status mr_runstore_cache_put(mr_runstore *rs, const char *key, const char *stage, const char *op,
                                const char *key_doc, const char *outputs_json, const char *metrics_json,
                                int64_t run_id, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, MR__RS_CACHE_PUT, &s, err);
    if (st != MR_OK) goto done;
    mr__runstore_bind_str(s, 1, key);
    mr__runstore_bind_str(s, 2, stage);
    mr__runstore_bind_str(s, 3, op);
    mr__runstore_bind_str(s, 4, key_doc);
    mr__runstore_bind_str(s, 5, outputs_json);
    mr__runstore_bind_str(s, 6, metrics_json);
    sqlite3_bind_double(s, 7, mr_wall_time());
    if (run_id > 0)
        sqlite3_bind_int64(s, 8, run_id);
    else
        sqlite3_bind_null(s, 8);
    st = mr__runstore_step_done(rs, s, "writing the stage cache", err);
done:
    release(s);
    return st;
}

mr_status mr_runstore_cache_each(mr_runstore *rs, mr_runstore_cache_fn fn, void *ctx, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_status st = mr__runstore_prepare(
        rs, "SELECT key, stage, op, key_doc, outputs_json, metrics_json, run_id FROM stage_cache ORDER BY rowid", &s, err);
    int rc = SQLITE_DONE;
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *c[6];
        for (int i = 0; i < 6; i++) c[i] = (const char *)sqlite3_column_text(s, i);
        if (!c[0] || !c[1]) continue;
        st = fn(ctx, c[0], c[1], c[2], c[3], c[4], c[5], sqlite3_column_int64(s, 6), err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading the stage cache");
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_cache_last_for_stage(mr_runstore *rs, const char *stage, char **key_out, char **key_doc_out,
                                           mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    char *key = NULL, *doc = NULL;
    int rc;
    if (key_out) *key_out = NULL;
    if (key_doc_out) *key_doc_out = NULL;
    st = mr__runstore_prepare(
        rs, "SELECT key, key_doc FROM stage_cache WHERE stage = ?1 ORDER BY created DESC, rowid DESC LIMIT 1", &s, err);
    if (st != MR_OK) goto done;
    mr__runstore_bind_str(s, 1, stage);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "no cache entry for stage '%s'", stage);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = mr__runstore_fail(rs, err, "reading the stage cache");
        goto done;
    }
    if (key_out) st = mr__runstore_col_dup(s, 0, &key, err);
    if (st == MR_OK && key_doc_out) st = mr__runstore_col_dup(s, 1, &doc, err);
    if (st != MR_OK) goto done;
    if (key_out) *key_out = key;
    if (key_doc_out) *key_doc_out = doc;
    key = NULL;
    doc = NULL;
done:
    mr_free(key);
    mr_free(doc);
    sqlite3_finalize(s);
    return st;
}

/* ---- stat cache ----------------------------------------------------------- */

mr_status mr_runstore_statcache_load(mr_runstore *rs, mr_statcache *sc, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    st = mr__runstore_prepare(rs, "SELECT path, size, mtime_ns, ino, hash FROM stat_cache", &s, err);
    if (st != MR_OK) goto done;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(s, 0);
        const char *hex = (const char *)sqlite3_column_text(s, 4);
        mr_hash128 h;
        if (!path || !hex || mr_hash_parse(hex, &h) != MR_OK) continue; /* unusable row: rehash later */
        if (mr_statcache_put(sc, path, (uint64_t)sqlite3_column_int64(s, 1), (uint64_t)sqlite3_column_int64(s, 2),
                             (uint64_t)sqlite3_column_int64(s, 3), h, 0) != MR_OK) {
            st = mr__runstore_nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading the stat cache");
done:
    sqlite3_finalize(s);
    return st;
}

typedef struct save_ctx {
    mr_runstore *rs;
    sqlite3_stmt *s;
    mr_error *err;
    mr_status st;
} save_ctx;

static void save_one(void *ctx, const mr_statcache_entry *e)
{
    save_ctx *c = ctx;
    char hex[MR_HASH_HEX_LEN + 1];
    if (c->st != MR_OK) return;
    mr_hash_hex(e->hash, hex);
    sqlite3_reset(c->s);
    mr__runstore_bind_str(c->s, 1, e->path);
    sqlite3_bind_int64(c->s, 2, (int64_t)e->size);
    sqlite3_bind_int64(c->s, 3, (int64_t)e->mtime_ns);
    sqlite3_bind_int64(c->s, 4, (int64_t)e->ino);
    sqlite3_bind_text(c->s, 5, hex, -1, SQLITE_TRANSIENT);
    c->st = mr__runstore_step_done(c->rs, c->s, "writing the stat cache", c->err);
}

mr_status mr_runstore_statcache_save(mr_runstore *rs, const mr_statcache *sc, mr_error *err)
{
    save_ctx c = {rs, NULL, err, MR_OK};
    c.st = mr__runstore_prepare(
        rs, "INSERT OR REPLACE INTO stat_cache(path, size, mtime_ns, ino, hash) VALUES(?1, ?2, ?3, ?4, ?5)", &c.s, err);
    if (c.st != MR_OK) goto done;
    c.st = mr__runstore_tx_begin(rs, err);
    if (c.st != MR_OK) goto done;
    mr_statcache_foreach(sc, 1, save_one, &c);
    sqlite3_reset(c.s);
    if (c.st == MR_OK) c.st = mr__runstore_tx_commit(rs, err);
done:
    sqlite3_finalize(c.s);
    if (c.st != MR_OK) mr__runstore_tx_rollback(rs);
    return c.st;
}

/* ---- tune trials -----------------------------------------------------------
 * An additive table, created on first use (older readers never look at it,
 * and a store without it simply has no trials). */
static const char TRIALS_SQL[] =
    "CREATE TABLE IF NOT EXISTS tune_trials("
    " run_id INTEGER NOT NULL, stage TEXT NOT NULL, trial INTEGER NOT NULL, key TEXT, status TEXT NOT NULL,"
    " value REAL, record_json TEXT NOT NULL, created REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS tune_trials_stage ON tune_trials(stage, run_id);";

mr_status mr_runstore_trial_add(mr_runstore *rs, int64_t run_id, const char *stage, int trial, const char *key,
                                const char *status, double value, const char *record_json, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_status st = mr__runstore_exec_retry(rs, TRIALS_SQL, err);
    if (st != MR_OK) goto done;
    st = mr__runstore_prepare(rs,
                              "INSERT INTO tune_trials(run_id, stage, trial, key, status, value, record_json, created)"
                              " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                              &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    mr__runstore_bind_str(s, 2, stage);
    sqlite3_bind_int(s, 3, trial);
    mr__runstore_bind_str(s, 4, key);
    mr__runstore_bind_str(s, 5, status);
    if (isfinite(value))
        sqlite3_bind_double(s, 6, value);
    else
        sqlite3_bind_null(s, 6);
    mr__runstore_bind_str(s, 7, record_json);
    sqlite3_bind_double(s, 8, mr_wall_time());
    st = mr__runstore_step_done(rs, s, "recording a tune trial", err);
done:
    sqlite3_finalize(s);
    return st;
}

static const char JOBS_SQL[] =
    "CREATE TABLE IF NOT EXISTS stage_jobs("
    " run_id INTEGER NOT NULL, stage TEXT NOT NULL, attempt INTEGER NOT NULL, job_id TEXT NOT NULL, state TEXT,"
    " exit_code INTEGER, exit_signal INTEGER, nodes TEXT, elapsed_s REAL, max_rss_kb INTEGER, mem_mb INTEGER,"
    " submitted REAL, created REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS stage_jobs_run ON stage_jobs(run_id, stage);";

mr_status mr_runstore_job_add(mr_runstore *rs, int64_t run_id, const mr_job_record *j, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_status st = mr__runstore_exec_retry(rs, JOBS_SQL, err);
    if (st != MR_OK) goto done;
    st = mr__runstore_prepare(rs,
                              "INSERT INTO stage_jobs(run_id, stage, attempt, job_id, state, exit_code, exit_signal, nodes,"
                              " elapsed_s, max_rss_kb, mem_mb, submitted, created)"
                              " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                              &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    mr__runstore_bind_str(s, 2, j->stage);
    sqlite3_bind_int(s, 3, j->attempt);
    mr__runstore_bind_str(s, 4, j->job_id);
    mr__runstore_bind_str(s, 5, j->state);
    sqlite3_bind_int(s, 6, j->exit_code);
    sqlite3_bind_int(s, 7, j->exit_signal);
    mr__runstore_bind_str(s, 8, j->nodes);
    sqlite3_bind_double(s, 9, j->elapsed_s);
    sqlite3_bind_int64(s, 10, j->max_rss_kb);
    sqlite3_bind_int64(s, 11, j->mem_mb);
    sqlite3_bind_double(s, 12, j->submitted);
    sqlite3_bind_double(s, 13, mr_wall_time());
    st = mr__runstore_step_done(rs, s, "recording a Slurm job", err);
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_jobs_json(mr_runstore *rs, int64_t run_id, mr_buf *out, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_status st = mr__runstore_exec_retry(rs, JOBS_SQL, err);
    if (st == MR_OK)
        st = mr__runstore_prepare(rs,
                                  "SELECT json_group_array(json_object('stage', stage, 'attempt', attempt, 'job_id', job_id,"
                                  " 'state', state, 'exit_code', exit_code, 'exit_signal', exit_signal, 'nodes', nodes,"
                                  " 'elapsed_s', elapsed_s, 'max_rss_kb', max_rss_kb, 'mem_mb', mem_mb))"
                                  " FROM (SELECT * FROM stage_jobs WHERE run_id = ?1 ORDER BY rowid)",
                                  &s, err);
    if (st == MR_OK) {
        sqlite3_bind_int64(s, 1, run_id);
        if (sqlite3_step(s) != SQLITE_ROW) st = mr__runstore_fail(rs, err, "reading Slurm jobs");
        else if (mr_buf_puts(out, (const char *)sqlite3_column_text(s, 0)) != MR_OK) st = mr__runstore_nomem(err);
    }
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_run_set_status(mr_runstore *rs, int64_t run_id, const char *status, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_status st = mr__runstore_prepare(rs, "UPDATE runs SET status = ?2 WHERE id = ?1", &s, err);
    if (st == MR_OK) {
        sqlite3_bind_int64(s, 1, run_id);
        mr__runstore_bind_str(s, 2, status);
        st = mr__runstore_step_done(rs, s, "updating a run", err);
        if (st == MR_OK && sqlite3_changes(rs->db) == 0) st = MR_ERR(err, MR_E_NOT_FOUND, "%s: no run %lld", rs->path, (long long)run_id);
    }
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_runs_with_status(mr_runstore *rs, const char *status, int64_t **ids, size_t *n, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    *ids = NULL;
    *n = 0;
    size_t cap = 0;
    mr_status st = mr__runstore_prepare(rs, "SELECT id FROM runs WHERE status = ?1 ORDER BY id", &s, err);
    int rc = SQLITE_DONE;
    if (st == MR_OK) mr__runstore_bind_str(s, 1, status);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)ids, *n, &cap, sizeof(**ids), err);
        if (st == MR_OK) (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading runs");
    sqlite3_finalize(s);
    if (st != MR_OK) {
        mr_free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}

/* ---- gc: kept artifacts and cache pruning -------------------------------- */

/* Pushes every string value found in v (recursively) onto sv. */
static mr_status collect_strings(json_t *v, mr__strvec *sv)
{
    mr_status st = MR_OK;
    if (json_is_string(v)) {
        st = mr__strvec_push(sv, json_string_value(v));
    } else if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach(v, k, c)
        {
            st = collect_strings(c, sv);
            if (st != MR_OK) break;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c)
        {
            st = collect_strings(c, sv);
            if (st != MR_OK) break;
        }
    }
    return st;
}

mr_status mr_runstore_kept_artifacts(mr_runstore *rs, int keep_runs, char ***ids_out, size_t *n_out, mr_error *err)
{
    static const char *const sql[3] = {
        "SELECT outputs_json FROM stage_runs WHERE outputs_json IS NOT NULL"
        " AND run_id IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?1)",
        "SELECT artifact FROM lineage WHERE role = 'out'"
        " AND run_id IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?1)",
        "SELECT artifact FROM model_versions WHERE ?1 = ?1", /* registered bundles, whatever their age */
    };
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    mr__strvec sv = {0};
    int rc = SQLITE_DONE;
    *ids_out = NULL;
    *n_out = 0;
    for (int q = 0; q < 3 && st == MR_OK; q++) {
        st = mr__runstore_prepare(rs, sql[q], &s, err);
        if (st != MR_OK) goto done;
        sqlite3_bind_int64(s, 1, keep_runs < 0 ? -1 : keep_runs);
        while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(s, 0);
            if (!t) continue;
            if (q >= 1) {
                st = mr__strvec_push(&sv, t);
            } else {
                /* out of memory is not "no outputs": gc would delete what
                 * a kept run references */
                json_t *v = NULL;
                st = mr_json_parse(t, strlen(t), JSON_DECODE_ANY, &v, "run outputs", NULL);
                st = st == MR_E_NOMEM ? st : collect_strings(v, &sv); /* not JSON: no outputs */
                json_decref(v);
            }
        }
        if (st != MR_OK) {
            st = mr__runstore_nomem(err);
            goto done;
        }
        if (rc != SQLITE_DONE) {
            st = mr__runstore_fail(rs, err, "reading artifacts");
            goto done;
        }
        sqlite3_finalize(s);
        s = NULL;
    }
    mr__strvec_uniq(&sv);
    *ids_out = sv.v;
    *n_out = sv.n;
    memset(&sv, 0, sizeof(sv));
done:
    sqlite3_finalize(s);
    mr__strvec_free(&sv);
    return st;
}

static int cmp_doomed_id(const void *x, const void *y)
{
    const mr_artifact *a = x, *b = y;
    if (a->hash.hi != b->hash.hi) return a->hash.hi < b->hash.hi ? -1 : 1;
    if (a->hash.lo != b->hash.lo) return a->hash.lo < b->hash.lo ? -1 : 1;
    return a->is_dir - b->is_dir;
}

/* Whether every output id of a cache entry is present in the store and
 * none is about to go (doomed: sorted by cmp_doomed_id, may be NULL); -1
 * when out of memory (the entry must not be pruned for that). */
static int outputs_present(mr_store *store, const mr_artifact *doomed, size_t n_doomed, const char *outputs_json)
{
    int ok = 0;
    json_t *v = NULL;
    const char *k;
    json_t *id;
    mr_artifact a;
    if (outputs_json && mr_json_parse(outputs_json, strlen(outputs_json), 0, &v, "run outputs", NULL) == MR_E_NOMEM)
        return -1;
    if (!json_is_object(v)) goto done;
    json_object_foreach(v, k, id)
    {
        if (!json_is_string(id) || mr_artifact_parse(json_string_value(id), &a) != MR_OK || !mr_store_has(store, &a))
            goto done;
        if (doomed && bsearch(&a, doomed, n_doomed, sizeof(a), cmp_doomed_id)) goto done;
    }
    ok = 1;
done:
    json_decref(v);
    return ok;
}

mr_status mr_runstore_cache_prune(mr_runstore *rs, mr_store *store, const mr_artifact *doomed, size_t n_doomed,
                                  int *n_pruned, mr_error *err)
{
    mr_artifact *sorted = NULL;
    if (n_doomed) {
        sorted = mr_malloc(n_doomed * sizeof(*sorted));
        if (!sorted) return mr__runstore_nomem(err);
        for (size_t i = 0; i < n_doomed; i++) {
            sorted[i] = doomed[i];
            sorted[i].size = sorted[i].n_files = 0;
        }
        qsort(sorted, n_doomed, sizeof(*sorted), cmp_doomed_id);
    }
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    mr__strvec drop = {0};
    int rc, n = 0;
    st = mr__runstore_prepare(rs, "SELECT key, outputs_json FROM stage_cache", &s, err);
    if (st != MR_OK) goto done;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(s, 0);
        int present = key ? outputs_present(store, sorted, n_doomed, (const char *)sqlite3_column_text(s, 1)) : 1;
        if (present > 0) continue;
        if (present < 0 || mr__strvec_push(&drop, key) != MR_OK) {
            st = mr__runstore_nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) {
        st = mr__runstore_fail(rs, err, "reading the stage cache");
        goto done;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (drop.n == 0) goto done;
    st = mr__runstore_prepare(rs, "DELETE FROM stage_cache WHERE key = ?1", &s, err);
    if (st == MR_OK) st = mr__runstore_tx_begin(rs, err);
    for (size_t i = 0; i < drop.n && st == MR_OK; i++) {
        sqlite3_reset(s);
        mr__runstore_bind_str(s, 1, drop.v[i]);
        st = mr__runstore_step_done(rs, s, "pruning the stage cache", err);
        if (st == MR_OK) n += sqlite3_changes(rs->db);
    }
    if (s) sqlite3_reset(s);
    if (st == MR_OK) st = mr__runstore_tx_commit(rs, err);
done:
    sqlite3_finalize(s);
    if (st != MR_OK) {
        mr__runstore_tx_rollback(rs);
        n = 0;
    }
    mr__strvec_free(&drop);
    mr_free(sorted);
    if (n_pruned) *n_pruned = n;
    return st;
}
