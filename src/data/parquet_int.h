/* Internals shared by the Parquet reader and writer: parquet.thrift enum
 * values, page codecs (snappy, gzip, zstd), the RLE/bit-packed hybrid, and
 * the reader's file model shared by its two halves (parquet_meta.c: footer
 * and metadata; parquet_read.c: page and value decoding). */
#ifndef MILLRACE_DATA_PARQUET_INT_H
#define MILLRACE_DATA_PARQUET_INT_H

#include "millrace/parquet.h"

#include <math.h>
#include <string.h>

/* Encoding (parquet.thrift). */
enum {
    MR__PQ_ENC_PLAIN = 0,
    MR__PQ_ENC_PLAIN_DICTIONARY = 2,
    MR__PQ_ENC_RLE = 3,
    MR__PQ_ENC_BIT_PACKED = 4,
    MR__PQ_ENC_DELTA_BINARY_PACKED = 5,
    MR__PQ_ENC_DELTA_LENGTH_BYTE_ARRAY = 6,
    MR__PQ_ENC_DELTA_BYTE_ARRAY = 7,
    MR__PQ_ENC_RLE_DICTIONARY = 8,
    MR__PQ_ENC_BYTE_STREAM_SPLIT = 9,
};

/* PageType. */
enum { MR__PQ_DATA_PAGE = 0, MR__PQ_INDEX_PAGE = 1, MR__PQ_DICTIONARY_PAGE = 2, MR__PQ_DATA_PAGE_V2 = 3 };

/* ConvertedType. */
enum {
    MR__PQ_CT_UTF8 = 0,
    MR__PQ_CT_MAP = 1,
    MR__PQ_CT_MAP_KEY_VALUE = 2,
    MR__PQ_CT_LIST = 3,
    MR__PQ_CT_ENUM = 4,
    MR__PQ_CT_DECIMAL = 5,
    MR__PQ_CT_DATE = 6,
    MR__PQ_CT_TIME_MILLIS = 7,
    MR__PQ_CT_TIME_MICROS = 8,
    MR__PQ_CT_TIMESTAMP_MILLIS = 9,
    MR__PQ_CT_TIMESTAMP_MICROS = 10,
    MR__PQ_CT_UINT_8 = 11,
    MR__PQ_CT_UINT_16 = 12,
    MR__PQ_CT_UINT_32 = 13,
    MR__PQ_CT_UINT_64 = 14,
    MR__PQ_CT_INT_8 = 15,
    MR__PQ_CT_INT_16 = 16,
    MR__PQ_CT_INT_32 = 17,
    MR__PQ_CT_INT_64 = 18,
    MR__PQ_CT_JSON = 19,
    MR__PQ_CT_BSON = 20,
    MR__PQ_CT_INTERVAL = 21,
};

/* Largest page (compressed or not) either side accepts: bounds the buffers a
 * hostile header can make us allocate. */
#define MR__PQ_MAX_PAGE ((size_t)1 << 30)

/* Decompresses src into exactly dst_len bytes. Returns MR_OK, or
 * MR_E_CORRUPT (bad stream or wrong size) / MR_E_INVALID_ARG (unsupported
 * codec) / MR_E_NOMEM with *why set to a static explanation. *zctx: a zstd
 * decompression context kept by the caller, as for mr__pq_compress (freed
 * with mr__pq_decompress_ctx_free). */
mr_status mr__pq_decompress(mr_parquet_codec codec, const uint8_t *src, size_t src_len, uint8_t *dst,
                            size_t dst_len, void **zctx, const char **why);
void mr__pq_decompress_ctx_free(void *zctx);
/* Compresses src, appending to out. level 0 = codec default. *zctx is a
 * zstd context kept by the caller between calls (NULL at first; created on
 * the first zstd page, freed with mr__pq_compress_ctx_free): one context per
 * writer thread instead of one allocation per page, with the same bytes out
 * (ZSTD_compress is ZSTD_compressCCtx on a fresh context). */
mr_status mr__pq_compress(mr_parquet_codec codec, int level, const uint8_t *src, size_t src_len, mr_buf *out,
                          void **zctx);
void mr__pq_compress_ctx_free(void *zctx);
uint32_t mr__pq_crc32(const uint8_t *p, size_t n);

/* The kinds the columns are written as (instead of the first batch's), for a
 * dataset whose shards must all have the manifest's schema. MR_E_NOMEM. */
mr_status mr__pq_writer_set_kinds(mr_parquet_writer *w, const mr_colkind *kinds, size_t n);
/* Feeds every byte the writer writes from now on to h (borrowed; must outlive
 * the writer), so a caller needing the file's hash need not read it back. */
void mr__pq_writer_hash(mr_parquet_writer *w, mr_hasher *h);
/* mr_parquet_writer_write of rows [b, e) of t, without copying them out. */
mr_status mr__pq_writer_write_range(mr_parquet_writer *w, const mr_table *t, size_t b, size_t e, mr_error *err);
/* Bytes written so far (the file's size once closed). */
uint64_t mr__pq_writer_bytes(const mr_parquet_writer *w);

/* RLE/bit-packed hybrid decoding of exactly n values of bit width bw (<= 32)
 * from [p, p+len) into out. Returns 0, or -1 when the data is malformed or
 * ends before n values. */
int mr__pq_rle_decode(const uint8_t *p, size_t len, unsigned bw, uint32_t *out, size_t n);
/* Encodes n values of width bw (<= 32), appending to out (no length prefix). */
mr_status mr__pq_rle_encode(const uint32_t *v, size_t n, unsigned bw, mr_buf *out);
/* Same for 8-bit levels (def levels). */
mr_status mr__pq_rle_encode_u8(const uint8_t *v, size_t n, unsigned bw, mr_buf *out);

/* ---- the reader's file model ------------------------------------------------
 * parquet_meta.c parses the footer (FileMetaData: schema, row groups, column
 * chunk metadata and statistics) into these; parquet_read.c decodes column
 * chunks (pages, levels, encodings, value conversion) with them. */

/* Logical meaning of a leaf, from LogicalType (preferred) or ConvertedType. */
enum {
    LT_NONE,
    LT_STRING,
    LT_ENUM,
    LT_JSON,
    LT_BSON,
    LT_UUID,
    LT_DECIMAL,
    LT_DATE,
    LT_TIME,
    LT_TIMESTAMP,
    LT_INT,
    LT_FLOAT16,
    LT_OTHER, /* MAP, LIST, INTERVAL, VARIANT, GEOMETRY, ...: not a flat value */
};
enum { TU_MILLIS = 1, TU_MICROS = 2, TU_NANOS = 3 };

/* How a leaf's physical values become column values. */
enum {
    CV_NONE,      /* cannot read */
    CV_BOOL,
    CV_I32,       /* INT32 -> INT64 (signed) */
    CV_U32,       /* INT32 -> INT64 (unsigned) */
    CV_I64,
    CV_DATE,      /* INT32 days */
    CV_TS32,      /* INT32 time (millis) -> INT64 micros */
    CV_TS64,      /* INT64 time/timestamp, scaled to micros */
    CV_INT96,     /* INT96 -> TIMESTAMP */
    CV_F32,
    CV_F64,
    CV_DEC32,
    CV_DEC64,
    CV_DECBYTES,  /* BYTE_ARRAY / FLBA big-endian two's complement */
    CV_F16,
    CV_STR,       /* BYTE_ARRAY / FLBA bytes */
};

typedef struct pq_leaf {
    mr_parquet_column_info info;
    char *name;
    int max_def, max_rep;
    int lt, unit, utc, int_bits, int_signed;
    int cv;
} pq_leaf;

typedef struct pq_chunk {
    int has_meta;
    int type;
    int codec;
    int has_file_path;
    int64_t num_values;
    int64_t total_compressed;
    int64_t data_page_offset;
    int64_t dict_page_offset; /* 0 when absent */
    const uint8_t *min, *max, *min_value, *max_value;
    size_t min_len, max_len, min_value_len, max_value_len;
    int has_min, has_max, has_min_value, has_max_value;
    int has_null_count;
    int64_t null_count;
} pq_chunk;

typedef struct pq_rowgroup {
    int64_t num_rows;
    int64_t total_byte_size;
    size_t n_chunks;
    pq_chunk *chunks;
} pq_rowgroup;

struct mr_parquet_file {
    char *path;
    int fd;                 /* -1 for memory */
    const uint8_t *mem;     /* borrowed memory image or our own mapping, or NULL */
    size_t map_len;         /* > 0: mem is an mmap of the file, unmapped on close */
    uint64_t size;          /* file size */
    uint64_t data_end;      /* first byte of the footer (metadata) */
    uint8_t *meta;          /* footer bytes (owned; stats point into it) */
    int verify_crc;
    int64_t num_rows;
    char *created_by;
    size_t n_leaves;
    pq_leaf *leaves;
    mr_strindex leaf_ix;    /* leaf name -> first leaf of that name (mr_parquet_column_index) */
    size_t n_rg;
    pq_rowgroup *rgs;
    size_t n_kv;
    char **kv_keys, **kv_values;
    uint64_t bytes_read;    /* bytes pread from fd so far (atomic adds; mr_parquet_bytes_read) */
    mr_parquet_read_fn rread; /* a ranged file (mr_parquet_open_ranged): fd is -1, mem NULL */
    void *rctx;
    void (*rrelease)(void *ctx);
};

/* Bytes fetched ahead for one read of a row group from a ranged file: the
 * coalesced ranges of its column chunks (mr_parquet_plan_ranges). */
typedef struct pq_window {
    size_t n;
    mr_parquet_range *r;
    uint8_t **data;
} pq_window;

/* The byte range [*off, *off + *len) of column chunk (rg, ci) in the file;
 * 0 when the chunk has no readable range (no rows, no metadata, or offsets
 * outside the data section: reading it reports why). */
int mr__pq_chunk_range(const mr_parquet_file *f, size_t rg, size_t ci, uint64_t *off, uint64_t *len);

/* Sets err to "<path>: <formatted>" with code and returns code. */
mr_status mr__pq_ferr(const mr_parquet_file *f, mr_error *err, mr_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold));
/* Reads len bytes at off into dst (memcpy from a memory image or pread),
 * adding them to f->bytes_read; a range past the end is MR_E_CORRUPT. Safe
 * to call from several threads at once. */
mr_status mr__pq_read_at(const mr_parquet_file *f, uint64_t off, size_t len, uint8_t *dst, mr_error *err);

/* ---- value conversions (statistics and decoding share them; inline so that
 * the per-value loops stay free of calls) ------------------------------------- */

static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Big-endian two's complement integer of n bytes -> int64: 0, or -1 when
 * the value does not fit (more than 8 significant bytes). */
static inline int be_twos_to_i64(const uint8_t *p, size_t n, int64_t *out)
{
    if (n == 0) {
        *out = 0;
        return 0;
    }
    uint8_t ext = (p[0] & 0x80) ? 0xff : 0x00;
    size_t skip = 0;
    while (n - skip > 8 && p[skip] == ext) skip++; /* leading sign-extension bytes */
    if (n - skip > 8) return -1;
    if (n - skip == 8 && ((p[skip] ^ ext) & 0x80)) return -1; /* the sign changed past 64 bits */
    uint64_t u = ext ? ~(uint64_t)0 : 0;
    for (size_t i = skip; i < n; i++) u = u << 8 | p[i];
    *out = (int64_t)u;
    return 0;
}

/* INT96 (nanos of day, Julian day) -> microseconds since the epoch, with
 * the wrapping 64-bit arithmetic and truncating division Spark uses, so that
 * the values Spark wrote for dates beyond the nanosecond range (its
 * conversion overflows on write) come back as Spark reads them. */
static inline int int96_to_us(const uint8_t *p, int64_t *out)
{
    int64_t nanos = (int64_t)mr_le_get64(p);
    int64_t jd = (int32_t)mr_le_get32(p + 8);
    uint64_t us = (uint64_t)(jd - 2440588) * 86400000000ULL + (uint64_t)(nanos / 1000);
    *out = (int64_t)us;
    return 0;
}

/* Scales a time value of the leaf's unit to microseconds. */
static inline int to_us(int unit, int64_t v, int64_t *out)
{
    if (unit == TU_MILLIS) return __builtin_mul_overflow(v, (int64_t)1000, out) ? -1 : 0;
    if (unit == TU_NANOS) {
        *out = v / 1000 - ((v % 1000) < 0);
        return 0;
    }
    *out = v;
    return 0;
}

#endif
