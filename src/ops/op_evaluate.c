/* The evaluate op: one prediction pass over the evaluation data writes
 * predictions.parquet (row, id, label, score or class probabilities, and
 * passthrough/slice columns); every metric, interval, curve, slice and error
 * list is then computed from those arrays, never by predicting again.
 * tier fast: a stratified subsample and point metrics only; tier full adds
 * bootstrap intervals, curves, slices and error analysis. Same code path.
 * The optional raw input (the same rows before the features stage) gives
 * slices and error lists the data's own units. Artifacts hold no timing:
 * the same inputs give the same bytes. */
#include "millrace/features.h"
#include "millrace/io.h"
#include "millrace/metrics.h"
#include "millrace/model.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

static const mr_param_def evaluate_params[] = {
    {"model", MR_PT_STR | MR_PT_PATH, 1, "the model: ${stages.TRAIN} (a directory holding model.bin) or a model file"},
    {"data", MR_PT_STR | MR_PT_PATH, 1, "evaluation data: ${stages.X[.OUT]}, a data file or a dataset directory"},
    {"label", MR_PT_STR, 1, "the label column"},
    {"id", MR_PT_STR, 0, "id column copied into the predictions and error lists"},
    {"passthrough", MR_PT_STRSEQ, 0, "columns copied into the predictions artifact"},
    {"features", MR_PT_STR | MR_PT_PATH, 0, "fitted features artifact (an MRFT file, or a features stage's transform output) applied before predicting"},
    {"raw", MR_PT_STR | MR_PT_PATH, 0, "the same rows before the features stage (${stages.split.test}): slices, error lists and passthrough columns show its values"},
    {"tier", MR_PT_STR, 0, "fast (stratified subsample, point metrics) or full (default: + intervals, curves, slices, errors)"},
    {"sample_size", MR_PT_INT, 0, "fast tier: rows in the stratified subsample (default 10000)"},
    {"seed", MR_PT_INT, 0, "fast tier: subsample seed (default 0)"},
    {"bootstrap", MR_PT_MAP, 0, "{n: 200, alpha: 0.05, seed: 0}: percentile bootstrap intervals (full tier; n: 0 = none)"},
    {"slices", MR_PT_MAP, 0, "{categorical: [cols], numeric: [cols], buckets: 4, metric: NAME, min_rows: 10}"},
    {"top_k_wrong", MR_PT_INT, 0, "most confident wrong predictions (regression: worst and best residuals) listed (default 10)"},
    {"threshold", MR_PT_FLOAT, 0, "binary decision threshold (default 0.5)"},
    {"prefix", MR_PT_STR, 0, "prefix of the metrics recorded in the run store (default \"test\": test.auc, ...)"},
    {NULL, 0, 0, NULL},
};

/* Short metric names used in metrics.json, the run store and check gates. */
typedef struct metric_name {
    const char *name;
    mr_metric_id id;
} metric_name;
static const metric_name binary_metrics[] = {
    {"auc", MR_METRIC_ROC_AUC},     {"ap", MR_METRIC_AVG_PRECISION}, {"logloss", MR_METRIC_LOGLOSS},
    {"brier", MR_METRIC_BRIER},     {"accuracy", MR_METRIC_ACCURACY}, {"precision", MR_METRIC_PRECISION},
    {"recall", MR_METRIC_RECALL},   {"f1", MR_METRIC_F1},
};
static const metric_name multi_metrics[] = {
    {"accuracy", MR_METRIC_ACCURACY},
    {"macro_f1", MR_METRIC_MACRO_F1},
    {"micro_f1", MR_METRIC_MICRO_F1},
    {"logloss", MR_METRIC_LOGLOSS},
};
static const metric_name reg_metrics[] = {
    {"rmse", MR_METRIC_RMSE}, {"mae", MR_METRIC_MAE}, {"r2", MR_METRIC_R2}, {"mape", MR_METRIC_MAPE}};

typedef struct eval_cfg {
    const char *label, *id, *tier, *prefix;
    int full;
    size_t sample_size, top_k, n_boot, buckets, min_rows;
    uint64_t seed, boot_seed;
    double alpha, threshold;
    const char **pass, **cats, **nums;
    size_t n_pass, n_cats, n_nums;
    const char *slice_metric; /* as written (NULL: the task's default) */
    mr_metric_id slice_id;    /* what it names, when given */
} eval_cfg;

/* JSON number, or null when not finite (JSON has no inf/NaN). */
static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jarr(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, jnum(v[i]));
    return a;
}

static mr_status write_json(const char *dir, const char *name, json_t *j, mr_error *err)
{
    char *path = mr_path_join(dir, name);
    char *t = j ? json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;
    mr_status rc = path && t ? mr_fs_write_atomic(path, t, strlen(t), err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    free(t);
    mr_free(path);
    return rc;
}

/* ---- settings: what the definition says, checked without data ------------
 * eval_settings reads every setting of the definition into an eval_cfg;
 * validate (at load) and run both call it, so what is checked when
 * millrace.yaml is loaded is what the stage runs with. Errors point at the
 * value (line:col) and say what was expected and what was found. */

/* map[key], or NULL when absent, null (the default) or a ${stages.X...}
 * value, known only when the stage runs (at load; at run time none is left). */
static const mr_value *setting(const mr_value *map, const char *key)
{
    const mr_value *v = map && map->kind == MR_V_MAP ? mr_value_get(map, key) : NULL;
    return v && v->kind != MR_V_NULL && !mr_op_value_deferred(v) ? v : NULL;
}

/* "got ..." text of v: a scalar as written, in quotes, else its kind. */
static const char *got_text(const mr_value *v, char *buf, size_t cap)
{
    if (v->kind == MR_V_MAP) return "a mapping";
    if (v->kind == MR_V_SEQ) return "a list";
    if (!v->str) return mr_vkind_name(v->kind);
    snprintf(buf, cap, "\"%s\"", v->str);
    return buf;
}

static mr_status bad_setting(const mr_value *v, const char *what, const char *want, mr_error *err)
{
    char g[96];
    mr_status rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s: expected %s, got %s", what, want,
                               got_text(v, g, sizeof(g)));
    mr_error_key(err, what);
    return rc;
}

/* A number in a range: lo/hi (+-INFINITY: unbounded), open_lo/open_hi
 * exclude the bound, integral asks for a whole number (1e3 is one). dflt
 * when absent. what names the setting ("bootstrap.n"). */
typedef struct num_rule {
    double lo, hi;
    int open_lo, open_hi, integral;
} num_rule;

static mr_status num_setting(const mr_value *map, const char *key, const char *what, double dflt, num_rule r,
                             double *out, mr_error *err)
{
    const mr_value *v = setting(map, key);
    *out = dflt;
    if (!v) return MR_OK;
    double x = v->kind == MR_V_INT ? (double)v->u.i : v->kind == MR_V_FLOAT ? v->u.f : NAN;
    int ok = (v->kind == MR_V_INT || v->kind == MR_V_FLOAT) && isfinite(x);
    ok = ok && (r.open_lo ? x > r.lo : x >= r.lo) && (r.open_hi ? x < r.hi : x <= r.hi);
    ok = ok && (!r.integral || (x == floor(x) && fabs(x) < 9.2e18));
    if (ok) {
        *out = x;
        return MR_OK;
    }
    char want[96];
    int w = snprintf(want, sizeof(want), "%s", r.integral ? "an integer" : "a finite number");
    if (w > 0 && (size_t)w < sizeof(want) && !(isinf(r.lo) && isinf(r.hi))) {
        if (isinf(r.hi)) snprintf(want + w, sizeof(want) - (size_t)w, " %s %g", r.open_lo ? ">" : ">=", r.lo);
        else snprintf(want + w, sizeof(want) - (size_t)w, " in %c%g, %g%c", r.open_lo ? '(' : '[', r.lo, r.hi,
                      r.open_hi ? ')' : ']');
    }
    return bad_setting(v, what, want, err);
}

/* A string setting that names something (a column, a path): not empty. */
static mr_status name_setting(const mr_value *map, const char *key, const char *what, const char *want,
                              const char *dflt, const char **out, mr_error *err)
{
    const mr_value *v = setting(map, key);
    *out = dflt;
    if (!v) return MR_OK;
    if (v->kind != MR_V_STR) return bad_setting(v, what, want, err);
    *out = v->str;
    return mr__check_text(v, what, want, 0, err);
}

/* A column list: a name or a list of names (borrowed; array caller-freed). */
static mr_status columns_setting(const mr_value *map, const char *key, const char *what, const char ***out, size_t *n,
                                 mr_error *err)
{
    const mr_value *v = setting(map, key);
    *out = NULL;
    *n = 0;
    if (v && v->kind != MR_V_STR && v->kind != MR_V_SEQ) return bad_setting(v, what, "a column name or a list of them", err);
    for (size_t k = 0; v && v->kind == MR_V_SEQ && k < v->n; k++)
        if (v->items[k]->kind != MR_V_STR || !v->items[k]->str[0])
            return bad_setting(v->items[k], what, "a column name", err);
    *out = mr__strings_of(map && map->kind == MR_V_MAP ? map : NULL, key, n);
    return *out ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
}

/* The metric names slices.metric takes: the short names metrics.json uses
 * for AUC and AP, then the metrics library's names. */
static mr_status slice_metric_setting(const mr_value *slices, eval_cfg *c, mr_error *err)
{
    const char *name = NULL;
    mr_status rc = name_setting(slices, "metric", "slices.metric", "a metric name", NULL, &name, err);
    if (rc != MR_OK || !name) return rc;
    const char *nm = !strcmp(name, "auc") ? "roc_auc" : !strcmp(name, "ap") ? "average_precision" : name;
    if (mr_metric_by_name(nm, &c->slice_id, NULL) == MR_OK) {
        c->slice_metric = name;
        return MR_OK;
    }
    const char *names[MR_METRIC_COUNT_ + 2] = {"auc", "ap"};
    for (size_t k = 0; k < MR_METRIC_COUNT_; k++) names[k + 2] = mr_metric_name((mr_metric_id)k);
    const mr_value *v = setting(slices, "metric");
    rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "slices.metric: unknown metric '%s'", name);
    mr_error_key(err, "slices.metric");
    mr__hint_choices(err, name, names, MR_METRIC_COUNT_ + 2);
    return rc;
}

/* A metric-name prefix (PREFIX.auc in the run store): letters, digits, '_',
 * '-' and '.', not starting or ending with '.'. */
static int prefix_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || s[0] == '.' || s[n - 1] == '.') return 0;
    for (size_t k = 0; k < n; k++)
        if (!((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') || (s[k] >= '0' && s[k] <= '9') ||
              strchr("_-.", s[k])))
            return 0;
    return 1;
}

static const num_rule ANY_INT = {-INFINITY, INFINITY, 0, 0, 1};

/* Every setting of the definition, typed and in range. c->pass, cats and
 * nums are caller-freed, also on error. */
static mr_status eval_settings(const mr_value *def, eval_cfg *c, mr_error *err)
{
    double v;
    mr_status rc;
    const char *path = NULL;
    memset(c, 0, sizeof(*c));
    static const char *const paths[] = {"model", "data", "features", "raw"};
    for (size_t k = 0; k < 4; k++)
        if ((rc = name_setting(def, paths[k], paths[k], "a path or ${stages.X}", NULL, &path, err)) != MR_OK) return rc;
    /* The same text is the same input, a ${stages.X} reference included. */
    const mr_value *data = mr_value_get(def, "data"), *raw = mr_value_get(def, "raw");
    if (data && raw && data->kind == MR_V_STR && raw->kind == MR_V_STR && !strcmp(data->str, raw->str)) {
        rc = mr_error_set_at(err, NULL, raw->line, raw->col, MR_E_SCHEMA,
                         "raw: '%s' is the data itself; raw is the same rows before the features stage", raw->str);
        mr_error_key(err, "raw");
        mr_error_hint(err, "give the input of the features stage that made data (e.g. raw: ${stages.split.test}), or "
                           "leave raw out");
        return rc;
    }
    if ((rc = name_setting(def, "label", "label", "a column name", NULL, &c->label, err)) != MR_OK) return rc;
    if ((rc = name_setting(def, "id", "id", "a column name", NULL, &c->id, err)) != MR_OK) return rc;
    if ((rc = name_setting(def, "tier", "tier", "fast or full", "full", &c->tier, err)) != MR_OK) return rc;
    if (strcmp(c->tier, "fast") && strcmp(c->tier, "full")) {
        static const char *const tiers[] = {"fast", "full"};
        rc = bad_setting(setting(def, "tier"), "tier", "fast or full", err);
        mr__hint_choices(err, c->tier, tiers, 2);
        return rc;
    }
    c->full = !strcmp(c->tier, "full");
    if ((rc = name_setting(def, "prefix", "prefix", "a metric-name prefix", "test", &c->prefix, err)) != MR_OK) return rc;
    if (!prefix_ok(c->prefix)) {
        rc = bad_setting(setting(def, "prefix"), "prefix", "a metric-name prefix (letters, digits, '_', '-', '.')", err);
        mr_error_hint(err, "metrics are recorded as PREFIX.auc, PREFIX.logloss, ...");
        return rc;
    }
    if ((rc = num_setting(def, "sample_size", "sample_size", 10000, (num_rule){1, INFINITY, 0, 0, 1}, &v, err)) != MR_OK)
        return rc;
    c->sample_size = (size_t)v;
    if ((rc = num_setting(def, "seed", "seed", 0, ANY_INT, &v, err)) != MR_OK) return rc;
    c->seed = (uint64_t)(int64_t)v;
    if ((rc = num_setting(def, "top_k_wrong", "top_k_wrong", 10, (num_rule){0, 10000, 0, 0, 1}, &v, err)) != MR_OK)
        return rc;
    c->top_k = (size_t)v;
    if ((rc = num_setting(def, "threshold", "threshold", 0.5, (num_rule){0, 1, 0, 0, 0}, &c->threshold, err)) != MR_OK)
        return rc;
    const mr_value *b = setting(def, "bootstrap");
    static const char *const bkeys[] = {"n", "alpha", "seed"};
    if ((rc = mr__check_keys(b, "bootstrap", bkeys, 3, err)) != MR_OK) return rc;
    if ((rc = num_setting(b, "n", "bootstrap.n", 200, (num_rule){0, 100000, 0, 0, 1}, &v, err)) != MR_OK) return rc;
    c->n_boot = (size_t)v;
    if ((rc = num_setting(b, "alpha", "bootstrap.alpha", 0.05, (num_rule){0, 1, 1, 1, 0}, &c->alpha, err)) != MR_OK)
        return rc;
    if ((rc = num_setting(b, "seed", "bootstrap.seed", 0, ANY_INT, &v, err)) != MR_OK) return rc;
    c->boot_seed = (uint64_t)(int64_t)v;
    const mr_value *s = setting(def, "slices");
    static const char *const skeys[] = {"categorical", "numeric", "buckets", "metric", "min_rows"};
    if ((rc = mr__check_keys(s, "slices", skeys, 5, err)) != MR_OK) return rc;
    if ((rc = num_setting(s, "buckets", "slices.buckets", 4, (num_rule){1, 100, 0, 0, 1}, &v, err)) != MR_OK) return rc;
    c->buckets = (size_t)v;
    if ((rc = num_setting(s, "min_rows", "slices.min_rows", 10, (num_rule){0, INFINITY, 0, 0, 1}, &v, err)) != MR_OK)
        return rc;
    c->min_rows = v < 1 ? 1 : (size_t)v;
    if ((rc = slice_metric_setting(s, c, err)) != MR_OK) return rc;
    if ((rc = columns_setting(def, "passthrough", "passthrough", &c->pass, &c->n_pass, err)) != MR_OK) return rc;
    if ((rc = columns_setting(s, "categorical", "slices.categorical", &c->cats, &c->n_cats, err)) != MR_OK) return rc;
    return columns_setting(s, "numeric", "slices.numeric", &c->nums, &c->n_nums, err);
}

static void eval_cfg_free(eval_cfg *c)
{
    mr_free((void *)c->pass);
    mr_free((void *)c->cats);
    mr_free((void *)c->nums);
}

static mr_status validate_evaluate(const mr_op_validate_ctx *vc, mr_error *err)
{
    eval_cfg c;
    mr_status rc = eval_settings(vc->def, &c, err);
    eval_cfg_free(&c);
    return rc;
}

/* A numeric column as doubles (NaN for nulls). */
static mr_status column_doubles(const mr_column *c, double *out, mr_error *err)
{
    for (size_t i = 0; i < c->n; i++) {
        if (mr_column_is_null(c, i)) {
            out[i] = NAN;
            continue;
        }
        switch (c->type) {
        case MR_T_BOOL: out[i] = ((const uint8_t *)c->data)[i]; break;
        case MR_T_INT64: out[i] = (double)((const int64_t *)c->data)[i]; break;
        case MR_T_DECIMAL: out[i] = mr_decimal_to_f64(((const int64_t *)c->data)[i], c->kind.scale); break;
        case MR_T_FLOAT64: out[i] = ((const double *)c->data)[i]; break;
        case MR_T_FLOAT32: out[i] = ((const float *)c->data)[i]; break;
        default: {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "column '%s' must be numeric, got %s", c->name, mr_dtype_name(c->type));
            mr_error_key(err, c->name);
            return rc;
        }
        }
    }
    return MR_OK;
}

static const mr_column *need_column(const mr_table *t, const char *name, const char *role, mr_error *err)
{
    const mr_column *c = mr_table_column(t, name);
    if (c) return c;
    MR_ERR(err, MR_E_NOT_FOUND, "%s column '%s' is not in the evaluation data", role, name);
    mr_error_key(err, name);
    const char **names = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof(*names));
    if (names) {
        for (size_t k = 0; k < t->n_cols; k++) names[k] = t->cols[k]->name;
        const char *best = mr_closest(name, names, t->n_cols);
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
        mr_free(names);
    }
    return NULL;
}

/* Category codes of a column for slicing: distinct values by frequency
 * (most frequent first, ties by text), at most 50; the rest share "(other)". */
typedef struct cat_entry {
    char *text;
    size_t count;
} cat_entry;
static int cmp_text(const void *a, const void *b)
{
    return strcmp(((const cat_entry *)a)->text, ((const cat_entry *)b)->text);
}
static int cmp_count(const void *a, const void *b)
{
    const cat_entry *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->text, y->text);
}
static mr_status category_codes(const mr_column *c, int32_t *codes, char ***names_out, size_t *n_out, mr_error *err)
{
    size_t n = c->n, nd = 0;
    char **txt = mr_calloc(n ? n : 1, sizeof(char *));
    cat_entry *ent = mr_calloc(n ? n : 1, sizeof(cat_entry));
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = txt && ent ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        if (mr_column_is_null(c, i)) continue;
        b.len = 0;
        if ((rc = mr_column_format(c, i, &b)) != MR_OK || !(txt[i] = mr_strdup(b.data ? b.data : ""))) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        ent[nd++] = (cat_entry){txt[i], 1};
    }
    if (rc == MR_OK) {
        qsort(ent, nd, sizeof(*ent), cmp_text);
        size_t u = 0;
        for (size_t i = 0; i < nd; i++) {
            if (u && !strcmp(ent[u - 1].text, ent[i].text)) ent[u - 1].count++;
            else ent[u++] = ent[i];
        }
        qsort(ent, u, sizeof(*ent), cmp_count);
        size_t keep = u > 50 ? 49 : u, n_names = keep + (u > keep);
        char **names = mr_calloc(n_names ? n_names : 1, sizeof(char *));
        if (!names) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; rc == MR_OK && k < n_names; k++)
            if (!(names[k] = mr_strdup(k < keep ? ent[k].text : "(other)"))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; rc == MR_OK && i < n; i++) {
            codes[i] = -1;
            if (!txt[i]) continue;
            codes[i] = (int32_t)keep;
            for (size_t k = 0; k < keep; k++)
                if (!strcmp(names[k], txt[i])) {
                    codes[i] = (int32_t)k;
                    break;
                }
        }
        if (rc == MR_OK) {
            *names_out = names;
            *n_out = n_names;
        } else if (names) {
            for (size_t k = 0; k < n_names; k++) mr_free(names[k]);
            mr_free(names);
        }
    }
    for (size_t i = 0; txt && i < n; i++) mr_free(txt[i]);
    mr_free(txt);
    mr_free(ent);
    mr_buf_free(&b);
    return rc;
}

static json_t *slice_json(const char *column, const mr_slice *s, int regression)
{
    json_t *o = json_object();
    json_object_set_new(o, "column", json_string(column));
    json_object_set_new(o, "label", json_string(s->label));
    json_object_set_new(o, "rows", json_integer((json_int_t)s->n_rows));
    json_object_set_new(o, "defined", json_boolean(s->status == MR_OK));
    json_object_set_new(o, "value", s->status == MR_OK ? jnum(s->ci.point) : json_null());
    json_object_set_new(o, "lo", s->status == MR_OK ? jnum(s->ci.lo) : json_null());
    json_object_set_new(o, "hi", s->status == MR_OK ? jnum(s->ci.hi) : json_null());
    json_object_set_new(o, "flagged", json_boolean(s->flagged));
    if (s->status != MR_OK) json_object_set_new(o, "message", json_string(s->message));
    if (regression) json_object_set_new(o, "residual_quantiles", jarr(s->resid_q, 5));
    return o;
}

/* {name: text} of the model's features for one row: the value in shown
 * (the raw rows) where it has a column of that name, else the model's
 * input value from t. */
static json_t *row_features(const mr_model *m, const mr_table *t, const mr_table *shown, size_t row)
{
    json_t *o = json_object();
    mr_buf b;
    mr_buf_init(&b);
    for (size_t j = 0; j < mr_model_num_features(m); j++) {
        const char *name = mr_model_feature_name(m, j);
        const mr_column *c = shown ? mr_table_column(shown, name) : NULL;
        if (!c) c = mr_table_column(t, name);
        if (!c) continue;
        b.len = 0;
        if (mr_column_format(c, row, &b) == MR_OK) json_object_set_new(o, name, json_string(b.data ? b.data : ""));
    }
    mr_buf_free(&b);
    return o;
}

typedef struct eval_state {
    mr_op_ctx *ctx;
    const eval_cfg *c;
    mr_metric_task task;
    mr_metric_data d;
    size_t K;
    const mr_table *preds; /* the predictions artifact (metrics read from its columns) */
    const mr_table *feat;  /* the table the model read (feature values for error lists) */
    const mr_table *shown; /* the same rows before the features stage (raw values), or NULL */
    const mr_model *model;
    json_t *metrics, *undefined;
    mr_interval slice_overall;
    mr_metric_id slice_id;
} eval_state;

static mr_status compute_metrics(eval_state *s, mr_error *err)
{
    const metric_name *ms = s->task == MR_TASK_BINARY ? binary_metrics : s->task == MR_TASK_MULTICLASS ? multi_metrics : reg_metrics;
    size_t nm = s->task == MR_TASK_BINARY       ? sizeof(binary_metrics) / sizeof(*ms)
                : s->task == MR_TASK_MULTICLASS ? sizeof(multi_metrics) / sizeof(*ms)
                                                : sizeof(reg_metrics) / sizeof(*ms);
    int threads = s->ctx->threads > 1 ? 0 : 1;
    for (size_t k = 0; k < nm; k++) {
        mr_error e;
        mr_error_init(&e);
        mr_interval ci = {NAN, NAN, NAN, 0, 0};
        mr_status rc;
        if (s->c->full && s->c->n_boot)
            rc = mr_bootstrap_metric(ms[k].id, s->c->threshold, &s->d, s->c->n_boot, s->c->alpha, s->c->boot_seed, threads,
                                     &ci, &e);
        else
            rc = mr_metric_eval(ms[k].id, &s->d, s->c->threshold, &ci.point, &e);
        if (rc == MR_E_NOMEM) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc != MR_OK) {
            /* Undefined for this data (one class for AUC): recorded, not fatal. */
            json_object_set_new(s->undefined, ms[k].name, json_string(e.msg));
            dprintf(s->ctx->log_fd, "%s: undefined: %s\n", ms[k].name, e.msg);
            continue;
        }
        json_t *o = json_object();
        json_object_set_new(o, "value", jnum(ci.point));
        json_object_set_new(o, "lo", jnum(ci.lo));
        json_object_set_new(o, "hi", jnum(ci.hi));
        json_object_set_new(o, "higher_is_better", json_boolean(mr_metric_higher_is_better(ms[k].id)));
        json_object_set_new(s->metrics, ms[k].name, o);
        char name[160];
        snprintf(name, sizeof(name), "%s.%s", s->c->prefix, ms[k].name);
        mr_op_metric(s->ctx, name, 0, ci.point);
        if (isnan(ci.lo))
            dprintf(s->ctx->log_fd, "%-10s %.6g\n", ms[k].name, ci.point);
        else
            dprintf(s->ctx->log_fd, "%-10s %.6g  [%.6g, %.6g]\n", ms[k].name, ci.point, ci.lo, ci.hi);
        if (ms[k].id == s->slice_id) s->slice_overall = ci;
    }
    return MR_OK;
}

static json_t *curve_json(const mr_curve *cv, const char *aux_name)
{
    json_t *o = json_object();
    json_object_set_new(o, "x", jarr(cv->x, cv->n));
    json_object_set_new(o, "y", jarr(cv->y, cv->n));
    if (aux_name && cv->aux) json_object_set_new(o, aux_name, jarr(cv->aux, cv->n));
    return o;
}

static mr_status compute_curves(eval_state *s, json_t *curves, mr_error *err)
{
    mr_curve cv = {0};
    mr_status rc = MR_OK;
    mr_error e;
    mr_error_init(&e);
#define CURVE(call, key, aux)                                                       \
    do {                                                                            \
        mr_error_clear(&e);                                                         \
        if ((call) == MR_OK) json_object_set_new(curves, key, curve_json(&cv, aux)); \
        else if (e.code == MR_E_NOMEM) rc = MR_ERR(err, MR_E_NOMEM, "out of memory"); \
        else json_object_set_new(curves, key, json_pack("{s:s}", "undefined", e.msg)); \
        mr_curve_free(&cv);                                                         \
    } while (0)
    if (s->task == MR_TASK_BINARY) {
        CURVE(mr_curve_roc(&s->d, 400, &cv, &e), "roc", "threshold");
        CURVE(mr_curve_pr(&s->d, 400, &cv, &e), "pr", "threshold");
        CURVE(mr_curve_calibration(&s->d, 10, MR_CALIB_UNIFORM, &cv, &e), "calibration", "rows");
        CURVE(mr_curve_gain(&s->d, 10, &cv, &e), "gain", "lift");
    } else if (s->task == MR_TASK_REGRESSION) {
        CURVE(mr_curve_residuals(&s->d, 2000, &cv, &e), "residuals", "row");
    } else {
        /* One-vs-rest ROC per class, from the same probability matrix. */
        size_t n = s->d.n;
        double *yk = mr_malloc(n * sizeof(double)), *pk = mr_malloc(n * sizeof(double));
        json_t *per = json_array();
        if (!yk || !pk || !per) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; rc == MR_OK && k < s->K; k++) {
            for (size_t i = 0; i < n; i++) {
                yk[i] = s->d.y[i] == (double)k;
                pk[i] = s->d.proba[i * s->K + k];
            }
            mr_metric_data dk;
            mr_metric_data_binary(&dk, yk, pk, s->d.w, n);
            mr_error_clear(&e);
            if (mr_curve_roc(&dk, 200, &cv, &e) == MR_OK) json_array_append_new(per, curve_json(&cv, NULL));
            else json_array_append_new(per, json_pack("{s:s}", "undefined", e.msg));
            mr_curve_free(&cv);
        }
        json_object_set_new(curves, "roc_ovr", per);
        mr_free(yk);
        mr_free(pk);
    }
#undef CURVE
    return rc;
}

static mr_status compute_slices(eval_state *s, json_t *sj, mr_error *err)
{
    const eval_cfg *c = s->c;
    size_t n = s->d.n;
    mr_slice_opts o;
    mr_slice_opts_init(&o);
    o.metric = s->slice_id;
    o.threshold = c->threshold;
    o.n_resamples = c->n_boot;
    o.alpha = c->alpha;
    o.seed = c->boot_seed;
    o.threads = s->ctx->threads > 1 ? 0 : 1;
    o.min_rows = c->min_rows;
    json_t *arr = json_array();
    json_object_set_new(sj, "metric", json_string(mr_metric_name(s->slice_id)));
    json_object_set_new(sj, "higher_is_better", json_boolean(mr_metric_higher_is_better(s->slice_id)));
    json_object_set_new(sj, "overall", jnum(s->slice_overall.point));
    json_object_set_new(sj, "slices", arr);
    int32_t *codes = mr_malloc((n ? n : 1) * sizeof(int32_t));
    double *x = mr_malloc((n ? n : 1) * sizeof(double));
    mr_status rc = codes && x ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n_flag = 0;
    for (size_t k = 0; rc == MR_OK && k < c->n_cats + c->n_nums; k++) {
        int cat = k < c->n_cats;
        const char *col = cat ? c->cats[k] : c->nums[k - c->n_cats];
        const mr_column *cc = need_column(s->preds, col, "slice", err);
        mr_slice *sl = NULL;
        size_t n_sl = 0;
        char **names = NULL;
        size_t n_names = 0;
        if (!cc) {
            rc = MR_E_NOT_FOUND;
            break;
        }
        if (cat) {
            rc = category_codes(cc, codes, &names, &n_names, err);
            if (rc == MR_OK)
                rc = mr_slices_categorical(&s->d, col, codes, (const char *const *)names, n_names, &o, &s->slice_overall, &sl,
                                           &n_sl, err);
        } else {
            rc = column_doubles(cc, x, err);
            if (rc == MR_OK) rc = mr_slices_numeric(&s->d, col, x, c->buckets, &o, &s->slice_overall, &sl, &n_sl, err);
        }
        for (size_t i = 0; rc == MR_OK && i < n_sl; i++) {
            json_array_append_new(arr, slice_json(col, &sl[i], s->task == MR_TASK_REGRESSION));
            if (sl[i].flagged) {
                n_flag++;
                dprintf(s->ctx->log_fd, "slice %s: %s %.4g [%.4g, %.4g] is worse than overall %.4g\n", sl[i].label,
                        mr_metric_name(s->slice_id), sl[i].ci.point, sl[i].ci.lo, sl[i].ci.hi, s->slice_overall.point);
            }
        }
        for (size_t i = 0; i < n_names; i++) mr_free(names[i]);
        mr_free(names);
        mr_free(sl);
    }
    json_object_set_new(sj, "n_flagged", json_integer((json_int_t)n_flag));
    mr_free(codes);
    mr_free(x);
    return rc;
}

static json_t *error_row(eval_state *s, size_t row, const char *key, double v)
{
    json_t *o = json_object();
    const mr_column *rowc = mr_table_column(s->preds, "row");
    json_object_set_new(o, "row", json_integer(((const int64_t *)rowc->data)[row]));
    if (s->c->id) {
        mr_buf b;
        mr_buf_init(&b);
        if (mr_column_format(mr_table_column(s->preds, s->c->id), row, &b) == MR_OK)
            json_object_set_new(o, "id", json_string(b.data ? b.data : ""));
        mr_buf_free(&b);
    }
    json_object_set_new(o, "label", jnum(s->d.y[row]));
    if (s->task == MR_TASK_MULTICLASS) {
        size_t best = 0;
        for (size_t k = 1; k < s->K; k++)
            if (s->d.proba[row * s->K + k] > s->d.proba[row * s->K + best]) best = k;
        json_object_set_new(o, "prediction", json_integer((json_int_t)best));
    } else {
        json_object_set_new(o, "prediction", jnum(s->d.score[row]));
    }
    json_object_set_new(o, key, jnum(v));
    json_object_set_new(o, "features", row_features(s->model, s->feat, s->shown, row));
    return o;
}

static mr_status compute_errors(eval_state *s, json_t *ej, mr_error *err)
{
    size_t k = s->c->top_k;
    size_t *rows = mr_malloc((k ? k : 1) * sizeof(size_t));
    double *val = mr_malloc((k ? k : 1) * sizeof(double));
    mr_status rc = rows && val ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t m = 0;
    if (rc == MR_OK && s->task != MR_TASK_REGRESSION) {
        rc = k ? mr_metric_top_wrong(&s->d, s->c->threshold, k, rows, val, &m, err) : MR_OK;
        json_t *a = json_array();
        for (size_t i = 0; rc == MR_OK && i < m; i++) json_array_append_new(a, error_row(s, rows[i], "confidence", val[i]));
        json_object_set_new(ej, "most_confident_wrong", a);
    } else if (rc == MR_OK) {
        for (int worst = 1; rc == MR_OK && worst >= 0; worst--) {
            rc = k ? mr_metric_extreme_residuals(&s->d, worst, k, rows, val, &m, err) : MR_OK;
            json_t *a = json_array();
            for (size_t i = 0; rc == MR_OK && i < m; i++) json_array_append_new(a, error_row(s, rows[i], "residual", val[i]));
            json_object_set_new(ej, worst ? "worst_residuals" : "best_residuals", a);
        }
    }
    mr_free(rows);
    mr_free(val);
    return rc;
}

/* Adds a FLOAT64 column made of v (n values) to t. */
static mr_status add_f64(mr_table *t, const char *name, const double *v, size_t n, size_t stride, mr_error *err)
{
    mr_column *c = NULL;
    mr_status rc = mr_column_new(name, MR_T_FLOAT64, n, &c, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) rc = mr_column_append_float64(c, v[i * stride]);
    if (rc != MR_OK) {
        mr_column_free(c);
        return rc == MR_E_NOMEM ? MR_ERR(err, rc, "out of memory") : rc;
    }
    return mr_table_add_column(t, c, err);
}

/* Everything one evaluation holds, released by eval_run_free. */
typedef struct eval_run {
    mr_op_ctx *ctx;
    eval_cfg c;
    mr_model *model;
    const char *objective;
    mr_table *data, *raw;           /* as read; raw: the rows before the features stage (optional) */
    mr_table *sub, *raw_sub;        /* the fast tier's subsample of each */
    mr_table *fx_out, *preds;       /* features applied; the predictions artifact */
    mr_features *fx;
    double *y, *pred, *score;       /* labels (n); predictions (n, K); row-major proba for metrics */
    size_t *idx;                    /* evaluated rows: indices into data */
    uint32_t *idx32;
    size_t n, n_all, K;
    char *fx_bytes;
    json_t *mj, *cj, *sj, *ej;      /* metrics.json, curves.json, slices.json, errors.json */
    eval_state s;
} eval_run;

static void eval_run_free(eval_run *e)
{
    eval_cfg_free(&e->c);
    mr_free(e->fx_bytes);
    mr_free(e->y);
    mr_free(e->pred);
    mr_free(e->score);
    mr_free(e->idx);
    mr_free(e->idx32);
    mr_features_free(e->fx);
    mr_table_free(e->fx_out);
    mr_table_free(e->preds);
    mr_table_free(e->sub);
    mr_table_free(e->raw_sub);
    mr_table_free(e->raw);
    mr_table_free(e->data);
    mr_model_free(e->model);
    json_decref(e->mj);
    json_decref(e->cj);
    json_decref(e->sj);
    json_decref(e->ej);
}

static mr_status nomem(mr_error *err) { return MR_ERR(err, MR_E_NOMEM, "out of memory"); }

/* The rows evaluated (the data or its subsample) and, when given, the same
 * rows of the raw table. */
static const mr_table *eval_table(const eval_run *e) { return e->sub ? e->sub : e->data; }
static const mr_table *raw_table(const eval_run *e) { return e->raw_sub ? e->raw_sub : e->raw; }

/* Step 1: the model, the data (and raw rows), the task and the labels. */
static mr_status load_inputs(eval_run *e, mr_error *err)
{
    const mr_value *def = e->ctx->def;
    mr_status rc;
    char *model_file = mr__file_in(mr__opt_str(def, "model", ""), "model.bin");
    if (!model_file) return nomem(err);
    rc = mr_model_load(model_file, &e->model, err);
    mr_free(model_file);
    if (rc == MR_OK) rc = mr_table_read_file(mr__opt_str(def, "data", ""), &e->data, err);
    const char *raw = mr__opt_str(def, "raw", NULL);
    if (rc == MR_OK && raw) rc = mr_table_read_file(raw, &e->raw, err);
    if (rc != MR_OK) return rc;
    e->n_all = e->data->n_rows;
    if (e->raw && e->raw->n_rows != e->n_all) {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "raw has %zu rows but data has %zu: raw must hold the same rows, in the same order",
                    e->raw->n_rows, e->n_all);
        mr_error_key(err, "raw");
        mr_error_hint(err, "give the input of the features stage that made data, e.g. raw: ${stages.split.test}");
        return rc;
    }
    e->objective = mr_model_objective_name(e->model);
    e->s.task = !strcmp(e->objective, "binary")       ? MR_TASK_BINARY
                : !strcmp(e->objective, "multiclass") ? MR_TASK_MULTICLASS
                                                      : MR_TASK_REGRESSION;
    e->K = mr_model_num_outputs(e->model);
    const mr_column *lc = need_column(e->data, e->c.label, "label", err);
    if (!lc) return MR_E_NOT_FOUND;
    e->y = mr_malloc((e->n_all ? e->n_all : 1) * sizeof(double));
    if (!e->y) return nomem(err);
    if ((rc = column_doubles(lc, e->y, err)) != MR_OK) return rc;
    for (size_t i = 0; i < e->n_all; i++)
        if (isnan(e->y[i])) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "row %zu: the label '%s' is missing", i + 1, e->c.label);
            mr_error_key(err, e->c.label);
            return rc;
        }
    return MR_OK;
}

/* Step 2: every row (full) or a stratified subsample (fast). */
static mr_status select_rows(eval_run *e, mr_error *err)
{
    mr_status rc = MR_OK;
    size_t n_all = e->n_all;
    e->n = n_all;
    e->idx = mr_malloc((n_all ? n_all : 1) * sizeof(size_t));
    e->idx32 = mr_malloc((n_all ? n_all : 1) * sizeof(uint32_t));
    if (!e->idx || !e->idx32) return nomem(err);
    if (!e->c.full && e->c.sample_size < n_all) {
        if ((rc = mr_metric_subsample_stratified(e->y, n_all, e->c.sample_size, e->c.seed, e->idx, &e->n, err)) != MR_OK)
            return rc;
    } else {
        for (size_t i = 0; i < n_all; i++) e->idx[i] = i;
    }
    if (n_all > UINT32_MAX) return MR_ERR(err, MR_E_LIMIT, "evaluation data has more than 2^32 rows");
    for (size_t i = 0; i < e->n; i++) e->idx32[i] = (uint32_t)e->idx[i];
    if (e->n != n_all) {
        if ((rc = mr_table_take(e->data, e->idx32, e->n, &e->sub, err)) != MR_OK) return rc;
        if (e->raw && (rc = mr_table_take(e->raw, e->idx32, e->n, &e->raw_sub, err)) != MR_OK) return rc;
        for (size_t i = 0; i < e->n; i++) e->y[i] = e->y[e->idx[i]];
    }
    dprintf(e->ctx->log_fd, "evaluating %s %s model on %zu of %zu rows (tier %s)\n", mr_model_kind_name(e->model),
            e->objective, e->n, n_all, e->c.tier);
    return rc;
}

/* Step 3: fitted features, when given, applied exactly as at training time;
 * then one prediction pass. Its timing goes to the run store, never into an
 * artifact (the same inputs must give the same bytes). */
static mr_status predict(eval_run *e, mr_error *err)
{
    mr_status rc = MR_OK;
    const char *fxp = mr__opt_str(e->ctx->def, "features", NULL);
    if (fxp) {
        size_t len = 0;
        char *fx_file = NULL;
        rc = mr__features_file_in(fxp, &fx_file, err);
        if (rc == MR_OK) rc = mr_fs_read_file(fx_file, (size_t)1 << 30, &e->fx_bytes, &len, err);
        mr_free(fx_file);
        if (rc == MR_OK) rc = mr_features_load(e->fx_bytes, len, &e->fx, err);
        if (rc == MR_OK) rc = mr_features_apply(e->fx, eval_table(e), &e->fx_out, err);
        if (rc != MR_OK) return rc;
    }
    const mr_table *xt = e->fx_out ? e->fx_out : eval_table(e);
    double t0 = mr_now();
    if ((rc = mr_model_predict_table(e->model, xt, 0, &e->pred, &e->K, err)) != MR_OK) return rc;
    double secs = mr_now() - t0;
    mr_op_metric(e->ctx, "predict_seconds", 0, secs);
    dprintf(e->ctx->log_fd, "predicted %zu rows in %.3fs\n", e->n, secs);
    return MR_OK;
}

/* The table whose values slices, error lists and passthrough columns show:
 * the raw rows when given (or the data itself when evaluate applies the
 * features), so they read in the units the data came in. NULL: only the
 * model's inputs are known. */
static const mr_table *shown_table(const eval_run *e)
{
    if (e->raw) return raw_table(e);
    return e->fx_out ? eval_table(e) : NULL;
}

/* A copy of column name for the predictions: from the shown table when it
 * has it, else from the evaluated rows. */
static mr_status copy_column(const eval_run *e, const char *name, const char *role, mr_error *err)
{
    const mr_table *shown = shown_table(e);
    const mr_column *c = shown ? mr_table_column(shown, name) : NULL;
    if (!c) c = need_column(eval_table(e), name, role, err);
    mr_column *copy = NULL;
    mr_status rc = c ? mr_column_slice(c, 0, e->n, &copy, err) : MR_E_NOT_FOUND;
    if (rc == MR_OK) rc = mr_table_add_column(e->preds, copy, err);
    return rc;
}

/* Step 4: the predictions artifact: row, id, label, score or proba_k, then
 * passthrough and slice columns. */
static mr_status write_predictions(eval_run *e, mr_error *err)
{
    const eval_cfg *c = &e->c;
    size_t n = e->n, K = e->K;
    mr_status rc = mr_table_new(&e->preds, err);
    if (rc != MR_OK) return rc;
    mr_column *rowc = NULL;
    rc = mr_column_new("row", MR_T_INT64, n, &rowc, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) rc = mr_column_append_int64(rowc, (int64_t)e->idx[i]);
    if (rc == MR_OK)
        rc = mr_table_add_column(e->preds, rowc, err);
    else
        mr_column_free(rowc);
    if (rc == MR_OK && c->id) rc = copy_column(e, c->id, "id", err);
    if (rc == MR_OK) rc = add_f64(e->preds, "label", e->y, n, 1, err);
    if (rc == MR_OK && e->s.task != MR_TASK_MULTICLASS) rc = add_f64(e->preds, "score", e->pred, n, 1, err);
    for (size_t k = 0; rc == MR_OK && e->s.task == MR_TASK_MULTICLASS && k < K; k++) {
        char name[32];
        snprintf(name, sizeof(name), "proba_%zu", k);
        rc = add_f64(e->preds, name, e->pred + k, n, K, err);
    }
    for (size_t k = 0; rc == MR_OK && k < c->n_pass + c->n_cats + c->n_nums; k++) {
        const char *name = k < c->n_pass          ? c->pass[k]
                           : k < c->n_pass + c->n_cats ? c->cats[k - c->n_pass]
                                                       : c->nums[k - c->n_pass - c->n_cats];
        if (mr_table_column(e->preds, name)) continue;
        rc = copy_column(e, name, k < c->n_pass ? "passthrough" : "slice", err);
    }
    if (rc != MR_OK) return rc;
    char *path = mr_path_join(e->ctx->outputs[0].path, "predictions.parquet");
    rc = path ? mr_table_write_file(path, e->preds, err) : nomem(err);
    mr_free(path);
    return rc;
}

/* Step 5: the metric arrays, read back from the predictions' columns. */
static mr_status metric_data(eval_run *e, mr_error *err)
{
    size_t n = e->n, K = e->K;
    const double *py = mr_table_column(e->preds, "label")->data;
    if (e->s.task == MR_TASK_BINARY) {
        mr_metric_data_binary(&e->s.d, py, mr_table_column(e->preds, "score")->data, NULL, n);
    } else if (e->s.task == MR_TASK_REGRESSION) {
        mr_metric_data_regression(&e->s.d, py, mr_table_column(e->preds, "score")->data, NULL, n);
    } else {
        /* Metrics want a row-major (n, K) matrix: gathered from proba_k. */
        e->score = mr_malloc(((n * K) > 0 ? n * K : 1) * sizeof(double));
        if (!e->score) return nomem(err);
        for (size_t k = 0; k < K; k++) {
            char name[32];
            snprintf(name, sizeof(name), "proba_%zu", k);
            const double *pk = mr_table_column(e->preds, name)->data;
            for (size_t i = 0; i < n; i++) e->score[i * K + k] = pk[i];
        }
        mr_metric_data_multiclass(&e->s.d, py, e->score, K, NULL, n);
    }
    mr_status rc = mr_metric_validate(&e->s.d, 0, err);
    if (rc != MR_OK) mr_error_key(err, e->c.label);
    return rc;
}

/* The metric slices are judged by: the task's default or slices.metric. */
static void slice_metric(eval_run *e)
{
    eval_state *s = &e->s;
    s->slice_overall = (mr_interval){NAN, NAN, NAN, 0, 0};
    s->slice_id = s->task == MR_TASK_BINARY ? MR_METRIC_ROC_AUC : s->task == MR_TASK_MULTICLASS ? MR_METRIC_ACCURACY : MR_METRIC_RMSE;
    if (e->c.slice_metric) s->slice_id = e->c.slice_id;
}

/* The confusion matrix (classification) and the F1-optimal threshold. */
static void confusion_json(eval_run *e)
{
    size_t K = e->K;
    if (e->s.task == MR_TASK_BINARY) {
        mr_binary_scores bs, opt;
        if (mr_metric_binary_at(&e->s.d, e->c.threshold, &bs, NULL) == MR_OK)
            json_object_set_new(e->mj, "confusion", json_pack("{s:[ss],s:[[ff][ff]]}", "labels", "0", "1", "matrix",
                                                              bs.cm.tn, bs.cm.fp, bs.cm.fn, bs.cm.tp));
        if (mr_metric_f1_optimal(&e->s.d, &opt, NULL) == MR_OK)
            json_object_set_new(e->mj, "f1_optimal", json_pack("{s:f,s:f}", "threshold", opt.threshold, "f1", opt.f1));
    } else if (e->s.task == MR_TASK_MULTICLASS) {
        double *cm = mr_calloc(K * K, sizeof(double));
        mr_multiclass_scores ms;
        if (cm && mr_metric_multiclass(&e->s.d, &ms, cm, NULL) == MR_OK) {
            json_t *labels = json_array(), *mat = json_array();
            for (size_t a = 0; a < K; a++) {
                char t[24];
                snprintf(t, sizeof(t), "%zu", a);
                json_array_append_new(labels, json_string(t));
                json_array_append_new(mat, jarr(cm + a * K, K));
            }
            json_object_set_new(e->mj, "confusion", json_pack("{s:o,s:o}", "labels", labels, "matrix", mat));
        }
        mr_free(cm);
    }
}

/* Step 6: metrics.json: the metrics with intervals, what the evaluation
 * was (task, tier, rows, label, model), and the confusion matrix. Nothing
 * in it depends on the machine or the clock. */
static mr_status describe(eval_run *e, mr_error *err)
{
    const eval_cfg *c = &e->c;
    mr_status rc;
    e->s.metrics = json_object();
    e->s.undefined = json_object();
    json_object_set_new(e->mj, "metrics", e->s.metrics);
    json_object_set_new(e->mj, "undefined", e->s.undefined);
    if ((rc = compute_metrics(&e->s, err)) != MR_OK) return rc;
    mr_op_metric(e->ctx, "eval_rows", 0, (double)e->n);
    const char *task = e->s.task == MR_TASK_BINARY ? "binary" : e->s.task == MR_TASK_MULTICLASS ? "multiclass" : "regression";
    json_object_set_new(e->mj, "task", json_string(task));
    json_object_set_new(e->mj, "tier", json_string(c->tier));
    json_object_set_new(e->mj, "rows", json_integer((json_int_t)e->n));
    json_object_set_new(e->mj, "rows_total", json_integer((json_int_t)e->n_all));
    json_object_set_new(e->mj, "label", json_string(c->label));
    json_object_set_new(e->mj, "model_kind", json_string(mr_model_kind_name(e->model)));
    json_object_set_new(e->mj, "objective", json_string(e->objective));
    if (e->s.task == MR_TASK_BINARY) json_object_set_new(e->mj, "threshold", json_real(c->threshold));
    json_object_set_new(e->mj, "bootstrap", c->full && c->n_boot ? json_pack("{s:I,s:f,s:I}", "n", (json_int_t)c->n_boot, "alpha",
                                                                              c->alpha, "seed", (json_int_t)c->boot_seed)
                                                                  : json_null());
    confusion_json(e);
    return MR_OK;
}

/* Step 7 (full tier): curves, slices and error lists; then every file. */
static mr_status analyse_and_write(eval_run *e, mr_error *err)
{
    mr_status rc = MR_OK;
    const char *dir = e->ctx->outputs[0].path;
    json_object_set_new(e->cj, "tier", json_string(e->c.tier));
    json_object_set_new(e->sj, "tier", json_string(e->c.tier));
    json_object_set_new(e->ej, "tier", json_string(e->c.tier));
    if (e->c.full) {
        /* raw: true when the values shown are the data's own units. */
        json_object_set_new(e->sj, "raw", json_boolean(shown_table(e) != NULL));
        json_object_set_new(e->ej, "raw", json_boolean(shown_table(e) != NULL));
        if ((rc = compute_curves(&e->s, e->cj, err)) != MR_OK) return rc;
        if ((rc = compute_slices(&e->s, e->sj, err)) != MR_OK) return rc;
        if ((rc = compute_errors(&e->s, e->ej, err)) != MR_OK) return rc;
    }
    if ((rc = write_json(dir, "metrics.json", e->mj, err)) != MR_OK) return rc;
    if ((rc = write_json(dir, "curves.json", e->cj, err)) != MR_OK) return rc;
    if ((rc = write_json(dir, "slices.json", e->sj, err)) != MR_OK) return rc;
    return write_json(dir, "errors.json", e->ej, err);
}

static mr_status run_evaluate(mr_op_ctx *ctx, mr_error *err)
{
    eval_run e;
    memset(&e, 0, sizeof(e));
    e.ctx = ctx;
    mr_status rc = eval_settings(ctx->def, &e.c, err);
    if (rc != MR_OK) goto done;
    e.mj = json_object();
    e.cj = json_object();
    e.sj = json_object();
    e.ej = json_object();
    if (!e.mj || !e.cj || !e.sj || !e.ej) {
        rc = nomem(err);
        goto done;
    }
    e.s.ctx = ctx;
    e.s.c = &e.c;
    if ((rc = load_inputs(&e, err)) != MR_OK) goto done;
    if ((rc = select_rows(&e, err)) != MR_OK) goto done;
    if ((rc = predict(&e, err)) != MR_OK) goto done;
    if ((rc = write_predictions(&e, err)) != MR_OK) goto done;
    if ((rc = metric_data(&e, err)) != MR_OK) goto done;
    e.s.K = e.K;
    e.s.preds = e.preds;
    e.s.feat = e.fx_out ? e.fx_out : eval_table(&e);
    e.s.shown = shown_table(&e);
    e.s.model = e.model;
    slice_metric(&e);
    if ((rc = describe(&e, err)) != MR_OK) goto done;
    rc = analyse_and_write(&e, err);
done:
    eval_run_free(&e);
    return rc;
}

/* Version 2: metrics.json no longer holds predict_seconds (a timing: it is
 * the run-store metric predict_seconds now), and the optional raw input
 * gives slices, error lists and passthrough columns the data's own units. */
const mr_op mr_op_evaluate = {
    .name = "evaluate",
    .version = 2,
    .params = evaluate_params,
    .outputs = NULL,
    .run = run_evaluate,
    .validate = validate_evaluate,
};
