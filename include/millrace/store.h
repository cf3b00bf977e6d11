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
 * Example (given mr_statcache *sc):
 *
 *   mr_store *st;
 *   if (mr_store_open(".millrace", &st, &err) != MR_OK) { mr_log_error(&err); return; }
 *   mr_artifact a;
 *   if (mr_store_publish(st, sc, "data/clean.csv", &a, &err) == MR_OK) {   // now read-only, in the store
 *       char id[MR_ARTIFACT_ID_LEN];
 *       mr_artifact_id(&a, id);                                          // "3f2a...9c1"
 *       mr_store_checkout(st, sc, &a, "elsewhere.csv", &err);            // hard link (or copy)
 *   }
 *   mr_store_close(st);
 *
 * Ownership: mr_store_open's store is the caller's (mr_store_close);
 * mr_statcache_new's cache likewise (mr_statcache_free). Paths and arrays
 * returned are the caller's (mr_free). A stat cache passed in (sc, NULL =
 * none) is read and updated during the call only.
 * Status codes: MR_E_IO (a filesystem call failed; the message names the
 * path), MR_E_NOT_FOUND (a path to hash or publish, or an object, is
 * missing; the hint says what to run), MR_E_CORRUPT (an object's content no
 * longer matches its id, or a malformed manifest), MR_E_INVALID_ARG (a path
 * that is neither a file nor a directory), MR_E_PARSE (a malformed artifact
 * id), MR_E_NOMEM.
 * Thread safety: an mr_store holds only paths, so several threads and
 * processes may publish and check out through one store (publishing is
 * idempotent: the same content lands in the same object). An mr_statcache
 * is not thread-safe: one thread uses it at a time. mr_store_hash_paths runs
 * on the core pool (do not call it from inside an mr_parallel_for job). */
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
void mr_artifact_id(const mr_artifact *a, char *id);         /* "hex" or "hex.dir" into id[MR_ARTIFACT_ID_LEN] */
mr_status mr_artifact_parse(const char *id, mr_artifact *out); /* size/n_files left 0; MR_E_PARSE (no mr_error) */

/* ---- stat cache: (path, size, mtime_ns, inode) -> content hash ----------
 * In memory; the run store loads and saves it (mr_runstore_statcache_*).
 * Every function accepts sc NULL (an empty cache that keeps nothing). */
typedef struct mr_statcache mr_statcache;
typedef struct mr_statcache_entry {
    char *path;
    uint64_t size, mtime_ns, ino;
    mr_hash128 hash;
    int dirty; /* changed since load */
} mr_statcache_entry;
mr_status mr_statcache_new(mr_statcache **out, mr_error *err); /* MR_E_NOMEM */
void mr_statcache_free(mr_statcache *sc); /* NULL is a no-op */
/* Returns 1 and fills *hash when the entry matches size, mtime and inode. */
int mr_statcache_lookup(const mr_statcache *sc, const char *path, uint64_t size, uint64_t mtime_ns,
                        uint64_t ino, mr_hash128 *hash);
/* Adds or replaces path's entry (path copied); dirty marks it for saving.
 * MR_E_NOMEM (no mr_error; the cache is unchanged). */
mr_status mr_statcache_put(mr_statcache *sc, const char *path, uint64_t size, uint64_t mtime_ns,
                           uint64_t ino, mr_hash128 hash, int dirty);
/* Iterates entries in no particular order (dirty_only: only those changed
 * since load); e is borrowed for the call. fn must not modify sc. */
void mr_statcache_foreach(const mr_statcache *sc, int dirty_only,
                          void (*fn)(void *ctx, const mr_statcache_entry *e), void *ctx);
size_t mr_statcache_count(const mr_statcache *sc);

/* ---- store ------------------------------------------------------------- */
typedef struct mr_store mr_store;
/* root: the .millrace directory; objects/ and tmp/ are created inside.
 * MR_E_IO (cannot create them), MR_E_NOMEM. */
mr_status mr_store_open(const char *root, mr_store **out, mr_error *err);
void mr_store_close(mr_store *st); /* NULL is a no-op; the objects stay */
const char *mr_store_root(const mr_store *st); /* borrowed, valid until close */
/* Path of an object (caller frees; NULL on OOM), whether or not it exists. */
char *mr_store_object_path(const mr_store *st, const mr_artifact *a);
int mr_store_has(const mr_store *st, const mr_artifact *a); /* 1 if the object exists (not checked) */

/* Hashes files/directories by content without storing them. Uses and fills
 * sc (may be NULL) and hashes cache misses in parallel on the core pool.
 * out[i] gets the artifact id that publishing paths[i] would produce.
 * bytes_hashed_out (may be NULL) gets the bytes actually read.
 * MR_E_NOT_FOUND (a path is missing), MR_E_INVALID_ARG (neither a regular
 * file nor a directory), MR_E_IO, MR_E_NOMEM. */
mr_status mr_store_hash_paths(mr_store *st, mr_statcache *sc, const char *const *paths, size_t n,
                              mr_artifact *out, uint64_t *bytes_hashed_out, mr_error *err);

/* Publishes a workspace file or directory: its content moves into the store
 * and the path is left as a read-only hard link to the stored object (a
 * copy when the store is on another filesystem). The path's stat identity
 * is recorded in sc (may be NULL) so re-hashing it later is free.
 * Files are hashed afresh (sc is not trusted for outputs just written). A
 * symbolic link to a file is first replaced by a copy of its content.
 * MR_E_NOT_FOUND (path is missing), MR_E_INVALID_ARG (neither a file nor a
 * directory; a link to a directory, or a dangling one), MR_E_IO,
 * MR_E_NOMEM. After a failure some blobs may be
 * stored, but a directory's manifest is not, so no id refers to a part. */
mr_status mr_store_publish(mr_store *st, mr_statcache *sc, const char *path, mr_artifact *out,
                           mr_error *err);
/* Materialises an artifact at dest (which must not exist): read-only hard
 * links to the objects, or copies across filesystems (an executable file
 * is always a copy); parent directories are created. Checked-out files are
 * recorded in sc (may be NULL). MR_E_NOT_FOUND (the artifact is missing
 * from the store, with a hint), MR_E_CORRUPT (malformed manifest), MR_E_IO
 * (dest exists, cannot link or copy), MR_E_NOMEM. */
mr_status mr_store_checkout(mr_store *st, mr_statcache *sc, const mr_artifact *a, const char *dest,
                            mr_error *err);
/* Re-hashes one artifact's objects (a directory: its manifest and every
 * file): MR_E_CORRUPT if any content no longer matches its id (someone wrote
 * through a hard link), MR_E_NOT_FOUND if an object is missing. With
 * remove_bad, the corrupt objects are deleted so the next publish stores
 * good copies instead of deduplicating against them. */
mr_status mr_store_check(mr_store *st, const mr_artifact *a, int remove_bad, mr_error *err);
/* Lists the blob ids a directory artifact refers to (for gc/verify), in
 * manifest order; *children_out is the caller's (mr_free). MR_E_NOT_FOUND
 * (no such manifest), MR_E_CORRUPT (malformed), MR_E_IO, MR_E_LIMIT (a
 * manifest over 256 MiB), MR_E_NOMEM. */
mr_status mr_store_dir_children(mr_store *st, const mr_artifact *a, mr_artifact **children_out,
                                size_t *n_out, mr_error *err);

/* The files a directory artifact holds, with their modes and paths (its
 * manifest, in manifest order: bytewise by path). *entries_out is the
 * caller's (mr_store_entries_free). Errors as mr_store_dir_children. */
typedef struct mr_store_entry {
    mr_artifact file; /* the file's id and size */
    unsigned mode;    /* 0644 or 0755 */
    char *path;       /* relative to the directory */
} mr_store_entry;
mr_status mr_store_dir_entries(mr_store *st, const mr_artifact *a, mr_store_entry **entries_out, size_t *n_out,
                               mr_error *err);
void mr_store_entries_free(mr_store_entry *e, size_t n); /* NULL is a no-op */

/* Parses manifest text (as a remote holds it) into its entries; what
 * names it in messages. MR_E_CORRUPT (malformed), MR_E_LIMIT, MR_E_NOMEM. */
mr_status mr_store_manifest_parse(const char *data, size_t len, const char *what, mr_store_entry **entries_out,
                                  size_t *n_out, mr_error *err);
/* Takes the file at path (a downloaded object: a file's bytes, or a
 * directory's manifest) into the store as object want, only if its content
 * hashes to want's id, and, for a manifest, only once every file it lists
 * is stored (so no manifest ever names a missing file); the file is moved
 * (fsynced, read-only, renamed into place) or, when the object is there
 * already, removed. MR_E_CORRUPT (another content: nothing is stored),
 * MR_E_NOT_FOUND (a listed file is missing), MR_E_IO, MR_E_NOMEM. */
mr_status mr_store_adopt(mr_store *st, const char *path, const mr_artifact *want, mr_error *err);

/* Verify: re-hashes every object; calls fn (on the caller's thread; id and
 * problem borrowed for the call) for each problem found: a corrupt or
 * unreadable object, a file object missing that a manifest lists, a stray
 * file whose name is no artifact id. Problems are reported, not returned:
 * MR_E_IO only when the object directory cannot be read, MR_E_NOMEM.
 * stats is filled (required). */
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
 * mr_store_gc does both (dry_run: plans and counts only; stats is filled,
 * required). A plan lives in caller storage and owns its doomed array
 * (mr_store_gc_plan_free; on a failed plan nothing is left to free).
 * Errors from reading a kept manifest (MR_E_CORRUPT, MR_E_IO) stop the plan
 * before anything is deleted; apply: MR_E_IO (an object cannot be deleted;
 * those before it are gone); MR_E_NOMEM. */
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
