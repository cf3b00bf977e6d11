/* The --json documents of `millrace runs`, `show` and `compare`, printed
 * from the read views (runstore_read.c). The shapes are documented in
 * docs/cli.md; scripts depend on them, so fields are only ever added. */
#include "runstore_int.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* A JSON string, or null for NULL; invalid UTF-8 bytes become '?'. */
static json_t *jstr(const char *s)
{
    json_t *v = NULL;
    if (!s) {
        v = json_null();
        goto done;
    }
    v = json_string(s);
    if (!v) {
        char *c = mr_strdup(s);
        if (!c) goto done;
        for (char *p = c; *p; p++)
            if ((unsigned char)*p >= 0x80) *p = '?';
        v = json_string(c);
        mr_free(c);
    }
done:
    return v;
}

static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jtime(double t)
{
    char buf[32] = "";
    if (!isnan(t)) mr_iso_time(t, buf, sizeof(buf));
    return buf[0] ? json_string(buf) : json_null();
}

/* json_object_set_new that reports failure (v NULL = allocation failed). */
static int jset(json_t *o, const char *k, json_t *v) { return json_object_set_new(o, k, v) ? 1 : 0; }

static json_t *jvalue(const mr_value *v)
{
    json_t *o = NULL;
    if (!v) return json_null();
    switch (v->kind) {
    case MR_V_NULL: o = json_null(); break;
    case MR_V_BOOL: o = json_boolean(v->u.b); break;
    case MR_V_INT: o = json_integer((json_int_t)v->u.i); break;
    case MR_V_FLOAT: o = isfinite(v->u.f) ? json_real(v->u.f) : json_null(); break;
    case MR_V_STR: o = jstr(v->str ? v->str : ""); break;
    case MR_V_SEQ:
        o = json_array();
        for (size_t i = 0; o && i < v->n; i++)
            if (json_array_append_new(o, jvalue(v->items[i]))) {
                json_decref(o);
                o = NULL;
            }
        break;
    case MR_V_MAP:
        o = json_object();
        for (size_t i = 0; o && i < v->n; i++)
            if (jset(o, v->keys[i], jvalue(v->items[i]))) {
                json_decref(o);
                o = NULL;
            }
        break;
    }
    return o;
}

/* Dumps root into out. oom0 is mr_alloc_failures_here() from before root
 * was built: jansson can lose a key or a character when an allocation fails
 * and still return a document (the torture saw '"n_executed":0,":0'), so
 * any failure since then is out of memory, never half-written JSON. */
static mr_status emit(json_t *root, uint64_t oom0, mr_buf *out, mr_error *err)
{
    mr_status st = MR_OK;
    char *s = root ? json_dumps(root, JSON_FLAGS) : NULL;
    if (!s || mr_alloc_failures_here() != oom0) {
        free(s); /* allocated by jansson */
        st = mr__runstore_nomem(err);
        goto done;
    }
    st = mr_buf_puts(out, s);
    if (st != MR_OK) st = MR_ERR(err, st, "%s", st == MR_E_NOMEM ? "out of memory" : "JSON output too large");
    free(s); /* allocated by jansson */
done:
    json_decref(root);
    return st;
}

/* The summary object of a run; full adds cwd and the params. */
static json_t *run_obj(const mr_run_summary *r, int full)
{
    int bad = 0;
    json_t *o = json_object(), *tags = json_object();
    if (!o || !tags) {
        json_decref(tags);
        goto fail;
    }
    bad |= jset(o, "id", json_integer((json_int_t)r->id));
    bad |= jset(o, "started", jtime(r->started));
    bad |= jset(o, "started_s", jreal(r->started));
    bad |= jset(o, "ended", jtime(r->ended));
    bad |= jset(o, "duration_s", isnan(r->ended) ? json_null() : json_real(r->ended - r->started));
    bad |= jset(o, "status", jstr(r->status));
    bad |= jset(o, "argv", jstr(r->argv));
    bad |= jset(o, "git_commit", jstr(r->git_commit));
    bad |= jset(o, "git_dirty", json_boolean(r->git_dirty));
    bad |= jset(o, "smoke", json_boolean(r->smoke));
    bad |= jset(o, "overrides", jstr(r->overrides));
    bad |= jset(o, "n_executed", json_integer((json_int_t)r->n_executed));
    bad |= jset(o, "n_cached", json_integer((json_int_t)r->n_cached));
    bad |= jset(o, "n_failed", json_integer((json_int_t)r->n_failed));
    bad |= jset(o, "n_skipped", json_integer((json_int_t)r->n_skipped));
    bad |= jset(o, "name", jstr(r->name));
    for (size_t i = 0; i < r->n_tags; i++) bad |= jset(tags, r->tags[i].key, jstr(r->tags[i].value));
    bad |= jset(o, "tags", tags);
    if (full) {
        bad |= jset(o, "cwd", jstr(r->cwd));
        bad |= jset(o, "params", jvalue(r->params));
    }
    if (!bad) return o;
fail:
    json_decref(o);
    return NULL;
}

mr_status mr_run_list_json(const mr_run_list *l, mr_buf *out, mr_error *err)
{
    uint64_t oom0 = mr_alloc_failures_here();
    int bad = 0;
    json_t *root = json_object(), *arr = json_array();
    for (size_t i = 0; arr && i < l->n && !bad; i++) {
        json_t *r = run_obj(&l->runs[i], 0);
        if (r && l->n_columns) {
            json_t *cols = json_object();
            for (size_t j = 0; cols && j < l->n_columns; j++)
                bad |= jset(cols, l->columns[j], jvalue(l->cells[i * l->n_columns + j]));
            bad |= jset(r, "columns", cols);
        }
        bad |= json_array_append_new(arr, r) ? 1 : 0;
    }
    if (!root || jset(root, "runs", arr) || bad) { /* (jset takes arr, also when it fails) */
        if (!root) json_decref(arr);
        json_decref(root);
        return mr__runstore_nomem(err);
    }
    return emit(root, oom0, out, err);
}

static json_t *stage_obj(const mr_stage_run *s)
{
    int bad = 0;
    json_t *o = json_object(), *outs = s->has_outputs ? json_object() : json_null();
    if (!o || !outs) {
        json_decref(outs);
        goto fail;
    }
    bad |= jset(o, "stage", jstr(s->stage));
    bad |= jset(o, "op", jstr(s->op));
    bad |= jset(o, "key", jstr(s->key));
    bad |= jset(o, "status", jstr(s->status));
    bad |= jset(o, "started", jtime(s->started));
    bad |= jset(o, "started_s", jreal(s->started));
    bad |= jset(o, "wall_s", jreal(s->wall_s));
    bad |= jset(o, "user_s", jreal(s->user_s));
    bad |= jset(o, "sys_s", jreal(s->sys_s));
    bad |= jset(o, "max_rss_kb", json_integer((json_int_t)s->max_rss_kb));
    bad |= jset(o, "bytes_read", json_integer((json_int_t)s->bytes_read));
    bad |= jset(o, "bytes_written", json_integer((json_int_t)s->bytes_written));
    bad |= jset(o, "error", jstr(s->error));
    for (size_t k = 0; k < s->n_outputs; k++) bad |= jset(outs, s->outputs[k].name, jstr(s->outputs[k].artifact));
    bad |= jset(o, "outputs", outs);
    if (!bad) return o;
fail:
    json_decref(o);
    return NULL;
}

mr_status mr_run_detail_json(const mr_run_detail *d, mr_buf *out, mr_error *err)
{
    uint64_t oom0 = mr_alloc_failures_here();
    int bad = 0;
    json_t *root = json_object(), *stages = json_array(), *metrics = json_array(), *lineage = json_array();
    for (size_t i = 0; stages && i < d->n_stages; i++) bad |= json_array_append_new(stages, stage_obj(&d->stages[i])) ? 1 : 0;
    for (size_t i = 0; metrics && i < d->n_metrics; i++) {
        const mr_run_point *p = &d->metrics[i];
        bad |= json_array_append_new(metrics, json_pack("{s:o,s:o,s:I,s:o}", "stage", jstr(p->stage), "name",
                                                        jstr(p->name), "step", (json_int_t)p->step, "value",
                                                        isnan(p->value) ? json_null() : json_real(p->value)))
                   ? 1
                   : 0;
    }
    for (size_t i = 0; lineage && i < d->n_lineage; i++) {
        const mr_run_lineage *e = &d->lineage[i];
        bad |= json_array_append_new(lineage, json_pack("{s:o,s:o,s:o,s:o}", "stage", jstr(e->stage), "role",
                                                        jstr(e->role), "name", jstr(e->name), "artifact",
                                                        jstr(e->artifact)))
                   ? 1
                   : 0;
    }
    /* jset consumes its value even on failure: every array is root's from here on. */
    bad |= root ? jset(root, "run", run_obj(&d->run, 1)) : 1;
    bad |= root ? jset(root, "stages", stages) : 1;
    bad |= root ? jset(root, "metrics", metrics) : 1;
    bad |= root ? jset(root, "lineage", lineage) : 1;
    if (bad) {
        if (!root) {
            json_decref(stages);
            json_decref(metrics);
            json_decref(lineage);
        }
        json_decref(root);
        return mr__runstore_nomem(err);
    }
    return emit(root, oom0, out, err);
}

/* The two-run fields (a, b[, delta]) are kept beside `values` when exactly
 * two runs are compared: the shape scripts read before N-run compare. */
static json_t *param_obj(const mr_run_compare *c, const mr_compare_param *p)
{
    int bad = 0;
    json_t *o = json_object(), *vals = json_array();
    if (!o || !vals) {
        json_decref(vals);
        goto fail;
    }
    bad |= jset(o, "path", jstr(p->path));
    if (c->n_runs == 2) {
        bad |= jset(o, "a", jvalue(p->values[0]));
        bad |= jset(o, "b", jvalue(p->values[1]));
    }
    for (size_t r = 0; r < c->n_runs; r++) bad |= json_array_append_new(vals, jvalue(p->values[r])) ? 1 : 0;
    bad |= jset(o, "values", vals);
    bad |= jset(o, "changed", json_boolean(p->changed));
    if (!bad) return o;
fail:
    json_decref(o);
    return NULL;
}

static json_t *metric_num(const mr_compare_metric *m, size_t r)
{
    return m->present[r] && isfinite(m->values[r]) ? json_real(m->values[r]) : json_null();
}

static json_t *metric_obj(const mr_run_compare *c, const mr_compare_metric *m)
{
    int bad = 0;
    json_t *o = json_object(), *vals = json_array();
    if (!o || !vals) {
        json_decref(vals);
        goto fail;
    }
    bad |= jset(o, "stage", jstr(m->stage));
    bad |= jset(o, "name", jstr(m->name));
    if (c->n_runs == 2) {
        bad |= jset(o, "a", metric_num(m, 0));
        bad |= jset(o, "b", metric_num(m, 1));
        bad |= jset(o, "delta", m->present[0] && m->present[1] && isfinite(m->values[1] - m->values[0])
                                    ? json_real(m->values[1] - m->values[0])
                                    : json_null());
    }
    for (size_t r = 0; r < c->n_runs; r++) bad |= json_array_append_new(vals, metric_num(m, r)) ? 1 : 0;
    bad |= jset(o, "values", vals);
    bad |= jset(o, "changed", json_boolean(m->changed));
    if (!bad) return o;
fail:
    json_decref(o);
    return NULL;
}

static json_t *cmp_stage_obj(const mr_run_compare *c, const mr_compare_stage *s)
{
    int bad = 0;
    json_t *o = json_object(), *keys = json_array(), *sts = json_array();
    if (!o || !keys || !sts) {
        json_decref(keys);
        json_decref(sts);
        goto fail;
    }
    bad |= jset(o, "stage", jstr(s->stage));
    if (c->n_runs == 2) {
        bad |= jset(o, "a_key", jstr(s->keys[0]));
        bad |= jset(o, "b_key", jstr(s->keys[1]));
        bad |= jset(o, "a_status", jstr(s->statuses[0]));
        bad |= jset(o, "b_status", jstr(s->statuses[1]));
    }
    for (size_t r = 0; r < c->n_runs; r++) {
        bad |= json_array_append_new(keys, jstr(s->keys[r])) ? 1 : 0;
        bad |= json_array_append_new(sts, jstr(s->statuses[r])) ? 1 : 0;
    }
    bad |= jset(o, "keys", keys);
    bad |= jset(o, "statuses", sts);
    bad |= jset(o, "changed", json_boolean(s->changed));
    if (!bad) return o;
fail:
    json_decref(o);
    return NULL;
}

mr_status mr_run_compare_json(const mr_run_compare *c, mr_buf *out, mr_error *err)
{
    uint64_t oom0 = mr_alloc_failures_here();
    int bad = 0;
    json_t *root = json_object(), *runs = json_array(), *params = json_array(), *metrics = json_array(),
           *stages = json_array();
    if (root && c->n_runs == 2) {
        bad |= jset(root, "a", json_integer((json_int_t)c->runs[0].id));
        bad |= jset(root, "b", json_integer((json_int_t)c->runs[1].id));
    }
    for (size_t r = 0; runs && r < c->n_runs; r++)
        bad |= json_array_append_new(runs, json_integer((json_int_t)c->runs[r].id)) ? 1 : 0;
    for (size_t i = 0; params && i < c->n_params; i++)
        bad |= json_array_append_new(params, param_obj(c, &c->params[i])) ? 1 : 0;
    for (size_t i = 0; metrics && i < c->n_metrics; i++)
        bad |= json_array_append_new(metrics, metric_obj(c, &c->metrics[i])) ? 1 : 0;
    for (size_t i = 0; stages && i < c->n_stages; i++)
        bad |= json_array_append_new(stages, cmp_stage_obj(c, &c->stages[i])) ? 1 : 0;
    /* jset consumes its value even on failure: every array is root's from here on. */
    bad |= root ? jset(root, "runs", runs) : 1;
    bad |= root ? jset(root, "params", params) : 1;
    bad |= root ? jset(root, "metrics", metrics) : 1;
    bad |= root ? jset(root, "stages", stages) : 1;
    if (bad) {
        if (!root) {
            json_decref(runs);
            json_decref(params);
            json_decref(metrics);
            json_decref(stages);
        }
        json_decref(root);
        return mr__runstore_nomem(err);
    }
    return emit(root, oom0, out, err);
}
