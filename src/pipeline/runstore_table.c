/* Every run at once, for the run browser (`millrace ui`): the runs with
 * their tags and final metrics in three queries, however many runs there
 * are, and one metric's points of one run. Read-only: a running run whose
 * process is gone reads as "killed" without writing that down (the next
 * view that reaps does). */
#include "runstore_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void mr_run_table_free(mr_run_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) mr__runstore_summary_deinit(&t->runs[i]);
    mr_free(t->runs);
    mr_free(t);
}

/* The run with id in t (ids descending), or NULL. */
static mr_run_summary *find_run(mr_run_table *t, int64_t id)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->runs[mid].id == id) return &t->runs[mid];
        if (t->runs[mid].id > id) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static mr_status load_runs(mr_runstore *rs, mr_run_table *t, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    size_t cap = 0;
    int rc = SQLITE_DONE;
    mr_status st = mr__runstore_prepare(rs, "SELECT " MR__RUN_COLS ", pid, pid_start FROM runs ORDER BY id DESC", &s, err);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&t->runs, t->n, &cap, sizeof(*t->runs), err);
        if (st != MR_OK) break;
        mr_run_summary *r = &t->runs[t->n++];
        /* every run's params at once: jansson reads them five times faster than the YAML reader the
         * other views use to keep each scalar's text (a number's text here is its shortest form) */
        const char *pj = (const char *)sqlite3_column_text(s, 14);
        mr_error pe;
        mr_error_init(&pe);
        mr_status ps = pj && pj[0] ? mr_value_from_json(pj, strlen(pj), "run params", &r->params, &pe) : MR_E_PARSE;
        if (ps == MR_E_NOMEM) st = mr__runstore_nomem(err);
        else if (ps != MR_OK || r->params->kind != MR_V_MAP) { /* what the other views read as empty */
            mr_value_free(r->params);
            r->params = mr_value_new(MR_V_MAP);
            if (!r->params) st = mr__runstore_nomem(err);
        }
        if (st == MR_OK) st = mr__runstore_fill_summary(s, r, err);
        if (st == MR_OK && r->status && !strcmp(r->status, "running") && mr__runstore_process_gone(s, 16)) {
            char *k = mr_strdup("killed");
            if (!k) st = mr__runstore_nomem(err);
            else {
                mr_free(r->status);
                r->status = k;
            }
        }
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading runs");
    sqlite3_finalize(s);
    return st;
}

static mr_status load_tags(mr_runstore *rs, mr_run_table *t, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    int rc = SQLITE_DONE;
    mr_status st = mr__runstore_prepare(rs, "SELECT run_id, key, value FROM run_tags ORDER BY run_id, key", &s, err);
    mr_run_summary *r = NULL;
    size_t cap = 0;
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        if (!r || r->id != id) {
            r = find_run(t, id);
            cap = 0;
        }
        if (!r) continue; /* a tag of a run that is gone */
        st = mr__runstore_grow((void **)&r->tags, r->n_tags, &cap, sizeof(*r->tags), err);
        if (st != MR_OK) break;
        mr_run_tag *tg = &r->tags[r->n_tags++];
        st = mr__runstore_col_dup(s, 1, &tg->key, err);
        if (st == MR_OK) st = mr__runstore_col_dup(s, 2, &tg->value, err);
        if (st == MR_OK && !tg->key) st = mr__runstore_nomem(err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading run tags");
    sqlite3_finalize(s);
    return st;
}

/* The value at the highest step of each (run, stage, name): SQLite gives a
 * bare column of an aggregate query with max() the row holding the max. */
static mr_status load_finals(mr_runstore *rs, mr_run_table *t, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    int rc = SQLITE_DONE;
    mr_status st = mr__runstore_prepare(rs, "SELECT run_id, stage, name, max(step), value, count(*) FROM metrics"
                                            " GROUP BY run_id, stage, name ORDER BY run_id, stage, name", &s, err);
    mr_run_summary *r = NULL;
    size_t cap = 0;
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        if (!r || r->id != id) {
            r = find_run(t, id);
            cap = 0;
        }
        const char *stage = (const char *)sqlite3_column_text(s, 1), *name = (const char *)sqlite3_column_text(s, 2);
        if (!r || !stage || !name) continue;
        st = mr__runstore_grow((void **)&r->finals, r->n_finals, &cap, sizeof(*r->finals), err);
        if (st != MR_OK) break;
        mr_run_final *f = &r->finals[r->n_finals++];
        f->stage = mr_strdup(stage);
        f->name = mr_strdup(name);
        if (!f->stage || !f->name) st = mr__runstore_nomem(err);
        f->step = sqlite3_column_int64(s, 3);
        f->value = sqlite3_column_type(s, 4) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 4);
        f->n_steps = (size_t)sqlite3_column_int64(s, 5);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading metrics");
    sqlite3_finalize(s);
    return st;
}

mr_status mr_runstore_all_runs(mr_runstore *rs, mr_run_table **out, mr_error *err)
{
    *out = NULL;
    mr_run_table *t = mr_calloc(1, sizeof(*t));
    if (!t) return mr__runstore_nomem(err);
    /* one read transaction: the three queries see the same commit */
    mr_status st = mr__runstore_exec(rs, "BEGIN", err);
    int in_tx = st == MR_OK;
    if (st == MR_OK) st = load_runs(rs, t, err);
    if (st == MR_OK) st = load_tags(rs, t, err);
    if (st == MR_OK) st = load_finals(rs, t, err);
    if (in_tx) sqlite3_exec(rs->db, "COMMIT", NULL, NULL, NULL);
    if (st != MR_OK) {
        mr_run_table_free(t);
        return st;
    }
    *out = t;
    return MR_OK;
}

int mr_runstore_changed(mr_runstore *rs, uint64_t *version)
{
    sqlite3_stmt *s = NULL;
    uint64_t v = 0;
    if (mr__runstore_prepare(rs, "PRAGMA data_version", &s, NULL) == MR_OK && sqlite3_step(s) == SQLITE_ROW)
        v = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    int changed = v == 0 || v != *version;
    *version = v;
    return changed;
}

mr_status mr_runstore_metric_points(mr_runstore *rs, int64_t run_id, const char *stage, const char *name,
                                    int64_t **steps_out, double **values_out, size_t *n_out, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    int64_t *steps = NULL;
    double *values = NULL;
    size_t n = 0, cap = 0;
    int rc = SQLITE_DONE;
    *steps_out = NULL;
    *values_out = NULL;
    *n_out = 0;
    mr_status st = mr__runstore_prepare(rs, "SELECT step, value FROM metrics WHERE run_id = ?1 AND stage = ?2"
                                            " AND name = ?3 ORDER BY step, rowid", &s, err);
    if (st != MR_OK) return st;
    sqlite3_bind_int64(s, 1, run_id);
    sqlite3_bind_text(s, 2, stage, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, name, -1, SQLITE_STATIC);
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            int64_t *ns = mr_realloc(steps, nc * sizeof(*ns));
            if (ns) steps = ns;
            double *nv = ns ? mr_realloc(values, nc * sizeof(*nv)) : NULL;
            if (!nv) {
                st = mr__runstore_nomem(err);
                break;
            }
            values = nv;
            cap = nc;
        }
        steps[n] = sqlite3_column_int64(s, 0);
        values[n] = sqlite3_column_type(s, 1) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 1);
        n++;
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(rs, err, "reading metrics");
    sqlite3_finalize(s);
    if (st != MR_OK) {
        mr_free(steps);
        mr_free(values);
        return st;
    }
    *steps_out = steps;
    *values_out = values;
    *n_out = n;
    return MR_OK;
}
