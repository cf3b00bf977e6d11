/* millrace remote add|list|remove, millrace push, millrace pull: remotes
 * shared by many machines (include/millrace/remote.h, docs/remote.md). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char remote_usage[] =
    "usage: millrace remote add NAME URL [--endpoint URL] [--region R] [--default] [-C DIR]\n"
    "       millrace remote list [--json] [-C DIR]\n"
    "       millrace remote remove NAME [-C DIR]\n\n"
    "Remotes live in millrace.yaml under remotes: (versioned with the pipeline); URL is\n"
    "s3://BUCKET[/PREFIX] or file:///PATH (a shared filesystem). --endpoint names an\n"
    "S3-compatible service (default: AWS). Credentials never go there: they come from the\n"
    "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or\n"
    "~/.aws/credentials and ~/.aws/config (AWS_PROFILE), as every S3 tool finds them.\n";

int cmd_remote(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        fputs(remote_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    const char *sub = argv[1], *pos[2] = {NULL, NULL}, *endpoint = NULL, *region = NULL;
    int dflt = 0, npos = 0, rc = EXIT_OK;
    cli_common c = {0};
    for (int i = 2; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("remote", "option '%s' needs a value", argv[i]);
        else if (k) continue;
        else if (!strcmp(argv[i], "--endpoint") || !strcmp(argv[i], "--region")) {
            if (i + 1 >= argc) rc = cli_usage_error("remote", "%s needs a value", argv[i]);
            else if (!strcmp(argv[i], "--endpoint")) endpoint = argv[++i];
            else region = argv[++i];
        } else if (!strcmp(argv[i], "--default")) dflt = 1;
        else if (argv[i][0] == '-') rc = cli_usage_error("remote", "unknown option '%s'", argv[i]);
        else if (npos < 2) pos[npos++] = argv[i];
        else rc = cli_usage_error("remote", "unexpected argument '%s'", argv[i]);
    }
    int want = !strcmp(sub, "add") ? 2 : !strcmp(sub, "remove") ? 1 : !strcmp(sub, "list") ? 0 : -1;
    if (rc == EXIT_OK && want < 0) rc = cli_usage_error("remote", "unknown subcommand '%s' (add, list, remove)", sub);
    if (rc == EXIT_OK && npos != want)
        rc = cli_usage_error("remote", "%s takes %s", sub, want == 2 ? "NAME URL" : want == 1 ? "NAME" : "no argument");
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK) rc = cli_load(&c, &ws, &spec);
    mr_error err;
    mr_error_init(&err);
    if (rc == EXIT_OK) {
        mr_status st = MR_OK;
        mr_buf out;
        mr_buf_init(&out);
        if (want == 2) {
            st = mr_remote_add(ws->spec_path, pos[0], pos[1], endpoint, region, dflt, &err);
            if (st == MR_OK) printf("added remote '%s' (%s)%s to %s\n", pos[0], pos[1], dflt ? " as the default" : "",
                                    ws->spec_path);
        } else if (want == 1) {
            st = mr_remote_remove(ws->spec_path, pos[0], &err);
            if (st == MR_OK) printf("removed remote '%s' from %s\n", pos[0], ws->spec_path);
        } else {
            st = mr_remote_list(spec, c.json, &out, &err);
            if (st == MR_OK) cli_print(&out);
        }
        mr_buf_free(&out);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = st == MR_E_INVALID_ARG || st == MR_E_STATE || st == MR_E_NOT_FOUND ? EXIT_USAGE : EXIT_FAILED;
        }
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

static int transfer(int argc, char **argv, int push)
{
    const char *verb = push ? "push" : "pull";
    if (cli_wants_help(argc, argv)) {
        printf("usage: millrace %s [STAGE...] [--remote NAME] [-j N] [-C DIR]\n\n", verb);
        fputs(push ? "Uploads the results millrace.lock records (every stage's, or those named): the\n"
                     "objects the remote lacks (one listing finds them), directory manifests after their\n"
                     "files, then one entry per stage mapping its key to its outputs, so an interrupted\n"
                     "push never leaves a partial result visible. -j: parallel transfers (default 8).\n"
                   : "Downloads the results millrace.lock records from the remote: each object verified\n"
                     "against its id before it enters the local store (a corrupt one is refused, named),\n"
                     "the stage entries recorded in the stage cache, the outputs checked out. A `millrace\n"
                     "run` afterwards finds those stages cached.\n",
              stdout);
        return EXIT_OK;
    }
    cli_common c = {0};
    mr_transfer_opts o;
    mr_transfer_opts_init(&o);
    const char **stages = calloc((size_t)argc, sizeof(*stages));
    size_t ns = 0;
    int rc = stages ? EXIT_OK : EXIT_FAILED;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error(verb, "option '%s' needs a value", argv[i]);
        else if (k) continue;
        else if (!strcmp(argv[i], "--remote")) {
            if (i + 1 >= argc) rc = cli_usage_error(verb, "--remote needs a name");
            else o.remote = argv[++i];
        } else if (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--jobs")) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !end || *end || v < 1 || v > 256) rc = cli_usage_error(verb, "-j expects 1 to 256");
            o.jobs = (int)v;
            i++;
        } else if (argv[i][0] == '-') rc = cli_usage_error(verb, "unknown option '%s'", argv[i]);
        else stages[ns++] = argv[i];
    }
    if (ns) {
        o.stages = stages;
        o.n_stages = ns;
    }
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK) rc = cli_load(&c, &ws, &spec);
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_buf out;
        mr_buf_init(&out);
        mr_transfer_stats st;
        mr_status s = push ? mr_pipeline_push(ws, spec, &o, &st, &out, &err) : mr_pipeline_pull(ws, spec, &o, &st, &out, &err);
        if (s != MR_OK) {
            mr_log_error(&err);
            rc = s == MR_E_NOT_FOUND && !st.objects ? EXIT_USAGE : EXIT_FAILED;
        } else {
            cli_print(&out);
            if (!push && st.missing) rc = EXIT_FAILED; /* asked for results the remote does not have */
        }
        mr_buf_free(&out);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    free(stages);
    return rc;
}

int cmd_push(int argc, char **argv) { return transfer(argc, argv, 1); }
int cmd_pull(int argc, char **argv) { return transfer(argc, argv, 0); }
