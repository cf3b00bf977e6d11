/* Data files on S3: the shared client per bucket, its request log, and
 * Parquet objects read by ranges (s3_int.h). */
#include "data/s3_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MAX 65536

typedef struct s3_logent {
    char what[12];
    char *key;
    uint64_t off, len, bytes;
} s3_logent;

struct mr__s3h {
    mr_s3 *s;
    char bucket[256];
    pthread_mutex_t mu; /* one request at a time on the connection; the log */
    int refs;           /* atomic */
    s3_logent *log;
    size_t n_log, cap_log;
    uint64_t n_req, n_bytes; /* every logged request, kept or not */
};

int mr__is_s3(const char *path)
{
    return path && !strncmp(path, "s3://", 5);
}

static const char *env_endpoint(void)
{
    static const char *const names[] = {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "MILLRACE_S3_ENDPOINT"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return v;
    }
    return NULL;
}

mr_status mr__s3h_open(const char *url, mr__s3h **out, char **key_out, mr_error *err)
{
    *out = NULL;
    if (key_out) *key_out = NULL;
    char bucket[256], key[2048];
    mr_status rc = mr_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, err);
    if (rc != MR_OK) return rc;
    mr__s3h *h = mr_calloc(1, sizeof *h);
    if (!h) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    snprintf(h->bucket, sizeof h->bucket, "%s", bucket);
    mr_s3_opts o;
    mr_s3_opts_init(&o);
    o.endpoint = env_endpoint();
    rc = mr_s3_open(bucket, &o, &h->s, err);
    if (rc != MR_OK) {
        mr_error_hint(err, "s3:// data sources read the endpoint from AWS_ENDPOINT_URL (or MILLRACE_S3_ENDPOINT) and "
                           "the credentials as the AWS tools do");
        mr_free(h);
        return rc;
    }
    if (key_out && !(*key_out = mr_strdup(key))) {
        mr_s3_close(h->s);
        mr_free(h);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&h->mu, NULL);
    h->refs = 1;
    *out = h;
    return MR_OK;
}

mr__s3h *mr__s3h_ref(mr__s3h *h)
{
    __atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
    return h;
}

void mr__s3h_unref(mr__s3h *h)
{
    if (!h || __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    mr_s3_close(h->s);
    for (size_t i = 0; i < h->n_log; i++) mr_free(h->log[i].key);
    mr_free(h->log);
    pthread_mutex_destroy(&h->mu);
    mr_free(h);
}

const char *mr__s3h_bucket(const mr__s3h *h)
{
    return h->bucket;
}

size_t mr__s3h_key_at(const mr__s3h *h)
{
    return strlen("s3://") + strlen(h->bucket) + 1;
}

/* Under h->mu. A log entry that cannot be kept is still counted. */
static void log_req(mr__s3h *h, const char *what, const char *key, uint64_t off, uint64_t len, uint64_t bytes)
{
    h->n_req++;
    h->n_bytes += bytes;
    if (h->n_log == h->cap_log) {
        if (h->cap_log >= LOG_MAX) return;
        size_t nc = h->cap_log ? h->cap_log * 2 : 16;
        s3_logent *nl = mr_realloc(h->log, nc * sizeof *nl);
        if (!nl) return;
        h->log = nl;
        h->cap_log = nc;
    }
    s3_logent *e = &h->log[h->n_log];
    if (!(e->key = mr_strdup(key))) return;
    snprintf(e->what, sizeof e->what, "%s", what);
    e->off = off;
    e->len = len;
    e->bytes = bytes;
    h->n_log++;
}

mr_status mr__s3h_get(mr__s3h *h, const char *what, const char *key, const char *etag, uint64_t off, uint64_t len,
                      mr_buf *out, mr_error *err)
{
    pthread_mutex_lock(&h->mu);
    size_t before = out->len;
    mr_status rc = mr_s3_get_version(h->s, key, etag, off, len, out, err);
    log_req(h, what, key, off, len, rc == MR_OK ? (uint64_t)(out->len - before) : 0);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

mr_status mr__s3h_get_file(mr__s3h *h, const char *key, const char *etag, const char *path, mr_error *err)
{
    pthread_mutex_lock(&h->mu);
    mr_s3_stats a, b;
    mr_s3_get_stats(h->s, &a);
    mr_status rc = mr_s3_get_file_version(h->s, key, etag, path, err);
    mr_s3_get_stats(h->s, &b);
    log_req(h, "file", key, 0, 0, b.bytes_down - a.bytes_down);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

mr_status mr__s3h_list(mr__s3h *h, const char *prefix, mr_s3_list_etag_fn fn, void *arg, mr_error *err)
{
    pthread_mutex_lock(&h->mu);
    mr_s3_stats a, b;
    mr_s3_get_stats(h->s, &a);
    mr_status rc = mr_s3_list_etags(h->s, prefix, fn, arg, err);
    mr_s3_get_stats(h->s, &b);
    for (uint64_t i = a.requests; i < b.requests; i++)
        log_req(h, "list", prefix, 0, 0, i + 1 == b.requests ? b.bytes_down - a.bytes_down : 0);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

size_t mr__s3h_n_requests(const mr__s3h *h)
{
    return h ? h->n_log : 0;
}

void mr__s3h_request(const mr__s3h *h, size_t i, mr_dataset_request *out)
{
    memset(out, 0, sizeof *out);
    if (!h || i >= h->n_log) return;
    out->what = h->log[i].what;
    out->key = h->log[i].key;
    out->off = h->log[i].off;
    out->len = h->log[i].len;
    out->bytes = h->log[i].bytes;
}

void mr__s3h_totals(const mr__s3h *h, uint64_t *requests, uint64_t *bytes)
{
    *requests = h ? h->n_req : 0;
    *bytes = h ? h->n_bytes : 0;
}

/* ---- listings and versions ------------------------------------------------------ */

typedef struct collect {
    mr__s3_obj *v;
    size_t n, cap;
    int oom;
} collect;

static int collect_one(void *arg, const char *key, uint64_t size, const char *etag)
{
    collect *c = arg;
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        mr__s3_obj *nv = mr_realloc(c->v, nc * sizeof *nv);
        if (!nv) return c->oom = 1;
        c->v = nv;
        c->cap = nc;
    }
    mr__s3_obj *o = &c->v[c->n];
    if (!(o->key = mr_strdup(key))) return c->oom = 1;
    o->size = size;
    snprintf(o->etag, sizeof o->etag, "%s", etag);
    c->n++;
    return 0;
}

static int cmp_obj(const void *a, const void *b)
{
    return strcmp(((const mr__s3_obj *)a)->key, ((const mr__s3_obj *)b)->key);
}

mr_status mr__s3h_list_all(mr__s3h *h, const char *prefix, mr__s3_obj **out, size_t *n_out, mr_error *err)
{
    *out = NULL;
    *n_out = 0;
    collect c = {0};
    mr_status rc = mr__s3h_list(h, prefix, collect_one, &c, err);
    if (c.oom && (rc == MR_OK || rc == MR_E_INTERRUPTED)) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc != MR_OK) {
        mr__s3_objs_free(c.v, c.n);
        return rc;
    }
    if (c.n) qsort(c.v, c.n, sizeof *c.v, cmp_obj); /* some services list in their own order */
    *out = c.v;
    *n_out = c.n;
    return MR_OK;
}

const mr__s3_obj *mr__s3_find(const mr__s3_obj *v, size_t n, const char *key)
{
    mr__s3_obj want = {(char *)key, 0, ""};
    return n ? bsearch(&want, v, n, sizeof *v, cmp_obj) : NULL;
}

void mr__s3_objs_free(mr__s3_obj *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) mr_free(v[i].key);
    mr_free(v);
}

mr_status mr__s3_version(const char *bucket, const mr__s3_obj *const *v, size_t n, char *id, mr_error *err)
{
    mr_hasher *hs = NULL;
    mr_hash128 d = {0};
    mr_status rc = mr_hasher_new(&hs, err);
    if (rc == MR_OK) {
        char line[64];
        mr_hasher_update(hs, "s3\n", 3);
        mr_hasher_update(hs, bucket, strlen(bucket));
        mr_hasher_update(hs, "\n", 1);
        for (size_t i = 0; i < n; i++) {
            mr_hasher_update(hs, v[i]->key, strlen(v[i]->key));
            int l = snprintf(line, sizeof line, "\t%llu\t", (unsigned long long)v[i]->size);
            mr_hasher_update(hs, line, (size_t)l);
            mr_hasher_update(hs, v[i]->etag, strlen(v[i]->etag));
            mr_hasher_update(hs, "\n", 1);
        }
        d = mr_hasher_digest(hs);
        mr_hasher_free(hs);
    }
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(d, hex);
    snprintf(id, MR_S3_VERSION_LEN, "s3%s", hex);
    return rc;
}

/* ---- Parquet objects by ranges ------------------------------------------------ */

typedef struct ranged_obj {
    mr__s3h *h;
    char *key;
    char *etag;
    uint64_t size;
} ranged_obj;

static mr_status ranged_read(void *ctx, uint64_t off, size_t len, uint8_t *dst, mr_error *err)
{
    ranged_obj *o = ctx;
    mr_buf b;
    mr_buf_init(&b);
    /* the last bytes are the footer; anything else is column chunks */
    mr_status rc = mr__s3h_get(o->h, off + len == o->size ? "footer" : "data", o->key, o->etag, off, len, &b, err);
    if (rc == MR_OK && b.len != len)
        rc = MR_ERR(err, MR_E_IO, "s3://%s/%s: asked for %zu bytes at offset %llu, got %zu (the object changed?)",
                    o->h->bucket, o->key, len, (unsigned long long)off, b.len);
    if (rc == MR_OK) memcpy(dst, b.data, len);
    mr_buf_free(&b);
    return rc;
}

static void ranged_release(void *ctx)
{
    ranged_obj *o = ctx;
    mr__s3h_unref(o->h);
    mr_free(o->key);
    mr_free(o->etag);
    mr_free(o);
}

mr_status mr__s3h_parquet_open(mr__s3h *h, const char *key, uint64_t size, const char *etag, mr_parquet_file **out,
                               mr_error *err)
{
    *out = NULL;
    ranged_obj *o = mr_calloc(1, sizeof *o);
    char *name = mr_asprintf("s3://%s/%s", h->bucket, key);
    if (!o || !name || !(o->key = mr_strdup(key)) || !(o->etag = mr_strdup(etag ? etag : ""))) {
        if (o) mr_free(o->key);
        mr_free(o);
        mr_free(name);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    o->h = mr__s3h_ref(h);
    o->size = size;
    mr_status rc = mr_parquet_open_ranged(name, size, ranged_read, o, ranged_release, out, err);
    mr_free(name);
    return rc;
}
