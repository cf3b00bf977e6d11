/* Internals shared by the run store's files: runstore.c (open, schema,
 * transactions, reaping, run references), runstore_write.c (recording),
 * runstore_read.c and runstore_list.c (the read views) and runstore_json.c
 * (their JSON). */
#ifndef MILLRACE_RUNSTORE_INT_H
#define MILLRACE_RUNSTORE_INT_H

#include "millrace/runstore.h"

#include <sqlite3.h>

/* The hot statements, prepared on first use and kept until close. */
enum {
    MR__RS_RUN_BEGIN,
    MR__RS_RUN_END,
    MR__RS_STAGE,
    MR__RS_METRIC,
    MR__RS_LINEAGE,
    MR__RS_CACHE_GET,
    MR__RS_CACHE_PUT,
    MR__RS_N_STMTS
};

struct mr_runstore {
    sqlite3 *db;
    char *path;                           /* for error messages */
    sqlite3_stmt *stmts[MR__RS_N_STMTS];  /* lazily prepared (runstore_write.c) */
    int tx_depth;                         /* nesting of tx_begin; only the outermost talks to SQLite */
    int tx_failed;                        /* an inner level failed: the outermost rolls back */
};

/* MR_E_IO naming the database, what was being done and SQLite's message. */
mr_status mr__runstore_fail(mr_runstore *rs, mr_error *err, const char *what);
mr_status mr__runstore_nomem(mr_error *err);
/* sqlite3_exec once / retrying SQLITE_BUSY that bypasses the busy handler. */
mr_status mr__runstore_exec(mr_runstore *rs, const char *sql, mr_error *err);
mr_status mr__runstore_exec_retry(mr_runstore *rs, const char *sql, mr_error *err);
/* Nesting transactions (BEGIN IMMEDIATE at the outermost level). */
mr_status mr__runstore_tx_begin(mr_runstore *rs, mr_error *err);
mr_status mr__runstore_tx_commit(mr_runstore *rs, mr_error *err);
void mr__runstore_tx_rollback(mr_runstore *rs);
/* A fresh statement (caller finalizes). */
mr_status mr__runstore_prepare(mr_runstore *rs, const char *sql, sqlite3_stmt **out, mr_error *err);
/* Binds a string or SQL NULL; the string must outlive the step. */
void mr__runstore_bind_str(sqlite3_stmt *s, int i, const char *v);
mr_status mr__runstore_step_done(mr_runstore *rs, sqlite3_stmt *s, const char *what, mr_error *err);
/* Copies a text column into *out (NULL for SQL NULL). */
mr_status mr__runstore_col_dup(sqlite3_stmt *s, int i, char **out, mr_error *err);
/* Parses a positive decimal integer that fills all of s. */
int mr__runstore_parse_pos(const char *s, int64_t *out);
/* Whether the process that began a run is gone, from a row's pid (column
 * col) and its start time (col + 1): no such pid, or the pid now belongs to
 * a process that started at another time. */
int mr__runstore_process_gone(sqlite3_stmt *s, int col);
/* Start time of a process (clock ticks since boot, /proc/PID/stat), -1 if unknown. */
int64_t mr__runstore_proc_starttime(long pid);

/* Growable vector of owned strings. */
typedef struct mr__strvec {
    char **v;
    size_t n, cap;
} mr__strvec;
void mr__strvec_free(mr__strvec *sv);
mr_status mr__strvec_push(mr__strvec *sv, const char *s); /* MR_E_NOMEM, err untouched */
void mr__strvec_uniq(mr__strvec *sv);                     /* sorts and removes duplicates */

/* ---- shared by the read views (runstore_read.c, runstore_list.c) ---- */

/* Columns read by mr__runstore_fill_summary, in this order. */
#define MR__RUN_COLS                                                                                        \
    "id, started, ended, status, argv, git_commit, git_dirty, smoke, overrides, n_executed, n_cached, " \
    "n_failed, n_skipped, cwd, params_json, name"

/* Grows *v (elements of size elem, zero-filled) to hold one more than n. */
mr_status mr__runstore_grow(void **v, size_t n, size_t *cap, size_t elem, mr_error *err);
/* A summary from a row of MR__RUN_COLS (r zeroed by the caller); its tags;
 * its finals (the value at the highest step of each stage's metric). */
mr_status mr__runstore_fill_summary(sqlite3_stmt *s, mr_run_summary *r, mr_error *err);
mr_status mr__runstore_load_tags(mr_runstore *rs, mr_run_summary *r, mr_error *err);
mr_status mr__runstore_load_finals(mr_runstore *rs, mr_run_summary *r, mr_error *err);
void mr__runstore_summary_deinit(mr_run_summary *r);

/* The leaf paths of a params tree ("a.b": a non-empty map recurses, anything
 * else is a leaf), each pointing at its value (borrowed from the tree). */
typedef struct mr__leaf_vec {
    char **paths;
    const mr_value **values;
    size_t n, cap;
} mr__leaf_vec;
mr_status mr__runstore_flatten(const mr_value *v, const char *prefix, mr__leaf_vec *lv); /* MR_E_NOMEM, err untouched */
void mr__leaf_vec_free(mr__leaf_vec *lv);

/* Parses canonical JSON text (params, key documents, trial records) into a
 * value tree whose scalars keep the text they were written as. NULL or
 * unparsable text gives an empty MAP (the store holds what millrace wrote;
 * a damaged row reads as empty rather than failing the view). */
mr_status mr__runstore_parse_json(const char *text, mr_value **out, mr_error *err);

#endif
