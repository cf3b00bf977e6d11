/* `millrace status`, `verify` and `gc`. Status plans every stage as a run
 * would (hashing inputs through the stat cache) without running anything,
 * and explains a stale stage by diffing its key document against the one
 * recorded for its last result; a cached stage whose workspace outputs are
 * someone else's is traced to the run that produced them. Values print as
 * written (the value tree keeps each scalar's text). */
#include "pipeline_int.h"
#include "millrace/registry.h"

#include <string.h>

#include <jansson.h>

static void add_reason(json_t *reasons, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_reason(json_t *reasons, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    json_array_append_new(reasons, json_string(buf));
}

/* A value as status prints it: scalars as written ("0.1", never
 * 0.10000000000000001), strings quoted, lists and maps as canonical JSON;
 * cut to 60 bytes. Caller frees. */
static char *short_text(const mr_value *v)
{
    mr_buf b;
    mr_buf_init(&b);
    if (!v)
        mr_buf_puts(&b, "(none)");
    else if (v->kind == MR_V_STR)
        mr_buf_json_str(&b, v->str ? v->str : "");
    else
        mr_runstore_value_text(v, &b);
    char *r = mr_strdup(b.data ? b.data : "?");
    mr_buf_free(&b);
    if (r && strlen(r) > 60) {
        size_t k = 56;
        while (k > 0 && ((unsigned char)r[k] & 0xC0) == 0x80) k--; /* not inside a UTF-8 sequence */
        memcpy(r + k, "...", 4);
    }
    return r;
}

/* Adds a reason per entry of cur that old lacks, holds otherwise, or has
 * lost. Settings that are maps recurse ("setting 'params.learning_rate'"). */
static void diff_maps(const mr_value *old, const mr_value *cur, const char *what, const char *prefix, json_t *reasons)
{
    char path[512];
    for (size_t k = 0; cur && cur->kind == MR_V_MAP && k < cur->n; k++) {
        const mr_value *o = mr_value_get(old, cur->keys[k]), *v = cur->items[k];
        snprintf(path, sizeof(path), "%s%s%s", prefix ? prefix : "", prefix ? "." : "", cur->keys[k]);
        if (!o) {
            add_reason(reasons, "%s '%s' added", what, path);
        } else if (mr_value_equal(o, v)) {
            continue;
        } else if (!strcmp(what, "input")) {
            add_reason(reasons, "input '%s' changed", path);
        } else if (!strcmp(what, "setting") && o->kind == MR_V_MAP && v->kind == MR_V_MAP) {
            diff_maps(o, v, what, path, reasons);
        } else {
            char *a = short_text(o), *b = short_text(v);
            add_reason(reasons, "%s '%s' changed: %s -> %s", what, path, a ? a : "", b ? b : "");
            mr_free(a);
            mr_free(b);
        }
    }
    for (size_t k = 0; old && old->kind == MR_V_MAP && k < old->n; k++)
        if (!mr_value_get(cur, old->keys[k]))
            add_reason(reasons, "%s '%s%s%s' removed", what, prefix ? prefix : "", prefix ? "." : "", old->keys[k]);
}

/* Parses a key document (canonical JSON) into a value tree; NULL if unreadable. */
static mr_value *parse_doc(const char *doc)
{
    mr_value *v = NULL;
    if (doc && doc[0] && mr_yaml_parse(doc, strlen(doc), "key document", &v, NULL) != MR_OK) v = NULL;
    if (v && v->kind != MR_V_MAP) {
        mr_value_free(v);
        v = NULL;
    }
    return v;
}

/* What differs between the key document of a result (prev) and the one the
 * spec now gives (cur); returns how many reasons it added. */
static size_t diff_docs(const char *prev, const char *cur, json_t *reasons)
{
    size_t before = json_array_size(reasons);
    mr_value *o = parse_doc(prev), *c = parse_doc(cur);
    if (o && c) {
        const mr_value *ov = mr_value_get(o, "op_version"), *cv = mr_value_get(c, "op_version");
        if (!(ov && cv && mr_value_equal(ov, cv)))
            add_reason(reasons, "op version changed: %lld -> %lld", ov && ov->kind == MR_V_INT ? (long long)ov->u.i : 0LL,
                       cv && cv->kind == MR_V_INT ? (long long)cv->u.i : 0LL);
        const mr_value *os = mr_value_get(o, "smoke"), *cs = mr_value_get(c, "smoke");
        if (!(os && cs && mr_value_equal(os, cs))) add_reason(reasons, "smoke mode differs from the cached result");
        diff_maps(mr_value_get(o, "params"), mr_value_get(c, "params"), "param", NULL, reasons);
        diff_maps(mr_value_get(o, "def"), mr_value_get(c, "def"), "setting", NULL, reasons);
        diff_maps(mr_value_get(o, "inputs"), mr_value_get(c, "inputs"), "input", NULL, reasons);
    }
    mr_value_free(o);
    mr_value_free(c);
    return json_array_size(reasons) - before;
}

static void explain(mr_workspace *ws, const mr_value *lock, const char *stage, const char *cur_doc, json_t *reasons)
{
    char *prev_doc = NULL, *prev_key = NULL;
    const char *lk = mr__lock_stage_key(lock, stage);
    if (!(lk && mr_runstore_cache_get(ws->rs, lk, NULL, NULL, &prev_doc, NULL) == MR_OK))
        mr_runstore_cache_last_for_stage(ws->rs, stage, &prev_key, &prev_doc, NULL);
    mr_free(prev_key);
    if (!prev_doc || !prev_doc[0]) {
        add_reason(reasons, "never run");
        mr_free(prev_doc);
        return;
    }
    if (diff_docs(prev_doc, cur_doc, reasons) == 0)
        add_reason(reasons, "its cached result is gone (gc) or was never recorded");
    mr_free(prev_doc);
}

/* The stage is cached, but its outputs in the workspace are not the cached
 * ones: say which are missing, or whose outputs the workspace holds (a run
 * with other params, an -S override) and what differs, or that they were
 * modified. A run restores the cached outputs in every case. */
static void explain_workspace(mr_workspace *ws, const mr__plan *p, const char *stage, const char *cur_doc,
                              json_t *reasons)
{
    const char **paths = mr_calloc(p->n_outs + 1, sizeof(*paths)), **names = mr_calloc(p->n_outs + 1, sizeof(*names));
    const char **ids = mr_calloc(p->n_outs + 1, sizeof(*ids));
    char(*hex)[MR_ARTIFACT_ID_LEN] = mr_calloc(p->n_outs + 1, sizeof(*hex));
    mr_artifact *arts = mr_calloc(p->n_outs + 1, sizeof(*arts));
    mr_run_detail *d = NULL;
    char *key = NULL, *doc = NULL;
    int64_t run = 0;
    size_t n_missing = 0;
    if (!paths || !names || !ids || !hex || !arts) goto modified;
    for (size_t k = 0; k < p->n_outs; k++) {
        paths[k] = p->outs[k].path;
        names[k] = p->outs[k].name;
        if (mr_fs_exists(paths[k])) continue;
        add_reason(reasons, "outputs missing or modified in the workspace: '%s' is missing (a run restores it from the cache)",
                   paths[k]);
        n_missing++;
    }
    if (n_missing) goto done;
    if (mr_store_hash_paths(ws->store, ws->sc, paths, p->n_outs, arts, NULL, NULL) != MR_OK) goto modified;
    for (size_t k = 0; k < p->n_outs; k++) {
        mr_artifact_id(&arts[k], hex[k]);
        ids[k] = hex[k];
    }
    if (mr_runstore_find_outputs(ws->rs, stage, names, ids, p->n_outs, &run, &key, NULL) != MR_OK ||
        mr_runstore_run_detail(ws->rs, run, &d, NULL) != MR_OK)
        goto modified;
    if (d->run.overrides && d->run.overrides[0]) {
        mr_buf ov;
        mr_buf_init(&ov);
        const char *o = d->run.overrides;
        while (*o) { /* "a=1 b=2" -> "-S a=1 -S b=2" */
            size_t n = strcspn(o, " ");
            mr_buf_printf(&ov, "%s-S %.*s", ov.len ? " " : "", (int)n, o);
            o += n;
            o += strspn(o, " ");
        }
        add_reason(reasons, "the workspace holds the outputs of run %lld (%s), not this spec's cached result (a run restores it)",
                   (long long)run, ov.data ? ov.data : "");
        mr_buf_free(&ov);
    } else {
        add_reason(reasons, "the workspace holds the outputs of run %lld, not this spec's cached result (a run restores it)",
                   (long long)run);
    }
    if (key && mr_runstore_cache_get(ws->rs, key, NULL, NULL, &doc, NULL) == MR_OK) diff_docs(doc, cur_doc, reasons);
    goto done;
modified:
    add_reason(reasons, "outputs missing or modified in the workspace: modified since a run wrote them (no recorded run "
                        "produced them; a run restores the cached result)");
done:
    mr_run_detail_free(d);
    mr_free(key);
    mr_free(doc);
    mr_free(paths);
    mr_free(names);
    mr_free(ids);
    mr_free(hex);
    mr_free(arts);
}

/* Hashes every workspace dep that no stage produces in one parallel batch
 * (the stat cache answers unchanged files) and remembers the ids, so the
 * per-stage pass below needs no further hashing. A dep that is missing is
 * left out, for the per-stage pass to report. */
typedef struct warm_set {
    const char **paths;
    char (*ids)[MR_ARTIFACT_ID_LEN];
    size_t n;
} warm_set;

static void warm_inputs(mr_workspace *ws, const mr_dag *dag, size_t n, warm_set *w)
{
    size_t total = 0, m = 0;
    memset(w, 0, sizeof(*w));
    for (size_t i = 0; i < n; i++) total += mr__dag_paths(dag, i)->n_deps;
    w->paths = mr_calloc(total ? total : 1, sizeof(*w->paths));
    mr_artifact *arts = mr_calloc(total ? total : 1, sizeof(*arts));
    for (size_t i = 0; w->paths && arts && i < n; i++) {
        const mr__stage_paths *sp = mr__dag_paths(dag, i);
        for (size_t d = 0; d < sp->n_deps; d++) {
            int skip = 0;
            for (size_t j = 0; j < n && !skip; j++) {
                const mr__stage_paths *op = mr__dag_paths(dag, j);
                for (size_t o = 0; o < op->n_outs && !skip; o++)
                    skip = mr__path_within(sp->deps[d], op->outs[o]) || mr__path_within(op->outs[o], sp->deps[d]);
            }
            for (size_t q = 0; q < m && !skip; q++) skip = !strcmp(w->paths[q], sp->deps[d]);
            if (!skip && mr_fs_exists(sp->deps[d])) w->paths[m++] = sp->deps[d];
        }
    }
    w->ids = mr_calloc(m ? m : 1, sizeof(*w->ids));
    if (m && w->ids && mr_store_hash_paths(ws->store, ws->sc, w->paths, m, arts, NULL, NULL) == MR_OK) {
        for (size_t q = 0; q < m; q++) mr_artifact_id(&arts[q], w->ids[q]);
        w->n = m;
    }
    mr_free(arts);
}

static void warm_fill(const warm_set *w, mr__plan *p)
{
    for (size_t k = 0; k < p->n_ins; k++) {
        if (p->ins[k].from_stage >= 0 || p->ins[k].id[0]) continue;
        for (size_t q = 0; q < w->n; q++)
            if (!strcmp(w->paths[q], p->ins[k].path)) {
                memcpy(p->ins[k].id, w->ids[q], sizeof(p->ins[k].id));
                break;
            }
    }
}

mr_status mr_pipeline_status(mr_workspace *ws, const mr_spec *spec, int smoke, int json, mr_buf *out, int *n_stale_out,
                             mr_error *err)
{
    return mr_pipeline_status_remote(ws, spec, smoke, json, NULL, out, n_stale_out, err);
}

/* The remote's entry for stage i's key, if any: its outputs' ids into the plan (so that the
 * stages after it get keys), and a reason saying so. 1 when the remote has it. */
static int remote_has(mr__remote_probe *probe, mr__plan *p, json_t *reasons, mr_error *err)
{
    char *oj = NULL;
    mr_error e;
    mr_error_init(&e);
    if (mr__remote_probe_entry(probe, p->key, &oj, &e) != MR_OK) {
        if (err && !mr_error_is_set(err)) *err = e;
        return 0;
    }
    if (!oj) return 0;
    json_t *outs = json_loads(oj, 0, NULL);
    mr_free(oj);
    for (size_t k = 0; k < p->n_outs; k++) {
        const char *id = json_string_value(json_object_get(outs, p->outs[k].name));
        if (id) snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", id);
    }
    json_decref(outs);
    add_reason(reasons, "the remote '%s' has its result: `millrace run --remote %s` downloads it",
               mr__remote_probe_name(probe), mr__remote_probe_name(probe));
    return 1;
}

mr_status mr_pipeline_status_remote(mr_workspace *ws, const mr_spec *spec, int smoke, int json, const char *remote,
                                    mr_buf *out, int *n_stale_out, mr_error *err)
{
    mr__remote_probe *probe = NULL;
    mr_error remote_err;
    mr_error_init(&remote_err);
    mr_dag *dag = NULL;
    mr_value *lock = NULL;
    mr__plan *plans = NULL;
    int *stale = NULL;
    json_t *arr = json_array();
    int n_stale = 0;
    int n_remote = 0;
    mr_status rc = mr_dag_build(spec, &dag, err);
    if (rc == MR_OK) rc = mr__lock_read(ws, &lock, err);
    if (rc == MR_OK && remote) rc = mr__remote_probe_open(spec, remote[0] ? remote : NULL, &probe, err);
    if (rc != MR_OK) goto done;
    size_t n = spec->n_stages;
    plans = mr_calloc(n ? n : 1, sizeof(*plans));
    stale = mr_calloc(n ? n : 1, sizeof(*stale));
    if (!plans || !stale) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n && rc == MR_OK; k++) rc = mr__plan_outputs(dag, k, &plans[k], err);
    if (rc != MR_OK) goto done;
    warm_set warm;
    warm_inputs(ws, dag, n, &warm);
    char git_desc[80] = "";
    for (size_t k = 0; k < n; k++)
        if (spec->stages[k].op->flags & MR_OP_GIT_COMMIT) {
            mr__git_describe(ws->root, git_desc, sizeof(git_desc));
            break;
        }
    const size_t *order = mr_dag_order(dag);
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        const char *name = spec->stages[i].name;
        json_t *reasons = json_array();
        const char *state = "up to date";
        size_t n_up;
        const size_t *up = mr_dag_upstream(dag, i, &n_up);
        for (size_t u = 0; u < n_up; u++)
            if (stale[up[u]] == 1) add_reason(reasons, "upstream stage '%s' is stale", spec->stages[up[u]].name);
        int served = 0;
        mr_error e;
        mr_error_init(&e);
        if (json_array_size(reasons) == 0) {
            if (mr__plan_inputs(dag, i, plans, &e) != MR_OK || (warm_fill(&warm, &plans[i]), 0) ||
                mr__plan_hash_inputs(ws, plans, &i, 1, NULL, &e) != MR_OK ||
                mr__plan_key(spec, i, smoke, git_desc, &plans[i], &e) != MR_OK) {
                add_reason(reasons, "%s", e.msg);
            } else if (mr__plan_cache_lookup(ws, &plans[i], NULL)) {
                if (!mr__plan_outputs_in_place(ws, &plans[i])) explain_workspace(ws, &plans[i], name, plans[i].key_doc, reasons);
            } else if (probe && !mr_error_is_set(&remote_err) && remote_has(probe, &plans[i], reasons, &remote_err)) {
                served = 1;
            } else {
                explain(ws, lock, name, plans[i].key_doc, reasons);
            }
        }
        if (served) { /* stale here, its result on the remote: what follows gets keys from it */
            stale[i] = 2;
            n_stale++;
            n_remote++;
            state = "remote";
        } else if (json_array_size(reasons)) {
            stale[i] = 1;
            n_stale++;
            state = "stale";
        }
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:o}", "stage", name, "state", state, "key", plans[i].key,
                                             "reasons", reasons));
    }
    mr_free(warm.paths);
    mr_free(warm.ids);
    if (json) {
        json_t *doc = json_pack("{s:O,s:i}", "stages", arr, "stale", n_stale);
        if (probe) json_object_set_new(doc, "remote", json_integer(n_remote));
        char *t = json_dumps(doc, JSON_INDENT(2));
        if (t) mr_buf_printf(out, "%s\n", t);
        free(t);
        json_decref(doc);
    } else {
        size_t idx;
        json_t *s;
        json_array_foreach(arr, idx, s)
        {
            const char *st = json_string_value(json_object_get(s, "state"));
            int is_stale = strcmp(st, "up to date") != 0;
            mr_buf_printf(out, "%s%-11s%s %s\n", is_stale ? mr_c_yellow() : mr_c_green(), st, mr_c_reset(),
                          json_string_value(json_object_get(s, "stage")));
            size_t r;
            json_t *why;
            json_array_foreach(json_object_get(s, "reasons"), r, why) mr_buf_printf(out, "            - %s\n", json_string_value(why));
        }
        if (!n_stale) mr_buf_puts(out, "everything is up to date\n");
        else if (probe)
            mr_buf_printf(out, "%d of %d stale stage%s the remote '%s' can serve\n", n_remote, n_stale,
                          n_stale == 1 ? "" : "s", mr__remote_probe_name(probe));
    }
done:
    mr__remote_probe_close(probe);
    if (rc == MR_OK && mr_error_is_set(&remote_err)) { /* the remote failed: say so, after the local answer */
        rc = remote_err.code;
        if (err) *err = remote_err;
    }
    if (n_stale_out) *n_stale_out = n_stale;
    for (size_t k = 0; plans && k < spec->n_stages; k++) mr__plan_free(&plans[k]);
    mr_free(plans);
    mr_free(stale);
    mr_value_free(lock);
    mr_dag_free(dag);
    json_decref(arr);
    return rc;
}

/* ---- verify --------------------------------------------------------------- */

typedef struct vctx {
    json_t *problems;
} vctx;

static void on_problem(void *ctx, const char *id, const char *problem)
{
    vctx *v = ctx;
    json_array_append_new(v->problems, json_pack("{s:s,s:s}", "artifact", id, "problem", problem));
}

/* Collects artifact ids of the lock's inputs and outputs. */
static void lock_ids(const mr_value *lock, json_t *ids)
{
    const mr_value *stages = mr_value_get(lock, "stages");
    for (size_t s = 0; stages && stages->kind == MR_V_MAP && s < stages->n; s++) {
        const char *sections[2] = {"outputs", "inputs"};
        for (int q = 0; q < 2; q++) {
            const mr_value *m = mr_value_get(stages->items[s], sections[q]);
            for (size_t k = 0; m && m->kind == MR_V_MAP && k < m->n; k++)
                if (m->items[k]->kind == MR_V_STR)
                    json_object_set_new(ids, m->items[k]->str, json_pack("{s:s,s:s,s:b}", "stage", stages->keys[s], "name",
                                                                          m->keys[k], "output", q == 0));
        }
    }
}

mr_status mr_pipeline_verify(mr_workspace *ws, int json, mr_buf *out, int *n_problems_out, mr_error *err)
{
    vctx v = {json_array()};
    mr_verify_stats stats;
    mr_value *lock = NULL;
    json_t *ids = json_object();
    mr_status rc = mr_store_verify(ws->store, on_problem, &v, &stats, err);
    if (rc == MR_OK) rc = mr__lock_read(ws, &lock, err);
    if (rc != MR_OK) goto done;
    lock_ids(lock, ids);
    const char *id;
    json_t *info;
    json_object_foreach(ids, id, info)
    {
        mr_artifact a;
        if (!json_is_true(json_object_get(info, "output"))) continue;
        if (mr_artifact_parse(id, &a) != MR_OK || !mr_store_has(ws->store, &a)) {
            char msg[512];
            snprintf(msg, sizeof(msg), "missing: output '%s' of stage '%s' in millrace.lock is not in the store",
                     json_string_value(json_object_get(info, "name")), json_string_value(json_object_get(info, "stage")));
            on_problem(&v, id, msg);
        }
    }
    /* every registered model version's bundle is in the store */
    mr_model_summary *models = NULL;
    size_t n_models = 0;
    rc = mr_registry_list(ws, &models, &n_models, err);
    for (size_t m = 0; rc == MR_OK && m < n_models; m++) {
        mr_model_version *vers = NULL;
        size_t n_vers = 0;
        rc = mr_registry_versions(ws, models[m].name, &vers, &n_vers, err);
        for (size_t k = 0; rc == MR_OK && k < n_vers; k++) {
            mr_artifact a;
            if (mr_artifact_parse(vers[k].artifact, &a) == MR_OK && mr_store_has(ws->store, &a)) continue;
            char msg[512];
            snprintf(msg, sizeof(msg), "missing: the bundle of model %s version %lld is not in the store",
                     vers[k].name, (long long)vers[k].version);
            on_problem(&v, vers[k].artifact, msg);
        }
        mr_model_versions_free(vers, n_vers);
    }
    mr_model_summaries_free(models, n_models);
    if (rc != MR_OK) goto done;
    size_t n_problems = json_array_size(v.problems);
    if (json) {
        json_t *doc = json_pack("{s:I,s:I,s:O,s:b}", "objects", (json_int_t)stats.n_objects, "bytes", (json_int_t)stats.n_bytes,
                                "problems", v.problems, "ok", n_problems == 0);
        char *t = json_dumps(doc, JSON_INDENT(2));
        if (t) mr_buf_printf(out, "%s\n", t);
        free(t);
        json_decref(doc);
    } else {
        size_t k;
        json_t *p;
        json_array_foreach(v.problems, k, p) mr_buf_printf(out, "%s: %s\n", json_string_value(json_object_get(p, "artifact")),
                                                           json_string_value(json_object_get(p, "problem")));
        mr_buf_printf(out, "verified %llu objects (%.1f MB): %zu problem%s\n", (unsigned long long)stats.n_objects,
                      (double)stats.n_bytes / 1e6, n_problems, n_problems == 1 ? "" : "s");
    }
    if (n_problems_out) *n_problems_out = (int)n_problems;
done:
    mr_value_free(lock);
    json_decref(ids);
    json_decref(v.problems);
    return rc;
}

/* ---- gc ------------------------------------------------------------------- */

/* gc runs alone: runs and stage workers hold .millrace/locks/gc.lock shared
 * for as long as they may publish or read artifacts, gc holds it exclusive,
 * so it never deletes what a running run may still use or has just
 * written without recording it yet. The order of deletion keeps the store
 * and the stage cache consistent at every instant: first the cache
 * entries that name doomed objects, then the doomed manifests, then the
 * files (mr_store_gc_apply). A gc killed at any point leaves a smaller,
 * valid store. */
mr_status mr_pipeline_gc(mr_workspace *ws, int keep_runs, int dry_run, int json, mr_buf *out, mr_error *err)
{
    return mr_pipeline_gc_remote(ws, NULL, NULL, keep_runs, dry_run, json, out, err);
}

mr_status mr_pipeline_gc_remote(mr_workspace *ws, const mr_spec *spec, const char *remote, int keep_runs, int dry_run,
                                int json, mr_buf *out, mr_error *err)
{
    mr_value *lock = NULL;
    json_t *ids = json_object();
    char **run_ids = NULL;
    size_t n_run_ids = 0;
    mr_artifact *keep = NULL;
    size_t n_keep = 0;
    mr_gc_plan plan;
    memset(&plan, 0, sizeof(plan));
    int n_pruned = 0;
    mr_flock glk = {-1, NULL};
    mr_status rc = mr__workspace_gc_lock(ws, MR_LOCK_EXCLUSIVE, &glk, err);
    if (rc == MR_OK) rc = mr__lock_read(ws, &lock, err);
    if (rc == MR_OK) rc = mr_runstore_kept_artifacts(ws->rs, keep_runs, &run_ids, &n_run_ids, err);
    if (rc != MR_OK) goto done;
    lock_ids(lock, ids);
    keep = mr_calloc(json_object_size(ids) + n_run_ids + 1, sizeof(*keep));
    if (!keep) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    const char *id;
    json_t *info;
    json_object_foreach(ids, id, info)
    {
        if (mr_artifact_parse(id, &keep[n_keep]) == MR_OK) n_keep++;
    }
    for (size_t k = 0; k < n_run_ids; k++)
        if (mr_artifact_parse(run_ids[k], &keep[n_keep]) == MR_OK) n_keep++;
    if (remote && spec) { /* the remote's objects, against the same kept set; the local store is left alone */
        char **kid = mr_calloc(n_keep ? n_keep : 1, sizeof(*kid));
        rc = kid ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; rc == MR_OK && k < n_keep; k++) {
            kid[k] = mr_malloc(MR_ARTIFACT_ID_LEN);
            if (!kid[k]) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            else mr_artifact_id(&keep[k], kid[k]);
        }
        if (rc == MR_OK)
            rc = mr__remote_gc(ws, spec, remote[0] ? remote : NULL, (const char *const *)kid, n_keep, dry_run, json, out,
                               err);
        for (size_t k = 0; kid && k < n_keep; k++) mr_free(kid[k]);
        mr_free(kid);
        goto done;
    }
    rc = mr_store_gc_plan(ws->store, keep, n_keep, &plan, err);
    if (rc == MR_OK && !dry_run) rc = mr_runstore_cache_prune(ws->rs, ws->store, plan.doomed, plan.n_doomed, &n_pruned, err);
    if (rc == MR_OK && !dry_run) rc = mr_store_gc_apply(ws->store, &plan, err);
    if (rc == MR_OK && !dry_run) {
        /* Derived caches (binned matrices) are rebuilt on demand: gc empties them. */
        char *bins = mr_path_join(ws->dot, "cache/binned");
        if (bins) mr_fs_rmtree(bins, NULL);
        mr_free(bins);
    }
    if (rc != MR_OK) goto done;
    const mr_gc_stats *stats = &plan.stats;
    if (json) {
        json_t *doc = json_pack("{s:I,s:I,s:I,s:i,s:b}", "kept", (json_int_t)stats->n_kept, "deleted", (json_int_t)stats->n_deleted,
                                "bytes_deleted", (json_int_t)stats->bytes_deleted, "cache_entries_dropped", n_pruned,
                                "dry_run", dry_run);
        char *t = json_dumps(doc, JSON_INDENT(2));
        if (t) mr_buf_printf(out, "%s\n", t);
        free(t);
        json_decref(doc);
    } else {
        mr_buf_printf(out, "%s %llu objects (%.1f MB), kept %llu%s\n", dry_run ? "would delete" : "deleted",
                      (unsigned long long)stats->n_deleted, (double)stats->bytes_deleted / 1e6, (unsigned long long)stats->n_kept,
                      dry_run ? " (dry run)" : "");
    }
done:
    mr_flock_release(&glk);
    mr_store_gc_plan_free(&plan);
    for (size_t k = 0; k < n_run_ids; k++) mr_free(run_ids[k]);
    mr_free(run_ids);
    mr_free(keep);
    mr_value_free(lock);
    json_decref(ids);
    return rc;
}
