/* Internals shared by the Parquet reader and writer: parquet.thrift enum
 * values, page codecs (snappy, gzip, zstd), and the RLE/bit-packed hybrid. */
#ifndef MILLRACE_DATA_PARQUET_INT_H
#define MILLRACE_DATA_PARQUET_INT_H

#include "millrace/parquet.h"

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
 * codec) with *why set to a static explanation. */
mr_status mr__pq_decompress(mr_parquet_codec codec, const uint8_t *src, size_t src_len, uint8_t *dst,
                            size_t dst_len, const char **why);
/* Compresses src, appending to out. level 0 = codec default. */
mr_status mr__pq_compress(mr_parquet_codec codec, int level, const uint8_t *src, size_t src_len, mr_buf *out);
uint32_t mr__pq_crc32(const uint8_t *p, size_t n);

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

#endif
