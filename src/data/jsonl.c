/* JSON-lines reader: the file is cut into fixed-size chunks at newlines
 * (raw newlines cannot occur inside JSON text). Pass 1 parses every line
 * with jansson in parallel and collects, per chunk, the keys in order of
 * first appearance and the join of their value kinds; the chunk lists are
 * merged in chunk order. Pass 2 parses again and fills chunk-local column
 * builders, concatenated in chunk order, so any thread count gives the same
 * table, errors and stats. */
#include "millrace/jsonl.h"
#include "data/read_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#define DEFAULT_CHUNK ((size_t)8 << 20)
#define DEFAULT_CAP ((size_t)16 << 20)

typedef struct key_type {
    char *name;
    mr_dtype type;
} key_type;

typedef struct jchunk {
    size_t begin, end;
    long line;
    size_t max_rows, n_rows;
    key_type *keys;
    size_t n_keys, cap_keys;
    mr_strindex key_ix;  /* keys[].name -> index: O(1) per key of a line */
    int has_err;
    mr_status err_code;
    long err_line, err_col;
    char err_msg[400];
    size_t *bad_off, *bad_len;
    size_t n_bad, cap_bad;
    mr_status oom;
} jchunk;

typedef struct jjob {
    const char *buf;
    const char *path;
    mr_on_error on_error;
    size_t max_line;
    jchunk *ch;
    size_t n_ch;
    /* pass 2 */
    size_t n_cols;
    char **names;
    mr_strindex name_ix; /* names -> column */
    mr_dtype *types;
    mr_colkind *kinds; /* declared kinds (zero: plain) */
    uint8_t *declared;
    mr__cb *cbs;
} jjob;

void mr_jsonl_options_init(mr_jsonl_options *o) { memset(o, 0, sizeof(*o)); }

static __attribute__((cold, noinline, format(printf, 5, 6))) void jerror(jjob *w, jchunk *c, long line, long col,
                                                                          const char *fmt, ...)
{
    if (c->has_err || w->on_error != MR_ON_ERROR_FAIL) return;
    c->has_err = 1;
    c->err_code = MR_E_PARSE;
    c->err_line = line;
    c->err_col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg, sizeof(c->err_msg), fmt, ap);
    va_end(ap);
}

static void add_bad(jchunk *c, size_t off, size_t len)
{
    if (c->n_bad == c->cap_bad) {
        size_t ncap = c->cap_bad ? c->cap_bad * 2 : 16;
        size_t *o = mr_realloc(c->bad_off, ncap * sizeof(size_t));
        if (o) c->bad_off = o;
        size_t *l = o ? mr_realloc(c->bad_len, ncap * sizeof(size_t)) : NULL;
        if (!o || !l) {
            c->oom = MR_E_NOMEM;
            return;
        }
        c->bad_len = l;
        c->cap_bad = ncap;
    }
    c->bad_off[c->n_bad] = off;
    c->bad_len[c->n_bad++] = len;
}

static mr_dtype kind_of(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return MR_T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return MR_T_BOOL;
    case JSON_INTEGER: return MR_T_INT64;
    case JSON_REAL: return MR_T_FLOAT64;
    case JSON_STRING: {
        mr_dtype k = mr__classify(json_string_value(v), json_string_length(v));
        return k == MR_T_DATE || k == MR_T_TIMESTAMP ? k : MR_T_STRING;
    }
    default: return MR_T_STRING; /* object / array: JSON text */
    }
}

static const char *chunk_key_of(const void *ctx, size_t id) { return ((const jchunk *)ctx)->keys[id].name; }
static const char *job_name_of(const void *ctx, size_t id) { return ((const jjob *)ctx)->names[id]; }

/* Joins kinds, where mixing JSON strings with other kinds gives string. */
static mr_dtype jjoin(mr_dtype a, mr_dtype b) { return mr__type_join(a, b); }

/* Parses one line; returns the object or NULL after recording the error. */
static json_t *parse_line(jjob *w, jchunk *c, const char *s, size_t len, long line)
{
    if (len > w->max_line) {
        jerror(w, c, line, 0, "line is longer than %zu bytes", w->max_line);
        if (c->has_err && c->err_line == line) c->err_code = MR_E_LIMIT;
        return NULL;
    }
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (mr_alloc_failures_here() != oom0) {
        json_decref(o);
        c->oom = MR_E_NOMEM; /* not a bad line: never quarantined or skipped */
        return NULL;
    }
    if (!o) {
        jerror(w, c, line, je.column > 0 ? je.column : 0, "invalid JSON: %s", je.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        jerror(w, c, line, 0, "expected a JSON object, got %s",
               json_is_array(o) ? "an array" : json_is_string(o) ? "a string" : "a scalar");
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Iterates the non-blank lines of a chunk. */
#define FOR_EACH_LINE(w, c, s, len, line, ...)                                             \
    do {                                                                                    \
        const char *p_ = (w)->buf + (c)->begin, *e_ = (w)->buf + (c)->end;                  \
        long ln_ = (c)->line;                                                               \
        while (p_ < e_) {                                                                   \
            const char *nl_ = memchr(p_, '\n', (size_t)(e_ - p_));                          \
            const char *le_ = nl_ ? nl_ : e_;                                               \
            const char *s = p_;                                                             \
            size_t len = (size_t)(le_ - p_);                                                \
            long line = ln_;                                                                \
            const char *next_ = nl_ ? nl_ + 1 : e_;                                         \
            size_t k_ = 0;                                                                  \
            while (k_ < len && (s[k_] == ' ' || s[k_] == '\t' || s[k_] == '\r')) k_++;      \
            if (k_ < len) __VA_ARGS__                                                       \
            p_ = next_;                                                                     \
            ln_++;                                                                          \
        }                                                                                   \
    } while (0)

static void pass1(void *ctx, size_t k)
{
    jjob *w = ctx;
    jchunk *c = &w->ch[k];
    FOR_EACH_LINE(w, c, s, len, line, {
        json_t *o = parse_line(w, c, s, len, line);
        if (!o) {
            if (c->oom || w->on_error == MR_ON_ERROR_FAIL) return;
            add_bad(c, (size_t)(s - w->buf), (size_t)(next_ - s));
            if (c->oom) return;
        } else {
            const char *key;
            json_t *v;
            json_object_foreach(o, key, v)
            {
                ssize_t found = mr_strindex_find(&c->key_ix, key, chunk_key_of, c);
                size_t i = found < 0 ? c->n_keys : (size_t)found;
                if (i == c->n_keys) {
                    if (c->n_keys == c->cap_keys) {
                        size_t ncap = c->cap_keys ? c->cap_keys * 2 : 16;
                        key_type *nk = mr_realloc(c->keys, ncap * sizeof(*nk));
                        if (!nk) {
                            c->oom = MR_E_NOMEM;
                            json_decref(o);
                            return;
                        }
                        c->keys = nk;
                        c->cap_keys = ncap;
                    }
                    c->keys[i].name = mr_strdup(key);
                    c->keys[i].type = MR_T_NULL;
                    if (!c->keys[i].name) {
                        c->oom = MR_E_NOMEM;
                        json_decref(o);
                        return;
                    }
                    c->n_keys++;
                    if (mr_strindex_add(&c->key_ix, i, chunk_key_of, c, NULL) != MR_OK) {
                        c->oom = MR_E_NOMEM;
                        json_decref(o);
                        return;
                    }
                }
                c->keys[i].type = jjoin(c->keys[i].type, kind_of(v));
            }
            json_decref(o);
            c->max_rows++;
        }
    });
}

/* Appends v to b; 1 when it does not fit b's type. */
static int put_value(mr__cb *b, json_t *v, mr_status *rc)
{
    if (json_is_null(v)) {
        mr__cb_null(b);
        return 0;
    }
    size_t i = b->n;
    if (json_is_string(v) && b->type != MR_T_STRING) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        switch (b->type) {
        case MR_T_INT64:
            if (mr__parse_i64(s, len, &((int64_t *)b->data)[i])) return 1;
            if (!mr_kind_fits(MR_T_INT64, b->kind, ((int64_t *)b->data)[i])) return 1;
            break;
        case MR_T_DECIMAL:
            if (mr__cb_decimal(b, s, len)) return 1;
            break;
        case MR_T_FLOAT64:
            if (mr__parse_f64(s, len, &((double *)b->data)[i])) return 1;
            break;
        case MR_T_FLOAT32: {
            double d;
            if (mr__parse_f64(s, len, &d)) return 1;
            ((float *)b->data)[i] = (float)d;
            break;
        }
        case MR_T_BOOL: {
            int x;
            if (mr__parse_bool(s, len, &x)) return 1;
            ((uint8_t *)b->data)[i] = (uint8_t)x;
            break;
        }
        case MR_T_DATE:
            if (mr_date_parse(s, len, &((int32_t *)b->data)[i])) return 1;
            break;
        case MR_T_TIMESTAMP:
            if (mr__parse_ts(s, len, &((int64_t *)b->data)[i])) return 1;
            if (len > 19 && !b->ts_offset) b->ts_offset = mr__ts_has_offset(s, len);
            break;
        default: return 1;
        }
        b->valid[i] = 1;
        b->n++;
        return 0;
    }
    switch (b->type) {
    case MR_T_STRING: {
        if (json_is_string(v)) {
            *rc = mr__cb_str(b, json_string_value(v), json_string_length(v), 0, '"');
            return 0;
        }
        size_t need = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
        if (need == 0) { /* every value has text: jansson could not allocate to dump it */
            *rc = MR_E_NOMEM;
            return 0;
        }
        if (b->bytes_cap - b->bytes_len < need || !b->bytes) {
            *rc = mr__cb_grow_bytes(b, need);
            if (*rc != MR_OK) return 0;
        }
        if (json_dumpb(v, b->bytes + b->bytes_len, need, JSON_COMPACT | JSON_ENCODE_ANY) != need) {
            *rc = MR_E_NOMEM; /* the same: never a value of uninitialised bytes */
            return 0;
        }
        b->bytes_len += need;
        b->valid[i] = 1;
        b->offsets[i + 1] = (int64_t)b->bytes_len;
        b->n++;
        return 0;
    }
    case MR_T_INT64:
        if (!json_is_integer(v)) return 1;
        ((int64_t *)b->data)[i] = (int64_t)json_integer_value(v);
        if (!mr_kind_fits(MR_T_INT64, b->kind, ((int64_t *)b->data)[i])) return 1;
        break;
    case MR_T_DECIMAL: { /* a JSON number: exact when it is the double nearest a decimal of this scale */
        if (!json_is_number(v)) return 1;
        int64_t u;
        if (json_is_integer(v)) {
            char tmp[32];
            int n = snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(v));
            if (mr_decimal_parse(tmp, (size_t)n, b->kind.scale, &u)) return 1;
        } else {
            double d = json_number_value(v), p = 1;
            for (unsigned q = 0; q < b->kind.scale; q++) p *= 10;
            double r = nearbyint(d * p);
            if (!(fabs(r) < 9.2e18)) return 1;
            u = (int64_t)r;
            if (mr_decimal_to_f64(u, b->kind.scale) != d) return 1;
        }
        if (!mr_kind_fits(MR_T_DECIMAL, b->kind, u)) return 1;
        ((int64_t *)b->data)[i] = u;
        break;
    }
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: {
        if (!json_is_number(v)) return 1;
        double d = json_number_value(v);
        if (b->type == MR_T_FLOAT64) ((double *)b->data)[i] = d;
        else ((float *)b->data)[i] = (float)d;
        break;
    }
    case MR_T_BOOL:
        if (!json_is_boolean(v)) return 1;
        ((uint8_t *)b->data)[i] = json_is_true(v);
        break;
    default: return 1;
    }
    b->valid[i] = 1;
    b->n++;
    return 0;
}

static void pass2(void *ctx, size_t k)
{
    jjob *w = ctx;
    jchunk *c = &w->ch[k];
    mr__cb *cbs = w->cbs + k * w->n_cols;
    size_t rows = 0;
    for (size_t j = 0; j < w->n_cols; j++)
        if (mr__cb_init(&cbs[j], w->types[j], c->max_rows) != MR_OK) {
            c->oom = MR_E_NOMEM;
            return;
        } else {
            cbs[j].kind = w->kinds[j];
        }
    c->n_bad = 0;
    FOR_EACH_LINE(w, c, s, len, line, {
        json_t *o = parse_line(w, c, s, len, line);
        if (!o && c->oom) return;
        int bad = !o;
        for (size_t j = 0; o && !bad && j < w->n_cols; j++) {
            json_t *v = json_object_get(o, w->names[j]);
            mr_status rc = MR_OK;
            if (!v) {
                mr__cb_null(&cbs[j]);
            } else if (put_value(&cbs[j], v, &rc)) {
                char txt[48], shown[64];
                size_t n = json_dumpb(v, txt, sizeof(txt), JSON_COMPACT | JSON_ENCODE_ANY);
                if (n == 0) { /* jansson allocates to dump; an empty "got" would be a wrong message */
                    c->oom = MR_E_NOMEM;
                    json_decref(o);
                    return;
                }
                if (json_is_string(v)) mr__quote_value(json_string_value(v), json_string_length(v), shown, sizeof(shown));
                else mr__quote_value(txt, n < sizeof(txt) ? n : sizeof(txt), shown, sizeof(shown));
                jerror(w, c, line, 0, "column '%s': expected %s, got %s", w->names[j], mr_dtype_name(w->types[j]),
                       shown);
                bad = 1;
            }
            if (rc != MR_OK) {
                c->oom = rc;
                json_decref(o);
                return;
            }
        }
        if (o) json_decref(o);
        if (bad) {
            for (size_t j = 0; j < w->n_cols; j++) mr__cb_truncate(&cbs[j], rows);
            if (w->on_error == MR_ON_ERROR_FAIL) {
                c->n_rows = rows;
                return;
            }
            add_bad(c, (size_t)(s - w->buf), (size_t)(next_ - s));
            if (c->oom) return;
        } else {
            rows++;
        }
    });
    c->n_rows = rows;
}

static mr_status first_error(jjob *w, mr_error *err)
{
    for (size_t k = 0; k < w->n_ch; k++) {
        if (w->ch[k].oom) return MR_ERR(err, MR_E_NOMEM, "out of memory reading '%s'", w->path);
        if (w->ch[k].has_err) {
            mr_status rc = MR_ERR(err, w->ch[k].err_code, "%s", w->ch[k].err_msg);
            mr_error_at(err, w->path, w->ch[k].err_line, w->ch[k].err_col);
            return rc;
        }
    }
    return MR_OK;
}

/* Reads the lines of buf[0, len) (the text of path from line first_line on;
 * a BOM is skipped only at line 1) into *out. */
static mr_status read_buf(const char *buf, size_t len, const char *path, long first_line, const mr_jsonl_options *o,
                          mr_table **out, mr_csv_stats *stats, mr_error *err)
{
    mr_jsonl_options d;
    mr_jsonl_options_init(&d);
    if (!o) o = &d;
    mr_csv_stats st;
    memset(&st, 0, sizeof(st));
    FILE *qf = NULL;
    jjob w;
    memset(&w, 0, sizeof(w));
    *out = NULL;
    mr_status rc = MR_OK;
    if (o->on_error > MR_ON_ERROR_QUARANTINE || (o->on_error == MR_ON_ERROR_QUARANTINE && !o->quarantine_path))
        return MR_ERR(err, MR_E_INVALID_ARG, "on_error quarantine needs a quarantine path");
    size_t C = o->chunk_size ? o->chunk_size : DEFAULT_CHUNK;
    w.buf = buf;
    w.path = path;
    w.on_error = o->on_error;
    w.max_line = o->max_line_len ? o->max_line_len : DEFAULT_CAP;
    size_t off = first_line == 1 && len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3) ? 3 : 0;
    w.n_ch = len > off ? (len - off + C - 1) / C : 0;
    w.ch = mr_calloc(w.n_ch + 1, sizeof(jchunk));
    if (!w.ch) goto nomem;
    long line = first_line;
    for (size_t k = 0; k < w.n_ch; k++) { /* chunk k starts after the first newline at or past its nominal start */
        size_t s = k == 0 ? off : off + k * C;
        if (k) {
            s = s - 1 > w.ch[k - 1].begin ? s - 1 : w.ch[k - 1].begin;
            const char *nl = memchr(buf + s, '\n', len - s);
            s = nl ? (size_t)(nl - buf) + 1 : len;
            if (s < w.ch[k - 1].begin) s = w.ch[k - 1].begin;
        }
        w.ch[k].begin = s;
    }
    for (size_t k = 0; k < w.n_ch; k++) {
        w.ch[k].end = k + 1 < w.n_ch ? w.ch[k + 1].begin : len;
        w.ch[k].line = line;
        const char *p = buf + w.ch[k].begin, *e = buf + w.ch[k].end;
        while ((p = memchr(p, '\n', (size_t)(e - p))) != NULL) line++, p++;
    }
    /* a chunk in which no line starts (one line spans it) parses nothing: dropped, in order */
    size_t kept = 0;
    for (size_t k = 0; k < w.n_ch; k++)
        if (w.ch[k].begin < w.ch[k].end) w.ch[kept++] = w.ch[k];
    w.n_ch = kept;
    mr__run_tasks(w.n_ch, o->threads, pass1, &w);
    rc = first_error(&w, err);
    if (rc != MR_OK) goto done;
    /* merge keys in chunk order */
    size_t cap = 0;
    for (size_t k = 0; k < w.n_ch; k++)
        for (size_t i = 0; i < w.ch[k].n_keys; i++) {
            ssize_t found = mr_strindex_find(&w.name_ix, w.ch[k].keys[i].name, job_name_of, &w);
            size_t j = found < 0 ? w.n_cols : (size_t)found;
            if (j == w.n_cols) {
                if (w.n_cols == cap) {
                    cap = cap ? cap * 2 : 16;
                    char **nn = mr_realloc(w.names, cap * sizeof(char *));
                    mr_dtype *nt = nn ? mr_realloc(w.types, cap * sizeof(mr_dtype)) : NULL;
                    if (nn) w.names = nn;
                    if (!nt) goto nomem;
                    w.types = nt;
                }
                w.names[j] = w.ch[k].keys[i].name;
                w.ch[k].keys[i].name = NULL;
                w.types[j] = MR_T_NULL;
                w.n_cols++;
                if (mr_strindex_add(&w.name_ix, j, job_name_of, &w, NULL) != MR_OK) goto nomem;
            }
            w.types[j] = jjoin(w.types[j], w.ch[k].keys[i].type);
        }
    w.declared = mr_calloc(w.n_cols + 1, 1);
    w.kinds = mr_calloc(w.n_cols + 1, sizeof *w.kinds);
    if (!w.declared || !w.kinds) goto nomem;
    for (size_t i = 0; i < o->n_schema; i++) {
        ssize_t found = mr_strindex_find(&w.name_ix, o->schema_names[i], job_name_of, &w);
        size_t j = found < 0 ? w.n_cols : (size_t)found;
        if (j == w.n_cols) {
            rc = MR_ERR(err, MR_E_SCHEMA, "schema names column '%s', which no line has", o->schema_names[i]);
            mr_error_at(err, path, 0, 0);
            goto done;
        }
        w.types[j] = o->schema_types[i];
        if (o->schema_kinds) w.kinds[j] = o->schema_kinds[i];
        if (w.types[j] == MR_T_DECIMAL && !w.kinds[j].precision) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "column '%s': a declared decimal needs its precision and scale",
                        o->schema_names[i]);
            goto done;
        }
        w.declared[j] = 1;
    }
    for (size_t k = 0; k < w.n_ch; k++) { /* pass 1 bad rows are found again in pass 2 */
        w.ch[k].n_bad = 0;
        w.ch[k].has_err = 0;
    }
    w.cbs = mr_calloc(w.n_ch * w.n_cols + 1, sizeof(mr__cb));
    if (!w.cbs) goto nomem;
    mr__run_tasks(w.n_ch, o->threads, pass2, &w);
    rc = first_error(&w, err);
    if (rc != MR_OK) goto done;
    if (o->on_error == MR_ON_ERROR_QUARANTINE) {
        qf = fopen(o->quarantine_path, "wb");
        if (!qf) {
            rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create quarantine file", o->quarantine_path);
            goto done;
        }
    }
    for (size_t k = 0; k < w.n_ch; k++) {
        st.rows_skipped += w.ch[k].n_bad;
        for (size_t i = 0; qf && i < w.ch[k].n_bad; i++) {
            if (fwrite(buf + w.ch[k].bad_off[i], 1, w.ch[k].bad_len[i], qf) != w.ch[k].bad_len[i]) {
                rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot write quarantine file");
                goto done;
            }
            st.rows_quarantined++;
        }
    }
    rc = mr__cb_table(w.names, w.types, w.kinds, w.n_cols, w.cbs, w.n_ch, o->threads, out, err);
    if (rc != MR_OK) goto done;
    st.rows_read = (*out)->n_rows;
    st.bytes = len;
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "out of memory reading '%s'", path);
done:
    if (qf && fclose(qf) != 0 && rc == MR_OK) rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot write quarantine file");
    if (rc != MR_OK) {
        mr_table_free(*out);
        *out = NULL;
    }
    if (w.cbs)
        for (size_t i = 0; i < w.n_ch * w.n_cols; i++) mr__cb_free(&w.cbs[i]);
    mr_free(w.cbs);
    for (size_t k = 0; w.ch && k < w.n_ch; k++) {
        for (size_t i = 0; i < w.ch[k].n_keys; i++) mr_free(w.ch[k].keys[i].name);
        mr_free(w.ch[k].keys);
        mr_strindex_deinit(&w.ch[k].key_ix);
        mr_free(w.ch[k].bad_off);
        mr_free(w.ch[k].bad_len);
    }
    mr_free(w.ch);
    for (size_t j = 0; j < w.n_cols; j++) mr_free(w.names[j]);
    mr_free(w.names);
    mr_strindex_deinit(&w.name_ix);
    mr_free(w.types);
    mr_free(w.kinds);
    mr_free(w.declared);
    if (stats) *stats = st;
    return rc;
}

mr_status mr_jsonl_read(const char *path, const mr_jsonl_options *o, mr_table **out, mr_csv_stats *stats,
                        mr_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    if (o && (o->on_error > MR_ON_ERROR_QUARANTINE || (o->on_error == MR_ON_ERROR_QUARANTINE && !o->quarantine_path)))
        return MR_ERR(err, MR_E_INVALID_ARG, "on_error quarantine needs a quarantine path");
    mr_status rc = mr_fs_read_file(path, SIZE_MAX - 1, &buf, &len, err);
    if (rc == MR_OK) rc = read_buf(buf, len, path, 1, o, out, stats, err);
    else if (stats) memset(stats, 0, sizeof(*stats));
    mr_free(buf);
    return rc;
}

mr_status mr_jsonl_read_mem(const char *buf, size_t len, const char *name, long first_line,
                            const mr_jsonl_options *o, mr_table **out, mr_csv_stats *stats, mr_error *err)
{
    return read_buf(buf, len, name, first_line < 1 ? 1 : first_line, o, out, stats, err);
}
