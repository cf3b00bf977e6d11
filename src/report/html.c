/* The report document: sections of escaped text, key-value and data tables
 * and inline SVG charts, rendered as one self-contained HTML file (inline
 * CSS, no scripts, no external references; the only links are in-page
 * #anchors) plus a short Markdown summary, and the ready-made sections
 * (timeline, metrics, slices, checks) the report op assembles. */
#include "millrace/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MD_MAX_ROWS 20
#define MAX_SECTIONS 256

struct mr_report {
    char *title;
    mr_buf body;  /* HTML of the sections so far */
    mr_buf md;    /* Markdown of the sections so far */
    char ids[MAX_SECTIONS][65];
    char *titles[MAX_SECTIONS];
    size_t n_sections;
    int open;     /* a <section> is open */
};

static const char CSS[] =
    "body{font-family:sans-serif;margin:0;color:#222;background:#f4f5f7}"
    "header{background:#263238;color:#fff;padding:16px 28px}"
    "header h1{margin:0 0 8px;font-size:22px}"
    "nav a{color:#cfd8dc;margin-right:14px;font-size:13px;text-decoration:none}"
    "main{padding:12px 28px 40px}"
    "section{background:#fff;border:1px solid #dde1e6;border-radius:6px;margin:16px 0;padding:8px 20px 16px}"
    "h2{font-size:17px;border-bottom:1px solid #eceff1;padding-bottom:6px}"
    "table{border-collapse:collapse;margin:8px 0;font-size:13px}"
    "th,td{border:1px solid #e0e0e0;padding:4px 10px;text-align:left}"
    "th{background:#f5f7f9}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "tr.flag td{background:#fdecea;color:#b71c1c}"
    "table.kv th{width:220px}"
    "caption{caption-side:top;text-align:left;font-weight:bold;padding:4px 0}"
    "figure{display:inline-block;margin:8px 16px 8px 0;vertical-align:top}"
    "figcaption{font-size:12px;color:#555;margin-top:4px}"
    "footer{color:#777;font-size:12px;padding:0 28px 20px}";

mr_status mr_report_new(const char *title, mr_report **out, mr_error *err)
{
    *out = NULL;
    mr_report *r = mr_calloc(1, sizeof *r);
    if (!r) return MR_ERR(err, MR_E_NOMEM, "out of memory (report)");
    r->title = mr_strdup(title ? title : "millrace report");
    if (!r->title) {
        mr_free(r);
        return MR_ERR(err, MR_E_NOMEM, "out of memory (report)");
    }
    mr_buf_init(&r->body);
    mr_buf_init(&r->md);
    *out = r;
    return MR_OK;
}

void mr_report_free(mr_report *r)
{
    if (!r) return;
    mr_free(r->title);
    for (size_t i = 0; i < r->n_sections; i++) mr_free(r->titles[i]);
    mr_buf_free(&r->body);
    mr_buf_free(&r->md);
    mr_free(r);
}

static mr_status nomem(mr_error *err, mr_status st, const char *what)
{
    return MR_ERR(err, st, "report: cannot add %s (%s)", what, mr_status_str(st));
}

/* Markdown: a cell or line with | and newlines neutralised and & < >
 * written as entities, so no markup in the data renders as HTML. */
static mr_status md_text(mr_buf *b, const char *s)
{
    mr_status st = MR_OK;
    for (const char *p = s ? s : ""; *p && st == MR_OK; p++) {
        if (*p == '|') st = mr_buf_puts(b, "\\|");
        else if (*p == '&') st = mr_buf_puts(b, "&amp;");
        else if (*p == '<') st = mr_buf_puts(b, "&lt;");
        else if (*p == '>') st = mr_buf_puts(b, "&gt;");
        else if (*p == '\n' || *p == '\r') st = mr_buf_puts(b, " ");
        else st = mr_buf_append(b, p, 1);
    }
    return st;
}

mr_status mr_report_section(mr_report *r, const char *id, const char *title, mr_error *err)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 64) return MR_ERR(err, MR_E_INVALID_ARG, "report: section id must be 1..64 characters");
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return MR_ERR(err, MR_E_INVALID_ARG, "report: section id '%s': only letters, digits, '-' and '_'", id);
    }
    for (size_t i = 0; i < r->n_sections; i++)
        if (strcmp(r->ids[i], id) == 0) return MR_ERR(err, MR_E_INVALID_ARG, "report: duplicate section id '%s'", id);
    if (r->n_sections == MAX_SECTIONS) return MR_ERR(err, MR_E_LIMIT, "report: more than %d sections", MAX_SECTIONS);
    char *t = mr_strdup(title ? title : id);
    if (!t) return MR_ERR(err, MR_E_NOMEM, "out of memory (report section)");
    memcpy(r->ids[r->n_sections], id, n + 1);
    r->titles[r->n_sections++] = t;
    mr_status st = r->open ? mr_buf_puts(&r->body, "</section>\n") : MR_OK;
    if (st == MR_OK) st = mr_buf_printf(&r->body, "<section id=\"%s\"><h2>", id);
    if (st == MR_OK) st = mr_report_escape(&r->body, t);
    if (st == MR_OK) st = mr_buf_puts(&r->body, "</h2>\n");
    if (st == MR_OK) st = mr_buf_puts(&r->md, "\n## ");
    if (st == MR_OK) st = md_text(&r->md, t);
    if (st == MR_OK) st = mr_buf_puts(&r->md, "\n\n");
    r->open = 1;
    return st == MR_OK ? MR_OK : nomem(err, st, "a section");
}

static mr_status need_section(mr_report *r, mr_error *err)
{
    return r->open ? MR_OK : MR_ERR(err, MR_E_STATE, "report: add a section before its content");
}

mr_status mr_report_text(mr_report *r, const char *text, mr_error *err)
{
    mr_status st = need_section(r, err);
    if (st != MR_OK) return st;
    st = mr_buf_puts(&r->body, "<p>");
    if (st == MR_OK) st = mr_report_escape(&r->body, text);
    if (st == MR_OK) st = mr_buf_puts(&r->body, "</p>\n");
    if (st == MR_OK) st = md_text(&r->md, text);
    if (st == MR_OK) st = mr_buf_puts(&r->md, "\n\n");
    return st == MR_OK ? MR_OK : nomem(err, st, "text");
}

mr_status mr_report_kv(mr_report *r, const char *const *keys, const char *const *values, size_t n, mr_error *err)
{
    mr_status st = need_section(r, err);
    if (st != MR_OK) return st;
    st = mr_buf_puts(&r->body, "<table class=\"kv\">");
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        st = mr_buf_puts(&r->body, "<tr><th>");
        if (st == MR_OK) st = mr_report_escape(&r->body, keys[i]);
        if (st == MR_OK) st = mr_buf_puts(&r->body, "</th><td>");
        if (st == MR_OK) st = mr_report_escape(&r->body, values[i]);
        if (st == MR_OK) st = mr_buf_puts(&r->body, "</td></tr>");
        if (st == MR_OK) st = mr_buf_puts(&r->md, "- **");
        if (st == MR_OK) st = md_text(&r->md, keys[i]);
        if (st == MR_OK) st = mr_buf_puts(&r->md, "**: ");
        if (st == MR_OK) st = md_text(&r->md, values[i]);
        if (st == MR_OK) st = mr_buf_puts(&r->md, "\n");
    }
    if (st == MR_OK) st = mr_buf_puts(&r->body, "</table>\n");
    if (st == MR_OK) st = mr_buf_puts(&r->md, "\n");
    return st == MR_OK ? MR_OK : nomem(err, st, "a key-value table");
}

static int looks_numeric(const char *s)
{
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++)
        if (!strchr("0123456789.-+eE %[],", *p)) return 0;
    return 1;
}

mr_status mr_report_table(mr_report *r, const char *caption, const char *const *header, size_t n_cols,
                          const char *const *cells, size_t n_rows, const unsigned char *row_flag, mr_error *err)
{
    mr_status st = need_section(r, err);
    if (st != MR_OK) return st;
    if (n_cols == 0 || n_cols > 64) return MR_ERR(err, MR_E_INVALID_ARG, "report table: 1..64 columns, got %zu", n_cols);
    mr_buf *b = &r->body, *m = &r->md;
    st = mr_buf_puts(b, "<table>");
    if (st == MR_OK && caption) {
        st = mr_buf_puts(b, "<caption>");
        if (st == MR_OK) st = mr_report_escape(b, caption);
        if (st == MR_OK) st = mr_buf_puts(b, "</caption>");
        if (st == MR_OK) st = mr_buf_puts(m, "**");
        if (st == MR_OK) st = md_text(m, caption);
        if (st == MR_OK) st = mr_buf_puts(m, "**\n\n");
    }
    if (st == MR_OK) st = mr_buf_puts(b, "<thead><tr>");
    if (st == MR_OK) st = mr_buf_puts(m, "|");
    for (size_t k = 0; k < n_cols && st == MR_OK; k++) {
        st = mr_buf_puts(b, "<th>");
        if (st == MR_OK) st = mr_report_escape(b, header ? header[k] : "");
        if (st == MR_OK) st = mr_buf_puts(b, "</th>");
        if (st == MR_OK) st = mr_buf_puts(m, " ");
        if (st == MR_OK) st = md_text(m, header ? header[k] : "");
        if (st == MR_OK) st = mr_buf_puts(m, " |");
    }
    if (st == MR_OK) st = mr_buf_puts(b, "</tr></thead><tbody>");
    if (st == MR_OK) st = mr_buf_puts(m, "\n|");
    for (size_t k = 0; k < n_cols && st == MR_OK; k++) st = mr_buf_puts(m, "---|");
    if (st == MR_OK) st = mr_buf_puts(m, "\n");
    for (size_t i = 0; i < n_rows && st == MR_OK; i++) {
        int fl = row_flag && row_flag[i];
        st = mr_buf_puts(b, fl ? "<tr class=\"flag\">" : "<tr>");
        if (st == MR_OK && i < MD_MAX_ROWS) st = mr_buf_puts(m, "|");
        for (size_t k = 0; k < n_cols && st == MR_OK; k++) {
            const char *c = cells[i * n_cols + k];
            st = mr_buf_puts(b, looks_numeric(c) ? "<td class=\"num\">" : "<td>");
            if (st == MR_OK) st = mr_report_escape(b, c ? c : "");
            if (st == MR_OK) st = mr_buf_puts(b, "</td>");
            if (st == MR_OK && i < MD_MAX_ROWS) {
                st = mr_buf_puts(m, " ");
                if (st == MR_OK) st = md_text(m, c ? c : "");
                if (st == MR_OK) st = mr_buf_puts(m, k == 0 && fl ? " (!) |" : " |");
            }
        }
        if (st == MR_OK) st = mr_buf_puts(b, "</tr>");
        if (st == MR_OK && i < MD_MAX_ROWS) st = mr_buf_puts(m, "\n");
    }
    if (st == MR_OK) st = mr_buf_puts(b, "</tbody></table>\n");
    if (st == MR_OK && n_rows > MD_MAX_ROWS)
        st = mr_buf_printf(m, "\n_... %zu more rows in the HTML report_\n", n_rows - MD_MAX_ROWS);
    if (st == MR_OK) st = mr_buf_puts(m, "\n");
    return st == MR_OK ? MR_OK : nomem(err, st, "a table");
}

mr_status mr_report_svg(mr_report *r, const char *caption, const char *svg, mr_error *err)
{
    mr_status st = need_section(r, err);
    if (st != MR_OK) return st;
    if (!svg || strncmp(svg, "<svg", 4) != 0)
        return MR_ERR(err, MR_E_INVALID_ARG, "report: embedded chart must be an <svg> element");
    st = mr_buf_puts(&r->body, "<figure>");
    if (st == MR_OK) st = mr_buf_puts(&r->body, svg);
    if (st == MR_OK && caption) {
        st = mr_buf_puts(&r->body, "<figcaption>");
        if (st == MR_OK) st = mr_report_escape(&r->body, caption);
        if (st == MR_OK) st = mr_buf_puts(&r->body, "</figcaption>");
    }
    if (st == MR_OK) st = mr_buf_puts(&r->body, "</figure>\n");
    if (st == MR_OK) st = mr_buf_puts(&r->md, "_Chart: ");
    if (st == MR_OK) st = md_text(&r->md, caption ? caption : "(untitled)");
    if (st == MR_OK) st = mr_buf_puts(&r->md, " (in the HTML report)_\n\n");
    return st == MR_OK ? MR_OK : nomem(err, st, "a chart");
}

mr_status mr_report_html(const mr_report *r, mr_buf *out, mr_error *err)
{
    mr_status st = mr_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                                    "<link rel=\"icon\" href=\"data:,\"><title>");
    if (st == MR_OK) st = mr_report_escape(out, r->title);
    if (st == MR_OK) st = mr_buf_printf(out, "</title><style>%s</style></head>\n<body><header><h1>", CSS);
    if (st == MR_OK) st = mr_report_escape(out, r->title);
    if (st == MR_OK) st = mr_buf_puts(out, "</h1><nav>");
    for (size_t i = 0; i < r->n_sections && st == MR_OK; i++) {
        st = mr_buf_printf(out, "<a href=\"#%s\">", r->ids[i]);
        if (st == MR_OK) st = mr_report_escape(out, r->titles[i]);
        if (st == MR_OK) st = mr_buf_puts(out, "</a>");
    }
    if (st == MR_OK) st = mr_buf_puts(out, "</nav></header>\n<main>\n");
    if (st == MR_OK) st = mr_buf_append(out, r->body.data ? r->body.data : "", r->body.len);
    if (st == MR_OK && r->open) st = mr_buf_puts(out, "</section>\n");
    if (st == MR_OK) st = mr_buf_puts(out, "</main><footer>Generated by millrace. This file is self-contained.</footer></body></html>\n");
    return st == MR_OK ? MR_OK : MR_ERR(err, st, "report: cannot render HTML (%s)", mr_status_str(st));
}

mr_status mr_report_markdown(const mr_report *r, mr_buf *out, mr_error *err)
{
    mr_status st = mr_buf_puts(out, "# ");
    if (st == MR_OK) st = md_text(out, r->title);
    if (st == MR_OK) st = mr_buf_puts(out, "\n");
    if (st == MR_OK) st = mr_buf_append(out, r->md.data ? r->md.data : "", r->md.len);
    return st == MR_OK ? MR_OK : MR_ERR(err, st, "report: cannot render Markdown (%s)", mr_status_str(st));
}

mr_status mr_report_write(const mr_report *r, const char *html_path, const char *md_path, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status st = mr_report_html(r, &b, err);
    if (st == MR_OK) st = mr_fs_write_atomic(html_path, b.data, b.len, err);
    if (st == MR_OK && md_path) {
        b.len = 0;
        st = mr_report_markdown(r, &b, err);
        if (st == MR_OK) st = mr_fs_write_atomic(md_path, b.data, b.len, err);
    }
    mr_buf_free(&b);
    return st;
}

/* ---- ready-made sections -------------------------------------------------
 * Cells are formatted into one arena of fixed-width slots. */
#define CELL 96
typedef struct grid {
    char *mem;
    const char **cells;
    size_t n;
} grid;

static mr_status grid_new(grid *g, size_t rows, size_t cols, mr_error *err)
{
    g->n = rows * cols;
    g->mem = mr_calloc(g->n ? g->n : 1, CELL);
    g->cells = mr_calloc(g->n ? g->n : 1, sizeof(char *));
    if (!g->mem || !g->cells) {
        mr_free(g->mem);
        mr_free(g->cells);
        return MR_ERR(err, MR_E_NOMEM, "out of memory (report table of %zu cells)", g->n);
    }
    for (size_t i = 0; i < g->n; i++) g->cells[i] = g->mem + i * CELL;
    return MR_OK;
}

static char *gcell(grid *g, size_t i) { return g->mem + i * CELL; }

static void grid_free(grid *g)
{
    mr_free(g->mem);
    mr_free(g->cells);
}

static void fmt_val(char *dst, double v)
{
    if (isnan(v)) snprintf(dst, CELL, "-");
    else snprintf(dst, CELL, "%.4f", v);
}

static void fmt_ci(char *dst, double lo, double hi)
{
    if (isnan(lo) || isnan(hi)) snprintf(dst, CELL, "-");
    else snprintf(dst, CELL, "[%.4f, %.4f]", lo, hi);
}

static void copy_cell(char *dst, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= CELL) n = CELL - 1;
    if (n) memcpy(dst, s, n);
    dst[n] = 0;
}

static const char *const STATE_NAME[4] = {"executed", "cached", "failed", "skipped"};

mr_status mr_report_add_timeline(mr_report *r, const mr_report_stage *stg, size_t n, int cores_available,
                                 mr_error *err)
{
    mr_status st = mr_report_section(r, "timeline", "Stage timeline and resources", err);
    if (st != MR_OK) return st;
    double t0 = INFINITY, t1 = -INFINITY, cpu = 0;
    uint64_t rss = 0;
    size_t n_cached = 0, n_exec = 0, n_failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(stg[i].start) && isfinite(stg[i].wall)) {
            t0 = fmin(t0, stg[i].start);
            t1 = fmax(t1, stg[i].start + stg[i].wall);
        }
        if (isfinite(stg[i].cpu)) cpu += stg[i].cpu;
        if (stg[i].peak_rss > rss) rss = stg[i].peak_rss;
        n_cached += stg[i].state == MR_STAGE_CACHED;
        n_exec += stg[i].state == MR_STAGE_EXECUTED;
        n_failed += stg[i].state == MR_STAGE_FAILED;
    }
    double span = n && isfinite(t0) ? t1 - t0 : 0;
    if (cores_available < 1) cores_available = 1;
    char v[6][720]; /* wide enough for any %f of a double */
    snprintf(v[0], sizeof v[0], "%zu (%zu executed, %zu cached, %zu failed)", n, n_exec, n_cached, n_failed);
    snprintf(v[1], sizeof v[1], "%.3f s", span);
    snprintf(v[2], sizeof v[2], "%.3f s", cpu);
    snprintf(v[3], sizeof v[3], "%.1f%% of %d cores over the run (%.2f cores busy on average)",
             span > 0 ? 100 * cpu / (span * cores_available) : 0.0, cores_available, span > 0 ? cpu / span : 0.0);
    snprintf(v[4], sizeof v[4], "%.1f MiB", (double)rss / 1048576.0);
    snprintf(v[5], sizeof v[5], "%zu of %zu stages", n_cached, n);
    const char *keys[6] = {"stages", "wall time", "CPU time (user + sys)", "CPU used vs cores available",
                           "peak RSS (largest stage)", "cache hits"};
    const char *vals[6] = {v[0], v[1], v[2], v[3], v[4], v[5]};
    st = mr_report_kv(r, keys, vals, 6, err);
    if (st != MR_OK) return st;
    mr_gantt_bar *bars = mr_calloc(n ? n : 1, sizeof *bars);
    grid g;
    if (!bars) return MR_ERR(err, MR_E_NOMEM, "out of memory (timeline)");
    st = grid_new(&g, n, 7, err);
    if (st != MR_OK) {
        mr_free(bars);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        bars[i].label = stg[i].name;
        bars[i].start = stg[i].start;
        bars[i].end = stg[i].start + stg[i].wall;
        bars[i].state = stg[i].state;
        copy_cell(gcell(&g, i * 7), stg[i].name);
        copy_cell(gcell(&g, i * 7 + 1), STATE_NAME[(unsigned)stg[i].state < 4 ? stg[i].state : 0]);
        snprintf(gcell(&g, i * 7 + 2), CELL, "%.3f", stg[i].start - (isfinite(t0) ? t0 : 0));
        snprintf(gcell(&g, i * 7 + 3), CELL, "%.3f", stg[i].wall);
        snprintf(gcell(&g, i * 7 + 4), CELL, "%.3f", stg[i].cpu);
        snprintf(gcell(&g, i * 7 + 5), CELL, "%.2f", stg[i].wall > 0 ? stg[i].cpu / stg[i].wall : 0.0);
        snprintf(gcell(&g, i * 7 + 6), CELL, "%.1f", (double)stg[i].peak_rss / 1048576.0);
    }
    mr_buf svg;
    mr_buf_init(&svg);
    mr_chart c;
    mr_chart_init(&c);
    c.title = "Stage timeline";
    c.x_label = "seconds since the run started";
    c.width = 760;
    st = mr_report_chart_gantt(&svg, &c, bars, n, err);
    if (st == MR_OK) st = mr_report_svg(r, "Stages by start and wall time; colour = executed / cached / failed", svg.data, err);
    static const char *const hdr[7] = {"stage", "state", "start s", "wall s", "cpu s", "cpu/wall", "peak RSS MiB"};
    unsigned char *flag = mr_calloc(n ? n : 1, 1);
    if (st == MR_OK && !flag) st = MR_ERR(err, MR_E_NOMEM, "out of memory (timeline)");
    for (size_t i = 0; i < n && flag; i++) flag[i] = stg[i].state == MR_STAGE_FAILED;
    if (st == MR_OK) st = mr_report_table(r, "Stages", hdr, 7, g.cells, n, flag, err);
    mr_free(flag);
    mr_buf_free(&svg);
    grid_free(&g);
    mr_free(bars);
    return st;
}

mr_status mr_report_add_metrics(mr_report *r, const mr_report_metric *m, size_t n, mr_error *err)
{
    mr_status st = mr_report_section(r, "metrics", "Metrics", err);
    if (st != MR_OK) return st;
    grid g;
    st = grid_new(&g, n, 3, err);
    if (st != MR_OK) return st;
    mr_interval_mark *marks = mr_calloc(n ? n : 1, sizeof *marks);
    size_t nm = 0;
    if (!marks) {
        grid_free(&g);
        return MR_ERR(err, MR_E_NOMEM, "out of memory (metrics)");
    }
    for (size_t i = 0; i < n; i++) {
        copy_cell(gcell(&g, i * 3), m[i].name);
        fmt_val(gcell(&g, i * 3 + 1), m[i].value);
        fmt_ci(gcell(&g, i * 3 + 2), m[i].lo, m[i].hi);
        if (!isnan(m[i].lo) && !isnan(m[i].hi))
            marks[nm++] = (mr_interval_mark){m[i].name, m[i].value, m[i].lo, m[i].hi, 0};
    }
    static const char *const hdr[3] = {"metric", "value", "bootstrap interval"};
    st = mr_report_table(r, NULL, hdr, 3, g.cells, n, NULL, err);
    if (st == MR_OK && nm > 0) {
        mr_buf svg;
        mr_buf_init(&svg);
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Metrics with bootstrap intervals";
        st = mr_report_chart_intervals(&svg, &c, marks, nm, NAN, err);
        if (st == MR_OK) st = mr_report_svg(r, "Point estimate and percentile bootstrap interval", svg.data, err);
        mr_buf_free(&svg);
    }
    mr_free(marks);
    grid_free(&g);
    return st;
}

mr_status mr_report_add_slices(mr_report *r, const char *metric_name, const mr_slice *s, size_t n, double overall,
                               mr_error *err)
{
    mr_status st = mr_report_section(r, "slices", "Slices", err);
    if (st != MR_OK) return st;
    char note[200];
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) nf += s[i].flagged != 0;
    snprintf(note, sizeof note,
             "%s per slice; overall %.4f. %zu of %zu slices flagged: their whole interval is worse than the overall value.",
             metric_name ? metric_name : "metric", overall, nf, n);
    st = mr_report_text(r, note, err);
    if (st != MR_OK) return st;
    grid g;
    st = grid_new(&g, n, 6, err);
    if (st != MR_OK) return st;
    unsigned char *flag = mr_calloc(n ? n : 1, 1);
    mr_interval_mark *marks = mr_calloc(n ? n : 1, sizeof *marks);
    if (!flag || !marks) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory (slices)");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        copy_cell(gcell(&g, i * 6), s[i].label);
        snprintf(gcell(&g, i * 6 + 1), CELL, "%zu", s[i].n_rows);
        fmt_val(gcell(&g, i * 6 + 2), s[i].ci.point);
        fmt_ci(gcell(&g, i * 6 + 3), s[i].ci.lo, s[i].ci.hi);
        copy_cell(gcell(&g, i * 6 + 4), s[i].flagged ? "worse" : "");
        copy_cell(gcell(&g, i * 6 + 5), s[i].status == MR_OK ? "" : s[i].message);
        flag[i] = s[i].flagged != 0;
        marks[i] = (mr_interval_mark){s[i].label, s[i].ci.point, s[i].ci.lo, s[i].ci.hi, s[i].flagged};
    }
    static const char *const hdr[6] = {"slice", "rows", "value", "interval", "flag", "note"};
    st = mr_report_table(r, NULL, hdr, 6, g.cells, n, flag, err);
    if (st == MR_OK && n > 0) {
        mr_buf svg;
        mr_buf_init(&svg);
        mr_chart c;
        mr_chart_init(&c);
        c.title = "Slices against the overall value";
        c.x_label = metric_name;
        c.width = 640;
        st = mr_report_chart_intervals(&svg, &c, marks, n, overall, err);
        if (st == MR_OK) st = mr_report_svg(r, "Slice metric with interval; dashed line = overall; red = flagged", svg.data, err);
        mr_buf_free(&svg);
    }
done:
    mr_free(flag);
    mr_free(marks);
    grid_free(&g);
    return st;
}

mr_status mr_report_add_checks(mr_report *r, const char *const *names, const int *passed,
                               const char *const *details, size_t n, mr_error *err)
{
    mr_status st = mr_report_section(r, "checks", "Checks", err);
    if (st != MR_OK) return st;
    grid g;
    st = grid_new(&g, n, 3, err);
    if (st != MR_OK) return st;
    unsigned char *flag = mr_calloc(n ? n : 1, 1);
    if (!flag) {
        grid_free(&g);
        return MR_ERR(err, MR_E_NOMEM, "out of memory (checks)");
    }
    for (size_t i = 0; i < n; i++) {
        copy_cell(gcell(&g, i * 3), names[i]);
        copy_cell(gcell(&g, i * 3 + 1), passed[i] ? "pass" : "FAIL");
        copy_cell(gcell(&g, i * 3 + 2), details ? details[i] : "");
        flag[i] = !passed[i];
    }
    static const char *const hdr[3] = {"check", "result", "detail"};
    st = mr_report_table(r, NULL, hdr, 3, g.cells, n, flag, err);
    mr_free(flag);
    grid_free(&g);
    return st;
}
