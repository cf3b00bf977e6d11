/* Table transforms: an ordered list of steps (filter, select, rename, derive,
 * join, aggregate, sort, limit) parsed from YAML, type-checked against the
 * input schemas before any row is read, then run over a stream of batches.
 * The pipeline `transform` op and `millrace data query` sit on top of this.
 * docs/transform.md is the step reference.
 *
 * Example (given const mr_value *steps, const mr_table *events, const mr_table *customers):
 *
 *   // the input schemas, known before any row is read
 *   const char *names[] = {"customer_id", "minutes", "day"};
 *   const mr_dtype types[] = {MR_T_INT64, MR_T_FLOAT64, MR_T_DATE};
 *   const char *cnames[] = {"customer_id", "plan"};
 *   const mr_dtype ctypes[] = {MR_T_INT64, MR_T_STRING};
 *   mr_transform_schema in = {NULL, 3, names, types};
 *   mr_transform_schema cust = {"customers", 2, cnames, ctypes};
 *   mr_transform *x = NULL;
 *   const mr_transform_schema *out_schema;
 *   if (mr_transform_parse(steps, &x, &err) != MR_OK ||
 *       mr_transform_bind(x, &in, &cust, 1, &out_schema, &err) != MR_OK) {
 *       mr_log_error(&err);  // "step 3 (derive 'ratio'): unknown column 'minuts'" + hint
 *   } else {
 *       mr_transform_table joins[] = {{"customers", customers}};
 *       mr_transform_opts opts = {.threads = 0, .memory_limit_bytes = 2ull << 30};
 *       mr_table *out = NULL;   // out_schema->n_cols columns
 *       if (mr_transform_run_table(x, events, joins, 1, &opts, &out, NULL, &err) != MR_OK) mr_log_error(&err);
 *       mr_table_free(out);
 *   }
 *   mr_transform_free(x);
 *
 * mr_transform_run does the same over a stream: a source callback hands it
 * batches, a sink callback takes the results.
 *
 * Streaming: filter, select, rename, derive and the probe side of a join run
 * batch by batch, so memory follows the batch size. aggregate and sort are
 * blocking (they read everything, then emit); a limit downstream of only
 * streaming steps stops reading the source once it has its rows. A join's
 * build side (the `with:` table) and an aggregation's groups must fit in
 * memory; past opts.memory_limit_bytes the run fails with MR_E_LIMIT and a
 * message saying how much was needed.
 *
 * Determinism: output rows and bytes do not depend on opts.threads or on the
 * process pool size (fixed-size blocks, partials merged in block order). They
 * do depend on how the source splits its rows into batches only for
 * floating-point sums (mean, sum, std of floats are merged per batch).
 *
 * Ownership: a plan is the caller's (mr_transform_free). Schemas and join
 * tables are borrowed for the call; the plan copies what it keeps of the
 * step values. Batches cross the callbacks by ownership transfer (see the
 * source and sink types); mr_transform_run_table's table is the caller's.
 * Status codes: MR_E_PARSE, MR_E_NOT_FOUND, MR_E_SCHEMA (step definitions,
 * columns, types; the message starts "step N (kind ...)"), MR_E_LIMIT
 * (memory limit), MR_E_STATE (running an unbound plan), MR_E_INVALID_ARG (a
 * NULL plan, input, source or sink), MR_E_NOMEM, and whatever the source
 * and sink return.
 * Thread safety: a plan is not thread-safe; run one plan at a time. The
 * engine itself uses the process pool (mr_parallel_for) inside a run; the
 * callbacks are called on the caller's thread. */
#ifndef MILLRACE_TRANSFORM_H
#define MILLRACE_TRANSFORM_H

#include "millrace/core.h"
#include "millrace/table.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_transform mr_transform;

/* A schema: n_cols (names[i], types[i]). name is the input's name for join
 * inputs (what a join step's `with:` says) and ignored for the main input.
 * All pointers are borrowed for the duration of a call. */
typedef struct mr_transform_schema {
    const char *name;
    size_t n_cols;
    const char *const *col_names;
    const mr_dtype *col_types;
} mr_transform_schema;

/* A named, fully materialised join input (borrowed for the run). */
typedef struct mr_transform_table {
    const char *name;
    const mr_table *table;
} mr_transform_table;

typedef struct mr_transform_opts {
    int threads;                 /* 1: run on the calling thread only; otherwise use the process pool */
    uint64_t memory_limit_bytes; /* join build sides, aggregation groups, sort buffers; 0 = unlimited */
    size_t batch_rows;           /* rows per batch emitted by blocking steps; 0 = 65536 */
} mr_transform_opts;

typedef struct mr_transform_stats {
    uint64_t rows_in;       /* rows read from the source */
    uint64_t batches_in;    /* source calls that returned a batch */
    uint64_t rows_out;      /* rows handed to the sink */
    uint64_t batches_out;   /* sink calls */
    uint64_t peak_bytes;    /* largest memory estimate of a blocking step or join build side */
    int stopped_early;      /* 1: a limit stopped reading the source before it ran dry */
} mr_transform_stats;

/* Source: sets *batch_out to the next batch (the engine takes ownership and
 * frees it), or to NULL at the end. Batches must have the bound input
 * schema's columns (same names and types, any order; extra columns are
 * ignored). Return non-OK (with err set) to abort the run. */
typedef mr_status (*mr_transform_source_fn)(void *ctx, mr_table **batch_out, mr_error *err);
/* Sink: receives each output batch (never empty) and takes ownership of it,
 * also when it fails. Columns follow the bound output schema. */
typedef mr_status (*mr_transform_sink_fn)(void *ctx, mr_table *batch, mr_error *err);

/* Builds a plan from steps, a SEQ of single-key maps as parsed from YAML
 * (include/millrace/value.h); positions in the values are kept for errors.
 * Expressions are parsed here, so syntax errors surface now.
 * Errors: MR_E_PARSE (malformed step, expression syntax; err->line/col point
 * into the YAML when the values carry positions, and the message starts with
 * "step N (kind ...)"), MR_E_NOT_FOUND (unknown step kind, with a hint),
 * MR_E_NOMEM. On success *out owns a new plan; free with mr_transform_free. */
mr_status mr_transform_parse(const mr_value *steps, mr_transform **out, mr_error *err);
void mr_transform_free(mr_transform *x); /* NULL is a no-op */

/* Type-checks every step against the input schema and the join inputs'
 * schemas (joins[k].name must match the steps' `with:`), and computes the
 * output schema, before any row is read. Rebinding replaces the binding.
 * *out_schema (may be NULL) is borrowed from the plan: valid until the next
 * bind or mr_transform_free; its name is NULL.
 * Errors (message "step N (kind 'detail'): ..."): MR_E_NOT_FOUND (unknown
 * column or join input, with a did-you-mean hint), MR_E_SCHEMA (type errors,
 * join key type mismatch, aggregate function on a wrong type, duplicate
 * output column names), MR_E_NOMEM. */
mr_status mr_transform_bind(mr_transform *x, const mr_transform_schema *input, const mr_transform_schema *joins,
                            size_t n_joins, const mr_transform_schema **out_schema, mr_error *err);

/* Runs a bound plan: pulls batches from source, pushes results to sink.
 * joins: the join inputs by name (borrowed; their schemas must match the ones
 * bound). opts may be NULL (defaults), stats may be NULL.
 * Errors: MR_E_STATE (not bound), MR_E_SCHEMA (a batch or join table that
 * does not match the bound schema), MR_E_LIMIT (memory limit: "step 4 (join
 * 'customers'): the join build side needs about 3.2 GiB, the limit is 2 GiB";
 * a join build side over 2^32 - 1 rows), MR_E_NOMEM, and whatever source or
 * sink return. */
mr_status mr_transform_run(mr_transform *x, mr_transform_source_fn source, void *source_ctx,
                           const mr_transform_table *joins, size_t n_joins, mr_transform_sink_fn sink, void *sink_ctx,
                           const mr_transform_opts *opts, mr_transform_stats *stats, mr_error *err);

/* Convenience: runs over an in-memory input (fed in batches of
 * opts->batch_rows rows) and collects the output into a new table
 * (*out, caller frees; it has the output schema's columns even when empty). */
mr_status mr_transform_run_table(mr_transform *x, const mr_table *input, const mr_transform_table *joins,
                                 size_t n_joins, const mr_transform_opts *opts, mr_table **out,
                                 mr_transform_stats *stats, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
