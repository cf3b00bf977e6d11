/* The pipeline engine: workspace, DAG, cache keys, executor, status, lock
 * file, verify and gc. The CLI verbs are thin wrappers over these calls.
 *
 * Example (given const char *self_exe):
 *
 *   mr_workspace *ws = NULL;
 *   mr_spec *spec = NULL;
 *   mr_ops_register_builtin();
 *   if (mr_workspace_open(".", 1, 0, &ws, &err) == MR_OK &&
 *       mr_spec_load(ws->spec_path, NULL, 0, &spec, &err) == MR_OK) {
 *       mr_run_opts o = mr_run_opts_default();
 *       o.self_exe = self_exe;                   // the millrace binary that runs stage workers
 *       mr_run_result r;
 *       if (mr_pipeline_run(ws, spec, &o, &r, &err) != MR_OK) mr_log_error(&err);   // MR_E_FAILED if a stage failed
 *       for (size_t i = 0; i < r.n_stages; i++)
 *           if (r.stages[i].status) printf("%s: %s\n", r.stages[i].stage, r.stages[i].status);
 *       mr_run_result_free(&r);
 *   } else {
 *       mr_log_error(&err);
 *   }
 *   mr_spec_free(spec);
 *   mr_workspace_close(ws);
 *
 * Ownership: a workspace is the caller's (mr_workspace_close) and owns its
 * store, run store and stat cache (use them through it; do not close them).
 * A DAG is the caller's (mr_dag_free) and borrows the spec it was built
 * from: free the DAG first. A run result lives in caller storage; what it
 * points to is freed by mr_run_result_free (its stage names are borrowed
 * from the spec). Text the status, verify and gc calls write is appended
 * to the caller's mr_buf.
 * Status codes: MR_E_NOT_FOUND (no millrace.yaml, an unknown stage name),
 * MR_E_SCHEMA (a cycle, outputs declared twice or overlapping, a path
 * leaving the workspace), MR_E_FAILED (a stage failed; the result says
 * which), MR_E_INTERRUPTED (SIGINT/SIGTERM), MR_E_STATE (init over an
 * existing millrace.yaml), MR_E_IO, MR_E_CORRUPT, MR_E_NOMEM, and the
 * errors of the store and run store.
 * Thread safety: a workspace belongs to one thread. mr_pipeline_run
 * installs SIGINT/SIGTERM handlers for its duration and supervises child
 * processes: call it from the main thread, one run at a time per process
 * (other processes may run on the same workspace: the run store and
 * per-stage locks serialise them). */
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
    char *cache_dir; /* a cluster job's handle (run --executor slurm): rs is NULL, the stage cache is entry files here */
} mr_workspace;

/* Opens the workspace at dir (searching upwards for millrace.yaml when
 * search_up). create: make .millrace/ if missing. MR_E_NOT_FOUND (no
 * millrace.yaml and no .millrace/, with a hint to run `millrace init`),
 * MR_E_IO, and the store's and run store's errors. */
mr_status mr_workspace_open(const char *dir, int search_up, int create, mr_workspace **out, mr_error *err);
/* Saves the stat cache (a failure is logged as a warning) and closes
 * everything. NULL is a no-op. */
void mr_workspace_close(mr_workspace *ws);
/* Scaffolds a pipeline in dir (created): millrace.yaml (the starter ML
 * pipeline; an existing one is MR_E_STATE unless force), a generated
 * data/customers.csv and .gitignore (unless present), and .millrace/.
 * MR_E_IO, MR_E_NOMEM. */
mr_status mr_workspace_init(const char *dir, int force, mr_error *err);

/* ---- DAG ----------------------------------------------------------------- */
typedef struct mr_dag mr_dag;
/* Resolves edges (exec deps that are another stage's outs, ${stages.X}
 * references), rejects cycles (the message prints the cycle) and outputs
 * declared twice, and orders stages topologically (file order among peers).
 * MR_E_SCHEMA (a cycle, printed; outputs declared twice or overlapping; a
 * path outside the workspace), MR_E_NOT_FOUND (an unknown stage
 * reference), MR_E_NOMEM. spec is borrowed: it must outlive the DAG. */
mr_status mr_dag_build(const mr_spec *spec, mr_dag **out, mr_error *err);
void mr_dag_free(mr_dag *dag); /* NULL is a no-op */
size_t mr_dag_n(const mr_dag *dag);
/* Arrays borrowed from the DAG: mr_dag_n stage indices in topological
 * order; the indices of stage i's upstreams (*n_out of them). */
const size_t *mr_dag_order(const mr_dag *dag);                       /* stage indices, topological */
const size_t *mr_dag_upstream(const mr_dag *dag, size_t i, size_t *n_out);
/* Text (one line per stage with its inputs), or Graphviz dot, appended to
 * out (MR_E_NOMEM, MR_E_LIMIT). */
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
    MR_RUN_STAGE_NOTE,        /* message: what the run did for the stage besides running it
                                 ("registered churn version 3") */
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
    const char *remote;    /* run --remote NAME: a remote of the spec as a cache (docs/remote.md); NULL: the
                              remote whose `cache:` is set, if any */
    int no_remote;         /* run --no-remote: none */
    /* run --executor slurm (docs/cluster.md): every stale stage a Slurm job */
    int slurm;
    const char *partition, *account;   /* --partition, --account (NULL: the cluster's defaults) */
    const char *const *slurm_opts;     /* --slurm-opt: more sbatch options, each one argument ("--qos=long") */
    size_t n_slurm_opts;
    double poll_s;         /* seconds between status queries; 0: 15; never below MILLRACE_SLURM_MIN_POLL (default 1) */
    int detach;            /* submit the jobs and return; `run --attach RUN` or `status` follow them later */
    int max_retries;       /* resubmissions of a job that ended NODE_FAIL, PREEMPTED or BOOT_FAIL; -1: 2 */
} mr_run_opts;
mr_run_opts mr_run_opts_default(void); /* every field 0 / NULL */

/* One stage's outcome. */
typedef struct mr_run_stage_result {
    const char *stage;     /* borrowed from the spec */
    const char *status;    /* "executed", "cached", "failed", "skipped", "would run", "up to date" (dry),
                              "submitted" (a detached Slurm run's queued stage),
                              or NULL when the run did not select the stage */
    char key[MR_HASH_HEX_LEN + 1]; /* "" when never computed */
    char *error;           /* failed: the message (owned) */
    const char *why;       /* dry run, would run: why (static text) */
} mr_run_stage_result;

typedef struct mr_run_result {
    int64_t run_id;
    int n_executed, n_cached, n_failed, n_skipped, n_would_run;
    int interrupted;
    int detached;          /* run --detach: n_submitted stages' jobs are queued on Slurm, the run goes on */
    int n_submitted;
    mr_run_stage_result *stages; /* one per stage of the spec, in topological order (owned) */
    size_t n_stages;
} mr_run_result;
/* Frees what a run result owns (the struct itself is the caller's). */
void mr_run_result_free(mr_run_result *res);
/* Returns MR_OK when every selected stage succeeded, MR_E_FAILED when a
 * stage failed, MR_E_INTERRUPTED on SIGINT/SIGTERM; res is filled in every
 * case (free it with mr_run_result_free). Before anything runs: MR_E_NOT_FOUND
 * (an unknown stage in force, downstream or targets), the DAG's errors,
 * MR_E_IO, MR_E_NOMEM. opts and spec are borrowed for the call. */
mr_status mr_pipeline_run(mr_workspace *ws, const mr_spec *spec, const mr_run_opts *opts, mr_run_result *res,
                          mr_error *err);

/* run --attach RUN: follows the Slurm jobs of a run submitted earlier
 * (--detach, or a runner that was killed) until they end, recording each
 * stage as its job finishes, as the submitting run would have. opts gives
 * on_event, ticks, poll_s; res as mr_pipeline_run's. MR_E_NOT_FOUND (no
 * such run, or not a Slurm run), MR_E_STATE (another process follows it),
 * and mr_pipeline_run's. */
mr_status mr_pipeline_attach(mr_workspace *ws, int64_t run_id, const mr_run_opts *opts, mr_run_result *res,
                             mr_error *err);
/* One look at every Slurm run of the workspace still in progress, with
 * nobody following it: one status query per run, what finished recorded,
 * a run whose jobs all ended closed. `status` and `runs` call it, so no
 * process has to stay alive for a detached run. *n_open: runs still in
 * progress (NULL-able). Errors are warnings in the log, not failures. */
void mr_pipeline_collect(mr_workspace *ws, const char *self_exe, int *n_open);

/* The job side of a Slurm run: `millrace stage run NAME --cluster RUNDIR`
 * (task >= 0: `--task K`, one task of its job array; -1 otherwise).
 * Plans the stage from the run's copy of millrace.yaml and its upstream
 * stages' results (the runner could not: their outputs were not known when
 * it submitted), writes its job file, then works as mr_stage_worker. A
 * stage the runner planned already has its job file. */
mr_status mr_stage_cluster(const char *run_dir, const char *stage, int task, mr_error *err);
/* One task of a stage whose op splits its work (op.h `fanout`): `millrace
 * stage run NAME --cluster RUNDIR --task K` in a Slurm job array. Takes no
 * stage lock and its path locks shared, runs the op with ctx->is_task,
 * publishes nothing, writes STAGE.task-K.result.json next to the job's
 * result path. MR_E_INVALID_ARG for an op without fanout. */
mr_status mr_stage_worker_task(const char *job_path, int task, mr_error *err);

/* The worker side: `millrace stage run NAME --job FILE`. Reads the job,
 * serves it from the cache or runs the op, and writes the result file the
 * job names (job.h), failures included. Returns the stage's status (what
 * the process exits with): the op's error, MR_E_NOT_FOUND / MR_E_STATE (an
 * unknown op or another op version than planned), MR_E_STATE / MR_E_FAILED
 * (an input changed after the run planned the stage / while it ran: the
 * result is not cached), MR_E_INTERRUPTED (the runner is gone), MR_E_IO,
 * the job decoder's errors. Sets the process's log sink for the duration. */
mr_status mr_stage_worker(const char *job_path, mr_error *err);

/* Which stages are stale and why. Appends text or JSON to out; n_stale_out
 * counts stale stages. Errors: the DAG's, the store's and run store's
 * (MR_E_IO), MR_E_NOMEM. */
mr_status mr_pipeline_status(mr_workspace *ws, const mr_spec *spec, int smoke, int json, mr_buf *out,
                             int *n_stale_out, mr_error *err);
/* The same, also asking the remote named remote ("": the default one) for
 * each stale stage's key: one it has is reported "remote" (JSON: state
 * "remote", and "remote": how many), and the stages after it get keys from
 * its outputs. One request per such stage. A remote that fails: the report
 * is still written, then its error returned. */
mr_status mr_pipeline_status_remote(mr_workspace *ws, const mr_spec *spec, int smoke, int json, const char *remote,
                                    mr_buf *out, int *n_stale_out, mr_error *err);

/* Re-hashes every object; also checks what millrace.lock references.
 * Appends a report; *n_problems_out counts problems (a problem is not an
 * error: MR_OK). MR_E_IO, MR_E_NOMEM. */
mr_status mr_pipeline_verify(mr_workspace *ws, int json, mr_buf *out, int *n_problems_out, mr_error *err);
/* Deletes objects that neither millrace.lock nor the newest keep_runs runs
 * reference (keep_runs < 0: all runs). dry_run: only counts. Waits for
 * running runs to finish (a run waits for a gc the same way). Appends a
 * report to out. MR_E_IO, MR_E_CORRUPT (a kept manifest cannot be read:
 * nothing is deleted), MR_E_NOMEM. */
mr_status mr_pipeline_gc(mr_workspace *ws, int keep_runs, int dry_run, int json, mr_buf *out, mr_error *err);
/* gc of a remote of spec (remote "": the default one) instead of the local
 * store, against the same kept set: deletes the stage entries that name
 * anything else, then the manifests, then the files (docs/remote.md). */
mr_status mr_pipeline_gc_remote(mr_workspace *ws, const mr_spec *spec, const char *remote, int keep_runs, int dry_run,
                                int json, mr_buf *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
