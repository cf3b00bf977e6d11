/* Content-addressed artifact store: hashing of workspace paths (with the
 * stat cache and the core pool), atomic publish, checkout, verify and gc.
 *
 * Atomic publish, in order: the file is hashed and fsynced, made read-only,
 * then hard-linked into objects/ under its hash (or copied to tmp/ and
 * renamed there when linking is impossible), and the object's directory is
 * fsynced. A directory artifact's manifest object is written only after all
 * its blobs exist. An object name therefore never refers to partial data,
 * and a crash at any point leaves at worst an unreferenced complete blob,
 * which gc removes. */
#define _GNU_SOURCE
#include "millrace/store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mr_store {
    char *root;    /* .millrace */
    char *objects; /* .millrace/objects */
    char *tmp;     /* .millrace/tmp */
};

#define MAX_DIR_DEPTH 64
#define MANIFEST_LIMIT ((size_t)256 << 20)

void mr_artifact_id(const mr_artifact *a, char *id)
{
    mr_hash_hex(a->hash, id);
    if (a->is_dir) memcpy(id + 32, ".dir", 5);
}

mr_status mr_artifact_parse(const char *id, mr_artifact *out)
{
    char hex[33];
    size_t n = strlen(id);
    memset(out, 0, sizeof(*out));
    if (n == 36 && !strcmp(id + 32, ".dir"))
        out->is_dir = 1;
    else if (n != 32)
        return MR_E_PARSE;
    memcpy(hex, id, 32);
    hex[32] = '\0';
    return mr_hash_parse(hex, &out->hash);
}

mr_status mr_store_open(const char *root, mr_store **out, mr_error *err)
{
    mr_store *st = mr_calloc(1, sizeof(*st));
    if (!st) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    st->root = mr_strdup(root);
    st->objects = mr_path_join(root, "objects");
    st->tmp = mr_path_join(root, "tmp");
    mr_status rc = MR_OK;
    if (!st->root || !st->objects || !st->tmp) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    rc = mr_fs_mkdirs(st->objects, err);
    if (rc == MR_OK) rc = mr_fs_mkdirs(st->tmp, err);
    if (rc != MR_OK) goto fail;
    *out = st;
    return MR_OK;
fail:
    mr_store_close(st);
    return rc;
}

void mr_store_close(mr_store *st)
{
    if (!st) return;
    mr_free(st->root);
    mr_free(st->objects);
    mr_free(st->tmp);
    mr_free(st);
}

const char *mr_store_root(const mr_store *st) { return st->root; }

char *mr_store_object_path(const mr_store *st, const mr_artifact *a)
{
    char id[MR_ARTIFACT_ID_LEN];
    mr_artifact_id(a, id);
    return mr_asprintf("%s/%.2s/%s", st->objects, id, id + 2);
}

/* Allocates nothing: "no memory" must not read as "not there" (verify
 * would report the object missing, the cache prune drop its entry). */
int mr_store_has(const mr_store *st, const mr_artifact *a)
{
    char id[MR_ARTIFACT_ID_LEN], path[PATH_MAX];
    mr_artifact_id(a, id);
    int n = snprintf(path, sizeof path, "%s/%.2s/%s", st->objects, id, id + 2);
    if (n > 0 && (size_t)n < sizeof path) return mr_fs_exists(path);
    char *p = mr_store_object_path(st, a); /* longer than PATH_MAX: rare */
    int ok = p && mr_fs_exists(p);
    mr_free(p);
    return ok;
}

static uint64_t mtime_ns_of(const struct stat *sb)
{
    return (uint64_t)sb->st_mtim.tv_sec * 1000000000ull + (uint64_t)sb->st_mtim.tv_nsec;
}

/* ---- walking directories into a sorted file list ------------------------ */

typedef struct file_item {
    char *path;    /* full path */
    char *rel;     /* path relative to the artifact root ("" for a single file) */
    struct stat sb;
    mr_hash128 hash;
    int need_hash;
} file_item;

typedef struct file_list {
    file_item *items;
    size_t n, cap;
} file_list;

static void file_list_free(file_list *fl)
{
    for (size_t i = 0; i < fl->n; i++) {
        mr_free(fl->items[i].path);
        mr_free(fl->items[i].rel);
    }
    mr_free(fl->items);
    memset(fl, 0, sizeof(*fl));
}

static mr_status file_list_push(file_list *fl, const char *path, const char *rel, const struct stat *sb)
{
    if (fl->n == fl->cap) {
        size_t ncap = fl->cap ? fl->cap * 2 : 16;
        file_item *ni = mr_realloc(fl->items, ncap * sizeof(*ni));
        if (!ni) return MR_E_NOMEM;
        fl->items = ni;
        fl->cap = ncap;
    }
    file_item *it = &fl->items[fl->n];
    memset(it, 0, sizeof(*it));
    it->path = mr_strdup(path);
    it->rel = mr_strdup(rel);
    it->sb = *sb;
    if (!it->path || !it->rel) {
        mr_free(it->path);
        mr_free(it->rel);
        return MR_E_NOMEM;
    }
    fl->n++;
    return MR_OK;
}

/* Like file_list_push, but takes ownership of path and rel (also on failure). */
static mr_status file_list_take(file_list *fl, char *path, char *rel, const struct stat *sb)
{
    if (fl->n == fl->cap) {
        size_t ncap = fl->cap ? fl->cap * 2 : 16;
        file_item *ni = mr_realloc(fl->items, ncap * sizeof(*ni));
        if (!ni) {
            mr_free(path);
            mr_free(rel);
            return MR_E_NOMEM;
        }
        fl->items = ni;
        fl->cap = ncap;
    }
    file_item *it = &fl->items[fl->n++];
    memset(it, 0, sizeof(*it));
    it->path = path;
    it->rel = rel;
    it->sb = *sb;
    return MR_OK;
}

/* "a" + "/" + "b" in one allocation (no printf: this runs per file). */
static char *join2(const char *a, size_t la, const char *b, size_t lb)
{
    char *p = mr_malloc(la + lb + 2);
    if (!p) return NULL;
    memcpy(p, a, la);
    size_t o = la;
    if (la) p[o++] = '/';
    memcpy(p + o, b, lb);
    p[o + lb] = '\0';
    return p;
}

/* An output is stored by content, as regular files: a symbolic link in
 * one is replaced by a copy of the file it points to (a regular file of the
 * workspace with that content), so nothing outside the workspace is ever
 * linked into the store, made read-only or changed; a link to a directory,
 * or a dangling one, is refused. Inputs are only read, through links. */
static mr_status materialize_link(const char *path, mr_error *err)
{
    struct stat tb;
    if (stat(path, &tb) != 0)
        return MR_ERR_SYS(err, MR_E_INVALID_ARG, errno, "%s: a symbolic link whose target cannot be read", path);
    if (!S_ISREG(tb.st_mode)) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: a symbolic link to a directory or special file cannot be an output", path);
        mr_error_hint(err, "outputs are stored by content: write the files themselves there");
        return rc;
    }
    char *tmp = mr_asprintf("%s.mrcopy.%ld", path, (long)getpid());
    if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    unlink(tmp);
    mr_status rc = mr_fs_copy_file(path, tmp, err); /* reads through the link, writes a new file */
    if (rc == MR_OK) chmod(tmp, (tb.st_mode & 0111) ? 0755 : 0644);
    if (rc == MR_OK && rename(tmp, path) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot replace the link by its content", path);
    if (rc != MR_OK) unlink(tmp);
    mr_free(tmp);
    return rc;
}

/* Collects every regular file under path (any order: walk_artifact sorts).
 * Entries are stat'ed relative to the open directory (fstatat), which
 * skips the kernel's walk of the full path for every file. publish: links
 * are materialised (materialize_link) instead of followed. */
static mr_status walk_dir(const char *path, const char *rel, int depth, int publish, file_list *fl, mr_error *err)
{
    if (depth > MAX_DIR_DEPTH) return MR_ERR(err, MR_E_LIMIT, "%s: directories nested deeper than %d", path, MAX_DIR_DEPTH);
    DIR *d = opendir(path);
    if (!d) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open directory", path);
    int dfd = dirfd(d);
    size_t lp = strlen(path), lr = strlen(rel);
    mr_status st = MR_OK;
    struct dirent *de;
    while (st == MR_OK && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))) continue;
        size_t ln = strlen(name);
        struct stat sb;
        char *child = join2(path, lp, name, ln);
        char *crel = join2(rel, lr, name, ln);
        if (!child || !crel) {
            st = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else if (fstatat(dfd, name, &sb, publish ? AT_SYMLINK_NOFOLLOW : 0) != 0) {
            st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot stat", child);
        } else if (publish && S_ISLNK(sb.st_mode) &&
                   ((st = materialize_link(child, err)) != MR_OK || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)) {
            if (st == MR_OK) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot stat", child);
        } else if (S_ISDIR(sb.st_mode)) {
            st = walk_dir(child, crel, depth + 1, publish, fl, err);
        } else if (S_ISREG(sb.st_mode)) {
            st = file_list_take(fl, child, crel, &sb);
            child = crel = NULL;
            if (st != MR_OK) st = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else {
            st = MR_ERR(err, MR_E_INVALID_ARG, "%s: not a regular file or directory", child);
        }
        mr_free(child);
        mr_free(crel);
    }
    closedir(d);
    return st;
}

static int cmp_item_rel(const void *a, const void *b)
{
    return strcmp(((const file_item *)a)->rel, ((const file_item *)b)->rel);
}

/* Walks a directory artifact into fl, sorted bytewise by relative path as
 * the manifest format requires (docs/formats.md). walk_dir's per-directory
 * order alone is not that order: "a.b" sorts before "a/c" ('.' < '/') but a
 * depth-first walk visits directory "a" first. */
static mr_status walk_artifact(const char *path, int publish, file_list *fl, mr_error *err)
{
    mr_status rc = walk_dir(path, "", 0, publish, fl, err);
    if (rc == MR_OK && fl->n > 1) qsort(fl->items, fl->n, sizeof(*fl->items), cmp_item_rel);
    return rc;
}

/* ---- parallel hashing ---------------------------------------------------- */

typedef struct hash_job {
    file_item **items;
    mr_status *status;
    mr_error *errs;
} hash_job;

static void hash_range(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    hash_job *j = ctx;
    for (size_t i = begin; i < end; i++) {
        mr_error_init(&j->errs[i]);
        j->status[i] = mr_hash_file(j->items[i]->path, &j->items[i]->hash, NULL, &j->errs[i]);
    }
}

/* Hashes every item that the stat cache cannot answer. */
static mr_status hash_items(mr_statcache *sc, file_item **items, size_t n, uint64_t *bytes_hashed, mr_error *err)
{
    file_item **todo = mr_calloc(n ? n : 1, sizeof(*todo));
    if (!todo) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n_todo = 0;
    for (size_t i = 0; i < n; i++) {
        file_item *it = items[i];
        if (mr_statcache_lookup(sc, it->path, (uint64_t)it->sb.st_size, mtime_ns_of(&it->sb), (uint64_t)it->sb.st_ino,
                                &it->hash))
            continue;
        todo[n_todo++] = it;
    }
    mr_status st = MR_OK;
    if (n_todo) {
        mr_status *sts = mr_calloc(n_todo, sizeof(*sts));
        mr_error *errs = mr_calloc(n_todo, sizeof(*errs));
        if (!sts || !errs) {
            st = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else {
            hash_job j = {todo, sts, errs};
            mr_parallel_for(n_todo, 1, hash_range, &j);
            for (size_t i = 0; i < n_todo; i++) {
                if (sts[i] != MR_OK) {
                    if (err && !mr_error_is_set(err)) *err = errs[i];
                    st = sts[i];
                    break;
                }
                file_item *it = todo[i];
                if (bytes_hashed) *bytes_hashed += (uint64_t)it->sb.st_size;
                if (mr_statcache_put(sc, it->path, (uint64_t)it->sb.st_size, mtime_ns_of(&it->sb),
                                     (uint64_t)it->sb.st_ino, it->hash, 1) != MR_OK) {
                    st = MR_ERR(err, MR_E_NOMEM, "out of memory");
                    break;
                }
            }
        }
        mr_free(sts);
        mr_free(errs);
    }
    mr_free(todo);
    return st;
}

static mr_status build_manifest(const file_list *fl, mr_buf *out, uint64_t *size_out)
{
    uint64_t total = 0;
    for (size_t i = 0; i < fl->n; i++) {
        const file_item *it = &fl->items[i];
        char hex[33];
        mr_hash_hex(it->hash, hex);
        unsigned mode = (it->sb.st_mode & 0111) ? 0755 : 0644;
        if (mr_buf_printf(out, "%s %o %llu %s\n", hex, mode, (unsigned long long)it->sb.st_size, it->rel) != MR_OK)
            return MR_E_NOMEM;
        total += (uint64_t)it->sb.st_size;
    }
    if (!out->data && mr_buf_append(out, "", 0) != MR_OK) return MR_E_NOMEM;
    *size_out = total;
    return MR_OK;
}

typedef struct walk_job {
    const char *const *paths;
    const mr_artifact *out;
    file_list *lists;
    mr_status *status;
    mr_error *errs;
} walk_job;

static void walk_range(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    walk_job *j = ctx;
    for (size_t i = begin; i < end; i++) {
        mr_error_init(&j->errs[i]);
        j->status[i] = j->out[i].is_dir ? walk_artifact(j->paths[i], 0, &j->lists[i], &j->errs[i]) : MR_OK;
    }
}

mr_status mr_store_hash_paths(mr_store *st, mr_statcache *sc, const char *const *paths, size_t n, mr_artifact *out,
                              uint64_t *bytes_hashed_out, mr_error *err)
{
    (void)st;
    mr_status rc = MR_OK;
    file_list *lists = mr_calloc(n ? n : 1, sizeof(*lists));
    file_item **all = NULL;
    size_t n_all = 0;
    if (!lists) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (bytes_hashed_out) *bytes_hashed_out = 0;
    for (size_t i = 0; i < n && rc == MR_OK; i++) {
        struct stat sb;
        memset(&out[i], 0, sizeof(out[i]));
        if (stat(paths[i], &sb) != 0) {
            rc = MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "%s: cannot stat", paths[i]);
        } else if (S_ISDIR(sb.st_mode)) {
            out[i].is_dir = 1; /* walked below, in parallel */
        } else if (S_ISREG(sb.st_mode)) {
            if (file_list_push(&lists[i], paths[i], "", &sb) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: not a regular file or directory", paths[i]);
        }
    }
    if (rc != MR_OK) goto done;
    {
        /* Directory walks are independent: one job per directory on the pool. */
        walk_job wj = {paths, out, lists, mr_calloc(n ? n : 1, sizeof(mr_status)), mr_calloc(n ? n : 1, sizeof(mr_error))};
        if (!wj.status || !wj.errs) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else {
            mr_parallel_for(n, 1, walk_range, &wj);
            for (size_t i = 0; i < n && rc == MR_OK; i++)
                if (wj.status[i] != MR_OK) {
                    if (err && !mr_error_is_set(err)) *err = wj.errs[i];
                    rc = wj.status[i];
                }
        }
        mr_free(wj.status);
        mr_free(wj.errs);
    }
    for (size_t i = 0; i < n; i++) n_all += lists[i].n;
    if (rc != MR_OK) goto done;
    all = mr_calloc(n_all ? n_all : 1, sizeof(*all));
    if (!all) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    n_all = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < lists[i].n; k++) all[n_all++] = &lists[i].items[k];
    rc = hash_items(sc, all, n_all, bytes_hashed_out, err);
    if (rc != MR_OK) goto done;
    for (size_t i = 0; i < n && rc == MR_OK; i++) {
        if (!out[i].is_dir) {
            out[i].hash = lists[i].items[0].hash;
            out[i].size = (uint64_t)lists[i].items[0].sb.st_size;
            out[i].n_files = 1;
            continue;
        }
        mr_buf m;
        mr_buf_init(&m);
        m.limit = MANIFEST_LIMIT;
        if (build_manifest(&lists[i], &m, &out[i].size) != MR_OK)
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else
            out[i].hash = mr_hash_bytes(m.data, m.len);
        out[i].n_files = lists[i].n;
        mr_buf_free(&m);
    }
done:
    for (size_t i = 0; i < n; i++) file_list_free(&lists[i]);
    mr_free(lists);
    mr_free(all);
    return rc;
}

/* ---- publish ------------------------------------------------------------- */

static mr_status ensure_parent(const char *objpath, mr_error *err)
{
    char *d = mr_strdup(objpath);
    if (!d) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *slash = strrchr(d, '/');
    mr_status rc = MR_OK;
    if (slash) {
        *slash = '\0';
        if (mkdir(d, 0755) != 0 && errno != EEXIST) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", d);
    }
    mr_free(d);
    return rc;
}

/* Copies path into the store as object obj: copy to tmp/, fsync, make
 * read-only, rename into place, fsync the object's directory. */
static mr_status copy_into_store(mr_store *st, const char *path, const char *obj, mr_error *err)
{
    char *tmp = mr_asprintf("%s/blob.%ld.%p", st->tmp, (long)getpid(), (void *)path);
    if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    unlink(tmp);
    mr_status rc = mr_fs_copy_file(path, tmp, err);
    if (rc == MR_OK) rc = mr_fs_fsync_path(tmp, err);
    if (rc == MR_OK) chmod(tmp, 0444);
    if (rc == MR_OK && rename(tmp, obj) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot publish", obj);
    if (rc == MR_OK) rc = mr_fs_fsync_dir_of(obj, err);
    if (rc != MR_OK) unlink(tmp);
    mr_free(tmp);
    return rc;
}

/* Puts the bytes of path (already hashed as h) into the store as object obj
 * and makes path a read-only hard link to it. Objects are always 0444 and
 * shared by every file with the same content, so an executable file cannot
 * be a link to its object (it would lose its x bits, or lend them to every
 * other file with that content): it is copied in and stays its own inode,
 * made read-only with its x bits kept (0555). */
static mr_status publish_blob(mr_store *st, const char *path, const char *obj, int exec, mr_error *err)
{
    mr_status rc = ensure_parent(obj, err);
    if (rc != MR_OK) return rc;
    if (exec) {
        if (!mr_fs_exists(obj)) rc = copy_into_store(st, path, obj, err);
        if (rc == MR_OK) chmod(path, 0555);
        return rc;
    }
    if (mr_fs_exists(obj)) goto relink; /* same content already stored */
    rc = mr_fs_fsync_path(path, err);
    if (rc != MR_OK) return rc;
    chmod(path, 0444);
    if (link(path, obj) == 0 || errno == EEXIST) {
        rc = mr_fs_fsync_dir_of(obj, err);
        goto relink;
    }
    /* Another filesystem or no hard links: copy, fsync, rename. */
    return copy_into_store(st, path, obj, err);
relink:
    if (rc != MR_OK) return rc;
    {
        /* Replace path with a link to the object (atomically via rename),
         * unless it already is that object (rename of two links to one
         * inode does nothing, so this check is also what keeps it tidy). */
        struct stat sp, so;
        if (stat(path, &sp) == 0 && stat(obj, &so) == 0 && sp.st_ino == so.st_ino && sp.st_dev == so.st_dev) return MR_OK;
        char *lnk = mr_asprintf("%s.mrlink.%ld", path, (long)getpid());
        if (!lnk) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        unlink(lnk);
        if (link(obj, lnk) == 0) {
            if (rename(lnk, path) != 0) {
                rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot replace with stored copy", path);
                unlink(lnk);
            }
        } else {
            chmod(path, 0444); /* cross-device: keep the workspace copy, read-only */
        }
        mr_free(lnk);
    }
    return rc;
}

static mr_status write_object_atomic(mr_store *st, const char *obj, const char *data, size_t len, mr_error *err)
{
    mr_status rc = ensure_parent(obj, err);
    if (rc != MR_OK || mr_fs_exists(obj)) return rc;
    char *tmp = mr_asprintf("%s/manifest.%ld", st->tmp, (long)getpid());
    if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    rc = mr_fs_write_atomic(tmp, data, len, err);
    if (rc == MR_OK) chmod(tmp, 0444);
    if (rc == MR_OK && rename(tmp, obj) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot publish", obj);
    if (rc == MR_OK) rc = mr_fs_fsync_dir_of(obj, err);
    if (rc != MR_OK) unlink(tmp);
    mr_free(tmp);
    return rc;
}

static void record_stat(mr_statcache *sc, const char *path, mr_hash128 h)
{
    struct stat sb;
    if (sc && stat(path, &sb) == 0)
        mr_statcache_put(sc, path, (uint64_t)sb.st_size, mtime_ns_of(&sb), (uint64_t)sb.st_ino, h, 1);
}

mr_status mr_store_publish(mr_store *st, mr_statcache *sc, const char *path, mr_artifact *out, mr_error *err)
{
    struct stat sb;
    mr_status rc = MR_OK;
    file_list fl = {0};
    mr_buf m;
    mr_buf_init(&m);
    memset(out, 0, sizeof(*out));
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) && (rc = materialize_link(path, err)) != MR_OK) return rc;
    if (lstat(path, &sb) != 0)
        return MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "%s: cannot stat", path);
    if (S_ISDIR(sb.st_mode)) {
        out->is_dir = 1;
        rc = walk_artifact(path, 1, &fl, err);
    } else if (S_ISREG(sb.st_mode)) {
        if (file_list_push(&fl, path, "", &sb) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    } else {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: not a regular file or directory", path);
    }
    if (rc != MR_OK) goto done;
    /* Fresh hashes: the stat cache is not trusted for just-written outputs. */
    for (size_t i = 0; i < fl.n && rc == MR_OK; i++) rc = mr_hash_file(fl.items[i].path, &fl.items[i].hash, NULL, err);
    for (size_t i = 0; i < fl.n && rc == MR_OK; i++) {
        mr_artifact blob = {.hash = fl.items[i].hash};
        char *obj = mr_store_object_path(st, &blob);
        if (!obj) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        rc = publish_blob(st, fl.items[i].path, obj, (fl.items[i].sb.st_mode & 0111) != 0, err);
        mr_free(obj);
        if (rc == MR_OK) record_stat(sc, fl.items[i].path, fl.items[i].hash);
    }
    if (rc != MR_OK) goto done;
    if (!out->is_dir) {
        out->hash = fl.items[0].hash;
        out->size = (uint64_t)fl.items[0].sb.st_size;
        out->n_files = 1;
        goto done;
    }
    m.limit = MANIFEST_LIMIT;
    if (build_manifest(&fl, &m, &out->size) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    out->hash = mr_hash_bytes(m.data, m.len);
    out->n_files = fl.n;
    {
        char *obj = mr_store_object_path(st, out);
        if (!obj) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        rc = write_object_atomic(st, obj, m.data, m.len, err);
        mr_free(obj);
    }
done:
    mr_buf_free(&m);
    file_list_free(&fl);
    return rc;
}

/* ---- manifests ----------------------------------------------------------- */

typedef struct manifest_entry {
    mr_hash128 hash;
    unsigned mode;
    uint64_t size;
    char *rel;
} manifest_entry;

static void manifest_free(manifest_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) mr_free(e[i].rel);
    mr_free(e);
}

/* Parses manifest text data (NUL-terminated; modified in place); obj names it in messages. */
static mr_status parse_manifest(char *data, const char *obj, manifest_entry **out, size_t *n_out, mr_error *err)
{
    size_t n = 0, cap = 0;
    manifest_entry *es = NULL;
    mr_status rc = MR_OK;
    for (char *line = data; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) {
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: manifest line without newline", obj);
            break;
        }
        *nl = '\0';
        char hex[33];
        unsigned mode;
        unsigned long long size;
        int consumed = 0;
        if (sscanf(line, "%32s %o %llu %n", hex, &mode, &size, &consumed) != 3 || consumed == 0 || !line[consumed]) {
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: malformed manifest line", obj);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            manifest_entry *ne = mr_realloc(es, cap * sizeof(*ne));
            if (!ne) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                break;
            }
            es = ne;
        }
        memset(&es[n], 0, sizeof(es[n]));
        if (mr_hash_parse(hex, &es[n].hash) != MR_OK) {
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: bad hash in manifest", obj);
            break;
        }
        {
            /* A manifest path must stay inside the directory it describes. */
            const char *rel = line + consumed;
            int bad = rel[0] == '/' || !strcmp(rel, "..") || !strncmp(rel, "../", 3) || strstr(rel, "/../") ||
                      (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/..")) || strstr(rel, "//");
            if (bad) {
                rc = MR_ERR(err, MR_E_CORRUPT, "%s: manifest path '%s' leaves its directory", obj, rel);
                break;
            }
        }
        es[n].mode = mode;
        es[n].size = size;
        es[n].rel = mr_strdup(line + consumed);
        if (!es[n].rel) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        n++;
        line = nl + 1;
    }
    if (rc != MR_OK) {
        manifest_free(es, n);
        return rc;
    }
    *out = es;
    *n_out = n;
    return MR_OK;
}

static mr_status read_manifest(mr_store *st, const mr_artifact *a, manifest_entry **out, size_t *n_out, mr_error *err)
{
    char *obj = mr_store_object_path(st, a);
    char *data = NULL;
    size_t len = 0;
    if (!obj) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_fs_read_file(obj, MANIFEST_LIMIT, &data, &len, err);
    if (rc == MR_OK) rc = parse_manifest(data, obj, out, n_out, err);
    mr_free(data);
    mr_free(obj);
    return rc;
}

/* Manifest entries to the public form (paths moved). */
static mr_status to_entries(manifest_entry *es, size_t n, mr_store_entry **entries_out, mr_error *err)
{
    mr_store_entry *out = mr_calloc(n ? n : 1, sizeof(*out));
    if (!out) {
        manifest_free(es, n);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        out[i].file.hash = es[i].hash;
        out[i].file.size = es[i].size;
        out[i].file.n_files = 1;
        out[i].mode = es[i].mode;
        out[i].path = es[i].rel; /* moved */
        es[i].rel = NULL;
    }
    manifest_free(es, n);
    *entries_out = out;
    return MR_OK;
}

mr_status mr_store_manifest_parse(const char *data, size_t len, const char *what, mr_store_entry **entries_out,
                                  size_t *n_out, mr_error *err)
{
    *entries_out = NULL;
    *n_out = 0;
    if (len > MANIFEST_LIMIT) return MR_ERR(err, MR_E_LIMIT, "%s: a manifest of %zu bytes", what, len);
    char *copy = mr_malloc(len + 1);
    if (!copy) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    memcpy(copy, data, len);
    copy[len] = 0;
    mr_status rc = strlen(copy) == len ? MR_OK : MR_ERR(err, MR_E_CORRUPT, "%s: a NUL byte in a manifest", what);
    manifest_entry *es = NULL;
    size_t n = 0;
    if (rc == MR_OK) rc = parse_manifest(copy, what, &es, &n, err);
    mr_free(copy);
    if (rc == MR_OK) rc = to_entries(es, n, entries_out, err);
    if (rc == MR_OK) *n_out = n;
    return rc;
}

mr_status mr_store_adopt(mr_store *st, const char *path, const mr_artifact *want, mr_error *err)
{
    char id[MR_ARTIFACT_ID_LEN];
    mr_artifact_id(want, id);
    mr_hash128 h;
    uint64_t size = 0;
    mr_status rc = mr_hash_file(path, &h, &size, err);
    if (rc == MR_OK && memcmp(&h, &want->hash, sizeof(h))) {
        char got[MR_HASH_HEX_LEN + 1];
        mr_hash_hex(h, got);
        rc = MR_ERR(err, MR_E_CORRUPT, "object %s: its content hashes to %s", id, got);
    }
    if (rc == MR_OK && want->is_dir) { /* every file it lists must be here first */
        char *data = NULL;
        size_t len = 0;
        manifest_entry *es = NULL;
        size_t n = 0;
        rc = mr_fs_read_file(path, MANIFEST_LIMIT, &data, &len, err);
        if (rc == MR_OK) rc = parse_manifest(data, id, &es, &n, err);
        int parsed = rc == MR_OK;
        for (size_t i = 0; rc == MR_OK && i < n; i++) {
            mr_artifact c = {.hash = es[i].hash, .n_files = 1};
            if (!mr_store_has(st, &c)) {
                char cid[MR_ARTIFACT_ID_LEN];
                mr_artifact_id(&c, cid);
                rc = MR_ERR(err, MR_E_NOT_FOUND, "object %s lists %s (%s), which is not in the store", id, cid, es[i].rel);
            }
        }
        if (parsed) manifest_free(es, n);
        mr_free(data);
    }
    char *obj = rc == MR_OK ? mr_store_object_path(st, want) : NULL;
    if (rc == MR_OK && !obj) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = ensure_parent(obj, err);
    if (rc == MR_OK && mr_fs_exists(obj)) {
        unlink(path); /* the same content is stored already */
    } else if (rc == MR_OK) {
        rc = mr_fs_fsync_path(path, err);
        if (rc == MR_OK) chmod(path, 0444);
        if (rc == MR_OK && rename(path, obj) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot publish", obj);
        if (rc == MR_OK) rc = mr_fs_fsync_dir_of(obj, err);
    }
    mr_free(obj);
    (void)size;
    return rc;
}

mr_status mr_store_dir_children(mr_store *st, const mr_artifact *a, mr_artifact **children_out, size_t *n_out,
                                mr_error *err)
{
    manifest_entry *es = NULL;
    size_t n = 0;
    mr_status rc = read_manifest(st, a, &es, &n, err);
    if (rc != MR_OK) return rc;
    mr_artifact *ch = mr_calloc(n ? n : 1, sizeof(*ch));
    if (!ch) {
        manifest_free(es, n);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        ch[i].hash = es[i].hash;
        ch[i].size = es[i].size;
        ch[i].n_files = 1;
    }
    manifest_free(es, n);
    *children_out = ch;
    *n_out = n;
    return MR_OK;
}

mr_status mr_store_dir_entries(mr_store *st, const mr_artifact *a, mr_store_entry **entries_out, size_t *n_out,
                               mr_error *err)
{
    manifest_entry *es = NULL;
    size_t n = 0;
    *entries_out = NULL;
    *n_out = 0;
    mr_status rc = read_manifest(st, a, &es, &n, err);
    if (rc == MR_OK) rc = to_entries(es, n, entries_out, err);
    if (rc == MR_OK) *n_out = n;
    return rc;
}

void mr_store_entries_free(mr_store_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++) mr_free(e[i].path);
    mr_free(e);
}

static mr_status check_blob(mr_store *st, const mr_artifact *a, int remove_bad, mr_error *err)
{
    char *obj = mr_store_object_path(st, a);
    if (!obj) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_hash128 h;
    char id[MR_ARTIFACT_ID_LEN];
    mr_artifact_id(a, id);
    mr_status rc = mr_hash_file(obj, &h, NULL, err);
    if (rc == MR_E_NOT_FOUND) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "artifact %s is missing from the store", id);
    } else if (rc == MR_OK && !mr_hash_eq(h, a->hash)) {
        rc = MR_ERR(err, MR_E_CORRUPT, "artifact %s is corrupt: its content no longer matches its hash", id);
        mr_error_hint(err, "a stored output was edited in place; millrace recomputes it");
        if (remove_bad) unlink(obj);
    }
    mr_free(obj);
    return rc;
}

mr_status mr_store_check(mr_store *st, const mr_artifact *a, int remove_bad, mr_error *err)
{
    mr_status rc = check_blob(st, a, remove_bad, err);
    if (rc != MR_OK || !a->is_dir) return rc;
    mr_artifact *ch = NULL;
    size_t n = 0;
    rc = mr_store_dir_children(st, a, &ch, &n, err);
    mr_status first = MR_OK;
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        mr_error e;
        mr_error_init(&e);
        mr_status r = check_blob(st, &ch[i], remove_bad, first == MR_OK ? err : &e);
        if (r != MR_OK && first == MR_OK) first = r;
    }
    mr_free(ch);
    return rc != MR_OK ? rc : first;
}

/* ---- checkout ------------------------------------------------------------ */

static mr_status place_blob(const char *obj, const char *dest, unsigned mode, mr_error *err)
{
    /* Objects are 0444: an executable file gets its own copy (see publish_blob). */
    if (!(mode & 0111) && link(obj, dest) == 0) return MR_OK;
    if (!(mode & 0111) && errno != EXDEV && errno != EPERM && errno != EMLINK)
        return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot link from store", dest);
    mr_status rc = mr_fs_copy_file(obj, dest, err);
    if (rc == MR_OK) chmod(dest, mode & 0555);
    return rc;
}

mr_status mr_store_checkout(mr_store *st, mr_statcache *sc, const mr_artifact *a, const char *dest, mr_error *err)
{
    mr_status rc = MR_OK;
    char *obj = mr_store_object_path(st, a);
    if (!obj) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (!mr_fs_exists(obj)) {
        char id[MR_ARTIFACT_ID_LEN];
        mr_artifact_id(a, id);
        rc = MR_ERR(err, MR_E_NOT_FOUND, "artifact %s is missing from the store", id);
        mr_error_hint(err, "run `millrace verify`; re-run the producing stage with --force");
        goto done;
    }
    if (!a->is_dir) {
        char *slash = strrchr(dest, '/');
        if (slash) {
            char *parent = mr_strndup(dest, (size_t)(slash - dest));
            if (!parent) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                goto done;
            }
            rc = mr_fs_mkdirs(parent, err);
            mr_free(parent);
            if (rc != MR_OK) goto done;
        }
        rc = place_blob(obj, dest, 0444, err);
        if (rc == MR_OK) record_stat(sc, dest, a->hash);
        goto done;
    }
    {
        manifest_entry *es = NULL;
        size_t n = 0;
        rc = read_manifest(st, a, &es, &n, err);
        if (rc != MR_OK) goto done;
        rc = mr_fs_mkdirs(dest, err);
        for (size_t i = 0; i < n && rc == MR_OK; i++) {
            char *p = mr_path_join(dest, es[i].rel);
            mr_artifact blob = {.hash = es[i].hash};
            char *bobj = mr_store_object_path(st, &blob);
            if (!p || !bobj) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            } else {
                char *slash = strrchr(p, '/');
                *slash = '\0';
                rc = mr_fs_mkdirs(p, err);
                *slash = '/';
                if (rc == MR_OK) rc = place_blob(bobj, p, es[i].mode, err);
                if (rc == MR_OK) record_stat(sc, p, es[i].hash);
            }
            mr_free(p);
            mr_free(bobj);
        }
        manifest_free(es, n);
    }
done:
    mr_free(obj);
    return rc;
}

/* ---- verify and gc ------------------------------------------------------- */

/* Called for each object; a status other than MR_OK (out of memory) stops
 * the walk and is returned. */
typedef mr_status (*object_fn)(void *ctx, const char *path, const char *id);

static mr_status foreach_object(mr_store *st, object_fn fn, void *ctx, mr_error *err)
{
    DIR *top = opendir(st->objects);
    if (!top) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open", st->objects);
    struct dirent *de;
    mr_status rc = MR_OK;
    while (rc == MR_OK && (de = readdir(top)) != NULL) {
        if (strlen(de->d_name) != 2 || !isxdigit((unsigned char)de->d_name[0]) || !isxdigit((unsigned char)de->d_name[1])) continue;
        char *sub = mr_path_join(st->objects, de->d_name);
        if (!sub) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        DIR *d = opendir(sub);
        if (d) {
            struct dirent *e2;
            while (rc == MR_OK && (e2 = readdir(d)) != NULL) {
                if (e2->d_name[0] == '.') continue;
                char id[520];
                snprintf(id, sizeof(id), "%s%s", de->d_name, e2->d_name);
                char *p = mr_path_join(sub, e2->d_name);
                /* an object skipped for want of memory would be missing
                 * from verify's count and from gc's plan */
                rc = p ? fn(ctx, p, id) : MR_E_NOMEM;
                if (rc != MR_OK) MR_ERR(err, rc, "out of memory walking the object store");
                mr_free(p);
            }
            closedir(d);
        }
        mr_free(sub);
    }
    closedir(top);
    return rc;
}

typedef struct verify_ctx {
    mr_store *st;
    void (*fn)(void *ctx, const char *id, const char *problem);
    void *ctx;
    mr_verify_stats *stats;
} verify_ctx;

/* Out of memory hashing or listing an object is the walk's error, never
 * a "corrupt" verdict on the object. */
static mr_status verify_one(void *vctx, const char *path, const char *id)
{
    verify_ctx *v = vctx;
    mr_artifact a;
    if (mr_artifact_parse(id, &a) != MR_OK) {
        v->fn(v->ctx, id, "stray file in the object store");
        return MR_OK;
    }
    v->stats->n_objects++;
    mr_hash128 h;
    uint64_t size = 0;
    mr_error e;
    mr_error_init(&e);
    mr_status hrc = mr_hash_file(path, &h, &size, &e);
    if (hrc == MR_E_NOMEM) return hrc;
    if (hrc != MR_OK) {
        v->stats->n_corrupt++;
        v->fn(v->ctx, id, e.msg);
        return MR_OK;
    }
    v->stats->n_bytes += size;
    if (!mr_hash_eq(h, a.hash)) {
        v->stats->n_corrupt++;
        v->fn(v->ctx, id, "corrupt: content does not match its hash");
        return MR_OK;
    }
    if (a.is_dir) {
        mr_artifact *ch = NULL;
        size_t n = 0;
        mr_error_init(&e);
        mr_status crc = mr_store_dir_children(v->st, &a, &ch, &n, &e);
        if (crc == MR_E_NOMEM) return crc;
        if (crc != MR_OK) {
            v->stats->n_corrupt++;
            v->fn(v->ctx, id, e.msg);
            return MR_OK;
        }
        for (size_t i = 0; i < n; i++) {
            if (!mr_store_has(v->st, &ch[i])) {
                char cid[MR_ARTIFACT_ID_LEN], msg[128];
                mr_artifact_id(&ch[i], cid);
                snprintf(msg, sizeof(msg), "missing: file object %s listed in this directory", cid);
                v->stats->n_missing++;
                v->fn(v->ctx, id, msg);
            }
        }
        mr_free(ch);
    }
    return MR_OK;
}

mr_status mr_store_verify(mr_store *st, void (*fn)(void *ctx, const char *id, const char *problem), void *ctx,
                          mr_verify_stats *stats, mr_error *err)
{
    memset(stats, 0, sizeof(*stats));
    verify_ctx v = {st, fn, ctx, stats};
    return foreach_object(st, verify_one, &v, err);
}

static int cmp_artifact(const void *pa, const void *pb)
{
    const mr_artifact *a = pa, *b = pb;
    if (a->hash.hi != b->hash.hi) return a->hash.hi < b->hash.hi ? -1 : 1;
    if (a->hash.lo != b->hash.lo) return a->hash.lo < b->hash.lo ? -1 : 1;
    return a->is_dir - b->is_dir;
}

typedef struct gc_ctx {
    mr_artifact *keep;
    size_t n_keep;
    int dry_run;
    mr_gc_stats *stats;
} gc_ctx;

typedef struct gc_scan {
    const mr_artifact *keep;
    size_t n_keep;
    mr_gc_plan *plan;
    size_t cap;
    int nomem;
} gc_scan;

static mr_status gc_one(void *vctx, const char *path, const char *id)
{
    gc_scan *g = vctx;
    mr_artifact a;
    if (mr_artifact_parse(id, &a) != MR_OK) return MR_OK;
    if (bsearch(&a, g->keep, g->n_keep, sizeof(a), cmp_artifact)) {
        g->plan->stats.n_kept++;
        return MR_OK;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) g->plan->stats.bytes_deleted += (uint64_t)sb.st_size;
    g->plan->stats.n_deleted++;
    if (g->plan->n_doomed == g->cap) {
        size_t ncap = g->cap ? g->cap * 2 : 256;
        mr_artifact *nd = mr_realloc(g->plan->doomed, ncap * sizeof(*nd));
        if (!nd) {
            g->nomem = 1;
            return MR_E_NOMEM;
        }
        g->plan->doomed = nd;
        g->cap = ncap;
    }
    g->plan->doomed[g->plan->n_doomed++] = a;
    return MR_OK;
}

/* Directory manifests first, then files; by hash within each. */
static int cmp_doomed(const void *x, const void *y)
{
    const mr_artifact *a = x, *b = y;
    if (a->is_dir != b->is_dir) return a->is_dir ? -1 : 1;
    return cmp_artifact(a, b);
}

mr_status mr_store_gc_plan(mr_store *st, const mr_artifact *keep, size_t n_keep, mr_gc_plan *out, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t cap = n_keep + 16, n = 0;
    mr_artifact *all = mr_calloc(cap, sizeof(*all));
    if (!all) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    for (size_t i = 0; i < n_keep && rc == MR_OK; i++) {
        mr_artifact *ch = NULL;
        size_t nch = 0;
        if (keep[i].is_dir && mr_store_has(st, &keep[i])) {
            rc = mr_store_dir_children(st, &keep[i], &ch, &nch, err);
            if (rc != MR_OK) break;
        }
        if (n + 1 + nch > cap) {
            cap = (n + 1 + nch) * 2;
            mr_artifact *na = mr_realloc(all, cap * sizeof(*na));
            if (!na) {
                mr_free(ch);
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                break;
            }
            all = na;
        }
        all[n++] = keep[i];
        for (size_t k = 0; k < nch; k++) all[n++] = ch[k];
        mr_free(ch);
    }
    if (rc == MR_OK) {
        for (size_t i = 0; i < n; i++) all[i].size = all[i].n_files = 0;
        qsort(all, n, sizeof(*all), cmp_artifact);
        gc_scan g = {all, n, out, 0, 0};
        rc = foreach_object(st, gc_one, &g, err);
        if (rc == MR_OK && g.nomem) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK && out->n_doomed > 1) qsort(out->doomed, out->n_doomed, sizeof(*out->doomed), cmp_doomed);
    }
    mr_free(all);
    if (rc != MR_OK) mr_store_gc_plan_free(out);
    return rc;
}

void mr_store_gc_plan_free(mr_gc_plan *p)
{
    if (!p) return;
    mr_free(p->doomed);
    p->doomed = NULL;
    p->n_doomed = 0;
}

/* fsyncs objects/XX/ of every object of kind is_dir in plan (once each). */
static void sync_object_dirs(mr_store *st, const mr_gc_plan *plan, int is_dir)
{
    unsigned char seen[256] = {0};
    for (size_t i = 0; i < plan->n_doomed; i++) {
        const mr_artifact *a = &plan->doomed[i];
        unsigned top = (unsigned)(a->hash.hi >> 56);
        if (a->is_dir != is_dir || seen[top]) continue;
        seen[top] = 1;
        char *obj = mr_store_object_path(st, a);
        if (obj) mr_fs_fsync_dir_of(obj, NULL);
        mr_free(obj);
    }
}

mr_status mr_store_gc_apply(mr_store *st, const mr_gc_plan *plan, mr_error *err)
{
    /* Manifests go (durably) before any file: at every instant, every
     * manifest left in the store lists only files that exist. */
    for (int pass = 1; pass >= 0; pass--) {
        for (size_t i = 0; i < plan->n_doomed; i++) {
            const mr_artifact *a = &plan->doomed[i];
            if (a->is_dir != pass) continue;
            char *obj = mr_store_object_path(st, a);
            if (!obj) return MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (unlink(obj) != 0 && errno != ENOENT) {
                mr_status rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot delete", obj);
                mr_free(obj);
                return rc;
            }
            mr_free(obj);
        }
        sync_object_dirs(st, plan, pass);
    }
    return MR_OK;
}

mr_status mr_store_gc(mr_store *st, const mr_artifact *keep, size_t n_keep, int dry_run, mr_gc_stats *stats,
                      mr_error *err)
{
    mr_gc_plan plan;
    mr_status rc = mr_store_gc_plan(st, keep, n_keep, &plan, err);
    memset(stats, 0, sizeof(*stats));
    if (rc != MR_OK) return rc;
    *stats = plan.stats;
    if (!dry_run) rc = mr_store_gc_apply(st, &plan, err);
    mr_store_gc_plan_free(&plan);
    return rc;
}
