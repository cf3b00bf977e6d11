/* millrace tune show STAGE [--json]: the leaderboard of the newest study
 * of a tune stage (from the run store's tune_trials), and parameter
 * importances (fANOVA-lite, mr_tune_importance) over its complete trials. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int maximize_g;

static int cmp_trials(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *sx = json_string_value(json_object_get(x, "status")), *sy = json_string_value(json_object_get(y, "status"));
    int rx = sx && !strcmp(sx, "complete") ? 0 : sx && !strcmp(sx, "pruned") ? 1 : 2;
    int ry = sy && !strcmp(sy, "complete") ? 0 : sy && !strcmp(sy, "pruned") ? 1 : 2;
    if (rx != ry) return rx - ry;
    json_t *vx = json_object_get(x, "value"), *vy = json_object_get(y, "value");
    if (json_is_number(vx) && json_is_number(vy)) {
        double a1 = json_number_value(vx), b1 = json_number_value(vy);
        if (a1 != b1) return (maximize_g ? a1 > b1 : a1 < b1) ? -1 : 1;
    } else if (json_is_number(vx) != json_is_number(vy)) {
        return json_is_number(vx) ? -1 : 1;
    }
    return (int)(json_integer_value(json_object_get(x, "trial")) - json_integer_value(json_object_get(y, "trial")));
}

/* Importances over complete trials; params as numbers or categories. */
static json_t *importances(json_t *trials)
{
    json_t *names = json_object(), *out = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t)
    {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(t, "params"), k, v) json_object_set_new(names, k, json_true());
    }
    size_t m = json_object_size(names), n = json_array_size(trials), rows = 0;
    const char **keys = mr_calloc(m ? m : 1, sizeof(*keys));
    double *x = mr_calloc((n ? n : 1) * (m ? m : 1), sizeof(double)), *y = mr_calloc(n ? n : 1, sizeof(double));
    double *imp = mr_calloc(m ? m : 1, sizeof(double));
    int *cat = mr_calloc(m ? m : 1, sizeof(int));
    json_t **cats = mr_calloc(m ? m : 1, sizeof(json_t *));
    if (!keys || !x || !y || !imp || !cat || !cats) goto done;
    size_t j = 0;
    const char *k;
    json_t *v;
    json_object_foreach(names, k, v) keys[j++] = k;
    json_array_foreach(trials, i, t)
    {
        const char *st = json_string_value(json_object_get(t, "status"));
        json_t *val = json_object_get(t, "value");
        if (!st || strcmp(st, "complete") || !json_is_number(val)) continue;
        json_t *p = json_object_get(t, "params");
        for (j = 0; j < m; j++) {
            json_t *pv = json_object_get(p, keys[j]);
            double d = NAN;
            if (json_is_number(pv)) {
                d = json_number_value(pv);
            } else if (pv) {
                cat[j] = 1;
                if (!cats[j]) cats[j] = json_array();
                char *txt = json_dumps(pv, JSON_ENCODE_ANY);
                size_t q, found = (size_t)-1;
                json_t *c;
                json_array_foreach(cats[j], q, c) if (txt && !strcmp(json_string_value(c), txt)) found = q;
                if (found == (size_t)-1 && txt) {
                    found = json_array_size(cats[j]);
                    json_array_append_new(cats[j], json_string(txt));
                }
                free(txt);
                d = (double)found;
            }
            x[rows * m + j] = d;
        }
        y[rows++] = json_number_value(val);
    }
    if (mr_tune_importance(x, y, rows, m, cat, imp, NULL) == MR_OK)
        for (j = 0; j < m; j++) json_object_set_new(out, keys[j], json_real(imp[j]));
done:
    for (j = 0; cats && j < m; j++) json_decref(cats[j]);
    mr_free(cats);
    mr_free(keys);
    mr_free(x);
    mr_free(y);
    mr_free(imp);
    mr_free(cat);
    json_decref(names);
    return out;
}

static int show(const char *stage, int json_out, mr_workspace *ws)
{
    mr_error err;
    mr_error_init(&err);
    mr_buf b;
    mr_buf_init(&b);
    int64_t run = 0;
    if (mr_runstore_trials_json(ws->rs, stage, &run, &b, &err) != MR_OK) {
        mr_log_error(&err);
        mr_buf_free(&b);
        return EXIT_FAILED;
    }
    json_t *trials = json_loadb(b.data ? b.data : "[]", b.len, 0, NULL);
    mr_buf_free(&b);
    size_t n = json_array_size(trials);
    if (!n) {
        fprintf(stderr, "millrace: error: no trials recorded for stage '%s'\nhint: run the tune stage first (millrace run %s)\n",
                stage, stage);
        json_decref(trials);
        return EXIT_FAILED;
    }
    json_t *first = json_array_get(trials, 0);
    const char *metric = json_string_value(json_object_get(first, "metric"));
    const char *dir = json_string_value(json_object_get(first, "direction"));
    maximize_g = !dir || !strcmp(dir, "maximize");
    json_t **rows = mr_calloc(n, sizeof(*rows));
    int counts[3] = {0, 0, 0}, n_cached = 0;
    for (size_t i = 0; rows && i < n; i++) {
        rows[i] = json_array_get(trials, i);
        const char *st = json_string_value(json_object_get(rows[i], "status"));
        counts[st && !strcmp(st, "complete") ? 0 : st && !strcmp(st, "pruned") ? 1 : 2]++;
        n_cached += json_is_true(json_object_get(rows[i], "cached"));
    }
    if (rows) qsort(rows, n, sizeof(*rows), cmp_trials);
    json_t *imp = importances(trials);
    if (json_out) {
        json_t *board = json_array();
        for (size_t i = 0; rows && i < n; i++) json_array_append(board, rows[i]);
        json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:o,s:o}", "stage", stage, "run_id", (json_int_t)run,
                              "metric", metric ? metric : "", "direction", maximize_g ? "maximize" : "minimize", "n_trials",
                              (int)n, "n_complete", counts[0], "n_pruned", counts[1], "n_failed", counts[2], "n_cached",
                              n_cached, "leaderboard", board, "importance", json_incref(imp));
        if (rows && counts[0]) json_object_set(o, "best", rows[0]);
        char *t = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (t) printf("%s\n", t);
        free(t);
        json_decref(o);
    } else {
        printf("study %s (run %lld): %zu trials: %d complete, %d pruned, %d failed (%d from the cache); %s, %s\n", stage,
               (long long)run, n, counts[0], counts[1], counts[2], n_cached, maximize_g ? "maximize" : "minimize",
               metric ? metric : "?");
        printf("\n%4s %6s %12s %-9s %6s  %s\n", "rank", "trial", metric ? metric : "value", "status", "round", "params");
        for (size_t i = 0; rows && i < n && i < 20; i++) {
            json_t *r = rows[i], *v = json_object_get(r, "value");
            char *p = json_dumps(json_object_get(r, "params"), JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(6));
            char val[32];
            if (json_is_number(v)) snprintf(val, sizeof(val), "%.6f", json_number_value(v));
            else snprintf(val, sizeof(val), "-");
            printf("%4zu %6lld %12s %-9s %6lld  %s\n", i + 1, (long long)json_integer_value(json_object_get(r, "trial")), val,
                   json_string_value(json_object_get(r, "status")), (long long)json_integer_value(json_object_get(r, "round")),
                   p ? p : "{}");
            free(p);
        }
        if (n > 20) printf("  ... %zu more (--json lists all)\n", n - 20);
        printf("\nparameter importance (complete trials)\n");
        const char *k;
        json_t *v;
        /* sorted by importance, descending */
        size_t m = json_object_size(imp), q = 0;
        const char **ks = mr_calloc(m ? m : 1, sizeof(*ks));
        json_object_foreach(imp, k, v) if (ks) ks[q++] = k;
        for (size_t a = 0; ks && a < m; a++)
            for (size_t c = a + 1; c < m; c++)
                if (json_real_value(json_object_get(imp, ks[c])) > json_real_value(json_object_get(imp, ks[a]))) {
                    const char *tmp = ks[a];
                    ks[a] = ks[c];
                    ks[c] = tmp;
                }
        for (size_t a = 0; ks && a < m; a++) {
            double d = json_real_value(json_object_get(imp, ks[a]));
            char bar[41];
            int w = (int)lround(d * 40);
            memset(bar, '#', (size_t)w);
            bar[w] = '\0';
            printf("  %-24s %5.3f %s\n", ks[a], d, bar);
        }
        mr_free(ks);
    }
    json_decref(imp);
    mr_free(rows);
    json_decref(trials);
    return EXIT_OK;
}

int cmd_tune(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        fputs("usage: millrace tune show STAGE [--json] [-C DIR]\n"
              "  the leaderboard of the newest study of a tune stage and its parameter importances\n",
              argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (strcmp(argv[1], "show") != 0) return cli_usage_error("tune", "unknown subcommand '%s' (expected 'show')", argv[1]);
    cli_common c;
    memset(&c, 0, sizeof(c));
    const char *stage = NULL;
    for (int i = 2; i < argc; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) {
            cli_common_free(&c);
            return cli_usage_error("tune", "option '%s' needs a value", argv[i]);
        }
        if (k) continue;
        if (argv[i][0] != '-' && !stage) {
            stage = argv[i];
        } else {
            cli_common_free(&c);
            return cli_usage_error("tune", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!stage) {
        cli_common_free(&c);
        return cli_usage_error("tune", "expected: tune show STAGE");
    }
    mr_workspace *ws = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_workspace_open(c.dir ? c.dir : ".", 1, 0, &ws, &err) != MR_OK) {
        mr_log_error(&err);
        cli_common_free(&c);
        return EXIT_USAGE;
    }
    int rc = show(stage, c.json, ws);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}
