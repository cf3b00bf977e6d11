/* Pruners: asynchronous successive halving (ASHA) with rungs in boosting
 * rounds, and the median rule. Both decide from the curve of the running
 * trial and the curves of the trials given as history only, so the
 * decision is reproducible whatever ran concurrently. */
#include "tune_int.h"

#include <math.h>
#include <string.h>

void mr_tune_pruner_opts_init(mr_tune_pruner_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->kind = MR_PRUNER_NONE;
    o->maximize = 1;
    o->min_resource = 10;
    o->reduction_factor = 3;
    o->n_startup_trials = 5;
    o->n_warmup_steps = 10;
    o->interval_steps = 1;
}

int mr_tune_is_rung(const mr_tune_pruner_opts *o, size_t n)
{
    if (o->kind != MR_PRUNER_ASHA) return 0;
    size_t r = o->min_resource > 0 ? (size_t)o->min_resource : 1;
    size_t eta = o->reduction_factor > 1 ? (size_t)o->reduction_factor : 2;
    while (r < n) {
        if (r > SIZE_MAX / eta) return 0;
        r *= eta;
    }
    return r == n;
}

static int cmp_best_first_max(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a > b ? -1 : a < b;
}

static int cmp_best_first_min(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static int at_least_as_good(double v, double ref, int maximize) { return maximize ? v >= ref : v <= ref; }

static int asha(const mr_tune_pruner_opts *o, const mr_tune_trial *hist, size_t n_hist, const double *curve, size_t n)
{
    if (!mr_tune_is_rung(o, n)) return 0;
    double v = curve[n - 1];
    if (isnan(v)) return 0;
    double *vals = mr_malloc((n_hist + 1) * sizeof(double));
    if (!vals) return 0;
    size_t m = 0;
    for (size_t i = 0; i < n_hist; i++) {
        const mr_tune_trial *t = &hist[i];
        if (t->status == MR_TRIAL_FAILED || t->n_curve < n || isnan(t->curve[n - 1])) continue;
        vals[m++] = t->curve[n - 1];
    }
    vals[m++] = v;
    qsort(vals, m, sizeof(double), o->maximize ? cmp_best_first_max : cmp_best_first_min);
    size_t eta = o->reduction_factor > 1 ? (size_t)o->reduction_factor : 2;
    size_t idx = m / eta;
    idx = idx ? idx - 1 : 0;
    int prune = !at_least_as_good(v, vals[idx], o->maximize);
    mr_free(vals);
    return prune;
}

static int median(const mr_tune_pruner_opts *o, const mr_tune_trial *hist, size_t n_hist, const double *curve, size_t n)
{
    size_t warm = o->n_warmup_steps > 0 ? (size_t)o->n_warmup_steps : 0;
    size_t every = o->interval_steps > 0 ? (size_t)o->interval_steps : 1;
    if (n <= warm || (n - warm) % every != 0) return 0;
    double best = NAN;
    for (size_t r = 0; r < n; r++) {
        double c = curve[r];
        if (isnan(c)) continue;
        if (isnan(best) || (o->maximize ? c > best : c < best)) best = c;
    }
    if (isnan(best)) return 0;
    double *vals = mr_malloc((n_hist ? n_hist : 1) * sizeof(double));
    if (!vals) return 0;
    size_t m = 0;
    for (size_t i = 0; i < n_hist; i++) {
        const mr_tune_trial *t = &hist[i];
        if (t->status != MR_TRIAL_COMPLETE || t->n_curve < n || isnan(t->curve[n - 1])) continue;
        vals[m++] = t->curve[n - 1];
    }
    int prune = 0;
    if (m > 0 && m >= (size_t)(o->n_startup_trials > 0 ? o->n_startup_trials : 0)) {
        qsort(vals, m, sizeof(double), cmp_best_first_min);
        double med = m % 2 ? vals[m / 2] : 0.5 * (vals[m / 2 - 1] + vals[m / 2]);
        prune = !at_least_as_good(best, med, o->maximize);
    }
    mr_free(vals);
    return prune;
}

int mr_tune_should_prune(const mr_tune_pruner_opts *o, const mr_tune_trial *hist, size_t n_hist, const double *curve,
                         size_t n_curve)
{
    if (!o || n_curve == 0) return 0;
    switch (o->kind) {
    case MR_PRUNER_ASHA: return asha(o, hist, n_hist, curve, n_curve);
    case MR_PRUNER_MEDIAN: return median(o, hist, n_hist, curve, n_curve);
    default: return 0;
    }
}
