/* ONNX export of a bundle (docs/bundle.md "ONNX export"). The protobuf wire
 * format is written by hand: keys are varints (field << 3 | wire type),
 * messages and strings length-delimited, repeated scalars packed. Field
 * numbers follow onnx.proto (ModelProto, GraphProto, NodeProto,
 * AttributeProto, ValueInfoProto, TypeProto, TensorShapeProto). */
#include "millrace/bundle.h"
#include "millrace/linear.h"
#include "ml/features_int.h"
#include "ml/gbdt/gbdt_int.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { WT_VARINT = 0, WT_LEN = 2 };
enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_FLOATS = 6, AT_INTS = 7, AT_STRINGS = 8 };

/* Sticky-status appenders: after the first failure everything is a no-op. */
static void pb_raw(mr_buf *b, const void *p, size_t n, mr_status *st)
{
    if (*st == MR_OK) *st = mr_buf_append(b, p, n);
}

static void pb_varint(mr_buf *b, uint64_t v, mr_status *st)
{
    unsigned char tmp[10];
    size_t n = 0;
    do {
        unsigned char c = (unsigned char)(v & 0x7f);
        v >>= 7;
        tmp[n++] = (unsigned char)(c | (v ? 0x80 : 0));
    } while (v);
    pb_raw(b, tmp, n, st);
}

static void pb_key(mr_buf *b, unsigned field, unsigned wt, mr_status *st) { pb_varint(b, ((uint64_t)field << 3) | wt, st); }

static void pb_int(mr_buf *b, unsigned field, int64_t v, mr_status *st)
{
    pb_key(b, field, WT_VARINT, st);
    pb_varint(b, (uint64_t)v, st);
}

static void pb_bytes(mr_buf *b, unsigned field, const void *p, size_t n, mr_status *st)
{
    pb_key(b, field, WT_LEN, st);
    pb_varint(b, n, st);
    pb_raw(b, p, n, st);
}

static void pb_str(mr_buf *b, unsigned field, const char *s, mr_status *st) { pb_bytes(b, field, s, strlen(s), st); }

/* Appends sub as a length-delimited field and frees it. */
static void pb_msg(mr_buf *b, unsigned field, mr_buf *sub, mr_status *st)
{
    pb_bytes(b, field, sub->data, sub->len, st);
    mr_buf_free(sub);
    mr_buf_init(sub);
}

static void put_f32(mr_buf *b, float f, mr_status *st)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
    pb_raw(b, le, 4, st);
}

/* ---- AttributeProto: name 1, f 2, i 3, s 4, floats 7, ints 8, strings 9, type 20 */
static void attr_begin(mr_buf *a, const char *name, int type, mr_status *st)
{
    pb_str(a, 1, name, st);
    pb_int(a, 20, type, st);
}

static void attr_ints(mr_buf *node, const char *name, const int64_t *v, size_t n, mr_status *st)
{
    mr_buf a, p;
    mr_buf_init(&a);
    mr_buf_init(&p);
    attr_begin(&a, name, AT_INTS, st);
    for (size_t i = 0; i < n; i++) pb_varint(&p, (uint64_t)v[i], st);
    pb_msg(&a, 8, &p, st);
    pb_msg(node, 5, &a, st);
}

static void attr_floats(mr_buf *node, const char *name, const float *v, size_t n, mr_status *st)
{
    mr_buf a, p;
    mr_buf_init(&a);
    mr_buf_init(&p);
    attr_begin(&a, name, AT_FLOATS, st);
    for (size_t i = 0; i < n; i++) put_f32(&p, v[i], st);
    pb_msg(&a, 7, &p, st);
    pb_msg(node, 5, &a, st);
}

static void attr_strings(mr_buf *node, const char *name, const char *const *v, size_t n, mr_status *st)
{
    mr_buf a;
    mr_buf_init(&a);
    attr_begin(&a, name, AT_STRINGS, st);
    for (size_t i = 0; i < n; i++) pb_str(&a, 9, v[i], st);
    pb_msg(node, 5, &a, st);
}

static void attr_strings_n(mr_buf *node, const char *name, char *const *v, const size_t *len, size_t n, mr_status *st)
{
    mr_buf a;
    mr_buf_init(&a);
    attr_begin(&a, name, AT_STRINGS, st);
    for (size_t i = 0; i < n; i++) pb_bytes(&a, 9, v[i], len[i], st);
    pb_msg(node, 5, &a, st);
}

static void attr_string(mr_buf *node, const char *name, const char *v, mr_status *st)
{
    mr_buf a;
    mr_buf_init(&a);
    attr_begin(&a, name, AT_STRING, st);
    pb_str(&a, 4, v, st);
    pb_msg(node, 5, &a, st);
}

static void attr_int(mr_buf *node, const char *name, int64_t v, mr_status *st)
{
    mr_buf a;
    mr_buf_init(&a);
    attr_begin(&a, name, AT_INT, st);
    pb_int(&a, 3, v, st);
    pb_msg(node, 5, &a, st);
}

static void attr_float(mr_buf *node, const char *name, float v, mr_status *st)
{
    mr_buf a;
    mr_buf_init(&a);
    attr_begin(&a, name, AT_FLOAT, st);
    pb_key(&a, 2, 5 /* fixed32 */, st);
    put_f32(&a, v, st);
    pb_msg(node, 5, &a, st);
}

/* NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
 * Starts a node in n; the caller appends attributes, then graph_add_node. */
static void node_begin(mr_buf *n, const char *op, const char *domain, const char *in, const char *out, mr_status *st)
{
    pb_str(n, 1, in, st);
    pb_str(n, 2, out, st);
    pb_str(n, 3, out, st);
    pb_str(n, 4, op, st);
    if (domain) pb_str(n, 7, domain, st);
}

/* ValueInfoProto {name 1, type 2: TypeProto {tensor_type 1: {elem_type 1,
 * shape 2: {dim 1: {dim_value 1 | dim_param 2}}}}}: float [N, cols]. */
static void value_info(mr_buf *g, unsigned field, const char *name, int elem_type, int64_t cols, mr_status *st)
{
    mr_buf vi, tp, tt, sh, d;
    mr_buf_init(&vi);
    mr_buf_init(&tp);
    mr_buf_init(&tt);
    mr_buf_init(&sh);
    mr_buf_init(&d);
    pb_str(&d, 2, "N", st);
    pb_msg(&sh, 1, &d, st);
    pb_int(&d, 1, cols, st);
    pb_msg(&sh, 1, &d, st);
    pb_int(&tt, 1, elem_type, st);
    pb_msg(&tt, 2, &sh, st);
    pb_msg(&tp, 1, &tt, st);
    pb_str(&vi, 1, name, st);
    pb_msg(&vi, 2, &tp, st);
    pb_msg(g, field, &vi, st);
}

/* Largest float <= d: float inputs then compare v <= thr exactly as the
 * compiled predictor does (src/ml/gbdt/predict.c float_floor). */
static float float_floor(double d)
{
    float f = (float)d;
    if (d != d) return f;
    if ((double)f > d) f = nextafterf(f, -INFINITY);
    return f;
}

/* ---- the features transform as ONNX ops ------------------------------------
 * The graph input is the bundle's raw inputs (the transform's inputs, in
 * schema order) as float; every used column is Gathered, run through its
 * numeric program with standard ops, and the model's features are
 * Concatenated in the model's order into "features". */
typedef struct fx_ctx {
    mr_buf *g;     /* graph: nodes (field 1), initializers (field 5) */
    mr_status st;
    unsigned next; /* tensor name counter */
    const char *prefix; /* of tensor names: "fx" (transform), "cs" (categorical splits) */
} fx_ctx;

static void fx_name(fx_ctx *c, char *out)
{
    snprintf(out, 32, "%s%u", c->prefix, c->next++);
}

/* TensorProto: dims 1, data_type 2, float_data 4, int64_data 7, name 8. */
static void fx_init_f(fx_ctx *c, const float *v, size_t n, int scalar, char *name)
{
    mr_buf t, p;
    mr_buf_init(&t);
    mr_buf_init(&p);
    fx_name(c, name);
    if (!scalar) pb_int(&t, 1, (int64_t)n, &c->st);
    pb_int(&t, 2, 1 /* FLOAT */, &c->st);
    for (size_t i = 0; i < n; i++) put_f32(&p, v[i], &c->st);
    pb_msg(&t, 4, &p, &c->st);
    pb_str(&t, 8, name, &c->st);
    pb_msg(c->g, 5, &t, &c->st);
}

static void fx_const(fx_ctx *c, float v, char *name) { fx_init_f(c, &v, 1, 1, name); }

static void fx_init_i64(fx_ctx *c, int64_t v, char *name)
{
    mr_buf t, p;
    mr_buf_init(&t);
    mr_buf_init(&p);
    fx_name(c, name);
    pb_int(&t, 1, 1, &c->st);
    pb_int(&t, 2, 7 /* INT64 */, &c->st);
    pb_varint(&p, (uint64_t)v, &c->st);
    pb_msg(&t, 7, &p, &c->st);
    pb_str(&t, 8, name, &c->st);
    pb_msg(c->g, 5, &t, &c->st);
}

/* A node of the default domain with inputs in[0..n) and a fresh output
 * name in out; int_attr_name (may be NULL) adds one int attribute. */
static void fx_node(fx_ctx *c, const char *op, const char *const *in, size_t n, char *out, int64_t int_attr,
                    const char *int_attr_name)
{
    mr_buf node;
    mr_buf_init(&node);
    fx_name(c, out);
    for (size_t i = 0; i < n; i++) pb_str(&node, 1, in[i], &c->st);
    pb_str(&node, 2, out, &c->st);
    pb_str(&node, 3, out, &c->st);
    pb_str(&node, 4, op, &c->st);
    if (int_attr_name) attr_int(&node, int_attr_name, int_attr, &c->st);
    pb_msg(c->g, 1, &node, &c->st);
}

static void fx_op1(fx_ctx *c, const char *op, const char *a, char *out) { fx_node(c, op, &a, 1, out, 0, NULL); }

static void fx_op2(fx_ctx *c, const char *op, const char *a, const char *b, char *out)
{
    const char *in[2] = {a, b};
    fx_node(c, op, in, 2, out, 0, NULL);
}

static void fx_where(fx_ctx *c, const char *cond, const char *a, const char *b, char *out)
{
    const char *in[3] = {cond, a, b};
    fx_node(c, "Where", in, 3, out, 0, NULL);
}

/* One 0/1 column per categorical split, in tree and node order, then
 * "tree_in" = Concat(inname, those columns). */
static mr_status cat_split_columns(const mr_gbdt_model *m, mr_buf *g, const char *inname, size_t n_cs, mr_error *err)
{
    fx_ctx c = {.g = g, .st = MR_OK, .next = 0, .prefix = "cs"};
    char(*col)[32] = mr_calloc(n_cs, 32);
    char(*gathered)[32] = mr_calloc(m->n_features ? m->n_features : 1, 32); /* per feature, lazily */
    float *keys = NULL, *vals = NULL;
    size_t cap = 0, s = 0;
    if (!col || !gathered) {
        mr_free(col);
        mr_free(gathered);
        return MR_ERR(err, MR_E_NOMEM, "out of memory exporting categorical splits");
    }
    for (size_t t = 0; t < m->n_trees && c.st == MR_OK; t++) {
        const mr__tree *tr = &m->trees[t];
        for (int i = 0; i < tr->n_leaves - 1 && c.st == MR_OK; i++) {
            if (!(tr->decision[i] & MR__DT_CATEGORICAL)) continue;
            const size_t f = (size_t)tr->split_feature[i];
            if (!gathered[f][0]) {
                char idx[32];
                fx_init_i64(&c, (int64_t)f, idx);
                const char *in[2] = {inname, idx};
                fx_node(&c, "Gather", in, 2, gathered[f], 1, "axis");
            }
            const int ci = tr->threshold_bin[i];
            const uint32_t *bits = tr->cat_raw_bits + tr->cat_begin[ci];
            const size_t nbits = (size_t)(tr->cat_begin[ci + 1] - tr->cat_begin[ci]) * 32;
            const float dflt = (tr->decision[i] & MR__DT_DEFAULT_LEFT) ? 1.0f : 0.0f;
            if (nbits + 1 > cap) {
                cap = nbits + 1;
                float *nk = mr_realloc(keys, cap * sizeof(float)), *nv = nk ? mr_realloc(vals, cap * sizeof(float)) : NULL;
                if (nk) keys = nk;
                if (nv) vals = nv;
                if (!nk || !nv) {
                    c.st = MR_E_NOMEM;
                    break;
                }
            }
            size_t nk = 0; /* codes whose side differs from the default side */
            for (size_t code = 0; code < nbits; code++) {
                float v = ((bits[code >> 5] >> (code & 31)) & 1u) ? 1.0f : 0.0f;
                if (v != dflt) {
                    keys[nk] = (float)code;
                    vals[nk++] = v;
                }
            }
            if (nk == 0) { /* every code takes the default side: one harmless key */
                keys[0] = 0.0f;
                vals[0] = dflt;
                nk = 1;
            }
            mr_buf node;
            mr_buf_init(&node);
            fx_name(&c, col[s]);
            node_begin(&node, "LabelEncoder", "ai.onnx.ml", gathered[f], col[s], &c.st);
            attr_float(&node, "default_float", dflt, &c.st);
            attr_floats(&node, "keys_floats", keys, nk, &c.st);
            attr_floats(&node, "values_floats", vals, nk, &c.st);
            pb_msg(g, 1, &node, &c.st);
            s++;
        }
    }
    if (c.st == MR_OK) {
        mr_buf node;
        mr_buf_init(&node);
        pb_str(&node, 1, inname, &c.st);
        for (size_t k = 0; k < n_cs; k++) pb_str(&node, 1, col[k], &c.st);
        pb_str(&node, 2, "tree_in", &c.st);
        pb_str(&node, 3, "tree_in", &c.st);
        pb_str(&node, 4, "Concat", &c.st);
        attr_int(&node, "axis", 1, &c.st);
        pb_msg(g, 1, &node, &c.st);
    }
    mr_free(col);
    mr_free(gathered);
    mr_free(keys);
    mr_free(vals);
    return c.st == MR_OK ? MR_OK : MR_ERR(err, c.st, "out of memory exporting categorical splits");
}

#define MR_ONNX_MAX_CLASSES 1024

/* TreeEnsembleRegressor "input" -> outname, appended to graph g. */
static mr_status gbdt_nodes(const mr_gbdt_model *m, mr_buf *g, const char *inname, const char *outname, mr_error *err)
{
    mr_status st = MR_OK;
    size_t total = 0, n_leaves = 0;
    const int K = m->num_tree_per_iteration;
    size_t n_cs = 0;
    for (size_t t = 0; t < m->n_trees; t++) {
        const mr__tree *tr = &m->trees[t];
        for (int i = 0; i < tr->n_leaves - 1; i++) n_cs += (tr->decision[i] & MR__DT_CATEGORICAL) != 0;
        total += (size_t)(tr->n_leaves > 1 ? 2 * tr->n_leaves - 1 : 1);
        n_leaves += (size_t)tr->n_leaves;
    }
    /* Categorical splits (v's integer code in a set goes left; NaN, a
     * non-integer or a code past the set's bits takes the default side):
     * each becomes a 0/1 column, a float LabelEncoder over the feature whose
     * table is the split's bitset and whose default is the default side,
     * appended after the features; the tree tests that column > 0.5. */
    const char *tree_in = inname;
    if (n_cs && (st = cat_split_columns(m, g, inname, n_cs, err)) != MR_OK) return st;
    if (n_cs) tree_in = "tree_in";
    size_t cs = 0;
    size_t T = total ? total : 1, L = n_leaves ? n_leaves : 1;
    int64_t *treeid = mr_malloc(T * sizeof(int64_t)), *nodeid = mr_malloc(T * sizeof(int64_t));
    int64_t *featid = mr_malloc(T * sizeof(int64_t)), *tid = mr_malloc(T * sizeof(int64_t));
    int64_t *fid = mr_malloc(T * sizeof(int64_t)), *miss = mr_malloc(T * sizeof(int64_t));
    float *val = mr_malloc(T * sizeof(float));
    const char **mode = mr_malloc(T * sizeof(char *));
    int64_t *lt = mr_malloc(L * sizeof(int64_t)), *ln = mr_malloc(L * sizeof(int64_t)), *lz = mr_calloc(L, sizeof(int64_t));
    float *lw = mr_malloc(L * sizeof(float));
    mr_buf node;
    mr_buf_init(&node);
    if (!treeid || !nodeid || !featid || !tid || !fid || !miss || !val || !mode || !lt || !ln || !lz || !lw) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory exporting trees");
        goto cleanup;
    }
    size_t k = 0, l = 0;
    for (size_t t = 0; t < m->n_trees; t++) {
        const mr__tree *tr = &m->trees[t];
        int ni = tr->n_leaves - 1 > 0 ? tr->n_leaves - 1 : 0;
        for (int i = 0; i < ni; i++, k++) {
            treeid[k] = (int64_t)t;
            nodeid[k] = i;
            featid[k] = tr->split_feature[i];
            mode[k] = "BRANCH_LEQ"; /* v <= thr goes left (true) */
            val[k] = float_floor(tr->threshold[i]);
            tid[k] = tr->left[i] >= 0 ? tr->left[i] : ni + ~tr->left[i];
            fid[k] = tr->right[i] >= 0 ? tr->right[i] : ni + ~tr->right[i];
            miss[k] = (tr->decision[i] & MR__DT_DEFAULT_LEFT) ? 1 : 0; /* NaN goes left when default-left */
            if (tr->decision[i] & MR__DT_CATEGORICAL) { /* column "goes left" > 0.5 */
                featid[k] = (int64_t)(m->n_features + cs++);
                mode[k] = "BRANCH_GT";
                val[k] = 0.5f;
                miss[k] = 0;
            }
        }
        for (int j = 0; j < tr->n_leaves; j++, k++, l++) {
            treeid[k] = (int64_t)t;
            nodeid[k] = ni + j;
            featid[k] = 0;
            mode[k] = "LEAF";
            val[k] = 0;
            tid[k] = fid[k] = 0;
            miss[k] = 0;
            lt[l] = (int64_t)t;
            ln[l] = ni + j;
            lz[l] = (int64_t)(t % (size_t)K); /* multiclass: tree t scores class t mod K */
            lw[l] = (float)tr->leaf_value[j];
        }
    }
    float base[MR_ONNX_MAX_CLASSES];
    for (int c = 0; c < K; c++) base[c] = (float)m->init_score[c];
    node_begin(&node, "TreeEnsembleRegressor", "ai.onnx.ml", tree_in, outname, &st);
    attr_string(&node, "aggregate_function", "SUM", &st);
    attr_floats(&node, "base_values", base, (size_t)K, &st);
    attr_int(&node, "n_targets", K, &st);
    attr_ints(&node, "nodes_falsenodeids", fid, k, &st);
    attr_ints(&node, "nodes_featureids", featid, k, &st);
    attr_ints(&node, "nodes_missing_value_tracks_true", miss, k, &st);
    attr_strings(&node, "nodes_modes", mode, k, &st);
    attr_ints(&node, "nodes_nodeids", nodeid, k, &st);
    attr_ints(&node, "nodes_treeids", treeid, k, &st);
    attr_ints(&node, "nodes_truenodeids", tid, k, &st);
    attr_floats(&node, "nodes_values", val, k, &st);
    attr_string(&node, "post_transform", "NONE", &st);
    attr_ints(&node, "target_ids", lz, l, &st);
    attr_ints(&node, "target_nodeids", ln, l, &st);
    attr_ints(&node, "target_treeids", lt, l, &st);
    attr_floats(&node, "target_weights", lw, l, &st);
    pb_msg(g, 1, &node, &st);
    if (st != MR_OK) MR_ERR(err, st, "out of memory writing the ONNX tree ensemble");
cleanup:
    mr_buf_free(&node);
    mr_free(treeid);
    mr_free(nodeid);
    mr_free(featid);
    mr_free(tid);
    mr_free(fid);
    mr_free(miss);
    mr_free(val);
    mr_free(mode);
    mr_free(lt);
    mr_free(ln);
    mr_free(lz);
    mr_free(lw);
    return st;
}

/* Imputer (NaN -> training mean, which is how a missing value scores) then
 * LinearRegressor, "input" -> outname. */
static mr_status linear_nodes(const mr_linear_model *m, mr_buf *g, const char *inname, const char *outname, mr_error *err)
{
    mr_status st = MR_OK;
    size_t d = mr_linear_model_num_features(m);
    float *w = mr_malloc((d ? d : 1) * sizeof(float)), *mean = mr_malloc((d ? d : 1) * sizeof(float));
    mr_buf node;
    mr_buf_init(&node);
    if (!w || !mean) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory exporting a linear model");
        goto cleanup;
    }
    for (size_t j = 0; j < d; j++) {
        w[j] = (float)mr_linear_model_weight(m, j);
        mean[j] = (float)mr_linear_model_mean(m, j);
    }
    float b = (float)mr_linear_model_intercept(m);
    node_begin(&node, "Imputer", "ai.onnx.ml", inname, "imputed", &st);
    attr_floats(&node, "imputed_value_floats", mean, d, &st);
    attr_float(&node, "replaced_value_float", NAN, &st);
    pb_msg(g, 1, &node, &st);
    node_begin(&node, "LinearRegressor", "ai.onnx.ml", "imputed", outname, &st);
    attr_floats(&node, "coefficients", w, d, &st);
    attr_floats(&node, "intercepts", &b, 1, &st);
    attr_string(&node, "post_transform", "NONE", &st);
    attr_int(&node, "targets", 1, &st);
    pb_msg(g, 1, &node, &st);
    if (st != MR_OK) MR_ERR(err, st, "out of memory writing the ONNX linear model");
cleanup:
    mr_buf_free(&node);
    mr_free(w);
    mr_free(mean);
    return st;
}

/* Smallest float >= d: float x >= it exactly when x >= d. */
static float float_ceil(double d)
{
    float f = (float)d;
    if (d != d) return f;
    if ((double)f < d) f = nextafterf(f, INFINITY);
    return f;
}

static const char *fx_op_name(uint8_t k)
{
    static const char *const names[] = {"?", "impute", "standardize", "minmax", "log1p", "clip", "bucketize", "impute"};
    return k <= FT_OP_MAX ? names[k] : "?";
}

/* Column k's numeric program on x (a [N,1] tensor name): main and
 * indicator outputs (indicator "" when the column has none). */
static void fx_column(fx_ctx *c, const ft_col *col, char *x, char *ind)
{
    char t1[32], t2[32], t3[32], t4[32];
    ind[0] = 0;
    for (uint32_t k = 0; k < col->n_ops && c->st == MR_OK; k++) {
        const ft_op *op = &col->ops[k];
        switch (op->kind) {
        case FT_OP_IMPUTE: /* x = isnan(x) ? a : x; indicator = isnan(x) */
            fx_op1(c, "IsNaN", x, t1);
            if (op->indicator) {
                mr_buf node;
                mr_buf_init(&node);
                fx_name(c, ind);
                node_begin(&node, "Cast", NULL, t1, ind, &c->st);
                attr_int(&node, "to", 1 /* FLOAT */, &c->st);
                pb_msg(c->g, 1, &node, &c->st);
            }
            fx_const(c, (float)op->a, t2);
            fx_where(c, t1, t2, x, t3);
            strcpy(x, t3);
            break;
        case FT_OP_STANDARDIZE:
        case FT_OP_MINMAX: /* (x - a) / b */
            fx_const(c, (float)op->a, t1);
            fx_op2(c, "Sub", x, t1, t2);
            fx_const(c, (float)op->b, t1);
            fx_op2(c, "Div", t2, t1, t3);
            strcpy(x, t3);
            break;
        case FT_OP_LOG1P: /* x > -1 ? log(x + 1) : NaN */
            fx_const(c, 1.0f, t1);
            fx_op2(c, "Add", x, t1, t2);
            fx_op1(c, "Log", t2, t3);
            fx_const(c, -1.0f, t1);
            fx_op2(c, "Greater", x, t1, t2);
            fx_const(c, NAN, t1);
            fx_where(c, t2, t3, t1, t4);
            strcpy(x, t4);
            break;
        case FT_OP_CLIP: /* x < a ? a : x > b ? b : x (NaN stays NaN) */
            fx_const(c, (float)op->b, t1);
            fx_op2(c, "Greater", x, t1, t2);
            fx_where(c, t2, t1, x, t3);
            fx_const(c, (float)op->a, t1);
            fx_op2(c, "Less", x, t1, t2);
            fx_where(c, t2, t1, t3, t4);
            strcpy(x, t4);
            break;
        case FT_OP_BUCKETIZE: { /* #{edges <= x}; NaN stays NaN */
            float *e = mr_malloc((op->n_edges ? op->n_edges : 1) * sizeof(float));
            if (!e) {
                c->st = MR_E_NOMEM;
                return;
            }
            for (uint32_t i = 0; i < op->n_edges; i++) e[i] = float_ceil(op->edges[i]);
            fx_init_f(c, e, op->n_edges, 0, t1);
            mr_free(e);
            fx_op2(c, "GreaterOrEqual", x, t1, t2); /* [N, E] */
            {
                mr_buf node;
                mr_buf_init(&node);
                fx_name(c, t3);
                node_begin(&node, "Cast", NULL, t2, t3, &c->st);
                attr_int(&node, "to", 1 /* FLOAT */, &c->st);
                pb_msg(c->g, 1, &node, &c->st);
            }
            fx_init_i64(c, 1, t1);
            fx_node(c, "ReduceSum", (const char *const[]){t3, t1}, 2, t2, 1, "keepdims");
            fx_op1(c, "IsNaN", x, t1);
            fx_where(c, t1, x, t2, t4);
            strcpy(x, t4);
            break;
        }
        default: break;
        }
    }
}

/* Refuses the first column the model uses that ONNX cannot express,
 * naming the column and step: hash encodings (a hash function is not an
 * ONNX op), and a vocabulary holding the empty string (the graph's string
 * input spells a missing category as ""). */
static mr_status fx_check(const mr_features *f, const uint8_t *used, mr_error *err)
{
    for (size_t k = 0; k < f->n_cols; k++) {
        const ft_col *col = &f->cols[k];
        if (!used[k]) continue;
        const char *step = NULL;
        if (col->enc == FT_ENC_HASH) step = "hash";
        else if (col->enc > FT_ENC_MAX || (col->categorical && col->enc == FT_ENC_NONE)) step = "categorical input";
        for (uint32_t i = 0; i < col->n_ops && !step; i++)
            if (col->ops[i].kind > FT_OP_MAX || col->ops[i].kind == 0) step = fx_op_name(col->ops[i].kind);
        if (step) {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA,
                                  "features transform: column '%s' (%s) cannot be expressed in ONNX; export a bundle "
                                  "packaged without that step",
                                  col->name, step);
            mr_error_key(err, col->name);
            return rc;
        }
        for (uint32_t i = 0; col->categorical && i < col->n_vocab; i++)
            if (col->vocab_len[i] == 0) {
                mr_status rc = MR_ERR(err, MR_E_SCHEMA,
                                      "features transform: column '%s' has the empty string as a category, which the "
                                      "ONNX graph's string input uses for a missing value",
                                      col->name);
                mr_error_key(err, col->name);
                return rc;
            }
    }
    return MR_OK;
}

/* ai.onnx.ml LabelEncoder from the string tensor xs: keys -> values, any
 * other string -> dflt; output name in out. */
static void fx_label_encoder(fx_ctx *c, const char *xs, char *const *keys, const size_t *klen, const float *vals,
                             size_t n, float dflt, char *out)
{
    mr_buf node;
    mr_buf_init(&node);
    fx_name(c, out);
    node_begin(&node, "LabelEncoder", "ai.onnx.ml", xs, out, &c->st);
    attr_float(&node, "default_float", dflt, &c->st);
    attr_strings_n(&node, "keys_strings", keys, klen, n, &c->st);
    attr_floats(&node, "values_floats", vals, n, &c->st);
    pb_msg(c->g, 1, &node, &c->st);
}

/* A categorical column's outputs as LabelEncoders over its string input.
 * The values come from ft_eval itself — on every vocabulary entry, on a
 * missing value (the empty string here) and on a string outside the
 * vocabulary (the default) — so the graph computes exactly what the
 * transform does for every key; for an encoding that depends only on which
 * key it sees (onehot, ordinal, target_encode, with or without a
 * categorical impute) that is the whole function. Each encoder lists only
 * the keys whose value differs from the default: one key per onehot
 * output, not the whole vocabulary (a 20k-category onehot would otherwise
 * carry 4e8 keys). */
static int same_value(double a, double b) { return a == b || (a != a && b != b); }

static void fx_cat_column(fx_ctx *c, const ft_col *col, const char *xs, const uint8_t *used_out, char (*out_of)[32])
{
    const size_t nk = (size_t)col->n_vocab + 1, no = col->n_out;
    double *row = mr_malloc(no * sizeof(double)), *unseen = mr_malloc(no * sizeof(double));
    size_t *cnt = mr_calloc(no, sizeof(size_t)), *fill = mr_calloc(no, sizeof(size_t));
    char ***keys = mr_calloc(no, sizeof(char **));
    size_t **klen = mr_calloc(no, sizeof(size_t *));
    float **vals = mr_calloc(no, sizeof(float *));
    char *u = NULL;
    if (!row || !unseen || !cnt || !fill || !keys || !klen || !vals) goto oom;
    /* a key outside the vocabulary: the sorted vocabulary's last entry plus
     * one byte sorts after every entry, so it is not one of them */
    size_t ul = col->n_vocab ? col->vocab_len[col->n_vocab - 1] + 1 : 1;
    if (!(u = mr_malloc(ul))) goto oom;
    if (col->n_vocab) memcpy(u, col->vocab[col->n_vocab - 1], ul - 1);
    u[ul - 1] = 'x';
    ft_val un = {.missing = 0, .x = NAN, .s = u, .len = ul};
    ft_eval(col, &un, unseen);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < nk; i++) {
            const int missing = i == col->n_vocab;
            ft_val v = {.missing = missing, .x = NAN, .s = missing ? NULL : col->vocab[i],
                        .len = missing ? 0 : col->vocab_len[i]};
            ft_eval(col, &v, row);
            for (size_t o = 0; o < no; o++) {
                if (!used_out[col->out_base + o] || same_value(row[o], unseen[o])) continue;
                if (pass == 0) {
                    cnt[o]++;
                    continue;
                }
                keys[o][fill[o]] = missing ? "" : col->vocab[i];
                klen[o][fill[o]] = missing ? 0 : col->vocab_len[i];
                vals[o][fill[o]++] = (float)row[o];
            }
        }
        if (pass == 0)
            for (size_t o = 0; o < no; o++) {
                if (!used_out[col->out_base + o]) continue;
                size_t m = cnt[o] ? cnt[o] : 1;
                keys[o] = mr_malloc(m * sizeof(char *));
                klen[o] = mr_malloc(m * sizeof(size_t));
                vals[o] = mr_malloc(m * sizeof(float));
                if (!keys[o] || !klen[o] || !vals[o]) goto oom;
            }
    }
    for (size_t o = 0; o < no && c->st == MR_OK; o++) {
        if (!used_out[col->out_base + o]) continue;
        if (fill[o] == 0) { /* every key takes the default: one harmless entry */
            keys[o][0] = "";
            klen[o][0] = 0;
            vals[o][0] = (float)unseen[o];
            fill[o] = 1;
        }
        fx_label_encoder(c, xs, keys[o], klen[o], vals[o], fill[o], (float)unseen[o], out_of[col->out_base + o]);
    }
    goto done;
oom:
    c->st = MR_E_NOMEM;
done:
    for (size_t o = 0; keys && klen && vals && o < no; o++) {
        mr_free(keys[o]);
        mr_free(klen[o]);
        mr_free(vals[o]);
    }
    mr_free(keys);
    mr_free(klen);
    mr_free(vals);
    mr_free(row);
    mr_free(unseen);
    mr_free(cnt);
    mr_free(fill);
    mr_free(u);
}

/* Writes the transform's nodes into g: "input" [N, n_inputs] (numbers; the
 * categorical positions are not read) and, when a categorical input is
 * used, "input_cat" [N, n_cat] (the categorical inputs as strings in schema
 * order, "" = missing) -> "features" [N, n_model_features]. */
static mr_status features_nodes(const mr_features *f, const mr_model *m, mr_buf *g, size_t *n_cat_in, mr_error *err)
{
    size_t nf = mr_model_num_features(m);
    size_t *src = mr_malloc((nf ? nf : 1) * sizeof(size_t)); /* output index per model feature */
    uint8_t *used = mr_calloc(f->n_cols ? f->n_cols : 1, 1);
    uint8_t *used_out = mr_calloc(f->n_out ? f->n_out : 1, 1);
    char(*out_of)[32] = mr_calloc(f->n_out ? f->n_out : 1, 32);
    const char **cat = mr_malloc((nf ? nf : 1) * sizeof(char *));
    fx_ctx c = {.g = g, .st = MR_OK, .next = 0, .prefix = "fx"};
    mr_status rc = MR_OK;
    *n_cat_in = 0;
    if (!src || !used || !used_out || !out_of || !cat) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory exporting the features transform");
        goto done;
    }
    for (size_t j = 0; j < nf; j++) {
        const char *name = mr_model_feature_name(m, j);
        size_t q = 0;
        while (q < f->n_out && strcmp(f->outs[q].name, name)) q++;
        if (q == f->n_out) {
            rc = MR_ERR(err, MR_E_SCHEMA, "model feature '%s' is not an output of the features transform", name);
            goto done;
        }
        src[j] = q;
        used_out[q] = 1;
        used[f->outs[q].input] = 1;
    }
    if ((rc = fx_check(f, used, err)) != MR_OK) goto done;
    int any_cat = 0;
    for (size_t k = 0; k < f->n_cols; k++) any_cat |= used[k] && f->cols[k].categorical;
    size_t cat_pos = 0;
    for (size_t k = 0; k < f->n_cols; k++) {
        const ft_col *col = &f->cols[k];
        size_t my_cat = cat_pos;
        if (col->categorical) cat_pos++;
        if (!used[k]) continue;
        char idx[32], x[32], ind[32];
        if (col->categorical) {
            fx_init_i64(&c, (int64_t)my_cat, idx);
            const char *in[2] = {"input_cat", idx};
            fx_node(&c, "Gather", in, 2, x, 1, "axis"); /* [N, 1] strings */
            fx_cat_column(&c, col, x, used_out, out_of);
            continue;
        }
        fx_init_i64(&c, (int64_t)k, idx);
        const char *in[2] = {"input", idx};
        fx_node(&c, "Gather", in, 2, x, 1, "axis"); /* [N, 1] */
        fx_column(&c, col, x, ind);
        strcpy(out_of[col->out_base], x);
        if (col->has_indicator) strcpy(out_of[col->out_base + 1], ind);
    }
    if (any_cat) *n_cat_in = cat_pos;
    for (size_t j = 0; j < nf; j++) cat[j] = out_of[src[j]];
    {
        mr_buf node;
        mr_buf_init(&node);
        for (size_t j = 0; j < nf; j++) pb_str(&node, 1, cat[j], &c.st);
        pb_str(&node, 2, "features", &c.st);
        pb_str(&node, 3, "features", &c.st);
        pb_str(&node, 4, "Concat", &c.st);
        attr_int(&node, "axis", 1, &c.st);
        pb_msg(g, 1, &node, &c.st);
    }
    if (c.st != MR_OK) rc = MR_ERR(err, c.st, "out of memory writing the ONNX features transform");
done:
    mr_free(src);
    mr_free(used);
    mr_free(used_out);
    mr_free(out_of);
    mr_free(cat);
    return rc;
}

mr_status mr_bundle_export_onnx(const mr_bundle *b, mr_buf *out, mr_error *err)
{
    const mr_model *m = mr_bundle_model(b);
    const mr_features *fx = mr_bundle_features(b);
    mr_status st = MR_OK;
    int sigmoid = 0, softmax = 0, n_scores = 1;
    if (mr_model_kind_of(m) == MR_MODEL_GBDT) {
        const mr_gbdt_model *gm = mr_model_gbdt(m);
        if (gm->num_tree_per_iteration < 1 || gm->num_tree_per_iteration > MR_ONNX_MAX_CLASSES ||
            (gm->num_tree_per_iteration != 1 && gm->objective != MR_GBDT_MULTICLASS))
            return MR_ERR(err, MR_E_SCHEMA, "objective '%s' with %d trees per iteration cannot be exported to ONNX",
                          mr_gbdt_objective_name(gm->objective), gm->num_tree_per_iteration);
        sigmoid = gm->objective == MR_GBDT_BINARY;
        softmax = gm->objective == MR_GBDT_MULTICLASS;
        n_scores = gm->num_tree_per_iteration;
    } else {
        sigmoid = mr_linear_model_objective(mr_model_linear(m)) == MR_LINEAR_LOGISTIC;
    }
    const char *raw_out = sigmoid || softmax ? "margin" : "score";
    mr_buf g, model, sub;
    mr_buf_init(&g);
    mr_buf_init(&model);
    mr_buf_init(&sub);
    const char *model_in = fx ? "features" : "input";
    size_t n_cat_in = 0;
    if (fx && (st = features_nodes(fx, m, &g, &n_cat_in, err)) != MR_OK) goto cleanup;
    if (mr_model_kind_of(m) == MR_MODEL_GBDT)
        st = gbdt_nodes(mr_model_gbdt(m), &g, model_in, raw_out, err);
    else
        st = linear_nodes(mr_model_linear(m), &g, model_in, raw_out, err);
    if (st != MR_OK) goto cleanup;
    if (sigmoid) {
        node_begin(&sub, "Sigmoid", NULL, "margin", "score", &st);
        pb_msg(&g, 1, &sub, &st);
    }
    if (softmax) { /* class probabilities, [N, K] */
        node_begin(&sub, "Softmax", NULL, "margin", "score", &st);
        attr_int(&sub, "axis", 1, &st);
        pb_msg(&g, 1, &sub, &st);
    }
    pb_str(&g, 2, "millrace", &st);
    value_info(&g, 11, "input", 1 /* FLOAT */, (int64_t)(fx ? mr_features_n_inputs(fx) : mr_model_num_features(m)),
               &st);
    if (n_cat_in) value_info(&g, 11, "input_cat", 8 /* STRING */, (int64_t)n_cat_in, &st);
    value_info(&g, 12, "score", 1 /* FLOAT */, n_scores, &st);
    /* ModelProto: ir_version 1, producer_name 2, producer_version 3, graph 7, opset_import 8 */
    pb_int(&model, 1, 8, &st);
    pb_str(&model, 2, "millrace", &st);
    pb_str(&model, 3, "0.1.0", &st);
    pb_msg(&model, 7, &g, &st);
    pb_str(&sub, 1, "", &st);
    pb_int(&sub, 2, 17, &st);
    pb_msg(&model, 8, &sub, &st);
    pb_str(&sub, 1, "ai.onnx.ml", &st);
    pb_int(&sub, 2, 3, &st);
    pb_msg(&model, 8, &sub, &st);
    pb_raw(out, model.data, model.len, &st);
    if (st != MR_OK) MR_ERR(err, st, "out of memory writing the ONNX model");
cleanup:
    mr_buf_free(&g);
    mr_buf_free(&model);
    mr_buf_free(&sub);
    return st;
}
