/* Parquet files: a reader for flat-schema files written by any tool, and a
 * writer that produces files any Parquet reader (DuckDB, pandas, Spark) opens.
 *
 * Example:
 *
 *   mr_parquet_file *pf;
 *   if (mr_parquet_open("data.parquet", &pf, &err) != MR_OK) { mr_log_error(&err); return; }
 *   for (size_t g = 0; g < mr_parquet_num_row_groups(pf); g++) {
 *       mr_table *t;
 *       if (mr_parquet_read_row_group(pf, g, NULL, 0, &t, &err) != MR_OK) {
 *           mr_log_error(&err);   // names the file, row group and column
 *           break;
 *       }
 *       // ... use t ...
 *       mr_table_free(t);
 *   }
 *   mr_parquet_close(pf);
 *
 * Example, writing (given const mr_table *t):
 *
 *   mr_parquet_write_opts o;
 *   mr_parquet_write_opts_init(&o);             // zstd level 3, 1Mi-row row groups
 *   if (mr_parquet_write_table("out.parquet", t, &o, &err) != MR_OK) mr_log_error(&err);
 *
 * Type mapping on read (docs/parquet.md has the full table):
 *   BOOLEAN -> BOOL; INT32/INT64 (plain, INT(8..64, signed or unsigned)) -> INT64;
 *   FLOAT -> FLOAT32; DOUBLE -> FLOAT64; FLOAT16 -> FLOAT32;
 *   DATE -> DATE; TIMESTAMP(ms/us/ns) and INT96 -> TIMESTAMP (microseconds, UTC);
 *   TIME -> INT64 (microseconds since midnight);
 *   DECIMAL(p, s) on INT32/INT64/BYTE_ARRAY/FIXED_LEN_BYTE_ARRAY -> FLOAT64 = unscaled / 10^s
 *   (exact up to 2^53, rounded beyond);
 *   BYTE_ARRAY (STRING/UTF8/ENUM/JSON/BSON/none) and other FIXED_LEN_BYTE_ARRAY -> STRING (raw bytes).
 * Dictionary-encoded BYTE_ARRAY chunks come out as dictionary STRING columns.
 * UINT_64 values above INT64_MAX wrap to negative int64 (two's complement).
 *
 * Ownership: an open file is the caller's (mr_parquet_close); tables read
 * are the caller's (mr_table_free); column infos, key-value metadata,
 * created_by and string statistics are borrowed from the file until close.
 * A writer is ended by mr_parquet_writer_close or mr_parquet_writer_free.
 * Status codes: MR_E_NOT_FOUND (no such file), MR_E_IO (open, read,
 * write), MR_E_CORRUPT (bad magic, footer, metadata or pages; a page CRC),
 * MR_E_SCHEMA (a nested, repeated or unsupported column; a writer batch of
 * another schema), MR_E_INVALID_ARG (an index out of range, an unsupported
 * write codec), MR_E_LIMIT, MR_E_STATE (a writer used after a failure),
 * MR_E_INTERNAL (a codec failed while compressing), MR_E_NOMEM. Messages
 * name the file.
 * Thread safety: a mr_parquet_file may be read from several threads at once
 * (reads use pread and allocate per call; settings such as
 * mr_parquet_set_verify_checksums are changed before reads start); reads
 * decode column chunks on the core pool. A writer belongs to one thread. */
#ifndef MILLRACE_PARQUET_H
#define MILLRACE_PARQUET_H

#include "millrace/core.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parquet physical types, numbered as in parquet.thrift. */
typedef enum mr_parquet_type {
    MR_PQ_BOOLEAN = 0,
    MR_PQ_INT32 = 1,
    MR_PQ_INT64 = 2,
    MR_PQ_INT96 = 3,
    MR_PQ_FLOAT = 4,
    MR_PQ_DOUBLE = 5,
    MR_PQ_BYTE_ARRAY = 6,
    MR_PQ_FIXED_LEN_BYTE_ARRAY = 7,
} mr_parquet_type;

/* Compression codecs, numbered as in parquet.thrift. */
typedef enum mr_parquet_codec {
    MR_PQ_UNCOMPRESSED = 0,
    MR_PQ_SNAPPY = 1,
    MR_PQ_GZIP = 2,
    MR_PQ_LZO = 3,    /* not supported */
    MR_PQ_BROTLI = 4, /* not supported */
    MR_PQ_LZ4 = 5,    /* deprecated: read (Hadoop-framed, LZ4 frame or bare block), not written */
    MR_PQ_ZSTD = 6,
    MR_PQ_LZ4_RAW = 7, /* read and written */
} mr_parquet_codec;

const char *mr_parquet_type_name(mr_parquet_type t);   /* "INT32" (static) */
const char *mr_parquet_codec_name(mr_parquet_codec c); /* "ZSTD" (static) */
/* Parses "none"/"uncompressed", "snappy", "gzip", "zstd" (case-insensitive);
 * MR_E_NOT_FOUND otherwise (no mr_error). */
mr_status mr_parquet_codec_parse(const char *name, mr_parquet_codec *out);

/* Repetition: 0 REQUIRED, 1 OPTIONAL, 2 REPEATED. */
typedef struct mr_parquet_column_info {
    const char *name;       /* leaf name; nested leaves use a dotted path "a.b" */
    mr_parquet_type physical;
    int type_length;        /* FIXED_LEN_BYTE_ARRAY width, else 0 */
    int repetition;
    int converted_type;     /* parquet.thrift ConvertedType, -1 if none */
    int scale, precision;   /* DECIMAL, else 0 */
    char logical[48];       /* "STRING", "DATE", "TIMESTAMP(MICROS,UTC)", "DECIMAL(9,2)", "INT(8,unsigned)", "" */
    int nested;             /* 1 when the column is inside a group or repeated (not readable) */
    mr_dtype dtype;         /* the column type a read produces; MR_T_NULL if the column cannot be read */
    mr_colkind kind;        /* and its kind: int widths, unsigned, binary, naive timestamps (INT96 and
                               isAdjustedToUTC=false or a ConvertedType only, as DuckDB reads them) */
} mr_parquet_column_info;

/* Per row group, per column chunk statistics, decoded into the read type:
 * int64 for BOOL/INT64/DATE(days)/TIMESTAMP(us), double for FLOAT32/FLOAT64
 * (and DECIMAL/FLOAT16), bytes for STRING. min_value/max_value are used when
 * present; the legacy min/max only for types whose order is signed
 * (BOOLEAN, signed INT32/INT64, FLOAT, DOUBLE), never for byte arrays or
 * unsigned ints. has_min_max is 0 when unknown (or a NaN bound). */
typedef enum mr_parquet_stat_kind { MR_PQ_STAT_NONE = 0, MR_PQ_STAT_INT = 1, MR_PQ_STAT_DOUBLE = 2, MR_PQ_STAT_STRING = 3 } mr_parquet_stat_kind;
typedef struct mr_parquet_stats {
    mr_parquet_stat_kind kind;
    int has_min_max;
    int has_null_count;
    int64_t null_count;
    int64_t num_values;     /* values in the chunk, nulls included */
    int64_t min_i, max_i;
    double min_d, max_d;
    const char *min_s, *max_s; /* borrowed from the file, valid until close; not NUL-terminated */
    size_t min_len, max_len;
} mr_parquet_stats;

typedef struct mr_parquet_file mr_parquet_file;

/* Opens a file and parses its footer. Errors: MR_E_NOT_FOUND (no such
 * file), MR_E_IO (cannot open/read), MR_E_CORRUPT (bad magic, footer,
 * metadata), MR_E_NOMEM. The message names the file. *out is the caller's. */
mr_status mr_parquet_open(const char *path, mr_parquet_file **out, mr_error *err);
/* The same for a file that nothing modifies while it is open (dataset
 * shards): mapped instead of pread, one copy fewer per column chunk. */
mr_status mr_parquet_open_mapped(const char *path, mr_parquet_file **out, mr_error *err);
/* Same over a memory buffer, which is borrowed and must outlive the handle.
 * name is used in error messages. */
mr_status mr_parquet_open_mem(const void *data, size_t len, const char *name, mr_parquet_file **out, mr_error *err);
void mr_parquet_close(mr_parquet_file *f); /* NULL is a no-op */

/* A file read by byte ranges through read (an object on S3: dataset.h
 * opens s3:// sources this way), size bytes long; name is used in
 * messages. read(ctx, off, len, dst, err) fills dst with exactly len bytes
 * at off, from several threads at once. The footer costs one read of the
 * last 64 KiB (a second only for a longer footer); each row group read
 * fetches its column chunks first, as the ranges mr_parquet_plan_ranges
 * gives, then decodes from memory. release(ctx), when not NULL, runs at
 * close (also when the open fails). */
typedef mr_status (*mr_parquet_read_fn)(void *ctx, uint64_t off, size_t len, uint8_t *dst, mr_error *err);
mr_status mr_parquet_open_ranged(const char *name, uint64_t size, mr_parquet_read_fn read, void *ctx,
                                 void (*release)(void *ctx), mr_parquet_file **out, mr_error *err);

/* The byte ranges a read of row group rg's columns cols (all when NULL)
 * fetches from a ranged file: the column chunks' ranges in file order,
 * those less than MR_PARQUET_COALESCE_GAP bytes apart merged into one
 * (up to MR_PARQUET_COALESCE_MAX bytes each). Writes up to cap ranges into
 * out and returns how many there are. */
#define MR_PARQUET_COALESCE_GAP (8u * 1024u)
#define MR_PARQUET_COALESCE_MAX (64u * 1024u * 1024u)
typedef struct mr_parquet_range {
    uint64_t off, len;
} mr_parquet_range;
size_t mr_parquet_plan_ranges(const mr_parquet_file *f, size_t rg, const size_t *cols, size_t n_cols,
                              mr_parquet_range *out, size_t cap);

/* Page CRCs are checked when present (mismatch -> MR_E_CORRUPT); 0 turns it off. */
void mr_parquet_set_verify_checksums(mr_parquet_file *f, int on);

/* Footer accessors: pure reads of the parsed metadata. */
int64_t mr_parquet_num_rows(const mr_parquet_file *f);
size_t mr_parquet_num_row_groups(const mr_parquet_file *f);
int64_t mr_parquet_row_group_rows(const mr_parquet_file *f, size_t rg);
int64_t mr_parquet_row_group_bytes(const mr_parquet_file *f, size_t rg); /* total_byte_size (uncompressed) */
/* Bytes a read of column chunk (rg, col) fetches from the file (total_compressed_size); -1 for bad indices. */
int64_t mr_parquet_chunk_bytes(const mr_parquet_file *f, size_t rg, size_t col);
/* Bytes read from the file descriptor so far (footer included; 0 for memory
 * images). Safe to call while other threads read. */
uint64_t mr_parquet_bytes_read(const mr_parquet_file *f);
size_t mr_parquet_num_columns(const mr_parquet_file *f);
/* Borrowed, valid until close. NULL if i is out of range. */
const mr_parquet_column_info *mr_parquet_column(const mr_parquet_file *f, size_t i);
ssize_t mr_parquet_column_index(const mr_parquet_file *f, const char *name); /* -1 if absent */
const char *mr_parquet_created_by(const mr_parquet_file *f); /* "" if absent */
size_t mr_parquet_num_kv(const mr_parquet_file *f);
/* Key-value metadata entry i (borrowed; *value_out is NULL when the value is absent). */
const char *mr_parquet_kv(const mr_parquet_file *f, size_t i, const char **value_out);
/* Codec of a column chunk (MR_E_INVALID_ARG for bad indices). */
mr_status mr_parquet_chunk_codec(const mr_parquet_file *f, size_t rg, size_t col, mr_parquet_codec *out);
/* Statistics of one column chunk; out->kind is NONE when the chunk has none.
 * MR_E_INVALID_ARG for bad indices. */
mr_status mr_parquet_column_stats(const mr_parquet_file *f, size_t rg, size_t col, mr_parquet_stats *out,
                                  mr_error *err);

/* Reads row group rg (all columns when cols is NULL, else the n_cols listed
 * leaf indices, in that order) into a new table the caller frees. Errors name
 * the file, row group and column: MR_E_CORRUPT (malformed pages, bad CRC),
 * MR_E_SCHEMA (nested/repeated or unsupported column), MR_E_INVALID_ARG (rg
 * or a column index out of range), MR_E_NOMEM, MR_E_LIMIT, MR_E_IO.
 * Column chunks decode in parallel on the core pool; the result does not
 * depend on the thread count. */
mr_status mr_parquet_read_row_group(mr_parquet_file *f, size_t rg, const size_t *cols, size_t n_cols,
                                    mr_table **out, mr_error *err);
/* Reads every row group and concatenates them (dictionary columns stay
 * dictionary-encoded only when the file has one row group). */
mr_status mr_parquet_read_all(mr_parquet_file *f, const size_t *cols, size_t n_cols, mr_table **out,
                              mr_error *err);

/* ---- writer ------------------------------------------------------------- */
typedef struct mr_parquet_write_opts {
    mr_parquet_codec codec;     /* default MR_PQ_ZSTD */
    int level;                  /* codec level, 0 = default (zstd 3, gzip 6) */
    size_t row_group_rows;      /* rows per row group, default 1048576 */
    size_t page_bytes;          /* target uncompressed data page size, default 1 MiB */
    size_t dict_max_distinct;   /* plain string columns: dictionary-encode when the row
                                   group has at most this many distinct values and they are
                                   at most half its rows; default 65536; 0 = never */
    const char *const *kv_keys; /* key-value metadata written to the footer (copied at open) */
    const char *const *kv_values;
    size_t n_kv;
} mr_parquet_write_opts;

void mr_parquet_write_opts_init(mr_parquet_write_opts *o); /* the defaults above */

typedef struct mr_parquet_writer mr_parquet_writer;
/* Starts a file: the bytes go to a temporary file next to path
 * (PATH.tmp.PID.N), which appears at path only when close succeeds, so a
 * reader never sees half a file. opts NULL = defaults; kv metadata is
 * copied. MR_E_INVALID_ARG (a codec that cannot be written), MR_E_IO
 * (cannot create), MR_E_NOMEM. The writer is the caller's. */
mr_status mr_parquet_writer_open(const char *path, const mr_parquet_write_opts *opts, mr_parquet_writer **out,
                                 mr_error *err);
/* Appends t's rows (borrowed for the call) as one or more row groups. The
 * first call fixes the schema (every column OPTIONAL); later tables must
 * have the same names and types (MR_E_SCHEMA). MR_E_IO, MR_E_LIMIT,
 * MR_E_NOMEM. After a failure the writer is sticky-failed (MR_E_STATE
 * afterwards). */
mr_status mr_parquet_writer_write(mr_parquet_writer *w, const mr_table *t, mr_error *err);
/* Writes the footer, closes the file and renames it to path. The writer is
 * freed either way; on failure the temporary file is removed and path is
 * untouched. MR_E_SCHEMA (nothing was ever written: no schema), MR_E_STATE
 * (an earlier write failed), MR_E_IO. NULL is a no-op (MR_OK). */
mr_status mr_parquet_writer_close(mr_parquet_writer *w, mr_error *err);
/* Abandons a writer: the temporary file is removed, path is untouched.
 * NULL is a no-op. */
void mr_parquet_writer_free(mr_parquet_writer *w);
/* open + write + close: path appears complete or not at all. */
mr_status mr_parquet_write_table(const char *path, const mr_table *t, const mr_parquet_write_opts *opts,
                                 mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
