/* Hash join for the transform `join` step. The `with:` input is the build
 * side: its keys are encoded (transform_keys.c) and indexed in an
 * open-addressing table whose entries chain the build rows of one key in
 * build order. Each probe batch is matched in parallel over fixed blocks in
 * two passes (count matches per row, then write them at prefix-sum offsets),
 * so the output is in probe order, and for one probe row in build order,
 * whatever the thread count. A key with any NULL never matches (SQL). */
#include "transform_int.h"

struct xf_join {
    const mr_table *right;
    xf_keys keys;       /* build rows' keys */
    size_t cap;         /* slots, power of two */
    uint32_t *slots;    /* (cap) first build row of a key + 1; 0 = empty */
    uint32_t *next;     /* (n) next build row with the same key, XF_NONE at the end */
    uint32_t *tail;     /* (n) for a first row: the last row of its chain */
    const mr_column **rcols; /* right columns in the bound right-schema order */
};

void mr__xf_join_free(xf_join *j)
{
    if (!j) return;
    mr__xf_keys_free(&j->keys);
    mr_free(j->slots);
    mr_free(j->next);
    mr_free(j->tail);
    mr_free(j->rcols);
    mr_free(j);
}

static uint64_t key_bytes_estimate(const mr_column *const *cols, size_t n_cols, size_t n)
{
    uint64_t b = 0;
    for (size_t j = 0; j < n_cols; j++) {
        const mr_column *c = cols[j];
        b += (uint64_t)n * (1 + (c->type == MR_T_BOOL ? 1 : c->type == MR_T_DATE || c->type == MR_T_STRING ? 4 : 8));
        if (c->type == MR_T_STRING && c->codes) {
            for (size_t i = 0; i < n; i++) {
                size_t len;
                mr_column_str(c, i, &len);
                b += len;
            }
        } else if (c->type == MR_T_STRING) {
            b += c->bytes_len;
        }
    }
    return b;
}

static inline uint32_t lookup(const xf_join *j, const xf_keys *pk, size_t i)
{
    uint64_t h = pk->hash[i];
    size_t pos = (size_t)h & (j->cap - 1);
    for (;;) {
        uint32_t s = j->slots[pos];
        if (!s) return XF_NONE;
        if (mr__xf_keys_eq(&j->keys, s - 1, pk, i)) return s - 1;
        pos = (pos + 1) & (j->cap - 1);
    }
}

mr_status mr__xf_join_build(const xf_step *s, const mr_table *right, const mr_transform_opts *o, uint64_t *bytes_out,
                            xf_join **out, mr_error *err)
{
    mr_status rc = MR_OK;
    const mr_column **kcols = NULL;
    xf_join *j = mr_calloc(1, sizeof(*j));
    size_t n = right->n_rows;
    if (!j) return MR_ERR(err, MR_E_NOMEM, "%s: out of memory", s->label);
    j->right = right;
    j->rcols = mr_calloc(s->right.n ? s->right.n : 1, sizeof(*j->rcols));
    kcols = mr_calloc(s->n_names, sizeof(*kcols));
    if (!j->rcols || !kcols) goto nomem;
    for (size_t i = 0; i < s->right.n; i++) {
        const mr_column *c = mr_table_column(right, s->right.names[i]);
        if (!c || c->type != s->right.types[i]) {
            rc = MR_ERR(err, MR_E_SCHEMA, "%s: input '%s' %s column '%s' (%s) it was bound with", s->label, s->with,
                        c ? "changed the type of" : "lacks the", s->right.names[i], mr_dtype_name(s->right.types[i]));
            goto fail;
        }
        j->rcols[i] = c;
    }
    for (size_t k = 0; k < s->n_names; k++) kcols[k] = j->rcols[s->rkey_idx[k]];
    if (n >= XF_NONE) {
        rc = MR_ERR(err, MR_E_LIMIT, "%s: the join build side '%s' has %zu rows, at most %u are supported", s->label,
                    s->with, n, (unsigned)XF_NONE - 1);
        goto fail;
    }
    j->cap = 16;
    while (j->cap < 2 * n) j->cap *= 2;
    uint64_t need = mr__xf_table_bytes(right) + key_bytes_estimate(kcols, s->n_names, n) +
                    (uint64_t)n * (8 + 8 + 1 + 4 + 4) + (uint64_t)j->cap * 4;
    if (bytes_out) *bytes_out = need;
    if (o->memory_limit_bytes && need > o->memory_limit_bytes) {
        char a[32], b[32];
        mr__xf_format_bytes(need, a, sizeof(a));
        mr__xf_format_bytes(o->memory_limit_bytes, b, sizeof(b));
        rc = MR_ERR(err, MR_E_LIMIT, "%s: the join build side needs about %s, the limit is %s", s->label, a, b);
        mr_error_hint(err, "filter or select the '%s' input down before the join, or raise the memory limit",
                      s->with);
        goto fail;
    }
    rc = mr__xf_keys_build(&j->keys, kcols, s->n_names, n, o->threads, err);
    if (rc != MR_OK) goto fail;
    j->slots = mr_calloc(j->cap, sizeof(uint32_t));
    j->next = mr_malloc(n ? n * sizeof(uint32_t) : 1);
    j->tail = mr_malloc(n ? n * sizeof(uint32_t) : 1);
    if (!j->slots || !j->next || !j->tail) goto nomem;
    for (size_t r = 0; r < n; r++) {
        j->next[r] = XF_NONE;
        if (j->keys.has_null[r]) continue;
        size_t pos = (size_t)j->keys.hash[r] & (j->cap - 1);
        for (;;) {
            uint32_t sl = j->slots[pos];
            if (!sl) {
                j->slots[pos] = (uint32_t)r + 1;
                j->tail[r] = (uint32_t)r;
                break;
            }
            if (mr__xf_keys_eq(&j->keys, sl - 1, &j->keys, r)) {
                j->next[j->tail[sl - 1]] = (uint32_t)r;
                j->tail[sl - 1] = (uint32_t)r;
                break;
            }
            pos = (pos + 1) & (j->cap - 1);
        }
    }
    mr_free(kcols);
    *out = j;
    return MR_OK;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory building the join table", s->label);
fail:
    mr_free(kcols);
    mr__xf_join_free(j);
    return rc;
}

typedef struct probe_ctx {
    const xf_join *j;
    const xf_keys *pk;
    xf_how how;
    uint32_t *head; /* (n) first matching build row or XF_NONE */
    uint64_t *pos;  /* (n + 1) output offsets (counts before the prefix sum) */
    uint32_t *pi;   /* (total) probe rows */
    uint32_t *bi;   /* (total) build rows, XF_NONE for unmatched left rows */
} probe_ctx;

static void probe_count(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    probe_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) {
        uint32_t h = c->pk->has_null[i] ? XF_NONE : lookup(c->j, c->pk, i);
        uint64_t m = 0;
        c->head[i] = h;
        switch (c->how) {
        case XJ_INNER:
        case XJ_LEFT:
            for (uint32_t r = h; r != XF_NONE; r = c->j->next[r]) m++;
            if (c->how == XJ_LEFT && m == 0) m = 1;
            break;
        case XJ_SEMI: m = h != XF_NONE; break;
        case XJ_ANTI: m = h == XF_NONE; break;
        }
        c->pos[i + 1] = m;
    }
}

static void probe_fill(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    probe_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) {
        uint64_t p = c->pos[i];
        if (c->pos[i + 1] == p) continue;
        uint32_t h = c->head[i];
        if (c->how == XJ_SEMI || c->how == XJ_ANTI || h == XF_NONE) {
            c->pi[p] = (uint32_t)i;
            c->bi[p] = XF_NONE;
            continue;
        }
        for (uint32_t r = h; r != XF_NONE; r = c->j->next[r]) {
            c->pi[p] = (uint32_t)i;
            c->bi[p++] = r;
        }
    }
}

mr_status mr__xf_join_probe(const xf_step *s, xf_join *j, const mr_table *batch, const mr_transform_opts *o,
                            mr_table **out, mr_error *err)
{
    mr_status rc = MR_OK;
    size_t n = batch->n_rows;
    xf_keys pk;
    memset(&pk, 0, sizeof(pk));
    probe_ctx c = {.j = j, .pk = &pk, .how = s->how};
    const mr_column **kcols = mr_calloc(s->n_names, sizeof(*kcols));
    mr_table *t = NULL;
    *out = NULL;
    if (!kcols) goto nomem;
    if (n >= XF_NONE) {
        rc = MR_ERR(err, MR_E_LIMIT, "%s: a batch of %zu rows is too large to probe", s->label, n);
        goto done;
    }
    for (size_t k = 0; k < s->n_names; k++) kcols[k] = batch->cols[s->key_idx[k]];
    rc = mr__xf_keys_build(&pk, kcols, s->n_names, n, o->threads, err);
    if (rc != MR_OK) goto done;
    c.head = mr_malloc(n ? n * sizeof(uint32_t) : 1);
    c.pos = mr_calloc(n + 1, sizeof(uint64_t));
    if (!c.head || !c.pos) goto nomem;
    mr__xf_parallel(o->threads, n, XF_BLOCK, probe_count, &c);
    for (size_t i = 0; i < n; i++) c.pos[i + 1] += c.pos[i];
    uint64_t total = c.pos[n];
    if (total > SIZE_MAX / sizeof(uint32_t) || total >= XF_NONE) {
        rc = MR_ERR(err, MR_E_LIMIT, "%s: one batch would produce %llu rows; use smaller batches", s->label,
                    (unsigned long long)total);
        goto done;
    }
    c.pi = mr_malloc(total ? (size_t)total * sizeof(uint32_t) : 1);
    c.bi = mr_malloc(total ? (size_t)total * sizeof(uint32_t) : 1);
    if (!c.pi || !c.bi) goto nomem;
    mr__xf_parallel(o->threads, n, XF_BLOCK, probe_fill, &c);
    rc = mr_table_take(batch, c.pi, (size_t)total, &t, err);
    if (rc != MR_OK) goto done;
    t->n_rows = (size_t)total;
    for (size_t k = 0; k < s->n_rkeep; k++) {
        mr_column *col = NULL;
        rc = mr__xf_take_nullable(j->rcols[s->rkeep[k]], c.bi, (size_t)total, &col, err);
        if (rc == MR_OK) rc = mr_table_add_column(t, col, err);
        if (rc != MR_OK) goto done;
    }
    *out = t;
    t = NULL;
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory probing %zu rows", s->label, n);
done:
    mr_table_free(t);
    mr__xf_keys_free(&pk);
    mr_free(c.head);
    mr_free(c.pos);
    mr_free(c.pi);
    mr_free(c.bi);
    mr_free(kcols);
    return rc;
}
