/* The embedded online feature store: one file holding the latest feature
 * vector of every entity (what mr_pit_latest computes from feature views),
 * found by entity key in one hash probe of a memory-mapped, open-addressing
 * table. The file is written whole to a new file and renamed into place, so
 * a reader sees the old table or the new one, never a mix. The byte layout
 * is docs/formats.md, "Online feature store"; the `materialize_online` op
 * and `millrace features` sit on top (docs/featurestore.md).
 *
 * Example (given const mr_table *clicks):
 *
 *   const char *keys[] = {"user_id"};
 *   const char *feats[] = {"clicks_7d"};
 *   mr_pit_view v = {.name = "clicks", .table = clicks, .keys = keys, .ts = "event_ts",
 *                    .ttl_us = 7 * MR_PIT_DAY_US, .features = feats, .n_features = 1};
 *   mr_online *s = NULL;
 *   mr_table *row = NULL;
 *   const char *key[] = {"42"};
 *   if (mr_online_build("online.mrfs", keys, 1, &v, 1, 0, &err) != MR_OK ||
 *       mr_online_open("online.mrfs", &s, &err) != MR_OK ||
 *       mr_online_get(s, key, (int64_t)(mr_wall_time() * 1e6), &row, NULL, &err) != MR_OK) mr_log_error(&err);
 *   // row: one row, clicks_7d (null when user 42 has none, or it is over 7 days old)
 *   mr_table_free(row);
 *   mr_online_close(s);
 *
 * Reads apply each view's ttl against the caller's clock (now_us): a value
 * whose event time is more than ttl before now reads as null, and so does a
 * value stamped after now (the store keeps only the latest value, so it
 * cannot answer for an earlier moment: it never answers with the future).
 * That is mr_pit_join's rule for a row at now, so a model served from the
 * store sees what the training set would have held at that moment.
 * Keys are given as text and parsed by the key column's type (int64,
 * string, date YYYY-MM-DD, timestamp, bool true/false).
 * Ownership: mr_online_get's table is the caller's; names returned by the
 * accessors are the store's, valid until mr_online_close.
 * Status codes: MR_E_CORRUPT (a file that is not a store, or a damaged one:
 * every offset and length is checked against the file before it is read),
 * MR_E_PARSE (a key that does not parse as its type), MR_E_INVALID_ARG (the
 * wrong number of keys), MR_E_SCHEMA (a feature type the store does not
 * hold: decimal, or a column of only nulls), MR_E_IO, MR_E_NOMEM, and
 * mr_pit_latest's.
 * Thread safety: an open store is read-only: lookups from many threads at
 * once are safe. */
#ifndef MILLRACE_ONLINE_H
#define MILLRACE_ONLINE_H

#include "millrace/core.h"
#include "millrace/pit.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_online mr_online;

/* Computes the latest vector of every entity of views[0, n_views)
 * (mr_pit_latest) and writes it as a store at path, atomically. The
 * store's feature columns are named prefix + feature, each view keeping its
 * ttl. */
mr_status mr_online_build(const char *path, const char *const *keys, size_t n_keys, const mr_pit_view *views,
                          size_t n_views, int threads, mr_error *err);
/* The same table into Redis at location (redis://HOST[:PORT]/NAMESPACE):
 * every record under a new generation (the xxh3-128 of the table's bytes),
 * then one SET makes it current, then the other generations are deleted (a
 * reader's lookup reads the generation and its records in one script call:
 * old table or new). gen_out (may be NULL) gets the generation's 32 hex
 * digits. MR_E_IO when Redis cannot be reached or refuses a command. */
mr_status mr_online_build_redis(const char *location, const char *const *keys, size_t n_keys,
                                const mr_pit_view *views, size_t n_views, int threads, char *gen_out, mr_error *err);

/* path: an .mrfs file, or redis://HOST[:PORT]/NAMESPACE (mr_online_build_redis). */
mr_status mr_online_open(const char *path, mr_online **out, mr_error *err);
/* What arg names as mr_online_open takes it: a materialize_online stage's
 * directory gives its online.mrfs, or the Redis location in its
 * online.redis; anything else is returned as it is. Caller frees; NULL on OOM. */
char *mr_online_locate(const char *arg);
void mr_online_close(mr_online *s); /* NULL is a no-op */

uint64_t mr_online_n_entities(const mr_online *s);
size_t mr_online_n_keys(const mr_online *s);
const char *mr_online_key_name(const mr_online *s, size_t i);
mr_dtype mr_online_key_type(const mr_online *s, size_t i);
size_t mr_online_n_views(const mr_online *s);
const char *mr_online_view_name(const mr_online *s, size_t v);
int64_t mr_online_view_ttl(const mr_online *s, size_t v); /* microseconds; 0: none */
size_t mr_online_n_features(const mr_online *s);           /* over all views */
const char *mr_online_feature_name(const mr_online *s, size_t f);
mr_dtype mr_online_feature_type(const mr_online *s, size_t f);
size_t mr_online_feature_view(const mr_online *s, size_t f); /* the view feature f belongs to */

/* One feature of one entity as a lookup read it. */
typedef struct mr_online_value {
    int live;         /* 1: a value (the others: none, expired, or stamped after now: null) */
    mr_dtype type;    /* the feature's type */
    int64_t i;        /* BOOL (0 or 1), INT64, DATE (days since the epoch), TIMESTAMP (microseconds) */
    double f;         /* FLOAT64, FLOAT32 */
    const char *str;  /* STRING: str[0, len), borrowed from the mapping (valid until mr_online_close), not
                         NUL-terminated */
    size_t len;
    int64_t event_us; /* its view's event time of the entity's latest row (INT64_MIN: none), live or not */
} mr_online_value;

/* What borrowed values of a lookup point into (a Redis store's replies);
 * NULL for the embedded store, whose values point into its mapping. */
typedef struct mr_online_hold mr_online_hold;
void mr_online_hold_free(mr_online_hold *h); /* NULL is a no-op */

/* The features of n entities, entity i's as of now_us[i]: its keys are
 * key_text[i * n_keys, (i + 1) * n_keys) (key_len the same way; NULL:
 * NUL-terminated), its features go to vals[i * n_features, ...) and
 * found[i] (may be NULL) is 1 when it is in the store. The embedded store
 * probes once per entity without allocating beyond the key's encoding; a
 * Redis store answers all n in one round trip. String values borrow the
 * mapping (until mr_online_close) or *hold (until mr_online_hold_free;
 * hold may be NULL for the embedded store only). */
mr_status mr_online_lookup_many(const mr_online *s, size_t n, const char *const *key_text, const size_t *key_len,
                                const int64_t *now_us, mr_online_value *vals, int *found, mr_online_hold **hold,
                                mr_error *err);
/* MR_OK when the keys key_text[0, n_keys) parse as the store's key types;
 * else MR_E_PARSE naming the key (err->key), as a lookup would fail. */
mr_status mr_online_check_keys(const mr_online *s, const char *const *key_text, const size_t *key_len, mr_error *err);

/* The features of the entity with keys key_text[0, n_keys) as of now_us
 * (microseconds since the epoch, UTC), as a new one-row table of every
 * feature (nulls where the entity has no live value). *found (may be NULL):
 * 1 when the entity is in the store at all. */
mr_status mr_online_get(const mr_online *s, const char *const *key_text, int64_t now_us, mr_table **row_out,
                        int *found, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
