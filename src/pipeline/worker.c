/* The stage worker: `millrace stage run NAME --job FILE`. It reads the job
 * (include/millrace/job.h), takes the stage lock (so two runners never
 * compute one stage twice, and a leftover command from a killed runner keeps
 * the lock until it dies), re-checks the cache, runs the op, publishes the
 * outputs atomically, records the cache entry and writes the result file.
 * It prints nothing itself: the op writes its log to stderr (the stage log
 * the runner opened), warnings go through core's log into the result, and
 * the error goes back in the result and to the caller.
 *
 * Isolation. Several runners may work on one workspace at once, with
 * different params. The guarantee: a stage's output is stored under its key
 * only if every input it read had, for the whole time the stage ran, the
 * content its key was computed from; an exec stage never sees another
 * runner's outputs.
 *  - A built-in op reads every input that is an artifact in the store from
 *    a private, read-only checkout of exactly that artifact (hard links of
 *    the immutable objects in the stage's scratch directory), never from the
 *    workspace, so nothing another runner does to the workspace can reach
 *    it. A user's file that no stage produced is read in place and checked
 *    again after the op.
 *  - An exec stage runs in the workspace. Its worker locks the stage's
 *    workspace paths for the whole stage (the plan lists them: outs
 *    exclusive, deps shared, plus every output path of any stage that
 *    overlaps one of them), all at once in sorted order, so two stages that
 *    touch one file exclude each other and no lock order can deadlock. Under
 *    the locks each dep is made to hold the content the key names: a dep
 *    another runner replaced is restored from the store (its lock taken
 *    exclusive for that). After the command every dep is checked again; one
 *    whose content changed fails the stage, and nothing is cached.
 *  - A built-in op's results are checked out into out/<stage>/ under its
 *    exclusive locks, so an exec stage reading them never sees another
 *    runner's version mid-replacement. */
#define _GNU_SOURCE
#include "millrace/dataset.h"
#include "pipeline_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

typedef struct worker {
    const char *job_path;
    mr_job job;
    mr_job_result res;
    const mr_op *op;
    mr_workspace *ws;
    mr_flock lk;
    mr_flock gc_lock;  /* shared: gc waits while this worker (or its command) lives */
    char *lock_path;
    char *tmp_dir;
    char **staging;    /* built-in ops: private output directories, one per output */
    mr_op_io *ins, *outs;
    char **private_in; /* built-in ops: inputs[k]'s private checkout, or NULL (read in place) */
    mr_flock *locks;   /* the job's path locks, while held */
    size_t n_held;
    int staged;        /* the op writes into staging directories */
    int task;          /* -1, or a task of a Slurm job array (mr_stage_worker_task) */
} worker;

static void on_term(int sig)
{
    (void)sig;
    /* Take the command and everything in our process group down with us. */
    signal(SIGTERM, SIG_DFL);
    kill(-getpgrp(), SIGKILL);
    _exit(143);
}

static void read_io(int64_t *rchar, int64_t *wchar)
{
    *rchar = *wchar = 0;
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return;
    char line[128];
    while (fgets(line, sizeof(line), f)) {
        long long v;
        if (sscanf(line, "rchar: %lld", &v) == 1) *rchar = v;
        if (sscanf(line, "wchar: %lld", &v) == 1) *wchar = v;
    }
    fclose(f);
}

/* Warnings of the stage (core's log at warning level) go into the result. */
static void collect_warning(void *ctx, mr_log_level lvl, const char *msg)
{
    (void)lvl;
    mr_job_result_add_warning(ctx, msg);
}

/* ---- metrics files (exec outs flagged metrics) --------------------------------- */

/* Appends numeric leaves of j under prefix as metrics at step. */
static void flatten_metrics(json_t *j, const char *prefix, int64_t step, mr_job_result *res)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            if (!prefix[0] && !strcmp(k, "step")) continue;
            char *name = prefix[0] ? mr_asprintf("%s.%s", prefix, k) : mr_strdup(k);
            if (name) flatten_metrics(v, name, step, res);
            mr_free(name);
        }
    } else if (json_is_number(j) && prefix[0]) {
        mr_job_result_add_metric(res, prefix, step, json_number_value(j));
    }
}

/* Metrics file: one JSON object, or JSON lines (one object per step, with
 * an optional "step" field; else the line index). */
static mr_status parse_metrics(const char *path, mr_job_result *res, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, (size_t)256 << 20, &text, &len, err);
    if (rc != MR_OK) return rc;
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = json_loadb(text, len, 0, &je);
    if (mr_alloc_failures_here() != oom0) { /* not the file's fault */
        json_decref(j);
        mr_free(text);
        return MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", path);
    }
    if (j) {
        if (!json_is_object(j)) rc = MR_ERR(err, MR_E_PARSE, "%s: metrics file must hold a JSON object", path);
        else flatten_metrics(j, "", 0, res);
        json_decref(j);
        mr_free(text);
        return rc;
    }
    long lineno = 0, idx = 0;
    for (char *line = text; rc == MR_OK && line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        lineno++;
        if (line[strspn(line, " \t\r")]) {
            j = json_loads(line, 0, &je);
            if (mr_alloc_failures_here() != oom0) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", path);
            } else if (!j || !json_is_object(j)) {
                rc = MR_ERR(err, MR_E_PARSE, "expected a JSON object per line: %s", j ? "not an object" : je.text);
                mr_error_at(err, path, lineno, j ? 1 : je.column);
            } else {
                json_t *st = json_object_get(j, "step");
                flatten_metrics(j, "", json_is_integer(st) ? (int64_t)json_integer_value(st) : idx, res);
                idx++;
            }
            json_decref(j);
        }
        line = nl ? nl + 1 : NULL;
    }
    mr_free(text);
    return rc;
}

/* ---- the op's engine hooks (include/millrace/op.h) --------------------------- */

/* What ctx->engine points to in a worker: the result (metrics sink) and
 * the workspace (for the in-stage cache and trial records). */
typedef struct worker_engine {
    mr_job_result *res;
    mr_workspace *ws;
} worker_engine;

mr_status mr_op_metric(mr_op_ctx *ctx, const char *name, int64_t step, double value)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    if (!we || !we->res || !name || !name[0]) return MR_E_INVALID_ARG;
    return mr_job_result_add_metric(we->res, name, step, value);
}

mr_status mr_op_cache_get(mr_op_ctx *ctx, const char *key, char **result_json, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    *result_json = NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    return mr__cache_get(we->ws, key, NULL, result_json, NULL, err);
}

mr_status mr_op_cache_put(mr_op_ctx *ctx, const char *kind, const char *key, const char *key_doc,
                          const char *result_json, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    char *stage = mr_asprintf("%s#%s", ctx->stage, kind);
    if (!stage) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* No outputs: gc never drops the entry for a missing object. */
    mr_status rc = mr__cache_put(we->ws, key, stage, kind, key_doc, "{}", result_json, ctx->run_id, err);
    if (rc == MR_OK && !we->ws->rs && mr_job_result_add_cache_entry(we->res, key) != MR_OK)
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_free(stage);
    return rc;
}

mr_status mr_op_previous_output(mr_op_ctx *ctx, const char *key, const char *output, char **path_out, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    *path_out = NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    char *outs = NULL;
    mr_status rc = mr__cache_get(we->ws, key, &outs, NULL, NULL, err);
    if (rc != MR_OK) return rc;
    json_t *o = json_loads(outs ? outs : "{}", 0, NULL);
    mr_free(outs);
    const char *id = json_string_value(json_object_get(o, output));
    mr_artifact a;
    if (!id || mr_artifact_parse(id, &a) != MR_OK || !mr_store_has(we->ws->store, &a)) {
        json_decref(o);
        return MR_ERR(err, MR_E_NOT_FOUND, "the result under key '%s' has no output '%s' in the store", key, output);
    }
    json_decref(o);
    /* re-hashed first: an object edited through a hard link is no result of that key */
    mr_error ce;
    mr_error_init(&ce);
    if (mr_store_check(we->ws->store, &a, 0, &ce) != MR_OK)
        return MR_ERR(err, MR_E_NOT_FOUND, "the previous output '%s' is unusable: %s", output, ce.msg);
    static unsigned seq;
    char *dir = mr_asprintf("%s/previous-%u", ctx->tmp_dir, seq++);
    char *dest = dir ? mr_path_join(dir, output) : NULL;
    rc = dest ? mr_fs_mkdirs(dir, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_store_checkout(we->ws->store, NULL, &a, dest, err);
    mr_free(dir);
    if (rc != MR_OK) {
        mr_free(dest);
        return rc;
    }
    *path_out = dest;
    return MR_OK;
}

mr_status mr_op_trial_record(mr_op_ctx *ctx, int trial, const char *key, const char *status, double value,
                             const char *record_json, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    if (!we->ws->rs) /* a cluster job: the runner records it from the result */
        return mr_job_result_add_trial(we->res, trial, key, status, value, record_json) == MR_OK
                   ? MR_OK
                   : MR_ERR(err, MR_E_NOMEM, "out of memory");
    return mr_runstore_trial_add(we->ws->rs, ctx->run_id, ctx->stage, trial, key, status, value, record_json, err);
}

/* ---- steps ------------------------------------------------------------------------ */

static mr_status load_job(worker *w, mr_error *err)
{
    mr_status rc = mr_job_read(w->job_path, &w->job, err);
    if (rc != MR_OK) return rc;
    w->op = mr_op_find(w->job.op);
    if (!w->op) return MR_ERR(err, MR_E_NOT_FOUND, "%s: unknown op '%s'", w->job_path, w->job.op);
    if (w->op->version != w->job.op_version)
        return MR_ERR(err, MR_E_STATE, "%s: the job was planned for op '%s' version %d, this millrace has version %d",
                      w->job_path, w->job.op, w->job.op_version, w->op->version);
    w->staged = !(w->op->flags & MR_OP_WORKSPACE_OUTPUTS);
    return MR_OK;
}

/* Dies with the runner, enters the workspace and takes the stage lock. */
static mr_status enter_workspace(worker *w, mr_error *err)
{
    /* Die with the runner: a SIGKILLed runner must not leave commands behind. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) return MR_ERR(err, MR_E_INTERRUPTED, "the runner exited before the stage started");
    if (chdir(w->job.workspace) != 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot enter workspace", w->job.workspace);
    mr_status rc = w->job.cache_dir ? mr__workspace_open_cluster(w->job.workspace, w->job.cache_dir, &w->ws, err)
                                    : mr_workspace_open(w->job.workspace, 0, 1, &w->ws, err);
    if (rc != MR_OK) return rc;
    /* A cluster job has no runner of its own holding gc off (it may be a
     * detached run's): it holds the gc lock itself. */
    if (w->job.cache_dir) rc = mr__workspace_gc_lock(w->ws, MR_LOCK_SHARED, &w->gc_lock, err);
    if (rc != MR_OK) return rc;
    /* The tasks of one array work side by side: only the stage's own job takes its lock. */
    if (w->task >= 0) return MR_OK;
    w->lock_path = mr_asprintf("%s/locks/stage-%s.lock", w->ws->dot, w->job.stage);
    if (!w->lock_path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* inherit=1: the command keeps the lock alive even if we are killed. */
    return mr_flock_acquire(&w->lk, w->lock_path, MR_LOCK_EXCLUSIVE, 1, 1, err);
}

/* ---- isolation ------------------------------------------------------------ */

static void release_path_locks(worker *w)
{
    for (size_t k = w->n_held; k-- > 0;) mr_flock_release(&w->locks[k]);
    w->n_held = 0;
}

/* Takes the job's path locks in order; force_exclusive (or NULL) names
 * paths to take exclusive although the plan says shared. */
static mr_status take_path_locks(worker *w, const int *force_exclusive, mr_error *err)
{
    if (!w->job.n_locks) return MR_OK;
    if (!w->locks && !(w->locks = mr_calloc(w->job.n_locks, sizeof(*w->locks))))
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < w->job.n_locks; k++) {
        const mr_job_lock *l = &w->job.locks[k];
        char hex[MR_HASH_HEX_LEN + 1];
        mr_hash_hex(mr_hash_bytes(l->path, strlen(l->path)), hex);
        char *path = mr_asprintf("%s/locks/path-%s.lock", w->ws->dot, hex);
        if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        /* an array task only reads: its outputs are the stage job's to write */
        int ex = w->task < 0 && (l->exclusive || (force_exclusive && force_exclusive[k]));
        /* inherit=1: the command keeps the locks alive even if we are killed */
        mr_status rc = mr_flock_acquire(&w->locks[k], path, ex ? MR_LOCK_EXCLUSIVE : MR_LOCK_SHARED, 1, 1, err);
        mr_free(path);
        if (rc != MR_OK) {
            release_path_locks(w);
            return rc;
        }
        w->n_held = k + 1;
    }
    return MR_OK;
}

/* The id a workspace path has now (through the stat cache: free when its
 * stat identity is unchanged), into id (MR_ARTIFACT_ID_LEN); "" if missing. */
static mr_status current_id(worker *w, const char *path, char *id, mr_error *err)
{
    id[0] = '\0';
    if (!strncmp(path, "s3://", 5)) return mr_source_s3_version(path, id, err); /* as the plan keyed it */
    if (!mr_fs_exists(path)) return MR_OK;
    const char *one[1] = {path};
    mr_artifact a;
    mr_status rc = mr_store_hash_paths(w->ws->store, w->ws->sc, one, 1, &a, NULL, err);
    if (rc == MR_OK) mr_artifact_id(&a, id);
    return rc;
}

/* Index of the lock on path, or n_locks. */
static size_t lock_of(const worker *w, const char *path)
{
    size_t k = 0;
    while (k < w->job.n_locks && strcmp(w->job.locks[k].path, path)) k++;
    return k;
}

/* Exec, holding the path locks: makes each dep hold the content its key was
 * computed from, restoring from the store what another runner replaced
 * (after taking that dep's lock exclusive). */
static mr_status deps_as_planned(worker *w, mr_error *err)
{
    int *stale = mr_calloc(w->job.n_locks ? w->job.n_locks : 1, sizeof(int));
    int any = 0;
    mr_status rc = stale ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (int pass = 0; rc == MR_OK && pass < 2; pass++) {
        any = 0;
        for (size_t k = 0; k < w->job.n_inputs && rc == MR_OK; k++) {
            const mr_job_io *in = &w->job.inputs[k];
            char id[MR_ARTIFACT_ID_LEN];
            if (!in->id || !in->id[0] || strpbrk(in->path, "*?[") || !strncmp(in->path, "s3://", 5)) continue;
            rc = current_id(w, in->path, id, err);
            if (rc != MR_OK || !strcmp(id, in->id)) continue;
            mr_artifact a;
            if (mr_artifact_parse(in->id, &a) != MR_OK || !mr_store_has(w->ws->store, &a)) {
                rc = MR_ERR(err, MR_E_STATE, "input '%s' changed after the run planned the stage (it no longer has the content the key names)",
                            in->path);
                mr_error_hint(err, "run again: the stage is planned with the new content");
                break;
            }
            size_t l = lock_of(w, in->path);
            if (pass == 0) { /* restore it holding its lock exclusive */
                if (l < w->job.n_locks) stale[l] = 1;
                any = 1;
                continue;
            }
            rc = mr_fs_rmtree(in->path, err);
            if (rc == MR_OK) rc = mr_store_checkout(w->ws->store, w->ws->sc, &a, in->path, err);
        }
        if (rc != MR_OK || !any || pass == 1) break;
        release_path_locks(w);
        rc = take_path_locks(w, stale, err);
    }
    mr_free(stale);
    return rc;
}

/* After the command: every dep still holds what the key names. */
static mr_status deps_unchanged(worker *w, mr_error *err)
{
    for (size_t k = 0; k < w->job.n_inputs; k++) {
        const mr_job_io *in = &w->job.inputs[k];
        char id[MR_ARTIFACT_ID_LEN];
        if (!in->id || !in->id[0] || strpbrk(in->path, "*?[") || (w->private_in && w->private_in[k])) continue;
        mr_status rc = current_id(w, in->path, id, err);
        if (rc != MR_OK) return rc;
        if (strcmp(id, in->id) != 0) {
            rc = MR_ERR(err, MR_E_FAILED, "input '%s' changed while the stage ran; its result was not cached", in->path);
            mr_error_hint(err, "another process wrote it; run again");
            return rc;
        }
    }
    return MR_OK;
}

/* Built-in ops: every input that is an artifact in the store is checked out
 * privately (read-only hard links) in the scratch directory, keeping its
 * file name (readers go by the extension); the op reads that copy. */
static mr_status checkout_private_inputs(worker *w, mr_error *err)
{
    w->private_in = mr_calloc(w->job.n_inputs ? w->job.n_inputs : 1, sizeof(*w->private_in));
    if (!w->private_in) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < w->job.n_inputs; k++) {
        const mr_job_io *in = &w->job.inputs[k];
        mr_artifact a;
        if (!in->id || mr_artifact_parse(in->id, &a) != MR_OK || !mr_store_has(w->ws->store, &a)) continue;
        const char *base = strrchr(in->path, '/');
        base = base ? base + 1 : in->path;
        char *dir = mr_asprintf("%s/in-%zu", w->tmp_dir, k);
        char *dest = dir ? mr_path_join(dir, base) : NULL;
        mr_status rc = dest ? mr_fs_mkdirs(dir, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) rc = mr_store_checkout(w->ws->store, NULL, &a, dest, err);
        mr_free(dir);
        if (rc != MR_OK) {
            mr_free(dest);
            return rc;
        }
        w->private_in[k] = dest;
        w->ins[k].path = dest;
    }
    return MR_OK;
}

/* A built-in op's path params that name an input literally ("source:
 * data/raw/users.csv") read its private checkout. */
static mr_status point_paths_at_private(worker *w, mr_error *err)
{
    for (const mr_param_def *pd = w->op->params; pd && pd->name; pd++) {
        if (!(pd->types & MR_PT_PATH)) continue;
        mr_value *v = mr_value_get(w->job.def, pd->name);
        size_t n = v && v->kind == MR_V_SEQ ? v->n : 1;
        for (size_t i = 0; v && i < n; i++) {
            mr_value *s = v->kind == MR_V_SEQ ? v->items[i] : v;
            if (s->kind != MR_V_STR || !s->str) continue;
            char *norm = mr_path_normalize(s->str, 0);
            for (size_t k = 0; norm && k < w->job.n_inputs; k++) {
                if (!w->private_in[k] || strcmp(w->job.inputs[k].name, norm) != 0) continue;
                char *np = mr_strdup(w->private_in[k]);
                if (!np) {
                    mr_free(norm);
                    return MR_ERR(err, MR_E_NOMEM, "out of memory");
                }
                mr_free(s->str);
                s->str = np;
                break;
            }
            mr_free(norm);
        }
    }
    return MR_OK;
}

/* Where the op reads its inputs: private checkouts (built-in ops) or the
 * workspace (exec, under its locks); then ${stages.X} resolved to those. */
static mr_status place_inputs(worker *w, mr_error *err)
{
    mr_status rc = MR_OK;
    if (w->staged) {
        rc = checkout_private_inputs(w, err);
        if (rc == MR_OK) rc = point_paths_at_private(w, err);
    }
    mr_job_io *view = mr_calloc(w->job.n_inputs ? w->job.n_inputs : 1, sizeof(*view));
    if (rc == MR_OK && !view) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; rc == MR_OK && k < w->job.n_inputs; k++) {
        view[k] = w->job.inputs[k];
        view[k].path = (char *)w->ins[k].path;
    }
    if (rc == MR_OK) rc = mr__resolve_refs(w->job.def, view, w->job.n_inputs, err);
    mr_free(view);
    return rc;
}

/* Restoring from the cache re-hashes the stored objects first: an output
 * edited in place through its hard link has corrupted its object, and must
 * be recomputed rather than linked back. Corrupt objects are deleted. */
/* Checks artifact a out at path in one step: into a sibling first, then
 * swapped in (mr_fs_swap_in), so the path always holds a whole result. */
static mr_status checkout_swap(worker *w, const mr_artifact *a, const char *path, mr_error *err)
{
    char *tmp = mr_asprintf("%s.mr-new-%ld", path, (long)getpid());
    if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_fs_rmtree(tmp, err); /* a leftover of a killed runner */
    if (rc == MR_OK) rc = mr_store_checkout(w->ws->store, w->ws->sc, a, tmp, err);
    if (rc == MR_OK) rc = mr_fs_swap_in(tmp, path, err);
    if (rc != MR_OK) mr_fs_rmtree(tmp, NULL);
    mr_free(tmp);
    return rc;
}

static int cached_outputs_sound(worker *w, const char *outs_json)
{
    json_t *o = json_loads(outs_json ? outs_json : "{}", 0, NULL);
    int ok = o != NULL;
    const char *name;
    json_t *v;
    json_object_foreach(o, name, v)
    {
        mr_artifact a;
        mr_error e;
        mr_error_init(&e);
        if (!json_is_string(v) || mr_artifact_parse(json_string_value(v), &a) != MR_OK ||
            mr_store_check(w->ws->store, &a, 1, &e) != MR_OK) {
            mr_log(MR_LOG_WARN, "stage '%s': cached output '%s' is unusable (%s); recomputing", w->job.stage, name,
                   e.msg[0] ? e.msg : "bad cache entry");
            ok = 0;
        }
    }
    json_decref(o);
    return ok;
}

/* Restores cached outputs into the workspace (under the stage lock). */
static mr_status checkout_outputs(worker *w, json_t *ids, mr_error *err)
{
    for (size_t k = 0; k < w->job.n_outputs; k++) {
        const mr_job_io *o = &w->job.outputs[k];
        const char *id = json_string_value(json_object_get(ids, o->name));
        mr_artifact a;
        if (!id || mr_artifact_parse(id, &a) != MR_OK)
            return MR_ERR(err, MR_E_CORRUPT, "cache entry lacks output '%s'", o->name);
        mr_status rc = mr_job_result_add_output(&w->res, o->name, id) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc != MR_OK) return rc;
        const char *one[1] = {o->path};
        mr_artifact cur;
        if (mr_fs_exists(o->path) && mr_store_hash_paths(w->ws->store, w->ws->sc, one, 1, &cur, NULL, NULL) == MR_OK) {
            char cid[MR_ARTIFACT_ID_LEN];
            mr_artifact_id(&cur, cid);
            if (!strcmp(cid, id)) continue;
        }
        rc = checkout_swap(w, &a, o->path, err);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

/* Another runner computed the stage while we waited, or the workspace copy
 * needs restoring: *served = 1 when the result comes from the cache. */
static mr_status serve_from_cache(worker *w, int *served, mr_error *err)
{
    *served = 0;
    const mr_value *ac = mr_value_get(w->job.def, "always_changed");
    if (w->job.force || (ac && ac->kind == MR_V_BOOL && ac->u.b)) return MR_OK;
    char *outs = NULL, *mets = NULL;
    if (mr__cache_get(w->ws, w->job.key, &outs, &mets, NULL, NULL) != MR_OK) {
        /* not here: the remote may have it (run --remote); a remote that fails is a warning, and the stage runs */
        if (!w->job.remote.url || !w->job.remote.pull) return MR_OK;
        int hit = 0;
        mr_error re;
        mr_error_init(&re);
        if (mr__remote_fetch(w->ws, &w->job.remote, w->job.stage, w->job.key, &hit, &re) != MR_OK) {
            char msg[700];
            mr_error_format(&re, msg, sizeof(msg));
            mr_log(MR_LOG_WARN, "stage '%s': the remote %s could not serve it (%s); computing", w->job.stage,
                   w->job.remote.url, msg);
            return MR_OK;
        }
        if (!hit || mr__cache_get(w->ws, w->job.key, &outs, &mets, NULL, NULL) != MR_OK) return MR_OK;
        if (!w->ws->rs && mr_job_result_add_cache_entry(&w->res, w->job.key) != MR_OK)
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        dprintf(STDERR_FILENO, "stage '%s': its result came from the remote %s\n", w->job.stage, w->job.remote.url);
    }
    mr_status rc = MR_OK;
    if (cached_outputs_sound(w, outs)) {
        json_t *co = NULL, *cm = NULL;
        mr_error pe;
        mr_error_init(&pe);
        rc = mr_json_parse(outs ? outs : "{}", outs ? strlen(outs) : 2, 0, &co, "a stage cache entry", &pe);
        if (rc == MR_OK)
            rc = mr_json_parse(mets ? mets : "[]", mets ? strlen(mets) : 2, 0, &cm, "a stage cache entry", &pe);
        if (rc == MR_E_NOMEM) rc = MR_ERR(err, MR_E_NOMEM, "%s", pe.msg);
        else if (rc != MR_OK) rc = MR_ERR(err, MR_E_CORRUPT, "corrupt cache entry for %s: %s", w->job.key, pe.msg);
        else
            rc = checkout_outputs(w, co, err);
        size_t k;
        json_t *m;
        json_array_foreach(cm, k, m)
        {
            const char *name = json_string_value(json_object_get(m, "name"));
            json_t *v = json_object_get(m, "value");
            if (rc == MR_OK && name && json_is_number(v))
                mr_job_result_add_metric(&w->res, name, (int64_t)json_integer_value(json_object_get(m, "step")),
                                         json_number_value(v));
        }
        json_decref(co);
        json_decref(cm);
        if (rc == MR_OK) {
            w->res.status = MR_JOB_CACHED;
            *served = 1;
        }
    }
    mr_free(outs); /* a miss, or an entry whose objects were corrupt */
    mr_free(mets);
    return rc;
}

/* The scratch directory, the op's inputs and outputs, and for built-in ops
 * private staging directories: only complete, published results appear
 * under out/<stage>/. Ops with workspace outputs write their declared outs
 * in the workspace, as in dvc.yaml. */
static mr_status prepare(worker *w, mr_error *err)
{
    size_t n_ins = w->job.n_inputs, n_outs = w->job.n_outputs;
    w->ins = mr_calloc(n_ins ? n_ins : 1, sizeof(*w->ins));
    w->outs = mr_calloc(n_outs ? n_outs : 1, sizeof(*w->outs));
    w->staging = mr_calloc(n_outs ? n_outs : 1, sizeof(*w->staging));
    if (!w->ins || !w->outs || !w->staging) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n_ins; k++) {
        w->ins[k].name = w->job.inputs[k].name;
        w->ins[k].path = w->job.inputs[k].path;
        w->ins[k].id = w->job.inputs[k].id;
    }
    for (size_t k = 0; k < n_outs; k++) {
        w->outs[k].name = w->job.outputs[k].name;
        w->outs[k].path = w->job.outputs[k].path;
    }
    mr_status rc = mr_fs_mkdtemp(mr_store_root(w->ws->store), "tmp/stage", &w->tmp_dir, err);
    /* A command's outputs are removed before it runs: a command that
     * rewrites a file in place must never write through a hard link into the
     * store. A built-in op writes into staging, so its previous outputs stay
     * where they are until the new ones replace them in one step (a reader
     * of an online store, a server, never finds the path empty, and a stage
     * killed half-way leaves the last good result in place). */
    for (size_t k = 0; k < n_outs && rc == MR_OK; k++) {
        if (!w->staged) rc = mr_fs_rmtree(w->outs[k].path, err);
        const char *slash = strrchr(w->outs[k].path, '/');
        if (rc == MR_OK && slash) {
            char *parent = mr_strndup(w->outs[k].path, (size_t)(slash - w->outs[k].path));
            rc = parent ? mr_fs_mkdirs(parent, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
            mr_free(parent);
        }
    }
    for (size_t k = 0; w->staged && k < n_outs && rc == MR_OK; k++) {
        w->staging[k] = mr_asprintf("%s/out-%zu", w->tmp_dir, k);
        rc = w->staging[k] ? mr_fs_mkdirs(w->staging[k], err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) w->outs[k].path = w->staging[k];
    }
    return rc;
}

/* Publishes each output into the store (staged outputs are then checked
 * out at their workspace path) and records its id in the result. */
static mr_status publish_outputs(worker *w, mr_error *err)
{
    mr_status rc = MR_OK;
    for (size_t k = 0; k < w->job.n_outputs && rc == MR_OK; k++) {
        const mr_job_io *od = &w->job.outputs[k];
        if (!mr_fs_exists(w->outs[k].path)) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "declared output '%s' was not created", w->outs[k].path);
            mr_error_hint(err, "the command must write every path listed in outs and metrics");
            break;
        }
        if (od->metrics) rc = parse_metrics(w->outs[k].path, &w->res, err);
        mr_artifact a;
        if (rc == MR_OK) rc = mr_store_publish(w->ws->store, w->ws->sc, w->outs[k].path, &a, err);
        if (rc == MR_OK && w->staged) rc = checkout_swap(w, &a, od->path, err);
        if (rc == MR_OK) {
            char id[MR_ARTIFACT_ID_LEN];
            mr_artifact_id(&a, id);
            if (mr_job_result_add_output(&w->res, w->outs[k].name, id) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
    }
    return rc;
}

/* The stage cache entry: key -> outputs and metrics (JSON, runs.db). */
static mr_status cache_result(worker *w, mr_error *err)
{
    json_t *ids = json_object(), *mets = json_array();
    for (size_t k = 0; ids && k < w->res.n_outputs; k++)
        json_object_set_new(ids, w->res.outputs[k].name, json_string(w->res.outputs[k].id));
    for (size_t k = 0; mets && k < w->res.n_metrics; k++)
        json_array_append_new(mets, json_pack("{s:s,s:I,s:f}", "name", w->res.metrics[k].name, "step",
                                              (json_int_t)w->res.metrics[k].step, "value", w->res.metrics[k].value));
    char *oj = ids ? json_dumps(ids, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    char *mj = mets ? json_dumps(mets, JSON_COMPACT) : NULL;
    mr_status rc = oj && mj ? mr__cache_put(w->ws, w->job.key, w->job.stage, w->op->name, w->job.key_doc, oj, mj,
                                            w->job.run_id, err)
                            : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK && !w->ws->rs && mr_job_result_add_cache_entry(&w->res, w->job.key) != MR_OK)
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    free(oj);
    free(mj);
    json_decref(ids);
    json_decref(mets);
    return rc;
}

static mr_status run_op(worker *w, mr_error *err)
{
    worker_engine we = {&w->res, w->ws};
    /* The commit the key was computed with (ops with MR_OP_GIT_COMMIT). */
    const char *git_commit = w->job.git_commit ? w->job.git_commit : "";
    mr_op_ctx ctx = {
        .stage = w->job.stage,
        .workspace = w->ws->root,
        .def = w->job.def,
        .params = w->job.params,
        .smoke = w->job.smoke,
        .threads = w->job.threads > 0 ? w->job.threads : 1,
        .mem_bytes = w->job.mem_bytes,
        .run_id = w->job.run_id,
        .inputs = w->ins,
        .n_inputs = w->job.n_inputs,
        .outputs = w->outs,
        .n_outputs = w->job.n_outputs,
        .log_fd = 2,
        .tmp_dir = w->tmp_dir,
        .engine = &we,
        .stage_key = w->job.key,
        .git_commit = git_commit,
        .is_task = w->task >= 0,
        .task = w->task >= 0 ? w->task : 0,
    };
    mr_status rc = w->op->run(&ctx, err);
    /* An error about a value of the definition points into millrace.yaml. */
    if (rc != MR_OK && err && err->line > 0 && !err->file[0]) mr_error_at(err, w->job.spec_path, err->line, err->col);
    /* Nothing is published from inputs that changed while the op ran. */
    if (rc == MR_OK || rc == MR_E_FAILED) {
        mr_error de;
        mr_error_init(&de);
        if (deps_unchanged(w, &de) != MR_OK) {
            if (err) mr_error_clear(err);
            if (err) *err = de;
            return de.code;
        }
    }
    if (rc == MR_E_FAILED && w->staged) {
        /* The op ran to completion and judged its result a failure (a check
         * that did not pass): publish what it wrote, so the run records it
         * and a report can show it, but write no stage-cache entry, so the
         * failure is never served as a success. The op's error stands. */
        mr_error pe;
        mr_error_init(&pe);
        if (publish_outputs(w, &pe) != MR_OK)
            mr_log(MR_LOG_WARN, "stage '%s': the results of the failed stage were not published: %s", w->job.stage, pe.msg);
        return rc;
    }
    if (rc == MR_OK && w->task >= 0) { /* an array task: its pieces are cached, the stage job publishes */
        w->res.status = MR_JOB_EXECUTED;
        return MR_OK;
    }
    if (rc == MR_OK) rc = publish_outputs(w, err);
    if (rc == MR_OK) rc = cache_result(w, err);
    if (rc == MR_OK) w->res.status = MR_JOB_EXECUTED;
    if (rc == MR_OK && w->job.remote.url && w->job.remote.push) {
        /* shared for the next machine; a remote that fails is a warning: the result stands here */
        char *outs = NULL, *mets = NULL;
        mr_error re;
        mr_error_init(&re);
        mr_status pr = mr__cache_get(w->ws, w->job.key, &outs, &mets, NULL, &re);
        if (pr == MR_OK)
            pr = mr__remote_store(w->ws, &w->job.remote, w->job.stage, w->op->name, w->op->version, w->job.key, outs,
                                  mets, w->job.key_doc, &re);
        if (pr != MR_OK) {
            char msg[700];
            mr_error_format(&re, msg, sizeof(msg));
            mr_log(MR_LOG_WARN, "stage '%s': not pushed to the remote %s: %s", w->job.stage, w->job.remote.url, msg);
        }
        mr_free(outs);
        mr_free(mets);
    }
    return rc;
}

static void worker_free(worker *w)
{
    if (w->tmp_dir) mr_fs_rmtree(w->tmp_dir, NULL);
    mr_workspace_close(w->ws); /* saves the stat cache entries of published outputs */
    release_path_locks(w);
    mr_free(w->locks);
    for (size_t k = 0; w->private_in && k < w->job.n_inputs; k++) mr_free(w->private_in[k]);
    mr_free(w->private_in);
    mr_flock_release(&w->lk);
    mr_flock_release(&w->gc_lock);
    mr_free(w->lock_path);
    mr_free(w->tmp_dir);
    for (size_t k = 0; w->staging && k < w->job.n_outputs; k++) mr_free(w->staging[k]);
    mr_free(w->staging);
    mr_free(w->ins);
    mr_free(w->outs);
    mr_job_deinit(&w->job);
    mr_job_result_deinit(&w->res);
}

static mr_status work(const char *job_path, int task, mr_error *err)
{
    worker w;
    memset(&w, 0, sizeof(w));
    w.job_path = job_path;
    w.lk.fd = -1;
    w.gc_lock.fd = -1;
    w.task = task;
    mr_job_init(&w.job);
    mr_job_result_init(&w.res);
    mr_log_set_sink(MR_LOG_WARN, collect_warning, &w.res);
    int served = 0;
    mr_status rc = load_job(&w, err);
    if (rc == MR_OK && task >= 0 && !w.op->fanout)
        rc = MR_ERR(err, MR_E_INVALID_ARG, "stage '%s': op '%s' does not split into tasks", w.job.stage, w.op->name);
    if (rc == MR_OK) rc = enter_workspace(&w, err);
    if (rc == MR_OK) rc = take_path_locks(&w, NULL, err);
    if (rc == MR_OK && task >= 0) { /* the stage is done already: nothing for a task to add */
        char *outs = NULL;
        if (mr__cache_get(w.ws, w.job.key, &outs, NULL, NULL, NULL) == MR_OK) {
            served = 1;
            w.res.status = MR_JOB_EXECUTED;
        }
        mr_free(outs);
    } else if (rc == MR_OK) {
        rc = serve_from_cache(&w, &served, err);
    }
    if (rc == MR_OK && !served && !w.staged) rc = deps_as_planned(&w, err);
    if (rc == MR_OK && !served) rc = prepare(&w, err);
    if (rc == MR_OK && !served) rc = place_inputs(&w, err);
    if (rc == MR_OK && !served) rc = run_op(&w, err);
    if (rc != MR_OK) {
        w.res.status = MR_JOB_FAILED;
        if (err) w.res.error = *err;
        else MR_ERR(&w.res.error, rc, "%s", mr_status_str(rc));
    }
    mr_log_set_sink(MR_LOG_WARN, NULL, NULL);
    if (w.tmp_dir) {
        mr_fs_rmtree(w.tmp_dir, NULL);
        mr_free(w.tmp_dir);
        w.tmp_dir = NULL;
    }
    mr_workspace_close(w.ws); /* saves the stat cache entries of published outputs */
    w.ws = NULL;
    read_io(&w.res.bytes_read, &w.res.bytes_written);
    {
        struct rusage self, kids;
        long kb = getrusage(RUSAGE_SELF, &self) == 0 ? self.ru_maxrss : 0;
        if (getrusage(RUSAGE_CHILDREN, &kids) == 0 && kids.ru_maxrss > kb) kb = kids.ru_maxrss;
        w.res.max_rss_kb = kb;
    }
    char *task_result = NULL;
    if (task >= 0 && w.job.result_path) { /* STAGE.result.json -> STAGE.task-K.result.json */
        size_t n = strlen(w.job.result_path), sfx = strlen(".result.json");
        if (n > sfx && !strcmp(w.job.result_path + n - sfx, ".result.json"))
            task_result = mr_asprintf("%.*s.task-%d.result.json", (int)(n - sfx), w.job.result_path, task);
    }
    const char *result_path = task >= 0 ? task_result : w.job.result_path;
    if (result_path) {
        mr_error e2;
        mr_error_init(&e2);
        if (mr_job_result_write(&w.res, result_path, &e2) != MR_OK && rc == MR_OK) {
            *err = e2;
            rc = e2.code;
        }
    }
    mr_free(task_result);
    worker_free(&w);
    return rc;
}

mr_status mr_stage_worker(const char *job_path, mr_error *err) { return work(job_path, -1, err); }

mr_status mr_stage_worker_task(const char *job_path, int task, mr_error *err) { return work(job_path, task, err); }
