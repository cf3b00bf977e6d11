/* xxh3-128 hashing via libxxhash: streaming hasher, whole-file hashing with
 * large sequential reads, hex encoding. */
#include "millrace/core.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

struct mr_hasher {
    XXH3_state_t *st;
};

mr_status mr_hasher_new(mr_hasher **out, mr_error *err)
{
    mr_hasher *h = mr_calloc(1, sizeof(*h));
    if (!h) return MR_ERR(err, MR_E_NOMEM, "out of memory allocating hasher");
    h->st = XXH3_createState();
    if (!h->st) {
        mr_free(h);
        return MR_ERR(err, MR_E_NOMEM, "out of memory allocating hasher");
    }
    XXH3_128bits_reset(h->st);
    *out = h;
    return MR_OK;
}

void mr_hasher_reset(mr_hasher *h) { XXH3_128bits_reset(h->st); }
void mr_hasher_update(mr_hasher *h, const void *p, size_t n) { XXH3_128bits_update(h->st, p, n); }

mr_hash128 mr_hasher_digest(const mr_hasher *h)
{
    XXH128_hash_t d = XXH3_128bits_digest(h->st);
    return (mr_hash128){.hi = d.high64, .lo = d.low64};
}

void mr_hasher_free(mr_hasher *h)
{
    if (!h) return;
    XXH3_freeState(h->st);
    mr_free(h);
}

mr_hash128 mr_hash_bytes(const void *p, size_t n)
{
    XXH128_hash_t d = XXH3_128bits(p, n);
    return (mr_hash128){.hi = d.high64, .lo = d.low64};
}

/* 1 MiB reads: large enough that syscall cost vanishes next to hashing,
 * small enough to stay in L2 on most cores. */
#define HASH_READ_BLOCK ((size_t)1 << 20)

mr_status mr_hash_file(const char *path, mr_hash128 *out, uint64_t *size_out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_hasher *h = NULL;
    char *buf = NULL;
    uint64_t total = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "%s: cannot open", path);
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    buf = mr_malloc(HASH_READ_BLOCK);
    if (!buf) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory hashing %s", path);
        goto done;
    }
    st = mr_hasher_new(&h, err);
    if (st != MR_OK) goto done;
    for (;;) {
        ssize_t n = read(fd, buf, HASH_READ_BLOCK);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: read failed", path);
            goto done;
        }
        if (n == 0) break;
        mr_hasher_update(h, buf, (size_t)n);
        total += (uint64_t)n;
    }
    *out = mr_hasher_digest(h);
    if (size_out) *size_out = total;
done:
    mr_hasher_free(h);
    mr_free(buf);
    close(fd);
    return st;
}

void mr_hash_hex(mr_hash128 h, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) hex[i] = digits[(h.hi >> (60 - 4 * i)) & 0xf];
    for (int i = 0; i < 16; i++) hex[16 + i] = digits[(h.lo >> (60 - 4 * i)) & 0xf];
    hex[32] = '\0';
}

mr_status mr_hash_parse(const char *hex, mr_hash128 *out)
{
    uint64_t v[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        char c = hex[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return MR_E_PARSE;
        v[i / 16] = (v[i / 16] << 4) | (uint64_t)d;
    }
    if (hex[32] != '\0') return MR_E_PARSE;
    out->hi = v[0];
    out->lo = v[1];
    return MR_OK;
}

int mr_hash_eq(mr_hash128 a, mr_hash128 b) { return a.hi == b.hi && a.lo == b.lo; }
