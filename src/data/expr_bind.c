/* Binding: resolves column references against a schema and infers and
 * checks the type of every node (the rules are in docs/expressions.md).
 * Evaluation relies on what this records: node->type, node->op_type (the
 * type operands are converted to before an operator runs) and dict_col. */
#include "expr_int.h"
#include "millrace/value.h"

#include <string.h>

typedef struct binder {
    mr_expr *e;
    const char *const *names;
    const mr_dtype *types;
    size_t n_cols;
    mr_error *err;
} binder;

static int is_num(mr_dtype t) { return t == MR_T_INT64 || t == MR_T_FLOAT64; }

/* Common type two operands are compared (or coalesced) in; 0 if none. */
static int common_type(mr_dtype a, mr_dtype b, mr_dtype *out)
{
    if (a == MR_T_NULL) {
        *out = b == MR_T_NULL ? MR_T_INT64 : b;
        return 1;
    }
    if (b == MR_T_NULL || a == b) {
        *out = a;
        return 1;
    }
    if (is_num(a) && is_num(b)) {
        *out = MR_T_FLOAT64;
        return 1;
    }
    if ((a == MR_T_DATE && b == MR_T_TIMESTAMP) || (a == MR_T_TIMESTAMP && b == MR_T_DATE)) {
        *out = MR_T_TIMESTAMP;
        return 1;
    }
    return 0;
}

static mr_status type_err(binder *b, const enode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static mr_status type_err(binder *b, const enode *at, const char *fmt, ...)
{
    char what[MR_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (b->err && !mr_error_is_set(b->err)) {
        MR_ERR(b->err, MR_E_SCHEMA, "%s: %s", b->e->label, what);
        b->err->col = at->pos;
    }
    return MR_E_SCHEMA;
}

static mr_status cmp_err(binder *b, const enode *at, const enode *x, const enode *y, const char *where)
{
    char dx[160], dy[160];
    mr__expr_describe(x, dx, sizeof(dx));
    mr__expr_describe(y, dy, sizeof(dy));
    return type_err(b, at, "cannot compare %s with %s%s", dx, dy, where);
}

static mr_status want(binder *b, const enode *at, const enode *arg, int ok, const char *who, const char *what)
{
    if (ok) return MR_OK;
    char d[160];
    mr__expr_describe(arg, d, sizeof(d));
    return type_err(b, at, "%s needs %s, got %s", who, what, d);
}

/* CASE and if(): kids are (condition, value) pairs plus an optional last
 * ELSE value (odd count); conditions are boolean, values share a type. */
static mr_status bind_case(binder *b, enode *n, const char *who)
{
    mr_dtype t = MR_T_NULL;
    size_t n_pairs = n->n_kids / 2;
    for (size_t i = 0; i < n_pairs; i++) {
        const enode *c = n->kids[2 * i];
        mr_status rc = want(b, n, c, c->type == MR_T_BOOL || c->type == MR_T_NULL, who, "a boolean condition");
        if (rc != MR_OK) return rc;
    }
    const enode *first = NULL;
    for (size_t i = 0; i < n->n_kids; i++) {
        int is_value = (i % 2 == 1) || (n->n_kids % 2 == 1 && i == n->n_kids - 1);
        if (!is_value) continue;
        const enode *v = n->kids[i];
        if (!first && v->type != MR_T_NULL) first = v;
        if (common_type(t, v->type, &t)) continue;
        char d0[160], d1[160];
        mr__expr_describe(first ? first : v, d0, sizeof(d0));
        mr__expr_describe(v, d1, sizeof(d1));
        return type_err(b, v, "%s results must share a type: %s and %s", who, d0, d1);
    }
    n->type = n->op_type = t == MR_T_NULL ? MR_T_INT64 : t;
    return MR_OK;
}

/* Which single string column (if any) the subtree at n reads, so that
 * evaluation can work on that column's dictionary codes. */
static void set_dict_col(enode *n)
{
    if (n->kind == E_LIT) {
        n->dict_col = DICT_CONST;
    } else if (n->kind != E_COL) {
        int d = DICT_CONST;
        for (size_t i = 0; i < n->n_kids; i++) {
            int k = n->kids[i]->dict_col;
            if (k == DICT_CONST) continue;
            if (k == DICT_NONE || (d != DICT_CONST && d != k)) d = DICT_NONE;
            else d = k;
        }
        n->dict_col = d;
    }
}

/* A column reference: its index and type in the schema, or MR_E_NOT_FOUND
 * with the closest name as a hint. */
static mr_status bind_column(binder *b, enode *n)
{
    for (size_t i = 0; i < b->n_cols; i++) {
        if (!b->names[i] || strcmp(b->names[i], n->str)) continue;
        n->col = (int)i;
        n->col_type = b->types[i];
        /* FLOAT32 and DECIMAL columns are read as float64 values */
        n->type = n->col_type == MR_T_FLOAT32 || n->col_type == MR_T_DECIMAL ? MR_T_FLOAT64 : n->col_type;
        n->dict_col = n->type == MR_T_STRING ? (int)i : DICT_NONE;
        return MR_OK;
    }
    const char *near = mr_closest(n->str, b->names, b->n_cols);
    if (b->err && !mr_error_is_set(b->err)) {
        MR_ERR(b->err, MR_E_NOT_FOUND, "%s: unknown column '%s'", b->e->label, n->str);
        b->err->col = n->pos;
        if (near) mr_error_hint(b->err, "did you mean '%s'?", near);
    }
    return MR_E_NOT_FOUND;
}

/* + - * / %: numbers; '/' is float64, the others int64 unless an operand
 * is float64. */
static mr_status bind_arith(binder *b, enode *n)
{
    const enode *k0 = n->kids[0], *k1 = n->kids[1];
    static const char *const names[] = {"+", "-", "*", "/", "%"};
    int ok0 = is_num(k0->type) || k0->type == MR_T_NULL, ok1 = is_num(k1->type) || k1->type == MR_T_NULL;
    if (!ok0 || !ok1) {
        char d0[160], d1[160];
        mr__expr_describe(k0, d0, sizeof(d0));
        mr__expr_describe(k1, d1, sizeof(d1));
        return type_err(b, n, "cannot apply '%s' to %s and %s", names[n->op], d0, d1);
    }
    if (n->op == OP_DIV) n->type = MR_T_FLOAT64;
    else if (k0->type == MR_T_FLOAT64 || k1->type == MR_T_FLOAT64) n->type = MR_T_FLOAT64;
    else n->type = MR_T_INT64;
    n->op_type = n->type;
    return MR_OK;
}

/* A function call: what each function takes and gives (docs/expressions.md). */
static mr_status bind_call(binder *b, enode *n)
{
    mr_status rc;
    const enode *k0 = n->kids[0], *k1 = n->n_kids > 1 ? n->kids[1] : NULL;
    char who[32];
    snprintf(who, sizeof(who), "%s()", mr__expr_fn_name(n->op));
    mr_dtype t0 = k0->type;
    int null0 = t0 == MR_T_NULL;
    switch (n->op) {
    case FN_ABS:
        rc = want(b, n, k0, is_num(t0) || null0, who, "a number");
        if (rc != MR_OK) return rc;
        n->type = n->op_type = null0 ? MR_T_INT64 : t0;
        return MR_OK;
    case FN_LOG:
    case FN_EXP:
    case FN_SQRT:
        rc = want(b, n, k0, is_num(t0) || null0, who, "a number");
        if (rc != MR_OK) return rc;
        n->type = n->op_type = MR_T_FLOAT64;
        return MR_OK;
    case FN_LOWER:
    case FN_UPPER:
    case FN_LENGTH:
        rc = want(b, n, k0, t0 == MR_T_STRING || null0, who, "a string");
        if (rc != MR_OK) return rc;
        n->op_type = MR_T_STRING;
        n->type = n->op == FN_LENGTH ? MR_T_INT64 : MR_T_STRING;
        return MR_OK;
    case FN_CONTAINS:
        rc = want(b, n, k0, t0 == MR_T_STRING || null0, who, "string arguments");
        if (rc != MR_OK) return rc;
        rc = want(b, n, k1, k1->type == MR_T_STRING || k1->type == MR_T_NULL, who, "string arguments");
        if (rc != MR_OK) return rc;
        n->op_type = MR_T_STRING;
        n->type = MR_T_BOOL;
        return MR_OK;
    case FN_COALESCE: {
        mr_dtype t = MR_T_NULL;
        for (size_t i = 0; i < n->n_kids; i++) {
            if (common_type(t, n->kids[i]->type, &t)) continue;
            char d0[160], d1[160];
            mr__expr_describe(n->kids[0], d0, sizeof(d0));
            mr__expr_describe(n->kids[i], d1, sizeof(d1));
            return type_err(b, n->kids[i], "coalesce() arguments must share a type: %s and %s", d0, d1);
        }
        /* all NULL: the call is NULL; give it a concrete type */
        n->type = n->op_type = t == MR_T_NULL ? MR_T_INT64 : t;
        return MR_OK;
    }
    case FN_IF: return bind_case(b, n, "if()");
    case FN_CLIP: {
        mr_dtype t = MR_T_NULL;
        for (size_t i = 0; i < n->n_kids; i++) {
            mr_dtype ti = n->kids[i]->type;
            rc = want(b, n, n->kids[i], is_num(ti) || ti == MR_T_NULL, who, "numbers");
            if (rc != MR_OK) return rc;
            if (ti == MR_T_FLOAT64 || t == MR_T_FLOAT64) t = MR_T_FLOAT64;
            else if (ti == MR_T_INT64) t = MR_T_INT64;
        }
        n->type = n->op_type = t == MR_T_NULL ? MR_T_INT64 : t;
        return MR_OK;
    }
    case FN_DAYS_BETWEEN:
        for (size_t i = 0; i < 2; i++) {
            mr_dtype ti = n->kids[i]->type;
            rc = want(b, n, n->kids[i], ti == MR_T_DATE || ti == MR_T_TIMESTAMP || ti == MR_T_NULL, who,
                      "dates or timestamps");
            if (rc != MR_OK) return rc;
        }
        n->op_type = MR_T_DATE;
        n->type = MR_T_INT64;
        return MR_OK;
    case FN_HASH:
        n->op_type = null0 ? MR_T_INT64 : t0;
        n->type = MR_T_INT64;
        return MR_OK;
    case FN_YEAR:
    case FN_MONTH:
    case FN_DAY:
    case FN_DAYOFWEEK:
    case FN_HOUR:
    case FN_MINUTE:
    case FN_SECOND:
        rc = want(b, n, k0, t0 == MR_T_DATE || t0 == MR_T_TIMESTAMP || null0, who, "a date or timestamp");
        if (rc != MR_OK) return rc;
        n->op_type = null0 ? MR_T_DATE : t0;
        n->type = MR_T_INT64;
        return MR_OK;
    default: break;
    }
    return type_err(b, n, "internal: unhandled expression node");
}

static mr_status bind_node(binder *b, enode *n)
{
    mr_status rc;
    for (size_t i = 0; i < n->n_kids; i++) {
        rc = bind_node(b, n->kids[i]);
        if (rc != MR_OK) return rc;
    }
    set_dict_col(n);
    enode *k0 = n->n_kids > 0 ? n->kids[0] : NULL, *k1 = n->n_kids > 1 ? n->kids[1] : NULL;
    switch (n->kind) {
    case E_LIT: n->type = n->lit_type; return MR_OK;
    case E_COL: return bind_column(b, n);
    case E_NEG:
        rc = want(b, n, k0, is_num(k0->type) || k0->type == MR_T_NULL, "unary '-'", "a number");
        if (rc != MR_OK)
            return rc;
        n->type = n->op_type = k0->type == MR_T_NULL ? MR_T_INT64 : k0->type;
        return MR_OK;
    case E_NOT:
        rc = want(b, n, k0, k0->type == MR_T_BOOL || k0->type == MR_T_NULL, "NOT", "a boolean");
        if (rc != MR_OK)
            return rc;
        n->type = MR_T_BOOL;
        return MR_OK;
    case E_AND:
    case E_OR:
        for (size_t i = 0; i < n->n_kids; i++) {
            mr_dtype t = n->kids[i]->type;
            rc = want(b, n, n->kids[i], t == MR_T_BOOL || t == MR_T_NULL, n->kind == E_AND ? "AND" : "OR",
                      "boolean operands");
            if (rc != MR_OK) return rc;
        }
        n->type = MR_T_BOOL;
        return MR_OK;
    case E_ARITH: return bind_arith(b, n);
    case E_CMP:
        if (!common_type(k0->type, k1->type, &n->op_type)) return cmp_err(b, n, k0, k1, "");
        n->type = MR_T_BOOL;
        return MR_OK;
    case E_IN:
    case E_BETWEEN: {
        mr_dtype t = k0->type;
        for (size_t i = 1; i < n->n_kids; i++)
            if (!common_type(t, n->kids[i]->type, &t))
                return cmp_err(b, n->kids[i], k0, n->kids[i], n->kind == E_IN ? " in IN list" : " in BETWEEN");
        n->op_type = t == MR_T_NULL ? MR_T_INT64 : t;
        n->type = MR_T_BOOL;
        return MR_OK;
    }
    case E_ISNULL: n->type = MR_T_BOOL; return MR_OK;
    case E_CASE: return bind_case(b, n, "CASE");
    case E_CALL: return bind_call(b, n);
    }
    return type_err(b, n, "internal: unhandled expression node");
}

mr_status mr_expr_bind(mr_expr *e, const char *const *names, const mr_dtype *types, size_t n_cols, unsigned flags,
                       mr_error *err)
{
    mr_status rc = MR_OK;
    char **nn = NULL;
    mr_dtype *nt = NULL;
    if (!e || !e->root) return MR_ERR(err, MR_E_INVALID_ARG, "expression: nothing to bind");
    e->bound = 0;
    binder b = {e, names, types, n_cols, err};
    rc = bind_node(&b, e->root);
    if (rc != MR_OK) goto fail;
    if ((flags & MR_EXPR_FILTER) && e->root->type != MR_T_BOOL && e->root->type != MR_T_NULL) {
        char d[160];
        mr__expr_describe(e->root, d, sizeof(d));
        rc = type_err(&b, e->root, "must be boolean, got %s", d);
        goto fail;
    }
    nn = mr_calloc(n_cols ? n_cols : 1, sizeof(char *));
    nt = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_dtype));
    if (!nn || !nt) goto nomem;
    for (size_t i = 0; i < n_cols; i++) {
        nn[i] = mr_strdup(names[i] ? names[i] : "");
        if (!nn[i]) goto nomem;
        nt[i] = types[i];
    }
    for (size_t i = 0; i < e->n_schema; i++) mr_free(e->schema_names[i]);
    mr_free(e->schema_names);
    mr_free(e->schema_types);
    e->schema_names = nn;
    e->schema_types = nt;
    e->n_schema = n_cols;
    e->bound = 1;
    return MR_OK;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory", e->label);
    if (nn)
        for (size_t i = 0; i < n_cols; i++) mr_free(nn[i]);
fail:
    mr_free(nn);
    mr_free(nt);
    return rc;
}

mr_status mr_expr_bind_table(mr_expr *e, const mr_table *t, unsigned flags, mr_error *err)
{
    size_t n = t ? t->n_cols : 0;
    const char **names = mr_calloc(n ? n : 1, sizeof(char *));
    mr_dtype *types = mr_calloc(n ? n : 1, sizeof(mr_dtype));
    mr_status rc;
    if (!names || !types) {
        rc = MR_ERR(err, MR_E_NOMEM, "expression: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = t->cols[i]->name;
        types[i] = t->cols[i]->type;
    }
    rc = mr_expr_bind(e, names, types, n, flags, err);
done:
    mr_free(names);
    mr_free(types);
    return rc;
}

mr_dtype mr_expr_type(const mr_expr *e) { return e && e->bound ? e->root->type : MR_T_NULL; }
