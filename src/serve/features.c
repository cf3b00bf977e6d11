/* Serving by entity id (serve_int.h, "features looked up by entity"): the
 * online stores a bundle's feature service names, opened and checked
 * against what the bundle was trained on, reopened when a rerun of a
 * materialize_online stage replaces one, and read together for a batch:
 * one pass over each store (one hash probe per entity in a file, one round
 * trip to Redis), the values borrowed from the stores until the batch is
 * answered. */
#include "serve_int.h"

#include "millrace/online.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* One open store. Freed when replaced and no batch holds it. */
typedef struct store_snap {
    mr_online *st;
    dev_t dev;
    ino_t ino;
    size_t *feat; /* service feature k (of this store) -> the store's feature index */
    int refs;     /* batches holding it (under the owner's mu); a retired one counts down from -holders */
} store_snap;

/* One of the service's stores as served. */
typedef struct store_state {
    const mr_bundle_service_store *ss;
    size_t index;
    char *path;        /* the file, or the Redis location */
    int redis;         /* no file to watch: a lookup tells when it changed */
    int stale;         /* a lookup found it rematerialised with another layout: reopen (under mu) */
    ino_t refused_ino; /* a replacement that did not fit (warned once) */
    store_snap *cur;
} store_state;

struct mr__serve_features {
    const mr_bundle *b;
    const mr_bundle_service *svc; /* borrowed from b */
    int32_t *svc_of_input;        /* input i -> service feature k, or -1 */
    pthread_mutex_t mu;           /* every store's cur, stale, refused_ino and refs */
    size_t n_stores;
    store_state *stores;
};

/* What a batch holds: one snapshot per store. */
struct mr__features_snap {
    size_t n;
    store_snap *s[];
};

static void snap_free(store_snap *sn)
{
    if (!sn) return;
    mr_online_close(sn->st);
    mr_free(sn->feat);
    mr_free(sn);
}

/* Opens the store at path and checks that it serves store `idx` of svc:
 * the same keys (names and types, in order) and every feature of that
 * store with the type it was trained on. */
static mr_status snap_open(const mr_bundle_service *svc, size_t idx, const char *path, store_snap **out, mr_error *err)
{
    *out = NULL;
    const mr_bundle_service_store *ss = &svc->stores[idx];
    store_snap *sn = mr_calloc(1, sizeof(*sn));
    if (!sn || !(sn->feat = mr_calloc(svc->n_features, sizeof(*sn->feat)))) {
        mr_free(sn);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    struct stat stt;
    mr_status rc = mr_online_open(path, &sn->st, err);
    if (rc == MR_OK && stat(path, &stt) == 0) {
        sn->dev = stt.st_dev;
        sn->ino = stt.st_ino;
    }
    if (rc == MR_OK && mr_online_n_keys(sn->st) != ss->n_keys)
        rc = MR_ERR(err, MR_E_SCHEMA, "online store %s has %zu entity keys; the model was trained on %zu", path,
                    mr_online_n_keys(sn->st), ss->n_keys);
    for (size_t k = 0; rc == MR_OK && k < ss->n_keys; k++) {
        const char *n = mr_online_key_name(sn->st, k);
        mr_dtype t = mr_online_key_type(sn->st, k);
        if (strcmp(n, ss->key_names[k]) || t != ss->key_types[k])
            rc = MR_ERR(err, MR_E_SCHEMA, "online store %s: entity key %zu is '%s' (%s); the model was trained on '%s' (%s)",
                        path, k + 1, n, mr_dtype_name(t), ss->key_names[k], mr_dtype_name(ss->key_types[k]));
    }
    for (size_t k = 0; rc == MR_OK && k < svc->n_features; k++) {
        const mr_bundle_service_feature *x = &svc->features[k];
        if (x->store != idx) continue;
        size_t f = 0, nf = mr_online_n_features(sn->st);
        while (f < nf && strcmp(mr_online_feature_name(sn->st, f), x->name)) f++;
        if (f == nf)
            rc = MR_ERR(err, MR_E_SCHEMA, "online store %s has no feature '%s' (view %s), which the model reads", path,
                        x->name, x->view);
        else if (mr_online_feature_type(sn->st, f) != x->type)
            rc = MR_ERR(err, MR_E_SCHEMA, "online store %s: feature '%s' is %s; the model was trained on %s", path, x->name,
                        mr_dtype_name(mr_online_feature_type(sn->st, f)), mr_dtype_name(x->type));
        sn->feat[k] = f;
    }
    if (rc != MR_OK) {
        if (rc == MR_E_SCHEMA) mr_error_hint(err, "materialize the store from the views the model was trained on");
        snap_free(sn);
        return rc;
    }
    *out = sn;
    return MR_OK;
}

void mr__features_free(mr__serve_features *fs)
{
    if (!fs) return;
    for (size_t i = 0; fs->stores && i < fs->n_stores; i++) {
        snap_free(fs->stores[i].cur); /* no batch holds it: the server frees this with its bundle */
        mr_free(fs->stores[i].path);
    }
    if (fs->stores) pthread_mutex_destroy(&fs->mu);
    mr_free(fs->stores);
    mr_free(fs->svc_of_input);
    mr_free(fs);
}

mr_status mr__features_open(const mr_bundle *b, const char *const *paths, size_t n_paths, mr__serve_features **out,
                            mr_error *err)
{
    *out = NULL;
    const mr_bundle_service *svc = mr_bundle_service_of(b);
    if (!svc) return MR_OK;
    if (n_paths && n_paths != svc->n_stores)
        return MR_ERR(err, MR_E_INVALID_ARG, "the model reads features from %zu online store%s; --store names %zu",
                      svc->n_stores, svc->n_stores == 1 ? "" : "s", n_paths);
    mr__serve_features *fs = mr_calloc(1, sizeof(*fs));
    size_t n_in = mr_bundle_n_inputs(b);
    if (fs) {
        fs->svc_of_input = mr_malloc((n_in ? n_in : 1) * sizeof(*fs->svc_of_input));
        fs->stores = mr_calloc(svc->n_stores, sizeof(*fs->stores));
    }
    if (!fs || !fs->svc_of_input || !fs->stores) {
        if (fs) {
            mr_free(fs->svc_of_input);
            mr_free(fs->stores);
        }
        mr_free(fs);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&fs->mu, NULL);
    fs->b = b;
    fs->svc = svc;
    fs->n_stores = svc->n_stores;
    for (size_t i = 0; i < n_in; i++) fs->svc_of_input[i] = -1;
    for (size_t k = 0; k < svc->n_features; k++) fs->svc_of_input[svc->features[k].input] = (int32_t)k;
    mr_status rc = MR_OK;
    for (size_t i = 0; rc == MR_OK && i < svc->n_stores; i++) {
        store_state *st = &fs->stores[i];
        st->ss = &svc->stores[i];
        st->index = i;
        const char *path = n_paths ? paths[i] : st->ss->store;
        if (!path) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "the model reads features from an online store: name it with --store PATH");
            break;
        }
        st->path = mr_online_locate(path);
        if (!st->path) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        st->redis = !strncmp(st->path, "redis://", 8);
        rc = snap_open(svc, i, st->path, &st->cur, err);
        if (rc != MR_OK && !st->redis && !mr_fs_exists(st->path))
            mr_error_hint(err, "run the materialize_online stage (millrace run), or give the store with --store PATH");
    }
    if (rc != MR_OK) {
        mr__features_free(fs);
        return rc;
    }
    *out = fs;
    return MR_OK;
}

int32_t mr__features_of_input(const mr__serve_features *fs, size_t i) { return fs ? fs->svc_of_input[i] : -1; }

/* Under mu: store st as it is now (reopened when a new file was renamed
 * into its place, or a Redis store changed its layout, and the new one
 * fits). */
static void refresh_locked(mr__serve_features *fs, store_state *st)
{
    struct stat sb;
    int changed = st->redis ? st->stale
                            : stat(st->path, &sb) == 0 && (sb.st_ino != st->cur->ino || sb.st_dev != st->cur->dev) &&
                                  sb.st_ino != st->refused_ino;
    if (!changed) return;
    st->stale = 0;
    store_snap *n = NULL;
    mr_error err;
    mr_error_init(&err);
    if (snap_open(fs->svc, st->index, st->path, &n, &err) == MR_OK) {
        store_snap *old = st->cur;
        st->cur = n;
        if (old->refs == 0) snap_free(old);
        else old->refs = -old->refs; /* retired: the last release frees it */
    } else {
        if (!st->redis) st->refused_ino = sb.st_ino;
        mr_log(MR_LOG_WARN, "serve: the replaced online store %s is not used (the old one keeps serving): %s", st->path,
               err.msg);
    }
}

mr__features_snap *mr__features_acquire(mr__serve_features *fs)
{
    mr__features_snap *sn = mr_malloc(sizeof(*sn) + fs->n_stores * sizeof(store_snap *));
    if (!sn) return NULL;
    sn->n = fs->n_stores;
    pthread_mutex_lock(&fs->mu);
    for (size_t i = 0; i < fs->n_stores; i++) {
        refresh_locked(fs, &fs->stores[i]);
        sn->s[i] = fs->stores[i].cur;
        sn->s[i]->refs++;
    }
    pthread_mutex_unlock(&fs->mu);
    return sn;
}

void mr__features_release(mr__serve_features *fs, mr__features_snap *sn)
{
    if (!sn) return;
    store_snap *gone[64];
    size_t n_gone = 0;
    pthread_mutex_lock(&fs->mu);
    for (size_t i = 0; i < sn->n; i++) {
        store_snap *s = sn->s[i];
        /* a live snapshot counts its holders up; a retired one down from -holders */
        if (s->refs > 0) s->refs--;
        else if (++s->refs == 0 && n_gone < 64) gone[n_gone++] = s;
    }
    pthread_mutex_unlock(&fs->mu);
    for (size_t i = 0; i < n_gone; i++) snap_free(gone[i]);
    mr_free(sn);
}

/* ---- a batch's rows -------------------------------------------------------------- */

/* A store value as the cell mr_bundle_coerce_value takes. */
static void value_cell(const mr_online_value *v, mr_cell *c)
{
    memset(c, 0, sizeof(*c));
    if (!v->live) return;
    switch (v->type) {
    case MR_T_BOOL:
        c->kind = MR_CELL_BOOL;
        c->i = v->i;
        break;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        c->kind = MR_CELL_NUM;
        c->num = v->f;
        break;
    case MR_T_STRING:
        c->kind = MR_CELL_STR;
        c->str = v->str;
        c->len = v->len;
        break;
    default:
        c->kind = MR_CELL_INT;
        c->i = v->i;
        break;
    }
}

static int fail(char *msg, size_t cap, const char **field, const char *f, int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int fail(char *msg, size_t cap, const char **field, const char *f, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    if (field) *field = f;
    return status;
}

/* A key's JSON value as text into buf (the store parses it by the key's type). NULL: absent or null. */
static const char *key_text(const json_t *v, char *buf, size_t cap, size_t *len)
{
    if (json_is_string(v)) {
        *len = json_string_length(v);
        return json_string_value(v);
    }
    if (json_is_integer(v)) snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_boolean(v)) snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_real(v)) snprintf(buf, cap, "%.17g", json_real_value(v)); /* refused by any key type */
    else return NULL;
    *len = strlen(buf);
    return buf;
}

/* One store's part of a batch: the rows' keys, then what the lookup read. */
typedef struct batch_store {
    const char **texts;    /* n_rows * n_keys: a JSON string's bytes, or NULL: nums */
    size_t *lens;
    char (*nums)[32];      /* n_rows * n_keys: integer and boolean keys as text */
    mr_online_value *vals; /* after run: n_rows * the store's features */
    int *found;
    mr_online_hold *hold;
} batch_store;

struct mr__features_batch {
    mr__serve_features *fs;
    mr__features_snap *sn;
    int64_t clock_us;    /* "now" for every request of the batch without an as_of */
    size_t n_rows, cap;  /* rows added */
    int64_t *now;        /* per row: its request's as_of */
    batch_store st[];    /* per store */
};

mr__features_batch *mr__features_batch_new(mr__serve_features *fs, mr__features_snap *sn)
{
    if (!sn) return NULL;
    mr__features_batch *fb = mr_calloc(1, sizeof(*fb) + fs->n_stores * sizeof(batch_store));
    if (fb) {
        fb->fs = fs;
        fb->sn = sn;
        fb->clock_us = (int64_t)(mr_wall_time() * 1e6);
    }
    return fb;
}

void mr__features_batch_free(mr__features_batch *fb)
{
    if (!fb) return;
    for (size_t i = 0; i < fb->fs->n_stores; i++) {
        batch_store *b = &fb->st[i];
        mr_online_hold_free(b->hold);
        mr_free(b->texts);
        mr_free(b->lens);
        mr_free(b->nums);
        mr_free(b->vals);
        mr_free(b->found);
    }
    mr_free(fb->now);
    mr_free(fb);
}

static int grow(mr__features_batch *fb, size_t rows)
{
    if (fb->n_rows + rows <= fb->cap) return 0;
    size_t cap = fb->cap ? fb->cap : 64;
    while (cap < fb->n_rows + rows) cap *= 2;
    int64_t *w = mr_realloc(fb->now, cap * sizeof(*w));
    if (!w) return -1;
    fb->now = w;
    for (size_t i = 0; i < fb->fs->n_stores; i++) {
        batch_store *b = &fb->st[i];
        size_t nk = fb->fs->stores[i].ss->n_keys;
        const char **t = mr_realloc(b->texts, cap * nk * sizeof(*t));
        if (t) b->texts = t;
        size_t *l = t ? mr_realloc(b->lens, cap * nk * sizeof(*l)) : NULL;
        if (l) b->lens = l;
        char(*n)[32] = l ? mr_realloc(b->nums, cap * nk * sizeof(*n)) : NULL;
        if (!n) return -1;
        b->nums = n;
    }
    fb->cap = cap;
    return 0;
}

/* "user" or "user, movie": a store's keys, for messages. */
static void key_list(const mr_bundle_service_store *ss, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t k = 0; k < ss->n_keys; k++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", k ? ", " : "", ss->key_names[k]);
}

int mr__features_batch_add(mr__features_batch *fb, const mr__serve_req *q, size_t *first_row, int *include, char *msg,
                           size_t cap, const char **field, long *row)
{
    mr__serve_features *fs = fb->fs;
    const mr_bundle_service *svc = fs->svc;
    *include = 0;
    *row = -1;
    *field = NULL;
    const json_t *as_of = json_object_get(q->doc, "as_of"), *inc = json_object_get(q->doc, "include_features");
    int64_t now = fb->clock_us;
    if (as_of && (!json_is_string(as_of) || mr_pit_parse_moment(json_string_value(as_of), json_string_length(as_of), &now)))
        return fail(msg, cap, field, "as_of", 400, "\"as_of\" must be a timestamp (\"2024-03-01 10:00:00\") or a date");
    if (inc && !json_is_boolean(inc)) return fail(msg, cap, field, "include_features", 400, "\"include_features\" must be true or false");
    *include = json_is_true(inc);
    /* the stores' features come from the stores: a request that sends one is mistaken about the model */
    const json_t *cols = q->columnar ? json_object_get(q->doc, "columns") : NULL;
    const char *name;
    const json_t *v;
    for (size_t r = 0; r < (cols ? 1 : q->n_rows); r++) {
        const json_t *obj = cols ? cols : json_array_get(json_object_get(q->doc, "rows"), r);
        json_object_foreach((json_t *)obj, name, v)
        {
            ssize_t i = mr_bundle_input_index(fs->b, name);
            if (i < 0 || fs->svc_of_input[i] < 0) continue;
            const mr_bundle_service_feature *x = &svc->features[fs->svc_of_input[i]];
            char keys[256];
            key_list(&svc->stores[x->store], keys, sizeof(keys));
            *row = cols ? -1 : (long)r;
            return fail(msg, cap, field, x->name, 400,
                        "'%s' comes from the online store (view %s): send the entity key%s (%s) and the other inputs",
                        name, x->view, svc->stores[x->store].n_keys > 1 ? "s" : "", keys);
        }
    }
    if (grow(fb, q->n_rows)) return fail(msg, cap, field, NULL, 500, "out of memory");
    mr_error err;
    mr_error_init(&err);
    for (size_t i = 0; i < fs->n_stores; i++) {
        const mr_bundle_service_store *ss = fs->stores[i].ss;
        batch_store *b = &fb->st[i];
        size_t nk = ss->n_keys;
        for (size_t r = 0; r < q->n_rows; r++) {
            size_t at = (fb->n_rows + r) * nk;
            for (size_t k = 0; k < nk; k++) {
                const char *t = key_text(mr__serve_req_value(q, 0, ss->key_names[k], r), b->nums[at + k],
                                         sizeof(b->nums[at + k]), &b->lens[at + k]);
                if (!t) {
                    *row = (long)r;
                    return fail(msg, cap, field, ss->key_names[k], 422, "row %zu: the entity key '%s' is missing", r,
                                ss->key_names[k]);
                }
                b->texts[at + k] = t;
            }
            /* a key that does not parse as its type fails its request alone, here */
            if (mr_online_check_keys(fb->sn->s[i]->st, b->texts + at, b->lens + at, &err) != MR_OK) {
                *row = (long)r;
                for (size_t k = 0; k < nk; k++)
                    if (!strcmp(err.key, ss->key_names[k])) *field = ss->key_names[k];
                return fail(msg, cap, field, *field, err.code == MR_E_PARSE ? 422 : 500, "row %zu: %s", r, err.msg);
            }
            for (size_t k = 0; k < nk; k++)
                if (b->texts[at + k] == b->nums[at + k]) b->texts[at + k] = NULL; /* nums may move as the batch grows */
        }
    }
    for (size_t r = 0; r < q->n_rows; r++) fb->now[fb->n_rows + r] = now;
    *first_row = fb->n_rows;
    fb->n_rows += q->n_rows;
    return 0;
}

int mr__features_batch_run(mr__features_batch *fb, char *msg, size_t cap)
{
    if (!fb->n_rows) return 0;
    for (size_t i = 0; i < fb->fs->n_stores; i++) {
        batch_store *b = &fb->st[i];
        const mr_online *st = fb->sn->s[i]->st;
        size_t nk = fb->fs->stores[i].ss->n_keys, nf = mr_online_n_features(st);
        for (size_t j = 0; j < fb->n_rows * nk; j++)
            if (!b->texts[j]) b->texts[j] = b->nums[j];
        b->vals = mr_malloc(fb->n_rows * (nf ? nf : 1) * sizeof(*b->vals)); /* the lookup sets every value */
        b->found = mr_calloc(fb->n_rows, sizeof(*b->found));
        if (!b->vals || !b->found) return fail(msg, cap, NULL, NULL, 500, "out of memory");
        mr_error err;
        mr_error_init(&err);
        mr_status rc = mr_online_lookup_many(st, fb->n_rows, b->texts, b->lens, fb->now, b->vals, b->found, &b->hold, &err);
        if (rc == MR_E_SCHEMA) { /* rematerialised with another layout: the next batch reopens it */
            pthread_mutex_lock(&fb->fs->mu);
            fb->fs->stores[i].stale = 1;
            pthread_mutex_unlock(&fb->fs->mu);
        }
        /* the keys were checked as they were added: what fails here is the store's fault */
        if (rc != MR_OK) return fail(msg, cap, NULL, NULL, 500, "online store: %s", err.msg);
    }
    return 0;
}

int mr__features_batch_cells(const mr__features_batch *fb, size_t first_row, size_t n_rows, mr_cell **cells_out,
                             char *msg, size_t cap, const char **field, long *row)
{
    *cells_out = NULL;
    *row = -1;
    *field = NULL;
    const mr_bundle_service *svc = fb->fs->svc;
    size_t nf = svc->n_features;
    mr_cell *cells = mr_malloc((n_rows * nf > 0 ? n_rows * nf : 1) * sizeof(*cells)); /* each is set below */
    if (!cells) return fail(msg, cap, field, NULL, 500, "out of memory");
    for (size_t r = 0; r < n_rows; r++) {
        size_t at = first_row + r;
        for (size_t k = 0; k < nf; k++) {
            const mr_bundle_service_feature *x = &svc->features[k];
            const store_snap *sn = fb->sn->s[x->store];
            const batch_store *b = &fb->st[x->store];
            const mr_online_value *ov = &b->vals[at * mr_online_n_features(sn->st) + sn->feat[k]];
            if (ov->live) {
                value_cell(ov, &cells[r * nf + k]);
                continue;
            }
            if (!svc->reject_missing) {
                cells[r * nf + k] = x->dflt;
                continue;
            }
            const mr_bundle_service_store *ss = &svc->stores[x->store];
            const char *kt = b->texts[at * ss->n_keys];
            int shown = (int)(b->lens[at * ss->n_keys] > 64 ? 64 : b->lens[at * ss->n_keys]);
            *row = (long)r;
            int st = !b->found[at] ? fail(msg, cap, field, ss->key_names[0], 422,
                                          "row %zu: entity %.*s is not in the online store", r, shown, kt)
                                   : fail(msg, cap, field, x->name, 422,
                                          "row %zu: entity %.*s has no live value of '%s' (view %s: %s)", r, shown, kt,
                                          x->name, x->view,
                                          ov->event_us == INT64_MIN ? "none"
                                          : ov->event_us > fb->now[at] ? "its latest is after as_of"
                                                                       : "expired, older than the view's ttl");
            mr_free(cells);
            return st;
        }
    }
    *cells_out = cells;
    return 0;
}

static void cell_json(mr_buf *out, const mr_cell *c)
{
    switch (c->kind) {
    case MR_CELL_NUM: mr__serve_json_double(out, c->num); break;
    case MR_CELL_INT: mr_buf_printf(out, "%lld", (long long)c->i); break;
    case MR_CELL_BOOL: mr_buf_puts(out, c->i ? "true" : "false"); break;
    case MR_CELL_STR: mr__serve_json_strn(out, c->str, c->len); break;
    default: mr_buf_puts(out, "null"); break;
    }
}

void mr__features_rows_json(const mr__serve_features *fs, const mr_cell *cells, size_t n_rows, mr_buf *out)
{
    size_t nf = fs->svc->n_features;
    mr_buf_puts(out, "[");
    for (size_t r = 0; r < n_rows; r++) {
        mr_buf_puts(out, r ? ", {" : "{");
        for (size_t k = 0; k < nf; k++) {
            if (k) mr_buf_puts(out, ", ");
            mr__serve_json_str(out, fs->svc->features[k].name);
            mr_buf_puts(out, ": ");
            cell_json(out, &cells[r * nf + k]);
        }
        mr_buf_puts(out, "}");
    }
    mr_buf_puts(out, "]");
}

int mr__features_vector_json(mr__serve_features *fs, const char *(*arg)(void *ctx, const char *name), void *ctx,
                             mr_buf *out, char *msg, size_t cap)
{
    const char *as_of = arg(ctx, "as_of");
    int64_t now = (int64_t)(mr_wall_time() * 1e6);
    if (as_of && mr_pit_parse_moment(as_of, strlen(as_of), &now))
        return fail(msg, cap, NULL, NULL, 400, "as_of must be a timestamp (2024-03-01 10:00:00) or a date");
    mr__features_snap *sn = mr__features_acquire(fs);
    if (!sn) return fail(msg, cap, NULL, NULL, 500, "out of memory");
    int st = 0, all_found = 1, n_asked = 0;
    mr_buf feats;
    mr_buf_init(&feats);
    char wanted[512] = "";
    for (size_t i = 0; !st && i < fs->n_stores; i++) {
        const mr_bundle_service_store *ss = fs->stores[i].ss;
        const mr_online *s = sn->s[i]->st;
        const char *keys[16] = {0};
        size_t given = 0;
        for (size_t k = 0; k < ss->n_keys && k < 16; k++) {
            keys[k] = arg(ctx, ss->key_names[k]);
            if (!keys[k] && fs->n_stores == 1 && ss->n_keys == 1) keys[k] = arg(ctx, "entity");
            given += keys[k] != NULL;
        }
        char kl[256];
        key_list(ss, kl, sizeof(kl));
        snprintf(wanted + strlen(wanted), sizeof(wanted) - strlen(wanted), "%s?%s=...", i ? " or " : "", kl);
        if (ss->n_keys > 16 || given < ss->n_keys) continue; /* a store this request does not name an entity of */
        n_asked++;
        size_t n = mr_online_n_features(s);
        mr_online_value *vals = mr_calloc(n ? n : 1, sizeof(*vals));
        int found = 0;
        mr_error err;
        mr_error_init(&err);
        mr_online_hold *hold = NULL;
        mr_status rc = vals ? mr_online_lookup_many(s, 1, keys, NULL, &now, vals, &found, &hold, &err)
                            : MR_ERR(&err, MR_E_NOMEM, "out of memory");
        if (rc != MR_OK) st = fail(msg, cap, NULL, NULL, rc == MR_E_PARSE ? 400 : 500, "%s", err.msg);
        all_found &= found;
        for (size_t f = 0; !st && f < n; f++) {
            mr_cell c;
            value_cell(&vals[f], &c);
            if (feats.len) mr_buf_puts(&feats, ", ");
            mr__serve_json_str(&feats, mr_online_feature_name(s, f));
            mr_buf_puts(&feats, ": ");
            cell_json(&feats, &c); /* while the hold and sn keep the bytes */
        }
        mr_online_hold_free(hold);
        mr_free(vals);
    }
    if (!st && !n_asked) st = fail(msg, cap, NULL, NULL, 400, "name the entity: %s", wanted);
    if (!st) mr_buf_printf(out, "{\"found\": %s, \"features\": {%s}}", all_found ? "true" : "false", feats.data ? feats.data : "");
    mr_buf_free(&feats);
    mr__features_release(fs, sn);
    return st;
}
