/* The feature store's top-level sections of millrace.yaml (docs/featurestore.md,
 * "Views defined once"): `entities:` (name -> key columns), `feature_views:`
 * (name -> entity, source, timestamp, features, ...) and `feature_services:`
 * (name -> a list of views). They are checked here, and every pit_join and
 * materialize_online stage that names views (`views: [clicks, plans]`) or a
 * service (`service: user_features`) gets them written into its definition
 * in the inline form those ops read, before the stage is loaded, with the
 * view's source being the view's own stage: every top-level view becomes a
 * stage of its name (op feature_view) that materialises it once, sorted,
 * with its computed features (src/ops/op_feature_view.c). Messages carry
 * the file:line:col of the view's own definition. */
#include "pipeline_int.h"

#include <string.h>

static const char *const ENTITY_KEYS[] = {"keys", "description"};
static const char *const VIEW_KEYS[] = {"entity", "source", "timestamp", "features",   "created",
                                        "ttl",    "prefix", "keys",      "description", "resources"};
static const char *const SERVICE_KEYS[] = {"views", "description"};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static mr_status at(mr_error *err, const char *path, const mr_value *v, const char *fmt, const char *a, const char *b)
{
    return mr_error_set_at(err, path, v && v->line ? v->line : 1, v && v->line ? v->col : 1, MR_E_SCHEMA, fmt, a, b);
}

/* Each key of map m is one of allowed[0, n); the first other one is an error naming its section. */
static mr_status known_keys(const mr_value *m, const char *const *allowed, size_t n, const char *what, const char *path,
                            mr_error *err)
{
    for (size_t i = 0; i < m->n; i++) {
        size_t k = 0;
        while (k < n && strcmp(m->keys[i], allowed[k])) k++;
        if (k < n) continue;
        mr_status rc = mr_error_set_at(err, path, m->key_lines[i], m->key_cols[i], MR_E_SCHEMA, "%s: unknown key '%s'",
                                       what, m->keys[i]);
        const char *c = mr_closest(m->keys[i], allowed, n);
        if (c) mr_error_hint(err, "did you mean '%s'?", c);
        return rc;
    }
    return MR_OK;
}

/* A string, or a non-empty list of strings. */
static int strings(const mr_value *v)
{
    if (v && v->kind == MR_V_STR && v->str[0]) return 1;
    if (!v || v->kind != MR_V_SEQ || !v->n) return 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->kind != MR_V_STR || !v->items[i]->str[0]) return 0;
    return 1;
}

/* The names of a mapping's entries, for did-you-mean hints (borrowed). */
static const char *const *names_of(const mr_value *m) { return m ? (const char *const *)m->keys : NULL; }

static mr_status check_sections(const mr_value *root, const char *path, mr_error *err)
{
    const mr_value *ents = mr_value_get(root, "entities"), *views = mr_value_get(root, "feature_views");
    const mr_value *svcs = mr_value_get(root, "feature_services");
    const struct {
        const mr_value *v;
        const char *name;
    } secs[] = {{ents, "entities"}, {views, "feature_views"}, {svcs, "feature_services"}};
    for (size_t s = 0; s < 3; s++)
        if (secs[s].v && secs[s].v->kind != MR_V_MAP)
            return at(err, path, secs[s].v, "'%s' must be a mapping of name to definition%s", secs[s].name, "");
    for (size_t i = 0; ents && i < ents->n; i++) {
        const mr_value *e = ents->items[i];
        char what[200];
        snprintf(what, sizeof(what), "entity '%s'", ents->keys[i]);
        if (e->kind != MR_V_MAP) return at(err, path, e, "%s must be a mapping with its key columns (keys: [...])%s", what, "");
        mr_status rc = known_keys(e, ENTITY_KEYS, N_OF(ENTITY_KEYS), what, path, err);
        if (rc != MR_OK) return rc;
        if (!strings(mr_value_get(e, "keys")))
            return at(err, path, mr_value_get(e, "keys") ? mr_value_get(e, "keys") : e,
                      "%s: keys must be its key column or a list of them%s", what, "");
    }
    for (size_t i = 0; views && i < views->n; i++) {
        const mr_value *v = views->items[i];
        char what[200];
        snprintf(what, sizeof(what), "feature view '%s'", views->keys[i]);
        if (v->kind != MR_V_MAP) return at(err, path, v, "%s must be a mapping (entity, source, timestamp, features)%s", what, "");
        mr_status rc = known_keys(v, VIEW_KEYS, N_OF(VIEW_KEYS), what, path, err);
        if (rc != MR_OK) return rc;
        static const char *const req[] = {"entity", "source", "timestamp", "features"};
        for (size_t k = 0; k < N_OF(req); k++)
            if (!mr_value_get(v, req[k])) {
                rc = mr_error_set_at(err, path, v->line, v->col, MR_E_SCHEMA, "%s has no %s", what, req[k]);
                if (!strcmp(req[k], "timestamp")) mr_error_hint(err, "name its event time column: timestamp: event_ts");
                return rc;
            }
        const mr_value *ent = mr_value_get(v, "entity");
        if (ent->kind != MR_V_STR || !mr_value_get(ents, ent->str)) {
            rc = at(err, path, ent, "%s: unknown entity '%s'", what, ent->kind == MR_V_STR ? ent->str : "?");
            const char *c = ents && ent->kind == MR_V_STR ? mr_closest(ent->str, names_of(ents), ents->n) : NULL;
            if (c) mr_error_hint(err, "did you mean '%s'?", c);
            else mr_error_hint(err, "declare it under entities: (name: {keys: [...]})");
            return rc;
        }
    }
    for (size_t i = 0; svcs && i < svcs->n; i++) {
        const mr_value *s = svcs->items[i], *list = s;
        char what[200];
        snprintf(what, sizeof(what), "feature service '%s'", svcs->keys[i]);
        if (s->kind == MR_V_MAP) {
            mr_status rc = known_keys(s, SERVICE_KEYS, N_OF(SERVICE_KEYS), what, path, err);
            if (rc != MR_OK) return rc;
            list = mr_value_get(s, "views");
        }
        if (!list || list->kind != MR_V_SEQ || !list->n)
            return at(err, path, list ? list : s, "%s must be a list of feature views%s", what, "");
        for (size_t k = 0; k < list->n; k++) {
            const mr_value *n = list->items[k];
            if (n->kind == MR_V_STR && mr_value_get(views, n->str)) continue;
            mr_status rc = at(err, path, n, "%s: unknown feature view '%s'", what, n->kind == MR_V_STR ? n->str : "?");
            const char *c = views && n->kind == MR_V_STR ? mr_closest(n->str, names_of(views), views->n) : NULL;
            if (c) mr_error_hint(err, "did you mean '%s'?", c);
            return rc;
        }
    }
    return MR_OK;
}

/* Top-level view `name` (checked): its definition, its entity's name and the
 * source's key columns (the view's own, or its entity's). */
static const mr_value *view_def(const mr_value *root, const char *name, const char **entity, const mr_value **keys)
{
    const mr_value *v = mr_value_get(mr_value_get(root, "feature_views"), name);
    const mr_value *ent = mr_value_get(v, "entity");
    *entity = ent->str;
    *keys = mr_value_get(v, "keys") ? mr_value_get(v, "keys")
                                    : mr_value_get(mr_value_get(mr_value_get(root, "entities"), ent->str), "keys");
    return v;
}

/* An empty mapping at v's position. */
static mr_value *new_at(const mr_value *v)
{
    mr_value *m = mr_value_new(MR_V_MAP);
    if (m) {
        m->line = v->line;
        m->col = v->col;
    }
    return m;
}

/* The inline form of top-level view `name`, read from its stage's output:
 * {name, source: ${stages.NAME}, timestamp, features (their names), keys,
 * [created, ttl, prefix]}, its values cloned with their positions.
 * *entity: its entity's name. */
static mr_value *inline_view(const mr_value *root, const char *name, const char **entity)
{
    const mr_value *keys = NULL, *v = view_def(root, name, entity, &keys);
    mr_value *m = new_at(v);
    if (!m) return NULL;
    int ok = mr_value_map_set(m, "name", mr_value_new_str(name)) == MR_OK; /* map_set owns its value, set or not */
    char *ref = mr_asprintf("${stages.%s}", name);
    mr_value *src = ref ? mr_value_new_str(ref) : NULL;
    mr_free(ref);
    if (src) {
        src->line = mr_value_get(v, "source")->line;
        src->col = mr_value_get(v, "source")->col;
    }
    ok = ok && src && mr_value_map_set(m, "source", src) == MR_OK;
    static const char *const copy[] = {"timestamp", "created", "ttl", "prefix"};
    for (size_t k = 0; ok && k < N_OF(copy); k++) {
        const mr_value *x = mr_value_get(v, copy[k]);
        if (!x) continue;
        ok = mr_value_map_set(m, copy[k], mr_value_clone(x)) == MR_OK;
    }
    /* the features by name: a computed one ({name: expression}) is a column of the view's output */
    const mr_value *f = mr_value_get(v, "features");
    mr_value *names = ok ? mr_value_new(MR_V_SEQ) : NULL;
    for (size_t i = 0; names && ok && i < (f->kind == MR_V_SEQ ? f->n : 1); i++) {
        const mr_value *it = f->kind == MR_V_SEQ ? f->items[i] : f;
        mr_value *nm = it->kind == MR_V_MAP && it->n == 1 ? mr_value_new_str(it->keys[0]) : mr_value_clone(it);
        if (nm && it->kind == MR_V_MAP) {
            nm->line = it->key_lines[0];
            nm->col = it->key_cols[0];
        }
        ok = mr_value_seq_push(names, nm) == MR_OK;
    }
    ok = ok && names && mr_value_map_set(m, "features", names) == MR_OK;
    ok = ok && mr_value_map_set(m, "keys", mr_value_clone(keys)) == MR_OK; /* the source's key columns */
    if (!ok) {
        mr_value_free(m);
        return NULL;
    }
    return m;
}

/* The stage of top-level view `name` (docs/featurestore.md, "Feature views
 * as stages"): op feature_view over its source, keys, times and features. */
static mr_value *view_stage(const mr_value *root, const char *name)
{
    const char *entity = NULL;
    const mr_value *keys = NULL, *v = view_def(root, name, &entity, &keys);
    mr_value *m = new_at(v);
    if (!m) return NULL;
    int ok = mr_value_map_set(m, "op", mr_value_new_str("feature_view")) == MR_OK;
    static const char *const copy[][2] = {{"source", "source"},       {"timestamp", "timestamp"},
                                          {"created", "created"},     {"features", "features"},
                                          {"description", "desc"},    {"resources", "resources"}};
    for (size_t k = 0; ok && k < N_OF(copy); k++) {
        const mr_value *x = mr_value_get(v, copy[k][0]);
        if (x) ok = mr_value_map_set(m, copy[k][1], mr_value_clone(x)) == MR_OK;
    }
    ok = ok && mr_value_map_set(m, "keys", mr_value_clone(keys)) == MR_OK;
    if (!ok) {
        mr_value_free(m);
        return NULL;
    }
    return m;
}

/* One stage: its named views (and service) written inline. */
static mr_status expand_stage(const mr_value *root, const char *stage, mr_value *def, const char *path, mr_error *err)
{
    const mr_value *svcs = mr_value_get(root, "feature_services"), *fviews = mr_value_get(root, "feature_views");
    mr_value *views = mr_value_get(def, "views");
    const mr_value *svc = mr_value_get(def, "service");
    if (!svc && (!views || views->kind != MR_V_SEQ)) return MR_OK;
    const mr_value *list = views;
    if (svc) {
        if (views) return at(err, path, svc, "stage '%s': service and views: name the views one way%s", stage, "");
        const mr_value *s = svc->kind == MR_V_STR ? mr_value_get(svcs, svc->str) : NULL;
        if (!s) {
            mr_status rc = at(err, path, svc, "stage '%s': unknown feature service '%s'", stage,
                              svc->kind == MR_V_STR ? svc->str : "?");
            const char *c = svcs && svc->kind == MR_V_STR ? mr_closest(svc->str, names_of(svcs), svcs->n) : NULL;
            if (c) mr_error_hint(err, "did you mean '%s'?", c);
            else if (!svcs) mr_error_hint(err, "declare it under feature_services: (name: [views...])");
            return rc;
        }
        list = s->kind == MR_V_MAP ? mr_value_get(s, "views") : s;
    }
    mr_value *out = mr_value_new(MR_V_SEQ);
    if (!out) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    const char *entity = NULL;
    const mr_value *first_named = NULL;
    mr_status rc = MR_OK;
    for (size_t i = 0; rc == MR_OK && i < list->n; i++) {
        const mr_value *item = list->items[i];
        if (item->kind != MR_V_STR) { /* an inline view, as it is */
            rc = mr_value_seq_push(out, mr_value_clone(item)) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
            continue;
        }
        if (!mr_value_get(fviews, item->str)) {
            rc = at(err, path, item, "stage '%s': unknown feature view '%s'", stage, item->str);
            const char *c = fviews ? mr_closest(item->str, names_of(fviews), fviews->n) : NULL;
            if (c) mr_error_hint(err, "did you mean '%s'?", c);
            else if (!fviews) mr_error_hint(err, "declare it under feature_views:, or write the view here as a mapping");
            break;
        }
        const char *e = NULL;
        mr_value *m = inline_view(root, item->str, &e);
        if (!m) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        if (entity && strcmp(entity, e)) {
            mr_value_free(m);
            char msg[300];
            snprintf(msg, sizeof(msg), "'%s' (entity %s) and '%s' (entity %s)", first_named->str, entity, item->str, e);
            rc = at(err, path, item, "stage '%s': views of two entities in one join: %s", stage, msg);
            mr_error_hint(err, "join one entity's views per stage, and chain the stages (entities: ${stages.<first>})");
            break;
        }
        entity = e;
        if (!first_named) first_named = item;
        if (mr_value_seq_push(out, m) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) rc = mr_value_map_set(def, "views", out) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    else mr_value_free(out);
    views = NULL; /* replaced */
    /* the stage's entity keys default to its views' entity's */
    if (rc == MR_OK && entity && !mr_value_get(def, "keys")) {
        mr_value *k = mr_value_clone(mr_value_get(mr_value_get(mr_value_get(root, "entities"), entity), "keys"));
        rc = mr_value_map_set(def, "keys", k) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    return rc;
}

mr_status mr__spec_expand_features(mr_value *root, const char *path, mr_error *err)
{
    mr_status rc = check_sections(root, path, err);
    mr_value *stages = mr_value_get(root, "stages");
    for (size_t i = 0; rc == MR_OK && stages && stages->kind == MR_V_MAP && i < stages->n; i++) {
        mr_value *def = stages->items[i];
        const mr_value *op = def->kind == MR_V_MAP ? mr_value_get(def, "op") : NULL;
        if (!op || op->kind != MR_V_STR || (strcmp(op->str, "pit_join") && strcmp(op->str, "materialize_online"))) continue;
        rc = expand_stage(root, stages->keys[i], def, path, err);
    }
    /* every top-level view a stage of its own, named after it */
    const mr_value *views = mr_value_get(root, "feature_views");
    for (size_t i = 0; rc == MR_OK && views && stages && stages->kind == MR_V_MAP && i < views->n; i++) {
        const char *name = views->keys[i];
        if (mr_value_get(stages, name)) {
            rc = mr_error_set_at(err, path, views->key_lines[i], views->key_cols[i], MR_E_SCHEMA,
                                 "feature view '%s' and a stage share the name: a feature view is a stage of its own",
                                 name);
            mr_error_hint(err, "rename the view or the stage");
            break;
        }
        mr_value *st = view_stage(root, name);
        rc = st && mr_value_map_set(stages, name, st) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) { /* the stage's name where the view's is */
            stages->key_lines[stages->n - 1] = views->key_lines[i];
            stages->key_cols[stages->n - 1] = views->key_cols[i];
        }
    }
    return rc;
}
