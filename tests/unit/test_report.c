/* Unit tests for src/report: escaping, nice ticks, section id rules, that
 * charts escape their text and mark their data, that legends sit below the
 * plot, and that the document holds no scripts or external references. The browser rendering test is
 * tests/e2e/test_report_chromium.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/report.h"

static void test_escape_ticks(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    assert_int_equal(mr_report_escape(&b, "a<b>&\"c'"), MR_OK);
    assert_string_equal(b.data, "a&lt;b&gt;&amp;&quot;c&#39;");
    mr_buf_free(&b);
    double f, s;
    int n;
    mr_report_nice_ticks(0, 1, 5, &f, &s, &n);
    assert_true(fabs(s - 0.2) < 1e-12);
    assert_true(fabs(f) < 1e-12);
    assert_int_equal(n, 6);
    mr_report_nice_ticks(3.2, 97.1, 5, &f, &s, &n);
    assert_true(fabs(s - 20) < 1e-12);
    assert_true(fabs(f - 20) < 1e-12);
    mr_report_nice_ticks(5, 5, 5, &f, &s, &n); /* degenerate range widened */
    assert_true(n >= 2);
    mr_report_nice_ticks(NAN, 1, 5, &f, &s, &n);
    assert_true(n >= 2);
}

static void test_charts(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    mr_chart c;
    mr_chart_init(&c);
    c.title = "<b>t</b>";
    double x[] = {0, 0.5, NAN, 1}, y[] = {0, 0.7, 0.8, 1};
    mr_series s = {"a&b", x, y, 4, MR_SERIES_STEP};
    assert_int_equal(mr_report_chart_line(&b, &c, &s, 1, NULL), MR_OK);
    assert_true(strncmp(b.data, "<svg", 4) == 0);
    assert_non_null(strstr(b.data, "&lt;b&gt;t&lt;/b&gt;"));
    assert_non_null(strstr(b.data, "a&amp;b"));
    assert_non_null(strstr(b.data, "class=\"mark\""));
    assert_null(strstr(b.data, "nan"));
    assert_null(strstr(b.data, "inf"));
    b.len = 0;
    const char *lab[] = {"x<y", "z"};
    double cells[] = {1, 2, 3, 4};
    assert_int_equal(mr_report_chart_heatmap(&b, &c, lab, lab, cells, 2, 2, NULL), MR_OK);
    assert_non_null(strstr(b.data, "x&lt;y"));
    assert_int_equal(mr_report_chart_heatmap(&b, &c, lab, lab, cells, 0, 2, NULL), MR_E_INVALID_ARG);
    b.len = 0;
    mr_gantt_bar g[] = {{"s1", 0, 1, MR_STAGE_CACHED}, {"s2", 1, 3, MR_STAGE_FAILED}};
    assert_int_equal(mr_report_chart_gantt(&b, &c, g, 2, NULL), MR_OK);
    assert_non_null(strstr(b.data, "#e15759"));
    b.len = 0;
    mr_interval_mark m[] = {{"a", 0.5, 0.4, 0.6, 1}, {"b", 0.7, NAN, NAN, 0}};
    assert_int_equal(mr_report_chart_intervals(&b, &c, m, 2, 0.65, NULL), MR_OK);
    b.len = 0;
    assert_int_equal(mr_report_chart_scatter(&b, &c, x, y, 4, 0, NULL), MR_OK);
    b.len = 0;
    assert_int_equal(mr_report_chart_bars(&b, &c, lab, cells, 2, NULL), MR_OK);
    mr_buf_free(&b);
}

static void test_document(void **state)
{
    (void)state;
    mr_report *r = NULL;
    mr_error err;
    mr_error_init(&err);
    assert_int_equal(mr_report_new("T <1>", &r, NULL), MR_OK);
    assert_int_equal(mr_report_text(r, "orphan", &err), MR_E_STATE);
    mr_error_clear(&err);
    assert_int_equal(mr_report_section(r, "bad id", "x", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    assert_int_equal(mr_report_section(r, "a", "A", NULL), MR_OK);
    assert_int_equal(mr_report_section(r, "a", "again", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    const char *k[] = {"k|1"}, *v[] = {"<script>x</script>"};
    assert_int_equal(mr_report_kv(r, k, v, 1, NULL), MR_OK);
    const char *hdr[] = {"c1", "c2"}, *cells[] = {"1", "a|b", "2", NULL};
    unsigned char flag[] = {0, 1};
    assert_int_equal(mr_report_table(r, "cap", hdr, 2, cells, 2, flag, NULL), MR_OK);
    assert_int_equal(mr_report_svg(r, "x", "<div>", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    mr_report_stage st[] = {{"s", 0, 1, 0.5, 1 << 20, MR_STAGE_EXECUTED}};
    assert_int_equal(mr_report_add_timeline(r, st, 1, 2, NULL), MR_OK);
    mr_report_metric m[] = {{"auc", 0.8, 0.7, 0.9}};
    assert_int_equal(mr_report_add_metrics(r, m, 1, NULL), MR_OK);
    const char *cn[] = {"c"};
    int ok[] = {0};
    assert_int_equal(mr_report_add_checks(r, cn, ok, NULL, 1, NULL), MR_OK);
    mr_buf h, md;
    mr_buf_init(&h);
    mr_buf_init(&md);
    assert_int_equal(mr_report_html(r, &h, NULL), MR_OK);
    assert_int_equal(mr_report_markdown(r, &md, NULL), MR_OK);
    assert_null(strstr(h.data, "<script"));
    assert_null(strstr(h.data, "src="));
    assert_null(strstr(h.data, "href=\"http")); /* only #anchors and the data: icon */
    assert_null(strstr(h.data, "url("));
    assert_non_null(strstr(h.data, "<section id=\"timeline\">"));
    assert_non_null(strstr(h.data, "<tr class=\"flag\">"));
    assert_non_null(strstr(md.data, "a\\|b"));
    assert_null(strstr(md.data, "<script"));
    mr_buf_free(&h);
    mr_buf_free(&md);
    mr_report_free(r);
    mr_report_free(NULL);
}

/* The value of attribute name in the first element at or after p. */
static double attr(const char *p, const char *name)
{
    char key[32];
    snprintf(key, sizeof(key), " %s=\"", name);
    const char *a = strstr(p, key);
    return a ? strtod(a + strlen(key), NULL) : NAN;
}

/* Legends sit below the plot area (never over a curve) and wrap into rows;
 * faint series are grey, thin and left out of the legend. */
static void test_legend_below_plot(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    mr_chart c;
    mr_chart_init(&c);
    double x[] = {0, 0.5, 1}, y[] = {0, 0.9, 1};
    mr_series s[6] = {{"first series", x, y, 3, MR_SERIES_LINE},    {"second series", x, y, 3, MR_SERIES_STEP},
                      {"a third, longer series name", x, y, 3, MR_SERIES_LINE}, {"fourth", x, y, 3, MR_SERIES_POINTS},
                      {"never listed", x, y, 3, MR_SERIES_FAINT},  {"fifth series name", x, y, 3, MR_SERIES_LINE}};
    assert_int_equal(mr_report_chart_line(&b, &c, s, 6, NULL), MR_OK);
    const char *plot = strstr(b.data, "fill=\"#fafafa\""); /* the plot area's rect */
    assert_non_null(plot);
    while (plot > b.data && strncmp(plot, "<rect", 5)) plot--;
    double plot_bottom = attr(plot, "y") + attr(plot, "height");
    double svg_h = attr(b.data, "height");
    assert_true(svg_h > 340); /* grown for the legend rows */
    int n_items = 0, rows_seen = 0;
    double last_y = -1;
    for (const char *p = strstr(b.data, "width=\"10\" height=\"10\""); p; p = strstr(p + 1, "width=\"10\" height=\"10\"")) {
        const char *r = p;
        while (r > b.data && strncmp(r, "<rect", 5)) r--;
        double ly = attr(r, "y");
        assert_true(ly > plot_bottom + 14); /* under the x tick labels and axis label */
        assert_true(ly + 10 <= svg_h);
        if (ly != last_y) rows_seen++;
        last_y = ly;
        n_items++;
    }
    assert_int_equal(n_items, 5);
    assert_true(rows_seen >= 2); /* five names do not fit one row of 520 px */
    assert_null(strstr(b.data, "never listed"));
    assert_non_null(strstr(b.data, "stroke=\"#c5ccd3\" stroke-width=\"1\""));
    /* Without names: no legend, no extra height. */
    b.len = 0;
    mr_series anon = {NULL, x, y, 3, MR_SERIES_LINE};
    assert_int_equal(mr_report_chart_line(&b, &c, &anon, 1, NULL), MR_OK);
    assert_true(attr(b.data, "height") == 340);
    mr_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_ticks),
        cmocka_unit_test(test_charts),
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_legend_below_plot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
