/* Test helper (not installed): builds a sample evaluation report with every
 * section the report op produces, from seeded synthetic predictions run
 * through the metrics library, for tests/e2e/test_report_chromium.sh.
 *
 *   mr_reporttool OUT.html OUT.md
 *
 * Section ids: summary timeline training metrics curves confusion
 * importance slices errors residuals checks. One parameter value is hostile
 * markup, to prove that text is escaped. */
#include "millrace/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N 4000

static uint64_t rs = 2024;
static double urand(void)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}
static double nrand(void)
{
    double u = urand(), v = urand();
    return sqrt(-2 * log(u > 1e-300 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

#define TRY(x)                        \
    do {                              \
        if ((x) != MR_OK) goto fail;  \
    } while (0)

static mr_status chart_section(mr_report *r, mr_buf *svg, const char *caption, mr_error *err)
{
    mr_status st = mr_report_svg(r, caption, svg->data, err);
    svg->len = 0;
    if (svg->data) svg->data[0] = 0;
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mr_reporttool OUT.html OUT.md\n");
        return 2;
    }
    static double y[N], s[N], age[N], yr[N], pr[N];
    static int32_t plan[N];
    for (size_t i = 0; i < N; i++) {
        plan[i] = (int32_t)(i % 3);
        age[i] = i % 17 == 0 ? NAN : 18 + 60 * urand();
        y[i] = urand() < 0.3;
        double noise = plan[i] == 2 ? 2.5 : 1.0; /* plan "basic" is harder */
        s[i] = 1 / (1 + exp(-(noise * nrand() + 2.2 * y[i] - 1.6)));
        yr[i] = 50 + 10 * nrand();
        pr[i] = yr[i] + (2 + age[i] / 40) * nrand();
        if (isnan(pr[i])) pr[i] = yr[i];
    }
    mr_error err;
    mr_error_init(&err);
    mr_report *r = NULL;
    mr_buf svg;
    mr_buf_init(&svg);
    mr_curve roc = {0}, prc = {0}, cal = {0}, gain = {0}, res = {0};
    mr_slice *sl = NULL;
    size_t n_sl = 0;
    mr_metric_data d, dr;
    mr_metric_data_binary(&d, y, s, NULL, N);
    mr_metric_data_regression(&dr, yr, pr, NULL, N);
    mr_chart c;
    TRY(mr_report_new("churn evaluation <run 7> & \"friends\"", &r, &err));

    TRY(mr_report_section(r, "summary", "Run summary", &err));
    const char *k[] = {"run", "git commit", "params.learning_rate", "params.note", "train rows", "test rows"};
    const char *v[] = {"7", "3f2a9c1e5d", "0.05", "<script>alert(\"x\")</script> & <img src=http://evil/x.png>", "96000", "4000"};
    TRY(mr_report_kv(r, k, v, 6, &err));

    mr_report_stage stages[] = {
        {"ingest", 0.0, 1.2, 2.1, 180u << 20, MR_STAGE_CACHED},
        {"features", 1.2, 3.4, 6.0, 420u << 20, MR_STAGE_EXECUTED},
        {"train", 4.6, 12.5, 44.0, 1200u << 20, MR_STAGE_EXECUTED},
        {"evaluate", 17.1, 2.0, 3.5, 300u << 20, MR_STAGE_EXECUTED},
        {"report", 19.1, 0.4, 0.3, 40u << 20, MR_STAGE_FAILED},
    };
    TRY(mr_report_add_timeline(r, stages, 5, 4, &err));

    TRY(mr_report_section(r, "training", "Training curves", &err));
    double it[60], tr[60], va[60];
    for (int i = 0; i < 60; i++) {
        it[i] = i + 1;
        tr[i] = 0.69 * exp(-i / 18.0) + 0.2;
        va[i] = 0.69 * exp(-i / 22.0) + 0.26 + (i > 40 ? (i - 40) * 0.001 : 0);
    }
    mr_series ts[2] = {{"train logloss", it, tr, 60, MR_SERIES_LINE}, {"valid logloss", it, va, 60, MR_SERIES_LINE}};
    mr_chart_init(&c);
    c.title = "Loss per boosting round";
    c.x_label = "round";
    c.y_label = "logloss";
    TRY(mr_report_chart_line(&svg, &c, ts, 2, &err));
    TRY(chart_section(r, &svg, "Training and validation loss", &err));

    mr_interval ci[4];
    mr_metric_id ids[4] = {MR_METRIC_ROC_AUC, MR_METRIC_AVG_PRECISION, MR_METRIC_LOGLOSS, MR_METRIC_BRIER};
    mr_report_metric rm[5];
    for (int i = 0; i < 4; i++) {
        TRY(mr_bootstrap_metric(ids[i], 0.5, &d, 200, 0.05, 11, 1, &ci[i], &err));
        rm[i] = (mr_report_metric){mr_metric_name(ids[i]), ci[i].point, ci[i].lo, ci[i].hi};
    }
    mr_binary_scores opt;
    TRY(mr_metric_f1_optimal(&d, &opt, &err));
    rm[4] = (mr_report_metric){"f1 at the F1-optimal threshold", opt.f1, NAN, NAN};
    TRY(mr_report_add_metrics(r, rm, 5, &err));

    TRY(mr_report_section(r, "curves", "ROC, precision-recall, calibration and lift", &err));
    TRY(mr_curve_roc(&d, 400, &roc, &err));
    mr_series s1 = {"model", roc.x, roc.y, roc.n, MR_SERIES_LINE};
    mr_chart_init(&c);
    c.title = "ROC";
    c.x_label = "false positive rate";
    c.y_label = "true positive rate";
    c.diagonal = 1;
    c.x_min = c.y_min = 0, c.x_max = c.y_max = 1;
    c.width = 380;
    c.height = 340;
    TRY(mr_report_chart_line(&svg, &c, &s1, 1, &err));
    TRY(chart_section(r, &svg, "ROC curve", &err));
    TRY(mr_curve_pr(&d, 400, &prc, &err));
    mr_series s2 = {"model", prc.x, prc.y, prc.n, MR_SERIES_STEP};
    c.title = "Precision-recall";
    c.x_label = "recall";
    c.y_label = "precision";
    c.diagonal = 0;
    TRY(mr_report_chart_line(&svg, &c, &s2, 1, &err));
    TRY(chart_section(r, &svg, "Precision-recall curve", &err));
    TRY(mr_curve_calibration(&d, 10, MR_CALIB_UNIFORM, &cal, &err));
    mr_series s3[2] = {{"model", cal.x, cal.y, cal.n, MR_SERIES_LINE}, {NULL, cal.x, cal.y, cal.n, MR_SERIES_POINTS}};
    c.title = "Calibration";
    c.x_label = "mean predicted probability";
    c.y_label = "fraction positive";
    c.diagonal = 1;
    TRY(mr_report_chart_line(&svg, &c, s3, 2, &err));
    TRY(chart_section(r, &svg, "Reliability diagram (10 uniform bins)", &err));
    TRY(mr_curve_gain(&d, 10, &gain, &err));
    mr_series s4[2] = {{"gain", gain.x, gain.y, gain.n, MR_SERIES_LINE}, {"lift", gain.x, gain.aux, gain.n, MR_SERIES_LINE}};
    mr_chart_init(&c);
    c.title = "Cumulative gain and lift";
    c.x_label = "fraction of population";
    c.width = 380;
    c.height = 340;
    TRY(mr_report_chart_line(&svg, &c, s4, 2, &err));
    TRY(chart_section(r, &svg, "Gain and lift by decile", &err));

    TRY(mr_report_section(r, "confusion", "Confusion matrix", &err));
    mr_binary_scores at;
    TRY(mr_metric_binary_at(&d, 0.5, &at, &err));
    double cm[4] = {at.cm.tn, at.cm.fp, at.cm.fn, at.cm.tp};
    const char *lab[2] = {"0 (stay)", "1 (churn)"};
    mr_chart_init(&c);
    c.title = "Confusion matrix at 0.5";
    c.x_label = "predicted";
    c.y_label = "true";
    c.width = 360;
    c.height = 300;
    TRY(mr_report_chart_heatmap(&svg, &c, lab, lab, cm, 2, 2, &err));
    TRY(chart_section(r, &svg, "Rows: true class; columns: predicted class", &err));

    TRY(mr_report_section(r, "importance", "Feature importance", &err));
    const char *feat[] = {"tenure_months", "monthly_charges", "support_calls", "contract=<month-to-month>", "age"};
    double gainv[] = {0.41, 0.22, 0.17, 0.12, 0.08};
    mr_chart_init(&c);
    c.title = "Gain importance";
    TRY(mr_report_chart_bars(&svg, &c, feat, gainv, 5, &err));
    TRY(chart_section(r, &svg, "Total gain per feature", &err));

    mr_slice_opts so;
    mr_slice_opts_init(&so);
    so.threads = 1;
    so.n_resamples = 100;
    const char *plans[] = {"premium", "standard", "basic"};
    TRY(mr_slices_categorical(&d, "plan", plan, plans, 3, &so, &ci[0], &sl, &n_sl, &err));
    TRY(mr_report_add_slices(r, "roc_auc", sl, n_sl, ci[0].point, &err));

    TRY(mr_report_section(r, "errors", "Most confident wrong predictions", &err));
    size_t rows[10], nw;
    double conf[10];
    TRY(mr_metric_top_wrong(&d, 0.5, 10, rows, conf, &nw, &err));
    char cells[10][3][32];
    const char *cp[30];
    for (size_t i = 0; i < nw; i++) {
        snprintf(cells[i][0], 32, "%zu", rows[i]);
        snprintf(cells[i][1], 32, "%.0f", y[rows[i]]);
        snprintf(cells[i][2], 32, "%.4f", conf[i]);
        for (int j = 0; j < 3; j++) cp[i * 3 + (size_t)j] = cells[i][j];
    }
    const char *wh[3] = {"row", "label", "confidence in the wrong class"};
    TRY(mr_report_table(r, "Top 10", wh, 3, cp, nw, NULL, &err));

    TRY(mr_report_section(r, "residuals", "Residuals (regression head)", &err));
    TRY(mr_curve_residuals(&dr, 1500, &res, &err));
    mr_chart_init(&c);
    c.title = "Residual vs prediction";
    c.x_label = "prediction";
    c.y_label = "residual (y - prediction)";
    TRY(mr_report_chart_scatter(&svg, &c, res.x, res.y, res.n, 1500, &err));
    TRY(chart_section(r, &svg, "Every n/1500-th row", &err));

    const char *cn[] = {"roc_auc >= 0.75", "no flagged slices", "logloss <= 0.6"};
    int cpass[] = {ci[0].point >= 0.75, 0, ci[2].point <= 0.6};
    const char *cd[] = {"", "plan=basic is worse than overall", ""};
    for (size_t i = 0; i < n_sl; i++) cpass[1] = cpass[1] || 0;
    TRY(mr_report_add_checks(r, cn, cpass, cd, 3, &err));

    TRY(mr_report_write(r, argv[1], argv[2], &err));
    mr_free(sl);
    mr_curve_free(&roc);
    mr_curve_free(&prc);
    mr_curve_free(&cal);
    mr_curve_free(&gain);
    mr_curve_free(&res);
    mr_buf_free(&svg);
    mr_report_free(r);
    return 0;
fail:;
    char buf[1024];
    mr_error_format(&err, buf, sizeof buf);
    fprintf(stderr, "mr_reporttool: error: %s\n", buf);
    mr_free(sl);
    mr_curve_free(&roc);
    mr_curve_free(&prc);
    mr_curve_free(&cal);
    mr_curve_free(&gain);
    mr_curve_free(&res);
    mr_buf_free(&svg);
    mr_report_free(r);
    return 1;
}
