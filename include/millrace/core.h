/* millrace core: status codes and error objects, allocation, logging,
 * hashing (xxh3-128), filesystem helpers, the thread pool, the seeded RNG,
 * little-endian byte encoding, "did you mean" and the library version.
 *
 * Everything else in libmillrace builds on this header (and on value.h, the
 * typed value tree, also core's). It knows nothing of pipelines, YAML or
 * the CLI.
 *
 * Example (given const char *path):
 *
 *   mr_hash128 h;
 *   uint64_t size;
 *   if (mr_hash_file(path, &h, &size, &err) != MR_OK) {
 *       mr_log_error(&err);          // "millrace: error: data.csv: cannot open: No such file or directory"
 *   } else {
 *       char hex[MR_HASH_HEX_LEN + 1];
 *       mr_hash_hex(h, hex);
 *       mr_log(MR_LOG_INFO, "%s: %s (%llu bytes)", path, hex, (unsigned long long)size);
 *   }
 *
 * Conventions of every public header (include/millrace/):
 * - A fallible function returns mr_status (MR_OK == 0) and takes an
 *   mr_error *err last: NULL means "code only"; otherwise the first error
 *   wins (mr_error below). Each function, or its header, lists the codes it
 *   returns; MR_E_NOMEM may come from any function that allocates.
 * - Parameters: pointers are [in] and borrowed for the call unless the
 *   name says out (out, *_out: [out], written on success) or the comment
 *   says the callee keeps or takes them. A constructor returns its object
 *   through **out; the caller owns it and ends it with the matching
 *   _free/_close (NULL is a no-op), never with mr_free.
 * - Strings and arrays a function returns through a pointer it does not
 *   document as borrowed are the caller's, freed with mr_free.
 * - Borrowed views (accessors returning const pointers) live as long as
 *   the object they come from, until it is freed or mutated.
 *
 * Ownership here: mr_malloc'ed memory (mr_strdup, mr_asprintf, mr_path_*,
 * mr_fs_read_file's data, mr_fs_mkdtemp's path) is freed with mr_free;
 * an mr_buf owns its data (mr_buf_free); an mr_hasher is freed with
 * mr_hasher_free; mr_progress_end frees its progress line.
 * Status codes here: MR_E_IO (an OS call failed: the message names the
 * path, err->sys_errno keeps errno), MR_E_NOT_FOUND (a file to read does not
 * exist), MR_E_LIMIT (an mr_buf cap), MR_E_STATE (a lock held elsewhere),
 * MR_E_PARSE (bad hex), MR_E_INTERNAL (a thread could not start),
 * MR_E_NOMEM.
 * Thread safety: allocation, hashing, mr_edit_distance/mr_closest, time,
 * the RNG and byte encoders are reentrant (one object per thread: an
 * mr_error, mr_buf, mr_hasher, mr_reader or mr_rng is not shared while it
 * is written). mr_log and mr_log_error may be called from any thread; the
 * log, colour and progress settings, mr_pool_init/mr_pool_shutdown and the
 * process supervisor belong to the main thread (set them before starting
 * threads). mr_parallel_for is thread-safe (see the thread pool). */
#ifndef MILLRACE_CORE_H
#define MILLRACE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>
#include <sys/types.h> /* ssize_t: headers stand on their own, without feature-test macros */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version -----------------------------------------------------------
 * The library version, written into every artifact's "created_by". */
#define MILLRACE_VERSION "0.1.0"
const char *mr_version(void); /* MILLRACE_VERSION */

/* ---- status codes ------------------------------------------------------
 * One X-macro table generates the enum, mr_status_name() and mr_status_str().
 * Append only: never renumber (codes may appear in artifacts and run stores). */
#define MR_STATUS_MAP(X)                                      \
    X(OK, 0, "ok")                                            \
    X(E_IO, 1, "input/output error")                          \
    X(E_PARSE, 2, "parse error")                              \
    X(E_SCHEMA, 3, "schema error")                            \
    X(E_INVALID_ARG, 4, "invalid argument")                   \
    X(E_NOT_FOUND, 5, "not found")                            \
    X(E_CORRUPT, 6, "corrupt data")                           \
    X(E_NOMEM, 7, "out of memory")                            \
    X(E_LIMIT, 8, "limit exceeded")                           \
    X(E_STATE, 9, "invalid state")                            \
    X(E_INTERNAL, 10, "internal error")                       \
    X(E_INTERRUPTED, 11, "interrupted")                       \
    X(E_FAILED, 12, "failed")                                 \
    X(E_TIMEOUT, 13, "timed out")

typedef enum mr_status {
#define MR__STATUS_ENUM(name, val, str) MR_##name = val,
    MR_STATUS_MAP(MR__STATUS_ENUM)
#undef MR__STATUS_ENUM
} mr_status;

/* Static strings ("UNKNOWN" / "unknown status" for a value not in the map). */
const char *mr_status_name(mr_status s); /* "E_IO" */
const char *mr_status_str(mr_status s);  /* "input/output error" */

/* ---- error object ------------------------------------------------------
 * Passed as the last argument of fallible functions; NULL means "code only".
 * The first error wins: mr_error_set on an error that is already set does
 * nothing, so deep callees keep the precise message and callers only add
 * context (file, line, col, row, key, stage) and hints. */
#define MR_ERR_MSG_MAX 512
#define MR_ERR_CTX_MAX 256

typedef struct mr_error {
    mr_status code;             /* MR_OK while unset */
    int sys_errno;              /* errno at the failure, 0 if none */
    char msg[MR_ERR_MSG_MAX];   /* one line, no trailing newline */
    char file[MR_ERR_CTX_MAX];  /* input file the error is about, "" if none */
    long line;                  /* 1-based, 0 if unknown */
    long col;                   /* 1-based, 0 if unknown */
    long row;                   /* data row, 0 if unknown */
    char key[MR_ERR_CTX_MAX];   /* key path or column name, "" if none */
    char stage[128];            /* pipeline stage, "" if none */
    char hint[MR_ERR_MSG_MAX];  /* optional "did you mean ...", "" if none */
    const char *src_file;       /* C source location (debug aid) */
    int src_line;
} mr_error;

/* Zeroes err (code MR_OK, every field empty); clear is the same, for reuse.
 * NULL is a no-op. An mr_error lives in caller storage and owns nothing. */
void mr_error_init(mr_error *err);
void mr_error_clear(mr_error *err);
/* 1 when err is not NULL and holds an error. */
int mr_error_is_set(const mr_error *err);
/* Sets code + message unless already set. Returns code, so callers can
 * `return MR_ERR(err, MR_E_IO, "...")`. */
mr_status mr__error_set(mr_error *err, const char *src_file, int src_line, mr_status code,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define MR_ERR(err, code, ...) mr__error_set((err), __FILE__, __LINE__, (code), __VA_ARGS__)
/* Same, also records errno (formatted as ": strerror" after the message). */
mr_status mr__error_sys(mr_error *err, const char *src_file, int src_line, mr_status code,
                        int errnum, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define MR_ERR_SYS(err, code, errnum, ...) \
    mr__error_sys((err), __FILE__, __LINE__, (code), (errnum), __VA_ARGS__)
/* For a module's own error helper taking `...`: sets code + the message
 * from ap unless already set, and names `file` (mr_error_at) when given. */
mr_status mr_error_vset_file(mr_error *err, mr_status code, const char *file, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* Sets code + a formatted message unless already set, and the position
 * (file may be NULL: a value of millrace.yaml whose file the caller adds;
 * line 0: no position). Returns code. */
mr_status mr_error_set_at(mr_error *err, const char *file, long line, long col, mr_status code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Context setters: they fill a field only when it is still empty. */
void mr_error_at(mr_error *err, const char *file, long line, long col);
void mr_error_key(mr_error *err, const char *key);
void mr_error_stage(mr_error *err, const char *stage);
void mr_error_hint(mr_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Formats "file:line:col: [stage 'x': ]msg" ("file: row N: ..." when only
 * the row is known; the file is left out when msg already starts with it)
 * into buf, always NUL-terminated (truncated to buf_len). No hint. */
void mr_error_format(const mr_error *err, char *buf, size_t buf_len);

/* A broken invariant (never bad input): prints file:line to stderr and aborts. */
#define MR_ASSERT(cond)                                                          \
    do {                                                                         \
        if (!(cond)) mr__assert_fail(#cond, __FILE__, __LINE__);                 \
    } while (0)
_Noreturn void mr__assert_fail(const char *expr, const char *file, int line);

/* ---- allocation --------------------------------------------------------
 * All allocation goes through these; everything they return is freed with
 * mr_free. They return NULL only when the allocator failed (or the test
 * hook made it fail); a size of 0 still gives a unique block. Thread-safe. */
void *mr_malloc(size_t n);
void *mr_calloc(size_t count, size_t size); /* overflow-checked: NULL when count * size overflows */
void *mr_realloc(void *p, size_t n);        /* returns the new block (p is dead); on failure NULL and p stays valid */
void mr_free(void *p);                      /* NULL is a no-op */
char *mr_strdup(const char *s);             /* NULL for s NULL */
char *mr_strndup(const char *s, size_t n);  /* s[0..n) + NUL */
char *mr_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Allocation-failure injection, for tests (tests/unit/mr_test.h drives it;
 * docs/architecture.md, "Allocation-failure torture"). Thread-safe; off, it
 * costs one relaxed atomic load per allocation.
 * mr_alloc_fault_arm: from now on every allocation call (mr_malloc,
 * mr_calloc, mr_realloc and everything built on them, jansson's
 * allocations included) is counted; the nth fails, and with persist every
 * one after it too; nth 0 only counts. Re-arming resets the counters.
 * mr_alloc_fault_disarm stops counting and failing and keeps the counters:
 * seen is the number of calls since armed, failed how many of them the hook
 * failed, nomem_errors how many MR_E_NOMEM errors the library recorded
 * (MR_ERR and the other mr_error setters, err NULL included) meanwhile. */
void mr_alloc_fault_arm(uint64_t nth, int persist);
void mr_alloc_fault_disarm(void);
uint64_t mr_alloc_fault_seen(void);
uint64_t mr_alloc_fault_failed(void);
uint64_t mr_alloc_fault_nomem_errors(void);
/* How many allocations (mr_malloc, mr_calloc, mr_realloc; injected or real
 * failures) returned NULL in the calling thread so far. A caller of a
 * library that reports out-of-memory as something else compares it before
 * and after the call: jansson's parser then says "invalid token", or
 * returns a document with a character of a string dropped (its lexer
 * ignores a failed append), so any failure during a parse means the result
 * is out of memory, whatever the parser returned. */
uint64_t mr_alloc_failures_here(void);
/* Parses len bytes of JSON with jansson (flags as json_loadb's) into *out,
 * telling out-of-memory from bad text, which jansson does not: MR_E_NOMEM
 * when an allocation failed during the parse (whatever jansson returned),
 * MR_E_PARSE naming `what`, jansson's line and column and its message
 * otherwise. *out is NULL unless MR_OK. */
struct json_t;
mr_status mr_json_parse(const char *text, size_t len, size_t flags, struct json_t **out, const char *what,
                        mr_error *err);
/* A second, independent hook for hand-written OOM loops: the Nth
 * allocation from now fails, once (0 disables). Not counted in failed. */
void mr_alloc_fail_after(long n);

/* Growable byte buffer with a hard cap, in caller storage: mr_buf_init,
 * appends, mr_buf_free (which frees data and leaves an empty buffer). Every
 * append returns MR_OK, MR_E_LIMIT (it would pass limit; nothing is
 * appended) or MR_E_NOMEM (nothing appended), and sets no mr_error. A
 * pointer into data is dead after the next append (it may move). Take the
 * bytes with data (caller frees with mr_free) and re-init the buffer. */
typedef struct mr_buf {
    char *data;   /* NUL-terminated while len < cap */
    size_t len;   /* bytes used */
    size_t cap;   /* bytes allocated */
    size_t limit; /* hard cap; 0 = 1 GiB */
    mr_status failed; /* the first append that failed (MR_E_NOMEM, MR_E_LIMIT), kept until
                       * mr_buf_free: code building a document with many appends (a server
                       * response) checks it once, at the end, instead of every call */
} mr_buf;
void mr_buf_init(mr_buf *b);
void mr_buf_free(mr_buf *b);
mr_status mr_buf_append(mr_buf *b, const void *p, size_t n);
mr_status mr_buf_puts(mr_buf *b, const char *s);
mr_status mr_buf_printf(mr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3))); /* MR_E_INVALID_ARG: an encoding error */
/* Appends s as a JSON string literal (quoted and escaped; bytes >= 0x80 as they are). */
mr_status mr_buf_json_str(mr_buf *b, const char *s);
/* Appending little-endian encoders (MR_E_NOMEM / MR_E_LIMIT from the buffer). */
mr_status mr_buf_put_u8(mr_buf *b, uint8_t v);
mr_status mr_buf_put_u16(mr_buf *b, uint16_t v);
mr_status mr_buf_put_u32(mr_buf *b, uint32_t v);
mr_status mr_buf_put_u64(mr_buf *b, uint64_t v);
mr_status mr_buf_put_f64(mr_buf *b, double v);   /* the IEEE-754 bits as u64 */
mr_status mr_buf_put_str(mr_buf *b, const char *s); /* u32 length + bytes (NULL = "") */

/* A bounds-checked little-endian reader over borrowed bytes (p must
 * outlive it; caller storage, nothing to free). A read past the end returns
 * 0 / NULL and sets `bad`, which stays set: decode a whole record, then
 * check bad once. */
typedef struct mr_reader {
    const uint8_t *p;
    size_t len, pos;
    int bad;  /* sticky: a read ran past the end */
} mr_reader;
void mr_reader_init(mr_reader *r, const void *p, size_t len);
const void *mr_reader_bytes(mr_reader *r, size_t n); /* borrowed from p */
uint8_t mr_reader_u8(mr_reader *r);
uint16_t mr_reader_u16(mr_reader *r);
uint32_t mr_reader_u32(mr_reader *r);
uint64_t mr_reader_u64(mr_reader *r);
double mr_reader_f64(mr_reader *r);
char *mr_reader_str(mr_reader *r); /* u32 length + bytes, NUL-terminated copy (mr_free); NULL on bad or OOM */

/* ---- logging -----------------------------------------------------------
 * Library code never prints directly; it logs through here (stderr, one
 * line per message, below the level: dropped). The CLI sets the level and
 * whether stderr is a colour terminal, before starting threads. */
typedef enum mr_log_level { MR_LOG_DEBUG = 0, MR_LOG_INFO = 1, MR_LOG_WARN = 2, MR_LOG_ERROR = 3, MR_LOG_QUIET = 4 } mr_log_level;
void mr_log_set_level(mr_log_level lvl);
mr_log_level mr_log_get_level(void);
void mr_log_set_color(int on); /* the CLI decides from isatty + NO_COLOR */
int mr_log_color(void);
void mr_log(mr_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Also hands every message at or above min_level (without the "millrace:
 * warning: " prefix) to fn, after printing it: a stage worker collects its
 * warnings this way for the runner. NULL fn removes the sink. One sink per
 * process; set it before starting threads that log. */
typedef void (*mr_log_sink_fn)(void *ctx, mr_log_level lvl, const char *msg);
void mr_log_set_sink(mr_log_level min_level, mr_log_sink_fn fn, void *ctx);
/* Prints "millrace: error: <formatted error>" and a "hint:" line if any,
 * whatever the level (the sink does not see it). */
void mr_log_error(const mr_error *err);
/* ANSI helpers: static strings, "" when colour is off. */
const char *mr_c_bold(void);
const char *mr_c_red(void);
const char *mr_c_green(void);
const char *mr_c_yellow(void);
const char *mr_c_dim(void);
const char *mr_c_reset(void);

/* ---- progress ----------------------------------------------------------
 * On a terminal: one live line, redrawn at most 10 times a second,
 *   "label [=======>      ]  45%  1.2M rows/s  ETA 3s  detail"
 * Elsewhere: a plain line when the work starts, every 10 s, and at the end.
 * One progress line at a time per process; log lines clear it first.
 *
 *   mr_progress *p = mr_progress_begin("ingest", n_rows, "rows");
 *   for (...) mr_progress_update(p, done, NULL);
 *   mr_progress_end(p, "done");
 */
typedef struct mr_progress mr_progress;
void mr_progress_set_tty(int on); /* the CLI: isatty(2) */
int mr_progress_tty(void);
/* total 0 = unknown (no bar, no ETA). NULL on OOM (all calls accept NULL).
 * label and unit are copied. Drawn only at MR_LOG_INFO or below. */
mr_progress *mr_progress_begin(const char *label, uint64_t total, const char *unit);
void mr_progress_update(mr_progress *p, uint64_t done, const char *detail);
/* Draws the final line (on a terminal, or when final_detail is given) and
 * frees p. */
void mr_progress_end(mr_progress *p, const char *final_detail);
/* Clears the live line (before other output); the next update redraws it. */
void mr_progress_clear(void);

/* ---- "did you mean" ----------------------------------------------------
 * Levenshtein distance, and the candidate closest to word (a case-insensitive
 * exact match first, then the smallest optimal-string-alignment distance
 * within max(2, len/3)); NULL if none is close. The result is one of the
 * candidates (borrowed). Pure functions. */
size_t mr_edit_distance(const char *a, const char *b);
const char *mr_closest(const char *word, const char *const *candidates, size_t n);
/* A listening TCP socket (non-blocking, close-on-exec) on host:port: host
 * an IPv4 or IPv6 literal ("::1" or "[::1]"), "localhost", or NULL for
 * 127.0.0.1; port 0 picks a free one. *v6_out (may be NULL) 1 for IPv6;
 * shown (may be NULL) gets the address as a URL shows it ("[::1]").
 * MR_E_INVALID_ARG (not an address, a port out of range), MR_E_IO naming
 * the address and port ("port 8080 is already in use", with a hint). */
mr_status mr_net_listen(const char *host, int port, int *fd_out, int *v6_out, char *shown, size_t shown_len,
                        mr_error *err);
/* The shortest "%.Ng" text (N = 1..17) that reads back as d, for people and
 * JSON ("0.1", "1e+20"), an integral value below 1e15 as an integer ("300");
 * "nan", "inf", "-inf" for the others. buf_len >= 32. */
void mr_fmt_shortest(double d, char *buf, size_t buf_len);

/* ---- name index --------------------------------------------------------
 * A hash index from NUL-terminated names to ids in [0, 2^32 - 1): O(1)
 * expected per add, find and remove, whatever the number of names. It
 * stores ids only; the caller keeps the names and hands a function that
 * gives the name of an id (called only when the 32-bit hash tags agree), so
 * the names stay owned where they live (a table's columns, a header's
 * fields). Caller storage; not thread-safe for mutation, finds may run
 * concurrently.
 *
 *   static const char *name_of(const void *ctx, size_t id) { return ((char *const *)ctx)[id]; }
 *   mr_strindex ix;
 *   mr_strindex_init(&ix);
 *   size_t dup;
 *   for (size_t i = 0; i < n; i++) {
 *       if (mr_strindex_add(&ix, i, name_of, names, &dup) != MR_OK) ...;   // MR_E_NOMEM
 *       if (dup != SIZE_MAX) ...;              // names[i] equals names[dup]
 *   }
 *   ssize_t j = mr_strindex_find(&ix, "age", name_of, names);             // -1 if absent
 *   mr_strindex_deinit(&ix);
 */
typedef const char *(*mr_strindex_key_fn)(const void *ctx, size_t id);
typedef struct mr_strindex {
    uint64_t *slots; /* 0 = empty, else hash tag << 32 | (id + 1) */
    size_t n_slots;  /* 0 or a power of two, at least twice n */
    size_t n;        /* ids indexed */
} mr_strindex;
void mr_strindex_init(mr_strindex *ix);
void mr_strindex_deinit(mr_strindex *ix); /* frees the slots; ix is empty again */
/* Room for n ids without growing. MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_strindex_reserve(mr_strindex *ix, size_t n);
/* Indexes id under key_of(ctx, id). When an id with an equal name is
 * already indexed nothing changes and *existing_out (may be NULL) gets that
 * id; otherwise it gets SIZE_MAX. MR_E_NOMEM, MR_E_LIMIT (id too large). */
mr_status mr_strindex_add(mr_strindex *ix, size_t id, mr_strindex_key_fn key_of, const void *ctx,
                          size_t *existing_out);
/* The id indexed under key, or -1. */
ssize_t mr_strindex_find(const mr_strindex *ix, const char *key, mr_strindex_key_fn key_of, const void *ctx);
/* Unindexes id; key_of(ctx, id) must still give the name it was added
 * under (remove before renaming). 1 if it was indexed, else 0. */
int mr_strindex_remove(mr_strindex *ix, size_t id, mr_strindex_key_fn key_of, const void *ctx);
/* Unindexes every id, keeping the slots. */
void mr_strindex_clear(mr_strindex *ix);

/* ---- text from data ----------------------------------------------------
 * 1 if s[0..len) is valid UTF-8 (no overlong forms, no surrogates). */
int mr_utf8_valid(const char *s, size_t len);
/* Appends s[0..len) to out with every invalid UTF-8 sequence replaced by
 * U+FFFD, so the text can go into JSON. MR_E_NOMEM / MR_E_LIMIT. */
mr_status mr_buf_utf8_scrub(mr_buf *out, const char *s, size_t len);

/* ---- text for terminals ------------------------------------------------
 * Names, values and messages that quote them come from data, and a
 * terminal acts on some of what they may hold: ESC sequences set the title
 * or clear the screen. Everything the CLI prints from data goes through
 * one of these. Unsafe: the C0 controls (tab and newline included), DEL,
 * the C1 controls U+0080..U+009F, the bidirectional controls U+202A..U+202E
 * and U+2066..U+2069, U+2028/U+2029, and bytes that are not UTF-8. The
 * backslash is not escaped: text without unsafe characters comes out as it
 * was, and escaping escaped text changes nothing (the output is for people;
 * scripts read --json).
 *
 *   mr_buf_term_escape(&b, "a\x1b]0;pwned\x07", 10);   // a\x1b]0;pwned\x07 (visible)
 *
 * mr_term_safe: 1 if s[0..len) has nothing unsafe (then print it as it is). */
int mr_term_safe(const char *s, size_t len);
/* Appends s[0..len) with each unsafe character visible: \n \t \r, \xHH for
 * another C0 byte, DEL or a byte that is not UTF-8, \uHHHH for the others.
 * MR_E_NOMEM / MR_E_LIMIT. */
mr_status mr_buf_term_escape(mr_buf *out, const char *s, size_t len);
/* The same into buf (always NUL-terminated, cut at a character boundary);
 * returns the bytes written. On OOM, the safe prefix of s. */
size_t mr_term_escape(const char *s, char *buf, size_t buf_len);
/* Appends s[0..len) as a JSON string literal that is valid JSON and safe
 * on a terminal whatever s holds: escapes as mr_buf_json_str does, and the
 * unsafe characters above as \uHHHH; bytes that are not UTF-8 (no JSON
 * string can hold them) become U+FFFD, written \ufffd. */
mr_status mr_buf_json_text(mr_buf *out, const char *s, size_t len);
/* Copies JSON text (a document another writer made) with every unsafe
 * character written as \uHHHH (the same value to a JSON reader) and bytes
 * that are not UTF-8 as \ufffd; newlines, tabs and CRs between tokens stay. */
mr_status mr_buf_json_safe(mr_buf *out, const char *json, size_t len);

/* ---- time --------------------------------------------------------------*/
double mr_now(void);          /* monotonic seconds */
double mr_wall_time(void);    /* seconds since the epoch */
void mr_iso_time(double epoch_s, char *buf, size_t buf_len); /* "2026-11-30T11:19:15Z" (UTC); 21 bytes fit */

/* ---- hashing (xxh3-128) ------------------------------------------------*/
typedef struct mr_hash128 {
    uint64_t hi, lo;
} mr_hash128;
#define MR_HASH_HEX_LEN 32
/* A streaming hasher (new -> update... -> digest; reset starts over). One
 * thread at a time; free with mr_hasher_free (NULL is a no-op). */
typedef struct mr_hasher mr_hasher;
mr_status mr_hasher_new(mr_hasher **out, mr_error *err); /* MR_E_NOMEM */
void mr_hasher_reset(mr_hasher *h);
void mr_hasher_update(mr_hasher *h, const void *p, size_t n);
mr_hash128 mr_hasher_digest(const mr_hasher *h);
void mr_hasher_free(mr_hasher *h);
mr_hash128 mr_hash_bytes(const void *p, size_t n);
/* Hashes a whole file with large sequential reads; size_out (may be NULL)
 * gets its length. MR_E_NOT_FOUND (no such file), MR_E_IO (cannot open or
 * read; errno kept), MR_E_NOMEM; the message names the path. */
mr_status mr_hash_file(const char *path, mr_hash128 *out, uint64_t *size_out, mr_error *err);
/* Writes 32 lowercase hex digits + NUL into hex (MR_HASH_HEX_LEN + 1 bytes). */
void mr_hash_hex(mr_hash128 h, char *hex);
/* Exactly 32 lowercase hex digits; MR_E_PARSE otherwise (no mr_error). */
mr_status mr_hash_parse(const char *hex, mr_hash128 *out);
int mr_hash_eq(mr_hash128 a, mr_hash128 b);

/* ---- filesystem --------------------------------------------------------
 * Errors are MR_E_IO naming the path with errno kept, or MR_E_NOMEM, unless
 * a function says more. */
mr_status mr_fs_mkdirs(const char *path, mr_error *err);     /* mkdir -p; MR_E_IO also when path is a file */
mr_status mr_fs_rmtree(const char *path, mr_error *err);     /* rm -rf (read-only dirs too); missing is ok */
int mr_fs_exists(const char *path); /* lstat: a dangling link exists */
int mr_fs_is_dir(const char *path);
/* Reads a whole file into a NUL-terminated copy (*data_out, caller frees
 * with mr_free; len_out may be NULL). limit: bytes at most, 0 = 1 GiB;
 * a longer file is MR_E_LIMIT. MR_E_NOT_FOUND when path does not exist. */
mr_status mr_fs_read_file(const char *path, size_t limit, char **data_out, size_t *len_out,
                          mr_error *err);
/* Atomic publish of a small file: write tmp in the same dir, fsync, rename,
 * fsync the directory. Readers see the old or the new content, never a mix;
 * on failure the temporary file is removed and path is untouched. */
mr_status mr_fs_write_atomic(const char *path, const void *data, size_t len, mr_error *err);
/* Puts the file or directory at staged in the place of dest in one step:
 * with dest present, the two are exchanged (renameat2 RENAME_EXCHANGE) and
 * the old one, now at staged, is removed; without, staged is renamed to
 * dest. A reader opening dest meanwhile finds the old or the new, never
 * nothing or a mix. Both must be on one filesystem. Where the filesystem
 * cannot exchange (EINVAL), dest is removed first and then renamed over: not
 * atomic there. MR_E_IO naming the paths. */
mr_status mr_fs_swap_in(const char *staged, const char *dest, mr_error *err);
mr_status mr_fs_fsync_path(const char *path, mr_error *err);
mr_status mr_fs_fsync_dir_of(const char *path, mr_error *err);
mr_status mr_fs_copy_file(const char *src, const char *dst, mr_error *err); /* dst must not exist; removed on failure */
/* Creates a fresh private directory "parent/prefix.XXXXXX" (parent is
 * created if missing); *path_out is the caller's (mr_free). */
mr_status mr_fs_mkdtemp(const char *parent, const char *prefix, char **path_out, mr_error *err);
/* Path join: returns a new string "a/b" (b absolute, a NULL or "" -> copy
 * of b); caller frees; NULL on OOM. */
char *mr_path_join(const char *a, const char *b);
/* Lexically normalises a relative path ("./a//b/../c" -> "a/c"); NULL if it
 * escapes its root ("../x"), is empty, is absolute when !allow_abs, or on
 * OOM. Caller frees. */
char *mr_path_normalize(const char *p, int allow_abs);

/* Advisory lock on a lock file; created if missing. flock, or on a network
 * filesystem (NFS, SMB: statfs) and wherever MILLRACE_LOCKS=lease, the lease
 * protocol of lease.c: PATH.d/ of holder entries created under an O_EXCL
 * meta file, renewed while held, broken when their holder is gone
 * (MILLRACE_LOCKS=flock forces flock; docs/cluster.md). */
struct mr__lease;
typedef struct mr_flock {
    int fd;                  /* flock: the lock file, -1 when not held */
    struct mr__lease *lease; /* the lease protocol: the held entry, NULL otherwise */
} mr_flock;
#define MR_LOCK_SHARED 0
#define MR_LOCK_EXCLUSIVE 1
/* blocking: if nonzero, waits; else returns MR_E_STATE when held elsewhere
 * (code only: err is not set). inherit: if nonzero the fd is not
 * close-on-exec, so child processes keep the lock alive until they exit
 * too. MR_E_IO (cannot open or lock). lk is caller storage; release with
 * mr_flock_release (safe on a released or failed lock). */
mr_status mr_flock_acquire(mr_flock *lk, const char *path, int mode, int blocking, int inherit,
                           mr_error *err);
void mr_flock_release(mr_flock *lk);
/* lease.c: 1 when a lock file at path takes the lease protocol. */
int mr__lease_wanted(const char *path);
mr_status mr__lease_acquire(mr_flock *lk, const char *path, int mode, int blocking, int inherit, mr_error *err);
void mr__lease_release(mr_flock *lk);
void mr__lease_spawned(int child_pid); /* mr_proc_spawn's parent: inheritable leases are the child's too */
double mr__lease_seconds(void);        /* MILLRACE_LEASE_S, default 120 */

/* ---- thread pool -------------------------------------------------------
 * One pool per process (core owns it). mr_parallel_for splits [0, n) into
 * fixed-size blocks; block boundaries never depend on the thread count, so a
 * caller that writes block-indexed partials and reduces them in block order
 * gets identical results for any number of threads. Thread-safe: while one
 * job holds the workers, a call from another thread (or a nested call from
 * inside a job) runs all its blocks on the calling thread, as thread_id 0. */
typedef void (*mr_range_fn)(void *ctx, size_t begin, size_t end, int thread_id);
/* Starts the workers (n_threads in all, the caller included; 0 = number of
 * CPUs); a second call is a no-op. Main thread, before parallel work.
 * MR_E_NOMEM, MR_E_INTERNAL (a thread could not start: the pool keeps the
 * threads that did). Without a pool every job runs on its caller. */
mr_status mr_pool_init(int n_threads, mr_error *err);
int mr_pool_threads(void); /* threads a job may use, caller included; 1 without a pool */
void mr_pool_shutdown(void); /* joins the workers; no job may be running */
/* Runs fn over [0, n) in blocks of block (0 = 1) and returns when all are
 * done. fn must not fail or block on other jobs. */
void mr_parallel_for(size_t n, size_t block, mr_range_fn fn, void *ctx);
/* The same with at most max_threads threads (0 = the whole pool): the pool
 * runs min(T, blocks) lanes that pull blocks from one counter, so thread_id
 * is in [0, mr_pool_threads_capped(max_threads)) and callers can index
 * per-thread scratch with it. Block boundaries still depend only on
 * (n, block). Lanes wait on the pool's condition variables, never spin. */
void mr_parallel_for_capped(size_t n, size_t block, int max_threads, mr_range_fn fn, void *ctx);
/* min(pool threads, max_threads) (max_threads <= 0: the pool's), >= 1. */
int mr_pool_threads_capped(int max_threads);
int mr_cpu_count(void); /* the CPUs this process may run on (its affinity mask: taskset, cpusets, Slurm), >= 1 */

/* ---- child processes ---------------------------------------------------
 * One supervisor under every child millrace starts (stage workers, exec
 * commands, tune trials): fork with a setup in the child, optionally a
 * process group of its own (so a signal reaches everything the child
 * started) and death with the parent; terminate with a grace period
 * (SIGTERM, then SIGKILL); wait with resource usage (wait4).
 *
 * Example:
 *
 *   mr_proc p;
 *   mr_proc_opts o;
 *   mr_proc_opts_init(&o);
 *   o.new_group = 1;
 *   char sh[] = "sh", c[] = "-c", cmd[] = "sleep 1";
 *   char *const argv[] = {sh, c, cmd, NULL};
 *   if (mr_proc_spawn_exec(&p, &o, "/bin/sh", argv, &err) == MR_OK) {
 *       mr_proc_wait(&p, 1);                    // p.status, p.usage
 *       char why[64];
 *       if (!mr_proc_ok(&p)) {
 *           mr_proc_describe(&p, why, sizeof(why));
 *           mr_log(MR_LOG_WARN, "sleep: %s", why);
 *       }
 *   }
 *
 * An mr_proc lives in caller storage and owns nothing but the child: reap
 * it (mr_proc_wait, mr_proc_terminate) before it goes. Not thread-safe:
 * one thread of a process supervises its children. */
typedef struct mr_proc_usage {
    double user_s, sys_s;  /* CPU seconds of the child and its waited-for descendants */
    int64_t max_rss_kb;    /* peak resident set of the largest of them */
} mr_proc_usage;
typedef struct mr_proc {
    int pid;               /* the child's pid (> 0 once started) */
    int group;             /* it leads its own process group: signals go to the group */
    int exited;            /* reaped: status and usage are valid */
    int status;            /* wait status (WIFEXITED, WEXITSTATUS, WIFSIGNALED, ...) */
    mr_proc_usage usage;
} mr_proc;
typedef struct mr_proc_opts {
    int new_group;         /* setpgid(0, 0) in the child */
    int parent_death_sig;  /* 0, or the signal the child gets when its parent dies */
    int stdin_null;        /* stdin from /dev/null */
    int stdout_fd;         /* -1: inherit; else dup2'ed onto 1 */
    int stderr_fd;         /* -1: inherit; else dup2'ed onto 2 */
} mr_proc_opts;
void mr_proc_opts_init(mr_proc_opts *o); /* inherit everything, same group, no death signal */
/* Forks. The child applies o, restores SIGINT, SIGTERM and SIGPIPE to
 * their defaults, runs child(arg) and _exits with its return value; it
 * never returns into the caller's code. Stdio buffers are flushed first.
 * MR_E_IO (errno kept) when fork fails. */
mr_status mr_proc_spawn(mr_proc *p, const mr_proc_opts *o, int (*child)(void *arg), void *arg, mr_error *err);
/* The same running execv(path, argv) (no shell, no PATH search); a failed
 * exec exits 127 after a line on the child's stderr. */
mr_status mr_proc_spawn_exec(mr_proc *p, const mr_proc_opts *o, const char *path, char *const argv[],
                             mr_error *err);
/* Reaps p if it has exited; block: wait for it (EINTR retried). Returns 1
 * once reaped (also when it was already: status and usage are then set), 0
 * while it runs, -1 on error (errno; e.g. not our child). */
int mr_proc_wait(mr_proc *p, int block);
/* Reaps one exited child among procs[0..n) (NULL entries and reaped ones
 * are skipped): the one reaped, or NULL when none has exited (block: waits
 * until one does, or until a signal interrupts the wait; NULL at once when
 * none is running). */
mr_proc *mr_proc_wait_any(mr_proc *const *procs, size_t n, int block);
/* Sends sig to p (to its whole group when it leads one); no-op once reaped. */
void mr_proc_signal(const mr_proc *p, int sig);
/* SIGKILL to p's process group, also after p itself was reaped: whatever it
 * started and left behind. No-op for a child without a group of its own. */
void mr_proc_kill_group(const mr_proc *p);
/* SIGTERM to every running proc, up to grace_s for them to exit (reaped),
 * then SIGKILL to the rest, which are reaped too. On return all are reaped. */
void mr_proc_terminate(mr_proc *const *procs, size_t n, double grace_s);
/* 1 if p was reaped and exited with status 0. */
int mr_proc_ok(const mr_proc *p);
/* "exited with status 3" / "killed by signal 9 (Killed)" / "running" into
 * buf (truncated to buf_len). */
void mr_proc_describe(const mr_proc *p, char *buf, size_t buf_len);

/* Runs argv[0] (searched on PATH) with stdin from /dev/null, in a process
 * group of its own, and appends its stdout to out and its stderr to errout
 * (NULL: discarded) until it exits; *exit_code is its exit status (128+N
 * when killed by signal N). MR_E_IO when it cannot start or runs past
 * timeout_s (its group is killed then), MR_E_NOMEM. A command that is not
 * found exits 127 with a line on errout. */
mr_status mr_proc_capture(char *const argv[], double timeout_s, mr_buf *out, mr_buf *errout, int *exit_code,
                          mr_error *err);

/* ---- seeded random numbers ---------------------------------------------
 * Two generators, both pure functions of their seed (no global state):
 *  - splitmix64: a 64-bit counter through a bijective mixer. One step per
 *    call; also the stateless mixer every seeded stream is derived with
 *    (seed a stream from (seed, epoch, trial, ...) by mixing them).
 *  - mr_rng: xoshiro256** seeded by four splitmix64 steps from one seed;
 *    for long streams (shuffles, samplers).
 * Every site that draws random numbers documents how it derives its seed,
 * so its results are reproducible at any thread count. An mr_rng lives in
 * caller storage (nothing to free); one thread draws from it at a time. */
static inline uint64_t mr_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* The top 53 bits of x as a double in [0, 1). */
static inline double mr_u01(uint64_t x) { return (double)(x >> 11) * 0x1.0p-53; }
/* Uniform integer in [0, n) from one draw (multiply-shift; bias <= n / 2^64). */
static inline uint64_t mr_scale_below(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * (unsigned __int128)n) >> 64);
}

typedef struct mr_rng {
    uint64_t s[4];
} mr_rng;
void mr_rng_seed(mr_rng *r, uint64_t seed); /* the state from four splitmix64 steps of seed */
uint64_t mr_rng_next(mr_rng *r);            /* the next 64 random bits */
uint64_t mr_rng_below(mr_rng *r, uint64_t n); /* uniform in [0, n), n > 0, by rejection (no bias) */
double mr_rng_uniform(mr_rng *r);             /* [0, 1) with 53 random bits */
double mr_rng_normal(mr_rng *r);              /* standard normal (Box-Muller, one draw pair per call) */

/* ---- little-endian byte encoding ---------------------------------------
 * Every persistent binary format (model, binned matrix, features, bundle,
 * Parquet) is little-endian whatever the host. Fixed-position helpers (p
 * must hold the 2, 4 or 8 bytes; pure): */
static inline void mr_le_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void mr_le_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void mr_le_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t mr_le_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t mr_le_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t mr_le_get64(const uint8_t *p)
{
    return (uint64_t)mr_le_get32(p) | (uint64_t)mr_le_get32(p + 4) << 32;
}

#ifdef __cplusplus
}
#endif
#endif
