/* Parquet reader: footer and FileMetaData parsing (thrift compact), flat
 * schema, statistics, and decoding of column chunks into mr_table columns.
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

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* PLAIN values are copied as they are: the reader assumes a little-endian host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the Parquet reader assumes a little-endian host");

/* ---- names --------------------------------------------------------------- */

const char *mr_parquet_type_name(mr_parquet_type t)
{
    static const char *const n[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                    "FIXED_LEN_BYTE_ARRAY"};
    return (unsigned)t < 8 ? n[t] : "UNKNOWN";
}

const char *mr_parquet_codec_name(mr_parquet_codec c)
{
    static const char *const n[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return (unsigned)c < 8 ? n[c] : "UNKNOWN";
}

mr_status mr_parquet_codec_parse(const char *name, mr_parquet_codec *out)
{
    static const struct { const char *s; mr_parquet_codec c; } t[] = {
        {"none", MR_PQ_UNCOMPRESSED}, {"uncompressed", MR_PQ_UNCOMPRESSED}, {"snappy", MR_PQ_SNAPPY},
        {"gzip", MR_PQ_GZIP},         {"zstd", MR_PQ_ZSTD},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcasecmp(name, t[i].s)) {
            *out = t[i].c;
            return MR_OK;
        }
    return MR_E_NOT_FOUND;
}

static const char *encoding_name(int e)
{
    static const char *const n[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                    "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                    "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e < 10 ? n[e] : "UNKNOWN";
}

/* ---- parsed metadata ------------------------------------------------------ */

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
    size_t n_rg;
    pq_rowgroup *rgs;
    size_t n_kv;
    char **kv_keys, **kv_values;
    uint64_t bytes_read;    /* bytes pread from fd so far (atomic adds; mr_parquet_bytes_read) */
};

/* ---- errors ---------------------------------------------------------------- */

static mr_status ferr(const mr_parquet_file *f, mr_error *err, mr_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold, noinline));
static mr_status ferr(const mr_parquet_file *f, mr_error *err, mr_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mr_error_vset_file(err, code, f->path, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- footer ---------------------------------------------------------------- */

static mr_status read_at(const mr_parquet_file *f, uint64_t off, size_t len, uint8_t *dst, mr_error *err)
{
    if (off > f->size || len > f->size - off)
        return ferr(f, err, MR_E_CORRUPT, "read of %zu bytes at offset %llu runs past the end of the file", len,
                    (unsigned long long)off);
    if (f->mem) {
        if (len) memcpy(dst, f->mem + off, len);
        if (f->map_len) __atomic_fetch_add(&((mr_parquet_file *)f)->bytes_read, (uint64_t)len, __ATOMIC_RELAXED);
        return MR_OK;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t k = pread(f->fd, dst + done, len - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            MR_ERR_SYS(err, MR_E_IO, errno, "cannot read");
            if (err) mr_error_at(err, f->path, 0, 0);
            return MR_E_IO;
        }
        if (k == 0) return ferr(f, err, MR_E_IO, "unexpected end of file (file shrank while reading?)");
        done += (size_t)k;
    }
    /* the counter is the only field a read mutates; readers may run concurrently */
    __atomic_fetch_add(&((mr_parquet_file *)f)->bytes_read, (uint64_t)len, __ATOMIC_RELAXED);
    return MR_OK;
}

/* Parsing helpers: each reads one struct from r, leaving r->bad on error. */

static void parse_stats(mr__tc_reader *r, pq_chunk *c)
{
    int16_t last = 0;
    int fid, t;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (fid == 1 && t == MR__TC_BINARY) {
            c->max = mr__tc_read_binary(r, &c->max_len);
            c->has_max = 1;
        } else if (fid == 2 && t == MR__TC_BINARY) {
            c->min = mr__tc_read_binary(r, &c->min_len);
            c->has_min = 1;
        } else if (fid == 3 && t == MR__TC_I64) {
            c->null_count = mr__tc_read_i64(r);
            c->has_null_count = c->null_count >= 0;
        } else if (fid == 5 && t == MR__TC_BINARY) {
            c->max_value = mr__tc_read_binary(r, &c->max_value_len);
            c->has_max_value = 1;
        } else if (fid == 6 && t == MR__TC_BINARY) {
            c->min_value = mr__tc_read_binary(r, &c->min_value_len);
            c->has_min_value = 1;
        } else {
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
}

static void parse_column_meta(mr__tc_reader *r, pq_chunk *c)
{
    int16_t last = 0;
    int fid, t;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        switch (fid) {
        case 1:
            if (t != MR__TC_I32) goto skip;
            c->type = mr__tc_read_i32(r);
            break;
        case 4:
            if (t != MR__TC_I32) goto skip;
            c->codec = mr__tc_read_i32(r);
            break;
        case 5:
            if (t != MR__TC_I64) goto skip;
            c->num_values = mr__tc_read_i64(r);
            break;
        case 7:
            if (t != MR__TC_I64) goto skip;
            c->total_compressed = mr__tc_read_i64(r);
            break;
        case 9:
            if (t != MR__TC_I64) goto skip;
            c->data_page_offset = mr__tc_read_i64(r);
            break;
        case 11:
            if (t != MR__TC_I64) goto skip;
            c->dict_page_offset = mr__tc_read_i64(r);
            break;
        case 12:
            if (t != MR__TC_STRUCT) goto skip;
            parse_stats(r, c);
            break;
        default:
        skip:
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
}

static void parse_column_chunk(mr__tc_reader *r, pq_chunk *c)
{
    int16_t last = 0;
    int fid, t;
    c->type = -1;
    c->codec = -1;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (fid == 1 && t == MR__TC_BINARY) {
            mr__tc_skip(r, t);
            c->has_file_path = 1;
        } else if (fid == 3 && t == MR__TC_STRUCT) {
            parse_column_meta(r, c);
            c->has_meta = 1;
        } else {
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
}

static void parse_row_group(mr__tc_reader *r, pq_rowgroup *g)
{
    int16_t last = 0;
    int fid, t;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (fid == 1 && t == MR__TC_LIST && !g->chunks) {
            int et;
            size_t n;
            mr__tc_list_begin(r, &et, &n);
            if (n && et != MR__TC_STRUCT) mr__tc_fail(r, "row group columns are not structs");
            if (!r->bad && n) {
                g->chunks = mr_calloc(n, sizeof(pq_chunk));
                if (!g->chunks) mr__tc_fail(r, "out of memory");
            }
            for (size_t i = 0; i < n && !r->bad; i++) parse_column_chunk(r, &g->chunks[i]);
            if (!r->bad) g->n_chunks = n;
            mr__tc_list_end(r);
        } else if (fid == 2 && t == MR__TC_I64) {
            g->total_byte_size = mr__tc_read_i64(r);
        } else if (fid == 3 && t == MR__TC_I64) {
            g->num_rows = mr__tc_read_i64(r);
        } else {
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
}

/* Schema element as read (before the tree walk). */
typedef struct sch_el {
    int type, type_length, repetition, num_children, converted, scale, precision;
    char *name;
    int lt, unit, utc, int_bits, int_signed, lt_scale, lt_precision, has_lt;
} sch_el;

static void parse_time_unit(mr__tc_reader *r, int *unit)
{
    int16_t last = 0;
    int fid, t;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (t == MR__TC_STRUCT && fid >= 1 && fid <= 3) *unit = fid;
        mr__tc_skip(r, t);
    }
    mr__tc_struct_end(r);
}

/* TimeType / TimestampType: 1 isAdjustedToUTC, 2 unit. DecimalType: 1 scale, 2 precision.
 * IntType: 1 bitWidth (byte), 2 isSigned. */
static void parse_logical(mr__tc_reader *r, sch_el *e)
{
    int16_t last = 0;
    int fid, t;
    e->lt = LT_OTHER; /* unknown ids stay OTHER -> fall back below */
    int known = 0;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (t != MR__TC_STRUCT) {
            mr__tc_skip(r, t);
            continue;
        }
        static const int map[] = {
            [1] = LT_STRING, [2] = LT_OTHER, [3] = LT_OTHER,  [4] = LT_ENUM,  [5] = LT_DECIMAL, [6] = LT_DATE,
            [7] = LT_TIME,   [8] = LT_TIMESTAMP, [10] = LT_INT, [11] = LT_OTHER, [12] = LT_JSON, [13] = LT_BSON,
            [14] = LT_UUID,  [15] = LT_FLOAT16,
        };
        if (fid >= 1 && fid <= 15 && fid != 9 && fid != 11) {
            e->lt = map[fid];
            known = 1;
        }
        int16_t l2 = 0;
        int f2, t2;
        mr__tc_struct_begin(r);
        while (mr__tc_field_next(r, &l2, &f2, &t2)) {
            if ((fid == 7 || fid == 8) && f2 == 1 && (t2 == MR__TC_TRUE || t2 == MR__TC_FALSE)) {
                e->utc = mr__tc_field_bool(t2);
            } else if ((fid == 7 || fid == 8) && f2 == 2 && t2 == MR__TC_STRUCT) {
                parse_time_unit(r, &e->unit);
            } else if (fid == 5 && f2 == 1 && t2 == MR__TC_I32) {
                e->lt_scale = mr__tc_read_i32(r);
            } else if (fid == 5 && f2 == 2 && t2 == MR__TC_I32) {
                e->lt_precision = mr__tc_read_i32(r);
            } else if (fid == 10 && f2 == 1 && t2 == MR__TC_BYTE) {
                if (r->p < r->end) e->int_bits = (int8_t)*r->p;
                mr__tc_skip(r, t2);
            } else if (fid == 10 && f2 == 2 && (t2 == MR__TC_TRUE || t2 == MR__TC_FALSE)) {
                e->int_signed = mr__tc_field_bool(t2);
            } else {
                mr__tc_skip(r, t2);
            }
        }
        mr__tc_struct_end(r);
    }
    mr__tc_struct_end(r);
    e->has_lt = known;
    if (!known) e->lt = LT_NONE;
}

static void parse_schema_el(mr__tc_reader *r, sch_el *e)
{
    int16_t last = 0;
    int fid, t;
    e->type = e->repetition = e->num_children = e->converted = -1;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (t == MR__TC_I32 && fid >= 1 && fid <= 8 && fid != 4) {
            int32_t v = mr__tc_read_i32(r);
            switch (fid) {
            case 1: e->type = v; break;
            case 2: e->type_length = v; break;
            case 3: e->repetition = v; break;
            case 5: e->num_children = v; break;
            case 6: e->converted = v; break;
            case 7: e->scale = v; break;
            case 8: e->precision = v; break;
            }
        } else if (fid == 4 && t == MR__TC_BINARY && !e->name) {
            e->name = mr__tc_read_string(r);
        } else if (fid == 10 && t == MR__TC_STRUCT) {
            parse_logical(r, e);
        } else {
            mr__tc_skip(r, t);
        }
    }
    mr__tc_struct_end(r);
    if (!r->bad && !e->name) mr__tc_fail(r, "schema element without a name");
}

static void parse_kv(mr__tc_reader *r, char **k, char **v)
{
    int16_t last = 0;
    int fid, t;
    mr__tc_struct_begin(r);
    while (mr__tc_field_next(r, &last, &fid, &t)) {
        if (fid == 1 && t == MR__TC_BINARY && !*k) *k = mr__tc_read_string(r);
        else if (fid == 2 && t == MR__TC_BINARY && !*v) *v = mr__tc_read_string(r);
        else mr__tc_skip(r, t);
    }
    mr__tc_struct_end(r);
    if (!r->bad && !*k) mr__tc_fail(r, "key-value metadata without a key");
}

/* Decides the logical meaning and the conversion of a leaf. */
static void classify_leaf(pq_leaf *L, const sch_el *e)
{
    int lt = e->lt, unit = e->unit, bits = e->int_bits, sgn = e->int_signed;
    int scale = e->scale, precision = e->precision;
    if (e->has_lt && lt == LT_DECIMAL) {
        scale = e->lt_scale;
        precision = e->lt_precision;
    }
    if (!e->has_lt || lt == LT_NONE) {
        lt = LT_NONE;
        switch (e->converted) {
        case MR__PQ_CT_UTF8: lt = LT_STRING; break;
        case MR__PQ_CT_ENUM: lt = LT_ENUM; break;
        case MR__PQ_CT_JSON: lt = LT_JSON; break;
        case MR__PQ_CT_BSON: lt = LT_BSON; break;
        case MR__PQ_CT_DECIMAL: lt = LT_DECIMAL; break;
        case MR__PQ_CT_DATE: lt = LT_DATE; break;
        case MR__PQ_CT_TIME_MILLIS: lt = LT_TIME, unit = TU_MILLIS; break;
        case MR__PQ_CT_TIME_MICROS: lt = LT_TIME, unit = TU_MICROS; break;
        case MR__PQ_CT_TIMESTAMP_MILLIS: lt = LT_TIMESTAMP, unit = TU_MILLIS; break;
        case MR__PQ_CT_TIMESTAMP_MICROS: lt = LT_TIMESTAMP, unit = TU_MICROS; break;
        case MR__PQ_CT_UINT_8: lt = LT_INT, bits = 8, sgn = 0; break;
        case MR__PQ_CT_UINT_16: lt = LT_INT, bits = 16, sgn = 0; break;
        case MR__PQ_CT_UINT_32: lt = LT_INT, bits = 32, sgn = 0; break;
        case MR__PQ_CT_UINT_64: lt = LT_INT, bits = 64, sgn = 0; break;
        case MR__PQ_CT_INT_8: lt = LT_INT, bits = 8, sgn = 1; break;
        case MR__PQ_CT_INT_16: lt = LT_INT, bits = 16, sgn = 1; break;
        case MR__PQ_CT_INT_32: lt = LT_INT, bits = 32, sgn = 1; break;
        case MR__PQ_CT_INT_64: lt = LT_INT, bits = 64, sgn = 1; break;
        case -1: break;
        default: lt = LT_OTHER; break;
        }
    }
    L->lt = lt;
    L->unit = unit;
    L->utc = e->utc;
    L->int_bits = bits;
    L->int_signed = sgn;
    L->info.scale = lt == LT_DECIMAL ? scale : 0;
    L->info.precision = lt == LT_DECIMAL ? precision : 0;
    char *lg = L->info.logical;
    size_t lgn = sizeof L->info.logical;
    static const char *const units[] = {"?", "MILLIS", "MICROS", "NANOS"};
    switch (lt) {
    case LT_STRING: snprintf(lg, lgn, "STRING"); break;
    case LT_ENUM: snprintf(lg, lgn, "ENUM"); break;
    case LT_JSON: snprintf(lg, lgn, "JSON"); break;
    case LT_BSON: snprintf(lg, lgn, "BSON"); break;
    case LT_UUID: snprintf(lg, lgn, "UUID"); break;
    case LT_DECIMAL: snprintf(lg, lgn, "DECIMAL(%d,%d)", precision, scale); break;
    case LT_DATE: snprintf(lg, lgn, "DATE"); break;
    case LT_TIME: snprintf(lg, lgn, "TIME(%s)", units[unit >= 1 && unit <= 3 ? unit : 0]); break;
    case LT_TIMESTAMP:
        snprintf(lg, lgn, "TIMESTAMP(%s%s)", units[unit >= 1 && unit <= 3 ? unit : 0], L->utc ? ",UTC" : "");
        break;
    case LT_INT: snprintf(lg, lgn, "INT(%d,%s)", bits, sgn ? "signed" : "unsigned"); break;
    case LT_FLOAT16: snprintf(lg, lgn, "FLOAT16"); break;
    case LT_OTHER: snprintf(lg, lgn, "OTHER"); break;
    default: lg[0] = '\0'; break;
    }

    int cv = CV_NONE;
    mr_dtype dt = MR_T_NULL;
    int unit_ok = unit >= TU_MILLIS && unit <= TU_NANOS;
    switch (e->type) {
    case MR_PQ_BOOLEAN: cv = CV_BOOL, dt = MR_T_BOOL; break;
    case MR_PQ_INT32:
        if (lt == LT_DATE) cv = CV_DATE, dt = MR_T_DATE;
        else if (lt == LT_DECIMAL) cv = CV_DEC32, dt = MR_T_FLOAT64;
        else if (lt == LT_TIME && unit == TU_MILLIS) cv = CV_TS32, dt = MR_T_INT64;
        else if (lt == LT_INT && !sgn) cv = CV_U32, dt = MR_T_INT64;
        else if (lt == LT_NONE || lt == LT_INT) cv = CV_I32, dt = MR_T_INT64;
        break;
    case MR_PQ_INT64:
        if (lt == LT_TIMESTAMP && unit_ok) cv = CV_TS64, dt = MR_T_TIMESTAMP;
        else if (lt == LT_TIME && unit_ok) cv = CV_TS64, dt = MR_T_INT64;
        else if (lt == LT_DECIMAL) cv = CV_DEC64, dt = MR_T_FLOAT64;
        else if (lt == LT_NONE || lt == LT_INT) cv = CV_I64, dt = MR_T_INT64;
        break;
    case MR_PQ_INT96: cv = CV_INT96, dt = MR_T_TIMESTAMP; break;
    case MR_PQ_FLOAT: cv = CV_F32, dt = MR_T_FLOAT32; break;
    case MR_PQ_DOUBLE: cv = CV_F64, dt = MR_T_FLOAT64; break;
    case MR_PQ_BYTE_ARRAY:
        if (lt == LT_DECIMAL) cv = CV_DECBYTES, dt = MR_T_FLOAT64;
        else if (lt != LT_OTHER) cv = CV_STR, dt = MR_T_STRING;
        break;
    case MR_PQ_FIXED_LEN_BYTE_ARRAY:
        if (lt == LT_DECIMAL) cv = e->type_length >= 1 ? CV_DECBYTES : CV_NONE, dt = MR_T_FLOAT64;
        else if (lt == LT_FLOAT16) cv = e->type_length == 2 ? CV_F16 : CV_NONE, dt = MR_T_FLOAT32;
        else if (lt != LT_OTHER) cv = CV_STR, dt = MR_T_STRING;
        if (e->type_length < 0) cv = CV_NONE;
        break;
    default: break;
    }
    if (L->max_rep > 0 || L->info.nested) cv = CV_NONE;
    L->cv = cv;
    L->info.dtype = cv == CV_NONE ? MR_T_NULL : dt;
}

/* Walks the depth-first schema list, producing one leaf per primitive. */
typedef struct walk_ctx {
    sch_el *els;
    size_t n_els, next;
    pq_leaf *leaves;
    size_t n_leaves, cap_leaves;
    mr_buf path;
    const char *why;
} walk_ctx;

static int walk(walk_ctx *w, int depth, int def, int rep)
{
    if (depth > 32) {
        w->why = "schema nested too deeply";
        return -1;
    }
    if (w->next >= w->n_els) {
        w->why = "schema has fewer elements than its groups claim";
        return -1;
    }
    sch_el *e = &w->els[w->next++];
    size_t path_len = w->path.len;
    if (depth > 0) {
        if ((path_len && mr_buf_append(&w->path, ".", 1)) || mr_buf_puts(&w->path, e->name)) {
            w->why = "out of memory";
            return -1;
        }
        if (e->repetition == 1) def++;
        if (e->repetition == 2) def++, rep++;
    }
    if (e->num_children > 0 || depth == 0) {
        for (int i = 0; i < e->num_children; i++)
            if (walk(w, depth + 1, def, rep)) return -1;
    } else {
        if (e->type < 0 || e->type > 7) {
            w->why = "schema leaf without a valid physical type";
            return -1;
        }
        if (e->type == MR_PQ_FIXED_LEN_BYTE_ARRAY && e->type_length <= 0) {
            w->why = "FIXED_LEN_BYTE_ARRAY leaf without a positive type_length";
            return -1;
        }
        if (w->n_leaves == w->cap_leaves) {
            size_t nc = w->cap_leaves ? w->cap_leaves * 2 : 16;
            pq_leaf *nl = mr_realloc(w->leaves, nc * sizeof(*nl));
            if (!nl) {
                w->why = "out of memory";
                return -1;
            }
            w->leaves = nl;
            w->cap_leaves = nc;
        }
        pq_leaf *L = &w->leaves[w->n_leaves];
        memset(L, 0, sizeof(*L));
        L->name = mr_strdup(w->path.data ? w->path.data : "");
        if (!L->name) {
            w->why = "out of memory";
            return -1;
        }
        w->n_leaves++;
        L->max_def = def;
        L->max_rep = rep;
        L->info.name = L->name;
        L->info.physical = (mr_parquet_type)e->type;
        L->info.type_length = e->type == MR_PQ_FIXED_LEN_BYTE_ARRAY ? e->type_length : 0;
        L->info.repetition = e->repetition < 0 ? 0 : e->repetition;
        L->info.converted_type = e->converted;
        L->info.nested = depth > 1 || rep > 0;
        classify_leaf(L, e);
    }
    w->path.len = path_len;
    if (w->path.data) w->path.data[path_len] = '\0';
    return 0;
}

static mr_status parse_footer(mr_parquet_file *f, const uint8_t *p, size_t len, mr_error *err)
{
    mr__tc_reader r;
    mr__tc_reader_init(&r, p, len);
    sch_el *els = NULL;
    size_t n_els = 0;
    int have_schema = 0, have_rg = 0, have_rows = 0;
    int16_t last = 0;
    int fid, t;
    mr_status rc = MR_OK;
    mr__tc_struct_begin(&r);
    while (mr__tc_field_next(&r, &last, &fid, &t)) {
        if (fid == 2 && t == MR__TC_LIST && !have_schema) {
            int et;
            size_t n;
            mr__tc_list_begin(&r, &et, &n);
            if (n && et != MR__TC_STRUCT) mr__tc_fail(&r, "schema elements are not structs");
            if (!r.bad && n) {
                els = mr_calloc(n, sizeof(*els));
                if (!els) mr__tc_fail(&r, "out of memory");
            }
            for (size_t i = 0; i < n && !r.bad; i++) {
                n_els = i + 1;
                parse_schema_el(&r, &els[i]);
            }
            mr__tc_list_end(&r);
            have_schema = 1;
        } else if (fid == 3 && t == MR__TC_I64) {
            f->num_rows = mr__tc_read_i64(&r);
            have_rows = 1;
        } else if (fid == 4 && t == MR__TC_LIST && !have_rg) {
            int et;
            size_t n;
            mr__tc_list_begin(&r, &et, &n);
            if (n && et != MR__TC_STRUCT) mr__tc_fail(&r, "row groups are not structs");
            if (!r.bad && n) {
                f->rgs = mr_calloc(n, sizeof(pq_rowgroup));
                if (!f->rgs) mr__tc_fail(&r, "out of memory");
            }
            for (size_t i = 0; i < n && !r.bad; i++) {
                f->n_rg = i + 1;
                parse_row_group(&r, &f->rgs[i]);
            }
            mr__tc_list_end(&r);
            have_rg = 1;
        } else if (fid == 5 && t == MR__TC_LIST && !f->kv_keys) {
            int et;
            size_t n;
            mr__tc_list_begin(&r, &et, &n);
            if (n && et != MR__TC_STRUCT) mr__tc_fail(&r, "key-value metadata entries are not structs");
            if (!r.bad && n) {
                f->kv_keys = mr_calloc(n, sizeof(char *));
                f->kv_values = mr_calloc(n, sizeof(char *));
                if (!f->kv_keys || !f->kv_values) mr__tc_fail(&r, "out of memory");
            }
            for (size_t i = 0; i < n && !r.bad; i++) {
                f->n_kv = i + 1;
                parse_kv(&r, &f->kv_keys[i], &f->kv_values[i]);
            }
            mr__tc_list_end(&r);
        } else if (fid == 6 && t == MR__TC_BINARY && !f->created_by) {
            f->created_by = mr__tc_read_string(&r);
        } else {
            mr__tc_skip(&r, t);
        }
    }
    mr__tc_struct_end(&r);
    if (r.bad) {
        rc = ferr(f, err, r.why && !strcmp(r.why, "out of memory") ? MR_E_NOMEM : MR_E_CORRUPT,
                  "file metadata: %s", r.why ? r.why : "malformed");
        goto done;
    }
    if (!have_schema || !n_els || !have_rows || !have_rg) {
        rc = ferr(f, err, MR_E_CORRUPT, "file metadata: missing %s",
                  !have_schema || !n_els ? "schema" : !have_rows ? "num_rows" : "row_groups");
        goto done;
    }
    if (f->num_rows < 0) {
        rc = ferr(f, err, MR_E_CORRUPT, "file metadata: negative num_rows");
        goto done;
    }
    walk_ctx w;
    memset(&w, 0, sizeof w);
    mr_buf_init(&w.path);
    w.els = els;
    w.n_els = n_els;
    int wr = walk(&w, 0, 0, 0);
    mr_buf_free(&w.path);
    f->leaves = w.leaves;
    f->n_leaves = w.n_leaves;
    if (wr) {
        rc = ferr(f, err, strcmp(w.why, "out of memory") ? MR_E_CORRUPT : MR_E_NOMEM, "schema: %s", w.why);
        goto done;
    }
    if (w.next != n_els) {
        rc = ferr(f, err, MR_E_CORRUPT, "schema: %zu elements, but the root's groups hold %zu", n_els, w.next);
        goto done;
    }
    int64_t total = 0;
    for (size_t g = 0; g < f->n_rg; g++) {
        pq_rowgroup *G = &f->rgs[g];
        if (G->n_chunks != f->n_leaves) {
            rc = ferr(f, err, MR_E_CORRUPT, "row group %zu has %zu column chunks, the schema has %zu columns", g,
                      G->n_chunks, f->n_leaves);
            goto done;
        }
        if (G->num_rows < 0 || G->num_rows > INT32_MAX) {
            rc = ferr(f, err, MR_E_CORRUPT, "row group %zu: bad num_rows %lld", g, (long long)G->num_rows);
            goto done;
        }
        total += G->num_rows;
    }
    (void)total; /* some writers leave FileMetaData.num_rows inconsistent; row groups rule */
done:
    for (size_t i = 0; i < n_els; i++) mr_free(els[i].name);
    mr_free(els);
    return rc;
}

static void file_free(mr_parquet_file *f)
{
    if (!f) return;
    if (f->map_len) munmap((void *)f->mem, f->map_len);
    if (f->fd >= 0) close(f->fd);
    for (size_t i = 0; i < f->n_leaves; i++) mr_free(f->leaves[i].name);
    mr_free(f->leaves);
    for (size_t g = 0; g < f->n_rg; g++) mr_free(f->rgs[g].chunks);
    mr_free(f->rgs);
    for (size_t i = 0; i < f->n_kv; i++) {
        mr_free(f->kv_keys[i]);
        mr_free(f->kv_values[i]);
    }
    mr_free(f->kv_keys);
    mr_free(f->kv_values);
    mr_free(f->created_by);
    mr_free(f->meta);
    mr_free(f->path);
    mr_free(f);
}

void mr_parquet_close(mr_parquet_file *f)
{
    file_free(f);
}

static mr_status open_common(mr_parquet_file *f, mr_error *err)
{
    uint8_t tail[8], head[4];
    if (f->size < 12) return ferr(f, err, MR_E_CORRUPT, "not a Parquet file (only %llu bytes)", (unsigned long long)f->size);
    mr_status rc = read_at(f, 0, 4, head, err);
    if (rc == MR_OK) rc = read_at(f, f->size - 8, 8, tail, err);
    if (rc != MR_OK) return rc;
    if (memcmp(tail + 4, "PAR1", 4) || memcmp(head, "PAR1", 4)) {
        if (!memcmp(tail + 4, "PARE", 4))
            return ferr(f, err, MR_E_SCHEMA, "encrypted Parquet files are not supported");
        return ferr(f, err, MR_E_CORRUPT, "not a Parquet file (no PAR1 magic)");
    }
    uint32_t mlen = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24;
    if (mlen == 0 || (uint64_t)mlen > f->size - 12)
        return ferr(f, err, MR_E_CORRUPT, "footer length %u does not fit in a %llu-byte file", mlen,
                    (unsigned long long)f->size);
    f->data_end = f->size - 8 - mlen;
    f->meta = mr_malloc(mlen);
    if (!f->meta) return ferr(f, err, MR_E_NOMEM, "out of memory reading the footer (%u bytes)", mlen);
    rc = read_at(f, f->data_end, mlen, f->meta, err);
    if (rc != MR_OK) return rc;
    return parse_footer(f, f->meta, mlen, err);
}

static mr_status open_file(const char *path, int mapped, mr_parquet_file **out, mr_error *err);

mr_status mr_parquet_open(const char *path, mr_parquet_file **out, mr_error *err)
{
    return open_file(path, 0, out, err);
}

/* For files nothing modifies in place (dataset shards: the Parquet writer
 * renames a finished file into place, so a rewrite is a new inode; store
 * objects are read-only): the file is mapped and column chunks are decoded
 * straight from the page cache, one copy fewer than pread. A file
 * truncated while mapped would fault, which is why user-supplied files
 * keep pread. */
mr_status mr_parquet_open_mapped(const char *path, mr_parquet_file **out, mr_error *err)
{
    return open_file(path, 1, out, err);
}

static mr_status open_file(const char *path, int mapped, mr_parquet_file **out, mr_error *err)
{
    *out = NULL;
    mr_parquet_file *f = mr_calloc(1, sizeof(*f));
    if (!f || !(f->path = mr_strdup(path))) {
        mr_free(f);
        return MR_ERR(err, MR_E_NOMEM, "out of memory opening %s", path);
    }
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    f->verify_crc = 1;
    mr_status rc;
    if (f->fd < 0) {
        rc = MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "cannot open");
        if (err) mr_error_at(err, path, 0, 0);
        goto fail;
    }
    struct stat st;
    if (fstat(f->fd, &st)) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot stat");
        if (err) mr_error_at(err, path, 0, 0);
        goto fail;
    }
    f->size = (uint64_t)st.st_size;
    if (mapped && f->size > 0 && f->size <= (uint64_t)SIZE_MAX) {
        void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
        if (m != MAP_FAILED) { /* else: pread as usual */
            madvise(m, (size_t)f->size, MADV_SEQUENTIAL);
            f->mem = m;
            f->map_len = (size_t)f->size;
        }
    }
    rc = open_common(f, err);
    if (rc != MR_OK) goto fail;
    *out = f;
    return MR_OK;
fail:
    file_free(f);
    return rc;
}

mr_status mr_parquet_open_mem(const void *data, size_t len, const char *name, mr_parquet_file **out, mr_error *err)
{
    *out = NULL;
    mr_parquet_file *f = mr_calloc(1, sizeof(*f));
    if (!f || !(f->path = mr_strdup(name ? name : "<memory>"))) {
        mr_free(f);
        return MR_ERR(err, MR_E_NOMEM, "out of memory opening %s", name ? name : "<memory>");
    }
    f->fd = -1;
    f->mem = data;
    f->size = len;
    f->verify_crc = 1;
    mr_status rc = open_common(f, err);
    if (rc != MR_OK) {
        file_free(f);
        return rc;
    }
    *out = f;
    return MR_OK;
}

/* ---- accessors ------------------------------------------------------------ */

void mr_parquet_set_verify_checksums(mr_parquet_file *f, int on)
{
    f->verify_crc = on;
}
int64_t mr_parquet_num_rows(const mr_parquet_file *f)
{
    int64_t n = 0;
    for (size_t g = 0; g < f->n_rg; g++) n += f->rgs[g].num_rows;
    return n;
}
size_t mr_parquet_num_row_groups(const mr_parquet_file *f)
{
    return f->n_rg;
}
int64_t mr_parquet_row_group_rows(const mr_parquet_file *f, size_t rg)
{
    return rg < f->n_rg ? f->rgs[rg].num_rows : -1;
}
int64_t mr_parquet_row_group_bytes(const mr_parquet_file *f, size_t rg)
{
    return rg < f->n_rg ? f->rgs[rg].total_byte_size : -1;
}
int64_t mr_parquet_chunk_bytes(const mr_parquet_file *f, size_t rg, size_t col)
{
    if (rg >= f->n_rg || col >= f->rgs[rg].n_chunks) return -1;
    return f->rgs[rg].chunks[col].total_compressed;
}
uint64_t mr_parquet_bytes_read(const mr_parquet_file *f)
{
    return __atomic_load_n(&f->bytes_read, __ATOMIC_RELAXED);
}
size_t mr_parquet_num_columns(const mr_parquet_file *f)
{
    return f->n_leaves;
}
const mr_parquet_column_info *mr_parquet_column(const mr_parquet_file *f, size_t i)
{
    return i < f->n_leaves ? &f->leaves[i].info : NULL;
}
ssize_t mr_parquet_column_index(const mr_parquet_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_leaves; i++)
        if (!strcmp(f->leaves[i].name, name)) return (ssize_t)i;
    return -1;
}
const char *mr_parquet_created_by(const mr_parquet_file *f)
{
    return f->created_by ? f->created_by : "";
}
size_t mr_parquet_num_kv(const mr_parquet_file *f)
{
    return f->n_kv;
}
const char *mr_parquet_kv(const mr_parquet_file *f, size_t i, const char **value_out)
{
    if (i >= f->n_kv) {
        if (value_out) *value_out = NULL;
        return NULL;
    }
    if (value_out) *value_out = f->kv_values[i];
    return f->kv_keys[i];
}
mr_status mr_parquet_chunk_codec(const mr_parquet_file *f, size_t rg, size_t col, mr_parquet_codec *out)
{
    if (rg >= f->n_rg || col >= f->n_leaves) return MR_E_INVALID_ARG;
    *out = (mr_parquet_codec)f->rgs[rg].chunks[col].codec;
    return MR_OK;
}

/* ---- value conversions ------------------------------------------------------ */


static float half_to_float(uint16_t h)
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

static double pow10_of(int scale)
{
    return pow(10.0, (double)scale);
}

/* Big-endian two's complement integer of n bytes -> double (exact to 2^53). */
static double be_twos_to_double(const uint8_t *p, size_t n)
{
    if (n == 0) return 0;
    if (n <= 8) {
        uint64_t u = 0;
        for (size_t i = 0; i < n; i++) u = u << 8 | p[i];
        if (n < 8 && (p[0] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
        return (double)(int64_t)u;
    }
    double v = (double)(int8_t)p[0];
    for (size_t i = 1; i < n; i++) v = v * 256.0 + (double)p[i];
    return v;
}

/* INT96 (nanos of day, Julian day) -> microseconds since the epoch, with
 * the wrapping 64-bit arithmetic and truncating division Spark uses, so that
 * the values Spark wrote for dates beyond the nanosecond range (its
 * conversion overflows on write) come back as Spark reads them. */
static int int96_to_us(const uint8_t *p, int64_t *out)
{
    int64_t nanos = (int64_t)mr_le_get64(p);
    int64_t jd = (int32_t)mr_le_get32(p + 8);
    uint64_t us = (uint64_t)(jd - 2440588) * 86400000000ULL + (uint64_t)(nanos / 1000);
    *out = (int64_t)us;
    return 0;
}

/* Scales a time value of the leaf's unit to microseconds. */
static int to_us(int unit, int64_t v, int64_t *out)
{
    if (unit == TU_MILLIS) return __builtin_mul_overflow(v, (int64_t)1000, out) ? -1 : 0;
    if (unit == TU_NANOS) {
        *out = v / 1000 - ((v % 1000) < 0);
        return 0;
    }
    *out = v;
    return 0;
}

/* ---- statistics ----------------------------------------------------------------- */

mr_status mr_parquet_column_stats(const mr_parquet_file *f, size_t rg, size_t col, mr_parquet_stats *out,
                                  mr_error *err)
{
    memset(out, 0, sizeof(*out));
    if (rg >= f->n_rg || col >= f->n_leaves)
        return ferr(f, err, MR_E_INVALID_ARG, "no row group %zu / column %zu", rg, col);
    const pq_leaf *L = &f->leaves[col];
    const pq_chunk *c = &f->rgs[rg].chunks[col];
    out->num_values = c->num_values;
    out->has_null_count = c->has_null_count;
    out->null_count = c->null_count;
    switch (L->info.dtype) {
    case MR_T_BOOL:
    case MR_T_INT64:
    case MR_T_DATE:
    case MR_T_TIMESTAMP: out->kind = MR_PQ_STAT_INT; break;
    case MR_T_FLOAT32:
    case MR_T_FLOAT64: out->kind = MR_PQ_STAT_DOUBLE; break;
    case MR_T_STRING: out->kind = MR_PQ_STAT_STRING; break;
    default: out->kind = MR_PQ_STAT_NONE; return MR_OK;
    }
    const uint8_t *mn = NULL, *mx = NULL;
    size_t mnl = 0, mxl = 0;
    if (c->has_min_value && c->has_max_value) {
        mn = c->min_value, mx = c->max_value, mnl = c->min_value_len, mxl = c->max_value_len;
    } else if (c->has_min && c->has_max) {
        int signed_order = L->cv == CV_BOOL || L->cv == CV_I32 || L->cv == CV_I64 || L->cv == CV_DATE ||
                           L->cv == CV_F32 || L->cv == CV_F64 || L->cv == CV_TS64 || L->cv == CV_TS32 ||
                           L->cv == CV_DEC32 || L->cv == CV_DEC64;
        if (L->lt == LT_INT && !L->int_signed) signed_order = 0;
        if (signed_order) mn = c->min, mx = c->max, mnl = c->min_len, mxl = c->max_len;
    }
    if (!mn || !mx) return MR_OK;
    int ok = 1;
    const uint8_t *v[2] = {mn, mx};
    size_t vl[2] = {mnl, mxl};
    for (int k = 0; k < 2 && ok; k++) {
        int64_t iv = 0;
        double dv = 0;
        switch (L->cv) {
        case CV_BOOL:
            ok = vl[k] >= 1;
            if (ok) iv = v[k][0] & 1;
            break;
        case CV_I32:
        case CV_DATE:
            ok = vl[k] == 4;
            if (ok) iv = (int32_t)mr_le_get32(v[k]);
            break;
        case CV_U32:
            ok = vl[k] == 4;
            if (ok) iv = mr_le_get32(v[k]);
            break;
        case CV_TS32:
            ok = vl[k] == 4 && !to_us(TU_MILLIS, (int32_t)mr_le_get32(v[k]), &iv);
            break;
        case CV_I64:
            ok = vl[k] == 8;
            if (ok) iv = (int64_t)mr_le_get64(v[k]);
            if (ok && L->lt == LT_INT && !L->int_signed && iv < 0) ok = 0;
            break;
        case CV_TS64: ok = vl[k] == 8 && !to_us(L->unit, (int64_t)mr_le_get64(v[k]), &iv); break;
        case CV_F32: {
            float fl;
            ok = vl[k] == 4;
            if (ok) {
                uint32_t b = mr_le_get32(v[k]);
                memcpy(&fl, &b, 4);
                dv = fl;
            }
            break;
        }
        case CV_F64: {
            ok = vl[k] == 8;
            if (ok) {
                uint64_t b = mr_le_get64(v[k]);
                memcpy(&dv, &b, 8);
            }
            break;
        }
        case CV_F16:
            ok = vl[k] == 2;
            if (ok) dv = half_to_float((uint16_t)(v[k][0] | v[k][1] << 8));
            break;
        case CV_DEC32:
            ok = vl[k] == 4;
            if (ok) dv = (double)(int32_t)mr_le_get32(v[k]) / pow10_of(L->info.scale);
            break;
        case CV_DEC64:
            ok = vl[k] == 8;
            if (ok) dv = (double)(int64_t)mr_le_get64(v[k]) / pow10_of(L->info.scale);
            break;
        case CV_DECBYTES:
            ok = vl[k] >= 1;
            if (ok) dv = be_twos_to_double(v[k], vl[k]) / pow10_of(L->info.scale);
            break;
        case CV_STR:
            if (k == 0) out->min_s = (const char *)v[k], out->min_len = vl[k];
            else out->max_s = (const char *)v[k], out->max_len = vl[k];
            break;
        default: ok = 0; break;
        }
        if (out->kind == MR_PQ_STAT_DOUBLE && isnan(dv)) ok = 0;
        if (k == 0) out->min_i = iv, out->min_d = dv;
        else out->max_i = iv, out->max_d = dv;
    }
    out->has_min_max = ok;
    if (!ok) {
        out->min_i = out->max_i = 0;
        out->min_d = out->max_d = 0;
        out->min_s = out->max_s = NULL;
        out->min_len = out->max_len = 0;
    }
    return MR_OK;
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

/* Decodes n non-null values of a data page's value section into c->vals
 * (fixed width, es bytes each) or c->bv (byte arrays), or, for dictionary
 * pages in dict_mode, leaves the indices in c->idx and sets *codes. */
static mr_status decode_values(chunk_ctx *c, int enc, const uint8_t *p, size_t len, size_t n, int *codes)
{
    const pq_leaf *L = c->L;
    int phys = L->info.physical;
    size_t es = (size_t)c->es;
    const char *why = NULL;
    *codes = 0;
    if (phys == MR_PQ_BYTE_ARRAY) {
        if (GROW(c, bv, bv_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    } else {
        if (n && es > SIZE_MAX / n) return cerr(c, MR_E_LIMIT, "page too large");
        if (GROW(c, vals, vals_cap, (n && es) ? n * es : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
    }
    switch (enc) {
    case MR__PQ_ENC_PLAIN:
        if (phys == MR_PQ_BYTE_ARRAY) {
            why = plain_bytearrays(p, len, n, c->bv);
        } else if (phys == MR_PQ_BOOLEAN) {
            if ((n + 7) / 8 > len) why = "PLAIN booleans: page too short";
            else
                for (size_t i = 0; i < n; i++) c->vals[i] = (p[i >> 3] >> (i & 7)) & 1;
        } else {
            if (n * es > len) why = "PLAIN values: page too short";
            else if (n) memcpy(c->vals, p, n * es);
        }
        break;
    case MR__PQ_ENC_PLAIN_DICTIONARY:
    case MR__PQ_ENC_RLE_DICTIONARY: {
        if (!c->have_dict) {
            why = "dictionary-encoded page without a dictionary page";
            break;
        }
        if (GROW(c, idx, idx_cap, n ? n : 1)) return cerr(c, MR_E_NOMEM, "out of memory");
        if (n) {
            if (len < 1) {
                why = "dictionary indices: empty page";
                break;
            }
            unsigned bw = p[0];
            if (bw > 32 || mr__pq_rle_decode(p + 1, len - 1, bw, c->idx, n)) {
                why = "dictionary indices: malformed RLE/bit-packed data";
                break;
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
        break;
    }
    case MR__PQ_ENC_RLE:
        if (phys != MR_PQ_BOOLEAN) {
            why = "RLE encoding is only valid for booleans";
        } else if (n) {
            if (GROW(c, idx, idx_cap, n)) return cerr(c, MR_E_NOMEM, "out of memory");
            if (len < 4 || mr_le_get32(p) > len - 4 || mr__pq_rle_decode(p + 4, mr_le_get32(p), 1, c->idx, n))
                why = "RLE booleans: malformed data";
            else
                for (size_t i = 0; i < n; i++) c->vals[i] = (uint8_t)c->idx[i];
        }
        break;
    case MR__PQ_ENC_DELTA_BINARY_PACKED: {
        if (phys != MR_PQ_INT32 && phys != MR_PQ_INT64) {
            why = "DELTA_BINARY_PACKED is only valid for INT32/INT64";
            break;
        }
        size_t cnt, used;
        why = dbp_decode(c, p, len, n, &cnt, &used);
        if (!why && cnt != n) why = "DELTA_BINARY_PACKED: value count differs from the page's";
        if (why) break;
        if (phys == MR_PQ_INT32) {
            for (size_t i = 0; i < n; i++) {
                int32_t v = (int32_t)(uint32_t)c->u64[i];
                memcpy(c->vals + i * 4, &v, 4);
            }
        } else if (n) {
            memcpy(c->vals, c->u64, n * 8);
        }
        break;
    }
    case MR__PQ_ENC_DELTA_LENGTH_BYTE_ARRAY:
    case MR__PQ_ENC_DELTA_BYTE_ARRAY: {
        if (phys != MR_PQ_BYTE_ARRAY && !(phys == MR_PQ_FIXED_LEN_BYTE_ARRAY && enc == MR__PQ_ENC_DELTA_BYTE_ARRAY)) {
            why = "delta byte-array encodings need BYTE_ARRAY columns";
            break;
        }
        if (GROW(c, bv, bv_cap, n ? n : 1) || GROW(c, idx, idx_cap, n ? n : 1))
            return cerr(c, MR_E_NOMEM, "out of memory");
        size_t cnt, used;
        const uint8_t *q = p;
        size_t qlen = len;
        if (enc == MR__PQ_ENC_DELTA_BYTE_ARRAY) { /* prefix lengths first */
            why = dbp_decode(c, q, qlen, n, &cnt, &used);
            if (!why && cnt != n) why = "DELTA_BYTE_ARRAY: prefix count differs from the page's value count";
            if (why) break;
            for (size_t i = 0; i < n; i++) {
                if (c->u64[i] > UINT32_MAX) {
                    why = "DELTA_BYTE_ARRAY: bad prefix length";
                    break;
                }
                c->idx[i] = (uint32_t)c->u64[i];
            }
            if (why) break;
            q += used;
            qlen -= used;
        }
        why = dbp_decode(c, q, qlen, n, &cnt, &used);
        if (!why && cnt != n) why = "DELTA_LENGTH_BYTE_ARRAY: length count differs from the page's value count";
        if (why) break;
        const uint8_t *data = q + used;
        size_t avail = qlen - used, off = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t l = c->u64[i];
            if (l > avail - off) {
                why = "delta byte array: value runs past the page";
                break;
            }
            c->bv[i].p = data + off;
            c->bv[i].len = (uint32_t)l;
            off += (size_t)l;
        }
        if (why || enc == MR__PQ_ENC_DELTA_LENGTH_BYTE_ARRAY) break;
        /* reconstruct prefix + suffix */
        size_t total = 0;
        size_t prev_len = 0;
        for (size_t i = 0; i < n; i++) {
            if (c->idx[i] > prev_len) {
                why = "DELTA_BYTE_ARRAY: prefix longer than the previous value";
                break;
            }
            size_t vl = (size_t)c->idx[i] + c->bv[i].len;
            if (vl > UINT32_MAX || total > MR__PQ_MAX_PAGE - vl) {
                why = "DELTA_BYTE_ARRAY: values too large";
                break;
            }
            total += vl;
            prev_len = vl;
        }
        if (why) break;
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
            for (size_t i = 0; i < n && !why; i++) {
                if (c->bv[i].len != es) why = "DELTA_BYTE_ARRAY: value length differs from the fixed length";
                else memcpy(c->vals + i * es, c->bv[i].p, es);
            }
        }
        break;
    }
    case MR__PQ_ENC_BYTE_STREAM_SPLIT:
        if (phys == MR_PQ_BYTE_ARRAY || phys == MR_PQ_BOOLEAN || phys == MR_PQ_INT96) {
            why = "BYTE_STREAM_SPLIT is not valid for this type";
        } else if (n * es > len) {
            why = "BYTE_STREAM_SPLIT: page too short";
        } else {
            for (size_t k = 0; k < es; k++) {
                const uint8_t *s = p + k * n;
                for (size_t i = 0; i < n; i++) c->vals[i * es + k] = s[i];
            }
        }
        break;
    default:
        return cerr(c, MR_E_SCHEMA, "page %zu: encoding %s (%d) is not supported", c->page_no, encoding_name(enc), enc);
    }
    if (why) return cerr(c, MR_E_CORRUPT, "page %zu: %s", c->page_no, why);
    return MR_OK;
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
        c->dict_mode = 1;
    }
    return MR_OK;
}

static mr_status ensure_column(chunk_ctx *c)
{
    if (c->col) return MR_OK;
    size_t hint = c->rows_total < ((size_t)1 << 20) ? c->rows_total : (size_t)1 << 20;
    return mr_column_new(c->L->name, c->L->info.dtype, hint, &c->col, c->err);
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
        case CV_DEC32: ((double *)col->data)[row] = (double)(int32_t)mr_le_get32(v) / pow10_of(L->info.scale); break;
        case CV_DEC64: ((double *)col->data)[row] = (double)(int64_t)mr_le_get64(v) / pow10_of(L->info.scale); break;
        case CV_DECBYTES:
            if (L->info.physical == MR_PQ_BYTE_ARRAY)
                ((double *)col->data)[row] = be_twos_to_double(c->bv[j].p, c->bv[j].len) / pow10_of(L->info.scale);
            else
                ((double *)col->data)[row] = be_twos_to_double(v, (size_t)c->es) / pow10_of(L->info.scale);
            break;
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
    mr_status rc = mr__pq_decompress((mr_parquet_codec)c->ch->codec, src, clen, c->page, ulen, &why);
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

static mr_status read_chunk(mr_parquet_file *f, size_t rg, size_t ci, mr_column **out, mr_error *err)
{
    chunk_ctx cc;
    memset(&cc, 0, sizeof cc);
    chunk_ctx *c = &cc;
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
    if (ch->codec != MR_PQ_UNCOMPRESSED && ch->codec != MR_PQ_SNAPPY && ch->codec != MR_PQ_GZIP && ch->codec != MR_PQ_ZSTD) {
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
    if (f->mem) {
        buf = f->mem + start; /* a mapped file's pages are read here: count them as read */
        if (f->map_len) __atomic_fetch_add(&f->bytes_read, (uint64_t)clen, __ATOMIC_RELAXED);
    } else {
        owned = mr_malloc(clen ? (size_t)clen : 1);
        if (!owned) {
            rc = cerr(c, MR_E_NOMEM, "out of memory reading %lld bytes", (long long)clen);
            goto done;
        }
        rc = read_at(f, (uint64_t)start, (size_t)clen, owned, err);
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
        if (h.csize < 0 || h.usize < 0 || (size_t)h.csize > len - pos || (size_t)h.usize > MR__PQ_MAX_PAGE) {
            rc = cerr(c, MR_E_CORRUPT, "page %zu: sizes (compressed %d, uncompressed %d) exceed the chunk", c->page_no,
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
    mr_error *errs;
} rg_read_job;

static void rg_read_range(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    rg_read_job *j = ctx;
    for (size_t k = begin; k < end; k++) {
        mr_error_init(&j->errs[k]);
        j->rcs[k] = read_chunk(j->f, j->rg, j->cols ? j->cols[k] : k, &j->got[k], &j->errs[k]);
    }
}

mr_status mr_parquet_read_row_group(mr_parquet_file *f, size_t rg, const size_t *cols, size_t n_cols,
                                    mr_table **out, mr_error *err)
{
    *out = NULL;
    if (rg >= f->n_rg) return ferr(f, err, MR_E_INVALID_ARG, "row group %zu out of range (%zu row groups)", rg, f->n_rg);
    size_t n = cols ? n_cols : f->n_leaves;
    for (size_t k = 0; cols && k < n; k++)
        if (cols[k] >= f->n_leaves)
            return ferr(f, err, MR_E_INVALID_ARG, "column index %zu out of range (%zu columns)", cols[k], f->n_leaves);
    mr_table *t = NULL;
    mr_status rc = mr_table_new(&t, err);
    mr_column **got = rc == MR_OK ? mr_calloc(n ? n : 1, sizeof *got) : NULL;
    mr_status *rcs = got ? mr_calloc(n ? n : 1, sizeof *rcs) : NULL;
    mr_error *errs = rcs ? mr_calloc(n ? n : 1, sizeof *errs) : NULL;
    if (rc == MR_OK && !errs) rc = ferr(f, err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) { /* column chunks are independent: decode them in parallel */
        rg_read_job job = {f, rg, cols, got, rcs, errs};
        mr_parallel_for(n, 1, rg_read_range, &job);
    }
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        if (rcs[k] != MR_OK) { /* the first failing column, in column order */
            rc = rcs[k];
            if (err && !mr_error_is_set(err)) *err = errs[k];
            break;
        }
        rc = mr_table_add_column(t, got[k], err);
        got[k] = NULL;
        if (rc != MR_OK && err) mr_error_at(err, f->path, 0, 0);
    }
    for (size_t k = 0; got && k < n; k++) mr_column_free(got[k]);
    mr_free(got);
    mr_free(rcs);
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
                rc = ferr(f, err, MR_E_INVALID_ARG, "column index %zu out of range", ci);
                break;
            }
            const pq_leaf *L = &f->leaves[ci];
            if (L->info.dtype == MR_T_NULL) {
                rc = ferr(f, err, MR_E_SCHEMA, "column '%s': %s", L->name,
                          L->info.nested ? "nested/repeated columns are not supported" : "type is not supported");
                break;
            }
            mr_column *col = NULL;
            rc = mr_column_new(L->name, L->info.dtype, 0, &col, err);
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
