/* The run store: .millrace/runs.db (SQLite, WAL, busy timeout).
 *
 * Tables (schema version 1; see docs/run-store.md):
 *   runs(id, started, ended, status, argv, cwd, git_commit, git_dirty,
 *        params_json, overrides, smoke, pid, pid_start, n_executed, n_cached,
 *        n_failed, n_skipped)
 *   stage_runs(run_id, stage, op, key, status, started, wall_s, user_s, sys_s,
 *        max_rss_kb, bytes_read, bytes_written, error, outputs_json)
 *   metrics(run_id, stage, name, step, value)
 *   lineage(run_id, stage, role, name, artifact)
 *   stage_cache(key, stage, op, key_doc, outputs_json, metrics_json, created, run_id)
 *   stat_cache(path, size, mtime_ns, ino, hash)
 *
 * Several processes may hold the store open at once (two `millrace run` on
 * one workspace): SQLite's WAL and busy timeout serialise the writers.
 * One mr_runstore is used by one thread at a time. */
#ifndef MILLRACE_RUNSTORE_H
#define MILLRACE_RUNSTORE_H

#include "millrace/core.h"
#include "millrace/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_runstore mr_runstore;

mr_status mr_runstore_open(const char *db_path, mr_runstore **out, mr_error *err);
void mr_runstore_close(mr_runstore *rs);

/* Run status strings: "running", "ok", "failed", "interrupted", "killed". */
typedef struct mr_run_begin {
    const char *argv;        /* the command line, space-joined */
    const char *cwd;
    const char *git_commit;  /* "" outside a git repository */
    int git_dirty;
    const char *params_json; /* effective params (canonical JSON) */
    const char *overrides;   /* -S values, space-joined */
    int smoke;
} mr_run_begin;
mr_status mr_runstore_run_begin(mr_runstore *rs, const mr_run_begin *info, int64_t *run_id_out, mr_error *err);
mr_status mr_runstore_run_end(mr_runstore *rs, int64_t run_id, const char *status, int n_executed, int n_cached,
                              int n_failed, int n_skipped, mr_error *err);

typedef struct mr_stage_record {
    const char *stage, *op, *key; /* key: 32 hex or "" */
    const char *status;           /* "executed", "cached", "failed", "skipped", "interrupted" */
    double started, wall_s, user_s, sys_s;
    int64_t max_rss_kb, bytes_read, bytes_written;
    const char *error;            /* NULL if none */
    const char *outputs_json;     /* {"name": "artifact id", ...} or NULL */
} mr_stage_record;
mr_status mr_runstore_stage_record(mr_runstore *rs, int64_t run_id, const mr_stage_record *rec, mr_error *err);

typedef struct mr_metric {
    const char *name;
    int64_t step;
    double value;
} mr_metric;
/* Adds metrics in one transaction. */
mr_status mr_runstore_metrics_add(mr_runstore *rs, int64_t run_id, const char *stage, const mr_metric *m, size_t n,
                                  mr_error *err);
/* role: "in" or "out". */
mr_status mr_runstore_lineage_add(mr_runstore *rs, int64_t run_id, const char *stage, const char *role,
                                  const char *name, const char *artifact, mr_error *err);

/* Groups the writes between begin and end into one transaction (they nest;
 * the functions above join an open batch). Keep batches short: other
 * processes wait for the write lock while one is open. */
mr_status mr_runstore_batch_begin(mr_runstore *rs, mr_error *err);
mr_status mr_runstore_batch_end(mr_runstore *rs, mr_error *err);

/* Stage cache: key -> outputs. get returns MR_E_NOT_FOUND on a miss; the
 * returned strings are owned by the caller (NULL-able out params). */
mr_status mr_runstore_cache_get(mr_runstore *rs, const char *key, char **outputs_json, char **metrics_json,
                                char **key_doc, mr_error *err);
mr_status mr_runstore_cache_put(mr_runstore *rs, const char *key, const char *stage, const char *op,
                                const char *key_doc, const char *outputs_json, const char *metrics_json,
                                int64_t run_id, mr_error *err);
/* Most recent cache entry for a stage name (for `status` explanations). */
mr_status mr_runstore_cache_last_for_stage(mr_runstore *rs, const char *stage, char **key_out, char **key_doc_out,
                                           mr_error *err);

/* Tune trials (table tune_trials, created on first use; see docs/tune.md):
 * one row per trial of a tune stage in a run. record_json holds params,
 * curve, final metric, status, round and metric at which it stopped. */
mr_status mr_runstore_trial_add(mr_runstore *rs, int64_t run_id, const char *stage, int trial, const char *key,
                                const char *status, double value, const char *record_json, mr_error *err);
/* The trials of the newest run that recorded trials for stage, as a JSON
 * array of their records (in trial order) appended to out; *run_id_out gets
 * that run (0 and "[]" when there is none). */
mr_status mr_runstore_trials_json(mr_runstore *rs, const char *stage, int64_t *run_id_out, mr_buf *out,
                                  mr_error *err);

/* Stat cache persistence. */
mr_status mr_runstore_statcache_load(mr_runstore *rs, mr_statcache *sc, mr_error *err);
mr_status mr_runstore_statcache_save(mr_runstore *rs, const mr_statcache *sc, mr_error *err);

/* Marks runs whose process is gone as "killed". Returns how many. */
mr_status mr_runstore_reap(mr_runstore *rs, int *n_reaped, mr_error *err);

/* Queries, as JSON text appended to out (jansson-built). `runs`: newest
 * first, limit 0 = all. `show`: one run with its stages, params, metrics.
 * `compare`: params and final metrics side by side with differences.
 * run_ref: an id, "latest"/"last", or "-N" (N-th latest). */
mr_status mr_runstore_resolve_run(mr_runstore *rs, const char *run_ref, int64_t *run_id, mr_error *err);
mr_status mr_runstore_runs_json(mr_runstore *rs, int limit, mr_buf *out, mr_error *err);
mr_status mr_runstore_show_json(mr_runstore *rs, int64_t run_id, mr_buf *out, mr_error *err);
mr_status mr_runstore_compare_json(mr_runstore *rs, int64_t a, int64_t b, mr_buf *out, mr_error *err);

/* Artifact ids referenced by the outputs of the newest keep_runs runs
 * (keep_runs < 0: all runs). Caller frees ids and the array. */
mr_status mr_runstore_kept_artifacts(mr_runstore *rs, int keep_runs, char ***ids_out, size_t *n_out, mr_error *err);
/* Drops stage-cache entries whose outputs are no longer all in the store. */
mr_status mr_runstore_cache_prune(mr_runstore *rs, mr_store *st, int *n_pruned, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
