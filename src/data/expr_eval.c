/* Vectorised evaluation of a bound expression over an mr_table: every node
 * produces a whole column ("vec") from its children's columns, with one
 * allocation per node output and none per row.
 *
 * Representation. A vec holds n values of one type (BOOL uint8_t, INT64 and
 * TIMESTAMP int64_t, FLOAT64 double, DATE int32_t, STRING as offsets+bytes or
 * as codes into a dictionary vec) and a byte-per-row validity array (NULL:
 * no nulls). A vec may be constant: one value standing for every row. Kernels
 * index constant operands with stride 0 (LOOP2 specialises the four
 * const/non-const cases so each loop stays a plain vectorisable loop), and a
 * node whose inputs are all constant computes one row and stays constant.
 *
 * Dictionary strings. When a subtree reads exactly one string column (plus
 * literals) and that column is dictionary-encoded with a dictionary much
 * smaller than the table, the subtree is evaluated once over the dictionary
 * itself, extended by one NULL row, and the result is gathered through the
 * codes: row i takes result[codes[i]], or result[n_dict] when row i is NULL.
 * This is exact for any expression (IS NULL, coalesce, ...), and turns
 * `country = 'FR'`, `country IN (...)`, `lower(country) = 'fr'` and
 * `contains(url, 'x')` into work proportional to the dictionary plus one
 * gather. The top-most qualifying node is the one evaluated this way.
 *
 * Nulls. Kernels compute on every row, then combine validity; null slots
 * hold initialised but meaningless values. Division or modulo by zero, int64
 * overflow, log of x <= 0 and sqrt of x < 0 give NULL (docs/expressions.md). */
#include "expr_int.h"

#include <math.h>
#include <string.h>
#include <xxhash.h>

typedef struct vec vec;
struct vec {
    mr_dtype type;        /* BOOL INT64 FLOAT64 DATE TIMESTAMP STRING, or NULL (all null) */
    int is_const;         /* 1: one row (index 0) stands for every row */
    size_t n;             /* rows held (1 when is_const) */
    const uint8_t *valid; /* (n) 1 = present; NULL = no nulls */
    const void *data;     /* (n) fixed-width values */
    const int64_t *off;   /* STRING plain: (n + 1) offsets into bytes */
    const char *bytes;
    const int32_t *codes; /* STRING dictionary: (n) indexes into dict */
    const vec *dict;      /* STRING dictionary: a plain STRING vec */
    void *own[4];         /* buffers freed with this vec */
    vec *own_dict;        /* dict, when owned */
    vec *keep;            /* another vec whose buffers this one borrows */
};

typedef struct ectx {
    const mr_expr *e;
    const mr_table *t;
    size_t n;             /* rows being evaluated (the table, or a dictionary + 1) */
    int domain_col;       /* schema index evaluated over its dictionary, or -1 */
    const vec *domain;    /* that dictionary plus a NULL row, as a plain string vec */
    const uint8_t *ones;  /* (t->n_rows + 1) bytes of 1: validity of "no nulls" */
    mr_error *err;
} ectx;

static const int64_t zero_off[2] = {0, 0};
static const uint8_t zero_bytes[16] = {0};

static void vec_free(vec *v)
{
    if (!v) return;
    for (size_t i = 0; i < sizeof(v->own) / sizeof(v->own[0]); i++) mr_free(v->own[i]);
    if (v->own_dict) {
        vec_free(v->own_dict);
        mr_free(v->own_dict);
    }
    if (v->keep) {
        vec_free(v->keep);
        mr_free(v->keep);
    }
    memset(v, 0, sizeof(*v));
}

/* Allocates bytes (at least 1) owned by v; NULL on OOM. */
static void *vec_alloc(vec *v, size_t bytes)
{
    size_t k = 0;
    while (k < sizeof(v->own) / sizeof(v->own[0]) && v->own[k]) k++;
    MR_ASSERT(k < sizeof(v->own) / sizeof(v->own[0]));
    v->own[k] = mr_malloc(bytes ? bytes : 1);
    return v->own[k];
}

/* Makes v own p (which it must not own yet). */
static void vec_adopt(vec *v, void *p)
{
    size_t k = 0;
    while (k < sizeof(v->own) / sizeof(v->own[0]) && v->own[k]) k++;
    MR_ASSERT(k < sizeof(v->own) / sizeof(v->own[0]));
    v->own[k] = p;
}

/* Frees p if v owns it (used when a buffer is replaced). */
static void vec_release(vec *v, const void *p)
{
    for (size_t k = 0; k < sizeof(v->own) / sizeof(v->own[0]); k++)
        if (p && v->own[k] == p) {
            mr_free(v->own[k]);
            v->own[k] = NULL;
        }
}

static vec *vec_box(vec *v)
{
    vec *b = mr_malloc(sizeof(*b));
    if (!b) return NULL;
    *b = *v;
    memset(v, 0, sizeof(*v));
    return b;
}

static inline const uint8_t *V(const ectx *c, const vec *v) { return v->valid ? v->valid : c->ones; }

/* String i of v. Kernels also read null rows, whose dictionary code is
 * unspecified (and the dictionary may be empty), hence the range check. */
static inline const char *str_at(const vec *v, size_t i, size_t *len)
{
    if (v->codes) {
        int32_t k = v->codes[i];
        if (k < 0 || (size_t)k >= v->dict->n) {
            *len = 0;
            return "";
        }
        return str_at(v->dict, (size_t)k, len);
    }
    *len = (size_t)(v->off[i + 1] - v->off[i]);
    return v->bytes + v->off[i];
}

/* Runs the statement for i in [0, n) with ia / ib the operand indexes (0 for a
 * constant operand), one specialised loop per case. */
#define LOOP2(ac, bc, n, ...)                                                   \
    do {                                                                         \
        if (!(ac) && !(bc)) {                                                    \
            for (size_t i = 0; i < (n); i++) {                                   \
                const size_t ia = i, ib = i;                                     \
                (void)ia, (void)ib;                                              \
                __VA_ARGS__;                                                     \
            }                                                                    \
        } else if (!(ac)) {                                                      \
            for (size_t i = 0; i < (n); i++) {                                   \
                const size_t ia = i, ib = 0;                                     \
                (void)ia, (void)ib;                                              \
                __VA_ARGS__;                                                     \
            }                                                                    \
        } else if (!(bc)) {                                                      \
            for (size_t i = 0; i < (n); i++) {                                   \
                const size_t ia = 0, ib = i;                                     \
                (void)ia, (void)ib;                                              \
                __VA_ARGS__;                                                     \
            }                                                                    \
        } else {                                                                 \
            for (size_t i = 0; i < (n); i++) {                                   \
                const size_t ia = 0, ib = 0;                                     \
                (void)ia, (void)ib;                                              \
                __VA_ARGS__;                                                     \
            }                                                                    \
        }                                                                        \
    } while (0)

static size_t width(mr_dtype t)
{
    switch (t) {
    case MR_T_BOOL: return 1;
    case MR_T_DATE: return 4;
    case MR_T_INT64:
    case MR_T_FLOAT64:
    case MR_T_TIMESTAMP: return 8;
    default: return 0;
    }
}

/* Makes v a constant NULL of type t. */
static void make_null(vec *v, mr_dtype t)
{
    vec_free(v);
    v->type = t;
    v->is_const = 1;
    v->n = 1;
    v->valid = zero_bytes;
    v->data = zero_bytes;
    v->off = zero_off;
    v->bytes = "";
}

/* Prepares an output of type t: n rows (1 if constant), data and validity
 * allocated (validity uninitialised). Strings get no data. */
static mr_status out_init(vec *o, mr_dtype t, int is_const, size_t n)
{
    memset(o, 0, sizeof(*o));
    o->type = t;
    o->is_const = is_const;
    o->n = is_const ? 1 : n;
    if (t != MR_T_STRING) {
        o->data = vec_alloc(o, o->n * width(t));
        if (!o->data) return MR_E_NOMEM;
    }
    o->valid = vec_alloc(o, o->n);
    if (!o->valid) return MR_E_NOMEM;
    return MR_OK;
}
#define OUT_VALID(o) ((uint8_t *)(o)->valid)
#define OUT_DATA(o, T) ((T *)(o)->data)

/* Converts v to type t (t is its type, or a wider one). */
static mr_status cast(vec *v, mr_dtype t)
{
    if (v->type == t) return MR_OK;
    if (v->type == MR_T_NULL) {
        make_null(v, t);
        return MR_OK;
    }
    size_t n = v->n;
    void *o = mr_malloc(n ? n * 8 : 1);
    if (!o) return MR_E_NOMEM;
    if (v->type == MR_T_INT64 && t == MR_T_FLOAT64) {
        const int64_t *x = v->data;
        double *d = o;
        for (size_t i = 0; i < n; i++) d[i] = (double)x[i];
    } else if (v->type == MR_T_DATE && t == MR_T_TIMESTAMP) {
        const int32_t *x = v->data;
        int64_t *d = o;
        for (size_t i = 0; i < n; i++) d[i] = mr__days_to_us(x[i]);
    } else {
        mr_free(o);
        MR_ASSERT(!"unsupported cast");
    }
    vec_release(v, v->data);
    v->data = o;
    vec_adopt(v, o);
    v->type = t;
    return MR_OK;
}

/* ---- kernels -------------------------------------------------------------- */

static void valid_and(const ectx *c, const vec *a, const vec *b, vec *o)
{
    const uint8_t *va = V(c, a), *vb = V(c, b);
    uint8_t *ov = OUT_VALID(o);
    LOOP2(a->is_const, b->is_const, o->n, ov[i] = va[ia] & vb[ib]);
}

static int str_cmp(const char *x, size_t xl, const char *y, size_t yl)
{
    int r = memcmp(x, y, xl < yl ? xl : yl);
    if (r) return r;
    return xl < yl ? -1 : xl > yl;
}

#define CMP_SWITCH(T)                                                                      \
    do {                                                                                   \
        const T *x = a->data, *y = b->data;                                                \
        switch (op) {                                                                      \
        case CMP_EQ: LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] == y[ib]); break; \
        case CMP_NE: LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] != y[ib]); break; \
        case CMP_LT: LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] < y[ib]); break;  \
        case CMP_LE: LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] <= y[ib]); break; \
        case CMP_GT: LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] > y[ib]); break;  \
        default: LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] >= y[ib]); break;     \
        }                                                                                  \
    } while (0)

/* o = a op b; a and b have the same type. */
static mr_status k_cmp(const ectx *c, int op, const vec *a, const vec *b, vec *o)
{
    mr_status rc = out_init(o, MR_T_BOOL, a->is_const && b->is_const, c->n);
    if (rc != MR_OK) return rc;
    uint8_t *od = OUT_DATA(o, uint8_t);
    valid_and(c, a, b, o);
    switch (a->type) {
    case MR_T_BOOL: CMP_SWITCH(uint8_t); break;
    case MR_T_INT64:
    case MR_T_TIMESTAMP: CMP_SWITCH(int64_t); break;
    case MR_T_FLOAT64: CMP_SWITCH(double); break;
    case MR_T_DATE: CMP_SWITCH(int32_t); break;
    case MR_T_STRING:
        LOOP2(a->is_const, b->is_const, o->n, {
            size_t xl, yl;
            const char *xs = str_at(a, ia, &xl);
            const char *ys = str_at(b, ib, &yl);
            int r = str_cmp(xs, xl, ys, yl);
            od[i] = op == CMP_EQ ? r == 0 : op == CMP_NE ? r != 0 : op == CMP_LT ? r < 0 : op == CMP_LE ? r <= 0
                  : op == CMP_GT ? r > 0 : r >= 0;
        });
        break;
    default: MR_ASSERT(!"k_cmp: bad type");
    }
    return MR_OK;
}

/* Kleene AND / OR of two boolean vecs. */
static mr_status k_logic(const ectx *c, int is_and, const vec *a, const vec *b, vec *o)
{
    mr_status rc = out_init(o, MR_T_BOOL, a->is_const && b->is_const, c->n);
    if (rc != MR_OK) return rc;
    const uint8_t *x = a->data, *y = b->data, *va = V(c, a), *vb = V(c, b);
    uint8_t *od = OUT_DATA(o, uint8_t), *ov = OUT_VALID(o);
    if (is_and)
        LOOP2(a->is_const, b->is_const, o->n, {
            uint8_t tx = va[ia] & x[ia], ty = vb[ib] & y[ib];
            uint8_t fx = va[ia] & !x[ia], fy = vb[ib] & !y[ib];
            od[i] = tx & ty;
            ov[i] = (uint8_t)((va[ia] & vb[ib]) | fx | fy);
        });
    else
        LOOP2(a->is_const, b->is_const, o->n, {
            uint8_t tx = va[ia] & x[ia], ty = vb[ib] & y[ib];
            od[i] = tx | ty;
            ov[i] = (uint8_t)((va[ia] & vb[ib]) | tx | ty);
        });
    return MR_OK;
}

static mr_status k_not(const ectx *c, vec *a, vec *o)
{
    mr_status rc = out_init(o, MR_T_BOOL, a->is_const, c->n);
    if (rc != MR_OK) return rc;
    const uint8_t *x = a->data, *va = V(c, a);
    uint8_t *od = OUT_DATA(o, uint8_t), *ov = OUT_VALID(o);
    for (size_t i = 0; i < o->n; i++) {
        od[i] = !x[i];
        ov[i] = va[i];
    }
    return MR_OK;
}

static mr_status k_arith(const ectx *c, int op, const vec *a, const vec *b, vec *o)
{
    mr_status rc = out_init(o, a->type, a->is_const && b->is_const, c->n);
    if (rc != MR_OK) return rc;
    uint8_t *ov = OUT_VALID(o);
    valid_and(c, a, b, o);
    int ac = a->is_const, bc = b->is_const;
    if (a->type == MR_T_INT64) {
        const int64_t *x = a->data, *y = b->data;
        int64_t *od = OUT_DATA(o, int64_t);
        switch (op) {
        case OP_ADD:
            LOOP2(ac, bc, o->n, {
                int64_t r;
                int bad = __builtin_add_overflow(x[ia], y[ib], &r);
                od[i] = bad ? 0 : r;
                ov[i] &= (uint8_t)!bad;
            });
            break;
        case OP_SUB:
            LOOP2(ac, bc, o->n, {
                int64_t r;
                int bad = __builtin_sub_overflow(x[ia], y[ib], &r);
                od[i] = bad ? 0 : r;
                ov[i] &= (uint8_t)!bad;
            });
            break;
        case OP_MUL:
            LOOP2(ac, bc, o->n, {
                int64_t r;
                int bad = __builtin_mul_overflow(x[ia], y[ib], &r);
                od[i] = bad ? 0 : r;
                ov[i] &= (uint8_t)!bad;
            });
            break;
        case OP_MOD:
            LOOP2(ac, bc, o->n, {
                int64_t d = y[ib];
                od[i] = d == 0 || d == -1 ? 0 : x[ia] % d;
                ov[i] &= (uint8_t)(d != 0);
            });
            break;
        default: MR_ASSERT(!"k_arith: int division");
        }
    } else {
        const double *x = a->data, *y = b->data;
        double *od = OUT_DATA(o, double);
        switch (op) {
        case OP_ADD: LOOP2(ac, bc, o->n, od[i] = x[ia] + y[ib]); break;
        case OP_SUB: LOOP2(ac, bc, o->n, od[i] = x[ia] - y[ib]); break;
        case OP_MUL: LOOP2(ac, bc, o->n, od[i] = x[ia] * y[ib]); break;
        case OP_DIV:
            LOOP2(ac, bc, o->n, {
                double d = y[ib];
                od[i] = d == 0 ? 0 : x[ia] / d;
                ov[i] &= (uint8_t)(d != 0);
            });
            break;
        default:
            LOOP2(ac, bc, o->n, {
                double d = y[ib];
                od[i] = d == 0 ? 0 : fmod(x[ia], d);
                ov[i] &= (uint8_t)(d != 0);
            });
            break;
        }
    }
    return MR_OK;
}

/* Unary numeric functions and negation: o = f(a), same row count. */
static mr_status k_unary_num(const ectx *c, int what, vec *a, mr_dtype out_t, vec *o)
{
    mr_status rc = out_init(o, out_t, a->is_const, c->n);
    if (rc != MR_OK) return rc;
    const uint8_t *va = V(c, a);
    uint8_t *ov = OUT_VALID(o);
    size_t n = o->n;
    if (a->type == MR_T_INT64 && out_t == MR_T_INT64) { /* negation or abs */
        const int64_t *x = a->data;
        int64_t *od = OUT_DATA(o, int64_t);
        for (size_t i = 0; i < n; i++) {
            int64_t v = x[i];
            int bad = v == INT64_MIN;
            od[i] = bad ? 0 : (what == FN_ABS && v >= 0 ? v : -v);
            ov[i] = va[i] & (uint8_t)!bad;
        }
        return MR_OK;
    }
    MR_ASSERT(a->type == MR_T_FLOAT64);
    const double *x = a->data;
    double *od = OUT_DATA(o, double);
    for (size_t i = 0; i < n; i++) {
        double v = x[i], r;
        int ok = 1;
        switch (what) {
        case FN_ABS: r = fabs(v); break;
        case FN_LOG:
            ok = v > 0;
            r = ok ? log(v) : 0;
            break;
        case FN_EXP: r = exp(v); break;
        case FN_SQRT:
            ok = v >= 0;
            r = ok ? sqrt(v) : 0;
            break;
        default: r = -v; break; /* E_NEG */
        }
        od[i] = r;
        ov[i] = va[i] & (uint8_t)ok;
    }
    return MR_OK;
}

/* lower / upper: a new plain string vec (ASCII letters only). */
static mr_status k_case(const ectx *c, int upper, vec *a, vec *o)
{
    mr_status rc = out_init(o, MR_T_STRING, a->is_const, c->n);
    if (rc != MR_OK) return rc;
    size_t n = o->n, total = 0, len;
    const uint8_t *va = V(c, a);
    memcpy(OUT_VALID(o), va, n);
    for (size_t i = 0; i < n; i++)
        if (va[i]) {
            str_at(a, i, &len);
            total += len;
        }
    int64_t *off = vec_alloc(o, (n + 1) * sizeof(int64_t));
    char *bytes = vec_alloc(o, total);
    if (!off || !bytes) return MR_E_NOMEM;
    off[0] = 0;
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        if (va[i]) {
            const char *s = str_at(a, i, &len);
            for (size_t k = 0; k < len; k++) {
                char ch = s[k];
                if (upper && ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
                if (!upper && ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
                bytes[p++] = ch;
            }
        }
        off[i + 1] = (int64_t)p;
    }
    o->off = off;
    o->bytes = bytes;
    return MR_OK;
}

static mr_status k_length(const ectx *c, vec *a, vec *o)
{
    mr_status rc = out_init(o, MR_T_INT64, a->is_const, c->n);
    if (rc != MR_OK) return rc;
    const uint8_t *va = V(c, a);
    int64_t *od = OUT_DATA(o, int64_t);
    memcpy(OUT_VALID(o), va, o->n);
    for (size_t i = 0; i < o->n; i++) {
        size_t len;
        const unsigned char *s = (const unsigned char *)str_at(a, i, &len);
        int64_t cps = 0; /* code points: bytes that are not UTF-8 continuation bytes */
        for (size_t k = 0; k < len; k++) cps += (s[k] & 0xC0) != 0x80;
        od[i] = cps;
    }
    return MR_OK;
}

static int has_sub(const char *s, size_t sl, const char *t, size_t tl)
{
    if (tl == 0) return 1;
    if (tl > sl) return 0;
    for (size_t i = 0; i + tl <= sl; i++)
        if (s[i] == t[0] && !memcmp(s + i, t, tl)) return 1;
    return 0;
}

static mr_status k_contains(const ectx *c, const vec *a, const vec *b, vec *o)
{
    mr_status rc = out_init(o, MR_T_BOOL, a->is_const && b->is_const, c->n);
    if (rc != MR_OK) return rc;
    uint8_t *od = OUT_DATA(o, uint8_t);
    valid_and(c, a, b, o);
    LOOP2(a->is_const, b->is_const, o->n, {
        size_t sl, tl;
        const char *s = str_at(a, ia, &sl);
        const char *t = str_at(b, ib, &tl);
        od[i] = (uint8_t)has_sub(s, sl, t, tl);
    });
    return MR_OK;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

static mr_status k_date_part(const ectx *c, int fn, vec *a, vec *o)
{
    mr_status rc = out_init(o, MR_T_INT64, a->is_const, c->n);
    if (rc != MR_OK) return rc;
    memcpy(OUT_VALID(o), V(c, a), o->n);
    int64_t *od = OUT_DATA(o, int64_t);
    for (size_t i = 0; i < o->n; i++) {
        int64_t days = a->type == MR_T_DATE ? ((const int32_t *)a->data)[i]
                                            : floor_div(((const int64_t *)a->data)[i], INT64_C(86400000000));
        int64_t sod = a->type == MR_T_DATE ? 0 : floor_div(((const int64_t *)a->data)[i], 1000000) - days * 86400;
        int64_t y;
        unsigned m, d;
        switch (fn) {
        case FN_DAYOFWEEK: od[i] = ((days % 7) + 11) % 7; break; /* 1970-01-01 was a Thursday (4) */
        case FN_HOUR: od[i] = sod / 3600; break;
        case FN_MINUTE: od[i] = sod / 60 % 60; break;
        case FN_SECOND: od[i] = sod % 60; break;
        default:
            mr_date_to_civil((int32_t)days, &y, &m, &d);
            od[i] = fn == FN_YEAR ? y : fn == FN_MONTH ? (int64_t)m : (int64_t)d;
            break;
        }
    }
    return MR_OK;
}

static inline int64_t day_at(const vec *v, size_t i)
{
    return v->type == MR_T_DATE ? ((const int32_t *)v->data)[i]
                                : floor_div(((const int64_t *)v->data)[i], INT64_C(86400000000));
}

/* days_between(a, b) = calendar day of b minus calendar day of a. */
static mr_status k_days_between(const ectx *c, const vec *a, const vec *b, vec *o)
{
    mr_status rc = out_init(o, MR_T_INT64, a->is_const && b->is_const, c->n);
    if (rc != MR_OK) return rc;
    valid_and(c, a, b, o);
    int64_t *od = OUT_DATA(o, int64_t);
    LOOP2(a->is_const, b->is_const, o->n, od[i] = day_at(b, ib) - day_at(a, ia));
    return MR_OK;
}


/* hash(x): xxh3-64 (seed 0) of the value's canonical bytes, as int64. The
 * bytes are fixed by docs/expressions.md: little-endian int64 / timestamp,
 * int32 date, IEEE float64 with -0.0 -> 0.0 and every NaN -> 0x7ff8..., one
 * byte 0/1 for bool, the raw UTF-8 for strings. */
static mr_status k_hash(const ectx *c, const vec *a, vec *o)
{
    mr_status rc = out_init(o, MR_T_INT64, a->is_const, c->n);
    if (rc != MR_OK) return rc;
    memcpy(OUT_VALID(o), V(c, a), o->n);
    int64_t *od = OUT_DATA(o, int64_t);
    uint8_t b[8];
    for (size_t i = 0; i < o->n; i++) {
        uint64_t h;
        switch (a->type) {
        case MR_T_BOOL:
            b[0] = ((const uint8_t *)a->data)[i] ? 1 : 0;
            h = XXH3_64bits(b, 1);
            break;
        case MR_T_DATE: {
            uint32_t d = (uint32_t)((const int32_t *)a->data)[i];
            for (int k = 0; k < 4; k++) b[k] = (uint8_t)(d >> (8 * k));
            h = XXH3_64bits(b, 4);
            break;
        }
        case MR_T_FLOAT64: {
            double f = ((const double *)a->data)[i];
            uint64_t u;
            if (f == 0) f = 0.0;
            memcpy(&u, &f, 8);
            if (isnan(f)) u = UINT64_C(0x7ff8000000000000);
            mr_le_put64(b, u);
            h = XXH3_64bits(b, 8);
            break;
        }
        case MR_T_STRING: {
            size_t len;
            const char *sp = str_at(a, i, &len);
            h = XXH3_64bits(sp, len);
            break;
        }
        default: /* INT64, TIMESTAMP */
            mr_le_put64(b, (uint64_t)((const int64_t *)a->data)[i]);
            h = XXH3_64bits(b, 8);
            break;
        }
        int64_t sv;
        memcpy(&sv, &h, 8);
        od[i] = sv;
    }
    return MR_OK;
}

/* o = is_max ? (x < y ? y : x) : (x > y ? y : x); a NaN x stays NaN. */
static mr_status k_minmax(const ectx *c, int is_max, const vec *a, const vec *b, vec *o)
{
    mr_status rc = out_init(o, a->type, a->is_const && b->is_const, c->n);
    if (rc != MR_OK) return rc;
    valid_and(c, a, b, o);
    if (a->type == MR_T_INT64) {
        const int64_t *x = a->data, *y = b->data;
        int64_t *od = OUT_DATA(o, int64_t);
        if (is_max) LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] < y[ib] ? y[ib] : x[ia]);
        else LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] > y[ib] ? y[ib] : x[ia]);
    } else {
        const double *x = a->data, *y = b->data;
        double *od = OUT_DATA(o, double);
        if (is_max) LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] < y[ib] ? y[ib] : x[ia]);
        else LOOP2(a->is_const, b->is_const, o->n, od[i] = x[ia] > y[ib] ? y[ib] : x[ia]);
    }
    return MR_OK;
}

/* r = cond ? a : b row by row (a NULL condition picks b); a and b have type
 * t. Moves a or b into r when the condition is constant. */
static mr_status k_select(const ectx *c, mr_dtype t, vec *cond, vec *a, vec *b, vec *r)
{
    memset(r, 0, sizeof(*r));
    if (cond->is_const) {
        int take = cond->type != MR_T_NULL && V(c, cond)[0] && ((const uint8_t *)cond->data)[0];
        vec *src = take ? a : b;
        *r = *src;
        memset(src, 0, sizeof(*src));
        return MR_OK;
    }
    mr_status rc = out_init(r, t, 0, c->n);
    if (rc != MR_OK) return rc;
    const uint8_t *cd = cond->data, *cv = V(c, cond), *va = V(c, a), *vb = V(c, b);
    uint8_t *ov = OUT_VALID(r);
    LOOP2(a->is_const, b->is_const, r->n, ov[i] = (cd[i] & cv[i]) ? va[ia] : vb[ib]);
    if (t == MR_T_STRING) {
        size_t total = 0, len;
        LOOP2(a->is_const, b->is_const, r->n, {
            if (cd[i] & cv[i]) str_at(a, ia, &len);
            else str_at(b, ib, &len);
            total += ov[i] ? len : 0;
        });
        int64_t *off = vec_alloc(r, (r->n + 1) * sizeof(int64_t));
        char *bytes = vec_alloc(r, total);
        if (!off || !bytes) return MR_E_NOMEM;
        size_t p = 0;
        off[0] = 0;
        LOOP2(a->is_const, b->is_const, r->n, {
            const char *sp = (cd[i] & cv[i]) ? str_at(a, ia, &len) : str_at(b, ib, &len);
            if (ov[i]) {
                memcpy(bytes + p, sp, len);
                p += len;
            }
            off[i + 1] = (int64_t)p;
        });
        r->off = off;
        r->bytes = bytes;
        return MR_OK;
    }
#define PICK(T)                                                                              \
    do {                                                                                     \
        const T *x = a->data, *y = b->data;                                                  \
        T *od = OUT_DATA(r, T);                                                              \
        LOOP2(a->is_const, b->is_const, r->n, od[i] = (cd[i] & cv[i]) ? x[ia] : y[ib]);      \
    } while (0)
    switch (t) {
    case MR_T_BOOL: PICK(uint8_t); break;
    case MR_T_DATE: PICK(int32_t); break;
    case MR_T_FLOAT64: PICK(double); break;
    default: PICK(int64_t); break;
    }
#undef PICK
    return MR_OK;
}

/* ---- nodes ---------------------------------------------------------------- */

static mr_status eval_node(ectx *c, const enode *n, vec *out);

static mr_status load_col(ectx *c, const enode *n, vec *o)
{
    memset(o, 0, sizeof(*o));
    o->type = n->type;
    o->n = c->n;
    if (c->domain_col >= 0 && n->col == c->domain_col) {
        const vec *d = c->domain;
        o->valid = d->valid;
        o->off = d->off;
        o->bytes = d->bytes;
        return MR_OK;
    }
    const mr_column *col = mr_table_column(c->t, n->str);
    if (!col)
        return MR_ERR(c->err, MR_E_SCHEMA, "%s: column '%s' is not in the table", c->e->label, n->str);
    if (col->type != n->col_type)
        return MR_ERR(c->err, MR_E_SCHEMA, "%s: column '%s' is %s in the table but was bound as %s", c->e->label,
                      n->str, mr_dtype_name(col->type), mr_dtype_name(n->col_type));
    if (col->n != c->n)
        return MR_ERR(c->err, MR_E_SCHEMA, "%s: column '%s' has %zu rows, the table %zu", c->e->label, n->str,
                      col->n, c->n);
    if (col->type == MR_T_NULL) {
        make_null(o, MR_T_NULL);
        return MR_OK;
    }
    if (col->valid && col->null_count) {
        uint8_t *v = vec_alloc(o, c->n);
        if (!v) return MR_E_NOMEM;
        for (size_t i = 0; i < c->n; i++) v[i] = (col->valid[i >> 3] >> (i & 7)) & 1;
        o->valid = v;
    }
    if (col->type == MR_T_FLOAT32) {
        double *d = vec_alloc(o, c->n * sizeof(double));
        if (!d) return MR_E_NOMEM;
        const float *f = col->data;
        for (size_t i = 0; i < c->n; i++) d[i] = f[i];
        o->data = d;
    } else if (col->type == MR_T_DECIMAL) {
        double *d = vec_alloc(o, c->n * sizeof(double));
        if (!d) return MR_E_NOMEM;
        const int64_t *u = col->data;
        for (size_t i = 0; i < c->n; i++) d[i] = mr_decimal_to_f64(u[i], col->kind.scale);
        o->data = d;
    } else if (col->type != MR_T_STRING) {
        o->data = col->data ? col->data : (const void *)zero_bytes;
    } else if (col->codes) {
        vec *d = mr_calloc(1, sizeof(*d));
        if (!d) return MR_E_NOMEM;
        d->type = MR_T_STRING;
        d->n = col->dict->n;
        d->off = col->dict->offsets;
        d->bytes = col->dict->bytes ? col->dict->bytes : "";
        o->own_dict = d;
        o->dict = d;
        o->codes = col->codes;
    } else {
        o->off = col->offsets;
        o->bytes = col->bytes ? col->bytes : "";
    }
    return MR_OK;
}

/* Evaluates n over the dictionary of string column col (see the header
 * comment) and gathers the result to the table's rows. */
static mr_status eval_on_dict(ectx *c, const enode *n, const mr_column *col, vec *out)
{
    mr_status rc = MR_OK;
    const mr_column *d = col->dict;
    size_t nd = d->n, rows = c->n;
    vec dom, r;
    memset(&dom, 0, sizeof(dom));
    memset(&r, 0, sizeof(r));
    memset(out, 0, sizeof(*out));
    dom.type = MR_T_STRING;
    dom.n = nd + 1;
    int64_t *off = vec_alloc(&dom, (nd + 2) * sizeof(int64_t));
    uint8_t *dv = vec_alloc(&dom, nd + 1);
    if (!off || !dv) {
        rc = MR_E_NOMEM;
        goto done;
    }
    memcpy(off, d->offsets, (nd + 1) * sizeof(int64_t));
    off[nd + 1] = off[nd];
    memset(dv, 1, nd);
    dv[nd] = 0;
    dom.off = off;
    dom.valid = dv;
    dom.bytes = d->bytes ? d->bytes : "";

    c->n = nd + 1;
    c->domain_col = n->dict_col;
    c->domain = &dom;
    rc = eval_node(c, n, &r);
    c->n = rows;
    c->domain_col = -1;
    c->domain = NULL;
    if (rc != MR_OK) goto done;

    /* r may borrow dom's buffers: keep dom alive as long as the output */
    if (r.is_const) {
        *out = r;
        memset(&r, 0, sizeof(r));
        out->keep = vec_box(&dom);
        if (!out->keep) rc = MR_E_NOMEM;
        goto done;
    }
    const uint8_t *rv = V(c, &r);
    const int32_t *codes = col->codes;
    const uint8_t *bits = col->null_count ? col->valid : NULL;
    out->type = r.type;
    out->n = rows;
    uint8_t *ov = vec_alloc(out, rows);
    if (!ov) {
        rc = MR_E_NOMEM;
        goto done;
    }
    out->valid = ov;
#define GATHER(T)                                                                           \
    do {                                                                                    \
        T *od = vec_alloc(out, rows * sizeof(T));                                           \
        if (!od) {                                                                          \
            rc = MR_E_NOMEM;                                                                \
            goto done;                                                                      \
        }                                                                                   \
        const T *rd = r.data;                                                               \
        for (size_t i = 0; i < rows; i++) {                                                 \
            size_t k = bits && !((bits[i >> 3] >> (i & 7)) & 1) ? nd : (size_t)codes[i];    \
            od[i] = rd[k];                                                                  \
            ov[i] = rv[k];                                                                  \
        }                                                                                   \
        out->data = od;                                                                     \
    } while (0)
    switch (r.type) {
    case MR_T_BOOL: GATHER(uint8_t); break;
    case MR_T_DATE: GATHER(int32_t); break;
    case MR_T_FLOAT64: GATHER(double); break;
    case MR_T_INT64:
    case MR_T_TIMESTAMP: GATHER(int64_t); break;
    case MR_T_STRING: {
        int32_t *oc = vec_alloc(out, rows * sizeof(int32_t));
        if (!oc) {
            rc = MR_E_NOMEM;
            goto done;
        }
        for (size_t i = 0; i < rows; i++) {
            size_t k = bits && !((bits[i >> 3] >> (i & 7)) & 1) ? nd : (size_t)codes[i];
            oc[i] = (int32_t)k;
            ov[i] = rv[k];
        }
        out->codes = oc;
        out->own_dict = vec_box(&r);
        if (!out->own_dict) {
            rc = MR_E_NOMEM;
            goto done;
        }
        out->dict = out->own_dict;
        break;
    }
    default: MR_ASSERT(!"eval_on_dict: bad type");
    }
#undef GATHER
    out->keep = vec_box(&dom);
    if (!out->keep) rc = MR_E_NOMEM;
done:
    vec_free(&r);
    vec_free(&dom);
    if (rc != MR_OK) vec_free(out);
    return rc;
}

static mr_status eval_cast(ectx *c, const enode *n, mr_dtype t, vec *out)
{
    mr_status rc = eval_node(c, n, out);
    if (rc == MR_OK) rc = cast(out, t);
    return rc;
}

/* CASE / if(): folds from the last branch to the first, so the first TRUE
 * condition wins: acc = else (or NULL); acc = cond_k ? val_k : acc. */
static mr_status eval_case(ectx *c, const enode *n, vec *o)
{
    mr_status rc = MR_OK;
    mr_dtype t = n->type;
    size_t n_pairs = n->n_kids / 2;
    vec acc, cond, val, r;
    memset(&acc, 0, sizeof(acc));
    memset(&cond, 0, sizeof(cond));
    memset(&val, 0, sizeof(val));
    memset(&r, 0, sizeof(r));
    if (n->n_kids % 2) rc = eval_cast(c, n->kids[n->n_kids - 1], t, &acc);
    else make_null(&acc, t);
    for (size_t k = n_pairs; rc == MR_OK && k-- > 0;) {
        rc = eval_cast(c, n->kids[2 * k], MR_T_BOOL, &cond);
        if (rc == MR_OK) rc = eval_cast(c, n->kids[2 * k + 1], t, &val);
        if (rc == MR_OK) rc = k_select(c, t, &cond, &val, &acc, &r);
        vec_free(&cond);
        vec_free(&val);
        vec_free(&acc);
        acc = r;
        memset(&r, 0, sizeof(r));
    }
    if (rc == MR_OK) {
        *o = acc;
        memset(&acc, 0, sizeof(acc));
    }
    vec_free(&acc);
    vec_free(&r);
    return rc;
}

static mr_status eval_coalesce(ectx *c, const enode *n, vec *o)
{
    mr_status rc = MR_OK;
    mr_dtype t = n->op_type;
    vec args[2]; /* accumulate: args[0] = result so far, args[1] = next argument */
    memset(args, 0, sizeof(args));
    rc = eval_cast(c, n->kids[0], t, &args[0]);
    if (rc != MR_OK) goto done;
    for (size_t k = 1; k < n->n_kids; k++) {
        vec *a = &args[0], *b = &args[1], r;
        memset(&r, 0, sizeof(r));
        rc = eval_cast(c, n->kids[k], t, b);
        if (rc != MR_OK) goto done;
        rc = out_init(&r, t, a->is_const && b->is_const, c->n);
        if (rc != MR_OK) {
            vec_free(&r);
            goto done;
        }
        const uint8_t *va = V(c, a), *vb = V(c, b);
        uint8_t *ov = OUT_VALID(&r);
        LOOP2(a->is_const, b->is_const, r.n, ov[i] = va[ia] | vb[ib]);
        if (t == MR_T_STRING) {
            size_t total = 0, len;
            LOOP2(a->is_const, b->is_const, r.n, {
                if (va[ia]) str_at(a, ia, &len);
                else if (vb[ib]) str_at(b, ib, &len);
                else len = 0;
                total += len;
            });
            int64_t *off = vec_alloc(&r, (r.n + 1) * sizeof(int64_t));
            char *bytes = vec_alloc(&r, total);
            if (!off || !bytes) {
                vec_free(&r);
                rc = MR_E_NOMEM;
                goto done;
            }
            size_t p = 0;
            off[0] = 0;
            LOOP2(a->is_const, b->is_const, r.n, {
                const char *s = "";
                len = 0;
                if (va[ia]) s = str_at(a, ia, &len);
                else if (vb[ib]) s = str_at(b, ib, &len);
                memcpy(bytes + p, s, len);
                p += len;
                off[i + 1] = (int64_t)p;
            });
            r.off = off;
            r.bytes = bytes;
        } else {
#define PICK(T)                                                                       \
    do {                                                                              \
        const T *x = a->data, *y = b->data;                                           \
        T *od = OUT_DATA(&r, T);                                                      \
        LOOP2(a->is_const, b->is_const, r.n, od[i] = va[ia] ? x[ia] : y[ib]);         \
    } while (0)
            switch (t) {
            case MR_T_BOOL: PICK(uint8_t); break;
            case MR_T_DATE: PICK(int32_t); break;
            case MR_T_FLOAT64: PICK(double); break;
            default: PICK(int64_t); break;
            }
#undef PICK
        }
        vec_free(a);
        vec_free(b);
        *a = r;
    }
    *o = args[0];
    memset(&args[0], 0, sizeof(args[0]));
done:
    vec_free(&args[0]);
    vec_free(&args[1]);
    return rc;
}

/* x [NOT] IN (list): Kleene OR of x = item over the items. */
static mr_status eval_in(ectx *c, const enode *n, vec *o)
{
    mr_status rc;
    vec x, item, eq, acc, tmp;
    memset(&x, 0, sizeof(x));
    memset(&item, 0, sizeof(item));
    memset(&eq, 0, sizeof(eq));
    memset(&acc, 0, sizeof(acc));
    memset(&tmp, 0, sizeof(tmp));
    rc = eval_cast(c, n->kids[0], n->op_type, &x);
    if (rc != MR_OK) goto done;
    for (size_t k = 1; k < n->n_kids; k++) {
        rc = eval_cast(c, n->kids[k], n->op_type, &item);
        if (rc != MR_OK) goto done;
        rc = k_cmp(c, CMP_EQ, &x, &item, &eq);
        if (rc != MR_OK) goto done;
        vec_free(&item);
        if (k == 1) {
            acc = eq;
            memset(&eq, 0, sizeof(eq));
            continue;
        }
        rc = k_logic(c, 0, &acc, &eq, &tmp);
        if (rc != MR_OK) goto done;
        vec_free(&acc);
        vec_free(&eq);
        acc = tmp;
        memset(&tmp, 0, sizeof(tmp));
    }
    if (n->negated) {
        rc = k_not(c, &acc, &tmp);
        if (rc != MR_OK) goto done;
        vec_free(&acc);
        acc = tmp;
        memset(&tmp, 0, sizeof(tmp));
    }
    *o = acc;
    memset(&acc, 0, sizeof(acc));
done:
    vec_free(&x);
    vec_free(&item);
    vec_free(&eq);
    vec_free(&acc);
    vec_free(&tmp);
    return rc;
}

static mr_status eval_between(ectx *c, const enode *n, vec *o)
{
    mr_status rc;
    vec x, lo, hi, a, b, r;
    memset(&x, 0, sizeof(x));
    memset(&lo, 0, sizeof(lo));
    memset(&hi, 0, sizeof(hi));
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(&r, 0, sizeof(r));
    rc = eval_cast(c, n->kids[0], n->op_type, &x);
    if (rc != MR_OK) goto done;
    rc = eval_cast(c, n->kids[1], n->op_type, &lo);
    if (rc != MR_OK) goto done;
    rc = eval_cast(c, n->kids[2], n->op_type, &hi);
    if (rc != MR_OK) goto done;
    rc = k_cmp(c, CMP_GE, &x, &lo, &a);
    if (rc != MR_OK) goto done;
    rc = k_cmp(c, CMP_LE, &x, &hi, &b);
    if (rc != MR_OK) goto done;
    rc = k_logic(c, 1, &a, &b, &r);
    if (rc != MR_OK) goto done;
    if (n->negated) {
        vec_free(&a);
        rc = k_not(c, &r, &a);
        if (rc != MR_OK) goto done;
        vec_free(&r);
        r = a;
        memset(&a, 0, sizeof(a));
    }
    *o = r;
    memset(&r, 0, sizeof(r));
done:
    vec_free(&x);
    vec_free(&lo);
    vec_free(&hi);
    vec_free(&a);
    vec_free(&b);
    vec_free(&r);
    return rc;
}

/* A literal: a constant vector of one value (borrowing the node's storage
 * for numbers and strings). */
static mr_status eval_literal(const enode *n, vec *out)
{
    out->type = n->lit_type;
    out->is_const = 1;
    out->n = 1;
    out->valid = n->lit_type == MR_T_NULL ? zero_bytes : NULL;
    switch (n->lit_type) {
    case MR_T_NULL: make_null(out, MR_T_NULL); break;
    case MR_T_BOOL: {
        uint8_t *d = vec_alloc(out, 1);
        if (!d) return MR_E_NOMEM;
        d[0] = (uint8_t)n->i;
        out->data = d;
        break;
    }
    case MR_T_DATE: {
        int32_t *d = vec_alloc(out, sizeof(int32_t));
        if (!d) return MR_E_NOMEM;
        d[0] = (int32_t)n->i;
        out->data = d;
        break;
    }
    case MR_T_INT64:
    case MR_T_TIMESTAMP: out->data = &n->i; break;
    case MR_T_FLOAT64: out->data = &n->f; break;
    case MR_T_STRING: {
        int64_t *off = vec_alloc(out, 2 * sizeof(int64_t));
        if (!off) return MR_E_NOMEM;
        off[0] = 0;
        off[1] = (int64_t)n->str_len;
        out->off = off;
        out->bytes = n->str;
        break;
    }
    default: break;
    }
    return MR_OK;
}

/* AND / OR over two or more operands, folded left to right (three-valued). */
static mr_status eval_andor(ectx *c, const enode *n, vec *out)
{
    vec a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    mr_status rc = eval_cast(c, n->kids[0], MR_T_BOOL, &a);
    for (size_t k = 1; rc == MR_OK && k < n->n_kids; k++) {
        vec r;
        rc = eval_cast(c, n->kids[k], MR_T_BOOL, &b);
        if (rc != MR_OK) break;
        rc = k_logic(c, n->kind == E_AND, &a, &b, &r);
        if (rc != MR_OK) {
            vec_free(&r);
            break;
        }
        vec_free(&a);
        vec_free(&b);
        a = r;
    }
    if (rc == MR_OK) {
        *out = a;
        memset(&a, 0, sizeof(a));
    }
    vec_free(&a);
    vec_free(&b);
    return rc;
}

/* x IS [NOT] NULL: never null itself. */
static mr_status eval_isnull(ectx *c, const enode *n, vec *out)
{
    vec a;
    memset(&a, 0, sizeof(a));
    mr_status rc = eval_node(c, n->kids[0], &a);
    if (rc == MR_OK) rc = out_init(out, MR_T_BOOL, a.is_const, c->n);
    if (rc == MR_OK) {
        const uint8_t *va = V(c, &a);
        uint8_t *od = OUT_DATA(out, uint8_t), *ov = OUT_VALID(out);
        for (size_t i = 0; i < out->n; i++) {
            od[i] = n->negated ? va[i] : !va[i];
            ov[i] = 1;
        }
    }
    vec_free(&a);
    return rc;
}

/* A function call: the multi-argument functions have their own steps; the
 * others evaluate their argument in the node's operand type and run one
 * kernel. */
static mr_status eval_call(ectx *c, const enode *n, vec *out)
{
    mr_status rc = MR_OK;
    vec a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    switch (n->op) {
    case FN_COALESCE: return eval_coalesce(c, n, out);
    case FN_IF: return eval_case(c, n, out);
    case FN_CLIP: {
        vec hi, t1;
        memset(&hi, 0, sizeof(hi));
        memset(&t1, 0, sizeof(t1));
        rc = eval_cast(c, n->kids[0], n->op_type, &a);
        if (rc == MR_OK) rc = eval_cast(c, n->kids[1], n->op_type, &b);
        if (rc == MR_OK) rc = eval_cast(c, n->kids[2], n->op_type, &hi);
        if (rc == MR_OK) rc = k_minmax(c, 1, &a, &b, &t1);
        if (rc == MR_OK) rc = k_minmax(c, 0, &t1, &hi, out);
        vec_free(&hi);
        vec_free(&t1);
        goto done;
    }
    case FN_DAYS_BETWEEN:
        rc = eval_node(c, n->kids[0], &a);
        if (rc == MR_OK && a.type == MR_T_NULL) rc = cast(&a, MR_T_DATE);
        if (rc == MR_OK) rc = eval_node(c, n->kids[1], &b);
        if (rc == MR_OK && b.type == MR_T_NULL) rc = cast(&b, MR_T_DATE);
        if (rc == MR_OK) rc = k_days_between(c, &a, &b, out);
        goto done;
    case FN_CONTAINS:
        rc = eval_cast(c, n->kids[0], MR_T_STRING, &a);
        if (rc == MR_OK) rc = eval_cast(c, n->kids[1], MR_T_STRING, &b);
        if (rc == MR_OK) rc = k_contains(c, &a, &b, out);
        goto done;
    default: break;
    }
    rc = eval_cast(c, n->kids[0], n->op_type, &a);
    if (rc != MR_OK) goto done;
    switch (n->op) {
    case FN_ABS:
    case FN_LOG:
    case FN_EXP:
    case FN_SQRT: rc = k_unary_num(c, n->op, &a, n->type, out); break;
    case FN_LOWER:
    case FN_UPPER: rc = k_case(c, n->op == FN_UPPER, &a, out); break;
    case FN_LENGTH: rc = k_length(c, &a, out); break;
    case FN_HASH: rc = k_hash(c, &a, out); break;
    default: rc = k_date_part(c, n->op, &a, out); break;
    }
done:
    vec_free(&a);
    vec_free(&b);
    return rc;
}

/* Evaluates node n over the batch into *out (owned by the caller; freed here
 * on error). A subtree that reads one dictionary-encoded string column is
 * evaluated once per dictionary entry instead (eval_on_dict). */
static mr_status eval_node(ectx *c, const enode *n, vec *out)
{
    mr_status rc = MR_OK;
    vec a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(out, 0, sizeof(*out));
    if (c->domain_col < 0 && n->dict_col >= 0 && n->kind != E_COL) {
        const mr_column *col = mr_table_column(c->t, c->e->schema_names[n->dict_col]);
        if (col && col->type == MR_T_STRING && col->codes && col->n == c->n && 2 * (col->dict->n + 1) <= c->n)
            return eval_on_dict(c, n, col, out);
    }
    switch (n->kind) {
    case E_LIT: return eval_literal(n, out);
    case E_COL: return load_col(c, n, out);
    case E_NEG:
        rc = eval_cast(c, n->kids[0], n->op_type, &a);
        if (rc != MR_OK) goto done;
        rc = k_unary_num(c, -1, &a, n->type, out);
        break;
    case E_NOT:
        rc = eval_cast(c, n->kids[0], MR_T_BOOL, &a);
        if (rc != MR_OK) goto done;
        rc = k_not(c, &a, out);
        break;
    case E_ARITH:
        rc = eval_cast(c, n->kids[0], n->op_type, &a);
        if (rc != MR_OK) goto done;
        rc = eval_cast(c, n->kids[1], n->op_type, &b);
        if (rc != MR_OK) goto done;
        rc = k_arith(c, n->op, &a, &b, out);
        break;
    case E_CMP:
        rc = eval_cast(c, n->kids[0], n->op_type, &a);
        if (rc != MR_OK) goto done;
        rc = eval_cast(c, n->kids[1], n->op_type, &b);
        if (rc != MR_OK) goto done;
        rc = k_cmp(c, n->op, &a, &b, out);
        break;
    case E_AND:
    case E_OR: rc = eval_andor(c, n, out); break;
    case E_IN: rc = eval_in(c, n, out); break;
    case E_BETWEEN: rc = eval_between(c, n, out); break;
    case E_ISNULL: rc = eval_isnull(c, n, out); break;
    case E_CASE: rc = eval_case(c, n, out); break;
    case E_CALL: rc = eval_call(c, n, out); break;
    }
done:
    vec_free(&a);
    vec_free(&b);
    if (rc != MR_OK) vec_free(out);
    return rc;
}

/* ---- public --------------------------------------------------------------- */

static mr_status eval_root(const mr_expr *e, const mr_table *t, vec *out, uint8_t **ones_out, mr_error *err)
{
    *ones_out = NULL;
    if (!e || !t) return MR_ERR(err, MR_E_INVALID_ARG, "expression: NULL argument");
    if (!e->bound) return MR_ERR(err, MR_E_STATE, "%s: evaluated before it was bound to a schema", e->label);
    uint8_t *ones = mr_malloc(t->n_rows + 1);
    if (!ones) return MR_ERR(err, MR_E_NOMEM, "%s: out of memory", e->label);
    memset(ones, 1, t->n_rows + 1);
    ectx c = {.e = e, .t = t, .n = t->n_rows, .domain_col = -1, .ones = ones, .err = err};
    mr_status rc = eval_node(&c, e->root, out);
    if (rc == MR_E_NOMEM) MR_ERR(err, rc, "%s: out of memory evaluating over %zu rows", e->label, t->n_rows);
    else if (rc != MR_OK) MR_ERR(err, rc, "%s: evaluation failed", e->label);
    if (rc != MR_OK) {
        mr_free(ones);
        return rc;
    }
    *ones_out = ones;
    return MR_OK;
}

mr_status mr_expr_eval_filter(const mr_expr *e, const mr_table *t, uint8_t *mask_out, mr_error *err)
{
    if (e && e->bound && e->root->type != MR_T_BOOL && e->root->type != MR_T_NULL)
        return MR_ERR(err, MR_E_SCHEMA, "%s: a filter must be boolean, got %s", e->label,
                      mr_dtype_name(e->root->type));
    vec r;
    uint8_t *ones;
    mr_status rc = eval_root(e, t, &r, &ones, err);
    if (rc != MR_OK) return rc;
    if (r.type == MR_T_NULL) {
        memset(mask_out, 0, t->n_rows);
    } else {
        const uint8_t *d = r.data, *v = r.valid ? r.valid : ones;
        if (r.is_const) memset(mask_out, d[0] & v[0], t->n_rows);
        else
            for (size_t i = 0; i < t->n_rows; i++) mask_out[i] = d[i] & v[i];
    }
    vec_free(&r);
    mr_free(ones);
    return MR_OK;
}

mr_status mr_expr_eval(const mr_expr *e, const mr_table *t, mr_column **out, mr_error *err)
{
    vec r;
    uint8_t *ones = NULL;
    mr_column *col = NULL;
    mr_buf name;
    mr_buf_init(&name);
    *out = NULL;
    mr_status rc = eval_root(e, t, &r, &ones, err);
    if (rc != MR_OK) return rc;
    size_t n = t->n_rows;
    if (r.type == MR_T_NULL) make_null(&r, MR_T_BOOL);
    if (mr__expr_print_node(e->root, &name) != MR_OK) goto nomem;
    rc = mr_column_new(name.data, r.type, 0, &col, err);
    if (rc != MR_OK) goto done;
    const uint8_t *v = r.valid ? r.valid : ones;
    size_t nulls = 0, step = r.is_const ? 0 : 1;
    for (size_t i = 0; i < n; i++) nulls += !v[i * step];
    if (nulls) {
        col->valid = mr_calloc((n + 7) / 8 ? (n + 7) / 8 : 1, 1);
        if (!col->valid) goto nomem;
        for (size_t i = 0; i < n; i++) col->valid[i >> 3] |= (uint8_t)(v[i * step] << (i & 7));
    }
    col->null_count = nulls;
    if (r.type == MR_T_STRING) {
        size_t total = 0, len;
        for (size_t i = 0; i < n; i++)
            if (v[i * step]) {
                str_at(&r, i * step, &len);
                total += len;
            }
        int64_t *off = mr_malloc((n + 1) * sizeof(int64_t));
        char *bytes = mr_malloc(total ? total : 1);
        if (!off || !bytes) {
            mr_free(off);
            mr_free(bytes);
            goto nomem;
        }
        off[0] = 0;
        size_t p = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i * step]) {
                const char *s = str_at(&r, i * step, &len);
                memcpy(bytes + p, s, len);
                p += len;
            }
            off[i + 1] = (int64_t)p;
        }
        mr_free(col->offsets);
        col->offsets = off;
        col->bytes = bytes;
        col->bytes_len = p;
        col->bytes_cap = total ? total : 1;
    } else {
        size_t w = width(r.type);
        char *d = mr_malloc(n * w > 0 ? n * w : 1);
        if (!d) goto nomem;
        if (r.is_const)
            for (size_t i = 0; i < n; i++) memcpy(d + i * w, r.data, w);
        else if (n)
            memcpy(d, r.data, n * w);
        /* null slots: zero them so the column content is deterministic */
        for (size_t i = 0; i < n; i++)
            if (!v[i * step]) memset(d + i * w, 0, w);
        col->data = d;
    }
    col->n = n;
    col->cap = n;
    *out = col;
    col = NULL;
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory building the result column", e->label);
done:
    mr_column_free(col);
    mr_buf_free(&name);
    vec_free(&r);
    mr_free(ones);
    return rc;
}
