/* mr_gbdt_tool: a small driver of the gbdt C API for the e2e oracle tests
 * and the benchmark. Data is a CSV of numbers (label in column --label-col,
 * default 0; a non-numeric first line is a header; "", "nan", "NA", "?" are
 * missing) or raw float32 files given as f32:X_PATH:Y_PATH:N_FEATURES.
 *
 *   mr_gbdt_tool run --train T --test S [--valid V] [-p key=value]... [--model-out M] [--pred-out P]
 *   mr_gbdt_tool predict --model M --data S [--raw] [--out P]
 *   mr_gbdt_tool dump --model M
 *
 * `run` prints one "key=value" line per figure: rows, bin_s, train_s,
 * predict_s, predict_rows_per_s, and the test metrics (auc, logloss, error |
 * rmse, mae | multi_logloss, multi_error). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/gbdt.h"

#include <time.h>

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct dataset {
    float *x;      /* (n, f) row-major */
    float *y;
    size_t n, f;
    char **names;
} dataset;

static void die(const char *msg, const mr_error *err)
{
    if (err && mr_error_is_set(err)) {
        char buf[1024];
        mr_error_format(err, buf, sizeof(buf));
        fprintf(stderr, "mr_gbdt_tool: %s: %s\n", msg, buf);
        if (err->hint[0]) fprintf(stderr, "hint: %s\n", err->hint);
    } else {
        fprintf(stderr, "mr_gbdt_tool: %s\n", msg);
    }
    exit(1);
}

static float parse_num(const char *s, size_t len, int *ok)
{
    while (len && (*s == ' ' || *s == '"')) s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '"' || s[len - 1] == '\r')) len--;
    *ok = 1;
    if (len == 0 || (len == 1 && s[0] == '?') || (len == 2 && !strncmp(s, "NA", 2)) ||
        (len == 3 && (!strncasecmp(s, "nan", 3))))
        return NAN;
    char buf[64];
    if (len >= sizeof(buf)) {
        *ok = 0;
        return NAN;
    }
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    float v = strtof(buf, &end);
    if (*end) *ok = 0;
    return v;
}

static void load_f32(const char *spec, dataset *d)
{
    char *s = strdup(spec + 4), *save = NULL;
    const char *xp = strtok_r(s, ":", &save), *yp = strtok_r(NULL, ":", &save), *fs = strtok_r(NULL, ":", &save);
    if (!xp || !yp || !fs) die("f32 data spec is f32:X_PATH:Y_PATH:N_FEATURES", NULL);
    d->f = (size_t)strtoul(fs, NULL, 10);
    FILE *fx = fopen(xp, "rb"), *fy = fopen(yp, "rb");
    if (!fx || !fy) die("cannot open f32 data", NULL);
    fseek(fy, 0, SEEK_END);
    d->n = (size_t)ftell(fy) / 4;
    fseek(fy, 0, SEEK_SET);
    d->x = malloc(d->n * d->f * sizeof(float));
    d->y = malloc(d->n * sizeof(float));
    if (!d->x || !d->y) die("out of memory", NULL);
    if (fread(d->x, sizeof(float), d->n * d->f, fx) != d->n * d->f || fread(d->y, sizeof(float), d->n, fy) != d->n)
        die("short f32 file", NULL);
    fclose(fx);
    fclose(fy);
    free(s);
}

static void load_csv(const char *path, int label_col, dataset *d)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "mr_gbdt_tool: cannot open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    char *line = NULL;
    size_t cap = 0, xcap = 0, ycap = 0, lineno = 0;
    ssize_t len;
    size_t ncols = 0;
    while ((len = getline(&line, &cap, fp)) > 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        size_t nc = 1;
        for (ssize_t i = 0; i < len; i++) nc += line[i] == ',';
        if (!ncols) {
            ncols = nc;
            d->f = ncols - 1;
            d->names = calloc(d->f, sizeof(char *));
        } else if (nc != ncols) {
            fprintf(stderr, "mr_gbdt_tool: %s:%zu: %zu fields, expected %zu\n", path, lineno, nc, ncols);
            exit(1);
        }
        float vals[4096];
        if (nc > 4096) die("too many columns", NULL);
        int all_ok = 1;
        const char *p = line;
        for (size_t c = 0; c < nc; c++) {
            const char *e = strchr(p, ',');
            size_t fl = e ? (size_t)(e - p) : strlen(p);
            int ok;
            vals[c] = parse_num(p, fl, &ok);
            if (!ok) all_ok = 0;
            p = e ? e + 1 : p + fl;
        }
        if (!all_ok) {
            if (d->n == 0 && lineno == 1) { /* header */
                const char *q = line;
                size_t k = 0;
                for (size_t c = 0; c < nc; c++) {
                    const char *e = strchr(q, ',');
                    size_t fl = e ? (size_t)(e - q) : strlen(q);
                    if ((int)c != label_col) d->names[k++] = strndup(q, fl);
                    q = e ? e + 1 : q + fl;
                }
                continue;
            }
            fprintf(stderr, "mr_gbdt_tool: %s:%zu: not a number\n", path, lineno);
            exit(1);
        }
        if ((d->n + 1) * d->f > xcap) {
            xcap = xcap ? xcap * 2 : 1 << 16;
            while (xcap < (d->n + 1) * d->f) xcap *= 2;
            d->x = realloc(d->x, xcap * sizeof(float));
        }
        if (d->n + 1 > ycap) {
            ycap = ycap ? ycap * 2 : 1 << 12;
            d->y = realloc(d->y, ycap * sizeof(float));
        }
        if (!d->x || !d->y) die("out of memory", NULL);
        size_t k = 0;
        for (size_t c = 0; c < nc; c++) {
            if ((int)c == label_col)
                d->y[d->n] = vals[c];
            else
                d->x[d->n * d->f + k++] = vals[c];
        }
        d->n++;
    }
    free(line);
    fclose(fp);
}

static void load(const char *spec, int label_col, dataset *d)
{
    memset(d, 0, sizeof(*d));
    if (!strncmp(spec, "f32:", 4))
        load_f32(spec, d);
    else
        load_csv(spec, label_col, d);
}

static void free_data(dataset *d)
{
    free(d->x);
    free(d->y);
    for (size_t j = 0; d->names && j < d->f; j++) free(d->names[j]);
    free(d->names);
    memset(d, 0, sizeof(*d));
}

typedef struct sp {
    double s;
    float y;
} sp;
static int cmp_sp(const void *a, const void *b)
{
    const sp *x = a, *y = b;
    return (x->s > y->s) - (x->s < y->s);
}
/* Independent AUC (Mann-Whitney with tied ranks averaged). */
static double auc(const float *y, const double *s, size_t n)
{
    sp *v = malloc(n * sizeof(sp));
    double np = 0;
    for (size_t i = 0; i < n; i++) {
        v[i].s = s[i];
        v[i].y = y[i];
        np += y[i] > 0.5f;
    }
    qsort(v, n, sizeof(sp), cmp_sp);
    double rs = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double pos = 0;
        while (j < n && v[j].s == v[i].s) pos += v[j++].y > 0.5f;
        rs += pos * 0.5 * ((double)i + 1 + (double)j);
        i = j;
    }
    free(v);
    double nn = (double)n - np;
    return (rs - np * (np + 1) / 2) / (np * nn);
}

static void print_metrics(const mr_gbdt_model *m, const dataset *te, const double *pred)
{
    mr_gbdt_objective obj = mr_gbdt_model_objective(m);
    int K = mr_gbdt_model_num_class(m);
    if (obj == MR_GBDT_BINARY) {
        double ll = 0, errs = 0;
        for (size_t i = 0; i < te->n; i++) {
            double p = pred[i] < 1e-15 ? 1e-15 : pred[i] > 1 - 1e-15 ? 1 - 1e-15 : pred[i];
            ll += te->y[i] > 0.5f ? -log(p) : -log(1 - p);
            errs += (pred[i] > 0.5) != (te->y[i] > 0.5f);
        }
        printf("auc=%.6f\nlogloss=%.6f\nerror=%.6f\n", auc(te->y, pred, te->n), ll / (double)te->n,
               errs / (double)te->n);
    } else if (obj == MR_GBDT_MULTICLASS) {
        double ll = 0, errs = 0;
        for (size_t i = 0; i < te->n; i++) {
            const double *p = pred + i * (size_t)K;
            int y = (int)te->y[i], best = 0;
            for (int c = 1; c < K; c++)
                if (p[c] > p[best]) best = c;
            ll += -log(p[y] < 1e-15 ? 1e-15 : p[y]);
            errs += best != y;
        }
        printf("multi_logloss=%.6f\nmulti_error=%.6f\n", ll / (double)te->n, errs / (double)te->n);
    } else {
        double se = 0, ae = 0;
        for (size_t i = 0; i < te->n; i++) {
            double dd = pred[i] - te->y[i];
            se += dd * dd;
            ae += fabs(dd);
        }
        printf("rmse=%.6f\nmae=%.6f\n", sqrt(se / (double)te->n), ae / (double)te->n);
    }
}

static int round_cb(void *ctx, const mr_gbdt_round_info *info)
{
    int verbose = *(int *)ctx;
    if (verbose && info->n_metrics > 0)
        fprintf(stderr, "[%d] valid %s=%.6f best=%d\n", info->iteration, mr_gbdt_metric_name(info->metric[0]),
                info->valid_metric[0], info->best_iteration);
    return 0;
}

static void write_preds(const char *path, const double *pred, size_t n, int K)
{
    FILE *fp = fopen(path, "w");
    if (!fp) die("cannot write predictions", NULL);
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < K; c++) fprintf(fp, "%.17g%c", pred[i * (size_t)K + (size_t)c], c + 1 < K ? ',' : '\n');
    fclose(fp);
}

static void usage(void)
{
    fprintf(stderr, "usage: mr_gbdt_tool run --train T --test S [--valid V] [-p key=value]... [--model-out M]\n"
                    "                        [--pred-out P] [--label-col N] [--threads N] [--verbose]\n"
                    "       mr_gbdt_tool predict --model M --data S [--raw] [--out P] [--label-col N]\n"
                    "       mr_gbdt_tool dump --model M\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    const char *cmd = argv[1], *train_p = NULL, *test_p = NULL, *valid_p = NULL, *model_out = NULL,
               *pred_out = NULL, *model_p = NULL, *data_p = NULL, *out_p = NULL, *binned_out = NULL;
    int label_col = 0, threads = 0, raw = 0, verbose = 0;
    mr_error err;
    mr_error_init(&err);
    mr_gbdt_params p;
    mr_gbdt_params_init(&p);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--raw")) {
            raw = 1;
            continue;
        }
        if (!strcmp(a, "--verbose")) {
            verbose = 1;
            continue;
        }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--train")) train_p = v;
        else if (!strcmp(a, "--test")) test_p = v;
        else if (!strcmp(a, "--valid")) valid_p = v;
        else if (!strcmp(a, "--model-out")) model_out = v;
        else if (!strcmp(a, "--pred-out")) pred_out = v;
        else if (!strcmp(a, "--binned-out")) binned_out = v;
        else if (!strcmp(a, "--model")) model_p = v;
        else if (!strcmp(a, "--data")) data_p = v;
        else if (!strcmp(a, "--out")) out_p = v;
        else if (!strcmp(a, "--label-col")) label_col = (int)strtol(v, NULL, 10);
        else if (!strcmp(a, "--threads")) threads = (int)strtol(v, NULL, 10);
        else if (!strcmp(a, "-p")) {
            char *kv = strdup(v), *eq = strchr(kv, '=');
            if (!eq) usage();
            *eq = 0;
            if (mr_gbdt_params_set_text(&p, kv, eq + 1, &err) != MR_OK) die("bad parameter", &err);
            free(kv);
        } else
            usage();
    }
    if (threads == 0) threads = p.num_threads;
    if (mr_pool_init(threads, &err) != MR_OK) die("thread pool", &err);

    if (!strcmp(cmd, "run")) {
        if (!train_p || !test_p) usage();
        dataset tr, te, va;
        load(train_p, label_col, &tr);
        double t0 = mr_now();
        mr_gbdt_data *dtr = NULL, *dva = NULL;
        if (mr_gbdt_data_from_matrix(tr.x, tr.n, tr.f, MR_GBDT_ROW_MAJOR, tr.y, (const char *const *)tr.names, NULL,
                                     &p, &dtr, &err) != MR_OK)
            die("binning", &err);
        double t1 = mr_now();
        free(tr.x); /* the raw training matrix is not needed any more */
        tr.x = NULL;
        if (binned_out && mr_gbdt_data_save(dtr, binned_out, &err) != MR_OK) die("saving binned data", &err);
        if (valid_p) {
            load(valid_p, label_col, &va);
            if (mr_gbdt_data_from_matrix(va.x, va.n, va.f, MR_GBDT_ROW_MAJOR, va.y, NULL, dtr, &p, &dva, &err) != MR_OK)
                die("binning validation data", &err);
            free_data(&va);
        }
        double t2 = mr_now(), c2 = cpu_now();
        mr_gbdt_model *m = NULL;
        if (mr_gbdt_train(&p, dtr, dva, round_cb, &verbose, &m, &err) != MR_OK) die("training", &err);
        double t3 = mr_now(), c3 = cpu_now();
        mr_gbdt_data_free(dtr);
        mr_gbdt_data_free(dva);
        load(test_p, label_col, &te);
        int K = mr_gbdt_model_num_class(m);
        double *pred = malloc(te.n * (size_t)K * sizeof(double));
        mr_gbdt_predictor *pr = NULL;
        if (mr_gbdt_predictor_new(m, 0, &pr, &err) != MR_OK) die("predictor", &err);
        /* best of three batches: the figure is about the predictor, not
         * about what else the machine was doing at that moment */
        double t4 = 0, t5 = 1e300;
        for (int rep = 0; rep < 3; rep++) {
            double a = mr_now();
            if (mr_gbdt_predictor_batch(pr, te.x, te.n, MR_GBDT_ROW_MAJOR, 0, threads, pred, &err) != MR_OK)
                die("predict", &err);
            double b = mr_now();
            if (b - a < t5 - t4) {
                t4 = a;
                t5 = b;
            }
        }
        printf("train_rows=%zu\ntest_rows=%zu\nfeatures=%zu\ntrees=%zu\n", tr.n, te.n, te.f, mr_gbdt_model_num_trees(m));
        printf("bin_s=%.3f\ntrain_s=%.3f\npredict_s=%.4f\npredict_rows_per_s=%.0f\n", t1 - t0, t3 - t2, t5 - t4,
               (double)te.n / (t5 - t4 > 1e-9 ? t5 - t4 : 1e-9));
        printf("train_cpu_s=%.3f\n", c3 - c2); /* all threads: less sensitive to a busy machine */
        printf("best_iteration=%d\n", mr_gbdt_model_best_iteration(m));
        print_metrics(m, &te, pred);
        if (model_out && mr_gbdt_model_save(m, model_out, &err) != MR_OK) die("saving model", &err);
        if (pred_out) write_preds(pred_out, pred, te.n, K);
        mr_gbdt_predictor_free(pr);
        mr_gbdt_model_free(m);
        free(pred);
        free_data(&tr);
        free_data(&te);
    } else if (!strcmp(cmd, "predict")) {
        if (!model_p || !data_p) usage();
        mr_gbdt_model *m = NULL;
        if (mr_gbdt_model_load(model_p, &m, &err) != MR_OK) die("loading model", &err);
        dataset te;
        load(data_p, label_col, &te);
        if (te.f != mr_gbdt_model_num_features(m)) die("data and model feature counts differ", NULL);
        int K = mr_gbdt_model_num_class(m);
        double *pred = malloc(te.n * (size_t)K * sizeof(double));
        mr_gbdt_predictor *pr = NULL;
        if (mr_gbdt_predictor_new(m, 0, &pr, &err) != MR_OK) die("predictor", &err);
        double t0 = mr_now();
        if (mr_gbdt_predictor_batch(pr, te.x, te.n, MR_GBDT_ROW_MAJOR, raw, threads, pred, &err) != MR_OK)
            die("predict", &err);
        double t1 = mr_now();
        mr_gbdt_predictor_free(pr);
        printf("predict_s=%.4f\npredict_rows_per_s=%.0f\n", t1 - t0, (double)te.n / (t1 - t0 > 1e-9 ? t1 - t0 : 1e-9));
        if (out_p) write_preds(out_p, pred, te.n, K);
        if (!raw) print_metrics(m, &te, pred);
        free(pred);
        free_data(&te);
        mr_gbdt_model_free(m);
    } else if (!strcmp(cmd, "dump")) {
        if (!model_p) usage();
        mr_gbdt_model *m = NULL;
        if (mr_gbdt_model_load(model_p, &m, &err) != MR_OK) die("loading model", &err);
        mr_buf b;
        mr_buf_init(&b);
        b.limit = (size_t)1 << 34;
        if (mr_gbdt_model_dump_json(m, &b, &err) != MR_OK) die("dump", &err);
        fwrite(b.data, 1, b.len, stdout);
        mr_buf_free(&b);
        mr_gbdt_model_free(m);
    } else {
        usage();
    }
    mr_gbdt_params_deinit(&p);
    mr_pool_shutdown();
    return 0;
}
