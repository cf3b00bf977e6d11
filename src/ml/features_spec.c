/* Parses a features `steps:` sequence (an mr_value tree from YAML) into
 * ft_step records, checking step names, keys, types and ranges with
 * positions and did-you-mean hints, and the `keep` list against the steps.
 * Everything here needs no data: the features op runs it when millrace.yaml
 * is loaded. Column names are resolved later, at fit time, against the
 * training table. */
#include <stdio.h>
#include <string.h>

#include "ml/features_int.h"

static const char *const step_names[FT_STEP__COUNT] = {
    "impute", "standardize", "minmax", "log1p", "clip", "bucketize",
    "onehot", "ordinal", "hash", "target_encode", "drop",
};

/* Keys each step takes (NULL-terminated); "columns" is common to all. */
static const char *const keys_impute[] = {"columns", "strategy", "value", "indicator", NULL};
static const char *const keys_plain[] = {"columns", NULL};
static const char *const keys_clip[] = {"columns", "lo", "hi", NULL};
static const char *const keys_bucketize[] = {"columns", "n_bins", NULL};
static const char *const keys_onehot[] = {"columns", "top_k", "other", NULL};
static const char *const keys_ordinal[] = {"columns", "max_categories", NULL};
static const char *const keys_hash[] = {"columns", "n_features", "seed", "signed", NULL};
static const char *const keys_target[] = {"columns", "label", "folds", "smoothing", "seed", NULL};

static const char *const *const step_keys[FT_STEP__COUNT] = {
    keys_impute, keys_plain, keys_plain, keys_plain, keys_clip, keys_bucketize,
    keys_onehot, keys_ordinal, keys_hash, keys_target, keys_plain,
};

static const char *const strategy_names[] = {"mean", "median", "most_frequent", "constant"}; /* ft_strategy order */

/* Caps that keep a typo from allocating gigabytes of output columns. */
#define MAX_BINS 65536u
#define MAX_HASH_FEATURES (1u << 20)

const char *mr__ft_step_name(ft_step_kind k)
{
    return (unsigned)k < FT_STEP__COUNT ? step_names[k] : "?";
}

typedef struct pctx {
    const char *source;
    mr_error *err;
} pctx;

static mr_status perr_at(pctx *p, long line, long col, const char *hint_word, const char *const *cands, size_t n_cands,
                         const char *fmt, const char *a, const char *b)
{
    mr_status rc = MR_ERR(p->err, MR_E_PARSE, fmt, a, b);
    if (hint_word && cands) {
        const char *best = mr_closest(hint_word, cands, n_cands);
        if (best) mr_error_hint(p->err, "did you mean '%s'?", best);
    }
    mr_error_at(p->err, p->source, line, col);
    return rc;
}

#define PERR(p, v, fmt, a, b) perr_at((p), (v) ? (v)->line : 0, (v) ? (v)->col : 0, NULL, NULL, 0, fmt, a, b)

/* What a value is, for "got ...": a scalar's text in quotes, else its kind. */
static const char *got(const mr_value *v, char *buf, size_t cap)
{
    if (!v) return "nothing";
    if (v->kind == MR_V_MAP) return "a mapping";
    if (v->kind == MR_V_SEQ) return "a list";
    if (v->kind == MR_V_NULL || !v->str) return mr_vkind_name(v->kind);
    snprintf(buf, cap, "\"%s\"", v->str);
    return buf;
}

/* "features: STEP: 'KEY' must be WHAT, got ..." at v's position. */
static mr_status bad_value(pctx *p, const mr_value *v, const char *step, const char *key, const char *what)
{
    char g[96];
    mr_status rc = MR_ERR(p->err, MR_E_PARSE, "features: %s: '%s' must be %s, got %s", step, key, what,
                          got(v, g, sizeof(g)));
    mr_error_at(p->err, p->source, v->line, v->col);
    return rc;
}

static mr_status get_uint(pctx *p, const mr_value *v, const char *step, const char *key, uint32_t lo, uint32_t hi,
                          uint32_t *out)
{
    if (v->kind != MR_V_INT || v->u.i < (int64_t)lo || v->u.i > (int64_t)hi) {
        char range[64];
        snprintf(range, sizeof(range), "an integer in %u..%u", lo, hi);
        return bad_value(p, v, step, key, range);
    }
    *out = (uint32_t)v->u.i;
    return MR_OK;
}

static mr_status get_num(pctx *p, const mr_value *v, const char *step, const char *key, double *out)
{
    if (v->kind == MR_V_INT) *out = (double)v->u.i;
    else if (v->kind == MR_V_FLOAT) *out = v->u.f;
    else return bad_value(p, v, step, key, "a number");
    return MR_OK;
}

static mr_status get_bool(pctx *p, const mr_value *v, const char *step, const char *key, int *out)
{
    if (v->kind != MR_V_BOOL) return bad_value(p, v, step, key, "true or false");
    *out = v->u.b;
    return MR_OK;
}

static mr_status get_seed(pctx *p, const mr_value *v, const char *step, uint64_t *out)
{
    if (v->kind != MR_V_INT || v->u.i < 0) return bad_value(p, v, step, "seed", "a non-negative integer");
    *out = (uint64_t)v->u.i;
    return MR_OK;
}

static mr_status parse_columns(pctx *p, ft_step *st, const mr_value *v)
{
    const char *sn = step_names[st->kind];
    if (v->kind == MR_V_STR) {
        if (strcmp(v->str, "numeric") == 0) st->sel = FT_SEL_NUMERIC;
        else if (strcmp(v->str, "categorical") == 0) st->sel = FT_SEL_CATEGORICAL;
        else if (strcmp(v->str, "all") == 0) st->sel = FT_SEL_ALL;
        else {
            static const char *const sels[] = {"numeric", "categorical", "all"};
            return perr_at(p, v->line, v->col, v->str, sels, 3,
                           "features: %s: 'columns' is a list of names or one of numeric, categorical, all; got '%s'",
                           sn, v->str);
        }
        return MR_OK;
    }
    if (v->kind != MR_V_SEQ || v->n == 0)
        return bad_value(p, v, sn, "columns", "a non-empty list of column names or numeric, categorical, all");
    st->sel = FT_SEL_LIST;
    st->cols = mr_calloc(v->n, sizeof(char *));
    st->col_lines = mr_calloc(v->n, sizeof(long));
    st->col_cols = mr_calloc(v->n, sizeof(long));
    if (!st->cols || !st->col_lines || !st->col_cols) return MR_ERR(p->err, MR_E_NOMEM, "features: out of memory");
    for (size_t i = 0; i < v->n; i++) {
        const mr_value *c = v->items[i];
        if (c->kind != MR_V_STR || !c->str[0]) return bad_value(p, c, sn, "columns", "a list of column names (strings)");
        for (size_t j = 0; j < st->n_cols; j++)
            if (strcmp(st->cols[j], c->str) == 0)
                return PERR(p, c, "features: %s: column '%s' is listed twice", sn, c->str);
        st->cols[st->n_cols] = mr_strdup(c->str);
        if (!st->cols[st->n_cols]) return MR_ERR(p->err, MR_E_NOMEM, "features: out of memory");
        st->col_lines[st->n_cols] = c->line;
        st->col_cols[st->n_cols] = c->col;
        st->n_cols++;
    }
    return MR_OK;
}

static mr_status parse_params(pctx *p, ft_step *st, const mr_value *params)
{
    const char *sn = step_names[st->kind];
    const char *const *keys = step_keys[st->kind];
    size_t n_keys = 0;
    while (keys[n_keys]) n_keys++;
    mr_status rc;
    if (!params || params->kind != MR_V_MAP) {
        char g[96];
        return PERR(p, params, "features: %s: expected a mapping of parameters (at least 'columns'), got %s", sn,
                    got(params, g, sizeof(g)));
    }
    for (size_t i = 0; i < params->n; i++) {
        size_t k = 0;
        while (k < n_keys && strcmp(params->keys[i], keys[k]) != 0) k++;
        if (k == n_keys)
            return perr_at(p, params->key_lines[i], params->key_cols[i], params->keys[i], keys, n_keys,
                           "features: %s: unknown key '%s'", sn, params->keys[i]);
    }
    const mr_value *cols = mr_value_get(params, "columns");
    if (!cols) return PERR(p, params, "features: %s: 'columns' is required%s", sn, "");
    if ((rc = parse_columns(p, st, cols)) != MR_OK) return rc;
    const mr_value *v;
    switch (st->kind) {
    case FT_STEP_IMPUTE:
        st->strategy = FT_MEAN;
        if ((v = mr_value_get(params, "strategy"))) {
            const char *const *strat = strategy_names;
            size_t k = 0;
            while (v->kind == MR_V_STR && k < 4 && strcmp(v->str, strat[k]) != 0) k++;
            if (v->kind != MR_V_STR || k == 4)
            {
                char g[96];
                return perr_at(p, v->line, v->col, v->kind == MR_V_STR ? v->str : NULL, strat, 4,
                               "features: %s: 'strategy' must be mean, median, most_frequent or constant, got %s", sn,
                               got(v, g, sizeof(g)));
            }
            st->strategy = (ft_strategy)k;
        }
        if ((v = mr_value_get(params, "value"))) {
            if (st->strategy != FT_CONSTANT)
                return PERR(p, v, "features: %s: 'value' needs strategy constant, got strategy %s", sn,
                            mr_value_get(params, "strategy") ? strategy_names[st->strategy] : "mean (the default)");
            if (v->kind == MR_V_INT || v->kind == MR_V_FLOAT) {
                st->has_fill_num = 1;
                st->fill_num = v->kind == MR_V_INT ? (double)v->u.i : v->u.f;
            }
            if (v->kind != MR_V_NULL && v->kind != MR_V_MAP && v->kind != MR_V_SEQ && v->str) {
                st->fill_str = mr_strdup(v->str);
                if (!st->fill_str) return MR_ERR(p->err, MR_E_NOMEM, "features: out of memory");
                st->has_fill_str = 1;
            }
            if (!st->has_fill_num && !st->has_fill_str)
                return bad_value(p, v, sn, "value", "a number or a string");
        }
        if ((v = mr_value_get(params, "indicator")) && (rc = get_bool(p, v, sn, "indicator", &st->indicator)) != MR_OK)
            return rc;
        break;
    case FT_STEP_CLIP: {
        const mr_value *lo = mr_value_get(params, "lo"), *hi = mr_value_get(params, "hi");
        st->lo = -INFINITY;
        st->hi = INFINITY;
        if (!lo && !hi) return PERR(p, params, "features: %s: give 'lo', 'hi' or both%s", sn, "");
        if (lo && (rc = get_num(p, lo, sn, "lo", &st->lo)) != MR_OK) return rc;
        if (hi && (rc = get_num(p, hi, sn, "hi", &st->hi)) != MR_OK) return rc;
        if (isnan(st->lo) || isnan(st->hi) || st->lo > st->hi) {
            char g[128];
            snprintf(g, sizeof(g), "lo %s and hi %s", lo && lo->str ? lo->str : "-inf", hi && hi->str ? hi->str : "inf");
            return PERR(p, hi ? hi : lo, "features: %s: needs lo <= hi, got %s", sn, g);
        }
        break;
    }
    case FT_STEP_BUCKETIZE:
        st->n_bins = 5;
        if ((v = mr_value_get(params, "n_bins")) && (rc = get_uint(p, v, sn, "n_bins", 2, MAX_BINS, &st->n_bins)) != MR_OK)
            return rc;
        break;
    case FT_STEP_ONEHOT:
        st->top_k = 20;
        st->other = 1;
        if ((v = mr_value_get(params, "top_k")) && (rc = get_uint(p, v, sn, "top_k", 0, MAX_HASH_FEATURES, &st->top_k)) != MR_OK)
            return rc;
        if ((v = mr_value_get(params, "other")) && (rc = get_bool(p, v, sn, "other", &st->other)) != MR_OK) return rc;
        break;
    case FT_STEP_ORDINAL:
        st->max_categories = 0;
        if ((v = mr_value_get(params, "max_categories")) &&
            (rc = get_uint(p, v, sn, "max_categories", 0, UINT32_MAX - 1, &st->max_categories)) != MR_OK)
            return rc;
        break;
    case FT_STEP_HASH:
        st->n_features = 16;
        if ((v = mr_value_get(params, "n_features")) &&
            (rc = get_uint(p, v, sn, "n_features", 1, MAX_HASH_FEATURES, &st->n_features)) != MR_OK)
            return rc;
        if ((v = mr_value_get(params, "seed")) && (rc = get_seed(p, v, sn, &st->seed)) != MR_OK) return rc;
        if ((v = mr_value_get(params, "signed")) && (rc = get_bool(p, v, sn, "signed", &st->hash_signed)) != MR_OK)
            return rc;
        break;
    case FT_STEP_TARGET:
        st->folds = 5;
        st->smoothing = 10.0;
        if ((v = mr_value_get(params, "label"))) {
            if (v->kind != MR_V_STR || !v->str[0]) return bad_value(p, v, sn, "label", "a column name");
            if (!(st->label = mr_strdup(v->str))) return MR_ERR(p->err, MR_E_NOMEM, "features: out of memory");
        }
        if ((v = mr_value_get(params, "folds")) && (rc = get_uint(p, v, sn, "folds", 2, FT_MAX_FOLDS, &st->folds)) != MR_OK)
            return rc;
        if ((v = mr_value_get(params, "smoothing"))) {
            if ((rc = get_num(p, v, sn, "smoothing", &st->smoothing)) != MR_OK) return rc;
            if (!(st->smoothing >= 0.0) || !isfinite(st->smoothing))
                return bad_value(p, v, sn, "smoothing", "a finite number >= 0");
        }
        if ((v = mr_value_get(params, "seed")) && (rc = get_seed(p, v, sn, &st->seed)) != MR_OK) return rc;
        break;
    default:
        break;
    }
    return MR_OK;
}

static void step_free(ft_step *st)
{
    for (size_t i = 0; i < st->n_cols; i++) mr_free(st->cols[i]);
    mr_free(st->cols);
    mr_free(st->col_lines);
    mr_free(st->col_cols);
    mr_free(st->fill_str);
    mr_free(st->label);
}

static void keep_free(mr_features_spec *s)
{
    for (size_t i = 0; i < s->n_keep; i++) mr_free(s->keep[i]);
    mr_free(s->keep);
    mr_free(s->keep_lines);
    mr_free(s->keep_cols);
    s->keep = NULL;
    s->keep_lines = s->keep_cols = NULL;
    s->n_keep = 0;
}

void mr_features_spec_free(mr_features_spec *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_steps; i++) step_free(&s->steps[i]);
    mr_free(s->steps);
    keep_free(s);
    mr_free(s->source);
    mr_free(s);
}

size_t mr_features_spec_n_steps(const mr_features_spec *s)
{
    return s ? s->n_steps : 0;
}

mr_status mr_features_spec_parse(const mr_value *steps, const char *source, mr_features_spec **out, mr_error *err)
{
    mr_status rc = MR_OK;
    pctx p = {.source = source, .err = err};
    *out = NULL;
    mr_features_spec *s = mr_calloc(1, sizeof(*s));
    if (!s) return MR_ERR(err, MR_E_NOMEM, "features: out of memory");
    if (source && !(s->source = mr_strdup(source))) {
        rc = MR_ERR(err, MR_E_NOMEM, "features: out of memory");
        goto fail;
    }
    if (!steps || steps->kind != MR_V_SEQ) {
        char g[96];
        rc = PERR(&p, steps, "features: steps must be a list, e.g. - standardize: {columns: numeric}; got %s%s",
                  got(steps, g, sizeof(g)), "");
        goto fail;
    }
    if (steps->n && !(s->steps = mr_calloc(steps->n, sizeof(ft_step)))) {
        rc = MR_ERR(err, MR_E_NOMEM, "features: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < steps->n; i++) {
        const mr_value *item = steps->items[i];
        ft_step *st = &s->steps[s->n_steps++];
        if (item->kind != MR_V_MAP || item->n != 1) {
            char g[96];
            if (item->kind == MR_V_MAP) snprintf(g, sizeof(g), "a mapping of %zu keys", item->n);
            rc = PERR(&p, item, "features: each step must be a one-key mapping {step: {params}}, got %s%s",
                      item->kind == MR_V_MAP ? g : got(item, g, sizeof(g)), "");
            goto fail;
        }
        const char *name = item->keys[0];
        size_t k = 0;
        while (k < FT_STEP__COUNT && strcmp(name, step_names[k]) != 0) k++;
        st->line = item->key_lines[0];
        st->col = item->key_cols[0];
        if (k == FT_STEP__COUNT) {
            rc = perr_at(&p, st->line, st->col, name, step_names, FT_STEP__COUNT, "features: unknown step '%s'%s", name,
                         "");
            goto fail;
        }
        st->kind = (ft_step_kind)k;
        if ((rc = parse_params(&p, st, item->items[0])) != MR_OK) goto fail;
    }
    *out = s;
    return MR_OK;
fail:
    mr_features_spec_free(s);
    return rc;
}

/* Does a step of this kind, naming a column explicitly, always make a
 * feature under the column's own name (or fail on the column's type)? The
 * numeric steps and ordinal do; impute depends on the column's type (a
 * numeric impute keeps the name, a string impute alone makes no feature),
 * so the fit decides it (features_fit.c, account()); onehot, hash and
 * target_encode make outputs of other names; drop makes none. */
static int keeps_own_name(ft_step_kind k)
{
    switch (k) {
    case FT_STEP_STANDARDIZE:
    case FT_STEP_MINMAX:
    case FT_STEP_LOG1P:
    case FT_STEP_CLIP:
    case FT_STEP_BUCKETIZE:
    case FT_STEP_ORDINAL: return 1;
    default: return 0;
    }
}

/* A kept column named by a step that would make a feature of its name: the
 * copy under keep takes that name. Needs no data, so it is found when the
 * spec is loaded; the same rule, with the column's type known, is checked
 * again by the fit for impute. */
static mr_status keep_conflicts(pctx *p, const mr_features_spec *s)
{
    for (size_t k = 0; k < s->n_keep; k++)
        for (size_t j = 0; j < s->n_steps; j++) {
            const ft_step *st = &s->steps[j];
            if (st->sel != FT_SEL_LIST || !keeps_own_name(st->kind)) continue;
            for (size_t i = 0; i < st->n_cols; i++) {
                if (strcmp(st->cols[i], s->keep[k]) != 0) continue;
                mr_status rc = MR_ERR(p->err, MR_E_SCHEMA,
                                      "features: %s: column '%s' is under keep (copied unchanged, under its own name, "
                                      "into every output), so it cannot also be a feature of that name",
                                      step_names[st->kind], s->keep[k]);
                mr_error_hint(p->err,
                              "to keep '%s' as an id only, take it out of this step's columns; to use it as a feature, "
                              "take it out of keep",
                              s->keep[k]);
                mr_error_at(p->err, p->source, st->col_lines[i], st->col_cols[i]);
                mr_error_key(p->err, s->keep[k]);
                return rc;
            }
        }
    return MR_OK;
}

mr_status mr_features_spec_set_keep(mr_features_spec *s, const mr_value *keep, mr_error *err)
{
    pctx p = {.source = s->source, .err = err};
    char g[96];
    keep_free(s);
    if (!keep) return MR_OK;
    const mr_value *const *items = &keep;
    size_t n = 1;
    if (keep->kind == MR_V_SEQ) {
        items = (const mr_value *const *)keep->items;
        n = keep->n;
    }
    if (n && (!(s->keep = mr_calloc(n, sizeof(char *))) || !(s->keep_lines = mr_calloc(n, sizeof(long))) ||
              !(s->keep_cols = mr_calloc(n, sizeof(long))))) {
        keep_free(s);
        return MR_ERR(err, MR_E_NOMEM, "features: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const mr_value *c = items[i];
        mr_status rc = MR_OK;
        if (c->kind != MR_V_STR || !c->str[0])
            rc = PERR(&p, c, "features: keep: expected a column name or a list of them, got %s%s", got(c, g, sizeof(g)), "");
        for (size_t j = 0; rc == MR_OK && j < s->n_keep; j++)
            if (strcmp(s->keep[j], c->str) == 0)
                rc = PERR(&p, c, "features: keep: column '%s' is listed twice%s", c->str, "");
        if (rc == MR_OK && !(s->keep[s->n_keep] = mr_strdup(c->str)))
            rc = MR_ERR(err, MR_E_NOMEM, "features: out of memory");
        if (rc != MR_OK) {
            keep_free(s);
            return rc;
        }
        s->keep_lines[s->n_keep] = c->line;
        s->keep_cols[s->n_keep] = c->col;
        s->n_keep++;
    }
    mr_status rc = keep_conflicts(&p, s);
    if (rc != MR_OK) keep_free(s);
    return rc;
}
