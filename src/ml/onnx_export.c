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
static void value_info(mr_buf *g, unsigned field, const char *name, int64_t cols, mr_status *st)
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
    pb_int(&tt, 1, 1 /* FLOAT */, st);
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

/* TreeEnsembleRegressor "input" -> outname, appended to graph g. */
static mr_status gbdt_nodes(const mr_gbdt_model *m, mr_buf *g, const char *outname, mr_error *err)
{
    mr_status st = MR_OK;
    size_t total = 0, n_leaves = 0;
    for (size_t t = 0; t < m->n_trees; t++) {
        const mr__tree *tr = &m->trees[t];
        for (int i = 0; i < tr->n_leaves - 1; i++)
            if (tr->decision[i] & MR__DT_CATEGORICAL)
                return MR_ERR(err, MR_E_SCHEMA,
                              "tree %zu splits categorical feature '%s': categorical splits cannot be expressed in ONNX",
                              t, m->names[tr->split_feature[i]]);
        total += (size_t)(tr->n_leaves > 1 ? 2 * tr->n_leaves - 1 : 1);
        n_leaves += (size_t)tr->n_leaves;
    }
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
            lw[l] = (float)tr->leaf_value[j];
        }
    }
    float base = (float)m->init_score[0];
    node_begin(&node, "TreeEnsembleRegressor", "ai.onnx.ml", "input", outname, &st);
    attr_string(&node, "aggregate_function", "SUM", &st);
    attr_floats(&node, "base_values", &base, 1, &st);
    attr_int(&node, "n_targets", 1, &st);
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
static mr_status linear_nodes(const mr_linear_model *m, mr_buf *g, const char *outname, mr_error *err)
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
    node_begin(&node, "Imputer", "ai.onnx.ml", "input", "imputed", &st);
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

/* The first fitted column whose program cannot be written as ONNX ops (this
 * exporter writes none yet): NULL when there is no transform. */
static mr_status check_features(const mr_features *f, mr_error *err)
{
    if (!f) return MR_OK;
    static const char *const op_names[] = {"?", "impute", "standardize", "minmax", "log1p", "clip", "bucketize", "impute"};
    static const char *const enc_names[] = {"numeric", "onehot", "ordinal", "hash", "target_encode"};
    for (size_t c = 0; c < f->n_cols; c++) {
        const ft_col *col = &f->cols[c];
        if (col->n_ops > 0) {
            uint8_t k = col->ops[0].kind;
            return MR_ERR(err, MR_E_SCHEMA,
                          "features transform: column '%s' (%s) cannot be expressed in ONNX; export a bundle "
                          "packaged without a features transform",
                          col->name, k <= FT_OP_MAX ? op_names[k] : "?");
        }
        if (col->enc != FT_ENC_NONE)
            return MR_ERR(err, MR_E_SCHEMA,
                          "features transform: column '%s' (%s) cannot be expressed in ONNX; export a bundle "
                          "packaged without a features transform",
                          col->name, col->enc <= FT_ENC_MAX ? enc_names[col->enc] : "?");
    }
    return MR_ERR(err, MR_E_SCHEMA,
                  "features transform: column selection cannot be expressed in ONNX yet; export a bundle packaged "
                  "without a features transform");
}

mr_status mr_bundle_export_onnx(const mr_bundle *b, mr_buf *out, mr_error *err)
{
    const mr_model *m = mr_bundle_model(b);
    mr_status st = check_features(mr_bundle_features(b), err);
    if (st != MR_OK) return st;
    int sigmoid = 0;
    if (mr_model_kind_of(m) == MR_MODEL_GBDT) {
        const mr_gbdt_model *gm = mr_model_gbdt(m);
        if (gm->objective == MR_GBDT_MULTICLASS || gm->num_tree_per_iteration != 1)
            return MR_ERR(err, MR_E_SCHEMA, "objective '%s' cannot be exported to ONNX (binary and regression only)",
                          mr_gbdt_objective_name(gm->objective));
        sigmoid = gm->objective == MR_GBDT_BINARY;
    } else {
        sigmoid = mr_linear_model_objective(mr_model_linear(m)) == MR_LINEAR_LOGISTIC;
    }
    const char *raw_out = sigmoid ? "margin" : "score";
    mr_buf g, model, sub;
    mr_buf_init(&g);
    mr_buf_init(&model);
    mr_buf_init(&sub);
    if (mr_model_kind_of(m) == MR_MODEL_GBDT)
        st = gbdt_nodes(mr_model_gbdt(m), &g, raw_out, err);
    else
        st = linear_nodes(mr_model_linear(m), &g, raw_out, err);
    if (st != MR_OK) goto cleanup;
    if (sigmoid) {
        node_begin(&sub, "Sigmoid", NULL, "margin", "score", &st);
        pb_msg(&g, 1, &sub, &st);
    }
    pb_str(&g, 2, "millrace", &st);
    value_info(&g, 11, "input", (int64_t)mr_model_num_features(m), &st);
    value_info(&g, 12, "score", 1, &st);
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
