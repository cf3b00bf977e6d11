/* The model handle: gbdt or linear behind one API for training from tables,
 * loading by magic number, predicting on tables and describing a model. */
#include "millrace/model.h"
#include "millrace/gbdt.h"
#include "millrace/linear.h"
#include "millrace/metrics.h"
#include "millrace/value.h"

#include <math.h>
#include <string.h>

#include <jansson.h>

#define SMOKE_ROWS 10000
#define SMOKE_ROUNDS 5

struct mr_model {
    mr_model_kind kind;
    mr_gbdt_model *gb;
    mr_gbdt_predictor *pred; /* prepared once: prediction re-initialises nothing */
    mr_linear_model *lin;
};

void mr_train_opts_init(mr_train_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->kind = "gbdt";
    o->fast_metrics = 1;
}

void mr_model_free(mr_model *m)
{
    if (!m) return;
    mr_gbdt_predictor_free(m->pred);
    mr_gbdt_model_free(m->gb);
    mr_linear_model_free(m->lin);
    mr_free(m);
}

static mr_status wrap_gbdt(mr_gbdt_model *gb, mr_model **out, mr_error *err)
{
    mr_model *m = mr_calloc(1, sizeof(*m));
    if (!m) {
        mr_gbdt_model_free(gb);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    m->kind = MR_MODEL_GBDT;
    m->gb = gb;
    mr_status rc = mr_gbdt_predictor_new(gb, 0, &m->pred, err);
    if (rc != MR_OK) {
        mr_model_free(m);
        return rc;
    }
    *out = m;
    return MR_OK;
}

static mr_status wrap_linear(mr_linear_model *lin, mr_model **out, mr_error *err)
{
    mr_model *m = mr_calloc(1, sizeof(*m));
    if (!m) {
        mr_linear_model_free(lin);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    m->kind = MR_MODEL_LINEAR;
    m->lin = lin;
    *out = m;
    return MR_OK;
}

const mr_gbdt_model *mr_model_gbdt(const mr_model *m) { return m->gb; }
const mr_linear_model *mr_model_linear(const mr_model *m) { return m->lin; }

mr_model_kind mr_model_kind_of(const mr_model *m) { return m->kind; }
const char *mr_model_kind_name(const mr_model *m) { return m->kind == MR_MODEL_GBDT ? "gbdt" : "linear"; }

size_t mr_model_num_outputs(const mr_model *m)
{
    return m->kind == MR_MODEL_GBDT ? (size_t)mr_gbdt_model_num_class(m->gb) : 1;
}

size_t mr_model_num_features(const mr_model *m)
{
    return m->kind == MR_MODEL_GBDT ? mr_gbdt_model_num_features(m->gb) : mr_linear_model_num_features(m->lin);
}

const char *mr_model_feature_name(const mr_model *m, size_t j)
{
    return m->kind == MR_MODEL_GBDT ? mr_gbdt_model_feature_name(m->gb, j) : mr_linear_model_feature_name(m->lin, j);
}

const char *mr_model_objective_name(const mr_model *m)
{
    if (m->kind == MR_MODEL_GBDT) return mr_gbdt_objective_name(mr_gbdt_model_objective(m->gb));
    return mr_linear_model_objective(m->lin) == MR_LINEAR_LOGISTIC ? "binary" : "regression";
}

/* ---- files ----------------------------------------------------------------*/

mr_status mr_model_from_bytes(const void *data, size_t len, mr_model **out, mr_error *err)
{
    if (len >= 8 && !memcmp(data, "MRGBMOD", 7)) {
        mr_gbdt_model *gb = NULL;
        mr_status rc = mr_gbdt_model_from_bytes(data, len, &gb, err);
        return rc == MR_OK ? wrap_gbdt(gb, out, err) : rc;
    }
    if (len >= 8 && !memcmp(data, "MRLINMOD", 8)) {
        mr_linear_model *lin = NULL;
        mr_status rc = mr_linear_model_from_bytes(data, len, &lin, err);
        return rc == MR_OK ? wrap_linear(lin, out, err) : rc;
    }
    return MR_ERR(err, MR_E_CORRUPT, "not a millrace model file (expected magic MRGBMOD or MRLINMOD)");
}

mr_status mr_model_load(const char *path, mr_model **out, mr_error *err)
{
    char *data = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, (size_t)4 << 30, &data, &len, err);
    if (rc != MR_OK) return rc;
    rc = mr_model_from_bytes(data, len, out, err);
    if (rc != MR_OK) mr_error_at(err, path, 0, 0);
    mr_free(data);
    return rc;
}

mr_status mr_model_to_bytes(const mr_model *m, mr_buf *out, mr_error *err)
{
    return m->kind == MR_MODEL_GBDT ? mr_gbdt_model_to_bytes(m->gb, out, err) : mr_linear_model_to_bytes(m->lin, out, err);
}

mr_status mr_model_save(const mr_model *m, const char *path, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    b.limit = (size_t)4 << 30;
    mr_status rc = mr_model_to_bytes(m, &b, err);
    if (rc == MR_OK) rc = mr_fs_write_atomic(path, b.data, b.len, err);
    mr_buf_free(&b);
    return rc;
}

/* ---- matrices from tables -------------------------------------------------*/

static mr_status column_to_floats(const mr_column *c, float *dst, mr_error *err)
{
    for (size_t i = 0; i < c->n; i++) {
        if (mr_column_is_null(c, i)) {
            dst[i] = NAN;
            continue;
        }
        switch (c->type) {
        case MR_T_FLOAT64: dst[i] = (float)((const double *)c->data)[i]; break;
        case MR_T_FLOAT32: dst[i] = ((const float *)c->data)[i]; break;
        case MR_T_INT64: dst[i] = (float)((const int64_t *)c->data)[i]; break;
        case MR_T_BOOL: dst[i] = ((const uint8_t *)c->data)[i] ? 1.0f : 0.0f; break;
        case MR_T_DATE: dst[i] = (float)((const int32_t *)c->data)[i]; break;
        case MR_T_DECIMAL: dst[i] = (float)mr_decimal_to_f64(((const int64_t *)c->data)[i], c->kind.scale); break;
        default: {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "column '%s' has type %s; models take numeric and bool columns",
                                  c->name, mr_dtype_name(c->type));
            mr_error_key(err, c->name);
            mr_error_hint(err, "encode strings with the features op (ordinal, onehot, hash) or exclude the column");
            return rc;
        }
        }
    }
    return MR_OK;
}

static const mr_column *find_column(const mr_table *t, size_t hint, const char *name, const char *role, mr_error *err)
{
    const mr_column *c = mr_table_column_hint(t, hint, name);
    if (c) return c;
    MR_ERR(err, MR_E_NOT_FOUND, "%s column '%s' is not in the data", role, name);
    mr_error_key(err, name);
    const char **cands = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof(*cands));
    for (size_t i = 0; cands && i < t->n_cols; i++) cands[i] = t->cols[i]->name;
    const char *best = cands ? mr_closest(name, cands, t->n_cols) : NULL;
    if (best) mr_error_hint(err, "did you mean '%s'?", best);
    mr_free(cands);
    return NULL;
}

mr_status mr_model_matrix(const mr_model *m, const mr_table *t, float **x_out, mr_error *err)
{
    size_t nf = mr_model_num_features(m), n = t->n_rows;
    if (n && nf > SIZE_MAX / n / sizeof(float)) return MR_ERR(err, MR_E_LIMIT, "matrix too large");
    float *x = mr_malloc(((nf * n) > 0 ? nf * n : 1) * sizeof(float));
    if (!x) return MR_ERR(err, MR_E_NOMEM, "out of memory for a %zu x %zu matrix", n, nf);
    for (size_t j = 0; j < nf; j++) {
        const mr_column *c = find_column(t, j, mr_model_feature_name(m, j), "feature", err);
        mr_status rc = c ? column_to_floats(c, x + j * n, err) : MR_E_NOT_FOUND;
        if (rc != MR_OK) {
            mr_free(x);
            return rc;
        }
    }
    *x_out = x;
    return MR_OK;
}

/* ---- training -------------------------------------------------------------*/

static int in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(list[k], name)) return 1;
    return 0;
}

/* Feature names: the given list, or every column but label and exclude. */
static mr_status pick_features(const mr_table *t, const mr_train_opts *o, const char ***names_out, size_t *n_out,
                               mr_error *err)
{
    const char **names = mr_calloc(t->n_cols + o->n_features + 1, sizeof(*names));
    size_t n = 0;
    if (!names) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (o->features) {
        for (size_t k = 0; k < o->n_features; k++) {
            if (!find_column(t, SIZE_MAX, o->features[k], "feature", err)) {
                mr_free(names);
                return MR_E_NOT_FOUND;
            }
            names[n++] = o->features[k];
        }
    } else {
        for (size_t i = 0; i < t->n_cols; i++) {
            const char *nm = t->cols[i]->name;
            if (!strcmp(nm, o->label) || in_list(nm, o->exclude, o->n_exclude)) continue;
            names[n++] = nm;
        }
    }
    for (size_t k = 0; k < o->n_exclude; k++)
        if (!find_column(t, SIZE_MAX, o->exclude[k], "excluded", err)) {
            mr_free(names);
            return MR_E_NOT_FOUND;
        }
    if (!n) {
        mr_free(names);
        return MR_ERR(err, MR_E_INVALID_ARG, "no feature columns: the data has only the label");
    }
    *names_out = names;
    *n_out = n;
    return MR_OK;
}

/* The per-round bridge to the caller, with the fast tier: the evaluate op's
 * core metrics computed by the metrics library on the validation scores. */
typedef struct round_bridge {
    mr_train_opts *o;
    mr_gbdt_objective obj;
    const double *y; /* labels of the validation rows (NULL: no fast tier) */
    size_t ny;
    double *buf;     /* ny * K probabilities */
} round_bridge;

#define MAX_FAST 2

/* Fast-tier metrics of one round into names/vals; returns how many. */
static int fast_tier(round_bridge *b, const mr_gbdt_round_info *info, const char **names, double *vals)
{
    size_t n = info->n_valid, K = (size_t)info->n_outputs;
    const double *s = info->valid_score;
    mr_metric_data d;
    int m = 0;
    if (b->obj == MR_GBDT_BINARY) {
        /* AUC on the margins (the sigmoid keeps their order and cannot
         * create ties), logloss on probabilities. */
        double v = NAN;
        mr_metric_data_binary(&d, b->y, s, NULL, n);
        if (mr_metric_roc_auc(&d, &v, NULL) != MR_OK) v = NAN;
        names[m] = "fast.auc";
        vals[m++] = v;
        for (size_t i = 0; i < n; i++) b->buf[i] = 1.0 / (1.0 + exp(-s[i]));
        mr_metric_data_binary(&d, b->y, b->buf, NULL, n);
        if (mr_metric_logloss(&d, &v, NULL) != MR_OK) v = NAN;
        names[m] = "fast.logloss";
        vals[m++] = v;
    } else if (b->obj == MR_GBDT_MULTICLASS) {
        for (size_t i = 0; i < n; i++) {
            const double *r = s + i * K;
            double *o = b->buf + i * K, mx = r[0], sum = 0;
            for (size_t c = 1; c < K; c++) mx = r[c] > mx ? r[c] : mx;
            for (size_t c = 0; c < K; c++) sum += (o[c] = exp(r[c] - mx));
            for (size_t c = 0; c < K; c++) o[c] /= sum;
        }
        mr_multiclass_scores ms;
        mr_metric_data_multiclass(&d, b->y, b->buf, K, NULL, n);
        names[m] = "fast.logloss";
        vals[m++] = mr_metric_multiclass(&d, &ms, NULL, NULL) == MR_OK ? ms.logloss : NAN;
    } else {
        mr_regression_scores rs;
        mr_metric_data_regression(&d, b->y, s, NULL, n);
        names[m] = "fast.rmse";
        vals[m++] = mr_metric_regression(&d, &rs, NULL) == MR_OK ? rs.rmse : NAN;
    }
    return m;
}

static int gbdt_round(void *ctx, const mr_gbdt_round_info *info)
{
    round_bridge *b = ctx;
    const char *names[MR_GBDT_MAX_METRICS + MAX_FAST];
    double tr[MR_GBDT_MAX_METRICS + MAX_FAST], va[MR_GBDT_MAX_METRICS + MAX_FAST];
    int n = info->n_metrics;
    for (int k = 0; k < n; k++) {
        names[k] = mr_gbdt_metric_name(info->metric[k]);
        tr[k] = info->train_metric[k];
        va[k] = info->valid_metric[k];
    }
    if (b->y && info->valid_score && info->n_valid == b->ny) {
        double t0 = mr_now();
        int m = fast_tier(b, info, names + n, va + n);
        for (int k = 0; k < m; k++) tr[n + k] = NAN;
        n += m;
        b->o->fast_tier_seconds += mr_now() - t0;
    }
    if (!b->o->on_round) return 0;
    return b->o->on_round(b->o->on_round_ctx, info->iteration, n, names, tr, va, info->elapsed_s);
}

/* The label column as doubles (NULL on a missing value or a non-numeric
 * type: the binning reports those). */
static double *label_doubles(const mr_table *t, const char *label)
{
    const mr_column *c = mr_table_column(t, label);
    if (!c || c->type == MR_T_STRING) return NULL;
    double *y = mr_malloc((c->n ? c->n : 1) * sizeof(double));
    if (!y) return NULL;
    for (size_t i = 0; i < c->n; i++) {
        if (mr_column_is_null(c, i)) {
            mr_free(y);
            return NULL;
        }
        switch (c->type) {
        case MR_T_FLOAT64: y[i] = ((const double *)c->data)[i]; break;
        case MR_T_FLOAT32: y[i] = ((const float *)c->data)[i]; break;
        case MR_T_INT64: y[i] = (double)((const int64_t *)c->data)[i]; break;
        case MR_T_BOOL: y[i] = ((const uint8_t *)c->data)[i] ? 1.0 : 0.0; break;
        case MR_T_DECIMAL: y[i] = mr_decimal_to_f64(((const int64_t *)c->data)[i], c->kind.scale); break;
        default: mr_free(y); return NULL;
        }
        if (!isfinite(y[i])) {
            mr_free(y);
            return NULL;
        }
    }
    return y;
}

/* Key of a binned matrix: the data's content (the columns used), the
 * binning params, and for validation data the training key it is binned
 * against. */
/* The binned matrix's cache key: every feature column and the label (their
 * names, types and values), and every binning param. MR_E_NOMEM only. */
static mr_status bin_key(const mr_table *t, const char *const *cols, size_t n_cols, const char *label,
                         const mr_gbdt_params *p, const mr_train_opts *o, const char *ref_key, char *hex)
{
    mr_table view = {.n_rows = t->n_rows, .n_cols = 0, .cols = NULL};
    mr_column **picked = mr_malloc((n_cols + 1) * sizeof(*picked));
    if (!picked) return MR_E_NOMEM;
    for (size_t k = 0; k < n_cols; k++) {
        mr_column *c = mr_table_column(t, cols[k]);
        if (c) picked[view.n_cols++] = c;
    }
    mr_column *lab = label ? mr_table_column(t, label) : NULL;
    if (lab) picked[view.n_cols++] = lab;
    view.cols = picked;
    mr_hash128 data = mr_table_content_hash(&view);
    mr_free(picked);
    mr_buf b;
    mr_buf_init(&b);
    char dh[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(data, dh);
    mr_buf_printf(&b, "millrace-binned/1 data=%s max_bin=%d sample=%d seed=%llu cat=%s ref=%s", dh, p->max_bin,
                  p->bin_construct_sample_cnt, (unsigned long long)p->seed,
                  p->categorical_feature ? p->categorical_feature : "", ref_key ? ref_key : "");
    for (size_t k = 0; k < o->n_categorical; k++) mr_buf_printf(&b, ",%s", o->categorical[k]);
    mr_status rc = b.data ? MR_OK : MR_E_NOMEM;
    if (rc == MR_OK) mr_hash_hex(mr_hash_bytes(b.data, b.len), hex);
    mr_buf_free(&b);
    return rc;
}

/* Bins t (or loads the cached matrix). *hit tells which. */
static mr_status binned(const mr_table *t, const mr_gbdt_table_spec *spec, const mr_gbdt_data *ref, const char *ref_key,
                        const mr_gbdt_params *p, const mr_train_opts *o, char *key_out, mr_gbdt_data **out, int *hit,
                        mr_error *err)
{
    *hit = 0;
    if (!o->bin_cache_dir) return mr_gbdt_data_from_table(t, spec, ref, p, out, err);
    if (bin_key(t, spec->features, spec->n_features, spec->label, p, o, ref_key, key_out) != MR_OK)
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *path = mr_asprintf("%s/%s.mrbin", o->bin_cache_dir, key_out);
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    if (mr_fs_exists(path) && mr_gbdt_data_load(path, out, NULL) == MR_OK) {
        *hit = 1;
    } else {
        rc = mr_gbdt_data_from_table(t, spec, ref, p, out, err);
        /* A failed cache write only costs the next run its binning. */
        if (rc == MR_OK && mr_fs_mkdirs(o->bin_cache_dir, NULL) == MR_OK) mr_gbdt_data_save(*out, path, NULL);
    }
    mr_free(path);
    return rc;
}

mr_status mr_model_check_params(const char *kind, const mr_value *params, mr_error *err)
{
    mr_status rc;
    if (!kind || !strcmp(kind, "gbdt")) {
        mr_gbdt_params p;
        mr_gbdt_params_init(&p);
        rc = mr_gbdt_params_apply(&p, params, err);
        if (rc == MR_OK) rc = mr_gbdt_params_validate(&p, err);
        mr_gbdt_params_deinit(&p);
    } else if (!strcmp(kind, "linear")) {
        mr_linear_params p;
        mr_linear_params_init(&p);
        rc = mr_linear_params_apply(&p, params, err);
    } else {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "unknown model kind '%s' (expected gbdt or linear)", kind);
    }
    return rc;
}

static mr_status train_gbdt(const mr_table *train, const mr_table *valid, mr_train_opts *o, const char **feats,
                            size_t nf, mr_model **out, mr_error *err)
{
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    mr_gbdt_data *dt = NULL, *dv = NULL;
    mr_gbdt_model *gb = NULL;
    mr_status rc = MR_OK;
    if (o->num_threads > 0) p.num_threads = o->num_threads;
    rc = mr_gbdt_params_apply(&p, o->params, err);
    if (rc == MR_OK && o->smoke && p.num_iterations > SMOKE_ROUNDS) p.num_iterations = SMOKE_ROUNDS;
    if (rc == MR_OK) rc = mr_gbdt_params_validate(&p, err);
    o->rounds_total = p.num_iterations;
    mr_gbdt_table_spec spec = {.label = o->label, .features = feats, .n_features = nf, .categorical = o->categorical,
                               .n_categorical = o->n_categorical};
    char tkey[MR_HASH_HEX_LEN + 1] = "", vkey[MR_HASH_HEX_LEN + 1] = "";
    int hit_t = 0, hit_v = 0;
    round_bridge b = {.o = o, .obj = p.objective};
    mr_table *vsub = NULL;
    double *vy = NULL;
    o->fast_tier_seconds = 0;
    o->valid_rows_used = valid ? valid->n_rows : 0;
    if (rc == MR_OK && valid && (o->valid_sample || o->fast_metrics)) vy = label_doubles(valid, o->label);
    /* Validation subsample: the evaluate op's fast-tier row selection. */
    if (rc == MR_OK && vy && o->valid_sample && o->valid_sample < valid->n_rows) {
        size_t nv = valid->n_rows, n_idx = 0;
        size_t *idx = mr_malloc(o->valid_sample * sizeof(size_t));
        uint32_t *idx32 = mr_malloc(o->valid_sample * sizeof(uint32_t));
        if (!idx || !idx32) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else if (nv > UINT32_MAX) rc = MR_ERR(err, MR_E_LIMIT, "validation data has more than 2^32 rows");
        if (rc == MR_OK) rc = mr_metric_subsample_stratified(vy, nv, o->valid_sample, p.seed, idx, &n_idx, err);
        if (rc == MR_OK) {
            for (size_t i = 0; i < n_idx; i++) {
                idx32[i] = (uint32_t)idx[i];
                vy[i] = vy[idx[i]];
            }
            rc = mr_table_take(valid, idx32, n_idx, &vsub, err);
        }
        if (rc == MR_OK) {
            valid = vsub;
            o->valid_rows_used = n_idx;
        } else {
            mr_error_key(err, "valid_sample");
        }
        mr_free(idx);
        mr_free(idx32);
    }
    if (rc == MR_OK && vy && o->fast_metrics) {
        b.y = vy;
        b.ny = valid->n_rows;
        b.buf = mr_malloc((b.ny ? b.ny : 1) * (size_t)(p.num_class > 1 ? p.num_class : 1) * sizeof(double));
        if (!b.buf) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) rc = binned(train, &spec, NULL, NULL, &p, o, tkey, &dt, &hit_t, err);
    if (rc == MR_OK && valid) {
        rc = binned(valid, &spec, dt, tkey, &p, o, vkey, &dv, &hit_v, err);
        if (rc != MR_OK) mr_error_key(err, "valid");
    }
    o->binned_from_cache = hit_t;
    int stop = o->bin_only && o->bin_cache_dir;
    if (rc == MR_OK && !stop) rc = mr_gbdt_train(&p, dt, dv, gbdt_round, &b, &gb, err);
    if (rc == MR_OK && !stop) rc = wrap_gbdt(gb, out, err);
    mr_gbdt_data_free(dt);
    mr_gbdt_data_free(dv);
    mr_gbdt_params_deinit(&p);
    mr_table_free(vsub);
    mr_free(vy);
    mr_free(b.buf);
    return rc;
}

static mr_status train_linear(const mr_table *train, mr_train_opts *o, const char **feats, size_t nf,
                              mr_model **out, mr_error *err)
{
    mr_linear_params p;
    mr_linear_params_init(&p);
    if (o->num_threads > 0) p.num_threads = o->num_threads;
    mr_status rc = MR_OK;
    float *x = NULL, *y = NULL;
    mr_linear_model *lin = NULL;
    size_t n = train->n_rows;
    rc = mr_linear_params_apply(&p, o->params, err);
    if (rc != MR_OK) return rc;
    o->rounds_total = 1;
    x = mr_malloc(((n * nf) > 0 ? n * nf : 1) * sizeof(float));
    y = mr_malloc((n ? n : 1) * sizeof(float));
    if (!x || !y) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t j = 0; rc == MR_OK && j < nf; j++) rc = column_to_floats(mr_table_column(train, feats[j]), x + j * n, err);
    const mr_column *lab = rc == MR_OK ? find_column(train, SIZE_MAX, o->label, "label", err) : NULL;
    if (rc == MR_OK && !lab) rc = MR_E_NOT_FOUND;
    if (rc == MR_OK) rc = column_to_floats(lab, y, err);
    if (rc == MR_OK) rc = mr_linear_train(&p, x, n, nf, MR_GBDT_COL_MAJOR, y, feats, &lin, err);
    if (rc == MR_OK) rc = wrap_linear(lin, out, err);
    if (rc == MR_OK && o->on_round) {
        const char *nm = "iterations";
        double it = (double)mr_linear_model_iterations(lin), nan_v = NAN;
        o->on_round(o->on_round_ctx, 0, 1, &nm, &it, &nan_v, 0.0);
    }
    mr_free(x);
    mr_free(y);
    return rc;
}

mr_status mr_model_train(const mr_table *train, const mr_table *valid, mr_train_opts *o, mr_model **out,
                         mr_error *err)
{
    *out = NULL;
    if (!o->label) return MR_ERR(err, MR_E_INVALID_ARG, "no label column given");
    if (!find_column(train, SIZE_MAX, o->label, "label", err)) return MR_E_NOT_FOUND;
    int gbdt = !o->kind || !strcmp(o->kind, "gbdt");
    if (!gbdt && strcmp(o->kind, "linear") != 0) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "unknown model kind '%s' (expected gbdt or linear)", o->kind);
        mr_error_key(err, "model");
        return rc;
    }
    const mr_table *tr = train;
    mr_table *sample = NULL;
    if (o->smoke && train->n_rows > SMOKE_ROWS) { /* smoke: the first rows are enough to validate the pipeline */
        mr_status rc = mr_table_slice(train, 0, SMOKE_ROWS, &sample, err);
        if (rc != MR_OK) return rc;
        tr = sample;
    }
    const char **feats = NULL;
    size_t nf = 0;
    mr_status rc = pick_features(tr, o, &feats, &nf, err);
    if (rc == MR_OK) rc = gbdt ? train_gbdt(tr, valid, o, feats, nf, out, err) : train_linear(tr, o, feats, nf, out, err);
    mr_free(feats);
    mr_table_free(sample);
    return rc;
}

/* ---- prediction -----------------------------------------------------------*/

mr_status mr_model_predict_table(const mr_model *m, const mr_table *t, int raw, double **out, size_t *n_outputs,
                                 mr_error *err)
{
    size_t n = t->n_rows, k = mr_model_num_outputs(m);
    float *x = NULL;
    double *pred = mr_malloc(((n * k) > 0 ? n * k : 1) * sizeof(double));
    if (!pred) return MR_ERR(err, MR_E_NOMEM, "out of memory for %zu predictions", n);
    mr_status rc = mr_model_matrix(m, t, &x, err);
    if (rc == MR_OK && n) {
        if (m->kind == MR_MODEL_GBDT)
            rc = mr_gbdt_predictor_batch(m->pred, x, n, MR_GBDT_COL_MAJOR, raw, 0, pred, err);
        else
            rc = mr_linear_predict(m->lin, x, n, MR_GBDT_COL_MAJOR, raw, pred, err);
    }
    mr_free(x);
    if (rc != MR_OK) {
        mr_free(pred);
        return rc;
    }
    *out = pred;
    *n_outputs = k;
    return MR_OK;
}

void mr_model_predict_row(const mr_model *m, const float *x, int raw, double *out)
{
    if (m->kind == MR_MODEL_GBDT) mr_gbdt_predictor_row(m->pred, x, raw, out);
    else out[0] = mr_linear_predict_row(m->lin, x, raw);
}

mr_status mr_model_predict_rows(const mr_model *m, const float *x, size_t n_rows, int raw, int num_threads,
                                double *out, mr_error *err)
{
    if (!n_rows) return MR_OK;
    if (m->kind == MR_MODEL_GBDT)
        return mr_gbdt_predictor_batch(m->pred, x, n_rows, MR_GBDT_ROW_MAJOR, raw, num_threads, out, err);
    return mr_linear_predict(m->lin, x, n_rows, MR_GBDT_ROW_MAJOR, raw, out, err);
}

/* ---- description ----------------------------------------------------------*/

mr_status mr_model_info_json(const mr_model *m, mr_buf *out, mr_error *err)
{
    json_t *j = json_object(), *feats = json_array();
    size_t nf = mr_model_num_features(m);
    double *split = NULL, *gain = NULL;
    if (m->kind == MR_MODEL_GBDT) {
        split = mr_calloc(nf ? nf : 1, sizeof(double));
        gain = mr_calloc(nf ? nf : 1, sizeof(double));
        if (split && gain) {
            mr_gbdt_model_importance(m->gb, MR_GBDT_IMPORTANCE_SPLIT, split);
            mr_gbdt_model_importance(m->gb, MR_GBDT_IMPORTANCE_GAIN, gain);
        }
    }
    for (size_t f = 0; f < nf; f++) {
        json_t *fo = json_pack("{s:s}", "name", mr_model_feature_name(m, f));
        if (m->kind == MR_MODEL_GBDT && split && gain) {
            json_object_set_new(fo, "categorical", json_boolean(mr_gbdt_model_feature_is_categorical(m->gb, f)));
            json_object_set_new(fo, "split_count", json_integer((json_int_t)split[f]));
            json_object_set_new(fo, "gain", json_real(gain[f]));
        } else if (m->kind == MR_MODEL_LINEAR) {
            json_object_set_new(fo, "weight", json_real(mr_linear_model_weight(m->lin, f)));
        }
        json_array_append_new(feats, fo);
    }
    json_object_set_new(j, "kind", json_string(mr_model_kind_name(m)));
    json_object_set_new(j, "objective", json_string(mr_model_objective_name(m)));
    json_object_set_new(j, "outputs", json_integer((json_int_t)mr_model_num_outputs(m)));
    if (m->kind == MR_MODEL_GBDT) {
        json_object_set_new(j, "iterations", json_integer(mr_gbdt_model_num_iterations(m->gb)));
        json_object_set_new(j, "best_iteration", json_integer(mr_gbdt_model_best_iteration(m->gb)));
        json_object_set_new(j, "trees", json_integer((json_int_t)mr_gbdt_model_num_trees(m->gb)));
    } else {
        json_object_set_new(j, "intercept", json_real(mr_linear_model_intercept(m->lin)));
        json_object_set_new(j, "iterations", json_integer(mr_linear_model_iterations(m->lin)));
    }
    json_object_set_new(j, "features", feats);
    char *t = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    mr_status rc = t ? mr_buf_printf(out, "%s\n", t) : MR_E_NOMEM;
    free(t);
    json_decref(j);
    mr_free(split);
    mr_free(gain);
    return rc == MR_OK ? MR_OK : MR_ERR(err, rc, "out of memory");
}

mr_status mr_model_dump_json(const mr_model *m, mr_buf *out, mr_error *err)
{
    return m->kind == MR_MODEL_GBDT ? mr_gbdt_model_dump_json(m->gb, out, err) : mr_linear_model_dump_json(m->lin, out, err);
}
