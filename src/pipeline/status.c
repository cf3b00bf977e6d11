/* `millrace status`, `verify` and `gc`. Status plans every stage as a run
 * would (hashing inputs through the stat cache) without running anything,
 * and explains a stale stage by diffing its key document against the one
 * recorded for its last result. */
#include "pipeline_int.h"

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

static char *short_json(json_t *v)
{
    if (!v) return mr_strdup("(none)");
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    char *r = mr_strdup(t ? t : "?");
    free(t);
    if (r && strlen(r) > 60) memcpy(r + 56, "...", 4);
    return r;
}

static void diff_objects(json_t *old, json_t *cur, const char *what, json_t *reasons)
{
    const char *k;
    json_t *v;
    json_object_foreach(cur, k, v)
    {
        json_t *o = json_object_get(old, k);
        if (!o) {
            add_reason(reasons, "%s '%s' added", what, k);
        } else if (!json_equal(o, v)) {
            if (!strcmp(what, "input")) {
                add_reason(reasons, "input '%s' changed", k);
            } else {
                char *a = short_json(o), *b = short_json(v);
                add_reason(reasons, "%s '%s' changed: %s -> %s", what, k, a ? a : "", b ? b : "");
                mr_free(a);
                mr_free(b);
            }
        }
    }
    json_object_foreach(old, k, v)
    {
        if (!json_object_get(cur, k)) add_reason(reasons, "%s '%s' removed", what, k);
    }
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
    json_t *o = json_loads(prev_doc, 0, NULL), *c = json_loads(cur_doc, 0, NULL);
    mr_free(prev_doc);
    size_t before = json_array_size(reasons);
    if (o && c) {
        if (!json_equal(json_object_get(o, "op_version"), json_object_get(c, "op_version")))
            add_reason(reasons, "op version changed: %lld -> %lld", (long long)json_integer_value(json_object_get(o, "op_version")),
                       (long long)json_integer_value(json_object_get(c, "op_version")));
        if (!json_equal(json_object_get(o, "smoke"), json_object_get(c, "smoke")))
            add_reason(reasons, "smoke mode differs from the cached result");
        diff_objects(json_object_get(o, "params"), json_object_get(c, "params"), "param", reasons);
        diff_objects(json_object_get(o, "def"), json_object_get(c, "def"), "setting", reasons);
        diff_objects(json_object_get(o, "inputs"), json_object_get(c, "inputs"), "input", reasons);
    }
    if (json_array_size(reasons) == before) add_reason(reasons, "its cached result is gone (gc) or was never recorded");
    json_decref(o);
    json_decref(c);
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
    mr_dag *dag = NULL;
    mr_value *lock = NULL;
    mr__plan *plans = NULL;
    int *stale = NULL;
    json_t *arr = json_array();
    int n_stale = 0;
    mr_status rc = mr_dag_build(spec, &dag, err);
    if (rc == MR_OK) rc = mr__lock_read(ws, &lock, err);
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
    const size_t *order = mr_dag_order(dag);
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        const char *name = spec->stages[i].name;
        json_t *reasons = json_array();
        const char *state = "up to date";
        size_t n_up;
        const size_t *up = mr_dag_upstream(dag, i, &n_up);
        for (size_t u = 0; u < n_up; u++)
            if (stale[up[u]]) add_reason(reasons, "upstream stage '%s' is stale", spec->stages[up[u]].name);
        mr_error e;
        mr_error_init(&e);
        if (json_array_size(reasons) == 0) {
            if (mr__plan_inputs(dag, i, plans, &e) != MR_OK || (warm_fill(&warm, &plans[i]), 0) ||
                mr__plan_hash_inputs(ws, plans, &i, 1, NULL, &e) != MR_OK ||
                mr__plan_key(spec, i, smoke, &plans[i], &e) != MR_OK) {
                add_reason(reasons, "%s", e.msg);
            } else if (mr__plan_cache_lookup(ws, &plans[i], NULL)) {
                if (!mr__plan_outputs_in_place(ws, &plans[i]))
                    add_reason(reasons, "outputs missing or modified in the workspace (a run restores them from the cache)");
            } else {
                explain(ws, lock, name, plans[i].key_doc, reasons);
            }
        }
        if (json_array_size(reasons)) {
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
            int is_stale = !strcmp(st, "stale");
            mr_buf_printf(out, "%s%-11s%s %s\n", is_stale ? mr_c_yellow() : mr_c_green(), st, mr_c_reset(),
                          json_string_value(json_object_get(s, "stage")));
            size_t r;
            json_t *why;
            json_array_foreach(json_object_get(s, "reasons"), r, why) mr_buf_printf(out, "            - %s\n", json_string_value(why));
        }
        if (!n_stale) mr_buf_puts(out, "everything is up to date\n");
    }
done:
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

mr_status mr_pipeline_gc(mr_workspace *ws, int keep_runs, int dry_run, int json, mr_buf *out, mr_error *err)
{
    mr_value *lock = NULL;
    json_t *ids = json_object();
    char **run_ids = NULL;
    size_t n_run_ids = 0;
    mr_artifact *keep = NULL;
    size_t n_keep = 0;
    mr_gc_stats stats;
    int n_pruned = 0;
    mr_status rc = mr__lock_read(ws, &lock, err);
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
    rc = mr_store_gc(ws->store, keep, n_keep, dry_run, &stats, err);
    {
        /* Derived caches (binned matrices) are rebuilt on demand: gc empties them. */
        char *bins = mr_path_join(ws->dot, "cache/binned");
        if (bins && !dry_run && rc == MR_OK) mr_fs_rmtree(bins, NULL);
        mr_free(bins);
    }
    if (rc == MR_OK && !dry_run) rc = mr_runstore_cache_prune(ws->rs, ws->store, &n_pruned, err);
    if (rc != MR_OK) goto done;
    if (json) {
        json_t *doc = json_pack("{s:I,s:I,s:I,s:i,s:b}", "kept", (json_int_t)stats.n_kept, "deleted", (json_int_t)stats.n_deleted,
                                "bytes_deleted", (json_int_t)stats.bytes_deleted, "cache_entries_dropped", n_pruned,
                                "dry_run", dry_run);
        char *t = json_dumps(doc, JSON_INDENT(2));
        if (t) mr_buf_printf(out, "%s\n", t);
        free(t);
        json_decref(doc);
    } else {
        mr_buf_printf(out, "%s %llu objects (%.1f MB), kept %llu%s\n", dry_run ? "would delete" : "deleted",
                      (unsigned long long)stats.n_deleted, (double)stats.bytes_deleted / 1e6, (unsigned long long)stats.n_kept,
                      dry_run ? " (dry run)" : "");
    }
done:
    for (size_t k = 0; k < n_run_ids; k++) mr_free(run_ids[k]);
    mr_free(run_ids);
    mr_free(keep);
    mr_value_free(lock);
    json_decref(ids);
    return rc;
}
