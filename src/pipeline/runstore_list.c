/* The run list (`millrace runs`, mr_runstore_runs): tag filters in SQL,
 * then the cells of the chosen columns (run fields, params.PATH,
 * metrics.STAGE.NAME), an unknown column answered with the closest known
 * ones, and a stable sort by one column with the limit applied after it. */
#include "runstore_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Run fields usable as `runs` columns (see runstore.h). */
static const char *const RUN_FIELDS[] = {"id",     "name",   "status",  "started", "seconds", "ran",
                                         "cached", "failed", "skipped", "commit",  "tags"};
#define N_RUN_FIELDS (sizeof(RUN_FIELDS) / sizeof(*RUN_FIELDS))

/* ---- columns -------------------------------------------------------------- */

static const mr_run_final *find_final(const mr_run_summary *r, const char *stage, size_t stage_len, const char *name)
{
    for (size_t i = 0; i < r->n_finals; i++)
        if (strlen(r->finals[i].stage) == stage_len && !strncmp(r->finals[i].stage, stage, stage_len) &&
            !strcmp(r->finals[i].name, name))
            return &r->finals[i];
    return NULL;
}

static int is_run_field(const char *col)
{
    for (size_t i = 0; i < N_RUN_FIELDS; i++)
        if (!strcmp(col, RUN_FIELDS[i])) return 1;
    return 0;
}

/* A run field as a value; *out NULL where the run has none. */
static mr_status field_cell(const mr_run_summary *r, const char *col, mr_value **out)
{
    mr_status st = MR_OK;
    char iso[32] = "";
    int want = 1; /* whether the run has a value */
    mr_buf b;
    mr_buf_init(&b);
    *out = NULL;
    if (!strcmp(col, "id")) {
        *out = mr_value_new_int(r->id);
    } else if (!strcmp(col, "name")) {
        want = r->name != NULL;
        if (want) *out = mr_value_new_str(r->name);
    } else if (!strcmp(col, "status")) {
        *out = mr_value_new_str(r->status ? r->status : "");
    } else if (!strcmp(col, "started")) {
        mr_iso_time(r->started, iso, sizeof(iso));
        *out = mr_value_new_str(iso); /* ISO text sorts chronologically */
    } else if (!strcmp(col, "seconds")) {
        want = !isnan(r->ended);
        if (want) *out = mr_value_new_float(r->ended - r->started);
    } else if (!strcmp(col, "ran") || !strcmp(col, "cached") || !strcmp(col, "failed") || !strcmp(col, "skipped")) {
        int64_t v = col[0] == 'r' ? r->n_executed : col[0] == 'c' ? r->n_cached : col[0] == 'f' ? r->n_failed : r->n_skipped;
        *out = mr_value_new_int(v);
    } else if (!strcmp(col, "commit")) {
        want = r->git_commit && r->git_commit[0];
        if (want) *out = mr_value_new_str(r->git_commit);
    } else if (!strcmp(col, "tags")) {
        want = r->n_tags > 0;
        for (size_t i = 0; i < r->n_tags && st == MR_OK; i++)
            st = mr_buf_printf(&b, "%s%s%s%s", i ? "," : "", r->tags[i].key, r->tags[i].value ? "=" : "",
                               r->tags[i].value ? r->tags[i].value : "");
        if (want && st == MR_OK) *out = mr_value_new_str(b.data);
    }
    if (want && !*out) st = MR_E_NOMEM;
    mr_buf_free(&b);
    return st;
}

/* The cell of one column for one run (*out NULL: the run has none). Columns
 * that are neither a run field nor params.* / metrics.* give NULL too (the
 * caller reports them). */
static mr_status cell_of(const mr_run_summary *r, const char *col, mr_value **out)
{
    mr_status st = MR_OK;
    *out = NULL;
    if (is_run_field(col)) {
        st = field_cell(r, col, out);
    } else if (!strncmp(col, "params.", 7) && col[7]) {
        const mr_value *v = mr_value_get_path(r->params, col + 7);
        if (v && !(v->kind == MR_V_MAP && v->n)) {
            *out = mr_value_clone(v);
            if (!*out) st = MR_E_NOMEM;
        }
    } else if (!strncmp(col, "metrics.", 8)) {
        const char *stage = col + 8, *dot = strchr(stage, '.');
        const mr_run_final *f = dot && dot > stage && dot[1] ? find_final(r, stage, (size_t)(dot - stage), dot + 1) : NULL;
        if (f) {
            *out = mr_value_new_float(f->value);
            if (!*out) st = MR_E_NOMEM;
        }
    }
    return st;
}

/* Every column some run of l has, for "did you mean". */
static mr_status known_columns(const mr_run_summary *runs, size_t n, mr__strvec *out)
{
    mr_status st = MR_OK;
    for (size_t i = 0; i < N_RUN_FIELDS && st == MR_OK; i++) st = mr__strvec_push(out, RUN_FIELDS[i]);
    for (size_t r = 0; r < n && st == MR_OK; r++) {
        mr__leaf_vec lv = {0};
        st = mr__runstore_flatten(runs[r].params, NULL, &lv);
        for (size_t k = 0; k < lv.n && st == MR_OK; k++) {
            char *c = mr_asprintf("params.%s", lv.paths[k]);
            st = c ? mr__strvec_push(out, c) : MR_E_NOMEM;
            mr_free(c);
        }
        mr__leaf_vec_free(&lv);
        for (size_t k = 0; k < runs[r].n_finals && st == MR_OK; k++) {
            char *c = mr_asprintf("metrics.%s.%s", runs[r].finals[k].stage, runs[r].finals[k].name);
            st = c ? mr__strvec_push(out, c) : MR_E_NOMEM;
            mr_free(c);
        }
    }
    if (st == MR_OK) mr__strvec_uniq(out);
    return st;
}

/* MR_E_NOT_FOUND for an unknown column, naming the three closest known ones. */
static mr_status unknown_column(const mr_run_summary *runs, size_t n, const char *col, mr_error *err)
{
    mr__strvec known = {0};
    mr_status st = known_columns(runs, n, &known);
    if (st != MR_OK) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    const char *best[3] = {NULL, NULL, NULL};
    size_t dist[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    /* A params.* or metrics.* column is compared with its own kind only. */
    const char *kind = !strncmp(col, "params.", 7) ? "params." : !strncmp(col, "metrics.", 8) ? "metrics." : NULL;
    for (size_t i = 0; i < known.n; i++) {
        if (kind && strncmp(known.v[i], kind, strlen(kind))) continue;
        size_t d = mr_edit_distance(col, known.v[i]);
        for (int k = 0; k < 3; k++) {
            if (d >= dist[k]) continue;
            for (int m = 2; m > k; m--) {
                dist[m] = dist[m - 1];
                best[m] = best[m - 1];
            }
            dist[k] = d;
            best[k] = known.v[i];
            break;
        }
    }
    if (!strncmp(col, "params.", 7) || !strncmp(col, "metrics.", 8))
        st = MR_ERR(err, MR_E_NOT_FOUND, "column '%s': no listed run has it", col);
    else
        st = MR_ERR(err, MR_E_NOT_FOUND, "unknown column '%s' (expected a run field, params.PATH or metrics.STAGE.NAME)",
                    col);
    mr_error_key(err, col);
    if (best[0] && best[1] && best[2])
        mr_error_hint(err, "the closest columns are '%s', '%s' and '%s'", best[0], best[1], best[2]);
    else if (best[0] && best[1])
        mr_error_hint(err, "the closest columns are '%s' and '%s'", best[0], best[1]);
    else if (best[0])
        mr_error_hint(err, "the closest column is '%s'", best[0]);
done:
    mr__strvec_free(&known);
    return st;
}

/* Numbers (bool, int, float) before text; text bytewise. */
static int cmp_cells(const mr_value *a, const mr_value *b)
{
    int na = a->kind == MR_V_INT || a->kind == MR_V_FLOAT || a->kind == MR_V_BOOL;
    int nb = b->kind == MR_V_INT || b->kind == MR_V_FLOAT || b->kind == MR_V_BOOL;
    if (na != nb) return na ? -1 : 1;
    if (na) {
        double x = a->kind == MR_V_INT ? (double)a->u.i : a->kind == MR_V_FLOAT ? a->u.f : a->u.b;
        double y = b->kind == MR_V_INT ? (double)b->u.i : b->kind == MR_V_FLOAT ? b->u.f : b->u.b;
        if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    mr_buf ta, tb;
    mr_buf_init(&ta);
    mr_buf_init(&tb);
    mr_runstore_value_text(a, &ta);
    mr_runstore_value_text(b, &tb);
    int c = strcmp(ta.data ? ta.data : "", tb.data ? tb.data : "");
    mr_buf_free(&ta);
    mr_buf_free(&tb);
    return c;
}

/* Stable merge sort of run indices by key: runs without a key last
 * whatever the direction; ties keep the newest-first order. */
static void sort_runs(size_t *idx, size_t n, mr_value *const *keys, int desc, size_t *tmp)
{
    if (n < 2) return;
    size_t h = n / 2;
    sort_runs(idx, h, keys, desc, tmp);
    sort_runs(idx + h, n - h, keys, desc, tmp);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        const mr_value *a = keys[idx[i]], *b = keys[idx[j]];
        int take_right;
        if (!a || !b)
            take_right = !a && b;
        else
            take_right = desc ? cmp_cells(a, b) < 0 : cmp_cells(a, b) > 0;
        tmp[k++] = take_right ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof(*idx));
}

/* ---- the run list --------------------------------------------------------- */

void mr_run_list_free(mr_run_list *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) mr__runstore_summary_deinit(&l->runs[i]);
    for (size_t i = 0; l->cells && i < l->n * l->n_columns; i++) mr_value_free(l->cells[i]);
    for (size_t j = 0; j < l->n_columns; j++) mr_free(l->columns[j]);
    mr_free(l->runs);
    mr_free(l->cells);
    mr_free(l->columns);
    mr_free(l);
}

/* Whether a column (or "-COLUMN") needs the runs' final metrics. */
static int needs_finals(const char *col)
{
    return col && !strncmp(col[0] == '-' || col[0] == '+' ? col + 1 : col, "metrics.", 8);
}

/* SELECT of the candidate runs: tag filters, newest first, a LIMIT when unsorted. */
static mr_status select_runs(mr_runstore *rs, const mr_runs_query *q, mr_run_list *l, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    mr_buf sql;
    size_t cap = 0;
    int rc, bind = 1;
    mr_buf_init(&sql);
    st = mr_buf_puts(&sql, "SELECT " MR__RUN_COLS " FROM runs WHERE 1");
    for (size_t t = 0; t < q->n_tags && st == MR_OK; t++) {
        st = mr_run_tag_check(q->tags[t], err);
        if (st != MR_OK) goto done;
        st = mr_buf_puts(&sql, strchr(q->tags[t], '=')
                                   ? " AND id IN (SELECT run_id FROM run_tags WHERE key = ? AND value = ?)"
                                   : " AND id IN (SELECT run_id FROM run_tags WHERE key = ?)");
    }
    if (st == MR_OK) st = mr_buf_puts(&sql, q->sort ? " ORDER BY id DESC" : " ORDER BY id DESC LIMIT ?");
    if (st != MR_OK) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    st = mr__runstore_prepare(rs, sql.data, &s, err);
    if (st != MR_OK) goto done;
    for (size_t t = 0; t < q->n_tags; t++) {
        const char *eq = strchr(q->tags[t], '=');
        sqlite3_bind_text(s, bind++, q->tags[t], eq ? (int)(eq - q->tags[t]) : -1, SQLITE_STATIC);
        if (eq) sqlite3_bind_text(s, bind++, eq + 1, -1, SQLITE_STATIC);
    }
    if (!q->sort) sqlite3_bind_int64(s, bind, q->limit > 0 ? q->limit : -1);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&l->runs, l->n, &cap, sizeof(*l->runs), err);
        if (st == MR_OK) st = mr__runstore_fill_summary(s, &l->runs[l->n++], err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading runs");
done:
    sqlite3_finalize(s);
    mr_buf_free(&sql);
    return st;
}

/* Fills l->cells for the query's columns, checking that each is known. */
static mr_status fill_cells(const mr_runs_query *q, mr_run_list *l, mr_error *err)
{
    mr_status st = MR_OK;
    l->columns = mr_calloc(q->n_columns ? q->n_columns : 1, sizeof(*l->columns));
    l->cells = mr_calloc(l->n * q->n_columns + 1, sizeof(*l->cells));
    if (!l->columns || !l->cells) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    for (size_t j = 0; j < q->n_columns; j++) {
        l->columns[j] = mr_strdup(q->columns[j]);
        if (!l->columns[j]) {
            st = mr__runstore_nomem(err);
            goto done;
        }
        l->n_columns = j + 1;
        int any = is_run_field(q->columns[j]);
        for (size_t i = 0; i < l->n; i++) {
            if (cell_of(&l->runs[i], q->columns[j], &l->cells[i * q->n_columns + j]) != MR_OK) {
                st = mr__runstore_nomem(err);
                goto done;
            }
            any |= l->cells[i * q->n_columns + j] != NULL;
        }
        if (!any && l->n) {
            st = unknown_column(l->runs, l->n, q->columns[j], err);
            goto done;
        }
    }
done:
    return st;
}

/* Sorts l by q->sort and keeps the first q->limit runs. */
static mr_status sort_list(const mr_runs_query *q, mr_run_list *l, mr_error *err)
{
    mr_status st = MR_OK;
    int desc = q->sort[0] == '-';
    const char *col = q->sort[0] == '-' || q->sort[0] == '+' ? q->sort + 1 : q->sort;
    mr_value **keys = mr_calloc(l->n + 1, sizeof(*keys));
    size_t *idx = mr_calloc(l->n + 1, sizeof(*idx)), *tmp = mr_calloc(l->n + 1, sizeof(*tmp));
    mr_run_summary *runs = mr_calloc(l->n + 1, sizeof(*runs));
    mr_value **cells = mr_calloc(l->n * l->n_columns + 1, sizeof(*cells));
    int any = is_run_field(col);
    size_t n_all = l->n;
    size_t keep = q->limit > 0 && (size_t)q->limit < l->n ? (size_t)q->limit : l->n;
    if (!keys || !idx || !tmp || !runs || !cells) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    for (size_t i = 0; i < l->n; i++) {
        idx[i] = i;
        if (cell_of(&l->runs[i], col, &keys[i]) != MR_OK) {
            st = mr__runstore_nomem(err);
            goto done;
        }
        any |= keys[i] != NULL;
    }
    if (!any && l->n) {
        st = unknown_column(l->runs, l->n, col, err);
        goto done;
    }
    sort_runs(idx, l->n, keys, desc, tmp);
    /* Reorder runs and cells; the runs past the limit are released. */
    for (size_t i = 0; i < l->n; i++) {
        runs[i] = l->runs[idx[i]];
        for (size_t j = 0; j < l->n_columns; j++) cells[i * l->n_columns + j] = l->cells[idx[i] * l->n_columns + j];
    }
    for (size_t i = keep; i < l->n; i++) {
        mr__runstore_summary_deinit(&runs[i]);
        for (size_t j = 0; j < l->n_columns; j++) mr_value_free(cells[i * l->n_columns + j]);
    }
    mr_free(l->runs);
    mr_free(l->cells);
    l->runs = runs;
    l->cells = cells;
    l->n = keep;
    runs = NULL;
    cells = NULL;
done:
    for (size_t i = 0; keys && i < n_all; i++) mr_value_free(keys[i]);
    mr_free(keys);
    mr_free(idx);
    mr_free(tmp);
    mr_free(runs);
    mr_free(cells);
    return st;
}

mr_status mr_runstore_runs(mr_runstore *rs, const mr_runs_query *q, mr_run_list **out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_runs_query none;
    memset(&none, 0, sizeof(none));
    if (!q) q = &none;
    int finals = needs_finals(q->sort);
    mr_run_list *l = mr_calloc(1, sizeof(*l));
    *out = NULL;
    if (!l) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    for (size_t j = 0; j < q->n_columns; j++) finals |= needs_finals(q->columns[j]);
    st = mr_runstore_reap(rs, NULL, err);
    if (st == MR_OK) st = select_runs(rs, q, l, err);
    for (size_t i = 0; i < l->n && st == MR_OK; i++) {
        st = mr__runstore_load_tags(rs, &l->runs[i], err);
        if (st == MR_OK && finals) st = mr__runstore_load_finals(rs, &l->runs[i], err);
    }
    if (st == MR_OK) st = fill_cells(q, l, err);
    if (st == MR_OK && q->sort) st = sort_list(q, l, err);
done:
    if (st != MR_OK) {
        mr_run_list_free(l);
        l = NULL;
    }
    *out = l;
    return st;
}
