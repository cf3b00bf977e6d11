/* millrace gc: deletes the artifacts that neither millrace.lock nor one of
 * the newest N runs references, and the cache entries that pointed at them. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

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
    mr_workspace *ws = NULL;
    int rc = EXIT_OK, keep = -1, dry = 0;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) {
            rc = cli_usage_error("gc", "option '%s' needs a value", argv[i]);
        } else if (k) {
            continue;
        } else if (!strcmp(argv[i], "--keep-runs")) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || !end || *end || v < 0) rc = cli_usage_error("gc", "--keep-runs expects a number >= 0");
            keep = (int)v;
            i++;
        } else if (!strcmp(argv[i], "--dry") || !strcmp(argv[i], "--dry-run")) {
            dry = 1;
        } else if (argv[i][0] == '-') {
            rc = cli_usage_error("gc", "unknown option '%s'", argv[i]);
        } else {
            rc = cli_usage_error("gc", "unexpected argument '%s'", argv[i]);
        }
    }
    mr_error err;
    mr_error_init(&err);
    if (rc == EXIT_OK && mr_workspace_open(c.dir ? c.dir : ".", 1, 0, &ws, &err) != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK) {
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
