/* The Slurm executor: `millrace run --executor slurm` (docs/cluster.md).
 *
 * millrace grows no scheduler of its own: every stale stage of the plan is
 * submitted at once, as one `sbatch --parsable` job each, running `millrace
 * stage run NAME --cluster RUNDIR` in the workspace (a filesystem every node
 * shares), with `--dependency=afterok:` on the jobs of its stale upstream
 * stages and `--kill-on-invalid-dep=yes`. Cached stages are never
 * submitted. A stage downstream of a stale one cannot have its key yet (its
 * inputs are outputs not computed), so its job plans it when it starts
 * (mr_stage_cluster): from the run's copy of millrace.yaml and its upstream
 * jobs' result files.
 *
 * The runner follows the jobs with one `sacct` query per interval for all
 * of them, backs off while accounting does not answer (a failed query never
 * fails a job), records each stage from its job's result file when sacct
 * says the job ended, retries jobs that ended NODE_FAIL, PREEMPTED or
 * BOOT_FAIL (with the jobs after them, which Slurm cancelled), resubmits
 * OUT_OF_MEMORY with twice the memory where the stage allows it, and
 * cancels what it submitted on SIGINT/SIGTERM. With --detach it returns
 * after submitting; RUNDIR/slurm.json holds what a later follower (run
 * --attach, or `status`/`runs` through mr_pipeline_collect) needs. Jobs
 * never write runs.db: they report through their result files and the
 * stage cache's entry files (stagecache.c), and the runner records both. */
#define _GNU_SOURCE
#include "executor_int.h"
#include "millrace/spec.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define CLUSTER_FORMAT "millrace-cluster-run"
#define STATE_FORMAT "millrace-slurm-state"
#define CLUSTER_VERSION 1
#define DEFAULT_POLL_S 15.0
#define DEFAULT_MIN_POLL_S 1.0
#define DEFAULT_RETRIES 2
#define MAX_BACKOFF 8     /* x the interval, while sacct fails */
#define CMD_TIMEOUT_S 120 /* sbatch, sacct, scancel */
#define FILE_LIMIT ((size_t)64 << 20)

typedef struct sl_stage {
    char job_id[32];   /* the current job ("" before submission) */
    int active;        /* submitted, not yet ended as far as the runner knows */
    int attempts;      /* submissions */
    int oom_doublings; /* times its memory was doubled */
    int64_t mem_mb;    /* --mem of the current job, 0 = none */
    double submitted;
    char state[32];    /* sacct's State of the current job ("" = not seen yet) */
    int exit_code, exit_signal;
    char nodes[256];
    double elapsed_s, start, end;
    int64_t max_rss_kb;
    int seen_running;
    char array_id[32]; /* its op's pieces as a job array before it (tune trials), "" = none */
    int n_tasks;
} sl_stage;

typedef struct sl_ctx {
    run_ctx *c;
    sl_stage *st;
    char *run_dir, *cache_dir, *spec_copy, *self_exe;
    char *partition, *account;
    char **opts;
    size_t n_opts;
    double poll_s;
    int max_retries;
    int n_queries;
    int backoff;
    int warned;
    mr_flock lock; /* RUNDIR/follow.lock: one follower per run */
    char job_name[48]; /* millrace-<workspace>-<run>: every job of the run */
} sl_ctx;

/* ---- small helpers ---------------------------------------------------------------- */

static void sh_quote(mr_buf *b, const char *s)
{
    mr_buf_append(b, "'", 1);
    for (; *s; s++) {
        if (*s == '\'') mr_buf_puts(b, "'\\''");
        else mr_buf_append(b, s, 1);
    }
    mr_buf_append(b, "'", 1);
}

static double env_seconds(const char *name, double dflt)
{
    const char *v = getenv(name);
    char *end;
    double d = v && *v ? strtod(v, &end) : dflt;
    return v && *v && (*end || !(d > 0) || !isfinite(d)) ? dflt : d;
}

/* Runs a Slurm command; a non-zero exit is MR_E_IO with its stderr. */
static mr_status slurm_cmd(char *const argv[], mr_buf *out, mr_error *err)
{
    mr_buf eb;
    mr_buf_init(&eb);
    int code = -1;
    mr_status rc = mr_proc_capture(argv, CMD_TIMEOUT_S, out, &eb, &code, err);
    if (rc == MR_OK && code != 0) {
        while (eb.len && (eb.data[eb.len - 1] == '\n' || eb.data[eb.len - 1] == ' ')) eb.data[--eb.len] = '\0';
        /* its last line says what went wrong (sacct prints the chain of causes before it) */
        const char *msg = eb.len ? eb.data : "no message";
        const char *nl = eb.len ? strrchr(eb.data, '\n') : NULL;
        if (nl) msg = nl + 1;
        rc = code == 127 ? MR_ERR(err, MR_E_IO, "%s: %s", argv[0], msg)
                         : MR_ERR(err, MR_E_IO, "%s exited with status %d: %.400s", argv[0], code, msg);
        if (code == 127) mr_error_hint(err, "the Slurm client commands (sbatch, sacct, scancel) must be on PATH");
    }
    mr_buf_free(&eb);
    return rc;
}

static int terminal_state(const char *s)
{
    static const char *const live[] = {"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "CONFIGURING",
                                       "COMPLETING", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT",
                                       "STOPPED", "SPECIAL_EXIT", ""};
    for (size_t k = 0; k < sizeof(live) / sizeof(live[0]); k++)
        if (!strcmp(s, live[k])) return 0;
    return 1;
}

static int retry_state(const char *s)
{
    return !strcmp(s, "NODE_FAIL") || !strcmp(s, "PREEMPTED") || !strcmp(s, "BOOT_FAIL");
}

/* "2026-12-04T01:02:03" (local time) -> epoch seconds; 0 for Unknown/None. */
static double slurm_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || *end) return 0;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? 0 : (double)t;
}

/* sacct's MaxRSS: "1234K", "12M", "1G", "0" -> KiB. */
static int64_t slurm_kb(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return 0;
    double mul = *end == 'K' ? 1 : *end == 'M' ? 1024 : *end == 'G' ? 1048576 : *end == 'T' ? 1073741824.0 : 1.0 / 1024;
    return (int64_t)(v * mul);
}

/* ---- the run's files ----------------------------------------------------------------- */

static char *run_file(const sl_ctx *sl, const char *name) { return mr_path_join(sl->run_dir, name); }

/* RUNDIR/NAME from j, atomically (j NULL: it could not be built: out of memory). */
static mr_status write_json(sl_ctx *sl, const char *name, json_t *j, mr_error *err)
{
    char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    char *path = run_file(sl, name);
    mr_status rc = text && path ? mr_fs_write_atomic(path, text, strlen(text), err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    free(text);
    mr_free(path);
    return rc;
}

/* RUNDIR/cluster.json: what every job of the run reads to plan itself. */
static mr_status write_cluster_file(sl_ctx *sl, mr_error *err)
{
    run_ctx *c = sl->c;
    json_t *j = json_object(), *ov = json_array(), *forced = json_array(), *done = json_object(), *threads = json_object();
    int ok = j && ov && forced && done && threads;
    for (size_t k = 0; ok && k < c->spec->n_overrides; k++) ok = json_array_append_new(ov, json_string(c->spec->overrides[k])) == 0;
    for (size_t i = 0; ok && i < c->n; i++) {
        const char *name = c->spec->stages[i].name;
        if (c->rt[i].forced) ok = json_array_append_new(forced, json_string(name)) == 0;
        int cost = (int)(c->spec->stages[i].cpus + 0.999);
        if (ok) ok = json_object_set_new(threads, name, json_integer(cost < 1 ? 1 : cost)) == 0;
        if (ok && c->rt[i].state == ST_DONE) {
            json_t *o = json_object();
            for (size_t k = 0; o && k < c->plans[i].n_outs; k++)
                if (json_object_set_new(o, c->plans[i].outs[k].name, json_string(c->plans[i].outs[k].id)) != 0) ok = 0;
            ok = ok && o && json_object_set_new(done, name, o) == 0;
        }
    }
    if (ok) {
        json_object_set_new(j, "format", json_string(CLUSTER_FORMAT));
        json_object_set_new(j, "version", json_integer(CLUSTER_VERSION));
        json_object_set_new(j, "run_id", json_integer((json_int_t)c->run_id));
        json_object_set_new(j, "workspace", json_string(c->ws->root));
        json_object_set_new(j, "spec_path", json_string(c->spec->path ? c->spec->path : c->ws->spec_path));
        json_object_set_new(j, "spec_copy", json_string(sl->spec_copy));
        json_object_set_new(j, "cache_dir", json_string(sl->cache_dir));
        json_object_set_new(j, "smoke", json_boolean(c->o->smoke));
        json_object_set_new(j, "git_commit", json_string(c->git_desc));
        json_object_set_new(j, "overrides", ov);
        json_object_set_new(j, "forced", forced);
        json_object_set_new(j, "threads", threads);
        json_object_set_new(j, "done", done);
        ov = forced = done = threads = NULL;
        if (c->remote.url)
            json_object_set_new(j, "remote", json_pack("{s:s,s:s?,s:s?,s:b,s:b}", "url", c->remote.url, "endpoint",
                                                       c->remote.endpoint, "region", c->remote.region, "pull",
                                                       c->remote.pull, "push", c->remote.push));
        ok = json_object_size(j) == 13u + (c->remote.url != NULL);
    }
    json_decref(ov);
    json_decref(forced);
    json_decref(done);
    json_decref(threads);
    mr_status rc = write_json(sl, "cluster.json", ok ? j : NULL, err);
    json_decref(j);
    return rc;
}

static const char *state_name(const stage_rt *r)
{
    switch (r->state) {
    case ST_UNSELECTED: return "unselected";
    case ST_DONE: return r->cached ? "cached" : "done";
    case ST_FAILED: return "failed";
    case ST_SKIPPED: return "skipped";
    case ST_RUNNING: return "active";
    default: return "pending";
    }
}

/* RUNDIR/slurm.json: the follower's state, rewritten at every change. */
static mr_status save_state(sl_ctx *sl, mr_error *err)
{
    run_ctx *c = sl->c;
    json_t *j = json_object(), *stages = json_object(), *opts = json_array();
    int ok = j && stages && opts;
    for (size_t k = 0; ok && k < sl->n_opts; k++) ok = json_array_append_new(opts, json_string(sl->opts[k])) == 0;
    for (size_t i = 0; ok && i < c->n; i++) {
        const sl_stage *t = &sl->st[i];
        const stage_rt *r = &c->rt[i];
        json_t *outs = json_object();
        for (size_t k = 0; outs && (r->state == ST_DONE || r->published) && k < c->plans[i].n_outs; k++)
            if (json_object_set_new(outs, c->plans[i].outs[k].name, json_string(c->plans[i].outs[k].id)) != 0) ok = 0;
        json_t *e = outs ? json_pack("{s:s,s:s,s:i,s:i,s:I,s:f,s:s,s:o,s:b,s:s?,s:s,s:i}", "state", state_name(r), "job_id",
                                     t->job_id, "attempts", t->attempts, "oom_doublings", t->oom_doublings, "mem_mb",
                                     (json_int_t)t->mem_mb, "submitted", t->submitted, "key", c->plans[i].key, "outputs", outs,
                                     "published", r->published, "error", r->error, "array_id", t->array_id, "n_tasks",
                                     t->n_tasks)
                         : NULL;
        ok = ok && e && json_object_set_new(stages, c->spec->stages[i].name, e) == 0;
    }
    if (ok) {
        json_object_set_new(j, "format", json_string(STATE_FORMAT));
        json_object_set_new(j, "version", json_integer(CLUSTER_VERSION));
        json_object_set_new(j, "run_id", json_integer((json_int_t)c->run_id));
        json_object_set_new(j, "self_exe", json_string(sl->self_exe));
        json_object_set_new(j, "partition", sl->partition ? json_string(sl->partition) : json_null());
        json_object_set_new(j, "account", sl->account ? json_string(sl->account) : json_null());
        json_object_set_new(j, "slurm_opts", opts);
        json_object_set_new(j, "poll_s", json_real(sl->poll_s));
        json_object_set_new(j, "max_retries", json_integer(sl->max_retries));
        json_object_set_new(j, "keep_going", json_boolean(c->o->keep_going));
        json_object_set_new(j, "stages", stages);
        opts = stages = NULL;
        ok = json_object_size(j) == 11;
    }
    json_decref(opts);
    json_decref(stages);
    mr_status rc = write_json(sl, "slurm.json", ok ? j : NULL, err);
    json_decref(j);
    return rc;
}

static void save_state_warn(sl_ctx *sl)
{
    mr_error e;
    mr_error_init(&e);
    if (save_state(sl, &e) != MR_OK) mr_log(MR_LOG_WARN, "run %lld: %s", (long long)sl->c->run_id, e.msg);
}

/* ---- submitting ---------------------------------------------------------------------- */

static mr_status write_script(sl_ctx *sl, size_t i, int tasks, char **path_out, mr_error *err)
{
    const char *name = sl->c->spec->stages[i].name;
    mr_buf b;
    mr_buf_init(&b);
    mr_buf_printf(&b, "#!/bin/sh\n# millrace run %lld, stage %s%s: written by the runner (docs/cluster.md)\nexec ",
                  (long long)sl->c->run_id, name, tasks ? ", one task of its job array" : "");
    sh_quote(&b, sl->self_exe);
    mr_buf_puts(&b, " stage run ");
    sh_quote(&b, name);
    mr_buf_puts(&b, " --cluster ");
    sh_quote(&b, sl->run_dir);
    if (tasks) mr_buf_puts(&b, " --task \"$SLURM_ARRAY_TASK_ID\"");
    mr_buf_puts(&b, "\n");
    char *fname = mr_asprintf(tasks ? "%s.task.sh" : "%s.sh", name);
    char *path = fname ? run_file(sl, fname) : NULL;
    mr_free(fname);
    mr_status rc = b.failed ? MR_ERR(err, MR_E_NOMEM, "out of memory") : path ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_fs_write_atomic(path, b.data, b.len, err);
    if (rc == MR_OK && chmod(path, 0755) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot make it executable", path);
    mr_buf_free(&b);
    if (rc != MR_OK) {
        mr_free(path);
        path = NULL;
    }
    *path_out = path;
    return rc;
}

/* One sbatch for stage i after the current jobs of its active upstreams:
 * its own job, or (n_tasks > 0) its op's pieces as a job array, at most
 * parallel at once. The job id into id (of size idlen). */
static mr_status sbatch_stage(sl_ctx *sl, size_t i, int n_tasks, int parallel, char *id, size_t idlen, mr_error *err)
{
    run_ctx *c = sl->c;
    const mr_stage_spec *s = &c->spec->stages[i];
    sl_stage *t = &sl->st[i];
    char *script = NULL;
    mr_status rc = write_script(sl, i, n_tasks > 0, &script, err);
    if (rc != MR_OK) return rc;
    enum { MAX_ARGS = 24 };
    size_t cap = MAX_ARGS + sl->n_opts;
    char **argv = mr_calloc(cap + 1, sizeof(*argv));
    mr_buf dep;
    mr_buf_init(&dep);
    size_t n_up;
    const size_t *up = mr_dag_upstream(c->dag, i, &n_up);
    for (size_t u = 0; u < n_up; u++)
        if (sl->st[up[u]].active && sl->st[up[u]].job_id[0])
            mr_buf_printf(&dep, "%s%s", dep.len ? ":" : "--dependency=afterok:", sl->st[up[u]].job_id);
    /* the stage's job runs after its array whatever became of it: it computes any piece missing */
    if (!n_tasks && t->array_id[0]) mr_buf_printf(&dep, "%safterany:%s", dep.len ? "," : "--dependency=", t->array_id);
    int cpus = (int)(s->cpus + 0.999);
    if (cpus < 1) cpus = 1;
    if (n_tasks && (cpus /= parallel) < 1) cpus = 1; /* a trial's share, as in the stage */
    if (t->mem_mb == 0 && s->mem_bytes) t->mem_mb = (int64_t)((s->mem_bytes + (1 << 20) - 1) >> 20);
    char *a[MAX_ARGS];
    size_t na = 0;
    a[na++] = mr_strdup("sbatch");
    a[na++] = mr_strdup("--parsable");
    a[na++] = mr_asprintf("--job-name=%s", sl->job_name);
    a[na++] = n_tasks ? mr_asprintf("--output=%s.task-%%a", c->rt[i].log_path) : mr_asprintf("--output=%s", c->rt[i].log_path);
    a[na++] = mr_strdup("--open-mode=append");
    a[na++] = mr_asprintf("--chdir=%s", c->ws->root);
    a[na++] = mr_asprintf("--cpus-per-task=%d", cpus);
    a[na++] = mr_strdup("--kill-on-invalid-dep=yes");
    if (n_tasks) a[na++] = mr_asprintf("--array=0-%d%%%d", n_tasks - 1, parallel);
    if (t->mem_mb) a[na++] = mr_asprintf("--mem=%lldM", (long long)t->mem_mb);
    if (s->time[0]) a[na++] = mr_asprintf("--time=%s", s->time);
    if (s->gpus) a[na++] = mr_asprintf("--gpus=%d", s->gpus);
    /* training across ranks: the job holds a task per rank, srun starts them */
    const mr_value *dist = mr_value_get(s->def, "distributed"), *ranks = dist ? mr_value_get(dist, "ranks") : NULL;
    if (!n_tasks && !c->o->smoke && ranks && ranks->kind == MR_V_INT && ranks->u.i > 1)
        a[na++] = mr_asprintf("--ntasks=%lld", (long long)ranks->u.i);
    if (s->partition[0] || sl->partition) a[na++] = mr_asprintf("--partition=%s", s->partition[0] ? s->partition : sl->partition);
    if (sl->account) a[na++] = mr_asprintf("--account=%s", sl->account);
    if (dep.len) a[na++] = mr_strdup(dep.data);
    int ok = argv && !dep.failed;
    for (size_t k = 0; k < na; k++) ok = ok && a[k];
    size_t m = 0;
    for (size_t k = 0; k < na; k++) {
        if (argv) argv[m++] = a[k];
        else mr_free(a[k]);
    }
    for (size_t k = 0; argv && k < sl->n_opts; k++) argv[m++] = sl->opts[k]; /* borrowed */
    if (argv) argv[m++] = script;
    mr_buf out;
    mr_buf_init(&out);
    rc = ok ? slurm_cmd(argv, &out, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        /* --parsable: "JOBID" or "JOBID;CLUSTER" */
        size_t len = 0;
        while (len < out.len && out.data[len] >= '0' && out.data[len] <= '9') len++;
        if (len == 0 || len >= idlen)
            rc = MR_ERR(err, MR_E_PARSE, "sbatch printed no job id (got \"%.60s\")", out.data ? out.data : "");
        else {
            memcpy(id, out.data, len);
            id[len] = '\0';
        }
    }
    if (rc != MR_OK) mr_error_stage(err, s->name);
    for (size_t k = 0; argv && k < na; k++) mr_free(argv[k]);
    mr_free(argv);
    mr_free(script);
    mr_buf_free(&out);
    mr_buf_free(&dep);
    return rc;
}

/* Submits stage i: first, once, its op's pieces as a job array (a tune
 * stage's trials), then its own job. */
static mr_status submit(sl_ctx *sl, size_t i, mr_error *err)
{
    run_ctx *c = sl->c;
    const mr_stage_spec *s = &c->spec->stages[i];
    sl_stage *t = &sl->st[i];
    int n_tasks = 0, parallel = 1;
    mr_error fe;
    mr_error_init(&fe);
    if (!t->array_id[0] && s->op->fanout) {
        int cpus = (int)(s->cpus + 0.999);
        if (s->op->fanout(s->def, c->o->smoke, cpus < 1 ? 1 : cpus, &n_tasks, &parallel, &fe) != MR_OK) n_tasks = 0;
    }
    if (n_tasks > 1) {
        mr_status rc = sbatch_stage(sl, i, n_tasks, parallel, t->array_id, sizeof(t->array_id), err);
        if (rc != MR_OK) return rc;
        t->n_tasks = n_tasks;
        char msg[160];
        snprintf(msg, sizeof(msg), "its %d pieces submitted as Slurm job array %s (%d at once)", n_tasks, t->array_id, parallel);
        mr__ex_emit(c, MR_RUN_STAGE_NOTE, i, 0, msg, NULL, NULL);
    }
    mr_status rc = sbatch_stage(sl, i, 0, 1, t->job_id, sizeof(t->job_id), err);
    if (rc != MR_OK) return rc;
    t->active = 1;
    t->attempts++;
    t->submitted = mr_wall_time();
    t->state[0] = '\0';
    t->seen_running = 0;
    t->nodes[0] = '\0';
    t->max_rss_kb = 0;
    char msg[128];
    snprintf(msg, sizeof(msg), "submitted as Slurm job %s%s", t->job_id, t->attempts > 1 ? " (again)" : "");
    mr__ex_emit(c, MR_RUN_STAGE_NOTE, i, 0, msg, NULL, NULL);
    return MR_OK;
}

static void cancel_jobs(sl_ctx *sl, int only_pending)
{
    run_ctx *c = sl->c;
    char **argv = mr_calloc(2 * c->n + 2, sizeof(*argv));
    if (!argv) return;
    size_t m = 0;
    argv[m++] = "scancel";
    for (size_t i = 0; i < c->n; i++) {
        sl_stage *t = &sl->st[i];
        if (!t->active || !t->job_id[0]) continue;
        if (only_pending && strcmp(t->state, "PENDING") && t->state[0]) continue;
        argv[m++] = t->job_id;
        if (t->array_id[0]) argv[m++] = t->array_id;
    }
    if (m > 1) {
        mr_error e;
        mr_error_init(&e);
        if (slurm_cmd(argv, NULL, &e) != MR_OK) mr_log(MR_LOG_WARN, "cancelling the run's jobs: %s", e.msg);
    }
    mr_free(argv);
}

/* ---- following ------------------------------------------------------------------------- */

static ssize_t stage_of_job(sl_ctx *sl, const char *id, size_t len)
{
    for (size_t i = 0; i < sl->c->n; i++)
        if (sl->st[i].active && strlen(sl->st[i].job_id) == len && !memcmp(sl->st[i].job_id, id, len)) return (ssize_t)i;
    return -1;
}

/* One sacct for every active job: their states, exit codes, nodes, times and peak RSS. */
static mr_status query(sl_ctx *sl, mr_error *err)
{
    run_ctx *c = sl->c;
    mr_buf ids;
    mr_buf_init(&ids);
    for (size_t i = 0; i < c->n; i++)
        if (sl->st[i].active) mr_buf_printf(&ids, "%s%s", ids.len ? "," : "", sl->st[i].job_id);
    if (!ids.len) return MR_OK;
    if (ids.failed) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *argv[] = {"sacct", "-n", "-P", "-o", "JobIDRaw,State,ExitCode,NodeList,ElapsedRaw,MaxRSS,Start,End", "-j", ids.data, NULL};
    mr_buf out;
    mr_buf_init(&out);
    sl->n_queries++;
    mr_status rc = slurm_cmd(argv, &out, err);
    mr_buf_free(&ids);
    for (char *line = out.data; rc == MR_OK && line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *f[8];
        int nf = 0;
        for (char *p = line; nf < 8;) {
            f[nf++] = p;
            char *bar = strchr(p, '|');
            if (!bar) break;
            *bar = '\0';
            p = bar + 1;
        }
        if (nf == 8) {
            const char *dot = strchr(f[0], '.');
            ssize_t i = stage_of_job(sl, f[0], dot ? (size_t)(dot - f[0]) : strlen(f[0]));
            if (i >= 0 && !dot) {
                sl_stage *t = &sl->st[i];
                char *sp = strchr(f[1], ' '); /* "CANCELLED by 0" */
                if (sp) *sp = '\0';
                snprintf(t->state, sizeof(t->state), "%s", f[1]);
                t->exit_code = atoi(f[2]);
                const char *colon = strchr(f[2], ':');
                t->exit_signal = colon ? atoi(colon + 1) : 0;
                if (strcmp(f[3], "None assigned")) snprintf(t->nodes, sizeof(t->nodes), "%s", f[3]);
                t->elapsed_s = atof(f[4]);
                t->start = slurm_time(f[6]);
                t->end = slurm_time(f[7]);
            } else if (i >= 0) {
                /* accounting may show the allocation PENDING while its batch step runs */
                if (!strcmp(f[1], "RUNNING") && !strcmp(sl->st[i].state, "PENDING")) snprintf(sl->st[i].state, sizeof(sl->st[i].state), "RUNNING");
                int64_t kb = slurm_kb(f[5]);
                if (kb > sl->st[i].max_rss_kb) sl->st[i].max_rss_kb = kb;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    mr_buf_free(&out);
    return rc;
}

static void record_job(sl_ctx *sl, size_t i)
{
    const sl_stage *t = &sl->st[i];
    mr_job_record j = {
        .stage = sl->c->spec->stages[i].name,
        .attempt = t->attempts,
        .job_id = t->job_id,
        .state = t->state,
        .exit_code = t->exit_code,
        .exit_signal = t->exit_signal,
        .nodes = t->nodes,
        .elapsed_s = t->elapsed_s,
        .max_rss_kb = t->max_rss_kb,
        .mem_mb = t->mem_mb,
        .submitted = t->submitted,
    };
    mr_error e;
    mr_error_init(&e);
    if (mr_runstore_job_add(sl->c->ws->rs, sl->c->run_id, &j, &e) != MR_OK) mr_log(MR_LOG_WARN, "run store: %s", e.msg);
}

/* The result of a cluster job: the stage-cache entries and trials it wrote
 * go into runs.db (the runner is its only writer). */
static void import_result(run_ctx *c, size_t i, const mr_job_result *res)
{
    sl_ctx *sl = c->hook;
    mr_error e;
    mr_runstore_batch_begin(c->ws->rs, NULL);
    /* the pieces its array's tasks cached (their trials are the stage job's to record) */
    for (int k = 0; k < sl->st[i].n_tasks; k++) {
        char *fname = mr_asprintf("%s.task-%d.result.json", c->spec->stages[i].name, k);
        char *path = fname ? run_file(sl, fname) : NULL;
        mr_job_result tr;
        mr_job_result_init(&tr);
        mr_error_init(&e);
        if (path && mr_fs_exists(path) && mr_job_result_read(path, &tr, &e) == MR_OK)
            for (size_t q = 0; q < tr.n_cache_entries; q++) {
                mr_error_init(&e);
                if (mr__cache_import(c->ws, sl->cache_dir, tr.cache_entries[q], c->run_id, &e) != MR_OK)
                    mr_log(MR_LOG_WARN, "stage '%s': task %d's cache entry is not recorded: %s", c->spec->stages[i].name, k, e.msg);
            }
        mr_job_result_deinit(&tr);
        mr_free(fname);
        mr_free(path);
    }
    for (size_t k = 0; k < res->n_cache_entries; k++) {
        mr_error_init(&e);
        if (mr__cache_import(c->ws, sl->cache_dir, res->cache_entries[k], c->run_id, &e) != MR_OK)
            mr_log(MR_LOG_WARN, "stage '%s': its cache entry %s is not recorded: %s", c->spec->stages[i].name,
                   res->cache_entries[k], e.msg);
    }
    for (size_t k = 0; k < res->n_trials; k++) {
        const mr_job_trial *t = &res->trials[k];
        mr_error_init(&e);
        if (mr_runstore_trial_add(c->ws->rs, c->run_id, c->spec->stages[i].name, t->trial, t->key, t->status, t->value,
                                  t->record_json, &e) != MR_OK)
            mr_log(MR_LOG_WARN, "run store: %s", e.msg);
    }
    mr_runstore_batch_end(c->ws->rs, NULL);
}

/* A stage its job planned: its key and input ids, from the job file. */
static void adopt_job_plan(sl_ctx *sl, size_t i)
{
    run_ctx *c = sl->c;
    mr__plan *p = &c->plans[i];
    if (p->key[0] || !mr_fs_exists(c->rt[i].job_path)) return;
    mr_job job;
    mr_error e;
    mr_error_init(&e);
    if (mr_job_read(c->rt[i].job_path, &job, &e) != MR_OK) {
        mr_job_deinit(&job);
        return;
    }
    if (!p->n_ins) mr__plan_inputs(c->dag, i, c->plans, &e);
    for (size_t k = 0; k < p->n_ins; k++)
        for (size_t q = 0; q < job.n_inputs; q++)
            if (!strcmp(p->ins[k].name, job.inputs[q].name))
                snprintf(p->ins[k].id, sizeof(p->ins[k].id), "%s", job.inputs[q].id);
    snprintf(p->key, sizeof(p->key), "%s", job.key);
    mr_free(p->key_doc);
    p->key_doc = job.key_doc;
    job.key_doc = NULL;
    mr_job_deinit(&job);
}

static void resubmit_after(sl_ctx *sl, size_t i);

/* Resubmits stage i, then the active stages after it: their afterok on its
 * old job can never be met, so Slurm cancelled them or will. */
static void resubmit(sl_ctx *sl, size_t i, const char *why)
{
    run_ctx *c = sl->c;
    char msg[256];
    snprintf(msg, sizeof(msg), "Slurm job %s ended %s; resubmitting (attempt %d)", sl->st[i].job_id, why, sl->st[i].attempts + 1);
    mr__ex_emit(c, MR_RUN_STAGE_NOTE, i, 0, msg, NULL, NULL);
    unlink(c->rt[i].result_path);
    mr_error e;
    mr_error_init(&e);
    if (submit(sl, i, &e) != MR_OK) {
        sl->st[i].active = 0;
        mr__ex_fail_unplanned(c, i, &e);
        return;
    }
    resubmit_after(sl, i);
}

static void resubmit_after(sl_ctx *sl, size_t i)
{
    run_ctx *c = sl->c;
    const size_t *order = mr_dag_order(c->dag);
    char *cancel[2] = {"scancel", NULL};
    /* the stages after i, in one pass in topological order */
    unsigned char *after = mr_calloc(c->n ? c->n : 1, 1);
    if (!after) return;
    after[i] = 1;
    for (size_t k = 0; k < c->n; k++) {
        size_t d = order[k], n_up;
        const size_t *up = mr_dag_upstream(c->dag, d, &n_up);
        for (size_t u = 0; u < n_up && !after[d]; u++) after[d] = after[up[u]];
    }
    for (size_t k = 0; k < c->n; k++) {
        size_t d = order[k];
        sl_stage *t = &sl->st[d];
        if (d == i || !t->active || !after[d]) continue;
        char *argv[] = {cancel[0], t->job_id, t->array_id[0] ? t->array_id : NULL, NULL};
        slurm_cmd(argv, NULL, NULL); /* it may be gone already */
        t->attempts--;               /* not its own failure */
        t->array_id[0] = '\0';      /* its array waited on the same dead job: submitted again too */
        t->n_tasks = 0;
        mr_error e;
        mr_error_init(&e);
        if (submit(sl, d, &e) != MR_OK) {
            t->active = 0;
            mr__ex_fail_unplanned(c, d, &e);
        }
    }
    mr_free(after);
}

/* Accounting samples memory (JobAcctGatherFrequency): a job shorter than
 * that has no MaxRSS there; the worker's own figure, in its result, is exact. */
static void worker_rss(sl_ctx *sl, size_t i)
{
    mr_job_result res;
    mr_job_result_init(&res);
    mr_error e;
    mr_error_init(&e);
    if (mr_fs_exists(sl->c->rt[i].result_path) && mr_job_result_read(sl->c->rt[i].result_path, &res, &e) == MR_OK &&
        res.max_rss_kb > sl->st[i].max_rss_kb)
        sl->st[i].max_rss_kb = res.max_rss_kb;
    mr_job_result_deinit(&res);
}

/* Stage i's job ended (sacct says so). */
static void job_ended(sl_ctx *sl, size_t i)
{
    run_ctx *c = sl->c;
    sl_stage *t = &sl->st[i];
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    worker_rss(sl, i);
    record_job(sl, i);
    if (retry_state(t->state) && t->attempts <= sl->max_retries) {
        resubmit(sl, i, t->state);
        return;
    }
    if (!strcmp(t->state, "OUT_OF_MEMORY") && t->oom_doublings < s->oom_retries && t->mem_mb > 0) {
        t->oom_doublings++;
        t->mem_mb *= 2;
        char why[96];
        snprintf(why, sizeof(why), "OUT_OF_MEMORY; with --mem=%lldM", (long long)t->mem_mb);
        t->attempts--; /* a bigger job, not a retry of a failed node */
        resubmit(sl, i, why);
        return;
    }
    t->active = 0;
    r->started = t->start > 0 ? t->start : t->submitted;
    r->ended = t->end > 0 ? t->end : t->elapsed_s > 0 ? r->started + t->elapsed_s : mr_wall_time();
    if (r->ended < r->started) r->ended = r->started;
    adopt_job_plan(sl, i);
    mr_proc_usage ru = {0, 0, t->max_rss_kb};
    int ok = !strcmp(t->state, "COMPLETED");
    char why[512], sig[24] = "";
    if (t->exit_signal) snprintf(sig, sizeof(sig), ", signal %d", t->exit_signal);
    snprintf(why, sizeof(why), "Slurm job %s ended %s (exit code %d%s%s%s)", t->job_id, t->state, t->exit_code, sig,
             t->nodes[0] ? ", on " : "", t->nodes);
    if (!ok) mr__ex_emit(c, MR_RUN_STAGE_NOTE, i, 0, why, NULL, NULL);
    mr__ex_finish(c, i, &ru, ok, why);
}

/* Everything sacct's answer changed, in topological order. */
static void process(sl_ctx *sl)
{
    run_ctx *c = sl->c;
    const size_t *order = mr_dag_order(c->dag);
    int failed_before = c->any_failed;
    for (size_t k = 0; k < c->n; k++) {
        size_t i = order[k];
        sl_stage *t = &sl->st[i];
        stage_rt *r = &c->rt[i];
        if (!t->active) continue;
        if (mr__ex_upstream_state(c, i) == ST_SKIPPED) {
            char *argv[] = {"scancel", t->job_id, NULL};
            if (!terminal_state(t->state)) slurm_cmd(argv, NULL, NULL);
            t->active = 0;
            mr__ex_skip(c, i);
            continue;
        }
        if (!strcmp(t->state, "RUNNING") && !t->seen_running) {
            t->seen_running = 1;
            r->started = t->start > 0 ? t->start : mr_wall_time();
            char msg[320];
            snprintf(msg, sizeof(msg), "Slurm job %s running on %s", t->job_id, t->nodes[0] ? t->nodes : "?");
            mr__ex_emit(c, MR_RUN_STAGE_STARTED, i, 0, NULL, NULL, r->log_path);
            mr__ex_emit(c, MR_RUN_STAGE_NOTE, i, 0, msg, NULL, NULL);
        }
        if (terminal_state(t->state)) job_ended(sl, i);
    }
    /* Without --keep-going no stage starts after a failure: the jobs still waiting go. */
    if (c->any_failed && !failed_before && !c->o->keep_going) {
        cancel_jobs(sl, 1);
        for (size_t i = 0; i < c->n; i++)
            if (sl->st[i].active && (!sl->st[i].state[0] || !strcmp(sl->st[i].state, "PENDING"))) {
                sl->st[i].active = 0;
                c->rt[i].state = ST_PENDING; /* recorded skipped when the run ends */
            }
    }
}

static int n_active(const sl_ctx *sl)
{
    int n = 0;
    for (size_t i = 0; i < sl->c->n; i++) n += sl->st[i].active;
    return n;
}

static void tick(sl_ctx *sl)
{
    run_ctx *c = sl->c;
    char detail[256];
    size_t off = 0;
    detail[0] = '\0';
    double now = mr_wall_time();
    for (size_t i = 0; i < c->n && off < sizeof(detail) - 1; i++) {
        const sl_stage *t = &sl->st[i];
        if (!t->active) continue;
        int k = t->seen_running ? snprintf(detail + off, sizeof(detail) - off, "%s%s %.0fs", off ? ", " : "running: ",
                                           c->spec->stages[i].name, now - c->rt[i].started)
                                : snprintf(detail + off, sizeof(detail) - off, "%s%s (%s)", off ? ", " : "running: ",
                                           c->spec->stages[i].name, t->state[0] ? t->state : "submitted");
        if (k > 0) off += (size_t)k;
    }
    mr__ex_emit(c, MR_RUN_TICK, (size_t)-1, 0, detail, NULL, NULL);
}

/* Follows the active jobs until none is left (once: one query). */
static void follow(sl_ctx *sl, int once)
{
    run_ctx *c = sl->c;
    double next = once ? 0 : mr_now() + (sl->poll_s < 2 ? sl->poll_s : 2); /* the first look comes soon */
    sl->backoff = 1;
    while (n_active(sl) > 0) {
        if (mr__g_interrupted) {
            cancel_jobs(sl, 0);
            for (size_t i = 0; i < c->n; i++)
                if (sl->st[i].active) {
                    sl->st[i].active = 0;
                    mr__ex_fail_stage(c, i, "interrupted");
                    mr__ex_emit(c, MR_RUN_STAGE_FAILED, i, 0, "interrupted: its Slurm job was cancelled", NULL, NULL);
                    mr__ex_record_stage(c, i, NULL, 0, 0);
                }
            break;
        }
        if (mr_now() >= next) {
            mr_error e;
            mr_error_init(&e);
            if (query(sl, &e) != MR_OK) {
                /* accounting is down or slow: wait longer, never fail a job for it */
                if (sl->backoff < MAX_BACKOFF) sl->backoff *= 2;
                if (!sl->warned || once)
                    mr_log(MR_LOG_WARN, "run %lld: the job status query failed (%s); asking again in %.0f s", (long long)c->run_id,
                           e.msg, sl->poll_s * sl->backoff);
                sl->warned = 1;
            } else {
                if (sl->warned) mr_log(MR_LOG_INFO, "run %lld: the job status query answers again", (long long)c->run_id);
                sl->warned = 0;
                sl->backoff = 1;
                process(sl);
                save_state_warn(sl);
            }
            next = mr_now() + sl->poll_s * sl->backoff;
            if (once) break;
        }
        if (c->o->ticks) tick(sl);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    save_state_warn(sl);
}

/* ---- the runner -------------------------------------------------------------------------- */

static void sl_free(sl_ctx *sl)
{
    mr_flock_release(&sl->lock);
    mr_free(sl->st);
    mr_free(sl->run_dir);
    mr_free(sl->cache_dir);
    mr_free(sl->spec_copy);
    mr_free(sl->self_exe);
    mr_free(sl->partition);
    mr_free(sl->account);
    for (size_t k = 0; k < sl->n_opts; k++) mr_free(sl->opts[k]);
    mr_free(sl->opts);
}

static mr_status sl_init(sl_ctx *sl, run_ctx *c, mr_error *err)
{
    memset(sl, 0, sizeof(*sl));
    sl->lock.fd = -1;
    sl->c = c;
    c->hook = sl;
    c->on_result = import_result;
    sl->st = mr_calloc(c->n ? c->n : 1, sizeof(*sl->st));
    sl->run_dir = mr_asprintf("%s/logs/run-%lld", c->ws->dot, (long long)c->run_id);
    sl->cache_dir = mr_path_join(c->ws->dot, "stage-cache");
    sl->spec_copy = sl->run_dir ? mr_path_join(sl->run_dir, "millrace.yaml") : NULL;
    /* run ids count per workspace: the name carries the workspace too */
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(mr_hash_bytes(c->ws->root, strlen(c->ws->root)), hex);
    snprintf(sl->job_name, sizeof(sl->job_name), "millrace-%.8s-%lld", hex, (long long)c->run_id);
    if (!sl->st || !sl->run_dir || !sl->cache_dir || !sl->spec_copy) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_fs_mkdirs(sl->run_dir, err);
    char *lp = rc == MR_OK ? run_file(sl, "follow.lock") : NULL;
    if (rc == MR_OK && !lp) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        rc = mr_flock_acquire(&sl->lock, lp, MR_LOCK_EXCLUSIVE, 0, 0, err);
        if (rc == MR_E_STATE) rc = MR_ERR(err, MR_E_STATE, "run %lld is followed by another process", (long long)c->run_id);
    }
    mr_free(lp);
    return rc;
}

static double poll_interval(double asked)
{
    double floor_s = env_seconds("MILLRACE_SLURM_MIN_POLL", DEFAULT_MIN_POLL_S);
    double p = asked > 0 ? asked : DEFAULT_POLL_S;
    return p < floor_s ? floor_s : p;
}

/* Fails every selected stage not yet decided with e (nothing was submitted). */
static void fail_all(run_ctx *c, const mr_error *e)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->rt[i].state == ST_PENDING) mr__ex_fail_unplanned(c, i, e);
}

void mr__slurm_run(run_ctx *c)
{
    sl_ctx sl;
    mr_error e;
    mr_error_init(&e);
    mr_status rc = sl_init(&sl, c, &e);
    const mr_run_opts *o = c->o;
    if (rc == MR_OK) {
        sl.poll_s = poll_interval(o->poll_s);
        sl.max_retries = o->max_retries >= 0 ? o->max_retries : DEFAULT_RETRIES;
        sl.self_exe = mr_strdup(o->self_exe ? o->self_exe : "millrace");
        sl.partition = o->partition ? mr_strdup(o->partition) : NULL;
        sl.account = o->account ? mr_strdup(o->account) : NULL;
        sl.opts = o->n_slurm_opts ? mr_calloc(o->n_slurm_opts, sizeof(*sl.opts)) : NULL;
        for (size_t k = 0; sl.opts && k < o->n_slurm_opts; k++)
            if ((sl.opts[k] = mr_strdup(o->slurm_opts[k]))) sl.n_opts++;
        if (!sl.self_exe || (o->partition && !sl.partition) || (o->account && !sl.account) || sl.n_opts != o->n_slurm_opts)
            rc = MR_ERR(&e, MR_E_NOMEM, "out of memory");
    }
    /* the jobs plan from a copy of millrace.yaml: editing it during the run changes nothing */
    if (rc == MR_OK) {
        char *text = NULL;
        size_t len = 0;
        const char *src = c->spec->path ? c->spec->path : c->ws->spec_path;
        rc = mr_fs_read_file(src, FILE_LIMIT, &text, &len, &e);
        if (rc == MR_OK) rc = mr_fs_write_atomic(sl.spec_copy, text, len, &e);
        mr_free(text);
    }
    size_t n_exported = 0;
    if (rc == MR_OK) rc = mr__cache_export(c->ws, sl.cache_dir, &n_exported, &e);
    if (rc != MR_OK) {
        fail_all(c, &e);
        sl_free(&sl);
        return;
    }
    /* Plan what can be planned here: stages whose upstreams are all cached. */
    for (;;) {
        int before = 0, after = 0;
        for (size_t i = 0; i < c->n; i++) before += c->plans[i].key[0] != 0 || c->rt[i].state != ST_PENDING;
        mr__ex_plan_ready(c);
        for (size_t i = 0; i < c->n; i++) after += c->plans[i].key[0] != 0 || c->rt[i].state != ST_PENDING;
        if (after == before || mr__g_interrupted) break;
    }
    rc = write_cluster_file(&sl, &e);
    if (rc != MR_OK) fail_all(c, &e);
    const size_t *order = mr_dag_order(c->dag);
    for (size_t k = 0; k < c->n && rc == MR_OK && !mr__g_interrupted; k++) {
        size_t i = order[k];
        stage_rt *r = &c->rt[i];
        if (r->state != ST_PENDING) continue;
        if (mr__ex_upstream_state(c, i) == ST_SKIPPED) {
            mr__ex_skip(c, i);
            continue;
        }
        mr_error_init(&e);
        mr_status st = mr__ex_stage_paths(c, i, &e);
        if (st == MR_OK) {
            unlink(r->result_path);
            unlink(r->job_path);
        }
        /* a stage planned here gets its job file now; the others plan in their job */
        if (st == MR_OK && c->plans[i].key[0]) st = mr__ex_write_job(c, i, sl.cache_dir, &e);
        if (st == MR_OK) st = submit(&sl, i, &e);
        if (st != MR_OK) {
            mr__ex_fail_unplanned(c, i, &e);
            continue;
        }
        r->state = ST_RUNNING;
        r->started = mr_wall_time();
    }
    if (mr__g_interrupted) {
        follow(&sl, 1); /* cancels */
    } else if (o->detach && n_active(&sl)) {
        save_state_warn(&sl);
        mr_error_init(&e);
        if (mr_runstore_run_set_status(c->ws->rs, c->run_id, "submitted", &e) != MR_OK) mr_log(MR_LOG_WARN, "run store: %s", e.msg);
        c->detached = 1;
    } else {
        save_state_warn(&sl);
        follow(&sl, 0);
    }
    if (!c->detached && sl.n_queries)
        mr_log(MR_LOG_INFO, "run %lld: %d job status queries (every %.0f s)", (long long)c->run_id, sl.n_queries, sl.poll_s);
    sl_free(&sl);
}

/* ---- following a run submitted earlier ---------------------------------------------------- */

static mr_status read_json(const char *path, const char *format, json_t **out, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    mr_status rc = mr_fs_read_file(path, FILE_LIMIT, &text, &len, err);
    if (rc == MR_OK) rc = mr_json_parse(text, len, 0, out, path, err);
    mr_free(text);
    if (rc != MR_OK) return rc;
    const char *f = json_string_value(json_object_get(*out, "format"));
    const json_t *v = json_object_get(*out, "version");
    if (!f || strcmp(f, format) || !json_is_integer(v) || json_integer_value(v) != CLUSTER_VERSION) {
        json_decref(*out);
        *out = NULL;
        return MR_ERR(err, MR_E_STATE, "%s: not a %s file of version %d", path, format, CLUSTER_VERSION);
    }
    return MR_OK;
}

static mr_status dup_opt(const json_t *o, const char *key, char **out, mr_error *err)
{
    const char *s = json_string_value(json_object_get(o, key));
    *out = s ? mr_strdup(s) : NULL;
    return s && !*out ? MR_ERR(err, MR_E_NOMEM, "out of memory") : MR_OK;
}

/* The spec a run's jobs plan from: RUNDIR's copy, with the run's overrides. */
static mr_status load_run_spec(const json_t *cl, mr_spec **spec, mr_error *err)
{
    const char *copy = json_string_value(json_object_get(cl, "spec_copy"));
    const char *shown = json_string_value(json_object_get(cl, "spec_path"));
    const json_t *ov = json_object_get(cl, "overrides");
    if (!copy || !shown || !json_is_array(ov)) return MR_ERR(err, MR_E_PARSE, "cluster.json: no spec_copy, spec_path or overrides");
    size_t n = json_array_size(ov);
    const char **ovs = mr_calloc(n ? n : 1, sizeof(*ovs));
    if (!ovs) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) ovs[k] = json_string_value(json_array_get(ov, k)) ? json_string_value(json_array_get(ov, k)) : "";
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(copy, FILE_LIMIT, &text, &len, err);
    if (rc == MR_OK) rc = mr_spec_parse(text, len, shown, ovs, n, spec, err);
    mr_free(text);
    mr_free(ovs);
    return rc;
}

typedef struct loaded_run {
    run_ctx c;
    sl_ctx sl;
    mr_spec *spec;
    mr_run_opts o;
    int *done;
} loaded_run;

static void loaded_free(loaded_run *L)
{
    sl_free(&L->sl);
    mr__ex_ctx_free(&L->c);
    mr_free(L->done);
    mr_spec_free(L->spec);
}

/* Rebuilds the runner's state of run_id from RUNDIR/cluster.json and slurm.json. */
static mr_status load_run(mr_workspace *ws, int64_t run_id, const mr_run_opts *o, mr_run_result *res, loaded_run *L,
                          mr_error *err)
{
    memset(L, 0, sizeof(*L));
    memset(res, 0, sizeof(*res));
    L->sl.lock.fd = -1;
    L->o = *o;
    run_ctx *c = &L->c;
    c->ws = ws;
    c->o = &L->o;
    c->res = res;
    c->run_id = run_id;
    res->run_id = run_id;
    c->budget = INT32_MAX / 2;
    char *dir = mr_asprintf("%s/logs/run-%lld", ws->dot, (long long)run_id);
    char *sp = dir ? mr_path_join(dir, "slurm.json") : NULL, *cp = dir ? mr_path_join(dir, "cluster.json") : NULL;
    json_t *state = NULL, *cl = NULL;
    mr_status rc = sp && cp ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK && !mr_fs_exists(sp)) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "run %lld was not run with --executor slurm (no %s)", (long long)run_id, sp);
        mr_error_hint(err, "`millrace runs` lists the runs");
    }
    if (rc == MR_OK) rc = read_json(cp, CLUSTER_FORMAT, &cl, err);
    if (rc == MR_OK) rc = read_json(sp, STATE_FORMAT, &state, err);
    if (rc == MR_OK) rc = load_run_spec(cl, &L->spec, err);
    if (rc == MR_OK) {
        c->spec = L->spec;
        c->n = L->spec->n_stages;
        rc = mr_dag_build(L->spec, &c->dag, err);
    }
    if (rc == MR_OK) {
        c->plans = mr_calloc(c->n ? c->n : 1, sizeof(*c->plans));
        c->rt = mr_calloc(c->n ? c->n : 1, sizeof(*c->rt));
        L->done = mr_calloc(c->n ? c->n : 1, sizeof(*L->done));
        if (!c->plans || !c->rt || !L->done) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; rc == MR_OK && i < c->n; i++) rc = mr__plan_outputs(c->dag, i, &c->plans[i], err);
    if (rc == MR_OK) rc = sl_init(&L->sl, c, err);
    sl_ctx *sl = &L->sl;
    if (rc == MR_OK) {
        const char *gd = json_string_value(json_object_get(cl, "git_commit"));
        snprintf(c->git_desc, sizeof(c->git_desc), "%s", gd ? gd : "");
        L->o.smoke = json_is_true(json_object_get(cl, "smoke"));
        L->o.keep_going = json_is_true(json_object_get(state, "keep_going"));
        const json_t *pv = json_object_get(state, "poll_s");
        sl->poll_s = poll_interval(o->poll_s > 0 ? o->poll_s : json_is_number(pv) ? json_number_value(pv) : 0);
        sl->max_retries = (int)json_integer_value(json_object_get(state, "max_retries"));
        rc = dup_opt(state, "self_exe", &sl->self_exe, err);
        if (rc == MR_OK) rc = dup_opt(state, "partition", &sl->partition, err);
        if (rc == MR_OK) rc = dup_opt(state, "account", &sl->account, err);
        const json_t *opts = json_object_get(state, "slurm_opts");
        size_t n = json_array_size(opts);
        if (rc == MR_OK && n && !(sl->opts = mr_calloc(n, sizeof(*sl->opts)))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; rc == MR_OK && k < n; k++) {
            const char *v = json_string_value(json_array_get(opts, k));
            if (!v || !(sl->opts[sl->n_opts] = mr_strdup(v))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            else sl->n_opts++;
        }
        if (rc == MR_OK && !sl->self_exe) rc = MR_ERR(err, MR_E_PARSE, "%s: no self_exe", sp);
    }
    const json_t *stages = json_object_get(state, "stages");
    for (size_t i = 0; rc == MR_OK && i < c->n; i++) {
        const char *name = L->spec->stages[i].name;
        const json_t *e = json_object_get(stages, name);
        stage_rt *r = &c->rt[i];
        sl_stage *t = &sl->st[i];
        const char *stn = json_string_value(json_object_get(e, "state"));
        if (!e || !stn) {
            rc = MR_ERR(err, MR_E_PARSE, "%s: no state for stage '%s'", sp, name);
            break;
        }
        const char *jid = json_string_value(json_object_get(e, "job_id"));
        snprintf(t->job_id, sizeof(t->job_id), "%s", jid ? jid : "");
        const char *aid = json_string_value(json_object_get(e, "array_id"));
        snprintf(t->array_id, sizeof(t->array_id), "%s", aid ? aid : "");
        t->n_tasks = (int)json_integer_value(json_object_get(e, "n_tasks"));
        t->attempts = (int)json_integer_value(json_object_get(e, "attempts"));
        t->oom_doublings = (int)json_integer_value(json_object_get(e, "oom_doublings"));
        t->mem_mb = (int64_t)json_integer_value(json_object_get(e, "mem_mb"));
        t->submitted = json_number_value(json_object_get(e, "submitted"));
        const char *key = json_string_value(json_object_get(e, "key"));
        snprintf(c->plans[i].key, sizeof(c->plans[i].key), "%s", key ? key : "");
        const json_t *outs = json_object_get(e, "outputs");
        for (size_t k = 0; k < c->plans[i].n_outs; k++) {
            const char *id = json_string_value(json_object_get(outs, c->plans[i].outs[k].name));
            if (id) snprintf(c->plans[i].outs[k].id, sizeof(c->plans[i].outs[k].id), "%s", id);
        }
        r->published = json_is_true(json_object_get(e, "published"));
        const char *er = json_string_value(json_object_get(e, "error"));
        if (er && !(r->error = mr_strdup(er))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (!strcmp(stn, "unselected")) r->state = ST_UNSELECTED;
        else if (!strcmp(stn, "cached")) r->state = ST_DONE, r->cached = 1, res->n_cached++;
        else if (!strcmp(stn, "done")) r->state = ST_DONE, res->n_executed++;
        else if (!strcmp(stn, "failed")) r->state = ST_FAILED, c->any_failed = 1;
        else if (!strcmp(stn, "skipped")) r->state = ST_SKIPPED, res->n_skipped++;
        else if (!strcmp(stn, "active")) r->state = ST_RUNNING, t->active = 1, r->started = t->submitted;
        else r->state = ST_PENDING;
        c->n_selected += r->state != ST_UNSELECTED;
        if (rc == MR_OK && r->state != ST_UNSELECTED) rc = mr__ex_stage_paths(c, i, err);
    }
    json_decref(state);
    json_decref(cl);
    mr_free(dir);
    mr_free(sp);
    mr_free(cp);
    return rc;
}

static void end_loaded(loaded_run *L)
{
    mr__ex_end_run(&L->c, L->done);
    mr_error e;
    mr_error_init(&e);
    if (mr__ex_fill_result(&L->c, &e) != MR_OK) mr_log(MR_LOG_WARN, "run %lld: %s", (long long)L->c.run_id, e.msg);
}

mr_status mr_pipeline_attach(mr_workspace *ws, int64_t run_id, const mr_run_opts *opts, mr_run_result *res, mr_error *err)
{
    loaded_run L;
    mr_status rc = load_run(ws, run_id, opts, res, &L, err);
    if (rc != MR_OK) {
        loaded_free(&L);
        return rc;
    }
    struct sigaction old[2];
    mr__ex_signals(1, old);
    follow(&L.sl, 0);
    if (mr__g_interrupted) res->interrupted = 1;
    end_loaded(&L);
    mr__ex_signals(0, old);
    if (res->interrupted) rc = MR_ERR(err, MR_E_INTERRUPTED, "run %lld interrupted", (long long)run_id);
    else if (L.c.any_failed)
        rc = MR_ERR(err, MR_E_FAILED, "run %lld: %d stage%s failed", (long long)run_id, res->n_failed, res->n_failed == 1 ? "" : "s");
    loaded_free(&L);
    return rc;
}

void mr_pipeline_collect(mr_workspace *ws, const char *self_exe, int *n_open)
{
    (void)self_exe;
    int64_t *ids = NULL;
    size_t n = 0;
    int open = 0;
    mr_error e;
    mr_error_init(&e);
    if (mr_runstore_runs_with_status(ws->rs, "submitted", &ids, &n, &e) != MR_OK) {
        mr_log(MR_LOG_WARN, "run store: %s", e.msg);
        n = 0;
    }
    for (size_t k = 0; k < n; k++) {
        loaded_run L;
        mr_run_result res;
        mr_run_opts o = mr_run_opts_default();
        mr_error_init(&e);
        mr_status rc = load_run(ws, ids[k], &o, &res, &L, &e);
        if (rc == MR_E_STATE) { /* followed by another process right now */
            open++;
        } else if (rc != MR_OK) {
            mr_log(MR_LOG_WARN, "run %lld: %s", (long long)ids[k], e.msg);
        } else {
            follow(&L.sl, 1);
            int done = 0, sel = 0;
            for (size_t i = 0; i < L.c.n; i++) {
                int st = L.c.rt[i].state;
                sel += st != ST_UNSELECTED;
                done += st == ST_DONE || st == ST_FAILED || st == ST_SKIPPED;
            }
            if (n_active(&L.sl)) {
                open++;
                mr_log(MR_LOG_INFO, "run %lld (Slurm, detached): %d of %d stages finished, %d jobs in the queue", (long long)ids[k],
                       done, sel, n_active(&L.sl));
            } else {
                end_loaded(&L);
                mr_log(MR_LOG_INFO, "run %lld (Slurm, detached): finished, %s", (long long)ids[k],
                       L.c.any_failed ? "a stage failed" : "every stage succeeded");
            }
        }
        loaded_free(&L);
        mr_run_result_free(&res);
    }
    mr_free(ids);
    if (n_open) *n_open = open;
}

/* ---- the job side ------------------------------------------------------------------------------- */

/* The output ids of upstream stage u: known when the run began, or from its job's result. */
static mr_status upstream_ids(const char *run_dir, const json_t *cl, const mr_spec *spec, size_t u, mr__plan *p, mr_error *err)
{
    const char *name = spec->stages[u].name;
    const json_t *known = json_object_get(json_object_get(cl, "done"), name);
    mr_job_result res;
    mr_job_result_init(&res);
    mr_status rc = MR_OK;
    if (!known) {
        char *fname = mr_asprintf("%s.result.json", name);
        char *path = fname ? mr_path_join(run_dir, fname) : NULL;
        rc = path ? mr_job_result_read(path, &res, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK && res.status != MR_JOB_EXECUTED && res.status != MR_JOB_CACHED)
            rc = MR_ERR(err, MR_E_STATE, "upstream stage '%s' did not succeed (%s)", name, path);
        mr_free(fname);
        mr_free(path);
    }
    for (size_t k = 0; rc == MR_OK && k < p->n_outs; k++) {
        const char *id = known ? json_string_value(json_object_get(known, p->outs[k].name)) : mr_job_result_output(&res, p->outs[k].name);
        if (!id) rc = MR_ERR(err, MR_E_STATE, "upstream stage '%s' has no output '%s' in this run", name, p->outs[k].name);
        else snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", id);
    }
    mr_job_result_deinit(&res);
    return rc;
}

/* Plans stage `stage` of the run in run_dir and writes its job file. */
static mr_status plan_in_job(const char *run_dir, const json_t *cl, const char *stage, const char *job_path,
                             const char *result_path, mr_error *err)
{
    mr_spec *spec = NULL;
    mr_workspace *ws = NULL;
    run_ctx c;
    memset(&c, 0, sizeof(c));
    mr_run_opts o = mr_run_opts_default();
    mr_run_result res;
    memset(&res, 0, sizeof(res));
    c.o = &o;
    c.res = &res;
    const char *root = json_string_value(json_object_get(cl, "workspace"));
    const char *cache_dir = json_string_value(json_object_get(cl, "cache_dir"));
    if (!root || !cache_dir) return MR_ERR(err, MR_E_PARSE, "%s/cluster.json: no workspace or cache_dir", run_dir);
    mr_status rc = load_run_spec(cl, &spec, err);
    ssize_t idx = -1;
    if (rc == MR_OK) {
        c.spec = spec;
        c.n = spec->n_stages;
        for (size_t i = 0; i < c.n; i++)
            if (!strcmp(spec->stages[i].name, stage)) idx = (ssize_t)i;
        if (idx < 0) rc = MR_ERR(err, MR_E_NOT_FOUND, "the run's millrace.yaml has no stage '%s'", stage);
    }
    if (rc == MR_OK) rc = mr_dag_build(spec, &c.dag, err);
    if (rc == MR_OK) {
        c.plans = mr_calloc(c.n, sizeof(*c.plans));
        c.rt = mr_calloc(c.n, sizeof(*c.rt));
        if (!c.plans || !c.rt) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; rc == MR_OK && i < c.n; i++) rc = mr__plan_outputs(c.dag, i, &c.plans[i], err);
    size_t i = (size_t)idx, n_up = 0;
    const size_t *up = rc == MR_OK ? mr_dag_upstream(c.dag, i, &n_up) : NULL;
    for (size_t u = 0; rc == MR_OK && u < n_up; u++) rc = upstream_ids(run_dir, cl, spec, up[u], &c.plans[up[u]], err);
    if (rc == MR_OK) rc = mr__workspace_open_cluster(root, cache_dir, &ws, err);
    if (rc == MR_OK) {
        c.ws = ws;
        c.run_id = (int64_t)json_integer_value(json_object_get(cl, "run_id"));
        o.smoke = json_is_true(json_object_get(cl, "smoke"));
        const char *gd = json_string_value(json_object_get(cl, "git_commit"));
        snprintf(c.git_desc, sizeof(c.git_desc), "%s", gd ? gd : "");
        const json_t *rm = json_object_get(cl, "remote");
        if (rm) {
            c.remote.url = (char *)json_string_value(json_object_get(rm, "url"));
            c.remote.endpoint = (char *)json_string_value(json_object_get(rm, "endpoint"));
            c.remote.region = (char *)json_string_value(json_object_get(rm, "region"));
            c.remote.pull = json_is_true(json_object_get(rm, "pull"));
            c.remote.push = json_is_true(json_object_get(rm, "push"));
        }
        size_t k;
        json_t *f;
        json_array_foreach(json_object_get(cl, "forced"), k, f) if (json_string_value(f) && !strcmp(json_string_value(f), stage))
            c.rt[i].forced = 1;
        int th = (int)json_integer_value(json_object_get(json_object_get(cl, "threads"), stage));
        c.rt[i].cost = th > 0 ? th : 1;
        c.rt[i].job_path = (char *)job_path;
        c.rt[i].result_path = (char *)result_path;
        rc = mr__plan_inputs(c.dag, i, c.plans, err);
    }
    if (rc == MR_OK) rc = mr__plan_hash_inputs(ws, c.plans, &i, 1, NULL, err);
    if (rc == MR_OK) rc = mr__plan_key(spec, i, o.smoke, c.git_desc, &c.plans[i], err);
    if (rc == MR_OK) rc = mr__ex_write_job(&c, i, cache_dir, err);
    for (size_t q = 0; c.plans && q < c.n; q++) mr__plan_free(&c.plans[q]);
    mr_free(c.plans);
    mr_free(c.rt);
    mr_dag_free(c.dag);
    mr_workspace_close(ws);
    mr_spec_free(spec);
    return rc;
}

mr_status mr_stage_cluster(const char *run_dir, const char *stage, int task, mr_error *err)
{
    char *cp = mr_path_join(run_dir, "cluster.json");
    char *jn = mr_asprintf("%s.job.json", stage), *rn = mr_asprintf("%s.result.json", stage);
    char *job_path = jn ? mr_path_join(run_dir, jn) : NULL, *result_path = rn ? mr_path_join(run_dir, rn) : NULL;
    json_t *cl = NULL;
    mr_status rc = cp && job_path && result_path ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = read_json(cp, CLUSTER_FORMAT, &cl, err);
    /* A requeued job finds the job file its first attempt wrote: the same plan. */
    if (rc == MR_OK && !mr_fs_exists(job_path)) {
        rc = plan_in_job(run_dir, cl, stage, job_path, result_path, err);
        if (rc != MR_OK) { /* the runner reports it from the result */
            mr_error_stage(err, stage);
            mr_job_result res;
            mr_job_result_init(&res);
            res.status = MR_JOB_FAILED;
            res.error = *err;
            mr_error we;
            mr_error_init(&we);
            mr_job_result_write(&res, result_path, &we);
            mr_job_result_deinit(&res);
        }
    }
    json_decref(cl);
    if (rc == MR_OK) rc = task >= 0 ? mr_stage_worker_task(job_path, task, err) : mr_stage_worker(job_path, err);
    mr_free(cp);
    mr_free(jn);
    mr_free(rn);
    mr_free(job_path);
    mr_free(result_path);
    return rc;
}
