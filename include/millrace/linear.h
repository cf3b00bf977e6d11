/* millrace linear: logistic and linear regression baselines with L2 and L1
 * penalties on standardised features, with the same shape of API as gbdt.h
 * (params by name, train from a float matrix, save/load, predict raw or
 * transformed, single row or batch).
 *
 * Example (given const float *x, size_t n_rows, size_t n_feat, const float *y):
 *
 *   mr_linear_params p;
 *   mr_linear_params_init(&p);
 *   if (mr_linear_params_set_text(&p, "objective", "binary", &err) != MR_OK ||
 *       mr_linear_params_set_text(&p, "lambda_l2", "1.0", &err) != MR_OK) {
 *       mr_log_error(&err);
 *       return;
 *   }
 *   mr_linear_model *m = NULL;
 *   if (mr_linear_train(&p, x, n_rows, n_feat, MR_GBDT_ROW_MAJOR, y, NULL, &m, &err) == MR_OK) {
 *       double prob = mr_linear_predict_row(m, x, 0);   // the first row
 *       printf("P(y=1) = %.3f\n", prob);
 *       if (mr_linear_model_save(m, "lr.mrlin", &err) != MR_OK) mr_log_error(&err);
 *   }
 *   mr_linear_model_free(m);
 *
 * Fitting: features are standardised (mean 0, sd 1 over non-missing values;
 * missing values are imputed with the mean, i.e. contribute 0); the
 * objective is mean loss + lambda_l2/2 |w|^2 + lambda_l1 |w|_1 over the
 * standardised weights (intercept unpenalised). Linear regression solves
 * the penalised least squares by coordinate descent on the Gram matrix;
 * logistic regression wraps that in iteratively reweighted least squares
 * (Newton). Sums run over fixed row blocks added in block order, so models
 * are byte-identical for any thread count. Cost per Newton step: one pass
 * over the data, O(n d^2); meant for d up to a few hundred (4096 at most).
 *
 * Ownership: params live in caller storage (nothing to free); a model is
 * the caller's (mr_linear_model_free, NULL is a no-op) and borrows nothing
 * (inputs are read during the call). Feature names are borrowed from the
 * model.
 * Status codes: MR_E_INVALID_ARG (an unknown parameter with a hint, a bad
 * value, no rows or features, a bad label naming the row), MR_E_LIMIT (over
 * 4096 features), MR_E_FAILED (training diverged), MR_E_CORRUPT (a bad model
 * file), MR_E_NOT_FOUND / MR_E_IO (loading, saving), MR_E_NOMEM.
 * Thread safety: training and batch prediction run on the core pool; a
 * trained model may be read (predicted with) from many threads at once. */
#ifndef MILLRACE_LINEAR_H
#define MILLRACE_LINEAR_H

#include "millrace/core.h"
#include "millrace/value.h"
#include "millrace/gbdt.h" /* mr_gbdt_layout */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_linear_kind {
    MR_LINEAR_REGRESSION = 0, /* squared loss; "regression", "l2", "linear" */
    MR_LINEAR_LOGISTIC = 1,   /* log loss, labels 0/1; "binary", "logistic" */
} mr_linear_kind;

typedef struct mr_linear_params {
    mr_linear_kind objective; /* default regression */
    double lambda_l2;         /* default 1e-4 */
    double lambda_l1;         /* default 0 */
    int max_iter;             /* Newton / coordinate-descent rounds; default 100 */
    double tol;               /* max weight change to stop; default 1e-7 */
    int num_threads;          /* 0 = all pool threads */
} mr_linear_params;

void mr_linear_params_init(mr_linear_params *p); /* the defaults above */
/* Names: objective, lambda_l2 (reg_lambda, l2, alpha_l2), lambda_l1
 * (reg_alpha, l1), max_iter (num_iterations), tol, num_threads (n_jobs).
 * Unknown keys get a "did you mean" hint (MR_E_INVALID_ARG, as a bad value). */
mr_status mr_linear_params_set_text(mr_linear_params *p, const char *key, const char *value, mr_error *err);
/* The same from a typed value (a number, or a string parsed as above);
 * errors carry v's line and column. */
mr_status mr_linear_params_set(mr_linear_params *p, const char *key, const mr_value *v, mr_error *err);
/* Every entry of a mapping (NULL or null: none); the first error stops.
 * MR_E_INVALID_ARG also when map is not a mapping. */
mr_status mr_linear_params_apply(mr_linear_params *p, const mr_value *map, mr_error *err);

typedef struct mr_linear_model mr_linear_model;

/* x: (n_rows, n_features) floats, NaN = missing; label: n_rows values (0/1
 * for logistic; NaN labels are an error naming the row). names may be NULL
 * ("f0".."fN-1"). *out is the caller's. */
mr_status mr_linear_train(const mr_linear_params *p, const float *x, size_t n_rows, size_t n_features,
                          mr_gbdt_layout layout, const float *label, const char *const *names,
                          mr_linear_model **out, mr_error *err);
void mr_linear_model_free(mr_linear_model *m);

/* raw != 0: the linear score; else the probability (logistic) or value.
 * x: one row of num_features floats. Allocates nothing; reentrant. */
double mr_linear_predict_row(const mr_linear_model *m, const float *x, int raw);
/* Every row of x into out (n_rows doubles, caller-allocated) on the pool;
 * always MR_OK. */
mr_status mr_linear_predict(const mr_linear_model *m, const float *x, size_t n_rows, mr_gbdt_layout layout,
                            int raw, double *out, mr_error *err);

/* Accessors (pure reads). */
mr_linear_kind mr_linear_model_objective(const mr_linear_model *m);
size_t mr_linear_model_num_features(const mr_linear_model *m);
const char *mr_linear_model_feature_name(const mr_linear_model *m, size_t j); /* borrowed; NULL past the end */
int mr_linear_model_iterations(const mr_linear_model *m);  /* Newton steps taken */
/* Weight of feature j on the original (unstandardised) scale, and the
 * matching intercept. */
double mr_linear_model_weight(const mr_linear_model *m, size_t j);
double mr_linear_model_intercept(const mr_linear_model *m);
/* Training mean of feature j: a missing value scores as this value. */
double mr_linear_model_mean(const mr_linear_model *m, size_t j);

/* File: "MRLINMOD", version 1, LE, xxh3-128 trailer (docs/gbdt.md). save
 * publishes atomically; load/from_bytes check magic, version and checksum
 * (MR_E_CORRUPT); to_bytes and dump_json append to out. */
mr_status mr_linear_model_save(const mr_linear_model *m, const char *path, mr_error *err);
mr_status mr_linear_model_load(const char *path, mr_linear_model **out, mr_error *err);
mr_status mr_linear_model_to_bytes(const mr_linear_model *m, mr_buf *out, mr_error *err);
mr_status mr_linear_model_from_bytes(const void *data, size_t len, mr_linear_model **out, mr_error *err);
mr_status mr_linear_model_dump_json(const mr_linear_model *m, mr_buf *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
