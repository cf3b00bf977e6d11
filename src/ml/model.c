/* The model handle: gbdt or linear behind one API for training from tables
 * or from files (a gbdt binned while the file is read),
 * loading by magic number, predicting on tables and describing a model. */
#include "millrace/model.h"
#include "millrace/csv.h"
#include "millrace/dataset.h"
#include "millrace/gbdt.h"
#include "millrace/io.h"
#include "millrace/jsonl.h"
#include "millrace/parquet.h"
#include "millrace/linear.h"
#include "millrace/metrics.h"
#include "millrace/value.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

/* ---- training from files: binning while reading --------------------------
 * A gbdt trained on a CSV/TSV file, a JSON-lines file, a Parquet file or a
 * dataset is binned from batches read twice (the sample pass, then the
 * binning pass), so the table of the whole file never exists: peak memory
 * is the binned matrix, the sample and one batch. Anything the streaming
 * path cannot take as the whole-file reader would (a CSV column whose type
 * the streaming reader fixed from its sample and a later value does not
 * fit, a JSON-lines window typed otherwise than the first, a row count that
 * differs from the count taken first, any error) falls back to reading the
 * table, which gives the same model or the canonical error. */

enum { FB_NONE, FB_CSV, FB_PARQUET, FB_DATASET, FB_JSONL };

#define JSONL_WINDOW ((size_t)8 << 20) /* bytes of whole lines parsed at a time */

typedef struct file_batches {
    int kind;
    const char *path;
    mr_csv_reader *csv;
    mr_parquet_file *pq;
    size_t rg;
    mr_dataset *ds;
    mr_dataset_scan *scan;
    /* JSON lines: a window of the file's text, cut at the last newline */
    int fd;                 /* -1: none */
    char *win;
    size_t win_len, win_cap;
    long line;              /* the line number of win[0] */
    int eof;
    /* a rank's share: global rows [lo, hi); a Parquet file's row groups or
     * a dataset's shards [u_lo, u_hi) hold exactly those rows */
    int shared, by_unit;
    size_t lo, hi, u_lo, u_hi;
} file_batches;

static int ends_with_ci(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && !strcasecmp(s + ls - lx, suffix);
}

static int file_kind(const char *path)
{
    if (strpbrk(path, "*?[")) return FB_NONE;
    if (mr_fs_is_dir(path)) {
        char *m = mr_path_join(path, "manifest.json");
        int ok = m && mr_fs_exists(m);
        mr_free(m);
        return ok ? FB_DATASET : FB_NONE;
    }
    if (ends_with_ci(path, ".parquet") || ends_with_ci(path, ".pq")) return FB_PARQUET;
    if (ends_with_ci(path, ".csv") || ends_with_ci(path, ".tsv") || ends_with_ci(path, ".txt")) return FB_CSV;
    if (ends_with_ci(path, ".jsonl") || ends_with_ci(path, ".ndjson")) return FB_JSONL;
    return FB_NONE;
}

static void fb_close(file_batches *b)
{
    mr_csv_reader_close(b->csv, NULL);
    mr_parquet_close(b->pq);
    mr_dataset_scan_close(b->scan);
    mr_dataset_close(b->ds);
    if (b->fd >= 0) close(b->fd);
    mr_free(b->win);
    b->csv = NULL;
    b->pq = NULL;
    b->scan = NULL;
    b->ds = NULL;
    b->rg = 0;
    b->fd = -1;
    b->win = NULL;
    b->win_len = b->win_cap = 0;
    b->eof = 0;
}

/* Opens (or reopens, for the next pass) with the options mr_table_read_file uses. */
static mr_status fb_open(file_batches *b, mr_error *err)
{
    fb_close(b);
    if (b->kind == FB_CSV) {
        mr_csv_options o;
        memset(&o, 0, sizeof(o));
        if (ends_with_ci(b->path, ".tsv")) o.delimiter = '\t';
        o.chunk_size = (size_t)1 << 20; /* an 8 MiB window: the text and one batch stay small */
        return mr_csv_reader_open(b->path, &o, &b->csv, err);
    }
    if (b->kind == FB_PARQUET) return mr_parquet_open(b->path, &b->pq, err);
    if (b->kind == FB_JSONL) {
        int fd = open(b->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open", b->path);
        b->fd = fd;
        b->line = 1;
        return MR_OK;
    }
    mr_status rc = mr_dataset_open(b->path, &b->ds, err);
    if (rc == MR_OK) rc = mr_dataset_scan_open(b->ds, NULL, NULL, 0, &b->scan, err);
    if (rc == MR_OK && b->shared) mr_dataset_scan_only_shards(b->scan, b->u_lo, b->u_hi);
    return rc;
}

/* The next window of whole lines of a JSON-lines file as a table (windows
 * of only blank lines are skipped), NULL at the end. */
static mr_status jsonl_next(file_batches *b, mr_table **out, mr_error *err)
{
    for (;;) {
        if (b->win_len == b->win_cap && !b->eof) { /* first use, or one line longer than the window */
            size_t ncap = b->win_cap ? b->win_cap * 2 : JSONL_WINDOW;
            char *nw = mr_realloc(b->win, ncap);
            if (!nw) return MR_ERR(err, MR_E_NOMEM, "out of memory reading '%s'", b->path);
            b->win = nw;
            b->win_cap = ncap;
        }
        while (!b->eof && b->win_len < b->win_cap) { /* fill the window */
            ssize_t got = read(b->fd, b->win + b->win_len, b->win_cap - b->win_len);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot read", b->path);
            if (got == 0) b->eof = 1;
            b->win_len += (size_t)got;
        }
        if (!b->win_len) return MR_OK; /* the end */
        const char *nl = NULL; /* the last newline (near the end: lines are short) */
        for (size_t i = b->win_len; i > 0 && !nl; i--)
            if (b->win[i - 1] == '\n') nl = b->win + i - 1;
        if (!nl && !b->eof) continue; /* grows the window above */
        size_t take = b->eof ? b->win_len : (size_t)(nl - b->win) + 1;
        mr_status rc = mr_jsonl_read_mem(b->win, take, b->path, b->line, NULL, out, NULL, err);
        if (rc != MR_OK) return rc;
        for (const char *p = b->win, *e = b->win + take; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++) b->line++;
        memmove(b->win, b->win + take, b->win_len - take);
        b->win_len -= take;
        if ((*out)->n_rows) return MR_OK;
        mr_table_free(*out);
        *out = NULL;
    }
}

/* The next batch, NULL at the end. */
static mr_status fb_next(file_batches *b, mr_table **out, mr_error *err)
{
    *out = NULL;
    if (b->kind == FB_CSV) return mr_csv_reader_next(b->csv, 0, out, err);
    if (b->kind == FB_JSONL) return jsonl_next(b, out, err);
    if (b->kind == FB_PARQUET) {
        if (b->shared && b->rg < b->u_lo) b->rg = b->u_lo;
        if (b->rg >= (b->shared ? b->u_hi : mr_parquet_num_row_groups(b->pq))) return MR_OK;
        return mr_parquet_read_row_group(b->pq, b->rg++, NULL, 0, out, err);
    }
    return mr_dataset_scan_next(b->scan, out, err);
}

/* Feeds the file's bytes to fn in blocks (first: the file's first block). */
typedef void (*block_fn)(void *state, const char *p, size_t n, int first);

static mr_status scan_file(const char *path, block_fn fn, void *state, mr_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open", path);
    size_t cap = (size_t)1 << 20;
    char *buf = mr_malloc(cap);
    if (!buf) {
        close(fd);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_status rc = MR_OK;
    for (int first = 1;;) {
        ssize_t got = read(fd, buf, cap);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot read", path);
            break;
        }
        if (got == 0) break;
        fn(state, buf, (size_t)got, first);
        first = 0;
    }
    mr_free(buf);
    close(fd);
    return rc;
}

/* CSV records as its reader counts them: outside quotes, blank lines (of
 * nothing, or of one CR: a CRLF blank line) skipped; a lone CR is data.
 * Valid files only: the binning pass checks the count, and a mismatch
 * falls back to the table. */
typedef struct csv_count {
    int in_quotes, last_cr;
    size_t rec; /* bytes of the current record */
    size_t n;
} csv_count;

static void csv_block(void *state, const char *buf, size_t got, int first)
{
    (void)first;
    csv_count *c = state;
    const char *p = buf, *e = buf + got;
    if (!c->in_quotes && !memchr(buf, '"', got)) { /* no quotes: line by line with memchr */
        for (const char *nl; (nl = memchr(p, '\n', (size_t)(e - p))) != NULL; p = nl + 1) {
            size_t len = c->rec + (size_t)(nl - p);
            int cr = nl > p ? nl[-1] == '\r' : c->last_cr;
            c->n += !(len == 0 || (len == 1 && cr));
            c->rec = 0;
            c->last_cr = 0;
        }
        if (p < e) {
            c->rec += (size_t)(e - p);
            c->last_cr = e[-1] == '\r';
        }
        return;
    }
    for (; p < e; p++) {
        char ch = *p;
        if (ch == '\n' && !c->in_quotes) {
            c->n += !(c->rec == 0 || (c->rec == 1 && c->last_cr));
            c->rec = 0;
            c->last_cr = 0;
            continue;
        }
        if (ch == '"') c->in_quotes = !c->in_quotes;
        c->last_cr = ch == '\r';
        c->rec++;
    }
}

/* JSON lines: the non-blank lines (a blank line holds only spaces, tabs and
 * CRs; a BOM opening the file is not data), as its reader counts rows. */
typedef struct jsonl_count {
    int has; /* the current line has a byte that is not blank */
    size_t n;
} jsonl_count;

static void jsonl_block(void *state, const char *buf, size_t got, int first)
{
    jsonl_count *c = state;
    size_t i = first && got >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3) ? 3 : 0;
    for (; i < got; i++) {
        char ch = buf[i];
        if (ch == '\n') {
            c->n += c->has;
            c->has = 0;
        } else if (ch != ' ' && ch != '\t' && ch != '\r') {
            c->has = 1;
        }
    }
}

static mr_status fb_rows(file_batches *b, size_t *n, mr_error *err)
{
    if (b->kind == FB_CSV) { /* the records less the header; the final newline is optional */
        csv_count c = {0};
        mr_status rc = scan_file(b->path, csv_block, &c, err);
        c.n += c.rec > 0;
        *n = c.n ? c.n - 1 : 0;
        return rc;
    }
    if (b->kind == FB_JSONL) {
        jsonl_count c = {0};
        mr_status rc = scan_file(b->path, jsonl_block, &c, err);
        *n = c.n + (size_t)c.has;
        return rc;
    }
    int64_t r = b->kind == FB_PARQUET ? mr_parquet_num_rows(b->pq) : (int64_t)mr_dataset_n_rows(b->ds);
    if (r < 0) return MR_ERR(err, MR_E_CORRUPT, "%s: negative row count", b->path);
    *n = (size_t)r;
    return MR_OK;
}

/* The content of what path names: the file, or a dataset's manifest and shards. */
static mr_status file_content_hash(file_batches *b, mr_hasher *h, mr_error *err)
{
    mr_hash128 fh;
    uint64_t size = 0;
    mr_status rc = MR_OK;
    if (b->kind != FB_DATASET) {
        rc = mr_hash_file(b->path, &fh, &size, err);
        if (rc == MR_OK) mr_hasher_update(h, &fh, sizeof(fh));
        return rc;
    }
    mr_dataset *ds = NULL;
    char *m = mr_path_join(b->path, "manifest.json");
    rc = m ? mr_hash_file(m, &fh, &size, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) mr_hasher_update(h, &fh, sizeof(fh));
    if (rc == MR_OK) rc = mr_dataset_open(b->path, &ds, err);
    for (size_t i = 0; rc == MR_OK && i < mr_dataset_n_shards(ds); i++) {
        mr_dataset_shard_info si;
        mr_dataset_shard(ds, i, &si);
        char *sp = mr_path_join(b->path, si.path);
        rc = sp ? mr_hash_file(sp, &fh, &size, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) mr_hasher_update(h, &fh, sizeof(fh));
        mr_free(sp);
    }
    mr_dataset_close(ds);
    mr_free(m);
    return rc;
}

/* The binned-matrix cache key of a file: its content, the columns asked
 * for (features or exclude), the label, smoke, and the binning params. */
static mr_status file_bin_key(file_batches *b, const mr_gbdt_params *p, const mr_train_opts *o, char *hex,
                              mr_error *err)
{
    mr_hasher *h = NULL;
    mr_status rc = mr_hasher_new(&h, err);
    if (rc != MR_OK) return rc;
    rc = file_content_hash(b, h, err);
    mr_buf k;
    mr_buf_init(&k);
    mr_buf_printf(&k, "millrace-binned-file/1 kind=%d label=%s smoke=%d max_bin=%d sample=%d seed=%llu cat=%s", b->kind,
                  o->label, o->smoke, p->max_bin, p->bin_construct_sample_cnt, (unsigned long long)p->seed,
                  p->categorical_feature ? p->categorical_feature : "");
    for (size_t i = 0; i < o->n_features; i++) mr_buf_printf(&k, " f=%s", o->features[i]);
    for (size_t i = 0; i < o->n_exclude; i++) mr_buf_printf(&k, " x=%s", o->exclude[i]);
    for (size_t i = 0; i < o->n_categorical; i++) mr_buf_printf(&k, " c=%s", o->categorical[i]);
    if (rc == MR_OK && !k.data) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) mr_hasher_update(h, k.data, k.len);
    if (rc == MR_OK) mr_hash_hex(mr_hasher_digest(h), hex);
    mr_buf_free(&k);
    mr_hasher_free(h);
    return rc;
}

/* A later batch has the first's columns (by name, any order) and types,
 * int64 and float64 mixing (JSON lines type each window alone; the whole
 * file joins them: int64 + float64 is float64, the same doubles). Anything
 * else would not be what the whole-file reader gives: MR_E_SCHEMA, and the
 * caller reads the table instead. */
static mr_status same_schema(const mr_table *first, const mr_table *t, const char *path, mr_error *err)
{
    int ok = t->n_cols == first->n_cols;
    for (size_t j = 0; ok && j < t->n_cols; j++) {
        const mr_column *c = t->cols[j], *f = mr_table_column(first, c->name);
        int num = (c->type == MR_T_INT64 || c->type == MR_T_FLOAT64) && f &&
                  (f->type == MR_T_INT64 || f->type == MR_T_FLOAT64);
        ok = f && (f->type == c->type || num);
    }
    return ok ? MR_OK : MR_ERR(err, MR_E_SCHEMA, "%s: a batch's columns or types differ from the first's", path);
}

/* One pass: every batch (the first, already read, included) to the stream. */
static mr_status stream_pass(file_batches *b, mr_gbdt_stream *s, const mr_table *schema, mr_table *first,
                             size_t limit, int sample, mr_error *err)
{
    size_t seen = 0;
    mr_table *t = first;
    mr_status rc = MR_OK;
    for (;;) {
        if (!t && (rc = fb_next(b, &t, err)) != MR_OK) break;
        if (!t) break;
        if ((rc = same_schema(schema, t, b->path, err)) != MR_OK) break;
        mr_table *part = NULL;
        if (t->n_rows > limit - seen) { /* smoke: the first rows */
            rc = mr_table_slice(t, 0, limit - seen, &part, err);
            if (rc != MR_OK) break;
        }
        const mr_table *use = part ? part : t;
        rc = sample ? mr_gbdt_stream_sample(s, use, err) : mr_gbdt_stream_bin(s, use, err);
        seen += use->n_rows;
        mr_table_free(part);
        if (t != first) mr_table_free(t);
        t = NULL;
        if (rc != MR_OK || seen >= limit) break;
    }
    if (t != first) mr_table_free(t);
    return rc;
}

/* This rank's share of n rows: whole row groups (Parquet) or shards
 * (datasets) whose rows start nearest rank * n / size; rows of a text file. */
static mr_status plan_share(file_batches *b, const mr_gbdt_comm *c, size_t n, mr_error *err)
{
    const size_t p = (size_t)c->size, r = (size_t)c->rank;
    b->by_unit = b->kind == FB_PARQUET || b->kind == FB_DATASET;
    if (!b->by_unit) {
        b->lo = (size_t)((unsigned __int128)n * r / p);
        b->hi = (size_t)((unsigned __int128)n * (r + 1) / p);
        return MR_OK;
    }
    size_t units = b->kind == FB_PARQUET ? mr_parquet_num_row_groups(b->pq) : mr_dataset_n_shards(b->ds);
    /* the first unit whose start is at or past each boundary */
    size_t want_lo = (size_t)((unsigned __int128)n * r / p), want_hi = (size_t)((unsigned __int128)n * (r + 1) / p);
    size_t start = 0;
    int have_lo = 0;
    b->u_lo = b->u_hi = units;
    b->lo = b->hi = n;
    for (size_t u = 0; u < units; u++) {
        if (!have_lo && start >= want_lo) {
            b->u_lo = u;
            b->lo = start;
            have_lo = 1;
        }
        if (start >= want_hi && r + 1 < p) {
            b->u_hi = u;
            b->hi = start;
            break;
        }
        uint64_t rows;
        if (b->kind == FB_PARQUET) {
            int64_t rr = mr_parquet_row_group_rows(b->pq, u);
            if (rr < 0) return MR_ERR(err, MR_E_CORRUPT, "%s: row group %zu has a negative row count", b->path, u);
            rows = (uint64_t)rr;
        } else {
            mr_dataset_shard_info si;
            mr_dataset_shard(b->ds, u, &si);
            rows = si.rows;
        }
        start += (size_t)rows;
    }
    if (!have_lo) b->u_lo = b->u_hi = units; /* no unit starts in this rank's range: an empty share */
    if (b->hi < b->lo) b->hi = b->lo;
    if (start != n && b->u_hi == units)
        return MR_ERR(err, MR_E_CORRUPT, "%s: the row groups or shards hold %zu rows, the file says %zu", b->path, start, n);
    return MR_OK;
}

/* One pass over this rank's share, every batch to the stream. */
static mr_status share_pass(file_batches *b, mr_gbdt_stream *s, const mr_table *schema, int sample, mr_error *err)
{
    size_t pos = b->by_unit ? b->lo : 0;
    mr_status rc = MR_OK;
    while (pos < b->hi) {
        mr_table *t = NULL, *part = NULL;
        if ((rc = fb_next(b, &t, err)) != MR_OK || !t) break;
        size_t n = t->n_rows, a = pos < b->lo ? b->lo - pos : 0, e = pos + n > b->hi ? b->hi - pos : n;
        if (a < e && (rc = same_schema(schema, t, b->path, err)) == MR_OK && (a > 0 || e < n))
            rc = mr_table_slice(t, a, e, &part, err);
        if (rc == MR_OK && a < e) {
            const mr_table *use = part ? part : t;
            rc = sample ? mr_gbdt_stream_sample(s, use, err) : mr_gbdt_stream_bin(s, use, err);
        }
        pos += n;
        mr_table_free(part);
        mr_table_free(t);
        if (rc != MR_OK) break;
    }
    return rc;
}

/* A rank's share of the training file, binned with the edges of the
 * sample every rank draws from all the rows. */
static mr_status binned_share(const char *path, const mr_gbdt_params *p, mr_train_opts *o, mr_gbdt_data **out,
                              mr_error *err)
{
    *out = NULL;
    file_batches b = {.kind = file_kind(path), .path = path, .fd = -1};
    mr_table *first = NULL, *schema = NULL;
    mr_gbdt_stream *s = NULL;
    const char **feats = NULL;
    size_t n = 0, nf = 0;
    if (b.kind == FB_NONE)
        return MR_ERR(err, MR_E_INVALID_ARG, "%s: training across ranks reads a .csv, .tsv, .jsonl or .parquet file or a dataset", path);
    mr_status rc = fb_open(&b, err);
    if (rc == MR_OK) rc = fb_rows(&b, &n, err);
    if (rc == MR_OK) rc = fb_next(&b, &first, err); /* the schema, from the file's first batch */
    if (rc == MR_OK && !first) rc = MR_ERR(err, MR_E_PARSE, "%s: no batches", path);
    if (rc == MR_OK && !find_column(first, SIZE_MAX, o->label, "label", err)) rc = MR_E_NOT_FOUND;
    if (rc == MR_OK) rc = pick_features(first, o, &feats, &nf, err);
    if (rc == MR_OK) rc = plan_share(&b, o->comm, n, err);
    mr_gbdt_table_spec spec = {.label = o->label, .features = feats, .n_features = nf, .categorical = o->categorical,
                               .n_categorical = o->n_categorical};
    if (rc == MR_OK) rc = mr_gbdt_stream_open_share(first, n, b.lo, b.hi - b.lo, &spec, p, o->comm, &s, err);
    if (rc == MR_OK) rc = mr_table_slice(first, 0, 0, &schema, err);
    mr_table_free(first);
    if (rc == MR_OK)
        mr_log(MR_LOG_DEBUG, "train: rank %d of %d reads rows %zu..%zu of %zu (%zu rows)", o->comm->rank, o->comm->size,
               b.lo, b.hi, n, b.hi - b.lo);
    b.shared = 1;
    for (int pass = 1; pass >= 0 && rc == MR_OK; pass--) {
        rc = fb_open(&b, err);
        if (rc == MR_OK) rc = share_pass(&b, s, schema, pass, err);
    }
    if (rc == MR_OK) rc = mr_gbdt_stream_finish(s, out, err);
    if (rc == MR_OK) {
        o->train_rows = n;
        o->share_rows = b.hi - b.lo;
    }
    mr_table_free(schema);
    mr_gbdt_stream_free(s);
    fb_close(&b);
    mr_free(feats);
    return rc;
}

/* Bins the training file while reading it, or loads its cached matrix. */
static mr_status binned_file(const char *path, const mr_gbdt_params *p, mr_train_opts *o, char *key_out,
                             mr_gbdt_data **out, int *hit, mr_error *err)
{
    *out = NULL;
    *hit = 0;
    file_batches b = {.kind = file_kind(path), .path = path, .fd = -1};
    mr_table *first = NULL;
    mr_gbdt_stream *s = NULL;
    char *cache_path = NULL;
    const char **feats = NULL;
    size_t n = 0, nf = 0;
    mr_status rc = fb_open(&b, err);
    if (rc == MR_OK && o->bin_cache_dir) {
        rc = file_bin_key(&b, p, o, key_out, err);
        if (rc == MR_OK && !(cache_path = mr_asprintf("%s/%s.mrbin", o->bin_cache_dir, key_out)))
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK && mr_fs_exists(cache_path) && mr_gbdt_data_load(cache_path, out, NULL) == MR_OK) {
            *hit = 1;
            goto done;
        }
    }
    if (rc == MR_OK) rc = fb_rows(&b, &n, err);
    size_t limit = o->smoke && n > SMOKE_ROWS ? SMOKE_ROWS : n;
    if (rc == MR_OK) rc = fb_next(&b, &first, err);
    if (rc == MR_OK && !first) rc = MR_ERR(err, MR_E_PARSE, "%s: no batches", path);
    if (rc == MR_OK && !find_column(first, SIZE_MAX, o->label, "label", err)) rc = MR_E_NOT_FOUND;
    if (rc == MR_OK) rc = pick_features(first, o, &feats, &nf, err);
    mr_gbdt_table_spec spec = {.label = o->label, .features = feats, .n_features = nf, .categorical = o->categorical,
                               .n_categorical = o->n_categorical};
    if (rc == MR_OK) rc = mr_gbdt_stream_open(first, limit, &spec, NULL, p, &s, err);
    mr_table *schema = NULL; /* the first batch's columns, for the checks of the later ones */
    if (rc == MR_OK) rc = mr_table_slice(first, 0, 0, &schema, err);
    if (rc == MR_OK) rc = stream_pass(&b, s, schema, first, limit, 1, err);
    mr_table_free(first);
    first = NULL;
    if (rc == MR_OK) rc = fb_open(&b, err);
    if (rc == MR_OK) rc = stream_pass(&b, s, schema, NULL, limit, 0, err);
    mr_table_free(schema);
    if (rc == MR_OK) rc = mr_gbdt_stream_finish(s, out, err);
    /* A failed cache write only costs the next run its binning. */
    if (rc == MR_OK && cache_path && mr_fs_mkdirs(o->bin_cache_dir, NULL) == MR_OK) mr_gbdt_data_save(*out, cache_path, NULL);
done:
    mr_gbdt_stream_free(s);
    mr_table_free(first);
    fb_close(&b);
    mr_free(feats);
    mr_free(cache_path);
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

/* Trains on the table train, or on the file train_path binned while read
 * (feats then come from the file; *stream_failed tells that binning it
 * failed, so the caller can read the table instead). */
static mr_status train_gbdt(const mr_table *train, const char *train_path, const mr_table *valid, mr_train_opts *o,
                            const char **feats, size_t nf, int *stream_failed, mr_model **out, mr_error *err)
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
    const char **dfeats = NULL;
    if (rc == MR_OK && train_path && o->comm) {
        rc = binned_share(train_path, &p, o, &dt, err);
        size_t dnf = rc == MR_OK ? mr_gbdt_data_features(dt) : 0;
        if (rc == MR_OK && !(dfeats = mr_calloc(dnf ? dnf : 1, sizeof(*dfeats)))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t j = 0; rc == MR_OK && j < dnf; j++) dfeats[j] = mr_gbdt_data_feature_name(dt, j);
        spec.features = dfeats;
        spec.n_features = dnf;
    } else if (rc == MR_OK && train_path) {
        rc = binned_file(train_path, &p, o, tkey, &dt, &hit_t, err);
        if (rc != MR_OK) *stream_failed = 1;
        /* validation data takes the features the file gave */
        size_t dnf = rc == MR_OK ? mr_gbdt_data_features(dt) : 0;
        if (rc == MR_OK && !(dfeats = mr_calloc(dnf, sizeof(*dfeats)))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t j = 0; rc == MR_OK && j < dnf; j++) dfeats[j] = mr_gbdt_data_feature_name(dt, j);
        spec.features = dfeats;
        spec.n_features = dnf;
    } else if (rc == MR_OK) {
        rc = binned(train, &spec, NULL, NULL, &p, o, tkey, &dt, &hit_t, err);
    }
    if (rc == MR_OK && !o->comm) o->train_rows = mr_gbdt_data_rows(dt);
    if (rc == MR_OK && valid) {
        rc = binned(valid, &spec, dt, tkey, &p, o, vkey, &dv, &hit_v, err);
        if (rc != MR_OK) mr_error_key(err, "valid");
    }
    o->binned_from_cache = hit_t;
    int stop = o->bin_only && o->bin_cache_dir;
    if (rc == MR_OK && !stop && o->comm) rc = mr_gbdt_train_comm(&p, dt, dv, o->comm, gbdt_round, &b, &gb, err);
    else if (rc == MR_OK && !stop) rc = mr_gbdt_train(&p, dt, dv, gbdt_round, &b, &gb, err);
    if (rc == MR_OK && !stop) rc = wrap_gbdt(gb, out, err);
    mr_free(dfeats);
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
    int unused = 0;
    o->train_rows = tr->n_rows;
    if (rc == MR_OK)
        rc = gbdt ? train_gbdt(tr, NULL, valid, o, feats, nf, &unused, out, err) : train_linear(tr, o, feats, nf, out, err);
    mr_free(feats);
    mr_table_free(sample);
    return rc;
}

mr_status mr_model_train_file(const char *train_path, const char *valid_path, mr_train_opts *o, mr_model **out,
                              mr_error *err)
{
    *out = NULL;
    o->streamed = 0;
    o->train_rows = 0;
    if (!o->label) return MR_ERR(err, MR_E_INVALID_ARG, "no label column given");
    mr_table *train = NULL, *valid = NULL;
    mr_status rc = MR_OK;
    if (valid_path && (rc = mr_table_read_file(valid_path, &valid, err)) != MR_OK) return rc;
    int gbdt = !o->kind || !strcmp(o->kind, "gbdt");
    if (o->comm && o->comm->size > 1) { /* a share, binned while read: there is no whole table to fall back to */
        int unused = 0;
        if (!gbdt) rc = MR_ERR(err, MR_E_INVALID_ARG, "training across ranks is for gbdt models, not '%s'", o->kind);
        else if (o->smoke) rc = MR_ERR(err, MR_E_INVALID_ARG, "--smoke trains on one process: leave ranks out");
        else {
            const char *cache = o->bin_cache_dir; /* a share's matrix is not the file's */
            o->bin_cache_dir = NULL;
            rc = train_gbdt(NULL, train_path, valid, o, NULL, 0, &unused, out, err);
            o->bin_cache_dir = cache;
        }
        o->streamed = rc == MR_OK;
        mr_table_free(valid);
        return rc;
    }
    if (gbdt && file_kind(train_path) != FB_NONE) {
        mr_error e;
        mr_error_init(&e);
        int stream_failed = 0;
        rc = train_gbdt(NULL, train_path, valid, o, NULL, 0, &stream_failed, out, &e);
        if (rc == MR_OK || !stream_failed) {
            o->streamed = rc == MR_OK && !o->binned_from_cache;
            if (rc != MR_OK && err) *err = e;
            mr_table_free(valid);
            return rc;
        }
        /* the table reader decides: the same model, or the canonical error */
        mr_log(MR_LOG_DEBUG, "%s: binning while reading fell back to the table: %s", train_path, e.msg);
    }
    rc = mr_table_read_file(train_path, &train, err);
    if (rc == MR_OK) rc = mr_model_train(train, valid, o, out, err);
    mr_table_free(train);
    mr_table_free(valid);
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
