/* Point metrics over prediction arrays: input validation, the radix-sorted
 * ranked view behind ROC-AUC / average precision / thresholds, and the
 * binary, multiclass and regression metrics. Curves live in curves.c,
 * bootstrap / slices / subsampling / error analysis in bootstrap.c.
 *
 * Determinism: every floating-point sum is taken over fixed blocks of
 * MR__METRIC_BLOCK rows whose partials are added in block order, in the
 * caller or on the pool alike, so results never depend on the thread count. */
#include "ml/metrics_int.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Thread_local int mr__metric_serial;

/* sklearn >= 1.2 log_loss default eps="auto": the float64 machine epsilon
 * (older releases used 1e-15). */
#define LOGLOSS_EPS DBL_EPSILON

void mr_metric_data_binary(mr_metric_data *d, const double *y, const double *score, const double *w, size_t n)
{
    memset(d, 0, sizeof *d);
    d->task = MR_TASK_BINARY;
    d->y = y;
    d->score = score;
    d->w = w;
    d->n = n;
}

void mr_metric_data_multiclass(mr_metric_data *d, const double *y, const double *proba, size_t n_classes,
                               const double *w, size_t n)
{
    memset(d, 0, sizeof *d);
    d->task = MR_TASK_MULTICLASS;
    d->y = y;
    d->proba = proba;
    d->n_classes = n_classes;
    d->w = w;
    d->n = n;
}

void mr_metric_data_regression(mr_metric_data *d, const double *y, const double *pred, const double *w, size_t n)
{
    memset(d, 0, sizeof *d);
    d->task = MR_TASK_REGRESSION;
    d->y = y;
    d->score = pred;
    d->w = w;
    d->n = n;
}

static int use_pool(size_t n) { return n >= MR__METRIC_PAR_MIN && !mr__metric_serial && mr_pool_threads() > 1; }

/* ---- blocked reductions -------------------------------------------------
 * A kernel fills up to 6 partial sums for rows [b, e); partials are stored
 * per block and added in block order. */
#define RED_K 6
typedef void (*red_kernel)(const mr_metric_data *d, const void *arg, size_t b, size_t e, double *acc);
typedef struct red_job {
    const mr_metric_data *d;
    const void *arg;
    red_kernel k;
    double *partials; /* (n_blocks, RED_K) */
} red_job;

static void red_range(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    red_job *j = ctx;
    size_t blk = begin / MR__METRIC_BLOCK;
    double *acc = j->partials + blk * RED_K;
    for (int i = 0; i < RED_K; i++) acc[i] = 0;
    j->k(j->d, j->arg, begin, end, acc);
}

static mr_status reduce(const mr_metric_data *d, const void *arg, red_kernel k, double *out, mr_error *err)
{
    size_t n_blocks = (d->n + MR__METRIC_BLOCK - 1) / MR__METRIC_BLOCK;
    double local[4 * RED_K];
    double *partials = n_blocks <= 4 ? local : mr_calloc(n_blocks, RED_K * sizeof(double));
    if (!partials) return MR_ERR(err, MR_E_NOMEM, "out of memory (metric partial sums, %zu blocks)", n_blocks);
    red_job j = {.d = d, .arg = arg, .k = k, .partials = partials};
    if (use_pool(d->n)) {
        mr_parallel_for(d->n, MR__METRIC_BLOCK, red_range, &j);
    } else {
        for (size_t b = 0; b < d->n; b += MR__METRIC_BLOCK)
            red_range(&j, b, b + MR__METRIC_BLOCK < d->n ? b + MR__METRIC_BLOCK : d->n, 0);
    }
    for (int i = 0; i < RED_K; i++) out[i] = 0;
    for (size_t b = 0; b < n_blocks; b++)
        for (int i = 0; i < RED_K; i++) out[i] += partials[b * RED_K + i];
    if (partials != local) mr_free(partials);
    return MR_OK;
}

/* ---- validation ----------------------------------------------------------
 * First pass: per block, the first bad row (or n). Then the message is built
 * for the first bad row overall, so the error names the earliest row. */
typedef struct val_job {
    const mr_metric_data *d;
    int need_proba;
    size_t *first_bad; /* (n_blocks) */
    unsigned char *has_w; /* (n_blocks): any positive weight */
} val_job;

static int row_bad(const mr_metric_data *d, int need_proba, size_t i)
{
    double y = d->y[i];
    if (d->w && !(isfinite(d->w[i]) && d->w[i] >= 0)) return 1;
    switch (d->task) {
    case MR_TASK_BINARY: {
        double s = d->score[i];
        if (!(y == 0.0 || y == 1.0)) return 1;
        if (!isfinite(s)) return 1;
        if (need_proba && !(s >= 0.0 && s <= 1.0)) return 1;
        return 0;
    }
    case MR_TASK_MULTICLASS: {
        if (!(y >= 0 && y < (double)d->n_classes && y == floor(y))) return 1;
        const double *p = d->proba + i * d->n_classes;
        for (size_t k = 0; k < d->n_classes; k++)
            if (!(p[k] >= 0.0 && p[k] <= 1.0)) return 1;
        return 0;
    }
    case MR_TASK_REGRESSION:
        return !isfinite(y) || !isfinite(d->score[i]);
    }
    return 1;
}

static void val_range(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    val_job *j = ctx;
    size_t blk = begin / MR__METRIC_BLOCK;
    size_t bad = j->d->n;
    unsigned char hw = j->d->w == NULL;
    for (size_t i = begin; i < end; i++) {
        if (row_bad(j->d, j->need_proba, i)) {
            bad = i;
            break;
        }
        if (!hw && j->d->w[i] > 0) hw = 1;
    }
    j->first_bad[blk] = bad;
    j->has_w[blk] = hw;
}

static mr_status describe_bad_row(const mr_metric_data *d, int need_proba, size_t i, mr_error *err)
{
    mr_status st = MR_E_INVALID_ARG;
    size_t row = i + 1;
    double y = d->y[i];
    if (d->w && !(isfinite(d->w[i]) && d->w[i] >= 0))
        return MR_ERR(err, st, "row %zu: weight must be finite and >= 0, got %g", row, d->w[i]);
    switch (d->task) {
    case MR_TASK_BINARY:
        if (!(y == 0.0 || y == 1.0))
            return MR_ERR(err, st, "row %zu: binary label must be 0 or 1, got %g", row, y);
        if (isnan(d->score[i])) return MR_ERR(err, st, "row %zu: score is NaN", row);
        if (!isfinite(d->score[i])) return MR_ERR(err, st, "row %zu: score is infinite (%g)", row, d->score[i]);
        if (need_proba)
            return MR_ERR(err, st, "row %zu: probability must be in [0, 1], got %.17g", row, d->score[i]);
        break;
    case MR_TASK_MULTICLASS: {
        if (!(y >= 0 && y < (double)d->n_classes && y == floor(y)))
            return MR_ERR(err, st, "row %zu: class label must be an integer in [0, %zu), got %g", row,
                          d->n_classes, y);
        const double *p = d->proba + i * d->n_classes;
        for (size_t k = 0; k < d->n_classes; k++)
            if (!(p[k] >= 0.0 && p[k] <= 1.0))
                return MR_ERR(err, st, "row %zu: probability of class %zu must be in [0, 1], got %g", row, k,
                              p[k]);
        break;
    }
    case MR_TASK_REGRESSION:
        if (!isfinite(y)) return MR_ERR(err, st, "row %zu: target is not finite (%g)", row, y);
        return MR_ERR(err, st, "row %zu: prediction is not finite (%g)", row, d->score[i]);
    }
    return MR_ERR(err, MR_E_INTERNAL, "row %zu: invalid input", row);
}

mr_status mr_metric_validate(const mr_metric_data *d, int need_proba, mr_error *err)
{
    if (!d || !d->y) return MR_ERR(err, MR_E_INVALID_ARG, "metric input: no labels given");
    if (d->n == 0) return MR_ERR(err, MR_E_INVALID_ARG, "metric input is empty (0 rows)");
    if (d->task == MR_TASK_MULTICLASS) {
        if (!d->proba) return MR_ERR(err, MR_E_INVALID_ARG, "multiclass metric input: no probabilities given");
        if (d->n_classes < 2)
            return MR_ERR(err, MR_E_INVALID_ARG, "multiclass metric input: needs >= 2 classes, got %zu",
                          d->n_classes);
        if (d->n > SIZE_MAX / d->n_classes)
            return MR_ERR(err, MR_E_LIMIT, "multiclass metric input: %zu x %zu overflows", d->n, d->n_classes);
    } else if (d->task == MR_TASK_BINARY || d->task == MR_TASK_REGRESSION) {
        if (!d->score) return MR_ERR(err, MR_E_INVALID_ARG, "metric input: no scores/predictions given");
    } else {
        return MR_ERR(err, MR_E_INVALID_ARG, "metric input: unknown task %d", (int)d->task);
    }
    size_t n_blocks = (d->n + MR__METRIC_BLOCK - 1) / MR__METRIC_BLOCK;
    size_t first_local[4];
    unsigned char hw_local[4];
    size_t *first_bad = n_blocks <= 4 ? first_local : mr_calloc(n_blocks, sizeof(size_t));
    unsigned char *has_w = n_blocks <= 4 ? hw_local : mr_calloc(n_blocks, 1);
    mr_status st = MR_OK;
    if (!first_bad || !has_w) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory validating %zu rows", d->n);
        goto done;
    }
    val_job j = {.d = d, .need_proba = need_proba, .first_bad = first_bad, .has_w = has_w};
    if (use_pool(d->n)) {
        mr_parallel_for(d->n, MR__METRIC_BLOCK, val_range, &j);
    } else {
        for (size_t b = 0; b < d->n; b += MR__METRIC_BLOCK)
            val_range(&j, b, b + MR__METRIC_BLOCK < d->n ? b + MR__METRIC_BLOCK : d->n, 0);
    }
    int any_w = 0;
    for (size_t b = 0; b < n_blocks; b++) {
        if (first_bad[b] < d->n) {
            st = describe_bad_row(d, need_proba, first_bad[b], err);
            goto done;
        }
        any_w |= has_w[b];
    }
    if (!any_w) st = MR_ERR(err, MR_E_INVALID_ARG, "metric input: total sample weight is 0");
done:
    if (first_bad != first_local) mr_free(first_bad);
    if (has_w != hw_local) mr_free(has_w);
    return st;
}

/* ---- radix sort ----------------------------------------------------------
 * One most-significant pass on the top 16 bits scatters into 65,536 buckets
 * (stable, serial); each bucket is then sorted on its low 48 bits by stable
 * least-significant passes of 12 bits, skipping digits that are constant in
 * the bucket. Buckets are independent, so they go to the pool; the output is
 * the unique stable order, whatever thread ran which bucket. */
#define MSD_BITS 16
#define MSD_N ((size_t)1 << MSD_BITS)
#define LSD_BITS 12
#define LSD_N (1u << LSD_BITS)
#define LSD_PASSES 4

static void insertion_sort(uint64_t *k, double *p, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t kv = k[i];
        double pv = p ? p[i] : 0;
        size_t j = i;
        while (j > 0 && k[j - 1] > kv) {
            k[j] = k[j - 1];
            if (p) p[j] = p[j - 1];
            j--;
        }
        k[j] = kv;
        if (p) p[j] = pv;
    }
}

/* Sorts src[0..n) (in ktmp/ptmp) into dst (keys/payload) on bits 0..47. */
static void lsd_bucket(uint64_t *src, double *psrc, uint64_t *dst, double *pdst, size_t n)
{
    if (n <= 48) {
        insertion_sort(src, psrc, n);
        memcpy(dst, src, n * sizeof *dst);
        if (pdst) memcpy(pdst, psrc, n * sizeof *pdst);
        return;
    }
    uint32_t cnt[LSD_PASSES][LSD_N];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++) {
        uint64_t k = src[i];
        for (int p = 0; p < LSD_PASSES; p++) cnt[p][(k >> (p * LSD_BITS)) & (LSD_N - 1)]++;
    }
    uint64_t *a = src, *b = dst;
    double *pa = psrc, *pb = pdst;
    for (int p = 0; p < LSD_PASSES; p++) {
        uint32_t *c = cnt[p];
        unsigned shift = (unsigned)(p * LSD_BITS);
        if (c[(a[0] >> shift) & (LSD_N - 1)] == n) continue; /* constant digit */
        uint32_t sum = 0;
        for (unsigned v = 0; v < LSD_N; v++) {
            uint32_t t = c[v];
            c[v] = sum;
            sum += t;
        }
        if (pa) {
            for (size_t i = 0; i < n; i++) {
                uint32_t o = c[(a[i] >> shift) & (LSD_N - 1)]++;
                b[o] = a[i];
                pb[o] = pa[i];
            }
        } else {
            for (size_t i = 0; i < n; i++) b[c[(a[i] >> shift) & (LSD_N - 1)]++] = a[i];
        }
        uint64_t *t = a;
        a = b;
        b = t;
        double *pt = pa;
        pa = pb;
        pb = pt;
    }
    if (a != dst) {
        memcpy(dst, a, n * sizeof *dst);
        if (pdst) memcpy(pdst, pa, n * sizeof *pdst);
    }
}

typedef struct lsd_job {
    uint64_t *keys, *ktmp;
    double *pay, *ptmp;
    const size_t *off; /* (MSD_N + 1) */
} lsd_job;

static void lsd_range(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    lsd_job *j = ctx;
    for (size_t b = begin; b < end; b++) {
        size_t lo = j->off[b], n = j->off[b + 1] - lo;
        if (n == 0) continue;
        lsd_bucket(j->ktmp + lo, j->pay ? j->ptmp + lo : NULL, j->keys + lo, j->pay ? j->pay + lo : NULL, n);
    }
}

int mr__radix_sort_u64(uint64_t *keys, double *payload, size_t n, uint64_t *ktmp, double *ptmp, int parallel)
{
    if (n < 256) {
        insertion_sort(keys, payload, n);
        return 0;
    }
    /* Bucket offsets (MSD_N + 1) and scatter cursors (MSD_N): heap, not
     * static, so concurrent sorts (bootstrap workers) do not share them. */
    size_t *off = mr_calloc(2 * MSD_N + 1, sizeof(size_t));
    if (!off) return -1;
    size_t *pos = off + MSD_N + 1;
    for (size_t i = 0; i < n; i++) off[(keys[i] >> 48) + 1]++;
    for (size_t b = 0; b < MSD_N; b++) off[b + 1] += off[b];
    memcpy(pos, off, MSD_N * sizeof(size_t));
    if (payload) {
        for (size_t i = 0; i < n; i++) {
            size_t o = pos[keys[i] >> 48]++;
            ktmp[o] = keys[i];
            ptmp[o] = payload[i];
        }
    } else {
        for (size_t i = 0; i < n; i++) ktmp[pos[keys[i] >> 48]++] = keys[i];
    }
    lsd_job j = {.keys = keys, .ktmp = ktmp, .pay = payload, .ptmp = ptmp, .off = off};
    if (parallel) mr_parallel_for(MSD_N, 512, lsd_range, &j);
    else lsd_range(&j, 0, MSD_N, 0);
    mr_free(off);
    return 0;
}

uint64_t mr__double_to_key(double s)
{
    if (s == 0) s = 0.0; /* -0.0 ties with +0.0 */
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    u = (u >> 63) ? ~u : (u | 0x8000000000000000ULL); /* ascending image */
    return ~u;                                          /* descending */
}

double mr__key_to_double(uint64_t k)
{
    uint64_t u = ~k;
    u = (u >> 63) ? (u & 0x7fffffffffffffffULL) : ~u;
    double s;
    memcpy(&s, &u, sizeof s);
    return s;
}

/* ---- ranked view ---------------------------------------------------------*/
typedef struct sort_job {
    uint64_t *k[2], *kt;
    double *p[2], *pt;
    size_t n[2];
} sort_job;

mr_status mr__ranked_build(const mr_metric_data *d, mr__ranked *r, mr_error *err)
{
    memset(r, 0, sizeof *r);
    if (d->task != MR_TASK_BINARY)
        return MR_ERR(err, MR_E_INVALID_ARG, "this metric needs binary data (labels 0/1 and one score per row)");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    size_t n = d->n, n_pos = 0;
    for (size_t i = 0; i < n; i++) n_pos += d->y[i] == 1.0;
    size_t n_neg = n - n_pos;
    size_t big = n_pos > n_neg ? n_pos : n_neg;
    /* layout: pos keys, neg keys, tmp keys, [wpos, wneg, wtmp] */
    size_t per = sizeof(uint64_t) + (d->w ? sizeof(double) : 0);
    if (n + big < n || (n + big) > SIZE_MAX / per)
        return MR_ERR(err, MR_E_LIMIT, "metric input too large (%zu rows)", n);
    char *block = mr_malloc((n + big) * per);
    if (!block) return MR_ERR(err, MR_E_NOMEM, "out of memory sorting %zu scores", n);
    r->block = block;
    r->pos = (uint64_t *)block;
    r->neg = r->pos + n_pos;
    uint64_t *ktmp = r->neg + n_neg;
    double *wtmp = NULL;
    if (d->w) {
        r->wpos = (double *)(ktmp + big);
        r->wneg = r->wpos + n_pos;
        wtmp = r->wneg + n_neg;
    }
    r->n_pos = n_pos;
    r->n_neg = n_neg;
    size_t ip = 0, in = 0;
    double P = 0, N = 0;
    if (d->w) {
        for (size_t i = 0; i < n; i++) {
            uint64_t k = mr__double_to_key(d->score[i]);
            if (d->y[i] == 1.0) {
                r->wpos[ip] = d->w[i];
                r->pos[ip++] = k;
                P += d->w[i];
            } else {
                r->wneg[in] = d->w[i];
                r->neg[in++] = k;
                N += d->w[i];
            }
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uint64_t k = mr__double_to_key(d->score[i]);
            if (d->y[i] == 1.0) r->pos[ip++] = k;
            else r->neg[in++] = k;
        }
        P = (double)n_pos;
        N = (double)n_neg;
    }
    r->P = P;
    r->N = N;
    int par = use_pool(n);
    if (mr__radix_sort_u64(r->pos, r->wpos, n_pos, ktmp, wtmp, par) != 0 ||
        mr__radix_sort_u64(r->neg, r->wneg, n_neg, ktmp, wtmp, par) != 0) {
        mr__ranked_free(r);
        return MR_ERR(err, MR_E_NOMEM, "out of memory sorting %zu scores", n);
    }
    return MR_OK;
}

void mr__ranked_free(mr__ranked *r)
{
    if (!r) return;
    mr_free(r->block);
    memset(r, 0, sizeof *r);
}

/* ---- binary ranking metrics ----------------------------------------------*/
static mr_status auc_ap_ranked(const mr__ranked *r, double *auc_out, double *ap_out, mr_error *err)
{
    if (auc_out && (r->P <= 0 || r->N <= 0))
        return MR_ERR(err, MR_E_INVALID_ARG,
                      "ROC-AUC is undefined: only one class present (%zu positive, %zu negative rows "
                      "with positive weight needed on both sides)",
                      r->n_pos, r->n_neg);
    if (ap_out && r->P <= 0)
        return MR_ERR(err, MR_E_INVALID_ARG, "average precision is undefined: no positive labels (%zu rows)",
                      r->n_pos + r->n_neg);
    mr__walk wk = {.r = r};
    uint64_t key;
    double dtp, dfp, tp = 0, fp = 0, area = 0, ap = 0;
    uint64_t area2 = 0; /* unweighted: exact 2 * sum(dfp * (tp_prev + tp_new) / 2) */
    int exact = r->wpos == NULL;
    while (mr__walk_next(&wk, &key, &dtp, &dfp)) {
        double ntp = tp + dtp, nfp = fp + dfp;
        if (exact) area2 += (uint64_t)dfp * ((uint64_t)tp + (uint64_t)ntp);
        else area += dfp * (tp + ntp) * 0.5;
        if (dtp > 0) ap += (dtp / r->P) * (ntp / (ntp + nfp));
        tp = ntp;
        fp = nfp;
    }
    if (exact) area = (double)area2 * 0.5;
    if (auc_out) *auc_out = area / (r->P * r->N);
    if (ap_out) *ap_out = ap;
    return MR_OK;
}

mr_status mr_metric_auc_ap(const mr_metric_data *d, double *auc_out, double *ap_out, mr_error *err)
{
    mr__ranked r;
    mr_status st = mr__ranked_build(d, &r, err);
    if (st == MR_OK) st = auc_ap_ranked(&r, auc_out, ap_out, err);
    mr__ranked_free(&r);
    return st;
}

mr_status mr_metric_roc_auc(const mr_metric_data *d, double *out, mr_error *err)
{
    return mr_metric_auc_ap(d, out, NULL, err);
}

mr_status mr_metric_average_precision(const mr_metric_data *d, double *out, mr_error *err)
{
    return mr_metric_auc_ap(d, NULL, out, err);
}

/* ---- probability losses --------------------------------------------------*/
static void k_logloss(const mr_metric_data *d, const void *arg, size_t b, size_t e, double *acc)
{
    (void)arg;
    double s0 = 0, s1 = 0, sw = 0;
    for (size_t i = b; i < e; i++) {
        double p = d->score[i];
        p = p < LOGLOSS_EPS ? LOGLOSS_EPS : (p > 1 - LOGLOSS_EPS ? 1 - LOGLOSS_EPS : p);
        double q0 = 1 - p, s = q0 + p; /* sklearn renormalises the two columns */
        double l = -log((d->y[i] == 1.0 ? p : q0) / s);
        double w = d->w ? d->w[i] : 1.0;
        if (i & 1) s1 += w * l;
        else s0 += w * l;
        sw += w;
    }
    acc[0] = s0 + s1;
    acc[1] = sw;
}

mr_status mr_metric_logloss(const mr_metric_data *d, double *out, mr_error *err)
{
    if (d->task != MR_TASK_BINARY) return MR_ERR(err, MR_E_INVALID_ARG, "logloss: binary data expected (use mr_metric_multiclass for K classes)");
    mr_status st = mr_metric_validate(d, 1, err);
    if (st != MR_OK) return st;
    double acc[RED_K];
    st = reduce(d, NULL, k_logloss, acc, err);
    if (st == MR_OK) *out = acc[0] / acc[1];
    return st;
}

static void k_brier(const mr_metric_data *d, const void *arg, size_t b, size_t e, double *acc)
{
    (void)arg;
    for (size_t i = b; i < e; i++) {
        double r = d->y[i] - d->score[i], w = d->w ? d->w[i] : 1.0;
        acc[0] += w * r * r;
        acc[1] += w;
    }
}

mr_status mr_metric_brier(const mr_metric_data *d, double *out, mr_error *err)
{
    if (d->task != MR_TASK_BINARY) return MR_ERR(err, MR_E_INVALID_ARG, "brier: binary data expected");
    mr_status st = mr_metric_validate(d, 1, err);
    if (st != MR_OK) return st;
    double acc[RED_K];
    st = reduce(d, NULL, k_brier, acc, err);
    if (st == MR_OK) *out = acc[0] / acc[1];
    return st;
}

/* ---- threshold metrics ---------------------------------------------------*/
static void scores_from_cm(mr_binary_scores *s)
{
    mr_confusion2 c = s->cm;
    double tot = c.tn + c.fp + c.fn + c.tp;
    s->accuracy = tot > 0 ? (c.tp + c.tn) / tot : 0;
    s->precision = c.tp + c.fp > 0 ? c.tp / (c.tp + c.fp) : 0;
    s->recall = c.tp + c.fn > 0 ? c.tp / (c.tp + c.fn) : 0;
    double den = 2 * c.tp + c.fp + c.fn;
    s->f1 = den > 0 ? 2 * c.tp / den : 0;
}

static void k_confusion(const mr_metric_data *d, const void *arg, size_t b, size_t e, double *acc)
{
    double t = *(const double *)arg;
    for (size_t i = b; i < e; i++) {
        double w = d->w ? d->w[i] : 1.0;
        int pred = d->score[i] >= t, y = d->y[i] == 1.0;
        acc[(y << 1) | pred] += w; /* 0 tn, 1 fp, 2 fn, 3 tp */
    }
}

mr_status mr_metric_binary_at(const mr_metric_data *d, double threshold, mr_binary_scores *out, mr_error *err)
{
    if (d->task != MR_TASK_BINARY) return MR_ERR(err, MR_E_INVALID_ARG, "threshold metrics: binary data expected");
    if (isnan(threshold)) return MR_ERR(err, MR_E_INVALID_ARG, "threshold is NaN");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    double acc[RED_K];
    st = reduce(d, &threshold, k_confusion, acc, err);
    if (st != MR_OK) return st;
    memset(out, 0, sizeof *out);
    out->threshold = threshold;
    out->cm.tn = acc[0];
    out->cm.fp = acc[1];
    out->cm.fn = acc[2];
    out->cm.tp = acc[3];
    scores_from_cm(out);
    return MR_OK;
}

mr_status mr_metric_f1_optimal(const mr_metric_data *d, mr_binary_scores *out, mr_error *err)
{
    mr__ranked r;
    mr_status st = mr__ranked_build(d, &r, err);
    if (st != MR_OK) goto done;
    if (r.P <= 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "F1-optimal threshold is undefined: no positive labels");
        goto done;
    }
    mr__walk wk = {.r = &r};
    uint64_t key, best_key = 0;
    double dtp, dfp, tp = 0, fp = 0, best = -1, btp = 0, bfp = 0;
    while (mr__walk_next(&wk, &key, &dtp, &dfp)) {
        tp += dtp;
        fp += dfp;
        double den = tp + fp + r.P; /* 2tp + fp + fn */
        double f1 = den > 0 ? 2 * tp / den : 0;
        if (f1 > best) { /* strict: ties keep the larger threshold seen first */
            best = f1;
            best_key = key;
            btp = tp;
            bfp = fp;
        }
    }
    memset(out, 0, sizeof *out);
    out->threshold = mr__key_to_double(best_key);
    out->cm.tp = btp;
    out->cm.fp = bfp;
    out->cm.fn = r.P - btp;
    out->cm.tn = r.N - bfp;
    scores_from_cm(out);
done:
    mr__ranked_free(&r);
    return st;
}

/* ---- multiclass ----------------------------------------------------------*/
mr_status mr_metric_multiclass(const mr_metric_data *d, mr_multiclass_scores *out, double *confusion_out,
                               mr_error *err)
{
    if (d->task != MR_TASK_MULTICLASS) return MR_ERR(err, MR_E_INVALID_ARG, "multiclass metrics: multiclass data expected");
    mr_status st = mr_metric_validate(d, 1, err);
    if (st != MR_OK) return st;
    size_t K = d->n_classes;
    if (K > SIZE_MAX / K / sizeof(double)) return MR_ERR(err, MR_E_LIMIT, "too many classes (%zu)", K);
    double *cm = confusion_out ? confusion_out : mr_calloc(K * K, sizeof(double));
    if (!cm) return MR_ERR(err, MR_E_NOMEM, "out of memory (%zu x %zu confusion matrix)", K, K);
    if (confusion_out) memset(cm, 0, K * K * sizeof(double));
    /* Row-order sums: the confusion cells and the log loss are accumulated
     * per fixed block and blocks are added in order. */
    double ll = 0, sw = 0;
    for (size_t b = 0; b < d->n; b += MR__METRIC_BLOCK) {
        size_t e = b + MR__METRIC_BLOCK < d->n ? b + MR__METRIC_BLOCK : d->n;
        double bll = 0, bsw = 0;
        for (size_t i = b; i < e; i++) {
            const double *p = d->proba + i * K;
            size_t y = (size_t)d->y[i], am = 0;
            double s = 0;
            for (size_t k = 0; k < K; k++) {
                if (p[k] > p[am]) am = k;
                double c = p[k] < LOGLOSS_EPS ? LOGLOSS_EPS : (p[k] > 1 - LOGLOSS_EPS ? 1 - LOGLOSS_EPS : p[k]);
                s += c;
            }
            double py = p[y] < LOGLOSS_EPS ? LOGLOSS_EPS : (p[y] > 1 - LOGLOSS_EPS ? 1 - LOGLOSS_EPS : p[y]);
            double w = d->w ? d->w[i] : 1.0;
            bll += w * -log(py / s);
            bsw += w;
            cm[y * K + am] += w;
        }
        ll += bll;
        sw += bsw;
    }
    double tp_all = 0, fp_all = 0, fn_all = 0, macro = 0;
    for (size_t c = 0; c < K; c++) {
        double tp = cm[c * K + c], row = 0, col = 0;
        for (size_t k = 0; k < K; k++) {
            row += cm[c * K + k];
            col += cm[k * K + c];
        }
        double fp = col - tp, fn = row - tp, den = 2 * tp + fp + fn;
        macro += den > 0 ? 2 * tp / den : 0;
        tp_all += tp;
        fp_all += fp;
        fn_all += fn;
    }
    out->accuracy = tp_all / sw;
    out->macro_f1 = macro / (double)K;
    double den = 2 * tp_all + fp_all + fn_all;
    out->micro_f1 = den > 0 ? 2 * tp_all / den : 0;
    out->logloss = ll / sw;
    if (cm != confusion_out) mr_free(cm);
    return MR_OK;
}

/* ---- regression ----------------------------------------------------------*/
static void k_reg(const mr_metric_data *d, const void *arg, size_t b, size_t e, double *acc)
{
    (void)arg;
    for (size_t i = b; i < e; i++) {
        double y = d->y[i], r = y - d->score[i], w = d->w ? d->w[i] : 1.0;
        double ay = fabs(y);
        acc[0] += w * r * r;
        acc[1] += w * fabs(r);
        acc[2] += w * (fabs(r) / (ay > DBL_EPSILON ? ay : DBL_EPSILON));
        acc[3] += w * y;
        acc[4] += w;
    }
}

static void k_sstot(const mr_metric_data *d, const void *arg, size_t b, size_t e, double *acc)
{
    double mean = *(const double *)arg;
    for (size_t i = b; i < e; i++) {
        double r = d->y[i] - mean, w = d->w ? d->w[i] : 1.0;
        acc[0] += w * r * r;
    }
}

mr_status mr_metric_regression(const mr_metric_data *d, mr_regression_scores *out, mr_error *err)
{
    if (d->task != MR_TASK_REGRESSION) return MR_ERR(err, MR_E_INVALID_ARG, "regression metrics: regression data expected");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    double a[RED_K], t[RED_K];
    st = reduce(d, NULL, k_reg, a, err);
    if (st != MR_OK) return st;
    double sw = a[4], mean = a[3] / sw;
    st = reduce(d, &mean, k_sstot, t, err);
    if (st != MR_OK) return st;
    out->rmse = sqrt(a[0] / sw);
    out->mae = a[1] / sw;
    out->mape = a[2] / sw;
    if (t[0] != 0) out->r2 = 1 - a[0] / t[0];
    else out->r2 = a[0] == 0 ? 1.0 : 0.0;
    return MR_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mr__quantile_sorted(const double *v, size_t n, double q)
{
    if (n == 0) return NAN;
    double vi = (double)(n - 1) * q;
    double fl = floor(vi);
    size_t lo = fl < 0 ? 0 : (size_t)fl;
    if (lo >= n - 1) return v[n - 1];
    double g = vi - fl, a = v[lo], b = v[lo + 1], diff = b - a;
    return g >= 0.5 ? b - diff * (1 - g) : a + diff * g; /* numpy _lerp */
}

mr_status mr_metric_residual_quantiles(const mr_metric_data *d, const double *qs, size_t n_q, double *out,
                                       mr_error *err)
{
    if (d->task != MR_TASK_REGRESSION) return MR_ERR(err, MR_E_INVALID_ARG, "residual quantiles: regression data expected");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    for (size_t i = 0; i < n_q; i++)
        if (!(qs[i] >= 0 && qs[i] <= 1))
            return MR_ERR(err, MR_E_INVALID_ARG, "quantile %zu must be in [0, 1], got %g", i + 1, qs[i]);
    if (d->n > SIZE_MAX / sizeof(double)) return MR_ERR(err, MR_E_LIMIT, "too many rows");
    double *r = mr_malloc(d->n * sizeof(double));
    if (!r) return MR_ERR(err, MR_E_NOMEM, "out of memory (%zu residuals)", d->n);
    for (size_t i = 0; i < d->n; i++) r[i] = d->y[i] - d->score[i];
    qsort(r, d->n, sizeof(double), cmp_double);
    for (size_t i = 0; i < n_q; i++) out[i] = mr__quantile_sorted(r, d->n, qs[i]);
    mr_free(r);
    return MR_OK;
}

/* ---- by id ---------------------------------------------------------------*/
static const struct {
    const char *name;
    int higher_better;
} METRICS[MR_METRIC_COUNT_] = {
    {"roc_auc", 1},  {"average_precision", 1}, {"logloss", 0}, {"brier", 0},    {"accuracy", 1},
    {"precision", 1}, {"recall", 1},           {"f1", 1},      {"macro_f1", 1}, {"micro_f1", 1},
    {"rmse", 0},     {"mae", 0},               {"r2", 1},      {"mape", 0},
};

const char *mr_metric_name(mr_metric_id id)
{
    return (unsigned)id < MR_METRIC_COUNT_ ? METRICS[id].name : "unknown";
}

int mr_metric_higher_is_better(mr_metric_id id)
{
    return (unsigned)id < MR_METRIC_COUNT_ ? METRICS[id].higher_better : 1;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (lb >= 64 || la >= 64) return 99;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t sub = prev + (a[i - 1] != b[j - 1]);
            size_t best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            prev = cur;
        }
    }
    return row[lb];
}

mr_status mr_metric_by_name(const char *name, mr_metric_id *out, mr_error *err)
{
    size_t best = 0, bd = (size_t)-1;
    for (size_t i = 0; i < MR_METRIC_COUNT_; i++) {
        if (strcmp(name, METRICS[i].name) == 0) {
            *out = (mr_metric_id)i;
            return MR_OK;
        }
        size_t dd = edit_distance(name, METRICS[i].name);
        if (dd < bd) {
            bd = dd;
            best = i;
        }
    }
    mr_status st = MR_ERR(err, MR_E_NOT_FOUND, "unknown metric '%s'", name);
    if (bd <= 3) mr_error_hint(err, "did you mean %s?", METRICS[best].name);
    return st;
}

mr_status mr_metric_eval(mr_metric_id id, const mr_metric_data *d, double threshold, double *out, mr_error *err)
{
    mr_status st;
    switch (id) {
    case MR_METRIC_ROC_AUC:
        return mr_metric_roc_auc(d, out, err);
    case MR_METRIC_AVG_PRECISION:
        return mr_metric_average_precision(d, out, err);
    case MR_METRIC_LOGLOSS:
        if (d->task == MR_TASK_MULTICLASS) {
            mr_multiclass_scores m;
            st = mr_metric_multiclass(d, &m, NULL, err);
            if (st == MR_OK) *out = m.logloss;
            return st;
        }
        return mr_metric_logloss(d, out, err);
    case MR_METRIC_BRIER:
        return mr_metric_brier(d, out, err);
    case MR_METRIC_ACCURACY:
    case MR_METRIC_PRECISION:
    case MR_METRIC_RECALL:
    case MR_METRIC_F1: {
        if (d->task == MR_TASK_MULTICLASS && id == MR_METRIC_ACCURACY) {
            mr_multiclass_scores m;
            st = mr_metric_multiclass(d, &m, NULL, err);
            if (st == MR_OK) *out = m.accuracy;
            return st;
        }
        mr_binary_scores s;
        st = mr_metric_binary_at(d, threshold, &s, err);
        if (st == MR_OK)
            *out = id == MR_METRIC_ACCURACY ? s.accuracy
                 : id == MR_METRIC_PRECISION ? s.precision
                 : id == MR_METRIC_RECALL    ? s.recall
                                             : s.f1;
        return st;
    }
    case MR_METRIC_MACRO_F1:
    case MR_METRIC_MICRO_F1: {
        mr_multiclass_scores m;
        st = mr_metric_multiclass(d, &m, NULL, err);
        if (st == MR_OK) *out = id == MR_METRIC_MACRO_F1 ? m.macro_f1 : m.micro_f1;
        return st;
    }
    case MR_METRIC_RMSE:
    case MR_METRIC_MAE:
    case MR_METRIC_R2:
    case MR_METRIC_MAPE: {
        mr_regression_scores r;
        st = mr_metric_regression(d, &r, err);
        if (st == MR_OK)
            *out = id == MR_METRIC_RMSE ? r.rmse : id == MR_METRIC_MAE ? r.mae : id == MR_METRIC_R2 ? r.r2 : r.mape;
        return st;
    }
    case MR_METRIC_COUNT_:
        break;
    }
    return MR_ERR(err, MR_E_INVALID_ARG, "unknown metric id %d", (int)id);
}
