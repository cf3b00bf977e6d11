/* millrace metrics: evaluation metrics, curves, bootstrap confidence
 * intervals, stratified subsampling, slices and error analysis, as pure
 * functions over arrays. Definitions follow scikit-learn (docs/metrics.md
 * states each one, its tie handling and where millrace differs).
 *
 * Example (given const double *y, const double *p, size_t n):
 *
 *   mr_metric_data d;
 *   mr_metric_data_binary(&d, y, p, NULL, n);          // labels 0/1, P(y=1)
 *   double auc, ap;
 *   if (mr_metric_auc_ap(&d, &auc, &ap, &err) != MR_OK) mr_log_error(&err);
 *   mr_interval ci;
 *   if (mr_bootstrap_metric(MR_METRIC_ROC_AUC, 0.5, &d, 1000, 0.05, 42, 0, &ci, &err) == MR_OK)
 *       printf("auc %.4f [%.4f, %.4f]\n", ci.point, ci.lo, ci.hi);   // the same for any thread count, seed 42
 *
 * Inputs (shapes):
 *   y      (n) f64   binary: exactly 0 or 1; multiclass: class index 0..K-1
 *                    stored as an exact integer; regression: the target
 *   score  (n) f64   binary: score or P(y=1); regression: the prediction
 *   proba  (n, K) f64 row-major, multiclass only: class probabilities
 *   w      (n) f64   optional sample weights (finite, >= 0); NULL = all 1
 * Every function validates its input and returns MR_E_INVALID_ARG with the
 * 1-based row and the offending value in the message (NaN/inf scores, labels
 * outside the expected set, negative weights), or for an empty input / zero
 * total weight. Metrics that are undefined for the data (ROC-AUC with one
 * class) return MR_E_INVALID_ARG with a message saying so, never NaN.
 * Other codes: MR_E_NOT_FOUND (an unknown metric name, with a hint),
 * MR_E_LIMIT (sizes whose arithmetic would overflow), MR_E_NOMEM.
 *
 * Threads: functions are reentrant. Inputs of 2^20 rows or more use the core
 * pool (mr_parallel_for) with fixed blocks, so results never depend on the
 * thread count; do not call them from inside an mr_parallel_for job (the
 * pool is not reentrant; bootstrap workers are handled internally).
 * Ownership: arrays are borrowed for the call and never kept; outputs go to
 * caller-allocated arrays unless a function says it allocates (a curve's
 * arrays: mr_curve_free; slices: mr_free); every *_free(NULL) is a no-op. */
#ifndef MILLRACE_METRICS_H
#define MILLRACE_METRICS_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_metric_task {
    MR_TASK_BINARY = 0,
    MR_TASK_MULTICLASS = 1,
    MR_TASK_REGRESSION = 2
} mr_metric_task;

/* One evaluation set. All pointers are borrowed. */
typedef struct mr_metric_data {
    mr_metric_task task;
    size_t n;            /* rows */
    const double *y;     /* (n) labels / targets */
    const double *score; /* (n) binary score or regression prediction; NULL for multiclass */
    const double *proba; /* (n, n_classes) row-major; multiclass only */
    size_t n_classes;    /* K >= 2 for multiclass, else 0 */
    const double *w;     /* (n) weights or NULL */
} mr_metric_data;

/* Fill d (no checks, no copies: d borrows the arrays). */
void mr_metric_data_binary(mr_metric_data *d, const double *y, const double *score, const double *w, size_t n);
void mr_metric_data_multiclass(mr_metric_data *d, const double *y, const double *proba, size_t n_classes,
                               const double *w, size_t n);
void mr_metric_data_regression(mr_metric_data *d, const double *y, const double *pred, const double *w,
                               size_t n);

/* Checks d against its task: labels in the expected set, finite scores,
 * probabilities in [0, 1] where the metric needs them (need_proba), weights
 * finite and >= 0 with a positive total, n > 0. */
mr_status mr_metric_validate(const mr_metric_data *d, int need_proba, mr_error *err);

/* ---- binary ------------------------------------------------------------
 * ROC-AUC: trapezoidal area under the ROC curve built from every distinct
 * score (a group of tied scores is one step, which averages over the ties,
 * as sklearn.metrics.roc_auc_score). Needs both classes (positive weight).
 * Average precision: sum over distinct thresholds of (R_k - R_{k-1}) * P_k,
 * step-wise, no interpolation (sklearn average_precision_score). Needs a
 * positive. mr_metric_auc_ap computes both from one sort. */
mr_status mr_metric_roc_auc(const mr_metric_data *d, double *out, mr_error *err);
mr_status mr_metric_average_precision(const mr_metric_data *d, double *out, mr_error *err);
mr_status mr_metric_auc_ap(const mr_metric_data *d, double *auc_out, double *ap_out, mr_error *err);
/* Log loss with p clipped to [eps, 1 - eps], eps = DBL_EPSILON (sklearn 1.2
 * log_loss default eps="auto" for float64, with
 * labels=[0, 1]); scores must be probabilities in [0, 1]. Defined for a
 * single-class set. Weighted mean. */
mr_status mr_metric_logloss(const mr_metric_data *d, double *out, mr_error *err);
/* Brier score: weighted mean of (y - p)^2; p in [0, 1]. */
mr_status mr_metric_brier(const mr_metric_data *d, double *out, mr_error *err);

/* Weighted confusion counts with the prediction score >= threshold -> 1. */
typedef struct mr_confusion2 {
    double tn, fp, fn, tp;
} mr_confusion2;
typedef struct mr_binary_scores {
    double threshold;
    mr_confusion2 cm;
    double accuracy, precision, recall, f1; /* 0/0 -> 0 (sklearn zero_division=0) */
} mr_binary_scores;
mr_status mr_metric_binary_at(const mr_metric_data *d, double threshold, mr_binary_scores *out, mr_error *err);
/* F1-optimal threshold: the distinct score t maximising F1 of (score >= t);
 * ties go to the largest such t. Needs a positive. */
mr_status mr_metric_f1_optimal(const mr_metric_data *d, mr_binary_scores *out, mr_error *err);

/* ---- multiclass --------------------------------------------------------
 * The prediction is the argmax of the probability row (first index on
 * ties, as numpy.argmax). Macro F1 averages over all K classes (sklearn
 * f1_score(labels=range(K), average='macro'): a class never true nor
 * predicted scores 0); micro F1 equals accuracy for single-label data.
 * Log loss clips to [DBL_EPSILON, 1 - DBL_EPSILON] and renormalises each row, as
 * sklearn log_loss(labels=range(K)). confusion_out: (K, K) row-major,
 * rows = true class, columns = predicted, weighted; caller-allocated. */
typedef struct mr_multiclass_scores {
    double accuracy, macro_f1, micro_f1, logloss;
} mr_multiclass_scores;
mr_status mr_metric_multiclass(const mr_metric_data *d, mr_multiclass_scores *out, double *confusion_out,
                               mr_error *err);

/* ---- regression --------------------------------------------------------
 * residual = y - pred. RMSE, MAE, R^2 (1 - SS_res/SS_tot with the weighted
 * mean; a constant target gives 1 if SS_res == 0 else 0, as sklearn
 * force_finite), MAPE (|y - pred| / max(|y|, DBL_EPSILON), a fraction, not %). */
typedef struct mr_regression_scores {
    double rmse, mae, r2, mape;
} mr_regression_scores;
mr_status mr_metric_regression(const mr_metric_data *d, mr_regression_scores *out, mr_error *err);
/* Unweighted quantiles of the residuals y - pred at qs[i] in [0, 1]
 * (numpy.quantile, linear interpolation) into out[i]. */
mr_status mr_metric_residual_quantiles(const mr_metric_data *d, const double *qs, size_t n_q, double *out,
                                       mr_error *err);

/* ---- one metric by id (bootstrap, slices) -------------------------------*/
typedef enum mr_metric_id {
    MR_METRIC_ROC_AUC = 0,
    MR_METRIC_AVG_PRECISION = 1,
    MR_METRIC_LOGLOSS = 2,
    MR_METRIC_BRIER = 3,
    MR_METRIC_ACCURACY = 4,  /* binary at threshold, or multiclass */
    MR_METRIC_PRECISION = 5, /* binary at threshold */
    MR_METRIC_RECALL = 6,
    MR_METRIC_F1 = 7,
    MR_METRIC_MACRO_F1 = 8,  /* multiclass */
    MR_METRIC_MICRO_F1 = 9,
    MR_METRIC_RMSE = 10,     /* regression */
    MR_METRIC_MAE = 11,
    MR_METRIC_R2 = 12,
    MR_METRIC_MAPE = 13,
    MR_METRIC_COUNT_ = 14
} mr_metric_id;
const char *mr_metric_name(mr_metric_id id); /* "roc_auc", ... (static) */
/* Looks a metric up by name; MR_E_NOT_FOUND names the closest one. */
mr_status mr_metric_by_name(const char *name, mr_metric_id *out, mr_error *err);
int mr_metric_higher_is_better(mr_metric_id id);
/* threshold is used by accuracy/precision/recall/f1 on binary data. */
mr_status mr_metric_eval(mr_metric_id id, const mr_metric_data *d, double threshold, double *out,
                         mr_error *err);

/* ---- curves ------------------------------------------------------------
 * A curve is parallel arrays of n points in a caller-storage mr_curve; the
 * caller frees the arrays with mr_curve_free (which zeroes the struct).
 * max_points > 0 keeps at most that many points, chosen
 * deterministically (evenly spaced by index, both ends kept); 0 keeps all. */
typedef struct mr_curve {
    size_t n;
    double *x;   /* (n) */
    double *y;   /* (n) */
    double *aux; /* (n) threshold / count / row, per curve kind; may be NULL */
} mr_curve;
void mr_curve_free(mr_curve *c);
/* ROC: x = FPR, y = TPR, aux = threshold; starts at (0, 0) with threshold
 * +inf, one point per distinct score in decreasing order (sklearn roc_curve,
 * drop_intermediate=False). */
mr_status mr_curve_roc(const mr_metric_data *d, size_t max_points, mr_curve *out, mr_error *err);
/* PR: x = recall, y = precision, aux = threshold; starts at (0, 1) (aux =
 * +inf), then one point per distinct score in decreasing order (sklearn 1.2
 * precision_recall_curve, reversed). Rows of weight 0 make no point. */
mr_status mr_curve_pr(const mr_metric_data *d, size_t max_points, mr_curve *out, mr_error *err);
/* Calibration (reliability): x = mean predicted probability, y = fraction
 * positive, aux = rows, for each non-empty bin. Uniform bins split [0, 1]
 * evenly; quantile bins use the quantiles of the scores. A score equal to
 * an inner edge falls in the lower bin (sklearn calibration_curve).
 * Unweighted, like sklearn. */
typedef enum mr_calib_strategy { MR_CALIB_UNIFORM = 0, MR_CALIB_QUANTILE = 1 } mr_calib_strategy;
mr_status mr_curve_calibration(const mr_metric_data *d, size_t n_bins, mr_calib_strategy strategy,
                               mr_curve *out, mr_error *err);
/* Cumulative gain and lift: rows sorted by score descending (ties by row);
 * at each of n_bins equal row-count cut points k: x = population weight
 * fraction, y = gain (positive weight fraction captured), aux = lift =
 * gain / x. Starts at no point (x > 0). */
mr_status mr_curve_gain(const mr_metric_data *d, size_t n_bins, mr_curve *out, mr_error *err);
/* Residuals vs prediction (regression): x = pred, y = y - pred, aux = row;
 * at most max_points rows, every (n / max_points)-th by index. */
mr_status mr_curve_residuals(const mr_metric_data *d, size_t max_points, mr_curve *out, mr_error *err);

/* ---- bootstrap ---------------------------------------------------------
 * Percentile bootstrap: resample r (0 <= r < n_resamples) draws n rows with
 * replacement from a splitmix64 stream seeded with splitmix64(base + r),
 * base = splitmix64(seed), so
 * each resample is a pure function of (seed, r); resamples run in parallel
 * and their values are stored by r, then sorted: the interval is identical
 * for any thread count. lo/hi are the alpha/2 and 1 - alpha/2 quantiles
 * (linear interpolation) of the resamples whose metric is defined (a
 * resample without a positive has no AUC; n_failed counts them). If more
 * than half fail, lo = hi = NaN. point is the metric on d itself; an error
 * there (bad input) is returned. threads: 1 = in the caller; otherwise the
 * core pool. */
typedef struct mr_interval {
    double point, lo, hi;
    size_t n_valid, n_failed;
} mr_interval;
typedef mr_status (*mr_metric_fn)(const mr_metric_data *d, void *ctx, double *out, mr_error *err);
mr_status mr_bootstrap(mr_metric_fn fn, void *ctx, const mr_metric_data *d, size_t n_resamples, double alpha,
                       uint64_t seed, int threads, mr_interval *out, mr_error *err);
mr_status mr_bootstrap_metric(mr_metric_id id, double threshold, const mr_metric_data *d, size_t n_resamples,
                              double alpha, uint64_t seed, int threads, mr_interval *out, mr_error *err);

/* ---- fast tier: stratified subsample -----------------------------------
 * Picks min(size, n) distinct rows, stratified by label value (by 10
 * label-quantile buckets when there are more than 256 distinct labels):
 * each stratum gets its share by largest remainder (at least one row when
 * size allows), rows inside a stratum by a seeded shuffle. idx_out (size
 * entries, caller-allocated) is sorted ascending; *n_out = rows written. */
mr_status mr_metric_subsample_stratified(const double *labels, size_t n, size_t size, uint64_t seed,
                                         size_t *idx_out, size_t *n_out, mr_error *err);

/* ---- slices ------------------------------------------------------------
 * The metric per slice with a bootstrap interval. Flag rule: a slice is
 * flagged when its interval lies entirely on the worse side of the overall
 * point estimate: hi < overall for higher-is-better metrics, lo > overall
 * for lower-is-better ones. A slice where the metric is undefined (one
 * class for AUC) or with fewer than min_rows rows is reported with status
 * != MR_OK and its message, never flagged. For regression, resid_q holds
 * the residual quantiles 0.05, 0.25, 0.5, 0.75, 0.95 of the slice. */
typedef struct mr_slice {
    char label[96];     /* "city=Paris", "age in [18, 31)", "age missing" */
    size_t n_rows;
    double weight;
    mr_interval ci;     /* ci.point is the slice metric */
    mr_status status;   /* MR_OK or why the metric is undefined */
    char message[160];
    int flagged;
    double resid_q[5];  /* regression only, else NaN */
} mr_slice;
typedef struct mr_slice_opts {
    mr_metric_id metric;
    double threshold;   /* binary threshold metrics */
    size_t n_resamples; /* 0 = no intervals (never flagged) */
    double alpha;
    uint64_t seed;
    int threads;
    size_t min_rows;    /* 0 = 1 */
} mr_slice_opts;
void mr_slice_opts_init(mr_slice_opts *o); /* roc_auc, 0.5, 200, 0.05, seed 0, threads 0, min_rows 10 */
/* codes (n): category index per row in [0, n_cats) or -1 for missing;
 * names (n_cats): category names. Slices come in category order, then
 * "missing" if any. *out (n_out entries) is freed with mr_free. */
mr_status mr_slices_categorical(const mr_metric_data *d, const char *column, const int32_t *codes,
                                const char *const *names, size_t n_cats, const mr_slice_opts *o,
                                const mr_interval *overall, mr_slice **out, size_t *n_out, mr_error *err);
/* x (n): numeric column; NaN = missing. Buckets by the x quantiles at
 * i / n_buckets (lower edge inclusive, last bucket closed); equal edges
 * merge. */
mr_status mr_slices_numeric(const mr_metric_data *d, const char *column, const double *x, size_t n_buckets,
                            const mr_slice_opts *o, const mr_interval *overall, mr_slice **out, size_t *n_out,
                            mr_error *err);

/* ---- error analysis ----------------------------------------------------
 * The k most confident wrong predictions: binary, rows whose prediction at
 * threshold is wrong, by the probability given to the wrong class (score if
 * predicted 1, 1 - score if predicted 0); multiclass, rows whose argmax is
 * wrong, by that max probability. Descending, ties by row ascending.
 * rows_out/conf_out hold k entries (caller-allocated); *n_out = written. */
mr_status mr_metric_top_wrong(const mr_metric_data *d, double threshold, size_t k, size_t *rows_out,
                              double *conf_out, size_t *n_out, mr_error *err);
/* Regression: the k rows with the largest (worst = 1) or smallest (worst =
 * 0) |y - pred|, ties by row ascending; resid_out gets y - pred. */
mr_status mr_metric_extreme_residuals(const mr_metric_data *d, int worst, size_t k, size_t *rows_out,
                                      double *resid_out, size_t *n_out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
