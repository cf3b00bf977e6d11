/* Behavioural properties of a model, tested like software: consistency,
 * monotonicity, invariance, robustness and directional (negation) checks
 * over a matrix of sampled or generated rows. The model is reached through
 * a scoring callback, so the same checks run on any model kind (and the
 * unit tests run them on crafted scorers that violate each property).
 *
 * Example (given mr_score_fn score_fn, void *model, size_t n_features, const float *x, size_t n_rows):
 *
 *   mr_scorer s = {score_fn, model, n_features, 1, 4};
 *   mr_prop p;
 *   mr_prop_init(&p, MR_PROP_MONOTONIC);
 *   p.feature = 2; p.direction = +1;          // score never falls as x2 rises
 *   mr_prop_result r;
 *   if (mr_prop_check(&p, &s, x, n_rows, &r, &err) == MR_OK && !r.passed)
 *       printf("%s\n", r.detail);             // "3 of 200 rows: score fell by up to 0.12 ..."
 *
 * Inputs: x is row-major (n_rows, n_features) floats, NaN = missing; it is
 * borrowed and never modified. Every check is deterministic for a given seed.
 * Threads: the checks call the scorer from the caller's thread only.
 * Ownership: a property, scorer and result live in caller storage and own
 * nothing; the scorer's ctx is the caller's.
 * Status: MR_E_INVALID_ARG (bad feature or output index, empty input, no
 * scorer, bad settings), MR_E_LIMIT (too many rows), MR_E_NOMEM, or
 * whatever the scorer returns. An unknown property name is MR_E_NOT_FOUND. */
#ifndef MILLRACE_CHECK_H
#define MILLRACE_CHECK_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scores n_rows rows of x (row-major) into out (n_rows * n_outputs doubles)
 * on `threads` threads. With n_rows == 1 and threads == 1 a scorer should
 * take its single-row path (what a server runs per request). */
typedef mr_status (*mr_score_fn)(void *ctx, const float *x, size_t n_rows, int threads, double *out, mr_error *err);

typedef struct mr_scorer {
    mr_score_fn fn;
    void *ctx;
    size_t n_features;
    size_t n_outputs;
    int max_threads; /* consistency compares 1 thread with this many (<= 1: only 1) */
} mr_scorer;

/* Append-only: names appear in check results. */
typedef enum mr_prop_kind {
    MR_PROP_CONSISTENCY = 0, /* same input -> same output across batch sizes, thread counts and the row path */
    MR_PROP_MONOTONIC = 1,   /* raising `feature` never moves the output against `direction` */
    MR_PROP_INVARIANCE = 2,  /* perturbing `feature` moves the output by at most epsilon */
    MR_PROP_ROBUSTNESS = 3,  /* noise of scale `noise` moves the output by at most delta on >= fraction of rows */
    MR_PROP_DIRECTIONAL = 4, /* flipping `feature` moves the output the declared way on >= fraction of rows */
} mr_prop_kind;
const char *mr_prop_kind_name(mr_prop_kind k); /* "consistency", "monotonic", ... (static) */
/* MR_E_NOT_FOUND with a did-you-mean for an unknown name. */
mr_status mr_prop_kind_parse(const char *name, mr_prop_kind *out, mr_error *err);

typedef struct mr_prop {
    mr_prop_kind kind;
    size_t feature;  /* feature index; robustness: SIZE_MAX = noise on every feature */
    size_t output;   /* output compared by monotonic/directional (multiclass: the class); default 0 */
    int direction;   /* +1 (default) or -1: monotonic, directional */
    double epsilon;  /* tolerated change: consistency (default 0: bit-identical), invariance (default 1e-9),
                        monotonic/directional slack (default 0) */
    double perturb;  /* invariance: added to the feature; NaN (default) = the column is permuted across rows */
    double noise;    /* robustness: Gaussian noise std in units of each feature's std in the sample (default 0.01) */
    double delta;    /* robustness: largest tolerated change of a row's output (default 0.05) */
    double fraction; /* robustness (default 0.95), directional (default 0.9): share of rows that must pass */
    double from, to; /* directional: the feature is set to `from`, then to `to`; both NaN (default) = flip
                        each row (1 - x for 0/1 values, -x otherwise) and expect the move direction * sign(x' - x) */
    size_t grid;     /* monotonic: feature values tried per row (its sample quantiles; default 8) */
    uint64_t seed;   /* permutation / noise seed (default 0) */
} mr_prop;
void mr_prop_init(mr_prop *p, mr_prop_kind kind); /* the defaults above for kind */

typedef struct mr_prop_result {
    int passed;
    size_t n_rows;        /* rows tested */
    size_t n_violations;  /* rows that broke the property */
    double worst;         /* largest violation: |change| beyond the bound, or the move against the direction */
    double pass_fraction; /* share of rows that satisfied the per-row condition */
    size_t example_row;   /* index into x of the worst violating row; SIZE_MAX if none */
    char detail[256];     /* one line: what was measured and, on failure, by how much it missed */
} mr_prop_result;

/* Runs one property over x. A property that does not hold is not an error:
 * the call returns MR_OK with out->passed = 0. */
mr_status mr_prop_check(const mr_prop *p, const mr_scorer *s, const float *x, size_t n_rows, mr_prop_result *out,
                        mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
