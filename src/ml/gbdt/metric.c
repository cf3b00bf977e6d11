/* Evaluation metrics on raw scores. Sums run over fixed 64K-row blocks whose
 * partials are added in block order, so values are identical for any thread
 * count. AUC sorts (score, label) pairs; ties share their average rank. */
#include "gbdt_int.h"

#include <stdlib.h>

#define METRIC_BLOCK 65536

typedef struct mctx {
    mr_gbdt_metric m;
    int k;
    double alpha;
    const float *label;
    const double *score;
    double *partial; /* one per block */
} mctx;

static double row_loss(const mctx *c, size_t i)
{
    double y = c->label[i];
    const double *s = c->score + i * (size_t)c->k;
    switch (c->m) {
    case MR_GBDT_METRIC_LOGLOSS: {
        double p = 1.0 / (1.0 + exp(-s[0]));
        if (p < 1e-15) p = 1e-15;
        if (p > 1 - 1e-15) p = 1 - 1e-15;
        return y > 0.5 ? -log(p) : -log(1 - p);
    }
    case MR_GBDT_METRIC_ERROR: return (s[0] > 0) != (y > 0.5);
    case MR_GBDT_METRIC_RMSE:
    case MR_GBDT_METRIC_L2: return (s[0] - y) * (s[0] - y);
    case MR_GBDT_METRIC_L1: return fabs(s[0] - y);
    case MR_GBDT_METRIC_HUBER: {
        double d = fabs(s[0] - y);
        return d <= c->alpha ? 0.5 * d * d : c->alpha * (d - 0.5 * c->alpha);
    }
    case MR_GBDT_METRIC_MULTI_LOGLOSS: {
        double mx = s[0], sum = 0;
        for (int j = 1; j < c->k; j++) mx = s[j] > mx ? s[j] : mx;
        for (int j = 0; j < c->k; j++) sum += exp(s[j] - mx);
        double p = exp(s[(int)y] - mx) / sum;
        return -log(p < 1e-15 ? 1e-15 : p);
    }
    case MR_GBDT_METRIC_MULTI_ERROR: {
        int best = 0;
        for (int j = 1; j < c->k; j++)
            if (s[j] > s[best]) best = j;
        return best != (int)y;
    }
    default: return 0;
    }
}

static void sum_block(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    mctx *c = vctx;
    double s = 0;
    for (size_t i = begin; i < end; i++) s += row_loss(c, i);
    c->partial[begin / METRIC_BLOCK] = s;
}

typedef struct sl {
    double s;
    float y;
} sl;
static int cmp_sl(const void *a, const void *b)
{
    const sl *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return (x->y > y->y) - (x->y < y->y);
}

mr_status mr__auc(const float *label, const double *score, size_t n, double *out)
{
    sl *v = mr_malloc((n ? n : 1) * sizeof(sl));
    if (!v) return MR_E_NOMEM;
    double npos = 0;
    for (size_t i = 0; i < n; i++) {
        v[i].s = score[i];
        v[i].y = label[i] > 0.5f ? 1.0f : 0.0f;
        npos += v[i].y;
    }
    double nneg = (double)n - npos;
    if (npos == 0 || nneg == 0) {
        mr_free(v);
        *out = 0.5; /* undefined with one class: reported as chance level */
        return MR_OK;
    }
    qsort(v, n, sizeof(sl), cmp_sl);
    double rank_sum = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        double pos = 0;
        while (j < n && v[j].s == v[i].s) pos += v[j++].y;
        double avg_rank = 0.5 * ((double)i + 1 + (double)j); /* ranks i+1..j */
        rank_sum += pos * avg_rank;
        i = j;
    }
    mr_free(v);
    *out = (rank_sum - npos * (npos + 1) / 2) / (npos * nneg);
    return MR_OK;
}

mr_status mr__metric_eval(mr_gbdt_metric m, mr_gbdt_objective obj, int k, double alpha, const float *label,
                          const double *score, size_t n, int max_threads, double *out)
{
    (void)obj;
    *out = NAN;
    if (n == 0) return MR_OK;
    if (m == MR_GBDT_METRIC_AUC) return mr__auc(label, score, n, out);
    size_t nb = (n + METRIC_BLOCK - 1) / METRIC_BLOCK;
    double *partial = mr_malloc(nb * sizeof(double));
    if (!partial) return MR_E_NOMEM;
    mctx c = {.m = m, .k = k, .alpha = alpha, .label = label, .score = score, .partial = partial};
    mr_parallel_for_capped(n, METRIC_BLOCK, max_threads, sum_block, &c);
    double s = 0;
    for (size_t b = 0; b < nb; b++) s += partial[b];
    mr_free(partial);
    s /= (double)n;
    *out = m == MR_GBDT_METRIC_RMSE ? sqrt(s) : s;
    return MR_OK;
}

int mr__metric_higher_better(mr_gbdt_metric m) { return m == MR_GBDT_METRIC_AUC; }
