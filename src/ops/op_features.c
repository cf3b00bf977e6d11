/* The features op: a transform fitted on the training part and applied to
 * the others; the fitted artifact is what predict and serve apply later. */
#include "millrace/dataset.h"
#include "millrace/features.h"
#include "millrace/io.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- features --------------------------------------------------------------*/

static const mr_param_def features_params[] = {
    {"fit", MR_PT_STR | MR_PT_PATH, 1, "the data the steps are fitted on (the training part)"},
    {"apply", MR_PT_MAP | MR_PT_PATH, 0, "{NAME: data, ...}: other data to transform with the fitted steps"},
    {"steps", MR_PT_SEQ, 1, "impute / standardize / minmax / log1p / clip / bucketize / onehot / ordinal / hash / target_encode"},
    {"label", MR_PT_STR, 0, "the label: never a feature, default of target_encode, kept in every output"},
    {"keep", MR_PT_STRSEQ, 0, "columns copied unchanged into every output and not features (ids kept for joining)"},
    {NULL, 0, 0, NULL},
};

/* Outputs: transform (the fitted artifact), train (the fit data, target
 * encodings out-of-fold), then one per `apply` entry. */
static size_t features_outputs(const mr_value *def, const char **names, size_t max)
{
    size_t n = 0;
    static const char *const fixed[] = {"transform", "train"};
    for (size_t k = 0; k < 2; k++, n++)
        if (n < max) names[n] = fixed[k];
    const mr_value *apply = mr_value_get(def, "apply");
    for (size_t k = 0; apply && apply->kind == MR_V_MAP && k < apply->n; k++, n++)
        if (n < max) names[n] = apply->keys[k];
    return n;
}

/* ---- settings: what the definition says, checked without data ------------
 * validate (at load) and run call the same functions, so what is checked
 * when millrace.yaml is loaded is exactly what the stage runs with. */

/* An output name: a path component (out/STAGE/NAME) and the last part of a
 * ${stages.STAGE.NAME} reference, so letters, digits, '_' and '-', not
 * starting with '-'. */
static int output_name_ok(const char *s)
{
    if (!s[0] || s[0] == '-') return 0;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
            return 0;
    return 1;
}

/* label a column name; apply a mapping of part names (output names other
 * than transform and train) to data paths or ${stages.X}. */
static mr_status check_parts(const mr_value *def, mr_error *err)
{
    const mr_value *label = mr_value_get(def, "label"), *apply = mr_value_get(def, "apply");
    mr_status rc = MR_OK;
    if ((rc = mr__check_text(label, "label", "a column name", 0, err)) != MR_OK) return rc;
    for (size_t k = 0; apply && apply->kind == MR_V_MAP && k < apply->n; k++) {
        const char *name = apply->keys[k];
        const mr_value *src = apply->items[k];
        long line = apply->key_lines ? apply->key_lines[k] : 0, col = apply->key_cols ? apply->key_cols[k] : 0;
        if (!strcmp(name, "transform") || !strcmp(name, "train")) {
            rc = MR_ERR(err, MR_E_SCHEMA, "apply: part name '%s' is taken: every features stage has the outputs transform and train",
                        name);
            mr_error_hint(err, "name the part otherwise (it becomes the output ${stages.STAGE.NAME}); the fit data "
                               "transformed is already the output train");
        } else if (!output_name_ok(name)) {
            rc = MR_ERR(err, MR_E_SCHEMA, "apply: part name '%s' is not an output name", name);
            mr_error_hint(err, "a part name names an output (out/STAGE/NAME, ${stages.STAGE.NAME}): letters, digits, "
                               "'_' and '-', not starting with '-'");
        } else if (src->kind != MR_V_STR || !src->str[0]) {
            rc = MR_ERR(err, MR_E_SCHEMA, "apply.%s: expected a data path or ${stages.X}, got %s", name,
                        src->kind == MR_V_STR   ? "an empty string"
                        : src->kind == MR_V_MAP ? "a mapping"
                        : src->kind == MR_V_SEQ ? "a list"
                                                : mr_vkind_name(src->kind));
            line = src->line;
            col = src->col;
        }
        if (rc != MR_OK) {
            mr_error_at(err, NULL, line, col);
            mr_error_key(err, "apply");
            return rc;
        }
    }
    return MR_OK;
}

/* The steps (mr_features_spec_parse: step kinds, keys, values, column
 * lists) and keep (its conflicts with the steps) as the fit takes them.
 * *out: caller frees. */
static mr_status spec_of(const mr_value *def, mr_features_spec **out, mr_error *err)
{
    mr_status rc = mr_features_spec_parse(mr_value_get(def, "steps"), NULL, out, err);
    if (rc == MR_OK) rc = mr_features_spec_set_keep(*out, mr_value_get(def, "keep"), err);
    if (rc != MR_OK) {
        mr_features_spec_free(*out);
        *out = NULL;
    }
    return rc;
}

static mr_status validate_features(const mr_op_validate_ctx *vc, mr_error *err)
{
    mr_status rc = check_parts(vc->def, err);
    /* Steps or keep that read another stage's outputs are checked when it ran. */
    if (rc != MR_OK || mr__value_has_deferred(mr_value_get(vc->def, "steps")) || mr__value_has_deferred(mr_value_get(vc->def, "keep")))
        return rc;
    mr_features_spec *spec = NULL;
    rc = spec_of(vc->def, &spec, err);
    mr_features_spec_free(spec);
    return rc;
}

/* Appends the keep columns (and the label) of src to dst. */
static mr_status keep_columns(const mr_value *def, const mr_table *src, mr_table *dst, mr_error *err)
{
    const mr_value *keep = mr_value_get(def, "keep"), *label = mr_value_get(def, "label");
    const char *names[128];
    size_t n = 0;
    if (keep && keep->kind == MR_V_STR) names[n++] = keep->str;
    for (size_t k = 0; keep && keep->kind == MR_V_SEQ && k < keep->n && n < 127; k++)
        if (keep->items[k]->kind == MR_V_STR) names[n++] = keep->items[k]->str;
    if (label && label->kind == MR_V_STR) {
        int dup = 0;
        for (size_t k = 0; k < n; k++) dup |= !strcmp(names[k], label->str);
        if (!dup) names[n++] = label->str;
    }
    for (size_t k = 0; k < n; k++) {
        const mr_column *c = mr_table_column(src, names[k]);
        mr_column *copy = NULL;
        if (!c) {
            if (label && label->kind == MR_V_STR && !strcmp(names[k], label->str)) continue; /* unlabeled data */
            mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "keep: no column '%s' in the data", names[k]);
            mr_error_key(err, "keep");
            return rc;
        }
        if (mr_table_column(dst, names[k])) {
            /* the fit refuses a kept column that is a feature of its own
             * name; what is left is another column's output of that name */
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "keep: column '%s' has the name of a feature output", names[k]);
            mr_error_key(err, "keep");
            mr_error_hint(err, "a kept column is copied under its own name: rename it in an earlier transform stage");
            return rc;
        }
        mr_status rc = mr_column_slice(c, 0, c->n, &copy, err);
        if (rc == MR_OK) rc = mr_table_add_column(dst, copy, err);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

static mr_status run_features(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *def = ctx->def, *fit = mr_value_get(def, "fit"), *apply = mr_value_get(def, "apply");
    const mr_value *label = mr_value_get(def, "label");
    const char *lab = label && label->kind == MR_V_STR ? label->str : NULL;
    mr_features_spec *spec = NULL;
    mr_features *f = NULL;
    mr_table *train = NULL, *train_out = NULL;
    mr_buf bytes;
    mr_buf_init(&bytes);
    mr_status rc = check_parts(def, err);
    if (rc == MR_OK) rc = spec_of(def, &spec, err);
    if (rc == MR_OK) rc = mr__read_input(ctx, fit->str, &train, err);
    if (rc == MR_OK) rc = mr_features_fit_apply_train(spec, train, lab, &f, &train_out, err);
    if (rc == MR_OK) rc = keep_columns(def, train, train_out, err);
    if (rc == MR_OK) rc = mr__write_dataset(mr__output_named(ctx, "train")->path, train_out, err);
    if (rc == MR_OK) rc = mr_features_save(f, &bytes) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        char *path = mr_path_join(mr__output_named(ctx, "transform")->path, "features.mrft");
        rc = path ? mr_fs_write_atomic(path, bytes.data, bytes.len, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(path);
    }
    if (rc == MR_OK) {
        mr_op_metric(ctx, "features", 0, (double)mr_features_n_outputs(f));
        dprintf(ctx->log_fd, "features: fitted on %zu rows, %zu inputs -> %zu outputs\n", train->n_rows,
                mr_features_n_inputs(f), mr_features_n_outputs(f));
    }
    for (size_t k = 0; rc == MR_OK && apply && apply->kind == MR_V_MAP && k < apply->n; k++) {
        const mr_value *src = apply->items[k];
        mr_table *t = NULL, *out = NULL;
        rc = mr__read_input(ctx, src->str, &t, err);
        if (rc == MR_OK) rc = mr_features_apply(f, t, &out, err);
        if (rc == MR_OK) rc = keep_columns(def, t, out, err);
        if (rc == MR_OK) rc = mr__write_dataset(mr__output_named(ctx, apply->keys[k])->path, out, err);
        if (rc != MR_OK) mr_error_key(err, apply->keys[k]);
        mr_table_free(t);
        mr_table_free(out);
    }
    mr_buf_free(&bytes);
    mr_table_free(train);
    mr_table_free(train_out);
    mr_features_free(f);
    mr_features_spec_free(spec);
    return rc;
}

const mr_op mr_op_features = {
    .name = "features",
    .version = 3, /* 2: passed-through columns keep their kinds; decimals are numeric inputs;
                     3: dataset row groups also end at 128 MiB of values */
    .params = features_params,
    .outputs = NULL,
    .run = run_features,
    .outputs_of = features_outputs,
    .validate = validate_features,
};
