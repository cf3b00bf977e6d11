/* The feature_view op: a feature view materialised once, as a dataset sorted
 * the way point-in-time joins read it (keys, event time, created time, row),
 * with its features computed from their expressions; updated incrementally
 * when its source only grew (docs/featurestore.md, "Feature views as
 * stages"). The spec makes one such stage of every top-level feature view.
 *
 * The watermark. After a build the op records, in the run store's stage
 * cache under a key of its definition (not of the source's content), how
 * many source rows it read, a hash of those rows' columns that it uses, and
 * its own stage key. The next build whose source starts with exactly those
 * rows takes the previous output (the result cached under that stage key,
 * re-hashed), computes the features of the new rows only, sorts them, and
 * merges the two sorted runs. The rows so far keep their order and come
 * first on ties, as they do in a full build, so the output is the same,
 * byte for byte, as a build from scratch; a changed past row, a source
 * that shrank or a previous output that is gone makes a full build. */
#include "millrace/dataset.h"
#include "millrace/expr.h"
#include "millrace/io.h"
#include "millrace/op.h"
#include "millrace/pit.h"
#include "ops_int.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#define FV_VERSION 1

static const mr_param_def fv_params[] = {
    {"source", MR_PT_STR | MR_PT_PATH, 1, "the view's rows: ${stages.X} or a data file or dataset"},
    {"keys", MR_PT_STRSEQ, 1, "the entity key column(s) of the source"},
    {"timestamp", MR_PT_STR, 1, "the event timestamp column"},
    {"created", MR_PT_STR, 0, "a created timestamp column: among rows of one event time, the latest created wins"},
    {"features", MR_PT_SEQ | MR_PT_STRSEQ, 1, "the feature columns: names, or {name: expression} computed per row"},
    {NULL, 0, 0, NULL},
};

/* One feature: a source column, or an expression's result named name. */
typedef struct fv_feature {
    const char *name;
    const mr_value *expr; /* NULL: the column name itself */
} fv_feature;

static mr_status at(mr_error *err, const mr_value *v, const char *key, const char *fmt, const char *a, const char *b)
{
    mr_status rc = mr_error_set_at(err, NULL, v ? v->line : 0, v ? v->col : 0, MR_E_SCHEMA, fmt, a, b);
    mr_error_key(err, key);
    return rc;
}

/* The features of def, checked: each a non-empty name or a one-entry
 * mapping of a name to an expression that parses; no two of one name, none
 * named as a key or time column. *out: caller frees (names borrowed). */
static mr_status features_of(const mr_value *def, fv_feature **out, size_t *n_out, mr_error *err)
{
    *out = NULL;
    *n_out = 0;
    const mr_value *f = mr_value_get(def, "features");
    if (!f || (f->kind != MR_V_STR && (f->kind != MR_V_SEQ || !f->n)))
        return at(err, f, "features", "features: expected %s%s", "a column name or a non-empty list of names and {name: expression}", "");
    size_t n = f->kind == MR_V_STR ? 1 : f->n;
    fv_feature *fs = mr_calloc(n, sizeof(*fs));
    if (!fs) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n_keys = 0;
    const char **keys = mr__strings_of(def, "keys", &n_keys);
    mr_status rc = keys ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        const mr_value *it = f->kind == MR_V_STR ? f : f->items[i];
        if (it->kind == MR_V_STR && it->str[0]) {
            fs[i].name = it->str;
        } else if (it->kind == MR_V_MAP && it->n == 1 && it->keys[0][0] && it->items[0]->kind == MR_V_STR) {
            fs[i].name = it->keys[0];
            fs[i].expr = it->items[0];
            mr_expr *e = NULL;
            mr_error pe;
            mr_error_init(&pe);
            char label[160];
            snprintf(label, sizeof(label), "feature '%s'", fs[i].name);
            if (!mr_op_value_deferred(fs[i].expr) &&
                mr_expr_parse(fs[i].expr->str, strlen(fs[i].expr->str), label, &e, &pe) != MR_OK) {
                rc = at(err, fs[i].expr, "features", "%s%s", pe.msg, "");
                if (pe.hint[0]) mr_error_hint(err, "%s", pe.hint);
            }
            mr_expr_free(e);
            if (rc == MR_OK) {
                const char *roles[3] = {mr__opt_str(def, "timestamp", NULL), mr__opt_str(def, "created", NULL), NULL};
                for (size_t k = 0; rc == MR_OK && k < n_keys + 2; k++) {
                    const char *c = k < n_keys ? keys[k] : roles[k - n_keys];
                    if (c && !strcmp(c, fs[i].name))
                        rc = at(err, it, "features", "feature '%s' is computed, and the source's %s column has its name",
                                fs[i].name, k < n_keys ? "key" : "time");
                }
            }
        } else {
            rc = at(err, it, "features", "features: item %s is %s", "", "neither a column name nor a {name: expression}");
            mr_error_hint(err, "features: [clicks, {ctr: \"clicks / views\"}]");
        }
        for (size_t q = 0; rc == MR_OK && q < i; q++)
            if (!strcmp(fs[q].name, fs[i].name)) rc = at(err, it, "features", "features: two are named '%s'%s", fs[i].name, "");
    }
    mr_free(keys);
    if (rc != MR_OK) {
        mr_free(fs);
        return rc;
    }
    *out = fs;
    *n_out = n;
    return MR_OK;
}

static mr_status validate_fv(const mr_op_validate_ctx *vc, mr_error *err)
{
    fv_feature *fs = NULL;
    size_t n = 0;
    mr_status rc = features_of(vc->def, &fs, &n, err);
    mr_free(fs);
    return rc;
}

/* ---- the rows the view reads ---------------------------------------------------- */

/* The source columns the view reads, each once: keys, times, plain features, the expressions' columns. */
static mr_status used_columns(const char *const *keys, size_t n_keys, const char *ts, const char *created,
                              const fv_feature *fs, size_t n_fs, mr_expr **exprs, const char ***out, size_t *n_out,
                              mr_error *err)
{
    size_t cap = n_keys + 2 + n_fs;
    for (size_t i = 0; i < n_fs; i++) {
        size_t m = 0;
        if (exprs[i]) (void)mr_expr_columns(exprs[i], &m);
        cap += m;
    }
    const char **names = mr_malloc(cap * sizeof(*names));
    if (!names) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n = 0;
#define ADD(c)                                                                                                         \
    do {                                                                                                               \
        const char *c_ = (c);                                                                                          \
        int seen_ = !c_;                                                                                               \
        for (size_t q_ = 0; q_ < n && !seen_; q_++) seen_ = !strcmp(names[q_], c_);                                    \
        if (!seen_) names[n++] = c_;                                                                                   \
    } while (0)
    for (size_t k = 0; k < n_keys; k++) ADD(keys[k]);
    ADD(ts);
    ADD(created);
    for (size_t i = 0; i < n_fs; i++) {
        if (!exprs[i]) {
            ADD(fs[i].name);
            continue;
        }
        size_t m = 0;
        const char *const *cols = mr_expr_columns(exprs[i], &m);
        for (size_t j = 0; j < m; j++) ADD(cols[j]);
    }
#undef ADD
    *out = names;
    *n_out = n;
    return MR_OK;
}

/* Hashes rows [0, n) of t's columns: name, type, kind, then each row's
 * validity and (when valid) value, so that the first n rows of a grown
 * table hash as the whole of the table they grew from. */
static void hash_prefix(const mr_table *t, size_t n, char hex[MR_HASH_HEX_LEN + 1], mr_hasher *h)
{
    mr_hasher_reset(h);
    uint64_t nn = n;
    mr_hasher_update(h, &nn, sizeof(nn));
    for (size_t c = 0; c < t->n_cols; c++) {
        const mr_column *col = t->cols[c];
        mr_hasher_update(h, col->name, strlen(col->name) + 1);
        uint8_t tk[5] = {(uint8_t)col->type, col->kind.int_bits, col->kind.flags, col->kind.precision, col->kind.scale};
        mr_hasher_update(h, tk, sizeof(tk));
        size_t w = mr_dtype_width(col->type);
        for (size_t r = 0; r < n; r++) {
            uint8_t valid = !mr_column_is_null(col, r);
            mr_hasher_update(h, &valid, 1);
            if (!valid) continue;
            if (col->type == MR_T_STRING) {
                size_t len;
                const char *s = mr_column_str(col, r, &len);
                uint64_t l = len;
                mr_hasher_update(h, &l, sizeof(l));
                mr_hasher_update(h, s, len);
            } else if (w) {
                mr_hasher_update(h, (const char *)col->data + r * w, w);
            }
        }
    }
    mr_hash_hex(mr_hasher_digest(h), hex);
}

/* The view's columns for source rows src (keys, times, features), sorted;
 * strings plain, so that the bytes written never depend on how they were held. */
static mr_status build_part(const mr_table *src, const char *const *keys, size_t n_keys, const char *ts,
                            const char *created, const fv_feature *fs, size_t n_fs, mr_expr **exprs, mr_table **out,
                            mr_error *err)
{
    *out = NULL;
    const char *fixed[2] = {ts, created};
    mr_status rc = MR_OK;
    /* the plain columns are there (named, with a did-you-mean, before anything is computed) */
    for (size_t k = 0; rc == MR_OK && k < n_keys + 2 + n_fs; k++) {
        const char *name = k < n_keys ? keys[k] : k < n_keys + 2 ? fixed[k - n_keys] : fs[k - n_keys - 2].name;
        if (!name || (k >= n_keys + 2 && exprs[k - n_keys - 2]) || mr_table_column(src, name)) continue;
        rc = MR_ERR(err, MR_E_NOT_FOUND, "the source has no column '%s' (%s)", name,
                    k < n_keys ? "a key" : k < n_keys + 2 ? "a timestamp" : "a feature");
        const char **names = mr_malloc((src->n_cols ? src->n_cols : 1) * sizeof(*names));
        for (size_t i = 0; names && i < src->n_cols; i++) names[i] = src->cols[i]->name;
        const char *near = names ? mr_closest(name, names, src->n_cols) : NULL;
        if (near) mr_error_hint(err, "did you mean '%s'?", near);
        mr_free(names);
    }
    /* the rows in the join's order, then each column taken in that order once */
    uint32_t *order = NULL;
    size_t n_order = 0;
    mr_table *v = NULL;
    if (rc == MR_OK) rc = mr_pit_view_order(src, keys, n_keys, ts, created, &order, &n_order, err);
    if (rc == MR_OK) rc = mr_table_new(&v, err);
    for (size_t k = 0; rc == MR_OK && k < n_keys + 2 + n_fs; k++) {
        const char *name = k < n_keys ? keys[k] : k < n_keys + 2 ? fixed[k - n_keys] : fs[k - n_keys - 2].name;
        mr_expr *e = k >= n_keys + 2 ? exprs[k - n_keys - 2] : NULL;
        if (!name || (!e && mr_table_column(v, name))) continue; /* no created time; a plain feature also a key */
        mr_column *computed = NULL, *col = NULL;
        if (e) {
            rc = mr_expr_bind_table(e, src, 0, err);
            if (rc == MR_OK) rc = mr_expr_eval(e, src, &computed, err);
            if (rc != MR_OK) mr_error_key(err, name);
        }
        if (rc == MR_OK) rc = mr_column_take(e ? computed : mr_table_column(src, name), order, n_order, &col, err);
        mr_column_free(computed);
        if (rc == MR_OK) rc = mr_column_materialize(col, err);
        if (rc == MR_OK && e) {
            char *nm = mr_strdup(name);
            if (!nm) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            else {
                mr_free(col->name);
                col->name = nm;
            }
        }
        if (rc == MR_OK) rc = mr_table_add_column(v, col, err); /* owns col either way */
        else mr_column_free(col);
    }
    if (rc == MR_OK) v->n_rows = n_order;
    mr_free(order);
    if (rc != MR_OK) {
        mr_table_free(v);
        return rc;
    }
    *out = v;
    return MR_OK;
}

/* 1 if a and b have the same columns: names, types and kinds, in order. */
static int same_schema(const mr_table *a, const mr_table *b)
{
    if (a->n_cols != b->n_cols) return 0;
    for (size_t c = 0; c < a->n_cols; c++)
        if (strcmp(a->cols[c]->name, b->cols[c]->name) || a->cols[c]->type != b->cols[c]->type ||
            memcmp(&a->cols[c]->kind, &b->cols[c]->kind, sizeof(mr_colkind)))
            return 0;
    return 1;
}

/* ---- the watermark ---------------------------------------------------------------- */

/* The watermark's key: the op, the stage and its definition with the
 * source named as the workspace knows it (not its private checkout). */
static char *watermark_key(const mr_op_ctx *ctx, char **doc_out)
{
    *doc_out = NULL;
    mr_value *d = mr_value_clone(ctx->def);
    const char *src = mr__opt_str(ctx->def, "source", "");
    const char *name = src;
    for (size_t i = 0; i < ctx->n_inputs; i++)
        if (ctx->inputs[i].path && !strcmp(ctx->inputs[i].path, src)) name = ctx->inputs[i].name;
    mr_buf b;
    mr_buf_init(&b);
    int ok = d && mr_value_map_set(d, "source", mr_value_new_str(name)) == MR_OK &&
             mr_value_map_set(d, "resources", mr_value_new(MR_V_MAP)) == MR_OK && /* not the output's business */
             mr_buf_printf(&b, "{\"op\":\"feature_view\",\"version\":%d,\"stage\":", FV_VERSION) == MR_OK &&
             mr_buf_json_str(&b, ctx->stage) == MR_OK && mr_buf_puts(&b, ",\"def\":") == MR_OK &&
             mr_value_to_json(d, 1, &b) == MR_OK && mr_buf_puts(&b, "}") == MR_OK;
    mr_value_free(d);
    if (!ok) {
        mr_buf_free(&b);
        return NULL;
    }
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(mr_hash_bytes(b.data, b.len), hex);
    *doc_out = b.data; /* the caller's */
    return mr_asprintf("fv-%s", hex);
}

/* The previous build, if the source only grew since: its output table (*old) and source rows (*from). */
static mr_status previous_build(mr_op_ctx *ctx, const char *wm_key, const mr_table *src, mr_hasher *h, mr_table **old,
                                size_t *from, mr_error *err)
{
    *old = NULL;
    *from = 0;
    char *res = NULL;
    if (mr_op_cache_get(ctx, wm_key, &res, NULL) != MR_OK || !res) {
        dprintf(ctx->log_fd, "feature_view: no watermark: built from all %zu source rows\n", src->n_rows);
        return MR_OK;
    }
    json_t *j = json_loads(res, 0, NULL);
    mr_free(res);
    json_int_t rows = json_integer_value(json_object_get(j, "rows"));
    const char *prefix = json_string_value(json_object_get(j, "prefix"));
    const char *key = json_string_value(json_object_get(j, "key"));
    char hex[MR_HASH_HEX_LEN + 1];
    mr_status rc = MR_OK;
    const char *why = NULL;
    if (!prefix || !key || rows < 0) why = "an unreadable watermark";
    else if ((size_t)rows > src->n_rows) why = "the source has fewer rows than the watermark";
    else {
        hash_prefix(src, (size_t)rows, hex, h);
        if (strcmp(hex, prefix)) why = "a row before the watermark changed";
    }
    char *path = NULL;
    if (!why) {
        mr_error pe;
        mr_error_init(&pe);
        if (mr_op_previous_output(ctx, key, "out", &path, &pe) != MR_OK) why = "the previous output is gone";
    }
    if (!why) {
        rc = mr_table_read_file(path, old, err);
        if (rc != MR_OK) mr_error_at(err, path, 0, 0);
        else *from = (size_t)rows;
    }
    if (why)
        dprintf(ctx->log_fd, "feature_view: built from all %zu source rows: %s (at row %lld)\n", src->n_rows, why,
                (long long)rows);
    mr_free(path);
    json_decref(j);
    return rc;
}

/* ---- the op ------------------------------------------------------------------------ */

typedef struct fv_run {
    const char **keys, **used;
    size_t n_keys, n_used, n_fs;
    fv_feature *fs;
    mr_expr **exprs;
    mr_table *src, *part, *old, *whole;
    mr_hasher *h;
    char *wm_key, *wm_doc;
} fv_run;

static void fv_free(fv_run *r)
{
    for (size_t i = 0; r->exprs && i < r->n_fs; i++) mr_expr_free(r->exprs[i]);
    mr_free(r->exprs);
    mr_free(r->fs);
    mr_free(r->keys);
    mr_free(r->used);
    mr_table_free(r->src);
    mr_table_free(r->part);
    mr_table_free(r->old);
    mr_table_free(r->whole);
    mr_hasher_free(r->h);
    mr_free(r->wm_key);
    mr_free(r->wm_doc);
}

static mr_status put_watermark(mr_op_ctx *ctx, fv_run *r, size_t out_rows, mr_error *err)
{
    char hex[MR_HASH_HEX_LEN + 1];
    hash_prefix(r->src, r->src->n_rows, hex, r->h);
    json_t *j = json_pack("{sIsssssI}", "rows", (json_int_t)r->src->n_rows, "prefix", hex, "key", ctx->stage_key,
                          "out_rows", (json_int_t)out_rows);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!text) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_op_cache_put(ctx, "watermark", r->wm_key, r->wm_doc, text, err);
    free(text);
    return rc;
}

static mr_status run_fv(mr_op_ctx *ctx, mr_error *err)
{
    fv_run r;
    memset(&r, 0, sizeof(r));
    const char *ts = mr__opt_str(ctx->def, "timestamp", NULL), *created = mr__opt_str(ctx->def, "created", NULL);
    const char *spath = mr__opt_str(ctx->def, "source", "");
    mr_status rc = features_of(ctx->def, &r.fs, &r.n_fs, err);
    if (rc == MR_OK) {
        r.keys = mr__strings_of(ctx->def, "keys", &r.n_keys);
        r.exprs = mr_calloc(r.n_fs ? r.n_fs : 1, sizeof(*r.exprs));
        if (!r.keys || !r.exprs) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; rc == MR_OK && i < r.n_fs; i++)
        if (r.fs[i].expr) rc = mr_expr_parse(r.fs[i].expr->str, strlen(r.fs[i].expr->str), r.fs[i].name, &r.exprs[i], err);
    if (rc == MR_OK) rc = used_columns(r.keys, r.n_keys, ts, created, r.fs, r.n_fs, r.exprs, &r.used, &r.n_used, err);
    if (rc == MR_OK) rc = mr_hasher_new(&r.h, err);
    if (rc == MR_OK) {
        rc = mr__read_input(ctx, spath, &r.src, err);
        if (rc != MR_OK) mr_error_at(err, spath, 0, 0);
    }
    /* only the columns the view reads (all of them when one is missing: the error names it) */
    int all = 1;
    for (size_t i = 0; rc == MR_OK && i < r.n_used; i++) all = all && mr_table_column(r.src, r.used[i]);
    if (rc == MR_OK && all) rc = mr_table_project(r.src, r.used, r.n_used, err);
    int incremental = rc == MR_OK && all && !ctx->smoke && ctx->stage_key;
    if (incremental) {
        r.wm_key = watermark_key(ctx, &r.wm_doc);
        if (!r.wm_key) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    size_t from = 0;
    if (rc == MR_OK && incremental) rc = previous_build(ctx, r.wm_key, r.src, r.h, &r.old, &from, err);
    mr_table *rows = NULL; /* the new rows (all of them: the source itself) */
    if (rc == MR_OK && from) rc = mr_table_slice(r.src, from, r.src->n_rows, &rows, err);
    if (rc == MR_OK) {
        rc = build_part(from ? rows : r.src, r.keys, r.n_keys, ts, created, r.fs, r.n_fs, r.exprs, &r.part, err);
        if (rc != MR_OK) mr_error_at(err, spath, 0, 0);
    }
    mr_table_free(rows);
    const mr_table *out = r.part;
    if (rc == MR_OK && r.old && !same_schema(r.old, r.part)) {
        /* the new rows' types differ from the previous output's (a CSV column now inferred otherwise): from scratch */
        dprintf(ctx->log_fd, "feature_view: built from all %zu source rows: the columns' types changed\n",
                r.src->n_rows);
        mr_table_free(r.old);
        mr_table_free(r.part);
        r.old = r.part = NULL;
        from = 0;
        rc = build_part(r.src, r.keys, r.n_keys, ts, created, r.fs, r.n_fs, r.exprs, &r.part, err);
        out = r.part;
    }
    if (rc == MR_OK && r.old) {
        /* the rows so far, then the new ones: two sorted runs, one merge */
        size_t n_new = r.part->n_rows;
        for (size_t c = 0; rc == MR_OK && c < r.old->n_cols; c++) rc = mr_column_materialize(r.old->cols[c], err);
        if (rc == MR_OK) rc = mr_table_append(r.old, r.part, err);
        uint32_t *order = NULL;
        size_t n_order = 0;
        if (rc == MR_OK) rc = mr_pit_view_order(r.old, r.keys, r.n_keys, ts, created, &order, &n_order, err);
        if (rc == MR_OK) rc = mr_table_take(r.old, order, n_order, &r.whole, err);
        mr_free(order);
        out = r.whole;
        if (rc == MR_OK)
            dprintf(ctx->log_fd, "feature_view: %zu new source rows (from row %zu) merged into the previous %zu\n",
                    r.src->n_rows - from, from, r.whole->n_rows - n_new);
    }
    if (rc == MR_OK) rc = mr__write_dataset(ctx->outputs[0].path, out, err);
    if (rc == MR_OK && incremental) rc = put_watermark(ctx, &r, out->n_rows, err);
    if (rc == MR_OK) {
        dprintf(ctx->log_fd, "feature_view: %zu rows of %zu source rows, %zu features, sorted by keys and time\n",
                out->n_rows, r.src->n_rows, r.n_fs);
        mr_op_metric(ctx, "rows", 0, (double)out->n_rows);
        mr_op_metric(ctx, "new_rows", 0, (double)(r.src->n_rows - from));
    }
    fv_free(&r);
    return rc;
}

const mr_op mr_op_feature_view = {
    .name = "feature_view",
    .version = FV_VERSION,
    .params = fv_params,
    .outputs = NULL,
    .run = run_fv,
    .validate = validate_fv,
};
