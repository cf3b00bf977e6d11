/* The model object: tree storage, accessors, feature importance, the
 * versioned binary file (docs/gbdt.md "Model file") and the JSON dump. */
#include "gbdt_int.h"

#include <float.h>
#include <stdlib.h>

/* ---- model object ---------------------------------------------------------------- */

mr_status mr__model_new(size_t n_features, mr_gbdt_model **out, mr_error *err)
{
    mr_gbdt_model *m = mr_calloc(1, sizeof(*m));
    if (!m) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    m->n_features = n_features;
    m->names = mr_calloc(n_features ? n_features : 1, sizeof(char *));
    m->kind = mr_calloc(n_features ? n_features : 1, 1);
    m->best_iteration = -1;
    if (!m->names || !m->kind) {
        mr_gbdt_model_free(m);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    *out = m;
    return MR_OK;
}

void mr_gbdt_model_free(mr_gbdt_model *m)
{
    if (!m) return;
    for (size_t j = 0; m->names && j < m->n_features; j++) mr_free(m->names[j]);
    mr_free(m->names);
    mr_free(m->kind);
    for (size_t i = 0; i < m->n_trees; i++) mr__tree_deinit(&m->trees[i]);
    mr_free(m->trees);
    mr_free(m->init_score);
    mr_free(m->params_text);
    mr_free(m);
}

static mr_status grow_trees(mr_gbdt_model *m)
{
    if (m->n_trees < m->cap_trees) return MR_OK;
    size_t cap = m->cap_trees ? m->cap_trees * 2 : 64;
    mr__tree *t = mr_realloc(m->trees, cap * sizeof(mr__tree));
    if (!t) return MR_E_NOMEM;
    m->trees = t;
    m->cap_trees = cap;
    return MR_OK;
}

/* An exact-size copy of a grown tree. */
static mr_status tree_copy(mr__tree *dst, const mr__tree *src)
{
    if (mr__tree_alloc(dst, src->n_leaves) != MR_OK) return MR_E_NOMEM;
    int ni = src->n_leaves - 1, nl = src->n_leaves;
    dst->n_leaves = nl;
    dst->n_cat = src->n_cat;
    if (ni > 0) {
        memcpy(dst->split_feature, src->split_feature, (size_t)ni * sizeof(int32_t));
        memcpy(dst->threshold_bin, src->threshold_bin, (size_t)ni * sizeof(uint16_t));
        memcpy(dst->threshold, src->threshold, (size_t)ni * sizeof(double));
        memcpy(dst->decision, src->decision, (size_t)ni);
        memcpy(dst->left, src->left, (size_t)ni * sizeof(int32_t));
        memcpy(dst->right, src->right, (size_t)ni * sizeof(int32_t));
        memcpy(dst->split_gain, src->split_gain, (size_t)ni * sizeof(double));
        memcpy(dst->internal_value, src->internal_value, (size_t)ni * sizeof(double));
        memcpy(dst->internal_count, src->internal_count, (size_t)ni * sizeof(int64_t));
        memcpy(dst->cat_bin_bits, src->cat_bin_bits, (size_t)src->n_cat * MR__GBDT_CAT_WORDS * sizeof(uint32_t));
        memcpy(dst->cat_begin, src->cat_begin, (size_t)(src->n_cat + 1) * sizeof(uint32_t));
    }
    memcpy(dst->leaf_value, src->leaf_value, (size_t)nl * sizeof(double));
    memcpy(dst->leaf_count, src->leaf_count, (size_t)nl * sizeof(int64_t));
    if (src->n_cat) {
        size_t w = src->cat_begin[src->n_cat];
        dst->cat_raw_bits = mr_malloc((w ? w : 1) * sizeof(uint32_t));
        if (!dst->cat_raw_bits) {
            mr__tree_deinit(dst);
            return MR_E_NOMEM;
        }
        memcpy(dst->cat_raw_bits, src->cat_raw_bits, w * sizeof(uint32_t));
        dst->cat_raw_cap = w;
    }
    return MR_OK;
}

mr_status mr__model_push_tree(mr_gbdt_model *m, mr__tree *t, mr_error *err)
{
    if (grow_trees(m) != MR_OK || tree_copy(&m->trees[m->n_trees], t) != MR_OK)
        return MR_ERR(err, MR_E_NOMEM, "out of memory storing tree %zu", m->n_trees);
    m->n_trees++;
    return MR_OK;
}

mr_gbdt_objective mr_gbdt_model_objective(const mr_gbdt_model *m) { return m->objective; }
int mr_gbdt_model_num_class(const mr_gbdt_model *m) { return m->num_class; }
int mr_gbdt_model_num_iterations(const mr_gbdt_model *m)
{
    return (int)(m->n_trees / (size_t)(m->num_tree_per_iteration > 0 ? m->num_tree_per_iteration : 1));
}
int mr_gbdt_model_best_iteration(const mr_gbdt_model *m) { return m->best_iteration; }
size_t mr_gbdt_model_num_trees(const mr_gbdt_model *m) { return m->n_trees; }
size_t mr_gbdt_model_num_features(const mr_gbdt_model *m) { return m->n_features; }
const char *mr_gbdt_model_feature_name(const mr_gbdt_model *m, size_t j)
{
    return j < m->n_features ? m->names[j] : NULL;
}
int mr_gbdt_model_feature_is_categorical(const mr_gbdt_model *m, size_t j)
{
    return j < m->n_features && m->kind[j] == MR__FEAT_CATEGORICAL;
}
int mr_gbdt_model_tree_leaves(const mr_gbdt_model *m, size_t tree)
{
    return tree < m->n_trees ? m->trees[tree].n_leaves : 0;
}

void mr_gbdt_model_importance(const mr_gbdt_model *m, mr_gbdt_importance kind, double *out)
{
    for (size_t j = 0; j < m->n_features; j++) out[j] = 0;
    for (size_t t = 0; t < m->n_trees; t++) {
        const mr__tree *tr = &m->trees[t];
        for (int i = 0; i < tr->n_leaves - 1; i++)
            out[tr->split_feature[i]] += kind == MR_GBDT_IMPORTANCE_GAIN ? tr->split_gain[i] : 1.0;
    }
}

/* ---- binary format ---------------------------------------------------------------- */

static const char MODEL_MAGIC[8] = {'M', 'R', 'G', 'B', 'M', 'O', 'D', 0};
#define MODEL_VERSION 1u

mr_status mr_gbdt_model_to_bytes(const mr_gbdt_model *m, mr_buf *out, mr_error *err)
{
    size_t start = out->len;
    mr_status st = mr_buf_append(out, MODEL_MAGIC, 8);
#define PUT(call)                        \
    do {                                 \
        if (st == MR_OK) st = (call);    \
    } while (0)
    PUT(mr_buf_put_u32(out, MODEL_VERSION));
    PUT(mr_buf_put_u32(out, (uint32_t)m->objective));
    PUT(mr_buf_put_u32(out, (uint32_t)m->num_class));
    PUT(mr_buf_put_u32(out, (uint32_t)m->num_tree_per_iteration));
    PUT(mr_buf_put_u32(out, (uint32_t)(int32_t)m->best_iteration));
    PUT(mr_buf_put_f64(out, m->alpha));
    for (int c = 0; c < m->num_tree_per_iteration; c++) PUT(mr_buf_put_f64(out, m->init_score[c]));
    PUT(mr_buf_put_u32(out, (uint32_t)m->n_features));
    for (size_t j = 0; j < m->n_features; j++) {
        PUT(mr_buf_put_str(out, m->names[j]));
        PUT(mr_buf_put_u8(out, m->kind[j]));
    }
    PUT(mr_buf_put_str(out, m->params_text));
    PUT(mr_buf_put_u64(out, m->n_trees));
    for (size_t t = 0; t < m->n_trees && st == MR_OK; t++) {
        const mr__tree *tr = &m->trees[t];
        PUT(mr_buf_put_u32(out, (uint32_t)tr->n_leaves));
        PUT(mr_buf_put_u32(out, (uint32_t)tr->n_cat));
        for (int i = 0; i < tr->n_leaves - 1; i++) {
            PUT(mr_buf_put_u32(out, (uint32_t)tr->split_feature[i]));
            PUT(mr_buf_put_u8(out, tr->decision[i]));
            PUT(mr_buf_put_u16(out, tr->threshold_bin[i]));
            PUT(mr_buf_put_f64(out, tr->threshold[i]));
            PUT(mr_buf_put_u32(out, (uint32_t)tr->left[i]));
            PUT(mr_buf_put_u32(out, (uint32_t)tr->right[i]));
            PUT(mr_buf_put_f64(out, tr->split_gain[i]));
            PUT(mr_buf_put_f64(out, tr->internal_value[i]));
            PUT(mr_buf_put_u64(out, (uint64_t)tr->internal_count[i]));
        }
        for (int l = 0; l < tr->n_leaves; l++) {
            PUT(mr_buf_put_f64(out, tr->leaf_value[l]));
            PUT(mr_buf_put_u64(out, (uint64_t)tr->leaf_count[l]));
        }
        if (tr->n_cat) {
            for (int c = 0; c <= tr->n_cat; c++) PUT(mr_buf_put_u32(out, tr->cat_begin[c]));
            for (uint32_t w = 0; w < tr->cat_begin[tr->n_cat]; w++) PUT(mr_buf_put_u32(out, tr->cat_raw_bits[w]));
            for (int w = 0; w < tr->n_cat * MR__GBDT_CAT_WORDS; w++) PUT(mr_buf_put_u32(out, tr->cat_bin_bits[w]));
        }
    }
    if (st == MR_OK) {
        mr_hash128 h = mr_hash_bytes(out->data + start, out->len - start);
        PUT(mr_buf_put_u64(out, h.hi));
        PUT(mr_buf_put_u64(out, h.lo));
    }
#undef PUT
    if (st != MR_OK) return MR_ERR(err, st, "cannot serialise model: %s", mr_status_str(st));
    return MR_OK;
}

static int tree_valid(const mr__tree *t, size_t n_features, const uint8_t *kind)
{
    int ni = t->n_leaves - 1;
    /* every node but the root is some node's child exactly once; every leaf likewise */
    for (int i = 0; i < ni; i++) {
        if (t->split_feature[i] < 0 || (size_t)t->split_feature[i] >= n_features) return 0;
        int cat = (t->decision[i] & MR__DT_CATEGORICAL) != 0;
        if (cat != (kind[t->split_feature[i]] == MR__FEAT_CATEGORICAL)) return 0;
        if (cat && t->threshold_bin[i] >= t->n_cat) return 0;
        int32_t ch[2] = {t->left[i], t->right[i]};
        for (int k = 0; k < 2; k++) {
            if (ch[k] >= 0 && (ch[k] <= i || ch[k] >= ni)) return 0; /* children come later: no cycles */
            if (ch[k] < 0 && ~ch[k] >= t->n_leaves) return 0;
        }
    }
    for (int c = 0; c < t->n_cat; c++)
        if (t->cat_begin[c] > t->cat_begin[c + 1]) return 0;
    return 1;
}

mr_status mr_gbdt_model_from_bytes(const void *data, size_t len, mr_gbdt_model **out, mr_error *err)
{
    *out = NULL;
    if (len < 8 + 16 || memcmp(data, MODEL_MAGIC, 8))
        return MR_ERR(err, MR_E_CORRUPT, "not a millrace gbdt model (bad magic)");
    mr_reader r = {.p = data, .len = len, .pos = len - 16};
    mr_hash128 h = mr_hash_bytes(data, len - 16);
    if (mr_reader_u64(&r) != h.hi || mr_reader_u64(&r) != h.lo)
        return MR_ERR(err, MR_E_CORRUPT, "model checksum mismatch (truncated or modified file)");
    r = (mr_reader){.p = data, .len = len - 16, .pos = 8};
    uint32_t version = mr_reader_u32(&r);
    if (version != MODEL_VERSION)
        return MR_ERR(err, MR_E_CORRUPT, "model format version %u is not supported (this build reads %u)", version,
                      MODEL_VERSION);
    uint32_t obj = mr_reader_u32(&r), num_class = mr_reader_u32(&r), tpi = mr_reader_u32(&r);
    int32_t best = (int32_t)mr_reader_u32(&r);
    double alpha = mr_reader_f64(&r);
    if (r.bad || obj > MR_GBDT_HUBER || tpi < 1 || tpi > 1000000 || num_class != tpi)
        return MR_ERR(err, MR_E_CORRUPT, "model header is invalid");
    double *init = mr_calloc(tpi, sizeof(double));
    if (!init) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (uint32_t c = 0; c < tpi; c++) init[c] = mr_reader_f64(&r);
    uint32_t nf = mr_reader_u32(&r);
    mr_gbdt_model *m = NULL;
    if (r.bad || nf == 0 || nf > 65535) {
        mr_free(init);
        return MR_ERR(err, MR_E_CORRUPT, "model header is invalid");
    }
    mr_status st = mr__model_new(nf, &m, err);
    if (st != MR_OK) {
        mr_free(init);
        return st;
    }
    m->objective = (mr_gbdt_objective)obj;
    m->num_class = (int)num_class;
    m->num_tree_per_iteration = (int)tpi;
    m->best_iteration = best;
    m->alpha = alpha;
    m->init_score = init;
    for (size_t j = 0; j < nf; j++) {
        m->names[j] = mr_reader_str(&r);
        m->kind[j] = mr_reader_u8(&r);
        if (r.bad || m->kind[j] > 1) goto corrupt;
        if (!m->names[j]) goto nomem; /* mr_reader_str: NULL without r.bad is out of memory */
    }
    m->params_text = mr_reader_str(&r);
    uint64_t nt = mr_reader_u64(&r);
    if (r.bad || nt > len) goto corrupt;
    if (!m->params_text) goto nomem;
    for (uint64_t t = 0; t < nt; t++) {
        uint32_t nl = mr_reader_u32(&r), ncat = mr_reader_u32(&r);
        if (r.bad || nl < 1 || nl > 65536 || ncat >= nl) goto corrupt;
        if (grow_trees(m) != MR_OK) goto nomem;
        mr__tree *tr = &m->trees[m->n_trees];
        if (mr__tree_alloc(tr, (int)nl) != MR_OK) goto nomem;
        m->n_trees++;
        tr->n_leaves = (int32_t)nl;
        tr->n_cat = (int32_t)ncat;
        for (uint32_t i = 0; i + 1 < nl; i++) {
            tr->split_feature[i] = (int32_t)mr_reader_u32(&r);
            tr->decision[i] = mr_reader_u8(&r);
            tr->threshold_bin[i] = mr_reader_u16(&r);
            tr->threshold[i] = mr_reader_f64(&r);
            tr->left[i] = (int32_t)mr_reader_u32(&r);
            tr->right[i] = (int32_t)mr_reader_u32(&r);
            tr->split_gain[i] = mr_reader_f64(&r);
            tr->internal_value[i] = mr_reader_f64(&r);
            tr->internal_count[i] = (int64_t)mr_reader_u64(&r);
        }
        for (uint32_t l = 0; l < nl; l++) {
            tr->leaf_value[l] = mr_reader_f64(&r);
            tr->leaf_count[l] = (int64_t)mr_reader_u64(&r);
        }
        if (ncat) {
            for (uint32_t c = 0; c <= ncat; c++) tr->cat_begin[c] = mr_reader_u32(&r);
            uint32_t w = tr->cat_begin[ncat];
            if (r.bad || w > r.len - r.pos) goto corrupt;
            if (!(tr->cat_raw_bits = mr_malloc((w ? w : 1) * sizeof(uint32_t)))) goto nomem;
            tr->cat_raw_cap = w;
            for (uint32_t k = 0; k < w; k++) tr->cat_raw_bits[k] = mr_reader_u32(&r);
            for (uint32_t k = 0; k < ncat * MR__GBDT_CAT_WORDS; k++) tr->cat_bin_bits[k] = mr_reader_u32(&r);
        }
        if (r.bad || !tree_valid(tr, nf, m->kind)) goto corrupt;
    }
    if (r.pos != r.len) goto corrupt;
    *out = m;
    return MR_OK;
corrupt: {
    size_t pos = r.pos;
    mr_gbdt_model_free(m);
    return MR_ERR(err, MR_E_CORRUPT, "model file is corrupt near byte %zu", pos);
}
nomem:
    mr_gbdt_model_free(m);
    return MR_ERR(err, MR_E_NOMEM, "out of memory loading model");
}

mr_status mr_gbdt_model_save(const mr_gbdt_model *m, const char *path, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    b.limit = (size_t)1 << 40;
    mr_status st = mr_gbdt_model_to_bytes(m, &b, err);
    if (st == MR_OK) st = mr_fs_write_atomic(path, b.data, b.len, err);
    mr_buf_free(&b);
    return st;
}

mr_status mr_gbdt_model_load(const char *path, mr_gbdt_model **out, mr_error *err)
{
    char *data = NULL;
    size_t len = 0;
    mr_status st = mr_fs_read_file(path, (size_t)1 << 40, &data, &len, err);
    if (st != MR_OK) return st;
    st = mr_gbdt_model_from_bytes(data, len, out, err);
    if (st != MR_OK) mr_error_at(err, path, 0, 0);
    mr_free(data);
    return st;
}

/* ---- JSON dump -------------------------------------------------------------------- */

static mr_status json_num(mr_buf *b, double v)
{
    if (v != v) return mr_buf_puts(b, "null");
    if (isinf(v)) v = v > 0 ? DBL_MAX : -DBL_MAX;
    return mr_buf_printf(b, "%.17g", v);
}

static mr_status json_node(const mr_gbdt_model *m, const mr__tree *t, int32_t id, mr_buf *b)
{
    mr_status st;
    if (id < 0) {
        int l = ~id;
        st = mr_buf_printf(b, "{\"leaf\":%d,\"value\":", l);
        if (st == MR_OK) st = json_num(b, t->leaf_value[l]);
        if (st == MR_OK) st = mr_buf_printf(b, ",\"count\":%lld}", (long long)t->leaf_count[l]);
        return st;
    }
    int f = t->split_feature[id];
    st = mr_buf_printf(b, "{\"node\":%d,\"feature\":%d,\"feature_name\":", id, f);
    if (st == MR_OK) st = mr_buf_json_str(b, m->names[f]);
    if (st == MR_OK && (t->decision[id] & MR__DT_CATEGORICAL)) {
        int c = t->threshold_bin[id];
        st = mr_buf_puts(b, ",\"decision\":\"in\",\"categories\":[");
        int first = 1;
        for (uint32_t w = t->cat_begin[c]; w < t->cat_begin[c + 1] && st == MR_OK; w++)
            for (int k = 0; k < 32 && st == MR_OK; k++)
                if ((t->cat_raw_bits[w] >> k) & 1) {
                    st = mr_buf_printf(b, "%s%u", first ? "" : ",", (unsigned)((w - t->cat_begin[c]) * 32 + (uint32_t)k));
                    first = 0;
                }
        if (st == MR_OK) st = mr_buf_puts(b, "]");
    } else if (st == MR_OK) {
        st = mr_buf_puts(b, ",\"decision\":\"<=\",\"threshold\":");
        if (st == MR_OK) st = json_num(b, t->threshold[id]);
        if (st == MR_OK) st = mr_buf_printf(b, ",\"threshold_bin\":%u", (unsigned)t->threshold_bin[id]);
    }
    if (st == MR_OK)
        st = mr_buf_printf(b, ",\"default_left\":%s,\"gain\":", (t->decision[id] & MR__DT_DEFAULT_LEFT) ? "true" : "false");
    if (st == MR_OK) st = json_num(b, t->split_gain[id]);
    if (st == MR_OK) st = mr_buf_puts(b, ",\"value\":");
    if (st == MR_OK) st = json_num(b, t->internal_value[id]);
    if (st == MR_OK) st = mr_buf_printf(b, ",\"count\":%lld,\"left\":", (long long)t->internal_count[id]);
    if (st == MR_OK) st = json_node(m, t, t->left[id], b);
    if (st == MR_OK) st = mr_buf_puts(b, ",\"right\":");
    if (st == MR_OK) st = json_node(m, t, t->right[id], b);
    if (st == MR_OK) st = mr_buf_puts(b, "}");
    return st;
}

mr_status mr_gbdt_model_dump_json(const mr_gbdt_model *m, mr_buf *b, mr_error *err)
{
    mr_status st = mr_buf_printf(b, "{\"format\":\"millrace-gbdt\",\"version\":%u,\"objective\":\"%s\",\"num_class\":%d,"
                                    "\"num_tree_per_iteration\":%d,\"best_iteration\":%d,\"init_score\":[",
                                 MODEL_VERSION, mr_gbdt_objective_name(m->objective), m->num_class,
                                 m->num_tree_per_iteration, m->best_iteration);
    for (int c = 0; c < m->num_tree_per_iteration && st == MR_OK; c++) {
        if (c) st = mr_buf_puts(b, ",");
        if (st == MR_OK) st = json_num(b, m->init_score[c]);
    }
    if (st == MR_OK) st = mr_buf_puts(b, "],\"params\":{");
    /* params_text: name=value lines */
    const char *s = m->params_text ? m->params_text : "";
    int first = 1;
    while (*s && st == MR_OK) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (eq) {
            char *k = mr_strndup(s, (size_t)(eq - s)), *v = mr_strndup(eq + 1, len - (size_t)(eq - s) - 1);
            if (!k || !v) st = MR_E_NOMEM;
            if (st == MR_OK && !first) st = mr_buf_puts(b, ",");
            if (st == MR_OK) st = mr_buf_json_str(b, k);
            if (st == MR_OK) st = mr_buf_puts(b, ":");
            if (st == MR_OK) st = mr_buf_json_str(b, v);
            mr_free(k);
            mr_free(v);
            first = 0;
        }
        s += len + (nl ? 1 : 0);
    }
    double *imp_split = mr_calloc(m->n_features, sizeof(double)), *imp_gain = mr_calloc(m->n_features, sizeof(double));
    if (!imp_split || !imp_gain) st = MR_E_NOMEM;
    if (st == MR_OK) {
        mr_gbdt_model_importance(m, MR_GBDT_IMPORTANCE_SPLIT, imp_split);
        mr_gbdt_model_importance(m, MR_GBDT_IMPORTANCE_GAIN, imp_gain);
        st = mr_buf_puts(b, "},\"features\":[");
    }
    for (size_t j = 0; j < m->n_features && st == MR_OK; j++) {
        st = mr_buf_printf(b, "%s{\"name\":", j ? "," : "");
        if (st == MR_OK) st = mr_buf_json_str(b, m->names[j]);
        if (st == MR_OK)
            st = mr_buf_printf(b, ",\"type\":\"%s\",\"split_count\":%.0f,\"split_gain\":",
                               m->kind[j] == MR__FEAT_CATEGORICAL ? "categorical" : "numeric", imp_split[j]);
        if (st == MR_OK) st = json_num(b, imp_gain[j]);
        if (st == MR_OK) st = mr_buf_puts(b, "}");
    }
    mr_free(imp_split);
    mr_free(imp_gain);
    if (st == MR_OK) st = mr_buf_puts(b, "],\"trees\":[");
    for (size_t t = 0; t < m->n_trees && st == MR_OK; t++) {
        const mr__tree *tr = &m->trees[t];
        st = mr_buf_printf(b, "%s{\"tree\":%zu,\"class\":%d,\"num_leaves\":%d,\"root\":", t ? "," : "", t,
                           (int)(t % (size_t)m->num_tree_per_iteration), tr->n_leaves);
        if (st == MR_OK) st = json_node(m, tr, tr->n_leaves > 1 ? 0 : ~0, b);
        if (st == MR_OK) st = mr_buf_puts(b, "}");
    }
    if (st == MR_OK) st = mr_buf_puts(b, "]}\n");
    if (st != MR_OK) return MR_ERR(err, st, "cannot write model JSON: %s", mr_status_str(st));
    return MR_OK;
}
