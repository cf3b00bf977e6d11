/* WebDataset tar shards in and out (webdataset.h), on libarchive.
 *
 * Reading lists the members once (headers only: libarchive skips the data
 * of an uncompressed tar by seeking) for the set of extensions, which fixes
 * the columns, then reads the tar again from the start, member by member:
 * a member whose key differs from the previous one ends a sample. The
 * member that began the next sample is held over when a batch is full.
 * Writing turns each row into its members, in column order. */
#include "millrace/webdataset.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_BATCH 65536
#define BATCH_BYTES ((size_t)64 << 20)
#define MAX_MEMBER 0x7fffffffu
#define KEY_COL "__key__"

static const char *const text_exts[] = {"txt", "text", "cls", "cls2", "json", "caption", "label", "id", "index"};

static int is_text_ext(const char *e)
{
    for (size_t i = 0; i < sizeof text_exts / sizeof text_exts[0]; i++)
        if (!strcmp(e, text_exts[i])) return 1;
    return 0;
}

/* Splits a member path into key and extension; 0 when it has no extension. */
static int split_name(const char *path, size_t *key_len, const char **ext)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base || !dot[1]) return 0;
    *key_len = (size_t)(dot - path);
    *ext = dot + 1;
    return 1;
}

/* ---- reader ----------------------------------------------------------------------------- */

typedef struct field {
    mr_buf val;   /* the held sample's member, when have */
    int have;
} field;

struct mr_wds_reader {
    char *path;
    struct archive *a;
    char **exts;        /* sorted */
    size_t n_exts;
    field *cur;         /* per ext: the sample being gathered */
    mr_buf key;         /* its key */
    int have_key;
    uint64_t member;    /* members read, for messages */
    int eof;
};

static mr_status arc_error(mr_error *err, struct archive *a, const char *path, uint64_t member, const char *what)
{
    const char *msg = a ? archive_error_string(a) : NULL;
    MR_ERR(err, MR_E_CORRUPT, "%s: %s (member %llu)%s%s", path, what, (unsigned long long)member, msg ? ": " : "",
           msg ? msg : "");
    return MR_E_CORRUPT;
}

static mr_status arc_open(const char *path, struct archive **out, mr_error *err)
{
    *out = NULL;
    if (access(path, R_OK) != 0) {
        mr_status code = errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO;
        return MR_ERR_SYS(err, code, errno, "cannot open %s", path);
    }
    struct archive *a = archive_read_new();
    if (!a) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    if (archive_read_open_filename(a, path, (size_t)1 << 20) != ARCHIVE_OK) {
        mr_status rc = arc_error(err, a, path, 0, "not a readable tar");
        archive_read_free(a);
        return rc;
    }
    *out = a;
    return MR_OK;
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static mr_status list_exts(mr_wds_reader *r, mr_error *err)
{
    struct archive *a = NULL;
    mr_status rc = arc_open(r->path, &a, err);
    if (rc != MR_OK) return rc;
    size_t cap = 0;
    struct archive_entry *e;
    uint64_t member = 0;
    for (;;) {
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF) break;
        member++;
        if (h < ARCHIVE_WARN) {
            rc = arc_error(err, a, r->path, member, "cannot read the member header");
            break;
        }
        size_t kl;
        const char *ext, *name = archive_entry_pathname(e);
        if (archive_entry_filetype(e) != AE_IFREG || !name || !split_name(name, &kl, &ext)) continue;
        int seen = 0;
        for (size_t i = 0; i < r->n_exts && !seen; i++) seen = !strcmp(r->exts[i], ext);
        if (seen) continue;
        if (!strcmp(ext, "__key__") || strchr(ext, '/')) continue;
        if (!mr_utf8_valid(ext, strlen(ext))) { /* it would name a column */
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: member %llu (%s): the extension is not valid UTF-8, so it cannot name "
                        "a column", r->path, (unsigned long long)member, name);
            break;
        }
        if (r->n_exts == cap) {
            size_t nc = cap ? 2 * cap : 8;
            char **ne = mr_realloc(r->exts, nc * sizeof *ne);
            if (!ne) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                break;
            }
            r->exts = ne;
            cap = nc;
        }
        if (!(r->exts[r->n_exts] = mr_strdup(ext))) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        r->n_exts++;
    }
    archive_read_free(a);
    if (rc == MR_OK && r->n_exts) qsort(r->exts, r->n_exts, sizeof *r->exts, cmp_str);
    return rc;
}

void mr_wds_close(mr_wds_reader *r)
{
    if (!r) return;
    if (r->a) archive_read_free(r->a);
    for (size_t i = 0; i < r->n_exts; i++) {
        mr_free(r->exts[i]);
        if (r->cur) mr_buf_free(&r->cur[i].val);
    }
    mr_free(r->exts);
    mr_free(r->cur);
    mr_buf_free(&r->key);
    mr_free(r->path);
    mr_free(r);
}

mr_status mr_wds_open(const char *path, mr_wds_reader **out, mr_error *err)
{
    *out = NULL;
    mr_wds_reader *r = mr_calloc(1, sizeof *r);
    if (!r || !(r->path = mr_strdup(path))) {
        mr_free(r);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_buf_init(&r->key);
    mr_status rc = list_exts(r, err);
    if (rc == MR_OK && !(r->cur = mr_calloc(r->n_exts ? r->n_exts : 1, sizeof *r->cur)))
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < r->n_exts; i++) mr_buf_init(&r->cur[i].val);
    if (rc == MR_OK) rc = arc_open(path, &r->a, err);
    if (rc != MR_OK) {
        mr_wds_close(r);
        return rc;
    }
    *out = r;
    return MR_OK;
}

typedef struct batch {
    mr_column **cols; /* key, then one per ext */
    size_t n;
    size_t bytes;
} batch;

static mr_status batch_new(const mr_wds_reader *r, batch *b, mr_error *err)
{
    memset(b, 0, sizeof *b);
    b->cols = mr_calloc(r->n_exts + 1, sizeof *b->cols);
    if (!b->cols) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_column_new(KEY_COL, MR_T_STRING, 0, &b->cols[0], err);
    for (size_t i = 0; rc == MR_OK && i < r->n_exts; i++) {
        rc = mr_column_new(r->exts[i], MR_T_STRING, 0, &b->cols[i + 1], err);
        if (rc == MR_OK && !is_text_ext(r->exts[i])) b->cols[i + 1]->kind.flags |= MR_KIND_BINARY;
    }
    return rc;
}

static void batch_free(const mr_wds_reader *r, batch *b)
{
    for (size_t i = 0; b->cols && i <= r->n_exts; i++) mr_column_free(b->cols[i]);
    mr_free(b->cols);
    memset(b, 0, sizeof *b);
}

/* Appends the held sample as a row and clears it. */
static mr_status flush_sample(mr_wds_reader *r, batch *b)
{
    mr_status rc = mr_column_append_str(b->cols[0], r->key.len ? r->key.data : "", r->key.len);
    for (size_t i = 0; rc == MR_OK && i < r->n_exts; i++) {
        field *f = &r->cur[i];
        rc = f->have ? mr_column_append_str(b->cols[i + 1], f->val.len ? f->val.data : "", f->val.len)
                     : mr_column_append_null(b->cols[i + 1]);
        b->bytes += f->val.len;
        f->have = 0;
        f->val.len = 0;
    }
    b->n++;
    r->have_key = 0;
    r->key.len = 0;
    return rc;
}

mr_status mr_wds_next(mr_wds_reader *r, size_t max_rows, mr_table **out, mr_error *err)
{
    *out = NULL;
    if (!max_rows) max_rows = DEFAULT_BATCH;
    if (r->eof && !r->have_key) return MR_OK;
    batch b;
    mr_status rc = batch_new(r, &b, err);
    while (rc == MR_OK && !r->eof) {
        struct archive_entry *e;
        int h = archive_read_next_header(r->a, &e);
        if (h == ARCHIVE_EOF) {
            r->eof = 1;
            break;
        }
        r->member++;
        if (h < ARCHIVE_WARN) {
            rc = arc_error(err, r->a, r->path, r->member, "cannot read the member header");
            break;
        }
        size_t kl;
        const char *ext, *name = archive_entry_pathname(e);
        if (archive_entry_filetype(e) != AE_IFREG || !name || !split_name(name, &kl, &ext)) continue;
        size_t x = 0;
        while (x < r->n_exts && strcmp(r->exts[x], ext)) x++;
        if (x == r->n_exts) continue; /* skipped when listed (__key__, ...) */
        if (r->have_key && (kl != r->key.len || memcmp(name, r->key.data, kl))) { /* a new sample */
            rc = flush_sample(r, &b);
            if (rc != MR_OK) break;
        }
        if (!r->have_key) {
            r->key.len = 0;
            if ((rc = mr_buf_append(&r->key, name, kl)) != MR_OK) break;
            r->have_key = 1;
        }
        field *f = &r->cur[x];
        if (f->have) {
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: member %llu (%s): a second .%s in sample '%.*s'", r->path,
                        (unsigned long long)r->member, name, ext, (int)kl, name);
            break;
        }
        la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
        if (size < 0 || (uint64_t)size > MAX_MEMBER) {
            rc = MR_ERR(err, MR_E_LIMIT, "%s: member %llu (%s) is larger than 2 GiB", r->path,
                        (unsigned long long)r->member, name);
            break;
        }
        f->val.len = 0;
        char chunk[65536];
        for (;;) {
            la_ssize_t got = archive_read_data(r->a, chunk, sizeof chunk);
            if (got == 0) break;
            if (got < 0) {
                rc = arc_error(err, r->a, r->path, r->member, "cannot read the member's data");
                break;
            }
            if ((rc = mr_buf_append(&f->val, chunk, (size_t)got)) != MR_OK) {
                rc = MR_ERR(err, rc, "%s: member %llu (%s): out of memory", r->path, (unsigned long long)r->member,
                            name);
                break;
            }
        }
        if (rc != MR_OK) break;
        f->have = 1;
        if (b.n >= max_rows || b.bytes >= BATCH_BYTES) break; /* the held sample starts the next batch */
    }
    if (rc == MR_OK && r->eof && r->have_key) rc = flush_sample(r, &b);
    mr_table *t = NULL;
    if (rc == MR_OK && b.n) rc = mr_table_new(&t, err);
    for (size_t i = 0; rc == MR_OK && t && i <= r->n_exts; i++) {
        rc = mr_table_add_column(t, b.cols[i], err);
        b.cols[i] = NULL;
    }
    batch_free(r, &b);
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

/* ---- writer ----------------------------------------------------------------------------- */

struct mr_wds_writer {
    char *path, *tmp;
    struct archive *a;
    struct archive_entry *e;
    int have_key_col;
    int key_from;       /* 0 __key__, 1 path, 2 row number */
    uint64_t rows;
    mr_buf name;
};

mr_status mr_wds_writer_open(const char *path, mr_wds_writer **out, mr_error *err)
{
    *out = NULL;
    mr_wds_writer *w = mr_calloc(1, sizeof *w);
    if (!w) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_buf_init(&w->name);
    w->path = mr_strdup(path);
    w->tmp = mr_asprintf("%s.tmp.%ld", path, (long)getpid());
    w->a = archive_write_new();
    w->e = archive_entry_new();
    if (!w->path || !w->tmp || !w->a || !w->e) {
        mr_wds_writer_free(w);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    /* hdrcharset=BINARY: a name is stored as the bytes the key holds (not translated to UTF-8,
     * which fails for bytes that are not), so every key the reader gives writes back */
    if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
        archive_write_set_format_option(w->a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
        archive_write_open_filename(w->a, w->tmp) != ARCHIVE_OK) {
        mr_status rc = MR_ERR(err, MR_E_IO, "cannot write %s: %s", w->tmp, archive_error_string(w->a));
        mr_wds_writer_free(w);
        return rc;
    }
    *out = w;
    return MR_OK;
}

void mr_wds_writer_free(mr_wds_writer *w)
{
    if (!w) return;
    if (w->a) archive_write_free(w->a);
    if (w->e) archive_entry_free(w->e);
    if (w->tmp) unlink(w->tmp);
    mr_free(w->path);
    mr_free(w->tmp);
    mr_buf_free(&w->name);
    mr_free(w);
}

/* The key of row i into w->name. */
static mr_status row_key(mr_wds_writer *w, const mr_column *kc, uint64_t row, size_t i, mr_error *err)
{
    w->name.len = 0;
    if (w->key_from == 2) return mr_buf_printf(&w->name, "%09llu", (unsigned long long)row);
    if (mr_column_is_null(kc, i))
        return MR_ERR(err, MR_E_INVALID_ARG, "webdataset: row %llu has a null %s", (unsigned long long)row + 1,
                      kc->name);
    size_t len;
    const char *s = mr_column_str(kc, i, &len);
    const char *base = s, *end = s + len;
    for (const char *p = s; p < end; p++)
        if (*p == '/') base = p + 1;
    if (w->key_from == 1) { /* path: drop the extension, then the name's other dots become '_' */
        const char *dot = NULL;
        for (const char *p = base; p < end; p++)
            if (*p == '.') dot = p;
        if (dot && dot > base) end = dot;
    }
    if (end == base || memchr(s, '\0', len))
        return MR_ERR(err, MR_E_INVALID_ARG, "webdataset: row %llu: the key '%.*s' %s", (unsigned long long)row + 1,
                      (int)(len > 200 ? 200 : len), s, end == base ? "has an empty name" : "holds a NUL byte");
    mr_status rc = mr_buf_append(&w->name, s, (size_t)(end - s));
    for (size_t k = (size_t)(base - s); rc == MR_OK && k < w->name.len; k++)
        if (w->name.data[k] == '.') w->name.data[k] = '_';
    return rc == MR_OK ? MR_OK : MR_ERR(err, rc, "out of memory");
}

static mr_status put_member(mr_wds_writer *w, const char *data, size_t len, mr_error *err)
{
    archive_entry_clear(w->e);
    archive_entry_set_pathname(w->e, w->name.data);
    archive_entry_set_filetype(w->e, AE_IFREG);
    archive_entry_set_perm(w->e, 0644);
    archive_entry_set_size(w->e, (la_int64_t)len);
    archive_entry_set_mtime(w->e, 0, 0);
    if (archive_write_header(w->a, w->e) != ARCHIVE_OK ||
        (len && archive_write_data(w->a, data, len) != (la_ssize_t)len))
        return MR_ERR(err, MR_E_IO, "cannot write %s: %s", w->tmp, archive_error_string(w->a));
    return MR_OK;
}

mr_status mr_wds_writer_write(mr_wds_writer *w, const mr_table *t, mr_error *err)
{
    if (!w->have_key_col) {
        w->key_from = mr_table_column(t, KEY_COL) ? 0 : mr_table_column(t, "path") ? 1 : 2;
        w->have_key_col = 1;
    }
    const mr_column *kc = w->key_from == 0 ? mr_table_column(t, KEY_COL)
                        : w->key_from == 1 ? mr_table_column(t, "path") : NULL;
    if (w->key_from < 2 && (!kc || kc->type != MR_T_STRING))
        return MR_ERR(err, MR_E_SCHEMA, "webdataset: the key column %s is missing or not a string",
                      w->key_from ? "path" : KEY_COL);
    for (size_t j = 0; j < t->n_cols; j++) {
        const char *n = t->cols[j]->name;
        if (t->cols[j] != kc && (!n[0] || strchr(n, '/')))
            return MR_ERR(err, MR_E_INVALID_ARG, "webdataset: column '%s' cannot name a member's extension", n);
    }
    mr_buf v;
    mr_buf_init(&v);
    mr_status rc = MR_OK;
    for (size_t i = 0; rc == MR_OK && i < t->n_rows; i++) {
        rc = row_key(w, kc, w->rows, i, err);
        size_t key_len = w->name.len;
        for (size_t j = 0; rc == MR_OK && j < t->n_cols; j++) {
            const mr_column *c = t->cols[j];
            if (c == kc || mr_column_is_null(c, i)) continue;
            w->name.len = key_len;
            rc = mr_buf_printf(&w->name, ".%s", c->name);
            if (rc != MR_OK) {
                rc = MR_ERR(err, rc, "out of memory");
                break;
            }
            if (c->type == MR_T_STRING) {
                size_t len;
                const char *s = mr_column_str(c, i, &len);
                rc = put_member(w, s, len, err);
            } else {
                v.len = 0;
                rc = mr_column_format(c, i, &v);
                if (rc != MR_OK) rc = MR_ERR(err, rc, "out of memory");
                else rc = put_member(w, v.data, v.len, err);
            }
        }
        w->rows++;
    }
    mr_buf_free(&v);
    return rc;
}

mr_status mr_wds_writer_close(mr_wds_writer *w, uint64_t *samples, mr_error *err)
{
    mr_status rc = MR_OK;
    if (archive_write_close(w->a) != ARCHIVE_OK)
        rc = MR_ERR(err, MR_E_IO, "cannot write %s: %s", w->tmp, archive_error_string(w->a));
    if (rc == MR_OK) rc = mr_fs_fsync_path(w->tmp, err);
    if (rc == MR_OK && rename(w->tmp, w->path) != 0)
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot rename %s to %s", w->tmp, w->path);
    if (rc == MR_OK) {
        mr_fs_fsync_dir_of(w->path, NULL);
        mr_free(w->tmp);
        w->tmp = NULL; /* published: nothing to remove */
        if (samples) *samples = w->rows;
    }
    mr_wds_writer_free(w);
    return rc;
}
