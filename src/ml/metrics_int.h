/* Internals shared by the metric files (metrics.c, curves.c, bootstrap.c):
 * the ranked view of a binary evaluation set (radix-sorted positive and
 * negative scores walked as distinct-threshold groups), a seeded draw, and the
 * "no pool here" flag that bootstrap workers set. Not a public API. */
#ifndef MILLRACE_ML_METRICS_INT_H
#define MILLRACE_ML_METRICS_INT_H

#include "millrace/metrics.h"

/* Rows at or above which a metric kernel uses the core pool. */
#define MR__METRIC_PAR_MIN ((size_t)1 << 20)
/* Fixed reduction block: partial sums per block, added in block order. */
#define MR__METRIC_BLOCK ((size_t)1 << 16)

/* Nonzero on threads that must not call mr_parallel_for (bootstrap workers). */
extern _Thread_local int mr__metric_serial;

/* Uniform integer in [0, n) (multiply-shift; bias <= n / 2^64). */
static inline size_t mr__rand_below(uint64_t *state, size_t n)
{
    return (size_t)mr_scale_below(mr_splitmix64(state), n);
}

/* Scores sorted descending, split by class. A key is an order-reversing
 * uint64 image of the score (bigger score -> smaller key; ties compare
 * equal, -0.0 == +0.0), so an ascending key sort is a descending score
 * order. Weights follow their keys. */
typedef struct mr__ranked {
    uint64_t *pos, *neg;   /* (n_pos), (n_neg) descending keys */
    double *wpos, *wneg;   /* weights in the same order, NULL when unweighted */
    size_t n_pos, n_neg;
    double P, N;           /* total positive / negative weight */
    void *block;           /* one allocation holding the arrays */
} mr__ranked;
/* Validates (binary, finite scores) and builds the ranked view. */
mr_status mr__ranked_build(const mr_metric_data *d, mr__ranked *r, mr_error *err);
void mr__ranked_free(mr__ranked *r);

/* Walks distinct thresholds in decreasing order: each call yields the
 * threshold and the positive/negative weight with exactly that score. */
typedef struct mr__walk {
    const mr__ranked *r;
    size_t i, j;
} mr__walk;
static inline int mr__walk_next(mr__walk *wk, uint64_t *key_out, double *dtp, double *dfp)
{
    const mr__ranked *r = wk->r;
    int hp = wk->i < r->n_pos, hn = wk->j < r->n_neg;
    if (!hp && !hn) return 0;
    uint64_t k;
    if (hp && hn) k = r->pos[wk->i] < r->neg[wk->j] ? r->pos[wk->i] : r->neg[wk->j];
    else k = hp ? r->pos[wk->i] : r->neg[wk->j];
    double tp = 0, fp = 0;
    if (r->wpos) {
        while (wk->i < r->n_pos && r->pos[wk->i] == k) tp += r->wpos[wk->i++];
        while (wk->j < r->n_neg && r->neg[wk->j] == k) fp += r->wneg[wk->j++];
    } else {
        size_t i0 = wk->i, j0 = wk->j;
        while (wk->i < r->n_pos && r->pos[wk->i] == k) wk->i++;
        while (wk->j < r->n_neg && r->neg[wk->j] == k) wk->j++;
        tp = (double)(wk->i - i0);
        fp = (double)(wk->j - j0);
    }
    *key_out = k;
    *dtp = tp;
    *dfp = fp;
    return 1;
}
uint64_t mr__double_to_key(double s);
double mr__key_to_double(uint64_t k);

/* Sorts keys ascending, stably (payload, if not NULL, follows); tmp
 * buffers of n. Returns 0, or -1 when out of memory. */
int mr__radix_sort_u64(uint64_t *keys, double *payload, size_t n, uint64_t *ktmp, double *ptmp, int parallel);

/* numpy.quantile (linear) of sorted v[0..n) at q. */
double mr__quantile_sorted(const double *v, size_t n, double q);

#endif
