/* Filesystem helpers: mkdir -p, rm -rf, whole-file reads, atomic publish of
 * small files (tmp + fsync + rename + fsync dir), copies, advisory locks. */
#define _GNU_SOURCE
#include "millrace/core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h> /* renameat2 */
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

mr_status mr_fs_mkdirs(const char *path, mr_error *err)
{
    char *p = mr_strdup(path);
    if (!p) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n = strlen(p);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                mr_status st = MR_ERR_SYS(err, MR_E_IO, e, "%s: cannot create directory", p);
                mr_free(p);
                return st;
            }
            p[i] = c;
        }
    }
    mr_free(p);
    if (!mr_fs_is_dir(path)) return MR_ERR(err, MR_E_IO, "%s: exists and is not a directory", path);
    return MR_OK;
}

int mr_fs_exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

int mr_fs_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

mr_status mr_fs_rmtree(const char *path, mr_error *err)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return MR_OK;
        return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot stat", path);
    }
    if (!S_ISDIR(sb.st_mode)) {
        if (unlink(path) != 0 && errno != ENOENT) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot remove", path);
        return MR_OK;
    }
    /* A read-only directory (published artifact) must be made writable first. */
    chmod(path, (sb.st_mode & 07777) | S_IWUSR | S_IXUSR | S_IRUSR);
    DIR *d = opendir(path);
    if (!d) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open directory", path);
    mr_status st = MR_OK;
    struct dirent *de;
    while (st == MR_OK && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *child = mr_path_join(path, de->d_name);
        if (!child) {
            st = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        st = mr_fs_rmtree(child, err);
        mr_free(child);
    }
    closedir(d);
    if (st == MR_OK && rmdir(path) != 0 && errno != ENOENT)
        st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot remove directory", path);
    return st;
}

mr_status mr_fs_read_file(const char *path, size_t limit, char **data_out, size_t *len_out, mr_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MR_ERR_SYS(err, errno == ENOENT ? MR_E_NOT_FOUND : MR_E_IO, errno, "%s: cannot open", path);
    mr_buf b;
    mr_buf_init(&b);
    b.limit = limit;
    mr_status st = MR_OK;
    char tmp[65536];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0) {
            if (errno == EINTR) continue;
            st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: read failed", path);
            break;
        }
        if (n == 0) break;
        st = mr_buf_append(&b, tmp, (size_t)n);
        if (st != MR_OK) {
            MR_ERR(err, st, "%s: file larger than %zu bytes", path, limit);
            break;
        }
    }
    close(fd);
    if (st == MR_OK && !b.data) st = mr_buf_append(&b, "", 0);
    if (st != MR_OK) {
        mr_buf_free(&b);
        return st;
    }
    *data_out = b.data;
    if (len_out) *len_out = b.len;
    return MR_OK;
}

mr_status mr_fs_fsync_path(const char *path, mr_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open for fsync", path);
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EINVAL) return MR_ERR_SYS(err, MR_E_IO, e, "%s: fsync failed", path);
    return MR_OK;
}

mr_status mr_fs_fsync_dir_of(const char *path, mr_error *err)
{
    char *dup = mr_strdup(path);
    if (!dup) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *slash = strrchr(dup, '/');
    const char *dir = ".";
    if (slash == dup)
        dir = "/";
    else if (slash) {
        *slash = '\0';
        dir = dup;
    }
    mr_status st = mr_fs_fsync_path(dir, err);
    mr_free(dup);
    return st;
}

static mr_status write_all(int fd, const void *data, size_t len, const char *path, mr_error *err)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", path);
        }
        p += n;
        len -= (size_t)n;
    }
    return MR_OK;
}

mr_status mr_fs_write_atomic(const char *path, const void *data, size_t len, mr_error *err)
{
    char *tmp = mr_asprintf("%s.tmp.%ld", path, (long)getpid());
    if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status st = MR_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", tmp);
        goto done;
    }
    st = write_all(fd, data, len, tmp, err);
    if (st == MR_OK && fsync(fd) != 0) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: fsync failed", tmp);
    close(fd);
    if (st == MR_OK && rename(tmp, path) != 0) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", path);
    if (st == MR_OK) st = mr_fs_fsync_dir_of(path, err);
    if (st != MR_OK) unlink(tmp);
done:
    mr_free(tmp);
    return st;
}

mr_status mr_fs_copy_file(const char *src, const char *dst, mr_error *err)
{
    mr_status st = MR_OK;
    char *buf = NULL;
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open", src);
    struct stat sb;
    if (fstat(in, &sb) != 0) {
        close(in);
        return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot stat", src);
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, sb.st_mode & 0777);
    if (out < 0) {
        close(in);
        return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", dst);
    }
    const size_t block = (size_t)1 << 20;
    buf = mr_malloc(block);
    if (!buf) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (;;) {
        ssize_t n = read(in, buf, block);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: read failed", src);
            goto done;
        }
        if (n == 0) break;
        st = write_all(out, buf, (size_t)n, dst, err);
        if (st != MR_OK) goto done;
    }
done:
    mr_free(buf);
    close(in);
    if (close(out) != 0 && st == MR_OK) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: close failed", dst);
    if (st != MR_OK) unlink(dst);
    return st;
}

mr_status mr_fs_mkdtemp(const char *parent, const char *prefix, char **path_out, mr_error *err)
{
    mr_status st = mr_fs_mkdirs(parent, err);
    if (st != MR_OK) return st;
    char *tmpl = mr_asprintf("%s/%s.XXXXXX", parent, prefix);
    if (!tmpl) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (!mkdtemp(tmpl)) {
        int e = errno;
        mr_free(tmpl);
        return MR_ERR_SYS(err, MR_E_IO, e, "%s: cannot create temporary directory", parent);
    }
    *path_out = tmpl;
    return MR_OK;
}

char *mr_path_join(const char *a, const char *b)
{
    if (!a || !*a || b[0] == '/') return mr_strdup(b);
    size_t la = strlen(a);
    if (a[la - 1] == '/') return mr_asprintf("%s%s", a, b);
    return mr_asprintf("%s/%s", a, b);
}

char *mr_path_normalize(const char *p, int allow_abs)
{
    if (!p || !*p) return NULL;
    int abs = p[0] == '/';
    if (abs && !allow_abs) return NULL;
    size_t n = strlen(p);
    char *out = mr_malloc(n + 2);
    if (!out) return NULL;
    size_t o = 0;
    if (abs) out[o++] = '/';
    size_t base = o;
    const char *s = p;
    while (*s) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t len = (size_t)(e - s);
        if (len == 1 && s[0] == '.') {
            /* skip */
        } else if (len == 2 && s[0] == '.' && s[1] == '.') {
            if (o == base) {
                mr_free(out);
                return NULL;
            }
            while (o > base && out[o - 1] != '/') o--;
            if (o > base) o--;
        } else {
            if (o > base) out[o++] = '/';
            memcpy(out + o, s, len);
            o += len;
        }
        s = e;
    }
    if (o == 0) out[o++] = '.';
    out[o] = '\0';
    return out;
}

mr_status mr_flock_acquire(mr_flock *lk, const char *path, int mode, int blocking, int inherit, mr_error *err)
{
    lk->fd = -1;
    lk->lease = NULL;
    if (mr__lease_wanted(path)) return mr__lease_acquire(lk, path, mode, blocking, inherit, err);
    int fd = open(path, O_RDWR | O_CREAT | (inherit ? 0 : O_CLOEXEC), 0644);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open lock file", path);
    int op = (mode == MR_LOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH) | (blocking ? 0 : LOCK_NB);
    while (flock(fd, op) != 0) {
        if (errno == EINTR && blocking) continue;
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK || e == EINTR) return MR_E_STATE;
        return MR_ERR_SYS(err, MR_E_IO, e, "%s: cannot lock", path);
    }
    lk->fd = fd;
    return MR_OK;
}

void mr_flock_release(mr_flock *lk)
{
    if (lk && lk->lease) mr__lease_release(lk);
    if (lk && lk->fd >= 0) {
        flock(lk->fd, LOCK_UN);
        close(lk->fd);
        lk->fd = -1;
    }
}

mr_status mr_fs_swap_in(const char *staged, const char *dest, mr_error *err)
{
    struct stat st;
    if (lstat(dest, &st) != 0) {
        if (errno != ENOENT) return MR_ERR_SYS(err, MR_E_IO, errno, "cannot stat %s", dest);
        if (rename(staged, dest) != 0) return MR_ERR_SYS(err, MR_E_IO, errno, "cannot rename %s to %s", staged, dest);
        return MR_OK;
    }
    if (renameat2(AT_FDCWD, staged, AT_FDCWD, dest, RENAME_EXCHANGE) == 0) return mr_fs_rmtree(staged, err);
    if (errno != EINVAL && errno != ENOSYS)
        return MR_ERR_SYS(err, MR_E_IO, errno, "cannot exchange %s and %s", staged, dest);
    mr_status rc = mr_fs_rmtree(dest, err); /* no exchange on this filesystem */
    if (rc == MR_OK && rename(staged, dest) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "cannot rename %s to %s", staged, dest);
    return rc;
}
