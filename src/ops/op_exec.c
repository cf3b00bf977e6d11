/* The exec op: any shell command, written as in dvc.yaml. Its deps and outs
 * are workspace paths; the engine hashes deps and publishes the declared
 * outs. Running the command: /bin/sh -c in the workspace, with the
 * stage's params as MILLRACE_PARAM_<PATH> variables and a JSON file
 * (MILLRACE_PARAMS_FILE), its declared env, and stdout/stderr going to the
 * stage log. A list of commands runs in order and stops at the first that
 * fails. */
#define _GNU_SOURCE
#include "ops_int.h"

#include "millrace/loader.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ---- the definition ------------------------------------------------------ */

/* What the op runs, from its definition (borrowed from it). */
typedef struct exec_settings {
    const char **cmds;   /* the commands, in order (array owned by the caller: mr_free) */
    size_t n_cmds;
    const mr_value *env; /* the env mapping, or NULL */
    const mr_value *loaders; /* the loaders mapping, or NULL */
} exec_settings;

static int blank(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    return !*s;
}

/* `outs`, `metrics` and `deps`: workspace paths, each a non-empty string;
 * what the stage writes cannot be another stage's output. */
static mr_status check_paths(const mr_value *def, const char *key, mr_error *err)
{
    const mr_value *v = mr_value_get(def, key);
    size_t n = v && v->kind == MR_V_SEQ ? v->n : v ? 1 : 0;
    for (size_t k = 0; k < n; k++) {
        const mr_value *it = v->kind == MR_V_SEQ ? v->items[k] : v;
        if (it->kind != MR_V_STR)
            return mr_error_set_at(err, NULL, it->line, it->col, MR_E_SCHEMA, "'%s' lists paths: expected a string, got %s", key,
                               mr_vkind_name(it->kind));
        if (blank(it->str))
            return mr_error_set_at(err, NULL, it->line, it->col, MR_E_SCHEMA, "'%s' holds an empty path", key);
        if (strcmp(key, "deps") && strstr(it->str, "${stages.")) {
            mr_status rc = mr_error_set_at(err, NULL, it->line, it->col, MR_E_SCHEMA,
                                       "'%s' entry \"%s\" names another stage's output: an exec stage's %s are the "
                                       "paths its command writes",
                                       key, it->str, key);
            mr_error_hint(err, "list what the command reads under 'deps:' (deps: [%s]), and the files it writes "
                               "under '%s:'", it->str, key);
            return rc;
        }
    }
    return MR_OK;
}

/* Dep path a is path b or a folder above it (each written with or without "./" and trailing
 * slashes). */
static int covers(const char *a, const char *b)
{
    while (a[0] == '.' && a[1] == '/') a += 2;
    while (b[0] == '.' && b[1] == '/') b += 2;
    size_t la = strlen(a), lb = strlen(b);
    while (la > 1 && a[la - 1] == '/') la--;
    while (lb > 1 && b[lb - 1] == '/') lb--;
    return la <= lb && !memcmp(a, b, la) && (la == lb || b[la] == '/');
}

/* `loaders`: names to loader options (loader.h, mr_loader_spec_parse: the keys of the Python
 * package's Loader) with a `dataset` each, a ${stages.X} output or a path the stage lists under
 * deps (or under a folder it lists), so the dataset is part of the stage's key. The command gets them, as the JSON file
 * MILLRACE_LOADERS_FILE, through millrace.stage_loader(NAME). */
static mr_status check_loaders(const mr_value *def, const mr_value *ls, int at_load, mr_error *err)
{
    if (!ls) return MR_OK;
    if (ls->kind != MR_V_MAP)
        return mr_error_set_at(err, NULL, ls->line, ls->col, MR_E_SCHEMA,
                               "'loaders' maps names to loader options, got %s", mr_vkind_name(ls->kind));
    const mr_value *deps = mr_value_get(def, "deps");
    for (size_t i = 0; i < ls->n; i++) {
        mr_loader_spec sp;
        mr_status rc = mr_loader_spec_parse(ls->items[i], &sp, err);
        if (rc == MR_OK && !sp.dataset)
            rc = mr_error_set_at(err, NULL, ls->key_lines[i], ls->key_cols[i], MR_E_SCHEMA,
                                 "loader '%s' has no dataset", ls->keys[i]);
        if (rc == MR_OK && at_load && !strstr(sp.dataset, "${stages.")) { /* at run: paths */
            size_t n = deps && deps->kind == MR_V_SEQ ? deps->n : deps ? 1 : 0, k = 0;
            while (k < n && !covers((deps->kind == MR_V_SEQ ? deps->items[k] : deps)->str, sp.dataset)) k++;
            if (k == n) {
                const mr_value *d = mr_value_get(ls->items[i], "dataset");
                rc = mr_error_set_at(err, NULL, d->line, d->col, MR_E_SCHEMA,
                                     "loader '%s' reads dataset '%s', which is not among the stage's deps", ls->keys[i],
                                     sp.dataset);
                mr_error_hint(err, "list it (deps: [%s]) so that a change to it re-runs the stage, or write "
                                   "${stages.NAME} for another stage's output", sp.dataset);
            }
        }
        mr_loader_spec_free(&sp);
        if (rc != MR_OK) {
            char key[256];
            snprintf(key, sizeof key, "loaders.%s", ls->keys[i]);
            if (rc != MR_E_NOMEM) mr_error_key(err, key);
            return rc;
        }
    }
    return MR_OK;
}

/* The definition's settings: one or more non-empty commands, an env of
 * variable names to scalars, and the declared paths. What validate checks
 * at load is what run uses (at_load: also that a loader's dataset path is a dep; at run the
 * ${stages.X} are paths too). */
static mr_status exec_settings_of(const mr_value *def, int at_load, exec_settings *x, mr_error *err)
{
    memset(x, 0, sizeof(*x));
    const mr_value *cmd = mr_value_get(def, "cmd");
    mr_status rc = MR_OK;
    if (!cmd) return MR_ERR(err, MR_E_SCHEMA, "exec stage without a cmd");
    if (cmd->kind != MR_V_STR && cmd->kind != MR_V_SEQ)
        return mr_error_set_at(err, NULL, cmd->line, cmd->col, MR_E_SCHEMA, "'cmd' must be a command or a list of commands, got %s",
                           mr_vkind_name(cmd->kind));
    if (cmd->kind == MR_V_SEQ && cmd->n == 0) {
        rc = mr_error_set_at(err, NULL, cmd->line, cmd->col, MR_E_SCHEMA, "'cmd' is an empty list: the stage would run nothing");
        mr_error_hint(err, "give the command to run, e.g. cmd: python train.py");
        return rc;
    }
    size_t n = cmd->kind == MR_V_SEQ ? cmd->n : 1;
    for (size_t k = 0; k < n; k++) {
        const mr_value *it = cmd->kind == MR_V_SEQ ? cmd->items[k] : cmd;
        if (it->kind != MR_V_STR)
            return mr_error_set_at(err, NULL, it->line, it->col, MR_E_SCHEMA, "'cmd' item %zu must be a command (a string), got %s",
                               k + 1, mr_vkind_name(it->kind));
        if (blank(it->str)) {
            if (cmd->kind == MR_V_SEQ)
                rc = mr_error_set_at(err, NULL, it->line, it->col, MR_E_SCHEMA, "'cmd' item %zu is an empty command", k + 1);
            else
                rc = mr_error_set_at(err, NULL, it->line, it->col, MR_E_SCHEMA, "'cmd' is an empty command: the stage would run nothing");
            mr_error_hint(err, "give the command to run, e.g. cmd: python train.py");
            return rc;
        }
    }
    static const char *const path_keys[] = {"outs", "metrics", "deps"};
    for (size_t q = 0; q < 3 && rc == MR_OK; q++) rc = check_paths(def, path_keys[q], err);
    x->env = mr_value_get(def, "env");
    x->loaders = mr_value_get(def, "loaders");
    if (rc == MR_OK) rc = mr__check_env(x->env, "env", err);
    if (rc == MR_OK) rc = check_loaders(def, x->loaders, at_load, err);
    if (rc != MR_OK) return rc;
    x->cmds = mr_calloc(n, sizeof(*x->cmds));
    if (!x->cmds) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) x->cmds[k] = (cmd->kind == MR_V_SEQ ? cmd->items[k] : cmd)->str;
    x->n_cmds = n;
    return MR_OK;
}

static mr_status validate_exec(const mr_op_validate_ctx *vc, mr_error *err)
{
    exec_settings x;
    mr_status rc = exec_settings_of(vc->def, 1, &x, err);
    mr_free(x.cmds);
    return rc;
}

/* ---- running ------------------------------------------------------------- */

typedef struct command {
    mr_op_ctx *ctx;
    const exec_settings *x;
    const char *cmd;
    const char *params_file;
    const char *log_file;
    const char *loaders_file; /* NULL: no loaders */
} command;

/* In the forked child: the stage's environment, then /bin/sh -c CMD. */
static int command_child(void *arg)
{
    const command *x = arg;
    mr_op_ctx *ctx = x->ctx;
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)ctx->run_id);
    setenv("MILLRACE_RUN_ID", buf, 1);
    if (ctx->mem_bytes) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ctx->mem_bytes);
        setenv("MILLRACE_MEM_BYTES", buf, 1);
    }
    mr__command_env(ctx, ctx->threads, x->params_file, ctx->params, x->x->env);
    setenv("MILLRACE_LOG_FILE", x->log_file, 1); /* millrace.log_metric / log_params append here */
    if (x->loaders_file) setenv("MILLRACE_LOADERS_FILE", x->loaders_file, 1); /* millrace.stage_loader */
    else unsetenv("MILLRACE_LOADERS_FILE");
    execl("/bin/sh", "sh", "-c", x->cmd, (char *)NULL);
    dprintf(2, "cannot run /bin/sh: %s\n", strerror(errno));
    return 127;
}

/* The command runs in the worker's process group: a stopped stage takes it
 * (and whatever it started) down with the worker. */
static mr_status run_one(mr_op_ctx *ctx, const exec_settings *xs, const char *cmd, const char *params_file,
                         const char *log_file, const char *loaders_file, mr_error *err)
{
    dprintf(ctx->log_fd, "$ %s\n", cmd);
    command x = {ctx, xs, cmd, params_file, log_file, loaders_file};
    mr_proc p;
    mr_status rc = mr_proc_spawn(&p, NULL, command_child, &x, err);
    if (rc != MR_OK) return rc;
    if (mr_proc_wait(&p, 1) != 1) return MR_ERR_SYS(err, MR_E_IO, errno, "waiting for the command failed");
    if (mr_proc_ok(&p)) return MR_OK;
    char why[96];
    mr_proc_describe(&p, why, sizeof(why));
    return MR_ERR(err, MR_E_FAILED, "command %s: %s", why, cmd);
}

/* The records the commands logged (one JSON object per line: {"metric": name, "value": v,
 * "step": n} or {"param": name, "value": v}) become the stage's metrics: a param's numeric value
 * as the metric params.NAME, any other value in the stage log. A line that is not such a
 * record fails the stage, naming the line. */
static mr_status record_logged(mr_op_ctx *ctx, const char *path, mr_error *err)
{
    if (!mr_fs_exists(path)) return MR_OK;
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, 0, &text, &len, err);
    if (rc != MR_OK) return rc;
    size_t n_metrics = 0, line = 0;
    for (char *p = text, *end = text + len; rc == MR_OK && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        json_t *j = NULL;
        if (l) rc = mr_json_parse(p, l, 0, &j, "the logged metrics", err);
        if (rc == MR_OK && j) {
            const char *m = json_string_value(json_object_get(j, "metric"));
            const char *pn = json_string_value(json_object_get(j, "param"));
            json_t *v = json_object_get(j, "value"), *st = json_object_get(j, "step");
            char name[512];
            if (m && json_is_number(v) && (!st || json_is_integer(st))) {
                rc = mr_op_metric(ctx, m, st ? (int64_t)json_integer_value(st) : 0, json_number_value(v));
                if (rc == MR_OK) n_metrics++;
                else rc = MR_ERR(err, MR_E_INVALID_ARG, "logged metric '%s' (line %zu) is not a finite number "
                                                        "with a name", m, line);
            } else if (pn && json_is_number(v) && snprintf(name, sizeof name, "params.%s", pn) < (int)sizeof name) {
                rc = mr_op_metric(ctx, name, 0, json_number_value(v));
                if (rc != MR_OK) rc = MR_ERR(err, MR_E_INVALID_ARG, "logged param '%s' (line %zu) is not finite", pn, line);
            } else if (pn) {
                char *vs = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                dprintf(ctx->log_fd, "param %s = %s\n", pn, vs ? vs : "?");
                free(vs);
            } else {
                rc = MR_ERR(err, MR_E_INVALID_ARG, "logged record %zu is neither a metric nor a param", line);
            }
            json_decref(j);
        }
        p += l + 1;
    }
    if (rc != MR_E_NOMEM && rc != MR_OK) mr_error_at(err, path, (long)line, 0);
    if (rc == MR_OK && n_metrics) dprintf(ctx->log_fd, "recorded %zu logged metric values\n", n_metrics);
    mr_free(text);
    return rc;
}

static mr_status exec_run(mr_op_ctx *ctx, mr_error *err)
{
    mr_buf pj;
    mr_buf_init(&pj);
    char *params_file = mr_path_join(ctx->tmp_dir, "params.json");
    char *log_file = mr_path_join(ctx->tmp_dir, "logged.jsonl");
    char *loaders_file = NULL;
    exec_settings x;
    mr_status rc = exec_settings_of(ctx->def, 0, &x, err);
    if (rc != MR_OK) goto done;
    if (!params_file || !log_file || mr_value_to_json(ctx->params, 0, &pj) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    rc = mr_fs_write_atomic(params_file, pj.data, pj.len, err);
    if (rc != MR_OK) goto done;
    if (x.loaders) { /* ${stages.X} are paths by now (the worker resolved them) */
        mr_buf_free(&pj);
        mr_buf_init(&pj);
        loaders_file = mr_path_join(ctx->tmp_dir, "loaders.json");
        if (!loaders_file || mr_value_to_json(x.loaders, 0, &pj) != MR_OK) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        rc = mr_fs_write_atomic(loaders_file, pj.data, pj.len, err);
        if (rc != MR_OK) goto done;
    }
    for (size_t k = 0; k < x.n_cmds && rc == MR_OK; k++)
        rc = run_one(ctx, &x, x.cmds[k], params_file, log_file, loaders_file, err);
    if (rc == MR_OK) rc = record_logged(ctx, log_file, err);
done:
    mr_free(loaders_file);
    mr_free(log_file);
    mr_free(x.cmds);
    mr_free(params_file);
    mr_buf_free(&pj);
    return rc;
}

static const mr_param_def exec_params[] = {
    {"cmd", MR_PT_STR | MR_PT_STRSEQ, 1, "shell command (or list of commands run in order), run in the workspace"},
    {"deps", MR_PT_STRSEQ, 0, "files or directories the command reads; hashed by content"},
    {"outs", MR_PT_STRSEQ, 0, "files or directories the command writes; stored as artifacts"},
    {"metrics", MR_PT_STRSEQ, 0, "JSON (or JSON lines) files the command writes; numeric leaves are recorded"},
    {"params", MR_PT_STRSEQ, 0, "param paths the command reads (besides those interpolated in cmd)"},
    {"env", MR_PT_MAP, 0, "extra environment variables (part of the cache key)"},
    {"loaders", MR_PT_MAP, 0, "named loader options for millrace.stage_loader(NAME) (part of the cache key)"},
    {"always_changed", MR_PT_BOOL, 0, "never take this stage from the cache"},
    {NULL, 0, 0, NULL},
};

const mr_op mr_op_exec = {
    .name = "exec",
    .version = 1, /* MILLRACE_LOG_FILE changes no command's result: the version stays */
    .params = exec_params,
    .outputs = NULL,
    .run = exec_run,
    .validate = validate_exec,
    .flags = MR_OP_WORKSPACE_OUTPUTS | MR_OP_DECLARED_PARAMS,
};
