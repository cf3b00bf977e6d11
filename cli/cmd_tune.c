/* millrace tune show STAGE [--json]: the leaderboard of the newest study
 * of a tune stage (the run store's trials, mr_runstore_trials), and
 * parameter importances (fANOVA-lite, mr_tune_importance) over its
 * complete trials. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int status_rank(const char *st) { return !strcmp(st, "complete") ? 0 : !strcmp(st, "pruned") ? 1 : 2; }

static int maximize_g;

/* Complete trials first, then pruned, then failed; by value (best first,
 * missing last), then by trial number. */
static int cmp_trials(const void *a, const void *b)
{
    const mr_trial_record *x = *(const mr_trial_record *const *)a, *y = *(const mr_trial_record *const *)b;
    int rx = status_rank(x->status), ry = status_rank(y->status);
    if (rx != ry) return rx - ry;
    if (!isnan(x->value) && !isnan(y->value)) {
        if (x->value != y->value) return (maximize_g ? x->value > y->value : x->value < y->value) ? -1 : 1;
    } else if (isnan(x->value) != isnan(y->value)) {
        return isnan(x->value) ? 1 : -1;
    }
    return x->trial - y->trial;
}

static const mr_value *params_of(const mr_trial_record *t) { return mr_value_get(t->record, "params"); }

/* Parameter importances over the complete trials: numbers as they are,
 * anything else as a category (its canonical text). Names in first-seen
 * order; *names_out borrowed from the trials. */
static mr_status importances(const mr_trial_list *t, const char ***names_out, double **imp_out, size_t *m_out)
{
    size_t m = 0, rows = 0, n = t->n;
    const char **names = mr_calloc(64, sizeof(*names));
    for (size_t i = 0; names && i < n; i++) {
        const mr_value *p = params_of(&t->trials[i]);
        for (size_t k = 0; p && p->kind == MR_V_MAP && k < p->n && m < 64; k++) {
            size_t j = 0;
            while (j < m && strcmp(names[j], p->keys[k])) j++;
            if (j == m) names[m++] = p->keys[k];
        }
    }
    double *x = mr_calloc((n ? n : 1) * (m ? m : 1), sizeof(double)), *y = mr_calloc(n ? n : 1, sizeof(double));
    double *imp = mr_calloc(m ? m : 1, sizeof(double));
    int *cat = mr_calloc(m ? m : 1, sizeof(int));
    char **cats = mr_calloc((m ? m : 1) * (n ? n : 1), sizeof(char *)); /* category texts per param */
    size_t *n_cats = mr_calloc(m ? m : 1, sizeof(size_t));
    mr_status st = names && x && y && imp && cat && cats && n_cats ? MR_OK : MR_E_NOMEM;
    for (size_t i = 0; st == MR_OK && i < n; i++) {
        const mr_trial_record *tr = &t->trials[i];
        if (strcmp(tr->status, "complete") || isnan(tr->value)) continue;
        for (size_t j = 0; j < m && st == MR_OK; j++) {
            const mr_value *v = mr_value_get(params_of(tr), names[j]);
            double d = NAN;
            if (v && (v->kind == MR_V_INT || v->kind == MR_V_FLOAT)) {
                d = v->kind == MR_V_INT ? (double)v->u.i : v->u.f;
            } else if (v) {
                mr_buf b;
                mr_buf_init(&b);
                mr_value_to_json(v, 1, &b);
                cat[j] = 1;
                size_t q = 0;
                while (q < n_cats[j] && strcmp(cats[j * n + q], b.data ? b.data : "")) q++;
                if (q == n_cats[j]) {
                    cats[j * n + q] = mr_strdup(b.data ? b.data : "");
                    if (!cats[j * n + q]) st = MR_E_NOMEM;
                    n_cats[j]++;
                }
                mr_buf_free(&b);
                d = (double)q;
            }
            x[rows * m + j] = d;
        }
        y[rows++] = tr->value;
    }
    for (size_t i = 0; cats && i < (m ? m : 1) * (n ? n : 1); i++) mr_free(cats[i]);
    if (st == MR_OK && mr_tune_importance(x, y, rows, m, cat, imp, NULL) != MR_OK) m = 0;
    mr_free(cats);
    mr_free(n_cats);
    mr_free(x);
    mr_free(y);
    mr_free(cat);
    if (st != MR_OK) {
        mr_free(names);
        mr_free(imp);
        return st;
    }
    *names_out = names;
    *imp_out = imp;
    *m_out = m;
    return MR_OK;
}

/* A record as jansson JSON (the --json leaderboard's rows). */
static json_t *record_json(const mr_trial_record *t)
{
    mr_buf b;
    mr_buf_init(&b);
    json_t *rec = mr_value_to_json(t->record, 1, &b) == MR_OK ? json_loads(b.data ? b.data : "{}", 0, NULL) : NULL;
    mr_buf_free(&b);
    return rec ? rec : json_object();
}

static const char *record_str(const mr_trial_record *t, const char *key)
{
    const mr_value *v = mr_value_get(t->record, key);
    return v && v->kind == MR_V_STR ? v->str : NULL;
}

static int64_t record_int(const mr_trial_record *t, const char *key)
{
    const mr_value *v = mr_value_get(t->record, key);
    return v && v->kind == MR_V_INT ? v->u.i : 0;
}

static void print_json(const char *stage, const mr_trial_list *t, mr_trial_record **rows, const int *counts, int n_cached,
                       const char *metric, const char **names, const double *imp, size_t m)
{
    json_t *board = json_array(), *ji = json_object();
    for (size_t i = 0; i < t->n; i++) json_array_append_new(board, record_json(rows[i]));
    for (size_t j = 0; j < m; j++) json_object_set_new(ji, names[j], json_real(imp[j]));
    json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:o,s:o}", "stage", stage, "run_id", (json_int_t)t->run_id,
                          "metric", metric ? metric : "", "direction", maximize_g ? "maximize" : "minimize", "n_trials",
                          (int)t->n, "n_complete", counts[0], "n_pruned", counts[1], "n_failed", counts[2], "n_cached",
                          n_cached, "leaderboard", board, "importance", ji);
    if (counts[0]) json_object_set_new(o, "best", record_json(rows[0]));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
}

static void print_text(const char *stage, const mr_trial_list *t, mr_trial_record **rows, const int *counts, int n_cached,
                       const char *metric, const char **names, double *imp, size_t m)
{
    printf("study %s (run %lld): %zu trials: %d complete, %d pruned, %d failed (%d from the cache); %s, %s\n", stage,
           (long long)t->run_id, t->n, counts[0], counts[1], counts[2], n_cached, maximize_g ? "maximize" : "minimize",
           metric ? metric : "?");
    printf("\n%4s %6s %12s %-9s %6s  %s\n", "rank", "trial", metric ? metric : "value", "status", "round", "params");
    for (size_t i = 0; i < t->n && i < 20; i++) {
        const mr_trial_record *r = rows[i];
        mr_buf p;
        mr_buf_init(&p);
        mr_runstore_value_text(params_of(r), &p);
        char val[32];
        if (!isnan(r->value))
            snprintf(val, sizeof(val), "%.6f", r->value);
        else
            snprintf(val, sizeof(val), "-");
        printf("%4zu %6d %12s %-9s %6lld  %s\n", i + 1, r->trial, val, r->status, (long long)record_int(r, "round"),
               p.data ? p.data : "{}");
        mr_buf_free(&p);
    }
    if (t->n > 20) printf("  ... %zu more (--json lists all)\n", t->n - 20);
    printf("\nparameter importance (complete trials)\n");
    /* sorted by importance, descending */
    for (size_t a = 0; a < m; a++)
        for (size_t c = a + 1; c < m; c++)
            if (imp[c] > imp[a]) {
                double ti = imp[a];
                const char *tn = names[a];
                imp[a] = imp[c];
                names[a] = names[c];
                imp[c] = ti;
                names[c] = tn;
            }
    for (size_t a = 0; a < m; a++) {
        char bar[41];
        int w = (int)lround(imp[a] * 40);
        if (w < 0) w = 0;
        if (w > 40) w = 40;
        memset(bar, '#', (size_t)w);
        bar[w] = '\0';
        printf("  %-24s %5.3f %s\n", names[a], imp[a], bar);
    }
}

static int show(const char *stage, int json_out, mr_workspace *ws)
{
    mr_error err;
    mr_error_init(&err);
    mr_trial_list *t = NULL;
    if (mr_runstore_trials(ws->rs, stage, &t, &err) != MR_OK) {
        mr_log_error(&err);
        return EXIT_FAILED;
    }
    if (!t->n) {
        fprintf(stderr, "millrace: error: no trials recorded for stage '%s'\nhint: run the tune stage first (millrace run %s)\n",
                stage, stage);
        mr_trial_list_free(t);
        return EXIT_FAILED;
    }
    const char *metric = record_str(&t->trials[0], "metric"), *dir = record_str(&t->trials[0], "direction");
    maximize_g = !dir || !strcmp(dir, "maximize");
    mr_trial_record **rows = mr_calloc(t->n, sizeof(*rows));
    int counts[3] = {0, 0, 0}, n_cached = 0, rc = EXIT_OK;
    const char **names = NULL;
    double *imp = NULL;
    size_t m = 0;
    if (!rows || importances(t, &names, &imp, &m) != MR_OK) {
        fprintf(stderr, "millrace: error: out of memory\n");
        rc = EXIT_FAILED;
        goto done;
    }
    for (size_t i = 0; i < t->n; i++) {
        const mr_value *cached = mr_value_get(t->trials[i].record, "cached");
        rows[i] = &t->trials[i];
        counts[status_rank(rows[i]->status)]++;
        n_cached += cached && cached->kind == MR_V_BOOL && cached->u.b;
    }
    qsort(rows, t->n, sizeof(*rows), cmp_trials);
    if (json_out)
        print_json(stage, t, rows, counts, n_cached, metric, names, imp, m);
    else
        print_text(stage, t, rows, counts, n_cached, metric, names, imp, m);
done:
    mr_free(names);
    mr_free(imp);
    mr_free(rows);
    mr_trial_list_free(t);
    return rc;
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
