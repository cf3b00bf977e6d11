/* Seeded parallel bootstrap intervals, the fast tier's stratified
 * subsample, slice metrics with the "significantly worse" flag, and the
 * error-analysis lists (most confident wrong predictions, extreme
 * residuals).
 *
 * Bootstrap essay. Resample r is a pure function of (seed, r): its row
 * stream is splitmix64 started from splitmix64(base + r) with base =
 * splitmix64(seed) (so seeds s and s+1 share no resample), and row j of the
 * resample is rand_below(n) drawn j-th from that stream. Resamples are
 * independent jobs on the core pool (one block each); each worker gathers
 * its resample into per-thread scratch and evaluates the metric serially
 * (mr__metric_serial stops nested pool use, the pool is not reentrant). The
 * value of resample r goes to values[r] -- one writer per slot -- and the
 * interval is read from the sorted values, so neither scheduling nor the
 * thread count can change a bit of the result. */
#include "ml/metrics_int.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ---- bootstrap -----------------------------------------------------------*/
typedef struct scratch {
    double *y, *score, *proba, *w;
} scratch;

typedef struct boot_job {
    mr_metric_fn fn;
    void *ctx;
    const mr_metric_data *d;
    uint64_t base;         /* splitmix64(seed): adjacent seeds share no resample */
    double *values;        /* (n_resamples) */
    unsigned char *ok;     /* (n_resamples): 1 defined, 0 undefined, RESAMPLE_NOMEM */
    scratch *scr;          /* (n_threads) */
} boot_job;

/* A resample whose metric ran out of memory: not an undefined resample (it
 * would silently change n_valid and the interval) but the run's error. */
#define RESAMPLE_NOMEM 2

static void boot_one(boot_job *j, size_t r, scratch *s)
{
    const mr_metric_data *d = j->d;
    uint64_t st = j->base + (uint64_t)r;
    st = mr_splitmix64(&st);
    size_t n = d->n, K = d->n_classes;
    for (size_t i = 0; i < n; i++) {
        size_t src = mr__rand_below(&st, n);
        s->y[i] = d->y[src];
        if (d->score) s->score[i] = d->score[src];
        if (d->proba) memcpy(s->proba + i * K, d->proba + src * K, K * sizeof(double));
        if (d->w) s->w[i] = d->w[src];
    }
    mr_metric_data rd = *d;
    rd.y = s->y;
    rd.score = d->score ? s->score : NULL;
    rd.proba = d->proba ? s->proba : NULL;
    rd.w = d->w ? s->w : NULL;
    double v = NAN;
    mr_status st_r = j->fn(&rd, j->ctx, &v, NULL);
    j->ok[r] = st_r == MR_E_NOMEM ? RESAMPLE_NOMEM : st_r == MR_OK && !isnan(v);
    j->values[r] = v;
}

static void boot_range(void *ctx, size_t begin, size_t end, int tid)
{
    boot_job *j = ctx;
    int prev = mr__metric_serial;
    mr__metric_serial = 1;
    for (size_t r = begin; r < end; r++) boot_one(j, r, &j->scr[tid]);
    mr__metric_serial = prev;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The percentile interval of the resamples on which the metric is
 * defined; NaN when more than half failed. Compacts values in place. */
static void interval_from(double *values, const unsigned char *ok, size_t n_resamples, double alpha, mr_interval *out)
{
    size_t nv = 0;
    for (size_t r = 0; r < n_resamples; r++)
        if (ok[r]) values[nv++] = values[r];
    out->n_valid = nv;
    out->n_failed = n_resamples - nv;
    if (nv > 0 && nv * 2 >= n_resamples) {
        qsort(values, nv, sizeof(double), cmp_double);
        out->lo = mr__quantile_sorted(values, nv, alpha / 2);
        out->hi = mr__quantile_sorted(values, nv, 1 - alpha / 2);
    }
}

/* Checks shared by both bootstrap paths. */
static mr_status boot_args(size_t n_resamples, double alpha, mr_interval *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    out->lo = out->hi = NAN;
    if (!(alpha > 0 && alpha < 1)) return MR_ERR(err, MR_E_INVALID_ARG, "bootstrap: alpha must be in (0, 1), got %g", alpha);
    if (n_resamples < 1 || n_resamples > 1000000)
        return MR_ERR(err, MR_E_INVALID_ARG, "bootstrap: n_resamples must be in [1, 1000000], got %zu", n_resamples);
    return MR_OK;
}

mr_status mr_bootstrap(mr_metric_fn fn, void *ctx, const mr_metric_data *d, size_t n_resamples, double alpha,
                       uint64_t seed, int threads, mr_interval *out, mr_error *err)
{
    mr_status st = boot_args(n_resamples, alpha, out, err);
    if (st != MR_OK) return st;
    st = fn(d, ctx, &out->point, err);
    if (st != MR_OK) return st;
    size_t n = d->n, K = d->task == MR_TASK_MULTICLASS ? d->n_classes : 0;
    int use_pool = threads != 1 && mr_pool_threads() > 1 && n_resamples > 1;
    size_t n_thr = use_pool ? (size_t)mr_pool_threads() : 1;
    /* per thread: y, score, w (n each) + proba (n * K) */
    size_t per = 3, cells;
    if (K && n > SIZE_MAX / K) return MR_ERR(err, MR_E_LIMIT, "bootstrap: input too large");
    cells = n * K;
    if (n > (SIZE_MAX / sizeof(double) - cells) / per || (per * n + cells) > SIZE_MAX / sizeof(double) / n_thr)
        return MR_ERR(err, MR_E_LIMIT, "bootstrap: input too large (%zu rows)", n);
    size_t per_thr = per * n + cells;
    double *mem = mr_malloc(per_thr * n_thr * sizeof(double));
    scratch *scr = mr_calloc(n_thr, sizeof(scratch));
    double *values = mr_malloc(n_resamples * sizeof(double));
    unsigned char *ok = mr_calloc(n_resamples, 1);
    if (!mem || !scr || !values || !ok) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (bootstrap of %zu rows x %zu threads)", n, n_thr);
        goto done;
    }
    for (size_t t = 0; t < n_thr; t++) {
        double *base = mem + t * per_thr;
        scr[t].y = base;
        scr[t].score = base + n;
        scr[t].w = base + 2 * n;
        scr[t].proba = base + 3 * n;
    }
    uint64_t base = seed;
    base = mr_splitmix64(&base);
    boot_job j = {.fn = fn, .ctx = ctx, .d = d, .base = base, .values = values, .ok = ok, .scr = scr};
    if (use_pool) mr_parallel_for(n_resamples, 1, boot_range, &j);
    else boot_range(&j, 0, n_resamples, 0);
    if (memchr(ok, RESAMPLE_NOMEM, n_resamples)) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory computing a bootstrap resample");
        goto done;
    }
    interval_from(values, ok, n_resamples, alpha, out);
done:
    mr_free(mem);
    mr_free(scr);
    mr_free(values);
    mr_free(ok);
    return st;
}

typedef struct by_id {
    mr_metric_id id;
    double threshold;
} by_id;

static mr_status eval_by_id(const mr_metric_data *d, void *ctx, double *out, mr_error *err)
{
    by_id *b = ctx;
    return mr_metric_eval(b->id, d, b->threshold, out, err);
}

/* ---- ranking metrics: sort once, resample by multiplicity ----------------
 * ROC-AUC and average precision only need, for each distinct score, how
 * much positive and negative weight sits there. A resample draws the same
 * rows as mr_bootstrap does (the same stream, row j = rand_below(n) drawn
 * j-th), but instead of gathering and re-sorting them it counts how often
 * each original row was drawn and walks the scores sorted once, weighting
 * each row by its count. The groups, the sums and the formulas are those
 * of the sorted resample (auc_ap_ranked in metrics.c): unweighted data
 * gives the same integers and therefore the same bits; with row weights,
 * count * w may round differently from adding w count times, in the last
 * bits. O(n) per resample instead of a sort. */
typedef struct rank_job {
    const mr_metric_data *d;
    int want_ap;
    const uint64_t *pos, *neg;     /* sorted keys (descending order of score) */
    const uint32_t *ipos, *ineg;   /* original row of each */
    size_t n_pos, n_neg;
    uint64_t base;
    double *values;
    unsigned char *ok;
    uint32_t *cnt;                 /* per thread: n */
} rank_job;

static void rank_one(rank_job *j, size_t r, uint32_t *cnt)
{
    const mr_metric_data *d = j->d;
    const size_t n = d->n;
    uint64_t st = j->base + (uint64_t)r;
    st = mr_splitmix64(&st);
    memset(cnt, 0, n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) cnt[mr__rand_below(&st, n)]++;
    const double *w = d->w;
    double P = 0, N = 0;
    uint64_t Pi = 0, Ni = 0;
    if (w) {
        for (size_t i = 0; i < j->n_pos; i++) P += (double)cnt[j->ipos[i]] * w[j->ipos[i]];
        for (size_t i = 0; i < j->n_neg; i++) N += (double)cnt[j->ineg[i]] * w[j->ineg[i]];
    } else {
        for (size_t i = 0; i < j->n_pos; i++) Pi += cnt[j->ipos[i]];
        for (size_t i = 0; i < j->n_neg; i++) Ni += cnt[j->ineg[i]];
        P = (double)Pi;
        N = (double)Ni;
    }
    j->ok[r] = 0;
    j->values[r] = NAN;
    if (j->want_ap ? !(P > 0) : !(P > 0 && N > 0)) return; /* one class: undefined, as for a sorted resample */
    size_t a = 0, b = 0;
    double tp = 0, fp = 0, area = 0, ap = 0;
    uint64_t area2 = 0;
    while (a < j->n_pos || b < j->n_neg) {
        uint64_t k;
        if (a < j->n_pos && b < j->n_neg) k = j->pos[a] < j->neg[b] ? j->pos[a] : j->neg[b];
        else k = a < j->n_pos ? j->pos[a] : j->neg[b];
        double dtp = 0, dfp = 0;
        if (w) {
            for (; a < j->n_pos && j->pos[a] == k; a++) dtp += (double)cnt[j->ipos[a]] * w[j->ipos[a]];
            for (; b < j->n_neg && j->neg[b] == k; b++) dfp += (double)cnt[j->ineg[b]] * w[j->ineg[b]];
        } else {
            uint64_t ct = 0, cf = 0;
            for (; a < j->n_pos && j->pos[a] == k; a++) ct += cnt[j->ipos[a]];
            for (; b < j->n_neg && j->neg[b] == k; b++) cf += cnt[j->ineg[b]];
            if (ct == 0 && cf == 0) continue; /* no drawn row has this score */
            dtp = (double)ct;
            dfp = (double)cf;
        }
        if (w && dtp == 0 && dfp == 0) continue;
        double ntp = tp + dtp, nfp = fp + dfp;
        if (!w) area2 += (uint64_t)dfp * ((uint64_t)tp + (uint64_t)ntp);
        else area += dfp * (tp + ntp) * 0.5;
        if (dtp > 0) ap += (dtp / P) * (ntp / (ntp + nfp));
        tp = ntp;
        fp = nfp;
    }
    if (!w) area = (double)area2 * 0.5;
    double v = j->want_ap ? ap : area / (P * N);
    j->ok[r] = !isnan(v);
    j->values[r] = v;
}

static void rank_range(void *ctx, size_t begin, size_t end, int tid)
{
    rank_job *j = ctx;
    for (size_t r = begin; r < end; r++) rank_one(j, r, j->cnt + (size_t)tid * j->d->n);
}

typedef struct key_row {
    uint64_t k;
    uint32_t row;
} key_row;

static int cmp_key_row(const void *a, const void *b)
{
    const key_row *x = a, *y = b;
    if (x->k != y->k) return x->k < y->k ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static mr_status bootstrap_rank(mr_metric_id id, const mr_metric_data *d, size_t n_resamples, double alpha,
                                uint64_t seed, int threads, mr_interval *out, mr_error *err)
{
    mr_status st = boot_args(n_resamples, alpha, out, err);
    if (st != MR_OK) return st;
    st = mr_metric_eval(id, d, 0.5, &out->point, err); /* validates the data, too */
    if (st != MR_OK) return st;
    const size_t n = d->n;
    int use_pool = threads != 1 && mr_pool_threads() > 1 && n_resamples > 1;
    size_t n_thr = use_pool ? (size_t)mr_pool_threads() : 1;
    if (n_thr > SIZE_MAX / sizeof(uint32_t) / (n ? n : 1)) return MR_ERR(err, MR_E_LIMIT, "bootstrap: input too large");
    key_row *kr = mr_malloc((n ? n : 1) * sizeof(key_row));
    uint64_t *keys = mr_malloc((n ? n : 1) * sizeof(uint64_t));
    uint32_t *rows = mr_malloc((n ? n : 1) * sizeof(uint32_t));
    uint32_t *cnt = mr_malloc(n_thr * (n ? n : 1) * sizeof(uint32_t));
    double *values = mr_malloc(n_resamples * sizeof(double));
    unsigned char *ok = mr_calloc(n_resamples, 1);
    if (!kr || !keys || !rows || !cnt || !values || !ok) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (bootstrap of %zu rows)", n);
        goto done;
    }
    /* positives first, then negatives, each by descending score */
    size_t n_pos = 0;
    for (size_t i = 0; i < n; i++) n_pos += d->y[i] == 1.0;
    size_t ip = 0, in = n_pos;
    for (size_t i = 0; i < n; i++) {
        key_row e = {mr__double_to_key(d->score[i]), (uint32_t)i};
        kr[d->y[i] == 1.0 ? ip++ : in++] = e;
    }
    qsort(kr, n_pos, sizeof(key_row), cmp_key_row);
    qsort(kr + n_pos, n - n_pos, sizeof(key_row), cmp_key_row);
    for (size_t i = 0; i < n; i++) {
        keys[i] = kr[i].k;
        rows[i] = kr[i].row;
    }
    uint64_t base = seed;
    base = mr_splitmix64(&base);
    rank_job j = {.d = d, .want_ap = id == MR_METRIC_AVG_PRECISION, .pos = keys, .neg = keys + n_pos, .ipos = rows,
                  .ineg = rows + n_pos, .n_pos = n_pos, .n_neg = n - n_pos, .base = base, .values = values, .ok = ok,
                  .cnt = cnt};
    if (use_pool) mr_parallel_for(n_resamples, 1, rank_range, &j);
    else rank_range(&j, 0, n_resamples, 0);
    interval_from(values, ok, n_resamples, alpha, out);
done:
    mr_free(kr);
    mr_free(keys);
    mr_free(rows);
    mr_free(cnt);
    mr_free(values);
    mr_free(ok);
    return st;
}

mr_status mr_bootstrap_metric(mr_metric_id id, double threshold, const mr_metric_data *d, size_t n_resamples,
                              double alpha, uint64_t seed, int threads, mr_interval *out, mr_error *err)
{
    if ((id == MR_METRIC_ROC_AUC || id == MR_METRIC_AVG_PRECISION) && d->task == MR_TASK_BINARY && d->n < UINT32_MAX &&
        !getenv("MILLRACE_BOOTSTRAP_RESORT"))
        return bootstrap_rank(id, d, n_resamples, alpha, seed, threads, out, err);
    by_id b = {id, threshold};
    return mr_bootstrap(eval_by_id, &b, d, n_resamples, alpha, seed, threads, out, err);
}

/* ---- stratified subsample ------------------------------------------------*/
#define MAX_EXACT_STRATA 256
#define QUANTILE_STRATA 10

mr_status mr_metric_subsample_stratified(const double *labels, size_t n, size_t size, uint64_t seed,
                                         size_t *idx_out, size_t *n_out, mr_error *err)
{
    *n_out = 0;
    if (n == 0) return MR_ERR(err, MR_E_INVALID_ARG, "subsample: input is empty (0 rows)");
    for (size_t i = 0; i < n; i++)
        if (isnan(labels[i])) return MR_ERR(err, MR_E_INVALID_ARG, "subsample: row %zu: label is NaN", i + 1);
    if (size >= n) {
        for (size_t i = 0; i < n; i++) idx_out[i] = i;
        *n_out = n;
        return MR_OK;
    }
    mr_status st = MR_OK;
    double *sorted = mr_malloc(n * sizeof(double));
    uint32_t *stratum = mr_malloc(n * sizeof(uint32_t));
    size_t *rows = mr_malloc(n * sizeof(size_t));
    size_t *cnt = mr_calloc(MAX_EXACT_STRATA + 1, sizeof(size_t));
    size_t *start = mr_calloc(MAX_EXACT_STRATA + 2, sizeof(size_t));
    size_t *quota = mr_calloc(MAX_EXACT_STRATA + 1, sizeof(size_t));
    unsigned char *pick = mr_calloc(n, 1);
    if (!sorted || !stratum || !rows || !cnt || !start || !quota || !pick) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (subsample of %zu rows)", n);
        goto done;
    }
    memcpy(sorted, labels, n * sizeof(double));
    qsort(sorted, n, sizeof(double), cmp_double);
    size_t n_uniq = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) sorted[n_uniq++] = sorted[i];
    size_t n_str;
    if (n_uniq <= MAX_EXACT_STRATA) {
        n_str = n_uniq;
        for (size_t i = 0; i < n; i++) {
            size_t lo = 0, hi = n_uniq - 1;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (sorted[mid] < labels[i]) lo = mid + 1;
                else hi = mid;
            }
            stratum[i] = (uint32_t)lo;
        }
    } else {
        /* continuous label: deciles of the distinct values */
        n_str = QUANTILE_STRATA;
        double edges[QUANTILE_STRATA - 1];
        for (size_t k = 1; k < QUANTILE_STRATA; k++) edges[k - 1] = sorted[(n_uniq * k) / QUANTILE_STRATA];
        for (size_t i = 0; i < n; i++) {
            uint32_t s = 0;
            while (s < QUANTILE_STRATA - 1 && labels[i] >= edges[s]) s++;
            stratum[i] = s;
        }
    }
    for (size_t i = 0; i < n; i++) cnt[stratum[i]]++;
    for (size_t s = 0; s < n_str; s++) start[s + 1] = start[s] + cnt[s];
    {
        size_t *fill = quota; /* borrow as cursors, reset below */
        for (size_t s = 0; s < n_str; s++) fill[s] = start[s];
        for (size_t i = 0; i < n; i++) rows[fill[stratum[i]]++] = i;
    }
    /* largest remainder: floor shares, then +1 by remainder (ties: lower stratum) */
    size_t given = 0;
    for (size_t s = 0; s < n_str; s++) {
        quota[s] = (size_t)(((unsigned __int128)size * cnt[s]) / n);
        given += quota[s];
    }
    while (given < size) {
        size_t best = 0;
        uint64_t best_rem = 0;
        int found = 0;
        for (size_t s = 0; s < n_str; s++) {
            if (quota[s] >= cnt[s]) continue;
            uint64_t rem = (uint64_t)(((unsigned __int128)size * cnt[s]) % n);
            if (quota[s] > (size_t)(((unsigned __int128)size * cnt[s]) / n)) rem = 0; /* already bumped */
            if (!found || rem > best_rem) {
                best = s;
                best_rem = rem;
                found = 1;
            }
        }
        quota[best]++;
        given++;
    }
    /* every stratum gets a row when size allows: take from the largest quota */
    if (size >= n_str) {
        for (size_t s = 0; s < n_str; s++) {
            if (quota[s] > 0 || cnt[s] == 0) continue;
            size_t big = 0;
            for (size_t t = 1; t < n_str; t++)
                if (quota[t] > quota[big]) big = t;
            if (quota[big] <= 1) break;
            quota[big]--;
            quota[s]++;
        }
    }
    for (size_t s = 0; s < n_str; s++) {
        uint64_t rs = seed + 0x632be59bd9b4e019ULL * (uint64_t)(s + 1);
        rs = mr_splitmix64(&rs);
        size_t *r = rows + start[s], c = cnt[s];
        for (size_t k = 0; k < quota[s]; k++) { /* partial Fisher-Yates */
            size_t j = k + mr__rand_below(&rs, c - k);
            size_t t = r[k];
            r[k] = r[j];
            r[j] = t;
            pick[r[k]] = 1;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (pick[i]) idx_out[m++] = i;
    *n_out = m;
done:
    mr_free(sorted);
    mr_free(stratum);
    mr_free(rows);
    mr_free(cnt);
    mr_free(start);
    mr_free(quota);
    mr_free(pick);
    return st;
}

/* ---- slices --------------------------------------------------------------*/
void mr_slice_opts_init(mr_slice_opts *o)
{
    memset(o, 0, sizeof *o);
    o->metric = MR_METRIC_ROC_AUC;
    o->threshold = 0.5;
    o->n_resamples = 200;
    o->alpha = 0.05;
    o->seed = 0;
    o->threads = 0;
    o->min_rows = 10;
}

typedef struct gather {
    double *y, *score, *proba, *w;
} gather;

static mr_status gather_alloc(const mr_metric_data *d, gather *g, mr_error *err)
{
    memset(g, 0, sizeof *g);
    size_t n = d->n, K = d->n_classes;
    g->y = mr_malloc(n * sizeof(double));
    g->score = d->score ? mr_malloc(n * sizeof(double)) : NULL;
    g->proba = d->proba ? mr_calloc(n * K, sizeof(double)) : NULL;
    g->w = d->w ? mr_malloc(n * sizeof(double)) : NULL;
    if (!g->y || (d->score && !g->score) || (d->proba && !g->proba) || (d->w && !g->w))
        return MR_ERR(err, MR_E_NOMEM, "out of memory (slice buffers for %zu rows)", n);
    return MR_OK;
}

static void gather_free(gather *g)
{
    mr_free(g->y);
    mr_free(g->score);
    mr_free(g->proba);
    mr_free(g->w);
}

/* member(i) decides the rows of one slice; fills sub from g. */
static size_t gather_rows(const mr_metric_data *d, gather *g, const int32_t *codes, int32_t code, const double *x,
                          double lo, double hi, int closed, mr_metric_data *sub)
{
    size_t m = 0, K = d->n_classes;
    for (size_t i = 0; i < d->n; i++) {
        int in;
        if (codes) in = codes[i] == code;
        else if (isnan(lo)) in = isnan(x[i]);
        else in = x[i] >= lo && (closed ? x[i] <= hi : x[i] < hi);
        if (!in) continue;
        g->y[m] = d->y[i];
        if (g->score) g->score[m] = d->score[i];
        if (g->proba) memcpy(g->proba + m * K, d->proba + i * K, K * sizeof(double));
        if (g->w) g->w[m] = d->w[i];
        m++;
    }
    *sub = *d;
    sub->n = m;
    sub->y = g->y;
    sub->score = g->score;
    sub->proba = g->proba;
    sub->w = g->w;
    return m;
}

static void slice_eval(const mr_metric_data *sub, const mr_slice_opts *o, const mr_interval *overall, size_t idx,
                       mr_slice *s)
{
    s->n_rows = sub->n;
    s->weight = 0;
    for (size_t i = 0; i < sub->n; i++) s->weight += sub->w ? sub->w[i] : 1.0;
    for (int q = 0; q < 5; q++) s->resid_q[q] = NAN;
    s->ci.point = s->ci.lo = s->ci.hi = NAN;
    size_t min_rows = o->min_rows ? o->min_rows : 1;
    if (sub->n < min_rows) {
        s->status = MR_E_INVALID_ARG;
        snprintf(s->message, sizeof s->message, "too few rows (%zu < %zu)", sub->n, min_rows);
        return;
    }
    mr_error e;
    mr_error_init(&e);
    mr_status st;
    if (o->n_resamples > 0)
        st = mr_bootstrap_metric(o->metric, o->threshold, sub, o->n_resamples, o->alpha,
                                 o->seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(idx + 1), o->threads, &s->ci, &e);
    else
        st = mr_metric_eval(o->metric, sub, o->threshold, &s->ci.point, &e);
    s->status = st;
    if (st != MR_OK) {
        size_t ml = strlen(e.msg) < sizeof s->message - 1 ? strlen(e.msg) : sizeof s->message - 1;
        memcpy(s->message, e.msg, ml);
        s->message[ml] = 0;
        s->ci.point = s->ci.lo = s->ci.hi = NAN;
    } else if (overall && !isnan(s->ci.lo)) {
        s->flagged = mr_metric_higher_is_better(o->metric) ? s->ci.hi < overall->point : s->ci.lo > overall->point;
    }
    if (st == MR_OK && sub->task == MR_TASK_REGRESSION) {
        static const double qs[5] = {0.05, 0.25, 0.5, 0.75, 0.95};
        if (mr_metric_residual_quantiles(sub, qs, 5, s->resid_q, NULL) != MR_OK)
            for (int q = 0; q < 5; q++) s->resid_q[q] = NAN;
    }
}

static mr_status slices_check(const mr_metric_data *d, const mr_slice_opts *o, mr_error *err)
{
    if (!o || (unsigned)o->metric >= MR_METRIC_COUNT_) return MR_ERR(err, MR_E_INVALID_ARG, "slices: bad options");
    return mr_metric_validate(d, 0, err);
}

mr_status mr_slices_categorical(const mr_metric_data *d, const char *column, const int32_t *codes,
                                const char *const *names, size_t n_cats, const mr_slice_opts *o,
                                const mr_interval *overall, mr_slice **out, size_t *n_out, mr_error *err)
{
    *out = NULL;
    *n_out = 0;
    mr_status st = slices_check(d, o, err);
    if (st != MR_OK) return st;
    if (n_cats > INT32_MAX) return MR_ERR(err, MR_E_LIMIT, "slices: too many categories (%zu)", n_cats);
    int has_missing = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (codes[i] == -1) has_missing = 1;
        else if (codes[i] < 0 || (size_t)codes[i] >= n_cats)
            return MR_ERR(err, MR_E_INVALID_ARG, "slices: row %zu: category code %d outside [0, %zu)", i + 1,
                          (int)codes[i], n_cats);
    }
    size_t ns = n_cats + (size_t)has_missing;
    mr_slice *sl = mr_calloc(ns ? ns : 1, sizeof(mr_slice));
    gather g;
    st = sl ? gather_alloc(d, &g, err) : MR_ERR(err, MR_E_NOMEM, "out of memory (%zu slices)", ns);
    if (st != MR_OK) {
        if (sl) gather_free(&g);
        mr_free(sl);
        return st;
    }
    for (size_t c = 0; c < ns; c++) {
        int32_t code = c < n_cats ? (int32_t)c : -1;
        if (code >= 0) snprintf(sl[c].label, sizeof sl[c].label, "%s=%s", column, names ? names[c] : "?");
        else snprintf(sl[c].label, sizeof sl[c].label, "%s missing", column);
        mr_metric_data sub;
        gather_rows(d, &g, codes, code, NULL, 0, 0, 0, &sub);
        slice_eval(&sub, o, overall, c, &sl[c]);
    }
    gather_free(&g);
    *out = sl;
    *n_out = ns;
    return MR_OK;
}

mr_status mr_slices_numeric(const mr_metric_data *d, const char *column, const double *x, size_t n_buckets,
                            const mr_slice_opts *o, const mr_interval *overall, mr_slice **out, size_t *n_out,
                            mr_error *err)
{
    *out = NULL;
    *n_out = 0;
    mr_status st = slices_check(d, o, err);
    if (st != MR_OK) return st;
    if (n_buckets < 1 || n_buckets > 1000)
        return MR_ERR(err, MR_E_INVALID_ARG, "slices: n_buckets must be in [1, 1000], got %zu", n_buckets);
    double *v = mr_malloc(d->n * sizeof(double));
    double *edges = mr_malloc((n_buckets + 1) * sizeof(double));
    mr_slice *sl = mr_calloc(n_buckets + 1, sizeof(mr_slice));
    gather g;
    memset(&g, 0, sizeof g);
    if (!v || !edges || !sl) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (numeric slices)");
        goto fail;
    }
    st = gather_alloc(d, &g, err);
    if (st != MR_OK) goto fail;
    size_t m = 0, n_missing = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (isnan(x[i])) n_missing++;
        else if (isinf(x[i])) {
            st = MR_ERR(err, MR_E_INVALID_ARG, "slices: column '%s' row %zu is infinite", column, i + 1);
            goto fail;
        } else v[m++] = x[i];
    }
    size_t ne = 0;
    if (m > 0) {
        qsort(v, m, sizeof(double), cmp_double);
        for (size_t b = 0; b <= n_buckets; b++) {
            double e = mr__quantile_sorted(v, m, (double)b / (double)n_buckets);
            if (ne == 0 || e > edges[ne - 1]) edges[ne++] = e;
        }
        if (ne == 1) edges[ne++] = edges[0]; /* constant column: one closed bucket */
    }
    size_t ns = 0;
    for (size_t b = 0; b + 1 < ne; b++, ns++) {
        int closed = b + 2 == ne;
        snprintf(sl[ns].label, sizeof sl[ns].label, "%s in [%.4g, %.4g%s", column, edges[b], edges[b + 1],
                 closed ? "]" : ")");
        mr_metric_data sub;
        gather_rows(d, &g, NULL, 0, x, edges[b], edges[b + 1], closed, &sub);
        slice_eval(&sub, o, overall, ns, &sl[ns]);
    }
    if (n_missing) {
        snprintf(sl[ns].label, sizeof sl[ns].label, "%s missing", column);
        mr_metric_data sub;
        gather_rows(d, &g, NULL, 0, x, NAN, NAN, 0, &sub);
        slice_eval(&sub, o, overall, ns, &sl[ns]);
        ns++;
    }
    gather_free(&g);
    mr_free(v);
    mr_free(edges);
    *out = sl;
    *n_out = ns;
    return MR_OK;
fail:
    gather_free(&g);
    mr_free(v);
    mr_free(edges);
    mr_free(sl);
    return st;
}

/* ---- error analysis ------------------------------------------------------*/
typedef struct cand {
    double key;
    size_t row;
} cand;

static int cmp_cand_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

static int cmp_cand_asc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

mr_status mr_metric_top_wrong(const mr_metric_data *d, double threshold, size_t k, size_t *rows_out,
                              double *conf_out, size_t *n_out, mr_error *err)
{
    *n_out = 0;
    if (d->task == MR_TASK_REGRESSION)
        return MR_ERR(err, MR_E_INVALID_ARG, "top wrong predictions: classification data expected (use extreme residuals)");
    mr_status st = mr_metric_validate(d, 1, err);
    if (st != MR_OK) return st;
    cand *c = mr_malloc(d->n * sizeof(cand));
    if (!c) return MR_ERR(err, MR_E_NOMEM, "out of memory (%zu candidates)", d->n);
    size_t m = 0, K = d->n_classes;
    for (size_t i = 0; i < d->n; i++) {
        if (d->task == MR_TASK_BINARY) {
            int pred = d->score[i] >= threshold;
            if (pred == (d->y[i] == 1.0)) continue;
            c[m].key = pred ? d->score[i] : 1 - d->score[i];
        } else {
            const double *p = d->proba + i * K;
            size_t am = 0;
            for (size_t j = 1; j < K; j++)
                if (p[j] > p[am]) am = j;
            if (am == (size_t)d->y[i]) continue;
            c[m].key = p[am];
        }
        c[m++].row = i;
    }
    qsort(c, m, sizeof(cand), cmp_cand_desc);
    size_t r = m < k ? m : k;
    for (size_t i = 0; i < r; i++) {
        rows_out[i] = c[i].row;
        conf_out[i] = c[i].key;
    }
    *n_out = r;
    mr_free(c);
    return MR_OK;
}

mr_status mr_metric_extreme_residuals(const mr_metric_data *d, int worst, size_t k, size_t *rows_out,
                                      double *resid_out, size_t *n_out, mr_error *err)
{
    *n_out = 0;
    if (d->task != MR_TASK_REGRESSION) return MR_ERR(err, MR_E_INVALID_ARG, "extreme residuals: regression data expected");
    mr_status st = mr_metric_validate(d, 0, err);
    if (st != MR_OK) return st;
    cand *c = mr_malloc(d->n * sizeof(cand));
    if (!c) return MR_ERR(err, MR_E_NOMEM, "out of memory (%zu candidates)", d->n);
    for (size_t i = 0; i < d->n; i++) {
        c[i].key = fabs(d->y[i] - d->score[i]);
        c[i].row = i;
    }
    qsort(c, d->n, sizeof(cand), worst ? cmp_cand_desc : cmp_cand_asc);
    size_t r = d->n < k ? d->n : k;
    for (size_t i = 0; i < r; i++) {
        rows_out[i] = c[i].row;
        resid_out[i] = d->y[c[i].row] - d->score[c[i].row];
    }
    *n_out = r;
    mr_free(c);
    return MR_OK;
}
