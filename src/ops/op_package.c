/* The package op: bundles a trained model, the fitted features transform
 * and a metrics snapshot, with lineage (run id, stage key, input artifact
 * ids, git commit), into one verified file, out/<stage>/model.mrb
 * (docs/bundle.md). It reads files only; nothing it packages is executed. */
#include "millrace/bundle.h"
#include "millrace/model.h"
#include "millrace/op.h"
#include "millrace/profile.h"
#include "millrace/registry.h"
#include "ops_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const mr_param_def package_params[] = {
    {"model", MR_PT_STR | MR_PT_PATH, 1, "the train stage (${stages.train}: its model.bin) or a model file"},
    {"features", MR_PT_STR | MR_PT_PATH, 0,
     "the fitted features transform: ${stages.X} of a features stage, an MRFT file or a directory holding one"},
    {"metrics", MR_PT_STR | MR_PT_PATH, 0, "metrics snapshot: a JSON object file or a directory with metrics.json"},
    {"name", MR_PT_STR, 0, "a name recorded in the bundle (default: the stage name)"},
    {"reference", MR_PT_STR | MR_PT_PATH, 0,
     "the training data (raw rows, ${stages.split.train}): its profile goes into the bundle, for serve's input "
     "counters and drift"},
    {"register", MR_PT_STR, 0,
     "register the bundle in the model registry as a version of this model (millrace model show NAME)"},
    {NULL, 0, 0, NULL},
};

/* ---- settings: what the definition says, checked without data ------------
 * validate (at load) and run both call package_settings: the name the
 * bundle records and the shape of the model, features and metrics values.
 * What they hold (a model, an MRFT transform, a JSON object) is read when
 * the stage runs. */

typedef struct package_cfg {
    const char *name; /* recorded in the bundle; NULL = the stage name */
} package_cfg;

static mr_status package_settings(const mr_value *def, package_cfg *c, mr_error *err)
{
    static const char *const paths[] = {"model", "features", "metrics", "reference"};
    mr_status rc = MR_OK;
    for (size_t k = 0; k < 4 && rc == MR_OK; k++)
        rc = mr__check_text(mr_value_get(def, paths[k]), paths[k], "a path or ${stages.X}", 0, err);
    /* The name identifies the model wherever the bundle is shown (bundle
     * inspect, serve's /v1/model): one line of text. */
    const mr_value *vname = mr_value_get(def, "name");
    if (rc == MR_OK && (rc = mr__check_text(vname, "name", "one line of text", 1, err)) != MR_OK)
        mr_error_hint(err, "leave name out to record the stage's name");
    c->name = rc == MR_OK && vname && vname->kind == MR_V_STR ? vname->str : NULL;
    const mr_value *reg = mr_value_get(def, "register");
    if (rc == MR_OK && reg && reg->kind == MR_V_STR && !mr_op_value_deferred(reg) &&
        (rc = mr_model_name_check(reg->str, err)) != MR_OK) {
        mr_error_at(err, NULL, reg->line, reg->col);
        mr_error_key(err, "register");
    }
    return rc;
}

static mr_status validate_package(const mr_op_validate_ctx *vc, mr_error *err)
{
    package_cfg c;
    return package_settings(vc->def, &c, err);
}

/* path, or dir/file when path is a directory. Caller frees. */
static char *in_dir(const char *path, const char *file)
{
    return mr_fs_is_dir(path) ? mr_path_join(path, file) : mr_strdup(path);
}


/* Does value list path as one of its space-separated words? */
static int lists_path(const char *value, const char *path)
{
    size_t n = strlen(path);
    for (const char *p = value; n && (p = strstr(p, path)) != NULL; p++)
        if ((p == value || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ')) return 1;
    return 0;
}

/* The MRFT file the `features` value names: a file, a directory holding
 * one, or ${stages.X} of a features stage. A reference to a stage with
 * several outputs reads as all their paths, space-separated ("out/f/transform
 * out/f/train ..."); the one output among the stage's inputs that holds a
 * fitted transform is taken. *out: caller frees. */
static mr_status locate_features(const mr_op_ctx *ctx, const char *value, char **out, mr_error *err)
{
    *out = NULL;
    if (mr_fs_is_dir(value)) return mr__find_features(value, out, err);
    if (mr_fs_exists(value) || !strchr(value, ' ')) {
        *out = mr_strdup(value); /* a file; reading it reports a missing one */
        return *out ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    const char *hit_name = NULL;
    for (size_t k = 0; k < ctx->n_inputs; k++) {
        char *p = NULL;
        const mr_op_io *in = &ctx->inputs[k];
        if (!lists_path(value, in->path) || !mr_fs_is_dir(in->path)) continue;
        if (mr__find_features(in->path, &p, NULL) != MR_OK) continue; /* a dataset output */
        if (*out) {
            mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "two of the outputs it names hold a fitted transform: %s and %s",
                                  hit_name, in->name);
            mr_error_hint(err, "name one output: ${%s}", hit_name);
            mr_free(p);
            mr_free(*out);
            *out = NULL;
            return rc;
        }
        *out = p;
        hit_name = in->name;
    }
    if (!*out) {
        mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "none of '%s' holds a fitted features transform (MRFT file)", value);
        mr_error_hint(err, "give the features stage (${stages.features}), its transform output or an MRFT file");
        return rc;
    }
    return MR_OK;
}

static mr_status run_package(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *def = ctx->def;
    const mr_value *vmodel = mr_value_get(def, "model"), *vfeat = mr_value_get(def, "features");
    const mr_value *vmet = mr_value_get(def, "metrics"), *vref = mr_value_get(def, "reference");
    mr_table *ref = NULL;
    mr_buf profile;
    mr_buf_init(&profile);
    package_cfg cfg;
    mr_model *model = NULL;
    mr_features *fx = NULL;
    char *model_path = NULL, *feat_path = NULL, *met_path = NULL, *met = NULL, *fbytes = NULL, *out_path = NULL;
    const char **art_names = NULL, **art_ids = NULL;
    size_t flen = 0, mlen = 0;
    mr_status rc = package_settings(def, &cfg, err);
    if (rc != MR_OK) goto done;
    model_path = in_dir(vmodel->str, "model.bin");
    if (!model_path) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    rc = mr_model_load(model_path, &model, err);
    if (rc != MR_OK) {
        mr_error_key(err, "model");
        goto done;
    }
    if (vfeat && vfeat->kind == MR_V_STR) {
        rc = locate_features(ctx, vfeat->str, &feat_path, err);
        if (rc == MR_OK) rc = mr_fs_read_file(feat_path, (size_t)1 << 31, &fbytes, &flen, err);
        if (rc == MR_OK) rc = mr_features_load(fbytes, flen, &fx, err);
        if (rc != MR_OK) {
            mr_error_key(err, "features");
            goto done;
        }
    }
    if (vmet && vmet->kind == MR_V_STR) {
        met_path = in_dir(vmet->str, "metrics.json");
        rc = met_path ? mr_fs_read_file(met_path, (size_t)64 << 20, &met, &mlen, err)
                      : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc != MR_OK) {
            mr_error_key(err, "metrics");
            goto done;
        }
    }
    art_names = mr_calloc(ctx->n_inputs ? ctx->n_inputs : 1, sizeof(char *));
    art_ids = mr_calloc(ctx->n_inputs ? ctx->n_inputs : 1, sizeof(char *));
    out_path = mr_path_join(ctx->outputs[0].path, "model.mrb");
    if (!art_names || !art_ids || !out_path) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < ctx->n_inputs; k++) {
        art_names[k] = ctx->inputs[k].name;
        art_ids[k] = ctx->inputs[k].id;
    }
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = model;
    bb.features = fx;
    bb.metrics_json = met;
    bb.name = cfg.name ? cfg.name : ctx->stage;
    bb.run_id = 0; /* the bundle holds what its key describes: no run id (the run store links runs to it) */
    bb.stage = ctx->stage;
    bb.stage_key = ctx->stage_key;
    bb.git_commit = ctx->git_commit;
    bb.artifact_names = art_names;
    bb.artifact_ids = art_ids;
    bb.n_artifacts = ctx->n_inputs;
    rc = mr_bundle_save(&bb, out_path, err);
    if (rc == MR_OK && vref && vref->kind == MR_V_STR) {
        /* the profile is over the bundle's raw inputs, which writing it derived: read them back */
        mr_bundle *first = NULL;
        rc = mr_bundle_load(out_path, &first, err);
        size_t n_in = first ? mr_bundle_n_inputs(first) : 0;
        const char **names = rc == MR_OK ? mr_calloc(n_in + 1, sizeof(*names)) : NULL;
        int *cat = rc == MR_OK ? mr_calloc(n_in + 1, sizeof(*cat)) : NULL;
        if (rc == MR_OK && (!names || !cat)) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; rc == MR_OK && k < n_in; k++) {
            names[k] = mr_bundle_input_at(first, k)->name;
            cat[k] = mr_bundle_input_at(first, k)->categorical;
        }
        if (rc == MR_OK) rc = mr__read_input(ctx, vref->str, &ref, err);
        if (rc == MR_OK) rc = mr_profile_build(ref, names, cat, n_in, &profile, err);
        if (rc != MR_OK) mr_error_key(err, "reference");
        if (rc == MR_OK) {
            bb.profile_json = profile.data;
            rc = mr_bundle_save(&bb, out_path, err);
        }
        if (rc == MR_OK)
            dprintf(ctx->log_fd, "profiled %zu inputs over %zu reference rows\n", n_in, ref ? ref->n_rows : 0);
        mr_free(names);
        mr_free(cat);
        mr_bundle_free(first);
    }
    if (rc != MR_OK) goto done;
    {
        /* Load it back: what we publish must pass the checks every reader makes. */
        mr_bundle *check = NULL;
        rc = mr_bundle_load(out_path, &check, err);
        if (rc == MR_OK)
            dprintf(ctx->log_fd, "packaged %s model (%zu inputs%s) -> model.mrb, version %s\n", mr_model_kind_name(model),
                    mr_bundle_n_inputs(check), fx ? ", features transform" : "", mr_bundle_version_id(check));
        mr_bundle_free(check);
    }
done:
    mr_table_free(ref);
    mr_buf_free(&profile);
    mr_free(art_names);
    mr_free(art_ids);
    mr_free(out_path);
    mr_free(model_path);
    mr_free(feat_path);
    mr_free(met_path);
    mr_free(met);
    mr_free(fbytes);
    mr_features_free(fx);
    mr_model_free(model);
    return rc;
}

const mr_op mr_op_package = {
    .name = "package",
    .version = 2, /* 2: no run id in the bundle's lineage; the commit it records is in its key */
    .params = package_params,
    .outputs = NULL,
    .run = run_package,
    .flags = MR_OP_GIT_COMMIT,
    .registers = "model.mrb",
    .validate = validate_package,
};
