/* Evaluation curves: ROC and precision-recall from the ranked view,
 * calibration bins, cumulative gain / lift, and the deterministic residual
 * scatter. Downsampling keeps evenly spaced points by index (both ends), so
 * a chart is a pure function of the data. */
#include "ml/metrics_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void mr_curve_free(mr_curve *c)
{
    if (!c) return;
    mr_free(c->x);
    mr_free(c->y);
    mr_free(c->aux);
    memset(c, 0, sizeof *c);
}

static mr_status curve_alloc(mr_curve *c, size_t n, mr_error *err)
{
    memset(c, 0, sizeof *c);
    size_t m = n ? n : 1;
    c->x = mr_calloc(m, sizeof(double));
    c->y = mr_calloc(m, sizeof(double));
    c->aux = mr_calloc(m, sizeof(double));
    if (!c->x || !c->y || !c->aux) {
        mr_curve_free(c);
        return MR_ERR(err, MR_E_NOMEM, "out of memory (curve of %zu points)", n);
    }
    return MR_OK;
}

/* Keeps max_points evenly spaced points (index j*(n-1)/(m-1)), in place. */
static void downsample(mr_curve *c, size_t max_points)
{
    if (max_points == 0 || c->n <= max_points) return;
    size_t n = c->n, m = max_points < 2 ? 2 : max_points;
    for (size_t j = 0; j < m; j++) {
        size_t i = (size_t)(((unsigned __int128)j * (n - 1)) / (m - 1));
        c->x[j] = c->x[i];
        c->y[j] = c->y[i];
        c->aux[j] = c->aux[i];
    }
    c->n = m;
}

static size_t count_groups(const mr__ranked *r)
{
    mr__walk wk = {.r = r};
    uint64_t k;
    double a, b;
    size_t g = 0;
    while (mr__walk_next(&wk, &k, &a, &b)) g++;
    return g;
}

mr_status mr_curve_roc(const mr_metric_data *d, size_t max_points, mr_curve *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    mr__ranked r;
    mr_status st = mr__ranked_build(d, &r, err);
    if (st != MR_OK) return st;
    if (r.P <= 0 || r.N <= 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "ROC curve is undefined: only one class present (%zu positive, %zu negative rows)",
                    r.n_pos, r.n_neg);
        goto done;
    }
    st = curve_alloc(out, count_groups(&r) + 1, err);
    if (st != MR_OK) goto done;
    out->aux[0] = INFINITY;
    size_t n = 1;
    mr__walk wk = {.r = &r};
    uint64_t key;
    double dtp, dfp, tp = 0, fp = 0;
    while (mr__walk_next(&wk, &key, &dtp, &dfp)) {
        if (dtp == 0 && dfp == 0) continue; /* zero-weight rows make no threshold */
        tp += dtp;
        fp += dfp;
        out->x[n] = fp / r.N;
        out->y[n] = tp / r.P;
        out->aux[n] = mr__key_to_double(key);
        n++;
    }
    out->n = n;
    downsample(out, max_points);
done:
    mr__ranked_free(&r);
    return st;
}

mr_status mr_curve_pr(const mr_metric_data *d, size_t max_points, mr_curve *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    mr__ranked r;
    mr_status st = mr__ranked_build(d, &r, err);
    if (st != MR_OK) return st;
    if (r.P <= 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "precision-recall curve is undefined: no positive labels");
        goto done;
    }
    st = curve_alloc(out, count_groups(&r) + 1, err);
    if (st != MR_OK) goto done;
    out->x[0] = 0;
    out->y[0] = 1;
    out->aux[0] = INFINITY;
    size_t n = 1;
    mr__walk wk = {.r = &r};
    uint64_t key;
    double dtp, dfp, tp = 0, fp = 0;
    while (mr__walk_next(&wk, &key, &dtp, &dfp)) {
        if (dtp == 0 && dfp == 0) continue;
        tp += dtp;
        fp += dfp;
        out->x[n] = tp / r.P;
        out->y[n] = tp / (tp + fp);
        out->aux[n] = mr__key_to_double(key);
        n++;
    }
    out->n = n;
    downsample(out, max_points);
done:
    mr__ranked_free(&r);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

mr_status mr_curve_calibration(const mr_metric_data *d, size_t n_bins, mr_calib_strategy strategy, mr_curve *out,
                               mr_error *err)
{
    memset(out, 0, sizeof *out);
    if (d->task != MR_TASK_BINARY) return MR_ERR(err, MR_E_INVALID_ARG, "calibration curve: binary data expected");
    if (n_bins < 1 || n_bins > 100000) return MR_ERR(err, MR_E_INVALID_ARG, "calibration curve: n_bins must be in [1, 100000], got %zu", n_bins);
    mr_status st = mr_metric_validate(d, 1, err);
    if (st != MR_OK) return st;
    double *edges = mr_calloc(n_bins + 1, sizeof(double));
    double *sums = mr_calloc(3 * n_bins, sizeof(double));
    double *sorted = NULL;
    if (!edges || !sums) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (calibration bins)");
        goto done;
    }
    for (size_t i = 0; i <= n_bins; i++) edges[i] = (double)i * (1.0 / (double)n_bins); /* numpy.linspace */
    edges[n_bins] = 1.0;
    if (strategy == MR_CALIB_QUANTILE) {
        sorted = mr_malloc(d->n * sizeof(double));
        if (!sorted) {
            st = MR_ERR(err, MR_E_NOMEM, "out of memory (calibration quantiles of %zu rows)", d->n);
            goto done;
        }
        memcpy(sorted, d->score, d->n * sizeof(double));
        qsort(sorted, d->n, sizeof(double), cmp_double);
        for (size_t i = 0; i <= n_bins; i++) {
            double q = edges[i] * 100.0 / 100.0; /* numpy.percentile(q * 100) */
            edges[i] = mr__quantile_sorted(sorted, d->n, q);
        }
    } else if (strategy != MR_CALIB_UNIFORM) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "calibration curve: unknown strategy %d", (int)strategy);
        goto done;
    }
    for (size_t i = 0; i < d->n; i++) {
        /* numpy.searchsorted(edges[1:-1], p, side='left') */
        size_t lo = 0, hi = n_bins - 1;
        double p = d->score[i];
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (edges[1 + mid] < p) lo = mid + 1;
            else hi = mid;
        }
        double w = d->w ? d->w[i] : 1.0;
        sums[3 * lo] += w * p;
        sums[3 * lo + 1] += w * d->y[i];
        sums[3 * lo + 2] += w;
    }
    st = curve_alloc(out, n_bins, err);
    if (st != MR_OK) goto done;
    size_t n = 0;
    for (size_t b = 0; b < n_bins; b++) {
        if (sums[3 * b + 2] == 0) continue;
        out->x[n] = sums[3 * b] / sums[3 * b + 2];
        out->y[n] = sums[3 * b + 1] / sums[3 * b + 2];
        out->aux[n] = sums[3 * b + 2];
        n++;
    }
    out->n = n;
done:
    mr_free(edges);
    mr_free(sums);
    mr_free(sorted);
    return st;
}

mr_status mr_curve_gain(const mr_metric_data *d, size_t n_bins, mr_curve *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    if (d->task != MR_TASK_BINARY) return MR_ERR(err, MR_E_INVALID_ARG, "gain curve: binary data expected");
    if (n_bins < 1) return MR_ERR(err, MR_E_INVALID_ARG, "gain curve: n_bins must be >= 1");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    size_t n = d->n;
    uint64_t *keys = mr_malloc(2 * n * sizeof(uint64_t));
    double *rows = mr_malloc(2 * n * sizeof(double));
    if (!keys || !rows) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (gain curve of %zu rows)", n);
        goto done;
    }
    double W = 0, P = 0;
    for (size_t i = 0; i < n; i++) {
        keys[i] = mr__double_to_key(d->score[i]);
        rows[i] = (double)i;
        double w = d->w ? d->w[i] : 1.0;
        W += w;
        P += w * d->y[i];
    }
    if (P <= 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "gain curve is undefined: no positive labels");
        goto done;
    }
    /* stable: ties stay in row order */
    if (mr__radix_sort_u64(keys, rows, n, keys + n, rows + n, 0) != 0) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory sorting %zu scores", n);
        goto done;
    }
    st = curve_alloc(out, n_bins, err);
    if (st != MR_OK) goto done;
    size_t m = 0, i = 0;
    double cw = 0, cp = 0;
    for (size_t k = 1; k <= n_bins; k++) {
        size_t cut = (size_t)(((unsigned __int128)k * n) / n_bins);
        if (cut == i && k < n_bins) continue;
        for (; i < cut; i++) {
            size_t row = (size_t)rows[i];
            double w = d->w ? d->w[row] : 1.0;
            cw += w;
            cp += w * d->y[row];
        }
        if (cw <= 0) continue;
        out->x[m] = cw / W;
        out->y[m] = cp / P;
        out->aux[m] = out->y[m] / out->x[m];
        m++;
    }
    out->n = m;
done:
    mr_free(keys);
    mr_free(rows);
    return st;
}

mr_status mr_curve_residuals(const mr_metric_data *d, size_t max_points, mr_curve *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    if (d->task != MR_TASK_REGRESSION) return MR_ERR(err, MR_E_INVALID_ARG, "residual plot: regression data expected");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    size_t m = max_points == 0 || d->n < max_points ? d->n : max_points;
    st = curve_alloc(out, m, err);
    if (st != MR_OK) return st;
    for (size_t j = 0; j < m; j++) {
        size_t i = (size_t)(((unsigned __int128)j * d->n) / m);
        out->x[j] = d->score[i];
        out->y[j] = d->y[i] - d->score[i];
        out->aux[j] = (double)i;
    }
    out->n = m;
    return MR_OK;
}
