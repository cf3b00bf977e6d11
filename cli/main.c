/* millrace: entry point and verb dispatch. */
#include "cli.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_self_exe = "millrace";
const char *cli_argv_joined = "";

typedef struct verb {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} verb;

static const verb verbs[] = {
    {"init", cmd_init, "scaffold millrace.yaml and .millrace/ in the current directory"},
    {"run", cmd_run, "run the pipeline: only stale stages execute, independent ones in parallel"},
    {"status", cmd_status, "which stages are stale and why"},
    {"dag", cmd_dag, "print the stage graph (--dot for Graphviz)"},
    {"params", cmd_params, "print the effective params after overrides"},
    {"runs", cmd_runs, "list recorded runs"},
    {"show", cmd_show, "show one run: stages, resources, params, metrics"},
    {"compare", cmd_compare, "compare two or more runs: params and metrics side by side"},
    {"report", cmd_report, "write the HTML report of a run (any past run, from its artifacts)"},
    {"verify", cmd_verify, "re-hash every artifact; report corrupt or missing ones"},
    {"gc", cmd_gc, "delete artifacts that no kept run or millrace.lock references"},
    {"remote", cmd_remote, "add, list or remove remotes: S3 buckets or shared directories for results"},
    {"push", cmd_push, "upload the results millrace.lock references to a remote"},
    {"pull", cmd_pull, "download results from a remote, verified, and check them out"},
    {"ops", cmd_ops, "list the available ops and their params"},
    {"train", cmd_train, "train a model on a data file (outside a pipeline)"},
    {"model", cmd_model, "inspect, dump or predict with a model file"},
    {"data", cmd_data, "ingest, inspect, head, stats and export datasets"},
    {"features", cmd_features, "an online feature store: its schema, lookups by entity key as of a moment"},
    {"tune", cmd_tune, "show a tune stage's leaderboard and parameter importances"},
    {"bundle", cmd_bundle, "inspect, verify or export (ONNX) a packaged model bundle"},
    {"predict", cmd_predict, "score CSV, Parquet or a dataset with a bundle (streaming)"},
    {"serve", cmd_serve, "serve a bundle over HTTP with micro-batching"},
    {"ui", cmd_ui, "the run browser: runs, curves and comparisons in a local web app"},
    {"bench-serve", cmd_bench_serve, "load-test a bundle's HTTP server (latency percentiles, QPS)"},
    {"stage", cmd_stage, "run one stage from a job file (used by `millrace run`)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: millrace [-V|--version] [-q|-v] [-C DIR] <verb> [options]\n\n"
               "millrace runs a training pipeline (millrace.yaml) as a cached DAG of stages.\n\nverbs:\n");
    for (size_t k = 0; k < sizeof(verbs) / sizeof(verbs[0]); k++) fprintf(f, "  %-11s %s\n", verbs[k].name, verbs[k].summary);
    fprintf(f, "  %-11s %s\n", "help", "this list, or `millrace help VERB` for a verb's options");
    fprintf(f, "  %-11s %s\n", "version", "print the version");
    fprintf(f, "\nStart with `millrace init`, then `millrace run`. Run `millrace help VERB` (or\n"
               "`millrace VERB --help`) for a verb's options.\n"
               "Exit codes: 0 ok; 1 a failure at run time (a stage failed, a file is missing or\n"
               "unreadable, the run was interrupted); 2 a usage or spec error (bad options or\n"
               "arguments, a mistake in millrace.yaml).\n");
}

static const verb *find_verb(const char *name)
{
    for (size_t k = 0; k < sizeof(verbs) / sizeof(verbs[0]); k++)
        if (!strcmp(verbs[k].name, name)) return &verbs[k];
    return NULL;
}

static int unknown_verb(const char *name)
{
    const char *names[sizeof(verbs) / sizeof(verbs[0]) + 2];
    size_t n = 0;
    for (size_t k = 0; k < sizeof(verbs) / sizeof(verbs[0]); k++) names[n++] = verbs[k].name;
    names[n++] = "help";
    names[n++] = "version";
    const char *best = mr_closest(name, names, n);
    fprintf(stderr, "millrace: error: unknown verb '%s'\n", name);
    if (best) fprintf(stderr, "hint: did you mean 'millrace %s'?\n", best);
    else fprintf(stderr, "hint: `millrace help` lists the verbs\n");
    return EXIT_USAGE;
}

/* millrace help [VERB]: the verb list, or the verb's own --help. */
static int cmd_help(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: millrace help [VERB]\n\nLists the verbs, or prints VERB's options (as `millrace VERB --help`).\n");
        return EXIT_OK;
    }
    if (argc < 2) {
        usage(stdout);
        return EXIT_OK;
    }
    const verb *v = find_verb(argv[1]);
    if (!v) return unknown_verb(argv[1]);
    char *args[] = {argv[1], "--help", NULL};
    return v->fn(2, args);
}

int main(int argc, char **argv)
{
    /* Column buffers of a row group are a few MiB and are freed and
     * allocated again for every row group. With glibc's defaults each one
     * is a fresh mmap (or heap growth after a trim), so a scan spent more
     * time zeroing new pages than decoding; keep freed memory for reuse
     * instead (a process-wide policy, hence here and not in the library). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum on 64-bit */
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    int color = isatty(2) && !getenv("NO_COLOR");
    mr_log_set_color(color);
    mr_progress_set_tty(isatty(2));
    cli_self_exe = "/proc/self/exe";
    {
        static char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
            exe[n] = '\0';
            cli_self_exe = exe;
        }
    }
    mr_buf all;
    mr_buf_init(&all);
    for (int k = 0; k < argc; k++) mr_buf_printf(&all, "%s%s", k ? " " : "", argv[k]);
    cli_argv_joined = all.data ? all.data : "";
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            mr_buf_free(&all);
            return EXIT_OK;
        }
        if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
            printf("millrace %s\n", mr_version());
            mr_buf_free(&all);
            return EXIT_OK;
        }
        if (!strcmp(argv[i], "-C") && i + 1 < argc) { /* as in git: run as if started in DIR */
            if (chdir(argv[++i]) != 0) {
                fprintf(stderr, "millrace: error: -C %s: cannot enter directory\n", argv[i]);
                mr_buf_free(&all);
                return EXIT_USAGE;
            }
            continue;
        }
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) mr_log_set_level(MR_LOG_WARN);
        else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) mr_log_set_level(MR_LOG_DEBUG);
        else {
            fprintf(stderr, "millrace: error: unknown option '%s'\n", argv[i]);
            usage(stderr);
            mr_buf_free(&all);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) { /* bare `millrace`: what it is and what to type, as git, cargo or docker do */
        usage(stdout);
        mr_buf_free(&all);
        return EXIT_OK;
    }
    mr_ops_register_builtin();
    int rc;
    const verb *v = find_verb(argv[i]);
    if (v) rc = v->fn(argc - i, argv + i);
    else if (!strcmp(argv[i], "help")) rc = cmd_help(argc - i, argv + i);
    else if (!strcmp(argv[i], "version")) {
        if (i + 1 < argc && (!strcmp(argv[i + 1], "--help") || !strcmp(argv[i + 1], "-h")))
            printf("usage: millrace version\n\nPrints the version (as `millrace --version` or `-V`).\n");
        else
            printf("millrace %s\n", mr_version());
        rc = EXIT_OK;
    } else rc = unknown_verb(argv[i]);
    mr_pool_shutdown();
    mr_buf_free(&all);
    return rc;
}
