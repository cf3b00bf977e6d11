/* Shared helpers for src/ml split and features: seeded hashing, canonical
 * cell keys, numeric cell access and the byte-string keymap (ml_int.h). */
#include "ml/ml_int.h"

#include <math.h>
#include <xxhash.h>

#include "millrace/value.h"

uint64_t mr__ml_hash64(const void *p, size_t n, uint64_t seed)
{
    return (uint64_t)XXH3_64bits_withSeed(p, n, (XXH64_hash_t)seed);
}

uint64_t mr__ml_row_hash(uint64_t seed, uint64_t i)
{
    unsigned char b[8];
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)(i >> (8 * k));
    return mr__ml_hash64(b, 8, seed);
}

size_t mr__ml_i64_text(int64_t v, char *buf)
{
    char tmp[MR__ML_KEYBUF];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    size_t len = 0;
    if (v < 0) buf[len++] = '-';
    while (n) buf[len++] = tmp[--n];
    buf[len] = '\0';
    return len;
}

int mr__ml_cell_key(const mr_column *c, size_t i, char *buf, const char **p_out, size_t *len_out)
{
    if (mr_column_is_null(c, i)) return 0;
    switch (c->type) {
    case MR_T_STRING:
        *p_out = mr_column_str(c, i, len_out);
        return 1;
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
        *len_out = mr__ml_i64_text(((const int64_t *)c->data)[i], buf);
        *p_out = buf;
        return 1;
    case MR_T_DATE:
        *len_out = mr__ml_i64_text(((const int32_t *)c->data)[i], buf);
        *p_out = buf;
        return 1;
    case MR_T_BOOL:
        *p_out = ((const uint8_t *)c->data)[i] ? "true" : "false";
        *len_out = strlen(*p_out);
        return 1;
    default:
        return -1;
    }
}

int mr__ml_is_numeric(mr_dtype t)
{
    return t == MR_T_BOOL || t == MR_T_INT64 || t == MR_T_FLOAT64 || t == MR_T_FLOAT32 || t == MR_T_DECIMAL;
}

double mr__ml_cell_num(const mr_column *c, size_t i)
{
    if (mr_column_is_null(c, i)) return NAN;
    switch (c->type) {
    case MR_T_BOOL: return ((const uint8_t *)c->data)[i] ? 1.0 : 0.0;
    case MR_T_INT64:
    case MR_T_TIMESTAMP: return (double)((const int64_t *)c->data)[i];
    case MR_T_DATE: return (double)((const int32_t *)c->data)[i];
    case MR_T_FLOAT64: return ((const double *)c->data)[i];
    case MR_T_FLOAT32: return (double)((const float *)c->data)[i];
    case MR_T_DECIMAL: return mr_decimal_to_f64(((const int64_t *)c->data)[i], c->kind.scale);
    default: return NAN;
    }
}

mr_status mr__ml_err_no_column(mr_error *err, const mr_table *t, const char *what, const char *col)
{
    mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "%s '%s' is not in the table", what, col);
    if (!err || !t || t->n_cols == 0) return rc;
    const char **names = mr_calloc(t->n_cols, sizeof(*names));
    if (!names) return rc;
    for (size_t j = 0; j < t->n_cols; j++) names[j] = t->cols[j]->name;
    const char *best = mr_closest(col, names, t->n_cols);
    if (best) mr_error_hint(err, "did you mean '%s'?", best);
    mr_free(names);
    mr_error_key(err, col);
    return rc;
}

/* ---- keymap ---------------------------------------------------------------
 * Open addressing with linear probing over a power-of-two slot array kept at
 * most half full; ids are dense and in insertion order, so iteration order
 * depends only on the input order, never on hash values. */

void mr__keymap_init(mr__keymap *m)
{
    memset(m, 0, sizeof(*m));
}

void mr__keymap_free(mr__keymap *m)
{
    if (!m) return;
    mr_free(m->slots);
    mr_free(m->hashes);
    mr_free(m->key_off);
    mr_free(m->key_len);
    mr_free(m->counts);
    mr_free(m->arena);
    memset(m, 0, sizeof(*m));
}

static mr_status grow_slots(mr__keymap *m)
{
    size_t ns = m->n_slots ? m->n_slots * 2 : 64;
    if (ns > SIZE_MAX / sizeof(uint32_t) / 2) return MR_E_LIMIT;
    uint32_t *slots = mr_calloc(ns, sizeof(uint32_t));
    if (!slots) return MR_E_NOMEM;
    for (size_t id = 0; id < m->n; id++) {
        size_t s = (size_t)m->hashes[id] & (ns - 1);
        while (slots[s]) s = (s + 1) & (ns - 1);
        slots[s] = (uint32_t)id + 1;
    }
    mr_free(m->slots);
    m->slots = slots;
    m->n_slots = ns;
    return MR_OK;
}

static mr_status grow_ids(mr__keymap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 64;
    if (nc > UINT32_MAX - 1) return MR_E_LIMIT;
    void *p;
    p = mr_realloc(m->hashes, nc * sizeof(uint64_t));
    if (!p) return MR_E_NOMEM;
    m->hashes = p;
    p = mr_realloc(m->key_off, nc * sizeof(size_t));
    if (!p) return MR_E_NOMEM;
    m->key_off = p;
    p = mr_realloc(m->key_len, nc * sizeof(size_t));
    if (!p) return MR_E_NOMEM;
    m->key_len = p;
    p = mr_realloc(m->counts, nc * sizeof(uint64_t));
    if (!p) return MR_E_NOMEM;
    m->counts = p;
    m->cap = nc;
    return MR_OK;
}

int64_t mr__keymap_find(const mr__keymap *m, const char *key, size_t len)
{
    if (!m->n_slots) return -1;
    uint64_t h = mr__ml_hash64(key, len, 0);
    size_t s = (size_t)h & (m->n_slots - 1);
    while (m->slots[s]) {
        size_t id = m->slots[s] - 1;
        if (m->hashes[id] == h && m->key_len[id] == len && (len == 0 || memcmp(m->arena + m->key_off[id], key, len) == 0))
            return (int64_t)id;
        s = (s + 1) & (m->n_slots - 1);
    }
    return -1;
}

mr_status mr__keymap_add(mr__keymap *m, const char *key, size_t len, uint64_t add, uint32_t *id_out)
{
    int64_t found = mr__keymap_find(m, key, len);
    if (found >= 0) {
        m->counts[found] += add;
        if (id_out) *id_out = (uint32_t)found;
        return MR_OK;
    }
    mr_status rc;
    if ((m->n + 1) * 2 > m->n_slots && (rc = grow_slots(m)) != MR_OK) return rc;
    if (m->n == m->cap && (rc = grow_ids(m)) != MR_OK) return rc;
    if (len > SIZE_MAX - m->arena_len - 1) return MR_E_LIMIT;
    if (m->arena_len + len > m->arena_cap) {
        size_t nc = m->arena_cap ? m->arena_cap : 1024;
        while (nc < m->arena_len + len) {
            if (nc > SIZE_MAX / 2) return MR_E_LIMIT;
            nc *= 2;
        }
        char *a = mr_realloc(m->arena, nc);
        if (!a) return MR_E_NOMEM;
        m->arena = a;
        m->arena_cap = nc;
    }
    size_t id = m->n;
    uint64_t h = mr__ml_hash64(key, len, 0);
    if (len) memcpy(m->arena + m->arena_len, key, len);
    m->key_off[id] = m->arena_len;
    m->key_len[id] = len;
    m->hashes[id] = h;
    m->counts[id] = add;
    m->arena_len += len;
    m->n++;
    size_t s = (size_t)h & (m->n_slots - 1);
    while (m->slots[s]) s = (s + 1) & (m->n_slots - 1);
    m->slots[s] = (uint32_t)id + 1;
    if (id_out) *id_out = (uint32_t)id;
    return MR_OK;
}
