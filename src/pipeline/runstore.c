/* The run store's ground floor: opening .millrace/runs.db (creating the
 * schema or migrating an older one), the nesting transactions and small
 * SQLite helpers the other runstore files share, reaping runs whose process
 * died, and resolving run references. Recording lives in runstore_write.c,
 * the read views in runstore_read.c. Every SQLite failure becomes MR_E_IO
 * naming the database; all values go through parameter binding. */
#include "runstore_int.h"

#include "millrace/spec.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA_VERSION 3
#define BUSY_TIMEOUT_MS 30000 /* two `millrace run` may queue behind each other's commits */
#define OPEN_RETRIES 200      /* x 10 ms: SQLITE_BUSY the busy handler does not cover */

/* Version 3's additions: the model registry (registry.c) — versions of
 * named models, each a bundle file in the artifact store, and the aliases
 * that name them — and an index that reads one curve, or each metric's last
 * point, in step order without sorting (the run browser). */
#define REGISTRY_SQL                                                                                        \
    "CREATE TABLE IF NOT EXISTS model_versions("                                                          \
    " name TEXT NOT NULL, version INTEGER NOT NULL, artifact TEXT NOT NULL, bundle_version TEXT NOT NULL," \
    " bundle_name TEXT, created REAL NOT NULL, run_id INTEGER, stage TEXT, source TEXT,"                  \
    " PRIMARY KEY(name, version));"                                                                       \
    "CREATE TABLE IF NOT EXISTS model_aliases("                                                           \
    " name TEXT NOT NULL, alias TEXT NOT NULL, version INTEGER NOT NULL, updated REAL NOT NULL,"          \
    " PRIMARY KEY(name, alias));"                                                                         \
    "CREATE INDEX IF NOT EXISTS metrics_curve ON metrics(run_id, stage, name, step);"

/* Schema version 3. REAL times are seconds since the epoch; sizes and inode
 * numbers are stored as the int64 bit pattern of their uint64 value. */
static const char SCHEMA_SQL[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value);"
    "CREATE TABLE IF NOT EXISTS runs("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, ended REAL,"
    " status TEXT NOT NULL, argv TEXT, cwd TEXT, git_commit TEXT, git_dirty INTEGER NOT NULL DEFAULT 0,"
    " params_json TEXT, overrides TEXT, smoke INTEGER NOT NULL DEFAULT 0, pid INTEGER, pid_start INTEGER,"
    " n_executed INTEGER NOT NULL DEFAULT 0, n_cached INTEGER NOT NULL DEFAULT 0,"
    " n_failed INTEGER NOT NULL DEFAULT 0, n_skipped INTEGER NOT NULL DEFAULT 0, name TEXT);"
    "CREATE TABLE IF NOT EXISTS run_tags("
    " run_id INTEGER NOT NULL, key TEXT NOT NULL, value TEXT, PRIMARY KEY(run_id, key));"
    "CREATE TABLE IF NOT EXISTS stage_runs("
    " id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, stage TEXT NOT NULL, op TEXT, key TEXT,"
    " status TEXT NOT NULL, started REAL, wall_s REAL, user_s REAL, sys_s REAL, max_rss_kb INTEGER,"
    " bytes_read INTEGER, bytes_written INTEGER, error TEXT, outputs_json TEXT);"
    "CREATE TABLE IF NOT EXISTS metrics("
    " run_id INTEGER NOT NULL, stage TEXT NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL, value REAL);"
    "CREATE TABLE IF NOT EXISTS lineage("
    " run_id INTEGER NOT NULL, stage TEXT NOT NULL, role TEXT NOT NULL, name TEXT, artifact TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS stage_cache("
    " key TEXT PRIMARY KEY, stage TEXT NOT NULL, op TEXT, key_doc TEXT, outputs_json TEXT,"
    " metrics_json TEXT, created REAL NOT NULL, run_id INTEGER);"
    "CREATE TABLE IF NOT EXISTS stat_cache("
    " path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ino INTEGER NOT NULL,"
    " hash TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS stage_runs_run ON stage_runs(run_id);"
    "CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run_id);"
    "CREATE INDEX IF NOT EXISTS lineage_run ON lineage(run_id);"
    "CREATE INDEX IF NOT EXISTS stage_cache_stage ON stage_cache(stage, created);"
    "CREATE INDEX IF NOT EXISTS runs_name ON runs(name);"
    REGISTRY_SQL;

/* Version 1 -> 2: run names (a column) and tags (a table). Additive: every
 * row stays as it was, and runs recorded before have no name and no tags. */
static const char MIGRATE_1_2_SQL[] =
    "ALTER TABLE runs ADD COLUMN name TEXT;"
    "CREATE TABLE IF NOT EXISTS run_tags("
    " run_id INTEGER NOT NULL, key TEXT NOT NULL, value TEXT, PRIMARY KEY(run_id, key));"
    "CREATE INDEX IF NOT EXISTS runs_name ON runs(name);"
    "UPDATE meta SET value = 2 WHERE key = 'schema_version';";

/* Version 2 -> 3: the model registry's two tables. Additive. */
static const char MIGRATE_2_3_SQL[] = REGISTRY_SQL "UPDATE meta SET value = 3 WHERE key = 'schema_version';";

/* ---- small helpers shared by the runstore files --------------------------- */

mr_status mr__runstore_fail(mr_runstore *rs, mr_error *err, const char *what)
{
    return MR_ERR(err, MR_E_IO, "%s: %s: %s", rs->path, what, rs->db ? sqlite3_errmsg(rs->db) : "no database");
}

mr_status mr__runstore_nomem(mr_error *err) { return MR_ERR(err, MR_E_NOMEM, "out of memory"); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

mr_status mr__runstore_exec(mr_runstore *rs, const char *sql, mr_error *err)
{
    mr_status st = MR_OK;
    if (sqlite3_exec(rs->db, sql, NULL, NULL, NULL) != SQLITE_OK) st = mr__runstore_fail(rs, err, sql);
    return st;
}

/* sqlite3_exec, retrying SQLITE_BUSY that returns without the busy handler
 * (journal-mode changes and lock upgrades while a new file is created). */
mr_status mr__runstore_exec_retry(mr_runstore *rs, const char *sql, mr_error *err)
{
    mr_status st = MR_OK;
    int rc = SQLITE_OK;
    for (int attempt = 0; attempt < OPEN_RETRIES; attempt++) {
        rc = sqlite3_exec(rs->db, sql, NULL, NULL, NULL);
        if (!is_busy(rc)) break;
        sleep_ms(10);
    }
    if (rc != SQLITE_OK) st = mr__runstore_fail(rs, err, sql);
    return st;
}

/* Transactions nest: a caller may batch many writes (mr_runstore_batch_*)
 * around functions that open their own transaction. */
mr_status mr__runstore_tx_begin(mr_runstore *rs, mr_error *err)
{
    if (rs->tx_depth++ > 0) return MR_OK;
    rs->tx_failed = 0;
    mr_status st = mr__runstore_exec(rs, "BEGIN IMMEDIATE", err);
    if (st != MR_OK) rs->tx_depth = 0;
    return st;
}

mr_status mr__runstore_tx_commit(mr_runstore *rs, mr_error *err)
{
    if (rs->tx_depth == 0) return MR_OK;
    if (--rs->tx_depth > 0) return MR_OK;
    if (rs->tx_failed) {
        sqlite3_exec(rs->db, "ROLLBACK", NULL, NULL, NULL);
        return MR_ERR(err, MR_E_IO, "%s: a batched write failed; the batch was rolled back", rs->path);
    }
    return mr__runstore_exec(rs, "COMMIT", err);
}

void mr__runstore_tx_rollback(mr_runstore *rs)
{
    if (rs->tx_depth > 1) {
        rs->tx_depth--;
        rs->tx_failed = 1;
        return;
    }
    rs->tx_depth = 0;
    if (!sqlite3_get_autocommit(rs->db)) sqlite3_exec(rs->db, "ROLLBACK", NULL, NULL, NULL);
}

mr_status mr_runstore_batch_begin(mr_runstore *rs, mr_error *err) { return mr__runstore_tx_begin(rs, err); }
mr_status mr_runstore_batch_end(mr_runstore *rs, mr_error *err) { return mr__runstore_tx_commit(rs, err); }

mr_status mr__runstore_prepare(mr_runstore *rs, const char *sql, sqlite3_stmt **out, mr_error *err)
{
    mr_status st = MR_OK;
    *out = NULL;
    if (sqlite3_prepare_v2(rs->db, sql, -1, out, NULL) != SQLITE_OK) st = mr__runstore_fail(rs, err, "prepare");
    return st;
}

void mr__runstore_bind_str(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

mr_status mr__runstore_step_done(mr_runstore *rs, sqlite3_stmt *s, const char *what, mr_error *err)
{
    mr_status st = MR_OK;
    if (sqlite3_step(s) != SQLITE_DONE) st = mr__runstore_fail(rs, err, what);
    return st;
}

mr_status mr__runstore_col_dup(sqlite3_stmt *s, int i, char **out, mr_error *err)
{
    mr_status st = MR_OK;
    const char *v = (const char *)sqlite3_column_text(s, i);
    *out = NULL;
    if (v) {
        *out = mr_strdup(v);
        if (!*out) st = mr__runstore_nomem(err);
    }
    return st;
}

void mr__strvec_free(mr__strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++) mr_free(sv->v[i]);
    mr_free(sv->v);
    memset(sv, 0, sizeof(*sv));
}

mr_status mr__strvec_push(mr__strvec *sv, const char *s)
{
    mr_status st = MR_OK;
    char *c = NULL;
    if (sv->n == sv->cap) {
        size_t ncap = sv->cap ? sv->cap * 2 : 16;
        char **nv = mr_realloc(sv->v, ncap * sizeof(*nv));
        if (!nv) {
            st = MR_E_NOMEM;
            goto done;
        }
        sv->v = nv;
        sv->cap = ncap;
    }
    c = mr_strdup(s);
    if (!c) {
        st = MR_E_NOMEM;
        goto done;
    }
    sv->v[sv->n++] = c;
done:
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void mr__strvec_uniq(mr__strvec *sv)
{
    size_t w = 0;
    if (sv->n) qsort(sv->v, sv->n, sizeof(*sv->v), cmp_str);
    for (size_t i = 0; i < sv->n; i++) {
        if (w && !strcmp(sv->v[w - 1], sv->v[i]))
            mr_free(sv->v[i]);
        else
            sv->v[w++] = sv->v[i];
    }
    sv->n = w;
}

int mr__runstore_parse_pos(const char *s, int64_t *out)
{
    int ok = 0;
    char *end = NULL;
    if (*s >= '0' && *s <= '9') {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno == 0 && *end == '\0' && v > 0) {
            *out = (int64_t)v;
            ok = 1;
        }
    }
    return ok;
}

/* Field 22 of /proc/<pid>/stat (process start time in clock ticks since
 * boot), or -1 where it cannot be read. Together with the pid it names one
 * process across pid reuse. */
int64_t mr__runstore_proc_starttime(long pid)
{
    int64_t v = -1;
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) goto done;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (!p) goto done;
    p++;
    for (int field = 2; field < 21 && p; field++) p = strchr(p + 1, ' ');
    if (!p) goto done;
    char *end = NULL;
    errno = 0;
    long long t = strtoll(p + 1, &end, 10);
    if (errno == 0 && end != p + 1) v = (int64_t)t;
done:
    return v;
}

mr_status mr__runstore_parse_json(const char *text, mr_value **out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_value *v = NULL;
    mr_error e;
    mr_error_init(&e);
    *out = NULL;
    /* Canonical JSON is a YAML flow document: the value tree keeps each
     * scalar's text, so "0.1" reads back as written. */
    if (text && text[0]) st = mr_yaml_parse(text, strlen(text), "runs.db", &v, &e);
    if (st == MR_E_NOMEM) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    if (st != MR_OK || !v || (v->kind != MR_V_MAP && v->kind != MR_V_SEQ)) {
        mr_value_free(v);
        v = mr_value_new(MR_V_MAP);
        st = v ? MR_OK : mr__runstore_nomem(err);
    }
    *out = v;
done:
    return st;
}

/* ---- open / close --------------------------------------------------------- */

/* Reads meta.schema_version into *ver (0 when the schema is absent). */
static mr_status schema_version(mr_runstore *rs, int64_t *ver, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    *ver = 0;
    st = mr__runstore_prepare(rs, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'", &s, err);
    if (st != MR_OK) goto done;
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st = mr__runstore_fail(rs, err, "reading the schema");
        goto done;
    }
    if (sqlite3_column_int(s, 0) == 0) goto done;
    sqlite3_finalize(s);
    s = NULL;
    st = mr__runstore_prepare(rs, "SELECT value FROM meta WHERE key = 'schema_version'", &s, err);
    if (st != MR_OK) goto done;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *ver = sqlite3_column_int64(s, 0);
    else if (rc != SQLITE_DONE)
        st = mr__runstore_fail(rs, err, "reading the schema version");
done:
    sqlite3_finalize(s);
    return st;
}

static mr_status check_version(mr_runstore *rs, int64_t ver, mr_error *err)
{
    mr_status st = MR_OK;
    if (ver > SCHEMA_VERSION) {
        st = MR_ERR(err, MR_E_SCHEMA, "%s: run store schema version %lld is newer than this millrace supports (%d)",
                    rs->path, (long long)ver, SCHEMA_VERSION);
        mr_error_hint(err, "upgrade millrace, or move the run store aside to start a new one");
    } else if (ver < 0) {
        st = MR_ERR(err, MR_E_CORRUPT, "%s: invalid run store schema version %lld", rs->path, (long long)ver);
    }
    return st;
}

/* Creates or migrates the schema inside BEGIN IMMEDIATE, so that of two
 * processes opening a new (or old) store at once one does the work and the
 * other finds it done. */
static mr_status upgrade_schema(mr_runstore *rs, mr_error *err)
{
    mr_status st = MR_OK;
    int64_t ver = 0;
    st = mr__runstore_exec_retry(rs, "BEGIN IMMEDIATE", err);
    if (st != MR_OK) goto done;
    st = schema_version(rs, &ver, err);
    if (st != MR_OK) goto done;
    if (ver == 0) {
        st = mr__runstore_exec(rs, SCHEMA_SQL, err);
        if (st == MR_OK)
            st = mr__runstore_exec(rs, "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', 3)", err);
    } else if (ver == 1 || ver == 2) {
        if (ver == 1) st = mr__runstore_exec(rs, MIGRATE_1_2_SQL, err);
        if (st == MR_OK) st = mr__runstore_exec(rs, MIGRATE_2_3_SQL, err);
    } else {
        st = check_version(rs, ver, err);
    }
done:
    if (st == MR_OK) st = mr__runstore_exec_retry(rs, "COMMIT", err);
    if (st != MR_OK) mr__runstore_tx_rollback(rs);
    return st;
}

mr_status mr_runstore_open(const char *db_path, mr_runstore **out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_runstore *rs = NULL;
    int64_t ver = 0;
    *out = NULL;
    rs = mr_calloc(1, sizeof(*rs));
    if (!rs) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    rs->path = mr_strdup(db_path);
    if (!rs->path) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    if (sqlite3_open_v2(db_path, &rs->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        st = mr__runstore_fail(rs, err, "cannot open run store");
        goto done;
    }
    sqlite3_busy_timeout(rs->db, BUSY_TIMEOUT_MS);
    /* Fast path: an existing store is already in WAL mode, so this pragma
     * only reads the header; the schema check is one indexed lookup. */
    st = mr__runstore_exec_retry(rs, "PRAGMA journal_mode=WAL", err);
    if (st != MR_OK) goto done;
    st = mr__runstore_exec(rs, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF", err);
    if (st != MR_OK) goto done;
    st = schema_version(rs, &ver, err);
    if (st != MR_OK) goto done;
    if (ver < SCHEMA_VERSION && ver >= 0)
        st = upgrade_schema(rs, err);
    else
        st = check_version(rs, ver, err);
done:
    if (st != MR_OK) {
        mr_runstore_close(rs);
        rs = NULL;
    }
    *out = rs;
    return st;
}

void mr_runstore_close(mr_runstore *rs)
{
    if (!rs) return;
    for (int i = 0; i < MR__RS_N_STMTS; i++) sqlite3_finalize(rs->stmts[i]);
    sqlite3_close(rs->db);
    mr_free(rs->path);
    mr_free(rs);
}

/* ---- reaping -------------------------------------------------------------- */

int mr__runstore_process_gone(sqlite3_stmt *s, int col)
{
    int gone = 0;
    if (sqlite3_column_type(s, col) == SQLITE_NULL) {
        gone = 1;
        goto done;
    }
    pid_t pid = (pid_t)sqlite3_column_int64(s, col);
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) {
        gone = 1;
        goto done;
    }
    if (sqlite3_column_type(s, col + 1) != SQLITE_NULL) {
        int64_t now = mr__runstore_proc_starttime((long)pid);
        if (now >= 0 && now != sqlite3_column_int64(s, col + 1)) gone = 1;
    }
done:
    return gone;
}

mr_status mr_runstore_reap(mr_runstore *rs, int *n_reaped, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL, *u = NULL;
    int64_t *dead = NULL;
    size_t n_dead = 0, cap = 0;
    int rc, n = 0;
    st = mr__runstore_prepare(rs, "SELECT id, pid, pid_start FROM runs WHERE status = 'running'", &s, err);
    if (st != MR_OK) goto done;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (!mr__runstore_process_gone(s, 1)) continue;
        if (n_dead == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            int64_t *nd = mr_realloc(dead, ncap * sizeof(*nd));
            if (!nd) {
                st = mr__runstore_nomem(err);
                goto done;
            }
            dead = nd;
            cap = ncap;
        }
        dead[n_dead++] = sqlite3_column_int64(s, 0);
    }
    if (rc != SQLITE_DONE) {
        st = mr__runstore_fail(rs, err, "reading runs");
        goto done;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (n_dead == 0) goto done;
    st = mr__runstore_prepare(rs,
                              "UPDATE runs SET status = 'killed', ended = COALESCE(ended, ?2)"
                              " WHERE id = ?1 AND status = 'running'",
                              &u, err);
    if (st != MR_OK) goto done;
    for (size_t i = 0; i < n_dead && st == MR_OK; i++) {
        sqlite3_reset(u);
        sqlite3_bind_int64(u, 1, dead[i]);
        sqlite3_bind_double(u, 2, mr_wall_time());
        st = mr__runstore_step_done(rs, u, "marking a run killed", err);
        if (st == MR_OK) n += sqlite3_changes(rs->db);
    }
done:
    sqlite3_finalize(s);
    sqlite3_finalize(u);
    mr_free(dead);
    if (n_reaped) *n_reaped = n;
    return st;
}

/* ---- run references ------------------------------------------------------- */

/* Runs a query with one optional parameter (an integer, or text when
 * text_arg is set) that yields at most one integer; *found says whether it did. */
static mr_status query_id(mr_runstore *rs, const char *sql, int64_t arg, const char *text_arg, int64_t *out,
                          int *found, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    *found = 0;
    st = mr__runstore_prepare(rs, sql, &s, err);
    if (st != MR_OK) goto done;
    if (sqlite3_bind_parameter_count(s) > 0) {
        if (text_arg)
            mr__runstore_bind_str(s, 1, text_arg);
        else
            sqlite3_bind_int64(s, 1, arg);
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
        *out = sqlite3_column_int64(s, 0);
        *found = 1;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = mr__runstore_fail(rs, err, "reading runs");
    }
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_resolve_run(mr_runstore *rs, const char *run_ref, int64_t *run_id, mr_error *err)
{
    mr_status st = MR_OK;
    int64_t n = 0, id = 0, newest = 0;
    int found = 0, have_newest = 0;
    st = mr_runstore_reap(rs, NULL, err);
    if (st != MR_OK) goto done;
    if (!strcmp(run_ref, "latest") || !strcmp(run_ref, "last"))
        st = query_id(rs, "SELECT id FROM runs ORDER BY id DESC LIMIT 1", 0, NULL, &id, &found, err);
    else if (run_ref[0] == '-' && mr__runstore_parse_pos(run_ref + 1, &n))
        st = query_id(rs, "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1", n - 1, NULL, &id, &found, err);
    else if (mr__runstore_parse_pos(run_ref, &n))
        st = query_id(rs, "SELECT id FROM runs WHERE id = ?1", n, NULL, &id, &found, err);
    else if (run_ref[0])
        st = query_id(rs, "SELECT max(id) FROM runs WHERE name = ?1", 0, run_ref, &id, &found, err);
    if (st != MR_OK || found) goto done;
    st = query_id(rs, "SELECT max(id) FROM runs", 0, NULL, &newest, &have_newest, err);
    if (st != MR_OK) goto done;
    st = MR_ERR(err, MR_E_NOT_FOUND, "no run '%s'", run_ref);
    if (have_newest && newest > 0)
        mr_error_hint(err, "the newest run is %lld; use an id, a run name, 'latest' or '-N'", (long long)newest);
    else
        mr_error_hint(err, "no runs are recorded yet");
done:
    if (st == MR_OK) *run_id = id;
    return st;
}
