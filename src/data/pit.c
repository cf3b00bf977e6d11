/* Point-in-time joins (include/millrace/pit.h): each view's rows sorted by
 * (keys, event time, created time, row), the entity rows once by (keys,
 * time, row), then one forward merge per view that remembers the last view
 * row at or before each entity row. Sorts are stable merge sorts of row
 * indices, so every tie has one answer whatever the thread count. */
#include "millrace/pit.h"

#include "millrace/dataset.h"
#include "millrace/parquet.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Row i of a against row j of b (two views bound alike): keys, time,
 * created (null first). */
static int cmp_order(const side *a, size_t i, const side *b, size_t j)
{
    int c = cmp_keys(a, i, b, j);
    if (c) return c;
    int64_t x = ts_at(a->ts, i), y = ts_at(b->ts, j);
    if (x != y) return x < y ? -1 : 1;
    if (a->created) {
        int ni = mr_column_is_null(a->created, i), nj = mr_column_is_null(b->created, j);
        if (ni != nj) return ni ? -1 : 1;
        if (!ni) {
            x = ts_at(a->created, i), y = ts_at(b->created, j);
            if (x != y) return x < y ? -1 : 1;
        }
    }
    return 0;
}

/* The sort order of a side's rows: keys, time, created (null first), row. */
static int cmp_rows(const side *s, uint32_t i, uint32_t j)
{
    int c = cmp_order(s, i, s, j);
    return c ? c : (i > j) - (i < j);
}

/* Merges the sorted runs idx[lo, mid) and idx[mid, hi) into tmp[lo, hi). */
static void merge_runs(const side *s, const uint32_t *idx, uint32_t *tmp, size_t lo, size_t mid, size_t hi)
{
    size_t a = lo, b = mid, o = lo;
    while (a < mid && b < hi) tmp[o++] = cmp_rows(s, idx[b], idx[a]) < 0 ? idx[b++] : idx[a++];
    while (a < mid) tmp[o++] = idx[a++];
    while (b < hi) tmp[o++] = idx[b++];
}

/* The end of the ascending run of idx that starts at lo. */
static size_t run_end(const side *s, const uint32_t *idx, size_t lo, size_t n)
{
    size_t e = lo + 1;
    while (e < n && cmp_rows(s, idx[e - 1], idx[e]) < 0) e++;
    return e;
}

/* Sorts idx[0, n) by cmp_rows (a merge sort: stable, and the order is
 * total anyway: the row breaks every tie). tmp: n scratch slots. Rows
 * already in order (a view written sorted) cost one pass, and two sorted
 * runs (sorted rows, then new ones, themselves sorted) one merge; anything
 * else costs at most two comparisons more than the plain bottom-up sort. */
static void sort_rows(const side *s, uint32_t *idx, uint32_t *tmp, size_t n)
{
    if (n < 2) return;
    size_t p = run_end(s, idx, 0, n);
    if (p == n) return;
    if (run_end(s, idx, p, n) == n) {
        merge_runs(s, idx, tmp, 0, p, n);
        memcpy(idx, tmp, n * sizeof(*idx));
        return;
    }
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            merge_runs(s, idx, tmp, lo, mid, hi);
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

/* Binds view pv over table t: its key columns (typed as the entity's
 * ekeys), its times and its features, into s (s->keys: n_keys slots). */
static mr_status bind_view(const mr_pit_view *pv, const mr_table *t, const mr_column *const *ekeys,
                           const char *const *ekey_names, size_t n_keys, side *s, mr_error *err)
{
    char what[160];
    snprintf(what, sizeof(what), "feature view '%s'", pv->name ? pv->name : "");
    if (!t || !pv->keys) return MR_ERR(err, MR_E_INVALID_ARG, "%s has no table or no keys", what);
    if (t->n_rows >= NONE) return MR_ERR(err, MR_E_LIMIT, "%s has %zu rows (at most %u)", what, t->n_rows, NONE - 1);
    if (pv->ttl_us < 0) return MR_ERR(err, MR_E_INVALID_ARG, "%s: a negative ttl", what);
    s->n_keys = n_keys;
    s->ts = s->created = NULL;
    mr_status rc = MR_OK;
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        rc = find_col(t, what, pv->keys[k], "key", &s->keys[k], err);
        if (rc == MR_OK && s->keys[k]->type != ekeys[k]->type)
            rc = MR_ERR(err, MR_E_SCHEMA, "%s: key column '%s' is %s, the entity table's '%s' is %s", what, pv->keys[k],
                        mr_dtype_name(s->keys[k]->type), ekey_names[k], mr_dtype_name(ekeys[k]->type));
    }
    if (rc == MR_OK) rc = time_col(t, what, pv->ts, "event timestamp", &s->ts, err);
    if (rc == MR_OK && pv->created) rc = time_col(t, what, pv->created, "created timestamp", &s->created, err);
    for (size_t f = 0; rc == MR_OK && f < pv->n_features; f++) {
        const mr_column *c;
        rc = find_col(t, what, pv->features[f], "feature", &c, err);
    }
    return rc;
}

/* A view's rows in the join's order, for a view materialised sorted. */
mr_status mr_pit_view_order(const mr_table *t, const char *const *keys, size_t n_keys, const char *ts,
                            const char *created, uint32_t **order_out, size_t *n_out, mr_error *err)
{
    *order_out = NULL;
    *n_out = 0;
    if (!t || !keys || !n_keys) return MR_ERR(err, MR_E_INVALID_ARG, "a feature view needs a table and keys");
    if (t->n_rows >= NONE) return MR_ERR(err, MR_E_LIMIT, "a feature view of %zu rows (at most %u)", t->n_rows, NONE - 1);
    const mr_column **kc = mr_calloc(n_keys, sizeof(*kc));
    if (!kc) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    side s = {.keys = kc, .n_keys = n_keys};
    const char *what = "the feature view's source";
    mr_status rc = MR_OK;
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        rc = find_col(t, what, keys[k], "key", &kc[k], err);
        if (rc == MR_OK && !key_type_ok(kc[k]->type)) {
            rc = MR_ERR(err, MR_E_SCHEMA, "%s: key column '%s' is %s; an int64, string, date, timestamp or bool is expected",
                        what, keys[k], mr_dtype_name(kc[k]->type));
        }
    }
    if (rc == MR_OK) rc = time_col(t, what, ts, "event timestamp", &s.ts, err);
    if (rc == MR_OK && created) rc = time_col(t, what, created, "created timestamp", &s.created, err);
    if (rc == MR_OK) {
        *order_out = sorted_rows(&s, t->n_rows, n_out);
        if (!*order_out) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_free(kc);
    return rc;
}

/* What every view's job shares. */
typedef struct join_plan {
    const side *e;                /* the entity side */
    const char *const *ekey_names;
    const uint32_t *e_idx;        /* the joinable entity rows, sorted */
    size_t n_e, n_rows;           /* joinable rows; all entity rows */
    const mr_pit_write_opts *o;   /* NULL: an in-memory join of bound views */
    size_t batch_rows;            /* the output's batches (a spill's row groups) */
    int lanes;                    /* threads the views were joined on (after the first, with a limit) */
} join_plan;

typedef struct view_job {
    const join_plan *plan;
    const mr_pit_view *v;
    size_t index;
    side s;                       /* bound before the jobs run (in memory) or by the job (loaded) */
    const char *const *onames;    /* the view's output names */
    mr_column **cols;             /* the gathered features, n_features (kept: not spilled) */
    char *spill;                  /* the spill dataset's directory, or NULL */
    uint64_t missing, view_rows;
    uint64_t footprint;           /* about the most the job held: the view, its sort, its picks, its gathers */
    int streamed;                 /* joined from its sorted dataset, a row group at a time */
    int unsorted;                 /* meant to be streamed, but its rows were not in order: loaded whole */
    mr_status rc;
    mr_error err;
} view_job;

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


/* About the bytes of a column's values, nulls and offsets. */
static uint64_t col_bytes(const mr_column *c)
{
    uint64_t n = c->n, b = c->valid ? (n + 7) / 8 : 0;
    if (c->type != MR_T_STRING) return b + n * (mr_dtype_width(c->type) ? mr_dtype_width(c->type) : 1);
    if (c->codes) return b + 4 * n + col_bytes(c->dict);
    return b + 8 * (n + 1) + c->bytes_len;
}

/* Writes the job's gathered columns to its spill file (Parquet, row groups
 * of batch_rows rows, uncompressed) and frees them. */
static mr_status spill_view(view_job *j)
{
    const join_plan *pl = j->plan;
    mr_table *t = NULL;
    mr_status rc = mr_table_new(&t, &j->err);
    for (size_t f = 0; rc == MR_OK && f < j->v->n_features; f++) {
        rc = mr_table_add_column(t, j->cols[f], &j->err); /* t's now, or freed */
        j->cols[f] = NULL;
    }
    char name[48];
    snprintf(name, sizeof(name), "pit-view-%zu.parquet", j->index);
    if (rc == MR_OK) {
        j->spill = mr_path_join(pl->o->tmp_dir, name);
        if (!j->spill) rc = MR_ERR(&j->err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) {
        mr_parquet_write_opts wo;
        mr_parquet_write_opts_init(&wo);
        wo.codec = MR_PQ_UNCOMPRESSED;
        wo.row_group_rows = pl->batch_rows;
        rc = mr_parquet_write_table(j->spill, t, &wo, &j->err);
    }
    mr_table_free(t);
    return rc;
}

/* ---- a view streamed from its sorted dataset ---------------------------------------- */

/* What a streamed view's merge carries from one row group to the next. */
typedef struct stream_state {
    view_job *j;
    mr_table *prev;        /* the last joinable row so far (every column read), one row; NULL: none yet */
    side ps;               /* bound over prev */
    const mr_column **pkeys;
    mr_column **acc;       /* per feature: the picked values, in the entity rows' sorted order */
    uint32_t *posmap;      /* per entity row: its place in acc, or NONE */
    uint32_t *lidx;        /* a row group's picks (local rows), in that order */
    size_t matched, n_prev_picks, n_lidx;
    uint64_t chunk_max;    /* the largest row group's bytes */
} stream_state;

/* Appends n rows of column src picked by idx (a row group's, or prev's
 * row 0 n times) to acc[f], plain strings. */
static mr_status acc_append(stream_state *st, size_t f, const mr_column *src, const uint32_t *idx, size_t n, mr_error *err)
{
    if (!n) return MR_OK;
    mr_column *seg = NULL;
    mr_status rc = mr_column_take(src, idx, n, &seg, err);
    if (rc == MR_OK) rc = mr_column_materialize(seg, err);
    if (rc == MR_OK) rc = mr_column_append_column(st->acc[f], seg, err);
    mr_column_free(seg);
    return rc;
}

/* The picks so far: prev's (all its row 0, first in order), then the row group's. */
static mr_status flush_picks(stream_state *st, const mr_table *chunk, mr_error *err)
{
    const mr_pit_view *v = st->j->v;
    mr_status rc = MR_OK;
    uint32_t *zeros = st->n_prev_picks ? mr_calloc(st->n_prev_picks, sizeof(*zeros)) : NULL;
    if (st->n_prev_picks && !zeros) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t f = 0; rc == MR_OK && f < v->n_features; f++) {
        if (st->n_prev_picks) rc = acc_append(st, f, mr_table_column(st->prev, v->features[f]), zeros, st->n_prev_picks, err);
        if (rc == MR_OK && chunk) rc = acc_append(st, f, mr_table_column(chunk, v->features[f]), st->lidx, st->n_lidx, err);
    }
    mr_free(zeros);
    st->n_prev_picks = st->n_lidx = 0;
    return rc;
}

/* Joins view j by streaming the dataset dir, one row group at a time, its
 * rows in the join's order (a feature_view stage's output): the merge
 * carries the last row across row groups, and the picked values are
 * gathered as they are found. *unsorted = 1 (and nothing kept) when the
 * rows turn out not to be in that order, or there are none: the caller
 * loads the view whole instead. */
static mr_status stream_view(view_job *j, const char *dir, int *unsorted)
{
    const join_plan *pl = j->plan;
    const mr_pit_view *v = j->v;
    size_t nk = pl->e->n_keys, nf = v->n_features;
    *unsorted = 0;
    stream_state st = {.j = j};
    mr_dataset *ds = NULL;
    mr_dataset_scan *scan = NULL;
    mr_table *chunk = NULL;
    const char **cols = mr_calloc(nk + 2 + nf, sizeof(*cols));
    st.pkeys = mr_calloc(2 * nk, sizeof(*st.pkeys)); /* prev's, then the row group's (j->s stays the view's) */
    st.acc = mr_calloc(nf ? nf : 1, sizeof(*st.acc));
    st.posmap = mr_malloc((pl->n_rows ? pl->n_rows : 1) * sizeof(*st.posmap));
    st.lidx = mr_malloc((pl->n_e ? pl->n_e : 1) * sizeof(*st.lidx));
    mr_status rc = cols && st.pkeys && st.acc && st.posmap && st.lidx ? MR_OK : MR_ERR(&j->err, MR_E_NOMEM, "out of memory");
    size_t nc = 0;
    for (size_t i = 0; rc == MR_OK && i < nk + 2 + nf; i++) {
        const char *c = i < nk ? v->keys[i] : i == nk ? v->ts : i == nk + 1 ? v->created : v->features[i - nk - 2];
        int seen = !c;
        for (size_t q = 0; q < nc && !seen; q++) seen = !strcmp(cols[q], c);
        if (!seen) cols[nc++] = c;
    }
    for (size_t r = 0; rc == MR_OK && r < pl->n_rows; r++) st.posmap[r] = NONE;
    if (rc == MR_OK) rc = mr_dataset_open(dir, &ds, &j->err);
    if (rc == MR_OK) rc = mr_dataset_scan_open(ds, NULL, cols, nc, &scan, &j->err);
    side cs = {.keys = st.pkeys ? st.pkeys + nk : NULL, .n_keys = nk};
    st.ps = (side){.keys = st.pkeys, .n_keys = nk};
    size_t q = 0, n_groups = 0;
    while (rc == MR_OK) {
        rc = mr_dataset_scan_next(scan, &chunk, &j->err);
        if (rc != MR_OK || !chunk) break;
        n_groups++;
        j->view_rows += chunk->n_rows;
        if (chunk->n_rows >= NONE || j->view_rows >= NONE) {
            rc = MR_ERR(&j->err, MR_E_LIMIT, "feature view '%s' has more than %u rows", v->name ? v->name : "", NONE - 1);
            break;
        }
        uint64_t cb = 0;
        for (size_t c = 0; c < chunk->n_cols; c++) cb += col_bytes(chunk->cols[c]);
        if (cb > st.chunk_max) st.chunk_max = cb;
        rc = bind_view(v, chunk, pl->e->keys, pl->ekey_names, nk, &cs, &j->err);
        if (rc != MR_OK) break;
        if (st.acc[0] == NULL)
            for (size_t f = 0; rc == MR_OK && f < nf; f++)
                rc = mr_column_new_like(mr_table_column(chunk, v->features[f]), j->onames[f], 0, &st.acc[f], &j->err);
        if (rc != MR_OK) break;
        /* in order: each joinable row at or after the one before it, prev included */
        long lastj = -1;
        for (size_t r = 0; r < chunk->n_rows && !*unsorted; r++) {
            int null = mr_column_is_null(cs.ts, r);
            for (size_t k = 0; !null && k < nk; k++) null = mr_column_is_null(cs.keys[k], r);
            if (null) continue;
            if (lastj >= 0 ? cmp_order(&cs, (size_t)lastj, &cs, r) > 0 : st.prev && cmp_order(&st.ps, 0, &cs, r) > 0)
                *unsorted = 1;
            lastj = (long)r;
        }
        if (*unsorted) break;
        /* the merge: entity rows in order against this row group's rows */
        size_t p = 0, n = chunk->n_rows;
        long last = -1; /* the last joinable row passed in this row group; -1: prev */
        while (q < pl->n_e) {
            uint32_t er = pl->e_idx[q];
            int64_t ets = ts_at(pl->e->ts, er);
            while (p < n) {
                int null = mr_column_is_null(cs.ts, p);
                for (size_t k = 0; !null && k < nk; k++) null = mr_column_is_null(cs.keys[k], p);
                if (!null) {
                    int c = cmp_keys(&cs, p, pl->e, er);
                    if (c > 0 || (c == 0 && ts_at(cs.ts, p) > ets)) break;
                    last = (long)p;
                }
                p++;
            }
            if (p == n) break; /* the row group ended before the entity row was decided */
            const side *sd = last >= 0 ? &cs : st.prev ? &st.ps : NULL;
            size_t vr = last >= 0 ? (size_t)last : 0;
            q++;
            if (!sd || cmp_keys(sd, vr, pl->e, er) != 0) continue;
            if (v->ttl_us > 0 && (uint64_t)ets - (uint64_t)ts_at(sd->ts, vr) > (uint64_t)v->ttl_us) continue;
            st.posmap[er] = (uint32_t)st.matched++;
            if (last >= 0) st.lidx[st.n_lidx++] = (uint32_t)vr;
            else st.n_prev_picks++;
        }
        rc = flush_picks(&st, chunk, &j->err);
        if (rc == MR_OK && last >= 0) { /* the new prev: this row group's last joinable row */
            mr_table *np = NULL;
            rc = mr_table_slice(chunk, (size_t)last, (size_t)last + 1, &np, &j->err);
            if (rc == MR_OK) {
                mr_table_free(st.prev);
                st.prev = np;
                rc = bind_view(v, st.prev, pl->e->keys, pl->ekey_names, nk, &st.ps, &j->err);
            }
        }
        mr_table_free(chunk);
        chunk = NULL;
    }
    /* past the last row group: the entity rows left read the last row */
    while (rc == MR_OK && !*unsorted && st.prev && q < pl->n_e) {
        uint32_t er = pl->e_idx[q++];
        int64_t ets = ts_at(pl->e->ts, er);
        if (cmp_keys(&st.ps, 0, pl->e, er) != 0) continue;
        if (v->ttl_us > 0 && (uint64_t)ets - (uint64_t)ts_at(st.ps.ts, 0) > (uint64_t)v->ttl_us) continue;
        st.posmap[er] = (uint32_t)st.matched++;
        st.n_prev_picks++;
    }
    if (rc == MR_OK && !*unsorted) rc = flush_picks(&st, NULL, &j->err);
    if (rc == MR_OK && !*unsorted && n_groups == 0) *unsorted = 1; /* no row group to type the features by */
    for (size_t f = 0; rc == MR_OK && !*unsorted && f < nf; f++) {
        rc = take_or_null(st.acc[f], st.posmap, pl->n_rows, j->onames[f], &j->cols[f], &j->err);
        if (rc == MR_OK) j->footprint += col_bytes(j->cols[f]) + col_bytes(st.acc[f]);
        mr_column_free(st.acc[f]);
        st.acc[f] = NULL;
    }
    if (rc == MR_OK && !*unsorted) {
        j->missing = pl->n_rows - st.matched;
        j->footprint += st.chunk_max + 4 * (uint64_t)pl->n_rows + 4 * (uint64_t)pl->n_e;
        j->streamed = 1;
    }
    if (rc != MR_OK || *unsorted) {
        for (size_t f = 0; f < nf; f++) {
            mr_column_free(j->cols[f]);
            j->cols[f] = NULL;
        }
        j->view_rows = 0;
    }
    for (size_t f = 0; st.acc && f < nf; f++) mr_column_free(st.acc[f]);
    mr_table_free(chunk);
    mr_table_free(st.prev);
    mr_dataset_scan_close(scan);
    mr_dataset_close(ds);
    mr_free(cols);
    mr_free(st.pkeys);
    mr_free(st.acc);
    mr_free(st.posmap);
    mr_free(st.lidx);
    return rc;
}

/* One view: loaded (with a loader) and bound, sorted, merged with the
 * entity rows, its features gathered in the entity table's row order,
 * and, with a memory limit, spilled. */
static void join_view(view_job *j)
{
    const join_plan *pl = j->plan;
    mr_table *owned = NULL;
    const mr_table *t = j->v->table;
    uint32_t *v_idx = NULL, *pick = NULL;
    const char *dir = pl->o && pl->o->mem_bytes && pl->o->streams ? pl->o->streams[j->index] : NULL;
    if (dir) {
        int unsorted = 0;
        j->rc = stream_view(j, dir, &unsorted);
        if (j->rc != MR_OK) goto done;
        if (!unsorted) goto gathered;
        j->unsorted = 1;
    }
    if (pl->o && pl->o->load) {
        j->rc = pl->o->load(pl->o->load_arg, j->index, &owned, &j->err);
        if (j->rc == MR_OK)
            j->rc = bind_view(j->v, owned, pl->e->keys, pl->ekey_names, pl->e->n_keys, &j->s, &j->err);
        if (j->rc != MR_OK) goto done;
        t = owned;
    }
    j->view_rows = t->n_rows;
    for (size_t c = 0; c < t->n_cols; c++) j->footprint += col_bytes(t->cols[c]);
    j->footprint += 8 * (uint64_t)t->n_rows + 4 * (uint64_t)pl->n_rows; /* the sort, the picks */
    size_t n_v = 0;
    v_idx = sorted_rows(&j->s, t->n_rows, &n_v);
    pick = mr_malloc((pl->n_rows ? pl->n_rows : 1) * sizeof(*pick));
    if (!v_idx || !pick) {
        j->rc = MR_ERR(&j->err, MR_E_NOMEM, "out of memory sorting feature view '%s'", j->v->name ? j->v->name : "");
        goto done;
    }
    for (size_t r = 0; r < pl->n_rows; r++) pick[r] = NONE;
    size_t p = 0;
    for (size_t q = 0; q < pl->n_e; q++) {
        uint32_t er = pl->e_idx[q];
        int64_t ets = ts_at(pl->e->ts, er);
        /* advance past every view row that sorts at or before (keys, ets) */
        while (p < n_v) {
            int c = cmp_keys(&j->s, v_idx[p], pl->e, er);
            if (c > 0 || (c == 0 && ts_at(j->s.ts, v_idx[p]) > ets)) break;
            p++;
        }
        if (p == 0) continue;
        uint32_t vr = v_idx[p - 1];
        if (cmp_keys(&j->s, vr, pl->e, er) != 0) continue; /* the last row before is another key's */
        /* vts <= ets: the difference is exact as unsigned, whatever the two are */
        if (j->v->ttl_us > 0 && (uint64_t)ets - (uint64_t)ts_at(j->s.ts, vr) > (uint64_t)j->v->ttl_us) continue;
        pick[er] = vr;
    }
    mr_free(v_idx);
    v_idx = NULL;
    for (size_t r = 0; r < pl->n_rows; r++) j->missing += pick[r] == NONE;
    for (size_t f = 0; j->rc == MR_OK && f < j->v->n_features; f++) {
        j->rc = take_or_null(mr_table_column(t, j->v->features[f]), pick, pl->n_rows, j->onames[f], &j->cols[f],
                             &j->err);
        if (j->rc == MR_OK) j->footprint += col_bytes(j->cols[f]);
    }
    mr_free(pick);
    pick = NULL;
    mr_table_free(owned); /* the view is done with before its spill is written */
    owned = NULL;
gathered:
    if (j->rc == MR_OK && pl->o && pl->o->mem_bytes && j->v->n_features && pl->n_rows) j->rc = spill_view(j);
done:
    mr_free(v_idx);
    mr_free(pick);
    mr_table_free(owned);
}

static void join_views_task(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    view_job *jobs = ctx;
    for (size_t v = begin; v < end; v++) join_view(&jobs[v]);
}

/* ---- the join's frame: bound entity side, output names, the jobs ----------------- */

typedef struct join_frame {
    const mr_column **kcols;      /* (n_views + 1) * n_keys: the entity's, then each view's */
    side e;
    uint32_t *e_idx;
    char **onames;                /* the output's names: the entity table's, then each view's */
    size_t n_onames;
    view_job *jobs;
    join_plan plan;
} join_frame;

static void frame_free(join_frame *fr, size_t n_views)
{
    for (size_t v = 0; fr->jobs && v < n_views; v++) {
        view_job *j = &fr->jobs[v];
        for (size_t f = 0; j->cols && f < j->v->n_features; f++) mr_column_free(j->cols[f]);
        mr_free(j->cols);
        if (j->spill) (void)unlink(j->spill);
        mr_free(j->spill);
    }
    mr_free(fr->jobs);
    mr_free(fr->kcols);
    mr_free(fr->e_idx);
    for (size_t i = 0; fr->onames && i < fr->n_onames; i++) mr_free(fr->onames[i]);
    mr_free(fr->onames);
    memset(fr, 0, sizeof(*fr));
}

/* Checks the arguments, binds the entity side (and, without a loader, every
 * view), names the output's columns, sorts the entity rows, and sets up a
 * job per view. */
static mr_status frame_open(join_frame *fr, const mr_table *entities, const char *const *keys, size_t n_keys,
                            const char *ts, const mr_pit_view *views, size_t n_views, const mr_pit_write_opts *o,
                            mr_error *err)
{
    memset(fr, 0, sizeof(*fr));
    if (!entities || !keys || n_keys == 0 || !ts || (n_views && !views))
        return MR_ERR(err, MR_E_INVALID_ARG, "a point-in-time join needs an entity table, its keys and its timestamp");
    if (entities->n_rows >= NONE)
        return MR_ERR(err, MR_E_LIMIT, "the entity table has %zu rows (at most %u)", entities->n_rows, NONE - 1);
    if (o && o->mem_bytes && (!o->tmp_dir || !*o->tmp_dir))
        return MR_ERR(err, MR_E_INVALID_ARG, "a point-in-time join with a memory limit needs a scratch directory");
    fr->jobs = mr_calloc(n_views ? n_views : 1, sizeof(*fr->jobs));
    fr->kcols = mr_calloc((n_views + 1) * n_keys, sizeof(*fr->kcols));
    if (!fr->jobs || !fr->kcols) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    fr->e = (side){fr->kcols, n_keys, NULL, NULL};
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        rc = find_col(entities, "the entity table", keys[k], "key", &fr->kcols[k], err);
        if (rc == MR_OK && !key_type_ok(fr->kcols[k]->type))
            rc = MR_ERR(err, MR_E_SCHEMA, "the entity table's key column '%s' is %s; int64, string, date, timestamp or "
                        "bool is expected", keys[k], mr_dtype_name(fr->kcols[k]->type));
    }
    if (rc == MR_OK) rc = time_col(entities, "the entity table", ts, "timestamp", &fr->e.ts, err);
    for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
        view_job *j = &fr->jobs[v];
        j->plan = &fr->plan;
        j->v = &views[v];
        j->index = v;
        mr_error_init(&j->err);
        j->s = (side){fr->kcols + (v + 1) * n_keys, n_keys, NULL, NULL};
        j->cols = mr_calloc(views[v].n_features ? views[v].n_features : 1, sizeof(*j->cols));
        if (!j->cols) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else if (!(o && o->load)) rc = bind_view(&views[v], views[v].table, fr->kcols, keys, n_keys, &j->s, err);
        else if (!views[v].keys) rc = MR_ERR(err, MR_E_INVALID_ARG, "feature view '%s' has no keys", views[v].name ? views[v].name : "");
    }
    if (rc != MR_OK) return rc;
    /* the output's names: the entity table's, then prefix + feature per view, each once */
    size_t n_out = entities->n_cols;
    for (size_t v = 0; v < n_views; v++) n_out += views[v].n_features;
    fr->onames = mr_calloc(n_out ? n_out : 1, sizeof(*fr->onames));
    if (!fr->onames) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    fr->n_onames = n_out;
    size_t at = 0;
    for (size_t c = 0; c < entities->n_cols; c++) fr->onames[at++] = mr_strdup(entities->cols[c]->name);
    for (size_t v = 0; v < n_views; v++) {
        fr->jobs[v].onames = (const char *const *)fr->onames + at;
        for (size_t f = 0; f < views[v].n_features; f++) {
            size_t l = (views[v].prefix ? strlen(views[v].prefix) : 0) + strlen(views[v].features[f]) + 1;
            fr->onames[at] = mr_malloc(l);
            if (fr->onames[at])
                snprintf(fr->onames[at], l, "%s%s", views[v].prefix ? views[v].prefix : "", views[v].features[f]);
            at++;
        }
    }
    for (size_t i = 0; i < n_out; i++)
        if (!fr->onames[i]) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = entities->n_cols, v = 0, f = 0; i < n_out; i++, f++) {
        while (f >= views[v].n_features) v++, f = 0;
        for (size_t q = 0; q < i; q++)
            if (!strcmp(fr->onames[q], fr->onames[i])) {
                rc = MR_ERR(err, MR_E_SCHEMA, "feature view '%s': output column '%s' already exists", views[v].name,
                            fr->onames[i]);
                mr_error_hint(err, "give the view a prefix (prefix: \"%s__\"), or join fewer columns", views[v].name);
                return rc;
            }
    }
    size_t n_e = 0;
    fr->e_idx = sorted_rows(&fr->e, entities->n_rows, &n_e);
    if (!fr->e_idx) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    fr->plan = (join_plan){.e = &fr->e, .ekey_names = keys, .e_idx = fr->e_idx, .n_e = n_e,
                           .n_rows = entities->n_rows, .o = o, .batch_rows = entities->n_rows ? entities->n_rows : 1};
    return MR_OK;
}

/* Runs the jobs on up to threads threads; the first failed view's error.
 * With a memory limit, the first view is joined alone, and the others on
 * as many threads as views of its footprint fit in half the limit (at
 * least one): views of one pipeline tend to be alike. */
static mr_status frame_run(join_frame *fr, size_t n_views, int threads, uint64_t mem_bytes, mr_error *err)
{
    size_t first = 0;
    if (mem_bytes && n_views > 1 && mr_pool_threads_capped(threads) > 1) {
        join_views_task(fr->jobs, 0, 1, 0);
        uint64_t fp = fr->jobs[0].footprint ? fr->jobs[0].footprint : 1, fit = mem_bytes / 2 / fp;
        threads = fit < 1 ? 1 : fit < (uint64_t)mr_pool_threads_capped(threads) ? (int)fit : threads;
        first = 1;
    }
    fr->plan.lanes = mr_pool_threads_capped(threads);
    mr_parallel_for_capped(n_views - first, 1, threads, join_views_task, fr->jobs + first);
    for (size_t v = 0; v < n_views; v++)
        if (fr->jobs[v].rc != MR_OK) {
            if (err) *err = fr->jobs[v].err;
            return fr->jobs[v].rc;
        }
    return MR_OK;
}

mr_status mr_pit_join(const mr_table *entities, const char *const *keys, size_t n_keys, const char *ts,
                      const mr_pit_view *views, size_t n_views, int threads, mr_table **out, uint64_t *missing,
                      mr_error *err)
{
    *out = NULL;
    join_frame fr;
    mr_table *t = NULL;
    mr_status rc = frame_open(&fr, entities, keys, n_keys, ts, views, n_views, NULL, err);
    if (rc == MR_OK) rc = frame_run(&fr, n_views, threads, 0, err);
    if (rc == MR_OK) rc = mr_table_new(&t, err);
    for (size_t c = 0; rc == MR_OK && c < entities->n_cols; c++) {
        mr_column *col = NULL;
        rc = mr_column_slice(entities->cols[c], 0, entities->n_rows, &col, err);
        if (rc == MR_OK) rc = mr_table_add_column(t, col, err);
    }
    for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
        for (size_t f = 0; rc == MR_OK && f < views[v].n_features; f++) {
            rc = mr_table_add_column(t, fr.jobs[v].cols[f], err); /* t's now, or freed */
            fr.jobs[v].cols[f] = NULL;
        }
        if (missing) missing[v] = fr.jobs[v].missing;
    }
    if (rc == MR_OK) t->n_rows = entities->n_rows; /* also when there are no columns to set it */
    frame_free(&fr, n_views);
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

/* ---- the join written to a dataset, in batches ------------------------------------ */

/* The rows of a batch [b, e): the entity table's columns sliced, then each
 * view's gathered columns (sliced, or moved when the batch is everything)
 * or the next row group of its spill. */
static mr_status write_batches(join_frame *fr, const mr_table *entities, size_t n_views, mr_parquet_file **spills,
                               mr_dataset_writer *w, mr_error *err)
{
    size_t n = entities->n_rows, step = fr->plan.batch_rows;
    mr_status rc = MR_OK;
    for (size_t b = 0; rc == MR_OK && (b < n || (n == 0 && b == 0)); b += step) {
        size_t e = n - b < step ? n : b + step;
        int whole = b == 0 && e == n;
        mr_table *t = NULL;
        rc = mr_table_new(&t, err);
        for (size_t c = 0; rc == MR_OK && c < entities->n_cols; c++) {
            mr_column *col = NULL;
            rc = mr_column_slice(entities->cols[c], b, e, &col, err);
            if (rc == MR_OK) rc = mr_table_add_column(t, col, err);
        }
        for (size_t v = 0; rc == MR_OK && v < n_views; v++) {
            view_job *j = &fr->jobs[v];
            size_t nf = j->v->n_features;
            if (spills[v]) {
                mr_table *g = NULL;
                size_t rg = b / step;
                if (rg < mr_parquet_num_row_groups(spills[v])) rc = mr_parquet_read_row_group(spills[v], rg, NULL, 0, &g, err);
                if (rc == MR_OK && (!g || g->n_rows != e - b || g->n_cols != nf))
                    rc = MR_ERR(err, MR_E_CORRUPT, "feature view '%s': its spill holds %zu rows where %zu were written",
                                j->v->name ? j->v->name : "", g ? g->n_rows : 0, e - b);
                for (size_t f = 0; rc == MR_OK && f < nf; f++) {
                    rc = mr_table_add_column(t, g->cols[f], err); /* t's now, or freed */
                    g->cols[f] = NULL;
                }
                mr_table_free(g); /* the columns moved to t are NULL in it */
                continue;
            }
            for (size_t f = 0; rc == MR_OK && f < nf; f++) {
                mr_column *col = NULL;
                if (whole) {
                    col = j->cols[f];
                    j->cols[f] = NULL;
                } else {
                    rc = mr_column_slice(j->cols[f], b, e, &col, err);
                }
                if (rc == MR_OK) rc = mr_table_add_column(t, col, err);
            }
        }
        if (rc == MR_OK) {
            t->n_rows = e - b;
            rc = mr_dataset_writer_write(w, t, err);
        }
        mr_table_free(t);
        if (n == 0) break;
    }
    return rc;
}

mr_status mr_pit_join_write(const mr_table *entities, const char *const *keys, size_t n_keys, const char *ts,
                            const mr_pit_view *views, size_t n_views, const mr_pit_write_opts *o, const char *out_dir,
                            mr_pit_write_stats *stats, mr_error *err)
{
    mr_pit_write_opts defaults = {0};
    if (!o) o = &defaults;
    if (!out_dir) return MR_ERR(err, MR_E_INVALID_ARG, "a point-in-time join needs an output directory");
    join_frame fr;
    mr_status rc = frame_open(&fr, entities, keys, n_keys, ts, views, n_views, o, err);
    mr_parquet_file **spills = NULL;
    mr_dataset_writer *w = NULL;
    if (rc == MR_OK && o->mem_bytes) {
        /* batches of rows that fit an eighth of the limit each (a batch, the
         * spills' row groups it is read from and the writer's row group
         * are alive together), sized before any view is read: features
         * counted at 8 bytes, the entity table's columns at their mean */
        uint64_t row = 0, n = entities->n_rows ? entities->n_rows : 1;
        for (size_t c = 0; c < entities->n_cols; c++) row += col_bytes(entities->cols[c]);
        row = (row + n - 1) / n;
        for (size_t v = 0; v < n_views; v++) row += 8 * (uint64_t)views[v].n_features;
        uint64_t rows = o->mem_bytes / 8 / (row ? row : 1);
        fr.plan.batch_rows = rows < 1024 ? 1024 : rows > 131072 ? 131072 : (size_t)rows;
    }
    if (rc == MR_OK) rc = frame_run(&fr, n_views, o->threads, o->mem_bytes, err);
    if (rc == MR_OK) {
        spills = mr_calloc(n_views ? n_views : 1, sizeof(*spills));
        if (!spills) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    /* read with pread, not mapped: a batch's pages are not kept after it */
    for (size_t v = 0; rc == MR_OK && v < n_views; v++)
        if (fr.jobs[v].spill) rc = mr_parquet_open(fr.jobs[v].spill, &spills[v], err);
    if (rc == MR_OK) rc = mr_dataset_writer_open(out_dir, o->write, &w, err);
    if (rc == MR_OK) rc = write_batches(&fr, entities, n_views, spills, w, err);
    if (rc == MR_OK) {
        rc = mr_dataset_writer_close(w, NULL, err);
        w = NULL;
    }
    if (rc == MR_OK && stats) {
        stats->rows = entities->n_rows;
        stats->cols = fr.n_onames;
        stats->batch_rows = fr.plan.batch_rows;
        stats->lanes = fr.plan.lanes;
        stats->spilled = stats->streamed = stats->unsorted = 0;
        for (size_t v = 0; v < n_views; v++) {
            if (stats->missing) stats->missing[v] = fr.jobs[v].missing;
            if (stats->view_rows) stats->view_rows[v] = fr.jobs[v].view_rows;
            stats->spilled += fr.jobs[v].spill != NULL;
            stats->streamed += fr.jobs[v].streamed;
            stats->unsorted += fr.jobs[v].unsorted;
        }
    }
    mr_dataset_writer_free(w);
    for (size_t v = 0; spills && v < n_views; v++) mr_parquet_close(spills[v]);
    mr_free(spills);
    frame_free(&fr, n_views);
    return rc;
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

