/* Filter and derive expressions: a small SQL-like language parsed into a
 * tree, type-checked against a table schema, evaluated column-at-a-time over
 * an mr_table, and checked against per-column min/max statistics so that a
 * reader can skip shards and row groups that cannot match.
 *
 * Example (given const mr_table *table):
 *
 *   mr_expr *e = NULL;
 *   const char *text = "country = 'FR' AND age BETWEEN 18 AND 65";
 *   if (mr_expr_parse(text, strlen(text), "filter", &e, &err) != MR_OK ||
 *       mr_expr_bind_table(e, table, MR_EXPR_FILTER, &err) != MR_OK) {
 *       mr_log_error(&err);   // "filter: unknown column 'contry'" + hint
 *   } else {
 *       uint8_t *mask = mr_malloc(table->n_rows ? table->n_rows : 1);
 *       if (mask && mr_expr_eval_filter(e, table, mask, &err) == MR_OK) {
 *           size_t kept = 0;
 *           for (size_t i = 0; i < table->n_rows; i++) kept += mask[i];
 *           printf("%zu rows match\n", kept);
 *       }
 *       mr_free(mask);
 *   }
 *   mr_expr_free(e);
 *
 * The language is described in docs/expressions.md. In short: literals
 * (42, 1.5, 'it''s', true, NULL, DATE '2024-01-31', TIMESTAMP '2024-01-31
 * 12:00:00'), columns (age, "odd name"), + - * / % and unary minus,
 * = != <> < <= > >=, NOT AND OR, IN / NOT IN, IS [NOT] NULL, [NOT] BETWEEN,
 * CASE WHEN ... THEN ... [ELSE ...] END, and the functions abs log exp sqrt
 * lower upper length contains coalesce if clip hash year month day dayofweek
 * hour minute second days_between.
 *
 * Semantics worth knowing (all documented in docs/expressions.md):
 *   - SQL three-valued logic: comparisons with NULL are NULL; NOT NULL is
 *     NULL; AND/OR follow Kleene; a filter keeps only rows that are TRUE.
 *   - x / 0 and x % 0 are NULL (integer and float alike).
 *   - int64 overflow in + - * unary minus and abs() gives NULL, never a
 *     wrapped value and never an error.
 *   - int64 / int64 is float64; int mixed with float is float64.
 *
 * Ownership: an expression is the caller's (mr_expr_free); it copies what
 * it keeps of the text and schema, and borrows tables and statistics only
 * for the call. mr_expr_columns' names are borrowed from the expression;
 * columns from mr_expr_eval are the caller's.
 * Status codes: MR_E_PARSE (syntax), MR_E_LIMIT (text or depth caps),
 * MR_E_NOT_FOUND (an unknown column or function, with a hint), MR_E_SCHEMA
 * (a type error, a table that does not match the binding), MR_E_STATE
 * (evaluating an unbound expression), MR_E_INVALID_ARG (binding or printing
 * an empty expression), MR_E_NOMEM.
 * Thread safety: a bound mr_expr is read-only during evaluation and pruning,
 * so several threads may evaluate the same expression over different tables
 * concurrently. Parsing and binding mutate it. */
#ifndef MILLRACE_EXPR_H
#define MILLRACE_EXPR_H

#include "millrace/core.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_expr mr_expr;

/* Input limits: longer text or deeper nesting fails with MR_E_LIMIT. */
#define MR_EXPR_MAX_TEXT ((size_t)1 << 20) /* 1 MiB of expression text */
#define MR_EXPR_MAX_DEPTH 256              /* nesting levels of the tree */

/* Parses text[0..len) (need not be NUL-terminated). label names the
 * expression in messages ("filter" -> "filter: column 12: expected ')' after
 * IN list, got end of input"); NULL means "expression". On success *out owns
 * a new unbound expression; free it with mr_expr_free.
 * Errors: MR_E_PARSE (message names the 1-based byte column, what was
 * expected and what was found; err->col is set too), MR_E_LIMIT, MR_E_NOMEM. */
mr_status mr_expr_parse(const char *text, size_t len, const char *label, mr_expr **out, mr_error *err);
void mr_expr_free(mr_expr *e); /* NULL is a no-op */

/* Flags for mr_expr_bind. */
#define MR_EXPR_FILTER 1u /* the expression must be boolean (or the NULL literal) */

/* Resolves column references against a schema of n_cols (names[i], types[i])
 * and infers the type of every node. Binding again (another schema) replaces
 * the previous binding. The schema order is the index order that
 * mr_expr_prune expects its statistics in. names are copied where needed;
 * nothing is borrowed past the call.
 * Errors: MR_E_NOT_FOUND (unknown column or function; err->hint holds "did
 * you mean 'x'?" when one is close), MR_E_SCHEMA (type errors, e.g.
 * "filter: cannot compare string column 'country' with int64 literal 3"),
 * MR_E_INVALID_ARG (e NULL or empty), MR_E_NOMEM. */
mr_status mr_expr_bind(mr_expr *e, const char *const *names, const mr_dtype *types, size_t n_cols,
                       unsigned flags, mr_error *err);
/* Same, with the table's columns as the schema. */
mr_status mr_expr_bind_table(mr_expr *e, const mr_table *t, unsigned flags, mr_error *err);

/* Result type of a bound expression: MR_T_BOOL, MR_T_INT64, MR_T_FLOAT64,
 * MR_T_STRING, MR_T_DATE, MR_T_TIMESTAMP, or MR_T_NULL for the bare NULL
 * literal. MR_T_NULL also when unbound. */
mr_dtype mr_expr_type(const mr_expr *e);

/* Evaluates a bound boolean expression over every row of t. Columns are
 * looked up by name and must have the types they were bound with.
 * mask_out: (t->n_rows) bytes; 1 where the expression is TRUE, 0 where it is
 * FALSE or NULL. Errors: MR_E_STATE (not bound), MR_E_SCHEMA (not boolean, or
 * a column missing or of another type), MR_E_NOMEM. */
mr_status mr_expr_eval_filter(const mr_expr *e, const mr_table *t, uint8_t *mask_out, mr_error *err);

/* Evaluates a bound expression into a new column of t->n_rows rows, named
 * after the expression's canonical text (rename it freely). Type as
 * mr_expr_type, except that the bare NULL literal gives an all-null BOOL
 * column. Strings come out plain (not dictionary-encoded). The caller owns
 * *out. Errors as mr_expr_eval_filter. */
mr_status mr_expr_eval(const mr_expr *e, const mr_table *t, mr_column **out, mr_error *err);

/* ---- statistics pruning ---------------------------------------------------
 * Per-column statistics of a shard or row group, in the bind schema's order.
 * min and max are bounds: every non-null (and, for floats, non-NaN) value v
 * satisfies min <= v <= max; they need not be attained, so truncated Parquet
 * string bounds are fine as long as they still bound. Which union member is
 * used follows the column type:
 *   BOOL: b (0/1)   INT64: i   DATE: i (days)   TIMESTAMP: i (microseconds)
 *   FLOAT64, FLOAT32: f       STRING: s (borrowed bytes, valid for the call)
 */
typedef union mr_stat_value {
    int b;
    int64_t i;
    double f;
    struct {
        const char *ptr;
        size_t len;
    } s;
} mr_stat_value;

typedef struct mr_col_stats {
    int has_min_max;       /* 0: min/max unknown (or the column is all null) */
    mr_stat_value min;     /* lower bound of the non-null values */
    mr_stat_value max;     /* upper bound of the non-null values */
    int has_null_count;    /* 0: null_count unknown */
    uint64_t null_count;   /* rows that are NULL */
    uint64_t nan_count;    /* float columns: rows that are NaN (not covered by min/max) */
    uint64_t row_count;    /* rows in the shard / row group */
} mr_col_stats;

typedef enum mr_prune {
    MR_PRUNE_SOME = 0, /* unknown: read the rows and filter them */
    MR_PRUNE_NONE = 1, /* no row can be TRUE: skip the shard / row group */
    MR_PRUNE_ALL = 2,  /* every row is TRUE: keep all rows without evaluating */
} mr_prune;

/* Decides what a bound filter can select, given stats[n_cols] in bind-schema
 * order. Conservative: NONE only when no row can be TRUE and ALL only when
 * every row must be TRUE. Anything it cannot reason about (functions,
 * arithmetic, column-vs-column) is SOME. An unbound expression, or n_cols not
 * matching the bound schema, gives SOME. Pure function; never allocates. */
mr_prune mr_expr_prune(const mr_expr *e, const mr_col_stats *stats, size_t n_cols);

/* ---- introspection --------------------------------------------------------*/
/* The distinct column names the expression reads, in order of first
 * appearance (for column pruning). Borrowed: valid until mr_expr_free.
 * Available right after parsing. */
const char *const *mr_expr_columns(const mr_expr *e, size_t *n_out);

/* Appends the canonical text of the expression to out: keywords upper case,
 * function names lower case, AND/OR chains flattened, the fewest parentheses
 * that keep the meaning, '!=' for '<>', single spaces around binary
 * operators, floats in shortest round-trip form, DATE/TIMESTAMP literals in
 * ISO form (timestamps in UTC). parse(print(e)) prints the same text, so
 * the text is fit for cache keys. Errors: MR_E_NOMEM, MR_E_LIMIT (mr_buf
 * cap), MR_E_INVALID_ARG (e NULL or empty); no mr_error. */
mr_status mr_expr_print(const mr_expr *e, mr_buf *out);

#ifdef __cplusplus
}
#endif
#endif
