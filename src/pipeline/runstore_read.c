/* The run store's read views (include/millrace/runstore.h): run summaries
 * (shared with the run list, runstore_list.c), one run's detail, N runs side
 * by side, a tune stage's trials, and the stage run that produced a given
 * set of outputs. Each view is built into owned structs, never as text: the
 * CLI, the report and `status` read the structs, and runstore_json.c prints
 * the --json documents from them. */
#include "runstore_int.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers shared with runstore_list.c ------------------------------------ */

static double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

/* Grows *v (elements of size elem) to hold one more; MR_E_NOMEM leaves it as is. */
mr_status mr__runstore_grow(void **v, size_t n, size_t *cap, size_t elem, mr_error *err)
{
    mr_status st = MR_OK;
    if (n < *cap) goto done;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *nv = mr_realloc(*v, ncap * elem);
    if (!nv) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    memset((char *)nv + *cap * elem, 0, (ncap - *cap) * elem);
    *v = nv;
    *cap = ncap;
done:
    return st;
}

/* ---- summaries ------------------------------------------------------------ */

void mr__runstore_summary_deinit(mr_run_summary *r)
{
    mr_free(r->name);
    mr_free(r->status);
    mr_free(r->argv);
    mr_free(r->cwd);
    mr_free(r->git_commit);
    mr_free(r->overrides);
    for (size_t i = 0; i < r->n_tags; i++) {
        mr_free(r->tags[i].key);
        mr_free(r->tags[i].value);
    }
    mr_free(r->tags);
    mr_value_free(r->params);
    for (size_t i = 0; i < r->n_finals; i++) {
        mr_free(r->finals[i].stage);
        mr_free(r->finals[i].name);
    }
    mr_free(r->finals);
    memset(r, 0, sizeof(*r));
}

/* Fills r from a row of MR__RUN_COLS (r zeroed by the caller). */
mr_status mr__runstore_fill_summary(sqlite3_stmt *s, mr_run_summary *r, mr_error *err)
{
    mr_status st = MR_OK;
    r->id = sqlite3_column_int64(s, 0);
    r->started = col_real(s, 1);
    r->ended = col_real(s, 2);
    r->git_dirty = sqlite3_column_int(s, 6) != 0;
    r->smoke = sqlite3_column_int(s, 7) != 0;
    r->n_executed = sqlite3_column_int64(s, 9);
    r->n_cached = sqlite3_column_int64(s, 10);
    r->n_failed = sqlite3_column_int64(s, 11);
    r->n_skipped = sqlite3_column_int64(s, 12);
    st = mr__runstore_col_dup(s, 3, &r->status, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 4, &r->argv, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 5, &r->git_commit, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 8, &r->overrides, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 13, &r->cwd, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 15, &r->name, err);
    if (st == MR_OK && r->params == NULL)
        st = mr__runstore_parse_json((const char *)sqlite3_column_text(s, 14), &r->params, err);
    return st;
}

mr_status mr__runstore_load_tags(mr_runstore *rs, mr_run_summary *r, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc;
    st = mr__runstore_prepare(rs, "SELECT key, value FROM run_tags WHERE run_id = ?1 ORDER BY key", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, r->id);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&r->tags, r->n_tags, &cap, sizeof(*r->tags), err);
        if (st != MR_OK) break;
        mr_run_tag *t = &r->tags[r->n_tags++];
        st = mr__runstore_col_dup(s, 0, &t->key, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 1, &t->value, err);
        if (st == MR_OK && !t->key) st = mr__runstore_nomem(err); /* NOT NULL column: only OOM gives NULL */
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading run tags");
done:
    sqlite3_finalize(s);
    return st;
}

/* The final value of each (stage, name) of the run: the value at the highest step. */
mr_status mr__runstore_load_finals(mr_runstore *rs, mr_run_summary *r, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc;
    st = mr__runstore_prepare(
        rs, "SELECT stage, name, step, value FROM metrics WHERE run_id = ?1 ORDER BY stage, name, step, rowid", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, r->id);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *stage = (const char *)sqlite3_column_text(s, 0), *name = (const char *)sqlite3_column_text(s, 1);
        if (!stage || !name) continue;
        mr_run_final *last = r->n_finals ? &r->finals[r->n_finals - 1] : NULL;
        if (!last || strcmp(last->stage, stage) || strcmp(last->name, name)) {
            st = mr__runstore_grow((void **)&r->finals, r->n_finals, &cap, sizeof(*r->finals), err);
            if (st != MR_OK) break;
            last = &r->finals[r->n_finals++];
            last->stage = mr_strdup(stage);
            last->name = mr_strdup(name);
            if (!last->stage || !last->name) st = mr__runstore_nomem(err);
        }
        last->step = sqlite3_column_int64(s, 2);
        last->value = col_real(s, 3); /* a later step overrides */
        last->n_steps++;
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading metrics");
done:
    sqlite3_finalize(s);
    return st;
}

/* One run's summary with its tags (and finals when asked). */
static mr_status load_summary(mr_runstore *rs, int64_t run_id, int finals, mr_run_summary *r, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    int rc;
    st = mr__runstore_prepare(rs, "SELECT " MR__RUN_COLS " FROM runs WHERE id = ?1", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, run_id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "no run '%lld'", (long long)run_id);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = mr__runstore_fail(rs, err, "reading runs");
        goto done;
    }
    st = mr__runstore_fill_summary(s, r, err);
    if (st == MR_OK) st = mr__runstore_load_tags(rs, r, err);
    if (st == MR_OK && finals) st = mr__runstore_load_finals(rs, r, err);
done:
    sqlite3_finalize(s);
    return st;
}

void mr__leaf_vec_free(mr__leaf_vec *lv)
{
    for (size_t i = 0; i < lv->n; i++) mr_free(lv->paths[i]);
    mr_free(lv->paths);
    mr_free(lv->values);
    memset(lv, 0, sizeof(*lv));
}

mr_status mr__runstore_flatten(const mr_value *v, const char *prefix, mr__leaf_vec *lv)
{
    mr_status st = MR_OK;
    if (v->kind == MR_V_MAP && (v->n > 0 || !prefix)) {
        for (size_t k = 0; k < v->n && st == MR_OK; k++) {
            char *path = prefix ? mr_asprintf("%s.%s", prefix, v->keys[k]) : mr_strdup(v->keys[k]);
            st = path ? mr__runstore_flatten(v->items[k], path, lv) : MR_E_NOMEM;
            mr_free(path);
        }
        goto done;
    }
    if (!prefix) goto done; /* params that are not a map: nothing to list */
    if (lv->n == lv->cap) {
        size_t ncap = lv->cap ? lv->cap * 2 : 16;
        char **np = mr_realloc(lv->paths, ncap * sizeof(*np));
        if (np) lv->paths = np;
        const mr_value **nv = np ? mr_realloc(lv->values, ncap * sizeof(*nv)) : NULL;
        if (!np || !nv) {
            st = MR_E_NOMEM;
            goto done;
        }
        lv->values = nv;
        lv->cap = ncap;
    }
    lv->paths[lv->n] = mr_strdup(prefix);
    if (!lv->paths[lv->n]) {
        st = MR_E_NOMEM;
        goto done;
    }
    lv->values[lv->n++] = v;
done:
    return st;
}

/* ---- one run -------------------------------------------------------------- */

void mr_run_detail_free(mr_run_detail *d)
{
    if (!d) return;
    mr__runstore_summary_deinit(&d->run);
    for (size_t i = 0; i < d->n_stages; i++) {
        mr_stage_run *s = &d->stages[i];
        mr_free(s->stage);
        mr_free(s->op);
        mr_free(s->key);
        mr_free(s->status);
        mr_free(s->error);
        for (size_t k = 0; k < s->n_outputs; k++) {
            mr_free(s->outputs[k].name);
            mr_free(s->outputs[k].artifact);
        }
        mr_free(s->outputs);
    }
    mr_free(d->stages);
    for (size_t i = 0; i < d->n_metrics; i++) {
        mr_free(d->metrics[i].stage);
        mr_free(d->metrics[i].name);
    }
    mr_free(d->metrics);
    for (size_t i = 0; i < d->n_lineage; i++) {
        mr_free(d->lineage[i].stage);
        mr_free(d->lineage[i].role);
        mr_free(d->lineage[i].name);
        mr_free(d->lineage[i].artifact);
    }
    mr_free(d->lineage);
    mr_free(d);
}

const mr_stage_run *mr_run_detail_stage(const mr_run_detail *d, const char *stage)
{
    const mr_stage_run *found = NULL;
    for (size_t i = 0; d && i < d->n_stages; i++)
        if (d->stages[i].stage && !strcmp(d->stages[i].stage, stage)) found = &d->stages[i];
    return found;
}

/* outputs_json {"name": "id", ...} into s->outputs (other shapes: none). */
static mr_status parse_outputs(const char *text, mr_stage_run *s, mr_error *err)
{
    mr_status st = MR_OK;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    const char *k;
    json_t *v;
    if (mr_alloc_failures_here() != oom0) { /* not "no outputs" */
        st = mr__runstore_nomem(err);
        goto done;
    }
    if (!json_is_object(o)) goto done;
    s->has_outputs = 1;
    s->outputs = mr_calloc(json_object_size(o) + 1, sizeof(*s->outputs));
    if (!s->outputs) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    json_object_foreach(o, k, v)
    {
        if (!json_is_string(v)) continue;
        mr_run_output *out = &s->outputs[s->n_outputs++];
        out->name = mr_strdup(k);
        out->artifact = mr_strdup(json_string_value(v));
        if (!out->name || !out->artifact) {
            st = mr__runstore_nomem(err);
            break;
        }
    }
done:
    json_decref(o);
    return st;
}

static mr_status load_stages(mr_runstore *rs, mr_run_detail *d, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc;
    st = mr__runstore_prepare(rs,
                              "SELECT stage, op, key, status, started, wall_s, user_s, sys_s, max_rss_kb, bytes_read,"
                              " bytes_written, error, outputs_json FROM stage_runs WHERE run_id = ?1 ORDER BY id",
                              &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, d->run.id);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&d->stages, d->n_stages, &cap, sizeof(*d->stages), err);
        if (st != MR_OK) break;
        mr_stage_run *r = &d->stages[d->n_stages++];
        st = mr__runstore_col_dup(s, 0, &r->stage, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 1, &r->op, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 2, &r->key, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 3, &r->status, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 11, &r->error, err);
        r->started = col_real(s, 4);
        r->wall_s = col_real(s, 5);
        r->user_s = col_real(s, 6);
        r->sys_s = col_real(s, 7);
        r->max_rss_kb = sqlite3_column_int64(s, 8);
        r->bytes_read = sqlite3_column_int64(s, 9);
        r->bytes_written = sqlite3_column_int64(s, 10);
        if (st == MR_OK) st = parse_outputs((const char *)sqlite3_column_text(s, 12), r, err);
        if (st == MR_OK && (!r->stage || !r->status)) st = mr__runstore_nomem(err); /* NOT NULL columns */
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading stage runs");
done:
    sqlite3_finalize(s);
    return st;
}

static mr_status load_points(mr_runstore *rs, mr_run_detail *d, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc;
    st = mr__runstore_prepare(
        rs, "SELECT stage, name, step, value FROM metrics WHERE run_id = ?1 ORDER BY stage, name, step, rowid", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, d->run.id);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&d->metrics, d->n_metrics, &cap, sizeof(*d->metrics), err);
        if (st != MR_OK) break;
        mr_run_point *p = &d->metrics[d->n_metrics++];
        st = mr__runstore_col_dup(s, 0, &p->stage, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 1, &p->name, err);
        if (st == MR_OK && (!p->stage || !p->name)) st = mr__runstore_nomem(err);
        p->step = sqlite3_column_int64(s, 2);
        p->value = col_real(s, 3);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading metrics");
done:
    sqlite3_finalize(s);
    return st;
}

static mr_status load_lineage(mr_runstore *rs, mr_run_detail *d, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc;
    st = mr__runstore_prepare(rs, "SELECT stage, role, name, artifact FROM lineage WHERE run_id = ?1 ORDER BY rowid",
                              &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_int64(s, 1, d->run.id);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&d->lineage, d->n_lineage, &cap, sizeof(*d->lineage), err);
        if (st != MR_OK) break;
        mr_run_lineage *e = &d->lineage[d->n_lineage++];
        st = mr__runstore_col_dup(s, 0, &e->stage, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 1, &e->role, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 2, &e->name, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 3, &e->artifact, err);
        if (st == MR_OK && (!e->stage || !e->role || !e->artifact)) st = mr__runstore_nomem(err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading lineage");
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_run_detail(mr_runstore *rs, int64_t run_id, mr_run_detail **out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_run_detail *d = mr_calloc(1, sizeof(*d));
    *out = NULL;
    if (!d) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    st = mr_runstore_reap(rs, NULL, err);
    if (st == MR_OK) st = load_summary(rs, run_id, 1, &d->run, err);
    if (st == MR_OK) st = load_stages(rs, d, err);
    if (st == MR_OK) st = load_points(rs, d, err);
    if (st == MR_OK) st = load_lineage(rs, d, err);
done:
    if (st != MR_OK) {
        mr_run_detail_free(d);
        d = NULL;
    }
    *out = d;
    return st;
}

mr_status mr_runstore_run_detail_finals(mr_runstore *rs, int64_t run_id, mr_run_detail **out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_run_detail *d = mr_calloc(1, sizeof(*d));
    *out = NULL;
    if (!d) return mr__runstore_nomem(err);
    st = mr_runstore_reap(rs, NULL, err);
    if (st == MR_OK) st = load_summary(rs, run_id, 1, &d->run, err);
    if (st == MR_OK) st = load_stages(rs, d, err);
    if (st == MR_OK && d->run.n_finals) { /* each metric's last point, from the finals */
        d->metrics = mr_calloc(d->run.n_finals, sizeof(*d->metrics));
        if (!d->metrics) st = mr__runstore_nomem(err);
        for (size_t i = 0; st == MR_OK && i < d->run.n_finals; i++) {
            mr_run_point *p = &d->metrics[d->n_metrics++];
            p->stage = mr_strdup(d->run.finals[i].stage);
            p->name = mr_strdup(d->run.finals[i].name);
            p->step = d->run.finals[i].step;
            p->value = d->run.finals[i].value;
            if (!p->stage || !p->name) st = mr__runstore_nomem(err);
        }
    }
    if (st == MR_OK) st = load_lineage(rs, d, err);
    if (st != MR_OK) {
        mr_run_detail_free(d);
        d = NULL;
    }
    *out = d;
    return st;
}

/* ---- N runs side by side -------------------------------------------------- */

void mr_run_compare_free(mr_run_compare *c)
{
    if (!c) return;
    for (size_t i = 0; c->runs && i < c->n_runs; i++) mr__runstore_summary_deinit(&c->runs[i]);
    mr_free(c->runs);
    for (size_t i = 0; i < c->n_params; i++) {
        for (size_t k = 0; c->params[i].values && k < c->n_runs; k++) mr_value_free(c->params[i].values[k]);
        mr_free(c->params[i].values);
        mr_free(c->params[i].path);
    }
    mr_free(c->params);
    for (size_t i = 0; i < c->n_metrics; i++) {
        mr_free(c->metrics[i].stage);
        mr_free(c->metrics[i].name);
        mr_free(c->metrics[i].values);
        mr_free(c->metrics[i].present);
    }
    mr_free(c->metrics);
    for (size_t i = 0; i < c->n_stages; i++) {
        for (size_t k = 0; k < c->n_runs; k++) {
            if (c->stages[i].keys) mr_free(c->stages[i].keys[k]);
            if (c->stages[i].statuses) mr_free(c->stages[i].statuses[k]);
        }
        mr_free(c->stages[i].keys);
        mr_free(c->stages[i].statuses);
        mr_free(c->stages[i].stage);
    }
    mr_free(c->stages);
    mr_free(c);
}

/* Absent and an explicit null read alike (both print null). */
static int same_param(const mr_value *a, const mr_value *b)
{
    int an = !a || a->kind == MR_V_NULL, bn = !b || b->kind == MR_V_NULL;
    if (an || bn) return an && bn;
    return mr_value_equal(a, b);
}

static mr_status compare_params(mr_run_compare *c, mr_error *err)
{
    mr_status st = MR_OK;
    mr__leaf_vec *lv = mr_calloc(c->n_runs, sizeof(*lv));
    mr__strvec paths = {0};
    if (!lv) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    for (size_t r = 0; r < c->n_runs && st == MR_OK; r++) {
        st = mr__runstore_flatten(c->runs[r].params, NULL, &lv[r]);
        for (size_t k = 0; k < lv[r].n && st == MR_OK; k++) st = mr__strvec_push(&paths, lv[r].paths[k]);
    }
    if (st != MR_OK) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    mr__strvec_uniq(&paths);
    c->params = mr_calloc(paths.n + 1, sizeof(*c->params));
    if (!c->params) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    for (size_t i = 0; i < paths.n && st == MR_OK; i++) {
        mr_compare_param *p = &c->params[c->n_params++];
        p->path = paths.v[i];
        paths.v[i] = NULL;
        p->values = mr_calloc(c->n_runs, sizeof(*p->values));
        if (!p->values) {
            st = mr__runstore_nomem(err);
            break;
        }
        for (size_t r = 0; r < c->n_runs && st == MR_OK; r++) {
            for (size_t k = 0; k < lv[r].n; k++) {
                if (strcmp(lv[r].paths[k], p->path)) continue;
                p->values[r] = mr_value_clone(lv[r].values[k]);
                if (!p->values[r]) st = mr__runstore_nomem(err);
                break;
            }
            if (r > 0 && !same_param(p->values[0], p->values[r])) p->changed = 1;
        }
    }
done:
    for (size_t r = 0; lv && r < c->n_runs; r++) mr__leaf_vec_free(&lv[r]);
    mr_free(lv);
    mr__strvec_free(&paths);
    return st;
}

static int cmp_final(const mr_run_final *a, const mr_run_final *b)
{
    int k = strcmp(a->stage, b->stage);
    return k ? k : strcmp(a->name, b->name);
}

/* A merge over every run's sorted finals. */
static mr_status compare_metrics(mr_run_compare *c, mr_error *err)
{
    mr_status st = MR_OK;
    size_t *pos = mr_calloc(c->n_runs, sizeof(*pos)), cap = 0;
    if (!pos) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    for (;;) {
        const mr_run_final *next = NULL;
        for (size_t r = 0; r < c->n_runs; r++)
            if (pos[r] < c->runs[r].n_finals && (!next || cmp_final(&c->runs[r].finals[pos[r]], next) < 0))
                next = &c->runs[r].finals[pos[r]];
        if (!next) break;
        st = mr__runstore_grow((void **)&c->metrics, c->n_metrics, &cap, sizeof(*c->metrics), err);
        if (st != MR_OK) break;
        mr_compare_metric *m = &c->metrics[c->n_metrics++];
        m->stage = mr_strdup(next->stage);
        m->name = mr_strdup(next->name);
        m->values = mr_calloc(c->n_runs, sizeof(*m->values));
        m->present = mr_calloc(c->n_runs, 1);
        if (!m->stage || !m->name || !m->values || !m->present) {
            st = mr__runstore_nomem(err);
            break;
        }
        for (size_t r = 0; r < c->n_runs; r++) {
            m->values[r] = NAN;
            if (pos[r] < c->runs[r].n_finals && !cmp_final(&c->runs[r].finals[pos[r]], next)) {
                m->values[r] = c->runs[r].finals[pos[r]].value;
                m->present[r] = 1;
            }
        }
        for (size_t r = 0; r < c->n_runs; r++)
            if (m->present[r]) pos[r]++;
        for (size_t r = 1; r < c->n_runs; r++) {
            double a = m->values[0], b = m->values[r];
            if (m->present[r] != m->present[0] || (m->present[r] && !(a == b || (isnan(a) && isnan(b))))) m->changed = 1;
        }
    }
done:
    mr_free(pos);
    return st;
}

static mr_status compare_stages(mr_runstore *rs, mr_run_compare *c, mr_error *err)
{
    mr_status st = MR_OK;
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc;
    st = mr__runstore_prepare(rs, "SELECT stage, key, status FROM stage_runs WHERE run_id = ?1 ORDER BY id", &s, err);
    for (size_t r = 0; r < c->n_runs && st == MR_OK; r++) {
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, c->runs[r].id);
        while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            const char *stage = (const char *)sqlite3_column_text(s, 0);
            if (!stage) continue;
            mr_compare_stage *cs = NULL;
            for (size_t i = 0; i < c->n_stages && !cs; i++)
                if (!strcmp(c->stages[i].stage, stage)) cs = &c->stages[i];
            if (!cs) {
                st = mr__runstore_grow((void **)&c->stages, c->n_stages, &cap, sizeof(*c->stages), err);
                if (st != MR_OK) break;
                cs = &c->stages[c->n_stages++];
                cs->stage = mr_strdup(stage);
                cs->keys = mr_calloc(c->n_runs, sizeof(*cs->keys));
                cs->statuses = mr_calloc(c->n_runs, sizeof(*cs->statuses));
                if (!cs->stage || !cs->keys || !cs->statuses) {
                    st = mr__runstore_nomem(err);
                    break;
                }
            }
            /* A stage recorded twice in one run keeps its last record. */
            mr_free(cs->keys[r]);
            mr_free(cs->statuses[r]);
            st = mr__runstore_col_dup(s, 1, &cs->keys[r], err);
            if (st == MR_OK) st = mr__runstore_col_dup(s, 2, &cs->statuses[r], err);
        }
        if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading stage runs");
    }
    for (size_t i = 0; i < c->n_stages && st == MR_OK; i++)
        for (size_t r = 1; r < c->n_runs; r++) {
            const char *a = c->stages[i].keys[0], *b = c->stages[i].keys[r];
            if ((!a != !b) || (a && strcmp(a, b))) c->stages[i].changed = 1;
        }
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_compare(mr_runstore *rs, const int64_t *runs, size_t n_runs, mr_run_compare **out,
                              mr_error *err)
{
    mr_status st = MR_OK;
    mr_run_compare *c = NULL;
    *out = NULL;
    if (n_runs == 0) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "compare: no runs given");
        goto done;
    }
    c = mr_calloc(1, sizeof(*c));
    if (c) c->runs = mr_calloc(n_runs, sizeof(*c->runs));
    if (!c || !c->runs) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    c->n_runs = n_runs;
    st = mr_runstore_reap(rs, NULL, err);
    for (size_t r = 0; r < n_runs && st == MR_OK; r++) st = load_summary(rs, runs[r], 1, &c->runs[r], err);
    if (st == MR_OK) st = compare_params(c, err);
    if (st == MR_OK) st = compare_metrics(c, err);
    if (st == MR_OK) st = compare_stages(rs, c, err);
done:
    if (st != MR_OK) {
        mr_run_compare_free(c);
        c = NULL;
    }
    *out = c;
    return st;
}

/* ---- tune trials ---------------------------------------------------------- */

void mr_trial_list_free(mr_trial_list *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) {
        mr_free(t->trials[i].key);
        mr_free(t->trials[i].status);
        mr_value_free(t->trials[i].record);
    }
    mr_free(t->trials);
    mr_free(t);
}

/* The newest run that recorded trials for stage (0 when none, or no table). */
static mr_status newest_trial_run(mr_runstore *rs, const char *stage, int64_t *run, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    *run = 0;
    mr_status st = mr__runstore_prepare(
        rs, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tune_trials'", &s, err);
    if (st != MR_OK) goto done;
    if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_int(s, 0) == 0) goto done;
    sqlite3_finalize(s);
    s = NULL;
    st = mr__runstore_prepare(rs, "SELECT max(run_id) FROM tune_trials WHERE stage = ?1", &s, err);
    if (st != MR_OK) goto done;
    mr__runstore_bind_str(s, 1, stage);
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) *run = sqlite3_column_int64(s, 0);
done:
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_trials(mr_runstore *rs, const char *stage, mr_trial_list **out, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc = SQLITE_DONE;
    mr_trial_list *t = mr_calloc(1, sizeof(*t));
    mr_status st = t ? MR_OK : mr__runstore_nomem(err);
    *out = NULL;
    if (st == MR_OK) st = newest_trial_run(rs, stage, &t->run_id, err);
    if (st != MR_OK || t->run_id == 0) goto done;
    /* A trial recorded twice in one run (never, but be safe): the last wins. */
    st = mr__runstore_prepare(rs,
                              "SELECT trial, key, status, value, record_json FROM tune_trials"
                              " WHERE stage = ?1 AND run_id = ?2 AND rowid IN (SELECT max(rowid) FROM tune_trials"
                              " WHERE stage = ?1 AND run_id = ?2 GROUP BY trial) ORDER BY trial",
                              &s, err);
    if (st != MR_OK) goto done;
    mr__runstore_bind_str(s, 1, stage);
    sqlite3_bind_int64(s, 2, t->run_id);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&t->trials, t->n, &cap, sizeof(*t->trials), err);
        if (st != MR_OK) break;
        mr_trial_record *tr = &t->trials[t->n++];
        tr->trial = sqlite3_column_int(s, 0);
        tr->value = col_real(s, 3);
        st = mr__runstore_col_dup(s, 1, &tr->key, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 2, &tr->status, err);
        if (st == MR_OK && !tr->status) st = mr__runstore_nomem(err);
        if (st == MR_OK) st = mr__runstore_parse_json((const char *)sqlite3_column_text(s, 4), &tr->record, err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading tune trials");
done:
    sqlite3_finalize(s);
    if (st != MR_OK) {
        mr_trial_list_free(t);
        t = NULL;
    }
    *out = t;
    return st;
}

/* ---- the stage run that produced given outputs --------------------------- */

/* Whether outputs_json is exactly names[i] -> ids[i]; -1 out of memory
 * (jansson's NULL, or a document that lost a character: not a mismatch). */
static int outputs_match(const char *text, const char *const *names, const char *const *ids, size_t n)
{
    int ok = 0;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    if (mr_alloc_failures_here() != oom0) {
        json_decref(o);
        return -1;
    }
    if (!json_is_object(o) || json_object_size(o) != n) goto done;
    for (size_t i = 0; i < n; i++) {
        const char *id = json_string_value(json_object_get(o, names[i]));
        if (!id || strcmp(id, ids[i])) goto done;
    }
    ok = 1;
done:
    json_decref(o);
    return ok;
}

mr_status mr_runstore_find_outputs(mr_runstore *rs, const char *stage, const char *const *names,
                                   const char *const *ids, size_t n, int64_t *run_id_out, char **key_out,
                                   mr_error *err)
{
    sqlite3_stmt *s = NULL;
    int rc, found = 0;
    *key_out = NULL;
    mr_status st = mr__runstore_prepare(rs,
                                        "SELECT run_id, key, outputs_json FROM stage_runs WHERE stage = ?1"
                                        " AND outputs_json IS NOT NULL ORDER BY id DESC",
                                        &s, err);
    if (st != MR_OK) goto done;
    mr__runstore_bind_str(s, 1, stage);
    while (st == MR_OK && !found && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int m = outputs_match((const char *)sqlite3_column_text(s, 2), names, ids, n);
        if (m < 0) st = mr__runstore_nomem(err);
        if (m <= 0) continue;
        found = 1;
        *run_id_out = sqlite3_column_int64(s, 0);
        st = mr__runstore_col_dup(s, 1, key_out, err);
    }
    if (st == MR_OK && !found) {
        st = rc == SQLITE_DONE ? MR_ERR(err, MR_E_NOT_FOUND, "no recorded run of stage '%s' produced these outputs", stage)
                               : mr__runstore_fail(rs, err, "reading stage runs");
    }
done:
    sqlite3_finalize(s);
    return st;
}

/* ---- text ----------------------------------------------------------------- */

mr_status mr_runstore_value_text(const mr_value *v, mr_buf *out)
{
    if (!v) return mr_buf_puts(out, "-");
    if (v->kind == MR_V_MAP || v->kind == MR_V_SEQ) return mr_value_to_json(v, 1, out);
    if (v->kind != MR_V_STR && v->str) return mr_buf_puts(out, v->str); /* as written */
    return mr_value_scalar_text(v, out);
}
