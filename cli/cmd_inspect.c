/* millrace status, dag, params, ops: read-only views of the pipeline. */
#include "cli.h"

#include <string.h>

static int parse_common_only(const char *verb, cli_common *c, int argc, char **argv, int *dot)
{
    for (int i = 1; i < argc; i++) {
        int k = cli_common_opt(c, argc, argv, &i);
        if (k < 0) return cli_usage_error(verb, "option '%s' needs a value", argv[i]);
        if (k) continue;
        if (dot && !strcmp(argv[i], "--dot")) *dot = 1;
        else return cli_usage_error(verb, "unknown argument '%s'", argv[i]);
    }
    return EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace status [-S KEY=VALUE]... [--smoke] [--json] [--remote [NAME]] [-C DIR]\n\n"
              "Shows which stages are stale and why: the param, input, setting or op version\n"
              "that changed since the cached result. Runs nothing. With --remote, asks the remote\n"
              "(NAME, or the default one) for each stale stage's result: those it has show as\n"
              "'remote', and `millrace run --remote` downloads them instead of computing.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    const char *remote = NULL;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("status", "option '%s' needs a value", argv[i]);
        else if (k) continue;
        else if (!strcmp(argv[i], "--remote")) remote = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "";
        else rc = cli_usage_error("status", "unknown argument '%s'", argv[i]);
    }
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK) rc = cli_load(&c, &ws, &spec);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_buf out;
        mr_buf_init(&out);
        int n_stale = 0;
        mr_pool_init(0, NULL);
        mr_pipeline_collect(ws, cli_self_exe, NULL); /* detached Slurm runs: what their jobs finished */
        mr_status st = mr_pipeline_status_remote(ws, spec, c.smoke, c.json, remote, &out, &n_stale, &err);
        cli_print(&out);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = cli_status_exit(st);
        }
        mr_buf_free(&out);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cmd_dag(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace dag [--dot | --json] [-C DIR]\n\n"
              "Prints the stages in execution order with their upstream stages, or a\n"
              "Graphviz graph with --dot (millrace dag --dot | dot -Tsvg > dag.svg).\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    int dot = 0;
    int rc = parse_common_only("dag", &c, argc, argv, &dot);
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK) rc = cli_load(&c, &ws, &spec);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_dag *dag = NULL;
        mr_buf out;
        mr_buf_init(&out);
        if (mr_dag_build(spec, &dag, &err) != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_USAGE;
        } else if (c.json) {
            /* {"stages": [{"name", "op", "upstream": [...]}]} in execution order */
            mr_buf_puts(&out, "{\"stages\":[");
            const size_t *order = mr_dag_order(dag);
            for (size_t k = 0; k < mr_dag_n(dag); k++) {
                const mr_stage_spec *s = &spec->stages[order[k]];
                size_t n_up;
                const size_t *up = mr_dag_upstream(dag, order[k], &n_up);
                mr_buf_printf(&out, "%s{\"name\":", k ? "," : "");
                mr_buf_json_str(&out, s->name);
                mr_buf_puts(&out, ",\"op\":");
                mr_buf_json_str(&out, s->op->name);
                mr_buf_puts(&out, ",\"upstream\":[");
                for (size_t u = 0; u < n_up; u++) {
                    if (u) mr_buf_puts(&out, ",");
                    mr_buf_json_str(&out, spec->stages[up[u]].name);
                }
                mr_buf_puts(&out, "]}");
            }
            mr_buf_puts(&out, "]}\n");
            cli_print(&out);
        } else {
            mr_dag_render(dag, dot, &out);
            cli_print(&out);
        }
        mr_buf_free(&out);
        mr_dag_free(dag);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cmd_params(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace params [-S KEY=VALUE]... [--json] [-C DIR]\n\n"
              "Prints the effective params after -S overrides, as YAML (or JSON).\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    int rc = parse_common_only("params", &c, argc, argv, NULL);
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK) rc = cli_load(&c, &ws, &spec);
    if (rc == EXIT_OK) {
        mr_buf out;
        mr_buf_init(&out);
        if (c.json) {
            mr_value_to_json(spec->params, 0, &out);
            mr_buf_puts(&out, "\n");
        } else {
            mr_yaml_emit(spec->params, &out);
        }
        cli_print(&out);
        mr_buf_free(&out);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cmd_ops(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs("usage: millrace ops\n\n"
              "Lists the available ops with their version and params.\n",
              stdout);
        return EXIT_OK;
    }
    if (argc > 1) return cli_usage_error("ops", "unexpected argument '%s'", argv[1]);
    size_t n = 0;
    const char *const *names = mr_op_names(&n);
    for (size_t k = 0; k < n; k++) {
        const mr_op *op = mr_op_find(names[k]);
        printf("%s (version %d)\n", op->name, op->version);
        for (const mr_param_def *p = op->params; p && p->name; p++)
            printf("  %-15s %s%s\n", p->name, p->required ? "(required) " : "", p->doc);
    }
    return EXIT_OK;
}
