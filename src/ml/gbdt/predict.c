/* Prediction. A predictor flattens the model's trees once into one node
 * array (24-byte nodes, children as absolute indices, leaves as ~index into
 * one value array), so scoring a row allocates and prepares nothing. Batch
 * scoring walks blocks of rows tree by tree, keeping a tree's nodes hot in
 * cache while the block's rows pass through it; each block of output is
 * written by exactly one thread. */
#include "gbdt_int.h"

#include <pthread.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MR_PRED_X86 1
#endif

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
    uint8_t *tree_cat;  /* per tree: 1 when it has a categorical node (not serialised) */
    int vec;            /* walks for blocks of rows (chosen at load): 0 scalar, 1 AVX-512, 2 AVX2 (quantised only) */
    /* Quantised walk (derived at load, not serialised; NULL when the model
     * does not fit it): per feature its distinct thresholds ascending,
     * padded with +inf to QT entries, so a value's code q = #thresholds < v
     * (255 for NaN) and v <= thr exactly when q <= the threshold's index.
     * Entries are 32-bit, one per node and leaf in preorder: a leaf is
     * bit 31 | leaf index; a node is feature (bits 0-7), threshold index
     * (8-15), default-left (16) and the offset to its right child (17-30);
     * its left child is the next entry. */
    float *qthr;        /* F * QT */
    uint32_t *qn;
    int32_t *qroot;     /* per tree: the entry of its root */
};

#define QT 256
#define QN_LEAF 0x80000000u

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
    mr_free(p->tree_cat);
    mr_free(p->qthr);
    mr_free(p->qn);
    mr_free(p->qroot);
    mr_free(p);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Builds the quantised form when every tree is numeric, there are at most
 * 256 features, at most 254 distinct thresholds per feature and every
 * right child within 2^14 entries; otherwise leaves it absent. */
static mr_status predictor_quantise(mr_gbdt_predictor *p, mr_error *err)
{
    const size_t F = p->F;
    if (F == 0 || F > 256 || p->n_leaves >= QN_LEAF || p->n_nodes == 0) return MR_OK;
    for (size_t t = 0; t < p->n_trees; t++)
        if (p->tree_cat[t]) return MR_OK;
    size_t *cnt = mr_calloc(F, sizeof(size_t));
    float *thr = mr_malloc(F * QT * sizeof(float));
    uint32_t *qn = mr_malloc((p->n_nodes + p->n_leaves) * sizeof(uint32_t));
    int32_t *qroot = mr_malloc((p->n_trees ? p->n_trees : 1) * sizeof(int32_t));
    int32_t *stk = mr_malloc((2 * p->n_nodes + 2) * 2 * sizeof(int32_t));
    float *all = mr_malloc(p->n_nodes * sizeof(float)); /* thresholds grouped by feature */
    size_t *start = mr_calloc(F + 1, sizeof(size_t));
    if (!cnt || !thr || !qn || !qroot || !stk || !all || !start) {
        mr_free(all);
        mr_free(start);
        mr_free(cnt);
        mr_free(thr);
        mr_free(qn);
        mr_free(qroot);
        mr_free(stk);
        return MR_ERR(err, MR_E_NOMEM, "out of memory building predictor");
    }
    int ok = 1;
    /* distinct thresholds per feature: collect, sort, dedupe */
    for (size_t i = 0; i < p->n_nodes; i++) start[PN_FEAT(p->nodes[i].meta) + 1]++;
    for (size_t f = 0; f < F; f++) start[f + 1] += start[f];
    for (size_t i = 0; i < p->n_nodes; i++) {
        size_t f = PN_FEAT(p->nodes[i].meta);
        all[start[f] + cnt[f]++] = p->nodes[i].thr;
    }
    for (size_t f = 0; f < F && ok; f++) {
        float *a = all + start[f];
        size_t m = cnt[f], u = 0;
        for (size_t i = 0; i < m; i++)
            if (a[i] != a[i]) ok = 0; /* a NaN threshold: not representable */
        if (!ok) break;
        qsort(a, m, sizeof(float), cmp_float);
        for (size_t i = 0; i < m; i++)
            if (u == 0 || a[i] != a[u - 1]) a[u++] = a[i];
        if (u > QT - 2) ok = 0;
        cnt[f] = u;
        for (size_t i = 0; i < QT; i++) thr[f * QT + i] = i < u ? a[i] : INFINITY;
    }
    /* entries in preorder; a stack item is (child code, entry to patch with
     * the right offset or -1) */
    size_t e = 0;
    for (size_t t = 0; t < p->n_trees && ok; t++) {
        qroot[t] = (int32_t)e;
        if (p->root[t] < 0) {
            qn[e++] = QN_LEAF | (uint32_t)~p->root[t];
            continue;
        }
        size_t sp = 0;
        stk[sp++] = p->root[t];
        stk[sp++] = -1;
        while (sp > 0 && ok) {
            int32_t patch = stk[--sp], code = stk[--sp];
            if (patch >= 0) {
                size_t off = e - (size_t)patch;
                if (off >= (1u << 14)) {
                    ok = 0;
                    break;
                }
                qn[patch] |= (uint32_t)off << 17;
            }
            if (e >= p->n_nodes + p->n_leaves) { /* cannot happen for a tree (checked at load) */
                ok = 0;
                break;
            }
            if (code < 0) {
                qn[e++] = QN_LEAF | (uint32_t)~code;
                continue;
            }
            const pnode *n = &p->nodes[code];
            size_t f = PN_FEAT(n->meta);
            const float *tf = thr + f * QT;
            size_t lo = 0, hi = cnt[f]; /* the threshold's index */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (tf[mid] < n->thr) lo = mid + 1;
                else hi = mid;
            }
            qn[e] = (uint32_t)f | ((uint32_t)lo << 8) | ((n->meta & PN_DEFLEFT) ? 1u << 16 : 0);
            stk[sp++] = n->child[1];
            stk[sp++] = (int32_t)e;
            stk[sp++] = n->child[0];
            stk[sp++] = -1;
            e++;
        }
    }
    mr_free(all);
    mr_free(start);
    mr_free(cnt);
    mr_free(stk);
    if (!ok) {
        mr_free(thr);
        mr_free(qn);
        mr_free(qroot);
        return MR_OK;
    }
    p->qthr = thr;
    p->qn = qn;
    p->qroot = qroot;
    return MR_OK;
}

#ifdef MR_PRED_X86
/* rank8[m][l] = how many lanes of mask m come before lane l (AVX2 refill) */
static int32_t rank8[256][8];
static void rank8_init(void)
{
    for (int m = 0; m < 256; m++)
        for (int l = 0, c = 0; l < 8; l++) {
            rank8[m][l] = c;
            c += (m >> l) & 1;
        }
}

#endif

/* Derived state shared by a freshly built and a loaded predictor: which
 * trees need the categorical path, and whether the vector walk is usable.
 * MILLRACE_PREDICT_SIMD=0 forces the scalar walk (the tests compare both). */
static mr_status predictor_finish(mr_gbdt_predictor *p, mr_error *err)
{
    p->tree_cat = mr_calloc(p->n_trees ? p->n_trees : 1, 1);
    if (!p->tree_cat) return MR_ERR(err, MR_E_NOMEM, "out of memory building predictor");
    /* Trees are laid out one after another in preorder, so tree t owns the
     * nodes from its root up to the next internal root; a loaded file whose
     * roots or children break that is refused. */
    size_t end = p->n_nodes;
    for (size_t t = p->n_trees; t-- > 0;) {
        int32_t r = p->root[t];
        if (r < 0) continue;
        if ((size_t)r >= end) return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: tree %zu root out of order", t);
        for (size_t i = (size_t)r; i < end; i++) {
            const pnode *n = &p->nodes[i];
            if ((n->child[0] >= 0 && (size_t)n->child[0] >= end) || (n->child[1] >= 0 && (size_t)n->child[1] >= end))
                return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: node %zu leaves its tree %zu", i, t);
            if (n->meta & PN_CAT) p->tree_cat[t] = 1;
        }
        end = (size_t)r;
    }
    if (end != 0) return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: %zu nodes belong to no tree", end);
    /* ... and every node and leaf has at most one parent (or is a root), so
     * the walks see trees, not graphs: a hostile file sharing a child
     * between two branches would otherwise make the quantised layout
     * longer than its buffer. */
    uint8_t *seen = mr_calloc(p->n_nodes + p->n_leaves + 1, 1);
    if (!seen) return MR_ERR(err, MR_E_NOMEM, "out of memory building predictor");
    const char *shared = NULL;
    size_t at = 0;
    for (size_t t = 0; !shared && t < p->n_trees; t++) {
        int32_t r = p->root[t];
        size_t slot = r >= 0 ? (size_t)r : p->n_nodes + (size_t)~r;
        if (seen[slot]++) shared = "tree root", at = t;
    }
    for (size_t i = 0; !shared && i < p->n_nodes; i++)
        for (int c = 0; !shared && c < 2; c++) {
            int32_t ch = p->nodes[i].child[c];
            size_t slot = ch >= 0 ? (size_t)ch : p->n_nodes + (size_t)~ch;
            if (seen[slot]++) shared = "node", at = i;
        }
    mr_free(seen);
    if (shared)
        return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: %s %zu reaches a node or leaf that has another parent",
                      shared, at);
    /* MILLRACE_PREDICT_SIMD caps the walks: 0 the float scalar walk (the
     * reference), 1 adds AVX-512, unset or 2 also the quantised form; "q"
     * the quantised form without vector walks, "a" with AVX2 but not
     * AVX-512 (what CPUs without AVX-512 run). */
    const char *env = getenv("MILLRACE_PREDICT_SIMD");
    int novec = env && env[0] == 'q', no512 = env && env[0] == 'a';
    int cap = novec || no512 ? 2 : env && env[0] >= '0' && env[0] <= '2' ? env[0] - '0' : 2;
    p->vec = 0;
#ifdef MR_PRED_X86
    __builtin_cpu_init();
    if (cap >= 1 && !novec && p->n_nodes < ((size_t)1 << 28) && p->F < ((size_t)1 << 20)) {
        if (!no512 && __builtin_cpu_supports("avx512f")) p->vec = 1;
        else if (cap >= 2 && __builtin_cpu_supports("avx2")) p->vec = 2;
    }
    if (p->vec == 2) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, rank8_init);
    }
#endif
    if (cap >= 2) return predictor_quantise(p, err);
    return MR_OK;
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
    mr_status st = predictor_finish(p, err);
    if (st != MR_OK) {
        mr_gbdt_predictor_free(p);
        return st;
    }
    *out = p;
    return MR_OK;
}

/* ---- serialised form ("MRGP", docs/bundle.md "Compiled predictor") ---------- */

#define MRGP_MAGIC "MRGP"
#define MRGP_VERSION 1u

mr_status mr_gbdt_predictor_to_bytes(const mr_gbdt_predictor *p, mr_buf *out)
{
    mr_status st = mr_buf_append(out, MRGP_MAGIC, 4);
    if (st == MR_OK) st = mr_buf_put_u32(out, MRGP_VERSION);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)p->objective);
    if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)p->K);
    if (st == MR_OK) st = mr_buf_put_u64(out, p->F);
    if (st == MR_OK) st = mr_buf_put_u64(out, p->n_trees);
    if (st == MR_OK) st = mr_buf_put_u64(out, p->n_nodes);
    if (st == MR_OK) st = mr_buf_put_u64(out, p->n_leaves);
    if (st == MR_OK) st = mr_buf_put_u64(out, p->n_cat);
    if (st == MR_OK) st = mr_buf_put_u64(out, p->n_words);
    for (int k = 0; st == MR_OK && k < p->K; k++) st = mr_buf_put_f64(out, p->init[k]);
    for (size_t t = 0; st == MR_OK && t < p->n_trees; t++) st = mr_buf_put_u32(out, (uint32_t)p->root[t]);
    for (size_t i = 0; st == MR_OK && i < p->n_nodes; i++) {
        uint32_t thr;
        memcpy(&thr, &p->nodes[i].thr, 4);
        st = mr_buf_put_u32(out, thr);
        if (st == MR_OK) st = mr_buf_put_u32(out, p->nodes[i].meta);
        if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)p->nodes[i].child[0]);
        if (st == MR_OK) st = mr_buf_put_u32(out, (uint32_t)p->nodes[i].child[1]);
    }
    for (size_t i = 0; st == MR_OK && i < p->n_nodes; i++) st = mr_buf_put_f64(out, p->thr64[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_nodes; i++) st = mr_buf_put_u32(out, p->cat_idx[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_leaves; i++) st = mr_buf_put_f64(out, p->leaf[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_cat; i++) st = mr_buf_put_u32(out, p->cat_off[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_cat; i++) st = mr_buf_put_u32(out, p->cat_nbits[i]);
    for (size_t i = 0; st == MR_OK && i < p->n_words; i++) st = mr_buf_put_u32(out, p->cat_bits[i]);
    return st;
}

/* Every index is checked, and children must point forward (preorder), so a
 * loaded predictor can neither read out of bounds nor loop. */
mr_status mr_gbdt_predictor_from_bytes(const void *data, size_t len, mr_gbdt_predictor **out, mr_error *err)
{
    *out = NULL;
    mr_reader r = {.p = data, .len = len};
    const void *magic = mr_reader_bytes(&r, 4);
    if (!magic || memcmp(magic, MRGP_MAGIC, 4) != 0) return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: bad magic");
    uint32_t ver = mr_reader_u32(&r);
    if (ver != MRGP_VERSION)
        return MR_ERR(err, MR_E_CORRUPT, "compiled predictor: unsupported version %u (this build reads %u)", ver,
                      MRGP_VERSION);
    uint32_t obj = mr_reader_u32(&r), K = mr_reader_u32(&r);
    uint64_t F = mr_reader_u64(&r), nt = mr_reader_u64(&r), nn = mr_reader_u64(&r), nl = mr_reader_u64(&r);
    uint64_t nc = mr_reader_u64(&r), nw = mr_reader_u64(&r);
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
    for (size_t k = 0; k < K; k++) p->init[k] = mr_reader_f64(&r);
    for (size_t t = 0; t < nt; t++) p->root[t] = (int32_t)mr_reader_u32(&r);
    for (size_t i = 0; i < nn; i++) {
        uint32_t thr = mr_reader_u32(&r);
        memcpy(&p->nodes[i].thr, &thr, 4);
        p->nodes[i].meta = mr_reader_u32(&r);
        p->nodes[i].child[0] = (int32_t)mr_reader_u32(&r);
        p->nodes[i].child[1] = (int32_t)mr_reader_u32(&r);
    }
    for (size_t i = 0; i < nn; i++) p->thr64[i] = mr_reader_f64(&r);
    for (size_t i = 0; i < nn; i++) p->cat_idx[i] = mr_reader_u32(&r);
    for (size_t i = 0; i < nl; i++) p->leaf[i] = mr_reader_f64(&r);
    for (size_t i = 0; i < nc; i++) p->cat_off[i] = mr_reader_u32(&r);
    for (size_t i = 0; i < nc; i++) p->cat_nbits[i] = mr_reader_u32(&r);
    for (size_t i = 0; i < nw; i++) p->cat_bits[i] = mr_reader_u32(&r);
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
    mr_status st = predictor_finish(p, err);
    if (st != MR_OK) {
        mr_gbdt_predictor_free(p);
        return st;
    }
    *out = p;
    return MR_OK;
}

int mr__gbdt_predictor_path(const mr_gbdt_predictor *p)
{
    return (p->qn ? 2 : 0) + (p->vec == 1 || (p->vec == 2 && p->qn));
}
int mr_gbdt_predictor_num_class(const mr_gbdt_predictor *p) { return p->K; }
size_t mr_gbdt_predictor_num_features(const mr_gbdt_predictor *p) { return p->F; }

/* q = the number of the feature's thresholds below v (255 for NaN):
 * a branch-free binary search over the +inf-padded 256-entry table. */
static inline uint8_t qcode(const float *tf, float v)
{
    if (v != v) return 255;
    unsigned pos = 0;
    for (unsigned st = QT / 2; st; st >>= 1) pos += tf[pos + st - 1] < v ? st : 0;
    return (uint8_t)pos;
}

static void quantise_row(const mr_gbdt_predictor *p, const float *x, uint8_t *q)
{
    for (size_t j = 0; j < p->F; j++) q[j] = qcode(p->qthr + j * QT, x[j]);
}

/* One step of the quantised walk from entry i (not a leaf). */
static inline uint32_t qstep(uint32_t e, uint32_t i, const uint8_t *q)
{
    const uint32_t v = q[e & 0xFF], t = (e >> 8) & 0xFF;
    const uint32_t left = (v <= t) | ((e >> 16) & (v == 255));
    return i + (left ? 1 : (e >> 17) & 0x3FFF);
}

static inline double qtree_value(const mr_gbdt_predictor *p, uint32_t i, const uint8_t *q)
{
    uint32_t e;
    while (!((e = p->qn[i]) & QN_LEAF)) i = qstep(e, i, q);
    return p->leaf[e & ~QN_LEAF];
}

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
    if (p->qn) { /* 4-byte entries: a quarter of the cache lines per tree */
        uint8_t q[256];
        quantise_row(p, x, q);
        for (size_t t = 0; t < p->n_trees; t++) out[t % K] += qtree_value(p, (uint32_t)p->qroot[t], q);
    } else {
        for (size_t t = 0; t < p->n_trees; t++) out[t % K] += tree_value_f32(p, p->root[t], x);
    }
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
#define PRED_VEC_MIN 16 /* fewer rows in a block take the scalar walk */


typedef struct batch_ctx {
    const mr_gbdt_predictor *p;
    const float *x;
    size_t n_rows;
    mr_gbdt_layout layout;
    int raw;
    double *out;
    size_t block;   /* rows per block */
    float *scratch; /* per thread: block * F (column-major input) */
    uint8_t *qscratch; /* per thread: block * F + 4 feature codes (quantised walk) */
} batch_ctx;


#ifdef MR_PRED_X86
/* One tree over a block of n row-major rows, 32 rows in flight in the
 * 16 lanes of two AVX-512 register sets (two independent chains hide the
 * gathers' latency): each step gathers every lane's node (threshold,
 * feature, children) and feature value, compares, and moves to the chosen
 * child. A lane whose row reached a leaf adds the leaf to that row's score
 * and takes the next row of the block at once, so no lane idles while a
 * deeper row is still walking (leaf-wise trees vary a lot in depth). Each
 * row still receives exactly one addition per tree, in tree order, and the
 * comparisons are the scalar ones (ordered, NaN false both ways), so the
 * result is bit-identical to the scalar walk. Numeric trees only. */
typedef struct lanes16 {
    __m512i idx, rowid, rowoff;
    __mmask16 active;
} lanes16;

/* The lowest `avail` set bits of mask: as many finished lanes as rows remain. */
static inline unsigned lowest_bits(unsigned mask, size_t avail)
{
    if ((size_t)__builtin_popcount(mask) <= avail) return mask;
    unsigned keep = 0;
    for (size_t c = 0; c < avail; c++) {
        keep |= mask & -mask;
        mask &= mask - 1;
    }
    return keep;
}

/* Lanes in `done` reached leaves (leaf indices in leaf_of): add each leaf to
 * its row, then refill those lanes with the next rows in lane order, or
 * retire them when the block has none left. */
__attribute__((target("avx512f"), always_inline)) static inline void
lanes_finish(const mr_gbdt_predictor *p, lanes16 *L, __mmask16 done, __m512i leaf_of, size_t n, size_t *next,
             int32_t root, size_t F, double *out, size_t K, size_t k)
{
    uint32_t li[16];
    int32_t ri[16];
    _mm512_storeu_si512(li, leaf_of);
    _mm512_storeu_si512(ri, L->rowid);
    for (unsigned m = done; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        out[(size_t)ri[l] * K + k] += p->leaf[li[l]];
    }
    const __mmask16 rf = (__mmask16)lowest_bits(done, n - *next);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    L->rowid = _mm512_mask_expand_epi32(L->rowid, rf, _mm512_add_epi32(iota, _mm512_set1_epi32((int)*next)));
    L->rowoff = _mm512_mask_mullo_epi32(L->rowoff, rf, L->rowid, _mm512_set1_epi32((int)F));
    L->idx = _mm512_mask_mov_epi32(L->idx, rf, _mm512_set1_epi32(root));
    *next += (size_t)__builtin_popcount(rf);
    L->active = (__mmask16)((L->active & (__mmask16)~done) | rf);
}

__attribute__((target("avx512f"), always_inline)) static inline void
lanes_step(const mr_gbdt_predictor *p, lanes16 *L, const float *rows, size_t n, size_t *next, int32_t root,
           size_t F, double *out, size_t K, size_t k)
{
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    const void *base = p->nodes; /* node i: thr at 16i, meta at 16i+4, children at 16i+8, 16i+12 */
    const __mmask16 active = L->active;
    const __m512i o4 = _mm512_slli_epi32(L->idx, 2); /* node index in 4-byte words */
    const __m512 thr = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), active, o4, base, 4);
    const __m512i meta = _mm512_mask_i32gather_epi32(zero, active, _mm512_add_epi32(o4, one), base, 4);
    const __m512i at = _mm512_add_epi32(L->rowoff, _mm512_srli_epi32(meta, 2));
    const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), active, at, rows, 4);
    const __mmask16 le = _mm512_cmp_ps_mask(v, thr, _CMP_LE_OQ);
    const __mmask16 gt = _mm512_cmp_ps_mask(v, thr, _CMP_GT_OQ);
    const __mmask16 dl = _mm512_test_epi32_mask(meta, one);
    const __mmask16 left = (__mmask16)(le | (dl & (__mmask16)~gt));
    const __m512i co = _mm512_add_epi32(o4, _mm512_mask_blend_epi32(left, _mm512_set1_epi32(3), _mm512_set1_epi32(2)));
    const __m512i idx = _mm512_mask_i32gather_epi32(L->idx, active, co, base, 4);
    L->idx = idx;
    const __mmask16 done = _mm512_mask_cmplt_epi32_mask(active, idx, zero);
    if (!done) return;
    lanes_finish(p, L, done, _mm512_xor_si512(idx, _mm512_set1_epi32(-1)), n, next, root, F, out, K, k);
}

__attribute__((target("avx512f"))) static void lanes_init(lanes16 *L, size_t first, size_t n, int32_t root, size_t F)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t m = first >= n ? 0 : n - first > 16 ? 16 : n - first;
    L->active = (__mmask16)(m == 16 ? 0xFFFFu : ((1u << m) - 1u));
    L->rowid = _mm512_add_epi32(iota, _mm512_set1_epi32((int)first));
    L->rowoff = _mm512_mullo_epi32(L->rowid, _mm512_set1_epi32((int)F));
    L->idx = _mm512_set1_epi32(root);
}

/* The same streaming walk over quantised rows (one byte per feature) and
 * the 32-bit entries: per step one gather of each lane's entry and one of
 * its feature code, half the gathered elements of the float walk. A lane
 * that lands on a leaf entry adds it and takes the next row. */
__attribute__((target("avx512f"), always_inline)) static inline void
qlanes_step(const mr_gbdt_predictor *p, lanes16 *L, const uint8_t *q, size_t n, size_t *next, int32_t root,
            size_t F, double *out, size_t K, size_t k)
{
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1), ff = _mm512_set1_epi32(0xFF);
    const __mmask16 active = L->active;
    const __m512i e = _mm512_mask_i32gather_epi32(zero, active, L->idx, p->qn, 4);
    const __mmask16 leafm = _mm512_mask_cmplt_epi32_mask(active, e, zero);
    const __mmask16 walk = (__mmask16)(active & (__mmask16)~leafm);
    const __m512i at = _mm512_add_epi32(L->rowoff, _mm512_and_si512(e, ff));
    const __m512i qv = _mm512_and_si512(_mm512_mask_i32gather_epi32(zero, walk, at, q, 1), ff);
    const __m512i tq = _mm512_and_si512(_mm512_srli_epi32(e, 8), ff);
    const __mmask16 le = _mm512_cmple_epu32_mask(qv, tq);
    const __mmask16 nan = _mm512_mask_cmpeq_epi32_mask(_mm512_test_epi32_mask(e, _mm512_set1_epi32(1 << 16)), qv, ff);
    const __m512i roff = _mm512_and_si512(_mm512_srli_epi32(e, 17), _mm512_set1_epi32(0x3FFF));
    const __m512i step = _mm512_mask_blend_epi32((__mmask16)(le | nan), roff, one);
    L->idx = _mm512_mask_add_epi32(L->idx, walk, L->idx, step);
    if (!leafm) return;
    lanes_finish(p, L, leafm, _mm512_and_si512(e, _mm512_set1_epi32((int)~QN_LEAF)), n, next, root, F, out, K, k);
}

/* The quantised streaming walk with AVX2 (8 lanes, no mask registers or
 * expand): a step gathers entries and codes for the active lanes; lanes
 * that reached a leaf add it in scalar code and are refilled in the
 * vectors by blends (rank8[m][l] = how many lanes of mask m come before
 * lane l, so the i-th refilled lane gets row next + i), which keeps the
 * lane state in registers. Same results as the other walks. */
__attribute__((target("avx2"))) static void tree_block_q_avx2(const mr_gbdt_predictor *p, int32_t root,
                                                                const uint8_t *q, size_t F, size_t n, double *out,
                                                                size_t K, size_t k)
{
    int32_t ev[8] __attribute__((aligned(32)));
    size_t rowid[8];
    unsigned active = 0;
    size_t next = n < 8 ? n : 8;
    for (size_t l = 0; l < 8; l++) {
        rowid[l] = l;
        if (l < n) active |= 1u << l;
    }
    const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1), ff = _mm256_set1_epi32(0xFF);
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i dlbit = _mm256_set1_epi32(1 << 16), rmask = _mm256_set1_epi32(0x3FFF);
    const __m256i vroot = _mm256_set1_epi32(root), vF = _mm256_set1_epi32((int)F);
    __m256i vidx = vroot, vrow = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), vF);
    while (active) {
        const __m256i am = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_set1_epi32((int)active), bits), zero);
        const __m256i e = _mm256_mask_i32gather_epi32(zero, (const int *)p->qn, vidx, am, 4);
        const __m256i wm = _mm256_andnot_si256(_mm256_srai_epi32(e, 31), am); /* active, not a leaf */
        const unsigned leafm = active & ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(wm));
        const __m256i at = _mm256_add_epi32(vrow, _mm256_and_si256(e, ff));
        const __m256i qv = _mm256_and_si256(_mm256_mask_i32gather_epi32(zero, (const int *)q, at, wm, 1), ff);
        const __m256i tq = _mm256_and_si256(_mm256_srli_epi32(e, 8), ff);
        const __m256i le = _mm256_cmpgt_epi32(_mm256_add_epi32(tq, one), qv); /* q <= t */
        const __m256i nan = _mm256_and_si256(_mm256_cmpeq_epi32(qv, ff),
                                             _mm256_cmpeq_epi32(_mm256_and_si256(e, dlbit), dlbit));
        const __m256i roff = _mm256_and_si256(_mm256_srli_epi32(e, 17), rmask);
        const __m256i step = _mm256_blendv_epi8(roff, one, _mm256_or_si256(le, nan));
        vidx = _mm256_add_epi32(vidx, _mm256_and_si256(step, wm));
        if (!leafm) continue;
        _mm256_store_si256((__m256i *)ev, e);
        for (unsigned m = leafm; m; m &= m - 1) {
            const int l = __builtin_ctz(m);
            out[rowid[l] * K + k] += p->leaf[(uint32_t)ev[l] & ~QN_LEAF];
        }
        const unsigned refill = lowest_bits(leafm, n - next);
        for (unsigned m = refill; m; m &= m - 1) {
            const int l = __builtin_ctz(m);
            rowid[l] = next + (size_t)rank8[refill][l];
        }
        const __m256i rm = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_set1_epi32((int)refill), bits), zero);
        const __m256i nrow = _mm256_add_epi32(_mm256_set1_epi32((int)next), _mm256_loadu_si256((const __m256i *)rank8[refill]));
        vrow = _mm256_blendv_epi8(vrow, _mm256_mullo_epi32(nrow, vF), rm);
        vidx = _mm256_blendv_epi8(vidx, vroot, rm);
        next += (size_t)__builtin_popcount(refill);
        active = (active & ~leafm) | refill;
    }
}

/* Two lane sets (32 rows in flight) stepped alternately until the block is
 * done; STEP is lanes_step (float rows) or qlanes_step (coded rows). */
#define WALK_TWO_SETS(STEP, DATA)                                                                                      \
    lanes16 A, B;                                                                                                      \
    lanes_init(&A, 0, n, root, F);                                                                                     \
    lanes_init(&B, 16, n, root, F);                                                                                    \
    size_t next = n < 32 ? n : 32;                                                                                     \
    while (A.active && B.active) {                                                                                     \
        STEP(p, &A, DATA, n, &next, root, F, out, K, k);                                                               \
        STEP(p, &B, DATA, n, &next, root, F, out, K, k);                                                               \
    }                                                                                                                  \
    while (A.active) STEP(p, &A, DATA, n, &next, root, F, out, K, k);                                                  \
    while (B.active) STEP(p, &B, DATA, n, &next, root, F, out, K, k)

__attribute__((target("avx512f"))) static void tree_block_q(const mr_gbdt_predictor *p, int32_t root, const uint8_t *q,
                                                             size_t F, size_t n, double *out, size_t K, size_t k)
{
    WALK_TWO_SETS(qlanes_step, q);
}

__attribute__((target("avx512f"))) static void tree_block_avx512(const mr_gbdt_predictor *p, int32_t root,
                                                                  const float *rows, size_t F, size_t n, double *out,
                                                                  size_t K, size_t k)
{
    WALK_TWO_SETS(lanes_step, rows);
}
#endif

static void batch_task(void *vctx, size_t begin, size_t end, int tid)
{
    batch_ctx *c = vctx;
    const mr_gbdt_predictor *p = c->p;
    const size_t K = (size_t)p->K, F = p->F;
    const float *rows = c->x + begin * F;
    uint8_t *q = NULL;
    /* a few rows cannot fill the vector lanes: the scalar walk is faster there */
    const int vec = p->vec && end - begin >= PRED_VEC_MIN;
    if (p->qn) {
        q = c->qscratch + (size_t)tid * (c->block * F + 4);
        const size_t nr = end - begin;
        for (size_t j = 0; j < F; j++) {
            const float *tf = p->qthr + j * QT;
            if (c->layout == MR_GBDT_COL_MAJOR)
                for (size_t i = 0; i < nr; i++) q[i * F + j] = qcode(tf, c->x[j * c->n_rows + begin + i]);
            else
                for (size_t i = 0; i < nr; i++) q[i * F + j] = qcode(tf, rows[i * F + j]);
        }
    } else if (c->layout == MR_GBDT_COL_MAJOR) {
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
#ifdef MR_PRED_X86
        if (vec && q) {
            if (p->vec == 1) tree_block_q(p, p->qroot[t], q, F, n, out, K, k);
            else tree_block_q_avx2(p, p->qroot[t], q, F, n, out, K, k);
            continue;
        }
        if (vec && p->vec == 1 && !p->tree_cat[t]) {
            tree_block_avx512(p, root, rows, F, n, out, K, k);
            continue;
        }
#endif
        size_t i = 0;
        if (q) {
            /* PRED_LANES rows at a time over the 4-byte entries */
            const uint32_t qr = (uint32_t)p->qroot[t];
            for (; i + PRED_LANES <= n; i += PRED_LANES) {
                uint32_t cur[PRED_LANES], e[PRED_LANES];
                for (int l = 0; l < PRED_LANES; l++) cur[l] = qr;
                for (;;) {
                    uint32_t all = QN_LEAF;
                    for (int l = 0; l < PRED_LANES; l++) {
                        e[l] = p->qn[cur[l]];
                        if (!(e[l] & QN_LEAF)) cur[l] = qstep(e[l], cur[l], q + (i + (size_t)l) * F);
                        all &= e[l];
                    }
                    if (all) break;
                }
                for (int l = 0; l < PRED_LANES; l++) out[(i + (size_t)l) * K + k] += p->leaf[e[l] & ~QN_LEAF];
            }
            for (; i < n; i++) out[i * K + k] += qtree_value(p, qr, q + i * F);
            continue;
        }
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
    int T = mr_pool_threads_capped(num_threads);
    size_t block = n_rows / ((size_t)T * 8);
    block = block < PRED_BLOCK_MIN ? PRED_BLOCK_MIN : block > PRED_BLOCK_MAX ? PRED_BLOCK_MAX : block;
    batch_ctx c = {.p = p, .x = x, .n_rows = n_rows, .layout = layout, .raw = raw, .out = out, .block = block};
    if (p->qn) {
        c.qscratch = mr_malloc((size_t)T * (block * p->F + 4));
        if (!c.qscratch) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (layout == MR_GBDT_COL_MAJOR && !p->qn) {
        c.scratch = mr_malloc((size_t)T * block * (p->F ? p->F : 1) * sizeof(float));
        if (!c.scratch) {
            mr_free(c.qscratch);
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
    }
    mr_parallel_for_capped(n_rows, block, num_threads, batch_task, &c);
    mr_free(c.scratch);
    mr_free(c.qscratch);
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
    mr_parallel_for_capped(d->n_rows, 1024, 0, binned_task, &c);
    return MR_OK;
}
