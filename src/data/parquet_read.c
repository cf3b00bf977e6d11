/* Parquet reader, decoding half: column chunks into mr_table columns (pages,
 * definition levels, encodings, value conversion) and the row-group and
 * whole-file reads. The footer, schema and statistics are parquet_meta.c's.
 *
 * Supported: data pages v1 and v2, dictionary pages; PLAIN, PLAIN_DICTIONARY,
 * RLE_DICTIONARY, RLE (booleans, levels), BIT_PACKED (levels),
 * DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY,
 * BYTE_STREAM_SPLIT; codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD. Not supported:
 * nested or repeated columns (max_rep_level > 0, or leaves inside groups),
 * encryption, columns stored in other files, LZO/BROTLI/LZ4 codecs.
 *
 * Every length and count read from the file is checked against the bytes
 * that hold it before use, so a malformed file gives MR_E_CORRUPT (naming
 * the file, row group and column), never an overread. */
#include "data/parquet_int.h"
#include "data/thrift.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* PLAIN values are copied as they are: the reader assumes a little-endian host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the Parquet reader assumes a little-endian host");

static const char *encoding_name(int e)
{
    static const char *const n[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                    "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                    "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e < 10 ? n[e] : "UNKNOWN";
}

/* ---- chunk decoding ----------------------------------------------------------------- */

typedef struct bav {
    const uint8_t *p;
    uint32_t len;
} bav;

typedef struct chunk_ctx {
    mr_parquet_file *f;
    size_t rg;
    const pq_leaf *L;
    const pq_chunk *ch;
    mr_error *err;
    void **zctx;         /* the calling thread's zstd context (mr__pq_decompress) */
    mr_column *col;
    size_t rows_total, rows_done;
    size_t page_no;
    int es;              /* bytes per physical value (fixed-width types) */
    /* dictionary */
    int have_dict;
    size_t dict_n;
    uint8_t *dict_buf;   /* owned copy of the dictionary page values */
    uint8_t *dict_vals;  /* fixed-width dictionary values (es bytes each) */
    bav *dict_bav;       /* byte-array dictionary values */
    int dict_mode;       /* col is a dictionary STRING column */
    /* scratch (grow-only) */
    uint8_t *page;
    size_t page_cap;
    uint32_t *lev;
    size_t lev_cap;
    uint32_t *idx;
    size_t idx_cap;
    uint8_t *vals;
    size_t vals_cap;
    bav *bv;
    size_t bv_cap;
    uint64_t *u64;
    size_t u64_cap;
    uint8_t *dba;        /* DELTA_BYTE_ARRAY reconstructed bytes */
    size_t dba_cap;
} chunk_ctx;

static mr_status cerr(chunk_ctx *c, mr_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4), cold, noinline));
static mr_status cerr(chunk_ctx *c, mr_status code, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    MR_ERR(c->err, code, "row group %zu, column '%s': %s", c->rg, c->L->name, msg);
    if (c->err) {
        mr_error_at(c->err, c->f->path, 0, 0);
        mr_error_key(c->err, c->L->name);
    }
    return code;
}

static int grow_buf(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return 0;
    if (elem && n > SIZE_MAX / elem) return -1;
    size_t nc = *cap ? *cap : 64;
    while (nc < n) nc = nc > SIZE_MAX / 4 ? n : nc * 2;
    void *q = mr_realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}
#define GROW(c, field, capf, n) grow_buf((void **)&(c)->field, &(c)->capf, (n), sizeof(*(c)->field))

static int physical_size(const pq_leaf *L)
{
    switch (L->info.physical) {
    case MR_PQ_BOOLEAN: return 1;
    case MR_PQ_INT32:
    case MR_PQ_FLOAT: return 4;
    case MR_PQ_INT64:
    case MR_PQ_DOUBLE: return 8;
    case MR_PQ_INT96: return 12;
    case MR_PQ_FIXED_LEN_BYTE_ARRAY: return L->info.type_length;
    default: return 0; /* BYTE_ARRAY */
    }
}

static inline uint64_t get_bits64(const uint8_t *p, uint64_t bitpos, unsigned w)
{
    if (w == 0) return 0;
    size_t byte = (size_t)(bitpos >> 3);
    unsigned sh = (unsigned)(bitpos & 7);
    unsigned nbytes = (sh + w + 7) / 8;
    uint64_t lo = 0;
    for (unsigned k = 0; k < nbytes && k < 8; k++) lo |= (uint64_t)p[byte + k] << (8 * k);
    uint64_t v = lo >> sh;
    if (nbytes == 9) v |= (uint64_t)p[byte + 8] << (64 - sh);
    if (w < 64) v &= ((uint64_t)1 << w) - 1;
    return v;
}

static int uleb64(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *p = *pp;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        if (shift == 63 && (b & 0x7e)) return -1;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* DELTA_BINARY_PACKED: decodes the header's value count (which must be
 * <= cap) into c->u64 (wrapping 64-bit arithmetic). *consumed is the byte
 * length of the encoded run. Returns NULL status message on success. */
static const char *dbp_decode(chunk_ctx *c, const uint8_t *p, size_t len, size_t cap, size_t *count_out,
                              size_t *consumed)
{
    const uint8_t *start = p, *end = p + len;
    uint64_t block, mbs, total, zz;
    if (uleb64(&p, end, &block) || uleb64(&p, end, &mbs) || uleb64(&p, end, &total) || uleb64(&p, end, &zz))
        return "DELTA_BINARY_PACKED: truncated header";
    if (block == 0 || block % 128 || mbs == 0 || block % mbs || (block / mbs) % 32 || block > (1u << 20))
        return "DELTA_BINARY_PACKED: bad block / miniblock sizes";
    if (total > cap) return "DELTA_BINARY_PACKED: more values than the page holds";
    if (GROW(c, u64, u64_cap, total ? (size_t)total : 1)) return "out of memory";
    uint64_t last = (zz >> 1) ^ -(zz & 1);
    size_t i = 0, n = (size_t)total, per_mb = (size_t)(block / mbs);
    if (n) c->u64[i++] = last;
    while (i < n) {
        uint64_t mzz;
        if (uleb64(&p, end, &mzz)) return "DELTA_BINARY_PACKED: truncated block header";
        uint64_t min_delta = (mzz >> 1) ^ -(mzz & 1);
        if ((uint64_t)(end - p) < mbs) return "DELTA_BINARY_PACKED: truncated bit widths";
        const uint8_t *widths = p;
        p += mbs;
        for (size_t m = 0; m < mbs && i < n; m++) {
            unsigned w = widths[m];
            if (w > 64) return "DELTA_BINARY_PACKED: bit width above 64";
            size_t nv = n - i < per_mb ? n - i : per_mb;
            size_t full = per_mb * w / 8, need = (nv * w + 7) / 8, avail = (size_t)(end - p);
            if (avail < need) return "DELTA_BINARY_PACKED: truncated miniblock";
            for (size_t k = 0; k < nv; k++) {
                last += min_delta + get_bits64(p, (uint64_t)k * w, w);
                c->u64[i++] = last;
            }
            p += full < avail ? full : avail;
        }
    }
    *count_out = n;
    *consumed = (size_t)(p - start);
    return NULL;
}

/* Byte arrays in PLAIN layout: 4-byte little-endian length + bytes. */
static const char *plain_bytearrays(const uint8_t *p, size_t len, size_t n, bav *out)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (len - off < 4) return "PLAIN byte array: truncated length";
        uint32_t l = mr_le_get32(p + off);
        off += 4;
        if (l > len - off) return "PLAIN byte array: value runs past the page";
        out[i].p = p + off;
        out[i].len = l;
        off += l;
    }
    return NULL;
}

/* ---- value sections, one function per encoding ---------------------------------
 * Each decodes n non-null values of a data page's value section into c->vals
 * (fixed width, es bytes each) or c->bv (byte arrays), with the buffers grown
 * by decode_values beforehand. A malformed section sets *why (reported as
 * MR_E_CORRUPT with the page number); other failures return their status.
 * The per-value loops live inside each one, so the dispatch in decode_values
 * costs one switch per page. */

static mr_status dec_plain(chunk_ctx *c, int phys, const uint8_t *p, size_t len, size_t n, const char **why)
{
    size_t es = (size_t)c->es;
    if (phys == MR_PQ_BYTE_ARRAY) {
        *why = plain_bytearrays(p, len, n, c->bv);
    } else if (phys == MR_PQ_BOOLEAN) {
        if ((n + 7) / 8 > len) *why = "PLAIN booleans: page too short";
        else
            for (size_t i = 0; i < n; i++) c->vals[i] = (p[i >> 3] >> (i & 7)) & 1;
    } else {
        if (n * es > len) *why = "PLAIN values: page too short";
        else if (n) memcpy(c->vals, p, n * es);
    }
    return MR_OK;
}

/* PLAIN_DICTIONARY / RLE_DICTIONARY: a bit width byte, then RLE/bit-packed
 * indices into the chunk's dictionary. In dict_mode the indices stay in
 * c->idx (*codes = 1); else the values are looked up. */
static mr_status dec_dictionary(chunk_ctx *c, int phys, const uint8_t *p, size_t len, size_t n, int *codes,
                                const char **why)
{
    size_t es = (size_t)c->es;
    if (!c->have_dict) {
        *why = "dictionary-encoded page without a dictionary page";
        return MR_OK;
    }
    if (GROW(c, idx, idx_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    if (n) {
        if (len < 1) {
            *why = "dictionary indices: empty page";
            return MR_OK;
        }
        unsigned bw = p[0];
        if (bw > 32 || mr__pq_rle_decode(p + 1, len - 1, bw, c->idx, n)) {
            *why = "dictionary indices: malformed RLE/bit-packed data";
            return MR_OK;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (c->idx[i] >= c->dict_n) {
            return cerr(c, MR_E_CORRUPT, "page %zu: dictionary index %u out of range (dictionary has %zu values)",
                        c->page_no, c->idx[i], c->dict_n);
        }
    if (c->dict_mode) {
        *codes = 1;
    } else if (phys == MR_PQ_BYTE_ARRAY) {
        for (size_t i = 0; i < n; i++) c->bv[i] = c->dict_bav[c->idx[i]];
    } else {
        for (size_t i = 0; i < n; i++) memcpy(c->vals + i * es, c->dict_vals + (size_t)c->idx[i] * es, es);
    }
    return MR_OK;
}

/* RLE booleans: a 4-byte length, then the RLE/bit-packed hybrid of width 1. */
static mr_status dec_rle_bool(chunk_ctx *c, int phys, const uint8_t *p, size_t len, size_t n, const char **why)
{
    if (phys != MR_PQ_BOOLEAN) {
        *why = "RLE encoding is only valid for booleans";
    } else if (n) {
        if (GROW(c, idx, idx_cap, n)) return cerr(c, MR_E_NOMEM, "out of memory");
        if (len < 4 || mr_le_get32(p) > len - 4 || mr__pq_rle_decode(p + 4, mr_le_get32(p), 1, c->idx, n))
            *why = "RLE booleans: malformed data";
        else
            for (size_t i = 0; i < n; i++) c->vals[i] = (uint8_t)c->idx[i];
    }
    return MR_OK;
}

static mr_status dec_delta_binary(chunk_ctx *c, int phys, const uint8_t *p, size_t len, size_t n, const char **why)
{
    if (phys != MR_PQ_INT32 && phys != MR_PQ_INT64) {
        *why = "DELTA_BINARY_PACKED is only valid for INT32/INT64";
        return MR_OK;
    }
    size_t cnt, used;
    *why = dbp_decode(c, p, len, n, &cnt, &used);
    if (!*why && cnt != n) *why = "DELTA_BINARY_PACKED: value count differs from the page's";
    if (*why) return MR_OK;
    if (phys == MR_PQ_INT32) {
        for (size_t i = 0; i < n; i++) {
            int32_t v = (int32_t)(uint32_t)c->u64[i];
            memcpy(c->vals + i * 4, &v, 4);
        }
    } else if (n) {
        memcpy(c->vals, c->u64, n * 8);
    }
    return MR_OK;
}

/* DELTA_BYTE_ARRAY, second step: value i is the first idx[i] bytes of value
 * i-1 followed by its suffix bv[i]; rebuilt into c->dba, bv[] then points
 * there (and for FIXED_LEN_BYTE_ARRAY is copied into c->vals). */
static mr_status rebuild_prefixed(chunk_ctx *c, int phys, size_t n, const char **why)
{
    size_t es = (size_t)c->es, total = 0, prev_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (c->idx[i] > prev_len) {
            *why = "DELTA_BYTE_ARRAY: prefix longer than the previous value";
            return MR_OK;
        }
        size_t vl = (size_t)c->idx[i] + c->bv[i].len;
        if (vl > UINT32_MAX || total > MR__PQ_MAX_PAGE - vl) {
            *why = "DELTA_BYTE_ARRAY: values too large";
            return MR_OK;
        }
        total += vl;
        prev_len = vl;
    }
    if (GROW(c, dba, dba_cap, total ? total : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    size_t o = 0;
    const uint8_t *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        uint8_t *dst = c->dba + o;
        if (c->idx[i]) memcpy(dst, prev, c->idx[i]);
        if (c->bv[i].len) memcpy(dst + c->idx[i], c->bv[i].p, c->bv[i].len);
        c->bv[i].p = dst;
        c->bv[i].len += c->idx[i];
        prev = dst;
        o += c->bv[i].len;
    }
    if (phys == MR_PQ_FIXED_LEN_BYTE_ARRAY) {
        for (size_t i = 0; i < n && !*why; i++) {
            if (c->bv[i].len != es) *why = "DELTA_BYTE_ARRAY: value length differs from the fixed length";
            else memcpy(c->vals + i * es, c->bv[i].p, es);
        }
    }
    return MR_OK;
}

/* DELTA_LENGTH_BYTE_ARRAY: delta-packed lengths, then the bytes.
 * DELTA_BYTE_ARRAY: delta-packed prefix lengths (into c->idx) first, then a
 * DELTA_LENGTH_BYTE_ARRAY of suffixes, then rebuild_prefixed. */
static mr_status dec_delta_bytes(chunk_ctx *c, int enc, int phys, const uint8_t *p, size_t len, size_t n,
                                 const char **why)
{
    if (phys != MR_PQ_BYTE_ARRAY && !(phys == MR_PQ_FIXED_LEN_BYTE_ARRAY && enc == MR__PQ_ENC_DELTA_BYTE_ARRAY)) {
        *why = "delta byte-array encodings need BYTE_ARRAY columns";
        return MR_OK;
    }
    if (GROW(c, bv, bv_cap, n ? n : 1) || GROW(c, idx, idx_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    size_t cnt, used;
    const uint8_t *q = p;
    size_t qlen = len;
    if (enc == MR__PQ_ENC_DELTA_BYTE_ARRAY) { /* prefix lengths first */
        *why = dbp_decode(c, q, qlen, n, &cnt, &used);
        if (!*why && cnt != n) *why = "DELTA_BYTE_ARRAY: prefix count differs from the page's value count";
        if (*why) return MR_OK;
        for (size_t i = 0; i < n; i++) {
            if (c->u64[i] > UINT32_MAX) {
                *why = "DELTA_BYTE_ARRAY: bad prefix length";
                return MR_OK;
            }
            c->idx[i] = (uint32_t)c->u64[i];
        }
        q += used;
        qlen -= used;
    }
    *why = dbp_decode(c, q, qlen, n, &cnt, &used);
    if (!*why && cnt != n) *why = "DELTA_LENGTH_BYTE_ARRAY: length count differs from the page's value count";
    if (*why) return MR_OK;
    const uint8_t *data = q + used;
    size_t avail = qlen - used, off = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t l = c->u64[i];
        if (l > avail - off) {
            *why = "delta byte array: value runs past the page";
            return MR_OK;
        }
        c->bv[i].p = data + off;
        c->bv[i].len = (uint32_t)l;
        off += (size_t)l;
    }
    return enc == MR__PQ_ENC_DELTA_BYTE_ARRAY ? rebuild_prefixed(c, phys, n, why) : MR_OK;
}

/* BYTE_STREAM_SPLIT: byte k of every value, then byte k+1, ... */
static mr_status dec_byte_stream_split(chunk_ctx *c, int phys, const uint8_t *p, size_t len, size_t n,
                                       const char **why)
{
    size_t es = (size_t)c->es;
    if (phys == MR_PQ_BYTE_ARRAY || phys == MR_PQ_BOOLEAN || phys == MR_PQ_INT96) {
        *why = "BYTE_STREAM_SPLIT is not valid for this type";
    } else if (n * es > len) {
        *why = "BYTE_STREAM_SPLIT: page too short";
    } else {
        for (size_t k = 0; k < es; k++) {
            const uint8_t *s = p + k * n;
            for (size_t i = 0; i < n; i++) c->vals[i * es + k] = s[i];
        }
    }
    return MR_OK;
}

/* Decodes n non-null values of a data page's value section into c->vals
 * (fixed width, es bytes each) or c->bv (byte arrays), or, for dictionary
 * pages in dict_mode, leaves the indices in c->idx and sets *codes. */
static mr_status decode_values(chunk_ctx *c, int enc, const uint8_t *p, size_t len, size_t n, int *codes)
{
    int phys = c->L->info.physical;
    size_t es = (size_t)c->es;
    const char *why = NULL;
    mr_status rc;
    *codes = 0;
    if (phys == MR_PQ_BYTE_ARRAY) {
        if (GROW(c, bv, bv_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    } else {
        if (n && es > SIZE_MAX / n) return cerr(c, MR_E_LIMIT, "page too large");
        if (GROW(c, vals, vals_cap, (n && es) ? n * es : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    }
    switch (enc) {
    case MR__PQ_ENC_PLAIN: rc = dec_plain(c, phys, p, len, n, &why); break;
    case MR__PQ_ENC_PLAIN_DICTIONARY:
    case MR__PQ_ENC_RLE_DICTIONARY: rc = dec_dictionary(c, phys, p, len, n, codes, &why); break;
    case MR__PQ_ENC_RLE: rc = dec_rle_bool(c, phys, p, len, n, &why); break;
    case MR__PQ_ENC_DELTA_BINARY_PACKED: rc = dec_delta_binary(c, phys, p, len, n, &why); break;
    case MR__PQ_ENC_DELTA_LENGTH_BYTE_ARRAY:
    case MR__PQ_ENC_DELTA_BYTE_ARRAY: rc = dec_delta_bytes(c, enc, phys, p, len, n, &why); break;
    case MR__PQ_ENC_BYTE_STREAM_SPLIT: rc = dec_byte_stream_split(c, phys, p, len, n, &why); break;
    default:
        return cerr(c, MR_E_SCHEMA, "page %zu: encoding %s (%d) is not supported", c->page_no, encoding_name(enc), enc);
    }
    if (rc == MR_OK && why) rc = cerr(c, MR_E_CORRUPT, "page %zu: %s", c->page_no, why);
    return rc;
}

/* Dictionary page: PLAIN values, decoded once and kept for the chunk. */
static mr_status read_dictionary(chunk_ctx *c, const uint8_t *p, size_t len, int64_t n_values, int enc)
{
    const pq_leaf *L = c->L;
    size_t es = (size_t)c->es;
    if (c->have_dict) return cerr(c, MR_E_CORRUPT, "page %zu: second dictionary page", c->page_no);
    if (c->rows_done) return cerr(c, MR_E_CORRUPT, "page %zu: dictionary page after data pages", c->page_no);
    if (enc != MR__PQ_ENC_PLAIN && enc != MR__PQ_ENC_PLAIN_DICTIONARY)
        return cerr(c, MR_E_SCHEMA, "dictionary page encoding %s is not supported", encoding_name(enc));
    if (n_values < 0) return cerr(c, MR_E_CORRUPT, "dictionary page: negative value count");
    size_t n = (size_t)n_values;
    /* bound n by the bytes before allocating: every value takes >= 1 bit/byte */
    int phys = L->info.physical;
    if ((phys == MR_PQ_BOOLEAN && n > len * 8) || (phys == MR_PQ_BYTE_ARRAY && n > len / 4) ||
        (phys != MR_PQ_BOOLEAN && phys != MR_PQ_BYTE_ARRAY && n > len / es))
        return cerr(c, MR_E_CORRUPT, "dictionary page: %zu values do not fit in %zu bytes", n, len);
    c->dict_buf = mr_malloc(len ? len : 1);
    if (!c->dict_buf) return cerr(c, MR_E_NOMEM, "out of memory");
    if (len) memcpy(c->dict_buf, p, len);
    c->dict_n = n;
    if (phys == MR_PQ_BYTE_ARRAY) {
        c->dict_bav = mr_calloc(n ? n : 1, sizeof(bav));
        if (!c->dict_bav) return cerr(c, MR_E_NOMEM, "out of memory");
        const char *why = plain_bytearrays(c->dict_buf, len, n, c->dict_bav);
        if (why) return cerr(c, MR_E_CORRUPT, "dictionary page: %s", why);
    } else if (phys == MR_PQ_BOOLEAN) {
        c->dict_vals = mr_malloc(n ? n : 1);
        if (!c->dict_vals) return cerr(c, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) c->dict_vals[i] = (c->dict_buf[i >> 3] >> (i & 7)) & 1;
    } else {
        c->dict_vals = c->dict_buf; /* PLAIN fixed-width values as they are */
    }
    c->have_dict = 1;
    if (L->cv == CV_STR && !c->col) {
        mr_column *d = NULL;
        mr_status rc = mr_column_new(L->name, MR_T_STRING, n, &d, c->err);
        if (rc != MR_OK) return rc;
        for (size_t i = 0; i < n && rc == MR_OK; i++) {
            const uint8_t *s = phys == MR_PQ_BYTE_ARRAY ? c->dict_bav[i].p : c->dict_vals + i * es;
            size_t sl = phys == MR_PQ_BYTE_ARRAY ? c->dict_bav[i].len : es;
            rc = mr_column_append_str(d, (const char *)s, sl);
        }
        if (rc != MR_OK) {
            mr_column_free(d);
            return cerr(c, rc, "out of memory building the dictionary");
        }
        size_t hint = c->rows_total < ((size_t)1 << 20) ? c->rows_total : (size_t)1 << 20;
        rc = mr_column_new_dict(L->name, d, hint, &c->col, c->err);
        if (rc != MR_OK) return rc;
        c->col->kind = L->info.kind;
        c->dict_mode = 1;
    }
    return MR_OK;
}

static mr_status ensure_column(chunk_ctx *c)
{
    if (c->col) return MR_OK;
    size_t hint = c->rows_total < ((size_t)1 << 20) ? c->rows_total : (size_t)1 << 20;
    mr_status rc = mr_column_new(c->L->name, c->L->info.dtype, hint, &c->col, c->err);
    if (rc == MR_OK) c->col->kind = c->L->info.kind;
    return rc;
}

static mr_status set_null(chunk_ctx *c, size_t row)
{
    mr_column *col = c->col;
    if (!col->valid) {
        size_t nb = (col->cap + 7) / 8;
        col->valid = mr_malloc(nb ? nb : 1);
        if (!col->valid) return MR_E_NOMEM;
        memset(col->valid, 0xff, nb ? nb : 1);
    }
    col->valid[row >> 3] &= (uint8_t) ~(1u << (row & 7));
    col->null_count++;
    return MR_OK;
}

/* Emits one page's rows (n_rows, levels lev or NULL = all present) from the
 * decoded dense values into c->col. */
static mr_status emit(chunk_ctx *c, size_t n_rows, const uint32_t *lev, size_t n_vals, int codes)
{
    const pq_leaf *L = c->L;
    mr_column *col = c->col;
    mr_status rc;
    if (mr_column_reserve(col, col->n + n_rows) != MR_OK) return cerr(c, MR_E_NOMEM, "out of memory (%zu rows)", col->n + n_rows);
    size_t base = col->n, j = 0;
    uint32_t maxd = (uint32_t)L->max_def;
    if (L->cv == CV_STR && !codes) {
        size_t es = (size_t)c->es;
        for (size_t i = 0; i < n_rows; i++) {
            if (lev && lev[i] != maxd) {
                rc = mr_column_append_null(col);
            } else if (L->info.physical == MR_PQ_BYTE_ARRAY) {
                rc = mr_column_append_str(col, (const char *)c->bv[j].p, c->bv[j].len);
                j++;
            } else {
                rc = mr_column_append_str(col, (const char *)c->vals + j * es, es);
                j++;
            }
            if (rc != MR_OK) return cerr(c, rc, "out of memory appending strings");
        }
        return MR_OK;
    }
    if (!lev && !codes && (L->cv == CV_F64 || L->cv == CV_I64 || L->cv == CV_F32 || L->cv == CV_DATE)) {
        /* no nulls, same layout: one copy (little-endian host) */
        MR_ASSERT(n_vals == n_rows);
        if (n_rows) memcpy((char *)col->data + base * (size_t)c->es, c->vals, n_rows * (size_t)c->es);
        col->n += n_rows;
        return MR_OK;
    }
    for (size_t i = 0; i < n_rows; i++) {
        size_t row = base + i;
        if (lev && lev[i] != maxd) {
            if (set_null(c, row) != MR_OK) return cerr(c, MR_E_NOMEM, "out of memory");
            size_t w = codes ? 4 : mr_dtype_width(col->type);
            memset((char *)(codes ? (void *)col->codes : col->data) + row * w, 0, w);
            continue;
        }
        MR_ASSERT(j < n_vals);
        const uint8_t *v = c->vals ? c->vals + j * (size_t)c->es : NULL;
        switch (codes ? -1 : L->cv) {
        case -1: col->codes[row] = (int32_t)c->idx[j]; break;
        case CV_BOOL: ((uint8_t *)col->data)[row] = v[0] & 1; break;
        case CV_I32: ((int64_t *)col->data)[row] = (int32_t)mr_le_get32(v); break;
        case CV_U32: ((int64_t *)col->data)[row] = mr_le_get32(v); break;
        case CV_I64: ((int64_t *)col->data)[row] = (int64_t)mr_le_get64(v); break;
        case CV_DATE: ((int32_t *)col->data)[row] = (int32_t)mr_le_get32(v); break;
        case CV_TS32: ((int64_t *)col->data)[row] = (int64_t)(int32_t)mr_le_get32(v) * 1000; break;
        case CV_TS64:
            if (to_us(L->unit, (int64_t)mr_le_get64(v), &((int64_t *)col->data)[row]))
                return cerr(c, MR_E_CORRUPT, "page %zu: timestamp out of range", c->page_no);
            break;
        case CV_INT96:
            if (int96_to_us(v, &((int64_t *)col->data)[row]))
                return cerr(c, MR_E_CORRUPT, "page %zu: INT96 timestamp out of range (julian day %d, %lld ns)",
                            c->page_no, (int32_t)mr_le_get32(v + 8), (long long)mr_le_get64(v));
            break;
        case CV_F32: memcpy((float *)col->data + row, v, 4); break;
        case CV_F64: memcpy((double *)col->data + row, v, 8); break;
        case CV_DEC32: ((int64_t *)col->data)[row] = (int32_t)mr_le_get32(v); break;
        case CV_DEC64: ((int64_t *)col->data)[row] = (int64_t)mr_le_get64(v); break;
        case CV_DECBYTES: {
            int bad = L->info.physical == MR_PQ_BYTE_ARRAY
                          ? be_twos_to_i64(c->bv[j].p, c->bv[j].len, &((int64_t *)col->data)[row])
                          : be_twos_to_i64(v, (size_t)c->es, &((int64_t *)col->data)[row]);
            if (bad)
                return cerr(c, MR_E_LIMIT, "page %zu: a %s value has more than 18 digits, the most kept exactly",
                            c->page_no, L->info.logical);
            break;
        }
        case CV_F16: ((float *)col->data)[row] = half_to_float((uint16_t)(v[0] | v[1] << 8)); break;
        default: return cerr(c, MR_E_INTERNAL, "unexpected conversion");
        }
        j++;
    }
    col->n += n_rows;
    return MR_OK;
}

/* Decodes definition levels (max_def 1 for flat columns). *all_present is
 * set, and c->lev left unfilled, when the levels are one RLE run of max_def
 * covering the page (no nulls: what millrace's writer emits then). */
static mr_status read_levels(chunk_ctx *c, int enc, const uint8_t *p, size_t len, size_t n, size_t *used,
                             int *all_present)
{
    unsigned bw = 0;
    for (int m = c->L->max_def; m; m >>= 1) bw++;
    *all_present = 0;
    if (enc == MR__PQ_ENC_RLE && len >= 4 && mr_le_get32(p) <= len - 4 && bw <= 8) {
        const uint8_t *q = p + 4, *e = p + 4 + mr_le_get32(p);
        uint64_t h = 0;
        for (unsigned shift = 0; q < e && shift < 64; shift += 7) { /* ULEB128 run header */
            uint8_t b = *q++;
            h |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
        }
        if (!(h & 1) && (h >> 1) >= n && q < e && q[-1] < 0x80 && *q == (uint8_t)c->L->max_def) {
            *used = 4 + mr_le_get32(p);
            *all_present = 1;
            return MR_OK;
        }
    }
    if (GROW(c, lev, lev_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    if (enc == MR__PQ_ENC_RLE) {
        if (len < 4 || mr_le_get32(p) > len - 4) return cerr(c, MR_E_CORRUPT, "page %zu: definition levels run past the page", c->page_no);
        size_t l = mr_le_get32(p);
        if (mr__pq_rle_decode(p + 4, l, bw, c->lev, n))
            return cerr(c, MR_E_CORRUPT, "page %zu: malformed definition levels", c->page_no);
        *used = 4 + l;
    } else if (enc == MR__PQ_ENC_BIT_PACKED) {
        size_t l = (n * bw + 7) / 8;
        if (l > len) return cerr(c, MR_E_CORRUPT, "page %zu: definition levels run past the page", c->page_no);
        for (size_t i = 0; i < n; i++) { /* MSB-first packing */
            uint32_t v = 0;
            for (unsigned b = 0; b < bw; b++) {
                size_t bit = i * bw + b;
                v = v << 1 | ((p[bit >> 3] >> (7 - (bit & 7))) & 1);
            }
            c->lev[i] = v;
        }
        *used = l;
    } else {
        return cerr(c, MR_E_SCHEMA, "page %zu: definition level encoding %s is not supported", c->page_no,
                    encoding_name(enc));
    }
    for (size_t i = 0; i < n; i++)
        if (c->lev[i] > (uint32_t)c->L->max_def)
            return cerr(c, MR_E_CORRUPT, "page %zu: definition level %u above the maximum %d", c->page_no, c->lev[i],
                        c->L->max_def);
    return MR_OK;
}

/* Page header fields we use. */
typedef struct page_hdr {
    int type;
    int32_t usize, csize;
    int has_crc;
    uint32_t crc;
    int32_t n_values, n_nulls, n_rows;
    int encoding, def_enc, rep_enc;
    int32_t def_len, rep_len;
    int is_compressed;
    int has_sub;
} page_hdr;

static void parse_data_page_header(mr__tc_reader *r, page_hdr *h, int v2)
{
    int16_t last = 0;
    int fid, t;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (t == MR__TC_I32 && fid >= 1 && fid <= 6) {
            int32_t v = mr__tc_read_i32(r);
            if (!v2) {
                if (fid == 1) h->n_values = v;
                else if (fid == 2) h->encoding = v;
                else if (fid == 3) h->def_enc = v;
                else if (fid == 4) h->rep_enc = v;
            } else {
                if (fid == 1) h->n_values = v;
                else if (fid == 2) h->n_nulls = v;
                else if (fid == 3) h->n_rows = v;
                else if (fid == 4) h->encoding = v;
                else if (fid == 5) h->def_len = v;
                else if (fid == 6) h->rep_len = v;
            }
        } else if (v2 && fid == 7 && (t == MR__TC_TRUE || t == MR__TC_FALSE)) {
            h->is_compressed = mr__tc_field_bool(t);
        } else {
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
    h->has_sub = 1;
}

static void parse_page_header(mr__tc_reader *r, page_hdr *h)
{
    int16_t last = 0;
    int fid, t;
    memset(h, 0, sizeof(*h));
    h->type = -1;
    h->usize = h->csize = -1;
    h->is_compressed = 1;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (t == MR__TC_I32 && fid >= 1 && fid <= 4) {
            int32_t v = mr__tc_read_i32(r);
            if (fid == 1) h->type = v;
            else if (fid == 2) h->usize = v;
            else if (fid == 3) h->csize = v;
            else h->has_crc = 1, h->crc = (uint32_t)v;
        } else if (fid == 5 && t == MR__TC_STRUCT && h->type == MR__PQ_DATA_PAGE) {
            parse_data_page_header(r, h, 0);
        } else if (fid == 7 && t == MR__TC_STRUCT && h->type == MR__PQ_DICTIONARY_PAGE) {
            /* DictionaryPageHeader: 1 num_values, 2 encoding */
            int16_t l2 = 0;
            int f2, t2;
            mr__tc_struct_begin(r);
            while (mr__tc_field_next(r, &l2, &f2, &t2)) {
                if (t2 == MR__TC_I32 && f2 == 1) h->n_values = mr__tc_read_i32(r);
                else if (t2 == MR__TC_I32 && f2 == 2) h->encoding = mr__tc_read_i32(r);
                else mr__tc_skip(r, t2);
            }
            mr__tc_struct_end(r);
            h->has_sub = 1;
        } else if (fid == 8 && t == MR__TC_STRUCT && h->type == MR__PQ_DATA_PAGE_V2) {
            parse_data_page_header(r, h, 1);
        } else {
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
}

/* Returns the decompressed bytes of [src, src+clen) as *out (which may be
 * src itself when uncompressed). */
static mr_status page_bytes(chunk_ctx *c, const uint8_t *src, size_t clen, size_t ulen, const uint8_t **out)
{
    if (c->ch->codec == MR_PQ_UNCOMPRESSED) {
        if (clen != ulen) return cerr(c, MR_E_CORRUPT, "page %zu: compressed size %zu differs from uncompressed size %zu in an uncompressed chunk", c->page_no, clen, ulen);
        *out = src;
        return MR_OK;
    }
    if (GROW(c, page, page_cap, ulen ? ulen : 1)) return cerr(c, MR_E_NOMEM, "out of memory (page of %zu bytes)", ulen);
    const char *why = "";
    mr_status rc = mr__pq_decompress((mr_parquet_codec)c->ch->codec, src, clen, c->page, ulen, c->zctx, &why);
    if (rc != MR_OK) return cerr(c, rc, "page %zu: %s", c->page_no, why);
    *out = c->page;
    return MR_OK;
}

static mr_status data_page(chunk_ctx *c, const page_hdr *h, const uint8_t *raw, size_t clen)
{
    const pq_leaf *L = c->L;
    int v2 = h->type == MR__PQ_DATA_PAGE_V2;
    if (h->n_values < 0) return cerr(c, MR_E_CORRUPT, "page %zu: negative value count", c->page_no);
    size_t n = (size_t)h->n_values;
    if (n > c->rows_total - c->rows_done)
        return cerr(c, MR_E_CORRUPT, "page %zu: %zu values, but only %zu rows remain in the row group", c->page_no, n,
                    c->rows_total - c->rows_done);
    size_t ulen = (size_t)h->usize;
    const uint8_t *vals;
    size_t vlen;
    const uint32_t *lev = NULL;
    size_t n_nonnull = n;
    mr_status rc;
    if (!v2) {
        const uint8_t *pg;
        rc = page_bytes(c, raw, clen, ulen, &pg);
        if (rc != MR_OK) return rc;
        size_t used = 0;
        if (L->max_def > 0) {
            int all = 0;
            rc = read_levels(c, h->def_enc, pg, ulen, n, &used, &all);
            if (rc != MR_OK) return rc;
            lev = all ? NULL : c->lev;
        }
        vals = pg + used;
        vlen = ulen - used;
    } else {
        if (h->def_len < 0 || h->rep_len < 0 || (size_t)h->def_len + (size_t)h->rep_len > clen ||
            (size_t)h->def_len + (size_t)h->rep_len > ulen)
            return cerr(c, MR_E_CORRUPT, "page %zu: level lengths exceed the page", c->page_no);
        size_t lvl = (size_t)h->def_len + (size_t)h->rep_len;
        if (L->max_def > 0) {
            unsigned bw = 0;
            for (int m = L->max_def; m; m >>= 1) bw++;
            if (GROW(c, lev, lev_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
            if (mr__pq_rle_decode(raw + h->rep_len, (size_t)h->def_len, bw, c->lev, n))
                return cerr(c, MR_E_CORRUPT, "page %zu: malformed definition levels", c->page_no);
            for (size_t i = 0; i < n; i++)
                if (c->lev[i] > (uint32_t)L->max_def)
                    return cerr(c, MR_E_CORRUPT, "page %zu: definition level above the maximum", c->page_no);
            lev = c->lev;
        }
        const uint8_t *src = raw + lvl;
        size_t sclen = clen - lvl, sulen = ulen - lvl;
        if (sulen == 0 || sclen == 0) { /* nothing to decompress (may be an empty stream) */
            if (sulen != 0 && sclen == 0) return cerr(c, MR_E_CORRUPT, "page %zu: values missing", c->page_no);
            vals = src;
            vlen = 0;
        } else if (!h->is_compressed || c->ch->codec == MR_PQ_UNCOMPRESSED) {
            if (sclen != sulen) return cerr(c, MR_E_CORRUPT, "page %zu: uncompressed values size mismatch", c->page_no);
            vals = src;
            vlen = sulen;
        } else {
            rc = page_bytes(c, src, sclen, sulen, &vals);
            if (rc != MR_OK) return rc;
            vlen = sulen;
        }
    }
    if (lev) {
        n_nonnull = 0;
        for (size_t i = 0; i < n; i++) n_nonnull += lev[i] == (uint32_t)L->max_def;
    }
    if (v2 && L->max_def > 0 && h->n_nulls >= 0 && (size_t)h->n_nulls != n - n_nonnull)
        return cerr(c, MR_E_CORRUPT, "page %zu: num_nulls %d differs from the definition levels (%zu)", c->page_no,
                    h->n_nulls, n - n_nonnull);
    rc = ensure_column(c);
    if (rc != MR_OK) return rc;
    int enc = h->encoding, codes = 0;
    if (c->dict_mode && enc != MR__PQ_ENC_PLAIN_DICTIONARY && enc != MR__PQ_ENC_RLE_DICTIONARY) {
        /* fallback from dictionary to plain in the middle of a chunk */
        rc = mr_column_materialize(c->col, c->err);
        if (rc != MR_OK) return rc;
        c->dict_mode = 0;
    }
    if (!lev && enc == MR__PQ_ENC_PLAIN && !c->dict_mode &&
        (L->cv == CV_F64 || L->cv == CV_I64 || L->cv == CV_F32 || L->cv == CV_DATE)) {
        /* no nulls, PLAIN, same layout (little-endian host): one copy from
         * the page straight into the column */
        size_t es = (size_t)c->es;
        if (n && es > SIZE_MAX / n) return cerr(c, MR_E_LIMIT, "page too large");
        if (n * es > vlen) return cerr(c, MR_E_CORRUPT, "page %zu: PLAIN values: page too short", c->page_no);
        if (mr_column_reserve(c->col, c->col->n + n) != MR_OK)
            return cerr(c, MR_E_NOMEM, "out of memory (%zu rows)", c->col->n + n);
        if (n) memcpy((char *)c->col->data + c->col->n * es, vals, n * es);
        c->col->n += n;
        c->rows_done += n;
        return MR_OK;
    }
    rc = decode_values(c, enc, vals, vlen, n_nonnull, &codes);
    if (rc != MR_OK) return rc;
    rc = emit(c, n, lev, n_nonnull, codes);
    if (rc != MR_OK) return rc;
    c->rows_done += n;
    return MR_OK;
}

int mr__pq_chunk_range(const mr_parquet_file *f, size_t rg, size_t ci, uint64_t *off, uint64_t *len)
{
    const pq_chunk *ch = &f->rgs[rg].chunks[ci];
    if (!ch->has_meta || ch->has_file_path || f->rgs[rg].num_rows == 0) return 0;
    int64_t start = ch->data_page_offset;
    if (ch->dict_page_offset > 0 && ch->dict_page_offset < start) start = ch->dict_page_offset;
    int64_t clen = ch->total_compressed;
    if (start < 4 || clen < 0 || (uint64_t)start > f->data_end || (uint64_t)clen > f->data_end - (uint64_t)start)
        return 0;
    *off = (uint64_t)start;
    *len = (uint64_t)clen;
    return 1;
}

static int cmp_range(const void *a, const void *b)
{
    const mr_parquet_range *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

size_t mr_parquet_plan_ranges(const mr_parquet_file *f, size_t rg, const size_t *cols, size_t n_cols,
                              mr_parquet_range *out, size_t cap)
{
    if (rg >= f->n_rg) return 0;
    size_t n = cols ? n_cols : f->n_leaves, m = 0;
    mr_parquet_range *r = mr_malloc((n ? n : 1) * sizeof *r);
    if (!r) return 0;
    for (size_t k = 0; k < n; k++) {
        size_t ci = cols ? cols[k] : k;
        if (ci < f->n_leaves && mr__pq_chunk_range(f, rg, ci, &r[m].off, &r[m].len) && r[m].len) m++;
    }
    qsort(r, m, sizeof *r, cmp_range);
    size_t w = 0;
    for (size_t k = 0; k < m; k++) {
        if (w) {
            mr_parquet_range *p = &r[w - 1];
            uint64_t end = p->off + p->len, nend = r[k].off + r[k].len;
            if (r[k].off <= end + MR_PARQUET_COALESCE_GAP && (nend > end ? nend : end) - p->off <= MR_PARQUET_COALESCE_MAX) {
                if (nend > end) p->len = nend - p->off;
                continue;
            }
        }
        r[w++] = r[k];
    }
    for (size_t k = 0; k < w && k < cap; k++) out[k] = r[k];
    mr_free(r);
    return w;
}

/* Fetches the ranges of one row group read from a ranged file. */
static mr_status window_fill(mr_parquet_file *f, size_t rg, const size_t *cols, size_t n_cols, pq_window *w,
                             mr_error *err)
{
    size_t n = cols ? n_cols : f->n_leaves;
    w->r = mr_malloc((n ? n : 1) * sizeof *w->r);
    if (!w->r) return mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory");
    size_t m = mr_parquet_plan_ranges(f, rg, cols, n_cols, w->r, n);
    w->data = mr_calloc(m ? m : 1, sizeof *w->data);
    if (!w->data) return mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < m; k++) {
        w->data[k] = mr_malloc(w->r[k].len ? (size_t)w->r[k].len : 1);
        w->n = k + 1;
        if (!w->data[k])
            return mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory fetching %llu bytes", (unsigned long long)w->r[k].len);
        mr_status rc = mr__pq_read_at(f, w->r[k].off, (size_t)w->r[k].len, w->data[k], err);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

static void window_free(pq_window *w)
{
    for (size_t k = 0; k < w->n; k++) mr_free(w->data[k]);
    mr_free(w->data);
    mr_free(w->r);
}

static const uint8_t *window_find(const pq_window *w, uint64_t off, uint64_t len)
{
    for (size_t k = 0; w && k < w->n; k++)
        if (off >= w->r[k].off && off + len <= w->r[k].off + w->r[k].len) return w->data[k] + (off - w->r[k].off);
    return NULL;
}

static mr_status read_chunk(mr_parquet_file *f, size_t rg, size_t ci, const pq_window *win, mr_column **out,
                            void **zctx, mr_error *err)
{
    chunk_ctx cc;
    memset(&cc, 0, sizeof cc);
    chunk_ctx *c = &cc;
    c->zctx = zctx;
    c->f = f;
    c->rg = rg;
    c->L = &f->leaves[ci];
    c->ch = &f->rgs[rg].chunks[ci];
    c->err = err;
    c->rows_total = (size_t)f->rgs[rg].num_rows;
    c->es = physical_size(c->L);
    const pq_leaf *L = c->L;
    const pq_chunk *ch = c->ch;
    uint8_t *owned = NULL;
    mr_status rc = MR_OK;
    if (L->info.nested) {
        rc = cerr(c, MR_E_SCHEMA, "nested/repeated columns are not supported");
        goto done;
    }
    if (L->cv == CV_NONE) {
        rc = cerr(c, MR_E_SCHEMA, "type %s%s%s is not supported", mr_parquet_type_name(L->info.physical),
                  L->info.logical[0] ? "/" : "", L->info.logical);
        goto done;
    }
    if (!ch->has_meta) {
        rc = cerr(c, MR_E_SCHEMA, "column chunk without metadata (encrypted?) is not supported");
        goto done;
    }
    if (ch->has_file_path) {
        rc = cerr(c, MR_E_SCHEMA, "column chunks stored in other files are not supported");
        goto done;
    }
    if (ch->type != (int)L->info.physical) {
        rc = cerr(c, MR_E_CORRUPT, "chunk type %d differs from the schema type %s", ch->type,
                  mr_parquet_type_name(L->info.physical));
        goto done;
    }
    if (ch->codec != MR_PQ_UNCOMPRESSED && ch->codec != MR_PQ_SNAPPY && ch->codec != MR_PQ_GZIP && ch->codec != MR_PQ_ZSTD &&
        ch->codec != MR_PQ_LZ4 && ch->codec != MR_PQ_LZ4_RAW) {
        rc = cerr(c, MR_E_SCHEMA, "compression codec %s is not supported", mr_parquet_codec_name((mr_parquet_codec)ch->codec));
        goto done;
    }
    if (c->rows_total == 0) { /* nothing to decode; some writers leave offsets unset */
        rc = ensure_column(c);
        if (rc == MR_OK) {
            *out = c->col;
            c->col = NULL;
        }
        goto done;
    }
    int64_t start = ch->data_page_offset;
    if (ch->dict_page_offset > 0 && ch->dict_page_offset < start) start = ch->dict_page_offset;
    int64_t clen = ch->total_compressed;
    if (start < 4 || clen < 0 || (uint64_t)start > f->data_end || (uint64_t)clen > f->data_end - (uint64_t)start) {
        rc = cerr(c, MR_E_CORRUPT, "chunk byte range [%lld, +%lld) lies outside the data section", (long long)start,
                  (long long)clen);
        goto done;
    }
    const uint8_t *buf;
    if ((buf = window_find(win, (uint64_t)start, (uint64_t)clen)) != NULL) {
        /* fetched ahead with the row group's other chunks */
    } else if (f->mem) {
        buf = f->mem + start; /* a mapped file's pages are read here: count them as read */
        if (f->map_len) __atomic_fetch_add(&f->bytes_read, (uint64_t)clen, __ATOMIC_RELAXED);
    } else {
        owned = mr_malloc(clen ? (size_t)clen : 1);
        if (!owned) {
            rc = cerr(c, MR_E_NOMEM, "out of memory reading %lld bytes", (long long)clen);
            goto done;
        }
        rc = mr__pq_read_at(f, (uint64_t)start, (size_t)clen, owned, err);
        if (rc != MR_OK) goto done;
        buf = owned;
    }
    size_t pos = 0, len = (size_t)clen;
    while (c->rows_done < c->rows_total || (pos < len && !c->col)) {
        if (pos >= len) {
            rc = cerr(c, MR_E_CORRUPT, "chunk ends after %zu of %zu rows", c->rows_done, c->rows_total);
            goto done;
        }
        mr__tc_reader r;
        mr__tc_reader_init(&r, buf + pos, len - pos);
        page_hdr h;
        parse_page_header(&r, &h);
        if (r.bad) {
            rc = cerr(c, MR_E_CORRUPT, "page %zu header: %s", c->page_no, r.why ? r.why : "malformed");
            goto done;
        }
        pos = (size_t)(r.p - buf);
        if (h.csize >= 0 && h.usize >= 0 && (size_t)h.csize > len - pos) {
            rc = cerr(c, MR_E_CORRUPT,
                      "page %zu: its %d bytes end %zu bytes past the column chunk's declared size (total_compressed_size "
                      "%zu bytes)",
                      c->page_no, h.csize, (size_t)h.csize - (len - pos), len);
            goto done;
        }
        if (h.csize < 0 || h.usize < 0 || (size_t)h.usize > MR__PQ_MAX_PAGE) {
            rc = cerr(c, MR_E_CORRUPT, "page %zu: sizes (compressed %d, uncompressed %d) out of range", c->page_no,
                      h.csize, h.usize);
            goto done;
        }
        const uint8_t *raw = buf + pos;
        size_t csize = (size_t)h.csize;
        pos += csize;
        if (h.has_crc && f->verify_crc && (h.type == MR__PQ_DATA_PAGE || h.type == MR__PQ_DATA_PAGE_V2 ||
                                           h.type == MR__PQ_DICTIONARY_PAGE)) {
            uint32_t got = mr__pq_crc32(raw, csize);
            if (got != h.crc) {
                rc = cerr(c, MR_E_CORRUPT, "page %zu: CRC mismatch (stored %08x, computed %08x)", c->page_no, h.crc, got);
                goto done;
            }
        }
        if (h.type == MR__PQ_DICTIONARY_PAGE) {
            if (!h.has_sub) {
                rc = cerr(c, MR_E_CORRUPT, "page %zu: dictionary page without its header", c->page_no);
                goto done;
            }
            const uint8_t *pg;
            rc = page_bytes(c, raw, csize, (size_t)h.usize, &pg);
            if (rc == MR_OK) rc = read_dictionary(c, pg, (size_t)h.usize, h.n_values, h.encoding);
        } else if (h.type == MR__PQ_DATA_PAGE || h.type == MR__PQ_DATA_PAGE_V2) {
            if (!h.has_sub) {
                rc = cerr(c, MR_E_CORRUPT, "page %zu: data page without its header", c->page_no);
                goto done;
            }
            rc = data_page(c, &h, raw, csize);
        } /* index pages and unknown page types are skipped */
        if (rc != MR_OK) goto done;
        c->page_no++;
    }
    rc = ensure_column(c);
    if (rc != MR_OK) goto done;
    if (c->col->n != c->rows_total) {
        rc = cerr(c, MR_E_CORRUPT, "chunk has %zu values, the row group has %zu rows", c->col->n, c->rows_total);
        goto done;
    }
    size_t bad;
    /* 32-bit values always fit an int32 or uint32 kind; narrower kinds, INT64 values of any narrower or
     * unsigned kind, and decimals (their precision) may not */
    const mr_colkind *kd = &c->col->kind;
    int check = c->col->type == MR_T_DECIMAL || (kd->int_bits && kd->int_bits < 32) ||
                (c->L->cv == CV_I64 && (kd->int_bits || (kd->flags & MR_KIND_UNSIGNED)));
    if (check && !mr_column_fits_kind(c->col, &bad)) { /* a UINT64 above INT64_MAX, or a value wider than its annotation */
        char kn[24];
        int64_t v = ((const int64_t *)c->col->data)[bad];
        if ((c->col->kind.flags & MR_KIND_UNSIGNED) && !c->col->kind.int_bits)
            rc = cerr(c, MR_E_LIMIT, "row %zu: the uint64 value %llu is above 9223372036854775807, the largest kept", bad,
                      (unsigned long long)v);
        else {
            mr_buf val;
            mr_buf_init(&val);
            mr_column_format(c->col, bad, &val);
            rc = cerr(c, MR_E_CORRUPT, "row %zu: the value %s does not fit the column's type %s", bad,
                      val.data ? val.data : "?", mr_kind_name(c->col->type, c->col->kind, kn, sizeof kn));
            mr_buf_free(&val);
        }
        goto done;
    }
    *out = c->col;
    c->col = NULL;
done:
    mr_column_free(c->col);
    mr_free(owned);
    mr_free(c->dict_buf);
    if (c->dict_vals != c->dict_buf) mr_free(c->dict_vals);
    mr_free(c->dict_bav);
    mr_free(c->page);
    mr_free(c->lev);
    mr_free(c->idx);
    mr_free(c->vals);
    mr_free(c->bv);
    mr_free(c->u64);
    mr_free(c->dba);
    return rc;
}

typedef struct rg_read_job {
    mr_parquet_file *f;
    size_t rg;
    const size_t *cols;
    mr_column **got;
    mr_status *rcs;
    mr_error **errs; /* per column, only for one that failed (an mr_error is 2 KB) */
    void **zctx;     /* per pool thread: its zstd context, made on first use */
    const pq_window *win;
} rg_read_job;

static void rg_read_range(void *ctx, size_t begin, size_t end, int tid)
{
    rg_read_job *j = ctx;
    for (size_t k = begin; k < end; k++) {
        mr_error e;
        mr_error_init(&e);
        j->rcs[k] = read_chunk(j->f, j->rg, j->cols ? j->cols[k] : k, j->win, &j->got[k], &j->zctx[tid], &e);
        if (j->rcs[k] != MR_OK) {
            j->errs[k] = mr_malloc(sizeof(e));
            if (j->errs[k]) *j->errs[k] = e;
        }
    }
}

mr_status mr_parquet_read_row_group(mr_parquet_file *f, size_t rg, const size_t *cols, size_t n_cols,
                                    mr_table **out, mr_error *err)
{
    *out = NULL;
    if (rg >= f->n_rg) return mr__pq_ferr(f, err, MR_E_INVALID_ARG, "row group %zu out of range (%zu row groups)", rg, f->n_rg);
    size_t n = cols ? n_cols : f->n_leaves;
    for (size_t k = 0; cols && k < n; k++)
        if (cols[k] >= f->n_leaves)
            return mr__pq_ferr(f, err, MR_E_INVALID_ARG, "column index %zu out of range (%zu columns)", cols[k], f->n_leaves);
    mr_table *t = NULL;
    mr_status rc = mr_table_new(&t, err);
    mr_column **got = rc == MR_OK ? mr_calloc(n ? n : 1, sizeof *got) : NULL;
    mr_status *rcs = got ? mr_calloc(n ? n : 1, sizeof *rcs) : NULL;
    mr_error **errs = rcs ? mr_calloc(n ? n : 1, sizeof *errs) : NULL;
    size_t n_threads = (size_t)mr_pool_threads();
    void **zctx = errs ? mr_calloc(n_threads, sizeof *zctx) : NULL;
    if (rc == MR_OK && !zctx) rc = mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory");
    pq_window win = {0, NULL, NULL};
    if (rc == MR_OK && f->rread) rc = window_fill(f, rg, cols, n_cols, &win, err);
    if (rc == MR_OK) { /* column chunks are independent: decode them in parallel */
        rg_read_job job = {f, rg, cols, got, rcs, errs, zctx, &win};
        mr_parallel_for(n, 1, rg_read_range, &job);
    }
    window_free(&win);
    for (size_t k = 0; zctx && k < n_threads; k++) mr__pq_decompress_ctx_free(zctx[k]);
    mr_free(zctx);
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        if (rcs[k] != MR_OK) { /* the first failing column, in column order */
            rc = rcs[k];
            if (err && !mr_error_is_set(err)) {
                if (errs[k]) *err = *errs[k];
                else mr__pq_ferr(f, err, rc, "out of memory reading column %zu", cols ? cols[k] : k);
            }
            break;
        }
        rc = mr_table_add_column(t, got[k], err);
        got[k] = NULL;
        if (rc != MR_OK && err) mr_error_at(err, f->path, 0, 0);
    }
    for (size_t k = 0; got && k < n; k++) mr_column_free(got[k]);
    mr_free(got);
    mr_free(rcs);
    for (size_t k = 0; errs && k < n; k++) mr_free(errs[k]);
    mr_free(errs);
    if (rc == MR_OK && n == 0) t->n_rows = (size_t)f->rgs[rg].num_rows;
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

mr_status mr_parquet_read_all(mr_parquet_file *f, const size_t *cols, size_t n_cols, mr_table **out, mr_error *err)
{
    *out = NULL;
    mr_table *all = NULL;
    mr_status rc = MR_OK;
    for (size_t g = 0; g < f->n_rg && rc == MR_OK; g++) {
        mr_table *t = NULL;
        rc = mr_parquet_read_row_group(f, g, cols, n_cols, &t, err);
        if (rc != MR_OK) break;
        if (!all) {
            all = t;
            continue;
        }
        if (t->n_rows == 0) { /* nothing to add (and table.c's fast path memcpy()s from a NULL buffer) */
            mr_table_free(t);
            continue;
        }
        rc = mr_table_append(all, t, err);
        mr_table_free(t);
    }
    if (rc == MR_OK && !all) {
        /* no row groups: an empty table with the schema's readable columns */
        rc = mr_table_new(&all, err);
        size_t n = cols ? n_cols : f->n_leaves;
        for (size_t k = 0; rc == MR_OK && k < n; k++) {
            size_t ci = cols ? cols[k] : k;
            if (ci >= f->n_leaves) {
                rc = mr__pq_ferr(f, err, MR_E_INVALID_ARG, "column index %zu out of range", ci);
                break;
            }
            const pq_leaf *L = &f->leaves[ci];
            if (L->info.dtype == MR_T_NULL) {
                rc = mr__pq_ferr(f, err, MR_E_SCHEMA, "column '%s': %s", L->name,
                          L->info.nested ? "nested/repeated columns are not supported" : "type is not supported");
                break;
            }
            mr_column *col = NULL;
            rc = mr_column_new(L->name, L->info.dtype, 0, &col, err);
            if (rc == MR_OK) col->kind = L->info.kind;
            if (rc == MR_OK) rc = mr_table_add_column(all, col, err);
        }
    }
    if (rc != MR_OK) {
        mr_table_free(all);
        return rc;
    }
    *out = all;
    return MR_OK;
}
