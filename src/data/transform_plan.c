/* Transform plans: parsing the YAML step list into steps (expressions are
 * parsed here) and binding them to the input schemas, which type-checks every
 * step and computes each step's output schema before any row is read.
 * Running lives in transform_run.c. */
#include "transform_int.h"
#include "millrace/value.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

static const char *const kind_names[] = {"filter", "select", "rename", "derive", "join", "aggregate", "sort", "limit"};
#define N_KINDS (sizeof(kind_names) / sizeof(kind_names[0]))
static const char *const how_names[] = {"inner", "left", "semi", "anti"};
static const char *const agg_names[] = {"count", "count", "sum", "mean", "min", "max", "first", "last", "std",
                                        "count_distinct"};

/* ---- small helpers --------------------------------------------------------- */

void mr__xf_schema_free(xf_schema *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) mr_free(s->names[i]);
    mr_free(s->names);
    mr_free(s->types);
    mr_strindex_deinit(&s->ix);
    memset(s, 0, sizeof(*s));
}

static const char *schema_name_of(const void *ctx, size_t id) { return ((const xf_schema *)ctx)->names[id]; }

static mr_status schema_init(xf_schema *s, size_t cap)
{
    memset(s, 0, sizeof(*s));
    s->names = mr_calloc(cap ? cap : 1, sizeof(char *));
    s->types = mr_calloc(cap ? cap : 1, sizeof(mr_dtype));
    return s->names && s->types ? MR_OK : MR_E_NOMEM;
}

/* Appends (name, type); s must have room (schema_init capacity). */
static mr_status schema_push(xf_schema *s, const char *name, mr_dtype t)
{
    char *c = mr_strdup(name);
    if (!c) return MR_E_NOMEM;
    s->names[s->n] = c;
    s->types[s->n++] = t;
    return mr_strindex_add(&s->ix, s->n - 1, schema_name_of, s, NULL); /* a repeated name keeps its first index */
}

mr_status mr__xf_schema_copy(xf_schema *dst, const xf_schema *src)
{
    mr_status rc = schema_init(dst, src->n);
    for (size_t i = 0; rc == MR_OK && i < src->n; i++) rc = schema_push(dst, src->names[i], src->types[i]);
    if (rc != MR_OK) mr__xf_schema_free(dst);
    return rc;
}

static ssize_t find_col(const xf_schema *s, const char *name) { return mr_strindex_find(&s->ix, name, schema_name_of, s); }

void mr__xf_format_bytes(uint64_t n, char *buf, size_t buf_len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    if (u == 0) snprintf(buf, buf_len, "%llu bytes", (unsigned long long)n);
    else if (v == (double)(uint64_t)v) snprintf(buf, buf_len, "%.0f %s", v, units[u]);
    else snprintf(buf, buf_len, "%.1f %s", v, units[u]);
}

static uint64_t column_bytes(const mr_column *c)
{
    uint64_t b = c->valid ? (c->n + 7) / 8 : 0;
    if (c->type != MR_T_STRING) return b + (uint64_t)c->n * mr_dtype_width(c->type);
    if (c->codes) return b + (uint64_t)c->n * 4 + (c->dict ? column_bytes(c->dict) : 0);
    return b + ((uint64_t)c->n + 1) * 8 + c->bytes_len;
}

uint64_t mr__xf_table_bytes(const mr_table *t)
{
    uint64_t b = 0;
    for (size_t i = 0; t && i < t->n_cols; i++) b += column_bytes(t->cols[i]);
    return b;
}

/* Positions an error at a YAML node unless it already has a line. An
 * expression error's col is a byte column inside the expression (already in
 * the message), so it is replaced by the YAML column. */
static void at_pos(mr_error *err, long line, long col)
{
    if (!err || !line || err->line) return;
    err->line = line;
    err->col = col;
}

static mr_status step_err(mr_error *err, mr_status code, const xf_step *s, long line, long col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static mr_status step_err(mr_error *err, mr_status code, const xf_step *s, long line, long col, const char *fmt, ...)
{
    char what[MR_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (err && !mr_error_is_set(err)) {
        MR_ERR(err, code, "%s: %s", s->label ? s->label : "transform", what);
        at_pos(err, line ? line : s->line, line ? col : s->col);
    }
    return code;
}

static mr_status nomem(mr_error *err, const xf_step *s)
{
    return step_err(err, MR_E_NOMEM, s, 0, 0, "out of memory");
}

/* Scalar text of a YAML value (strings as is, numbers and booleans as
 * written); NULL for maps, sequences and null. Caller frees. */
static char *scalar_dup(const mr_value *v)
{
    if (!v) return NULL;
    if (v->kind == MR_V_STR) return mr_strdup(v->str ? v->str : "");
    if (v->kind != MR_V_INT && v->kind != MR_V_FLOAT && v->kind != MR_V_BOOL) return NULL;
    mr_buf b;
    mr_buf_init(&b);
    if (mr_value_scalar_text(v, &b) != MR_OK || !b.data) { /* out of memory: the caller says so */
        mr_buf_free(&b);
        return NULL;
    }
    return b.data;
}

static char *trim_dup(const char *s, size_t len)
{
    while (len && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    return mr_strndup(s, len);
}

/* A list of names: a sequence of strings or one string. */
static mr_status parse_names(xf_step *s, const mr_value *v, const char *what, mr_error *err)
{
    size_t n = v->kind == MR_V_SEQ ? v->n : 1;
    if (v->kind != MR_V_SEQ && v->kind != MR_V_STR)
        return step_err(err, MR_E_PARSE, s, v->line, v->col, "%s must be a list of column names, got %s", what,
                        mr_vkind_name(v->kind));
    s->names = mr_calloc(n ? n : 1, sizeof(char *));
    s->lines = mr_calloc(n ? n : 1, sizeof(long));
    s->cols = mr_calloc(n ? n : 1, sizeof(long));
    if (!s->names || !s->lines || !s->cols) return nomem(err, s);
    for (size_t i = 0; i < n; i++) {
        const mr_value *it = v->kind == MR_V_SEQ ? v->items[i] : v;
        if (it->kind != MR_V_STR || !it->str || !it->str[0])
            return step_err(err, MR_E_PARSE, s, it->line, it->col, "%s must be column names, got %s", what,
                            mr_vkind_name(it->kind));
        s->names[i] = mr_strdup(it->str);
        if (!s->names[i]) return nomem(err, s);
        s->lines[i] = it->line;
        s->cols[i] = it->col;
        s->n_names = i + 1;
    }
    return MR_OK;
}

static mr_status parse_expr(xf_step *s, const char *text, const char *label, const mr_value *v, mr_expr **out,
                            mr_error *err)
{
    mr_status rc = mr_expr_parse(text, strlen(text), label, out, err);
    if (rc != MR_OK) at_pos(err, v->line, v->col);
    (void)s;
    return rc;
}

static mr_status parse_filter(xf_step *s, const mr_value *v, mr_error *err)
{
    char *text = scalar_dup(v);
    if (!text && v->kind == MR_V_STR) return nomem(err, s); /* out of memory, not a bad value */
    if (!text || v->kind != MR_V_STR) {
        mr_free(text);
        return step_err(err, MR_E_PARSE, s, v->line, v->col, "expected an expression string, got %s",
                        mr_vkind_name(v->kind));
    }
    mr_status rc = parse_expr(s, text, s->label, v, &s->expr, err);
    mr_free(text);
    return rc;
}

/* rename: {old: new}; derive: {name: EXPR} */
static mr_status parse_map_step(xf_step *s, const mr_value *v, mr_error *err)
{
    if (v->kind != MR_V_MAP || v->n == 0)
        return step_err(err, MR_E_PARSE, s, v->line, v->col, "expected a mapping of %s, got %s",
                        s->kind == XS_RENAME ? "old: new column names" : "name: expression",
                        v->kind == MR_V_MAP ? "an empty mapping" : mr_vkind_name(v->kind));
    size_t n = v->n;
    s->names = mr_calloc(n, sizeof(char *));
    s->names2 = mr_calloc(n, sizeof(char *));
    s->exprs = mr_calloc(n, sizeof(mr_expr *));
    s->lines = mr_calloc(n, sizeof(long));
    s->cols = mr_calloc(n, sizeof(long));
    if (!s->names || !s->names2 || !s->exprs || !s->lines || !s->cols) return nomem(err, s);
    for (size_t i = 0; i < n; i++) {
        const mr_value *it = v->items[i];
        s->names[i] = mr_strdup(v->keys[i]);
        if (!s->names[i]) return nomem(err, s);
        s->n_names = i + 1;
        s->lines[i] = v->key_lines ? v->key_lines[i] : it->line;
        s->cols[i] = v->key_cols ? v->key_cols[i] : it->col;
        char *text = scalar_dup(it);
        int scalar = it->kind == MR_V_STR || it->kind == MR_V_INT || it->kind == MR_V_FLOAT || it->kind == MR_V_BOOL;
        if (!text && scalar) return nomem(err, s); /* out of memory copying it, not a bad value */
        if (!text || (s->kind == XS_RENAME && it->kind != MR_V_STR) || !text[0]) {
            mr_free(text);
            return step_err(err, MR_E_PARSE, s, it->line, it->col, "'%s': expected %s, got %s", v->keys[i],
                            s->kind == XS_RENAME ? "a new column name" : "an expression",
                            text ? "an empty string" : mr_vkind_name(it->kind));
        }
        if (s->kind == XS_RENAME) {
            s->names2[i] = text;
            continue;
        }
        char *label = mr_asprintf("step %d (derive '%s')", s->index, v->keys[i]);
        mr_status rc = label ? parse_expr(s, text, label, it, &s->exprs[i], err) : nomem(err, s);
        mr_free(label);
        mr_free(text);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

static mr_status parse_join(xf_step *s, const mr_value *v, mr_error *err)
{
    static const char *const keys[] = {"with", "on", "how"};
    if (v->kind != MR_V_MAP)
        return step_err(err, MR_E_PARSE, s, v->line, v->col, "expected a mapping {with, on, how}, got %s",
                        mr_vkind_name(v->kind));
    for (size_t i = 0; i < v->n; i++) {
        int known = 0;
        for (size_t k = 0; k < 3; k++) known |= !strcmp(v->keys[i], keys[k]);
        if (known) continue;
        const char *near = mr_closest(v->keys[i], keys, 3);
        mr_status rc = step_err(err, MR_E_PARSE, s, v->key_lines ? v->key_lines[i] : 0, v->key_cols ? v->key_cols[i] : 0,
                                "unknown join setting '%s' (expected with, on, how)", v->keys[i]);
        if (near) mr_error_hint(err, "did you mean '%s'?", near);
        return rc;
    }
    const mr_value *with = mr_value_get(v, "with"), *on = mr_value_get(v, "on"), *how = mr_value_get(v, "how");
    if (!with || with->kind != MR_V_STR || !with->str || !with->str[0])
        return step_err(err, MR_E_PARSE, s, with ? with->line : 0, with ? with->col : 0,
                        "'with' must name the input to join with");
    if (!on) return step_err(err, MR_E_PARSE, s, 0, 0, "'on' must list the key columns");
    s->with = mr_strdup(with->str);
    if (!s->with) return nomem(err, s);
    mr_status rc = parse_names(s, on, "'on'", err);
    if (rc != MR_OK) return rc;
    if (s->n_names == 0) return step_err(err, MR_E_PARSE, s, on->line, on->col, "'on' must list at least one key");
    s->how = XJ_INNER;
    if (how) {
        size_t k = 0;
        while (k < 4 && !(how->kind == MR_V_STR && how->str && !strcmp(how->str, how_names[k]))) k++;
        if (k == 4) {
            rc = step_err(err, MR_E_PARSE, s, how->line, how->col, "'how' must be inner, left, semi or anti, got '%s'",
                          how->kind == MR_V_STR && how->str ? how->str : mr_vkind_name(how->kind));
            if (how->kind == MR_V_STR && how->str) {
                const char *near = mr_closest(how->str, how_names, 4);
                if (near) mr_error_hint(err, "did you mean '%s'?", near);
            }
            return rc;
        }
        s->how = (xf_how)k;
    }
    return MR_OK;
}

/* "fn(arg)" -> fn and argument text (trimmed; "" for none). */
static mr_status parse_agg(xf_step *s, xf_agg *a, const char *name, const mr_value *it, mr_error *err)
{
    static const char *const fns[] = {"count", "sum", "mean", "avg", "min", "max", "first", "last", "std", "stddev",
                                      "count_distinct"};
    static const xf_aggfn fn_ids[] = {AG_COUNT, AG_SUM, AG_MEAN, AG_MEAN, AG_MIN, AG_MAX, AG_FIRST, AG_LAST, AG_STD,
                                      AG_STD, AG_COUNT_DISTINCT};
    const size_t n_fns = sizeof(fns) / sizeof(fns[0]);
    a->name = mr_strdup(name);
    if (!a->name) return nomem(err, s);
    const char *t = it->kind == MR_V_STR && it->str ? it->str : NULL;
    const char *open = t ? strchr(t, '(') : NULL;
    size_t tl = t ? strlen(t) : 0;
    while (tl && (t[tl - 1] == ' ' || t[tl - 1] == '\t')) tl--;
    if (!t || !open || tl == 0 || t[tl - 1] != ')')
        return step_err(err, MR_E_PARSE, s, it->line, it->col,
                        "'%s': expected an aggregate call like \"sum(x)\" or \"count()\", got %s", name,
                        t ? "text without one" : mr_vkind_name(it->kind));
    char *fname = trim_dup(t, (size_t)(open - t));
    if (!fname) return nomem(err, s);
    for (char *p = fname; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    size_t k = 0;
    while (k < n_fns && strcmp(fname, fns[k])) k++;
    if (k == n_fns) {
        const char *near = mr_closest(fname, fns, n_fns);
        mr_status rc = step_err(err, MR_E_NOT_FOUND, s, it->line, it->col,
                                "'%s': unknown aggregate function '%s' (count, sum, mean, min, max, first, last, std, "
                                "count_distinct)",
                                name, fname);
        if (near) mr_error_hint(err, "did you mean '%s'?", near);
        mr_free(fname);
        return rc;
    }
    mr_free(fname);
    a->fn = fn_ids[k];
    char *arg = trim_dup(open + 1, (size_t)(t + tl - 1 - (open + 1)));
    if (!arg) return nomem(err, s);
    mr_status rc = MR_OK;
    if (!arg[0]) {
        if (a->fn == AG_COUNT) a->fn = AG_COUNT_ROWS;
        else rc = step_err(err, MR_E_PARSE, s, it->line, it->col, "'%s': %s() needs an argument", name, agg_names[a->fn]);
    } else {
        char *label = mr_asprintf("step %d (aggregate '%s')", s->index, name);
        rc = label ? parse_expr(s, arg, label, it, &a->arg, err) : nomem(err, s);
        mr_free(label);
    }
    mr_free(arg);
    return rc;
}

static mr_status parse_aggregate(xf_step *s, const mr_value *v, mr_error *err)
{
    if (v->kind != MR_V_MAP)
        return step_err(err, MR_E_PARSE, s, v->line, v->col, "expected a mapping {by: [...], name: \"fn(x)\"}, got %s",
                        mr_vkind_name(v->kind));
    const mr_value *by = mr_value_get(v, "by");
    mr_status rc;
    if (by) {
        rc = parse_names(s, by, "'by'", err);
        if (rc != MR_OK) return rc;
    }
    s->aggs = mr_calloc(v->n ? v->n : 1, sizeof(xf_agg));
    if (!s->aggs) return nomem(err, s);
    for (size_t i = 0; i < v->n; i++) {
        if (!strcmp(v->keys[i], "by")) continue;
        xf_agg *a = &s->aggs[s->n_aggs++];
        rc = parse_agg(s, a, v->keys[i], v->items[i], err);
        if (rc != MR_OK) return rc;
    }
    if (s->n_aggs == 0 && s->n_names == 0)
        return step_err(err, MR_E_PARSE, s, v->line, v->col, "needs 'by' keys or at least one aggregate");
    return MR_OK;
}

static mr_status parse_sort(xf_step *s, const mr_value *v, mr_error *err)
{
    mr_status rc = parse_names(s, v, "sort keys", err);
    if (rc != MR_OK) return rc;
    s->desc = mr_calloc(s->n_names ? s->n_names : 1, sizeof(int));
    if (!s->desc) return nomem(err, s);
    for (size_t i = 0; i < s->n_names; i++) {
        char *nm = s->names[i];
        size_t len = strlen(nm);
        while (len && nm[len - 1] == ' ') len--;
        const char *sp = NULL;
        for (size_t k = len; k-- > 0;)
            if (nm[k] == ' ') {
                sp = nm + k;
                break;
            }
        if (sp) {
            const char *dir = sp + 1;
            size_t dl = (size_t)(nm + len - dir);
            if (dl == 4 && !strncasecmp(dir, "desc", 4)) s->desc[i] = 1;
            else if (!(dl == 3 && !strncasecmp(dir, "asc", 3)))
                return step_err(err, MR_E_PARSE, s, s->lines[i], s->cols[i],
                                "sort key '%s': expected \"column\", \"column asc\" or \"column desc\"", nm);
            len = (size_t)(sp - nm);
            while (len && nm[len - 1] == ' ') len--;
        }
        nm[len] = '\0';
        if (!len) return step_err(err, MR_E_PARSE, s, s->lines[i], s->cols[i], "empty sort key");
    }
    return MR_OK;
}

static void step_free(xf_step *s)
{
    mr_free(s->label);
    mr_expr_free(s->expr);
    for (size_t i = 0; i < s->n_names; i++) {
        mr_free(s->names[i]);
        if (s->names2) mr_free(s->names2[i]);
        if (s->exprs) mr_expr_free(s->exprs[i]);
    }
    mr_free(s->names);
    mr_free(s->names2);
    mr_free(s->exprs);
    mr_free(s->lines);
    mr_free(s->cols);
    mr_free(s->desc);
    mr_free(s->with);
    for (size_t i = 0; i < s->n_aggs; i++) {
        mr_free(s->aggs[i].name);
        mr_expr_free(s->aggs[i].arg);
    }
    mr_free(s->aggs);
    mr__xf_schema_free(&s->in);
    mr__xf_schema_free(&s->out);
    mr__xf_schema_free(&s->right);
    mr_free(s->key_idx);
    mr_free(s->rkey_idx);
    mr_free(s->rkeep);
}

void mr_transform_free(mr_transform *x)
{
    if (!x) return;
    for (size_t i = 0; i < x->n_steps; i++) step_free(&x->steps[i]);
    mr_free(x->steps);
    mr__xf_schema_free(&x->input);
    mr_free(x);
}

mr_status mr_transform_parse(const mr_value *steps, mr_transform **out, mr_error *err)
{
    mr_status rc = MR_OK;
    *out = NULL;
    if (!steps || steps->kind != MR_V_SEQ) {
        rc = MR_ERR(err, MR_E_PARSE, "transform: 'steps' must be a list of steps, got %s",
                    steps ? mr_vkind_name(steps->kind) : "nothing");
        if (steps) at_pos(err, steps->line, steps->col);
        return rc;
    }
    mr_transform *x = mr_calloc(1, sizeof(*x));
    if (x) x->steps = mr_calloc(steps->n ? steps->n : 1, sizeof(xf_step));
    if (!x || !x->steps) {
        mr_free(x);
        return MR_ERR(err, MR_E_NOMEM, "transform: out of memory");
    }
    for (size_t i = 0; i < steps->n; i++) {
        const mr_value *sv = steps->items[i];
        xf_step *s = &x->steps[x->n_steps++];
        s->index = (int)i + 1;
        s->line = sv->line;
        s->col = sv->col;
        if (sv->kind != MR_V_MAP || sv->n != 1) {
            s->label = mr_asprintf("step %d", s->index);
            rc = step_err(err, MR_E_PARSE, s, 0, 0,
                          "a step is a mapping with exactly one key (filter, select, rename, derive, join, aggregate, "
                          "sort, limit), got %s",
                          sv->kind == MR_V_MAP ? "a mapping with several keys" : mr_vkind_name(sv->kind));
            goto fail;
        }
        const char *kname = sv->keys[0];
        const mr_value *v = sv->items[0];
        size_t k = 0;
        while (k < N_KINDS && strcmp(kname, kind_names[k])) k++;
        if (k == N_KINDS) {
            s->label = mr_asprintf("step %d", s->index);
            const char *near = mr_closest(kname, kind_names, N_KINDS);
            rc = step_err(err, MR_E_NOT_FOUND, s, 0, 0, "unknown step '%s'", kname);
            if (near) mr_error_hint(err, "did you mean '%s'?", near);
            goto fail;
        }
        s->kind = (xf_kind)k;
        if (s->kind == XS_DERIVE && v->kind == MR_V_MAP && v->n == 1)
            s->label = mr_asprintf("step %d (derive '%s')", s->index, v->keys[0]);
        else if (s->kind == XS_JOIN && mr_value_get(v, "with") && mr_value_get(v, "with")->kind == MR_V_STR)
            s->label = mr_asprintf("step %d (join '%s')", s->index, mr_value_get(v, "with")->str);
        else
            s->label = mr_asprintf("step %d (%s)", s->index, kind_names[k]);
        if (!s->label) {
            rc = MR_ERR(err, MR_E_NOMEM, "transform: out of memory");
            goto fail;
        }
        switch (s->kind) {
        case XS_FILTER: rc = parse_filter(s, v, err); break;
        case XS_SELECT:
            rc = parse_names(s, v, "select", err);
            if (rc == MR_OK && s->n_names == 0)
                rc = step_err(err, MR_E_PARSE, s, v->line, v->col, "select needs at least one column");
            break;
        case XS_RENAME:
        case XS_DERIVE: rc = parse_map_step(s, v, err); break;
        case XS_JOIN: rc = parse_join(s, v, err); break;
        case XS_AGGREGATE: rc = parse_aggregate(s, v, err); break;
        case XS_SORT:
            rc = parse_sort(s, v, err);
            if (rc == MR_OK && s->n_names == 0)
                rc = step_err(err, MR_E_PARSE, s, v->line, v->col, "sort needs at least one key");
            break;
        case XS_LIMIT:
            if (v->kind != MR_V_INT || v->u.i < 0)
                rc = step_err(err, MR_E_PARSE, s, v->line, v->col, "expected a row count >= 0, got %s",
                              v->kind == MR_V_INT ? "a negative number" : mr_vkind_name(v->kind));
            else s->limit = (uint64_t)v->u.i;
            break;
        }
        if (rc != MR_OK) goto fail;
    }
    *out = x;
    return MR_OK;
fail:
    mr_transform_free(x);
    return rc;
}

/* ---- binding ----------------------------------------------------------------- */

static mr_status unknown_col(const xf_step *s, const xf_schema *sch, const char *name, const char *where, long line,
                             long col, mr_error *err)
{
    mr_status rc = step_err(err, MR_E_NOT_FOUND, s, line, col, "unknown column '%s'%s", name, where);
    const char *near = mr_closest(name, (const char *const *)sch->names, sch->n);
    if (near) mr_error_hint(err, "did you mean '%s'?", near);
    return rc;
}

/* Re-indexes out's names (they may have been renamed in place) and fails on
 * the first name that repeats an earlier one. */
static mr_status check_dups(const xf_step *s, xf_schema *out, const char *why, mr_error *err)
{
    mr_strindex_clear(&out->ix);
    for (size_t i = 0; i < out->n; i++) {
        size_t dup;
        if (mr_strindex_add(&out->ix, i, schema_name_of, out, &dup) != MR_OK) return nomem(err, s);
        if (dup != SIZE_MAX)
            return step_err(err, MR_E_SCHEMA, s, 0, 0, "duplicate output column '%s'%s", out->names[i], why);
    }
    return MR_OK;
}

static mr_status bind_expr(const xf_step *s, mr_expr *e, const xf_schema *in, unsigned flags, long line, long col,
                           mr_error *err)
{
    mr_status rc = mr_expr_bind(e, (const char *const *)in->names, in->types, in->n, flags, err);
    if (rc != MR_OK) at_pos(err, line ? line : s->line, line ? col : s->col);
    return rc;
}

/* Resolves names[] against in into *idx_out (did-you-mean on failure). */
static mr_status resolve_keys(xf_step *s, const xf_schema *in, mr_error *err)
{
    s->key_idx = mr_calloc(s->n_names ? s->n_names : 1, sizeof(size_t));
    if (!s->key_idx) return nomem(err, s);
    for (size_t i = 0; i < s->n_names; i++) {
        ssize_t k = find_col(in, s->names[i]);
        if (k < 0) return unknown_col(s, in, s->names[i], "", s->lines[i], s->cols[i], err);
        for (size_t j = 0; j < i; j++)
            if (s->key_idx[j] == (size_t)k)
                return step_err(err, MR_E_SCHEMA, s, s->lines[i], s->cols[i], "column '%s' is listed twice",
                                s->names[i]);
        s->key_idx[i] = (size_t)k;
    }
    return MR_OK;
}

static void describe_arg(const mr_expr *e, char *buf, size_t len)
{
    mr_buf b;
    mr_buf_init(&b);
    b.limit = 4096;
    size_t n_cols;
    const char *const *cols = mr_expr_columns(e, &n_cols);
    int ok = mr_expr_print(e, &b) == MR_OK && b.data;
    const char *t = mr_dtype_name(mr_expr_type(e));
    if (ok && n_cols == 1 && !strcmp(b.data, cols[0])) snprintf(buf, len, "%s column '%s'", t, cols[0]);
    else snprintf(buf, len, "%s expression '%.60s'", t, ok ? b.data : "?");
    mr_buf_free(&b);
}

/* Group and join keys compare unscaled values, which only agree within one
 * scale: a DECIMAL key is refused with the way around it. */
static mr_status no_decimal_keys(const xf_step *s, const xf_schema *in, const char *what, mr_error *err)
{
    for (size_t i = 0; i < s->n_names; i++)
        if (in->types[s->key_idx[i]] == MR_T_DECIMAL)
            return step_err(err, MR_E_SCHEMA, s, s->lines[i], s->cols[i],
                            "cannot %s the decimal column '%s': keys must be int64, string, bool, date, "
                            "timestamp or float (a derived column such as '%s * 1.0' is float64)",
                            what, s->names[i], s->names[i]);
    return MR_OK;
}

static mr_status bind_aggregate(xf_step *s, const xf_schema *in, xf_schema *out, mr_error *err)
{
    mr_status rc = resolve_keys(s, in, err);
    if (rc != MR_OK) return rc;
    rc = no_decimal_keys(s, in, "group by", err);
    if (rc != MR_OK) return rc;
    if (schema_init(out, s->n_names + s->n_aggs) != MR_OK) return nomem(err, s);
    for (size_t i = 0; i < s->n_names; i++)
        if (schema_push(out, in->names[s->key_idx[i]], in->types[s->key_idx[i]]) != MR_OK) return nomem(err, s);
    for (size_t i = 0; i < s->n_aggs; i++) {
        xf_agg *a = &s->aggs[i];
        mr_dtype t = MR_T_INT64;
        if (a->arg) {
            rc = bind_expr(s, a->arg, in, 0, 0, 0, err);
            if (rc != MR_OK) return rc;
            t = mr_expr_type(a->arg);
            if (t == MR_T_NULL) t = MR_T_BOOL;
        }
        a->arg_type = t;
        int num = t == MR_T_INT64 || t == MR_T_FLOAT64;
        const char *need = NULL;
        switch (a->fn) {
        case AG_COUNT_ROWS:
        case AG_COUNT:
        case AG_COUNT_DISTINCT: a->out_type = MR_T_INT64; break;
        case AG_SUM:
            if (!num) need = "a number";
            a->out_type = t;
            break;
        case AG_MEAN:
        case AG_STD:
            if (!num) need = "a number";
            a->out_type = MR_T_FLOAT64;
            break;
        case AG_MIN:
        case AG_MAX:
        case AG_FIRST:
        case AG_LAST: a->out_type = t; break;
        }
        if (need) {
            char d[200];
            describe_arg(a->arg, d, sizeof(d));
            mr_status r2 = MR_ERR(err, MR_E_SCHEMA, "step %d (aggregate '%s'): %s() needs %s, got %s", s->index,
                                  a->name, agg_names[a->fn], need, d);
            at_pos(err, s->line, s->col);
            return r2;
        }
        if (schema_push(out, a->name, a->out_type) != MR_OK) return nomem(err, s);
    }
    return check_dups(s, out, "", err);
}

static mr_status bind_join(xf_step *s, const xf_schema *in, const mr_transform_schema *joins, size_t n_joins,
                           xf_schema *out, mr_error *err)
{
    const mr_transform_schema *r = NULL;
    for (size_t i = 0; i < n_joins && !r; i++)
        if (joins[i].name && !strcmp(joins[i].name, s->with)) r = &joins[i];
    if (!r) {
        mr_status rc = step_err(err, MR_E_NOT_FOUND, s, 0, 0, "unknown input '%s' to join with", s->with);
        const char **cands = mr_calloc(n_joins ? n_joins : 1, sizeof(char *));
        if (cands) {
            size_t nc = 0;
            for (size_t i = 0; i < n_joins; i++)
                if (joins[i].name) cands[nc++] = joins[i].name;
            const char *near = mr_closest(s->with, cands, nc);
            if (near) mr_error_hint(err, "did you mean '%s'?", near);
        }
        mr_free(cands);
        return rc;
    }
    if (schema_init(&s->right, r->n_cols) != MR_OK) return nomem(err, s);
    for (size_t i = 0; i < r->n_cols; i++)
        if (schema_push(&s->right, r->col_names[i], r->col_types[i]) != MR_OK) return nomem(err, s);
    mr_status rc = resolve_keys(s, in, err);
    if (rc != MR_OK) return rc;
    s->rkey_idx = mr_calloc(s->n_names, sizeof(size_t));
    s->rkeep = mr_calloc(s->right.n ? s->right.n : 1, sizeof(size_t));
    if (!s->rkey_idx || !s->rkeep) return nomem(err, s);
    for (size_t i = 0; i < s->n_names; i++) {
        ssize_t k = find_col(&s->right, s->names[i]);
        if (k < 0) {
            char where[200];
            snprintf(where, sizeof(where), " in '%s'", s->with);
            return unknown_col(s, &s->right, s->names[i], where, s->lines[i], s->cols[i], err);
        }
        s->rkey_idx[i] = (size_t)k;
        mr_dtype lt = in->types[s->key_idx[i]], rt = s->right.types[k];
        if (lt == MR_T_DECIMAL || rt == MR_T_DECIMAL)
            return step_err(err, MR_E_SCHEMA, s, s->lines[i], s->cols[i],
                            "cannot join on the decimal column '%s': keys must be int64, string, bool, date, "
                            "timestamp or float (a derived column such as '%s * 1.0' is float64)",
                            s->names[i], s->names[i]);
        if (lt != rt)
            return step_err(err, MR_E_SCHEMA, s, s->lines[i], s->cols[i],
                            "join key '%s' is %s in the input but %s in '%s'", s->names[i], mr_dtype_name(lt),
                            mr_dtype_name(rt), s->with);
    }
    int keep_right = s->how == XJ_INNER || s->how == XJ_LEFT;
    if (keep_right)
        for (size_t i = 0; i < s->right.n; i++) {
            int is_key = 0;
            for (size_t k = 0; k < s->n_names; k++) is_key |= s->rkey_idx[k] == i;
            if (!is_key) s->rkeep[s->n_rkeep++] = i;
        }
    if (schema_init(out, in->n + s->n_rkeep) != MR_OK) return nomem(err, s);
    for (size_t i = 0; i < in->n; i++)
        if (schema_push(out, in->names[i], in->types[i]) != MR_OK) return nomem(err, s);
    for (size_t i = 0; i < s->n_rkeep; i++)
        if (schema_push(out, s->right.names[s->rkeep[i]], s->right.types[s->rkeep[i]]) != MR_OK) return nomem(err, s);
    rc = check_dups(s, out, ": both inputs have it", err);
    if (rc != MR_OK) mr_error_hint(err, "rename or drop the column in one of the inputs before the join");
    return rc;
}

static mr_status bind_step(xf_step *s, const xf_schema *in, const mr_transform_schema *joins, size_t n_joins,
                           mr_error *err)
{
    xf_schema *out = &s->out;
    mr_status rc;
    switch (s->kind) {
    case XS_FILTER:
        rc = bind_expr(s, s->expr, in, MR_EXPR_FILTER, 0, 0, err);
        if (rc != MR_OK) return rc;
        return mr__xf_schema_copy(out, in) == MR_OK ? MR_OK : nomem(err, s);
    case XS_SELECT:
        rc = resolve_keys(s, in, err);
        if (rc != MR_OK) return rc;
        if (schema_init(out, s->n_names) != MR_OK) return nomem(err, s);
        for (size_t i = 0; i < s->n_names; i++)
            if (schema_push(out, in->names[s->key_idx[i]], in->types[s->key_idx[i]]) != MR_OK) return nomem(err, s);
        return MR_OK;
    case XS_RENAME:
        if (mr__xf_schema_copy(out, in) != MR_OK) return nomem(err, s);
        for (size_t i = 0; i < s->n_names; i++) {
            ssize_t k = find_col(in, s->names[i]);
            if (k < 0) return unknown_col(s, in, s->names[i], "", s->lines[i], s->cols[i], err);
            char *nn = mr_strdup(s->names2[i]);
            if (!nn) return nomem(err, s);
            mr_free(out->names[k]);
            out->names[k] = nn;
        }
        return check_dups(s, out, " after renaming", err);
    case XS_DERIVE:
        if (schema_init(out, in->n + s->n_names) != MR_OK) return nomem(err, s);
        for (size_t i = 0; i < in->n; i++)
            if (schema_push(out, in->names[i], in->types[i]) != MR_OK) return nomem(err, s);
        for (size_t i = 0; i < s->n_names; i++) {
            /* each entry sees the columns derived before it */
            rc = bind_expr(s, s->exprs[i], out, 0, s->lines[i], s->cols[i], err);
            if (rc != MR_OK) return rc;
            mr_dtype t = mr_expr_type(s->exprs[i]);
            if (t == MR_T_NULL) t = MR_T_BOOL;
            ssize_t k = find_col(out, s->names[i]);
            if (k >= 0) out->types[k] = t;
            else if (schema_push(out, s->names[i], t) != MR_OK) return nomem(err, s);
        }
        return MR_OK;
    case XS_JOIN: return bind_join(s, in, joins, n_joins, out, err);
    case XS_AGGREGATE: return bind_aggregate(s, in, out, err);
    case XS_SORT:
        rc = resolve_keys(s, in, err);
        if (rc != MR_OK) return rc;
        return mr__xf_schema_copy(out, in) == MR_OK ? MR_OK : nomem(err, s);
    case XS_LIMIT: return mr__xf_schema_copy(out, in) == MR_OK ? MR_OK : nomem(err, s);
    }
    return MR_E_INTERNAL;
}

mr_status mr_transform_bind(mr_transform *x, const mr_transform_schema *input, const mr_transform_schema *joins,
                            size_t n_joins, const mr_transform_schema **out_schema, mr_error *err)
{
    mr_status rc = MR_OK;
    if (!x || !input) return MR_ERR(err, MR_E_INVALID_ARG, "transform: NULL plan or input schema");
    x->bound = 0;
    mr__xf_schema_free(&x->input);
    for (size_t i = 0; i < x->n_steps; i++) {
        xf_step *s = &x->steps[i];
        mr__xf_schema_free(&s->in);
        mr__xf_schema_free(&s->out);
        mr__xf_schema_free(&s->right);
        mr_free(s->key_idx);
        mr_free(s->rkey_idx);
        mr_free(s->rkeep);
        s->key_idx = s->rkey_idx = s->rkeep = NULL;
        s->n_rkeep = 0;
    }
    if (schema_init(&x->input, input->n_cols) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "transform: out of memory");
    for (size_t i = 0; i < input->n_cols; i++) {
        if (schema_push(&x->input, input->col_names[i], input->col_types[i]) != MR_OK)
            return MR_ERR(err, MR_E_NOMEM, "transform: out of memory");
        for (size_t j = 0; j < i; j++)
            if (!strcmp(input->col_names[i], input->col_names[j]))
                return MR_ERR(err, MR_E_SCHEMA, "transform: the input has two columns named '%s'", input->col_names[i]);
    }
    const xf_schema *cur = &x->input;
    for (size_t i = 0; i < x->n_steps; i++) {
        xf_step *s = &x->steps[i];
        if (mr__xf_schema_copy(&s->in, cur) != MR_OK) return nomem(err, s);
        rc = bind_step(s, &s->in, joins, n_joins, err);
        if (rc != MR_OK) return rc;
        cur = &s->out;
    }
    x->out_pub.name = NULL;
    x->out_pub.n_cols = cur->n;
    x->out_pub.col_names = (const char *const *)cur->names;
    x->out_pub.col_types = cur->types;
    x->bound = 1;
    if (out_schema) *out_schema = &x->out_pub;
    return MR_OK;
}
