/* millrace runs / show / compare / verify / gc: the run store and the
 * artifact store. Text output is rendered here from the library's JSON. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int open_ws(cli_common *c, const char *verb, int argc, char **argv, const char **pos, int max_pos, int *n_pos,
                   mr_workspace **ws, int *keep_runs, int *dry)
{
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        int k = cli_common_opt(c, argc, argv, &i);
        if (k < 0) return cli_usage_error(verb, "option '%s' needs a value", argv[i]);
        if (k) continue;
        if (keep_runs && !strcmp(argv[i], "--keep-runs")) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || !end || *end || v < 0) return cli_usage_error(verb, "--keep-runs expects a number >= 0");
            *keep_runs = (int)v;
            i++;
        } else if (dry && (!strcmp(argv[i], "--dry") || !strcmp(argv[i], "--dry-run"))) {
            *dry = 1;
        } else if (argv[i][0] == '-' && !(argv[i][1] >= '0' && argv[i][1] <= '9')) {
            return cli_usage_error(verb, "unknown option '%s'", argv[i]);
        } else if (*n_pos < max_pos) {
            pos[(*n_pos)++] = argv[i];
        } else {
            return cli_usage_error(verb, "unexpected argument '%s'", argv[i]);
        }
    }
    mr_error err;
    mr_error_init(&err);
    if (mr_workspace_open(c->dir ? c->dir : ".", 1, 0, ws, &err) != MR_OK) {
        mr_log_error(&err);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static json_t *parse_buf(const mr_buf *b) { return json_loadb(b->data ? b->data : "{}", b->len, 0, NULL); }

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void fmt_num(json_t *v, char *buf, size_t n)
{
    if (!v || json_is_null(v)) snprintf(buf, n, "-");
    else if (json_is_integer(v)) snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, n, "%.6g", json_real_value(v));
    else {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(buf, n, "%s", t ? t : "?");
        free(t);
    }
}

int cmd_runs(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace runs [N] [--json] [-C DIR]\n\nLists the newest N runs (default 20; 0 = all).\n", stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *pos[1];
    int n_pos;
    mr_workspace *ws = NULL;
    int rc = open_ws(&c, "runs", argc, argv, pos, 1, &n_pos, &ws, NULL, NULL);
    if (rc == EXIT_OK) {
        int limit = n_pos ? (int)strtol(pos[0], NULL, 10) : 20;
        mr_buf out;
        mr_buf_init(&out);
        mr_error err;
        mr_error_init(&err);
        if (mr_runstore_runs_json(ws->rs, limit, &out, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_FAILED;
        } else if (c.json) {
            cli_print(&out);
            printf("\n");
        } else {
            json_t *j = parse_buf(&out);
            printf("%-5s %-20s %-11s %8s %5s %6s %6s  %s\n", "RUN", "STARTED", "STATUS", "SECONDS", "RAN", "CACHED", "FAILED",
                   "COMMIT");
            size_t k;
            json_t *r;
            json_array_foreach(json_object_get(j, "runs"), k, r)
            {
                char dur[32];
                fmt_num(json_object_get(r, "duration_s"), dur, sizeof(dur));
                if (json_is_real(json_object_get(r, "duration_s")))
                    snprintf(dur, sizeof(dur), "%.2f", json_real_value(json_object_get(r, "duration_s")));
                const char *commit = jstr(r, "git_commit");
                printf("%-5lld %-20s %-11s %8s %5lld %6lld %6lld  %.10s%s%s\n", (long long)json_integer_value(json_object_get(r, "id")),
                       jstr(r, "started"), jstr(r, "status"), dur, (long long)json_integer_value(json_object_get(r, "n_executed")),
                       (long long)json_integer_value(json_object_get(r, "n_cached")),
                       (long long)json_integer_value(json_object_get(r, "n_failed")), commit,
                       json_is_true(json_object_get(r, "git_dirty")) ? "+dirty" : "",
                       json_is_true(json_object_get(r, "smoke")) ? " (smoke)" : "");
            }
            json_decref(j);
        }
        mr_buf_free(&out);
    }
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cmd_show(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace show [RUN] [--json] [-C DIR]\n\n"
              "Shows one run (default: the latest): status, git commit, params, and per stage\n"
              "its key, cached or executed, wall and CPU time, peak RSS, bytes read/written and\n"
              "metrics. RUN is an id, 'latest', or -N for the N-th newest.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *pos[1];
    int n_pos;
    mr_workspace *ws = NULL;
    int rc = open_ws(&c, "show", argc, argv, pos, 1, &n_pos, &ws, NULL, NULL);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        int64_t id;
        mr_buf out;
        mr_buf_init(&out);
        if (mr_runstore_resolve_run(ws->rs, n_pos ? pos[0] : "latest", &id, &err) != MR_OK ||
            mr_runstore_show_json(ws->rs, id, &out, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_USAGE;
        } else if (c.json) {
            cli_print(&out);
            printf("\n");
        } else {
            json_t *j = parse_buf(&out), *run = json_object_get(j, "run");
            printf("run %lld  %s  started %s", (long long)id, jstr(run, "status"), jstr(run, "started"));
            if (json_is_real(json_object_get(run, "duration_s")))
                printf("  %.2fs", json_real_value(json_object_get(run, "duration_s")));
            printf("\n  command: %s\n", jstr(run, "argv"));
            if (jstr(run, "git_commit")[0])
                printf("  commit:  %s%s\n", jstr(run, "git_commit"), json_is_true(json_object_get(run, "git_dirty")) ? " (dirty)" : "");
            char *params = json_dumps(json_object_get(run, "params"), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
            printf("  params:  %s\n\n", params ? params : "{}");
            free(params);
            printf("  %-20s %-9s %8s %8s %9s %10s %10s\n", "STAGE", "STATUS", "WALL s", "CPU s", "RSS MB", "READ MB", "WRITE MB");
            size_t k;
            json_t *s;
            json_array_foreach(json_object_get(j, "stages"), k, s)
            {
                double cpu = json_number_value(json_object_get(s, "user_s")) + json_number_value(json_object_get(s, "sys_s"));
                printf("  %-20s %-9s %8.2f %8.2f %9.1f %10.2f %10.2f\n", jstr(s, "stage"), jstr(s, "status"),
                       json_number_value(json_object_get(s, "wall_s")), cpu,
                       json_number_value(json_object_get(s, "max_rss_kb")) / 1024.0,
                       json_number_value(json_object_get(s, "bytes_read")) / 1e6,
                       json_number_value(json_object_get(s, "bytes_written")) / 1e6);
                if (json_is_string(json_object_get(s, "error"))) printf("      error: %s\n", jstr(s, "error"));
            }
            /* Metrics arrive ordered by stage, name, step: print the final
             * value of each, with the number of steps of a curve. */
            json_t *mets = json_object_get(j, "metrics");
            size_t n_m = json_array_size(mets);
            if (n_m) printf("\n  %-20s %-30s %14s %8s\n", "STAGE", "METRIC", "FINAL", "STEPS");
            size_t run_len = 0;
            for (size_t q = 0; q < n_m; q++) {
                json_t *m = json_array_get(mets, q), *next = q + 1 < n_m ? json_array_get(mets, q + 1) : NULL;
                run_len++;
                if (next && !strcmp(jstr(m, "stage"), jstr(next, "stage")) && !strcmp(jstr(m, "name"), jstr(next, "name")))
                    continue;
                char v[64];
                fmt_num(json_object_get(m, "value"), v, sizeof(v));
                printf("  %-20s %-30s %14s %8zu\n", jstr(m, "stage"), jstr(m, "name"), v, run_len);
                run_len = 0;
            }
            json_decref(j);
        }
        mr_buf_free(&out);
    }
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cmd_compare(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace compare RUN_A RUN_B [--json | --html [-o FILE]] [-C DIR]\n\n"
              "Params and final metrics of two runs side by side; changed params and metric\n"
              "deltas are marked, and stages whose key differs are listed. --html writes a\n"
              "self-contained HTML page instead (default compare-A-B.html): params diff, metric\n"
              "deltas chart, and the evaluation curves of both runs overlaid.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *pos[2];
    int n_pos;
    mr_workspace *ws = NULL;
    /* --html and -o FILE are taken out before the common parsing. */
    int html = 0, nargc = 0;
    const char *html_out = NULL;
    char **nargv = mr_calloc((size_t)argc + 1, sizeof(char *));
    if (!nargv) return EXIT_FAILED;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--html")) html = 1;
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) html_out = argv[++i];
        else nargv[nargc++] = argv[i];
    }
    int rc = open_ws(&c, "compare", nargc, nargv, pos, 2, &n_pos, &ws, NULL, NULL);
    if (rc == EXIT_OK && n_pos != 2) rc = cli_usage_error("compare", "expected two runs, e.g. `millrace compare 3 4`");
    if (rc == EXIT_OK && html_out && !html) rc = cli_usage_error("compare", "-o needs --html");
    if (rc == EXIT_OK && html) {
        mr_error err;
        mr_error_init(&err);
        int64_t a, b;
        char def_out[96];
        if (mr_runstore_resolve_run(ws->rs, pos[0], &a, &err) != MR_OK || mr_runstore_resolve_run(ws->rs, pos[1], &b, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_USAGE;
        } else {
            snprintf(def_out, sizeof(def_out), "compare-%lld-%lld.html", (long long)a, (long long)b);
            if (!html_out) html_out = def_out;
            mr_pool_init(0, NULL);
            if (mr_run_compare_html(ws, a, b, html_out, &err) != MR_OK) {
                mr_log_error(&err);
                rc = cli_status_exit(err.code);
            } else {
                printf("wrote %s\n", html_out);
            }
        }
    } else if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        int64_t a, b;
        mr_buf out;
        mr_buf_init(&out);
        if (mr_runstore_resolve_run(ws->rs, pos[0], &a, &err) != MR_OK || mr_runstore_resolve_run(ws->rs, pos[1], &b, &err) != MR_OK ||
            mr_runstore_compare_json(ws->rs, a, b, &out, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_USAGE;
        } else if (c.json) {
            cli_print(&out);
            printf("\n");
        } else {
            json_t *j = parse_buf(&out);
            size_t k;
            json_t *p;
            printf("%-32s %16s %16s\n", "PARAM", pos[0], pos[1]);
            json_array_foreach(json_object_get(j, "params"), k, p)
            {
                char va[64], vb[64];
                fmt_num(json_object_get(p, "a"), va, sizeof(va));
                fmt_num(json_object_get(p, "b"), vb, sizeof(vb));
                printf("%-32s %16s %16s%s\n", jstr(p, "path"), va, vb, json_is_true(json_object_get(p, "changed")) ? "  *" : "");
            }
            printf("\n%-32s %16s %16s %14s\n", "METRIC", pos[0], pos[1], "DELTA");
            json_array_foreach(json_object_get(j, "metrics"), k, p)
            {
                char va[64], vb[64], vd[64], name[256];
                fmt_num(json_object_get(p, "a"), va, sizeof(va));
                fmt_num(json_object_get(p, "b"), vb, sizeof(vb));
                fmt_num(json_object_get(p, "delta"), vd, sizeof(vd));
                snprintf(name, sizeof(name), "%s.%s", jstr(p, "stage"), jstr(p, "name"));
                printf("%-32s %16s %16s %14s\n", name, va, vb, vd);
            }
            printf("\n");
            json_array_foreach(json_object_get(j, "stages"), k, p)
            {
                if (json_is_true(json_object_get(p, "changed"))) printf("stage %s: key changed\n", jstr(p, "stage"));
            }
            json_decref(j);
        }
        mr_buf_free(&out);
    }
    mr_workspace_close(ws);
    cli_common_free(&c);
    mr_free(nargv);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace verify [--json] [-C DIR]\n\n"
              "Re-hashes every artifact in .millrace/objects and checks that every output\n"
              "millrace.lock names is present. Exit 1 if anything is corrupt or missing.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *pos[1];
    int n_pos;
    mr_workspace *ws = NULL;
    int rc = open_ws(&c, "verify", argc, argv, pos, 0, &n_pos, &ws, NULL, NULL);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_buf out;
        mr_buf_init(&out);
        int n_problems = 0;
        mr_pool_init(0, NULL);
        if (mr_pipeline_verify(ws, c.json, &out, &n_problems, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_FAILED;
        } else {
            cli_print(&out);
            rc = n_problems ? EXIT_FAILED : EXIT_OK;
        }
        mr_buf_free(&out);
    }
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cmd_gc(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace gc [--keep-runs N] [--dry] [--json] [-C DIR]\n\n"
              "Deletes every artifact that neither millrace.lock nor one of the newest N runs\n"
              "references (default: keep every run's artifacts; --keep-runs 0 keeps only what\n"
              "the lock references). Cache entries whose artifacts are gone are dropped.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *pos[1];
    int n_pos, keep = -1, dry = 0;
    mr_workspace *ws = NULL;
    int rc = open_ws(&c, "gc", argc, argv, pos, 0, &n_pos, &ws, &keep, &dry);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_buf out;
        mr_buf_init(&out);
        if (mr_pipeline_gc(ws, keep, dry, c.json, &out, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_FAILED;
        } else {
            cli_print(&out);
        }
        mr_buf_free(&out);
    }
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}
