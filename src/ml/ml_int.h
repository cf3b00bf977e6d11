/* Helpers shared by the split and feature-transform code in src/ml: seeded
 * 64-bit hashing (xxh3-64), the hash -> [0,1) mapping, the canonical key of a
 * cell (what "the same value" means for groups and categories), and a small
 * byte-string -> dense-id map with counts. Not part of the public API. */
#ifndef MILLRACE_ML_INT_H
#define MILLRACE_ML_INT_H

#include <string.h>

#include "millrace/table.h"

/* xxh3-64 of p[0..n) with the given seed (libxxhash XXH3_64bits_withSeed). */
uint64_t mr__ml_hash64(const void *p, size_t n, uint64_t seed);

/* hash(seed, i): xxh3-64 of i as 8 little-endian bytes, seeded. */
uint64_t mr__ml_row_hash(uint64_t seed, uint64_t i);

/* Maps a hash to [0, 1): the top 53 bits times 2^-53 (exact in a double). */
static inline double mr__ml_u01(uint64_t h)
{
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* Buffer large enough for any non-string key text (int64 decimal, "true"). */
#define MR__ML_KEYBUF 24

/* Canonical key bytes of row i of c: STRING -> its bytes (plain or
 * dictionary alike), INT64 -> decimal text, BOOL -> "true"/"false", DATE ->
 * days since 1970-01-01 in decimal, TIMESTAMP -> microseconds in decimal. Returns 0 for a null (nothing written), 1 otherwise; for FLOAT
 * columns returns -1 (no canonical key). buf must hold MR__ML_KEYBUF bytes;
 * *p_out may point into buf or into the column. */
int mr__ml_cell_key(const mr_column *c, size_t i, char *buf, const char **p_out, size_t *len_out);

/* Decimal text of v into buf (MR__ML_KEYBUF bytes); returns the length. */
size_t mr__ml_i64_text(int64_t v, char *buf);

/* Byte-string -> dense id map (ids in first-insertion order) with a count
 * per id. Keys are copied into one growing arena. */
typedef struct mr__keymap {
    uint32_t *slots;   /* open addressing: id + 1, 0 = empty */
    size_t n_slots;    /* power of two */
    uint64_t *hashes;  /* per id */
    size_t *key_off;   /* per id: offset into arena */
    size_t *key_len;   /* per id */
    uint64_t *counts;  /* per id */
    size_t n, cap;     /* ids used / allocated */
    char *arena;
    size_t arena_len, arena_cap;
} mr__keymap;

void mr__keymap_init(mr__keymap *m);
void mr__keymap_free(mr__keymap *m);
/* Finds or inserts key; *id_out gets its id; the count grows by add. */
mr_status mr__keymap_add(mr__keymap *m, const char *key, size_t len, uint64_t add, uint32_t *id_out);
/* Id of key or -1. */
int64_t mr__keymap_find(const mr__keymap *m, const char *key, size_t len);
static inline const char *mr__keymap_key(const mr__keymap *m, size_t id, size_t *len_out)
{
    *len_out = m->key_len[id];
    return m->arena + m->key_off[id];
}

/* Bytewise order of two byte strings (shorter prefix first). */
static inline int mr__ml_bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

/* Numeric value of row i of a BOOL/INT64/FLOAT64/FLOAT32/DATE/TIMESTAMP
 * column as a double; NaN for nulls. */
double mr__ml_cell_num(const mr_column *c, size_t i);
int mr__ml_is_numeric(mr_dtype t); /* BOOL, INT64, FLOAT64, FLOAT32 */

/* Sets an "unknown column" error naming col, with a did-you-mean hint over
 * the table's columns. what: e.g. "split: label column". */
mr_status mr__ml_err_no_column(mr_error *err, const mr_table *t, const char *what, const char *col);

#endif
