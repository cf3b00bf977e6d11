/* Gradient/hessian histograms.
 *
 * Shapes: bins (n_rows, n_features) uint8 row-major; gh (n_rows) packed
 * quantised pairs {g, h << k | 1}; hist (total_bins) mr__hbin of the same
 * packing, feature f's bins at bin_offset[f] .. bin_offset[f+1].
 *
 * Why integers. Each tree quantises its float gradients with a power-of-two
 * scale chosen from the largest |g| (and h) of the round, so a value keeps
 * ~30 significant bits relative to the largest one (the hessian 64 - 2k, at
 * most 30: 24 for a million rows, 16 for 16 million), far finer than the
 * float32 gradients themselves (docs/gbdt.md measures 8 bits costing
 * nothing). Histogram sums are int64 and exact: integer addition is
 * associative, so
 *   - rows can be split over threads any way the scheduler likes, each thread
 *     summing into its own partial histogram, and the partials merged in any
 *     order: the result is bit-identical for 1, 2, 7 or 16 threads;
 *   - the subtraction trick is exact: for a split parent P into children A
 *     (built directly, the smaller one) and B, P - A is *equal* to the
 *     histogram of B built directly, not merely close (tests check this).
 * Sums cannot overflow: |g| <= 2^30 per row and n_rows < 2^28, and the
 * packed hessian | count word is sized for it (gbdt_int.h).
 *
 * The row-major layout loads each row's feature bins as one contiguous
 * run (28 features = one cache line) with its gradient pair once, and
 * scatters into n_features small histograms that stay in L1/L2. Rows of a
 * leaf arrive as an ascending index list (the partition is stable), so the
 * gathers walk memory forwards. A bin update is one 16-byte load, add and
 * store (SSE2), not three 8-byte ones: 1.5x faster per update than a
 * separate count (measured on 1M x 28 bins, 0.97 -> 0.64 ns). */
#include "gbdt_int.h"

#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

struct mr__hist_ctx {
    size_t total_bins;
    int n_threads;
    mr__hbin *partial; /* n_threads * total_bins */
    uint8_t *used;     /* n_threads flags, padded */
};

/* Leaves smaller than this are built by one thread straight into the output:
 * below it the wake-up and merge cost more than they save. */
#define HIST_PAR_MIN_ROWS 4096
#define HIST_MIN_BLOCK 2048
#define HIST_PREFETCH 16 /* rows ahead: covers memory latency at a few ns per row */

mr_status mr__hist_ctx_new(size_t total_bins, int n_threads, mr__hist_ctx **out, mr_error *err)
{
    mr__hist_ctx *hc = mr_calloc(1, sizeof(*hc));
    if (!hc) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    hc->total_bins = total_bins;
    hc->n_threads = n_threads < 1 ? 1 : n_threads;
    hc->partial = mr_malloc((size_t)hc->n_threads * total_bins * sizeof(mr__hbin));
    hc->used = mr_calloc((size_t)hc->n_threads, 64);
    if (!hc->partial || !hc->used) {
        mr__hist_ctx_free(hc);
        return MR_ERR(err, MR_E_NOMEM, "out of memory for histogram scratch");
    }
    *out = hc;
    return MR_OK;
}

void mr__hist_ctx_free(mr__hist_ctx *hc)
{
    if (!hc) return;
    mr_free(hc->partial);
    mr_free(hc->used);
    mr_free(hc);
}

/* One bin += one row's pair. */
static inline void bin_add(mr__hbin *restrict b, const mr__ghq *restrict v)
{
#ifdef __SSE2__
    _mm_storeu_si128((__m128i *)b, _mm_add_epi64(_mm_loadu_si128((const __m128i *)b), _mm_loadu_si128((const __m128i *)v)));
#else
    b->g += v->g;
    b->hc += v->hc;
#endif
}

/* The kernel: rows idx[begin..end) (idx NULL: the rows themselves), four
 * rows at a time so that each feature's offset is loaded once for four
 * updates (9% fewer ns per update than one row at a time, measured on
 * 1M x 28 bins). Rows of a group that share a bin still add in order: the
 * later load sees the earlier store. */
static inline __attribute__((always_inline)) void hist_rows4(const uint8_t *restrict bins, size_t F,
                                                             const uint32_t *restrict off,
                                                             const uint32_t *restrict idx, size_t begin,
                                                             size_t end, const mr__ghq *restrict gh,
                                                             mr__hbin *restrict H, const int indexed)
{
    size_t i = begin;
    for (; i + 4 <= end; i += 4) {
        if (indexed && i + HIST_PREFETCH + 4 <= end) /* leaf rows are sparse: fetch ahead */
            for (int q = 0; q < 4; q++) {
                __builtin_prefetch(bins + (size_t)idx[i + HIST_PREFETCH + q] * F);
                __builtin_prefetch(gh + idx[i + HIST_PREFETCH + q]);
            }
        size_t r0 = indexed ? idx[i] : i, r1 = indexed ? idx[i + 1] : i + 1, r2 = indexed ? idx[i + 2] : i + 2,
               r3 = indexed ? idx[i + 3] : i + 3;
        const uint8_t *restrict b0 = bins + r0 * F, *restrict b1 = bins + r1 * F, *restrict b2 = bins + r2 * F,
                                *restrict b3 = bins + r3 * F;
        const mr__ghq v0 = gh[r0], v1 = gh[r1], v2 = gh[r2], v3 = gh[r3];
        for (size_t f = 0; f < F; f++) {
            mr__hbin *base = H + off[f];
            bin_add(base + b0[f], &v0);
            bin_add(base + b1[f], &v1);
            bin_add(base + b2[f], &v2);
            bin_add(base + b3[f], &v3);
        }
    }
    for (; i < end; i++) {
        size_t r = indexed ? idx[i] : i;
        const uint8_t *restrict row = bins + r * F;
        const mr__ghq v = gh[r];
        for (size_t f = 0; f < F; f++) bin_add(H + off[f] + row[f], &v);
    }
}

static void hist_rows_all(const uint8_t *restrict bins, size_t F, const uint32_t *restrict off,
                          const uint32_t *restrict idx, size_t begin, size_t end, const mr__ghq *restrict gh,
                          mr__hbin *restrict H)
{
    if (idx)
        hist_rows4(bins, F, off, idx, begin, end, gh, H, 1);
    else
        hist_rows4(bins, F, off, NULL, begin, end, gh, H, 0);
}

/* Same over a subset of features (feature_fraction < 1). */
static void hist_rows_sub(const uint8_t *restrict bins, size_t F, const uint32_t *restrict off,
                          const uint32_t *restrict feats, size_t n_feats, const uint32_t *restrict idx, size_t begin,
                          size_t end, const mr__ghq *restrict gh, mr__hbin *restrict H)
{
    for (size_t i = begin; i < end; i++) {
        size_t r = idx ? idx[i] : i;
        if (idx && i + HIST_PREFETCH < end) {
            __builtin_prefetch(bins + (size_t)idx[i + HIST_PREFETCH] * F);
            __builtin_prefetch(gh + idx[i + HIST_PREFETCH]);
        }
        const uint8_t *restrict row = bins + r * F;
        const mr__ghq v = gh[r];
        for (size_t k = 0; k < n_feats; k++) {
            uint32_t f = feats[k];
            bin_add(H + off[f] + row[f], &v);
        }
    }
}

typedef struct build_task {
    mr__hist_ctx *hc;
    const mr_gbdt_data *d;
    const uint32_t *idx;
    const mr__ghq *gh;
    const uint32_t *feats;
    size_t n_feats;
} build_task;

static void run_rows(const build_task *t, size_t begin, size_t end, mr__hbin *H)
{
    const mr_gbdt_data *d = t->d;
    if (t->n_feats == d->n_features)
        hist_rows_all(d->bins, d->n_features, d->bin_offset, t->idx, begin, end, t->gh, H);
    else
        hist_rows_sub(d->bins, d->n_features, d->bin_offset, t->feats, t->n_feats, t->idx, begin, end, t->gh, H);
}

static void build_block(void *vctx, size_t begin, size_t end, int tid)
{
    build_task *t = vctx;
    mr__hbin *H = t->hc->partial + (size_t)tid * t->hc->total_bins;
    if (!t->hc->used[(size_t)tid * 64]) {
        memset(H, 0, t->hc->total_bins * sizeof(mr__hbin));
        t->hc->used[(size_t)tid * 64] = 1;
    }
    run_rows(t, begin, end, H);
}

void mr__hist_build(mr__hist_ctx *hc, const mr_gbdt_data *d, const uint32_t *idx, size_t n, const mr__ghq *gh,
                    const uint32_t *feats, size_t n_feats, int max_threads, mr__hbin *hist)
{
    if (!feats) n_feats = d->n_features;
    build_task t = {.hc = hc, .d = d, .idx = idx, .gh = gh, .feats = feats, .n_feats = n_feats};
    memset(hist, 0, hc->total_bins * sizeof(mr__hbin));
    int T = mr_pool_threads_capped(max_threads);
    if (T > hc->n_threads) T = hc->n_threads;
    if (T <= 1 || n < HIST_PAR_MIN_ROWS) {
        run_rows(&t, 0, n, hist);
    } else {
        for (int i = 0; i < T; i++) hc->used[(size_t)i * 64] = 0;
        size_t block = n / ((size_t)T * 4);
        if (block < HIST_MIN_BLOCK) block = HIST_MIN_BLOCK;
        mr_parallel_for_capped(n, block, T, build_block, &t);
        /* Merge: integer sums, so the order is immaterial. Only the bins of
         * the features built are touched. */
        for (int i = 0; i < T; i++) {
            if (!hc->used[(size_t)i * 64]) continue;
            const mr__hbin *P = hc->partial + (size_t)i * hc->total_bins;
            for (size_t k = 0; k < n_feats; k++) {
                size_t f = feats ? feats[k] : k;
                for (uint32_t b = d->bin_offset[f]; b < d->bin_offset[f + 1]; b++) bin_add(&hist[b], &P[b]);
            }
        }
    }
}

void mr__hist_build_ref(const mr_gbdt_data *d, const uint32_t *idx, size_t n, const mr__ghq *gh, mr__hbin *hist)
{
    memset(hist, 0, d->bin_offset[d->n_features] * sizeof(mr__hbin));
    for (size_t i = 0; i < n; i++) {
        size_t r = idx ? idx[i] : i;
        for (size_t f = 0; f < d->n_features; f++) {
            mr__hbin *b = &hist[d->bin_offset[f] + d->bins[r * d->n_features + f]];
            b->g += gh[r].g;
            b->hc += gh[r].hc;
        }
    }
}

void mr__hist_sub(mr__hbin *a, const mr__hbin *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a[i].g -= b[i].g;
        a[i].hc -= b[i].hc; /* child <= parent in both fields: no borrow */
    }
}
