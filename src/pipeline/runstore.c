/* The run store: runs, stage runs, metrics, lineage, the stage cache and the
 * stat cache in one SQLite database (WAL, busy timeout), plus the JSON views
 * behind `millrace runs/show/compare`. It does not execute anything: the
 * executor records here, the CLI reads. All values go through parameter
 * binding; every SQLite failure becomes MR_E_IO naming the database. */
#include "millrace/runstore.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA_VERSION 1
#define BUSY_TIMEOUT_MS 30000 /* two `millrace run` may queue behind each other's commits */
#define OPEN_RETRIES 200      /* x 10 ms: SQLITE_BUSY the busy handler does not cover */
#define JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* Schema version 1. REAL times are seconds since the epoch; sizes and inode
 * numbers are stored as the int64 bit pattern of their uint64 value. */
static const char SCHEMA_SQL[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value);"
    "CREATE TABLE IF NOT EXISTS runs("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, ended REAL,"
    " status TEXT NOT NULL, argv TEXT, cwd TEXT, git_commit TEXT, git_dirty INTEGER NOT NULL DEFAULT 0,"
    " params_json TEXT, overrides TEXT, smoke INTEGER NOT NULL DEFAULT 0, pid INTEGER, pid_start INTEGER,"
    " n_executed INTEGER NOT NULL DEFAULT 0, n_cached INTEGER NOT NULL DEFAULT 0,"
    " n_failed INTEGER NOT NULL DEFAULT 0, n_skipped INTEGER NOT NULL DEFAULT 0);"
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
    "CREATE INDEX IF NOT EXISTS stage_cache_stage ON stage_cache(stage, created);";

/* The hot statements, prepared on first use and kept until close. */
enum {
    S_RUN_BEGIN,
    S_RUN_END,
    S_STAGE,
    S_METRIC,
    S_LINEAGE,
    S_CACHE_GET,
    S_CACHE_PUT,
    S_COUNT
};
static const char *const STMT_SQL[S_COUNT] = {
    [S_RUN_BEGIN] = "INSERT INTO runs(started, status, argv, cwd, git_commit, git_dirty, params_json, overrides,"
                    " smoke, pid, pid_start) VALUES(?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [S_RUN_END] = "UPDATE runs SET ended = ?2, status = ?3, n_executed = ?4, n_cached = ?5, n_failed = ?6,"
                  " n_skipped = ?7 WHERE id = ?1",
    [S_STAGE] = "INSERT INTO stage_runs(run_id, stage, op, key, status, started, wall_s, user_s, sys_s,"
                " max_rss_kb, bytes_read, bytes_written, error, outputs_json)"
                " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [S_METRIC] = "INSERT INTO metrics(run_id, stage, name, step, value) VALUES(?1, ?2, ?3, ?4, ?5)",
    [S_LINEAGE] = "INSERT INTO lineage(run_id, stage, role, name, artifact) VALUES(?1, ?2, ?3, ?4, ?5)",
    [S_CACHE_GET] = "SELECT outputs_json, metrics_json, key_doc FROM stage_cache WHERE key = ?1",
    [S_CACHE_PUT] = "INSERT OR REPLACE INTO stage_cache(key, stage, op, key_doc, outputs_json, metrics_json,"
                    " created, run_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
};

/* Columns read by run_obj(), in this order. */
#define RUN_COLS                                                                                          \
    "id, started, ended, status, argv, git_commit, git_dirty, smoke, overrides, n_executed, n_cached, " \
    "n_failed, n_skipped, cwd, params_json"

struct mr_runstore {
    sqlite3 *db;
    char *path;                     /* for error messages */
    sqlite3_stmt *stmts[S_COUNT];   /* lazily prepared, see STMT_SQL */
    int tx_depth;                   /* nesting of tx_begin; only the outermost talks to SQLite */
    int tx_failed;                  /* an inner level failed: the outermost rolls back */
};

/* Growable vector of owned strings. */
typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

/* ---- small helpers ----------------------------------------------------- */

static mr_status db_fail(mr_runstore *rs, mr_error *err, const char *what)
{
    return MR_ERR(err, MR_E_IO, "%s: %s: %s", rs->path, what, rs->db ? sqlite3_errmsg(rs->db) : "no database");
}

static mr_status nomem(mr_error *err) { return MR_ERR(err, MR_E_NOMEM, "out of memory"); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

static mr_status exec_sql(mr_runstore *rs, const char *sql, mr_error *err)
{
    mr_status st = MR_OK;
    if (sqlite3_exec(rs->db, sql, NULL, NULL, NULL) != SQLITE_OK) st = db_fail(rs, err, sql);
    return st;
}

/* sqlite3_exec, retrying SQLITE_BUSY that returns without the busy handler
 * (journal-mode changes and lock upgrades while a new file is created). */
static mr_status exec_retry(mr_runstore *rs, const char *sql, mr_error *err)
{
    mr_status st = MR_OK;
    int rc = SQLITE_OK;
    for (int attempt = 0; attempt < OPEN_RETRIES; attempt++) {
        rc = sqlite3_exec(rs->db, sql, NULL, NULL, NULL);
        if (!is_busy(rc)) break;
        sleep_ms(10);
    }
    if (rc != SQLITE_OK) st = db_fail(rs, err, sql);
    return st;
}

/* Transactions nest: a caller may batch many writes (mr_runstore_batch_*)
 * around functions that open their own transaction. */
static mr_status tx_begin(mr_runstore *rs, mr_error *err)
{
    if (rs->tx_depth++ > 0) return MR_OK;
    rs->tx_failed = 0;
    mr_status st = exec_sql(rs, "BEGIN IMMEDIATE", err);
    if (st != MR_OK) rs->tx_depth = 0;
    return st;
}

static mr_status tx_commit(mr_runstore *rs, mr_error *err)
{
    if (rs->tx_depth == 0) return MR_OK;
    if (--rs->tx_depth > 0) return MR_OK;
    if (rs->tx_failed) {
        sqlite3_exec(rs->db, "ROLLBACK", NULL, NULL, NULL);
        return MR_ERR(err, MR_E_IO, "%s: a batched write failed; the batch was rolled back", rs->path);
    }
    return exec_sql(rs, "COMMIT", err);
}

static void tx_rollback(mr_runstore *rs)
{
    if (rs->tx_depth > 1) {
        rs->tx_depth--;
        rs->tx_failed = 1;
        return;
    }
    rs->tx_depth = 0;
    if (!sqlite3_get_autocommit(rs->db)) sqlite3_exec(rs->db, "ROLLBACK", NULL, NULL, NULL);
}

mr_status mr_runstore_batch_begin(mr_runstore *rs, mr_error *err) { return tx_begin(rs, err); }
mr_status mr_runstore_batch_end(mr_runstore *rs, mr_error *err) { return tx_commit(rs, err); }

static mr_status prepare(mr_runstore *rs, const char *sql, sqlite3_stmt **out, mr_error *err)
{
    mr_status st = MR_OK;
    *out = NULL;
    if (sqlite3_prepare_v2(rs->db, sql, -1, out, NULL) != SQLITE_OK) st = db_fail(rs, err, "prepare");
    return st;
}

/* Returns the cached statement `which`, reset and with cleared bindings. */
static mr_status cached(mr_runstore *rs, int which, sqlite3_stmt **out, mr_error *err)
{
    mr_status st = MR_OK;
    if (!rs->stmts[which]) {
        if (sqlite3_prepare_v3(rs->db, STMT_SQL[which], -1, SQLITE_PREPARE_PERSISTENT, &rs->stmts[which], NULL) !=
            SQLITE_OK)
            st = db_fail(rs, err, "prepare");
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

/* Binds a string or SQL NULL; the string must outlive the step. */
static void bind_str(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static mr_status step_done(mr_runstore *rs, sqlite3_stmt *s, const char *what, mr_error *err)
{
    mr_status st = MR_OK;
    if (sqlite3_step(s) != SQLITE_DONE) st = db_fail(rs, err, what);
    return st;
}

/* Copies a text column into *out (NULL for SQL NULL). */
static mr_status col_dup(sqlite3_stmt *s, int i, char **out, mr_error *err)
{
    mr_status st = MR_OK;
    const char *v = (const char *)sqlite3_column_text(s, i);
    *out = NULL;
    if (v) {
        *out = mr_strdup(v);
        if (!*out) st = nomem(err);
    }
    return st;
}

static void strvec_free(strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++) mr_free(sv->v[i]);
    mr_free(sv->v);
    memset(sv, 0, sizeof(*sv));
}

static mr_status strvec_push(strvec *sv, const char *s)
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

/* Sorts and removes duplicates. */
static void strvec_uniq(strvec *sv)
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

/* Parses a positive decimal integer that fills all of s. */
static int parse_pos(const char *s, int64_t *out)
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
static int64_t proc_starttime(pid_t pid)
{
    int64_t v = -1;
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
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

/* ---- JSON helpers ------------------------------------------------------ */

/* A JSON string, or null for NULL; invalid UTF-8 bytes become '?'. */
static json_t *jstr(const char *s)
{
    json_t *v = NULL;
    if (!s) {
        v = json_null();
        goto done;
    }
    v = json_string(s);
    if (!v) {
        char *c = mr_strdup(s);
        if (!c) goto done;
        for (char *p = c; *p; p++)
            if ((unsigned char)*p >= 0x80) *p = '?';
        v = json_string(c);
        mr_free(c);
    }
done:
    return v;
}

static json_t *jcol_str(sqlite3_stmt *s, int i) { return jstr((const char *)sqlite3_column_text(s, i)); }

static json_t *jcol_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(s, i));
}

static json_t *jcol_int(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? json_null() : json_integer(sqlite3_column_int64(s, i));
}

static json_t *jcol_time(sqlite3_stmt *s, int i)
{
    char buf[32] = "";
    if (sqlite3_column_type(s, i) != SQLITE_NULL) mr_iso_time(sqlite3_column_double(s, i), buf, sizeof(buf));
    return buf[0] ? json_string(buf) : json_null();
}

/* Parses a JSON text column; null when absent or unparsable. */
static json_t *jcol_json(sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
    return v ? v : json_null();
}

/* json_object_set_new that reports failure (v NULL = allocation failed). */
static int jset(json_t *o, const char *k, json_t *v) { return json_object_set_new(o, k, v) ? 1 : 0; }

static mr_status json_emit(json_t *root, mr_buf *out, mr_error *err)
{
    mr_status st = MR_OK;
    char *s = json_dumps(root, JSON_FLAGS);
    if (!s) {
        st = nomem(err);
        goto done;
    }
    st = mr_buf_puts(out, s);
    if (st != MR_OK) st = MR_ERR(err, st, "%s", st == MR_E_NOMEM ? "out of memory" : "JSON output too large");
    free(s); /* allocated by jansson */
done:
    return st;
}

/* Builds the summary object of a run from a row of RUN_COLS. full adds cwd
 * and the params object. */
static json_t *run_obj(sqlite3_stmt *s, int full)
{
    int bad = 0;
    json_t *o = json_object();
    if (!o) goto done;
    bad |= jset(o, "id", json_integer(sqlite3_column_int64(s, 0)));
    bad |= jset(o, "started", jcol_time(s, 1));
    bad |= jset(o, "started_s", jcol_real(s, 1));
    bad |= jset(o, "ended", jcol_time(s, 2));
    if (sqlite3_column_type(s, 2) == SQLITE_NULL)
        bad |= jset(o, "duration_s", json_null());
    else
        bad |= jset(o, "duration_s", json_real(sqlite3_column_double(s, 2) - sqlite3_column_double(s, 1)));
    bad |= jset(o, "status", jcol_str(s, 3));
    bad |= jset(o, "argv", jcol_str(s, 4));
    bad |= jset(o, "git_commit", jcol_str(s, 5));
    bad |= jset(o, "git_dirty", json_boolean(sqlite3_column_int(s, 6)));
    bad |= jset(o, "smoke", json_boolean(sqlite3_column_int(s, 7)));
    bad |= jset(o, "overrides", jcol_str(s, 8));
    bad |= jset(o, "n_executed", json_integer(sqlite3_column_int64(s, 9)));
    bad |= jset(o, "n_cached", json_integer(sqlite3_column_int64(s, 10)));
    bad |= jset(o, "n_failed", json_integer(sqlite3_column_int64(s, 11)));
    bad |= jset(o, "n_skipped", json_integer(sqlite3_column_int64(s, 12)));
    if (full) {
        bad |= jset(o, "cwd", jcol_str(s, 13));
        bad |= jset(o, "params", jcol_json(s, 14));
    }
    if (bad) {
        json_decref(o);
        o = NULL;
    }
done:
    return o;
}

/* ---- open / close ------------------------------------------------------ */

/* Reads meta.schema_version into *ver (0 when the schema is absent). */
static mr_status schema_version(mr_runstore *rs, int64_t *ver, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    *ver = 0;
    st = prepare(rs, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'", &s, err);
    if (st != MR_OK) goto done;
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st = db_fail(rs, err, "reading the schema");
        goto done;
    }
    if (sqlite3_column_int(s, 0) == 0) goto done;
    sqlite3_finalize(s);
    s = NULL;
    st = prepare(rs, "SELECT value FROM meta WHERE key = 'schema_version'", &s, err);
    if (st != MR_OK) goto done;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *ver = sqlite3_column_int64(s, 0);
    else if (rc != SQLITE_DONE)
        st = db_fail(rs, err, "reading the schema version");
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

/* Creates the schema inside BEGIN IMMEDIATE, so that of two processes
 * opening a new store at once one creates it and the other finds it done. */
static mr_status create_schema(mr_runstore *rs, mr_error *err)
{
    mr_status st = MR_OK;
    int64_t ver = 0;
    st = exec_retry(rs, "BEGIN IMMEDIATE", err);
    if (st != MR_OK) goto done;
    st = schema_version(rs, &ver, err);
    if (st != MR_OK) goto done;
    if (ver != 0) {
        st = check_version(rs, ver, err);
        goto done;
    }
    st = exec_sql(rs, SCHEMA_SQL, err);
    if (st != MR_OK) goto done;
    st = exec_sql(rs, "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', 1)", err);
done:
    if (st == MR_OK) st = exec_retry(rs, "COMMIT", err);
    if (st != MR_OK) tx_rollback(rs);
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
        st = nomem(err);
        goto done;
    }
    rs->path = mr_strdup(db_path);
    if (!rs->path) {
        st = nomem(err);
        goto done;
    }
    if (sqlite3_open_v2(db_path, &rs->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        st = db_fail(rs, err, "cannot open run store");
        goto done;
    }
    sqlite3_busy_timeout(rs->db, BUSY_TIMEOUT_MS);
    /* Fast path: an existing store is already in WAL mode, so this pragma
     * only reads the header; the schema check is one indexed lookup. */
    st = exec_retry(rs, "PRAGMA journal_mode=WAL", err);
    if (st != MR_OK) goto done;
    st = exec_sql(rs, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF", err);
    if (st != MR_OK) goto done;
    st = schema_version(rs, &ver, err);
    if (st != MR_OK) goto done;
    if (ver == 0)
        st = create_schema(rs, err);
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
    for (int i = 0; i < S_COUNT; i++) sqlite3_finalize(rs->stmts[i]);
    sqlite3_close(rs->db);
    mr_free(rs->path);
    mr_free(rs);
}

/* ---- recording --------------------------------------------------------- */

mr_status mr_runstore_run_begin(mr_runstore *rs, const mr_run_begin *info, int64_t *run_id_out, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    pid_t pid = getpid();
    int64_t pid_start = proc_starttime(pid);
    st = cached(rs, S_RUN_BEGIN, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_double(s, 1, mr_wall_time());
    bind_str(s, 2, info->argv);
    bind_str(s, 3, info->cwd);
    bind_str(s, 4, info->git_commit);
    sqlite3_bind_int(s, 5, info->git_dirty ? 1 : 0);
    bind_str(s, 6, info->params_json);
    bind_str(s, 7, info->overrides);
    sqlite3_bind_int(s, 8, info->smoke ? 1 : 0);
    sqlite3_bind_int64(s, 9, (int64_t)pid);
    if (pid_start >= 0)
        sqlite3_bind_int64(s, 10, pid_start);
    else
        sqlite3_bind_null(s, 10);
    st = step_done(rs, s, "recording the run", err);
    if (st != MR_OK) goto done;
    *run_id_out = sqlite3_last_insert_rowid(rs->db);
done:
    release(s);
    return st;
}

mr_status mr_runstore_run_end(mr_runstore *rs, int64_t run_id, const char *status, int n_executed, int n_cached,
                              int n_failed, int n_skipped, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, S_RUN_END, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    sqlite3_bind_double(s, 2, mr_wall_time());
    bind_str(s, 3, status);
    sqlite3_bind_int(s, 4, n_executed);
    sqlite3_bind_int(s, 5, n_cached);
    sqlite3_bind_int(s, 6, n_failed);
    sqlite3_bind_int(s, 7, n_skipped);
    st = step_done(rs, s, "finishing the run", err);
    if (st != MR_OK) goto done;
    if (sqlite3_changes(rs->db) == 0) st = MR_ERR(err, MR_E_NOT_FOUND, "%s: no run %lld", rs->path, (long long)run_id);
done:
    release(s);
    return st;
}

mr_status mr_runstore_stage_record(mr_runstore *rs, int64_t run_id, const mr_stage_record *rec, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, S_STAGE, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    bind_str(s, 2, rec->stage);
    bind_str(s, 3, rec->op);
    bind_str(s, 4, rec->key);
    bind_str(s, 5, rec->status);
    sqlite3_bind_double(s, 6, rec->started);
    sqlite3_bind_double(s, 7, rec->wall_s);
    sqlite3_bind_double(s, 8, rec->user_s);
    sqlite3_bind_double(s, 9, rec->sys_s);
    sqlite3_bind_int64(s, 10, rec->max_rss_kb);
    sqlite3_bind_int64(s, 11, rec->bytes_read);
    sqlite3_bind_int64(s, 12, rec->bytes_written);
    bind_str(s, 13, rec->error);
    bind_str(s, 14, rec->outputs_json);
    st = step_done(rs, s, "recording a stage run", err);
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
    st = cached(rs, S_METRIC, &s, err);
    if (st != MR_OK) goto done;
    st = tx_begin(rs, err);
    if (st != MR_OK) goto done;
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, run_id);
        bind_str(s, 2, stage);
        bind_str(s, 3, m[i].name);
        sqlite3_bind_int64(s, 4, m[i].step);
        sqlite3_bind_double(s, 5, m[i].value);
        st = step_done(rs, s, "recording metrics", err);
    }
    release(s);
    if (st == MR_OK) st = tx_commit(rs, err);
done:
    release(s);
    if (st != MR_OK) tx_rollback(rs);
    return st;
}

mr_status mr_runstore_lineage_add(mr_runstore *rs, int64_t run_id, const char *stage, const char *role,
                                  const char *name, const char *artifact, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    st = cached(rs, S_LINEAGE, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    bind_str(s, 2, stage);
    bind_str(s, 3, role);
    bind_str(s, 4, name);
    bind_str(s, 5, artifact);
    st = step_done(rs, s, "recording lineage", err);
done:
    release(s);
    return st;
}

/* ---- stage cache ------------------------------------------------------- */

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
    st = cached(rs, S_CACHE_GET, &s, err);
    if (st != MR_OK) goto done;
    bind_str(s, 1, key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "no cache entry for key '%s'", key);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = db_fail(rs, err, "reading the stage cache");
        goto done;
    }
    for (int i = 0; i < 3 && st == MR_OK; i++)
        if (outs[i]) st = col_dup(s, i, &cols[i], err);
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
    st = cached(rs, S_CACHE_PUT, &s, err);
    if (st != MR_OK) goto done;
    bind_str(s, 1, key);
    bind_str(s, 2, stage);
    bind_str(s, 3, op);
    bind_str(s, 4, key_doc);
    bind_str(s, 5, outputs_json);
    bind_str(s, 6, metrics_json);
    sqlite3_bind_double(s, 7, mr_wall_time());
    if (run_id > 0)
        sqlite3_bind_int64(s, 8, run_id);
    else
        sqlite3_bind_null(s, 8);
    st = step_done(rs, s, "writing the stage cache", err);
done:
    release(s);
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
    st = prepare(rs, "SELECT key, key_doc FROM stage_cache WHERE stage = ?1 ORDER BY created DESC, rowid DESC LIMIT 1",
                 &s, err);
    if (st != MR_OK) goto done;
    bind_str(s, 1, stage);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "no cache entry for stage '%s'", stage);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = db_fail(rs, err, "reading the stage cache");
        goto done;
    }
    if (key_out) st = col_dup(s, 0, &key, err);
    if (st == MR_OK && key_doc_out) st = col_dup(s, 1, &doc, err);
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

/* ---- stat cache -------------------------------------------------------- */

mr_status mr_runstore_statcache_load(mr_runstore *rs, mr_statcache *sc, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    st = prepare(rs, "SELECT path, size, mtime_ns, ino, hash FROM stat_cache", &s, err);
    if (st != MR_OK) goto done;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(s, 0);
        const char *hex = (const char *)sqlite3_column_text(s, 4);
        mr_hash128 h;
        if (!path || !hex || mr_hash_parse(hex, &h) != MR_OK) continue; /* unusable row: rehash later */
        if (mr_statcache_put(sc, path, (uint64_t)sqlite3_column_int64(s, 1), (uint64_t)sqlite3_column_int64(s, 2),
                             (uint64_t)sqlite3_column_int64(s, 3), h, 0) != MR_OK) {
            st = nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) st = db_fail(rs, err, "reading the stat cache");
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
    bind_str(c->s, 1, e->path);
    sqlite3_bind_int64(c->s, 2, (int64_t)e->size);
    sqlite3_bind_int64(c->s, 3, (int64_t)e->mtime_ns);
    sqlite3_bind_int64(c->s, 4, (int64_t)e->ino);
    sqlite3_bind_text(c->s, 5, hex, -1, SQLITE_TRANSIENT);
    c->st = step_done(c->rs, c->s, "writing the stat cache", c->err);
}

mr_status mr_runstore_statcache_save(mr_runstore *rs, const mr_statcache *sc, mr_error *err)
{
    save_ctx c = {rs, NULL, err, MR_OK};
    c.st = prepare(rs, "INSERT OR REPLACE INTO stat_cache(path, size, mtime_ns, ino, hash) VALUES(?1, ?2, ?3, ?4, ?5)",
                   &c.s, err);
    if (c.st != MR_OK) goto done;
    c.st = tx_begin(rs, err);
    if (c.st != MR_OK) goto done;
    mr_statcache_foreach(sc, 1, save_one, &c);
    sqlite3_reset(c.s);
    if (c.st == MR_OK) c.st = tx_commit(rs, err);
done:
    sqlite3_finalize(c.s);
    if (c.st != MR_OK) tx_rollback(rs);
    return c.st;
}

/* ---- reaping ----------------------------------------------------------- */

/* Whether the process that began a run is gone: no such pid, or the pid now
 * belongs to a process that started at another time. */
static int run_process_gone(sqlite3_stmt *s)
{
    int gone = 0;
    if (sqlite3_column_type(s, 1) == SQLITE_NULL) {
        gone = 1;
        goto done;
    }
    pid_t pid = (pid_t)sqlite3_column_int64(s, 1);
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) {
        gone = 1;
        goto done;
    }
    if (sqlite3_column_type(s, 2) != SQLITE_NULL) {
        int64_t now = proc_starttime(pid);
        if (now >= 0 && now != sqlite3_column_int64(s, 2)) gone = 1;
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
    st = prepare(rs, "SELECT id, pid, pid_start FROM runs WHERE status = 'running'", &s, err);
    if (st != MR_OK) goto done;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (!run_process_gone(s)) continue;
        if (n_dead == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            int64_t *nd = mr_realloc(dead, ncap * sizeof(*nd));
            if (!nd) {
                st = nomem(err);
                goto done;
            }
            dead = nd;
            cap = ncap;
        }
        dead[n_dead++] = sqlite3_column_int64(s, 0);
    }
    if (rc != SQLITE_DONE) {
        st = db_fail(rs, err, "reading runs");
        goto done;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (n_dead == 0) goto done;
    st = prepare(rs,
                 "UPDATE runs SET status = 'killed', ended = COALESCE(ended, ?2)"
                 " WHERE id = ?1 AND status = 'running'",
                 &u, err);
    if (st != MR_OK) goto done;
    for (size_t i = 0; i < n_dead && st == MR_OK; i++) {
        sqlite3_reset(u);
        sqlite3_bind_int64(u, 1, dead[i]);
        sqlite3_bind_double(u, 2, mr_wall_time());
        st = step_done(rs, u, "marking a run killed", err);
        if (st == MR_OK) n += sqlite3_changes(rs->db);
    }
done:
    sqlite3_finalize(s);
    sqlite3_finalize(u);
    mr_free(dead);
    if (n_reaped) *n_reaped = n;
    return st;
}

/* ---- queries ----------------------------------------------------------- */

/* Runs a query that yields at most one integer; *found says whether it did. */
static mr_status query_id(mr_runstore *rs, const char *sql, int64_t arg, int64_t *out, int *found, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    *found = 0;
    st = prepare(rs, sql, &s, err);
    if (st != MR_OK) goto done;
    if (sqlite3_bind_parameter_count(s) > 0) sqlite3_bind_int64(s, 1, arg);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(s, 0);
        *found = 1;
    } else if (rc != SQLITE_DONE) {
        st = db_fail(rs, err, "reading runs");
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
        st = query_id(rs, "SELECT id FROM runs ORDER BY id DESC LIMIT 1", 0, &id, &found, err);
    else if (run_ref[0] == '-' && parse_pos(run_ref + 1, &n))
        st = query_id(rs, "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1", n - 1, &id, &found, err);
    else if (parse_pos(run_ref, &n))
        st = query_id(rs, "SELECT id FROM runs WHERE id = ?1", n, &id, &found, err);
    if (st != MR_OK || found) goto done;
    st = query_id(rs, "SELECT max(id) FROM runs WHERE id IS NOT NULL", 0, &newest, &have_newest, err);
    if (st != MR_OK) goto done;
    st = MR_ERR(err, MR_E_NOT_FOUND, "no run '%s'", run_ref);
    if (have_newest && newest > 0)
        mr_error_hint(err, "the newest run is %lld; use an id, 'latest' or '-N'", (long long)newest);
    else
        mr_error_hint(err, "no runs are recorded yet");
done:
    if (st == MR_OK) *run_id = id;
    return st;
}

mr_status mr_runstore_runs_json(mr_runstore *rs, int limit, mr_buf *out, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    json_t *root = NULL, *arr = NULL;
    int rc;
    st = mr_runstore_reap(rs, NULL, err);
    if (st != MR_OK) goto done;
    root = json_object();
    arr = json_array();
    if (!root || !arr || json_object_set(root, "runs", arr)) {
        st = nomem(err);
        goto done;
    }
    st = prepare(rs, "SELECT " RUN_COLS " FROM runs ORDER BY id DESC LIMIT ?1", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, limit > 0 ? limit : -1);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (json_array_append_new(arr, run_obj(s, 0))) {
            st = nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) {
        st = db_fail(rs, err, "reading runs");
        goto done;
    }
    st = json_emit(root, out, err);
done:
    sqlite3_finalize(s);
    json_decref(arr);
    json_decref(root);
    return st;
}

/* Fetches the RUN_COLS row of one run as a JSON object. */
static mr_status load_run(mr_runstore *rs, int64_t run_id, int full, json_t **out, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    *out = NULL;
    st = prepare(rs, "SELECT " RUN_COLS " FROM runs WHERE id = ?1", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "no run '%lld'", (long long)run_id);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = db_fail(rs, err, "reading runs");
        goto done;
    }
    *out = run_obj(s, full);
    if (!*out) st = nomem(err);
done:
    sqlite3_finalize(s);
    return st;
}

static json_t *stage_obj(sqlite3_stmt *s)
{
    int bad = 0;
    json_t *o = json_object();
    if (!o) goto done;
    bad |= jset(o, "stage", jcol_str(s, 0));
    bad |= jset(o, "op", jcol_str(s, 1));
    bad |= jset(o, "key", jcol_str(s, 2));
    bad |= jset(o, "status", jcol_str(s, 3));
    bad |= jset(o, "started", jcol_time(s, 4));
    bad |= jset(o, "started_s", jcol_real(s, 4));
    bad |= jset(o, "wall_s", jcol_real(s, 5));
    bad |= jset(o, "user_s", jcol_real(s, 6));
    bad |= jset(o, "sys_s", jcol_real(s, 7));
    bad |= jset(o, "max_rss_kb", jcol_int(s, 8));
    bad |= jset(o, "bytes_read", jcol_int(s, 9));
    bad |= jset(o, "bytes_written", jcol_int(s, 10));
    bad |= jset(o, "error", jcol_str(s, 11));
    bad |= jset(o, "outputs", jcol_json(s, 12));
    if (bad) {
        json_decref(o);
        o = NULL;
    }
done:
    return o;
}

static json_t *metric_obj(sqlite3_stmt *s)
{
    int bad = 0;
    json_t *o = json_object();
    if (!o) goto done;
    bad |= jset(o, "stage", jcol_str(s, 0));
    bad |= jset(o, "name", jcol_str(s, 1));
    bad |= jset(o, "step", jcol_int(s, 2));
    bad |= jset(o, "value", jcol_real(s, 3));
    if (bad) {
        json_decref(o);
        o = NULL;
    }
done:
    return o;
}

/* Appends one object per row of a one-parameter (run id) query to arr. */
static mr_status rows_to_array(mr_runstore *rs, const char *sql, int64_t run_id, json_t *(*make)(sqlite3_stmt *),
                               json_t *arr, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    st = prepare(rs, sql, &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (json_array_append_new(arr, make(s))) {
            st = nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) st = db_fail(rs, err, "reading a run");
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_show_json(mr_runstore *rs, int64_t run_id, mr_buf *out, mr_error *err)
{
    mr_status st = MR_OK;
    json_t *root = NULL, *run = NULL, *stages = NULL, *metrics = NULL;
    st = mr_runstore_reap(rs, NULL, err);
    if (st != MR_OK) goto done;
    st = load_run(rs, run_id, 1, &run, err);
    if (st != MR_OK) goto done;
    root = json_object();
    stages = json_array();
    metrics = json_array();
    if (!root || !stages || !metrics || json_object_set(root, "run", run) || json_object_set(root, "stages", stages) ||
        json_object_set(root, "metrics", metrics)) {
        st = nomem(err);
        goto done;
    }
    st = rows_to_array(rs,
                       "SELECT stage, op, key, status, started, wall_s, user_s, sys_s, max_rss_kb, bytes_read,"
                       " bytes_written, error, outputs_json FROM stage_runs WHERE run_id = ?1 ORDER BY id",
                       run_id, stage_obj, stages, err);
    if (st != MR_OK) goto done;
    st = rows_to_array(rs,
                       "SELECT stage, name, step, value FROM metrics WHERE run_id = ?1"
                       " ORDER BY stage, name, step, rowid",
                       run_id, metric_obj, metrics, err);
    if (st != MR_OK) goto done;
    st = json_emit(root, out, err);
done:
    json_decref(run);
    json_decref(stages);
    json_decref(metrics);
    json_decref(root);
    return st;
}

/* ---- compare ----------------------------------------------------------- */

/* Flattens v into into[path] = [a, b] (side 0 or 1); objects recurse with
 * dotted paths, everything else (arrays too) is a leaf. */
static int flatten(json_t *v, const char *prefix, json_t *into, int side)
{
    int bad = 0;
    json_t *pair = NULL;
    if (json_is_object(v) && (json_object_size(v) > 0 || !prefix)) {
        const char *k;
        json_t *child;
        json_object_foreach(v, k, child)
        {
            char *path = prefix ? mr_asprintf("%s.%s", prefix, k) : mr_strdup(k);
            bad = path ? flatten(child, path, into, side) : 1;
            mr_free(path);
            if (bad) break;
        }
        goto done;
    }
    if (!prefix) goto done; /* params that are not an object: nothing to compare */
    pair = json_object_get(into, prefix);
    if (!pair) {
        pair = json_pack("[nn]");
        if (!pair || json_object_set_new(into, prefix, pair)) {
            bad = 1;
            goto done;
        }
    }
    bad = json_array_set(pair, (size_t)side, v) ? 1 : 0;
done:
    return bad;
}

static mr_status compare_params(json_t *ra, json_t *rb, json_t *arr, mr_error *err)
{
    mr_status st = MR_OK;
    json_t *paths = json_object();
    const char **keys = NULL;
    size_t n = 0;
    const char *k;
    json_t *pair;
    if (!paths || flatten(json_object_get(ra, "params"), NULL, paths, 0) ||
        flatten(json_object_get(rb, "params"), NULL, paths, 1)) {
        st = nomem(err);
        goto done;
    }
    keys = mr_calloc(json_object_size(paths) + 1, sizeof(*keys));
    if (!keys) {
        st = nomem(err);
        goto done;
    }
    json_object_foreach(paths, k, pair) keys[n++] = k;
    if (n) qsort(keys, n, sizeof(*keys), cmp_str);
    for (size_t i = 0; i < n; i++) {
        pair = json_object_get(paths, keys[i]);
        json_t *a = json_array_get(pair, 0), *b = json_array_get(pair, 1);
        json_t *o = json_pack("{s:s, s:O, s:O, s:b}", "path", keys[i], "a", a, "b", b, "changed", !json_equal(a, b));
        if (json_array_append_new(arr, o)) {
            st = nomem(err);
            goto done;
        }
    }
done:
    mr_free(keys);
    json_decref(paths);
    return st;
}

typedef struct final_metric {
    char *stage, *name;
    double value;
} final_metric;

typedef struct metric_vec {
    final_metric *v;
    size_t n, cap;
} metric_vec;

static void metric_vec_free(metric_vec *mv)
{
    for (size_t i = 0; i < mv->n; i++) {
        mr_free(mv->v[i].stage);
        mr_free(mv->v[i].name);
    }
    mr_free(mv->v);
    memset(mv, 0, sizeof(*mv));
}

/* The value at the highest step of each (stage, name) of a run, sorted. */
static mr_status load_final_metrics(mr_runstore *rs, int64_t run_id, metric_vec *mv, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    st = prepare(rs, "SELECT stage, name, value FROM metrics WHERE run_id = ?1 ORDER BY stage, name, step, rowid", &s,
                 err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *stage = (const char *)sqlite3_column_text(s, 0);
        const char *name = (const char *)sqlite3_column_text(s, 1);
        if (!stage || !name) continue;
        final_metric *last = mv->n ? &mv->v[mv->n - 1] : NULL;
        if (last && !strcmp(last->stage, stage) && !strcmp(last->name, name)) {
            last->value = sqlite3_column_double(s, 2); /* later step overrides */
            continue;
        }
        if (mv->n == mv->cap) {
            size_t ncap = mv->cap ? mv->cap * 2 : 16;
            final_metric *nv = mr_realloc(mv->v, ncap * sizeof(*nv));
            if (!nv) {
                st = nomem(err);
                goto done;
            }
            mv->v = nv;
            mv->cap = ncap;
        }
        final_metric *m = &mv->v[mv->n];
        m->stage = mr_strdup(stage);
        m->name = mr_strdup(name);
        m->value = sqlite3_column_double(s, 2);
        mv->n++;
        if (!m->stage || !m->name) {
            st = nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) st = db_fail(rs, err, "reading metrics");
done:
    sqlite3_finalize(s);
    return st;
}

static int cmp_metric(const final_metric *a, const final_metric *b)
{
    int c = strcmp(a->stage, b->stage);
    return c ? c : strcmp(a->name, b->name);
}

static json_t *metric_pair(const final_metric *a, const final_metric *b)
{
    const final_metric *any = a ? a : b;
    json_t *ja = a ? json_real(a->value) : json_null();
    json_t *jb = b ? json_real(b->value) : json_null();
    json_t *jd = a && b ? json_real(b->value - a->value) : json_null();
    return json_pack("{s:s, s:s, s:o, s:o, s:o}", "stage", any->stage, "name", any->name, "a", ja, "b", jb, "delta",
                     jd);
}

static mr_status compare_metrics(mr_runstore *rs, int64_t a, int64_t b, json_t *arr, mr_error *err)
{
    mr_status st = MR_OK;
    metric_vec ma = {0}, mb = {0};
    size_t i = 0, j = 0;
    st = load_final_metrics(rs, a, &ma, err);
    if (st != MR_OK) goto done;
    st = load_final_metrics(rs, b, &mb, err);
    if (st != MR_OK) goto done;
    while (i < ma.n || j < mb.n) {
        int c = i == ma.n ? 1 : j == mb.n ? -1 : cmp_metric(&ma.v[i], &mb.v[j]);
        json_t *o = metric_pair(c <= 0 ? &ma.v[i] : NULL, c >= 0 ? &mb.v[j] : NULL);
        if (c <= 0) i++;
        if (c >= 0) j++;
        if (json_array_append_new(arr, o)) {
            st = nomem(err);
            goto done;
        }
    }
done:
    metric_vec_free(&ma);
    metric_vec_free(&mb);
    return st;
}

/* Loads {stage: [key, status]} of a run, in first-seen order (a stage
 * recorded twice keeps its last record). */
static mr_status load_stage_keys(mr_runstore *rs, int64_t run_id, json_t *into, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    st = prepare(rs, "SELECT stage, key, status FROM stage_runs WHERE run_id = ?1 ORDER BY id", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *stage = (const char *)sqlite3_column_text(s, 0);
        if (!stage) continue;
        json_t *pair = json_pack("[oo]", jcol_str(s, 1), jcol_str(s, 2));
        if (!pair || json_object_set_new(into, stage, pair)) {
            st = nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) st = db_fail(rs, err, "reading stage runs");
done:
    sqlite3_finalize(s);
    return st;
}

static mr_status compare_stages(mr_runstore *rs, int64_t a, int64_t b, json_t *arr, mr_error *err)
{
    mr_status st = MR_OK;
    json_t *sa = json_object(), *sb = json_object(), *nul = json_null();
    const char *stage;
    json_t *pa, *pb;
    if (!sa || !sb) {
        st = nomem(err);
        goto done;
    }
    st = load_stage_keys(rs, a, sa, err);
    if (st == MR_OK) st = load_stage_keys(rs, b, sb, err);
    if (st != MR_OK) goto done;
    for (int pass = 0; pass < 2; pass++) {
        json_t *first = pass == 0 ? sa : sb, *other = pass == 0 ? sb : sa;
        json_object_foreach(first, stage, pa)
        {
            pb = json_object_get(other, stage);
            if (pass == 1 && pb) continue; /* already listed from a */
            json_t *x = pass == 0 ? pa : pb, *y = pass == 0 ? pb : pa;
            json_t *xk = x ? json_array_get(x, 0) : nul, *yk = y ? json_array_get(y, 0) : nul;
            json_t *o = json_pack("{s:s, s:O, s:O, s:O, s:O, s:b}", "stage", stage, "a_key", xk, "b_key", yk,
                                  "a_status", x ? json_array_get(x, 1) : nul, "b_status",
                                  y ? json_array_get(y, 1) : nul, "changed", !json_equal(xk, yk));
            if (json_array_append_new(arr, o)) {
                st = nomem(err);
                goto done;
            }
        }
    }
done:
    json_decref(sa);
    json_decref(sb);
    return st;
}

mr_status mr_runstore_compare_json(mr_runstore *rs, int64_t a, int64_t b, mr_buf *out, mr_error *err)
{
    mr_status st = MR_OK;
    json_t *ra = NULL, *rb = NULL, *root = NULL, *params = NULL, *metrics = NULL, *stages = NULL;
    st = mr_runstore_reap(rs, NULL, err);
    if (st == MR_OK) st = load_run(rs, a, 1, &ra, err);
    if (st == MR_OK) st = load_run(rs, b, 1, &rb, err);
    if (st != MR_OK) goto done;
    root = json_object();
    params = json_array();
    metrics = json_array();
    stages = json_array();
    if (!root || !params || !metrics || !stages || jset(root, "a", json_integer(a)) ||
        jset(root, "b", json_integer(b)) || json_object_set(root, "params", params) ||
        json_object_set(root, "metrics", metrics) || json_object_set(root, "stages", stages)) {
        st = nomem(err);
        goto done;
    }
    st = compare_params(ra, rb, params, err);
    if (st == MR_OK) st = compare_metrics(rs, a, b, metrics, err);
    if (st == MR_OK) st = compare_stages(rs, a, b, stages, err);
    if (st == MR_OK) st = json_emit(root, out, err);
done:
    json_decref(ra);
    json_decref(rb);
    json_decref(params);
    json_decref(metrics);
    json_decref(stages);
    json_decref(root);
    return st;
}

/* ---- artifacts --------------------------------------------------------- */

/* Pushes every string value found in v (recursively) onto sv. */
static mr_status collect_strings(json_t *v, strvec *sv)
{
    mr_status st = MR_OK;
    if (json_is_string(v)) {
        st = strvec_push(sv, json_string_value(v));
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
    static const char *const sql[2] = {
        "SELECT outputs_json FROM stage_runs WHERE outputs_json IS NOT NULL"
        " AND run_id IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?1)",
        "SELECT artifact FROM lineage WHERE role = 'out'"
        " AND run_id IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?1)",
    };
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    strvec sv = {0};
    int rc = SQLITE_DONE;
    *ids_out = NULL;
    *n_out = 0;
    for (int q = 0; q < 2 && st == MR_OK; q++) {
        st = prepare(rs, sql[q], &s, err);
        if (st != MR_OK) goto done;
        sqlite3_bind_int64(s, 1, keep_runs < 0 ? -1 : keep_runs);
        while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(s, 0);
            if (!t) continue;
            if (q == 1) {
                st = strvec_push(&sv, t);
            } else {
                json_t *v = json_loads(t, JSON_DECODE_ANY, NULL);
                st = collect_strings(v, &sv);
                json_decref(v);
            }
        }
        if (st != MR_OK) {
            st = nomem(err);
            goto done;
        }
        if (rc != SQLITE_DONE) {
            st = db_fail(rs, err, "reading artifacts");
            goto done;
        }
        sqlite3_finalize(s);
        s = NULL;
    }
    strvec_uniq(&sv);
    *ids_out = sv.v;
    *n_out = sv.n;
    memset(&sv, 0, sizeof(sv));
done:
    sqlite3_finalize(s);
    strvec_free(&sv);
    return st;
}

/* Whether every output id of a cache entry is present in the store. */
static int outputs_present(mr_store *store, const char *outputs_json)
{
    int ok = 0;
    json_t *v = outputs_json ? json_loads(outputs_json, 0, NULL) : NULL;
    const char *k;
    json_t *id;
    mr_artifact a;
    if (!json_is_object(v)) goto done;
    json_object_foreach(v, k, id)
    {
        if (!json_is_string(id) || mr_artifact_parse(json_string_value(id), &a) != MR_OK || !mr_store_has(store, &a))
            goto done;
    }
    ok = 1;
done:
    json_decref(v);
    return ok;
}

mr_status mr_runstore_cache_prune(mr_runstore *rs, mr_store *store, int *n_pruned, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    strvec doomed = {0};
    int rc, n = 0;
    st = prepare(rs, "SELECT key, outputs_json FROM stage_cache", &s, err);
    if (st != MR_OK) goto done;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(s, 0);
        if (!key || outputs_present(store, (const char *)sqlite3_column_text(s, 1))) continue;
        if (strvec_push(&doomed, key) != MR_OK) {
            st = nomem(err);
            goto done;
        }
    }
    if (rc != SQLITE_DONE) {
        st = db_fail(rs, err, "reading the stage cache");
        goto done;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (doomed.n == 0) goto done;
    st = prepare(rs, "DELETE FROM stage_cache WHERE key = ?1", &s, err);
    if (st == MR_OK) st = tx_begin(rs, err);
    for (size_t i = 0; i < doomed.n && st == MR_OK; i++) {
        sqlite3_reset(s);
        bind_str(s, 1, doomed.v[i]);
        st = step_done(rs, s, "pruning the stage cache", err);
        if (st == MR_OK) n += sqlite3_changes(rs->db);
    }
    if (s) sqlite3_reset(s);
    if (st == MR_OK) st = tx_commit(rs, err);
done:
    sqlite3_finalize(s);
    if (st != MR_OK) {
        tx_rollback(rs);
        n = 0;
    }
    strvec_free(&doomed);
    if (n_pruned) *n_pruned = n;
    return st;
}

/* ---- tune trials ---------------------------------------------------------
 * An additive table, created on first use (schema version unchanged: older
 * readers never look at it, and a store without it simply has no trials). */
static const char TRIALS_SQL[] =
    "CREATE TABLE IF NOT EXISTS tune_trials("
    " run_id INTEGER NOT NULL, stage TEXT NOT NULL, trial INTEGER NOT NULL, key TEXT, status TEXT NOT NULL,"
    " value REAL, record_json TEXT NOT NULL, created REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS tune_trials_stage ON tune_trials(stage, run_id);";

mr_status mr_runstore_trial_add(mr_runstore *rs, int64_t run_id, const char *stage, int trial, const char *key,
                                const char *status, double value, const char *record_json, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_status st = exec_retry(rs, TRIALS_SQL, err);
    if (st != MR_OK) goto done;
    st = prepare(rs,
                 "INSERT INTO tune_trials(run_id, stage, trial, key, status, value, record_json, created)"
                 " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                 &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    bind_str(s, 2, stage);
    sqlite3_bind_int(s, 3, trial);
    bind_str(s, 4, key);
    bind_str(s, 5, status);
    if (isfinite(value))
        sqlite3_bind_double(s, 6, value);
    else
        sqlite3_bind_null(s, 6);
    bind_str(s, 7, record_json);
    sqlite3_bind_double(s, 8, mr_wall_time());
    st = step_done(rs, s, "recording a tune trial", err);
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_trials_json(mr_runstore *rs, const char *stage, int64_t *run_id_out, mr_buf *out,
                                  mr_error *err)
{
    sqlite3_stmt *s = NULL;
    int64_t run = 0;
    int rc, first = 1;
    *run_id_out = 0;
    mr_status st = prepare(rs, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tune_trials'", &s, err);
    if (st != MR_OK) goto done;
    if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_int(s, 0) == 0) goto empty;
    sqlite3_finalize(s);
    s = NULL;
    st = prepare(rs, "SELECT max(run_id) FROM tune_trials WHERE stage = ?1", &s, err);
    if (st != MR_OK) goto done;
    bind_str(s, 1, stage);
    if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_type(s, 0) == SQLITE_NULL) goto empty;
    run = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    s = NULL;
    /* A trial recorded twice in one run (never, but be safe): the last wins. */
    st = prepare(rs,
                 "SELECT record_json FROM tune_trials WHERE stage = ?1 AND run_id = ?2 AND rowid IN"
                 " (SELECT max(rowid) FROM tune_trials WHERE stage = ?1 AND run_id = ?2 GROUP BY trial) ORDER BY trial",
                 &s, err);
    if (st != MR_OK) goto done;
    bind_str(s, 1, stage);
    sqlite3_bind_int64(s, 2, run);
    st = mr_buf_puts(out, "[");
    for (;;) {
        rc = sqlite3_step(s);
        if (st != MR_OK || rc != SQLITE_ROW) break;
        const char *t = (const char *)sqlite3_column_text(s, 0);
        if (!first) st = mr_buf_puts(out, ",");
        if (st == MR_OK) st = mr_buf_puts(out, t ? t : "null");
        first = 0;
    }
    if (st == MR_OK) st = mr_buf_puts(out, "]");
    if (st != MR_OK) st = nomem(err);
    *run_id_out = run;
    goto done;
empty:
    st = mr_buf_puts(out, "[]") == MR_OK ? MR_OK : nomem(err);
done:
    sqlite3_finalize(s);
    return st;
}
