/* The boosting loop: gradients, per-tree quantisation, bagging and feature
 * sampling, tree growth, score updates, metrics, the round callback, early
 * stopping and divergence checks.
 *
 * Reproducibility: every random choice is a pure function of (seed,
 * iteration, class, row); gradients and score updates are per-row; the only
 * reductions are integer histogram sums (exact), maxima (order-free) and
 * metric sums over fixed blocks added in block order. Nothing depends on
 * the number of threads, so the model bytes do not either. */
#include "gbdt_int.h"

#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <stdlib.h>

/* ---- training state ------------------------------------------------------------ */

#define GRAD_BLOCK 16384

typedef struct trainer {
    const mr_gbdt_params *p;
    const mr_gbdt_data *train, *valid;
    int K;                 /* trees per iteration */
    size_t n, nv;
    double *score, *vscore;
    float *grad, *hess;
    mr__ghq *gh;
    uint32_t *bag;         /* rows in the current bag, ascending */
    size_t n_bag;
    int bagging;
    size_t *bad_row;       /* per gradient block: first non-finite row + 1, or 0 */
    float *blk_gmax, *blk_hmax;
    uint32_t *feats;       /* features of the current tree */
    uint8_t *feat_mask;
    uint32_t *perm;        /* feature sampling scratch */
    mr__grower *grower;
    mr__tree tree;
    int cls;               /* class of the tree being built */
    double gscale, hscale;
    int hc_bits;           /* k of the packed hessian | count: mr__hc_bits(n_all) */
    mr__dist *D;           /* across ranks, or NULL */
    size_t row_lo, n_all;  /* this rank's first global row; rows of all ranks */
    const float *all_label; /* n_all labels (train->label for one process) */
    float *label_buf;      /* all ranks' labels, gathered */
    double *all_score;     /* across ranks with a training metric: n_all * K */
} trainer;

static void grad_task(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    trainer *t = vctx;
    size_t K = (size_t)t->K;
    mr__objective_grad(t->p->objective, t->K, t->p->alpha, t->train->label, t->score, begin, end, t->grad, t->hess);
    size_t bad = 0;
    for (size_t i = begin * K; i < end * K && !bad; i++)
        if (!isfinite(t->grad[i]) || !isfinite(t->hess[i])) bad = i / K + 1;
    t->bad_row[begin / GRAD_BLOCK] = bad;
    /* each class's largest |g| and |h| in the block, while it is in cache:
     * the round's quantisation scales (grow_class_tree) */
    const size_t nblk = t->n / GRAD_BLOCK + 1, blk = begin / GRAD_BLOCK;
    for (size_t c = 0; c < K; c++) {
        float gm = 0, hm = 0;
        for (size_t i = begin; i < end; i++) {
            float g = fabsf(t->grad[i * K + c]), h = fabsf(t->hess[i * K + c]);
            gm = g > gm ? g : gm;
            hm = h > hm ? h : hm;
        }
        t->blk_gmax[c * nblk + blk] = gm;
        t->blk_hmax[c * nblk + blk] = hm;
    }
}

/* lrint in the default rounding mode (to nearest, ties to even), inline:
 * the library call was a tenth of the round's quantisation. */
static inline int64_t round_i64(double x)
{
#if defined(__SSE2__) && defined(__x86_64__)
    return _mm_cvtsd_si64(_mm_set_sd(x));
#else
    return (int64_t)lrint(x);
#endif
}

static void quant_task(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    trainer *t = vctx;
    size_t K = (size_t)t->K, c = (size_t)t->cls;
    const double gs = t->gscale, hs = t->hscale;
    const int k = t->hc_bits;
    for (size_t i = begin; i < end; i++) {
        t->gh[i].g = round_i64((double)t->grad[i * K + c] * gs);
        t->gh[i].hc = mr__hc_pack(round_i64((double)t->hess[i * K + c] * hs), 1, k); /* hessians are > 0 */
    }
}

/* Quantisation: |q| <= 2^MR__GBDT_QUANT_BITS. 30 keeps |q| < 2^31 after
 * rounding; smaller values exist only to measure the accuracy cost of
 * coarser gradients (docs/gbdt.md), by rebuilding with -DMR__GBDT_QUANT_BITS=n.
 * The hessian takes at most 64 - 2k of them, k = mr__hc_bits(rows): then a
 * leaf's sum h < n * 2^(64-2k) < 2^(64-k) fits above its count in the
 * histograms' packed word (gbdt_int.h). */
#ifndef MR__GBDT_QUANT_BITS
#define MR__GBDT_QUANT_BITS 30
#endif

/* Largest power of two s with m * s <= 2^bits. */
static double pow2_scale(double m, int bits)
{
    if (!(m > 0)) return 1.0;
    int e;
    frexp(m, &e); /* m in [2^(e-1), 2^e) */
    return ldexp(1.0, bits - e);
}

static int hess_bits(int k) { return 64 - 2 * k < MR__GBDT_QUANT_BITS ? 64 - 2 * k : MR__GBDT_QUANT_BITS; }

typedef struct upd_ctx {
    trainer *t;
    const mr__tree *tree;
    const mr_gbdt_data *d;
    double *score;
} upd_ctx;

static void upd_leaves(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    upd_ctx *u = vctx;
    size_t K = (size_t)u->t->K, c = (size_t)u->t->cls;
    for (size_t l = begin; l < end; l++) {
        const uint32_t *rows;
        size_t n;
        mr__grower_leaf_rows(u->t->grower, (int)l, &rows, &n);
        double v = u->tree->leaf_value[l];
        for (size_t i = 0; i < n; i++) u->score[(size_t)rows[i] * K + c] += v;
    }
}

static void upd_traverse(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    upd_ctx *u = vctx;
    size_t K = (size_t)u->t->K, c = (size_t)u->t->cls, F = u->d->n_features;
    for (size_t r = begin; r < end; r++) {
        int leaf = mr__tree_leaf_binned(u->tree, u->d->bins + r * F);
        u->score[r * K + c] += u->tree->leaf_value[leaf];
    }
}

static void sample_features(trainer *t, int iter, int cls)
{
    const mr_gbdt_data *d = t->train;
    size_t F = d->n_features;
    memset(t->feat_mask, 0, F);
    size_t take = F;
    if (t->p->feature_fraction < 1.0) {
        take = (size_t)floor((double)F * t->p->feature_fraction + 0.5);
        if (take < 1) take = 1;
        for (size_t j = 0; j < F; j++) t->perm[j] = (uint32_t)j;
        uint64_t s = mr__hash3(t->p->seed, (uint64_t)iter, 0xFEA7u + (uint64_t)cls);
        for (size_t j = 0; j < take; j++) {
            size_t k = j + (size_t)(mr_splitmix64(&s) % (F - j));
            uint32_t tmp = t->perm[j];
            t->perm[j] = t->perm[k];
            t->perm[k] = tmp;
        }
        for (size_t j = 0; j < take; j++) t->feat_mask[t->perm[j]] = 1;
    } else {
        memset(t->feat_mask, 1, F);
    }
    size_t n = 0;
    for (size_t j = 0; j < F; j++) {
        if (d->feat[j].n_bins < 2) t->feat_mask[j] = 0; /* constant / all-missing: never split */
        if (t->feat_mask[j]) t->feats[n++] = (uint32_t)j;
    }
    t->feats[F] = (uint32_t)n; /* count kept after the list */
}

/* The round's bag: a row is in it by a hash of (seed, iteration, global
 * row), so every rank draws its share of the bag one process would draw. */
static mr_status make_bag(trainer *t, int iter, mr_error *err)
{
    size_t m = 0;
    if (!t->bagging) {
        for (size_t i = 0; i < t->n; i++) t->bag[i] = (uint32_t)i;
        t->n_bag = t->n;
        return MR_OK;
    }
    double frac = t->p->bagging_fraction;
    for (size_t i = 0; i < t->n; i++)
        if (mr_u01(mr__hash3(t->p->seed ^ 0xBA66u, (uint64_t)iter, (uint64_t)(t->row_lo + i))) < frac)
            t->bag[m++] = (uint32_t)i;
    int64_t total = (int64_t)m;
    if (t->D) {
        mr_status st = mr__dist_allreduce_i64(t->D, &total, 1, MR__DIST_SUM, "the bag size", err);
        if (st != MR_OK) return st;
    }
    if (total == 0 && t->row_lo == 0 && t->n > 0) t->bag[m++] = 0; /* an empty bag keeps the first row */
    t->n_bag = m;
    return MR_OK;
}

int mr__es_update(mr__es *es, int iter, double v)
{
    int better = es->best_iter < 0 || (es->higher_better ? v > es->best : v < es->best);
    if (better) {
        es->best_iter = iter;
        es->best = v;
        return 0;
    }
    return iter - es->best_iter >= es->patience;
}

static void trainer_free(trainer *t)
{
    mr_free(t->score);
    mr_free(t->vscore);
    mr_free(t->grad);
    mr_free(t->hess);
    mr_free(t->gh);
    mr_free(t->bag);
    mr_free(t->bad_row);
    mr_free(t->blk_gmax);
    mr_free(t->blk_hmax);
    mr_free(t->feats);
    mr_free(t->feat_mask);
    mr_free(t->perm);
    mr__grower_free(t->grower);
    mr__tree_deinit(&t->tree);
    mr_free(t->label_buf);
    mr_free(t->all_score);
}

static mr_status check_valid_data(const mr_gbdt_data *tr, const mr_gbdt_data *va, mr_error *err)
{
    if (va->n_features != tr->n_features)
        return MR_ERR(err, MR_E_SCHEMA, "validation data has %zu features, training data %zu", va->n_features,
                      tr->n_features);
    for (size_t j = 0; j < tr->n_features; j++) {
        const mr__bin_feature *a = &tr->feat[j], *b = &va->feat[j];
        int same = a->kind == b->kind && a->n_bins == b->n_bins;
        for (int k = 1; same && k < a->n_bins; k++)
            same = a->kind == MR__FEAT_CATEGORICAL ? a->cats[k] == b->cats[k] : a->upper[k] == b->upper[k];
        if (!same) {
            MR_ERR(err, MR_E_SCHEMA, "validation data feature '%s' was binned with other edges than the training data",
                   tr->names[j]);
            mr_error_hint(err, "bin validation data with the training data as reference");
            return MR_E_SCHEMA;
        }
    }
    if (!va->label) return MR_ERR(err, MR_E_INVALID_ARG, "validation data has no label");
    return MR_OK;
}

/* The data can be trained on: params valid, a label, rows, a matching
 * validation set, labels the objective accepts. */
static mr_status check_inputs(const mr_gbdt_params *p, const mr_gbdt_data *train, const mr_gbdt_data *valid, int K,
                              int share, mr_error *err)
{
    mr_status st = mr_gbdt_params_validate(p, err);
    if (st != MR_OK) return st;
    if (!train || !train->label) return MR_ERR(err, MR_E_INVALID_ARG, "training data has no label");
    if (train->n_rows == 0 && !share) return MR_ERR(err, MR_E_INVALID_ARG, "training data has no rows");
    if (valid && (st = check_valid_data(train, valid, err)) != MR_OK) return st;
    if ((st = mr__objective_check_labels(p->objective, K, train->label, train->n_rows, err)) != MR_OK) {
        mr_error_key(err, "train");
        return st;
    }
    if (valid && (st = mr__objective_check_labels(p->objective, K, valid->label, valid->n_rows, err)) != MR_OK) {
        mr_error_key(err, "valid");
        return st;
    }
    return MR_OK;
}

/* The metrics each round reports: the params', the objective's default when
 * none is given, none when explicitly none. Returns how many. */
static int round_metrics_of(const mr_gbdt_params *p, mr_gbdt_metric *metrics)
{
    if (p->n_metrics == 0) {
        metrics[0] = mr__objective_default_metric(p->objective);
        return 1;
    }
    if (p->n_metrics < 0) return 0;
    memcpy(metrics, p->metric, sizeof(metrics[0]) * (size_t)p->n_metrics);
    return p->n_metrics;
}

/* The trainer's per-row and per-feature state. */
static mr_status trainer_alloc(trainer *t, const mr_gbdt_params *p, const mr_gbdt_data *train, mr_error *err)
{
    const size_t F = train->n_features, n = t->n ? t->n : 1, nblk = n / GRAD_BLOCK + 1;
    const int K = t->K;
    t->score = mr_malloc(n * (size_t)K * sizeof(double));
    t->vscore = mr_malloc((t->nv ? t->nv : 1) * (size_t)K * sizeof(double));
    t->grad = mr_malloc(n * (size_t)K * sizeof(float));
    t->hess = mr_malloc(n * (size_t)K * sizeof(float));
    t->gh = mr_malloc(n * sizeof(mr__ghq));
    t->bag = mr_malloc(n * sizeof(uint32_t));
    t->bad_row = mr_calloc(nblk, sizeof(size_t));
    t->blk_gmax = mr_calloc(nblk * (size_t)K, sizeof(float));
    t->blk_hmax = mr_calloc(nblk * (size_t)K, sizeof(float));
    t->feats = mr_malloc((F + 1) * sizeof(uint32_t));
    t->feat_mask = mr_malloc(F);
    t->perm = mr_malloc(F * sizeof(uint32_t));
    if (!t->score || !t->vscore || !t->grad || !t->hess || !t->gh || !t->bag || !t->bad_row || !t->blk_gmax ||
        !t->blk_hmax || !t->feats || !t->feat_mask || !t->perm || mr__tree_alloc(&t->tree, p->num_leaves) != MR_OK)
        return MR_ERR(err, MR_E_NOMEM, "out of memory for training state (%zu rows)", n);
    return mr__grower_new(train, p->num_leaves, p->num_threads, &t->grower, err);
}

/* An empty model for this training (feature names and kinds, the params'
 * text) and the initial scores it starts every row from. */
static mr_status model_start(trainer *t, const mr_gbdt_params *p, const mr_gbdt_data *train, mr_gbdt_model **out,
                             mr_error *err)
{
    const size_t F = train->n_features;
    const int K = t->K;
    mr_gbdt_model *m = NULL;
    mr_status st = mr__model_new(F, &m, err);
    if (st != MR_OK) return st;
    *out = m;
    m->objective = p->objective;
    m->num_class = K;
    m->num_tree_per_iteration = K;
    m->alpha = p->alpha;
    m->best_iteration = -1;
    if (!(m->init_score = mr_calloc((size_t)K, sizeof(double)))) goto nomem;
    for (size_t j = 0; j < F; j++) {
        if (!(m->names[j] = mr_strdup(train->names[j]))) goto nomem;
        m->kind[j] = train->feat[j].kind;
    }
    mr_buf pt;
    mr_buf_init(&pt);
    if (mr_gbdt_params_to_text(p, &pt) != MR_OK) {
        mr_buf_free(&pt);
        goto nomem;
    }
    m->params_text = pt.data ? pt.data : mr_strdup("");
    if (!m->params_text) goto nomem;
    if (p->boost_from_average) mr__objective_init_score(p->objective, K, t->all_label, t->n_all, m->init_score);
    for (size_t i = 0; i < t->n; i++)
        for (int c = 0; c < K; c++) t->score[i * (size_t)K + (size_t)c] = m->init_score[c];
    for (size_t i = 0; i < t->nv; i++)
        for (int c = 0; c < K; c++) t->vscore[i * (size_t)K + (size_t)c] = m->init_score[c];
    return MR_OK;
nomem:
    return MR_ERR(err, MR_E_NOMEM, "out of memory");
}

/* Gradients of every row for this round; a non-finite one is divergence. */
static mr_status round_gradients(trainer *t, int iter, mr_error *err)
{
    const mr_gbdt_params *p = t->p;
    const size_t nblk = t->n / GRAD_BLOCK + 1;
    mr_parallel_for_capped(t->n, GRAD_BLOCK, p->num_threads, grad_task, t);
    if (t->D) { /* the first bad row of all ranks, for all of them */
        int64_t first = INT64_MAX;
        for (size_t b = 0; b < nblk && first == INT64_MAX; b++)
            if (t->bad_row[b]) first = (int64_t)(t->row_lo + t->bad_row[b] - 1);
        mr_status st = mr__dist_allreduce_i64(t->D, &first, 1, MR__DIST_MIN, "the gradient check", err);
        if (st != MR_OK) return st;
        if (first == INT64_MAX) return MR_OK;
        st = MR_ERR(err, MR_E_FAILED, "training diverged at iteration %d: non-finite gradient at row %lld", iter,
                    (long long)first + 1);
        mr_error_hint(err, "lower learning_rate, or check the label scale");
        return st;
    }
    for (size_t b = 0; b < nblk; b++) {
        if (!t->bad_row[b]) continue;
        size_t r = t->bad_row[b] - 1;
        mr_status st = MR_ERR(err, MR_E_FAILED, "training diverged at iteration %d: non-finite gradient at row %zu (raw score %g)",
                              iter, r + 1, t->score[r * (size_t)t->K]);
        mr_error_hint(err, "lower learning_rate, or check the label scale");
        return st;
    }
    return MR_OK;
}

/* One tree for class c: sample features, quantise the gradients to the
 * round's scale, grow, check the leaves, update the scores. */
static mr_status grow_class_tree(trainer *t, int iter, int c, mr__split_cfg *scfg, const mr__grow_cfg *gcfg,
                                 mr_gbdt_model *m, mr_error *err)
{
    const mr_gbdt_params *p = t->p;
    const size_t F = t->train->n_features, n = t->n, nblk = n / GRAD_BLOCK + 1;
    t->cls = c;
    sample_features(t, iter, c);
    size_t n_feats = t->feats[F];
    float gm = 0, hm = 0; /* from the blocks' maxima of round_gradients */
    for (size_t b = (size_t)c * nblk; b < (size_t)(c + 1) * nblk; b++) {
        gm = t->blk_gmax[b] > gm ? t->blk_gmax[b] : gm;
        hm = t->blk_hmax[b] > hm ? t->blk_hmax[b] : hm;
    }
    if (t->D) { /* non-negative floats order as their bit patterns do */
        uint32_t gb, hb;
        memcpy(&gb, &gm, 4);
        memcpy(&hb, &hm, 4);
        int64_t mx[2] = {gb, hb};
        mr_status st = mr__dist_allreduce_i64(t->D, mx, 2, MR__DIST_MAX, "the gradient scale", err);
        if (st != MR_OK) return st;
        gb = (uint32_t)mx[0];
        hb = (uint32_t)mx[1];
        memcpy(&gm, &gb, 4);
        memcpy(&hm, &hb, 4);
    }
    t->gscale = pow2_scale(gm, MR__GBDT_QUANT_BITS);
    t->hscale = pow2_scale(hm, hess_bits(t->hc_bits));
    mr_parallel_for_capped(n, GRAD_BLOCK, p->num_threads, quant_task, t);
    scfg->inv_gscale = 1.0 / t->gscale;
    scfg->inv_hscale = 1.0 / t->hscale;
    scfg->hc_bits = t->hc_bits;
    memcpy(mr__grower_rows(t->grower), t->bag, t->n_bag * sizeof(uint32_t));
    mr_status gst = mr__grower_grow(t->grower, t->n_bag, t->gh, t->feats, n_feats, t->feat_mask, scfg, gcfg, &t->tree, err);
    if (gst != MR_OK) return gst;
    for (int l = 0; l < t->tree.n_leaves; l++) {
        if (isfinite(t->tree.leaf_value[l])) continue;
        mr_status st = MR_ERR(err, MR_E_FAILED, "training diverged at iteration %d: leaf value is %g", iter,
                              t->tree.leaf_value[l]);
        mr_error_hint(err, "lower learning_rate, or raise lambda_l2 / min_sum_hessian_in_leaf");
        return st;
    }
    mr_status st = mr__tree_finish_categorical(&t->tree, t->train, err);
    if (st != MR_OK) return st;
    upd_ctx u = {.t = t, .tree = &t->tree, .d = t->train, .score = t->score};
    if (t->bagging)
        mr_parallel_for_capped(n, GRAD_BLOCK, p->num_threads, upd_traverse, &u);
    else
        mr_parallel_for_capped((size_t)t->tree.n_leaves, 1, p->num_threads, upd_leaves, &u);
    if (t->valid) {
        upd_ctx uv = {.t = t, .tree = &t->tree, .d = t->valid, .score = t->vscore};
        mr_parallel_for_capped(t->nv, GRAD_BLOCK, p->num_threads, upd_traverse, &uv);
    }
    return mr__model_push_tree(m, &t->tree, err);
}

/* The round's train and valid metrics into info; a non-finite one is divergence. */
static mr_status round_metrics(trainer *t, int iter, const mr_gbdt_metric *metrics, int n_metrics,
                               mr_gbdt_round_info *info, mr_error *err)
{
    const mr_gbdt_params *p = t->p;
    memset(info, 0, sizeof(*info));
    info->iteration = iter;
    info->n_metrics = n_metrics;
    for (int k = 0; k < n_metrics; k++) {
        info->metric[k] = metrics[k];
        info->train_metric[k] = NAN;
        info->valid_metric[k] = NAN;
        mr_status mst = MR_OK;
        if (p->is_provide_training_metric && t->D && k == 0) { /* every rank's scores, in row order */
            size_t *lens = mr_malloc((size_t)t->D->size * sizeof(size_t));
            if (!lens) return MR_ERR(err, MR_E_NOMEM, "out of memory");
            for (int q = 0; q < t->D->size; q++) lens[q] = (size_t)t->D->rows_of[q] * (size_t)t->K * sizeof(double);
            mr_status gst = mr__dist_allgatherv(t->D, t->score, lens, t->all_score, "the training scores", err);
            mr_free(lens);
            if (gst != MR_OK) return gst;
        }
        if (p->is_provide_training_metric)
            mst = mr__metric_eval(metrics[k], p->objective, t->K, p->alpha, t->all_label, t->D ? t->all_score : t->score,
                                  t->n_all, p->num_threads, &info->train_metric[k]);
        if (mst == MR_OK && t->valid)
            mst = mr__metric_eval(metrics[k], p->objective, t->K, p->alpha, t->valid->label, t->vscore, t->nv,
                                  p->num_threads, &info->valid_metric[k]);
        if (mst != MR_OK)
            return MR_ERR(err, mst, "out of memory evaluating %s at iteration %d", mr_gbdt_metric_name(metrics[k]), iter);
        double v[2] = {info->train_metric[k], info->valid_metric[k]};
        int have[2] = {p->is_provide_training_metric, t->valid != NULL};
        for (int s = 0; s < 2; s++) {
            if (!have[s] || isfinite(v[s])) continue;
            mr_status st = MR_ERR(err, MR_E_FAILED, "training diverged at iteration %d: %s %s is %g", iter,
                                  s ? "valid" : "train", mr_gbdt_metric_name(metrics[k]), v[s]);
            mr_error_hint(err, "lower learning_rate, or check the label scale");
            return st;
        }
    }
    return MR_OK;
}

/* Every rank's labels (the initial score and a training metric need all). */
static mr_status gather_labels(trainer *t, mr_error *err)
{
    mr__dist *D = t->D;
    size_t *lens = mr_malloc((size_t)D->size * sizeof(size_t));
    t->label_buf = mr_malloc((D->n_total ? D->n_total : 1) * sizeof(float));
    if (t->p->is_provide_training_metric)
        t->all_score = mr_malloc((D->n_total ? D->n_total : 1) * (size_t)t->K * sizeof(double));
    if (!lens || !t->label_buf || (t->p->is_provide_training_metric && !t->all_score)) {
        mr_free(lens);
        return MR_ERR(err, MR_E_NOMEM, "out of memory for %zu labels", D->n_total);
    }
    for (int q = 0; q < D->size; q++) lens[q] = (size_t)D->rows_of[q] * sizeof(float);
    mr_status st = mr__dist_allgatherv(D, t->train->label, lens, t->label_buf, "the labels", err);
    mr_free(lens);
    t->all_label = t->label_buf;
    t->n_all = D->n_total;
    t->row_lo = D->row_lo;
    return st;
}

/* Every rank grew the same model: the hashes of its bytes agree (else
 * MR_E_INTERNAL naming the first rank that differs). */
static mr_status same_model_everywhere(mr__dist *D, const mr_gbdt_model *m, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status st = mr_gbdt_model_to_bytes(m, &b, err);
    mr_hash128 mine = mr_hash_bytes(b.data, b.len);
    mr_buf_free(&b);
    mr_hash128 *all = st == MR_OK ? mr_calloc((size_t)D->size, sizeof(mr_hash128)) : NULL;
    if (st == MR_OK && !all) st = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (st == MR_OK) st = mr__dist_allgather(D, &mine, sizeof(mine), all, "the model check", err);
    for (int q = 0; st == MR_OK && q < D->size; q++)
        if (memcmp(&all[q], &mine, sizeof(mine)) != 0)
            st = MR_ERR(err, MR_E_INTERNAL, "rank %d: rank %d trained a different model", D->rank, q);
    mr_free(all);
    return st;
}

static mr_status train_impl(const mr_gbdt_params *p, const mr_gbdt_data *train, const mr_gbdt_data *valid,
                            const mr_gbdt_comm *comm, mr_gbdt_round_fn cb, void *cb_ctx, mr_gbdt_model **out,
                            mr_error *err)
{
    *out = NULL;
    const int K = p->objective == MR_GBDT_MULTICLASS ? p->num_class : 1;
    mr__dist dist;
    memset(&dist, 0, sizeof(dist));
    int share = comm && comm->size > 1;
    mr_status st = check_inputs(p, train, valid, K, share, err);
    if (st == MR_OK && share) {
        st = mr__dist_init(&dist, comm, train, err);
        if (st == MR_OK && dist.n_total == 0) st = MR_ERR(err, MR_E_INVALID_ARG, "training data has no rows on any rank");
    }
    if (st != MR_OK) {
        mr__dist_free(&dist);
        return st;
    }
    mr_gbdt_metric metrics[MR_GBDT_MAX_METRICS];
    int n_metrics = round_metrics_of(p, metrics);

    trainer t;
    memset(&t, 0, sizeof(t));
    t.p = p;
    t.train = train;
    t.valid = valid;
    t.K = K;
    t.n = train->n_rows;
    t.nv = valid ? valid->n_rows : 0;
    t.bagging = p->bagging_freq > 0 && p->bagging_fraction < 1.0;
    t.all_label = train->label;
    t.n_all = t.n;
    mr_gbdt_model *m = NULL;
    double t0 = mr_now();
    if ((st = trainer_alloc(&t, p, train, err)) != MR_OK) goto fail;
    if (share) {
        t.D = &dist;
        mr__grower_set_dist(t.grower, &dist);
        if ((st = gather_labels(&t, err)) != MR_OK) goto fail;
    }
    if (t.n_all >= MR__GBDT_MAX_ROWS) {
        st = MR_ERR(err, MR_E_LIMIT, "training data has %zu rows; one training takes at most %zu", t.n_all,
                    MR__GBDT_MAX_ROWS - 1);
        mr_error_hint(err, "train on a sample of the rows (a histogram packs its row counts in 28 bits)");
        goto fail;
    }
    t.hc_bits = mr__hc_bits(t.n_all);
    if ((st = model_start(&t, p, train, &m, err)) != MR_OK) goto fail;

    const mr__grow_cfg gcfg = {.num_leaves = p->num_leaves, .max_depth = p->max_depth,
                               .learning_rate = p->learning_rate, .max_threads = p->num_threads};
    mr__split_cfg scfg = {.lambda_l1 = p->lambda_l1, .lambda_l2 = p->lambda_l2,
                          .min_gain_to_split = p->min_gain_to_split,
                          .min_sum_hessian = p->min_sum_hessian_in_leaf,
                          .min_data_in_leaf = p->min_data_in_leaf,
                          .max_cat_to_onehot = p->max_cat_to_onehot, .max_cat_threshold = p->max_cat_threshold,
                          .min_data_per_group = p->min_data_per_group, .cat_smooth = p->cat_smooth,
                          .cat_l2 = p->cat_l2};
    int es_on = p->early_stopping_round > 0 && valid && n_metrics > 0;
    mr__es es = {.patience = p->early_stopping_round, .higher_better = n_metrics ? mr__metric_higher_better(metrics[0]) : 0,
                 .best_iter = -1};
    if ((st = make_bag(&t, 0, err)) != MR_OK) goto fail;
    for (int iter = 0; iter < p->num_iterations; iter++) {
        dist.iter = iter;
        if (t.bagging && iter % p->bagging_freq == 0 && (st = make_bag(&t, iter, err)) != MR_OK) goto fail;
        if ((st = round_gradients(&t, iter, err)) != MR_OK) goto fail;
        int all_stumps = 1;
        for (int c = 0; c < K; c++) {
            if ((st = grow_class_tree(&t, iter, c, &scfg, &gcfg, m, err)) != MR_OK) goto fail;
            if (t.tree.n_leaves > 1) all_stumps = 0;
        }
        if (all_stumps) {
            /* No leaf can be split any more (LightGBM stops here too): drop
             * this round's single-leaf trees and finish. */
            for (int c = 0; c < K; c++) mr__tree_deinit(&m->trees[--m->n_trees]);
            mr_log(MR_LOG_INFO, "gbdt: stopped at iteration %d: no split meets the requirements", iter);
            break;
        }
        mr_gbdt_round_info info;
        if ((st = round_metrics(&t, iter, metrics, n_metrics, &info, err)) != MR_OK) goto fail;
        int stop = 0;
        if (es_on) stop = mr__es_update(&es, iter, info.valid_metric[0]);
        info.best_iteration = es_on ? es.best_iter : -1;
        info.elapsed_s = mr_now() - t0;
        info.valid_score = valid ? t.vscore : NULL;
        info.n_valid = valid ? t.nv : 0;
        info.n_outputs = K;
        int64_t cb_stop = cb ? cb(cb_ctx, &info) != 0 : 0;
        if (t.D && (st = mr__dist_allreduce_i64(t.D, &cb_stop, 1, MR__DIST_MAX, "the stop decision", err)) != MR_OK)
            goto fail;
        if (cb_stop) break;
        if (stop) {
            size_t keep = (size_t)(es.best_iter + 1) * (size_t)K;
            while (m->n_trees > keep) mr__tree_deinit(&m->trees[--m->n_trees]);
            m->best_iteration = es.best_iter;
            break;
        }
    }
    if (es_on && m->best_iteration < 0) m->best_iteration = es.best_iter;
    if (t.D && (st = same_model_everywhere(&dist, m, err)) != MR_OK) goto fail;
    if (t.D)
        mr_log(MR_LOG_DEBUG, "gbdt: rank %d sent %.1f MB of histograms", dist.rank, (double)dist.hist_bytes / 1e6);
    trainer_free(&t);
    mr__dist_free(&dist);
    *out = m;
    return MR_OK;
fail:
    trainer_free(&t);
    mr__dist_free(&dist);
    mr_gbdt_model_free(m);
    return st;
}

mr_status mr_gbdt_train(const mr_gbdt_params *p, const mr_gbdt_data *train, const mr_gbdt_data *valid,
                        mr_gbdt_round_fn cb, void *cb_ctx, mr_gbdt_model **out, mr_error *err)
{
    return train_impl(p, train, valid, NULL, cb, cb_ctx, out, err);
}

mr_status mr_gbdt_train_comm(const mr_gbdt_params *p, const mr_gbdt_data *train, const mr_gbdt_data *valid,
                             const mr_gbdt_comm *comm, mr_gbdt_round_fn cb, void *cb_ctx, mr_gbdt_model **out,
                             mr_error *err)
{
    return train_impl(p, train, valid, comm, cb, cb_ctx, out, err);
}
