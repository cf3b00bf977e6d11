/* Internals shared by the transform files: the plan (transform_plan.c parses
 * and binds it), key encoding and parallel helpers (transform_keys.c), the
 * hash join (transform_join.c), the hash aggregation (transform_agg.c) and
 * the driver with the streaming steps and sort (transform_run.c). */
#ifndef MILLRACE_TRANSFORM_INT_H
#define MILLRACE_TRANSFORM_INT_H

#include "millrace/expr.h"
#include <string.h>
#include "millrace/transform.h"

/* Rows per parallel block. Fixed (never derived from the thread count) so
 * that block-ordered merges give the same bytes for any -j; 16 Ki rows keep
 * a block's local hash table (2 x 16 Ki x 4 bytes) in L2. */
#define XF_BLOCK ((size_t)16384)
#define XF_NONE UINT32_MAX

typedef enum xf_kind { XS_FILTER = 0, XS_SELECT, XS_RENAME, XS_DERIVE, XS_JOIN, XS_AGGREGATE, XS_SORT, XS_LIMIT } xf_kind;
typedef enum xf_how { XJ_INNER = 0, XJ_LEFT, XJ_SEMI, XJ_ANTI } xf_how;
typedef enum xf_aggfn {
    AG_COUNT_ROWS = 0, /* count() */
    AG_COUNT,          /* count(x): non-null values */
    AG_SUM,
    AG_MEAN,
    AG_MIN,
    AG_MAX,
    AG_FIRST,
    AG_LAST,
    AG_STD,            /* sample standard deviation (n - 1) */
    AG_COUNT_DISTINCT,
} xf_aggfn;

typedef struct xf_schema {
    size_t n;
    char **names;
    mr_dtype *types;
    mr_strindex ix; /* names -> first index of that name (find_col) */
} xf_schema;

typedef struct xf_agg {
    char *name;        /* output column */
    xf_aggfn fn;
    mr_expr *arg;      /* NULL for count() */
    mr_dtype arg_type; /* bound: type of arg's values (float32 reads as float64) */
    mr_dtype out_type;
} xf_agg;

typedef struct xf_step {
    xf_kind kind;
    int index;          /* 1-based position in the list */
    long line, col;     /* YAML position of the step, 0 if unknown */
    char *label;        /* "step 3 (join 'customers')" */
    mr_expr *expr;      /* filter */
    size_t n_names;     /* select / rename / derive / join keys / aggregate keys / sort keys */
    char **names;
    char **names2;      /* rename: new names */
    mr_expr **exprs;    /* derive: one per name */
    long *lines, *cols; /* positions of the entries */
    int *desc;          /* sort: 1 = descending */
    char *with;         /* join input name */
    xf_how how;
    size_t n_aggs;
    xf_agg *aggs;
    uint64_t limit;
    /* set by binding */
    xf_schema in, out;
    size_t *key_idx;    /* join / aggregate / sort keys: index in `in` */
    size_t *rkey_idx;   /* join: key index in the right schema */
    xf_schema right;    /* join: the right input's schema */
    size_t *rkeep;      /* join: right columns appended to the output (inner / left) */
    size_t n_rkeep;
} xf_step;

struct mr_transform {
    size_t n_steps;
    xf_step *steps;
    int bound;
    xf_schema input;
    mr_transform_schema out_pub; /* views of the last step's out schema */
};

/* transform_plan.c */
void mr__xf_schema_free(xf_schema *s);
mr_status mr__xf_schema_copy(xf_schema *dst, const xf_schema *src);
/* "3.2 GiB" */
void mr__xf_format_bytes(uint64_t n, char *buf, size_t buf_len);
/* Memory a table holds (values, validity, offsets, string bytes, dictionaries). */
uint64_t mr__xf_table_bytes(const mr_table *t);

/* transform_keys.c: parallel helper. threads == 1 runs the blocks in order
 * on the calling thread; otherwise mr_parallel_for. */
void mr__xf_parallel(int threads, size_t n, size_t block, mr_range_fn fn, void *ctx);

/* Row keys of several columns encoded into comparable bytes: per column a
 * tag byte (0 null, 1 value) then, for values, 1 (bool), 4 (date, LE) or 8
 * (int64, timestamp, float64 and float32 widened, LE; -0.0 -> 0.0, NaN ->
 * one canonical NaN) bytes, or for strings a 4-byte LE length then the
 * bytes. Equal keys <=> equal bytes (for the same column types). */
typedef struct xf_keys {
    size_t n;          /* rows */
    uint64_t *off;     /* (n + 1) offsets into buf */
    uint8_t *buf;
    uint64_t *hash;    /* (n) xxh3-64 of each row's bytes */
    uint8_t *has_null; /* (n) 1 when any key column is null in the row */
} xf_keys;
mr_status mr__xf_keys_build(xf_keys *k, const mr_column *const *cols, size_t n_cols, size_t n_rows, int threads,
                            mr_error *err);
void mr__xf_keys_free(xf_keys *k);
static inline int mr__xf_keys_eq(const xf_keys *a, size_t i, const xf_keys *b, size_t j)
{
    uint64_t la = a->off[i + 1] - a->off[i], lb = b->off[j + 1] - b->off[j];
    return a->hash[i] == b->hash[j] && la == lb && !memcmp(a->buf + a->off[i], b->buf + b->off[j], la);
}
/* Appends row i of src to dst (same type, or dst plain for a dictionary src). */
mr_status mr__xf_append_row(mr_column *dst, const mr_column *src, size_t i);
/* Copy of the rows idx[0..n) of c; XF_NONE rows become NULL. */
mr_status mr__xf_take_nullable(const mr_column *c, const uint32_t *idx, size_t n, mr_column **out, mr_error *err);

/* transform_join.c */
typedef struct xf_join xf_join;
mr_status mr__xf_join_build(const xf_step *s, const mr_table *right, const mr_transform_opts *o, uint64_t *bytes_out,
                            xf_join **out, mr_error *err);
mr_status mr__xf_join_probe(const xf_step *s, xf_join *j, const mr_table *batch, const mr_transform_opts *o,
                            mr_table **out, mr_error *err);
void mr__xf_join_free(xf_join *j);

/* transform_agg.c */
typedef struct xf_aggstate xf_aggstate;
mr_status mr__xf_agg_new(const xf_step *s, xf_aggstate **out, mr_error *err);
mr_status mr__xf_agg_add(const xf_step *s, xf_aggstate *a, const mr_table *batch, const mr_transform_opts *o,
                         mr_error *err);
mr_status mr__xf_agg_finish(const xf_step *s, xf_aggstate *a, mr_table **out, mr_error *err);
uint64_t mr__xf_agg_bytes(const xf_aggstate *a);
void mr__xf_agg_free(xf_aggstate *a);

#endif
