/* Trees: split finding on histograms (numeric with learnt missing
 * direction, categorical one-vs-rest and LightGBM-style sorted category
 * sets), the stable in-place row partition, and leaf-wise growth with the
 * histogram pool and subtraction trick.
 *
 * Leaf-wise growth. Every leaf that may still split keeps its histogram and
 * its best split. Each step splits the leaf with the largest gain (ties: the
 * lower leaf id). After a split only the child with fewer rows is
 * histogrammed directly; the other child's histogram is the parent's minus
 * it, computed in place in the parent's buffer (exact: see hist.c). So a
 * tree costs one full pass at the root plus, at each level, passes over the
 * smaller halves only. Leaves that can no longer split (too few rows for two
 * children of min_data_in_leaf, or at max_depth) give their buffer back. */
#include "gbdt_int.h"

#include <stdlib.h>

/* ---- gains ------------------------------------------------------------------ */

static inline double threshold_l1(double g, double l1)
{
    if (l1 <= 0) return g;
    double a = fabs(g) - l1;
    if (a <= 0) return 0.0;
    return g > 0 ? a : -a;
}

double mr__leaf_gain(double G, double H, double l1, double l2)
{
    double t = threshold_l1(G, l1);
    double den = H + l2;
    return den > 0 ? t * t / den : 0.0;
}

double mr__leaf_output(double G, double H, double l1, double l2)
{
    double den = H + l2;
    return den > 0 ? -threshold_l1(G, l1) / den : 0.0;
}

/* ---- split finding ------------------------------------------------------------ */

static void scan_numeric(const mr__hbin *hb, int nb, int f, int64_t G, int64_t H, int64_t C, double parent_gain,
                         const mr__split_cfg *cfg, mr__split *best)
{
    const mr__hbin miss = hb[0];
    const int k = cfg->hc_bits;
    const int64_t miss_c = mr__hc_c(miss.hc, k);
    for (int ml = 1; ml >= 0; ml--) {
        if (ml && miss_c == 0) continue; /* nothing missing: one scan */
        int64_t lg = ml ? miss.g : 0;
        uint64_t lhc = ml ? miss.hc : 0; /* packed sums of bins 0..t stay packed */
        for (int t = 1; t < nb; t++) {
            lg += hb[t].g;
            lhc += hb[t].hc;
            int64_t lh = mr__hc_h(lhc, k), lc = mr__hc_c(lhc, k), rc = C - lc;
            if (rc < cfg->min_data_in_leaf) break;
            if (lc < cfg->min_data_in_leaf) continue;
            double lhd = (double)lh * cfg->inv_hscale, rhd = (double)(H - lh) * cfg->inv_hscale;
            if (rhd < cfg->min_sum_hessian) break;
            if (lhd < cfg->min_sum_hessian) continue;
            double gain = mr__leaf_gain((double)lg * cfg->inv_gscale, lhd, cfg->lambda_l1, cfg->lambda_l2) +
                          mr__leaf_gain((double)(G - lg) * cfg->inv_gscale, rhd, cfg->lambda_l1, cfg->lambda_l2) -
                          parent_gain;
            if (gain > best->gain) {
                best->gain = gain;
                best->feature = f;
                best->kind = MR__FEAT_NUMERIC;
                best->threshold = (uint16_t)t;
                /* with nothing missing in training, send missing to the larger side */
                best->default_left = miss_c ? (uint8_t)ml : (uint8_t)(lc >= rc);
                best->lg = lg;
                best->lh = lh;
                best->lc = lc;
            }
        }
    }
}

typedef struct catscore {
    double score;
    int bin;
} catscore;
static int cmp_catscore(const void *a, const void *b)
{
    const catscore *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return x->bin - y->bin;
}

static void scan_categorical(const mr__hbin *hb, int nb, int f, int64_t G, int64_t H, int64_t C,
                             double parent_gain, const mr__split_cfg *cfg, mr__split *best)
{
    const double ig = cfg->inv_gscale, ih = cfg->inv_hscale;
    const int k = cfg->hc_bits;
    if (nb <= cfg->max_cat_to_onehot) {
        for (int b = 0; b < nb; b++) {
            int64_t lc = mr__hc_c(hb[b].hc, k), rc = C - lc, lh = mr__hc_h(hb[b].hc, k);
            if (lc < cfg->min_data_in_leaf || rc < cfg->min_data_in_leaf) continue;
            double lhd = (double)lh * ih, rhd = (double)(H - lh) * ih;
            if (lhd < cfg->min_sum_hessian || rhd < cfg->min_sum_hessian) continue;
            double gain = mr__leaf_gain((double)hb[b].g * ig, lhd, cfg->lambda_l1, cfg->lambda_l2) +
                          mr__leaf_gain((double)(G - hb[b].g) * ig, rhd, cfg->lambda_l1, cfg->lambda_l2) -
                          parent_gain;
            if (gain > best->gain) {
                best->gain = gain;
                best->feature = f;
                best->kind = MR__FEAT_CATEGORICAL;
                memset(best->cat_bits, 0, sizeof(best->cat_bits));
                best->cat_bits[b >> 5] |= 1u << (b & 31);
                best->default_left = b == 0;
                best->lg = hb[b].g;
                best->lh = lh;
                best->lc = lc;
            }
        }
        return;
    }
    /* Many categories: order the well-populated ones by g / (h + cat_smooth)
     * and scan prefixes from both ends (LightGBM); rare ones stay right. */
    catscore cs[MR__GBDT_MAX_BINS];
    int n_used = 0;
    for (int b = 0; b < nb; b++) {
        if (mr__hc_c(hb[b].hc, k) < cfg->min_data_per_group) continue;
        cs[n_used].score = ((double)hb[b].g * ig) / ((double)mr__hc_h(hb[b].hc, k) * ih + cfg->cat_smooth);
        cs[n_used].bin = b;
        n_used++;
    }
    if (n_used < 2) return;
    qsort(cs, (size_t)n_used, sizeof(catscore), cmp_catscore);
    int max_num = cfg->max_cat_threshold;
    if (max_num > (n_used + 1) / 2) max_num = (n_used + 1) / 2;
    const double l2 = cfg->lambda_l2 + cfg->cat_l2;
    for (int dir = 0; dir < 2; dir++) {
        int64_t lg = 0;
        uint64_t lhc = 0;
        for (int i = 0; i < max_num; i++) {
            const mr__hbin *e = &hb[cs[dir ? n_used - 1 - i : i].bin];
            lg += e->g;
            lhc += e->hc;
            int64_t lh = mr__hc_h(lhc, k), lc = mr__hc_c(lhc, k), rc = C - lc;
            if (lc < cfg->min_data_in_leaf) continue;
            if (rc < cfg->min_data_in_leaf) break;
            double lhd = (double)lh * ih, rhd = (double)(H - lh) * ih;
            if (lhd < cfg->min_sum_hessian) continue;
            if (rhd < cfg->min_sum_hessian) break;
            double gain = mr__leaf_gain((double)lg * ig, lhd, cfg->lambda_l1, l2) +
                          mr__leaf_gain((double)(G - lg) * ig, rhd, cfg->lambda_l1, l2) - parent_gain;
            if (gain > best->gain) {
                best->gain = gain;
                best->feature = f;
                best->kind = MR__FEAT_CATEGORICAL;
                memset(best->cat_bits, 0, sizeof(best->cat_bits));
                for (int k = 0; k <= i; k++) {
                    int b = cs[dir ? n_used - 1 - k : k].bin;
                    best->cat_bits[b >> 5] |= 1u << (b & 31);
                }
                best->default_left = (uint8_t)(best->cat_bits[0] & 1u);
                best->lg = lg;
                best->lh = lh;
                best->lc = lc;
            }
        }
    }
}

void mr__find_best_split(const mr_gbdt_data *d, const mr__hbin *hist, int64_t G, int64_t H, int64_t C,
                         const mr__split_cfg *cfg, const uint8_t *feat_mask, mr__split *best)
{
    mr__find_best_split_range(d, hist, G, H, C, cfg, feat_mask, 0, d->n_features, best);
}

void mr__find_best_split_range(const mr_gbdt_data *d, const mr__hbin *hist, int64_t G, int64_t H, int64_t C,
                               const mr__split_cfg *cfg, const uint8_t *feat_mask, size_t f_lo, size_t f_hi,
                               mr__split *best)
{
    memset(best, 0, sizeof(*best));
    best->gain = -INFINITY;
    best->feature = -1;
    double parent_gain =
        mr__leaf_gain((double)G * cfg->inv_gscale, (double)H * cfg->inv_hscale, cfg->lambda_l1, cfg->lambda_l2);
    mr__split cur;
    for (size_t f = f_lo; f < f_hi; f++) {
        if (feat_mask && !feat_mask[f]) continue;
        int nb = d->feat[f].n_bins;
        if (nb < 2) continue;
        cur.gain = -INFINITY;
        cur.feature = -1;
        const mr__hbin *hb = hist + d->bin_offset[f];
        if (d->feat[f].kind == MR__FEAT_CATEGORICAL)
            scan_categorical(hb, nb, (int)f, G, H, C, parent_gain, cfg, &cur);
        else
            scan_numeric(hb, nb, (int)f, G, H, C, parent_gain, cfg, &cur);
        if (cur.feature >= 0 && cur.gain > best->gain) *best = cur;
    }
    if (best->feature >= 0 && !(best->gain > cfg->min_gain_to_split && best->gain > 0)) {
        best->gain = -INFINITY;
        best->feature = -1;
    }
}

/* ---- tree storage ---------------------------------------------------------------- */

mr_status mr__tree_alloc(mr__tree *t, int max_leaves)
{
    memset(t, 0, sizeof(*t));
    size_t ni = (size_t)(max_leaves > 1 ? max_leaves - 1 : 1), nl = (size_t)max_leaves;
    t->split_feature = mr_calloc(ni, sizeof(int32_t));
    t->threshold_bin = mr_calloc(ni, sizeof(uint16_t));
    t->threshold = mr_calloc(ni, sizeof(double));
    t->decision = mr_calloc(ni, 1);
    t->left = mr_calloc(ni, sizeof(int32_t));
    t->right = mr_calloc(ni, sizeof(int32_t));
    t->split_gain = mr_calloc(ni, sizeof(double));
    t->internal_value = mr_calloc(ni, sizeof(double));
    t->internal_count = mr_calloc(ni, sizeof(int64_t));
    t->leaf_value = mr_calloc(nl, sizeof(double));
    t->leaf_count = mr_calloc(nl, sizeof(int64_t));
    t->cat_bin_bits = mr_calloc(ni * MR__GBDT_CAT_WORDS, sizeof(uint32_t));
    t->cat_begin = mr_calloc(ni + 1, sizeof(uint32_t));
    if (!t->split_feature || !t->threshold_bin || !t->threshold || !t->decision || !t->left || !t->right ||
        !t->split_gain || !t->internal_value || !t->internal_count || !t->leaf_value || !t->leaf_count ||
        !t->cat_bin_bits || !t->cat_begin) {
        mr__tree_deinit(t);
        return MR_E_NOMEM;
    }
    t->n_leaves = 1;
    return MR_OK;
}

void mr__tree_deinit(mr__tree *t)
{
    if (!t) return;
    mr_free(t->split_feature);
    mr_free(t->threshold_bin);
    mr_free(t->threshold);
    mr_free(t->decision);
    mr_free(t->left);
    mr_free(t->right);
    mr_free(t->split_gain);
    mr_free(t->internal_value);
    mr_free(t->internal_count);
    mr_free(t->leaf_value);
    mr_free(t->leaf_count);
    mr_free(t->cat_bin_bits);
    mr_free(t->cat_begin);
    mr_free(t->cat_raw_bits);
    memset(t, 0, sizeof(*t));
}

mr_status mr__tree_finish_categorical(mr__tree *t, const mr_gbdt_data *d, mr_error *err)
{
    size_t words = 0;
    for (int c = 0; c < t->n_cat; c++) {
        /* find the node of category split c to learn its feature */
        for (int i = 0; i < t->n_leaves - 1; i++) {
            if ((t->decision[i] & MR__DT_CATEGORICAL) && t->threshold_bin[i] == c) {
                const mr__bin_feature *f = &d->feat[t->split_feature[i]];
                int32_t maxc = f->n_bins > 1 ? f->cats[f->n_bins - 1] : 0;
                t->cat_begin[c] = (uint32_t)words;
                words += (size_t)maxc / 32 + 1;
                break;
            }
        }
    }
    t->cat_begin[t->n_cat] = (uint32_t)words;
    mr_free(t->cat_raw_bits);
    t->cat_raw_bits = NULL;
    t->cat_raw_cap = 0;
    if (t->n_cat == 0) return MR_OK;
    t->cat_raw_bits = mr_calloc(words, sizeof(uint32_t));
    if (!t->cat_raw_bits) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    t->cat_raw_cap = words;
    for (int i = 0; i < t->n_leaves - 1; i++) {
        if (!(t->decision[i] & MR__DT_CATEGORICAL)) continue;
        int c = t->threshold_bin[i];
        const mr__bin_feature *f = &d->feat[t->split_feature[i]];
        const uint32_t *bb = t->cat_bin_bits + (size_t)c * MR__GBDT_CAT_WORDS;
        uint32_t *raw = t->cat_raw_bits + t->cat_begin[c];
        size_t nw = t->cat_begin[c + 1] - t->cat_begin[c];
        /* codes the mapper does not know behave like bin 0 */
        if (bb[0] & 1u)
            for (size_t w = 0; w < nw; w++) raw[w] = 0xFFFFFFFFu;
        for (int b = 1; b < f->n_bins; b++) {
            uint32_t code = (uint32_t)f->cats[b];
            int in = (bb[b >> 5] >> (b & 31)) & 1;
            if (in)
                raw[code >> 5] |= 1u << (code & 31);
            else
                raw[code >> 5] &= ~(1u << (code & 31));
        }
    }
    return MR_OK;
}

/* ---- grower -------------------------------------------------------------------- */

typedef struct leaf_state {
    size_t begin, count;
    int depth;
    int slot;           /* histogram slot, -1 = none */
    int parent_node;    /* -1 for the root */
    int is_left;
    int64_t G, H, C;
    mr__split best;
} leaf_state;

struct mr__grower {
    const mr_gbdt_data *d;
    int max_leaves;
    int max_threads;
    size_t total_bins;
    mr__hist_ctx *hc;
    mr__hbin *pool;      /* max_leaves * total_bins */
    int *free_slots;
    int n_free;
    uint8_t *colbins;    /* (n_features, n_rows) column-major copy of the bins: the
                            partition reads one feature of many rows */
    uint32_t *rows;      /* n_rows: the partition; leaves own contiguous ranges */
    uint32_t *tmp;       /* n_rows scratch */
    size_t *blk_left;    /* per partition block: rows going left */
    size_t max_blocks;
    leaf_state *leaves;
    mr__dist *D;         /* across ranks: the histograms' own slice is global */
};

#define PART_BLOCK 4096 /* rows per partition task */

mr_status mr__grower_new(const mr_gbdt_data *d, int num_leaves, int max_threads, mr__grower **out, mr_error *err)
{
    mr__grower *g = mr_calloc(1, sizeof(*g));
    if (!g) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    g->d = d;
    g->max_leaves = num_leaves;
    g->max_threads = max_threads;
    g->total_bins = d->bin_offset[d->n_features];
    size_t n = d->n_rows ? d->n_rows : 1;
    g->max_blocks = n / PART_BLOCK + 2;
    /* The pool is reserved once; pages are touched only when a slot is used. */
    g->pool = mr_malloc((size_t)num_leaves * g->total_bins * sizeof(mr__hbin));
    g->free_slots = mr_malloc((size_t)num_leaves * sizeof(int));
    g->rows = mr_malloc(n * sizeof(uint32_t));
    g->colbins = mr_malloc(n * d->n_features);
    g->tmp = mr_malloc(n * sizeof(uint32_t));
    g->blk_left = mr_malloc(g->max_blocks * sizeof(size_t));
    g->leaves = mr_calloc((size_t)num_leaves, sizeof(leaf_state));
    mr_status st = MR_OK;
    if (!g->pool || !g->free_slots || !g->rows || !g->colbins || !g->tmp || !g->blk_left || !g->leaves)
        st = MR_ERR(err, MR_E_NOMEM, "out of memory for tree growth (%d leaves x %zu bins)", num_leaves,
                    g->total_bins);
    if (st == MR_OK) st = mr__hist_ctx_new(g->total_bins, mr_pool_threads_capped(max_threads), &g->hc, err);
    if (st == MR_OK) {
        const size_t F = d->n_features;
        for (size_t i0 = 0; i0 < d->n_rows; i0 += 64) /* transpose in 64-row tiles */
            for (size_t f = 0; f < F; f++)
                for (size_t i = i0; i < i0 + 64 && i < d->n_rows; i++) g->colbins[f * d->n_rows + i] = d->bins[i * F + f];
    }
    if (st != MR_OK) {
        mr__grower_free(g);
        return st;
    }
    *out = g;
    return MR_OK;
}

void mr__grower_free(mr__grower *g)
{
    if (!g) return;
    mr__hist_ctx_free(g->hc);
    mr_free(g->pool);
    mr_free(g->free_slots);
    mr_free(g->rows);
    mr_free(g->colbins);
    mr_free(g->tmp);
    mr_free(g->blk_left);
    mr_free(g->leaves);
    mr_free(g);
}

uint32_t *mr__grower_rows(mr__grower *g) { return g->rows; }

void mr__grower_set_dist(mr__grower *g, mr__dist *D) { g->D = D; }

void mr__grower_leaf_rows(const mr__grower *g, int leaf, const uint32_t **rows, size_t *n)
{
    *rows = g->rows + g->leaves[leaf].begin;
    *n = g->leaves[leaf].count;
}

static inline mr__hbin *slot_hist(mr__grower *g, int slot) { return g->pool + (size_t)slot * g->total_bins; }

static inline int split_goes_left(const mr__split *s, int b)
{
    if (s->kind == MR__FEAT_CATEGORICAL) return (s->cat_bits[b >> 5] >> (b & 31)) & 1;
    if (b == 0) return s->default_left;
    return b <= s->threshold;
}

typedef struct part_ctx {
    mr__grower *g;
    const mr__split *s;
    size_t begin, count, block;
    uint8_t lut[MR__GBDT_MAX_BINS]; /* bin -> goes left */
} part_ctx;

/* Phase 1: each block writes its left rows forward and its right rows
 * backward into its own stretch of tmp. Branch-free: every row is written
 * to both candidate slots and only the matching cursor advances (the split
 * is a coin flip per row, so a branch would mispredict half the time). */
static void part_scatter(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    part_ctx *c = vctx;
    const mr_gbdt_data *d = c->g->d;
    const uint8_t *col = c->g->colbins + (size_t)c->s->feature * d->n_rows;
    const uint8_t *lut = c->lut;
    const uint32_t *rows = c->g->rows + c->begin;
    uint32_t *tmp = c->g->tmp + c->begin;
    size_t nl = 0, nr = 0;
    for (size_t i = begin; i < end; i++) {
        uint32_t r = rows[i];
        if (i + 32 < end) __builtin_prefetch(col + rows[i + 32]);
        size_t left = lut[col[r]];
        tmp[begin + nl] = r;
        tmp[end - 1 - nr] = r;
        nl += left;
        nr += left ^ 1;
    }
    c->g->blk_left[begin / c->block] = nl;
}

/* Phase 2: copy each block's runs to their final places (stable). */
static void part_gather(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    part_ctx *c = vctx;
    size_t b = begin / c->block, nb = (c->count + c->block - 1) / c->block;
    size_t lpos = 0, total_left = 0;
    for (size_t k = 0; k < nb; k++) {
        if (k < b) lpos += c->g->blk_left[k];
        total_left += c->g->blk_left[k];
    }
    size_t rpos = total_left + (begin - lpos); /* rights before this block = rows before - lefts before */
    const uint32_t *tmp = c->g->tmp + c->begin;
    uint32_t *rows = c->g->rows + c->begin;
    size_t nl = c->g->blk_left[b], n = end - begin;
    memcpy(rows + lpos, tmp + begin, nl * sizeof(uint32_t));
    for (size_t k = 0; k < n - nl; k++) rows[rpos + k] = tmp[end - 1 - k];
}

/* Returns how many of the leaf's rows (this rank's) went left. */
static size_t partition(mr__grower *g, const leaf_state *L, const mr__split *s)
{
    part_ctx c = {.g = g, .s = s, .begin = L->begin, .count = L->count, .block = PART_BLOCK};
    for (int b = 0; b < MR__GBDT_MAX_BINS; b++) c.lut[b] = (uint8_t)split_goes_left(s, b);
    int T = mr_pool_threads_capped(g->max_threads);
    if (T <= 1 || L->count < 2 * PART_BLOCK) {
        c.block = L->count ? L->count : 1;
        part_scatter(&c, 0, L->count, 0);
        part_gather(&c, 0, L->count, 0);
        return g->blk_left[0];
    }
    mr_parallel_for_capped(L->count, PART_BLOCK, g->max_threads, part_scatter, &c);
    mr_parallel_for_capped(L->count, PART_BLOCK, g->max_threads, part_gather, &c);
    size_t nl = 0;
    for (size_t k = 0; k < (L->count + PART_BLOCK - 1) / PART_BLOCK; k++) nl += g->blk_left[k];
    return nl;
}

/* Split finding runs over chunks of features on the pool; a chunk first
 * finishes the subtraction trick on its own bins (parent - small = large),
 * so that pass costs no separate sweep. The chunks' bests combine as the
 * ranks' do: in feature order, the first strictly larger gain wins, which is
 * the whole search's answer whatever the chunking. */
#define SPLIT_CHUNKS 16 /* at most: 2 per thread are enough to balance */

typedef struct split_ctx {
    mr__grower *g;
    leaf_state **L;
    int n;
    const mr__split_cfg *scfg;
    const uint8_t *feat_mask;
    mr__hbin *sub_a;       /* sub_a -= sub_b on each chunk's bins first, or NULL */
    const mr__hbin *sub_b;
    size_t lo, block;
    mr__split part[SPLIT_CHUNKS][2];
} split_ctx;

static void split_task(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    split_ctx *c = vctx;
    const mr_gbdt_data *d = c->g->d;
    size_t f0 = c->lo + begin, f1 = c->lo + end, b0 = d->bin_offset[f0], b1 = d->bin_offset[f1];
    if (c->sub_a) mr__hist_sub(c->sub_a + b0, c->sub_b + b0, b1 - b0);
    for (int k = 0; k < c->n; k++) {
        const leaf_state *L = c->L[k];
        mr__find_best_split_range(d, slot_hist(c->g, L->slot), L->G, L->H, L->C, c->scfg, c->feat_mask, f0, f1,
                                  &c->part[begin / c->block][k]);
    }
}

/* The best splits of leaves L[0..n) (n <= 2, those that may split), after
 * sub_a -= sub_b when sub_a is given: over this rank's feature slice, then
 * the best of all ranks in one exchange (one process: over every feature). */
static mr_status best_splits(mr__grower *g, leaf_state **L, int n, const mr__split_cfg *scfg,
                             const uint8_t *feat_mask, mr__hbin *sub_a, const mr__hbin *sub_b, mr_error *err)
{
    const mr_gbdt_data *d = g->d;
    size_t lo = 0, hi = d->n_features;
    if (g->D) {
        lo = g->D->fb[g->D->rank];
        hi = g->D->fb[g->D->rank + 1];
    }
    split_ctx c = {.g = g, .L = L, .n = n, .scfg = scfg, .feat_mask = feat_mask, .sub_a = sub_a, .sub_b = sub_b,
                   .lo = lo};
    const size_t nf = hi - lo;
    size_t want = (size_t)mr_pool_threads_capped(g->max_threads) * 2;
    if (want > SPLIT_CHUNKS) want = SPLIT_CHUNKS;
    c.block = nf ? (nf + want - 1) / want : 1;
    if (nf) mr_parallel_for_capped(nf, c.block, g->max_threads, split_task, &c);
    const size_t n_chunks = nf ? (nf + c.block - 1) / c.block : 0;
    mr__split s[2];
    for (int k = 0; k < n; k++) {
        memset(&s[k], 0, sizeof(s[k]));
        s[k].gain = -INFINITY;
        s[k].feature = -1;
        for (size_t j = 0; j < n_chunks; j++) {
            const mr__split *x = &c.part[j][k];
            if (x->feature >= 0 && (s[k].feature < 0 || x->gain > s[k].gain)) s[k] = *x;
        }
    }
    mr_status st = g->D ? mr__dist_best_splits(g->D, s, n, "the best split", err) : MR_OK;
    for (int k = 0; st == MR_OK && k < n; k++) L[k]->best = s[k];
    return st;
}

static int can_split(const leaf_state *L, const mr__split_cfg *scfg, const mr__grow_cfg *gcfg)
{
    if (L->C < 2 * scfg->min_data_in_leaf) return 0;
    if (gcfg->max_depth > 0 && L->depth >= gcfg->max_depth) return 0;
    return 1;
}

mr_status mr__grower_grow(mr__grower *g, size_t n, const mr__ghq *gh, const uint32_t *feats, size_t n_feats,
                          const uint8_t *feat_mask, const mr__split_cfg *scfg, const mr__grow_cfg *gcfg, mr__tree *tree,
                          mr_error *err)
{
    mr_status st = MR_OK;
    const mr_gbdt_data *d = g->d;
    const double ig = scfg->inv_gscale, ih = scfg->inv_hscale;
    int max_leaves = gcfg->num_leaves < g->max_leaves ? gcfg->num_leaves : g->max_leaves;
    g->n_free = 0;
    for (int i = max_leaves - 1; i >= 0; i--) g->free_slots[g->n_free++] = i;
    tree->n_leaves = 1;
    tree->n_cat = 0;
    leaf_state *root = &g->leaves[0];
    *root = (leaf_state){.begin = 0, .count = n, .depth = 0, .slot = -1, .parent_node = -1};
    /* Root sums from the histogram: every row is in exactly one bin of any
     * feature. Without features to split, sum the rows directly. */
    root->slot = g->free_slots[--g->n_free];
    mr__hbin *rh = slot_hist(g, root->slot);
    /* rows[] is ascending and unique, so with every row present it is the
     * identity: the root pass then streams the matrix without the index */
    mr__hist_build(g->hc, d, n == d->n_rows ? NULL : g->rows, n, gh, feats, n_feats, g->max_threads, rh);
    {
        size_t f0 = feats ? feats[0] : 0;
        int64_t G = 0;
        uint64_t HC = 0;
        if (n_feats > 0 || !feats) {
            for (uint32_t b = d->bin_offset[f0]; b < d->bin_offset[f0 + 1]; b++) {
                G += rh[b].g;
                HC += rh[b].hc;
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                G += gh[g->rows[i]].g;
                HC += gh[g->rows[i]].hc;
            }
        }
        int64_t H = mr__hc_h(HC, scfg->hc_bits), C = mr__hc_c(HC, scfg->hc_bits);
        int64_t sums[3] = {G, H, C}; /* this rank's; across ranks, the sum of all */
        if (g->D && ((st = mr__dist_allreduce_i64(g->D, sums, 3, MR__DIST_SUM, "the root sums", err)) != MR_OK ||
                     (st = mr__dist_reduce_scatter_hist(g->D, d, rh, "the root histogram", err)) != MR_OK))
            return st;
        root->G = sums[0];
        root->H = sums[1];
        root->C = sums[2];
    }
    root->best.gain = -INFINITY;
    root->best.feature = -1;
    if (can_split(root, scfg, gcfg) && (st = best_splits(g, &root, 1, scfg, feat_mask, NULL, NULL, err)) != MR_OK)
        return st;
    int n_leaves = 1;
    while (n_leaves < max_leaves) {
        int bl = -1;
        double bg = 0;
        for (int l = 0; l < n_leaves; l++)
            if (g->leaves[l].best.feature >= 0 && (bl < 0 || g->leaves[l].best.gain > bg)) {
                bl = l;
                bg = g->leaves[l].best.gain;
            }
        if (bl < 0) break;
        leaf_state *L = &g->leaves[bl];
        const mr__split s = L->best;
        int node = n_leaves - 1;
        int nr = n_leaves;
        /* record the node */
        tree->split_feature[node] = s.feature;
        tree->decision[node] = (uint8_t)((s.kind == MR__FEAT_CATEGORICAL ? MR__DT_CATEGORICAL : 0) |
                                         (s.default_left ? MR__DT_DEFAULT_LEFT : 0));
        if (s.kind == MR__FEAT_CATEGORICAL) {
            tree->threshold_bin[node] = (uint16_t)tree->n_cat;
            memcpy(tree->cat_bin_bits + (size_t)tree->n_cat * MR__GBDT_CAT_WORDS, s.cat_bits, sizeof(s.cat_bits));
            tree->threshold[node] = 0;
            tree->n_cat++;
        } else {
            tree->threshold_bin[node] = s.threshold;
            tree->threshold[node] = d->feat[s.feature].upper[s.threshold];
        }
        tree->split_gain[node] = s.gain;
        tree->internal_value[node] =
            mr__leaf_output((double)L->G * ig, (double)L->H * ih, scfg->lambda_l1, scfg->lambda_l2) *
            gcfg->learning_rate;
        tree->internal_count[node] = L->C;
        tree->left[node] = ~bl;
        tree->right[node] = ~nr;
        if (L->parent_node >= 0) {
            if (L->is_left)
                tree->left[L->parent_node] = node;
            else
                tree->right[L->parent_node] = node;
        }
        size_t nleft = partition(g, L, &s); /* this rank's rows; s.lc counts all ranks' */
        leaf_state P = *L;
        leaf_state *A = &g->leaves[bl], *B = &g->leaves[nr];
        *A = (leaf_state){.begin = P.begin, .count = nleft, .depth = P.depth + 1, .slot = -1,
                          .parent_node = node, .is_left = 1, .G = s.lg, .H = s.lh, .C = s.lc};
        *B = (leaf_state){.begin = P.begin + nleft, .count = P.count - nleft, .depth = P.depth + 1,
                          .slot = -1, .parent_node = node, .is_left = 0, .G = P.G - s.lg, .H = P.H - s.lh,
                          .C = P.C - s.lc};
        A->best.feature = B->best.feature = -1;
        A->best.gain = B->best.gain = -INFINITY;
        n_leaves++;
        tree->n_leaves = n_leaves;
        int ca = can_split(A, scfg, gcfg), cb = can_split(B, scfg, gcfg);
        if (n_leaves >= max_leaves) ca = cb = 0; /* no further splits: skip the histograms */
        if (!ca && !cb) {
            g->free_slots[g->n_free++] = P.slot;
            continue;
        }
        leaf_state *small = A->C <= B->C ? A : B, *large = small == A ? B : A;
        int ss = g->free_slots[--g->n_free];
        mr__hbin *sh = slot_hist(g, ss), *ph = slot_hist(g, P.slot);
        mr__hist_build(g->hc, d, g->rows + small->begin, small->count, gh, feats, n_feats, g->max_threads, sh);
        /* across ranks only the smaller child travels; the larger is the difference */
        if (g->D && (st = mr__dist_reduce_scatter_hist(g->D, d, sh, "a leaf histogram", err)) != MR_OK) return st;
        small->slot = ss;
        large->slot = P.slot;
        leaf_state *kids[2] = {A, B}, *want[2];
        int n_want = 0;
        for (int k = 0; k < 2; k++)
            if (can_split(kids[k], scfg, gcfg)) want[n_want++] = kids[k];
        /* parent - small = large on this rank's slice, chunk by chunk, then the splits */
        if ((st = best_splits(g, want, n_want, scfg, feat_mask, ph, sh, err)) != MR_OK) return st;
        for (int k = 0; k < 2; k++) {
            leaf_state *K = kids[k];
            if (K->best.feature < 0) {
                g->free_slots[g->n_free++] = K->slot;
                K->slot = -1;
            }
        }
    }
    for (int l = 0; l < n_leaves; l++) {
        const leaf_state *L = &g->leaves[l];
        tree->leaf_value[l] =
            mr__leaf_output((double)L->G * ig, (double)L->H * ih, scfg->lambda_l1, scfg->lambda_l2) *
            gcfg->learning_rate;
        tree->leaf_count[l] = L->C;
    }
    return MR_OK;
}
