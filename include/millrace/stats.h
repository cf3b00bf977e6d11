/* Per-column statistics of a stream of tables, in one pass: rows, nulls,
 * NaNs, min/max, mean (numbers and bools) and the number of distinct non-null
 * values, counted exactly (a set of 64-bit value hashes) up to
 * MR_STATS_EXACT_MAX distinct values and beyond that estimated by
 * HyperLogLog with 2^MR_STATS_HLL_P one-byte registers (about 0.8% standard
 * error). NaN is counted apart and left out of min/max/mean/distinct; -0.0
 * and 0.0 are one value. `millrace data stats` prints these.
 *
 * Example (given const mr_table *t):
 *
 *   mr_stats *s;
 *   if (mr_stats_new(&s, &err) != MR_OK) return;
 *   if (mr_stats_add(s, t, &err) != MR_OK) {   // once per batch of a stream
 *       mr_log_error(&err);
 *       mr_stats_free(s);
 *       return;
 *   }
 *   for (size_t j = 0; j < mr_stats_n_cols(s); j++) {
 *       mr_stats_column c;
 *       mr_stats_column_get(s, j, &c);
 *       mr_buf lo; mr_buf_init(&lo);
 *       mr_stats_format_bound(s, j, 0, &lo);      // min as mr_column_format prints it
 *       printf("%s %s nulls=%llu distinct%s%.0f min=%s\n", c.name, mr_dtype_name(c.type),
 *              (unsigned long long)c.nulls, c.distinct_exact ? "=" : "~", c.distinct, lo.data ? lo.data : "-");
 *       mr_buf_free(&lo);
 *   }
 *   mr_stats_free(s);
 *
 * Results depend only on the values, not on how they are cut into tables.
 * Ownership: the accumulator is the caller's (mr_stats_free); tables are
 * borrowed for the call; column names are borrowed from the accumulator.
 * Status codes: MR_E_SCHEMA (a table of other columns), MR_E_STATE (after a
 * failed add), MR_E_NOMEM; the formatter also mr_buf's MR_E_LIMIT.
 * Thread safety: one mr_stats per thread; distinct objects are independent. */
#ifndef MILLRACE_STATS_H
#define MILLRACE_STATS_H

#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_STATS_HLL_P 14          /* 2^14 registers per column: ~0.8% standard error */
#define MR_STATS_EXACT_MAX 65536u  /* distinct values counted exactly up to this many */

typedef struct mr_stats mr_stats;

/* One column's statistics so far. */
typedef struct mr_stats_column {
    const char *name;    /* borrowed: valid until mr_stats_free */
    mr_dtype type;
    uint64_t rows;       /* values seen, nulls included */
    uint64_t nulls;
    uint64_t nans;       /* floats: NaN values */
    int has_min_max;     /* some non-null, non-NaN value was seen (mr_stats_format_bound prints it) */
    int has_mean;        /* int64, floats and bools with a value */
    double mean;
    double distinct;     /* distinct non-null, non-NaN values: exact, or the HyperLogLog estimate */
    int distinct_exact;  /* 1 while at most MR_STATS_EXACT_MAX distinct values were seen */
} mr_stats_column;

/* A new, empty accumulator (owned by the caller; mr_stats_free).
 * Errors: MR_E_NOMEM. */
mr_status mr_stats_new(mr_stats **out, mr_error *err);
/* Adds every row of t (borrowed for the call). The first table fixes the
 * columns (names and types); later tables must have the same number of
 * columns with the same types (MR_E_SCHEMA). Errors: MR_E_SCHEMA, MR_E_NOMEM
 * (then s is sticky-errored: later calls return MR_E_STATE). */
mr_status mr_stats_add(mr_stats *s, const mr_table *t, mr_error *err);
/* Rows added so far. */
uint64_t mr_stats_rows(const mr_stats *s);
/* Columns (0 until the first table). */
size_t mr_stats_n_cols(const mr_stats *s);
/* Fills *out for column j < mr_stats_n_cols(s). */
void mr_stats_column_get(const mr_stats *s, size_t j, mr_stats_column *out);
/* Appends column j's min (is_max 0) or max (1) to out as mr_column_format
 * prints a value of that type (float32 bounds as float64); appends nothing
 * when the column has no min/max. Errors: MR_E_NOMEM. */
mr_status mr_stats_format_bound(const mr_stats *s, size_t j, int is_max, mr_buf *out);
/* NULL is a no-op. */
void mr_stats_free(mr_stats *s);

#ifdef __cplusplus
}
#endif
#endif
