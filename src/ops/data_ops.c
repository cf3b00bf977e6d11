/* The preprocessing ops: transform (filter/select/derive/join/aggregate/...
 * steps, streamed batch by batch from the input into a dataset), split
 * (named parts, each a dataset), and features (a transform fitted on the
 * training part and applied to the others; the fitted artifact is what
 * predict and serve apply later). */
#include "millrace/dataset.h"
#include "millrace/features.h"
#include "millrace/io.h"
#include "millrace/op.h"
#include "millrace/split.h"
#include "millrace/transform.h"
#include "ops_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMOKE_ROWS 10000

/* ---- shared --------------------------------------------------------------*/

static mr_status write_dataset(const char *dir, const mr_table *t, mr_error *err)
{
    mr_dataset_write_opts o;
    mr_dataset_write_opts_init(&o);
    return mr_dataset_write_table(dir, t, &o, NULL, err);
}

static const mr_op_io *output_named(const mr_op_ctx *ctx, const char *name)
{
    for (size_t k = 0; k < ctx->n_outputs; k++)
        if (!strcmp(ctx->outputs[k].name, name)) return &ctx->outputs[k];
    return NULL;
}

/* Reads a whole input; in smoke mode only its first rows. */
static mr_status read_input(const mr_op_ctx *ctx, const char *path, mr_table **out, mr_error *err)
{
    mr_status rc = mr_read_table(path, out, err);
    if (rc == MR_OK && ctx->smoke && (*out)->n_rows > SMOKE_ROWS) {
        mr_table *head = NULL;
        rc = mr_table_slice(*out, 0, SMOKE_ROWS, &head, err);
        mr_table_free(*out);
        *out = rc == MR_OK ? head : NULL;
    }
    return rc;
}

/* ---- transform -----------------------------------------------------------*/

static const mr_param_def transform_params[] = {
    {"input", MR_PT_STR | MR_PT_PATH, 1, "the data to transform: ${stages.X} or a data file/dataset"},
    {"steps", MR_PT_SEQ, 1, "filter / select / rename / derive / join / aggregate / sort / limit steps (docs/transform.md)"},
    {"memory_limit", MR_PT_STR | MR_PT_INT, 0, "cap for join build sides, groups and sorts (\"2G\"); default: none"},
    {NULL, 0, 0, NULL},
};

typedef struct xf_io {
    mr_source *src;
    mr_dataset_writer *w;
    mr_table *pending; /* the first batch, read early for the schema */
    uint64_t rows_in;
    int smoke;
} xf_io;

static mr_status xf_source(void *ctx, mr_table **out, mr_error *err)
{
    xf_io *io = ctx;
    *out = NULL;
    if (io->pending) {
        *out = io->pending;
        io->pending = NULL;
        return MR_OK;
    }
    if (io->smoke && io->rows_in >= SMOKE_ROWS) return MR_OK;
    mr_status rc = mr_source_next(io->src, io->smoke ? SMOKE_ROWS : 0, out, err);
    if (rc == MR_OK && *out) io->rows_in += (*out)->n_rows;
    return rc;
}

static mr_status xf_sink(void *ctx, mr_table *batch, mr_error *err)
{
    xf_io *io = ctx;
    mr_status rc = mr_dataset_writer_write(io->w, batch, err);
    mr_table_free(batch);
    return rc;
}

/* Collects the `with:` inputs of join steps (resolved paths). */
static mr_status join_inputs(const mr_value *steps, mr_transform_table **out, size_t *n_out, mr_error *err)
{
    size_t n = 0;
    mr_transform_table *joins = mr_calloc(steps->n ? steps->n : 1, sizeof(*joins));
    if (!joins) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < steps->n; k++) {
        const mr_value *join = mr_value_get(steps->items[k], "join");
        const mr_value *with = mr_value_get(join, "with");
        if (!with || with->kind != MR_V_STR) continue;
        int dup = 0;
        for (size_t q = 0; q < n; q++) dup |= !strcmp(joins[q].name, with->str);
        if (dup) continue;
        mr_table *t = NULL;
        mr_status rc = mr_read_table(with->str, &t, err);
        if (rc != MR_OK) {
            mr_error_at(err, NULL, with->line, with->col);
            for (size_t q = 0; q < n; q++) mr_table_free((mr_table *)joins[q].table);
            mr_free(joins);
            return rc;
        }
        joins[n].name = with->str;
        joins[n].table = t;
        n++;
    }
    *out = joins;
    *n_out = n;
    return MR_OK;
}

static void schema_of(const mr_table *t, const char *name, const char **names, mr_dtype *types,
                      mr_transform_schema *s)
{
    for (size_t i = 0; i < t->n_cols; i++) {
        names[i] = t->cols[i]->name;
        types[i] = t->cols[i]->type;
    }
    s->name = name;
    s->n_cols = t->n_cols;
    s->col_names = names;
    s->col_types = types;
}

static mr_status parse_bytes(const mr_value *v, uint64_t *out, mr_error *err)
{
    *out = 0;
    if (!v) return MR_OK;
    if (v->kind == MR_V_INT && v->u.i >= 0) {
        *out = (uint64_t)v->u.i;
        return MR_OK;
    }
    char *end = NULL;
    double x = v->kind == MR_V_STR ? strtod(v->str, &end) : -1;
    uint64_t mult = 1;
    if (end && *end) {
        switch (*end == 'K' || *end == 'k' ? 'K' : *end == 'M' || *end == 'm' ? 'M' : *end == 'G' || *end == 'g' ? 'G' : *end) {
        case 'K': mult = 1ull << 10; break;
        case 'M': mult = 1ull << 20; break;
        case 'G': mult = 1ull << 30; break;
        default: x = -1;
        }
    }
    if (x <= 0) return MR_ERR(err, MR_E_INVALID_ARG, "memory_limit: expected bytes or a size like 2G");
    *out = (uint64_t)(x * (double)mult);
    return MR_OK;
}

static mr_status run_transform(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *input = mr_value_get(ctx->def, "input"), *steps = mr_value_get(ctx->def, "steps");
    mr_transform *x = NULL;
    mr_transform_table *joins = NULL;
    size_t n_joins = 0;
    mr_transform_schema *jschemas = NULL;
    const char **jnames = NULL;
    mr_dtype *jtypes = NULL;
    xf_io io = {.smoke = ctx->smoke};
    mr_table *first = NULL;
    mr_status rc = mr_transform_parse(steps, &x, err);
    if (rc == MR_OK) rc = join_inputs(steps, &joins, &n_joins, err);
    if (rc == MR_OK) rc = mr_source_open(input->str, MR_SRC_AUTO, NULL, &io.src, err);
    /* The input schema comes from its first batch (an empty input has none). */
    if (rc == MR_OK) rc = mr_source_next(io.src, ctx->smoke ? SMOKE_ROWS : 0, &first, err);
    if (rc != MR_OK) goto done;
    if (!first) {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "input '%s' has no rows", input->str);
        goto done;
    }
    {
        size_t total_cols = first->n_cols;
        for (size_t k = 0; k < n_joins; k++) total_cols += joins[k].table->n_cols;
        jschemas = mr_calloc(n_joins + 1, sizeof(*jschemas));
        jnames = mr_calloc(total_cols + 1, sizeof(*jnames));
        jtypes = mr_calloc(total_cols + 1, sizeof(*jtypes));
        if (!jschemas || !jnames || !jtypes) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        mr_transform_schema in;
        schema_of(first, NULL, jnames, jtypes, &in);
        size_t off = first->n_cols;
        for (size_t k = 0; k < n_joins; k++) {
            schema_of(joins[k].table, joins[k].name, jnames + off, jtypes + off, &jschemas[k]);
            off += joins[k].table->n_cols;
        }
        const mr_transform_schema *out_schema = NULL;
        rc = mr_transform_bind(x, &in, jschemas, n_joins, &out_schema, err);
    }
    if (rc != MR_OK) goto done;
    mr_dataset_write_opts wo;
    mr_dataset_write_opts_init(&wo);
    rc = mr_dataset_writer_open(ctx->outputs[0].path, &wo, &io.w, err);
    if (rc != MR_OK) goto done;
    {
        io.pending = first; /* the source callback hands it out first */
        io.rows_in = first->n_rows;
        first = NULL;
        mr_transform_opts to = {.threads = ctx->threads > 1 ? 0 : 1};
        mr_transform_stats st;
        memset(&st, 0, sizeof(st));
        rc = parse_bytes(mr_value_get(ctx->def, "memory_limit"), &to.memory_limit_bytes, err);
        if (rc == MR_OK) rc = mr_transform_run(x, xf_source, &io, joins, n_joins, xf_sink, &io, &to, &st, err);
        if (rc == MR_OK) {
            mr_op_metric(ctx, "rows_in", 0, (double)st.rows_in);
            mr_op_metric(ctx, "rows_out", 0, (double)st.rows_out);
            dprintf(ctx->log_fd, "transform: %llu rows in, %llu rows out%s\n", (unsigned long long)st.rows_in,
                    (unsigned long long)st.rows_out, st.stopped_early ? " (stopped early at the limit)" : "");
        }
    }
    if (rc == MR_OK) {
        rc = mr_dataset_writer_close(io.w, NULL, err);
        io.w = NULL;
    }
done:
    mr_dataset_writer_free(io.w);
    mr_source_close(io.src, NULL);
    mr_table_free(first);
    mr_table_free(io.pending);
    for (size_t k = 0; k < n_joins; k++) mr_table_free((mr_table *)joins[k].table);
    mr_free(joins);
    mr_free(jschemas);
    mr_free(jnames);
    mr_free(jtypes);
    mr_transform_free(x);
    return rc;
}

const mr_op mr_op_transform = {
    .name = "transform",
    .version = 1,
    .params = transform_params,
    .outputs = NULL,
    .run = run_transform,
    .outputs_of = NULL,
};

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

static mr_status run_split(mr_op_ctx *ctx, mr_error *err)
{
    const mr_value *input = mr_value_get(ctx->def, "input");
    mr_value *view = split_view(ctx->def);
    mr_table *t = NULL, *parts[MR_SPLIT_MAX_PARTS] = {0};
    mr_split_spec spec;
    mr_split_spec_init(&spec);
    mr_status rc = view ? mr_split_spec_from_value(view, &spec, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = read_input(ctx, input->str, &t, err);
    if (rc == MR_OK) rc = mr_split_table(&spec, t, parts, err);
    for (size_t k = 0; rc == MR_OK && k < spec.n_parts; k++) {
        const mr_op_io *o = output_named(ctx, spec.names[k]);
        if (!o) {
            rc = MR_ERR(err, MR_E_INTERNAL, "no output for part '%s'", spec.names[k]);
            break;
        }
        rc = write_dataset(o->path, parts[k], err);
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
    .version = 1,
    .params = split_params,
    .outputs = NULL,
    .run = run_split,
    .outputs_of = split_outputs,
};

/* ---- features --------------------------------------------------------------*/

static const mr_param_def features_params[] = {
    {"fit", MR_PT_STR | MR_PT_PATH, 1, "the data the steps are fitted on (the training part)"},
    {"apply", MR_PT_MAP | MR_PT_PATH, 0, "{NAME: data, ...}: other data to transform with the fitted steps"},
    {"steps", MR_PT_SEQ, 1, "impute / standardize / minmax / log1p / clip / bucketize / onehot / ordinal / hash / target_encode"},
    {"label", MR_PT_STR, 0, "the label: never a feature, default of target_encode, kept in every output"},
    {"keep", MR_PT_STRSEQ, 0, "columns copied unchanged into every output (ids, the label)"},
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
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "keep: '%s' is also a feature output name", names[k]);
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
    mr_status rc = mr_features_spec_parse(mr_value_get(def, "steps"), NULL, &spec, err);
    if (rc == MR_OK) rc = read_input(ctx, fit->str, &train, err);
    if (rc == MR_OK) rc = mr_features_fit_apply_train(spec, train, lab, &f, &train_out, err);
    if (rc == MR_OK) rc = keep_columns(def, train, train_out, err);
    if (rc == MR_OK) rc = write_dataset(output_named(ctx, "train")->path, train_out, err);
    if (rc == MR_OK) rc = mr_features_save(f, &bytes) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        char *path = mr_path_join(output_named(ctx, "transform")->path, "features.mrft");
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
        if (src->kind != MR_V_STR) {
            rc = MR_ERR(err, MR_E_SCHEMA, "apply.%s: expected a data path or ${stages.X}", apply->keys[k]);
            mr_error_at(err, NULL, src->line, src->col);
            break;
        }
        rc = read_input(ctx, src->str, &t, err);
        if (rc == MR_OK) rc = mr_features_apply(f, t, &out, err);
        if (rc == MR_OK) rc = keep_columns(def, t, out, err);
        if (rc == MR_OK) rc = write_dataset(output_named(ctx, apply->keys[k])->path, out, err);
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
    .version = 1,
    .params = features_params,
    .outputs = NULL,
    .run = run_features,
    .outputs_of = features_outputs,
};
