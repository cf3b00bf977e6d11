/* millrace init */
#include "cli.h"

#include <string.h>

int cmd_init(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace init [DIR] [--force]\n\n"
              "Writes a starter pipeline in DIR (default: the current directory): millrace.yaml\n"
              "with a churn model on a generated table (ingest -> split -> features -> train ->\n"
              "evaluate -> report), data/customers.csv (3,000 rows), .gitignore entries and\n"
              ".millrace/ (artifact store, run store). `millrace run` runs it as it is.\n"
              "--force overwrites an existing millrace.yaml (data/customers.csv is kept).\n",
              stdout);
        return EXIT_OK;
    }
    const char *dir = ".";
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force")) force = 1;
        else if (argv[i][0] == '-') return cli_usage_error("init", "unknown option '%s'", argv[i]);
        else dir = argv[i];
    }
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_workspace_init(dir, force, &err);
    if (st != MR_OK) {
        mr_log_error(&err);
        return st == MR_E_STATE ? EXIT_USAGE : EXIT_FAILED;
    }
    printf("initialised a millrace workspace in %s: a churn model on data/customers.csv\n"
           "next: `millrace run`, then `millrace show` and out/report/report.html\n",
           dir);
    return EXIT_OK;
}
