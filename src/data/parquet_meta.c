/* Parquet reader, metadata half: the footer and its FileMetaData (thrift
 * compact), the flat schema and each leaf's logical type and conversion, row
 * groups and column chunk metadata, statistics, open/close and accessors.
 * Decoding column chunks is parquet_read.c's; both share parquet_int.h.
 *
 * Every length and count read from the file is checked against the bytes
 * that hold it before use, so a malformed footer gives MR_E_CORRUPT (naming
 * the file), never an overread. */
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
        {"gzip", MR_PQ_GZIP},         {"zstd", MR_PQ_ZSTD},   {"lz4_raw", MR_PQ_LZ4_RAW},
        {"lz4", MR_PQ_LZ4_RAW}, /* as DuckDB and pyarrow write it: the deprecated LZ4 codec is never written */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcasecmp(name, t[i].s)) {
            *out = t[i].c;
            return MR_OK;
        }
    return MR_E_NOT_FOUND;
}

/* ---- errors ---------------------------------------------------------------- */

mr_status mr__pq_ferr(const mr_parquet_file *f, mr_error *err, mr_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mr_error_vset_file(err, code, f->path, fmt, ap);
    va_end(ap);
    return code;
}
/* ---- footer ---------------------------------------------------------------- */

mr_status mr__pq_read_at(const mr_parquet_file *f, uint64_t off, size_t len, uint8_t *dst, mr_error *err)
{
    if (off > f->size || len > f->size - off)
        return mr__pq_ferr(f, err, MR_E_CORRUPT, "read of %zu bytes at offset %llu runs past the end of the file", len,
                    (unsigned long long)off);
    if (f->mem) {
        if (len) memcpy(dst, f->mem + off, len);
        if (f->map_len) __atomic_fetch_add(&((mr_parquet_file *)f)->bytes_read, (uint64_t)len, __ATOMIC_RELAXED);
        return MR_OK;
    }
    if (f->rread) {
        mr_status rc = len ? f->rread(f->rctx, off, len, dst, err) : MR_OK;
        if (rc != MR_OK) {
            if (err) mr_error_at(err, f->path, 0, 0);
            return rc;
        }
        __atomic_fetch_add(&((mr_parquet_file *)f)->bytes_read, (uint64_t)len, __ATOMIC_RELAXED);
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
        if (k == 0) return mr__pq_ferr(f, err, MR_E_IO, "unexpected end of file (file shrank while reading?)");
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
        else if (lt == LT_DECIMAL) cv = CV_DEC32, dt = MR_T_DECIMAL;
        else if (lt == LT_TIME && unit == TU_MILLIS) cv = CV_TS32, dt = MR_T_INT64;
        else if (lt == LT_INT && !sgn) cv = CV_U32, dt = MR_T_INT64;
        else if (lt == LT_NONE || lt == LT_INT) cv = CV_I32, dt = MR_T_INT64;
        break;
    case MR_PQ_INT64:
        if (lt == LT_TIMESTAMP && unit_ok) cv = CV_TS64, dt = MR_T_TIMESTAMP;
        else if (lt == LT_TIME && unit_ok) cv = CV_TS64, dt = MR_T_INT64;
        else if (lt == LT_DECIMAL) cv = CV_DEC64, dt = MR_T_DECIMAL;
        else if (lt == LT_NONE || lt == LT_INT) cv = CV_I64, dt = MR_T_INT64;
        break;
    case MR_PQ_INT96: cv = CV_INT96, dt = MR_T_TIMESTAMP; break;
    case MR_PQ_FLOAT: cv = CV_F32, dt = MR_T_FLOAT32; break;
    case MR_PQ_DOUBLE: cv = CV_F64, dt = MR_T_FLOAT64; break;
    case MR_PQ_BYTE_ARRAY:
        if (lt == LT_DECIMAL) cv = CV_DECBYTES, dt = MR_T_DECIMAL;
        else if (lt != LT_OTHER) cv = CV_STR, dt = MR_T_STRING;
        break;
    case MR_PQ_FIXED_LEN_BYTE_ARRAY:
        if (lt == LT_DECIMAL) cv = e->type_length >= 1 ? CV_DECBYTES : CV_NONE, dt = MR_T_DECIMAL;
        else if (lt == LT_FLOAT16) cv = e->type_length == 2 ? CV_F16 : CV_NONE, dt = MR_T_FLOAT32;
        else if (lt != LT_OTHER) cv = CV_STR, dt = MR_T_STRING;
        if (e->type_length < 0) cv = CV_NONE;
        break;
    default: break;
    }
    if (L->max_rep > 0 || L->info.nested) cv = CV_NONE;
    if (dt == MR_T_DECIMAL && (precision < 1 || precision > MR_DECIMAL_MAX_PRECISION || scale < 0 || scale > precision))
        cv = CV_NONE; /* a malformed DECIMAL annotation: not readable (the error names the column) */
    L->cv = cv;
    L->info.dtype = cv == CV_NONE ? MR_T_NULL : dt;
    mr_colkind k = {0};
    if (cv == CV_I32 || cv == CV_U32 || cv == CV_I64) {
        if (lt == LT_INT && (bits == 8 || bits == 16 || bits == 32)) k.int_bits = (uint8_t)bits;
        else if (cv != CV_I64) k.int_bits = 32;
        if (lt == LT_INT && !sgn) k.flags |= MR_KIND_UNSIGNED;
    } else if (cv == CV_STR && lt == LT_NONE) {
        k.flags |= MR_KIND_BINARY;
    } else if (dt == MR_T_DECIMAL) {
        k.precision = (uint8_t)precision;
        k.scale = (uint8_t)scale;
    } else if (cv == CV_INT96 || (cv == CV_TS64 && dt == MR_T_TIMESTAMP && !(e->has_lt && L->utc))) {
        k.flags |= MR_KIND_LOCAL;
    }
    L->info.kind = cv == CV_NONE ? (mr_colkind){0} : k;
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

static const char *leaf_name_of(const void *ctx, size_t id) { return ((const mr_parquet_file *)ctx)->leaves[id].name; }

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
        rc = mr__pq_ferr(f, err, r.why && !strcmp(r.why, "out of memory") ? MR_E_NOMEM : MR_E_CORRUPT,
                  "file metadata: %s", r.why ? r.why : "malformed");
        goto done;
    }
    if (!have_schema || !n_els || !have_rows || !have_rg) {
        rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "file metadata: missing %s",
                  !have_schema || !n_els ? "schema" : !have_rows ? "num_rows" : "row_groups");
        goto done;
    }
    if (f->num_rows < 0) {
        rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "file metadata: negative num_rows");
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
        rc = mr__pq_ferr(f, err, strcmp(w.why, "out of memory") ? MR_E_CORRUPT : MR_E_NOMEM, "schema: %s", w.why);
        goto done;
    }
    if (w.next != n_els) {
        rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "schema: %zu elements, but the root's groups hold %zu", n_els, w.next);
        goto done;
    }
    rc = mr_strindex_reserve(&f->leaf_ix, f->n_leaves);
    for (size_t i = 0; rc == MR_OK && i < f->n_leaves; i++) /* a repeated name keeps its first leaf */
        rc = mr_strindex_add(&f->leaf_ix, i, leaf_name_of, f, NULL);
    if (rc != MR_OK) {
        rc = mr__pq_ferr(f, err, rc, "out of memory indexing %zu columns", f->n_leaves);
        goto done;
    }
    int64_t total = 0;
    for (size_t g = 0; g < f->n_rg; g++) {
        pq_rowgroup *G = &f->rgs[g];
        if (G->n_chunks != f->n_leaves) {
            rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "row group %zu has %zu column chunks, the schema has %zu columns", g,
                      G->n_chunks, f->n_leaves);
            goto done;
        }
        if (G->num_rows < 0 || G->num_rows > INT32_MAX) {
            rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "row group %zu: bad num_rows %lld", g, (long long)G->num_rows);
            goto done;
        }
        total += G->num_rows;
    }
    if (total != f->num_rows) { /* which one would a reader believe? neither: refuse */
        rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "file metadata says %lld rows, its %zu row groups hold %lld",
                         (long long)f->num_rows, f->n_rg, (long long)total);
        goto done;
    }
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
    mr_strindex_deinit(&f->leaf_ix);
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
    if (f->rrelease) f->rrelease(f->rctx);
    mr_free(f);
}

void mr_parquet_close(mr_parquet_file *f)
{
    file_free(f);
}

/* The footer of a ranged file: one read of the last 64 KiB (the whole file
 * when smaller), and a second of the rest of a longer footer. The leading
 * magic is checked when the first read covers it. */
#define PQ_TAIL_READ (64u * 1024u)
static mr_status open_ranged_footer(mr_parquet_file *f, mr_error *err)
{
    size_t n = f->size < PQ_TAIL_READ ? (size_t)f->size : PQ_TAIL_READ;
    uint8_t *tail = mr_malloc(n);
    if (!tail) return mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory reading the footer");
    uint64_t base = f->size - n;
    mr_status rc = mr__pq_read_at(f, base, n, tail, err);
    const uint8_t *t8 = tail + n - 8;
    if (rc == MR_OK && (memcmp(t8 + 4, "PAR1", 4) || (base == 0 && memcmp(tail, "PAR1", 4)))) {
        rc = !memcmp(t8 + 4, "PARE", 4) ? mr__pq_ferr(f, err, MR_E_SCHEMA, "encrypted Parquet files are not supported")
                                        : mr__pq_ferr(f, err, MR_E_CORRUPT, "not a Parquet file (no PAR1 magic)");
    }
    uint32_t mlen = 0;
    if (rc == MR_OK) {
        mlen = (uint32_t)t8[0] | (uint32_t)t8[1] << 8 | (uint32_t)t8[2] << 16 | (uint32_t)t8[3] << 24;
        if (mlen == 0 || (uint64_t)mlen > f->size - 12)
            rc = mr__pq_ferr(f, err, MR_E_CORRUPT, "footer length %u does not fit in a %llu-byte file", mlen,
                             (unsigned long long)f->size);
    }
    if (rc == MR_OK) {
        f->data_end = f->size - 8 - mlen;
        f->meta = mr_malloc(mlen);
        if (!f->meta) rc = mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory reading the footer (%u bytes)", mlen);
    }
    if (rc == MR_OK) {
        size_t have = n - 8; /* footer bytes the first read holds, counted from its end */
        if (have >= mlen) {
            memcpy(f->meta, t8 - mlen, mlen);
        } else {
            memcpy(f->meta + (mlen - have), tail, have);
            rc = mr__pq_read_at(f, f->data_end, mlen - have, f->meta, err);
        }
    }
    mr_free(tail);
    return rc == MR_OK ? parse_footer(f, f->meta, mlen, err) : rc;
}

static mr_status open_common(mr_parquet_file *f, mr_error *err)
{
    uint8_t tail[8], head[4];
    if (f->size < 12) return mr__pq_ferr(f, err, MR_E_CORRUPT, "not a Parquet file (only %llu bytes)", (unsigned long long)f->size);
    if (f->rread) return open_ranged_footer(f, err);
    mr_status rc = mr__pq_read_at(f, 0, 4, head, err);
    if (rc == MR_OK) rc = mr__pq_read_at(f, f->size - 8, 8, tail, err);
    if (rc != MR_OK) return rc;
    if (memcmp(tail + 4, "PAR1", 4) || memcmp(head, "PAR1", 4)) {
        if (!memcmp(tail + 4, "PARE", 4))
            return mr__pq_ferr(f, err, MR_E_SCHEMA, "encrypted Parquet files are not supported");
        return mr__pq_ferr(f, err, MR_E_CORRUPT, "not a Parquet file (no PAR1 magic)");
    }
    uint32_t mlen = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24;
    if (mlen == 0 || (uint64_t)mlen > f->size - 12)
        return mr__pq_ferr(f, err, MR_E_CORRUPT, "footer length %u does not fit in a %llu-byte file", mlen,
                    (unsigned long long)f->size);
    f->data_end = f->size - 8 - mlen;
    f->meta = mr_malloc(mlen);
    if (!f->meta) return mr__pq_ferr(f, err, MR_E_NOMEM, "out of memory reading the footer (%u bytes)", mlen);
    rc = mr__pq_read_at(f, f->data_end, mlen, f->meta, err);
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

mr_status mr_parquet_open_ranged(const char *name, uint64_t size, mr_parquet_read_fn read, void *ctx,
                                 void (*release)(void *ctx), mr_parquet_file **out, mr_error *err)
{
    *out = NULL;
    mr_parquet_file *f = mr_calloc(1, sizeof(*f));
    if (!f || !(f->path = mr_strdup(name ? name : "<ranged>"))) {
        mr_free(f);
        if (release) release(ctx);
        return MR_ERR(err, MR_E_NOMEM, "out of memory opening %s", name ? name : "<ranged>");
    }
    f->fd = -1;
    f->size = size;
    f->verify_crc = 1;
    f->rread = read;
    f->rctx = ctx;
    f->rrelease = release;
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
    return mr_strindex_find(&f->leaf_ix, name, leaf_name_of, f);
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
/* ---- statistics ----------------------------------------------------------------- */

mr_status mr_parquet_column_stats(const mr_parquet_file *f, size_t rg, size_t col, mr_parquet_stats *out,
                                  mr_error *err)
{
    memset(out, 0, sizeof(*out));
    if (rg >= f->n_rg || col >= f->n_leaves)
        return mr__pq_ferr(f, err, MR_E_INVALID_ARG, "no row group %zu / column %zu", rg, col);
    const pq_leaf *L = &f->leaves[col];
    const pq_chunk *c = &f->rgs[rg].chunks[col];
    out->num_values = c->num_values;
    out->has_null_count = c->has_null_count;
    out->null_count = c->null_count;
    switch (L->info.dtype) {
    case MR_T_BOOL:
    case MR_T_INT64:
    case MR_T_DATE:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: out->kind = MR_PQ_STAT_INT; break; /* DECIMAL: unscaled */
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
            if (ok) iv = (int32_t)mr_le_get32(v[k]);
            break;
        case CV_DEC64:
            ok = vl[k] == 8;
            if (ok) iv = (int64_t)mr_le_get64(v[k]);
            break;
        case CV_DECBYTES:
            ok = vl[k] >= 1 && !be_twos_to_i64(v[k], vl[k], &iv);
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
