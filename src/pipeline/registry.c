/* The model registry (include/millrace/registry.h, docs/registry.md): named
 * models, numbered versions and aliases in the run store, each version's
 * bundle a file object in the artifact store. Registering copies the bundle
 * into the store first (a private copy under .millrace/tmp, checked by
 * loading it, then published), so the file the user named is never
 * changed and what is recorded is exactly what was checked. */
#include "pipeline_int.h"
#include "runstore_int.h"

#include "millrace/bundle.h"
#include "millrace/registry.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_MAX_LEN 100
#define VERSION_COLS "name, version, artifact, bundle_version, bundle_name, created, run_id, stage, source"

/* ---- names and references -------------------------------------------------- */

static mr_status check_word(const char *s, const char *what, mr_error *err)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > NAME_MAX_LEN)
        return MR_ERR(err, MR_E_INVALID_ARG, "a model %s must be 1 to %d characters, got %zu", what, NAME_MAX_LEN, n);
    if (!isalnum((unsigned char)s[0]))
        return MR_ERR(err, MR_E_INVALID_ARG, "model %s '%s' must start with a letter or a digit", what, s);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '-') {
            mr_status st = MR_ERR(err, MR_E_INVALID_ARG, "model %s '%s': character %zu is not one of A-Z a-z 0-9 _ . -",
                                  what, s, i + 1);
            return st;
        }
    }
    return MR_OK;
}

mr_status mr_model_name_check(const char *name, mr_error *err) { return check_word(name, "name", err); }

static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

mr_status mr_model_alias_check(const char *alias, mr_error *err)
{
    mr_status st = check_word(alias, "alias", err);
    if (st == MR_OK && (all_digits(alias) || !strcmp(alias, "latest"))) {
        st = MR_ERR(err, MR_E_INVALID_ARG, "model alias '%s' would read as a version", alias);
        mr_error_hint(err, "an alias is a word such as production or staging");
    }
    return st;
}

int mr_registry_is_uri(const char *s) { return s && !strncmp(s, MR_MODEL_URI_PREFIX, strlen(MR_MODEL_URI_PREFIX)); }

typedef enum { REF_LATEST, REF_VERSION, REF_ALIAS } ref_kind;

typedef struct model_ref {
    char name[NAME_MAX_LEN + 1];
    ref_kind kind;
    int64_t version;
    char alias[NAME_MAX_LEN + 1];
} model_ref;

/* The part after the name: "3", "latest", "@production" or "production". */
static mr_status parse_selector(const char *sel, const char *whole, model_ref *r, mr_error *err)
{
    if (!strcmp(sel, "latest")) {
        r->kind = REF_LATEST;
        return MR_OK;
    }
    if (all_digits(sel)) {
        if (!mr__runstore_parse_pos(sel, &r->version))
            return MR_ERR(err, MR_E_INVALID_ARG, "model reference '%s': version '%s' is not a number from 1 up", whole,
                          sel);
        r->kind = REF_VERSION;
        return MR_OK;
    }
    if (sel[0] == '@') sel++;
    mr_status st = mr_model_alias_check(sel, err);
    if (st != MR_OK) return st;
    r->kind = REF_ALIAS;
    snprintf(r->alias, sizeof(r->alias), "%s", sel);
    return MR_OK;
}

/* NAME, NAME/VERSION, NAME/latest or NAME@ALIAS, with or without models:/. */
static mr_status parse_ref(const char *ref, model_ref *r, mr_error *err)
{
    memset(r, 0, sizeof(*r));
    const char *s = mr_registry_is_uri(ref) ? ref + strlen(MR_MODEL_URI_PREFIX) : ref;
    size_t n = strcspn(s, "/@");
    if (n > NAME_MAX_LEN) return MR_ERR(err, MR_E_INVALID_ARG, "model reference '%s': the name is too long", ref);
    memcpy(r->name, s, n);
    r->name[n] = '\0';
    mr_status st = mr_model_name_check(r->name, err);
    if (st != MR_OK) {
        mr_error_hint(err, "a model reference is NAME, NAME/VERSION, NAME/latest or NAME@ALIAS (as models:/NAME@ALIAS)");
        return st;
    }
    if (s[n] == '\0') {
        r->kind = REF_LATEST;
        return MR_OK;
    }
    if (s[n + 1] == '\0')
        return MR_ERR(err, MR_E_INVALID_ARG, "model reference '%s': nothing after '%c'", ref, s[n]);
    if (s[n] == '/' && s[n + 1] == '@')
        return MR_ERR(err, MR_E_INVALID_ARG, "model reference '%s': write NAME@ALIAS", ref);
    return s[n] == '@' ? parse_selector(s + n, ref, r, err) : parse_selector(s + n + 1, ref, r, err);
}

/* ---- reading versions ------------------------------------------------------ */

void mr_model_version_free(mr_model_version *v)
{
    mr_model_versions_free(v, v ? 1 : 0);
}

static void version_deinit(mr_model_version *v)
{
    mr_free(v->name);
    mr_free(v->artifact);
    mr_free(v->bundle_version);
    mr_free(v->bundle_name);
    mr_free(v->path);
    mr_free(v->stage);
    mr_free(v->source);
    for (size_t k = 0; k < v->n_aliases; k++) mr_free(v->aliases[k]);
    mr_free(v->aliases);
    memset(v, 0, sizeof(*v));
}

void mr_model_versions_free(mr_model_version *v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++) version_deinit(&v[i]);
    mr_free(v);
}

void mr_model_summaries_free(mr_model_summary *s, size_t n)
{
    if (!s) return;
    for (size_t i = 0; i < n; i++) {
        mr_free(s[i].name);
        for (size_t k = 0; k < s[i].n_aliases; k++) mr_free(s[i].aliases[k]);
        mr_free(s[i].aliases);
    }
    mr_free(s);
}

/* The aliases of (name, version), sorted. */
static mr_status load_aliases(mr_workspace *ws, mr_model_version *v, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr__strvec sv = {0};
    mr_status st = mr__runstore_prepare(ws->rs, "SELECT alias FROM model_aliases WHERE name = ?1 AND version = ?2"
                                                " ORDER BY alias", &s, err);
    if (st != MR_OK) return st;
    sqlite3_bind_text(s, 1, v->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, v->version);
    int rc;
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *a = (const char *)sqlite3_column_text(s, 0);
        if (a && mr__strvec_push(&sv, a) != MR_OK) st = mr__runstore_nomem(err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(ws->rs, err, "reading model aliases");
    sqlite3_finalize(s);
    if (st == MR_OK) {
        v->aliases = sv.v;
        v->n_aliases = sv.n;
    } else {
        mr__strvec_free(&sv);
    }
    return st;
}

/* One row of VERSION_COLS into v (zeroed by the caller). */
static mr_status fill_version(mr_workspace *ws, sqlite3_stmt *s, mr_model_version *v, mr_error *err)
{
    mr_status st = mr__runstore_col_dup(s, 0, &v->name, err);
    v->version = sqlite3_column_int64(s, 1);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 2, &v->artifact, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 3, &v->bundle_version, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 4, &v->bundle_name, err);
    v->created = sqlite3_column_double(s, 5);
    v->run_id = sqlite3_column_type(s, 6) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, 6);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 7, &v->stage, err);
    if (st == MR_OK) st = mr__runstore_col_dup(s, 8, &v->source, err);
    if (st != MR_OK) return st;
    mr_artifact a;
    if (!v->name || !v->artifact || mr_artifact_parse(v->artifact, &a) != MR_OK || a.is_dir)
        return MR_ERR(err, MR_E_CORRUPT, "%s: model %s version %lld: the recorded bundle id is not a file's",
                      ws->rs->path, v->name ? v->name : "?", (long long)v->version);
    v->path = mr_store_object_path(ws->store, &a);
    if (!v->path) return mr__runstore_nomem(err);
    return load_aliases(ws, v, err);
}

/* The names of every model, for hints ("models: a, b"). Caller frees. */
static char *model_names_hint(mr_workspace *ws, const char *want)
{
    sqlite3_stmt *s = NULL;
    mr__strvec sv = {0};
    char *out = NULL;
    if (mr__runstore_prepare(ws->rs, "SELECT DISTINCT name FROM model_versions ORDER BY name", &s, NULL) != MR_OK)
        return NULL;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *n = (const char *)sqlite3_column_text(s, 0);
        if (n && mr__strvec_push(&sv, n) != MR_OK) break;
    }
    sqlite3_finalize(s);
    if (sv.n == 0) {
        out = mr_strdup("no model is registered yet: millrace model register NAME BUNDLE");
    } else {
        const char *c = mr_closest(want, (const char *const *)sv.v, sv.n);
        mr_buf b;
        mr_buf_init(&b);
        if (c) mr_buf_printf(&b, "did you mean '%s'? ", c);
        mr_buf_puts(&b, "models:");
        for (size_t k = 0; k < sv.n && k < 20; k++) mr_buf_printf(&b, " %s", sv.v[k]);
        if (sv.n > 20) mr_buf_printf(&b, " ... (%zu in all)", sv.n);
        out = b.failed ? NULL : b.data;
        if (!out) mr_buf_free(&b);
    }
    mr__strvec_free(&sv);
    return out;
}

static mr_status no_model(mr_workspace *ws, const char *name, mr_error *err)
{
    mr_status st = MR_ERR(err, MR_E_NOT_FOUND, "no model '%s' in the registry", name);
    char *h = model_names_hint(ws, name);
    if (h) mr_error_hint(err, "%s", h);
    mr_free(h);
    return st;
}

/* The highest version of name, 0 when it has none. */
static mr_status latest_version(mr_workspace *ws, const char *name, int64_t *out, mr_error *err)
{
    sqlite3_stmt *s = NULL;
    *out = 0;
    mr_status st = mr__runstore_prepare(ws->rs, "SELECT max(version) FROM model_versions WHERE name = ?1", &s, err);
    if (st != MR_OK) return st;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        *out = sqlite3_column_type(s, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, 0);
    else
        st = mr__runstore_fail(ws->rs, err, "reading model versions");
    sqlite3_finalize(s);
    return st;
}

/* The version r names (checked to exist). */
static mr_status ref_version(mr_workspace *ws, const model_ref *r, const char *whole, int64_t *out, mr_error *err)
{
    int64_t latest = 0;
    mr_status st = latest_version(ws, r->name, &latest, err);
    if (st != MR_OK) return st;
    if (latest == 0) return no_model(ws, r->name, err);
    if (r->kind == REF_LATEST) {
        *out = latest;
        return MR_OK;
    }
    sqlite3_stmt *s = NULL;
    if (r->kind == REF_VERSION) {
        st = mr__runstore_prepare(ws->rs, "SELECT 1 FROM model_versions WHERE name = ?1 AND version = ?2", &s, err);
        if (st != MR_OK) return st;
        sqlite3_bind_text(s, 1, r->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, r->version);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc == SQLITE_ROW) {
            *out = r->version;
            return MR_OK;
        }
        if (rc != SQLITE_DONE) return mr__runstore_fail(ws->rs, err, "reading model versions");
        st = MR_ERR(err, MR_E_NOT_FOUND, "%s: model %s has no version %lld", whole, r->name, (long long)r->version);
        mr_error_hint(err, "its versions are 1 to %lld (millrace model show %s)", (long long)latest, r->name);
        return st;
    }
    st = mr__runstore_prepare(ws->rs, "SELECT version FROM model_aliases WHERE name = ?1 AND alias = ?2", &s, err);
    if (st != MR_OK) return st;
    sqlite3_bind_text(s, 1, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, r->alias, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW) return MR_OK;
    if (rc != SQLITE_DONE) return mr__runstore_fail(ws->rs, err, "reading model aliases");
    st = MR_ERR(err, MR_E_NOT_FOUND, "%s: model %s has no alias '%s'", whole, r->name, r->alias);
    mr_error_hint(err, "set it with: millrace model alias %s %s VERSION", r->name, r->alias);
    return st;
}

static mr_status get_version(mr_workspace *ws, const char *name, int64_t version, mr_model_version **out,
                             mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_model_version *v = mr_calloc(1, sizeof(*v));
    if (!v) return mr__runstore_nomem(err);
    mr_status st = mr__runstore_prepare(ws->rs, "SELECT " VERSION_COLS " FROM model_versions"
                                                " WHERE name = ?1 AND version = ?2", &s, err);
    if (st == MR_OK) {
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, version);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
            st = fill_version(ws, s, v, err);
        else if (rc == SQLITE_DONE)
            st = MR_ERR(err, MR_E_NOT_FOUND, "model %s has no version %lld", name, (long long)version);
        else
            st = mr__runstore_fail(ws->rs, err, "reading model versions");
    }
    sqlite3_finalize(s);
    if (st != MR_OK) {
        mr_model_version_free(v);
        v = NULL;
    }
    *out = v;
    return st;
}

mr_status mr_registry_get(mr_workspace *ws, const char *ref, mr_model_version **out, mr_error *err)
{
    model_ref r;
    int64_t version = 0;
    *out = NULL;
    mr_status st = parse_ref(ref, &r, err);
    if (st == MR_OK) st = ref_version(ws, &r, ref, &version, err);
    if (st == MR_OK) st = get_version(ws, r.name, version, out, err);
    return st;
}

mr_status mr_registry_versions(mr_workspace *ws, const char *name, mr_model_version **out, size_t *n_out,
                               mr_error *err)
{
    sqlite3_stmt *s = NULL;
    mr_model_version *v = NULL;
    size_t n = 0, cap = 0;
    *out = NULL;
    *n_out = 0;
    mr_status st = mr_model_name_check(name, err);
    if (st == MR_OK)
        st = mr__runstore_prepare(ws->rs, "SELECT " VERSION_COLS " FROM model_versions WHERE name = ?1"
                                          " ORDER BY version", &s, err);
    if (st != MR_OK) return st;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = SQLITE_DONE;
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&v, n, &cap, sizeof(*v), err);
        if (st != MR_OK) break;
        st = fill_version(ws, s, &v[n++], err);
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(ws->rs, err, "reading model versions");
    sqlite3_finalize(s);
    if (st == MR_OK && n == 0) st = no_model(ws, name, err);
    if (st != MR_OK) {
        mr_model_versions_free(v, n);
        return st;
    }
    *out = v;
    *n_out = n;
    return MR_OK;
}

mr_status mr_registry_list(mr_workspace *ws, mr_model_summary **out, size_t *n_out, mr_error *err)
{
    sqlite3_stmt *s = NULL, *a = NULL;
    mr_model_summary *v = NULL;
    size_t n = 0, cap = 0;
    *out = NULL;
    *n_out = 0;
    mr_status st = mr__runstore_prepare(ws->rs, "SELECT name, count(*), max(version), max(created)"
                                                " FROM model_versions GROUP BY name ORDER BY name", &s, err);
    if (st == MR_OK)
        st = mr__runstore_prepare(ws->rs, "SELECT alias, version FROM model_aliases WHERE name = ?1 ORDER BY alias",
                                  &a, err);
    int rc = SQLITE_DONE;
    while (st == MR_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = mr__runstore_grow((void **)&v, n, &cap, sizeof(*v), err);
        if (st != MR_OK) break;
        mr_model_summary *m = &v[n++];
        st = mr__runstore_col_dup(s, 0, &m->name, err);
        m->n_versions = sqlite3_column_int64(s, 1);
        m->latest = sqlite3_column_int64(s, 2);
        m->updated = sqlite3_column_double(s, 3);
        if (st != MR_OK || !m->name) break;
        mr__strvec sv = {0};
        sqlite3_reset(a);
        sqlite3_bind_text(a, 1, m->name, -1, SQLITE_STATIC);
        int ra;
        while (st == MR_OK && (ra = sqlite3_step(a)) == SQLITE_ROW) {
            char *t = mr_asprintf("%s=%lld", (const char *)sqlite3_column_text(a, 0),
                                  (long long)sqlite3_column_int64(a, 1));
            if (!t || mr__strvec_push(&sv, t) != MR_OK) st = mr__runstore_nomem(err);
            mr_free(t);
        }
        if (st == MR_OK && ra != SQLITE_DONE) st = mr__runstore_fail(ws->rs, err, "reading model aliases");
        m->aliases = sv.v;
        m->n_aliases = sv.n;
    }
    if (st == MR_OK && rc != SQLITE_DONE) st = mr__runstore_fail(ws->rs, err, "reading models");
    sqlite3_finalize(s);
    sqlite3_finalize(a);
    if (st != MR_OK) {
        mr_model_summaries_free(v, n);
        return st;
    }
    *out = v;
    *n_out = n;
    return MR_OK;
}

/* ---- registering ----------------------------------------------------------- */

/* The run and stage whose record carries the bundle's stage key (preferring
 * the run that executed it over those that found it cached). */
static mr_status find_producer(mr_workspace *ws, const mr_bundle *b, int64_t *run_id, char **stage, mr_error *err)
{
    uint64_t failures = mr_alloc_failures_here(); /* jansson out of memory reads as "no lineage" */
    json_t *m = json_loads(mr_bundle_manifest_json(b), 0, NULL);
    const char *key = json_string_value(json_object_get(json_object_get(m, "lineage"), "stage_key"));
    sqlite3_stmt *s = NULL;
    if (key && mr__runstore_prepare(ws->rs, "SELECT run_id, stage FROM stage_runs WHERE key = ?1"
                                            " ORDER BY status = 'executed' DESC, id DESC LIMIT 1", &s, NULL) == MR_OK) {
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW) {
            *run_id = sqlite3_column_int64(s, 0);
            if (mr__runstore_col_dup(s, 1, stage, NULL) != MR_OK) *run_id = 0;
        }
    }
    sqlite3_finalize(s);
    json_decref(m);
    return mr_alloc_failures_here() != failures ? mr__runstore_nomem(err) : MR_OK;
}

/* Copies path to a private file in .millrace/tmp, checks it is a bundle and
 * publishes it: *a gets its id, *b the loaded bundle. */
static mr_status store_bundle(mr_workspace *ws, const char *path, mr_artifact *a, mr_bundle **b, mr_error *err)
{
    static unsigned counter;
    char *tmpdir = mr_path_join(ws->dot, "tmp");
    char *tmp = tmpdir ? mr_asprintf("%s/register.%ld.%u.mrb", tmpdir, (long)getpid(), counter++) : NULL;
    mr_status st = tmp ? MR_OK : mr__runstore_nomem(err);
    if (st == MR_OK) st = mr_fs_mkdirs(tmpdir, err);
    if (st == MR_OK && !mr_fs_exists(path)) st = MR_ERR(err, MR_E_NOT_FOUND, "%s: no such file", path);
    if (st == MR_OK && mr_fs_is_dir(path))
        st = MR_ERR(err, MR_E_INVALID_ARG, "%s is a directory; a model version is one bundle file (.mrb)", path);
    if (st == MR_OK) st = mr_bundle_load(path, b, err); /* an error names the user's file */
    mr_bundle_free(*b);
    *b = NULL;
    if (st == MR_OK) st = mr_fs_copy_file(path, tmp, err);
    if (st == MR_OK) st = mr_bundle_load(tmp, b, err); /* what is stored is what was checked */
    if (st == MR_OK) st = mr_store_publish(ws->store, NULL, tmp, a, err);
    if (tmp) unlink(tmp);
    mr_free(tmp);
    mr_free(tmpdir);
    return st;
}

mr_status mr_registry_register(mr_workspace *ws, const char *name, const char *path, int64_t run_id,
                               const char *stage, int64_t *version_out, int *created_out, mr_error *err)
{
    mr_bundle *b = NULL;
    mr_artifact a;
    char id[MR_ARTIFACT_ID_LEN];
    char *found_stage = NULL;
    sqlite3_stmt *s = NULL;
    mr_flock glk = {-1, NULL};
    int in_tx = 0;
    int64_t version = 0;
    int created = 0;
    *version_out = 0;
    mr_status st = mr_model_name_check(name, err);
    if (st == MR_OK) st = mr__workspace_gc_lock(ws, MR_LOCK_SHARED, &glk, err);
    if (st == MR_OK) st = store_bundle(ws, path, &a, &b, err);
    if (st != MR_OK) goto done;
    mr_artifact_id(&a, id);
    if (run_id <= 0) {
        run_id = 0;
        st = find_producer(ws, b, &run_id, &found_stage, err);
        stage = found_stage;
        if (st != MR_OK) goto done;
    }
    st = mr__runstore_tx_begin(ws->rs, err);
    in_tx = st == MR_OK;
    if (st != MR_OK) goto done;
    /* the same bytes under this name already: that version */
    st = mr__runstore_prepare(ws->rs, "SELECT min(version) FROM model_versions WHERE name = ?1 AND artifact = ?2", &s,
                              err);
    if (st != MR_OK) goto done;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW) {
        st = mr__runstore_fail(ws->rs, err, "reading model versions");
        goto done;
    }
    version = sqlite3_column_type(s, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    s = NULL;
    if (version == 0) {
        st = latest_version(ws, name, &version, err);
        if (st != MR_OK) goto done;
        version++;
        st = mr__runstore_prepare(ws->rs, "INSERT INTO model_versions(" VERSION_COLS ")"
                                          " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", &s, err);
        if (st != MR_OK) goto done;
        char *abs = realpath(path, NULL);
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, version);
        sqlite3_bind_text(s, 3, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, mr_bundle_version_id(b), -1, SQLITE_STATIC);
        uint64_t failures = mr_alloc_failures_here();
        json_t *m = json_loads(mr_bundle_manifest_json(b), 0, NULL);
        if (mr_alloc_failures_here() != failures) { /* not "no name": out of memory */
            json_decref(m);
            free(abs);
            st = mr__runstore_nomem(err);
            goto done;
        }
        mr__runstore_bind_str(s, 5, json_string_value(json_object_get(m, "name")));
        sqlite3_bind_double(s, 6, mr_wall_time());
        if (run_id > 0)
            sqlite3_bind_int64(s, 7, run_id);
        else
            sqlite3_bind_null(s, 7);
        mr__runstore_bind_str(s, 8, stage);
        mr__runstore_bind_str(s, 9, abs ? abs : path);
        st = mr__runstore_step_done(ws->rs, s, "registering a model version", err);
        free(abs);
        json_decref(m);
        created = st == MR_OK;
    }
done:
    sqlite3_finalize(s);
    if (in_tx) {
        if (st == MR_OK)
            st = mr__runstore_tx_commit(ws->rs, err);
        else
            mr__runstore_tx_rollback(ws->rs);
    }
    mr_flock_release(&glk);
    mr_bundle_free(b);
    mr_free(found_stage);
    if (st == MR_OK) {
        *version_out = version;
        if (created_out) *created_out = created;
    }
    return st;
}

mr_status mr_registry_set_alias(mr_workspace *ws, const char *name, const char *alias, int64_t version,
                                mr_error *err)
{
    sqlite3_stmt *s = NULL;
    int in_tx = 0;
    mr_status st = mr_model_name_check(name, err);
    if (st == MR_OK) st = mr_model_alias_check(alias, err);
    if (st == MR_OK) st = mr__runstore_tx_begin(ws->rs, err);
    in_tx = st == MR_OK;
    if (st != MR_OK) goto done;
    int64_t latest = 0;
    st = latest_version(ws, name, &latest, err);
    if (st != MR_OK) goto done;
    if (latest == 0) {
        st = no_model(ws, name, err);
        goto done;
    }
    if (version == 0) {
        st = mr__runstore_prepare(ws->rs, "DELETE FROM model_aliases WHERE name = ?1 AND alias = ?2", &s, err);
        if (st != MR_OK) goto done;
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, alias, -1, SQLITE_STATIC);
        st = mr__runstore_step_done(ws->rs, s, "deleting a model alias", err);
        if (st == MR_OK && sqlite3_changes(ws->rs->db) == 0)
            st = MR_ERR(err, MR_E_NOT_FOUND, "model %s has no alias '%s'", name, alias);
        goto done;
    }
    model_ref r;
    memset(&r, 0, sizeof(r));
    snprintf(r.name, sizeof(r.name), "%s", name);
    r.kind = REF_VERSION;
    r.version = version;
    int64_t checked = 0;
    st = version > 0 ? ref_version(ws, &r, name, &checked, err)
                     : MR_ERR(err, MR_E_INVALID_ARG, "version %lld: versions count from 1", (long long)version);
    if (st != MR_OK) goto done;
    st = mr__runstore_prepare(ws->rs, "INSERT OR REPLACE INTO model_aliases(name, alias, version, updated)"
                                      " VALUES(?1, ?2, ?3, ?4)", &s, err);
    if (st != MR_OK) goto done;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, alias, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, version);
    sqlite3_bind_double(s, 4, mr_wall_time());
    st = mr__runstore_step_done(ws->rs, s, "setting a model alias", err);
done:
    sqlite3_finalize(s);
    if (in_tx) {
        if (st == MR_OK)
            st = mr__runstore_tx_commit(ws->rs, err);
        else
            mr__runstore_tx_rollback(ws->rs);
    }
    return st;
}

mr_status mr_registry_resolve_uri(const char *uri, const char *dir, char **path_out, mr_model_version **v_out,
                                  mr_error *err)
{
    mr_workspace *ws = NULL;
    mr_model_version *v = NULL;
    *path_out = NULL;
    if (v_out) *v_out = NULL;
    model_ref r;
    mr_status st = parse_ref(uri, &r, err); /* a malformed URI fails before looking for a workspace */
    if (st == MR_OK) st = mr_workspace_open(dir ? dir : ".", 1, 0, &ws, err);
    if (st == MR_OK) st = mr_registry_get(ws, uri, &v, err);
    if (st == MR_OK && !mr_fs_exists(v->path)) {
        st = MR_ERR(err, MR_E_NOT_FOUND, "%s: the bundle of %s version %lld (%s) is missing from the store", uri,
                    v->name, (long long)v->version, v->artifact);
        mr_error_hint(err, "run millrace verify; register the bundle again to restore it");
    }
    if (st == MR_OK) {
        *path_out = mr_strdup(v->path);
        if (!*path_out) st = mr__runstore_nomem(err);
    }
    if (st == MR_OK && v_out) {
        *v_out = v;
        v = NULL;
    }
    mr_model_version_free(v);
    mr_workspace_close(ws);
    return st;
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_time(mr_buf *out, double t)
{
    char buf[32];
    mr_iso_time(t, buf, sizeof(buf));
    mr_buf_json_str(out, buf);
}

static void json_str_or_null(mr_buf *out, const char *s)
{
    if (s)
        mr_buf_json_str(out, s);
    else
        mr_buf_puts(out, "null");
}

mr_status mr_model_version_json(const mr_model_version *v, mr_buf *out)
{
    mr_buf_puts(out, "{\"name\": ");
    mr_buf_json_str(out, v->name);
    mr_buf_printf(out, ", \"version\": %lld, \"uri\": ", (long long)v->version);
    char uri[160];
    snprintf(uri, sizeof(uri), "%s%s/%lld", MR_MODEL_URI_PREFIX, v->name, (long long)v->version);
    mr_buf_json_str(out, uri);
    mr_buf_puts(out, ", \"aliases\": [");
    for (size_t k = 0; k < v->n_aliases; k++) {
        if (k) mr_buf_puts(out, ", ");
        mr_buf_json_str(out, v->aliases[k]);
    }
    mr_buf_puts(out, "], \"artifact\": ");
    mr_buf_json_str(out, v->artifact);
    mr_buf_puts(out, ", \"bundle_version\": ");
    json_str_or_null(out, v->bundle_version);
    mr_buf_puts(out, ", \"bundle_name\": ");
    json_str_or_null(out, v->bundle_name);
    mr_buf_puts(out, ", \"path\": ");
    mr_buf_json_str(out, v->path);
    mr_buf_puts(out, ", \"created\": ");
    json_time(out, v->created);
    mr_buf_puts(out, ", \"run_id\": ");
    if (v->run_id > 0)
        mr_buf_printf(out, "%lld", (long long)v->run_id);
    else
        mr_buf_puts(out, "null");
    mr_buf_puts(out, ", \"stage\": ");
    json_str_or_null(out, v->stage);
    mr_buf_puts(out, ", \"source\": ");
    json_str_or_null(out, v->source);
    mr_buf_puts(out, "}");
    return out->failed;
}

mr_status mr_model_summary_json(const mr_model_summary *s, mr_buf *out)
{
    mr_buf_puts(out, "{\"name\": ");
    mr_buf_json_str(out, s->name);
    mr_buf_printf(out, ", \"versions\": %lld, \"latest\": %lld, \"updated\": ", (long long)s->n_versions,
                  (long long)s->latest);
    json_time(out, s->updated);
    mr_buf_puts(out, ", \"aliases\": {");
    for (size_t k = 0; k < s->n_aliases; k++) {
        const char *eq = strchr(s->aliases[k], '=');
        char alias[NAME_MAX_LEN + 1];
        snprintf(alias, sizeof(alias), "%.*s", eq ? (int)(eq - s->aliases[k]) : 0, s->aliases[k]);
        mr_buf_printf(out, "%s", k ? ", " : "");
        mr_buf_json_str(out, alias);
        mr_buf_printf(out, ": %s", eq ? eq + 1 : "null");
    }
    mr_buf_puts(out, "}}");
    return out->failed;
}

/* ---- diff ------------------------------------------------------------------ */

typedef struct diff_row {
    char *path, *a, *b; /* a/b NULL: absent on that side */
} diff_row;

typedef struct diff_rows {
    diff_row *v;
    size_t n, cap;
} diff_rows;

static void rows_free(diff_rows *r)
{
    for (size_t k = 0; k < r->n; k++) {
        mr_free(r->v[k].path);
        mr_free(r->v[k].a);
        mr_free(r->v[k].b);
    }
    mr_free(r->v);
    memset(r, 0, sizeof(*r));
}

static char *value_text(const mr_value *v)
{
    if (v->kind == MR_V_FLOAT && isfinite(v->u.f)) { /* the shortest text that reads back as the same double */
        char t[40];
        mr_fmt_shortest(v->u.f, t, sizeof(t));
        return mr_strdup(t);
    }
    mr_buf b;
    mr_buf_init(&b);
    if (mr_runstore_value_text(v, &b) != MR_OK) {
        mr_buf_free(&b);
        return NULL;
    }
    return b.data ? b.data : mr_strdup("");
}

/* The leaves of a and b whose values differ, by path. */
static mr_status diff_trees(const mr_value *a, const mr_value *b, diff_rows *out)
{
    mr__leaf_vec la = {0}, lb = {0};
    mr__strvec paths = {0};
    mr_status st = mr__runstore_flatten(a, NULL, &la);
    if (st == MR_OK) st = mr__runstore_flatten(b, NULL, &lb);
    for (size_t k = 0; st == MR_OK && k < la.n; k++) st = mr__strvec_push(&paths, la.paths[k]);
    for (size_t k = 0; st == MR_OK && k < lb.n; k++) st = mr__strvec_push(&paths, lb.paths[k]);
    if (st == MR_OK) mr__strvec_uniq(&paths);
    for (size_t k = 0; st == MR_OK && k < paths.n; k++) {
        const mr_value *va = NULL, *vb = NULL;
        for (size_t q = 0; q < la.n && !va; q++)
            if (!strcmp(la.paths[q], paths.v[k])) va = la.values[q];
        for (size_t q = 0; q < lb.n && !vb; q++)
            if (!strcmp(lb.paths[q], paths.v[k])) vb = lb.values[q];
        char *ta = va ? value_text(va) : NULL, *tb = vb ? value_text(vb) : NULL;
        if ((va && !ta) || (vb && !tb)) {
            st = MR_E_NOMEM;
        } else if (!ta || !tb || strcmp(ta, tb)) {
            if (out->n == out->cap) {
                size_t nc = out->cap ? out->cap * 2 : 16;
                diff_row *nv = mr_realloc(out->v, nc * sizeof(*nv));
                if (!nv) st = MR_E_NOMEM;
                else {
                    out->v = nv;
                    out->cap = nc;
                }
            }
            if (st == MR_OK) {
                diff_row *r = &out->v[out->n++];
                r->path = mr_strdup(paths.v[k]);
                r->a = ta;
                r->b = tb;
                ta = tb = NULL;
                if (!r->path) st = MR_E_NOMEM;
            }
        }
        mr_free(ta);
        mr_free(tb);
    }
    mr__leaf_vec_free(&la);
    mr__leaf_vec_free(&lb);
    mr__strvec_free(&paths);
    return st;
}

/* What one version brings to the diff. */
typedef struct side {
    mr_model_version *v;
    mr_value *metrics, *params, *model, *inputs; /* inputs: name -> {type, categorical, required} */
} side;

static void side_free(side *s)
{
    mr_model_version_free(s->v);
    mr_value_free(s->metrics);
    mr_value_free(s->params);
    mr_value_free(s->model);
    mr_value_free(s->inputs);
}

static mr_status map_from_json(const char *text, mr_value **out, mr_error *err)
{
    mr_status st = mr__runstore_parse_json(text, out, err);
    if (st == MR_OK && (*out)->kind != MR_V_MAP) {
        mr_value_free(*out);
        *out = mr_value_new(MR_V_MAP);
        if (!*out) st = mr__runstore_nomem(err);
    }
    return st;
}

static mr_status load_side(mr_workspace *ws, const char *name, const char *sel, side *s, mr_error *err)
{
    memset(s, 0, sizeof(*s));
    model_ref r;
    memset(&r, 0, sizeof(r));
    snprintf(r.name, sizeof(r.name), "%s", name);
    int64_t version = 0;
    mr_bundle *b = NULL;
    json_t *m = NULL, *model = NULL, *ins = NULL;
    char *mt = NULL, *it = NULL, *params = NULL;
    mr_status st = parse_selector(sel, sel, &r, err);
    if (st == MR_OK) st = ref_version(ws, &r, sel, &version, err);
    if (st == MR_OK) st = get_version(ws, name, version, &s->v, err);
    if (st == MR_OK) st = mr_bundle_load(s->v->path, &b, err);
    if (st != MR_OK) goto done;
    /* jansson out of memory drops members silently: a diff built from a
     * short copy would show differences that are not there */
    uint64_t failures = mr_alloc_failures_here();
    m = json_loads(mr_bundle_manifest_json(b), 0, NULL);
    model = json_deep_copy(json_object_get(m, "model"));
    if (!json_is_object(model)) {
        json_decref(model);
        model = json_object();
    }
    /* the features list is the schema's business; the model keeps its count */
    json_t *feats = json_object_get(model, "features");
    if (json_is_array(feats)) json_object_set_new(model, "features", json_integer((json_int_t)json_array_size(feats)));
    ins = json_object();
    size_t k;
    json_t *in;
    json_array_foreach(json_object_get(m, "inputs"), k, in)
    {
        const char *n = json_string_value(json_object_get(in, "name"));
        json_t *c = json_deep_copy(in);
        if (n && c) json_object_del(c, "name");
        if (n && c) json_object_set_new(ins, n, c);
        else json_decref(c);
    }
    mt = json_dumps(model, JSON_COMPACT | JSON_SORT_KEYS);
    it = json_dumps(ins, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!mt || !it || mr_alloc_failures_here() != failures) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    st = map_from_json(mt, &s->model, err);
    if (st == MR_OK) st = map_from_json(it, &s->inputs, err);
    if (st == MR_OK) st = map_from_json(mr_bundle_metrics_json(b), &s->metrics, err);
    if (st != MR_OK) goto done;
    if (s->v->run_id > 0) {
        sqlite3_stmt *q = NULL;
        st = mr__runstore_prepare(ws->rs, "SELECT params_json FROM runs WHERE id = ?1", &q, err);
        if (st == MR_OK) {
            sqlite3_bind_int64(q, 1, s->v->run_id);
            if (sqlite3_step(q) == SQLITE_ROW) st = mr__runstore_col_dup(q, 0, &params, err);
            sqlite3_finalize(q);
        }
    }
    if (st == MR_OK) st = map_from_json(params, &s->params, err);
done:
    free(mt);
    free(it);
    mr_free(params);
    json_decref(m);
    json_decref(model);
    json_decref(ins);
    mr_bundle_free(b);
    return st;
}

/* The inputs a and b share by name, with what differs; added and removed. */
static mr_status diff_schema(const mr_value *a, const mr_value *b, diff_rows *changed, mr__strvec *added,
                             mr__strvec *removed)
{
    mr_status st = MR_OK;
    for (size_t k = 0; k < b->n && st == MR_OK; k++)
        if (!mr_value_get(a, b->keys[k])) st = mr__strvec_push(added, b->keys[k]);
    for (size_t k = 0; k < a->n && st == MR_OK; k++) {
        const mr_value *vb = mr_value_get(b, a->keys[k]);
        if (!vb) {
            st = mr__strvec_push(removed, a->keys[k]);
            continue;
        }
        diff_rows one = {0};
        st = diff_trees(a->items[k], vb, &one);
        for (size_t q = 0; q < one.n && st == MR_OK; q++) {
            char *p = mr_asprintf("%s.%s", a->keys[k], one.v[q].path);
            if (!p) {
                st = MR_E_NOMEM;
                break;
            }
            mr_free(one.v[q].path);
            one.v[q].path = p;
        }
        for (size_t q = 0; q < one.n && st == MR_OK; q++) {
            if (changed->n == changed->cap) {
                size_t nc = changed->cap ? changed->cap * 2 : 16;
                diff_row *nv = mr_realloc(changed->v, nc * sizeof(*nv));
                if (!nv) {
                    st = MR_E_NOMEM;
                    break;
                }
                changed->v = nv;
                changed->cap = nc;
            }
            changed->v[changed->n++] = one.v[q];
            memset(&one.v[q], 0, sizeof(one.v[q]));
        }
        rows_free(&one);
    }
    return st;
}

static void text_rows(mr_buf *out, const char *title, const diff_rows *r)
{
    mr_buf_printf(out, "%s\n", title);
    if (r->n == 0) mr_buf_puts(out, "  (same)\n");
    size_t w = 0;
    for (size_t k = 0; k < r->n; k++) w = strlen(r->v[k].path) > w ? strlen(r->v[k].path) : w;
    for (size_t k = 0; k < r->n; k++)
        mr_buf_printf(out, "  %-*s  %s -> %s\n", (int)w, r->v[k].path, r->v[k].a ? r->v[k].a : "-",
                      r->v[k].b ? r->v[k].b : "-");
}

static void json_rows(mr_buf *out, const char *key, const diff_rows *r)
{
    mr_buf_printf(out, ", \"%s\": [", key);
    for (size_t k = 0; k < r->n; k++) {
        mr_buf_puts(out, k ? ", {\"name\": " : "{\"name\": ");
        mr_buf_json_str(out, r->v[k].path);
        mr_buf_puts(out, ", \"a\": ");
        json_str_or_null(out, r->v[k].a);
        mr_buf_puts(out, ", \"b\": ");
        json_str_or_null(out, r->v[k].b);
        mr_buf_puts(out, "}");
    }
    mr_buf_puts(out, "]");
}

static void json_names(mr_buf *out, const char *key, const mr__strvec *v)
{
    mr_buf_printf(out, "\"%s\": [", key);
    for (size_t k = 0; k < v->n; k++) {
        if (k) mr_buf_puts(out, ", ");
        mr_buf_json_str(out, v->v[k]);
    }
    mr_buf_puts(out, "]");
}

mr_status mr_registry_diff(mr_workspace *ws, const char *name, const char *a, const char *b, int json, mr_buf *out,
                           mr_error *err)
{
    side sa, sb;
    diff_rows metrics = {0}, params = {0}, model = {0}, schema = {0};
    mr__strvec added = {0}, removed = {0};
    memset(&sb, 0, sizeof(sb));
    mr_status st = mr_model_name_check(name, err);
    if (st == MR_OK) st = load_side(ws, name, a, &sa, err);
    else memset(&sa, 0, sizeof(sa));
    if (st == MR_OK) st = load_side(ws, name, b, &sb, err);
    if (st != MR_OK) goto done;
    st = diff_trees(sa.metrics, sb.metrics, &metrics);
    if (st == MR_OK) st = diff_trees(sa.params, sb.params, &params);
    if (st == MR_OK) st = diff_trees(sa.model, sb.model, &model);
    if (st == MR_OK) st = diff_schema(sa.inputs, sb.inputs, &schema, &added, &removed);
    if (st != MR_OK) {
        st = mr__runstore_nomem(err);
        goto done;
    }
    if (json) {
        mr_buf_puts(out, "{\"name\": ");
        mr_buf_json_str(out, name);
        mr_buf_puts(out, ", \"a\": ");
        mr_model_version_json(sa.v, out);
        mr_buf_puts(out, ", \"b\": ");
        mr_model_version_json(sb.v, out);
        mr_buf_printf(out, ", \"same_bundle\": %s", strcmp(sa.v->artifact, sb.v->artifact) ? "false" : "true");
        json_rows(out, "metrics", &metrics);
        json_rows(out, "params", &params);
        json_rows(out, "model", &model);
        mr_buf_puts(out, ", \"schema\": {");
        json_names(out, "added", &added);
        mr_buf_puts(out, ", ");
        json_names(out, "removed", &removed);
        json_rows(out, "changed", &schema);
        mr_buf_puts(out, "}}\n");
    } else {
        mr_buf_printf(out, "%s: version %lld -> version %lld%s\n", name, (long long)sa.v->version,
                      (long long)sb.v->version, strcmp(sa.v->artifact, sb.v->artifact) ? "" : " (the same bundle)");
        text_rows(out, "metrics", &metrics);
        text_rows(out, sa.v->run_id || sb.v->run_id ? "params" : "params (no run recorded either version)", &params);
        text_rows(out, "model", &model);
        mr_buf_puts(out, "schema\n");
        if (added.n + removed.n + schema.n == 0) mr_buf_puts(out, "  (same)\n");
        for (size_t k = 0; k < added.n; k++) {
            const mr_value *t = mr_value_get(mr_value_get(sb.inputs, added.v[k]), "type");
            mr_buf_printf(out, "  + %s  %s\n", added.v[k], t && t->kind == MR_V_STR ? t->str : "");
        }
        for (size_t k = 0; k < removed.n; k++) {
            const mr_value *t = mr_value_get(mr_value_get(sa.inputs, removed.v[k]), "type");
            mr_buf_printf(out, "  - %s  %s\n", removed.v[k], t && t->kind == MR_V_STR ? t->str : "");
        }
        for (size_t k = 0; k < schema.n; k++)
            mr_buf_printf(out, "  ~ %s  %s -> %s\n", schema.v[k].path, schema.v[k].a ? schema.v[k].a : "-",
                          schema.v[k].b ? schema.v[k].b : "-");
    }
    if (out->failed) st = MR_ERR(err, out->failed, "out of memory");
done:
    side_free(&sa);
    side_free(&sb);
    rows_free(&metrics);
    rows_free(&params);
    rows_free(&model);
    rows_free(&schema);
    mr__strvec_free(&added);
    mr__strvec_free(&removed);
    return st;
}
