/* Samplers: seeded random search and TPE (tree-structured Parzen
 * estimator, Bergstra et al. 2011), univariate, in the style of Optuna's
 * default TPESampler.
 *
 * TPE ranks the usable trials of the history (complete ones by objective,
 * then pruned ones by how many rounds they ran, then by objective; failed
 * trials are ignored) and calls the first ceil(gamma * n) "good". For each
 * parameter it fits two densities over the internal coordinate (log of the
 * value on a log scale): l(x) over the good trials' values and g(x) over the
 * others', each a mixture of truncated Gaussians centred on the
 * observations plus one wide prior component centred on the range; a
 * component's bandwidth is the larger gap to its neighbours, clipped to
 * [range / min(100, n + 1), range]. It draws n_ei_candidates points from
 * l and keeps the one maximising log l(x) - log g(x) (the expected
 * improvement is monotone in l/g). Choice parameters use category counts
 * plus one (Laplace smoothing) for l and g. Conditional parameters are
 * fitted on the trials where they were active, and sampled only when their
 * parent's sampled value activates them.
 *
 * Every parameter of every trial draws from its own xoshiro256** stream,
 * seeded from (seed, trial number, parameter index), so a suggestion never
 * depends on how many random numbers another parameter consumed. */
#include "tune_int.h"

#include <math.h>
#include <string.h>

static void stream_seed(mr_rng *r, uint64_t seed, uint64_t trial, uint64_t param)
{
    uint64_t x = seed;
    uint64_t a = mr_splitmix64(&x);
    x = a ^ (trial * 0x9e3779b97f4a7c15ull);
    uint64_t b = mr_splitmix64(&x);
    x = b ^ ((param + 1) * 0xd1b54a32d192ed03ull);
    mr_rng_seed(r, mr_splitmix64(&x));
}

void mr_tune_sampler_opts_init(mr_tune_sampler_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->kind = MR_SAMPLER_TPE;
    o->maximize = 1;
    o->n_startup_trials = 10;
    o->gamma = 0.15;
    o->n_ei_candidates = 24;
}

/* ---- internal coordinates --------------------------------------------- */
static void bounds(const mr__tune_param *p, double *a, double *b)
{
    double lo = p->lo, hi = p->hi;
    if (p->kind == MR_TUNE_INT) {
        lo -= 0.5;
        hi += 0.5;
    }
    *a = p->log ? log(lo) : lo;
    *b = p->log ? log(hi) : hi;
}

static double to_internal(const mr__tune_param *p, double v) { return p->log ? log(v) : v; }

static double from_internal(const mr__tune_param *p, double u)
{
    double v = p->log ? exp(u) : u;
    if (p->kind == MR_TUNE_INT) {
        v = round(v);
        if (v < p->lo) v = p->lo;
        if (v > p->hi) v = p->hi;
    } else {
        if (v < p->lo) v = p->lo;
        if (v > p->hi) v = p->hi;
    }
    return v;
}

static double sample_random(const mr__tune_param *p, mr_rng *r)
{
    if (p->kind == MR_TUNE_CHOICE) {
        size_t k = (size_t)(mr_rng_uniform(r) * (double)p->n_choices);
        return (double)(k < p->n_choices ? k : p->n_choices - 1);
    }
    double a, b;
    bounds(p, &a, &b);
    return from_internal(p, a + (b - a) * mr_rng_uniform(r));
}

/* ---- Parzen estimator over one numeric parameter ----------------------- */
typedef struct parzen {
    double *mu, *sigma, *logz; /* n components, the prior last */
    size_t n;
    double a, b;
} parzen;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double norm_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

static mr_status parzen_fit(parzen *pz, const double *obs, size_t n_obs, double a, double b)
{
    size_t n = n_obs + 1;
    pz->mu = mr_calloc(3 * n, sizeof(double));
    if (!pz->mu) return MR_E_NOMEM;
    pz->sigma = pz->mu + n;
    pz->logz = pz->sigma + n;
    pz->n = n;
    pz->a = a;
    pz->b = b;
    double range = b - a;
    memcpy(pz->mu, obs, n_obs * sizeof(double));
    qsort(pz->mu, n_obs, sizeof(double), cmp_double);
    double min_bw = range / fmin(100.0, (double)n), max_bw = range;
    for (size_t i = 0; i < n_obs; i++) {
        double left = pz->mu[i] - (i ? pz->mu[i - 1] : a);
        double right = (i + 1 < n_obs ? pz->mu[i + 1] : b) - pz->mu[i];
        double s = fmax(left, right);
        pz->sigma[i] = fmin(fmax(s, min_bw), max_bw);
    }
    pz->mu[n_obs] = 0.5 * (a + b);
    pz->sigma[n_obs] = range;
    for (size_t i = 0; i < n; i++) {
        double z = norm_cdf((b - pz->mu[i]) / pz->sigma[i]) - norm_cdf((a - pz->mu[i]) / pz->sigma[i]);
        pz->logz[i] = log(fmax(z, 1e-300));
    }
    return MR_OK;
}

static void parzen_free(parzen *pz) { mr_free(pz->mu); }

static double parzen_logpdf(const parzen *pz, double u)
{
    /* log-sum-exp over equally weighted components */
    double best = -INFINITY;
    double *t = NULL;
    double stack[64];
    t = pz->n <= 64 ? stack : mr_malloc(pz->n * sizeof(double));
    if (!t) return -INFINITY;
    for (size_t i = 0; i < pz->n; i++) {
        double z = (u - pz->mu[i]) / pz->sigma[i];
        t[i] = -0.5 * z * z - log(pz->sigma[i]) - 0.9189385332046727 - pz->logz[i];
        if (t[i] > best) best = t[i];
    }
    double s = 0;
    for (size_t i = 0; i < pz->n; i++) s += exp(t[i] - best);
    if (t != stack) mr_free(t);
    return best + log(s) - log((double)pz->n);
}

static double parzen_sample(const parzen *pz, mr_rng *r)
{
    size_t i = (size_t)(mr_rng_uniform(r) * (double)pz->n);
    if (i >= pz->n) i = pz->n - 1;
    for (int tries = 0; tries < 100; tries++) {
        double u = pz->mu[i] + pz->sigma[i] * mr_rng_normal(r);
        if (u >= pz->a && u <= pz->b) return u;
    }
    return pz->a + (pz->b - pz->a) * mr_rng_uniform(r);
}

/* ---- ranking ----------------------------------------------------------- */
typedef struct ranked {
    const mr_tune_trial *t;
    size_t idx;
    int maximize;
} ranked;

static int better(const mr_tune_trial *x, const mr_tune_trial *y, int maximize)
{
    /* complete < pruned; pruned: more rounds first; then objective; NaN last */
    if (x->status != y->status) return x->status == MR_TRIAL_COMPLETE ? -1 : 1;
    if (x->status == MR_TRIAL_PRUNED && x->n_curve != y->n_curve) return x->n_curve > y->n_curve ? -1 : 1;
    double a = x->value, b = y->value;
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    if (a != b) return (maximize ? a > b : a < b) ? -1 : 1;
    return 0;
}

static int cmp_ranked(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    int c = better(a->t, b->t, a->maximize);
    if (c) return c;
    return a->idx < b->idx ? -1 : a->idx > b->idx; /* stable: earlier trial first */
}

static mr_status tpe_suggest(const mr_tune_space *s, const mr_tune_sampler_opts *o, const mr_tune_trial *hist,
                             size_t n_hist, uint64_t trial, double *x, mr_error *err)
{
    mr_status rc = MR_OK;
    ranked *rk = mr_calloc(n_hist ? n_hist : 1, sizeof(*rk));
    int *good = mr_calloc(n_hist ? n_hist : 1, sizeof(*good));
    double *below = mr_calloc(n_hist ? n_hist : 1, sizeof(double));
    double *above = mr_calloc(n_hist ? n_hist : 1, sizeof(double));
    if (!rk || !good || !below || !above) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_hist; i++)
        if (hist[i].status != MR_TRIAL_FAILED) rk[n++] = (ranked){&hist[i], i, o->maximize};
    qsort(rk, n, sizeof(*rk), cmp_ranked);
    size_t n_good = (size_t)ceil(o->gamma * (double)n);
    if (n_good < 1) n_good = 1;
    for (size_t k = 0; k < n && k < n_good; k++) good[rk[k].idx] = 1;
    int n_cand = o->n_ei_candidates > 0 ? o->n_ei_candidates : 24;
    for (size_t q = 0; q < s->n; q++) {
        size_t j = s->order[q];
        const mr__tune_param *p = &s->p[j];
        mr_rng r;
        stream_seed(&r, o->seed, trial, j);
        if (!mr_tune_space_active(s, j, x)) {
            x[j] = NAN;
            continue;
        }
        size_t nb = 0, na = 0;
        for (size_t k = 0; k < n; k++) {
            const mr_tune_trial *t = rk[k].t;
            double v = t->x[j];
            if (isnan(v)) continue;
            if (good[rk[k].idx]) below[nb++] = v;
            else above[na++] = v;
        }
        if (nb == 0) {
            x[j] = sample_random(p, &r);
            continue;
        }
        if (p->kind == MR_TUNE_CHOICE) {
            size_t K = p->n_choices;
            double *wl = mr_calloc(2 * K, sizeof(double));
            if (!wl) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                goto done;
            }
            double *wg = wl + K, sl = 0, sg = 0;
            for (size_t c = 0; c < K; c++) wl[c] = wg[c] = 1.0;
            for (size_t k = 0; k < nb; k++) wl[(size_t)below[k]] += 1.0;
            for (size_t k = 0; k < na; k++) wg[(size_t)above[k]] += 1.0;
            for (size_t c = 0; c < K; c++) {
                sl += wl[c];
                sg += wg[c];
            }
            double best_score = -INFINITY, best = 0;
            for (int q = 0; q < n_cand; q++) {
                double u = mr_rng_uniform(&r) * sl, acc = 0;
                size_t c = 0;
                for (; c + 1 < K; c++) {
                    acc += wl[c];
                    if (u < acc) break;
                }
                double score = log(wl[c] / sl) - log(wg[c] / sg);
                if (score > best_score) {
                    best_score = score;
                    best = (double)c;
                }
            }
            x[j] = best;
            mr_free(wl);
            continue;
        }
        double a, b;
        bounds(p, &a, &b);
        for (size_t k = 0; k < nb; k++) below[k] = to_internal(p, below[k]);
        for (size_t k = 0; k < na; k++) above[k] = to_internal(p, above[k]);
        parzen pl = {0}, pg = {0};
        if (parzen_fit(&pl, below, nb, a, b) != MR_OK || parzen_fit(&pg, above, na, a, b) != MR_OK) {
            parzen_free(&pl);
            parzen_free(&pg);
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        double best_score = -INFINITY, best = 0.5 * (a + b);
        for (int q = 0; q < n_cand; q++) {
            double u = parzen_sample(&pl, &r);
            if (p->kind == MR_TUNE_INT) u = to_internal(p, from_internal(p, u));
            double score = parzen_logpdf(&pl, u) - parzen_logpdf(&pg, u);
            if (score > best_score) {
                best_score = score;
                best = u;
            }
        }
        parzen_free(&pl);
        parzen_free(&pg);
        x[j] = from_internal(p, best);
    }
done:
    mr_free(rk);
    mr_free(good);
    mr_free(below);
    mr_free(above);
    return rc;
}

mr_status mr_tune_suggest(const mr_tune_space *s, const mr_tune_sampler_opts *o, const mr_tune_trial *hist,
                          size_t n_hist, uint64_t trial, double *x, mr_error *err)
{
    size_t usable = 0;
    for (size_t i = 0; i < n_hist; i++) usable += hist[i].status != MR_TRIAL_FAILED;
    if (o->kind == MR_SAMPLER_TPE && usable >= (size_t)(o->n_startup_trials > 0 ? o->n_startup_trials : 1) && usable > 0)
        return tpe_suggest(s, o, hist, n_hist, trial, x, err);
    for (size_t q = 0; q < s->n; q++) {
        size_t j = s->order[q];
        mr_rng r;
        stream_seed(&r, o->seed, trial, j);
        x[j] = mr_tune_space_active(s, j, x) ? sample_random(&s->p[j], &r) : NAN;
    }
    return MR_OK;
}
