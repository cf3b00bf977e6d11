/* The comparison page of two or more runs (mr_run_compare_html): run
 * summaries, params and final metrics side by side with the rows that
 * differ highlighted, charts of each run's metric changes from the first,
 * the evaluation curves of every run overlaid, and the stages whose key
 * differs. Built from the run store's comparison view and the evaluate
 * outputs the runs published. */
#include "report_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TRY(x)                              \
    do {                                    \
        if ((rc = (x)) != MR_OK) goto done; \
    } while (0)

#define MAX_DELTA_CHARTS 4 /* runs after the first that get a delta chart */
#define MAX_DELTA_BARS 30

typedef struct cmp {
    mr_report *r;
    mr_buf svg;
    mr__strs pool;
    const mr_run_compare *c;
    const char **labels; /* "run N" per run */
    json_t **curves;     /* each run's curves.json (NULL = none) */
} cmp;

static mr_status nomem(mr_error *err) { return MR_ERR(err, MR_E_NOMEM, "out of memory"); }

/* The header row: a first column, then one per run, then extra. */
static const char **header(const cmp *p, const char *first, const char *extra)
{
    const char **h = mr_calloc(p->c->n_runs + 2, sizeof(*h));
    if (!h) return NULL;
    h[0] = first;
    for (size_t r = 0; r < p->c->n_runs; r++) h[r + 1] = p->labels[r];
    h[p->c->n_runs + 1] = extra;
    return h;
}

static mr_status cmp_summary(cmp *p, mr_error *err)
{
    static const char *const fields[] = {"id", "name", "status", "started", "duration_s", "git_commit", "argv", "overrides"};
    const size_t nf = sizeof(fields) / sizeof(*fields), w = p->c->n_runs + 1;
    const char **head = header(p, "", NULL), **cells = mr_calloc(nf * w, sizeof(char *));
    mr_status rc = mr_report_section(p->r, "summary", "Runs", err);
    if (rc == MR_OK && (!head || !cells)) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < nf; i++) {
        cells[i * w] = fields[i];
        for (size_t k = 0; k < p->c->n_runs; k++) {
            const mr_run_summary *s = &p->c->runs[k];
            char iso[32] = "", *v = NULL;
            switch (i) {
            case 0: v = mr_asprintf("%lld", (long long)s->id); break;
            case 1: v = mr_strdup(s->name ? s->name : ""); break;
            case 2: v = mr_strdup(s->status ? s->status : ""); break;
            case 3: mr_iso_time(s->started, iso, sizeof(iso)); v = mr_strdup(iso); break;
            case 4: v = isnan(s->ended) ? mr_strdup("") : mr_asprintf("%.6g", s->ended - s->started); break;
            case 5: v = mr_asprintf("%s%s", s->git_commit ? s->git_commit : "", s->git_dirty ? " (dirty)" : ""); break;
            case 6: v = mr_strdup(s->argv ? s->argv : ""); break;
            default: v = mr_strdup(s->overrides ? s->overrides : ""); break;
            }
            cells[i * w + k + 1] = mr__strs_add(&p->pool, v);
        }
    }
    if (rc == MR_OK) rc = mr_report_table(p->r, "Run summaries", head, w, cells, nf, NULL, err);
    mr_free(head);
    mr_free(cells);
    return rc;
}

static mr_status cmp_params(cmp *p, mr_error *err)
{
    const mr_run_compare *c = p->c;
    const size_t w = c->n_runs + 1;
    const char **head = header(p, "param", NULL), **cells = mr_calloc(c->n_params * w + 1, sizeof(char *));
    unsigned char *flag = mr_calloc(c->n_params + 1, 1);
    mr_status rc = mr_report_section(p->r, "params", "Params", err);
    if (rc == MR_OK && (!head || !cells || !flag)) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < c->n_params; i++) {
        cells[i * w] = c->params[i].path;
        for (size_t k = 0; k < c->n_runs; k++) cells[i * w + k + 1] = mr__strs_add(&p->pool, mr__value_text(c->params[i].values[k]));
        flag[i] = (unsigned char)c->params[i].changed;
    }
    if (rc == MR_OK)
        rc = c->n_params ? mr_report_table(p->r, "Params (rows that differ highlighted)", head, w, cells, c->n_params, flag, err)
                         : mr_report_text(p->r, "None of the runs has params.", err);
    mr_free(head);
    mr_free(cells);
    mr_free(flag);
    return rc;
}

static char *metric_cell(const mr_compare_metric *m, size_t k)
{
    return m->present[k] ? mr_asprintf("%.6g", m->values[k]) : mr_strdup("-");
}

/* A bar chart of every metric's change from the first run to run k. */
static mr_status delta_chart(cmp *p, size_t k, mr_error *err)
{
    const mr_run_compare *c = p->c;
    const char **names = mr_calloc(c->n_metrics + 1, sizeof(*names));
    double *vals = mr_calloc(c->n_metrics + 1, sizeof(double));
    size_t nd = 0;
    mr_status rc = names && vals ? MR_OK : nomem(err);
    for (size_t i = 0; rc == MR_OK && i < c->n_metrics && nd < MAX_DELTA_BARS; i++) {
        const mr_compare_metric *m = &c->metrics[i];
        double d = m->values[k] - m->values[0];
        if (!m->present[0] || !m->present[k] || !isfinite(d)) continue;
        names[nd] = mr__strs_add(&p->pool, mr_asprintf("%s.%s", m->stage, m->name));
        vals[nd++] = d;
    }
    if (rc == MR_OK && nd) {
        char *title = mr_asprintf("Metric deltas (%s - %s)", p->labels[k], p->labels[0]);
        char *caption = mr_asprintf("Change of each final metric from %s to %s", p->labels[0], p->labels[k]);
        mr_chart ch;
        mr_chart_init(&ch);
        ch.title = title;
        rc = title && caption ? mr_report_chart_bars(&p->svg, &ch, names, vals, nd, err) : nomem(err);
        if (rc == MR_OK) rc = mr__chart_out(p->r, &p->svg, caption, err);
        mr_free(title);
        mr_free(caption);
    }
    mr_free(names);
    mr_free(vals);
    return rc;
}

static mr_status cmp_metrics(cmp *p, mr_error *err)
{
    const mr_run_compare *c = p->c;
    const int two = c->n_runs == 2;
    const size_t w = c->n_runs + 1 + (two ? 1 : 0);
    const char **head = header(p, "metric", two ? "delta (b - a)" : NULL);
    const char **cells = mr_calloc(c->n_metrics * w + 1, sizeof(char *));
    unsigned char *flag = mr_calloc(c->n_metrics + 1, 1);
    mr_status rc = mr_report_section(p->r, "metrics", "Metrics", err);
    if (rc == MR_OK && (!head || !cells || !flag)) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < c->n_metrics; i++) {
        const mr_compare_metric *m = &c->metrics[i];
        cells[i * w] = mr__strs_add(&p->pool, mr_asprintf("%s.%s", m->stage, m->name));
        for (size_t k = 0; k < c->n_runs; k++) cells[i * w + k + 1] = mr__strs_add(&p->pool, metric_cell(m, k));
        if (two)
            cells[i * w + 3] = mr__strs_add(&p->pool, m->present[0] && m->present[1]
                                                          ? mr_asprintf("%.6g", m->values[1] - m->values[0])
                                                          : mr_strdup("-"));
        flag[i] = (unsigned char)m->changed;
    }
    if (rc == MR_OK)
        rc = c->n_metrics ? mr_report_table(p->r, "Final metrics (rows that differ highlighted)", head, w, cells, c->n_metrics,
                                            flag, err)
                          : mr_report_text(p->r, "None of the runs recorded metrics.", err);
    for (size_t k = 1; rc == MR_OK && k < c->n_runs && k <= MAX_DELTA_CHARTS; k++) rc = delta_chart(p, k, err);
    mr_free(head);
    mr_free(cells);
    mr_free(flag);
    return rc;
}

static mr_status cmp_curves(cmp *p, mr_error *err)
{
    int any = 0, d;
    mr_status rc = mr_report_section(p->r, "curves", "Curves", err);
    for (size_t k = 0; rc == MR_OK && k < mr__n_curve_specs; k++) {
        rc = mr__draw_curve(p->r, &p->svg, &mr__curve_specs[k], p->curves, p->labels, p->c->n_runs, &d, err);
        any |= d;
    }
    if (rc == MR_OK && !any) rc = mr_report_text(p->r, "None of the runs has evaluation curves.", err);
    return rc;
}

static mr_status cmp_stages(cmp *p, mr_error *err)
{
    const mr_run_compare *c = p->c;
    const size_t w = c->n_runs + 2;
    const char **head = header(p, "stage", "key differs"), **cells = mr_calloc(c->n_stages * w + 1, sizeof(char *));
    unsigned char *flag = mr_calloc(c->n_stages + 1, 1);
    mr_status rc = mr_report_section(p->r, "stages", "Stages", err);
    if (rc == MR_OK && (!head || !cells || !flag)) rc = nomem(err);
    for (size_t i = 0; rc == MR_OK && i < c->n_stages; i++) {
        const mr_compare_stage *s = &c->stages[i];
        cells[i * w] = s->stage;
        for (size_t k = 0; k < c->n_runs; k++) cells[i * w + k + 1] = s->statuses[k] ? s->statuses[k] : "-";
        flag[i] = (unsigned char)s->changed;
        cells[i * w + w - 1] = flag[i] ? "yes" : "no";
    }
    if (rc == MR_OK)
        rc = c->n_stages ? mr_report_table(p->r, "Stages: status per run (a key that differs is highlighted)", head, w, cells,
                                           c->n_stages, flag, err)
                         : mr_report_text(p->r, "No stages recorded.", err);
    mr_free(head);
    mr_free(cells);
    mr_free(flag);
    return rc;
}

mr_status mr_run_compare_html(mr_workspace *ws, const int64_t *runs, size_t n_runs, const char *html_path,
                              mr_error *err)
{
    char *tmp = NULL;
    mr__run_art *arts = NULL;
    mr_run_compare *c = NULL;
    mr_buf title;
    cmp p;
    memset(&p, 0, sizeof(p));
    mr_buf_init(&p.svg);
    mr_buf_init(&title);
    mr_status rc = MR_OK;
    if (n_runs < 2) return MR_ERR(err, MR_E_INVALID_ARG, "compare: needs two or more runs, got %zu", n_runs);
    arts = mr_calloc(n_runs, sizeof(*arts));
    p.labels = mr_calloc(n_runs, sizeof(*p.labels));
    p.curves = mr_calloc(n_runs, sizeof(*p.curves));
    if (!arts || !p.labels || !p.curves) {
        rc = nomem(err);
        goto done;
    }
    TRY(mr_runstore_compare(ws->rs, runs, n_runs, &c, err));
    p.c = c;
    TRY(mr_fs_mkdtemp(mr_store_root(ws->store), "tmp/compare", &tmp, err));
    for (size_t k = 0; k < n_runs; k++) {
        char *dir = mr_asprintf("%s/%zu", tmp, k);
        p.labels[k] = mr__strs_add(&p.pool, mr_asprintf("run %lld", (long long)runs[k]));
        rc = dir && p.labels[k] ? mr_fs_mkdirs(dir, err) : nomem(err);
        if (rc == MR_OK) rc = mr__run_artifacts(ws, runs[k], dir, &arts[k], err);
        if (rc == MR_OK) rc = mr__load_json(arts[k].eval, "curves.json", &p.curves[k], err);
        mr_free(dir);
        if (rc != MR_OK) goto done;
        if (mr_buf_printf(&title, "%s %lld", k ? " vs run" : "Run", (long long)runs[k]) != MR_OK) {
            rc = nomem(err);
            goto done;
        }
    }
    TRY(mr_report_new(title.data, &p.r, err));
    TRY(cmp_summary(&p, err));
    TRY(cmp_params(&p, err));
    TRY(cmp_metrics(&p, err));
    TRY(cmp_curves(&p, err));
    TRY(cmp_stages(&p, err));
    TRY(mr_report_write(p.r, html_path, NULL, err));
done:
    for (size_t k = 0; arts && k < n_runs; k++) mr__run_art_free(&arts[k]);
    for (size_t k = 0; p.curves && k < n_runs; k++) json_decref(p.curves[k]);
    mr_free(arts);
    mr_free(p.curves);
    mr_free(p.labels);
    mr_run_compare_free(c);
    mr_report_free(p.r);
    mr_buf_free(&p.svg);
    mr_buf_free(&title);
    mr__strs_free(&p.pool);
    if (tmp) mr_fs_rmtree(tmp, NULL);
    mr_free(tmp);
    return rc;
}
