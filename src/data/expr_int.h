/* Internals shared by the expression files: the node tree (expr_parse.c
 * builds and prints it, expr_bind.c types it, expr_eval.c and expr_prune.c
 * walk it). Not part of the public API. */
#ifndef MILLRACE_EXPR_INT_H
#define MILLRACE_EXPR_INT_H

#include "millrace/expr.h"

typedef enum enode_kind {
    E_LIT = 0,  /* literal: type + value */
    E_COL,      /* column reference */
    E_NEG,      /* unary minus: kids[0] */
    E_NOT,      /* NOT kids[0] */
    E_ARITH,    /* kids[0] op kids[1], op = OP_* */
    E_CMP,      /* kids[0] op kids[1], op = CMP_* */
    E_AND,      /* n-ary, n_kids >= 2 (chains are flattened) */
    E_OR,       /* n-ary, n_kids >= 2 */
    E_IN,       /* kids[0] [NOT] IN (kids[1..]) */
    E_ISNULL,   /* kids[0] IS [NOT] NULL */
    E_BETWEEN,  /* kids[0] [NOT] BETWEEN kids[1] AND kids[2] */
    E_CALL,     /* function op = FN_*, kids = arguments */
    E_CASE,     /* CASE: kids = cond0, val0, cond1, val1, ... [, else] (odd n_kids: has ELSE) */
} enode_kind;

enum { OP_ADD = 0, OP_SUB, OP_MUL, OP_DIV, OP_MOD };
enum { CMP_EQ = 0, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };
enum {
    FN_ABS = 0, FN_LOG, FN_EXP, FN_SQRT, FN_LOWER, FN_UPPER, FN_LENGTH, FN_CONTAINS, FN_COALESCE,
    FN_YEAR, FN_MONTH, FN_DAY, FN_IF, FN_CLIP, FN_DAYS_BETWEEN, FN_HASH, FN_DAYOFWEEK, FN_HOUR, FN_MINUTE,
    FN_SECOND, FN__COUNT
};

/* dict_col values besides a column index */
#define DICT_NONE (-1)  /* reads no single string column (or reads more) */
#define DICT_CONST (-2) /* reads no column at all */

typedef struct enode enode;
struct enode {
    enode_kind kind;
    int op;           /* OP_*, CMP_*, FN_* */
    int negated;      /* NOT IN, IS NOT NULL, NOT BETWEEN */
    long pos;         /* 1-based byte column of the node's first token */
    int depth;        /* 1 for leaves */
    /* literal (E_LIT): lit_type MR_T_NULL/BOOL/INT64/FLOAT64/STRING/DATE/TIMESTAMP */
    mr_dtype lit_type;
    int64_t i;        /* BOOL 0/1, INT64, DATE days, TIMESTAMP microseconds */
    double f;         /* FLOAT64 */
    char *str;        /* STRING bytes (NUL-terminated copy), E_COL name */
    size_t str_len;   /* STRING length in bytes */
    /* set by binding */
    mr_dtype type;     /* result type (MR_T_NULL for the NULL literal) */
    mr_dtype op_type;  /* E_CMP/E_IN/E_BETWEEN: type operands are compared in;
                          E_ARITH/E_NEG: type computed in; E_CALL: argument type */
    int col;           /* E_COL: index in the bind schema */
    mr_dtype col_type; /* E_COL: declared column type (FLOAT32 stays FLOAT32) */
    int dict_col;      /* schema index of the only (string) column read, DICT_NONE, DICT_CONST */
    size_t n_kids;
    enode **kids;
};

struct mr_expr {
    enode *root;
    char *label;       /* "filter", "expression", ... */
    char **cols;       /* distinct column names, first-appearance order */
    size_t n_cols;
    int bound;
    size_t n_schema;   /* columns in the bind schema */
    char **schema_names; /* copy of the bind schema's names (eval looks them up) */
    mr_dtype *schema_types;
};

/* expr_parse.c */
const char *mr__expr_fn_name(int fn);
int mr__expr_fn_lookup(const char *name, size_t len); /* -1 if unknown */
mr_status mr__expr_print_node(const enode *n, mr_buf *out);
/* "int64 column 'x'", "string literal 'a'", "float64 expression 'x + 1'" */
void mr__expr_describe(const enode *n, char *buf, size_t buf_len);
void mr__expr_format_ts(int64_t us, char *buf, size_t buf_len);
void mr__expr_format_date(int64_t days, char *buf, size_t buf_len);

/* Saturating DATE (days) -> TIMESTAMP (microseconds). */
static inline int64_t mr__days_to_us(int64_t days)
{
    const int64_t k = INT64_C(86400000000);
    if (days > INT64_MAX / k) return INT64_MAX;
    if (days < INT64_MIN / k) return INT64_MIN;
    return days * k;
}

#endif
