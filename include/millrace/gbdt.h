/* millrace gbdt: gradient-boosted decision trees (histogram based, leaf-wise,
 * LightGBM parameter names), a versioned binary model format and a
 * thread-safe predictor.
 *
 * The path is: raw features -> mr_gbdt_data (binned matrix + label) ->
 * mr_gbdt_train -> mr_gbdt_model -> mr_gbdt_predictor / mr_gbdt_predict.
 * Training is reproducible: the same data, params and seed give a
 * byte-identical model file for any thread count (docs/gbdt.md says how).
 *
 * Example (given const float *x, size_t n_rows, size_t n_feat, const float *y):
 *
 *   mr_gbdt_params p;
 *   mr_gbdt_params_init(&p);
 *   if (mr_gbdt_params_set_text(&p, "objective", "binary", &err) != MR_OK ||
 *       mr_gbdt_params_set_text(&p, "n_estimators", "200", &err) != MR_OK) {   // alias of num_iterations
 *       mr_log_error(&err);
 *       return;
 *   }
 *   // or from a value tree (millrace.yaml's params: mapping, positions kept):
 *   //   mr_gbdt_params_apply(&p, mr_value_get(def, "params"), &err);
 *   mr_gbdt_data *train = NULL;
 *   mr_gbdt_model *m = NULL;
 *   if (mr_gbdt_data_from_matrix(x, n_rows, n_feat, MR_GBDT_ROW_MAJOR, y, NULL, NULL, &p, &train, &err) == MR_OK &&
 *       mr_gbdt_train(&p, train, NULL, NULL, NULL, &m, &err) == MR_OK) {
 *       double prob;
 *       if (mr_gbdt_predict(m, x, 1, MR_GBDT_ROW_MAJOR, 0, 0, &prob, &err) == MR_OK)   // first row
 *           printf("P(y=1) = %.3f\n", prob);
 *       if (mr_gbdt_model_save(m, "model.mrgb", &err) != MR_OK) mr_log_error(&err);
 *   } else {
 *       mr_log_error(&err);
 *   }
 *   mr_gbdt_model_free(m);
 *   mr_gbdt_data_free(train);
 *   mr_gbdt_params_deinit(&p);
 *
 * Ownership: params live in caller storage (mr_gbdt_params_deinit frees
 * categorical_feature). Binned data, models and predictors are the
 * caller's, each freed by its _free (NULL is a no-op); none borrows from
 * the inputs it was made from (matrices, tables and labels are copied or
 * binned during the call). Accessors return views borrowed from their
 * object; prediction writes into caller-allocated arrays.
 * Status codes: MR_E_INVALID_ARG (an unknown parameter with a did-you-mean
 * hint, a bad value or range, bad labels, no label or rows, bad shapes),
 * MR_E_NOT_FOUND (a named column or categorical feature is absent),
 * MR_E_SCHEMA (a column type gbdt cannot take; data binned with other
 * edges or of another width than the model), MR_E_LIMIT (over 2^32 - 2 rows
 * or 65535 features), MR_E_FAILED (training diverged), MR_E_CORRUPT (a bad
 * model, binned-matrix or predictor file, naming the offset or field),
 * MR_E_NOT_FOUND / MR_E_IO (loading, saving), MR_E_NOMEM.
 * Threads: training and batch prediction run on core's process-wide pool
 * (mr_pool_init); num_threads caps how many of its threads one call uses
 * (0 = all). Without an initialised pool everything runs on the caller.
 * Objects are not thread-safe for mutation; a trained model, a predictor and
 * binned data may be read from many threads at once. */
#ifndef MILLRACE_GBDT_H
#define MILLRACE_GBDT_H

#include "millrace/core.h"
#include "millrace/value.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parameters ----------------------------------------------------------
 * Names and defaults follow LightGBM; docs/gbdt.md has the table with every
 * alias. Enums are append-only (they are stored in model files). */
typedef enum mr_gbdt_objective {
    MR_GBDT_REGRESSION = 0, /* L2 loss; "regression", "l2", "mse", "reg:squarederror" */
    MR_GBDT_BINARY = 1,     /* logistic loss, labels 0/1; "binary", "binary:logistic" */
    MR_GBDT_MULTICLASS = 2, /* softmax, labels 0..num_class-1; "multiclass", "softmax" */
    MR_GBDT_REGRESSION_L1 = 3, /* absolute loss; "regression_l1", "l1", "mae" */
    MR_GBDT_HUBER = 4,      /* Huber loss with delta = alpha; "huber" */
} mr_gbdt_objective;

typedef enum mr_gbdt_metric {
    MR_GBDT_METRIC_NONE = 0,
    MR_GBDT_METRIC_AUC = 1,
    MR_GBDT_METRIC_LOGLOSS = 2,       /* binary_logloss */
    MR_GBDT_METRIC_ERROR = 3,         /* binary_error (threshold 0.5) */
    MR_GBDT_METRIC_RMSE = 4,
    MR_GBDT_METRIC_L2 = 5,            /* mean squared error */
    MR_GBDT_METRIC_L1 = 6,            /* mean absolute error */
    MR_GBDT_METRIC_MULTI_LOGLOSS = 7,
    MR_GBDT_METRIC_MULTI_ERROR = 8,
    MR_GBDT_METRIC_HUBER = 9,
} mr_gbdt_metric;

#define MR_GBDT_MAX_METRICS 8

typedef struct mr_gbdt_params {
    mr_gbdt_objective objective; /* default regression */
    int num_class;               /* multiclass only; default 1 */
    int num_iterations;          /* boosting rounds; default 100 */
    double learning_rate;        /* shrinkage; default 0.1 */
    int num_leaves;              /* max leaves per tree; default 31 */
    int max_depth;               /* <= 0: unlimited; default -1 */
    int max_bin;                 /* value bins per feature, 2..255 (+1 missing bin); default 255 */
    int min_data_in_leaf;        /* default 20 */
    double min_sum_hessian_in_leaf; /* default 1e-3 */
    double lambda_l1, lambda_l2; /* default 0, 0 */
    double min_gain_to_split;    /* default 0 */
    double bagging_fraction;     /* (0,1]; default 1 */
    int bagging_freq;            /* re-bag every k rounds; 0 = no bagging */
    double feature_fraction;     /* (0,1] features per tree; default 1 */
    int early_stopping_round;    /* 0 = off; needs a validation set */
    mr_gbdt_metric metric[MR_GBDT_MAX_METRICS]; /* the first one drives early stopping */
    int n_metrics;               /* 0 = the objective's default metric; -1 = none ("metric=none") */
    int num_threads;             /* 0 = all pool threads */
    uint64_t seed;               /* bagging, feature sampling, bin sample; default 0 */
    int bin_construct_sample_cnt;   /* rows sampled for bin edges; default 200000 */
    double alpha;                /* huber delta; default 0.9 */
    int max_cat_to_onehot;       /* categories <= this: one-vs-rest splits; default 4 */
    int max_cat_threshold;       /* max categories on one side of a split; default 32 */
    double cat_smooth;           /* category ordering smoother; default 10 */
    double cat_l2;               /* extra L2 for category-set splits; default 10 */
    int min_data_per_group;      /* min rows of a category to be ordered; default 100 */
    int is_provide_training_metric; /* also evaluate metrics on train; default 0 */
    int boost_from_average;      /* start from the label mean/log-odds; default 1 */
    char *categorical_feature;   /* "0,3,name" (indices or names); owned; NULL = none */
} mr_gbdt_params;

void mr_gbdt_params_init(mr_gbdt_params *p);   /* LightGBM defaults */
void mr_gbdt_params_deinit(mr_gbdt_params *p); /* frees categorical_feature */
/* Sets one parameter by LightGBM name or alias (case-insensitive) from a
 * typed value: numbers for numeric params (an integral float is an int),
 * bools (or 0/1) for flags, names for objective, a name, a comma-separated
 * list or a list for metric (null: none) and categorical_feature; a string
 * is parsed as by mr_gbdt_params_set_text. MR_E_INVALID_ARG names the key
 * and the expected type or range, and carries v's line and column (no
 * file: the caller knows which); an unknown key gets "did you mean" with
 * the canonical name of the closest name or alias (MR_E_INVALID_ARG, key
 * set). p is unchanged on failure. */
mr_status mr_gbdt_params_set(mr_gbdt_params *p, const char *key, const mr_value *v, mr_error *err);
/* The same from text ("63", "binary", "auc,binary_logloss"): the CLI's -p.
 * MR_E_INVALID_ARG (unknown key, bad value; also a NULL argument). */
mr_status mr_gbdt_params_set_text(mr_gbdt_params *p, const char *key, const char *value, mr_error *err);
/* Every entry of a mapping (NULL or null: none), in order; the first error
 * stops, positioned at the key when it is unknown, else at the value.
 * MR_E_INVALID_ARG (also when map is not a mapping). */
mr_status mr_gbdt_params_apply(mr_gbdt_params *p, const mr_value *map, mr_error *err);
/* The canonical name of a LightGBM name or alias ("n_estimators" ->
 * "num_iterations"), or NULL when it names no parameter. Static string. */
const char *mr_gbdt_param_canonical(const char *key);
/* Checks ranges and combinations (e.g. multiclass needs num_class >= 2):
 * MR_E_INVALID_ARG naming the parameter. mr_gbdt_train calls it too. */
mr_status mr_gbdt_params_validate(const mr_gbdt_params *p, mr_error *err);
/* Canonical "name=value\n" lines of every training parameter (num_threads
 * excluded: it never changes the model). Appends to out (MR_E_NOMEM,
 * MR_E_LIMIT). */
mr_status mr_gbdt_params_to_text(const mr_gbdt_params *p, mr_buf *out);
const char *mr_gbdt_objective_name(mr_gbdt_objective o); /* "binary" (static) */
const char *mr_gbdt_metric_name(mr_gbdt_metric m);       /* "auc" (static) */

/* ---- binned data ----------------------------------------------------------
 * Features quantised to <= max_bin value bins per feature plus bin 0 for
 * missing (NaN; for categoricals also negative, non-integer and rare codes),
 * stored row-major (n_rows, n_features) uint8. Bin edges come from a seeded
 * sample of bin_construct_sample_cnt rows. Validation/test data must be
 * binned with the training data as reference (same edges). */
typedef struct mr_gbdt_data mr_gbdt_data;

typedef enum mr_gbdt_layout { MR_GBDT_ROW_MAJOR = 0, MR_GBDT_COL_MAJOR = 1 } mr_gbdt_layout;

/* x: (n_rows, n_features) floats in the given layout, NaN = missing. label:
 * n_rows values or NULL (for data used only to predict). names: n_features
 * names or NULL ("f0".."fN-1"). reference: an already binned training set
 * whose edges to reuse, or NULL to compute edges (from params max_bin,
 * bin_construct_sample_cnt, seed, categorical_feature). Categorical features
 * hold non-negative integer codes (< 2^24). Copies what it needs; *out is
 * the caller's (mr_gbdt_data_free). MR_E_INVALID_ARG (x NULL, n_features
 * not in [1, 65535], bad categorical_feature), MR_E_NOT_FOUND (a
 * categorical_feature name no feature has), MR_E_SCHEMA (another width than
 * reference), MR_E_LIMIT, MR_E_NOMEM. */
mr_status mr_gbdt_data_from_matrix(const float *x, size_t n_rows, size_t n_features, mr_gbdt_layout layout,
                                   const float *label, const char *const *names, const mr_gbdt_data *reference,
                                   const mr_gbdt_params *p, mr_gbdt_data **out, mr_error *err);

/* Which table columns to use. features NULL = every column but label and
 * weight-like ones named here. categorical: extra names to treat as
 * categorical (int64 columns), besides params->categorical_feature.
 * Feature columns may be bool, int64, float32, float64 (nulls = missing). */
typedef struct mr_gbdt_table_spec {
    const char *label;                  /* NULL = no label (prediction data) */
    const char *const *features;        /* NULL = all other columns */
    size_t n_features;
    const char *const *categorical;
    size_t n_categorical;
} mr_gbdt_table_spec;
/* The same from table columns. MR_E_NOT_FOUND (a label, feature or
 * categorical column that is absent, key = it), MR_E_SCHEMA (a column of a
 * type gbdt cannot take), MR_E_INVALID_ARG (no feature columns), and the
 * errors of mr_gbdt_data_from_matrix. */
mr_status mr_gbdt_data_from_table(const mr_table *t, const mr_gbdt_table_spec *spec,
                                  const mr_gbdt_data *reference, const mr_gbdt_params *p, mr_gbdt_data **out,
                                  mr_error *err);
void mr_gbdt_data_free(mr_gbdt_data *d);

/* The same, for a table that arrives in batches and is never held whole
 * (the streaming trainer's input: peak memory is the binned matrix, the
 * sample and one batch). open takes the row count the batches will add up
 * to and the schema (a batch, perhaps of 0 rows; the features are fixed
 * from it). Without a reference the batches come twice, in the same order:
 * first through mr_gbdt_stream_sample (while mr_gbdt_stream_wants_sample),
 * which keeps the values of the seeded sample rows, then through
 * mr_gbdt_stream_bin; with a reference only the second pass. finish hands
 * over the data. The result equals mr_gbdt_data_from_table on the batches
 * concatenated, byte for byte (same sample rows, same edges). Errors: those
 * of mr_gbdt_data_from_table, checked per batch, and MR_E_STATE (the
 * batches do not add up to n_rows). */
typedef struct mr_gbdt_stream mr_gbdt_stream;
mr_status mr_gbdt_stream_open(const mr_table *schema, size_t n_rows, const mr_gbdt_table_spec *spec,
                              const mr_gbdt_data *reference, const mr_gbdt_params *p, mr_gbdt_stream **out,
                              mr_error *err);
int mr_gbdt_stream_wants_sample(const mr_gbdt_stream *s);
mr_status mr_gbdt_stream_sample(mr_gbdt_stream *s, const mr_table *batch, mr_error *err);
mr_status mr_gbdt_stream_bin(mr_gbdt_stream *s, const mr_table *batch, mr_error *err);
mr_status mr_gbdt_stream_finish(mr_gbdt_stream *s, mr_gbdt_data **out, mr_error *err);
void mr_gbdt_stream_free(mr_gbdt_stream *s); /* NULL is a no-op */
/* Accessors (pure reads; names borrowed until the data is freed). */
size_t mr_gbdt_data_rows(const mr_gbdt_data *d);
size_t mr_gbdt_data_features(const mr_gbdt_data *d);
const char *mr_gbdt_data_feature_name(const mr_gbdt_data *d, size_t j);
int mr_gbdt_data_is_categorical(const mr_gbdt_data *d, size_t j);
int mr_gbdt_data_feature_bins(const mr_gbdt_data *d, size_t j); /* including the missing bin */
const uint8_t *mr_gbdt_data_bins(const mr_gbdt_data *d);   /* (n_rows, n_features); borrowed */
const float *mr_gbdt_data_label(const mr_gbdt_data *d);    /* NULL if none; borrowed */
/* Replaces the label (n_rows floats, copied; views of the old label are
 * dead). MR_E_NOMEM. Not while another thread reads d. */
mr_status mr_gbdt_data_set_label(mr_gbdt_data *d, const float *label, mr_error *err);
/* Serialised binned matrix (format in docs/gbdt.md: "MRGBBIN\0", version 1,
 * LE, xxh3-128 trailer). save publishes atomically; load checks everything
 * and returns MR_E_CORRUPT naming the offset on a bad file (MR_E_NOT_FOUND
 * / MR_E_IO when it cannot be read; save: MR_E_IO). to_bytes appends to out;
 * from_bytes copies from data (borrowed for the call). */
mr_status mr_gbdt_data_save(const mr_gbdt_data *d, const char *path, mr_error *err);
mr_status mr_gbdt_data_load(const char *path, mr_gbdt_data **out, mr_error *err);
mr_status mr_gbdt_data_to_bytes(const mr_gbdt_data *d, mr_buf *out, mr_error *err);
mr_status mr_gbdt_data_from_bytes(const void *data, size_t len, mr_gbdt_data **out, mr_error *err);

/* ---- training -------------------------------------------------------------*/
typedef struct mr_gbdt_model mr_gbdt_model;

/* Reported after every round (on the training thread; info and its arrays
 * are borrowed for the call). Metric values follow params->metric order;
 * train_metric is filled only with is_provide_training_metric. */
typedef struct mr_gbdt_round_info {
    int iteration;                 /* 0-based round just finished */
    int n_metrics;
    mr_gbdt_metric metric[MR_GBDT_MAX_METRICS];
    double train_metric[MR_GBDT_MAX_METRICS]; /* NaN when not computed */
    double valid_metric[MR_GBDT_MAX_METRICS]; /* NaN without a validation set */
    int best_iteration;            /* best round so far on the first valid metric, -1 if none */
    double elapsed_s;              /* since training started */
    /* Raw scores (margins) of the validation rows after this round,
     * n_valid * n_outputs row-major; NULL without a validation set.
     * Borrowed: valid only during the callback. */
    const double *valid_score;
    size_t n_valid;
    int n_outputs;
} mr_gbdt_round_info;
/* Return non-zero to stop training after this round (the model keeps it). */
typedef int (*mr_gbdt_round_fn)(void *ctx, const mr_gbdt_round_info *info);

/* Trains a model. train must carry a label; valid (may be NULL) must have
 * been binned with train as reference and carry a label. With
 * early_stopping_round > 0 and a validation set, training stops after that
 * many rounds without improvement of the first metric and the model keeps
 * the rounds up to the best one. Errors: those of mr_gbdt_params_validate,
 * MR_E_INVALID_ARG for bad labels (err->row = 1-based row; key "train" or
 * "valid"), no label or no rows, MR_E_SCHEMA (valid binned with other edges
 * or of another width), MR_E_FAILED when training diverges (NaN/inf
 * gradients, scores or metrics), MR_E_NOMEM. A non-zero callback return is
 * a normal stop (MR_OK). *out is the caller's (mr_gbdt_model_free). */
mr_status mr_gbdt_train(const mr_gbdt_params *p, const mr_gbdt_data *train, const mr_gbdt_data *valid,
                        mr_gbdt_round_fn cb, void *cb_ctx, mr_gbdt_model **out, mr_error *err);

/* ---- data-parallel training across processes (docs/cluster.md) ----------
 * Every rank holds a contiguous share of the training rows (rank order is
 * row order; a share may be empty) and the whole validation set. The ranks
 * run the same rounds; the only exchanges are the ones below, so the model
 * is byte-identical to mr_gbdt_train on all the rows, at any rank count.
 * The transport moves bytes; millrace builds its collectives on it, so each
 * wait has a deadline and knows which rank it waits for. */
typedef struct mr_gbdt_xfer {
    int peer;        /* the other rank */
    int send;        /* 1: send len bytes of buf to peer; 0: receive them */
    void *buf;
    size_t len;
} mr_gbdt_xfer;
typedef struct mr_gbdt_comm {
    int rank, size;
    double timeout_s; /* deadline of one exchange (0 = 600 s) */
    void *ctx;
    /* Posts every transfer and waits for all of them, at most timeout_s. On
     * timeout or a transport error: MR_E_TIMEOUT / MR_E_IO with a message
     * naming the first peer whose transfer did not complete (*peer_out). */
    mr_status (*exchange)(void *ctx, mr_gbdt_xfer *x, size_t n, double timeout_s, int *peer_out);
} mr_gbdt_comm;

/* mr_gbdt_train on this rank's share (train: its rows, binned with the
 * edges every rank computed alike: mr_gbdt_stream_open_share). The callback
 * runs on every rank (its non-zero return on any rank stops all); the model
 * comes back on every rank. Errors: those of mr_gbdt_train, and MR_E_TIMEOUT
 * / MR_E_IO naming a rank that did not answer ("what" exchange, iteration),
 * MR_E_INTERNAL if the ranks' models differ (their hashes are compared). */
mr_status mr_gbdt_train_comm(const mr_gbdt_params *p, const mr_gbdt_data *train, const mr_gbdt_data *valid,
                             const mr_gbdt_comm *comm, mr_gbdt_round_fn cb, void *cb_ctx, mr_gbdt_model **out,
                             mr_error *err);
/* A stream over this rank's rows [row_lo, row_lo + n_rows) of n_total: the
 * bin edges come from the seeded sample of all n_total rows, each rank
 * contributing its sample rows' values (one exchange, in
 * mr_gbdt_stream_bin's first call), so every rank bins with the edges one
 * process would compute. Otherwise as mr_gbdt_stream_open (no reference). */
mr_status mr_gbdt_stream_open_share(const mr_table *schema, size_t n_total, size_t row_lo, size_t n_rows,
                                    const mr_gbdt_table_spec *spec, const mr_gbdt_params *p,
                                    const mr_gbdt_comm *comm, mr_gbdt_stream **out, mr_error *err);

/* ---- model ----------------------------------------------------------------*/
void mr_gbdt_model_free(mr_gbdt_model *m);
/* File format in docs/gbdt.md: "MRGBMOD\0", version 1, LE, xxh3-128 trailer.
 * save publishes atomically (MR_E_IO); load and from_bytes check the magic,
 * version, checksum and every index (MR_E_CORRUPT; load also MR_E_NOT_FOUND,
 * MR_E_IO); to_bytes and dump_json append to out. MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_gbdt_model_save(const mr_gbdt_model *m, const char *path, mr_error *err);
mr_status mr_gbdt_model_load(const char *path, mr_gbdt_model **out, mr_error *err);
mr_status mr_gbdt_model_to_bytes(const mr_gbdt_model *m, mr_buf *out, mr_error *err);
mr_status mr_gbdt_model_from_bytes(const void *data, size_t len, mr_gbdt_model **out, mr_error *err);
/* Human-readable JSON: header, params, features, importance, every tree. */
mr_status mr_gbdt_model_dump_json(const mr_gbdt_model *m, mr_buf *out, mr_error *err);

/* Accessors (pure reads; names borrowed until the model is freed). */
mr_gbdt_objective mr_gbdt_model_objective(const mr_gbdt_model *m);
int mr_gbdt_model_num_class(const mr_gbdt_model *m);      /* outputs per row: 1, or num_class */
int mr_gbdt_model_num_iterations(const mr_gbdt_model *m); /* rounds kept */
int mr_gbdt_model_best_iteration(const mr_gbdt_model *m); /* -1 without early stopping */
size_t mr_gbdt_model_num_trees(const mr_gbdt_model *m);
size_t mr_gbdt_model_num_features(const mr_gbdt_model *m);
const char *mr_gbdt_model_feature_name(const mr_gbdt_model *m, size_t j);
int mr_gbdt_model_feature_is_categorical(const mr_gbdt_model *m, size_t j);
int mr_gbdt_model_tree_leaves(const mr_gbdt_model *m, size_t tree);
typedef enum mr_gbdt_importance { MR_GBDT_IMPORTANCE_SPLIT = 0, MR_GBDT_IMPORTANCE_GAIN = 1 } mr_gbdt_importance;
/* out: n_features values (split counts, or total gain). */
void mr_gbdt_model_importance(const mr_gbdt_model *m, mr_gbdt_importance kind, double *out);

/* ---- prediction -----------------------------------------------------------
 * raw != 0: raw scores (log-odds, softmax inputs); else transformed
 * (probability for binary, class probabilities for multiclass, the value for
 * regression). out: n_rows * num_class doubles, row-major. num_iteration <= 0
 * uses every round of the model. Runs on the pool. MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_gbdt_predict(const mr_gbdt_model *m, const float *x, size_t n_rows, mr_gbdt_layout layout,
                          int raw, int num_iteration, double *out, mr_error *err);
/* Same over binned data (bins must come from the model's training data
 * edges; MR_E_SCHEMA when the feature count differs). */
mr_status mr_gbdt_predict_binned(const mr_gbdt_model *m, const mr_gbdt_data *d, int raw, int num_iteration,
                                 double *out, mr_error *err);

/* A predictor prepares the trees once (flat node array) so that scoring one
 * row allocates nothing and re-initialises nothing. It borrows nothing from
 * the model (the model may be freed). Thread-safe: many threads may call
 * mr_gbdt_predictor_row on one predictor concurrently. */
typedef struct mr_gbdt_predictor mr_gbdt_predictor;
/* num_iteration <= 0: every round. *out is the caller's. MR_E_NOMEM,
 * MR_E_LIMIT (a model too large for the compiled layout). */
mr_status mr_gbdt_predictor_new(const mr_gbdt_model *m, int num_iteration, mr_gbdt_predictor **out, mr_error *err);
void mr_gbdt_predictor_free(mr_gbdt_predictor *p);
int mr_gbdt_predictor_num_class(const mr_gbdt_predictor *p);
size_t mr_gbdt_predictor_num_features(const mr_gbdt_predictor *p);
/* x: one row of num_features floats (NaN = missing); out: num_class
 * doubles. Allocates nothing; cannot fail. */
void mr_gbdt_predictor_row(const mr_gbdt_predictor *p, const float *x, int raw, double *out);
/* Same with double inputs. */
void mr_gbdt_predictor_row_f64(const mr_gbdt_predictor *p, const double *x, int raw, double *out);
/* The compiled layout as bytes ("MRGP", version 1, little-endian; docs/bundle.md
 * "Compiled predictor"), and back. from_bytes checks every index (features,
 * children pointing strictly forward, leaves, categorical bitsets), so a
 * loaded predictor can never read out of bounds or loop. MR_E_CORRUPT names
 * what failed. The same model always gives the same bytes. */
mr_status mr_gbdt_predictor_to_bytes(const mr_gbdt_predictor *p, mr_buf *out);
mr_status mr_gbdt_predictor_from_bytes(const void *data, size_t len, mr_gbdt_predictor **out, mr_error *err);
/* Batch over the pool (rows in blocks; each block written by one thread;
 * the result never depends on num_threads, 0 = all). out: n_rows *
 * num_class doubles. MR_E_NOMEM (scratch). */
mr_status mr_gbdt_predictor_batch(const mr_gbdt_predictor *p, const float *x, size_t n_rows, mr_gbdt_layout layout,
                                  int raw, int num_threads, double *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
