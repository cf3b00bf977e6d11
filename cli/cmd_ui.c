/* millrace ui: the run browser (docs/ui.md), a read-only local web app over
 * the workspace's run store, until SIGINT/SIGTERM. */
#include "cli.h"
#include "millrace/ui.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char ui_help[] =
    "usage: millrace ui [--port P] [--host ADDR] [--port-file FILE] [-C DIR]\n"
    "\n"
    "Serves the run browser on http://127.0.0.1:8090/ (read-only; safe to leave running\n"
    "while runs write): the runs table with params and metrics as columns, sorting,\n"
    "filter expressions (metrics.eval.test.auc > 0.85 and params.train.num_leaves = 63) and\n"
    "paging; selected runs' curves overlaid, the params that differ, parallel coordinates\n"
    "and the stage timeline; one run's stages, logs, artifacts, lineage and report, live\n"
    "while it runs. --port 0 picks a free port; --host takes IPv4 or IPv6.\n";

static volatile sig_atomic_t g_stop;
static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

int cmd_ui(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(ui_help, stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    mr_ui_opts o;
    mr_ui_opts_init(&o);
    const char *port_file = NULL;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (k < 0) rc = cli_usage_error("ui", "option '%s' needs a value", argv[i]);
        else if (k) continue;
        else if (!strcmp(argv[i], "--port") && v) {
            char *end = NULL;
            long p = strtol(v, &end, 10);
            if (!end || *end || p < 0 || p > 65535) rc = cli_usage_error("ui", "--port takes 0..65535");
            o.port = (int)p;
            i++;
        } else if (!strcmp(argv[i], "--host") && v) {
            o.host = argv[++i];
        } else if (!strcmp(argv[i], "--port-file") && v) {
            port_file = argv[++i];
        } else {
            rc = cli_usage_error("ui", "unexpected argument '%s'", argv[i]);
        }
    }
    if (rc != EXIT_OK) {
        cli_common_free(&c);
        return rc;
    }
    if (c.dir) o.dir = c.dir;
    mr_error err;
    mr_error_init(&err);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    mr_ui *u = NULL;
    mr_status st = mr_ui_start(&o, &u, &err);
    if (st != MR_OK) {
        mr_log_error(&err);
        cli_common_free(&c);
        return st == MR_E_INVALID_ARG || st == MR_E_NOT_FOUND ? EXIT_USAGE : EXIT_FAILED;
    }
    int v6 = strchr(o.host, ':') != NULL && o.host[0] != '[';
    printf("run browser on http://%s%s%s:%d/  (Ctrl-C stops it)\n", v6 ? "[" : "", o.host, v6 ? "]" : "", mr_ui_port(u));
    fflush(stdout);
    if (port_file) {
        char pb[16];
        int n = snprintf(pb, sizeof(pb), "%d\n", mr_ui_port(u));
        mr_fs_write_atomic(port_file, pb, (size_t)n, NULL);
    }
    while (!g_stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    mr_ui_stop(u);
    cli_common_free(&c);
    return EXIT_OK;
}
