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
    "      --name NAME       name the run (runs and show print it; show NAME finds it)\n"
    "      --tag KEY[=VALUE] tag the run (repeatable; runs --tag KEY[=VALUE] filters)\n"
    "      --remote NAME     use the remote NAME of millrace.yaml as a cache: a stale stage\n"
    "                        whose key it holds is downloaded, not computed; a computed one\n"
    "                        is uploaded (its `cache: pull|push|both`, default both)\n"
    "      --no-remote       do not use the remote whose `cache:` is set\n"
    "      --sweep           run the grid of the -S lists (-S KEY=A,B,C; a value in [...] stays\n"
    "                        one) as separate runs NAME-1, NAME-2, ... tagged sweep=NAME (NAME:\n"
    "                        --name, or sweep-DATE-TIME-PID), sharing the cache, at most -j at a\n"
    "                        time within the -j core budget; millrace runs --sweep NAME lists them\n"
    "      --executor slurm  submit every stale stage as a Slurm job (sbatch, with afterok on its\n"
    "                        upstream jobs) in this workspace, which the nodes share; follow them\n"
    "                        with one sacct query per interval (docs/cluster.md)\n"
    "      --partition P     the Slurm partition (a stage's resources.partition wins)\n"
    "      --account A       the Slurm account\n"
    "      --slurm-opt OPT   one more sbatch option, as one argument (--slurm-opt=--qos=long)\n"
    "      --poll S          seconds between status queries (default 15; never under\n"
    "                        MILLRACE_SLURM_MIN_POLL, default 1)\n"
    "      --retries N       resubmissions of a job that ended NODE_FAIL, PREEMPTED or BOOT_FAIL\n"
    "                        (default 2)\n"
    "      --detach          submit the jobs and return; `status` and `runs` record their\n"
    "                        progress, `run --attach RUN` follows them\n"
    "      --attach RUN      follow the Slurm jobs of RUN (detached, or its runner was killed)\n"
    "  -v, --verbose         print each stage's log when it finishes\n"
    "      --json            print a JSON summary on stdout\n"
    "  -C DIR                run in DIR instead of the current directory\n"
    "\n"
    "exit: 0 every stage succeeded, 1 a stage failed or the run was interrupted,\n"
    "      2 usage or spec error\n";

/* ---- what a run prints (the library reports events; the CLI prints) ---- */
typedef struct printer {
    int quiet;   /* --json or -q: no stage lines */
    int verbose; /* print each stage's log when it finishes */
    mr_progress *progress;
} printer;

/* The last max_lines lines of a stage log, indented. */
static void print_log_tail(const char *path, int max_lines)
{
    char *text = NULL;
    size_t len = 0;
    if (!path || mr_fs_read_file(path, (size_t)64 << 20, &text, &len, NULL) != MR_OK) return;
    int lines = 0;
    size_t start = len;
    while (start > 0) {
        if (text[start - 1] == '\n' && start != len && ++lines >= max_lines) break;
        start--;
    }
    if (len) {
        fprintf(stderr, "    --- %s (last lines) ---\n", path);
        char *line = text + start;
        while (*line) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            fprintf(stderr, "    | %s\n", cli_safe(line)); /* a command's output may hold escapes */
            if (!nl) break;
            line = nl + 1;
        }
    }
    mr_free(text);
}

static void on_event(void *ctx, const mr_run_event *ev)
{
    printer *pr = ctx;
    if (ev->kind == MR_RUN_TICK) {
        if (!pr->progress) pr->progress = mr_progress_begin("stages", (uint64_t)ev->n_selected, NULL);
        mr_progress_update(pr->progress, (uint64_t)ev->n_done, ev->message);
        return;
    }
    if (ev->kind == MR_RUN_STAGE_WARNING) { /* warnings show even with -q */
        mr_progress_clear();
        fprintf(stderr, "%smillrace: warning:%s stage '%s': %s\n", mr_c_yellow(), mr_c_reset(), cli_safe(ev->stage),
                cli_safe(ev->message)); /* messages quote data */
        return;
    }
    if (ev->kind == MR_RUN_STAGE_NOTE && !pr->quiet) {
        mr_progress_clear();
        fprintf(stderr, "  note    %s: %s\n", cli_safe(ev->stage), cli_safe(ev->message));
        return;
    }
    if (pr->quiet) {
        if (ev->kind == MR_RUN_STAGE_FAILED && pr->verbose) print_log_tail(ev->log_path, 1000);
        return;
    }
    mr_progress_clear();
    switch (ev->kind) {
    case MR_RUN_STAGE_STARTED: fprintf(stderr, "%s  running%s %s\n", mr_c_bold(), mr_c_reset(), ev->stage); break;
    case MR_RUN_STAGE_CACHED:
        if (ev->wall_s > 0) fprintf(stderr, "%s  cached %s %s (%.2fs)\n", mr_c_dim(), mr_c_reset(), ev->stage, ev->wall_s);
        else fprintf(stderr, "%s  cached %s %s\n", mr_c_dim(), mr_c_reset(), ev->stage);
        break;
    case MR_RUN_STAGE_DONE:
        fprintf(stderr, "%s  done   %s %s (%.2fs)\n", mr_c_green(), mr_c_reset(), ev->stage, ev->wall_s);
        if (pr->verbose) print_log_tail(ev->log_path, 1000);
        break;
    case MR_RUN_STAGE_FAILED:
        fprintf(stderr, "%s  failed %s %s: %s\n", mr_c_red(), mr_c_reset(), cli_safe(ev->stage), cli_safe(ev->message));
        if (ev->hint) fprintf(stderr, "    hint: %s\n", cli_safe(ev->hint));
        print_log_tail(ev->log_path, pr->verbose ? 1000 : 10);
        break;
    case MR_RUN_STAGE_SKIPPED:
        fprintf(stderr, "%s  skipped%s %s (an upstream stage failed)\n", mr_c_yellow(), mr_c_reset(), ev->stage);
        break;
    default: break;
    }
}

static void print_json_summary(const mr_run_result *res)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_buf_printf(&b, "{\n  \"run_id\": ");
    if (res->run_id) mr_buf_printf(&b, "%lld", (long long)res->run_id);
    else mr_buf_puts(&b, "null");
    mr_buf_printf(&b, ",\n  \"status\": \"%s\",\n", res->interrupted ? "interrupted" : res->detached ? "submitted" : res->n_failed ? "failed" : "ok");
    mr_buf_printf(&b, "  \"executed\": %d,\n  \"cached\": %d,\n  \"failed\": %d,\n  \"skipped\": %d,\n  \"would_run\": %d,\n",
                  res->n_executed, res->n_cached, res->n_failed, res->n_skipped, res->n_would_run);
    mr_buf_puts(&b, "  \"stages\": [");
    int first = 1;
    for (size_t k = 0; k < res->n_stages; k++) {
        const mr_run_stage_result *s = &res->stages[k];
        if (!s->status) continue;
        mr_buf_printf(&b, "%s\n    {\"stage\": ", first ? "" : ",");
        mr_buf_json_str(&b, s->stage);
        mr_buf_puts(&b, ", \"status\": ");
        mr_buf_json_str(&b, !strcmp(s->status, "up to date") ? "cached" : s->status);
        mr_buf_puts(&b, ", \"key\": ");
        mr_buf_json_str(&b, s->key);
        if (s->error) {
            mr_buf_puts(&b, ", \"error\": ");
            mr_buf_json_str(&b, s->error);
        }
        if (s->why) {
            mr_buf_puts(&b, ", \"why\": ");
            mr_buf_json_str(&b, s->why);
        }
        mr_buf_puts(&b, "}");
        first = 0;
    }
    mr_buf_puts(&b, first ? "]\n}\n" : "\n  ]\n}\n");
    cli_print(&b);
    mr_buf_free(&b);
}

static void print_summary(const mr_run_result *res, int dry)
{
    if (dry) {
        for (size_t k = 0; k < res->n_stages; k++) {
            const mr_run_stage_result *s = &res->stages[k];
            if (!s->status) continue;
            if (!strcmp(s->status, "would run")) printf("would run  %s (%s)\n", s->stage, s->why);
            else if (!strcmp(s->status, "up to date")) printf("up to date %s\n", s->stage);
        }
        return;
    }
    if (mr_log_get_level() > MR_LOG_INFO) return;
    if (res->detached) {
        fprintf(stderr, "run %lld: %d stage%s submitted to Slurm, %d cached, %d failed (detached: `millrace run --attach %lld` follows it)\n",
                (long long)res->run_id, res->n_submitted, res->n_submitted == 1 ? "" : "s", res->n_cached, res->n_failed,
                (long long)res->run_id);
        return;
    }
    fprintf(stderr, "run %lld: %d executed, %d cached, %d failed, %d skipped%s\n", (long long)res->run_id, res->n_executed,
            res->n_cached, res->n_failed, res->n_skipped, res->interrupted ? " (interrupted)" : "");
    for (size_t k = 0; k < res->n_stages; k++)
        if (res->stages[k].status && !strcmp(res->stages[k].status, "failed"))
            fprintf(stderr, "  %sfailed%s  %s: %s\n", mr_c_red(), mr_c_reset(), cli_safe(res->stages[k].stage),
                    cli_safe(res->stages[k].error));
    for (size_t k = 0; k < res->n_stages; k++)
        if (res->stages[k].status && !strcmp(res->stages[k].status, "skipped"))
            fprintf(stderr, "  skipped %s\n", res->stages[k].stage);
}

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
    printer pr = {0};
    const char **force = NULL, **down = NULL, **targets = NULL, **tags = NULL, **pass = NULL;
    const char **slurm_opts = NULL;
    size_t n_force = 0, n_down = 0, n_targets = 0, n_tags = 0, n_pass = 0, n_slurm_opts = 0;
    int rc = EXIT_OK, sweep = 0;
    long long attach = 0;
    o.max_retries = -1;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        int k = cli_common_opt(&c, argc, argv, &i);
        if (k < 0) rc = cli_usage_error("run", "option '%s' needs a value", a);
        if (k != 0) continue;
        if (!strcmp(a, "--sweep")) {
            sweep = 1;
            continue;
        }
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
            pr.verbose = 1;
        } else if (!strcmp(a, "--remote")) {
            if (i + 1 >= argc) rc = cli_usage_error("run", "--remote needs a remote's name");
            else o.remote = argv[++i];
        } else if (!strcmp(a, "--no-remote")) {
            o.no_remote = 1;
        } else if (!strcmp(a, "--executor") || !strncmp(a, "--executor=", 11)) {
            const char *v = a[10] == '=' ? a + 11 : i + 1 < argc ? argv[++i] : NULL;
            if (!v || (strcmp(v, "slurm") && strcmp(v, "local")))
                rc = cli_usage_error("run", "--executor expects 'local' or 'slurm'");
            else o.slurm = !strcmp(v, "slurm");
        } else if (!strcmp(a, "--partition") || !strcmp(a, "--account")) {
            if (i + 1 >= argc) rc = cli_usage_error("run", "%s needs a value", a);
            else if (a[2] == 'p') o.partition = argv[++i];
            else o.account = argv[++i];
        } else if (!strcmp(a, "--slurm-opt") || !strncmp(a, "--slurm-opt=", 12)) {
            const char *v = a[11] == '=' ? a + 12 : i + 1 < argc ? argv[++i] : NULL;
            if (!v || v[0] != '-') rc = cli_usage_error("run", "--slurm-opt needs an sbatch option (--slurm-opt=--qos=long)");
            else push(&slurm_opts, &n_slurm_opts, v);
        } else if (!strcmp(a, "--poll") || !strcmp(a, "--retries") || !strcmp(a, "--attach")) {
            char *end = NULL;
            double v = i + 1 < argc ? strtod(argv[i + 1], &end) : -1;
            int whole = a[2] != 'p';
            if (i + 1 >= argc || !end || *end || !(v >= (a[2] == 'a' ? 1 : 0)) || v > 1e9 || (whole && v != (double)(long long)v))
                rc = cli_usage_error("run", "%s expects %s", a,
                                     a[2] == 'p' ? "seconds > 0" : a[2] == 'r' ? "a whole number >= 0" : "a run id");
            else if (a[2] == 'p') o.poll_s = v;
            else if (a[2] == 'r') o.max_retries = (int)v;
            else attach = (long long)v;
            i++;
        } else if (!strcmp(a, "--detach")) {
            o.detach = 1;
        } else if (!strcmp(a, "--name") || !strcmp(a, "--tag")) {
            mr_error e;
            mr_error_init(&e);
            if (i + 1 >= argc)
                rc = cli_usage_error("run", "%s needs a value", a);
            else if (a[2] == 'n' && mr_run_name_check(argv[i + 1], &e) != MR_OK)
                rc = cli_usage_error("run", "%s", e.msg);
            else if (a[2] == 't' && mr_run_tag_check(argv[i + 1], &e) != MR_OK)
                rc = cli_usage_error("run", "%s", e.msg);
            else if (a[2] == 'n')
                o.name = argv[++i];
            else
                push(&tags, &n_tags, argv[++i]);
        } else if (a[0] == '-') {
            rc = cli_usage_error("run", "unknown option '%s'", a);
        } else {
            push(&targets, &n_targets, a);
        }
    }
    if (rc == EXIT_OK && !o.slurm && (o.detach || o.partition || o.account || n_slurm_opts || o.poll_s > 0 || o.max_retries >= 0))
        rc = cli_usage_error("run", "--detach, --partition, --account, --slurm-opt, --poll and --retries need --executor slurm");
    if (rc == EXIT_OK && (sweep || o.dry) && o.detach) rc = cli_usage_error("run", "--detach does not go with --sweep or --dry");
    if (rc == EXIT_OK && attach && (sweep || o.dry || o.detach || n_targets))
        rc = cli_usage_error("run", "--attach RUN follows that run: no stages, --sweep, --dry or --detach");
    if (rc == EXIT_OK && sweep && o.dry)
        rc = cli_usage_error("run", "--sweep runs its grid; see one point with --dry -S KEY=VALUE");
    if (rc == EXIT_OK && sweep) { /* each run gets what was parsed, but its own -S, -j, --name */
        for (size_t k = 0; k < n_force; k++) {
            push(&pass, &n_pass, "-f");
            push(&pass, &n_pass, force[k]);
        }
        for (size_t k = 0; k < n_down; k++) {
            push(&pass, &n_pass, "-d");
            push(&pass, &n_pass, down[k]);
        }
        for (size_t k = 0; k < n_tags; k++) {
            push(&pass, &n_pass, "--tag");
            push(&pass, &n_pass, tags[k]);
        }
        if (o.force_all) push(&pass, &n_pass, "--force-all");
        if (o.remote) { /* the grid's points share the remote cache too */
            push(&pass, &n_pass, "--remote");
            push(&pass, &n_pass, o.remote);
        }
        if (o.no_remote) push(&pass, &n_pass, "--no-remote");
        if (o.slurm) { /* each point of the grid a Slurm run of its own */
            push(&pass, &n_pass, "--executor");
            push(&pass, &n_pass, "slurm");
            if (o.partition) push(&pass, &n_pass, "--partition"), push(&pass, &n_pass, o.partition);
            if (o.account) push(&pass, &n_pass, "--account"), push(&pass, &n_pass, o.account);
            for (size_t k = 0; k < n_slurm_opts; k++) push(&pass, &n_pass, "--slurm-opt"), push(&pass, &n_pass, slurm_opts[k]);
        }
        if (o.keep_going) push(&pass, &n_pass, "-k");
        if (pr.verbose) push(&pass, &n_pass, "-v");
        for (size_t k = 0; k < n_targets; k++) push(&pass, &n_pass, targets[k]);
        cli_sweep s = {o.name, o.jobs, pass, n_pass};
        rc = cli_run_sweep(&c, &s);
    }
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    if (rc == EXIT_OK && attach) {
        rc = cli_open_workspace(&c, &ws);
        if (rc == EXIT_OK) {
            mr_error err;
            mr_error_init(&err);
            o.self_exe = cli_self_exe;
            pr.quiet = c.json || mr_log_get_level() > MR_LOG_INFO;
            o.on_event = on_event;
            o.event_ctx = &pr;
            o.ticks = mr_progress_tty() && !c.json;
            mr_run_result res;
            mr_status st = mr_pipeline_attach(ws, attach, &o, &res, &err);
            mr_progress_clear();
            mr_free(pr.progress);
            if (st == MR_OK || st == MR_E_FAILED || st == MR_E_INTERRUPTED) {
                if (c.json) print_json_summary(&res);
                else print_summary(&res, 0);
            } else {
                mr_log_error(&err);
            }
            mr_run_result_free(&res);
            rc = cli_status_exit(st);
        }
    }
    if (rc == EXIT_OK && !sweep && !attach) rc = cli_load(&c, &ws, &spec);
    if (rc == EXIT_OK && !sweep && !attach) {
        mr_error err;
        mr_error_init(&err);
        mr_pool_init(0, NULL);
        o.force = force;
        o.n_force = n_force;
        o.downstream = down;
        o.n_downstream = n_down;
        o.targets = targets;
        o.n_targets = n_targets;
        o.tags = tags;
        o.n_tags = n_tags;
        o.smoke = c.smoke;
        o.argv = cli_argv_joined;
        o.self_exe = cli_self_exe;
        o.slurm_opts = slurm_opts;
        o.n_slurm_opts = n_slurm_opts;
        pr.quiet = c.json || mr_log_get_level() > MR_LOG_INFO;
        o.on_event = on_event;
        o.event_ctx = &pr;
        o.ticks = mr_progress_tty() && !o.dry && !c.json; /* a live line on a terminal */
        mr_run_result res;
        mr_status st = mr_pipeline_run(ws, spec, &o, &res, &err);
        mr_progress_clear();
        mr_free(pr.progress);
        if (st == MR_OK || st == MR_E_FAILED || st == MR_E_INTERRUPTED) {
            if (c.json) print_json_summary(&res);
            else print_summary(&res, o.dry);
        } else {
            mr_log_error(&err);
        }
        mr_run_result_free(&res);
        rc = cli_status_exit(st);
    }
    mr_spec_free(spec);
    mr_workspace_close(ws);
    mr_free(force);
    mr_free(down);
    mr_free(targets);
    mr_free(tags);
    mr_free(pass);
    mr_free(slurm_opts);
    cli_common_free(&c);
    return rc;
}

/* millrace stage show --job FILE: the decoded job, for people and tests. */
static int stage_show(const char *job_path, int json)
{
    mr_job job;
    mr_error err;
    mr_error_init(&err);
    if (mr_job_read(job_path, &job, &err) != MR_OK) {
        mr_log_error(&err);
        mr_job_deinit(&job);
        return err.code == MR_E_IO || err.code == MR_E_NOT_FOUND ? EXIT_FAILED : EXIT_USAGE;
    }
    mr_buf b;
    mr_buf_init(&b);
    if (json) {
        mr_buf_puts(&b, "{\"stage\": ");
        mr_buf_json_str(&b, job.stage);
        mr_buf_puts(&b, ", \"op\": ");
        mr_buf_json_str(&b, job.op);
        mr_buf_printf(&b, ", \"op_version\": %d, \"key\": ", job.op_version);
        mr_buf_json_str(&b, job.key);
        mr_buf_printf(&b, ", \"run_id\": %lld, \"threads\": %d, \"smoke\": %s, \"force\": %s, \"spec_path\": ",
                      (long long)job.run_id, job.threads, job.smoke ? "true" : "false", job.force ? "true" : "false");
        mr_buf_json_str(&b, job.spec_path);
        mr_buf_puts(&b, ", \"def\": ");
        mr_value_to_json(job.def, 0, &b);
        mr_buf_puts(&b, ", \"params\": ");
        mr_value_to_json(job.params, 0, &b);
        mr_buf_puts(&b, ", \"inputs\": [");
        for (size_t k = 0; k < job.n_inputs; k++) {
            mr_buf_puts(&b, k ? ", {\"name\": " : "{\"name\": ");
            mr_buf_json_str(&b, job.inputs[k].name);
            mr_buf_puts(&b, ", \"path\": ");
            mr_buf_json_str(&b, job.inputs[k].path);
            mr_buf_puts(&b, ", \"id\": ");
            mr_buf_json_str(&b, job.inputs[k].id);
            mr_buf_puts(&b, "}");
        }
        mr_buf_puts(&b, "], \"outputs\": [");
        for (size_t k = 0; k < job.n_outputs; k++) {
            mr_buf_puts(&b, k ? ", {\"name\": " : "{\"name\": ");
            mr_buf_json_str(&b, job.outputs[k].name);
            mr_buf_puts(&b, ", \"path\": ");
            mr_buf_json_str(&b, job.outputs[k].path);
            mr_buf_puts(&b, "}");
        }
        mr_buf_puts(&b, "]}\n");
    } else {
        mr_buf_printf(&b, "stage %s (op %s, version %d), run %lld, key %s\n", job.stage, job.op, job.op_version,
                      (long long)job.run_id, job.key);
        for (size_t k = 0; k < job.n_inputs; k++)
            mr_buf_printf(&b, "  in  %-28s %s %s\n", job.inputs[k].name, job.inputs[k].path, job.inputs[k].id);
        for (size_t k = 0; k < job.n_outputs; k++) mr_buf_printf(&b, "  out %-28s %s\n", job.outputs[k].name, job.outputs[k].path);
        mr_buf_printf(&b, "def (positions in %s):\n", job.spec_path);
        mr_yaml_emit(job.def, &b);
        mr_buf_puts(&b, "params:\n");
        mr_yaml_emit(job.params, &b);
    }
    cli_print(&b);
    mr_buf_free(&b);
    mr_job_deinit(&job);
    return EXIT_OK;
}

int cmd_stage(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        fputs("usage: millrace stage run NAME --job FILE\n"
              "       millrace stage run NAME --cluster RUNDIR [--task K]\n"
              "       millrace stage show --job FILE [--json]\n\n"
              "run: runs one stage from a job file written by `millrace run` (internal; the same\n"
              "command can run a stage on another machine that shares the workspace).\n"
              "show: prints a job file decoded: the stage, its inputs and outputs, its definition\n"
              "and params (job files are in .millrace/logs/run-N/; docs/formats.md).\n",
              argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    int show = !strcmp(argv[1], "show");
    if (!show && strcmp(argv[1], "run") != 0)
        return cli_usage_error("stage", "unknown subcommand '%s' (expected 'run' or 'show')", argv[1]);
    const char *job = NULL, *name = NULL, *cluster = NULL;
    int json = 0, task = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--job") && i + 1 < argc) job = argv[++i];
        else if (!show && !strcmp(argv[i], "--cluster") && i + 1 < argc) cluster = argv[++i];
        else if (!show && !strcmp(argv[i], "--task") && i + 1 < argc) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 0 || v > 10000000) return cli_usage_error("stage", "--task expects a task index >= 0");
            task = (int)v;
        }
        else if (show && !strcmp(argv[i], "--json")) json = 1;
        else if (!show && argv[i][0] != '-' && !name) name = argv[i];
        else return cli_usage_error("stage", "unexpected argument '%s'", argv[i]);
    }
    if (show) return job ? stage_show(job, json) : cli_usage_error("stage", "expected: stage show --job FILE");
    if (!(job || cluster) || !name || (job && cluster) || (task >= 0 && !cluster))
        return cli_usage_error("stage", "expected: stage run NAME --job FILE, or stage run NAME --cluster RUNDIR [--task K]");
    mr_error err;
    mr_error_init(&err);
    mr_pool_init(0, NULL);
    mr_status st = cluster ? mr_stage_cluster(cluster, name, task, &err) : mr_stage_worker(job, &err);
    if (st != MR_OK) { /* into the stage log; the runner reads the result file */
        mr_error_stage(&err, name);
        mr_log_error(&err);
    }
    return st == MR_OK ? EXIT_OK : EXIT_FAILED;
}
