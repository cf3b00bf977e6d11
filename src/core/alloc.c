/* Allocation wrappers: byte accounting and a failure-injection hook for OOM
 * tests. Also the capped growable buffer mr_buf. */
#include "millrace/core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown;  /* >0: fail when it reaches 0 */
static atomic_size_t bytes_in_use;  /* approximate; realloc not tracked precisely */

void mr_alloc_fail_after(long n) { atomic_store(&fail_countdown, n); }
size_t mr_alloc_bytes_in_use(void) { return atomic_load(&bytes_in_use); }

static int should_fail(void)
{
    long c = atomic_load(&fail_countdown);
    if (c <= 0) return 0;
    if (atomic_fetch_sub(&fail_countdown, 1) == 1) return 1;
    return 0;
}

void *mr_malloc(size_t n)
{
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *mr_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    if (should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *mr_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void mr_free(void *p) { free(p); }

char *mr_strdup(const char *s)
{
    if (!s) return NULL;
    return mr_strndup(s, strlen(s));
}

char *mr_strndup(const char *s, size_t n)
{
    char *d = mr_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *mr_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = mr_malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

#define MR_BUF_DEFAULT_LIMIT ((size_t)1 << 30)

void mr_buf_init(mr_buf *b) { memset(b, 0, sizeof(*b)); }

void mr_buf_free(mr_buf *b)
{
    if (!b) return;
    mr_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static mr_status buf_reserve(mr_buf *b, size_t extra)
{
    size_t limit = b->limit ? b->limit : MR_BUF_DEFAULT_LIMIT;
    /* At most limit bytes of data (plus the NUL). Written without
     * "limit - extra - 1", which wrapped around for extra == limit and let
     * len exceed the cap (or looped forever growing towards limit + 1). */
    if (extra > limit || b->len > limit - extra) return MR_E_LIMIT;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return MR_OK;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < need) ncap = ncap > limit / 2 ? limit + 1 : ncap * 2;
    char *nd = mr_realloc(b->data, ncap);
    if (!nd) return MR_E_NOMEM;
    b->data = nd;
    b->cap = ncap;
    return MR_OK;
}

mr_status mr_buf_append(mr_buf *b, const void *p, size_t n)
{
    mr_status st = buf_reserve(b, n);
    if (st != MR_OK) return st;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return MR_OK;
}

mr_status mr_buf_puts(mr_buf *b, const char *s) { return mr_buf_append(b, s, strlen(s)); }

mr_status mr_buf_printf(mr_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return MR_E_INVALID_ARG;
    mr_status st = buf_reserve(b, (size_t)n);
    if (st != MR_OK) return st;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return MR_OK;
}

mr_status mr_buf_json_str(mr_buf *b, const char *s)
{
    mr_status st = mr_buf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; st == MR_OK && *p; p++) {
        switch (*p) {
        case '"': st = mr_buf_append(b, "\\\"", 2); break;
        case '\\': st = mr_buf_append(b, "\\\\", 2); break;
        case '\n': st = mr_buf_append(b, "\\n", 2); break;
        case '\r': st = mr_buf_append(b, "\\r", 2); break;
        case '\t': st = mr_buf_append(b, "\\t", 2); break;
        default:
            if (*p < 0x20)
                st = mr_buf_printf(b, "\\u%04x", *p);
            else
                st = mr_buf_append(b, p, 1);
        }
    }
    if (st == MR_OK) st = mr_buf_append(b, "\"", 1);
    return st;
}
