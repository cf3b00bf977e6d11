/* Internals of the online store shared by its two backends: the format
 * (online.c: the image, its schema, records) and Redis (online_redis.c),
 * which keeps the same schema and the same record bytes under keys of its
 * own (docs/formats.md, "Online feature store"). Internal to src/data. */
#ifndef MILLRACE_ONLINE_INT_H
#define MILLRACE_ONLINE_INT_H

#include "millrace/online.h"

#define MAGIC "MRFSTORE"
#define VERSION 1u
#define HEADER_LEN 64u
#define NO_TIME INT64_MIN

typedef struct feat {
    char *name;
    mr_dtype type;
    size_t view;
} feat;

typedef struct view_info {
    char *name;
    int64_t ttl_us;
    size_t n_features;
} view_info;

typedef struct mr__online_redis mr__online_redis;

struct mr_online {
    const uint8_t *map; /* the image: mapped (the embedded store), or owned bytes (owned) */
    size_t len;
    int owned;
    uint32_t n_keys, n_views, n_features;
    uint64_t n_entities, n_slots, slots_off, records_off;
    char **key_names;
    mr_dtype *key_types;
    view_info *views;
    feat *feats;
    mr__online_redis *redis; /* non-NULL: a Redis store, whose image holds the schema and no records */
};

/* The store's image of the latest vectors of views: header, schema, slots, records. */
mr_status mr__online_build_image(const char *const *keys, size_t n_keys, const mr_pit_view *views, size_t n_views,
                                 int threads, mr_buf *image, mr_error *err);
/* Reads and checks s->map[0, s->len) into s's schema fields (name: for messages). */
mr_status mr__online_parse(mr_online *s, const char *name, mr_error *err);
/* Frees what mr__online_parse allocated (not s, not its image). */
void mr__online_schema_free(mr_online *s);
/* The keys' encoding as records hold it (key is reset first). MR_E_PARSE naming the key. */
mr_status mr__online_encode_key(const mr_online *s, const char *const *key_text, const size_t *key_len, mr_buf *key,
                                mr_error *err);
/* vals[0, n_features): null, each of its feature's type. */
void mr__online_clear(const mr_online *s, mr_online_value *vals);
/* One record rec[0, len) (u32 key length, key, the views' event times, the
 * features) into vals, as of now_us. MR_E_CORRUPT when it is cut short. */
mr_status mr__online_decode(const mr_online *s, const uint8_t *rec, size_t len, int64_t now_us, mr_online_value *vals,
                            mr_error *err);
/* The length of the record at rec[0, len), 0 when it is cut short. */
size_t mr__online_record_len(const mr_online *s, const uint8_t *rec, size_t len);

/* ---- Redis (online_redis.c) ---- */
mr_status mr__online_redis_open(const char *location, mr_online **out, mr_error *err);
void mr__online_redis_close(mr__online_redis *r); /* NULL is a no-op */
mr_status mr__online_redis_lookup(const mr_online *s, size_t n, const char *const *key_text, const size_t *key_len,
                                  const int64_t *now_us, mr_online_value *vals, int *found, mr_online_hold **hold,
                                  mr_error *err);
void mr__online_redis_hold_free(mr_online_hold *h);

#endif
