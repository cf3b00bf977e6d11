/* Point-in-time joins (include/millrace/pit.h): each view's rows sorted by
 * (keys, event time, created time, row), the entity rows once by (keys,
 * time, row), then one forward merge per view that remembers the last view
 * row at or before each entity row. Sorts are stable merge sorts of row
 * indices, so every tie has one answer whatever the thread count. */
#include "millrace/pit.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

/* ---- durations ------------------------------------------------------------------ */

mr_status mr_pit_parse_duration(const char *text, int64_t *us_out)
{
    if (!text || !*text) return MR_E_PARSE;
    const char *p = text;
    int64_t total = 0;
    int units = 0;
    while (*p) {
        if (!isdigit((unsigned char)*p)) return MR_E_PARSE;
        int64_t n = 0;
        while (isdigit((unsigned char)*p)) {
            if (n > INT64_MAX / 10 - 9) return MR_E_PARSE;
            n = n * 10 + (*p++ - '0');
        }
        int64_t unit;
        switch (*p) {
        case 'w': unit = 7 * 86400; break;
        case 'd': unit = 86400; break;
        case 'h': unit = 3600; break;
        case 'm': unit = 60; break;
        case 's': unit = 1; break;
        case '\0':
            if (units) return MR_E_PARSE; /* "1d12": a number without its unit */
            unit = 1;
            break;
        default: return MR_E_PARSE;
        }
        if (*p) p++;
        units++;
        if (n > INT64_MAX / MR_PIT_SECOND_US / unit) return MR_E_PARSE;
        int64_t us = n * unit * MR_PIT_SECOND_US;
        if (total > INT64_MAX - us) return MR_E_PARSE;
        total += us;
    }
    *us_out = total;
    return MR_OK;
}

/* ---- columns --------------------------------------------------------------------- */

int mr_pit_parse_moment(const char *s, size_t len, int64_t *us)
{
    int32_t d;
    if (mr_timestamp_parse(s, len, us) == 0) return 0;
    if (mr_date_parse(s, len, &d) != 0) return -1;
    *us = mr_pit_date_us(d);
    return 0;
}

int64_t mr_pit_date_us(int32_t days)
{
    int64_t d = days;
    return d > INT64_MAX / MR_PIT_DAY_US ? INT64_MAX : d < INT64_MIN / MR_PIT_DAY_US ? INT64_MIN : d * MR_PIT_DAY_US;
}

/* A timestamp column's value i in microseconds (DATE: its midnight). */
static int64_t ts_at(const mr_column *c, size_t i)
{
    if (c->type == MR_T_DATE) return mr_pit_date_us(((const int32_t *)c->data)[i]);
    return ((const int64_t *)c->data)[i];
}

static int key_type_ok(mr_dtype t)
{
    return t == MR_T_INT64 || t == MR_T_STRING || t == MR_T_DATE || t == MR_T_TIMESTAMP || t == MR_T_BOOL;
}

/* Compares value i of a with value j of b (same type, neither null). */
static int cmp_value(const mr_column *a, size_t i, const mr_column *b, size_t j)
{
    switch (a->type) {
    case MR_T_STRING: {
        size_t la, lb;
        const char *sa = mr_column_str(a, i, &la), *sb = mr_column_str(b, j, &lb);
        int c = memcmp(sa, sb, la < lb ? la : lb);
        return c ? (c < 0 ? -1 : 1) : (la > lb) - (la < lb);
    }
    case MR_T_DATE: {
        int32_t x = ((const int32_t *)a->data)[i], y = ((const int32_t *)b->data)[j];
        return (x > y) - (x < y);
    }
    case MR_T_BOOL: {
        uint8_t x = ((const uint8_t *)a->data)[i], y = ((const uint8_t *)b->data)[j];
        return (x > y) - (x < y);
    }
    default: {
        int64_t x = ((const int64_t *)a->data)[i], y = ((const int64_t *)b->data)[j];
        return (x > y) - (x < y);
    }
    }
}

/* One side of the join: its key columns, its time and (views) created time. */
typedef struct side {
    const mr_column **keys;
    size_t n_keys;
    const mr_column *ts;
    const mr_column *created; /* NULL: none */
} side;

static int cmp_keys(const side *a, size_t i, const side *b, size_t j)
{
    for (size_t k = 0; k < a->n_keys; k++) {
        int c = cmp_value(a->keys[k], i, b->keys[k], j);
        if (c) return c;
    }
    return 0;
}

/* The sort order of a side's rows: keys, time, created (null first), row. */
static int cmp_rows(const side *s, uint32_t i, uint32_t j)
{
    int c = cmp_keys(s, i, s, j);
    if (c) return c;
    int64_t x = ts_at(s->ts, i), y = ts_at(s->ts, j);
    if (x != y) return x < y ? -1 : 1;
    if (s->created) {
        int ni = mr_column_is_null(s->created, i), nj = mr_column_is_null(s->created, j);
        if (ni != nj) return ni ? -1 : 1;
        if (!ni) {
            x = ts_at(s->created, i), y = ts_at(s->created, j);
            if (x != y) return x < y ? -1 : 1;
        }
    }
    return (i > j) - (i < j);
}

/* Sorts idx[0, n) by cmp_rows (a merge sort: stable, and the order is
 * total anyway: the row breaks every tie). tmp: n scratch slots. */
static void sort_rows(const side *s, uint32_t *idx, uint32_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) tmp[o++] = cmp_rows(s, idx[b], idx[a]) < 0 ? idx[b++] : idx[a++];
            while (a < mid) tmp[o++] = idx[a++];
            while (b < hi) tmp[o++] = idx[b++];
        }
        memcpy(idx, tmp, n * sizeof(*idx));
    }
}

/* The rows of s that can be joined (no null key or time), sorted. */
static uint32_t *sorted_rows(const side *s, size_t n_rows, size_t *n_out)
{
    uint32_t *idx = mr_malloc((n_rows ? n_rows : 1) * sizeof(*idx));
    uint32_t *tmp = mr_malloc((n_rows ? n_rows : 1) * sizeof(*tmp));
    if (!idx || !tmp) {
        mr_free(idx);
        mr_free(tmp);
        return NULL;
    }
    size_t n = 0;
    for (size_t r = 0; r < n_rows; r++) {
        int null = mr_column_is_null(s->ts, r);
        for (size_t k = 0; !null && k < s->n_keys; k++) null = mr_column_is_null(s->keys[k], r);
        if (!null) idx[n++] = (uint32_t)r;
    }
    sort_rows(s, idx, tmp, n);
    mr_free(tmp);
    *n_out = n;
    return idx;
}

/* ---- binding ---------------------------------------------------------------------- */

static mr_status find_col(const mr_table *t, const char *what, const char *name, const char *role,
                          const mr_column **out, mr_error *err)
{
    *out = name ? mr_table_column(t, name) : NULL;
    if (*out) return MR_OK;
    mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "%s has no %s column '%s'", what, role, name ? name : "");
    const char **names = mr_malloc((t->n_cols ? t->n_cols : 1) * sizeof(*names));
    if (names && name) {
        for (size_t i = 0; i < t->n_cols; i++) names[i] = t->cols[i]->name;
        const char *near = mr_closest(name, names, t->n_cols);
        if (near) mr_error_hint(err, "did you mean '%s'?", near);
        else if (t->n_cols) mr_error_hint(err, "its columns: %s%s%s", names[0], t->n_cols > 1 ? ", " : "",
                                          t->n_cols > 1 ? names[1] : "");
    }
    mr_free(names);
    return rc;
}

static mr_status time_col(const mr_table *t, const char *what, const char *name, const char *role,
                          const mr_column **out, mr_error *err)
{
    mr_status rc = find_col(t, what, name, role, out, err);
    if (rc != MR_OK) return rc;
    if ((*out)->type != MR_T_TIMESTAMP && (*out)->type != MR_T_DATE) {
        rc = MR_ERR(err, MR_E_SCHEMA, "%s: the %s column '%s' is %s; a timestamp or a date is expected", what, role,
                    name, mr_dtype_name((*out)->type));
        mr_error_hint(err, "declare its type in the ingest's schema (timestamp), or derive one");
    }
    return rc;
}

/* ---- the merge -------------------------------------------------------------------- */

typedef struct view_job {
    const mr_pit_view *v;
    side s;
    const side *e;           /* the entity side */
    const uint32_t *e_idx;   /* the joinable entity rows, sorted */
    size_t n_e, n_rows;      /* joinable rows; all entity rows */
    uint32_t *pick;          /* per entity row: the view row, or NONE */
    uint64_t missing;
    int failed;              /* out of memory */
} view_job;

static void join_view(view_job *j)
{
    size_t n_v = 0;
    uint32_t *v_idx = sorted_rows(&j->s, j->v->table->n_rows, &n_v);
    if (!v_idx) {
        j->failed = 1;
        return;
    }
    for (size_t r = 0; r < j->n_rows; r++) j->pick[r] = NONE;
    size_t p = 0;
    for (size_t q = 0; q < j->n_e; q++) {
        uint32_t er = j->e_idx[q];
        int64_t ets = ts_at(j->e->ts, er);
        /* advance past every view row that sorts at or before (keys, ets) */
        while (p < n_v) {
            int c = cmp_keys(&j->s, v_idx[p], j->e, er);
            if (c > 0 || (c == 0 && ts_at(j->s.ts, v_idx[p]) > ets)) break;
            p++;
        }
        if (p == 0) continue;
        uint32_t vr = v_idx[p - 1];
        if (cmp_keys(&j->s, vr, j->e, er) != 0) continue; /* the last row before is another key's */
        /* vts <= ets: the difference is exact as unsigned, whatever the two are */
        if (j->v->ttl_us > 0 && (uint64_t)ets - (uint64_t)ts_at(j->s.ts, vr) > (uint64_t)j->v->ttl_us) continue;
        j->pick[er] = vr;
    }
    mr_free(v_idx);
    for (size_t r = 0; r < j->n_rows; r++) j->missing += j->pick[r] == NONE;
}

static void join_views_task(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    view_job *jobs = ctx;
    for (size_t v = begin; v < end; v++) join_view(&jobs[v]);
}

/* Column c's rows pick[0, n) (NONE: null), named name: gathered in one
 * pass (a missing row reads row 0, then is marked null), or, from an empty
 * column, all nulls. */
static mr_status take_or_null(const mr_column *c, const uint32_t *pick, size_t n, const char *name, mr_column **out,
                              mr_error *err)
{
    *out = NULL;
    mr_column *col = NULL;
    mr_status rc = MR_OK;
    size_t missing = 0;
    for (size_t r = 0; r < n; r++) missing += pick[r] == NONE;
    if (c->n == 0) {
        rc = mr_column_new(name, c->type, n, &col, err);
        if (rc == MR_OK) col->kind = c->kind;
        for (size_t r = 0; rc == MR_OK && r < n; r++)
            if (mr_column_append_null(col) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    } else {
        uint32_t *idx = mr_malloc((n ? n : 1) * sizeof(*idx));
        if (!idx) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t r = 0; r < n; r++) idx[r] = pick[r] == NONE ? 0 : pick[r];
        rc = mr_column_take(c, idx, n, &col, err);
        mr_free(idx);
        if (rc == MR_OK && missing && !col->valid) {
            size_t nb = (col->cap + 7) / 8;
            col->valid = mr_malloc(nb ? nb : 1);
            if (!col->valid) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            else memset(col->valid, 0xff, nb ? nb : 1);
        }
        for (size_t r = 0; rc == MR_OK && missing && r < n; r++)
            if (pick[r] == NONE && !mr_column_is_null(col, r)) {
                col->valid[r >> 3] &= (uint8_t) ~(1u << (r & 7));
                col->null_count++;
            }
        if (rc == MR_OK) {
            char *nm = mr_strdup(name);
            if (!nm) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            } else {
                mr_free(col->name);
                col->name = nm;
            }
        }
    }
    if (rc != MR_OK) {
        mr_column_free(col);
        return rc;
    }
    *out = col;
    return MR_OK;
}

mr_status mr_pit_join(const mr_table *entities, const char *const *keys, size_t n_keys, const char *ts,
                      const mr_pit_view *views, size_t n_views, int threads, mr_table **out, uint64_t *missing,
                      mr_error *err)
{
    *out = NULL;
    if (!entities || !keys || n_keys == 0 || !ts || (n_views && !views))
        return MR_ERR(err, MR_E_INVALID_ARG, "a point-in-time join needs an entity table, its keys and its timestamp");
    if (entities->n_rows >= NONE) return MR_ERR(err, MR_E_LIMIT, "the entity table has %zu rows (at most %u)",
                                                entities->n_rows, NONE - 1);
    mr_status rc = MR_OK;
    view_job *jobs = mr_calloc(n_views ? n_views : 1, sizeof(*jobs));
    const mr_column **kcols = mr_calloc((n_views + 1) * n_keys, sizeof(*kcols));
    uint32_t *e_idx = NULL;
    char **onames = NULL;
    size_t n_onames = 0;
    mr_table *t = NULL;
    if (!jobs || !kcols) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    side e = {kcols, n_keys, NULL, NULL};
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        rc = find_col(entities, "the entity table", keys[k], "key", &kcols[k], err);
        if (rc == MR_OK && !key_type_ok(kcols[k]->type))
            rc = MR_ERR(err, MR_E_SCHEMA, "the entity table's key column '%s' is %s; int64, string, date, timestamp or "
                        "bool is expected", keys[k], mr_dtype_name(kcols[k]->type));
    }
    if (rc == MR_OK) rc = time_col(entities, "the entity table", ts, "timestamp", &e.ts, err);
    for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
        const mr_pit_view *pv = &views[v];
        char what[160];
        snprintf(what, sizeof(what), "feature view '%s'", pv->name ? pv->name : "");
        if (!pv->table || !pv->keys) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "%s has no table or no keys", what);
            break;
        }
        if (pv->table->n_rows >= NONE) {
            rc = MR_ERR(err, MR_E_LIMIT, "%s has %zu rows (at most %u)", what, pv->table->n_rows, NONE - 1);
            break;
        }
        if (pv->ttl_us < 0) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: a negative ttl", what);
            break;
        }
        view_job *j = &jobs[v];
        j->v = pv;
        j->s = (side){kcols + (v + 1) * n_keys, n_keys, NULL, NULL};
        for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
            rc = find_col(pv->table, what, pv->keys[k], "key", &j->s.keys[k], err);
            if (rc == MR_OK && j->s.keys[k]->type != kcols[k]->type)
                rc = MR_ERR(err, MR_E_SCHEMA, "%s: key column '%s' is %s, the entity table's '%s' is %s", what,
                            pv->keys[k], mr_dtype_name(j->s.keys[k]->type), keys[k], mr_dtype_name(kcols[k]->type));
        }
        if (rc == MR_OK) rc = time_col(pv->table, what, pv->ts, "event timestamp", &j->s.ts, err);
        if (rc == MR_OK && pv->created) rc = time_col(pv->table, what, pv->created, "created timestamp", &j->s.created, err);
        for (size_t f = 0; rc == MR_OK && f < pv->n_features; f++) {
            const mr_column *c;
            rc = find_col(pv->table, what, pv->features[f], "feature", &c, err);
        }
    }
    if (rc != MR_OK) goto done;
    /* the output's names: the entity table's, then prefix + feature per view, each once */
    size_t n_out = entities->n_cols;
    for (size_t v = 0; v < n_views; v++) n_out += views[v].n_features;
    onames = mr_calloc(n_out ? n_out : 1, sizeof(*onames));
    n_onames = n_out;
    if (!onames) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    size_t at = 0;
    for (size_t c = 0; c < entities->n_cols; c++) onames[at++] = mr_strdup(entities->cols[c]->name);
    for (size_t v = 0; v < n_views; v++)
        for (size_t f = 0; f < views[v].n_features; f++) {
            size_t l = (views[v].prefix ? strlen(views[v].prefix) : 0) + strlen(views[v].features[f]) + 1;
            onames[at] = mr_malloc(l);
            if (onames[at]) snprintf(onames[at], l, "%s%s", views[v].prefix ? views[v].prefix : "", views[v].features[f]);
            at++;
        }
    for (size_t i = 0; i < n_out; i++)
        if (!onames[i]) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
    for (size_t i = entities->n_cols, v = 0, f = 0; i < n_out; i++, f++) {
        while (f >= views[v].n_features) v++, f = 0;
        for (size_t q = 0; q < i; q++)
            if (!strcmp(onames[q], onames[i])) {
                rc = MR_ERR(err, MR_E_SCHEMA, "feature view '%s': output column '%s' already exists", views[v].name,
                            onames[i]);
                mr_error_hint(err, "give the view a prefix (prefix: \"%s__\"), or join fewer columns", views[v].name);
                goto done;
            }
    }
    size_t n_e = 0;
    e_idx = sorted_rows(&e, entities->n_rows, &n_e);
    if (!e_idx) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t v = 0; v < n_views; v++) {
        jobs[v].e = &e;
        jobs[v].e_idx = e_idx;
        jobs[v].n_e = n_e;
        jobs[v].n_rows = entities->n_rows;
        jobs[v].pick = mr_malloc((entities->n_rows ? entities->n_rows : 1) * sizeof(uint32_t));
        if (!jobs[v].pick) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
    }
    mr_parallel_for_capped(n_views, 1, threads, join_views_task, jobs);
    for (size_t v = 0; v < n_views; v++)
        if (jobs[v].failed) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory sorting feature view '%s'", views[v].name);
            goto done;
        }
    rc = mr_table_new(&t, err);
    for (size_t c = 0; rc == MR_OK && c < entities->n_cols; c++) {
        mr_column *col = NULL;
        rc = mr_column_slice(entities->cols[c], 0, entities->n_rows, &col, err);
        if (rc == MR_OK) rc = mr_table_add_column(t, col, err);
    }
    at = entities->n_cols;
    for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
        for (size_t f = 0; rc == MR_OK && f < views[v].n_features; f++, at++) {
            mr_column *col = NULL;
            rc = take_or_null(mr_table_column(views[v].table, views[v].features[f]), jobs[v].pick, entities->n_rows,
                              onames[at], &col, err);
            if (rc == MR_OK) rc = mr_table_add_column(t, col, err);
        }
        if (missing) missing[v] = jobs[v].missing;
    }
    if (rc == MR_OK) t->n_rows = entities->n_rows; /* also when there are no columns to set it */
done:
    for (size_t v = 0; jobs && v < n_views; v++) mr_free(jobs[v].pick);
    mr_free(jobs);
    mr_free(kcols);
    mr_free(e_idx);
    for (size_t i = 0; onames && i < n_onames; i++) mr_free(onames[i]);
    mr_free(onames);
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

/* ---- the latest row per entity ----------------------------------------------------- */

mr_status mr_pit_latest(const char *const *keys, size_t n_keys, const mr_pit_view *views, size_t n_views, int threads,
                        mr_table **out, mr_error *err)
{
    *out = NULL;
    if (!keys || n_keys == 0 || n_views == 0 || !views)
        return MR_ERR(err, MR_E_INVALID_ARG, "the latest values need keys and at least one view");
    mr_status rc = MR_OK;
    mr_column **kc = mr_calloc(n_keys, sizeof(*kc));
    mr_pit_view *vs = mr_calloc(n_views, sizeof(*vs));
    const char ***feats = mr_calloc(n_views, sizeof(*feats));
    char **prefixed = mr_calloc(n_views, sizeof(*prefixed));
    mr_table *all = NULL, *ents = NULL, *joined = NULL;
    mr_column *end = NULL;
    uint32_t *idx = NULL;
    if (!kc || !vs || !feats || !prefixed) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    /* every view's key tuples, under the entity's names, one after another */
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
            const mr_column *c = NULL;
            char what[160];
            snprintf(what, sizeof(what), "feature view '%s'", views[v].name ? views[v].name : "");
            if (!views[v].table || !views[v].keys) {
                rc = MR_ERR(err, MR_E_INVALID_ARG, "%s has no table or no keys", what);
                break;
            }
            rc = find_col(views[v].table, what, views[v].keys[k], "key", &c, err);
            if (rc == MR_OK && !key_type_ok(c->type))
                rc = MR_ERR(err, MR_E_SCHEMA, "%s: key column '%s' is %s; int64, string, date, timestamp or bool is "
                            "expected", what, views[v].keys[k], mr_dtype_name(c->type));
            if (rc == MR_OK && kc[k] && kc[k]->type != c->type)
                rc = MR_ERR(err, MR_E_SCHEMA, "%s: key column '%s' is %s, another view's is %s", what,
                            views[v].keys[k], mr_dtype_name(c->type), mr_dtype_name(kc[k]->type));
            if (rc != MR_OK) break;
            if (!kc[k]) {
                rc = mr_column_new(keys[k], c->type, 0, &kc[k], err);
                if (rc == MR_OK && c->type == MR_T_STRING) rc = mr_column_materialize(kc[k], err);
            }
            if (rc == MR_OK) {
                mr_column *plain = NULL;
                rc = mr_column_slice(c, 0, c->n, &plain, err);
                if (rc == MR_OK && plain->type == MR_T_STRING) rc = mr_column_materialize(plain, err);
                if (rc == MR_OK) rc = mr_column_append_column(kc[k], plain, err);
                mr_column_free(plain);
            }
        }
    }
    if (rc != MR_OK) goto done;
    size_t n_all = kc[0]->n;
    if (n_all >= NONE) {
        rc = MR_ERR(err, MR_E_LIMIT, "the views hold %zu rows together (at most %u)", n_all, NONE - 1);
        goto done;
    }
    /* the distinct key tuples, sorted, at the end of time */
    rc = mr_table_new(&all, err);
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        rc = mr_table_add_column(all, kc[k], err);
        kc[k] = NULL;
    }
    if (rc == MR_OK) rc = mr_column_new("__as_of", MR_T_TIMESTAMP, n_all, &end, err);
    for (size_t r = 0; rc == MR_OK && r < n_all; r++) rc = mr_column_append_int64(end, INT64_MAX);
    if (rc == MR_OK) {
        rc = mr_table_add_column(all, end, err);
        end = NULL;
    }
    if (rc != MR_OK) goto done;
    {
        const mr_column **sk = mr_calloc(n_keys, sizeof(*sk));
        if (!sk) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        for (size_t k = 0; k < n_keys; k++) sk[k] = all->cols[k];
        side s = {sk, n_keys, all->cols[n_keys], NULL};
        size_t n = 0;
        idx = sorted_rows(&s, n_all, &n);
        size_t u = 0;
        for (size_t q = 0; idx && q < n; q++)
            if (u == 0 || cmp_keys(&s, idx[u - 1], &s, idx[q]) != 0) idx[u++] = idx[q];
        mr_free(sk);
        if (!idx) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        rc = mr_table_take(all, idx, u, &ents, err);
    }
    if (rc != MR_OK) goto done;
    /* each view's features and its event time, as of the end of time, under a
     * prefix of the view's number (two views may name their time alike) */
    for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
        vs[v] = views[v];
        vs[v].ttl_us = 0;
        feats[v] = mr_calloc(views[v].n_features + 1, sizeof(char *));
        prefixed[v] = mr_malloc(32);
        if (!feats[v] || !prefixed[v]) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        memcpy(feats[v], views[v].features, views[v].n_features * sizeof(char *));
        feats[v][views[v].n_features] = views[v].ts;
        vs[v].features = feats[v];
        vs[v].n_features = views[v].n_features + 1;
        snprintf(prefixed[v], 32, "\x01%zu\x01", v);
        vs[v].prefix = prefixed[v];
    }
    if (rc == MR_OK) rc = mr_pit_join(ents, keys, n_keys, "__as_of", vs, n_views, threads, &joined, NULL, err);
    if (rc != MR_OK) goto done;
    /* the event times as TIMESTAMP, then the names: prefix + feature, prefix + __event_time */
    {
        size_t n_named = joined->n_cols - n_keys - 1, at = n_keys + 1, q = 0;
        size_t *ix = mr_calloc(n_named ? n_named : 1, sizeof(*ix));
        char **nn = mr_calloc(n_named ? n_named : 1, sizeof(*nn));
        for (size_t v = 0; ix && nn && rc == MR_OK && v < n_views; v++) {
            const char *pre = views[v].prefix ? views[v].prefix : "";
            for (size_t f = 0; f <= views[v].n_features; f++, at++, q++) {
                const char *base = f < views[v].n_features ? views[v].features[f] : "__event_time";
                size_t l = strlen(pre) + strlen(base) + 1;
                ix[q] = at;
                nn[q] = mr_malloc(l);
                if (nn[q]) snprintf(nn[q], l, "%s%s", pre, base);
                else rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
            const mr_column *src = joined->cols[at - 1];
            if (rc == MR_OK && src->type == MR_T_DATE) {
                mr_column *et = NULL;
                rc = mr_column_new(src->name, MR_T_TIMESTAMP, src->n, &et, err);
                for (size_t r = 0; rc == MR_OK && r < src->n; r++)
                    rc = mr_column_is_null(src, r) ? mr_column_append_null(et) : mr_column_append_int64(et, ts_at(src, r));
                if (rc == MR_OK) rc = mr_table_set_column(joined, at - 1, et, err);
                else mr_column_free(et);
            }
        }
        if (!ix || !nn) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) {
            rc = mr_table_rename_columns(joined, ix, (const char *const *)nn, n_named, err);
            if (rc == MR_E_SCHEMA)
                mr_error_hint(err, "two views give a column of that name: give them prefixes (prefix: \"VIEW__\")");
        }
        for (size_t i = 0; nn && i < n_named; i++) mr_free(nn[i]);
        mr_free(nn);
        mr_free(ix);
    }
    if (rc == MR_OK) {
        const char **keep = mr_calloc(joined->n_cols, sizeof(*keep));
        size_t nk = 0;
        for (size_t c = 0; keep && c < joined->n_cols; c++)
            if (c != n_keys) keep[nk++] = joined->cols[c]->name;
        rc = keep ? mr_table_project(joined, keep, nk, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(keep);
    }
done:
    for (size_t k = 0; kc && k < n_keys; k++) mr_column_free(kc[k]);
    for (size_t v = 0; v < n_views; v++) {
        if (feats) mr_free(feats[v]);
        if (prefixed) mr_free(prefixed[v]);
    }
    mr_free(kc);
    mr_free(vs);
    mr_free(feats);
    mr_free(prefixed);
    mr_column_free(end);
    mr_free(idx);
    mr_table_free(all);
    mr_table_free(ents);
    if (rc != MR_OK) {
        mr_table_free(joined);
        return rc;
    }
    *out = joined;
    return MR_OK;
}
