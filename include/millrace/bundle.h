/* Model bundles: one file holding everything needed to score raw rows — the
 * input schema, the fitted features transform, the model, its compiled
 * predictor, a metrics snapshot and the lineage (run, stage key, artifact
 * ids, git commit). docs/bundle.md specifies the format byte by byte.
 *
 * A bundle is data: loading parses and checks it, never executes anything
 * from it. Every section carries an xxh3-128 checksum that is verified on
 * every load; corrupt, truncated or wrong-version files are refused with
 * MR_E_CORRUPT naming the section that failed.
 *
 * Example (given const mr_model *model, const mr_features *fx, const mr_table *raw_rows):
 *
 *   mr_bundle_build bb;
 *   mr_bundle_build_init(&bb);
 *   bb.model = model; bb.features = fx; bb.name = "churn";
 *   if (mr_bundle_save(&bb, "model.mrb", &err) != MR_OK) { mr_log_error(&err); return; }
 *
 *   mr_bundle *b;
 *   if (mr_bundle_load("model.mrb", &b, &err) != MR_OK) { mr_log_error(&err); return; }
 *   double *pred = NULL;
 *   size_t k;
 *   if (mr_bundle_predict_table(b, raw_rows, 0, 0, &pred, &k, &err) == MR_OK)   // raw_rows->n_rows * k
 *       printf("%s = %.3f\n", mr_bundle_output_name(b, 0), pred[0]);
 *   mr_free(pred);
 *   mr_bundle_free(b);
 *
 * Prediction has exactly one path, mr_bundle_predict_table: raw table ->
 * mr_features_apply -> the model's float matrix -> the compiled predictor.
 * `millrace predict`, `millrace serve` and the evaluate op all call it, so
 * they agree bit for bit with mr_model_predict_table after
 * mr_features_apply.
 *
 * Ownership: a bundle is the caller's (mr_bundle_free); it owns copies of
 * everything it was loaded from (the bytes are read during the call), and
 * its accessors (inputs, output names, model, features, manifest and
 * metrics JSON, version id) return views borrowed from it until
 * mr_bundle_free. A build struct only borrows what it points to, for the
 * call. Prediction arrays are the caller's (mr_free).
 * Status codes: MR_E_CORRUPT (a bad bundle: magic, version, a section's
 * bounds or checksum, naming the section), MR_E_NOT_FOUND / MR_E_IO /
 * MR_E_LIMIT (reading the file: over 4 GiB is refused), MR_E_INVALID_ARG (a
 * build without a model), MR_E_SCHEMA (schemas that do not fit; what ONNX
 * cannot express), MR_E_PARSE (a value that does not fit an input; metrics
 * that are not a JSON object), MR_E_NOMEM.
 * Thread safety: a loaded bundle is immutable; any number of threads may
 * read it. mr_bundle_predict_table uses the core pool, so call it from one
 * thread at a time per process (the server's batcher does). */
#ifndef MILLRACE_BUNDLE_H
#define MILLRACE_BUNDLE_H

#include "millrace/core.h"
#include "millrace/features.h"
#include "millrace/model.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_BUNDLE_MAGIC "MRBUNDLE"
#define MR_BUNDLE_VERSION 1u
#define MR_BUNDLE_MAX_SECTIONS 16
#define MR_BUNDLE_MAX_BYTES ((size_t)1 << 32) /* 4 GiB: larger files are refused */

/* Section ids: append-only, stored in files. */
typedef enum mr_bundle_section_id {
    MR_BSEC_MANIFEST = 1, /* JSON: schema, outputs, objective, metrics snapshot, lineage */
    MR_BSEC_FEATURES = 2, /* MRFT bytes (mr_features_save); optional */
    MR_BSEC_MODEL = 3,    /* mr_model_to_bytes */
    MR_BSEC_COMPILED = 4, /* MRGP bytes (mr_gbdt_predictor_to_bytes); gbdt only */
    MR_BSEC_METRICS = 5,  /* JSON object; optional */
    MR_BSEC_PROFILE = 6,  /* JSON: the inputs' training profile (millrace/profile.h); optional */
    MR_BSEC_SERVICE = 7,  /* JSON: the feature service the model was trained on (mr_bundle_service); optional */
} mr_bundle_section_id;
const char *mr_bundle_section_name(uint32_t id); /* "manifest", ..., "?" (static) */

/* What a bundle is built from (all borrowed during the call). */
typedef struct mr_bundle_build {
    const mr_model *model;          /* required */
    const mr_features *features;    /* NULL: the model reads raw columns */
    const char *metrics_json;       /* a JSON object, or NULL */
    const char *profile_json;       /* mr_profile_build's document over the bundle's inputs, or NULL */
    const char *service_json;       /* the feature service section (docs/bundle.md), or NULL */
    const char *name;               /* free text, or NULL */
    int64_t run_id;                 /* lineage; 0 = none */
    const char *stage;              /* producing stage, or NULL */
    const char *stage_key;          /* its cache key, or NULL */
    const char *git_commit;         /* or NULL */
    const char *const *artifact_names; /* inputs: "stages.train.out", ... */
    const char *const *artifact_ids;   /* their artifact ids (may hold NULLs) */
    size_t n_artifacts;
} mr_bundle_build;
void mr_bundle_build_init(mr_bundle_build *b); /* zeroes b */

/* Appends the bundle bytes to out. The same inputs always give the same
 * bytes (no timestamps). Errors: MR_E_INVALID_ARG (no model), MR_E_SCHEMA
 * (a model feature that the features transform does not produce, naming
 * it), MR_E_PARSE (metrics not a JSON object), MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_bundle_write(const mr_bundle_build *b, mr_buf *out, mr_error *err);
mr_status mr_bundle_save(const mr_bundle_build *b, const char *path, mr_error *err); /* atomic; also MR_E_IO */

typedef struct mr_bundle mr_bundle;

/* Loads and verifies: header and section table checksum, each section's
 * bounds and checksum, then each section's contents (the compiled predictor
 * is also rebuilt from the model section and must match byte for byte).
 * Errors: MR_E_CORRUPT ("bundle.mrb: section 'model': checksum mismatch"),
 * MR_E_NOT_FOUND (no such file), MR_E_IO, MR_E_LIMIT (over 4 GiB),
 * MR_E_NOMEM. *out is the caller's. */
mr_status mr_bundle_load(const char *path, mr_bundle **out, mr_error *err);
mr_status mr_bundle_from_bytes(const void *data, size_t len, mr_bundle **out, mr_error *err);
void mr_bundle_free(mr_bundle *b); /* NULL is a no-op */

/* One raw input column the bundle expects. */
typedef struct mr_bundle_input {
    const char *name;
    mr_dtype type;   /* the training type (FLOAT64 for bundles without a features transform) */
    int categorical; /* read as a category key (strings, ints, bools) */
    int required;    /* 0: no model feature depends on it; absent = all null */
} mr_bundle_input;

/* Accessors (pure reads; views borrowed until mr_bundle_free). */
size_t mr_bundle_n_inputs(const mr_bundle *b);
const mr_bundle_input *mr_bundle_input_at(const mr_bundle *b, size_t i); /* borrowed */
ssize_t mr_bundle_input_index(const mr_bundle *b, const char *name);    /* -1 if absent */
size_t mr_bundle_n_outputs(const mr_bundle *b);
const char *mr_bundle_output_name(const mr_bundle *b, size_t k); /* "prediction" or "prediction_<k>" */
const mr_model *mr_bundle_model(const mr_bundle *b);
const mr_features *mr_bundle_features(const mr_bundle *b);   /* NULL if none */
const char *mr_bundle_manifest_json(const mr_bundle *b);     /* NUL-terminated */
const char *mr_bundle_metrics_json(const mr_bundle *b);      /* "{}" if none */
const struct mr_profile *mr_bundle_profile(const mr_bundle *b); /* the inputs' training profile; NULL if none */
const char *mr_bundle_version_id(const mr_bundle *b);        /* 32 hex: xxh3-128 of the whole file */

/* ---- the feature service -----------------------------------------------------
 * A bundle packaged with online stores (the package stage's `online:`)
 * records which of its inputs each store provides, by which entity keys:
 * `millrace serve` then takes requests that carry only the keys (and the
 * other inputs) and looks the features up (docs/featurestore.md). The
 * section is JSON:
 *   {"missing": "default" | "reject",
 *    "stores": [{"store": "out/users/online.mrfs",
 *                "keys": [{"name": "user", "type": "string"}, ...]}, ...],
 *    "features": [{"name": "clicks_1h", "type": "int64", "view": "clicks",
 *                  "store": 0, "default": 0}, ...]}
 * Each feature is an input of the bundle served by one store (its index);
 * "default" (optional, a number, string or bool fitting the input) is what a
 * missing or expired value reads as under "missing": "default" (absent:
 * null, as the training set's point-in-time join gave). */
typedef struct mr_bundle_service_feature {
    const char *name; /* an input of the bundle and a feature of its store */
    mr_dtype type;    /* its type in the store */
    const char *view; /* the store's view it belongs to */
    size_t store;     /* the store that serves it (index into stores) */
    size_t input;     /* its index among the bundle's inputs */
    mr_cell dflt;     /* its default (kind MR_CELL_NULL: null); strings borrowed from the bundle */
} mr_bundle_service_feature;

typedef struct mr_bundle_service_store {
    const char *store; /* the store's path as the package stage saw it (relative to its workspace), or its
                          Redis location */
    size_t n_keys;
    const char *const *key_names;
    const mr_dtype *key_types;
} mr_bundle_service_store;

typedef struct mr_bundle_service {
    int reject_missing; /* "missing": "reject": a missing or expired value fails the request (422) */
    size_t n_stores;
    const mr_bundle_service_store *stores;
    size_t n_features;
    const mr_bundle_service_feature *features;
} mr_bundle_service;

const mr_bundle_service *mr_bundle_service_of(const mr_bundle *b); /* NULL: no feature service */

typedef struct mr_bundle_section_info {
    uint32_t id;
    const char *name;
    uint64_t offset, length;
    char hash[MR_HASH_HEX_LEN + 1];
} mr_bundle_section_info;
size_t mr_bundle_n_sections(const mr_bundle *b);
void mr_bundle_section(const mr_bundle *b, size_t i, mr_bundle_section_info *out); /* i < n_sections; out->name static */

/* ---- fitting values to the input schema ------------------------------------
 * The one implementation of the rules by which raw values become a bundle's
 * inputs. mr_bundle_predict_table, `millrace predict` (files, through
 * mr_bundle_conform_table) and `millrace serve` (JSON values, through
 * mr_bundle_coerce_value) all use it, so they accept and refuse the same
 * values and say so in the same words:
 *   row 10: column 'x1': expected a number, got "oops"
 *   row 0: input column 'x2' is missing
 *
 * Each input has a column type, mr_bundle_input_column_type: FLOAT64 for a
 * numeric input; STRING, INT64 or BOOL for a categorical one (its training
 * type). A value fits an input as follows; "text" is a field of a text file
 * read as a string (CSV), which is parsed:
 *
 *   input              typed value              text
 *   numeric            NUM, INT, BOOL (1 / 0)   a number that parses completely
 *                                               (blanks around it allowed; "nan" is missing)
 *   STRING category    STR                      the text as it is
 *   INT64 category     INT                      a decimal integer
 *   BOOL category      BOOL                     true or false
 *
 * NULL fits every input (a missing value). A value that is absent (no
 * column, no JSON key) fits an input no model feature depends on (required
 * = 0) and reads as NULL; for a required input it is an error. A whole table
 * column fits as it is when its type does (numeric inputs: BOOL, INT64,
 * FLOAT64, FLOAT32; categorical ones: STRING, INT64, BOOL; an all-null
 * column fits any): the features transform reads those types directly. */

/* The column type input `in` is converted to (see above). */
mr_dtype mr_bundle_input_column_type(const mr_bundle_input *in);

/* One value that does not fit its input. */
typedef struct mr_bundle_bad {
    uint64_t row;         /* the row as the caller numbers it (mr_bundle_conform_table: row_base + index) */
    size_t input;         /* the input's index (mr_bundle_input_at) */
    const char *column;   /* its name (borrowed from the bundle) */
    int missing;          /* 1: a required input has no value; expected and got are then unset */
    const char *expected; /* "a number", "a string", "an integer category", "true or false" (static) */
    char got[80];         /* the value as written: "\"oops\"" (quoted, cut at 64 bytes), "7", "true", "an array" */
    const char *text;     /* a string value's bytes (borrowed from the caller's cell or column), else NULL */
    size_t text_len;
} mr_bundle_bad;

/* "row 10: column 'x1': expected a number, got \"oops\"" or "row 3: input
 * column 'x2' is missing" into buf (always NUL-terminated). */
void mr_bundle_bad_format(const mr_bundle_bad *bad, char *buf, size_t buf_len);

/* Converts value v for input i (< mr_bundle_n_inputs) and appends it to
 * col, a column of mr_bundle_input_column_type(input i); col NULL only
 * checks. v NULL: the value is absent. text: a STR value is text to parse.
 * Returns MR_OK (it fits: appended), MR_E_PARSE (it does not: *bad filled
 * except bad->row, which the caller sets; nothing appended) or MR_E_NOMEM.
 * Allocates only through col; reentrant. */
mr_status mr_bundle_coerce_value(const mr_bundle *b, size_t i, const mr_cell *v, int text, mr_column *col,
                                 mr_bundle_bad *bad);

/* How mr_bundle_conform_table treats values that do not fit. */
typedef struct mr_bundle_conform_opts {
    int text;           /* STRING columns of non-string inputs hold text to parse (CSV); else they do not fit */
    uint64_t row_base;  /* what row 0 of the table is called in messages (1 = count from one) */
    /* NULL: the bad value of the lowest row fails the call (MR_E_PARSE, the
     * message of mr_bundle_bad_format, key = the column). Else called once
     * per bad value (inputs in schema order, rows ascending; bad is borrowed
     * for the call), the value reads as NULL and the call goes on. */
    void (*on_bad)(void *ctx, const mr_bundle_bad *bad);
    void *ctx;
    uint8_t *bad_rows;  /* optional, t->n_rows bytes: set to 1 for each row holding a bad value */
} mr_bundle_conform_opts;
void mr_bundle_conform_opts_init(mr_bundle_conform_opts *o); /* text 0, row_base 0, no callback */

/* Makes t fit the input schema, in place: each text column converted
 * (o->text) replaces t's column (the old one is freed; other columns, and
 * columns the bundle does not read, stay as they are), and an absent input
 * no model feature depends on is appended as an all-null column. o may be
 * NULL (typed values only, the first bad value fails). On an error t is
 * unchanged (after MR_E_NOMEM it may hold some converted columns; it stays
 * a valid table).
 * Errors: MR_E_NOT_FOUND (a required input column is absent, key = it),
 * MR_E_SCHEMA (a column whose type cannot fit, key = it: "input column 'x1'
 * has type date; the bundle expects a number (float64)"), MR_E_PARSE (a bad
 * value, without on_bad), MR_E_NOMEM. */
mr_status mr_bundle_conform_table(const mr_bundle *b, mr_table *t, const mr_bundle_conform_opts *o, mr_error *err);

/* The prediction path: n_rows * n_outputs doubles, row-major (caller frees).
 * t's columns must fit the schema as they are (a table built by
 * mr_bundle_conform_table does; text is not parsed here); optional inputs
 * missing from t read as null. raw: margins. num_threads: 0 = all pool
 * threads; the result never depends on it. Errors: as
 * mr_bundle_conform_table without text, and those of the features transform
 * and the predictor. */
mr_status mr_bundle_predict_table(const mr_bundle *b, const mr_table *t, int raw, int num_threads, double **out,
                                  size_t *n_outputs, mr_error *err);

/* Writes the bundle as an ONNX model (ir_version 8; opsets "" 17 and
 * ai.onnx.ml 3) to out (docs/bundle.md, "ONNX export"): input "input" float
 * [N, n_inputs] in the bundle's input order (plus "input_cat", string, when
 * the model uses a categorical input), output "score" float [N, K]. The
 * features transform runs in the graph; gbdt models become a
 * TreeEnsembleRegressor (+ Sigmoid / Softmax) whose splits, float thresholds
 * and missing-value directions match the compiled predictor; linear models
 * Imputer + LinearRegressor (+ Sigmoid). Refused with MR_E_SCHEMA naming the
 * cause: a hash encoding (naming the column), a categorical vocabulary
 * holding the empty string, an objective ONNX cannot express. Appends to
 * out; MR_E_NOMEM. */
mr_status mr_bundle_export_onnx(const mr_bundle *b, mr_buf *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
