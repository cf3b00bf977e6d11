/* millrace init */
#include "cli.h"

#include <string.h>

int cmd_init(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace init [DIR] [--force]\n\n"
              "Writes a starter millrace.yaml (two exec stages), .gitignore entries and\n"
              ".millrace/ (artifact store, run store) in DIR (default: the current directory).\n",
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
    printf("initialised millrace workspace in %s: edit millrace.yaml, then `millrace run`\n", dir);
    return EXIT_OK;
}
