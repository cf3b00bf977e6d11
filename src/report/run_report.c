/* Run reports (include/millrace/runreport.h): reads the run store's view of
 * one run and the JSON artifacts of its evaluate/check/tune stages and the
 * model's summary, and renders them with the report toolkit. Nothing here
 * computes a metric: every number comes from an artifact or the run store.
 * An artifact report (the report op) reads only the records of the stages
 * it reports on, and writes no run id, time, path or timing. */
#include "report_int.h"

#include "millrace/model.h"
#include "millrace/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x)                              \
    do {                                    \
        if ((rc = (x)) != MR_OK) goto done; \
    } while (0)

#define MAX_TRAINING_CHARTS 6
#define MAX_SERIES_PER_CHART 4

/* One stage a report draws from: its role, the stage (NULL: a plain file)
 * and where its output was read. */
typedef struct reported {
    const char *role, *stage, *path;
} reported;

typedef struct rep {
    mr_report *r;
    mr_buf svg;
    mr__strs pool;
    const mr_run_report_inputs *in;
    mr_runstore *rs;
    mr_run_detail *d; /* the run */
    reported src[4];
    size_t n_src;
    json_t *mets, *curves, *sl, *errs, *checks, *trials, *study;
} rep;

static mr_status nomem(mr_error *err) { return MR_ERR(err, MR_E_NOMEM, "out of memory"); }

/* A section with only a sentence saying why it is empty. */
static mr_status empty_section(mr_report *r, const char *id, const char *title, const char *why, mr_error *err)
{
    mr_status rc = mr_report_section(r, id, title, err);
    return rc == MR_OK ? mr_report_text(r, why, err) : rc;
}

/* Whether the report draws from stage (an artifact report reads only those). */
static int reports_on(const rep *p, const char *stage)
{
    if (!p->in->artifact) return 1;
    for (size_t i = 0; i < p->n_src; i++)
        if (p->src[i].stage && stage && !strcmp(p->src[i].stage, stage)) return 1;
    return 0;
}

static const char *output_of(const mr_stage_run *s, const char *name)
{
    for (size_t k = 0; s && k < s->n_outputs; k++)
        if (!strcmp(s->outputs[k].name, name)) return s->outputs[k].artifact;
    return NULL;
}

static mr_stage_state stage_state(const char *st)
{
    if (!strcmp(st, "cached")) return MR_STAGE_CACHED;
    if (!strcmp(st, "failed") || !strcmp(st, "interrupted")) return MR_STAGE_FAILED;
    if (!strcmp(st, "skipped")) return MR_STAGE_SKIPPED;
    return MR_STAGE_EXECUTED;
}

/* ---- summary -------------------------------------------------------------- */

typedef struct kv {
    mr__strs keys, vals;
} kv;

static void kv_add(kv *t, char *key, char *val)
{
    if (!key || !val) {
        mr_free(key);
        mr_free(val);
        key = val = NULL;
    }
    mr__strs_add(&t->keys, key ? key : mr_strdup("?"));
    mr__strs_add(&t->vals, val ? val : mr_strdup("?"));
}

static void kv_free(kv *t)
{
    mr__strs_free(&t->keys);
    mr__strs_free(&t->vals);
}

/* What belongs to the run, not to its artifacts (regenerated reports only). */
static void run_facts(const mr_run_summary *run, kv *t)
{
    char iso[32];
    kv_add(t, mr_strdup("id"), mr_asprintf("%lld", (long long)run->id));
    if (run->name) kv_add(t, mr_strdup("name"), mr_strdup(run->name));
    if (run->n_tags) {
        mr_buf b;
        mr_buf_init(&b);
        for (size_t i = 0; i < run->n_tags; i++)
            mr_buf_printf(&b, "%s%s%s%s", i ? ", " : "", run->tags[i].key, run->tags[i].value ? "=" : "",
                          run->tags[i].value ? run->tags[i].value : "");
        kv_add(t, mr_strdup("tags"), mr_strdup(b.data ? b.data : ""));
        mr_buf_free(&b);
    }
    kv_add(t, mr_strdup("status"), mr_strdup(run->status ? run->status : "?"));
    mr_iso_time(run->started, iso, sizeof(iso));
    kv_add(t, mr_strdup("started"), mr_strdup(iso));
    if (!isnan(run->ended)) kv_add(t, mr_strdup("duration_s"), mr_asprintf("%.6g", run->ended - run->started));
    if (run->git_commit && run->git_commit[0]) {
        kv_add(t, mr_strdup("git_commit"), mr_strdup(run->git_commit));
        kv_add(t, mr_strdup("git_dirty"), mr_strdup(run->git_dirty ? "true" : "false"));
    }
    if (run->argv && run->argv[0]) kv_add(t, mr_strdup("argv"), mr_strdup(run->argv));
    if (run->overrides && run->overrides[0]) kv_add(t, mr_strdup("overrides"), mr_strdup(run->overrides));
    kv_add(t, mr_strdup("smoke"), mr_strdup(run->smoke ? "true" : "false"));
}

/* The outcome of a reported stage: in an artifact, what its output says
 * (a check passed or failed; anything else published is ok); in a
 * regenerated report, what the run did with it (executed, cached, failed). */
static const char *outcome(const rep *p, const reported *s, const mr_stage_run *rec)
{
    if (p->in->artifact) {
        if (strcmp(s->role, "check")) return "ok";
        json_t *passed = json_object_get(p->checks, "passed");
        return json_is_true(passed) ? "passed" : json_is_false(passed) ? "failed (results published)" : "ok";
    }
    if (!s->stage) return "a file";
    return rec ? rec->status : "not recorded";
}

static mr_status reported_table(rep *p, mr_error *err)
{
    const char *head[4] = {"stage", "reports", "output", "status"};
    const char *cells[16];
    unsigned char flag[4] = {0};
    for (size_t i = 0; i < p->n_src; i++) {
        const reported *s = &p->src[i];
        const mr_stage_run *rec = s->stage ? mr_run_detail_stage(p->d, s->stage) : NULL;
        const char *out = output_of(rec, "out");
        cells[i * 4] = s->stage ? s->stage : "-";
        cells[i * 4 + 1] = s->role;
        cells[i * 4 + 2] = out ? out : s->stage ? "-" : s->path;
        cells[i * 4 + 3] = outcome(p, s, rec);
        flag[i] = !strncmp(cells[i * 4 + 3], "failed", 6);
    }
    if (!p->n_src) return mr_report_text(p->r, "This report draws on no evaluate, model, check or tune output.", err);
    return mr_report_table(p->r, "Stages reported", head, 4, cells, p->n_src, flag, err);
}

/* Params of the stages reported on, from their key documents ("params" is
 * {"a.b": value}: the params each stage's key covers). */
static mr_status reported_params(const rep *p, kv *t, mr_error *err)
{
    mr_status rc = MR_OK;
    mr_value *all = mr_value_new(MR_V_MAP);
    if (!all) return nomem(err);
    for (size_t i = 0; i < p->n_src && rc == MR_OK; i++) {
        const mr_stage_run *rec = p->src[i].stage ? mr_run_detail_stage(p->d, p->src[i].stage) : NULL;
        char *doc = NULL;
        mr_value *v = NULL;
        if (!rec || !rec->key || !rec->key[0] || mr_runstore_cache_get(p->rs, rec->key, NULL, NULL, &doc, NULL) != MR_OK)
            continue;
        mr_error e;
        mr_error_init(&e);
        if (doc && mr_yaml_parse(doc, strlen(doc), "key document", &v, &e) == MR_OK) {
            const mr_value *ps = mr_value_get(v, "params");
            for (size_t k = 0; ps && ps->kind == MR_V_MAP && k < ps->n && rc == MR_OK; k++)
                if (!mr_value_get(all, ps->keys[k]))
                    rc = mr_value_map_set(all, ps->keys[k], mr_value_clone(ps->items[k])) == MR_OK ? MR_OK : nomem(err);
        } else if (e.code == MR_E_NOMEM) {
            rc = nomem(err);
        }
        mr_value_free(v);
        mr_free(doc);
    }
    /* Sorted by path, as the run's params are. */
    size_t *idx = mr_calloc(all->n + 1, sizeof(*idx));
    if (!idx && rc == MR_OK) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < all->n; i++) {
        size_t j = i;
        for (; j > 0 && strcmp(all->keys[idx[j - 1]], all->keys[i]) > 0; j--) idx[j] = idx[j - 1];
        idx[j] = i;
    }
    for (size_t i = 0; rc == MR_OK && i < all->n; i++)
        kv_add(t, mr_asprintf("params.%s", all->keys[idx[i]]), mr__value_text(all->items[idx[i]]));
    mr_free(idx);
    mr_value_free(all);
    return rc;
}

/* The run's params, flattened to params.a.b. */
static void run_params(const mr_value *v, const char *prefix, kv *t)
{
    if (v->kind == MR_V_MAP && (v->n || !strcmp(prefix, "params"))) {
        for (size_t k = 0; k < v->n; k++) {
            char *path = mr_asprintf("%s.%s", prefix, v->keys[k]);
            if (path) run_params(v->items[k], path, t);
            mr_free(path);
        }
        return;
    }
    kv_add(t, mr_strdup(prefix), mr__value_text(v));
}

static mr_status sec_summary(rep *p, mr_error *err)
{
    kv t = {{0}, {0}};
    mr_status rc = mr_report_section(p->r, "summary", p->in->artifact ? "Summary" : "Run summary", err);
    if (rc == MR_OK && !p->in->artifact) run_facts(&p->d->run, &t);
    /* Data sizes: rows recorded by the stages (train_rows, eval_rows) and by the evaluate artifact. */
    for (size_t i = 0; i < p->d->run.n_finals; i++) {
        const mr_run_final *f = &p->d->run.finals[i];
        if ((strstr(f->name, "_rows") || !strcmp(f->name, "rows")) && reports_on(p, f->stage))
            kv_add(&t, mr_asprintf("%s.%s", f->stage, f->name), mr_asprintf("%.0f", f->value));
    }
    if (p->mets)
        kv_add(&t, mr_strdup("evaluation rows"),
               mr_asprintf("%.0f of %.0f (%s tier)", mr__jnum(json_object_get(p->mets, "rows")),
                           mr__jnum(json_object_get(p->mets, "rows_total")),
                           json_string_value(json_object_get(p->mets, "tier"))));
    if (rc == MR_OK && p->in->artifact)
        rc = reported_params(p, &t, err);
    else if (rc == MR_OK)
        run_params(p->d->run.params, "params", &t);
    if (rc == MR_OK && t.keys.n != t.vals.n) rc = nomem(err);
    if (rc == MR_OK && t.keys.n)
        rc = mr_report_kv(p->r, (const char *const *)t.keys.v, (const char *const *)t.vals.v, t.keys.n, err);
    if (rc == MR_OK) rc = reported_table(p, err);
    kv_free(&t);
    return rc;
}

/* ---- timeline and training curves ---------------------------------------- */

static mr_status sec_timeline(rep *p, mr_error *err)
{
    if (p->in->artifact)
        return empty_section(p->r, "timeline", "Stage timeline",
                             "Timings belong to a run, not to the artifacts this report reads: `millrace report RUN` "
                             "draws the stage timeline of a run.",
                             err);
    size_t n = p->d->n_stages, m = 0;
    double t0 = p->d->run.started;
    mr_report_stage *st = mr_calloc(n ? n : 1, sizeof(*st));
    if (!st) return nomem(err);
    for (size_t k = 0; k < n; k++) {
        const mr_stage_run *s = &p->d->stages[k];
        double u = s->user_s, y = s->sys_s;
        st[m].name = s->stage;
        st[m].start = isfinite(s->started) && isfinite(t0) && s->started > 0 ? s->started - t0 : 0;
        st[m].wall = isfinite(s->wall_s) ? s->wall_s : 0;
        st[m].cpu = (isfinite(u) ? u : 0) + (isfinite(y) ? y : 0);
        st[m].peak_rss = s->max_rss_kb > 0 ? (uint64_t)s->max_rss_kb * 1024u : 0;
        st[m].state = stage_state(s->status);
        m++;
    }
    mr_status rc = m ? mr_report_add_timeline(p->r, st, m, mr_cpu_count(), err)
                     : empty_section(p->r, "timeline", "Stage timeline", "No stage of this run is recorded yet.", err);
    mr_free(st);
    return rc;
}

/* A tune stage's per-trial curves ("trial.N.metric") belong to the tuning
 * section's one chart of all trials. */
static int is_trial_curve(const rep *p, const mr_run_point *m)
{
    const mr_stage_run *s = mr_run_detail_stage(p->d, m->stage);
    return !strncmp(m->name, "trial.", 6) && s && s->op && !strcmp(s->op, "tune");
}

/* Whether the training section draws m: a point of a per-round curve of
 * the model stage (artifact) or of any stage (regenerated). */
static int training_point(const rep *p, const mr_run_point *m)
{
    if (is_trial_curve(p, m)) return 0;
    if (p->in->artifact) return p->in->model_stage && !strcmp(m->stage, p->in->model_stage);
    return 1;
}

/* The name a curve is grouped under: after its "train."/"valid." prefix. */
static const char *group_of(const char *name) { return strchr(name, '.') ? strchr(name, '.') + 1 : name; }

/* One chart of every curve (stage, name) whose group is g, at most 4 series. */
static mr_status training_chart(rep *p, const char *g, mr_error *err)
{
    mr_series s[MAX_SERIES_PER_CHART];
    double *bufs[2 * MAX_SERIES_PER_CHART] = {0};
    char *names[MAX_SERIES_PER_CHART] = {0};
    size_t ns = 0;
    mr_status rc = MR_OK;
    const mr_run_point *pts = p->d->metrics;
    for (size_t i = 0; i < p->d->n_metrics && ns < MAX_SERIES_PER_CHART;) {
        size_t j = i;
        while (j < p->d->n_metrics && !strcmp(pts[j].stage, pts[i].stage) && !strcmp(pts[j].name, pts[i].name)) j++;
        size_t n = j - i;
        if (n >= 2 && training_point(p, &pts[i]) && !strcmp(group_of(pts[i].name), g)) {
            double *x = mr_malloc(n * sizeof(double)), *y = mr_malloc(n * sizeof(double));
            names[ns] = mr_asprintf("%s (%s)", pts[i].name, pts[i].stage);
            bufs[2 * ns] = x;
            bufs[2 * ns + 1] = y;
            if (!x || !y || !names[ns]) {
                mr_free(names[ns]);
                names[ns] = NULL;
                rc = nomem(err);
                break;
            }
            for (size_t k = 0; k < n; k++) {
                x[k] = (double)pts[i + k].step + 1;
                y[k] = pts[i + k].value;
            }
            s[ns] = (mr_series){names[ns], x, y, n, MR_SERIES_LINE};
            ns++;
        }
        i = j;
    }
    if (rc == MR_OK && ns) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = g;
        c.x_label = "round";
        c.y_label = g;
        rc = mr_report_chart_line(&p->svg, &c, s, ns, err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, g, err);
    }
    for (size_t i = 0; i < 2 * MAX_SERIES_PER_CHART; i++) mr_free(bufs[i]);
    for (size_t i = 0; i < MAX_SERIES_PER_CHART; i++) mr_free(names[i]);
    return rc;
}

/* Training curves: every recorded metric with more than one step, grouped
 * by the name after its "train."/"valid." prefix, one chart per group. */
static mr_status sec_training(rep *p, mr_error *err)
{
    mr_status rc = mr_report_section(p->r, "training", "Training curves", err);
    const char *groups[MAX_TRAINING_CHARTS];
    size_t ng = 0;
    const mr_run_point *pts = p->d->metrics;
    for (size_t i = 0; rc == MR_OK && i < p->d->n_metrics && ng < MAX_TRAINING_CHARTS;) {
        size_t j = i;
        while (j < p->d->n_metrics && !strcmp(pts[j].stage, pts[i].stage) && !strcmp(pts[j].name, pts[i].name)) j++;
        const char *g = group_of(pts[i].name);
        int seen = 0;
        for (size_t k = 0; k < ng; k++) seen |= !strcmp(groups[k], g);
        if (j - i >= 2 && training_point(p, &pts[i]) && !seen) {
            groups[ng++] = g;
            rc = training_chart(p, g, err);
        }
        i = j;
    }
    if (rc == MR_OK && !ng)
        rc = mr_report_text(p->r, "No per-round metrics were recorded (train without a validation set, or no train stage).",
                            err);
    return rc;
}

/* ---- evaluation ----------------------------------------------------------- */

static mr_status sec_metrics(rep *p, mr_error *err)
{
    json_t *ms = json_object_get(p->mets, "metrics");
    size_t n = json_object_size(ms);
    if (!n) return empty_section(p->r, "metrics", "Metrics", "No evaluate stage output: no metrics.", err);
    mr_report_metric *rm = mr_calloc(n, sizeof(*rm));
    if (!rm) return nomem(err);
    size_t k = 0;
    const char *name;
    json_t *v;
    json_object_foreach(ms, name, v)
    {
        rm[k++] = (mr_report_metric){name, mr__jnum(json_object_get(v, "value")), mr__jnum(json_object_get(v, "lo")),
                                     mr__jnum(json_object_get(v, "hi"))};
    }
    mr_status rc = mr_report_add_metrics(p->r, rm, k, err);
    mr_free(rm);
    json_object_foreach(json_object_get(p->mets, "undefined"), name, v)
    {
        if (rc != MR_OK) break;
        char *t = mr_asprintf("%s is undefined on this data: %s", name, json_string_value(v) ? json_string_value(v) : "");
        rc = t ? mr_report_text(p->r, t, err) : nomem(err);
        mr_free(t);
    }
    return rc;
}

/* Multiclass: one-vs-rest ROC per class, up to 8 classes in one chart. */
static mr_status ovr_chart(rep *p, json_t *ovr, int *any, mr_error *err)
{
    mr_series s[8];
    double *xs[8] = {0}, *ys[8] = {0};
    char lab[8][32];
    size_t ns = 0;
    mr_status rc = MR_OK;
    for (size_t k = 0; k < json_array_size(ovr) && ns < 8; k++) {
        json_t *c = json_array_get(ovr, k), *jx = json_object_get(c, "x"), *jy = json_object_get(c, "y");
        size_t n = json_array_size(jx) < json_array_size(jy) ? json_array_size(jx) : json_array_size(jy);
        if (!n) continue;
        xs[ns] = mr_malloc(n * sizeof(double));
        ys[ns] = mr_malloc(n * sizeof(double));
        if (!xs[ns] || !ys[ns]) {
            rc = nomem(err);
            ns++;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            xs[ns][i] = mr__jnum(json_array_get(jx, i));
            ys[ns][i] = mr__jnum(json_array_get(jy, i));
        }
        snprintf(lab[ns], sizeof(lab[ns]), "class %zu", k);
        s[ns] = (mr_series){lab[ns], xs[ns], ys[ns], n, MR_SERIES_LINE};
        ns++;
    }
    if (rc == MR_OK && ns) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "ROC, one class vs rest";
        c.x_label = "false positive rate";
        c.y_label = "true positive rate";
        c.diagonal = 1;
        c.x_min = c.y_min = 0, c.x_max = c.y_max = 1;
        rc = mr_report_chart_line(&p->svg, &c, s, ns, err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, "One-vs-rest ROC per class", err);
        *any = 1;
    }
    for (size_t k = 0; k < 8; k++) {
        mr_free(xs[k]);
        mr_free(ys[k]);
    }
    return rc;
}

static mr_status sec_curves(rep *p, mr_error *err)
{
    mr_status rc = mr_report_section(p->r, "curves", "ROC, precision-recall, calibration and lift", err);
    int any = 0, d;
    const char *names[1] = {"model"};
    for (size_t k = 0; rc == MR_OK && k < mr__n_curve_specs; k++) {
        rc = mr__draw_curve(p->r, &p->svg, &mr__curve_specs[k], &p->curves, names, 1, &d, err);
        any |= d;
    }
    json_t *ovr = json_object_get(p->curves, "roc_ovr");
    if (rc == MR_OK && json_array_size(ovr)) rc = ovr_chart(p, ovr, &any, err);
    if (rc == MR_OK && !any)
        rc = mr_report_text(p->r,
                            p->curves ? "No classification curves: a regression task or the fast tier (curves come with tier: full)."
                                      : "No evaluate stage output: no curves.",
                            err);
    return rc;
}

static mr_status sec_confusion(rep *p, mr_error *err)
{
    mr_status rc = mr_report_section(p->r, "confusion", "Confusion matrix", err);
    json_t *cf = json_object_get(p->mets, "confusion");
    json_t *labels = json_object_get(cf, "labels"), *mat = json_object_get(cf, "matrix");
    size_t K = json_array_size(labels);
    if (rc != MR_OK) return rc;
    if (!K || json_array_size(mat) != K || K > 100)
        return mr_report_text(p->r, "No confusion matrix (regression, or no evaluate output).", err);
    double *cells = mr_calloc(K * K, sizeof(double));
    const char **lab = mr_calloc(K, sizeof(char *));
    if (!cells || !lab) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < K; i++) {
        lab[i] = mr__strs_add(&p->pool, mr__json_text(json_array_get(labels, i)));
        for (size_t j = 0; j < K; j++) cells[i * K + j] = mr__jnum(json_array_get(json_array_get(mat, i), j));
    }
    if (rc == MR_OK) {
        mr_chart c;
        mr_chart_init(&c);
        char *title = json_is_number(json_object_get(p->mets, "threshold"))
                          ? mr_asprintf("Confusion matrix at %.3g", mr__jnum(json_object_get(p->mets, "threshold")))
                          : mr_strdup("Confusion matrix (argmax)");
        c.title = title;
        c.x_label = "predicted";
        c.y_label = "true";
        c.width = 360 + (int)(K > 4 ? 40 * (K - 4) : 0);
        c.height = 300 + (int)(K > 4 ? 40 * (K - 4) : 0);
        rc = mr_report_chart_heatmap(&p->svg, &c, lab, lab, cells, K, K, err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, "Rows: true class; columns: predicted class", err);
        mr_free(title);
    }
    mr_free(cells);
    mr_free(lab);
    return rc;
}

static mr_status sec_importance(rep *p, mr_error *err)
{
    const char *model_path = p->in->model;
    mr_status rc = mr_report_section(p->r, "importance", "Feature importance", err);
    if (rc != MR_OK) return rc;
    if (!model_path) return mr_report_text(p->r, "No model artifact: no feature importance.", err);
    char *file = mr_fs_is_dir(model_path) ? mr_path_join(model_path, "model.bin") : mr_strdup(model_path);
    mr_model *m = NULL;
    mr_buf info;
    mr_buf_init(&info);
    json_t *j = NULL;
    rc = file ? mr_model_load(file, &m, err) : nomem(err);
    if (rc == MR_OK) rc = mr_model_info_json(m, &info, err);
    if (rc == MR_OK) rc = mr_json_parse(info.data, info.len, 0, &j, "the model summary", err);
    json_t *feats = json_object_get(j, "features");
    size_t n = json_array_size(feats);
    const char **names = mr_calloc(n ? n : 1, sizeof(char *));
    double *vals = mr_calloc(n ? n : 1, sizeof(double));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    int linear = kind && !strcmp(kind, "linear");
    if (rc == MR_OK && (!names || !vals)) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        json_t *f = json_array_get(feats, i);
        names[i] = json_string_value(json_object_get(f, "name"));
        vals[i] = linear ? fabs(mr__jnum(json_object_get(f, "weight"))) : mr__jnum(json_object_get(f, "gain"));
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
        rc = mr_report_chart_bars(&p->svg, &c, names, vals, n < 25 ? n : 25, err);
        if (rc == MR_OK)
            rc = mr__chart_out(p->r, &p->svg, linear ? "Absolute linear weights (standardised inputs)" : "Gain importance", err);
    } else if (rc == MR_OK) {
        rc = mr_report_text(p->r, "The model has no features.", err);
    }
    mr_free(names);
    mr_free(vals);
    json_decref(j);
    mr_buf_free(&info);
    mr_model_free(m);
    mr_free(file);
    return rc;
}

static mr_status sec_slices(rep *p, mr_error *err)
{
    json_t *arr = json_object_get(p->sl, "slices");
    size_t n = json_array_size(arr);
    if (!n)
        return empty_section(p->r, "slices", "Slices",
                             "No slices (declare slices: {categorical: [...], numeric: [...]} with tier: full).", err);
    mr_slice *s = mr_calloc(n, sizeof(*s));
    if (!s) return nomem(err);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *lab = json_string_value(json_object_get(o, "label"));
        snprintf(s[i].label, sizeof(s[i].label), "%s", lab ? lab : "?");
        s[i].n_rows = (size_t)mr__jnum(json_object_get(o, "rows"));
        s[i].ci.point = mr__jnum(json_object_get(o, "value"));
        s[i].ci.lo = mr__jnum(json_object_get(o, "lo"));
        s[i].ci.hi = mr__jnum(json_object_get(o, "hi"));
        s[i].flagged = json_is_true(json_object_get(o, "flagged"));
        s[i].status = json_is_true(json_object_get(o, "defined")) ? MR_OK : MR_E_INVALID_ARG;
        const char *msg = json_string_value(json_object_get(o, "message"));
        snprintf(s[i].message, sizeof(s[i].message), "%s", msg ? msg : "");
        json_t *q = json_object_get(o, "residual_quantiles");
        for (int k = 0; k < 5; k++) s[i].resid_q[k] = mr__jnum(json_array_get(q, (size_t)k));
    }
    const char *metric = json_string_value(json_object_get(p->sl, "metric"));
    mr_status rc = mr_report_add_slices(p->r, metric ? metric : "metric", s, n, mr__jnum(json_object_get(p->sl, "overall")), err);
    if (rc == MR_OK && json_is_true(json_object_get(p->sl, "raw")))
        rc = mr_report_text(p->r, "Slice bounds are in the units of the raw data (before the features stage).", err);
    mr_free(s);
    return rc;
}

static mr_status error_table(rep *p, json_t *arr, const char *caption, const char *vkey, const char *vhead, mr_error *err)
{
    size_t n = json_array_size(arr);
    const char *head[6] = {"row", "id", "label", "prediction", vhead, "features"};
    const char **cells = mr_calloc(n * 6 + 1, sizeof(char *));
    if (!cells) return nomem(err);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *keys[5] = {"row", "id", "label", "prediction", vkey};
        for (int k = 0; k < 5; k++) {
            json_t *v = json_object_get(o, keys[k]);
            cells[i * 6 + (size_t)k] = v ? mr__strs_add(&p->pool, mr__json_text(v)) : "";
        }
        mr_buf b;
        mr_buf_init(&b);
        const char *fk;
        json_t *fv;
        json_object_foreach(json_object_get(o, "features"), fk, fv)
            mr_buf_printf(&b, "%s%s=%s", b.len ? ", " : "", fk, json_string_value(fv) ? json_string_value(fv) : "?");
        cells[i * 6 + 5] = mr__strs_add(&p->pool, mr_strdup(b.data ? b.data : ""));
        mr_buf_free(&b);
    }
    mr_status rc = mr_report_table(p->r, caption, head, 6, cells, n, NULL, err);
    mr_free(cells);
    return rc;
}

static mr_status sec_errors(rep *p, mr_error *err)
{
    mr_status rc = mr_report_section(p->r, "errors", "Worst errors", err);
    if (rc != MR_OK) return rc;
    json_t *w = json_object_get(p->errs, "most_confident_wrong");
    json_t *wr = json_object_get(p->errs, "worst_residuals"), *br = json_object_get(p->errs, "best_residuals");
    if (json_is_true(json_object_get(p->errs, "raw")) && (json_array_size(w) || json_array_size(wr)))
        rc = mr_report_text(p->r, "Feature values are the raw data's (before the features stage) where it has the column.", err);
    if (rc != MR_OK) return rc;
    if (json_array_size(w))
        return error_table(p, w, "Most confident wrong predictions", "confidence", "confidence in the wrong class", err);
    if (json_array_size(wr)) {
        rc = error_table(p, wr, "Largest residuals", "residual", "residual (y - prediction)", err);
        if (rc == MR_OK && json_array_size(br))
            rc = error_table(p, br, "Smallest residuals", "residual", "residual (y - prediction)", err);
        return rc;
    }
    return mr_report_text(p->r, p->errs ? "No wrong predictions listed (none, or tier: fast)." : "No evaluate stage output: no error analysis.",
                          err);
}

static mr_status sec_residuals(rep *p, mr_error *err)
{
    mr_status rc = mr_report_section(p->r, "residuals", "Residuals", err);
    json_t *res = json_object_get(p->curves, "residuals");
    if (rc != MR_OK) return rc;
    if (!json_is_object(res)) return mr_report_text(p->r, "No residuals: not a regression task (or tier: fast).", err);
    json_t *jx = json_object_get(res, "x"), *jy = json_object_get(res, "y");
    size_t n = json_array_size(jx) < json_array_size(jy) ? json_array_size(jx) : json_array_size(jy);
    double *x = mr_malloc((n ? n : 1) * sizeof(double)), *y = mr_malloc((n ? n : 1) * sizeof(double));
    if (!x || !y) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        x[i] = mr__jnum(json_array_get(jx, i));
        y[i] = mr__jnum(json_array_get(jy, i));
    }
    if (rc == MR_OK && n) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Residual vs prediction";
        c.x_label = "prediction";
        c.y_label = "residual (y - prediction)";
        rc = mr_report_chart_scatter(&p->svg, &c, x, y, n, 2000, err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, "Residuals against predictions (at most 2,000 rows)", err);
    }
    mr_free(x);
    mr_free(y);
    /* Residual distribution per slice. */
    json_t *arr = json_object_get(p->sl, "slices");
    size_t m = json_array_size(arr);
    if (rc == MR_OK && m) {
        const char *head[6] = {"slice", "q05", "q25", "median", "q75", "q95"};
        const char **cells = mr_calloc(m * 6, sizeof(char *));
        if (!cells) return nomem(err);
        for (size_t i = 0; i < m; i++) {
            json_t *o = json_array_get(arr, i);
            cells[i * 6] = mr__strs_add(&p->pool, mr__json_text(json_object_get(o, "label")));
            for (size_t k = 0; k < 5; k++) {
                double v = mr__jnum(json_array_get(json_object_get(o, "residual_quantiles"), k));
                cells[i * 6 + 1 + k] = mr__strs_add(&p->pool, isfinite(v) ? mr_asprintf("%.4g", v) : mr_strdup("-"));
            }
        }
        rc = mr_report_table(p->r, "Residual quantiles per slice", head, 6, cells, m, NULL, err);
        mr_free(cells);
    }
    return rc;
}

static mr_status sec_checks(rep *p, mr_error *err)
{
    json_t *res = p->checks, *arr = json_object_get(res, "checks");
    size_t n = json_array_size(arr);
    if (!res || !n)
        return empty_section(p->r, "checks", "Checks", res ? "The check stage declared no checks." : "No check stage output.", err);
    const char **names = mr_calloc(n, sizeof(char *)), **details = mr_calloc(n, sizeof(char *));
    int *passed = mr_calloc(n, sizeof(int));
    mr_status rc = names && details && passed ? MR_OK : nomem(err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *kind = json_string_value(json_object_get(o, "kind")), *name = json_string_value(json_object_get(o, "name"));
        names[i] = mr__strs_add(&p->pool, mr_asprintf("%s: %s", kind ? kind : "check", name ? name : "?"));
        details[i] = json_string_value(json_object_get(o, "detail"));
        passed[i] = json_is_true(json_object_get(o, "passed"));
    }
    if (rc == MR_OK) rc = mr_report_add_checks(p->r, names, passed, details, n, err);
    /* Inference measurements of the machine the check ran on. */
    json_t *meas = json_object_get(res, "measured");
    if (rc == MR_OK && json_object_size(meas)) {
        kv t = {{0}, {0}};
        const char *key;
        json_t *val;
        json_object_foreach(meas, key, val) kv_add(&t, mr_strdup(key), mr__json_text(val));
        rc = t.keys.n == t.vals.n ? mr_report_kv(p->r, (const char *const *)t.keys.v, (const char *const *)t.vals.v, t.keys.n, err)
                                  : nomem(err);
        kv_free(&t);
    }
    mr_free(names);
    mr_free(details);
    mr_free(passed);
    return rc;
}

/* ---- tuning --------------------------------------------------------------- */

/* The best finished trial's index in trials.json, or -1. */
static long best_trial(json_t *trials, int maximize)
{
    long best = -1;
    double bv = NAN;
    for (size_t k = 0; k < json_array_size(trials); k++) {
        json_t *v = json_object_get(json_array_get(trials, k), "value");
        if (!json_is_number(v)) continue;
        double y = json_number_value(v);
        if (best < 0 || (maximize ? y > bv : y < bv)) best = (long)k, bv = y;
    }
    return best;
}

/* One chart of every trial's learning curve (metric by round): the other
 * trials faint, the best one drawn last and named. */
static mr_status tune_curves(rep *p, json_t *trials, long best, const char *metric, mr_error *err)
{
    size_t n = json_array_size(trials), ns = 0;
    mr_series *s = mr_calloc(n + 1, sizeof(*s));
    double **bufs = mr_calloc(2 * n + 2, sizeof(*bufs));
    char label[64];
    mr_status rc = s && bufs ? MR_OK : nomem(err);
    for (size_t pass = 0; pass < 2 && rc == MR_OK; pass++)
        for (size_t k = 0; k < n && rc == MR_OK; k++) {
            if ((long)k == best ? pass == 0 : pass == 1) continue; /* the best one last */
            json_t *curve = json_object_get(json_array_get(trials, k), "curve");
            size_t m = json_array_size(curve);
            if (m < 1) continue;
            double *x = mr_malloc(m * sizeof(double)), *y = mr_malloc(m * sizeof(double));
            bufs[2 * ns] = x;
            bufs[2 * ns + 1] = y;
            if (!x || !y) {
                rc = nomem(err);
                ns++;
                break;
            }
            for (size_t i = 0; i < m; i++) {
                x[i] = (double)(i + 1);
                y[i] = mr__jnum(json_array_get(curve, i));
            }
            int is_best = (long)k == best;
            if (is_best) snprintf(label, sizeof(label), "best: trial %zu", k);
            s[ns] = (mr_series){is_best ? label : NULL, x, y, m, is_best ? MR_SERIES_LINE : MR_SERIES_FAINT};
            ns++;
        }
    if (rc == MR_OK && ns) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Learning curves of all trials";
        c.x_label = "round";
        c.y_label = metric ? metric : "metric";
        rc = mr_report_chart_line(&p->svg, &c, s, ns, err);
        if (rc == MR_OK)
            rc = mr__chart_out(p->r, &p->svg, "Every trial's metric by round (pruned trials stop early); the best trial highlighted",
                               err);
    }
    for (size_t i = 0; bufs && i < 2 * n + 2; i++) mr_free(bufs[i]);
    mr_free(bufs);
    mr_free(s);
    return rc;
}

/* Each finished trial's final metric, with the running best. */
static mr_status tune_by_trial(rep *p, json_t *trials, int maximize, const char *metric, mr_error *err)
{
    size_t n = json_array_size(trials), m = 0;
    double *tx = mr_calloc(n + 1, sizeof(double)), *ty = mr_calloc(n + 1, sizeof(double));
    double *bx = mr_calloc(n + 1, sizeof(double)), *by = mr_calloc(n + 1, sizeof(double));
    mr_status rc = tx && ty && bx && by ? MR_OK : nomem(err);
    double best = NAN;
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        json_t *v = json_object_get(json_array_get(trials, k), "value");
        if (!json_is_number(v)) continue;
        double y = json_number_value(v);
        if (isnan(best) || (maximize ? y > best : y < best)) best = y;
        tx[m] = bx[m] = (double)k;
        ty[m] = y;
        by[m++] = best;
    }
    if (rc == MR_OK && m) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Metric by trial";
        c.x_label = "trial";
        c.y_label = metric ? metric : "metric";
        mr_series ser[2] = {{"trial", tx, ty, m, MR_SERIES_POINTS}, {"best so far", bx, by, m, MR_SERIES_STEP}};
        rc = mr_report_chart_line(&p->svg, &c, ser, 2, err);
        if (rc == MR_OK)
            rc = mr__chart_out(p->r, &p->svg, "Each finished trial's final metric (pruned trials at the round they stopped)", err);
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
            ty[q++] = json_number_value(v);
        }
        if (q < 2) continue;
        mr_chart c;
        mr_chart_init(&c);
        c.title = pname;
        c.x_label = pname;
        c.y_label = metric ? metric : "metric";
        rc = mr_report_chart_scatter(&p->svg, &c, tx, ty, q, 0, err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, "metric against one parameter", err);
        drawn++;
    }
    mr_free(tx);
    mr_free(ty);
    mr_free(bx);
    mr_free(by);
    return rc;
}

static mr_status tune_importance(rep *p, mr_error *err)
{
    json_t *imp = json_object_get(p->study, "importance");
    size_t ni = json_object_size(imp), k = 0;
    if (!ni) return MR_OK;
    const char **names = mr_calloc(ni, sizeof(*names));
    double *vals = mr_calloc(ni, sizeof(double));
    mr_status rc = names && vals ? MR_OK : nomem(err);
    const char *key;
    json_t *val;
    json_object_foreach(imp, key, val)
    {
        if (rc != MR_OK) break;
        names[k] = key;
        vals[k++] = json_number_value(val);
    }
    if (rc == MR_OK) {
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Parameter importance";
        rc = mr_report_chart_bars(&p->svg, &c, names, vals, k, err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, "Share of the metric's variance explained by each parameter", err);
    }
    mr_free(names);
    mr_free(vals);
    return rc;
}

/* The ten best trials. */
static mr_status tune_leaderboard(rep *p, json_t *trials, int maximize, mr_error *err)
{
    size_t n = json_array_size(trials), rows = 0;
    size_t *order = mr_calloc(n + 1, sizeof(size_t));
    const char *header[4] = {"trial", "status", "value", "params"};
    const char **cells = mr_calloc(40, sizeof(*cells));
    mr_status rc = order && cells ? MR_OK : nomem(err);
    for (size_t a = 0; rc == MR_OK && a < n; a++) order[a] = a;
    for (size_t a = 1; rc == MR_OK && a < n; a++) /* insertion sort by value, missing last */
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
    for (size_t a = 0; rc == MR_OK && a < n && rows < 10; a++, rows++) {
        json_t *t = json_array_get(trials, order[a]);
        cells[rows * 4] = mr__strs_add(&p->pool, mr_asprintf("%zu", order[a]));
        cells[rows * 4 + 1] = json_string_value(json_object_get(t, "status"));
        cells[rows * 4 + 2] = mr__strs_add(&p->pool, mr__json_text(json_object_get(t, "value")));
        cells[rows * 4 + 3] = mr__strs_add(&p->pool, mr__json_text(json_object_get(t, "params")));
    }
    if (rc == MR_OK) rc = mr_report_table(p->r, "Leaderboard (best first)", header, 4, cells, rows, NULL, err);
    mr_free(order);
    mr_free(cells);
    return rc;
}

/* Tuning: one chart of every trial's learning curve, the metric by trial
 * with the running best, each numeric parameter against the metric,
 * parameter importances, and the leaderboard. */
static mr_status sec_tuning(rep *p, mr_error *err)
{
    mr_status rc = mr_report_section(p->r, "tuning", "Tuning", err);
    json_t *trials = p->trials;
    if (rc != MR_OK) return rc;
    if (!json_is_array(trials) || !json_array_size(trials)) return mr_report_text(p->r, "No tune stage in this run.", err);
    json_t *dir = json_object_get(p->study, "direction");
    int maximize = !json_is_string(dir) || strcmp(json_string_value(dir), "minimize") != 0;
    const char *metric = json_string_value(json_object_get(p->study, "metric"));
    rc = tune_curves(p, trials, best_trial(trials, maximize), metric, err);
    if (rc == MR_OK) rc = tune_by_trial(p, trials, maximize, metric, err);
    if (rc == MR_OK) rc = tune_importance(p, err);
    if (rc == MR_OK) rc = tune_leaderboard(p, trials, maximize, err);
    return rc;
}

/* ---- the document ------------------------------------------------------------ */

static void add_src(rep *p, const char *role, const char *stage, const char *path)
{
    if (path) p->src[p->n_src++] = (reported){role, stage, path};
}

static mr_status load_inputs(rep *p, int64_t run_id, mr_error *err)
{
    const mr_run_report_inputs *in = p->in;
    mr_status rc;
    add_src(p, "evaluate", in->evaluate_stage, in->evaluate);
    add_src(p, "model", in->model_stage, in->model);
    add_src(p, "check", in->check_stage, in->check);
    add_src(p, "tune", in->tune_stage, in->tune);
    TRY(mr_runstore_run_detail(p->rs, run_id, &p->d, err));
    TRY(mr__load_json(in->evaluate, "metrics.json", &p->mets, err));
    TRY(mr__load_json(in->evaluate, "curves.json", &p->curves, err));
    TRY(mr__load_json(in->evaluate, "slices.json", &p->sl, err));
    TRY(mr__load_json(in->evaluate, "errors.json", &p->errs, err));
    TRY(mr__load_json(in->check, "results.json", &p->checks, err));
    TRY(mr__load_json(in->tune, "trials.json", &p->trials, err));
    TRY(mr__load_json(in->tune, "study.json", &p->study, err));
done:
    return rc;
}

static void rep_free(rep *p)
{
    mr_report_free(p->r);
    mr_buf_free(&p->svg);
    mr__strs_free(&p->pool);
    mr_run_detail_free(p->d);
    json_t *docs[7] = {p->mets, p->curves, p->sl, p->errs, p->checks, p->trials, p->study};
    for (int i = 0; i < 7; i++) json_decref(docs[i]);
}

/* The title: given, or (artifact) a fixed one, or "<workspace dir>: run N". */
static char *report_title(const rep *p)
{
    if (p->in->title) return mr_strdup(p->in->title);
    if (p->in->artifact) return mr_strdup("Model report");
    const char *cwd = p->d->run.cwd;
    const char *base = cwd && strrchr(cwd, '/') ? strrchr(cwd, '/') + 1 : cwd ? cwd : "millrace";
    return mr_asprintf("%s: run %lld", base, (long long)p->d->run.id);
}

mr_status mr_run_report_write(mr_runstore *rs, int64_t run_id, const mr_run_report_inputs *in, const char *html_path,
                              const char *md_path, mr_error *err)
{
    rep p;
    memset(&p, 0, sizeof(p));
    p.in = in;
    p.rs = rs;
    mr_buf_init(&p.svg);
    char *title = NULL;
    mr_status rc;
    TRY(load_inputs(&p, run_id, err));
    title = report_title(&p);
    if (!title) {
        rc = nomem(err);
        goto done;
    }
    TRY(mr_report_new(title, &p.r, err));
    TRY(sec_summary(&p, err));
    TRY(sec_timeline(&p, err));
    TRY(sec_training(&p, err));
    TRY(sec_metrics(&p, err));
    TRY(sec_curves(&p, err));
    TRY(sec_confusion(&p, err));
    TRY(sec_importance(&p, err));
    TRY(sec_slices(&p, err));
    TRY(sec_errors(&p, err));
    TRY(sec_residuals(&p, err));
    TRY(sec_checks(&p, err));
    TRY(sec_tuning(&p, err));
    TRY(mr_report_write(p.r, html_path, md_path, err));
done:
    mr_free(title);
    rep_free(&p);
    return rc;
}

mr_status mr_run_report_regenerate(mr_workspace *ws, int64_t run_id, const char *html_path, const char *md_path,
                                   mr_error *err)
{
    char *tmp = NULL;
    mr__run_art a;
    memset(&a, 0, sizeof(a));
    mr_status rc = mr_fs_mkdtemp(mr_store_root(ws->store), "tmp/report", &tmp, err);
    if (rc == MR_OK) rc = mr__run_artifacts(ws, run_id, tmp, &a, err);
    if (rc == MR_OK) {
        mr_run_report_inputs in = {NULL, a.eval, a.model, a.check, a.tune, a.eval_stage, a.model_stage, a.check_stage,
                                   a.tune_stage, 0};
        rc = mr_run_report_write(ws->rs, run_id, &in, html_path, md_path, err);
    }
    mr__run_art_free(&a);
    if (tmp) mr_fs_rmtree(tmp, NULL);
    mr_free(tmp);
    return rc;
}
