/* Remotes (include/millrace/remote.h, docs/remote.md): millrace.yaml's
 * remotes: section, its edits, and push and pull of what millrace.lock
 * references, to S3 (src/core/s3.c) or to a directory on a shared
 * filesystem. */
#define _GNU_SOURCE
#include "pipeline_int.h"
#include "millrace/remote.h"
#include "millrace/s3.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

static const char *const REMOTE_KEYS[] = {"url", "endpoint", "region", "default", "cache"};
#define N_REMOTE_KEYS 5

/* ---- the section ------------------------------------------------------------------ */

static mr_status at(mr_error *err, const char *path, long line, long col, const char *fmt, const char *a)
{
    return mr_error_set_at(err, path, line ? line : 1, line ? col : 1, MR_E_SCHEMA, fmt, a);
}

static int name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 64) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static int url_ok(const char *u)
{
    char b[64], p[1024];
    if (u && !strncmp(u, "s3://", 5)) return mr_s3_parse_url(u, b, sizeof(b), p, sizeof(p), NULL) == MR_OK;
    return u && !strncmp(u, "file:///", 8) && u[8];
}

mr_status mr_remotes_check(const mr_value *root, const char *path, mr_error *err)
{
    const mr_value *rs = mr_value_get(root, "remotes");
    if (!rs) return MR_OK;
    if (rs->kind != MR_V_MAP) return at(err, path, rs->line, rs->col, "'remotes' must be a mapping of name to %s", "{url: ...}");
    int defaults = 0, caches = 0;
    for (size_t i = 0; i < rs->n; i++) {
        const mr_value *r = rs->items[i];
        const char *name = rs->keys[i];
        if (!name_ok(name))
            return at(err, path, rs->key_lines[i], rs->key_cols[i], "remote '%s': a name has letters, digits, '_' and '-'", name);
        if (r->kind != MR_V_MAP) return at(err, path, r->line, r->col, "remote '%s' must be a mapping with its url", name);
        for (size_t k = 0; k < r->n; k++) {
            size_t q = 0;
            while (q < N_REMOTE_KEYS && strcmp(r->keys[k], REMOTE_KEYS[q])) q++;
            if (q < N_REMOTE_KEYS) continue;
            mr_status rc = mr_error_set_at(err, path, r->key_lines[k], r->key_cols[k], MR_E_SCHEMA,
                                           "remote '%s': unknown key '%s'", name, r->keys[k]);
            const char *c = mr_closest(r->keys[k], REMOTE_KEYS, N_REMOTE_KEYS);
            mr_error_hint(err, c ? "did you mean '%s'?" : "its keys: url, endpoint, region, default, cache", c);
            return rc;
        }
        const mr_value *u = mr_value_get(r, "url"), *e = mr_value_get(r, "endpoint"), *g = mr_value_get(r, "region");
        const mr_value *d = mr_value_get(r, "default");
        if (!u || u->kind != MR_V_STR || !url_ok(u->str)) {
            mr_status rc = at(err, path, u ? u->line : r->line, u ? u->col : r->col,
                              "remote '%s': url: expected s3://BUCKET[/PREFIX] or file:///PATH", name);
            mr_error_hint(err, "bucket names have 3 to 63 lower-case letters, digits, '-' and '.'");
            return rc;
        }
        if (e && (e->kind != MR_V_STR || (strncmp(e->str, "http://", 7) && strncmp(e->str, "https://", 8))))
            return at(err, path, e->line, e->col, "remote '%s': endpoint: expected http[s]://HOST[:PORT]", name);
        if (e && strncmp(u->str, "s3://", 5))
            return at(err, path, e->line, e->col, "remote '%s': an endpoint is for an s3:// url", name);
        if (g && (g->kind != MR_V_STR || !g->str[0])) return at(err, path, g->line, g->col, "remote '%s': region: expected a name such as us-east-1", name);
        if (d && d->kind != MR_V_BOOL) return at(err, path, d->line, d->col, "remote '%s': default: expected true or false", name);
        if (d && d->u.b && ++defaults > 1)
            return at(err, path, d->line, d->col, "remote '%s': a second default remote", name);
        const mr_value *ca = mr_value_get(r, "cache");
        if (ca && (ca->kind != MR_V_STR || (strcmp(ca->str, "pull") && strcmp(ca->str, "push") && strcmp(ca->str, "both"))))
            return at(err, path, ca->line, ca->col, "remote '%s': cache: expected pull, push or both", name);
        if (ca && ++caches > 1) return at(err, path, ca->line, ca->col, "remote '%s': a second remote with cache:", name);
    }
    return MR_OK;
}

typedef struct remote_def {
    const char *name, *url, *endpoint, *region;
} remote_def;

static mr_status find_remote(const mr_spec *spec, const char *name, remote_def *out, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    const mr_value *rs = mr_value_get(spec->root, "remotes");
    const mr_value *r = NULL;
    if (name) {
        r = mr_value_get(rs, name);
        if (!r) {
            mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "no remote '%s' in %s", name, spec->path);
            const char *c = rs ? mr_closest(name, (const char *const *)rs->keys, rs->n) : NULL;
            if (c) mr_error_hint(err, "did you mean '%s'?", c);
            else mr_error_hint(err, "add one: millrace remote add %s s3://BUCKET/PREFIX", name);
            return rc;
        }
    } else {
        for (size_t i = 0; rs && i < rs->n && !r; i++) {
            const mr_value *d = mr_value_get(rs->items[i], "default");
            if (d && d->kind == MR_V_BOOL && d->u.b) r = rs->items[i], name = rs->keys[i];
        }
        if (!r && rs && rs->n == 1) r = rs->items[0], name = rs->keys[0];
        if (!r) {
            mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "%s names no default remote", spec->path);
            mr_error_hint(err, rs && rs->n ? "name one (--remote NAME) or mark one default (remote add ... --default)"
                                           : "add one: millrace remote add NAME s3://BUCKET/PREFIX --default");
            return rc;
        }
    }
    out->name = name;
    out->url = mr_value_get(r, "url")->str;
    const mr_value *e = mr_value_get(r, "endpoint"), *g = mr_value_get(r, "region");
    out->endpoint = e ? e->str : NULL;
    out->region = g ? g->str : NULL;
    return MR_OK;
}

mr_status mr__remote_for_run(const mr_spec *spec, const char *name, mr_job_remote *out, int *found, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    *found = 0;
    const mr_value *rs = mr_value_get(spec->root, "remotes"), *r = NULL;
    if (name) {
        remote_def d;
        mr_status rc = find_remote(spec, name, &d, err);
        if (rc != MR_OK) return rc;
        r = mr_value_get(rs, name);
    } else {
        for (size_t i = 0; rs && i < rs->n && !r; i++)
            if (mr_value_get(rs->items[i], "cache")) r = rs->items[i];
        if (!r) return MR_OK;
    }
    const mr_value *ca = mr_value_get(r, "cache"), *e = mr_value_get(r, "endpoint"), *g = mr_value_get(r, "region");
    const char *mode = ca && ca->kind == MR_V_STR ? ca->str : "both";
    out->url = mr_value_get(r, "url")->str;
    out->endpoint = e ? e->str : NULL;
    out->region = g ? g->str : NULL;
    out->pull = strcmp(mode, "push") != 0;
    out->push = strcmp(mode, "pull") != 0;
    *found = 1;
    return MR_OK;
}

mr_status mr_remote_list(const mr_spec *spec, int json, mr_buf *out, mr_error *err)
{
    const mr_value *rs = mr_value_get(spec->root, "remotes");
    remote_def dflt;
    mr_error scratch;
    mr_error_init(&scratch);
    const char *dname = find_remote(spec, NULL, &dflt, &scratch) == MR_OK ? dflt.name : NULL;
    mr_status rc = json ? mr_buf_puts(out, "{\"remotes\": [") : MR_OK;
    for (size_t i = 0; rc == MR_OK && rs && i < rs->n; i++) {
        const mr_value *r = rs->items[i], *e = mr_value_get(r, "endpoint");
        const char *url = mr_value_get(r, "url")->str;
        int d = dname && !strcmp(dname, rs->keys[i]);
        if (json) {
            rc = mr_buf_puts(out, i ? ", {\"name\": " : "{\"name\": ");
            if (rc == MR_OK) rc = mr_buf_json_str(out, rs->keys[i]);
            if (rc == MR_OK) rc = mr_buf_puts(out, ", \"url\": ");
            if (rc == MR_OK) rc = mr_buf_json_str(out, url);
            if (rc == MR_OK) rc = mr_buf_puts(out, ", \"endpoint\": ");
            if (rc == MR_OK) rc = e ? mr_buf_json_str(out, e->str) : mr_buf_puts(out, "null");
            if (rc == MR_OK) rc = mr_buf_printf(out, ", \"default\": %s}", d ? "true" : "false");
        } else {
            rc = mr_buf_printf(out, "%-16s %s%s%s%s\n", rs->keys[i], url, e ? "  (endpoint " : "", e ? e->str : "",
                               e ? ")" : "");
            if (rc == MR_OK && d) rc = mr_buf_puts(out, "                 default\n");
        }
    }
    if (rc == MR_OK && json) rc = mr_buf_puts(out, "]}\n");
    return rc == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
}

/* ---- editing millrace.yaml's text ------------------------------------------------------ */

/* Lines of text, each with its indentation (-1: blank or comment). */
typedef struct lines {
    char **l;
    size_t n;
} lines;

static void lines_free(lines *ls)
{
    for (size_t i = 0; i < ls->n; i++) mr_free(ls->l[i]);
    mr_free(ls->l);
}

static mr_status lines_split(const char *text, size_t len, lines *ls)
{
    memset(ls, 0, sizeof(*ls));
    size_t cap = 16;
    ls->l = mr_malloc(cap * sizeof(*ls->l));
    if (!ls->l) return MR_E_NOMEM;
    for (size_t b = 0; b < len;) {
        size_t e = b;
        while (e < len && text[e] != '\n') e++;
        if (ls->n == cap) {
            char **nl = mr_realloc(ls->l, 2 * cap * sizeof(*nl));
            if (!nl) return MR_E_NOMEM;
            ls->l = nl;
            cap *= 2;
        }
        ls->l[ls->n] = mr_asprintf("%.*s", (int)(e - b), text + b);
        if (!ls->l[ls->n]) return MR_E_NOMEM;
        ls->n++;
        b = e + 1;
    }
    return MR_OK;
}

static int indent_of(const char *l)
{
    int i = 0;
    while (l[i] == ' ') i++;
    return l[i] == 0 || l[i] == '#' ? -1 : i;
}

/* The remotes: block: its header line and the end (exclusive) of its lines; *hdr = n when absent. */
static void find_block(const lines *ls, size_t *hdr, size_t *end)
{
    *hdr = *end = ls->n;
    for (size_t i = 0; i < ls->n; i++) {
        const char *l = ls->l[i];
        if (strncmp(l, "remotes:", 8)) continue;
        const char *r = l + 8;
        while (*r == ' ') r++;
        if (*r && *r != '#') continue; /* "remotes: {...}": flow style, not ours to edit */
        *hdr = i;
        size_t j = i + 1;
        while (j < ls->n && indent_of(ls->l[j]) != 0) j++;
        while (j > i + 1 && indent_of(ls->l[j - 1]) < 0) j--; /* trailing blanks belong to what follows */
        *end = j;
        return;
    }
}

/* value as a double-quoted YAML scalar, appended. */
static mr_status put_quoted(mr_buf *b, const char *v)
{
    mr_status rc = mr_buf_puts(b, "\"");
    for (const char *p = v; rc == MR_OK && *p; p++)
        rc = *p == '"' || *p == '\\' ? mr_buf_printf(b, "\\%c", *p) : mr_buf_append(b, p, 1);
    return rc == MR_OK ? mr_buf_puts(b, "\"") : rc;
}

/* Writes lines ls (with extra inserted before line at) to path after checking that it still loads. */
static mr_status write_checked(const char *path, const lines *ls, size_t skip_b, size_t skip_e, size_t at_line,
                               const char *insert, mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = MR_OK;
    for (size_t i = 0; rc == MR_OK && i <= ls->n; i++) {
        if (i == at_line && insert) rc = mr_buf_puts(&b, insert);
        if (i == ls->n || (i >= skip_b && i < skip_e)) continue;
        if (rc == MR_OK) rc = mr_buf_printf(&b, "%s\n", ls->l[i]);
    }
    if (rc != MR_OK) {
        mr_buf_free(&b);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_spec *spec = NULL;
    mr_error pe;
    mr_error_init(&pe);
    rc = mr_spec_parse(b.data ? b.data : "", b.len, path, NULL, 0, &spec, &pe);
    mr_spec_free(spec);
    if (rc != MR_OK) {
        char msg[700];
        mr_error_format(&pe, msg, sizeof(msg));
        rc = MR_ERR(err, MR_E_STATE, "%s would not load after the edit (%s); left as it is", path, msg);
    } else {
        rc = mr_fs_write_atomic(path, b.data, b.len, err);
    }
    mr_buf_free(&b);
    return rc;
}

mr_status mr_remote_add(const char *spec_path, const char *name, const char *url, const char *endpoint,
                        const char *region, int make_default, mr_error *err)
{
    if (!name_ok(name)) return MR_ERR(err, MR_E_INVALID_ARG, "remote name '%s': letters, digits, '_' and '-' only", name ? name : "");
    if (!url_ok(url)) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "'%s': expected s3://BUCKET[/PREFIX] or file:///PATH", url ? url : "");
        mr_error_hint(err, "bucket names have 3 to 63 lower-case letters, digits, '-' and '.'");
        return rc;
    }
    if (endpoint && strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
        return MR_ERR(err, MR_E_INVALID_ARG, "--endpoint '%s': expected http[s]://HOST[:PORT]", endpoint);
    mr_spec *spec = NULL;
    mr_status rc = mr_spec_load(spec_path, NULL, 0, &spec, err);
    if (rc != MR_OK) return rc;
    int exists = mr_value_get(mr_value_get(spec->root, "remotes"), name) != NULL;
    mr_spec_free(spec);
    if (exists) {
        rc = MR_ERR(err, MR_E_STATE, "remote '%s' exists already in %s", name, spec_path);
        mr_error_hint(err, "millrace remote remove %s, then add it again", name);
        return rc;
    }
    char *text = NULL;
    size_t len = 0;
    rc = mr_fs_read_file(spec_path, (size_t)64 << 20, &text, &len, err);
    lines ls;
    memset(&ls, 0, sizeof(ls));
    if (rc == MR_OK && lines_split(text, len, &ls) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_free(text);
    size_t hdr = 0, end = 0;
    if (rc == MR_OK) find_block(&ls, &hdr, &end);
    mr_buf ins;
    mr_buf_init(&ins);
    if (rc == MR_OK) {
        mr_status b = hdr == ls.n ? mr_buf_puts(&ins, "\nremotes:\n") : MR_OK;
        if (b == MR_OK) b = mr_buf_printf(&ins, "  %s:\n    url: ", name);
        if (b == MR_OK) b = put_quoted(&ins, url);
        if (b == MR_OK && endpoint) b = mr_buf_puts(&ins, "\n    endpoint: ");
        if (b == MR_OK && endpoint) b = put_quoted(&ins, endpoint);
        if (b == MR_OK && region) b = mr_buf_puts(&ins, "\n    region: ");
        if (b == MR_OK && region) b = put_quoted(&ins, region);
        if (b == MR_OK && make_default) b = mr_buf_puts(&ins, "\n    default: true");
        if (b == MR_OK) b = mr_buf_puts(&ins, "\n");
        if (b != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    /* a new default: the old one's `default: true` line goes */
    size_t drop_b = ls.n, drop_e = ls.n;
    for (size_t i = hdr + 1; rc == MR_OK && make_default && hdr < ls.n && i < end; i++) {
        const char *l = ls.l[i] + (indent_of(ls.l[i]) > 0 ? indent_of(ls.l[i]) : 0);
        if (!strncmp(l, "default:", 8) && strstr(l, "true")) drop_b = i, drop_e = i + 1;
    }
    if (rc == MR_OK) rc = write_checked(spec_path, &ls, drop_b, drop_e, hdr == ls.n ? ls.n : end, ins.data, err);
    mr_buf_free(&ins);
    lines_free(&ls);
    return rc;
}

mr_status mr_remote_remove(const char *spec_path, const char *name, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(spec_path, (size_t)64 << 20, &text, &len, err);
    if (rc != MR_OK) return rc;
    lines ls;
    if (lines_split(text, len, &ls) != MR_OK) {
        mr_free(text);
        lines_free(&ls);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_free(text);
    size_t hdr, end, b = ls.n, e = ls.n;
    find_block(&ls, &hdr, &end);
    int child = -1;
    for (size_t i = hdr + 1; hdr < ls.n && i < end; i++) {
        int in = indent_of(ls.l[i]);
        if (in < 0) continue;
        if (child < 0) child = in;
        if (in == child) {
            if (b < ls.n) {
                e = i;
                break;
            }
            size_t nl = strlen(name);
            if (!strncmp(ls.l[i] + in, name, nl) && ls.l[i][in + nl] == ':') b = i, e = end;
        }
    }
    if (b == ls.n) {
        lines_free(&ls);
        return MR_ERR(err, MR_E_NOT_FOUND, "no remote '%s' in %s", name, spec_path);
    }
    /* the last remote: the section goes too */
    int others = 0;
    for (size_t i = hdr + 1; i < end; i++)
        if ((i < b || i >= e) && indent_of(ls.l[i]) == child) others = 1;
    if (!others) b = hdr, e = end;
    rc = write_checked(spec_path, &ls, b, e, ls.n + 1, NULL, err);
    lines_free(&ls);
    return rc;
}

/* ---- the remote's storage: S3 or a directory ---------------------------------------------------- */

typedef struct backend {
    int is_s3;
    char bucket[64];
    char prefix[1024];   /* s3: "" or "p/"; file: the directory, with a trailing slash */
    mr_s3_opts so;
    char where[1200];    /* the url, for messages */
} backend;

typedef struct conn {
    const backend *b;
    mr_s3 *s3;
} conn;

static mr_status backend_open(const remote_def *r, backend *b, mr_error *err)
{
    memset(b, 0, sizeof(*b));
    snprintf(b->where, sizeof(b->where), "%s", r->url);
    mr_s3_opts_init(&b->so);
    if (!strncmp(r->url, "s3://", 5)) {
        char p[1000];
        mr_status rc = mr_s3_parse_url(r->url, b->bucket, sizeof(b->bucket), p, sizeof(p), err);
        if (rc != MR_OK) return rc;
        b->is_s3 = 1;
        snprintf(b->prefix, sizeof(b->prefix), "%s%s", p, p[0] ? "/" : "");
        b->so.endpoint = r->endpoint;
        b->so.region = r->region;
        return MR_OK;
    }
    const char *dir = r->url + 7; /* file:///x -> /x */
    snprintf(b->prefix, sizeof(b->prefix), "%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/");
    return MR_OK;
}

static mr_status conn_open(const backend *b, conn *c, mr_error *err)
{
    c->b = b;
    c->s3 = NULL;
    return b->is_s3 ? mr_s3_open(b->bucket, &b->so, &c->s3, err) : MR_OK;
}

static void conn_close(conn *c)
{
    mr_s3_close(c->s3);
    c->s3 = NULL;
}

/* The remote's name for key: an S3 key under the prefix, or a path under the directory. Caller frees. */
static char *rkey(const backend *b, const char *key) { return mr_asprintf("%s%s", b->prefix, key); }

/* A file put in place whole: written in the remote's tmp/ (what a killed
 * push leaves is there, never among the objects), fsynced, renamed. */
static mr_status file_put(const char *root, const char *dst, const char *src, const void *data, size_t n, mr_error *err)
{
    static atomic_uint seq;
    char *dir = mr_strdup(dst);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    char *tdir = mr_asprintf("%stmp", root);
    if (!slash || !tdir) {
        mr_free(dir);
        mr_free(tdir);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    *slash = 0;
    mr_status rc = mr_fs_mkdirs(dir, err);
    if (rc == MR_OK) rc = mr_fs_mkdirs(tdir, err);
    char *tmp = mr_asprintf("%s/%s.%ld.%u", tdir, slash + 1, (long)getpid(), atomic_fetch_add(&seq, 1));
    mr_free(dir);
    mr_free(tdir);
    if (rc == MR_OK && !tmp) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        unlink(tmp);
        rc = src ? mr_fs_copy_file(src, tmp, err) : mr_fs_write_atomic(tmp, data, n, err);
    }
    if (rc == MR_OK) rc = mr_fs_fsync_path(tmp, err);
    if (rc == MR_OK && rename(tmp, dst) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", dst);
    if (rc == MR_OK) rc = mr_fs_fsync_dir_of(dst, err);
    if (rc != MR_OK && tmp) unlink(tmp);
    mr_free(tmp);
    return rc;
}

static mr_status r_put_file(conn *c, const char *key, const char *path, mr_error *err)
{
    char *k = rkey(c->b, key);
    if (!k) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = c->s3 ? mr_s3_put_file(c->s3, k, path, err) : file_put(c->b->prefix, k, path, NULL, 0, err);
    mr_free(k);
    return rc;
}

static mr_status r_put(conn *c, const char *key, const char *data, size_t n, mr_error *err)
{
    char *k = rkey(c->b, key);
    if (!k) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = c->s3 ? mr_s3_put(c->s3, k, data, n, err) : file_put(c->b->prefix, k, NULL, data, n, err);
    mr_free(k);
    return rc;
}

static mr_status r_get_file(conn *c, const char *key, const char *path, mr_error *err)
{
    char *k = rkey(c->b, key);
    if (!k) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc;
    if (c->s3) {
        rc = mr_s3_get_file(c->s3, k, path, err);
    } else if (!mr_fs_exists(k)) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "%s: not on the remote", k);
    } else {
        rc = mr_fs_copy_file(k, path, err);
        if (rc == MR_OK) rc = mr_fs_fsync_path(path, err);
    }
    mr_free(k);
    return rc;
}

static mr_status r_get(conn *c, const char *key, char **data, size_t *len, mr_error *err)
{
    *data = NULL;
    *len = 0;
    char *k = rkey(c->b, key);
    if (!k) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc;
    if (c->s3) {
        mr_buf b;
        mr_buf_init(&b);
        rc = mr_s3_get(c->s3, k, 0, 0, &b, err);
        if (rc == MR_OK && mr_buf_append(&b, "", 1) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK) {
            *data = b.data;
            *len = b.len - 1;
        } else {
            mr_buf_free(&b);
        }
    } else if (!mr_fs_exists(k)) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "%s: not on the remote", k);
    } else {
        rc = mr_fs_read_file(k, (size_t)256 << 20, data, len, err);
    }
    mr_free(k);
    return rc;
}

/* Names from one listing of the remote (object ids, or stage keys), sorted. */
typedef struct idset {
    char **ids;
    uint64_t *sizes; /* a listing of objects/: each object's size, in the order of ids */
    size_t n, cap;
    int failed;
} idset;

/* Appends the first len bytes of name to s (s->failed on OOM). 0, or 1 when it failed. */
static int idset_push(idset *s, const char *name, size_t len)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 256;
        char **ni = mr_realloc(s->ids, nc * sizeof(*ni));
        if (ni) s->ids = ni;
        uint64_t *ns = ni ? mr_realloc(s->sizes, nc * sizeof(*ns)) : NULL;
        if (!ns) {
            s->failed = 1;
            return 1;
        }
        s->sizes = ns;
        s->cap = nc;
    }
    s->sizes[s->n] = 0;
    s->ids[s->n] = mr_asprintf("%.*s", (int)len, name);
    if (!s->ids[s->n]) {
        s->failed = 1;
        return 1;
    }
    s->n++;
    return 0;
}

/* A listing's key under objects/: its artifact id (stray keys are skipped). */
static int idset_add(void *arg, const char *key, uint64_t size)
{
    (void)size;
    const char *slash = strrchr(key, '/');
    const char *id = slash ? slash + 1 : key;
    mr_artifact a;
    if (mr_artifact_parse(id, &a) != MR_OK) return 0; /* a stray key: not an object */
    idset *s = arg;
    if (idset_push(s, id, strlen(id))) return 1;
    s->sizes[s->n - 1] = size;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int idset_has(const idset *s, const char *id)
{
    const char *key = id;
    return s->n && bsearch(&key, s->ids, s->n, sizeof(*s->ids), cmp_str) != NULL;
}

/* 1 when the listing holds id with this size. */
static int idset_has_sized(const idset *s, const char *id, uint64_t size)
{
    const char *key = id;
    char **at = s->n ? bsearch(&key, s->ids, s->n, sizeof(*s->ids), cmp_str) : NULL;
    return at && s->sizes[at - s->ids] == size;
}

static void idset_free(idset *s)
{
    for (size_t i = 0; i < s->n; i++) mr_free(s->ids[i]);
    mr_free(s->ids);
    mr_free(s->sizes);
    memset(s, 0, sizeof(*s));
}

typedef struct sized_id {
    char *id;
    uint64_t size;
} sized_id;

static int cmp_sized(const void *a, const void *b)
{
    return strcmp(((const sized_id *)a)->id, ((const sized_id *)b)->id);
}

/* Sorts ids, their sizes with them. */
static mr_status idset_sort(idset *s)
{
    if (s->n < 2) return MR_OK;
    sized_id *v = mr_malloc(s->n * sizeof(*v));
    if (!v) return MR_E_NOMEM;
    for (size_t i = 0; i < s->n; i++) v[i] = (sized_id){s->ids[i], s->sizes[i]};
    qsort(v, s->n, sizeof(*v), cmp_sized);
    for (size_t i = 0; i < s->n; i++) {
        s->ids[i] = v[i].id;
        s->sizes[i] = v[i].size;
    }
    mr_free(v);
    return MR_OK;
}

/* Lists the remote's dir/ (one listing: no request per object), each key through fn into out. */
static mr_status r_list(conn *c, const char *dir, mr_s3_list_fn fn, idset *out, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    mr_status rc = MR_OK;
    char *k = mr_asprintf("%s%s/", c->b->prefix, dir);
    if (!k) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (c->s3) {
        rc = mr_s3_list(c->s3, k, fn, out, err);
    } else {
        DIR *d = opendir(k);
        for (struct dirent *de; d && (de = readdir(d));) {
            struct stat sb;
            if (de->d_name[0] != '.')
                fn(out, de->d_name, fstatat(dirfd(d), de->d_name, &sb, 0) == 0 ? (uint64_t)sb.st_size : 0);
        }
        if (d) closedir(d);
    }
    mr_free(k);
    if (rc == MR_E_INTERRUPTED || out->failed) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK && idset_sort(out) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    return rc;
}

/* A listing's key under stages/: the stage key it holds the entry of, with
 * the entry's size (other names are skipped). */
static int entry_key_add(void *arg, const char *key, uint64_t size)
{
    const char *slash = strrchr(key, '/');
    const char *name = slash ? slash + 1 : key;
    if (strlen(name) != MR_HASH_HEX_LEN + 5 || strcmp(name + MR_HASH_HEX_LEN, ".json")) return 0;
    idset *s = arg;
    if (idset_push(s, name, MR_HASH_HEX_LEN)) return 1;
    s->sizes[s->n - 1] = size;
    return 0;
}

static mr_status r_list_objects(conn *c, idset *out, mr_error *err) { return r_list(c, "objects", idset_add, out, err); }

/* ---- parallel transfers ---------------------------------------------------------------------------- */

typedef struct task {
    char id[MR_ARTIFACT_ID_LEN];
    char *src;   /* push: the local object's path; pull: the download's temporary path */
    uint64_t size;
} task;

typedef struct pool_run {
    const backend *b;
    task *tasks;
    size_t n;
    int pull;
    mr_store *store;   /* pull: where downloads are adopted */
    atomic_size_t next;
    atomic_int failed;
    atomic_uint_fast64_t bytes;
    atomic_size_t done;     /* objects transferred */
    atomic_size_t finished; /* workers that have returned */
    pthread_mutex_t mu;
    mr_status rc;
    mr_error err;
} pool_run;

static void *pool_worker(void *arg)
{
    pool_run *p = arg;
    conn c;
    mr_error e;
    mr_error_init(&e);
    mr_status rc = conn_open(p->b, &c, &e);
    while (rc == MR_OK && !atomic_load(&p->failed)) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        task *t = &p->tasks[i];
        char key[64];
        snprintf(key, sizeof(key), "objects/%s", t->id);
        if (!p->pull) {
            rc = r_put_file(&c, key, t->src, &e);
        } else {
            rc = r_get_file(&c, key, t->src, &e);
            mr_artifact a;
            if (rc == MR_OK && mr_artifact_parse(t->id, &a) != MR_OK) rc = MR_ERR(&e, MR_E_CORRUPT, "bad id %s", t->id);
            if (rc == MR_OK) {
                rc = mr_store_adopt(p->store, t->src, &a, &e); /* verified against its id, or refused */
                if (rc == MR_E_CORRUPT) mr_error_hint(&e, "the remote's copy of %s is corrupt: push it again from a good store", t->id);
            }
            if (rc != MR_OK) unlink(t->src);
        }
        if (rc == MR_OK) {
            atomic_fetch_add(&p->bytes, t->size);
            atomic_fetch_add(&p->done, 1);
        }
    }
    conn_close(&c);
    if (rc != MR_OK) {
        pthread_mutex_lock(&p->mu);
        if (p->rc == MR_OK) {
            p->rc = rc;
            p->err = e;
        }
        pthread_mutex_unlock(&p->mu);
        atomic_store(&p->failed, 1);
    }
    atomic_fetch_add(&p->finished, 1);
    return NULL;
}

/* Transfers tasks[0, n) on up to jobs connections. label: a live progress
 * line (bytes, rate, ETA; the objects in its detail) under that name, or
 * NULL for none (a stage worker's transfers). */
static mr_status run_pool(const backend *b, task *tasks, size_t n, int jobs, int pull, mr_store *store, uint64_t *bytes,
                          const char *label, mr_error *err)
{
    if (!n) return MR_OK;
    pool_run p = {.b = b, .tasks = tasks, .n = n, .pull = pull, .store = store};
    atomic_init(&p.next, 0);
    atomic_init(&p.failed, 0);
    atomic_init(&p.bytes, 0);
    atomic_init(&p.done, 0);
    atomic_init(&p.finished, 0);
    pthread_mutex_init(&p.mu, NULL);
    mr_error_init(&p.err);
    size_t nt = (size_t)(jobs > 0 ? jobs : 8);
    if (nt > n) nt = n;
    pthread_t *th = mr_calloc(nt, sizeof(*th));
    size_t started = 0;
    for (size_t i = 0; th && i < nt; i++)
        if (pthread_create(&th[i], NULL, pool_worker, &p) == 0) started++;
    if (!started) pool_worker(&p); /* no threads: on this one */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += tasks[i].size;
    mr_progress *pr = label && started ? mr_progress_begin(label, total, "B") : NULL;
    while (pr && atomic_load(&p.finished) < started) {
        char detail[64];
        snprintf(detail, sizeof(detail), "%zu of %zu objects", (size_t)atomic_load(&p.done), n);
        mr_progress_update(pr, atomic_load(&p.bytes), detail);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    char detail[64];
    snprintf(detail, sizeof(detail), "%zu of %zu objects", (size_t)atomic_load(&p.done), n);
    if (pr) mr_progress_update(pr, atomic_load(&p.bytes), detail);
    mr_progress_end(pr, pr ? detail : NULL);
    for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
    mr_free(th);
    pthread_mutex_destroy(&p.mu);
    *bytes += atomic_load(&p.bytes);
    if (p.rc != MR_OK && err) *err = p.err;
    return p.rc;
}

/* ---- push ------------------------------------------------------------------------------------------------- */

void mr_transfer_opts_init(mr_transfer_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->jobs = 8;
}

/* The stages to transfer: those asked for (each must be in the lock), or all the lock has. */
static mr_status chosen_stages(const mr_value *lock, const mr_transfer_opts *o, const char ***out, size_t *n_out,
                               mr_error *err)
{
    const mr_value *ls = mr_value_get(lock, "stages");
    size_t n = o->stages ? o->n_stages : ls ? ls->n : 0;
    const char **names = mr_calloc(n ? n : 1, sizeof(*names));
    if (!names) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        names[i] = o->stages ? o->stages[i] : ls->keys[i];
        if (!mr__lock_stage_key(lock, names[i])) {
            mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "stage '%s' has no result in millrace.lock", names[i]);
            mr_error_hint(err, "run it first (millrace run %s)", names[i]);
            mr_free(names);
            return rc;
        }
    }
    *out = names;
    *n_out = n;
    return MR_OK;
}

static int cmp_task(const void *a, const void *b) { return strcmp(((const task *)a)->id, ((const task *)b)->id); }

/* Adds artifact a (and, a directory, the files it lists) to the tasks, each id once. */
static mr_status add_objects(mr_store *st, const mr_artifact *a, task **files, size_t *nf, task **mans, size_t *nm,
                             size_t *cap_f, size_t *cap_m, mr_error *err)
{
    mr_artifact *kids = NULL;
    size_t nk = 0;
    if (a->is_dir) {
        mr_status rc = mr_store_dir_children(st, a, &kids, &nk, err);
        if (rc != MR_OK) return rc;
    }
    mr_status rc = MR_OK;
    for (size_t i = 0; rc == MR_OK && i <= nk; i++) {
        const mr_artifact *x = i < nk ? &kids[i] : a;
        int man = x->is_dir;
        task **arr = man ? mans : files;
        size_t *n = man ? nm : nf, *cap = man ? cap_m : cap_f;
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 64;
            task *na = mr_realloc(*arr, nc * sizeof(*na));
            if (!na) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                break;
            }
            *arr = na;
            *cap = nc;
        }
        task *t = &(*arr)[*n];
        memset(t, 0, sizeof(*t));
        mr_artifact_id(x, t->id);
        t->size = x->is_dir ? 0 : x->size;
        t->src = mr_store_object_path(st, x);
        struct stat sb;
        if (t->src && x->is_dir && stat(t->src, &sb) == 0) t->size = (uint64_t)sb.st_size; /* the manifest file's */
        if (!t->src) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else if (!mr_store_has(st, x)) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "object %s is not in the local store", t->id);
            mr_error_hint(err, "gc may have removed it: run the stage again, then push");
            mr_free(t->src);
        } else
            (*n)++;
    }
    mr_free(kids);
    return rc;
}

static void tasks_free(task *t, size_t n)
{
    for (size_t i = 0; i < n; i++) mr_free(t[i].src);
    mr_free(t);
}

/* Sorted, each id once (the first kept), and without what the remote has:
 * an object listed with another size than ours (a partial upload a
 * service kept) goes again. */
static size_t tasks_dedup(task *t, size_t n, const idset *have, uint64_t *present)
{
    if (!n) return 0;
    qsort(t, n, sizeof(*t), cmp_task);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if ((o && !strcmp(t[o - 1].id, t[i].id)) || (have && idset_has_sized(have, t[i].id, t[i].size))) {
            if (!(o && !strcmp(t[o - 1].id, t[i].id))) (*present)++;
            mr_free(t[i].src);
            continue;
        }
        t[o++] = t[i];
    }
    return o;
}

static void human_bytes(uint64_t b, char *out, size_t n)
{
    if (b >= (uint64_t)1 << 30) snprintf(out, n, "%.1f GB", (double)b / (1 << 30));
    else if (b >= (uint64_t)1 << 20) snprintf(out, n, "%.1f MB", (double)b / (1 << 20));
    else if (b >= 1024) snprintf(out, n, "%.1f KB", (double)b / 1024);
    else snprintf(out, n, "%llu bytes", (unsigned long long)b);
}

/* The objects a stage's outputs (a JSON object of name -> id) consist of, added to the push tasks. */
typedef struct push_set {
    task *files, *mans;
    size_t nf, nm, cf, cm;
} push_set;

static void push_set_free(push_set *ps)
{
    tasks_free(ps->files, ps->nf);
    tasks_free(ps->mans, ps->nm);
    memset(ps, 0, sizeof(*ps));
}

static mr_status push_collect(mr_workspace *ws, json_t *outs, push_set *ps, mr_error *err)
{
    const char *name;
    json_t *v;
    mr_status rc = MR_OK;
    json_object_foreach(outs, name, v)
    {
        mr_artifact a;
        if (rc != MR_OK || !json_is_string(v) || mr_artifact_parse(json_string_value(v), &a) != MR_OK) continue;
        rc = add_objects(ws->store, &a, &ps->files, &ps->nf, &ps->mans, &ps->nm, &ps->cf, &ps->cm, err);
    }
    return rc;
}

/* Uploads what the remote lacks of ps: the files, then the manifests (each phase finished before the next). */
static mr_status push_objects(conn *c, const backend *b, push_set *ps, int jobs, const char *label,
                              mr_transfer_stats *stats, mr_error *err)
{
    idset have = {0};
    mr_status rc = r_list_objects(c, &have, err);
    if (rc == MR_OK) {
        ps->nf = tasks_dedup(ps->files, ps->nf, &have, &stats->present);
        ps->nm = tasks_dedup(ps->mans, ps->nm, &have, &stats->present);
    }
    idset_free(&have);
    if (rc == MR_OK) rc = run_pool(b, ps->files, ps->nf, jobs, 0, NULL, &stats->bytes, label, err);
    if (rc == MR_OK) rc = run_pool(b, ps->mans, ps->nm, jobs, 0, NULL, &stats->bytes, NULL, err);
    if (rc == MR_OK) stats->objects += ps->nf + ps->nm;
    return rc;
}

/* A stage entry's JSON text. Caller frees. */
static char *entry_text(const char *stage, const char *key, const char *op, int64_t op_version, json_t *outs,
                        const char *metrics_json, const char *key_doc)
{
    json_t *j = json_object();
    json_t *m = metrics_json ? json_loads(metrics_json, 0, NULL) : NULL;
    json_object_set_new(j, "format", json_string("millrace-remote-stage/1"));
    json_object_set_new(j, "stage", json_string(stage));
    json_object_set_new(j, "key", json_string(key));
    json_object_set_new(j, "op", json_string(op ? op : ""));
    json_object_set_new(j, "op_version", json_integer(op_version));
    json_object_set_new(j, "outputs", json_deep_copy(outs));
    json_object_set_new(j, "metrics", m ? m : json_array());
    json_object_set_new(j, "key_doc", key_doc ? json_string(key_doc) : json_null());
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    char *copy = text ? mr_strdup(text) : NULL;
    free(text);
    return copy;
}

static mr_status put_entry(conn *c, const char *key, const char *text, mr_error *err)
{
    char ek[80];
    snprintf(ek, sizeof(ek), "stages/%s.json", key);
    return text ? r_put(c, ek, text, strlen(text), err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
}

/* The lock's outputs of a stage as a JSON object. */
static json_t *lock_outputs(const mr_value *st)
{
    json_t *outs = json_object();
    const mr_value *o = mr_value_get(st, "outputs");
    for (size_t i = 0; outs && o && o->kind == MR_V_MAP && i < o->n; i++)
        if (o->items[i]->kind == MR_V_STR) json_object_set_new(outs, o->keys[i], json_string(o->items[i]->str));
    return outs;
}

/* What push and pull begin with: the options (the defaults for NULL), the stats (zeroed; a local
 * copy for NULL), the remote found and its storage opened. */
static mr_status transfer_begin(const mr_spec *spec, const mr_transfer_opts **o, mr_transfer_opts *d,
                                mr_transfer_stats **stats, mr_transfer_stats *local, remote_def *r, backend *b,
                                mr_error *err)
{
    if (!*o) {
        mr_transfer_opts_init(d);
        *o = d;
    }
    if (!*stats) *stats = local;
    memset(*stats, 0, sizeof(**stats));
    mr_status rc = find_remote(spec, (*o)->remote, r, err);
    return rc == MR_OK ? backend_open(r, b, err) : rc;
}

mr_status mr_pipeline_push(mr_workspace *ws, const mr_spec *spec, const mr_transfer_opts *o, mr_transfer_stats *stats,
                           mr_buf *out, mr_error *err)
{
    mr_transfer_opts d;
    mr_transfer_stats local;
    remote_def r;
    backend b;
    mr_status rc = transfer_begin(spec, &o, &d, &stats, &local, &r, &b, err);
    if (rc != MR_OK) return rc;
    mr_value *lock = NULL;
    const char **names = NULL;
    size_t n = 0;
    push_set ps = {0};
    conn c = {0};
    json_t **outs = NULL;
    rc = mr__lock_read(ws, &lock, err);
    if (rc == MR_OK) rc = chosen_stages(lock, o, &names, &n, err);
    const mr_value *lstages = mr_value_get(lock, "stages");
    if (rc == MR_OK && !(outs = mr_calloc(n ? n : 1, sizeof(*outs)))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        outs[i] = lock_outputs(mr_value_get(lstages, names[i]));
        rc = outs[i] ? push_collect(ws, outs[i], &ps, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) rc = conn_open(&b, &c, err);
    /* the files, then the manifests that list them, then the entries that name them */
    if (rc == MR_OK) rc = push_objects(&c, &b, &ps, o->jobs, "push", stats, err);
    idset have = {0}; /* the entries there already: one listing, not a PUT per unchanged entry */
    if (rc == MR_OK) rc = r_list(&c, "stages", entry_key_add, &have, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        const mr_value *st = mr_value_get(lstages, names[i]);
        const char *key = mr__lock_stage_key(lock, names[i]);
        const mr_value *op = mr_value_get(st, "op"), *ov = mr_value_get(st, "op_version");
        char *mets = NULL, *doc = NULL;
        (void)mr_runstore_cache_get(ws->rs, key, NULL, &mets, &doc, NULL);
        char *text = entry_text(names[i], key, op && op->kind == MR_V_STR ? op->str : "",
                                ov && ov->kind == MR_V_INT ? ov->u.i : 0, outs[i], mets, doc);
        /* an entry of this key at this size is this entry (a short one, from a
         * killed PUT a service kept, is written again) */
        int there = text && key && idset_has_sized(&have, key, strlen(text));
        rc = there ? MR_OK : put_entry(&c, key, text, err);
        mr_free(text);
        mr_free(mets);
        mr_free(doc);
        if (rc == MR_OK) stats->stages++;
        if (rc == MR_OK && !there) stats->stages_written++;
    }
    idset_free(&have);
    if (rc == MR_OK && out) {
        char hb[32];
        human_bytes(stats->bytes, hb, sizeof(hb));
        rc = mr_buf_printf(out,
                           "push to %s (%s): %llu objects (%s) uploaded, %llu already there; %llu stage results (%llu "
                           "written)\n",
                           r.name, b.where, (unsigned long long)stats->objects, hb, (unsigned long long)stats->present,
                           (unsigned long long)stats->stages, (unsigned long long)stats->stages_written) == MR_OK
                 ? MR_OK
                 : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; outs && i < n; i++) json_decref(outs[i]);
    mr_free(outs);
    conn_close(&c);
    push_set_free(&ps);
    mr_free(names);
    mr_value_free(lock);
    return rc;
}

/* ---- pull ----------------------------------------------------------------------------------------------------- */

/* Checks out the stage's outputs where the plan puts them (a path already holding that artifact is left alone). */
static mr_status checkout_stage(mr_workspace *ws, const mr_dag *dag, size_t idx, json_t *outs, mr_error *err)
{
    mr__plan p;
    memset(&p, 0, sizeof(p));
    mr_status rc = mr__plan_outputs(dag, idx, &p, err);
    for (size_t k = 0; rc == MR_OK && k < p.n_outs; k++) {
        const char *id = json_string_value(json_object_get(outs, p.outs[k].name));
        mr_artifact a;
        if (!id || mr_artifact_parse(id, &a) != MR_OK) continue;
        char *dest = mr_path_join(ws->root, p.outs[k].path);
        if (!dest) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        mr_artifact cur;
        const char *one[1] = {dest};
        char cid[MR_ARTIFACT_ID_LEN] = "";
        if (mr_fs_exists(dest) && mr_store_hash_paths(ws->store, ws->sc, one, 1, &cur, NULL, NULL) == MR_OK)
            mr_artifact_id(&cur, cid);
        if (strcmp(cid, id)) {
            char *tmp = mr_asprintf("%s.mr-pull-%ld", dest, (long)getpid());
            rc = tmp ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (rc == MR_OK) (void)mr_fs_rmtree(tmp, NULL);
            if (rc == MR_OK) rc = mr_store_checkout(ws->store, ws->sc, &a, tmp, err);
            if (rc == MR_OK) rc = mr_fs_swap_in(tmp, dest, err);
            if (rc != MR_OK && tmp) (void)mr_fs_rmtree(tmp, NULL);
            mr_free(tmp);
        }
        mr_free(dest);
    }
    mr__plan_free(&p);
    return rc;
}

typedef struct pull_set {
    task *files, *mans;
    size_t nf, nm, cf, cm;
    char *tmpdir;
} pull_set;

static void pull_set_free(pull_set *ps)
{
    for (size_t i = 0; i < ps->nf; i++) (void)unlink(ps->files[i].src);
    for (size_t i = 0; i < ps->nm; i++) (void)unlink(ps->mans[i].src);
    tasks_free(ps->files, ps->nf);
    tasks_free(ps->mans, ps->nm);
    mr_free(ps->tmpdir);
    memset(ps, 0, sizeof(*ps));
}

static task *pull_task(pull_set *ps, int man, const char *id, uint64_t size, mr_error *err)
{
    static atomic_uint seq;
    task **arr = man ? &ps->mans : &ps->files;
    size_t *n = man ? &ps->nm : &ps->nf, *cap = man ? &ps->cm : &ps->cf;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        task *na = mr_realloc(*arr, nc * sizeof(*na));
        if (!na) {
            MR_ERR(err, MR_E_NOMEM, "out of memory");
            return NULL;
        }
        *arr = na;
        *cap = nc;
    }
    task *t = &(*arr)[*n];
    memset(t, 0, sizeof(*t));
    snprintf(t->id, sizeof(t->id), "%s", id);
    t->size = size;
    t->src = mr_asprintf("%s/pull-%ld-%u", ps->tmpdir, (long)getpid(), atomic_fetch_add(&seq, 1));
    if (!t->src) {
        MR_ERR(err, MR_E_NOMEM, "out of memory");
        return NULL;
    }
    (*n)++;
    return t;
}

/* What the local store lacks of an entry's outputs: files to download, and manifests (fetched now, to learn their files). */
static mr_status pull_collect(mr_workspace *ws, conn *c, const backend *b, json_t *outs, pull_set *ps,
                              mr_transfer_stats *stats, mr_error *err)
{
    const char *name;
    json_t *v;
    mr_status rc = MR_OK;
    json_object_foreach(outs, name, v)
    {
        mr_artifact a;
        if (rc != MR_OK || !json_is_string(v) || mr_artifact_parse(json_string_value(v), &a) != MR_OK) continue;
        const char *id = json_string_value(v);
        if (mr_store_has(ws->store, &a)) {
            stats->present++;
            continue;
        }
        if (!a.is_dir) {
            if (!pull_task(ps, 0, id, 0, err)) rc = MR_E_NOMEM;
            continue;
        }
        char mk[64], *mdata = NULL;
        size_t mlen = 0;
        snprintf(mk, sizeof(mk), "objects/%s", id);
        rc = r_get(c, mk, &mdata, &mlen, err);
        if (rc == MR_OK) {
            mr_hash128 h = mr_hash_bytes(mdata, mlen);
            if (memcmp(&h, &a.hash, sizeof(h))) {
                char got[MR_HASH_HEX_LEN + 1];
                mr_hash_hex(h, got);
                rc = MR_ERR(err, MR_E_CORRUPT, "object %s on %s: its content hashes to %s", id, b->where, got);
                mr_error_hint(err, "the remote's copy is corrupt: push it again from a good store");
            }
        }
        mr_store_entry *es = NULL;
        size_t ne = 0;
        if (rc == MR_OK) rc = mr_store_manifest_parse(mdata, mlen, id, &es, &ne, err);
        for (size_t k = 0; rc == MR_OK && k < ne; k++) {
            if (mr_store_has(ws->store, &es[k].file)) continue;
            char cid[MR_ARTIFACT_ID_LEN];
            mr_artifact_id(&es[k].file, cid);
            if (!pull_task(ps, 0, cid, es[k].file.size, err)) rc = MR_E_NOMEM;
        }
        mr_store_entries_free(es, ne);
        task *t = rc == MR_OK ? pull_task(ps, 1, id, 0, err) : NULL;
        if (rc == MR_OK && !t) rc = MR_E_NOMEM;
        if (t) rc = mr_fs_write_atomic(t->src, mdata, mlen, err); /* adopted after its files */
        mr_free(mdata);
    }
    return rc;
}

/* Downloads the files (each verified as it is adopted), then adopts the manifests. */
static mr_status pull_objects(mr_workspace *ws, const backend *b, pull_set *ps, int jobs, const char *label,
                              mr_transfer_stats *stats, mr_error *err)
{
    ps->nf = tasks_dedup(ps->files, ps->nf, NULL, &stats->present);
    mr_status rc = run_pool(b, ps->files, ps->nf, jobs, 1, ws->store, &stats->bytes, label, err);
    if (rc == MR_OK) stats->objects += ps->nf;
    ps->nm = tasks_dedup(ps->mans, ps->nm, NULL, &stats->present);
    for (size_t i = 0; rc == MR_OK && i < ps->nm; i++) {
        mr_artifact a;
        mr_artifact_parse(ps->mans[i].id, &a);
        rc = mr_store_adopt(ws->store, ps->mans[i].src, &a, err);
        if (rc == MR_OK) stats->objects++;
    }
    return rc;
}

/* An entry of the remote: *entry NULL when it has none for key. */
static mr_status get_entry(conn *c, const backend *b, const char *key, json_t **entry, mr_error *err)
{
    *entry = NULL;
    char ek[80], *data = NULL;
    size_t len = 0;
    snprintf(ek, sizeof(ek), "stages/%s.json", key);
    mr_error ge;
    mr_error_init(&ge);
    mr_status g = r_get(c, ek, &data, &len, &ge);
    if (g == MR_E_NOT_FOUND) return MR_OK;
    if (g != MR_OK) {
        if (err) *err = ge;
        return g;
    }
    json_t *j = json_loadb(data, len, 0, NULL);
    mr_free(data);
    const char *ekey = json_string_value(json_object_get(j, "key"));
    if (!json_is_object(json_object_get(j, "outputs")) || !ekey || strcmp(ekey, key)) {
        json_decref(j);
        return MR_ERR(err, MR_E_CORRUPT, "%s%s: not a stage result of key %s", b->where, ek, key);
    }
    *entry = j;
    return MR_OK;
}

/* Records an entry in the local stage cache. */
static mr_status record_entry(mr_workspace *ws, const char *stage, const char *key, json_t *entry, mr_error *err)
{
    json_t *outs = json_object_get(entry, "outputs"), *mets = json_object_get(entry, "metrics");
    char *oj = json_dumps(outs, JSON_COMPACT | JSON_SORT_KEYS);
    char *mj = json_is_array(mets) ? json_dumps(mets, JSON_COMPACT) : strdup("[]");
    const char *doc = json_string_value(json_object_get(entry, "key_doc"));
    const char *op = json_string_value(json_object_get(entry, "op"));
    mr_status rc = oj && mj ? mr__cache_put(ws, key, stage, op ? op : "", doc ? doc : "", oj, mj, 0, err)
                            : MR_ERR(err, MR_E_NOMEM, "out of memory");
    free(oj);
    free(mj);
    return rc;
}

static mr_status pull_begin(mr_workspace *ws, pull_set *ps, mr_error *err)
{
    memset(ps, 0, sizeof(*ps));
    ps->tmpdir = mr_path_join(ws->dot, "tmp");
    return ps->tmpdir ? mr_fs_mkdirs(ps->tmpdir, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
}

mr_status mr_pipeline_pull(mr_workspace *ws, const mr_spec *spec, const mr_transfer_opts *o, mr_transfer_stats *stats,
                           mr_buf *out, mr_error *err)
{
    mr_transfer_opts d;
    mr_transfer_stats local;
    remote_def r;
    backend b;
    mr_status rc = transfer_begin(spec, &o, &d, &stats, &local, &r, &b, err);
    if (rc != MR_OK) return rc;
    mr_value *lock = NULL;
    const char **names = NULL;
    size_t n = 0;
    json_t **entries = NULL;
    pull_set ps;
    conn c = {0};
    mr_dag *dag = NULL;
    rc = pull_begin(ws, &ps, err);
    if (rc == MR_OK) rc = mr__lock_read(ws, &lock, err);
    if (rc == MR_OK) rc = chosen_stages(lock, o, &names, &n, err);
    if (rc == MR_OK && !(entries = mr_calloc(n ? n : 1, sizeof(*entries)))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = conn_open(&b, &c, err);
    /* each stage's entry, then what it names that the local store lacks */
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        rc = get_entry(&c, &b, mr__lock_stage_key(lock, names[i]), &entries[i], err);
        if (rc == MR_OK && !entries[i]) stats->missing++;
        if (rc == MR_OK && entries[i]) rc = pull_collect(ws, &c, &b, json_object_get(entries[i], "outputs"), &ps, stats, err);
    }
    if (rc == MR_OK) rc = pull_objects(ws, &b, &ps, o->jobs, "pull", stats, err);
    /* the stage results: into the stage cache, and checked out */
    if (rc == MR_OK) rc = mr_dag_build(spec, &dag, err);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        if (!entries[i]) continue;
        rc = record_entry(ws, names[i], mr__lock_stage_key(lock, names[i]), entries[i], err);
        size_t idx = spec->n_stages;
        for (size_t s = 0; s < spec->n_stages; s++)
            if (!strcmp(spec->stages[s].name, names[i])) idx = s;
        if (rc == MR_OK && idx < spec->n_stages) rc = checkout_stage(ws, dag, idx, json_object_get(entries[i], "outputs"), err);
        if (rc == MR_OK) stats->stages++;
    }
    if (rc == MR_OK && out) {
        char hb[32];
        human_bytes(stats->bytes, hb, sizeof(hb));
        rc = mr_buf_printf(out, "pull from %s (%s): %llu objects (%s) downloaded, %llu already here; %llu stage results",
                           r.name, b.where, (unsigned long long)stats->objects, hb, (unsigned long long)stats->present,
                           (unsigned long long)stats->stages) == MR_OK
                 ? MR_OK
                 : MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (rc == MR_OK)
            rc = (stats->missing ? mr_buf_printf(out, ", %llu not on the remote\n", (unsigned long long)stats->missing)
                                 : mr_buf_puts(out, "\n")) == MR_OK
                     ? MR_OK
                     : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_dag_free(dag);
    for (size_t i = 0; entries && i < n; i++) json_decref(entries[i]);
    mr_free(entries);
    conn_close(&c);
    pull_set_free(&ps);
    mr_free(names);
    mr_value_free(lock);
    return rc;
}

/* ---- the remote as a cache inside a run (the stage worker) ----------------------------------------------------- */

mr_status mr__remote_fetch(mr_workspace *ws, const mr_job_remote *jr, const char *stage, const char *key, int *hit,
                           mr_error *err)
{
    *hit = 0;
    remote_def r = {.name = "", .url = jr->url, .endpoint = jr->endpoint, .region = jr->region};
    backend b;
    mr_transfer_stats st = {0};
    pull_set ps;
    memset(&ps, 0, sizeof(ps));
    conn c = {0};
    json_t *entry = NULL;
    mr_status rc = backend_open(&r, &b, err);
    if (rc == MR_OK) rc = pull_begin(ws, &ps, err);
    if (rc == MR_OK) rc = conn_open(&b, &c, err);
    if (rc == MR_OK) rc = get_entry(&c, &b, key, &entry, err);
    if (rc == MR_OK && entry) rc = pull_collect(ws, &c, &b, json_object_get(entry, "outputs"), &ps, &st, err);
    if (rc == MR_OK && entry) rc = pull_objects(ws, &b, &ps, 8, NULL, &st, err);
    if (rc == MR_OK && entry) rc = record_entry(ws, stage, key, entry, err);
    if (rc == MR_OK && entry) *hit = 1;
    json_decref(entry);
    conn_close(&c);
    pull_set_free(&ps);
    return rc;
}

mr_status mr__remote_store(mr_workspace *ws, const mr_job_remote *jr, const char *stage, const char *op, int op_version,
                           const char *key, const char *outputs_json, const char *metrics_json, const char *key_doc,
                           mr_error *err)
{
    remote_def r = {.name = "", .url = jr->url, .endpoint = jr->endpoint, .region = jr->region};
    backend b;
    mr_transfer_stats st = {0};
    push_set ps = {0};
    conn c = {0};
    json_t *outs = json_loads(outputs_json ? outputs_json : "{}", 0, NULL);
    mr_status rc = outs ? backend_open(&r, &b, err) : MR_ERR(err, MR_E_CORRUPT, "the stage's outputs are not JSON");
    if (rc == MR_OK) rc = push_collect(ws, outs, &ps, err);
    if (rc == MR_OK) rc = conn_open(&b, &c, err);
    if (rc == MR_OK) rc = push_objects(&c, &b, &ps, 8, NULL, &st, err);
    if (rc == MR_OK) {
        char *text = entry_text(stage, key, op, op_version, outs, metrics_json, key_doc);
        rc = put_entry(&c, key, text, err);
        mr_free(text);
    }
    json_decref(outs);
    conn_close(&c);
    push_set_free(&ps);
    return rc;
}

/* ---- status --remote: which stale stages the remote can serve ---------------------------------------------------- */

struct mr__remote_probe {
    remote_def r;
    backend b;
    conn c;
};

mr_status mr__remote_probe_open(const mr_spec *spec, const char *name, mr__remote_probe **out, mr_error *err)
{
    *out = NULL;
    mr__remote_probe *p = mr_calloc(1, sizeof(*p));
    if (!p) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = find_remote(spec, name, &p->r, err);
    if (rc == MR_OK) rc = backend_open(&p->r, &p->b, err);
    if (rc == MR_OK) rc = conn_open(&p->b, &p->c, err);
    if (rc != MR_OK) {
        mr__remote_probe_close(p);
        return rc;
    }
    *out = p;
    return MR_OK;
}

const char *mr__remote_probe_name(const mr__remote_probe *p) { return p->r.name; }

mr_status mr__remote_probe_entry(mr__remote_probe *p, const char *key, char **outputs_json, mr_error *err)
{
    *outputs_json = NULL;
    json_t *entry = NULL;
    mr_status rc = get_entry(&p->c, &p->b, key, &entry, err);
    if (rc == MR_OK && entry) {
        char *t = json_dumps(json_object_get(entry, "outputs"), JSON_COMPACT | JSON_SORT_KEYS);
        *outputs_json = t ? mr_strdup(t) : NULL;
        free(t);
        if (!*outputs_json) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    json_decref(entry);
    return rc;
}

void mr__remote_probe_close(mr__remote_probe *p)
{
    if (!p) return;
    conn_close(&p->c);
    mr_free(p);
}

/* ---- gc --remote ---------------------------------------------------------------------------------------------------- */


static mr_status r_delete(conn *c, const char *key, mr_error *err)
{
    char *k = rkey(c->b, key);
    if (!k) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    if (c->s3) rc = mr_s3_delete(c->s3, k, err);
    else if (unlink(k) != 0 && errno != ENOENT) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot delete", k);
    mr_free(k);
    return rc;
}

/* Adds id (and, a manifest, the files it lists: from the local store, else the remote's copy) to the kept set. */
static mr_status keep_add(mr_workspace *ws, conn *c, const char *id, idset *kept, mr_error *err)
{
    mr_artifact a;
    if (mr_artifact_parse(id, &a) != MR_OK) return MR_OK;
    if (idset_add(kept, id, 0)) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (!a.is_dir) return MR_OK;
    mr_store_entry *es = NULL;
    size_t n = 0;
    mr_status rc = MR_OK;
    if (mr_store_has(ws->store, &a)) {
        rc = mr_store_dir_entries(ws->store, &a, &es, &n, err);
    } else {
        char mk[64], *data = NULL;
        size_t len = 0;
        snprintf(mk, sizeof(mk), "objects/%s", id);
        mr_error ge;
        mr_error_init(&ge);
        mr_status g = r_get(c, mk, &data, &len, &ge);
        if (g == MR_E_NOT_FOUND) return MR_OK; /* not on the remote: nothing of it to keep */
        if (g != MR_OK) {
            if (err) *err = ge;
            return g;
        }
        rc = mr_store_manifest_parse(data, len, id, &es, &n, err);
        mr_free(data);
    }
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        char cid[MR_ARTIFACT_ID_LEN];
        mr_artifact_id(&es[i].file, cid);
        if (idset_add(kept, cid, 0)) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_store_entries_free(es, n);
    return rc;
}

mr_status mr__remote_gc(mr_workspace *ws, const mr_spec *spec, const char *name, const char *const *keep, size_t n_keep,
                        int dry_run, int json, mr_buf *out, mr_error *err)
{
    remote_def r;
    backend b;
    conn c = {0};
    idset kept = {0}, have = {0}, entries = {0};
    mr_status rc = find_remote(spec, name, &r, err);
    if (rc == MR_OK) rc = backend_open(&r, &b, err);
    if (rc == MR_OK) rc = conn_open(&b, &c, err);
    for (size_t i = 0; rc == MR_OK && i < n_keep; i++) rc = keep_add(ws, &c, keep[i], &kept, err);
    if (rc == MR_OK && kept.n) qsort(kept.ids, kept.n, sizeof(*kept.ids), cmp_str);
    if (rc == MR_OK) rc = r_list(&c, "stages", entry_key_add, &entries, err);
    if (rc == MR_OK) rc = r_list_objects(&c, &have, err);
    /* 1. the entries that name anything not kept, 2. the manifests not kept, 3. the files not kept */
    uint64_t n_entries = 0, n_objects = 0, n_kept = 0;
    for (size_t i = 0; rc == MR_OK && i < entries.n; i++) {
        json_t *e = NULL;
        rc = get_entry(&c, &b, entries.ids[i], &e, err);
        if (rc != MR_OK || !e) continue;
        int all = 1;
        const char *on;
        json_t *v;
        json_object_foreach(json_object_get(e, "outputs"), on, v) all = all && json_is_string(v) && idset_has(&kept, json_string_value(v));
        json_decref(e);
        if (all) continue;
        char ek[80];
        snprintf(ek, sizeof(ek), "stages/%s.json", entries.ids[i]);
        if (!dry_run) rc = r_delete(&c, ek, err);
        n_entries++;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; rc == MR_OK && i < have.n; i++) {
            int man = strlen(have.ids[i]) > MR_HASH_HEX_LEN;
            if (man != (pass == 0)) continue;
            if (idset_has(&kept, have.ids[i])) {
                n_kept++;
                continue;
            }
            char ok[64];
            snprintf(ok, sizeof(ok), "objects/%s", have.ids[i]);
            if (!dry_run) rc = r_delete(&c, ok, err);
            n_objects++;
        }
    if (rc == MR_OK && out && json) {
        json_t *doc = json_pack("{s:s,s:s,s:I,s:I,s:I,s:b}", "remote", r.name, "url", b.where, "deleted_objects",
                                (json_int_t)n_objects, "deleted_stage_results", (json_int_t)n_entries, "kept_objects",
                                (json_int_t)n_kept, "dry_run", dry_run);
        char *t = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
        rc = t && mr_buf_printf(out, "%s\n", t) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
        free(t);
        json_decref(doc);
    } else if (rc == MR_OK && out)
        rc = mr_buf_printf(out, "remote %s (%s): %s %llu objects and %llu stage results, kept %llu objects%s\n", r.name,
                           b.where, dry_run ? "would delete" : "deleted", (unsigned long long)n_objects,
                           (unsigned long long)n_entries, (unsigned long long)n_kept, dry_run ? " (dry run)" : "") == MR_OK
                 ? MR_OK
                 : MR_ERR(err, MR_E_NOMEM, "out of memory");
    idset_free(&entries);
    idset_free(&kept);
    idset_free(&have);
    conn_close(&c);
    return rc;
}
