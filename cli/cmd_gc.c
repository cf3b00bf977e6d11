/* millrace gc: deletes the artifacts that neither millrace.lock nor one of
 * the newest N runs references, and the cache entries that pointed at them. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cmd_gc(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace gc [--keep-runs N] [--dry] [--json] [--remote [NAME]] [-C DIR]\n\n"
              "Deletes every artifact that neither millrace.lock nor one of the newest N runs\n"
              "references (default: keep every run's artifacts; --keep-runs 0 keeps only what\n"
              "the lock references). Cache entries whose artifacts are gone are dropped.\n"
              "With --remote, the same on the remote NAME (or the default one) instead of the\n"
              "local store: the stage results naming anything else go first, then the objects.\n"
              "Other machines' results it does not reference go too: --dry shows what would.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    mr_workspace *ws = NULL;
    int rc = EXIT_OK, keep = -1, dry = 0;
    const char *remote = NULL;
    mr_spec *spec = NULL;
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
        } else if (!strcmp(argv[i], "--remote")) {
            remote = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "";
        } else if (argv[i][0] == '-') {
            rc = cli_usage_error("gc", "unknown option '%s'", argv[i]);
        } else {
            rc = cli_usage_error("gc", "unexpected argument '%s'", argv[i]);
        }
    }
    mr_error err;
    mr_error_init(&err);
    if (rc == EXIT_OK && remote) {
        rc = cli_load(&c, &ws, &spec); /* the remote is named in millrace.yaml */
    } else if (rc == EXIT_OK && mr_workspace_open(c.dir ? c.dir : ".", 1, 0, &ws, &err) != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK) {
        mr_buf out;
        mr_buf_init(&out);
        mr_status st = remote ? mr_pipeline_gc_remote(ws, spec, remote, keep, dry, c.json, &out, &err)
                              : mr_pipeline_gc(ws, keep, dry, c.json, &out, &err);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = st == MR_E_NOT_FOUND ? EXIT_USAGE : EXIT_FAILED;
        } else {
            cli_print(&out);
        }
        mr_buf_free(&out);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}
