/* millrace verify: re-hashes every artifact in the store and checks that
 * every output millrace.lock names is present. */
#include "cli.h"

#include <string.h>

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
    mr_workspace *ws = NULL;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("verify", "option '%s' needs a value", argv[i]);
        else if (k == 0 && argv[i][0] == '-') rc = cli_usage_error("verify", "unknown option '%s'", argv[i]);
        else if (k == 0) rc = cli_usage_error("verify", "unexpected argument '%s'", argv[i]);
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
