/* The run browser's app (include/millrace/ui.h, docs/ui.md): the page and
 * the JSON API, without sockets.
 *
 * The runs table is served from a snapshot of every run (runs, tags, final
 * metrics: three queries), rebuilt only when another connection has
 * committed to the run store since (SQLite's data_version), so sorting,
 * filtering and paging 10,000 runs are work in memory. Each column (run
 * fields, tags.KEY, params.PATH, metrics.STAGE.NAME) is one array over the
 * runs, numeric when every value it has is a number. A filter is an
 * expression of the filter language (docs/expressions.md) over those
 * columns, evaluated on a table built from the snapshot once; dotted
 * names (metrics.valid.auc) are read as column names.
 *
 * Curves are downsampled here to the chart's width: a curve of n points
 * drawn in w pixels becomes w buckets over its step range, each with its
 * first step and the min and max of its values, so a spike survives and a
 * 100,000-step curve travels as at most 2w numbers per series. */
#include "ui_int.h"

#include "millrace/expr.h"
#include "millrace/pipeline.h"
#include "millrace/runreport.h"
#include "millrace/runstore.h"
#include "millrace/store.h"
#include "millrace/table.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PAGE 1000
#define MAX_WIDTH 4000
#define MAX_CURVE_RUNS 50
#define LOG_TAIL (1u << 20)

/* ---- the snapshot ----------------------------------------------------------- */

typedef struct ui_col {
    char *name;
    int numeric;   /* every value present is a number */
    double *num;   /* per run (numeric columns) */
    char **text;   /* per run (owned; the text of a number too, as written) */
    uint8_t *has;  /* per run: 1 when the run has a value */
} ui_col;

typedef struct snapshot {
    mr_run_table *t;
    ui_col **cols;
    size_t n_cols, cap_cols;
    size_t n_fixed; /* the run fields come first */
    mr_strindex ix;
    mr_table *table; /* the columns as a table, for filters (built on first use) */
} snapshot;

struct mr_ui_app {
    mr_workspace *ws;
    uint64_t version;
    snapshot *snap;
};

static const char *col_name(const void *ctx, size_t id) { return ((const snapshot *)ctx)->cols[id]->name; }

static void snapshot_free(snapshot *s)
{
    if (!s) return;
    size_t n = s->t ? s->t->n : 0;
    for (size_t c = 0; c < s->n_cols; c++) {
        ui_col *col = s->cols[c];
        for (size_t i = 0; col->text && i < n; i++) mr_free(col->text[i]);
        mr_free(col->text);
        mr_free(col->num);
        mr_free(col->has);
        mr_free(col->name);
        mr_free(col);
    }
    mr_free(s->cols);
    mr_strindex_deinit(&s->ix);
    mr_table_free(s->table);
    mr_run_table_free(s->t);
    mr_free(s);
}

/* The column named name, created (empty, numeric until a text arrives) when new. */
static ui_col *column(snapshot *s, const char *name)
{
    ssize_t j = mr_strindex_find(&s->ix, name, col_name, s);
    if (j >= 0) return s->cols[j];
    if (s->n_cols == s->cap_cols) {
        size_t nc = s->cap_cols ? s->cap_cols * 2 : 64;
        ui_col **ncols = mr_realloc(s->cols, nc * sizeof(*ncols));
        if (!ncols) return NULL;
        s->cols = ncols;
        s->cap_cols = nc;
    }
    size_t n = s->t->n ? s->t->n : 1;
    ui_col *c = mr_calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->name = mr_strdup(name);
    c->num = mr_calloc(n, sizeof(*c->num));
    c->text = mr_calloc(n, sizeof(*c->text));
    c->has = mr_calloc(n, 1);
    c->numeric = 1;
    s->cols[s->n_cols] = c;
    if (!c->name || !c->num || !c->text || !c->has ||
        mr_strindex_add(&s->ix, s->n_cols, col_name, s, NULL) != MR_OK) {
        mr_free(c->name);
        mr_free(c->num);
        mr_free(c->text);
        mr_free(c->has);
        mr_free(c);
        return NULL;
    }
    s->n_cols++;
    return c;
}

/* A number; its text only when it has one as written (a param), else made
 * only if the column turns out to hold text too (finish_texts). */
static mr_status set_num(snapshot *s, const char *name, size_t row, double v, const char *text)
{
    ui_col *c = column(s, name);
    if (!c) return MR_E_NOMEM;
    c->num[row] = v;
    c->has[row] = 1;
    mr_free(c->text[row]);
    c->text[row] = text ? mr_strdup(text) : NULL;
    return !text || c->text[row] ? MR_OK : MR_E_NOMEM;
}

/* A column of numbers and text is text: its numbers get their shortest text. */
static mr_status finish_texts(snapshot *s)
{
    size_t n = s->t->n;
    for (size_t k = 0; k < s->n_cols; k++) {
        ui_col *c = s->cols[k];
        if (c->numeric) continue;
        for (size_t i = 0; i < n; i++) {
            if (!c->has[i] || c->text[i]) continue;
            char buf[40];
            mr_fmt_shortest(c->num[i], buf, sizeof(buf));
            if (!(c->text[i] = mr_strdup(buf))) return MR_E_NOMEM;
        }
    }
    return MR_OK;
}

static mr_status set_text(snapshot *s, const char *name, size_t row, const char *text)
{
    ui_col *c = column(s, name);
    if (!c) return MR_E_NOMEM;
    c->numeric = 0;
    c->has[row] = 1;
    mr_free(c->text[row]);
    c->text[row] = mr_strdup(text ? text : "");
    return c->text[row] ? MR_OK : MR_E_NOMEM;
}

/* params.PATH cells of one run: every leaf of its params tree. */
static mr_status add_params(snapshot *s, size_t row, const mr_value *v, mr_buf *path)
{
    mr_status st = MR_OK;
    size_t len = path->len;
    if (v->kind == MR_V_MAP && v->n > 0) {
        for (size_t k = 0; k < v->n && st == MR_OK; k++) {
            path->len = len;
            if (path->data) path->data[len] = '\0';
            st = mr_buf_printf(path, "%s%s", len ? "." : "params.", v->keys[k]);
            if (st == MR_OK) st = add_params(s, row, v->items[k], path);
        }
        path->len = len;
        if (path->data) path->data[len] = '\0';
        return st;
    }
    if (len == 0) return MR_OK;
    if (v->kind == MR_V_INT) return set_num(s, path->data, row, (double)v->u.i, v->str);
    if (v->kind == MR_V_FLOAT) return set_num(s, path->data, row, v->u.f, v->str);
    if (v->kind == MR_V_STR) return set_text(s, path->data, row, v->str);
    if (v->kind == MR_V_BOOL) return set_text(s, path->data, row, v->u.b ? "true" : "false");
    mr_buf b;
    mr_buf_init(&b);
    st = mr_value_to_json(v, 1, &b);
    if (st == MR_OK) st = set_text(s, path->data, row, b.data ? b.data : "null");
    mr_buf_free(&b);
    return st;
}

static mr_status build_snapshot(mr_ui_app *a, snapshot **out, mr_error *err)
{
    snapshot *s = mr_calloc(1, sizeof(*s));
    if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_strindex_init(&s->ix);
    mr_status st = mr_runstore_all_runs(a->ws->rs, &s->t, err);
    static const char *const fixed[] = {"id", "name", "status", "started", "seconds", "commit"};
    for (size_t k = 0; st == MR_OK && k < sizeof(fixed) / sizeof(fixed[0]); k++)
        if (!column(s, fixed[k])) st = MR_E_NOMEM;
    s->n_fixed = s->n_cols;
    mr_buf path;
    mr_buf_init(&path);
    for (size_t i = 0; st == MR_OK && i < s->t->n; i++) {
        const mr_run_summary *r = &s->t->runs[i];
        char iso[32];
        mr_iso_time(r->started, iso, sizeof(iso));
        st = set_num(s, "id", i, (double)r->id, NULL);
        if (st == MR_OK && r->name) st = set_text(s, "name", i, r->name);
        if (st == MR_OK) st = set_text(s, "status", i, r->status);
        if (st == MR_OK) st = set_text(s, "started", i, iso);
        if (st == MR_OK && !isnan(r->ended)) st = set_num(s, "seconds", i, r->ended - r->started, NULL);
        if (st == MR_OK && r->git_commit && r->git_commit[0]) st = set_text(s, "commit", i, r->git_commit);
        for (size_t k = 0; st == MR_OK && k < r->n_tags; k++) {
            char *n = mr_asprintf("tags.%s", r->tags[k].key);
            st = n ? set_text(s, n, i, r->tags[k].value ? r->tags[k].value : "") : MR_E_NOMEM;
            mr_free(n);
        }
        for (size_t k = 0; st == MR_OK && k < r->n_finals; k++) {
            char *n = mr_asprintf("metrics.%s.%s", r->finals[k].stage, r->finals[k].name);
            st = n ? (isnan(r->finals[k].value) ? MR_OK : set_num(s, n, i, r->finals[k].value, NULL)) : MR_E_NOMEM;
            mr_free(n);
        }
        if (st == MR_OK && r->params) {
            mr_buf_free(&path);
            mr_buf_init(&path);
            st = add_params(s, i, r->params, &path);
        }
    }
    mr_buf_free(&path);
    /* "id" and "seconds" stay numeric; a fixed text column is text even when empty */
    for (size_t k = 0; st == MR_OK && k < s->n_fixed; k++)
        if (strcmp(s->cols[k]->name, "id") && strcmp(s->cols[k]->name, "seconds")) s->cols[k]->numeric = 0;
    if (st == MR_OK) st = finish_texts(s);
    if (st != MR_OK) {
        if (!mr_error_is_set(err)) MR_ERR(err, st, "out of memory building the runs table");
        snapshot_free(s);
        return st;
    }
    *out = s;
    return MR_OK;
}

/* The current snapshot, rebuilt when the run store changed. */
static mr_status current(mr_ui_app *a, snapshot **out, mr_error *err)
{
    if (mr_runstore_changed(a->ws->rs, &a->version) || !a->snap) {
        snapshot *s = NULL;
        mr_status st = build_snapshot(a, &s, err);
        if (st != MR_OK) {
            a->version = 0;
            return st;
        }
        snapshot_free(a->snap);
        a->snap = s;
    }
    *out = a->snap;
    return MR_OK;
}

/* ---- filters ------------------------------------------------------------- */

/* The filter text with every dotted name outside quotes written as a quoted
 * column name: metrics.valid.auc > 0.8 -> "metrics.valid.auc" > 0.8. */
static mr_status rewrite_filter(const char *f, mr_buf *out)
{
    mr_status st = MR_OK;
    for (size_t i = 0; f[i] && st == MR_OK;) {
        char c = f[i];
        if (c == '\'' || c == '"') { /* a string or a quoted name: copied to its closing quote */
            size_t j = i + 1;
            while (f[j] && !(f[j] == c && f[j + 1] != c)) j += f[j] == c ? 2 : 1;
            if (f[j]) j++;
            st = mr_buf_append(out, f + i, j - i);
            i = j;
        } else if (isalpha((unsigned char)c) || c == '_') {
            size_t j = i, dots = 0;
            while (isalnum((unsigned char)f[j]) || f[j] == '_' || f[j] == '.' || f[j] == '-') {
                if (f[j] == '.') dots++;
                if (f[j] == '-' && !dots) break; /* a-b is a subtraction until the name has a dot */
                j++;
            }
            while (j > i && (f[j - 1] == '.' || f[j - 1] == '-')) j--;
            if (dots) {
                st = mr_buf_puts(out, "\"");
                if (st == MR_OK) st = mr_buf_append(out, f + i, j - i);
                if (st == MR_OK) st = mr_buf_puts(out, "\"");
            } else {
                st = mr_buf_append(out, f + i, j - i);
            }
            i = j;
        } else {
            st = mr_buf_append(out, f + i, 1);
            i++;
        }
    }
    return st;
}

static mr_status build_table(snapshot *s, mr_error *err)
{
    if (s->table) return MR_OK;
    mr_table *t = NULL;
    mr_status st = mr_table_new(&t, err);
    size_t n = s->t->n;
    for (size_t c = 0; st == MR_OK && c < s->n_cols; c++) {
        ui_col *col = s->cols[c];
        mr_column *mc = NULL;
        st = mr_column_new(col->name, col->numeric ? MR_T_FLOAT64 : MR_T_STRING, n, &mc, err);
        for (size_t i = 0; st == MR_OK && i < n; i++) {
            if (!col->has[i]) st = mr_column_append_null(mc);
            else if (col->numeric) st = mr_column_append_float64(mc, col->num[i]);
            else st = mr_column_append_str(mc, col->text[i], strlen(col->text[i]));
        }
        if (st == MR_OK) st = mr_table_add_column(t, mc, err);
        else mr_column_free(mc);
    }
    if (st != MR_OK) {
        if (!mr_error_is_set(err)) MR_ERR(err, st, "out of memory");
        mr_table_free(t);
        return st;
    }
    s->table = t;
    return MR_OK;
}

/* mask[i] = 1 for the runs the filter keeps. */
static mr_status eval_filter(snapshot *s, const char *filter, uint8_t *mask, mr_error *err)
{
    mr_buf text;
    mr_buf_init(&text);
    mr_expr *e = NULL;
    mr_status st = rewrite_filter(filter, &text);
    if (st != MR_OK) st = MR_ERR(err, st, "out of memory");
    if (st == MR_OK) st = build_table(s, err);
    if (st == MR_OK) st = mr_expr_parse(text.data ? text.data : "", text.len, "filter", &e, err);
    if (st == MR_OK) st = mr_expr_bind_table(e, s->table, MR_EXPR_FILTER, err);
    if (st == MR_OK && s->t->n) st = mr_expr_eval_filter(e, s->table, mask, err);
    mr_expr_free(e);
    mr_buf_free(&text);
    return st;
}

/* ---- JSON helpers -------------------------------------------------------- */

static void jstr(mr_buf *b, const char *s)
{
    if (s) mr_buf_json_text(b, s, strlen(s));
    else mr_buf_puts(b, "null");
}

static void jnum(mr_buf *b, double v)
{
    char t[40];
    if (!isfinite(v)) {
        mr_buf_puts(b, "null");
        return;
    }
    mr_fmt_shortest(v, t, sizeof(t));
    mr_buf_puts(b, t);
}

static void jcell(mr_buf *b, const ui_col *c, size_t i)
{
    if (!c->has[i]) mr_buf_puts(b, "null");
    else if (c->numeric) jnum(b, c->num[i]);
    else jstr(b, c->text[i]);
}

static void error_response(mr_ui_response *out, int status, const char *msg, const char *hint)
{
    out->status = status;
    out->content_type = "application/json";
    out->body.len = 0;
    out->body.failed = MR_OK;
    mr_buf_puts(&out->body, "{\"error\": ");
    jstr(&out->body, msg);
    if (hint && hint[0]) {
        mr_buf_puts(&out->body, ", \"hint\": ");
        jstr(&out->body, hint);
    }
    mr_buf_puts(&out->body, "}\n");
}

static void error_from(mr_ui_response *out, const mr_error *err)
{
    char msg[1024];
    mr_error_format(err, msg, sizeof(msg));
    int status = err->code == MR_E_NOT_FOUND ? 404 : err->code == MR_E_NOMEM || err->code == MR_E_IO ? 500 : 400;
    error_response(out, status, msg, err->hint);
}

static int parse_count(const char *s, long lo, long hi, long dflt, long *out)
{
    if (!s || !*s) {
        *out = dflt;
        return 1;
    }
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* "1,2,3" -> ids (at most max). 0 on a malformed list. */
static int parse_ids(const char *s, int64_t *ids, size_t max, size_t *n)
{
    *n = 0;
    if (!s || !*s) return 0;
    for (const char *p = s; *p;) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v <= 0 || *n == max) return 0;
        ids[(*n)++] = v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return 0;
    }
    return *n > 0;
}

/* ---- /api/runs ------------------------------------------------------------ */

typedef struct sort_key {
    double num;
    const char *text;
    int has;
    size_t idx;
} sort_key;

static _Thread_local int sort_desc; /* the comparator's context: one sort per thread at a time */
static _Thread_local int sort_numeric;

static int cmp_key(const void *x, const void *y)
{
    const sort_key *a = x, *b = y;
    if (a->has != b->has) return a->has ? -1 : 1; /* runs without a value last, either way */
    int c = 0;
    if (a->has) {
        if (sort_numeric) c = a->num < b->num ? -1 : a->num > b->num ? 1 : 0;
        else c = strcmp(a->text, b->text);
        if (sort_desc) c = -c;
    }
    if (c == 0) c = a->idx < b->idx ? -1 : a->idx > b->idx ? 1 : 0; /* stable: newest first */
    return c;
}

static ui_col *find_col(snapshot *s, const char *name)
{
    ssize_t j = mr_strindex_find(&s->ix, name, col_name, s);
    return j >= 0 ? s->cols[j] : NULL;
}

static void unknown_col(snapshot *s, const char *name, mr_ui_response *out)
{
    const char **names = mr_calloc(s->n_cols + 1, sizeof(*names));
    for (size_t c = 0; names && c < s->n_cols; c++) names[c] = s->cols[c]->name;
    const char *near = names ? mr_closest(name, names, s->n_cols) : NULL;
    char msg[512], hint[512] = "";
    snprintf(msg, sizeof(msg), "no column '%s' in the runs", name);
    if (near) snprintf(hint, sizeof(hint), "did you mean '%s'?", near);
    error_response(out, 400, msg, hint);
    mr_free(names);
}

static void api_runs(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    mr_error err;
    mr_error_init(&err);
    snapshot *s = NULL;
    long offset = 0, limit = 0;
    if (!parse_count(arg(ctx, "offset"), 0, 1L << 40, 0, &offset) ||
        !parse_count(arg(ctx, "limit"), 1, MAX_PAGE, 100, &limit)) {
        error_response(out, 400, "offset and limit take numbers (limit 1 to 1000)", NULL);
        return;
    }
    if (current(a, &s, &err) != MR_OK) {
        error_from(out, &err);
        return;
    }
    size_t n = s->t->n;
    uint8_t *mask = mr_malloc(n ? n : 1);
    sort_key *keys = mr_calloc(n ? n : 1, sizeof(*keys));
    char *cols_copy = NULL;
    ui_col **shown = NULL;
    size_t n_shown = 0;
    if (!mask || !keys) goto oom;
    memset(mask, 1, n);
    const char *filter = arg(ctx, "filter");
    if (filter && *filter && eval_filter(s, filter, mask, &err) != MR_OK) {
        error_from(out, &err);
        if (err.code != MR_E_NOMEM) out->status = 400; /* an unknown column is the request's mistake */
        goto done;
    }
    const char *tag = arg(ctx, "tag"); /* KEY or KEY=VALUE */
    if (tag && *tag) {
        const char *eq = strchr(tag, '=');
        char *key = mr_asprintf("tags.%.*s", eq ? (int)(eq - tag) : (int)strlen(tag), tag);
        if (!key) goto oom;
        ui_col *c = find_col(s, key);
        mr_free(key);
        for (size_t i = 0; i < n; i++)
            if (!c || !c->has[i] || (eq && strcmp(c->text[i], eq + 1))) mask[i] = 0;
    }
    const char *sort = arg(ctx, "sort");
    ui_col *sc = NULL;
    if (sort && *sort) {
        sort_desc = sort[0] == '-';
        sc = find_col(s, sort[0] == '-' || sort[0] == '+' ? sort + 1 : sort);
        if (!sc) {
            unknown_col(s, sort[0] == '-' || sort[0] == '+' ? sort + 1 : sort, out);
            goto done;
        }
        sort_numeric = sc->numeric;
    }
    const char *cols = arg(ctx, "columns");
    if (cols && *cols) {
        cols_copy = mr_strdup(cols);
        shown = mr_calloc(strlen(cols) + 1, sizeof(*shown));
        if (!cols_copy || !shown) goto oom;
        for (char *p = strtok(cols_copy, ","); p; p = strtok(NULL, ",")) {
            ui_col *c = find_col(s, p);
            if (!c) {
                unknown_col(s, p, out);
                goto done;
            }
            shown[n_shown++] = c;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mask[i]) continue;
        keys[m].idx = i;
        if (sc) {
            keys[m].has = sc->has[i];
            keys[m].num = sc->num[i];
            keys[m].text = sc->text[i];
        }
        m++;
    }
    if (sc) qsort(keys, m, sizeof(*keys), cmp_key);
    mr_buf *b = &out->body;
    mr_buf_printf(b, "{\"total\": %zu, \"matched\": %zu, \"offset\": %ld, \"limit\": %ld, \"columns\": [", n, m,
                  offset, limit);
    for (size_t c = 0; c < n_shown; c++) {
        if (c) mr_buf_puts(b, ", ");
        jstr(b, shown[c]->name);
    }
    mr_buf_puts(b, "], \"runs\": [");
    ui_col *fields[6];
    for (size_t k = 0; k < 6; k++) fields[k] = s->cols[k];
    for (size_t q = (size_t)offset, k = 0; q < m && k < (size_t)limit; q++, k++) {
        size_t i = keys[q].idx;
        const mr_run_summary *r = &s->t->runs[i];
        mr_buf_puts(b, k ? ", {" : "{");
        for (size_t f = 0; f < 6; f++) {
            mr_buf_printf(b, "%s\"%s\": ", f ? ", " : "", fields[f]->name);
            jcell(b, fields[f], i);
        }
        mr_buf_puts(b, ", \"tags\": {");
        for (size_t t = 0; t < r->n_tags; t++) {
            if (t) mr_buf_puts(b, ", ");
            jstr(b, r->tags[t].key);
            mr_buf_puts(b, ": ");
            jstr(b, r->tags[t].value ? r->tags[t].value : "");
        }
        mr_buf_puts(b, "}, \"cells\": [");
        for (size_t c = 0; c < n_shown; c++) {
            if (c) mr_buf_puts(b, ", ");
            jcell(b, shown[c], i);
        }
        mr_buf_puts(b, "]}");
    }
    mr_buf_puts(b, "]}\n");
    out->status = 200;
    out->content_type = "application/json";
    goto done;
oom:
    error_response(out, 500, "out of memory", NULL);
done:
    mr_free(mask);
    mr_free(keys);
    mr_free(cols_copy);
    mr_free(shown);
}

/* ---- /api/columns ----------------------------------------------------------- */

static void api_columns(mr_ui_app *a, mr_ui_response *out)
{
    mr_error err;
    mr_error_init(&err);
    snapshot *s = NULL;
    if (current(a, &s, &err) != MR_OK) {
        error_from(out, &err);
        return;
    }
    mr_buf *b = &out->body;
    static const char *const groups[] = {"fields", "tags", "params", "metrics"};
    static const char *const prefix[] = {"", "tags.", "params.", "metrics."};
    mr_buf_printf(b, "{\"runs\": %zu", s->t->n);
    for (int g = 0; g < 4; g++) {
        mr_buf_printf(b, ", \"%s\": [", groups[g]);
        int first = 1;
        for (size_t c = 0; c < s->n_cols; c++) {
            const char *nm = s->cols[c]->name;
            int in = g == 0 ? c < s->n_fixed : !strncmp(nm, prefix[g], strlen(prefix[g]));
            if (!in) continue;
            if (!first) mr_buf_puts(b, ", ");
            first = 0;
            mr_buf_puts(b, "{\"name\": ");
            jstr(b, nm);
            mr_buf_printf(b, ", \"numeric\": %s}", s->cols[c]->numeric ? "true" : "false");
        }
        mr_buf_puts(b, "]");
    }
    mr_buf_puts(b, "}\n");
    out->status = 200;
    out->content_type = "application/json";
}

/* ---- /api/curves ---------------------------------------------------------------- */

/* The curves (metrics with more than one point) of the given runs. */
static void api_metrics(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    int64_t ids[MAX_CURVE_RUNS];
    size_t n_ids = 0;
    mr_error err;
    mr_error_init(&err);
    snapshot *s = NULL;
    if (!parse_ids(arg(ctx, "runs"), ids, MAX_CURVE_RUNS, &n_ids)) {
        error_response(out, 400, "runs takes run ids: 1,2,3 (at most 50)", NULL);
        return;
    }
    if (current(a, &s, &err) != MR_OK) {
        error_from(out, &err);
        return;
    }
    mr_buf *b = &out->body;
    mr_buf_puts(b, "{\"curves\": [");
    int first = 1;
    for (size_t k = 0; k < n_ids; k++) {
        const mr_run_summary *r = NULL;
        for (size_t i = 0; i < s->t->n && !r; i++)
            if (s->t->runs[i].id == ids[k]) r = &s->t->runs[i];
        for (size_t f = 0; r && f < r->n_finals; f++) {
            if (r->finals[f].n_steps < 2) continue;
            mr_buf_puts(b, first ? "{\"run\": " : ", {\"run\": ");
            first = 0;
            mr_buf_printf(b, "%lld, \"metric\": ", (long long)r->id);
            char *m = mr_asprintf("%s/%s", r->finals[f].stage, r->finals[f].name);
            jstr(b, m ? m : "");
            mr_free(m);
            mr_buf_printf(b, ", \"points\": %zu}", r->finals[f].n_steps);
        }
    }
    mr_buf_puts(b, "]}\n");
    out->status = 200;
    out->content_type = "application/json";
}

/* One series, downsampled to at most width buckets (min and max of each). */
static void write_series(mr_buf *b, int64_t run, const int64_t *steps, const double *values, size_t n, long width)
{
    mr_buf_printf(b, "{\"run\": %lld, \"points\": %zu, \"x\": [", (long long)run, n);
    mr_buf x, lo, hi;
    mr_buf_init(&x);
    mr_buf_init(&lo);
    mr_buf_init(&hi);
    size_t out_n = 0;
    if (n <= (size_t)width) {
        for (size_t i = 0; i < n; i++) {
            if (i) {
                mr_buf_puts(&x, ",");
                mr_buf_puts(&lo, ",");
                mr_buf_puts(&hi, ",");
            }
            mr_buf_printf(&x, "%lld", (long long)steps[i]);
            jnum(&lo, values[i]);
            jnum(&hi, values[i]);
        }
        out_n = n;
    } else {
        double s0 = (double)steps[0], s1 = (double)steps[n - 1], span = s1 - s0 + 1;
        size_t i = 0;
        for (long k = 0; k < width && i < n; k++) {
            double end = s0 + span * (double)(k + 1) / (double)width;
            if ((double)steps[i] >= end) continue; /* an empty bucket */
            double mn = INFINITY, mx = -INFINITY;
            int64_t first = steps[i];
            for (; i < n && (double)steps[i] < end; i++) {
                if (isnan(values[i])) continue;
                if (values[i] < mn) mn = values[i];
                if (values[i] > mx) mx = values[i];
            }
            if (out_n) {
                mr_buf_puts(&x, ",");
                mr_buf_puts(&lo, ",");
                mr_buf_puts(&hi, ",");
            }
            mr_buf_printf(&x, "%lld", (long long)first);
            jnum(&lo, mn);
            jnum(&hi, mx);
            out_n++;
        }
    }
    mr_buf_append(b, x.data ? x.data : "", x.len);
    mr_buf_puts(b, "], \"min\": [");
    mr_buf_append(b, lo.data ? lo.data : "", lo.len);
    mr_buf_puts(b, "], \"max\": [");
    mr_buf_append(b, hi.data ? hi.data : "", hi.len);
    mr_buf_printf(b, "], \"buckets\": %zu}", out_n);
    if (x.failed || lo.failed || hi.failed) b->failed = MR_E_NOMEM;
    mr_buf_free(&x);
    mr_buf_free(&lo);
    mr_buf_free(&hi);
}

static void api_curves(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    int64_t ids[MAX_CURVE_RUNS];
    size_t n_ids = 0;
    long width = 0;
    const char *metric = arg(ctx, "metric");
    const char *slash = metric ? strchr(metric, '/') : NULL;
    if (!parse_ids(arg(ctx, "runs"), ids, MAX_CURVE_RUNS, &n_ids) || !slash || slash == metric || !slash[1] ||
        !parse_count(arg(ctx, "width"), 2, MAX_WIDTH, 800, &width)) {
        error_response(out, 400, "curves takes runs=1,2,3 (at most 50), metric=STAGE/NAME and width=2..4000", NULL);
        return;
    }
    char stage[256];
    snprintf(stage, sizeof(stage), "%.*s", (int)(slash - metric), metric);
    mr_buf *b = &out->body;
    mr_buf_puts(b, "{\"metric\": ");
    jstr(b, metric);
    mr_buf_printf(b, ", \"width\": %ld, \"series\": [", width);
    for (size_t k = 0; k < n_ids; k++) {
        int64_t *steps = NULL;
        double *values = NULL;
        size_t n = 0;
        mr_error err;
        mr_error_init(&err);
        if (mr_runstore_metric_points(a->ws->rs, ids[k], stage, slash + 1, &steps, &values, &n, &err) != MR_OK) {
            error_from(out, &err);
            return;
        }
        if (k) mr_buf_puts(b, ", ");
        write_series(b, ids[k], steps, values, n, width);
        mr_free(steps);
        mr_free(values);
    }
    mr_buf_puts(b, "]}\n");
    out->status = 200;
    out->content_type = "application/json";
}

/* ---- one run, N runs ----------------------------------------------------------- */

/* A document a run-store view wrote (st: how that went), as the answer,
 * made safe as every JSON text from data is; doc is released. */
static void json_answer(mr_ui_response *out, mr_status st, mr_buf *doc, const mr_error *err)
{
    if (st == MR_OK) {
        mr_buf_json_safe(&out->body, doc->data ? doc->data : "{}", doc->len);
        out->status = 200;
        out->content_type = "application/json";
    } else {
        error_from(out, err);
    }
    mr_buf_free(doc);
}

static int64_t run_arg(mr_ui_arg_fn arg, void *ctx, const char *key)
{
    int64_t id = 0;
    size_t n = 0;
    return parse_ids(arg(ctx, key), &id, 1, &n) ? id : 0;
}

static void api_run(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    int64_t id = run_arg(arg, ctx, "id");
    if (!id) {
        error_response(out, 400, "run takes id=RUN (a run id)", NULL);
        return;
    }
    mr_error err;
    mr_error_init(&err);
    mr_run_detail *d = NULL;
    mr_buf doc;
    mr_buf_init(&doc);
    /* the run's stages, finals and lineage; the curves' points come from /api/curves */
    /* every point of every curve would be megabytes: "metrics" holds each one's last point, the page
     * asks /api/curves for the rest */
    mr_status st = mr_runstore_run_detail_finals(a->ws->rs, id, &d, &err);
    if (st != MR_OK) {
        error_from(out, &err);
        return;
    }
    st = mr_run_detail_json(d, &doc, &err);
    mr_run_detail_free(d);
    json_answer(out, st, &doc, &err);
}

static void api_compare(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    int64_t ids[MAX_CURVE_RUNS];
    size_t n_ids = 0;
    if (!parse_ids(arg(ctx, "runs"), ids, MAX_CURVE_RUNS, &n_ids)) {
        error_response(out, 400, "compare takes runs=1,2,3 (at most 50)", NULL);
        return;
    }
    mr_error err;
    mr_error_init(&err);
    mr_run_compare *c = NULL;
    mr_buf doc;
    mr_buf_init(&doc);
    mr_status st = mr_runstore_compare(a->ws->rs, ids, n_ids, &c, &err);
    if (st == MR_OK) st = mr_run_compare_json(c, &doc, &err);
    mr_run_compare_free(c);
    json_answer(out, st, &doc, &err);
}

/* ---- logs, artifacts, the report --------------------------------------------- */

/* A file's bytes as the answer (st: how reading it went; data is released).
 * Returns 1 when it answered 200. */
static int file_answer(mr_ui_response *out, mr_status st, char *data, size_t len, mr_error *err, const char *type)
{
    if (st != MR_OK) {
        if (!mr_error_is_set(err)) MR_ERR(err, st, "out of memory");
        error_from(out, err);
        mr_free(data);
        return 0;
    }
    mr_buf_append(&out->body, data, len);
    mr_free(data);
    out->status = 200;
    out->content_type = type;
    return 1;
}

static int safe_name(const char *s)
{
    if (!s || !*s || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    for (; *s; s++)
        if (*s == '/' || (unsigned char)*s < 0x20) return 0;
    return 1;
}

static void api_log(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    int64_t id = run_arg(arg, ctx, "run");
    const char *stage = arg(ctx, "stage");
    if (!id || !safe_name(stage)) {
        error_response(out, 400, "log takes run=RUN and stage=STAGE", NULL);
        return;
    }
    char *path = mr_asprintf("%s/logs/run-%lld/%s.log", a->ws->dot, (long long)id, stage);
    char *data = NULL;
    size_t len = 0;
    mr_error err;
    mr_error_init(&err);
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        char msg[256];
        snprintf(msg, sizeof(msg), "run %lld has no log for stage '%s'", (long long)id, stage);
        error_response(out, 404, msg, NULL);
        mr_free(path);
        return;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)LOG_TAIL ? size - (long)LOG_TAIL : 0; /* the tail of a long log */
    fseek(f, from, SEEK_SET);
    data = mr_malloc(LOG_TAIL + 1);
    if (data) len = fread(data, 1, LOG_TAIL, f);
    fclose(f);
    mr_free(path);
    if (!data) {
        error_response(out, 500, "out of memory", NULL);
        return;
    }
    mr_buf_utf8_scrub(&out->body, data, len);
    mr_free(data);
    out->status = 200;
    out->content_type = "text/plain; charset=utf-8";
}

static void api_artifact(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    const char *id = arg(ctx, "id"), *path = arg(ctx, "path");
    mr_artifact art;
    if (!id || mr_artifact_parse(id, &art) != MR_OK) {
        error_response(out, 400, "artifact takes id=ARTIFACT (32 hex, or 32 hex.dir) and optionally path=FILE", NULL);
        return;
    }
    mr_error err;
    mr_error_init(&err);
    char name[256] = "";
    if (art.is_dir) {
        mr_store_entry *es = NULL;
        size_t n = 0;
        if (mr_store_dir_entries(a->ws->store, &art, &es, &n, &err) != MR_OK) {
            error_from(out, &err);
            return;
        }
        if (!path || !*path) { /* the listing */
            mr_buf *b = &out->body;
            mr_buf_puts(b, "{\"id\": ");
            jstr(b, id);
            mr_buf_puts(b, ", \"files\": [");
            for (size_t i = 0; i < n; i++) {
                char fid[MR_ARTIFACT_ID_LEN];
                mr_artifact_id(&es[i].file, fid);
                mr_buf_puts(b, i ? ", {\"path\": " : "{\"path\": ");
                jstr(b, es[i].path);
                mr_buf_printf(b, ", \"size\": %llu, \"id\": \"%s\"}", (unsigned long long)es[i].file.size, fid);
            }
            mr_buf_puts(b, "]}\n");
            mr_store_entries_free(es, n);
            out->status = 200;
            out->content_type = "application/json";
            return;
        }
        size_t k = 0;
        while (k < n && strcmp(es[k].path, path)) k++;
        if (k == n) {
            mr_store_entries_free(es, n);
            error_response(out, 404, "no such file in the artifact", path);
            return;
        }
        art = es[k].file;
        const char *base = strrchr(path, '/');
        snprintf(name, sizeof(name), "%s", base ? base + 1 : path);
        mr_store_entries_free(es, n);
    } else {
        snprintf(name, sizeof(name), "%s", id);
    }
    char *obj = mr_store_object_path(a->ws->store, &art);
    char *data = NULL;
    size_t len = 0;
    mr_status st = obj ? mr_fs_read_file(obj, (size_t)1 << 30, &data, &len, &err) : MR_E_NOMEM;
    mr_free(obj);
    if (!file_answer(out, st, data, len, &err, "application/octet-stream")) return;
    for (char *p = name; *p; p++) /* a header value: plain characters only */
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\' || (unsigned char)*p >= 0x7f) *p = '_';
    snprintf(out->attachment, sizeof(out->attachment), "%s", name);
}

static void api_report(mr_ui_app *a, mr_ui_arg_fn arg, void *ctx, mr_ui_response *out)
{
    int64_t id = run_arg(arg, ctx, "run");
    if (!id) {
        error_response(out, 400, "report takes run=RUN", NULL);
        return;
    }
    mr_error err;
    mr_error_init(&err);
    char *dir = NULL, *html = NULL, *md = NULL, *data = NULL;
    size_t len = 0;
    char *tmp = mr_path_join(a->ws->dot, "tmp");
    mr_status st = tmp ? mr_fs_mkdirs(tmp, &err) : MR_E_NOMEM;
    if (st == MR_OK) st = mr_fs_mkdtemp(tmp, "ui-report", &dir, &err);
    if (st == MR_OK) {
        html = mr_path_join(dir, "report.html");
        md = mr_path_join(dir, "report.md");
        st = html && md ? mr_run_report_regenerate(a->ws, id, html, md, &err) : MR_E_NOMEM;
    }
    if (st == MR_OK) st = mr_fs_read_file(html, (size_t)1 << 30, &data, &len, &err);
    if (dir) mr_fs_rmtree(dir, NULL);
    mr_free(tmp);
    mr_free(dir);
    mr_free(html);
    mr_free(md);
    file_answer(out, st, data, len, &err, "text/html; charset=utf-8");
}

/* ---- the app ------------------------------------------------------------------ */

mr_status mr_ui_app_open(const char *dir, mr_ui_app **out, mr_error *err)
{
    *out = NULL;
    mr_ui_app *a = mr_calloc(1, sizeof(*a));
    if (!a) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status st = mr_workspace_open(dir ? dir : ".", 1, 0, &a->ws, err);
    if (st != MR_OK) {
        mr_free(a);
        return st;
    }
    *out = a;
    return MR_OK;
}

void mr_ui_app_close(mr_ui_app *a)
{
    if (!a) return;
    snapshot_free(a->snap);
    mr_workspace_close(a->ws);
    mr_free(a);
}

void mr_ui_app_handle(mr_ui_app *a, const char *method, const char *path, mr_ui_arg_fn arg, void *arg_ctx,
                      mr_ui_response *out)
{
    memset(out, 0, sizeof(*out));
    mr_buf_init(&out->body);
    out->content_type = "application/json";
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        error_response(out, 405, "the run browser is read-only: GET only", NULL);
        return;
    }
    if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
        mr_buf_append(&out->body, mr__ui_page, mr__ui_page_len);
        out->status = 200;
        out->content_type = "text/html; charset=utf-8";
    } else if (!strcmp(path, "/api/runs")) api_runs(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/columns")) api_columns(a, out);
    else if (!strcmp(path, "/api/metrics")) api_metrics(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/curves")) api_curves(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/run")) api_run(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/compare")) api_compare(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/log")) api_log(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/artifact")) api_artifact(a, arg, arg_ctx, out);
    else if (!strcmp(path, "/api/report")) api_report(a, arg, arg_ctx, out);
    else error_response(out, 404, "no such page", path);
    if (out->body.failed) {
        mr_buf_free(&out->body);
        mr_buf_init(&out->body);
        error_response(out, 500, "out of memory", NULL);
    }
}
