/* Prediction. A predictor flattens the model's trees once into one node
 * array (24-byte nodes, children as absolute indices, leaves as ~index into
 * one value array), so scoring a row allocates and prepares nothing. Batch
 * scoring walks blocks of rows tree by tree, keeping a tree's nodes hot in
 * cache while the block's rows pass through it; each block of output is
 * written by exactly one thread. */
#include "gbdt_int.h"

#include <stdlib.h>

typedef struct pnode {
    double thr;      /* numeric: v <= thr goes left */
    int32_t feat;
    int32_t left, right; /* >= 0 node index; < 0: ~leaf index */
    uint32_t meta;   /* bit 0 categorical, bit 1 default left, bits 2..: categorical split index */
} pnode;

#define PN_CAT 1u
#define PN_DEFLEFT 2u

struct mr_gbdt_predictor {
    mr_gbdt_objective objective;
    int K;
    size_t F;
    size_t n_trees;
    int32_t *root;      /* per tree: node index, or ~leaf when the tree is one leaf */
    pnode *nodes;
    double *leaf;
    uint32_t *cat_off;  /* per categorical split: offset into cat_bits */
    uint32_t *cat_nbits;
    uint32_t *cat_bits;
    double *init;       /* K */
};

void mr_gbdt_predictor_free(mr_gbdt_predictor *p)
{
    if (!p) return;
    mr_free(p->root);
    mr_free(p->nodes);
    mr_free(p->leaf);
    mr_free(p->cat_off);
    mr_free(p->cat_nbits);
    mr_free(p->cat_bits);
    mr_free(p->init);
    mr_free(p);
}

mr_status mr_gbdt_predictor_new(const mr_gbdt_model *m, int num_iteration, mr_gbdt_predictor **out, mr_error *err)
{
    *out = NULL;
    size_t K = (size_t)m->num_tree_per_iteration;
    size_t nt = m->n_trees;
    if (num_iteration > 0 && (size_t)num_iteration * K < nt) nt = (size_t)num_iteration * K;
    size_t n_nodes = 0, n_leaves = 0, n_cat = 0, n_words = 0;
    for (size_t t = 0; t < nt; t++) {
        const mr__tree *tr = &m->trees[t];
        n_nodes += (size_t)tr->n_leaves - 1;
        n_leaves += (size_t)tr->n_leaves;
        n_cat += (size_t)tr->n_cat;
        if (tr->n_cat) n_words += tr->cat_begin[tr->n_cat];
    }
    mr_gbdt_predictor *p = mr_calloc(1, sizeof(*p));
    if (!p) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    p->objective = m->objective;
    p->K = (int)K;
    p->F = m->n_features;
    p->n_trees = nt;
    p->root = mr_malloc((nt ? nt : 1) * sizeof(int32_t));
    p->nodes = mr_malloc((n_nodes ? n_nodes : 1) * sizeof(pnode));
    p->leaf = mr_malloc((n_leaves ? n_leaves : 1) * sizeof(double));
    p->cat_off = mr_malloc((n_cat ? n_cat : 1) * sizeof(uint32_t));
    p->cat_nbits = mr_malloc((n_cat ? n_cat : 1) * sizeof(uint32_t));
    p->cat_bits = mr_malloc((n_words ? n_words : 1) * sizeof(uint32_t));
    p->init = mr_malloc(K * sizeof(double));
    if (!p->root || !p->nodes || !p->leaf || !p->cat_off || !p->cat_nbits || !p->cat_bits || !p->init) {
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_NOMEM, "out of memory building predictor");
    }
    if (n_nodes > INT32_MAX || n_leaves > INT32_MAX) {
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_LIMIT, "model too large for the predictor");
    }
    memcpy(p->init, m->init_score, K * sizeof(double));
    size_t nb = 0, lb = 0, cb = 0, wb = 0;
    for (size_t t = 0; t < nt; t++) {
        const mr__tree *tr = &m->trees[t];
        int ni = tr->n_leaves - 1;
        p->root[t] = ni > 0 ? (int32_t)nb : ~(int32_t)lb;
        for (int i = 0; i < ni; i++) {
            pnode *pn = &p->nodes[nb + (size_t)i];
            pn->feat = tr->split_feature[i];
            pn->thr = tr->threshold[i];
            pn->left = tr->left[i] >= 0 ? (int32_t)nb + tr->left[i] : ~((int32_t)lb + ~tr->left[i]);
            pn->right = tr->right[i] >= 0 ? (int32_t)nb + tr->right[i] : ~((int32_t)lb + ~tr->right[i]);
            pn->meta = (tr->decision[i] & MR__DT_DEFAULT_LEFT) ? PN_DEFLEFT : 0;
            if (tr->decision[i] & MR__DT_CATEGORICAL) {
                int c = tr->threshold_bin[i];
                pn->meta |= PN_CAT | (uint32_t)((cb + (size_t)c) << 2);
            }
        }
        for (int c = 0; c < tr->n_cat; c++) {
            p->cat_off[cb + (size_t)c] = (uint32_t)(wb + tr->cat_begin[c]);
            p->cat_nbits[cb + (size_t)c] = (tr->cat_begin[c + 1] - tr->cat_begin[c]) * 32u;
        }
        if (tr->n_cat) {
            memcpy(p->cat_bits + wb, tr->cat_raw_bits, tr->cat_begin[tr->n_cat] * sizeof(uint32_t));
            wb += tr->cat_begin[tr->n_cat];
        }
        memcpy(p->leaf + lb, tr->leaf_value, (size_t)tr->n_leaves * sizeof(double));
        nb += (size_t)ni;
        lb += (size_t)tr->n_leaves;
        cb += (size_t)tr->n_cat;
    }
    *out = p;
    return MR_OK;
}

int mr_gbdt_predictor_num_class(const mr_gbdt_predictor *p) { return p->K; }
size_t mr_gbdt_predictor_num_features(const mr_gbdt_predictor *p) { return p->F; }

static inline int cat_left(const mr_gbdt_predictor *p, const pnode *n, double v)
{
    int32_t code;
    uint32_t c = n->meta >> 2;
    if (!mr__cat_code(v, &code) || (uint32_t)code >= p->cat_nbits[c]) return (n->meta & PN_DEFLEFT) != 0;
    return (p->cat_bits[p->cat_off[c] + ((uint32_t)code >> 5)] >> (code & 31)) & 1;
}

#define DEFINE_TREE_VALUE(NAME, T)                                              \
    static inline double NAME(const mr_gbdt_predictor *p, int32_t i, const T *x) \
    {                                                                           \
        while (i >= 0) {                                                        \
            const pnode *n = &p->nodes[i];                                      \
            double v = x[n->feat];                                              \
            int left;                                                           \
            if (n->meta & PN_CAT)                                               \
                left = cat_left(p, n, v);                                       \
            else if (v != v)                                                    \
                left = (n->meta & PN_DEFLEFT) != 0;                             \
            else                                                                \
                left = v <= n->thr;                                             \
            i = left ? n->left : n->right;                                      \
        }                                                                       \
        return p->leaf[~i];                                                     \
    }
DEFINE_TREE_VALUE(tree_value_f32, float)
DEFINE_TREE_VALUE(tree_value_f64, double)

void mr_gbdt_predictor_row(const mr_gbdt_predictor *p, const float *x, int raw, double *out)
{
    const size_t K = (size_t)p->K;
    for (size_t c = 0; c < K; c++) out[c] = p->init[c];
    for (size_t t = 0; t < p->n_trees; t++) out[t % K] += tree_value_f32(p, p->root[t], x);
    if (!raw) mr__objective_transform(p->objective, p->K, out);
}

void mr_gbdt_predictor_row_f64(const mr_gbdt_predictor *p, const double *x, int raw, double *out)
{
    const size_t K = (size_t)p->K;
    for (size_t c = 0; c < K; c++) out[c] = p->init[c];
    for (size_t t = 0; t < p->n_trees; t++) out[t % K] += tree_value_f64(p, p->root[t], x);
    if (!raw) mr__objective_transform(p->objective, p->K, out);
}

#define PRED_BLOCK 64 /* rows walked through one tree together */

typedef struct batch_ctx {
    const mr_gbdt_predictor *p;
    const float *x;
    size_t n_rows;
    mr_gbdt_layout layout;
    int raw;
    double *out;
    float *scratch; /* per thread: PRED_BLOCK * F (column-major input) */
} batch_ctx;

static void batch_task(void *vctx, size_t begin, size_t end, int tid)
{
    batch_ctx *c = vctx;
    const mr_gbdt_predictor *p = c->p;
    const size_t K = (size_t)p->K, F = p->F;
    const float *rows = c->x + begin * F;
    if (c->layout == MR_GBDT_COL_MAJOR) {
        float *s = c->scratch + (size_t)tid * PRED_BLOCK * F;
        for (size_t j = 0; j < F; j++)
            for (size_t i = begin; i < end; i++) s[(i - begin) * F + j] = c->x[j * c->n_rows + i];
        rows = s;
    }
    double *out = c->out + begin * K;
    size_t n = end - begin;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < K; k++) out[i * K + k] = p->init[k];
    for (size_t t = 0; t < p->n_trees; t++) {
        const int32_t root = p->root[t];
        const size_t k = t % K;
        if (root < 0) {
            for (size_t i = 0; i < n; i++) out[i * K + k] += p->leaf[~root];
            continue;
        }
        for (size_t i = 0; i < n; i++) out[i * K + k] += tree_value_f32(p, root, rows + i * F);
    }
    if (!c->raw)
        for (size_t i = 0; i < n; i++) mr__objective_transform(p->objective, p->K, out + i * K);
}

mr_status mr_gbdt_predictor_batch(const mr_gbdt_predictor *p, const float *x, size_t n_rows, mr_gbdt_layout layout,
                                  int raw, int num_threads, double *out, mr_error *err)
{
    batch_ctx c = {.p = p, .x = x, .n_rows = n_rows, .layout = layout, .raw = raw, .out = out};
    if (layout == MR_GBDT_COL_MAJOR) {
        int T = mr__gbdt_threads(num_threads);
        c.scratch = mr_malloc((size_t)T * PRED_BLOCK * (p->F ? p->F : 1) * sizeof(float));
        if (!c.scratch) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr__gbdt_parallel(n_rows, PRED_BLOCK, num_threads, batch_task, &c);
    mr_free(c.scratch);
    return MR_OK;
}

mr_status mr_gbdt_predict(const mr_gbdt_model *m, const float *x, size_t n_rows, mr_gbdt_layout layout, int raw,
                          int num_iteration, double *out, mr_error *err)
{
    mr_gbdt_predictor *p = NULL;
    mr_status st = mr_gbdt_predictor_new(m, num_iteration, &p, err);
    if (st != MR_OK) return st;
    st = mr_gbdt_predictor_batch(p, x, n_rows, layout, raw, 0, out, err);
    mr_gbdt_predictor_free(p);
    return st;
}

typedef struct binned_ctx {
    const mr_gbdt_model *m;
    const mr_gbdt_data *d;
    size_t nt;
    int raw;
    double *out;
} binned_ctx;

static void binned_task(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    binned_ctx *c = vctx;
    const size_t K = (size_t)c->m->num_tree_per_iteration, F = c->d->n_features;
    for (size_t r = begin; r < end; r++) {
        double *o = c->out + r * K;
        for (size_t k = 0; k < K; k++) o[k] = c->m->init_score[k];
        for (size_t t = 0; t < c->nt; t++) {
            const mr__tree *tr = &c->m->trees[t];
            o[t % K] += tr->leaf_value[mr__tree_leaf_binned(tr, c->d->bins + r * F)];
        }
        if (!c->raw) mr__objective_transform(c->m->objective, (int)K, o);
    }
}

mr_status mr_gbdt_predict_binned(const mr_gbdt_model *m, const mr_gbdt_data *d, int raw, int num_iteration,
                                 double *out, mr_error *err)
{
    if (d->n_features != m->n_features)
        return MR_ERR(err, MR_E_SCHEMA, "binned data has %zu features, the model %zu", d->n_features, m->n_features);
    size_t K = (size_t)m->num_tree_per_iteration, nt = m->n_trees;
    if (num_iteration > 0 && (size_t)num_iteration * K < nt) nt = (size_t)num_iteration * K;
    binned_ctx c = {.m = m, .d = d, .nt = nt, .raw = raw, .out = out};
    mr__gbdt_parallel(d->n_rows, 1024, 0, binned_task, &c);
    return MR_OK;
}
