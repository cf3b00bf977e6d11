/* Thrift compact protocol: a bounds-checked reader and a buffer-backed writer,
 * just enough for Parquet metadata (structs, lists, binary, bools, ints).
 *
 * The reader never reads past its end pointer; any malformed input makes it
 * sticky-failed (r->bad = 1) and every later call returns zeroes, so callers
 * check r->bad once after a struct. Nesting is limited to MR__TC_MAX_DEPTH. */
#ifndef MILLRACE_DATA_THRIFT_H
#define MILLRACE_DATA_THRIFT_H

#include "millrace/core.h"

/* Compact protocol type ids (field headers and list element types). */
enum {
    MR__TC_STOP = 0,
    MR__TC_TRUE = 1,
    MR__TC_FALSE = 2,
    MR__TC_BYTE = 3,
    MR__TC_I16 = 4,
    MR__TC_I32 = 5,
    MR__TC_I64 = 6,
    MR__TC_DOUBLE = 7,
    MR__TC_BINARY = 8,
    MR__TC_LIST = 9,
    MR__TC_SET = 10,
    MR__TC_MAP = 11,
    MR__TC_STRUCT = 12,
};

/* Deep enough for Parquet (LogicalType -> TimestampType -> TimeUnit is 4),
 * shallow enough that a hostile input cannot exhaust the C stack. */
#define MR__TC_MAX_DEPTH 32

typedef struct mr__tc_reader {
    const uint8_t *p;   /* next byte */
    const uint8_t *end; /* one past the last readable byte */
    int depth;          /* current struct/list nesting */
    int bad;            /* sticky: malformed or truncated input */
    const char *why;    /* first failure, static string */
} mr__tc_reader;

void mr__tc_reader_init(mr__tc_reader *r, const void *p, size_t len);
uint64_t mr__tc_read_varint(mr__tc_reader *r);
int32_t mr__tc_read_i32(mr__tc_reader *r); /* zigzag varint, range-checked */
int64_t mr__tc_read_i64(mr__tc_reader *r);
double mr__tc_read_double(mr__tc_reader *r);
/* Borrowed bytes of a binary/string; *len_out is bounded by the input. */
const uint8_t *mr__tc_read_binary(mr__tc_reader *r, size_t *len_out);
/* Copies a binary into a new NUL-terminated string (NULL on error / OOM; OOM
 * sets r->bad with why "out of memory"). */
char *mr__tc_read_string(mr__tc_reader *r);

/* Struct iteration:
 *   int16_t last = 0; int fid, type;
 *   mr__tc_struct_begin(r);
 *   while (mr__tc_field_next(r, &last, &fid, &type)) { switch (fid) ... default: mr__tc_skip(r, type); }
 *   mr__tc_struct_end(r);
 * For bool fields, type is MR__TC_TRUE or MR__TC_FALSE and carries the value:
 * read it with mr__tc_field_bool(type). field_next returns 0 at STOP or on error. */
void mr__tc_struct_begin(mr__tc_reader *r);
int mr__tc_field_next(mr__tc_reader *r, int16_t *last_fid, int *fid_out, int *type_out);
void mr__tc_struct_end(mr__tc_reader *r);
static inline int mr__tc_field_bool(int type)
{
    return type == MR__TC_TRUE;
}
/* List header: element type and count. The count is checked against the
 * bytes left (every element takes at least one byte except bool... which also
 * takes one in lists), so a hostile count cannot drive a huge allocation. */
void mr__tc_list_begin(mr__tc_reader *r, int *elem_type_out, size_t *n_out);
void mr__tc_list_end(mr__tc_reader *r);
/* Boolean list element (one byte: 1 = true, 0 or 2 = false). */
int mr__tc_read_list_bool(mr__tc_reader *r);
/* Skips one value of the given type (any type, recursively, depth-limited). */
void mr__tc_skip(mr__tc_reader *r, int type);
/* Marks the reader failed with a reason (kept if one is set already). */
void mr__tc_fail(mr__tc_reader *r, const char *why);

/* Writer: appends to an mr_buf. Errors (OOM) are sticky in w->rc. */
#define MR__TC_WMAX_DEPTH 16
typedef struct mr__tc_writer {
    mr_buf *out;
    mr_status rc;
    int depth;
    int16_t last_fid[MR__TC_WMAX_DEPTH];
} mr__tc_writer;

void mr__tc_writer_init(mr__tc_writer *w, mr_buf *out);
void mr__tc_write_field(mr__tc_writer *w, int fid, int type); /* field header (type != bool) */
void mr__tc_write_bool_field(mr__tc_writer *w, int fid, int v);
void mr__tc_write_i8_field(mr__tc_writer *w, int fid, int8_t v);
void mr__tc_write_i32_field(mr__tc_writer *w, int fid, int32_t v);
void mr__tc_write_i64_field(mr__tc_writer *w, int fid, int64_t v);
void mr__tc_write_binary_field(mr__tc_writer *w, int fid, const void *p, size_t len);
void mr__tc_write_varint(mr__tc_writer *w, uint64_t v);
void mr__tc_write_i32(mr__tc_writer *w, int32_t v);
void mr__tc_write_i64(mr__tc_writer *w, int64_t v);
void mr__tc_write_binary(mr__tc_writer *w, const void *p, size_t len);
void mr__tc_write_list_begin(mr__tc_writer *w, int elem_type, size_t n);
/* struct_begin after a field header (or as a list element / top level);
 * struct_end writes STOP and restores the enclosing field-id context. */
void mr__tc_write_struct_begin(mr__tc_writer *w);
void mr__tc_write_struct_end(mr__tc_writer *w);

#endif
