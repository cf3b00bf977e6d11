/* The check op: the model tested like software. Properties (check.h) run
 * over sampled or generated rows; gates compare an evaluate stage's metrics
 * and this machine's inference measurements (model size, single-row latency,
 * batch throughput, peak memory of prediction) with declared bounds. The
 * results artifact is always written; any failure then fails the stage with
 * MR_E_FAILED, which the engine publishes without caching (docs/engine.md). */
#define _GNU_SOURCE
#include "millrace/check.h"
#include "millrace/features.h"
#include "millrace/io.h"
#include "millrace/metrics.h"
#include "millrace/model.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

static const mr_param_def check_params[] = {
    {"model", MR_PT_STR | MR_PT_PATH, 1, "the model: ${stages.TRAIN} (a directory holding model.bin) or a model file"},
    {"data", MR_PT_STR | MR_PT_PATH, 0, "rows to test properties and measure latency on (required with properties or inference limits)"},
    {"features", MR_PT_STR | MR_PT_PATH, 0, "fitted features artifact applied to data first (properties then name model features)"},
    {"metrics", MR_PT_STR | MR_PT_PATH, 0, "an evaluate stage's output (${stages.EVAL}) that metric gates read"},
    {"properties", MR_PT_SEQ, 0, "[{type: consistency|monotonic|invariance|robustness|directional, feature, direction, ...}]"},
    {"gates", MR_PT_STRSEQ, 0, "conditions like \"auc >= 0.85\", \"slices.min >= 0.7\", \"latency_p99_us <= 200\""},
    {"limits", MR_PT_MAP, 0, "{model_size_mb, latency_p50_us, latency_p99_us, throughput_rows_s (min), peak_rss_mb}"},
    {"rows", MR_PT_INT, 0, "rows sampled for properties (default 200)"},
    {"inputs", MR_PT_STR, 0, "sampled (default: rows of data) or generated (each feature drawn independently from its column)"},
    {"batch_size", MR_PT_INT, 0, "batch size N of the throughput and memory measurements (default 1024)"},
    {"seed", MR_PT_INT, 0, "sampling seed (default 0)"},
    {NULL, 0, 0, NULL},
};

typedef struct check_row {
    char *name;
    const char *kind; /* "property" / "gate" */
    int passed;
    double value, bound; /* gates; NaN for properties */
    char *detail;
} check_row;

typedef struct check_run {
    mr_op_ctx *ctx;
    check_row *rows;
    size_t n, cap;
    json_t *measured; /* name -> number */
    json_t *metrics;  /* metrics.json of the evaluate stage, or NULL */
    json_t *slices;   /* slices.json, or NULL */
} check_run;

static mr_status add_row(check_run *cr, const char *kind, const char *name, int passed, double value, double bound,
                         const char *detail, mr_error *err)
{
    if (cr->n == cr->cap) {
        size_t cap = cr->cap ? cr->cap * 2 : 16;
        check_row *r = mr_realloc(cr->rows, cap * sizeof(*r));
        if (!r) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        cr->rows = r;
        cr->cap = cap;
    }
    check_row *r = &cr->rows[cr->n];
    r->name = mr_strdup(name);
    r->detail = mr_strdup(detail);
    if (!r->name || !r->detail) {
        mr_free(r->name);
        mr_free(r->detail);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    r->kind = kind;
    r->passed = passed;
    r->value = value;
    r->bound = bound;
    cr->n++;
    return MR_OK;
}

/* ---- scorer over a model ------------------------------------------------ */
static mr_status model_score(void *ctx, const float *x, size_t n, int threads, double *out, mr_error *err)
{
    const mr_model *m = ctx;
    if (n == 1 && threads <= 1) {
        mr_model_predict_row(m, x, 0, out);
        return MR_OK;
    }
    return mr_model_predict_rows(m, x, n, 0, threads, out, err);
}


/* Row-major (n, nf) test matrix from the column-major model matrix of t:
 * n sampled rows, or generated rows whose every value comes from an
 * independently drawn row. */
static mr_status test_matrix(const mr_model *m, const mr_table *t, size_t want, int generated, uint64_t seed, float **x_out,
                             size_t *n_out, mr_error *err)
{
    size_t nf = mr_model_num_features(m), nt = t->n_rows;
    if (!nt) return MR_ERR(err, MR_E_INVALID_ARG, "check: the data has no rows");
    float *cm = NULL;
    mr_status rc = mr_model_matrix(m, t, &cm, err);
    if (rc != MR_OK) return rc;
    size_t n = generated ? want : (want < nt ? want : nt);
    size_t *perm = mr_malloc(nt * sizeof(size_t));
    float *x = mr_malloc(((n * nf) > 0 ? n * nf : 1) * sizeof(float));
    if (!perm || !x) {
        mr_free(cm);
        mr_free(perm);
        mr_free(x);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    uint64_t st = seed ^ 0xc4ecULL;
    for (size_t i = 0; i < nt; i++) perm[i] = i;
    for (size_t i = 0; i < n && !generated; i++) { /* partial Fisher-Yates: n distinct rows */
        size_t j = i + (size_t)(mr_splitmix64(&st) % (nt - i));
        size_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < nf; f++) {
            size_t src = generated ? (size_t)(mr_splitmix64(&st) % nt) : perm[i];
            x[i * nf + f] = cm[f * nt + src];
        }
    mr_free(cm);
    mr_free(perm);
    *x_out = x;
    *n_out = n;
    return MR_OK;
}

/* ---- properties ----------------------------------------------------------- */
static mr_status parse_direction(const mr_value *v, int *out, mr_error *err)
{
    *out = 1;
    if (!v) return MR_OK;
    if ((v->kind == MR_V_INT && (v->u.i == 1 || v->u.i == -1))) {
        *out = (int)v->u.i;
        return MR_OK;
    }
    if (v->kind == MR_V_STR) {
        if (!strcmp(v->str, "increasing") || !strcmp(v->str, "up") || !strcmp(v->str, "+1")) return MR_OK;
        if (!strcmp(v->str, "decreasing") || !strcmp(v->str, "down") || !strcmp(v->str, "-1")) {
            *out = -1;
            return MR_OK;
        }
    }
    mr_buf t;
    mr_buf_init(&t);
    if (v->kind != MR_V_MAP && v->kind != MR_V_SEQ) mr_value_scalar_text(v, &t);
    mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "direction must be increasing/up/1 or decreasing/down/-1, got %s%s%s",
                          t.data ? "'" : "", t.data ? t.data : mr_vkind_name(v->kind), t.data ? "'" : "");
    mr_buf_free(&t);
    mr_error_at(err, NULL, v->line, v->col);
    if (v->kind == MR_V_STR) {
        static const char *const dirs[] = {"increasing", "decreasing", "up", "down"};
        const char *best = mr_closest(v->str, dirs, 4);
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
    }
    return rc;
}

static mr_status feature_index(const mr_model *m, const char *name, size_t *out, mr_error *err)
{
    size_t nf = mr_model_num_features(m);
    for (size_t j = 0; j < nf; j++)
        if (!strcmp(mr_model_feature_name(m, j), name)) {
            *out = j;
            return MR_OK;
        }
    mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "property feature '%s' is not a feature of the model", name);
    const char **names = mr_calloc(nf ? nf : 1, sizeof(*names));
    if (names) {
        for (size_t j = 0; j < nf; j++) names[j] = mr_model_feature_name(m, j);
        const char *best = mr_closest(name, names, nf);
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
        mr_free(names);
    }
    return rc;
}

/* An optional number of a property: finite, and >= lo (or in [lo, hi]). */
static mr_status prop_num(const mr_value *pv, const char *type, const char *key, double dflt, double lo, double hi,
                          double *out, mr_error *err)
{
    mr_status rc = mr__opt_num(pv, type, key, dflt, out, err);
    const mr_value *v = mr_value_get(pv, key);
    if (rc != MR_OK) {
        if (v) mr_error_at(err, NULL, v->line, v->col);
        return rc;
    }
    if (v && (*out < lo || *out > hi)) {
        if (isinf(hi))
            return mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "property %s: %s must be >= %g, got %g", type, key,
                               lo, *out);
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "property %s: %s must be in [%g, %g], got %g", type,
                           key, lo, hi, *out);
    }
    return MR_OK;
}

/* One property's settings, everything but the feature's index (which
 * needs the model): *feature_out is its name (borrowed) or NULL. */
static mr_status prop_settings(const mr_value *pv, mr_prop *p, const char **feature_out, char *label, size_t label_len,
                               mr_error *err)
{
    static const char *const keys[] = {"type", "name", "feature", "direction", "epsilon", "perturb", "noise", "delta",
                                       "fraction", "from", "to", "grid", "output", "seed"};
    *feature_out = NULL;
    if (pv->kind != MR_V_MAP) {
        mr_status rc = mr_error_set_at(err, NULL, pv->line, pv->col, MR_E_INVALID_ARG,
                                   "properties: each item must be a mapping such as {type: consistency}, got a %s",
                                   mr_vkind_name(pv->kind));
        return rc;
    }
    mr_status rc = mr__check_keys(pv, "properties item", keys, sizeof(keys) / sizeof(*keys), err);
    if (rc != MR_OK) return rc;
    const mr_value *vtype = mr_value_get(pv, "type");
    const char *type = vtype && vtype->kind == MR_V_STR ? vtype->str : NULL;
    if (!type) {
        rc = mr_error_set_at(err, NULL, vtype ? vtype->line : pv->line, vtype ? vtype->col : pv->col, MR_E_INVALID_ARG,
                         "each property needs a type (consistency, monotonic, invariance, robustness, directional)");
        return rc;
    }
    mr_prop_kind kind;
    if ((rc = mr_prop_kind_parse(type, &kind, err)) != MR_OK) {
        mr_error_at(err, NULL, vtype->line, vtype->col);
        return rc;
    }
    mr_prop_init(p, kind);
    const mr_value *vfeat = mr_value_get(pv, "feature");
    if (vfeat && (vfeat->kind != MR_V_STR || !vfeat->str[0]))
        return mr_error_set_at(err, NULL, vfeat->line, vfeat->col, MR_E_INVALID_ARG,
                           "property %s: feature must name a model feature, got %s", type,
                           vfeat->kind == MR_V_STR ? "an empty string" : mr_vkind_name(vfeat->kind));
    const char *feat = vfeat ? vfeat->str : NULL;
    if (feat) {
        *feature_out = feat;
    } else if (kind == MR_PROP_ROBUSTNESS) {
        p->feature = SIZE_MAX;
    } else if (kind != MR_PROP_CONSISTENCY) {
        rc = mr_error_set_at(err, NULL, pv->line, pv->col, MR_E_INVALID_ARG, "property %s needs a feature", type);
        mr_error_hint(err, "add `feature: COLUMN` (a model feature)");
        return rc;
    }
    if ((rc = parse_direction(mr_value_get(pv, "direction"), &p->direction, err)) != MR_OK) return rc;
    double v;
    if ((rc = prop_num(pv, type, "epsilon", p->epsilon, 0, INFINITY, &p->epsilon, err)) != MR_OK) return rc;
    if ((rc = prop_num(pv, type, "noise", p->noise, 0, INFINITY, &p->noise, err)) != MR_OK) return rc;
    if ((rc = prop_num(pv, type, "delta", p->delta, 0, INFINITY, &p->delta, err)) != MR_OK) return rc;
    if ((rc = prop_num(pv, type, "fraction", p->fraction, 0, 1, &p->fraction, err)) != MR_OK) return rc;
    if (mr_value_get(pv, "perturb") && (rc = prop_num(pv, type, "perturb", 0, -INFINITY, INFINITY, &p->perturb, err)) != MR_OK)
        return rc;
    if (mr_value_get(pv, "from") && (rc = prop_num(pv, type, "from", 0, -INFINITY, INFINITY, &p->from, err)) != MR_OK) return rc;
    if (mr_value_get(pv, "to") && (rc = prop_num(pv, type, "to", 0, -INFINITY, INFINITY, &p->to, err)) != MR_OK) return rc;
    if (isnan(p->from) != isnan(p->to)) {
        const mr_value *one = mr_value_get(pv, "from") ? mr_value_get(pv, "from") : mr_value_get(pv, "to");
        return mr_error_set_at(err, NULL, one->line, one->col, MR_E_INVALID_ARG, "property %s: give both from and to, or neither", type);
    }
    if ((rc = prop_num(pv, type, "grid", 8, 2, 256, &v, err)) != MR_OK) return rc;
    p->grid = (size_t)v;
    if ((rc = prop_num(pv, type, "output", 0, 0, INFINITY, &v, err)) != MR_OK) return rc;
    p->output = (size_t)v;
    if ((rc = prop_num(pv, type, "seed", 0, -INFINITY, INFINITY, &v, err)) != MR_OK) return rc;
    p->seed = (uint64_t)(int64_t)v;
    const char *name = mr__opt_str(pv, "name", NULL);
    if (name) snprintf(label, label_len, "%s", name);
    else if (feat) snprintf(label, label_len, "%s %s%s", type, feat,
                            kind == MR_PROP_MONOTONIC || kind == MR_PROP_DIRECTIONAL ? (p->direction > 0 ? " up" : " down") : "");
    else snprintf(label, label_len, "%s", type);
    return MR_OK;
}

/* ---- measurements --------------------------------------------------------- */
static double proc_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return NAN;
    char line[256];
    double v = NAN;
    size_t fl = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, fl) && line[fl] == ':') {
            v = strtod(line + fl + 1, NULL);
            break;
        }
    fclose(f);
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static mr_status measure(check_run *cr, const mr_model *m, const char *model_file, const float *x, size_t n, size_t batch,
                         mr_error *err)
{
    mr_op_ctx *ctx = cr->ctx;
    struct stat sb;
    if (stat(model_file, &sb) == 0)
        json_object_set_new(cr->measured, "model_size_mb", json_real((double)sb.st_size / (1024.0 * 1024.0)));
    if (!x || !n) return MR_OK;
    size_t nf = mr_model_num_features(m), K = mr_model_num_outputs(m);
    /* Latency: the single-row path, one call per row, batch size 1. */
    size_t L = ctx->smoke ? 200 : 2000;
    double *lat = mr_malloc(L * sizeof(double)), out[256];
    if (!lat) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (K > 256) {
        mr_free(lat);
        return MR_OK;
    }
    for (size_t i = 0; i < 50; i++) mr_model_predict_row(m, x + (i % n) * nf, 0, out); /* warm caches */
    for (size_t i = 0; i < L; i++) {
        double t0 = mr_now();
        mr_model_predict_row(m, x + (i % n) * nf, 0, out);
        lat[i] = (mr_now() - t0) * 1e6;
    }
    qsort(lat, L, sizeof(double), cmp_double);
    json_object_set_new(cr->measured, "latency_p50_us", json_real(lat[L / 2]));
    json_object_set_new(cr->measured, "latency_p99_us", json_real(lat[(size_t)((double)(L - 1) * 0.99)]));
    mr_free(lat);
    /* Throughput and peak memory at batch N: the model is loaded again inside
     * the window, so the figure covers loading it and predicting a batch.
     * Writing 5 to /proc/self/clear_refs resets the peak RSS to the current
     * RSS (Linux >= 4.0); where that fails the figure is a lower bound. */
    double rss0 = proc_status_kb("VmRSS");
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    int reset = fd >= 0 && write(fd, "5", 1) == 1;
    if (fd >= 0) close(fd);
    mr_model *m2 = NULL;
    float *xb = mr_malloc(batch * nf * sizeof(float) + 1);
    double *pb = mr_malloc(batch * K * sizeof(double) + 1);
    mr_status rc = xb && pb ? mr_model_load(model_file, &m2, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        for (size_t i = 0; i < batch; i++) memcpy(xb + i * nf, x + (i % n) * nf, nf * sizeof(float));
        double t0 = mr_now(), el = 0;
        size_t reps = 0;
        while (rc == MR_OK && (reps < 3 || el < (ctx->smoke ? 0.05 : 0.3)) && reps < 100000) {
            rc = mr_model_predict_rows(m2, xb, batch, 0, ctx->threads, pb, err);
            reps++;
            el = mr_now() - t0;
        }
        if (rc == MR_OK) {
            json_object_set_new(cr->measured, "throughput_rows_s", json_real(el > 0 ? (double)(reps * batch) / el : 0));
            double hwm = proc_status_kb("VmHWM");
            double peak = isnan(hwm) || isnan(rss0) ? NAN : (hwm - rss0) / 1024.0;
            json_object_set_new(cr->measured, "peak_rss_mb", json_real(isnan(peak) || peak < 0 ? 0 : peak));
            json_object_set_new(cr->measured, "peak_rss_exact", json_boolean(reset));
            json_object_set_new(cr->measured, "batch_size", json_integer((json_int_t)batch));
            json_object_set_new(cr->measured, "threads", json_integer(ctx->threads));
        }
    }
    mr_model_free(m2);
    mr_free(xb);
    mr_free(pb);
    return rc;
}

/* ---- gates ----------------------------------------------------------------- */
/* Measurement limits (`limits:` keys); model_size_mb needs no data. */
static const char *const measured_names[] = {"model_size_mb", "latency_p50_us", "latency_p99_us", "throughput_rows_s",
                                             "peak_rss_mb"};
/* Also in `measured` (with data), so a gate may read them. */
static const char *const measured_extra[] = {"batch_size", "threads"};
/* Gate names over an evaluate stage's slices.json. */
static const char *const slice_names[] = {"slices.min", "slices.max", "slices.worst", "slices.flagged"};
#define N_OF(a) (sizeof(a) / sizeof(*(a)))

/* The name of a metric in an evaluate stage's metrics.json: the library's
 * name, but AUC and average precision go by their short names. */
static const char *json_metric_name(mr_metric_id id)
{
    return id == MR_METRIC_ROC_AUC ? "auc" : id == MR_METRIC_AVG_PRECISION ? "ap" : mr_metric_name(id);
}

/* A gate's metric name as metrics.json spells it (roc_auc, avg_precision and average_precision are aliases). */
static const char *metric_alias(const char *base)
{
    return !strcmp(base, "roc_auc") ? "auc" : !strcmp(base, "avg_precision") || !strcmp(base, "average_precision") ? "ap" : base;
}

/* One gate, "NAME OP NUMBER". */
typedef struct gate {
    char name[160];
    const char *op; /* ">=", "<=", "==", "!=", ">", "<" */
    double bound;
} gate;

static mr_status parse_gate(const char *text, gate *g, mr_error *err)
{
    static const char *const ops[] = {">=", "<=", "==", "!=", ">", "<"};
    const char *scan = strrchr(text, ']');
    scan = scan ? scan : text;
    const char *at = NULL, *op = NULL;
    for (size_t k = 0; k < N_OF(ops) && !at; k++)
        if ((at = strstr(scan, ops[k]))) op = ops[k];
    char *end = NULL;
    double bound = at ? strtod(at + strlen(op), &end) : NAN;
    if (!at || !end || end == at + strlen(op) || end[strspn(end, " \t")] || !isfinite(bound) || at == text) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "gate '%s': expected NAME OP NUMBER, e.g. \"auc >= 0.85\"", text);
        mr_error_key(err, "gates");
        mr_error_hint(err, "OP is one of >=, <=, >, <, ==, !=");
        return rc;
    }
    size_t len = (size_t)(at - text);
    while (len && (text[len - 1] == ' ' || text[len - 1] == '\t')) len--;
    size_t lead = strspn(text, " \t");
    snprintf(g->name, sizeof(g->name), "%.*s", (int)(len > lead ? len - lead : 0), text + lead);
    g->op = op;
    g->bound = bound;
    return MR_OK;
}

static int in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(name, list[k])) return 1;
    return 0;
}

/* What a gate name reads, known without data: a measurement (needs `data:`
 * but for model_size_mb), or an evaluate stage's metric or slices (need
 * `metrics:`). MR_E_INVALID_ARG for a name nothing provides. */
static mr_status check_gate_name(const char *text, const char *name, int has_data, int has_metrics, mr_error *err)
{
    int measured = in_list(name, measured_names, N_OF(measured_names)) || in_list(name, measured_extra, N_OF(measured_extra));
    if (measured) {
        if (has_data || !strcmp(name, "model_size_mb")) return MR_OK;
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "gate '%s': %s is measured on rows of data, and the stage has no `data:`",
                              text, name);
        mr_error_hint(err, "give `data: FILE` (rows to measure prediction on)");
        return rc;
    }
    char base[160];
    snprintf(base, sizeof(base), "%s", name);
    char *dot = strrchr(base, '.');
    if (dot && (!strcmp(dot, ".lo") || !strcmp(dot, ".hi"))) *dot = '\0';
    int metric = 0;
    for (int id = 0; id < MR_METRIC_COUNT_ && !metric; id++)
        metric = !strcmp(metric_alias(base), json_metric_name((mr_metric_id)id));
    size_t nl = strlen(name);
    int slice = in_list(name, slice_names, N_OF(slice_names)) || (!strncmp(name, "slice[", 6) && nl > 7 && name[nl - 1] == ']');
    if ((metric || slice) && has_metrics) return MR_OK;
    if (metric || slice) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG,
                              "gate '%s': '%s' is read from an evaluate stage, and the stage has no `metrics:`", text, name);
        mr_error_hint(err, "give `metrics: ${stages.EVAL}`");
        return rc;
    }
    const char *cands[64];
    size_t nc = 0;
    for (int id = 0; id < MR_METRIC_COUNT_; id++) cands[nc++] = json_metric_name((mr_metric_id)id);
    size_t n_metrics = nc;
    for (size_t k = 0; k < N_OF(measured_names); k++) cands[nc++] = measured_names[k];
    for (size_t k = 0; k < N_OF(slice_names); k++) cands[nc++] = slice_names[k];
    mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "gate '%s': no value named '%s'", text, name);
    /* NAME.lo / NAME.hi: the closest metric, with the same suffix */
    const char *suffix = strlen(base) < strlen(name) ? name + strlen(base) : "";
    const char *best = suffix[0] ? mr_closest(base, cands, n_metrics) : mr_closest(name, cands, nc);
    if (best) mr_error_hint(err, "did you mean '%s%s'?", best, suffix);
    else
        mr_error_hint(err, "gates read measurements (%s, ...), evaluate metrics (auc, logloss, rmse, ...; NAME.lo, "
                           "NAME.hi) and slices (slices.min, slice[LABEL])",
                      measured_names[0]);
    return rc;
}

/* Value of a gate name: measured quantities, evaluate metrics (NAME, NAME.lo,
 * NAME.hi), slices (slices.min, slices.max, slices.flagged, slice[LABEL]). */
static int gate_value(check_run *cr, const char *name, double *out)
{
    json_t *v = json_object_get(cr->measured, name);
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 1;
    }
    json_t *ms = json_object_get(cr->metrics, "metrics");
    char base[160];
    snprintf(base, sizeof(base), "%s", name);
    const char *field = "value";
    char *dot = strrchr(base, '.');
    if (dot && (!strcmp(dot, ".lo") || !strcmp(dot, ".hi"))) {
        field = dot + 1;
        *dot = '\0';
    }
    v = json_object_get(json_object_get(ms, metric_alias(base)), field);
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 1;
    }
    json_t *arr = json_object_get(cr->slices, "slices");
    if (!json_is_array(arr)) return 0;
    int hib = json_is_true(json_object_get(cr->slices, "higher_is_better"));
    size_t k;
    json_t *s;
    if (!strcmp(name, "slices.flagged")) {
        double c = 0;
        json_array_foreach(arr, k, s) c += json_is_true(json_object_get(s, "flagged"));
        *out = c;
        return 1;
    }
    if (!strcmp(name, "slices.min") || !strcmp(name, "slices.max") || !strcmp(name, "slices.worst")) {
        int want_min = !strcmp(name, "slices.min") || (!strcmp(name, "slices.worst") && hib);
        int found = 0;
        json_array_foreach(arr, k, s)
        {
            json_t *sv = json_object_get(s, "value");
            if (!json_is_number(sv) || !json_is_true(json_object_get(s, "defined"))) continue;
            double x = json_number_value(sv);
            if (!found || (want_min ? x < *out : x > *out)) *out = x;
            found = 1;
        }
        return found;
    }
    size_t nl = strlen(name);
    if (!strncmp(name, "slice[", 6) && nl > 7 && name[nl - 1] == ']') {
        json_array_foreach(arr, k, s)
        {
            const char *lab = json_string_value(json_object_get(s, "label"));
            json_t *sv = json_object_get(s, "value");
            if (lab && strlen(lab) == nl - 7 && !strncmp(lab, name + 6, nl - 7) && json_is_number(sv)) {
                *out = json_number_value(sv);
                return 1;
            }
        }
    }
    return 0;
}

static mr_status run_gate(check_run *cr, const char *text, mr_error *err)
{
    gate g;
    mr_status rc = parse_gate(text, &g, err);
    if (rc != MR_OK) return rc;
    const char *name = g.name, *op = g.op;
    double bound = g.bound;
    double v = NAN;
    const char *tier = json_string_value(json_object_get(cr->metrics, "tier"));
    if (!gate_value(cr, name, &v) && tier && !strcmp(tier, "fast") && (!strncmp(name, "slice", 5))) {
        /* A slice gate over a fast-tier evaluation has nothing to read: it
         * fails (a gate is never passed silently), saying why. */
        char detail[256];
        snprintf(detail, sizeof(detail), "%s: not computed (the evaluate stage ran with tier: fast, which has no slices)", name);
        return add_row(cr, "gate", text, 0, NAN, bound, detail, err);
    }
    if (isnan(v) && !gate_value(cr, name, &v)) {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "gate '%s': no value named '%s'%s", text, name,
                    cr->metrics ? "" : " (give `metrics: ${stages.EVAL}` for metric gates)");
        mr_error_key(err, "gates");
        const char *cands[64];
        size_t nc = 0;
        for (size_t k = 0; k < N_OF(measured_names); k++) cands[nc++] = measured_names[k];
        const char *key;
        json_t *val;
        json_object_foreach(json_object_get(cr->metrics, "metrics"), key, val) if (nc < 60) cands[nc++] = key;
        cands[nc++] = "slices.min";
        const char *best = mr_closest(name, cands, nc);
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
        return rc;
    }
    int pass = !strcmp(op, ">=") ? v >= bound : !strcmp(op, "<=") ? v <= bound : !strcmp(op, ">") ? v > bound
               : !strcmp(op, "<") ? v < bound : !strcmp(op, "==") ? v == bound : v != bound;
    char detail[256];
    if (pass) snprintf(detail, sizeof(detail), "%s = %.6g (%s %.6g)", name, v, op, bound);
    else snprintf(detail, sizeof(detail), "%s = %.6g, needs %s %.6g (misses by %.4g)", name, v, op, bound, fabs(v - bound));
    return add_row(cr, "gate", text, pass, v, bound, detail, err);
}

static mr_status load_json(const char *dir, const char *name, json_t **out, mr_error *err)
{
    char *path = mr_path_join(dir, name);
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    json_error_t je;
    *out = json_load_file(path, 0, &je);
    mr_status rc = *out ? MR_OK : MR_ERR(err, MR_E_PARSE, "%s: %s", path, je.text);
    mr_free(path);
    return rc;
}

/* ---- the definition -------------------------------------------------------- */

/* The definition's settings. Paths and values are borrowed from it. */
typedef struct check_cfg {
    const char *model;      /* the model (a directory holding model.bin, or a file) */
    const char *data, *features, *metrics; /* NULL when absent */
    const char *inputs;     /* "sampled" or "generated" */
    size_t rows, batch;     /* as declared (smoke mode shrinks them when it runs) */
    uint64_t seed;
    const mr_value *props;  /* SEQ of property mappings, or NULL */
    const mr_value *gates;  /* a string or a SEQ of strings, or NULL */
    const mr_value *limits; /* MAP measurement -> bound, or NULL */
} check_cfg;

/* def[key]: a count in [1, max] (dflt when absent). */
static mr_status check_count(const mr_value *def, const char *key, double dflt, double max, size_t *out, mr_error *err)
{
    double v;
    mr_status rc = mr__opt_num(def, "check", key, dflt, &v, err);
    const mr_value *x = mr_value_get(def, key);
    if (rc == MR_OK && (v < 1 || v > max)) {
        rc = mr_error_set_at(err, NULL, x->line, x->col, MR_E_INVALID_ARG, "%s must be in [1, %.0f], got %.17g", key, max, v);
        mr_error_key(err, key);
    }
    *out = rc == MR_OK ? (size_t)v : 0;
    return rc;
}

/* Every gate "NAME OP NUMBER", its name one that the stage's data or
 * metrics provide; the error points at the gate. */
static mr_status check_gates(const check_cfg *c, mr_error *err)
{
    size_t n = !c->gates ? 0 : c->gates->kind == MR_V_SEQ ? c->gates->n : 1;
    for (size_t k = 0; k < n; k++) {
        const mr_value *g = c->gates->kind == MR_V_SEQ ? c->gates->items[k] : c->gates;
        if (g->kind != MR_V_STR || mr_op_value_deferred(g)) continue;
        gate parsed;
        mr_status rc = parse_gate(g->str, &parsed, err);
        if (rc == MR_OK) rc = check_gate_name(g->str, parsed.name, c->data != NULL, c->metrics != NULL, err);
        if (rc != MR_OK) {
            mr_error_at(err, NULL, g->line, g->col);
            mr_error_key(err, "gates");
            return rc;
        }
    }
    return MR_OK;
}

/* limits: known measurements, each bound a positive number; all but
 * model_size_mb are measured on rows of `data:`. */
static mr_status check_limits(const check_cfg *c, mr_error *err)
{
    const mr_value *limits = c->limits;
    mr_status rc = mr__check_keys(limits, "limits", measured_names, N_OF(measured_names), err);
    for (size_t k = 0; rc == MR_OK && limits && k < limits->n; k++) {
        const mr_value *v = limits->items[k];
        double b;
        if (mr_op_value_deferred(v)) continue; /* known when the stage runs */
        if ((rc = mr__opt_num(limits, "limits", limits->keys[k], 0, &b, err)) != MR_OK) break;
        if (!(b > 0)) {
            rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "limits.%s must be a positive number, got %.17g",
                             limits->keys[k], b);
        } else if (!c->data && strcmp(limits->keys[k], "model_size_mb")) {
            rc = mr_error_set_at(err, NULL, limits->key_lines[k], limits->key_cols[k], MR_E_INVALID_ARG,
                             "limits.%s needs rows to measure on: give `data:`", limits->keys[k]);
        }
    }
    if (rc != MR_OK) mr_error_key(err, "limits");
    return rc;
}

/* The definition's settings and every check that needs neither the model
 * nor the data: inputs, counts, each property's settings, the gates' syntax
 * and names, the limits. What validate checks at load is what run uses. */
static mr_status check_settings(const mr_value *def, check_cfg *c, mr_error *err)
{
    static const char *const inputs[] = {"sampled", "generated"};
    memset(c, 0, sizeof(*c));
    c->model = mr__opt_str(def, "model", "");
    c->data = mr__opt_str(def, "data", NULL);
    c->features = mr__opt_str(def, "features", NULL);
    c->metrics = mr__opt_str(def, "metrics", NULL);
    c->inputs = mr__opt_str(def, "inputs", "sampled");
    c->props = mr_value_get(def, "properties");
    c->gates = mr_value_get(def, "gates");
    c->limits = mr_value_get(def, "limits");
    mr_status rc = MR_OK;
    if (!in_list(c->inputs, inputs, 2)) {
        const mr_value *v = mr_value_get(def, "inputs");
        rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "inputs must be 'sampled' or 'generated', got '%s'", c->inputs);
        mr_error_key(err, "inputs");
        if (mr_closest(c->inputs, inputs, 2)) mr_error_hint(err, "did you mean '%s'?", mr_closest(c->inputs, inputs, 2));
        return rc;
    }
    double v;
    if ((rc = check_count(def, "rows", 200, 1e6, &c->rows, err)) != MR_OK) return rc;
    if ((rc = check_count(def, "batch_size", 1024, 1e7, &c->batch, err)) != MR_OK) return rc;
    if ((rc = mr__opt_num(def, "check", "seed", 0, &v, err)) != MR_OK) return rc;
    c->seed = (uint64_t)(int64_t)v;
    if ((rc = check_limits(c, err)) != MR_OK) return rc;
    for (size_t k = 0; c->props && c->props->kind == MR_V_SEQ && k < c->props->n; k++) {
        mr_prop p;
        const char *feature;
        char label[160];
        if (mr__value_has_deferred(c->props->items[k])) continue; /* known when the stage runs */
        if ((rc = prop_settings(c->props->items[k], &p, &feature, label, sizeof(label), err)) != MR_OK) {
            mr_error_key(err, "properties");
            return rc;
        }
    }
    if (c->props && c->props->n && !c->data) {
        rc = mr_error_set_at(err, NULL, c->props->line, c->props->col, MR_E_INVALID_ARG, "properties need rows to test: give `data:`");
        mr_error_key(err, "data");
        return rc;
    }
    return check_gates(c, err);
}

static mr_status validate_check(const mr_op_validate_ctx *vc, mr_error *err)
{
    check_cfg c;
    return check_settings(vc->def, &c, err);
}

/* ---- running --------------------------------------------------------------- */

/* What a check reads: the model, the data (through the features artifact
 * when given) and the test rows drawn from it. */
typedef struct check_inputs {
    char *model_file;
    mr_model *model;
    mr_table *data, *fx_out;
    mr_features *fx;
    char *fx_file, *fx_bytes;
    float *x; /* (n, n_features) row-major test rows; NULL without data */
    size_t n;
} check_inputs;

static void check_inputs_free(check_inputs *in)
{
    mr_free(in->x);
    mr_free(in->model_file);
    mr_free(in->fx_file);
    mr_free(in->fx_bytes);
    mr_features_free(in->fx);
    mr_table_free(in->fx_out);
    mr_table_free(in->data);
    mr_model_free(in->model);
}

static mr_status load_inputs(check_run *cr, const check_cfg *c, size_t want, check_inputs *in, mr_error *err)
{
    in->model_file = mr__file_in(c->model, "model.bin");
    mr_status rc = in->model_file ? mr_model_load(in->model_file, &in->model, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK && c->metrics) {
        rc = load_json(c->metrics, "metrics.json", &cr->metrics, err);
        if (rc == MR_OK) rc = load_json(c->metrics, "slices.json", &cr->slices, err);
    }
    if (rc == MR_OK && c->data) rc = mr_table_read_file(c->data, &in->data, err);
    if (rc == MR_OK && in->data && c->features) {
        size_t len = 0;
        rc = mr__features_file_in(c->features, &in->fx_file, err);
        if (rc == MR_OK) rc = mr_fs_read_file(in->fx_file, (size_t)1 << 30, &in->fx_bytes, &len, err);
        if (rc == MR_OK) rc = mr_features_load(in->fx_bytes, len, &in->fx, err);
        if (rc == MR_OK) rc = mr_features_apply(in->fx, in->data, &in->fx_out, err);
    }
    if (rc == MR_OK && in->data)
        rc = test_matrix(in->model, in->fx_out ? in->fx_out : in->data, want, !strcmp(c->inputs, "generated"), c->seed,
                         &in->x, &in->n, err);
    return rc;
}

static mr_status run_properties(check_run *cr, const check_cfg *c, const check_inputs *in, mr_error *err)
{
    mr_scorer sc = {model_score, in->model, mr_model_num_features(in->model), mr_model_num_outputs(in->model),
                    cr->ctx->threads > 1 ? cr->ctx->threads : 4};
    mr_status rc = MR_OK;
    for (size_t k = 0; rc == MR_OK && c->props && c->props->kind == MR_V_SEQ && k < c->props->n; k++) {
        mr_prop p;
        const char *feature;
        char label[160];
        mr_prop_result pr;
        rc = prop_settings(c->props->items[k], &p, &feature, label, sizeof(label), err);
        if (rc == MR_OK && feature) rc = feature_index(in->model, feature, &p.feature, err);
        if (rc == MR_OK) rc = mr_prop_check(&p, &sc, in->x, in->n, &pr, err);
        if (rc == MR_OK) rc = add_row(cr, "property", label, pr.passed, NAN, NAN, pr.detail, err);
        if (rc != MR_OK) mr_error_key(err, "properties");
    }
    return rc;
}

/* Gates, then the limits as measurement gates. */
static mr_status run_gates(check_run *cr, const check_cfg *c, mr_error *err)
{
    const mr_value *gates = c->gates, *limits = c->limits;
    mr_status rc = MR_OK;
    for (size_t k = 0; rc == MR_OK && gates && k < (gates->kind == MR_V_SEQ ? gates->n : 1); k++) {
        const mr_value *g = gates->kind == MR_V_SEQ ? gates->items[k] : gates;
        if (g->kind == MR_V_STR) rc = run_gate(cr, g->str, err);
    }
    for (size_t k = 0; rc == MR_OK && limits && k < limits->n; k++) {
        double b;
        if ((rc = mr__opt_num(limits, "limits", limits->keys[k], 0, &b, err)) != MR_OK) break;
        char g[200];
        snprintf(g, sizeof(g), "%s %s %.17g", limits->keys[k], !strcmp(limits->keys[k], "throughput_rows_s") ? ">=" : "<=", b);
        if (!json_is_number(json_object_get(cr->measured, limits->keys[k]))) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "limits.%s needs rows to measure on: give `data:`", limits->keys[k]);
            break;
        }
        rc = run_gate(cr, g, err);
    }
    return rc;
}

/* results.json: the verdict, every check and the measurements. */
static mr_status write_results(const check_run *cr, const check_cfg *c, size_t n_tested, size_t n_fail, mr_error *err)
{
    json_t *res = json_object(), *arr = json_array();
    if (!res || !arr) {
        json_decref(res);
        json_decref(arr);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < cr->n; k++) {
        const check_row *r = &cr->rows[k];
        json_t *o = json_pack("{s:s,s:s,s:b,s:s}", "name", r->name, "kind", r->kind, "passed", r->passed, "detail", r->detail);
        if (o && !isnan(r->value)) json_object_set_new(o, "value", json_real(r->value));
        if (o && !isnan(r->bound)) json_object_set_new(o, "bound", json_real(r->bound));
        json_array_append_new(arr, o);
    }
    json_object_set_new(res, "passed", json_boolean(n_fail == 0));
    json_object_set_new(res, "n_checks", json_integer((json_int_t)cr->n));
    json_object_set_new(res, "n_failed", json_integer((json_int_t)n_fail));
    json_object_set_new(res, "rows_tested", json_integer((json_int_t)n_tested));
    json_object_set_new(res, "inputs", json_string(c->inputs));
    json_object_set_new(res, "checks", arr);
    json_object_set(res, "measured", cr->measured);
    char *path = mr_path_join(cr->ctx->outputs[0].path, "results.json");
    char *t = json_dumps(res, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    mr_status rc = path && t ? mr_fs_write_atomic(path, t, strlen(t), err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    free(t);
    mr_free(path);
    json_decref(res);
    return rc;
}

/* The measurements as check.* metrics, the table of every check in the
 * stage log, and the verdict: MR_E_FAILED naming the failures. */
static mr_status report_verdict(check_run *cr, size_t n_fail, mr_error *err)
{
    mr_op_ctx *ctx = cr->ctx;
    const char *key;
    json_t *mv;
    json_object_foreach(cr->measured, key, mv) if (json_is_real(mv)) {
        char name[128];
        snprintf(name, sizeof(name), "check.%s", key);
        mr_op_metric(ctx, name, 0, json_real_value(mv));
    }
    mr_op_metric(ctx, "check.failed", 0, (double)n_fail);
    dprintf(ctx->log_fd, "%-6s %-9s %-36s %s\n", "RESULT", "KIND", "CHECK", "DETAIL");
    for (size_t k = 0; k < cr->n; k++)
        dprintf(ctx->log_fd, "%-6s %-9s %-36s %s\n", cr->rows[k].passed ? "pass" : "FAIL", cr->rows[k].kind, cr->rows[k].name,
                cr->rows[k].detail);
    if (!n_fail) {
        dprintf(ctx->log_fd, "all %zu checks passed\n", cr->n);
        return MR_OK;
    }
    /* The failures again, last, so the log tail the runner prints shows them. */
    dprintf(ctx->log_fd, "\n%zu failed:\n", n_fail);
    for (size_t k = 0; k < cr->n; k++)
        if (!cr->rows[k].passed)
            dprintf(ctx->log_fd, "%-6s %-9s %-36s %s\n", "FAIL", cr->rows[k].kind, cr->rows[k].name, cr->rows[k].detail);
    mr_buf b;
    mr_buf_init(&b);
    mr_buf_printf(&b, "%zu of %zu checks failed:", n_fail, cr->n);
    for (size_t k = 0; k < cr->n; k++)
        if (!cr->rows[k].passed) mr_buf_printf(&b, " [%s: %s]", cr->rows[k].name, cr->rows[k].detail);
    mr_status rc = MR_ERR(err, MR_E_FAILED, "%s", b.data ? b.data : "checks failed");
    mr_buf_free(&b);
    return rc;
}

static mr_status run_check(mr_op_ctx *ctx, mr_error *err)
{
    check_run cr = {ctx, NULL, 0, 0, json_object(), NULL, NULL};
    check_inputs in;
    memset(&in, 0, sizeof(in));
    check_cfg c;
    memset(&c, 0, sizeof(c));
    mr_status rc = cr.measured ? check_settings(ctx->def, &c, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t want = c.rows, batch = c.batch;
    if (ctx->smoke) want = want < 50 ? want : 50, batch = batch < 256 ? batch : 256;
    if (rc == MR_OK) rc = load_inputs(&cr, &c, want, &in, err);
    if (rc == MR_OK) rc = run_properties(&cr, &c, &in, err);
    /* Measurements, then gates over them and the evaluate metrics. */
    if (rc == MR_OK) rc = measure(&cr, in.model, in.model_file, in.x, in.n, batch, err);
    if (rc == MR_OK) rc = run_gates(&cr, &c, err);
    /* Results artifact, then the verdict. */
    size_t n_fail = 0;
    for (size_t k = 0; k < cr.n; k++) n_fail += !cr.rows[k].passed;
    if (rc == MR_OK) rc = write_results(&cr, &c, in.n, n_fail, err);
    if (rc == MR_OK) rc = report_verdict(&cr, n_fail, err);
    for (size_t k = 0; k < cr.n; k++) {
        mr_free(cr.rows[k].name);
        mr_free(cr.rows[k].detail);
    }
    mr_free(cr.rows);
    json_decref(cr.measured);
    json_decref(cr.metrics);
    json_decref(cr.slices);
    check_inputs_free(&in);
    return rc;
}

const mr_op mr_op_check = {
    .name = "check",
    .version = 1,
    .params = check_params,
    .outputs = NULL,
    .run = run_check,
    .validate = validate_check,
};
