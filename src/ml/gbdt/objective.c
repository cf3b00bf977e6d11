/* Objectives: per-row gradients and hessians of the loss with respect to
 * the raw score, label checks, initial scores and output transforms.
 *
 *   regression (L2)  l = (s - y)^2 / 2          g = s - y            h = 1
 *   regression_l1    l = |s - y|                g = sign(s - y)      h = 1
 *   huber (delta a)  l = d^2/2 | a(|d| - a/2)   g = clip(s - y, +-a) h = 1
 *   binary           l = log(1 + e^-s) + (1-y)s g = p - y            h = p(1 - p)
 *   multiclass       l = -log softmax(s)_y      g_c = p_c - [y = c]  h_c = K/(K-1) p_c(1 - p_c)
 * (the multiclass hessian factor is LightGBM's). Hessians are floored at
 * 1e-16 so that a saturated leaf keeps a finite output. */
#include "gbdt_int.h"

#include <stdlib.h>

#define HESS_MIN 1e-16

void mr__objective_grad(mr_gbdt_objective obj, int k, double alpha, const float *label, const double *score,
                        size_t begin, size_t end, float *grad, float *hess)
{
    switch (obj) {
    case MR_GBDT_REGRESSION:
        for (size_t i = begin; i < end; i++) {
            grad[i] = (float)(score[i] - label[i]);
            hess[i] = 1.0f;
        }
        break;
    case MR_GBDT_REGRESSION_L1:
        for (size_t i = begin; i < end; i++) {
            double dlt = score[i] - label[i];
            grad[i] = dlt > 0 ? 1.0f : dlt < 0 ? -1.0f : 0.0f;
            hess[i] = 1.0f;
        }
        break;
    case MR_GBDT_HUBER:
        for (size_t i = begin; i < end; i++) {
            double dlt = score[i] - label[i];
            grad[i] = (float)(fabs(dlt) <= alpha ? dlt : dlt > 0 ? alpha : -alpha);
            hess[i] = 1.0f;
        }
        break;
    case MR_GBDT_BINARY:
        for (size_t i = begin; i < end; i++) {
            double p = 1.0 / (1.0 + exp(-score[i]));
            double h = p * (1.0 - p);
            grad[i] = (float)(p - label[i]);
            hess[i] = (float)(h < HESS_MIN ? HESS_MIN : h);
        }
        break;
    case MR_GBDT_MULTICLASS: {
        const double factor = (double)k / (double)(k - 1);
        for (size_t i = begin; i < end; i++) {
            const double *s = score + i * (size_t)k;
            double mx = s[0];
            for (int c = 1; c < k; c++) mx = s[c] > mx ? s[c] : mx;
            double sum = 0;
            for (int c = 0; c < k; c++) sum += exp(s[c] - mx);
            int y = (int)label[i];
            for (int c = 0; c < k; c++) {
                double p = exp(s[c] - mx) / sum;
                double h = factor * p * (1.0 - p);
                grad[i * (size_t)k + c] = (float)(p - (c == y ? 1.0 : 0.0));
                hess[i * (size_t)k + c] = (float)(h < HESS_MIN ? HESS_MIN : h);
            }
        }
        break;
    }
    }
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void mr__objective_init_score(mr_gbdt_objective obj, int k, const float *label, size_t n, double *init)
{
    for (int c = 0; c < k; c++) init[c] = 0;
    if (n == 0) return;
    switch (obj) {
    case MR_GBDT_REGRESSION:
    case MR_GBDT_HUBER: {
        double s = 0;
        for (size_t i = 0; i < n; i++) s += label[i];
        init[0] = s / (double)n;
        break;
    }
    case MR_GBDT_REGRESSION_L1: {
        float *tmp = mr_malloc(n * sizeof(float));
        if (!tmp) break; /* 0 is a valid (if slower) start */
        memcpy(tmp, label, n * sizeof(float));
        qsort(tmp, n, sizeof(float), cmp_float);
        init[0] = n % 2 ? tmp[n / 2] : 0.5 * ((double)tmp[n / 2 - 1] + (double)tmp[n / 2]);
        mr_free(tmp);
        break;
    }
    case MR_GBDT_BINARY: {
        double s = 0;
        for (size_t i = 0; i < n; i++) s += label[i];
        double p = s / (double)n;
        if (p < 1e-15) p = 1e-15;
        if (p > 1 - 1e-15) p = 1 - 1e-15;
        init[0] = log(p / (1 - p));
        break;
    }
    case MR_GBDT_MULTICLASS: {
        for (size_t i = 0; i < n; i++) init[(int)label[i]] += 1.0;
        for (int c = 0; c < k; c++) {
            double p = init[c] / (double)n;
            init[c] = log(p < 1e-15 ? 1e-15 : p);
        }
        break;
    }
    }
}

mr_status mr__objective_check_labels(mr_gbdt_objective obj, int k, const float *label, size_t n, mr_error *err)
{
    for (size_t i = 0; i < n; i++) {
        float y = label[i];
        const char *bad = NULL;
        if (y != y)
            bad = "is NaN";
        else if (isinf(y))
            bad = "is infinite";
        else if (obj == MR_GBDT_BINARY && y != 0.0f && y != 1.0f)
            bad = "is not 0 or 1 (objective binary)";
        else if (obj == MR_GBDT_MULTICLASS && (y < 0 || y >= (float)k || y != floorf(y)))
            bad = "is not a class index in [0, num_class) (objective multiclass)";
        if (bad) {
            MR_ERR(err, MR_E_INVALID_ARG, "label %s at row %zu (value %g)", bad, i + 1, (double)y);
            if (err) err->row = (long)(i + 1);
            return MR_E_INVALID_ARG;
        }
    }
    return MR_OK;
}

void mr__objective_transform(mr_gbdt_objective obj, int k, double *v)
{
    if (obj == MR_GBDT_BINARY) {
        v[0] = 1.0 / (1.0 + exp(-v[0]));
    } else if (obj == MR_GBDT_MULTICLASS) {
        double mx = v[0], sum = 0;
        for (int c = 1; c < k; c++) mx = v[c] > mx ? v[c] : mx;
        for (int c = 0; c < k; c++) {
            v[c] = exp(v[c] - mx);
            sum += v[c];
        }
        for (int c = 0; c < k; c++) v[c] /= sum;
    }
}

mr_gbdt_metric mr__objective_default_metric(mr_gbdt_objective obj)
{
    switch (obj) {
    case MR_GBDT_BINARY: return MR_GBDT_METRIC_LOGLOSS;
    case MR_GBDT_MULTICLASS: return MR_GBDT_METRIC_MULTI_LOGLOSS;
    case MR_GBDT_REGRESSION_L1: return MR_GBDT_METRIC_L1;
    case MR_GBDT_HUBER: return MR_GBDT_METRIC_HUBER;
    default: return MR_GBDT_METRIC_L2;
    }
}
