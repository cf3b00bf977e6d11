/* SVG chart toolkit for the HTML report: line/step/point charts, scatter,
 * horizontal bars, heatmap, gantt timeline and interval marks, with nice
 * axis ticks, legends and escaped text. Output is plain SVG 1.1 markup with
 * presentation attributes (no CSS classes needed, no scripts, no links);
 * data marks carry class="mark" so tests can check that a chart drew. */
#include "millrace/report.h"

#include <math.h>
#include <string.h>

#define MAX_LINE_POINTS 2000
#define ML 64 /* left margin, px: y tick labels */
#define MR 20
#define MT 32 /* title */
#define MB 48 /* x ticks + label */

static const char *const PALETTE[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define N_PALETTE (sizeof PALETTE / sizeof PALETTE[0])
#define FAINT "#c5ccd3" /* faint series: grey, thin */

void mr_chart_init(mr_chart *c)
{
    memset(c, 0, sizeof *c);
    c->x_min = c->x_max = c->y_min = c->y_max = NAN;
}

mr_status mr_report_escape(mr_buf *out, const char *s)
{
    if (!s) return MR_OK;
    const char *run = s;
    mr_status st = MR_OK;
    for (const char *p = s; *p && st == MR_OK; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: break;
        }
        if (!rep) continue;
        st = mr_buf_append(out, run, (size_t)(p - run));
        if (st == MR_OK) st = mr_buf_puts(out, rep);
        run = p + 1;
    }
    if (st == MR_OK) st = mr_buf_puts(out, run);
    return st;
}

void mr_report_nice_ticks(double lo, double hi, int target, double *first, double *step, int *count)
{
    if (!isfinite(lo) || !isfinite(hi)) lo = 0, hi = 1;
    if (hi < lo) {
        double t = lo;
        lo = hi;
        hi = t;
    }
    if (hi == lo) lo -= 0.5, hi += 0.5;
    if (target < 2) target = 2;
    double raw = (hi - lo) / target, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    double nice = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
    double s = nice * mag;
    double f = ceil(lo / s - 1e-9) * s;
    int c = (int)floor((hi - f) / s + 1e-9) + 1;
    *first = f;
    *step = s;
    *count = c < 1 ? 1 : c;
}

/* ---- shared frame --------------------------------------------------------*/
typedef struct frame {
    double w, h, x0, x1, y0, y1; /* pixel box of the plot area */
    double dx0, dx1, dy0, dy1;   /* data range */
    mr_buf *b;
} frame;

static double px(const frame *f, double x) { return f->x0 + (x - f->dx0) / (f->dx1 - f->dx0) * (f->x1 - f->x0); }
static double py(const frame *f, double y) { return f->y1 - (y - f->dy0) / (f->dy1 - f->dy0) * (f->y1 - f->y0); }

static int decimals_for(double step)
{
    int d = 0;
    while (d < 8 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-6) d++;
    return d;
}

static mr_status fmt_num(mr_buf *b, double v, int dec)
{
    if (fabs(v) >= 1e6 || (fabs(v) < 1e-4 && v != 0)) return mr_buf_printf(b, "%.3g", v);
    return mr_buf_printf(b, "%.*f", dec, v == 0 ? 0.0 : v);
}

static mr_status text(mr_buf *b, double x, double y, const char *anchor, const char *extra, const char *s)
{
    mr_status st = mr_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y, anchor,
                                 extra ? " " : "", extra ? extra : "");
    if (st == MR_OK) st = mr_report_escape(b, s);
    if (st == MR_OK) st = mr_buf_puts(b, "</text>");
    return st;
}

static mr_status svg_open(mr_buf *b, const mr_chart *c, double w, double h)
{
    mr_status st = mr_buf_printf(b,
                                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                                 "viewBox=\"0 0 %.0f %.0f\" role=\"img\" font-family=\"sans-serif\" "
                                 "font-size=\"11\">",
                                 w, h, w, h);
    if (st == MR_OK) st = mr_buf_printf(b, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>", w, h);
    if (st == MR_OK && c->title) {
        st = mr_buf_puts(b, "<title>");
        if (st == MR_OK) st = mr_report_escape(b, c->title);
        if (st == MR_OK) st = mr_buf_puts(b, "</title>");
        if (st == MR_OK) st = text(b, w / 2, 18, "middle", "font-size=\"13\" font-weight=\"bold\"", c->title);
    }
    return st;
}

/* Axes with ticks and grid for numeric x and y. */
static mr_status axes(frame *f, const mr_chart *c, int x_numeric, int y_numeric)
{
    mr_buf *b = f->b;
    mr_status st = mr_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#cccccc\"/>",
                                 f->x0, f->y0, f->x1 - f->x0, f->y1 - f->y0);
    double t0, s;
    int n;
    if (st == MR_OK && x_numeric) {
        mr_report_nice_ticks(f->dx0, f->dx1, 6, &t0, &s, &n);
        int dec = decimals_for(s);
        for (int i = 0; i < n && st == MR_OK; i++) {
            double v = t0 + i * s, x = px(f, v);
            if (x < f->x0 - 0.5 || x > f->x1 + 0.5) continue;
            st = mr_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", x, f->y0, x, f->y1);
            if (st == MR_OK) st = mr_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x, f->y1 + 14);
            if (st == MR_OK) st = fmt_num(b, v, dec);
            if (st == MR_OK) st = mr_buf_puts(b, "</text>");
        }
    }
    if (st == MR_OK && y_numeric) {
        mr_report_nice_ticks(f->dy0, f->dy1, 5, &t0, &s, &n);
        int dec = decimals_for(s);
        for (int i = 0; i < n && st == MR_OK; i++) {
            double v = t0 + i * s, y = py(f, v);
            if (y < f->y0 - 0.5 || y > f->y1 + 0.5) continue;
            st = mr_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", f->x0, y, f->x1, y);
            if (st == MR_OK) st = mr_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", f->x0 - 5, y + 4);
            if (st == MR_OK) st = fmt_num(b, v, dec);
            if (st == MR_OK) st = mr_buf_puts(b, "</text>");
        }
    }
    if (st == MR_OK && c->x_label) st = text(b, (f->x0 + f->x1) / 2, f->h - 10, "middle", NULL, c->x_label);
    if (st == MR_OK && c->y_label) {
        st = mr_buf_printf(b, "<text x=\"0\" y=\"0\" text-anchor=\"middle\" transform=\"translate(14 %.1f) rotate(-90)\">",
                           (f->y0 + f->y1) / 2);
        if (st == MR_OK) st = mr_report_escape(b, c->y_label);
        if (st == MR_OK) st = mr_buf_puts(b, "</text>");
    }
    return st;
}

static void frame_init(frame *f, mr_buf *b, const mr_chart *c, double left)
{
    f->b = b;
    f->w = c->width > 0 ? c->width : 520;
    f->h = c->height > 0 ? c->height : 340;
    f->x0 = left;
    f->x1 = f->w - MR;
    f->y0 = MT;
    f->y1 = f->h - MB;
}

/* Data range -> nice range, unless fixed by the chart. */
static void set_range(double *lo, double *hi, double fixed_lo, double fixed_hi)
{
    double a = *lo, z = *hi;
    if (!isfinite(a) || !isfinite(z)) a = 0, z = 1;
    if (a == z) a -= 0.5, z += 0.5;
    double t0, s;
    int n;
    mr_report_nice_ticks(a, z, 5, &t0, &s, &n);
    if (t0 > a) t0 -= s;
    double last = t0 + (n - 1) * s;
    while (last < z) last += s;
    *lo = isnan(fixed_lo) ? t0 : fixed_lo;
    *hi = isnan(fixed_hi) ? last : fixed_hi;
    if (*hi <= *lo) *hi = *lo + 1;
}

/* The legend sits below the plot, under the x-axis label, in rows that
 * wrap at the plot's width, so it never covers a curve. Text width is
 * estimated (LEGEND_CHAR_W per character at font-size 11). */
#define LEGEND_ROW 16
#define LEGEND_CHAR_W 6.5
#define LEGEND_GAP 18

static double legend_item_w(const char *name) { return 14 + LEGEND_CHAR_W * (double)strlen(name) + LEGEND_GAP; }

/* Rows the legend of these names needs between x0 and x1 (0: none named). */
static int legend_rows(const char *const *names, size_t n, double x0, double x1)
{
    int rows = 0;
    double x = x1;
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        double w = legend_item_w(names[i]);
        if (rows == 0 || x + w > x1) {
            rows++;
            x = x0;
        }
        x += w;
    }
    return rows;
}

/* Draws the legend rows from y0 (the top of the first row) down. */
static mr_status legend(mr_buf *b, const frame *f, double y0, const char *const *names, const char *const *colors, size_t n)
{
    mr_status st = MR_OK;
    double x = f->x1, y = y0 - LEGEND_ROW;
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        if (!names[i]) continue;
        double w = legend_item_w(names[i]);
        if (x + w > f->x1) {
            x = f->x0;
            y += LEGEND_ROW;
        }
        st = mr_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", x, y, colors[i]);
        if (st == MR_OK) st = text(b, x + 14, y + 9, "start", NULL, names[i]);
        x += w;
    }
    return st;
}

/* ---- line chart ----------------------------------------------------------*/
mr_status mr_report_chart_line(mr_buf *out, const mr_chart *c, const mr_series *s, size_t n_series, mr_error *err)
{
    frame f;
    frame_init(&f, out, c, ML);
    double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
    for (size_t k = 0; k < n_series; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
            xl = fmin(xl, s[k].x[i]);
            xh = fmax(xh, s[k].x[i]);
            yl = fmin(yl, s[k].y[i]);
            yh = fmax(yh, s[k].y[i]);
        }
    f.dx0 = xl, f.dx1 = xh, f.dy0 = yl, f.dy1 = yh;
    set_range(&f.dx0, &f.dx1, c->x_min, c->x_max);
    set_range(&f.dy0, &f.dy1, c->y_min, c->y_max);
    /* Colours go to the series that are not faint, in order; the legend
     * names those (at most one palette round). */
    const char *names[N_PALETTE], *colors[N_PALETTE];
    size_t n_leg = 0;
    for (size_t k = 0; k < n_series && n_leg < N_PALETTE; k++) {
        if (s[k].kind == MR_SERIES_FAINT) continue;
        names[n_leg] = s[k].name;
        colors[n_leg] = PALETTE[n_leg];
        n_leg++;
    }
    int rows = legend_rows(names, n_leg, f.x0, f.x1);
    double total_h = f.h + (rows ? rows * LEGEND_ROW + 6 : 0);
    mr_status st = svg_open(out, c, f.w, total_h);
    if (st == MR_OK) st = axes(&f, c, 1, 1);
    if (st == MR_OK && c->diagonal) {
        double a = fmax(f.dx0, f.dy0), z = fmin(f.dx1, f.dy1);
        if (z > a)
            st = mr_buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999999\" stroke-dasharray=\"4 3\"/>",
                               px(&f, a), py(&f, a), px(&f, z), py(&f, z));
    }
    size_t n_col = 0;
    for (size_t k = 0; k < n_series && st == MR_OK; k++) {
        int faint = s[k].kind == MR_SERIES_FAINT;
        const char *col = faint ? FAINT : PALETTE[n_col++ % N_PALETTE];
        const char *width = faint ? "1" : "2";
        size_t n = s[k].n, step = n > MAX_LINE_POINTS ? (n + MAX_LINE_POINTS - 1) / MAX_LINE_POINTS : 1;
        if (s[k].kind == MR_SERIES_POINTS) {
            for (size_t i = 0; i < n && st == MR_OK; i += step) {
                if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
                st = mr_buf_printf(out, "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"/>",
                                   px(&f, s[k].x[i]), py(&f, s[k].y[i]), faint ? "2" : "3", col);
            }
            continue;
        }
        st = mr_buf_printf(out, "<path class=\"mark\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" d=\"", col, width);
        int pen = 0;
        double prev_y = 0;
        for (size_t i = 0; i < n && st == MR_OK; i = (i + step < n || i == n - 1) ? i + step : n - 1) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) {
                pen = 0;
            } else {
                if (pen && s[k].kind == MR_SERIES_STEP) st = mr_buf_printf(out, "L%.1f %.1f", px(&f, x), prev_y);
                if (st == MR_OK) st = mr_buf_printf(out, "%s%.1f %.1f", pen ? "L" : "M", px(&f, x), py(&f, y));
                prev_y = py(&f, y);
                pen = 1;
            }
            if (i == n - 1) break;
        }
        if (st == MR_OK) st = mr_buf_puts(out, "\"/>");
    }
    if (st == MR_OK && rows) st = legend(out, &f, f.h + 2, names, colors, n_leg); /* under the x-axis label */
    if (st == MR_OK) st = mr_buf_puts(out, "</svg>");
    if (st != MR_OK) return MR_ERR(err, st, "line chart: cannot grow the output buffer");
    return MR_OK;
}

mr_status mr_report_chart_scatter(mr_buf *out, const mr_chart *c, const double *x, const double *y, size_t n,
                                  size_t max_points, mr_error *err)
{
    frame f;
    frame_init(&f, out, c, ML);
    if (max_points == 0) max_points = 2000;
    size_t m = n < max_points ? n : max_points;
    double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
    for (size_t j = 0; j < m; j++) {
        size_t i = (size_t)(((unsigned __int128)j * n) / m);
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        xl = fmin(xl, x[i]), xh = fmax(xh, x[i]), yl = fmin(yl, y[i]), yh = fmax(yh, y[i]);
    }
    f.dx0 = xl, f.dx1 = xh, f.dy0 = yl, f.dy1 = yh;
    set_range(&f.dx0, &f.dx1, c->x_min, c->x_max);
    set_range(&f.dy0, &f.dy1, c->y_min, c->y_max);
    mr_status st = svg_open(out, c, f.w, f.h);
    if (st == MR_OK) st = axes(&f, c, 1, 1);
    if (st == MR_OK && f.dy0 < 0 && f.dy1 > 0)
        st = mr_buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999999\" stroke-dasharray=\"4 3\"/>",
                           f.x0, py(&f, 0), f.x1, py(&f, 0));
    for (size_t j = 0; j < m && st == MR_OK; j++) {
        size_t i = (size_t)(((unsigned __int128)j * n) / m);
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        st = mr_buf_printf(out, "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\" fill-opacity=\"0.6\"/>",
                           px(&f, x[i]), py(&f, y[i]), PALETTE[0]);
    }
    if (st == MR_OK) st = mr_buf_puts(out, "</svg>");
    if (st != MR_OK) return MR_ERR(err, st, "scatter chart: cannot grow the output buffer");
    return MR_OK;
}

/* Truncates a label for display into buf (UTF-8 safe enough: cuts at a
 * byte that does not continue a sequence). */
static const char *short_label(const char *s, char *buf, size_t cap)
{
    if (!s) return "";
    size_t n = strlen(s);
    if (n < cap) return s;
    size_t k = cap - 4;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    memcpy(buf, s, k);
    memcpy(buf + k, "...", 4);
    return buf;
}

mr_status mr_report_chart_bars(mr_buf *out, const mr_chart *c, const char *const *labels, const double *values,
                               size_t n, mr_error *err)
{
    frame f;
    mr_chart cc = *c;
    if (cc.height == 0) cc.height = (int)(MT + MB + 22 * (n ? n : 1));
    frame_init(&f, out, &cc, 170);
    double vmax = 0, vmin = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(values[i])) vmax = fmax(vmax, values[i]), vmin = fmin(vmin, values[i]);
    f.dx0 = vmin, f.dx1 = vmax;
    set_range(&f.dx0, &f.dx1, c->x_min, c->x_max);
    f.dy0 = 0, f.dy1 = 1;
    mr_status st = svg_open(out, c, f.w, f.h);
    if (st == MR_OK) st = axes(&f, c, 1, 0);
    double row = (f.y1 - f.y0) / (double)(n ? n : 1);
    char buf[32];
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        double y = f.y0 + row * (double)i, v = isfinite(values[i]) ? values[i] : 0;
        double a = px(&f, fmin(0, v)), z = px(&f, fmax(0, v));
        st = text(out, f.x0 - 6, y + row / 2 + 4, "end", NULL, short_label(labels[i], buf, sizeof buf));
        if (st == MR_OK)
            st = mr_buf_printf(out, "<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>",
                               a, y + row * 0.15, fmax(z - a, 0.5), row * 0.7, PALETTE[0]);
        if (st == MR_OK) st = mr_buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%.4g</text>", z + 3,
                                            y + row / 2 + 4, v);
    }
    if (st == MR_OK) st = mr_buf_puts(out, "</svg>");
    if (st != MR_OK) return MR_ERR(err, st, "bar chart: cannot grow the output buffer");
    return MR_OK;
}

mr_status mr_report_chart_heatmap(mr_buf *out, const mr_chart *c, const char *const *row_labels,
                                  const char *const *col_labels, const double *cells, size_t n_rows, size_t n_cols,
                                  mr_error *err)
{
    if (n_rows == 0 || n_cols == 0 || n_rows > 1000 || n_cols > 1000)
        return MR_ERR(err, MR_E_INVALID_ARG, "heatmap: %zu x %zu cells (need 1..1000 each way)", n_rows, n_cols);
    frame f;
    frame_init(&f, out, c, 110);
    f.y1 = f.h - MB;
    double vmax = 0;
    for (size_t i = 0; i < n_rows * n_cols; i++)
        if (isfinite(cells[i])) vmax = fmax(vmax, cells[i]);
    mr_status st = svg_open(out, c, f.w, f.h);
    double cw = (f.x1 - f.x0) / (double)n_cols, ch = (f.y1 - f.y0) / (double)n_rows;
    char buf[20];
    for (size_t r = 0; r < n_rows && st == MR_OK; r++) {
        st = text(out, f.x0 - 6, f.y0 + ch * ((double)r + 0.5) + 4, "end", NULL, short_label(row_labels ? row_labels[r] : "", buf, sizeof buf));
        for (size_t k = 0; k < n_cols && st == MR_OK; k++) {
            double v = cells[r * n_cols + k], t = vmax > 0 && isfinite(v) ? v / vmax : 0;
            int R = (int)lround(247 + (8 - 247) * t), G = (int)lround(251 + (48 - 251) * t), B = (int)lround(255 + (107 - 255) * t);
            double x = f.x0 + cw * (double)k, y = f.y0 + ch * (double)r;
            st = mr_buf_printf(out, "<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#%02x%02x%02x\" stroke=\"#ffffff\"/>",
                               x, y, cw, ch, R, G, B);
            if (st == MR_OK && cw >= 24 && ch >= 12)
                st = mr_buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%.4g</text>",
                                   x + cw / 2, y + ch / 2 + 4, t > 0.5 ? "#ffffff" : "#222222", v);
        }
    }
    for (size_t k = 0; k < n_cols && st == MR_OK; k++)
        st = text(out, f.x0 + cw * ((double)k + 0.5), f.y1 + 14, "middle", NULL, short_label(col_labels ? col_labels[k] : "", buf, sizeof buf));
    if (st == MR_OK && c->x_label) st = text(out, (f.x0 + f.x1) / 2, f.h - 10, "middle", NULL, c->x_label);
    if (st == MR_OK && c->y_label) {
        st = mr_buf_printf(out, "<text x=\"0\" y=\"0\" text-anchor=\"middle\" transform=\"translate(14 %.1f) rotate(-90)\">", (f.y0 + f.y1) / 2);
        if (st == MR_OK) st = mr_report_escape(out, c->y_label);
        if (st == MR_OK) st = mr_buf_puts(out, "</text>");
    }
    if (st == MR_OK) st = mr_buf_puts(out, "</svg>");
    if (st != MR_OK) return MR_ERR(err, st, "heatmap: cannot grow the output buffer");
    return MR_OK;
}

static const char *const STATE_COLOR[4] = {"#4e79a7", "#59a14f", "#e15759", "#bab0ac"};
static const char *const STATE_NAME[4] = {"executed", "cached", "failed", "skipped"};

mr_status mr_report_chart_gantt(mr_buf *out, const mr_chart *c, const mr_gantt_bar *bars, size_t n, mr_error *err)
{
    frame f;
    mr_chart cc = *c;
    if (cc.height == 0) cc.height = (int)(MT + MB + 22 * (n ? n : 1) + 20);
    frame_init(&f, out, &cc, 150);
    f.y0 += 20; /* legend row */
    double t0 = INFINITY, t1 = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(bars[i].start) && isfinite(bars[i].end)) t0 = fmin(t0, bars[i].start), t1 = fmax(t1, bars[i].end);
    if (!isfinite(t0)) t0 = 0, t1 = 1;
    f.dx0 = 0, f.dx1 = t1 - t0;
    set_range(&f.dx0, &f.dx1, NAN, c->x_max);
    f.dx0 = 0;
    f.dy0 = 0, f.dy1 = 1;
    mr_status st = svg_open(out, c, f.w, f.h);
    if (st == MR_OK) st = axes(&f, c, 1, 0);
    for (int s = 0; s < 4 && st == MR_OK; s++) {
        double x = f.x0 + 90.0 * s;
        st = mr_buf_printf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", x, f.y0 - 18, STATE_COLOR[s]);
        if (st == MR_OK) st = text(out, x + 14, f.y0 - 9, "start", NULL, STATE_NAME[s]);
    }
    double row = (f.y1 - f.y0) / (double)(n ? n : 1);
    char buf[24];
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        const mr_gantt_bar *g = &bars[i];
        double y = f.y0 + row * (double)i;
        st = text(out, f.x0 - 6, y + row / 2 + 4, "end", NULL, short_label(g->label, buf, sizeof buf));
        if (st != MR_OK || !isfinite(g->start) || !isfinite(g->end)) continue;
        double a = px(&f, g->start - t0), z = px(&f, g->end - t0);
        unsigned si = (unsigned)g->state < 4 ? (unsigned)g->state : 0;
        st = mr_buf_printf(out, "<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
                           a, y + row * 0.15, fmax(z - a, 1.5), row * 0.7, STATE_COLOR[si]);
        if (st == MR_OK) st = mr_report_escape(out, g->label);
        if (st == MR_OK) st = mr_buf_printf(out, ": %s, %.3f s</title></rect>", STATE_NAME[si], g->end - g->start);
    }
    if (st == MR_OK) st = mr_buf_puts(out, "</svg>");
    if (st != MR_OK) return MR_ERR(err, st, "timeline chart: cannot grow the output buffer");
    return MR_OK;
}

mr_status mr_report_chart_intervals(mr_buf *out, const mr_chart *c, const mr_interval_mark *m, size_t n,
                                    double reference, mr_error *err)
{
    frame f;
    mr_chart cc = *c;
    if (cc.height == 0) cc.height = (int)(MT + MB + 22 * (n ? n : 1));
    frame_init(&f, out, &cc, 170);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double v[3] = {m[i].point, m[i].lo, m[i].hi};
        for (int k = 0; k < 3; k++)
            if (isfinite(v[k])) lo = fmin(lo, v[k]), hi = fmax(hi, v[k]);
    }
    if (isfinite(reference)) lo = fmin(lo, reference), hi = fmax(hi, reference);
    f.dx0 = lo, f.dx1 = hi;
    set_range(&f.dx0, &f.dx1, c->x_min, c->x_max);
    f.dy0 = 0, f.dy1 = 1;
    mr_status st = svg_open(out, c, f.w, f.h);
    if (st == MR_OK) st = axes(&f, c, 1, 0);
    if (st == MR_OK && isfinite(reference))
        st = mr_buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555555\" stroke-dasharray=\"4 3\"/>",
                           px(&f, reference), f.y0, px(&f, reference), f.y1);
    double row = (f.y1 - f.y0) / (double)(n ? n : 1);
    char buf[32];
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        double y = f.y0 + row * ((double)i + 0.5);
        const char *col = m[i].flagged ? "#e15759" : PALETTE[0];
        st = text(out, f.x0 - 6, y + 4, "end", m[i].flagged ? "fill=\"#c0392b\"" : NULL, short_label(m[i].label, buf, sizeof buf));
        if (st == MR_OK && isfinite(m[i].lo) && isfinite(m[i].hi))
            st = mr_buf_printf(out, "<line class=\"mark\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>",
                               px(&f, m[i].lo), y, px(&f, m[i].hi), y, col);
        if (st == MR_OK && isfinite(m[i].point))
            st = mr_buf_printf(out, "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>", px(&f, m[i].point), y, col);
    }
    if (st == MR_OK) st = mr_buf_puts(out, "</svg>");
    if (st != MR_OK) return MR_ERR(err, st, "interval chart: cannot grow the output buffer");
    return MR_OK;
}
