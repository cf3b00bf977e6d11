/* The train op: fits a gbdt or linear model on a training dataset (file or
 * stage output), optionally early-stopping on a validation set, and
 * publishes the model file. Per-round validation metrics are recorded as a
 * curve (valid.<metric> by round), and with a validation set the fast-tier
 * core metrics (fast.auc, fast.logloss, fast.rmse) the evaluate op's fast
 * tier computes, on a stratified subsample of valid_sample rows. */
#include "millrace/io.h"
#include "millrace/model.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>

#include <jansson.h>

static const mr_param_def train_params[] = {
    {"train", MR_PT_STR | MR_PT_PATH, 1, "training data: ${stages.X[.OUT]} or a .csv/.parquet/.jsonl file"},
    {"valid", MR_PT_STR | MR_PT_PATH, 0, "validation data: metrics per round and early stopping"},
    {"label", MR_PT_STR, 1, "the column to predict"},
    {"model", MR_PT_STR, 0, "gbdt (default) or linear"},
    {"params", MR_PT_MAP, 0, "training parameters, LightGBM names and aliases (num_iterations, learning_rate, ...)"},
    {"features", MR_PT_STRSEQ, 0, "feature columns (default: all but label and exclude)"},
    {"exclude", MR_PT_STRSEQ, 0, "columns never used as features (ids, timestamps)"},
    {"categorical", MR_PT_STRSEQ, 0, "integer columns split as categories (gbdt)"},
    {"valid_sample", MR_PT_INT, 0, "validation rows kept: a stratified subsample by label (default 0 = all)"},
    {"distributed", MR_PT_MAP, 0, "{ranks: N, timeout: S}: one gbdt trained across N processes (mpirun, or srun in a Slurm job)"},
    {NULL, 0, 0, NULL},
};

typedef struct train_run {
    mr_op_ctx *ctx;
    const mr_train_opts *o; /* rounds_total is known before the first round */
} train_run;

static int on_round(void *vctx, int it, int n, const char *const *names, const double *train, const double *valid,
                    double elapsed)
{
    train_run *r = vctx;
    char line[512];
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        char name[128];
        if (!isnan(valid[k])) {
            /* fast-tier metrics keep their own prefix */
            snprintf(name, sizeof(name), strncmp(names[k], "fast.", 5) ? "valid.%s" : "%s", names[k]);
            mr_op_metric(r->ctx, name, it, valid[k]);
            int w = snprintf(line + off, sizeof(line) - off, " %s=%.6g", name, valid[k]);
            if (w > 0 && (size_t)w < sizeof(line) - off) off += (size_t)w;
        }
        if (!isnan(train[k])) {
            snprintf(name, sizeof(name), "train.%s", names[k]);
            mr_op_metric(r->ctx, name, it, train[k]);
        }
    }
    line[off] = '\0';
    int total = r->o->rounds_total;
    if (it == 0 || (it + 1) % 10 == 0 || it + 1 == total)
        dprintf(r->ctx->log_fd, "round %d/%d%s (%.1fs, %.1f rounds/s)\n", it + 1, total, line, elapsed,
                elapsed > 0 ? (it + 1) / elapsed : 0.0);
    return 0;
}

/* Values of a string-list key, borrowed from the def (caller frees the array). */
static const char **strings_of(const mr_value *def, const char *key, size_t *n)
{
    const char **arr = NULL;
    if (mr_value_strings(def, key, &arr, n) != MR_OK) *n = 0;
    return arr;
}

/* The definition's settings that need no data: the model kind, every
 * training parameter (LightGBM names, typed, in range, combinations) and
 * valid_sample. What validate checks at load is what run uses. */
static mr_status train_settings(const mr_value *def, mr_train_opts *o, mr_error *err)
{
    const mr_value *vmodel = mr_value_get(def, "model"), *vparams = mr_value_get(def, "params");
    o->kind = vmodel && vmodel->kind == MR_V_STR ? vmodel->str : "gbdt";
    if (strcmp(o->kind, "gbdt") && strcmp(o->kind, "linear")) {
        mr_status rc = MR_ERR(err, MR_E_SCHEMA, "unknown model '%s' (expected gbdt or linear)", o->kind);
        mr_error_at(err, NULL, vmodel->line, vmodel->col);
        mr_error_key(err, "model");
        return rc;
    }
    o->params = vparams;
    mr_status rc = mr_model_check_params(o->kind, vparams, err);
    if (rc != MR_OK) {
        if (vparams) mr_error_at(err, NULL, vparams->line, vparams->col); /* when no value was blamed */
        return rc;
    }
    const mr_value *vd = mr_value_get(def, "distributed");
    for (size_t k = 0; vd && vd->kind == MR_V_MAP && k < vd->n; k++) {
        const char *key = vd->keys[k];
        const mr_value *v = vd->items[k];
        int ok = !strcmp(key, "ranks") ? v->kind == MR_V_INT && v->u.i >= 1 && v->u.i <= 65536
               : !strcmp(key, "timeout") ? (v->kind == MR_V_INT && v->u.i > 0) || (v->kind == MR_V_FLOAT && v->u.f > 0)
                                         : -1;
        if (ok == 1) continue;
        rc = ok < 0 ? MR_ERR(err, MR_E_SCHEMA, "distributed: unknown key '%s' (expected ranks, timeout)", key)
                    : MR_ERR(err, MR_E_SCHEMA, "distributed.%s must be %s", key,
                             !strcmp(key, "ranks") ? "an integer 1..65536" : "seconds > 0");
        mr_error_at(err, NULL, ok < 0 ? vd->key_lines[k] : v->line, ok < 0 ? vd->key_cols[k] : v->col);
        mr_error_key(err, "distributed");
        return rc;
    }
    if (vd && vd->kind == MR_V_MAP && mr_value_get(vd, "ranks") && strcmp(o->kind, "gbdt")) {
        rc = MR_ERR(err, MR_E_SCHEMA, "distributed training is for gbdt models, not '%s'", o->kind);
        mr_error_at(err, NULL, vd->line, vd->col);
        mr_error_key(err, "distributed");
        return rc;
    }
    const mr_value *vs = mr_value_get(def, "valid_sample");
    if (vs && vs->kind == MR_V_INT) {
        if (vs->u.i < 0) {
            rc = MR_ERR(err, MR_E_SCHEMA, "valid_sample must be >= 0, got %lld", (long long)vs->u.i);
            mr_error_at(err, NULL, vs->line, vs->col);
            mr_error_key(err, "valid_sample");
            return rc;
        }
        o->valid_sample = (size_t)vs->u.i;
    }
    return MR_OK;
}

static mr_status validate_train(const mr_op_validate_ctx *vc, mr_error *err)
{
    mr_train_opts o;
    mr_train_opts_init(&o);
    /* Params that come from another stage's outputs are checked when it ran. */
    const mr_value *params = mr_value_get(vc->def, "params");
    mr_value *known = NULL, *def = NULL;
    int deferred = 0;
    for (size_t k = 0; params && params->kind == MR_V_MAP && k < params->n; k++) deferred |= mr_op_value_deferred(params->items[k]);
    if (deferred) {
        def = mr_value_clone(vc->def);
        known = def ? mr_value_new(MR_V_MAP) : NULL;
        for (size_t k = 0; known && k < params->n; k++) {
            if (mr_op_value_deferred(params->items[k])) continue;
            if (mr_value_map_set(known, params->keys[k], mr_value_clone(params->items[k])) != MR_OK) {
                mr_value_free(known);
                known = NULL;
                break;
            }
            known->key_lines[known->n - 1] = params->key_lines[k];
            known->key_cols[known->n - 1] = params->key_cols[k];
        }
        if (!known || mr_value_map_set(def, "params", known) != MR_OK) {
            mr_value_free(def);
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
    }
    mr_status rc = train_settings(def ? def : vc->def, &o, err);
    mr_value_free(def);
    return rc;
}

/* A param's value as millrace train -p takes it. */
static void param_text(mr_buf *b, const mr_value *v)
{
    if (v->kind == MR_V_SEQ) {
        for (size_t k = 0; k < v->n; k++) {
            if (k) mr_buf_append(b, ",", 1);
            param_text(b, v->items[k]);
        }
    } else if (v->kind == MR_V_INT) {
        mr_buf_printf(b, "%lld", (long long)v->u.i);
    } else if (v->kind == MR_V_FLOAT) {
        mr_buf_printf(b, "%.17g", v->u.f);
    } else if (v->kind == MR_V_BOOL) {
        mr_buf_printf(b, "%s", v->u.b ? "true" : "false");
    } else if (v->str) {
        mr_buf_printf(b, "%s", v->str);
    }
}

static void push_list(char ***av, size_t *n, const char *flag, const char *const *items, size_t count, mr_buf *keep)
{
    if (!count) return;
    mr_buf b;
    mr_buf_init(&b);
    for (size_t k = 0; k < count; k++) mr_buf_printf(&b, "%s%s", k ? "," : "", items[k]);
    (*av)[(*n)++] = (char *)flag;
    (*av)[(*n)++] = b.data;
    mr_buf_append(keep, &b.data, sizeof(char *)); /* freed by the caller */
}

/* Trains across ranks: millrace train --ranks N (this executable) writes
 * the model; its summary's curve becomes the stage's metrics. */
static mr_status train_ranks(mr_op_ctx *ctx, mr_train_opts *o, const char *train_path, const char *valid_path,
                             int ranks, double timeout, mr_model **model, mr_error *err)
{
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el <= 0) return MR_ERR_SYS(err, MR_E_IO, errno, "cannot find the millrace executable");
    exe[el] = '\0';
    const mr_value *params = o->params;
    size_t cap = 32 + 2 * (params && params->kind == MR_V_MAP ? params->n : 0);
    char **av = mr_calloc(cap, sizeof(char *));
    mr_buf keep, pbuf;
    mr_buf_init(&keep);
    mr_buf_init(&pbuf);
    char *model_path = mr_path_join(ctx->outputs[0].path, "ranks.model.bin");
    char *json_path = mr_path_join(ctx->outputs[0].path, "ranks.summary.json");
    char nr[16], nt[32], nj[16], nvs[32];
    snprintf(nr, sizeof(nr), "%d", ranks);
    snprintf(nt, sizeof(nt), "%.17g", timeout);
    snprintf(nj, sizeof(nj), "%d", ctx->threads > 0 ? ctx->threads : 1);
    snprintf(nvs, sizeof(nvs), "%zu", o->valid_sample);
    if (!av || !model_path || !json_path) {
        mr_free(av);
        mr_free(model_path);
        mr_free(json_path);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    size_t n = 0;
    av[n++] = exe;
    av[n++] = "train";
    av[n++] = (char *)train_path;
    av[n++] = "--label";
    av[n++] = (char *)o->label;
    if (valid_path) {
        av[n++] = "--valid";
        av[n++] = (char *)valid_path;
        av[n++] = "--valid-sample";
        av[n++] = nvs;
    }
    av[n++] = "--ranks";
    av[n++] = nr;
    if (timeout > 0) {
        av[n++] = "--rank-timeout";
        av[n++] = nt;
    }
    av[n++] = "-j";
    av[n++] = nj;
    av[n++] = "-o";
    av[n++] = model_path;
    av[n++] = "--json";
    push_list(&av, &n, "--features", o->features, o->n_features, &keep);
    push_list(&av, &n, "--exclude", o->exclude, o->n_exclude, &keep);
    push_list(&av, &n, "--categorical", o->categorical, o->n_categorical, &keep);
    /* -p KEY=VALUE, one buffer holding them all (offsets: it may move) */
    size_t n_params = params && params->kind == MR_V_MAP ? params->n : 0, n_p = 0;
    size_t *offs = mr_calloc(n_params ? n_params : 1, sizeof(size_t));
    if (!offs) {
        mr_free(av);
        mr_free(model_path);
        mr_free(json_path);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < n_params; k++) {
        offs[n_p++] = pbuf.len;
        mr_buf_printf(&pbuf, "%s=", params->keys[k]);
        param_text(&pbuf, params->items[k]);
        mr_buf_append(&pbuf, "", 1);
    }
    mr_status rc = pbuf.failed;
    for (size_t k = 0; rc == MR_OK && k < n_p; k++) {
        av[n++] = "-p";
        av[n++] = pbuf.data + offs[k];
    }
    av[n] = NULL;
    int out_fd = -1;
    if (rc == MR_OK && (out_fd = open(json_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", json_path);
    mr_proc p;
    mr_proc_opts po;
    mr_proc_opts_init(&po);
    po.stdout_fd = out_fd;
    po.stderr_fd = ctx->log_fd;
    po.parent_death_sig = SIGTERM;
    po.stdin_null = 1;
    dprintf(ctx->log_fd, "training across %d ranks\n", ranks);
    if (rc == MR_OK) rc = mr_proc_spawn_exec(&p, &po, exe, av, err);
    if (out_fd >= 0) close(out_fd);
    if (rc == MR_OK) {
        mr_proc_wait(&p, 1);
        if (!mr_proc_ok(&p)) {
            char why[64];
            mr_proc_describe(&p, why, sizeof(why));
            rc = MR_ERR(err, MR_E_FAILED, "training across %d ranks %s (the stage log has each rank's error)", ranks, why);
        }
    }
    json_t *j = NULL;
    if (rc == MR_OK) rc = mr_model_load(model_path, model, err);
    if (rc == MR_OK && !(j = json_load_file(json_path, 0, NULL)))
        rc = MR_ERR(err, MR_E_PARSE, "%s: not the JSON summary millrace train writes", json_path);
    if (rc == MR_OK) {
        o->train_rows = (size_t)json_integer_value(json_object_get(j, "rows"));
        o->valid_rows_used = (size_t)json_integer_value(json_object_get(j, "valid_rows"));
        o->fast_tier_seconds = json_number_value(json_object_get(j, "fast_tier_seconds"));
        o->streamed = 1;
        size_t k;
        json_t *pt;
        json_array_foreach(json_object_get(j, "curve"), k, pt)
        {
            const char *m = json_string_value(json_object_get(pt, "metric"));
            const json_t *tv = json_object_get(pt, "train");
            if (!m) continue;
            char name[128];
            if (tv) /* as on_round names them */
                snprintf(name, sizeof(name), "train.%s", m);
            else
                snprintf(name, sizeof(name), strncmp(m, "fast.", 5) ? "valid.%s" : "%s", m);
            mr_op_metric(ctx, name, (int)json_integer_value(json_object_get(pt, "iteration")),
                         json_number_value(tv ? tv : json_object_get(pt, "valid")));
        }
    }
    json_decref(j);
    unlink(model_path);
    unlink(json_path);
    for (size_t k = 0; k < keep.len / sizeof(char *); k++) mr_free(((char **)keep.data)[k]);
    mr_buf_free(&keep);
    mr_buf_free(&pbuf);
    mr_free(offs);
    mr_free(av);
    mr_free(model_path);
    mr_free(json_path);
    return rc;
}

static mr_status run_train(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *def = ctx->def;
    const mr_value *vtrain = mr_value_get(def, "train"), *vvalid = mr_value_get(def, "valid");
    const mr_value *vlabel = mr_value_get(def, "label");
    mr_model *model = NULL;
    mr_train_opts o;
    mr_train_opts_init(&o);
    char *bin_cache = NULL;
    mr_status rc = train_settings(def, &o, err);
    if (rc != MR_OK) goto done;
    const char *valid_path = vvalid && vvalid->kind == MR_V_STR ? vvalid->str : NULL;
    o.label = vlabel->str;
    o.features = strings_of(def, "features", &o.n_features);
    o.exclude = strings_of(def, "exclude", &o.n_exclude);
    o.categorical = strings_of(def, "categorical", &o.n_categorical);
    o.smoke = ctx->smoke;
    o.num_threads = ctx->threads;
    /* Binned matrices are kept by content + binning params: re-training on
     * the same data (say, after a learning-rate change) skips binning. */
    bin_cache = mr_asprintf("%s/.millrace/cache/binned", ctx->workspace);
    o.bin_cache_dir = bin_cache;
    train_run tr = {ctx, &o};
    o.on_round = on_round;
    o.on_round_ctx = &tr;
    dprintf(ctx->log_fd, "training %s on %s%s\n", o.kind, vtrain->str, ctx->smoke ? " [smoke]" : "");
    double t0 = mr_now();
    const mr_value *vd = mr_value_get(def, "distributed"), *vr = vd ? mr_value_get(vd, "ranks") : NULL;
    const mr_value *vt = vd ? mr_value_get(vd, "timeout") : NULL;
    int ranks = vr && vr->kind == MR_V_INT ? (int)vr->u.i : 1;
    if (ranks > 1 && !ctx->smoke) /* a smoke run trains on one process */
        rc = train_ranks(ctx, &o, vtrain->str, valid_path, ranks,
                         vt ? (vt->kind == MR_V_INT ? (double)vt->u.i : vt->u.f) : 0, &model, err);
    else
        rc = mr_model_train_file(vtrain->str, valid_path, &o, &model, err);
    if (rc != MR_OK) {
        if (vlabel) mr_error_key(err, "label");
        goto done;
    }
    double secs = mr_now() - t0;
    mr_op_metric(ctx, "train_rows", 0, (double)o.train_rows);
    mr_op_metric(ctx, "binned_from_cache", 0, o.binned_from_cache);
    dprintf(ctx->log_fd, "%zu training rows%s\n", o.train_rows,
            o.binned_from_cache ? "; binned matrix reused from the cache"
            : o.streamed        ? "; binned while reading"
                                : "");
    mr_op_metric(ctx, "train_seconds", 0, secs);
    if (valid_path && mr_model_kind_of(model) == MR_MODEL_GBDT) {
        mr_op_metric(ctx, "fast_tier_seconds", 0, o.fast_tier_seconds);
        mr_op_metric(ctx, "valid_rows", 0, (double)o.valid_rows_used);
        dprintf(ctx->log_fd, "fast tier: %.3fs on %zu validation rows (%.2f%% of training)\n", o.fast_tier_seconds,
                o.valid_rows_used, secs > 0 ? 100.0 * o.fast_tier_seconds / secs : 0.0);
    }
    {
        char *path = mr_path_join(ctx->outputs[0].path, "model.bin");
        char *info_path = mr_path_join(ctx->outputs[0].path, "model.json");
        mr_buf info;
        mr_buf_init(&info);
        rc = path && info_path ? mr_model_save(model, path, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) rc = mr_model_info_json(model, &info, err);
        if (rc == MR_OK) rc = mr_fs_write_atomic(info_path, info.data, info.len, err);
        mr_buf_free(&info);
        mr_free(path);
        mr_free(info_path);
    }
    dprintf(ctx->log_fd, "trained in %.2fs\n", secs);
done:
    mr_free(bin_cache);
    mr_free((void *)o.features);
    mr_free((void *)o.exclude);
    mr_free((void *)o.categorical);
    mr_model_free(model);
    return rc;
}

const mr_op mr_op_train = {
    .name = "train",
    .version = 1,
    .params = train_params,
    .outputs = NULL,
    .run = run_train,
    .validate = validate_train,
};
