/* millrace tune: the pieces of a hyperparameter search that know nothing of
 * pipelines, processes or the run store. A search space parsed from a value
 * tree; a seeded random sampler and a TPE sampler (Parzen estimators over
 * the good and bad trials); pruners (ASHA / successive halving by rounds,
 * median); parameter importances. The `tune` op (src/ops/op_tune.c) runs the
 * trials; docs/tune.md describes the algorithms and why they are exactly
 * reproducible.
 *
 * Example (given const mr_value *space_value, const mr_tune_trial *history, size_t n_done):
 *
 *   mr_tune_space *sp;
 *   if (mr_tune_space_parse(space_value, "millrace.yaml", &sp, &err) != MR_OK) { mr_log_error(&err); return; }
 *   double *x = mr_calloc(mr_tune_space_size(sp) + 1, sizeof(double));
 *   mr_tune_sampler_opts so;
 *   mr_tune_sampler_opts_init(&so);            // TPE, seed 0
 *   mr_value *params = NULL;                   // {"learning_rate": 0.05, ...}
 *   if (x && mr_tune_suggest(sp, &so, history, n_done, n_done, x, &err) == MR_OK &&
 *       mr_tune_point_value(sp, x, &params) == MR_OK) {
 *       // ... train with params, and after round r (curve[0..r) so far):
 *       mr_tune_pruner_opts po;
 *       mr_tune_pruner_opts_init(&po);
 *       po.kind = MR_PRUNER_ASHA;
 *       double curve[1] = {0.8};
 *       if (mr_tune_should_prune(&po, history, n_done, curve, 1)) puts("pruned");
 *   }
 *   mr_value_free(params);
 *   mr_free(x);
 *   mr_tune_space_free(sp);
 *
 * A point is one double per parameter in declaration order: the value for
 * uniform, loguniform and int parameters, the index of the option for
 * choice parameters, NaN for a conditional parameter that is inactive.
 *
 * Determinism: suggestions are a pure function of (space, options, the
 * history given, trial number); pruning decisions a pure function of
 * (options, history, curve). Nothing reads a clock or a global RNG.
 * Ownership: a space is the caller's (mr_tune_space_free, NULL is a
 * no-op) and copies what it keeps of the value tree; names are borrowed
 * from it. mr_tune_point_value's mapping is the caller's (mr_value_free).
 * Histories, points and curves are caller arrays, borrowed for the call.
 * Status codes: MR_E_SCHEMA (a malformed space, naming file:line:col),
 * MR_E_NOT_FOUND (a point value outside the space), MR_E_NOMEM (the only
 * failure of suggest, point_value and importance; point_value sets no
 * mr_error).
 * Thread safety: no shared state; a space may be read by many threads. */
#ifndef MILLRACE_TUNE_H
#define MILLRACE_TUNE_H

#include "millrace/core.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- search space ------------------------------------------------------ */
typedef enum mr_tune_kind {
    MR_TUNE_UNIFORM = 1,    /* {uniform: [lo, hi]} */
    MR_TUNE_LOGUNIFORM = 2, /* {loguniform: [lo, hi]}, 0 < lo < hi */
    MR_TUNE_INT = 3,        /* {int: [lo, hi]}, inclusive; {int: [lo, hi], log: true} samples log-uniformly */
    MR_TUNE_CHOICE = 4,     /* {choice: [a, b, ...]}: strings, numbers or bools */
} mr_tune_kind;

typedef struct mr_tune_space mr_tune_space;

/* Parses a mapping name -> spec. Each spec may add `when: {PARENT: value}`
 * or `when: {PARENT: [v1, v2]}`: the parameter exists only when the earlier
 * choice parameter PARENT took one of those values. Errors (MR_E_SCHEMA)
 * name file:line:col of the offending node and the param. file is used in
 * messages only (NULL = none). */
mr_status mr_tune_space_parse(const mr_value *v, const char *file, mr_tune_space **out, mr_error *err);
void mr_tune_space_free(mr_tune_space *s);
/* Accessors (pure reads; j < mr_tune_space_size). */
size_t mr_tune_space_size(const mr_tune_space *s);
const char *mr_tune_space_name(const mr_tune_space *s, size_t j);
mr_tune_kind mr_tune_space_kind(const mr_tune_space *s, size_t j);
/* Number of options of a choice parameter (0 for others). */
size_t mr_tune_space_n_choices(const mr_tune_space *s, size_t j);
/* 1 if parameter j is active given the values of x (its parent's). */
int mr_tune_space_active(const mr_tune_space *s, size_t j, const double *x);
/* The point as a mapping name -> value (inactive parameters left out; int
 * parameters as ints; choices as the option's value). Caller frees. */
mr_status mr_tune_point_value(const mr_tune_space *s, const double *x, mr_value **out);
/* Reads a point back from such a mapping (for histories restored from JSON).
 * MR_E_NOT_FOUND if a value is not in the space. */
mr_status mr_tune_point_from_value(const mr_tune_space *s, const mr_value *map, double *x, mr_error *err);

/* ---- history ----------------------------------------------------------- */
typedef enum mr_trial_status {
    MR_TRIAL_COMPLETE = 0,
    MR_TRIAL_PRUNED = 1,
    MR_TRIAL_FAILED = 2,
} mr_trial_status;

/* One finished trial, as samplers and pruners see it. Borrowed pointers. */
typedef struct mr_tune_trial {
    const double *x;       /* the point (mr_tune_space_size values) */
    mr_trial_status status;
    double value;          /* complete: its objective; pruned: best value before it stopped */
    const double *curve;   /* objective after round r at curve[r - 1] (NaN = not measured) */
    size_t n_curve;        /* rounds run */
} mr_tune_trial;

/* ---- samplers ---------------------------------------------------------- */
typedef enum mr_tune_sampler_kind { MR_SAMPLER_RANDOM = 0, MR_SAMPLER_TPE = 1 } mr_tune_sampler_kind;

typedef struct mr_tune_sampler_opts {
    mr_tune_sampler_kind kind;
    uint64_t seed;
    int maximize;          /* 1: larger objective is better */
    int n_startup_trials;  /* TPE: random until the history holds this many usable trials (default 10) */
    double gamma;          /* TPE: fraction of the history that is "good" (default 0.15) */
    int n_ei_candidates;   /* TPE: candidates drawn from l(x) per parameter (default 24) */
} mr_tune_sampler_opts;
void mr_tune_sampler_opts_init(mr_tune_sampler_opts *o); /* TPE, seed 0, maximize 1, the defaults above */

/* Suggests the point of trial `trial` (0-based) given the finished trials
 * hist[0..n_hist). Failed trials are ignored; TPE ranks complete trials by
 * value, then pruned ones by how far they got, then by value. x_out:
 * mr_tune_space_size doubles (caller storage). MR_E_NOMEM. */
mr_status mr_tune_suggest(const mr_tune_space *s, const mr_tune_sampler_opts *o, const mr_tune_trial *hist,
                          size_t n_hist, uint64_t trial, double *x_out, mr_error *err);

/* ---- pruners ----------------------------------------------------------- */
typedef enum mr_tune_pruner_kind { MR_PRUNER_NONE = 0, MR_PRUNER_ASHA = 1, MR_PRUNER_MEDIAN = 2 } mr_tune_pruner_kind;

typedef struct mr_tune_pruner_opts {
    mr_tune_pruner_kind kind;
    int maximize;
    int min_resource;      /* ASHA: first rung, in rounds (default 10) */
    int reduction_factor;  /* ASHA: eta; rungs at min_resource * eta^k rounds (default 3) */
    int n_startup_trials;  /* median: complete trials needed before pruning (default 5) */
    int n_warmup_steps;    /* median: rounds never pruned (default 10) */
    int interval_steps;    /* median: check every this many rounds (default 1) */
} mr_tune_pruner_opts;
void mr_tune_pruner_opts_init(mr_tune_pruner_opts *o); /* no pruner (MR_PRUNER_NONE), maximize 1, the defaults above */

/* Called after round n_curve of a running trial: 1 if it should stop now.
 * ASHA at a rung r (n_curve == min_resource * eta^k): the competitors are
 * the trials of hist that ran at least r rounds, plus this one; sorted
 * best first, the trial continues if it is at least as good as the value
 * at index max(0, n / eta - 1). Median after warm-up: stop if the trial's
 * best value so far is worse than the median, over the complete trials of
 * hist that reached this round, of their value at this round. Out of memory
 * for its scratch answers 0 (the trial continues). */
int mr_tune_should_prune(const mr_tune_pruner_opts *o, const mr_tune_trial *hist, size_t n_hist, const double *curve,
                         size_t n_curve);
/* 1 if round n is a rung of the pruner (where ASHA decides). */
int mr_tune_is_rung(const mr_tune_pruner_opts *o, size_t n);

/* ---- importance -------------------------------------------------------- */
/* fANOVA-lite: for each of m parameters, the variance across bins of the
 * mean objective (numeric parameters: 4 quantile bins; categorical: one bin
 * per value), weighted by bin size, over the n rows where it is active
 * (x[i * m + j] not NaN); normalised to sum 1 (all 0 when nothing varies).
 * categorical[j] != 0 marks a categorical parameter. imp_out: m values.
 * MR_E_NOMEM. */
mr_status mr_tune_importance(const double *x, const double *values, size_t n, size_t m, const int *categorical,
                             double *imp_out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
