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
