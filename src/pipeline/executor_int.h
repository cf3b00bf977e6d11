/* What the executor's two halves share: the local process runner
 * (executor.c) and the Slurm runner (executor_slurm.c) plan, record and
 * report stages with the same code; only how a stage runs differs. */
#ifndef MILLRACE_EXECUTOR_INT_H
#define MILLRACE_EXECUTOR_INT_H

#include "pipeline_int.h"

#include <signal.h>

enum { ST_UNSELECTED, ST_PENDING, ST_RUNNING, ST_DONE, ST_FAILED, ST_SKIPPED, ST_WOULD_RUN };

typedef struct stage_rt {
    int state;
    int cached;         /* DONE from the cache */
    int forced;
    int published;      /* FAILED, but its outputs were published (a failed check's results) */
    int cost;           /* cores it occupies while running */
    mr_proc proc;       /* the worker, while RUNNING */
    double started;     /* wall clock */
    double ended;       /* wall clock, when known from elsewhere than this process (a Slurm job); 0 = now */
    char *job_path, *result_path, *log_path;
    char *error;        /* failure message */
    char *metrics_json; /* from a cache hit */
    const char *why;    /* dry run: why it would run */
} stage_rt;

typedef struct run_ctx {
    mr_workspace *ws;
    const mr_spec *spec;
    const mr_run_opts *o;
    mr_job_remote remote;   /* the remote used as a cache (url NULL: none); strings borrowed from the spec */
    mr_dag *dag;
    mr__plan *plans;
    stage_rt *rt;
    size_t n;
    int64_t run_id;
    int budget, used;              /* cores: -j, and what running stages hold */
    uint64_t mem_budget, mem_used; /* bytes: physical RAM, and what running stages declared */
    int any_failed;
    int n_selected;
    char git_desc[80];             /* the commit ops with MR_OP_GIT_COMMIT record ("" if none or no git) */
    mr_run_result *res;
    /* Called with a stage's result before it is recorded (the Slurm runner
     * records what a cluster job wrote: its cache entries and trials). */
    void (*on_result)(struct run_ctx *c, size_t i, const mr_job_result *res);
    void *hook;
    int detached;       /* run --detach: the jobs go on; the run is not ended */
} run_ctx;


/* Set by SIGINT/SIGTERM while a run is in progress. */
extern volatile sig_atomic_t mr__g_interrupted;

/* executor.c, for executor_slurm.c */
void mr__ex_emit(run_ctx *c, mr_run_event_kind kind, size_t i, double wall_s, const char *message, const char *hint,
                 const char *log_path);
void mr__ex_fail_stage(run_ctx *c, size_t i, const char *msg);
void mr__ex_skip(run_ctx *c, size_t i); /* an upstream stage failed: skipped, reported and recorded */
/* on: SIGINT/SIGTERM set mr__g_interrupted (cleared), the old handlers into
 * old; off: the old handlers back. */
void mr__ex_signals(int on, struct sigaction old[2]);
/* Frees what c owns (rt with its strings, plans, the DAG); not ws, spec, res. */
void mr__ex_ctx_free(run_ctx *c);
void mr__ex_fail_unplanned(run_ctx *c, size_t i, const mr_error *e);
void mr__ex_stage_error_text(const mr_error *e, char *buf, size_t len);
int mr__ex_upstream_state(run_ctx *c, size_t i);
void mr__ex_record_stage(run_ctx *c, size_t i, const mr_proc_usage *ru, int64_t bytes_read, int64_t bytes_written);
void mr__ex_record_result_metrics(run_ctx *c, size_t i, const mr_job_result *res);
void mr__ex_register_output(run_ctx *c, size_t i);
void mr__ex_finish(run_ctx *c, size_t i, const mr_proc_usage *ru, int worker_ok, const char *why);
void mr__ex_plan_ready(run_ctx *c);
mr_status mr__ex_write_job(run_ctx *c, size_t i, const char *cache_dir, mr_error *err);
/* The stage's job, result and log paths under .millrace/logs/run-N/ (made). */
mr_status mr__ex_stage_paths(run_ctx *c, size_t i, mr_error *err);
/* Marks stages never started skipped, updates millrace.lock, ends the run
 * (done: scratch, one int per stage); every stage's outcome into c->res. */
void mr__ex_end_run(run_ctx *c, int *done);
mr_status mr__ex_fill_result(run_ctx *c, mr_error *err);

/* executor_slurm.c: submits the run's stale stages as Slurm jobs and
 * follows them (or returns at once with opts->detach: c->detached). What
 * goes wrong is a stage's failure, reported and recorded as such. */
void mr__slurm_run(run_ctx *c);

#endif
