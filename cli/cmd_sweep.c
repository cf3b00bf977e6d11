/* millrace run --sweep: the grid of the -S lists, run as separate named runs that share the
 * workspace's cache (a stage two runs need is computed once: the second waits for the stage's
 * lock and finds it cached), at most P at once within the core budget -j. */
#include "cli.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One -S: KEY and its values (one when it has no list). */
typedef struct axis {
    char *key;     /* "KEY" (with a leading + when it adds a param) */
    char **vals;
    size_t n;
} axis;

/* The values of -S KEY=V1,V2,...: split at commas, except a YAML flow value ([...] or {...})
 * or a quoted one, which stays whole. */
static int axis_parse(const char *ov, axis *a)
{
    memset(a, 0, sizeof *a);
    const char *eq = strchr(ov, '=');
    if (!eq || eq == ov) return -1;
    a->key = mr_strndup(ov, (size_t)(eq - ov));
    const char *v = eq + 1;
    int whole = v[0] == '[' || v[0] == '{' || v[0] == '"' || v[0] == '\'' || !strchr(v, ',');
    size_t n = 1;
    char **parts = whole ? NULL : cli_split_list(v, &n);
    a->vals = mr_calloc(n, sizeof *a->vals);
    if (!a->key || !a->vals || (!whole && !parts)) {
        cli_free_list(parts);
        return -2;
    }
    for (size_t i = 0; i < n; i++)
        if (!(a->vals[a->n++] = mr_strdup(whole ? v : parts[i]))) {
            cli_free_list(parts);
            return -2;
        }
    cli_free_list(parts);
    for (size_t i = 0; i < a->n; i++)
        if (!a->vals[i][0]) return -3; /* "a=1,,2" */
    return 0;
}

static void axis_free(axis *a)
{
    mr_free(a->key);
    if (a->vals)
        for (size_t i = 0; i < a->n; i++) mr_free(a->vals[i]);
    mr_free(a->vals);
}

/* The overrides of grid point idx (the last axis varies fastest), into ov[0..n_axes). */
static int point(const axis *ax, size_t n_axes, size_t idx, char **ov)
{
    for (size_t k = n_axes; k-- > 0;) {
        size_t v = idx % ax[k].n;
        idx /= ax[k].n;
        ov[k] = mr_asprintf("%s=%s", ax[k].key, ax[k].vals[v]);
        if (!ov[k]) return -1;
    }
    return 0;
}

typedef struct member {
    mr_proc p;
    char **ov;         /* its overrides */
    char *name, *out_path, *log_path;
    int started, done, exit;
    long long run_id;
} member;

static char *next_arg(char ***argv, size_t *n, const char *s)
{
    char **a = mr_realloc(*argv, (*n + 2) * sizeof(*a));
    if (!a) return NULL;
    *argv = a;
    a[*n] = mr_strdup(s);
    a[*n + 1] = NULL;
    return a[(*n)++];
}

/* The run id a child printed (its --json summary), or 0. */
static long long run_id_of(const char *path)
{
    json_t *j = json_load_file(path, 0, NULL);
    long long id = j ? (long long)json_integer_value(json_object_get(j, "run_id")) : 0;
    json_decref(j);
    return id;
}

int cli_run_sweep(const cli_common *c, const cli_sweep *s)
{
    size_t n_axes = c->n_overrides, n_points = 1;
    axis *ax = mr_calloc(n_axes ? n_axes : 1, sizeof *ax);
    member *m = NULL;
    int rc = ax ? EXIT_OK : EXIT_FAILED, listed = 0;
    for (size_t k = 0; rc == EXIT_OK && k < n_axes; k++) {
        int e = axis_parse(c->overrides[k], &ax[k]);
        if (e == -2) rc = EXIT_FAILED;
        else if (e) rc = cli_usage_error("run", "--sweep: -S %s: expected KEY=VALUE,VALUE,...", c->overrides[k]);
        listed |= ax[k].n > 1;
        if (rc == EXIT_OK && n_points > 100000 / ax[k].n) rc = cli_usage_error("run", "--sweep: over 100,000 runs");
        if (rc == EXIT_OK) n_points *= ax[k].n;
    }
    if (rc == EXIT_OK && !listed)
        rc = cli_usage_error("run", "--sweep needs a list to sweep: -S KEY=A,B (a value with commas in [...] stays one)");
    /* every point's spec loads (a bad value fails here, before any run starts) */
    mr_workspace *ws = NULL;
    if (rc == EXIT_OK) m = mr_calloc(n_points, sizeof *m);
    if (rc == EXIT_OK && !m) rc = EXIT_FAILED;
    for (size_t i = 0; rc == EXIT_OK && i < n_points; i++) {
        m[i].ov = mr_calloc(n_axes, sizeof(char *));
        if (!m[i].ov || point(ax, n_axes, i, m[i].ov)) {
            rc = EXIT_FAILED;
            break;
        }
        cli_common ci = *c;
        ci.overrides = (const char **)m[i].ov;
        mr_spec *spec = NULL;
        mr_workspace *w = NULL;
        rc = cli_load(&ci, &w, &spec);
        mr_spec_free(spec);
        if (rc == EXIT_OK && !ws) ws = w;
        else mr_workspace_close(w);
    }
    /* names, files, the core budget */
    char id[64];
    if (s->name) snprintf(id, sizeof id, "%s", s->name);
    else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        snprintf(id, sizeof id, "sweep-%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
    }
    char *dir = rc == EXIT_OK ? mr_asprintf("%s/sweeps/%s", ws->dot, id) : NULL;
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        if (!dir || mr_fs_mkdirs(dir, &err) != MR_OK) {
            if (dir) mr_log_error(&err);
            rc = EXIT_FAILED;
        }
    }
    for (size_t i = 0; rc == EXIT_OK && i < n_points; i++) {
        m[i].name = mr_asprintf("%s-%zu", id, i + 1);
        m[i].out_path = mr_asprintf("%s/%zu.json", dir, i + 1);
        m[i].log_path = mr_asprintf("%s/%zu.log", dir, i + 1);
        if (!m[i].name || !m[i].out_path || !m[i].log_path) rc = EXIT_FAILED;
        if (rc == EXIT_OK && strlen(m[i].name) > 200) rc = cli_usage_error("run", "--sweep: the name '%s' is too long", id);
    }
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int budget = s->jobs > 0 ? s->jobs : (cores > 0 ? cores : 1);
    size_t par = n_points < (size_t)budget ? n_points : (size_t)budget;
    int each = par ? budget / (int)par : 1;
    if (each < 1) each = 1;
    if (rc == EXIT_OK && !c->json)
        fprintf(stderr, "sweep %s: %zu runs, %zu at a time, %d core%s each\n", cli_safe(id), n_points, par, each,
                each == 1 ? "" : "s");
    /* run them */
    size_t next = 0, running = 0, finished = 0, failed = 0;
    while (rc == EXIT_OK && finished < n_points) {
        while (running < par && next < n_points) {
            member *x = &m[next];
            char **argv = NULL, jbuf[16];
            size_t n = 0;
            snprintf(jbuf, sizeof jbuf, "%d", each);
            int ok = next_arg(&argv, &n, cli_self_exe) && next_arg(&argv, &n, "run") && next_arg(&argv, &n, "--json") &&
                     next_arg(&argv, &n, "-j") && next_arg(&argv, &n, jbuf) && next_arg(&argv, &n, "--name") &&
                     next_arg(&argv, &n, x->name) && next_arg(&argv, &n, "--tag");
            char *tag = mr_asprintf("sweep=%s", id);
            ok = ok && tag && next_arg(&argv, &n, tag);
            mr_free(tag);
            for (size_t k = 0; ok && k < n_axes; k++) ok = next_arg(&argv, &n, "-S") && next_arg(&argv, &n, x->ov[k]);
            if (ok && c->dir) ok = next_arg(&argv, &n, "-C") && next_arg(&argv, &n, c->dir);
            if (ok && c->smoke) ok = next_arg(&argv, &n, "--smoke") != NULL;
            for (size_t k = 0; ok && k < s->n_pass; k++) ok = next_arg(&argv, &n, s->pass[k]) != NULL;
            int fo = ok ? open(x->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
            int fe = ok ? open(x->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
            mr_error err;
            mr_error_init(&err);
            mr_proc_opts po;
            mr_proc_opts_init(&po);
            po.stdin_null = 1;
            po.stdout_fd = fo;
            po.stderr_fd = fe;
            po.parent_death_sig = 15; /* SIGTERM: a killed sweep takes its runs down */
            if (fo < 0 || fe < 0 || mr_proc_spawn_exec(&x->p, &po, cli_self_exe, argv, &err) != MR_OK) {
                if (mr_error_is_set(&err)) mr_log_error(&err);
                rc = EXIT_FAILED;
            }
            if (fo >= 0) close(fo);
            if (fe >= 0) close(fe);
            for (size_t k = 0; k < n; k++) mr_free(argv[k]);
            mr_free(argv);
            if (rc != EXIT_OK) break;
            x->started = 1;
            running++;
            next++;
        }
        int reaped = 0;
        for (size_t i = 0; rc == EXIT_OK && i < n_points; i++) {
            member *x = &m[i];
            if (!x->started || x->done || mr_proc_wait(&x->p, 0) != 1) continue;
            x->done = 1;
            reaped = 1;
            running--;
            finished++;
            x->exit = WIFEXITED(x->p.status) ? WEXITSTATUS(x->p.status) : 1;
            x->run_id = run_id_of(x->out_path);
            failed += x->exit != 0;
            if (!c->json) {
                fprintf(stderr, "  [%zu/%zu] %s%s%s %s", finished, n_points,
                        x->exit ? mr_c_red() : "", x->exit ? "failed   " : "succeeded", mr_c_reset(), x->name);
                if (x->run_id) fprintf(stderr, " (run %lld)", x->run_id);
                for (size_t k = 0; k < n_axes; k++)
                    if (ax[k].n > 1) fprintf(stderr, " %s", cli_safe(x->ov[k]));
                if (x->exit) fprintf(stderr, "  log: %s", x->log_path);
                fputc('\n', stderr);
            }
        }
        if (!reaped && rc == EXIT_OK) usleep(20000);
    }
    if (rc != EXIT_OK) /* stop what started */
        for (size_t i = 0; m && i < n_points; i++)
            if (m[i].started && !m[i].done) {
                mr_proc *pp = &m[i].p;
                mr_proc_terminate(&pp, 1, 5.0);
            }
    if (rc == EXIT_OK && c->json) {
        json_t *j = json_object(), *runs = json_array();
        json_object_set_new(j, "sweep", json_string(id));
        for (size_t i = 0; i < n_points; i++) {
            json_t *r = json_object(), *params = json_object();
            for (size_t k = 0; k < n_axes; k++) {
                const char *eq = strchr(m[i].ov[k], '=');
                char *key = mr_strndup(m[i].ov[k], (size_t)(eq - m[i].ov[k]));
                if (key) json_object_set_new(params, key[0] == '+' ? key + 1 : key, json_string(eq + 1));
                mr_free(key);
            }
            json_object_set_new(r, "name", json_string(m[i].name));
            json_object_set_new(r, "run_id", json_integer(m[i].run_id));
            json_object_set_new(r, "status", json_string(m[i].exit ? "failed" : "succeeded"));
            json_object_set_new(r, "exit", json_integer(m[i].exit));
            json_object_set_new(r, "params", params);
            json_array_append_new(runs, r);
        }
        json_object_set_new(j, "runs", runs);
        char *text = json_dumps(j, JSON_INDENT(2));
        if (text) puts(text);
        free(text);
        json_decref(j);
    } else if (rc == EXIT_OK) {
        fprintf(stderr, "sweep %s: %zu succeeded, %zu failed (millrace runs --sweep %s)\n", cli_safe(id),
                n_points - failed, failed, cli_safe(id));
    }
    if (rc == EXIT_OK && failed) rc = EXIT_FAILED;
    for (size_t i = 0; m && i < n_points; i++) {
        for (size_t k = 0; m[i].ov && k < n_axes; k++) mr_free(m[i].ov[k]);
        mr_free(m[i].ov);
        mr_free(m[i].name);
        mr_free(m[i].out_path);
        mr_free(m[i].log_path);
    }
    mr_free(m);
    for (size_t k = 0; ax && k < n_axes; k++) axis_free(&ax[k]);
    mr_free(ax);
    mr_free(dir);
    mr_workspace_close(ws);
    return rc;
}
