/* millrace model register|alias|list|show|diff: the model registry
 * (docs/registry.md). `model inspect|dump|predict` on model files live in
 * cmd_train.c, which hands the registry's subcommands to cli_model_registry. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char registry_help[] =
    "usage: millrace model register NAME BUNDLE [--json]\n"
    "       millrace model alias NAME ALIAS VERSION | --delete\n"
    "       millrace model list [--json]\n"
    "       millrace model show NAME[/VERSION|@ALIAS] [--json]\n"
    "       millrace model diff NAME A B [--json]\n"
    "       (each also takes -C DIR: the workspace)\n"
    "\n"
    "The model registry of the workspace: register copies a bundle into the store\n"
    "as the next version of NAME (the same bytes again are the version that holds\n"
    "them); alias points ALIAS (production, staging, ...) at a version, moving it;\n"
    "show lists a model's versions, or one version; diff compares two versions'\n"
    "metrics, run params, model and input schema (A and B: a version, latest or an\n"
    "alias). models:/NAME@ALIAS, models:/NAME/VERSION and models:/NAME work wherever\n"
    "a bundle path does: predict, serve, bundle inspect|export-onnx, Python.\n";

int cli_model_is_registry(const char *sub)
{
    static const char *const subs[] = {"register", "alias", "list", "show", "diff"};
    for (size_t k = 0; k < sizeof(subs) / sizeof(subs[0]); k++)
        if (sub && !strcmp(sub, subs[k])) return 1;
    return 0;
}

static void when(double t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M", &tm);
}

static void print_versions(const mr_model_version *v, size_t n, mr_buf *out)
{
    mr_buf_printf(out, "%-8s %-24s %-16s %-8s %-18s %s\n", "VERSION", "ALIASES", "CREATED", "RUN", "STAGE", "BUNDLE");
    for (size_t i = 0; i < n; i++) {
        mr_buf aliases;
        mr_buf_init(&aliases);
        for (size_t k = 0; k < v[i].n_aliases; k++) mr_buf_printf(&aliases, "%s%s", k ? "," : "", v[i].aliases[k]);
        char c[32], run[24];
        when(v[i].created, c, sizeof(c));
        snprintf(run, sizeof(run), v[i].run_id > 0 ? "%lld" : "-", (long long)v[i].run_id);
        mr_buf_printf(out, "%-8lld %-24s %-16s %-8s %-18s %.12s\n", (long long)v[i].version,
                      aliases.len ? aliases.data : "-", c, run, v[i].stage ? cli_safe(v[i].stage) : "-",
                      v[i].bundle_version ? v[i].bundle_version : "");
        mr_buf_free(&aliases);
    }
}

static void print_one(const mr_model_version *v, mr_buf *out)
{
    char c[32];
    when(v->created, c, sizeof(c));
    mr_buf_printf(out, "%s version %lld  (%s%s/%lld)\n", v->name, (long long)v->version, MR_MODEL_URI_PREFIX, v->name,
                  (long long)v->version);
    mr_buf_puts(out, "  aliases:  ");
    for (size_t k = 0; k < v->n_aliases; k++) mr_buf_printf(out, "%s%s", k ? ", " : "", v->aliases[k]);
    mr_buf_printf(out, "%s\n", v->n_aliases ? "" : "-");
    mr_buf_printf(out, "  created:  %s\n", c);
    mr_buf_printf(out, "  bundle:   %s (version %s, name %s)\n", cli_safe(v->path), v->bundle_version,
                  v->bundle_name ? cli_safe(v->bundle_name) : "-");
    if (v->run_id > 0)
        mr_buf_printf(out, "  made by:  run %lld, stage %s\n", (long long)v->run_id, v->stage ? cli_safe(v->stage) : "?");
    else
        mr_buf_puts(out, "  made by:  no recorded run\n");
    mr_buf_printf(out, "  source:   %s\n", v->source ? cli_safe(v->source) : "-");
}

int cli_model_registry(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(registry_help, stdout);
        return EXIT_OK;
    }
    const char *sub = argv[1];
    cli_common c = {0};
    const char *pos[4] = {0};
    size_t n_pos = 0;
    int rc = EXIT_OK, del = 0;
    for (int i = 2; i < argc && rc == EXIT_OK; i++) {
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("model", "option '%s' needs a value", argv[i]);
        else if (k) continue;
        else if (!strcmp(argv[i], "--delete") && !strcmp(sub, "alias")) del = 1;
        else if (argv[i][0] == '-' && argv[i][1]) rc = cli_usage_error("model", "unknown option '%s'", argv[i]);
        else if (n_pos < 4) pos[n_pos++] = argv[i];
        else rc = cli_usage_error("model", "unexpected argument '%s'", argv[i]);
    }
    size_t want = !strcmp(sub, "register") ? 2 : !strcmp(sub, "alias") ? (del ? 2 : 3)
                : !strcmp(sub, "list")     ? 0 : !strcmp(sub, "show") ? 1 : 3;
    if (rc == EXIT_OK && n_pos != want) {
        fputs(registry_help, stderr);
        rc = cli_usage_error("model", "model %s expects %zu argument%s, got %zu", sub, want, want == 1 ? "" : "s",
                             n_pos);
    }
    int64_t version = 0;
    if (rc == EXIT_OK && !strcmp(sub, "alias") && !del) {
        char *end = NULL;
        long long v = strtoll(pos[2], &end, 10);
        if (!end || *end || v < 1) rc = cli_usage_error("model", "VERSION expects a version number, got '%s'", pos[2]);
        version = v;
    }
    mr_error err;
    mr_error_init(&err);
    mr_workspace *ws = NULL;
    if (rc == EXIT_OK && mr_workspace_open(c.dir ? c.dir : ".", 1, 0, &ws, &err) != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_USAGE;
    }
    mr_buf out;
    mr_buf_init(&out);
    mr_status st = MR_OK;
    if (rc != EXIT_OK) goto done;
    if (!strcmp(sub, "register")) {
        int created = 0;
        st = mr_registry_register(ws, pos[0], pos[1], 0, NULL, &version, &created, &err);
        mr_model_version *v = NULL;
        if (st == MR_OK) st = mr_registry_get(ws, pos[0], &v, &err);
        if (st == MR_OK && version != v->version) { /* a later version may exist: show ours */
            mr_model_version_free(v);
            v = NULL;
            char ref[160];
            snprintf(ref, sizeof(ref), "%s/%lld", pos[0], (long long)version);
            st = mr_registry_get(ws, ref, &v, &err);
        }
        if (st == MR_OK && c.json) {
            mr_buf_puts(&out, "{\"created\": ");
            mr_buf_puts(&out, created ? "true" : "false");
            mr_buf_puts(&out, ", \"version\": ");
            mr_model_version_json(v, &out);
            mr_buf_puts(&out, "}\n");
        } else if (st == MR_OK) {
            mr_buf_printf(&out, "%s %s version %lld (%s%s/%lld)", created ? "registered" : "already registered:",
                          cli_safe(pos[0]), (long long)version, MR_MODEL_URI_PREFIX, cli_safe(pos[0]),
                          (long long)version);
            if (v->run_id > 0)
                mr_buf_printf(&out, ", made by run %lld stage %s", (long long)v->run_id, cli_safe(v->stage));
            mr_buf_puts(&out, "\n");
        }
        mr_model_version_free(v);
    } else if (!strcmp(sub, "alias")) {
        st = mr_registry_set_alias(ws, pos[0], pos[1], version, &err);
        if (st == MR_OK && del) mr_buf_printf(&out, "deleted alias %s of %s\n", cli_safe(pos[1]), cli_safe(pos[0]));
        else if (st == MR_OK)
            mr_buf_printf(&out, "%s@%s -> version %lld\n", cli_safe(pos[0]), cli_safe(pos[1]), (long long)version);
    } else if (!strcmp(sub, "list")) {
        mr_model_summary *m = NULL;
        size_t n = 0;
        st = mr_registry_list(ws, &m, &n, &err);
        if (st == MR_OK && c.json) {
            mr_buf_puts(&out, "[");
            for (size_t i = 0; i < n; i++) {
                if (i) mr_buf_puts(&out, ", ");
                mr_model_summary_json(&m[i], &out);
            }
            mr_buf_puts(&out, "]\n");
        } else if (st == MR_OK && n == 0) {
            mr_buf_puts(&out, "no model is registered yet (millrace model register NAME BUNDLE)\n");
        } else if (st == MR_OK) {
            mr_buf_printf(&out, "%-24s %-9s %-7s %-16s %s\n", "NAME", "VERSIONS", "LATEST", "UPDATED", "ALIASES");
            for (size_t i = 0; i < n; i++) {
                char u[32];
                when(m[i].updated, u, sizeof(u));
                mr_buf_printf(&out, "%-24s %-9lld %-7lld %-16s ", cli_safe(m[i].name), (long long)m[i].n_versions,
                              (long long)m[i].latest, u);
                for (size_t k = 0; k < m[i].n_aliases; k++) mr_buf_printf(&out, "%s%s", k ? " " : "", m[i].aliases[k]);
                mr_buf_printf(&out, "%s\n", m[i].n_aliases ? "" : "-");
            }
        }
        mr_model_summaries_free(m, n);
    } else if (!strcmp(sub, "show")) {
        const char *ref = pos[0];
        const char *s = mr_registry_is_uri(ref) ? ref + strlen(MR_MODEL_URI_PREFIX) : ref;
        if (strpbrk(s, "/@")) {
            mr_model_version *v = NULL;
            st = mr_registry_get(ws, ref, &v, &err);
            if (st == MR_OK && c.json) {
                mr_model_version_json(v, &out);
                mr_buf_puts(&out, "\n");
            } else if (st == MR_OK) {
                print_one(v, &out);
            }
            mr_model_version_free(v);
        } else {
            mr_model_version *v = NULL;
            size_t n = 0;
            st = mr_registry_versions(ws, s, &v, &n, &err);
            if (st == MR_OK && c.json) {
                mr_buf_puts(&out, "{\"name\": ");
                mr_buf_json_str(&out, s);
                mr_buf_puts(&out, ", \"versions\": [");
                for (size_t i = 0; i < n; i++) {
                    if (i) mr_buf_puts(&out, ", ");
                    mr_model_version_json(&v[i], &out);
                }
                mr_buf_puts(&out, "]}\n");
            } else if (st == MR_OK) {
                mr_buf_printf(&out, "%s: %zu version%s\n", cli_safe(s), n, n == 1 ? "" : "s");
                print_versions(v, n, &out);
            }
            mr_model_versions_free(v, n);
        }
    } else {
        st = mr_registry_diff(ws, pos[0], pos[1], pos[2], c.json, &out, &err);
    }
    if (st != MR_OK) {
        mr_log_error(&err);
        rc = cli_status_exit(st);
    } else if (out.failed) {
        fprintf(stderr, "error: out of memory\n");
        rc = EXIT_FAILED;
    } else if (c.json) {
        cli_print_json(&out);
    } else {
        cli_print(&out);
    }
done:
    mr_buf_free(&out);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return rc;
}

int cli_resolve_bundle(const char *arg, char **path_out)
{
    *path_out = NULL;
    if (!mr_registry_is_uri(arg)) {
        *path_out = mr_strdup(arg);
        return *path_out ? EXIT_OK : EXIT_FAILED;
    }
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_registry_resolve_uri(arg, NULL, path_out, NULL, &err);
    if (st != MR_OK) {
        mr_log_error(&err);
        return st == MR_E_IO || st == MR_E_NOMEM ? EXIT_FAILED : EXIT_USAGE;
    }
    return EXIT_OK;
}
