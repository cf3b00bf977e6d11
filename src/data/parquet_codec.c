/* Parquet page codecs (snappy, gzip, zstd, LZ4_RAW; the deprecated LZ4 read
 * in each of the framings writers used), page CRC, and the RLE/bit-packed
 * hybrid encoding used for levels, dictionary indices and RLE booleans.
 * LZO and BROTLI are not supported. */
#include "data/parquet_int.h"

#include <limits.h>
#include <lz4.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

uint32_t mr__pq_crc32(const uint8_t *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt k = n > UINT_MAX ? UINT_MAX : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* zlib allocates through core (counted and failed by the torture hook). */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return mr_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    mr_free(p);
}

/* gzip: a page may hold several concatenated gzip members; all are decoded
 * (inflateReset between members). Trailing zero padding is ignored. */
static mr_status gunzip(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len, const char **why)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = z_alloc;
    zs.zfree = z_free;
    if (src_len > UINT_MAX || dst_len > UINT_MAX) {
        *why = "gzip page too large";
        return MR_E_CORRUPT;
    }
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        *why = "cannot initialise zlib";
        return MR_E_NOMEM;
    }
    mr_status rc = MR_OK;
    size_t produced = 0;
    uint8_t scratch;
    zs.next_in = (Bytef *)(uintptr_t)src;
    zs.avail_in = (uInt)src_len;
    for (;;) {
        int full = produced == dst_len;
        zs.next_out = full ? &scratch : dst + produced;
        zs.avail_out = full ? 1 : (uInt)(dst_len - produced);
        uInt before = zs.avail_out;
        int z = inflate(&zs, Z_NO_FLUSH);
        size_t got = before - zs.avail_out;
        if (full && got) {
            rc = MR_E_CORRUPT;
            *why = "gzip data larger than the page's uncompressed size";
            break;
        }
        produced += got;
        if (z == Z_STREAM_END) {
            int more = 0;
            for (uInt i = 0; i < zs.avail_in; i++)
                if (zs.next_in[i]) {
                    more = 1;
                    break;
                }
            if (!more) break;
            if (inflateReset(&zs) != Z_OK) {
                rc = MR_E_CORRUPT;
                *why = "gzip stream error";
                break;
            }
            continue;
        }
        if (z == Z_OK) continue;
        rc = z == Z_MEM_ERROR ? MR_E_NOMEM : MR_E_CORRUPT;
        *why = z == Z_MEM_ERROR ? "out of memory in zlib" : z == Z_BUF_ERROR ? "truncated gzip data" : "invalid gzip data";
        break;
    }
    inflateEnd(&zs);
    if (rc == MR_OK && produced != dst_len) {
        rc = MR_E_CORRUPT;
        *why = "gzip data does not match the page's uncompressed size";
    }
    return rc;
}

void mr__pq_decompress_ctx_free(void *zctx) { ZSTD_freeDCtx((ZSTD_DCtx *)zctx); }

/* One LZ4 block (LZ4_RAW pages; the blocks of the framings below) that
 * decodes to exactly dst_len bytes: 1, else 0. */
static int lz4_block(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    if (src_len > INT_MAX || dst_len > INT_MAX) return 0;
    if (dst_len == 0) return src_len == 1 && src[0] == 0; /* the one encoding of nothing */
    return LZ4_decompress_safe((const char *)src, (char *)dst, (int)src_len, (int)dst_len) == (int)dst_len;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Hadoop's framing (parquet-mr's LZ4, Arrow's LZ4_HADOOP): blocks of a
 * 4-byte big-endian decompressed size, a 4-byte big-endian compressed size
 * and that many bytes of one LZ4 block, covering the page exactly. */
static int lz4_hadoop(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    size_t in = 0, out = 0;
    while (in < src_len) {
        if (src_len - in < 8) return 0;
        size_t raw = be32(src + in), comp = be32(src + in + 4);
        in += 8;
        if (comp > src_len - in || raw > dst_len - out || !lz4_block(src + in, comp, dst + out, raw)) return 0;
        in += comp;
        out += raw;
    }
    return out == dst_len && src_len > 0;
}

/* The LZ4 frame format (magic 04 22 4D 18), which some writers put in LZ4
 * pages: the frame decodes to exactly dst_len bytes. */
static mr_status lz4_frame(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len, int *ok)
{
    *ok = 0;
    LZ4F_dctx *d = NULL;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION))) return MR_E_NOMEM;
    size_t in = 0, out = 0, hint = 1;
    while (hint != 0 && in < src_len) {
        size_t dn = dst_len - out, sn = src_len - in;
        hint = LZ4F_decompress(d, dst + out, &dn, src + in, &sn, NULL);
        if (LZ4F_isError(hint)) break;
        in += sn;
        out += dn;
        if (sn == 0 && dn == 0) break; /* no progress: output full, or truncated input */
    }
    *ok = !LZ4F_isError(hint) && hint == 0 && in == src_len && out == dst_len;
    LZ4F_freeDecompressionContext(d);
    return MR_OK;
}

/* Parquet's deprecated LZ4 codec meant Hadoop's framing to parquet-mr and
 * the frame format or a bare block to other writers; like Arrow, each is
 * tried in turn, and only an exact decode of the page's size counts. */
static mr_status lz4_legacy(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len, const char **why)
{
    if (lz4_hadoop(src, src_len, dst, dst_len)) return MR_OK;
    if (src_len >= 4 && mr_le_get32(src) == LZ4F_MAGICNUMBER) {
        int ok;
        if (lz4_frame(src, src_len, dst, dst_len, &ok) != MR_OK) {
            *why = "out of memory";
            return MR_E_NOMEM;
        }
        if (ok) return MR_OK;
    }
    if (lz4_block(src, src_len, dst, dst_len)) return MR_OK;
    *why = "invalid LZ4 data (neither Hadoop-framed, an LZ4 frame nor an LZ4 block of the page's size)";
    return MR_E_CORRUPT;
}

mr_status mr__pq_decompress(mr_parquet_codec codec, const uint8_t *src, size_t src_len, uint8_t *dst,
                            size_t dst_len, void **zctx, const char **why)
{
    switch (codec) {
    case MR_PQ_UNCOMPRESSED:
        if (src_len != dst_len) {
            *why = "uncompressed page size differs from its compressed size";
            return MR_E_CORRUPT;
        }
        if (src_len) memcpy(dst, src, src_len);
        return MR_OK;
    case MR_PQ_SNAPPY: {
        size_t n = 0;
        if (snappy_uncompressed_length((const char *)src, src_len, &n) != SNAPPY_OK || n != dst_len) {
            *why = "snappy data does not match the page's uncompressed size";
            return MR_E_CORRUPT;
        }
        if (n == 0) return MR_OK;
        if (snappy_uncompress((const char *)src, src_len, (char *)dst, &n) != SNAPPY_OK || n != dst_len) {
            *why = "invalid snappy data";
            return MR_E_CORRUPT;
        }
        return MR_OK;
    }
    case MR_PQ_GZIP: return gunzip(src, src_len, dst, dst_len, why);
    case MR_PQ_LZ4_RAW:
        if (lz4_block(src, src_len, dst, dst_len)) return MR_OK;
        *why = "invalid LZ4_RAW data, or it does not match the page's uncompressed size";
        return MR_E_CORRUPT;
    case MR_PQ_LZ4: return lz4_legacy(src, src_len, dst, dst_len, why);
    case MR_PQ_ZSTD: {
        if (!*zctx) *zctx = ZSTD_createDCtx();
        if (!*zctx) {
            *why = "out of memory";
            return MR_E_NOMEM;
        }
        size_t n = ZSTD_decompressDCtx((ZSTD_DCtx *)*zctx, dst, dst_len, src, src_len);
        if (ZSTD_isError(n)) {
            *why = "invalid zstd data";
            return MR_E_CORRUPT;
        }
        if (n != dst_len) {
            *why = "zstd data does not match the page's uncompressed size";
            return MR_E_CORRUPT;
        }
        return MR_OK;
    }
    default: *why = "unsupported compression codec"; return MR_E_INVALID_ARG;
    }
}

void mr__pq_compress_ctx_free(void *zctx) { ZSTD_freeCCtx((ZSTD_CCtx *)zctx); }

mr_status mr__pq_compress(mr_parquet_codec codec, int level, const uint8_t *src, size_t src_len, mr_buf *out,
                          void **zctx)
{
    size_t bound;
    switch (codec) {
    case MR_PQ_UNCOMPRESSED: return mr_buf_append(out, src, src_len);
    case MR_PQ_SNAPPY: bound = snappy_max_compressed_length(src_len); break;
    case MR_PQ_GZIP: bound = src_len + src_len / 1000 + 64 + 18; break;
    case MR_PQ_ZSTD: bound = ZSTD_compressBound(src_len); break;
    case MR_PQ_LZ4_RAW:
        if (src_len > LZ4_MAX_INPUT_SIZE) return MR_E_LIMIT;
        bound = (size_t)LZ4_compressBound((int)src_len);
        break;
    default: return MR_E_INVALID_ARG;
    }
    if (bound < src_len || bound > MR__PQ_MAX_PAGE * 2) return MR_E_LIMIT;
    /* grow out so that bound more bytes fit (mr_buf keeps a NUL after data) */
    if (out->len + bound + 1 > out->cap) {
        size_t need = out->len + bound + 1;
        char *nd = mr_realloc(out->data, need);
        if (!nd) return MR_E_NOMEM;
        out->data = nd;
        out->cap = need;
    }
    uint8_t *dst = (uint8_t *)out->data + out->len;
    size_t n = bound;
    if (codec == MR_PQ_SNAPPY) {
        if (snappy_compress((const char *)src, src_len, (char *)dst, &n) != SNAPPY_OK) return MR_E_INTERNAL;
    } else if (codec == MR_PQ_LZ4_RAW) {
        int k = LZ4_compress_default((const char *)src, (char *)dst, (int)src_len, (int)bound);
        if (k <= 0) return MR_E_INTERNAL;
        n = (size_t)k;
    } else if (codec == MR_PQ_ZSTD) {
        if (!*zctx) *zctx = ZSTD_createCCtx();
        if (!*zctx) return MR_E_NOMEM;
        n = ZSTD_compressCCtx((ZSTD_CCtx *)*zctx, dst, bound, src, src_len, level ? level : 3);
        if (ZSTD_isError(n)) return MR_E_INTERNAL;
    } else {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        zs.zalloc = z_alloc;
        zs.zfree = z_free;
        if (src_len > UINT_MAX || bound > UINT_MAX) return MR_E_LIMIT;
        if (deflateInit2(&zs, level ? level : 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return MR_E_NOMEM;
        uLong b2 = deflateBound(&zs, (uLong)src_len);
        if (b2 > bound) {
            deflateEnd(&zs);
            return MR_E_INTERNAL;
        }
        zs.next_in = (Bytef *)(uintptr_t)src;
        zs.avail_in = (uInt)src_len;
        zs.next_out = dst;
        zs.avail_out = (uInt)bound;
        int z = deflate(&zs, Z_FINISH);
        n = zs.total_out;
        deflateEnd(&zs);
        if (z != Z_STREAM_END) return MR_E_INTERNAL;
    }
    out->len += n;
    out->data[out->len] = '\0';
    return MR_OK;
}

/* ---- RLE / bit-packed hybrid --------------------------------------------
 * A sequence of runs, each starting with a ULEB128 header h:
 *   h & 1 == 0: RLE run of h >> 1 copies of one value stored in ceil(bw/8)
 *               little-endian bytes;
 *   h & 1 == 1: bit-packed run of (h >> 1) groups of 8 values, bw bits each,
 *               packed LSB first (group g takes bytes [g*bw, (g+1)*bw)).
 * The last bit-packed run may be padded past the values wanted. */

static int uleb(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *p = *pp;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

static inline uint32_t get_bits32(const uint8_t *p, uint64_t bitpos, unsigned bw)
{
    uint64_t v = 0;
    size_t byte = (size_t)(bitpos >> 3);
    unsigned sh = (unsigned)(bitpos & 7);
    unsigned nbytes = (sh + bw + 7) / 8;
    for (unsigned k = 0; k < nbytes; k++) v |= (uint64_t)p[byte + k] << (8 * k);
    v >>= sh;
    return bw == 32 ? (uint32_t)v : (uint32_t)(v & ((1u << bw) - 1));
}

int mr__pq_rle_decode(const uint8_t *p, size_t len, unsigned bw, uint32_t *out, size_t n)
{
    const uint8_t *end = p + len;
    size_t i = 0;
    if (bw > 32) return -1;
    unsigned vbytes = (bw + 7) / 8;
    while (i < n) {
        uint64_t h;
        if (uleb(&p, end, &h)) return -1;
        if (h & 1) {
            uint64_t groups = h >> 1;
            if (groups == 0) continue;
            if (groups > (uint64_t)SIZE_MAX / 8 / 32) return -1;
            size_t count = (size_t)groups * 8;
            size_t bytes = (size_t)groups * bw;
            size_t avail = (size_t)(end - p);
            if (bytes > avail) {
                /* tolerate a truncated final run if it still holds what we need */
                bytes = avail;
                count = bw ? bytes * 8 / bw : count;
            }
            size_t take = count < n - i ? count : n - i;
            if (bw == 0) {
                memset(out + i, 0, take * sizeof(uint32_t));
            } else if (bw == 8) {
                for (size_t k = 0; k < take; k++) out[i + k] = p[k];
            } else {
                for (size_t k = 0; k < take; k++) out[i + k] = get_bits32(p, (uint64_t)k * bw, bw);
            }
            i += take;
            p += bytes;
        } else {
            uint64_t count = h >> 1;
            if ((size_t)(end - p) < vbytes) return -1;
            uint32_t v = 0;
            for (unsigned k = 0; k < vbytes; k++) v |= (uint32_t)p[k] << (8 * k);
            p += vbytes;
            if (bw < 32 && (v >> bw)) return -1;
            size_t take = count < (uint64_t)(n - i) ? (size_t)count : n - i;
            for (size_t k = 0; k < take; k++) out[i + k] = v;
            i += take;
        }
    }
    return 0;
}

static mr_status put_uleb(mr_buf *out, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return mr_buf_append(out, b, n);
}

/* Bit-packs groups (8 values each, already padded) and appends the run. */
static mr_status flush_literals(const uint32_t *lit, size_t n_groups, unsigned bw, mr_buf *out)
{
    if (!n_groups) return MR_OK;
    mr_status rc = put_uleb(out, (uint64_t)n_groups << 1 | 1);
    if (rc != MR_OK) return rc;
    uint8_t packed[32];
    for (size_t g = 0; g < n_groups; g++) {
        memset(packed, 0, bw);
        uint64_t acc = 0;
        unsigned nbits = 0;
        size_t o = 0;
        for (unsigned k = 0; k < 8; k++) {
            acc |= (uint64_t)lit[g * 8 + k] << nbits;
            nbits += bw;
            while (nbits >= 8) {
                packed[o++] = (uint8_t)acc;
                acc >>= 8;
                nbits -= 8;
            }
        }
        if ((rc = mr_buf_append(out, packed, bw)) != MR_OK) return rc;
    }
    return MR_OK;
}

/* Literal values are staged in groups of 8 (max 64 groups per run). Values
 * come from a u32 or a u8 array (levels). Padding only ever ends the stream. */
#define LIT_GROUPS 64

static mr_status encode_impl(const uint32_t *v32, const uint8_t *v8, size_t n, unsigned bw, mr_buf *out)
{
    uint32_t lit[LIT_GROUPS * 8];
    size_t n_lit = 0; /* values staged, multiple of 8 */
    unsigned vbytes = (bw + 7) / 8;
    size_t i = 0;
    mr_status rc = MR_OK;
#define VAL(k) (v32 ? v32[k] : (uint32_t)v8[k])
    MR_ASSERT(bw >= 1 && bw <= 32);
    while (i < n && rc == MR_OK) {
        size_t r = 1;
        uint32_t cur = VAL(i);
        while (i + r < n && VAL(i + r) == cur) r++;
        if (r >= 8) {
            rc = flush_literals(lit, n_lit / 8, bw, out);
            n_lit = 0;
            if (rc == MR_OK) rc = put_uleb(out, (uint64_t)r << 1);
            uint8_t b[4];
            for (unsigned k = 0; k < vbytes; k++) b[k] = (uint8_t)(cur >> (8 * k));
            if (rc == MR_OK) rc = mr_buf_append(out, b, vbytes);
            i += r;
        } else {
            size_t take = n - i < 8 ? n - i : 8;
            for (size_t k = 0; k < 8; k++) lit[n_lit + k] = k < take ? VAL(i + k) : 0;
            n_lit += 8;
            i += take;
            if (n_lit == LIT_GROUPS * 8) {
                rc = flush_literals(lit, LIT_GROUPS, bw, out);
                n_lit = 0;
            }
        }
    }
#undef VAL
    if (rc == MR_OK) rc = flush_literals(lit, n_lit / 8, bw, out);
    return rc;
}

mr_status mr__pq_rle_encode(const uint32_t *v, size_t n, unsigned bw, mr_buf *out)
{
    return encode_impl(v, NULL, n, bw, out);
}

mr_status mr__pq_rle_encode_u8(const uint8_t *v, size_t n, unsigned bw, mr_buf *out)
{
    return encode_impl(NULL, v, n, bw, out);
}
