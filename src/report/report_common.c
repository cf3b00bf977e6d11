/* Helpers shared by the run report and the comparison page (report_int.h):
 * owned-string pools, JSON artifact text, the evaluation-curve charts, and
 * checking a run's stage outputs out of the store. */
#include "report_int.h"

#include "millrace/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mr__strs_add(mr__strs *s, char *owned)
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

void mr__strs_free(mr__strs *s)
{
    for (size_t i = 0; i < s->n; i++) mr_free(s->v[i]);
    mr_free(s->v);
    memset(s, 0, sizeof(*s));
}

double mr__jnum(json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

/* Shortest "%.{15,16,17}g" text that reads back as d. */
static void shortest(double d, char *buf, size_t len)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
}

/* Compact JSON with shortest round-trip numbers (keys in stored order). */
static mr_status json_write(json_t *v, mr_buf *b)
{
    mr_status st = MR_OK;
    char num[40];
    if (json_is_string(v)) {
        st = mr_buf_json_str(b, json_string_value(v));
    } else if (json_is_integer(v)) {
        st = mr_buf_printf(b, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        shortest(json_real_value(v), num, sizeof(num));
        st = mr_buf_puts(b, num);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        st = mr_buf_puts(b, "[");
        json_array_foreach(v, i, c)
        {
            if (st == MR_OK && i) st = mr_buf_puts(b, ",");
            if (st == MR_OK) st = json_write(c, b);
        }
        if (st == MR_OK) st = mr_buf_puts(b, "]");
    } else if (json_is_object(v)) {
        const char *k;
        json_t *c;
        int first = 1;
        st = mr_buf_puts(b, "{");
        json_object_foreach(v, k, c)
        {
            if (st == MR_OK && !first) st = mr_buf_puts(b, ",");
            if (st == MR_OK) st = mr_buf_json_str(b, k);
            if (st == MR_OK) st = mr_buf_puts(b, ":");
            if (st == MR_OK) st = json_write(c, b);
            first = 0;
        }
        if (st == MR_OK) st = mr_buf_puts(b, "}");
    } else {
        st = mr_buf_puts(b, json_is_true(v) ? "true" : json_is_false(v) ? "false" : "null");
    }
    return st;
}

char *mr__json_text(json_t *v)
{
    if (json_is_string(v)) return mr_strdup(json_string_value(v));
    if (json_is_real(v)) return mr_asprintf("%.6g", json_real_value(v));
    mr_buf b;
    mr_buf_init(&b);
    char *r = json_write(v, &b) == MR_OK ? mr_strdup(b.data ? b.data : "") : NULL;
    mr_buf_free(&b);
    return r;
}

char *mr__value_text(const mr_value *v)
{
    mr_buf b;
    mr_buf_init(&b);
    char *r = mr_runstore_value_text(v, &b) == MR_OK ? mr_strdup(b.data ? b.data : "") : NULL;
    mr_buf_free(&b);
    return r;
}

mr_status mr__load_json(const char *dir, const char *name, json_t **out, mr_error *err)
{
    *out = NULL;
    if (!dir) return MR_OK;
    char *path = mr_path_join(dir, name);
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    if (mr_fs_exists(path)) {
        json_error_t je;
        uint64_t oom0 = mr_alloc_failures_here();
        *out = json_load_file(path, 0, &je);
        if (mr_alloc_failures_here() != oom0) { /* (jansson may also drop a character) */
            json_decref(*out);
            *out = NULL;
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", path);
        } else if (!*out) rc = MR_ERR(err, MR_E_PARSE, "%s:%d: %s", path, je.line, je.text);
    }
    mr_free(path);
    return rc;
}

mr_status mr__chart_out(mr_report *r, mr_buf *svg, const char *caption, mr_error *err)
{
    mr_status rc = mr_report_svg(r, caption, svg->data, err);
    svg->len = 0;
    if (svg->data) svg->data[0] = '\0';
    return rc;
}

/* ---- evaluation curves --------------------------------------------------- */

const mr__curve_spec mr__curve_specs[] = {
    {"roc", "y", "ROC", "false positive rate", "true positive rate", "ROC curve", 1, 1, 0},
    {"pr", "y", "Precision-recall", "recall", "precision", "Precision-recall curve", 0, 1, 1},
    {"calibration", "y", "Calibration", "mean predicted probability", "fraction positive", "Reliability diagram", 1, 1, 0},
    {"gain", "y", "Cumulative gain", "fraction of population", "share of positives captured", "Cumulative gain by decile", 1, 1, 0},
    {"gain", "lift", "Lift", "fraction of population", "lift", "Lift by decile", 0, 0, 0},
};
const size_t mr__n_curve_specs = sizeof(mr__curve_specs) / sizeof(*mr__curve_specs);

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
        (*x)[i] = mr__jnum(json_array_get(jx, i));
        (*y)[i] = mr__jnum(json_array_get(jy, i));
    }
    return n;
}

static int count_finite(const double *x, const double *y, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += isfinite(x[i]) && isfinite(y[i]);
    return k;
}

#define MAX_CURVE_RUNS 10 /* one palette colour each */

mr_status mr__draw_curve(mr_report *r, mr_buf *svg, const mr__curve_spec *cs, json_t *const *curves,
                         const char *const *names, size_t n_runs, int *drawn, mr_error *err)
{
    mr_series s[MAX_CURVE_RUNS];
    double *xs[MAX_CURVE_RUNS] = {0}, *ys[MAX_CURVE_RUNS] = {0};
    size_t ns = 0;
    mr_status rc = MR_OK;
    *drawn = 0;
    memset(s, 0, sizeof(s));
    for (size_t k = 0; k < n_runs && k < MAX_CURVE_RUNS; k++) {
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
        if (rc == MR_OK) rc = mr__chart_out(r, svg, cs->caption, err);
        *drawn = rc == MR_OK;
    }
    for (size_t k = 0; k < MAX_CURVE_RUNS; k++) {
        mr_free(xs[k]);
        mr_free(ys[k]);
    }
    return rc;
}

/* ---- a run's artifacts ---------------------------------------------------- */

/* Checks the "out" artifact of the last stage of op `op` in the run out
 * into dir/<stage>; *path_out NULL when the run has none. */
static mr_status checkout_stage(mr_workspace *ws, const mr_run_detail *d, const char *op, const char *dir,
                                char **path_out, const char **stage_out, mr_error *err)
{
    const mr_stage_run *found = NULL;
    const char *id = NULL;
    *path_out = NULL;
    *stage_out = NULL;
    for (size_t i = 0; i < d->n_stages; i++) {
        const mr_stage_run *s = &d->stages[i];
        if (!s->op || strcmp(s->op, op)) continue;
        for (size_t k = 0; k < s->n_outputs; k++)
            if (!strcmp(s->outputs[k].name, "out")) {
                found = s;
                id = s->outputs[k].artifact;
            }
    }
    if (!found) return MR_OK;
    mr_artifact a;
    if (mr_artifact_parse(id, &a) != MR_OK) return MR_ERR(err, MR_E_CORRUPT, "run store: bad artifact id '%s'", id);
    if (!mr_store_has(ws->store, &a)) {
        mr_log(MR_LOG_WARN, "stage '%s': its output %s is no longer in the store (gc?); left out of the report",
               found->stage, id);
        return MR_OK;
    }
    char *dest = mr_asprintf("%s/%s", dir, found->stage);
    if (!dest) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_store_checkout(ws->store, NULL, &a, dest, err);
    if (rc == MR_OK) {
        *path_out = dest;
        *stage_out = found->stage;
    } else {
        mr_free(dest);
    }
    return rc;
}

void mr__run_art_free(mr__run_art *a)
{
    mr_run_detail_free(a->detail);
    mr_free(a->eval);
    mr_free(a->model);
    mr_free(a->check);
    mr_free(a->tune);
    memset(a, 0, sizeof(*a));
}

mr_status mr__run_artifacts(mr_workspace *ws, int64_t run, const char *tmp, mr__run_art *a, mr_error *err)
{
    memset(a, 0, sizeof(*a));
    mr_status rc = mr_runstore_run_detail(ws->rs, run, &a->detail, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->detail, "evaluate", tmp, &a->eval, &a->eval_stage, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->detail, "train", tmp, &a->model, &a->model_stage, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->detail, "check", tmp, &a->check, &a->check_stage, err);
    if (rc == MR_OK) rc = checkout_stage(ws, a->detail, "tune", tmp, &a->tune, &a->tune_stage, err);
    return rc;
}
