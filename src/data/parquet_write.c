/* Parquet writer: mr_table -> flat-schema Parquet file (format version 1).
 *
 * Layout: "PAR1", then per row group and column one chunk: an optional
 * dictionary page (PLAIN) followed by data pages v1 (RLE definition levels,
 * then PLAIN or RLE_DICTIONARY values), each compressed with the chosen codec
 * and carrying a CRC; then the thrift-compact FileMetaData, its 4-byte length
 * and "PAR1". Every column is OPTIONAL, so tables written in several calls
 * share one schema whether or not a batch has nulls.
 *
 * Type mapping: BOOL->BOOLEAN, INT64->INT64, FLOAT64->DOUBLE, FLOAT32->FLOAT,
 * STRING->BYTE_ARRAY(STRING), DATE->INT32(DATE),
 * TIMESTAMP->INT64(TIMESTAMP(MICROS, UTC)). */
#include "data/parquet_int.h"
#include "data/thrift.h"
#include "millrace/core.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the Parquet writer assumes a little-endian host");

#define MAX_STAT_LEN 4096            /* string min/max longer than this are not written */
#define DICT_MAX_BYTES ((size_t)8 << 20) /* plain strings: give up on a dictionary beyond this */
#define FLUSH_BYTES ((size_t)4 << 20)

void mr_parquet_write_opts_init(mr_parquet_write_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->codec = MR_PQ_ZSTD;
    o->row_group_rows = (size_t)1 << 20;
    o->page_bytes = (size_t)1 << 20;
    o->dict_max_distinct = 65536;
}

typedef struct col_meta {
    int64_t num_values, null_count;
    int64_t tot_uncomp, tot_comp;
    int64_t data_off, dict_off; /* dict_off -1: no dictionary */
    int has_minmax;
    uint8_t *min, *max;         /* PLAIN-encoded bounds (owned) */
    size_t min_len, max_len;
} col_meta;

/* Per-thread encoding scratch: the page being built, its compressed form and
 * header, and the dictionary indices / definition levels of one chunk. */
typedef struct wscratch {
    mr_buf page, comp, hdr;
    uint32_t *codes;         /* dictionary indices of non-null rows */
    uint8_t *lev;
    size_t cap;              /* rows of codes and lev */
    void *zctx;              /* this thread's zstd context (mr__pq_compress) */
} wscratch;

typedef struct rg_meta {
    int64_t rows, total_bytes, file_offset, total_comp;
    col_meta *cols;
} rg_meta;

struct mr_parquet_writer {
    char *path;
    char *tmp_path;          /* written here, renamed to path by a successful close */
    int fd;
    uint64_t off;            /* bytes written (incl. buffered) */
    mr_parquet_write_opts o;
    char **kv_k, **kv_v;
    size_t n_kv;
    int failed;
    int have_schema;
    size_t n_cols;
    char **names;
    mr_dtype *types;
    mr_colkind *kinds; /* the first batch's kinds: how each column is written */
    mr_colkind *preset; /* kinds set by mr__pq_writer_set_kinds before the first batch, or NULL */
    size_t n_preset;
    rg_meta *rgs;
    size_t n_rg, cap_rg;
    mr_buf out;              /* pending file bytes */
    mr_hasher *hasher;       /* optional: fed every byte written (mr__pq_writer_hash) */
    wscratch **scratch;      /* per pool thread, allocated on first use */
    size_t n_scratch;
    mr_buf *chunks;          /* n_cols: one row group's encoded column chunks */
};

static mr_status werr(mr_parquet_writer *w, mr_error *err, mr_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold, noinline));
static mr_status werr(mr_parquet_writer *w, mr_error *err, mr_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mr_error_vset_file(err, code, w->path, fmt, ap);
    va_end(ap);
    w->failed = 1;
    return code;
}

static mr_status write_all(mr_parquet_writer *w, const char *p, size_t n, mr_error *err)
{
    size_t done = 0;
    if (w->hasher) mr_hasher_update(w->hasher, p, n);
    while (done < n) {
        ssize_t k = write(w->fd, p + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            w->failed = 1;
            MR_ERR_SYS(err, MR_E_IO, errno, "cannot write");
            if (err) mr_error_at(err, w->path, 0, 0);
            return MR_E_IO;
        }
        done += (size_t)k;
    }
    return MR_OK;
}

static mr_status flush_out(mr_parquet_writer *w, mr_error *err)
{
    mr_status rc = write_all(w, w->out.data, w->out.len, err);
    w->out.len = 0;
    return rc;
}

static mr_status emit_bytes(mr_parquet_writer *w, const void *p, size_t n, mr_error *err)
{
    if (n >= FLUSH_BYTES) { /* large (a column chunk): straight to the file, no staging copy */
        mr_status rc = flush_out(w, err);
        if (rc == MR_OK) rc = write_all(w, p, n, err);
        w->off += n;
        return rc;
    }
    if (mr_buf_append(&w->out, p, n) != MR_OK) return werr(w, err, MR_E_NOMEM, "out of memory");
    w->off += n;
    if (w->out.len >= FLUSH_BYTES) return flush_out(w, err);
    return MR_OK;
}

mr_status mr__pq_writer_set_kinds(mr_parquet_writer *w, const mr_colkind *kinds, size_t n)
{
    mr_colkind *k = mr_malloc((n ? n : 1) * sizeof *k);
    if (!k) return MR_E_NOMEM;
    if (n) memcpy(k, kinds, n * sizeof *k);
    mr_free(w->preset);
    w->preset = k;
    w->n_preset = n;
    return MR_OK;
}

void mr__pq_writer_hash(mr_parquet_writer *w, mr_hasher *h) { w->hasher = h; }
uint64_t mr__pq_writer_bytes(const mr_parquet_writer *w) { return w->off; }

mr_status mr_parquet_writer_open(const char *path, const mr_parquet_write_opts *opts, mr_parquet_writer **out,
                                 mr_error *err)
{
    *out = NULL;
    mr_parquet_writer *w = mr_calloc(1, sizeof(*w));
    if (!w || !(w->path = mr_strdup(path))) {
        mr_free(w);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    w->fd = -1;
    mr_buf_init(&w->out);
    w->out.limit = (size_t)4 << 30;
    if (opts) w->o = *opts;
    else mr_parquet_write_opts_init(&w->o);
    mr_status rc = MR_OK;
    if (w->o.codec != MR_PQ_UNCOMPRESSED && w->o.codec != MR_PQ_SNAPPY && w->o.codec != MR_PQ_GZIP &&
        w->o.codec != MR_PQ_ZSTD && w->o.codec != MR_PQ_LZ4_RAW) {
        rc = werr(w, err, MR_E_INVALID_ARG, "compression codec %s is not supported for writing",
                  mr_parquet_codec_name(w->o.codec));
        goto fail;
    }
    if (!w->o.row_group_rows) w->o.row_group_rows = (size_t)1 << 20;
    if (!w->o.page_bytes) w->o.page_bytes = (size_t)1 << 20;
    if (w->o.n_kv) {
        w->kv_k = mr_calloc(w->o.n_kv, sizeof(char *));
        w->kv_v = mr_calloc(w->o.n_kv, sizeof(char *));
        if (!w->kv_k || !w->kv_v) {
            rc = werr(w, err, MR_E_NOMEM, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < w->o.n_kv; i++) {
            w->kv_k[i] = mr_strdup(w->o.kv_keys[i] ? w->o.kv_keys[i] : "");
            w->kv_v[i] = w->o.kv_values && w->o.kv_values[i] ? mr_strdup(w->o.kv_values[i]) : NULL;
            w->n_kv = i + 1;
            if (!w->kv_k[i] || (w->o.kv_values && w->o.kv_values[i] && !w->kv_v[i])) {
                rc = werr(w, err, MR_E_NOMEM, "out of memory");
                goto fail;
            }
        }
    }
    w->o.kv_keys = w->o.kv_values = NULL;
    /* The file appears under its name only when complete: a reader never
     * sees half a file, and a file being read (or mapped, as dataset shards
     * are) is replaced, never truncated under it. */
    static _Atomic unsigned long tmp_seq;
    w->tmp_path = mr_asprintf("%s.tmp.%ld.%lu", path, (long)getpid(), (unsigned long)tmp_seq++);
    if (!w->tmp_path) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot create");
        if (err) mr_error_at(err, path, 0, 0);
        mr_free(w->tmp_path);
        w->tmp_path = NULL;
        goto fail;
    }
    rc = emit_bytes(w, "PAR1", 4, err);
    if (rc != MR_OK) goto fail;
    *out = w;
    return MR_OK;
fail:
    mr_parquet_writer_free(w);
    return rc;
}

void mr_parquet_writer_free(mr_parquet_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp_path) unlink(w->tmp_path); /* not closed successfully: nothing is published */
    mr_free(w->tmp_path);
    for (size_t i = 0; i < w->n_kv; i++) {
        mr_free(w->kv_k[i]);
        mr_free(w->kv_v[i]);
    }
    mr_free(w->kv_k);
    mr_free(w->kv_v);
    for (size_t i = 0; i < w->n_cols; i++) mr_free(w->names[i]);
    mr_free(w->names);
    mr_free(w->types);
    mr_free(w->kinds);
    mr_free(w->preset);
    for (size_t g = 0; g < w->n_rg; g++) {
        for (size_t i = 0; i < w->n_cols; i++) {
            mr_free(w->rgs[g].cols[i].min);
            mr_free(w->rgs[g].cols[i].max);
        }
        mr_free(w->rgs[g].cols);
    }
    mr_free(w->rgs);
    mr_buf_free(&w->out);
    for (size_t i = 0; i < w->n_scratch; i++) {
        wscratch *x = w->scratch[i];
        if (!x) continue;
        mr_buf_free(&x->page);
        mr_buf_free(&x->comp);
        mr_buf_free(&x->hdr);
        mr_free(x->codes);
        mr_free(x->lev);
        mr__pq_compress_ctx_free(x->zctx);
        mr_free(x);
    }
    mr_free(w->scratch);
    if (w->chunks)
        for (size_t i = 0; i < w->n_cols; i++) mr_buf_free(&w->chunks[i]);
    mr_free(w->chunks);
    mr_free(w->path);
    mr_free(w);
}

/* ---- statistics ---------------------------------------------------------- */

/* An INT64 column written as INT32 (a 8, 16 or 32-bit source). */
static int narrow(mr_dtype t, mr_colkind k) { return t == MR_T_INT64 && k.int_bits && k.int_bits <= 32; }

/* A DECIMAL of more than 18 digits is written as FIXED_LEN_BYTE_ARRAY of
 * the fewest bytes that hold its precision (big-endian two's complement). */
static int dec_flba_len(mr_colkind k)
{
    if (k.precision <= 18) return 0;
    int n = 8;
    double lim = pow(2.0, 63.0);
    while (lim <= pow(10.0, (double)k.precision)) n++, lim *= 256.0;
    return n;
}

static int phys_of_kind(mr_dtype t, mr_colkind k)
{
    if (narrow(t, k)) return MR_PQ_INT32;
    if (t == MR_T_DECIMAL) return dec_flba_len(k) ? MR_PQ_FIXED_LEN_BYTE_ARRAY : MR_PQ_INT64;
    switch (t) {
    case MR_T_BOOL: return MR_PQ_BOOLEAN;
    case MR_T_INT64:
    case MR_T_TIMESTAMP: return MR_PQ_INT64;
    case MR_T_FLOAT64: return MR_PQ_DOUBLE;
    case MR_T_FLOAT32: return MR_PQ_FLOAT;
    case MR_T_STRING: return MR_PQ_BYTE_ARRAY;
    case MR_T_DATE: return MR_PQ_INT32;
    default: return -1;
    }
}

static int phys_of(mr_dtype t) { return phys_of_kind(t, (mr_colkind){0}); }

static int str_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    return c ? c : (al < bl ? -1 : al > bl);
}

static mr_status set_bound(uint8_t **dst, size_t *dst_len, const void *p, size_t n)
{
    uint8_t *q = mr_malloc(n ? n : 1);
    if (!q) return MR_E_NOMEM;
    if (n) memcpy(q, p, n);
    mr_free(*dst);
    *dst = q;
    *dst_len = n;
    return MR_OK;
}

/* Min/max over the non-null rows [b, e) of c, PLAIN-encoded into m. */
static mr_status compute_stats(const mr_column *c, mr_colkind k, size_t b, size_t e, col_meta *m)
{
    int have = 0;
    switch (c->type) {
    case MR_T_DECIMAL:
        if (dec_flba_len(k)) break; /* no statistics for the wide form */
        /* fall through */
    case MR_T_BOOL:
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
    case MR_T_DATE: {
        int64_t mn = 0, mx = 0;
        for (size_t i = b; i < e; i++) {
            if (mr_column_is_null(c, i)) continue;
            int64_t v = c->type == MR_T_BOOL   ? ((const uint8_t *)c->data)[i]
                        : c->type == MR_T_DATE ? ((const int32_t *)c->data)[i]
                                               : ((const int64_t *)c->data)[i];
            if (!have || v < mn) mn = v;
            if (!have || v > mx) mx = v;
            have = 1;
        }
        if (!have) break;
        size_t n = c->type == MR_T_BOOL ? 1 : c->type == MR_T_DATE || narrow(c->type, k) ? 4 : 8;
        uint8_t a[8], z[8];
        for (size_t k = 0; k < n; k++) {
            a[k] = (uint8_t)((uint64_t)mn >> (8 * k));
            z[k] = (uint8_t)((uint64_t)mx >> (8 * k));
        }
        if (set_bound(&m->min, &m->min_len, a, n) || set_bound(&m->max, &m->max_len, z, n)) return MR_E_NOMEM;
        break;
    }
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: {
        double mn = 0, mx = 0;
        for (size_t i = b; i < e; i++) {
            if (mr_column_is_null(c, i)) continue;
            double v = c->type == MR_T_FLOAT64 ? ((const double *)c->data)[i] : ((const float *)c->data)[i];
            if (isnan(v)) continue;
            if (!have || v < mn) mn = v;
            if (!have || v > mx) mx = v;
            have = 1;
        }
        if (!have) break;
        if (mn == 0) mn = -0.0; /* spec: a zero min is written as -0.0, a zero max as +0.0 */
        if (mx == 0) mx = 0.0;
        if (c->type == MR_T_FLOAT64) {
            if (set_bound(&m->min, &m->min_len, &mn, 8) || set_bound(&m->max, &m->max_len, &mx, 8)) return MR_E_NOMEM;
        } else {
            float fa = (float)mn, fz = (float)mx;
            if (set_bound(&m->min, &m->min_len, &fa, 4) || set_bound(&m->max, &m->max_len, &fz, 4)) return MR_E_NOMEM;
        }
        break;
    }
    case MR_T_STRING: {
        const char *mn = NULL, *mx = NULL;
        size_t mnl = 0, mxl = 0;
        for (size_t i = b; i < e; i++) {
            if (mr_column_is_null(c, i)) continue;
            size_t l;
            const char *s = mr_column_str(c, i, &l);
            if (!have || str_cmp(s, l, mn, mnl) < 0) mn = s, mnl = l;
            if (!have || str_cmp(s, l, mx, mxl) > 0) mx = s, mxl = l;
            have = 1;
        }
        if (!have || mnl > MAX_STAT_LEN || mxl > MAX_STAT_LEN) {
            have = 0;
            break;
        }
        if (set_bound(&m->min, &m->min_len, mn, mnl) || set_bound(&m->max, &m->max_len, mx, mxl)) return MR_E_NOMEM;
        break;
    }
    default: break;
    }
    m->has_minmax = have;
    return MR_OK;
}

/* ---- pages ---------------------------------------------------------------- */

static unsigned bit_width(uint32_t max)
{
    unsigned b = 0;
    while (max) b++, max >>= 1;
    return b ? b : 1;
}


/* Errors of chunk encoding, which runs on pool threads: the message goes to
 * the chunk's own err (w is only read); the caller marks w failed. */
static mr_status cerr(const mr_parquet_writer *w, mr_error *err, mr_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold, noinline));
static mr_status cerr(const mr_parquet_writer *w, mr_error *err, mr_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mr_error_vset_file(err, code, w->path, fmt, ap);
    va_end(ap);
    return code;
}

/* Compresses x->page and appends header + body to out; accounts sizes into m. */
static mr_status emit_page(const mr_parquet_writer *w, wscratch *x, mr_buf *out, int page_type, int32_t n_values,
                           int encoding, col_meta *m, mr_error *err)
{
    if (x->page.len > MR__PQ_MAX_PAGE) return cerr(w, err, MR_E_LIMIT, "page of %zu bytes is too large", x->page.len);
    const mr_buf *body = &x->page; /* uncompressed: the page itself, no copy */
    mr_status rc = MR_OK;
    if (w->o.codec != MR_PQ_UNCOMPRESSED) {
        x->comp.len = 0;
        rc = mr__pq_compress(w->o.codec, w->o.level, (const uint8_t *)x->page.data, x->page.len, &x->comp, &x->zctx);
        if (rc != MR_OK) return cerr(w, err, rc, "cannot compress a page with %s", mr_parquet_codec_name(w->o.codec));
        if (x->comp.len > MR__PQ_MAX_PAGE) return cerr(w, err, MR_E_LIMIT, "compressed page too large");
        body = &x->comp;
    }
    x->hdr.len = 0;
    mr__tc_writer tw;
    mr__tc_writer_init(&tw, &x->hdr);
    mr__tc_write_struct_begin(&tw);
    mr__tc_write_i32_field(&tw, 1, page_type);
    mr__tc_write_i32_field(&tw, 2, (int32_t)x->page.len);
    mr__tc_write_i32_field(&tw, 3, (int32_t)body->len);
    mr__tc_write_i32_field(&tw, 4, (int32_t)mr__pq_crc32((const uint8_t *)body->data, body->len));
    if (page_type == MR__PQ_DATA_PAGE) {
        mr__tc_write_field(&tw, 5, MR__TC_STRUCT);
        mr__tc_write_struct_begin(&tw);
        mr__tc_write_i32_field(&tw, 1, n_values);
        mr__tc_write_i32_field(&tw, 2, encoding);
        mr__tc_write_i32_field(&tw, 3, MR__PQ_ENC_RLE);
        mr__tc_write_i32_field(&tw, 4, MR__PQ_ENC_RLE);
        mr__tc_write_struct_end(&tw);
    } else {
        mr__tc_write_field(&tw, 7, MR__TC_STRUCT);
        mr__tc_write_struct_begin(&tw);
        mr__tc_write_i32_field(&tw, 1, n_values);
        mr__tc_write_i32_field(&tw, 2, encoding);
        mr__tc_write_struct_end(&tw);
    }
    mr__tc_write_struct_end(&tw);
    if (tw.rc != MR_OK) return cerr(w, err, tw.rc, "out of memory");
    m->tot_uncomp += (int64_t)(x->hdr.len + x->page.len);
    m->tot_comp += (int64_t)(x->hdr.len + body->len);
    if (mr_buf_append(out, x->hdr.data, x->hdr.len) || mr_buf_append(out, body->data, body->len))
        return cerr(w, err, MR_E_NOMEM, "out of memory");
    return MR_OK;
}

/* Dictionary for a plain string column over rows [b, e): open addressing on
 * (hash, first row). Returns 0 and fills codes/dict rows, or 1 when the
 * column should stay PLAIN. */
typedef struct str_dict {
    uint32_t *slots;   /* 0 = empty, else dict index + 1 */
    size_t n_slots;
    uint32_t *rows;    /* first row of each distinct value */
    size_t n, cap;
    size_t bytes;
} str_dict;

static int build_dict(const mr_column *c, size_t b, size_t e, size_t max_distinct, str_dict *d, uint32_t *codes,
                      mr_status *rc)
{
    size_t n_nonnull = 0;
    for (size_t i = b; i < e; i++) n_nonnull += !mr_column_is_null(c, i);
    size_t limit = max_distinct < n_nonnull / 2 ? max_distinct : n_nonnull / 2;
    if (limit == 0) return 1;
    d->n_slots = 64;
    while (d->n_slots < limit * 2) d->n_slots *= 2;
    d->slots = mr_calloc(d->n_slots, sizeof(uint32_t));
    d->cap = limit < 1024 ? limit : 1024;
    d->rows = mr_malloc(d->cap * sizeof(uint32_t));
    if (!d->slots || !d->rows) {
        *rc = MR_E_NOMEM;
        return 1;
    }
    size_t k = 0;
    for (size_t i = b; i < e; i++) {
        if (mr_column_is_null(c, i)) continue;
        size_t l;
        const char *s = mr_column_str(c, i, &l);
        mr_hash128 h = mr_hash_bytes(s, l);
        size_t slot = (size_t)h.lo & (d->n_slots - 1);
        for (;;) {
            uint32_t v = d->slots[slot];
            if (!v) {
                if (d->n == limit || d->bytes + l > DICT_MAX_BYTES) return 1;
                if (d->n == d->cap) {
                    size_t nc = d->cap * 2;
                    uint32_t *nr = mr_realloc(d->rows, nc * sizeof(uint32_t));
                    if (!nr) {
                        *rc = MR_E_NOMEM;
                        return 1;
                    }
                    d->rows = nr;
                    d->cap = nc;
                }
                d->rows[d->n] = (uint32_t)i;
                d->slots[slot] = (uint32_t)++d->n;
                d->bytes += l + 4;
                codes[k++] = (uint32_t)(d->n - 1);
                break;
            }
            size_t l2;
            const char *s2 = mr_column_str(c, d->rows[v - 1], &l2);
            if (l2 == l && (!l || !memcmp(s, s2, l))) {
                codes[k++] = v - 1;
                break;
            }
            slot = (slot + 1) & (d->n_slots - 1);
        }
    }
    return 0;
}

/* Encodes rows [b, e) of column c as one column chunk into out (emptied
 * first), using scratch x. Offsets in m are relative to the chunk's start;
 * the caller rebases them. Reads w, never writes it: chunks of one row group
 * are encoded in parallel. */
static mr_status encode_chunk(const mr_parquet_writer *w, wscratch *x, mr_buf *out, const mr_column *c, mr_colkind k, size_t b,
                              size_t e, col_meta *m, mr_error *err)
{
    size_t n = e - b;
    mr_status rc = MR_OK;
    str_dict d;
    memset(&d, 0, sizeof d);
    m->num_values = (int64_t)n;
    m->dict_off = -1;
    m->null_count = 0;
    for (size_t i = b; c->valid && i < e; i++) m->null_count += mr_column_is_null(c, i);
    out->len = 0;
    rc = compute_stats(c, k, b, e, m);
    if (rc != MR_OK) return cerr(w, err, rc, "out of memory");
    if (n > x->cap) {
        uint32_t *nc = mr_realloc(x->codes, n * sizeof(uint32_t));
        uint8_t *nl = nc ? mr_realloc(x->lev, n) : NULL;
        if (nc) x->codes = nc;
        if (nl) x->lev = nl;
        if (!nc || !nl) return cerr(w, err, MR_E_NOMEM, "out of memory");
        x->cap = n;
    }
    /* choose the encoding */
    int dict = 0;
    const mr_column *dvals = NULL; /* dictionary values: a plain column, or rows of c */
    size_t dict_n = 0;
    if (c->type == MR_T_STRING && c->codes) {
        dict = 1;
        dvals = c->dict;
        dict_n = c->dict->n;
        size_t k = 0;
        for (size_t i = b; i < e; i++)
            if (!mr_column_is_null(c, i)) x->codes[k++] = (uint32_t)c->codes[i];
    } else if (c->type == MR_T_STRING && w->o.dict_max_distinct) {
        mr_status brc = MR_OK;
        if (!build_dict(c, b, e, w->o.dict_max_distinct, &d, x->codes, &brc)) {
            dict = 1;
            dict_n = d.n;
        }
        if (brc != MR_OK) {
            rc = cerr(w, err, brc, "out of memory");
            goto done;
        }
    }
    if (dict && dict_n == 0) dict = 0;
    if (dict) {
        m->dict_off = (int64_t)out->len;
        x->page.len = 0;
        for (size_t j = 0; j < dict_n && rc == MR_OK; j++) {
            size_t l;
            const char *s = dvals ? mr_column_str(dvals, j, &l) : mr_column_str(c, d.rows[j], &l);
            uint8_t lb[4];
            if (l > UINT32_MAX) {
                rc = cerr(w, err, MR_E_LIMIT, "column '%s': string longer than 4 GiB", c->name);
                break;
            }
            mr_le_put32(lb, (uint32_t)l);
            if (mr_buf_append(&x->page, lb, 4) || mr_buf_append(&x->page, s, l))
                rc = cerr(w, err, MR_E_NOMEM, "out of memory");
        }
        if (rc == MR_OK) rc = emit_page(w, x, out, MR__PQ_DICTIONARY_PAGE, (int32_t)dict_n, MR__PQ_ENC_PLAIN, m, err);
        if (rc != MR_OK) goto done;
    }
    m->data_off = (int64_t)out->len;
    unsigned bw = dict ? bit_width((uint32_t)(dict_n - 1)) : 0;
    int nar = narrow(c->type, k);
    size_t flba = c->type == MR_T_DECIMAL ? (size_t)dec_flba_len(k) : 0;
    size_t width = dict ? 1 : c->type == MR_T_STRING ? 0 : nar ? 4 : flba ? flba : mr_dtype_width(c->type);
    size_t code_pos = 0; /* index into x->codes of the page's first non-null */
    size_t r = b;
    while (r < e || (n == 0 && r == b)) {
        /* page extent */
        size_t pe = r, est = 0;
        while (pe < e && (pe == r || est < w->o.page_bytes)) {
            if (width) est += width;
            else if (!mr_column_is_null(c, pe)) {
                size_t l;
                (void)mr_column_str(c, pe, &l);
                est += 4 + l;
            }
            pe++;
        }
        size_t pn = pe - r;
        x->page.len = 0;
        /* definition levels: 4-byte length + RLE/bit-packed hybrid (bit width 1) */
        size_t nn = 0;
        for (size_t i = 0; i < pn; i++) {
            x->lev[i] = !mr_column_is_null(c, r + i);
            nn += x->lev[i];
        }
        uint8_t zero4[4] = {0};
        if (mr_buf_append(&x->page, zero4, 4) || mr__pq_rle_encode_u8(x->lev, pn, 1, &x->page)) {
            rc = cerr(w, err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        mr_le_put32((uint8_t *)x->page.data, (uint32_t)(x->page.len - 4));
        int enc = MR__PQ_ENC_PLAIN;
        if (dict) {
            enc = MR__PQ_ENC_RLE_DICTIONARY;
            uint8_t bwb = (uint8_t)bw;
            if (mr_buf_append(&x->page, &bwb, 1) || mr__pq_rle_encode(x->codes + code_pos, nn, bw, &x->page)) {
                rc = cerr(w, err, MR_E_NOMEM, "out of memory");
                goto done;
            }
            code_pos += nn;
        } else if (c->type == MR_T_BOOL) {
            uint8_t acc = 0;
            size_t k = 0;
            for (size_t i = r; i < pe && rc == MR_OK; i++) {
                if (mr_column_is_null(c, i)) continue;
                acc |= (uint8_t)((((const uint8_t *)c->data)[i] & 1) << (k & 7));
                if ((++k & 7) == 0) {
                    if (mr_buf_append(&x->page, &acc, 1)) rc = MR_E_NOMEM;
                    acc = 0;
                }
            }
            if (rc == MR_OK && (k & 7) && mr_buf_append(&x->page, &acc, 1)) rc = MR_E_NOMEM;
        } else if (c->type == MR_T_STRING) {
            for (size_t i = r; i < pe && rc == MR_OK; i++) {
                if (mr_column_is_null(c, i)) continue;
                size_t l;
                const char *s = mr_column_str(c, i, &l);
                uint8_t lb[4];
                if (l > UINT32_MAX) {
                    rc = MR_E_LIMIT;
                    break;
                }
                mr_le_put32(lb, (uint32_t)l);
                if (mr_buf_append(&x->page, lb, 4) || mr_buf_append(&x->page, s, l)) rc = MR_E_NOMEM;
            }
        } else if (flba) { /* wide DECIMAL: big-endian, sign-extended to flba bytes */
            for (size_t i = r; i < pe && rc == MR_OK; i++) {
                if (mr_column_is_null(c, i)) continue;
                uint8_t be[32];
                int64_t v = ((const int64_t *)c->data)[i];
                for (size_t q = 0; q < flba; q++)
                    be[flba - 1 - q] = q < 8 ? (uint8_t)((uint64_t)v >> (8 * q)) : (v < 0 ? 0xff : 0x00);
                if (mr_buf_append(&x->page, be, flba)) rc = MR_E_NOMEM;
            }
        } else if (nar) { /* INT64 values of a narrow source, as the INT32 they came as */
            for (size_t i = r; i < pe && rc == MR_OK; i++) {
                if (mr_column_is_null(c, i)) continue;
                uint8_t v4[4];
                mr_le_put32(v4, (uint32_t)((const int64_t *)c->data)[i]);
                if (mr_buf_append(&x->page, v4, 4)) rc = MR_E_NOMEM;
            }
        } else if (nn == pn) { /* no nulls: one copy */
            if (mr_buf_append(&x->page, (const char *)c->data + r * width, pn * width)) rc = MR_E_NOMEM;
        } else {
            for (size_t i = r; i < pe && rc == MR_OK; i++)
                if (!mr_column_is_null(c, i) && mr_buf_append(&x->page, (const char *)c->data + i * width, width))
                    rc = MR_E_NOMEM;
        }
        if (rc != MR_OK) {
            rc = cerr(w, err, rc, "column '%s': %s", c->name, rc == MR_E_LIMIT ? "string too long" : "out of memory");
            goto done;
        }
        rc = emit_page(w, x, out, MR__PQ_DATA_PAGE, (int32_t)pn, enc, m, err);
        if (rc != MR_OK) goto done;
        r = pe;
        if (n == 0) break;
    }
done:
    mr_free(d.slots);
    mr_free(d.rows);
    return rc;
}

/* Every value of t's rows [b, e), the ones about to be written, fits the kind
 * its column is written as (the first batch's): a narrow integer never wraps. */
static mr_status check_kinds(mr_parquet_writer *w, const mr_table *t, size_t b, size_t e, mr_error *err)
{
    for (size_t i = 0; i < t->n_cols; i++) {
        mr_column v = *t->cols[i];
        size_t bad;
        char kn[24], kn2[24];
        if (v.type == MR_T_DECIMAL && v.kind.scale != w->kinds[i].scale)
            return werr(w, err, MR_E_SCHEMA, "column '%s' is %s, the file has %s", v.name,
                        mr_kind_name(v.type, v.kind, kn, sizeof kn), mr_kind_name(v.type, w->kinds[i], kn2, sizeof kn2));
        v.kind = w->kinds[i];
        int ranged = v.type == MR_T_DECIMAL ||
                     (v.type == MR_T_INT64 && (v.kind.int_bits || (v.kind.flags & MR_KIND_UNSIGNED)));
        for (bad = b; ranged && bad < e; bad++)
            if (!mr_kind_fits(v.type, v.kind, ((const int64_t *)v.data)[bad]) && !mr_column_is_null(&v, bad)) break;
        if (ranged && bad < e) {
            mr_buf val;
            mr_buf_init(&val);
            mr_column_format(&v, bad, &val);
            mr_status rc = werr(w, err, MR_E_SCHEMA, "column '%s': the value %s (row %zu) does not fit its type %s", v.name,
                                val.data ? val.data : "?", bad, mr_kind_name(v.type, v.kind, kn, sizeof kn));
            mr_buf_free(&val);
            return rc;
        }
    }
    return MR_OK;
}

static mr_status check_schema(mr_parquet_writer *w, const mr_table *t, size_t b, size_t e, mr_error *err)
{
    if (!w->have_schema) {
        if (!t->n_cols) return werr(w, err, MR_E_SCHEMA, "cannot write a table without columns");
        w->names = mr_calloc(t->n_cols, sizeof(char *));
        w->types = mr_calloc(t->n_cols, sizeof(mr_dtype));
        w->kinds = mr_calloc(t->n_cols, sizeof(mr_colkind));
        if (!w->names || !w->types || !w->kinds) return werr(w, err, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; i < t->n_cols; i++) {
            if (phys_of(t->cols[i]->type) < 0)
                return werr(w, err, MR_E_SCHEMA, "column '%s': type %s cannot be written to Parquet", t->cols[i]->name,
                            mr_dtype_name(t->cols[i]->type));
            w->names[i] = mr_strdup(t->cols[i]->name);
            w->n_cols = i + 1;
            if (!w->names[i]) return werr(w, err, MR_E_NOMEM, "out of memory");
            w->types[i] = t->cols[i]->type;
            w->kinds[i] = i < w->n_preset ? w->preset[i] : t->cols[i]->kind;
            if (w->types[i] == MR_T_DECIMAL && !w->kinds[i].precision) /* a decimal of unknown precision */
                w->kinds[i].precision = 18;
            if (w->types[i] == MR_T_DECIMAL && w->kinds[i].scale > w->kinds[i].precision)
                w->kinds[i].precision = w->kinds[i].scale;
        }
        w->chunks = mr_calloc(w->n_cols, sizeof(mr_buf));
        if (!w->chunks) return werr(w, err, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; i < w->n_cols; i++) {
            mr_buf_init(&w->chunks[i]);
            w->chunks[i].limit = (size_t)4 << 30;
        }
        w->have_schema = 1;
        return check_kinds(w, t, b, e, err);
    }
    if (t->n_cols != w->n_cols)
        return werr(w, err, MR_E_SCHEMA, "table has %zu columns, the file has %zu", t->n_cols, w->n_cols);
    for (size_t i = 0; i < t->n_cols; i++)
        if (strcmp(t->cols[i]->name, w->names[i]) || t->cols[i]->type != w->types[i])
            return werr(w, err, MR_E_SCHEMA, "column %zu is '%s' (%s), the file has '%s' (%s)", i, t->cols[i]->name,
                        mr_dtype_name(t->cols[i]->type), w->names[i], mr_dtype_name(w->types[i]));
    return check_kinds(w, t, b, e, err);
}

/* One row group's column chunks, encoded in parallel: chunk i is an
 * independent unit (its own output buffer, statistics and error) written by
 * exactly one thread, and the chunks are appended to the file in column
 * order, so the bytes do not depend on the number of threads. */
typedef struct rg_job {
    mr_parquet_writer *w;
    const mr_table *t;
    size_t b, e;
    rg_meta *g;
    mr_status *rcs;
    mr_error **errs; /* per column, only for one that failed (an mr_error is 2 KB) */
} rg_job;

static wscratch *get_scratch(mr_parquet_writer *w, int tid)
{
    if ((size_t)tid >= w->n_scratch) return NULL;
    if (!w->scratch[tid]) { /* each slot is only ever touched by thread tid */
        wscratch *x = mr_calloc(1, sizeof *x);
        if (!x) return NULL;
        mr_buf_init(&x->page);
        mr_buf_init(&x->comp);
        mr_buf_init(&x->hdr);
        x->page.limit = x->comp.limit = x->hdr.limit = (size_t)4 << 30;
        w->scratch[tid] = x;
    }
    return w->scratch[tid];
}

static void rg_range(void *ctx, size_t begin, size_t end, int tid)
{
    rg_job *j = ctx;
    for (size_t i = begin; i < end; i++) {
        mr_error e;
        mr_error_init(&e);
        wscratch *x = get_scratch(j->w, tid);
        j->rcs[i] = x ? encode_chunk(j->w, x, &j->w->chunks[i], j->t->cols[i], j->w->kinds[i], j->b, j->e, &j->g->cols[i], &e)
                      : MR_ERR(&e, MR_E_NOMEM, "out of memory");
        if (j->rcs[i] != MR_OK && !j->errs[i]) {
            j->errs[i] = mr_malloc(sizeof(e));
            if (j->errs[i]) *j->errs[i] = e;
        }
    }
}

mr_status mr_parquet_writer_write(mr_parquet_writer *w, const mr_table *t, mr_error *err)
{
    return mr__pq_writer_write_range(w, t, 0, t->n_rows, err);
}

mr_status mr__pq_writer_write_range(mr_parquet_writer *w, const mr_table *t, size_t b0, size_t e0, mr_error *err)
{
    MR_ASSERT(b0 <= e0 && e0 <= t->n_rows);
    if (w->failed) return MR_ERR(err, MR_E_STATE, "%s: writer failed earlier", w->path);
    mr_status rc = check_schema(w, t, b0, e0, err);
    if (rc != MR_OK) return rc;
    size_t threads = (size_t)mr_pool_threads();
    if (w->n_scratch < threads) {
        wscratch **ns = mr_realloc(w->scratch, threads * sizeof *ns);
        if (!ns) return werr(w, err, MR_E_NOMEM, "out of memory");
        for (size_t i = w->n_scratch; i < threads; i++) ns[i] = NULL;
        w->scratch = ns;
        w->n_scratch = threads;
    }
    mr_status *rcs = mr_calloc(w->n_cols, sizeof *rcs);
    mr_error **errs = mr_calloc(w->n_cols, sizeof *errs);
    if (!rcs || !errs) {
        mr_free(rcs);
        mr_free(errs);
        return werr(w, err, MR_E_NOMEM, "out of memory");
    }
    size_t step = w->o.row_group_rows;
    for (size_t b = b0; rc == MR_OK && (b < e0 || (b == b0 && e0 == b0 && w->n_rg == 0)); b += step) {
        size_t e = e0 - b < step ? e0 : b + step;
        if (w->n_rg == w->cap_rg) {
            size_t nc = w->cap_rg ? w->cap_rg * 2 : 8;
            rg_meta *nr = mr_realloc(w->rgs, nc * sizeof(*nr));
            if (!nr) {
                rc = werr(w, err, MR_E_NOMEM, "out of memory");
                break;
            }
            w->rgs = nr;
            w->cap_rg = nc;
        }
        rg_meta *g = &w->rgs[w->n_rg];
        memset(g, 0, sizeof(*g));
        g->cols = mr_calloc(w->n_cols, sizeof(col_meta));
        if (!g->cols) {
            rc = werr(w, err, MR_E_NOMEM, "out of memory");
            break;
        }
        w->n_rg++;
        g->rows = (int64_t)(e - b);
        g->file_offset = (int64_t)w->off;
        rg_job job = {w, t, b, e, g, rcs, errs};
        mr_parallel_for(w->n_cols, 1, rg_range, &job);
        for (size_t i = 0; i < w->n_cols; i++) {
            if (rcs[i] != MR_OK) { /* the first failing column, in column order */
                rc = rcs[i];
                w->failed = 1;
                if (err && !mr_error_is_set(err)) {
                    if (errs[i]) *err = *errs[i];
                    else MR_ERR(err, rc, "out of memory writing column '%s'", t->cols[i]->name);
                }
                if (err) mr_error_key(err, t->cols[i]->name);
                break;
            }
            col_meta *m = &g->cols[i];
            m->data_off += (int64_t)w->off;
            if (m->dict_off >= 0) m->dict_off += (int64_t)w->off;
            g->total_bytes += m->tot_uncomp;
            g->total_comp += m->tot_comp;
            rc = emit_bytes(w, w->chunks[i].data, w->chunks[i].len, err);
            if (rc != MR_OK) break;
        }
        if (e0 == b0) break;
    }
    mr_free(rcs);
    for (size_t i = 0; i < w->n_cols; i++) mr_free(errs[i]);
    mr_free(errs);
    return rc;
}

/* ---- footer ----------------------------------------------------------------- */

static void write_stats(mr__tc_writer *tw, mr_dtype t, mr_colkind k, const col_meta *m)
{
    mr__tc_write_field(tw, 12, MR__TC_STRUCT);
    mr__tc_write_struct_begin(tw);
    /* signed sort order: legacy min/max agree (not for bytes or unsigned) */
    int legacy = m->has_minmax && t != MR_T_STRING && !(k.flags & MR_KIND_UNSIGNED);
    if (legacy) {
        mr__tc_write_binary_field(tw, 1, m->max, m->max_len);
        mr__tc_write_binary_field(tw, 2, m->min, m->min_len);
    }
    mr__tc_write_i64_field(tw, 3, m->null_count);
    if (m->has_minmax) {
        mr__tc_write_binary_field(tw, 5, m->max, m->max_len);
        mr__tc_write_binary_field(tw, 6, m->min, m->min_len);
    }
    mr__tc_write_struct_end(tw);
}

/* ConvertedType INT_8..INT_64 (15..18) and UINT_8..UINT_64 (11..14). */
static int int_converted(unsigned bits, int is_unsigned)
{
    int i = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
    return (is_unsigned ? MR__PQ_CT_UINT_8 : MR__PQ_CT_INT_8) + i;
}

static void write_schema_leaf(mr__tc_writer *tw, const char *name, mr_dtype t, mr_colkind k)
{
    int is_int = t == MR_T_INT64 && (k.int_bits || (k.flags & MR_KIND_UNSIGNED));
    int local = t == MR_T_TIMESTAMP && (k.flags & MR_KIND_LOCAL);
    int binary = t == MR_T_STRING && (k.flags & MR_KIND_BINARY);
    int dec = t == MR_T_DECIMAL;
    mr__tc_write_struct_begin(tw);
    mr__tc_write_i32_field(tw, 1, phys_of_kind(t, k));
    if (dec && dec_flba_len(k)) mr__tc_write_i32_field(tw, 2, dec_flba_len(k)); /* type_length */
    mr__tc_write_i32_field(tw, 3, 1); /* OPTIONAL */
    mr__tc_write_binary_field(tw, 4, name, strlen(name));
    /* ConvertedType TIMESTAMP_MICROS means adjusted to UTC: a naive one has only the LogicalType */
    int ct = binary ? -1 : t == MR_T_STRING ? MR__PQ_CT_UTF8 : t == MR_T_DATE ? MR__PQ_CT_DATE
             : t == MR_T_TIMESTAMP ? (local ? -1 : MR__PQ_CT_TIMESTAMP_MICROS)
             : is_int ? int_converted(k.int_bits ? k.int_bits : 64, k.flags & MR_KIND_UNSIGNED)
             : dec    ? MR__PQ_CT_DECIMAL
                      : -1;
    if (ct >= 0) mr__tc_write_i32_field(tw, 6, ct);
    if (dec) {
        mr__tc_write_i32_field(tw, 7, k.scale);
        mr__tc_write_i32_field(tw, 8, k.precision);
    }
    if (ct >= 0 || local) {
        mr__tc_write_field(tw, 10, MR__TC_STRUCT); /* LogicalType, a union */
        mr__tc_write_struct_begin(tw);
        int lt = t == MR_T_STRING ? 1 : t == MR_T_DATE ? 6 : t == MR_T_TIMESTAMP ? 8 : dec ? 5 : 10;
        mr__tc_write_field(tw, lt, MR__TC_STRUCT);
        mr__tc_write_struct_begin(tw);
        if (t == MR_T_TIMESTAMP) {
            mr__tc_write_bool_field(tw, 1, !local); /* isAdjustedToUTC */
            mr__tc_write_field(tw, 2, MR__TC_STRUCT); /* unit */
            mr__tc_write_struct_begin(tw);
            mr__tc_write_field(tw, 2, MR__TC_STRUCT); /* MICROS */
            mr__tc_write_struct_begin(tw);
            mr__tc_write_struct_end(tw);
            mr__tc_write_struct_end(tw);
        } else if (dec) { /* DecimalType {1: scale, 2: precision} */
            mr__tc_write_i32_field(tw, 1, k.scale);
            mr__tc_write_i32_field(tw, 2, k.precision);
        } else if (is_int) { /* IntType {1: bitWidth i8, 2: isSigned} */
            mr__tc_write_i8_field(tw, 1, (int8_t)(k.int_bits ? k.int_bits : 64));
            mr__tc_write_bool_field(tw, 2, !(k.flags & MR_KIND_UNSIGNED));
        }
        mr__tc_write_struct_end(tw);
        mr__tc_write_struct_end(tw);
    }
    mr__tc_write_struct_end(tw);
}

static mr_status write_footer(mr_parquet_writer *w, mr_error *err)
{
    mr_buf meta;
    mr_buf_init(&meta);
    meta.limit = (size_t)2 << 30;
    mr__tc_writer tw;
    mr__tc_writer_init(&tw, &meta);
    int64_t rows = 0;
    for (size_t g = 0; g < w->n_rg; g++) rows += w->rgs[g].rows;
    mr__tc_write_struct_begin(&tw);
    mr__tc_write_i32_field(&tw, 1, 1);
    mr__tc_write_field(&tw, 2, MR__TC_LIST);
    mr__tc_write_list_begin(&tw, MR__TC_STRUCT, w->n_cols + 1);
    mr__tc_write_struct_begin(&tw);
    mr__tc_write_binary_field(&tw, 4, "schema", 6);
    mr__tc_write_i32_field(&tw, 5, (int32_t)w->n_cols);
    mr__tc_write_struct_end(&tw);
    for (size_t i = 0; i < w->n_cols; i++) write_schema_leaf(&tw, w->names[i], w->types[i], w->kinds[i]);
    mr__tc_write_i64_field(&tw, 3, rows);
    mr__tc_write_field(&tw, 4, MR__TC_LIST);
    mr__tc_write_list_begin(&tw, MR__TC_STRUCT, w->n_rg);
    for (size_t g = 0; g < w->n_rg; g++) {
        const rg_meta *G = &w->rgs[g];
        mr__tc_write_struct_begin(&tw);
        mr__tc_write_field(&tw, 1, MR__TC_LIST);
        mr__tc_write_list_begin(&tw, MR__TC_STRUCT, w->n_cols);
        for (size_t i = 0; i < w->n_cols; i++) {
            const col_meta *m = &G->cols[i];
            int64_t first = m->dict_off >= 0 ? m->dict_off : m->data_off;
            mr__tc_write_struct_begin(&tw);
            mr__tc_write_i64_field(&tw, 2, first);
            mr__tc_write_field(&tw, 3, MR__TC_STRUCT);
            mr__tc_write_struct_begin(&tw);
            mr__tc_write_i32_field(&tw, 1, phys_of_kind(w->types[i], w->kinds[i]));
            mr__tc_write_field(&tw, 2, MR__TC_LIST);
            int dict = m->dict_off >= 0;
            mr__tc_write_list_begin(&tw, MR__TC_I32, dict ? 3 : 2);
            mr__tc_write_i32(&tw, MR__PQ_ENC_PLAIN);
            mr__tc_write_i32(&tw, MR__PQ_ENC_RLE);
            if (dict) mr__tc_write_i32(&tw, MR__PQ_ENC_RLE_DICTIONARY);
            mr__tc_write_field(&tw, 3, MR__TC_LIST);
            mr__tc_write_list_begin(&tw, MR__TC_BINARY, 1);
            mr__tc_write_binary(&tw, w->names[i], strlen(w->names[i]));
            mr__tc_write_i32_field(&tw, 4, (int32_t)w->o.codec);
            mr__tc_write_i64_field(&tw, 5, m->num_values);
            mr__tc_write_i64_field(&tw, 6, m->tot_uncomp);
            mr__tc_write_i64_field(&tw, 7, m->tot_comp);
            mr__tc_write_i64_field(&tw, 9, m->data_off);
            if (dict) mr__tc_write_i64_field(&tw, 11, m->dict_off);
            write_stats(&tw, w->types[i], w->kinds[i], m);
            mr__tc_write_struct_end(&tw);
            mr__tc_write_struct_end(&tw);
        }
        mr__tc_write_i64_field(&tw, 2, G->total_bytes);
        mr__tc_write_i64_field(&tw, 3, G->rows);
        mr__tc_write_i64_field(&tw, 5, G->file_offset);
        mr__tc_write_i64_field(&tw, 6, G->total_comp);
        mr__tc_write_struct_end(&tw);
    }
    if (w->n_kv) {
        mr__tc_write_field(&tw, 5, MR__TC_LIST);
        mr__tc_write_list_begin(&tw, MR__TC_STRUCT, w->n_kv);
        for (size_t i = 0; i < w->n_kv; i++) {
            mr__tc_write_struct_begin(&tw);
            mr__tc_write_binary_field(&tw, 1, w->kv_k[i], strlen(w->kv_k[i]));
            if (w->kv_v[i]) mr__tc_write_binary_field(&tw, 2, w->kv_v[i], strlen(w->kv_v[i]));
            mr__tc_write_struct_end(&tw);
        }
    }
    const char *cb = "millrace " MILLRACE_VERSION;
    mr__tc_write_binary_field(&tw, 6, cb, strlen(cb));
    mr__tc_write_field(&tw, 7, MR__TC_LIST); /* column_orders: TYPE_ORDER for every column */
    mr__tc_write_list_begin(&tw, MR__TC_STRUCT, w->n_cols);
    for (size_t i = 0; i < w->n_cols; i++) {
        mr__tc_write_struct_begin(&tw);
        mr__tc_write_field(&tw, 1, MR__TC_STRUCT);
        mr__tc_write_struct_begin(&tw);
        mr__tc_write_struct_end(&tw);
        mr__tc_write_struct_end(&tw);
    }
    mr__tc_write_struct_end(&tw);
    mr_status rc = tw.rc;
    if (rc != MR_OK || meta.len > UINT32_MAX) {
        mr_buf_free(&meta);
        return werr(w, err, rc != MR_OK ? rc : MR_E_LIMIT, "cannot build the file metadata");
    }
    uint8_t tail[8];
    mr_le_put32(tail, (uint32_t)meta.len);
    memcpy(tail + 4, "PAR1", 4);
    rc = emit_bytes(w, meta.data, meta.len, err);
    if (rc == MR_OK) rc = emit_bytes(w, tail, 8, err);
    if (rc == MR_OK) rc = flush_out(w, err);
    mr_buf_free(&meta);
    return rc;
}

mr_status mr_parquet_writer_close(mr_parquet_writer *w, mr_error *err)
{
    if (!w) return MR_OK;
    mr_status rc = MR_OK;
    if (w->failed) {
        rc = MR_ERR(err, MR_E_STATE, "%s: writer failed earlier; the file is incomplete", w->path);
    } else {
        if (!w->have_schema) rc = werr(w, err, MR_E_SCHEMA, "no table was written (the schema is unknown)");
        if (rc == MR_OK) rc = write_footer(w, err);
        if (rc == MR_OK) {
            int fd = w->fd;
            w->fd = -1;
            if (close(fd)) {
                rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot close");
                if (err) mr_error_at(err, w->path, 0, 0);
            } else if (rename(w->tmp_path, w->path)) {
                rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot rename the finished file into place");
                if (err) mr_error_at(err, w->path, 0, 0);
            } else {
                mr_free(w->tmp_path);
                w->tmp_path = NULL;
            }
        }
    }
    mr_parquet_writer_free(w);
    return rc;
}

mr_status mr_parquet_write_table(const char *path, const mr_table *t, const mr_parquet_write_opts *opts, mr_error *err)
{
    mr_parquet_writer *w = NULL;
    mr_status rc = mr_parquet_writer_open(path, opts, &w, err);
    if (rc != MR_OK) return rc;
    rc = mr_parquet_writer_write(w, t, err);
    if (rc != MR_OK) {
        mr_parquet_writer_free(w);
        return rc;
    }
    return mr_parquet_writer_close(w, err);
}
