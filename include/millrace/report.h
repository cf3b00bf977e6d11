/* millrace report: an SVG chart toolkit and a self-contained HTML report
 * builder (plus a short Markdown summary). No JavaScript, fonts, images or
 * links outside the file: charts are inline SVG drawn here, styles are one
 * inline <style>. Every piece of text is escaped on the way out.
 *
 * Example (given const double *fpr, const double *tpr, size_t n):
 *
 *   mr_report *r = NULL;
 *   if (mr_report_new("churn: run 12", &r, &err) != MR_OK) return;
 *   const char *k[] = {"commit", "rows"}, *v[] = {"3f2a9c1", "120000"};
 *   mr_buf svg;
 *   mr_buf_init(&svg);
 *   mr_chart c;
 *   mr_chart_init(&c);
 *   c.title = "ROC";
 *   c.diagonal = 1;
 *   mr_series s = {"model", fpr, tpr, n, MR_SERIES_LINE};
 *   if (mr_report_section(r, "summary", "Run summary", &err) != MR_OK ||
 *       mr_report_kv(r, k, v, 2, &err) != MR_OK ||
 *       mr_report_chart_line(&svg, &c, &s, 1, &err) != MR_OK ||
 *       mr_report_section(r, "roc", "ROC curve", &err) != MR_OK ||
 *       mr_report_svg(r, "ROC curve of the test set", svg.data, &err) != MR_OK ||
 *       mr_report_write(r, "report.html", "report.md", &err) != MR_OK)
 *       mr_log_error(&err);
 *   mr_buf_free(&svg);
 *   mr_report_free(r);
 *
 * Chart functions append one <svg> element to an mr_buf; every data mark
 * (line, point, bar, cell, interval) carries class="mark". Non-finite
 * values are skipped.
 * Ownership: a report is the caller's (mr_report_free, NULL is a no-op)
 * and copies every string and SVG it is given; arrays (series, labels,
 * cells) are borrowed for the call. Output goes to the caller's mr_buf or
 * to files.
 * Threads: no shared state; an mr_report is not thread-safe.
 * Status codes: MR_E_INVALID_ARG (bad ids, sizes, an SVG that is not one),
 * MR_E_STATE (content before the first section), MR_E_NOMEM, MR_E_LIMIT
 * (buffer caps, more sections than fit), MR_E_IO (write). */
#ifndef MILLRACE_REPORT_H
#define MILLRACE_REPORT_H

#include "millrace/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- escaping and axis helpers ----------------------------------------- */
/* Appends s with & < > " ' escaped (HTML and SVG text and attributes).
 * MR_E_NOMEM, MR_E_LIMIT (no mr_error). */
mr_status mr_report_escape(mr_buf *out, const char *s);
/* "Nice" ticks covering [lo, hi]: first tick, step (1, 2 or 5 x 10^k) and
 * count, about `target` of them. lo == hi is widened by 1. */
void mr_report_nice_ticks(double lo, double hi, int target, double *first, double *step, int *count);

/* ---- charts ----------------------------------------------------------- */
typedef struct mr_chart {
    const char *title;   /* drawn on top; NULL = none */
    const char *x_label; /* NULL = none */
    const char *y_label;
    int width, height;   /* px; 0 = 520 x 340 */
    double x_min, x_max; /* NaN = from the data (nice-rounded) */
    double y_min, y_max;
    int diagonal;        /* line charts: dashed y = x reference */
} mr_chart;
void mr_chart_init(mr_chart *c); /* no labels, default size, limits from the data (NaN) */

/* MR_SERIES_FAINT: a thin grey line, never in the legend (the many
 * background series of one chart: every trial of a study). */
typedef enum mr_series_kind {
    MR_SERIES_LINE = 0,
    MR_SERIES_STEP = 1,
    MR_SERIES_POINTS = 2,
    MR_SERIES_FAINT = 3
} mr_series_kind;
typedef struct mr_series {
    const char *name; /* legend entry; NULL = none */
    const double *x, *y;
    size_t n;
    mr_series_kind kind;
} mr_series;
/* Lines/steps/points, several series, and a legend (below the plot, never
 * over it) when any series is named. Series of more than 2,000 points are
 * thinned by index (both ends kept). */
mr_status mr_report_chart_line(mr_buf *out, const mr_chart *c, const mr_series *s, size_t n_series, mr_error *err);
/* Scatter of at most max_points points (every n/max_points-th; 0 = 2,000)
 * with a dashed y = 0 line when 0 is in range (residual plots). */
mr_status mr_report_chart_scatter(mr_buf *out, const mr_chart *c, const double *x, const double *y, size_t n,
                                  size_t max_points, mr_error *err);
/* Horizontal bars (feature importance), in the order given. */
mr_status mr_report_chart_bars(mr_buf *out, const mr_chart *c, const char *const *labels, const double *values,
                               size_t n, mr_error *err);
/* Heatmap (confusion matrix): cells (n_rows, n_cols) row-major, each cell
 * labelled with its value; colour by value / max. */
mr_status mr_report_chart_heatmap(mr_buf *out, const mr_chart *c, const char *const *row_labels,
                                  const char *const *col_labels, const double *cells, size_t n_rows, size_t n_cols,
                                  mr_error *err);
typedef enum mr_stage_state {
    MR_STAGE_EXECUTED = 0,
    MR_STAGE_CACHED = 1,
    MR_STAGE_FAILED = 2,
    MR_STAGE_SKIPPED = 3
} mr_stage_state;
typedef struct mr_gantt_bar {
    const char *label;
    double start, end; /* seconds, any origin */
    mr_stage_state state;
} mr_gantt_bar;
/* Stage timeline: one row per bar, coloured by state, with a legend. */
mr_status mr_report_chart_gantt(mr_buf *out, const mr_chart *c, const mr_gantt_bar *bars, size_t n, mr_error *err);
typedef struct mr_interval_mark {
    const char *label;
    double point, lo, hi; /* lo/hi NaN = no interval */
    int flagged;          /* drawn in red */
} mr_interval_mark;
/* Point +- interval per row; reference (NaN = none) as a dashed line. */
mr_status mr_report_chart_intervals(mr_buf *out, const mr_chart *c, const mr_interval_mark *m, size_t n,
                                    double reference, mr_error *err);

/* ---- document --------------------------------------------------------- */
typedef struct mr_report mr_report;
mr_status mr_report_new(const char *title, mr_report **out, mr_error *err); /* MR_E_NOMEM */
void mr_report_free(mr_report *r);
/* Starts a section; later content goes into it. id: [A-Za-z0-9_-]{1,64},
 * unique (it becomes the element id and the table of contents anchor):
 * MR_E_INVALID_ARG otherwise. The content functions below return
 * MR_E_STATE before the first section. */
mr_status mr_report_section(mr_report *r, const char *id, const char *title, mr_error *err);
mr_status mr_report_text(mr_report *r, const char *text, mr_error *err);
/* Key-value table. */
mr_status mr_report_kv(mr_report *r, const char *const *keys, const char *const *values, size_t n, mr_error *err);
/* Data table: cells (n_rows, n_cols) row-major, NULL cells print empty;
 * row_flag (NULL = none) highlights rows (flagged slices, failed checks). */
mr_status mr_report_table(mr_report *r, const char *caption, const char *const *header, size_t n_cols,
                          const char *const *cells, size_t n_rows, const unsigned char *row_flag, mr_error *err);
/* Embeds an <svg> made by the chart functions (must start with "<svg"). */
mr_status mr_report_svg(mr_report *r, const char *caption, const char *svg, mr_error *err);

/* Ready-made sections from run-store data. Each starts its own section
 * with the id given in brackets. */
typedef struct mr_report_stage {
    const char *name;
    double start;      /* seconds since the run started */
    double wall;       /* seconds */
    double cpu;        /* user + sys seconds */
    uint64_t peak_rss; /* bytes */
    mr_stage_state state;
} mr_report_stage;
/* [timeline] Gantt chart, per-stage table, and totals: wall time, CPU used
 * vs cores available (cpu / (span x cores)), peak RSS, cache hits. */
mr_status mr_report_add_timeline(mr_report *r, const mr_report_stage *st, size_t n, int cores_available,
                                 mr_error *err);
typedef struct mr_report_metric {
    const char *name;
    double value, lo, hi; /* lo/hi NaN = no interval */
} mr_report_metric;
/* [metrics] Table "value [lo, hi]" and, when any interval exists, a chart. */
mr_status mr_report_add_metrics(mr_report *r, const mr_report_metric *m, size_t n, mr_error *err);
/* [slices] Slice table (flagged rows highlighted, undefined slices with
 * their message) and an interval chart against the overall value. */
mr_status mr_report_add_slices(mr_report *r, const char *metric_name, const mr_slice *s, size_t n, double overall,
                               mr_error *err);
/* [checks] name, pass/fail, detail; failed rows highlighted. */
mr_status mr_report_add_checks(mr_report *r, const char *const *names, const int *passed,
                               const char *const *details, size_t n, mr_error *err);

/* Renders the whole document, appended to out. The HTML references
 * nothing outside itself. */
mr_status mr_report_html(const mr_report *r, mr_buf *out, mr_error *err);
/* Short Markdown summary: headings, key-values, tables (first 20 rows);
 * charts are named, not drawn. */
mr_status mr_report_markdown(const mr_report *r, mr_buf *out, mr_error *err);
/* Writes both atomically (md_path may be NULL): MR_E_IO as well. */
mr_status mr_report_write(const mr_report *r, const char *html_path, const char *md_path, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
