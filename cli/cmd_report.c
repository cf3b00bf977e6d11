/* millrace report [RUN] [-o FILE] [--md FILE]: regenerates the HTML report
 * (and optionally its Markdown summary) of any recorded run from the run
 * store and the artifacts its stages published. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cmd_report(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace report [RUN] [-o FILE] [--md FILE] [-C DIR]\n\n"
              "Writes the self-contained HTML report of RUN (default: latest) to FILE (default:\n"
              "report-RUN.html): run summary, stage timeline, training curves, metrics with\n"
              "intervals, curves, confusion matrix, feature importance, slices, worst errors,\n"
              "residuals and check results, read from the artifacts the run's evaluate, train\n"
              "and check stages published. --md also writes the short Markdown summary.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *run_ref = "latest", *out = NULL, *md = NULL;
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) return cli_usage_error("report", "option '%s' needs a value", argv[i]);
        if (k) continue;
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--md") && i + 1 < argc) md = argv[++i];
        else if (argv[i][0] == '-' && !(argv[i][1] >= '0' && argv[i][1] <= '9'))
            return cli_usage_error("report", "unknown option '%s'", argv[i]);
        else if (n_pos++ == 0) run_ref = argv[i];
        else return cli_usage_error("report", "unexpected argument '%s'", argv[i]);
    }
    mr_error err;
    mr_error_init(&err);
    mr_workspace *ws = NULL;
    int rc = EXIT_OK;
    int64_t run = 0;
    char def_out[64];
    mr_pool_init(0, NULL);
    if (mr_workspace_open(c.dir ? c.dir : ".", 1, 0, &ws, &err) != MR_OK ||
        mr_runstore_resolve_run(ws->rs, run_ref, &run, &err) != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_USAGE;
        goto done;
    }
    if (!out) {
        snprintf(def_out, sizeof(def_out), "report-%lld.html", (long long)run);
        out = def_out;
    }
    if (mr_run_report_regenerate(ws, run, out, md, &err) != MR_OK) {
        mr_log_error(&err);
        rc = cli_status_exit(err.code);
        goto done;
    }
    printf("wrote %s%s%s (run %lld)\n", out, md ? " and " : "", md ? md : "", (long long)run);
done:
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}
