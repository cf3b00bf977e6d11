/* "Open any source as batches", for ingest: one file (CSV, TSV, JSON lines,
 * Parquet), a millrace dataset directory, a directory of such files, or a
 * glob pattern, read file after file (sorted by name) as a stream of tables
 * with one schema. It does not write anything and knows nothing of ops. */
#include "data/dataset_int.h"
#include "data/s3_int.h"
#include "millrace/jsonl.h"
#include "millrace/webdataset.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct mr_source {
    char **files;
    size_t n_files, cur;        /* cur: index of the file being read (n_files = done) */
    mr_source_format forced;    /* MR_SRC_AUTO: by extension */
    mr_csv_options csv;         /* copy; arrays below are owned copies */
    char **schema_names;
    mr_dtype *schema_types;
    mr_colkind *schema_kinds;
    char **null_tokens;
    char *quarantine_path;
    char *quarantine_part;      /* quarantine file of files after the first, appended to quarantine_path */
    /* the reader of the current file: exactly one is set while open */
    int open;
    mr_csv_reader *csv_r;
    mr_parquet_file *pf;
    size_t rg;
    mr_dataset *ds;
    mr_dataset_scan *scan;
    mr_wds_reader *wds;
    mr_table *pending;          /* rows not yet returned (jsonl, parquet, dataset) */
    size_t pending_off;
    int jsonl_done;
    /* the stream's schema, fixed by the first batch */
    int have_schema;
    size_t n_cols;
    char **names;
    mr_dtype *types;
    mr_csv_stats stats;
    mr_status sticky;
    /* s3:// sources: the client, each file's size, and the local copy of
     * the CSV or JSON-lines object being read (removed at its close) */
    mr__s3h *s3;
    uint64_t *sizes;
    char **etags;
    char version[MR_S3_VERSION_LEN]; /* of what the listing picked ("" for local sources) */
    char *local;
};

mr_status mr_source_format_parse(const char *name, mr_source_format *out)
{
    static const struct { const char *s; mr_source_format f; } t[] = {
        {"auto", MR_SRC_AUTO},       {"csv", MR_SRC_CSV},         {"tsv", MR_SRC_TSV},
        {"jsonl", MR_SRC_JSONL},     {"ndjson", MR_SRC_JSONL},    {"json", MR_SRC_JSONL},
        {"parquet", MR_SRC_PARQUET}, {"dataset", MR_SRC_DATASET},   {"webdataset", MR_SRC_WEBDATASET},
        {"wds", MR_SRC_WEBDATASET},  {"tar", MR_SRC_WEBDATASET},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcasecmp(name, t[i].s)) {
            *out = t[i].f;
            return MR_OK;
        }
    return MR_E_NOT_FOUND;
}

static mr_status merge_quarantine(mr_source *s, mr_error *err);

static mr_source_format by_extension(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return MR_SRC_AUTO;
    size_t n = strlen(path);
    static const char *const tars[] = {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz"};
    for (size_t i = 0; i < sizeof tars / sizeof tars[0]; i++) {
        size_t l = strlen(tars[i]);
        if (n > l && !strcasecmp(path + n - l, tars[i])) return MR_SRC_WEBDATASET;
    }
    if (!strcasecmp(dot, ".csv")) return MR_SRC_CSV;
    if (!strcasecmp(dot, ".tsv") || !strcasecmp(dot, ".tab")) return MR_SRC_TSV;
    if (!strcasecmp(dot, ".jsonl") || !strcasecmp(dot, ".ndjson")) return MR_SRC_JSONL;
    if (!strcasecmp(dot, ".parquet") || !strcasecmp(dot, ".pq")) return MR_SRC_PARQUET;
    return MR_SRC_AUTO;
}

static int is_dataset_dir(const char *path)
{
    char *m = mr_path_join(path, MR_DATASET_MANIFEST);
    int r = m && mr_fs_is_dir(path) && mr_fs_exists(m);
    mr_free(m);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static mr_status add_file(mr_source *s, const char *path, size_t *cap)
{
    if (s->n_files == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        char **nf = mr_realloc(s->files, nc * sizeof *nf);
        if (!nf) return MR_E_NOMEM;
        s->files = nf;
        *cap = nc;
    }
    s->files[s->n_files] = mr_strdup(path);
    if (!s->files[s->n_files]) return MR_E_NOMEM;
    s->n_files++;
    return MR_OK;
}

/* What an s3:// URL names, from one listing (v, sorted): the object KEY;
 * else, when KEY has * ? [, the keys it matches (as glob(3) with
 * FNM_PATHNAME); else the "directory" KEY/: a dataset when it holds
 * manifest.json (or the format says so), else the data files directly in
 * it. *ver gets the objects the version covers: the object, the matches,
 * or everything under KEY/ (so that it does not depend on the format).
 * Appends the picks to s->files with their sizes and ETags. */
static mr_status s3_pick(mr_source *s, const char *url, const char *key, const mr__s3_obj *v, size_t n,
                         const mr__s3_obj **ver, size_t *n_ver, size_t *cap, mr_error *err)
{
    size_t key_at = mr__s3h_key_at(s->s3), kl = strlen(key);
    int glob = strpbrk(key, "*?[") != NULL, dataset = 0;
    const mr__s3_obj *exact = NULL;
    *n_ver = 0;
    for (size_t i = 0; !glob && i < n; i++)
        if (!strcmp(v[i].key, key)) exact = &v[i];
    const mr__s3_obj **pick = mr_malloc((n ? n : 1) * sizeof *pick);
    if (!pick) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n_pick = 0;
    if (exact) {
        pick[n_pick++] = ver[(*n_ver)++] = exact;
    } else {
        for (size_t i = 0; i < n; i++) {
            const char *k = v[i].key;
            if (glob) {
                if (fnmatch(key, k, FNM_PATHNAME) == 0) pick[n_pick++] = ver[(*n_ver)++] = &v[i];
                continue;
            }
            if (kl && (strncmp(k, key, kl) || (key[kl - 1] != '/' && k[kl] != '/'))) continue;
            const char *rest = kl ? k + kl + (key[kl - 1] == '/' ? 0 : 1) : k;
            ver[(*n_ver)++] = &v[i];
            if (!strcmp(rest, MR_DATASET_MANIFEST)) dataset = 1;
            if (!strchr(rest, '/') && by_extension(rest) != MR_SRC_AUTO) pick[n_pick++] = &v[i];
        }
    }
    mr_status rc = MR_OK;
    if (!glob && !exact && (dataset || s->forced == MR_SRC_DATASET)) { /* one dataset */
        char *d = mr_asprintf("%s%s", url, url[strlen(url) - 1] == '/' ? "" : "/");
        rc = d && add_file(s, d, cap) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(d);
        n_pick = 0;
    }
    for (size_t i = 0; rc == MR_OK && i < n_pick; i++) {
        char *f = mr_asprintf("%.*s%s", (int)key_at, url, pick[i]->key);
        rc = f && add_file(s, f, cap) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(f);
    }
    s->sizes = rc == MR_OK ? mr_calloc(s->n_files ? s->n_files : 1, sizeof *s->sizes) : NULL;
    s->etags = s->sizes ? mr_calloc(s->n_files ? s->n_files : 1, sizeof *s->etags) : NULL;
    if (rc == MR_OK && !s->etags) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && n_pick && i < n_pick; i++) {
        s->sizes[i] = pick[i]->size;
        if (!(s->etags[i] = mr_strdup(pick[i]->etag))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_free(pick);
    return rc;
}

static mr_status list_s3(mr_source *s, const char *path, size_t *cap, mr_error *err)
{
    char *key = NULL;
    mr_status rc = mr__s3h_open(path, &s->s3, &key, err);
    if (rc != MR_OK) return rc;
    mr__s3_obj *v = NULL;
    size_t n = 0, n_ver = 0;
    char *prefix = mr_strndup(key, strcspn(key, "*?["));
    rc = prefix ? mr__s3h_list_all(s->s3, prefix, &v, &n, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc != MR_OK) mr_error_at(err, path, 0, 0);
    const mr__s3_obj **ver = rc == MR_OK ? mr_malloc((n ? n : 1) * sizeof *ver) : NULL;
    if (rc == MR_OK && !ver) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = s3_pick(s, path, key, v, n, ver, &n_ver, cap, err);
    if (rc == MR_OK) rc = mr__s3_version(mr__s3h_bucket(s->s3), ver, n_ver, s->version, err);
    mr_free(ver);
    mr__s3_objs_free(v, n);
    mr_free(prefix);
    mr_free(key);
    return rc;
}

const char *mr_source_version(const mr_source *s)
{
    return s->version;
}

mr_status mr_source_s3_version(const char *url, char *id, mr_error *err)
{
    mr_source *s = NULL;
    id[0] = 0;
    mr_status rc = mr_source_open(url, MR_SRC_AUTO, NULL, &s, err);
    if (rc == MR_OK) snprintf(id, MR_S3_VERSION_LEN, "%s", s->version);
    mr_source_close(s, NULL);
    return rc;
}

/* The format of file i: forced, a dataset for a directory (local, or an
 * s3:// URL ending in '/'), else by extension. */
static mr_source_format file_format(const mr_source *s, const char *f)
{
    if (s->forced) return s->forced;
    if (mr__is_s3(f)) return f[strlen(f) - 1] == '/' ? MR_SRC_DATASET : by_extension(f);
    return mr_fs_is_dir(f) ? MR_SRC_DATASET : by_extension(f);
}

static mr_status list_files(mr_source *s, const char *path, mr_error *err)
{
    size_t cap = 0;
    if (mr__is_s3(path)) {
        mr_status rc = list_s3(s, path, &cap, err);
        if (rc != MR_OK) return rc;
    } else if (mr_fs_is_dir(path)) {
        if (is_dataset_dir(path) || s->forced == MR_SRC_DATASET)
            return add_file(s, path, &cap) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        DIR *d = opendir(path);
        if (!d) {
            MR_ERR_SYS(err, MR_E_IO, errno, "cannot open directory");
            mr_error_at(err, path, 0, 0);
            return MR_E_IO;
        }
        struct dirent *e;
        mr_status rc = MR_OK;
        while (rc == MR_OK && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char *p = mr_path_join(path, e->d_name);
            if (!p) rc = MR_E_NOMEM;
            else if (!mr_fs_is_dir(p) && (s->forced ? s->forced != MR_SRC_DATASET : by_extension(p) != MR_SRC_AUTO))
                rc = add_file(s, p, &cap);
            mr_free(p);
        }
        closedir(d);
        if (rc != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    } else if (strpbrk(path, "*?[")) {
        glob_t g;
        int r = glob(path, 0, NULL, &g); /* sorted */
        if (r == 0)
            for (size_t i = 0; i < g.gl_pathc; i++)
                if (add_file(s, g.gl_pathv[i], &cap) != MR_OK) {
                    globfree(&g);
                    return MR_ERR(err, MR_E_NOMEM, "out of memory");
                }
        if (r == 0) globfree(&g);
    } else if (mr_fs_exists(path)) {
        if (add_file(s, path, &cap) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    } else {
        MR_ERR(err, MR_E_NOT_FOUND, "no such file or directory");
        mr_error_at(err, path, 0, 0);
        return MR_E_NOT_FOUND;
    }
    if (s->n_files == 0) {
        MR_ERR(err, MR_E_NOT_FOUND, "no input files match");
        mr_error_at(err, path, 0, 0);
        mr_error_hint(err, "supported: .csv .tsv .jsonl .ndjson .parquet files, WebDataset .tar shards, or a millrace "
                           "dataset directory");
        return MR_E_NOT_FOUND;
    }
    if (!s->s3) qsort(s->files, s->n_files, sizeof *s->files, cmp_str); /* S3 lists keys in byte order */
    for (size_t i = 0; i < s->n_files; i++) {
        mr_source_format f = file_format(s, s->files[i]);
        if (f == MR_SRC_AUTO) {
            MR_ERR(err, MR_E_INVALID_ARG, "cannot tell the format from the file name");
            mr_error_at(err, s->files[i], 0, 0);
            mr_error_hint(err, "name it .csv/.tsv/.jsonl/.ndjson/.parquet/.tar or give the format explicitly");
            return MR_E_INVALID_ARG;
        }
    }
    return MR_OK;
}

static char **copy_strs(const char *const *v, size_t n)
{
    char **c = mr_calloc(n ? n : 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++) {
        c[i] = mr_strdup(v[i]);
        if (!c[i]) {
            for (size_t q = 0; q < i; q++) mr_free(c[q]);
            mr_free(c);
            return NULL;
        }
    }
    return c;
}

static void free_strs(char **v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++) mr_free(v[i]);
    mr_free(v);
}

void mr_source_close(mr_source *s, mr_csv_stats *stats)
{
    if (!s) return;
    if (s->csv_r) {
        mr_csv_stats st;
        mr_csv_reader_close(s->csv_r, &st);
        s->stats.rows_read += st.rows_read;
        s->stats.rows_skipped += st.rows_skipped;
        s->stats.rows_quarantined += st.rows_quarantined;
        s->stats.bytes += st.bytes;
        if (s->cur > 0) merge_quarantine(s, NULL);
    }
    if (stats) *stats = s->stats;
    mr_parquet_close(s->pf);
    mr_dataset_scan_close(s->scan);
    mr_wds_close(s->wds);
    mr_dataset_close(s->ds);
    mr_table_free(s->pending);
    free_strs(s->files, s->n_files);
    free_strs(s->schema_names, s->csv.n_schema);
    free_strs(s->null_tokens, s->csv.n_null_tokens);
    free_strs(s->names, s->n_cols);
    mr_free(s->schema_types);
    mr_free(s->schema_kinds);
    mr_free(s->types);
    mr_free(s->quarantine_path);
    mr_free(s->quarantine_part);
    if (s->local) unlink(s->local);
    mr_free(s->local);
    mr_free(s->sizes);
    free_strs(s->etags, s->etags ? s->n_files : 0);
    mr__s3h_unref(s->s3);
    mr_free(s);
}

mr_status mr_source_open(const char *path, mr_source_format format, const mr_csv_options *csv, mr_source **out,
                         mr_error *err)
{
    *out = NULL;
    mr_source *s = mr_calloc(1, sizeof *s);
    if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    s->forced = format;
    if (csv) s->csv = *csv;
    else mr_csv_options_init(&s->csv);
    /* keep copies of what the options borrow: later files are opened after open returns */
    s->schema_names = copy_strs(s->csv.schema_names, s->csv.n_schema);
    s->schema_types = mr_calloc(s->csv.n_schema ? s->csv.n_schema : 1, sizeof *s->schema_types);
    s->schema_kinds = mr_calloc(s->csv.n_schema ? s->csv.n_schema : 1, sizeof *s->schema_kinds);
    s->null_tokens = s->csv.null_tokens ? copy_strs(s->csv.null_tokens, s->csv.n_null_tokens) : NULL;
    s->quarantine_path = s->csv.quarantine_path ? mr_strdup(s->csv.quarantine_path) : NULL;
    s->quarantine_part = s->csv.quarantine_path ? mr_asprintf("%s.part", s->csv.quarantine_path) : NULL;
    if (!s->schema_names || !s->schema_types || !s->schema_kinds || (s->csv.null_tokens && !s->null_tokens) ||
        (s->csv.quarantine_path && (!s->quarantine_path || !s->quarantine_part))) {
        if (!s->null_tokens) s->csv.n_null_tokens = 0;
        if (!s->schema_names) s->csv.n_schema = 0;
        mr_source_close(s, NULL);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (s->csv.n_schema) memcpy(s->schema_types, s->csv.schema_types, s->csv.n_schema * sizeof *s->schema_types);
    if (s->csv.n_schema && s->csv.schema_kinds)
        memcpy(s->schema_kinds, s->csv.schema_kinds, s->csv.n_schema * sizeof *s->schema_kinds);
    s->csv.schema_names = (const char *const *)s->schema_names;
    s->csv.schema_types = s->schema_types;
    s->csv.schema_kinds = s->schema_kinds;
    s->csv.null_tokens = (const char *const *)s->null_tokens;
    s->csv.quarantine_path = s->quarantine_path;
    mr_status rc = list_files(s, path, err);
    if (rc != MR_OK) {
        mr_source_close(s, NULL);
        return rc;
    }
    *out = s;
    return MR_OK;
}

size_t mr_source_n_files(const mr_source *s) { return s->n_files; }
const char *mr_source_file(const mr_source *s, size_t i) { return i < s->n_files ? s->files[i] : NULL; }
uint64_t mr_source_object_bytes(const mr_source *s, size_t i) { return s->s3 && i < s->n_files ? s->sizes[i] : 0; }

/* Appends the side quarantine file of a later input to the main one. */
static mr_status merge_quarantine(mr_source *s, mr_error *err)
{
    if (s->csv.on_error != MR_ON_ERROR_QUARANTINE || !s->quarantine_part || !mr_fs_exists(s->quarantine_part))
        return MR_OK;
    mr_status rc = MR_OK;
    FILE *in = fopen(s->quarantine_part, "rb");
    FILE *out = in ? fopen(s->quarantine_path, "ab") : NULL;
    if (!in || !out) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot append to quarantine file %s", s->quarantine_path);
    } else {
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, n, out) != n) {
                rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot append to quarantine file %s", s->quarantine_path);
                break;
            }
    }
    if (in) fclose(in);
    if (out && fclose(out) != 0 && rc == MR_OK)
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot append to quarantine file %s", s->quarantine_path);
    remove(s->quarantine_part);
    return rc;
}

/* An s3:// CSV or JSON-lines object is read from a local copy (its readers
 * map the file); messages about the copy name the object. */
static mr_status s3_fetch(mr_source *s, const char *url, mr_error *err)
{
    const char *tmp = getenv("TMPDIR");
    s->local = mr_asprintf("%s/millrace-s3-%ld-%zu", tmp && *tmp ? tmp : "/tmp", (long)getpid(), s->cur);
    if (!s->local) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    (void)unlink(s->local);
    mr_status rc = mr__s3h_get_file(s->s3, url + mr__s3h_key_at(s->s3), s->etags[s->cur], s->local, err);
    if (rc != MR_OK) {
        mr_free(s->local);
        s->local = NULL;
    }
    return rc;
}

static void name_object(const mr_source *s, mr_error *err, const char *url)
{
    if (err && s->local && !strcmp(err->file, s->local)) snprintf(err->file, sizeof err->file, "%s", url);
}

static mr_status open_file(mr_source *s, mr_error *err)
{
    const char *url = s->files[s->cur], *f = url;
    mr_source_format fmt = file_format(s, f);
    mr_status rc = MR_OK;
    if (s->s3 && (fmt == MR_SRC_CSV || fmt == MR_SRC_TSV || fmt == MR_SRC_JSONL || fmt == MR_SRC_WEBDATASET)) {
        rc = s3_fetch(s, url, err);
        if (rc != MR_OK) return rc;
        f = s->local;
    }
    s->open = 1;
    s->rg = 0;
    s->jsonl_done = 0;
    /* The readers truncate their quarantine file at open: every file after
     * the first writes a side file that close_file appends to the real one. */
    const char *qpath = s->cur > 0 ? s->quarantine_part : s->quarantine_path;
    switch (fmt) {
    case MR_SRC_CSV:
    case MR_SRC_TSV: {
        mr_csv_options o = s->csv;
        o.quarantine_path = qpath;
        if (fmt == MR_SRC_TSV && !o.delimiter) o.delimiter = '\t';
        rc = mr_csv_reader_open(f, &o, &s->csv_r, err);
        break;
    }
    case MR_SRC_JSONL: {
        mr_jsonl_options o;
        mr_jsonl_options_init(&o);
        o.schema_names = s->csv.schema_names;
        o.schema_types = s->csv.schema_types;
        o.schema_kinds = s->csv.schema_kinds;
        o.n_schema = s->csv.n_schema;
        o.on_error = s->csv.on_error;
        o.quarantine_path = qpath;
        o.threads = s->csv.threads;
        mr_csv_stats st;
        memset(&st, 0, sizeof st);
        rc = mr_jsonl_read(f, &o, &s->pending, &st, err);
        s->pending_off = 0;
        s->stats.rows_skipped += st.rows_skipped;
        s->stats.rows_quarantined += st.rows_quarantined;
        s->stats.bytes += st.bytes;
        s->jsonl_done = 1;
        if (rc == MR_OK && s->cur > 0) rc = merge_quarantine(s, err);
        break;
    }
    case MR_SRC_PARQUET:
        rc = s->s3 ? mr__s3h_parquet_open(s->s3, f + mr__s3h_key_at(s->s3), s->sizes[s->cur], s->etags[s->cur],
                                          &s->pf, err)
                   : mr_parquet_open(f, &s->pf, err);
        break;
    case MR_SRC_WEBDATASET: rc = mr_wds_open(f, &s->wds, err); break;
    case MR_SRC_DATASET:
        rc = mr_dataset_open(f, &s->ds, err);
        if (rc == MR_OK) rc = mr_dataset_scan_open(s->ds, NULL, NULL, 0, &s->scan, err);
        if (rc == MR_OK && s->s3 && strcmp(s->ds->s3_version, s->version)) {
            MR_ERR(err, MR_E_STATE, "the dataset changed while it was read (its listing differs from the source's)");
            mr_error_hint(err, "run again: the new version is listed and read from the start");
            rc = MR_E_STATE;
        }
        if (rc == MR_OK && s->s3) { /* its size is its shards' */
            s->sizes[s->cur] = 0;
            for (size_t k = 0; k < mr_dataset_n_shards(s->ds); k++) {
                mr_dataset_shard_info si;
                mr_dataset_shard(s->ds, k, &si);
                s->sizes[s->cur] += si.bytes;
            }
        }
        break;
    default: rc = MR_ERR(err, MR_E_INVALID_ARG, "unknown source format"); break;
    }
    name_object(s, err, url);
    if (rc != MR_OK) mr_error_at(err, url, 0, 0);
    return rc;
}

static mr_status close_file(mr_source *s, mr_error *err)
{
    mr_status rc = MR_OK;
    if (s->csv_r) {
        mr_csv_stats st;
        mr_csv_reader_close(s->csv_r, &st);
        s->csv_r = NULL;
        s->stats.rows_skipped += st.rows_skipped;
        s->stats.rows_quarantined += st.rows_quarantined;
        s->stats.bytes += st.bytes;
        if (s->cur > 0) rc = merge_quarantine(s, err);
    }
    mr_parquet_close(s->pf);
    s->pf = NULL;
    mr_dataset_scan_close(s->scan);
    s->scan = NULL;
    mr_wds_close(s->wds);
    s->wds = NULL;
    mr_dataset_close(s->ds);
    s->ds = NULL;
    mr_table_free(s->pending);
    s->pending = NULL;
    if (s->local) unlink(s->local);
    mr_free(s->local);
    s->local = NULL;
    s->open = 0;
    s->cur++;
    return rc;
}

static mr_status check_schema(mr_source *s, const mr_table *t, mr_error *err)
{
    if (!s->have_schema) {
        s->names = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *s->names);
        s->types = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *s->types);
        if (!s->names || !s->types) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t j = 0; j < t->n_cols; j++) {
            s->names[j] = mr_strdup(t->cols[j]->name);
            if (!s->names[j]) return MR_ERR(err, MR_E_NOMEM, "out of memory");
            s->types[j] = t->cols[j]->type;
            s->n_cols++;
        }
        s->have_schema = 1;
        return MR_OK;
    }
    int same = t->n_cols == s->n_cols;
    for (size_t j = 0; same && j < t->n_cols; j++)
        same = !strcmp(t->cols[j]->name, s->names[j]) && t->cols[j]->type == s->types[j];
    if (same) return MR_OK;
    mr_buf a;
    mr_buf_init(&a);
    for (size_t j = 0; j < t->n_cols; j++)
        mr_buf_printf(&a, "%s%s %s", j ? ", " : "", t->cols[j]->name, mr_dtype_name(t->cols[j]->type));
    MR_ERR(err, MR_E_SCHEMA, "columns (%s) differ from those of %s", a.data ? a.data : "", s->files[0]);
    mr_buf_free(&a);
    mr_error_at(err, s->files[s->cur], 0, 0);
    mr_error_hint(err, "every input file must have the same columns and types (declare a schema to fix types)");
    return MR_E_SCHEMA;
}

/* Next raw batch of the current file into s->pending (or directly *out for CSV). */
static mr_status next_raw(mr_source *s, size_t max_rows, mr_table **out, mr_error *err)
{
    *out = NULL;
    if (s->pending && s->pending_off < s->pending->n_rows) {
        size_t n = s->pending->n_rows - s->pending_off;
        if (max_rows && n > max_rows) n = max_rows;
        if (s->pending_off == 0 && n == s->pending->n_rows) {
            *out = s->pending;
            s->pending = NULL;
            return MR_OK;
        }
        mr_status rc = mr_table_slice(s->pending, s->pending_off, s->pending_off + n, out, err);
        s->pending_off += n;
        return rc;
    }
    mr_table_free(s->pending);
    s->pending = NULL;
    s->pending_off = 0;
    if (s->csv_r) return mr_csv_reader_next(s->csv_r, max_rows, out, err);
    if (s->pf) {
        if (s->rg == 0 && mr_parquet_num_row_groups(s->pf) == 0 && !s->have_schema) { /* no row group: the columns */
            s->rg = 1;
            return mr_parquet_read_all(s->pf, NULL, 0, out, err);
        }
        if (s->rg >= mr_parquet_num_row_groups(s->pf)) return MR_OK;
        mr_status rc = mr_parquet_read_row_group(s->pf, s->rg++, NULL, 0, &s->pending, err);
        if (rc != MR_OK) return rc;
        if (s->pending->n_rows == 0 && !s->have_schema) { /* an empty row group still carries the columns */
            *out = s->pending;
            s->pending = NULL;
            return MR_OK;
        }
        return next_raw(s, max_rows, out, err);
    }
    if (s->scan) {
        mr_status rc = mr_dataset_scan_next(s->scan, &s->pending, err);
        if (rc != MR_OK || !s->pending) return rc;
        return next_raw(s, max_rows, out, err);
    }
    if (s->wds) return mr_wds_next(s->wds, max_rows, out, err);
    return MR_OK; /* jsonl: its one table is used up */
}

mr_status mr_source_next(mr_source *s, size_t max_rows, mr_table **out, mr_error *err)
{
    *out = NULL;
    if (s->sticky != MR_OK) return MR_ERR(err, MR_E_STATE, "source: an earlier read failed");
    mr_status rc = MR_OK;
    while (s->cur < s->n_files) {
        if (!s->open) {
            rc = open_file(s, err);
            if (rc != MR_OK) break;
        }
        mr_table *t = NULL;
        rc = next_raw(s, max_rows, &t, err);
        if (rc != MR_OK) {
            name_object(s, err, s->files[s->cur]);
            mr_error_at(err, s->files[s->cur], 0, 0);
            break;
        }
        if (!t) {
            rc = close_file(s, err);
            if (rc != MR_OK) break;
            continue;
        }
        if (t->n_rows == 0 && s->have_schema) {
            mr_table_free(t);
            continue;
        }
        rc = check_schema(s, t, err);
        if (rc != MR_OK) {
            mr_table_free(t);
            break;
        }
        s->stats.rows_read += t->n_rows;
        *out = t;
        return MR_OK;
    }
    if (rc != MR_OK) s->sticky = rc;
    return rc;
}
