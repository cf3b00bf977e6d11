/* The transform op: filter / select / derive / join / aggregate / sort /
 * limit steps (docs/transform.md), streamed batch by batch from the input
 * into a dataset. */
#include "millrace/dataset.h"
#include "millrace/io.h"
#include "millrace/op.h"
#include "millrace/transform.h"
#include "ops_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (io->smoke && io->rows_in >= MR__SMOKE_ROWS) return MR_OK;
    mr_status rc = mr_source_next(io->src, io->smoke ? MR__SMOKE_ROWS : 0, out, err);
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
        mr_status rc = mr_table_read_file(with->str, &t, err);
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

/* memory_limit: bytes (an int), or a size "512M", "2G", "1.5G" (K, M, G:
 * binary multiples; "GiB", "GB" read the same). Absent: 0, no limit. */
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
        end++;
        if (*end == 'i') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) x = -1;
    }
    if (!(x > 0) || !(x * (double)mult < 18446744073709551616.0)) {
        mr_status rc;
        if (v->kind == MR_V_INT)
            rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "memory_limit: expected bytes >= 0, got %lld",
                             (long long)v->u.i);
        else
            rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG,
                             "memory_limit: expected bytes or a size like 2G, got \"%s\"", v->str ? v->str : "");
        mr_error_key(err, "memory_limit");
        mr_error_hint(err, "a size is a number with K, M or G (binary multiples): 512M, 2G, 1.5G");
        return rc;
    }
    *out = (uint64_t)(x * (double)mult);
    return MR_OK;
}

/* The definition's settings: the plan of steps (every step kind, its
 * settings and the syntax of its expressions, with their positions) and
 * the memory limit. What validate checks at load is what run uses; binding
 * the plan to the input's columns needs the data and waits for run. */
static mr_status transform_settings(const mr_value *steps, const mr_value *memory_limit, mr_transform **plan,
                                    uint64_t *limit, mr_error *err)
{
    *plan = NULL;
    mr_status rc = mr_transform_parse(steps, plan, err);
    if (rc == MR_OK) rc = parse_bytes(memory_limit, limit, err);
    return rc;
}

/* steps, with every step that holds a value read from another stage's
 * outputs (known when the stage runs) replaced by `limit: 0`, which parses
 * whatever the data: its step number stays. A join's `with:` is only a name
 * until then and stays. NULL on OOM. */
static mr_value *steps_known(const mr_value *steps)
{
    mr_value *c = mr_value_clone(steps);
    for (size_t k = 0; c && c->kind == MR_V_SEQ && k < c->n; k++) {
        mr_value *st = c->items[k];
        if (st->kind != MR_V_MAP || st->n != 1) continue;
        const mr_value *body = st->items[0];
        int deferred = 0;
        for (size_t q = 0; body->kind == MR_V_MAP && q < body->n; q++)
            deferred |= !(!strcmp(st->keys[0], "join") && !strcmp(body->keys[q], "with")) &&
                        mr__value_has_deferred(body->items[q]);
        if (body->kind != MR_V_MAP) deferred = mr__value_has_deferred(body);
        if (!deferred) continue;
        mr_value *placeholder = mr_value_new(MR_V_MAP);
        if (mr_value_map_set(placeholder, "limit", mr_value_new_int(0)) != MR_OK) { /* takes the int, also on failure */
            mr_value_free(placeholder);
            mr_value_free(c);
            return NULL;
        }
        placeholder->line = st->line;
        placeholder->col = st->col;
        mr_value_free(st);
        c->items[k] = placeholder;
    }
    return c;
}

static mr_status validate_transform(const mr_op_validate_ctx *vc, mr_error *err)
{
    const mr_value *steps = mr_value_get(vc->def, "steps"), *memory_limit = mr_value_get(vc->def, "memory_limit");
    mr_value *known = steps_known(steps);
    if (!known) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_transform *plan = NULL;
    uint64_t limit = 0;
    mr_status rc = transform_settings(known, mr_op_value_deferred(memory_limit) ? NULL : memory_limit, &plan, &limit, err);
    mr_transform_free(plan);
    mr_value_free(known);
    return rc;
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
    mr_transform_opts to = {.threads = ctx->threads > 1 ? 0 : 1};
    mr_status rc = transform_settings(steps, mr_value_get(ctx->def, "memory_limit"), &x, &to.memory_limit_bytes, err);
    if (rc == MR_OK) rc = join_inputs(steps, &joins, &n_joins, err);
    if (rc == MR_OK) rc = mr_source_open(input->str, MR_SRC_AUTO, NULL, &io.src, err);
    /* The input schema comes from its first batch (an empty input has none). */
    if (rc == MR_OK) rc = mr_source_next(io.src, ctx->smoke ? MR__SMOKE_ROWS : 0, &first, err);
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
        mr_transform_stats st;
        memset(&st, 0, sizeof(st));
        rc = mr_transform_run(x, xf_source, &io, joins, n_joins, xf_sink, &io, &to, &st, err);
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

/* The join steps' `with:` values: files in the workspace are inputs of the
 * stage (the engine hashes them into its key), ${stages.X} upstreams. */
static size_t transform_inputs(const mr_value *def, const mr_value **paths, size_t max)
{
    const mr_value *steps = mr_value_get(def, "steps");
    size_t n = 0;
    for (size_t k = 0; steps && steps->kind == MR_V_SEQ && k < steps->n; k++) {
        const mr_value *with = mr_value_get(mr_value_get(steps->items[k], "join"), "with");
        if (!with || with->kind != MR_V_STR) continue;
        if (n < max) paths[n] = with;
        n++;
    }
    return n;
}

const mr_op mr_op_transform = {
    .name = "transform",
    .version = 3, /* 2: outputs keep their columns' kinds (int widths, decimals, binary, naive timestamps);
                     3: dataset row groups also end at 128 MiB of values */
    .params = transform_params,
    .outputs = NULL,
    .run = run_transform,
    .outputs_of = NULL,
    .validate = validate_transform,
    .inputs_of = transform_inputs,
};
