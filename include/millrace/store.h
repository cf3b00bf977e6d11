/* The content-addressed artifact store (.millrace/objects/).
 *
 * An artifact is a file or a directory. A file's id is the xxh3-128 of its
 * bytes ("<32 hex>"); a directory's id is the hash of its manifest
 * ("<32 hex>.dir"), a text object listing every file under it:
 *
 *     <32 hex hash> <octal mode> <size> <relative path>\n   (sorted by path)
 *
 * Objects live at objects/<first 2 hex>/<remaining 30 hex>[.dir], read-only.
 * Publishing is atomic: each blob is fsynced and linked (or copied to a
 * temporary name and renamed) into place, and a directory's manifest is
 * written last, so a killed process leaves either a complete artifact or
 * nothing that any artifact id refers to.
 *
 *   mr_store *st;
 *   mr_store_open(".millrace", &st, &err);
 *   mr_artifact a;
 *   mr_store_publish(st, sc, "data/clean.csv", &a, &err);   // now read-only, in the store
 *   mr_store_checkout(st, &a, "elsewhere.csv", &err);        // hard link (or copy)
 *   mr_store_close(st);
 */
#ifndef MILLRACE_STORE_H
#define MILLRACE_STORE_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_artifact {
    mr_hash128 hash;
    int is_dir;          /* 1 for a directory manifest */
    uint64_t size;       /* bytes (a directory: sum of its files) */
    uint64_t n_files;    /* 1 for a file */
} mr_artifact;

#define MR_ARTIFACT_ID_LEN 37 /* 32 hex + ".dir" + NUL */
void mr_artifact_id(const mr_artifact *a, char *id);         /* "hex" or "hex.dir" */
mr_status mr_artifact_parse(const char *id, mr_artifact *out); /* size/n_files left 0 */

/* ---- stat cache: (path, size, mtime_ns, inode) -> content hash ----------
 * In memory; the run store loads and saves it (mr_runstore_statcache_*). */
typedef struct mr_statcache mr_statcache;
typedef struct mr_statcache_entry {
    char *path;
    uint64_t size, mtime_ns, ino;
    mr_hash128 hash;
    int dirty; /* changed since load */
} mr_statcache_entry;
mr_status mr_statcache_new(mr_statcache **out, mr_error *err);
void mr_statcache_free(mr_statcache *sc);
/* Returns 1 and fills *hash when the entry matches size, mtime and inode. */
int mr_statcache_lookup(const mr_statcache *sc, const char *path, uint64_t size, uint64_t mtime_ns,
                        uint64_t ino, mr_hash128 *hash);
mr_status mr_statcache_put(mr_statcache *sc, const char *path, uint64_t size, uint64_t mtime_ns,
                           uint64_t ino, mr_hash128 hash, int dirty);
/* Iterates entries (dirty_only: only those changed since load). */
void mr_statcache_foreach(const mr_statcache *sc, int dirty_only,
                          void (*fn)(void *ctx, const mr_statcache_entry *e), void *ctx);
size_t mr_statcache_count(const mr_statcache *sc);

/* ---- store ------------------------------------------------------------- */
typedef struct mr_store mr_store;
/* root: the .millrace directory; objects/ and tmp/ are created inside. */
mr_status mr_store_open(const char *root, mr_store **out, mr_error *err);
void mr_store_close(mr_store *st);
const char *mr_store_root(const mr_store *st);
/* Path of an object (caller frees). */
char *mr_store_object_path(const mr_store *st, const mr_artifact *a);
int mr_store_has(const mr_store *st, const mr_artifact *a);

/* Hashes files/directories by content without storing them. Uses and fills
 * sc (may be NULL) and hashes cache misses in parallel on the core pool.
 * out[i] gets the artifact id that publishing paths[i] would produce.
 * bytes_hashed_out (may be NULL) gets the bytes actually read. */
mr_status mr_store_hash_paths(mr_store *st, mr_statcache *sc, const char *const *paths, size_t n,
                              mr_artifact *out, uint64_t *bytes_hashed_out, mr_error *err);

/* Publishes a workspace file or directory: its content moves into the store
 * and the path is left as a read-only hard link to the stored object (a
 * copy when the store is on another filesystem). The path's stat identity
 * is recorded in sc (may be NULL) so re-hashing it later is free. */
mr_status mr_store_publish(mr_store *st, mr_statcache *sc, const char *path, mr_artifact *out,
                           mr_error *err);
/* Materialises an artifact at dest (which must not exist): read-only hard
 * links to the objects, or copies across filesystems. */
mr_status mr_store_checkout(mr_store *st, mr_statcache *sc, const mr_artifact *a, const char *dest,
                            mr_error *err);
/* Re-hashes one artifact's objects (a directory: its manifest and every
 * file): MR_E_CORRUPT if any content no longer matches its id (someone wrote
 * through a hard link), MR_E_NOT_FOUND if an object is missing. With
 * remove_bad, the corrupt objects are deleted so the next publish stores
 * good copies instead of deduplicating against them. */
mr_status mr_store_check(mr_store *st, const mr_artifact *a, int remove_bad, mr_error *err);
/* Lists the blob ids a directory artifact refers to (for gc/verify).
 * Caller frees with mr_free. */
mr_status mr_store_dir_children(mr_store *st, const mr_artifact *a, mr_artifact **children_out,
                                size_t *n_out, mr_error *err);

/* Verify: re-hashes every object; calls fn for each problem found
 * ("corrupt", "missing" child of a manifest, "stray" temp file). */
typedef struct mr_verify_stats {
    uint64_t n_objects, n_bytes, n_corrupt, n_missing;
} mr_verify_stats;
mr_status mr_store_verify(mr_store *st, void (*fn)(void *ctx, const char *id, const char *problem),
                          void *ctx, mr_verify_stats *stats, mr_error *err);

/* gc: deletes every object whose id is not in keep (directories keep their
 * children). In two steps, so that a caller can drop its references to the
 * doomed objects (stage-cache entries) before they go: plan lists them
 * (directory manifests first), apply deletes them in that order, fsyncing
 * the object directories after the manifests, so a gc killed at any point
 * leaves a smaller, valid store: no manifest ever lists a missing file.
 * mr_store_gc does both (dry_run: plans and counts only). */
typedef struct mr_gc_stats {
    uint64_t n_kept, n_deleted, bytes_deleted;
} mr_gc_stats;
typedef struct mr_gc_plan {
    mr_artifact *doomed; /* manifests first, then files (owned) */
    size_t n_doomed;
    mr_gc_stats stats;
} mr_gc_plan;
mr_status mr_store_gc_plan(mr_store *st, const mr_artifact *keep, size_t n_keep, mr_gc_plan *out, mr_error *err);
mr_status mr_store_gc_apply(mr_store *st, const mr_gc_plan *plan, mr_error *err);
void mr_store_gc_plan_free(mr_gc_plan *p);
mr_status mr_store_gc(mr_store *st, const mr_artifact *keep, size_t n_keep, int dry_run,
                      mr_gc_stats *stats, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
