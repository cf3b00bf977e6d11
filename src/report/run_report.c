/* Run reports (include/millrace/runreport.h): reads the run store and the
 * JSON artifacts of evaluate/check stages and the model's summary, and
 * renders them with the report toolkit (src/report). Nothing here computes a
 * metric: every number comes from an artifact or the run store. */
#include "millrace/model.h"
#include "millrace/report.h"
#include "millrace/runreport.h"
#include "millrace/runstore.h"
#include "millrace/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define TRY(x)                      \
    do {                            \
        if ((rc = (x)) != MR_OK) goto done; \
    } while (0)

static double jnumv(json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

/* Loads dir/name as JSON; NULL (no error) when dir is NULL or the file is absent. */
static mr_status load_opt(const char *dir, const char *name, json_t **out, mr_error *err)
{
    *out = NULL;
    if (!dir) return MR_OK;
    char *path = mr_path_join(dir, name);
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    if (mr_fs_exists(path)) {
        json_error_t je;
        *out = json_load_file(path, 0, &je);
        if (!*out) rc = MR_ERR(err, MR_E_PARSE, "%s:%d: %s", path, je.line, je.text);
    }
    mr_free(path);
    return rc;
}

static mr_status load_show(mr_runstore *rs, int64_t run, json_t **out, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = mr_runstore_show_json(rs, run, &b, err);
    if (rc == MR_OK) {
        *out = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
        if (!*out) rc = MR_ERR(err, MR_E_PARSE, "run store: unreadable run %lld", (long long)run);
    }
    mr_buf_free(&b);
    return rc;
}

/* A growing list of owned strings, freed together. */
typedef struct strs {
    char **v;
    size_t n, cap;
} strs;
static const char *strs_add(strs *s, char *owned)
{
    if (!owned) return NULL;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        char **v = mr_realloc(s->v, cap * sizeof(char *));
        if (!v) {
            mr_free(owned);
            return NULL;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = owned;
    return owned;
}
static void strs_free(strs *s)
{
    for (size_t i = 0; i < s->n; i++) mr_free(s->v[i]);
    mr_free(s->v);
}
static char *json_text(json_t *v)
{
    if (json_is_string(v)) return mr_strdup(json_string_value(v));
    if (json_is_real(v)) return mr_asprintf("%.6g", json_real_value(v));
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    char *r = mr_strdup(t ? t : "");
    free(t);
    return r;
}

/* Flattens a params object into "params.a.b" -> text. */
static void flatten(json_t *j, const char *prefix, strs *keys, strs *vals)
{
    if (json_is_object(j) && json_object_size(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            char *p = mr_asprintf("%s.%s", prefix, k);
            if (p) flatten(v, p, keys, vals);
            mr_free(p);
        }
    } else if (!json_is_object(j)) {
        strs_add(keys, mr_strdup(prefix));
        strs_add(vals, json_text(j));
    }
}

static mr_status chart_out(mr_report *r, mr_buf *svg, const char *caption, mr_error *err)
{
    mr_status rc = mr_report_svg(r, caption, svg->data, err);
    svg->len = 0;
    if (svg->data) svg->data[0] = '\0';
    return rc;
}

/* Arrays x/y of a curve object {x: [], y: []} (caller frees). */
static size_t curve_arrays(json_t *c, const char *yk, double **x, double **y)
{
    json_t *jx = json_object_get(c, "x"), *jy = json_object_get(c, yk);
    size_t n = json_array_size(jx) < json_array_size(jy) ? json_array_size(jx) : json_array_size(jy);
    *x = mr_malloc((n ? n : 1) * sizeof(double));
    *y = mr_malloc((n ? n : 1) * sizeof(double));
    if (!*x || !*y) {
        mr_free(*x);
        mr_free(*y);
        *x = *y = NULL;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        (*x)[i] = jnumv(json_array_get(jx, i));
        (*y)[i] = jnumv(json_array_get(jy, i));
    }
    return n;
}

static int count_finite(const double *x, const double *y, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += isfinite(x[i]) && isfinite(y[i]);
    return k;
}

/* One curve chart with up to 4 series (one per run when comparing). */
typedef struct curve_spec {
    const char *key, *ykey, *title, *xl, *yl, *caption;
    int diagonal, unit, step;
} curve_spec;
static const curve_spec curve_specs[] = {
    {"roc", "y", "ROC", "false positive rate", "true positive rate", "ROC curve", 1, 1, 0},
    {"pr", "y", "Precision-recall", "recall", "precision", "Precision-recall curve", 0, 1, 1},
    {"calibration", "y", "Calibration", "mean predicted probability", "fraction positive", "Reliability diagram", 1, 1, 0},
    {"gain", "y", "Cumulative gain", "fraction of population", "share of positives captured", "Cumulative gain by decile", 1, 1, 0},
    {"gain", "lift", "Lift", "fraction of population", "lift", "Lift by decile", 0, 0, 0},
};

static mr_status draw_curve(mr_report *r, mr_buf *svg, const curve_spec *cs, json_t *const *curves, const char *const *names,
                            size_t n_runs, int *drawn, mr_error *err)
{
    mr_series s[4];
    double *xs[4] = {0}, *ys[4] = {0};
    size_t ns = 0;
    mr_status rc = MR_OK;
    *drawn = 0;
    for (size_t k = 0; k < n_runs && k < 4; k++) {
        json_t *c = json_object_get(curves[k], cs->key);
        if (!json_is_object(c) || !json_is_array(json_object_get(c, "x"))) continue;
        size_t n = curve_arrays(c, cs->ykey, &xs[ns], &ys[ns]);
        if (!n || !count_finite(xs[ns], ys[ns], n)) {
            mr_free(xs[ns]);
            mr_free(ys[ns]);
            xs[ns] = ys[ns] = NULL;
            continue;
        }
        s[ns] = (mr_series){names[k], xs[ns], ys[ns], n, cs->step ? MR_SERIES_STEP : MR_SERIES_LINE};
        ns++;
    }
    if (ns) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = cs->title;
        c.x_label = cs->xl;
        c.y_label = cs->yl;
        c.diagonal = cs->diagonal;
        if (cs->unit) c.x_min = c.y_min = 0, c.x_max = c.y_max = 1;
        c.width = 400;
        c.height = 340;
        rc = mr_report_chart_line(svg, &c, s, ns, err);
        if (rc == MR_OK) rc = chart_out(r, svg, cs->caption, err);
        *drawn = rc == MR_OK;
    }
    for (size_t k = 0; k < 4; k++) {
        mr_free(xs[k]);
        mr_free(ys[k]);
    }
    return rc;
}

static mr_stage_state stage_state(const char *st)
{
    if (!strcmp(st, "cached")) return MR_STAGE_CACHED;
    if (!strcmp(st, "failed") || !strcmp(st, "interrupted")) return MR_STAGE_FAILED;
    if (!strcmp(st, "skipped")) return MR_STAGE_SKIPPED;
    return MR_STAGE_EXECUTED;
}

static mr_status sec_summary(mr_report *r, json_t *show, json_t *mets, strs *pool, mr_error *err)
{
    json_t *run = json_object_get(show, "run");
    strs keys = {0}, vals = {0};
    mr_status rc = mr_report_section(r, "summary", "Run summary", err);
    const char *fields[] = {"id", "status", "started", "duration_s", "git_commit", "git_dirty", "argv", "overrides", "smoke"};
    for (size_t k = 0; k < sizeof(fields) / sizeof(*fields); k++) {
        json_t *v = json_object_get(run, fields[k]);
        if (!v || json_is_null(v) || (json_is_string(v) && !json_string_value(v)[0])) continue;
        strs_add(&keys, mr_strdup(fields[k]));
        strs_add(&vals, json_text(v));
    }
    /* Data sizes: rows recorded by stages (train_rows, eval_rows) and by the evaluate artifact. */
    size_t k;
    json_t *m;
    json_array_foreach(json_object_get(show, "metrics"), k, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (name && (strstr(name, "_rows") || !strcmp(name, "rows"))) {
            strs_add(&keys, mr_asprintf("%s.%s", json_string_value(json_object_get(m, "stage")), name));
            strs_add(&vals, mr_asprintf("%.0f", jnumv(json_object_get(m, "value"))));
        }
    }
    if (mets) {
        strs_add(&keys, mr_strdup("evaluation rows"));
        strs_add(&vals, mr_asprintf("%.0f of %.0f (%s tier)", jnumv(json_object_get(mets, "rows")),
                                    jnumv(json_object_get(mets, "rows_total")), json_string_value(json_object_get(mets, "tier"))));
    }
    flatten(json_object_get(run, "params"), "params", &keys, &vals);
    if (keys.n != vals.n) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_report_kv(r, (const char *const *)keys.v, (const char *const *)vals.v, keys.n, err);
    (void)pool;
    strs_free(&keys);
    strs_free(&vals);
    return rc;
}

static mr_status sec_timeline(mr_report *r, json_t *show, mr_error *err)
{
    json_t *stages = json_object_get(show, "stages");
    size_t n = json_array_size(stages);
    double t0 = jnumv(json_object_get(json_object_get(show, "run"), "started_s"));
    mr_report_stage *st = mr_calloc(n ? n : 1, sizeof(*st));
    if (!st) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t k, m = 0;
    json_t *s;
    json_array_foreach(stages, k, s)
    {
        double started = jnumv(json_object_get(s, "started_s"));
        st[m].name = json_string_value(json_object_get(s, "stage"));
        st[m].start = isfinite(started) && isfinite(t0) && started > 0 ? started - t0 : 0;
        st[m].wall = jnumv(json_object_get(s, "wall_s"));
        if (!isfinite(st[m].wall)) st[m].wall = 0;
        double u = jnumv(json_object_get(s, "user_s")), y = jnumv(json_object_get(s, "sys_s"));
        st[m].cpu = (isfinite(u) ? u : 0) + (isfinite(y) ? y : 0);
        double rss = jnumv(json_object_get(s, "max_rss_kb"));
        st[m].peak_rss = isfinite(rss) && rss > 0 ? (uint64_t)rss * 1024u : 0;
        const char *status = json_string_value(json_object_get(s, "status"));
        st[m].state = stage_state(status ? status : "executed");
        if (st[m].name) m++;
    }
    mr_status rc;
    if (m) {
        rc = mr_report_add_timeline(r, st, m, mr_cpu_count(), err);
    } else {
        rc = mr_report_section(r, "timeline", "Stage timeline", err);
        if (rc == MR_OK) rc = mr_report_text(r, "No stage of this run is recorded yet.", err);
    }
    mr_free(st);
    return rc;
}

/* Training curves: every run-store metric with more than one step, grouped
 * by the name after its "train."/"valid." prefix. */
static mr_status sec_training(mr_report *r, mr_buf *svg, json_t *show, mr_error *err)
{
    mr_status rc = mr_report_section(r, "training", "Training curves", err);
    json_t *groups = json_object();
    size_t k;
    json_t *m;
    json_array_foreach(json_object_get(show, "metrics"), k, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (!name) continue;
        json_t *series = json_object_get(groups, strchr(name, '.') ? strchr(name, '.') + 1 : name);
        if (!series) {
            series = json_object();
            json_object_set_new(groups, strchr(name, '.') ? strchr(name, '.') + 1 : name, series);
        }
        /* A curve is one stage's metric over steps: the same name recorded by
         * two stages (rows_in of two transforms) is two one-point series. */
        const char *stage = json_string_value(json_object_get(m, "stage"));
        char skey[256];
        if (stage) snprintf(skey, sizeof(skey), "%s (%s)", name, stage);
        else snprintf(skey, sizeof(skey), "%s", name);
        json_t *pts = json_object_get(series, skey);
        if (!pts) {
            pts = json_array();
            json_object_set_new(series, skey, pts);
        }
        json_array_append_new(pts, json_pack("[ff]", jnumv(json_object_get(m, "step")) + 1, jnumv(json_object_get(m, "value"))));
    }
    int drawn = 0;
    const char *gname;
    json_t *series;
    json_object_foreach(groups, gname, series)
    {
        if (rc != MR_OK || drawn >= 6) break;
        mr_series s[4];
        double *bufs[8] = {0};
        size_t ns = 0;
        const char *sname;
        json_t *pts;
        json_object_foreach(series, sname, pts)
        {
            size_t n = json_array_size(pts);
            if (n < 2 || ns >= 4) continue;
            double *x = mr_malloc(n * sizeof(double)), *y = mr_malloc(n * sizeof(double));
            bufs[2 * ns] = x;
            bufs[2 * ns + 1] = y;
            if (!x || !y) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                break;
            }
            for (size_t i = 0; i < n; i++) {
                x[i] = jnumv(json_array_get(json_array_get(pts, i), 0));
                y[i] = jnumv(json_array_get(json_array_get(pts, i), 1));
            }
            s[ns] = (mr_series){sname, x, y, n, MR_SERIES_LINE};
            ns++;
        }
        if (rc == MR_OK && ns) {
            mr_chart c;
            mr_chart_init(&c);
            c.title = gname;
            c.x_label = "round";
            c.y_label = gname;
            rc = mr_report_chart_line(svg, &c, s, ns, err);
            if (rc == MR_OK) rc = chart_out(r, svg, gname, err);
            drawn++;
        }
        for (size_t i = 0; i < 8; i++) mr_free(bufs[i]);
    }
    if (rc == MR_OK && !drawn) rc = mr_report_text(r, "No per-round metrics were recorded (train without a validation set, or no train stage).", err);
    json_decref(groups);
    return rc;
}

/* A section with only a sentence saying why it is empty. */
static mr_status empty_section(mr_report *r, const char *id, const char *title, const char *why, mr_error *err)
{
    mr_status rc = mr_report_section(r, id, title, err);
    return rc == MR_OK ? mr_report_text(r, why, err) : rc;
}

static mr_status sec_metrics(mr_report *r, json_t *mets, mr_error *err)
{
    json_t *ms = json_object_get(mets, "metrics");
    size_t n = json_object_size(ms);
    if (!n) {
        return empty_section(r, "metrics", "Metrics", "No evaluate stage output: no metrics.", err);
    }
    mr_report_metric *rm = mr_calloc(n, sizeof(*rm));
    if (!rm) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t k = 0;
    const char *name;
    json_t *v;
    json_object_foreach(ms, name, v)
    {
        rm[k++] = (mr_report_metric){name, jnumv(json_object_get(v, "value")), jnumv(json_object_get(v, "lo")),
                                     jnumv(json_object_get(v, "hi"))};
    }
    mr_status rc = mr_report_add_metrics(r, rm, k, err);
    mr_free(rm);
    json_t *und = json_object_get(mets, "undefined");
    json_object_foreach(und, name, v)
    {
        if (rc != MR_OK) break;
        char *t = mr_asprintf("%s is undefined on this data: %s", name, json_string_value(v) ? json_string_value(v) : "");
        rc = t ? mr_report_text(r, t, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(t);
    }
    return rc;
}

static mr_status sec_curves(mr_report *r, mr_buf *svg, json_t *curves, mr_error *err)
{
    mr_status rc = mr_report_section(r, "curves", "ROC, precision-recall, calibration and lift", err);
    int any = 0, d;
    const char *names[1] = {"model"};
    for (size_t k = 0; rc == MR_OK && k < sizeof(curve_specs) / sizeof(*curve_specs); k++) {
        rc = draw_curve(r, svg, &curve_specs[k], &curves, names, 1, &d, err);
        any |= d;
    }
    json_t *ovr = json_object_get(curves, "roc_ovr");
    if (rc == MR_OK && json_array_size(ovr)) {
        /* Multiclass: one-vs-rest ROC per class, up to 8 classes in one chart. */
        mr_series s[8];
        double *xs[8] = {0}, *ys[8] = {0};
        char lab[8][32];
        size_t ns = 0;
        for (size_t k = 0; k < json_array_size(ovr) && ns < 8; k++) {
            size_t n = curve_arrays(json_array_get(ovr, k), "y", &xs[ns], &ys[ns]);
            if (!n) {
                mr_free(xs[ns]);
                mr_free(ys[ns]);
                xs[ns] = ys[ns] = NULL;
                continue;
            }
            snprintf(lab[ns], sizeof(lab[ns]), "class %zu", k);
            s[ns] = (mr_series){lab[ns], xs[ns], ys[ns], n, MR_SERIES_LINE};
            ns++;
        }
        if (ns) {
            mr_chart c;
            mr_chart_init(&c);
            c.title = "ROC, one class vs rest";
            c.x_label = "false positive rate";
            c.y_label = "true positive rate";
            c.diagonal = 1;
            c.x_min = c.y_min = 0, c.x_max = c.y_max = 1;
            rc = mr_report_chart_line(svg, &c, s, ns, err);
            if (rc == MR_OK) rc = chart_out(r, svg, "One-vs-rest ROC per class", err);
            any = 1;
        }
        for (size_t k = 0; k < 8; k++) {
            mr_free(xs[k]);
            mr_free(ys[k]);
        }
    }
    if (rc == MR_OK && !any)
        rc = mr_report_text(r, curves ? "No classification curves: a regression task or the fast tier (curves come with tier: full)."
                                      : "No evaluate stage output: no curves.",
                            err);
    return rc;
}

static mr_status sec_confusion(mr_report *r, mr_buf *svg, json_t *mets, strs *pool, mr_error *err)
{
    mr_status rc = mr_report_section(r, "confusion", "Confusion matrix", err);
    json_t *cf = json_object_get(mets, "confusion");
    json_t *labels = json_object_get(cf, "labels"), *mat = json_object_get(cf, "matrix");
    size_t K = json_array_size(labels);
    if (rc != MR_OK) return rc;
    if (!K || json_array_size(mat) != K || K > 100) return mr_report_text(r, "No confusion matrix (regression, or no evaluate output).", err);
    double *cells = mr_calloc(K * K, sizeof(double));
    const char **lab = mr_calloc(K, sizeof(char *));
    if (!cells || !lab) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < K; i++) {
        lab[i] = strs_add(pool, json_text(json_array_get(labels, i)));
        for (size_t j = 0; j < K; j++) cells[i * K + j] = jnumv(json_array_get(json_array_get(mat, i), j));
    }
    if (rc == MR_OK) {
        mr_chart c;
        mr_chart_init(&c);
        char *title = json_is_number(json_object_get(mets, "threshold"))
                          ? mr_asprintf("Confusion matrix at %.3g", jnumv(json_object_get(mets, "threshold")))
                          : mr_strdup("Confusion matrix (argmax)");
        c.title = title;
        c.x_label = "predicted";
        c.y_label = "true";
        c.width = 360 + (int)(K > 4 ? 40 * (K - 4) : 0);
        c.height = 300 + (int)(K > 4 ? 40 * (K - 4) : 0);
        rc = mr_report_chart_heatmap(svg, &c, lab, lab, cells, K, K, err);
        if (rc == MR_OK) rc = chart_out(r, svg, "Rows: true class; columns: predicted class", err);
        mr_free(title);
    }
    mr_free(cells);
    mr_free(lab);
    return rc;
}

static mr_status sec_importance(mr_report *r, mr_buf *svg, const char *model_path, mr_error *err)
{
    mr_status rc = mr_report_section(r, "importance", "Feature importance", err);
    if (rc != MR_OK) return rc;
    if (!model_path) return mr_report_text(r, "No model artifact: no feature importance.", err);
    char *file = mr_fs_is_dir(model_path) ? mr_path_join(model_path, "model.bin") : mr_strdup(model_path);
    mr_model *m = NULL;
    mr_buf info;
    mr_buf_init(&info);
    json_t *j = NULL;
    rc = file ? mr_model_load(file, &m, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_model_info_json(m, &info, err);
    if (rc == MR_OK && !(j = json_loadb(info.data, info.len, 0, NULL))) rc = MR_ERR(err, MR_E_PARSE, "model summary is not JSON");
    json_t *feats = json_object_get(j, "features");
    size_t n = json_array_size(feats);
    const char **names = mr_calloc(n ? n : 1, sizeof(char *));
    double *vals = mr_calloc(n ? n : 1, sizeof(double));
    int linear = j && !strcmp(json_string_value(json_object_get(j, "kind")) ? json_string_value(json_object_get(j, "kind")) : "", "linear");
    if (rc == MR_OK && (!names || !vals)) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        json_t *f = json_array_get(feats, i);
        names[i] = json_string_value(json_object_get(f, "name"));
        vals[i] = linear ? fabs(jnumv(json_object_get(f, "weight"))) : jnumv(json_object_get(f, "gain"));
        if (!isfinite(vals[i])) vals[i] = 0;
    }
    /* Largest first (insertion sort: feature counts are small), top 25. */
    for (size_t i = 1; rc == MR_OK && i < n; i++)
        for (size_t k = i; k > 0 && vals[k] > vals[k - 1]; k--) {
            double tv = vals[k];
            vals[k] = vals[k - 1];
            vals[k - 1] = tv;
            const char *tn = names[k];
            names[k] = names[k - 1];
            names[k - 1] = tn;
        }
    if (rc == MR_OK && n) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = linear ? "|weight| per feature" : "Total gain per feature";
        rc = mr_report_chart_bars(svg, &c, names, vals, n < 25 ? n : 25, err);
        if (rc == MR_OK) rc = chart_out(r, svg, linear ? "Absolute linear weights (standardised inputs)" : "Gain importance", err);
    } else if (rc == MR_OK) {
        rc = mr_report_text(r, "The model has no features.", err);
    }
    mr_free(names);
    mr_free(vals);
    json_decref(j);
    mr_buf_free(&info);
    mr_model_free(m);
    mr_free(file);
    return rc;
}

static mr_status sec_slices(mr_report *r, json_t *sl, mr_error *err)
{
    json_t *arr = json_object_get(sl, "slices");
    size_t n = json_array_size(arr);
    if (!n) {
        return empty_section(r, "slices", "Slices", "No slices (declare slices: {categorical: [...], numeric: [...]} with tier: full).", err);
    }
    mr_slice *s = mr_calloc(n, sizeof(*s));
    if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *lab = json_string_value(json_object_get(o, "label"));
        snprintf(s[i].label, sizeof(s[i].label), "%s", lab ? lab : "?");
        s[i].n_rows = (size_t)jnumv(json_object_get(o, "rows"));
        s[i].ci.point = jnumv(json_object_get(o, "value"));
        s[i].ci.lo = jnumv(json_object_get(o, "lo"));
        s[i].ci.hi = jnumv(json_object_get(o, "hi"));
        s[i].flagged = json_is_true(json_object_get(o, "flagged"));
        s[i].status = json_is_true(json_object_get(o, "defined")) ? MR_OK : MR_E_INVALID_ARG;
        const char *msg = json_string_value(json_object_get(o, "message"));
        snprintf(s[i].message, sizeof(s[i].message), "%s", msg ? msg : "");
        json_t *q = json_object_get(o, "residual_quantiles");
        for (int k = 0; k < 5; k++) s[i].resid_q[k] = jnumv(json_array_get(q, (size_t)k));
    }
    const char *metric = json_string_value(json_object_get(sl, "metric"));
    mr_status rc = mr_report_add_slices(r, metric ? metric : "metric", s, n, jnumv(json_object_get(sl, "overall")), err);
    mr_free(s);
    return rc;
}

static mr_status error_table(mr_report *r, json_t *arr, const char *caption, const char *vkey, const char *vhead, strs *pool,
                             mr_error *err)
{
    size_t n = json_array_size(arr);
    const char *head[6] = {"row", "id", "label", "prediction", vhead, "features"};
    const char **cells = mr_calloc(n * 6 + 1, sizeof(char *));
    if (!cells) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *keys[5] = {"row", "id", "label", "prediction", vkey};
        for (int k = 0; k < 5; k++) {
            json_t *v = json_object_get(o, keys[k]);
            cells[i * 6 + (size_t)k] = v ? strs_add(pool, json_text(v)) : "";
        }
        mr_buf b;
        mr_buf_init(&b);
        const char *fk;
        json_t *fv;
        json_object_foreach(json_object_get(o, "features"), fk, fv)
            mr_buf_printf(&b, "%s%s=%s", b.len ? ", " : "", fk, json_string_value(fv) ? json_string_value(fv) : "?");
        cells[i * 6 + 5] = strs_add(pool, mr_strdup(b.data ? b.data : ""));
        mr_buf_free(&b);
    }
    mr_status rc = mr_report_table(r, caption, head, 6, cells, n, NULL, err);
    mr_free(cells);
    return rc;
}

static mr_status sec_errors(mr_report *r, json_t *errs, strs *pool, mr_error *err)
{
    mr_status rc = mr_report_section(r, "errors", "Worst errors", err);
    if (rc != MR_OK) return rc;
    json_t *w = json_object_get(errs, "most_confident_wrong");
    json_t *wr = json_object_get(errs, "worst_residuals"), *br = json_object_get(errs, "best_residuals");
    if (json_array_size(w)) return error_table(r, w, "Most confident wrong predictions", "confidence", "confidence in the wrong class", pool, err);
    if (json_array_size(wr)) {
        rc = error_table(r, wr, "Largest residuals", "residual", "residual (y - prediction)", pool, err);
        if (rc == MR_OK && json_array_size(br)) rc = error_table(r, br, "Smallest residuals", "residual", "residual (y - prediction)", pool, err);
        return rc;
    }
    return mr_report_text(r, errs ? "No wrong predictions listed (none, or tier: fast)." : "No evaluate stage output: no error analysis.", err);
}

static mr_status sec_residuals(mr_report *r, mr_buf *svg, json_t *curves, json_t *sl, strs *pool, mr_error *err)
{
    mr_status rc = mr_report_section(r, "residuals", "Residuals", err);
    json_t *res = json_object_get(curves, "residuals");
    if (rc != MR_OK) return rc;
    if (!json_is_object(res)) return mr_report_text(r, "No residuals: not a regression task (or tier: fast).", err);
    double *x = NULL, *y = NULL;
    size_t n = curve_arrays(res, "y", &x, &y);
    if (n && count_finite(x, y, n)) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Residual vs prediction";
        c.x_label = "prediction";
        c.y_label = "residual (y - prediction)";
        rc = mr_report_chart_scatter(svg, &c, x, y, n, 2000, err);
        if (rc == MR_OK) rc = chart_out(r, svg, "Residuals against predictions (at most 2,000 rows)", err);
    }
    mr_free(x);
    mr_free(y);
    /* Residual distribution per slice. */
    json_t *arr = json_object_get(sl, "slices");
    size_t m = json_array_size(arr);
    if (rc == MR_OK && m) {
        const char *head[6] = {"slice", "q05", "q25", "median", "q75", "q95"};
        const char **cells = mr_calloc(m * 6, sizeof(char *));
        if (!cells) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; i < m; i++) {
            json_t *o = json_array_get(arr, i);
            cells[i * 6] = strs_add(pool, json_text(json_object_get(o, "label")));
            for (size_t k = 0; k < 5; k++) {
                double v = jnumv(json_array_get(json_object_get(o, "residual_quantiles"), k));
                cells[i * 6 + 1 + k] = strs_add(pool, isfinite(v) ? mr_asprintf("%.4g", v) : mr_strdup("-"));
            }
        }
        rc = mr_report_table(r, "Residual quantiles per slice", head, 6, cells, m, NULL, err);
        mr_free(cells);
    }
    return rc;
}

static mr_status sec_checks(mr_report *r, json_t *res, strs *pool, mr_error *err)
{
    json_t *arr = json_object_get(res, "checks");
    size_t n = json_array_size(arr);
    if (!res || !n) {
        return empty_section(r, "checks", "Checks", res ? "The check stage declared no checks." : "No check stage output.", err);
    }
    const char **names = mr_calloc(n, sizeof(char *)), **details = mr_calloc(n, sizeof(char *));
    int *passed = mr_calloc(n, sizeof(int));
    mr_status rc = names && details && passed ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        json_t *o = json_array_get(arr, i);
        names[i] = strs_add(pool, mr_asprintf("%s: %s", json_string_value(json_object_get(o, "kind")) ? json_string_value(json_object_get(o, "kind")) : "check",
                                              json_string_value(json_object_get(o, "name")) ? json_string_value(json_object_get(o, "name")) : "?"));
        details[i] = json_string_value(json_object_get(o, "detail"));
        passed[i] = json_is_true(json_object_get(o, "passed"));
    }
    if (rc == MR_OK) rc = mr_report_add_checks(r, names, passed, details, n, err);
    /* Inference measurements of this machine. */
    json_t *meas = json_object_get(res, "measured");
    if (rc == MR_OK && json_object_size(meas)) {
        strs k = {0}, v = {0};
        const char *key;
        json_t *val;
        json_object_foreach(meas, key, val)
        {
            strs_add(&k, mr_strdup(key));
            strs_add(&v, json_text(val));
        }
        rc = k.n == v.n ? mr_report_kv(r, (const char *const *)k.v, (const char *const *)v.v, k.n, err)
                        : MR_ERR(err, MR_E_NOMEM, "out of memory");
        strs_free(&k);
        strs_free(&v);
    }
    mr_free(names);
    mr_free(details);
    mr_free(passed);
    return rc;
}


/* Tuning: metric by trial with the running best, each numeric parameter
 * against the metric, parameter importances, and the leaderboard. */
static mr_status sec_tuning(mr_report *r, mr_buf *svg, const char *tune_dir, strs *pool, mr_error *err)
{
    json_t *trials = NULL, *study = NULL;
    mr_status rc = mr_report_section(r, "tuning", "Tuning", err);
    if (rc == MR_OK) rc = load_opt(tune_dir, "trials.json", &trials, err);
    if (rc == MR_OK) rc = load_opt(tune_dir, "study.json", &study, err);
    if (rc != MR_OK) goto done;
    if (!json_is_array(trials) || !json_array_size(trials)) {
        rc = mr_report_text(r, "No tune stage in this run.", err);
        goto done;
    }
    size_t n = json_array_size(trials), m = 0;
    double *tx = mr_calloc(n, sizeof(double)), *ty = mr_calloc(n, sizeof(double));
    double *bx = mr_calloc(n, sizeof(double)), *by = mr_calloc(n, sizeof(double));
    int maximize = !json_is_string(json_object_get(study, "direction")) ||
                   strcmp(json_string_value(json_object_get(study, "direction")), "minimize") != 0;
    const char *metric = json_string_value(json_object_get(study, "metric"));
    if (!tx || !ty || !bx || !by) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    double best = NAN;
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        json_t *v = json_object_get(json_array_get(trials, k), "value");
        if (!json_is_number(v)) continue;
        double y = json_number_value(v);
        tx[m] = (double)k;
        ty[m] = y;
        if (isnan(best) || (maximize ? y > best : y < best)) best = y;
        bx[m] = (double)k;
        by[m] = best;
        m++;
    }
    if (rc == MR_OK && m) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Metric by trial";
        c.x_label = "trial";
        c.y_label = metric ? metric : "metric";
        mr_series ser[2] = {{"trial", tx, ty, m, MR_SERIES_POINTS}, {"best so far", bx, by, m, MR_SERIES_STEP}};
        rc = mr_report_chart_line(svg, &c, ser, 2, err);
        if (rc == MR_OK) rc = chart_out(r, svg, "Each finished trial's final metric (pruned trials at the round they stopped)", err);
    }
    /* One scatter per numeric parameter (at most 4). */
    json_t *p0 = json_object_get(json_array_get(trials, 0), "params");
    const char *pname;
    json_t *pv;
    int drawn = 0;
    json_object_foreach(p0, pname, pv)
    {
        if (rc != MR_OK || drawn >= 4 || !json_is_number(pv)) continue;
        size_t q = 0;
        for (size_t k = 0; k < n; k++) {
            json_t *t = json_array_get(trials, k);
            json_t *x = json_object_get(json_object_get(t, "params"), pname), *v = json_object_get(t, "value");
            if (!json_is_number(x) || !json_is_number(v)) continue;
            tx[q] = json_number_value(x);
            ty[q] = json_number_value(v);
            q++;
        }
        if (q < 2) continue;
        mr_chart c;
        mr_chart_init(&c);
        c.title = pname;
        c.x_label = pname;
        c.y_label = metric ? metric : "metric";
        rc = mr_report_chart_scatter(svg, &c, tx, ty, q, 0, err);
        if (rc == MR_OK) rc = chart_out(r, svg, "metric against one parameter", err);
        drawn++;
    }
    /* Importances. */
    json_t *imp = json_object_get(study, "importance");
    size_t ni = json_object_size(imp), k = 0;
    if (rc == MR_OK && ni) {
        const char **names = mr_calloc(ni, sizeof(*names));
        double *vals = mr_calloc(ni, sizeof(double));
        const char *key;
        json_t *val;
        json_object_foreach(imp, key, val)
        {
            if (!names || !vals) break;
            names[k] = key;
            vals[k++] = json_number_value(val);
        }
        if (names && vals) {
            mr_chart c;
            mr_chart_init(&c);
            c.title = "Parameter importance";
            rc = mr_report_chart_bars(svg, &c, names, vals, k, err);
            if (rc == MR_OK) rc = chart_out(r, svg, "Share of the metric's variance explained by each parameter", err);
        }
        mr_free(names);
        mr_free(vals);
    }
    /* Leaderboard: the ten best trials. */
    if (rc == MR_OK) {
        size_t *order = mr_calloc(n, sizeof(size_t));
        const char *header[4] = {"trial", "status", "value", "params"};
        const char **cells = mr_calloc(40, sizeof(*cells));
        size_t rows = 0;
        for (size_t a = 0; order && a < n; a++) order[a] = a;
        for (size_t a = 1; order && a < n; a++) /* insertion sort by value, missing last */
            for (size_t b = a; b > 0; b--) {
                json_t *vb = json_object_get(json_array_get(trials, order[b]), "value");
                json_t *va = json_object_get(json_array_get(trials, order[b - 1]), "value");
                int better = json_is_number(vb) && (!json_is_number(va) || (maximize ? json_number_value(vb) > json_number_value(va)
                                                                                     : json_number_value(vb) < json_number_value(va)));
                if (!better) break;
                size_t t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        for (size_t a = 0; order && cells && a < n && rows < 10; a++, rows++) {
            json_t *t = json_array_get(trials, order[a]);
            cells[rows * 4] = strs_add(pool, mr_asprintf("%zu", order[a]));
            cells[rows * 4 + 1] = json_string_value(json_object_get(t, "status"));
            cells[rows * 4 + 2] = strs_add(pool, json_text(json_object_get(t, "value")));
            cells[rows * 4 + 3] = strs_add(pool, json_text(json_object_get(t, "params")));
        }
        if (order && cells) rc = mr_report_table(r, "Leaderboard (best first)", header, 4, cells, rows, NULL, err);
        mr_free(order);
        mr_free(cells);
    }
    mr_free(tx);
    mr_free(ty);
    mr_free(bx);
    mr_free(by);
done:
    json_decref(trials);
    json_decref(study);
    return rc;
}

mr_status mr_run_report_write(mr_runstore *rs, int64_t run_id, const mr_run_report_inputs *in, const char *html_path,
                              const char *md_path, mr_error *err)
{
    json_t *show = NULL, *mets = NULL, *curves = NULL, *sl = NULL, *errs = NULL, *checks = NULL;
    mr_report *r = NULL;
    mr_buf svg;
    mr_buf_init(&svg);
    strs pool = {0};
    char *title = NULL;
    mr_status rc;
    TRY(load_show(rs, run_id, &show, err));
    TRY(load_opt(in->evaluate, "metrics.json", &mets, err));
    TRY(load_opt(in->evaluate, "curves.json", &curves, err));
    TRY(load_opt(in->evaluate, "slices.json", &sl, err));
    TRY(load_opt(in->evaluate, "errors.json", &errs, err));
    TRY(load_opt(in->check, "results.json", &checks, err));
    if (in->title) {
        title = mr_strdup(in->title);
    } else {
        const char *cwd = json_string_value(json_object_get(json_object_get(show, "run"), "cwd"));
        const char *base = cwd && strrchr(cwd, '/') ? strrchr(cwd, '/') + 1 : cwd ? cwd : "millrace";
        title = mr_asprintf("%s: run %lld", base, (long long)run_id);
    }
    if (!title) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    TRY(mr_report_new(title, &r, err));
    TRY(sec_summary(r, show, mets, &pool, err));
    TRY(sec_timeline(r, show, err));
    TRY(sec_training(r, &svg, show, err));
    TRY(sec_metrics(r, mets, err));
    TRY(sec_curves(r, &svg, curves, err));
    TRY(sec_confusion(r, &svg, mets, &pool, err));
    TRY(sec_importance(r, &svg, in->model, err));
    TRY(sec_slices(r, sl, err));
    TRY(sec_errors(r, errs, &pool, err));
    TRY(sec_residuals(r, &svg, curves, sl, &pool, err));
    TRY(sec_checks(r, checks, &pool, err));
    TRY(sec_tuning(r, &svg, in->tune, &pool, err));
    TRY(mr_report_write(r, html_path, md_path, err));
done:
    mr_free(title);
    strs_free(&pool);
    mr_buf_free(&svg);
    mr_report_free(r);
    json_decref(show);
    json_decref(mets);
    json_decref(curves);
    json_decref(sl);
    json_decref(errs);
    json_decref(checks);
    return rc;
}

/* ---- past runs --------------------------------------------------------------- */

/* Checks the "out" artifact of the last stage of op `op` in show out into
 * dir/<stage>; *path_out NULL when the run has none. */
static mr_status checkout_stage(mr_workspace *ws, json_t *show, const char *op, const char *dir, char **path_out,
                                mr_error *err)
{
    *path_out = NULL;
    json_t *found = NULL, *s;
    size_t k;
    json_array_foreach(json_object_get(show, "stages"), k, s)
    {
        const char *sop = json_string_value(json_object_get(s, "op"));
        if (sop && !strcmp(sop, op) && json_is_string(json_object_get(json_object_get(s, "outputs"), "out"))) found = s;
    }
    if (!found) return MR_OK;
    const char *id = json_string_value(json_object_get(json_object_get(found, "outputs"), "out"));
    mr_artifact a;
    if (mr_artifact_parse(id, &a) != MR_OK) return MR_ERR(err, MR_E_CORRUPT, "run store: bad artifact id '%s'", id);
    if (!mr_store_has(ws->store, &a)) {
        mr_log(MR_LOG_WARN, "stage '%s': its output %s is no longer in the store (gc?); left out of the report",
               json_string_value(json_object_get(found, "stage")), id);
        return MR_OK;
    }
    char *dest = mr_asprintf("%s/%s", dir, json_string_value(json_object_get(found, "stage")));
    if (!dest) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_store_checkout(ws->store, NULL, &a, dest, err);
    if (rc == MR_OK) *path_out = dest;
    else mr_free(dest);
    return rc;
}

typedef struct run_art {
    json_t *show;
    char *eval, *model, *check, *tune;
} run_art;

static void run_art_free(run_art *a)
{
    json_decref(a->show);
    mr_free(a->eval);
    mr_free(a->model);
    mr_free(a->check);
    mr_free(a->tune);
}

static mr_status run_artifacts(mr_workspace *ws, int64_t run, const char *tmp, run_art *a, mr_error *err)
{
    memset(a, 0, sizeof(*a));
    mr_status rc = load_show(ws->rs, run, &a->show, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->show, "evaluate", tmp, &a->eval, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->show, "train", tmp, &a->model, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->show, "check", tmp, &a->check, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->show, "tune", tmp, &a->tune, err);
    return rc;
}

mr_status mr_run_report_regenerate(mr_workspace *ws, int64_t run_id, const char *html_path, const char *md_path,
                                   mr_error *err)
{
    char *tmp = NULL;
    run_art a;
    memset(&a, 0, sizeof(a));
    mr_status rc = mr_fs_mkdtemp(mr_store_root(ws->store), "tmp/report", &tmp, err);
    if (rc == MR_OK) rc = run_artifacts(ws, run_id, tmp, &a, err);
    if (rc == MR_OK) {
        mr_run_report_inputs in = {NULL, a.eval, a.model, a.check, a.tune};
        rc = mr_run_report_write(ws->rs, run_id, &in, html_path, md_path, err);
    }
    run_art_free(&a);
    if (tmp) mr_fs_rmtree(tmp, NULL);
    mr_free(tmp);
    return rc;
}

mr_status mr_run_compare_html(mr_workspace *ws, int64_t ra, int64_t rb, const char *html_path, mr_error *err)
{
    char *tmp = NULL, *title = NULL;
    run_art A, B;
    memset(&A, 0, sizeof(A));
    memset(&B, 0, sizeof(B));
    json_t *cmp = NULL, *ca = NULL, *cb = NULL;
    mr_report *r = NULL;
    mr_buf svg, cb_buf;
    mr_buf_init(&svg);
    mr_buf_init(&cb_buf);
    strs pool = {0};
    char *da = NULL, *db = NULL;
    mr_status rc;
    TRY(mr_fs_mkdtemp(mr_store_root(ws->store), "tmp/compare", &tmp, err));
    da = mr_asprintf("%s/a", tmp);
    db = mr_asprintf("%s/b", tmp);
    if (!da || !db) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    TRY(mr_fs_mkdirs(da, err));
    TRY(mr_fs_mkdirs(db, err));
    TRY(run_artifacts(ws, ra, da, &A, err));
    TRY(run_artifacts(ws, rb, db, &B, err));
    TRY(mr_runstore_compare_json(ws->rs, ra, rb, &cb_buf, err));
    cmp = json_loadb(cb_buf.data ? cb_buf.data : "", cb_buf.len, 0, NULL);
    if (!cmp) {
        rc = MR_ERR(err, MR_E_PARSE, "run store: unreadable comparison");
        goto done;
    }
    TRY(load_opt(A.eval, "curves.json", &ca, err));
    TRY(load_opt(B.eval, "curves.json", &cb, err));
    title = mr_asprintf("Run %lld vs run %lld", (long long)ra, (long long)rb);
    if (!title) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    TRY(mr_report_new(title, &r, err));
    char la[32], lb[32];
    snprintf(la, sizeof(la), "run %lld", (long long)ra);
    snprintf(lb, sizeof(lb), "run %lld", (long long)rb);
    /* Summary: both runs. */
    TRY(mr_report_section(r, "summary", "Runs", err));
    {
        const char *fields[] = {"id", "status", "started", "duration_s", "git_commit", "git_dirty", "argv", "overrides"};
        size_t nf = sizeof(fields) / sizeof(*fields);
        const char *head[3] = {"", la, lb};
        const char **cells = mr_calloc(nf * 3, sizeof(char *));
        if (!cells) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        json_t *runa = json_object_get(A.show, "run"), *runb = json_object_get(B.show, "run");
        for (size_t i = 0; i < nf; i++) {
            cells[i * 3] = fields[i];
            cells[i * 3 + 1] = strs_add(&pool, json_text(json_object_get(runa, fields[i])));
            cells[i * 3 + 2] = strs_add(&pool, json_text(json_object_get(runb, fields[i])));
        }
        rc = mr_report_table(r, "Run summaries", head, 3, cells, nf, NULL, err);
        mr_free(cells);
        if (rc != MR_OK) goto done;
    }
    /* Params, changed ones flagged. */
    TRY(mr_report_section(r, "params", "Params", err));
    {
        json_t *ps = json_object_get(cmp, "params");
        size_t n = json_array_size(ps);
        const char *head[3] = {"param", la, lb};
        const char **cells = mr_calloc(n * 3 + 1, sizeof(char *));
        unsigned char *flag = mr_calloc(n + 1, 1);
        if (!cells || !flag) {
            mr_free(cells);
            mr_free(flag);
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *p = json_array_get(ps, i);
            cells[i * 3] = json_string_value(json_object_get(p, "path"));
            cells[i * 3 + 1] = strs_add(&pool, json_text(json_object_get(p, "a")));
            cells[i * 3 + 2] = strs_add(&pool, json_text(json_object_get(p, "b")));
            flag[i] = json_is_true(json_object_get(p, "changed"));
        }
        rc = n ? mr_report_table(r, "Params (changed rows highlighted)", head, 3, cells, n, flag, err)
               : mr_report_text(r, "Neither run has params.", err);
        mr_free(cells);
        mr_free(flag);
        if (rc != MR_OK) goto done;
    }
    /* Final metrics with deltas, and a chart of the deltas. */
    TRY(mr_report_section(r, "metrics", "Metrics", err));
    {
        json_t *ms = json_object_get(cmp, "metrics");
        size_t n = json_array_size(ms), nd = 0;
        const char *head[4] = {"metric", la, lb, "delta (b - a)"};
        const char **cells = mr_calloc(n * 4 + 1, sizeof(char *)), **dl = mr_calloc(n + 1, sizeof(char *));
        double *dv = mr_calloc(n + 1, sizeof(double));
        if (!cells || !dl || !dv) {
            mr_free(cells);
            mr_free(dl);
            mr_free(dv);
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *m = json_array_get(ms, i);
            cells[i * 4] = strs_add(&pool, mr_asprintf("%s.%s", json_string_value(json_object_get(m, "stage")),
                                                       json_string_value(json_object_get(m, "name"))));
            cells[i * 4 + 1] = strs_add(&pool, json_text(json_object_get(m, "a")));
            cells[i * 4 + 2] = strs_add(&pool, json_text(json_object_get(m, "b")));
            cells[i * 4 + 3] = strs_add(&pool, json_text(json_object_get(m, "delta")));
            double d = jnumv(json_object_get(m, "delta"));
            if (isfinite(d) && nd < 30) {
                dl[nd] = cells[i * 4];
                dv[nd++] = d;
            }
        }
        rc = n ? mr_report_table(r, "Final metrics", head, 4, cells, n, NULL, err) : mr_report_text(r, "Neither run recorded metrics.", err);
        if (rc == MR_OK && nd) {
            mr_chart c;
            mr_chart_init(&c);
            c.title = "Metric deltas (b - a)";
            rc = mr_report_chart_bars(&svg, &c, dl, dv, nd, err);
            if (rc == MR_OK) rc = chart_out(r, &svg, "Change of each final metric from the first run to the second", err);
        }
        mr_free(cells);
        mr_free(dl);
        mr_free(dv);
        if (rc != MR_OK) goto done;
    }
    /* Curves overlaid. */
    TRY(mr_report_section(r, "curves", "Curves", err));
    {
        json_t *cv[2] = {ca, cb};
        const char *names[2] = {la, lb};
        int any = 0, d;
        for (size_t k = 0; k < sizeof(curve_specs) / sizeof(*curve_specs); k++) {
            TRY(draw_curve(r, &svg, &curve_specs[k], cv, names, 2, &d, err));
            any |= d;
        }
        if (!any) TRY(mr_report_text(r, "Neither run has evaluation curves.", err));
    }
    /* Stages whose key changed. */
    TRY(mr_report_section(r, "stages", "Stages", err));
    {
        json_t *ss = json_object_get(cmp, "stages");
        size_t n = json_array_size(ss);
        const char *head[2] = {"stage", "key changed"};
        const char **cells = mr_calloc(n * 2 + 1, sizeof(char *));
        unsigned char *flag = mr_calloc(n + 1, 1);
        if (!cells || !flag) {
            mr_free(cells);
            mr_free(flag);
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_array_get(ss, i);
            cells[i * 2] = json_string_value(json_object_get(s, "stage"));
            flag[i] = json_is_true(json_object_get(s, "changed"));
            cells[i * 2 + 1] = flag[i] ? "yes" : "no";
        }
        rc = n ? mr_report_table(r, "Stages (a changed key is highlighted)", head, 2, cells, n, flag, err)
               : mr_report_text(r, "No stages recorded.", err);
        mr_free(cells);
        mr_free(flag);
        if (rc != MR_OK) goto done;
    }
    TRY(mr_report_write(r, html_path, NULL, err));
done:
    run_art_free(&A);
    run_art_free(&B);
    json_decref(cmp);
    json_decref(ca);
    json_decref(cb);
    mr_report_free(r);
    mr_buf_free(&svg);
    mr_buf_free(&cb_buf);
    strs_free(&pool);
    mr_free(title);
    mr_free(da);
    mr_free(db);
    if (tmp) mr_fs_rmtree(tmp, NULL);
    mr_free(tmp);
    return rc;
}
