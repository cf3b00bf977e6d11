/* Prediction. A predictor flattens the model's trees once into one node
 * array (24-byte nodes, children as absolute indices, leaves as ~index into
 * one value array), so scoring a row allocates and prepares nothing. Batch
 * scoring walks blocks of rows tree by tree, keeping a tree's nodes hot in
 * cache while the block's rows pass through it; each block of output is
 * written by exactly one thread. */
#include "gbdt_int.h"

#include <stdlib.h>

/* 16 bytes, four to a cache line. thr is the largest float <= the model's
 * double threshold, so for a float input v, v <= thr exactly when v <= the
 * double threshold (the f64 entry points use thr64 instead). */
typedef struct pnode {
    float thr;       /* numeric: v <= thr goes left */
    uint32_t meta;   /* bit 0 default left, bit 1 categorical, bits 2..: feature */
    int32_t child[2]; /* [0] left, [1] right: >= 0 node index; < 0: ~leaf index */
} pnode;

#define PN_DEFLEFT 1u
#define PN_CAT 2u
#define PN_FEAT(m) ((m) >> 2)

struct mr_gbdt_predictor {
    mr_gbdt_objective objective;
    int K;
    size_t F;
    size_t n_trees;
    size_t n_nodes, n_leaves, n_cat, n_words; /* array lengths (serialised form) */
    int32_t *root;      /* per tree: node index, or ~leaf when the tree is one leaf */
    pnode *nodes;
    double *leaf;
    double *thr64;      /* per node: the exact double threshold */
    uint32_t *cat_idx;  /* per node: its categorical split (categorical nodes only) */
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
    mr_free(p->thr64);
    mr_free(p->cat_idx);
    mr_free(p->leaf);
    mr_free(p->cat_off);
    mr_free(p->cat_nbits);
    mr_free(p->cat_bits);
    mr_free(p->init);
    mr_free(p);
}

/* Largest float <= d (d itself when representable; +-inf kept). */
static float float_floor(double d)
{
    float f = (float)d;
    if (d != d) return f;
    if ((double)f > d) f = nextafterf(f, -INFINITY);
    return f;
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
    p->n_nodes = n_nodes;
    p->n_leaves = n_leaves;
    p->n_cat = n_cat;
    p->n_words = n_words;
    p->root = mr_malloc((nt ? nt : 1) * sizeof(int32_t));
    p->nodes = mr_malloc((n_nodes ? n_nodes : 1) * sizeof(pnode));
    p->thr64 = mr_malloc((n_nodes ? n_nodes : 1) * sizeof(double));
    p->cat_idx = mr_calloc(n_nodes ? n_nodes : 1, sizeof(uint32_t));
    p->leaf = mr_malloc((n_leaves ? n_leaves : 1) * sizeof(double));
    p->cat_off = mr_malloc((n_cat ? n_cat : 1) * sizeof(uint32_t));
    p->cat_nbits = mr_malloc((n_cat ? n_cat : 1) * sizeof(uint32_t));
    p->cat_bits = mr_malloc((n_words ? n_words : 1) * sizeof(uint32_t));
    p->init = mr_malloc(K * sizeof(double));
    if (!p->root || !p->nodes || !p->thr64 || !p->cat_idx || !p->leaf || !p->cat_off || !p->cat_nbits || !p->cat_bits || !p->init) {
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_NOMEM, "out of memory building predictor");
    }
    if (n_nodes > INT32_MAX || n_leaves > INT32_MAX) {
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_LIMIT, "model too large for the predictor");
    }
    memcpy(p->init, m->init_score, K * sizeof(double));
    /* Nodes are renumbered in depth-first preorder, so a left child sits
     * right after its parent (often in the same cache line). */
    int max_ni = 1;
    for (size_t t = 0; t < nt; t++) max_ni = m->trees[t].n_leaves - 1 > max_ni ? m->trees[t].n_leaves - 1 : max_ni;
    int32_t *pos = mr_malloc((size_t)max_ni * sizeof(int32_t)), *stack = mr_malloc((size_t)max_ni * sizeof(int32_t));
    if (!pos || !stack) {
        mr_free(pos);
        mr_free(stack);
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_NOMEM, "out of memory building predictor");
    }
    size_t nb = 0, lb = 0, cb = 0, wb = 0;
    for (size_t t = 0; t < nt; t++) {
        const mr__tree *tr = &m->trees[t];
        int ni = tr->n_leaves - 1;
        p->root[t] = ni > 0 ? (int32_t)nb : ~(int32_t)lb;
        int sp = 0, next = 0;
        if (ni > 0) stack[sp++] = 0;
        while (sp > 0) {
            int32_t i = stack[--sp];
            pos[i] = next++;
            if (tr->right[i] >= 0) stack[sp++] = tr->right[i];
            if (tr->left[i] >= 0) stack[sp++] = tr->left[i]; /* popped first: preorder */
        }
        for (int i = 0; i < ni; i++) {
            size_t at = nb + (size_t)pos[i];
            pnode *pn = &p->nodes[at];
            p->thr64[at] = tr->threshold[i];
            pn->thr = float_floor(tr->threshold[i]);
            pn->child[0] = tr->left[i] >= 0 ? (int32_t)nb + pos[tr->left[i]] : ~((int32_t)lb + ~tr->left[i]);
            pn->child[1] = tr->right[i] >= 0 ? (int32_t)nb + pos[tr->right[i]] : ~((int32_t)lb + ~tr->right[i]);
            pn->meta = ((uint32_t)tr->split_feature[i] << 2) | ((tr->decision[i] & MR__DT_DEFAULT_LEFT) ? PN_DEFLEFT : 0);
            p->cat_idx[at] = 0;
            if (tr->decision[i] & MR__DT_CATEGORICAL) {
                pn->meta |= PN_CAT;
                p->cat_idx[at] = (uint32_t)(cb + tr->threshold_bin[i]);
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
    mr_free(pos);
    mr_free(stack);
    *out = p;
    return MR_OK;
}

/* ---- serialised form ("MRGP", docs/bundle.md "Compiled predictor") ---------- */

#define MRGP_MAGIC "MRGP"
#define MRGP_VERSION 1u

mr_status mr_gbdt_predictor_to_bytes(const mr_gbdt_predictor *p, mr_buf *out)
{
    mr_status st = mr_buf_append(out, MRGP_MAGIC, 4);
    if (st == MR_OK) st = mr__put_u32(out, MRGP_VERSION);
    if (st == MR_OK) st = mr__put_u32(out, (uint32_t)p->objective);
    if (st == MR_OK) st = mr__put_u32(out, (uint32_t)p->K);
    if (st == MR_OK) st = mr__put_u64(out, p->F);
    if (st == MR_OK) st = mr__put_u64(out, p->n_trees);
    if (st == MR_OK) st = mr__put_u64(out, p->n_nodes);
    if (st == MR_OK) st = mr__put_u64(out, p->n_leaves);
    if (st == MR_OK) st = mr__put_u64(out, p->n_cat);
    if (st == MR_OK) st = mr__put_u64(out, p->n_words);
    for (int k = 0; st == MR_OK && k < p->K; k++) st = mr__put_f64(out, p->init[k]);
    for (size_t t = 0; st == MR_OK && t < p->n_trees; t++) st = mr__put_u32(out, (uint32_t)p->root[t]);
    for (size_t i = 0; st == MR_OK && i < p->n_nodes; i++) {
        uint32_t thr;
        memcpy(&thr, &p->nodes[i].thr, 4);
        st = mr__put_u32(out, thr);
        if (st == MR_OK) st = mr__put_u32(out, p->nodes[i].meta);
        if (st == MR_OK) st = mr__put_u32(out, (uint32_t)p->nodes[i].child[0]);
        if (st == MR_OK) st = mr__put_u32(out, (uint32_t)p->nodes[i].child[1]);
    }
    for (size_t i = 0; st == MR_OK && i < p->n_nodes; i++) st = mr__put_f64(out, p->thr64[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_nodes; i++) st = mr__put_u32(out, p->cat_idx[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_leaves; i++) st = mr__put_f64(out, p->leaf[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_cat; i++) st = mr__put_u32(out, p->cat_off[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_cat; i++) st = mr__put_u32(out, p->cat_nbits[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_words; i++) st = mr__put_u32(out, p->cat_bits[i]);
    return st;
}

/* Every index is checked, and children must point forward (preorder), so a
 * loaded predictor can neither read out of bounds nor loop. */
mr_status mr_gbdt_predictor_from_bytes(const void *data, size_t len, mr_gbdt_predictor **out, mr_error *err)
{
    *out = NULL;
    mr__reader r = {.p = data, .len = len};
    const void *magic = mr__get_bytes(&r, 4);
    if (!magic || memcmp(magic, MRGP_MAGIC, 4) != 0) return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: bad magic");
    uint32_t ver = mr__get_u32(&r);
    if (ver != MRGP_VERSION)
        return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: unsupported version %u (this build reads %u)", ver,
                      MRGP_VERSION);
    uint32_t obj = mr__get_u32(&r), K = mr__get_u32(&r);
    uint64_t F = mr__get_u64(&r), nt = mr__get_u64(&r), nn = mr__get_u64(&r), nl = mr__get_u64(&r);
    uint64_t nc = mr__get_u64(&r), nw = mr__get_u64(&r);
    if (r.bad) return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: truncated header");
    if (obj > MR_GBDT_HUBER || K < 1 || K > 65536 || F > (1u << 24) || nn > INT32_MAX || nl > INT32_MAX ||
        nt > INT32_MAX || nc > INT32_MAX || nw > INT32_MAX)
        return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: header field out of range");
    /* Exact size: every count is < 2^31, so this cannot overflow 64 bits. */
    uint64_t need = (uint64_t)K * 8 + nt * 4 + nn * (16 + 8 + 4) + nl * 8 + nc * 8 + nw * 4;
    if (need != len - r.pos)
        return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: %zu bytes of arrays, expected %llu", len - r.pos,
                      (unsigned long long)need);
    mr_gbdt_predictor *p = mr_calloc(1, sizeof(*p));
    if (!p) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    p->objective = (mr_gbdt_objective)obj;
    p->K = (int)K;
    p->F = (size_t)F;
    p->n_trees = (size_t)nt;
    p->n_nodes = (size_t)nn;
    p->n_leaves = (size_t)nl;
    p->n_cat = (size_t)nc;
    p->n_words = (size_t)nw;
    p->init = mr_malloc(K * sizeof(double));
    p->root = mr_malloc((nt ? nt : 1) * sizeof(int32_t));
    p->nodes = mr_malloc((nn ? nn : 1) * sizeof(pnode));
    p->thr64 = mr_malloc((nn ? nn : 1) * sizeof(double));
    p->cat_idx = mr_malloc((nn ? nn : 1) * sizeof(uint32_t));
    p->leaf = mr_malloc((nl ? nl : 1) * sizeof(double));
    p->cat_off = mr_malloc((nc ? nc : 1) * sizeof(uint32_t));
    p->cat_nbits = mr_malloc((nc ? nc : 1) * sizeof(uint32_t));
    p->cat_bits = mr_malloc((nw ? nw : 1) * sizeof(uint32_t));
    if (!p->init || !p->root || !p->nodes || !p->thr64 || !p->cat_idx || !p->leaf || !p->cat_off || !p->cat_nbits ||
        !p->cat_bits) {
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_NOMEM, "out of memory loading the compiled predictor");
    }
    for (size_t k = 0; k < K; k++) p->init[k] = mr__get_f64(&r);
    for (size_t t = 0; t < nt; t++) p->root[t] = (int32_t)mr__get_u32(&r);
    for (size_t i = 0; i < nn; i++) {
        uint32_t thr = mr__get_u32(&r);
        memcpy(&p->nodes[i].thr, &thr, 4);
        p->nodes[i].meta = mr__get_u32(&r);
        p->nodes[i].child[0] = (int32_t)mr__get_u32(&r);
        p->nodes[i].child[1] = (int32_t)mr__get_u32(&r);
    }
    for (size_t i = 0; i < nn; i++) p->thr64[i] = mr__get_f64(&r);
    for (size_t i = 0; i < nn; i++) p->cat_idx[i] = mr__get_u32(&r);
    for (size_t i = 0; i < nl; i++) p->leaf[i] = mr__get_f64(&r);
    for (size_t i = 0; i < nc; i++) p->cat_off[i] = mr__get_u32(&r);
    for (size_t i = 0; i < nc; i++) p->cat_nbits[i] = mr__get_u32(&r);
    for (size_t i = 0; i < nw; i++) p->cat_bits[i] = mr__get_u32(&r);
    const char *bad = NULL;
    size_t at = 0;
    for (size_t t = 0; !bad && t < nt; t++) {
        int32_t rt = p->root[t];
        if (rt >= 0 ? (uint64_t)rt >= nn : (uint64_t)~rt >= nl) bad = "tree root", at = t;
    }
    for (size_t i = 0; !bad && i < nn; i++) {
        const pnode *n = &p->nodes[i];
        at = i;
        if (PN_FEAT(n->meta) >= F) bad = "node feature";
        for (int c = 0; !bad && c < 2; c++) {
            int32_t ch = n->child[c];
            if (ch >= 0 ? ((size_t)ch <= i || (uint64_t)ch >= nn) : (uint64_t)~ch >= nl) bad = "node child";
        }
        if (!bad && (n->meta & PN_CAT)) {
            uint32_t ci = p->cat_idx[i];
            if (ci >= nc || p->cat_nbits[ci] % 32 != 0 || (uint64_t)p->cat_off[ci] + p->cat_nbits[ci] / 32 > nw)
                bad = "categorical split";
        }
    }
    if (bad) {
        mr_gbdt_predictor_free(p);
        return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: %s %zu out of range", bad, at);
    }
    *out = p;
    return MR_OK;
}

int mr_gbdt_predictor_num_class(const mr_gbdt_predictor *p) { return p->K; }
size_t mr_gbdt_predictor_num_features(const mr_gbdt_predictor *p) { return p->F; }

static int cat_left(const mr_gbdt_predictor *p, int32_t node, double v)
{
    int32_t code;
    uint32_t c = p->cat_idx[node];
    if (!mr__cat_code(v, &code) || (uint32_t)code >= p->cat_nbits[c]) return (p->nodes[node].meta & PN_DEFLEFT) != 0;
    return (p->cat_bits[p->cat_off[c] + ((uint32_t)code >> 5)] >> (code & 31)) & 1;
}

/* One step: numeric nodes without branches on the data. NaN compares false
 * both ways, so "left" = (v <= thr) | (default_left & !(v > thr)). */
static inline int32_t step_f32(const mr_gbdt_predictor *p, int32_t i, const float *x)
{
    const pnode *n = &p->nodes[i];
    const uint32_t meta = n->meta;
    const float v = x[PN_FEAT(meta)];
    int left;
    if (__builtin_expect((meta & PN_CAT) != 0, 0))
        left = cat_left(p, i, v);
    else
        left = (v <= n->thr) | ((int)(meta & PN_DEFLEFT) & !(v > n->thr));
    return n->child[left ^ 1];
}

static inline double tree_value_f32(const mr_gbdt_predictor *p, int32_t i, const float *x)
{
    while (i >= 0) i = step_f32(p, i, x);
    return p->leaf[~i];
}

static inline double tree_value_f64(const mr_gbdt_predictor *p, int32_t i, const double *x)
{
    while (i >= 0) {
        const pnode *n = &p->nodes[i];
        const double v = x[PN_FEAT(n->meta)], t = p->thr64[i];
        int left;
        if (n->meta & PN_CAT)
            left = cat_left(p, i, v);
        else
            left = (v <= t) | ((int)(n->meta & PN_DEFLEFT) & !(v > t));
        i = n->child[left ^ 1];
    }
    return p->leaf[~i];
}

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

/* Rows walked through one tree together: large enough that a model bigger
 * than L2 is streamed once per block rather than once per few rows, small
 * enough to give every thread several blocks. The block size never changes
 * a result (each row sums its trees in tree order). */
#define PRED_BLOCK_MIN 64
#define PRED_BLOCK_MAX 1024
#define PRED_LANES 8  /* rows stepped in lockstep */

typedef struct batch_ctx {
    const mr_gbdt_predictor *p;
    const float *x;
    size_t n_rows;
    mr_gbdt_layout layout;
    int raw;
    double *out;
    size_t block;   /* rows per block */
    float *scratch; /* per thread: block * F (column-major input) */
} batch_ctx;

static void batch_task(void *vctx, size_t begin, size_t end, int tid)
{
    batch_ctx *c = vctx;
    const mr_gbdt_predictor *p = c->p;
    const size_t K = (size_t)p->K, F = p->F;
    const float *rows = c->x + begin * F;
    if (c->layout == MR_GBDT_COL_MAJOR) {
        float *s = c->scratch + (size_t)tid * c->block * F;
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
        size_t i = 0;
        /* PRED_LANES rows at a time: their independent walks overlap in the core */
        for (; i + PRED_LANES <= n; i += PRED_LANES) {
            const float *x = rows + i * F;
            int32_t cur[PRED_LANES];
            for (int l = 0; l < PRED_LANES; l++) cur[l] = root;
            for (;;) {
                int32_t any = -1; /* stays negative only when every lane is at a leaf */
                for (int l = 0; l < PRED_LANES; l++) {
                    if (cur[l] >= 0) cur[l] = step_f32(p, cur[l], x + (size_t)l * F);
                    any &= cur[l];
                }
                if (any < 0) break;
            }
            for (int l = 0; l < PRED_LANES; l++) out[(i + (size_t)l) * K + k] += p->leaf[~cur[l]];
        }
        for (; i < n; i++) out[i * K + k] += tree_value_f32(p, root, rows + i * F);
    }
    if (!c->raw)
        for (size_t i = 0; i < n; i++) mr__objective_transform(p->objective, p->K, out + i * K);
}

mr_status mr_gbdt_predictor_batch(const mr_gbdt_predictor *p, const float *x, size_t n_rows, mr_gbdt_layout layout,
                                  int raw, int num_threads, double *out, mr_error *err)
{
    int T = mr__gbdt_threads(num_threads);
    size_t block = n_rows / ((size_t)T * 8);
    block = block < PRED_BLOCK_MIN ? PRED_BLOCK_MIN : block > PRED_BLOCK_MAX ? PRED_BLOCK_MAX : block;
    batch_ctx c = {.p = p, .x = x, .n_rows = n_rows, .layout = layout, .raw = raw, .out = out, .block = block};
    if (layout == MR_GBDT_COL_MAJOR) {
        c.scratch = mr_malloc((size_t)T * block * (p->F ? p->F : 1) * sizeof(float));
        if (!c.scratch) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr__gbdt_parallel(n_rows, block, num_threads, batch_task, &c);
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
