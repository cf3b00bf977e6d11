/* Statistics pruning: decides from per-column min/max/null counts whether a
 * bound filter can select no row, every row, or some rows of a shard.
 *
 * Each boolean node is abstracted to the set of truth values its rows may
 * take, a subset of {TRUE, FALSE, NULL} (three bits). Leaves that compare a
 * column with literals get their set from interval reasoning: with every
 * non-null value v in [min, max], `v < c` can be TRUE only if min < c and
 * FALSE only if max >= c; rows that are NULL contribute NULL; NaN rows and
 * missing statistics contribute both TRUE and FALSE. NOT maps the set
 * element-wise; AND and OR combine every pair of possible values with
 * Kleene logic. The pairwise combination treats children as independent,
 * which can only add values, so the result is always a superset of the
 * values that really occur: NONE (no TRUE possible) and ALL (only TRUE
 * possible) are therefore safe. Anything not understood is {T, F, N}. */
#include "expr_int.h"

#include <math.h>
#include <string.h>

#define PT 1u
#define PF 2u
#define PN 4u
#define PALL (PT | PF | PN)

/* Kleene value index: 0 = TRUE, 1 = FALSE, 2 = NULL */
static unsigned kleene(int is_and, unsigned a, unsigned b)
{
    static const unsigned and_tab[3][3] = {{PT, PF, PN}, {PF, PF, PF}, {PN, PF, PN}};
    static const unsigned or_tab[3][3] = {{PT, PT, PT}, {PT, PF, PN}, {PT, PN, PN}};
    unsigned r = 0;
    for (unsigned i = 0; i < 3; i++) {
        if (!(a & (1u << i))) continue;
        for (unsigned j = 0; j < 3; j++)
            if (b & (1u << j)) r |= is_and ? and_tab[i][j] : or_tab[i][j];
    }
    return r;
}

static unsigned negate(unsigned s)
{
    return (s & PN) | ((s & PT) ? PF : 0) | ((s & PF) ? PT : 0);
}

typedef enum { K_INT, K_FLT, K_STR } key_kind;
typedef struct key {
    key_kind kind;
    int64_t i;
    double f;
    const char *s;
    size_t len;
} key;

static int key_cmp(const key *a, const key *b)
{
    switch (a->kind) {
    case K_INT: return a->i < b->i ? -1 : a->i > b->i;
    case K_FLT: return a->f < b->f ? -1 : a->f > b->f;
    default: {
        size_t m = a->len < b->len ? a->len : b->len;
        int r = m ? memcmp(a->s, b->s, m) : 0;
        if (r) return r < 0 ? -1 : 1;
        return a->len < b->len ? -1 : a->len > b->len;
    }
    }
}

static key_kind kind_of(mr_dtype t)
{
    return t == MR_T_FLOAT64 ? K_FLT : t == MR_T_STRING ? K_STR : K_INT;
}

/* Literal n as a key in comparison type t; 0 if n is not a usable literal. */
static int lit_key(const enode *n, mr_dtype t, key *k)
{
    if (n->kind != E_LIT || n->lit_type == MR_T_NULL) return 0;
    k->kind = kind_of(t);
    switch (n->lit_type) {
    case MR_T_BOOL:
    case MR_T_INT64:
        if (k->kind == K_FLT) k->f = (double)n->i;
        else k->i = n->i;
        return 1;
    case MR_T_FLOAT64: k->f = n->f; return !isnan(n->f);
    case MR_T_DATE: k->i = t == MR_T_TIMESTAMP ? mr__days_to_us(n->i) : n->i; return 1;
    case MR_T_TIMESTAMP: k->i = n->i; return 1;
    case MR_T_STRING:
        k->s = n->str;
        k->len = n->str_len;
        return 1;
    default: return 0;
    }
}

/* A stats bound of a column of type ct as a key in comparison type t. */
static int stat_key(const mr_stat_value *v, mr_dtype ct, mr_dtype t, key *k)
{
    k->kind = kind_of(t);
    switch (ct) {
    case MR_T_BOOL:
        k->i = v->b ? 1 : 0;
        return k->kind == K_INT;
    case MR_T_INT64:
        if (k->kind == K_FLT) k->f = (double)v->i;
        else k->i = v->i;
        return 1;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: k->f = v->f; return k->kind == K_FLT && !isnan(v->f);
    case MR_T_DATE: k->i = t == MR_T_TIMESTAMP ? mr__days_to_us(v->i) : v->i; return 1;
    case MR_T_TIMESTAMP: k->i = v->i; return 1;
    case MR_T_STRING:
        k->s = v->s.ptr ? v->s.ptr : "";
        k->len = v->s.ptr ? v->s.len : 0;
        return k->kind == K_STR;
    default: return 0;
    }
}

typedef struct pctx {
    const mr_col_stats *stats;
    size_t n_cols;
} pctx;

/* The column a leaf reads, with its stats, or NULL. */
static const mr_col_stats *col_stats(const pctx *p, const enode *n)
{
    if (n->kind != E_COL || n->col < 0 || (size_t)n->col >= p->n_cols) return NULL;
    return &p->stats[n->col];
}

/* Combines what min/max say about non-null rows (tf, a subset of {T, F})
 * with the null and NaN counts. */
static unsigned with_counts(const mr_col_stats *s, unsigned tf, int minmax_ok)
{
    if (s->row_count == 0) return 0;
    if (s->has_null_count && s->null_count >= s->row_count) return PN;
    unsigned r = minmax_ok ? tf : (PT | PF);
    if (!s->has_null_count || s->null_count > 0) r |= PN;
    if (s->nan_count) r |= PT | PF;
    return r;
}

/* Bounds of column n in comparison type t; 0 if unknown. */
static int bounds(const mr_col_stats *s, const enode *col, mr_dtype t, key *lo, key *hi)
{
    return s->has_min_max && stat_key(&s->min, col->col_type, t, lo) && stat_key(&s->max, col->col_type, t, hi);
}

static unsigned cmp_tf(int op, const key *lo, const key *hi, const key *c)
{
    int lc = key_cmp(lo, c), hc = key_cmp(hi, c);
    unsigned r = 0;
    switch (op) {
    case CMP_EQ:
    case CMP_NE:
        if (lc <= 0 && hc >= 0) r |= PT;
        if (!(lc == 0 && hc == 0)) r |= PF;
        return op == CMP_EQ ? r : negate(r);
    case CMP_LT: return (lc < 0 ? PT : 0) | (hc >= 0 ? PF : 0);
    case CMP_LE: return (lc <= 0 ? PT : 0) | (hc > 0 ? PF : 0);
    case CMP_GT: return (hc > 0 ? PT : 0) | (lc <= 0 ? PF : 0);
    default: return (hc >= 0 ? PT : 0) | (lc < 0 ? PF : 0);
    }
}

static int flip(int op)
{
    switch (op) {
    case CMP_LT: return CMP_GT;
    case CMP_LE: return CMP_GE;
    case CMP_GT: return CMP_LT;
    case CMP_GE: return CMP_LE;
    default: return op;
    }
}

static int is_null_lit(const enode *n) { return n->kind == E_LIT && n->lit_type == MR_T_NULL; }

static unsigned p_cmp(const pctx *p, const enode *n)
{
    const enode *a = n->kids[0], *b = n->kids[1];
    int op = n->op;
    if (is_null_lit(a) || is_null_lit(b)) return PN;
    if (a->kind == E_LIT) {
        const enode *t = a;
        a = b;
        b = t;
        op = flip(op);
    }
    const mr_col_stats *s = col_stats(p, a);
    key c, lo, hi;
    if (!s || !lit_key(b, n->op_type, &c)) return PALL;
    int ok = bounds(s, a, n->op_type, &lo, &hi);
    return with_counts(s, ok ? cmp_tf(op, &lo, &hi, &c) : 0, ok);
}

static unsigned p_in(const pctx *p, const enode *n)
{
    const mr_col_stats *s = col_stats(p, n->kids[0]);
    if (!s) return PALL;
    key lo, hi;
    int ok = bounds(s, n->kids[0], n->op_type, &lo, &hi);
    int has_null = 0, can_t = 0;
    for (size_t k = 1; k < n->n_kids; k++) {
        key c;
        if (is_null_lit(n->kids[k])) {
            has_null = 1;
            continue;
        }
        if (!lit_key(n->kids[k], n->op_type, &c)) return PALL;
        if (ok && key_cmp(&lo, &c) <= 0 && key_cmp(&hi, &c) >= 0) can_t = 1;
    }
    /* can a non-null value miss every item? Not if the whole range is listed. */
    int can_miss = 1;
    if (ok && lo.kind == K_INT && hi.i >= lo.i && (uint64_t)hi.i - (uint64_t)lo.i <= 64) {
        can_miss = 0;
        for (int64_t v = lo.i;; v++) {
            int found = 0;
            for (size_t k = 1; k < n->n_kids && !found; k++) {
                key c;
                found = lit_key(n->kids[k], n->op_type, &c) && c.i == v;
            }
            if (!found) {
                can_miss = 1;
                break;
            }
            if (v == hi.i) break;
        }
    } else if (ok && key_cmp(&lo, &hi) == 0) {
        can_miss = 1;
        for (size_t k = 1; k < n->n_kids && can_miss; k++) {
            key c;
            if (lit_key(n->kids[k], n->op_type, &c) && key_cmp(&lo, &c) == 0) can_miss = 0;
        }
    }
    /* a miss is FALSE, or NULL when the list holds a NULL */
    unsigned tf = (can_t ? PT : 0) | (can_miss ? (has_null ? PN : PF) : 0);
    unsigned r = with_counts(s, tf, ok);
    if (s->nan_count && has_null) r |= PN;
    return n->negated ? negate(r) : r;
}

static unsigned p_between(const pctx *p, const enode *n)
{
    const enode *x = n->kids[0], *a = n->kids[1], *b = n->kids[2];
    const mr_col_stats *s = col_stats(p, x);
    if (!s) return PALL;
    key lo, hi, ka, kb;
    int ok = bounds(s, x, n->op_type, &lo, &hi);
    unsigned r;
    if (is_null_lit(a) || is_null_lit(b)) {
        /* x >= a AND x <= b with one side unknown */
        unsigned ge = PN, le = PN;
        if (!is_null_lit(a)) {
            if (!lit_key(a, n->op_type, &ka)) return PALL;
            ge = with_counts(s, ok ? cmp_tf(CMP_GE, &lo, &hi, &ka) : 0, ok);
        }
        if (!is_null_lit(b)) {
            if (!lit_key(b, n->op_type, &kb)) return PALL;
            le = with_counts(s, ok ? cmp_tf(CMP_LE, &lo, &hi, &kb) : 0, ok);
        }
        r = s->row_count == 0 ? 0 : kleene(1, ge, le);
    } else {
        if (!lit_key(a, n->op_type, &ka) || !lit_key(b, n->op_type, &kb)) return PALL;
        unsigned tf = 0;
        if (ok) {
            if (key_cmp(&hi, &ka) >= 0 && key_cmp(&lo, &kb) <= 0 && key_cmp(&ka, &kb) <= 0) tf |= PT;
            if (key_cmp(&lo, &ka) < 0 || key_cmp(&hi, &kb) > 0 || key_cmp(&ka, &kb) > 0) tf |= PF;
        }
        r = with_counts(s, tf, ok);
    }
    return n->negated ? negate(r) : r;
}

static unsigned pset(const pctx *p, const enode *n)
{
    switch (n->kind) {
    case E_LIT:
        if (n->lit_type == MR_T_NULL) return PN;
        if (n->lit_type == MR_T_BOOL) return n->i ? PT : PF;
        return PALL;
    case E_COL: {
        const mr_col_stats *s = col_stats(p, n);
        if (!s || n->col_type != MR_T_BOOL) return PALL;
        unsigned tf = s->has_min_max ? ((s->max.b ? PT : 0) | (s->min.b ? 0 : PF)) : 0;
        return with_counts(s, tf, s->has_min_max);
    }
    case E_NOT: return negate(pset(p, n->kids[0]));
    case E_AND:
    case E_OR: {
        unsigned r = pset(p, n->kids[0]);
        for (size_t k = 1; k < n->n_kids; k++) r = kleene(n->kind == E_AND, r, pset(p, n->kids[k]));
        return r;
    }
    case E_ISNULL: {
        const enode *x = n->kids[0];
        unsigned r;
        if (x->kind == E_LIT) {
            r = x->lit_type == MR_T_NULL ? PT : PF;
        } else {
            const mr_col_stats *s = col_stats(p, x);
            if (!s) return PT | PF;
            if (s->row_count == 0) return 0;
            if (!s->has_null_count) r = PT | PF;
            else r = (s->null_count > 0 ? PT : 0) | (s->null_count < s->row_count ? PF : 0);
        }
        return n->negated ? negate(r) : r;
    }
    case E_CMP: return p_cmp(p, n);
    case E_IN: return p_in(p, n);
    case E_BETWEEN: return p_between(p, n);
    default: return PALL;
    }
}

mr_prune mr_expr_prune(const mr_expr *e, const mr_col_stats *stats, size_t n_cols)
{
    if (!e || !e->bound || !stats || n_cols != e->n_schema) return MR_PRUNE_SOME;
    if (e->root->type != MR_T_BOOL && e->root->type != MR_T_NULL) return MR_PRUNE_SOME;
    pctx p = {stats, n_cols};
    unsigned s = pset(&p, e->root);
    if (!(s & PT)) return MR_PRUNE_NONE;
    if (s == PT) return MR_PRUNE_ALL;
    return MR_PRUNE_SOME;
}
