/* millrace runs / show / compare: the run store's read views, printed as
 * aligned text tables or (--json) as the library's JSON documents. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- a text table: columns sized to their widest cell --------------------- */

#define MAX_COLS 64

typedef struct table {
    const char *head[MAX_COLS];
    int right[MAX_COLS]; /* right-aligned (numbers) */
    size_t n_cols;
    char **cells;        /* row-major, owned */
    size_t n_rows, cap;
} table;

static void table_col(table *t, const char *head, int right)
{
    if (t->n_cols == MAX_COLS) return;
    t->head[t->n_cols] = head;
    t->right[t->n_cols++] = right;
}

/* Appends one row (n_cols cells, copied). */
static int table_row(table *t, char *const *cells)
{
    if (t->n_rows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        char **c = mr_realloc(t->cells, cap * t->n_cols * sizeof(*c));
        if (!c) return -1;
        t->cells = c;
        t->cap = cap;
    }
    /* names, tags and params come from users and data: kept escaped for the terminal */
    for (size_t j = 0; j < t->n_cols; j++) t->cells[t->n_rows * t->n_cols + j] = mr_strdup(cli_safe(cells[j]));
    t->n_rows++;
    return 0;
}

static void table_print(const table *t, const char *indent)
{
    size_t w[MAX_COLS];
    mr_buf line;
    mr_buf_init(&line);
    for (size_t j = 0; j < t->n_cols; j++) {
        w[j] = strlen(t->head[j]);
        for (size_t i = 0; i < t->n_rows; i++) {
            const char *c = t->cells[i * t->n_cols + j];
            if (c && strlen(c) > w[j]) w[j] = strlen(c);
        }
    }
    for (size_t i = 0; i <= t->n_rows; i++) {
        line.len = 0;
        mr_buf_puts(&line, indent);
        for (size_t j = 0; j < t->n_cols; j++) {
            const char *c = i == 0 ? t->head[j] : t->cells[(i - 1) * t->n_cols + j];
            mr_buf_printf(&line, t->right[j] ? "%*s  " : "%-*s  ", (int)w[j], i == 0 ? cli_safe(c) : c ? c : "");
        }
        while (line.len && line.data[line.len - 1] == ' ') line.len--; /* no trailing blanks */
        printf("%.*s\n", (int)line.len, line.data ? line.data : "");
    }
    mr_buf_free(&line);
}

static void table_free(table *t)
{
    for (size_t i = 0; t->cells && i < t->n_rows * t->n_cols; i++) mr_free(t->cells[i]);
    mr_free(t->cells);
}

/* ---- shared helpers -------------------------------------------------------- */

static int open_store(const cli_common *c, mr_workspace **ws)
{
    mr_error err;
    mr_error_init(&err);
    if (mr_workspace_open(c->dir ? c->dir : ".", 1, 0, ws, &err) != MR_OK) {
        mr_log_error(&err);
        return EXIT_USAGE;
    }
    mr_pipeline_collect(*ws, cli_self_exe, NULL); /* detached Slurm runs: what their jobs finished */
    return EXIT_OK;
}

static int is_run_ref(const char *a) { return a[0] != '-' || (a[1] >= '0' && a[1] <= '9'); }

/* A value for a table cell: params as written, a metric's float "%.6g". */
static char *cell_text(const mr_value *v)
{
    mr_buf b;
    mr_buf_init(&b);
    if (v && v->kind == MR_V_FLOAT && !v->str)
        mr_buf_printf(&b, "%.6g", v->u.f);
    else
        mr_runstore_value_text(v, &b);
    char *s = mr_strdup(b.data ? b.data : "");
    mr_buf_free(&b);
    return s;
}

static void tags_text(const mr_run_summary *r, mr_buf *b)
{
    for (size_t i = 0; i < r->n_tags; i++)
        mr_buf_printf(b, "%s%s%s%s", i ? "," : "", r->tags[i].key, r->tags[i].value ? "=" : "",
                      r->tags[i].value ? r->tags[i].value : "");
}

/* Appends v to a growable array of strings (the repeatable options). */
static int push(const char ***arr, size_t *n, const char *v)
{
    const char **a = mr_realloc(*arr, (*n + 1) * sizeof(*a));
    if (!a) return -1;
    a[(*n)++] = v;
    *arr = a;
    return 0;
}

/* ---- runs ------------------------------------------------------------------ */

static const char runs_help[] =
    "usage: millrace runs [N] [--columns COL,...] [--sort [-]COL] [--tag KEY[=VALUE]]... [--sweep NAME] [--json] [-C DIR]\n"
    "\n"
    "Lists the newest N runs (default 20; 0 = all), or with --sort the first N in that order.\n"
    "\n"
    "  --columns COL,...    extra columns: params.PATH (params.train.learning_rate),\n"
    "                       metrics.STAGE.NAME (a metric's final value: metrics.eval.test.auc),\n"
    "                       or a run field: id name status started seconds ran cached failed\n"
    "                       skipped commit tags\n"
    "  --sort COL           sort by a column, ascending; --sort -COL descending. Runs without\n"
    "                       a value come last\n"
    "  --tag KEY[=VALUE]    only runs tagged KEY (with that VALUE); repeatable, all must match\n"
    "  --sweep NAME         only the runs of sweep NAME (run --sweep): --tag sweep=NAME\n";

static void runs_table(const mr_run_list *l)
{
    table t;
    memset(&t, 0, sizeof(t));
    int any_name = 0, any_tags = 0;
    for (size_t i = 0; i < l->n; i++) {
        any_name |= l->runs[i].name != NULL;
        any_tags |= l->runs[i].n_tags > 0;
    }
    table_col(&t, "RUN", 0);
    if (any_name) table_col(&t, "NAME", 0);
    table_col(&t, "STARTED", 0);
    table_col(&t, "STATUS", 0);
    table_col(&t, "SECONDS", 1);
    table_col(&t, "RAN", 1);
    table_col(&t, "CACHED", 1);
    table_col(&t, "FAILED", 1);
    table_col(&t, "COMMIT", 0);
    for (size_t j = 0; j < l->n_columns; j++) table_col(&t, l->columns[j], 1);
    if (any_tags) table_col(&t, "TAGS", 0);
    for (size_t i = 0; i < l->n; i++) {
        const mr_run_summary *r = &l->runs[i];
        char *cells[MAX_COLS] = {0};
        char started[32];
        size_t k = 0;
        mr_iso_time(r->started, started, sizeof(started));
        cells[k++] = mr_asprintf("%lld", (long long)r->id);
        if (any_name) cells[k++] = mr_strdup(r->name ? r->name : "");
        cells[k++] = mr_strdup(started);
        cells[k++] = mr_strdup(r->status ? r->status : "");
        cells[k++] = isnan(r->ended) ? mr_strdup("-") : mr_asprintf("%.2f", r->ended - r->started);
        cells[k++] = mr_asprintf("%lld", (long long)r->n_executed);
        cells[k++] = mr_asprintf("%lld", (long long)r->n_cached);
        cells[k++] = mr_asprintf("%lld", (long long)r->n_failed);
        cells[k++] = mr_asprintf("%.10s%s%s", r->git_commit ? r->git_commit : "", r->git_dirty ? "+dirty" : "",
                                 r->smoke ? " (smoke)" : "");
        for (size_t j = 0; j < l->n_columns && k < MAX_COLS; j++) cells[k++] = cell_text(l->cells[i * l->n_columns + j]);
        if (any_tags && k < MAX_COLS) {
            mr_buf b;
            mr_buf_init(&b);
            tags_text(r, &b);
            cells[k++] = mr_strdup(b.data ? b.data : "");
            mr_buf_free(&b);
        }
        table_row(&t, cells);
        for (size_t q = 0; q < k; q++) mr_free(cells[q]);
    }
    table_print(&t, "");
    table_free(&t);
}

int cmd_runs(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(runs_help, stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char **tags = NULL, *limit_arg = NULL, *sort = NULL;
    char *sweep_tag = NULL; /* --sweep NAME as the tag sweep=NAME */
    char **columns = NULL;
    size_t n_tags = 0, n_columns = 0;
    mr_workspace *ws = NULL;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("runs", "option '%s' needs a value", argv[i]);
        if (k) continue;
        if (!strcmp(argv[i], "--columns") || !strcmp(argv[i], "--tag") || !strcmp(argv[i], "--sort") ||
            !strcmp(argv[i], "--sweep")) {
            if (i + 1 >= argc) {
                rc = cli_usage_error("runs", "%s needs a value", argv[i]);
            } else if (!strcmp(argv[i], "--sweep")) {
                if (sweep_tag) rc = cli_usage_error("runs", "--sweep given twice");
                else if (!(sweep_tag = mr_asprintf("sweep=%s", argv[++i])) || push(&tags, &n_tags, sweep_tag))
                    rc = EXIT_FAILED;
            } else if (!strcmp(argv[i], "--sort")) {
                sort = argv[++i];
            } else if (!strcmp(argv[i], "--tag")) {
                push(&tags, &n_tags, argv[++i]);
            } else if (columns) {
                rc = cli_usage_error("runs", "--columns given twice (list them once: --columns A,B)");
            } else if (!(columns = cli_split_list(argv[++i], &n_columns))) {
                rc = EXIT_FAILED;
            }
        } else if (is_run_ref(argv[i]) && !limit_arg) {
            char *end = NULL;
            long v = strtol(argv[i], &end, 10);
            if (!end || *end || v < 0) rc = cli_usage_error("runs", "N must be a number >= 0, got '%s'", argv[i]);
            limit_arg = argv[i];
        } else if (argv[i][0] == '-') {
            rc = cli_usage_error("runs", "unknown option '%s'", argv[i]);
        } else {
            rc = cli_usage_error("runs", "unexpected argument '%s'", argv[i]);
        }
    }
    if (rc == EXIT_OK) rc = open_store(&c, &ws);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_runs_query q = {limit_arg ? (int)strtol(limit_arg, NULL, 10) : 20, tags, n_tags,
                           (const char *const *)columns, n_columns, sort};
        mr_run_list *l = NULL;
        mr_buf out;
        mr_buf_init(&out);
        mr_status st = mr_runstore_runs(ws->rs, &q, &l, &err);
        if (st == MR_OK && c.json) st = mr_run_list_json(l, &out, &err);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = cli_status_exit(st == MR_E_NOT_FOUND ? MR_E_INVALID_ARG : st);
        } else if (c.json) {
            cli_print_json(&out);
            printf("\n");
        } else {
            runs_table(l);
        }
        mr_buf_free(&out);
        mr_run_list_free(l);
    }
    mr_workspace_close(ws);
    mr_free(tags);
    mr_free(sweep_tag);
    cli_free_list(columns);
    cli_common_free(&c);
    return rc;
}

/* ---- show ------------------------------------------------------------------ */

static void show_text(const mr_run_detail *d)
{
    const mr_run_summary *run = &d->run;
    char started[32];
    mr_iso_time(run->started, started, sizeof(started));
    /* every string below comes from the run store, written from users' names, tags, params and data */
    printf("run %lld  %s  started %s", (long long)run->id, cli_safe(run->status), started);
    if (!isnan(run->ended)) printf("  %.2fs", run->ended - run->started);
    printf("\n");
    if (run->name) printf("  name:    %s\n", cli_safe(run->name));
    if (run->n_tags) {
        mr_buf b;
        mr_buf_init(&b);
        tags_text(run, &b);
        printf("  tags:    %s\n", cli_safe(b.data));
        mr_buf_free(&b);
    }
    printf("  command: %s\n", cli_safe(run->argv));
    if (run->git_commit && run->git_commit[0]) printf("  commit:  %s%s\n", cli_safe(run->git_commit), run->git_dirty ? " (dirty)" : "");
    mr_buf pj;
    mr_buf_init(&pj);
    mr_value_to_json(run->params, 1, &pj);
    printf("  params:  %s\n\n", pj.data ? cli_safe(pj.data) : "{}");
    mr_buf_free(&pj);
    printf("  %-20s %-9s %8s %8s %9s %10s %10s\n", "STAGE", "STATUS", "WALL s", "CPU s", "RSS MB", "READ MB", "WRITE MB");
    for (size_t k = 0; k < d->n_stages; k++) {
        const mr_stage_run *s = &d->stages[k];
        double wall = isnan(s->wall_s) ? 0 : s->wall_s, cpu = (isnan(s->user_s) ? 0 : s->user_s) + (isnan(s->sys_s) ? 0 : s->sys_s);
        printf("  %-20s %-9s %8.2f %8.2f %9.1f %10.2f %10.2f\n", cli_safe(s->stage), cli_safe(s->status), wall, cpu, (double)s->max_rss_kb / 1024.0,
               (double)s->bytes_read / 1e6, (double)s->bytes_written / 1e6);
        if (s->error) printf("      error: %s\n", cli_safe(s->error));
    }
    /* The final value of each metric, with the number of steps of a curve. */
    if (run->n_finals) printf("\n  %-20s %-30s %14s %8s\n", "STAGE", "METRIC", "FINAL", "STEPS");
    for (size_t q = 0; q < run->n_finals; q++) {
        const mr_run_final *f = &run->finals[q];
        char v[64];
        if (isnan(f->value))
            snprintf(v, sizeof(v), "-");
        else
            snprintf(v, sizeof(v), "%.6g", f->value);
        printf("  %-20s %-30s %14s %8zu\n", cli_safe(f->stage), cli_safe(f->name), v, f->n_steps);
    }
}

/* The Slurm jobs a run's stages ran as (mr_runstore_jobs_json's list). */
static void show_jobs(const char *text)
{
    json_t *arr = json_loads(text, 0, NULL);
    printf("\nSlurm jobs:\n  %-20s %-10s %-8s %-14s %-5s %-16s %9s %10s\n", "STAGE", "JOB", "ATTEMPT", "STATE", "EXIT", "NODES",
           "SECONDS", "MAXRSS_MB");
    size_t k;
    json_t *j;
    json_array_foreach(arr, k, j)
    {
        const char *nodes = json_string_value(json_object_get(j, "nodes"));
        printf("  %-20s %-10s %-8lld %-14s %-5lld %-16s %9.0f %10.1f\n", cli_safe(json_string_value(json_object_get(j, "stage"))),
               cli_safe(json_string_value(json_object_get(j, "job_id"))), (long long)json_integer_value(json_object_get(j, "attempt")),
               cli_safe(json_string_value(json_object_get(j, "state"))), (long long)json_integer_value(json_object_get(j, "exit_code")),
               nodes && nodes[0] ? cli_safe(nodes) : "-", json_number_value(json_object_get(j, "elapsed_s")),
               (double)json_integer_value(json_object_get(j, "max_rss_kb")) / 1024.0);
    }
    json_decref(arr);
}

int cmd_show(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace show [RUN] [--json] [-C DIR]\n\n"
              "Shows one run (default: the latest): status, name, tags, git commit, params, and per\n"
              "stage its key, cached or executed, wall and CPU time, peak RSS, bytes read/written and\n"
              "metrics. RUN is an id, a run name, 'latest', or -N for the N-th newest.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *ref = NULL;
    mr_workspace *ws = NULL;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("show", "option '%s' needs a value", argv[i]);
        if (k) continue;
        if (!is_run_ref(argv[i]))
            rc = cli_usage_error("show", "unknown option '%s'", argv[i]);
        else if (ref)
            rc = cli_usage_error("show", "unexpected argument '%s'", argv[i]);
        else
            ref = argv[i];
    }
    if (rc == EXIT_OK) rc = open_store(&c, &ws);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        int64_t id = 0;
        mr_run_detail *d = NULL;
        mr_buf out;
        mr_buf_init(&out);
        mr_status st = mr_runstore_resolve_run(ws->rs, ref ? ref : "latest", &id, &err);
        if (st == MR_OK) st = mr_runstore_run_detail(ws->rs, id, &d, &err);
        mr_buf jobs;
        mr_buf_init(&jobs);
        if (st == MR_OK && c.json) st = mr_run_detail_json(d, &out, &err);
        if (st == MR_OK) st = mr_runstore_jobs_json(ws->rs, id, &jobs, &err);
        int have_jobs = st == MR_OK && jobs.len > 2; /* "[]": not a Slurm run */
        if (st == MR_OK && c.json && have_jobs && out.len && out.data[out.len - 1] == '}') {
            out.data[--out.len] = '\0'; /* the run's object gains its Slurm jobs */
            mr_buf_printf(&out, ", \"slurm_jobs\": %s}", jobs.data);
        }
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = st == MR_E_NOT_FOUND ? EXIT_USAGE : cli_status_exit(st);
        } else if (c.json) {
            cli_print_json(&out);
            printf("\n");
        } else {
            show_text(d);
            if (have_jobs) show_jobs(jobs.data);
        }
        mr_buf_free(&jobs);
        mr_buf_free(&out);
        mr_run_detail_free(d);
    }
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

/* ---- compare --------------------------------------------------------------- */

static void compare_text(const mr_run_compare *cmp, const char *const *refs)
{
    size_t n = cmp->n_runs;
    table t;
    memset(&t, 0, sizeof(t));
    table_col(&t, "PARAM", 0);
    for (size_t r = 0; r < n; r++) table_col(&t, refs[r], 1);
    table_col(&t, "", 0);
    for (size_t i = 0; i < cmp->n_params; i++) {
        char *cells[MAX_COLS] = {0};
        cells[0] = mr_strdup(cmp->params[i].path);
        for (size_t r = 0; r < n && r + 2 < MAX_COLS; r++) cells[r + 1] = cell_text(cmp->params[i].values[r]);
        cells[n + 1] = mr_strdup(cmp->params[i].changed ? "*" : "");
        table_row(&t, cells);
        for (size_t q = 0; q < n + 2; q++) mr_free(cells[q]);
    }
    table_print(&t, "");
    table_free(&t);

    memset(&t, 0, sizeof(t));
    table_col(&t, "METRIC", 0);
    for (size_t r = 0; r < n; r++) table_col(&t, refs[r], 1);
    if (n == 2) table_col(&t, "DELTA", 1);
    table_col(&t, "", 0);
    for (size_t i = 0; i < cmp->n_metrics; i++) {
        const mr_compare_metric *m = &cmp->metrics[i];
        char *cells[MAX_COLS] = {0};
        size_t k = 0;
        cells[k++] = mr_asprintf("%s.%s", m->stage, m->name);
        for (size_t r = 0; r < n && k + 2 < MAX_COLS; r++)
            cells[k++] = m->present[r] && !isnan(m->values[r]) ? mr_asprintf("%.6g", m->values[r]) : mr_strdup("-");
        if (n == 2)
            cells[k++] = m->present[0] && m->present[1] && !isnan(m->values[1] - m->values[0])
                             ? mr_asprintf("%.6g", m->values[1] - m->values[0])
                             : mr_strdup("-");
        cells[k++] = mr_strdup(m->changed ? "*" : "");
        table_row(&t, cells);
        for (size_t q = 0; q < k; q++) mr_free(cells[q]);
    }
    printf("\n");
    table_print(&t, "");
    table_free(&t);
    printf("\n");
    for (size_t i = 0; i < cmp->n_stages; i++)
        if (cmp->stages[i].changed) printf("stage %s: key changed\n", cli_safe(cmp->stages[i].stage));
}

static const char compare_help[] =
    "usage: millrace compare RUN RUN [RUN...] [--json | --html [-o FILE]] [-C DIR]\n\n"
    "Params and final metrics of two or more runs side by side; rows whose values differ\n"
    "are marked *, two runs also get the metric deltas, and stages whose key differs are\n"
    "listed. --html writes a self-contained HTML page instead (default compare-A-B[-C...].html):\n"
    "the params and metrics tables with differences highlighted, charts of each run's metric\n"
    "changes from the first, and the evaluation curves of every run overlaid.\n";

/* The default page name: compare-A-B[-C...].html. */
static char *default_html(const int64_t *ids, size_t n)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_buf_puts(&b, "compare");
    for (size_t r = 0; r < n; r++) mr_buf_printf(&b, "-%lld", (long long)ids[r]);
    mr_buf_puts(&b, ".html");
    char *s = mr_strdup(b.data ? b.data : "compare.html");
    mr_buf_free(&b);
    return s;
}

int cmd_compare(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(compare_help, stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char **refs = NULL, *html_out = NULL;
    size_t n = 0;
    int html = 0, rc = EXIT_OK;
    mr_workspace *ws = NULL;
    int64_t *ids = NULL;
    char *def_out = NULL;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("compare", "option '%s' needs a value", argv[i]);
        if (k) continue;
        if (!strcmp(argv[i], "--html"))
            html = 1;
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
            html_out = argv[++i];
        else if (!is_run_ref(argv[i]))
            rc = cli_usage_error("compare", "unknown option '%s'", argv[i]);
        else if (push(&refs, &n, argv[i]) != 0)
            rc = EXIT_FAILED;
    }
    if (rc == EXIT_OK && n < 2)
        rc = cli_usage_error("compare", "expected two runs or more, e.g. `millrace compare 3 4` or `millrace compare 3 4 5`");
    if (rc == EXIT_OK && html_out && !html) rc = cli_usage_error("compare", "-o needs --html");
    if (rc == EXIT_OK) rc = open_store(&c, &ws);
    if (rc == EXIT_OK && !(ids = mr_calloc(n, sizeof(*ids)))) rc = EXIT_FAILED;
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_status st = MR_OK;
        for (size_t r = 0; r < n && st == MR_OK; r++) st = mr_runstore_resolve_run(ws->rs, refs[r], &ids[r], &err);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_USAGE;
        } else if (html) {
            if (!html_out) html_out = def_out = default_html(ids, n);
            mr_pool_init(0, NULL);
            st = html_out ? mr_run_compare_html(ws, ids, n, html_out, &err) : MR_ERR(&err, MR_E_NOMEM, "out of memory");
            if (st != MR_OK) {
                mr_log_error(&err);
                rc = cli_status_exit(err.code);
            } else {
                printf("wrote %s\n", html_out);
            }
        } else {
            mr_run_compare *cmp = NULL;
            mr_buf out;
            mr_buf_init(&out);
            st = mr_runstore_compare(ws->rs, ids, n, &cmp, &err);
            if (st == MR_OK && c.json) st = mr_run_compare_json(cmp, &out, &err);
            if (st != MR_OK) {
                mr_log_error(&err);
                rc = cli_status_exit(st);
            } else if (c.json) {
                cli_print_json(&out);
                printf("\n");
            } else {
                compare_text(cmp, refs);
            }
            mr_buf_free(&out);
            mr_run_compare_free(cmp);
        }
    }
    mr_workspace_close(ws);
    mr_free(ids);
    mr_free(def_out);
    mr_free(refs);
    cli_common_free(&c);
    return rc;
}
