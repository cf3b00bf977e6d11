/* GBDT parameters: LightGBM names and aliases, typed parsing with range
 * checks and "did you mean" hints, validation, canonical text. */
#include "gbdt_int.h"
#include "millrace/value.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <strings.h>

typedef enum ptype { P_INT, P_DOUBLE, P_U64, P_BOOL, P_OBJECTIVE, P_METRIC, P_STRING } ptype;

typedef struct pdef {
    const char *name;
    const char *aliases; /* comma-separated */
    ptype type;
    size_t off;
    double lo, hi;       /* inclusive range for numbers */
    int lo_open;         /* lo is exclusive */
} pdef;

#define OFF(f) offsetof(mr_gbdt_params, f)
static const pdef PDEFS[] = {
    {"objective", "objective_type,app,application,loss", P_OBJECTIVE, OFF(objective), 0, 0, 0},
    {"num_class", "num_classes", P_INT, OFF(num_class), 1, 1e6, 0},
    {"num_iterations",
     "num_iteration,n_iter,num_tree,num_trees,num_round,num_rounds,nrounds,num_boost_round,n_estimators,max_iter",
     P_INT, OFF(num_iterations), 0, 1e8, 0},
    {"learning_rate", "shrinkage_rate,eta", P_DOUBLE, OFF(learning_rate), 0, 1e6, 1},
    {"num_leaves", "num_leaf,max_leaves,max_leaf,max_leaf_nodes", P_INT, OFF(num_leaves), 2, 65536, 0},
    {"max_depth", "", P_INT, OFF(max_depth), -1e9, 1e9, 0},
    {"max_bin", "max_bins", P_INT, OFF(max_bin), 2, 255, 0},
    {"min_data_in_leaf", "min_data_per_leaf,min_data,min_child_samples,min_samples_leaf", P_INT,
     OFF(min_data_in_leaf), 1, 1e9, 0},
    {"min_sum_hessian_in_leaf", "min_sum_hessian_per_leaf,min_sum_hessian,min_hessian,min_child_weight", P_DOUBLE,
     OFF(min_sum_hessian_in_leaf), 0, 1e300, 0},
    {"lambda_l1", "reg_alpha,l1_regularization", P_DOUBLE, OFF(lambda_l1), 0, 1e300, 0},
    {"lambda_l2", "reg_lambda,lambda,l2_regularization", P_DOUBLE, OFF(lambda_l2), 0, 1e300, 0},
    {"min_gain_to_split", "min_split_gain", P_DOUBLE, OFF(min_gain_to_split), 0, 1e300, 0},
    {"bagging_fraction", "sub_row,subsample,bagging", P_DOUBLE, OFF(bagging_fraction), 0, 1, 1},
    {"bagging_freq", "subsample_freq", P_INT, OFF(bagging_freq), 0, 1e9, 0},
    {"feature_fraction", "sub_feature,colsample_bytree", P_DOUBLE, OFF(feature_fraction), 0, 1, 1},
    {"early_stopping_round", "early_stopping_rounds,early_stopping,n_iter_no_change", P_INT,
     OFF(early_stopping_round), 0, 1e9, 0},
    {"metric", "metrics,metric_types,eval_metric", P_METRIC, 0, 0, 0, 0},
    {"num_threads", "num_thread,nthread,nthreads,n_jobs", P_INT, OFF(num_threads), 0, 4096, 0},
    {"seed", "random_seed,random_state", P_U64, OFF(seed), 0, 0, 0},
    {"bin_construct_sample_cnt", "subsample_for_bin", P_INT, OFF(bin_construct_sample_cnt), 1, 2e9, 0},
    {"alpha", "huber_delta", P_DOUBLE, OFF(alpha), 0, 1e300, 1},
    {"max_cat_to_onehot", "", P_INT, OFF(max_cat_to_onehot), 1, 1e9, 0},
    {"max_cat_threshold", "", P_INT, OFF(max_cat_threshold), 1, 1e9, 0},
    {"cat_smooth", "", P_DOUBLE, OFF(cat_smooth), 0, 1e300, 0},
    {"cat_l2", "", P_DOUBLE, OFF(cat_l2), 0, 1e300, 0},
    {"min_data_per_group", "", P_INT, OFF(min_data_per_group), 1, 1e9, 0},
    {"is_provide_training_metric", "training_metric,is_training_metric,train_metric", P_BOOL,
     OFF(is_provide_training_metric), 0, 1, 0},
    {"boost_from_average", "", P_BOOL, OFF(boost_from_average), 0, 1, 0},
    {"categorical_feature", "cat_feature,categorical_column,cat_column,categorical_features", P_STRING,
     OFF(categorical_feature), 0, 0, 0},
};
#define N_PDEFS (sizeof(PDEFS) / sizeof(PDEFS[0]))

static const struct {
    const char *name;
    int val;
} OBJ_NAMES[] = {
    {"regression", MR_GBDT_REGRESSION},
    {"regression_l2", MR_GBDT_REGRESSION},
    {"l2", MR_GBDT_REGRESSION},
    {"mean_squared_error", MR_GBDT_REGRESSION},
    {"mse", MR_GBDT_REGRESSION},
    {"l2_root", MR_GBDT_REGRESSION},
    {"root_mean_squared_error", MR_GBDT_REGRESSION},
    {"rmse", MR_GBDT_REGRESSION},
    {"reg:squarederror", MR_GBDT_REGRESSION},
    {"binary", MR_GBDT_BINARY},
    {"binary:logistic", MR_GBDT_BINARY},
    {"logistic", MR_GBDT_BINARY},
    {"multiclass", MR_GBDT_MULTICLASS},
    {"softmax", MR_GBDT_MULTICLASS},
    {"multi:softprob", MR_GBDT_MULTICLASS},
    {"multi:softmax", MR_GBDT_MULTICLASS},
    {"regression_l1", MR_GBDT_REGRESSION_L1},
    {"l1", MR_GBDT_REGRESSION_L1},
    {"mean_absolute_error", MR_GBDT_REGRESSION_L1},
    {"mae", MR_GBDT_REGRESSION_L1},
    {"reg:absoluteerror", MR_GBDT_REGRESSION_L1},
    {"huber", MR_GBDT_HUBER},
    {"reg:pseudohubererror", MR_GBDT_HUBER},
};
static const struct {
    const char *name;
    int val;
} METRIC_NAMES[] = {
    {"auc", MR_GBDT_METRIC_AUC},
    {"binary_logloss", MR_GBDT_METRIC_LOGLOSS},
    {"logloss", MR_GBDT_METRIC_LOGLOSS},
    {"binary", MR_GBDT_METRIC_LOGLOSS},
    {"binary_error", MR_GBDT_METRIC_ERROR},
    {"error", MR_GBDT_METRIC_ERROR},
    {"rmse", MR_GBDT_METRIC_RMSE},
    {"l2_root", MR_GBDT_METRIC_RMSE},
    {"root_mean_squared_error", MR_GBDT_METRIC_RMSE},
    {"l2", MR_GBDT_METRIC_L2},
    {"mse", MR_GBDT_METRIC_L2},
    {"mean_squared_error", MR_GBDT_METRIC_L2},
    {"regression", MR_GBDT_METRIC_L2},
    {"l1", MR_GBDT_METRIC_L1},
    {"mae", MR_GBDT_METRIC_L1},
    {"mean_absolute_error", MR_GBDT_METRIC_L1},
    {"multi_logloss", MR_GBDT_METRIC_MULTI_LOGLOSS},
    {"multiclass", MR_GBDT_METRIC_MULTI_LOGLOSS},
    {"softmax", MR_GBDT_METRIC_MULTI_LOGLOSS},
    {"mlogloss", MR_GBDT_METRIC_MULTI_LOGLOSS},
    {"multi_error", MR_GBDT_METRIC_MULTI_ERROR},
    {"merror", MR_GBDT_METRIC_MULTI_ERROR},
    {"huber", MR_GBDT_METRIC_HUBER},
};

void mr_gbdt_params_init(mr_gbdt_params *p)
{
    memset(p, 0, sizeof(*p));
    p->objective = MR_GBDT_REGRESSION;
    p->num_class = 1;
    p->num_iterations = 100;
    p->learning_rate = 0.1;
    p->num_leaves = 31;
    p->max_depth = -1;
    p->max_bin = 255;
    p->min_data_in_leaf = 20;
    p->min_sum_hessian_in_leaf = 1e-3;
    p->bagging_fraction = 1.0;
    p->feature_fraction = 1.0;
    p->bin_construct_sample_cnt = 200000;
    p->alpha = 0.9;
    p->max_cat_to_onehot = 4;
    p->max_cat_threshold = 32;
    p->cat_smooth = 10.0;
    p->cat_l2 = 10.0;
    p->min_data_per_group = 100;
    p->boost_from_average = 1;
}

void mr_gbdt_params_deinit(mr_gbdt_params *p)
{
    if (!p) return;
    mr_free(p->categorical_feature);
    p->categorical_feature = NULL;
}

const char *mr_gbdt_objective_name(mr_gbdt_objective o)
{
    switch (o) {
    case MR_GBDT_REGRESSION: return "regression";
    case MR_GBDT_BINARY: return "binary";
    case MR_GBDT_MULTICLASS: return "multiclass";
    case MR_GBDT_REGRESSION_L1: return "regression_l1";
    case MR_GBDT_HUBER: return "huber";
    }
    return "unknown";
}

const char *mr_gbdt_metric_name(mr_gbdt_metric m)
{
    switch (m) {
    case MR_GBDT_METRIC_NONE: return "none";
    case MR_GBDT_METRIC_AUC: return "auc";
    case MR_GBDT_METRIC_LOGLOSS: return "binary_logloss";
    case MR_GBDT_METRIC_ERROR: return "binary_error";
    case MR_GBDT_METRIC_RMSE: return "rmse";
    case MR_GBDT_METRIC_L2: return "l2";
    case MR_GBDT_METRIC_L1: return "l1";
    case MR_GBDT_METRIC_MULTI_LOGLOSS: return "multi_logloss";
    case MR_GBDT_METRIC_MULTI_ERROR: return "multi_error";
    case MR_GBDT_METRIC_HUBER: return "huber";
    }
    return "unknown";
}

static int name_matches(const char *key, const pdef *d)
{
    if (!strcasecmp(key, d->name)) return 1;
    const char *a = d->aliases;
    size_t klen = strlen(key);
    while (a && *a) {
        const char *comma = strchr(a, ',');
        size_t len = comma ? (size_t)(comma - a) : strlen(a);
        if (len == klen && !strncasecmp(a, key, len)) return 1;
        a = comma ? comma + 1 : NULL;
    }
    return 0;
}

static void trim(const char *s, const char **b_out, size_t *len_out)
{
    while (*s && isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) n--;
    *b_out = s;
    *len_out = n;
}

/* The parameter a key names (a LightGBM name or alias, case-insensitive). */
static const pdef *find_def(const char *key)
{
    for (size_t i = 0; i < N_PDEFS; i++)
        if (name_matches(key, &PDEFS[i])) return &PDEFS[i];
    return NULL;
}

const char *mr_gbdt_param_canonical(const char *key) { return key && find_def(key) ? find_def(key)->name : NULL; }

/* An unknown key: the closest of every name and alias, suggested by its
 * canonical name (num_leafs -> num_leaves, not the alias num_leaf). */
static mr_status unknown_key(const char *key, mr_error *err)
{
    const char *cands[256];
    const pdef *owner[256];
    char store[4096];
    size_t nc = 0, used = 0;
    for (size_t i = 0; i < N_PDEFS && nc < 256; i++) {
        owner[nc] = &PDEFS[i];
        cands[nc++] = PDEFS[i].name;
        const char *a = PDEFS[i].aliases;
        while (a && *a && nc < 256) {
            const char *comma = strchr(a, ',');
            size_t len = comma ? (size_t)(comma - a) : strlen(a);
            if (used + len + 1 > sizeof(store)) break;
            memcpy(store + used, a, len);
            store[used + len] = 0;
            owner[nc] = &PDEFS[i];
            cands[nc++] = store + used;
            used += len + 1;
            a = comma ? comma + 1 : NULL;
        }
    }
    const char *best = mr_closest(key, cands, nc);
    MR_ERR(err, MR_E_INVALID_ARG, "unknown gbdt parameter '%s'", key);
    mr_error_key(err, key);
    for (size_t i = 0; best && i < nc; i++)
        if (cands[i] == best) {
            mr_error_hint(err, "did you mean '%s'?", owner[i]->name);
            break;
        }
    if (!best) mr_error_hint(err, "the parameters are LightGBM's (docs/gbdt.md lists them)");
    return MR_E_INVALID_ARG;
}

static mr_status bad_value(const pdef *d, const char *key, const char *value, const char *expect, mr_error *err)
{
    MR_ERR(err, MR_E_INVALID_ARG, "parameter '%s'%s%s%s: expected %s, got \"%s\"", key,
           strcasecmp(key, d->name) ? " (" : "", strcasecmp(key, d->name) ? d->name : "",
           strcasecmp(key, d->name) ? ")" : "", expect, value);
    mr_error_key(err, key);
    return MR_E_INVALID_ARG;
}

static mr_status parse_enum_list(const pdef *d, const char *key, const char *value, mr_gbdt_params *p,
                                 mr_error *err)
{
    const char *b;
    size_t len;
    trim(value, &b, &len);
    char buf[256];
    if (len >= sizeof(buf)) return bad_value(d, key, value, "a short name", err);
    memcpy(buf, b, len);
    buf[len] = 0;
    if (d->type == P_OBJECTIVE) {
        const char *cands[64];
        size_t n = sizeof(OBJ_NAMES) / sizeof(OBJ_NAMES[0]);
        for (size_t i = 0; i < n; i++) {
            cands[i] = OBJ_NAMES[i].name;
            if (!strcasecmp(buf, OBJ_NAMES[i].name)) {
                p->objective = (mr_gbdt_objective)OBJ_NAMES[i].val;
                return MR_OK;
            }
        }
        const char *best = mr_closest(buf, cands, n);
        bad_value(d, key, value, "regression, regression_l1, huber, binary or multiclass", err);
        if (best) mr_error_hint(err, "did you mean %s?", best);
        return MR_E_INVALID_ARG;
    }
    /* metric: comma-separated list; "" / "none" / "None" = no metric. */
    mr_gbdt_metric ms[MR_GBDT_MAX_METRICS];
    int nm = 0, explicit_none = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (!strcasecmp(tok, "none") || !strcasecmp(tok, "null") || !strcasecmp(tok, "na")) {
            explicit_none = 1;
            continue;
        }
        size_t n = sizeof(METRIC_NAMES) / sizeof(METRIC_NAMES[0]);
        const char *cands[64];
        int found = -1;
        for (size_t i = 0; i < n; i++) {
            cands[i] = METRIC_NAMES[i].name;
            if (!strcasecmp(tok, METRIC_NAMES[i].name)) found = METRIC_NAMES[i].val;
        }
        if (found < 0) {
            const char *best = mr_closest(tok, cands, n);
            bad_value(d, key, tok, "auc, binary_logloss, binary_error, rmse, l2, l1, huber, multi_logloss or multi_error",
                      err);
            if (best) mr_error_hint(err, "did you mean %s?", best);
            return MR_E_INVALID_ARG;
        }
        int dup = 0;
        for (int i = 0; i < nm; i++) dup |= ms[i] == (mr_gbdt_metric)found;
        if (dup) continue;
        if (nm == MR_GBDT_MAX_METRICS) return bad_value(d, key, value, "at most 8 metrics", err);
        ms[nm++] = (mr_gbdt_metric)found;
    }
    memcpy(p->metric, ms, sizeof(ms[0]) * (size_t)nm);
    p->n_metrics = nm;
    if (nm == 0 && explicit_none) {
        p->metric[0] = MR_GBDT_METRIC_NONE;
        p->n_metrics = -1; /* explicitly none */
    }
    return MR_OK;
}

static mr_status set_number(mr_gbdt_params *p, const pdef *d, const char *key, double v, const char *text,
                            mr_error *err);

/* Sets parameter d from text (a CLI value, or a string in the spec). */
static mr_status set_text(mr_gbdt_params *p, const pdef *d, const char *key, const char *value, mr_error *err)
{
    char *base = (char *)p + d->off;
    const char *b;
    size_t len;
    trim(value, &b, &len);
    char buf[128];
    if (d->type == P_OBJECTIVE || d->type == P_METRIC) return parse_enum_list(d, key, value, p, err);
    if (d->type == P_STRING) {
        char *s = mr_strndup(b, len);
        if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(*(char **)base);
        *(char **)base = len ? s : NULL;
        if (!len) mr_free(s);
        return MR_OK;
    }
    if (len == 0 || len >= sizeof(buf)) goto bad;
    memcpy(buf, b, len);
    buf[len] = 0;
    if (d->type == P_BOOL) {
        int v;
        if (!strcasecmp(buf, "true") || !strcmp(buf, "1") || !strcasecmp(buf, "yes") || !strcasecmp(buf, "on"))
            v = 1;
        else if (!strcasecmp(buf, "false") || !strcmp(buf, "0") || !strcasecmp(buf, "no") ||
                 !strcasecmp(buf, "off"))
            v = 0;
        else
            return bad_value(d, key, value, "true or false", err);
        *(int *)base = v;
        return MR_OK;
    }
    if (d->type == P_U64) {
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (*end || errno) goto bad;
        *(uint64_t *)base = (uint64_t)v;
        return MR_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || errno || v != v) goto bad;
    return set_number(p, d, key, v, value, err);
bad:
    return bad_value(d, key, value,
                     d->type == P_INT ? "an integer" : d->type == P_U64 ? "a non-negative integer" : "a number", err);
}

mr_status mr_gbdt_params_set_text(mr_gbdt_params *p, const char *key, const char *value, mr_error *err)
{
    if (!p || !key || !value) return MR_ERR(err, MR_E_INVALID_ARG, "mr_gbdt_params_set_text: NULL argument");
    const pdef *d = find_def(key);
    return d ? set_text(p, d, key, value, err) : unknown_key(key, err);
}

/* A number for an int or double parameter: integral for ints, in range. */
static mr_status set_number(mr_gbdt_params *p, const pdef *d, const char *key, double v, const char *text, mr_error *err)
{
    char *base = (char *)p + d->off;
    if (v != v || (d->type == P_INT && v != floor(v)))
        return bad_value(d, key, text, d->type == P_INT ? "an integer" : "a number", err);
    if (v < d->lo || v > d->hi || (d->lo_open && v == d->lo)) {
        char expect[160];
        if (d->type == P_INT)
            snprintf(expect, sizeof(expect), "an integer in [%.0f, %.0f]", d->lo, d->hi);
        else
            snprintf(expect, sizeof(expect), "a number in %s%g, %g]", d->lo_open ? "(" : "[", d->lo, d->hi);
        return bad_value(d, key, text, expect, err);
    }
    if (d->type == P_INT)
        *(int *)base = (int)v;
    else
        *(double *)base = v;
    return MR_OK;
}

/* "1,3,name" from a list of strings and integers (categorical_feature, metric). */
static mr_status join_list(const mr_value *v, mr_buf *out)
{
    mr_status st = MR_OK;
    for (size_t i = 0; i < v->n && st == MR_OK; i++) {
        const mr_value *it = v->items[i];
        if (it->kind != MR_V_STR && it->kind != MR_V_INT) return MR_E_INVALID_ARG;
        if (i) st = mr_buf_puts(out, ",");
        if (st == MR_OK) st = mr_value_scalar_text(it, out);
    }
    if (st == MR_OK && !out->data) st = mr_buf_puts(out, "");
    return st;
}

mr_status mr_gbdt_params_set(mr_gbdt_params *p, const char *key, const mr_value *v, mr_error *err)
{
    if (!p || !key || !v) return MR_ERR(err, MR_E_INVALID_ARG, "mr_gbdt_params_set: NULL argument");
    const pdef *d = find_def(key);
    if (!d) return unknown_key(key, err);
    mr_status rc = MR_OK;
    mr_buf b;
    mr_buf_init(&b);
    const char *expect = NULL;
    switch (d->type) {
    case P_INT:
    case P_DOUBLE:
    case P_U64:
        if (v->kind == MR_V_INT && d->type == P_U64) {
            if (v->u.i < 0) expect = "a non-negative integer";
            else *(uint64_t *)((char *)p + d->off) = (uint64_t)v->u.i;
        } else if (v->kind == MR_V_INT || v->kind == MR_V_FLOAT) {
            double x = v->kind == MR_V_INT ? (double)v->u.i : v->u.f;
            if (d->type == P_U64) expect = "a non-negative integer";
            else {
                rc = mr_value_scalar_text(v, &b);
                rc = rc == MR_OK ? set_number(p, d, key, x, b.data, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
        } else if (v->kind == MR_V_STR) {
            rc = set_text(p, d, key, v->str, err);
        } else {
            expect = d->type == P_INT ? "an integer" : d->type == P_U64 ? "a non-negative integer" : "a number";
        }
        break;
    case P_BOOL:
        if (v->kind == MR_V_BOOL) *(int *)((char *)p + d->off) = v->u.b;
        else if (v->kind == MR_V_INT && (v->u.i == 0 || v->u.i == 1)) *(int *)((char *)p + d->off) = (int)v->u.i;
        else if (v->kind == MR_V_STR) rc = set_text(p, d, key, v->str, err);
        else expect = "true or false";
        break;
    case P_OBJECTIVE:
        if (v->kind == MR_V_STR) rc = set_text(p, d, key, v->str, err);
        else expect = "an objective name (binary, regression, multiclass, ...)";
        break;
    case P_METRIC:
    case P_STRING:
        if (v->kind == MR_V_STR) rc = set_text(p, d, key, v->str, err);
        else if (v->kind == MR_V_NULL && d->type == P_METRIC) rc = set_text(p, d, key, "none", err);
        else if (v->kind == MR_V_INT && d->type == P_STRING && mr_value_scalar_text(v, &b) == MR_OK)
            rc = set_text(p, d, key, b.data, err);
        else if (v->kind == MR_V_SEQ && join_list(v, &b) == MR_OK) rc = set_text(p, d, key, b.data, err);
        else expect = d->type == P_METRIC ? "a metric name or a list of them" : "column names or indices";
        break;
    }
    if (expect) {
        mr_buf t;
        mr_buf_init(&t);
        if (v->kind == MR_V_MAP || v->kind == MR_V_SEQ || mr_value_scalar_text(v, &t) != MR_OK) {
            mr_buf_free(&t);
            mr_buf_init(&t);
            mr_buf_puts(&t, mr_vkind_name(v->kind));
        }
        rc = bad_value(d, key, t.data ? t.data : "", expect, err);
        mr_buf_free(&t);
    }
    if (rc != MR_OK && v->line) mr_error_at(err, NULL, v->line, v->col);
    mr_buf_free(&b);
    return rc;
}

mr_status mr_gbdt_params_apply(mr_gbdt_params *p, const mr_value *map, mr_error *err)
{
    if (!map || map->kind == MR_V_NULL) return MR_OK;
    if (map->kind != MR_V_MAP) return MR_ERR(err, MR_E_INVALID_ARG, "gbdt parameters must be a mapping, got %s", mr_vkind_name(map->kind));
    for (size_t k = 0; k < map->n; k++) {
        mr_status rc = mr_gbdt_params_set(p, map->keys[k], map->items[k], err);
        if (rc == MR_OK) continue;
        /* an unknown key points at the key, a bad value at the value */
        if (!find_def(map->keys[k]) && map->key_lines) mr_error_at(err, NULL, map->key_lines[k], map->key_cols[k]);
        return rc;
    }
    return MR_OK;
}

mr_status mr_gbdt_params_validate(const mr_gbdt_params *p, mr_error *err)
{
    if (p->objective == MR_GBDT_MULTICLASS && p->num_class < 2)
        return MR_ERR(err, MR_E_INVALID_ARG, "objective multiclass needs num_class >= 2 (got %d)", p->num_class);
    if (p->objective != MR_GBDT_MULTICLASS && p->num_class != 1)
        return MR_ERR(err, MR_E_INVALID_ARG, "num_class=%d needs objective multiclass (objective is %s)",
                      p->num_class, mr_gbdt_objective_name(p->objective));
    if (p->max_bin < 2 || p->max_bin > 255)
        return MR_ERR(err, MR_E_INVALID_ARG, "max_bin must be in [2, 255] (got %d)", p->max_bin);
    if (p->num_leaves < 2) return MR_ERR(err, MR_E_INVALID_ARG, "num_leaves must be >= 2 (got %d)", p->num_leaves);
    if (!(p->learning_rate > 0)) return MR_ERR(err, MR_E_INVALID_ARG, "learning_rate must be > 0");
    if (!(p->bagging_fraction > 0 && p->bagging_fraction <= 1))
        return MR_ERR(err, MR_E_INVALID_ARG, "bagging_fraction must be in (0, 1]");
    if (!(p->feature_fraction > 0 && p->feature_fraction <= 1))
        return MR_ERR(err, MR_E_INVALID_ARG, "feature_fraction must be in (0, 1]");
    if (p->min_data_in_leaf < 1) return MR_ERR(err, MR_E_INVALID_ARG, "min_data_in_leaf must be >= 1");
    for (int i = 0; i < p->n_metrics; i++) {
        mr_gbdt_metric m = p->metric[i];
        int multi = m == MR_GBDT_METRIC_MULTI_LOGLOSS || m == MR_GBDT_METRIC_MULTI_ERROR;
        int binary = m == MR_GBDT_METRIC_AUC || m == MR_GBDT_METRIC_LOGLOSS || m == MR_GBDT_METRIC_ERROR;
        if (multi != (p->objective == MR_GBDT_MULTICLASS) && (multi || p->objective == MR_GBDT_MULTICLASS))
            return MR_ERR(err, MR_E_INVALID_ARG, "metric %s does not fit objective %s", mr_gbdt_metric_name(m),
                          mr_gbdt_objective_name(p->objective));
        if (binary && p->objective != MR_GBDT_BINARY)
            return MR_ERR(err, MR_E_INVALID_ARG, "metric %s needs objective binary (objective is %s)",
                          mr_gbdt_metric_name(m), mr_gbdt_objective_name(p->objective));
    }
    return MR_OK;
}

mr_status mr_gbdt_params_to_text(const mr_gbdt_params *p, mr_buf *out)
{
    mr_status st = MR_OK;
    for (size_t i = 0; i < N_PDEFS && st == MR_OK; i++) {
        const pdef *d = &PDEFS[i];
        const char *base = (const char *)p + d->off;
        if (!strcmp(d->name, "num_threads")) continue; /* never changes the model */
        switch (d->type) {
        case P_INT:
        case P_BOOL: st = mr_buf_printf(out, "%s=%d\n", d->name, *(const int *)base); break;
        case P_DOUBLE: st = mr_buf_printf(out, "%s=%.17g\n", d->name, *(const double *)base); break;
        case P_U64: st = mr_buf_printf(out, "%s=%llu\n", d->name, (unsigned long long)*(const uint64_t *)base); break;
        case P_OBJECTIVE: st = mr_buf_printf(out, "%s=%s\n", d->name, mr_gbdt_objective_name(p->objective)); break;
        case P_STRING: {
            const char *s = *(char *const *)base;
            st = mr_buf_printf(out, "%s=%s\n", d->name, s ? s : "");
            break;
        }
        case P_METRIC:
            st = mr_buf_printf(out, "metric=");
            if (p->n_metrics <= 0 && st == MR_OK)
                st = mr_buf_puts(out, p->n_metrics < 0 ? "none" : "");
            for (int k = 0; k < p->n_metrics && st == MR_OK; k++)
                st = mr_buf_printf(out, "%s%s", k ? "," : "", mr_gbdt_metric_name(p->metric[k]));
            if (st == MR_OK) st = mr_buf_puts(out, "\n");
            break;
        }
    }
    return st;
}
