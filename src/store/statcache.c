/* In-memory stat cache: open-addressing hash table from path to the stat
 * identity (size, mtime_ns, inode) and content hash seen last time. A hit
 * lets an unchanged input skip hashing; the run store persists it. */
#include "millrace/store.h"

#include <string.h>

struct mr_statcache {
    mr_statcache_entry *slots; /* path == NULL: empty */
    size_t cap;                /* power of two */
    size_t count;
};

static uint64_t path_hash(const char *p)
{
    mr_hash128 h = mr_hash_bytes(p, strlen(p));
    return h.lo;
}

mr_status mr_statcache_new(mr_statcache **out, mr_error *err)
{
    mr_statcache *sc = mr_calloc(1, sizeof(*sc));
    if (!sc) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    sc->cap = 256;
    sc->slots = mr_calloc(sc->cap, sizeof(*sc->slots));
    if (!sc->slots) {
        mr_free(sc);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    *out = sc;
    return MR_OK;
}

void mr_statcache_free(mr_statcache *sc)
{
    if (!sc) return;
    for (size_t i = 0; i < sc->cap; i++) mr_free(sc->slots[i].path);
    mr_free(sc->slots);
    mr_free(sc);
}

static mr_statcache_entry *find_slot(mr_statcache_entry *slots, size_t cap, const char *path)
{
    size_t i = (size_t)path_hash(path) & (cap - 1);
    while (slots[i].path && strcmp(slots[i].path, path) != 0) i = (i + 1) & (cap - 1);
    return &slots[i];
}

static mr_status grow(mr_statcache *sc)
{
    size_t ncap = sc->cap * 2;
    mr_statcache_entry *ns = mr_calloc(ncap, sizeof(*ns));
    if (!ns) return MR_E_NOMEM;
    for (size_t i = 0; i < sc->cap; i++)
        if (sc->slots[i].path) *find_slot(ns, ncap, sc->slots[i].path) = sc->slots[i];
    mr_free(sc->slots);
    sc->slots = ns;
    sc->cap = ncap;
    return MR_OK;
}

int mr_statcache_lookup(const mr_statcache *sc, const char *path, uint64_t size, uint64_t mtime_ns, uint64_t ino,
                        mr_hash128 *hash)
{
    if (!sc) return 0;
    const mr_statcache_entry *e = find_slot(sc->slots, sc->cap, path);
    if (!e->path || e->size != size || e->mtime_ns != mtime_ns || e->ino != ino) return 0;
    *hash = e->hash;
    return 1;
}

mr_status mr_statcache_put(mr_statcache *sc, const char *path, uint64_t size, uint64_t mtime_ns, uint64_t ino,
                           mr_hash128 hash, int dirty)
{
    if (!sc) return MR_OK;
    if ((sc->count + 1) * 4 >= sc->cap * 3 && grow(sc) != MR_OK) return MR_E_NOMEM;
    mr_statcache_entry *e = find_slot(sc->slots, sc->cap, path);
    if (!e->path) {
        e->path = mr_strdup(path);
        if (!e->path) return MR_E_NOMEM;
        sc->count++;
    } else if (e->size == size && e->mtime_ns == mtime_ns && e->ino == ino && mr_hash_eq(e->hash, hash)) {
        return MR_OK;
    }
    e->size = size;
    e->mtime_ns = mtime_ns;
    e->ino = ino;
    e->hash = hash;
    e->dirty = e->dirty || dirty;
    return MR_OK;
}

void mr_statcache_foreach(const mr_statcache *sc, int dirty_only, void (*fn)(void *ctx, const mr_statcache_entry *e),
                          void *ctx)
{
    if (!sc) return;
    for (size_t i = 0; i < sc->cap; i++)
        if (sc->slots[i].path && (!dirty_only || sc->slots[i].dirty)) fn(ctx, &sc->slots[i]);
}

size_t mr_statcache_count(const mr_statcache *sc) { return sc ? sc->count : 0; }
