/* A hash index from names to small integer ids (a column's position in a
 * table, a field's in a CSV header). The index stores ids only; the names
 * stay where their owner keeps them and are fetched through a callback, so
 * a table can replace a column object without touching its index.
 *
 * Layout: open addressing with linear probing over a power-of-two array of
 * 64-bit slots, each 0 (empty) or tag << 32 | (id + 1), where tag is the top
 * 32 bits of the name's xxh3 hash. A slot's home is tag & mask, so growing
 * never rehashes a name, and a probe compares names (one callback and one
 * strcmp) only when the 32-bit tags agree: a find costs O(1) name
 * comparisons expected at the load factor kept here (at most 1/2). Removal
 * shifts later members of the probe run back (Knuth's algorithm R), so
 * there are no tombstones and finds never degrade. */
#include "millrace/core.h"

#include <string.h>

#define MIN_SLOTS 16
#define MAX_IDS ((size_t)UINT32_MAX - 1) /* id + 1 fits the low 32 bits */

static uint32_t tag_of(const char *key) { return (uint32_t)(mr_hash_bytes(key, strlen(key)).hi >> 32); }

void mr_strindex_init(mr_strindex *ix) { memset(ix, 0, sizeof(*ix)); }

void mr_strindex_deinit(mr_strindex *ix)
{
    if (!ix) return;
    mr_free(ix->slots);
    memset(ix, 0, sizeof(*ix));
}

/* Places a slot value into slots (no duplicate check; room guaranteed). */
static void place(uint64_t *slots, size_t mask, uint64_t v)
{
    size_t i = (size_t)(v >> 32) & mask;
    while (slots[i]) i = (i + 1) & mask;
    slots[i] = v;
}

mr_status mr_strindex_reserve(mr_strindex *ix, size_t n)
{
    if (n > MAX_IDS) return MR_E_LIMIT;
    size_t want = MIN_SLOTS;
    while (want / 2 < n) want *= 2; /* load factor <= 1/2 */
    if (want <= ix->n_slots) return MR_OK;
    uint64_t *ns = mr_calloc(want, sizeof(uint64_t));
    if (!ns) return MR_E_NOMEM;
    for (size_t i = 0; i < ix->n_slots; i++)
        if (ix->slots[i]) place(ns, want - 1, ix->slots[i]);
    mr_free(ix->slots);
    ix->slots = ns;
    ix->n_slots = want;
    return MR_OK;
}

/* The slot holding key, or the empty slot that ends its probe run. */
static size_t probe(const mr_strindex *ix, const char *key, uint32_t tag, mr_strindex_key_fn key_of,
                    const void *ctx)
{
    size_t mask = ix->n_slots - 1, i = tag & mask;
    for (;;) {
        uint64_t v = ix->slots[i];
        if (!v) return i;
        if ((uint32_t)(v >> 32) == tag && !strcmp(key_of(ctx, (size_t)(uint32_t)v - 1), key)) return i;
        i = (i + 1) & mask;
    }
}

ssize_t mr_strindex_find(const mr_strindex *ix, const char *key, mr_strindex_key_fn key_of, const void *ctx)
{
    if (!ix->n_slots) return -1;
    uint64_t v = ix->slots[probe(ix, key, tag_of(key), key_of, ctx)];
    return v ? (ssize_t)((uint32_t)v - 1) : -1;
}

mr_status mr_strindex_add(mr_strindex *ix, size_t id, mr_strindex_key_fn key_of, const void *ctx,
                          size_t *existing_out)
{
    if (existing_out) *existing_out = SIZE_MAX;
    if (id >= MAX_IDS) return MR_E_LIMIT;
    mr_status rc = mr_strindex_reserve(ix, ix->n + 1);
    if (rc != MR_OK) return rc;
    const char *key = key_of(ctx, id);
    uint32_t tag = tag_of(key);
    size_t i = probe(ix, key, tag, key_of, ctx);
    if (ix->slots[i]) {
        if (existing_out) *existing_out = (size_t)(uint32_t)ix->slots[i] - 1;
        return MR_OK;
    }
    ix->slots[i] = (uint64_t)tag << 32 | (uint64_t)(id + 1);
    ix->n++;
    return MR_OK;
}

/* Empties slot i and moves later members of its run back where a probe
 * still finds them (nothing may sit between its home and its slot). */
static void delete_at(mr_strindex *ix, size_t i)
{
    size_t mask = ix->n_slots - 1, j = i;
    ix->slots[i] = 0;
    for (;;) {
        j = (j + 1) & mask;
        uint64_t v = ix->slots[j];
        if (!v) break;
        size_t home = (size_t)(v >> 32) & mask;
        /* v may stay at j when its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        ix->slots[i] = v;
        ix->slots[j] = 0;
        i = j;
    }
    ix->n--;
}

int mr_strindex_remove(mr_strindex *ix, size_t id, mr_strindex_key_fn key_of, const void *ctx)
{
    if (!ix->n_slots) return 0;
    const char *key = key_of(ctx, id);
    size_t mask = ix->n_slots - 1, i = tag_of(key) & mask;
    for (;;) {
        uint64_t v = ix->slots[i];
        if (!v) return 0;
        if ((uint32_t)v - 1 == id) {
            delete_at(ix, i);
            return 1;
        }
        i = (i + 1) & mask;
    }
}

void mr_strindex_clear(mr_strindex *ix)
{
    if (ix->slots) memset(ix->slots, 0, ix->n_slots * sizeof(uint64_t));
    ix->n = 0;
}
