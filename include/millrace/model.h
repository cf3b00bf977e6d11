/* One handle over millrace's model kinds (gradient-boosted trees, linear):
 * training from tables, loading any model file by its magic, predicting on
 * tables. This is what `millrace train`, `millrace model` and the `train` op
 * call, so they cannot disagree.
 *
 * Example (given const mr_table *train, const mr_table *valid, const mr_table *test):
 *
 *   mr_train_opts o;
 *   mr_train_opts_init(&o);
 *   o.label = "churned";
 *   mr_value *params = mr_value_new(MR_V_MAP);         // or millrace.yaml's params: mapping
 *   if (mr_value_map_set(params, "num_iterations", mr_value_new_int(200)) != MR_OK ||
 *       mr_value_map_set(params, "learning_rate", mr_value_new_float(0.05)) != MR_OK) {
 *       mr_value_free(params);
 *       return;
 *   }
 *   o.params = params;
 *   mr_model *m = NULL;
 *   double *pred = NULL;
 *   size_t n_out;
 *   if (mr_model_train(train, valid, &o, &m, &err) != MR_OK ||
 *       mr_model_predict_table(m, test, 0, &pred, &n_out, &err) != MR_OK)   // test->n_rows * n_out
 *       mr_log_error(&err);   // e.g. "unknown gbdt parameter 'num_leafs'" + "did you mean 'num_leaves'?"
 *   else
 *       printf("%s model, first prediction %.3f\n", mr_model_kind_name(m), pred[0]);
 *   mr_free(pred);
 *   mr_model_free(m);
 *   mr_value_free(params);
 *
 * Ownership: a model is the caller's (mr_model_free, NULL is a no-op);
 * prediction and matrix arrays it returns are the caller's (mr_free).
 * Tables, options and params are borrowed for the call (mr_model_train
 * writes the [out] fields of its options). Names and the underlying
 * gbdt/linear models are borrowed from the model.
 * Status codes: MR_E_INVALID_ARG (no label, an unknown kind, a bad or
 * unknown parameter with its line:col and a did-you-mean hint),
 * MR_E_NOT_FOUND (a label or feature column absent, with a hint),
 * MR_E_SCHEMA (a column a model cannot take: strings need encoding),
 * MR_E_FAILED (training diverged), MR_E_CORRUPT (not a model file, or a
 * damaged one), MR_E_NOT_FOUND / MR_E_IO (files, the bin cache),
 * MR_E_LIMIT, MR_E_NOMEM.
 * Thread safety: a trained or loaded model is immutable: any number of
 * threads may predict with it. Training and the batch paths use the core
 * pool (do not call them from inside an mr_parallel_for job);
 * mr_model_predict_row never does. */
#ifndef MILLRACE_MODEL_H
#define MILLRACE_MODEL_H

#include "millrace/core.h"
#include "millrace/gbdt.h"   /* mr_gbdt_model (mr_model_gbdt) */
#include "millrace/linear.h" /* mr_linear_model (mr_model_linear) */
#include "millrace/table.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_model_kind { MR_MODEL_GBDT = 1, MR_MODEL_LINEAR = 2 } mr_model_kind;

/* Called after every boosting round (gbdt) or once at the end (linear).
 * names: the n metric names ("auc", "binary_logloss", ...); train/valid:
 * their values (NaN when not computed), borrowed for the call. Non-zero
 * return stops training. Called on the training thread. */
typedef int (*mr_train_round_fn)(void *ctx, int iteration, int n, const char *const *names, const double *train,
                                 const double *valid, double elapsed_s);

typedef struct mr_train_opts {
    const char *kind;                 /* "gbdt" (default) or "linear" */
    const char *label;                /* label column (required) */
    const mr_value *params;           /* MAP: LightGBM names and aliases -> typed values (gbdt), or the
                                         linear names; NULL = defaults. Errors carry the values' positions. */
    const char *const *features;      /* feature columns; NULL = every column but label and exclude */
    size_t n_features;
    const char *const *exclude;       /* columns never used as features (ids, timestamps) */
    size_t n_exclude;
    const char *const *categorical;   /* int64 columns to split as categories (gbdt) */
    size_t n_categorical;
    int smoke;                        /* a handful of rounds on at most 10,000 rows */
    int rounds_total;                 /* [out] boosting rounds the training will run (set before the first on_round) */
    int num_threads;                  /* 0 = all pool threads (a param num_threads overrides) */
    mr_train_round_fn on_round;
    void *on_round_ctx;
    /* gbdt: a directory where binned matrices are kept by a key over the
     * data's content and the binning params, so a second training on the
     * same data and binning skips binning. NULL = no cache. */
    const char *bin_cache_dir;
    int binned_from_cache;            /* [out] 1 when the training matrix came from the cache */
    int bin_only;                     /* gbdt with bin_cache_dir: bin (filling the cache) and stop; *out = NULL */
    /* gbdt fast tier (docs/metrics.md): with a validation set, every round
     * also computes the evaluate op's fast-tier core metrics (binary: auc,
     * logloss; regression: rmse; multiclass: logloss) with the metrics
     * library on the validation scores, reported to on_round as
     * "fast.<metric>" after the GBDT's own metrics. */
    int fast_metrics;                 /* default 1; 0 = off */
    /* Rows of the validation set kept: a stratified subsample by label
     * (mr_metric_subsample_stratified, seeded by the training seed), taken
     * before binning, so early stopping also sees these rows. 0 = all. */
    size_t valid_sample;
    double fast_tier_seconds;         /* [out] time spent computing fast-tier metrics */
    size_t valid_rows_used;           /* [out] validation rows after subsampling */
    size_t train_rows;                /* [out] training rows used */
    int streamed;                     /* [out] mr_model_train_file binned the file while reading it */
    /* gbdt across ranks (docs/cluster.md), mr_model_train_file only: this
     * process is comm->rank of comm->size; it reads and bins only its share
     * of the training file's rows (whole row groups of a Parquet file,
     * whole shards of a dataset; rows of a CSV or JSON-lines file, which
     * every rank parses) and trains with the others. Every rank reads the
     * whole validation file. The model is the one a single process trains
     * on the whole file, byte for byte. NULL = one process. */
    const mr_gbdt_comm *comm;
    size_t share_rows;                /* [out] with comm: this rank's training rows */
} mr_train_opts;
void mr_train_opts_init(mr_train_opts *o); /* gbdt, defaults above, fast_metrics on */

typedef struct mr_model mr_model;

/* Checks training parameters without data: for kind "gbdt" every LightGBM
 * name or alias, its type and range, and their combinations (objective vs
 * num_class and metric); for "linear" its names and values. params: a MAP
 * or NULL. MR_E_INVALID_ARG with the offending value's line and column (no
 * file), and "did you mean" for an unknown name. */
mr_status mr_model_check_params(const char *kind, const mr_value *params, mr_error *err);

/* Trains on train (valid may be NULL: no early stopping). Errors name the
 * column, param or row at fault (see above). *out is the caller's; with
 * bin_only it stays NULL. */
mr_status mr_model_train(const mr_table *train, const mr_table *valid, mr_train_opts *o, mr_model **out,
                         mr_error *err);
/* Trains on the files train_path and valid_path (NULL: none), read as
 * mr_table_read_file reads them. A gbdt on a CSV/TSV file, a JSON-lines
 * file, a Parquet file or a dataset is binned while the file is read (twice: the seeded sample,
 * then the bins), so its table never exists whole: peak memory is the
 * binned matrix, the sample and one batch (o->streamed = 1). With
 * bin_cache_dir the cached matrix is found by the file's content, without
 * reading it. Anything else (a linear model, a glob, or a file the
 * streaming path would type differently from the whole-file reader)
 * reads the table and calls mr_model_train. The model is the same, byte
 * for byte, either way; so are the errors. o->train_rows tells the rows. */
mr_status mr_model_train_file(const char *train_path, const char *valid_path, mr_train_opts *o, mr_model **out,
                              mr_error *err);
void mr_model_free(mr_model *m);
/* Any millrace model file (the kind is read from its magic number; files
 * over 4 GiB are MR_E_LIMIT). MR_E_NOT_FOUND, MR_E_IO, MR_E_CORRUPT naming
 * the file. from_bytes reads data during the call only. */
mr_status mr_model_load(const char *path, mr_model **out, mr_error *err);
mr_status mr_model_from_bytes(const void *data, size_t len, mr_model **out, mr_error *err);
mr_status mr_model_to_bytes(const mr_model *m, mr_buf *out, mr_error *err); /* appends; MR_E_NOMEM, MR_E_LIMIT */
mr_status mr_model_save(const mr_model *m, const char *path, mr_error *err); /* atomic; MR_E_IO */

/* Accessors (pure reads; strings static or borrowed from the model). */
mr_model_kind mr_model_kind_of(const mr_model *m);
const char *mr_model_kind_name(const mr_model *m); /* "gbdt", "linear" */
size_t mr_model_num_outputs(const mr_model *m);    /* 1, or num_class */
size_t mr_model_num_features(const mr_model *m);
const char *mr_model_feature_name(const mr_model *m, size_t j);
const char *mr_model_objective_name(const mr_model *m); /* "binary", "regression", ... */

/* Predictions for every row of t, n_rows * n_outputs doubles row-major
 * (caller frees with mr_free). The model's features are looked up in t by
 * name (extra columns are ignored; a missing one is an error naming it).
 * raw: margins instead of probabilities. Errors: those of mr_model_matrix,
 * MR_E_NOMEM. */
mr_status mr_model_predict_table(const mr_model *m, const mr_table *t, int raw, double **out, size_t *n_outputs,
                                 mr_error *err);
/* The single-row path (what a server calls per request): x holds one row
 * of mr_model_num_features floats (NaN = missing) in the model's feature
 * order; out gets mr_model_num_outputs doubles. Allocates nothing, never
 * uses the pool; reentrant. Gives the same values as the batch paths. */
void mr_model_predict_row(const mr_model *m, const float *x, int raw, double *out);
/* Batch prediction over a row-major (n_rows, n_features) float matrix on
 * num_threads pool threads (0 = all; the result never depends on it). out:
 * n_rows * n_outputs doubles, caller-allocated. */
mr_status mr_model_predict_rows(const mr_model *m, const float *x, size_t n_rows, int raw, int num_threads,
                                double *out, mr_error *err);

/* Summary (kind, objective, features, rounds, importance) as JSON,
 * appended to out (MR_E_NOMEM, MR_E_LIMIT). */
mr_status mr_model_info_json(const mr_model *m, mr_buf *out, mr_error *err);
/* Everything, trees included, as JSON (appended; as above). */
mr_status mr_model_dump_json(const mr_model *m, mr_buf *out, mr_error *err);

/* The underlying model objects (borrowed; NULL when the kind differs), for
 * bundles and exporters that need the trees or weights. */
const mr_gbdt_model *mr_model_gbdt(const mr_model *m);
const mr_linear_model *mr_model_linear(const mr_model *m);

/* The model's features as a float matrix from t: column-major
 * (n_features, n_rows), NaN for nulls; bool, int64, float and date (day
 * numbers) columns. *x_out is the caller's (mr_free). MR_E_NOT_FOUND (a
 * feature column absent, with a hint), MR_E_SCHEMA (a string or timestamp
 * column, with a hint), MR_E_LIMIT, MR_E_NOMEM. */
mr_status mr_model_matrix(const mr_model *m, const mr_table *t, float **x_out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
