#define _GNU_SOURCE /* sched_setaffinity */
/* Unit tests for the core module (src/core/): the error object, mr_buf and
 * JSON escaping, path normalisation, xxh3-128 hashing, atomic writes,
 * rmtree, advisory locks, the thread pool and the allocation failure hook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>
#include <jansson.h>

#include "millrace/core.h"

#define assert_contains(hay, needle)                                                         \
    do {                                                                                     \
        if (!strstr((hay), (needle))) fail_msg("'%s' does not contain '%s'", (hay), (needle)); \
    } while (0)

/* ---- fixtures ------------------------------------------------------------ */

static char *make_tmpdir(void)
{
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/mr_core_ut.XXXXXX", mr_test_tmpdir());
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    char *copy = mr_strdup(d);
    assert_alloc(copy);
    return copy;
}

static void remove_tmpdir(char *dir)
{
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_fs_rmtree(dir, &err));
    assert_false(mr_fs_exists(dir));
    mr_free(dir);
}

static void write_file(const char *path, const char *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* Number of directory entries other than "." and "..". */
static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* ---- status and error ---------------------------------------------------- */

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(mr_status_name(MR_OK), "OK");
    assert_string_equal(mr_status_name(MR_E_NOT_FOUND), "E_NOT_FOUND");
    assert_string_equal(mr_status_str(MR_E_IO), "input/output error");
    assert_status(12, MR_E_FAILED); /* append-only numbering */
    assert_status(13, MR_E_TIMEOUT);
    assert_string_equal(mr_status_name((mr_status)999), "UNKNOWN");
}

static void test_error_first_wins(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    assert_false(mr_error_is_set(&err));
    assert_status(MR_ERR(&err, MR_E_PARSE, "bad token '%s'", "x"), MR_E_PARSE);
    assert_true(mr_error_is_set(&err));
    /* The second error returns its own code but changes nothing. */
    assert_status(MR_ERR(&err, MR_E_IO, "outer failure"), MR_E_IO);
    assert_status(MR_ERR_SYS(&err, MR_E_IO, ENOENT, "outer sys failure"), MR_E_IO);
    assert_status(err.code, MR_E_PARSE);
    assert_string_equal(err.msg, "bad token 'x'");
    assert_int_equal(err.sys_errno, 0);
    assert_alloc(err.src_file);
    assert_true(err.src_line > 0);

    /* Trailing newlines are dropped from messages. */
    mr_error_clear(&err);
    assert_false(mr_error_is_set(&err));
    MR_ERR(&err, MR_E_STATE, "line\n\n");
    assert_string_equal(err.msg, "line");

    /* A NULL error is "code only". */
    assert_status(MR_ERR(NULL, MR_E_LIMIT, "ignored"), MR_E_LIMIT);
    assert_false(mr_error_is_set(NULL));
}

static void test_error_sys_appends_strerror(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    MR_ERR_SYS(&err, MR_E_IO, ENOENT, "%s: cannot open", "data.csv");
    assert_status(err.code, MR_E_IO);
    assert_int_equal(err.sys_errno, ENOENT);
    char want[MR_ERR_MSG_MAX];
    snprintf(want, sizeof(want), "data.csv: cannot open: %s", strerror(ENOENT));
    assert_string_equal(err.msg, want);
    /* errno 0: no suffix */
    mr_error_clear(&err);
    MR_ERR_SYS(&err, MR_E_IO, 0, "plain");
    assert_string_equal(err.msg, "plain");
}

static void test_error_context_fills_empty_only(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    MR_ERR(&err, MR_E_SCHEMA, "bad key");
    mr_error_at(&err, "inner.yaml", 3, 7);
    mr_error_at(&err, "outer.yaml", 30, 70);
    assert_string_equal(err.file, "inner.yaml");
    assert_int_equal(err.line, 3);
    assert_int_equal(err.col, 7);
    mr_error_key(&err, "train.lr");
    mr_error_key(&err, "other");
    assert_string_equal(err.key, "train.lr");
    mr_error_stage(&err, "fit");
    mr_error_stage(&err, "caller");
    assert_string_equal(err.stage, "fit");
    mr_error_hint(&err, "did you mean '%s'?", "lr");
    mr_error_hint(&err, "second hint");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'lr'?"); /* the hint is best effort */

    /* A file without a position can get the position later, and a file set
     * by an outer caller does not replace nothing with something else. */
    mr_error_clear(&err);
    mr_error_at(&err, "f.yaml", 0, 0);
    assert_int_equal(err.line, 0);
    mr_error_at(&err, "g.yaml", 5, 2);
    assert_string_equal(err.file, "f.yaml");
    assert_int_equal(err.line, 5);
    assert_int_equal(err.col, 2);

    /* NULL is tolerated everywhere. */
    mr_error_at(NULL, "x", 1, 1);
    mr_error_key(NULL, "x");
    mr_error_stage(NULL, "x");
    mr_error_hint(NULL, "x");
}

static void test_error_format(void **state)
{
    (void)state;
    char buf[MR_ERR_MSG_MAX * 2];
    mr_error err;
    mr_error_init(&err);
    MR_ERR(&err, MR_E_PARSE, "unexpected ':'");
    mr_error_format(&err, buf, sizeof(buf));
    assert_string_equal(buf, "unexpected ':'");

    mr_error_at(&err, "millrace.yaml", 12, 5);
    mr_error_format(&err, buf, sizeof(buf));
    assert_string_equal(buf, "millrace.yaml:12:5: unexpected ':'");

    mr_error_stage(&err, "train");
    mr_error_format(&err, buf, sizeof(buf));
    assert_string_equal(buf, "millrace.yaml:12:5: stage 'train': unexpected ':'");

    /* line without col; data row without line */
    mr_error_clear(&err);
    MR_ERR(&err, MR_E_PARSE, "m");
    mr_error_at(&err, "a.yaml", 4, 0);
    mr_error_format(&err, buf, sizeof(buf));
    assert_string_equal(buf, "a.yaml:4: m");
    mr_error_clear(&err);
    MR_ERR(&err, MR_E_PARSE, "bad number");
    mr_error_at(&err, "d.csv", 0, 0);
    err.row = 7;
    mr_error_format(&err, buf, sizeof(buf));
    assert_string_equal(buf, "d.csv: row 7: bad number");

    /* no message: the status text */
    mr_error_clear(&err);
    err.code = MR_E_NOMEM;
    mr_error_format(&err, buf, sizeof(buf));
    assert_string_equal(buf, "out of memory");

    /* truncation keeps a NUL-terminated prefix */
    mr_error_clear(&err);
    MR_ERR(&err, MR_E_PARSE, "0123456789");
    mr_error_at(&err, "file.yaml", 1, 2);
    char small[8];
    memset(small, 'X', sizeof(small));
    mr_error_format(&err, small, sizeof(small));
    assert_string_equal(small, "file.ya");
    mr_error_format(NULL, small, sizeof(small));
    assert_string_equal(small, "");
}

/* ---- mr_buf -------------------------------------------------------------- */

static void test_buf_basic(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_append(&b, "", 0));
    assert_alloc(b.data);
    assert_string_equal(b.data, "");
    assert_ok(mr_buf_puts(&b, "abc"));
    assert_ok(mr_buf_printf(&b, "-%d-%s", 42, "x"));
    assert_string_equal(b.data, "abc-42-x");
    assert_int_equal(b.len, 8);
    /* growth across many appends keeps the content */
    for (int i = 0; i < 1000; i++) assert_ok(mr_buf_printf(&b, "%03d", i % 1000));
    assert_int_equal(b.len, 8 + 3000);
    assert_memory_equal(b.data + 8 + 3 * 999, "999", 4);
    assert_true(b.cap > b.len);
    mr_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    mr_buf_free(NULL);
}

static void test_buf_limit(void **state)
{
    (void)state;
    mr_buf b;
    /* exactly limit bytes fit; one more does not, and the buffer is unchanged */
    mr_buf_init(&b);
    b.limit = 16;
    assert_ok(mr_buf_append(&b, "0123456789abcdef", 16));
    assert_int_equal(b.len, 16);
    assert_int_equal(b.failed, MR_OK);
    assert_status(mr_buf_append(&b, "x", 1), MR_E_LIMIT);
    assert_status(mr_buf_printf(&b, "%s", "y"), MR_E_LIMIT);
    assert_int_equal(b.len, 16);
    assert_string_equal(b.data, "0123456789abcdef");
    assert_int_equal(b.failed, MR_E_LIMIT); /* sticky: the first failure */
    mr_buf_free(&b);
    assert_int_equal(b.failed, MR_OK); /* free leaves an empty, unfailed buffer */

    /* out of memory is kept the same way, and later appends do not clear it */
    if (!mr_test_torturing()) {
        mr_buf_init(&b);
        mr_alloc_fail_after(1);
        assert_status(mr_buf_puts(&b, "lost"), MR_E_NOMEM);
        assert_ok(mr_buf_puts(&b, "kept"));
        assert_string_equal(b.data, "kept");
        assert_int_equal(b.failed, MR_E_NOMEM);
        mr_buf_free(&b);
    }

    /* extra == limit on a non-empty buffer: used to pass the check through
     * unsigned wrap-around and write past the cap */
    mr_buf_init(&b);
    b.limit = 16;
    assert_ok(mr_buf_append(&b, "a", 1));
    assert_status(mr_buf_append(&b, "0123456789abcdef", 16), MR_E_LIMIT);
    assert_int_equal(b.len, 1);
    mr_buf_free(&b);

    /* the same with a limit above the first allocation: used to loop forever */
    mr_buf_init(&b);
    b.limit = 1000;
    char *big = mr_calloc(1000, 1);
    assert_alloc(big);
    memset(big, 'z', 1000);
    assert_ok(mr_buf_append(&b, "a", 1));
    assert_status(mr_buf_append(&b, big, 1000), MR_E_LIMIT);
    assert_ok(mr_buf_append(&b, big, 999));
    assert_int_equal(b.len, 1000);
    assert_status(mr_buf_append(&b, big, 1), MR_E_LIMIT);
    assert_ok(mr_buf_printf(&b, "%s", "")); /* zero bytes still fit */
    mr_free(big);
    mr_buf_free(&b);

    /* huge requests do not overflow the arithmetic */
    mr_buf_init(&b);
    assert_ok(mr_buf_append(&b, "a", 1));
    assert_status(mr_buf_append(&b, "b", SIZE_MAX), MR_E_LIMIT);
    assert_status(mr_buf_append(&b, "b", SIZE_MAX - 1), MR_E_LIMIT);
    assert_string_equal(b.data, "a");
    mr_buf_free(&b);
}

static void test_buf_json_str(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_json_str(&b, ""));
    assert_string_equal(b.data, "\"\"");
    mr_buf_free(&b);

    mr_buf_init(&b);
    assert_ok(mr_buf_json_str(&b, "a\"b\\c\n\r\t\x01\x1f\x7f/\xc3\xa9"));
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\r\\t\\u0001\\u001f\x7f/\xc3\xa9\"");
    mr_buf_free(&b);

    /* escaping respects the cap too */
    mr_buf_init(&b);
    b.limit = 8;
    assert_status(mr_buf_json_str(&b, "\n\n\n\n"), MR_E_LIMIT);
    mr_buf_free(&b);
}

/* ---- paths --------------------------------------------------------------- */

static void test_path_normalize(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int allow_abs;
        const char *want; /* NULL: rejected */
    } cases[] = {
        {"./a//b/../c", 0, "a/c"},
        {"a", 0, "a"},
        {"a/", 0, "a"},
        {"a/./b/", 0, "a/b"},
        {".", 0, "."},
        {"./", 0, "."},
        {"a/..", 0, "."},
        {"a/b/../..", 0, "."},
        {"..a/b..", 0, "..a/b.."},
        {"a/...", 0, "a/..."},
        {"..", 0, NULL},
        {"../x", 0, NULL},
        {"a/../../x", 0, NULL},
        {"a/b/../../..", 0, NULL},
        {"./../a", 0, NULL},
        {"", 0, NULL},
        {"/abs/path", 0, NULL},
        {"/abs/path", 1, "/abs/path"},
        {"//abs//./x/../y/", 1, "/abs/y"},
        {"/", 1, "/"},
        {"/a/..", 1, "/"},
        {"/..", 1, NULL},
        {"/a/../../b", 1, NULL},
        {"rel/../x", 1, "x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = mr_path_normalize(cases[i].in, cases[i].allow_abs);
        if (!cases[i].want) {
            if (got) fail_msg("normalize('%s', %d) = '%s', want NULL", cases[i].in, cases[i].allow_abs, got);
        } else {
            assert_alloc(got);
            if (!got) fail_msg("normalize('%s', %d) = NULL, want '%s'", cases[i].in, cases[i].allow_abs, cases[i].want);
            assert_string_equal(got, cases[i].want);
        }
        mr_free(got);
    }
    assert_null(mr_path_normalize(NULL, 1));
}

static void test_path_join(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b, *want;
    } cases[] = {
        {"a", "b", "a/b"}, {"a/", "b", "a/b"}, {"", "b", "b"}, {"a", "/abs", "/abs"}, {"/", "x", "/x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = mr_path_join(cases[i].a, cases[i].b);
        assert_alloc(got);
        assert_string_equal(got, cases[i].want);
        mr_free(got);
    }
    char *got = mr_path_join(NULL, "b");
    assert_alloc(got);
    assert_string_equal(got, "b");
    mr_free(got);
}

/* ---- hashing ------------------------------------------------------------- */

static void check_vector(const char *s)
{
    XXH128_hash_t ref = XXH3_128bits(s, strlen(s));
    mr_hash128 h = mr_hash_bytes(s, strlen(s));
    assert_int_equal(h.hi, ref.high64);
    assert_int_equal(h.lo, ref.low64);
    /* and the canonical (big-endian) byte form xxhsum prints is our hex */
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, ref);
    char want[33], hex[MR_HASH_HEX_LEN + 1];
    for (int i = 0; i < 16; i++) snprintf(want + 2 * i, 3, "%02x", canon.digest[i]);
    mr_hash_hex(h, hex);
    assert_string_equal(hex, want);
}

static void test_hash_known_vectors(void **state)
{
    (void)state;
    /* xxhsum is not installed here; the reference is libxxhash's XXH3_128bits
     * called directly, plus the published empty-input value of XXH128. */
    check_vector("");
    check_vector("abc");
    check_vector("The quick brown fox jumps over the lazy dog");
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(mr_hash_bytes("", 0), hex);
    assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");
    assert_false(mr_hash_eq(mr_hash_bytes("abc", 3), mr_hash_bytes("abd", 3)));
}

static void test_hash_hex_round_trip(void **state)
{
    (void)state;
    mr_hash128 h = {.hi = 0x0123456789abcdefull, .lo = 0xfedcba9876543210ull};
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(h, hex);
    assert_string_equal(hex, "0123456789abcdeffedcba9876543210");
    mr_hash128 back;
    assert_ok(mr_hash_parse(hex, &back));
    assert_true(mr_hash_eq(h, back));
    for (int i = 0; i < 64; i++) {
        char in[8];
        snprintf(in, sizeof(in), "r%d", i);
        mr_hash128 x = mr_hash_bytes(in, strlen(in)), y;
        mr_hash_hex(x, hex);
        assert_int_equal(strlen(hex), 32);
        assert_ok(mr_hash_parse(hex, &y));
        assert_int_equal(x.hi, y.hi);
        assert_int_equal(x.lo, y.lo);
    }
    /* rejected: uppercase, short, long, non-hex; *out untouched */
    mr_hash128 untouched = {1, 2};
    assert_status(mr_hash_parse("0123456789ABCDEFfedcba9876543210", &untouched), MR_E_PARSE);
    assert_status(mr_hash_parse("0123456789abcdef", &untouched), MR_E_PARSE);
    assert_status(mr_hash_parse("0123456789abcdeffedcba98765432100", &untouched), MR_E_PARSE);
    assert_status(mr_hash_parse("0123456789abcdeffedcba987654321g", &untouched), MR_E_PARSE);
    assert_status(mr_hash_parse("", &untouched), MR_E_PARSE);
    assert_int_equal(untouched.hi, 1);
    assert_int_equal(untouched.lo, 2);
}

static void test_hash_file_matches_bytes(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    mr_error err;
    mr_error_init(&err);
    /* sizes around the 1 MiB read block */
    static const size_t sizes[] = {0, 1, 4095, (size_t)1 << 20, ((size_t)3 << 20) + 17};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        char *data = mr_malloc(n);
        assert_alloc(data);
        uint32_t x = 2463534242u + (uint32_t)k; /* xorshift32, fixed seed */
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            data[i] = (char)(x & 0xff);
        }
        char *path = mr_asprintf("%s/f%zu", dir, k);
        assert_alloc(path);
        write_file(path, data, n, 0644);
        mr_hash128 h;
        uint64_t size = 12345;
        assert_ok(mr_hash_file(path, &h, &size, &err));
        assert_int_equal(size, n);
        assert_true(mr_hash_eq(h, mr_hash_bytes(data, n)));
        assert_ok(mr_hash_file(path, &h, NULL, &err));

        /* the streaming hasher in uneven chunks gives the same digest */
        mr_hasher *hs = NULL;
        assert_ok(mr_hasher_new(&hs, &err));
        mr_hasher_update(hs, "junk", 4);
        mr_hasher_reset(hs);
        for (size_t off = 0; off < n;) {
            size_t c = (off * 7 + 13) % 70001 + 1;
            if (c > n - off) c = n - off;
            mr_hasher_update(hs, data + off, c);
            off += c;
        }
        assert_true(mr_hash_eq(mr_hasher_digest(hs), h));
        mr_hasher_free(hs);
        mr_free(path);
        mr_free(data);
    }
    mr_hasher_free(NULL);

    char *missing = mr_asprintf("%s/nope.csv", dir);
    assert_alloc(missing);
    mr_hash128 h;
    assert_status(mr_hash_file(missing, &h, NULL, &err), MR_E_NOT_FOUND);
    assert_contains(err.msg, missing);
    assert_int_equal(err.sys_errno, ENOENT);
    mr_free(missing);
    mr_error_clear(&err);
    /* a directory cannot be hashed as a file */
    assert_int_not_equal(mr_hash_file(dir, &h, NULL, &err), MR_OK);
    assert_true(mr_error_is_set(&err));
    remove_tmpdir(dir);
}

/* ---- filesystem ---------------------------------------------------------- */

static void test_fs_write_atomic(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    char *path = mr_asprintf("%s/state.json", dir);
    assert_alloc(path);
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_fs_write_atomic(path, "old content, longer", 19, &err));
    assert_ok(mr_fs_write_atomic(path, "new", 3, &err));
    char *data = NULL;
    size_t len = 0;
    assert_ok(mr_fs_read_file(path, 0, &data, &len, &err));
    assert_int_equal(len, 3);
    assert_string_equal(data, "new");
    mr_free(data);
    /* the temporary file is gone: the directory holds the target only */
    assert_int_equal(count_entries(dir), 1);

    /* empty content */
    assert_ok(mr_fs_write_atomic(path, "", 0, &err));
    assert_ok(mr_fs_read_file(path, 0, &data, &len, &err));
    assert_int_equal(len, 0);
    assert_string_equal(data, "");
    mr_free(data);

    /* into a missing directory: an error naming the path, nothing left */
    char *bad = mr_asprintf("%s/missing/x.json", dir);
    assert_alloc(bad);
    assert_status(mr_fs_write_atomic(bad, "x", 1, &err), MR_E_IO);
    assert_contains(err.msg, "missing/x.json");
    assert_int_equal(count_entries(dir), 1);
    mr_free(bad);
    mr_free(path);
    remove_tmpdir(dir);
}

static void test_fs_read_file_limit(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    char *path = mr_asprintf("%s/f", dir);
    assert_alloc(path);
    write_file(path, "0123456789", 10, 0644);
    mr_error err;
    mr_error_init(&err);
    char *data = NULL;
    size_t len = 0;
    assert_ok(mr_fs_read_file(path, 10, &data, &len, &err)); /* exactly the limit */
    assert_int_equal(len, 10);
    mr_free(data);
    data = NULL;
    assert_status(mr_fs_read_file(path, 9, &data, &len, &err), MR_E_LIMIT);
    assert_null(data);
    assert_contains(err.msg, "larger than 9 bytes");
    mr_error_clear(&err);
    char *missing = mr_asprintf("%s/none", dir);
    assert_alloc(missing);
    assert_status(mr_fs_read_file(missing, 0, &data, &len, &err), MR_E_NOT_FOUND);
    mr_free(missing);
    mr_free(path);
    remove_tmpdir(dir);
}

static void test_fs_mkdirs_copy(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    mr_error err;
    mr_error_init(&err);
    char *deep = mr_asprintf("%s/a/b/c", dir);
    assert_alloc(deep);
    assert_ok(mr_fs_mkdirs(deep, &err));
    assert_true(mr_fs_is_dir(deep));
    assert_ok(mr_fs_mkdirs(deep, &err)); /* exists: fine */
    char *file = mr_asprintf("%s/a/file", dir);
    assert_alloc(file);
    write_file(file, "abc", 3, 0755);
    char *under = mr_asprintf("%s/a/file/sub", dir);
    assert_alloc(under);
    assert_int_not_equal(mr_fs_mkdirs(under, &err), MR_OK);
    mr_error_clear(&err);

    char *copy = mr_asprintf("%s/a/b/copy", dir);
    assert_alloc(copy);
    assert_ok(mr_fs_copy_file(file, copy, &err));
    struct stat sb;
    assert_int_equal(stat(copy, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0755);
    assert_int_equal(sb.st_size, 3);
    /* dst must not exist */
    assert_status(mr_fs_copy_file(file, copy, &err), MR_E_IO);
    mr_error_clear(&err);

    char *t = NULL;
    assert_ok(mr_fs_mkdtemp(dir, "job", &t, &err));
    assert_true(mr_fs_is_dir(t));
    assert_non_null(strstr(t, "/job."));
    mr_free(t);
    mr_free(deep);
    mr_free(file);
    mr_free(under);
    mr_free(copy);
    remove_tmpdir(dir);
}

static void test_fs_rmtree_read_only(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    mr_error err;
    mr_error_init(&err);
    char *root = mr_asprintf("%s/tree", dir);
    assert_alloc(root);
    char *sub = mr_asprintf("%s/tree/x/y", dir);
    assert_alloc(sub);
    assert_ok(mr_fs_mkdirs(sub, &err));
    char *f1 = mr_asprintf("%s/tree/top.txt", dir);
    assert_alloc(f1);
    char *f2 = mr_asprintf("%s/tree/x/y/leaf.bin", dir);
    assert_alloc(f2);
    write_file(f1, "1", 1, 0444);
    write_file(f2, "22", 2, 0444);
    char *link = mr_asprintf("%s/tree/x/lnk", dir);
    assert_alloc(link);
    assert_int_equal(symlink(dir, link), 0); /* must be unlinked, not followed */
    /* read-only directories, deepest first */
    char *x = mr_asprintf("%s/tree/x", dir);
    assert_alloc(x);
    assert_int_equal(chmod(sub, 0555), 0);
    assert_int_equal(chmod(x, 0555), 0);
    assert_int_equal(chmod(root, 0555), 0);

    /* root ignores permissions, so as root the removal runs in a child that
     * owns the tree and has dropped to an unprivileged uid */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0) {
            const char *paths[] = {dir, root, x, sub, f1, f2};
            for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                if (chown(paths[i], 65534, 65534) != 0) _exit(100);
            if (lchown(link, 65534, 65534) != 0) _exit(100);
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(101);
            /* really unprivileged now: writing into a 0555 dir must fail */
            char *probe = mr_path_join(root, "probe");
            assert_alloc(probe);
            int fd = open(probe, O_WRONLY | O_CREAT, 0644);
            if (fd >= 0) _exit(102);
        }
        mr_error e;
        mr_error_init(&e);
        _exit(mr_fs_rmtree(root, &e) == MR_OK ? 0 : 1);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_false(mr_fs_exists(root));
    assert_true(mr_fs_is_dir(dir)); /* the symlink's target survived */
    /* missing is ok; a single file works too */
    assert_ok(mr_fs_rmtree(root, &err));
    char *single = mr_asprintf("%s/single", dir);
    assert_alloc(single);
    write_file(single, "s", 1, 0444);
    assert_ok(mr_fs_rmtree(single, &err));
    assert_false(mr_fs_exists(single));
    assert_false(mr_error_is_set(&err));
    mr_free(root);
    mr_free(sub);
    mr_free(f1);
    mr_free(f2);
    mr_free(link);
    mr_free(x);
    mr_free(single);
    remove_tmpdir(dir);
}

/* ---- locks --------------------------------------------------------------- */

/* Forks a child that tries a non-blocking acquire; returns the child's status. */
static mr_status try_lock_in_child(const char *path, int mode)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        mr_flock lk;
        mr_status st = mr_flock_acquire(&lk, path, mode, 0, 0, NULL);
        if (st == MR_OK) mr_flock_release(&lk);
        _exit((int)st);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    return (mr_status)WEXITSTATUS(wst);
}

static void test_flock(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    char *path = mr_asprintf("%s/lock", dir);
    assert_alloc(path);
    mr_error err;
    mr_error_init(&err);
    mr_flock lk;
    assert_ok(mr_flock_acquire(&lk, path, MR_LOCK_EXCLUSIVE, 1, 0, &err));
    assert_true(lk.fd >= 0);
    assert_true(mr_fs_exists(path)); /* created */
    assert_status(try_lock_in_child(path, MR_LOCK_EXCLUSIVE), MR_E_STATE);
    assert_status(try_lock_in_child(path, MR_LOCK_SHARED), MR_E_STATE);
    mr_flock_release(&lk);
    assert_int_equal(lk.fd, -1);
    mr_flock_release(&lk); /* twice is harmless */
    assert_ok(try_lock_in_child(path, MR_LOCK_EXCLUSIVE));

    /* shared + shared is fine, shared blocks exclusive */
    assert_ok(mr_flock_acquire(&lk, path, MR_LOCK_SHARED, 0, 0, &err));
    assert_ok(try_lock_in_child(path, MR_LOCK_SHARED));
    assert_status(try_lock_in_child(path, MR_LOCK_EXCLUSIVE), MR_E_STATE);
    mr_flock_release(&lk);

    /* a lock file in a missing directory is an I/O error */
    char *bad = mr_asprintf("%s/none/lock", dir);
    assert_alloc(bad);
    assert_status(mr_flock_acquire(&lk, bad, MR_LOCK_EXCLUSIVE, 0, 0, &err), MR_E_IO);
    assert_int_equal(lk.fd, -1);
    assert_contains(err.msg, bad);
    mr_free(bad);
    mr_free(path);
    remove_tmpdir(dir);
}

/* The lease protocol (lease.c) behind the same API: PATH.d/ of entries. */
static void write_entry(const char *path, const char *host, int pid, double age_s)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "millrace-lease 1\nhost %s\npids %d\n", host, pid);
    fclose(f);
    if (age_s > 0) {
        struct timespec ts[2];
        clock_gettime(CLOCK_REALTIME, &ts[0]);
        ts[0].tv_sec -= (time_t)age_s;
        ts[1] = ts[0];
        assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
    }
}

static void test_lease_lock(void **state)
{
    (void)state;
    setenv("MILLRACE_LOCKS", "lease", 1);
    setenv("MILLRACE_HOSTNAME", "unit-host", 1);
    setenv("MILLRACE_LEASE_S", "30", 1);
    char *dir = make_tmpdir();
    char *path = mr_asprintf("%s/lock", dir), *entries = mr_asprintf("%s/lock.d", dir);
    char *dead = mr_asprintf("%s/lock.d/unit-host-999999-0.x", dir), *other = mr_asprintf("%s/lock.d/node-b-1-0.x", dir);
    assert_alloc(path);
    assert_alloc(entries);
    assert_alloc(dead);
    assert_alloc(other);
    mr_error err;
    mr_error_init(&err);
    mr_flock lk;
    assert_ok(mr_flock_acquire(&lk, path, MR_LOCK_EXCLUSIVE, 1, 0, &err));
    assert_non_null(lk.lease);
    assert_int_equal(lk.fd, -1);
    assert_true(mr_fs_is_dir(entries));
    assert_false(mr_fs_exists(path)); /* no flock file */
    assert_status(try_lock_in_child(path, MR_LOCK_EXCLUSIVE), MR_E_STATE);
    assert_status(try_lock_in_child(path, MR_LOCK_SHARED), MR_E_STATE);
    mr_flock_release(&lk);
    assert_null(lk.lease);
    mr_flock_release(&lk); /* twice is harmless */
    assert_ok(try_lock_in_child(path, MR_LOCK_EXCLUSIVE));
    /* shared + shared is fine, shared blocks exclusive */
    assert_ok(mr_flock_acquire(&lk, path, MR_LOCK_SHARED, 0, 0, &err));
    assert_ok(try_lock_in_child(path, MR_LOCK_SHARED));
    assert_status(try_lock_in_child(path, MR_LOCK_EXCLUSIVE), MR_E_STATE);
    mr_flock_release(&lk);
    /* an entry of this host whose pid is gone: broken at once */
    write_entry(dead, "unit-host", 999999, 0);
    assert_ok(mr_flock_acquire(&lk, path, MR_LOCK_EXCLUSIVE, 0, 0, &err));
    assert_false(mr_fs_exists(dead));
    mr_flock_release(&lk);
    /* another host's entry: held while renewed, broken once older than the lease */
    write_entry(other, "node-b", 1, 0);
    assert_status(mr_flock_acquire(&lk, path, MR_LOCK_EXCLUSIVE, 0, 0, &err), MR_E_STATE);
    assert_true(mr_fs_exists(other));
    write_entry(other, "node-b", 1, 31);
    assert_ok(mr_flock_acquire(&lk, path, MR_LOCK_EXCLUSIVE, 0, 0, &err));
    assert_false(mr_fs_exists(other));
    mr_flock_release(&lk);
    /* a lock in a missing directory is an I/O error */
    char *bad = mr_asprintf("%s/none/lock", dir);
    assert_alloc(bad);
    assert_status(mr_flock_acquire(&lk, bad, MR_LOCK_EXCLUSIVE, 0, 0, &err), MR_E_IO);
    assert_null(lk.lease);
    assert_contains(err.msg, bad);
    mr_free(bad);
    mr_free(path);
    mr_free(entries);
    mr_free(dead);
    mr_free(other);
    unsetenv("MILLRACE_LOCKS");
    unsetenv("MILLRACE_HOSTNAME");
    unsetenv("MILLRACE_LEASE_S");
    remove_tmpdir(dir);
}

/* ---- thread pool --------------------------------------------------------- */

typedef struct cover_ctx {
    atomic_int *hits;
    size_t n, block;
    int n_threads;
    atomic_int bad; /* a range with wrong boundaries or thread id */
} cover_ctx;

static void cover_fn(void *vctx, size_t begin, size_t end, int tid)
{
    cover_ctx *c = vctx;
    size_t want_end = begin + c->block < c->n ? begin + c->block : c->n;
    if (begin % c->block != 0 || end != want_end || tid < 0 || tid >= c->n_threads) atomic_fetch_add(&c->bad, 1);
    for (size_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void test_parallel_for_covers_once(void **state)
{
    (void)state;
    static const int threads[] = {1, 2, 4, 7};
    static const struct {
        size_t n, block;
    } shapes[] = {{0, 1}, {1, 1}, {1, 64}, {2, 1}, {10, 3}, {64, 64}, {65, 64}, {1000, 1}, {1000, 7}, {12345, 100}, {9, 0}};
    for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
        mr_error err;
        mr_error_init(&err);
        assert_ok(mr_pool_init(threads[t], &err));
        assert_int_equal(mr_pool_threads(), threads[t]);
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            size_t n = shapes[s].n;
            cover_ctx c = {.n = n, .block = shapes[s].block ? shapes[s].block : 1, .n_threads = threads[t]};
            c.hits = mr_calloc(n ? n : 1, sizeof(*c.hits));
            assert_alloc(c.hits);
            atomic_init(&c.bad, 0);
            for (size_t i = 0; i < n; i++) atomic_init(&c.hits[i], 0);
            /* several rounds reuse the same workers */
            for (int round = 0; round < 3; round++) mr_parallel_for(n, shapes[s].block, cover_fn, &c);
            for (size_t i = 0; i < n; i++)
                if (atomic_load(&c.hits[i]) != 3)
                    fail_msg("threads=%d n=%zu block=%zu: index %zu run %d times in 3 rounds", threads[t], n,
                             shapes[s].block, i, atomic_load(&c.hits[i]));
            assert_int_equal(atomic_load(&c.bad), 0);
            mr_free(c.hits);
        }
        mr_pool_shutdown();
    }
}

/* Several threads call mr_parallel_for (and the capped form) at once, and
 * every block calls it again from inside (nested): one job gets the workers,
 * the others run on their callers' threads. Each call must still cover every
 * index once, and the caller must see every block's plain (non-atomic)
 * writes once the call returns: the pool's job hand-off is the only
 * ordering between them, which is what ThreadSanitizer (make tsan) checks. */
#define N_CALLERS 4
#define CALLER_ROUNDS 25

typedef struct race_ctx {
    size_t *out;    /* out[i] = 3 * i + 1, one writer per index, plain stores */
    atomic_int bad; /* a nested call that missed an index */
} race_ctx;

static void nested_fn(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    atomic_size_t *sum = vctx;
    for (size_t i = begin; i < end; i++) atomic_fetch_add(sum, i + 1);
}

static void race_fn(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    race_ctx *c = vctx;
    atomic_size_t sum;
    atomic_init(&sum, 0);
    mr_parallel_for(16, 3, nested_fn, &sum);
    if (atomic_load(&sum) != 16 * 17 / 2) atomic_fetch_add(&c->bad, 1);
    for (size_t i = begin; i < end; i++) c->out[i] = 3 * i + 1;
}

typedef struct caller {
    pthread_t th;
    size_t n;
    int failures; /* rounds with a wrong or missing value */
} caller;

static void *caller_main(void *arg)
{
    caller *cl = arg;
    for (int round = 0; round < CALLER_ROUNDS; round++) {
        race_ctx c;
        c.out = mr_calloc(cl->n, sizeof(*c.out));
        if (!c.out) {
            if (!mr_test_fault_fired()) cl->failures++; /* the torture's failure: this round has nothing to check */
            continue;
        }
        atomic_init(&c.bad, 0);
        if (round % 2) mr_parallel_for_capped(cl->n, 5, 2, race_fn, &c);
        else mr_parallel_for(cl->n, 5, race_fn, &c);
        int ok = atomic_load(&c.bad) == 0;
        for (size_t i = 0; i < cl->n; i++)
            if (c.out[i] != 3 * i + 1) ok = 0;
        if (!ok) cl->failures++;
        mr_free(c.out);
    }
    return NULL;
}

static void test_parallel_for_concurrent_callers(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_pool_init(4, &err));
    caller callers[N_CALLERS];
    for (int k = 0; k < N_CALLERS; k++) {
        callers[k].n = 200 + 37 * (size_t)k;
        callers[k].failures = 0;
        assert_int_equal(pthread_create(&callers[k].th, NULL, caller_main, &callers[k]), 0);
    }
    for (int k = 0; k < N_CALLERS; k++) pthread_join(callers[k].th, NULL);
    for (int k = 0; k < N_CALLERS; k++)
        if (callers[k].failures)
            fail_msg("caller %d: %d of %d rounds saw a wrong value", k, callers[k].failures, CALLER_ROUNDS);
    mr_pool_shutdown();
}

typedef struct sum_ctx {
    const double *x;
    double *partial; /* one per block */
    size_t block;
} sum_ctx;

static void sum_fn(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    sum_ctx *c = vctx;
    double s = 0.0;
    for (size_t i = begin; i < end; i++) s += c->x[i] * c->x[i] + 1.0 / (double)(i + 1);
    c->partial[begin / c->block] = s;
}

static double block_sum(const double *x, size_t n, size_t block, int n_threads)
{
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_pool_init(n_threads, &err));
    size_t nb = (n + block - 1) / block;
    double *partial = mr_calloc(nb, sizeof(*partial));
    assert_alloc(partial);
    sum_ctx c = {x, partial, block};
    mr_parallel_for(n, block, sum_fn, &c);
    double total = 0.0;
    for (size_t b = 0; b < nb; b++) total += partial[b];
    mr_free(partial);
    mr_pool_shutdown();
    return total;
}

static void test_parallel_for_deterministic(void **state)
{
    (void)state;
    const size_t n = 100003, block = 1000;
    double *x = mr_calloc(n, sizeof(*x));
    assert_alloc(x);
    uint64_t s = 0x9e3779b97f4a7c15ull; /* fixed seed (splitmix64) */
    for (size_t i = 0; i < n; i++) {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = (double)(z >> 11) / 9007199254740992.0 * 200.0 - 100.0;
    }
    double r1 = block_sum(x, n, block, 1);
    double r2 = block_sum(x, n, block, 2);
    double r4 = block_sum(x, n, block, 4);
    /* bitwise equal, not merely close */
    assert_memory_equal(&r1, &r2, sizeof(double));
    assert_memory_equal(&r1, &r4, sizeof(double));
    mr_free(x);
}

/* ---- allocation ---------------------------------------------------------- */

/* The torture hook: the Nth call fails, once or from then on; counters;
 * jansson routed through it; the per-thread failure count; a forked child
 * starts disarmed. */
static void test_alloc_fault_arm(void **state)
{
    (void)state;
    if (mr_test_torturing()) return; /* the runner holds the hook */
    uint64_t here0 = mr_alloc_failures_here();
    mr_alloc_fault_arm(3, 0);
    void *a = mr_malloc(1), *b = mr_calloc(1, 1), *c = mr_malloc(1), *d = mr_realloc(NULL, 1);
    mr_alloc_fault_disarm();
    assert_non_null(a);
    assert_non_null(b);
    assert_null(c);
    assert_non_null(d); /* once: the 4th succeeds */
    assert_int_equal(mr_alloc_fault_seen(), 4);
    assert_int_equal(mr_alloc_fault_failed(), 1);
    assert_int_equal(mr_alloc_failures_here(), here0 + 1);
    void *e = mr_malloc(1); /* disarmed: not counted */
    assert_non_null(e);
    assert_int_equal(mr_alloc_fault_seen(), 4);
    mr_free(a);
    mr_free(b);
    mr_free(d);
    mr_free(e);

    mr_alloc_fault_arm(2, 1); /* persistent */
    a = mr_malloc(1);
    b = mr_malloc(1);
    c = mr_strdup("x");
    json_t *j = json_object(); /* jansson allocates through the hook */
    mr_alloc_fault_disarm();
    assert_non_null(a);
    assert_null(b);
    assert_null(c);
    assert_null(j);
    assert_int_equal(mr_alloc_fault_failed(), 3);
    mr_free(a);

    /* count only (nth 0), and the MR_E_NOMEM errors recorded meanwhile */
    mr_alloc_fault_arm(0, 0);
    a = mr_malloc(1);
    mr_error err;
    mr_error_init(&err);
    assert_status(MR_ERR(&err, MR_E_NOMEM, "out of memory"), MR_E_NOMEM);
    MR_ERR(NULL, MR_E_NOMEM, "not recorded in an object, still counted");
    MR_ERR(NULL, MR_E_IO, "not out of memory");
    mr_alloc_fault_disarm();
    assert_non_null(a);
    mr_free(a);
    assert_int_equal(mr_alloc_fault_seen(), 1);
    assert_int_equal(mr_alloc_fault_failed(), 0);
    assert_int_equal(mr_alloc_fault_nomem_errors(), 2);

    /* a child forked while armed starts disarmed */
    mr_alloc_fault_arm(1, 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *x = mr_malloc(1);
        _exit(x ? 0 : 1);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_null(mr_malloc(1)); /* still armed here */
    mr_alloc_fault_disarm();
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
}

/* mr_json_parse tells an allocation that failed during the parse (which
 * jansson reports as a syntax error, or hides by dropping a character)
 * from bad text, and names the text, line and column of the latter. */
static void test_json_parse(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    json_t *j = NULL;
    const char *doc = "{\"name\": \"a long enough string value\", \"n\": [1, 2, 3]}";
    assert_ok(mr_json_parse(doc, strlen(doc), 0, &j, "doc", &err));
    assert_string_equal(json_string_value(json_object_get(j, "name")), "a long enough string value");
    json_decref(j);

    mr_error_init(&err);
    assert_status(mr_json_parse("{\"a\": 1,\n  x}", 13, 0, &j, "the cache entry", &err), MR_E_PARSE);
    assert_null(j);
    assert_non_null(strstr(err.msg, "the cache entry: invalid JSON at line 2, column"));

    if (mr_test_torturing()) return; /* the runner holds the hook */
    /* every allocation of the parse in turn: out of memory, never a
     * syntax error and never a document with a part missing */
    int fired_all = 1;
    for (long k = 1; k <= 40; k++) {
        mr_error_init(&err);
        uint64_t oom0 = mr_alloc_failures_here();
        mr_alloc_fail_after(k);
        mr_status rc = mr_json_parse(doc, strlen(doc), 0, &j, "doc", &err);
        mr_alloc_fail_after(0);
        int fired = mr_alloc_failures_here() != oom0;
        if (fired) {
            assert_status(rc, MR_E_NOMEM);
            assert_null(j);
            assert_non_null(strstr(err.msg, "out of memory reading doc"));
        } else {
            fired_all = 0;
            assert_ok(rc);
            assert_string_equal(json_string_value(json_object_get(j, "name")), "a long enough string value");
            json_decref(j);
        }
    }
    assert_false(fired_all); /* the parse makes fewer than 40 allocations: the last rounds succeed */
}

/* The default thread count follows the affinity mask (taskset, cpusets,
 * a Slurm allocation), as nproc does, not the machine's CPU count. */
static void test_cpu_count_affinity(void **state)
{
    (void)state;
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    assert_int_equal(mr_cpu_count(), CPU_COUNT(&set));
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &set)) first = c;
    assert_true(first >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* one CPU only */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(2);
        _exit(mr_cpu_count() == 1 ? 0 : 1);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
}

static void test_alloc_fail_hook(void **state)
{
    (void)state;
    mr_alloc_fail_after(1);
    assert_null(mr_malloc(16));
    void *p = mr_malloc(16); /* the hook fired once and is off again */
    assert_alloc(p);
    mr_free(p);

    mr_alloc_fail_after(3);
    void *a = mr_malloc(1), *b = mr_calloc(2, 8), *c = mr_malloc(1);
    assert_alloc(a);
    assert_alloc(b);
    assert_null(c);
    mr_free(a);
    mr_free(b);

    /* every allocator goes through the hook */
    mr_alloc_fail_after(1);
    assert_null(mr_strdup("x"));
    mr_alloc_fail_after(1);
    assert_null(mr_asprintf("%d", 1));
    mr_alloc_fail_after(1);
    assert_null(mr_calloc(1, 1));

    /* realloc failure keeps the old block */
    char *r = mr_strdup("keep");
    assert_alloc(r);
    mr_alloc_fail_after(1);
    assert_null(mr_realloc(r, 1 << 20));
    assert_string_equal(r, "keep");
    mr_free(r);

    /* mr_buf reports NOMEM and stays valid */
    mr_buf buf;
    mr_buf_init(&buf);
    assert_ok(mr_buf_puts(&buf, "abc"));
    char big[200];
    memset(big, 'q', sizeof(big));
    mr_alloc_fail_after(1);
    assert_status(mr_buf_append(&buf, big, sizeof(big)), MR_E_NOMEM);
    assert_string_equal(buf.data, "abc");
    assert_int_equal(buf.len, 3);
    mr_buf_free(&buf);

    /* fallible functions turn it into MR_E_NOMEM with a message */
    mr_error err;
    mr_error_init(&err);
    mr_hasher *h = NULL;
    mr_alloc_fail_after(1);
    assert_status(mr_hasher_new(&h, &err), MR_E_NOMEM);
    assert_null(h);
    assert_status(err.code, MR_E_NOMEM);

    /* 0 disables */
    mr_alloc_fail_after(2);
    mr_alloc_fail_after(0);
    for (int i = 0; i < 4; i++) {
        void *q = mr_malloc(8);
        assert_alloc(q);
        mr_free(q);
    }
    /* overflow is refused without the hook */
    assert_null(mr_calloc(SIZE_MAX / 2, 4));
}

/* ---- time ---------------------------------------------------------------- */

static void test_iso_time(void **state)
{
    (void)state;
    char buf[32];
    mr_iso_time(0.0, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    mr_iso_time(1796037555.0, buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-30T11:19:15Z");
}

/* ---- process supervisor ------------------------------------------------------- */

static int child_exit_code(void *arg) { return *(int *)arg; }

/* A process is gone when it no longer exists or is a zombie nobody reaped. */
static int proc_gone(long pid)
{
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

static void test_proc_spawn_wait_describe(void **state)
{
    (void)state;
    mr_proc p;
    mr_error err;
    mr_error_init(&err);
    int code = 7;
    assert_ok(mr_proc_spawn(&p, NULL, child_exit_code, &code, &err));
    assert_int_equal(mr_proc_wait(&p, 1), 1);
    assert_int_equal(mr_proc_wait(&p, 1), 1); /* reaped once, stays reaped */
    assert_false(mr_proc_ok(&p));
    char why[96];
    mr_proc_describe(&p, why, sizeof(why));
    assert_string_equal(why, "exited with status 7");
    /* exec with a usage report, and a missing program (127) */
    char *const argv[] = {"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", NULL};
    assert_ok(mr_proc_spawn_exec(&p, NULL, "/bin/sh", argv, &err));
    assert_int_equal(mr_proc_wait(&p, 1), 1);
    assert_true(mr_proc_ok(&p));
    assert_true(p.usage.user_s + p.usage.sys_s > 0);
    assert_true(p.usage.max_rss_kb > 0);
    char *const none[] = {"nope", NULL};
    mr_proc_opts o;
    mr_proc_opts_init(&o);
    o.stderr_fd = open("/dev/null", O_WRONLY);
    assert_ok(mr_proc_spawn_exec(&p, &o, "/nonexistent/program", none, &err));
    close(o.stderr_fd);
    assert_int_equal(mr_proc_wait(&p, 1), 1);
    mr_proc_describe(&p, why, sizeof(why));
    assert_string_equal(why, "exited with status 127");
}

/* The pid a child shell writes to PATH, waiting up to 5 s for it; 0 if none. */
static long read_pid_file(const char *path)
{
    long pid = 0;
    for (int k = 0; k < 500 && pid <= 0; k++) {
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &pid) != 1) pid = 0;
            fclose(f);
        }
        if (pid <= 0) usleep(10000);
    }
    return pid;
}

/* A child leading its own group takes what it started down with it; the
 * grace period lets a TERM-handling child exit cleanly, and a child that
 * ignores TERM is killed after it. */
static void test_proc_groups_and_terminate(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_proc_opts o;
    mr_proc_opts_init(&o);
    o.new_group = 1;
    char pidfile[400];
    snprintf(pidfile, sizeof pidfile, "%s/millrace-test-proc.XXXXXX", mr_test_tmpdir());
    int fd = mkstemp(pidfile);
    assert_true(fd >= 0);
    close(fd);
    char script[512];
    snprintf(script, sizeof(script), "sleep 30 & echo $! > %s; wait", pidfile);
    char *const argv[] = {"sh", "-c", script, NULL};
    mr_proc a, b;
    assert_ok(mr_proc_spawn_exec(&a, &o, "/bin/sh", argv, &err));
    /* b says when its trap is set: a TERM that came before it would kill b
     * with SIGTERM, and the test would fail whenever b's shell starts late */
    char readyfile[400];
    snprintf(readyfile, sizeof readyfile, "%s/millrace-test-proc.XXXXXX", mr_test_tmpdir());
    fd = mkstemp(readyfile);
    assert_true(fd >= 0);
    close(fd);
    char stubborn_script[512];
    snprintf(stubborn_script, sizeof(stubborn_script), "trap '' TERM; echo $$ > %s; sleep 30", readyfile);
    char *const stubborn[] = {"sh", "-c", stubborn_script, NULL};
    assert_ok(mr_proc_spawn_exec(&b, &o, "/bin/sh", stubborn, &err));
    /* wait until the grandchild exists and b ignores TERM */
    long gpid = read_pid_file(pidfile);
    assert_true(gpid > 0);
    assert_true(read_pid_file(readyfile) > 0);
    unlink(readyfile);
    assert_null(mr_proc_wait_any((mr_proc *[]){&a, &b}, 2, 0)); /* both still run */
    double t0 = mr_now();
    mr_proc *procs[] = {&a, &b, NULL};
    mr_proc_terminate(procs, 3, 0.3);
    double took = mr_now() - t0;
    assert_true(a.exited && b.exited);
    assert_true(WIFSIGNALED(a.status) && WTERMSIG(a.status) == SIGTERM);
    assert_true(WIFSIGNALED(b.status) && WTERMSIG(b.status) == SIGKILL); /* ignored TERM: killed after the grace */
    assert_true(took >= 0.3);
    /* the grandchild got the group's SIGTERM too */
    int gone = 0;
    for (int k = 0; k < 500 && !gone; k++) {
        gone = proc_gone(gpid);
        if (!gone) {
            waitpid(-1, NULL, WNOHANG);
            usleep(10000);
        }
    }
    assert_true(gone);
    unlink(pidfile);
    /* wait_any returns the one that exits; NULL when nothing runs */
    int fast = 0, slow = 3;
    mr_proc c1, c2;
    char *const sl[] = {"sh", "-c", "sleep 0.2; exit 3", NULL};
    assert_ok(mr_proc_spawn_exec(&c2, NULL, "/bin/sh", sl, &err));
    assert_ok(mr_proc_spawn(&c1, NULL, child_exit_code, &fast, &err));
    mr_proc *two[] = {&c2, &c1};
    assert_ptr_equal(mr_proc_wait_any(two, 2, 1), &c1);
    assert_ptr_equal(mr_proc_wait_any(two, 2, 1), &c2);
    assert_int_equal(WEXITSTATUS(c2.status), slow);
    assert_null(mr_proc_wait_any(two, 2, 1));
}

/* ---- name index ------------------------------------------------------------ */

typedef struct names_ctx {
    char **names;
    size_t calls; /* key_of calls: each one is one name fetched for a comparison (or an add) */
} names_ctx;

static const char *counted_name(const void *ctx, size_t id)
{
    names_ctx *c = (names_ctx *)(uintptr_t)ctx;
    c->calls++;
    return c->names[id];
}

/* 200,000 distinct names: every add and every find fetches about one name,
 * so the work is linear in the number of names (a list scan would fetch
 * n^2 / 2 = 2e10 of them). */
static void test_strindex_linear(void **state)
{
    (void)state;
    const size_t n = 200000;
    names_ctx c = {mr_calloc(n, sizeof(char *)), 0};
    assert_alloc(c.names);
    for (size_t i = 0; i < n; i++) {
        c.names[i] = mr_asprintf("col_%zu", i);
        assert_alloc(c.names[i]);
    }
    mr_strindex ix;
    mr_strindex_init(&ix);
    for (size_t i = 0; i < n; i++) {
        size_t dup;
        assert_ok(mr_strindex_add(&ix, i, counted_name, &c, &dup));
        assert_int_equal(dup, SIZE_MAX);
    }
    assert_int_equal(ix.n, n);
    assert_true(ix.n_slots >= 2 * n); /* load factor at most 1/2 */
    size_t add_calls = c.calls;
    /* one fetch per add (the new name) plus the rare 32-bit tag collision */
    if (add_calls > n + n / 100) fail_msg("%zu adds fetched %zu names", n, add_calls);
    c.calls = 0;
    for (size_t i = 0; i < n; i++) assert_int_equal(mr_strindex_find(&ix, c.names[i], counted_name, &c), (ssize_t)i);
    if (c.calls > n + n / 100) fail_msg("%zu finds fetched %zu names", n, c.calls);
    c.calls = 0;
    assert_int_equal(mr_strindex_find(&ix, "col_200000", counted_name, &c), -1);
    assert_int_equal(mr_strindex_find(&ix, "", counted_name, &c), -1);
    assert_true(c.calls <= 2);
    /* a duplicate is reported with the id that holds the name, and not added */
    char *again = mr_strdup("col_4242");
    assert_alloc(again);
    char **grown = mr_realloc(c.names, (n + 1) * sizeof(char *));
    assert_alloc(grown);
    c.names = grown;
    c.names[n] = again;
    size_t dup;
    assert_ok(mr_strindex_add(&ix, n, counted_name, &c, &dup));
    assert_int_equal(dup, 4242);
    assert_int_equal(ix.n, n);
    mr_strindex_deinit(&ix);
    for (size_t i = 0; i <= n; i++) mr_free(c.names[i]);
    mr_free(c.names);
}

/* Random adds and removes against a plain array model, in a small index so
 * that probe runs wrap around the end and removals shift runs back. */
static void test_strindex_matches_model(void **state)
{
    (void)state;
    enum { KEYS = 12, STEPS = 20000 };
    char *names[KEYS];
    for (size_t k = 0; k < KEYS; k++) {
        names[k] = mr_asprintf("k%zu", k * 7919);
        assert_alloc(names[k]);
    }
    names_ctx c = {names, 0};
    int in[KEYS] = {0};
    mr_strindex ix;
    mr_strindex_init(&ix);
    uint64_t seed = 42;
    for (size_t step = 0; step < STEPS; step++) {
        size_t k = (size_t)(mr_splitmix64(&seed) % KEYS);
        if (in[k]) {
            assert_int_equal(mr_strindex_remove(&ix, k, counted_name, &c), 1);
            in[k] = 0;
        } else {
            size_t dup;
            assert_ok(mr_strindex_add(&ix, k, counted_name, &c, &dup));
            assert_int_equal(dup, SIZE_MAX);
            in[k] = 1;
        }
        size_t n_in = 0;
        for (size_t q = 0; q < KEYS; q++) {
            n_in += (size_t)in[q];
            ssize_t want = in[q] ? (ssize_t)q : -1;
            if (mr_strindex_find(&ix, names[q], counted_name, &c) != want)
                fail_msg("step %zu (seed 42): '%s' expected %zd", step, names[q], want);
        }
        assert_int_equal(ix.n, n_in);
        assert_true(ix.n_slots <= 32); /* 12 names never need more: runs wrap around */
    }
    assert_int_equal(mr_strindex_remove(&ix, 0, counted_name, &c), in[0]);
    mr_strindex_clear(&ix);
    assert_int_equal(mr_strindex_find(&ix, names[1], counted_name, &c), -1);
    mr_strindex_deinit(&ix);
    for (size_t k = 0; k < KEYS; k++) mr_free(names[k]);
}

/* ---- text for terminals and JSON ---------------------------------------------- */

static void check_term(const char *in, size_t len, const char *want)
{
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_buf_term_escape(&b, in, len));
    assert_string_equal(b.data ? b.data : "", want);
    assert_int_equal(mr_term_safe(in, len), !strcmp(want, b.data ? b.data : "") && len == strlen(want));
    /* escaping escaped text changes nothing */
    mr_buf c;
    mr_buf_init(&c);
    assert_ok(mr_buf_term_escape(&c, b.data ? b.data : "", b.len));
    assert_string_equal(c.data ? c.data : "", want);
    assert_true(mr_term_safe(b.data ? b.data : "", b.len));
    mr_buf_free(&b);
    mr_buf_free(&c);
}

#define CHECK_TERM(in, want) check_term((in), sizeof(in) - 1, (want))

/* mr_term_escape has no status: out of memory keeps the safe ASCII prefix
 * (core.h), which torture accepts once an allocation failed. */
static size_t term_escape(const char *s, char *buf, size_t buf_len)
{
    uint64_t oom0 = mr_alloc_failures_here();
    size_t n = mr_term_escape(s, buf, buf_len);
    mr_test_accept_if_oom(oom0);
    return n;
}

static void test_term_escape(void **state)
{
    (void)state;
    CHECK_TERM("plain ascii, caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac, \\ backslash", "plain ascii, caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac, \\ backslash");
    CHECK_TERM("\x1b]0;title\x07\x1b[2J", "\\x1b]0;title\\x07\\x1b[2J");
    CHECK_TERM("a\nb\tc\rd", "a\\nb\\tc\\rd");
    CHECK_TERM("nul\0x", "nul\\x00x");
    CHECK_TERM("del\x7f", "del\\x7f");
    CHECK_TERM("c1 \xc2\x9b csi", "c1 \\u009b csi");   /* U+009B */
    CHECK_TERM("\xe2\x80\xaertl", "\\u202ertl");       /* RIGHT-TO-LEFT OVERRIDE */
    CHECK_TERM("\xe2\x81\xa6iso", "\\u2066iso");       /* LEFT-TO-RIGHT ISOLATE */
    CHECK_TERM("ls\xe2\x80\xa8", "ls\\u2028");
    CHECK_TERM("bad \xff\xfe\xc3", "bad \\xff\\xfe\\xc3"); /* not UTF-8 (a cut sequence too) */
    CHECK_TERM("\xed\xa0\x80", "\\xed\\xa0\\x80");    /* a surrogate is not UTF-8 */
    /* the fixed-buffer form cuts at a character boundary and always terminates */
    char buf[8];
    assert_int_equal(term_escape("ab\x1b", buf, sizeof(buf)), 6);
    assert_string_equal(buf, "ab\\x1b");
    assert_int_equal(term_escape("abcdef\xc3\xa9", buf, sizeof(buf)), 6); /* the 2-byte e-acute would not fit */
    assert_string_equal(buf, "abcdef");
    assert_int_equal(term_escape(NULL, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
}

static void test_json_text_and_safe(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    const char in[] = "q\"b\\ \x1b[1m\x7f \xc2\x85 \xe2\x80\xae \xff caf\xc3\xa9\n";
    assert_ok(mr_buf_json_text(&b, in, sizeof(in) - 1));
    assert_string_equal(b.data, "\"q\\\"b\\\\ \\u001b[1m\\u007f \\u0085 \\u202e \\ufffd caf\xc3\xa9\\n\"");
    assert_true(mr_utf8_valid(b.data, b.len));
    assert_true(mr_term_safe(b.data, b.len));
    /* a JSON document from another writer: only what is unsafe changes */
    const char doc[] = "{\n \"a\": \"x\xc2\x9by\",\n\t\"b\": \"\\u001b ok\", \"c\": \"\xfe\"}";
    b.len = 0;
    assert_ok(mr_buf_json_safe(&b, doc, sizeof(doc) - 1));
    assert_string_equal(b.data, "{\n \"a\": \"x\\u009by\",\n\t\"b\": \"\\u001b ok\", \"c\": \"\\ufffd\"}");
    mr_buf_free(&b);
}

/* mr_fmt_shortest: the shortest text that reads back as the same double. */
static void test_fmt_shortest(void **state)
{
    (void)state;
    char b[40];
    const double vals[] = {0.1, 1.0 / 3, 300, -2, 0, 1e20, 1e-7, 0.68421052631599999, 123456789.125, -0.5};
    const char *want[] = {"0.1", "0.3333333333333333", "300", "-2", "0", "1e+20", "1e-07", "0.684210526316",
                          "123456789.125", "-0.5"};
    for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
        mr_fmt_shortest(vals[k], b, sizeof(b));
        assert_string_equal(b, want[k]);
        assert_true(strtod(b, NULL) == vals[k]);
    }
    mr_fmt_shortest(NAN, b, sizeof(b));
    assert_string_equal(b, "nan");
    mr_fmt_shortest(-INFINITY, b, sizeof(b));
    assert_string_equal(b, "-inf");
}

/* mr_net_listen: a free port on the loopback, a busy one named, a bad host. */
static void test_net_listen(void **state)
{
    (void)state;
    int fd = -1, fd2 = -1, v6 = 1;
    char shown[64];
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_net_listen(NULL, 0, &fd, &v6, shown, sizeof(shown), &err));
    assert_true(fd >= 0);
    assert_int_equal(v6, 0);
    assert_string_equal(shown, "127.0.0.1");
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    int port = ntohs(a.sin_port);
    mr_error_init(&err);
    assert_status(mr_net_listen("localhost", port, &fd2, NULL, NULL, 0, &err), MR_E_IO);
    char want[96];
    snprintf(want, sizeof(want), "port %d is already in use", port);
    assert_non_null(strstr(err.msg, want));
    assert_int_equal(fd2, -1);
    close(fd);
    mr_error_init(&err);
    assert_status(mr_net_listen("not-an-address", 0, &fd2, NULL, NULL, 0, &err), MR_E_INVALID_ARG);
    mr_error_init(&err);
    assert_status(mr_net_listen(NULL, 70000, &fd2, NULL, NULL, 0, &err), MR_E_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fmt_shortest),
        cmocka_unit_test(test_net_listen),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_error_first_wins),
        cmocka_unit_test(test_error_sys_appends_strerror),
        cmocka_unit_test(test_error_context_fills_empty_only),
        cmocka_unit_test(test_error_format),
        cmocka_unit_test(test_buf_basic),
        cmocka_unit_test(test_buf_limit),
        cmocka_unit_test(test_buf_json_str),
        cmocka_unit_test(test_path_normalize),
        cmocka_unit_test(test_path_join),
        cmocka_unit_test(test_hash_known_vectors),
        cmocka_unit_test(test_hash_hex_round_trip),
        cmocka_unit_test(test_hash_file_matches_bytes),
        cmocka_unit_test(test_fs_write_atomic),
        cmocka_unit_test(test_fs_read_file_limit),
        cmocka_unit_test(test_fs_mkdirs_copy),
        cmocka_unit_test(test_fs_rmtree_read_only),
        cmocka_unit_test(test_flock),
        cmocka_unit_test(test_lease_lock),
        cmocka_unit_test(test_parallel_for_covers_once),
        cmocka_unit_test(test_parallel_for_deterministic),
        cmocka_unit_test(test_parallel_for_concurrent_callers),
        cmocka_unit_test(test_alloc_fail_hook),
        cmocka_unit_test(test_cpu_count_affinity),
        cmocka_unit_test(test_json_parse),
        cmocka_unit_test(test_alloc_fault_arm),
        cmocka_unit_test(test_iso_time),
        cmocka_unit_test(test_proc_spawn_wait_describe),
        cmocka_unit_test(test_proc_groups_and_terminate),
        cmocka_unit_test(test_strindex_linear),
        cmocka_unit_test(test_strindex_matches_model),
        cmocka_unit_test(test_term_escape),
        cmocka_unit_test(test_json_text_and_safe),
    };
    return mr_test_run(tests, NULL, NULL);
}
