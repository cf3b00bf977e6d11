/* Hash aggregation for the transform `aggregate` step.
 *
 * Per batch: the key columns are encoded into comparable bytes with hashes
 * (transform_keys.c) and the argument expressions evaluated. Then, in
 * parallel over fixed blocks of XF_BLOCK rows, each block groups its rows in
 * a private open-addressing table (local group ids in first-appearance
 * order) and accumulates partial states per local group: counts, integer
 * sums with an overflow flag, float sums, Welford mean/M2 for std, and for
 * min/max/first/last the row holding the value. Then, on one thread and in
 * block order, every local group is looked up in (or added to) the global
 * table and its partial state merged in (Chan's formula for std). Because
 * blocks never depend on the thread count and merges run in block order,
 * the result is byte-identical for any -j, and groups come out in order of
 * first appearance in the input. count_distinct inserts (group, value) pairs
 * into a global set on the merging thread.
 *
 * NULLs as in SQL: count() counts rows, count(x) and every other function
 * skip NULL values; sum/mean/min/max/std of no values is NULL, std of one
 * value is NULL (sample std, n - 1); first/last take the first/last row's
 * value, NULL included. An int64 sum that overflows is NULL. */
#include "transform_int.h"

#include <math.h>
#include <xxhash.h>

typedef struct gstate {
    int need_isum, need_fsum, need_m2, need_val; /* which arrays this function keeps */
    mr_dtype vt;       /* value type for min/max/first/last */
    int64_t *cnt;      /* values seen (rows for count()) */
    int64_t *isum;
    uint8_t *ovf;
    double *fsum;      /* sum, or the running mean for std */
    double *m2;
    int64_t *iv;       /* BOOL, INT64, DATE, TIMESTAMP values */
    double *fv;        /* FLOAT64 values */
    char **sv;         /* STRING values (owned) */
    size_t *sl;
    uint8_t *has;      /* min/max: a value is stored; first/last: the value is not NULL */
    /* count_distinct: set of (group, value bytes) */
    size_t cd_n, cd_cap, cd_ecap, cd_len, cd_acap;
    uint32_t *cd_slots;
    uint64_t *cd_hash, *cd_off;
    uint32_t *cd_gid;
    uint8_t *cd_arena;
} gstate;

struct xf_aggstate {
    size_t n_keys, n_aggs;
    size_t n_groups, cap;  /* groups, and rows allocated in the per-group arrays */
    size_t scap;           /* global slots, power of two */
    uint32_t *slots;       /* group id + 1 */
    uint64_t *ghash;       /* (cap) */
    uint64_t *goff;        /* (cap + 1) key bytes of group g: arena[goff[g] .. goff[g + 1]) */
    uint8_t *arena;
    size_t arena_cap;
    mr_column **keycols;   /* output key columns, one row per group */
    gstate *st;            /* (n_aggs) */
};

static int grow(void *pp, size_t elem, size_t old_n, size_t new_n)
{
    void **p = pp;
    if (new_n > SIZE_MAX / elem) return 0;
    void *q = mr_realloc(*p, new_n * elem);
    if (!q) return 0;
    memset((char *)q + old_n * elem, 0, (new_n - old_n) * elem);
    *p = q;
    return 1;
}

void mr__xf_agg_free(xf_aggstate *a)
{
    if (!a) return;
    for (size_t k = 0; a->st && k < a->n_aggs; k++) { /* st is NULL when its allocation failed */
        gstate *g = &a->st[k];
        mr_free(g->cnt);
        mr_free(g->isum);
        mr_free(g->ovf);
        mr_free(g->fsum);
        mr_free(g->m2);
        mr_free(g->iv);
        mr_free(g->fv);
        if (g->sv)
            for (size_t i = 0; i < a->cap; i++) mr_free(g->sv[i]);
        mr_free(g->sv);
        mr_free(g->sl);
        mr_free(g->has);
        mr_free(g->cd_slots);
        mr_free(g->cd_hash);
        mr_free(g->cd_off);
        mr_free(g->cd_gid);
        mr_free(g->cd_arena);
    }
    mr_free(a->st);
    for (size_t k = 0; a->keycols && k < a->n_keys; k++) mr_column_free(a->keycols[k]);
    mr_free(a->keycols);
    mr_free(a->slots);
    mr_free(a->ghash);
    mr_free(a->goff);
    mr_free(a->arena);
    mr_free(a);
}

mr_status mr__xf_agg_new(const xf_step *s, xf_aggstate **out, mr_error *err)
{
    xf_aggstate *a = mr_calloc(1, sizeof(*a));
    if (!a) return MR_ERR(err, MR_E_NOMEM, "%s: out of memory", s->label);
    a->n_keys = s->n_names;
    a->n_aggs = s->n_aggs;
    a->st = mr_calloc(s->n_aggs ? s->n_aggs : 1, sizeof(gstate));
    a->keycols = mr_calloc(s->n_names ? s->n_names : 1, sizeof(mr_column *));
    a->goff = mr_calloc(1, sizeof(uint64_t));
    a->scap = 64;
    a->slots = mr_calloc(a->scap, sizeof(uint32_t));
    if (!a->st || !a->keycols || !a->goff || !a->slots) goto nomem;
    for (size_t k = 0; k < s->n_names; k++)
        if (mr_column_new(s->in.names[s->key_idx[k]], s->in.types[s->key_idx[k]], 0, &a->keycols[k], err) != MR_OK)
            goto nomem;
    for (size_t k = 0; k < s->n_aggs; k++) {
        const xf_agg *ag = &s->aggs[k];
        gstate *g = &a->st[k];
        g->vt = ag->arg_type;
        g->need_isum = ag->fn == AG_SUM && ag->arg_type == MR_T_INT64;
        g->need_fsum = (ag->fn == AG_SUM && ag->arg_type == MR_T_FLOAT64) || ag->fn == AG_MEAN || ag->fn == AG_STD;
        g->need_m2 = ag->fn == AG_STD;
        g->need_val = ag->fn == AG_MIN || ag->fn == AG_MAX || ag->fn == AG_FIRST || ag->fn == AG_LAST;
    }
    *out = a;
    return MR_OK;
nomem:
    mr__xf_agg_free(a);
    return MR_ERR(err, MR_E_NOMEM, "%s: out of memory", s->label);
}

/* Estimated bytes held by the groups (tables, states, keys, distinct sets). */
uint64_t mr__xf_agg_bytes(const xf_aggstate *a)
{
    if (!a) return 0;
    uint64_t b = (uint64_t)a->scap * 4 + (uint64_t)a->cap * 16 + a->arena_cap;
    for (size_t k = 0; k < a->n_keys; k++) {
        const mr_column *c = a->keycols[k];
        b += (uint64_t)c->cap * (c->type == MR_T_STRING ? 8 : mr_dtype_width(c->type)) + c->bytes_cap + c->cap / 8;
    }
    for (size_t k = 0; k < a->n_aggs; k++) {
        const gstate *g = &a->st[k];
        uint64_t per = 8 + (g->need_isum ? 9 : 0) + (g->need_fsum ? 8 : 0) + (g->need_m2 ? 8 : 0) +
                       (g->need_val ? 17 : 0);
        b += per * a->cap;
        if (g->sl)
            for (size_t i = 0; i < a->n_groups; i++) b += g->sl[i];
        b += (uint64_t)g->cd_cap * 4 + (uint64_t)g->cd_ecap * 20 + g->cd_acap;
    }
    return b;
}

static int grow_groups(xf_aggstate *a)
{
    size_t nc = a->cap ? a->cap * 2 : 64;
    if (!grow(&a->ghash, sizeof(uint64_t), a->cap, nc) || !grow(&a->goff, sizeof(uint64_t), a->cap + 1, nc + 1))
        return 0;
    for (size_t k = 0; k < a->n_aggs; k++) {
        gstate *g = &a->st[k];
        if (!grow(&g->cnt, sizeof(int64_t), a->cap, nc)) return 0;
        if (g->need_isum && (!grow(&g->isum, sizeof(int64_t), a->cap, nc) || !grow(&g->ovf, 1, a->cap, nc))) return 0;
        if (g->need_fsum && !grow(&g->fsum, sizeof(double), a->cap, nc)) return 0;
        if (g->need_m2 && !grow(&g->m2, sizeof(double), a->cap, nc)) return 0;
        if (g->need_val) {
            if (!grow(&g->has, 1, a->cap, nc)) return 0;
            if (g->vt == MR_T_FLOAT64 && !grow(&g->fv, sizeof(double), a->cap, nc)) return 0;
            if (g->vt == MR_T_STRING &&
                (!grow(&g->sv, sizeof(char *), a->cap, nc) || !grow(&g->sl, sizeof(size_t), a->cap, nc)))
                return 0;
            if (g->vt != MR_T_FLOAT64 && g->vt != MR_T_STRING && !grow(&g->iv, sizeof(int64_t), a->cap, nc)) return 0;
        }
    }
    a->cap = nc;
    return 1;
}

static int rehash(xf_aggstate *a)
{
    size_t nc = a->scap * 2;
    uint32_t *ns = mr_calloc(nc, sizeof(uint32_t));
    if (!ns) return 0;
    for (size_t g = 0; g < a->n_groups; g++) {
        size_t pos = (size_t)a->ghash[g] & (nc - 1);
        while (ns[pos]) pos = (pos + 1) & (nc - 1);
        ns[pos] = (uint32_t)g + 1;
    }
    mr_free(a->slots);
    a->slots = ns;
    a->scap = nc;
    return 1;
}

/* Global group of key bytes (p, len) with hash h; *is_new set when added.
 * Returns XF_NONE on OOM or too many groups. */
static uint32_t find_or_add(xf_aggstate *a, const uint8_t *p, size_t len, uint64_t h, int *is_new)
{
    size_t pos = (size_t)h & (a->scap - 1);
    *is_new = 0;
    for (;;) {
        uint32_t s = a->slots[pos];
        if (!s) break;
        uint32_t g = s - 1;
        if (a->ghash[g] == h && a->goff[g + 1] - a->goff[g] == len && (len == 0 || !memcmp(a->arena + a->goff[g], p, len)))
            return g;
        pos = (pos + 1) & (a->scap - 1);
    }
    if (a->n_groups >= XF_NONE - 1) return XF_NONE;
    if (a->n_groups == a->cap && !grow_groups(a)) return XF_NONE;
    uint64_t end = a->goff[a->n_groups];
    if (end + len > a->arena_cap) {
        size_t nc = a->arena_cap ? a->arena_cap : 256;
        while (nc < end + len) nc *= 2;
        uint8_t *na = mr_realloc(a->arena, nc);
        if (!na) return XF_NONE;
        a->arena = na;
        a->arena_cap = nc;
    }
    if (len) memcpy(a->arena + end, p, len);
    uint32_t g = (uint32_t)a->n_groups++;
    a->goff[g + 1] = end + len;
    a->ghash[g] = h;
    a->slots[pos] = g + 1;
    *is_new = 1;
    if (2 * a->n_groups > a->scap && !rehash(a)) return XF_NONE;
    return g;
}

/* ---- values ----------------------------------------------------------------- */

static inline int64_t ival(const mr_column *c, size_t i)
{
    switch (c->type) {
    case MR_T_BOOL: return ((const uint8_t *)c->data)[i];
    case MR_T_DATE: return ((const int32_t *)c->data)[i];
    default: return ((const int64_t *)c->data)[i];
    }
}

static inline double fval(const mr_column *c, size_t i)
{
    return c->type == MR_T_FLOAT64 ? ((const double *)c->data)[i] : (double)((const int64_t *)c->data)[i];
}

/* Total order for min/max: NaN above every number. */
static inline int cmp_f(double x, double y)
{
    if (isnan(x)) return isnan(y) ? 0 : 1;
    if (isnan(y)) return -1;
    return (x > y) - (x < y);
}

static inline int cmp_s(const char *x, size_t xl, const char *y, size_t yl)
{
    int r = memcmp(x, y, xl < yl ? xl : yl);
    if (r) return r;
    return (xl > yl) - (xl < yl);
}

/* Rows i and j of c (both non-null). */
static int cmp_rows(const mr_column *c, size_t i, size_t j)
{
    if (c->type == MR_T_FLOAT64) return cmp_f(fval(c, i), fval(c, j));
    if (c->type == MR_T_STRING) {
        size_t li, lj;
        const char *si = mr_column_str(c, i, &li), *sj = mr_column_str(c, j, &lj);
        return cmp_s(si, li, sj, lj);
    }
    int64_t x = ival(c, i), y = ival(c, j);
    return (x > y) - (x < y);
}

/* Row i of c (non-null) against the value stored for group g. */
static int cmp_stored(const gstate *st, size_t g, const mr_column *c, size_t i)
{
    if (c->type == MR_T_FLOAT64) return cmp_f(fval(c, i), st->fv[g]);
    if (c->type == MR_T_STRING) {
        size_t l;
        const char *s = mr_column_str(c, i, &l);
        return cmp_s(s, l, st->sv[g] ? st->sv[g] : "", st->sl[g]);
    }
    int64_t x = ival(c, i), y = st->iv[g];
    return (x > y) - (x < y);
}

/* Stores row i of c (NULL allowed) as group g's value. 0 on OOM. */
static int store(gstate *st, size_t g, const mr_column *c, size_t i)
{
    if (mr_column_is_null(c, i)) {
        st->has[g] = 0;
        return 1;
    }
    st->has[g] = 1;
    if (c->type == MR_T_FLOAT64) {
        st->fv[g] = fval(c, i);
    } else if (c->type == MR_T_STRING) {
        size_t l;
        const char *s = mr_column_str(c, i, &l);
        char *d = mr_realloc(st->sv[g], l ? l : 1);
        if (!d) return 0;
        memcpy(d, s, l);
        st->sv[g] = d;
        st->sl[g] = l;
    } else {
        st->iv[g] = ival(c, i);
    }
    return 1;
}

/* ---- per-batch partials ------------------------------------------------------- */

typedef struct part {   /* per aggregate, indexed by block start + local group */
    int64_t *cnt;
    int64_t *isum;
    uint8_t *ovf;
    double *fsum, *m2;
    uint32_t *row;
} part;

typedef struct bctx {
    const xf_step *s;
    const xf_keys *k;
    mr_column **args;  /* (n_aggs) evaluated arguments, NULL for count() */
    part *p;           /* (n_aggs) */
    uint32_t *lslots;  /* (n_blocks * 2 * XF_BLOCK) */
    uint32_t *lfirst;  /* (n) first row of local group, by block start + local id */
    uint32_t *lgid;    /* (n) local group of each row */
    uint32_t *nloc;    /* (n_blocks) local groups per block */
} bctx;

static void agg_block(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    bctx *c = vctx;
    const xf_step *s = c->s;
    const xf_keys *k = c->k;
    size_t blk = begin / XF_BLOCK, lc = 2;
    while (lc < 2 * (end - begin)) lc *= 2;
    uint32_t *slots = c->lslots + blk * 2 * XF_BLOCK;
    memset(slots, 0, lc * sizeof(uint32_t));
    uint32_t nl = 0;
    for (size_t i = begin; i < end; i++) {
        size_t pos = (size_t)k->hash[i] & (lc - 1);
        uint32_t g;
        for (;;) {
            uint32_t sl = slots[pos];
            if (!sl) {
                g = nl++;
                slots[pos] = g + 1;
                c->lfirst[begin + g] = (uint32_t)i;
                for (size_t a = 0; a < s->n_aggs; a++) {
                    part *p = &c->p[a];
                    size_t q = begin + g;
                    p->cnt[q] = 0;
                    p->row[q] = XF_NONE;
                    if (p->isum) {
                        p->isum[q] = 0;
                        p->ovf[q] = 0;
                    }
                    if (p->fsum) p->fsum[q] = 0;
                    if (p->m2) p->m2[q] = 0;
                }
                break;
            }
            g = sl - 1;
            if (mr__xf_keys_eq(k, c->lfirst[begin + g], k, i)) break;
            pos = (pos + 1) & (lc - 1);
        }
        c->lgid[i] = g;
        size_t q = begin + g;
        for (size_t a = 0; a < s->n_aggs; a++) {
            part *p = &c->p[a];
            const mr_column *v = c->args[a];
            xf_aggfn fn = s->aggs[a].fn;
            if (fn == AG_COUNT_ROWS) {
                p->cnt[q]++;
                continue;
            }
            if (fn == AG_FIRST) {
                if (p->row[q] == XF_NONE) p->row[q] = (uint32_t)i;
                continue;
            }
            if (fn == AG_LAST) {
                p->row[q] = (uint32_t)i;
                continue;
            }
            if (mr_column_is_null(v, i)) continue;
            p->cnt[q]++;
            switch (fn) {
            case AG_SUM:
                if (p->isum) {
                    int64_t r;
                    if (__builtin_add_overflow(p->isum[q], ival(v, i), &r)) p->ovf[q] = 1;
                    else p->isum[q] = r;
                } else {
                    p->fsum[q] += fval(v, i);
                }
                break;
            case AG_MEAN: p->fsum[q] += fval(v, i); break;
            case AG_STD: {
                double x = fval(v, i), d = x - p->fsum[q];
                p->fsum[q] += d / (double)p->cnt[q];
                p->m2[q] += d * (x - p->fsum[q]);
                break;
            }
            case AG_MIN:
            case AG_MAX:
                if (p->row[q] == XF_NONE) p->row[q] = (uint32_t)i;
                else {
                    int r = cmp_rows(v, i, p->row[q]);
                    if (fn == AG_MIN ? r < 0 : r > 0) p->row[q] = (uint32_t)i;
                }
                break;
            default: break;
            }
        }
    }
    c->nloc[blk] = nl;
}

/* Merges partial q of aggregate a into group g. 0 on OOM. */
static int merge_part(const xf_agg *ag, gstate *st, const part *p, size_t q, size_t g, int is_new, const mr_column *v)
{
    int64_t pc = p->cnt[q];
    switch (ag->fn) {
    case AG_COUNT_ROWS:
    case AG_COUNT: st->cnt[g] += pc; return 1;
    case AG_COUNT_DISTINCT: return 1;
    case AG_SUM:
        st->cnt[g] += pc;
        if (st->isum) {
            int64_t r;
            if (p->ovf[q] || __builtin_add_overflow(st->isum[g], p->isum[q], &r)) st->ovf[g] = 1;
            else st->isum[g] = r;
        } else {
            st->fsum[g] += p->fsum[q];
        }
        return 1;
    case AG_MEAN:
        st->cnt[g] += pc;
        st->fsum[g] += p->fsum[q];
        return 1;
    case AG_STD: {
        int64_t na = st->cnt[g];
        if (pc == 0) return 1;
        if (na == 0) {
            st->cnt[g] = pc;
            st->fsum[g] = p->fsum[q];
            st->m2[g] = p->m2[q];
            return 1;
        }
        double n = (double)(na + pc), d = p->fsum[q] - st->fsum[g];
        st->fsum[g] += d * (double)pc / n;
        st->m2[g] += p->m2[q] + d * d * (double)na * (double)pc / n;
        st->cnt[g] = na + pc;
        return 1;
    }
    case AG_MIN:
    case AG_MAX:
        if (p->row[q] == XF_NONE) return 1;
        st->cnt[g] += pc;
        if (st->has[g]) {
            int r = cmp_stored(st, g, v, p->row[q]);
            if (ag->fn == AG_MIN ? r >= 0 : r <= 0) return 1;
        }
        return store(st, g, v, p->row[q]);
    case AG_FIRST: return is_new ? store(st, g, v, p->row[q]) : 1;
    case AG_LAST: return store(st, g, v, p->row[q]);
    }
    return 1;
}

/* count_distinct: adds (g, value bytes of row i) to the set. 0 on OOM. */
static int cd_add(gstate *st, uint32_t g, const xf_keys *vk, size_t i)
{
    uint64_t h = vk->hash[i] ^ ((uint64_t)(g + 1) * UINT64_C(0x9E3779B97F4A7C15));
    const uint8_t *p = vk->buf + vk->off[i];
    size_t len = (size_t)(vk->off[i + 1] - vk->off[i]);
    if (2 * (st->cd_n + 1) > st->cd_cap) {
        size_t nc = st->cd_cap ? st->cd_cap * 2 : 64;
        uint32_t *ns = mr_calloc(nc, sizeof(uint32_t));
        if (!ns) return 0;
        for (size_t e = 0; e < st->cd_n; e++) {
            size_t pos = (size_t)st->cd_hash[e] & (nc - 1);
            while (ns[pos]) pos = (pos + 1) & (nc - 1);
            ns[pos] = (uint32_t)e + 1;
        }
        mr_free(st->cd_slots);
        st->cd_slots = ns;
        st->cd_cap = nc;
    }
    size_t pos = (size_t)h & (st->cd_cap - 1);
    for (;;) {
        uint32_t s = st->cd_slots[pos];
        if (!s) break;
        size_t e = s - 1;
        if (st->cd_hash[e] == h && st->cd_gid[e] == g && st->cd_off[e + 1] - st->cd_off[e] == len &&
            !memcmp(st->cd_arena + st->cd_off[e], p, len))
            return 1;
        pos = (pos + 1) & (st->cd_cap - 1);
    }
    if (st->cd_n >= XF_NONE - 1) return 0;
    if (st->cd_n + 1 >= st->cd_ecap) {
        size_t nc = st->cd_ecap ? st->cd_ecap * 2 : 64;
        if (!grow(&st->cd_hash, 8, st->cd_ecap, nc) || !grow(&st->cd_gid, 4, st->cd_ecap, nc) ||
            !grow(&st->cd_off, 8, st->cd_ecap, nc + 1))
            return 0;
        st->cd_ecap = nc;
    }
    size_t end = (size_t)st->cd_off[st->cd_n];
    if (end + len > st->cd_acap) {
        size_t nc = st->cd_acap ? st->cd_acap : 256;
        while (nc < end + len) nc *= 2;
        uint8_t *na = mr_realloc(st->cd_arena, nc);
        if (!na) return 0;
        st->cd_arena = na;
        st->cd_acap = nc;
    }
    if (len) memcpy(st->cd_arena + end, p, len);
    size_t e = st->cd_n++;
    st->cd_hash[e] = h;
    st->cd_gid[e] = g;
    st->cd_off[e + 1] = end + len;
    st->cd_slots[pos] = (uint32_t)e + 1;
    st->cnt[g]++;
    return 1;
}

static mr_status limit_err(const xf_step *s, const xf_aggstate *a, const mr_transform_opts *o, mr_error *err)
{
    char x[32], y[32];
    mr__xf_format_bytes(mr__xf_agg_bytes(a), x, sizeof(x));
    mr__xf_format_bytes(o->memory_limit_bytes, y, sizeof(y));
    mr_status rc = MR_ERR(err, MR_E_LIMIT, "%s: the aggregation groups need more than %s (%zu groups so far), the limit is %s",
                          s->label, x, a->n_groups, y);
    mr_error_hint(err, "aggregate by fewer or coarser keys, filter first, or raise the memory limit");
    return rc;
}

mr_status mr__xf_agg_add(const xf_step *s, xf_aggstate *a, const mr_table *batch, const mr_transform_opts *o,
                         mr_error *err)
{
    mr_status rc = MR_OK;
    size_t n = batch->n_rows, n_blocks = (n + XF_BLOCK - 1) / XF_BLOCK;
    xf_keys k, vk;
    memset(&k, 0, sizeof(k));
    memset(&vk, 0, sizeof(vk));
    bctx c;
    memset(&c, 0, sizeof(c));
    uint32_t *map = NULL;
    const mr_column **kcols = mr_calloc(s->n_names ? s->n_names : 1, sizeof(*kcols));
    c.args = mr_calloc(s->n_aggs ? s->n_aggs : 1, sizeof(mr_column *));
    c.p = mr_calloc(s->n_aggs ? s->n_aggs : 1, sizeof(part));
    if (!kcols || !c.args || !c.p) goto nomem;
    if (n >= XF_NONE) {
        rc = MR_ERR(err, MR_E_LIMIT, "%s: a batch of %zu rows is too large", s->label, n);
        goto done;
    }
    for (size_t j = 0; j < s->n_names; j++) kcols[j] = batch->cols[s->key_idx[j]];
    rc = mr__xf_keys_build(&k, kcols, s->n_names, n, o->threads, err);
    if (rc != MR_OK) goto done;
    for (size_t j = 0; j < s->n_aggs; j++) {
        const xf_agg *ag = &s->aggs[j];
        if (ag->arg) {
            rc = mr_expr_eval(ag->arg, batch, &c.args[j], err);
            if (rc != MR_OK) goto done;
        }
        part *p = &c.p[j];
        p->cnt = mr_malloc(n * sizeof(int64_t));
        p->row = mr_malloc(n * sizeof(uint32_t));
        if (!p->cnt || !p->row) goto nomem;
        if (a->st[j].need_isum) {
            p->isum = mr_malloc(n * sizeof(int64_t));
            p->ovf = mr_malloc(n);
            if (!p->isum || !p->ovf) goto nomem;
        }
        if (a->st[j].need_fsum && !(p->fsum = mr_malloc(n * sizeof(double)))) goto nomem;
        if (a->st[j].need_m2 && !(p->m2 = mr_malloc(n * sizeof(double)))) goto nomem;
    }
    c.s = s;
    c.k = &k;
    if (n_blocks > SIZE_MAX / (2 * XF_BLOCK * sizeof(uint32_t))) goto nomem;
    c.lslots = mr_malloc(n_blocks * 2 * XF_BLOCK * sizeof(uint32_t));
    c.lfirst = mr_malloc(n * sizeof(uint32_t));
    c.lgid = mr_malloc(n * sizeof(uint32_t));
    c.nloc = mr_calloc(n_blocks, sizeof(uint32_t));
    map = mr_malloc(n * sizeof(uint32_t));
    if (!c.lslots || !c.lfirst || !c.lgid || !c.nloc || !map) goto nomem;
    mr__xf_parallel(o->threads, n, XF_BLOCK, agg_block, &c);

    /* merge, in block order */
    for (size_t b = 0; b < n_blocks; b++) {
        size_t b0 = b * XF_BLOCK;
        for (size_t g = 0; g < c.nloc[b]; g++) {
            size_t q = b0 + g, r0 = c.lfirst[q];
            int is_new;
            uint32_t gid = find_or_add(a, k.buf + k.off[r0], (size_t)(k.off[r0 + 1] - k.off[r0]), k.hash[r0], &is_new);
            if (gid == XF_NONE) goto nomem;
            if (is_new)
                for (size_t j = 0; j < s->n_names; j++) {
                    if (!a->keycols[j]->n) a->keycols[j]->kind = kcols[j]->kind; /* the key's kind, as it came */
                    if (mr__xf_append_row(a->keycols[j], kcols[j], r0) != MR_OK) goto nomem;
                }
            map[q] = gid;
            for (size_t j = 0; j < s->n_aggs; j++)
                if (!merge_part(&s->aggs[j], &a->st[j], &c.p[j], q, gid, is_new, c.args[j])) goto nomem;
        }
        if (o->memory_limit_bytes && mr__xf_agg_bytes(a) > o->memory_limit_bytes) {
            rc = limit_err(s, a, o, err);
            goto done;
        }
    }
    for (size_t j = 0; j < s->n_aggs; j++) {
        if (s->aggs[j].fn != AG_COUNT_DISTINCT) continue;
        const mr_column *vc = c.args[j];
        rc = mr__xf_keys_build(&vk, &vc, 1, n, o->threads, err);
        if (rc != MR_OK) goto done;
        for (size_t i = 0; i < n; i++) {
            if (vk.has_null[i]) continue;
            uint32_t gid = map[(i / XF_BLOCK) * XF_BLOCK + c.lgid[i]];
            if (!cd_add(&a->st[j], gid, &vk, i)) goto nomem;
        }
        mr__xf_keys_free(&vk);
        if (o->memory_limit_bytes && mr__xf_agg_bytes(a) > o->memory_limit_bytes) {
            rc = limit_err(s, a, o, err);
            goto done;
        }
    }
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory aggregating %zu rows", s->label, n);
done:
    mr__xf_keys_free(&k);
    mr__xf_keys_free(&vk);
    for (size_t j = 0; c.args && j < s->n_aggs; j++) mr_column_free(c.args[j]);
    for (size_t j = 0; c.p && j < s->n_aggs; j++) {
        mr_free(c.p[j].cnt);
        mr_free(c.p[j].isum);
        mr_free(c.p[j].ovf);
        mr_free(c.p[j].fsum);
        mr_free(c.p[j].m2);
        mr_free(c.p[j].row);
    }
    mr_free(c.args);
    mr_free(c.p);
    mr_free(c.lslots);
    mr_free(c.lfirst);
    mr_free(c.lgid);
    mr_free(c.nloc);
    mr_free(map);
    mr_free(kcols);
    return rc;
}

static mr_status append_result(const xf_agg *ag, const gstate *st, size_t g, mr_column *c)
{
    switch (ag->fn) {
    case AG_COUNT_ROWS:
    case AG_COUNT:
    case AG_COUNT_DISTINCT: return mr_column_append_int64(c, st->cnt[g]);
    case AG_SUM:
        if (st->cnt[g] == 0 || (st->ovf && st->ovf[g])) return mr_column_append_null(c);
        return st->isum ? mr_column_append_int64(c, st->isum[g]) : mr_column_append_float64(c, st->fsum[g]);
    case AG_MEAN:
        return st->cnt[g] ? mr_column_append_float64(c, st->fsum[g] / (double)st->cnt[g]) : mr_column_append_null(c);
    case AG_STD:
        return st->cnt[g] > 1 ? mr_column_append_float64(c, sqrt(st->m2[g] / (double)(st->cnt[g] - 1)))
                              : mr_column_append_null(c);
    default:
        if (!st->has[g]) return mr_column_append_null(c);
        switch (st->vt) {
        case MR_T_FLOAT64: return mr_column_append_float64(c, st->fv[g]);
        case MR_T_STRING: return mr_column_append_str(c, st->sv[g] ? st->sv[g] : "", st->sl[g]);
        case MR_T_BOOL: return mr_column_append_bool(c, (int)st->iv[g]);
        case MR_T_DATE: return mr_column_append_int32(c, (int32_t)st->iv[g]);
        default: return mr_column_append_int64(c, st->iv[g]);
        }
    }
}

mr_status mr__xf_agg_finish(const xf_step *s, xf_aggstate *a, mr_table **out, mr_error *err)
{
    mr_status rc = MR_OK;
    mr_table *t = NULL;
    *out = NULL;
    if (a->n_keys == 0 && a->n_groups == 0) { /* SQL: a global aggregate of no rows is one row */
        int is_new;
        if (find_or_add(a, NULL, 0, XXH3_64bits("", 0), &is_new) == XF_NONE) goto nomem;
    }
    rc = mr_table_new(&t, err);
    if (rc != MR_OK) return rc;
    for (size_t j = 0; j < a->n_keys; j++) {
        rc = mr_table_add_column(t, a->keycols[j], err);
        a->keycols[j] = NULL;
        if (rc != MR_OK) goto fail;
    }
    for (size_t j = 0; j < s->n_aggs; j++) {
        mr_column *c = NULL;
        rc = mr_column_new(s->aggs[j].name, s->aggs[j].out_type, a->n_groups, &c, err);
        if (rc != MR_OK) goto fail;
        for (size_t g = 0; g < a->n_groups && rc == MR_OK; g++) rc = append_result(&s->aggs[j], &a->st[j], g, c);
        if (rc != MR_OK) {
            mr_column_free(c);
            goto nomem;
        }
        rc = mr_table_add_column(t, c, err);
        if (rc != MR_OK) goto fail;
    }
    t->n_rows = a->n_groups;
    *out = t;
    return MR_OK;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory building the result", s->label);
fail:
    mr_table_free(t);
    return rc;
}
