/* Internals shared by the files of src/ml/gbdt: binned data, histograms,
 * trees, objectives, metrics, the model object and parallel helpers. */
#ifndef MILLRACE_GBDT_INT_H
#define MILLRACE_GBDT_INT_H

#include "millrace/gbdt.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MR__GBDT_MAX_BINS 256        /* value bins (<= 255) + the missing bin 0 */
#define MR__GBDT_CAT_WORDS (MR__GBDT_MAX_BINS / 32)
#define MR__GBDT_MAX_CAT_CODE (1 << 24) /* categorical codes must be below this */

enum { MR__FEAT_NUMERIC = 0, MR__FEAT_CATEGORICAL = 1 };

/* One feature's bin mapper. Bin 0 is "missing" (NaN; for categoricals also
 * negative, non-integer, rare or unseen codes); value bins are 1..n_bins-1. */
typedef struct mr__bin_feature {
    uint8_t kind;      /* MR__FEAT_* */
    uint16_t n_bins;   /* including bin 0; 1 = constant or all-missing */
    double *upper;     /* numeric: upper[b] inclusive edge of bin b (b >= 1), upper[n_bins-1] = +inf; upper[0] unused */
    int32_t *cats;     /* categorical: cats[b] = code of bin b (b >= 1), ascending; cats[0] unused */
} mr__bin_feature;

struct mr_gbdt_data {
    size_t n_rows, n_features;
    char **names;            /* n_features */
    mr__bin_feature *feat;   /* n_features */
    uint32_t *bin_offset;    /* n_features + 1: start of each feature in a flat histogram */
    uint8_t *bins;           /* (n_rows, n_features) row-major */
    float *label;            /* n_rows or NULL */
    int max_bin;             /* as used to build the edges */
};

/* Map one value to its bin (the single definition used by binning, and the
 * definition prediction thresholds agree with). */
static inline int mr__bin_numeric(const mr__bin_feature *f, double v)
{
    if (v != v) return 0;
    int hi = f->n_bins - 1; /* the first b in [1, hi] with v <= upper[b], else hi */
    if (hi < 1) return 0;
    /* branch-free halving (a conditional move per step): a value's bin is a
     * coin flip per step, so a branch mispredicts about every other step */
    const double *base = f->upper + 1;
    size_t n = (size_t)hi;
    while (n > 1) {
        size_t half = n >> 1;
        base += (size_t)(base[half - 1] < v) * half;
        n -= half;
    }
    return (int)(base - f->upper);
}
static inline int mr__cat_code(double v, int32_t *code_out)
{
    if (!(v >= 0.0) || v >= (double)MR__GBDT_MAX_CAT_CODE) return 0;
    int32_t c = (int32_t)v;
    if ((double)c != v) return 0;
    *code_out = c;
    return 1;
}
static inline int mr__bin_categorical(const mr__bin_feature *f, double v)
{
    int32_t c;
    if (!mr__cat_code(v, &c)) return 0;
    int lo = 1, hi = f->n_bins - 1;
    while (lo <= hi) {
        int mid = (lo + hi) >> 1;
        if (f->cats[mid] == c) return mid;
        if (f->cats[mid] < c)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

mr_status mr__gbdt_data_alloc(size_t n_rows, size_t n_features, mr_gbdt_data **out, mr_error *err);
mr_status mr__gbdt_data_finish_offsets(mr_gbdt_data *d, mr_error *err);
/* Parses params->categorical_feature against names into is_cat[n_features]. */
mr_status mr__gbdt_parse_categorical(const char *spec, const char *const *names, size_t n_features,
                                     uint8_t *is_cat, mr_error *err);

/* Sorts v[0..n) (no NaN) ascending with tmp[0..n) as scratch (binning.c:
 * radix; a zero comes out as +0.0). */
void mr__sort_doubles(double *v, size_t n, double *tmp);

/* Which batch walk a predictor uses: 0 scalar, 1 AVX-512 over floats, 2
 * AVX-512 over quantised rows (capped by MILLRACE_PREDICT_SIMD when the
 * predictor is built; every path gives bit-identical scores). */
int mr__gbdt_predictor_path(const mr_gbdt_predictor *p);

/* ---- deterministic RNG: core's splitmix64 ------------------------------ */
static inline uint64_t mr__hash3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xD1B54A32D192ED03ull ^ c;
    return mr_splitmix64(&s);
}

/* ---- histograms -------------------------------------------------------------
 * One entry per (feature, bin): integer sums of quantised gradients, and
 * the sum of quantised hessians packed with the row count in one word,
 * hc = (sum h) << k | count, k = mr__hc_bits(rows of all ranks). So a row adds
 * one 16-byte pair {g, h << k | 1} to each of its bins, one vector add, and
 * the packed sums of any set of rows are the packing of its sums: h >= 0 and
 * the count < 2^k, so no field carries into the next, and the hessian's
 * quantisation keeps sum h < 2^(64-k) (boost.c). Integer sums are exact and
 * associative, so a histogram is the same whatever the order of rows or
 * threads, and parent - child equals the other child built directly (see
 * hist.c). */
typedef struct mr__hbin {
    int64_t g;
    uint64_t hc;
} mr__hbin;

/* Quantised per-row gradient pair of the tree being grown, packed as a
 * histogram entry of one row: hc = h << k | 1. */
typedef mr__hbin mr__ghq;

/* Most rows one training takes: the count's bits k must leave the hessian
 * 64 - 2k >= 8 bits. */
#define MR__GBDT_MAX_ROWS ((size_t)1 << 28)
/* k: the bits of a count of up to n_rows rows. */
static inline int mr__hc_bits(size_t n_rows)
{
    int k = 1;
    while (k < 63 && ((size_t)1 << k) <= n_rows) k++;
    return k;
}
static inline uint64_t mr__hc_pack(int64_t h, int64_t c, int k) { return ((uint64_t)h << k) | (uint64_t)c; }
static inline int64_t mr__hc_h(uint64_t hc, int k) { return (int64_t)(hc >> k); }
static inline int64_t mr__hc_c(uint64_t hc, int k) { return (int64_t)(hc & (((uint64_t)1 << k) - 1)); }

typedef struct mr__hist_ctx mr__hist_ctx;
/* Scratch for building histograms with up to n_threads threads. */
mr_status mr__hist_ctx_new(size_t total_bins, int n_threads, mr__hist_ctx **out, mr_error *err);
void mr__hist_ctx_free(mr__hist_ctx *hc);
/* hist[total_bins] = histogram of rows idx[0..n) (idx NULL = rows 0..n)
 * over the features feats[0..n_feats) (feats NULL = all; the bins of the
 * others are left zero). Allocates nothing. */
void mr__hist_build(mr__hist_ctx *hc, const mr_gbdt_data *d, const uint32_t *idx, size_t n, const mr__ghq *gh,
                    const uint32_t *feats, size_t n_feats, int max_threads, mr__hbin *hist);
/* Scalar reference: single thread, straightforward loop (tests compare). */
void mr__hist_build_ref(const mr_gbdt_data *d, const uint32_t *idx, size_t n, const mr__ghq *gh, mr__hbin *hist);
/* a -= b over n entries. */
void mr__hist_sub(mr__hbin *a, const mr__hbin *b, size_t n);

/* ---- split finding -----------------------------------------------------------*/
typedef struct mr__split {
    double gain;          /* > 0 when valid; -INFINITY = none */
    int32_t feature;      /* -1 = none */
    uint8_t kind;         /* MR__FEAT_* */
    uint8_t default_left; /* missing (bin 0) goes left */
    uint16_t threshold;   /* numeric: bins 1..threshold go left */
    uint32_t cat_bits[MR__GBDT_CAT_WORDS]; /* categorical: bins going left (bit b) */
    int64_t lg, lh, lc;   /* left sums (quantised) */
} mr__split;

typedef struct mr__split_cfg {
    double lambda_l1, lambda_l2, min_gain_to_split, min_sum_hessian;
    int64_t min_data_in_leaf;
    double inv_gscale, inv_hscale; /* dequantisation factors of this tree */
    int hc_bits;                   /* k of the histograms' packed hessian | count */
    int max_cat_to_onehot, max_cat_threshold, min_data_per_group;
    double cat_smooth, cat_l2;
} mr__split_cfg;

/* Best split of one leaf with sums (G, H, C) over the features with
 * feat_mask[f] != 0 (NULL = all). Deterministic: ties go to the lower
 * feature, then the lower threshold, then missing-left. */
void mr__find_best_split(const mr_gbdt_data *d, const mr__hbin *hist, int64_t G, int64_t H, int64_t C,
                         const mr__split_cfg *cfg, const uint8_t *feat_mask, mr__split *best);
/* The same over features [f_lo, f_hi) only. */
void mr__find_best_split_range(const mr_gbdt_data *d, const mr__hbin *hist, int64_t G, int64_t H, int64_t C,
                               const mr__split_cfg *cfg, const uint8_t *feat_mask, size_t f_lo, size_t f_hi,
                               mr__split *best);
/* Reference: evaluates every candidate of one numeric feature by direct
 * summation of the histogram (tests). */
double mr__leaf_gain(double G, double H, double l1, double l2);
double mr__leaf_output(double G, double H, double l1, double l2);

/* ---- data-parallel training (dist.c) ---------------------------------------
 * A rank's view of the others: every share's size, its own first global
 * row, the feature slice each rank owns (contiguous, balanced by bins;
 * possibly empty), and scratch for the exchanges. */
enum { MR__DIST_SUM = 0, MR__DIST_MAX = 1, MR__DIST_MIN = 2 };
typedef struct mr__dist {
    const mr_gbdt_comm *c;
    int rank, size;
    int iter;              /* the round, for messages (-1 before the first) */
    size_t n_total, row_lo;
    int64_t *rows_of;      /* size: rows of each rank */
    size_t *row_lo_of;     /* size + 1: first global row of each rank */
    uint32_t *fb;          /* size + 1: feature slice boundaries */
    mr_gbdt_xfer *x;       /* 2 * size transfers */
    mr__hbin *rs_buf;      /* (size - 1) * own slice bins */
    uint64_t hist_bytes;   /* histogram bytes this rank sent */
} mr__dist;
/* Only the transfer scratch (for the exchanges before the data is binned). */
mr_status mr__dist_begin(mr__dist *D, const mr_gbdt_comm *c, mr_error *err);
/* Runs the transfers x[0..n); a failure names the peer, what and the round. */
mr_status mr__dist_exchange(mr__dist *D, mr_gbdt_xfer *x, size_t n, const char *what, mr_error *err);
/* Learns the shares (one exchange). d: this rank's binned rows. */
mr_status mr__dist_init(mr__dist *D, const mr_gbdt_comm *c, const mr_gbdt_data *d, mr_error *err);
void mr__dist_free(mr__dist *D);
/* all[size * len] = every rank's len bytes, in rank order. */
mr_status mr__dist_allgather(mr__dist *D, const void *mine, size_t len, void *all, const char *what, mr_error *err);
/* all = every rank's lens[q] bytes, concatenated in rank order. */
mr_status mr__dist_allgatherv(mr__dist *D, const void *mine, const size_t *lens, void *all, const char *what,
                              mr_error *err);
/* v[0..n) reduced across ranks (MR__DIST_*), the same on every rank. */
mr_status mr__dist_allreduce_i64(mr__dist *D, int64_t *v, int n, int op, const char *what, mr_error *err);
/* This rank's slice of the histogram: bins [bin_lo, bin_hi). */
void mr__dist_slice(const mr__dist *D, const mr_gbdt_data *d, size_t *bin_lo, size_t *bin_hi);
/* hist holds this rank's rows' histogram; afterwards its own slice holds
 * the sum over all ranks (the other slices are left as they were). */
mr_status mr__dist_reduce_scatter_hist(mr__dist *D, const mr_gbdt_data *d, mr__hbin *hist, const char *what,
                                       mr_error *err);
/* best[0..n): this rank's best splits (of n leaves) over its slice;
 * afterwards the best of all ranks, leaf by leaf. */
mr_status mr__dist_best_splits(mr__dist *D, mr__split *best, int n, const char *what, mr_error *err);

/* ---- trees --------------------------------------------------------------------
 * Internal node i: split_feature[i], children left[i]/right[i] (>= 0: node,
 * < 0: leaf ~child). Leaves carry leaf_value (learning rate applied). */
enum { MR__DT_CATEGORICAL = 1, MR__DT_DEFAULT_LEFT = 2 };

typedef struct mr__tree {
    int32_t n_leaves;
    int32_t *split_feature;   /* n_leaves - 1 */
    uint16_t *threshold_bin;  /* numeric: bins <= go left; categorical: index into cat ranges */
    double *threshold;        /* numeric: raw value, v <= threshold goes left */
    uint8_t *decision;        /* MR__DT_* flags */
    int32_t *left, *right;
    double *split_gain;
    double *internal_value;   /* output the node would have as a leaf */
    int64_t *internal_count;
    double *leaf_value;       /* n_leaves */
    int64_t *leaf_count;
    int32_t n_cat;            /* categorical splits */
    uint32_t *cat_bin_bits;   /* n_cat * MR__GBDT_CAT_WORDS: left bins (training bins) */
    uint32_t *cat_begin;      /* n_cat + 1: offsets into cat_raw_bits (words) */
    uint32_t *cat_raw_bits;   /* bitsets over raw category codes */
    size_t cat_raw_cap;
} mr__tree;

mr_status mr__tree_alloc(mr__tree *t, int max_leaves);
void mr__tree_deinit(mr__tree *t);

/* Grows trees leaf-wise over one binned training set; owns the row index
 * partition, the histogram pool and all scratch (allocated once). */
typedef struct mr__grower mr__grower;
typedef struct mr__grow_cfg {
    int num_leaves, max_depth;
    double learning_rate;
    int max_threads;
} mr__grow_cfg;
mr_status mr__grower_new(const mr_gbdt_data *d, int num_leaves, int max_threads, mr__grower **out, mr_error *err);
void mr__grower_free(mr__grower *g);
/* The row list to fill (ascending) before mr__grower_grow: n_rows slots. */
uint32_t *mr__grower_rows(mr__grower *g);
/* Grows one tree over rows[0..n) with quantised gradients gh. feats/n_feats:
 * the features this tree may use (NULL = all); feat_mask the same as flags.
 * Leaf values include the learning rate. */
mr_status mr__grower_grow(mr__grower *g, size_t n, const mr__ghq *gh, const uint32_t *feats, size_t n_feats,
                          const uint8_t *feat_mask, const mr__split_cfg *scfg, const mr__grow_cfg *gcfg, mr__tree *tree,
                          mr_error *err);
/* Grows across ranks from now on (D borrowed; NULL: one process). */
void mr__grower_set_dist(mr__grower *g, mr__dist *D);
/* Rows of leaf `leaf` of the tree just grown. */
void mr__grower_leaf_rows(const mr__grower *g, int leaf, const uint32_t **rows, size_t *n);
/* Fills the raw-code bitsets of the categorical splits of t (after growth). */
mr_status mr__tree_finish_categorical(mr__tree *t, const mr_gbdt_data *d, mr_error *err);

struct mr_gbdt_model {
    mr_gbdt_objective objective;
    int num_class;            /* 1 unless multiclass */
    int num_tree_per_iteration;
    double *init_score;       /* num_tree_per_iteration */
    double alpha;             /* huber delta (informational) */
    int best_iteration;       /* -1 if no early stopping */
    size_t n_features;
    char **names;
    uint8_t *kind;            /* MR__FEAT_* per feature */
    size_t n_trees, cap_trees;
    mr__tree *trees;
    char *params_text;        /* canonical params */
};

mr_status mr__model_new(size_t n_features, mr_gbdt_model **out, mr_error *err);
mr_status mr__model_push_tree(mr_gbdt_model *m, mr__tree *t, mr_error *err); /* takes t's arrays */

/* Leaf index of binned row `row` (n_features bins) in tree t. */
static inline int mr__tree_leaf_binned(const mr__tree *t, const uint8_t *row)
{
    if (t->n_leaves <= 1) return 0;
    int node = 0;
    for (;;) {
        int f = t->split_feature[node];
        int b = row[f];
        int go_left;
        if (t->decision[node] & MR__DT_CATEGORICAL) {
            const uint32_t *bits = t->cat_bin_bits + (size_t)t->threshold_bin[node] * MR__GBDT_CAT_WORDS;
            go_left = (bits[b >> 5] >> (b & 31)) & 1;
        } else if (b == 0) {
            go_left = (t->decision[node] & MR__DT_DEFAULT_LEFT) != 0;
        } else {
            go_left = b <= t->threshold_bin[node];
        }
        int next = go_left ? t->left[node] : t->right[node];
        if (next < 0) return ~next;
        node = next;
    }
}

/* ---- objectives ----------------------------------------------------------- */
/* Gradients of rows [begin, end): score/grad/hess are (n_rows, k) row-major. */
void mr__objective_grad(mr_gbdt_objective obj, int k, double alpha, const float *label, const double *score,
                        size_t begin, size_t end, float *grad, float *hess);
/* Initial raw score per output (boost_from_average). */
void mr__objective_init_score(mr_gbdt_objective obj, int k, const float *label, size_t n, double *init);
/* Label check: MR_E_INVALID_ARG naming the first bad row. */
mr_status mr__objective_check_labels(mr_gbdt_objective obj, int k, const float *label, size_t n, mr_error *err);
/* Raw -> output transform in place for one row. */
void mr__objective_transform(mr_gbdt_objective obj, int k, double *v);
mr_gbdt_metric mr__objective_default_metric(mr_gbdt_objective obj);

/* ---- early stopping ----------------------------------------------------------
 * Feed one validation value per round; returns 1 once `patience` rounds have
 * passed without a strict improvement on the best one. */
typedef struct mr__es {
    int patience;
    int higher_better;
    int best_iter;  /* -1 before the first value */
    double best;
} mr__es;
int mr__es_update(mr__es *es, int iter, double v);

/* ---- metrics -------------------------------------------------------------- */
/* Evaluates a metric on raw scores (n, k) into *out (NaN for n 0).
 * Deterministic for any thread count. MR_E_NOMEM when its scratch cannot be
 * allocated (never a NaN: the trainer takes a NaN for divergence). */
mr_status mr__metric_eval(mr_gbdt_metric m, mr_gbdt_objective obj, int k, double alpha, const float *label,
                          const double *score, size_t n, int max_threads, double *out);
int mr__metric_higher_better(mr_gbdt_metric m);
mr_status mr__auc(const float *label, const double *score, size_t n, double *out);

#endif
