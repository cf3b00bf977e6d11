/* The pipeline engine: workspace, DAG, cache keys, executor, status, lock
 * file, verify and gc. The CLI verbs are thin wrappers over these calls.
 *
 *   mr_workspace *ws;
 *   mr_workspace_open(".", 0, &ws, &err);
 *   mr_spec *spec;
 *   mr_spec_load(ws->spec_path, NULL, 0, &spec, &err);
 *   mr_run_opts o = mr_run_opts_default();
 *   mr_run_result r;
 *   mr_pipeline_run(ws, spec, &o, &r, &err);   // MR_E_FAILED if a stage failed
 *   mr_spec_free(spec);
 *   mr_workspace_close(ws);
 */
#ifndef MILLRACE_PIPELINE_H
#define MILLRACE_PIPELINE_H

#include "millrace/core.h"
#include "millrace/runstore.h"
#include "millrace/spec.h"
#include "millrace/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- workspace: a directory with millrace.yaml and .millrace/ ----------- */
typedef struct mr_workspace {
    char *root;      /* absolute path */
    char *dot;       /* <root>/.millrace */
    char *spec_path; /* <root>/millrace.yaml */
    char *lock_path; /* <root>/millrace.lock */
    mr_store *store;
    mr_runstore *rs;
    mr_statcache *sc;
} mr_workspace;

/* Opens the workspace at dir (searching upwards for millrace.yaml when
 * search_up). create: make .millrace/ if missing. */
mr_status mr_workspace_open(const char *dir, int search_up, int create, mr_workspace **out, mr_error *err);
/* Saves the stat cache and closes everything. */
void mr_workspace_close(mr_workspace *ws);
/* Writes a starter millrace.yaml (unless present) and .millrace/. */
mr_status mr_workspace_init(const char *dir, int force, mr_error *err);

/* ---- DAG ----------------------------------------------------------------- */
typedef struct mr_dag mr_dag;
/* Resolves edges (exec deps that are another stage's outs, ${stages.X}
 * references), rejects cycles (the message prints the cycle) and outputs
 * declared twice, and orders stages topologically (file order among peers). */
mr_status mr_dag_build(const mr_spec *spec, mr_dag **out, mr_error *err);
void mr_dag_free(mr_dag *dag);
size_t mr_dag_n(const mr_dag *dag);
const size_t *mr_dag_order(const mr_dag *dag);                       /* stage indices, topological */
const size_t *mr_dag_upstream(const mr_dag *dag, size_t i, size_t *n_out);
/* Text (one line per stage with its inputs), or Graphviz dot. */
mr_status mr_dag_render(const mr_dag *dag, int dot, mr_buf *out);

/* ---- run -----------------------------------------------------------------
 * The library prints nothing while it runs a pipeline: it reports events to
 * opts->on_event (the CLI prints them) and returns every stage's outcome in
 * the result. */
typedef enum mr_run_event_kind {
    MR_RUN_STAGE_STARTED = 1, /* a stage worker was started (log_path) */
    MR_RUN_STAGE_CACHED,      /* served from the cache */
    MR_RUN_STAGE_DONE,        /* executed (wall_s, log_path) */
    MR_RUN_STAGE_FAILED,      /* message, hint, log_path (NULL when it never started) */
    MR_RUN_STAGE_SKIPPED,     /* an upstream stage failed */
    MR_RUN_STAGE_WARNING,     /* message: a warning the stage logged */
    MR_RUN_TICK,              /* while stages run, about 20 times a second (opts->ticks) */
} mr_run_event_kind;

typedef struct mr_run_event {
    mr_run_event_kind kind;
    const char *stage;    /* NULL for MR_RUN_TICK */
    double wall_s;        /* DONE, FAILED: seconds the stage ran */
    const char *message;  /* FAILED: the error; WARNING: the warning; TICK: "running: train 2.1s, eval 0.3s" */
    const char *hint;     /* FAILED: the error's hint, or NULL */
    const char *log_path; /* the stage's log file, or NULL */
    int n_done;           /* stages finished so far (any outcome) */
    int n_selected;       /* stages this run considers */
} mr_run_event;
/* Called on the runner's thread; the event and its strings are valid only
 * during the call. */
typedef void (*mr_run_event_fn)(void *ctx, const mr_run_event *ev);

typedef struct mr_run_opts {
    int jobs;              /* core budget; 0 = number of CPUs */
    int keep_going;        /* on failure, keep running independent stages (default on for those) */
    int dry;               /* show what would run, run nothing */
    int smoke;
    int force_all;
    const char *const *force;      /* stages to run even if cached */
    size_t n_force;
    const char *const *downstream; /* these stages and everything after them are forced */
    size_t n_downstream;
    const char *const *targets;    /* only these stages and their upstreams (none = all) */
    size_t n_targets;
    const char *argv;      /* recorded in the run store */
    const char *self_exe;  /* path of the millrace binary for stage workers */
    mr_run_event_fn on_event; /* NULL: no events */
    void *event_ctx;
    int ticks;             /* 1: also send MR_RUN_TICK while stages run (a live progress line) */
    const char *name;      /* run --name: recorded in the run store (NULL = none) */
    const char *const *tags; /* run --tag: "KEY" or "KEY=VALUE" (mr_run_tag_check) */
    size_t n_tags;
} mr_run_opts;
mr_run_opts mr_run_opts_default(void);

/* One stage's outcome. */
typedef struct mr_run_stage_result {
    const char *stage;     /* borrowed from the spec */
    const char *status;    /* "executed", "cached", "failed", "skipped", "would run", "up to date" (dry),
                              or NULL when the run did not select the stage */
    char key[MR_HASH_HEX_LEN + 1]; /* "" when never computed */
    char *error;           /* failed: the message (owned) */
    const char *why;       /* dry run, would run: why (static text) */
} mr_run_stage_result;

typedef struct mr_run_result {
    int64_t run_id;
    int n_executed, n_cached, n_failed, n_skipped, n_would_run;
    int interrupted;
    mr_run_stage_result *stages; /* one per stage of the spec, in topological order (owned) */
    size_t n_stages;
} mr_run_result;
/* Frees what a run result owns (the struct itself is the caller's). */
void mr_run_result_free(mr_run_result *res);
/* Returns MR_OK when every selected stage succeeded, MR_E_FAILED when a
 * stage failed, MR_E_INTERRUPTED on SIGINT/SIGTERM; res is filled in every
 * case (free it with mr_run_result_free). */
mr_status mr_pipeline_run(mr_workspace *ws, const mr_spec *spec, const mr_run_opts *opts, mr_run_result *res,
                          mr_error *err);

/* The worker side: `millrace stage run NAME --job FILE`. */
mr_status mr_stage_worker(const char *job_path, mr_error *err);

/* Which stages are stale and why. Appends text or JSON to out; n_stale_out
 * counts stale stages. */
mr_status mr_pipeline_status(mr_workspace *ws, const mr_spec *spec, int smoke, int json, mr_buf *out,
                             int *n_stale_out, mr_error *err);

/* Re-hashes every object; also checks what millrace.lock references.
 * Appends a report; *n_problems_out counts problems. */
mr_status mr_pipeline_verify(mr_workspace *ws, int json, mr_buf *out, int *n_problems_out, mr_error *err);
/* Deletes objects that neither millrace.lock nor the newest keep_runs runs
 * reference (keep_runs < 0: all runs). */
mr_status mr_pipeline_gc(mr_workspace *ws, int keep_runs, int dry_run, int json, mr_buf *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
