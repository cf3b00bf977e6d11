/* The package op: bundles a trained model, the fitted features transform
 * and a metrics snapshot, with lineage (run id, stage key, input artifact
 * ids, git commit), into one verified file, out/<stage>/model.mrb
 * (docs/bundle.md). It reads files only; nothing it packages is executed. */
#include "millrace/bundle.h"
#include "millrace/model.h"
#include "millrace/online.h"
#include "millrace/op.h"
#include "millrace/profile.h"
#include "millrace/registry.h"
#include "ops_int.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
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
    {"online", MR_PT_STRSEQ | MR_PT_PATH, 0,
     "the online store(s) the model's features are served from (${stages.X} of a materialize_online stage, or an "
     ".mrfs file; a list for features by several entities): serve then answers requests that carry only the "
     "entity keys"},
    {"missing", MR_PT_STR, 0, "with online: a missing or expired feature reads as its default (default) or fails "
                              "the request with a 422 (reject)"},
    {"defaults", MR_PT_MAP, 0, "with online: feature name to the value a missing or expired one reads as (default: null)"},
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
    const mr_value *vmis = mr_value_get(def, "missing"), *vdef = mr_value_get(def, "defaults");
    const mr_value *vonl = mr_value_get(def, "online");
    if (rc == MR_OK && vonl && vonl->kind == MR_V_SEQ && vonl->n == 0) {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "online must name at least one store");
        mr_error_at(err, NULL, vonl->line, vonl->col);
        mr_error_key(err, "online");
    }
    for (size_t k = 0; rc == MR_OK && vonl && k < (vonl->kind == MR_V_SEQ ? vonl->n : 1); k++)
        rc = mr__check_text(vonl->kind == MR_V_SEQ ? vonl->items[k] : vonl, "online", "a path or ${stages.X}", 0, err);
    if (rc == MR_OK && vmis && (vmis->kind != MR_V_STR || (strcmp(vmis->str, "default") && strcmp(vmis->str, "reject")))) {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "missing must be default or reject");
        mr_error_at(err, NULL, vmis->line, vmis->col);
        mr_error_key(err, "missing");
    }
    for (size_t k = 0; rc == MR_OK && vdef && k < vdef->n; k++) {
        const mr_value *x = vdef->items[k];
        if (x->kind == MR_V_MAP || x->kind == MR_V_SEQ) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "defaults: '%s' must be a number, a string, true or false", vdef->keys[k]);
            mr_error_at(err, NULL, x->line, x->col);
            mr_error_key(err, "defaults");
        }
    }
    if (rc == MR_OK && (vmis || vdef) && !mr_value_get(def, "online")) {
        const mr_value *at = vmis ? vmis : vdef;
        rc = MR_ERR(err, MR_E_INVALID_ARG, "%s without online: it applies to the features an online store serves",
                    vmis ? "missing" : "defaults");
        mr_error_at(err, NULL, at->line, at->col);
        mr_error_hint(err, "add online: ${stages.<your materialize_online stage>}");
    }
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

/* Does a store feature of type st fit input in (mr_bundle_coerce_value's typed rules)? */
static int store_type_fits(mr_dtype st, const mr_bundle_input *in)
{
    switch (mr_bundle_input_column_type(in)) {
    case MR_T_FLOAT64: return st == MR_T_BOOL || st == MR_T_INT64 || st == MR_T_FLOAT64 || st == MR_T_FLOAT32;
    case MR_T_STRING: return st == MR_T_STRING;
    default: return st == mr_bundle_input_column_type(in);
    }
}

static json_t *default_json(const mr_value *v)
{
    switch (v->kind) {
    case MR_V_BOOL: return json_boolean(v->u.b);
    case MR_V_INT: return json_integer((json_int_t)v->u.i);
    case MR_V_FLOAT: return json_real(v->u.f);
    case MR_V_STR: return json_string(v->str);
    default: return json_null();
    }
}

/* The training profile of b's raw inputs over the reference rows (read into *ref). */
static mr_status package_profile(const mr_op_ctx *ctx, const mr_bundle *b, const char *reference, mr_table **ref,
                                 mr_buf *profile, mr_error *err)
{
    size_t n_in = mr_bundle_n_inputs(b);
    const char **names = mr_calloc(n_in + 1, sizeof(*names));
    int *cat = mr_calloc(n_in + 1, sizeof(*cat));
    mr_status rc = names && cat ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; rc == MR_OK && k < n_in; k++) {
        names[k] = mr_bundle_input_at(b, k)->name;
        cat[k] = mr_bundle_input_at(b, k)->categorical;
    }
    if (rc == MR_OK) rc = mr__read_input(ctx, reference, ref, err);
    if (rc == MR_OK) rc = mr_profile_build(*ref, names, cat, n_in, profile, err);
    if (rc != MR_OK) mr_error_key(err, "reference");
    if (rc == MR_OK) dprintf(ctx->log_fd, "profiled %zu inputs over %zu reference rows\n", n_in, (*ref)->n_rows);
    mr_free(names);
    mr_free(cat);
    return rc;
}

/* Where the store `value` names lives in the workspace, for the bundle to
 * record (the stage reads a private checkout of it): out/STAGE[/OUTPUT]
 * for a ${stages.X} reference, the path as written otherwise; a directory's
 * online.mrfs. Caller frees; NULL on OOM. */
static char *recorded_store_path(const mr_op_ctx *ctx, const char *value)
{
    const char *file = mr_fs_is_dir(value) ? "/online.mrfs" : "";
    for (size_t k = 0; k < ctx->n_inputs; k++) {
        const mr_op_io *in = &ctx->inputs[k];
        if (!lists_path(value, in->path) && strcmp(value, in->path)) continue;
        if (strncmp(in->name, "stages.", 7)) return mr_asprintf("%s%s", in->name, file);
        const char *st = in->name + 7, *dot = strrchr(st, '.');
        if (!dot) break;
        if (!strcmp(dot + 1, "out")) return mr_asprintf("out/%.*s%s", (int)(dot - st), st, file);
        return mr_asprintf("out/%.*s/%s%s", (int)(dot - st), st, dot + 1, file);
    }
    return mr_asprintf("%s%s", value, file);
}

/* Adds one store's part of the feature service: its keys to stores, each
 * of its features that is an input of b to feats (with its default). A
 * feature another store already serves is an error. */
static mr_status service_store(const mr_value *vdef, const mr_bundle *b, const char *store_path,
                               const char *recorded, size_t idx, json_t *stores, json_t *feats, mr_error *err)
{
    mr_online *st = NULL;
    mr_status rc = mr_online_open(store_path, &st, err);
    if (rc != MR_OK) {
        mr_error_key(err, "online");
        return rc;
    }
    json_t *keys = json_array(), *o = json_object();
    int oom = !keys || !o || json_object_set_new(o, "store", json_string(recorded)) || json_object_set(o, "keys", keys) ||
              json_array_append(stores, o);
    for (size_t k = 0; !oom && k < mr_online_n_keys(st); k++) {
        json_t *x = json_pack("{s:s, s:s}", "name", mr_online_key_name(st, k), "type",
                              mr_dtype_name(mr_online_key_type(st, k)));
        oom = !x || json_array_append_new(keys, x);
    }
    size_t before = json_array_size(feats);
    for (size_t f = 0; !oom && rc == MR_OK && f < mr_online_n_features(st); f++) {
        const char *name = mr_online_feature_name(st, f);
        ssize_t i = mr_bundle_input_index(b, name);
        if (i < 0) continue; /* a feature the model does not read */
        mr_dtype t = mr_online_feature_type(st, f);
        for (size_t j = 0; j < before; j++) {
            const json_t *g = json_array_get(feats, j);
            if (strcmp(json_string_value(json_object_get(g, "name")), name)) continue;
            rc = MR_ERR(err, MR_E_SCHEMA, "feature '%s' is in two online stores: %s and %s", name, recorded,
                        json_string_value(json_object_get(json_array_get(stores, (size_t)json_integer_value(
                                                                                    json_object_get(g, "store"))),
                                                          "store")));
            mr_error_key(err, "online");
            mr_error_hint(err, "give its views a prefix in one of the stores");
        }
        if (rc == MR_OK && !store_type_fits(t, mr_bundle_input_at(b, (size_t)i))) {
            rc = MR_ERR(err, MR_E_SCHEMA, "feature '%s' is %s in the online store, which the model's input (%s) does not take",
                        name, mr_dtype_name(t), mr_dtype_name(mr_bundle_input_column_type(mr_bundle_input_at(b, (size_t)i))));
            mr_error_key(err, "online");
        }
        if (rc != MR_OK) break;
        json_t *x = json_pack("{s:s, s:s, s:s, s:I}", "name", name, "type", mr_dtype_name(t), "view",
                              mr_online_view_name(st, mr_online_feature_view(st, f)), "store", (json_int_t)idx);
        const mr_value *dv = vdef ? mr_value_get(vdef, name) : NULL;
        if (x && dv) oom |= json_object_set_new(x, "default", default_json(dv));
        oom |= !x || json_array_append_new(feats, x);
    }
    if (!oom && rc == MR_OK && json_array_size(feats) == before) {
        rc = MR_ERR(err, MR_E_SCHEMA, "none of the online store's %zu features is an input of the model (%s)",
                    mr_online_n_features(st), recorded);
        mr_error_key(err, "online");
        mr_error_hint(err, "train on the columns pit_join gives from the same views (their names are the store's: "
                           "millrace features show %s)", recorded);
    }
    if (oom && rc == MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    json_decref(keys);
    json_decref(o);
    mr_online_close(st);
    return rc;
}

/* The feature service section (include/millrace/bundle.h) of the stores
 * `online` names (one, or a list): each store's keys, and each of its
 * features that is an input of b, with its default. *out: caller frees
 * (free()). */
static mr_status service_section(const mr_op_ctx *ctx, const mr_bundle *b, char **out, mr_error *err)
{
    *out = NULL;
    const mr_value *def = ctx->def, *vonl = mr_value_get(def, "online");
    const mr_value *vmis = mr_value_get(def, "missing"), *vdef = mr_value_get(def, "defaults");
    json_t *doc = json_object(), *stores = json_array(), *feats = json_array();
    int oom = !doc || !stores || !feats || json_object_set_new(doc, "missing", json_string(vmis ? vmis->str : "default")) ||
              json_object_set(doc, "stores", stores) || json_object_set(doc, "features", feats);
    mr_status rc = oom ? MR_ERR(err, MR_E_NOMEM, "out of memory") : MR_OK;
    size_t n = vonl->kind == MR_V_SEQ ? vonl->n : 1;
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        const mr_value *v = vonl->kind == MR_V_SEQ ? vonl->items[k] : vonl;
        if (v->kind != MR_V_STR) continue;
        char *path = mr_online_locate(v->str);
        /* a Redis store is recorded by its location, a file by where it is in the workspace */
        char *recorded = path && !strncmp(path, "redis://", 8) ? mr_strdup(path) : recorded_store_path(ctx, v->str);
        rc = path && recorded ? service_store(vdef, b, path, recorded, json_array_size(stores), stores, feats, err)
                              : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) dprintf(ctx->log_fd, "feature service: the online store %s\n", recorded);
        mr_free(path);
        mr_free(recorded);
    }
    for (size_t k = 0; rc == MR_OK && vdef && k < vdef->n; k++) {
        size_t f = 0;
        while (f < json_array_size(feats) &&
               strcmp(json_string_value(json_object_get(json_array_get(feats, f), "name")), vdef->keys[k]))
            f++;
        if (f < json_array_size(feats)) continue;
        rc = MR_ERR(err, MR_E_INVALID_ARG, "defaults: '%s' is no feature the online stores serve to the model",
                    vdef->keys[k]);
        mr_error_at(err, NULL, vdef->key_lines ? vdef->key_lines[k] : vdef->line, vdef->key_cols ? vdef->key_cols[k] : 0);
        mr_error_key(err, "defaults");
    }
    if (rc == MR_OK) {
        *out = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!*out) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    json_decref(stores);
    json_decref(feats);
    json_decref(doc);
    return rc;
}

static mr_status run_package(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *def = ctx->def;
    const mr_value *vmodel = mr_value_get(def, "model"), *vfeat = mr_value_get(def, "features");
    const mr_value *vmet = mr_value_get(def, "metrics"), *vref = mr_value_get(def, "reference");
    const mr_value *vonl = mr_value_get(def, "online");
    char *service = NULL;
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
    if (rc == MR_OK && ((vref && vref->kind == MR_V_STR) || vonl)) {
        /* the profile and the feature service are over the bundle's raw inputs, which writing it derived: read
         * them back */
        mr_bundle *first = NULL;
        rc = mr_bundle_load(out_path, &first, err);
        if (rc == MR_OK && vref && vref->kind == MR_V_STR) rc = package_profile(ctx, first, vref->str, &ref, &profile, err);
        if (rc == MR_OK && profile.len) bb.profile_json = profile.data;
        if (rc == MR_OK && vonl) {
            rc = service_section(ctx, first, &service, err);
            bb.service_json = service;
        }
        if (rc == MR_OK) rc = mr_bundle_save(&bb, out_path, err);
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
    free(service); /* jansson's */
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
