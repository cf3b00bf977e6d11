/* The executor: plans stages in topological order as their inputs become
 * known, serves hits from the stage cache, and runs the rest as child
 * processes (`millrace stage run NAME --job FILE`, through core's process
 * supervisor) within the core budget. Per stage it records wall time, CPU,
 * peak RSS (wait4) and I/O bytes (the worker's result), then updates the
 * run store and millrace.lock. It prints nothing: what happens goes to the
 * caller's event callback, and every stage's outcome into the result.
 *
 * Failure policy: a failed stage skips everything downstream of it. Without
 * --keep-going no new stage starts after a failure (stages already running
 * finish, as with make); with --keep-going every stage that does not depend
 * on a failure still runs. SIGINT/SIGTERM stop the children (SIGTERM to
 * their process groups, SIGKILL after a grace period) and the run is
 * recorded as interrupted. */
#define _GNU_SOURCE
#include "executor_int.h"
#include "millrace/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

/* Seconds a stopped stage gets between SIGTERM and SIGKILL. */
#define STOP_GRACE_S 5.0

mr_run_opts mr_run_opts_default(void)
{
    mr_run_opts o;
    memset(&o, 0, sizeof(o));
    return o;
}

volatile sig_atomic_t mr__g_interrupted;
static void on_signal(int sig)
{
    (void)sig;
    mr__g_interrupted = 1;
}

static const char *status_word(const stage_rt *r)
{
    switch (r->state) {
    case ST_DONE: return r->cached ? "cached" : "executed";
    case ST_FAILED: return "failed";
    case ST_SKIPPED: return "skipped";
    case ST_WOULD_RUN: return "would run";
    default: return "pending";
    }
}

static int n_finished(const run_ctx *c)
{
    int n = 0;
    for (size_t i = 0; i < c->n; i++) n += c->rt[i].state == ST_DONE || c->rt[i].state == ST_FAILED || c->rt[i].state == ST_SKIPPED;
    return n;
}

void mr__ex_emit(run_ctx *c, mr_run_event_kind kind, size_t i, double wall_s, const char *message, const char *hint,
                 const char *log_path)
{
    if (!c->o->on_event || c->o->dry) return;
    mr_run_event ev = {
        .kind = kind,
        .stage = i == (size_t)-1 ? NULL : c->spec->stages[i].name,
        .wall_s = wall_s,
        .message = message,
        .hint = hint,
        .log_path = log_path,
        .n_done = n_finished(c),
        .n_selected = c->n_selected,
    };
    c->o->on_event(c->o->event_ctx, &ev);
}

static int name_in(const char *name, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(list[k], name)) return 1;
    return 0;
}

/* Validates stage names given on the command line. */
static mr_status check_names(const mr_spec *spec, const char *const *names, size_t n, const char *flag, mr_error *err)
{
    for (size_t k = 0; k < n; k++) {
        if (mr_spec_stage(spec, names[k])) continue;
        mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "%s: no stage named '%s'", flag, names[k]);
        const char **cands = mr_calloc(spec->n_stages ? spec->n_stages : 1, sizeof(*cands));
        for (size_t i = 0; cands && i < spec->n_stages; i++) cands[i] = spec->stages[i].name;
        const char *best = cands ? mr_closest(names[k], cands, spec->n_stages) : NULL;
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
        mr_free(cands);
        return rc;
    }
    return MR_OK;
}

/* Marks targets and their upstream closure selected; forced stages and the
 * --downstream closures forced. */
static void select_stages(run_ctx *c)
{
    const mr_run_opts *o = c->o;
    const size_t *order = mr_dag_order(c->dag);
    for (size_t i = 0; i < c->n; i++) c->rt[i].state = o->n_targets ? ST_UNSELECTED : ST_PENDING;
    for (size_t k = c->n; k-- > 0;) { /* reverse topological: consumers first */
        size_t i = order[k];
        if (o->n_targets && name_in(c->spec->stages[i].name, o->targets, o->n_targets)) c->rt[i].state = ST_PENDING;
        if (c->rt[i].state != ST_PENDING) continue;
        size_t n_up;
        const size_t *up = mr_dag_upstream(c->dag, i, &n_up);
        for (size_t u = 0; u < n_up; u++) c->rt[up[u]].state = ST_PENDING;
    }
    for (size_t k = 0; k < c->n; k++) {
        size_t i = order[k];
        const char *name = c->spec->stages[i].name;
        if (o->force_all || name_in(name, o->force, o->n_force) || name_in(name, o->downstream, o->n_downstream))
            c->rt[i].forced = 1;
        size_t n_up;
        const size_t *up = mr_dag_upstream(c->dag, i, &n_up);
        for (size_t u = 0; u < n_up; u++)
            if (c->rt[up[u]].forced && (name_in(c->spec->stages[up[u]].name, o->downstream, o->n_downstream) ||
                                        c->rt[up[u]].forced == 2))
                c->rt[i].forced = 2; /* downstream of a --downstream stage */
    }
    c->n_selected = 0;
    for (size_t i = 0; i < c->n; i++) c->n_selected += c->rt[i].state != ST_UNSELECTED;
}

int mr__ex_upstream_state(run_ctx *c, size_t i)
{
    size_t n_up;
    const size_t *up = mr_dag_upstream(c->dag, i, &n_up);
    int all_done = 1;
    for (size_t u = 0; u < n_up; u++) {
        int s = c->rt[up[u]].state;
        if (s == ST_FAILED || s == ST_SKIPPED) return ST_SKIPPED;
        if (s == ST_WOULD_RUN) return ST_WOULD_RUN;
        if (s != ST_DONE) all_done = 0;
    }
    return all_done ? ST_DONE : ST_PENDING;
}

void mr__ex_skip(run_ctx *c, size_t i)
{
    c->rt[i].state = ST_SKIPPED;
    c->res->n_skipped++;
    mr__ex_emit(c, MR_RUN_STAGE_SKIPPED, i, 0, NULL, NULL, NULL);
    mr__ex_record_stage(c, i, NULL, 0, 0);
}

void mr__ex_signals(int on, struct sigaction old[2])
{
    if (!on) {
        sigaction(SIGINT, &old[0], NULL);
        sigaction(SIGTERM, &old[1], NULL);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
    mr__g_interrupted = 0;
}

void mr__ex_ctx_free(run_ctx *c)
{
    for (size_t i = 0; c->rt && i < c->n; i++) {
        mr_free(c->rt[i].job_path);
        mr_free(c->rt[i].result_path);
        mr_free(c->rt[i].log_path);
        mr_free(c->rt[i].error);
        mr_free(c->rt[i].metrics_json);
    }
    for (size_t i = 0; c->plans && i < c->n; i++) mr__plan_free(&c->plans[i]);
    mr_free(c->plans);
    mr_free(c->rt);
    mr_dag_free(c->dag);
    c->plans = NULL;
    c->rt = NULL;
    c->dag = NULL;
}

void mr__ex_fail_stage(run_ctx *c, size_t i, const char *msg)
{
    c->rt[i].state = ST_FAILED;
    mr_free(c->rt[i].error);
    c->rt[i].error = mr_strdup(msg);
    c->any_failed = 1;
}

/* Formats an error for a stage's failure line: the stage is named by the
 * line itself, so it is not repeated. */
void mr__ex_stage_error_text(const mr_error *e, char *buf, size_t len)
{
    mr_error copy = *e;
    copy.stage[0] = '\0';
    mr_error_format(&copy, buf, len);
}

void mr__ex_record_stage(run_ctx *c, size_t i, const mr_proc_usage *ru, int64_t bytes_read, int64_t bytes_written)
{
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    mr_buf outs;
    mr_buf_init(&outs);
    if (r->state == ST_DONE || r->published) mr__plan_outputs_json(&c->plans[i], &outs);
    mr_stage_record rec = {
        .stage = s->name,
        .op = s->op->name,
        .key = c->plans[i].key,
        .status = status_word(r),
        .started = r->started,
        .wall_s = r->started <= 0 ? 0 : r->ended > 0 ? r->ended - r->started : mr_wall_time() - r->started,
        .user_s = ru ? ru->user_s : 0,
        .sys_s = ru ? ru->sys_s : 0,
        .max_rss_kb = ru ? ru->max_rss_kb : 0,
        .bytes_read = bytes_read,
        .bytes_written = bytes_written,
        .error = r->error,
        .outputs_json = outs.data,
    };
    mr_error e;
    mr_error_init(&e);
    if (mr_runstore_stage_record(c->ws->rs, c->run_id, &rec, &e) != MR_OK) mr_log(MR_LOG_WARN, "run store: %s", e.msg);
    if (r->state == ST_DONE || r->published) {
        const mr__plan *p = &c->plans[i];
        for (size_t k = 0; k < p->n_ins; k++)
            mr_runstore_lineage_add(c->ws->rs, c->run_id, s->name, "in", p->ins[k].name, p->ins[k].id, NULL);
        for (size_t k = 0; k < p->n_outs; k++)
            mr_runstore_lineage_add(c->ws->rs, c->run_id, s->name, "out", p->outs[k].name, p->outs[k].id, NULL);
    }
    mr_buf_free(&outs);
}

static void record_metric_list(run_ctx *c, size_t i, const mr_metric *m, size_t n)
{
    mr_error e;
    mr_error_init(&e);
    if (n && mr_runstore_metrics_add(c->ws->rs, c->run_id, c->spec->stages[i].name, m, n, &e) != MR_OK)
        mr_log(MR_LOG_WARN, "run store: %s", e.msg);
}

/* Records the metrics of a cache hit (the stage cache's JSON list). Like
 * every run-store write, a failure is a warning, never silent. */
static void record_cached_metrics(run_ctx *c, size_t i, const char *metrics_json)
{
    json_t *arr = NULL;
    mr_error e;
    mr_error_init(&e);
    if (metrics_json && mr_json_parse(metrics_json, strlen(metrics_json), 0, &arr, "the stage cache's metrics", &e) != MR_OK) {
        mr_log(MR_LOG_WARN, "run store: stage '%s': %s; its metrics are not recorded", c->spec->stages[i].name, e.msg);
        return;
    }
    size_t n = json_array_size(arr);
    mr_metric *m = n ? mr_calloc(n, sizeof(*m)) : NULL;
    if (n && !m) {
        mr_log(MR_LOG_WARN, "run store: stage '%s': out of memory; its metrics are not recorded", c->spec->stages[i].name);
        json_decref(arr);
        return;
    }
    size_t k = 0, idx;
    json_t *x;
    json_array_foreach(arr, idx, x)
    {
        const char *name = json_string_value(json_object_get(x, "name"));
        json_t *v = json_object_get(x, "value");
        if (!m || !name || !json_is_number(v)) continue;
        m[k].name = name;
        m[k].step = (int64_t)json_integer_value(json_object_get(x, "step"));
        m[k].value = json_number_value(v);
        k++;
    }
    record_metric_list(c, i, m, k);
    mr_free(m);
    json_decref(arr);
}

void mr__ex_record_result_metrics(run_ctx *c, size_t i, const mr_job_result *res)
{
    mr_metric *m = res->n_metrics ? mr_calloc(res->n_metrics, sizeof(*m)) : NULL;
    for (size_t k = 0; m && k < res->n_metrics; k++) {
        m[k].name = res->metrics[k].name;
        m[k].step = res->metrics[k].step;
        m[k].value = res->metrics[k].value;
    }
    if (m) record_metric_list(c, i, m, res->n_metrics);
    mr_free(m);
}

/* The job file of stage i: the plan, with ${stages.X} resolved to paths. */
mr_status mr__ex_write_job(run_ctx *c, size_t i, const char *cache_dir, mr_error *err)
{
    const mr_stage_spec *s = &c->spec->stages[i];
    mr__plan *p = &c->plans[i];
    stage_rt *r = &c->rt[i];
    mr_job job;
    mr_job_init(&job);
    mr_job_io *ins = mr_calloc(p->n_ins ? p->n_ins : 1, sizeof(*ins));
    mr_job_io *outs = mr_calloc(p->n_outs ? p->n_outs : 1, sizeof(*outs));
    mr_status rc = ins && outs ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* Borrowed strings: the job struct is encoded, never freed with deinit. */
    for (size_t k = 0; rc == MR_OK && k < p->n_ins; k++) {
        ins[k].name = p->ins[k].name;
        ins[k].path = p->ins[k].path;
        ins[k].id = p->ins[k].id;
    }
    for (size_t k = 0; rc == MR_OK && k < p->n_outs; k++) {
        outs[k].name = p->outs[k].name;
        outs[k].path = p->outs[k].path;
        outs[k].metrics = k >= p->n_outs - p->n_metrics;
    }
    mr_value *def = rc == MR_OK ? mr_value_clone(s->def) : NULL;
    if (rc == MR_OK && !def) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr__plan_locks(c->dag, i, c->plans, p, err);
    if (rc == MR_OK) {
        /* Ops see maps in canonical order: the key cannot see the order of
         * millrace.yaml, so no result may depend on it. ${stages.X} stay
         * unresolved: the worker resolves them where it reads the inputs. */
        mr_value_sort_keys(def);
        mr_value_sort_keys(p->params);
        job.stage = s->name;
        job.op = (char *)s->op->name;
        job.op_version = s->op->version;
        job.key = p->key;
        job.key_doc = p->key_doc;
        job.run_id = c->run_id;
        job.smoke = c->o->smoke;
        job.force = r->forced != 0;
        job.threads = r->cost;
        job.mem_bytes = s->mem_bytes;
        job.workspace = c->ws->root;
        job.spec_path = c->spec->path ? c->spec->path : c->ws->spec_path;
        job.result_path = r->result_path;
        job.def = def;
        job.params = p->params;
        job.inputs = ins;
        job.n_inputs = p->n_ins;
        job.outputs = outs;
        job.n_outputs = p->n_outs;
        job.locks = p->locks;
        job.n_locks = p->n_locks;
        job.git_commit = (s->op->flags & MR_OP_GIT_COMMIT) ? c->git_desc : "";
        job.remote = c->remote; /* borrowed, as the rest */
        job.cache_dir = (char *)cache_dir;
        rc = mr_job_write(&job, r->job_path, err);
    }
    mr_value_free(def);
    mr_free(ins);
    mr_free(outs);
    return rc;
}

mr_status mr__ex_stage_paths(run_ctx *c, size_t i, mr_error *err)
{
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    char *dir = mr_asprintf("%s/logs/run-%lld", c->ws->dot, (long long)c->run_id);
    if (!dir) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_fs_mkdirs(dir, err);
    if (!r->job_path) r->job_path = mr_asprintf("%s/%s.job.json", dir, s->name);
    if (!r->result_path) r->result_path = mr_asprintf("%s/%s.result.json", dir, s->name);
    if (!r->log_path) r->log_path = mr_asprintf("%s/%s.log", dir, s->name);
    mr_free(dir);
    if (rc != MR_OK) return rc;
    if (!r->job_path || !r->result_path || !r->log_path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    return MR_OK;
}

static mr_status start_stage(run_ctx *c, size_t i, mr_error *err)
{
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    mr_status rc = mr__ex_stage_paths(c, i, err);
    if (rc != MR_OK) return rc;
    unlink(r->result_path);
    rc = mr__ex_write_job(c, i, NULL, err);
    if (rc != MR_OK) return rc;
    int log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create log", r->log_path);
    mr_proc_opts po;
    mr_proc_opts_init(&po);
    po.new_group = 1;
    po.stdin_null = 1;
    po.stdout_fd = log_fd;
    po.stderr_fd = log_fd;
    char *const argv[] = {"millrace", "stage", "run", (char *)s->name, "--job", r->job_path, NULL};
    rc = mr_proc_spawn_exec(&r->proc, &po, c->o->self_exe, argv, err);
    close(log_fd);
    if (rc != MR_OK) return rc;
    r->state = ST_RUNNING;
    r->started = mr_wall_time();
    c->used += r->cost;
    c->mem_used += c->spec->stages[i].mem_bytes;
    mr__ex_emit(c, MR_RUN_STAGE_STARTED, i, 0, NULL, NULL, r->log_path);
    return MR_OK;
}

/* A done stage whose op registers its output (package's register: NAME):
 * the bundle becomes a version of NAME, with this run and stage as its
 * makers. Cached or executed alike, so adding register: to a stage that
 * already ran registers its bundle without running it again; the same
 * bytes registered again are the version that holds them. A failure is a
 * warning: the stage's result stands and is cached. */
void mr__ex_register_output(run_ctx *c, size_t i)
{
    const mr_stage_spec *s = &c->spec->stages[i];
    const mr_value *reg = s->op->registers ? mr_value_get(s->def, "register") : NULL;
    const mr__plan *p = &c->plans[i];
    if (!reg || reg->kind != MR_V_STR || p->n_outs == 0 || c->o->dry) return;
    char *file = mr_path_join(p->outs[0].path, s->op->registers);
    char *abs = file ? mr_path_join(c->ws->root, file) : NULL;
    mr_error e;
    mr_error_init(&e);
    int64_t version = 0;
    int created = 0;
    char msg[1024];
    mr_status st = abs ? mr_registry_register(c->ws, reg->str, abs, c->run_id, s->name, &version, &created, &e)
                       : MR_ERR(&e, MR_E_NOMEM, "out of memory");
    if (st == MR_OK) {
        snprintf(msg, sizeof(msg), "%s %s version %lld (%s%s/%lld)", created ? "registered" : "already registered:",
                 reg->str, (long long)version, MR_MODEL_URI_PREFIX, reg->str, (long long)version);
        mr__ex_emit(c, MR_RUN_STAGE_NOTE, i, 0, msg, NULL, NULL);
    } else {
        char why[768];
        mr_error_format(&e, why, sizeof(why));
        snprintf(msg, sizeof(msg), "registering its bundle as %s failed: %s", reg->str, why);
        mr__ex_emit(c, MR_RUN_STAGE_WARNING, i, 0, msg, NULL, NULL);
    }
    mr_free(file);
    mr_free(abs);
}

/* A worker ended (worker_ok: it exited 0; why: how it ended otherwise):
 * read its result and record the stage. */
void mr__ex_finish(run_ctx *c, size_t i, const mr_proc_usage *ru, int worker_ok, const char *why)
{
    stage_rt *r = &c->rt[i];
    mr__plan *p = &c->plans[i];
    double wall = r->ended > 0 ? r->ended - r->started : mr_wall_time() - r->started;
    mr_job_result res;
    mr_error re;
    mr_error_init(&re);
    int have = mr_fs_exists(r->result_path) && mr_job_result_read(r->result_path, &res, &re) == MR_OK;
    if (!have) mr_job_result_init(&res);
    for (size_t k = 0; k < res.n_warnings; k++) mr__ex_emit(c, MR_RUN_STAGE_WARNING, i, 0, res.warnings[k], NULL, r->log_path);
    char msg[1024];
    const char *hint = NULL;
    if (have && c->on_result) c->on_result(c, i, &res);
    if (have && worker_ok && (res.status == MR_JOB_EXECUTED || res.status == MR_JOB_CACHED)) {
        int ok = 1;
        for (size_t k = 0; k < p->n_outs; k++) {
            const char *id = mr_job_result_output(&res, p->outs[k].name);
            if (!id) ok = 0;
            else snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", id);
        }
        if (ok) {
            r->state = ST_DONE;
            r->cached = res.status == MR_JOB_CACHED;
            if (r->cached) c->res->n_cached++;
            else c->res->n_executed++;
            mr__ex_emit(c, r->cached ? MR_RUN_STAGE_CACHED : MR_RUN_STAGE_DONE, i, wall, NULL, NULL, r->log_path);
        } else {
            mr__ex_fail_stage(c, i, "the stage worker reported incomplete outputs");
            mr__ex_emit(c, MR_RUN_STAGE_FAILED, i, wall, r->error, NULL, r->log_path);
        }
    } else {
        if (have && res.status == MR_JOB_FAILED) {
            mr__ex_stage_error_text(&res.error, msg, sizeof(msg));
            hint = res.error.hint[0] ? res.error.hint : NULL;
        } else if (!have && re.code != MR_OK && mr_fs_exists(r->result_path)) {
            mr_error_format(&re, msg, sizeof(msg));
        } else {
            snprintf(msg, sizeof(msg), "%s", why);
        }
        mr__ex_fail_stage(c, i, mr__g_interrupted ? "interrupted" : msg);
        /* A stage that failed but published its outputs (see worker.c): the
         * run records them, so a report can find them; nothing is cached. */
        int all = have && p->n_outs > 0;
        for (size_t k = 0; all && k < p->n_outs; k++) all = mr_job_result_output(&res, p->outs[k].name) != NULL;
        for (size_t k = 0; all && k < p->n_outs; k++)
            snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", mr_job_result_output(&res, p->outs[k].name));
        r->published = all;
        mr__ex_emit(c, MR_RUN_STAGE_FAILED, i, wall, r->error, mr__g_interrupted ? NULL : hint, mr__g_interrupted ? NULL : r->log_path);
    }
    mr_runstore_batch_begin(c->ws->rs, NULL);
    if (r->state == ST_DONE || r->published) mr__ex_record_result_metrics(c, i, &res);
    mr__ex_record_stage(c, i, ru, res.bytes_read, res.bytes_written);
    mr_runstore_batch_end(c->ws->rs, NULL);
    mr_job_result_deinit(&res);
    if (r->state == ST_DONE) mr__ex_register_output(c, i);
}

static void finish_stage(run_ctx *c, size_t i)
{
    stage_rt *r = &c->rt[i];
    c->used -= r->cost;
    c->mem_used -= c->spec->stages[i].mem_bytes;
    char how[128], why[160];
    mr_proc_describe(&r->proc, how, sizeof(how));
    snprintf(why, sizeof(why), "stage worker %s", how);
    mr__ex_finish(c, i, &r->proc.usage, mr_proc_ok(&r->proc), why);
}

/* 1 if the stage was ever computed (so a miss means something changed). */
static int ever_ran(run_ctx *c, size_t i)
{
    char *prev = NULL;
    if (mr_runstore_cache_last_for_stage(c->ws->rs, c->spec->stages[i].name, &prev, NULL, NULL) != MR_OK) return 0;
    mr_free(prev);
    return 1;
}

void mr__ex_fail_unplanned(run_ctx *c, size_t i, const mr_error *e)
{
    char msg[1024];
    mr__ex_stage_error_text(e, msg, sizeof(msg));
    mr__ex_fail_stage(c, i, msg);
    mr__ex_emit(c, MR_RUN_STAGE_FAILED, i, 0, msg, e->hint[0] ? e->hint : NULL, NULL);
    mr__ex_record_stage(c, i, NULL, 0, 0);
}

/* The pending stages whose upstreams are done, with their inputs listed;
 * stages downstream of a failure are skipped. Returns how many. */
static size_t ready_wave(run_ctx *c, size_t *batch)
{
    const size_t *order = mr_dag_order(c->dag);
    size_t nb = 0;
    for (size_t k = 0; k < c->n; k++) {
        size_t i = order[k];
        stage_rt *r = &c->rt[i];
        if (r->state != ST_PENDING || c->plans[i].key[0]) continue;
        int us = mr__ex_upstream_state(c, i);
        if (us == ST_SKIPPED) {
            mr__ex_skip(c, i);
            continue;
        }
        if (us == ST_WOULD_RUN) {
            r->state = ST_WOULD_RUN;
            r->why = "an upstream stage would run";
            c->res->n_would_run++;
            continue;
        }
        if (us != ST_DONE) continue;
        mr_error e;
        mr_error_init(&e);
        if (mr__plan_inputs(c->dag, i, c->plans, &e) != MR_OK) {
            mr__ex_fail_unplanned(c, i, &e);
            continue;
        }
        batch[nb++] = i;
    }
    return nb;
}

/* Stage i's key is known: a cache hit whose outputs are in place is done;
 * otherwise it is sized to run (or, in a dry run, marked would-run). */
static void plan_stage(run_ctx *c, size_t i)
{
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    const mr_value *ac = mr_value_get(s->def, "always_changed");
    int always = ac && ac->kind == MR_V_BOOL && ac->u.b;
    if (!r->forced && !always && mr__plan_cache_lookup(c->ws, &c->plans[i], &r->metrics_json)) {
        if (mr__plan_outputs_in_place(c->ws, &c->plans[i]) || c->o->dry) {
            r->state = ST_DONE;
            r->cached = 1;
            c->res->n_cached++;
            if (!c->o->dry) {
                mr__ex_emit(c, MR_RUN_STAGE_CACHED, i, 0, NULL, NULL, NULL);
                record_cached_metrics(c, i, r->metrics_json);
                mr__ex_record_stage(c, i, NULL, 0, 0);
                mr__ex_register_output(c, i);
            }
            return;
        }
        /* Cached, but the workspace copy is missing or was edited: the
         * worker restores it under the stage lock. */
    }
    if (c->o->dry) {
        r->state = ST_WOULD_RUN;
        r->why = r->forced ? "forced" : always ? "always_changed" : ever_ran(c, i) ? "inputs, params or code changed" : "never run";
        c->res->n_would_run++;
        return;
    }
    int cost = (int)(s->cpus + 0.999);
    if (cost < 1) cost = 1;
    if (cost > c->budget) cost = c->budget;
    r->cost = cost;
}

/* Plans every pending stage whose upstreams are done: inputs, one parallel
 * hashing batch, keys, cache lookups. */
void mr__ex_plan_ready(run_ctx *c)
{
    size_t *batch = mr_calloc(c->n ? c->n : 1, sizeof(*batch));
    if (!batch) return;
    size_t nb = ready_wave(c, batch);
    /* Hash all workspace inputs of this wave together (parallel). */
    mr_error e;
    mr_error_init(&e);
    if (nb && mr__plan_hash_inputs(c->ws, c->plans, batch, nb, NULL, &e) != MR_OK) {
        /* Find which stage failed by hashing one at a time. */
        for (size_t b = 0; b < nb; b++) {
            mr_error e1;
            mr_error_init(&e1);
            if (mr__plan_hash_inputs(c->ws, c->plans, &batch[b], 1, NULL, &e1) != MR_OK) {
                mr__ex_fail_unplanned(c, batch[b], &e1);
                batch[b] = (size_t)-1;
            }
        }
    }
    /* One transaction for the run-store writes of this wave (cached stages). */
    mr_runstore_batch_begin(c->ws->rs, NULL);
    for (size_t b = 0; b < nb; b++) {
        size_t i = batch[b];
        if (i == (size_t)-1) continue;
        mr_error_init(&e);
        if (mr__plan_key(c->spec, i, c->o->smoke, c->git_desc, &c->plans[i], &e) != MR_OK) {
            mr__ex_fail_unplanned(c, i, &e);
            continue;
        }
        plan_stage(c, i);
    }
    mr_runstore_batch_end(c->ws->rs, NULL);
    mr_free(batch);
}

/* The live line: "running: train 2.1s, eval 0.3s". */
static void tick(run_ctx *c)
{
    char detail[256];
    size_t off = 0;
    double now = mr_wall_time();
    detail[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        stage_rt *r = &c->rt[i];
        if (r->state == ST_RUNNING && off < sizeof(detail) - 1) {
            int k = snprintf(detail + off, sizeof(detail) - off, "%s%s %.1fs", off ? ", " : "running: ",
                             c->spec->stages[i].name, now - r->started);
            if (k > 0) off += (size_t)k;
        }
    }
    mr__ex_emit(c, MR_RUN_TICK, (size_t)-1, 0, detail, NULL, NULL);
}

/* The workers of running stages, for the supervisor. */
static size_t running_procs(run_ctx *c, mr_proc **procs)
{
    size_t m = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->rt[i].state == ST_RUNNING) procs[m++] = &c->rt[i].proc;
    return m;
}

static size_t stage_of_proc(run_ctx *c, const mr_proc *p)
{
    for (size_t i = 0; i < c->n; i++)
        if (&c->rt[i].proc == p) return i;
    return (size_t)-1;
}

static void stop_children(run_ctx *c)
{
    mr_proc **procs = mr_calloc(c->n ? c->n : 1, sizeof(*procs));
    if (!procs) return;
    size_t m = running_procs(c, procs);
    mr_proc_terminate(procs, m, STOP_GRACE_S);
    for (size_t k = 0; k < m; k++) finish_stage(c, stage_of_proc(c, procs[k]));
    mr_free(procs);
}

/* Starts what fits in the budget, in topological order. */
static void start_ready(run_ctx *c)
{
    int stop_new = c->any_failed && !c->o->keep_going;
    for (size_t k = 0; k < c->n && !stop_new && !c->o->dry; k++) {
        size_t i = mr_dag_order(c->dag)[k];
        stage_rt *r = &c->rt[i];
        if (r->state != ST_PENDING || !c->plans[i].key[0]) continue;
        if (c->used > 0 && c->used + r->cost > c->budget) break;
        if (c->used > 0 && c->mem_used + c->spec->stages[i].mem_bytes > c->mem_budget) break;
        mr_error e;
        mr_error_init(&e);
        if (start_stage(c, i, &e) != MR_OK) {
            mr__ex_fail_unplanned(c, i, &e);
            stop_new = !c->o->keep_going;
        }
    }
}

/* The scheduling loop: plan what is ready, start what fits, wait for a
 * worker; until nothing runs and nothing more can start. */
static void run_loop(run_ctx *c, mr_proc **procs)
{
    for (;;) {
        if (!mr__g_interrupted) mr__ex_plan_ready(c);
        if (mr__g_interrupted) break;
        start_ready(c);
        int running = 0, pending = 0;
        for (size_t i = 0; i < c->n; i++) {
            running += c->rt[i].state == ST_RUNNING;
            pending += c->rt[i].state == ST_PENDING;
        }
        if (!running) {
            if (!pending) break; /* a dry run also loops: each pass marks the next wave */
            /* Pending stages that can never start (after a failure without --keep-going). */
            if (c->any_failed && !c->o->keep_going) break;
            int progress = 0;
            for (size_t i = 0; i < c->n; i++)
                if (c->rt[i].state == ST_PENDING && !c->plans[i].key[0] && mr__ex_upstream_state(c, i) != ST_PENDING) progress = 1;
            if (!progress) break;
            continue;
        }
        size_t m = running_procs(c, procs);
        mr_proc *done = mr_proc_wait_any(procs, m, !c->o->ticks);
        if (!done) { /* ticks: redraw the live line while stages run */
            tick(c);
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        finish_stage(c, stage_of_proc(c, done));
    }
}

static mr_status begin_run(run_ctx *c, mr_error *err)
{
    char commit[64];
    int dirty = 0;
    mr__git_info(c->ws->root, commit, sizeof(commit), &dirty);
    mr_buf pj, ov;
    mr_buf_init(&pj);
    mr_buf_init(&ov);
    mr_value_to_json(c->spec->params, 1, &pj);
    for (size_t k = 0; k < c->spec->n_overrides; k++) mr_buf_printf(&ov, "%s%s", k ? " " : "", c->spec->overrides[k]);
    mr_run_begin rb = {.argv = c->o->argv ? c->o->argv : "",
                       .cwd = c->ws->root,
                       .git_commit = commit,
                       .git_dirty = dirty,
                       .params_json = pj.data ? pj.data : "{}",
                       .overrides = ov.data ? ov.data : "",
                       .smoke = c->o->smoke,
                       .name = c->o->name,
                       .tags = c->o->tags,
                       .n_tags = c->o->n_tags};
    mr_status rc = mr_runstore_run_begin(c->ws->rs, &rb, &c->run_id, err);
    mr_buf_free(&pj);
    mr_buf_free(&ov);
    c->res->run_id = c->run_id;
    return rc;
}

/* Marks stages never started, updates millrace.lock and closes the run. */
void mr__ex_end_run(run_ctx *c, int *done)
{
    mr_run_result *res = c->res;
    for (size_t i = 0; i < c->n; i++) {
        stage_rt *r = &c->rt[i];
        if (r->state == ST_PENDING && !c->o->dry) {
            r->state = ST_SKIPPED;
            res->n_skipped++;
            mr__ex_record_stage(c, i, NULL, 0, 0);
        }
        if (r->state == ST_FAILED) res->n_failed++;
        done[i] = r->state == ST_DONE;
    }
    if (c->o->dry) return;
    mr_error e;
    mr_error_init(&e);
    int any_done = 0;
    for (size_t i = 0; i < c->n; i++) any_done |= done[i];
    if (any_done && mr__lock_update(c->ws, c->spec, c->plans, done, &e) != MR_OK)
        mr_log(MR_LOG_WARN, "millrace.lock not updated: %s", e.msg);
    mr_error_init(&e);
    mr_runstore_run_end(c->ws->rs, c->run_id, res->interrupted ? "interrupted" : c->any_failed ? "failed" : "ok",
                        res->n_executed, res->n_cached, res->n_failed, res->n_skipped, &e);
}

/* Every stage's outcome, in topological order, into the result. */
mr_status mr__ex_fill_result(run_ctx *c, mr_error *err)
{
    mr_run_result *res = c->res;
    res->detached = c->detached;
    res->stages = mr_calloc(c->n ? c->n : 1, sizeof(*res->stages));
    if (!res->stages) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    res->n_stages = c->n;
    for (size_t k = 0; k < c->n; k++) {
        size_t i = mr_dag_order(c->dag)[k];
        stage_rt *r = &c->rt[i];
        mr_run_stage_result *sr = &res->stages[k];
        sr->stage = c->spec->stages[i].name;
        sr->status = r->state == ST_UNSELECTED                 ? NULL
                     : c->o->dry && r->state == ST_DONE      ? "up to date"
                     : c->detached && r->state == ST_RUNNING ? "submitted"
                                                             : status_word(r);
        res->n_submitted += c->detached && r->state == ST_RUNNING;
        snprintf(sr->key, sizeof(sr->key), "%s", c->plans[i].key);
        sr->error = r->error;
        r->error = NULL;
        sr->why = r->why;
    }
    return MR_OK;
}

void mr_run_result_free(mr_run_result *res)
{
    if (!res) return;
    for (size_t k = 0; k < res->n_stages; k++) mr_free(res->stages[k].error);
    mr_free(res->stages);
    res->stages = NULL;
    res->n_stages = 0;
}

mr_status mr_pipeline_run(mr_workspace *ws, const mr_spec *spec, const mr_run_opts *opts, mr_run_result *res,
                          mr_error *err)
{
    run_ctx c;
    memset(&c, 0, sizeof(c));
    memset(res, 0, sizeof(*res));
    c.ws = ws;
    c.spec = spec;
    c.o = opts;
    c.res = res;
    c.n = spec->n_stages;
    struct sigaction sa_old[2];
    int handlers = 0, *done = NULL;
    mr_flock gc_lock = {-1, NULL};
    mr_proc **procs = NULL;
    mr_status rc = check_names(spec, opts->force, opts->n_force, "--force", err);
    if (rc == MR_OK) rc = check_names(spec, opts->downstream, opts->n_downstream, "--downstream", err);
    if (rc == MR_OK) rc = check_names(spec, opts->targets, opts->n_targets, "run", err);
    int have_remote = 0;
    if (rc == MR_OK && !opts->no_remote && !opts->dry) rc = mr__remote_for_run(spec, opts->remote, &c.remote, &have_remote, err);
    if (rc == MR_OK) rc = mr_dag_build(spec, &c.dag, err);
    if (rc != MR_OK) return rc;
    c.plans = mr_calloc(c.n ? c.n : 1, sizeof(*c.plans));
    c.rt = mr_calloc(c.n ? c.n : 1, sizeof(*c.rt));
    done = mr_calloc(c.n ? c.n : 1, sizeof(*done));
    procs = mr_calloc(c.n ? c.n : 1, sizeof(*procs));
    if (!c.plans || !c.rt || !done || !procs) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < c.n && rc == MR_OK; i++) rc = mr__plan_outputs(c.dag, i, &c.plans[i], err);
    if (rc != MR_OK) goto done;
    c.budget = opts->jobs > 0 ? opts->jobs : mr_cpu_count();
    {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        c.mem_budget = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    }
    select_stages(&c);
    for (size_t i = 0; i < c.n; i++)
        if (spec->stages[i].op->flags & MR_OP_GIT_COMMIT) {
            mr__git_describe(ws->root, c.git_desc, sizeof(c.git_desc));
            break;
        }
    if (!opts->dry) {
        /* gc never runs while this run may publish or use artifacts */
        rc = mr__workspace_gc_lock(ws, MR_LOCK_SHARED, &gc_lock, err);
        if (rc != MR_OK) goto done;
        rc = begin_run(&c, err);
        if (rc != MR_OK) goto done;
        mr__ex_signals(1, sa_old);
        handlers = 1;
    }
    mr__g_interrupted = 0;
    if (opts->slurm && !opts->dry) {
        c.budget = INT32_MAX / 2; /* the cluster's cores, not this machine's: a stage gets its resources.cpus */
        mr__slurm_run(&c);
    } else {
        run_loop(&c, procs);
    }
    if (mr__g_interrupted) {
        res->interrupted = 1;
        stop_children(&c);
    }
    if (!c.detached) mr__ex_end_run(&c, done);
    rc = mr__ex_fill_result(&c, err);
    if (rc == MR_OK && res->interrupted)
        rc = MR_ERR(err, MR_E_INTERRUPTED, "run %lld interrupted", (long long)c.run_id);
    else if (rc == MR_OK && c.any_failed)
        rc = MR_ERR(err, MR_E_FAILED, "run %lld: %d stage%s failed", (long long)c.run_id, res->n_failed,
                    res->n_failed == 1 ? "" : "s");
done:
    mr_flock_release(&gc_lock);
    if (handlers) mr__ex_signals(0, sa_old);
    mr__ex_ctx_free(&c);
    mr_free(done);
    mr_free(procs);
    return rc;
}
