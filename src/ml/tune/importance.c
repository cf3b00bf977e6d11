/* Parameter importances, fANOVA-lite: how much of the objective's variance
 * the mean per bin of one parameter explains, each parameter alone.
 * Quantile bins make it invariant to the parameter's scale (log or not). */
#include "tune_int.h"

#include <math.h>
#include <string.h>

typedef struct pair {
    double x, y;
} pair;

static int cmp_pair(const void *a, const void *b)
{
    const pair *p = a, *q = b;
    return p->x < q->x ? -1 : p->x > q->x;
}

mr_status mr_tune_importance(const double *x, const double *values, size_t n, size_t m, const int *categorical,
                             double *imp, mr_error *err)
{
    pair *pp = mr_calloc(n ? n : 1, sizeof(*pp));
    if (!pp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    double total = 0;
    for (size_t j = 0; j < m; j++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(x[i * m + j]) && isfinite(values[i])) pp[k++] = (pair){x[i * m + j], values[i]};
        imp[j] = 0;
        if (k < 2) continue;
        qsort(pp, k, sizeof(*pp), cmp_pair);
        double mean = 0;
        for (size_t i = 0; i < k; i++) mean += pp[i].y;
        mean /= (double)k;
        /* Bins: runs of equal x (categorical) or 4 quantile bins that never
         * split a run of equal x. */
        size_t start = 0;
        double between = 0;
        while (start < k) {
            size_t end = start + 1;
            if (categorical && categorical[j]) {
                while (end < k && pp[end].x == pp[start].x) end++;
            } else {
                size_t target = start + (k + 3) / 4;
                if (target > k) target = k;
                end = target > end ? target : end;
                while (end < k && pp[end].x == pp[end - 1].x) end++;
            }
            double s = 0;
            for (size_t i = start; i < end; i++) s += pp[i].y;
            double bm = s / (double)(end - start);
            between += (double)(end - start) * (bm - mean) * (bm - mean);
            start = end;
        }
        imp[j] = between / (double)k;
        total += imp[j];
    }
    for (size_t j = 0; j < m; j++) imp[j] = total > 0 ? imp[j] / total : 0;
    mr_free(pp);
    return MR_OK;
}
