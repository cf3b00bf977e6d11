/* Unit tests for src/report: escaping, nice ticks, section id rules, that
 * charts escape their text and mark their data, that legends sit below the
 * plot, that the document holds no scripts or external references, and
 * that a run report written as an artifact holds nothing of the run (id,
 * status, times) and draws a study's trials in one chart. The browser
 * rendering test is tests/e2e/test_report_chromium.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <string.h>

#include "millrace/report.h"
#include "millrace/runreport.h"
#include "millrace/runstore.h"

#include <stdlib.h>
#include <unistd.h>

static void test_escape_ticks(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_report_escape(&b, "a<b>&\"c'"));
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
    assert_ok(mr_report_chart_line(&b, &c, &s, 1, NULL));
    assert_true(strncmp(b.data, "<svg", 4) == 0);
    assert_non_null(strstr(b.data, "&lt;b&gt;t&lt;/b&gt;"));
    assert_non_null(strstr(b.data, "a&amp;b"));
    assert_non_null(strstr(b.data, "class=\"mark\""));
    assert_null(strstr(b.data, "nan"));
    assert_null(strstr(b.data, "inf"));
    b.len = 0;
    const char *lab[] = {"x<y", "z"};
    double cells[] = {1, 2, 3, 4};
    assert_ok(mr_report_chart_heatmap(&b, &c, lab, lab, cells, 2, 2, NULL));
    assert_non_null(strstr(b.data, "x&lt;y"));
    assert_status(mr_report_chart_heatmap(&b, &c, lab, lab, cells, 0, 2, NULL), MR_E_INVALID_ARG);
    b.len = 0;
    mr_gantt_bar g[] = {{"s1", 0, 1, MR_STAGE_CACHED}, {"s2", 1, 3, MR_STAGE_FAILED}};
    assert_ok(mr_report_chart_gantt(&b, &c, g, 2, NULL));
    assert_non_null(strstr(b.data, "#e15759"));
    b.len = 0;
    mr_interval_mark m[] = {{"a", 0.5, 0.4, 0.6, 1}, {"b", 0.7, NAN, NAN, 0}};
    assert_ok(mr_report_chart_intervals(&b, &c, m, 2, 0.65, NULL));
    b.len = 0;
    assert_ok(mr_report_chart_scatter(&b, &c, x, y, 4, 0, NULL));
    b.len = 0;
    assert_ok(mr_report_chart_bars(&b, &c, lab, cells, 2, NULL));
    mr_buf_free(&b);
}

static void test_document(void **state)
{
    (void)state;
    mr_report *r = NULL;
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_report_new("T <1>", &r, NULL));
    assert_status(mr_report_text(r, "orphan", &err), MR_E_STATE);
    mr_error_clear(&err);
    assert_status(mr_report_section(r, "bad id", "x", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    assert_ok(mr_report_section(r, "a", "A", NULL));
    assert_status(mr_report_section(r, "a", "again", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    const char *k[] = {"k|1"}, *v[] = {"<script>x</script>"};
    assert_ok(mr_report_kv(r, k, v, 1, NULL));
    const char *hdr[] = {"c1", "c2"}, *cells[] = {"1", "a|b", "2", NULL};
    unsigned char flag[] = {0, 1};
    assert_ok(mr_report_table(r, "cap", hdr, 2, cells, 2, flag, NULL));
    assert_status(mr_report_svg(r, "x", "<div>", &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    mr_report_stage st[] = {{"s", 0, 1, 0.5, 1 << 20, MR_STAGE_EXECUTED}};
    assert_ok(mr_report_add_timeline(r, st, 1, 2, NULL));
    mr_report_metric m[] = {{"auc", 0.8, 0.7, 0.9}};
    assert_ok(mr_report_add_metrics(r, m, 1, NULL));
    const char *cn[] = {"c"};
    int ok[] = {0};
    assert_ok(mr_report_add_checks(r, cn, ok, NULL, 1, NULL));
    mr_buf h, md;
    mr_buf_init(&h);
    mr_buf_init(&md);
    assert_ok(mr_report_html(r, &h, NULL));
    assert_ok(mr_report_markdown(r, &md, NULL));
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
    assert_ok(mr_report_chart_line(&b, &c, s, 6, NULL));
    const char *plot = strstr(b.data, "fill=\"#fafafa\""); /* the plot area's rect */
    assert_alloc(plot);
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
    assert_ok(mr_report_chart_line(&b, &c, &anon, 1, NULL));
    assert_true(attr(b.data, "height") == 340);
    mr_buf_free(&b);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char *path = mr_path_join(dir, name);
    assert_alloc(path);
    assert_ok(mr_fs_write_atomic(path, text, strlen(text), NULL));
    mr_free(path);
}

static char *read_text(const char *path)
{
    char *t = NULL;
    size_t n = 0;
    assert_ok(mr_fs_read_file(path, 1 << 24, &t, &n, NULL));
    return t;
}

__attribute__((noinline)) static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    size_t off = 0, len = strlen(needle);
    const char *p;
    while ((p = strstr(hay + off, needle)) != NULL) {
        n++;
        off = (size_t)(p - hay) + len;
    }
    return n;
}

/* A run whose tune stage recorded per-trial curves (trial.N.auc): the
 * artifact report has no run id, status or time, one chart of all trials
 * in the tuning section, and no per-trial chart in the training section. */
static void test_run_report_artifact(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mr_report_XXXXXX", mr_test_tmpdir());
    assert_non_null(mkdtemp(dir));
    char *db = mr_path_join(dir, "runs.db"), *tune = mr_path_join(dir, "tune"), *html = mr_path_join(dir, "r.html");
    assert_alloc(db);
    char *md = mr_path_join(dir, "r.md");
    assert_alloc(md);
    assert_ok(mr_fs_mkdirs(tune, NULL));
    mr_runstore *rs = NULL;
    assert_ok(mr_runstore_open(db, &rs, NULL));
    mr_run_begin info = {"millrace run", "/somewhere/ws", "", 0, "{\"lr\":0.1}", "", 0, "nightly", NULL, 0};
    int64_t run = 0;
    assert_ok(mr_runstore_run_begin(rs, &info, &run, NULL));
    mr_stage_record rec = {"tune", "tune", "0123456789abcdef0123456789abcdef", "executed", 1.7e9, 2, 1, 0, 1000, 0, 0, NULL,
                           "{\"out\":\"0123456789abcdef0123456789abcdef.dir\"}"};
    assert_ok(mr_runstore_stage_record(rs, run, &rec, NULL));
    mr_metric m[] = {{"trial.0.auc", 1, 0.6}, {"trial.0.auc", 2, 0.7}, {"trial.1.auc", 1, 0.65}, {"trial.1.auc", 2, 0.8},
                     {"trial.2.auc", 1, 0.5}, {"trial.2.auc", 2, 0.55}};
    assert_ok(mr_runstore_metrics_add(rs, run, "tune", m, 6, NULL));
    write_file(tune, "trials.json",
               "[{\"trial\":0,\"status\":\"complete\",\"value\":0.7,\"params\":{\"lr\":0.1},\"curve\":[0.6,0.7]},"
               "{\"trial\":1,\"status\":\"complete\",\"value\":0.8,\"params\":{\"lr\":0.2},\"curve\":[0.65,0.8]},"
               "{\"trial\":2,\"status\":\"pruned\",\"value\":0.55,\"params\":{\"lr\":0.05},\"curve\":[0.5,0.55]}]");
    write_file(tune, "study.json", "{\"metric\":\"auc\",\"direction\":\"maximize\",\"importance\":{\"lr\":1.0}}");

    mr_run_report_inputs in = {NULL, NULL, NULL, NULL, tune, NULL, NULL, NULL, "tune", 1};
    mr_error err;
    mr_error_init(&err);
    if (mr_run_report_write(rs, run, &in, html, md, &err) != MR_OK) fail_msg("report: %s", err.msg);
    char *h = read_text(html), *t = read_text(md);
    assert_int_equal(count_of(h, "Learning curves of all trials</title>"), 1);
    assert_int_equal(count_of(h, "<figure"), count_of(t, "_Chart: ")); /* every chart named once in the summary */
    assert_null(strstr(h, "<title>0.auc</title>"));                      /* no chart per trial */
    assert_non_null(strstr(h, "best: trial 1"));
    assert_null(strstr(h, "running"));
    assert_null(strstr(h, "nightly"));       /* the run's name is the run's, not the artifact's */
    assert_null(strstr(h, "/somewhere/ws")); /* nor its directory */
    assert_null(strstr(h, "run 1"));
    assert_non_null(strstr(t, "# Model report"));
    assert_non_null(strstr(t, "| tune | tune | 0123456789abcdef0123456789abcdef.dir | ok |"));
    assert_non_null(strstr(t, "`millrace report RUN` draws the stage timeline"));
    mr_free(h);
    mr_free(t);

    /* The same run regenerated: the run's facts and its final status. */
    assert_ok(mr_runstore_run_end(rs, run, "ok", 1, 0, 0, 0, NULL));
    in.artifact = 0;
    assert_ok(mr_run_report_write(rs, run, &in, html, md, NULL));
    t = read_text(md);
    assert_non_null(strstr(t, "# ws: run 1"));
    assert_non_null(strstr(t, "**status**: ok"));
    assert_non_null(strstr(t, "**name**: nightly"));
    assert_non_null(strstr(t, "| tune | tune | 0123456789abcdef0123456789abcdef.dir | executed |"));
    assert_non_null(strstr(t, "## Stage timeline and resources"));
    mr_free(t);
    mr_runstore_close(rs);
    assert_ok(mr_fs_rmtree(dir, NULL));
    mr_free(db);
    mr_free(tune);
    mr_free(html);
    mr_free(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_ticks),
        cmocka_unit_test(test_charts),
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_legend_below_plot),
        cmocka_unit_test(test_run_report_artifact),
    };
    return mr_test_run(tests, NULL, NULL);
}
