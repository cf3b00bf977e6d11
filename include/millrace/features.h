/* Feature transforms: a pipeline of steps (impute, standardize, minmax,
 * log1p, clip, bucketize, onehot, ordinal, hash, target_encode, drop) fitted
 * on a training table and applied, unchanged, to any other table or to one
 * row at a time. Training, evaluation, `predict` and `serve` all call the
 * same per-value code, so they cannot diverge.
 *
 * Example (given const mr_value *steps, const mr_table *train, const mr_table *test):
 *
 *   // steps: the `steps:` sequence as parsed from YAML (mr_yaml_parse, spec.h)
 *   mr_features_spec *spec = NULL;
 *   mr_features *fx = NULL;
 *   mr_table *train_x = NULL, *test_x = NULL;
 *   if (mr_features_spec_parse(steps, "features.yaml", &spec, &err) != MR_OK ||
 *       mr_features_fit_apply_train(spec, train, "churn", &fx, &train_x, &err) != MR_OK ||
 *       mr_features_apply(fx, test, &test_x, &err) != MR_OK) {
 *       mr_log_error(&err);   // "features.yaml:3:15: features: column 'plna' is not in the table" + hint
 *   } else {
 *       for (size_t j = 0; j < mr_features_n_outputs(fx); j++) {
 *           const mr_features_output *o = mr_features_output_at(fx, j);
 *           printf("%s <- %s%s\n", o->name, o->source, o->categorical ? " (categorical)" : "");   // "plan=basic <- plan"
 *       }
 *       mr_buf b;
 *       mr_buf_init(&b);
 *       if (mr_features_save(fx, &b) == MR_OK) printf("%zu bytes\n", b.len);   // the "MRFT" artifact
 *       mr_buf_free(&b);
 *   }
 *   mr_table_free(test_x);
 *   mr_table_free(train_x);
 *   mr_features_free(fx);
 *   mr_features_spec_free(spec);
 *
 * The YAML (docs/features.md has the full reference):
 *   - impute:        {columns: [age, income], strategy: median, indicator: true}
 *   - standardize:   {columns: numeric}
 *   - onehot:        {columns: [plan], top_k: 5, other: true}
 *   - ordinal:       {columns: [city], max_categories: 100}
 *   - hash:          {columns: [url], n_features: 16, seed: 1, signed: false}
 *   - target_encode: {columns: [zip], label: churn, folds: 5, smoothing: 10, seed: 0}
 *   - drop:          {columns: [customer_id]}
 * `columns` is a list of names or one of the selectors `numeric`,
 * `categorical`, `all`.
 *
 * Inputs and outputs:
 * - Each column of the training table (except the label and target_encode
 *   labels) is one input: BOOL/INT64/FLOAT columns are numeric, STRING
 *   columns categorical; an INT64/BOOL column named explicitly by an
 *   encoding step (onehot, ordinal, hash, target_encode) is categorical (its
 *   values as decimal text / "true"/"false"). Numeric inputs with no step
 *   pass through.
 * - No column is lost without a word: every column is an input, a label,
 *   kept (mr_features_spec_set_keep: an id the caller copies unchanged into
 *   its outputs; not an input unless onehot/hash/target_encode encode it) or
 *   named by `drop`. A STRING column that no step encodes, or a DATE or
 *   TIMESTAMP column, that is neither kept nor dropped fails the fit
 *   (MR_E_SCHEMA naming it and the encodings that fit).
 * - The output is a table of FLOAT64 columns, one group per input in the
 *   training table's column order, with no validity bitmap: a missing value
 *   is NaN. Names are stable: `age`, `age#missing` (impute indicator),
 *   `plan=basic` ... `plan=other` (onehot; sorted by value, then other),
 *   `city` (ordinal codes, categorical), `url#hash0` ... (hash), `zip#te`
 *   (target encoding).
 *
 * Ownership: a spec and a fitted transform are the caller's
 * (mr_features_spec_free, mr_features_free; NULL is a no-op); neither
 * borrows from the values or tables it was made from. Tables returned are
 * the caller's (mr_table_free). Inputs and outputs (mr_features_input_at,
 * mr_features_output_at) and their names are borrowed from the transform.
 * Status codes: MR_E_PARSE (the YAML: an unknown step or key, with line:col
 * and a hint), MR_E_NOT_FOUND (a named column is absent, with a hint),
 * MR_E_SCHEMA (a step that cannot take a column's type, a column that
 * would be lost, duplicate outputs), MR_E_INVALID_ARG (bad step values; a
 * row of the wrong shape), MR_E_CORRUPT (a bad artifact), MR_E_LIMIT,
 * MR_E_NOMEM.
 * Thread safety: a fitted mr_features is immutable; any number of threads
 * may apply it concurrently. mr_features_apply uses the core pool (do not
 * call it from inside an mr_parallel_for callback); mr_features_apply_row
 * never does. */
#ifndef MILLRACE_FEATURES_H
#define MILLRACE_FEATURES_H

#include "millrace/table.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_FEATURES_MAGIC "MRFT"
#define MR_FEATURES_VERSION 1u

/* ---- spec --------------------------------------------------------------- */
typedef struct mr_features_spec mr_features_spec;

/* Parses the `steps` sequence: each item is a one-key mapping
 * {step_name: {params}} (a step without params may be the bare name, e.g.
 * `- log1p: {columns: [x]}`). source names the file for error positions
 * (may be NULL). Unknown step names and keys are MR_E_PARSE with a
 * did-you-mean hint and line:col; two steps with one output name are
 * MR_E_SCHEMA. *out is owned by the caller (it copies what it keeps). */
mr_status mr_features_spec_parse(const mr_value *steps, const char *source, mr_features_spec **out, mr_error *err);
void mr_features_spec_free(mr_features_spec *s);
size_t mr_features_spec_n_steps(const mr_features_spec *s);
/* Declares the columns the caller copies unchanged into its outputs (the
 * features op's `keep:`, ids kept for joining): keep is a column name or a
 * sequence of them (positions are used in errors), NULL for none; replaces
 * an earlier list. At fit time a kept column must exist (MR_E_NOT_FOUND);
 * it is not an input, and selectors skip it, unless onehot, hash or
 * target_encode encode it (their outputs have other names, so the raw
 * column and its encoding both appear). A step that names a kept column
 * and would output a feature under the column's own name is MR_E_SCHEMA
 * with a hint saying which to remove: here, for the steps where that needs
 * no data (standardize, minmax, log1p, clip, bucketize, ordinal; error
 * position = the name in the step's list, key = the column), and at fit
 * time for a numeric column under impute. Call it after
 * mr_features_spec_parse; on error the keep list is empty.
 * Errors: MR_E_PARSE (not a name, a name twice; line:col), MR_E_SCHEMA,
 * MR_E_NOMEM. */
mr_status mr_features_spec_set_keep(mr_features_spec *s, const mr_value *keep, mr_error *err);

/* ---- fitted transform ----------------------------------------------------- */
typedef struct mr_features mr_features;

typedef struct mr_features_input {
    const char *name;  /* column name in the tables the transform is applied to */
    int categorical;   /* 1: read as a category key; 0: read as a number */
    mr_dtype train_type; /* type of the column in the training table (informational) */
} mr_features_input;

typedef struct mr_features_output {
    const char *name;      /* output column name, unique */
    const char *source;    /* input column it comes from */
    size_t input;          /* index of that input (mr_features_input_at) */
    int categorical;       /* 1: integer codes the trainer must treat as categorical (ordinal) */
    uint32_t n_categories; /* categorical: codes are 0 .. n_categories-1 (the last = unseen/other); else 0 */
} mr_features_output;

/* Fits spec on train. label (may be NULL) is excluded from the inputs and is
 * the default label of target_encode steps.
 * Errors: MR_E_NOT_FOUND (a column the spec, keep or label names is absent;
 * hint with the closest name; error position = the name's line:col),
 * MR_E_SCHEMA (a step that cannot take the column's type, a column encoded
 * twice, duplicate output names, a column that would be lost: a string no
 * step encodes or a date, neither kept nor dropped; key = the column, hint =
 * how to exclude it), MR_E_INVALID_ARG, MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_features_fit(const mr_features_spec *spec, const mr_table *train, const char *label, mr_features **out,
                          mr_error *err);
/* Fits, and returns the transformed training table in which every
 * target_encode output holds out-of-fold values (each row encoded with
 * statistics from the other folds, so a row's own label never reaches its
 * features). Every other output equals mr_features_apply(fitted, train).
 * Errors as mr_features_fit; on failure neither output is set. */
mr_status mr_features_fit_apply_train(const mr_features_spec *spec, const mr_table *train, const char *label,
                                      mr_features **fitted_out, mr_table **train_out, mr_error *err);
void mr_features_free(mr_features *f);

/* Accessors (pure reads; what they return is borrowed from f). */
size_t mr_features_n_inputs(const mr_features *f);
const mr_features_input *mr_features_input_at(const mr_features *f, size_t i); /* borrowed; NULL past the end */
size_t mr_features_n_outputs(const mr_features *f);
const mr_features_output *mr_features_output_at(const mr_features *f, size_t j); /* borrowed; NULL past the end */

/* Applies f to t: a new table of mr_features_n_outputs FLOAT64 columns and
 * t->n_rows rows (the caller frees it). Runs over fixed blocks of rows on the
 * core pool; the result never depends on the thread count.
 * Errors: MR_E_NOT_FOUND (an input column is absent; did-you-mean hint),
 * MR_E_SCHEMA (a numeric input is not BOOL/INT64/FLOAT, a categorical input
 * is FLOAT), MR_E_NOMEM. */
mr_status mr_features_apply(const mr_features *f, const mr_table *t, mr_table **out, mr_error *err);

/* ---- single row ---------------------------------------------------------- */
typedef enum mr_cell_kind {
    MR_CELL_NULL = 0,
    MR_CELL_NUM = 1,  /* num */
    MR_CELL_INT = 2,  /* i (also DATE days and TIMESTAMP microseconds) */
    MR_CELL_STR = 3,  /* str[0..len), need not be NUL-terminated */
    MR_CELL_BOOL = 4, /* i: 0 or 1 */
    MR_CELL_OTHER = 5, /* a value of no kind an input takes (a JSON array or object); str/len may name it */
} mr_cell_kind;

typedef struct mr_cell {
    mr_cell_kind kind;
    double num;
    int64_t i;
    const char *str; /* borrowed */
    size_t len;
} mr_cell;

/* One row: cells[k] is the value of mr_features_input_at(f, k). */
typedef struct mr_row_view {
    const mr_cell *cells;
    size_t n_cells; /* must equal mr_features_n_inputs */
} mr_row_view;

/* Row i of column c as a cell (the batch path reads tables through this);
 * a string cell borrows the column's bytes. Cannot fail. */
void mr_features_cell(const mr_column *c, size_t i, mr_cell *out);

/* Applies f to one row: out_vec[j] (j < mr_features_n_outputs) gets output
 * j, bit-identical to row r of mr_features_apply on a table holding the same
 * values. Numeric inputs take NUM, INT, BOOL or NULL cells; categorical
 * inputs take STR, INT, BOOL, NULL, or NUM holding an integer.
 * Errors: MR_E_INVALID_ARG (wrong cell count, a cell kind the input cannot
 * take; key names the input). Allocates nothing; reentrant. */
mr_status mr_features_apply_row(const mr_features *f, const mr_row_view *row, double *out_vec, mr_error *err);

/* ---- artifact ------------------------------------------------------------ */
/* Appends the versioned binary form of f (docs/features.md, "File format")
 * to out. The same fit always gives the same bytes. MR_E_NOMEM / MR_E_LIMIT
 * (no mr_error). */
mr_status mr_features_save(const mr_features *f, mr_buf *out);
/* Loads and fully validates an artifact. Errors: MR_E_CORRUPT naming what
 * failed (bad magic, unsupported version, checksum, truncation at a named
 * field, out-of-range enum or count, unsorted vocabulary, inconsistent output
 * list), MR_E_NOMEM. data is read during the call only; *out is the
 * caller's. */
mr_status mr_features_load(const void *data, size_t len, mr_features **out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
