/* Allocation wrappers with failure injection for the OOM torture tests, the
 * routing of third-party allocators through them, and the capped growable
 * buffer mr_buf.
 *
 * Fault injection (SQLite's test_malloc countdown, curl's torture):
 * mr_alloc_fault_arm(N, persist) starts counting allocation calls; the Nth
 * one from then on fails (returns NULL), and with persist every later one
 * too. Off, an allocation costs one relaxed atomic load and a branch: the
 * counters live on a cold path that only an armed hook takes. The counter
 * is shared by all threads, so in a multithreaded test which allocation is
 * the Nth may differ from run to run; every one of them must still fail
 * cleanly. The older mr_alloc_fail_after (fail once, for hand-written OOM
 * loops) is a second, independent countdown on the same path, so such a
 * test still works while a torture run has armed the main one.
 *
 * Routed here: jansson (json_set_alloc_funcs, at load time: a block it
 * allocated before is freed by the same free()) and zlib (per stream, in
 * src/data/parquet_codec.c). Not routed, their allocations neither counted
 * nor failed: SQLite (sqlite3_config(SQLITE_CONFIG_MALLOC) would need a
 * size header per block and must run before the first connection), libyaml
 * (no allocator hook), libzstd (its custom-allocator API is behind
 * ZSTD_STATIC_LINKING_ONLY), snappy, liblz4 (its frame context; the custom
 * allocator is behind LZ4F_STATIC_LINKING_ONLY) and libmicrohttpd. mr_alloc_failures_here
 * counts, per thread, every NULL these wrappers return, so a caller can
 * tell jansson's "invalid token" after a failed allocation from bad input;
 * mr_json_parse (at the end) does that for one text. */
#include "millrace/core.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { FAULT_MAIN = 1, FAULT_ONCE = 2 };

static atomic_uint fault_on;           /* FAULT_* bits; 0: the fast path */
static atomic_ullong fault_seen;       /* allocation calls since armed */
static atomic_ullong fault_failed;     /* of those, failed by the main hook */
static atomic_ullong fault_at;         /* the main hook's N; 0: count only */
static atomic_int fault_persist;       /* fail every call after the Nth too */
static atomic_long once_countdown;     /* mr_alloc_fail_after: >0 fails at 0 */
static atomic_ullong fault_nomem_errs; /* MR_E_NOMEM errors recorded since armed */
static _Thread_local uint64_t thread_failures; /* NULL returns in this thread */

/* A process forked while armed (a test's own child, a worker) starts
 * disarmed: the countdown belongs to the process that armed it. */
static void disarm_in_child(void) { atomic_fetch_and(&fault_on, ~(unsigned)FAULT_MAIN); }
static void register_atfork(void) { pthread_atfork(NULL, NULL, disarm_in_child); }

void mr_alloc_fault_arm(uint64_t nth, int persist)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    atomic_store(&fault_on, atomic_load(&fault_on) & ~(unsigned)FAULT_MAIN);
    atomic_store(&fault_seen, 0);
    atomic_store(&fault_failed, 0);
    atomic_store(&fault_nomem_errs, 0);
    atomic_store(&fault_at, nth);
    atomic_store(&fault_persist, persist != 0);
    atomic_fetch_or(&fault_on, FAULT_MAIN);
}

void mr_alloc_fault_disarm(void) { atomic_fetch_and(&fault_on, ~(unsigned)FAULT_MAIN); }

uint64_t mr_alloc_fault_seen(void) { return atomic_load(&fault_seen); }
uint64_t mr_alloc_fault_failed(void) { return atomic_load(&fault_failed); }
uint64_t mr_alloc_fault_nomem_errors(void) { return atomic_load(&fault_nomem_errs); }

void mr__alloc_note_nomem_error(void)
{
    if (atomic_load_explicit(&fault_on, memory_order_relaxed) & FAULT_MAIN) atomic_fetch_add(&fault_nomem_errs, 1);
}

uint64_t mr_alloc_failures_here(void) { return thread_failures; }

void mr_alloc_fail_after(long n)
{
    atomic_store(&once_countdown, n > 0 ? n : 0);
    if (n > 0)
        atomic_fetch_or(&fault_on, FAULT_ONCE);
    else
        atomic_fetch_and(&fault_on, ~(unsigned)FAULT_ONCE);
}

__attribute__((noinline, cold)) static int fault_slow(unsigned on)
{
    int fail = 0;
    if (on & FAULT_MAIN) {
        unsigned long long seen = atomic_fetch_add(&fault_seen, 1) + 1;
        unsigned long long at = atomic_load(&fault_at);
        if (at && (seen == at || (seen > at && atomic_load(&fault_persist)))) {
            atomic_fetch_add(&fault_failed, 1);
            fail = 1;
        }
    }
    if (!fail && (on & FAULT_ONCE) && atomic_load(&once_countdown) > 0 &&
        atomic_fetch_sub(&once_countdown, 1) == 1)
        fail = 1;
    return fail;
}

static inline int should_fail(void)
{
    unsigned on = atomic_load_explicit(&fault_on, memory_order_relaxed);
    if (__builtin_expect(on == 0, 1)) return 0;
    return fault_slow(on);
}

/* jansson allocates through these from the start (before main, before any
 * thread). json_set_alloc_funcs only swaps two pointers, and mr_free is
 * free(), so a block jansson got from malloc earlier is freed correctly. */
__attribute__((constructor)) static void route_jansson(void) { json_set_alloc_funcs(mr_malloc, mr_free); }

/* Every NULL an allocation returns, injected or real, is counted for the
 * calling thread (mr_alloc_failures_here). */
static void *counted(void *p)
{
    if (!p) thread_failures++;
    return p;
}

void *mr_malloc(size_t n)
{
    if (should_fail()) return counted(NULL);
    return counted(malloc(n ? n : 1));
}

void *mr_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return counted(NULL);
    if (should_fail()) return counted(NULL);
    return counted(calloc(count ? count : 1, size ? size : 1));
}

void *mr_realloc(void *p, size_t n)
{
    if (should_fail()) return counted(NULL);
    return counted(realloc(p, n ? n : 1));
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
    b->failed = MR_OK;
}

static mr_status buf_reserve(mr_buf *b, size_t extra)
{
    size_t limit = b->limit ? b->limit : MR_BUF_DEFAULT_LIMIT;
    /* At most limit bytes of data (plus the NUL). Written without
     * "limit - extra - 1", which wrapped around for extra == limit and let
     * len exceed the cap (or looped forever growing towards limit + 1). */
    if (extra > limit || b->len > limit - extra) {
        if (!b->failed) b->failed = MR_E_LIMIT;
        return MR_E_LIMIT;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return MR_OK;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < need) ncap = ncap > limit / 2 ? limit + 1 : ncap * 2;
    char *nd = mr_realloc(b->data, ncap);
    if (!nd) {
        if (!b->failed) b->failed = MR_E_NOMEM;
        return MR_E_NOMEM;
    }
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

mr_status mr_json_parse(const char *text, size_t len, size_t flags, json_t **out, const char *what, mr_error *err)
{
    *out = NULL;
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = json_loadb(text ? text : "", text ? len : 0, flags, &je);
    if (mr_alloc_failures_here() != oom0 || (!j && json_error_code(&je) == json_error_out_of_memory)) {
        json_decref(j);
        return MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", what);
    }
    if (!j) return MR_ERR(err, MR_E_PARSE, "%s: invalid JSON at line %d, column %d: %s", what, je.line, je.column, je.text);
    *out = j;
    return MR_OK;
}
