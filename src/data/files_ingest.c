/* Files into a dataset, one row per file (mr_files_ingest, dataset.h):
 *
 *   1. walk: the pattern's base directory is listed level by level, the
 *      directories of a level on the pool's threads; a directory is entered
 *      only when some path under it can still match. Each matching file is
 *      stat'ed where it is listed (size, modification time).
 *   2. plan: the files sorted by path are cut into shards of at most
 *      rows_per_shard files and row_group_bytes bytes; a key hashes the list
 *      (paths, sizes, times) and every option that shapes the result.
 *   3. shards: each shard is read (files in parallel, straight into the
 *      bytes column's buffer) and written as its own small dataset
 *      WORK/shard-NNNNN, published by its manifest. A later call with the
 *      same key keeps the published ones: that is the resume.
 *   4. merge: the shards' files are hard-linked into dir under their final
 *      names and one manifest lists them all (its schema's nullable flags
 *      are the shards' ORed), so the result does not depend on where an
 *      earlier call stopped. WORK is removed last.
 */
#define _GNU_SOURCE /* O_CLOEXEC, fstatat, realpath */
#include "data/dataset_int.h"
#include "millrace/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_COLUMN "image"
#define KEY_FILE "ingest-files.json"
#define SKIPPED_FILE "skipped.txt"
#define FILES_FORMAT "millrace-files/1" /* bump when a shard's layout changes: old work is not resumed */
#define MAX_VALUE 0x7fffffffu /* a Parquet BYTE_ARRAY's length is an int32 */

typedef struct fent {
    char *rel;        /* path relative to the base */
    uint64_t size;
    int64_t mtime_ns;
    char *why;        /* refused when listed (a link out of the base, cannot stat): why */
} fent;

typedef struct pattern {
    char *base;       /* directory the paths are relative to */
    char **segs;      /* the rest, one segment each ("**" included) */
    size_t n_segs;
} pattern;

void mr_files_opts_init(mr_files_opts *o)
{
    memset(o, 0, sizeof *o);
    mr_dataset_write_opts_init(&o->write);
}

void mr_files_stats_free(mr_files_stats *st)
{
    if (!st || !st->skipped) return;
    for (uint64_t i = 0; i < st->files_skipped; i++) mr_free(st->skipped[i]);
    mr_free(st->skipped);
    st->skipped = NULL;
}

/* ---- the pattern ------------------------------------------------------------------ */

static int has_wild(const char *s) { return strpbrk(s, "*?[") != NULL; }

static void pattern_free(pattern *p)
{
    mr_free(p->base);
    for (size_t i = 0; i < p->n_segs; i++) mr_free(p->segs[i]);
    mr_free(p->segs);
    memset(p, 0, sizeof *p);
}

static mr_status pattern_parse(const char *text, pattern *p, mr_error *err)
{
    memset(p, 0, sizeof *p);
    size_t cap = 8;
    char *copy = mr_strdup(text);
    p->segs = mr_calloc(cap, sizeof *p->segs);
    mr_buf base;
    mr_buf_init(&base);
    if (!copy || !p->segs) goto nomem;
    if (text[0] == '/' && mr_buf_append(&base, "/", 1) != MR_OK) goto nomem;
    int wild = 0;
    for (char *save = NULL, *s = strtok_r(copy, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (!strcmp(s, ".")) continue;
        if (!wild && has_wild(s)) wild = 1;
        if (!wild) {
            if (base.len && base.data[base.len - 1] != '/' && mr_buf_append(&base, "/", 1) != MR_OK) goto nomem;
            if (mr_buf_append(&base, s, strlen(s)) != MR_OK) goto nomem;
            continue;
        }
        if (!strcmp(s, "..")) {
            mr_free(copy);
            mr_buf_free(&base);
            pattern_free(p);
            return MR_ERR(err, MR_E_INVALID_ARG, "files pattern '%s': '..' after the first wildcard would leave the base "
                          "directory", text);
        }
        if (p->n_segs == cap) {
            char **ns = mr_realloc(p->segs, 2 * cap * sizeof *ns);
            if (!ns) goto nomem;
            p->segs = ns;
            cap *= 2;
        }
        if (!(p->segs[p->n_segs] = mr_strdup(s))) goto nomem;
        p->n_segs++;
    }
    if (!base.len && mr_buf_append(&base, ".", 1) != MR_OK) goto nomem;
    if (mr_buf_append(&base, "", 1) != MR_OK) goto nomem; /* NUL */
    p->base = (char *)base.data;
    mr_buf_init(&base);
    if (!p->n_segs) { /* no wildcard: a directory means every file under it, a file itself */
        struct stat sb;
        if (stat(p->base, &sb) != 0) {
            mr_free(copy);
            pattern_free(p);
            MR_ERR_SYS(err, MR_E_NOT_FOUND, errno, "no such file or directory");
            mr_error_at(err, text, 0, 0);
            return MR_E_NOT_FOUND;
        }
        if (S_ISDIR(sb.st_mode)) {
            p->segs[0] = mr_strdup("**");
            p->segs[1] = mr_strdup("*");
            p->n_segs = 2;
            if (!p->segs[0] || !p->segs[1]) goto nomem;
        } else {
            char *slash = strrchr(p->base, '/');
            p->segs[0] = mr_strdup(slash ? slash + 1 : p->base);
            p->n_segs = 1;
            if (!p->segs[0]) goto nomem;
            if (slash == p->base) slash[1] = '\0';
            else if (slash) *slash = '\0';
            else strcpy(p->base, ".");
        }
    }
    mr_free(copy);
    return MR_OK;
nomem:
    mr_free(copy);
    mr_buf_free(&base);
    pattern_free(p);
    return MR_ERR(err, MR_E_NOMEM, "out of memory");
}

/* One path segment against one pattern segment: a leading dot only explicitly. */
static int seg_match(const char *seg, const char *name, size_t len)
{
    char buf[NAME_MAX + 1];
    if (len > NAME_MAX) return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return fnmatch(seg, buf, FNM_PERIOD) == 0;
}

/* Does relative path p match segs (dir = 0), or can a path under directory
 * p still match (dir = 1)? "**" matches any number of segments that do not
 * start with a dot. */
static int match(char *const *segs, size_t ns, const char *p, int dir)
{
    if (!*p) {
        if (dir) return ns > 0;
        for (size_t i = 0; i < ns; i++)
            if (strcmp(segs[i], "**")) return 0;
        return 1;
    }
    if (!ns) return 0;
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    const char *rest = slash ? slash + 1 : p + len;
    if (!strcmp(segs[0], "**")) {
        if (match(segs + 1, ns - 1, p, dir)) return 1;
        return p[0] != '.' && match(segs, ns, rest, dir);
    }
    return seg_match(segs[0], p, len) && match(segs + 1, ns - 1, rest, dir);
}

/* ---- the walk ----------------------------------------------------------------------- */

typedef struct wdir {
    fent *files;
    size_t n_files, cap_files;
    char **dirs;
    size_t n_dirs, cap_dirs;
    int err_no;       /* the directory could not be listed */
    mr_status oom;
} wdir;

typedef struct walk_job {
    const pattern *pat;
    const char *real_base; /* realpath of the base, for links */
    char **level;          /* relative directories of this level ("" = the base) */
    wdir *out;
} walk_job;

static char *rel_join(const char *dir, const char *name)
{
    return dir[0] ? mr_asprintf("%s/%s", dir, name) : mr_strdup(name);
}

static int push_file(wdir *w, fent f)
{
    if (w->n_files == w->cap_files) {
        size_t nc = w->cap_files ? 2 * w->cap_files : 64;
        fent *nf = mr_realloc(w->files, nc * sizeof *nf);
        if (!nf) return -1;
        w->files = nf;
        w->cap_files = nc;
    }
    w->files[w->n_files++] = f;
    return 0;
}

static int push_dir(wdir *w, char *d)
{
    if (w->n_dirs == w->cap_dirs) {
        size_t nc = w->cap_dirs ? 2 * w->cap_dirs : 16;
        char **nd = mr_realloc(w->dirs, nc * sizeof *nd);
        if (!nd) return -1;
        w->dirs = nd;
        w->cap_dirs = nc;
    }
    w->dirs[w->n_dirs++] = d;
    return 0;
}

static int64_t mtime_ns(const struct stat *sb) { return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec; }

/* Is the link at full (relative path rel) a file inside the base? why (static) when not. */
static const char *link_refused(const char *real_base, const char *full)
{
    char *real = realpath(full, NULL); /* libc's malloc */
    if (!real) return "a broken symbolic link";
    size_t bl = strlen(real_base);
    int inside = !strncmp(real, real_base, bl) && (real[bl] == '/' || (bl == 1 && real_base[0] == '/'));
    free(real);
    return inside ? NULL : "a symbolic link to a file outside the base directory";
}

static void list_dir(walk_job *j, size_t k)
{
    const char *rel = j->level[k];
    wdir *w = &j->out[k];
    char *path = rel[0] ? mr_path_join(j->pat->base, rel) : mr_strdup(j->pat->base);
    if (!path) {
        w->oom = MR_E_NOMEM;
        return;
    }
    DIR *d = opendir(path);
    if (!d) {
        w->err_no = errno;
        mr_free(path);
        return;
    }
    int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *crel = rel_join(rel, e->d_name);
        if (!crel) {
            w->oom = MR_E_NOMEM;
            break;
        }
        int type = e->d_type;
        struct stat sb;
        if (type == DT_UNKNOWN) {
            if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) type = DT_REG; /* reported when read */
            else type = S_ISDIR(sb.st_mode) ? DT_DIR : S_ISLNK(sb.st_mode) ? DT_LNK : S_ISREG(sb.st_mode) ? DT_REG : -1;
        }
        if (type == DT_DIR) {
            if (!match(j->pat->segs, j->pat->n_segs, crel, 1)) {
                mr_free(crel);
            } else if (push_dir(w, crel) != 0) {
                mr_free(crel);
                w->oom = MR_E_NOMEM;
                break;
            }
            continue;
        }
        if ((type != DT_REG && type != DT_LNK) || !match(j->pat->segs, j->pat->n_segs, crel, 0)) {
            mr_free(crel);
            continue;
        }
        fent f = {crel, 0, 0, NULL};
        const char *why = NULL;
        if (type == DT_LNK) {
            char *full = mr_path_join(path, e->d_name);
            if (!full) {
                mr_free(crel);
                w->oom = MR_E_NOMEM;
                break;
            }
            int st_ok = stat(full, &sb) == 0;
            if (st_ok && !S_ISREG(sb.st_mode)) { /* a link to a directory (not followed), a device, ... */
                mr_free(full);
                mr_free(crel);
                continue;
            }
            why = link_refused(j->real_base, full);
            mr_free(full);
        } else if (fstatat(dfd, e->d_name, &sb, 0) != 0) {
            why = "cannot be stat'ed";
        } else if (!S_ISREG(sb.st_mode)) {
            mr_free(crel);
            continue;
        }
        if (!why && (uint64_t)sb.st_size > MAX_VALUE) why = "larger than 2 GiB, the most one Parquet value holds";
        if (why) {
            f.why = mr_strdup(why);
            if (!f.why) {
                mr_free(crel);
                w->oom = MR_E_NOMEM;
                break;
            }
        } else {
            f.size = (uint64_t)sb.st_size;
            f.mtime_ns = mtime_ns(&sb);
        }
        if (push_file(w, f) != 0) {
            mr_free(f.rel);
            mr_free(f.why);
            w->oom = MR_E_NOMEM;
            break;
        }
    }
    closedir(d);
    mr_free(path);
}

static void list_range(void *ctx, size_t b, size_t e, int tid)
{
    (void)tid;
    for (size_t k = b; k < e; k++) list_dir(ctx, k);
}

static int fent_cmp(const void *a, const void *b) { return strcmp(((const fent *)a)->rel, ((const fent *)b)->rel); }

static void fents_free(fent *f, size_t n)
{
    for (size_t i = 0; f && i < n; i++) {
        mr_free(f[i].rel);
        mr_free(f[i].why);
    }
    mr_free(f);
}

/* All files under the base that match, sorted by path. */
static mr_status walk(const pattern *pat, int threads, fent **out, size_t *n_out, mr_error *err)
{
    *out = NULL;
    *n_out = 0;
    char *real_base = realpath(pat->base, NULL);
    if (!real_base) {
        MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "cannot open the base directory");
        mr_error_at(err, pat->base, 0, 0);
        return err ? err->code : MR_E_IO;
    }
    struct stat sb;
    if (stat(real_base, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        free(real_base);
        MR_ERR(err, MR_E_NOT_FOUND, "the base directory of the files pattern is not a directory");
        mr_error_at(err, pat->base, 0, 0);
        return MR_E_NOT_FOUND;
    }
    mr_status rc = MR_OK;
    fent *files = NULL;
    size_t n = 0, cap = 0;
    char **level = mr_calloc(1, sizeof *level);
    size_t n_level = 1;
    if (!level || !(level[0] = mr_strdup(""))) {
        mr_free(level);
        free(real_base);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    while (n_level && rc == MR_OK) {
        wdir *res = mr_calloc(n_level, sizeof *res);
        if (!res) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        walk_job j = {pat, real_base, level, res};
        mr_parallel_for_capped(n_level, 1, threads, list_range, &j);
        size_t n_next = 0;
        for (size_t k = 0; k < n_level; k++) {
            if (res[k].oom && rc == MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (res[k].err_no && rc == MR_OK) {
                char *p = level[k][0] ? mr_path_join(pat->base, level[k]) : mr_strdup(pat->base);
                rc = MR_ERR_SYS(err, MR_E_IO, res[k].err_no, "cannot list directory %s", p ? p : pat->base);
                mr_free(p);
            }
            n_next += res[k].n_dirs;
            if (rc == MR_OK && res[k].n_files) {
                if (n + res[k].n_files > cap) {
                    size_t nc = cap ? cap : 256;
                    while (nc < n + res[k].n_files) nc *= 2;
                    fent *nf = mr_realloc(files, nc * sizeof *nf);
                    if (!nf) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                    else {
                        files = nf;
                        cap = nc;
                    }
                }
                if (rc == MR_OK) {
                    memcpy(files + n, res[k].files, res[k].n_files * sizeof *files);
                    n += res[k].n_files;
                    res[k].n_files = 0;
                }
            }
        }
        char **next = rc == MR_OK ? mr_calloc(n_next ? n_next : 1, sizeof *next) : NULL;
        if (rc == MR_OK && !next) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        size_t q = 0;
        for (size_t k = 0; k < n_level; k++) {
            for (size_t i = 0; i < res[k].n_dirs; i++) {
                if (next) next[q++] = res[k].dirs[i];
                else mr_free(res[k].dirs[i]);
            }
            mr_free(res[k].dirs);
            fents_free(res[k].files, res[k].n_files);
            mr_free(level[k]);
        }
        mr_free(res);
        mr_free(level);
        level = next;
        n_level = next ? n_next : 0;
    }
    for (size_t k = 0; k < n_level; k++) mr_free(level[k]);
    mr_free(level);
    free(real_base);
    if (rc != MR_OK) {
        fents_free(files, n);
        return rc;
    }
    if (files) qsort(files, n, sizeof *files, fent_cmp);
    *out = files;
    *n_out = n;
    return MR_OK;
}

/* ---- the labels file ---------------------------------------------------------------- */

typedef struct labels {
    mr_table *t;       /* the file */
    size_t path_col;   /* its path column: not copied */
    char **paths;      /* normalized, per row */
    mr_strindex ix;
} labels;

static const char *label_key(const void *ctx, size_t id) { return ((char *const *)ctx)[id]; }

static void labels_free(labels *l)
{
    if (l->paths)
        for (size_t i = 0; l->t && i < l->t->n_rows; i++) mr_free(l->paths[i]);
    mr_free(l->paths);
    mr_strindex_deinit(&l->ix);
    mr_table_free(l->t);
    memset(l, 0, sizeof *l);
}

static mr_status labels_load(const char *path, const char *bytes_col, int parent_label, labels *l, mr_error *err)
{
    memset(l, 0, sizeof *l);
    mr_strindex_init(&l->ix);
    mr_status rc = mr_table_read_file(path, &l->t, err);
    if (rc != MR_OK) return rc;
    mr_table *t = l->t;
    const mr_column *pc = mr_table_column(t, "path");
    if (!pc || pc->type != MR_T_STRING) {
        labels_free(l);
        MR_ERR(err, MR_E_INVALID_ARG, "the labels file has no string column 'path'");
        mr_error_at(err, path, 0, 0);
        mr_error_hint(err, "its rows name files relative to the base directory in a column 'path'");
        return MR_E_INVALID_ARG;
    }
    for (size_t j = 0; j < t->n_cols; j++)
        if (!strcmp(t->cols[j]->name, bytes_col) || (parent_label && !strcmp(t->cols[j]->name, "label"))) {
            MR_ERR(err, MR_E_INVALID_ARG, "the labels file has a column '%s', which the ingest writes itself",
                   t->cols[j]->name);
            mr_error_at(err, path, 0, 0);
            labels_free(l);
            return MR_E_INVALID_ARG;
        }
    l->paths = mr_calloc(t->n_rows ? t->n_rows : 1, sizeof *l->paths);
    if (!l->paths || mr_strindex_reserve(&l->ix, t->n_rows) != MR_OK) {
        labels_free(l);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->n_rows; i++) {
        if (mr_column_is_null(pc, i)) {
            MR_ERR(err, MR_E_INVALID_ARG, "labels file row %zu: the path is empty", i + 1);
            mr_error_at(err, path, 0, 0);
            labels_free(l);
            return MR_E_INVALID_ARG;
        }
        size_t len;
        const char *s = mr_column_str(pc, i, &len);
        uint64_t oom0 = mr_alloc_failures_here(); /* mr_path_normalize's NULL: out of memory, or outside */
        char *raw = mr_strndup(s, len);
        l->paths[i] = raw && memchr(s, '\0', len) == NULL ? mr_path_normalize(raw, 0) : NULL;
        if (!l->paths[i]) {
            int oom = mr_alloc_failures_here() != oom0;
            mr_free(raw);
            if (oom) {
                labels_free(l);
                return MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
            MR_ERR(err, MR_E_INVALID_ARG, "labels file row %zu: path '%.*s' is outside the base directory", i + 1,
                   (int)(len > 200 ? 200 : len), s);
            mr_error_at(err, path, 0, 0);
            labels_free(l);
            return MR_E_INVALID_ARG;
        }
        mr_free(raw);
        size_t first = SIZE_MAX;
        if (mr_strindex_add(&l->ix, i, label_key, l->paths, &first) != MR_OK) {
            labels_free(l);
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        if (first != SIZE_MAX) {
            MR_ERR(err, MR_E_INVALID_ARG, "labels file row %zu: path '%s' was given already, in row %zu", i + 1,
                   l->paths[i], first + 1);
            mr_error_at(err, path, 0, 0);
            labels_free(l);
            return MR_E_INVALID_ARG;
        }
    }
    l->path_col = (size_t)mr_table_column_index(t, "path"); /* the ingest writes its own */
    return MR_OK;
}

/* ---- one shard ---------------------------------------------------------------------- */

typedef struct read_job {
    const char *base;
    const fent *files;  /* the shard's */
    const int64_t *off; /* planned offsets into bytes */
    char *bytes;
    int *err_no;        /* per file: 0, an errno, or -1 (changed while read) */
    uint64_t *got;
} read_job;

static void read_range(void *ctx, size_t b, size_t e, int tid)
{
    (void)tid;
    read_job *j = ctx;
    for (size_t i = b; i < e; i++) {
        char *full = mr_path_join(j->base, j->files[i].rel);
        if (!full) {
            j->err_no[i] = ENOMEM;
            continue;
        }
        int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO put in its place must not block */
        mr_free(full);
        if (fd < 0) {
            j->err_no[i] = errno;
            continue;
        }
        struct stat sb;
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            j->err_no[i] = -1;
            close(fd);
            continue;
        }
        size_t want = (size_t)(j->off[i + 1] - j->off[i]), have = 0;
        char *dst = j->bytes + j->off[i];
        while (have < want) {
            ssize_t r = read(fd, dst + have, want - have);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                j->err_no[i] = r < 0 ? errno : -1;
                break;
            }
            have += (size_t)r;
        }
        char extra;
        if (!j->err_no[i] && read(fd, &extra, 1) != 0) j->err_no[i] = -1; /* grew since it was listed */
        j->got[i] = have;
        close(fd);
    }
}

/* The parent folder's name of rel, or NULL (len 0) for a file at the base. */
static const char *parent_name(const char *rel, size_t *len)
{
    const char *last = strrchr(rel, '/');
    if (!last) return NULL;
    const char *b = last;
    while (b > rel && b[-1] != '/') b--;
    *len = (size_t)(last - b);
    return b;
}

typedef struct ictx {
    const pattern *pat;
    const mr_files_opts *o;
    const char *column;
    const labels *lab;      /* or NULL */
    mr_files_stats *st;
    mr_buf skipped;         /* this shard's skipped lines */
} ictx;

static mr_status set_null_rows(mr_column *c, const uint8_t *missing, size_t n)
{
    size_t nb = (n + 7) / 8;
    if (!c->valid) {
        c->valid = mr_malloc(nb ? nb : 1);
        if (!c->valid) return MR_E_NOMEM;
        memset(c->valid, 0xff, nb ? nb : 1);
    }
    for (size_t i = 0; i < n; i++)
        if (missing[i] && (c->valid[i >> 3] >> (i & 7) & 1)) {
            c->valid[i >> 3] &= (uint8_t) ~(1u << (i & 7));
            c->null_count++;
        }
    return MR_OK;
}

/* Builds the shard's table from the files read (the bytes column adopts bytes). */
static mr_status shard_table(ictx *x, const fent *f, size_t n, int64_t *off, char *bytes, size_t total,
                             mr_table **out, mr_error *err)
{
    mr_table *t = NULL;
    mr_column *pc = NULL, *bc = NULL, *lc = NULL;
    uint32_t *idx = NULL;
    uint8_t *missing = NULL;
    mr_status rc = mr_table_new(&t, err);
    if (rc == MR_OK) rc = mr_column_new("path", MR_T_STRING, n, &pc, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) rc = mr_column_append_str(pc, f[i].rel, strlen(f[i].rel));
    if (rc == MR_OK) rc = mr_column_new(x->column, MR_T_STRING, 0, &bc, err);
    if (rc == MR_OK) {
        mr_free(bc->offsets);
        mr_free(bc->bytes);
        bc->offsets = off;
        bc->bytes = bytes;
        off = NULL;
        bytes = NULL;
        bc->n = bc->cap = n;
        bc->bytes_len = total;
        bc->bytes_cap = total ? total : 1;
        bc->kind.flags |= MR_KIND_BINARY;
    }
    if (rc == MR_OK && x->o->label_from == MR_LABEL_PARENT_DIR) {
        rc = mr_column_new("label", MR_T_STRING, n, &lc, err);
        for (size_t i = 0; rc == MR_OK && i < n; i++) {
            size_t len = 0;
            const char *p = parent_name(f[i].rel, &len);
            rc = p ? mr_column_append_str(lc, p, len) : mr_column_append_null(lc);
        }
    }
    if (rc == MR_OK) rc = mr_table_add_column(t, pc, err), pc = NULL;
    if (rc == MR_OK) rc = mr_table_add_column(t, bc, err), bc = NULL;
    if (rc == MR_OK && lc) rc = mr_table_add_column(t, lc, err), lc = NULL;
    if (rc == MR_OK && x->lab) {
        idx = mr_malloc((n ? n : 1) * sizeof *idx);
        missing = mr_calloc(n ? n : 1, 1);
        if (!idx || !missing) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; rc == MR_OK && i < n; i++) {
            ssize_t r = mr_strindex_find(&x->lab->ix, f[i].rel, label_key, x->lab->paths);
            idx[i] = r < 0 ? 0 : (uint32_t)r;
            missing[i] = r < 0;
            x->st->labels_missing += r < 0;
        }
        if (rc == MR_OK && x->lab->t->n_rows == 0)
            for (size_t j = 0; rc == MR_OK && j < x->lab->t->n_cols; j++) { /* no rows to take: all null */
                if (j == x->lab->path_col) continue;
                mr_column *c = NULL;
                rc = mr_column_new(x->lab->t->cols[j]->name, x->lab->t->cols[j]->type, n, &c, err);
                if (c) c->kind = x->lab->t->cols[j]->kind;
                for (size_t i = 0; rc == MR_OK && i < n; i++) rc = mr_column_append_null(c);
                if (rc == MR_OK) rc = mr_table_add_column(t, c, err);
                else mr_column_free(c);
            }
        else
            for (size_t j = 0; rc == MR_OK && j < x->lab->t->n_cols; j++) {
                if (j == x->lab->path_col) continue;
                mr_column *c = NULL;
                rc = mr_column_take(x->lab->t->cols[j], idx, n, &c, err);
                if (rc == MR_OK && set_null_rows(c, missing, n) != MR_OK) {
                    mr_column_free(c);
                    rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                }
                if (rc == MR_OK) rc = mr_table_add_column(t, c, err);
            }
    }
    mr_free(idx);
    mr_free(missing);
    mr_column_free(pc);
    mr_column_free(bc);
    mr_column_free(lc);
    mr_free(off);
    mr_free(bytes);
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    t->n_rows = n;
    *out = t;
    return MR_OK;
}

static mr_status skip_line(ictx *x, const char *rel, const char *why)
{
    char *line = mr_asprintf("%s: %s\n", rel, why);
    mr_status rc = line ? mr_buf_append(&x->skipped, line, strlen(line)) : MR_E_NOMEM;
    mr_free(line);
    return rc;
}

static char *shard_dir(const char *work, size_t s) { return mr_asprintf("%s/shard-%05zu", work, s); }

/* Reads files [0, n) and publishes them as WORK/shard-s. */
static mr_status write_shard(ictx *x, const char *work, size_t s, const fent *f, size_t n, mr_error *err)
{
    int64_t *off = mr_malloc((n + 1) * sizeof *off);
    int *err_no = mr_calloc(n ? n : 1, sizeof *err_no);
    uint64_t *got = mr_calloc(n ? n : 1, sizeof *got);
    char *bytes = NULL, *dir = shard_dir(work, s);
    mr_table *t = NULL;
    mr_dataset_writer *w = NULL;
    mr_status rc = MR_OK;
    size_t total = 0;
    if (!off || !err_no || !got || !dir) goto nomem;
    off[0] = 0;
    for (size_t i = 0; i < n; i++) off[i + 1] = off[i] + (int64_t)f[i].size;
    total = (size_t)off[n];
    bytes = mr_malloc(total ? total : 1);
    if (!bytes) goto nomem;
    read_job rj = {x->pat->base, f, off, bytes, err_no, got};
    mr_parallel_for_capped(n, 16, x->o->threads, read_range, &rj);
    /* failures: the first stops the ingest (FAIL), or the file is left out (SKIP) */
    size_t kept = 0;
    fent *keep = mr_malloc((n ? n : 1) * sizeof *keep);
    if (!keep) goto nomem;
    int64_t w_off = 0;
    for (size_t i = 0; i < n; i++) {
        if (err_no[i] == ENOMEM) {
            mr_free(keep);
            goto nomem;
        }
        x->st->bytes_read += got[i];
        if (err_no[i]) {
            char *full = mr_path_join(x->pat->base, f[i].rel);
            const char *why = err_no[i] < 0 ? "changed while it was read" : strerror(err_no[i]);
            if (x->o->on_error == MR_ON_ERROR_FAIL) {
                if (err_no[i] < 0)
                    rc = MR_ERR(err, MR_E_IO, "%s: changed while it was read (its size is not the one listed)",
                                full ? full : f[i].rel);
                else rc = MR_ERR_SYS(err, MR_E_IO, err_no[i], "%s: cannot read", full ? full : f[i].rel);
                mr_free(full);
                mr_free(keep);
                goto done;
            }
            mr_free(full);
            if (skip_line(x, f[i].rel, why) != MR_OK) {
                mr_free(keep);
                goto nomem;
            }
            continue;
        }
        size_t len = (size_t)(off[i + 1] - off[i]);
        if (w_off != off[i]) memmove(bytes + w_off, bytes + off[i], len);
        off[kept] = w_off; /* off[kept] <= off[i]: not read again */
        keep[kept++] = f[i];
        w_off += (int64_t)len;
    }
    off[kept] = w_off;
    rc = shard_table(x, keep, kept, off, bytes, (size_t)w_off, &t, err);
    off = NULL;
    bytes = NULL;
    mr_free(keep);
    if (rc != MR_OK) goto done;
    rc = mr_fs_rmtree(dir, err); /* what a killed call left half-written */
    if (rc == MR_OK) {
        mr_dataset_write_opts wo = x->o->write;
        wo.rows_per_shard = kept + 1; /* one Parquet file */
        wo.partition_by = NULL;
        wo.n_partition_by = 0;
        rc = mr_dataset_writer_open(dir, &wo, &w, err);
    }
    if (rc == MR_OK) rc = mr_dataset_writer_write(w, t, err);
    if (rc == MR_OK && x->skipped.len) {
        char *sp = mr_path_join(dir, SKIPPED_FILE);
        rc = sp ? mr_fs_write_atomic(sp, x->skipped.data, x->skipped.len, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(sp);
    }
    if (rc == MR_OK) {
        rc = mr_dataset_writer_close(w, NULL, err); /* the shard's manifest, last: published */
        w = NULL;
    }
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
done:
    mr_dataset_writer_free(w);
    mr_table_free(t);
    mr_free(off);
    mr_free(bytes);
    mr_free(err_no);
    mr_free(got);
    mr_free(dir);
    return rc;
}

/* ---- plan, key, resume ---------------------------------------------------------------- */

/* Reads and parses a JSON file (MR_E_NOMEM kept apart from bad text). */
static mr_status load_json(const char *path, json_t **out, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, 0, &text, &len, err);
    if (rc == MR_OK) rc = mr_json_parse(text, len, 0, out, path, err);
    mr_free(text);
    return rc;
}

static void hash_str(mr_hasher *h, const char *s) { mr_hasher_update(h, s, strlen(s) + 1); }
static void hash_u64(mr_hasher *h, uint64_t v) { mr_hasher_update(h, &v, sizeof v); }

static mr_status make_key(const mr_files_opts *o, const char *column, const fent *f, size_t n, char *hex,
                          mr_error *err)
{
    mr_hasher *h = NULL;
    mr_status rc = mr_hasher_new(&h, err);
    if (rc != MR_OK) return rc;
    hash_str(h, FILES_FORMAT);
    hash_str(h, MILLRACE_VERSION);
    hash_str(h, column);
    hash_u64(h, (uint64_t)o->label_from);
    hash_u64(h, (uint64_t)(o->on_error != MR_ON_ERROR_FAIL));
    hash_u64(h, (uint64_t)o->shuffle);
    hash_u64(h, o->shuffle ? o->shuffle_seed : 0);
    hash_u64(h, o->write.rows_per_shard);
    hash_u64(h, o->write.row_group_rows);
    hash_u64(h, o->write.row_group_bytes);
    hash_u64(h, (uint64_t)o->write.codec);
    hash_u64(h, (uint64_t)o->write.level);
    if (o->labels) {
        char *data = NULL;
        size_t len = 0;
        rc = mr_fs_read_file(o->labels, 0, &data, &len, err);
        if (rc != MR_OK) {
            mr_hasher_free(h);
            return rc;
        }
        mr_hasher_update(h, data, len);
        mr_free(data);
    }
    hash_u64(h, n);
    for (size_t i = 0; i < n; i++) {
        hash_str(h, f[i].rel);
        hash_u64(h, f[i].size);
        hash_u64(h, (uint64_t)f[i].mtime_ns);
    }
    mr_hash_hex(mr_hasher_digest(h), hex);
    mr_hasher_free(h);
    return MR_OK;
}

/* Shards of WORK kept from an earlier call with this key (0 when none: WORK is then fresh). */
static mr_status open_work(const char *work, const char *key, size_t n_shards, size_t *kept, mr_error *err)
{
    *kept = 0;
    char *kp = mr_path_join(work, KEY_FILE);
    if (!kp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    json_t *j = NULL;
    mr_status rc = mr_fs_exists(kp) ? load_json(kp, &j, err) : MR_OK;
    if (rc == MR_E_NOMEM) {
        mr_free(kp);
        return rc;
    }
    rc = MR_OK; /* an unreadable key file: the work is not resumed */
    if (err) mr_error_clear(err);
    const char *old = j ? json_string_value(json_object_get(j, "key")) : NULL;
    if (old && !strcmp(old, key)) {
        for (size_t s = 0; s < n_shards; s++) {
            char *d = shard_dir(work, s);
            char *m = d ? mr_path_join(d, MR_DATASET_MANIFEST) : NULL;
            int done = m && mr_fs_exists(m);
            mr_free(d);
            mr_free(m);
            if (!done) break;
            (*kept)++;
        }
    } else {
        rc = mr_fs_rmtree(work, err);
        if (rc == MR_OK) rc = mr_fs_mkdirs(work, err);
        json_t *nj = rc == MR_OK ? json_pack("{s:s, s:s}", "format", FILES_FORMAT, "key", key) : NULL;
        char *text = nj ? json_dumps(nj, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
        if (rc == MR_OK && !text) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) rc = mr_fs_write_atomic(kp, text, strlen(text), err);
        free(text);
        json_decref(nj);
    }
    json_decref(j);
    mr_free(kp);
    return rc;
}

/* ---- merge ------------------------------------------------------------------------ */

static mr_status add_skipped(mr_files_stats *st, const char *text, size_t len)
{
    const char *p = text, *e = text + len;
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(e - p);
        char **ns = mr_realloc(st->skipped, (size_t)(st->files_skipped + 1) * sizeof *ns);
        if (!ns) return MR_E_NOMEM;
        st->skipped = ns;
        if (!(ns[st->files_skipped] = mr_strndup(p, l))) return MR_E_NOMEM;
        st->files_skipped++;
        p += l + 1;
    }
    return MR_OK;
}

static mr_status link_or_copy(const char *src, const char *dst, mr_error *err)
{
    if (link(src, dst) == 0) return MR_OK;
    if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP)
        return MR_ERR_SYS(err, MR_E_IO, errno, "cannot link %s to %s", src, dst);
    return mr_fs_copy_file(src, dst, err);
}

static mr_status merge(const char *work, size_t n_shards, const char *dir, mr_files_stats *st, mr_error *err)
{
    mr_status rc = mr_fs_mkdirs(dir, err);
    if (rc != MR_OK) return rc;
    json_t *root = NULL, *shards = json_array();
    uint64_t total = 0, bytes = 0, out_shards = 0;
    char *text = NULL;
    if (!shards) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t s = 0; s < n_shards && rc == MR_OK; s++) {
        char *d = shard_dir(work, s), *mp = d ? mr_path_join(d, MR_DATASET_MANIFEST) : NULL;
        char *sp = d ? mr_path_join(d, SKIPPED_FILE) : NULL;
        json_t *m = NULL;
        if (!d || !mp || !sp) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else rc = load_json(mp, &m, err);
        if (rc == MR_OK && mr_fs_exists(sp)) {
            char *txt = NULL;
            size_t len = 0;
            rc = mr_fs_read_file(sp, 0, &txt, &len, err);
            if (rc == MR_OK && add_skipped(st, txt, len) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            mr_free(txt);
        }
        json_t *sch = m ? json_object_get(m, "schema") : NULL, *list = m ? json_object_get(m, "shards") : NULL;
        if (rc == MR_OK && (!json_is_array(sch) || !json_is_array(list)))
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: no schema or shards", mp);
        if (rc == MR_OK && !root) {
            root = json_deep_copy(m);
            if (!root || json_object_set_new(root, "shards", json_array()))
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else if (rc == MR_OK) { /* a column is nullable when it has a null in any shard */
            json_t *rs = json_object_get(root, "schema");
            if (json_array_size(rs) != json_array_size(sch))
                rc = MR_ERR(err, MR_E_CORRUPT, "%s: its schema differs from the first shard's", mp);
            for (size_t c = 0; rc == MR_OK && c < json_array_size(sch); c++)
                if (json_is_true(json_object_get(json_array_get(sch, c), "nullable")) &&
                    json_object_set_new(json_array_get(rs, c), "nullable", json_true()))
                    rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        for (size_t k = 0; rc == MR_OK && k < json_array_size(list); k++) {
            json_t *sh = json_deep_copy(json_array_get(list, k));
            const char *rel = json_string_value(json_object_get(sh, "path"));
            char *name = mr_asprintf("part-%05llu.parquet", (unsigned long long)out_shards);
            char *src = rel ? mr_path_join(d, rel) : NULL, *dst = name ? mr_path_join(dir, name) : NULL;
            if (!sh || !name || !src || !dst) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (rc == MR_OK) rc = link_or_copy(src, dst, err);
            if (rc == MR_OK && json_object_set_new(sh, "path", json_string(name)))
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (rc == MR_OK) {
                total += (uint64_t)json_integer_value(json_object_get(sh, "rows"));
                bytes += (uint64_t)json_integer_value(json_object_get(sh, "bytes"));
                out_shards++;
                if (json_array_append(shards, sh)) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
            json_decref(sh);
            mr_free(name);
            mr_free(src);
            mr_free(dst);
        }
        json_decref(m);
        mr_free(d);
        mr_free(mp);
        mr_free(sp);
    }
    if (rc == MR_OK && !root) rc = MR_ERR(err, MR_E_NOT_FOUND, "no file was packed");
    if (rc == MR_OK && (json_object_set_new(root, "total_rows", json_integer((json_int_t)total)) ||
                        json_object_set(root, "shards", shards)))
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        char *mp = mr_path_join(dir, MR_DATASET_MANIFEST);
        if (!text || !mp) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else rc = mr_fs_write_atomic(mp, text, strlen(text), err);
        mr_free(mp);
    }
    if (rc == MR_OK) {
        st->dataset.rows = total;
        st->dataset.shards = out_shards;
        st->dataset.partitions = total > 0;
        st->dataset.bytes = bytes;
        st->rows_written = total;
    }
    free(text);
    json_decref(root);
    json_decref(shards);
    return rc;
}

/* ---- the whole ingest ------------------------------------------------------------ */

mr_status mr_files_ingest(const char *pattern_text, const char *dir, const mr_files_opts *opts, mr_files_stats *stats,
                          mr_error *err)
{
    mr_files_opts def;
    if (!opts) {
        mr_files_opts_init(&def);
        opts = &def;
    }
    mr_files_opts o = *opts;
    if (!o.write.rows_per_shard) o.write.rows_per_shard = 1000000;
    if (!o.write.row_group_bytes) o.write.row_group_bytes = (size_t)128 << 20;
    if (!o.write.row_group_rows) o.write.row_group_rows = 131072;
    const char *column = o.column && o.column[0] ? o.column : DEFAULT_COLUMN;
    mr_files_stats st;
    memset(&st, 0, sizeof st);
    pattern pat = {0};
    fent *files = NULL;
    size_t n_files = 0, n_shards = 0, *cut = NULL;
    labels lab = {0};
    int have_lab = 0;
    char *work = o.work ? mr_strdup(o.work) : mr_asprintf("%s.partial", dir);
    char key[MR_HASH_HEX_LEN + 1];
    ictx x = {&pat, &o, column, NULL, &st, {0}};
    mr_buf_init(&x.skipped);
    if (!work) {
        mr_status r = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (stats) *stats = st;
        return r;
    }
    if (!strcmp(column, "path") || (o.label_from == MR_LABEL_PARENT_DIR && !strcmp(column, "label"))) {
        mr_free(work);
        if (stats) *stats = st;
        return MR_ERR(err, MR_E_INVALID_ARG, "the bytes column cannot be called '%s': the ingest writes that column",
                      column);
    }
    mr_status rc = pattern_parse(pattern_text, &pat, err);
    if (rc == MR_OK) rc = walk(&pat, o.threads, &files, &n_files, err);
    if (rc == MR_OK && n_files == 0) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "no file matches");
        mr_error_at(err, pattern_text, 0, 0);
    }
    if (rc == MR_OK && o.labels) {
        rc = labels_load(o.labels, column, o.label_from == MR_LABEL_PARENT_DIR, &lab, err);
        have_lab = rc == MR_OK;
        x.lab = have_lab ? &lab : NULL;
    }
    st.files = n_files;
    /* files refused when listed (found again by every call): the first stops the ingest (FAIL),
     * or they are left out and listed first (SKIP) */
    mr_buf refused;
    mr_buf_init(&refused);
    size_t n_ok = 0;
    for (size_t i = 0; i < n_files; i++) {
        if (!files[i].why) {
            fent f = files[i];
            files[i] = (fent){0};
            files[n_ok++] = f;
            continue;
        }
        if (rc == MR_OK && o.on_error == MR_ON_ERROR_FAIL) {
            char *full = mr_path_join(pat.base, files[i].rel);
            rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: %s", full ? full : files[i].rel, files[i].why);
            mr_error_hint(err, "the files must be inside %s; pass --on-error skip to leave such files out", pat.base);
            mr_free(full);
        } else if (rc == MR_OK && mr_buf_printf(&refused, "%s: %s\n", files[i].rel, files[i].why) != MR_OK) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        mr_free(files[i].rel);
        mr_free(files[i].why);
        files[i] = (fent){0};
    }
    n_files = n_ok;
    if (rc == MR_OK && o.shuffle) { /* rows in a seeded random order (Fisher-Yates), not by path */
        mr_rng r;
        mr_rng_seed(&r, o.shuffle_seed);
        for (size_t i = n_files; i > 1; i--) {
            size_t j = (size_t)mr_rng_below(&r, i);
            fent t = files[i - 1];
            files[i - 1] = files[j];
            files[j] = t;
        }
    }
    /* plan: shard s = files [cut[s], cut[s + 1]) */
    if (rc == MR_OK) {
        cut = mr_malloc((n_files + 2) * sizeof *cut);
        if (!cut) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) {
        cut[0] = 0;
        uint64_t bytes = 0;
        size_t rows = 0;
        for (size_t i = 0; i < n_files; i++) {
            if (rows && (rows >= o.write.rows_per_shard || bytes + files[i].size > o.write.row_group_bytes)) {
                cut[++n_shards] = i;
                rows = 0;
                bytes = 0;
            }
            rows++;
            bytes += files[i].size;
        }
        if (n_files) cut[++n_shards] = n_files;
        rc = make_key(&o, column, files, n_files, key, err);
    }
    if (rc == MR_OK && n_files == 0) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "no file could be packed (all %llu were left out)",
                    (unsigned long long)st.files);
        mr_error_at(err, pattern_text, 0, 0);
    }
    size_t kept = 0;
    if (rc == MR_OK) rc = open_work(work, key, n_shards, &kept, err);
    st.shards_resumed = kept;
    for (size_t s = kept; rc == MR_OK && s < n_shards; s++) {
        mr_buf_free(&x.skipped); /* this shard's */
        mr_buf_init(&x.skipped);
        rc = write_shard(&x, work, s, files + cut[s], cut[s + 1] - cut[s], err);
        if (rc == MR_OK && o.progress) o.progress(o.progress_ctx, cut[s + 1], n_files);
    }
    if (rc == MR_OK && refused.len && add_skipped(&st, refused.data, refused.len - 1) != MR_OK)
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory"); /* then the merge adds the shards' */
    if (rc == MR_OK) rc = merge(work, n_shards, dir, &st, err);
    if (rc == MR_OK) mr_fs_rmtree(work, NULL);
    mr_buf_free(&x.skipped);
    mr_buf_free(&refused);
    if (have_lab) labels_free(&lab);
    fents_free(files, n_files);
    mr_free(cut);
    mr_free(work);
    pattern_free(&pat);
    if (stats) *stats = st;
    else mr_files_stats_free(&st);
    return rc;
}

mr_status mr_files_match(const char *pattern_text, char ***paths_out, size_t *n_out, mr_error *err)
{
    *paths_out = NULL;
    *n_out = 0;
    pattern pat;
    fent *files = NULL;
    size_t n = 0;
    mr_status rc = pattern_parse(pattern_text, &pat, err);
    if (rc != MR_OK) return rc;
    rc = walk(&pat, 0, &files, &n, err);
    if (rc == MR_OK && n == 0) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "no file matches");
        mr_error_at(err, pattern_text, 0, 0);
    }
    char **paths = rc == MR_OK ? mr_calloc(n, sizeof *paths) : NULL;
    if (rc == MR_OK && !paths) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++)
        if (!(paths[i] = mr_path_join(pat.base, files[i].rel))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    fents_free(files, n);
    pattern_free(&pat);
    if (rc != MR_OK) {
        mr_files_match_free(paths, n);
        return rc;
    }
    *paths_out = paths;
    *n_out = n;
    return MR_OK;
}

void mr_files_match_free(char **paths, size_t n)
{
    for (size_t i = 0; paths && i < n; i++) mr_free(paths[i]);
    mr_free(paths);
}
