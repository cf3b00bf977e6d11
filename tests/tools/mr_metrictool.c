/* Test helper (not installed): runs the metrics library on a file and prints
 * the results as JSON, for the scikit-learn oracle script and the bench.
 *
 *   mr_metrictool binary FILE.csv [THRESHOLD]      rows: label,score[,weight]
 *   mr_metrictool multiclass FILE.csv K            rows: label,p_0..p_{K-1}[,weight]
 *   mr_metrictool regression FILE.csv              rows: target,prediction[,weight]
 *   mr_metrictool bench FILE.bin N REPS            N f64 labels then N f64 scores
 *                                                  (raw little-endian): times
 *                                                  AUC + AP + logloss
 * CSV: no header, one row per line, numbers only. Errors go to stderr with
 * the library's message and exit status 1. */
#include "millrace/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void jnum(double v)
{
    if (isfinite(v)) printf("%.17g", v);
    else printf("null");
}

static void jarr(const char *name, const double *v, size_t n, int last)
{
    printf("\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i) putchar(',');
        jnum(v[i]);
    }
    printf("]%s", last ? "" : ",");
}

static void jcurve(const char *name, const mr_curve *c, int last)
{
    printf("\"%s\":{", name);
    jarr("x", c->x, c->n, 0);
    jarr("y", c->y, c->n, 0);
    jarr("aux", c->aux, c->n, 1);
    printf("}%s", last ? "" : ",");
}

static int die(const mr_error *e)
{
    char buf[1024];
    mr_error_format(e, buf, sizeof buf);
    fprintf(stderr, "mr_metrictool: error: %s\n", buf);
    return 1;
}

/* Reads a numeric CSV into cols[c] arrays; *n_cols from the first line. */
static int read_csv(const char *path, size_t want_cols, double **cols, size_t *n_rows, int *weighted)
{
    char *data = NULL;
    size_t len = 0;
    mr_error err;
    mr_error_init(&err);
    for (size_t c = 0; c <= want_cols; c++) cols[c] = NULL;
    if (mr_fs_read_file(path, (size_t)1 << 31, &data, &len, &err) != MR_OK) return die(&err);
    size_t cap = 1024, n = 0, nc = 0;
    for (size_t c = 0; c <= want_cols; c++) cols[c] = mr_malloc(cap * sizeof(double));
    char *p = data, *end = data + len;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        if (eol == p) {
            p = eol + 1;
            continue;
        }
        *eol = 0;
        if (n == cap) {
            cap *= 2;
            for (size_t c = 0; c <= want_cols; c++) cols[c] = mr_realloc(cols[c], cap * sizeof(double));
        }
        size_t c = 0;
        char *q = p;
        for (;;) {
            if (c > want_cols) {
                fprintf(stderr, "mr_metrictool: %s:%zu: too many columns\n", path, n + 1);
                goto bad;
            }
            char *e2;
            errno = 0;
            cols[c][n] = strtod(q, &e2);
            if (e2 == q) {
                fprintf(stderr, "mr_metrictool: %s:%zu: column %zu: not a number\n", path, n + 1, c + 1);
                goto bad;
            }
            c++;
            if (*e2 == ',') q = e2 + 1;
            else break;
        }
        if (n == 0) nc = c;
        if (c != nc || (c != want_cols && c != want_cols + 1)) {
            fprintf(stderr, "mr_metrictool: %s:%zu: expected %zu or %zu columns, got %zu\n", path, n + 1, want_cols,
                    want_cols + 1, c);
            goto bad;
        }
        n++;
        p = eol + 1;
    }
    mr_free(data);
    *n_rows = n;
    *weighted = nc == want_cols + 1;
    return 0;
bad:
    mr_free(data);
    for (size_t c = 0; c <= want_cols; c++) mr_free(cols[c]);
    return 1;
}

static int run_binary(const char *path, double thr)
{
    double *cols[3] = {0};
    size_t n;
    int weighted;
    if (read_csv(path, 2, cols, &n, &weighted)) return 1;
    mr_metric_data d;
    mr_metric_data_binary(&d, cols[0], cols[1], weighted ? cols[2] : NULL, n);
    mr_error err;
    mr_error_init(&err);
    double auc = NAN, ap = NAN, ll = NAN, br = NAN;
    mr_binary_scores at, opt;
    mr_curve roc = {0}, pr = {0}, cu = {0}, cq = {0}, gain = {0};
    if (mr_metric_roc_auc(&d, &auc, &err) != MR_OK || mr_metric_average_precision(&d, &ap, &err) != MR_OK ||
        mr_metric_logloss(&d, &ll, &err) != MR_OK || mr_metric_brier(&d, &br, &err) != MR_OK ||
        mr_metric_binary_at(&d, thr, &at, &err) != MR_OK || mr_metric_f1_optimal(&d, &opt, &err) != MR_OK ||
        mr_curve_roc(&d, 0, &roc, &err) != MR_OK || mr_curve_pr(&d, 0, &pr, &err) != MR_OK ||
        mr_curve_gain(&d, 10, &gain, &err) != MR_OK ||
        (!weighted && (mr_curve_calibration(&d, 10, MR_CALIB_UNIFORM, &cu, &err) != MR_OK ||
                       mr_curve_calibration(&d, 7, MR_CALIB_QUANTILE, &cq, &err) != MR_OK))) {
        mr_curve_free(&roc);
        mr_curve_free(&pr);
        mr_curve_free(&cu);
        mr_curve_free(&cq);
        mr_curve_free(&gain);
        for (int c = 0; c < 3; c++) mr_free(cols[c]);
        return die(&err);
    }
    printf("{\"n\":%zu,\"roc_auc\":", n);
    jnum(auc);
    printf(",\"average_precision\":");
    jnum(ap);
    printf(",\"logloss\":");
    jnum(ll);
    printf(",\"brier\":");
    jnum(br);
    const mr_binary_scores *ss[2] = {&at, &opt};
    const char *nm[2] = {"at", "f1_opt"};
    for (int k = 0; k < 2; k++) {
        const mr_binary_scores *s = ss[k];
        printf(",\"%s\":{\"threshold\":", nm[k]);
        jnum(s->threshold);
        printf(",\"tn\":%.17g,\"fp\":%.17g,\"fn\":%.17g,\"tp\":%.17g,\"accuracy\":%.17g,\"precision\":%.17g,"
               "\"recall\":%.17g,\"f1\":%.17g}",
               s->cm.tn, s->cm.fp, s->cm.fn, s->cm.tp, s->accuracy, s->precision, s->recall, s->f1);
    }
    printf(",");
    jcurve("roc", &roc, 0);
    jcurve("pr", &pr, 0);
    jcurve("gain", &gain, weighted);
    if (!weighted) {
        jcurve("calib_uniform10", &cu, 0);
        jcurve("calib_quantile7", &cq, 1);
    }
    printf("}\n");
    mr_curve_free(&roc);
    mr_curve_free(&pr);
    mr_curve_free(&cu);
    mr_curve_free(&cq);
    mr_curve_free(&gain);
    for (int c = 0; c < 3; c++) mr_free(cols[c]);
    return 0;
}

static int run_multiclass(const char *path, size_t K)
{
    if (K < 2 || K > 64) {
        fprintf(stderr, "mr_metrictool: K must be in [2, 64]\n");
        return 1;
    }
    double *cols[66] = {0};
    size_t n;
    int weighted;
    if (read_csv(path, K + 1, cols, &n, &weighted)) return 1;
    double *proba = mr_malloc(n * K * sizeof(double) + 1);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < K; k++) proba[i * K + k] = cols[k + 1][i];
    mr_metric_data d;
    mr_metric_data_multiclass(&d, cols[0], proba, K, weighted ? cols[K + 1] : NULL, n);
    mr_error err;
    mr_error_init(&err);
    mr_multiclass_scores s;
    double *cm = mr_calloc(K * K, sizeof(double));
    if (mr_metric_multiclass(&d, &s, cm, &err) != MR_OK) {
        mr_free(cm);
        mr_free(proba);
        for (size_t c = 0; c < K + 2; c++) mr_free(cols[c]);
        return die(&err);
    }
    printf("{\"n\":%zu,\"accuracy\":%.17g,\"macro_f1\":%.17g,\"micro_f1\":%.17g,\"logloss\":%.17g,", n, s.accuracy,
           s.macro_f1, s.micro_f1, s.logloss);
    jarr("confusion", cm, K * K, 1);
    printf("}\n");
    mr_free(cm);
    mr_free(proba);
    for (size_t c = 0; c < K + 2; c++) mr_free(cols[c]);
    return 0;
}

static int run_regression(const char *path)
{
    double *cols[3] = {0};
    size_t n;
    int weighted;
    if (read_csv(path, 2, cols, &n, &weighted)) return 1;
    mr_metric_data d;
    mr_metric_data_regression(&d, cols[0], cols[1], weighted ? cols[2] : NULL, n);
    mr_error err;
    mr_error_init(&err);
    mr_regression_scores s;
    static const double qs[7] = {0, 0.05, 0.25, 0.5, 0.75, 0.95, 1};
    double q[7];
    if (mr_metric_regression(&d, &s, &err) != MR_OK || mr_metric_residual_quantiles(&d, qs, 7, q, &err) != MR_OK) {
        for (int c = 0; c < 3; c++) mr_free(cols[c]);
        return die(&err);
    }
    printf("{\"n\":%zu,\"rmse\":%.17g,\"mae\":%.17g,\"r2\":%.17g,\"mape\":%.17g,", n, s.rmse, s.mae, s.r2, s.mape);
    jarr("resid_q", q, 7, 1);
    printf("}\n");
    for (int c = 0; c < 3; c++) mr_free(cols[c]);
    return 0;
}

static int run_bench(const char *path, size_t n, int reps)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    double *y = mr_malloc(n * sizeof(double)), *s = mr_malloc(n * sizeof(double));
    if (!y || !s || fread(y, sizeof(double), n, f) != n || fread(s, sizeof(double), n, f) != n) {
        fprintf(stderr, "mr_metrictool: %s: short read (want 2 x %zu f64)\n", path, n);
        return 1;
    }
    fclose(f);
    mr_error err;
    mr_error_init(&err);
    if (mr_pool_init(0, &err) != MR_OK) return die(&err);
    mr_metric_data d;
    mr_metric_data_binary(&d, y, s, NULL, n);
    double best = INFINITY, best_sep = INFINITY, auc = 0, ap = 0, ll = 0, auc2 = 0, ap2 = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = mr_now();
        if (mr_metric_auc_ap(&d, &auc, &ap, &err) != MR_OK || mr_metric_logloss(&d, &ll, &err) != MR_OK)
            return die(&err);
        double t1 = mr_now();
        if (mr_metric_roc_auc(&d, &auc2, &err) != MR_OK || mr_metric_average_precision(&d, &ap2, &err) != MR_OK ||
            mr_metric_logloss(&d, &ll, &err) != MR_OK)
            return die(&err);
        double t2 = mr_now();
        if (t1 - t0 < best) best = t1 - t0;
        if (t2 - t1 < best_sep) best_sep = t2 - t1;
    }
    if (auc != auc2 || ap != ap2) {
        fprintf(stderr, "mr_metrictool: combined and separate results differ\n");
        return 1;
    }
    printf("{\"n\":%zu,\"threads\":%d,\"roc_auc\":%.17g,\"average_precision\":%.17g,\"logloss\":%.17g,"
           "\"seconds\":%.6f,\"seconds_separate\":%.6f}\n",
           n, mr_pool_threads(), auc, ap, ll, best, best_sep);
    mr_pool_shutdown();
    mr_free(y);
    mr_free(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "binary") == 0)
        return run_binary(argv[2], argc >= 4 ? strtod(argv[3], NULL) : 0.5);
    if (argc == 4 && strcmp(argv[1], "multiclass") == 0) return run_multiclass(argv[2], strtoul(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "regression") == 0) return run_regression(argv[2]);
    if (argc == 5 && strcmp(argv[1], "bench") == 0)
        return run_bench(argv[2], strtoul(argv[3], NULL, 10), (int)strtol(argv[4], NULL, 10));
    fprintf(stderr, "usage: mr_metrictool binary|multiclass|regression|bench ... (see the file header)\n");
    return 2;
}
