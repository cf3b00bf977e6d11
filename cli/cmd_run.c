/* millrace run, and the internal worker verb millrace stage run. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char run_help[] =
    "usage: millrace run [STAGE...] [options]\n"
    "\n"
    "Runs the pipeline in millrace.yaml. A stage executes only when its op, params or\n"
    "inputs changed since a cached result; the others are served from the cache.\n"
    "With STAGE arguments, runs only those stages and what they depend on.\n"
    "\n"
    "options:\n"
    "  -j, --jobs N          core budget for stages running at once (default: all cores)\n"
    "  -S, --set KEY=VALUE   override a param (typed like YAML; +KEY=VALUE adds a new one)\n"
    "  -f, --force STAGE     run STAGE even if its result is cached (repeatable)\n"
    "      --force-all       run every stage\n"
    "  -d, --downstream STAGE  force STAGE and every stage after it\n"
    "  -k, --keep-going      after a failure, still run every stage that does not depend\n"
    "                        on it (default: start nothing new, let running stages finish)\n"
    "      --dry             show what would run; run nothing\n"
    "      --smoke           smoke mode: ops shrink their work; cached separately\n"
    "  -v, --verbose         print each stage's log when it finishes\n"
    "      --json            print a JSON summary on stdout\n"
    "  -C DIR                run in DIR instead of the current directory\n"
    "\n"
    "exit: 0 every stage succeeded, 1 a stage failed or the run was interrupted,\n"
    "      2 usage or spec error\n";

static int push(const char ***arr, size_t *n, const char *v)
{
    const char **a = mr_realloc(*arr, (*n + 1) * sizeof(*a));
    if (!a) return -1;
    a[(*n)++] = v;
    *arr = a;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(run_help, stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    mr_run_opts o = mr_run_opts_default();
    const char **force = NULL, **down = NULL, **targets = NULL;
    size_t n_force = 0, n_down = 0, n_targets = 0;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("run", "option '%s' needs a value", a);
        if (k != 0) continue;
        if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !end || *end || v < 1 || v > 4096)
                rc = cli_usage_error("run", "%s expects a number of cores >= 1", a);
            o.jobs = (int)v;
            i++;
        } else if (!strncmp(a, "-j", 2) && a[2]) {
            char *end = NULL;
            long v = strtol(a + 2, &end, 10);
            if (!end || *end || v < 1 || v > 4096) rc = cli_usage_error("run", "-j expects a number of cores >= 1");
            o.jobs = (int)v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--force")) {
            if (i + 1 >= argc) rc = cli_usage_error("run", "%s needs a stage name (or use --force-all)", a);
            else push(&force, &n_force, argv[++i]);
        } else if (!strcmp(a, "--force-all")) {
            o.force_all = 1;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--downstream")) {
            if (i + 1 >= argc) rc = cli_usage_error("run", "%s needs a stage name", a);
            else push(&down, &n_down, argv[++i]);
        } else if (!strcmp(a, "-k") || !strcmp(a, "--keep-going")) {
            o.keep_going = 1;
        } else if (!strcmp(a, "--dry") || !strcmp(a, "--dry-run")) {
            o.dry = 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o.verbose = 1;
        } else if (a[0] == '-') {
            rc = cli_usage_error("run", "unknown option '%s'", a);
        } else {
            push(&targets, &n_targets, a);
        }
    }
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK) rc = cli_load(&c, &ws, &spec);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_pool_init(0, NULL);
        o.force = force;
        o.n_force = n_force;
        o.downstream = down;
        o.n_downstream = n_down;
        o.targets = targets;
        o.n_targets = n_targets;
        o.smoke = c.smoke;
        o.json = c.json;
        o.argv = cli_argv_joined;
        o.self_exe = cli_self_exe;
        mr_run_result res;
        mr_status st = mr_pipeline_run(ws, spec, &o, &res, &err);
        if (st != MR_OK && st != MR_E_FAILED && st != MR_E_INTERRUPTED) mr_log_error(&err);
        rc = cli_status_exit(st);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    mr_free(force);
    mr_free(down);
    mr_free(targets);
    cli_common_free(&c);
    return rc;
}

int cmd_stage(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        fputs("usage: millrace stage run NAME --job FILE\n\n"
              "Runs one stage from a job file written by `millrace run` (internal; the same\n"
              "command can run a stage on another machine that shares the workspace).\n",
              argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (strcmp(argv[1], "run") != 0) return cli_usage_error("stage", "unknown subcommand '%s' (expected 'run')", argv[1]);
    const char *job = NULL, *name = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--job") && i + 1 < argc) job = argv[++i];
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else return cli_usage_error("stage", "unexpected argument '%s'", argv[i]);
    }
    if (!job || !name) return cli_usage_error("stage", "expected: stage run NAME --job FILE");
    mr_error err;
    mr_error_init(&err);
    mr_pool_init(0, NULL);
    mr_status st = mr_stage_worker(job, &err);
    return st == MR_OK ? EXIT_OK : EXIT_FAILED;
}
