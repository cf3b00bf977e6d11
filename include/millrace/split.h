/* Dataset splits: assign every row of a table to one of 2..8 named parts
 * ("train", "valid", "test", ...) by one of four methods, deterministically.
 *
 * Example (given const mr_table *table):
 *
 *   mr_split_spec s;
 *   mr_split_spec_init(&s);
 *   s.method = MR_SPLIT_STRATIFIED;
 *   s.label = "churn";
 *   s.seed = 42;
 *   mr_split_spec_add_part(&s, "train", 0.7);
 *   mr_split_spec_add_part(&s, "valid", 0.15);
 *   mr_split_spec_add_part(&s, "test", 0.15);
 *   mr_table *parts[MR_SPLIT_MAX_PARTS];
 *   if (mr_split_table(&s, table, parts, &err) != MR_OK) {
 *       mr_log_error(&err);   // "split: fractions sum to 0.9, not 1"
 *       return;
 *   }
 *   // parts[0] is "train", parts[1] "valid", parts[2] "test"
 *   printf("%zu training rows\n", parts[0]->n_rows);
 *   for (size_t k = 0; k < s.n_parts; k++) mr_table_free(parts[k]);
 *
 * Methods (docs/features.md, "split", has the full reference):
 * - RANDOM: part of row i = cumulative-fraction bucket of
 *   u = top53(xxh3_64(le64(i), seed)) / 2^53. A pure function of (seed, row
 *   index within the dataset): ROW ORDER MATTERS (reorder the rows and the
 *   assignment changes). Proportions are binomial, not exact.
 * - STRATIFIED: needs the whole label column. Rows of each class (each
 *   distinct label value; nulls form one class of their own; float labels
 *   compare by value, -0 == 0, NaN == NaN) are ordered by
 *   (xxh3_64(le64(i), seed), i) and cut at round(cumfrac_k * n_class), so each
 *   part gets its fraction of each class within one row.
 * - GROUP: part = cumulative-fraction bucket of u = top53(xxh3_64(key, seed))
 *   / 2^53, key = the group value's canonical bytes (string bytes; integers
 *   and timestamps as decimal text; dates as day numbers; bools "true"/
 *   "false"), so a group value never lands in two parts, and the same value
 *   lands in the same part in any file (the integer 42 and the string "42"
 *   agree). All null group values form one group. Float group columns are
 *   rejected. Proportions are per group, not per row.
 * - TIME: rows are ordered by the time column (DATE, TIMESTAMP, INT64 or
 *   FLOAT64/32). With cut-offs c_1 < ... < c_{P-1}, row t goes to the part
 *   k = #{c_j <= t}: part 0 is strictly before c_1, the last part at or after
 *   c_{P-1}. Without cut-offs, c_k is the time value at sorted position
 *   round(cumfrac_k * n) (row quantiles, not fractions of the time range), so
 *   ties never straddle a cut and the fractions are approximate when the
 *   column has ties. Nulls (and NaN) in the time column are an error.
 * The assignment never depends on the thread count.
 *
 * Ownership: a spec lives in caller storage and owns nothing: it borrows
 * its part names and column names (from the caller, or from the value tree
 * mr_split_spec_from_value read). The part tables are the caller's
 * (mr_table_free each).
 * Status codes: MR_E_PARSE (a malformed split mapping, with line:col and a
 * hint), MR_E_INVALID_ARG (parts, fractions, cut-offs, column types; a
 * null time value naming the row), MR_E_NOT_FOUND (a column absent, with a
 * hint), MR_E_LIMIT (more than 8 parts, over 2^32 - 1 rows), MR_E_NOMEM.
 *
 * Thread safety: all functions are reentrant; spec and table are only read. */
#ifndef MILLRACE_SPLIT_H
#define MILLRACE_SPLIT_H

#include "millrace/table.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_SPLIT_MAX_PARTS 8
#define MR_SPLIT_FRACTION_TOL 1e-9 /* |sum(fractions) - 1| allowed */

/* Append-only (may appear in artifacts and cache keys). */
typedef enum mr_split_method {
    MR_SPLIT_RANDOM = 0,
    MR_SPLIT_STRATIFIED = 1,
    MR_SPLIT_GROUP = 2,
    MR_SPLIT_TIME = 3,
} mr_split_method;

const char *mr_split_method_name(mr_split_method m); /* "random", ... */

typedef struct mr_split_spec {
    mr_split_method method;
    size_t n_parts;                               /* 2..MR_SPLIT_MAX_PARTS */
    const char *names[MR_SPLIT_MAX_PARTS];        /* part names, unique (borrowed) */
    double fractions[MR_SPLIT_MAX_PARTS];         /* each in [0,1], sum 1 +- 1e-9; unused by TIME with cut-offs */
    const char *label;                            /* STRATIFIED: class column (borrowed) */
    const char *group;                            /* GROUP: group column (borrowed) */
    const char *time;                             /* TIME: time column (borrowed) */
    size_t n_cutoffs;                             /* TIME: 0 = by fractions, else n_parts - 1 */
    const char *cutoffs[MR_SPLIT_MAX_PARTS - 1];  /* TIME: "2024-01-01", "2024-01-01T12:00:00Z" or a number, increasing */
    uint64_t seed;
} mr_split_spec;

/* Zeroes s (method RANDOM, no parts, seed 0). */
void mr_split_spec_init(mr_split_spec *s);
/* Appends a part; MR_E_LIMIT past MR_SPLIT_MAX_PARTS (no mr_error). name is
 * borrowed. */
mr_status mr_split_spec_add_part(mr_split_spec *s, const char *name, double fraction);
/* Index of the part called name, or -1. */
int mr_split_part_index(const mr_split_spec *s, const char *name);

/* Fills s from a YAML mapping (the `split` op's params):
 *   method: random | stratified | group | time      (default random)
 *   parts: {train: 0.7, valid: 0.15, test: 0.15}    (fractions in (0, 1], source order)
 *          or [train, test] with `cutoffs` (time only)
 *   label: COL | group: COL | time: COL              (as the method needs)
 *   cutoffs: ["2024-01-01", ...]                      (time; n_parts - 1 of them)
 *   seed: INT                                         (default 0)
 * Also checks what mr_split_check checks without a table: part names and
 * count, the fractions' sum, the column the method needs, and that the
 * cut-offs are all dates/timestamps or all numbers, strictly increasing.
 * Errors: MR_E_PARSE (unknown key or method, with a did-you-mean hint; a
 * value of the wrong kind; a fraction outside (0, 1]) and MR_E_INVALID_ARG
 * (the checks above), each with err->line/col of the offending node (a
 * part's value, a part name's key, a cut-off, the method) when v carries
 * positions. s borrows strings from v: keep v alive while s is used. */
mr_status mr_split_spec_from_value(const mr_value *v, mr_split_spec *s, mr_error *err);

/* Validates s against t: part count and names, fractions in [0, 1]
 * (MR_E_INVALID_ARG "fractions sum to 0.9, not 1"), columns (MR_E_NOT_FOUND
 * with a did-you-mean hint), column types and cut-offs (MR_E_INVALID_ARG). */
mr_status mr_split_check(const mr_split_spec *s, const mr_table *t, mr_error *err);

/* Assigns each row of t to a part.
 * [out] part_out: t->n_rows bytes, part index per row (caller storage).
 * Errors: those of mr_split_check; MR_E_INVALID_ARG for a null time value
 * (naming the row); MR_E_LIMIT over 2^32 - 1 rows; MR_E_NOMEM. */
mr_status mr_split_assign(const mr_split_spec *s, const mr_table *t, uint8_t *part_out, mr_error *err);

/* Assigns and materialises the parts: parts_out[k] (k < s->n_parts) is a new
 * table with t's columns and the rows of part k in their original order; the
 * caller frees each. On failure no table is returned (all set to NULL). */
mr_status mr_split_table(const mr_split_spec *s, const mr_table *t, mr_table **parts_out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
