/* The split op: named parts (random, stratified, group or time), each
 * written as a dataset. */
#include "millrace/dataset.h"
#include "millrace/io.h"
#include "millrace/op.h"
#include "millrace/split.h"
#include "ops_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- split ---------------------------------------------------------------*/

static const mr_param_def split_params[] = {
    {"input", MR_PT_STR | MR_PT_PATH, 1, "the data to split: ${stages.X} or a data file/dataset"},
    {"method", MR_PT_STR, 0, "random (default), stratified, group or time"},
    {"parts", MR_PT_MAP | MR_PT_SEQ, 1, "{train: 0.7, valid: 0.15, test: 0.15}, or [train, test] with cutoffs"},
    {"label", MR_PT_STR, 0, "stratified: the class column"},
    {"group", MR_PT_STR, 0, "group: no value of this column lands in two parts"},
    {"time", MR_PT_STR, 0, "time: the date/timestamp column"},
    {"cutoffs", MR_PT_SEQ | MR_PT_STRSEQ, 0, "time: n_parts - 1 increasing cut-offs"},
    {"seed", MR_PT_INT, 0, "seed of the assignment (default 0)"},
    {NULL, 0, 0, NULL},
};

/* Part names, in declaration order: the outputs ${stages.NAME.PART}. */
static size_t split_outputs(const mr_value *def, const char **names, size_t max)
{
    const mr_value *parts = mr_value_get(def, "parts");
    size_t n = 0;
    if (parts && parts->kind == MR_V_MAP)
        for (size_t k = 0; k < parts->n; k++, n++)
            if (n < max) names[n] = parts->keys[k];
    if (parts && parts->kind == MR_V_SEQ)
        for (size_t k = 0; k < parts->n; k++)
            if (parts->items[k]->kind == MR_V_STR) {
                if (n < max) names[n] = parts->items[k]->str;
                n++;
            }
    return n;
}

/* The split's own keys, as mr_split_spec_from_value expects them. */
static mr_value *split_view(const mr_value *def)
{
    static const char *const keys[] = {"method", "parts", "label", "group", "time", "cutoffs", "seed"};
    mr_value *v = mr_value_new(MR_V_MAP);
    for (size_t k = 0; v && k < sizeof(keys) / sizeof(keys[0]); k++) {
        const mr_value *x = mr_value_get(def, keys[k]);
        if (x && mr_value_map_set(v, keys[k], mr_value_clone(x)) != MR_OK) {
            mr_value_free(v);
            return NULL;
        }
    }
    return v;
}

/* The definition's settings: the split spec (method, parts, columns,
 * cut-offs, seed), with every check that needs no data. *view_out holds
 * what spec borrows (caller frees). What validate checks at load is what
 * run uses. */
static mr_status split_settings(const mr_value *def, mr_value **view_out, mr_split_spec *spec, mr_error *err)
{
    mr_split_spec_init(spec);
    *view_out = split_view(def);
    if (!*view_out) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    return mr_split_spec_from_value(*view_out, spec, err);
}

static mr_status validate_split(const mr_op_validate_ctx *vc, mr_error *err)
{
    mr_value *view = split_view(vc->def);
    if (!view) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* A value read from another stage's outputs is checked when it is known. */
    int deferred = mr__value_has_deferred(view);
    mr_value_free(view);
    if (deferred) return MR_OK;
    mr_split_spec spec;
    mr_status rc = split_settings(vc->def, &view, &spec, err);
    mr_value_free(view);
    return rc;
}

static mr_status run_split(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *input = mr_value_get(ctx->def, "input");
    mr_value *view = NULL;
    mr_table *t = NULL, *parts[MR_SPLIT_MAX_PARTS] = {0};
    mr_split_spec spec;
    mr_status rc = split_settings(ctx->def, &view, &spec, err);
    if (rc == MR_OK) rc = mr__read_input(ctx, input->str, &t, err);
    if (rc == MR_OK) rc = mr_split_table(&spec, t, parts, err);
    for (size_t k = 0; rc == MR_OK && k < spec.n_parts; k++) {
        const mr_op_io *o = mr__output_named(ctx, spec.names[k]);
        if (!o) {
            rc = MR_ERR(err, MR_E_INTERNAL, "no output for part '%s'", spec.names[k]);
            break;
        }
        rc = mr__write_dataset(o->path, parts[k], err);
        char name[96];
        snprintf(name, sizeof(name), "rows.%s", spec.names[k]);
        if (rc == MR_OK) mr_op_metric(ctx, name, 0, (double)parts[k]->n_rows);
        dprintf(ctx->log_fd, "split: %s %zu rows\n", spec.names[k], parts[k]->n_rows);
    }
    for (size_t k = 0; k < MR_SPLIT_MAX_PARTS; k++) mr_table_free(parts[k]);
    mr_table_free(t);
    mr_value_free(view);
    return rc;
}

const mr_op mr_op_split = {
    .name = "split",
    .version = 3, /* 2: outputs keep their columns' kinds (int widths, decimals, binary, naive timestamps);
                     3: dataset row groups also end at 128 MiB of values */
    .params = split_params,
    .outputs = NULL,
    .run = run_split,
    .outputs_of = split_outputs,
    .validate = validate_split,
};
