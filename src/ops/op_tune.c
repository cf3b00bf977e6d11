/* The tune op: a hyperparameter search over a declared space. Trials run
 * as child processes of the stage worker (a crash in one is recorded and
 * the study continues), at most `parallel` at once, each with its share of
 * the stage's cores. The objective is the built-in trainer (forked after
 * the data is loaded once, pruned from its per-round validation curve) or
 * a command (`exec:`) that appends per-step metrics to a JSON-lines file,
 * stopped with SIGTERM, then SIGKILL after a grace period, when pruned.
 *
 * Reproducibility: trial t is suggested, and pruned, from the trials
 * 0..t-parallel only, and starts once those have all finished; so the
 * sequence of trials and every pruning decision are a function of the seed
 * and the results, never of timing. Each trial's result is cached under its
 * training key (stage cache "<stage>#trial"), so a re-run, a resumed or an
 * extended study replays finished trials instead of running them. */
#define _GNU_SOURCE
#include "millrace/io.h"
#include "millrace/model.h"
#include "millrace/op.h"
#include "millrace/tune.h"
#include "ops_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define TUNE_OP_VERSION 2 /* 2: trials.json and study.json hold no timings or cache facts */
#define MAX_TRIALS 100000

static const mr_param_def tune_params[] = {
    {"space", MR_PT_MAP, 1, "the search space: {name: {uniform|loguniform|int|choice: ..., when: {...}}}"},
    {"train", MR_PT_STR | MR_PT_PATH, 0, "training data (built-in train objective)"},
    {"valid", MR_PT_STR | MR_PT_PATH, 0, "validation data: the curve trials are scored and pruned on"},
    {"label", MR_PT_STR, 0, "the column to predict"},
    {"model", MR_PT_STR, 0, "gbdt (default) or linear"},
    {"params", MR_PT_MAP, 0, "fixed training parameters; a trial's parameters override them"},
    {"features", MR_PT_STRSEQ, 0, "feature columns (default: all but label and exclude)"},
    {"exclude", MR_PT_STRSEQ, 0, "columns never used as features"},
    {"categorical", MR_PT_STRSEQ, 0, "integer columns split as categories"},
    {"metric", MR_PT_STR, 0, "the validation metric to optimise (default: the first of params.metric)"},
    {"direction", MR_PT_STR, 0, "maximize or minimize (default: maximize for auc/average_precision, else minimize)"},
    {"sampler", MR_PT_STR | MR_PT_MAP, 0, "tpe (default) or random, or {type: tpe, n_startup_trials, gamma, n_ei_candidates}"},
    {"pruner", MR_PT_STR | MR_PT_MAP, 0, "asha, median or none (default), or {type: asha, min_resource, reduction_factor}"},
    {"n_trials", MR_PT_INT, 0, "trials in the study (default 20; 2 in smoke mode)"},
    {"parallel", MR_PT_INT, 0, "trials at once (default: the stage's cpus)"},
    {"seed", MR_PT_INT, 0, "sampler seed (default 0)"},
    {"timeout_s", MR_PT_FLOAT, 0, "stop starting trials after this many seconds; running ones are stopped"},
    {"exec", MR_PT_MAP, 0, "objective command: {cmd, metrics, metric, env, grace_s}"},
    {"deps", MR_PT_STRSEQ | MR_PT_PATH, 0, "files the exec objective reads (part of each trial's key)"},
    {NULL, 0, 0, NULL},
};

/* ---- one trial ----------------------------------------------------------- */
enum { T_PENDING, T_RUNNING, T_DONE };

typedef struct trial {
    int state;
    double *x;              /* point in the space */
    mr_value *params;       /* the sampled params {name: value} */
    char key[MR_HASH_HEX_LEN + 1];
    char *key_doc;
    size_t n_info;          /* trials it was suggested and pruned from */
    mr_trial_status status;
    double value;
    double *curve;
    size_t n_curve, cap_curve;
    int cached;
    int bins_cached;   /* the trial loaded its binned matrices from the shared cache */
    double started, wall_s;
    double done_s;          /* when it finished, seconds since the op started */
    char *error;
    mr_proc proc;           /* the trial process, while running */
    char *result_path;      /* train: the child's result file */
    char *metrics_path;     /* exec: the per-step metrics file */
    long metrics_off;       /* exec: bytes read so far */
    int stopping;           /* exec: pruned or timed out, SIGTERM sent */
    double term_at;
    int timed_out;
    uint64_t oom0;          /* mr_alloc_failures_here() when it started */
} trial;

typedef struct study {
    mr_op_ctx *ctx;
    mr_tune_space *space;
    mr_tune_sampler_opts so;
    mr_tune_pruner_opts po;
    const char *metric;
    int maximize;
    int n_trials, parallel, threads_per_trial;
    double timeout_s, grace_s;
    /* objective */
    int is_exec;
    const mr_value *exec;   /* the exec: mapping */
    mr_table *train, *valid;
    mr_value *fixed;        /* fixed training params (a map; owned) */
    trial *t;
    mr_tune_trial *hist;    /* views of finished trials, in trial order */
    double t0;              /* mr_now() when the op started */
} study;

/* Live exec trial process groups, for the SIGTERM handler (the worker kills
 * its own process group; exec trials lead their own groups). */
#define MAX_GROUPS 256
static volatile pid_t g_groups[MAX_GROUPS];
static struct sigaction g_old_term;

static void on_term(int sig)
{
    for (int k = 0; k < MAX_GROUPS; k++)
        if (g_groups[k] > 0) kill(-g_groups[k], SIGKILL);
    if (g_old_term.sa_handler != SIG_DFL && g_old_term.sa_handler != SIG_IGN && g_old_term.sa_handler)
        g_old_term.sa_handler(sig);
    _exit(143);
}

static void group_set(pid_t pid, int add)
{
    for (int k = 0; k < MAX_GROUPS; k++) {
        if (add && g_groups[k] == 0) {
            g_groups[k] = pid;
            return;
        }
        if (!add && g_groups[k] == pid) {
            g_groups[k] = 0;
            return;
        }
    }
}

static int push_curve(trial *tr, double v)
{
    if (tr->n_curve == tr->cap_curve) {
        size_t nc = tr->cap_curve ? tr->cap_curve * 2 : 64;
        double *n = mr_realloc(tr->curve, nc * sizeof(double));
        if (!n) return -1;
        tr->curve = n;
        tr->cap_curve = nc;
    }
    tr->curve[tr->n_curve++] = v;
    return 0;
}

static double best_of(const double *c, size_t n, int maximize)
{
    double b = NAN;
    for (size_t r = 0; r < n; r++)
        if (!isnan(c[r]) && (isnan(b) || (maximize ? c[r] > b : c[r] < b))) b = c[r];
    return b;
}

static const char *status_name(mr_trial_status s)
{
    return s == MR_TRIAL_COMPLETE ? "complete" : s == MR_TRIAL_PRUNED ? "pruned" : "failed";
}

/* ---- the definition ------------------------------------------------------ */

/* The study's settings from the definition, before the stage's cores and
 * smoke mode apply. Strings are borrowed from the definition. */
typedef struct tune_cfg {
    mr_tune_space *space;   /* owned */
    mr_tune_sampler_opts so;
    mr_tune_pruner_opts po;
    const char *metric;
    int maximize;
    int n_trials;           /* as declared (smoke mode caps it) */
    int parallel;           /* as declared; 0 = the stage's cores */
    double timeout_s, grace_s;
    int is_exec;
    const mr_value *exec;   /* the exec: mapping, or NULL */
    const char *kind;       /* the built-in objective's model kind */
    mr_value *fixed;        /* owned: the fixed training params, and the metric for the built-in objective */
} tune_cfg;

static void tune_cfg_free(tune_cfg *c)
{
    mr_tune_space_free(c->space);
    mr_value_free(c->fixed);
    c->space = NULL;
    c->fixed = NULL;
}

/* An optional integer option of m (a sampler or pruner mapping, or the
 * stage), at least lo; dflt when absent. */
static mr_status int_opt(const mr_value *m, const char *what, const char *key, int lo, int dflt, int *out, mr_error *err)
{
    const mr_value *v = mr_value_get(m, key);
    *out = dflt;
    if (!v) return MR_OK;
    if (v->kind != MR_V_INT)
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s%s%s: expected an integer, got %s", what, what[0] ? "." : "",
                           key, mr_vkind_name(v->kind));
    if (v->u.i < lo || v->u.i > INT32_MAX)
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s%s%s must be >= %d, got %lld", what, what[0] ? "." : "", key,
                           lo, (long long)v->u.i);
    *out = (int)v->u.i;
    return MR_OK;
}

/* An optional number of m in [lo, hi] (lo excluded when lo_open); dflt when absent. */
static mr_status num_opt(const mr_value *m, const char *what, const char *key, double lo, int lo_open, double hi,
                         double dflt, double *out, mr_error *err)
{
    const mr_value *v = mr_value_get(m, key);
    *out = dflt;
    if (!v) return MR_OK;
    if (v->kind != MR_V_INT && v->kind != MR_V_FLOAT)
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s%s%s: expected a number, got %s", what, what[0] ? "." : "",
                           key, mr_vkind_name(v->kind));
    double x = v->kind == MR_V_INT ? (double)v->u.i : v->u.f;
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        if (isinf(hi))
            return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s%s%s must be %s %g, got %g", what, what[0] ? "." : "",
                               key, lo_open ? ">" : ">=", lo, x);
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s%s%s must be in %s%g, %g], got %g", what, what[0] ? "." : "",
                           key, lo_open ? "(" : "[", lo, hi, x);
    }
    *out = x;
    return MR_OK;
}

/* The type of a sampler or pruner: the string, or the mapping's `type`. */
static mr_status type_of(const mr_value *v, const char *what, const char *const *types, size_t n, const char **out,
                         mr_error *err)
{
    *out = NULL;
    if (!v) return MR_OK;
    const mr_value *t = v->kind == MR_V_MAP ? mr_value_get(v, "type") : v;
    if (!t) return MR_OK;
    if (t->kind != MR_V_STR)
        return mr_error_set_at(err, NULL, t->line, t->col, MR_E_SCHEMA, "%s: type must be a name, got %s", what, mr_vkind_name(t->kind));
    for (size_t k = 0; k < n; k++)
        if (!strcmp(t->str, types[k])) {
            *out = t->str;
            return MR_OK;
        }
    mr_status rc = mr_error_set_at(err, NULL, t->line, t->col, MR_E_SCHEMA, "%s: unknown type '%s'", what, t->str);
    mr__hint_choices(err, t->str, types, n);
    return rc;
}

static mr_status sampler_settings(const mr_value *def, mr_tune_sampler_opts *so, mr_error *err)
{
    static const char *const types[] = {"tpe", "random"};
    static const char *const keys[] = {"type", "n_startup_trials", "gamma", "n_ei_candidates"};
    mr_tune_sampler_opts_init(so);
    const mr_value *vs = mr_value_get(def, "sampler");
    const char *st;
    mr_status rc = type_of(vs, "sampler", types, 2, &st, err);
    if (rc != MR_OK) return rc;
    if (st && !strcmp(st, "random")) so->kind = MR_SAMPLER_RANDOM;
    if (!vs || vs->kind != MR_V_MAP) return MR_OK;
    if ((rc = mr__check_keys(vs, "sampler", keys, 4, err)) != MR_OK) return rc;
    if ((rc = int_opt(vs, "sampler", "n_startup_trials", 0, so->n_startup_trials, &so->n_startup_trials, err)) != MR_OK) return rc;
    if ((rc = num_opt(vs, "sampler", "gamma", 0, 1, 1, so->gamma, &so->gamma, err)) != MR_OK) return rc;
    return int_opt(vs, "sampler", "n_ei_candidates", 1, so->n_ei_candidates, &so->n_ei_candidates, err);
}

static mr_status pruner_settings(const mr_value *def, mr_tune_pruner_opts *po, mr_error *err)
{
    static const char *const types[] = {"none", "asha", "successive_halving", "median"};
    static const char *const keys[] = {"type", "min_resource", "reduction_factor", "n_startup_trials", "n_warmup_steps",
                                       "interval_steps"};
    mr_tune_pruner_opts_init(po);
    const mr_value *vp = mr_value_get(def, "pruner");
    const char *pt;
    mr_status rc = type_of(vp, "pruner", types, 4, &pt, err);
    if (rc != MR_OK) return rc;
    if (!pt || !strcmp(pt, "none")) po->kind = MR_PRUNER_NONE;
    else if (!strcmp(pt, "asha") || !strcmp(pt, "successive_halving")) po->kind = MR_PRUNER_ASHA;
    else po->kind = MR_PRUNER_MEDIAN;
    if (!vp || vp->kind != MR_V_MAP) return MR_OK;
    if ((rc = mr__check_keys(vp, "pruner", keys, 6, err)) != MR_OK) return rc;
    if ((rc = int_opt(vp, "pruner", "min_resource", 1, po->min_resource, &po->min_resource, err)) != MR_OK) return rc;
    if ((rc = int_opt(vp, "pruner", "reduction_factor", 2, po->reduction_factor, &po->reduction_factor, err)) != MR_OK) return rc;
    if ((rc = int_opt(vp, "pruner", "n_startup_trials", 0, po->n_startup_trials, &po->n_startup_trials, err)) != MR_OK) return rc;
    if ((rc = int_opt(vp, "pruner", "n_warmup_steps", 0, po->n_warmup_steps, &po->n_warmup_steps, err)) != MR_OK) return rc;
    return int_opt(vp, "pruner", "interval_steps", 1, po->interval_steps, &po->interval_steps, err);
}

/* The exec objective: {cmd, metrics, metric, env, grace_s}. */
static mr_status exec_objective(const mr_value *exec, double *grace_s, mr_error *err)
{
    static const char *const keys[] = {"cmd", "metrics", "metric", "env", "grace_s"};
    mr_status rc = mr__check_keys(exec, "exec", keys, 5, err);
    if (rc != MR_OK) return rc;
    const mr_value *cmd = mr_value_get(exec, "cmd");
    if (!cmd || cmd->kind != MR_V_STR || !cmd->str[0]) {
        rc = mr_error_set_at(err, NULL, cmd ? cmd->line : exec->line, cmd ? cmd->col : exec->col, MR_E_SCHEMA,
                         "exec: needs cmd (a command string)%s%s", cmd ? ", got " : "",
                         cmd ? (cmd->kind == MR_V_STR ? "an empty string" : mr_vkind_name(cmd->kind)) : "");
        mr_error_hint(err, "exec: {cmd: python objective.py, metric: score}");
        return rc;
    }
    static const char *const names[] = {"metrics", "metric"};
    for (int q = 0; q < 2; q++) {
        const mr_value *v = mr_value_get(exec, names[q]);
        if (v && (v->kind != MR_V_STR || !v->str[0]))
            return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "exec.%s: expected a %s, got %s", names[q],
                               q ? "metric name" : "file name", v->kind == MR_V_STR ? "an empty string" : mr_vkind_name(v->kind));
    }
    if ((rc = mr__check_env(mr_value_get(exec, "env"), "exec.env", err)) != MR_OK) return rc;
    return num_opt(exec, "exec", "grace_s", 0, 0, INFINITY, 5.0, grace_s, err);
}

/* The metric the study optimises: `metric`, else exec.metric, else the
 * first of params.metric. The node it came from goes to *at. */
static const char *study_metric(const mr_value *def, const mr_value *exec, const mr_value **at)
{
    const mr_value *vm = mr_value_get(def, "metric"), *fixed = mr_value_get(def, "params");
    *at = NULL;
    if (vm && vm->kind == MR_V_STR) return (*at = vm)->str;
    const mr_value *em = mr_value_get(exec, "metric");
    if (em && em->kind == MR_V_STR) return (*at = em)->str;
    const mr_value *pm = mr_value_get(fixed, "metric");
    if (pm && pm->kind == MR_V_STR) return (*at = pm)->str;
    if (pm && pm->kind == MR_V_SEQ && pm->n && pm->items[0]->kind == MR_V_STR) return (*at = pm->items[0])->str;
    return NULL;
}

/* The fixed params (entries read from another stage's outputs left out:
 * they are known when the stage runs), with the study's metric for the
 * built-in objective when they name none. NULL on OOM. */
static mr_value *fixed_params(const mr_value *def, const tune_cfg *c, const mr_value *metric_at)
{
    const mr_value *params = mr_value_get(def, "params");
    mr_value *fixed = mr_value_new(MR_V_MAP);
    for (size_t k = 0; fixed && params && params->kind == MR_V_MAP && k < params->n; k++) {
        if (mr_op_value_deferred(params->items[k])) continue;
        if (mr_value_map_set(fixed, params->keys[k], mr_value_clone(params->items[k])) != MR_OK) {
            mr_value_free(fixed);
            return NULL;
        }
        fixed->key_lines[fixed->n - 1] = params->key_lines[k];
        fixed->key_cols[fixed->n - 1] = params->key_cols[k];
    }
    if (fixed && !c->is_exec && !mr_value_get(fixed, "metric")) {
        mr_value *m = mr_value_new_str(c->metric);
        if (m && metric_at) {
            m->line = metric_at->line;
            m->col = metric_at->col;
        }
        if (mr_value_map_set(fixed, "metric", m) != MR_OK) {
            mr_value_free(fixed);
            return NULL;
        }
    }
    return fixed;
}

/* A value a trial may take for space parameter j (spec: its distribution):
 * the middle of a range, or option k of a choice; positioned at the range
 * (or the option). NULL when k is past the options, or on OOM. */
static mr_value *trial_value(const mr_value *spec, size_t k)
{
    static const char *const kinds[] = {"uniform", "loguniform", "int", "choice"};
    for (int q = 0; q < 4; q++) {
        const mr_value *range = mr_value_get(spec, kinds[q]);
        if (!range || range->kind != MR_V_SEQ) continue;
        if (q == 3) return k < range->n ? mr_value_clone(range->items[k]) : NULL;
        if (k > 0 || range->n != 2) return NULL;
        double lo = range->items[0]->kind == MR_V_INT ? (double)range->items[0]->u.i : range->items[0]->u.f;
        double hi = range->items[1]->kind == MR_V_INT ? (double)range->items[1]->u.i : range->items[1]->u.f;
        const mr_value *vlog = mr_value_get(spec, "log");
        int log = q == 1 || (vlog && vlog->kind == MR_V_BOOL && vlog->u.b);
        double mid = log ? sqrt(lo * hi) : (lo + hi) / 2;
        mr_value *v = q == 2 ? mr_value_new_int((int64_t)floor(mid + 0.5)) : mr_value_new_float(mid);
        if (v) {
            v->line = range->line;
            v->col = range->col;
        }
        return v;
    }
    return NULL;
}

/* m with space parameter j set to v (taken), at the space's key position. */
static mr_status set_trial_param(mr_value *m, const mr_value *space, size_t j, mr_value *v)
{
    if (mr_value_map_set(m, space->keys[j], v) != MR_OK) return MR_E_NOMEM;
    for (size_t q = 0; q < m->n; q++)
        if (!strcmp(m->keys[q], space->keys[j])) {
            m->key_lines[q] = space->key_lines[j];
            m->key_cols[q] = space->key_cols[j];
        }
    return MR_OK;
}

/* mr_model_check_params on params m; an error about a space parameter is
 * named after it ("space.num_leafs: ..."), at the value (or the space key). */
static mr_status check_trial(const tune_cfg *c, const mr_value *space, const mr_value *m, mr_error *err)
{
    mr_error e;
    mr_error_init(&e);
    mr_status rc = mr_model_check_params(c->kind, m, &e);
    if (rc == MR_OK) return MR_OK;
    if (rc == MR_E_NOMEM) return MR_ERR(err, rc, "out of memory");
    for (size_t j = 0; j < space->n; j++)
        if (!strcmp(space->keys[j], e.key)) {
            rc = mr_error_set_at(err, NULL, e.line ? e.line : space->key_lines[j], e.line ? e.col : space->key_cols[j], MR_E_SCHEMA,
                             "space.%s: %s", space->keys[j], e.msg);
            if (e.hint[0]) mr_error_hint(err, "%s", e.hint);
            return rc;
        }
    rc = mr_error_set_at(err, NULL, e.line, e.col, MR_E_SCHEMA, "%s", e.msg);
    if (e.hint[0]) mr_error_hint(err, "%s", e.hint);
    return rc;
}

/* The built-in objective trains with the fixed params and a trial's on top:
 * each space parameter must be a training parameter, and its values ones
 * the trainer takes together with the fixed params, so that no trial fails
 * on a name or a type. Checked with every parameter at its first value (the
 * middle of a range, a choice's first option), then each other option of
 * each choice in turn. */
static mr_status check_space_params(const tune_cfg *c, const mr_value *space, mr_error *err)
{
    mr_value *base = mr_value_clone(c->fixed);
    mr_status rc = base ? MR_OK : MR_E_NOMEM;
    for (size_t j = 0; rc == MR_OK && j < space->n; j++) {
        mr_value *v = trial_value(space->items[j], 0);
        rc = v ? set_trial_param(base, space, j, v) : MR_E_NOMEM;
    }
    if (rc != MR_OK) {
        mr_value_free(base);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    rc = check_trial(c, space, base, err);
    for (size_t j = 0; rc == MR_OK && j < space->n; j++) {
        for (size_t k = 1; rc == MR_OK; k++) {
            mr_value *v = trial_value(space->items[j], k);
            if (!v) break;
            mr_value *m = mr_value_clone(base);
            if (!m || set_trial_param(m, space, j, v) != MR_OK) {
                if (!m) mr_value_free(v);
                mr_value_free(m);
                mr_value_free(base);
                return MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
            rc = check_trial(c, space, m, err);
            mr_value_free(m);
        }
    }
    mr_value_free(base);
    return rc;
}

/* The definition's settings: search space, sampler, pruner, direction,
 * budget, the objective (built-in: train, valid, label, model kind and the
 * fixed params the trainer takes, with every space parameter a training
 * parameter; exec: its mapping) and the metric. What validate checks at
 * load is what run uses. c owns what it allocates (tune_cfg_free). */
static mr_status tune_settings(const mr_value *def, tune_cfg *c, mr_error *err)
{
    memset(c, 0, sizeof(*c));
    const mr_value *space = mr_value_get(def, "space"), *v;
    mr_status rc = MR_OK;
    int space_known = !mr__value_has_deferred(space);
    if (space_known) rc = mr_tune_space_parse(space, NULL, &c->space, err);
    if (rc == MR_OK) rc = sampler_settings(def, &c->so, err);
    if (rc == MR_OK) rc = pruner_settings(def, &c->po, err);
    if ((v = mr_value_get(def, "seed")) && v->kind == MR_V_INT) c->so.seed = (uint64_t)(int)v->u.i; /* as it always was */
    if (rc == MR_OK) rc = int_opt(def, "", "n_trials", 1, 20, &c->n_trials, err);
    if (rc == MR_OK && c->n_trials > MAX_TRIALS) {
        v = mr_value_get(def, "n_trials");
        rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "n_trials must be 1..%d, got %d", MAX_TRIALS, c->n_trials);
    }
    if (rc == MR_OK) rc = int_opt(def, "", "parallel", 1, 0, &c->parallel, err);
    if (rc == MR_OK) rc = num_opt(def, "", "timeout_s", 0, 0, INFINITY, 0, &c->timeout_s, err);
    if (rc != MR_OK) return rc;
    c->exec = mr_value_get(def, "exec");
    c->is_exec = c->exec != NULL;
    if (c->is_exec && (rc = exec_objective(c->exec, &c->grace_s, err)) != MR_OK) return rc;
    const mr_value *metric_at = NULL;
    c->metric = study_metric(def, c->exec, &metric_at);
    if (!c->metric) {
        rc = MR_ERR(err, MR_E_SCHEMA, "say which validation metric the study optimises");
        mr_error_hint(err, "add `metric: auc` (or set params.metric)");
        return rc;
    }
    const mr_value *vd = mr_value_get(def, "direction");
    if (vd && vd->kind == MR_V_STR) {
        static const char *const dirs[] = {"maximize", "minimize"};
        if (!strcmp(vd->str, "maximize")) c->maximize = 1;
        else if (!strcmp(vd->str, "minimize")) c->maximize = 0;
        else {
            rc = mr_error_set_at(err, NULL, vd->line, vd->col, MR_E_SCHEMA, "direction: expected maximize or minimize, got '%s'", vd->str);
            if (mr_closest(vd->str, dirs, 2)) mr_error_hint(err, "did you mean '%s'?", mr_closest(vd->str, dirs, 2));
            return rc;
        }
    } else {
        c->maximize = !strcmp(c->metric, "auc") || !strcmp(c->metric, "average_precision") ||
                      !strcmp(c->metric, "accuracy") || !strcmp(c->metric, "map") || !strcmp(c->metric, "ndcg");
    }
    c->so.maximize = c->po.maximize = c->maximize;
    const mr_value *vmodel = mr_value_get(def, "model");
    c->kind = vmodel && vmodel->kind == MR_V_STR ? vmodel->str : "gbdt";
    if (!c->is_exec) {
        static const char *const kinds[] = {"gbdt", "linear"};
        const mr_value *vt = mr_value_get(def, "train"), *vv = mr_value_get(def, "valid"), *vl = mr_value_get(def, "label");
        if (!vt || vt->kind != MR_V_STR || !vl || vl->kind != MR_V_STR || !vv || vv->kind != MR_V_STR) {
            const char *missing[3];
            size_t nm = 0;
            if (!vt || vt->kind != MR_V_STR) missing[nm++] = "train";
            if (!vv || vv->kind != MR_V_STR) missing[nm++] = "valid";
            if (!vl || vl->kind != MR_V_STR) missing[nm++] = "label";
            rc = MR_ERR(err, MR_E_SCHEMA, "the train objective needs train, valid and label (missing: %s%s%s%s%s)", missing[0],
                        nm > 1 ? ", " : "", nm > 1 ? missing[1] : "", nm > 2 ? ", " : "", nm > 2 ? missing[2] : "");
            mr_error_hint(err, "or give an exec: {cmd, metrics} objective");
            return rc;
        }
        if (strcmp(c->kind, kinds[0]) && strcmp(c->kind, kinds[1])) {
            rc = mr_error_set_at(err, NULL, vmodel->line, vmodel->col, MR_E_SCHEMA, "unknown model '%s' (expected gbdt or linear)", c->kind);
            if (mr_closest(c->kind, kinds, 2)) mr_error_hint(err, "did you mean '%s'?", mr_closest(c->kind, kinds, 2));
            return rc;
        }
    }
    c->fixed = fixed_params(def, c, metric_at);
    if (!c->fixed) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (!c->is_exec) {
        const mr_value *params = mr_value_get(def, "params");
        rc = space_known ? check_space_params(c, space, err) : mr_model_check_params(c->kind, c->fixed, err);
        if (rc != MR_OK && params) mr_error_at(err, NULL, params->line, params->col); /* when no value was blamed */
    }
    return rc;
}

static mr_status validate_tune(const mr_op_validate_ctx *vc, mr_error *err)
{
    tune_cfg c;
    mr_status rc = tune_settings(vc->def, &c, err);
    tune_cfg_free(&c);
    return rc;
}

/* The study from the settings, on the stage's cores (and smoke mode). */
static mr_status parse_options(study *s, mr_error *err)
{
    mr_op_ctx *ctx = s->ctx;
    tune_cfg c;
    mr_status rc = tune_settings(ctx->def, &c, err);
    if (rc != MR_OK) {
        tune_cfg_free(&c);
        return rc;
    }
    s->space = c.space;
    s->fixed = c.fixed;
    s->so = c.so;
    s->po = c.po;
    s->metric = c.metric;
    s->maximize = c.maximize;
    s->n_trials = c.n_trials;
    s->parallel = c.parallel ? c.parallel : ctx->threads;
    s->timeout_s = c.timeout_s;
    s->grace_s = c.grace_s;
    s->is_exec = c.is_exec;
    s->exec = c.exec;
    if (ctx->smoke && s->n_trials > 2) s->n_trials = 2;
    if (s->parallel < 1) s->parallel = 1;
    if (s->parallel > MAX_GROUPS) s->parallel = MAX_GROUPS;
    if (s->parallel > s->n_trials) s->parallel = s->n_trials;
    s->threads_per_trial = ctx->threads / s->parallel;
    if (s->threads_per_trial < 1) s->threads_per_trial = 1;
    return MR_OK;
}

/* ---- keys ---------------------------------------------------------------- */
/* The trial's full settings: fixed params with the trial's on top. */
static mr_value *merged_params(const study *s, const mr_value *trial_params)
{
    mr_value *m = mr_value_clone(s->fixed);
    for (size_t k = 0; m && trial_params && k < trial_params->n; k++)
        if (mr_value_map_set(m, trial_params->keys[k], mr_value_clone(trial_params->items[k])) != MR_OK) {
            mr_value_free(m);
            return NULL;
        }
    return m;
}

/* The trial key: xxh3-128 over the canonical JSON of what a train stage
 * with these settings would hash (op name and version, the definition
 * with the trial's full params, input artifact ids, smoke). */
static mr_status trial_key(study *s, trial *tr, mr_error *err)
{
    mr_op_ctx *ctx = s->ctx;
    mr_value *doc = mr_value_new(MR_V_MAP), *def = mr_value_new(MR_V_MAP), *ins = mr_value_new(MR_V_MAP);
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = MR_OK;
    if (!doc || !def || !ins) goto oom;
    static const char *const train_keys[] = {"label", "model", "features", "exclude", "categorical", NULL};
    if (s->is_exec) {
        static const char *const exec_keys[] = {"cmd", "env", "metrics", "metric", NULL};
        for (const char *const *k = exec_keys; *k; k++) {
            const mr_value *v = mr_value_get(s->exec, *k);
            if (v && mr_value_map_set(def, *k, mr_value_clone(v)) != MR_OK) goto oom;
        }
        if (mr_value_map_set(def, "params", mr_value_clone(tr->params)) != MR_OK) goto oom;
    } else {
        for (const char *const *k = train_keys; *k; k++) {
            const mr_value *v = mr_value_get(ctx->def, *k);
            if (v && mr_value_map_set(def, *k, mr_value_clone(v)) != MR_OK) goto oom;
        }
        if (mr_value_map_set(def, "params", merged_params(s, tr->params)) != MR_OK) goto oom;
        if (mr_value_map_set(def, "metric", mr_value_new_str(s->metric)) != MR_OK) goto oom;
    }
    for (size_t k = 0; k < ctx->n_inputs; k++)
        if (mr_value_map_set(ins, ctx->inputs[k].name, mr_value_new_str(ctx->inputs[k].id ? ctx->inputs[k].id : ctx->inputs[k].path)) != MR_OK)
            goto oom;
    mr_value *parts[5] = {mr_value_new_str(s->is_exec ? "exec" : "train"),
                          mr_value_new_int(s->is_exec ? mr_op_exec.version : mr_op_train.version),
                          mr_value_new_bool(ctx->smoke), def, ins};
    static const char *const names[5] = {"op", "op_version", "smoke", "def", "inputs"};
    def = ins = NULL;
    for (int k = 0; k < 5; k++)
        if (mr_value_map_set(doc, names[k], parts[k]) != MR_OK) {
            for (int q = k + 1; q < 5; q++) mr_value_free(parts[q]);
            goto oom;
        }
    if (mr_value_to_json(doc, 1, &b) != MR_OK) goto oom;
    mr_hash_hex(mr_hash_bytes(b.data, b.len), tr->key);
    tr->key_doc = b.data;
    b.data = NULL;
    goto done;
oom:
    rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
done:
    mr_value_free(doc);
    mr_value_free(def);
    mr_value_free(ins);
    mr_buf_free(&b);
    return rc;
}

/* ---- the built-in train objective (in a child process) -------------------- */
typedef struct child_ctx {
    const study *s;
    trial *tr;
    int metric_idx;
    int pruned;
    int oom; /* a round's value could not be kept */
} child_ctx;

static int child_round(void *vc, int it, int n, const char *const *names, const double *train, const double *valid,
                       double elapsed)
{
    (void)train;
    (void)elapsed;
    child_ctx *c = vc;
    if (c->metric_idx < 0)
        for (int k = 0; k < n; k++)
            if (!strcmp(names[k], c->s->metric)) c->metric_idx = k;
    double v = c->metric_idx >= 0 ? valid[c->metric_idx] : NAN;
    while ((int)c->tr->n_curve < it)
        if (push_curve(c->tr, NAN) != 0) return c->oom = 1;
    if (push_curve(c->tr, v) != 0) return c->oom = 1;
    if (mr_tune_should_prune(&c->s->po, c->s->hist, c->tr->n_info, c->tr->curve, c->tr->n_curve)) {
        c->pruned = 1;
        return 1;
    }
    return 0;
}

/* Writes nothing when an allocation fails on the way (jansson drops what
 * it cannot allocate): the parent then counts the trial as failed. */
static void write_child_result(const char *path, const char *status, const trial *tr, const char *error)
{
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = json_object(), *curve = json_array();
    for (size_t r = 0; r < tr->n_curve; r++)
        json_array_append_new(curve, isnan(tr->curve[r]) ? json_null() : json_real(tr->curve[r]));
    json_object_set_new(j, "status", json_string(status));
    json_object_set_new(j, "curve", curve);
    if (error) json_object_set_new(j, "error", json_string(error));
    if (tr->bins_cached) json_object_set_new(j, "bins_cached", json_true());
    char *t = json_dumps(j, JSON_COMPACT);
    if (t && mr_alloc_failures_here() == oom0) mr_fs_write_atomic(path, t, strlen(t), NULL);
    free(t);
    json_decref(j);
}

/* What a trial's mr_train_opts point into. */
typedef struct opts_mem {
    mr_value *m;            /* the merged training params */
    const char **arrs[3];
    char *bin_cache;
} opts_mem;

static void opts_mem_free(opts_mem *om)
{
    for (int q = 0; q < 3; q++) mr_free(om->arrs[q]);
    mr_free(om->bin_cache);
    mr_value_free(om->m);
    memset(om, 0, sizeof(*om));
}

/* Training options of a trial with params tparams (NULL: the fixed params
 * only). Binned matrices go to the workspace's bin cache, shared with the
 * train op: the study bins the data once (warm_bins) and every trial whose
 * binning params match loads it instead of binning again. */
static int trial_opts(study *s, const mr_value *tparams, mr_train_opts *o, opts_mem *om)
{
    mr_op_ctx *ctx = s->ctx;
    memset(om, 0, sizeof(*om));
    mr_train_opts_init(o);
    om->m = merged_params(s, tparams);
    om->bin_cache = mr_asprintf("%s/.millrace/cache/binned", ctx->workspace);
    if (!om->m || !om->bin_cache) return -1;
    const mr_value *vm = mr_value_get(ctx->def, "model");
    o->kind = vm && vm->kind == MR_V_STR ? vm->str : "gbdt";
    o->label = mr_value_get(ctx->def, "label")->str;
    o->params = om->m;
    o->smoke = ctx->smoke;
    o->num_threads = s->threads_per_trial;
    o->bin_cache_dir = om->bin_cache;
    const char *lists[3] = {"features", "exclude", "categorical"};
    size_t ns[3] = {0, 0, 0};
    for (int q = 0; q < 3; q++) {
        const mr_value *v = mr_value_get(ctx->def, lists[q]);
        if (!v) continue;
        size_t cnt = v->kind == MR_V_SEQ ? v->n : 1;
        om->arrs[q] = mr_calloc(cnt ? cnt : 1, sizeof(char *));
        if (!om->arrs[q]) return -1;
        for (size_t k = 0; k < cnt; k++) {
            const mr_value *it = v->kind == MR_V_SEQ ? v->items[k] : v;
            if (it->kind == MR_V_STR) om->arrs[q][ns[q]++] = it->str;
        }
    }
    o->features = om->arrs[0];
    o->n_features = ns[0];
    o->exclude = om->arrs[1];
    o->n_exclude = ns[1];
    o->categorical = om->arrs[2];
    o->n_categorical = ns[2];
    return 0;
}

typedef struct train_trial {
    study *s;
    trial *tr;
} train_trial;

static void child_train(study *s, trial *tr);
/* In the forked child of a built-in trial (child_train exits itself). */
static int train_trial_child(void *arg)
{
    train_trial *x = arg;
    child_train(x->s, x->tr);
    return 1;
}

static void child_train(study *s, trial *tr)
{
    uint64_t oom0 = mr_alloc_failures_here(); /* the pruner answers "go on" when it cannot allocate */
    mr_error err;
    mr_error_init(&err);
    mr_pool_init(s->threads_per_trial, NULL);
    mr_train_opts o;
    opts_mem om;
    int ok = trial_opts(s, tr->params, &o, &om) == 0;
    child_ctx cc = {s, tr, -1, 0, 0};
    o.on_round = child_round;
    o.on_round_ctx = &cc;
    mr_model *model = NULL;
    mr_status rc = ok ? mr_model_train(s->train, s->valid, &o, &model, &err) : MR_E_NOMEM;
    mr_model_free(model);
    tr->bins_cached = o.binned_from_cache; /* this is the child's copy of the trial */
    if (rc != MR_OK) {
        char msg[1024];
        mr_error_format(&err, msg, sizeof(msg));
        write_child_result(tr->result_path, "failed", tr, msg[0] ? msg : mr_status_str(rc));
        _exit(1);
    }
    if (cc.oom || mr_alloc_failures_here() != oom0) {
        write_child_result(tr->result_path, "failed", tr, "out of memory while the trial ran");
        _exit(1);
    }
    if (cc.metric_idx < 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "training reported no validation metric '%s'", s->metric);
        write_child_result(tr->result_path, "failed", tr, msg);
        _exit(1);
    }
    write_child_result(tr->result_path, cc.pruned ? "pruned" : "complete", tr, NULL);
    _exit(0);
}

/* In the forked child of warm_bins: bin (filling the cache) and stop. */
static int warm_bins_child(void *arg)
{
    study *s = arg;
    mr_pool_init(s->threads_per_trial * s->parallel, NULL);
    mr_train_opts o;
    opts_mem om;
    mr_error err;
    mr_error_init(&err);
    if (trial_opts(s, NULL, &o, &om) != 0) return 1;
    o.bin_only = 1;
    o.num_threads = s->threads_per_trial * s->parallel;
    mr_model *model = NULL;
    mr_status rc = mr_model_train(s->train, s->valid, &o, &model, &err);
    mr_model_free(model);
    opts_mem_free(&om);
    return rc == MR_OK ? 0 : 1;
}

/* Bins the training (and validation) data once with the study's fixed
 * params into the shared bin cache before any trial starts, in a child
 * like a trial (the pool is never started in this process, so forking
 * later stays safe). Trials with the same binning params then load the
 * matrices instead of binning: for a pruned trial binning can cost as much
 * as its rounds. A failure here is not an error: each trial would bin. */
static void warm_bins(study *s, double deadline)
{
    mr_op_ctx *ctx = s->ctx;
    const mr_value *vm = mr_value_get(ctx->def, "model");
    if (vm && vm->kind == MR_V_STR && strcmp(vm->str, "gbdt")) return; /* only the gbdt bins */
    double t0 = mr_now();
    mr_proc_opts po;
    mr_proc_opts_init(&po);
    po.parent_death_sig = SIGKILL;
    mr_proc proc;
    if (mr_proc_spawn(&proc, &po, warm_bins_child, s, NULL) != MR_OK) return;
    /* bounded by the study's timeout_s, like the trials */
    while (mr_proc_wait(&proc, 0) == 0) {
        if (deadline > 0 && mr_now() > deadline) {
            mr_proc_signal(&proc, SIGKILL);
            mr_proc_wait(&proc, 1);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    dprintf(ctx->log_fd, "study: data binned once for all trials in %.2fs%s\n", mr_now() - t0,
            mr_proc_ok(&proc) ? "" : " (failed or stopped: each trial bins its own)");
}

/* ---- the exec objective -------------------------------------------------- */
typedef struct exec_trial {
    study *s;
    int n;
    trial *tr;
    const char *params_file, *dir;
} exec_trial;

/* In the forked child of an exec trial: its environment, then the command. */
static int exec_trial_child(void *arg)
{
    const exec_trial *x = arg;
    const study *s = x->s;
    mr_op_ctx *ctx = s->ctx;
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", x->n);
    setenv("MILLRACE_TRIAL", buf, 1);
    setenv("MILLRACE_METRICS_FILE", x->tr->metrics_path, 1);
    setenv("MILLRACE_TRIAL_DIR", x->dir, 1);
    mr__command_env(ctx, s->threads_per_trial, x->params_file, x->tr->params, mr_value_get(s->exec, "env"));
    execl("/bin/sh", "sh", "-c", mr_value_get(s->exec, "cmd")->str, (char *)NULL);
    return 127;
}

static mr_status start_exec(study *s, int n, trial *tr, mr_error *err)
{
    mr_op_ctx *ctx = s->ctx;
    char *dir = mr_asprintf("%s/trial-%d", ctx->tmp_dir, n);
    const mr_value *mv = mr_value_get(s->exec, "metrics");
    const char *mname = mv && mv->kind == MR_V_STR ? mv->str : "metrics.jsonl";
    mr_buf pj;
    mr_buf_init(&pj);
    char *params_file = dir ? mr_path_join(dir, "params.json") : NULL;
    mr_status rc = dir && params_file ? mr_fs_mkdirs(dir, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        tr->metrics_path = mname[0] == '/' ? mr_strdup(mname) : mr_path_join(dir, mname);
        if (mr_value_to_json(tr->params, 0, &pj) != MR_OK || !tr->metrics_path) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) rc = mr_fs_write_atomic(params_file, pj.data, pj.len, err);
    if (rc != MR_OK) goto done;
    exec_trial x = {s, n, tr, params_file, dir};
    mr_proc_opts po;
    mr_proc_opts_init(&po);
    po.new_group = 1; /* a pruned command is stopped with everything it started */
    po.parent_death_sig = SIGKILL;
    rc = mr_proc_spawn(&tr->proc, &po, exec_trial_child, &x, err);
    if (rc != MR_OK) {
        mr_error_clear(err);
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot start trial %d", n);
        goto done;
    }
    group_set(tr->proc.pid, 1);
done:
    mr_buf_free(&pj);
    mr_free(params_file);
    mr_free(dir);
    return rc;
}

/* Reads the lines the command appended since the last poll; prunes. */
static void poll_exec(study *s, trial *tr)
{
    if (tr->stopping) return;
    FILE *f = fopen(tr->metrics_path, "r");
    if (!f) return;
    if (fseek(f, tr->metrics_off, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') break; /* a line still being written */
        tr->metrics_off += (long)len;
        json_t *j = json_loads(line, 0, NULL);
        json_t *v = j ? json_object_get(j, s->metric) : NULL;
        if (json_is_number(v)) {
            push_curve(tr, json_number_value(v));
            if (mr_tune_should_prune(&s->po, s->hist, tr->n_info, tr->curve, tr->n_curve)) {
                tr->status = MR_TRIAL_PRUNED;
                tr->stopping = 1;
                tr->term_at = mr_now();
                mr_proc_signal(&tr->proc, SIGTERM);
                dprintf(s->ctx->log_fd, "trial %d: pruned at step %zu (%s=%.6g): SIGTERM\n", (int)(tr - s->t), tr->n_curve,
                        s->metric, tr->curve[tr->n_curve - 1]);
                json_decref(j);
                break;
            }
        }
        json_decref(j);
    }
    fclose(f);
}

/* ---- trial bookkeeping --------------------------------------------------- */
/* One trial as JSON. run_facts adds what depends on this run rather than on
 * the study's inputs — whether it came from the cache, its wall time and
 * when it finished — for the run store's trial record; the stage's
 * artifact (trials.json) leaves them out, so it is reproducible. */
static json_t *trial_json(const study *s, int n, const trial *tr, int run_facts)
{
    mr_buf pb;
    mr_buf_init(&pb);
    mr_value_to_json(tr->params, 1, &pb);
    json_t *curve = json_array();
    for (size_t r = 0; r < tr->n_curve; r++)
        json_array_append_new(curve, isnan(tr->curve[r]) ? json_null() : json_real(tr->curve[r]));
    json_t *j = json_object();
    json_object_set_new(j, "trial", json_integer(n));
    json_object_set_new(j, "key", json_string(tr->key));
    json_object_set_new(j, "status", json_string(status_name(tr->status)));
    json_object_set_new(j, "params", json_loads(pb.data ? pb.data : "{}", 0, NULL));
    json_object_set_new(j, "metric", json_string(s->metric));
    json_object_set_new(j, "direction", json_string(s->maximize ? "maximize" : "minimize"));
    json_object_set_new(j, "value", isnan(tr->value) ? json_null() : json_real(tr->value));
    json_object_set_new(j, "round", json_integer((json_int_t)tr->n_curve));
    json_object_set_new(j, "metric_at_stop", tr->n_curve && !isnan(tr->curve[tr->n_curve - 1]) ? json_real(tr->curve[tr->n_curve - 1]) : json_null());
    json_object_set_new(j, "curve", curve);
    if (run_facts) {
        json_object_set_new(j, "cached", json_boolean(tr->cached));
        json_object_set_new(j, "wall_s", json_real(tr->wall_s));
        json_object_set_new(j, "done_s", json_real(tr->done_s));
    }
    if (tr->error) json_object_set_new(j, "error", json_string(tr->error));
    mr_buf_free(&pb);
    return j;
}

/* A trial is finished: record it everywhere and expose it to later trials. */
static void finish_trial(study *s, int n)
{
    trial *tr = &s->t[n];
    mr_op_ctx *ctx = s->ctx;
    tr->state = T_DONE;
    if (!tr->cached) tr->wall_s = mr_now() - tr->started;
    tr->done_s = mr_now() - s->t0;
    /* An allocation failed in this thread while the trial ran (reading its
     * metrics or its result, extending its curve): what it reported may be
     * incomplete, so it fails, is not cached, and a later run retries it. */
    if (tr->status != MR_TRIAL_FAILED && mr_alloc_failures_here() != tr->oom0) {
        tr->status = MR_TRIAL_FAILED;
        if (!tr->error) tr->error = mr_strdup("out of memory while the trial ran");
    }
    if (tr->status != MR_TRIAL_FAILED) tr->value = best_of(tr->curve, tr->n_curve, s->maximize);
    if (tr->status != MR_TRIAL_FAILED && isnan(tr->value)) {
        tr->status = MR_TRIAL_FAILED;
        if (!tr->error) tr->error = mr_strdup("no metric value was reported");
    }
    s->hist[n] = (mr_tune_trial){tr->x, tr->status, tr->value, tr->curve, tr->n_curve};
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = trial_json(s, n, tr, 1);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    if (mr_alloc_failures_here() != oom0) { /* a field may be missing: neither cached nor recorded */
        dprintf(ctx->log_fd, "warning: trial %d: out of memory: not cached, not recorded\n", n);
        free(text);
        text = NULL;
    }
    mr_error e;
    mr_error_init(&e);
    /* Cache what does not depend on other trials: complete runs, and pruned
     * runs (replayed against the pruner on a hit). Failures are retried. */
    if (!tr->cached && tr->status != MR_TRIAL_FAILED && !tr->timed_out && text) {
        json_t *cj = json_pack("{s:s,s:O}", "status", status_name(tr->status), "curve", json_object_get(j, "curve"));
        char *ct = cj ? json_dumps(cj, JSON_COMPACT) : NULL;
        if (ct && mr_op_cache_put(ctx, "trial", tr->key, tr->key_doc, ct, &e) != MR_OK)
            dprintf(ctx->log_fd, "warning: trial %d: cannot cache: %s\n", n, e.msg);
        free(ct);
        json_decref(cj);
    }
    mr_error_init(&e);
    if (text && mr_op_trial_record(ctx, n, tr->key, status_name(tr->status), tr->value, text, &e) != MR_OK)
        dprintf(ctx->log_fd, "warning: trial %d: cannot record: %s\n", n, e.msg);
    char name[96];
    for (size_t r = 0; r < tr->n_curve; r++) {
        snprintf(name, sizeof(name), "trial.%d.%s", n, s->metric);
        if (!isnan(tr->curve[r])) mr_op_metric(ctx, name, (int64_t)r + 1, tr->curve[r]);
    }
    if (!isnan(tr->value)) mr_op_metric(ctx, "trial_value", n, tr->value);
    mr_buf pb;
    mr_buf_init(&pb);
    mr_value_to_json(tr->params, 1, &pb);
    if (tr->status == MR_TRIAL_FAILED)
        dprintf(ctx->log_fd, "trial %d: failed%s: %s %s\n", n, tr->cached ? " (cached)" : "", tr->error ? tr->error : "",
                pb.data ? pb.data : "");
    else
        dprintf(ctx->log_fd, "trial %d: %s%s at round %zu, %s=%.6g (%.2fs%s) %s\n", n, status_name(tr->status),
                tr->cached ? " (cached)" : "", tr->n_curve, s->metric, tr->value, tr->wall_s,
                tr->bins_cached ? ", bins from cache" : "", pb.data ? pb.data : "");
    mr_buf_free(&pb);
    free(text);
    json_decref(j);
}

/* A cache hit: replays the pruner over the cached curve. Returns 1 when
 * the cached result is what running the trial now would give. */
static int replay_cached(study *s, trial *tr, const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    const char *st = json_string_value(json_object_get(j, "status"));
    json_t *curve = json_object_get(j, "curve");
    int ok = st && json_is_array(curve);
    size_t k;
    json_t *v;
    json_array_foreach(curve, k, v) if (ok && push_curve(tr, json_is_number(v) ? json_number_value(v) : NAN) != 0) ok = 0;
    if (ok) {
        int was_pruned = !strcmp(st, "pruned");
        tr->status = MR_TRIAL_COMPLETE;
        for (size_t r = 1; r <= tr->n_curve; r++)
            if (mr_tune_should_prune(&s->po, s->hist, tr->n_info, tr->curve, r)) {
                tr->n_curve = r;
                tr->status = MR_TRIAL_PRUNED;
                break;
            }
        /* Pruned then, but this study would let it go on: run it. */
        if (was_pruned && tr->status != MR_TRIAL_PRUNED) ok = 0;
    }
    if (!ok) tr->n_curve = 0;
    json_decref(j);
    return ok;
}

/* Trial n's point, from trials 0..n-parallel, its params and its key. */
static mr_status suggest(study *s, int n, mr_error *err)
{
    trial *tr = &s->t[n];
    size_t m = mr_tune_space_size(s->space);
    tr->n_info = n >= s->parallel ? (size_t)(n - s->parallel + 1) : 0;
    tr->x = mr_calloc(m ? m : 1, sizeof(double));
    if (!tr->x) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_tune_suggest(s->space, &s->so, s->hist, tr->n_info, (uint64_t)n, tr->x, err);
    if (rc == MR_OK) rc = mr_tune_point_value(s->space, tr->x, &tr->params) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = trial_key(s, tr, err);
    return rc;
}

/* Suggests trial n and serves it from the cache or starts it. */
static mr_status begin_trial(study *s, int n, mr_error *err)
{
    trial *tr = &s->t[n];
    mr_status rc = suggest(s, n, err);
    if (rc != MR_OK) return rc;
    tr->started = mr_now();
    tr->oom0 = mr_alloc_failures_here();
    tr->value = NAN;
    char *cached = NULL;
    if (mr_op_cache_get(s->ctx, tr->key, &cached, NULL) == MR_OK && cached && replay_cached(s, tr, cached)) {
        mr_free(cached);
        tr->cached = 1;
        finish_trial(s, n);
        return MR_OK;
    }
    mr_free(cached);
    tr->state = T_RUNNING;
    tr->status = MR_TRIAL_COMPLETE;
    if (s->is_exec) {
        rc = start_exec(s, n, tr, err);
        if (rc != MR_OK) {
            char msg[512];
            mr_error_format(err, msg, sizeof(msg));
            mr_error_clear(err);
            tr->status = MR_TRIAL_FAILED;
            tr->error = mr_strdup(msg);
            finish_trial(s, n);
        }
        return MR_OK;
    }
    tr->result_path = mr_asprintf("%s/trial-%d.result.json", s->ctx->tmp_dir, n);
    if (!tr->result_path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    train_trial x = {s, tr};
    mr_proc_opts po;
    mr_proc_opts_init(&po);
    po.parent_death_sig = SIGKILL;
    if (mr_proc_spawn(&tr->proc, &po, train_trial_child, &x, err) != MR_OK) {
        mr_error_clear(err);
        return MR_ERR_SYS(err, MR_E_IO, errno, "cannot start trial %d", n);
    }
    return MR_OK;
}

/* A child exited: read what it left. */
static void reap_trial(study *s, int n)
{
    trial *tr = &s->t[n];
    int wstatus = tr->proc.status;
    if (s->is_exec) {
        group_set(tr->proc.pid, 0);
        mr_proc_kill_group(&tr->proc); /* anything the command left behind */
        int was_pruned = tr->status == MR_TRIAL_PRUNED;
        if (!tr->stopping) poll_exec(s, tr); /* the last lines */
        if (tr->timed_out) {
            tr->status = MR_TRIAL_FAILED;
            tr->error = mr_strdup("stopped: the study's timeout_s passed");
        } else if (!was_pruned && tr->status != MR_TRIAL_PRUNED && !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
            tr->status = MR_TRIAL_FAILED;
            tr->error = WIFSIGNALED(wstatus) ? mr_asprintf("command killed by signal %d", WTERMSIG(wstatus))
                                             : mr_asprintf("command exited with status %d", WEXITSTATUS(wstatus));
        }
        finish_trial(s, n);
        return;
    }
    json_t *j = json_load_file(tr->result_path, 0, NULL);
    const char *st = json_string_value(json_object_get(j, "status"));
    json_t *curve = json_object_get(j, "curve");
    size_t k;
    json_t *v;
    json_array_foreach(curve, k, v) push_curve(tr, json_is_number(v) ? json_number_value(v) : NAN);
    tr->bins_cached = json_is_true(json_object_get(j, "bins_cached"));
    if (tr->timed_out) {
        tr->status = MR_TRIAL_FAILED;
        tr->error = mr_strdup("stopped: the study's timeout_s passed");
    } else if (st && !strcmp(st, "complete") && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        tr->status = MR_TRIAL_COMPLETE;
    } else if (st && !strcmp(st, "pruned") && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        tr->status = MR_TRIAL_PRUNED;
    } else {
        tr->status = MR_TRIAL_FAILED;
        const char *e = json_string_value(json_object_get(j, "error"));
        tr->error = e ? mr_strdup(e)
                      : WIFSIGNALED(wstatus) ? mr_asprintf("trial process killed by signal %d", WTERMSIG(wstatus))
                                             : mr_asprintf("trial process exited with status %d", WEXITSTATUS(wstatus));
    }
    json_decref(j);
    finish_trial(s, n);
}

/* ---- outputs ------------------------------------------------------------- */
static mr_status write_outputs(study *s, int n_started, mr_error *err)
{
    mr_op_ctx *ctx = s->ctx;
    int best = -1, n_complete = 0, n_pruned = 0, n_failed = 0, n_cached = 0;
    for (int n = 0; n < n_started; n++) {
        trial *tr = &s->t[n];
        n_complete += tr->status == MR_TRIAL_COMPLETE;
        n_pruned += tr->status == MR_TRIAL_PRUNED;
        n_failed += tr->status == MR_TRIAL_FAILED;
        n_cached += tr->cached;
        if (tr->status != MR_TRIAL_COMPLETE) continue;
        if (best < 0 || (s->maximize ? tr->value > s->t[best].value : tr->value < s->t[best].value)) best = n;
    }
    dprintf(ctx->log_fd, "study: %d trials (%d complete, %d pruned, %d failed; %d from the cache)\n", n_started, n_complete,
            n_pruned, n_failed, n_cached);
    if (best < 0) return MR_ERR(err, MR_E_FAILED, "no trial of the study completed (%d pruned, %d failed)", n_pruned, n_failed);
    /* jansson drops what it cannot allocate; any failure from here to the
     * writes means a document may be missing a part, and none is written. */
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *trials = json_array();
    for (int n = 0; n < n_started; n++) json_array_append_new(trials, trial_json(s, n, &s->t[n], 0));
    /* importances over the complete and pruned trials (their best values) */
    size_t m = mr_tune_space_size(s->space), k = 0;
    double *xs = mr_calloc((size_t)n_started * (m ? m : 1), sizeof(double));
    double *ys = mr_calloc((size_t)n_started, sizeof(double));
    double *imp = mr_calloc(m ? m : 1, sizeof(double));
    int *cat = mr_calloc(m ? m : 1, sizeof(int));
    json_t *jimp = json_object();
    int imp_oom = 0; /* in a pool thread: not counted by mr_alloc_failures_here */
    if (xs && ys && imp && cat) {
        for (int n = 0; n < n_started; n++)
            if (s->t[n].status == MR_TRIAL_COMPLETE) {
                memcpy(xs + k * m, s->t[n].x, m * sizeof(double));
                ys[k++] = s->t[n].value;
            }
        for (size_t j = 0; j < m; j++) cat[j] = mr_tune_space_kind(s->space, j) == MR_TUNE_CHOICE;
        mr_status ist = mr_tune_importance(xs, ys, k, m, cat, imp, NULL);
        if (ist == MR_OK)
            for (size_t j = 0; j < m; j++) json_object_set_new(jimp, mr_tune_space_name(s->space, j), json_real(imp[j]));
        else if (ist == MR_E_NOMEM)
            imp_oom = 1;
    }
    mr_free(xs);
    mr_free(ys);
    mr_free(imp);
    mr_free(cat);
    json_t *bestp = json_object_get(json_array_get(trials, (size_t)best), "params");
    json_t *study_j = json_pack("{s:O,s:f,s:i,s:s,s:s,s:i,s:i,s:i,s:i,s:o}", "best", bestp, "value", s->t[best].value,
                                "trial", best, "metric", s->metric, "direction", s->maximize ? "maximize" : "minimize",
                                "n_trials", n_started, "n_complete", n_complete, "n_pruned", n_pruned, "n_failed",
                                n_failed, "importance", jimp);
    const char *files[3] = {"best.json", "study.json", "trials.json"};
    json_t *docs[3] = {bestp, study_j, trials};
    mr_status rc = MR_OK;
    for (int q = 0; q < 3 && rc == MR_OK; q++) {
        char *path = mr_path_join(ctx->outputs[0].path, files[q]);
        char *t = docs[q] ? json_dumps(docs[q], JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
        rc = path && t && !imp_oom && mr_alloc_failures_here() == oom0 ? mr_fs_write_atomic(path, t, strlen(t), err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(path);
        free(t);
    }
    mr_op_metric(ctx, "best_value", 0, s->t[best].value);
    mr_op_metric(ctx, "best_trial", 0, best);
    dprintf(ctx->log_fd, "best: trial %d, %s=%.6g\n", best, s->metric, s->t[best].value);
    json_decref(study_j);
    json_decref(trials);
    return rc;
}

/* ---- the study loop ------------------------------------------------------ */
/* The running trials' processes, for the supervisor. */
static size_t running_procs(study *s, int n_started, mr_proc **procs)
{
    size_t m = 0;
    for (int n = 0; n < n_started; n++)
        if (s->t[n].state == T_RUNNING) procs[m++] = &s->t[n].proc;
    return m;
}

static mr_status run_study(study *s, int *n_started_out, mr_error *err)
{
    mr_op_ctx *ctx = s->ctx;
    int next = 0, running = 0, first_open = 0;
    double t0 = mr_now();
    if (!s->is_exec && s->n_trials > 1) warm_bins(s, s->timeout_s > 0 ? t0 + s->timeout_s : 0); /* inside the budget */
    int stop = 0;
    mr_status rc = MR_OK;
    mr_proc **procs = mr_calloc((size_t)s->n_trials + 1, sizeof(*procs));
    if (!procs) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (;;) {
        double now = mr_now();
        if (s->timeout_s > 0 && now - t0 > s->timeout_s && !stop) {
            stop = 1;
            dprintf(ctx->log_fd, "study: timeout_s (%.0fs) passed after %d trials; stopping\n", s->timeout_s, next);
            for (int n = 0; n < next; n++)
                if (s->t[n].state == T_RUNNING) {
                    s->t[n].timed_out = 1;
                    mr_proc_signal(&s->t[n].proc, SIGKILL);
                }
        }
        while (first_open < next && s->t[first_open].state == T_DONE) first_open++;
        /* Start trial `next` once trials 0..next-parallel are all done. */
        while (!stop && rc == MR_OK && next < s->n_trials && running < s->parallel && first_open >= next - s->parallel + 1) {
            rc = begin_trial(s, next, err);
            if (rc != MR_OK) break;
            if (s->t[next].state == T_RUNNING) running++;
            next++;
            while (first_open < next && s->t[first_open].state == T_DONE) first_open++;
        }
        if (rc != MR_OK) break;
        if (running == 0) break;
        size_t m = running_procs(s, next, procs);
        mr_proc *done = mr_proc_wait_any(procs, m, 0);
        if (done) {
            int n = 0;
            while (&s->t[n].proc != done) n++;
            reap_trial(s, n);
            running--;
            continue;
        }
        if (s->is_exec)
            for (int n = 0; n < next; n++) {
                trial *tr = &s->t[n];
                if (tr->state != T_RUNNING) continue;
                poll_exec(s, tr);
                if (tr->stopping && mr_now() - tr->term_at > s->grace_s) {
                    dprintf(ctx->log_fd, "trial %d: still running %.1fs after SIGTERM: SIGKILL\n", n, s->grace_s);
                    mr_proc_signal(&tr->proc, SIGKILL);
                    tr->term_at = INFINITY;
                }
            }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (rc != MR_OK) { /* stop what runs */
        size_t m = running_procs(s, next, procs);
        for (size_t k = 0; k < m; k++) mr_proc_signal(procs[k], SIGKILL);
        mr_proc_terminate(procs, m, 0);
        for (size_t k = 0; k < m; k++) group_set(procs[k]->pid, 0);
    }
    mr_free(procs);
    *n_started_out = next;
    return rc;
}

/* ---- one trial as a task of a Slurm job array (ctx->task) ---------------------------- */

#define TASK_WAIT_S 86400 /* how long a task waits for the trials it is suggested from */

/* Suggests trial n and replays it from the cache: *hit 0 (and trial n reset)
 * when it is not cached yet. */
static mr_status replay_only(study *s, int n, int *hit, mr_error *err)
{
    trial *tr = &s->t[n];
    *hit = 0;
    mr_status rc = suggest(s, n, err);
    char *cached = NULL;
    if (rc == MR_OK && mr_op_cache_get(s->ctx, tr->key, &cached, NULL) == MR_OK && cached && replay_cached(s, tr, cached)) {
        tr->started = mr_now();
        tr->oom0 = mr_alloc_failures_here();
        tr->value = NAN;
        tr->cached = 1;
        finish_trial(s, n);
        *hit = 1;
    }
    mr_free(cached);
    if (!*hit) { /* as before the suggestion, for the next look */
        mr_free(tr->x);
        mr_value_free(tr->params);
        mr_free(tr->key_doc);
        tr->x = NULL;
        tr->params = NULL;
        tr->key_doc = NULL;
        tr->n_curve = 0;
    }
    return rc;
}

/* Trial ctx->task alone: it is suggested from trials 0..task-parallel, as in
 * the whole study, so it waits for the tasks that compute those to cache
 * them, replays them, then runs (or replays) its own and caches it. */
static mr_status run_task(study *s, int *n_started_out, mr_error *err)
{
    int k = s->ctx->task;
    *n_started_out = 0;
    if (k >= s->n_trials) return MR_OK;
    double t0 = mr_now();
    for (int n = 0; n <= k - s->parallel; n++) {
        for (;;) {
            int hit = 0;
            mr_status rc = replay_only(s, n, &hit, err);
            if (rc != MR_OK) return rc;
            if (hit) break;
            if (mr_now() - t0 > TASK_WAIT_S)
                return MR_ERR(err, MR_E_STATE, "trial %d: trial %d, which it is suggested from, was not cached within %d s", k, n,
                              TASK_WAIT_S);
            struct timespec ts = {0, 250 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    dprintf(s->ctx->log_fd, "task %d: trials 0..%d replayed from the cache; running trial %d\n", k, k - s->parallel, k);
    mr_status rc = begin_trial(s, k, err);
    if (rc != MR_OK) return rc;
    *n_started_out = k + 1;
    trial *tr = &s->t[k];
    while (tr->state == T_RUNNING) {
        if (mr_proc_wait(&tr->proc, 0) == 1) {
            reap_trial(s, k);
            break;
        }
        if (s->is_exec) {
            poll_exec(s, tr);
            if (tr->stopping && mr_now() - tr->term_at > s->grace_s) {
                mr_proc_signal(&tr->proc, SIGKILL);
                tr->term_at = INFINITY;
            }
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return MR_OK;
}

/* The Slurm executor's question: how many trials, how many at once. */
static mr_status fanout_tune(const mr_value *def, int smoke, int threads, int *n_tasks, int *parallel, mr_error *err)
{
    tune_cfg c;
    mr_status rc = tune_settings(def, &c, err);
    if (rc == MR_OK) {
        int n = c.n_trials, p = c.parallel ? c.parallel : threads;
        if (smoke && n > 2) n = 2;
        if (p < 1) p = 1;
        if (p > MAX_GROUPS) p = MAX_GROUPS;
        if (p > n) p = n;
        *n_tasks = n;
        *parallel = p;
    }
    tune_cfg_free(&c);
    return rc;
}

static mr_status run_tune(mr_op_ctx *ctx, mr_error *err)
{
    study s;
    memset(&s, 0, sizeof(s));
    s.ctx = ctx;
    s.t0 = mr_now();
    int n_started = 0;
    struct sigaction sa, old;
    int handler = 0;
    mr_status rc = parse_options(&s, err);
    if (rc != MR_OK) goto done;
    s.t = mr_calloc((size_t)s.n_trials, sizeof(*s.t));
    s.hist = mr_calloc((size_t)s.n_trials, sizeof(*s.hist));
    if (!s.t || !s.hist) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    if (!s.is_exec) {
        rc = mr_table_read_file(mr_value_get(ctx->def, "train")->str, &s.train, err);
        if (rc == MR_OK) rc = mr_table_read_file(mr_value_get(ctx->def, "valid")->str, &s.valid, err);
        if (rc != MR_OK) goto done;
    }
    dprintf(ctx->log_fd, "tune: %d trials, %d at once x %d threads, %s sampler, %s pruner, %s %s%s\n", s.n_trials, s.parallel,
            s.threads_per_trial, s.so.kind == MR_SAMPLER_TPE ? "tpe" : "random",
            s.po.kind == MR_PRUNER_ASHA ? "asha" : s.po.kind == MR_PRUNER_MEDIAN ? "median" : "no", s.maximize ? "maximize" : "minimize",
            s.metric, ctx->smoke ? " [smoke]" : "");
    /* Trials are forked: a process-wide pool's threads would not exist in
     * the children, and the parent only waits from here on. */
    mr_pool_shutdown();
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, NULL, &g_old_term);
    if (sigaction(SIGTERM, &sa, &old) == 0) handler = 1;
    if (ctx->is_task) {
        rc = run_task(&s, &n_started, err); /* the stage's own job writes the outputs */
    } else {
        rc = run_study(&s, &n_started, err);
        if (rc == MR_OK) rc = write_outputs(&s, n_started, err);
    }
done:
    if (handler) sigaction(SIGTERM, &old, NULL);
    for (int n = 0; s.t && n < s.n_trials; n++) {
        mr_free(s.t[n].x);
        mr_value_free(s.t[n].params);
        mr_free(s.t[n].key_doc);
        mr_free(s.t[n].curve);
        mr_free(s.t[n].error);
        mr_free(s.t[n].result_path);
        mr_free(s.t[n].metrics_path);
    }
    mr_free(s.t);
    mr_free(s.hist);
    mr_value_free(s.fixed);
    mr_table_free(s.train);
    mr_table_free(s.valid);
    mr_tune_space_free(s.space);
    return rc;
}

const mr_op mr_op_tune = {
    .name = "tune",
    .version = TUNE_OP_VERSION,
    .params = tune_params,
    .outputs = NULL,
    .run = run_tune,
    .validate = validate_tune,
    .fanout = fanout_tune,
};
