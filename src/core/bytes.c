/* Little-endian encoding into growable buffers and a bounds-checked reader:
 * the one byte codec under every binary format millrace writes. */
#include "millrace/core.h"

#include <string.h>

mr_status mr_buf_put_u8(mr_buf *b, uint8_t v) { return mr_buf_append(b, &v, 1); }

mr_status mr_buf_put_u16(mr_buf *b, uint16_t v)
{
    uint8_t x[2];
    mr_le_put16(x, v);
    return mr_buf_append(b, x, 2);
}

mr_status mr_buf_put_u32(mr_buf *b, uint32_t v)
{
    uint8_t x[4];
    mr_le_put32(x, v);
    return mr_buf_append(b, x, 4);
}

mr_status mr_buf_put_u64(mr_buf *b, uint64_t v)
{
    uint8_t x[8];
    mr_le_put64(x, v);
    return mr_buf_append(b, x, 8);
}

mr_status mr_buf_put_f64(mr_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return mr_buf_put_u64(b, u);
}

mr_status mr_buf_put_str(mr_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > UINT32_MAX) return MR_E_LIMIT;
    mr_status st = mr_buf_put_u32(b, (uint32_t)n);
    return st == MR_OK && n ? mr_buf_append(b, s, n) : st;
}

void mr_reader_init(mr_reader *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->pos = 0;
    r->bad = 0;
}

const void *mr_reader_bytes(mr_reader *r, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        r->bad = 1;
        return NULL;
    }
    const void *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint8_t mr_reader_u8(mr_reader *r)
{
    const uint8_t *p = mr_reader_bytes(r, 1);
    return p ? p[0] : 0;
}

uint16_t mr_reader_u16(mr_reader *r)
{
    const uint8_t *p = mr_reader_bytes(r, 2);
    return p ? mr_le_get16(p) : 0;
}

uint32_t mr_reader_u32(mr_reader *r)
{
    const uint8_t *p = mr_reader_bytes(r, 4);
    return p ? mr_le_get32(p) : 0;
}

uint64_t mr_reader_u64(mr_reader *r)
{
    const uint8_t *p = mr_reader_bytes(r, 8);
    return p ? mr_le_get64(p) : 0;
}

double mr_reader_f64(mr_reader *r)
{
    uint64_t u = mr_reader_u64(r);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

char *mr_reader_str(mr_reader *r)
{
    uint32_t n = mr_reader_u32(r);
    const char *p = mr_reader_bytes(r, n);
    return p ? mr_strndup(p, n) : NULL;
}
