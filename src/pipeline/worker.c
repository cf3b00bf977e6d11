/* The stage worker: `millrace stage run NAME --job FILE`. It takes the
 * stage lock (so two runners never compute one stage twice, and a leftover
 * command from a killed runner keeps the lock until it dies), re-checks the
 * cache, runs the op, publishes the outputs atomically, records the cache
 * entry and writes a result file for the runner. */
#define _GNU_SOURCE
#include "pipeline_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

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

/* Appends numeric leaves of j under prefix as metrics at step. */
static void flatten_metrics(json_t *j, const char *prefix, int64_t step, json_t *out)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            if (!prefix[0] && !strcmp(k, "step")) continue;
            char *name = prefix[0] ? mr_asprintf("%s.%s", prefix, k) : mr_strdup(k);
            if (name) flatten_metrics(v, name, step, out);
            mr_free(name);
        }
    } else if (json_is_number(j) && prefix[0]) {
        json_array_append_new(out, json_pack("{s:s,s:I,s:f}", "name", prefix, "step", (json_int_t)step, "value",
                                             json_number_value(j)));
    }
}

/* Metrics file: one JSON object, or JSON lines (one object per step, with
 * an optional "step" field; else the line index). */
static mr_status parse_metrics(const char *path, json_t *out, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, (size_t)256 << 20, &text, &len, err);
    if (rc != MR_OK) return rc;
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    if (j) {
        if (!json_is_object(j)) rc = MR_ERR(err, MR_E_PARSE, "%s: metrics file must hold a JSON object", path);
        else flatten_metrics(j, "", 0, out);
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
            if (!j || !json_is_object(j)) {
                rc = MR_ERR(err, MR_E_PARSE, "expected a JSON object per line: %s", j ? "not an object" : je.text);
                mr_error_at(err, path, lineno, j ? 1 : je.column);
            } else {
                json_t *st = json_object_get(j, "step");
                flatten_metrics(j, "", json_is_integer(st) ? (int64_t)json_integer_value(st) : idx, out);
                idx++;
            }
            json_decref(j);
        }
        line = nl ? nl + 1 : NULL;
    }
    mr_free(text);
    return rc;
}

static mr_status write_result(const char *path, json_t *res, mr_error *err)
{
    char *t = json_dumps(res, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (!t) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_fs_write_atomic(path, t, strlen(t), err);
    free(t);
    return rc;
}

/* Restores cached outputs into the workspace (under the stage lock). */
static mr_status checkout_outputs(mr_workspace *ws, json_t *outs_decl, json_t *ids, mr_error *err)
{
    size_t k;
    json_t *o;
    json_array_foreach(outs_decl, k, o)
    {
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *path = json_string_value(json_object_get(o, "path"));
        const char *id = json_string_value(json_object_get(ids, name));
        mr_artifact a;
        if (!id || mr_artifact_parse(id, &a) != MR_OK) return MR_ERR(err, MR_E_CORRUPT, "cache entry lacks output '%s'", name);
        const char *one[1] = {path};
        mr_artifact cur;
        if (mr_fs_exists(path) && mr_store_hash_paths(ws->store, ws->sc, one, 1, &cur, NULL, NULL) == MR_OK) {
            char cid[MR_ARTIFACT_ID_LEN];
            mr_artifact_id(&cur, cid);
            if (!strcmp(cid, id)) continue;
        }
        mr_status rc = mr_fs_rmtree(path, err);
        if (rc == MR_OK) rc = mr_store_checkout(ws->store, ws->sc, &a, path, err);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

/* Restoring from the cache re-hashes the stored objects first: an output
 * edited in place through its hard link has corrupted its object, and must
 * be recomputed rather than linked back. Corrupt objects are deleted. */
static int cached_outputs_sound(mr_workspace *ws, const char *outs_json, const char *stage)
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
            mr_store_check(ws->store, &a, 1, &e) != MR_OK) {
            fprintf(stderr, "millrace: warning: stage '%s': cached output '%s' is unusable (%s); recomputing\n", stage,
                    name, e.msg[0] ? e.msg : "bad cache entry");
            ok = 0;
        }
    }
    json_decref(o);
    return ok;
}

/* Publishes each output into the store (staged built-in outputs are then
 * checked out at their workspace path) and fills ids {name: artifact id}. */
static mr_status publish_outputs(mr_workspace *ws, mr_op_io *outs, json_t *outs_decl, size_t n_outs, int staged,
                                 json_t *metrics, json_t *ids, mr_error *err)
{
    mr_status rc = MR_OK;
    for (size_t k = 0; k < n_outs && rc == MR_OK; k++) {
        if (!mr_fs_exists(outs[k].path)) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "declared output '%s' was not created", outs[k].path);
            mr_error_hint(err, "the command must write every path listed in outs and metrics");
            break;
        }
        json_t *od = json_array_get(outs_decl, k);
        if (json_is_true(json_object_get(od, "metrics"))) rc = parse_metrics(outs[k].path, metrics, err);
        mr_artifact a;
        if (rc == MR_OK) rc = mr_store_publish(ws->store, ws->sc, outs[k].path, &a, err);
        if (rc == MR_OK && staged) {
            const char *dest = json_string_value(json_object_get(od, "path"));
            rc = mr_fs_rmtree(dest, err);
            if (rc == MR_OK) rc = mr_store_checkout(ws->store, ws->sc, &a, dest, err);
        }
        if (rc == MR_OK) {
            char id[MR_ARTIFACT_ID_LEN];
            mr_artifact_id(&a, id);
            json_object_set_new(ids, outs[k].name, json_string(id));
        }
    }
    return rc;
}
/* What ctx->engine points to in a worker: the metrics sink and the
 * workspace (for the in-stage cache and trial records). */
typedef struct worker_engine {
    json_t *metrics;
    mr_workspace *ws;
} worker_engine;

mr_status mr_op_metric(mr_op_ctx *ctx, const char *name, int64_t step, double value)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    json_t *metrics = we ? we->metrics : NULL;
    if (!metrics || !name || !name[0]) return MR_E_INVALID_ARG;
    if (!isfinite(value)) return MR_E_INVALID_ARG;
    json_t *m = json_pack("{s:s,s:I,s:f}", "name", name, "step", (json_int_t)step, "value", value);
    if (!m || json_array_append_new(metrics, m) != 0) return MR_E_NOMEM;
    return MR_OK;
}

mr_status mr_op_cache_get(mr_op_ctx *ctx, const char *key, char **result_json, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    *result_json = NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    return mr_runstore_cache_get(we->ws->rs, key, NULL, result_json, NULL, err);
}

mr_status mr_op_cache_put(mr_op_ctx *ctx, const char *kind, const char *key, const char *key_doc,
                          const char *result_json, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    char *stage = mr_asprintf("%s#%s", ctx->stage, kind);
    if (!stage) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* No outputs: gc never drops the entry for a missing object. */
    mr_status rc = mr_runstore_cache_put(we->ws->rs, key, stage, kind, key_doc, "{}", result_json, ctx->run_id, err);
    mr_free(stage);
    return rc;
}

mr_status mr_op_trial_record(mr_op_ctx *ctx, int trial, const char *key, const char *status, double value,
                             const char *record_json, mr_error *err)
{
    worker_engine *we = ctx ? ctx->engine : NULL;
    if (!we || !we->ws) return MR_ERR(err, MR_E_STATE, "no run store in this context");
    return mr_runstore_trial_add(we->ws->rs, ctx->run_id, ctx->stage, trial, key, status, value, record_json, err);
}

mr_status mr_stage_worker(const char *job_path, mr_error *err)
{
    mr_status rc = MR_OK;
    json_error_t je;
    json_t *job = json_load_file(job_path, 0, &je);
    json_t *res = json_object(), *metrics = json_array(), *ids = json_object();
    mr_workspace *ws = NULL;
    mr_value *def = NULL, *params = NULL;
    mr_op_io *ins = NULL, *outs = NULL;
    char *tmp_dir = NULL, *lock_path = NULL;
    char **staging = NULL;
    const char *result_path = NULL, *stage = "?";
    mr_flock lk = {-1};
    if (!job) {
        rc = MR_ERR(err, MR_E_PARSE, "%s:%d:%d: %s", job_path, je.line, je.column, je.text);
        goto out;
    }
    result_path = json_string_value(json_object_get(job, "result"));
    stage = json_string_value(json_object_get(job, "stage"));
    const char *op_name = json_string_value(json_object_get(job, "op"));
    const char *key = json_string_value(json_object_get(job, "key"));
    const char *root = json_string_value(json_object_get(job, "workspace"));
    json_t *outs_decl = json_object_get(job, "outputs"), *ins_decl = json_object_get(job, "inputs");
    if (!result_path || !stage || !op_name || !key || !root || !json_is_array(outs_decl) || !json_is_array(ins_decl)) {
        rc = MR_ERR(err, MR_E_PARSE, "%s: not a millrace job file", job_path);
        stage = stage ? stage : "?";
        goto out;
    }
    const mr_op *op = mr_op_find(op_name);
    if (!op) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "unknown op '%s'", op_name);
        goto out;
    }
    /* Die with the runner: a SIGKILLed runner must not leave commands behind. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) {
        rc = MR_ERR(err, MR_E_INTERRUPTED, "the runner exited before the stage started");
        goto out;
    }
    if (chdir(root) != 0) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot enter workspace", root);
        goto out;
    }
    rc = mr_workspace_open(root, 0, 1, &ws, err);
    if (rc != MR_OK) goto out;
    lock_path = mr_asprintf("%s/locks/stage-%s.lock", ws->dot, stage);
    if (!lock_path) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto out;
    }
    /* inherit=1: the command keeps the lock alive even if we are killed. */
    rc = mr_flock_acquire(&lk, lock_path, MR_LOCK_EXCLUSIVE, 1, 1, err);
    if (rc != MR_OK) goto out;

    int force = json_is_true(json_object_get(job, "force"));
    char *cached_outs = NULL, *cached_mets = NULL;
    json_t *jdef = json_object_get(job, "def");
    if (!force && !json_is_true(json_object_get(jdef, "always_changed")) &&
        mr_runstore_cache_get(ws->rs, key, &cached_outs, &cached_mets, NULL, NULL) == MR_OK &&
        cached_outputs_sound(ws, cached_outs, stage)) {
        /* Another runner computed it while we waited, or the workspace copy
         * needs restoring. */
        json_t *co = json_loads(cached_outs ? cached_outs : "{}", 0, NULL);
        json_t *cm = json_loads(cached_mets ? cached_mets : "[]", 0, NULL);
        mr_free(cached_outs);
        mr_free(cached_mets);
        rc = co ? checkout_outputs(ws, outs_decl, co, err) : MR_ERR(err, MR_E_CORRUPT, "corrupt cache entry for %s", key);
        if (rc == MR_OK) {
            json_object_set(res, "outputs", co);
            if (cm) json_object_set(res, "metrics", cm);
            json_object_set_new(res, "status", json_string("cached"));
        }
        json_decref(co);
        json_decref(cm);
        goto out;
    }
    mr_free(cached_outs); /* a miss, or an entry whose objects were corrupt */
    mr_free(cached_mets);

    /* Prepare the op context. */
    size_t n_ins = json_array_size(ins_decl), n_outs = json_array_size(outs_decl);
    ins = mr_calloc(n_ins ? n_ins : 1, sizeof(*ins));
    outs = mr_calloc(n_outs ? n_outs : 1, sizeof(*outs));
    char *defs = json_dumps(jdef, 0), *pars = json_dumps(json_object_get(job, "params"), 0);
    if (defs) rc = mr_yaml_parse(defs, strlen(defs), job_path, &def, err);
    if (rc == MR_OK && pars) rc = mr_yaml_parse(pars, strlen(pars), job_path, &params, err);
    free(defs);
    free(pars);
    if (rc != MR_OK) goto out;
    if (!ins || !outs || !def || !params) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < n_ins; k++) {
        ins[k].name = json_string_value(json_object_get(json_array_get(ins_decl, k), "name"));
        ins[k].path = json_string_value(json_object_get(json_array_get(ins_decl, k), "path"));
        ins[k].id = json_string_value(json_object_get(json_array_get(ins_decl, k), "id"));
    }
    for (size_t k = 0; k < n_outs; k++) {
        outs[k].name = json_string_value(json_object_get(json_array_get(outs_decl, k), "name"));
        outs[k].path = json_string_value(json_object_get(json_array_get(outs_decl, k), "path"));
    }
    rc = mr_fs_mkdtemp(mr_store_root(ws->store), "tmp/stage", &tmp_dir, err);
    if (rc != MR_OK) goto out;
    /* Outputs are removed before the op runs: a command that rewrites a
     * file in place must never write through a hard link into the store. */
    for (size_t k = 0; k < n_outs && rc == MR_OK; k++) {
        rc = mr_fs_rmtree(outs[k].path, err);
        const char *slash = strrchr(outs[k].path, '/');
        if (rc == MR_OK && slash) {
            char *parent = mr_strndup(outs[k].path, (size_t)(slash - outs[k].path));
            rc = parent ? mr_fs_mkdirs(parent, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
            mr_free(parent);
        }
    }
    if (rc != MR_OK) goto out;
    /* Built-in ops write into private staging directories; only complete,
     * published results appear under out/<stage>/. exec writes its declared
     * outs in the workspace, as in dvc.yaml. */
    int staged = strcmp(op->name, "exec") != 0;
    if (staged) {
        staging = mr_calloc(n_outs ? n_outs : 1, sizeof(*staging));
        if (!staging) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; k < n_outs && rc == MR_OK; k++) {
            staging[k] = mr_asprintf("%s/out-%zu", tmp_dir, k);
            rc = staging[k] ? mr_fs_mkdirs(staging[k], err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (rc == MR_OK) outs[k].path = staging[k];
        }
        if (rc != MR_OK) goto out;
    }
    worker_engine we = {metrics, ws};
    /* Only the package op records the commit in its output; others skip the git call. */
    char git_commit[64] = "";
    int git_dirty = 0;
    if (!strcmp(op->name, "package")) mr__git_info(ws->root, git_commit, sizeof(git_commit), &git_dirty);
    mr_op_ctx ctx = {
        .stage = stage,
        .workspace = ws->root,
        .def = def,
        .params = params,
        .smoke = json_is_true(json_object_get(job, "smoke")),
        .threads = (int)json_integer_value(json_object_get(job, "threads")),
        .mem_bytes = (uint64_t)json_integer_value(json_object_get(job, "mem_bytes")),
        .run_id = (int64_t)json_integer_value(json_object_get(job, "run_id")),
        .inputs = ins,
        .n_inputs = n_ins,
        .outputs = outs,
        .n_outputs = n_outs,
        .log_fd = 2,
        .tmp_dir = tmp_dir,
        .engine = &we,
        .stage_key = key,
        .git_commit = git_commit,
    };
    if (ctx.threads < 1) ctx.threads = 1;
    rc = op->run(&ctx, err);
    if (rc == MR_E_FAILED && staged) {
        /* The op ran to completion and judged its result a failure (a check
         * that did not pass): publish what it wrote, so the run records it
         * and a report can show it, but write no stage-cache entry, so the
         * failure is never served as a success. The op's error stands. */
        mr_error pe;
        mr_error_init(&pe);
        json_t *fids = json_object();
        if (fids && publish_outputs(ws, outs, outs_decl, n_outs, staged, metrics, fids, &pe) == MR_OK) {
            json_object_set(res, "outputs", fids);
            json_object_set(res, "metrics", metrics);
        } else {
            fprintf(stderr, "millrace: warning: stage '%s': the results of the failed stage were not published: %s\n", stage,
                    pe.msg);
        }
        json_decref(fids);
        goto out;
    }
    if (rc != MR_OK) goto out;
    rc = publish_outputs(ws, outs, outs_decl, n_outs, staged, metrics, ids, err);
    if (rc != MR_OK) goto out;
    {
        char *oj = json_dumps(ids, JSON_SORT_KEYS | JSON_COMPACT), *mj = json_dumps(metrics, JSON_COMPACT);
        const char *kd = json_string_value(json_object_get(job, "key_doc"));
        if (!oj || !mj) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else rc = mr_runstore_cache_put(ws->rs, key, stage, op->name, kd ? kd : "", oj, mj, ctx.run_id, err);
        free(oj);
        free(mj);
    }
    if (rc == MR_OK) {
        json_object_set(res, "outputs", ids);
        json_object_set(res, "metrics", metrics);
        json_object_set_new(res, "status", json_string("executed"));
    }
out:
    if (rc != MR_OK) {
        char msg[1024];
        mr_error_format(err, msg, sizeof(msg));
        json_object_set_new(res, "status", json_string("failed"));
        json_object_set_new(res, "error", json_string(msg));
        fprintf(stderr, "millrace: error: stage '%s': %s\n", stage, msg);
        if (err && err->hint[0]) fprintf(stderr, "hint: %s\n", err->hint);
    }
    if (tmp_dir) mr_fs_rmtree(tmp_dir, NULL);
    mr_workspace_close(ws); /* saves the stat cache entries of published outputs */
    int64_t rchar, wchar;
    read_io(&rchar, &wchar);
    json_object_set_new(res, "bytes_read", json_integer(rchar));
    json_object_set_new(res, "bytes_written", json_integer(wchar));
    if (result_path) {
        mr_error e2;
        mr_error_init(&e2);
        write_result(result_path, res, &e2);
    }
    mr_flock_release(&lk);
    mr_free(lock_path);
    mr_free(tmp_dir);
    for (size_t k = 0; staging && k < json_array_size(json_object_get(job, "outputs")); k++) mr_free(staging[k]);
    mr_free(staging);
    mr_free(ins);
    mr_free(outs);
    mr_value_free(def);
    mr_value_free(params);
    json_decref(ids);
    json_decref(metrics);
    json_decref(res);
    json_decref(job);
    return rc;
}
