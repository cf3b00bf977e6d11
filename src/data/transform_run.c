/* Running a bound transform: the driver pulls batches from the source and
 * pushes each through the steps. filter, select, rename, derive, limit and
 * the join probe transform a batch and pass it on; aggregate and sort
 * swallow batches and emit their result, in batches, once the source is
 * exhausted (steps are finished in order, so a blocking step's output flows
 * through any later blocking step before that one is finished). A satisfied
 * limit stops the reading of the source. The sort here is a parallel stable
 * merge sort: fixed blocks sorted independently, then merged pairwise, level
 * by level, so the order is the same for any thread count. */
#include "transform_int.h"

#include <math.h>

typedef struct xrun {
    mr_transform *x;
    mr_transform_opts o;
    mr_transform_stats *st;
    mr_transform_sink_fn sink;
    void *sink_ctx;
    xf_join **joins;     /* (n_steps) */
    xf_aggstate **aggs;  /* (n_steps) */
    mr_table **acc;      /* (n_steps) sort input */
    uint64_t *seen;      /* (n_steps) limit: rows passed */
    int stop;            /* a limit is satisfied: read no more input */
    mr_error *err;
} xrun;

static void note_bytes(xrun *r, uint64_t b)
{
    if (r->st && b > r->st->peak_bytes) r->st->peak_bytes = b;
}

/* ---- streaming steps ------------------------------------------------------- */

static mr_status do_filter(const xf_step *s, mr_table **bp, mr_error *err)
{
    mr_table *b = *bp, *t = NULL;
    size_t n = b->n_rows, kept = 0;
    uint8_t *mask = mr_malloc(n);
    uint32_t *idx = NULL;
    mr_status rc = MR_OK;
    if (!mask) goto nomem;
    rc = mr_expr_eval_filter(s->expr, b, mask, err);
    if (rc != MR_OK) goto done;
    for (size_t i = 0; i < n; i++) kept += mask[i];
    if (kept == n) goto done;
    idx = mr_malloc(kept ? kept * sizeof(uint32_t) : 1);
    if (!idx) goto nomem;
    for (size_t i = 0, j = 0; i < n; i++)
        if (mask[i]) idx[j++] = (uint32_t)i;
    rc = mr_table_take(b, idx, kept, &t, err);
    if (rc != MR_OK) goto done;
    t->n_rows = kept;
    mr_table_free(b);
    *bp = t;
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory filtering %zu rows", s->label, n);
done:
    mr_free(mask);
    mr_free(idx);
    return rc;
}

static mr_status do_derive(const xf_step *s, mr_table *b, mr_error *err)
{
    for (size_t i = 0; i < s->n_names; i++) {
        mr_column *c = NULL;
        mr_status rc = mr_expr_eval(s->exprs[i], b, &c, err);
        if (rc != MR_OK) return rc;
        char *nm = mr_strdup(s->names[i]);
        if (!nm) {
            mr_column_free(c);
            return MR_ERR(err, MR_E_NOMEM, "%s: out of memory", s->label);
        }
        mr_free(c->name);
        c->name = nm;
        ssize_t k = mr_table_column_index(b, nm);
        rc = k >= 0 ? mr_table_set_column(b, (size_t)k, c, err) : mr_table_add_column(b, c, err);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

/* All renames of the step at once (the plan checked the result, and a
 * step may swap two names). */
static mr_status do_rename(const xf_step *s, mr_table *b, mr_error *err)
{
    size_t *idx = mr_calloc(s->n_names ? s->n_names : 1, sizeof(size_t));
    if (!idx) return MR_ERR(err, MR_E_NOMEM, "%s: out of memory", s->label);
    for (size_t i = 0; i < s->n_names; i++) {
        ssize_t k = mr_table_column_index(b, s->names[i]);
        MR_ASSERT(k >= 0);
        idx[i] = (size_t)k;
    }
    mr_status rc = mr_table_rename_columns(b, idx, (const char *const *)s->names2, s->n_names, err);
    mr_free(idx);
    return rc;
}

/* ---- sort ------------------------------------------------------------------ */

typedef struct sctx {
    const mr_table *t;
    const xf_step *s;
    uint32_t *src, *dst; /* (n) */
    size_t n, width;     /* merge level: runs of width rows */
} sctx;

static inline int cmp_f(double x, double y)
{
    if (isnan(x)) return isnan(y) ? 0 : 1;
    if (isnan(y)) return -1;
    return (x > y) - (x < y);
}

/* Rows a and b on the sort keys: NULLs last in either direction, NaN above
 * every number, strings bytewise. */
static int cmp_row(const sctx *c, uint32_t a, uint32_t b)
{
    for (size_t k = 0; k < c->s->n_names; k++) {
        const mr_column *col = c->t->cols[c->s->key_idx[k]];
        int na = mr_column_is_null(col, a), nb = mr_column_is_null(col, b), r;
        if (na || nb) {
            if (na && nb) continue;
            return na ? 1 : -1;
        }
        switch (col->type) {
        case MR_T_FLOAT64: r = cmp_f(((const double *)col->data)[a], ((const double *)col->data)[b]); break;
        case MR_T_FLOAT32: r = cmp_f(((const float *)col->data)[a], ((const float *)col->data)[b]); break;
        case MR_T_STRING: {
            size_t la, lb;
            const char *sa = mr_column_str(col, a, &la), *sb = mr_column_str(col, b, &lb);
            r = memcmp(sa, sb, la < lb ? la : lb);
            if (!r) r = (la > lb) - (la < lb);
            break;
        }
        case MR_T_BOOL: r = ((const uint8_t *)col->data)[a] - ((const uint8_t *)col->data)[b]; break;
        case MR_T_DATE: {
            int32_t x = ((const int32_t *)col->data)[a], y = ((const int32_t *)col->data)[b];
            r = (x > y) - (x < y);
            break;
        }
        default: {
            int64_t x = ((const int64_t *)col->data)[a], y = ((const int64_t *)col->data)[b];
            r = (x > y) - (x < y);
            break;
        }
        }
        if (r) return c->s->desc[k] ? -r : r;
    }
    return 0;
}

/* Stable merge of src[lo, mid) and src[mid, hi) into dst[lo, hi). */
static void merge(const sctx *c, const uint32_t *src, uint32_t *dst, size_t lo, size_t mid, size_t hi)
{
    size_t i = lo, j = mid, o = lo;
    while (i < mid && j < hi) dst[o++] = cmp_row(c, src[j], src[i]) < 0 ? src[j++] : src[i++];
    while (i < mid) dst[o++] = src[i++];
    while (j < hi) dst[o++] = src[j++];
}

/* Sorts src[begin, end) in place (bottom-up, ping-ponging through dst). */
static void sort_block(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    sctx *c = vctx;
    uint32_t *a = c->src, *b = c->dst;
    for (size_t i = begin; i < end; i++) a[i] = (uint32_t)i;
    for (size_t w = 1; w < end - begin; w *= 2) {
        for (size_t lo = begin; lo < end; lo += 2 * w) {
            size_t mid = lo + w < end ? lo + w : end, hi = lo + 2 * w < end ? lo + 2 * w : end;
            merge(c, a, b, lo, mid, hi);
        }
        uint32_t *t = a;
        a = b;
        b = t;
    }
    if (a != c->src) memcpy(c->src + begin, a + begin, (end - begin) * sizeof(uint32_t));
}

static void merge_pair(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    sctx *c = vctx;
    for (size_t p = begin; p < end; p++) {
        size_t lo = p * 2 * c->width;
        size_t mid = lo + c->width < c->n ? lo + c->width : c->n;
        size_t hi = lo + 2 * c->width < c->n ? lo + 2 * c->width : c->n;
        merge(c, c->src, c->dst, lo, mid, hi);
    }
}

/* perm_out: (t->n_rows) row order; caller frees. */
static mr_status sort_perm(const xf_step *s, const mr_table *t, int threads, uint32_t **perm_out, mr_error *err)
{
    size_t n = t->n_rows;
    sctx c = {.t = t, .s = s, .n = n};
    c.src = mr_malloc(n ? n * sizeof(uint32_t) : 1);
    c.dst = mr_malloc(n ? n * sizeof(uint32_t) : 1);
    if (!c.src || !c.dst) {
        mr_free(c.src);
        mr_free(c.dst);
        return MR_ERR(err, MR_E_NOMEM, "%s: out of memory sorting %zu rows", s->label, n);
    }
    mr__xf_parallel(threads, n, XF_BLOCK, sort_block, &c);
    for (c.width = XF_BLOCK; c.width < n; c.width *= 2) {
        size_t pairs = (n + 2 * c.width - 1) / (2 * c.width);
        mr__xf_parallel(threads, pairs, 1, merge_pair, &c);
        uint32_t *tmp = c.src;
        c.src = c.dst;
        c.dst = tmp;
    }
    mr_free(c.dst);
    *perm_out = c.src;
    return MR_OK;
}

/* ---- driver ------------------------------------------------------------------ */

static mr_status push(xrun *r, size_t k, mr_table *b);

/* Emits t (owned) downstream of step k in batches of o.batch_rows rows, in
 * the row order perm (NULL: as is). */
static mr_status emit(xrun *r, size_t k, mr_table *t, const uint32_t *perm)
{
    mr_status rc = MR_OK;
    size_t n = t->n_rows, step = r->o.batch_rows;
    if (!perm && n <= step) return push(r, k + 1, t);
    for (size_t b = 0; b < n && rc == MR_OK; b += step) {
        size_t e = b + step < n ? b + step : n;
        mr_table *part = NULL;
        rc = perm ? mr_table_take(t, perm + b, e - b, &part, r->err) : mr_table_slice(t, b, e, &part, r->err);
        if (rc != MR_OK) break;
        part->n_rows = e - b;
        rc = push(r, k + 1, part);
    }
    mr_table_free(t);
    return rc;
}

/* Takes ownership of b; runs it through steps k.. and into the sink. */
static mr_status push(xrun *r, size_t k, mr_table *b)
{
    mr_status rc = MR_OK;
    mr_transform *x = r->x;
    for (; k < x->n_steps; k++) {
        const xf_step *s = &x->steps[k];
        if (b->n_rows == 0) break;
        switch (s->kind) {
        case XS_FILTER: rc = do_filter(s, &b, r->err); break;
        case XS_SELECT: rc = mr_table_project(b, (const char *const *)s->names, s->n_names, r->err); break;
        case XS_RENAME: rc = do_rename(s, b, r->err); break;
        case XS_DERIVE: rc = do_derive(s, b, r->err); break;
        case XS_JOIN: {
            mr_table *t = NULL;
            rc = mr__xf_join_probe(s, r->joins[k], b, &r->o, &t, r->err);
            if (rc == MR_OK) {
                mr_table_free(b);
                b = t;
            }
            break;
        }
        case XS_AGGREGATE:
            rc = mr__xf_agg_add(s, r->aggs[k], b, &r->o, r->err);
            if (rc == MR_OK) note_bytes(r, mr__xf_agg_bytes(r->aggs[k]));
            mr_table_free(b);
            return rc;
        case XS_SORT:
            if (!r->acc[k]) {
                r->acc[k] = b;
                b = NULL;
            } else {
                rc = mr_table_append(r->acc[k], b, r->err);
            }
            if (rc == MR_OK) {
                uint64_t need = mr__xf_table_bytes(r->acc[k]) + (uint64_t)r->acc[k]->n_rows * 8;
                note_bytes(r, need);
                if (r->o.memory_limit_bytes && need > r->o.memory_limit_bytes) {
                    char a[32], l[32];
                    mr__xf_format_bytes(need, a, sizeof(a));
                    mr__xf_format_bytes(r->o.memory_limit_bytes, l, sizeof(l));
                    rc = MR_ERR(r->err, MR_E_LIMIT, "%s: sorting needs more than %s (%zu rows so far), the limit is %s",
                                s->label, a, r->acc[k]->n_rows, l);
                }
            }
            mr_table_free(b);
            return rc;
        case XS_LIMIT: {
            uint64_t left = s->limit - r->seen[k];
            if (left == 0) {
                r->stop = 1;
                mr_table_free(b);
                return MR_OK;
            }
            if (b->n_rows > left) {
                mr_table *t = NULL;
                rc = mr_table_slice(b, 0, (size_t)left, &t, r->err);
                if (rc == MR_OK) {
                    t->n_rows = (size_t)left;
                    mr_table_free(b);
                    b = t;
                }
            }
            if (rc == MR_OK) {
                r->seen[k] += b->n_rows;
                if (r->seen[k] >= s->limit) r->stop = 1;
            }
            break;
        }
        }
        if (rc != MR_OK) {
            mr_table_free(b);
            return rc;
        }
    }
    if (b->n_rows == 0) {
        mr_table_free(b);
        return MR_OK;
    }
    if (r->st) {
        r->st->rows_out += b->n_rows;
        r->st->batches_out++;
    }
    return r->sink(r->sink_ctx, b, r->err);
}

/* Puts a source batch in input-schema order and checks the types. */
static mr_status conform(const mr_transform *x, mr_table *b, mr_error *err)
{
    for (size_t i = 0; i < x->input.n; i++) {
        const mr_column *c = mr_table_column(b, x->input.names[i]);
        if (!c) return MR_ERR(err, MR_E_SCHEMA, "transform input: a batch lacks column '%s'", x->input.names[i]);
        if (c->type != x->input.types[i])
            return MR_ERR(err, MR_E_SCHEMA, "transform input: column '%s' is %s in a batch but was bound as %s",
                          x->input.names[i], mr_dtype_name(c->type), mr_dtype_name(x->input.types[i]));
    }
    if (b->n_cols == x->input.n) {
        size_t i = 0;
        while (i < b->n_cols && !strcmp(b->cols[i]->name, x->input.names[i])) i++;
        if (i == b->n_cols) return MR_OK;
    }
    return mr_table_project(b, (const char *const *)x->input.names, x->input.n, err);
}

mr_status mr_transform_run(mr_transform *x, mr_transform_source_fn source, void *source_ctx,
                           const mr_transform_table *joins, size_t n_joins, mr_transform_sink_fn sink, void *sink_ctx,
                           const mr_transform_opts *opts, mr_transform_stats *stats, mr_error *err)
{
    mr_status rc = MR_OK;
    if (!x || !source || !sink) return MR_ERR(err, MR_E_INVALID_ARG, "transform: NULL plan, source or sink");
    if (!x->bound) return MR_ERR(err, MR_E_STATE, "transform: run before the plan was bound");
    xrun r;
    memset(&r, 0, sizeof(r));
    r.x = x;
    if (opts) r.o = *opts;
    if (!r.o.batch_rows) r.o.batch_rows = 65536;
    if (stats) memset(stats, 0, sizeof(*stats));
    r.st = stats;
    r.sink = sink;
    r.sink_ctx = sink_ctx;
    r.err = err;
    size_t ns = x->n_steps ? x->n_steps : 1;
    r.joins = mr_calloc(ns, sizeof(*r.joins));
    r.aggs = mr_calloc(ns, sizeof(*r.aggs));
    r.acc = mr_calloc(ns, sizeof(*r.acc));
    r.seen = mr_calloc(ns, sizeof(*r.seen));
    if (!r.joins || !r.aggs || !r.acc || !r.seen) {
        rc = MR_ERR(err, MR_E_NOMEM, "transform: out of memory");
        goto done;
    }
    /* join build sides and aggregation states first: limits fail before any row is read */
    for (size_t k = 0; k < x->n_steps; k++) {
        const xf_step *s = &x->steps[k];
        if (s->kind == XS_AGGREGATE) {
            rc = mr__xf_agg_new(s, &r.aggs[k], err);
            if (rc != MR_OK) goto done;
        }
        if (s->kind != XS_JOIN) continue;
        const mr_table *t = NULL;
        for (size_t i = 0; i < n_joins && !t; i++)
            if (joins[i].name && !strcmp(joins[i].name, s->with)) t = joins[i].table;
        if (!t) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "%s: no table was given for input '%s'", s->label, s->with);
            goto done;
        }
        uint64_t need = 0;
        rc = mr__xf_join_build(s, t, &r.o, &need, &r.joins[k], err);
        note_bytes(&r, need);
        if (rc != MR_OK) goto done;
    }
    while (!r.stop) {
        mr_table *b = NULL;
        rc = source(source_ctx, &b, err);
        if (rc != MR_OK) {
            mr_table_free(b);
            if (!mr_error_is_set(err)) MR_ERR(err, rc, "transform: the input source failed");
            goto done;
        }
        if (!b) break;
        if (stats) {
            stats->batches_in++;
            stats->rows_in += b->n_rows;
        }
        rc = conform(x, b, err);
        if (rc != MR_OK) {
            mr_table_free(b);
            goto done;
        }
        rc = push(&r, 0, b);
        if (rc != MR_OK) goto done;
    }
    if (stats) stats->stopped_early = r.stop;
    for (size_t k = 0; k < x->n_steps; k++) {
        const xf_step *s = &x->steps[k];
        mr_table *t = NULL;
        if (s->kind == XS_AGGREGATE) {
            rc = mr__xf_agg_finish(s, r.aggs[k], &t, err);
            mr__xf_agg_free(r.aggs[k]);
            r.aggs[k] = NULL;
            if (rc == MR_OK) rc = emit(&r, k, t, NULL);
        } else if (s->kind == XS_SORT && r.acc[k]) {
            uint32_t *perm = NULL;
            t = r.acc[k];
            r.acc[k] = NULL;
            rc = sort_perm(s, t, r.o.threads, &perm, err);
            if (rc == MR_OK) rc = emit(&r, k, t, perm);
            else mr_table_free(t);
            mr_free(perm);
        }
        if (rc != MR_OK) goto done;
    }
done:
    for (size_t k = 0; k < x->n_steps; k++) {
        if (r.joins) mr__xf_join_free(r.joins[k]);
        if (r.aggs) mr__xf_agg_free(r.aggs[k]);
        if (r.acc) mr_table_free(r.acc[k]);
    }
    mr_free(r.joins);
    mr_free(r.aggs);
    mr_free(r.acc);
    mr_free(r.seen);
    return rc;
}

/* ---- in-memory convenience ----------------------------------------------------- */

typedef struct tsrc {
    const mr_table *t;
    size_t pos, step;
} tsrc;

static mr_status table_source(void *ctx, mr_table **out, mr_error *err)
{
    tsrc *s = ctx;
    *out = NULL;
    if (s->pos >= s->t->n_rows) return MR_OK;
    size_t e = s->pos + s->step < s->t->n_rows ? s->pos + s->step : s->t->n_rows;
    mr_status rc = mr_table_slice(s->t, s->pos, e, out, err);
    if (rc == MR_OK) (*out)->n_rows = e - s->pos;
    s->pos = e;
    return rc;
}

static mr_status table_sink(void *ctx, mr_table *b, mr_error *err)
{
    mr_table **acc = ctx;
    if (!*acc) {
        *acc = b;
        return MR_OK;
    }
    mr_status rc = mr_table_append(*acc, b, err);
    mr_table_free(b);
    return rc;
}

mr_status mr_transform_run_table(mr_transform *x, const mr_table *input, const mr_transform_table *joins,
                                 size_t n_joins, const mr_transform_opts *opts, mr_table **out,
                                 mr_transform_stats *stats, mr_error *err)
{
    *out = NULL;
    if (!x || !input) return MR_ERR(err, MR_E_INVALID_ARG, "transform: NULL plan or input");
    tsrc src = {input, 0, opts && opts->batch_rows ? opts->batch_rows : 65536};
    mr_table *acc = NULL;
    mr_status rc = mr_transform_run(x, table_source, &src, joins, n_joins, table_sink, &acc, opts, stats, err);
    if (rc == MR_OK && !acc) {
        rc = mr_table_new(&acc, err);
        for (size_t i = 0; rc == MR_OK && i < x->out_pub.n_cols; i++) {
            mr_column *c = NULL;
            rc = mr_column_new(x->out_pub.col_names[i], x->out_pub.col_types[i], 0, &c, err);
            if (rc == MR_OK) rc = mr_table_add_column(acc, c, err);
        }
    }
    if (rc != MR_OK) {
        mr_table_free(acc);
        return rc;
    }
    *out = acc;
    return MR_OK;
}
