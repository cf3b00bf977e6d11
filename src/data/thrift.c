/* Thrift compact protocol codec (see thrift.h). Reader: bounds-checked,
 * sticky-failing, depth-limited. Writer: appends to an mr_buf. Only what
 * Parquet metadata needs; maps and sets are skipped but never produced. */
#include "data/thrift.h"

#include <string.h>

void mr__tc_fail(mr__tc_reader *r, const char *why)
{
    if (!r->bad) r->why = why;
    r->bad = 1;
    r->p = r->end; /* every later read sees end of input */
}

void mr__tc_reader_init(mr__tc_reader *r, const void *p, size_t len)
{
    r->p = p;
    r->end = r->p + len;
    r->depth = 0;
    r->bad = 0;
    r->why = NULL;
}

static int read_byte(mr__tc_reader *r, uint8_t *b)
{
    if (r->bad || r->p >= r->end) {
        mr__tc_fail(r, "truncated metadata");
        return -1;
    }
    *b = *r->p++;
    return 0;
}

uint64_t mr__tc_read_varint(mr__tc_reader *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        uint8_t b;
        if (read_byte(r, &b)) return 0;
        if (shift == 63 && (b & 0x7e)) {
            mr__tc_fail(r, "varint overflows 64 bits");
            return 0;
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    mr__tc_fail(r, "varint longer than 10 bytes");
    return 0;
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

int64_t mr__tc_read_i64(mr__tc_reader *r)
{
    return unzigzag(mr__tc_read_varint(r));
}

int32_t mr__tc_read_i32(mr__tc_reader *r)
{
    int64_t v = mr__tc_read_i64(r);
    if (v < INT32_MIN || v > INT32_MAX) {
        mr__tc_fail(r, "i32 value out of range");
        return 0;
    }
    return (int32_t)v;
}

double mr__tc_read_double(mr__tc_reader *r)
{
    if (r->bad || r->end - r->p < 8) {
        mr__tc_fail(r, "truncated metadata");
        return 0;
    }
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++) bits |= (uint64_t)r->p[i] << (8 * i);
    r->p += 8;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

const uint8_t *mr__tc_read_binary(mr__tc_reader *r, size_t *len_out)
{
    *len_out = 0;
    uint64_t n = mr__tc_read_varint(r);
    if (r->bad) return NULL;
    if (n > (uint64_t)(r->end - r->p)) {
        mr__tc_fail(r, "binary field runs past the end of the metadata");
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    *len_out = (size_t)n;
    return p;
}

char *mr__tc_read_string(mr__tc_reader *r)
{
    size_t n;
    const uint8_t *p = mr__tc_read_binary(r, &n);
    if (r->bad) return NULL;
    char *s = mr_strndup((const char *)p, n);
    if (!s) mr__tc_fail(r, "out of memory");
    return s;
}

static void enter(mr__tc_reader *r)
{
    if (++r->depth > MR__TC_MAX_DEPTH) mr__tc_fail(r, "metadata nested too deeply");
}

void mr__tc_struct_begin(mr__tc_reader *r)
{
    enter(r);
}

void mr__tc_struct_end(mr__tc_reader *r)
{
    r->depth--;
}

int mr__tc_field_next(mr__tc_reader *r, int16_t *last_fid, int *fid_out, int *type_out)
{
    uint8_t b;
    if (read_byte(r, &b)) return 0;
    int type = b & 0x0f;
    if (type == MR__TC_STOP) return 0;
    if (type > MR__TC_STRUCT) {
        mr__tc_fail(r, "unknown thrift field type");
        return 0;
    }
    int delta = b >> 4;
    int fid;
    if (delta) {
        fid = *last_fid + delta;
    } else {
        int64_t v = mr__tc_read_i64(r);
        if (v < INT16_MIN || v > INT16_MAX) {
            mr__tc_fail(r, "field id out of range");
            return 0;
        }
        fid = (int)v;
    }
    if (r->bad || fid > INT16_MAX) {
        mr__tc_fail(r, "field id out of range");
        return 0;
    }
    *last_fid = (int16_t)fid;
    *fid_out = fid;
    *type_out = type;
    return 1;
}

void mr__tc_list_begin(mr__tc_reader *r, int *elem_type_out, size_t *n_out)
{
    *elem_type_out = 0;
    *n_out = 0;
    enter(r);
    uint8_t b;
    if (read_byte(r, &b)) return;
    uint64_t n = b >> 4;
    int et = b & 0x0f;
    if (n == 15) n = mr__tc_read_varint(r);
    if (r->bad) return;
    if (et == MR__TC_STOP || et > MR__TC_STRUCT) {
        mr__tc_fail(r, "unknown thrift list element type");
        return;
    }
    if (n > (uint64_t)(r->end - r->p)) { /* every element takes >= 1 byte */
        mr__tc_fail(r, "list longer than the metadata");
        return;
    }
    *elem_type_out = et;
    *n_out = (size_t)n;
}

void mr__tc_list_end(mr__tc_reader *r)
{
    r->depth--;
}

int mr__tc_read_list_bool(mr__tc_reader *r)
{
    uint8_t b;
    if (read_byte(r, &b)) return 0;
    return b == 1;
}

static void skip_bytes(mr__tc_reader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        mr__tc_fail(r, "truncated metadata");
        return;
    }
    r->p += n;
}

/* elem: nonzero when the value is a list/set/map element, where bools take
 * one byte instead of living in the field header. */
static void skip_value(mr__tc_reader *r, int type, int elem)
{
    if (r->bad) return;
    switch (type) {
    case MR__TC_TRUE:
    case MR__TC_FALSE:
        if (elem) skip_bytes(r, 1);
        break;
    case MR__TC_BYTE: skip_bytes(r, 1); break;
    case MR__TC_I16:
    case MR__TC_I32:
    case MR__TC_I64: (void)mr__tc_read_varint(r); break;
    case MR__TC_DOUBLE: skip_bytes(r, 8); break;
    case MR__TC_BINARY: {
        size_t n;
        (void)mr__tc_read_binary(r, &n);
        break;
    }
    case MR__TC_LIST:
    case MR__TC_SET: {
        int et;
        size_t n;
        mr__tc_list_begin(r, &et, &n);
        for (size_t i = 0; i < n && !r->bad; i++) skip_value(r, et, 1);
        mr__tc_list_end(r);
        break;
    }
    case MR__TC_MAP: {
        enter(r);
        uint64_t n = mr__tc_read_varint(r);
        if (!r->bad && n) {
            uint8_t kv;
            if (n > (uint64_t)(r->end - r->p) / 2) {
                mr__tc_fail(r, "map longer than the metadata");
            } else if (!read_byte(r, &kv)) {
                int kt = kv >> 4, vt = kv & 0x0f;
                if (kt == 0 || kt > MR__TC_STRUCT || vt == 0 || vt > MR__TC_STRUCT)
                    mr__tc_fail(r, "unknown thrift map element type");
                for (uint64_t i = 0; i < n && !r->bad; i++) {
                    skip_value(r, kt, 1);
                    skip_value(r, vt, 1);
                }
            }
        }
        r->depth--;
        break;
    }
    case MR__TC_STRUCT: {
        int16_t last = 0;
        int fid, ft;
        mr__tc_struct_begin(r);
        while (mr__tc_field_next(r, &last, &fid, &ft)) skip_value(r, ft, 0);
        mr__tc_struct_end(r);
        break;
    }
    default: mr__tc_fail(r, "unknown thrift type"); break;
    }
}

void mr__tc_skip(mr__tc_reader *r, int type)
{
    skip_value(r, type, 0);
}

/* ---- writer ------------------------------------------------------------ */

void mr__tc_writer_init(mr__tc_writer *w, mr_buf *out)
{
    memset(w, 0, sizeof(*w));
    w->out = out;
}

static void put(mr__tc_writer *w, const void *p, size_t n)
{
    if (w->rc == MR_OK) w->rc = mr_buf_append(w->out, p, n);
}

void mr__tc_write_varint(mr__tc_writer *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    put(w, b, n);
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

void mr__tc_write_i32(mr__tc_writer *w, int32_t v)
{
    mr__tc_write_varint(w, zigzag(v));
}

void mr__tc_write_i64(mr__tc_writer *w, int64_t v)
{
    mr__tc_write_varint(w, zigzag(v));
}

void mr__tc_write_binary(mr__tc_writer *w, const void *p, size_t len)
{
    mr__tc_write_varint(w, len);
    if (len) put(w, p, len);
}

void mr__tc_write_field(mr__tc_writer *w, int fid, int type)
{
    int16_t *last = &w->last_fid[w->depth];
    int delta = fid - *last;
    if (delta > 0 && delta <= 15) {
        uint8_t b = (uint8_t)(delta << 4 | type);
        put(w, &b, 1);
    } else {
        uint8_t b = (uint8_t)type;
        put(w, &b, 1);
        mr__tc_write_i64(w, fid);
    }
    *last = (int16_t)fid;
}

void mr__tc_write_bool_field(mr__tc_writer *w, int fid, int v)
{
    mr__tc_write_field(w, fid, v ? MR__TC_TRUE : MR__TC_FALSE);
}

void mr__tc_write_i32_field(mr__tc_writer *w, int fid, int32_t v)
{
    mr__tc_write_field(w, fid, MR__TC_I32);
    mr__tc_write_i32(w, v);
}

void mr__tc_write_i8_field(mr__tc_writer *w, int fid, int8_t v)
{
    mr__tc_write_field(w, fid, MR__TC_BYTE);
    put(w, &v, 1);
}

void mr__tc_write_i64_field(mr__tc_writer *w, int fid, int64_t v)
{
    mr__tc_write_field(w, fid, MR__TC_I64);
    mr__tc_write_i64(w, v);
}

void mr__tc_write_binary_field(mr__tc_writer *w, int fid, const void *p, size_t len)
{
    mr__tc_write_field(w, fid, MR__TC_BINARY);
    mr__tc_write_binary(w, p, len);
}

void mr__tc_write_list_begin(mr__tc_writer *w, int elem_type, size_t n)
{
    if (n < 15) {
        uint8_t b = (uint8_t)(n << 4 | (size_t)elem_type);
        put(w, &b, 1);
    } else {
        uint8_t b = (uint8_t)(0xf0 | elem_type);
        put(w, &b, 1);
        mr__tc_write_varint(w, n);
    }
}

void mr__tc_write_struct_begin(mr__tc_writer *w)
{
    MR_ASSERT(w->depth + 1 < MR__TC_WMAX_DEPTH);
    w->depth++;
    w->last_fid[w->depth] = 0;
}

void mr__tc_write_struct_end(mr__tc_writer *w)
{
    uint8_t stop = 0;
    put(w, &stop, 1);
    MR_ASSERT(w->depth > 0);
    w->depth--;
}
