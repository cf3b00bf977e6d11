/* The in-memory columnar table every data op exchanges: typed arrays with
 * validity bitmaps, no row structs.
 *
 * Example:
 *
 *   mr_table *t = NULL;
 *   mr_column *age = NULL;
 *   if (mr_table_new(&t, &err) != MR_OK || mr_column_new("age", MR_T_INT64, 2, &age, &err) != MR_OK) {
 *       mr_table_free(t);
 *       return;
 *   }
 *   if (mr_column_append_int64(age, 42) != MR_OK || mr_column_append_null(age) != MR_OK) {
 *       mr_column_free(age);
 *       mr_table_free(t);
 *       return;
 *   }
 *   if (mr_table_add_column(t, age, &err) == MR_OK) {   // t owns age now (also on failure)
 *       const mr_column *c = mr_table_column(t, "age");  // borrowed from t
 *       int64_t v = ((const int64_t *)c->data)[0];
 *       printf("%lld, null: %d\n", (long long)v, mr_column_is_null(c, 1));   // 42, null: 1
 *   }
 *   mr_table_free(t);
 *
 * Layout per type (data points at n values, even for null slots, whose
 * content is unspecified but initialised):
 *   BOOL      uint8_t[n] (0/1)          INT64     int64_t[n]
 *   FLOAT64   double[n]                 FLOAT32   float[n]
 *   DATE      int32_t[n] days since 1970-01-01
 *   TIMESTAMP int64_t[n] microseconds since 1970-01-01T00:00:00Z
 *   STRING    plain: offsets int64_t[n+1] into bytes (UTF-8, not NUL-terminated)
 *             dictionary: codes int32_t[n] into dict (a plain STRING column)
 * valid: bit i (valid[i/8] >> (i%8) & 1) is 1 when row i is not null; NULL
 * means no nulls. A column holds at most 2^31 - 1 rows and 2^40 string bytes.
 *
 * Ownership: a table owns its columns, a column owns its buffers (and a
 * dictionary column its dict); mr_table_free / mr_column_free free
 * everything (NULL is a no-op). A column added to a table is the table's,
 * also when adding fails. Accessors (mr_table_column, mr_column_str, the
 * data/offsets/bytes/valid pointers) return borrowed views, valid until the
 * table or column is freed or mutated: an append may move every buffer. New
 * tables and columns (slice, take, new) are the caller's.
 * Status codes: MR_E_NOMEM; MR_E_LIMIT (the row or byte caps above);
 * MR_E_SCHEMA (duplicate names, row counts or types that do not match);
 * MR_E_NOT_FOUND (a named column is absent, with a did-you-mean hint);
 * MR_E_INVALID_ARG (a dictionary code out of range, a bad dictionary, a
 * column selected twice). The append functions return a code and set no
 * mr_error. Calling an append of another type than the column's, or a row
 * index past the end, is a broken invariant (MR_ASSERT), not a status.
 * Thread safety: not thread-safe for mutation; concurrent readers are fine. */
#ifndef MILLRACE_TABLE_H
#define MILLRACE_TABLE_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Append-only: stored in manifests and artifacts. */
typedef enum mr_dtype {
    MR_T_NULL = 0, /* placeholder: unknown type (all-null column during inference) */
    MR_T_BOOL = 1,
    MR_T_INT64 = 2,
    MR_T_FLOAT64 = 3,
    MR_T_FLOAT32 = 4,
    MR_T_STRING = 5,
    MR_T_DATE = 6,
    MR_T_TIMESTAMP = 7,
    MR_T_DECIMAL = 8, /* exact: int64 unscaled values, kind.precision (1..38) and kind.scale digits;
                         expressions, features and models see the value as float64 */
} mr_dtype;

const char *mr_dtype_name(mr_dtype t); /* "int64", "float64", "string", ... (static; "unknown" out of range) */
/* Accepts the names above but "null", and "int", "integer", "float",
 * "double", "str", "boolean", "datetime". MR_E_NOT_FOUND (no mr_error). */
mr_status mr_dtype_parse(const char *name, mr_dtype *out);
size_t mr_dtype_width(mr_dtype t); /* bytes per value in data (STRING, NULL: 0) */

/* How a column's values were typed where they came from, kept so that an
 * export writes them back as they came (docs/data.md, "Exact types"):
 * computation only ever sees mr_column.type. All zero = the plain type. */
enum {
    MR_KIND_UNSIGNED = 1, /* INT64: the source integer was unsigned */
    MR_KIND_BINARY = 2,   /* STRING: bytes, not text (Parquet BYTE_ARRAY without a string annotation) */
    MR_KIND_LOCAL = 4,    /* TIMESTAMP: a naive (local) time, not adjusted to UTC */
};
typedef struct mr_colkind {
    uint8_t int_bits; /* INT64: 8, 16 or 32 when the source was that narrow; 0 = 64 */
    uint8_t flags;    /* MR_KIND_* */
    uint8_t precision, scale; /* DECIMAL: total and fractional digits (scale <= precision) */
} mr_colkind;
/* "int32", "uint64", "binary", "timestamp_local", "decimal(10,2)", ... or mr_dtype_name(t)
 * when the kind is plain; written into buf (at least 24 bytes). */
const char *mr_kind_name(mr_dtype t, mr_colkind k, char *buf, size_t n);
/* The names a declared schema (--schema, the ingest op) accepts, for hints. */
#define MR_SCHEMA_TYPE_NAMES                                                                                       \
    "bool, int64, float64, float32, string, date, timestamp, int8, int16, int32, uint8, uint16, uint32, uint64, "  \
    "decimal(P,S), binary, timestamp_local"
/* Parses a name mr_kind_name writes (and every mr_dtype_parse name).
 * MR_E_NOT_FOUND (no mr_error). */
mr_status mr_kind_parse(const char *name, mr_dtype *type, mr_colkind *kind);
typedef struct mr_column mr_column;
struct mr_column {
    char *name;
    mr_dtype type;
    mr_colkind kind;     /* zeroed by mr_column_new; copied by slice, take and mr_column_new_like */
    size_t n;            /* rows */
    size_t cap;          /* rows allocated */
    uint8_t *valid;      /* validity bitmap, NULL = no nulls */
    size_t null_count;
    void *data;          /* fixed-width values (not STRING) */
    int64_t *offsets;    /* STRING plain: n + 1 offsets */
    char *bytes;         /* STRING plain: concatenated values */
    size_t bytes_len, bytes_cap;
    int32_t *codes;      /* STRING dictionary-encoded: n codes, or NULL */
    mr_column *dict;     /* STRING dictionary: the distinct values (plain STRING) */
};

/* n_rows, n_cols and cols are for reading: add, replace, rename and drop
 * columns through the functions below, which keep by_name consistent. A
 * table view may be made in caller storage ({n_rows, n_cols, cols}, by_name
 * zeroed) for read-only use: lookups then scan the names. */
typedef struct mr_table {
    size_t n_rows;
    size_t n_cols;
    mr_column **cols;
    size_t cols_cap;     /* private: slots allocated in cols */
    mr_strindex by_name; /* private: name -> position, kept once n_cols >= 16 */
} mr_table;

/* ---- columns ------------------------------------------------------------ */
/* An empty column (name copied; cap_hint rows reserved). MR_E_NOMEM. */
mr_status mr_column_new(const char *name, mr_dtype type, size_t cap_hint, mr_column **out, mr_error *err);
/* An empty column of src's type and kind, named name (src's when NULL). */
mr_status mr_column_new_like(const mr_column *src, const char *name, size_t cap_hint, mr_column **out, mr_error *err);
/* A dictionary-encoded STRING column over dict, a plain STRING column
 * (takes ownership of dict, also on failure). MR_E_INVALID_ARG (dict is not
 * plain STRING), MR_E_NOMEM. */
mr_status mr_column_new_dict(const char *name, mr_column *dict, size_t cap_hint, mr_column **out, mr_error *err);
void mr_column_free(mr_column *c);
/* Removes every row of c (a dictionary-encoded column becomes plain),
 * keeping its name, type and allocation: appends then reuse the memory. */
void mr_column_clear(mr_column *c);
mr_status mr_column_reserve(mr_column *c, size_t n_rows); /* MR_E_NOMEM / MR_E_LIMIT */
/* Appends one row. MR_E_NOMEM / MR_E_LIMIT (nothing appended). */
mr_status mr_column_append_null(mr_column *c);
mr_status mr_column_append_bool(mr_column *c, int v);
mr_status mr_column_append_int64(mr_column *c, int64_t v);   /* INT64, TIMESTAMP, DECIMAL (unscaled) */
mr_status mr_column_append_int32(mr_column *c, int32_t v);   /* DATE */
mr_status mr_column_append_float64(mr_column *c, double v);
mr_status mr_column_append_float32(mr_column *c, float v);
mr_status mr_column_append_str(mr_column *c, const char *s, size_t len); /* plain STRING */
mr_status mr_column_append_code(mr_column *c, int32_t code);             /* dictionary STRING; MR_E_INVALID_ARG past dict */
static inline int mr_column_is_null(const mr_column *c, size_t i)
{
    return c->valid && !((c->valid[i >> 3] >> (i & 7)) & 1);
}
/* String value i of a STRING column (plain or dictionary): *len_out bytes,
 * not NUL-terminated; borrowed (a null row gives "" or its dictionary's
 * first value: check mr_column_is_null first). */
const char *mr_column_str(const mr_column *c, size_t i, size_t *len_out);
/* Decodes a dictionary column into a plain one in place (no-op on plain;
 * views into the old codes/dict are dead). MR_E_NOMEM / MR_E_LIMIT (c is
 * unchanged). */
mr_status mr_column_materialize(mr_column *c, mr_error *err);
/* Deep copy of rows [begin, end) (begin <= end <= c->n); a dictionary
 * column stays encoded, with its own copy of the dictionary. */
mr_status mr_column_slice(const mr_column *c, size_t begin, size_t end, mr_column **out, mr_error *err);
/* Copies the rows listed in idx (n_idx of them, each < c->n, repeats
 * allowed) into a new column; strings come out plain. */
mr_status mr_column_take(const mr_column *c, const uint32_t *idx, size_t n_idx, mr_column **out, mr_error *err);
/* Whether value v (unscaled for DECIMAL) fits kind k of type t: an
 * int_bits integer of its signedness, a DECIMAL of at most k.precision
 * digits (when <= 18); 1 for other types. */
int mr_kind_fits(mr_dtype t, mr_colkind k, int64_t v);
/* Whether every non-null value of c fits its kind (an int_bits integer of
 * its signedness); 1 for other kinds. *bad_row: the first that does not. */
int mr_column_fits_kind(const mr_column *c, size_t *bad_row);
/* Appends all rows of src to dst. MR_E_SCHEMA (another type), MR_E_NOMEM,
 * MR_E_LIMIT; a dictionary dst over another dictionary is decoded first.
 * After a failure dst may hold some of src's rows. */
mr_status mr_column_append_column(mr_column *dst, const mr_column *src, mr_error *err);

/* ---- tables ------------------------------------------------------------- */
mr_status mr_table_new(mr_table **out, mr_error *err); /* an empty table; MR_E_NOMEM */
void mr_table_free(mr_table *t);
/* Takes ownership of col (also on failure). Every column must have n_rows
 * rows (the first one sets it); names must be unique (MR_E_SCHEMA). */
mr_status mr_table_add_column(mr_table *t, mr_column *col, mr_error *err);
/* Lookups by name: O(1) expected (a hash index over the names; a table of
 * fewer than 16 columns, or a view, compares names directly). */
mr_column *mr_table_column(const mr_table *t, const char *name); /* borrowed, NULL if absent */
/* The same, trying column `hint` first (one comparison when column i is at
 * index i, as in a table built in schema order). */
mr_column *mr_table_column_hint(const mr_table *t, size_t hint, const char *name);
ssize_t mr_table_column_index(const mr_table *t, const char *name); /* -1 if absent */
/* Replaces column i (freed) by col, which must have n_rows rows and a name
 * no other column has. Takes ownership of col (also on failure: MR_E_SCHEMA,
 * MR_E_NOMEM, and then the table is unchanged). */
mr_status mr_table_set_column(mr_table *t, size_t i, mr_column *col, mr_error *err);
/* Renames columns idx[0..n) to names[0..n) (copied) at once, so names may
 * be swapped. MR_E_SCHEMA when two columns would share a name,
 * MR_E_INVALID_ARG when idx repeats a column, MR_E_NOMEM; on failure the
 * table is unchanged. O(n) expected, whatever the table's width. */
mr_status mr_table_rename_columns(mr_table *t, const size_t *idx, const char *const *names, size_t n, mr_error *err);
/* New tables of rows [begin, end) / the rows listed in idx (as the column
 * functions). MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_table_slice(const mr_table *t, size_t begin, size_t end, mr_table **out, mr_error *err);
mr_status mr_table_take(const mr_table *t, const uint32_t *idx, size_t n_idx, mr_table **out, mr_error *err);
/* Appends src's rows to dst (same column names and types, in order:
 * MR_E_SCHEMA names the first that differs); an empty dst (no columns)
 * takes copies of src's. After MR_E_NOMEM / MR_E_LIMIT dst's columns may
 * differ in length: free it. */
mr_status mr_table_append(mr_table *dst, const mr_table *src, mr_error *err);
/* Keeps only the named columns, in the given order; the others are freed
 * (views into them are dead). MR_E_NOT_FOUND names a missing one (with a
 * did-you-mean hint), MR_E_INVALID_ARG a name given twice; t is unchanged
 * on failure. */
mr_status mr_table_project(mr_table *t, const char *const *names, size_t n, mr_error *err);
/* Content hash of a table (names, types, values, nulls): equal tables hash
 * equal whatever their batch layout or dictionary encoding. {0, 0} on OOM. */
mr_hash128 mr_table_content_hash(const mr_table *t);

/* Formats value (row i of c) as text: "NULL" for nulls, shortest round-trip
 * floats ("nan", "inf", "-inf"), ISO dates ("2024-03-01") and timestamps
 * ("2024-03-01 12:00:00" plus ".ffffff" when there are microseconds),
 * strings as their bytes. Appends to out: MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_column_format(const mr_column *c, size_t i, mr_buf *out);

/* DECIMAL values: the unscaled int64 and the column's scale. */
#define MR_DECIMAL_MAX_PRECISION 38 /* a declared precision; values hold at most 18 digits (int64) */
double mr_decimal_to_f64(int64_t unscaled, unsigned scale);
/* "-123.45" for (-12345, 2): exactly scale fractional digits. MR_E_NOMEM. */
mr_status mr_decimal_format(int64_t unscaled, unsigned scale, mr_buf *out);
/* Parses s[0..len) ("-12.3", "7", "0.250") to the unscaled value at scale:
 * 0, or -1 (not a number, more fractional digits than scale that are not
 * zeros, or beyond int64). */
int mr_decimal_parse(const char *s, size_t len, unsigned scale, int64_t *out);

/* Calendar helpers (proleptic Gregorian, UTC); pure functions. */
int32_t mr_date_from_civil(int64_t y, unsigned m, unsigned d); /* days since 1970-01-01 */
void mr_date_to_civil(int32_t days, int64_t *y, unsigned *m, unsigned *d);
/* Parses s[0..len) exactly: "YYYY-MM-DD" -> days; "YYYY-MM-DD[T
 * ]HH:MM:SS[.f up to 9 digits][Z|+HH:MM|-HH:MM]" -> microseconds UTC
 * (digits past 6 truncated). 0 on success, -1 (out untouched) otherwise. */
int mr_date_parse(const char *s, size_t len, int32_t *days_out);
int mr_timestamp_parse(const char *s, size_t len, int64_t *us_out);

#ifdef __cplusplus
}
#endif
#endif
