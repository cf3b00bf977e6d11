/* The embedded online feature store (include/millrace/online.h): the
 * latest vector per entity in one file, an open-addressing hash table of
 * record offsets over the records, memory-mapped for reading. The layout
 * is docs/formats.md, "Online feature store". */
#define _GNU_SOURCE /* mmap, MAP_POPULATE */
#include "millrace/online.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/online_int.h"

static int store_type_ok(mr_dtype t)
{
    return t == MR_T_BOOL || t == MR_T_INT64 || t == MR_T_FLOAT64 || t == MR_T_FLOAT32 || t == MR_T_STRING ||
           t == MR_T_DATE || t == MR_T_TIMESTAMP;
}

/* ---- encoding --------------------------------------------------------------------- */

/* Appends value r of c (not null) in the store's encoding of its type. */
static mr_status put_value(mr_buf *b, const mr_column *c, size_t r)
{
    switch (c->type) {
    case MR_T_BOOL: return mr_buf_put_u8(b, ((const uint8_t *)c->data)[r] ? 1 : 0);
    case MR_T_FLOAT64: return mr_buf_put_f64(b, ((const double *)c->data)[r]);
    case MR_T_FLOAT32: {
        uint32_t u;
        memcpy(&u, &((const float *)c->data)[r], 4);
        return mr_buf_put_u32(b, u);
    }
    case MR_T_DATE: return mr_buf_put_u32(b, (uint32_t)((const int32_t *)c->data)[r]);
    case MR_T_STRING: {
        size_t l;
        const char *s = mr_column_str(c, r, &l);
        mr_status rc = l > UINT32_MAX ? MR_E_LIMIT : mr_buf_put_u32(b, (uint32_t)l);
        return rc == MR_OK ? mr_buf_append(b, s, l) : rc;
    }
    default: return mr_buf_put_u64(b, (uint64_t)((const int64_t *)c->data)[r]);
    }
}

/* A key's text as its encoding (appended to b). MR_E_PARSE when it does not parse. */
static mr_status put_key_text(mr_buf *b, mr_dtype t, const char *s, size_t l)
{
    switch (t) {
    case MR_T_STRING: {
        mr_status rc = l > UINT32_MAX ? MR_E_LIMIT : mr_buf_put_u32(b, (uint32_t)l);
        return rc == MR_OK ? mr_buf_append(b, s, l) : rc;
    }
    case MR_T_BOOL:
        if ((l == 4 && !memcmp(s, "true", 4)) || (l == 1 && *s == '1')) return mr_buf_put_u8(b, 1);
        if ((l == 5 && !memcmp(s, "false", 5)) || (l == 1 && *s == '0')) return mr_buf_put_u8(b, 0);
        return MR_E_PARSE;
    case MR_T_DATE: {
        int32_t d;
        if (mr_date_parse(s, l, &d) != 0) return MR_E_PARSE;
        return mr_buf_put_u32(b, (uint32_t)d);
    }
    case MR_T_TIMESTAMP: {
        int64_t us;
        if (mr_timestamp_parse(s, l, &us) != 0) return MR_E_PARSE;
        return mr_buf_put_u64(b, (uint64_t)us);
    }
    default: {
        char num[32], *end = NULL;
        if (!l || l >= sizeof(num)) return MR_E_PARSE;
        memcpy(num, s, l);
        num[l] = '\0';
        errno = 0;
        long long v = strtoll(num, &end, 10);
        if (errno || *end) return MR_E_PARSE;
        return mr_buf_put_u64(b, (uint64_t)v);
    }
    }
}

static uint64_t slot_of(const void *key, size_t len, uint64_t n_slots)
{
    return mr_hash_bytes(key, len).lo & (n_slots - 1);
}

/* ---- writing ---------------------------------------------------------------------- */

static mr_status put_name(mr_buf *b, const char *s)
{
    size_t l = strlen(s);
    if (l > UINT16_MAX) return MR_E_LIMIT;
    mr_status rc = mr_buf_put_u16(b, (uint16_t)l);
    return rc == MR_OK ? mr_buf_append(b, s, l) : rc;
}

mr_status mr__online_build_image(const char *const *keys, size_t n_keys, const mr_pit_view *views, size_t n_views,
                                 int threads, mr_buf *image, mr_error *err)
{
    mr_table *t = NULL;
    mr_status rc = mr_pit_latest(keys, n_keys, views, n_views, threads, &t, err);
    if (rc != MR_OK) return rc;
    size_t n_feat = t->n_cols - n_keys - n_views; /* each view: its features, then its event time */
    for (size_t c = 0; c < t->n_cols; c++) {
        if (store_type_ok(t->cols[c]->type)) continue;
        rc = MR_ERR(err, MR_E_SCHEMA, "column '%s' is %s: the online store holds bool, int64, float64, float32, string, "
                    "date and timestamp", t->cols[c]->name, mr_dtype_name(t->cols[c]->type));
        if (t->cols[c]->type == MR_T_DECIMAL) mr_error_hint(err, "cast it to float64 in the view's source");
        mr_table_free(t);
        return rc;
    }
    uint64_t n = t->n_rows, n_slots = 1;
    while (n_slots < 2 * n) n_slots <<= 1; /* at most half full: short probes */
    mr_buf head, schema, key;
    mr_buf_init(&head);
    mr_buf_init(&schema);
    mr_buf_init(&key);
    uint64_t *slots = mr_calloc(n_slots, sizeof(*slots));
    if (!slots) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* schema: keys (type, name), views (name, ttl, features (type, name)) */
    for (size_t k = 0; rc == MR_OK && k < n_keys; k++) {
        rc = mr_buf_put_u8(&schema, (uint8_t)t->cols[k]->type);
        if (rc == MR_OK) rc = put_name(&schema, keys[k]);
    }
    for (size_t v = 0, c = n_keys; rc == MR_OK && v < n_views; v++) {
        rc = put_name(&schema, views[v].name ? views[v].name : "");
        if (rc == MR_OK) rc = mr_buf_put_u64(&schema, (uint64_t)views[v].ttl_us);
        if (rc == MR_OK) rc = mr_buf_put_u32(&schema, (uint32_t)views[v].n_features);
        for (size_t f = 0; rc == MR_OK && f < views[v].n_features; f++, c++) {
            rc = mr_buf_put_u8(&schema, (uint8_t)t->cols[c]->type);
            if (rc == MR_OK) rc = put_name(&schema, t->cols[c]->name);
        }
        c++; /* the view's event time */
    }
    uint64_t schema_off = HEADER_LEN, slots_off = (schema_off + schema.len + 7) & ~(uint64_t)7;
    uint64_t records_off = slots_off + n_slots * 8;
    /* the image in one buffer: header, schema, the slots (filled in at the end), then each record as it is
     * encoded (a table of a million entities and 250 features is a few GB: it is not copied twice) */
    head.limit = (size_t)1 << 40;
    if (rc == MR_OK) {
        rc = mr_buf_append(&head, MAGIC, 8);
        if (rc == MR_OK) rc = mr_buf_put_u32(&head, VERSION);
        if (rc == MR_OK) rc = mr_buf_put_u32(&head, (uint32_t)n_keys);
        if (rc == MR_OK) rc = mr_buf_put_u32(&head, (uint32_t)n_views);
        if (rc == MR_OK) rc = mr_buf_put_u32(&head, (uint32_t)n_feat);
        if (rc == MR_OK) rc = mr_buf_put_u64(&head, n);
        if (rc == MR_OK) rc = mr_buf_put_u64(&head, n_slots);
        if (rc == MR_OK) rc = mr_buf_put_u64(&head, schema_off);
        if (rc == MR_OK) rc = mr_buf_put_u64(&head, slots_off);
        if (rc == MR_OK) rc = mr_buf_put_u64(&head, records_off);
        if (rc == MR_OK) rc = mr_buf_append(&head, schema.data, schema.len);
        while (rc == MR_OK && head.len < records_off) rc = mr_buf_put_u8(&head, 0);
    }
    /* records: key, the views' event times, the features (a presence byte, then the value) */
    for (size_t r = 0; rc == MR_OK && r < n; r++) {
        key.len = 0;
        for (size_t k = 0; rc == MR_OK && k < n_keys; k++) rc = put_value(&key, t->cols[k], r);
        uint64_t at = head.len;
        if (rc == MR_OK) rc = key.len > UINT32_MAX ? MR_E_LIMIT : mr_buf_put_u32(&head, (uint32_t)key.len);
        if (rc == MR_OK) rc = mr_buf_append(&head, key.data, key.len);
        for (size_t v = 0, c = n_keys; rc == MR_OK && v < n_views; v++) {
            c += views[v].n_features;
            const mr_column *et = t->cols[c++];
            rc = mr_buf_put_u64(&head, (uint64_t)(mr_column_is_null(et, r) ? NO_TIME : ((const int64_t *)et->data)[r]));
        }
        for (size_t v = 0, c = n_keys; rc == MR_OK && v < n_views; v++, c++)
            for (size_t f = 0; rc == MR_OK && f < views[v].n_features; f++, c++) {
                const mr_column *col = t->cols[c];
                int null = mr_column_is_null(col, r);
                rc = mr_buf_put_u8(&head, null ? 0 : 1);
                if (rc == MR_OK && !null) rc = put_value(&head, col, r);
            }
        if (rc != MR_OK) break;
        uint64_t s = slot_of(key.data, key.len, n_slots);
        while (slots[s]) s = (s + 1) & (n_slots - 1);
        slots[s] = at;
    }
    if (rc == MR_OK) {
        for (uint64_t s = 0; s < n_slots; s++) memcpy(head.data + slots_off + s * 8, &slots[s], 8); /* little-endian */
    } else if (!mr_error_is_set(err)) {
        rc = MR_ERR(err, rc, rc == MR_E_LIMIT ? "the online store would be too large (over 1 TiB)" : "out of memory");
    }
    if (rc == MR_OK) {
        *image = head; /* the caller's now */
        mr_buf_init(&head);
    }
    mr_free(slots);
    mr_buf_free(&head);
    mr_buf_free(&schema);
    mr_buf_free(&key);
    mr_table_free(t);
    return rc;
}

mr_status mr_online_build(const char *path, const char *const *keys, size_t n_keys, const mr_pit_view *views,
                          size_t n_views, int threads, mr_error *err)
{
    mr_buf image;
    mr_buf_init(&image);
    mr_status rc = mr__online_build_image(keys, n_keys, views, n_views, threads, &image, err);
    if (rc == MR_OK) rc = mr_fs_write_atomic(path, image.data, image.len, err);
    mr_buf_free(&image);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

static char *read_name(mr_reader *r)
{
    uint16_t l = mr_reader_u16(r);
    const char *p = mr_reader_bytes(r, l);
    if (!p) return NULL;
    char *s = mr_malloc((size_t)l + 1);
    if (s) {
        memcpy(s, p, l);
        s[l] = '\0';
    }
    return s;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void mr_online_close(mr_online *s)
{
    if (!s) return;
    mr__online_redis_close(s->redis);
    if (s->owned) mr_free((void *)s->map);
    else if (s->map && s->len) munmap((void *)s->map, s->len);
    mr__online_schema_free(s);
    mr_free(s);
}

void mr__online_schema_free(mr_online *s)
{
    for (uint32_t k = 0; s->key_names && k < s->n_keys; k++) mr_free(s->key_names[k]);
    for (uint32_t v = 0; s->views && v < s->n_views; v++) mr_free(s->views[v].name);
    for (uint32_t f = 0; s->feats && f < s->n_features; f++) mr_free(s->feats[f].name);
    mr_free(s->key_names);
    mr_free(s->key_types);
    mr_free(s->views);
    mr_free(s->feats);
}

static mr_status corrupt(mr_error *err, const char *path, const char *what)
{
    mr_status rc = MR_ERR(err, MR_E_CORRUPT, "%s is not a valid online feature store: %s", path, what);
    mr_error_at(err, path, 0, 0);
    return rc;
}

mr_status mr_online_open(const char *path, mr_online **out, mr_error *err)
{
    *out = NULL;
    if (!strncmp(path, "redis://", 8)) return mr__online_redis_open(path, out, err);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return MR_ERR_SYS(err, MR_E_IO, e, "cannot stat %s", path);
    }
    if ((uint64_t)st.st_size < HEADER_LEN) {
        close(fd);
        return corrupt(err, path, "shorter than its header");
    }
    mr_online *s = mr_calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    s->len = (size_t)st.st_size;
    void *m = mmap(NULL, s->len, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd); /* the mapping stays: a rename over the path later does not change what this store reads */
    if (m == MAP_FAILED) {
        s->len = 0;
        mr_online_close(s);
        return MR_ERR_SYS(err, MR_E_IO, e, "cannot map %s", path);
    }
    s->map = m;
    mr_status rc = mr__online_parse(s, path, err);
    if (rc != MR_OK) {
        mr_online_close(s);
        return rc;
    }
    *out = s;
    return MR_OK;
}

mr_status mr__online_parse(mr_online *s, const char *path, mr_error *err)
{
    if (s->len < HEADER_LEN) return corrupt(err, path, "shorter than its header");
    mr_reader r;
    mr_reader_init(&r, s->map, s->len);
    const void *magic = mr_reader_bytes(&r, 8);
    if (!magic || memcmp(magic, MAGIC, 8)) return corrupt(err, path, "no MRFSTORE magic");
    uint32_t version = mr_reader_u32(&r);
    if (version != VERSION)
        return MR_ERR(err, MR_E_CORRUPT, "%s is an online store of format version %u; this millrace reads %u", path,
                      version, VERSION);
    s->n_keys = mr_reader_u32(&r);
    s->n_views = mr_reader_u32(&r);
    s->n_features = mr_reader_u32(&r);
    s->n_entities = mr_reader_u64(&r);
    s->n_slots = mr_reader_u64(&r);
    uint64_t schema_off = mr_reader_u64(&r);
    s->slots_off = mr_reader_u64(&r);
    s->records_off = mr_reader_u64(&r);
    const char *why = NULL;
    if (s->n_keys == 0 || s->n_keys > 64 || s->n_views == 0 || s->n_views > 4096 || s->n_features > 1u << 20)
        why = "implausible key, view or feature counts";
    else if (s->n_slots == 0 || (s->n_slots & (s->n_slots - 1)) || s->n_slots < s->n_entities)
        why = "the slot count is not a power of two above the entity count";
    else if (schema_off < HEADER_LEN || schema_off > s->len || s->slots_off > s->len || s->slots_off < schema_off ||
             s->n_slots > (s->len - s->slots_off) / 8 || s->records_off != s->slots_off + s->n_slots * 8 ||
             s->records_off > s->len || s->slots_off % 8)
        why = "its sections do not fit in the file";
    if (why) return corrupt(err, path, why);
    s->key_names = mr_calloc(s->n_keys, sizeof(char *));
    s->key_types = mr_calloc(s->n_keys, sizeof(mr_dtype));
    s->views = mr_calloc(s->n_views, sizeof(view_info));
    s->feats = mr_calloc(s->n_features ? s->n_features : 1, sizeof(feat));
    if (!s->key_names || !s->key_types || !s->views || !s->feats) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_reader_init(&r, s->map + schema_off, s->slots_off - schema_off);
    int oom = 0;
    for (uint32_t k = 0; k < s->n_keys && !r.bad && !oom; k++) {
        s->key_types[k] = (mr_dtype)mr_reader_u8(&r);
        s->key_names[k] = read_name(&r);
        oom = !r.bad && !s->key_names[k];
        if (!r.bad && s->key_types[k] != MR_T_INT64 && s->key_types[k] != MR_T_STRING && s->key_types[k] != MR_T_DATE &&
            s->key_types[k] != MR_T_TIMESTAMP && s->key_types[k] != MR_T_BOOL)
            why = "a key of a type a key cannot have";
    }
    size_t f = 0;
    for (uint32_t v = 0; v < s->n_views && !r.bad && !oom && !why; v++) {
        s->views[v].name = read_name(&r);
        oom = !r.bad && !s->views[v].name;
        s->views[v].ttl_us = (int64_t)mr_reader_u64(&r);
        s->views[v].n_features = mr_reader_u32(&r);
        if (s->views[v].ttl_us < 0 || s->views[v].n_features > s->n_features - f) {
            why = "a view's ttl or feature count is out of range";
            break;
        }
        for (size_t q = 0; q < s->views[v].n_features && !r.bad && !oom; q++, f++) {
            s->feats[f].type = (mr_dtype)mr_reader_u8(&r);
            s->feats[f].name = read_name(&r);
            s->feats[f].view = v;
            oom = !r.bad && !s->feats[f].name;
            if (!store_type_ok(s->feats[f].type)) why = "a feature of a type the store does not hold";
        }
    }
    if (!why && !oom && (r.bad || f != s->n_features)) why = "its schema is cut short";
    if (!why && !oom) { /* a lookup answers with one column per feature: their names are unique */
        const char **names = mr_malloc((s->n_features ? s->n_features : 1) * sizeof(*names));
        oom = !names;
        for (size_t i = 0; names && i < s->n_features; i++) names[i] = s->feats[i].name;
        if (names) qsort(names, s->n_features, sizeof(*names), cmp_names);
        for (size_t i = 1; names && i < s->n_features && !why; i++)
            if (!strcmp(names[i - 1], names[i])) why = "two features of one name";
        mr_free(names);
    }
    if (oom || why) return oom ? MR_ERR(err, MR_E_NOMEM, "out of memory") : corrupt(err, path, why);
    return MR_OK;
}

uint64_t mr_online_n_entities(const mr_online *s) { return s->n_entities; }
size_t mr_online_n_keys(const mr_online *s) { return s->n_keys; }
const char *mr_online_key_name(const mr_online *s, size_t i) { return i < s->n_keys ? s->key_names[i] : NULL; }
mr_dtype mr_online_key_type(const mr_online *s, size_t i) { return i < s->n_keys ? s->key_types[i] : MR_T_NULL; }
size_t mr_online_n_views(const mr_online *s) { return s->n_views; }
const char *mr_online_view_name(const mr_online *s, size_t v) { return v < s->n_views ? s->views[v].name : NULL; }
int64_t mr_online_view_ttl(const mr_online *s, size_t v) { return v < s->n_views ? s->views[v].ttl_us : 0; }
size_t mr_online_n_features(const mr_online *s) { return s->n_features; }
const char *mr_online_feature_name(const mr_online *s, size_t f) { return f < s->n_features ? s->feats[f].name : NULL; }
mr_dtype mr_online_feature_type(const mr_online *s, size_t f)
{
    return f < s->n_features ? s->feats[f].type : MR_T_NULL;
}
size_t mr_online_feature_view(const mr_online *s, size_t f) { return f < s->n_features ? s->feats[f].view : 0; }

/* Steps r over one value of type t (r->bad on a short record). */
static void skip_value(mr_reader *r, mr_dtype t);

size_t mr__online_record_len(const mr_online *s, const uint8_t *rec, size_t len)
{
    mr_reader r;
    mr_reader_init(&r, rec, len);
    uint32_t kl = mr_reader_u32(&r);
    (void)mr_reader_bytes(&r, kl);
    (void)mr_reader_bytes(&r, (size_t)s->n_views * 8);
    for (uint32_t f = 0; f < s->n_features && !r.bad; f++)
        if (mr_reader_u8(&r)) skip_value(&r, s->feats[f].type);
    return r.bad ? 0 : r.pos;
}

char *mr_online_locate(const char *arg)
{
    if (!strncmp(arg, "redis://", 8) || !mr_fs_is_dir(arg)) return mr_strdup(arg);
    char *file = mr_path_join(arg, "online.mrfs"), *loc = file ? mr_path_join(arg, "online.redis") : NULL;
    if (file && loc && !mr_fs_exists(file) && mr_fs_exists(loc)) {
        char *text = NULL;
        size_t n = 0;
        if (mr_fs_read_file(loc, 4096, &text, &n, NULL) == MR_OK) {
            text[strcspn(text, "\r\n")] = '\0';
            mr_free(file);
            file = text;
        }
    }
    mr_free(loc);
    return file;
}

/* One value of type t read from r into v (r->bad on a short record). */
static void read_value(mr_reader *r, mr_dtype t, mr_online_value *v)
{
    switch (t) {
    case MR_T_BOOL: v->i = mr_reader_u8(r) != 0; break;
    case MR_T_FLOAT64: v->f = mr_reader_f64(r); break;
    case MR_T_FLOAT32: {
        uint32_t u = mr_reader_u32(r);
        float x;
        memcpy(&x, &u, 4);
        v->f = x;
        break;
    }
    case MR_T_DATE: v->i = (int32_t)mr_reader_u32(r); break;
    case MR_T_STRING: {
        uint32_t l = mr_reader_u32(r);
        const char *p = mr_reader_bytes(r, l);
        v->str = p ? p : "";
        v->len = p ? l : 0;
        break;
    }
    default: v->i = (int64_t)mr_reader_u64(r); break;
    }
}

/* Steps r over one value of type t (r->bad on a short record). */
static void skip_value(mr_reader *r, mr_dtype t)
{
    switch (t) {
    case MR_T_BOOL: (void)mr_reader_u8(r); break;
    case MR_T_FLOAT32:
    case MR_T_DATE: (void)mr_reader_u32(r); break;
    case MR_T_STRING: (void)mr_reader_bytes(r, mr_reader_u32(r)); break;
    default: (void)mr_reader_u64(r); break;
    }
}

mr_status mr__online_encode_key(const mr_online *s, const char *const *key_text, const size_t *key_len, mr_buf *key,
                                mr_error *err)
{
    key->len = 0;
    mr_status rc = MR_OK;
    for (uint32_t k = 0; rc == MR_OK && k < s->n_keys; k++) {
        const char *kt = key_text[k];
        size_t l = kt ? (key_len ? key_len[k] : strlen(kt)) : 0;
        rc = kt ? put_key_text(key, s->key_types[k], kt, l) : MR_E_PARSE;
        if (rc == MR_E_PARSE) {
            rc = MR_ERR(err, MR_E_PARSE, "key '%s': expected %s, got \"%.*s\"", s->key_names[k],
                        mr_dtype_name(s->key_types[k]), (int)(l > 64 ? 64 : l), kt ? kt : "");
            mr_error_key(err, s->key_names[k]);
        } else if (rc != MR_OK) {
            rc = MR_ERR(err, rc, "out of memory");
        }
    }
    return rc;
}

void mr__online_clear(const mr_online *s, mr_online_value *vals)
{
    for (uint32_t f = 0; f < s->n_features; f++) {
        memset(&vals[f], 0, sizeof(vals[f]));
        vals[f].type = s->feats[f].type;
        vals[f].event_us = NO_TIME;
    }
}

mr_status mr__online_decode(const mr_online *s, const uint8_t *rec, size_t len, int64_t now_us, mr_online_value *vals,
                            mr_error *err)
{
    mr_reader r;
    mr_reader_init(&r, rec, len);
    uint32_t kl = mr_reader_u32(&r);
    (void)mr_reader_bytes(&r, kl);
    const uint8_t *times = mr_reader_bytes(&r, (size_t)s->n_views * 8); /* the views' event times */
    for (uint32_t f = 0; times && f < s->n_features; f++) {
        int present = mr_reader_u8(&r);
        const view_info *v = &s->views[s->feats[f].view];
        int64_t et;
        memcpy(&et, times + s->feats[f].view * 8, 8);
        /* et <= now: the difference is exact as unsigned, whatever the two are */
        int live = present && et != NO_TIME && et <= now_us &&
                   (v->ttl_us == 0 || (uint64_t)now_us - (uint64_t)et <= (uint64_t)v->ttl_us);
        if (live) read_value(&r, s->feats[f].type, &vals[f]);
        else if (present) skip_value(&r, s->feats[f].type); /* expired: step over the value */
        vals[f].live = live;
        vals[f].event_us = et;
    }
    if (!times || r.bad) return corrupt(err, "the store", "a record is cut short");
    return MR_OK;
}

/* The record of the encoded key in the mapped table (0: none). */
static mr_status probe(const mr_online *s, const mr_buf *key, uint64_t *at, mr_error *err)
{
    *at = 0;
    for (uint64_t i = 0, sl = slot_of(key->data, key->len, s->n_slots); i < s->n_slots; i++, sl = (sl + 1) & (s->n_slots - 1)) {
        uint64_t off;
        memcpy(&off, s->map + s->slots_off + sl * 8, 8); /* little-endian hosts: the layout's order */
        if (off == 0) break;
        if (off < s->records_off || off >= s->len) return corrupt(err, "the store", "a slot points outside the records");
        mr_reader r;
        mr_reader_init(&r, s->map + off, s->len - off);
        uint32_t kl = mr_reader_u32(&r);
        const void *kb = mr_reader_bytes(&r, kl);
        if (!kb) return corrupt(err, "the store", "a record is cut short");
        if (kl == key->len && !memcmp(kb, key->data, kl)) {
            *at = off;
            break;
        }
    }
    return MR_OK;
}

void mr_online_hold_free(mr_online_hold *h) { mr__online_redis_hold_free(h); }

mr_status mr_online_check_keys(const mr_online *s, const char *const *key_text, const size_t *key_len, mr_error *err)
{
    mr_buf key;
    mr_buf_init(&key);
    mr_status rc = mr__online_encode_key(s, key_text, key_len, &key, err);
    mr_buf_free(&key);
    return rc;
}

mr_status mr_online_lookup_many(const mr_online *s, size_t n, const char *const *key_text, const size_t *key_len,
                                const int64_t *now_us, mr_online_value *vals, int *found, mr_online_hold **hold,
                                mr_error *err)
{
    if (hold) *hold = NULL;
    for (size_t i = 0; i < n; i++) {
        mr__online_clear(s, vals + i * s->n_features);
        if (found) found[i] = 0;
    }
    if (s->redis) return mr__online_redis_lookup(s, n, key_text, key_len, now_us, vals, found, hold, err);
    mr_buf key;
    mr_buf_init(&key);
    mr_status rc = MR_OK;
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        uint64_t at = 0;
        rc = mr__online_encode_key(s, key_text + i * s->n_keys, key_len ? key_len + i * s->n_keys : NULL, &key, err);
        if (rc == MR_OK) rc = probe(s, &key, &at, err);
        if (rc == MR_OK && at) rc = mr__online_decode(s, s->map + at, s->len - at, now_us[i], vals + i * s->n_features, err);
        if (rc == MR_OK && found) found[i] = at != 0;
    }
    mr_buf_free(&key);
    return rc;
}

mr_status mr_online_get(const mr_online *s, const char *const *key_text, int64_t now_us, mr_table **row_out,
                        int *found, mr_error *err)
{
    *row_out = NULL;
    mr_online_value *vals = mr_calloc(s->n_features ? s->n_features : 1, sizeof(*vals));
    if (!vals) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_table *t = NULL;
    mr_online_hold *hold = NULL;
    mr_status rc = mr_online_lookup_many(s, 1, key_text, NULL, &now_us, vals, found, &hold, err);
    if (rc == MR_OK) rc = mr_table_new(&t, err);
    for (uint32_t f = 0; rc == MR_OK && f < s->n_features; f++) {
        mr_column *c = NULL;
        rc = mr_column_new(s->feats[f].name, s->feats[f].type, 1, &c, err);
        if (rc != MR_OK) break;
        const mr_online_value *v = &vals[f];
        if (!v->live) rc = mr_column_append_null(c);
        else {
            switch (v->type) {
            case MR_T_BOOL: rc = mr_column_append_bool(c, v->i != 0); break;
            case MR_T_FLOAT64: rc = mr_column_append_float64(c, v->f); break;
            case MR_T_FLOAT32: rc = mr_column_append_float32(c, (float)v->f); break;
            case MR_T_DATE: rc = mr_column_append_int32(c, (int32_t)v->i); break;
            case MR_T_STRING: rc = mr_column_append_str(c, v->str, v->len); break;
            default: rc = mr_column_append_int64(c, v->i); break;
            }
        }
        if (rc != MR_OK) {
            mr_column_free(c);
            rc = MR_ERR(err, rc, "out of memory");
            break;
        }
        rc = mr_table_add_column(t, c, err);
    }
    mr_free(vals);
    mr_online_hold_free(hold);
    if (rc != MR_OK) {
        mr_table_free(t);
        if (found) *found = 0;
        return rc;
    }
    t->n_rows = 1;
    *row_out = t;
    return MR_OK;
}
