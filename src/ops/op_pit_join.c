/* The pit_join op: a training set with each feature view's values as of
 * each row's timestamp (include/millrace/pit.h, docs/featurestore.md). */
#include "millrace/dataset.h"
#include "millrace/io.h"
#include "millrace/op.h"
#include "millrace/pit.h"
#include "ops_int.h"

#include <stdio.h>
#include <string.h>

static const mr_param_def pit_params[] = {
    {"entities", MR_PT_STR | MR_PT_PATH, 1, "the entity rows (keys, a timestamp, labels): ${stages.X} or a data file"},
    {"keys", MR_PT_STRSEQ, 1, "the entity key columns"},
    {"timestamp", MR_PT_STR, 1, "the entity rows' timestamp column: features as of this time"},
    {"views", MR_PT_SEQ, 1, "feature views (names of top-level feature_views, or: {name, source, timestamp, features, keys, created, ttl, prefix} each)"},
    {"service", MR_PT_STR, 0, "a top-level feature_services entry: its views, instead of views"},
    {NULL, 0, 0, NULL},
};

static const char *const view_keys[] = {"name", "source", "keys", "timestamp", "created", "ttl", "features", "prefix"};
#define N_VIEW_KEYS (sizeof(view_keys) / sizeof(view_keys[0]))

static mr_status at_value(mr_error *err, const mr_value *v, const char *key, mr_status code, const char *fmt,
                          const char *a, const char *b)
{
    mr_status rc = mr_error_set_at(err, NULL, v ? v->line : 0, v ? v->col : 0, code, fmt, a, b);
    mr_error_key(err, key);
    return rc;
}

/* A view's ttl in microseconds (0: none): an int of seconds or a duration. */
static mr_status view_ttl(const mr_value *ttl, const char *view, int64_t *us, mr_error *err)
{
    *us = 0;
    if (!ttl || mr_op_value_deferred(ttl)) return MR_OK;
    if (ttl->kind == MR_V_INT && ttl->u.i > 0 && ttl->u.i <= INT64_MAX / MR_PIT_SECOND_US) {
        *us = ttl->u.i * MR_PIT_SECOND_US;
        return MR_OK;
    }
    if (ttl->kind == MR_V_STR && mr_pit_parse_duration(ttl->str, us) == MR_OK && *us > 0) return MR_OK;
    mr_status rc = at_value(err, ttl, "ttl", MR_E_SCHEMA,
                            "view '%s': ttl: expected a duration such as 30d, 12h, 90m or 1d12h (or seconds), got %s",
                            view, ttl->kind == MR_V_STR ? ttl->str : "a non-positive or non-text value");
    mr_error_hint(err, "units: w (weeks), d, h, m (minutes), s; no ttl: leave the key out");
    return rc;
}

static int str_or_strseq(const mr_value *v)
{
    if (!v) return 0;
    if (v->kind == MR_V_STR) return 1;
    if (v->kind != MR_V_SEQ || v->n == 0) return 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->kind != MR_V_STR) return 0;
    return 1;
}

/* One view's definition: its keys known, its required ones present, its
 * values of the right shape. name: the view's name, as messages use it. */
static mr_status check_view(const mr_value *v, size_t i, size_t n_keys, char *name, size_t name_len, mr_error *err)
{
    snprintf(name, name_len, "view %zu", i + 1);
    if (v->kind != MR_V_MAP)
        return at_value(err, v, "views", MR_E_SCHEMA, "views: item %s is not a mapping %s", name + 5,
                        "({name, source, timestamp, features, ...})");
    const mr_value *nm = mr_value_get(v, "name");
    if (nm && nm->kind == MR_V_STR && nm->str[0]) snprintf(name, name_len, "%s", nm->str);
    char what[200];
    snprintf(what, sizeof(what), "view '%s'", name);
    mr_status rc = mr__check_keys(v, what, view_keys, N_VIEW_KEYS, err);
    if (rc != MR_OK) return rc;
    static const char *const required[] = {"source", "timestamp", "features"};
    for (size_t r = 0; r < 3; r++)
        if (!mr_value_get(v, required[r])) {
            rc = at_value(err, v, required[r], MR_E_SCHEMA, "view '%s' has no '%s'", name, required[r]);
            mr_error_hint(err, "a view needs source (the data), timestamp (its event time column) and features");
            return rc;
        }
    static const char *const texts[] = {"name", "source", "timestamp", "created", "prefix"};
    for (size_t t = 0; t < 5; t++) {
        const mr_value *x = mr_value_get(v, texts[t]);
        if (x && x->kind != MR_V_STR)
            return at_value(err, x, texts[t], MR_E_SCHEMA, "view '%s': %s must be a string", name, texts[t]);
    }
    const mr_value *feats = mr_value_get(v, "features"), *keys = mr_value_get(v, "keys");
    if (!str_or_strseq(feats))
        return at_value(err, feats, "features", MR_E_SCHEMA, "view '%s': features must be a %s", name,
                        "column name or a non-empty list of them");
    if (keys) {
        if (!str_or_strseq(keys))
            return at_value(err, keys, "keys", MR_E_SCHEMA, "view '%s': keys must be a %s", name,
                            "column name or a non-empty list of them");
        size_t nk = keys->kind == MR_V_STR ? 1 : keys->n;
        if (nk != n_keys) {
            char msg[64];
            snprintf(msg, sizeof(msg), "%zu key columns, the entities %zu", nk, n_keys);
            return at_value(err, keys, "keys", MR_E_SCHEMA, "view '%s' names %s (matched in order)", name, msg);
        }
    }
    int64_t us;
    return view_ttl(mr_value_get(v, "ttl"), name, &us, err);
}

static mr_status check_views(const mr_value *def, mr_error *err)
{
    const mr_value *views = mr_value_get(def, "views"), *keys = mr_value_get(def, "keys");
    size_t n_keys = keys && keys->kind == MR_V_SEQ ? keys->n : 1;
    if (keys && keys->kind == MR_V_SEQ && keys->n == 0)
        return at_value(err, keys, "keys", MR_E_SCHEMA, "keys: expected %s%s", "at least one entity key column", "");
    if (!views || views->kind != MR_V_SEQ || views->n == 0)
        return at_value(err, views, "views", MR_E_SCHEMA, "views: expected %s%s", "a non-empty list of feature views",
                        "");
    char name[128], other[128];
    for (size_t i = 0; i < views->n; i++) {
        mr_status rc = check_view(views->items[i], i, n_keys, name, sizeof(name), err);
        if (rc != MR_OK) return rc;
        for (size_t q = 0; q < i; q++) {
            mr_error scratch;
            mr_error_init(&scratch);
            (void)check_view(views->items[q], q, n_keys, other, sizeof(other), &scratch);
            if (!strcmp(name, other))
                return at_value(err, views->items[i], "name", MR_E_SCHEMA, "views: two views are named '%s'%s", name,
                                "");
        }
    }
    return MR_OK;
}

static mr_status validate_pit(const mr_op_validate_ctx *vc, mr_error *err) { return check_views(vc->def, err); }

mr_status mr__views_check(const mr_value *def, mr_error *err) { return check_views(def, err); }

/* The whole of a view's source (a value from before the first entity row
 * still counts), with only the columns the join reads: keys, times and
 * features, each once. */
mr_status mr__view_read(const char *src, const mr_pit_view *pv, size_t n_keys, mr_table **out, mr_error *err)
{
    *out = NULL;
    mr_table *t = NULL;
    mr_status rc = mr_table_read_file(src, &t, err);
    if (rc != MR_OK) {
        mr_error_at(err, src, 0, 0);
        return rc;
    }
    size_t cap = n_keys + 2 + pv->n_features, n = 0;
    const char **names = mr_malloc(cap * sizeof(*names));
    if (!names) {
        mr_table_free(t);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    int all = 1; /* every named column is there (else the join names what is not) */
    for (size_t i = 0; i < cap; i++) {
        const char *c = i < n_keys ? pv->keys[i] : i == n_keys ? pv->ts : i == n_keys + 1 ? pv->created
                                                                                           : pv->features[i - n_keys - 2];
        if (!c) continue;
        if (!mr_table_column(t, c)) all = 0;
        int seen = 0;
        for (size_t q = 0; q < n && !seen; q++) seen = !strcmp(names[q], c);
        if (!seen) names[n++] = c;
    }
    if (all && n < t->n_cols) rc = mr_table_project(t, names, n, err);
    mr_free(names);
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

void mr__views_free(mr__views *vw)
{
    for (size_t i = 0; i < vw->n; i++) {
        if (vw->keys) mr_free(vw->keys[i]);
        if (vw->feats) mr_free(vw->feats[i]);
        if (vw->tables) mr_table_free(vw->tables[i]);
    }
    mr_free(vw->pv);
    mr_free(vw->keys);
    mr_free(vw->feats);
    mr_free(vw->names);
    mr_free(vw->tables);
    mr_free(vw->missing);
    mr_free(vw->rows);
    mr_free(vw->sources);
    memset(vw, 0, sizeof(*vw));
}

mr_status mr__views_load(const mr_value *def, const char *const *keys, size_t n_keys, int read, mr__views *vw,
                         mr_error *err)
{
    memset(vw, 0, sizeof(*vw));
    const mr_value *views = mr_value_get(def, "views");
    mr_status rc = check_views(def, err);
    if (rc != MR_OK) return rc;
    size_t n = views->n;
    vw->pv = mr_calloc(n, sizeof(*vw->pv));
    vw->keys = mr_calloc(n, sizeof(*vw->keys));
    vw->feats = mr_calloc(n, sizeof(*vw->feats));
    vw->names = mr_calloc(n, sizeof(*vw->names));
    vw->tables = mr_calloc(n, sizeof(*vw->tables));
    vw->missing = mr_calloc(n, sizeof(*vw->missing));
    vw->rows = mr_calloc(n, sizeof(*vw->rows));
    vw->sources = mr_calloc(n, sizeof(*vw->sources));
    if (!vw->pv || !vw->keys || !vw->feats || !vw->names || !vw->tables || !vw->missing || !vw->rows || !vw->sources) {
        mr__views_free(vw);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    vw->n = n;
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        const mr_value *v = views->items[i];
        mr_error scratch;
        mr_error_init(&scratch);
        (void)check_view(v, i, n_keys, vw->names[i], sizeof(vw->names[i]), &scratch);
        size_t nk = 0, nf = 0;
        vw->keys[i] = mr_value_get(v, "keys") ? mr__strings_of(v, "keys", &nk) : NULL;
        vw->feats[i] = mr__strings_of(v, "features", &nf);
        if ((mr_value_get(v, "keys") && !vw->keys[i]) || !vw->feats[i]) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        const char *src = mr_value_get(v, "source")->str;
        vw->pv[i] = (mr_pit_view){.name = vw->names[i], .keys = vw->keys[i] ? vw->keys[i] : keys,
                                  .ts = mr__opt_str(v, "timestamp", NULL), .created = mr__opt_str(v, "created", NULL),
                                  .features = vw->feats[i], .n_features = nf, .prefix = mr__opt_str(v, "prefix", NULL)};
        vw->sources[i] = src;
        rc = view_ttl(mr_value_get(v, "ttl"), vw->names[i], &vw->pv[i].ttl_us, err);
        if (rc == MR_OK && read) rc = mr__view_read(src, &vw->pv[i], n_keys, &vw->tables[i], err);
        vw->pv[i].table = vw->tables[i];
    }
    if (rc != MR_OK) mr__views_free(vw);
    return rc;
}

typedef struct pit_loader {
    const mr__views *vw;
    size_t n_keys;
} pit_loader;

static mr_status load_view(void *arg, size_t v, mr_table **out, mr_error *err)
{
    const pit_loader *l = arg;
    return mr__view_read(l->vw->sources[v], &l->vw->pv[v], l->n_keys, out, err);
}

static mr_status run_pit(mr_op_ctx *ctx, mr_error *err)
{
    size_t n_keys = 0;
    const char **keys = mr__strings_of(ctx->def, "keys", &n_keys);
    mr__views vw;
    memset(&vw, 0, sizeof(vw));
    mr_table *entities = NULL;
    mr_status rc = keys ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    const char *epath = mr_value_get(ctx->def, "entities")->str;
    if (rc == MR_OK) rc = mr__views_load(ctx->def, keys, n_keys, 0, &vw, err);
    if (rc == MR_OK) {
        rc = mr__read_input(ctx, epath, &entities, err);
        if (rc != MR_OK) mr_error_at(err, epath, 0, 0);
    }
    /* each view read by a worker when its turn comes, and freed after it is
     * joined; with resources.mem, joined columns wait in the stage's scratch
     * directory and the output is written in batches (docs/featurestore.md) */
    pit_loader loader = {&vw, n_keys};
    mr_dataset_write_opts wo;
    mr_dataset_write_opts_init(&wo);
    /* a view whose source is a dataset (a feature_view stage's, sorted) is streamed under a limit */
    char **dsets = rc == MR_OK ? mr_calloc(vw.n ? vw.n : 1, sizeof(*dsets)) : NULL;
    if (rc == MR_OK && !dsets) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t v = 0; rc == MR_OK && v < vw.n; v++) {
        char *m = mr_path_join(vw.sources[v], MR_DATASET_MANIFEST);
        if (!m) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else if (mr_fs_exists(m)) dsets[v] = (char *)vw.sources[v];
        mr_free(m);
    }
    mr_pit_write_opts po = {.threads = ctx->threads > 1 ? ctx->threads : 1, .mem_bytes = ctx->mem_bytes,
                            .tmp_dir = ctx->tmp_dir, .load = load_view, .load_arg = &loader, .write = &wo,
                            .streams = (const char *const *)dsets};
    mr_pit_write_stats st = {.missing = vw.missing, .view_rows = vw.rows};
    if (rc == MR_OK)
        rc = mr_pit_join_write(entities, keys, n_keys, mr__opt_str(ctx->def, "timestamp", NULL), vw.pv, vw.n, &po,
                               ctx->outputs[0].path, &st, err);
    if (rc == MR_OK) {
        dprintf(ctx->log_fd, "pit_join: %llu rows, %zu columns\n", (unsigned long long)st.rows, st.cols);
        if (ctx->mem_bytes)
            dprintf(ctx->log_fd,
                    "pit_join: %zu of %zu views through the scratch directory, batches of %zu rows, %d view%s at a "
                    "time\n", st.spilled, vw.n, st.batch_rows, st.lanes, st.lanes == 1 ? "" : "s");
        if (ctx->mem_bytes && (st.streamed || st.unsorted))
            dprintf(ctx->log_fd, "pit_join: %zu of %zu views streamed from their sorted datasets%s\n", st.streamed, vw.n,
                    st.unsorted ? " (a dataset not in the join's order was read whole)" : "");
        mr_op_metric(ctx, "rows", 0, (double)st.rows);
        for (size_t i = 0; i < vw.n; i++) {
            dprintf(ctx->log_fd, "pit_join: view '%s': %llu rows, %llu entity rows without a value\n", vw.names[i],
                    (unsigned long long)vw.rows[i], (unsigned long long)vw.missing[i]);
            char metric[160];
            snprintf(metric, sizeof(metric), "missing.%s", vw.names[i]);
            mr_op_metric(ctx, metric, 0, (double)vw.missing[i]);
        }
    }
    mr_free(dsets);
    mr__views_free(&vw);
    mr_free(keys);
    mr_table_free(entities);
    return rc;
}

/* The views' sources: inputs of the stage (hashed into its key). */
size_t mr__views_inputs(const mr_value *def, const mr_value **paths, size_t max)
{
    const mr_value *views = mr_value_get(def, "views");
    size_t n = 0;
    for (size_t i = 0; views && views->kind == MR_V_SEQ && i < views->n; i++) {
        const mr_value *src = mr_value_get(views->items[i], "source");
        if (!src || src->kind != MR_V_STR) continue;
        if (n < max) paths[n] = src;
        n++;
    }
    return n;
}

const mr_op mr_op_pit_join = {
    .name = "pit_join",
    .version = 1,
    .params = pit_params,
    .outputs = NULL,
    .run = run_pit,
    .validate = validate_pit,
    .inputs_of = mr__views_inputs,
};
