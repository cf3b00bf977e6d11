/* The run store: .millrace/runs.db (SQLite, WAL, busy timeout).
 *
 * Tables (schema version 3; docs/formats.md):
 *   runs(id, started, ended, status, argv, cwd, git_commit, git_dirty,
 *        params_json, overrides, smoke, pid, pid_start, n_executed, n_cached,
 *        n_failed, n_skipped, name)
 *   run_tags(run_id, key, value)
 *   stage_runs(run_id, stage, op, key, status, started, wall_s, user_s, sys_s,
 *        max_rss_kb, bytes_read, bytes_written, error, outputs_json)
 *   metrics(run_id, stage, name, step, value)
 *   lineage(run_id, stage, role, name, artifact)
 *   stage_cache(key, stage, op, key_doc, outputs_json, metrics_json, created, run_id)
 *   stat_cache(path, size, mtime_ns, ino, hash)
 *   tune_trials(run_id, stage, trial, key, status, value, record_json, created)
 *   model_versions(name, version, artifact, bundle_version, bundle_name, created,
 *        run_id, stage, source), model_aliases(name, alias, version, updated)
 *        (the model registry: include/millrace/registry.h)
 * A version-1 or -2 store (before names and tags; before the registry) is
 * migrated when opened.
 *
 * Writes (the executor records here) and read views (the CLI, the report).
 *
 * Example:
 *
 *   mr_runstore *rs;
 *   if (mr_runstore_open(".millrace/runs.db", &rs, &err) != MR_OK) { mr_log_error(&err); return; }
 *   int64_t run;
 *   mr_run_detail *d = NULL;
 *   if (mr_runstore_resolve_run(rs, "latest", &run, &err) == MR_OK &&
 *       mr_runstore_run_detail(rs, run, &d, &err) == MR_OK)
 *       for (size_t i = 0; i < d->n_stages; i++) printf("%s %s\n", d->stages[i].stage, d->stages[i].status);
 *   else
 *       mr_log_error(&err);   // "no run 'latest'" + hint "no runs are recorded yet"
 *   mr_run_detail_free(d);
 *   mr_runstore_close(rs);
 *
 * A read view is one struct, built by one call and released by its _free
 * (NULL is a no-op). Everything it points to (strings, arrays, value trees)
 * is owned by the view and lives until that _free. Views reap dead runs
 * first (mr_runstore_reap), so a run whose process died reads as "killed".
 * Writes copy every string they are given (SQLite binds copies); strings a
 * function returns through char ** are the caller's (mr_free).
 *
 * Status codes: MR_E_IO (an SQLite failure, naming the database),
 * MR_E_NOT_FOUND (an unknown run, key, stage or column; the error names it
 * and hints at what exists), MR_E_INVALID_ARG (a malformed tag or column),
 * MR_E_SCHEMA (a store newer than this millrace), MR_E_CORRUPT, MR_E_NOMEM.
 *
 * Several processes may hold the store open at once (two `millrace run` on
 * one workspace): SQLite's WAL and busy timeout serialise the writers.
 * One mr_runstore is used by one thread at a time. */
#ifndef MILLRACE_RUNSTORE_H
#define MILLRACE_RUNSTORE_H

#include "millrace/core.h"
#include "millrace/store.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_runstore mr_runstore;

/* Opens (creating or migrating) the store; close with mr_runstore_close.
 * MR_E_IO (cannot open or create), MR_E_SCHEMA (a newer store),
 * MR_E_CORRUPT, MR_E_NOMEM. */
mr_status mr_runstore_open(const char *db_path, mr_runstore **out, mr_error *err);
void mr_runstore_close(mr_runstore *rs); /* NULL is a no-op */

/* ==== writes ================================================================ */

/* Run status strings: "running", "ok", "failed", "interrupted", "killed". */
typedef struct mr_run_begin {
    const char *argv;        /* the command line, space-joined */
    const char *cwd;
    const char *git_commit;  /* "" outside a git repository */
    int git_dirty;
    const char *params_json; /* effective params (canonical JSON) */
    const char *overrides;   /* -S values, space-joined */
    int smoke;
    const char *name;        /* run --name; NULL or "" = none */
    const char *const *tags; /* run --tag: "KEY" or "KEY=VALUE" (checked by mr_run_tag_check) */
    size_t n_tags;
} mr_run_begin;
/* Records a new run as "running"; *run_id_out gets its id. A malformed
 * name or tag is MR_E_INVALID_ARG and records nothing. A tag given twice keeps the last
 * value. All strings are copied. */
mr_status mr_runstore_run_begin(mr_runstore *rs, const mr_run_begin *info, int64_t *run_id_out, mr_error *err);
/* Records the end of a run: its final status and counts, ended = now.
 * MR_E_NOT_FOUND (no such run), MR_E_IO. */
mr_status mr_runstore_run_end(mr_runstore *rs, int64_t run_id, const char *status, int n_executed, int n_cached,
                              int n_failed, int n_skipped, mr_error *err);
/* Checks one tag "KEY" or "KEY=VALUE": KEY is 1..64 of [A-Za-z0-9_.-], the
 * value any text without a newline (up to 1,000 bytes). MR_E_INVALID_ARG
 * says what is wrong. */
mr_status mr_run_tag_check(const char *tag, mr_error *err);
/* Checks a run name: 1..100 bytes of one line that cannot be read as
 * another run reference (not all digits, not "latest"/"last", not starting
 * with '-'), so that `show NAME` finds it. MR_E_INVALID_ARG says why. */
mr_status mr_run_name_check(const char *name, mr_error *err);

typedef struct mr_stage_record {
    const char *stage, *op, *key; /* key: 32 hex or "" */
    const char *status;           /* "executed", "cached", "failed", "skipped", "interrupted" */
    double started, wall_s, user_s, sys_s;
    int64_t max_rss_kb, bytes_read, bytes_written;
    const char *error;            /* NULL if none */
    const char *outputs_json;     /* {"name": "artifact id", ...} or NULL */
} mr_stage_record;
/* Appends one stage's record to a run (a stage recorded twice keeps both;
 * views show the last). MR_E_IO. */
mr_status mr_runstore_stage_record(mr_runstore *rs, int64_t run_id, const mr_stage_record *rec, mr_error *err);

typedef struct mr_metric {
    const char *name;
    int64_t step;
    double value;
} mr_metric;
/* Adds metrics in one transaction. MR_E_IO. */
mr_status mr_runstore_metrics_add(mr_runstore *rs, int64_t run_id, const char *stage, const mr_metric *m, size_t n,
                                  mr_error *err);
/* Records one artifact a stage read (role "in") or wrote ("out"). MR_E_IO. */
mr_status mr_runstore_lineage_add(mr_runstore *rs, int64_t run_id, const char *stage, const char *role,
                                  const char *name, const char *artifact, mr_error *err);

/* Groups the writes between begin and end into one transaction (they nest;
 * the functions above join an open batch). Keep batches short: other
 * processes wait for the write lock while one is open. MR_E_IO. */
mr_status mr_runstore_batch_begin(mr_runstore *rs, mr_error *err);
mr_status mr_runstore_batch_end(mr_runstore *rs, mr_error *err);

/* Stage cache: key -> outputs. get returns MR_E_NOT_FOUND on a miss; the
 * returned strings are owned by the caller (NULL-able out params, NULL on
 * failure). put inserts or replaces the entry of key. MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_cache_get(mr_runstore *rs, const char *key, char **outputs_json, char **metrics_json,
                                char **key_doc, mr_error *err);
mr_status mr_runstore_cache_put(mr_runstore *rs, const char *key, const char *stage, const char *op,
                                const char *key_doc, const char *outputs_json, const char *metrics_json,
                                int64_t run_id, mr_error *err);
/* Calls fn for every stage-cache entry, oldest first (strings valid during
 * the call; op, key_doc, outputs and metrics may be NULL); a status other
 * than MR_OK from fn stops the walk and is returned. MR_E_IO. */
typedef mr_status (*mr_runstore_cache_fn)(void *ctx, const char *key, const char *stage, const char *op,
                                          const char *key_doc, const char *outputs_json, const char *metrics_json,
                                          int64_t run_id, mr_error *err);
mr_status mr_runstore_cache_each(mr_runstore *rs, mr_runstore_cache_fn fn, void *ctx, mr_error *err);
/* Most recent cache entry for a stage name (for `status` explanations):
 * its key and key document (caller-freed; either out may be NULL).
 * MR_E_NOT_FOUND when the stage has none, MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_cache_last_for_stage(mr_runstore *rs, const char *stage, char **key_out, char **key_doc_out,
                                           mr_error *err);

/* Tune trials (table tune_trials, created on first use; see docs/tune.md):
 * one row per trial of a tune stage in a run. record_json holds params,
 * curve, final metric, status, round and metric at which it stopped.
 * MR_E_IO. */
mr_status mr_runstore_trial_add(mr_runstore *rs, int64_t run_id, const char *stage, int trial, const char *key,
                                const char *status, double value, const char *record_json, mr_error *err);

/* Slurm jobs (table stage_jobs, created on first use; docs/cluster.md): one
 * row per job a stage's attempts ran as, with what accounting said. */
typedef struct mr_job_record {
    const char *stage;
    int attempt;              /* 1 for the first submission */
    const char *job_id;
    const char *state;        /* sacct's State: COMPLETED, FAILED, NODE_FAIL, OUT_OF_MEMORY, ... */
    int exit_code, exit_signal;
    const char *nodes;
    double elapsed_s;
    int64_t max_rss_kb;
    int64_t mem_mb;           /* --mem it was given, 0 = none */
    double submitted;         /* wall clock */
} mr_job_record;
mr_status mr_runstore_job_add(mr_runstore *rs, int64_t run_id, const mr_job_record *job, mr_error *err);
/* The jobs of a run as a JSON list (appended to out). MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_jobs_json(mr_runstore *rs, int64_t run_id, mr_buf *out, mr_error *err);
/* Sets a run's status without ending it ("submitted": a detached Slurm run,
 * which reaping leaves alone). MR_E_NOT_FOUND, MR_E_IO. */
mr_status mr_runstore_run_set_status(mr_runstore *rs, int64_t run_id, const char *status, mr_error *err);
/* The ids of the runs whose status is status, ascending (caller frees). */
mr_status mr_runstore_runs_with_status(mr_runstore *rs, const char *status, int64_t **ids, size_t *n, mr_error *err);

/* Stat cache persistence: load adds the stored entries to sc (rows that
 * cannot be read are skipped: those files are re-hashed); save writes sc's
 * dirty entries. MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_statcache_load(mr_runstore *rs, mr_statcache *sc, mr_error *err);
mr_status mr_runstore_statcache_save(mr_runstore *rs, const mr_statcache *sc, mr_error *err);

/* Marks runs whose process is gone as "killed"; *n_reaped (may be NULL)
 * gets how many. MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_reap(mr_runstore *rs, int *n_reaped, mr_error *err);

/* Artifact ids referenced by the outputs of the newest keep_runs runs
 * (keep_runs < 0: all runs) and by every registered model version. Caller frees ids and the array (mr_free).
 * MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_kept_artifacts(mr_runstore *rs, int keep_runs, char ***ids_out, size_t *n_out, mr_error *err);
/* Drops stage-cache entries whose outputs are not all in the store, or one
 * of which is in doomed[0..n_doomed) (objects gc is about to delete: their
 * entries go first, so no entry ever names a missing object). In one
 * transaction; *n_pruned (may be NULL) gets how many. MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_cache_prune(mr_runstore *rs, mr_store *st, const mr_artifact *doomed, size_t n_doomed,
                                  int *n_pruned, mr_error *err);

/* ==== read views ============================================================ */

/* run_ref: an id, "latest"/"last", "-N" (N-th latest), or a run name (the
 * newest run of that name). MR_E_NOT_FOUND with a hint naming the newest;
 * MR_E_IO. */
mr_status mr_runstore_resolve_run(mr_runstore *rs, const char *run_ref, int64_t *run_id, mr_error *err);

typedef struct mr_run_tag {
    char *key;
    char *value; /* NULL for a bare tag (--tag KEY) */
} mr_run_tag;

/* The final value of one metric of a run: the value at its highest step. */
typedef struct mr_run_final {
    char *stage, *name;
    double value;   /* NAN when stored as NULL */
    int64_t step;   /* the highest step */
    size_t n_steps; /* points recorded (a curve has several) */
} mr_run_final;

/* One run as `millrace runs` lists it. */
typedef struct mr_run_summary {
    int64_t id;
    char *name;                /* run --name; NULL when none */
    char *status;              /* running, ok, failed, interrupted, killed */
    double started;            /* seconds since the epoch */
    double ended;              /* NAN while running */
    char *argv, *cwd, *git_commit, *overrides; /* NULL when not recorded */
    int git_dirty, smoke;
    int64_t n_executed, n_cached, n_failed, n_skipped;
    mr_run_tag *tags;          /* sorted by key */
    size_t n_tags;
    mr_value *params;          /* effective params: a MAP (empty when none were recorded) */
    mr_run_final *finals;      /* sorted by stage, name; filled by the detail and the
                                  comparison, and by the list when it has metric columns */
    size_t n_finals;
} mr_run_summary;

/* ---- the run list (`millrace runs`) ---------------------------------------
 * Columns: the run fields id, name, status, started, seconds, ran, cached,
 * failed, skipped, commit, tags; params.PATH (a leaf of the params, dotted:
 * params.train.learning_rate); metrics.STAGE.NAME (a metric's final value:
 * metrics.eval.test.auc). */
typedef struct mr_runs_query {
    int limit;                      /* at most this many (after filter and sort); 0 = all */
    const char *const *tags;        /* "KEY" or "KEY=VALUE": only runs carrying every one */
    size_t n_tags;
    const char *const *columns;     /* cells to fill, in this order */
    size_t n_columns;
    const char *sort;               /* a column, "-COLUMN" for descending; NULL = newest first */
} mr_runs_query;

typedef struct mr_run_list {
    mr_run_summary *runs; /* newest first, or in sort order (runs without a value last) */
    size_t n;
    char **columns;       /* the query's columns */
    size_t n_columns;
    mr_value **cells;     /* cells[i * n_columns + j]: run i, column j; NULL = the run has none */
} mr_run_list;

/* Lists runs. A column (or the sort column) that no listed run has and that
 * is not a run field is MR_E_NOT_FOUND naming the closest known columns;
 * a malformed tag or column is MR_E_INVALID_ARG. *out is the caller's
 * (mr_run_list_free). */
mr_status mr_runstore_runs(mr_runstore *rs, const mr_runs_query *q, mr_run_list **out, mr_error *err);
void mr_run_list_free(mr_run_list *l);

/* ---- one run (`millrace show`) --------------------------------------------- */
typedef struct mr_run_output {
    char *name, *artifact;
} mr_run_output;

typedef struct mr_stage_run {
    char *stage, *op, *key, *status; /* key: 32 hex, "" or NULL when not recorded */
    char *error;                     /* NULL when none */
    double started;                  /* seconds since the epoch; NAN when not recorded */
    double wall_s, user_s, sys_s;    /* NAN when not recorded */
    int64_t max_rss_kb, bytes_read, bytes_written;
    int has_outputs;                 /* 0: none recorded (a failed or skipped stage) */
    mr_run_output *outputs;          /* name -> artifact id, as recorded */
    size_t n_outputs;
} mr_stage_run;

typedef struct mr_run_point {
    char *stage, *name;
    int64_t step;
    double value; /* NAN when stored as NULL */
} mr_run_point;

typedef struct mr_run_lineage {
    char *stage, *role, *name, *artifact; /* role: "in" or "out" */
} mr_run_lineage;

typedef struct mr_run_detail {
    mr_run_summary run;        /* with finals */
    mr_stage_run *stages;      /* in record order */
    size_t n_stages;
    mr_run_point *metrics;     /* every point, ordered by stage, name, step */
    size_t n_metrics;
    mr_run_lineage *lineage;   /* in record order */
    size_t n_lineage;
} mr_run_detail;

/* One run with its stages, metrics and lineage. MR_E_NOT_FOUND (no such
 * run), MR_E_IO, MR_E_NOMEM. *out is the caller's (mr_run_detail_free). */
mr_status mr_runstore_run_detail(mr_runstore *rs, int64_t run_id, mr_run_detail **out, mr_error *err);
void mr_run_detail_free(mr_run_detail *d);
/* The same with only each metric's last point in metrics (the finals): what
 * a page shows without a curve's every point. */
mr_status mr_runstore_run_detail_finals(mr_runstore *rs, int64_t run_id, mr_run_detail **out, mr_error *err);
/* The last record of stage in d (a stage recorded twice keeps its last), or NULL. */
const mr_stage_run *mr_run_detail_stage(const mr_run_detail *d, const char *stage);

/* ---- N runs side by side (`millrace compare`) ------------------------------ */
typedef struct mr_compare_param {
    char *path;        /* dotted leaf path */
    mr_value **values; /* one per run; NULL where the run lacks it */
    int changed;       /* the values are not all equal (absent counts as a value) */
} mr_compare_param;

typedef struct mr_compare_metric {
    char *stage, *name;
    double *values;          /* final value per run */
    unsigned char *present;  /* 1 where the run recorded it */
    int changed;
} mr_compare_metric;

typedef struct mr_compare_stage {
    char *stage;
    char **keys, **statuses; /* per run; NULL where the run has no record of it */
    int changed;             /* the keys differ */
} mr_compare_stage;

typedef struct mr_run_compare {
    size_t n_runs;
    mr_run_summary *runs;       /* in the order asked, with finals */
    mr_compare_param *params;   /* union of leaf paths, sorted */
    size_t n_params;
    mr_compare_metric *metrics; /* union of (stage, name), sorted */
    size_t n_metrics;
    mr_compare_stage *stages;   /* first-seen order over the runs */
    size_t n_stages;
} mr_run_compare;

/* Compares n_runs >= 1 runs (MR_E_INVALID_ARG for 0; MR_E_NOT_FOUND names
 * a run that does not exist). *out is the caller's (mr_run_compare_free). */
mr_status mr_runstore_compare(mr_runstore *rs, const int64_t *runs, size_t n_runs, mr_run_compare **out,
                              mr_error *err);
void mr_run_compare_free(mr_run_compare *c);

/* ---- a tune stage's trials (`millrace tune show`) ------------------------- */
typedef struct mr_trial_record {
    int trial;
    char *key, *status; /* status: complete, pruned, failed */
    double value;       /* NAN when none */
    mr_value *record;   /* the whole record (docs/tune.md): a MAP */
} mr_trial_record;

typedef struct mr_trial_list {
    int64_t run_id;          /* the newest run that recorded trials for the stage; 0 = none */
    mr_trial_record *trials;   /* in trial order; a trial recorded twice keeps its last record */
    size_t n;
} mr_trial_list;

/* The trials of stage in the newest run that recorded any (an empty list,
 * run_id 0, when none did). MR_E_IO, MR_E_PARSE (a record that is not
 * JSON), MR_E_NOMEM. *out is the caller's (mr_trial_list_free). */
mr_status mr_runstore_trials(mr_runstore *rs, const char *stage, mr_trial_list **out, mr_error *err);
void mr_trial_list_free(mr_trial_list *t);

/* ---- the stage run that produced given outputs (`millrace status`) -------- */
/* The newest record of stage whose outputs are exactly (names[i] -> ids[i]):
 * its run and key (*key_out caller-freed). MR_E_NOT_FOUND when none. */
mr_status mr_runstore_find_outputs(mr_runstore *rs, const char *stage, const char *const *names,
                                   const char *const *ids, size_t n, int64_t *run_id_out, char **key_out,
                                   mr_error *err);

/* ---- every run at once (the run browser, `millrace ui`) ------------------- */
typedef struct mr_run_table {
    mr_run_summary *runs; /* every run, newest first, with its tags and finals; a running run whose
                             process is gone reads as "killed" (nothing is written) */
    size_t n;
} mr_run_table;
/* Every run in three queries in one read transaction. MR_E_IO, MR_E_NOMEM.
 * *out is the caller's (mr_run_table_free). */
mr_status mr_runstore_all_runs(mr_runstore *rs, mr_run_table **out, mr_error *err);
void mr_run_table_free(mr_run_table *t);
/* 1 if another connection may have committed since *version was taken
 * (0 the first time; SQLite's data_version), and updates *version. */
int mr_runstore_changed(mr_runstore *rs, uint64_t *version);
/* One metric's points of a run in step order (*steps_out, *values_out
 * caller-freed with mr_free; NAN for a NULL value). MR_E_IO, MR_E_NOMEM. */
mr_status mr_runstore_metric_points(mr_runstore *rs, int64_t run_id, const char *stage, const char *name,
                                    int64_t **steps_out, double **values_out, size_t *n_out, mr_error *err);

/* ---- text and JSON --------------------------------------------------------- */
/* Appends a value as a person reads it: a scalar as written (the text it
 * was parsed from: "0.1", not 0.10000000000000001; a string without
 * quotes), a list or mapping as canonical JSON. NULL appends "-".
 * MR_E_NOMEM, MR_E_LIMIT (no mr_error). */
mr_status mr_runstore_value_text(const mr_value *v, mr_buf *out);
/* The --json documents of `runs`, `show` and `compare` (docs/cli.md),
 * appended to out. MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_run_list_json(const mr_run_list *l, mr_buf *out, mr_error *err);
mr_status mr_run_detail_json(const mr_run_detail *d, mr_buf *out, mr_error *err);
mr_status mr_run_compare_json(const mr_run_compare *c, mr_buf *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
