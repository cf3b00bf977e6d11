/* The executor: plans stages in topological order as their inputs become
 * known, serves hits from the stage cache, and runs the rest as child
 * processes (`millrace stage run NAME --job FILE`) within the core budget.
 * Per stage it records wall time, CPU, peak RSS (wait4) and I/O bytes (the
 * worker's /proc/self/io), then updates the run store and millrace.lock.
 *
 * Failure policy: a failed stage skips everything downstream of it. Without
 * --keep-going no new stage starts after a failure (stages already running
 * finish, as with make); with --keep-going every stage that does not depend
 * on a failure still runs. SIGINT/SIGTERM stop the children (SIGTERM to
 * their process groups, SIGKILL after a grace period) and the run is
 * recorded as interrupted. */
#define _GNU_SOURCE
#include "pipeline_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

enum { ST_UNSELECTED, ST_PENDING, ST_RUNNING, ST_DONE, ST_FAILED, ST_SKIPPED, ST_WOULD_RUN };

typedef struct stage_rt {
    int state;
    int cached;         /* DONE from the cache */
    int forced;
    int published;      /* FAILED, but its outputs were published (a failed check's results) */
    int cost;           /* cores it occupies while running */
    pid_t pid;
    double started;
    char *job_path, *result_path, *log_path;
    char *error;        /* failure message */
    char *metrics_json; /* from a cache hit */
    const char *why;    /* dry run: why it would run */
} stage_rt;

mr_run_opts mr_run_opts_default(void)
{
    mr_run_opts o;
    memset(&o, 0, sizeof(o));
    return o;
}

static volatile sig_atomic_t g_interrupted;
static void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

typedef struct run_ctx {
    mr_workspace *ws;
    const mr_spec *spec;
    const mr_run_opts *o;
    mr_dag *dag;
    mr__plan *plans;
    stage_rt *rt;
    size_t n;
    int64_t run_id;
    int budget, used;             /* cores: -j, and what running stages hold */
    uint64_t mem_budget, mem_used; /* bytes: physical RAM, and what running stages declared */
    int any_failed;
    mr_run_result *res;
    mr_progress *progress; /* live line on a terminal, NULL otherwise */
} run_ctx;

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

static void say(run_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(run_ctx *c, const char *fmt, ...)
{
    if (c->o->json || mr_log_get_level() > MR_LOG_INFO) return;
    mr_progress_clear();
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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
}

static int upstream_state(run_ctx *c, size_t i)
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

static void fail_stage(run_ctx *c, size_t i, const char *msg)
{
    c->rt[i].state = ST_FAILED;
    mr_free(c->rt[i].error);
    c->rt[i].error = mr_strdup(msg);
    c->any_failed = 1;
}

static void record_stage(run_ctx *c, size_t i, const struct rusage *ru, int64_t bytes_read, int64_t bytes_written)
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
        .wall_s = r->started > 0 ? mr_wall_time() - r->started : 0,
        .user_s = ru ? (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 : 0,
        .sys_s = ru ? (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6 : 0,
        .max_rss_kb = ru ? ru->ru_maxrss : 0,
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

/* Records metrics given as JSON [{"name":..,"step":..,"value":..}]. */
static void record_metrics(run_ctx *c, size_t i, json_t *arr)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0) return;
    size_t n = json_array_size(arr);
    mr_metric *m = mr_calloc(n, sizeof(*m));
    if (!m) return;
    size_t k = 0, idx;
    json_t *x;
    json_array_foreach(arr, idx, x)
    {
        const char *name = json_string_value(json_object_get(x, "name"));
        json_t *v = json_object_get(x, "value");
        if (!name || !json_is_number(v)) continue;
        m[k].name = name;
        m[k].step = (int64_t)json_integer_value(json_object_get(x, "step"));
        m[k].value = json_number_value(v);
        k++;
    }
    mr_error e;
    mr_error_init(&e);
    if (k && mr_runstore_metrics_add(c->ws->rs, c->run_id, c->spec->stages[i].name, m, k, &e) != MR_OK)
        mr_log(MR_LOG_WARN, "run store: %s", e.msg);
    mr_free(m);
}

static mr_status write_job(run_ctx *c, size_t i, mr_error *err)
{
    const mr_stage_spec *s = &c->spec->stages[i];
    mr__plan *p = &c->plans[i];
    stage_rt *r = &c->rt[i];
    mr_value *def = NULL;
    mr_buf defj;
    mr_buf_init(&defj);
    json_t *job = NULL;
    char *text = NULL;
    mr_status rc = mr__resolve_refs(s->def, c->dag, c->plans, &def, err);
    if (rc != MR_OK) goto done;
    if (mr_value_to_json(def, 0, &defj) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    job = json_object();
    json_t *ins = json_array(), *outs = json_array();
    for (size_t k = 0; k < p->n_ins; k++)
        json_array_append_new(ins, json_pack("{s:s,s:s,s:s}", "name", p->ins[k].name, "path", p->ins[k].path, "id", p->ins[k].id));
    for (size_t k = 0; k < p->n_outs; k++)
        json_array_append_new(outs, json_pack("{s:s,s:s,s:b}", "name", p->outs[k].name, "path", p->outs[k].path, "metrics",
                                              k >= p->n_outs - p->n_metrics));
    json_object_set_new(job, "format", json_string("millrace-job/1"));
    json_object_set_new(job, "stage", json_string(s->name));
    json_object_set_new(job, "op", json_string(s->op->name));
    json_object_set_new(job, "key", json_string(p->key));
    json_object_set_new(job, "key_doc", json_string(p->key_doc));
    json_object_set_new(job, "run_id", json_integer(c->run_id));
    json_object_set_new(job, "smoke", json_boolean(c->o->smoke));
    json_object_set_new(job, "threads", json_integer(r->cost));
    json_object_set_new(job, "mem_bytes", json_integer((json_int_t)s->mem_bytes));
    json_object_set_new(job, "workspace", json_string(c->ws->root));
    json_object_set_new(job, "def", json_loads(defj.data, 0, NULL));
    json_object_set_new(job, "params", json_loads(p->params_json ? p->params_json : "{}", 0, NULL));
    json_object_set_new(job, "inputs", ins);
    json_object_set_new(job, "outputs", outs);
    json_object_set_new(job, "force", json_boolean(r->forced != 0));
    json_object_set_new(job, "result", json_string(r->result_path));
    text = json_dumps(job, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (!text) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    rc = mr_fs_write_atomic(r->job_path, text, strlen(text), err);
done:
    free(text);
    json_decref(job);
    mr_value_free(def);
    mr_buf_free(&defj);
    return rc;
}

static mr_status start_stage(run_ctx *c, size_t i, mr_error *err)
{
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    mr_status rc = MR_OK;
    char *dir = mr_asprintf("%s/logs/run-%lld", c->ws->dot, (long long)c->run_id);
    if (!dir) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    rc = mr_fs_mkdirs(dir, err);
    r->job_path = mr_asprintf("%s/%s.job.json", dir, s->name);
    r->result_path = mr_asprintf("%s/%s.result.json", dir, s->name);
    r->log_path = mr_asprintf("%s/%s.log", dir, s->name);
    mr_free(dir);
    if (rc != MR_OK) return rc;
    if (!r->job_path || !r->result_path || !r->log_path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    unlink(r->result_path);
    rc = write_job(c, i, err);
    if (rc != MR_OK) return rc;
    int log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create log", r->log_path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(log_fd);
        return MR_ERR_SYS(err, MR_E_IO, errno, "cannot start stage '%s'", s->name);
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        execl(c->o->self_exe, "millrace", "stage", "run", s->name, "--job", r->job_path, (char *)NULL);
        dprintf(2, "millrace: error: cannot execute %s: %s\n", c->o->self_exe, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(log_fd);
    r->pid = pid;
    r->state = ST_RUNNING;
    r->started = mr_wall_time();
    c->used += r->cost;
    c->mem_used += c->spec->stages[i].mem_bytes;
    say(c, "%s  running%s %s", mr_c_bold(), mr_c_reset(), s->name);
    return MR_OK;
}

/* The last lines of a stage log, indented, for the failure summary. */
static void print_log_tail(const char *path, int max_lines)
{
    char *text = NULL;
    size_t len = 0;
    if (mr_fs_read_file(path, (size_t)64 << 20, &text, &len, NULL) != MR_OK) return;
    int lines = 0;
    size_t start = len;
    while (start > 0) {
        if (text[start - 1] == '\n' && start != len && ++lines >= max_lines) break;
        start--;
    }
    if (len) {
        fprintf(stderr, "    --- %s (last lines) ---\n", path);
        char *line = text + start;
        while (*line) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            fprintf(stderr, "    | %s\n", line);
            if (!nl) break;
            line = nl + 1;
        }
    }
    mr_free(text);
}

static void finish_stage(run_ctx *c, size_t i, int wstatus, const struct rusage *ru)
{
    stage_rt *r = &c->rt[i];
    const mr_stage_spec *s = &c->spec->stages[i];
    mr__plan *p = &c->plans[i];
    c->used -= r->cost;
    c->mem_used -= c->spec->stages[i].mem_bytes;
    r->pid = 0;
    double wall = mr_wall_time() - r->started;
    json_t *res = mr_fs_exists(r->result_path) ? json_load_file(r->result_path, 0, NULL) : NULL;
    int64_t br = 0, bw = 0;
    if (res) {
        br = json_integer_value(json_object_get(res, "bytes_read"));
        bw = json_integer_value(json_object_get(res, "bytes_written"));
    }
    const char *rstatus = res ? json_string_value(json_object_get(res, "status")) : NULL;
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && rstatus &&
        (!strcmp(rstatus, "executed") || !strcmp(rstatus, "cached"))) {
        json_t *outs = json_object_get(res, "outputs");
        int ok = 1;
        for (size_t k = 0; k < p->n_outs; k++) {
            const char *id = json_string_value(json_object_get(outs, p->outs[k].name));
            if (!id) ok = 0;
            else snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", id);
        }
        if (ok) {
            r->state = ST_DONE;
            r->cached = !strcmp(rstatus, "cached");
            if (r->cached) c->res->n_cached++;
            else c->res->n_executed++;
            say(c, "%s  %s%s %s (%.2fs)", r->cached ? mr_c_dim() : mr_c_green(), r->cached ? "cached " : "done   ", mr_c_reset(),
                s->name, wall);
        } else {
            fail_stage(c, i, "the stage worker reported incomplete outputs");
        }
    } else {
        const char *emsg = res ? json_string_value(json_object_get(res, "error")) : NULL;
        char buf[256];
        if (!emsg) {
            if (WIFSIGNALED(wstatus))
                snprintf(buf, sizeof(buf), "stage worker killed by signal %d", WTERMSIG(wstatus));
            else
                snprintf(buf, sizeof(buf), "stage worker exited with status %d", WEXITSTATUS(wstatus));
            emsg = buf;
        }
        fail_stage(c, i, emsg);
        /* A stage that failed but published its outputs (see worker.c): the
         * run records them, so a report can find them; nothing is cached. */
        json_t *fouts = res ? json_object_get(res, "outputs") : NULL;
        int all = json_is_object(fouts) && p->n_outs > 0;
        for (size_t k = 0; all && k < p->n_outs; k++) all = json_is_string(json_object_get(fouts, p->outs[k].name));
        for (size_t k = 0; all && k < p->n_outs; k++)
            snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", json_string_value(json_object_get(fouts, p->outs[k].name)));
        r->published = all;
        if (g_interrupted) mr_free(r->error), r->error = mr_strdup("interrupted");
        say(c, "%s  failed %s %s: %s", mr_c_red(), mr_c_reset(), s->name, r->error);
    }
    if (c->o->verbose || (r->state == ST_FAILED && !g_interrupted && !c->o->json)) print_log_tail(r->log_path, c->o->verbose ? 1000 : 10);
    mr_runstore_batch_begin(c->ws->rs, NULL);
    if (r->state == ST_DONE || r->published) record_metrics(c, i, json_object_get(res, "metrics"));
    record_stage(c, i, ru, br, bw);
    mr_runstore_batch_end(c->ws->rs, NULL);
    json_decref(res);
}

/* 1 if the stage was ever computed (so a miss means something changed). */
static int ever_ran(run_ctx *c, size_t i)
{
    char *prev = NULL;
    if (mr_runstore_cache_last_for_stage(c->ws->rs, c->spec->stages[i].name, &prev, NULL, NULL) != MR_OK) return 0;
    mr_free(prev);
    return 1;
}

/* Plans every pending stage whose upstreams are done: inputs, one parallel
 * hashing batch, keys, cache lookups. */
static void plan_ready(run_ctx *c)
{
    const size_t *order = mr_dag_order(c->dag);
    size_t *batch = mr_calloc(c->n ? c->n : 1, sizeof(*batch));
    size_t nb = 0;
    if (!batch) return;
    for (size_t k = 0; k < c->n; k++) {
        size_t i = order[k];
        stage_rt *r = &c->rt[i];
        if (r->state != ST_PENDING || c->plans[i].key[0]) continue;
        int us = upstream_state(c, i);
        if (us == ST_SKIPPED) {
            r->state = ST_SKIPPED;
            c->res->n_skipped++;
            say(c, "%s  skipped%s %s (an upstream stage failed)", mr_c_yellow(), mr_c_reset(), c->spec->stages[i].name);
            record_stage(c, i, NULL, 0, 0);
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
            char msg[1024];
            mr_error_format(&e, msg, sizeof(msg));
            fail_stage(c, i, msg);
            say(c, "%s  failed %s %s: %s", mr_c_red(), mr_c_reset(), c->spec->stages[i].name, msg);
            record_stage(c, i, NULL, 0, 0);
            continue;
        }
        batch[nb++] = i;
    }
    /* Hash all workspace inputs of this wave together (parallel). */
    mr_error e;
    mr_error_init(&e);
    if (nb && mr__plan_hash_inputs(c->ws, c->plans, batch, nb, NULL, &e) != MR_OK) {
        /* Find which stage failed by hashing one at a time. */
        for (size_t b = 0; b < nb; b++) {
            mr_error e1;
            mr_error_init(&e1);
            if (mr__plan_hash_inputs(c->ws, c->plans, &batch[b], 1, NULL, &e1) != MR_OK) {
                char msg[1024];
                mr_error_format(&e1, msg, sizeof(msg));
                fail_stage(c, batch[b], msg);
                say(c, "%s  failed %s %s: %s", mr_c_red(), mr_c_reset(), c->spec->stages[batch[b]].name, msg);
                record_stage(c, batch[b], NULL, 0, 0);
                batch[b] = (size_t)-1;
            }
        }
    }
    /* One transaction for the run-store writes of this wave (cached stages). */
    mr_runstore_batch_begin(c->ws->rs, NULL);
    for (size_t b = 0; b < nb; b++) {
        size_t i = batch[b];
        if (i == (size_t)-1) continue;
        stage_rt *r = &c->rt[i];
        const mr_stage_spec *s = &c->spec->stages[i];
        mr_error_init(&e);
        if (mr__plan_key(c->spec, i, c->o->smoke, &c->plans[i], &e) != MR_OK) {
            fail_stage(c, i, e.msg);
            record_stage(c, i, NULL, 0, 0);
            continue;
        }
        const mr_value *ac = mr_value_get(s->def, "always_changed");
        int always = ac && ac->kind == MR_V_BOOL && ac->u.b;
        if (!r->forced && !always && mr__plan_cache_lookup(c->ws, &c->plans[i], &r->metrics_json)) {
            if (mr__plan_outputs_in_place(c->ws, &c->plans[i]) || c->o->dry) {
                r->state = ST_DONE;
                r->cached = 1;
                c->res->n_cached++;
                if (!c->o->dry) {
                    say(c, "%s  cached %s %s", mr_c_dim(), mr_c_reset(), s->name);
                    json_t *m = r->metrics_json ? json_loads(r->metrics_json, 0, NULL) : NULL;
                    record_metrics(c, i, m);
                    json_decref(m);
                    record_stage(c, i, NULL, 0, 0);
                }
                continue;
            }
            /* Cached, but the workspace copy is missing or was edited:
             * the worker restores it under the stage lock. */
        }
        if (c->o->dry) {
            r->state = ST_WOULD_RUN;
            r->why = r->forced ? "forced" : always ? "always_changed" : ever_ran(c, i) ? "inputs, params or code changed" : "never run";
            c->res->n_would_run++;
            continue;
        }
        int cost = (int)(s->cpus + 0.999);
        if (cost < 1) cost = 1;
        if (cost > c->budget) cost = c->budget;
        r->cost = cost;
    }
    mr_runstore_batch_end(c->ws->rs, NULL);
    mr_free(batch);
}

/* The live line on a terminal: "[3/5] running: train 2.1s, eval 0.3s". */
static void show_running(run_ctx *c)
{
    char detail[256];
    size_t off = 0;
    int n_done = 0, n_sel = 0;
    double now = mr_wall_time();
    detail[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        stage_rt *r = &c->rt[i];
        if (r->state == ST_UNSELECTED) continue;
        n_sel++;
        n_done += r->state == ST_DONE || r->state == ST_FAILED || r->state == ST_SKIPPED;
        if (r->state == ST_RUNNING && off < sizeof(detail) - 1) {
            int k = snprintf(detail + off, sizeof(detail) - off, "%s%s %.1fs", off ? ", " : "running: ",
                             c->spec->stages[i].name, now - r->started);
            if (k > 0) off += (size_t)k;
        }
    }
    mr_progress_update(c->progress, (uint64_t)n_done, detail);
}

static size_t find_by_pid(run_ctx *c, pid_t pid)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->rt[i].state == ST_RUNNING && c->rt[i].pid == pid) return i;
    return (size_t)-1;
}

static void stop_children(run_ctx *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->rt[i].state == ST_RUNNING && c->rt[i].pid > 0) kill(-c->rt[i].pid, SIGTERM);
    double deadline = mr_now() + 5.0;
    for (;;) {
        int any = 0;
        for (size_t i = 0; i < c->n; i++) any |= c->rt[i].state == ST_RUNNING;
        if (!any) break;
        struct rusage ru;
        int ws;
        pid_t pid = wait4(-1, &ws, WNOHANG, &ru);
        if (pid > 0) {
            size_t i = find_by_pid(c, pid);
            if (i != (size_t)-1) finish_stage(c, i, ws, &ru);
            continue;
        }
        if (mr_now() > deadline) {
            for (size_t i = 0; i < c->n; i++)
                if (c->rt[i].state == ST_RUNNING && c->rt[i].pid > 0) kill(-c->rt[i].pid, SIGKILL);
            deadline = mr_now() + 60;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void print_summary(run_ctx *c)
{
    mr_run_result *res = c->res;
    if (c->o->json) {
        json_t *j = json_object(), *stages = json_array();
        for (size_t i = 0; i < c->n; i++) {
            if (c->rt[i].state == ST_UNSELECTED) continue;
            json_t *s = json_pack("{s:s,s:s,s:s}", "stage", c->spec->stages[i].name, "status", status_word(&c->rt[i]), "key",
                                  c->plans[i].key);
            if (c->rt[i].error) json_object_set_new(s, "error", json_string(c->rt[i].error));
            if (c->rt[i].why) json_object_set_new(s, "why", json_string(c->rt[i].why));
            json_array_append_new(stages, s);
        }
        json_object_set_new(j, "run_id", c->run_id ? json_integer(c->run_id) : json_null());
        json_object_set_new(j, "status", json_string(res->interrupted ? "interrupted" : c->any_failed ? "failed" : "ok"));
        json_object_set_new(j, "executed", json_integer(res->n_executed));
        json_object_set_new(j, "cached", json_integer(res->n_cached));
        json_object_set_new(j, "failed", json_integer(res->n_failed));
        json_object_set_new(j, "skipped", json_integer(res->n_skipped));
        json_object_set_new(j, "would_run", json_integer(res->n_would_run));
        json_object_set_new(j, "stages", stages);
        char *t = json_dumps(j, JSON_INDENT(2));
        if (t) printf("%s\n", t);
        free(t);
        json_decref(j);
        return;
    }
    if (c->o->dry) {
        for (size_t k = 0; k < c->n; k++) {
            size_t i = mr_dag_order(c->dag)[k];
            if (c->rt[i].state == ST_WOULD_RUN) printf("would run  %s (%s)\n", c->spec->stages[i].name, c->rt[i].why);
            else if (c->rt[i].state == ST_DONE) printf("up to date %s\n", c->spec->stages[i].name);
        }
        return;
    }
    if (mr_log_get_level() > MR_LOG_INFO) return;
    fprintf(stderr, "run %lld: %d executed, %d cached, %d failed, %d skipped%s\n", (long long)c->run_id, res->n_executed,
            res->n_cached, res->n_failed, res->n_skipped, res->interrupted ? " (interrupted)" : "");
    for (size_t i = 0; i < c->n; i++)
        if (c->rt[i].state == ST_FAILED)
            fprintf(stderr, "  %sfailed%s  %s: %s\n", mr_c_red(), mr_c_reset(), c->spec->stages[i].name, c->rt[i].error);
    for (size_t i = 0; i < c->n; i++)
        if (c->rt[i].state == ST_SKIPPED) fprintf(stderr, "  skipped %s\n", c->spec->stages[i].name);
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
    mr_status rc = check_names(spec, opts->force, opts->n_force, "--force", err);
    if (rc == MR_OK) rc = check_names(spec, opts->downstream, opts->n_downstream, "--downstream", err);
    if (rc == MR_OK) rc = check_names(spec, opts->targets, opts->n_targets, "run", err);
    if (rc != MR_OK) return rc;
    rc = mr_dag_build(spec, &c.dag, err);
    if (rc != MR_OK) return rc;
    c.plans = mr_calloc(c.n ? c.n : 1, sizeof(*c.plans));
    c.rt = mr_calloc(c.n ? c.n : 1, sizeof(*c.rt));
    int *done = mr_calloc(c.n ? c.n : 1, sizeof(*done));
    struct sigaction sa_old_int, sa_old_term;
    int handlers = 0;
    if (!c.plans || !c.rt || !done) {
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

    if (!opts->dry) {
        char commit[64];
        int dirty = 0;
        mr__git_info(ws->root, commit, sizeof(commit), &dirty);
        mr_buf pj, ov;
        mr_buf_init(&pj);
        mr_buf_init(&ov);
        mr_value_to_json(spec->params, 1, &pj);
        for (size_t k = 0; k < spec->n_overrides; k++) mr_buf_printf(&ov, "%s%s", k ? " " : "", spec->overrides[k]);
        mr_run_begin rb = {.argv = opts->argv ? opts->argv : "",
                           .cwd = ws->root,
                           .git_commit = commit,
                           .git_dirty = dirty,
                           .params_json = pj.data ? pj.data : "{}",
                           .overrides = ov.data ? ov.data : "",
                           .smoke = opts->smoke};
        rc = mr_runstore_run_begin(ws->rs, &rb, &c.run_id, err);
        mr_buf_free(&pj);
        mr_buf_free(&ov);
        if (rc != MR_OK) goto done;
        res->run_id = c.run_id;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &sa_old_int);
        sigaction(SIGTERM, &sa, &sa_old_term);
        handlers = 1;
    }
    g_interrupted = 0;
    if (mr_progress_tty() && !opts->dry && !opts->json) {
        uint64_t n_sel = 0;
        for (size_t i = 0; i < c.n; i++) n_sel += c.rt[i].state != ST_UNSELECTED;
        c.progress = mr_progress_begin("stages", n_sel, NULL);
    }

    for (;;) {
        if (!g_interrupted) plan_ready(&c);
        if (g_interrupted) break;
        /* Start what fits in the budget, in topological order. */
        int stop_new = c.any_failed && !opts->keep_going;
        for (size_t k = 0; k < c.n && !stop_new && !opts->dry; k++) {
            size_t i = mr_dag_order(c.dag)[k];
            stage_rt *r = &c.rt[i];
            if (r->state != ST_PENDING || !c.plans[i].key[0]) continue;
            if (c.used > 0 && c.used + r->cost > c.budget) break;
            if (c.used > 0 && c.mem_used + c.spec->stages[i].mem_bytes > c.mem_budget) break;
            mr_error e;
            mr_error_init(&e);
            if (start_stage(&c, i, &e) != MR_OK) {
                char msg[1024];
                mr_error_format(&e, msg, sizeof(msg));
                fail_stage(&c, i, msg);
                record_stage(&c, i, NULL, 0, 0);
                stop_new = !opts->keep_going;
            }
        }
        int running = 0, pending = 0;
        for (size_t i = 0; i < c.n; i++) {
            running += c.rt[i].state == ST_RUNNING;
            pending += c.rt[i].state == ST_PENDING;
        }
        if (!running) {
            if (!pending) break; /* a dry run also loops: each pass marks the next wave */
            /* Pending stages that can never start (after a failure without --keep-going). */
            if (c.any_failed && !opts->keep_going) break;
            int progress = 0;
            for (size_t i = 0; i < c.n; i++)
                if (c.rt[i].state == ST_PENDING && !c.plans[i].key[0] && upstream_state(&c, i) != ST_PENDING) progress = 1;
            if (!progress) break;
            continue;
        }
        struct rusage ru;
        int wstatus;
        pid_t pid = wait4(-1, &wstatus, c.progress ? WNOHANG : 0, &ru);
        if (pid == 0) { /* terminal: redraw the live line while stages run */
            show_running(&c);
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        size_t i = find_by_pid(&c, pid);
        if (i != (size_t)-1) finish_stage(&c, i, wstatus, &ru);
    }
    if (g_interrupted) {
        res->interrupted = 1;
        stop_children(&c);
    }
    /* Stages never started: skipped (after a failure) or interrupted. */
    for (size_t i = 0; i < c.n; i++) {
        stage_rt *r = &c.rt[i];
        if (r->state == ST_PENDING && !opts->dry) {
            r->state = ST_SKIPPED;
            res->n_skipped++;
            record_stage(&c, i, NULL, 0, 0);
        }
        if (r->state == ST_FAILED) res->n_failed++;
        done[i] = r->state == ST_DONE;
    }
    if (!opts->dry) {
        mr_error e;
        mr_error_init(&e);
        int any_done = 0;
        for (size_t i = 0; i < c.n; i++) any_done |= done[i];
        if (any_done && mr__lock_update(ws, spec, c.plans, done, &e) != MR_OK) mr_log_error(&e);
        mr_error_init(&e);
        mr_runstore_run_end(ws->rs, c.run_id, res->interrupted ? "interrupted" : c.any_failed ? "failed" : "ok",
                            res->n_executed, res->n_cached, res->n_failed, res->n_skipped, &e);
    }
    mr_progress_clear();
    mr_free(c.progress);
    c.progress = NULL;
    print_summary(&c);
    if (res->interrupted)
        rc = MR_ERR(err, MR_E_INTERRUPTED, "run %lld interrupted", (long long)c.run_id);
    else if (c.any_failed)
        rc = MR_ERR(err, MR_E_FAILED, "run %lld: %d stage%s failed", (long long)c.run_id, res->n_failed,
                    res->n_failed == 1 ? "" : "s");
done:
    if (handlers) {
        sigaction(SIGINT, &sa_old_int, NULL);
        sigaction(SIGTERM, &sa_old_term, NULL);
    }
    for (size_t i = 0; c.rt && i < c.n; i++) {
        mr_free(c.rt[i].job_path);
        mr_free(c.rt[i].result_path);
        mr_free(c.rt[i].log_path);
        mr_free(c.rt[i].error);
        mr_free(c.rt[i].metrics_json);
    }
    for (size_t i = 0; c.plans && i < c.n; i++) mr__plan_free(&c.plans[i]);
    mr_free(c.plans);
    mr_free(c.rt);
    mr_free(done);
    mr_dag_free(c.dag);
    return rc;
}
